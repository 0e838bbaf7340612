"""TF parameter-server inference with N workers: stock ``grpc`` (TF's natural, random transfer
order) against ``grpc+tictac`` without priorities (fifo), with TIC and with TAC. Run by
``bench/e2e/e2e --framework tf`` (bench/e2e/tf_bench.py), which shapes the link; usable alone.

  --mode calibrate --op-times F   the N workers' forward passes with the variables local, run
                                  concurrently: prints JSON {"compute_s" (median iteration),
                                  "compute_one_s" (one worker alone), "param_bytes"} and writes F,
                                  the per-node times TAC reads (tictac.tf.op_times).
  --mode run --op-times F         every arm's servers (1 PS + N workers each) in this process; the
                                  steps are interleaved (one step of each arm in turn, the order
                                  rotating), the N workers of an arm run their step at once (one
                                  thread each). Then --traced steps per arm with FULL_TRACE: E per
                                  worker and the order in which the parameters arrived. Prints one
                                  JSON object (see the end of main()).

Comm intervals for E: gRPC's RecvTensor entries in TF's step stats (grpc), the drop-in's transfer
log (tictac arms: the same span, request issued to tensor arrived, same clock). Each transfer
counts from max(issued, previous arrival) to its arrival, in arrival order, as bench/e2e does for
the torch PS (bench/e2e/analyse.py); compute intervals are the worker's compute nodes.
"""
import argparse
import concurrent.futures
import json
import os
import re
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.compat.v1.disable_eager_execution()
import tictac.tf as tictac_tf  # noqa: E402
from tictac.intervals import union_length  # noqa: E402
from tictac.tf import op_times  # noqa: E402
from tf_inference import CONV, environment, forward, free_port, variables  # noqa: E402

N_CONV = sum(1 for c in CONV if c != "pool")
NOT_COMPUTE = {"_Recv", "_Send", "_HostRecv", "_HostSend", "_Retval", "_Arg", "Const", "NoOp",
               "Identity", "RecvTensor", ""}
ARMS = {  # name: (protocol, environment while its servers are created)
    "grpc": ("grpc", {}),
    "fifo": ("grpc+tictac", {"TICTAC_PRIORITY": "0"}),
    "tic": ("grpc+tictac", {"TICTAC_TF_POLICY": "tic"}),
    "tac": ("grpc+tictac", {"TICTAC_TF_POLICY": "tac"}),
}


def build(workers, batch, var_device, worker_device):
    """One graph: the parameters on var_device, worker i's forward under name scope w<i> on
    worker_device(i). Returns (graph, [output per worker], init, param bytes)."""
    g = tf.Graph()
    with g.as_default():
        params, nbytes = variables(var_device)
        outs = []
        for i in range(workers):
            with tf.name_scope(f"w{i}"):
                with tf.device(worker_device(i)):
                    x = tf.constant(np.random.default_rng(2 + i).standard_normal((batch, 32, 32, 3))
                                    .astype(np.float32))
                outs.append(forward(x, params, worker_device(i)))
        init = tf.compat.v1.global_variables_initializer()
    return g, outs, init, nbytes


def concurrent_step(pool, runs):
    """Runs every callable at once; returns [(start, end)] per callable (perf_counter seconds)."""
    def timed(fn):
        t = time.perf_counter()
        fn()
        return t, time.perf_counter()
    return list(pool.map(timed, runs))


def calibrate(args):
    g, outs, init, nbytes = build(args.workers, args.batch, "/cpu:0", lambda i: "/cpu:0")
    pool = concurrent.futures.ThreadPoolExecutor(args.workers)
    with tf.compat.v1.Session(graph=g) as sess:
        sess.run(init)
        runs = [lambda o=o: sess.run(o) for o in outs]
        for _ in range(args.warmup):
            concurrent_step(pool, runs)
        iters, ones = [], []
        for _ in range(args.steps):
            se = concurrent_step(pool, runs)
            iters.append(max(e for _, e in se) - min(s for s, _ in se))
            t = time.perf_counter()
            sess.run(outs[0])
            ones.append(time.perf_counter() - t)
        times = op_times.merge(*[op_times.profile(sess, o, steps=3, warmup=0) for o in outs])
    op_times.write(args.op_times, times)
    print(json.dumps({"compute_s": statistics.median(iters), "compute_one_s": statistics.median(ones),
                      "param_bytes": nbytes, "op_times_nodes": len(times)}))


def make_arm(name, args):
    protocol, env = ARMS[name]
    env = dict(env)
    if name == "tac":
        env["TICTAC_TF_OP_TIMES"] = args.op_times
    with environment(env):
        spec = tf.train.ClusterSpec({"ps": [f"localhost:{free_port()}"],
                                     "worker": [f"localhost:{free_port()}" for _ in range(args.workers)]})
        servers = [tf.distribute.Server(spec, job_name="ps", task_index=0, protocol=protocol, start=True)]
        servers += [tf.distribute.Server(spec, job_name="worker", task_index=i, protocol=protocol, start=True)
                    for i in range(args.workers)]
    g, outs, init, nbytes = build(args.workers, args.batch, "/job:ps/task:0",
                                  lambda i: f"/job:worker/task:{i}")
    sessions = [tf.compat.v1.Session(servers[1 + i].target, graph=g) for i in range(args.workers)]
    sessions[0].run(init)
    return {"name": name, "servers": servers, "sessions": sessions, "outs": outs, "bytes": nbytes,
            "tictac": protocol != "grpc"}


