"""The ``grpc+tictac`` drop-in: loading ``libtictac_tf_server.so`` registers a TF server factory
for ``protocol="grpc+tictac"`` (``tf.distribute.Server``, ``experimental_connect_to_cluster``,
``ParameterServerStrategy`` with ``rpc_layer="grpc+tictac"``). Its servers keep gRPC for the
master and worker services and move every cross-task tensor over TicTac, each at its TIC
priority (docs/tf.md, "The grpc+tictac drop-in"). ``import tictac.tf`` calls :func:`load`.

Looked for in order: ``$TICTAC_TF_SERVER_LIBRARY``, ``$TICTAC_BUILD_DIR/integration/tf/rendezvous/``
(default ``<repo>/build``). Built by Meson when the TF adapter is (option ``tf_rendezvous``).
"""
from __future__ import annotations

import ctypes
import os
import pathlib
from typing import Optional

from tictac.tf import _loader

LIB_NAME = "libtictac_tf_server.so"
_state: dict = {}


def candidates() -> list[pathlib.Path]:
    explicit = os.environ.get("TICTAC_TF_SERVER_LIBRARY")
    if explicit:
        return [pathlib.Path(explicit)]
    return [_loader.build_dir() / "integration" / "tf" / "rendezvous" / LIB_NAME]


def load() -> Optional[pathlib.Path]:
    """Loads the drop-in once per process; returns its path, or None (the reason is kept for
    :func:`rendezvous_stats`) when it is not built. A library that exists but fails to load
    raises ImportError with TF's message."""
    if "path" in _state or "reason" in _state:
        return _state.get("path")
    import tensorflow as tf
    for path in candidates():
        if path.is_file():
            try:
                tf.load_library(str(path))
            except Exception as exc:
                raise ImportError(f"tictac.tf: loading {path} failed: {exc}") from exc
            lib = ctypes.CDLL(str(path))
            lib.tictac_tf_rendezvous_stats.argtypes = [ctypes.POINTER(ctypes.c_longlong)]
            lib.tictac_tf_transfer_log.argtypes = [ctypes.c_int]
            lib.tictac_tf_transfer_log_dump.argtypes = [ctypes.c_char_p]
            lib.tictac_tf_transfer_log_dump.restype = ctypes.c_longlong
            _state.update(path=path, lib=lib)
            return path
    _state["reason"] = ("the grpc+tictac server library is not built (looked in: "
                        + ", ".join(str(p) for p in candidates()) + "); rebuild with "
                        "`meson setup --reconfigure -Dtf_rendezvous=enabled build && ninja -C build`")
    return None


def rendezvous_stats() -> dict:
    """This process's grpc+tictac counters: ``tensors`` and ``bytes`` moved through TicTac (sent
    plus received), ``out_of_order`` (sends that completed after a lower-priority send of the same
    step to the same peer), and the parts: ``sent_tensors``, ``sent_bytes``, ``recv_tensors``,
    ``recv_bytes``, ``grpc_recv_tensor`` (gRPC RecvTensor calls this process's grpc+tictac
    servers answered: 0 when TicTac carried every tensor), ``servers``."""
    if load() is None:
        raise ImportError("tictac.tf.rendezvous_stats: " + _state["reason"])
    out = (ctypes.c_longlong * 7)()
    _state["lib"].tictac_tf_rendezvous_stats(out)
    v = [int(x) for x in out]
    return {"tensors": v[0] + v[3], "bytes": v[1] + v[4], "out_of_order": v[2],
            "sent_tensors": v[0], "sent_bytes": v[1], "recv_tensors": v[3], "recv_bytes": v[4],
            "grpc_recv_tensor": v[5], "servers": v[6]}


def transfer_log(on: bool) -> None:
    """Starts (True) or stops keeping one record per tensor this process receives over TicTac:
    the same interval that gRPC's ``RecvTensor`` entries span in TF's step stats (request issued
    to tensor arrived, TF's clock). Also on with ``TICTAC_TF_TRANSFER_LOG=1``. Read with
    :func:`take_transfers`."""
    if load() is None:
        raise ImportError("tictac.tf.transfer_log: " + _state["reason"])
    _state["lib"].tictac_tf_transfer_log(1 if on else 0)


def take_transfers() -> list:
    """The records kept since the last call, as dicts ``step_id``, ``edge`` (TF's edge name, e.g.
    ``edge_33_w0/Conv2D_2/ReadVariableOp``), ``start_us``, ``end_us``, ``bytes``; and forgets
    them."""
    if load() is None:
        raise ImportError("tictac.tf.take_transfers: " + _state["reason"])
    import tempfile
    with tempfile.NamedTemporaryFile("r", suffix=".log") as f:
        n = _state["lib"].tictac_tf_transfer_log_dump(f.name.encode())
        if n < 0:
            raise OSError(f"tictac.tf.take_transfers: cannot write {f.name}")
        out = []
        for line in f.read().splitlines():
            step, start, end, nbytes, edge = line.split(" ", 4)
            out.append({"step_id": int(step), "start_us": int(start), "end_us": int(end),
                        "bytes": int(nbytes), "edge": edge})
        return out
