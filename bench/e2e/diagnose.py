"""Where a finished run's time went, per job: the counters that name why a target was missed.

    PYTHONPATH=.:python .venv/bin/python -m bench.e2e.diagnose results/emulated

Per job (jobs/<tag>/), medians over the measured iterations (and workers):
- ``stall``: ms a worker's compute waited for parameters (train.py's stall_ms);
- ``first_op``: ms from the iteration's start to the first op's start (the first-needed
  parameters' arrival: what TIC/TAC shorten);
- ``tail``: ms from the last parameter's arrival to the end of the forward (compute that no
  transfer can hide; with ``first_op`` it is what keeps E below 1);
- ``inv``: the fraction of parameter pairs that arrived in the opposite order to the plan's
  (the worker's expected order; 0 = the transport kept the order, ~0.5 = no order); small
  tensors overtaking a large one in flight count here, so also
- ``late_mb``: MB of parameters that arrived after a parameter later in the plan's order whose
  size is at least theirs (the inversions that can delay an op: an equal or larger tensor went
  first);
- ``uplink``: the PS's achieved send rate, pull bytes of all workers / the union of its send
  intervals, in Mbit/s (the nominal rate is the job's rate_mbit: below it the transport, not the
  link, is the bottleneck);
- ``update``: the server's optimizer busy ms per iteration (training), and ``fwd``/``bwd``: the
  workers' forward and backward interval lengths;
- ``upd_half``: pipelined training: the fraction of the next iteration's value bytes the server
  had updated (and so issued) by the middle of its update span (first to last update of the
  iteration). Low (updates bunched at the end) means the next forward waits for values updated
  late: what P3-ordered pushes did (docs/ps-training.md, "Push and update order").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from typing import Any, Dict, List

from tictac.intervals import union_length

from .analyse import read_records


def inversions(expected: List[str], arrived: List[str]) -> float:
    pos = {n: k for k, n in enumerate(expected)}
    seq = [pos[n] for n in arrived if n in pos]
    n = len(seq)
    if n < 2:
        return 0.0
    inv = 0
    for i in range(n):          # O(n^2): a few hundred parameters
        a = seq[i]
        inv += sum(1 for b in seq[i + 1:] if b < a)
    return inv / (n * (n - 1) / 2)


def late_bytes(expected: List[str], pulls: List[list]) -> float:
    pos = {n: k for k, n in enumerate(expected)}
    ps = [(pos[p[0]], p[2], p[3]) for p in pulls if p[0] in pos]
    late = 0
    for k, arr, nb in ps:
        if any(k2 > k and arr2 < arr and nb2 >= nb for k2, arr2, nb2 in ps):
            late += nb
    return late / 1e6


def _union(iv) -> float:
    return union_length(iv)


def server_counters(trace: str, nbytes: Dict[str, int] = None) -> Dict[str, Any]:
    try:
        with open(trace, encoding="utf-8") as f:
            ev = json.load(f)["traceEvents"]
    except (OSError, ValueError, KeyError):
        return {}
    iters = [(e["ts"], e["ts"] + e["dur"], e["name"]) for e in ev
             if e.get("ph") == "X" and e.get("pid") == 0 and e.get("tid") == 1]
    out: Dict[str, Any] = {"update_busy_ms": {}, "send_union_ms": {}, "upd_half": {}}
    all_sends = [x for x in ev if x.get("ph") == "X" and x.get("pid") == 0 and x.get("tid") == 5]
    for s, e, name in iters:
        it = int(name.split()[-1])
        upd = [x for x in ev if x.get("ph") == "X" and x.get("pid") == 0 and x.get("tid") == 7 and s <= x["ts"] < e]
        out["update_busy_ms"][it] = sum(x.get("args", {}).get("busy_ms", x["dur"] / 1e3) for x in upd)
        sends = [(x["ts"], x["ts"] + x["dur"]) for x in ev
                 if x.get("ph") == "X" and x.get("pid") == 0 and x.get("tid") == 5 and s <= x["ts"] < e]
        out["send_union_ms"][it] = _union(sends) / 1e3
        if upd and nbytes:
            u0, u1 = min(x["ts"] for x in upd), max(x["ts"] + x["dur"] for x in upd)
            nxt = [(x["ts"], nbytes.get(x["name"].rsplit(" -> ", 1)[0], 0)) for x in all_sends if u0 <= x["ts"] <= u1]
            tot = sum(b for _, b in nxt)
            if tot:
                out["upd_half"][it] = sum(b for t, b in nxt if t <= (u0 + u1) / 2) / tot
    return out


def job_counters(jd: str) -> Dict[str, Any]:
    recs = [r for r in read_records(os.path.join(jd, "iterations.jsonl")) if not r.get("warmup")]
    med = statistics.median
    row: Dict[str, Any] = {"job": os.path.basename(jd), "n": len({r["iter"] for r in recs})}
    row["stall"] = med(r.get("stall_ms", 0.0) for r in recs)
    firsts = [min(c[1] for c in r["compute"]) for r in recs if r.get("compute")]
    row["first_op"] = med(firsts) if firsts else None
    tails = [r["forward"][1] - max(p[2] for p in r["pulls"]) for r in recs if r.get("pulls") and r.get("forward")]
    row["tail"] = med(tails) if tails else None
    inv = [inversions(r["expected_order"], r["arrival_order"]) for r in recs if r.get("expected_order")]
    row["inv"] = med(inv) if inv else None
    lb = [late_bytes(r["expected_order"], r.get("pulls", [])) for r in recs if r.get("expected_order")]
    row["late_mb"] = med(lb) if lb else None
    row["fwd"] = med(r["forward"][1] - r["forward"][0] for r in recs if r.get("forward"))
    bw = [r["backward"][1] - r["backward"][0] for r in recs if r.get("backward")]
    row["bwd"] = med(bw) if bw else None
    nbytes = {p[0]: p[3] for r in recs for p in r.get("pulls", [])}
    sc = server_counters(os.path.join(jd, "trace_full.json"), nbytes)
    its = sorted({r["iter"] for r in recs})
    if sc:
        bytes_it = {it: sum(p[3] for r in recs if r["iter"] == it for p in r.get("pulls", [])) for it in its}
        rates = [bytes_it[it] * 8 / 1e6 / (sc["send_union_ms"][it] / 1e3) for it in its
                 if sc["send_union_ms"].get(it)]
        row["uplink"] = med(rates) if rates else None
        ub = [sc["update_busy_ms"][it] for it in its if it in sc["update_busy_ms"]]
        row["update"] = med(ub) if ub and any(ub) else None
        uh = list(sc["upd_half"].values())
        row["upd_half"] = med(uh) if uh else None
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.e2e.diagnose", description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    a = ap.parse_args(argv)
    jobs = os.path.join(a.dir, "jobs")
    if not os.path.isdir(jobs):
        print(f"{a.dir}: no jobs/ folder (not a bench/e2e --out folder)", file=sys.stderr)
        return 2
    cols = ["job", "n", "stall", "first_op", "tail", "inv", "late_mb", "uplink", "update", "upd_half", "fwd", "bwd"]
    rows = []
    for tag in sorted(os.listdir(jobs)):
        try:
            rows.append(job_counters(os.path.join(jobs, tag)))
        except (OSError, ValueError, KeyError) as e:
            rows.append({"job": tag, "n": f"unreadable: {e}"})

    def cell(v):
        return "-" if v is None else f"{v:.2f}" if isinstance(v, float) and abs(v) < 10 else \
            f"{v:.0f}" if isinstance(v, float) else str(v)
    t = [cols] + [[cell(r.get(c)) for c in cols] for r in rows]
    w = [max(len(x[i]) for x in t) for i in range(len(cols))]
    for x in t:
        print("  ".join(c.ljust(w[i]) if i == 0 else c.rjust(w[i]) for i, c in enumerate(x)))
    with open(os.path.join(a.dir, "diagnose.json"), "w", encoding="utf-8") as f:
        json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
