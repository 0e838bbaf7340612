#!/usr/bin/env python3
"""Prints one closing line for a meson test run: 'tests: N passed, N failed, N skipped'.

Reads BUILD/meson-logs/testlog.json (one JSON object per test). Exits 1 when any test failed
or timed out, or when no test ran at all, so a broken or empty run can never look green.
"""
import json
import sys

build = sys.argv[1] if len(sys.argv) > 1 else "build"
counts = {"passed": 0, "failed": 0, "skipped": 0}
failed_names = []
try:
    with open(f"{build}/meson-logs/testlog.json", encoding="utf-8") as log:
        for line in log:
            if not line.strip():
                continue
            entry = json.loads(line)
            result = entry.get("result", "")
            if result in ("OK", "EXPECTEDFAIL"):
                counts["passed"] += 1
            elif result == "SKIP":
                counts["skipped"] += 1
            else:
                counts["failed"] += 1
                failed_names.append(f"{entry.get('name')} ({result})")
except OSError as err:
    print(f"test summary: cannot read the meson test log: {err}", file=sys.stderr)
    sys.exit(1)

if failed_names:
    print("failed: " + ", ".join(failed_names))
print(f"tests: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
sys.exit(1 if counts["failed"] or counts["passed"] == 0 else 0)
