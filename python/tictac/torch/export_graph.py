"""Export a PyTorch model as a tictac-graph/1 file.

    python -m tictac.torch.export_graph --model torchvision:vgg16 --batch 4 --image-size 64 \
        --mode inference --out vgg16.json [--threads 1]

``--model`` is ``torchvision:NAME`` (a ``torchvision.models`` builder, always with
``weights=None``: nothing is downloaded) or ``module.path:callable`` (called with no arguments,
must return an ``nn.Module``). The input is a random float32 tensor of shape
``(batch, 3, image-size, image-size)``. ``inception_v3`` is built with ``aux_logits=False,
init_weights=False`` (image size >= 75); ``vit_*`` with ``image_size=--image-size`` (which must
be divisible by the patch size). Prints one summary line; exit status 0 on success, 1 when the
model cannot be traced, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from typing import Any, Dict, List, Optional, Tuple

# Special construction arguments for torchvision builders.
_TORCHVISION_KWARGS: Dict[str, Dict[str, Any]] = {
    "inception_v3": {"aux_logits": False, "init_weights": False},
    "googlenet": {"aux_logits": False, "init_weights": False},
}
_MIN_IMAGE_SIZE = {"inception_v3": 75}


def build_model(spec: str, image_size: int):
    """(model, kwargs used) for a ``--model`` spec."""
    if ":" not in spec:
        raise ValueError(f"--model must be torchvision:NAME or module.path:callable, got {spec!r}")
    module_name, attr = spec.split(":", 1)
    if module_name == "torchvision":
        import torchvision.models as tvm

        builder = getattr(tvm, attr, None)
        if builder is None or not callable(builder):
            raise ValueError(f"torchvision.models has no model builder {attr!r}")
        kwargs: Dict[str, Any] = {"weights": None, **_TORCHVISION_KWARGS.get(attr, {})}
        if attr in _MIN_IMAGE_SIZE and image_size < _MIN_IMAGE_SIZE[attr]:
            raise ValueError(f"{attr} needs --image-size >= {_MIN_IMAGE_SIZE[attr]}, got {image_size}")
        if attr.startswith("vit_"):
            kwargs["image_size"] = image_size
        return builder(**kwargs), kwargs
    module = importlib.import_module(module_name)
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj(), {}


def dumps_graph(graph: dict) -> str:
    """The graph as JSON text with one op per line (like the bundled graphs)."""
    head = {k: v for k, v in graph.items() if k != "ops"}
    lines = ["{"] + [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()] + [' "ops": [']
    ops = graph["ops"]
    lines += [f"  {json.dumps(op)}{',' if i + 1 < len(ops) else ''}" for i, op in enumerate(ops)]
    lines += [" ]", "}"]
    return "\n".join(lines) + "\n"


def _summary(graph: dict, path: str) -> str:
    ops = graph["ops"]
    recvs = [op for op in ops if op["kind"] == "recv"]
    mb = sum(op["bytes"] for op in recvs) / 1e6
    ms = sum(op["time"] for op in ops if op["kind"] == "compute") * 1e3
    return (f"{path}: {graph['name']}: {len(ops)} ops ({len(recvs)} recvs, {len(ops) - len(recvs)} compute), "
            f"{mb:.1f} MB of parameters, {ms:.2f} ms of compute ({graph['meta']['mode']}, "
            f"{graph['meta']['tracer']})")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tictac.torch.export_graph", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="torchvision:NAME or module.path:callable")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--channels", type=int, default=3)
    parser.add_argument("--mode", choices=("inference", "training"), default="inference")
    parser.add_argument("--out", required=True, help="output file (written atomically)")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-profile", action="store_true", help="do not time ops (all get 1e-6 s)")
    parser.add_argument("--no-backward", action="store_true",
                        help="training: forward ops only (for tictac simulate/compare --mode training, "
                             "which adds the backward itself)")
    parser.add_argument("--seed", type=int, default=0, help="torch.manual_seed for weights and input")
    args = parser.parse_args(argv)
    for flag in ("batch", "image_size", "channels", "threads", "repeats"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be >= 1")

    import torch

    from tictac.torch.graph import TraceError, trace_model

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    try:
        model, kwargs = build_model(args.model, args.image_size)
    except (ValueError, ImportError, AttributeError, TypeError) as e:
        print(f"export_graph: {e}", file=sys.stderr)
        return 2
    x = torch.randn(args.batch, args.channels, args.image_size, args.image_size)
    meta = {
        "model": args.model,
        "model_kwargs": {k: v for k, v in kwargs.items() if isinstance(v, (int, float, str, bool, type(None)))},
        "batch": args.batch,
        "image_size": args.image_size,
        "command": "python -m tictac.torch.export_graph " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    try:
        graph = trace_model(model, (x,), mode=args.mode, profile=not args.no_profile, warmup=args.warmup,
                            repeats=args.repeats, name=args.model.split(":", 1)[1], meta=meta,
                            backward=not args.no_backward)
    except TraceError as e:
        print(f"export_graph: {e}", file=sys.stderr)
        return 1
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(dumps_graph(graph))
    os.replace(tmp, args.out)
    print(_summary(graph, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
