"""Link use of ordered_ddp's largest sliced parameter, from a link trace and the job's events.

``python -m bench.e2e.ddp_linkuse LINKS JOBDIR --rate-mbit R [--bucket B] [--strips]``

LINKS: bench/cluster/link_sampler.py's output; JOBDIR: a bench/e2e ddp job (its
iterations.jsonl, with bucket events and each iteration's start on the monotonic clock). For
each measured iteration it aligns the workers' events of bucket B (default: the largest) and
prints: the skew of its reduce-scatter's launch across workers, the reduce-scatter (first launch
to last completion), the slice update (to the last worker's update), the all-gather (to the
first worker's gathered), each uplink's use in both windows (bytes / (rate x time): 1.0 is the
shaped rate, about 0.95 of it is TCP's payload) and the machine's CPU split there. --strips
adds one digit per 50 ms per uplink (use in tenths, 9 = 90% or more) from the launch to the
last gathered. bench/e2e/ddp_link_probe.sh runs a job and this.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import json
import os
import sys
from typing import Dict, List, Tuple


def read_links(path: str) -> Tuple[Dict[str, Tuple[List[float], List[int]]], List[Tuple[float, List[int]]]]:
    links: Dict[str, Tuple[List[float], List[int]]] = collections.defaultdict(lambda: ([], []))
    cpu: List[Tuple[float, List[int]]] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            x = line.split()
            if len(x) < 3:
                continue
            if x[1] == "cpu":
                cpu.append((float(x[0]), [int(v) for v in x[2:]]))
            else:
                ts, up = links[x[1]]
                ts.append(float(x[0]))
                up.append(int(x[2]))
    return dict(links), cpu


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("links")
    ap.add_argument("job")
    ap.add_argument("--rate-mbit", type=float, required=True, help="the shaped rate of each link")
    ap.add_argument("--bucket", type=int, default=None, help="bucket index (default: the largest)")
    ap.add_argument("--strips", action="store_true")
    a = ap.parse_args(argv)
    rate = a.rate_mbit * 1e6 / 8
    links, cpu = read_links(a.links)
    with open(os.path.join(a.job, "iterations.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    rows = [r for r in rows if "t0_mono_s" in r and r.get("bucket_events")]
    if not rows or not links:
        print("ddp_linkuse: no events with monotonic starts, or no link samples", file=sys.stderr)
        return 2
    sizes = {int(k): v for k, v in rows[0].get("bucket_mb", {}).items()}
    b = a.bucket if a.bucket is not None else max(sizes, key=sizes.get)
    workers = sorted({r["worker"] for r in rows})
    hosts = [d for d in sorted(links) if links[d][1][-1] - links[d][1][0] > 1e6]   # not the idle PS host

    def sent(d: str, t: float) -> int:
        ts, up = links[d]
        return up[max(0, bisect.bisect_right(ts, t) - 1)]

    def use(t0: float, t1: float) -> List[float]:
        return [round((sent(d, t1) - sent(d, t0)) / (rate * (t1 - t0)), 2) if t1 > t0 else 0.0 for d in hosts]

    def cpu_split(t0: float, t1: float) -> str:
        s = [c for c in cpu if t0 <= c[0] <= t1]
        if len(s) < 2:
            return "n/a"
        d = [y - x for x, y in zip(s[0][1], s[-1][1])]
        tot = sum(d) or 1
        return "user %d%% system %d%% softirq %d%% idle %d%%" % tuple(round(100 * d[k] / tot) for k in (0, 2, 6, 3))

    ev: Dict[int, Dict[Tuple[int, str], float]] = collections.defaultdict(dict)
    warm = {r["iter"] for r in rows if r.get("warmup")}
    for r in rows:
        for i, e, t in r["bucket_events"]:
            if i == b:
                ev[r["iter"]][(r["worker"], e)] = r["t0_mono_s"] + t / 1e3
    print(f"bucket {b} ({sizes.get(b, '?')} MB), uplinks {', '.join(hosts)} at {a.rate_mbit:g} Mbit/s")
    iters = sorted(ev)
    for it in iters[:-1]:
        if it in warm:
            continue
        launch = [ev[it].get((w, "launch")) for w in workers]
        nxt = ev[it + 1]
        done = [nxt.get((w, "done")) for w in workers]
        applied = [nxt.get((w, "applied")) for w in workers]
        gathered = [nxt.get((w, "gathered")) for w in workers]
        if None in launch + done + applied + gathered:
            continue
        l0, d1, a1, g0, g1 = min(launch), max(done), max(applied), min(gathered), max(gathered)
        print(f"iter {it}: launch skew {1e3 * (max(launch) - l0):.0f} ms, reduce-scatter {1e3 * (d1 - l0):.0f} ms "
              f"(done skew {1e3 * (d1 - min(done)):.0f}), update +{1e3 * (a1 - d1):.0f} ms, all-gather "
              f"{1e3 * (g0 - a1):.0f} ms (gathered skew {1e3 * (g1 - g0):.0f})")
        print(f"   uplink use: reduce-scatter window {use(l0, d1)}, all-gather window {use(a1, g0)}")
        print(f"   cpu: reduce-scatter window {cpu_split(l0, d1)}; all-gather window {cpu_split(a1, g0)}")
        if a.strips:
            for d in hosts:
                k, line = 0, ""
                while l0 + (k + 1) * 0.05 <= g1:
                    u = (sent(d, l0 + (k + 1) * 0.05) - sent(d, l0 + k * 0.05)) / (rate * 0.05)
                    line += str(min(9, int(10 * u)))
                    k += 1
                print(f"   {d} {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
