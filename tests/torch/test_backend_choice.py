"""The "tictac" process group over the UCX backend (TICTAC_BACKENDS=ucx,tcp): the same
equality-vs-gloo checks as over TCP (every collective at 2, 3 and 4 ranks, p2p), and the proof
that the connections really run over UCX (tictac.torch.peer_backends), with the default (tcp)
as the counter-check. A requested backend that cannot be used fails init_process_group with the
cause and the fix."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from dist_harness import run_ranks  # noqa: E402
from test_backend import _collectives_vs_gloo, _p2p  # noqa: E402
from test_collectives import _all_ops  # noqa: E402

import tictac.torch  # noqa: E402

if not tictac.torch.available():  # pragma: no cover
    pytest.skip(f"the tictac extension is not built: {tictac.torch._C_ERROR}", allow_module_level=True)

UCX = {"TICTAC_BACKENDS": "ucx,tcp"}


def _ucx_viable():
    """(viable, why) for this machine and build, asked of the real group code in one rank."""
    try:
        res = run_ranks(_backends, world=2, env={"TICTAC_BACKENDS": "ucx"}, timeout=60)
        return True, res
    except AssertionError as e:  # the rank's error names the cause
        return False, str(e).strip().splitlines()[-1]


def _backends(rank, world):
    import tictac.torch as tt

    return tt.peer_backends()


@pytest.fixture(scope="module")
def ucx():
    ok, why = _ucx_viable()
    if not ok:
        pytest.skip(f"ucx not viable here: {why}")


def _ops_over(rank, world, which):
    import tictac.torch as tt

    fns = {"all_ops": _all_ops, "allreduce_etc": _collectives_vs_gloo, "p2p": _p2p}
    return {"backends": tt.peer_backends(), "result": fns[which](rank, world)}


def _expect_backend(res, name):
    for rank, r in enumerate(res):
        others = [b for i, b in enumerate(r["backends"]) if i != rank]
        assert others and all(b == name for b in others), f"rank {rank}: {r['backends']}"
        assert r["backends"][rank] == ""


@pytest.mark.parametrize("world", [2, 3, 4])
def test_every_collective_matches_gloo_over_ucx(ucx, world):
    res = run_ranks(_ops_over, world=world, env=UCX, args=("all_ops",), timeout=400)
    _expect_backend(res, "ucx")
    for rank, r in enumerate(res):
        assert r["result"] == [], f"rank {rank}: {r['result']}"


def test_allreduce_broadcast_allgather_match_gloo_over_ucx(ucx):
    res = run_ranks(_ops_over, world=3, env=UCX, args=("allreduce_etc",), timeout=180)
    _expect_backend(res, "ucx")
    for rank, r in enumerate(res):
        assert r["result"] == [], f"rank {rank}: {r['result']}"


def test_point_to_point_over_ucx(ucx):
    res = run_ranks(_ops_over, world=2, env=UCX, args=("p2p",))
    _expect_backend(res, "ucx")
    r1 = res[1]["result"]
    assert r1["a"] == list(range(10)) and r1["b"] == [0, 7, 14, 21, 28]
    assert r1["src"] == 0 and r1["any"] == [9.0, 9.0, 9.0]


def test_default_is_tcp_counter_check():
    env = {k: v for k, v in os.environ.items() if k != "TICTAC_BACKENDS"}
    os.environ.pop("TICTAC_BACKENDS", None)
    try:
        res = run_ranks(_backends, world=3)
    finally:
        os.environ.clear()
        os.environ.update(env)
    _expect_backend([{"backends": b} for b in res], "tcp")


def _init_fails(rank, world):
    raise AssertionError("init_process_group should have failed")


def test_unusable_backend_fails_init_naming_cause_and_fix():
    with pytest.raises(AssertionError) as err:
        run_ranks(_init_fails, world=2, env={"TICTAC_BACKENDS": "verbs"}, timeout=60)
    text = str(err.value)
    if "should have failed" in text:
        pytest.skip("verbs is viable on this machine")
    assert "TICTAC_BACKENDS='verbs'" in text, text
    assert "verbs" in text and "TICTAC_BACKENDS=verbs,tcp" in text, text


def test_unknown_backend_fails_init_naming_the_known_ones():
    with pytest.raises(AssertionError) as err:
        run_ranks(_init_fails, world=2, env={"TICTAC_BACKENDS": "smoke-signals"}, timeout=60)
    text = str(err.value)
    assert "unknown backend 'smoke-signals'" in text and "known: " in text, text
