"""The parameter server's send order comes from the transport's priorities (issue 13, point 4).

The server posts an iteration's sends as ONE transport batch (torch coalescing, which the tictac
backend implements with transport batches) in DECLARATION order, each at its position in the
worker's policy order; the worker posts its receives in declaration order too, then tells the
server it is ready. So nothing but the send priorities can produce the policy's order. Each test
runs twice at the default TICTAC_* settings (every TICTAC_* tunable removed from the ranks'
environment): with priorities the order the worker sees its parameters complete in must equal
the policy's order; with TICTAC_PRIORITY=0 (FIFO send queue) it must differ. The models have
biases (small eager messages next to rendezvous-sized weights) and policies whose order differs
from declaration order (random with a fixed seed; TIC on a model whose forward runs its layers
in reverse declaration order). Training runs without the pipeline (PSConfig.pipeline=False):
with it, each value leaves when its update is done, so availability, not only the policy, sets
the order (test_ps_pipeline.py covers that mode). auto_order is off: these tiny models may
measure a speedup bound below min_overlap, and then the server would rightly stop ordering
(test_ps_auto_order.py covers that).

Skipped, with the reason, when the tictac extension is not built.
"""

import os
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

import tictac.torch as _tt  # noqa: E402
from tictac.torch import ps  # noqa: E402

pytestmark = pytest.mark.skipif(not _tt.available(), reason=f"tictac backend unavailable: {_tt._C_ERROR}")

KEEP = {"TICTAC_BUILD_DIR"}


@pytest.fixture
def default_env(monkeypatch):
    """Every TICTAC_* tunable removed: the ranks run at the documented defaults."""
    for k in list(os.environ):
        if k.startswith("TICTAC_") and k not in KEEP:
            monkeypatch.delenv(k)


# ------------------------------------------------------------------------------------ models

def biased():
    # weights of 1 MiB and 512 KiB (above the default 256 KiB eager pool: rendezvous) next to
    # biases of 1-2 KiB (eager)
    return nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 512))


def biased_data(w, it):
    g = torch.Generator().manual_seed(40_000 + 100 * w + it)
    return torch.randn(2, 512, generator=g), torch.randint(0, 512, (2,), generator=g)


