"""Graph export for TicTac's PyTorch integration.

- ``trace_model(model, example_inputs, mode=..., profile=...)``: a ``tictac-graph/1`` dict
  (docs/graph-format.md) with one recv per unique parameter tensor and profiled compute ops.
- ``recv_name(param_name)``: the recv op name of a parameter.
- ``compute_order(policy, graph=..., recorded_order=..., param_names=..., bandwidth_bps=..., seed=...)``:
  the parameter send order for fifo, layer, tic, tac, random.
"""

from .trace import FORMAT, TraceError, recv_name, trace_model
from .orders import POLICIES, compute_order

__all__ = ["FORMAT", "TraceError", "recv_name", "trace_model", "POLICIES", "compute_order"]
