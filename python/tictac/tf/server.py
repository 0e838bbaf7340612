"""A tictac.tf parameter server: ``python -m tictac.tf.server [--policy tic] [--lr 0.1]``.

Holds its shard of the model's variables (their shapes, dtypes and initial values come from
the first worker), and each step: waits for every worker's request, sends every worker all of
its parameters at once with the policy's priorities (smaller = sent first; the transport's
per-priority queues put them on the wire in that order), receives every worker's gradients,
averages them and applies plain SGD (``v -= lr * mean(grads)``). Stops when every worker says
it is done; a dead or silent worker fails the step with an error naming its rank within the
timeout, and the server exits 1.

Policies: ``fifo`` (declaration order), ``random`` (a fresh order per worker and step, seeded),
``tic`` (the TIC order of the graph the first worker exported, from ``tictac order``; or
``--order O.json`` written by ``tictac order --out``), ``tac`` (the same with ``tictac order
--policy tac --bandwidth B``; B in bits/s, default 8 x TICTAC_RATE_LIMIT when that is set, else
10e9). The exported graph's op times are placeholders (10 us per op, not a TF profile), so
TAC sees op counts, not measured times.

Rank, world size and store default to TICTAC_RANK / TICTAC_WORLD_SIZE / TICTAC_STORE, like
tictac.tf.init.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np


def parse(argv=None):
    p = argparse.ArgumentParser(prog="python -m tictac.tf.server", description=__doc__.splitlines()[0])
    p.add_argument("--rank", type=int)
    p.add_argument("--world-size", type=int)
    p.add_argument("--store", help="file:DIR or tcp:HOST:PORT")
    p.add_argument("--num-servers", type=int, default=None)
    p.add_argument("--timeout", type=float, default=None, help="seconds per transfer batch (TICTAC_TF_TIMEOUT, 60)")
    p.add_argument("--policy", choices=["fifo", "random", "tic", "tac"], default="tic")
    p.add_argument("--bandwidth", type=float, default=None,
                   help="bits/s for --policy tac (default 8 x TICTAC_RATE_LIMIT if set, else 10e9)")
    p.add_argument("--order", help="tictac order --out JSON to use instead of computing TIC")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stats", help="append one JSON line per step (orders, times) to this file")
    p.add_argument("--save", help="write the final parameters to this .npz file")
    return p.parse_args(argv)


def default_bandwidth() -> float:
    """Bits/s for TAC: 8 x TICTAC_RATE_LIMIT (bytes/s) when set and positive, else 10e9."""
    text = (os.environ.get("TICTAC_RATE_LIMIT") or "").strip()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1) if text else 1
    try:
        rate = float(text[:-1] if mult > 1 else text) * mult if text else 0.0
    except ValueError:
        raise ValueError(f"TICTAC_RATE_LIMIT={text!r} is not a byte rate (such as 100000000 or 100M); "
                         "pass --bandwidth") from None
    return 8 * rate if rate > 0 else 10e9


def plan_priorities(policy, names, spec, order_file, bandwidth=None):
    """Static priorities per local parameter name (fifo, tic, tac); None for random."""
    from tictac.tf.export_graph import order_priorities
    if policy == "fifo":
        return {n: i for i, n in enumerate(names)}
    if policy == "random":
        return None
    if order_file:
        with open(order_file) as f:
            prio = {str(k): int(v) for k, v in json.load(f)["priorities"].items()}
    else:
        if "graph" not in spec:
            raise RuntimeError(f"--policy {policy} needs a graph: give the first worker's ParameterClient "
                               "graph_fn=/graph_args= (or pulled(..., graph_fn=...), or overlapped(...)), "
                               "or pass --order")
        extra = ["--bandwidth", repr(bandwidth or default_bandwidth())] if policy == "tac" else []
        prio = order_priorities(spec["graph"], policy, extra_args=extra)
    missing = [n for n in names if n not in prio]
    if missing:
        raise RuntimeError(f"the {policy.upper()} order has no priority for: {', '.join(missing)}")
    # TIC/TAC ties (e.g. the first two layers' parameters) are broken by the recv's position in
    # the exported graph (its topological, i.e. forward, order), else by declaration order.
    pos = {}
    for op in spec.get("graph", {}).get("ops", []):
        if op.get("kind") == "recv":
            pos.setdefault(op["name"], len(pos))
    ranked = sorted(names, key=lambda n: (prio[n], pos.get(n, len(pos)), names.index(n)))
    return {n: k for k, n in enumerate(ranked)}


def linger(tt, protocol, tf, workers) -> None:
    """Waits until every worker has closed its connection (it does so after receiving BYE), so
    that closing ours cannot drop BYE on its way: a receive nobody answers, ended by the EOF."""
    try:
        tt.pull_all([(protocol.LINGER, [], tf.int64, w) for w in workers])
    except Exception:
        pass  # the expected ending: the workers are gone (or the timeout passed)


def main(argv=None) -> int:
    args = parse(argv)
    import tensorflow as tf
    import tictac.tf as tt
    from tictac.tf import protocol

    rank, size = tt.init(args.rank, args.world_size, args.store, args.timeout,
                         num_servers=args.num_servers)
    S = tt.session()["num_servers"]
    workers = list(range(S, size))
    first = workers[0]
    who = f"tictac.tf.server (rank {rank})"
    try:
        (n,), _ = tt.pull_all([(protocol.SPEC_LEN, [], tf.int64, first)])
        (raw,), _ = tt.pull_all([(protocol.SPEC, [int(n.numpy())], tf.uint8, first)])
        spec = protocol.decode_spec(raw)
        local = [i for i, o in enumerate(spec["owners"]) if o == rank]
        names = [spec["names"][i] for i in local]
        init, _ = tt.pull_all([(protocol.param_tag(i), spec["shapes"][i], spec["dtypes"][i], first)
                               for i in local])
        params = [tf.Variable(v) for v in init]
        static = plan_priorities(args.policy, spec["names"], spec, args.order, args.bandwidth)
        rng = np.random.default_rng(args.seed)
        stats = open(args.stats, "a") if args.stats else None
        print(f"{who}: {len(local)} parameters ({sum(int(np.prod(spec['shapes'][i])) for i in local)} elements), "
              f"{len(workers)} workers, policy {args.policy}", file=sys.stderr, flush=True)
        step = 0
        while True:
            ctrl, _ = tt.pull_all([(protocol.CTRL, [], tf.int64, w) for w in workers])
            flags = [int(c.numpy()) for c in ctrl]
            if all(f == 0 for f in flags):
                tt.push_all([tf.constant(0, tf.int64)] * len(workers), [protocol.BYE] * len(workers),
                            workers, [0] * len(workers))
                linger(tt, protocol, tf, workers)
                break
            if any(f == 0 for f in flags):
                done = [w for w, f in zip(workers, flags) if f == 0]
                raise RuntimeError(f"step {step}: worker rank(s) {done} stopped while others continue")
            t0 = time.perf_counter()
            values, tags, dsts, prios, orders, plan = [], [], [], [], {}, {}
            for w in workers:
                if static is None:
                    perm = rng.permutation(len(local))
                    prio = {names[j]: int(k) for k, j in enumerate(perm)}
                else:
                    prio = {n: static[n] for n in names}
                plan[w] = (prio, sorted(range(len(local)), key=lambda j: (prio[names[j]], j)))
                orders[w] = [names[j] for j in plan[w][1]]
            # Posted in each worker's order, interleaved by position across workers (as the
            # torch PS does), each with its priority: on a fast link the receiver's READY for a
            # rendezvous-sized message arrives before later sends are posted, so the post order
            # decides there; the priorities arbitrate among chunks queued together (the window
            # shared by all workers, preemption at TICTAC_CHUNK_BYTES boundaries).
            for pos in range(len(local)):
                for w in workers:
                    prio, order = plan[w]
                    j = order[pos]
                    values.append(params[j])
                    tags.append(protocol.param_tag(local[j]))
                    dsts.append(w)
                    prios.append(prio[names[j]])
            tt.push_all([v.read_value() for v in values], tags, dsts, prios)
            t_sent = time.perf_counter()
            grads, _ = tt.pull_all([(protocol.grad_tag(i), spec["shapes"][i], spec["dtypes"][i], w)
                                    for w in workers for i in local])
            k = len(local)
            for j, p in enumerate(params):
                mean = tf.add_n([grads[wi * k + j] for wi in range(len(workers))]) / len(workers)
                p.assign_sub(tf.cast(args.lr, p.dtype) * mean)
            t_end = time.perf_counter()
            if stats:
                stats.write(json.dumps({"step": step, "rank": rank, "policy": args.policy,
                                        "send_ms": 1e3 * (t_sent - t0), "step_ms": 1e3 * (t_end - t0),
                                        "expected_order": {str(w): o for w, o in orders.items()}}) + "\n")
                stats.flush()
            step += 1
        if args.save:
            np.savez(args.save, **{n: p.numpy() for n, p in zip(names, params)})
        print(f"{who}: done after {step} steps", file=sys.stderr, flush=True)
        return 0
    except Exception as e:
        msg = getattr(e, "message", None) or str(e)
        print(f"{who}: FAILED: {type(e).__name__}: {msg}", file=sys.stderr, flush=True)
        return 1
    finally:
        tt.shutdown()


if __name__ == "__main__":
    sys.exit(main())
