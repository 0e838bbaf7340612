#!/usr/bin/env python3
"""Run the marked commands of README.md and docs/*.md, small, and check what they print.

    tests/docs/run_docs.py --source . --build build [--only TEXT] [--list] [--lint]

Each marked command (tests/docs/doccmds.py, docs/testing.md) runs under bash in a scratch
folder (one per marker, so a block's commands see each other's files) that links every
top-level entry of the source tree (``build`` -> the build folder): `build/tictac ...` and
`bench/...` work as written, and files the command writes stay out of the tree. PATH starts
with the build folder (`tictac ...`) and the marker's venv (.venv: python, torchrun);
PYTHONPATH and TICTAC_BUILD_DIR point at this tree. A command passes when its exit status is
the marker's rc (0) and one line of its output contains the marker's expect text. Exit status:
0 all commands that ran passed, 1 a command failed or a marker is malformed (with --lint: or a
command has no marker), 77 nothing could run here (every command skipped).
"""

from __future__ import annotations

import argparse
import fcntl
import glob
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import doccmds  # noqa: E402


def doc_files(source: str) -> List[str]:
    return [os.path.join(source, "README.md")] + sorted(glob.glob(os.path.join(source, "docs", "*.md")))


def apply_small(cmd: str, small: str) -> str:
    """The command with the small-size override: each --flag [VALUE] of ``small`` replaces that
    flag's value where the command has it, else goes at the end of the command's first part
    (before a pipe, ;, && or redirection)."""
    toks = shlex.split(small)
    pairs: List[Tuple[str, Optional[str]]] = []
    i = 0
    while i < len(toks):
        if not toks[i].startswith("-"):
            raise ValueError(f"small= must be --flag [value] pairs, got {toks[i]!r}")
        val = toks[i + 1] if i + 1 < len(toks) and not toks[i + 1].startswith("--") else None
        pairs.append((toks[i], val))
        i += 2 if val is not None else 1
    cut = re.search(r"\s(\||&&|;|>|2>)\s", cmd)
    head, tail = (cmd[:cut.start()], cmd[cut.start():]) if cut else (cmd, "")
    for flag, val in pairs:
        pat = re.compile(rf"(?<!\S){re.escape(flag)}(?:(=)|\s+)(?!-)(\S+)" if val is not None
                         else rf"(?<!\S){re.escape(flag)}(?!\S)")
        if pat.search(head):
            if val is not None:
                head = pat.sub(lambda m: f"{flag}{m.group(1) or ' '}{shlex.quote(val)}", head, count=1)
        else:
            head += f" {flag}" + (f" {shlex.quote(val)}" if val is not None else "")
    return head + tail


def missing_need(need: str, source: str, build: str) -> str:
    """Why ``need`` is not met here ('' when it is)."""
    if need == "root":
        return "" if os.geteuid() == 0 else "needs root (network namespaces, tc)"
    if need == "gpu":
        return "" if glob.glob("/dev/nvidia[0-9]*") else "needs an NVIDIA GPU (no /dev/nvidia*)"
    if need == "rdma":
        return "" if glob.glob("/sys/class/infiniband/*") else "needs an RDMA device (none in /sys/class/infiniband)"
    if need == "torch":
        ok = os.path.exists(os.path.join(source, ".venv", "bin", "python")) and \
            glob.glob(os.path.join(build, "integration", "torch", "_C*.so"))
        return "" if ok else "needs .venv with torch and the built tictac.torch extension (make deps, make build)"
    if need == "tf":
        ok = os.path.exists(os.path.join(source, ".venv-tf", "bin", "python"))
        return "" if ok else "needs .venv-tf (scripts/install-tf-deps.sh)"
    if need.startswith("cmd:"):
        return "" if shutil.which(need[4:]) else f"needs {need[4:]} on PATH"
    return f"unknown need {need!r} (known: root, gpu, rdma, torch, tf, cmd:NAME)"


def scratch_dir(source: str, build: str) -> str:
    """A folder whose entries link to the source tree's top level, with build -> ``build``."""
    d = tempfile.mkdtemp(prefix="tictac-docs-")
    for name in os.listdir(source):
        if name in ("build", ".git"):
            continue
        os.symlink(os.path.join(source, name), os.path.join(d, name))
    os.symlink(build, os.path.join(d, "build"))
    return d


def run_one(c: doccmds.Command, source: str, build: str, work: str) -> Tuple[str, str, float]:
    """(status, detail, seconds): status PASS, FAIL or SKIP. Runs in ``work``."""
    if c.skip:
        return "SKIP", c.skip, 0.0
    for need in c.needs:
        why = missing_need(need, source, build)
        if why:
            return "SKIP", why, 0.0
    try:
        cmd = apply_small(c.text, c.small) if c.small else c.text
    except ValueError as e:
        return "FAIL", str(e), 0.0
    env = dict(os.environ)
    venv_bin = os.path.join(source, c.venv, "bin")
    if os.path.isdir(venv_bin):
        env["PATH"] = venv_bin + os.pathsep + env.get("PATH", "")
        env["VIRTUAL_ENV"] = os.path.join(source, c.venv)
    env["PATH"] = build + os.pathsep + env["PATH"]         # `tictac ...` as the docs write it
    env["PYTHONPATH"] = os.path.join(source, "python") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["TICTAC_BUILD_DIR"] = build
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(c.env)
    argv = ["bash", "-c", cmd]
    t0 = time.monotonic()
    p = subprocess.Popen(argv, cwd=work, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=c.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)         # the group this command started, nothing else
        out, _ = p.communicate()
        return "FAIL", f"timed out after {c.timeout:g} s: {cmd}\n" + tail(out), time.monotonic() - t0
    secs = time.monotonic() - t0
    text = out.decode(errors="replace")
    problems = []
    if p.returncode != c.rc:
        problems.append(f"exit status {p.returncode}, want {c.rc}")
    if not any(c.expect in ln for ln in text.splitlines()):
        problems.append(f"no output line contains {c.expect!r}")
    if problems:
        return "FAIL", "; ".join(problems) + f"\n  ran: {cmd}\n" + tail(out), secs
    return "PASS", cmd if cmd != c.text else "", secs


