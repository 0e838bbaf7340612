"""Ordered data-parallel training over the tictac backend: ``tictac.torch.ordered_ddp`` (see
ordered.py for what it does and docs/ddp.md for how to use and measure it)."""

from tictac.torch.ddp.ordered import POLICIES, OrderedDDP, ordered_ddp

__all__ = ["POLICIES", "OrderedDDP", "ordered_ddp"]