class Reversed(nn.Module):
    """Four Linear layers with biases, used in reverse declaration order."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c, self.d = (nn.Linear(512, 512) for _ in range(4))

    def forward(self, x):
        return self.a(torch.relu(self.b(torch.relu(self.c(torch.relu(self.d(x)))))))


def reversed_model():
    return Reversed()


def declared(model_fn):
    return [n for n, _ in ps.unique_parameters(model_fn())]


# ----------------------------------------------------------------------------- rank entries

def entry_jobs(rank, jobs):
    """jobs: [(model_fn, data_fn, cfg)] run in turn on one process group; rank 0 returns them."""
    out = []
    for model_fn, data_fn, cfg in jobs:
        r = ps.run(model_fn, data_fn, cfg)
        out.append({"params": r.params, "stats": r.stats, "plan": r.plan,
                    "prio": (r.priorities_active, r.priorities_reason)} if rank == 0 else None)
    return out


def launch(entry, world, *args, env=None):
    res = ps.launch_local(entry, world, args, backend="tictac", timeout=60, deadline=240, env=env)
    for r in res:
        if isinstance(r, ps.RankFailure):
            raise AssertionError(f"a rank failed: {r}")
    return res


def jobs():
    common = dict(num_ps=1, timeout=60, auto_order=False)
    return [
        (biased, biased_data, ps.PSConfig(mode="inference", iters=4, policy="random", seed=3, **common)),
        (biased, biased_data, ps.PSConfig(mode="training", iters=3, policy="random", seed=3, optimizer="sgd",
                                          lr=1e-3, momentum=0.9, pipeline=False, **common)),
        (reversed_model, biased_data, ps.PSConfig(mode="inference", iters=3, policy="tic", **common)),
        (reversed_model, biased_data, ps.PSConfig(mode="training", iters=2, policy="tic", lr=1e-3, pipeline=False,
                                                  **common)),
    ]


def observations(results, job_list):
    """(job, stats) for every worker iteration whose policy order differs from declaration."""
    out = []
    for (model_fn, _, cfg), r in zip(job_list, results):
        decl = declared(model_fn)
        assert r["plan"].policy == cfg.policy, r["plan"].notes        # no fallback to another order
        for s in r["stats"]:
            assert s.arrival_source == "future", "the tictac Work has no future: arrival order not observable"
            assert sorted(s.arrival_order) == sorted(decl)
            if s.expected_order != decl:
                out.append((cfg, s))
    assert len(out) >= 20, f"too few iterations whose policy order differs from declaration: {len(out)}"
    return out


def reference_sgd(model_fn, data_fn, cfg, workers=2):
    torch.manual_seed(cfg.seed)
    m = model_fn()
    opt = torch.optim.SGD(m.parameters(), lr=cfg.lr, momentum=cfg.momentum)
    for it in range(cfg.iters):
        xs, ys = zip(*[data_fn(w, it) for w in range(workers)])
        opt.zero_grad()
        F.cross_entropy(m(torch.cat(xs)), torch.cat(ys)).backward()
        opt.step()
    return {n: p.detach() for n, p in m.named_parameters()}


def test_policy_order_at_default_settings(default_env):
    job_list = jobs()
    results, _, _ = launch(entry_jobs, 3, job_list)
    assert all(r["prio"][0] for r in results), results[0]["prio"]
    bad = [(cfg.mode, cfg.policy, s.worker, s.iter, s.arrival_order, s.expected_order)
           for cfg, s in observations(results, job_list) if s.arrival_order != s.expected_order]
    assert not bad, f"{len(bad)} worker iterations did not see the policy's order, e.g. {bad[:2]}"
    # batching and the new protocol keep the arithmetic of single-process SGD
    model_fn, data_fn, cfg = job_list[1]
    want = reference_sgd(model_fn, data_fn, cfg)
    for n, v in want.items():
        assert (results[1]["params"][n] - v).abs().max().item() <= 1e-5, n


def test_counter_check_fifo_send_queue_loses_the_order(default_env):
    """The same runs with TICTAC_PRIORITY=0: the sends leave in posting (declaration) order, so
    the policy's order is never observed. If this passed with priorities on too, the order test
    above would prove nothing."""
    job_list = jobs()
    results, _, _ = launch(entry_jobs, 3, job_list, env={"TICTAC_PRIORITY": "0"})
    obs = observations(results, job_list)
    same = [(cfg.mode, cfg.policy, s.worker, s.iter) for cfg, s in obs if s.arrival_order == s.expected_order]
    assert not same, f"with TICTAC_PRIORITY=0 the policy's order still showed up in {same}"


# ------------------------------------------------------------------ dist.batch_isend_irecv

SIZES = [(1 << 20) // 4, 256, (512 << 10) // 4, 64, (1 << 20) // 4]   # float32 elements, mixed


def entry_batch(rank):
    """Rank 1 posts its receives, then says ready; rank 0 sends five tensors with one
    dist.batch_isend_irecv in tag order, at priorities (tag table) that reverse it. Returns the
    order rank 1 saw them complete in, and whether the data is right."""
    import threading
    import torch.distributed as dist
    n = len(SIZES)
    _tt.set_priorities(None, {100 + i: n - i for i in range(n)})
    # misuse is a clear error; an empty batch is one completed Work
    pg = dist.group.WORLD
    try:
        pg._end_coalescing(torch.device("cpu"))
    except RuntimeError as e:
        assert "startCoalescing first" in str(e), e
    else:
        raise AssertionError("endCoalescing without startCoalescing did not raise")
    pg._start_coalescing(torch.device("cpu"))
    try:
        pg._start_coalescing(torch.device("cpu"))
    except RuntimeError as e:
        assert "already coalescing" in str(e), e
    else:
        raise AssertionError("a nested startCoalescing did not raise")
    assert pg._end_coalescing(torch.device("cpu")).wait()
    if rank == 0:
        dist.recv(torch.zeros(1), 1, tag=99)
        ops = [dist.P2POp(dist.isend, torch.full((k,), float(i)), 1, tag=100 + i) for i, k in enumerate(SIZES)]
        works = dist.batch_isend_irecv(ops)
        for w in works:
            w.wait()
        return len(works)
    bufs = [torch.empty(k) for k in SIZES]
    seen, lock = [], threading.Lock()
    futs = []
    for i, b in enumerate(bufs):
        w = dist.irecv(b, 0, tag=100 + i)

        def done(f, i=i):
            with lock:
                seen.append(i)
        w.get_future().add_done_callback(done)
        futs.append(w)
    dist.send(torch.zeros(1), 0, tag=99)
    for w in futs:
        w.wait()
    deadline = time.monotonic() + 10      # Work.wait returns before the future's callbacks ran
    while len(seen) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    ok = all(bool((b == float(i)).all()) for i, b in enumerate(bufs))
    return {"order": list(seen), "ok": ok}


def test_batch_isend_irecv_is_one_priority_ordered_batch(default_env):
    r0, r1 = launch(entry_batch, 2)
    assert r0 == 1, "batch_isend_irecv on tictac returns the batch's one coalesced Work"
    assert r1["ok"]
    assert r1["order"] == list(reversed(range(len(SIZES)))), r1["order"]


def test_batch_isend_irecv_counter_check_fifo(default_env):
    r0, r1 = launch(entry_batch, 2, env={"TICTAC_PRIORITY": "0"})
    assert r1["ok"]
    assert r1["order"] != list(reversed(range(len(SIZES)))), r1["order"]
