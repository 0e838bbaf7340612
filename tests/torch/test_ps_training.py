"""Tests for tictac.torch.ps (parameter-server training with no model changes) and
python -m tictac.torch.train.

Every multi-process test runs ranks as spawned processes on loopback joined by a file://
rendezvous (ps.launch_local), 1 thread each, well under a minute. The gloo variants always run;
the tictac-backend variants are skipped, with the reason, when tictac.torch does not import
(its compiled backend is not built).
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(1)

import tictac.torch as _tt  # noqa: E402  (imports without the compiled backend too)
from tictac.torch import ps  # noqa: E402

TICTAC_ERROR = None if _tt.available() else f"the tictac extension is not built: {_tt._C_ERROR}"

needs_tictac = pytest.mark.skipif(TICTAC_ERROR is not None, reason=f"tictac backend unavailable: {TICTAC_ERROR}")

SEED = 0
STEPS = 5
BATCH = 4


# --------------------------------------------------------------------------------- models/data

class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(4 * 6 * 6, 5)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1))


def cnn():
    return SmallCNN().double()


def cnn_data(w, it):
    g = torch.Generator().manual_seed(10_000 + 100 * w + it)
    return torch.randn(BATCH, 3, 8, 8, generator=g, dtype=torch.float64), torch.randint(0, 5, (BATCH,), generator=g)


def mlp():
    return nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 12), nn.Tanh(), nn.Linear(12, 3)).double()


def mlp_data(w, it):
    g = torch.Generator().manual_seed(20_000 + 100 * w + it)
    return torch.randn(BATCH, 6, generator=g, dtype=torch.float64), torch.randint(0, 3, (BATCH,), generator=g)


class Block(nn.Module):
    """A non-leaf module with a parameter of its own, and a child."""

    def __init__(self, d):
        super().__init__()
        self.lin = nn.Linear(d, d)
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, d))

    def forward(self, x):
        return torch.tanh(self.lin(x)) * self.scale


class Tied(nn.Module):
    """Shared parameter (embedding tied to the output layer), a parameter on a non-leaf module,
    a shared module called twice, and a parent that uses a child's weight directly."""

    def __init__(self, vocab=11, d=6):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.block = Block(d)
        self.extra = nn.Linear(d, d)
        self.out = nn.Linear(d, vocab, bias=True)
        self.out.weight = self.emb.weight           # tied
        self.bias2 = nn.Parameter(torch.zeros(d))

    def forward(self, idx):
        h = self.emb(idx).mean(1)
        h = self.block(h)
        h = self.block(h)                               # the same module twice
        h = h + F.linear(h, self.extra.weight) + self.bias2   # extra's weight used by the parent
        return self.out(h)


def tied():
    return Tied().double()


def tied_data(w, it):
    g = torch.Generator().manual_seed(30_000 + 100 * w + it)
    return torch.randint(0, 11, (BATCH, 5), generator=g), torch.randint(0, 11, (BATCH,), generator=g)


