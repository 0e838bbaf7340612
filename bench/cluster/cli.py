"""The launcher's command line: ``bench/cluster/cluster run|cleanup`` (python -m bench.cluster);
usage and exit statuses in launcher.py's docstring."""

from __future__ import annotations

import argparse
import sys

from .launcher import Cluster, ClusterTimeout, Interrupted, _exit_status
from .topology import ClusterError, RateError, _say, cleanup, parse_rate


# ---------------------------------------------------------------------------------------------
# command line


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="bench/cluster/cluster", description="Emulated cluster launcher (see README.md).")
    sub = ap.add_subparsers(dest="action", required=True)
    r = sub.add_parser("run", help="run CMD as N ranks on an emulated cluster",
                       usage="bench/cluster/cluster run --hosts N --rate RATE [options] -- CMD ARGS...")
    r.add_argument("--hosts", type=int, required=True)
    r.add_argument("--rate", required=True, help="tc rate: <n>bit|kbit|mbit|gbit, e.g. 1gbit")
    r.add_argument("--latency-ms", type=float, default=0.0)
    r.add_argument("--threads-per-proc", type=int, default=None)
    r.add_argument("--log-dir", default=None)
    r.add_argument("--timeout", type=float, default=1800.0)
    r.add_argument("--loopback", action="store_true")
    c = sub.add_parser("cleanup", help="delete leftover ttc-* namespaces of dead launchers")
    c.add_argument("--kill-orphans", action="store_true",
                   help="also kill processes still running inside those namespaces")
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, cmd = argv[:i], argv[i + 1:]
    args = _parser().parse_args(argv)  # exits 2 on bad flags
    if args.action == "cleanup":
        cleanup(kill_orphans=args.kill_orphans)
        return 0
    if not cmd:
        _say("run needs a command after '--' (bench/cluster/cluster run --hosts N --rate R -- CMD ARGS...)")
        return 2
    try:
        parse_rate(args.rate)
    except RateError as e:
        _say(f"bad --rate: {e}")
        return 2
    if args.timeout <= 0:
        _say(f"bad --timeout {args.timeout:g}: must be > 0")
        return 2
    try:
        cl = Cluster(args.hosts, args.rate, latency_ms=args.latency_ms,
                     threads_per_proc=args.threads_per_proc, log_dir=args.log_dir,
                     loopback=args.loopback, timeout=args.timeout)
    except ClusterError as e:
        _say(f"bad input: {e}")
        return 2
    try:
        with cl:
            codes = cl.run([cmd] * args.hosts)
            if cl.last_failure:
                return _exit_status(cl.last_failure["returncode"])
            bad = [(r, c) for r, c in enumerate(codes) if c != 0]
            if bad:  # cannot happen without last_failure, but never report success wrongly
                return _exit_status(bad[0][1])
            _say(f"all {args.hosts} rank(s) exited 0")
            return 0
    except ClusterTimeout:
        return 124
    except Interrupted as e:
        _say(f"{e}: stopped every rank and removed the cluster")
        return 128 + e.signum
    except KeyboardInterrupt:
        _say("interrupted: stopped every rank and removed the cluster")
        return 130
    except ClusterError as e:
        _say(f"error: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
