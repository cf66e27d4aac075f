"""Replica executors: step env replicas in this process or in worker processes.

Both executors offer the same three calls to the collection engine: ``send(ids)`` asks for one
step of each listed replica (the action is already in the shared slots), ``wait_ready()`` blocks
until at least one asked-for step has finished and returns every finished replica, and
``close()``. Step results go straight into the shared slots, indexed by replica; the pipes only
carry replica indices, so arrival order never touches the data.
"""

from __future__ import annotations

import contextlib
import pickle
import signal
import struct
import time
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.connection import wait as wait_any

import numpy as np
import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey
from torchrl.envs import EnvBase

from hts_lightning.collectors.errors import EnvReplicaError, WorkerDiedError

_READY, _STEPPED, _ERROR, _CLOSE = b"R", b"S", b"E", b"C"
_POLL_SECONDS = 0.5


class _ReplicaStepper:
    """Owns some replicas' envs; steps one replica at a time through the shared slots."""

    def __init__(
        self,
        slots: TensorDictBase,
        root_keys: Sequence[NestedKey],
        action_keys: Sequence[NestedKey],
    ):
        self._slots = slots
        self._root_keys = list(root_keys)
        self._action_keys = list(action_keys)
        self._next_keys = list(slots["next"].keys(True, True))
        self.envs: dict[int, EnvBase] = {}
        self._roots: dict[int, TensorDictBase] = {}
        self._slot_views: dict[int, TensorDictBase] = {}
        self.current_replica = -1

    def add(self, replica: int, create_env_fn: Callable[[], EnvBase], seed: int) -> None:
        """Create, seed and reset one replica, publishing its first observation."""
        self.current_replica = replica
        env = create_env_fn()
        self.envs[replica] = env
        env.set_seed(seed)
        self._slot_views[replica] = self._slots[replica]
        self._publish_root(replica, env.reset())

    def _publish_root(self, replica: int, root: TensorDictBase) -> None:
        root = root.select(*self._root_keys)
        self._roots[replica] = root
        self._slot_views[replica]["root"].update_(root)

    def step(self, replica: int) -> None:
        self.current_replica = replica
        view = self._slot_views[replica]
        td = self._roots[replica].clone(False).update(view["action"].clone())
        stepped, root = self.envs[replica].step_and_maybe_reset(td)
        view["next"].update_(stepped["next"].select(*self._next_keys))
        self._publish_root(replica, root)

    def close(self) -> None:
        for env in self.envs.values():
            with contextlib.suppress(Exception):  # best effort: the process is going away
                env.close()
        self.envs.clear()


def _worker_main(
    create_env_fns: dict[int, Callable[[], EnvBase]],
    seeds: dict[int, int],
    slots: TensorDictBase,
    root_keys: list[NestedKey],
    action_keys: list[NestedKey],
    conn,
) -> None:
    # Ctrl-C goes to the whole process group: the parent decides how to stop, not the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)
    stepper = _ReplicaStepper(slots, root_keys, action_keys)
    try:
        for replica, create_env_fn in create_env_fns.items():
            stepper.add(replica, create_env_fn, seeds[replica])
        conn.send_bytes(_READY)
        while True:
            message = conn.recv_bytes()
            if message == _CLOSE:
                break
            for replica in np.frombuffer(message, dtype=np.int32).tolist():
                stepper.step(replica)
                conn.send_bytes(_STEPPED + struct.pack("i", replica))
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass  # the parent is gone: nobody is left to tell
    except Exception:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            conn.send_bytes(
                _ERROR + pickle.dumps((stepper.current_replica, traceback.format_exc()))
            )
    finally:
        stepper.close()
        conn.close()


class InlineExecutor:
    """Steps every replica in the calling process, in the order asked: the serial mode."""

    def __init__(self, *, create_env_fns, seeds, slots, root_keys, action_keys):
        self._create_env_fns = create_env_fns
        self._seeds = seeds
        self._stepper = _ReplicaStepper(slots, root_keys, action_keys)
        self._queue: list[int] = []

    def start(self) -> None:
        for replica, (create_env_fn, seed) in enumerate(zip(self._create_env_fns, self._seeds)):
            try:
                self._stepper.add(replica, create_env_fn, seed)
            except Exception as error:
                raise EnvReplicaError(replica, traceback.format_exc()) from error

    def send(self, replicas: np.ndarray) -> None:
        self._queue.extend(replicas.tolist())

    def wait_ready(self) -> np.ndarray:
        stepped, self._queue = self._queue, []
        for replica in stepped:
            try:
                self._stepper.step(replica)
            except Exception as error:
                raise EnvReplicaError(replica, traceback.format_exc()) from error
        return np.asarray(stepped, dtype=np.int64)

    def close(self, timeout: float = 5.0) -> None:
        self._stepper.close()


