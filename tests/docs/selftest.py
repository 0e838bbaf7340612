#!/usr/bin/env python3
"""Self-test of the docs-command suite (doccmds.py, run_docs.py) on made-up documents.

Includes the counter-checks: a wrong expect, a wrong exit status and a timeout each make a
command FAIL, so the suite cannot pass commands it did not check. Stdlib unittest only.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import doccmds  # noqa: E402
import run_docs  # noqa: E402


def cmd(text: str, **kw) -> doccmds.Command:
    return doccmds.Command("t.md", 1, text, **kw)


class ParseTest(unittest.TestCase):
    def test_block_with_one_expect_for_every_command(self):
        doc = '<!-- test: expect="ok" timeout=5 -->\n```\nbuild/tictac help\nbuild/tictac info  # note\n```\n'
        cmds, errs = doccmds.parse("a.md", doc)
        self.assertEqual(errs, [])
        self.assertEqual([(c.line, c.text, c.expect, c.timeout) for c in cmds],
                         [(3, "build/tictac help", "ok", 5.0), (4, "build/tictac info", "ok", 5.0)])
        self.assertEqual(cmds[0].group, cmds[1].group)

    def test_one_expect_per_command_and_transcript(self):
        doc = ('<!-- test: expect="a" expect="b" -->\n```\n$ tictac x \\\n    --flag 1\noutput line\n'
               '$ tictac y\nmore output\n```\n')
        cmds, errs = doccmds.parse("a.md", doc)
        self.assertEqual(errs, [])
        self.assertEqual([(c.text, c.expect) for c in cmds], [("tictac x --flag 1", "a"), ("tictac y", "b")])

    def test_inline_spans_several_on_a_line(self):
        doc = ('Run <!-- test: expect="x" -->`bench/a.sh`, then <!-- test: skip="why" -->`bench/b.sh --n 2` '
               'and `not marked`.\n')
        cmds, errs = doccmds.parse("a.md", doc)
        self.assertEqual(errs, [])
        self.assertEqual([(c.text, c.expect, c.skip) for c in cmds],
                         [("bench/a.sh", "x", ""), ("bench/b.sh --n 2", "", "why")])

    def test_markers_inside_code_are_examples(self):
        doc = '```\n<!-- test: expect="x" -->\n```\nthe form `<!-- test: expect="y" -->` in prose\n'
        self.assertEqual(doccmds.parse("a.md", doc), ([], []))

    def test_per_command_skip_and_small(self):
        doc = ('<!-- test: expect="x" skip="" skip="one rank of N" small="--n 1" small="" -->\n'
               '```\npython -m a --n 5\npython -m a --rank R\n```\n')
        cmds, errs = doccmds.parse("a.md", doc)
        self.assertEqual(errs, [])
        self.assertEqual([(c.skip, c.small) for c in cmds], [("", "--n 1"), ("one rank of N", "")])

    def test_malformed_markers_are_errors(self):
        cases = {
            '<!-- test: expect="x" bogus=1 -->\n`build/tictac help`\n': "unknown key 'bogus'",
            '<!-- test: timeout=5 -->`build/tictac help`\n': "no expect=",
            '<!-- test: expect="a" expect="b" expect="c" -->\n```\nx\ny\n```\n': "3 expect= values for 2 commands",
            '<!-- test: expect="x"\n\nnever closed\n': "never closed",
            '<!-- test: expect="x" -->\n\n```\nx\n```\n': "must be followed by",
            '<!-- test: expect="x" rc=zero -->`x`\n': "bad rc=",
            '<!-- test: expect="x" timeout=1 timeout=2 -->`x`\n': "given twice",
        }
        for doc, want in cases.items():
            cmds, errs = doccmds.parse("a.md", doc)
            self.assertTrue(any(want in e for e in errs), f"{doc!r}: {errs}")

    def test_unmarked_commands_are_listed(self):
        doc = ('```\nbuild/tictac help\n```\n'                                   # unmarked block
               '<!-- test: skip="r" -->\n```\nbuild/tictac info\n```\n'          # marked block
               '```json\n{"a": 1}\n```\n'                                        # not shell
               'Run `bench/x.sh` or `torchrun --nproc-per-node 2 -m m` or <!-- test: skip="r" -->`bench/y.sh`.\n'
               'Synopsis `bench/z.sh [BUILD_DIR]`, tool name `tictac order`, file `bench/tac_bench.cc`.\n')
        got = doccmds.unmarked("a.md", doc)
        self.assertEqual(len(got), 3, got)
        self.assertIn("a.md:1: fenced block", got[0])
        self.assertIn("`bench/x.sh`", got[1])
        self.assertIn("`torchrun --nproc-per-node 2 -m m`", got[2])


class SmallTest(unittest.TestCase):
    def test_replace_append_and_pipes(self):
        f = run_docs.apply_small
        self.assertEqual(f("t --iters 20 --x", "--iters 2"), "t --iters 2 --x")
        self.assertEqual(f("t --iters=20", "--iters 2"), "t --iters=2")
        self.assertEqual(f("t --x", "--iters 2 --quiet"), "t --x --iters 2 --quiet")
        self.assertEqual(f("t --x | grep y", "--n 1"), "t --x --n 1 | grep y")
        self.assertEqual(f("t --quiet", "--quiet"), "t --quiet")
        with self.assertRaises(ValueError):
            f("t", "iters 2")


class RunTest(unittest.TestCase):
    def setUp(self):
        self.src = tempfile.mkdtemp(prefix="docs-selftest-")
        self.build = os.path.join(self.src, "bld")
        os.mkdir(self.build)
        self.work = run_docs.scratch_dir(self.src, self.build)

    def run_cmd(self, c):
        return run_docs.run_one(c, self.src, self.build, self.work)

    def test_pass(self):
        self.assertEqual(self.run_cmd(cmd("echo hello world", expect="hello"))[0], "PASS")

    def test_counter_check_wrong_expect_fails(self):
        status, detail, _ = self.run_cmd(cmd("echo hello", expect="goodbye"))
        self.assertEqual(status, "FAIL")
        self.assertIn("no output line contains 'goodbye'", detail)

    def test_counter_check_wrong_exit_status_fails(self):
        status, detail, _ = self.run_cmd(cmd("echo hello; exit 3", expect="hello"))
        self.assertEqual(status, "FAIL")
        self.assertIn("exit status 3, want 0", detail)
        self.assertEqual(self.run_cmd(cmd("echo hello; exit 3", expect="hello", rc=3))[0], "PASS")

    def test_counter_check_timeout_fails(self):
        status, detail, secs = self.run_cmd(cmd("echo started; sleep 30", expect="started", timeout=0.5))
        self.assertEqual(status, "FAIL")
        self.assertIn("timed out", detail)
        self.assertLess(secs, 10)

    def test_skips_name_their_reason(self):
        self.assertEqual(self.run_cmd(cmd("x", skip="too long"))[:2], ("SKIP", "too long"))
        status, detail, _ = self.run_cmd(cmd("x", expect="x", needs=["cmd:no-such-tool-here"]))
        self.assertEqual((status, detail), ("SKIP", "needs no-such-tool-here on PATH"))

    def test_small_env_and_build_link(self):
        c = cmd("echo --n 9 $EXTRA; ls -d build/", expect="--n 2 extra", small="--n 2", env={"EXTRA": "extra"})
        self.assertEqual(self.run_cmd(c)[0], "PASS")
        self.assertEqual(os.path.realpath(os.path.join(self.work, "build")), os.path.realpath(self.build))

    def test_busy_lock_skips_the_block_with_the_reason(self):
        import fcntl
        path = os.path.join(self.src, "bench.lock")
        doc = f'<!-- test: lock={path} expect="a" -->\n```\necho a\necho a\n```\n<!-- test: expect="b" -->`echo b`\n'
        cmds, errs = doccmds.parse("a.md", doc)
        self.assertEqual(errs, [])
        with open(path, "a") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            os.environ["DOCS_TEST_LOCK_WAIT"] = "0.3"
            try:
                lock = run_docs.BlockLock()
                why = [lock.enter(c) for c in cmds]
                lock.release()
            finally:
                del os.environ["DOCS_TEST_LOCK_WAIT"]
        self.assertIn("stayed locked", why[0])
        self.assertEqual(why[0], why[1])
        self.assertEqual(why[2], "")                      # the next block has no lock=
        lock = run_docs.BlockLock()                       # free now: runs
        self.assertEqual([lock.enter(c) for c in cmds], ["", "", ""])
        lock.release()

    def test_suite_exit_status(self):
        def main_on(doc):
            with open(os.path.join(self.src, "README.md"), "w") as f:
                f.write(doc)
            with contextlib.redirect_stdout(io.StringIO()) as out:
                rc = run_docs.main(["--source", self.src, "--build", self.build])
            return rc, out.getvalue()
        self.assertEqual(main_on('<!-- test: skip="not here" -->`bench/a.sh`\n')[0], 77)
        self.assertEqual(main_on('<!-- test: expect="hi" -->`echo hi`\n')[0], 0)
        rc, out = main_on('<!-- test: expect="hi" -->`echo hi`\n<!-- test: expect="no" -->`echo hi`\n')
        self.assertEqual(rc, 1)
        self.assertIn("1 passed, 1 failed", out)
        self.assertEqual(main_on('<!-- test: expect="hi" nope=1 -->`echo hi`\n')[0], 1)


if __name__ == "__main__":
    unittest.main(verbosity=1)
