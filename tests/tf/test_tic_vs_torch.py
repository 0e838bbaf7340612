"""Issue 8: TIC on an exported TF graph matches TIC on the equivalent PyTorch graph.

The TF side exports tf_model's 3-layer MLP (tictac.tf.export_graph: the forward loss, and a
GradientTape step for training); the torch side (tests/tf/torch_equivalent.py, run under the
torch venv: $TICTAC_TORCH_PYTHON, default <repo>/.venv/bin/python) exports the same model with
tictac.torch.graph.trace_model. Both graphs go through the same `tictac order --policy tic`.
Skipped, with the reason, when the op library, the CLI or the torch venv is missing.
"""
import json
import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "python"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

tf = pytest.importorskip("tensorflow")
from tictac.tf.export_graph import default_cli, export_function, order_priorities  # noqa: E402

import tf_model  # noqa: E402

TORCH_PY = os.environ.get("TICTAC_TORCH_PYTHON") or str(REPO / ".venv" / "bin" / "python")
DIM, BATCH = 32, 4


def _torch_graphs(tmp_path):
    if not os.path.exists(TORCH_PY):
        pytest.skip(f"no torch venv python at {TORCH_PY} (make deps, or set TICTAC_TORCH_PYTHON)")
    out = tmp_path / "torch.json"
    p = subprocess.run([TORCH_PY, str(HERE / "torch_equivalent.py"), "--dim", str(DIM), "--batch", str(BATCH),
                        "--out", str(out)], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    if p.returncode != 0 and "No module named 'torch'" in p.stderr:
        pytest.skip(f"{TORCH_PY} cannot import torch")
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(out.read_text())


def _tf_graphs():
    variables, names, _, loss_fn = tf_model.build(DIM)
    x = tf.zeros([BATCH, DIM], tf.float64)
    y = tf.zeros([BATCH, 4], tf.float64)

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(x, y)
        return tape.gradient(loss, variables)

    return {"inference": export_function(tf.function(loss_fn), (x, y), variables=variables, names=names),
            "training": export_function(tf.function(step), (x, y), variables=variables, names=names)}


def _tic(graph, rename=None):
    prio = order_priorities(graph, "tic")
    return {(rename or {}).get(k, k): v for k, v in prio.items()}


def _transfer_order(prio):
    """The order a server sends in: by priority, ties by forward position (tictac.tf.server)."""
    return sorted(prio, key=lambda n: (prio[n], tf_model.FORWARD.index(n)))


@pytest.mark.skipif(default_cli() is None, reason="build/tictac is not built")
def test_tic_on_tf_graph_matches_tic_on_torch_graph(tmp_path):
    torch_graphs = _torch_graphs(tmp_path)
    tf_graphs = _tf_graphs()
    for mode in ("inference", "training"):
        tf_prio = _tic(tf_graphs[mode])
        assert sorted(tf_prio) == sorted(tf_model.FORWARD)
        # the op-for-op twin (tanh(x @ w + b) per layer): the same priority for every parameter
        twin = torch_graphs["twin"]
        assert _tic(twin[mode], twin["names"]) == tf_prio, (mode, tf_prio)
        # nn.Sequential of nn.Linear: a Linear reads weight and bias in one op, so b_k ties with
        # w_k instead of coming one after it; the transfer order is still the same
        seq = torch_graphs["sequential"]
        seq_prio = _tic(seq[mode], seq["names"])
        assert sorted(seq_prio) == sorted(tf_model.FORWARD)
        assert _transfer_order(seq_prio) == _transfer_order(tf_prio) == tf_model.FORWARD, (mode, seq_prio, tf_prio)
    assert tf_prio == {"w1": 0, "b1": 0, "w2": 2, "b2": 3, "w3": 4, "b3": 5}  # what both give today
