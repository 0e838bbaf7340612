"""TicTac for TensorFlow: parameter-server training whose parameter transfers go out in the
order the computation needs them (TIC), over TicTac's transport.

Worker side, a custom training loop (the change is an import, ``init`` and a wrapper)::

    import tictac.tf
    tictac.tf.init()                       # TICTAC_RANK / TICTAC_WORLD_SIZE / TICTAC_STORE
    for x, y in batches:
        with tictac.tf.pulled(model_vars) as ps:      # fresh parameters from the server(s)
            with tf.GradientTape() as tape:
                loss = loss_fn(x, y)
            ps.push(tape.gradient(loss, model_vars))  # gradients back; the server applies SGD
    tictac.tf.close()

Overlapped steps (each parameter read waits only for its own transfer, so compute starts when
the first layer's parameters have landed; see tictac.tf.overlap)::

    step = tictac.tf.overlapped(model_vars, grads_fn, graph_args=(x0, y0))
    for x, y in batches:
        step(x, y)                         # pulls, computes grads_fn(x, y), pushes
    tictac.tf.close()

Servers: ``python -m tictac.tf.server --policy tic`` (see tictac.tf.server). The ops
(``pull``, ``push``, ``pull_all``, ``push_all``, ``pull_start``, ``pull_wait``, ``stamp``) are
usable directly as well.

Drop-in: after ``import tictac.tf``, ``protocol="grpc+tictac"`` (TF1 servers and sessions,
``ParameterServerStrategy(..., rpc_layer="grpc+tictac")``) moves cross-task tensors over TicTac
in TIC order; ``rendezvous_stats()`` counts them (tictac.tf.rendezvous).

``import tictac.tf`` raises ImportError with the reason when the op library is not built.
"""
from __future__ import annotations

import atexit
import ctypes
import os
from typing import Optional, Sequence

import tensorflow as tf

from tictac.tf import _loader

ops, library_path = _loader.load()
_cdll = ctypes.CDLL(str(library_path))
_cdll.tictac_tf_rank.restype = ctypes.c_int
_cdll.tictac_tf_size.restype = ctypes.c_int

__all__ = ["init", "shutdown", "rank", "size", "pull", "push", "pull_all", "push_all",
           "pull_start", "pull_wait", "stamp", "ParameterClient", "pulled", "overlapped",
           "Overlapped", "close", "ops", "library_path", "rendezvous_stats", "transfer_log", "take_transfers"]

_session: dict = {}


def init(rank: Optional[int] = None, size: Optional[int] = None, store: Optional[str] = None,
         timeout: Optional[float] = None, key_prefix: str = "tf/", num_servers: Optional[int] = None):
    """Joins the process-wide TicTac group (blocking until every rank has joined).

    ``store`` is ``file:DIR`` (a FileStore) or ``tcp:HOST:PORT`` (a TcpStore; rank 0 runs the
    server). Defaults from the environment: TICTAC_RANK, TICTAC_WORLD_SIZE, TICTAC_STORE,
    TICTAC_TF_TIMEOUT (seconds, default 60; every transfer's limit), TICTAC_NUM_SERVERS (1;
    ranks 0..S-1 are servers, the rest workers)."""
    env = os.environ
    rank = int(env["TICTAC_RANK"]) if rank is None else int(rank)
    size = int(env["TICTAC_WORLD_SIZE"]) if size is None else int(size)
    store = env["TICTAC_STORE"] if store is None else store
    timeout = float(env.get("TICTAC_TF_TIMEOUT", "60")) if timeout is None else float(timeout)
    num_servers = int(env.get("TICTAC_NUM_SERVERS", "1")) if num_servers is None else int(num_servers)
    if not 1 <= num_servers < size:
        raise ValueError(f"tictac.tf.init: {num_servers} server(s) in a group of {size} ranks "
                         "leaves no worker")
    ops.tictac_init(rank=rank, size=size, store=store, timeout_ms=int(timeout * 1000),
                    key_prefix=key_prefix)
    _session.update(rank=rank, size=size, store=store, timeout=timeout, num_servers=num_servers)
    return rank, size


def shutdown() -> None:
    """Closes the group (idempotent). Registered with atexit."""
    _session.clear()
    _cdll.tictac_tf_shutdown()


atexit.register(shutdown)


