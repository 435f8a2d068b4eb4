"""Dynamic batching for a served model: concurrent requests generated as one batch.

On CPU a batch of 8 costs little more than a single request, so a server pools requests that arrive
together; each request keeps its own seed, so batching never changes what a seeded request returns.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING

from coevo.llm.base import Completion, Message, SamplingParams, TextListener

if TYPE_CHECKING:  # torch is heavy: imported only when a model is actually served
    from coevo.llm.hf import HFBackend

log = logging.getLogger(__name__)


@dataclass
class _Pending:
    messages: Sequence[Message]
    sampling: SamplingParams
    result: Future[Completion]
    listener: TextListener | None


class DynamicBatcher:
    """Pools concurrent requests into one `generate_each` call.

    After the first request, it keeps collecting while requests keep coming (each within `gap_s` of
    the previous one), for at most `max_wait_s` and `max_batch` requests: clients that fire together
    are rarely more than a few ms apart, but on a busy machine a fixed short window splits them.
    Exactly one thread runs `run()` and owns the model, so generation never runs concurrently with
    itself. `coevo serve` runs it on the main thread, where the same batches ran faster than in a
    spawned thread (experiments/bench/RESULTS.md, LLM layer); `start()` spawns one instead, for
    embedding the server elsewhere.
    """

    def __init__(self, backend: HFBackend, gap_s: float = 0.05, max_wait_s: float = 0.5, max_batch: int = 16) -> None:
        self.backend = backend
        self.gap_s = gap_s
        self.max_wait_s = max_wait_s
        self.max_batch = max_batch
        self._queue: queue.Queue[_Pending | None] = queue.Queue()
        self._worker: threading.Thread | None = None

    def submit(
        self, messages: Sequence[Message], sampling: SamplingParams, listener: TextListener | None = None
    ) -> Future[Completion]:
        """Queue one request; its future resolves when its batch is done. `listener`, if given, receives
        the answer's text in deltas as it is decoded (on the batching thread), all of it before the
        future resolves."""
        pending = _Pending(messages, sampling, Future(), listener)
        self._queue.put(pending)
        return pending.result

    def start(self) -> None:
        """Run the batches in a daemon thread."""
        self._worker = threading.Thread(target=self.run, name="coevo-batcher", daemon=True)
        self._worker.start()

    def close(self) -> None:
        """Let run() finish the batch in progress and return."""
        self._queue.put(None)
        if self._worker is not None:
            self._worker.join()

    def run(self) -> None:
        """Generate batches until close()."""
        while (first := self._queue.get()) is not None:
            batch, closing = self._collect(first)
            log.debug("generating a batch of %d", len(batch))
            try:
                completions = self.backend.generate_each(
                    [(p.messages, p.sampling) for p in batch], [p.listener for p in batch]
                )
            except Exception as exc:  # one bad batch must not kill the server: every waiter gets the error
                log.exception("generation failed")
                for pending in batch:
                    pending.result.set_exception(exc)
            else:
                for pending, completion in zip(batch, completions, strict=True):
                    pending.result.set_result(completion)
            if closing:
                return

    def _collect(self, first: _Pending) -> tuple[list[_Pending], bool]:
        """The first request plus those that follow it closely; True if close() was seen."""
        batch = [first]
        give_up = time.monotonic() + self.max_wait_s
        while len(batch) < self.max_batch:
            wait = min(self.gap_s, give_up - time.monotonic())
            try:
                pending = self._queue.get(timeout=max(0.0, wait))
            except queue.Empty:
                break
            if pending is None:
                return batch, True
            batch.append(pending)
        return batch, False
