"""Observation normalization by running statistics, as a layer of the network."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["RunningNorm"]


class RunningNorm(nn.Module):
    """``clamp((x - mean) / sqrt(var + eps), -clip, clip)`` with the running mean and variance
    of every ``x`` given to :meth:`update` (Chan et al.'s parallel merge, as Stable-Baselines3's
    ``VecNormalize`` and gymnasium's ``NormalizeObservation`` keep them).

    The statistics are buffers: they travel with the weights to the collector, in checkpoints
    and in the exported policy. Only :meth:`update` changes them (the training module calls it
    once per batch, after the update, so a batch is collected and then learned from with the
    same statistics).

    Example:
        >>> norm = RunningNorm((2,))
        >>> norm.update(torch.tensor([[1.0, 10.0], [3.0, 30.0]]))
        >>> norm(torch.tensor([2.0, 20.0])).abs().max() < 1e-3  # the mean, standardized
        tensor(True)
    """

    def __init__(self, shape: tuple[int, ...], *, clip: float = 10.0, eps: float = 1e-8):
        super().__init__()
        self.clip = clip
        self.eps = eps
        self.register_buffer("mean", torch.zeros(shape))
        self.register_buffer("var", torch.ones(shape))
        # A tiny prior count, as SB3's, so the first update takes over the statistics.
        self.register_buffer("count", torch.tensor(1e-4, dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normalized = (x - self.mean) / torch.sqrt(self.var + self.eps)
        return normalized.clamp(-self.clip, self.clip)

    @torch.no_grad()
    def update(self, x: torch.Tensor, *, reduce=None) -> None:
        """Merge the statistics of the rows of ``x`` (``[*batch, *shape]``). ``reduce`` sums a
        tensor over the ranks under DDP (the same statistics on every rank)."""
        rows = x.reshape(-1, *self.mean.shape).to(torch.float64)
        moments = torch.stack([rows.new_full(self.mean.shape, rows.shape[0]), rows.sum(0)])
        moments = torch.cat([moments, rows.pow(2).sum(0, keepdim=True)])
        if reduce is not None:
            moments = reduce(moments)
        count, total, squares = moments
        batch_count = count.reshape(-1)[0]
        batch_mean = total / batch_count
        batch_var = (squares / batch_count - batch_mean.pow(2)).clamp_min(0)
        mean, var, old = self.mean.double(), self.var.double(), self.count
        new = old + batch_count
        delta = batch_mean - mean
        self.mean.copy_(mean + delta * batch_count / new)
        self.var.copy_(
            (var * old + batch_var * batch_count + delta.pow(2) * old * batch_count / new) / new
        )
        self.count.copy_(new)
