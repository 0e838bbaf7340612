"""The grpc+tictac drop-in (integration/tf/rendezvous): TF1 graph-mode PS training with processes
on loopback (ps_train.py), the only change between runs being ``protocol=``.

- 1 PS + 2 workers: the final weights with grpc and grpc+tictac are equal (1e-5); with
  grpc+tictac every cross-task tensor went through TicTac (sent/received counts > 0 in every
  process, gRPC RecvTensor calls 0); with grpc the TicTac counters stay 0.
- Order, enforced at the PS: 4 x 2 MiB weights declared last layer first, TICTAC_WINDOW=1,
  TICTAC_RATE_LIMIT=25M (a weight takes 84 ms, so a step's fetches queue up): after the first
  step, the PS sends every weight in TIC order (out_of_order 0, strict); counter-check,
  TICTAC_PRIORITY=0 (the transport ignores priorities): out of order >= 3 in the same steps.
- TICTAC_TF_POLICY=tac (profiled op times from TICTAC_TF_OP_TIMES): the PS's sends carry TAC's
  priorities and leave in that order after step 1 (counter-check TICTAC_PRIORITY=0: >= 3 out of
  TAC order); without TICTAC_TF_OP_TIMES the server
  refuses to start with an InvalidArgumentError naming it.
- A killed PS: the worker's step fails with UnavailableError naming the PS task, within
  TICTAC_TIMEOUT.
- ParameterServerStrategy(rpc_layer="grpc+tictac") trains a small Keras model (custom loop) to
  grpc's weights, its tensors through TicTac.
- TICTAC_AUTH_TOKEN: equal tokens work, different ones fail with UnavailableError.
- Bad TICTAC_TF_PORT_OFFSET: server creation fails with InvalidArgumentError naming it.
"""
import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import tf_cluster as tc  # noqa: E402

LIB = pathlib.Path(os.environ.get("TICTAC_BUILD_DIR", tc.REPO / "build")) / "integration/tf/rendezvous/libtictac_tf_server.so"
if not LIB.is_file():  # the meson test exists only when it is built: fail, do not skip quietly
    pytest.fail(f"{LIB} is not built (meson option tf_rendezvous)", pytrace=False)

ORDER_ENV = {"TICTAC_WINDOW": "1", "TICTAC_RATE_LIMIT": "25M"}
ORDER_ARGS = ["--dim", "512", "--layers", "4", "--steps", "4", "--batch", "8", "--no-bias"]


KILL_TIMEOUT_S = 5