def reference(model_fn, data_fn, cfg, workers=2):
    """Single-process training on the concatenated batch."""
    torch.manual_seed(cfg.seed)
    m = model_fn()
    if cfg.optimizer == "sgd":
        opt = torch.optim.SGD(m.parameters(), lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    else:
        opt = torch.optim.Adam(m.parameters(), lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, weight_decay=cfg.weight_decay)
    for it in range(cfg.iters):
        xs, ys = zip(*[data_fn(w, it) for w in range(workers)])
        opt.zero_grad()
        F.cross_entropy(m(torch.cat(xs)), torch.cat(ys)).backward()
        opt.step()
    return {n: p.detach() for n, p in m.named_parameters()}


def initial(model_fn, seed=SEED):
    torch.manual_seed(seed)
    return {n: p.detach().clone() for n, p in model_fn().named_parameters()}


# ------------------------------------------------------------------------------- rank entries
# (module level so that spawned processes can import them)

def entry_runs(rank, model_fn, data_fn, cfgs):
    """Runs each config in turn on one process group; returns rank 0's results."""
    out = []
    for cfg in cfgs:
        r = ps.run(model_fn, data_fn, cfg)
        out.append({"params": r.params, "owners": r.owners, "plan": r.plan, "stats": r.stats,
                    "summary": r.summary, "prio": (r.priorities_active, r.priorities_reason)} if rank == 0 else None)
    return out


class Killer:
    """Forward hook: os._exit on one rank in one iteration (a worker dying mid-iteration)."""

    def __init__(self, rank, at_call):
        self.rank, self.at_call, self.calls = rank, at_call, 0

    def __call__(self, mod, args, out):
        import torch.distributed as dist
        if dist.get_rank() == self.rank:
            self.calls += 1
            if self.calls == self.at_call:
                os._exit(3)


def mlp_killed_rank2():
    m = mlp()
    m[2].register_forward_hook(Killer(rank=2, at_call=3))
    return m


def entry_killed(rank, cfg):
    t = time.monotonic()
    try:
        ps.run(mlp_killed_rank2, mlp_data, cfg)
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}", "type": type(e).__name__, "elapsed": time.monotonic() - t}
    return {"error": None, "elapsed": time.monotonic() - t}


def launch(entry, world, *args, backend="gloo", env=None, deadline=90):
    res = ps.launch_local(entry, world, args, backend=backend, timeout=30, deadline=deadline, env=env)
    for r in res:
        if isinstance(r, ps.RankFailure):
            raise AssertionError(f"a rank failed: {r}")
    return res


def assert_close(got, want, tol=1e-5):
    assert set(got) == set(want), (sorted(got), sorted(want))
    for n in want:
        err = (got[n] - want[n]).abs().max().item()
        assert err <= tol, f"{n}: max abs difference {err:g} > {tol:g}"


def sgd_cfg(**kw):
    base = dict(num_ps=1, iters=STEPS, optimizer="sgd", lr=0.1, momentum=0.9, weight_decay=0.01, timeout=30,
                seed=SEED)
    base.update(kw)
    return ps.PSConfig(**base)


# ------------------------------------------------------------------------------------- unit


def test_shard_by_bytes_greedy_largest_first():
    sizes = [10, 40, 40, 5, 30, 1]
    owners = ps.shard_by_bytes(sizes, 2)
    assert owners == ps.shard_by_bytes(sizes, 2)                   # deterministic
    load = [sum(s for s, o in zip(sizes, owners) if o == k) for k in range(2)]
    assert load == [70, 56]                                         # 40,30 | 40,10,5,1
    assert owners[1] == 0 and owners[2] == 1                        # equal sizes: by index
    assert ps.shard_by_bytes(sizes, 1) == [0] * 6
    with pytest.raises(ValueError):
        ps.shard_by_bytes(sizes, 0)


def test_unique_parameters_and_recorded_order():
    m = tied()
    names = [n for n, _ in ps.unique_parameters(m)]
    assert names == [n for n, _ in m.named_parameters()]
    assert "out.weight" not in names and "emb.weight" in names      # shared once
    by_id = {id(p): n for n, p in ps.unique_parameters(m)}
    order = ps.record_order(m, (tied_data(0, 0)[0],), by_id)
    assert sorted(order) == sorted(names)
    # emb first; block's own scale with its child; extra.weight when the parent uses it, before
    # bias2 and out.bias
    assert order[:4] == ["emb.weight", "block.lin.weight", "block.lin.bias", "block.scale"]
    assert order.index("extra.weight") < order.index("bias2") < order.index("out.bias")
    assert order[-1] == "extra.bias"                                  # never used: last


