"""Replicas as TorchRL envs stepped one at a time in this process, through the shared slots
(the serial mode's executor, and each stepping worker's), and the executor a worker process
builds for its own block: that, or an envpool."""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase
from torchrl.envs import EnvBase

from hts_lightning.collectors.backends.envpool import EnvpoolExecutor
from hts_lightning.collectors.backends.protocols import Executor
from hts_lightning.collectors.core.layout import Layout
from hts_lightning.collectors.core.seeding import restart_seed
from hts_lightning.collectors.core.views import numpy_view
from hts_lightning.collectors.errors import EnvReplicaError
from hts_lightning.envs._shared import GAME_OVER
from hts_lightning.envs.snapshot import load_env_state, save_env_state

#: (next root TensorDict, env state or None): a replica between two batches.
ReplicaState = tuple[TensorDictBase, Any]
#: (replica, traceback) of an env error that ``on_env_error="restart"`` recovered from.
Restart = tuple[int, str]
#: A replica that keeps failing is a bug, not bad luck: past this many restarts it raises.
MAX_RESTARTS_PER_REPLICA = 100


class ReplicaStepper:
    """Owns some replicas' envs; steps one replica at a time through the shared slots.

    With ``on_env_error="restart"`` a step that raises restarts the replica's env as
    HTSCollector's ``on_env_error`` says, the failed step written as a truncation (so
    advantages bootstrap from the critic there and the episode's return is logged as it
    stood); the restarts are kept in :attr:`restarts` for the collector to log.
    """

    def __init__(self, slots: TensorDictBase, layout: Layout, on_env_error: str = "raise"):
        self._slots = slots
        self._root_keys = layout.root_keys
        self._action_keys = layout.action_keys
        self._next_keys = list(slots["next"].keys(True, True))
        # numpy views of the slots' tensors (the same memory), read and written row by row: a
        # step builds no TensorDict views, and a numpy row copy costs a fraction of torch's
        # indexed assignment (~15 of them a step).
        self._slot_root = [numpy_view(slots["root"].get(k), k) for k in self._root_keys]
        self._slot_next = [numpy_view(slots["next"].get(k), k) for k in self._next_keys]
        self._slot_action = [numpy_view(slots["action"].get(k), k) for k in self._action_keys]
        self._on_env_error = on_env_error
        self.envs: dict[int, EnvBase] = {}
        self._factories: dict[int, tuple[Callable[[], EnvBase], int]] = {}
        self._restart_counts: dict[int, int] = {}
        self.restarts: list[Restart] = []
        self._roots: dict[int, TensorDictBase] = {}
        self.current_replica = -1

    def add(
        self,
        replica: int,
        create_env_fn: Callable[[], EnvBase],
        seed: int,
        state: ReplicaState | None = None,
    ) -> None:
        """Create and seed one replica, then reset it (or put it in ``state``, on resume),
        publishing its first observation."""
        self.current_replica = replica
        env = create_env_fn()
        self.envs[replica] = env
        self._factories[replica] = (create_env_fn, seed)
        env.set_seed(seed)
        if state is None:
            self._publish_root(replica, env.reset())
        else:
            root, env_state = state
            load_env_state(env, env_state)
            self._publish_root(replica, root)

    def state(self, replica: int) -> ReplicaState:
        """What puts the replica back here: the observation it acts on next and the env's
        internal state (``None`` for an env that cannot save it)."""
        return self._roots[replica].clone(), save_env_state(self.envs[replica])

    def _publish_root(self, replica: int, root: TensorDictBase) -> None:
        root = root.select(*self._root_keys)
        self._roots[replica] = root
        for key, slot in zip(self._root_keys, self._slot_root, strict=True):
            slot[replica] = root.get(key).numpy()

    def step(self, replica: int) -> None:
        self.current_replica = replica
        td = self._roots[replica].clone(False)
        for key, slot in zip(self._action_keys, self._slot_action, strict=True):
            # np.array copies the row, a 0-d one (an index action) included: a numpy scalar
            # has no .copy() that torch.from_numpy takes.
            td.set(key, torch.from_numpy(np.array(slot[replica])))
        try:
            stepped, root = self.envs[replica].step_and_maybe_reset(td)
        except Exception:
            if self._on_env_error != "restart":
                raise
            self._restart(replica, traceback.format_exc())
            return
        step = stepped.get("next")
        for key, slot in zip(self._next_keys, self._slot_next, strict=True):
            slot[replica] = step.get(key).numpy()
        self._publish_root(replica, root)

    def _restart(self, replica: int, env_traceback: str) -> None:
        count = self._restart_counts.get(replica, 0) + 1
        if count > MAX_RESTARTS_PER_REPLICA:
            raise RuntimeError(
                f"The env failed again after {MAX_RESTARTS_PER_REPLICA} restarts of this "
                f"replica (on_env_error='restart'); giving up. Its last error:\n{env_traceback}"
            )
        self._restart_counts[replica] = count
        self.restarts.append((replica, env_traceback))
        root = self._roots[replica]
        root_keys = set(root.keys(True, True))
        slot = self._slots[replica]["next"]
        for key in self._next_keys:
            value, name = slot.get(key), key[-1] if isinstance(key, tuple) else key
            if name in ("done", "truncated", GAME_OVER):  # the abandoned game ends here
                value.fill_(True)
            elif name != "terminated" and key in root_keys:
                value.copy_(root.get(key))
            else:
                value.zero_()
        with contextlib.suppress(Exception):  # the broken env may fail to close too
            self.envs[replica].close()
        create_env_fn, seed = self._factories[replica]
        env = create_env_fn()
        self.envs[replica] = env
        env.set_seed(restart_seed(seed, count))
        self._publish_root(replica, env.reset())

    def take_restarts(self) -> list[Restart]:
        """The restarts since the last call."""
        restarts, self.restarts = self.restarts, []
        return restarts

    def close(self, timeout: float = 5.0) -> None:  # the executors' call; nothing to wait for
        for env in self.envs.values():
            with contextlib.suppress(Exception):  # best effort: the process is going away
                env.close()
        self.envs.clear()


