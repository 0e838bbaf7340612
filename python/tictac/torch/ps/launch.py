"""Process-group setup and a local launcher (N processes on loopback, file:// rendezvous)."""

from __future__ import annotations

import datetime
import os
import socket
import tempfile
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence

import torch
import torch.distributed as dist

__all__ = ["DEFAULT_BACKEND", "init_distributed", "launch_local", "RankFailure"]

# The backend a PS run uses unless told otherwise: TicTac's transport, which enforces the
# TIC/TAC order at the sender. "gloo" stays available as the baseline (no priorities).
DEFAULT_BACKEND = "tictac"


def init_distributed(backend: str = DEFAULT_BACKEND, *, init_method: Optional[str] = None, rank: Optional[int] = None,
                     world_size: Optional[int] = None, timeout: float = 60.0) -> None:
    """init_process_group for ``backend`` ("gloo", "tictac", or a device map like
    "cpu:tictac"); imports tictac.torch first when the backend names tictac (that registers it).
    Without init_method: env:// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, as torchrun sets)."""
    if "tictac" in backend:
        try:
            import tictac.torch  # noqa: F401  registers the "tictac" backend
        except ImportError as e:
            raise RuntimeError(f"backend {backend!r} needs tictac.torch, which does not import: {e} (build it: "
                               f"meson setup build && ninja -C build, with TICTAC_BUILD_DIR=build; or run "
                               f"the baseline with backend 'gloo')") from e
    kw = {}
    if init_method is None:
        init_method = "env://"
    _listen_towards_rendezvous(init_method)
    if rank is not None:
        kw["rank"] = rank
    if world_size is not None:
        kw["world_size"] = world_size
    dist.init_process_group(backend, init_method=init_method, timeout=datetime.timedelta(seconds=timeout), **kw)


def _listen_towards_rendezvous(init_method: str) -> None:
    """With ``tcp://HOST:PORT`` rendezvous torch sets no MASTER_ADDR, so the tictac backend would
    listen on 127.0.0.1 and ranks on other hosts could not reach it. Listen on the local address
    that routes to HOST instead (TICTAC_LISTEN_ADDR, unless the user set it or MASTER_ADDR)."""
    if not init_method.startswith("tcp://") or os.environ.get("TICTAC_LISTEN_ADDR") or os.environ.get("MASTER_ADDR"):
        return
    host = init_method[len("tcp://"):].rsplit(":", 1)[0].strip("[]")
    if not host or host == "localhost" or host.startswith("127."):
        return
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((host, 9))  # UDP connect: picks the route, sends nothing
            os.environ["TICTAC_LISTEN_ADDR"] = s.getsockname()[0]
    except OSError as e:
        raise RuntimeError(f"init_method {init_method!r}: no route to {host!r} ({e}); set TICTAC_LISTEN_ADDR "
                           f"to this rank's reachable address") from e


@dataclass
class RankFailure:
    """A rank that raised (message = its exception) or died (exitcode, message empty)."""
    rank: int
    message: str
    exitcode: Optional[int]

    def __str__(self) -> str:
        return self.message or f"rank {self.rank} exited with code {self.exitcode} without a result"


def _child(rank: int, world: int, init_file: str, backend: str, threads: int, timeout: float,
           fn: Callable, args: Sequence[Any], out_dir: str) -> None:
    torch.set_num_threads(threads)
    code = 0
    try:
        init_distributed(backend, init_method=f"file://{init_file}", rank=rank, world_size=world, timeout=timeout)
        res = fn(rank, *args)
        torch.save(("ok", res), os.path.join(out_dir, f"{rank}.pt"))
    except BaseException as e:  # report, then leave without tearing the group down (no hang)
        code = 1
        msg = f"{type(e).__name__}: {e}"
        try:
            torch.save(("error", msg, traceback.format_exc()), os.path.join(out_dir, f"{rank}.pt"))
        except Exception:
            pass
    if code == 0:
        try:
            dist.destroy_process_group()
        except Exception:
            pass
    os._exit(code)


def launch_local(fn: Callable, world_size: int, args: Sequence[Any] = (), *, backend: str = DEFAULT_BACKEND,
                 threads: int = 1, timeout: float = 60.0, deadline: float = 300.0,
                 env: Optional[dict] = None) -> List[Any]:
    """Run ``fn(rank, *args)`` in ``world_size`` spawned processes joined by a file:// group.

    fn must be importable (a module-level function). Returns one entry per rank: fn's return
    value, or a RankFailure. Processes still alive after ``deadline`` seconds are killed and
    reported as failures (so a hang shows up as a failure, not a stuck caller)."""
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    results: List[Any] = [None] * world_size
    saved = {}
    for k, v in (env or {}).items():
        saved[k] = os.environ.get(k)
        os.environ[k] = v
    try:
        with tempfile.TemporaryDirectory(prefix="tictac-ps-") as tmp:
            init_file = os.path.join(tmp, "rendezvous")
            procs = [ctx.Process(target=_child, args=(r, world_size, init_file, backend, threads, timeout, fn,
                                                       tuple(args), tmp), daemon=True)
                     for r in range(world_size)]
            for p in procs:
                p.start()
            end = time.monotonic() + deadline
            for p in procs:
                p.join(max(0.0, end - time.monotonic()))
            for r, p in enumerate(procs):
                if p.is_alive():
                    p.kill()
                    p.join(5)
                    results[r] = RankFailure(r, f"rank {r} still running after {deadline:g} s: killed", None)
                    continue
                path = os.path.join(tmp, f"{r}.pt")
                if os.path.exists(path):
                    out = torch.load(path, weights_only=False)
                    results[r] = out[1] if out[0] == "ok" else RankFailure(r, out[1], p.exitcode)
                else:
                    results[r] = RankFailure(r, "", p.exitcode)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return results
