#!/usr/bin/env python3
"""Auto chunk/window (transport/chunk_tuner.h) against a grid of fixed settings: bandwidth and
high-priority latency of `tictac perftest --backend tcp`, on loopback and on a shaped link.

    python3 bench/tune_sweep.py [--build build] [--links loopback,1gbit] [--rounds 3]
        [--chunks 64K,256K,1M,4M] [--windows 1,4] [--configs 64K/2,1M/4,auto] [--lock /tmp/tictac-bench.lock] [--json F]

Configurations: every chunk x window pair fixed (`--chunk C --window W`), and `auto` (neither
flag: the default). Per link and round, every configuration runs once, in a fresh random order
per round (paired, interleaved rounds), each run holding the bench lock (flock) so that no other
measurement overlaps it. Per run:
  - bw: `perftest --test bw --size 4M` (loopback 200 messages, shaped 30): `gbytes_per_s`;
  - priority at the start of the stream: `perftest --test priority --size 64K --bulk B`
    (loopback 64M, shaped 32M, 2 pairs): `hi_lat_ms_priority`, the median submission-to-landing
    time of a 64 KiB priority-0 message submitted behind B of queued priority-1 data, as soon as
    the first bulk chunk has landed (a fresh Context per session: auto starts cold). TCP is then
    still in its start-up and the kernel's queues are filling, so whether they were full when the
    message came decides the sample (0.3-0.6 or 2-7 ms on the 1 Gbit/s link, for one setting);
  - priority in steady state: the same with `--hi-after 3B/4` and a longer bulk (loopback 512M,
    shaped 32M): the message comes once the stream has run for longer than the send queue's
    `solo_after` (50 ms), so the auto chunk is in its single-level (solo) mode, the hard case for
    pre-emption, and TCP's queues are in steady state.
A shaped link is two network namespaces joined by a veth pair with tc tbf at the rate
(bench/netns/shaped_link.sh up/down; needs root and iproute2, else it is skipped with a reason).
Prints per configuration the median and range of both figures and the load average, then per link
the best fixed setting for each figure and auto's ratio to it (bandwidth: auto / best; latency:
best / auto; target >= 0.95 for both). A latency sample counts only if its FIFO control waited
behind the bulk (`hi_lat_ms_fifo` at least a quarter of the link's median): when the bulk had
drained before the high-priority message was submitted (seen with 4M/1 on loopback, where 64 MiB
leaves in ~13 ms), there was nothing to pre-empt and the figure says nothing; the table counts
the samples dropped. `--from-json FILE` summarizes earlier runs without running anything.
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import pathlib
import random
import re
import shutil
import statistics
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
PORT = 18517


def perftest_json(out: str) -> dict:
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError("perftest printed no JSON result:\n" + out[-2000:])
    return json.loads(lines[-1])


@contextlib.contextmanager
def bench_lock(path: str):
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class Link:
    """Runs one perftest client/server pair on loopback (--local) or across a shaped netns link."""

    def __init__(self, tictac: str, rate: str | None):
        self.tictac, self.rate, self.env = tictac, rate, {}
        if rate is not None:
            out = subprocess.run(["bash", str(REPO / "bench/netns/shaped_link.sh"), "up", rate],
                                 capture_output=True, text=True)
            if out.returncode != 0:
                raise RuntimeError(f"shaped_link.sh up {rate} failed ({out.returncode}): {out.stderr.strip()}")
            self.env = dict(line.split("=", 1) for line in out.stdout.split() if "=" in line)

    def close(self):
        if self.rate is not None and "TICTAC_LINK_ID" in self.env:
            subprocess.run(["bash", str(REPO / "bench/netns/shaped_link.sh"), "down", self.env["TICTAC_LINK_ID"]],
                           capture_output=True, text=True)

    def run(self, flags: list[str], client: list[str], timeout: float = 120) -> dict:
        base = [self.tictac, "perftest", "--backend", "tcp"] + flags
        if self.rate is None:
            out = subprocess.run(base + ["--local", "--format", "json"] + client,
                                 capture_output=True, text=True, timeout=timeout)
            if out.returncode != 0:
                raise RuntimeError(f"perftest failed ({out.returncode}): {out.stderr[-2000:]}")
            return perftest_json(out.stdout)
        addr = f"{self.env['SERVER_ADDR']}:{PORT}"
        server = subprocess.Popen(["ip", "netns", "exec", self.env["NS_SERVER"]] + base +
                                  ["--server", "--listen", addr],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = server.stdout.readline()  # "tictac perftest server: listening on ..."
            if "listening" not in line:
                raise RuntimeError(f"perftest server did not start: {line} {server.stderr.read()[-2000:]}")
            out = subprocess.run(["ip", "netns", "exec", self.env["NS_CLIENT"]] + base +
                                 ["--client", "--connect", addr, "--format", "json"] + client,
                                 capture_output=True, text=True, timeout=timeout)
            if out.returncode != 0:
                raise RuntimeError(f"perftest client failed ({out.returncode}): {out.stderr[-2000:]}")
            return perftest_json(out.stdout)
        finally:
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()  # our own child, by its handle
                server.wait()


def config_flags(name: str) -> list[str]:
    if name == "auto":
        return []  # the default
    chunk, window = name.split("/")
    return ["--chunk", chunk, "--window", window]


def _config_key(c: str):
    chunk, _, window = c.partition("/")
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return (int(chunk[:-1]) * units.get(chunk[-1], 1) if chunk[-1] in units else int(chunk), int(window or 0))


LATENCIES = (("lat", "start of stream"), ("lat_steady", "steady state"))


def _latencies(results: list[dict], link: str, key: str) -> tuple[float, dict[str, list[float]], dict[str, int]]:
    """Per configuration, the valid samples of latency figure `key` and how many were dropped: a
    sample counts only if its FIFO control waited behind the bulk (see the module's help)."""
    fifo = [r[key + "_fifo"] for r in results if r["link"] == link and r.get(key + "_fifo") is not None]
    floor = statistics.median(fifo) / 4 if fifo else 0.0
    kept, dropped = {}, {}
    for r in results:
        if r["link"] != link or r.get(key) is None:
            continue
        ok = r.get(key + "_fifo", floor) >= floor
        kept.setdefault(r["config"], [])
        dropped.setdefault(r["config"], 0)
        if ok:
            kept[r["config"]].append(r[key])
        else:
            dropped[r["config"]] += 1
    return floor, kept, dropped


def summarize(results: list[dict], configs: list[str], link: str) -> list[str]:
    lats = [(k, name, *_latencies(results, link, k)[1:]) for k, name in LATENCIES]
    lats = [x for x in lats if x[2]]  # figures these results have
    head = "| setting (chunk/window) | bandwidth GB/s, median [min, max] | " + " | ".join(
        f"high-priority latency ms, {name}, median [min, max]" for _, name, _, _ in lats) + " | load avg (1 min) |"
    rows = [f"### {link}", "", head, "|---" * (3 + len(lats)) + "|"]
    bw_med, lat_med = {}, {k: {} for k, *_ in lats}
    for c in configs:
        rs = [r for r in results if r["link"] == link and r["config"] == c]
        if not rs:
            continue
        bw = [r["bw"] for r in rs]
        load = [r["load"] for r in rs]
        bw_med[c] = statistics.median(bw)
        cells = [f"{bw_med[c]:.3f} [{min(bw):.3f}, {max(bw):.3f}]"]
        for k, _, kept, dropped in lats:
            v, d = kept.get(c, []), dropped.get(c, 0)
            note = f" ({d} of {len(v) + d} dropped)" if d else ""
            if not v:
                cells.append(f"no valid sample{note}")
                continue
            lat_med[k][c] = statistics.median(v)
            cells.append(f"{lat_med[k][c]:.2f} [{min(v):.2f}, {max(v):.2f}]{note}")
        rows.append(f"| {c} | " + " | ".join(cells) + f" | {min(load):.1f}-{max(load):.1f} |")
    ok = lambda r: "met" if r >= 0.95 else "NOT met"
    fixed_bw = {c: v for c, v in bw_med.items() if c != "auto"}
    if "auto" in bw_med and fixed_bw:
        best = max(fixed_bw, key=fixed_bw.get)
        r_bw = bw_med["auto"] / fixed_bw[best]
        rows += ["", f"- bandwidth: best fixed {best} {fixed_bw[best]:.3f} GB/s; auto {bw_med['auto']:.3f} "
                     f"= {r_bw:.3f}x (target >= 0.95: {ok(r_bw)})"]
    for k, name, _, _ in lats:
        med = lat_med[k]
        fixed = {c: v for c, v in med.items() if c != "auto"}
        if "auto" not in med or not fixed:
            continue
        best = min(fixed, key=fixed.get)
        r_lat = fixed[best] / med["auto"]
        rows.append(f"- latency, {name}: best fixed {best} {fixed[best]:.2f} ms; auto {med['auto']:.2f} ms "
                    f"= {r_lat:.3f}x of the best (best / auto, target >= 0.95: {ok(r_lat)}); bandwidth there: "
                    f"{fixed_bw.get(best, float('nan')):.3f} GB/s vs auto {bw_med.get('auto', float('nan')):.3f}")
    return rows + [""]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--links", default="loopback,1gbit", help="loopback and/or tc rates such as 1gbit")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--chunks", default="64K,256K,1M,4M")
    ap.add_argument("--windows", default="1,4")
    ap.add_argument("--configs", default="", help="instead of the grid: these settings, e.g. 64K/2,1M/4,auto")
    ap.add_argument("--lock", default="/tmp/tictac-bench.lock")
    ap.add_argument("--json", default="", help="append every run's raw result here (JSON lines)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--from-json", default="", help="summarize the runs in this JSON-lines file instead")
    a = ap.parse_args()
    if a.from_json:
        with open(a.from_json) as f:
            results = [json.loads(line) for line in f if line.strip()]
        report = []
        for link_name in dict.fromkeys(r["link"] for r in results):
            seen = list(dict.fromkeys(r["config"] for r in results if r["link"] == link_name))
            configs = sorted((c for c in seen if c != "auto"), key=_config_key) + (["auto"] if "auto" in seen else [])
            report += summarize(results, configs, link_name)
        print("\n".join(report))
        return 0
    tictac = str((REPO / a.build / "tictac").resolve()) if not os.path.isabs(a.build) else a.build + "/tictac"
    if not os.access(tictac, os.X_OK):
        print(f"tune_sweep: {tictac} not found (build first: ninja -C {a.build} tictac)", file=sys.stderr)
        return 2
    configs = [f"{c}/{w}" for c in a.chunks.split(",") for w in a.windows.split(",")] + ["auto"]
    if a.configs:
        configs = a.configs.split(",")
    rng = random.Random(a.seed)
    results, report = [], []
    for link_name in a.links.split(","):
        rate = None if link_name == "loopback" else link_name
        if rate is not None and not re.fullmatch(r"\d+(bit|kbit|mbit|gbit)", rate):
            print(f"tune_sweep: bad link '{rate}': write loopback or a tc rate such as 1gbit", file=sys.stderr)
            return 2
        if rate is not None and (os.geteuid() != 0 or shutil.which("tc") is None):
            report.append(f"### {link_name}\n\nSKIPPED: needs root and tc for network namespaces\n")
            continue
        bw_args = ["--test", "bw", "--size", "4M", "--iters", "200" if rate is None else "30"]
        pr_args = ["--test", "priority", "--size", "64K", "--bulk", "64M" if rate is None else "32M", "--iters", "2"]
        steady_bulk = (512 if rate is None else 32) << 20
        st_args = ["--test", "priority", "--size", "64K", "--bulk", str(steady_bulk),
                   "--hi-after", str(steady_bulk * 3 // 4), "--iters", "2"]
        link = Link(tictac, rate)
        try:
            for rnd in range(a.rounds):
                order = configs[:]
                rng.shuffle(order)
                for c in order:
                    with bench_lock(a.lock):
                        load = os.getloadavg()[0]
                        bw = link.run(config_flags(c), bw_args)
                        pr = link.run(config_flags(c), pr_args)
                        st = link.run(config_flags(c), st_args)
                    r = {"link": link_name, "round": rnd, "config": c, "bw": bw["gbytes_per_s"],
                         "lat": pr["hi_lat_ms_priority"], "lat_fifo": pr["hi_lat_ms_fifo"],
                         "lat_steady": st["hi_lat_ms_priority"], "lat_steady_fifo": st["hi_lat_ms_fifo"],
                         "bulk_gbytes_per_s": pr.get("bulk_gbytes_per_s"), "load": load,
                         "time": time.strftime("%H:%M:%S", time.gmtime())}
                    results.append(r)
                    print(json.dumps(r), flush=True)
                    if a.json:
                        with open(a.json, "a") as f:
                            f.write(json.dumps(r) + "\n")
        finally:
            link.close()
        report += summarize(results, configs, link_name)
    print("\n".join(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
