"""The worker side: ParameterClient pulls every parameter from its server at the start of a
step (``pull``, blocking; or ``start_pull``, whose receives are then handed over one by one by
``tictac.tf.pull_wait``, see tictac.tf.overlap) and pushes the gradients back; ``pulled`` is
the one-line wrapper around it."""
from __future__ import annotations

import contextlib
import time
from typing import Dict, List, Optional, Sequence

import tensorflow as tf

import tictac.tf as _tt
from tictac.tf import protocol

__all__ = ["ParameterClient", "pulled", "close", "unique_names"]


def unique_names(variables) -> List[str]:
    """Variable names without ':0', made unique with '_<n>' suffixes (tf.Variable names need not be)."""
    seen: Dict[str, int] = {}
    out = []
    for v in variables:
        base = getattr(v, "path", None) or v.name.split(":")[0]
        name = base
        while name in seen:
            seen[base] += 1
            name = f"{base}_{seen[base]}"
        seen.setdefault(name, 0)
        out.append(name)
    return out


class ParameterClient:
    """Parameters ``variables`` live on the servers; ``pull()`` overwrites the local copies with
    the servers' values (the servers send them in their policy's order), ``push(grads)`` sends
    the gradients (the servers average over workers and apply SGD).

    ``graph_fn``/``graph_args``: a tf.function (and example arguments) whose graph is exported
    (tictac.tf.export_graph) and sent to the servers, which compute the TIC order from it.
    Every worker exports it (``graph`` holds it; None without graph_fn), only the first
    worker's is sent. After each ``pull``, ``last_arrival`` holds the parameter names in the
    order they arrived and ``last_pull_s`` the pull's duration."""

    def __init__(self, variables: Sequence[tf.Variable], *, graph_fn=None, graph_args=(),
                 names: Optional[Sequence[str]] = None):
        s = _tt.session()
        self.variables = list(variables)
        if not self.variables:
            raise ValueError("ParameterClient: no variables")
        self.rank, self.size, self.num_servers = s["rank"], s["size"], s["num_servers"]
        if self.rank < self.num_servers:
            raise RuntimeError(f"ParameterClient on rank {self.rank}: ranks 0..{self.num_servers - 1} "
                               "are servers (run python -m tictac.tf.server there)")
        self.names = list(names) if names is not None else unique_names(self.variables)
        if len(set(self.names)) != len(self.names):
            raise ValueError("ParameterClient: parameter names must be unique")
        nbytes = [int(v.shape.num_elements()) * v.dtype.size for v in self.variables]
        self.owners = protocol.shard(nbytes, self.num_servers)
        self.last_arrival: List[str] = []
        self.last_pull_s = 0.0
        self.steps = 0
        self._closed = False
        self.graph = None
        if graph_fn is not None:
            from tictac.tf.export_graph import export_function
            self.graph = export_function(graph_fn, graph_args, variables=self.variables,
                                         names=self.names)
        if self.rank == self.num_servers:  # the first worker describes the model
            self._send_spec()

    def _send_spec(self):
        spec = {"names": self.names,
                "shapes": [[int(d) for d in v.shape] for v in self.variables],
                "dtypes": [v.dtype.name for v in self.variables],
                "owners": self.owners,
                "num_workers": self.size - self.num_servers}
        if self.graph is not None:
            spec["graph"] = self.graph
        n, raw = protocol.encode_spec(spec)
        for server in range(self.num_servers):
            idx = [i for i, o in enumerate(self.owners) if o == server]
            values = [n, raw] + [self.variables[i].read_value() for i in idx]
            tags = [protocol.SPEC_LEN, protocol.SPEC] + [protocol.param_tag(i) for i in idx]
            _tt.push_all(values, tags, [server] * len(values), [0] * len(values))

    def pull(self) -> None:
        if self._closed:
            raise RuntimeError("ParameterClient: closed")
        t0 = time.perf_counter()
        _tt.push_all([tf.constant(1, tf.int64)] * self.num_servers, [protocol.CTRL] * self.num_servers,
                     list(range(self.num_servers)), [0] * self.num_servers)
        specs = [(protocol.param_tag(i), v.shape, v.dtype, self.owners[i])
                 for i, v in enumerate(self.variables)]
        values, order = _tt.pull_all(specs)
        for v, val in zip(self.variables, values):
            v.assign(val)
        self.last_arrival = [self.names[i] for i in order]
        self.last_pull_s = time.perf_counter() - t0

    def start_pull(self, priorities: Optional[Sequence[int]] = None) -> None:
        """Posts a receive for every parameter (tag protocol.param_tag(i); in ``priorities``
        order, one per variable, smaller first; default declaration order), then asks the
        servers for them, and returns at once. Each parameter must then be taken with
        ``tictac.tf.pull_wait(protocol.param_tag(i), dtype)`` (tictac.tf.overlap does)."""
        if self._closed:
            raise RuntimeError("ParameterClient: closed")
        specs = [(protocol.param_tag(i), v.shape, v.dtype, self.owners[i])
                 for i, v in enumerate(self.variables)]
        _tt.pull_start(specs, priorities)
        _tt.push_all([tf.constant(1, tf.int64)] * self.num_servers, [protocol.CTRL] * self.num_servers,
                     list(range(self.num_servers)), [0] * self.num_servers)

    def push(self, grads) -> None:
        grads = list(grads)
        if len(grads) != len(self.variables):
            raise ValueError(f"ParameterClient.push: {len(grads)} gradients for {len(self.variables)} variables")
        vals = []
        for v, g in zip(self.variables, grads):
            if g is None:
                g = tf.zeros_like(v)
            elif isinstance(g, tf.IndexedSlices):
                g = tf.convert_to_tensor(g)
            vals.append(tf.cast(g, v.dtype))
        _tt.push_all(vals, [protocol.grad_tag(i) for i in range(len(vals))], self.owners,
                     list(range(len(vals))))
        self.steps += 1

    def close(self) -> None:
        """Tells the servers this worker is done (they stop when every worker is)."""
        if self._closed:
            return
        self._closed = True
        _tt.push_all([tf.constant(0, tf.int64)] * self.num_servers, [protocol.CTRL] * self.num_servers,
                     list(range(self.num_servers)), [0] * self.num_servers)
        _tt.pull_all([(protocol.BYE, [], tf.int64, s) for s in range(self.num_servers)])


_clients: Dict[tuple, ParameterClient] = {}


def register(key: tuple, client: ParameterClient) -> None:
    """Makes ``close()`` close ``client`` too (tictac.tf.overlap registers its clients)."""
    _clients[key] = client


class _Pulled:
    def __init__(self, client: ParameterClient):
        self.client = client
        self.pushed = False

    def push(self, grads) -> None:
        self.client.push(grads)
        self.pushed = True


@contextlib.contextmanager
def pulled(variables, **client_kwargs):
    """``with tictac.tf.pulled(vars) as ps: ...; ps.push(grads)``: pulls fresh parameters on
    entry; the block must push its gradients (a block that does not raises on exit, since the
    servers would wait for them)."""
    variables = list(variables)
    key = tuple(id(v) for v in variables)
    client = _clients.get(key)
    if client is None:
        client = _clients[key] = ParameterClient(variables, **client_kwargs)
    client.pull()
    handle = _Pulled(client)
    yield handle
    if not handle.pushed:
        raise RuntimeError("tictac.tf.pulled: the block ended without ps.push(grads); the servers wait for them")


def close() -> None:
    """Closes every client made by ``pulled`` (the servers then stop)."""
    for c in list(_clients.values()):
        c.close()
    _clients.clear()
