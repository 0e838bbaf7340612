"""The server's queue of parameter updates that are ready to run (update="eager").

Contract: ``landed(key)`` is called (from any thread) once per gradient of a parameter;
when the parameter's last expected gradient has landed, it becomes ready. ``failed(t)`` makes a
failed transfer ready ahead of everything (the server then raises its error). ``get(timeout)``
returns the next ready item, blocking; it raises ``queue.Empty`` after ``timeout`` seconds.
Among ready parameters the one with the smallest rank goes first; a parameter without a rank
(``ranks`` empty: arrival order) ranks by when it became ready. Thread-safe.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Dict, Hashable

__all__ = ["ReadyUpdates"]


class ReadyUpdates:
    def __init__(self, expected: Dict[Hashable, int], ranks: Dict[Hashable, int]):
        self._left = dict(expected)        # key -> gradients still to land
        self._ranks = dict(ranks)          # key -> rank (smaller first); missing: arrival order
        self._lock = threading.Lock()
        self._seq = 0
        self._q: "queue.PriorityQueue" = queue.PriorityQueue()

    def landed(self, key: Hashable) -> None:
        with self._lock:
            self._seq += 1
            self._left[key] -= 1
            if self._left[key] == 0:
                self._q.put((self._ranks.get(key, self._seq), self._seq, False, key))

    def failed(self, item: Any) -> None:
        with self._lock:
            self._seq += 1
            self._q.put((-1, self._seq, True, item))

    def get(self, timeout: float):
        """(is_failure, item): the next ready parameter's key, or a failed transfer."""
        _, _, is_failure, item = self._q.get(timeout=timeout)
        return is_failure, item
