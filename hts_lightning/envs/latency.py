"""An environment with a chosen step-time distribution, for step-time-variance experiments."""

from __future__ import annotations

import math
import random
import time

import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Binary, Composite, OneHot, Unbounded
from torchrl.envs import EnvBase

__all__ = ["VariableLatencyEnv", "lognormal_parameters"]

_DISTRIBUTIONS = ("constant", "exponential", "lognormal")


def lognormal_parameters(mean: float, std: float) -> tuple[float, float]:
    """The (mu, sigma) of the normal under a log-normal with this mean and standard deviation."""
    sigma2 = math.log1p((std / mean) ** 2)
    return math.log(mean) - sigma2 / 2, math.sqrt(sigma2)


_DONE_KEYS = ("done", "terminated", "truncated")
_NO_BATCH = torch.Size([])


class VariableLatencyEnv(EnvBase):
    """A small learnable env whose step time follows a chosen distribution.

    Each step sleeps for a time drawn from ``distribution`` ("constant", "exponential" or
    "lognormal") with the given ``mean`` and ``std`` in seconds (the exponential's std equals its
    mean). The data is a contextual bandit: the observation is a standard-normal vector from the
    replica's own seeded generator, and the reward is 1 when the action equals the argmax of the
    observation's first ``num_actions`` entries. Observations and rewards are functions of the seed
    and the actions only; the sleep times come from an unseeded RNG, so timing never leaks into
    the data. Episodes are truncated after ``episode_length`` steps.

    This reproduces the paper's step-time-variance experiments without Google Research Football.

    Example:
        >>> env = VariableLatencyEnv(mean=0.0, distribution="constant")
        >>> _ = env.set_seed(0)
        >>> env.rollout(3)["next", "reward"].shape
        torch.Size([3, 1])
    """

    def __init__(
        self,
        *,
        distribution: str = "exponential",
        mean: float = 0.001,
        std: float | None = None,
        obs_dim: int = 8,
        num_actions: int = 4,
        episode_length: int = 100,
    ):
        super().__init__(batch_size=torch.Size([]))
        if distribution not in _DISTRIBUTIONS:
            raise ValueError(f"distribution must be one of {_DISTRIBUTIONS}, got {distribution!r}")
        if mean < 0 or (std is not None and std < 0):
            raise ValueError(f"mean and std must be >= 0, got mean={mean}, std={std}")
        if distribution == "lognormal" and (std is None or mean <= 0):
            raise ValueError("a lognormal step time needs mean > 0 and std (seconds)")
        if num_actions > obs_dim:
            raise ValueError(f"num_actions ({num_actions}) must be <= obs_dim ({obs_dim})")
        self.distribution = distribution
        self.mean = mean
        self.std = mean if distribution == "exponential" else (std or 0.0)
        self.num_actions = num_actions
        self.episode_length = episode_length
        self._timing = random.Random()
        self._lognormal = lognormal_parameters(mean, std) if distribution == "lognormal" else None
        self._rng = torch.Generator().manual_seed(0)
        self._obs = torch.zeros(obs_dim)
        self._best_action = 0  # the argmax of the observation's first num_actions entries
        self._t = 0
        # Copied per step (cheaper than building tensors from Python values, ~10 us each).
        self._flags = (torch.zeros(1, dtype=torch.bool), torch.ones(1, dtype=torch.bool))
        self._rewards = (torch.zeros(1), torch.ones(1))
        self.observation_spec = Composite(observation=Unbounded(shape=(obs_dim,)))
        self.action_spec = OneHot(num_actions, dtype=torch.int64)
        self.full_done_spec = Composite(
            {key: Binary(1, shape=(1,), dtype=torch.bool) for key in _DONE_KEYS}
        )
        self.reward_spec = Unbounded(shape=(1,))

    def sample_delay(self) -> float:
        """One step time in seconds, drawn from the configured distribution."""
        if self.mean == 0:
            return 0.0
        if self.distribution == "constant":
            return self.mean
        if self.distribution == "exponential":
            return self._timing.expovariate(1.0 / self.mean)
        return self._timing.lognormvariate(*self._lognormal)

    def _draw_observation(self) -> torch.Tensor:
        self._obs = torch.randn(self._obs.shape, generator=self._rng)
        self._best_action = int(self._obs.numpy()[: self.num_actions].argmax())
        return self._obs.clone()

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        self._t = 0
        return TensorDict(observation=self._draw_observation(), **self.full_done_spec.zero())

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        delay = self.sample_delay()
        if delay > 0:
            time.sleep(delay)
        # numpy's argmax, like torch's, gives the first maximum; it costs a tenth of torch's.
        correct = int(tensordict.get("action").numpy().argmax()) == self._best_action
        self._t += 1
        truncated = self._flags[self._t >= self.episode_length]
        step = {
            "observation": self._draw_observation(),
            "reward": self._rewards[correct].clone(),
            "done": truncated.clone(),
            "terminated": self._flags[False].clone(),
            "truncated": truncated.clone(),
        }
        return TensorDict(step, batch_size=_NO_BATCH, device=None)

    def snapshot(self) -> dict:
        """The data RNG, the current observation and the step (the timing RNG is not data)."""
        return {"rng": self._rng.get_state(), "obs": self._obs.clone(), "t": self._t}

    def restore(self, snapshot: dict) -> None:
        self._rng.set_state(snapshot["rng"])
        self._obs = snapshot["obs"].clone()
        self._best_action = int(self._obs.numpy()[: self.num_actions].argmax())
        self._t = snapshot["t"]

    def _set_seed(self, seed: int | None) -> None:
        self._rng.manual_seed(0 if seed is None else int(seed))