def test_iteration_metrics_and_trace(tmp_path):
    st = ps.IterationStats(rank=1, worker=0, iter=0, warmup=False, mode="training", policy="fifo", t0_unix=100.0,
                           iter_ms=10.0, forward=[2.0, 6.0], compute=[["a", 2.0, 4.0], ["b", 4.0, 6.0]],
                           pulls=[["w1", 0.0, 2.0, 8, 0], ["w2", 0.0, 4.0, 8, 0]],
                           pushes=[["w2", 7.0, 8.0, 8, 0]])
    assert st.comm_intervals() == [("w1", 0.0, 2.0), ("w2", 2.0, 4.0)]
    m = st.compute_metrics()
    assert m["comm_ms"] == 5.0 and m["compute_ms"] == 4.0 and m["makespan_ms"] == 8.0
    assert m["E"] == pytest.approx((9 - 8) / (9 - 5))
    path = tmp_path / "t.json"
    ps.write_chrome_trace(str(path), [st], [], num_ps=1)
    ev = json.loads(path.read_text())["traceEvents"]
    assert {e["name"] for e in ev if e["ph"] == "X"} >= {"a", "b", "w1", "w2", "forward", "iter 0"}
    jl = tmp_path / "s.jsonl"
    ps.write_json_lines(str(jl), [st])
    assert json.loads(jl.read_text().splitlines()[0])["arrival_order"] == []


def test_config_validation():
    with pytest.raises(ValueError, match="policy"):
        ps.PSConfig(policy="nope").validate(3)
    with pytest.raises(ValueError, match="num_ps"):
        ps.PSConfig(num_ps=3).validate(3)


# ------------------------------------------------------------------------------ multi-process


def test_sgd_two_workers_one_server_matches_single_process():
    cfg = sgd_cfg(policy="fifo")
    (r0,), _, _ = launch(entry_runs, 3, cnn, cnn_data, [cfg])
    assert_close(r0["params"], reference(cnn, cnn_data, cfg))
    init = initial(cnn)
    assert any((r0["params"][n] - init[n]).abs().max() > 1e-3 for n in init)     # it trained
    stats = r0["stats"]
    assert len(stats) == 2 * STEPS and {s.rank for s in stats} == {1, 2}
    s = stats[-1]
    assert sorted(s.arrival_order) == sorted(init) and len(s.pushes) == len(init)
    assert s.iter_ms > 0 and s.compute and s.backward
    assert r0["prio"][0] is False and "tictac" in r0["prio"][1]             # gloo: skipped, says why


def test_adam_and_two_servers_sharding():
    cfg_adam = sgd_cfg(optimizer="adam", lr=0.01, weight_decay=0.001, policy="layer")
    cfg_2ps = sgd_cfg(num_ps=2, policy="fifo")
    (r0,), _, _ = launch(entry_runs, 3, mlp, mlp_data, [cfg_adam])
    assert_close(r0["params"], reference(mlp, mlp_data, cfg_adam))
    (r0,), _, _, _ = launch(entry_runs, 4, mlp, mlp_data, [cfg_2ps])
    assert_close(r0["params"], reference(mlp, mlp_data, cfg_2ps))
    assert set(r0["owners"].values()) == {0, 1}
    assert {s.rank for s in r0["stats"]} == {2, 3}


def test_all_policies_give_identical_parameters():
    cfgs = [sgd_cfg(policy=p, iters=3) for p in ("fifo", "random", "layer", "tic", "tac")]
    cfgs[-1].bandwidth_bytes_s = 1e9
    results, _, _ = launch(entry_runs, 3, cnn, cnn_data, cfgs)
    want = reference(cnn, cnn_data, cfgs[0])
    for cfg, r in zip(cfgs, results):
        assert r["plan"].requested == cfg.policy
        assert_close(r["params"], want)
    rnd = results[1]["stats"]
    assert len({tuple(s.expected_order) for s in rnd}) > 1           # fresh order per worker per iteration
    assert all(r["plan"].policy == r["plan"].requested for r in results[:3])


def test_shared_parameter_trains_correctly():
    cfg = sgd_cfg(policy="layer")
    (r0,), _, _ = launch(entry_runs, 3, tied, tied_data, [cfg])
    want = reference(tied, tied_data, cfg)
    assert "out.weight" not in r0["params"]
    assert_close(r0["params"], want)


