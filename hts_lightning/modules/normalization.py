"""The reward scale the training module keeps: rewards divided by the running std of the
discounted return (the observations' statistics are a layer of the network, RunningNorm)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from tensordict import TensorDictBase
from torch import nn

from hts_lightning.models import RunningNorm

__all__ = ["RewardScaler"]


class RewardScaler(nn.Module):
    """Rewards divided by the running standard deviation of each replica's discounted return,
    then clipped to ``[-clip, clip]`` (gymnasium's ``NormalizeReward``, Stable-Baselines3's
    ``VecNormalize(norm_reward=True)``): a scale for the critic's targets whatever the env's
    reward size. Its state (every replica's return so far and the statistics) is in the
    module's checkpoint.

    Example:
        >>> from tensordict import TensorDict
        >>> scaler = RewardScaler(num_envs=2, gamma=0.99)
        >>> batch = TensorDict({("next", "reward"): torch.full((2, 3, 1), 5.0),
        ...     ("next", "done"): torch.zeros(2, 3, 1, dtype=torch.bool)}, batch_size=[2, 3])
        >>> scaler(batch).abs().max() < 5.0
        tensor(True)
    """

    def __init__(self, *, num_envs: int, gamma: float, clip: float = 10.0):
        super().__init__()
        self.gamma = gamma
        self.clip = clip
        self.register_buffer("returns", torch.zeros(num_envs, dtype=torch.float64))
        self.statistics = RunningNorm(())

    @torch.no_grad()
    def forward(
        self, batch: TensorDictBase, *, reduce: Callable | None = None, rank: int = 0
    ) -> torch.Tensor:
        """The scaled rewards of ``batch`` (``[envs, steps]``: rank ``rank``'s replicas in
        order); the statistics take the batch's discounted returns first. ``reduce`` sums a
        tensor over the ranks under DDP: every rank then holds every replica's return (so the
        buffers agree and one rank's checkpoint resumes them all)."""
        reward = batch["next", "reward"]
        done = batch["next", "done"].reshape(reward.shape[:2])
        envs, steps = reward.shape[:2]
        mine = slice(rank * envs, (rank + 1) * envs)
        returns = self.returns[mine].clone()
        seen = []
        for t in range(steps):
            returns = returns * self.gamma + reward[:, t].reshape(envs).double()
            seen.append(returns)
            returns = returns.masked_fill(done[:, t], 0.0)
        if reduce is None:
            self.returns[mine] = returns
        else:  # the other ranks' slices are 0 here: the sum puts each rank's in its place
            self.returns.zero_()[mine] = returns
            self.returns.copy_(reduce(self.returns))
        self.statistics.update(torch.stack(seen), reduce=reduce)
        scale = torch.sqrt(self.statistics.var + self.statistics.eps).to(reward.dtype)
        return (reward / scale).clamp(-self.clip, self.clip)
