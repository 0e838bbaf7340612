"""Probe (c): export a tf.function concrete graph to tictac-graph/1 (docs/graph-format.md).

A prototype of the adapter's exporter, run on a small two-layer model:
  * every captured resource variable becomes one "recv" op (bytes = num_elements * itemsize);
    its ReadVariableOp(s) fold into it (consumers of a read depend on the recv);
  * pass-through ops (Placeholder for non-variable inputs, Const, Identity, NoOp,
    ReadVariableOp) are dropped, their dependencies forwarded;
  * every other op becomes a "compute" op; its time is a placeholder (TIC needs none;
    TAC would take them from a TF profile of the same function).
usage: export_graph.py OUT.json
"""
import json
import sys

import tensorflow as tf


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


PASS_THROUGH = {"Placeholder", "Const", "Identity", "NoOp", "ReadVariableOp"}


def export(concrete, name):
    g = concrete.graph
    # captures: (outer tensor, inner placeholder); for a resource variable the outer
    # tensor is the variable's handle.
    by_handle = {id(v.handle): v for v in concrete.variables}
    var_of = {}  # inner placeholder op name -> variable
    for outer, inner in g.captures:
        v = by_handle.get(id(outer))
        if v is not None:
            var_of[inner.op.name] = v

    ops, deps_of = [], {}  # deps_of: tf op name -> set of exported op names it stands for

    def deps(tf_op):
        out = set()
        for t in list(tf_op.inputs):
            out |= deps_of.get(t.op.name, set())
        for c in tf_op.control_inputs:
            out |= deps_of.get(c.name, set())
        return out

    for op in g.get_operations():  # topological order in a FuncGraph
        if op.name in var_of:
            v = var_of[op.name]
            rname = v.name.split(":")[0]
            ops.append({"name": rname, "kind": "recv",
                        "bytes": int(v.shape.num_elements()) * v.dtype.size})
            deps_of[op.name] = {rname}
        elif op.type in PASS_THROUGH:
            deps_of[op.name] = deps(op)
        else:
            entry = {"name": op.name, "kind": "compute", "time": 1e-5}
            ins = sorted(deps(op))
            if ins:
                entry["inputs"] = ins
            ops.append(entry)
            deps_of[op.name] = {op.name}
    return {"format": "tictac-graph/1", "name": name,
            "meta": {"source": "integration/tf/probe/export_graph.py",
                     "tf_version": tf.__version__,
                     "times": "placeholder 10us per compute op; measure for TAC"},
            "ops": ops}


m = MLP()
cf = m.__call__.get_concrete_function()
print("concrete graph op types:", [o.type for o in cf.graph.get_operations()])
print("ReadVariableOp nodes:", [o.name for o in cf.graph.get_operations() if o.type == "ReadVariableOp"])
doc = export(cf, "tf probe mlp")
with open(sys.argv[1], "w") as f:
    json.dump(doc, f, indent=1)
recvs = [o for o in doc["ops"] if o["kind"] == "recv"]
print(f"EXPORT_RESULT {len(recvs)} recvs, {len(doc['ops']) - len(recvs)} compute ops,"
      f" {sum(o['bytes'] for o in recvs)} bytes -> {sys.argv[1]}")
