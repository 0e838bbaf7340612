"""Waiting on point-to-point transfers with timeouts and errors that name the peer."""

from __future__ import annotations

import datetime
import queue
import threading
import time
from typing import Optional

__all__ = ["PeerError", "Transfer", "Watcher", "wait_work", "Context"]

now = time.perf_counter


class PeerError(RuntimeError):
    """A transfer with another rank failed or timed out.

    Attributes: rank (this process), peer (the other rank), what (the transfer)."""

    def __init__(self, message: str, *, rank: int = -1, peer: int = -1, what: str = ""):
        super().__init__(message)
        self.rank = rank
        self.peer = peer
        self.what = what


# How long a failing rank may spend on the store to publish or cite a failure. The store lives on
# rank 0's host: after a partition its TCP client blocks in recv() with no timeout of its own
# (found by the chaos suite's ps-partition case: the cut-off worker hung there for minutes).
STORE_GRACE_S = 2.0


def _bounded(fn, seconds: float):
    """fn() on a daemon thread; its result, or None when it raised or took longer than `seconds`
    (the thread is then abandoned, blocked in the store client)."""
    out = []

    def run():
        try:
            out.append(fn())
        except Exception:
            pass

    t = threading.Thread(target=run, name="tictac-store-grace", daemon=True)
    t.start()
    t.join(seconds)
    return out[0] if out else None


class Context:
    """Who we are, for messages, plus the store used to publish a failure's root cause."""

    def __init__(self, rank: int, num_ps: int, timeout: float, store=None):
        self.rank = rank
        self.num_ps = num_ps
        self.timeout = float(timeout)
        self.store = store

    def role(self, rank: int) -> str:
        return f"server {rank}" if rank < self.num_ps else f"worker {rank - self.num_ps}"

    def who(self, rank: int) -> str:
        return f"rank {rank} ({self.role(rank)})"

    # A failing rank writes its message under "abort/<rank>" so the others can cite it.
    def publish_failure(self, message: str) -> None:
        if self.store is None:
            return

        def publish():
            self.store.set(f"abort/{self.rank}", message)
            self.store.add("abort/count", 1)

        _bounded(publish, STORE_GRACE_S)

    def reported_failures(self) -> str:
        if self.store is None:
            return ""
        return _bounded(self._reported_failures, STORE_GRACE_S) or ""

    def _reported_failures(self) -> str:
        try:
            if self.store.add("abort/count", 0) <= 0:
                return ""
            import torch.distributed as dist
            world = dist.get_world_size()
        except Exception:
            return ""
        notes = []
        for r in range(world):
            if r == self.rank:
                continue
            try:
                if self.store.check([f"abort/{r}"]):
                    notes.append(self.store.get(f"abort/{r}").decode(errors="replace"))
            except Exception:
                continue
        return "; ".join(notes)

    def error(self, what: str, peer: int, cause: Optional[BaseException], started: float,
              timed_out: bool = False) -> PeerError:
        elapsed = now() - started
        if timed_out:
            detail = f"timed out after {elapsed:.1f} s (timeout {self.timeout:g} s)"
        else:
            detail = f"failed after {elapsed:.1f} s: {cause}"
        msg = f"{self.who(self.rank)}: {what} {_dir(what)} {self.who(peer)} {detail}"
        # Give the root cause if another rank already reported one (e.g. the server that saw
        # the dead worker).
        time.sleep(0.05)
        others = self.reported_failures()
        if others:
            msg += f" [reported by others: {others}]"
        return PeerError(msg, rank=self.rank, peer=peer, what=what)


def _dir(what: str) -> str:
    return "to" if what.startswith(("send", "push")) else "from"


def wait_work(ctx: Context, work, what: str, peer: int, timeout: Optional[float] = None) -> None:
    """work.wait with the context's timeout; any failure -> PeerError naming the peer."""
    t = ctx.timeout if timeout is None else timeout
    started = now()
    try:
        ok = work.wait(datetime.timedelta(seconds=t))
    except Exception as e:  # gloo: "Connection closed by peer", "Timed out waiting ..."
        timed_out = "timed out" in str(e).lower() or "timeout" in str(e).lower()
        raise ctx.error(what, peer, e, started, timed_out=timed_out and now() - started >= t * 0.9) from e
    if ok is False:
        raise ctx.error(what, peer, None, started, timed_out=True)


class Transfer:
    """One posted transfer: its work, when it was posted and when it completed."""

    __slots__ = ("work", "peer", "what", "posted", "done_at", "error", "event", "key", "payload", "on_done")

    def __init__(self, work, peer: int, what: str, key=None, payload=None, on_done=None):
        self.work = work
        self.peer = peer
        self.what = what
        self.key = key
        self.payload = payload      # keeps a send buffer alive until completion
        self.on_done = on_done      # called with the Transfer once complete (any thread)
        self.posted = now()
        self.done_at: Optional[float] = None
        self.error: Optional[BaseException] = None
        self.event = threading.Event()

    def _complete(self, error: Optional[BaseException] = None) -> None:
        if self.done_at is None:
            self.done_at = now()
        self.error = error
        self.event.set()
        if self.on_done is not None:
            self.on_done(self)

    def wait(self, ctx: Context) -> None:
        """Block until complete (with the context's timeout); raise PeerError on failure."""
        if not self.event.is_set():
            if not self.event.wait(ctx.timeout):
                raise ctx.error(self.what, self.peer, None, self.posted, timed_out=True)
        if self.error is not None:
            if isinstance(self.error, PeerError):
                raise self.error
            raise ctx.error(self.what, self.peer, self.error, self.posted) from self.error


class Watcher:
    """Completes Transfers and timestamps them.

    With a backend whose Work has a future (``work.get_future()``) the timestamp comes from the
    future's callback, i.e. the arrival itself. Otherwise (gloo p2p has no futures) one thread
    waits the transfers in the order they were handed over (``work.wait`` releases the GIL), so
    a timestamp is exact for in-order completions and an upper bound otherwise. Only the watcher
    ever calls ``work.wait`` on a watched transfer (two waiters on one gloo work would break it).
    """

    def __init__(self, ctx: Context, name: str):
        self.ctx = ctx
        self.name = name
        self.uses_futures: Optional[bool] = None
        self._q: "queue.Queue" = queue.Queue()
        self._thread: Optional[threading.Thread] = None

    @property
    def source(self) -> str:
        return "future" if self.uses_futures else "watcher-thread"

    def watch(self, t: Transfer) -> Transfer:
        if self.uses_futures is not False:
            try:
                fut = t.work.get_future()
            except Exception:
                self.uses_futures = False
            else:
                self.uses_futures = True

                def done(f, t=t):
                    try:
                        f.value()
                    except Exception as e:
                        t._complete(e)
                    else:
                        t._complete()
                fut.add_done_callback(done)
                return t
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"tictac-ps-{self.name}", daemon=True)
            self._thread.start()
        self._q.put(t)
        return t

    def _run(self) -> None:
        failed: Optional[BaseException] = None
        while True:
            t = self._q.get()
            if t is None:
                return
            if failed is not None:          # after one failure, fail the rest at once
                t._complete(failed)
                continue
            try:
                wait_work(self.ctx, t.work, t.what, t.peer)
            except BaseException as e:
                failed = e
                t._complete(e)
            else:
                t._complete()

    def close(self) -> None:
        if self._thread is not None:
            self._q.put(None)
            self._thread.join(timeout=1.0)
            self._thread = None
