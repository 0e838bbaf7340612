"""The "tictac" c10d backend against gloo as the oracle, on loopback, 2-3 processes."""
from __future__ import annotations

import os
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from dist_harness import run_ranks  # noqa: E402

import tictac.torch  # noqa: E402

if not tictac.torch.available():  # pragma: no cover
    pytest.skip(f"the tictac extension is not built: {tictac.torch._C_ERROR}", allow_module_level=True)


def _p2p(rank, world):
    import torch
    import torch.distributed as dist

    out = {}
    if rank == 0:
        a = torch.arange(10, dtype=torch.float32)
        b = torch.arange(5, dtype=torch.int64) * 7
        w1 = dist.isend(a, 1, tag=1)
        w2 = dist.isend(b, 1, tag=2)
        w1.wait()
        w2.wait()
        dist.send(torch.full((3,), 9.0), 1, tag=3)  # to an any-source receive
        assert w1.is_completed() and w2.is_completed()
    else:
        rb = torch.zeros(5, dtype=torch.int64)
        ra = torch.zeros(10)
        # Receive tag 2 before tag 1: matching is by tag, not arrival order.
        wb = dist.irecv(rb, 0, tag=2)
        wa = dist.irecv(ra, 0, tag=1)
        fut = wa.get_future()
        wb.wait()
        got = fut.wait()
        out["a"] = ra.tolist()
        out["b"] = rb.tolist()
        out["fut_is_ra"] = bool(got[0].data_ptr() == ra.data_ptr())
        anyt = torch.zeros(3)
        out["src"] = dist.recv(anyt, tag=3)
        out["any"] = anyt.tolist()
    dist.barrier()
    return out


def test_point_to_point_tags_any_source_and_futures():
    res = run_ranks(_p2p, world=2)
    r1 = res[1]
    assert r1["a"] == list(range(10))
    assert r1["b"] == [0, 7, 14, 21, 28]
    assert r1["fut_is_ra"]
    assert r1["src"] == 0 and r1["any"] == [9.0, 9.0, 9.0]


def _collectives_vs_gloo(rank, world):
    import torch
    import torch.distributed as dist

    gloo = dist.new_group(backend="gloo")
    g = torch.Generator().manual_seed(100 + rank)
    ops = [dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.MIN, dist.ReduceOp.MAX,
           dist.ReduceOp.PRODUCT]
    mismatches = []
    for dtype in (torch.float32, torch.float64, torch.int64):
        for op in ops:
            if op == dist.ReduceOp.AVG and not dtype.is_floating_point:
                continue
            for n in (1, 7, 1000, 300_001):
                if dtype.is_floating_point:
                    base = torch.rand(n, generator=g, dtype=torch.float64).to(dtype) + 0.5
                else:
                    base = torch.randint(-5, 6, (n,), generator=g, dtype=dtype)
                mine, ref = base.clone(), base.clone()
                dist.all_reduce(mine, op=op)
                if op == dist.ReduceOp.AVG:  # gloo has no AVG
                    dist.all_reduce(ref, op=dist.ReduceOp.SUM, group=gloo)
                    ref /= world
                else:
                    dist.all_reduce(ref, op=op, group=gloo)
                if not torch.allclose(mine, ref, rtol=1e-5, atol=1e-6):
                    mismatches.append(f"allreduce {op} {dtype} n={n}")
    # A non-contiguous-free multi-dim tensor and async allreduce with a future.
    t = torch.ones(4, 5) * (rank + 1)
    work = dist.all_reduce(t, async_op=True)
    res = work.get_future().wait()
    if not torch.equal(res[0], torch.full((4, 5), float(world * (world + 1) / 2))):
        mismatches.append("async allreduce future")
    # Broadcast from every root.
    for root in range(world):
        x = torch.arange(17, dtype=torch.float64) * (rank + 1)
        y = x.clone()
        dist.broadcast(x, root)
        dist.broadcast(y, root, group=gloo)
        if not torch.equal(x, y):
            mismatches.append(f"broadcast root {root}")
    # allgather (list form) and all_gather_into_tensor (_allgather_base).
    inp = torch.arange(6, dtype=torch.int32).reshape(2, 3) + 10 * rank
    outs = [torch.zeros_like(inp) for _ in range(world)]
    refs = [torch.zeros_like(inp) for _ in range(world)]
    dist.all_gather(outs, inp)
    dist.all_gather(refs, inp, group=gloo)
    if not all(torch.equal(a, b) for a, b in zip(outs, refs)):
        mismatches.append("all_gather")
    flat = torch.zeros(world * 6, dtype=torch.int32)
    dist.all_gather_into_tensor(flat, inp.reshape(-1))
    if not torch.equal(flat, torch.cat([r.reshape(-1) for r in refs])):
        mismatches.append("all_gather_into_tensor")
    dist.barrier()
    return mismatches


