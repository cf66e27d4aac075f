"""The native backend's executor: every replica is an env of one envpool (C++ threads).

It offers the collection engine the calls the other executors offer (``send``,
``wait_ready``, states, ``close``), so the engine's rules hold unchanged: inference on ready
replicas in fixed-shape chunks, noise per (replica, step), storage by (replica, step).

envpool in asynchronous mode steps exactly the envs it is sent, and its ``recv`` returns
whichever have finished. A replica at the batch boundary is held simply by not sending it.
``recv`` blocks until ``batch_size`` envs are ready, so with replicas held a pool whose
batch_size exceeds what is in flight would wait for ever: the pool is built with
``batch_size=1`` and :meth:`wait_ready` receives one env at a time, never more than are in
flight. A finished episode is reset by sending the env once more (envpool's auto-reset; the
action is ignored); that reset is not a transition, and the replica is reported ready only
once its first observation is in.

The executor keeps what ``StepCounter``, ``RewardSum`` and ``RewardClipping`` keep on the
Python path (step count, raw return, clipped reward), so the slots get the same keys and
values as a TorchRL env of the same replica (tested bitwise against ``EnvpoolReplica``).
"""

from __future__ import annotations

import numpy as np
from tensordict import TensorDictBase

from hts_lightning.envs.envpool import EnvpoolFactory

_ROOT_KEYS = ("observation", "done", "terminated", "truncated", "episode_reward", "step_count")
_NEXT_KEYS = (*_ROOT_KEYS, "reward")


class EnvpoolExecutor:
    """Steps ``len(slots)`` replicas in one envpool; replica i's env is seeded ``seeds[i]``."""

    def __init__(
        self,
        *,
        factory: EnvpoolFactory,
        seeds: list[int],
        num_threads: int,
        slots: TensorDictBase,
        inference_batch_size: int,
    ):
        root, next_ = slots.get("root"), slots.get("next")
        missing = sorted(
            {f"root {k}" for k in _ROOT_KEYS if k not in root}
            | {f"next {k}" for k in _NEXT_KEYS if k not in next_}
        )
        if missing:
            raise ValueError(f"The envpool backend needs the Python path's keys; missing {missing}")
        self._factory = factory
        self._seeds = list(seeds)
        self._num_threads = num_threads
        self._num_envs = slots.batch_size[0]
        self._chunk = inference_batch_size
        # numpy views of the shared slots: one env's results are written element by element,
        # where numpy indexing costs a fraction of torch's.
        self._root = {k: root.get(k).numpy() for k in _ROOT_KEYS}
        self._next = {k: next_.get(k).numpy() for k in _NEXT_KEYS}
        self._action = slots.get(("action", "action")).numpy()
        self._discrete = None
        self._clip = factory.clip_rewards
        self._returns = np.zeros(self._num_envs, dtype=np.float32)
        self._steps = np.zeros(self._num_envs, dtype=np.int64)
        self._resetting = np.zeros(self._num_envs, dtype=bool)
        self._in_flight = 0
        self._stopping = False
        self._pool = None

    def start(self) -> None:
        """Build the pool, reset every env and publish the first observations."""
        self._pool = self._factory.make_pool(seeds=self._seeds, num_threads=self._num_threads)
        spec = self._pool.spec.action_array_spec["action"]
        self._action_dtype = spec.dtype
        self._reset_action = np.zeros((1, *spec.shape[1:]), dtype=spec.dtype)
        self._discrete = hasattr(self._pool.action_space, "n")
        self._pool.async_reset()
        self._resetting[:] = True
        self._in_flight = self._num_envs
        ready = 0
        while ready < self._num_envs:
            ready += len(self._receive())

    def send(self, replicas: np.ndarray) -> None:
        action = self._action[replicas]
        action = action.argmax(-1) if self._discrete else action
        self._pool.send(action.astype(self._action_dtype), replicas.astype(np.int32))
        self._in_flight += replicas.size

    def wait_ready(self) -> np.ndarray:
        """The replicas whose step (and, at an episode end, reset) finished: as many as one
        inference chunk, or all that are in flight when fewer are."""
        target = min(self._chunk, self._in_flight)
        ready: list[int] = []
        while len(ready) < target and not self._stopping:
            ready.extend(self._receive())
        return np.asarray(ready, dtype=np.int64)

    def _receive(self) -> list[int]:
        observation, reward, terminated, truncated, info = self._pool.recv()
        replica = int(info["env_id"][0])
        self._in_flight -= 1
        if self._resetting[replica]:
            self._resetting[replica] = False
            self._returns[replica] = 0.0
            self._steps[replica] = 0
            self._publish_root(replica, observation[0])
            return [replica]
        raw = np.float32(reward[0])
        self._returns[replica] += raw
        self._steps[replica] += 1
        done = bool(terminated[0] or truncated[0])
        out = self._next
        out["observation"][replica] = observation[0]
        out["reward"][replica] = np.clip(raw, -1.0, 1.0) if self._clip else raw
        out["done"][replica] = done
        out["terminated"][replica] = terminated[0]
        out["truncated"][replica] = truncated[0]
        out["episode_reward"][replica] = self._returns[replica]
        out["step_count"][replica] = self._steps[replica]
        if done:  # auto-reset: the env resets on its next send, whatever the action
            self._resetting[replica] = True
            self._pool.send(self._reset_action, np.array([replica], dtype=np.int32))
            self._in_flight += 1
            return []
        self._publish_root(replica, observation[0])
        return [replica]

    def _publish_root(self, replica: int, observation: np.ndarray) -> None:
        root = self._root
        root["observation"][replica] = observation
        root["episode_reward"][replica] = self._returns[replica]
        root["step_count"][replica] = self._steps[replica]
        # done, terminated and truncated of a root are always False: set once by the layout.

    def replica_states(self) -> list:
        """envpool cannot save an env's state: ``(None, None)`` for every replica (a resumed
        collector re-seeds them, as any env without state)."""
        return [(None, None)] * self._num_envs

    def take_restarts(self) -> list:
        return []

    def stopping(self) -> bool:
        return self._stopping

    def stop_workers(self, timeout: float = 5.0) -> None:
        self._stopping = True

    def close(self, timeout: float = 5.0) -> None:
        self._stopping = True
        self._pool = None  # envpool's destructor finishes the steps in flight, joins its threads
