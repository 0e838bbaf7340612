"""Parameter send orders for the PyTorch integration.

``compute_order`` returns the order in which the parameter server sends a worker's parameters
(first = sent first) for one of the policies of docs/policies.md:

- ``fifo``: ``param_names`` as given (the model's registration order);
- ``layer``: ``recorded_order`` (the first iteration's execution order, FSDP style);
- ``tic`` / ``tac`` (and ``optimal``): the C++ scheduling library on the traced graph, through
  the binding ``tictac.torch._C.schedule`` when it is importable, else the ``tictac order`` CLI;
- ``random``: a seeded random permutation (``random.Random(seed)``; pass a fresh seed per
  worker per iteration to model what graph frameworks do).

Fallbacks never fail silently: each one emits a ``warnings.warn`` naming the policy, what it
fell back to and why.
"""

from __future__ import annotations

import json
import os
import random as _random
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from .trace import recv_name

__all__ = ["POLICIES", "GRAPH_POLICIES", "compute_order", "schedule_priorities", "default_cli",
           "SchedulerUnavailable"]

POLICIES = ("fifo", "layer", "tic", "tac", "random")
GRAPH_POLICIES = ("tic", "tac", "optimal")  # computed by the C++ library from the graph

_REPO_ROOT = Path(__file__).resolve().parents[4]  # python/tictac/torch/graph/orders.py
_CLI_TIMEOUT_S = 600


class SchedulerUnavailable(RuntimeError):
    """Neither the ``_C`` binding nor the ``tictac`` CLI can be found."""


def default_cli() -> Optional[str]:
    """The ``tictac`` executable: ``<repo>/build/tictac`` if built, else ``tictac`` on PATH."""
    built = _REPO_ROOT / "build" / "tictac"
    if built.is_file() and os.access(built, os.X_OK):
        return str(built)
    return shutil.which("tictac")


def _binding():
    try:
        from tictac.torch import _C  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _C if hasattr(_C, "schedule") else None


def schedule_priorities(graph: dict, policy: str, bandwidth_bps: float, seed: int = 0, *,
                        cli: Optional[str] = None) -> Dict[str, int]:
    """Priority per recv op name (smaller = sent first; equal = tie) from the C++ library.

    Uses ``tictac.torch._C.schedule`` when importable (and ``cli`` is not given), else runs
    ``tictac order --graph FILE --policy P --bandwidth BPS --seed N --out OUT``.
    Raises SchedulerUnavailable when neither exists, ValueError when the library rejects the
    graph or the arguments (the message is the library's).
    """
    text = json.dumps(graph)
    binding = _binding() if cli is None else None
    if binding is not None:
        return {str(k): int(v) for k, v in binding.schedule(text, policy, float(bandwidth_bps), int(seed)).items()}
    exe = cli or default_cli()
    if exe is None:
        raise SchedulerUnavailable(
            "neither the tictac.torch._C binding nor the tictac CLI "
            f"({_REPO_ROOT / 'build' / 'tictac'} or on PATH) is available")
    with tempfile.TemporaryDirectory(prefix="tictac-order-") as tmp:
        gpath = os.path.join(tmp, "graph.json")
        opath = os.path.join(tmp, "order.json")
        with open(gpath, "w", encoding="utf-8") as f:
            f.write(text)
        cmd = [exe, "order", "--graph", gpath, "--policy", policy, "--bandwidth", repr(float(bandwidth_bps)),
               "--seed", str(int(seed)), "--out", opath]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=_CLI_TIMEOUT_S)
        if proc.returncode != 0:
            msg = (proc.stderr or proc.stdout).strip()
            if proc.returncode == 2:
                raise ValueError(msg)
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {msg}")
        with open(opath, encoding="utf-8") as f:
            result = json.load(f)
    return {str(k): int(v) for k, v in result["priorities"].items()}


def _complete(order: Sequence[str], param_names: Sequence[str], policy: str, what: str) -> List[str]:
    """``order`` restricted to param_names (first occurrence), then the missing ones in fifo
    order (with a warning)."""
    known = set(param_names)
    out = [n for n in dict.fromkeys(order) if n in known]
    placed = set(out)
    missing = [n for n in param_names if n not in placed]
    if missing:
        shown = ", ".join(missing[:5]) + (f", ... ({len(missing)} in all)" if len(missing) > 5 else "")
        warnings.warn(f"policy {policy!r}: {len(missing)} parameter(s) missing from {what} go last in "
                      f"fifo order: {shown}", stacklevel=3)
        out.extend(missing)
    return out


def _fallback(policy: str, recorded_order: Optional[Sequence[str]], param_names: Sequence[str],
              reason: str) -> List[str]:
    if recorded_order:
        warnings.warn(f"policy {policy!r} fell back to 'layer' (the recorded first-iteration order): {reason}",
                      stacklevel=3)
        return _complete(recorded_order, param_names, policy, "the recorded order")
    warnings.warn(f"policy {policy!r} fell back to 'fifo' (registration order; no recorded order either): "
                  f"{reason}", stacklevel=3)
    return list(param_names)


def compute_order(policy: str, *, graph: Optional[dict], recorded_order: Optional[List[str]],
                  param_names: List[str], bandwidth_bps: float, seed: int,
                  cli: Optional[str] = None) -> List[str]:
    """The parameter send order for ``policy``: every name of ``param_names`` exactly once,
    first = sent first.

    graph: a tictac-graph/1 dict (``trace_model``) or None (tracing failed or was skipped).
    recorded_order: parameter names in first-iteration execution order, or None.
    param_names: the unique parameter names in registration order (``named_parameters()``).
    bandwidth_bps: link bandwidth in bits per second (TAC derives recv times from it).
    seed: for ``random`` (and passed to the library).
    cli: a ``tictac`` executable to use instead of the binding / the default CLI.

    tic/tac with graph None, or with no scheduler available, fall back to recorded_order
    (else fifo) with a warning; parameters the graph (or the recorded order) lacks go last in
    fifo order with a warning. Raises ValueError for an unknown policy or a graph the library
    rejects.
    """
    param_names = list(dict.fromkeys(param_names))
    if policy == "fifo":
        return param_names
    if policy == "random":
        order = list(param_names)
        _random.Random(seed).shuffle(order)
        return order
    if policy == "layer":
        if recorded_order is None:
            warnings.warn("policy 'layer' fell back to 'fifo' (registration order): no recorded order was given",
                          stacklevel=2)
            return param_names
        return _complete(recorded_order, param_names, policy, "the recorded order")
    if policy not in GRAPH_POLICIES:
        raise ValueError(f"unknown policy {policy!r}; one of {', '.join(POLICIES + ('optimal',))}")

    if graph is None:
        return _fallback(policy, recorded_order, param_names, "no graph (tracing failed or was not run)")
    try:
        priorities = schedule_priorities(graph, policy, bandwidth_bps, seed, cli=cli)
    except SchedulerUnavailable as e:
        return _fallback(policy, recorded_order, param_names, str(e))

    # The graph's recvs in file order: the tie-break.
    recv_index = {op["name"]: i for i, op in enumerate(o for o in graph["ops"] if o.get("kind") == "recv")}
    by_recv = {recv_name(p): p for p in param_names}
    ranked = sorted((name for name in priorities if name in by_recv),
                    key=lambda name: (priorities[name], recv_index.get(name, len(recv_index))))
    return _complete([by_recv[name] for name in ranked], param_names, policy, "the graph")
