"""ParameterServerStrategy with rpc_layer="grpc+tictac" (or "grpc"): a small Keras model trained
by a custom loop (Keras 3 has no PS fit), chief in this process, 1 worker + 1 PS servers in this
process too. Steps are scheduled one at a time (join after each), so the result is
deterministic. Prints one JSON line: {"weights": [...], "stats": rendezvous_stats(),
"variables_on": [device of each variable]}."""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

import tictac.tf as tictac_tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tf_cluster as tc  # noqa: E402

proto = sys.argv[1] if len(sys.argv) > 1 else "grpc+tictac"
ports = tc.free_ports(3)
spec = {"chief": [f"localhost:{ports[0]}"], "worker": [f"localhost:{ports[1]}"], "ps": [f"localhost:{ports[2]}"]}
cluster = tf.train.ClusterSpec(spec)
servers = [tf.distribute.Server(cluster, job_name=j, task_index=0, protocol=proto, start=True)
           for j in ("worker", "ps")]
resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(cluster, task_type="chief", task_id=0,
                                                                  rpc_layer=proto)
strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
coord = tf.distribute.coordinator.ClusterCoordinator(strategy)
keras.utils.set_random_seed(3)
with strategy.scope():
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, activation="tanh"),
                              keras.layers.Dense(4)])
rng = np.random.default_rng(5)
x = tf.constant(rng.standard_normal((8, 16)), tf.float32)
y = tf.constant(rng.standard_normal((8, 4)), tf.float32)


@tf.function
def step():
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x) - y))
    grads = tape.gradient(loss, model.trainable_variables)
    for v, g in zip(model.trainable_variables, grads):  # plain SGD (Keras 3's optimizers have no PSS)
        v.assign_sub(0.1 * g)
    return loss


losses = []
for _ in range(4):
    r = coord.schedule(step)
    coord.join()
    losses.append(float(r.fetch()))
print(json.dumps({"losses": losses, "weights": [np.asarray(v.numpy()).tolist() for v in model.trainable_variables],
                  "variables_on": [str(getattr(getattr(v, "value", v), "device", "?")) for v in model.trainable_variables],
                  "stats": tictac_tf.rendezvous_stats()}), flush=True)
os._exit(0)  # PSS's coordinator threads do not stop on their own
