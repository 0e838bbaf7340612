"""CI honesty: with the build's torch extension made unimportable (TICTAC_BUILD_DIR pointing at
an empty folder), a suite module that skips at module level must FAIL when the build enabled torch
(TICTAC_EXPECT_TORCH=1, as meson sets it), and skip only without that variable (counter-check).
Runs pytest on tests/torch/test_backend.py in a subprocess (tests/expect_extension.py)."""
import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent


def _run(tmp_path, expect):
    env = dict(os.environ, TICTAC_BUILD_DIR=str(tmp_path))  # no integration/torch/_C here
    env.pop("TICTAC_EXPECT_TORCH", None)
    if expect:
        env["TICTAC_EXPECT_TORCH"] = "1"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(HERE / "test_backend.py")]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


def test_unimportable_extension_fails_when_torch_enabled(tmp_path):
    r = _run(tmp_path, expect=True)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "FAILED (not skipped)" in out and "tictac.torch._C does not import" in out, out
    assert " skipped" not in out.splitlines()[-1], out


def test_counter_check_skips_without_expectation(tmp_path):
    r = _run(tmp_path, expect=False)
    out = r.stdout + r.stderr
    assert r.returncode in (0, 5), out  # 5: pytest's "no tests collected" (the module skipped)
    assert "skipped" in out.splitlines()[-1] and "FAILED" not in out, out
