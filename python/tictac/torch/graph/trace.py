"""Turn a PyTorch model into a ``tictac-graph/1`` DAG (docs/graph-format.md).

``trace_model`` traces the model with ``torch.fx.symbolic_trace`` (falling back to
``torch.export.export``), makes one ``recv`` op per unique parameter tensor and one ``compute``
op per graph node that does work, and times every node by running the traced graph node by
node (``_TimingInterpreter``). The result is a plain dict ready for ``json.dump``, loadable by
the C++ loader (``tictac order --graph FILE``).

Naming: a recv is named ``recv_name(qualified parameter name)``, the name
``model.named_parameters()`` gives the tensor (for a shared tensor: the first name it is
registered under). Compute ops are named after their fx nodes (``conv1``, ``relu_3``); fx node
names never contain ``.`` or ``/``, so they cannot collide with parameter names (which always
contain a ``.`` unless registered on the root) or with the ``<node>/backward`` ops of training
mode; a collision that does happen anyway is an error, never a silent rename.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.fx
from torch import nn

__all__ = ["TraceError", "trace_model", "recv_name", "FORMAT"]

FORMAT = "tictac-graph/1"

# Compute time written for every op when profile=False (the policies need a number; TIC
# ignores compute times, TAC then treats all ops alike).
UNPROFILED_TIME_S = 1e-6

# Name of the op that joins the forward outputs and starts the backward (training mode).
LOSS_OP = "output/loss_grad"
BACKWARD_SUFFIX = "/backward"
BACKWARD_FACTOR = 2.0


class TraceError(RuntimeError):
    """The model could not be turned into a graph (both tracers failed).

    The message carries both reasons; the caller falls back to the recorded first-iteration
    order (``orders.compute_order`` does this when given ``graph=None``).
    """


def recv_name(param_qualified_name: str) -> str:
    """The recv op name of a parameter: the single place that maps parameter names to ops."""
    return param_qualified_name


# --------------------------------------------------------------------------------------------
# Parameters


def _unique_parameters(model: nn.Module) -> Tuple[List[Tuple[str, nn.Parameter]], Dict[int, str]]:
    """(canonical name, tensor) per unique parameter in registration order, and a map from
    id(tensor) to its canonical name (covers every alias of a shared parameter)."""
    unique: List[Tuple[str, nn.Parameter]] = []
    by_id: Dict[int, str] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) not in by_id:
            by_id[id(p)] = name
            unique.append((name, p))
    return unique, by_id


def _param_bytes(p: torch.Tensor) -> int:
    return int(p.numel()) * int(p.element_size())


# --------------------------------------------------------------------------------------------
# Timing


class _TimingInterpreter(torch.fx.Interpreter):
    """Runs a graph node by node and records the wall time of every call_* node."""

    WORK_OPS = ("call_module", "call_function", "call_method")

    def __init__(self, gm: torch.fx.GraphModule, sync: Optional[Callable[[], None]] = None):
        super().__init__(gm, garbage_collect_values=True)
        self.times: Dict[str, float] = {}
        self._sync = sync

    def run_node(self, n: torch.fx.Node) -> Any:
        if n.op not in self.WORK_OPS:
            return super().run_node(n)
        if self._sync is not None:
            self._sync()
        start = time.perf_counter()
        result = super().run_node(n)
        if self._sync is not None:
            self._sync()
        self.times[n.name] = time.perf_counter() - start
        return result


def _cuda_sync_if_needed(tensors: Sequence[Any]) -> Optional[Callable[[], None]]:
    if any(isinstance(t, torch.Tensor) and t.is_cuda for t in tensors):
        return torch.cuda.synchronize
    return None


def _profile(gm: torch.fx.GraphModule, args: Sequence[Any], *, inference: bool, warmup: int,
             repeats: int) -> Dict[str, float]:
    """Median wall time per work node over ``repeats`` runs after ``warmup`` runs."""
    sync = _cuda_sync_if_needed(list(args) + [p for p in gm.parameters()])
    samples: Dict[str, List[float]] = {}
    ctx = torch.no_grad if inference else torch.enable_grad
    with ctx():
        for i in range(warmup + repeats):
            interp = _TimingInterpreter(gm, sync)
            interp.run(*args)
            if i >= warmup:
                for name, t in interp.times.items():
                    samples.setdefault(name, []).append(t)
    return {name: statistics.median(ts) for name, ts in samples.items()}


# --------------------------------------------------------------------------------------------
# Tracing


class _Traced:
    """A traced graph plus how to find parameters in it."""

    def __init__(self, tracer: str, gm: torch.fx.GraphModule, run_args: List[Any],
                 placeholder_params: Dict[str, str]):
        self.tracer = tracer                          # "torch.fx.symbolic_trace" or "torch.export.export"
        self.gm = gm                                  # the graph to walk and to time
        self.run_args = run_args                      # the arguments that run gm
        self.placeholder_params = placeholder_params  # placeholder node name -> parameter fqn


def _trace_fx(model: nn.Module, example_inputs: tuple) -> _Traced:
    gm = torch.fx.symbolic_trace(model)
    return _Traced("torch.fx.symbolic_trace", gm, list(example_inputs), {})


def _trace_export(model: nn.Module, example_inputs: tuple) -> _Traced:
    from torch.export.graph_signature import InputKind

    ep = torch.export.export(model, tuple(example_inputs), strict=False)
    sig = ep.graph_signature
    user_inputs = [a for a in example_inputs]
    run_args: List[Any] = []
    used_user = 0
    for spec in sig.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            if used_user >= len(user_inputs):
                raise RuntimeError("exported graph has more user inputs than example_inputs")
            run_args.append(user_inputs[used_user])
            used_user += 1
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            value = ep.state_dict.get(spec.target)
            if value is None:  # non-persistent buffers live in constants
                value = ep.constants[spec.target]
            run_args.append(value)
        else:  # constant tensors, custom objects, tokens
            run_args.append(ep.constants[spec.target])
    placeholder_params = dict(sig.inputs_to_parameters)
    return _Traced("torch.export.export", ep.graph_module, run_args, placeholder_params)


def _trace(model: nn.Module, example_inputs: tuple) -> Tuple[_Traced, Optional[str]]:
    """fx first, then export; returns the trace and the fx failure reason (if fx failed)."""
    try:
        return _trace_fx(model, example_inputs), None
    except Exception as fx_error:  # noqa: BLE001 - any tracer failure means "fall back"
        fx_reason = f"{type(fx_error).__name__}: {fx_error}"
    try:
        return _trace_export(model, example_inputs), fx_reason
    except Exception as export_error:  # noqa: BLE001
        export_reason = f"{type(export_error).__name__}: {export_error}"
    raise TraceError(
        f"cannot trace {type(model).__name__}: torch.fx.symbolic_trace failed ({_short(fx_reason)}); "
        f"torch.export.export failed ({_short(export_reason)}); use the recorded first-iteration order")


def _short(reason: str, limit: int = 400) -> str:
    reason = " ".join(reason.split())
    return reason if len(reason) <= limit else reason[: limit - 3] + "..."


# --------------------------------------------------------------------------------------------
# Graph building


def _describe_inputs(example_inputs: tuple) -> Dict[str, Any]:
    shapes = [list(t.shape) for t in example_inputs if isinstance(t, torch.Tensor)]
    info: Dict[str, Any] = {"input_shapes": shapes}
    if shapes and len(shapes[0]) >= 1:
        info["batch"] = shapes[0][0]
    if shapes and len(shapes[0]) == 4:
        info["image_size"] = shapes[0][2] if shapes[0][2] == shapes[0][3] else shapes[0][2:]
    return info


def trace_model(model: nn.Module, example_inputs: tuple, *, mode: str = "inference",
                profile: bool = True, warmup: int = 1, repeats: int = 3,
                name: Optional[str] = None, meta: Optional[Dict[str, Any]] = None,
                backward: bool = True) -> Dict[str, Any]:
    """Trace ``model`` on ``example_inputs`` and return a ``tictac-graph/1`` dict.

    mode: "inference" (model.eval(), timed under torch.no_grad()) or "training"
      (model.train(); forward timed with autograd on; the backward is approximated, see below).
    profile: time every node (median of ``repeats`` runs after ``warmup`` runs); when False every
      compute op gets ``UNPROFILED_TIME_S``.
    name / meta: the graph's ``name`` (default: the model's class name) and extra ``meta`` keys.
    backward: training mode only: add the approximated backward ops (default). Pass False for
      ``tictac simulate/compare --mode training``, which adds the same backward model
      (``--backward-factor``, default 2) to every compute op itself and would count it twice.

    Ops: a recv per unique parameter tensor (buffers are not recvs), in registration order
    (``named_parameters()``), with ``bytes`` = numel * element_size; then a compute op per fx
    node of kind call_module / call_function / call_method in topological order. A compute op's
    inputs are the work nodes it consumes plus the recvs of the parameters it uses: for a
    call_module node all parameters of that (leaf) module, for a parameter read through get_attr
    (fx) or a parameter placeholder (export) the parameter's recv.

    Training: after the forward ops, ``output/loss_grad`` (time 0) joins the forward outputs;
    then one ``<node>/backward`` op per forward op in reverse topological order, with time
    2 x the forward op's time, consuming the forward op itself (saved activations), the backward
    ops of its consumers (the incoming gradient) and its parameters' recvs. Gradient pushes are
    not part of the graph (the format has only recvs).

    Raises TraceError when neither torch.fx.symbolic_trace nor torch.export.export can trace the
    model (e.g. data-dependent control flow); ValueError for a bad argument.
    """
    if mode not in ("inference", "training"):
        raise ValueError(f"mode must be 'inference' or 'training', got {mode!r}")
    if not isinstance(example_inputs, tuple):
        example_inputs = (example_inputs,)
    if warmup < 0 or repeats < 1:
        raise ValueError(f"need warmup >= 0 and repeats >= 1, got warmup={warmup}, repeats={repeats}")
    inference = mode == "inference"

    was_training = model.training
    model.train(not inference)
    try:
        traced, fx_reason = _trace(model, example_inputs)
        times = (_profile(traced.gm, traced.run_args, inference=inference, warmup=warmup,
                          repeats=repeats) if profile else {})
    finally:
        model.train(was_training)

    unique, by_id = _unique_parameters(model)
    alias_to_canonical = {n: by_id[id(p)] for n, p in model.named_parameters(remove_duplicate=False)}
    gm = traced.gm

    def param_of(tensor: Any, fqn: Optional[str]) -> Optional[str]:
        if isinstance(tensor, nn.Parameter) and id(tensor) in by_id:
            return by_id[id(tensor)]
        if fqn is not None and fqn in alias_to_canonical:
            return alias_to_canonical[fqn]
        return None

    ops: List[Dict[str, Any]] = []
    names: Dict[str, str] = {}  # op name -> what it is, to catch collisions

    def add(op: Dict[str, Any], what: str) -> None:
        if op["name"] in names:
            raise TraceError(f"op name {op['name']!r} is used twice ({names[op['name']]} and {what})")
        names[op["name"]] = what
        ops.append(op)

    for pname, p in unique:
        add({"name": recv_name(pname), "kind": "recv", "bytes": _param_bytes(p)}, f"parameter {pname}")

    # Value nodes that stand for a parameter (get_attr in fx, placeholders in export).
    node_param: Dict[str, str] = {}
    work_nodes: List[torch.fx.Node] = []
    output_args: List[torch.fx.Node] = []
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            try:
                value = _fetch_attr(gm, node.target)
            except AttributeError:
                continue
            pname = param_of(value, node.target)
            if pname is not None:
                node_param[node.name] = pname
        elif node.op == "placeholder":
            fqn = traced.placeholder_params.get(node.name)
            if fqn is not None:
                pname = param_of(None, fqn)
                if pname is None:
                    raise TraceError(f"exported parameter {fqn!r} is not among the model's parameters")
                node_param[node.name] = pname
        elif node.op in _TimingInterpreter.WORK_OPS:
            work_nodes.append(node)
        elif node.op == "output":
            output_args = list(node.all_input_nodes)

    work_names = {n.name for n in work_nodes}
    forward_inputs: Dict[str, List[str]] = {}
    forward_params: Dict[str, List[str]] = {}
    consumers: Dict[str, List[str]] = {n.name: [] for n in work_nodes}
    for node in work_nodes:
        inputs: List[str] = []
        params: List[str] = []
        for arg in node.all_input_nodes:
            if arg.name in work_names:
                inputs.append(arg.name)
                consumers[arg.name].append(node.name)
            elif arg.name in node_param:
                params.append(node_param[arg.name])
        if node.op == "call_module":
            module = gm.get_submodule(node.target)
            # A leaf module is opaque, so it uses all of its parameters (for nn.Linear and
            # friends that is parameters(recurse=False); nn.MultiheadAttention also reads its
            # child out_proj's weight and bias).
            for qual, p in module.named_parameters(prefix=node.target, remove_duplicate=False):
                pname = param_of(p, qual)
                if pname is not None:
                    params.append(pname)
        params = list(dict.fromkeys(params))
        forward_inputs[node.name] = list(dict.fromkeys(inputs))
        forward_params[node.name] = params
        op = {"name": node.name, "kind": "compute",
              "inputs": forward_inputs[node.name] + [recv_name(q) for q in params],
              "time": _op_time(times, node.name, profile)}
        if not op["inputs"]:
            del op["inputs"]
        add(op, f"fx node {node.name}")

    n_forward = len(work_nodes)
    if not inference and backward:
        outputs = [a.name for a in output_args if a.name in work_names]
        add({"name": LOSS_OP, "kind": "compute", "inputs": outputs or [n.name for n in work_nodes[-1:]],
             "time": 0.0}, "the loss op")
        out_set = set(outputs)
        for node in reversed(work_nodes):
            grad_from = [c + BACKWARD_SUFFIX for c in dict.fromkeys(consumers[node.name])]
            if node.name in out_set or (not outputs and node is work_nodes[-1]):
                grad_from.append(LOSS_OP)
            op = {"name": node.name + BACKWARD_SUFFIX, "kind": "compute",
                  "inputs": [node.name] + grad_from + [recv_name(q) for q in forward_params[node.name]],
                  "time": BACKWARD_FACTOR * _op_time(times, node.name, profile)}
            add(op, f"backward of fx node {node.name}")

    used = {q for ps in forward_params.values() for q in ps}
    total_bytes = sum(_param_bytes(p) for _, p in unique)
    total_time = sum(op["time"] for op in ops if op["kind"] == "compute")
    graph_meta: Dict[str, Any] = {
        "source": "tictac.torch.graph.trace_model",
        "model": name or type(model).__name__,
        **_describe_inputs(example_inputs),
        "mode": mode,
        "torch_version": torch.__version__,
        "threads": torch.get_num_threads(),
        "device": _device_of(example_inputs, model),
        "tracer": traced.tracer,
        "timing": (f"wall time (time.perf_counter) of each node, run node by node by a "
                   f"torch.fx.Interpreter subclass{' under torch.no_grad()' if inference else ' with autograd on'}; "
                   f"median of {repeats} runs after {warmup} warm-up runs" if profile
                   else f"not profiled: every compute op has time {UNPROFILED_TIME_S}"),
        "recvs": len(unique),
        "compute_ops": len(ops) - len(unique),
        "parameter_bytes": total_bytes,
        "compute_time_s": total_time,
        "recv_names": "the parameter's qualified name from named_parameters() (shared tensors once, "
                      "under their first name); buffers are not recvs",
    }
    if fx_reason is not None:
        graph_meta["fx_failure"] = _short(fx_reason)
    unused = [q for q, _ in unique if q not in used]
    if unused:
        graph_meta["unused_parameters"] = unused
    if not inference and not backward:
        graph_meta["backward"] = ("not in the graph: forward ops only (timed in training mode, autograd on); "
                                  "for tictac simulate/compare --mode training, which models the backward itself")
    elif not inference:
        graph_meta["backward"] = (
            f"approximated, not measured: one '<node>{BACKWARD_SUFFIX}' op per forward op in reverse "
            f"topological order with time {BACKWARD_FACTOR:g} x the forward op's time, consuming the forward "
            f"op, the backward ops of its consumers and its parameters' recvs; '{LOSS_OP}' (time 0) joins "
            f"the forward outputs; gradient pushes are not modelled; forward ops: {n_forward}. The backward is "
            f"already in the graph: simulate it with tictac --mode inference (its --mode training adds a "
            f"backward to every compute op, this one's included), or export with backward=False")
    if meta:
        graph_meta.update(meta)
    return {"format": FORMAT, "name": name or type(model).__name__, "meta": graph_meta, "ops": ops}


def _op_time(times: Dict[str, float], node: str, profile: bool) -> float:
    if not profile:
        return UNPROFILED_TIME_S
    return float(times.get(node, 0.0))


def _fetch_attr(gm: torch.fx.GraphModule, target: str) -> Any:
    obj: Any = gm
    for atom in target.split("."):
        obj = getattr(obj, atom)
    return obj


def _device_of(example_inputs: tuple, model: nn.Module) -> str:
    for t in list(example_inputs) + list(model.parameters())[:1]:
        if isinstance(t, torch.Tensor):
            return str(t.device)
    return "cpu"
