"""Profiling, in this process: a model's parameter bytes and compute time per iteration (the
rate calibration's input), and the per-op profile the emulated-accelerator mode replays.

``profile_model(spec, mode, batch, image, num_classes, threads) -> (param_bytes, ms)``: one
iteration (forward, or forward + backward), median of 3 after a warm-up, ``threads`` torch
threads.

``profile_ops(spec, batch, image, num_classes, threads) -> dict`` (format
``tictac-emu-profile/1``, see emulate.py): every call of a leaf module of the real model in
forward order, with

- ``fwd_ms`` / ``fwd_inf_ms``: the time from the previous leaf call's end to this call's end
  (so work between modules, such as ``torch.cat`` or a residual add, is charged to the next
  op and the ops add up to the whole forward), with and without autograd;
- ``bwd_ms``: for the first call of a module with parameters, the time from the previous
  gradient-producing module's last gradient (or the backward's start) to this module's last
  gradient accumulation (post-accumulate-grad hooks), so the ops add up to the whole backward
  and each op's gradients become ready when they did in the real model; 0 for the others;
- ``out_features``: 1, except the last call: the model output's width;

each the median over ``repeats`` runs after one warm-up. ``emu_profile_path(...)`` names the
stored file in bench/graphs/emulated/; ``ensure_profile`` profiles when it is missing.
"""

from __future__ import annotations

import datetime
import json
import os
import statistics
import time
from typing import Any, Dict, List, Tuple

from .common import ROOT, log

PROFILE_DIR = os.path.join(ROOT, "bench", "graphs", "emulated")


def _build(spec: str, image: int, num_classes: int, threads: int):
    import torch
    from tictac.torch.train import ModelSpec
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    return ModelSpec(spec, image, num_classes)()


def _param_bytes(model) -> int:
    seen, nbytes = set(), 0
    for p in model.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            nbytes += p.numel() * p.element_size()
    return nbytes


def profile_model(spec: str, mode: str, batch: int, image: int, num_classes: int,
                  threads: int) -> Tuple[int, float]:
    import torch
    model = _build(spec, image, num_classes, threads)
    x = torch.randn(batch, 3, image, image)
    y = torch.randint(0, num_classes, (batch,))

    def once() -> float:
        t = time.perf_counter()
        if mode == "inference":
            with torch.no_grad():
                model(x)
        else:
            model.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(model(x), y).backward()
        return time.perf_counter() - t

    once()
    c = statistics.median(once() for _ in range(3))
    return _param_bytes(model), c * 1e3


def emu_profile_path(spec: str, batch: int, image: int, num_classes: int) -> str:
    name = spec.split(":")[-1]
    return os.path.join(PROFILE_DIR, f"{name}_b{batch}_i{image}_c{num_classes}.json")


