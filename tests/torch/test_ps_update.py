"""Tests of the servers' update modes in tictac.torch.ps (PSConfig.update): "eager" (each
parameter updated as soon as every worker's gradient of it landed; the masks go before the
backward) and "bulk" (one optimizer step after all gradients). Same harness as
test_ps_training.py: spawned ranks on loopback, gloo, 1 thread each."""
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from tictac.torch import ps  # noqa: E402
from test_ps_training import (assert_close, entry_runs, initial, launch, mlp, mlp_data, reference,  # noqa: E402
                              sgd_cfg)

torch.set_num_threads(1)


class WithUnused(nn.Module):
    """An MLP with a layer the forward never calls (no gradient, ever)."""

    def __init__(self):
        super().__init__()
        self.net = mlp()
        self.unused = nn.Linear(3, 3).double()

    def forward(self, x):
        return self.net(x)


def with_unused():
    return WithUnused()


class _NoGradFor(torch.autograd.Function):
    """x + 0 * p.sum() whose backward gives p no gradient (p is reached, but gets None)."""

    @staticmethod
    def forward(ctx, x, p):
        return x + 0 * p.sum()

    @staticmethod
    def backward(ctx, g):
        return g, None


class ReachedNoGrad(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = mlp()
        self.p = nn.Parameter(torch.linspace(1.0, 2.0, 3, dtype=torch.float64))

    def forward(self, x):
        return _NoGradFor.apply(self.net(x), self.p)


def reached_no_grad():
    return ReachedNoGrad()


def entry_server_stats(rank, model_fn, data_fn, cfgs):
    out = []
    for cfg in cfgs:
        r = ps.run(model_fn, data_fn, cfg)
        out.append({"params": r.params, "server_stats": r.server_stats} if rank == 0 else None)
    return out


def test_config_rejects_unknown_update():
    with pytest.raises(ValueError, match="update must be one of"):
        sgd_cfg(update="lazy").validate(3)


def test_eager_and_bulk_match_single_process_with_an_unused_layer():
    cfgs = [sgd_cfg(policy="tic", update="eager"), sgd_cfg(policy="tic", update="bulk"),
            sgd_cfg(policy="fifo", update="eager", optimizer="adam", lr=0.01, weight_decay=0.001)]
    results, _, _ = launch(entry_runs, 3, with_unused, mlp_data, cfgs)
    init = initial(with_unused)
    for cfg, r in zip(cfgs, results):
        want = reference(with_unused, mlp_data, cfg)
        assert_close(r["params"], want)
        # never had a gradient: untouched, as torch.optim leaves a grad-None parameter
        assert torch.equal(r["params"]["unused.weight"], init["unused.weight"]), cfg.update
        assert any((r["params"][n] - init[n]).abs().max() > 1e-3 for n in init if n.startswith("net."))


def test_eager_update_records_its_time_and_two_servers_work():
    cfgs = [sgd_cfg(num_ps=2, policy="fifo", update="eager"), sgd_cfg(num_ps=2, policy="fifo", update="bulk")]
    results, _, _, _ = launch(entry_server_stats, 4, mlp, mlp_data, cfgs)
    for cfg, r in zip(cfgs, results):
        assert_close(r["params"], reference(mlp, mlp_data, cfg))
        ss = r["server_stats"]
        assert {s.rank for s in ss} == {0, 1} and len(ss) == 2 * cfg.iters
        for s in ss:
            assert s.update is not None and s.update[1] >= s.update[0]
            assert 0 < s.update_busy_ms <= s.update[1] - s.update[0] + 1e-6
            assert len(s.grads) == 2 * len({g[0] for g in s.grads})       # every parameter from both workers
            assert all(g[3] >= g[2] for g in s.grads)


def test_reached_but_no_gradient_bulk_is_exact_eager_applies_zero():
    cfgs = [sgd_cfg(policy="fifo", update="bulk"), sgd_cfg(policy="fifo", update="eager")]
    results, _, _ = launch(entry_runs, 3, reached_no_grad, mlp_data, cfgs)
    init = initial(reached_no_grad)
    want = reference(reached_no_grad, mlp_data, cfgs[0])
    assert torch.equal(want["p"], init["p"])                 # torch.optim skips a grad-None parameter
    assert_close(results[0]["params"], want)                 # bulk: exact
    eager = results[1]["params"]
    # eager (documented, and warned about): a zero gradient was applied, so weight decay moved p
    assert (eager["p"] - init["p"]).abs().max() > 1e-4
    assert_close({n: v for n, v in eager.items() if n != "p"}, {n: v for n, v in want.items() if n != "p"})
