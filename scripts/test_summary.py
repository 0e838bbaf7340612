#!/usr/bin/env python3
"""Prints one closing line for a meson test run: 'tests: N passed, N failed, N skipped'.

Reads BUILD/meson-logs/testlog.json (one JSON object per test). Exits 1 when any test failed
or timed out, or when no test ran at all, so a broken or empty run can never look green.
`test_summary.py BUILD [MESON_STATUS]`: when meson test itself exited non-zero but its log records
no failure (meson crashed, e.g. on a junit file it could not parse, and lost results), that is
said, and the exit status is 1.

A suite that meson calls OK but whose pytest summary says nothing passed (e.g. '3 skipped in
1.2s': every test skipped) is counted as failed, not passed: a suite that ran nothing proves
nothing. Suites that passed with some skipped tests inside are listed, with the counts.
"""
import json
import re
import sys

# pytest's closing line, -q or not: "2 passed, 1 skipped in 3.10s" / "=== 1 skipped in 0.5s ==="
PYTEST_SUMMARY = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+) in [\d.]+s\b")


def pytest_counts(stdout):
    """{'passed': n, 'skipped': n, ...} from the last pytest summary line, or None."""
    for line in reversed((stdout or "").splitlines()):
        match = PYTEST_SUMMARY.match(line.strip())
        if match:
            return {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", match.group(1))}
    return None


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    meson_status = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    failed_names, partly_skipped = [], []
    try:
        with open(f"{build}/meson-logs/testlog.json", encoding="utf-8") as log:
            for line in log:
                if not line.strip():
                    continue
                entry = json.loads(line)
                result = entry.get("result", "")
                inner = pytest_counts(entry.get("stdout"))
                if result == "OK" and inner is not None and inner.get("skipped") and not inner.get("passed"):
                    result = "EVERY TEST SKIPPED"
                if result in ("OK", "EXPECTEDFAIL"):
                    counts["passed"] += 1
                    if inner and inner.get("skipped"):
                        partly_skipped.append(f"{entry.get('name')} ({inner['skipped']} skipped)")
                elif result == "SKIP":
                    counts["skipped"] += 1
                else:
                    counts["failed"] += 1
                    failed_names.append(f"{entry.get('name')} ({result})")
    except OSError as err:
        print(f"test summary: cannot read the meson test log: {err}", file=sys.stderr)
        return 1

    if partly_skipped:
        print("passed with skipped tests inside: " + ", ".join(partly_skipped))
    if failed_names:
        print("failed: " + ", ".join(failed_names))
    print(f"tests: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
    if meson_status != 0 and not counts["failed"]:
        print(f"test summary: meson test exited {meson_status} but its log records no failed test: meson "
              f"itself failed and results may be missing (see its output above)")
        return 1
    return 1 if counts["failed"] or counts["passed"] == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