def profile_ops(spec: str, batch: int, image: int, num_classes: int, threads: int,
                repeats: int = 3) -> Dict[str, Any]:
    import torch
    from torch import nn
    model = _build(spec, image, num_classes, threads)
    model.train()
    leaves = {m: n for n, m in model.named_modules() if next(m.children(), None) is None}
    pnames = {}
    for n, p in model.named_parameters():
        pnames.setdefault(id(p), n)
    params = [[n, list(p.shape), str(p.dtype).replace("torch.", ""), bool(p.requires_grad)]
              for n, p in model.named_parameters()]
    owner = {}      # param id -> owning leaf module name
    for m, n in leaves.items():
        for p in m.parameters(recurse=False):
            owner.setdefault(id(p), n)
    stray = [pnames[i] for i in pnames if i not in owner]
    if stray:
        raise ValueError(f"{spec}: parameters outside leaf modules ({stray[:3]}): the replay cannot gate them")
    calls: List[Tuple[str, float]] = []      # (module, end time) in call order
    grads: Dict[str, float] = {}             # module -> last gradient accumulation time
    state = {"on": False}

    def post(mod, _a, _o):
        if state["on"]:
            calls.append((leaves[mod], time.perf_counter()))

    def acc(p):
        if state["on"]:
            grads[owner[id(p)]] = time.perf_counter()

    hs = [m.register_forward_hook(post) for m in leaves]
    hs += [p.register_post_accumulate_grad_hook(acc) for p in model.parameters() if p.requires_grad]
    x = torch.randn(batch, 3, image, image)
    y = torch.randint(0, num_classes, (batch,))
    runs: List[Dict[str, Any]] = []
    seq = None
    out_features = None
    for r in range(repeats + 1):
        rec: Dict[str, Any] = {}
        for grad in (False, True):
            calls.clear()
            grads.clear()
            state["on"] = True
            model.zero_grad(set_to_none=True)
            t0 = time.perf_counter()
            with torch.set_grad_enabled(grad):
                out = model(x)
            t1 = time.perf_counter()
            ends = [t for _, t in calls]
            fw = [1e3 * (e - s) for s, e in zip([t0] + ends[:-1], ends)]
            if fw:
                fw[-1] += 1e3 * (t1 - ends[-1])
            names = [n for n, _ in calls]
            if seq is None:
                seq = names
                out_features = int(out.shape[-1]) if out.dim() > 1 else 1
            elif names != seq:
                raise ValueError(f"{spec}: the leaf-call sequence differs between runs")
            if grad:
                rec["fwd"] = fw
                b0 = time.perf_counter()
                nn.functional.cross_entropy(out, y).backward()
                b1 = time.perf_counter()
                bw = {}
                prev = b0
                for mod, t in sorted(grads.items(), key=lambda kv: kv[1]):
                    bw[mod] = 1e3 * (t - prev)
                    prev = t
                if bw:
                    bw[max(grads, key=grads.get)] += 1e3 * (b1 - prev)
                rec["bwd"] = bw
                rec["bwd_total"] = 1e3 * (b1 - b0)
            else:
                rec["fwd_inf"] = fw
            state["on"] = False
        if r > 0:
            runs.append(rec)
    for h in hs:
        h.remove()
    med = statistics.median
    out_calls = []
    first_bwd = set()
    for k, mod in enumerate(seq):
        c = {"module": mod, "fwd_ms": round(med(r["fwd"][k] for r in runs), 4),
             "fwd_inf_ms": round(med(r["fwd_inf"][k] for r in runs), 4), "bwd_ms": 0.0, "out_features": 1}
        if mod in runs[0]["bwd"] and mod not in first_bwd:
            first_bwd.add(mod)
            c["bwd_ms"] = round(med(r["bwd"].get(mod, 0.0) for r in runs), 4)
        out_calls.append(c)
    out_calls[-1]["out_features"] = out_features
    return {"format": "tictac-emu-profile/1", "model": spec, "batch": batch, "image_size": image,
            "num_classes": num_classes, "threads": threads, "repeats": repeats, "param_bytes": _param_bytes(model),
            "forward_ms": round(sum(c["fwd_ms"] for c in out_calls), 3),
            "forward_inference_ms": round(sum(c["fwd_inf_ms"] for c in out_calls), 3),
            "backward_ms": round(sum(c["bwd_ms"] for c in out_calls), 3),
            "measured_backward_ms": round(med(r["bwd_total"] for r in runs), 3),
            "torch": torch.__version__, "cores": os.cpu_count(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
            "params": params, "calls": out_calls}


def ensure_profile(spec: str, batch: int, image: int, num_classes: int, threads: int,
                   refresh: bool = False) -> str:
    """The stored profile's path; profiles the real model first when it is missing."""
    path = emu_profile_path(spec, batch, image, num_classes)
    if os.path.exists(path) and not refresh:
        return path
    t = time.monotonic()
    prof = profile_ops(spec, batch, image, num_classes, threads)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(prof, f, indent=0)
    log(f"profiled {spec} (batch {batch}, image {image}) op by op in {time.monotonic() - t:.0f} s: forward "
        f"{prof['forward_ms']:.0f} ms, backward {prof['backward_ms']:.0f} ms, {len(prof['calls'])} calls -> {path}")
    return path
