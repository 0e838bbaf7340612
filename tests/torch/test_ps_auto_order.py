"""The parameter server switches ordering off where it cannot help (issue 20 point 4,
ps/auto_order.py): below PSConfig.min_overlap of measured speedup bound S it uses declaration
order without per-message priorities from the iteration after the decision, on every rank, and
says why; results stay those of single-process training. Same harness as test_ps_training.py."""
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

torch = pytest.importorskip("torch")

import tictac.torch as _tt  # noqa: E402
from tictac.torch import ps  # noqa: E402
from tictac.torch.ps.auto_order import decide  # noqa: E402
from test_ps_training import assert_close, launch, mlp, mlp_data, reference, sgd_cfg  # noqa: E402

torch.set_num_threads(1)


def test_decide():
    why = decide([0.01, None, 0.02], 0.05)
    assert why and "0.015" in why and "min_overlap 0.05" in why and "TICTAC_PS_AUTO_ORDER=0" in why
    assert decide([0.5, 0.01, 0.6], 0.05) is None          # median 0.5: ordering can gain
    assert decide([None], 0.05) is None                     # nothing known: keep the policy


def test_plan_fifo_from():
    plan = ps.OrderPlan(requested="random", policy="random", base=None, names=["a", "b", "c", "d"], seed=1)
    plan.fifo_from = 2
    assert plan.order_for(0, 2) == plan.order_for(1, 5) == ["a", "b", "c", "d"]
    assert ps.OrderPlan.from_json(plan.to_json()).fifo_from == 2


def test_config_env(monkeypatch):
    monkeypatch.setenv("TICTAC_PS_AUTO_ORDER", "0")
    monkeypatch.setenv("TICTAC_PS_MIN_OVERLAP", "0.2")
    c = ps.PSConfig()
    assert c.auto_order is False and c.min_overlap == 0.2
    monkeypatch.setenv("TICTAC_PS_MIN_OVERLAP", "lots")
    with pytest.raises(ValueError, match="TICTAC_PS_MIN_OVERLAP"):
        ps.PSConfig()


def entry(rank, cfgs):
    out = []
    for cfg in cfgs:
        r = ps.run(mlp, mlp_data, cfg)
        out.append({"params": r.params, "plan": r.plan, "stats": r.stats} if rank == 0 else None)
    return out


@pytest.mark.parametrize("backend", ["gloo", "tictac"])
def test_switches_to_declaration_order_below_min_overlap(backend):
    if backend == "tictac" and not _tt.available():
        pytest.skip(f"tictac backend unavailable: {_tt._C_ERROR}")
    # S = min(N, C) / max(N, C) <= 1 always, so min_overlap 1.01 forces the switch and 0 never
    forced = sgd_cfg(policy="random", iters=4, warmup=1, min_overlap=1.01)
    never = sgd_cfg(policy="random", iters=4, warmup=1, min_overlap=0.0)
    disabled = sgd_cfg(policy="random", iters=4, warmup=1, min_overlap=1.01, auto_order=False)
    (r_forced, r_never, r_disabled), _, _ = launch(entry, 3, [forced, never, disabled], backend=backend)
    want = reference(mlp, mlp_data, forced)
    for r in (r_forced, r_never, r_disabled):
        assert_close(r["params"], want)
    decl = [n for n, _ in ps.unique_parameters(mlp())]
    assert r_forced["plan"].fifo_from == 1, r_forced["plan"].notes
    assert any("below min_overlap" in n for n in r_forced["plan"].notes), r_forced["plan"].notes
    assert all(s.expected_order == decl for s in r_forced["stats"] if s.iter >= 1)
    assert any(s.expected_order != decl for s in r_forced["stats"] if s.iter == 0)
    assert r_never["plan"].fifo_from is None and r_disabled["plan"].fifo_from is None
    assert any(s.expected_order != decl for s in r_never["stats"] if s.iter >= 1)