@pytest.mark.parametrize("world", [2, 3])
def test_collectives_match_gloo(world):
    res = run_ranks(_collectives_vs_gloo, world=world, timeout=180)
    for rank, mism in enumerate(res):
        assert mism == [], f"rank {rank}: {mism}"


def _priority_order(rank, world, use_context):
    import torch
    import torch.distributed as dist

    import tictac.torch as tt

    n, size = 6, 1 << 19  # 6 x 2 MiB float32
    prios = {t: n - t for t in range(n)}  # tag 0 last, tag 5 first
    if rank == 1:
        bufs = [torch.zeros(size) for _ in range(n)]
        order = []
        works = []
        for t in range(n):
            w = dist.irecv(bufs[t], 0, tag=t)
            w.get_future().then(lambda _f, t=t: order.append(t))
            works.append(w)
        blocker = torch.zeros(2 << 20)
        bw = dist.irecv(blocker, 0, tag=100)
        dist.barrier()
        bw.wait()
        for w in works:
            w.wait()
        deadline = time.monotonic() + 5
        while len(order) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        ok = all(torch.all(bufs[t] == t).item() for t in range(n))
        return {"order": order, "data_ok": ok}
    data = [torch.full((size,), float(t)) for t in range(n)]
    dist.barrier()
    # A first send (8 MiB, ~80 ms at the test's rate limit) keeps the link busy while the others
    # queue up behind it. The pause lets its rendezvous (RTS, READY) finish first: a transfer
    # still waiting for READY holds no window slot, so without it the next send could start
    # ahead of it and the test would measure the race, not the order.
    with tt.priority(-100):
        blocker = dist.isend(torch.ones(2 << 20), 1, tag=100)
    time.sleep(0.02)
    works = []
    if use_context:
        for t in range(n):
            with tt.priority(prios[t]):
                works.append(dist.isend(data[t], 1, tag=t))
    else:
        tt.set_priorities(None, prios)
        assert tt.priority_of(None, 0) == n
        works = [dist.isend(data[t], 1, tag=t) for t in range(n)]
    blocker.wait()
    for w in works:
        w.wait()
    return {}


@pytest.mark.parametrize("use_context", [False, True])
def test_sends_leave_in_priority_order(use_context):
    env = {"TICTAC_WINDOW": "1", "TICTAC_EAGER_BYTES": "0", "TICTAC_RATE_LIMIT": "100M"}
    res = run_ranks(_priority_order, world=2, env=env, args=(use_context,))
    assert res[1]["data_ok"]
    assert res[1]["order"] == [5, 4, 3, 2, 1, 0], res[1]["order"]


def _timeout(rank, world):
    import torch
    import torch.distributed as dist

    if rank == 0:
        t = torch.zeros(4)
        w = dist.irecv(t, 1, tag=42)
        start = time.monotonic()
        try:
            w.wait(timeout=__import__("datetime").timedelta(seconds=1))
        except Exception as exc:  # noqa: BLE001
            msg, kind = str(exc), type(exc).__name__
        else:
            msg, kind = "", "no error"
        elapsed = time.monotonic() - start
        dist.barrier()
        return {"msg": msg, "kind": kind, "elapsed": elapsed}
    dist.barrier()
    return {}


def test_wait_timeout_raises_naming_the_op():
    res = run_ranks(_timeout, world=2)
    r0 = res[0]
    assert "timed out" in r0["msg"] and "rank 1" in r0["msg"], r0
    assert "DistBackendError" in r0["kind"] or "Error" in r0["kind"], r0
    assert r0["elapsed"] < 10


def _dead_peer(rank, world):
    import torch
    import torch.distributed as dist

    if rank == 1:
        time.sleep(0.5)
        os._exit(3)
    t = torch.zeros(4)
    start = time.monotonic()
    try:
        dist.recv(t, 1, tag=5)
    except Exception as exc:  # noqa: BLE001
        return {"msg": str(exc), "kind": type(exc).__name__, "elapsed": time.monotonic() - start}
    return {"msg": "", "kind": "none", "elapsed": 0}


