#!/usr/bin/env python3
"""Builds only what the given meson test suites need: each test's executable and the targets
meson records as its dependencies (programs passed as arguments, helper peers). A sanitizer tree
then skips the CLI, bench and GPU programs that its suites never run (make tsan; .ci/run's
budget, docs/architecture.md "Sanitizers in CI").

    scripts/build_suite_targets.py BUILD_DIR JOBS SUITE [SUITE ...]

Exit: ninja's status; 1 when a suite has no test in BUILD_DIR (a typo must not build nothing
and pass); 2 usage."""
import json
import os
import subprocess
import sys


def introspect(build: str, what: str):
    return json.loads(subprocess.check_output(["meson", "introspect", build, what]))


def main() -> int:
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    build, jobs, suites = sys.argv[1], sys.argv[2], set(sys.argv[3:])
    root = os.path.abspath(build)
    by_id = {t["id"]: t for t in introspect(build, "--targets")}
    wanted, matched = set(), set()
    for test in introspect(build, "--tests"):
        hit = {s.split(":")[-1] for s in test["suite"]} & suites
        if not hit:
            continue
        matched |= hit
        for dep in test.get("depends", []):
            if dep in by_id:
                wanted.update(by_id[dep]["filename"])
        if test["cmd"] and test["cmd"][0].startswith(root + os.sep):
            wanted.add(test["cmd"][0])
    if suites - matched:
        print(f"build_suite_targets: no test in {build} belongs to: {', '.join(sorted(suites - matched))}",
              file=sys.stderr)
        return 1
    outputs = sorted(os.path.relpath(f, root) for f in wanted)
    print(f"build_suite_targets: {len(outputs)} targets for suites {', '.join(sorted(suites))}")
    return subprocess.call(["ninja", "-C", build, "-j", jobs] + outputs)


if __name__ == "__main__":
    sys.exit(main())
