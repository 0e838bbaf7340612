"""Op times for TAC: profile a TF1 graph's per-node compute time and write the JSON file that
``TICTAC_TF_POLICY=tac`` reads (``TICTAC_TF_OP_TIMES``; format in docs/tf.md)::

    from tictac.tf import op_times
    with tf.compat.v1.Session(graph=g) as sess:            # the variables local: compute only
        sess.run(init)
        times = op_times.profile(sess, fetches, steps=5)    # {node name: seconds}
    op_times.write("op_times.json", times)

Profile the same graph (same node names) that the workers will run, with its variables on the
local device, so that the times are compute and not transfers. A node's time is the median over
``steps`` traced runs (after ``warmup`` untraced ones) of its end minus its start as TF's step
stats record them (RunOptions.FULL_TRACE). Nodes that only move data (_Recv, _Send, _Retval,
_Arg, Const, NoOp, _SOURCE, _SINK) are left out: their time is transfer, or nothing. Names
appearing in several devices' stats keep the largest median.
"""
from __future__ import annotations

import json
import statistics
from typing import Dict, Iterable, Optional

import tensorflow as tf

_NOT_COMPUTE = {"_Recv", "_Send", "_HostRecv", "_HostSend", "_Retval", "_Arg", "Const", "NoOp",
                "_SOURCE", "_SINK", "Identity"}


def _op_type(label: str) -> str:
    """The op type from a step-stats timeline label ("name = Type(inputs)")."""
    if " = " not in label:
        return ""
    rhs = label.split(" = ", 1)[1]
    return rhs.split("(", 1)[0].strip()


def from_step_stats(step_stats) -> Dict[str, float]:
    """{node name: seconds} of the compute nodes of one traced run (RunMetadata.step_stats)."""
    out: Dict[str, float] = {}
    for dev in step_stats.dev_stats:
        for ns in dev.node_stats:
            name = ns.node_name
            if not name or name.startswith("_") or _op_type(ns.timeline_label) in _NOT_COMPUTE:
                continue
            seconds = max(ns.all_end_rel_micros, ns.op_end_rel_micros) * 1e-6
            out[name] = max(out.get(name, 0.0), seconds)
    return out


def profile(sess, fetches, steps: int = 5, warmup: int = 2, feed_dict=None) -> Dict[str, float]:
    """Median per-node compute seconds over ``steps`` traced runs of ``fetches`` in ``sess``."""
    if steps < 1:
        raise ValueError("op_times.profile: steps must be >= 1")
    for _ in range(warmup):
        sess.run(fetches, feed_dict=feed_dict)
    runs = []
    for _ in range(steps):
        meta = tf.compat.v1.RunMetadata()
        sess.run(fetches, feed_dict=feed_dict,
                 options=tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE),
                 run_metadata=meta)
        runs.append(from_step_stats(meta.step_stats))
    names = set().union(*runs)
    return {n: statistics.median(r.get(n, 0.0) for r in runs) for n in sorted(names)}


def write(path: str, ops: Dict[str, float], default_op_seconds: Optional[float] = None,
          bandwidth_bps: Optional[float] = None) -> None:
    """Writes the TICTAC_TF_OP_TIMES file: {"ops": {...}} plus the optional fields."""
    doc = {"ops": {n: float(s) for n, s in ops.items()}}
    if default_op_seconds is not None:
        doc["default_op_seconds"] = float(default_op_seconds)
    if bandwidth_bps is not None:
        doc["bandwidth_bps"] = float(bandwidth_bps)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, sort_keys=True)


def merge(*tables: Iterable[Dict[str, float]]) -> Dict[str, float]:
    """One table from several (e.g. one per worker's name scope); a repeated name keeps the max."""
    out: Dict[str, float] = {}
    for t in tables:
        for n, s in t.items():
            out[n] = max(out.get(n, 0.0), s)
    return out