class BlockLock:
    """The marker's lock= file, held (flock) while its block's commands run, so a command never
    overlaps another measurement. Waits up to DOCS_TEST_LOCK_WAIT seconds (default 30); when
    the lock stays busy, the block is skipped with that reason (a visible skip, not a failure:
    someone else's benchmark is running), and later blocks on that lock only try it once."""

    def __init__(self):
        self.group, self.f, self.busy = "", None, ""
        self.gave_up: set = set()

    def enter(self, c: doccmds.Command) -> str:
        """'' when ``c`` may run now, else why not."""
        if c.group != self.group:
            self.release()
            self.group = c.group
            if c.lock and not c.skip:
                self.busy = self._acquire(c.lock)
        return self.busy if c.lock else ""

    def _acquire(self, path: str) -> str:
        wait = 0.0 if path in self.gave_up else float(os.environ.get("DOCS_TEST_LOCK_WAIT", "30"))
        self.f = open(path, "a")
        end = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(self.f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return ""
            except BlockingIOError:
                if time.monotonic() >= end:
                    self.f.close()
                    self.f = None
                    waited = f"stayed locked for {wait:g} s" if path not in self.gave_up else \
                        "still locked (waited for it earlier in this run)"
                    self.gave_up.add(path)
                    return f"{path} {waited}: another measurement is running; rerun later"
                time.sleep(0.5)

    def release(self):
        if self.f:
            self.f.close()                      # closing drops the flock
        self.f, self.busy = None, ""


def tail(out: bytes, n: int = 15) -> str:
    lines = out.decode(errors="replace").splitlines()[-n:]
    return "\n".join("  | " + ln for ln in lines)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", default=".", help="source tree (README.md, docs/)")
    ap.add_argument("--build", default="build", help="build folder (`build/` in the docs means this)")
    ap.add_argument("--only", help="run only commands whose file:line or text contains this")
    ap.add_argument("--list", action="store_true", help="list the marked commands, run nothing")
    ap.add_argument("--lint", action="store_true", help="check markers and list commands without one")
    a = ap.parse_args(argv)
    source, build = os.path.abspath(a.source), os.path.abspath(a.build)
    commands: List[doccmds.Command] = []
    errors: List[str] = []
    missing: List[str] = []
    for path in doc_files(source):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        rel = os.path.relpath(path, source)
        cmds, errs = doccmds.parse(rel, text)
        commands += cmds
        errors += errs
        missing += doccmds.unmarked(rel, text)
    for e in errors:
        print(f"MARKER ERROR {e}")
    if a.lint:
        for m in missing:
            print(f"UNMARKED {m}")
        print(f"{len(commands)} marked commands, {len(errors)} marker errors, {len(missing)} unmarked commands")
        return 1 if errors or missing else 0
    if a.only:
        commands = [c for c in commands if a.only in c.where or a.only in c.text]
    if a.list:
        for c in commands:
            print(f"{c.where}: {c.text}" + (f"  [skip: {c.skip}]" if c.skip else ""))
        return 1 if errors else 0
    if not commands:
        print("no marked commands found" + (f" matching {a.only!r}" if a.only else ""))
        return 1
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    failures: List[str] = []
    t_all = time.monotonic()
    works = {}
    lock = BlockLock()
    for c in commands:
        if c.group not in works:
            works[c.group] = scratch_dir(source, build)
        busy = lock.enter(c)
        status, detail, secs = ("SKIP", busy, 0.0) if busy else run_one(c, source, build, works[c.group])
        counts[status] += 1
        head = f"{status} {c.where} [{secs:.1f} s] {c.text}"
        if status == "SKIP":
            print(f"{head}\n  skipped: {detail}", flush=True)
        elif status == "FAIL":
            print(f"{head}\n  {detail}", flush=True)
            failures.append(f"{head}\n  {detail}")
        else:
            print(head + (f"\n  ran (small): {detail}" if detail else ""), flush=True)
    lock.release()
    for w in works.values():
        shutil.rmtree(w, ignore_errors=True)
    # Repeated last: meson shows only a long log's last lines, where the skips would hide them.
    for f in failures:
        print(f)
    print(f"docs: {counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped "
          f"(reasons above) in {time.monotonic() - t_all:.0f} s")
    if counts["FAIL"] or errors:
        return 1
    return 77 if counts["PASS"] == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
