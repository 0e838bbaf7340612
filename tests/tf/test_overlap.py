"""Tests of overlapped steps (tictac.tf.overlapped: TictacPullStart / TictacPullWait, each
parameter read gated on its own transfer) and of the streamed-pull ops' errors.

Run: .venv-tf/bin/python -m pytest -q tests/tf/test_overlap.py (also in `meson test --suite tf`).
Skipped, with the reason, when the op library is not built.
"""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "python"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

try:
    import tictac.tf as tt
    _SKIP = ""
except ImportError as exc:  # the library is not built: say why
    tt = None
    _SKIP = str(exc)

pytestmark = pytest.mark.skipif(tt is None, reason=f"tictac.tf not importable: {_SKIP}")

import tf_model  # noqa: E402
from cluster import PY, _cluster, _env  # noqa: E402


@pytest.mark.parametrize("policy", ["tic", "tac", "random"])
def test_overlapped_training_matches_single_process(tmp_path, policy):
    rc, err, lines, res, save = _cluster(tmp_path, policy,
                                         ["--steps", "3", "--dim", "64", "--batch", "8", "--overlap"])
    assert rc == 0, (err[-3000:], res)
    assert res[1] and res[2], res
    assert len(lines) == 3
    got = np.load(save)
    want = tf_model.reference(64, steps=3, workers=2, batch=8, lr=0.1)
    for n in tf_model.FORWARD:
        np.testing.assert_allclose(got[n], want[n], rtol=0, atol=1e-5, err_msg=n)
    for r in (1, 2):  # every parameter went through a wait, and each layer was stamped
        assert all(sorted(a) == sorted(tf_model.FORWARD) for a in res[r]["arrival_s"]), res[r]["arrival_s"]
        assert all(len(d) == 3 for d in res[r]["layer_done_s"])


def test_first_layer_computes_before_the_last_parameter_lands(tmp_path):
    # 4 x 2 MiB weights at 100 MB/s from the server (about 20 ms each, 2 workers): with
    # per-parameter gating layer 0 is computed once w1 is there, while w4 is still on the wire.
    # If the waits and the stamp were all ordered as stateful ops, the stamp would follow the
    # last wait and this would fail.
    args = ["--steps", "4", "--dim", "512", "--batch", "2", "--no-bias", "--reverse", "--overlap"]
    rc, err, lines, res, _ = _cluster(tmp_path, "tic", args, env={"TICTAC_RATE_LIMIT": "100000000"})
    assert rc == 0, (err[-3000:], res)
    for r in (1, 2):
        steps = list(zip(res[r]["layer_done_s"], res[r]["arrival_s"]))[1:]  # step 0 also traces
        assert len(steps) == 3
        for step, (done, arrived) in enumerate(steps, start=1):
            last = max(arrived.values())
            assert done[0] >= arrived["w1"], (r, step, done, arrived)
            assert done[0] < last - 0.005, (r, step, "layer 0 waited for the last parameter", done, arrived)
            assert max(arrived, key=arrived.get) == "w4", (r, step, arrived)  # TIC: forward order


_ERRORS = r"""
import sys, time, pathlib
import tensorflow as tf
import tictac.tf as tt
rank, store, flag = int(sys.argv[1]), sys.argv[2], pathlib.Path(sys.argv[3])
# The group timeout (3 s) also bounds the connect, so both ranks first wait for each other past
# their TensorFlow import, which can differ by seconds on a loaded machine.
(flag.parent / f"imported-{rank}").touch()
t0 = time.monotonic()
while not (flag.parent / f"imported-{1 - rank}").exists():
    assert time.monotonic() - t0 < 60, "the other rank never imported tensorflow"
    time.sleep(0.02)
tt.ops.tictac_init(rank=rank, size=2, store=store, timeout_ms=3000, key_prefix="t/")
if rank == 0:
    t0 = time.monotonic()
    while not flag.exists() and time.monotonic() - t0 < 50:
        time.sleep(0.05)
    tt.shutdown()
    sys.exit(0)
def expect(exc, fn, *words):
    try:
        fn()
    except exc as e:
        for w in words:
            assert w in e.message, (w, e.message)
        print("OK", exc.__name__, flush=True)
        return
    raise AssertionError(f"no {exc.__name__}")
try:
    expect(tf.errors.FailedPreconditionError, lambda: tt.pull_wait(1007, tf.float32), "not started", "1007")
    tt.pull_start([(1007, [3], tf.float32, 0)])
    expect(tf.errors.InvalidArgumentError, lambda: tt.pull_start([(1007, [3], tf.float32, 0)]),
           "already started", "1007")
    expect(tf.errors.InvalidArgumentError,
           lambda: tt.pull_start([(1009, [3], tf.float32, 0), (1009, [3], tf.float32, 0)]), "twice")
    t0 = time.monotonic()
    expect(tf.errors.DeadlineExceededError, lambda: tt.pull_wait(1007, tf.float32),
           "timed out", "rank 0", "tag 1007", "cancelled")
    took = time.monotonic() - t0
    assert 2.5 < took < 15, took
    expect(tf.errors.FailedPreconditionError, lambda: tt.pull_wait(1007, tf.float32), "not started")
    tt.pull_start([(1007, [3], tf.float32, 0)])  # startable again after the cancel
    print("ALL_OK", flush=True)
finally:
    flag.touch()
    tt.shutdown()
"""


def test_stream_errors_are_clear(tmp_path):
    store, flag = f"file:{tmp_path / 'store'}", tmp_path / "done"
    procs = [subprocess.Popen([PY, "-c", _ERRORS, str(r), store, str(flag)], env=_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=90))
        except subprocess.TimeoutExpired:
            p.kill()
            outs.append(p.communicate())
    both = [f"rank {r}: rc {p.returncode}\n{o[0][-1500:]}\n{o[1][-3000:]}" for r, (p, o) in
            enumerate(zip(procs, outs))]
    assert procs[1].returncode == 0 and procs[0].returncode == 0, "\n".join(both)
    assert outs[1][0].count("OK ") == 5 and "ALL_OK" in outs[1][0], outs[1]
