"""One task of a TF1 graph-mode parameter-server cluster (tf.compat.v1, between-graph
replication): variables on /job:ps/task:0, compute on /job:worker/task:I, each worker with its
own tf.distribute.Server and Session. ``--protocol grpc`` or ``grpc+tictac`` is the only change.

Deterministic: workers take turns (turn files in ``--dir``: of N workers, worker i runs global step N*s+i),
so the final weights depend only on the data, never on timing. Float64 MLP; the variables are
declared last layer first (so TF's natural fetch order is not the forward order).

Roles:
  ps      serves until ``DIR/done`` exists, then writes DIR/ps.json (its rendezvous stats, and
          under "after_step1" the stats when worker 0 had finished its first step).
  worker  trains --steps steps; writes DIR/worker<I>.json (stats); worker 0 also writes
          DIR/weights.npz after the last turn and then DIR/done. ``--forever``: step until killed
          or failing, touching DIR/step<k> after each step; on an error writes DIR/error.json
          ({"type", "message", "time"}) and exits 3.
"""
import argparse
import json
import os
import pathlib
import sys
import time
import traceback

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.compat.v1.disable_eager_execution()
import tictac.tf as tictac_tf  # noqa: E402  (registers grpc+tictac)


def wait_file(path: pathlib.Path, timeout: float):
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout}s for {path}")
        time.sleep(0.005)


def stats():
    return tictac_tf.rendezvous_stats()


def build(args, index):
    dims = [args.dim] * (args.layers + 1)
    rng = np.random.default_rng(7)
    init = [(rng.standard_normal((dims[k], dims[k + 1])) / np.sqrt(dims[k]), np.zeros(dims[k + 1]))
            for k in range(args.layers)]
    params = [None] * args.layers
    with tf.device("/job:ps/task:0"):
        for k in reversed(range(args.layers)):  # declared last layer first
            w = tf.Variable(init[k][0], name=f"w{k + 1}", dtype=tf.float64)
            b = None if args.no_bias else tf.Variable(init[k][1], name=f"b{k + 1}", dtype=tf.float64)
            params[k] = (w, b)
    data = np.random.default_rng(100 + index)
    x = data.standard_normal((args.batch, dims[0]))
    y = data.standard_normal((args.batch, dims[-1]))
    with tf.device(f"/job:worker/task:{index}"):
        h = tf.constant(x)
        for k, (w, b) in enumerate(params):
            h = tf.matmul(h, w) if b is None else tf.matmul(h, w) + b
            if k + 1 < args.layers:
                h = tf.tanh(h)
        loss = tf.reduce_mean(tf.square(h - tf.constant(y)))
        variables = [v for pair in params for v in pair if v is not None]
        grads = tf.gradients(loss, variables)
    train = tf.compat.v1.train.GradientDescentOptimizer(0.1).apply_gradients(zip(grads, variables))
    return variables, loss, train


def run_worker(args, cluster, d: pathlib.Path):
    server = tf.distribute.Server(cluster, job_name="worker", task_index=args.index,
                                  protocol=args.protocol, start=True)
    graph = tf.Graph()
    with graph.as_default():
        variables, loss, train = build(args, args.index)
        with tf.compat.v1.Session(server.target) as sess:
            if args.index == 0:
                sess.run(tf.compat.v1.global_variables_initializer())
                (d / "turn0").touch()
            if args.forever:
                k = 0
                try:
                    while True:
                        sess.run(train)
                        k += 1
                        (d / f"step{k}").touch()
                except Exception as exc:  # the test wants the error's type and message
                    (d / "error.json").write_text(json.dumps(
                        {"type": type(exc).__name__, "message": str(exc)[:4000], "time": time.time()}))
                    sys.exit(3)
            nw = cluster.num_tasks("worker")
            for s in range(args.steps):
                turn = nw * s + args.index
                wait_file(d / f"turn{turn}", args.timeout)
                sess.run(train)
                (d / f"turn{turn + 1}").touch()
            if args.index == 0:
                wait_file(d / f"turn{nw * args.steps}", args.timeout)
                values = sess.run(variables)
                np.savez(d / "weights.npz", **{f"p{i}": v for i, v in enumerate(values)})
    (d / f"worker{args.index}.json").write_text(json.dumps(stats()))
    if args.index == 0:
        (d / "done").touch()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--role", choices=["ps", "worker"], required=True)
    ap.add_argument("--index", type=int, default=0)
    ap.add_argument("--cluster", required=True, help="JSON cluster spec")
    ap.add_argument("--protocol", default="grpc+tictac")
    ap.add_argument("--dir", required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--timeout", type=float, default=90)
    ap.add_argument("--no-bias", action="store_true", help="weights only (the order test)")
    ap.add_argument("--forever", action="store_true")
    args = ap.parse_args()
    d = pathlib.Path(args.dir)
    cluster = tf.train.ClusterSpec(json.loads(args.cluster))
    try:
        if args.role == "ps":
            tf.distribute.Server(cluster, job_name="ps", task_index=0, protocol=args.protocol, start=True)
            # the stats once worker 0's first training step is done (turn1): the order test
            # judges the steps after it (the first has no payload sizes to pre-post yet)
            warm = None
            deadline = time.monotonic() + args.timeout
            while not (d / "done").exists():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"waited {args.timeout}s for {d / 'done'}")
                if warm is None and (d / "turn1").exists():
                    warm = stats()
                time.sleep(0.005)
            (d / "ps.json").write_text(json.dumps({**stats(), "after_step1": warm}))
        else:
            run_worker(args, cluster, d)
    except SystemExit:
        raise
    except Exception:
        traceback.print_exc()
        sys.exit(2)


if __name__ == "__main__":
    main()