def test_inference_mode_pulls_every_iteration():
    cfg = ps.PSConfig(num_ps=1, mode="inference", iters=3, policy="random", timeout=30)
    (r0,), _, _ = launch(entry_runs, 3, cnn, cnn_data, [cfg])
    assert_close(r0["params"], initial(cnn), tol=0)               # nothing trained
    assert len(r0["stats"]) == 6 and all(not s.pushes and s.backward is None for s in r0["stats"])
    assert all(sorted(s.arrival_order) == sorted(initial(cnn)) for s in r0["stats"])


def test_dead_worker_gives_a_clear_error_not_a_hang():
    cfg = sgd_cfg(iters=10, timeout=15)
    t = time.monotonic()
    res = ps.launch_local(entry_killed, 3, (cfg,), timeout=15, deadline=60)
    elapsed = time.monotonic() - t
    assert isinstance(res[2], ps.RankFailure) and res[2].exitcode == 3
    server, other = res[0], res[1]
    assert server["error"] and other["error"], res
    assert "rank 2 (worker 1)" in server["error"], server["error"]
    assert server["type"] == "PeerError" and other["type"] == "PeerError"
    assert "rank 0 (server 0)" in other["error"] or "rank 2" in other["error"], other["error"]
    assert server["elapsed"] < cfg.timeout + 5 and other["elapsed"] < cfg.timeout + 5
    assert elapsed < 50


# ------------------------------------------------------------------------------ tictac backend


@needs_tictac
def test_tictac_sgd_matches_single_process():
    cfg = sgd_cfg(policy="random")
    (r0,), _, _ = launch(entry_runs, 3, cnn, cnn_data, [cfg], backend="tictac")
    assert r0["prio"][0] is True, r0["prio"]
    assert_close(r0["params"], reference(cnn, cnn_data, cfg))


def big():
    # 4 x 1 MiB float32 weights, no biases, so each transfer is a whole chunk or more
    return nn.Sequential(*[nn.Linear(512, 512, bias=False) for _ in range(4)])


def big_data(w, it):
    g = torch.Generator().manual_seed(w * 100 + it)
    return torch.randn(2, 512, generator=g), torch.randint(0, 512, (2,), generator=g)


@needs_tictac
def test_tictac_transfer_order_matches_policy():
    cfgs = [ps.PSConfig(num_ps=1, mode="inference", iters=4, policy="random", timeout=30, auto_order=False),
            ps.PSConfig(num_ps=1, mode="training", iters=3, policy="random", timeout=30, lr=1e-3,
                        pipeline=False, auto_order=False)]     # pipelined, availability sets the order (test_ps_pipeline.py)
    results, _, _ = launch(entry_runs, 3, big, big_data, cfgs, backend="tictac", env={"TICTAC_WINDOW": "1"})
    for r in results:
        for s in r["stats"]:
            assert s.arrival_source == "future", "the tictac Work has no future: arrival order not observable"
            assert s.arrival_order == s.expected_order, (s.rank, s.iter, s.arrival_order, s.expected_order)


# ------------------------------------------------------------------------------------- CLI


@pytest.mark.skipif(TICTAC_ERROR is not None, reason=f"python -m tictac.torch.train imports tictac.torch: {TICTAC_ERROR}")
def test_cli_local_run(tmp_path):
    pytest.importorskip("torchvision")
    log, trace = tmp_path / "it.jsonl", tmp_path / "trace.json"
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    cmd = [sys.executable, "-m", "tictac.torch.train", "--model", "torchvision:squeezenet1_1", "--policy", "layer",
           "--iters", "3", "--warmup", "1", "--num-ps", "1", "--batch", "2", "--image-size", "64", "--num-classes", "10",
           "--backend", "gloo", "--local", "3", "--log-json", str(log), "--trace", str(trace), "--timeout", "30",
           "--threads", "1"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "median iter" in p.stdout and "samples/s" in p.stdout
    lines = [json.loads(l) for l in log.read_text().splitlines()]
    assert len(lines) == 6 and {l["rank"] for l in lines} == {1, 2}
    assert {"iter_ms", "compute", "pulls", "pushes", "arrival_order"} <= set(lines[0])
    assert json.loads(trace.read_text())["traceEvents"]
