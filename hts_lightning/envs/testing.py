"""A counting environment whose observations are the step count, for exact-content tests."""

from __future__ import annotations

import random
import sys
import time

import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Binary, Composite, OneHot, Unbounded
from torchrl.envs import EnvBase

__all__ = ["CountingEnv"]

_DONE_KEYS = ("done", "terminated", "truncated")


class CountingEnv(EnvBase):
    """An episode of ``max_count`` steps whose observation is the number of steps taken so far.

    The observation after ``t`` steps of an episode is ``[t]``; the reward of a step is the
    index of the action taken (so a test can read the actions back from the rewards); the
    episode terminates when the count reaches ``max_count``. ``max_delay`` adds a uniformly
    random sleep to every step, drawn from an unseeded RNG: it changes the timing, never the
    data. ``fail_at`` makes the step that reaches that count raise, to exercise error paths;
    ``stall_at`` makes it never return (it says so on stderr, then sleeps for an hour), as a
    hung env does.

    Example:
        >>> env = CountingEnv(max_count=3)
        >>> td = env.rollout(5, break_when_any_done=False)
        >>> td["observation"].squeeze(-1).tolist()
        [0.0, 1.0, 2.0, 0.0, 1.0]
    """

    def __init__(
        self,
        *,
        max_count: int = 5,
        num_actions: int = 2,
        max_delay: float = 0.0,
        fail_at: int | None = None,
        stall_at: int | None = None,
    ):
        super().__init__(batch_size=torch.Size([]))
        if max_count < 1:
            raise ValueError(f"max_count must be >= 1, got {max_count}")
        self.max_count = max_count
        self.max_delay = max_delay
        self.fail_at = fail_at
        self.stall_at = stall_at
        self._timing = random.Random()
        self._count = 0
        self.observation_spec = Composite(observation=Unbounded(shape=(1,), dtype=torch.float32))
        self.action_spec = OneHot(num_actions, dtype=torch.int64)
        self.full_done_spec = Composite(
            {key: Binary(1, shape=(1,), dtype=torch.bool) for key in _DONE_KEYS}
        )
        self.reward_spec = Unbounded(shape=(1,), dtype=torch.float32)

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        self._count = 0
        return TensorDict(observation=torch.zeros(1), **self.full_done_spec.zero())

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self.max_delay > 0:
            time.sleep(self._timing.uniform(0.0, self.max_delay))
        self._count += 1
        if self.fail_at is not None and self._count >= self.fail_at:
            raise RuntimeError(f"CountingEnv failing on purpose at count {self._count}")
        if self.stall_at is not None and self._count >= self.stall_at:
            print(f"CountingEnv stalling on purpose at count {self._count}", file=sys.stderr)
            sys.stderr.flush()
            time.sleep(3600)
        terminated = torch.tensor([self._count >= self.max_count])
        action = tensordict["action"].argmax(-1).to(torch.float32)
        return TensorDict(
            observation=torch.tensor([float(self._count)]),
            reward=action.reshape(1),
            done=terminated.clone(),
            terminated=terminated,
            truncated=torch.zeros(1, dtype=torch.bool),
        )

    def snapshot(self) -> dict:
        """The count (all of this env's state), for exact resume."""
        return {"count": self._count}

    def restore(self, snapshot: dict) -> None:
        self._count = snapshot["count"]

    def _set_seed(self, seed: int | None) -> None:
        # The counting env has no randomness: every replica counts the same way.
        return None
