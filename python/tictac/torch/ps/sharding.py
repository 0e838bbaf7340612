"""Unique parameters of a model and their assignment to parameter servers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence, Tuple

from torch import nn

__all__ = ["ParamInfo", "unique_parameters", "shard_by_bytes", "pull_tag", "push_tag"]


def pull_tag(index: int) -> int:
    """Tag of the server -> worker transfer of parameter ``index`` (stable across iterations)."""
    return 2 * index


def push_tag(index: int) -> int:
    """Tag of the worker -> server gradient of parameter ``index``."""
    return 2 * index + 1


@dataclass
class ParamInfo:
    index: int            # position in named_parameters() order (shared tensors once)
    name: str             # canonical qualified name (the first name the tensor is registered under)
    param: nn.Parameter
    nbytes: int
    owner: int = 0        # server rank

    @property
    def pull_tag(self) -> int:
        return pull_tag(self.index)

    @property
    def push_tag(self) -> int:
        return push_tag(self.index)


def unique_parameters(model: nn.Module) -> List[Tuple[str, nn.Parameter]]:
    """(canonical name, tensor) per unique parameter, in registration order.

    Same naming as ``model.named_parameters()`` (which drops repeated tensors) and as
    ``tictac.torch.graph.trace_model`` (recv names)."""
    out: List[Tuple[str, nn.Parameter]] = []
    seen = set()
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) not in seen:
            seen.add(id(p))
            out.append((name, p))
    return out


def shard_by_bytes(sizes: Sequence[int], num_servers: int) -> List[int]:
    """Server index (0..num_servers-1) per tensor: greedy largest-first onto the least loaded
    server. Deterministic: ties in size go by index, ties in load by server index."""
    if num_servers < 1:
        raise ValueError(f"need at least one parameter server, got {num_servers}")
    load = [0] * num_servers
    owner = [0] * len(sizes)
    for i in sorted(range(len(sizes)), key=lambda i: (-int(sizes[i]), i)):
        s = min(range(num_servers), key=lambda k: (load[k], k))
        owner[i] = s
        load[s] += int(sizes[i])
    return owner


def param_infos(model: nn.Module, num_servers: int) -> List[ParamInfo]:
    infos = [ParamInfo(i, n, p, int(p.numel()) * int(p.element_size()))
             for i, (n, p) in enumerate(unique_parameters(model))]
    for info, s in zip(infos, shard_by_bytes([x.nbytes for x in infos], num_servers)):
        info.owner = s
    return infos
