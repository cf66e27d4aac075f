"""Worker processes with pipes: start, message, detect death, close. No data goes through here.

Messages are short byte strings; a worker reports an exception as ``ERROR`` + pickled
(replica, traceback) and the pool raises it as :class:`EnvReplicaError` in the parent.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import os
import pickle
import signal
import sys
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import wait as wait_any
from pathlib import Path

import numpy as np
import torch
import torch.multiprocessing as mp

from hts_lightning.collectors.errors import EnvReplicaError, WorkerDiedError

READY, STEPPED, DONE, ERROR, CLOSE = b"R", b"S", b"D", b"E", b"C"
POLL_SECONDS = 0.5
#: What the forkserver imports once (torch, TorchRL, every backend): each worker is then a
#: cheap fork of it. ``hts-rl`` starts the server early with the same module.
PRELOAD = "hts_lightning.collectors.backends.table"


def mp_context(method: str):
    """The multiprocessing context of the worker processes."""
    context = mp.get_context(method)
    if method == "forkserver":
        context.set_forkserver_preload([PRELOAD])
    return context


def prepare_worker_process(niceness: int, *, batch_scheduling: bool = True) -> None:
    """Settings every worker process starts with."""
    # Ctrl-C goes to the whole process group: the parent decides how to stop, not the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)
    if batch_scheduling and hasattr(os, "SCHED_BATCH"):
        # Linux's batch policy (no privileges needed): a worker woken from its env's sleep
        # does not preempt a running one mid-step, so more workers than cores switch less
        # and refill their caches less often (8 sleeping-env workers on 2 cores: ~15% more
        # frames/s, benchmarks/RESULTS.md); the learner, a normal process, still preempts
        # them. Timing only, never the data.
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    if niceness:
        os.nice(niceness)  # the learner first: see HTSCollector's worker_niceness


def receive(conn) -> bytes | None:
    """Called in a worker: the next message, or None once the parent is gone or says CLOSE."""
    try:
        message = conn.recv_bytes()
    except (EOFError, OSError):
        return None
    return None if message == CLOSE else message


def send(conn, message: bytes) -> bool:
    """Called in a worker: False once the parent is gone."""
    try:
        conn.send_bytes(message)
    except OSError:
        return False
    return True


def report_error(conn, replica: int | None, env_traceback: str) -> None:
    """Called in a worker: tell the parent which replica failed (None: not an env) and how."""
    with contextlib.suppress(BrokenPipeError, ConnectionResetError, OSError):
        conn.send_bytes(ERROR + pickle.dumps((replica, env_traceback)))


_NO_GUARD = (
    "It was starting, and {} has no 'if __name__ == \"__main__\":' block: a worker "
    "process imports the main script again, so the script's top-level code ran in it and "
    "started collectors there. Move the script's code into a function called under that block."
)


def _script_without_main_guard(start_method: str) -> str | None:
    """The main script's path when ``start_method`` re-imports it in every new process
    (spawn, forkserver) and its top level has no ``if __name__ == "__main__":`` block."""
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    if start_method == "fork" or path is None or not path.endswith(".py"):
        return None
    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        test = ast.unparse(node.test) if isinstance(node, ast.If) else ""
        if "__name__" in test and "__main__" in test:
            return None
    return path


class WorkerPool:
    """``len(blocks)`` processes; worker w owns the replicas in ``blocks[w]``."""

    def __init__(self, blocks: Sequence[np.ndarray], mp_context):
        self.blocks = [np.asarray(b) for b in blocks]
        self._context = mp_context
        self._processes = []
        self._conns = []

    def start(self, target: Callable, per_replica: tuple, common: dict, timeout: float) -> None:
        """Start every worker as ``target(block, *its entries of each list in per_replica,
        conn, **common)``, ``block`` being its replicas, and wait for each one's READY."""
        # A wrong argument raises here, named, not in a child reported as a dead worker.
        inspect.signature(target).bind(None, *per_replica, None, **common)
        for worker, block in enumerate(self.blocks):
            block = block.tolist()
            mine = [[entries[i] for i in block] for entries in per_replica]
            parent, child = self._context.Pipe(duplex=True)
            process = self._context.Process(
                target=target,
                args=(block, *mine, child),
                kwargs=common,
                daemon=True,
                name=f"hts-worker-{worker}",
            )
            process.start()
            child.close()
            self._processes.append(process)
            self._conns.append(parent)
        deadline = time.monotonic() + timeout
        try:
            for worker, conn in enumerate(self._conns):
                while not conn.poll(POLL_SECONDS):
                    if not self._processes[worker].is_alive() and not conn.poll():
                        self._died(worker)
                    if time.monotonic() > deadline:
                        raise TimeoutError(
                            f"Collector worker {worker} did not start in {timeout} s"
                        )
                for message in self._drain(worker):
                    self._raise_if_error(message)
        except WorkerDiedError as error:
            script = _script_without_main_guard(self._context.get_start_method())
            if script is None:
                raise
            cause = _NO_GUARD.format(script)
            raise WorkerDiedError(error.worker, error.replicas, error.exitcode, cause) from None

    def send(self, worker: int, message: bytes) -> None:
        try:
            self._conns[worker].send_bytes(message)
        except (BrokenPipeError, ConnectionResetError):
            self._died(worker)

    def wait(self) -> list[tuple[int, bytes]]:
        """Block until at least one message arrives; return every available (worker, message).

        Raises :class:`EnvReplicaError` for an error report and :class:`WorkerDiedError` for a
        worker that ended, within ``POLL_SECONDS`` of it happening.
        """
        sentinels = {p.sentinel: w for w, p in enumerate(self._processes)}
        readers = {c: w for w, c in enumerate(self._conns)}
        received: list[tuple[int, bytes]] = []
        while not received:
            for ready in wait_any([*readers, *sentinels], timeout=POLL_SECONDS):
                worker = sentinels.get(ready, readers.get(ready))
                messages = self._drain(worker)
                if ready in sentinels and not messages:
                    self._died(worker)
                for message in messages:
                    self._raise_if_error(message)
                    received.append((worker, message))
        return received

    def _drain(self, worker: int) -> list[bytes]:
        conn, messages = self._conns[worker], []
        try:
            while conn.poll():
                messages.append(conn.recv_bytes())
        except (EOFError, ConnectionResetError):
            if not messages:
                self._died(worker)
        return messages

    def _raise_if_error(self, message: bytes) -> None:
        if message[:1] == ERROR:
            replica, env_traceback = pickle.loads(message[1:])
            if replica is None:
                raise RuntimeError(f"A collector worker raised:\n{env_traceback}")
            raise EnvReplicaError(replica, env_traceback)

    def _died(self, worker: int) -> None:
        process = self._processes[worker]
        process.join(1.0)
        raise WorkerDiedError(worker, self.blocks[worker].tolist(), process.exitcode)

    def stop(self, timeout: float = 5.0) -> None:
        """Ask every worker to close its envs and end; kill those still alive after ``timeout``.

        The pipes stay open, so a thread still waiting on them sees the workers end instead of
        reading a closed (or reused) file descriptor.
        """
        for conn in self._conns:
            with contextlib.suppress(OSError, ValueError):
                conn.send_bytes(CLOSE)
        deadline = time.monotonic() + timeout
        for process in self._processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join(1.0)

    def close(self, timeout: float = 5.0) -> None:
        self.stop(timeout)
        for conn in self._conns:
            conn.close()
        self._processes, self._conns = [], []
