"""Gated collectives on the "tictac" backend (tictac.torch.gate / after, integration/group/gate.h):
a collective posted under `after(gate)` keeps its place in the collective order but moves data
only once the gate opens, so its input may be written after the call (ordered_ddp's sharded
updates post their all-gather at step() and open the gate when the slice is updated).

Checks: the all-gather delivers what its input held when the gate opened, not when it was
posted (counter-check in the same run: the values at posting time differ, so a collective that
ignored the gate would fail the comparison); a collective posted after the gated one, with a
priority, completes while the gate is still closed; a failed gate fails the Work with its
reason on the rank that failed it and the peer reports an error instead of hanging."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from dist_harness import run_ranks  # noqa: E402

import tictac.torch  # noqa: E402

if not tictac.torch.available():  # pragma: no cover
    pytest.skip(f"the tictac extension is not built: {tictac.torch._C_ERROR}", allow_module_level=True)


def _gated_allgather(rank, world):
    import time

    import torch
    import torch.distributed as dist

    import tictac.torch as tt

    out = torch.zeros(world * 4)
    mine = torch.full((4,), -1.0)            # what the input holds when the collective is posted
    gate = tt.gate()
    with tt.priority(5), tt.after(gate):
        wg = dist.all_gather_into_tensor(out, mine, async_op=True)
    # A later collective is not held back by the closed gate.
    x = torch.ones(8) * (rank + 1)
    with tt.priority(1):
        wx = dist.all_reduce(x, async_op=True)
    wx.wait()
    later_done_while_closed = not gate.decided()
    time.sleep(0.2)
    gathered_while_closed = bool((out != 0).any())
    mine.fill_(float(rank + 10))             # the input is ready only now
    gate.open()
    wg.wait()
    return {"out": out.tolist(), "x": x.tolist(), "later_done_while_closed": later_done_while_closed,
            "gathered_while_closed": gathered_while_closed}


def test_a_gated_allgather_sends_what_its_input_held_when_the_gate_opened():
    world = 2
    for rank, r in enumerate(run_ranks(_gated_allgather, world=world, timeout=120)):
        want = [float(q + 10) for q in range(world) for _ in range(4)]
        assert r["out"] == want, f"rank {rank}: {r['out']} (posting-time values were -1)"
        assert not r["gathered_while_closed"], f"rank {rank}: data moved before the gate opened"
        assert r["later_done_while_closed"], f"rank {rank}: a later collective waited for the closed gate"
        assert r["x"] == [float(sum(range(1, world + 1)))] * 8, f"rank {rank}: {r['x']}"


def _failed_gate(rank, world, m):
    import datetime

    import torch
    import torch.distributed as dist

    import tictac.torch as tt

    pg = dist.new_group(backend="tictac", timeout=datetime.timedelta(seconds=5))
    out = torch.zeros(world * m)
    mine = torch.full((m,), float(rank))
    gate = tt.gate()
    with tt.priority(5), tt.after(gate):
        w = dist.all_gather_into_tensor(out, mine, group=pg, async_op=True)
    if rank == 0:
        gate.fail("the update raised ValueError")
    else:
        gate.open()
    try:
        w.wait()
        return "completed"
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"


# 4 floats go direct; 2 MiB blocks go round the ring, whose receives are posted before the gate
# fails (they must be cancelled, not hang).
@pytest.mark.parametrize("m", [4, 1 << 19])
def test_a_failed_gate_fails_the_collective_with_its_reason_and_the_peer_does_not_hang(m):
    res = run_ranks(_failed_gate, world=2, timeout=120, args=(m,))
    assert "the update raised ValueError" in res[0], res[0]
    assert res[1] != "completed", f"rank 1 completed an all-gather that rank 0 never joined: {res[1]}"


def _gated_ring(rank, world, op):
    """A ring-sized collective (2 MiB blocks) posted under a gate on every rank; rank 0 opens its
    gate 1 s late, the others at once."""
    import time

    import torch
    import torch.distributed as dist

    import tictac.torch as tt

    m = 1 << 19                              # floats per block: 2 MiB, a ring collective
    left = (rank - 1) % world                # the ring sends r -> r + 1
    if op == "allgather":
        out = torch.zeros(world * m)
        mine = torch.full((m,), -1.0)        # what the input holds when the collective is posted
    else:
        out = torch.zeros(m)
        mine = torch.full((world * m,), -100.0)
    gate = tt.gate()
    with tt.priority(5), tt.after(gate):
        if op == "allgather":
            w = dist.all_gather_into_tensor(out, mine, async_op=True)
        else:
            w = dist.reduce_scatter_tensor(out, mine, async_op=True)
    seen = {}
    store = dist.distributed_c10d._get_default_store()
    if rank == 0:
        # Rank 0's gate is closed: its left neighbour's block may land (its receive is posted),
        # but nothing of rank 0's input may leave. It stays closed for 1 s and until rank 1 has
        # looked (for all-gather).
        start = time.monotonic()
        while time.monotonic() - start < 20:
            if op == "allgather" and bool((out[left * m:(left + 1) * m] == left + 10).all()):
                seen["left_block_landed_while_closed"] = True
            if time.monotonic() - start >= 1.0 and (op != "allgather" or store.check([f"looked/{op}"])):
                break
            time.sleep(0.02)
        mine.fill_(float(rank + 10))
        gate.open()
    else:
        mine.fill_(float(rank + 10))
        gate.open()
        if rank == 1 and op == "allgather":
            time.sleep(0.6)                  # rank 0's gate is still closed (it waits for the key)
            seen["closed_rank_block_moved"] = bool((out[0:m] != 0).any())
            store.set(f"looked/{op}", "1")
    w.wait()
    if op == "allgather":
        got = [sorted(set(out[q * m:(q + 1) * m].tolist())) for q in range(world)]
    else:
        got = sorted(set(out.tolist()))
    return {"got": got, **seen}


@pytest.mark.parametrize("op", ["allgather", "reduce_scatter"])
def test_a_gated_ring_collective_receives_before_its_gate_opens_and_sends_only_after(op):
    world = 3
    res = run_ranks(_gated_ring, world=world, timeout=120, args=(op,))
    for rank, r in enumerate(res):
        if op == "allgather":
            assert r["got"] == [[float(q + 10)] for q in range(world)], f"rank {rank}: {r['got']}"
        else:   # every rank's input held rank + 10 when its gate opened (-100 when posted)
            assert r["got"] == [float(sum(q + 10 for q in range(world)))], f"rank {rank}: {r['got']}"
    if op == "allgather":
        # The receive of the gated rank was posted before its gate opened (the mechanism: a
        # collective that waited for the gate before posting anything would not have it) ...
        assert res[0].get("left_block_landed_while_closed"), res[0]
        # ... and nothing left it before the gate opened.
        assert res[1]["closed_rank_block_moved"] is False, res[1]
