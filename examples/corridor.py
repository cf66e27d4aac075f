"""Your own env and network, as hts-rl trains them: a gymnasium env with its wrappers, and an
actor-critic of your own design. A recipe names both by import path
(recipes/examples/corridor_ppo.yaml):

    hts-rl fit --config recipes/examples/corridor_ppo.yaml

The module is found from the folder hts-rl runs in (or from PYTHONPATH, or an installed
package); worker processes import it by the same path.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.data import Composite, TensorSpec
from torchrl.modules import ActorValueOperator, ProbabilisticActor, ValueOperator
from torchrl.modules.distributions import OneHotCategorical


class Corridor(gym.Env):
    """Walk right along a corridor of ``length`` cells to its end (reward 1); each step costs
    0.01. Actions: 0 left, 1 right. The observation is the position, one-hot."""

    def __init__(self, length: int = 8):
        self.length = length
        self.observation_space = gym.spaces.Box(0.0, 1.0, (length,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.position = 0

    def _observation(self) -> np.ndarray:
        observation = np.zeros(self.length, np.float32)
        observation[self.position] = 1.0
        return observation

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position = int(self.np_random.integers(0, self.length // 2))
        return self._observation(), {}

    def step(self, action):
        move = 1 if int(action) == 1 else -1
        self.position = min(max(self.position + move, 0), self.length - 1)
        arrived = self.position == self.length - 1
        return self._observation(), (1.0 if arrived else -0.01), arrived, False, {}


def make_env(length: int = 8, max_steps: int = 50) -> gym.Env:
    """The corridor with a time limit: an episode is truncated after ``max_steps``."""
    return gym.wrappers.TimeLimit(Corridor(length), max_episode_steps=max_steps)


def build_network(
    observation_spec: Composite, action_spec: TensorSpec, *, width: int = 32
) -> ActorValueOperator:
    """A shared ReLU trunk with a policy head and a value head, as TorchRL operators."""
    features = observation_spec["observation"].shape[-1]
    trunk = nn.Sequential(nn.Linear(features, width), nn.ReLU())
    actor = ProbabilisticActor(
        TensorDictModule(nn.Linear(width, action_spec.shape[-1]), ["features"], ["logits"]),
        in_keys=["logits"],
        distribution_class=OneHotCategorical,
        return_log_prob=True,
        spec=action_spec,
    )
    return ActorValueOperator(
        TensorDictModule(trunk, ["observation"], ["features"]),
        actor,
        ValueOperator(nn.Linear(width, 1), in_keys=["features"]),
    )
