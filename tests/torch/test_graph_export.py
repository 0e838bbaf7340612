"""Tests for tictac.torch.graph (trace_model, compute_order) and tictac.torch.export_graph.

CPU only, small models, well under a minute. The checks that need the C++ scheduling library
(the tictac.torch._C binding or build/tictac) are skipped, with the reason, when neither exists.
"""

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tictac.torch.graph import TraceError, compute_order, recv_name, trace_model  # noqa: E402
from tictac.torch.graph import orders as orders_mod  # noqa: E402
from tictac.torch.graph.trace import BACKWARD_SUFFIX, LOSS_OP  # noqa: E402

torch.set_num_threads(1)


def scheduler_available():
    return orders_mod._binding() is not None or orders_mod.default_cli() is not None


needs_scheduler = pytest.mark.skipif(
    not scheduler_available(),
    reason="neither tictac.torch._C nor build/tictac is built (run the C++ build first)")


# ------------------------------------------------------------------------------------- models


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))


class SmallCNN(nn.Module):
    """A branch (left / right), a parameter shared by two convs, a batch norm (buffers) and a
    bare parameter read through get_attr."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.left = nn.Conv2d(8, 8, 3, padding=1)
        self.right = nn.Conv2d(8, 8, 1)
        self.right2 = nn.Conv2d(8, 8, 1)
        self.right2.weight = self.right.weight  # shared
        self.bn = nn.BatchNorm2d(8)
        self.scale = nn.Parameter(torch.ones(1))
        self.fc = nn.Linear(8, 10, bias=False)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        a = self.left(x)
        b = self.right2(F.relu(self.right(x)))
        y = self.bn(a + b) * self.scale
        return self.fc(y.mean((2, 3)))


class DataDependent(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        if x.sum() > 0:
            return self.a(x)
        return self.b(x)


def recvs_of(graph):
    return [op for op in graph["ops"] if op["kind"] == "recv"]


def computes_of(graph):
    return [op for op in graph["ops"] if op["kind"] == "compute"]


def unique_params(model):
    seen, out = set(), []
    for name, p in model.named_parameters():
        if id(p) not in seen:
            seen.add(id(p))
            out.append((name, p))
    return out


# ------------------------------------------------------------------------------------ tracing


@pytest.fixture(scope="module")
def mlp_graph():
    return trace_model(mlp(), (torch.randn(2, 8),), repeats=2)


@pytest.fixture(scope="module")
def cnn_graph():
    return trace_model(SmallCNN(), (torch.randn(2, 3, 8, 8),), repeats=2)


@pytest.mark.parametrize("which", ["mlp", "cnn"])
def test_recvs_are_unique_parameters_with_bytes(which, mlp_graph, cnn_graph):
    model, graph = (mlp(), mlp_graph) if which == "mlp" else (SmallCNN(), cnn_graph)
    expected = [(recv_name(n), p.numel() * p.element_size()) for n, p in unique_params(model)]
    assert [(r["name"], r["bytes"]) for r in recvs_of(graph)] == expected
    names = [op["name"] for op in graph["ops"]]
    assert len(names) == len(set(names))
    assert graph["format"] == "tictac-graph/1"
    assert graph["meta"]["mode"] == "inference" and graph["meta"]["threads"] == torch.get_num_threads()


def test_shared_parameter_counted_once_and_buffers_excluded(cnn_graph):
    names = [r["name"] for r in recvs_of(cnn_graph)]
    assert "right.weight" in names and "right2.weight" not in names
    assert not any("running" in n or "num_batches" in n for n in names)


def test_every_recv_consumed_by_the_op_using_it(mlp_graph, cnn_graph):
    ops = {op["name"]: op for op in mlp_graph["ops"]}
    for i, layer in ((0, "_0"), (2, "_2"), (4, "_4")):
        assert set(ops[layer]["inputs"]) >= {f"{i}.weight", f"{i}.bias"}
    ops = {op["name"]: op for op in cnn_graph["ops"]}
    users = {r["name"]: [c["name"] for c in computes_of(cnn_graph) if r["name"] in c.get("inputs", [])]
             for r in recvs_of(cnn_graph)}
    assert all(users.values()), users
    assert sorted(users["right.weight"]) == ["right", "right2"]
    assert users["right2.bias"] == ["right2"]
    assert users["bn.weight"] == ["bn"] and users["bn.bias"] == ["bn"]
    assert len(users["scale"]) == 1 and ops[users["scale"][0]]["inputs"][0] == "bn"
    # the branch: the join consumes both sides
    add = next(c for c in computes_of(cnn_graph) if set(c.get("inputs", [])) == {"left", "right2"})
    assert add


def test_times_positive(mlp_graph, cnn_graph):
    for graph in (mlp_graph, cnn_graph):
        assert all(op["time"] > 0 for op in computes_of(graph))
        assert all("time" not in op for op in recvs_of(graph))
        json.dumps(graph, allow_nan=False)


def test_inputs_refer_to_earlier_ops(cnn_graph):
    seen = set()
    for op in cnn_graph["ops"]:
        assert all(i in seen for i in op.get("inputs", [])), op
        seen.add(op["name"])


def test_training_mode_adds_backward_ops():
    graph = trace_model(SmallCNN(), (torch.randn(2, 3, 8, 8),), mode="training", repeats=1, warmup=0)
    ops = {op["name"]: op for op in graph["ops"]}
    forward = [op for op in computes_of(graph) if "/" not in op["name"]]
    for op in forward:
        back = ops[op["name"] + BACKWARD_SUFFIX]
        assert back["time"] == pytest.approx(2 * op["time"])
        assert op["name"] in back["inputs"]
    assert LOSS_OP in ops[f"fc{BACKWARD_SUFFIX}"]["inputs"]
    assert "right.weight" in ops[f"right{BACKWARD_SUFFIX}"]["inputs"]
    assert "backward" in graph["meta"]


def test_training_without_backward_is_forward_only():
    graph = trace_model(SmallCNN(), (torch.randn(2, 3, 8, 8),), mode="training", repeats=1, warmup=0,
                        backward=False)
    assert not any("/" in op["name"] for op in computes_of(graph))
    assert graph["meta"]["mode"] == "training" and "forward ops only" in graph["meta"]["backward"]


def test_unprofiled_graph():
    graph = trace_model(mlp(), (torch.randn(2, 8),), profile=False)
    assert all(op["time"] > 0 for op in computes_of(graph))
    assert "not profiled" in graph["meta"]["timing"]


def test_data_dependent_control_flow_raises_and_order_falls_back():
    model = DataDependent()
    with pytest.raises(TraceError) as info:
        trace_model(model, (torch.randn(2, 4),))
    assert "symbolic_trace" in str(info.value) and "export" in str(info.value)
    names = [n for n, _ in model.named_parameters()]
    recorded = ["b.weight", "b.bias", "a.weight", "a.bias"]
    for policy in ("tic", "tac"):
        with pytest.warns(UserWarning, match=f"policy '{policy}' fell back to 'layer'"):
            order = compute_order(policy, graph=None, recorded_order=recorded, param_names=names,
                                  bandwidth_bps=10e9, seed=0)
        assert order == recorded
    with pytest.warns(UserWarning, match="fell back to 'fifo'"):
        assert compute_order("tic", graph=None, recorded_order=None, param_names=names,
                             bandwidth_bps=10e9, seed=0) == names


# ------------------------------------------------------------------------------------- orders


def test_fifo_layer_random():
    names = [f"p{i}" for i in range(20)]
    assert compute_order("fifo", graph=None, recorded_order=None, param_names=names,
                         bandwidth_bps=1e9, seed=0) == names
    recorded = list(reversed(names))
    assert compute_order("layer", graph=None, recorded_order=recorded, param_names=names,
                         bandwidth_bps=1e9, seed=0) == recorded
    with pytest.warns(UserWarning, match="missing from the recorded order"):
        assert compute_order("layer", graph=None, recorded_order=recorded[:5], param_names=names,
                             bandwidth_bps=1e9, seed=0) == recorded[:5] + names[:15]
    orders = [compute_order("random", graph=None, recorded_order=None, param_names=names,
                            bandwidth_bps=1e9, seed=s) for s in range(5)]
    for o in orders:
        assert sorted(o) == sorted(names) and len(o) == len(names)
    assert len({tuple(o) for o in orders}) == 5
    assert orders[0] == compute_order("random", graph=None, recorded_order=None, param_names=names,
                                      bandwidth_bps=1e9, seed=0)
    with pytest.raises(ValueError, match="unknown policy"):
        compute_order("nope", graph=None, recorded_order=None, param_names=names, bandwidth_bps=1e9, seed=0)


@needs_scheduler
def test_graphs_load_in_cpp_loader(mlp_graph, cnn_graph):
    for graph in (mlp_graph, cnn_graph,
                  trace_model(SmallCNN(), (torch.randn(2, 3, 8, 8),), mode="training", repeats=1)):
        prio = orders_mod.schedule_priorities(graph, "tic", 10e9)
        assert set(prio) == {r["name"] for r in recvs_of(graph)}


@needs_scheduler
def test_tic_on_sequential_is_forward_order(mlp_graph):
    names = [n for n, _ in mlp().named_parameters()]
    for policy in ("tic", "tac"):
        order = compute_order(policy, graph=mlp_graph, recorded_order=None, param_names=names,
                              bandwidth_bps=10e9, seed=0)
        assert sorted(order) == sorted(names)
        if policy == "tic":
            assert order == names


@needs_scheduler
def test_params_missing_from_graph_go_last(mlp_graph):
    names = [n for n, _ in mlp().named_parameters()] + ["extra.weight"]
    with pytest.warns(UserWarning, match="missing from the graph"):
        order = compute_order("tic", graph=mlp_graph, recorded_order=None, param_names=names,
                              bandwidth_bps=10e9, seed=0)
    assert order == names


@needs_scheduler
def test_cli_path_rejects_bad_graph():
    cli = orders_mod.default_cli()
    if cli is None:
        pytest.skip("build/tictac not built")
    bad = {"format": "tictac-graph/1", "ops": [{"name": "a", "kind": "compute", "inputs": ["zz"], "time": 1}]}
    with pytest.raises(ValueError, match="unknown input"):
        orders_mod.schedule_priorities(bad, "tic", 10e9, cli=cli)


# ---------------------------------------------------------------------------------- CLI module


def test_export_graph_module(tmp_path):
    out = tmp_path / "mlp.json"
    env = dict(os.environ, PYTHONPATH=str(REPO / "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-m", "tictac.torch.export_graph", "--model", "test_graph_export:SmallCNN",
         "--batch", "2", "--image-size", "8", "--repeats", "1", "--out", str(out)],
        capture_output=True, text=True, env=dict(env, PYTHONPATH=env["PYTHONPATH"] + os.pathsep +
                                                 str(Path(__file__).parent)), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "recvs" in proc.stdout and "MB of parameters" in proc.stdout
    graph = json.loads(out.read_text())
    assert len(recvs_of(graph)) == len(unique_params(SmallCNN()))
    assert graph["meta"]["batch"] == 2 and graph["meta"]["image_size"] == 8


class LoopOverBatch(nn.Module):
    """fx cannot trace range(x.shape[0]); torch.export specialises the shape and can."""

    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(4, 4)
        self.l2 = nn.Linear(4, 4)
        self.l2.weight = self.l1.weight
        self.bn = nn.BatchNorm1d(4)
        self.p = nn.Parameter(torch.ones(4))

    def forward(self, x):
        rows = [self.l2(torch.relu(self.l1(x[i:i + 1]))) for i in range(x.shape[0])]
        return self.bn(torch.cat(rows)) * self.p


def test_export_fallback_maps_placeholders_to_parameters():
    model = LoopOverBatch()
    graph = trace_model(model, (torch.randn(2, 4),), repeats=1)
    assert graph["meta"]["tracer"] == "torch.export.export"
    assert "fx_failure" in graph["meta"]
    assert [r["name"] for r in recvs_of(graph)] == [n for n, _ in unique_params(model)]
    users = {r["name"]: [c["name"] for c in computes_of(graph) if r["name"] in c.get("inputs", [])]
             for r in recvs_of(graph)}
    assert len(users["l1.weight"]) == 4 and len(users["l2.bias"]) == 2 and len(users["p"]) == 1
    assert all(users.values())
    assert all(op["time"] > 0 for op in computes_of(graph))


def test_binding_preferred_when_importable(monkeypatch, mlp_graph):
    calls = []

    class FakeC:
        @staticmethod
        def schedule(graph_json, policy, bandwidth_bps, seed):
            calls.append((json.loads(graph_json)["format"], policy, bandwidth_bps, seed))
            recvs = [op["name"] for op in json.loads(graph_json)["ops"] if op["kind"] == "recv"]
            return {name: 0 for name in reversed(recvs)}  # all tied: the graph's recv order decides

    monkeypatch.setattr(orders_mod, "_binding", lambda: FakeC)
    names = [n for n, _ in mlp().named_parameters()]
    order = compute_order("tac", graph=mlp_graph, recorded_order=None, param_names=names,
                          bandwidth_bps=5e9, seed=7)
    assert calls == [("tictac-graph/1", "tac", 5e9, 7)]
    assert order == names