def test_dead_peer_raises_network_error_naming_the_rank():
    res = run_ranks(_dead_peer, world=2, expect_exit=[1], env={"TICTAC_TIMEOUT": "20s"})
    r0 = res[0]
    assert r0["kind"] == "DistNetworkError", r0
    assert "rank 1" in r0["msg"], r0
    assert r0["elapsed"] < 15, r0


def _shape_mismatch(rank, world):
    import torch
    import torch.distributed as dist

    if rank == 0:
        dist.send(torch.zeros(8), 1, tag=1)
        dist.barrier()
        return {}
    try:
        dist.recv(torch.zeros(4), 0, tag=1)
    except Exception as exc:  # noqa: BLE001
        dist.barrier()
        return {"msg": str(exc)}
    dist.barrier()
    return {"msg": ""}


def test_receive_too_small_is_a_clear_error():
    res = run_ranks(_shape_mismatch, world=2)
    assert res[1]["msg"], "a 32-byte message into a 16-byte tensor must fail"


def test_set_priorities_on_a_gloo_group_names_the_backend():
    res = run_ranks(_gloo_priorities, world=2, backend="gloo")
    assert all("gloo" in r and "tictac" in r for r in res), res


def _gloo_priorities(rank, world):
    import tictac.torch as tt

    try:
        tt.set_priorities(None, {1: 2})
    except Exception as exc:  # noqa: BLE001
        return str(exc)
    return ""


def test_schedule_binding_runs_tic_and_rejects_bad_graphs():
    import tictac.torch as tt

    graph = {
        "format": "tictac-graph/1",
        "ops": [
            {"name": "w1", "kind": "recv", "bytes": 1 << 20},
            {"name": "w2", "kind": "recv", "bytes": 1 << 20},
            {"name": "l1", "kind": "compute", "inputs": ["w1"], "time": 0.001},
            {"name": "w3", "kind": "recv", "bytes": 1 << 20},
            {"name": "l2", "kind": "compute", "inputs": ["l1", "w2"], "time": 0.001},
            {"name": "l3", "kind": "compute", "inputs": ["l2", "w3"], "time": 0.001},
        ],
    }
    prio = tt.schedule(graph, "tic")  # SCHEDULING.md's chain example: 0, 0, 2
    assert prio["w1"] == prio["w2"] < prio["w3"]
    tac = tt.schedule(graph, "tac", bandwidth_bps=8e9)
    assert tac["w1"] < tac["w2"] < tac["w3"]
    with pytest.raises(ValueError, match="unknown policy"):
        tt.schedule(graph, "nope")
    with pytest.raises(ValueError, match="unknown input"):
        tt.schedule({"format": "tictac-graph/1",
                     "ops": [{"name": "a", "kind": "compute", "inputs": ["x"], "time": 1}]}, "tic")


def _group_names(rank, world):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    world_pg = dist.group.WORLD
    sub = dist.new_group(list(range(world)), backend="tictac")
    ddp = DDP(torch.nn.Linear(3, 2))
    ddp(torch.ones(2, 3)).sum().backward()
    # Counter-check: a plugin group built the way torch builds it around a Backend (what the
    # creator returned before) is named "custom"; the names above must come from our group.
    plain = dist.ProcessGroup(dist.distributed_c10d._get_default_store(), rank, world)
    return {
        "world": world_pg._get_backend_name(),
        "sub": sub._get_backend_name(),
        "get_backend": dist.get_backend(),
        "ddp": ddp._get_ddp_logging_data().get("backend_name"),
        "is_tictac": tictac.torch.is_tictac(),
        "plain_custom": (plain._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.CUSTOM,
                                                 world_pg._get_backend(torch.device("cpu"))),
                         plain._set_default_backend(dist.ProcessGroup.BackendType.CUSTOM),
                         plain._get_backend_name())[-1],
    }


def test_group_reports_its_name_as_tictac_to_torch_and_ddp():
    """torch names the ProcessGroup it wraps around a plugin Backend "custom" (DDP's logging data
    and error messages say so); the tictac creator returns its own ProcessGroup named "tictac"."""
    res = run_ranks(_group_names, world=2)
    for r in range(2):
        got = res[r]
        assert got["world"] == got["sub"] == got["get_backend"] == got["ddp"] == "tictac", got
        assert got["is_tictac"], got
        assert got["plain_custom"] == "custom", got