def _op_times(base):
    """TICTAC_TF_OP_TIMES for the tac cluster: a profile that names no node (every op takes the
    default) and the link of ORDER_ENV's rate limit."""
    path = base / "op_times.json"
    path.write_text(json.dumps({"ops": {}, "default_op_seconds": 1e-4, "bandwidth_bps": 8 * 25 * 2**20}))
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """All five clusters at once (they only share the CPU): grpc, grpc+tictac, the order run with
    and without priorities, and the run whose PS is killed once the worker has done 2 steps."""
    base = tmp_path_factory.mktemp("rdv")
    clusters = {
        "grpc": tc.Cluster(base / "grpc", "grpc", args=["--steps", "3"]),
        "tictac": tc.Cluster(base / "tictac", "grpc+tictac", args=["--steps", "3"]),
        "tic": tc.Cluster(base / "tic", "grpc+tictac", workers=1, extra_env=ORDER_ENV, args=ORDER_ARGS),
        "fifo": tc.Cluster(base / "fifo", "grpc+tictac", workers=1,
                           extra_env={**ORDER_ENV, "TICTAC_PRIORITY": "0"}, args=ORDER_ARGS),
        "tac": tc.Cluster(base / "tac", "grpc+tictac", workers=1,
                          extra_env={**ORDER_ENV, "TICTAC_TF_POLICY": "tac", "TICTAC_TF_TRACE": "1",
                                     "TICTAC_TF_OP_TIMES": str(_op_times(base))}, args=ORDER_ARGS),
        "tac_fifo": tc.Cluster(base / "tac_fifo", "grpc+tictac", workers=1,
                               extra_env={**ORDER_ENV, "TICTAC_TF_POLICY": "tac", "TICTAC_PRIORITY": "0",
                                          "TICTAC_TF_OP_TIMES": str(_op_times(base))}, args=ORDER_ARGS),
        "kill": tc.Cluster(base / "kill", "grpc+tictac", workers=1,
                           extra_env={"TICTAC_TIMEOUT": f"{KILL_TIMEOUT_S}s"}, worker_args=["--forever"]),
    }
    pss = {proto: subprocess.Popen([tc.PY, str(tc.HERE / "pss_train.py"), proto], env=tc.env(),
                                   stdout=open(base / f"pss_{proto}.json", "w"),
                                   stderr=open(base / f"pss_{proto}.log", "w"))
           for proto in ("grpc", "grpc+tictac")}
    kill = clusters["kill"]
    killed = None
    deadline = time.monotonic() + 200
    while time.monotonic() < deadline and kill.procs["worker0"].poll() is None:
        if (kill.d / "step2").exists():
            killed = time.time()
            kill.kill("ps")
            break
        time.sleep(0.05)
    rcs = {name: c.wait(timeout=240) for name, c in clusters.items()}
    for proto, p in pss.items():
        try:
            rcs["pss_" + proto] = p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            rcs["pss_" + proto] = "killed after 120s"
    clusters["base"] = base
    return clusters, rcs, killed


def _ok(runs, name):
    clusters, rcs, _ = runs
    c = clusters[name]
    bad = {k: v for k, v in rcs[name].items() if v != 0}
    assert not bad, f"{name}: {bad}\n" + "\n".join(f"--- {k}\n{c.log(k)}" for k in bad)
    return c


def test_same_weights_grpc_and_tictac(runs):
    a = np.load(_ok(runs, "grpc").d / "weights.npz")
    b = np.load(_ok(runs, "tictac").d / "weights.npz")
    assert sorted(a.files) == sorted(b.files) and len(a.files) == 6
    for k in a.files:
        np.testing.assert_allclose(b[k], a[k], rtol=0, atol=1e-5, err_msg=k)
    # training moved every parameter away from its initial value (ps_train.build's: seed 7)
    rng = np.random.default_rng(7)
    init = []
    for _ in range(3):
        init += [rng.standard_normal((32, 32)) / np.sqrt(32), np.zeros(32)]
    for i, v in enumerate(init):
        assert float(np.abs(a[f"p{i}"] - v).max()) > 1e-4, f"p{i} did not train"


def test_tensors_moved_through_tictac(runs):
    c = _ok(runs, "tictac")
    for name in ("ps", "worker0", "worker1"):
        s = c.json(name)
        assert s["servers"] == 1, (name, s)
        assert s["sent_tensors"] > 0 and s["recv_tensors"] > 0 and s["bytes"] > 0, (name, s)
        assert s["grpc_recv_tensor"] == 0, (name, s)
    # the PS sent every variable read (6 variables per step, 6 steps) and received the gradients
    ps = c.json("ps")
    assert ps["sent_tensors"] >= 36 and ps["recv_tensors"] >= 36, ps


def test_grpc_run_does_not_use_tictac(runs):
    c = _ok(runs, "grpc")
    for name in ("ps", "worker0", "worker1"):
        s = c.json(name)
        assert s["servers"] == 0 and s["tensors"] == 0, (name, s)


