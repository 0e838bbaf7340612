"""Run time and run-queue wait of threads by name, while a command runs (Linux schedstat).

    python3 bench/threadwait.py [--name tictac-loop] [--interval 0.2] -- COMMAND ...

Every interval it reads /proc/<pid>/task/<tid>/{comm,schedstat} of every thread whose name
starts with --name (all processes; namespaces share the PID view of the root namespace), and
keeps each thread's first and last sample. When COMMAND exits it prints one line per thread
(pid, RANK from the process environment when set, seconds on a CPU, seconds runnable but waiting
for a CPU, and wait / (run + wait)), then the totals per RANK. A thread that waits long for a
CPU cannot keep a socket fed: this tells CPU starvation apart from protocol stalls.
Exit status: COMMAND's.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _rank(pid: str) -> str:
    env = _read(f"/proc/{pid}/environ") or ""
    for item in env.split("\0"):
        if item.startswith("RANK="):
            return item[5:]
    return "-"


def sample(prefix: str, seen: dict) -> None:
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            comm = (_read(f"/proc/{pid}/task/{tid}/comm") or "").strip()
            if not comm.startswith(prefix):
                continue
            stat = (_read(f"/proc/{pid}/task/{tid}/schedstat") or "").split()
            if len(stat) < 2:
                continue
            run_ns, wait_ns = int(stat[0]), int(stat[1])
            key = (pid, tid)
            if key not in seen:
                seen[key] = {"comm": comm, "rank": _rank(pid), "first": (run_ns, wait_ns)}
            seen[key]["last"] = (run_ns, wait_ns)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="bench/threadwait.py")
    p.add_argument("--name", default="tictac-loop", help="thread name prefix (default tictac-loop)")
    p.add_argument("--interval", type=float, default=0.2)
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        p.error("give the command to run after --")
    if not os.path.exists("/proc/self/schedstat"):
        print("threadwait: this kernel has no schedstat (CONFIG_SCHED_INFO); nothing to measure",
              file=sys.stderr)
        return 2
    seen: dict = {}
    proc = subprocess.Popen(cmd)
    while proc.poll() is None:
        sample(a.name, seen)
        time.sleep(a.interval)
    per_rank: dict = {}
    print(f"threadwait: threads named {a.name}*: seconds running / waiting for a CPU")
    for (pid, tid), t in sorted(seen.items(), key=lambda kv: (kv[1]["rank"], kv[0])):
        run = (t["last"][0] - t["first"][0]) / 1e9
        wait = (t["last"][1] - t["first"][1]) / 1e9
        share = wait / (run + wait) if run + wait > 0 else 0.0
        print(f"  pid {pid} tid {tid} rank {t['rank']:>2} {t['comm']:<16} run {run:8.2f}  "
              f"wait {wait:8.2f}  wait share {share:.2f}")
        r = per_rank.setdefault(t["rank"], [0.0, 0.0])
        r[0] += run
        r[1] += wait
    for rank, (run, wait) in sorted(per_rank.items()):
        share = wait / (run + wait) if run + wait > 0 else 0.0
        print(f"  rank {rank:>2} total: run {run:8.2f} s  wait {wait:8.2f} s  wait share {share:.2f}")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
