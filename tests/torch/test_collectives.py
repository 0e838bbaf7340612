"""Every c10d collective of the "tictac" backend beyond allreduce/broadcast/allgather against
gloo as the oracle, at 2, 3 and 4 ranks and several dtypes: one spawned group per world size
runs every case (a tictac and a gloo group side by side) and returns the mismatches. Plus the
priority of collective sends (`with tictac.torch.priority(p)`) with its TICTAC_PRIORITY=0
counter-check."""
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

DTYPES = ("float32", "float64", "int64", "int32")


def _data(torch, dtype, shape, rank, salt):
    g = torch.Generator().manual_seed(1000 * salt + rank)
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=g, dtype=torch.float64) + 0.5).to(dtype)
    return torch.randint(-20, 21, shape, generator=g, dtype=torch.int64).to(dtype)


def _same(torch, a, b):
    if a.dtype.is_floating_point:
        return a.shape == b.shape and torch.allclose(a, b, rtol=1e-5, atol=1e-6)
    return torch.equal(a, b)


def _all_ops(rank, world):
    import torch
    import torch.distributed as dist

    gloo = dist.new_group(backend="gloo")
    tt = dist.distributed_c10d._get_default_group()
    bad = []

    def check(name, mine, ref):
        if not _same(torch, mine, ref):
            bad.append(name)

    salt = 0
    for dname in DTYPES:
        dtype = getattr(torch, dname)
        ops = [dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN, dist.ReduceOp.PRODUCT]
        if dtype.is_floating_point:
            ops.append(dist.ReduceOp.AVG)
        for n in (1, 5, 1001):
            for op in ops:
                salt += 1
                # reduce, to every root
                for root in range(world):
                    x = _data(torch, dtype, (n, 3), rank, salt)
                    keep = x.clone()
                    ref = x.clone()
                    dist.reduce(x, root, op=op)
                    if op == dist.ReduceOp.AVG:  # gloo has no AVG
                        dist.reduce(ref, root, op=dist.ReduceOp.SUM, group=gloo)
                        ref = ref / world
                    else:
                        dist.reduce(ref, root, op=op, group=gloo)
                    if rank == root:
                        check(f"reduce {op} {dname} n={n} root={root}", x, ref)
                    elif not torch.equal(x, keep):
                        bad.append(f"reduce modified a non-root input {dname}")
                # reduce_scatter (list) and reduce_scatter_tensor; oracle: gloo allreduce sliced
                salt += 1
                ins = [_data(torch, dtype, (n,), rank, salt * 10 + r) for r in range(world)]
                full = torch.cat(ins)
                ref = full.clone()
                if op == dist.ReduceOp.AVG:
                    dist.all_reduce(ref, op=dist.ReduceOp.SUM, group=gloo)
                    ref = ref / world
                else:
                    dist.all_reduce(ref, op=op, group=gloo)
                want = ref[rank * n:(rank + 1) * n]
                out = torch.empty(n, dtype=dtype)
                dist.reduce_scatter(out, [t.clone() for t in ins], op=op)
                check(f"reduce_scatter {op} {dname} n={n}", out, want)
                out2 = torch.empty(n, dtype=dtype)
                src = full.clone()
                dist.reduce_scatter_tensor(out2, src, op=op)
                check(f"reduce_scatter_tensor {op} {dname} n={n}", out2, want)
                if not torch.equal(src, full):
                    bad.append("reduce_scatter_tensor modified its input")
        # gather and scatter, every root
        for root in range(world):
            salt += 1
            x = _data(torch, dtype, (4, 3), rank, salt)
            outs = [torch.empty_like(x) for _ in range(world)] if rank == root else None
            refs = [torch.empty_like(x) for _ in range(world)] if rank == root else None
            dist.gather(x, outs, dst=root)
            dist.gather(x, refs, dst=root, group=gloo)
            if rank == root:
                check(f"gather {dname} root={root}", torch.stack(outs), torch.stack(refs))
            chunks = [_data(torch, dtype, (6,), 50 + r, salt) for r in range(world)]
            y, yref = torch.empty(6, dtype=dtype), torch.empty(6, dtype=dtype)
            dist.scatter(y, chunks if rank == root else None, src=root)
            dist.scatter(yref, chunks if rank == root else None, src=root, group=gloo)
            check(f"scatter {dname} root={root}", y, yref)
        # all_to_all_single: equal split, then uneven splits (rank s sends d s+d+1 rows)
        salt += 1
        x = _data(torch, dtype, (world * 3, 2), rank, salt)
        y, yref = torch.empty_like(x), torch.empty_like(x)
        dist.all_to_all_single(y, x)
        dist.all_to_all_single(yref, x, group=gloo)
        check(f"all_to_all_single {dname}", y, yref)
        in_split = [rank + d + 1 for d in range(world)]
        out_split = [s + rank + 1 for s in range(world)]
        x = _data(torch, dtype, (sum(in_split), 3), rank, salt + 1)
        y = torch.empty(sum(out_split), 3, dtype=dtype)
        yref = torch.empty_like(y)
        dist.all_to_all_single(y, x, out_split, in_split)
        dist.all_to_all_single(yref, x, out_split, in_split, group=gloo)
        check(f"all_to_all_single splits {dname}", y, yref)
        # all_to_all (lists): equal sizes against gloo; uneven sizes (gloo refuses them)
        # against their known values
        ins = [_data(torch, dtype, (3,), rank, salt + 2 + d) for d in range(world)]
        outs = [torch.empty(3, dtype=dtype) for _ in range(world)]
        refs = [torch.empty_like(o) for o in outs]
        dist.all_to_all(outs, ins)
        dist.all_to_all(refs, ins, group=gloo)
        check(f"all_to_all {dname}", torch.cat(outs), torch.cat(refs))
        ins = [torch.full((rank + d + 1,), rank * 100 + d, dtype=dtype) for d in range(world)]
        outs = [torch.empty(s + rank + 1, dtype=dtype) for s in range(world)]
        dist.all_to_all(outs, ins)
        check(f"all_to_all uneven {dname}", torch.cat(outs),
              torch.cat([torch.full((s + rank + 1,), s * 100 + rank, dtype=dtype) for s in range(world)]))
        # coalesced allreduce and allgather
        ts = [_data(torch, dtype, (k + 1, 2), rank, salt + 10 + k) for k in range(3)]
        mine, ref = [t.clone() for t in ts], [t.clone() for t in ts]
        dist.all_reduce_coalesced(mine)
        dist.all_reduce_coalesced(ref, group=gloo)
        check(f"all_reduce_coalesced {dname}", torch.cat([m.reshape(-1) for m in mine]),
              torch.cat([r.reshape(-1) for r in ref]))
        outl = [[torch.empty_like(t) for t in ts] for _ in range(world)]
        refl = [[torch.empty_like(t) for t in ts] for _ in range(world)]
        dist.all_gather_coalesced(outl, ts)
        dist.all_gather_coalesced(refl, ts, group=gloo)
        check(f"all_gather_coalesced {dname}",
              torch.cat([t.reshape(-1) for lst in outl for t in lst]),
              torch.cat([t.reshape(-1) for lst in refl for t in lst]))
        # allgather_into_tensor_coalesced / reduce_scatter_tensor_coalesced (ProcessGroup API)
        outs = [torch.empty(world * t.numel(), dtype=dtype) for t in ts]
        tt.allgather_into_tensor_coalesced(outs, [t.reshape(-1) for t in ts]).wait()
        for k, t in enumerate(ts):
            ref = torch.empty(world * t.numel(), dtype=dtype)
            dist.all_gather_into_tensor(ref, t.reshape(-1), group=gloo)
            check(f"allgather_into_tensor_coalesced {dname} #{k}", outs[k], ref)
        big = [_data(torch, dtype, (world * (k + 2),), rank, salt + 20 + k) for k in range(2)]
        outs = [torch.empty(b.numel() // world, dtype=dtype) for b in big]
        tt.reduce_scatter_tensor_coalesced(outs, [b.clone() for b in big]).wait()
        for k, b in enumerate(big):
            ref = b.clone()
            dist.all_reduce(ref, group=gloo)
            m = b.numel() // world
            check(f"reduce_scatter_tensor_coalesced {dname} #{k}", outs[k], ref[rank * m:(rank + 1) * m])
    # mixed dtypes in one allgather_coalesced (torch's Python wrapper refuses them; the
    # ProcessGroup API passes them through)
    ts = [torch.arange(3, dtype=torch.float64) + rank, torch.arange(2, dtype=torch.int32) * rank,
          torch.tensor([rank % 2 == 0])]
    outl = [[torch.empty_like(t) for t in ts] for _ in range(world)]
    tt.allgather_coalesced(outl, ts).wait()
    for r in range(world):
        if not (torch.equal(outl[r][0], torch.arange(3, dtype=torch.float64) + r)
                and torch.equal(outl[r][1], torch.arange(2, dtype=torch.int32) * r)
                and bool(outl[r][2].item()) == (r % 2 == 0)):
            bad.append(f"all_gather_coalesced mixed dtypes rank {r}")
    # PREMUL_SUM (torch lets a backend take it through its C++ ReduceOp): sum of x * factor
    for factor in (2.5, torch.tensor([0.5], dtype=torch.float64)):
        x = _data(torch, torch.float64, (world * 7,), rank, 999)
        ref = x * factor
        dist.all_reduce(ref, group=gloo)
        mine = x.clone()
        dist.all_reduce(mine, op=dist._make_nccl_premul_sum(factor))
        check(f"allreduce PREMUL_SUM {type(factor).__name__}", mine, ref)
        out = torch.empty(7, dtype=torch.float64)
        dist.reduce_scatter_tensor(out, x.clone(), op=dist._make_nccl_premul_sum(factor))
        check(f"reduce_scatter_tensor PREMUL_SUM {type(factor).__name__}", out, ref[rank * 7:(rank + 1) * 7])
    # a large allreduce: several ring chunks per block, pipelined
    x = _data(torch, torch.float32, (3 << 20,), rank, 4242)
    ref = x.clone()
    dist.all_reduce(x)
    dist.all_reduce(ref, group=gloo)
    check("allreduce 12 MiB float32", x, ref)
    # large reduce-scatter (out of place, several chunks a block: the input stays as it was) and
    # all-gather (a block above a ring chunk goes round the ring), also in place (the input is
    # the output's own block, as ordered_ddp's sliced updates use it)
    x = _data(torch, torch.float32, (world * (1 << 19) + world * 3,), rank, 4343)
    keep = x.clone()
    m = x.numel() // world
    out = torch.empty(m)
    dist.reduce_scatter_tensor(out, x)
    ref = x.clone()
    dist.all_reduce(ref, group=gloo)
    check("reduce_scatter_tensor 2 MiB blocks", out, ref[rank * m:(rank + 1) * m])
    if not torch.equal(x, keep):
        bad.append("large reduce_scatter_tensor modified its input")
    gathered = torch.empty(world * m)
    dist.all_gather_into_tensor(gathered, out)
    check("all_gather_into_tensor 2 MiB blocks", gathered, ref)
    inplace = torch.zeros(world * m)
    inplace[rank * m:(rank + 1) * m] = out
    dist.all_gather_into_tensor(inplace, inplace[rank * m:(rank + 1) * m])
    check("all_gather_into_tensor in place", inplace, ref)
    dist.barrier()
    return bad


@pytest.mark.parametrize("world", [2, 3, 4])
def test_every_collective_matches_gloo(world):
    res = run_ranks(_all_ops, world=world, timeout=400)
    for rank, mism in enumerate(res):
        assert mism == [], f"rank {rank}: {mism}"


def _collective_priority(rank, world, collective_prio):
    """Rank 0 queues three 2 MiB p2p sends at priority 5 behind a blocker, then a broadcast (at
    `collective_prio`, or the default when None); rank 1 records the completion order."""
    import torch
    import torch.distributed as dist

    import tictac.torch as tt

    size = 1 << 19
    if rank == 1:
        order = []
        bufs = [torch.zeros(size) for _ in range(3)]
        works = []
        for t in range(3):
            w = dist.irecv(bufs[t], 0, tag=t)
            w.get_future().then(lambda _f, t=t: order.append(f"p2p{t}"))
            works.append(w)
        blocker = torch.zeros(2 << 20)
        bw = dist.irecv(blocker, 0, tag=100)
        dist.barrier()
        b = torch.zeros(size)
        bwork = dist.broadcast(b, 0, async_op=True)
        bwork.get_future().then(lambda _f: order.append("bcast"))
        bw.wait()
        bwork.wait()
        for w in works:
            w.wait()
        deadline = time.monotonic() + 5
        while len(order) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        return {"order": order, "ok": bool(torch.all(b == 7).item())}
    dist.barrier()
    with tt.priority(-100):
        blocker = dist.isend(torch.ones(2 << 20), 1, tag=100)
    time.sleep(0.02)
    works = []
    with tt.priority(5):
        works = [dist.isend(torch.full((size,), float(t)), 1, tag=t) for t in range(3)]
    b = torch.full((size,), 7.0)
    if collective_prio is None:
        bwork = dist.broadcast(b, 0, async_op=True)
    else:
        with tt.priority(collective_prio):
            bwork = dist.broadcast(b, 0, async_op=True)
    # The premise of the order checks: everything was posted while the blocker was still on its
    # way (8 MiB at TICTAC_RATE_LIMIT=100M: ~80 ms), so the SendQueue had to choose.
    blocker_busy = not blocker.is_completed()
    blocker.wait()
    bwork.wait()
    for w in works:
        w.wait()
    return {"blocker_busy": blocker_busy}


ORDER_ENV = {"TICTAC_WINDOW": "1", "TICTAC_EAGER_BYTES": "0", "TICTAC_RATE_LIMIT": "100M"}


@pytest.mark.parametrize("prio,first", [(None, True), (10, False)])
def test_collective_sends_carry_their_priority(prio, first):
    """Default: a collective goes ahead of queued parameter sends; `with priority(10)` puts it
    behind priority-5 sends."""
    res = run_ranks(_collective_priority, world=2, env=ORDER_ENV, args=(prio,))
    assert res[0]["blocker_busy"], "the sends were posted only after the blocker had left (machine too slow)"
    order = res[1]["order"]
    assert res[1]["ok"]
    assert sorted(order) == ["bcast", "p2p0", "p2p1", "p2p2"], order
    if first:
        assert order[0] == "bcast", order
    else:
        assert order[-1] == "bcast", order


def test_collective_priority_counter_check_fifo():
    """With priorities switched off (TICTAC_PRIORITY=0) the default broadcast, posted last, no
    longer overtakes the queued sends: the ordering above comes from the priority mechanism."""
    res = run_ranks(_collective_priority, world=2, env={**ORDER_ENV, "TICTAC_PRIORITY": "0"},
                    args=(None,))
    assert res[0]["blocker_busy"], "the sends were posted only after the blocker had left (machine too slow)"
    order = res[1]["order"]
    assert order and order[0] != "bcast", order
