"""Probe (a): load the grpc+tictac ServerFactory plugin and see whether TF picks it up.

usage: test_server.py LIB.so {graph|eager|pss|stock}
  graph: tf.distribute.Server(protocol="grpc+tictac") for a ps and a worker task in this
         process; a TF1 session on the worker reads a variable placed on the ps, so the
         worker's rendezvous must fetch it remotely (RecvFromRemoteAsync).
  eager: TF2 eager: tf.config.experimental_connect_to_cluster(..., protocol="grpc+tictac")
         against a ps server started in this process; a remote variable read.
  pss:   tf.distribute.experimental.ParameterServerStrategy with a SimpleClusterResolver
         (rpc_layer="grpc+tictac"): in-process worker and ps servers, this process is the
         chief/coordinator; three scheduled steps read a ps variable on the worker.
  stock: same as graph without the plugin and with protocol="grpc+tictac": shows the error
         TF gives when no factory accepts the protocol.
"""
import ctypes
import socket
import sys

import tensorflow as tf

lib_path, mode = sys.argv[1], sys.argv[2]


def free_port():
    s = socket.socket()
    s.bind(("localhost", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def counters():
    c = (ctypes.c_long * 4)()
    ctypes.CDLL(lib_path).tictac_probe_counters(c)
    return dict(zip(["servers", "rendezvous_mgrs", "step_rendezvous", "remote_recvs"], list(c)))


if mode != "stock":
    tf.load_library(lib_path)
    print("loaded", lib_path, "counters", counters(), flush=True)

ps_port, wk_port = free_port(), free_port()
spec = {"ps": [f"localhost:{ps_port}"], "worker": [f"localhost:{wk_port}"]}
cluster = tf.train.ClusterSpec(spec)
proto = "grpc+tictac"

if mode in ("graph", "stock"):
    try:
        ps = tf.distribute.Server(cluster, job_name="ps", task_index=0, protocol=proto, start=True)
        wk = tf.distribute.Server(cluster, job_name="worker", task_index=0, protocol=proto, start=True)
    except Exception as e:  # the stock case lands here
        print("SERVER_RESULT", "NO_FACTORY", type(e).__name__, str(e).splitlines()[0][:300], flush=True)
        sys.exit(0 if mode == "stock" else 1)
    print("servers up:", ps.target, wk.target, "counters", counters(), flush=True)
    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:ps/task:0/device:CPU:0"):
            v = tf.compat.v1.get_variable("w", initializer=tf.range(8, dtype=tf.float32))
        with tf.device("/job:worker/task:0/device:CPU:0"):
            y = tf.reduce_sum(v.read_value() * 2.0)
        init = tf.compat.v1.global_variables_initializer()
    with tf.compat.v1.Session(wk.target, graph=g) as sess:
        sess.run(init)
        out = [float(sess.run(y)) for _ in range(3)]
    c = counters()
    print("session result", out, "counters", c, flush=True)
    ok = out == [56.0] * 3 and c["servers"] == 2 and c["remote_recvs"] >= 3
    print("SERVER_RESULT", "PASS" if ok else "FAIL", flush=True)
    sys.exit(0 if ok else 1)

if mode == "eager":
    ps = tf.distribute.Server(cluster, job_name="ps", task_index=0, protocol=proto, start=True)
    # The eager client is the worker task itself (it creates its own server from the
    # same factory, which must be a GrpcServer subclass).
    # (A SimpleClusterResolver without master= fails here with "cannot find master
    # grpc+tictac:// in the cluster"; pass the ClusterSpec and the local task instead.)
    tf.config.experimental_connect_to_cluster(
        cluster, job_name="worker", task_index=0, protocol=proto)
    print("connected, counters", counters(), flush=True)
    with tf.device("/job:ps/task:0/device:CPU:0"):
        v = tf.Variable(tf.range(8, dtype=tf.float32))

    @tf.function
    def step():
        with tf.device("/job:worker/task:0/device:CPU:0"):
            return tf.reduce_sum(v.read_value() * 2.0)

    out = [float(step()) for _ in range(3)]
    c = counters()
    print("eager result", out, "counters", c, flush=True)
    ok = out == [56.0] * 3 and c["servers"] == 2
    print("EAGER_RESULT", "PASS" if ok else "FAIL", "(remote_recvs=%d)" % c["remote_recvs"], flush=True)
    sys.exit(0 if ok else 1)

if mode == "pss":
    spec["chief"] = [f"localhost:{free_port()}"]
    cluster = tf.train.ClusterSpec(spec)
    servers = [tf.distribute.Server(cluster, job_name=j, task_index=0, protocol=proto, start=True)
               for j in ("worker", "ps")]
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        cluster, task_type="chief", task_id=0, rpc_layer=proto)
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coord = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        v = tf.Variable(tf.range(8, dtype=tf.float32))

    @tf.function
    def step():
        return tf.reduce_sum(v.read_value() * 2.0)

    results = [coord.schedule(step) for _ in range(3)]
    coord.join()
    out = [float(r.fetch()) for r in results]
    c = counters()
    print("pss result", out, "counters", c, flush=True)
    ok = out == [56.0] * 3 and c["servers"] == 3 and c["remote_recvs"] >= 3
    print("PSS_RESULT", "PASS" if ok else "FAIL", flush=True)
    sys.exit(0 if ok else 1)
