"""Dynamic batching: questions of concurrent requests gathered into one batched forward pass.

A request waits in a bounded queue. One worker takes the oldest request, and with it every queued request
that shares its settings (`drkit.serve.engine.Request`: the same top_k, hops and chain), oldest first, up
to `max_batch` questions; if fewer than `max_batch` questions are queued it waits for more, but never longer
than `max_wait_ms` after the oldest request arrived. The batch then runs on one worker thread (the model
computes one batch at a time, with all of torch's threads), while the event loop goes on reading requests
and writing responses. So a lone request waits at most `max_wait_ms` more than at batch 1, and under load
the batches fill up to `max_batch`.

A batch's answers are those of each question alone: the question encoder computes each question at a width
that depends only on its own length (`drkit.reason.question_encoder.length_groups`) and the follow works
row by row; requests with other settings never share a batch.

When the queue holds `max_queue` questions, `submit` raises `QueueFull` at once (the server answers 503
with Retry-After) instead of letting work pile up without bound. A request whose caller has gone (its
future cancelled: the client disconnected) is dropped from the queue before its batch is computed. A batch
that raises is run again request by request, so that only a request that fails alone gets the error.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Hashable, Sequence


class QueueFull(Exception):
    """The queue holds as many questions as it may; try again later."""


class NotRunning(Exception):
    """The batcher has not started, or is stopping: it takes no new work."""


@dataclass
class _Pending:
    key: Hashable
    items: Sequence
    future: asyncio.Future
    arrived: float = field(default_factory=time.perf_counter)


@dataclass
class BatchStats:
    batches: int = 0
    questions: int = 0
    largest: int = 0
    rejected: int = 0
    abandoned: int = 0  # requests whose client left before their batch
    failed: int = 0  # batches that raised (each of their requests then ran alone)


class Batcher:
    """Gathers `submit` calls into calls of ``run(key, items) -> results`` (one result per item, in order)."""

    def __init__(self, run: Callable[[Hashable, list], list], max_batch: int = 64, max_wait_ms: float = 5.0,
                 max_queue: int = 1024, observe: Callable[[int, float], None] | None = None):
        """`observe(items, seconds)` is called after each batch that answered (the server's metrics)."""
        if max_batch < 1 or not 0 <= max_wait_ms < float("inf") or max_queue < max_batch:
            raise ValueError("max_batch must be at least 1, max_wait_ms a finite number of at least 0 and max_queue at "
                             "least max_batch")
        self.run, self.max_batch, self.max_wait, self.max_queue = run, max_batch, max_wait_ms / 1000, max_queue
        self.observe = observe
        self.stats = BatchStats()
        self._pending: deque[_Pending] = deque()
        self._queued = 0  # questions waiting, not yet in a running batch
        self._running = 0  # questions in the batch being computed
        self._in_hand: list[_Pending] = []  # the requests of that batch
        self._arrived: asyncio.Event | None = None
        self._worker: asyncio.Task | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._closing = False

    @property
    def busy(self) -> int:
        """Questions queued or being answered."""
        return self._queued + self._running

    async def start(self) -> None:
        self._arrived = asyncio.Event()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="drkit-batch")
        self._worker = asyncio.get_running_loop().create_task(self._work())

    async def stop(self, timeout_s: float | None = None) -> None:
        """Answer everything queued, then stop the worker; after `timeout_s` seconds (None: no limit), the
        requests still waiting get `NotRunning` instead, and the batch being computed is left to its thread
        (whose engine the caller then closes: a model process is stopped, which ends the batch)."""
        self._closing = True
        if self._arrived is not None:
            self._arrived.set()
        if self._worker is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._worker), timeout_s)
            except asyncio.TimeoutError:
                self.refuse_all()  # the batch being computed too: its thread is left to the caller
                self._worker.cancel()
                self._executor.shutdown(wait=False)
                return
        if self._executor is not None:
            self._executor.shutdown(wait=True)

    def refuse_all(self) -> None:
        """Give every request waiting, and those of the batch being computed, `NotRunning` now (a drain's
        deadline: their callers answer 503 while they still can); the worker goes on."""
        for p in [*self._pending, *self._in_hand]:
            if not p.future.done():
                p.future.set_exception(NotRunning("the server stopped before this request was answered"))
        self._pending.clear()
        self._queued = 0

    async def submit(self, key: Hashable, items: Sequence) -> list:
        """The results of `items`, computed in a batch with other requests of the same `key`."""
        if self._worker is None or self._closing:
            raise NotRunning("the batcher is not running")
        if self._queued + len(items) > self.max_queue:
            self.stats.rejected += 1
            raise QueueFull(f"{self._queued} questions are waiting (at most {self.max_queue})")
        pending = _Pending(key, items, asyncio.get_running_loop().create_future())
        self._pending.append(pending)
        self._queued += len(items)
        self._arrived.set()
        try:
            return await pending.future
        except asyncio.CancelledError:  # the caller has gone: its questions leave the queue now
            if pending in self._pending:
                self._pending.remove(pending)
                self._queued -= len(pending.items)
                self.stats.abandoned += 1
            raise

    def _drop_abandoned(self) -> None:
        """Forget the requests whose caller has gone (its future cancelled: a client that disconnected)."""
        for p in [p for p in self._pending if p.future.done()]:
            self._pending.remove(p)
            self._queued -= len(p.items)
            self.stats.abandoned += 1

    def _take(self) -> list[_Pending]:
        """The oldest request and the queued ones that share its key, up to `max_batch` questions (a request
        larger than `max_batch` goes alone)."""
        first = self._pending[0]
        taken, size = [], 0
        for p in list(self._pending):
            if p.key != first.key:
                continue
            if taken and size + len(p.items) > self.max_batch:
                break
            taken.append(p)
            size += len(p.items)
        for p in taken:
            self._pending.remove(p)
        return taken

    def _ready(self) -> int:
        key = self._pending[0].key
        return sum(len(p.items) for p in self._pending if p.key == key)

    async def _work(self) -> None:
        while True:
            self._drop_abandoned()
            if not self._pending:
                if self._closing:
                    return
                self._arrived.clear()
                await self._arrived.wait()
                continue
            deadline = self._pending[0].arrived + self.max_wait
            while not self._closing and self._ready() < self.max_batch:
                left = deadline - time.perf_counter()
                if left <= 0:
                    break
                self._arrived.clear()
                try:
                    await asyncio.wait_for(self._arrived.wait(), left)
                except asyncio.TimeoutError:
                    break
            self._drop_abandoned()
            if not self._pending:
                continue
            batch = self._take()
            items = [x for p in batch for x in p.items]
            self._queued -= len(items)
            self._running, self._in_hand = len(items), batch
            try:
                await self._answer(batch, items)
            finally:
                self._running, self._in_hand = 0, []

    async def _call(self, key: Hashable, items: list) -> list:
        results = await asyncio.get_running_loop().run_in_executor(self._executor, self.run, key, items)
        if len(results) != len(items):
            raise RuntimeError(f"the batch of {len(items)} questions gave {len(results)} results")
        return results

    async def _answer(self, batch: list[_Pending], items: list) -> None:
        """Run `batch` and resolve its futures. A batch that raises is run again request by request, so that
        only the request that fails alone gets the error: a request's outcome never depends on its batch."""
        t0 = time.perf_counter()
        try:
            results = await self._call(batch[0].key, items)
        except Exception as exc:
            self.stats.failed += 1
            if len(batch) == 1:
                if not batch[0].future.done():
                    batch[0].future.set_exception(exc)
                return
            for p in batch:
                if not p.future.done():
                    await self._answer([p], list(p.items))
            return
        start = 0
        for p in batch:
            if not p.future.done():  # a client that went away has cancelled its future
                p.future.set_result(results[start:start + len(p.items)])
            start += len(p.items)
        self.stats.batches += 1
        self.stats.questions += len(items)
        self.stats.largest = max(self.stats.largest, len(items))
        if self.observe is not None:
            self.observe(len(items), time.perf_counter() - t0)
