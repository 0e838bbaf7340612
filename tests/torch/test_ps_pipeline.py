"""Pipelined parameter-server training (PSConfig.pipeline, TICTAC_PS_PIPELINE; issue 14 point 2).

With update="eager" and pipeline on (the default) a server sends each parameter's next value as
soon as it has updated it, during the workers' backward, and a worker posts that receive just
before it pushes the parameter's gradient. The results must equal single-process training, with
frozen parameters too, and the sends of iteration t+1 must really be posted during iteration t
(with pipeline off: never). Same harness as test_ps_training.py: spawned ranks on loopback,
1 thread each; gloo always, tictac when the extension is built.
"""
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import tictac.torch as _tt  # noqa: E402
from tictac.torch import ps  # noqa: E402
from test_ps_training import assert_close, initial, launch, mlp, mlp_data, sgd_cfg  # noqa: E402

torch.set_num_threads(1)


class PartlyFrozen(nn.Module):
    """An MLP whose first layer is frozen (pulled every iteration, never pushed or updated)."""

    def __init__(self):
        super().__init__()
        self.net = mlp()
        for p in self.net[0].parameters():
            p.requires_grad_(False)

    def forward(self, x):
        return self.net(x)


def partly_frozen():
    return PartlyFrozen()


def reference_frozen(cfg, workers=2):
    torch.manual_seed(cfg.seed)
    m = partly_frozen()
    opt = torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=cfg.lr, momentum=cfg.momentum,
                          weight_decay=cfg.weight_decay)
    for it in range(cfg.iters):
        xs, ys = zip(*[mlp_data(w, it) for w in range(workers)])
        opt.zero_grad()
        F.cross_entropy(m(torch.cat(xs)), torch.cat(ys)).backward()
        opt.step()
    return {n: p.detach() for n, p in m.named_parameters()}


def entry_pipe(rank, model_fn, cfgs):
    out = []
    for cfg in cfgs:
        r = ps.run(model_fn, mlp_data, cfg)
        out.append({"params": r.params, "sstats": r.server_stats, "stats": r.stats} if rank == 0 else None)
    return out


def presends(sstats):
    """Per server iteration >= 1: how many of its sends were issued before it started."""
    return [sum(1 for s in st.sends if s[2] < 0) for st in sstats if st.iter >= 1]


@pytest.mark.parametrize("backend", ["gloo", "tictac"])
def test_pipelined_training_matches_single_process_and_overlaps(backend):
    if backend == "tictac" and not _tt.available():
        pytest.skip(f"tictac backend unavailable: {_tt._C_ERROR}")
    on = sgd_cfg(policy="random", pipeline=True)
    off = sgd_cfg(policy="random", pipeline=False)
    frozen = sgd_cfg(policy="tic", pipeline=True)
    (r_on, r_off, r_frozen), _, _ = launch(entry_pipe, 3, partly_frozen, [on, off, frozen], backend=backend)
    want = reference_frozen(on)
    for r in (r_on, r_off, r_frozen):
        assert_close(r["params"], want)
    init = initial(partly_frozen)
    assert (r_on["params"]["net.0.weight"] - init["net.0.weight"]).abs().max() == 0      # frozen
    n_trainable = sum(1 for n in init if not n.startswith("net.0.")) * 2                  # x 2 workers
    # pipelined: every trainable parameter's next value left during the previous iteration
    assert all(k == n_trainable for k in presends(r_on["sstats"])), presends(r_on["sstats"])
    assert all(k == 0 for k in presends(r_off["sstats"])), presends(r_off["sstats"])
    # the worker's view: every pull of iteration >= 1 has a time, none is negative
    for s in r_on["stats"]:
        assert len(s.pulls) == len(init) and all(p[1] >= 0 and p[2] >= 0 for p in s.pulls)


def test_pipeline_env_switch(monkeypatch):
    monkeypatch.setenv("TICTAC_PS_PIPELINE", "0")
    assert ps.PSConfig().pipeline is False
    monkeypatch.setenv("TICTAC_PS_PIPELINE", "1")
    assert ps.PSConfig().pipeline is True
    monkeypatch.setenv("TICTAC_PS_PIPELINE", "maybe")
    with pytest.raises(ValueError, match="TICTAC_PS_PIPELINE"):
        ps.PSConfig()


def test_push_and_update_order_env_switches(monkeypatch):
    assert ps.PSConfig().push_order == "produced" and ps.PSConfig().update_order == "arrival"
    monkeypatch.setenv("TICTAC_PS_PUSH_ORDER", "next")
    monkeypatch.setenv("TICTAC_PS_UPDATE_ORDER", "next")
    cfg = ps.PSConfig()
    assert (cfg.push_order, cfg.update_order) == ("next", "next")
    cfg.validate(3)
    for var, bad in (("TICTAC_PS_PUSH_ORDER", "p3"), ("TICTAC_PS_UPDATE_ORDER", "lifo")):
        monkeypatch.setenv(var, bad)
        with pytest.raises(ValueError, match=var):
            ps.PSConfig().validate(3)
        monkeypatch.delenv(var)


def test_ready_updates_next_order_and_arrival_counter_check():
    """Parameters whose gradients all landed while the server was busy are updated in the next
    iteration's order (rank), not in the order they became ready; with no ranks (update_order
    "arrival", the counter-check) they come in arrival order. A failure jumps the queue."""
    from tictac.torch.ps.update_queue import ReadyUpdates

    ranks = {"fc": 3, "conv3": 2, "conv2": 1, "conv1": 0}     # the next forward needs conv1 first
    arrival = ["fc", "conv3", "conv2", "conv1"]                 # the backward produces fc first

    def drain(q, n):
        return [q.get(timeout=1)[1] for _ in range(n)]

    for r, want in ((ranks, ["conv1", "conv2", "conv3", "fc"]), ({}, arrival)):
        q = ReadyUpdates({k: 2 for k in arrival}, r)
        for k in arrival:
            q.landed(k)          # first of two workers: nothing ready yet
        with pytest.raises(Exception):
            q.get(timeout=0.01)
        for k in arrival:
            q.landed(k)
        assert drain(q, 4) == want
    q = ReadyUpdates({"a": 1, "b": 1}, {"a": 0, "b": 1})
    q.landed("b")
    q.failed("boom")
    q.landed("a")
    assert q.get(timeout=1) == (True, "boom") and drain(q, 2) == ["a", "b"]


@pytest.mark.parametrize("backend", ["gloo", "tictac"])
def test_p3_pushes_and_next_updates_still_exact(backend):
    """The non-default push and update orders (push_order="next", update_order="next") give
    the same parameters as single-process training (the default ones are checked above)."""
    if backend == "tictac" and not _tt.available():
        pytest.skip(f"tictac backend unavailable: {_tt._C_ERROR}")
    cfg = sgd_cfg(policy="tac", pipeline=True, push_order="next", update_order="next")
    (r,), _, _ = launch(entry_pipe, 3, partly_frozen, [cfg], backend=backend)
    assert_close(r["params"], reference_frozen(cfg))
