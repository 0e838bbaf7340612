"""Overlapped parameter-server steps: each parameter read waits only for its own transfer.

    step = tictac.tf.overlapped(variables, grads_fn, graph_args=(x0, y0))
    for x, y in batches:
        aux = step(x, y)              # start the pulls, run grads_fn(x, y), push its gradients
    tictac.tf.close()

``grads_fn(*args)`` returns the gradients (one per variable, None allowed), or a pair
``(gradients, aux)`` where ``aux`` is any nest of tensors handed back by ``step``. A step:
``ParameterClient.start_pull`` posts every receive (in consumption order) and asks the servers,
then one tf.function runs, for each parameter in consumption order, ``value, t =
pull_wait(tag)`` and ``v.assign(value)``, followed by ``grads_fn``. The waits are stateful,
so TF's automatic control dependencies chain them in that order; each ``v.assign`` writes a
resource, so every later read of ``v`` in ``grads_fn`` is gated on that assign, i.e. on that
one parameter's transfer. Layer 1 computes while layer 2's parameters are still on the wire.

Consumption order: ``order`` (parameter names) if given; else, with ``export_graph`` (default),
the recv order of the graph exported from ``graph_fn`` (default ``grads_fn``) on
``graph_args``, i.e. the order the forward pass first reads the parameters; else declaration
order. The exported graph also goes to the servers (policies tic and tac need it).

After each step: ``last_arrival_s`` maps each parameter name to the wall-clock time (seconds
since the epoch) its transfer landed, ``last_step_s`` is the step's duration.
"""
from __future__ import annotations

import time
from typing import Dict, List, Optional, Sequence

import tensorflow as tf

import tictac.tf as _tt
from tictac.tf import client as _client
from tictac.tf import protocol

__all__ = ["Overlapped", "overlapped", "consumption_order"]


def consumption_order(graph: Optional[dict], names: Sequence[str]) -> List[str]:
    """Parameter names in the order the exported graph's recvs appear (names the graph lacks
    follow in declaration order); declaration order without a graph."""
    names = list(names)
    if graph is None:
        return names
    recvs = [op["name"] for op in graph.get("ops", []) if op.get("kind") == "recv"]
    first = [n for n in dict.fromkeys(recvs) if n in names]
    return first + [n for n in names if n not in first]


class Overlapped:
    """One parameter-server training step with per-parameter gating (see the module doc)."""

    def __init__(self, variables: Sequence[tf.Variable], grads_fn, *, order: Optional[Sequence[str]] = None,
                 export_graph: bool = True, graph_fn=None, graph_args: Sequence = (),
                 names: Optional[Sequence[str]] = None):
        self.variables = list(variables)
        if export_graph and graph_fn is None:
            graph_fn = grads_fn
        self.client = _client.ParameterClient(self.variables, graph_fn=graph_fn if export_graph else None,
                                              graph_args=tuple(graph_args), names=names)
        _client.register(("overlapped", id(self)), self.client)
        names = self.client.names
        if order is not None:
            order = list(order)
            if sorted(order) != sorted(names):
                raise ValueError(f"overlapped: order must name every parameter once; got {order}, "
                                 f"parameters {names}")
        else:
            order = consumption_order(self.client.graph, names)
        self.order = order
        self._index = [names.index(n) for n in order]
        # receives are posted in consumption order
        rank_of = {i: k for k, i in enumerate(self._index)}
        self._post_priorities = [rank_of[i] for i in range(len(names))]
        self._grads_fn = grads_fn
        self._fn = tf.function(self._step)
        self.last_arrival_s: Dict[str, float] = {}
        self.last_step_s = 0.0

    def _step(self, *args):
        arrived = []
        for i in self._index:
            v = self.variables[i]
            value, t = _tt.pull_wait(protocol.param_tag(i), v.dtype)
            v.assign(value)
            arrived.append(t)
        out = self._grads_fn(*args)
        if isinstance(out, tuple) and len(out) == 2 and not isinstance(out[0], tf.Tensor):
            grads, aux = out
        else:
            grads, aux = out, None
        grads = [tf.zeros_like(v) if g is None else g for v, g in zip(self.variables, list(grads))]
        return grads, tf.stack(arrived), aux

    def __call__(self, *args):
        """Runs one step on ``args``; returns grads_fn's aux (None without one)."""
        t0 = time.perf_counter()
        self.client.start_pull(self._post_priorities)
        grads, arrived, aux = self._fn(*args)
        self.client.push(grads)
        self.last_step_s = time.perf_counter() - t0
        self.last_arrival_s = {n: float(t) for n, t in zip(self.order, arrived.numpy())}
        self.client.last_arrival = sorted(self.last_arrival_s, key=self.last_arrival_s.get)
        return aux

    def close(self) -> None:
        self.client.close()


def overlapped(variables, grads_fn, *, order=None, export_graph=True, graph_fn=None, graph_args=(),
               names=None) -> Overlapped:
    """``Overlapped(...)``: a step callable; ``tictac.tf.close()`` closes it with the others."""
    return Overlapped(variables, grads_fn, order=order, export_graph=export_graph, graph_fn=graph_fn,
                      graph_args=graph_args, names=names)