class ProcessExecutor:
    """Steps contiguous blocks of replicas in ``num_workers`` processes, each at its own pace."""

    def __init__(
        self, *, create_env_fns, seeds, slots, root_keys, action_keys, num_workers, mp_context
    ):
        num_envs = len(create_env_fns)
        self._blocks = np.array_split(np.arange(num_envs), num_workers)
        self._owner = np.concatenate(
            [np.full(len(b), w, dtype=np.int64) for w, b in enumerate(self._blocks)]
        )
        self._create_env_fns = create_env_fns
        self._seeds = seeds
        self._slots = slots
        self._keys = (list(root_keys), list(action_keys))
        self._context = mp_context
        self._processes = []
        self._conns = []

    @property
    def processes(self) -> list:
        return list(self._processes)

    def start(self, timeout: float = 300.0) -> None:
        for block in self._blocks:
            parent, child = self._context.Pipe(duplex=True)
            fns = {int(i): self._create_env_fns[i] for i in block}
            seeds = {int(i): self._seeds[i] for i in block}
            process = self._context.Process(
                target=_worker_main,
                args=(fns, seeds, self._slots, *self._keys, child),
                daemon=True,
                name=f"hts-worker-{len(self._processes)}",
            )
            process.start()
            child.close()
            self._processes.append(process)
            self._conns.append(parent)
        deadline = time.monotonic() + timeout
        for worker, conn in enumerate(self._conns):
            while not conn.poll(_POLL_SECONDS):
                self._check_alive(worker)
                if time.monotonic() > deadline:
                    raise TimeoutError(f"Collector worker {worker} did not start in {timeout} s")
            try:
                self._handle(worker, conn.recv_bytes(), [])
            except (EOFError, ConnectionResetError):
                self._processes[worker].join(1.0)
                self._check_alive(worker)
                raise

    def _check_alive(self, worker: int) -> None:
        process = self._processes[worker]
        if not process.is_alive() and not self._conns[worker].poll():
            raise WorkerDiedError(worker, self._blocks[worker].tolist(), process.exitcode)

    def _handle(self, worker: int, message: bytes, stepped: list[int]) -> None:
        kind = message[:1]
        if kind == _STEPPED:
            stepped.append(struct.unpack("i", message[1:])[0])
        elif kind == _ERROR:
            replica, env_traceback = pickle.loads(message[1:])
            raise EnvReplicaError(replica, env_traceback)

    def send(self, replicas: np.ndarray) -> None:
        owners = self._owner[replicas]
        for worker in np.unique(owners).tolist():
            ids = replicas[owners == worker].astype(np.int32)
            try:
                self._conns[worker].send_bytes(ids.tobytes())
            except (BrokenPipeError, ConnectionResetError):
                self._check_alive(worker)
                raise

    def wait_ready(self) -> np.ndarray:
        stepped: list[int] = []
        sentinels = {p.sentinel: w for w, p in enumerate(self._processes)}
        readers = {c: w for w, c in enumerate(self._conns)}
        while not stepped:
            for ready in wait_any([*readers, *sentinels], timeout=_POLL_SECONDS):
                if ready in sentinels:
                    worker = sentinels[ready]
                    self._drain(worker, stepped)
                    self._check_alive(worker)
                else:
                    self._drain(readers[ready], stepped)
        return np.asarray(stepped, dtype=np.int64)

    def _drain(self, worker: int, stepped: list[int]) -> None:
        conn = self._conns[worker]
        try:
            while conn.poll():
                self._handle(worker, conn.recv_bytes(), stepped)
        except (EOFError, ConnectionResetError):
            process = self._processes[worker]
            process.join(1.0)
            raise WorkerDiedError(worker, self._blocks[worker].tolist(), process.exitcode) from None

    def close(self, timeout: float = 5.0) -> None:
        for conn in self._conns:
            with contextlib.suppress(OSError, ValueError):
                conn.send_bytes(_CLOSE)
        deadline = time.monotonic() + timeout
        for process in self._processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join(1.0)
        for conn in self._conns:
            conn.close()
        self._processes, self._conns = [], []