def rank() -> int:
    return int(_cdll.tictac_tf_rank())


def size() -> int:
    return int(_cdll.tictac_tf_size())


def session() -> dict:
    if not _session:
        raise RuntimeError("tictac.tf: call tictac.tf.init() first")
    return _session


# ---- ops ------------------------------------------------------------------------------------

def pull(tag: int, shape, dtype, src_rank: int):
    """Blocking receive of one tensor (TF error naming the rank on failure or timeout)."""
    return ops.tictac_pull(tag=int(tag), shape=[int(d) for d in shape], dtype=tf.as_dtype(dtype),
                           src_rank=int(src_rank))


def push(value, tag: int, dst_rank: int, priority: int = 0) -> None:
    """Sends one tensor; returns once it is sent."""
    ops.tictac_push(value=value, priority=tf.constant(int(priority), tf.int64), tag=int(tag),
                    dst_rank=int(dst_rank))


def pull_all(specs: Sequence[tuple]):
    """Receives many tensors at once. ``specs``: (tag, shape, dtype, src_rank) each.
    Returns (tensors, arrival order as a list of indices into specs)."""
    if not specs:
        return [], []
    tags = [int(s[0]) for s in specs]
    shapes = [[int(d) for d in s[1]] for s in specs]
    out = ops.tictac_pull_all(tags=tags, src_ranks=[int(s[3]) for s in specs],
                              ranks=[len(sh) for sh in shapes], dims=[d for sh in shapes for d in sh],
                              T=[tf.as_dtype(s[2]) for s in specs])
    values, order = out[0], out[1]
    return list(values), [int(i) for i in order.numpy()]


def push_all(values: Sequence, tags: Sequence[int], dst_ranks: Sequence[int],
             priorities: Sequence[int]) -> None:
    """Posts every send at once with its priority (smaller = sent first), then waits."""
    if not values:
        return
    ops.tictac_push_all(values=list(values), priorities=tf.constant([int(p) for p in priorities], tf.int64),
                        tags=[int(t) for t in tags], dst_ranks=[int(d) for d in dst_ranks])


def pull_start(specs: Sequence[tuple], priorities: Optional[Sequence[int]] = None) -> None:
    """Posts one receive per spec (tag, shape, dtype, src_rank) and returns at once; the
    receives are posted in ``priorities`` order (smaller first; default: the given order).
    Each tag is then handed over by exactly one ``pull_wait``. InvalidArgumentError when a tag
    repeats or is still started."""
    if not specs:
        return
    shapes = [[int(d) for d in s[1]] for s in specs]
    prio = list(range(len(specs))) if priorities is None else [int(p) for p in priorities]
    ops.tictac_pull_start(priorities=tf.constant(prio, tf.int64), tags=[int(s[0]) for s in specs],
                          src_ranks=[int(s[3]) for s in specs], ranks=[len(sh) for sh in shapes],
                          dims=[d for sh in shapes for d in sh], T=[tf.as_dtype(s[2]) for s in specs])


def pull_wait(tag: int, dtype):
    """Blocks until the started receive of ``tag`` has landed; returns (tensor, arrival time in
    seconds since the epoch, float64). FailedPreconditionError when ``tag`` was not started,
    DeadlineExceededError (receive cancelled) after the group timeout. Usable in a tf.function,
    where consecutive waits run in program order (they are stateful)."""
    out, arrived = ops.tictac_pull_wait(tag=int(tag), dtype=tf.as_dtype(dtype))
    return out, arrived


def stamp(x):
    """Returns (x, the wall-clock time in seconds at which x was ready, float64). Not stateful,
    so in a tf.function it runs as soon as x is computed; its gradient is the identity."""
    y, t = ops.tictac_stamp(x=x)
    return y, t


@tf.RegisterGradient("TictacStamp")
def _stamp_grad(op, dy, dt):  # noqa: ARG001: the time has no gradient
    return [dy]


from tictac.tf.client import ParameterClient, pulled, close  # noqa: E402
from tictac.tf.overlap import Overlapped, overlapped  # noqa: E402
from tictac.tf import rendezvous as _rendezvous  # noqa: E402
from tictac.tf.rendezvous import rendezvous_stats, take_transfers, transfer_log  # noqa: E402

_rendezvous.load()  # registers protocol="grpc+tictac" when libtictac_tf_server.so is built
