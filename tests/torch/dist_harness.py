"""Runs a function on N ranks in separate processes (spawn) with file:// rendezvous and returns
each rank's result; a rank that raises or dies fails the test with its traceback. Bounded: a
run that takes longer than `timeout` seconds kills every rank and fails."""
from __future__ import annotations

import os
import pathlib
import sys
import tempfile
import traceback

import torch.multiprocessing as mp

REPO = pathlib.Path(__file__).resolve().parents[2]
if str(REPO / "python") not in sys.path:
    sys.path.insert(0, str(REPO / "python"))


def _leave_together(world, limit_s=30.0):
    """Waits (bounded) until every rank got here through the store before the group is torn down.
    The transport's close() can drop a rank's last eager send still queued, so a rank that leaves
    a final collective first and closes could starve a slower peer of that message (an EOF in the
    peer's last collective); see docs/torch.md. Tests check their ops, not that teardown race."""
    import time

    import torch.distributed as dist

    store = dist.distributed_c10d._get_default_store()
    store.add("dist_harness/leaving", 1)
    deadline = time.monotonic() + limit_s
    while store.add("dist_harness/leaving", 0) < world and time.monotonic() < deadline:
        time.sleep(0.01)


def _entry(fn, rank, world, init_file, backend, env, queue, args, sync_exit):
    os.environ.update(env)
    try:
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        import tictac.torch  # noqa: F401  registers "tictac"

        dist.init_process_group(
            backend, init_method=f"file://{init_file}", rank=rank, world_size=world
        )
        result = fn(rank, world, *args)
        queue.put((rank, "ok", result))
        if sync_exit:
            _leave_together(world)
        dist.destroy_process_group()
    except BaseException:  # noqa: BLE001 - reported to the parent
        queue.put((rank, "error", traceback.format_exc()))


def run_ranks(fn, world=2, backend="tictac", timeout=90, env=None, args=(), expect_exit=None):
    """Runs fn(rank, world, *args) on `world` ranks; returns the results by rank. Ranks listed in
    `expect_exit` may die without reporting (their result is None)."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        init_file = os.path.join(tmp, "init")
        procs = [
            ctx.Process(
                target=_entry,
                args=(fn, r, world, init_file, backend, dict(env or {}), queue, tuple(args),
                      not expect_exit),
            )
            for r in range(world)
        ]
        for p in procs:
            p.start()
        results: dict[int, object] = {}
        errors: list[str] = []
        expected = set(range(world)) - set(expect_exit or ())
        import queue as queue_mod
        import time

        deadline = time.monotonic() + timeout
        while expected - set(results) and time.monotonic() < deadline:
            try:
                rank, kind, value = queue.get(timeout=0.5)
            except queue_mod.Empty:
                if all(not p.is_alive() for p in procs):
                    break
                continue
            if kind == "ok":
                results[rank] = value
            else:
                errors.append(f"rank {rank}:\n{value}")
                results[rank] = None
        for p in procs:
            p.join(timeout=max(0.1, deadline - time.monotonic()))
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
        if errors:
            raise AssertionError("\n".join(errors))
        missing = expected - set(results)
        if missing:
            raise AssertionError(f"ranks {sorted(missing)} did not finish within {timeout} s")
        return [results.get(r) for r in range(world)]