def layer_of(edge):
    """Forward position (layer index) of the parameter an edge carries, from the consumer's name
    (w<i>/Conv2D_<k>, w<i>/add_<k>: layer k; w<i>/MatMul_<j>: layer N_CONV + j); None if unknown."""
    m = re.search(r"w\d+/(Conv2D|add|MatMul)(?:_(\d+))?/ReadVariableOp", edge)
    if not m:
        return None
    k = int(m.group(2) or 0)
    return N_CONV + k if m.group(1) == "MatMul" else k


def worker_of(edge):
    m = re.search(r"(?:^|_)w(\d+)/", edge)
    return int(m.group(1)) if m else None


def inversions(layers):
    """Fraction of pairs (of different layers) that arrived against the forward order."""
    bad = total = 0
    for i in range(len(layers)):
        for j in range(i + 1, len(layers)):
            if layers[i] != layers[j]:
                total += 1
                bad += layers[i] > layers[j]
    return bad / total if total else None


def union(intervals):
    return union_length(intervals)


def traced_step(arm, pool):
    """One FULL_TRACE step of every worker at once: per worker E, N, C, m (ms), the order of arrival
    (short names) and its inversions."""
    metas = [tf.compat.v1.RunMetadata() for _ in arm["sessions"]]
    opts = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    if arm["tictac"]:
        tictac_tf.take_transfers()
        tictac_tf.transfer_log(True)
    concurrent_step(pool, [lambda s=s, o=o, m=m: s.run(o, options=opts, run_metadata=m)
                           for s, o, m in zip(arm["sessions"], arm["outs"], metas)])
    logged = []
    if arm["tictac"]:
        tictac_tf.transfer_log(False)
        logged = tictac_tf.take_transfers()
    out = []
    for w, meta in enumerate(metas):
        comm, comp = [], []
        for dev in meta.step_stats.dev_stats:
            if f"/task:{w}/" not in dev.device or "/job:worker/" not in dev.device:
                continue
            for ns in dev.node_stats:
                start = ns.all_start_micros
                end = start + max(ns.all_end_rel_micros, ns.op_end_rel_micros)
                if ns.node_name == "RecvTensor":
                    edge = ns.timeline_label.split("] ")[-1].split(" from ")[0]
                    comm.append((edge, start, end))
                elif op_times._op_type(ns.timeline_label) not in NOT_COMPUTE and not ns.node_name.startswith("_"):
                    comp.append((start, end))
        comm += [(r["edge"], r["start_us"], r["end_us"]) for r in logged if worker_of(r["edge"]) == w]
        comm.sort(key=lambda c: c[2])
        serial, prev = [], None
        for _, s, e in comm:
            s = s if prev is None else max(s, prev)
            serial.append((s, e))
            prev = e
        n, c = union(serial) / 1e3, union(comp) / 1e3
        pts = serial + comp
        m = (max(e for _, e in pts) - min(s for s, _ in pts)) / 1e3 if pts else 0.0
        u, lo = n + c, max(n, c)
        layers = [layer_of(edge) for edge, _, _ in comm]
        out.append({"E": (u - m) / (u - lo) if u - lo > 1e-9 and comm else None, "N_ms": n, "C_ms": c, "m_ms": m,
                    "transfers": len(comm),
                    "order": [re.sub(r"^.*w\d+/", "", e).replace("/ReadVariableOp", "") for e, _, _ in comm],
                    "inversions": inversions([x for x in layers if x is not None])})
    return out


def run(args):
    arms = [make_arm(n, args) for n in args.arms.split(",")]
    pool = concurrent.futures.ThreadPoolExecutor(args.workers)
    values = {}
    for a in arms:
        for _ in range(args.warmup):
            values[a["name"]] = [a["sessions"][i].run(o) for i, o in enumerate(a["outs"])]
    ref = values[arms[0]["name"]]
    for name, v in values.items():  # same model, same weights: the same outputs on every arm
        for x, r in zip(v, ref):
            assert abs(x - r) <= 1e-3 * max(1.0, abs(r)), (name, x, r)
    res = {a["name"]: {"iter_s": [], "spread_s": [], "max_over_mean": [], "step": []} for a in arms}
    for i in range(args.steps):
        k = i % len(arms)
        for a in arms[k:] + arms[:k]:
            se = concurrent_step(pool, [lambda s=s, o=o: s.run(o) for s, o in zip(a["sessions"], a["outs"])])
            tw = [e - s for s, e in se]
            r = res[a["name"]]
            r["iter_s"].append(max(e for _, e in se) - min(s for s, _ in se))
            r["spread_s"].append(max(tw) - min(tw))
            r["max_over_mean"].append(max(tw) / statistics.fmean(tw))
            r["step"].append(i)
    for i in range(args.traced):
        k = i % len(arms)
        for a in arms[k:] + arms[:k]:
            res[a["name"]].setdefault("traced", []).extend(traced_step(a, pool))
    result = {"workers": args.workers, "batch": args.batch, "param_bytes": arms[0]["bytes"], "steps": args.steps,
              "stats": tictac_tf.rendezvous_stats(), "arms": res}
    print(json.dumps(result))
    sys.stdout.flush()
    os._exit(0)  # servers in this process do not shut down cleanly in TF1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["calibrate", "run"], required=True)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--traced", type=int, default=3, help="FULL_TRACE steps per arm (E, order)")
    ap.add_argument("--arms", default="grpc,fifo,tic,tac")
    ap.add_argument("--op-times", required=True, help="TAC's op-times file (written by calibrate)")
    args = ap.parse_args()
    for a in args.arms.split(","):
        if a not in ARMS:
            ap.error(f"--arms: unknown arm {a!r} (known: {', '.join(ARMS)})")
    calibrate(args) if args.mode == "calibrate" else run(args)


if __name__ == "__main__":
    main()
