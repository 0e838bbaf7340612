"""Unit test of bench/e2e/ddp_linkuse.py on a synthetic trace whose link use follows from the
numbers written here: two hosts at 8 Mbit/s (1 MB/s), a reduce-scatter window of 2 s in which
host 1 sends 2 MB (use 1.0) and host 2 sends 1 MB (0.5), an all-gather window of 1 s in which
both send 0.9 MB (0.9)."""

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.e2e import ddp_linkuse  # noqa: E402


def _write(tmp_path):
    t0 = 1000.0
    links = []
    sent = {"vh1": 0, "vh2": 0}
    # 10 ms samples from t0 to t0 + 4 s; the RS window is [t0 + 0.1, t0 + 2.1] (launch to
    # done), the update ends at t0 + 2.2, the all-gather window [t0 + 2.2, t0 + 3.2].
    for k in range(401):
        t = t0 + k * 0.01
        for d in sent:
            links.append(f"{t:.6f} {d} {sent[d]} 0")
        links.append(f"{t:.6f} cpu {k} 0 {2 * k} {7 * k} 0 0 0 0")   # 10% user, 20% system
        if 0.1 <= k * 0.01 < 2.1 - 1e-9:
            sent["vh1"] += 10_000
            sent["vh2"] += 5_000
        elif 2.2 <= k * 0.01 < 3.2 - 1e-9:
            sent["vh1"] += 9_000
            sent["vh2"] += 9_000
    (tmp_path / "links.txt").write_text("\n".join(links) + "\n")
    job = tmp_path / "job"
    job.mkdir()
    rows = []
    for w in (0, 1):
        for it in (0, 1):
            start = t0 + it * 2.0          # iteration 1 starts at t0 + 2 s
            ev = []
            if it == 0:
                ev = [[7, "launch", 100.0 + 20 * w]]
            else:
                ev = [[7, "done", 100.0 - 10 * w], [7, "applied", 200.0], [7, "gathered", 1200.0 + 5 * w]]
            rows.append({"worker": w, "iter": it, "warmup": False, "t0_mono_s": start,
                         "bucket_mb": {"7": 4.0, "3": 1.0}, "bucket_events": ev})
    (job / "iterations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path / "links.txt", job


def test_windows_and_use_follow_from_the_trace(tmp_path, capsys):
    links, job = _write(tmp_path)
    assert ddp_linkuse.main([str(links), str(job), "--rate-mbit", "8", "--strips"]) == 0
    out = capsys.readouterr().out
    assert "bucket 7 (4.0 MB), uplinks vh1, vh2" in out
    assert "launch skew 20 ms, reduce-scatter 2000 ms (done skew 10), update +100 ms, all-gather 1000 ms" in out
    assert "reduce-scatter window [1.0, 0.5], all-gather window [0.9, 0.9]" in out
    assert "user 10% system 20% softirq 0% idle 70%" in out
    strip = next(line for line in out.splitlines() if line.strip().startswith("vh2 "))
    assert strip.split()[1].startswith("5555")


def test_no_events_is_an_error(tmp_path):
    links, job = _write(tmp_path)
    (job / "iterations.jsonl").write_text(json.dumps({"worker": 0, "iter": 0}) + "\n")
    assert ddp_linkuse.main([str(links), str(job), "--rate-mbit", "8"]) == 2