def test_ps_sends_in_tic_order(runs):
    tic = _ok(runs, "tic").json("ps")
    fifo = _ok(runs, "fifo").json("ps")
    assert tic["sent_tensors"] >= 16 and fifo["sent_tensors"] >= 16, (tic, fifo)
    assert tic["after_step1"] and fifo["after_step1"], (tic, fifo)
    # Steps 2-4: every weight leaves the PS in TIC order. The consumer pre-posts each payload's
    # receive (sized from the key's last step), so a payload is queued at its priority the moment
    # TF hands it over, with no READY round trip (a lower-priority payload whose READY came back
    # first used to take the link). Step 1 has no sizes yet (and sets up the connections): it is
    # printed, not judged. Strict zero: under TICTAC_RATE_LIMIT (set here) the ShapingEndpoint
    # returns to the loop between frames, so a tensor TF hands over while another is being
    # written is in the SendQueue before the next frame is picked (docs/tf.md, cause 1).
    late = {name: r["out_of_order"] - r["after_step1"]["out_of_order"]
            for name, r in (("tic", tic), ("fifo", fifo))}
    print("out_of_order after step 1: tic", late["tic"], "fifo", late["fifo"], "; in step 1: tic",
          tic["after_step1"]["out_of_order"], "fifo", fifo["after_step1"]["out_of_order"], flush=True)
    assert late["tic"] == 0, (late, tic, fifo)
    # counter-check: without priorities TF's own fetch order (not forward) reaches the wire. Counted
    # over all steps: how far TF's order strays varies with the load (after step 1: 6-7 on an idle
    # machine, 2 once in CI; over all steps 9-10 and 5). Step 1 is left out of the tic check only
    # because its receives cannot be pre-posted; with priorities off it is as valid a sample.
    assert fifo["out_of_order"] >= 3, (late, tic, fifo)


def test_ps_sends_in_tac_order(runs):
    """TICTAC_TF_POLICY=tac (TAC from TICTAC_TF_OP_TIMES on the worker's graph): the PS sends
    carry TAC's priorities (more than one level, from its trace) and, after step 1, leave in
    that order; with TICTAC_PRIORITY=0 at least 3 are not (over all steps). (TAC vs TIC on a graph where they
    differ: the tf_graph_priorities gtest.)"""
    c = _ok(runs, "tac")
    tac = c.json("ps")
    assert tac["sent_tensors"] >= 16 and tac["after_step1"], tac
    ps_log = (c.d / "ps.log").read_text(errors="replace")
    sent = [line for line in ps_log.splitlines() if line.startswith("tictac-tf sent ")]
    prios = {line.split("priority=")[1].split()[0] for line in sent}
    assert len(prios) >= 2, ("TAC priorities did not reach the sender", prios, sent[:8])
    fifo = _ok(runs, "tac_fifo").json("ps")
    assert fifo["after_step1"], fifo
    late = tac["out_of_order"] - tac["after_step1"]["out_of_order"]
    late_fifo = fifo["out_of_order"] - fifo["after_step1"]["out_of_order"]
    print("tac: priorities seen", sorted(prios, key=int), "out_of_order after step 1", late,
          "; with TICTAC_PRIORITY=0", late_fifo, flush=True)
    assert late == 0, tac
    # counter-check: without priorities TF's own fetch order breaks TAC's (over all steps, as in
    # test_ps_sends_in_tic_order)
    assert fifo["out_of_order"] >= 3, fifo


def test_tac_without_op_times_is_a_clear_error(tmp_path):
    code = ("import tensorflow as tf, tictac.tf\n"
            "c = tf.train.ClusterSpec({'w': ['localhost:2222']})\n"
            "try:\n"
            "    tf.distribute.Server(c, job_name='w', task_index=0, protocol='grpc+tictac')\n"
            "except Exception as e:\n"
            "    print(type(e).__name__, e)\n")
    out = subprocess.run([tc.PY, "-c", code], env=tc.env({"TICTAC_TF_POLICY": "tac"}),
                         capture_output=True, text=True, timeout=120)
    assert "InvalidArgumentError" in out.stdout and "TICTAC_TF_OP_TIMES" in out.stdout, \
        out.stdout + out.stderr[-2000:]


