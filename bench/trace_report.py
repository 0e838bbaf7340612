#!/usr/bin/env python3
"""Summarises TICTAC_TRACE timelines (docs/trace.md): per file, the Context's settings, its sends
and receives, the sends that waited longest before their first chunk left (split into the wait
for the receiver and the wait in the priority lanes and the window), and the order inversions:
chunks of a less urgent message handed to the backend while a more urgent message was cleared to
go (eager, or its receiver's READY had come) and still waited for its first chunk. With
priorities enforced that count stays near 0 (a chunk already being posted when the urgent
message arrived); with TICTAC_PRIORITY=0 it is most of the bulk traffic.

  bench/trace_report.py trace-*.json            # a table per file
  bench/trace_report.py --json trace-*.json     # one JSON object per file, one per line
  bench/trace_report.py --top 10 trace.json     # the 10 longest waits (default 5)

A file cut short (a process that was killed) is read up to its last complete event.
Exit status: 0, or 2 for a file that is not a tictac trace.
"""

from __future__ import annotations

import argparse
import bisect
import json
import sys


def load(path: str) -> list[dict]:
    """The events of a trace file; a missing closing bracket (a killed process) is tolerated."""
    with open(path) as f:
        text = f.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        body = text.rstrip().rstrip(",")
        cut = body.rfind("}\n")  # the last complete event line
        if not body.startswith("[") or cut < 0:
            raise
        return json.loads(body[:cut + 1] + "\n]")


def report(path: str, top: int) -> dict:
    events = load(path)
    meta = {e["name"]: e.get("args", {}) for e in events if e.get("ph") == "M" and e.get("tid") == 0}
    if "tictac_config" not in meta:
        raise ValueError(f"{path}: no tictac_config event: not a TICTAC_TRACE file")
    real = [e for e in events if e.get("ph") != "M"]
    sends = [e for e in real if e.get("cat") == "send"]
    recvs = [e for e in real if e.get("cat") == "recv"]
    chunks = sorted((e for e in real if e.get("cat") == "chunk"), key=lambda e: e["ts"])
    landed = [e for e in real if e.get("cat") == "landed"]
    posted_at = [e["ts"] for e in chunks]

    inversions = 0
    worst = []  # (inverted chunks, send)
    for s in sends:
        cleared = s["args"].get("us_before_cleared", -1)
        first = s["args"].get("us_before_first_chunk", -1)
        if cleared < 0 or first <= cleared:
            continue
        lo = bisect.bisect_left(posted_at, s["ts"] + cleared)
        hi = bisect.bisect_left(posted_at, s["ts"] + first)
        n = sum(1 for c in chunks[lo:hi] if c["args"]["priority"] > s["args"]["priority"])
        inversions += n
        if n:
            worst.append((n, s))
    waits = sorted(sends, key=lambda s: -s["args"].get("us_before_first_chunk", -1))[:top]
    return {
        "file": path,
        "process": meta.get("process_name", {}).get("name", "?"),
        "config": meta["tictac_config"],
        "sends": len(sends),
        "send_bytes": sum(s["args"]["bytes"] for s in sends),
        "recvs": len(recvs),
        "chunks": len(chunks),
        "landed_frames": len(landed),
        "failed": sum(1 for e in sends + recvs if e["args"].get("status") != "ok"),
        "inversions": inversions,
        "messages_overtaken": len(worst),
        "longest_waits": [{"name": s["name"], "priority": s["args"]["priority"], "bytes": s["args"]["bytes"],
                           "us_before_cleared": s["args"].get("us_before_cleared"),
                           "us_before_first_chunk": s["args"].get("us_before_first_chunk"),
                           "us_total": s["dur"]} for s in waits],
        "events": meta.get("tictac_trace", {}).get("events"),
        "dropped": meta.get("tictac_trace", {}).get("dropped"),
    }


def print_table(r: dict) -> None:
    c = r["config"]
    print(f"{r['file']}: {r['process']}")
    print(f"  settings: priorities {'on' if c.get('enforce_priority') else 'OFF (FIFO)'}, chunk {c.get('chunk_bytes')}, "
          f"window {c.get('window')}")
    print(f"  {r['sends']} sends ({r['send_bytes']} bytes), {r['recvs']} receives, {r['chunks']} chunks sent, "
          f"{r['landed_frames']} frames landed, {r['failed']} failed")
    if r["dropped"] is None:
        print("  (file cut short: the process ended before its Context closed)")
    elif r["dropped"]:
        print(f"  WARNING: {r['dropped']} events dropped (TICTAC_TRACE_MAX_EVENTS)")
    print(f"  order inversions: {r['inversions']} chunks of a less urgent message left while a more urgent one, "
          f"cleared to go, waited for its first chunk ({r['messages_overtaken']} messages overtaken)")
    if r["longest_waits"]:
        print("  longest waits before the first chunk (for the receiver / in the lanes and window):")
        for w in r["longest_waits"]:
            cleared = w["us_before_cleared"]
            lanes = w["us_before_first_chunk"] - cleared if cleared is not None and cleared >= 0 else float("nan")
            print(f"    {w['name']:<16} priority {w['priority']:>6}  {w['bytes']:>12} B  "
                  f"waited {w['us_before_first_chunk']:>10.1f} us ({cleared:>10.1f} / {lanes:>9.1f})  "
                  f"done after {w['us_total']:>10.1f} us")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--json", action="store_true", help="one JSON object per file")
    ap.add_argument("--top", type=int, default=5, help="how many of the longest waits to list")
    a = ap.parse_args()
    for path in a.files:
        try:
            r = report(path, a.top)
        except (OSError, ValueError, KeyError) as e:
            print(f"trace_report: {path}: {e}", file=sys.stderr)
            return 2
        if a.json:
            print(json.dumps(r))
        else:
            print_table(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