class InlineExecutor(ReplicaStepper, Executor):
    """Steps every replica in the calling process, in the order asked: the serial mode."""

    def __init__(self, *, create_env_fns, seeds, states, slots, layout, on_env_error="raise"):
        super().__init__(slots, layout, on_env_error)
        self._starts = list(zip(create_env_fns, seeds, states, strict=True))
        self._queue: list[int] = []

    def start(self) -> None:
        for replica, (create_env_fn, seed, state) in enumerate(self._starts):
            try:
                self.add(replica, create_env_fn, seed, state)
            except Exception as error:
                raise EnvReplicaError(replica, traceback.format_exc()) from error
        self._starts = None  # the states are used once; not kept alive

    def batch_ends(self) -> tuple[list[ReplicaState], list[Restart]]:
        return [self.state(r) for r in sorted(self.envs)], self.take_restarts()

    def send(self, replicas: np.ndarray) -> None:
        self._queue.extend(replicas.tolist())

    def wait_ready(self) -> np.ndarray:
        stepped, self._queue = self._queue, []
        for replica in stepped:
            try:
                self.step(replica)
            except Exception as error:
                raise EnvReplicaError(replica, traceback.format_exc()) from error
        return np.asarray(stepped, dtype=np.int64)


def local_executor(
    *,
    create_env_fns,
    seeds,
    slots,
    inference_batch_size: int,
    native_threads: int | None,
    **stepper_options,
):
    """The executor that steps replicas from this process: an envpool of ``native_threads``
    C++ threads (the envpool backend), else the replicas' TorchRL envs one after another
    (``stepper_options``: :class:`InlineExecutor`'s other arguments, which envpool lacks)."""
    if native_threads:
        return EnvpoolExecutor(
            factory=create_env_fns[0],
            seeds=seeds,
            num_threads=native_threads,
            slots=slots,
            inference_batch_size=inference_batch_size,
        )
    return InlineExecutor(
        create_env_fns=create_env_fns, seeds=seeds, slots=slots, **stepper_options
    )
