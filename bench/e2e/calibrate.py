"""Calibration per (model, mode): the link rate (and, where the top rate is not enough, more
compute) so that the comm/compute ratio a = N / C is about --target-ratio.

N = the bytes over the busiest link per iteration / rate, and C = the compute time of one
iteration (forward, or forward + backward in training). The bytes: max(1, W/K) x parameter bytes
for parameter-server rows (the pull phase's PS uplink); 2 (W - 1) / W x parameter bytes for the
data-parallel rows (``--modes ddp``: what a ring all-reduce sends, and receives, on each worker's
link per iteration). Calibrating DDP with the PS load would give it a link W / (2 (W - 1)) x
faster than "a" says (4 workers: a = 0.375 labelled 1):

- ``--compute real``: timed in this process with --threads threads (median of 3 after a
  warm-up); where even --max-rate leaves a above the target, the per-worker batch is raised
  (up to --max-batch) and re-timed, as the paper's harness did;
- ``--compute emulated``: the sum of the stored op profile (profile.py; profiled once when
  missing); where --max-rate is not enough, the emulated device is made slower instead
  (TICTAC_EMU_SCALE = the factor, column ``emu_scale``), since a bigger batch would only
  re-scale the same replayed times.

The rate is clamped to [--min-rate, --max-rate] (whole mbit, as tc runs it).
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any, Dict, List

from .common import MIN_IMAGE, log, model_spec, rate_bytes, rate_str, short_name
from .profile import ensure_profile, profile_model


def link_load(nbytes: float, workers: int, ps: int, data_parallel: bool) -> float:
    """Bytes over the busiest link per iteration: a ring all-reduce's per-worker share for the
    data-parallel rows, the PS uplink's pull for the parameter-server rows."""
    if data_parallel:
        return 2.0 * (workers - 1) / workers * nbytes if workers > 1 else 0.0
    return max(1.0, workers / ps) * nbytes


def _rate_for(a: argparse.Namespace, load: float, c_ms: float) -> float:
    if a.no_calibrate:
        return rate_bytes(a.rate)
    want = load / (a.target_ratio * c_ms / 1e3)
    rate = min(max(want, rate_bytes(a.min_rate)), rate_bytes(a.max_rate))
    return rate_bytes(rate_str(rate))    # what tc will run at (whole mbit)


def setup_one(a: argparse.Namespace, m: str, mode: str) -> Dict[str, Any]:
    spec, name = model_spec(m), short_name(m)
    image = max(a.image_size, MIN_IMAGE.get(name, 1))
    W, K = a.workers, a.ps
    s: Dict[str, Any] = {"model": name, "spec": spec, "image": image, "mode": mode, "compute": a.compute,
                         "batch": a.batch, "emu_scale": None, "emu_profile": None}
    if a.compute == "emulated":
        s["emu_profile"] = path = ensure_profile(spec, a.batch, image, a.num_classes, a.threads)
        with open(path, encoding="utf-8") as f:
            prof = json.load(f)
        nbytes = prof["param_bytes"]
        c_ms = prof["forward_inference_ms"] if mode == "inference" else prof["forward_ms"] + prof["backward_ms"]
    else:
        nbytes, c_ms = profile_model(spec, mode, a.batch, image, a.num_classes, a.threads)
    load = link_load(nbytes, W, K, getattr(a, "data_parallel", False))
    rate = _rate_for(a, load, c_ms)
    ratio = load / rate / (c_ms / 1e3)
    top = rate >= rate_bytes(a.max_rate)
    if not a.no_calibrate and ratio > 1.05 * a.target_ratio and top:
        if a.compute == "emulated":
            s["emu_scale"] = ratio / a.target_ratio
            c_ms *= s["emu_scale"]
            ratio = load / rate / (c_ms / 1e3)
        elif a.max_batch > a.batch:
            batch = min(a.max_batch, math.ceil(a.batch * ratio / a.target_ratio))
            try:
                _, c2 = profile_model(spec, mode, batch, image, a.num_classes, a.threads)
            except Exception as e:  # e.g. out of memory: keep the batch that worked
                log(f"note: {name} {mode}: batch {batch} could not be profiled ({type(e).__name__}: {e}); "
                    f"keeping batch {a.batch}")
                batch, c2 = a.batch, c_ms
            if c2 < 1.1 * c_ms:      # compute did not grow with the batch (memory-bound layers)
                log(f"note: {name} {mode}: batch {batch} takes {c2:.0f} ms, batch {a.batch} {c_ms:.0f} ms: "
                    f"a larger batch adds no compute here; keeping batch {a.batch}")
                batch, c2 = a.batch, c_ms
            s["batch"], c_ms = batch, c2
            ratio = load / rate / (c_ms / 1e3)
    s.update({"rate_bps": rate, "a": ratio, "param_bytes": nbytes, "calib_ms": c_ms})
    clamp = ""
    if not a.no_calibrate and abs(ratio - a.target_ratio) > 0.05 * a.target_ratio:
        clamp = (f" (target {a.target_ratio:g} not reachable within [{a.min_rate}, {a.max_rate}], "
                 f"batch <= {max(a.batch, a.max_batch)})")
    note = f", batch raised to {s['batch']}/worker" if s["batch"] != a.batch else ""
    if s["emu_scale"]:
        note += f", emulated device slowed x{s['emu_scale']:.2f}"
    where = "emulated, from the op profile" if a.compute == "emulated" else f"{a.threads} thread(s), here"
    log(f"calibrate {name:>12} {mode:<9}: params {nbytes / 1e6:.1f} MB, compute {c_ms:.0f} ms/iter "
        f"({where}) -> rate {rate_str(rate)}{note}, a = {ratio:.2f}{clamp}")
    return s


def calibrate_setups(a: argparse.Namespace) -> List[Dict[str, Any]]:
    """One setup per (model, mode); a model that cannot be built gets {"error": ...}."""
    setups = []
    for m in a.models:
        name = short_name(m)
        image = max(a.image_size, MIN_IMAGE.get(name, 1))
        if image != a.image_size:
            log(f"note: {name} needs images >= {MIN_IMAGE[name]}: running it at {image}")
        for mode in a.modes:
            try:
                setups.append(setup_one(a, m, mode))
            except Exception as e:  # a model that cannot be built: say so, skip
                log(f"error: cannot build/profile {m} ({mode}, image {image}): {type(e).__name__}: {e}")
                setups.append({"model": name, "spec": model_spec(m), "image": image, "mode": mode, "error": str(e)})
    return setups
