"""Configuration of a parameter-server run."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Tuple

__all__ = ["PSConfig"]


def _env_float(name: str, default: float) -> float:
    v = os.environ.get(name)
    if v is None or v.strip() == "":
        return default
    try:
        return float(v)
    except ValueError:
        raise ValueError(f"{name} must be a number, got {v!r}") from None


def _env_bool(name: str, default: bool) -> bool:
    v = os.environ.get(name)
    if v is None or v.strip() == "":
        return default
    if v.strip().lower() in ("1", "true", "yes", "on"):
        return True
    if v.strip().lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name} must be 0 or 1, got {v!r}")

MODES = ("training", "inference")
OPTIMIZERS = ("sgd", "adam")
REDUCTIONS = ("mean", "sum")
GUARDS = ("first", "always", "off")
UPDATES = ("eager", "bulk")
PUSH_ORDERS = ("produced", "next")
UPDATE_ORDERS = ("arrival", "next")


@dataclass
class PSConfig:
    """Everything ``ps.run`` needs besides the model and the data.

    num_ps: ranks 0..num_ps-1 are servers, the others workers.
    mode: "training" (pull, forward, backward, push, server-side update) or "inference"
      (pull and forward only).
    policy: send order, one of fifo, random, layer, tic, tac.
    iters / warmup: iterations to run / how many of the first ones the summary leaves out.
    optimizer, lr, momentum, weight_decay, nesterov, betas, eps: the server-side torch.optim.
    reduce: "mean" (average workers' gradients) or "sum".
    timeout: seconds any one wait may take before it fails naming the peer.
    plan_timeout: seconds the other ranks wait for the first worker's plan (tracing, profiling).
    seed: model initialisation and the random policy.
    bandwidth_bytes_s: link rate for tac (bytes/s); else TICTAC_CLUSTER_RATE, else measured.
    loss_fn: loss(output, target) (default cross entropy).
    guard: "first" (default): in the first iteration every torch call is checked for
      parameters that have not arrived yet (a module using another module's parameter);
      they are waited for and learned for later iterations. "always" checks every
      iteration, "off" never (then only each module's own parameters gate it).
    gather_params: bring every server's final parameters to rank 0 (RunResult.params).
    log_json / trace: paths rank 0 writes (JSON lines per worker per iteration, Chrome trace).
    print_progress: the first worker prints one line per iteration.
    update: training only. "eager" (default): a server updates each parameter as soon as every
      worker's gradient of it has arrived (one optimizer per parameter: the same arithmetic as
      one optimizer over all), overlapping the update with the workers' backward pass and
      pushes; a worker announces which parameters will get a gradient before its backward
      (the parameters its loss reaches in the autograd graph). "bulk": one optimizer step
      after every gradient has arrived, the workers' masks sent after their pushes (the
      earlier protocol; exact also for parameters the loss reaches that get no gradient,
      which "eager" updates with a zero gradient and warns about). Env: TICTAC_PS_UPDATE.
    pipeline: training with update="eager" only (default True; env TICTAC_PS_PIPELINE=0 turns
      it off). A server sends each parameter's next value as soon as it has updated it, at the
      parameter's position in each worker's next order; a worker posts that receive just before
      it pushes the parameter's gradient (the backward no longer reads the parameter then) and
      pushes gradients at their parameters' positions in its next order (P3). Off: every value
      is sent at the start of the next iteration, after the worker's ready message.
    push_order: training only: the priorities of the workers' gradient pushes.
      "produced" (default; env TICTAC_PS_PUSH_ORDER): in the order the backward produces them
      (FIFO), so the server's per-parameter updates run back to back from the backward's start.
      "next": at their parameters' positions in the next iteration's order (P3): the
      earliest-needed go first, and each new gradient preempts the ones queued before it, so the
      first-produced (the last layers, the largest tensors of most CNNs) reach the server last
      and their updates queue up after the backward (docs/ps-training.md, "Push order").
    update_order: training with update="eager" only. "arrival" (default; env
      TICTAC_PS_UPDATE_ORDER): a server updates parameters in the order their last gradient
      arrived. "next": of the parameters whose gradients have all arrived, the one needed first
      in the next iteration (the smallest position over the workers' next orders) first, so
      when updates queue up (the server's CPU is the bottleneck) the first layers' new values,
      which the next forward waits for, do not wait behind the last layers' (the next forward
      starts earlier; no wall-time gain shown yet: docs/benchmarks.md).
    auto_order / min_overlap: when the first worker's median speedup bound S = min(N, C) /
      max(N, C) over the iterations up to max(0, warmup - 1) is below min_overlap (default
      0.05), every rank uses declaration order with no per-message priorities from the next
      iteration on, and says why once (auto_order.py). Env: TICTAC_PS_AUTO_ORDER (default 1),
      TICTAC_PS_MIN_OVERLAP.
    """
    num_ps: int = 1
    mode: str = "training"
    policy: str = "fifo"
    iters: int = 5
    warmup: int = 0
    optimizer: str = "sgd"
    lr: float = 0.01
    momentum: float = 0.0
    weight_decay: float = 0.0
    nesterov: bool = False
    betas: Tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    reduce: str = "mean"
    timeout: float = 60.0
    plan_timeout: Optional[float] = None
    seed: int = 0
    bandwidth_bytes_s: Optional[float] = None
    loss_fn: Optional[Callable[[Any, Any], Any]] = None
    guard: str = "first"
    gather_params: bool = True
    log_json: Optional[str] = None
    trace: Optional[str] = None
    print_progress: bool = False
    batch_size: Optional[int] = None   # only for the throughput in the summary
    update: str = field(default_factory=lambda: os.environ.get("TICTAC_PS_UPDATE", "eager"))
    pipeline: bool = field(default_factory=lambda: _env_bool("TICTAC_PS_PIPELINE", True))
    push_order: str = field(default_factory=lambda: os.environ.get("TICTAC_PS_PUSH_ORDER", "produced"))
    update_order: str = field(default_factory=lambda: os.environ.get("TICTAC_PS_UPDATE_ORDER", "arrival"))
    auto_order: bool = field(default_factory=lambda: _env_bool("TICTAC_PS_AUTO_ORDER", True))
    min_overlap: float = field(default_factory=lambda: _env_float("TICTAC_PS_MIN_OVERLAP", 0.05))

    def validate(self, world_size: int) -> None:
        from .planning import POLICIES
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.update not in UPDATES:
            raise ValueError(f"update must be one of {UPDATES} (PSConfig.update or TICTAC_PS_UPDATE), "
                             f"got {self.update!r}")
        if self.push_order not in PUSH_ORDERS:
            raise ValueError(f"push_order must be one of {PUSH_ORDERS} (PSConfig.push_order or "
                             f"TICTAC_PS_PUSH_ORDER), got {self.push_order!r}")
        if self.update_order not in UPDATE_ORDERS:
            raise ValueError(f"update_order must be one of {UPDATE_ORDERS} (PSConfig.update_order or "
                             f"TICTAC_PS_UPDATE_ORDER), got {self.update_order!r}")
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {self.policy!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.reduce not in REDUCTIONS:
            raise ValueError(f"reduce must be one of {REDUCTIONS}, got {self.reduce!r}")
        if self.guard not in GUARDS:
            raise ValueError(f"guard must be one of {GUARDS}, got {self.guard!r}")
        if self.num_ps < 1 or self.num_ps >= world_size:
            raise ValueError(f"need 1 <= num_ps < world size ({world_size}) so there is at least one "
                             f"worker, got num_ps={self.num_ps}")
        if self.iters < 1 or not 0 <= self.warmup < self.iters:
            raise ValueError(f"need iters >= 1 and 0 <= warmup < iters, got iters={self.iters}, "
                             f"warmup={self.warmup}")
        if self.bandwidth_bytes_s is not None and not self.bandwidth_bytes_s > 0:
            raise ValueError(f"bandwidth must be > 0 bytes/s, got {self.bandwidth_bytes_s}")
        if not 0 <= self.min_overlap:
            raise ValueError(f"min_overlap must be >= 0, got {self.min_overlap}")
        if not self.timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {self.timeout}")
