"""Parameter-server training or inference of a torchvision model on synthetic data.

    torchrun --nproc-per-node 3 -m tictac.torch.train --model torchvision:resnet18 \\
        --policy tac --mode training --iters 20 --warmup 5 --num-ps 1 --batch 4 --image-size 64 \\
        --optimizer sgd --lr 0.01 --log-json it.jsonl --trace trace.json

Rendezvous: env:// (torchrun's RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), or
``--init-method file:///path --rank R --world-size N``, or ``--local N`` to spawn N ranks on
this machine. Ranks 0..num_ps-1 are parameter servers, the rest workers (each with its own
seeded synthetic images and labels). Models: ``torchvision:NAME`` (weights=None, nothing is
downloaded) or ``module.path:callable``. The backend is tictac (TicTac's transport: the
policy's order is enforced at the sender) unless ``--backend gloo`` asks for the baseline (no
TicTac transport, priorities off); the summary's first line names it. Rank 0 prints the summary
(median iteration ms per worker, throughput in samples/s) and writes --log-json / --trace. Exit
status: 0 success, 1 the run failed (a peer died, a wait timed out), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
from typing import Any, Callable, Dict, List, Optional

import torch
from torch import nn

from tictac.torch import ps

_TORCHVISION_KWARGS: Dict[str, Dict[str, Any]] = {
    "inception_v3": {"aux_logits": False, "init_weights": False},
    "googlenet": {"aux_logits": False, "init_weights": False},
}


class ModelSpec:
    """A picklable model builder for a --model string."""

    def __init__(self, spec: str, image_size: int, num_classes: int):
        self.spec, self.image_size, self.num_classes = spec, image_size, num_classes
        if ":" not in spec:
            raise ValueError(f"--model must be torchvision:NAME or module.path:callable, got {spec!r}")

    def __call__(self) -> nn.Module:
        kind, name = self.spec.split(":", 1)
        if kind == "torchvision":
            import torchvision
            kw = dict(_TORCHVISION_KWARGS.get(name, {}))
            if name.startswith("vit_"):
                kw["image_size"] = self.image_size
            try:
                return torchvision.models.get_model(name, weights=None, num_classes=self.num_classes, **kw)
            except ValueError as e:
                raise ValueError(f"unknown torchvision model {name!r}: {e}") from None
        fn = getattr(importlib.import_module(kind), name)
        model = fn()
        if not isinstance(model, nn.Module):
            raise ValueError(f"{self.spec} returned {type(model).__name__}, not an nn.Module")
        return model


class SyntheticData:
    """Seeded random images and labels, one shard per worker; ``batches`` distinct batches per
    worker, cycled (so data generation stays out of the timings)."""

    def __init__(self, batch: int, image_size: int, num_classes: int, seed: int, batches: int = 2):
        self.batch, self.image_size, self.num_classes, self.seed, self.batches = batch, image_size, num_classes, seed, batches
        self._cache: Dict[Any, Any] = {}

    def __call__(self, worker: int, iteration: int):
        key = (worker, iteration % self.batches)
        if key not in self._cache:
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + 7919 * worker + key[1])
            x = torch.randn(self.batch, 3, self.image_size, self.image_size, generator=g)
            y = torch.randint(0, self.num_classes, (self.batch,), generator=g)
            self._cache[key] = (x, y)
        return self._cache[key]


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tictac.torch.train", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="torchvision:resnet18")
    p.add_argument("--policy", default="tac", choices=ps.POLICIES)
    p.add_argument("--mode", default="training", choices=("training", "inference"))
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2, help="first iterations left out of the summary")
    p.add_argument("--num-ps", type=int, default=1)
    p.add_argument("--batch", type=int, default=8, help="per worker")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--backend", default=ps.DEFAULT_BACKEND,
                   help=f"tictac (default: {ps.DEFAULT_BACKEND}), gloo (the baseline: no TicTac transport, "
                        "priorities off), or a device map such as cpu:tictac")
    p.add_argument("--optimizer", default="sgd", choices=("sgd", "adam"))
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--reduce", default="mean", choices=("mean", "sum"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-json", help="rank 0 writes one JSON line per worker per iteration here")
    p.add_argument("--trace", help="rank 0 writes a Chrome/Perfetto trace here")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds any one wait may take")
    p.add_argument("--threads", type=int, default=None, help="torch threads per rank")
    p.add_argument("--init-method", help="e.g. file:///tmp/rdv or tcp://host:port (default env://)")
    p.add_argument("--rank", type=int)
    p.add_argument("--world-size", type=int)
    p.add_argument("--local", type=int, metavar="N", help="spawn N ranks on this machine (file:// rendezvous)")
    p.add_argument("--summary-json", help="rank 0 writes the summary as JSON here")
    p.add_argument("--update", choices=("eager", "bulk"), default=os.environ.get("TICTAC_PS_UPDATE", "eager"),
                   help="training: servers update each parameter as its gradients land (eager, default) or "
                        "once after all of them (bulk); default from TICTAC_PS_UPDATE")
    p.add_argument("--quiet", action="store_true", help="no per-iteration progress")
    p.add_argument("--bandwidth", type=float, default=None, metavar="BYTES_PER_S",
                   help="link rate TAC plans with (default: TICTAC_CLUSTER_RATE, else measured)")
    a = p.parse_args(argv)
    if a.iters < 1 or not 0 <= a.warmup < a.iters:
        p.error(f"need --iters >= 1 and 0 <= --warmup < --iters (got {a.iters}, {a.warmup})")
    if a.batch < 1 or a.image_size < 1 or a.num_ps < 1:
        p.error("--batch, --image-size and --num-ps must be >= 1")
    if a.local is not None and a.local <= a.num_ps:
        p.error(f"--local {a.local} leaves no worker with --num-ps {a.num_ps}")
    try:
        ModelSpec(a.model, a.image_size, a.num_classes)
    except ValueError as e:
        p.error(str(e))
    return a


def make_config(a: argparse.Namespace) -> ps.PSConfig:
    return ps.PSConfig(num_ps=a.num_ps, mode=a.mode, policy=a.policy, iters=a.iters, warmup=a.warmup,
                       optimizer=a.optimizer, lr=a.lr, momentum=a.momentum if a.optimizer == "sgd" else 0.0,
                       weight_decay=a.weight_decay, reduce=a.reduce, timeout=a.timeout, seed=a.seed,
                       gather_params=False, log_json=a.log_json, trace=a.trace, print_progress=not a.quiet,
                       batch_size=a.batch, bandwidth_bytes_s=a.bandwidth, update=a.update)


def describe_backend(backend: str, priorities_active: bool) -> str:
    """'backend NAME (...)' for the summary; a backend without tictac is called the baseline."""
    prio = "priorities " + ("on" if priorities_active else "off")
    if "tictac" not in backend:
        return f"backend {backend} (baseline: no TicTac transport, {prio})"
    return f"backend {backend} ({prio})"


def format_summary(a: argparse.Namespace, result: ps.RunResult) -> str:
    s = result.summary
    per = ", ".join(f"rank {r}: {v:.1f}" for r, v in s.get("median_iter_ms", {}).items())
    plan = result.plan
    policy = plan.policy if plan.policy == plan.requested else f"{plan.requested} (fell back to {plan.policy})"
    tput = s.get("throughput_samples_s")
    e = s.get("median_E")
    lines = [
        f"model {a.model}, {a.mode}, policy {policy}, {describe_backend(a.backend, result.priorities_active)}, "
        f"{a.num_ps} server(s), "
        f"{len(s.get('median_iter_ms', {}))} worker(s), batch {a.batch}, image {a.image_size}",
        f"median iter ms per worker ({s.get('iterations', 0)} iterations after {a.warmup} warmup): {per}",
        f"median iter ms (slowest worker): {s.get('median_iter_ms_all', float('nan')):.1f}; straggler spread "
        f"{s.get('straggler_spread_ms', float('nan')):.1f} ms; throughput "
        f"{tput:.1f} samples/s" + (f"; median E {e:.2f}" if e is not None else "") if tput else "no measured iterations",
    ]
    return "\n".join(lines)


def _rank_main(rank: int, a: argparse.Namespace):
    """One rank's work; returns the summary dict on rank 0 (used by --local)."""
    if a.threads:
        torch.set_num_threads(a.threads)
    model_fn = ModelSpec(a.model, a.image_size, a.num_classes)
    data_fn = SyntheticData(a.batch, a.image_size, a.num_classes, a.seed)
    result = ps.run(model_fn, data_fn, make_config(a))
    if rank == 0:
        print(format_summary(a, result), flush=True)
        if a.summary_json:
            with open(a.summary_json, "w", encoding="utf-8") as f:
                json.dump({"args": vars(a), "plan": json.loads(result.plan.to_json()), "summary": result.summary,
                           "priorities_active": result.priorities_active}, f, indent=1, default=str)
        return result.summary
    return None


