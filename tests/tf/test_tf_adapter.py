"""Tests of the TensorFlow adapter (integration/tf op library + python/tictac/tf).

Run: .venv-tf/bin/python -m pytest -q tests/tf (or `meson test -C build tf`). Skipped, with
the reason, when the op library is not built. Every cluster test runs 1 server + 2 workers as
subprocesses over loopback with a FileStore in a temporary directory.
"""
import os
import pathlib
import subprocess
import sys
import time

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


def test_library_loads_in_fresh_process():
    code = ("import tictac.tf as tt; print(tt.library_path); "
            "print(sorted(n for n in dir(tt.ops) if n.startswith('Tictac')))")
    p = subprocess.run([PY, "-c", code], env=_env(), capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "libtictac_tf_ops.so" in p.stdout
    for op in ["TictacInit", "TictacPull", "TictacPullAll", "TictacPush", "TictacPushAll", "TictacShutdown",
               "TictacPullStart", "TictacPullWait", "TictacStamp"]:
        assert op in p.stdout, p.stdout


def test_missing_library_gives_clear_import_error(tmp_path):
    code = "import tictac.tf"
    p = subprocess.run([PY, "-c", code], env=_env({"TICTAC_TF_LIBRARY": str(tmp_path / "nope.so")}),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert "ImportError" in p.stderr and "not built" in p.stderr and "nope.so" in p.stderr


def test_ops_without_init_fail_loudly():
    import tensorflow as tf
    with pytest.raises(tf.errors.FailedPreconditionError, match="call tictac.tf.init"):
        tt.pull(5, [2], tf.float32, 1)


def test_training_matches_single_process(tmp_path):
    rc, err, lines, res, save = _cluster(tmp_path, "fifo", ["--steps", "3", "--dim", "64", "--batch", "8"])
    assert rc == 0, (err[-3000:], res)
    assert res[1] and res[2], res
    assert len(lines) == 3
    got = np.load(save)
    want = tf_model.reference(64, steps=3, workers=2, batch=8, lr=0.1)
    for n in tf_model.FORWARD:
        assert got[n].dtype == np.float64
        np.testing.assert_allclose(got[n], want[n], rtol=0, atol=1e-5, err_msg=n)
    # and training moved the parameters
    init = tf_model.build(64)[0]
    assert max(float(np.abs(got[n] - v.numpy()).max()) for n, v in zip(tf_model.FORWARD, init)) > 1e-3


@pytest.mark.parametrize("policy", ["random", "tic"])
def test_transfers_arrive_in_policy_order(tmp_path, policy):
    # 4 x 2 MiB float64 weights (rendezvous-sized: eager small messages could overtake), declared
    # in reverse so that TIC must reorder them; one chunk in flight.
    args = ["--steps", "3", "--dim", "512", "--batch", "2", "--no-bias", "--reverse"]
    if policy == "tic":
        args.append("--graph")
    rc, err, lines, res, _ = _cluster(tmp_path, policy, args, env={"TICTAC_WINDOW": "1"})
    assert rc == 0, (err[-3000:], res)
    assert len(lines) == 3
    seen = set()
    for step, line in enumerate(lines):
        for r in (1, 2):
            expected = line["expected_order"][str(r)]
            assert res[r]["arrivals"][step] == expected, (policy, step, r)
            seen.add(tuple(expected))
    if policy == "tic":
        assert seen == {tuple(tf_model.FORWARD_NOBIAS)}  # the forward order, not declaration order
    else:
        assert len(seen) > 1  # a fresh order per worker and step


def test_dead_worker_fails_server_within_timeout(tmp_path):
    t0 = time.monotonic()
    # worker 2 dies at the start of its second step (after the first step's push)
    store = f"file:{tmp_path / 'store'}"
    srv = subprocess.Popen([PY, "-m", "tictac.tf.server", "--rank", "0", "--world-size", "3", "--store", store,
                            "--policy", "fifo", "--timeout", "10"], env=_env(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wks = [subprocess.Popen([PY, str(HERE / "tf_worker.py"), "--rank", str(r), "--world", "3", "--store", store,
                             "--out", str(tmp_path / f"w{r}.json"), "--timeout", "10", "--steps", "5",
                             *(["--die-after", "1"] if r == 2 else [])],
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
           for r in (1, 2)]
    try:
        _, err = srv.communicate(timeout=50)
    finally:
        for p in [srv] + wks:
            if p.poll() is None:
                p.kill()
            p.wait()
    elapsed = time.monotonic() - t0
    assert srv.returncode == 1, err[-3000:]
    assert "FAILED" in err and "rank 2" in err, err[-3000:]
    assert wks[1].returncode == 3
    assert elapsed < 50


def test_tic_on_exported_graph_gives_forward_order():
    import tensorflow as tf
    from tictac.tf.export_graph import export_function, order_priorities

    variables, names, _, loss_fn = tf_model.build(32, reverse=True)  # declared b3 w3 b2 w2 b1 w1
    x = tf.zeros([4, 32], tf.float64)
    y = tf.zeros([4, 4], tf.float64)
    graph = export_function(tf.function(loss_fn), (x, y), variables=variables, names=names)
    recvs = [o["name"] for o in graph["ops"] if o["kind"] == "recv"]
    assert sorted(recvs) == sorted(tf_model.FORWARD)
    prio = order_priorities(graph, "tic")
    layer = {n: int(n[1]) for n in tf_model.FORWARD}
    # TIC: every parameter of layer k goes before any of layer k+1 (a weight and its bias may tie)
    for a in tf_model.FORWARD:
        for b in tf_model.FORWARD:
            if layer[a] < layer[b]:
                assert prio[a] < prio[b], (a, b, prio)
    # the same graph also carries the backward pass: a tape step exports without error
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(x, y)
        return tape.gradient(loss, variables)
    g2 = export_function(tf.function(step), (x, y), variables=variables, names=names)
    p2 = order_priorities(g2, "tic")
    assert all(p2[a] < p2[b] for a in tf_model.FORWARD for b in tf_model.FORWARD if layer[a] < layer[b]), p2