def test_killed_ps_fails_within_timeout(runs):
    clusters, rcs, killed = runs
    c = clusters["kill"]
    assert killed is not None, "the worker never finished 2 steps:\n" + c.log("worker0")
    assert rcs["kill"]["worker0"] == 3, (rcs["kill"], c.log("worker0"))
    err = json.loads((c.d / "error.json").read_text())
    assert err["type"] == "UnavailableError", err
    assert "/job:ps/replica:0/task:0" in err["message"], err
    assert err["time"] - killed < KILL_TIMEOUT_S, err


def test_parameter_server_strategy_keras(runs):
    """ParameterServerStrategy(rpc_layer=...) training a small Keras model (pss_train.py): the
    variables live on the PS, grpc+tictac gives grpc's weights, and its tensors went through
    TicTac in the 3 in-process servers."""
    clusters, rcs, _ = runs
    base = clusters["base"]
    out = {}
    for proto in ("grpc", "grpc+tictac"):
        log = (base / f"pss_{proto}.log").read_text(errors="replace")[-3000:]
        assert rcs["pss_" + proto] == 0, (proto, rcs["pss_" + proto], log)
        out[proto] = json.loads((base / f"pss_{proto}.json").read_text().splitlines()[-1])
    a, b = out["grpc"], out["grpc+tictac"]
    assert all(d.startswith("/job:ps/") for d in b["variables_on"]), b["variables_on"]
    assert b["losses"][-1] < b["losses"][0], b["losses"]
    for x, y in zip(a["weights"], b["weights"]):
        np.testing.assert_allclose(np.array(y), np.array(x), rtol=0, atol=1e-5)
    assert b["stats"]["servers"] == 3 and b["stats"]["recv_tensors"] > 0, b["stats"]
    assert b["stats"]["grpc_recv_tensor"] == 0, b["stats"]
    assert a["stats"]["tensors"] == 0, a["stats"]


def test_auth_token_applies():
    """Same TICTAC_AUTH_TOKEN on both servers: the step works; different tokens: the fetch is
    refused in the handshake and the step fails with UnavailableError naming the PS task."""
    procs = {case: subprocess.Popen([tc.PY, str(tc.HERE / "auth_check.py"), "a" * 20, tok],
                                    env=tc.env({"TICTAC_TIMEOUT": "5s"}), stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
             for case, tok in (("same", "a" * 20), ("other", "b" * 20))}
    out = {case: p.communicate(timeout=120) for case, p in procs.items()}
    same = [l for l in out["same"][0].splitlines() if l.startswith(("RESULT", "ERROR"))]
    other = [l for l in out["other"][0].splitlines() if l.startswith(("RESULT", "ERROR"))]
    assert same == ["RESULT [2.0, 2.0, 2.0, 2.0]"], out["same"][0] + out["same"][1][-2000:]
    assert other and other[0].startswith("ERROR UnavailableError"), out["other"][0] + out["other"][1][-2000:]
    assert "/job:ps/replica:0/task:0" in out["other"][0] and "authentication failed" in out["other"][0], out["other"][0]


def test_bad_port_offset_is_a_clear_error(tmp_path):
    code = ("import tensorflow as tf, tictac.tf\n"
            "c = tf.train.ClusterSpec({'w': ['localhost:2222']})\n"
            "try:\n"
            "    tf.distribute.Server(c, job_name='w', task_index=0, protocol='grpc+tictac')\n"
            "except Exception as e:\n"
            "    print(type(e).__name__, e)\n")
    out = subprocess.run([tc.PY, "-c", code], env=tc.env({"TICTAC_TF_PORT_OFFSET": "abc"}),
                         capture_output=True, text=True, timeout=120)
    assert "InvalidArgumentError" in out.stdout and "TICTAC_TF_PORT_OFFSET='abc'" in out.stdout, \
        out.stdout + out.stderr[-2000:]
