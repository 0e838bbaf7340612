"""Parameter-server training and inference over torch.distributed with no model changes.

    from tictac.torch import ps
    ps.init_distributed()                  # "tictac" (default) or the "gloo" baseline; env:// or init_method=...
    result = ps.run(model_fn, data_fn, ps.PSConfig(num_ps=1, policy="tac", iters=10))

Ranks 0..num_ps-1 are parameter servers, the rest workers. See docs/ps-training.md.
"""

from .comm import PeerError
from .config import PSConfig
from .launch import DEFAULT_BACKEND, RankFailure, init_distributed, launch_local
from .planning import POLICIES, OrderPlan, record_order
from .priorities import Priorities
from .runtime import RunResult, run
from .sharding import pull_tag, push_tag, shard_by_bytes, unique_parameters
from .stats import IterationStats, ServerIterationStats, summarize, write_chrome_trace, write_json_lines

__all__ = ["DEFAULT_BACKEND", "PeerError", "PSConfig", "RankFailure", "init_distributed", "launch_local", "POLICIES",
           "OrderPlan", "record_order", "Priorities", "RunResult", "run", "pull_tag", "push_tag",
           "shard_by_bytes", "unique_parameters", "IterationStats", "ServerIterationStats", "summarize",
           "write_chrome_trace", "write_json_lines"]
