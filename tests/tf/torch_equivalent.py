"""PyTorch equivalents of tf_model.build(dim) (with biases), exported with the project's torch
graph exporter (tictac.torch.graph.trace_model, unprofiled). Run under the torch venv (.venv),
not .venv-tf:

    .venv/bin/python tests/tf/torch_equivalent.py --dim 32 --batch 4 --out G.json

Two models:
  twin        the same ops as tf_model: per layer tanh(x @ w + b) on parameters named w1 .. b3,
              so the exported graph has the TF graph's ops (matmul, add, tanh) one for one;
  sequential  nn.Sequential(Linear, Tanh, Linear, Tanh, Linear): each Linear is one op that
              reads its weight and bias together.
Writes {model: {"inference": graph, "training": graph, "names": {recv: tf_model name}}}
(tictac-graph/1; training adds the exporter's approximated backward)."""
import argparse
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))
import torch  # noqa: E402
from torch import nn  # noqa: E402

from tictac.torch.graph import recv_name, trace_model  # noqa: E402

# tf_model.FORWARD, layer by layer: Linear k of the Sequential is at index 2k
NAMES = {"0.weight": "w1", "0.bias": "b1", "2.weight": "w2", "2.bias": "b2", "4.weight": "w3", "4.bias": "b3"}


class Twin(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        shapes = {"w1": (dim, dim), "b1": (dim,), "w2": (dim, dim), "b2": (dim,), "w3": (dim, 4), "b3": (4,)}
        for n, shape in shapes.items():  # registered in tf_model.FORWARD order
            self.register_parameter(n, nn.Parameter(torch.randn(*shape, dtype=torch.float64)))

    def forward(self, x):
        h = torch.tanh(x @ self.w1 + self.b1)
        h = torch.tanh(h @ self.w2 + self.b2)
        return h @ self.w3 + self.b3


def models(dim: int):
    torch.manual_seed(0)
    seq = nn.Sequential(nn.Linear(dim, dim), nn.Tanh(), nn.Linear(dim, dim), nn.Tanh(), nn.Linear(dim, 4))
    return {"twin": (Twin(dim), {n: n for n in NAMES.values()}), "sequential": (seq.double(), NAMES)}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--dim", type=int, default=32)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    torch.set_num_threads(1)
    x = torch.randn(a.batch, a.dim, dtype=torch.float64)
    out = {}
    for key, (m, names) in models(a.dim).items():
        out[key] = {"names": {recv_name(k): v for k, v in names.items()}}
        for mode in ("inference", "training"):
            out[key][mode] = trace_model(m, (x,), mode=mode, profile=False)
    with open(a.out, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
