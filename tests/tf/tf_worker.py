"""A tictac.tf worker of the adapter tests: trains tf_model with the `pulled` wrapper.
usage: tf_worker.py --rank R --world W --store S --steps N [--dim D] [--batch B] [--reverse]
       [--graph] [--overlap] [--die-after K] --out OUT.json
--overlap: tictac.tf.overlapped steps (implies --graph); records per step layer_done_s (when
each layer's output was ready, tictac.tf.stamp) and arrival_s (when each parameter landed)."""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tensorflow as tf  # noqa: E402

import tictac.tf  # noqa: E402
import tf_model  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--rank", type=int, required=True)
p.add_argument("--world", type=int, required=True)
p.add_argument("--store", required=True)
p.add_argument("--steps", type=int, default=3)
p.add_argument("--dim", type=int, default=64)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--reverse", action="store_true")
p.add_argument("--no-bias", action="store_true")
p.add_argument("--graph", action="store_true", help="export the loss graph for TIC")
p.add_argument("--overlap", action="store_true", help="overlapped steps (per-parameter gating)")
p.add_argument("--die-after", type=int, default=-1)
p.add_argument("--timeout", type=float, default=30)
p.add_argument("--out", required=True)
a = p.parse_args()

tictac.tf.init(a.rank, a.world, a.store, timeout=a.timeout)
workers = a.world - 1
w = a.rank - 1
stamps = []


def on_layer(k, h):
    if not a.overlap:
        return h
    h, t = tictac.tf.stamp(h)
    stamps.append(t)
    return h


variables, names, _, loss_fn = tf_model.build(a.dim, reverse=a.reverse, bias=not a.no_bias,
                                              on_layer=on_layer)
x, y = tf_model.data(workers, a.batch, a.dim)
x = tf.constant(x[w * a.batch:(w + 1) * a.batch])
y = tf.constant(y[w * a.batch:(w + 1) * a.batch])
kwargs = {"names": names}
if a.graph and not a.overlap:
    kwargs.update(graph_fn=tf.function(loss_fn), graph_args=(x, y))


def grads_fn(x, y):
    del stamps[:]  # one trace's probes
    with tf.GradientTape() as tape:
        loss = loss_fn(x, y)
    return tape.gradient(loss, variables), tf.stack(stamps)


step_fn = tictac.tf.overlapped(variables, grads_fn, graph_args=(x, y), names=names) if a.overlap else None
arrivals, iter_ms, pull_ms, layer_done_s, arrival_s = [], [], [], [], []
for step in range(a.steps):
    if step == a.die_after:
        os._exit(3)  # a crash: no goodbye to the server
    t0 = time.perf_counter()
    if step_fn is not None:
        done = step_fn(x, y)
        iter_ms.append(1e3 * (time.perf_counter() - t0))
        arrivals.append(step_fn.client.last_arrival)
        layer_done_s.append([float(t) for t in done.numpy()])
        arrival_s.append(step_fn.last_arrival_s)
        continue
    with tictac.tf.pulled(variables, **kwargs) as ps:
        with tf.GradientTape() as tape:
            loss = loss_fn(x, y)
        ps.push(tape.gradient(loss, variables))
    iter_ms.append(1e3 * (time.perf_counter() - t0))
    client = ps.client
    arrivals.append(client.last_arrival)
    pull_ms.append(1e3 * client.last_pull_s)
tictac.tf.close()
with open(a.out, "w") as f:
    json.dump({"rank": a.rank, "arrivals": arrivals, "iter_ms": iter_ms, "pull_ms": pull_ms,
               "layer_done_s": layer_done_s, "arrival_s": arrival_s}, f)
