"""Samples every emulated host's link in a running bench/cluster cluster, for traces of link use.

Run inside the cluster's bridge namespace (``ip netns exec ttc-<pid>-br``; bench/e2e/ddp_link_probe.sh
does it): every PERIOD ms it writes, for each bridge-side veth ``vh<i>`` (host i), the bytes it
received (host i's uplink) and sent (host i's downlink), and the machine's /proc/stat cpu line,
stamped with CLOCK_MONOTONIC (the clock of ``time.perf_counter()`` in the ranks, so their events
line up):

    <t> vh<i> <uplink bytes> <downlink bytes>
    <t> cpu <user> <nice> <system> <idle> <iowait> <irq> <softirq> <steal>

Ends after DURATION s, or quietly when the cluster's devices disappear.
Usage: python3 link_sampler.py OUT [PERIOD_MS=10] [DURATION_S=600]
"""

from __future__ import annotations

import os
import sys
import time


def main(argv) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    out_path = argv[0]
    period = float(argv[1]) / 1e3 if len(argv) > 1 else 0.01
    end = time.monotonic() + (float(argv[2]) if len(argv) > 2 else 600.0)
    devs = sorted(d for d in os.listdir("/sys/class/net") if d.startswith("vh"))
    if not devs:
        print("link_sampler: no vh<i> devices here: run it in a bench/cluster bridge namespace", file=sys.stderr)
        return 2
    files = [(d, open(f"/sys/class/net/{d}/statistics/rx_bytes"), open(f"/sys/class/net/{d}/statistics/tx_bytes"))
             for d in devs]
    stat = open("/proc/stat")
    with open(out_path, "w") as out:
        try:
            while time.monotonic() < end:
                t = time.monotonic()
                for d, rx, tx in files:
                    rx.seek(0)
                    tx.seek(0)
                    out.write(f"{t:.6f} {d} {rx.read().strip()} {tx.read().strip()}\n")
                stat.seek(0)
                out.write(f"{t:.6f} cpu {' '.join(stat.readline().split()[1:9])}\n")
                time.sleep(period)
        except OSError:   # the cluster was torn down
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
