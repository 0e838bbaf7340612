"""Find the runnable commands in Markdown docs (README.md, docs/*.md) by their test markers.

Contract: ``parse(path, text)`` returns (commands, errors). A marker is an HTML comment
(invisible when rendered) that applies to the code right after it:

    <!-- test: expect="TEXT" [rc=N] [timeout=S] [small="--flag V ..."] [env="K=V ..."]
               [needs="root,gpu,..."] [skip="REASON"] [lock=FILE] [venv=DIR] -->

either a fenced block starting on the next line, or an inline code span directly after the
comment on the same line. docs/testing.md is the reference for the keys. ``unmarked(path,
text)`` lists the code that looks like a command a user would copy but has no marker. Stdlib
only, so the suite runs without the project's venvs.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

KEYS = {"expect", "rc", "timeout", "small", "env", "needs", "skip", "lock", "venv"}
REPEATABLE = {"expect", "small", "skip"}        # once for every command, or once per command in order
DEFAULT_TIMEOUT = 60.0

MARKER_START = re.compile(r"<!--\s*test:")
ATTR = re.compile(r'\s*([a-z]+)=("(?:[^"\\]|\\.)*"|[^\s"]+)')
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
INLINE_SPAN = re.compile(r"`([^`]+)`")
SHELL_LANGS = {"", "sh", "bash", "shell", "console", "text"}
# First words of code a user would run (after optional VAR=value assignments and sudo).
ENTRY = re.compile(r"^(?:sudo\s+)?(?:[A-Z_][A-Z0-9_]*=\S*\s+)*"
                   r"(?P<cmd>build[\w-]*/\S+|tictac|torchrun|python3?|\.venv[\w-]*/bin/\S+|bench/\S+|"
                   r"scripts/\S+|integration/\S+\.(?:sh|py)|make|flock|bash|meson|ninja)(?:\s|$)")


@dataclass
class Command:
    """One command to run: where it is, its text as written, and what its marker asks."""
    path: str
    line: int                     # 1-based line of the command in the file
    text: str                     # the command as written (continuations joined, comments cut)
    expect: str = ""
    rc: int = 0
    timeout: float = DEFAULT_TIMEOUT
    small: str = ""
    env: Dict[str, str] = field(default_factory=dict)
    needs: List[str] = field(default_factory=list)
    skip: str = ""
    lock: str = ""                # a file to hold flock on while it runs (benchmarks)
    venv: str = ".venv"           # whose bin/ goes first on PATH (python, torchrun)
    group: str = ""               # the marker's file:line; a block's commands share one folder

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def parse_marker(body: str) -> Tuple[Dict[str, List[str]], List[str]]:
    """The key=value pairs of a marker's body (after 'test:'); errors name the bad part."""
    attrs: Dict[str, List[str]] = {}
    errors: List[str] = []
    pos = 0
    while pos < len(body):
        if body[pos:].strip() == "":
            break
        m = ATTR.match(body, pos)
        if not m:
            errors.append(f"cannot read {body[pos:].strip()!r}: want key=value or key=\"value\"")
            break
        key, val = m.group(1), m.group(2)
        if val.startswith('"'):
            val = re.sub(r'\\(.)', r'\1', val[1:-1])
        if key not in KEYS:
            errors.append(f"unknown key {key!r} (known: {', '.join(sorted(KEYS))})")
        elif key in attrs and key not in REPEATABLE:
            errors.append(f"key {key!r} given twice")
        attrs.setdefault(key, []).append(val)
        pos = m.end()
    return attrs, errors