def main(argv: Optional[List[str]] = None) -> int:
    a = parse_args(argv)
    logging.basicConfig(level=os.environ.get("TICTAC_PS_LOG", "WARNING"), format="%(name)s: %(message)s")
    if a.local is not None:
        res = ps.launch_local(_rank_main, a.local, (a,), backend=a.backend, threads=a.threads or 1,
                              timeout=a.timeout, deadline=max(600.0, a.timeout * (a.iters + 5)))
        failed = [r for r in res if isinstance(r, ps.RankFailure)]
        for r in failed:
            print(f"tictac.torch.train: rank {r.rank} failed: {r}", file=sys.stderr)
        return 1 if failed else 0
    return run_distributed("tictac.torch.train", a, lambda rank: _rank_main(rank, a))


def run_distributed(prog: str, a: argparse.Namespace, work: Callable[[int], Any]) -> int:
    """Joins the process group (a.backend, a.init_method, a.rank, a.world_size, a.timeout), runs
    work(rank), leaves it; the exit status. 2: the group cannot be joined because of a bad value,
    1: it cannot be joined otherwise. A rank whose work raises prints the error, prefixed with
    `prog`, and exits 1 at once: no teardown, so peers waiting on it get a closed connection."""
    try:
        ps.init_distributed(a.backend, init_method=a.init_method, rank=a.rank, world_size=a.world_size,
                            timeout=a.timeout)
    except (ValueError, RuntimeError) as e:
        print(f"{prog}: cannot join the process group: {e}", file=sys.stderr)
        return 2 if isinstance(e, ValueError) else 1
    import torch.distributed as dist
    rank = dist.get_rank()
    try:
        work(rank)
    except Exception as e:
        print(f"{prog}: rank {rank}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(1)
    dist.destroy_process_group()
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
