"""Exports a tf.function's concrete graph to ``tictac-graph/1`` (docs/graph-format.md), so that
``tictac order --policy tic`` can order its parameters. Adapted from the probe
(integration/tf/probe/export_graph.py, rules in docs/tf.md):

  * every captured resource variable becomes one "recv" op (bytes = elements * itemsize),
    named by ``names`` (default: tictac.tf.client.unique_names);
  * its ReadVariableOp / ResourceGather reads fold into it (their consumers depend on the recv);
  * pass-through ops (Placeholder for data, Const, Identity, NoOp, ReadVariableOp, TictacStamp)
    are dropped
    and their dependencies forwarded; updates of a variable (Assign*/ResourceApply*) are left out;
  * every other op is a "compute" op (10 us placeholder time: TIC needs none), in the graph's
    topological order. A nested call (StatefulPartitionedCall) counts as one compute op.

usage: python -m tictac.tf.export_graph OUT.json   (exports a demo 3-layer MLP)
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, Optional, Sequence

import tensorflow as tf

# TictacStamp: the timing probe of tictac.tf.stamp, a pass-through of its input.
PASS_THROUGH = {"Placeholder", "Const", "Identity", "NoOp", "ReadVariableOp", "TictacStamp"}
READS = {"ReadVariableOp", "ResourceGather"}


def _is_update(op_type: str) -> bool:
    return op_type.startswith(("Assign", "ResourceApply", "ResourceSparseApply", "ResourceScatter"))


def export_concrete(concrete, name: str = "tf.function", *, variables: Optional[Sequence] = None,
                    names: Optional[Sequence[str]] = None) -> dict:
    from tictac.tf.client import unique_names
    g = concrete.graph
    variables = list(variables) if variables is not None else list(concrete.variables)
    names = list(names) if names is not None else unique_names(variables)
    name_of_handle = {id(v.handle): n for v, n in zip(variables, names)}
    var_of: Dict[str, str] = {}  # inner placeholder op name -> recv name
    for outer, inner in g.captures:
        n = name_of_handle.get(id(outer))
        if n is not None:
            var_of[inner.op.name] = n
    missing = [v for v in concrete.variables if id(v.handle) not in name_of_handle]
    if missing:
        raise ValueError("export_graph: the function reads variables that are not in `variables`: "
                         + ", ".join(v.name for v in missing))
    ops, deps_of, emitted = [], {}, set()

    def deps(tf_op):
        out = set()
        for t in list(tf_op.inputs):
            out |= deps_of.get(t.op.name, set())
        for c in tf_op.control_inputs:
            out |= deps_of.get(c.name, set())
        return out

    for op in g.get_operations():  # topological order in a FuncGraph
        if op.name in var_of:
            rname = var_of[op.name]
            if rname not in emitted:
                v = variables[names.index(rname)]
                ops.append({"name": rname, "kind": "recv",
                            "bytes": int(v.shape.num_elements()) * v.dtype.size})
                emitted.add(rname)
            deps_of[op.name] = {rname}
        elif op.type in PASS_THROUGH or _is_update(op.type):
            deps_of[op.name] = deps(op) if op.type in PASS_THROUGH else set()
        else:
            entry = {"name": op.name, "kind": "compute", "time": 1e-5}
            ins = sorted(deps(op))
            if ins:
                entry["inputs"] = ins
            ops.append(entry)
            deps_of[op.name] = {op.name}
    # Variables captured but never read still need a recv (sent last by TIC).
    for v, n in zip(variables, names):
        if n not in emitted:
            ops.append({"name": n, "kind": "recv", "bytes": int(v.shape.num_elements()) * v.dtype.size})
    return {"format": "tictac-graph/1", "name": name,
            "meta": {"source": "python/tictac/tf/export_graph.py", "tf_version": tf.__version__,
                     "times": "placeholder 10us per compute op; measure for TAC"},
            "ops": ops}


def export_function(fn, args: Sequence = (), *, variables=None, names=None, name: str = "") -> dict:
    """Traces ``fn`` (a tf.function, or a Python callable wrapped into one) on ``args``."""
    if not hasattr(fn, "get_concrete_function"):
        fn = tf.function(fn)
    concrete = fn.get_concrete_function(*args)
    return export_concrete(concrete, name or getattr(fn, "__name__", "tf.function"),
                           variables=variables, names=names)


def default_cli() -> Optional[str]:
    """``$TICTAC_CLI``, else ``$TICTAC_BUILD_DIR/tictac`` (default <repo>/build), else PATH."""
    if os.environ.get("TICTAC_CLI"):
        return os.environ["TICTAC_CLI"]
    from tictac.tf._loader import build_dir
    built = build_dir() / "tictac"
    if built.is_file() and os.access(built, os.X_OK):
        return str(built)
    return shutil.which("tictac")


def order_priorities(graph: dict, policy: str = "tic", *, cli: Optional[str] = None,
                     extra_args: Sequence[str] = ()) -> Dict[str, int]:
    """``tictac order --graph G --policy P --out O.json``: priority per recv (smaller = first)."""
    exe = cli or default_cli()
    if exe is None:
        raise RuntimeError("the tictac CLI is not built (build/tictac) and not on PATH; set TICTAC_CLI")
    with tempfile.TemporaryDirectory(prefix="tictac-tf-order-") as tmp:
        gpath, opath = os.path.join(tmp, "graph.json"), os.path.join(tmp, "order.json")
        with open(gpath, "w") as f:
            json.dump(graph, f)
        cmd = [exe, "order", "--graph", gpath, "--policy", policy, "--out", opath, *extra_args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()}")
        with open(opath) as f:
            return {str(k): int(v) for k, v in json.load(f)["priorities"].items()}


def order_from_priorities(names: Sequence[str], priorities: Dict[str, int]):
    """Names sorted by (priority, declaration index)."""
    missing = [n for n in names if n not in priorities]
    if missing:
        raise ValueError(f"no priority for: {', '.join(missing)}")
    return sorted(names, key=lambda n: (priorities[n], list(names).index(n)))


def _demo():
    class MLP(tf.Module):
        def __init__(self):
            super().__init__()
            self.w1 = tf.Variable(tf.random.normal([784, 256]), name="dense1/kernel")
            self.b1 = tf.Variable(tf.zeros([256]), name="dense1/bias")
            self.w2 = tf.Variable(tf.random.normal([256, 10]), name="dense2/kernel")
            self.b2 = tf.Variable(tf.zeros([10]), name="dense2/bias")

        @tf.function(input_signature=[tf.TensorSpec([32, 784], tf.float32)])
        def __call__(self, x):
            h = tf.nn.relu(tf.matmul(x, self.w1) + self.b1)
            return tf.nn.softmax(tf.matmul(h, self.w2) + self.b2)

    m = MLP()
    return export_function(m.__call__, (), variables=[m.w1, m.b1, m.w2, m.b2], name="tf demo mlp")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    doc = _demo()
    with open(sys.argv[1], "w") as f:
        json.dump(doc, f, indent=1)
    recvs = [o for o in doc["ops"] if o["kind"] == "recv"]
    print(f"{len(recvs)} recvs, {len(doc['ops']) - len(recvs)} compute ops -> {sys.argv[1]}")
