"""Action sampling from per-replica noise, so a row's sample never depends on its batch mates.

A policy's own ``dist.sample()`` draws from one global stream in row order, so a replica's action
would depend on which replicas happened to be batched with it. Here the randomness is a uniform
tensor owned by the replica and its step, turned into a sample by inverse transforms that act row
by row: Gumbel-max for categorical actions, the normal quantile for Gaussian ones.
"""

from __future__ import annotations

import math

import torch
import torch.distributions as D
from torchrl.modules.distributions import OneHotCategorical as TorchRLOneHotCategorical

_EPS = 1e-7
_ONE_HOT = (D.OneHotCategorical, TorchRLOneHotCategorical)
_CATEGORICAL = (*_ONE_HOT, D.Categorical)  # the distributions sampled by Gumbel-max


def noise_width(dist: D.Distribution) -> int:
    """How many uniforms one row of ``dist`` needs (its batch is the leading dimension)."""
    if isinstance(dist, _CATEGORICAL):
        # One per logit: [batch, n], or [batch, heads, n] for several categorical heads.
        return math.prod(dist.logits.shape[1:])
    if isinstance(dist, D.Normal):
        return math.prod(dist.loc.shape[1:])
    if isinstance(dist, (D.Independent, D.TransformedDistribution)):
        return noise_width(dist.base_dist)
    raise NotImplementedError(
        f"HTSCollector cannot sample {type(dist).__name__} deterministically per replica. "
        "Supported: Categorical, OneHotCategorical, Normal, Independent and transformed "
        "(e.g. TanhNormal) normals. Use one of these, or a policy that writes the action "
        "itself without randomness."
    )


def gumbel_argmax(logits: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """The index a categorical of ``logits`` samples for ``uniform`` (one per event): Gumbel-max."""
    # logits + Gumbel noise -log(-log(u)); a - b is a + (-b) bit for bit: the same sum.
    return (logits - minus_gumbel(uniform, logits.dtype)).argmax(-1)


def minus_gumbel(uniform: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``log(-log(u))`` of each uniform, in ``dtype``: minus the Gumbel noise. Elementwise, so a
    (replica, step)'s numbers are the same computed for one chunk or for a whole batch.
    Computed in place on clamp's new tensor (fewer allocations)."""
    noise = uniform.clamp(_EPS, 1.0 - _EPS).to(dtype)
    return noise.log_().neg_().log_()


def sample_from_uniform(dist: D.Distribution, uniform: torch.Tensor) -> torch.Tensor:
    """A sample of ``dist`` computed row by row from ``uniform`` ([batch, noise_width])."""
    if isinstance(dist, _CATEGORICAL):
        index = gumbel_argmax(dist.logits, uniform.reshape(dist.logits.shape))
        if isinstance(dist, _ONE_HOT):
            return torch.nn.functional.one_hot(index, dist.logits.shape[-1])
        return index
    uniform = uniform.clamp(_EPS, 1.0 - _EPS)
    if isinstance(dist, D.Normal):
        normal = math.sqrt(2.0) * torch.erfinv(2.0 * uniform.to(dist.loc.dtype) - 1.0)
        return dist.loc + dist.scale * normal.reshape(dist.loc.shape)
    if isinstance(dist, D.Independent):
        return sample_from_uniform(dist.base_dist, uniform)
    if isinstance(dist, D.TransformedDistribution):
        sample = sample_from_uniform(dist.base_dist, uniform)
        for transform in dist.transforms:
            sample = transform(sample)
        return sample
    noise_width(dist)  # raises the explanatory error
    raise AssertionError("unreachable")