def strip_comment(line: str) -> str:
    """The line without a trailing shell comment (' # ...' outside quotes)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
    return line.rstrip()


def block_commands(lines: List[str], first_line: int) -> List[Tuple[int, str]]:
    """(line, command) pairs of a fenced block: its '$ ' lines when it shows a transcript (the
    other lines are output), else every line that is not blank or a comment; a trailing
    backslash joins the next line."""
    transcript = any(re.match(r"^\s*\$ ", ln) for ln in lines)
    out: List[Tuple[int, str]] = []
    pending: Optional[List] = None
    for i, raw in enumerate(lines):
        if pending is not None:
            text = strip_comment(raw).strip()
            pending[1] += " " + text.rstrip("\\").strip()
            if not text.endswith("\\"):
                out.append((pending[0], pending[1].strip()))
                pending = None
            continue
        s = raw.strip()
        if transcript:
            if not s.startswith("$ "):
                continue
            s = s[2:]
        if not s or s.startswith("#"):
            continue
        s = strip_comment(s)
        if s.endswith("\\"):
            pending = [first_line + i, s[:-1].strip()]
        else:
            out.append((first_line + i, s))
    if pending is not None:
        out.append((pending[0], pending[1].strip()))
    return out


def _attach(path: str, line: int, col: int, cmds: List[Tuple[int, str]], attrs: Dict[str, List[str]],
            errors: List[str]) -> List[Command]:
    where = f"{path}:{line}"
    if not cmds:
        errors.append(f"{where}: marker is followed by no command")
        return []
    n = len(cmds)
    per: Dict[str, List[str]] = {}
    for key in REPEATABLE:
        vals = attrs.get(key, [""])
        if len(vals) not in (1, n):
            errors.append(f"{where}: {len(vals)} {key}= values for {n} commands (give one, or one per command)")
            return []
        per[key] = vals * n if len(vals) == 1 else vals
    try:
        rc = int(attrs.get("rc", ["0"])[0])
        timeout = float(attrs.get("timeout", [str(DEFAULT_TIMEOUT)])[0])
        env = dict(kv.split("=", 1) for kv in shlex.split(attrs.get("env", [""])[0]))
    except ValueError as e:
        errors.append(f"{where}: bad rc=, timeout= or env= ({e})")
        return []
    needs = [x for x in re.split(r"[,\s]+", attrs.get("needs", [""])[0]) if x]
    out = []
    for i, (ln, text) in enumerate(cmds):
        skip = per["skip"][i]
        if not skip and not per["expect"][i]:
            errors.append(f"{path}:{ln}: no expect= for {text!r} (every run command checks one line of output)")
            continue
        out.append(Command(path, ln, text, expect=per["expect"][i], rc=rc, timeout=timeout,
                           small=per["small"][i], env=env, needs=needs, skip=skip,
                           lock=attrs.get("lock", [""])[0], venv=attrs.get("venv", [".venv"])[0], group=f"{where}:{col}"))
    return out


def find_marker(line: str, col: int = 0):
    """The first marker start on the line from ``col`` that is not inside an inline code span."""
    for m in MARKER_START.finditer(line, col):
        if line[:m.start()].count("`") % 2 == 0:
            return m
    return None


def parse(path: str, text: str) -> Tuple[List[Command], List[str]]:
    """Every marked command of one Markdown file, and the errors in its markers."""
    lines = text.split("\n")
    commands: List[Command] = []
    errors: List[str] = []
    i, col = 0, 0                           # scan position: line, column
    while i < len(lines):
        fence = FENCE.match(lines[i]) if col == 0 else None
        if fence:                           # markers shown inside a code block are examples
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(fence.group(2)):
                i += 1
            i += 1
            continue
        m = find_marker(lines[i], col)
        if not m:
            i, col = i + 1, 0
            continue
        start = i
        chunk = lines[i][m.end():]
        while "-->" not in chunk and i + 1 < len(lines):
            i += 1
            chunk += " " + lines[i]
        if "-->" not in chunk:
            errors.append(f"{path}:{start + 1}: marker never closed with -->")
            break
        body, rest = chunk.split("-->", 1)
        attrs, errs = parse_marker(body)
        errors += [f"{path}:{start + 1}: {e}" for e in errs]
        span = re.match(r"\s*`([^`]+)`", rest)
        bad = f"{path}:{start + 1}: marker must be followed by `code` on its line or a fenced block"
        if span:
            cmds = [(i + 1, strip_comment(span.group(1)).strip())]
            col = len(lines[i]) - len(rest) + span.end()      # more markers may follow on the line
        elif rest.strip():
            errors.append(bad)
            i, col = i + 1, 0
            continue
        else:
            i, col = i + 1, 0
            fence = FENCE.match(lines[i]) if i < len(lines) else None
            if not fence:
                errors.append(bad)
                continue
            end = i + 1
            while end < len(lines) and not lines[end].strip().startswith(fence.group(2)):
                end += 1
            cmds = block_commands(lines[i + 1:end], i + 2)
            i = end + 1
        if not errs:
            commands += _attach(path, start + 1, m.start(), cmds, attrs, errors)
    return commands, errors


def looks_like_command(code: str, inline: bool) -> bool:
    """Code a user would copy and run: starts with an entry point of this project. Inline code
    counts only when it names a path or launcher (build/tictac, bench/..., torchrun, python -m:
    a bare `tictac order` in prose names the tool) and is not a synopsis ([optional], {a,b},
    ..., CAPITAL placeholders)."""
    code = code.strip()
    m = ENTRY.match(code)
    if not m:
        return False
    if not inline:
        return True
    cmd = m.group("cmd")
    if cmd in ("tictac", "make", "meson", "ninja", "bash", "flock") and not code.startswith("flock "):
        return False
    if re.search(r"[\[{]|\.\.\.|(?<![\w-])[A-Z]{2,}(?![\w=])", code):
        return False
    args = code[m.end("cmd"):].split()
    if cmd == "flock":
        return len(args) >= 2
    if cmd in ("python", "python3") or cmd.endswith("/python"):
        return " -m " in code or bool(re.search(r"\s\S+\.py(\s|$)", code))
    return bool(args) or cmd.endswith(".sh")        # a bare path names a file or a tool


def unmarked(path: str, text: str) -> List[str]:
    """'path:line: code' for each command-like fenced block or inline span with no marker."""
    lines = text.split("\n")
    out: List[str] = []
    i = 0
    marked_next = False
    while i < len(lines):
        ln = lines[i]
        fence = FENCE.match(ln)
        if fence:
            end = i + 1
            while end < len(lines) and not lines[end].strip().startswith(fence.group(2)):
                end += 1
            if fence.group(3) in SHELL_LANGS and not marked_next:
                cmds = block_commands(lines[i + 1:end], i + 2)
                if any(looks_like_command(c, inline=False) for _, c in cmds):
                    out.append(f"{path}:{i + 1}: fenced block ({cmds[0][1][:60]!r} ...)")
            marked_next = False
            i = end + 1
            continue
        stripped = ln.strip()
        marker = find_marker(ln)
        marked_next = bool(marker) and stripped.endswith("-->") and not re.search(r"-->\s*`", ln)
        if marker and "-->" not in ln[marker.end():]:        # a marker over several lines
            while i + 1 < len(lines) and "-->" not in lines[i]:
                i += 1
            marked_next = True
            i += 1
            continue
        for span in INLINE_SPAN.finditer(ln):
            before = ln[:span.start()]
            if re.search(r"<!--\s*test:[^>]*-->\s*$", before):
                continue
            if looks_like_command(span.group(1), inline=True):
                out.append(f"{path}:{i + 1}: `{span.group(1)[:70]}`")
        i += 1
    return out
