"""Inner part of bench/tf/grpc_vs_tictac.sh: TF1 parameter-server inference of a VGG-like convnet
(variables on /job:ps, forward pass on /job:worker), every arm's PS and worker servers in this
process, tensors over loopback.

  --mode calibrate   the forward pass with the variables local: prints JSON {"compute_s",
                     "param_bytes"} (median of --steps steps)
  --mode compare     arms grpc, tictac (grpc+tictac, TIC) and tictac_fifo (grpc+tictac with
                     TICTAC_PRIORITY=0: TicTac's transport, no ordering) side by side; the steps
                     are interleaved (one step of each arm in turn, the arm order rotating), so
                     every arm sees the same machine load. Prints JSON per arm: step times (s),
                     median, and the paired ratio of grpc's step to the arm's.
"""
import argparse
import contextlib
import json
import os
import socket
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.compat.v1.disable_eager_execution()
import tictac.tf as tictac_tf  # noqa: E402

CONV = [64, 64, "pool", 128, 128, "pool", 256, 256, "pool", 512, "pool"]
DENSE = [1024, 10]


def shapes():
    """(kind, shape) of every layer's weight, forward order."""
    out = []
    c, hw = 3, 32
    for layer in CONV:
        if layer == "pool":
            hw //= 2
            continue
        out.append(("conv", [3, 3, c, layer]))
        c = layer
    d = hw * hw * c
    for n in DENSE:
        out.append(("dense", [d, n]))
        d = n
    return out


def variables(var_device):
    """The parameters on `var_device`, declared last layer first (so TF's own fetch order is
    not the forward one); returns ([(kind, w, b)] in forward order, bytes)."""
    sh = shapes()
    rng = np.random.default_rng(1)
    params = [None] * len(sh)
    with tf.device(var_device):
        for i in reversed(range(len(sh))):
            kind, shape = sh[i]
            fan_in = int(np.prod(shape[:-1]))
            params[i] = (kind, tf.Variable((rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32),
                                           name=f"{kind}{i}"),
                         tf.Variable(np.zeros(shape[-1], np.float32), name=f"b{i}"))
    return params, sum(int(np.prod(s)) * 4 + s[-1] * 4 for _, s in sh)


def forward(x, params, compute_device):
    """VGG-like: 3x3 convs (compute-heavy, few parameters) then dense layers (parameter-heavy)."""
    with tf.device(compute_device):
        h, k = x, 0
        for layer in CONV:
            if layer == "pool":
                h = tf.nn.max_pool2d(h, 2, 2, "VALID")
                continue
            _, w, b = params[k]
            h = tf.nn.relu(tf.nn.conv2d(h, w, 1, "SAME") + b)
            k += 1
        h = tf.reshape(h, [tf.shape(h)[0], -1])
        for j in range(len(DENSE)):
            _, w, b = params[k]
            h = tf.matmul(h, w) + b
            if j + 1 < len(DENSE):
                h = tf.nn.relu(h)
            k += 1
        return tf.reduce_sum(h)


def model(x, var_device, compute_device):
    params, nbytes = variables(var_device)
    return forward(x, params, compute_device), nbytes


def free_port(offset=1000):
    while True:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        p = s.getsockname()[1]
        s.close()
        t = socket.socket()
        try:
            t.bind(("127.0.0.1", p + offset))
            return p
        except OSError:
            continue
        finally:
            t.close()


@contextlib.contextmanager
def environment(env):
    """The variables of `env` set while the block runs (servers read TICTAC_* when created)."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def arm(protocol, batch, env=None):
    with environment(env or {}):
        spec = tf.train.ClusterSpec({"ps": [f"localhost:{free_port()}"], "worker": [f"localhost:{free_port()}"]})
        servers = [tf.distribute.Server(spec, job_name=j, task_index=0, protocol=protocol, start=True)
                   for j in ("ps", "worker")]
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(np.random.default_rng(2).standard_normal((batch, 32, 32, 3)).astype(np.float32))
        out, nbytes = model(x, "/job:ps/task:0", "/job:worker/task:0")
        init = tf.compat.v1.global_variables_initializer()
    sess = tf.compat.v1.Session(servers[1].target, graph=g)
    sess.run(init)
    return {"servers": servers, "sess": sess, "out": out, "bytes": nbytes}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["calibrate", "compare"], required=True)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    if args.mode == "calibrate":
        g = tf.Graph()
        with g.as_default():
            x = tf.constant(np.random.default_rng(2).standard_normal((args.batch, 32, 32, 3)).astype(np.float32))
            out, nbytes = model(x, "/cpu:0", "/cpu:0")
            init = tf.compat.v1.global_variables_initializer()
        with tf.compat.v1.Session(graph=g) as sess:
            sess.run(init)
            for _ in range(args.warmup):
                sess.run(out)
            times = []
            for _ in range(args.steps):
                t = time.perf_counter()
                sess.run(out)
                times.append(time.perf_counter() - t)
        print(json.dumps({"compute_s": statistics.median(times), "param_bytes": nbytes}))
        return
    arms = {"grpc": arm("grpc", args.batch), "tictac": arm("grpc+tictac", args.batch),
            "tictac_fifo": arm("grpc+tictac", args.batch, {"TICTAC_PRIORITY": "0"})}
    values = {}
    for name, a in arms.items():
        for _ in range(args.warmup):
            values[name] = a["sess"].run(a["out"])
    ref = values["grpc"]
    for name, v in values.items():  # same model, same weights: same output
        assert abs(v - ref) <= 1e-3 * max(1.0, abs(ref)), (name, v, ref)
    names = list(arms)
    times = {n: [] for n in names}
    for i in range(args.steps):
        for n in names[i % 3:] + names[:i % 3]:
            a = arms[n]
            t = time.perf_counter()
            a["sess"].run(a["out"])
            times[n].append(time.perf_counter() - t)
    stats = tictac_tf.rendezvous_stats()
    result = {"param_bytes": arms["grpc"]["bytes"], "steps": args.steps, "stats": stats}
    for n in names:
        paired = [g / t for g, t in zip(times["grpc"], times[n])]
        result[n] = {"median_s": statistics.median(times[n]), "mean_s": statistics.fmean(times[n]),
                     "paired_vs_grpc": statistics.median(paired), "times": [round(t, 4) for t in times[n]]}
    print(json.dumps(result))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
