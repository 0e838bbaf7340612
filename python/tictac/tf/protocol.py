"""The wire protocol between tictac.tf workers and servers (ranks 0..S-1 are servers).

Tags (group user tags, one stream per rank pair and tag, in send order):
  CTRL      worker -> every server, int64 scalar per step: 1 = "send me parameters", 0 = done
  SPEC_LEN  first worker -> server: int64 scalar, the byte length of the JSON spec
  SPEC      first worker -> server: uint8[n], the spec (names, shapes, dtypes, graph)
  BYE       server -> worker, int64 scalar, once every worker sent CTRL 0 (so no worker exits,
            closing its connections, before the server has its last message)
  LINGER    never sent: the server waits on it until every worker has closed its connection
  param(i)  server -> worker: parameter i (global index); also first worker -> server once
            at start-up, the initial value
  grad(i)   worker -> server: the gradient of parameter i
Parameters are sharded over the servers greedily by bytes, in declaration order.
"""
from __future__ import annotations

import json
from typing import List, Sequence

import numpy as np
import tensorflow as tf

CTRL = 1
SPEC_LEN = 2
SPEC = 3
BYE = 4
LINGER = 5
_BASE = 1000


def param_tag(i: int) -> int:
    return _BASE + 2 * i


def grad_tag(i: int) -> int:
    return _BASE + 2 * i + 1


def shard(nbytes: Sequence[int], num_servers: int) -> List[int]:
    """Owner server per parameter: each goes to the least-loaded server so far."""
    load = [0] * num_servers
    owners = []
    for b in nbytes:
        s = min(range(num_servers), key=lambda k: (load[k], k))
        owners.append(s)
        load[s] += int(b)
    return owners


def encode_spec(spec: dict):
    raw = np.frombuffer(json.dumps(spec).encode(), dtype=np.uint8)
    return tf.constant(len(raw), tf.int64), tf.constant(raw, tf.uint8)


def decode_spec(tensor) -> dict:
    return json.loads(bytes(tensor.numpy().tobytes()).decode())
