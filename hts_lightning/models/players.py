"""One categorical action per controlled player, as one joint (team) action distribution."""

from __future__ import annotations

import math

import torch
import torch.distributions as D
from torch.distributions import constraints

__all__ = ["PlayersOneHotCategorical"]

_EPS = 1e-7


class _GumbelMax(D.Transform):
    """Standard-normal noise ``[..., players, actions]`` -> one-hot Gumbel-max samples.

    The normal is turned into a uniform by its CDF and the uniform into Gumbel noise, so the
    result is an exact sample of ``Categorical(logits)`` per player, a deterministic function
    of the noise.
    """

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.independent(constraints.real, 2)
    bijective = False

    def __init__(self, logits: torch.Tensor):
        super().__init__(cache_size=0)
        self.logits = logits

    def _call(self, noise: torch.Tensor) -> torch.Tensor:
        uniform = (0.5 * (1.0 + torch.erf(noise / math.sqrt(2.0)))).clamp(_EPS, 1.0 - _EPS)
        index = (self.logits - torch.log(-torch.log(uniform))).argmax(-1)
        return torch.nn.functional.one_hot(index, self.logits.shape[-1])


class PlayersOneHotCategorical(D.TransformedDistribution):
    """Independent one-hot categoricals over the last dim, one per player (the dim before it).

    The team's joint action is one action per player from one shared policy; its probability
    is the product over players, so ``log_prob`` and ``entropy`` sum over the player
    dimension and have the batch shape of one (team) step: PPO's ratio, GAE and the entropy
    bonus then act on the team, as a single-player policy would.

    It is a transformed standard normal (Gumbel-max through the normal CDF) so that
    per-replica noise samplers that handle Gaussian noise of any shape (the HTSCollector's)
    draw independent noise for every player; ``sample()`` gives the same distribution.

    Example:
        >>> dist = PlayersOneHotCategorical(logits=torch.zeros(5, 3, 19))
        >>> dist.sample().shape, dist.log_prob(dist.sample()).shape
        (torch.Size([5, 3, 19]), torch.Size([5]))
        >>> torch.allclose(dist.entropy(), torch.full((5,), 3 * math.log(19)))
        True
    """

    arg_constraints = {"logits": constraints.real_vector}
    has_rsample = False

    def __init__(self, logits: torch.Tensor, validate_args: bool | None = False):
        if logits.dim() < 2:
            raise ValueError(
                f"logits must be [..., players, actions], got shape {tuple(logits.shape)}"
            )
        self.logits = logits - logits.logsumexp(-1, keepdim=True)
        noise = D.Independent(D.Normal(torch.zeros_like(logits), torch.ones_like(logits)), 2)
        super().__init__(noise, [_GumbelMax(self.logits)], validate_args=False)

    @property
    def num_players(self) -> int:
        return self.logits.shape[-2]

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        return (value.to(self.logits.dtype) * self.logits).sum(-1).sum(-1)

    def entropy(self) -> torch.Tensor:
        return -(self.logits.exp() * self.logits).sum(-1).sum(-1)

    @property
    def mode(self) -> torch.Tensor:
        return torch.nn.functional.one_hot(self.logits.argmax(-1), self.logits.shape[-1])

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.mode
