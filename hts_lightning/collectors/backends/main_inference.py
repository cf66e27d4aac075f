"""Inference in this process: one engine acts for every replica, batched over the ready
ones, in a collection thread (or, serial, in the caller's thread); an executor steps them:
worker processes, this thread, or an envpool (the GPU choice, and ``num_workers=0``)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

import torch
from tensordict import TensorDictBase

from hts_lightning.collectors.backends.protocols import CollectingBackend, Executor
from hts_lightning.collectors.core.engine import CollectionEngine


class MainInference(CollectingBackend):
    """The collection engine in this process over an executor that steps the replicas."""

    def __init__(
        self,
        *,
        executor: Executor,
        engine: CollectionEngine,
        storages: list[TensorDictBase],
        uniforms: list[torch.Tensor | None],
        threaded: bool,
    ):
        self._executor = executor
        self._ends: list = [[], []]  # batch_ends

        def collect(index: int) -> None:  # holds no reference to this object or the collector
            engine.collect(storages[index], uniforms[index])
            ends[:] = executor.batch_ends()

        ends = self._ends
        self._collection = ThreadCollection(collect) if threaded else InlineCollection(collect)

    def start(self) -> None:
        self._executor.start()

    def start_batch(self, index: int) -> None:
        self._collection.start(index)

    def wait(self) -> None:
        self._collection.wait()

    def batch_ends(self) -> tuple[list, list]:
        return tuple(self._ends)

    def stop(self) -> None:
        # Workers end first (the collection thread then sees them gone), the thread is
        # joined, and only then are the pipes (or the pool) closed under it.
        self._collection.request_stop()
        self._executor.stop_workers()
        self._collection.join()
        self._executor.close()


class InlineCollection:
    """Collects a requested batch in the caller's thread when it is waited for (serial mode)."""

    def __init__(self, collect: Callable[[int], None]):
        self._collect = collect
        self._request = None

    def start(self, index: int) -> None:
        self._request = index

    def wait(self) -> None:
        index, self._request = self._request, None
        self._collect(index)

    def request_stop(self) -> None:
        self._request = None

    def join(self, timeout: float = 5.0) -> None:
        return None


class ThreadCollection:
    """Collects each requested batch in a background thread, overlapping the consumer's work."""

    def __init__(self, collect: Callable[[int], None]):
        self._collect = collect
        self._requests: queue.Queue = queue.Queue()
        self._results: queue.Queue = queue.Queue()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="hts-collection", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            index = self._requests.get()
            if index is None:
                return
            # A new thread's OpenMP and MKL thread counts are the platform's default, not the
            # process's torch.set_num_threads: a BLAS call on more threads splits a chunk's
            # rows otherwise and rounds them otherwise (on an AMD EPYC, rows 4-5 of 6).
            torch.set_num_threads(torch.get_num_threads())
            try:
                self._collect(index)
                self._results.put(None)
            except BaseException as error:  # handed to the consumer, who raises it
                if not self._stopping.is_set():
                    self._results.put(error)
                return

    def start(self, index: int) -> None:
        self._requests.put(index)

    def wait(self) -> None:
        while True:
            try:
                error = self._results.get(timeout=0.5)
            except queue.Empty:
                if not self._thread.is_alive() and self._results.empty():
                    raise RuntimeError("The HTSCollector collection thread stopped.") from None
                continue
            if error is not None:
                raise error
            return

    def request_stop(self) -> None:
        """Ask the thread to end after (or, once the executor closes, instead of) its batch."""
        self._stopping.set()
        self._requests.put(None)

    def join(self, timeout: float = 5.0) -> None:
        self._thread.join(timeout)
