"""TICTAC_AUTH_TOKEN and the drop-in: a PS server created with token argv[1] and a worker server
with token argv[2] (TicTac reads the variable when each server's transport starts), both in this
process; a worker step reads a PS variable. Prints "RESULT [...]" or "ERROR <type> <s> <msg>"."""
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tensorflow as tf  # noqa: E402
import tictac.tf  # noqa: E402,F401  (registers grpc+tictac)
import tf_cluster as tc  # noqa: E402

p = tc.free_ports(2)
c = tf.train.ClusterSpec({"ps": [f"localhost:{p[0]}"], "worker": [f"localhost:{p[1]}"]})
os.environ["TICTAC_AUTH_TOKEN"] = sys.argv[1]
ps = tf.distribute.Server(c, job_name="ps", task_index=0, protocol="grpc+tictac")
os.environ["TICTAC_AUTH_TOKEN"] = sys.argv[2]
wk = tf.distribute.Server(c, job_name="worker", task_index=0, protocol="grpc+tictac")
g = tf.Graph()
with g.as_default():
    with tf.device("/job:ps/task:0"):
        v = tf.Variable(tf.ones([4]))
    with tf.device("/job:worker/task:0"):
        y = v * 2.0
    with tf.compat.v1.Session(wk.target) as s:
        s.run(v.initializer)
        t = time.time()
        try:
            print("RESULT", s.run(y).tolist(), flush=True)
        except Exception as e:
            print("ERROR", type(e).__name__, round(time.time() - t, 2), str(e)[:2000], flush=True)
os._exit(0)
