"""Statistics over every rank's shard of a batch: the one path of the modules and callbacks."""

from __future__ import annotations

import torch
from lightning import LightningModule
from tensordict import TensorDictBase

from hts_lightning.envs import episode_ends

__all__ = ["episode_end_values", "gathered", "mean_over_ranks", "standardized"]


def gathered(module: LightningModule, values: torch.Tensor, capacity: int) -> torch.Tensor:
    """``values`` (1-d, at most ``capacity`` per rank) of every rank, in rank order: padded
    with NaN to one size, all-gathered, unpadded."""
    if module.trainer.world_size == 1:
        return values
    padded = values.new_full((capacity,), torch.nan)
    padded[: values.numel()] = values
    out = module.all_gather(padded).reshape(-1)
    return out[~out.isnan()]


def episode_end_values(
    module: LightningModule, batch: TensorDictBase, key: str
) -> torch.Tensor | None:
    """``("next", key)`` where an episode ended in ``batch`` (a game, for Atari with episodic
    life: :func:`~hts_lightning.envs.episode_ends`), of every rank (1-d, float);
    ``None`` when the batch has no such key."""
    if ("next", key) not in batch.keys(True):
        return None
    ended = episode_ends(batch["next"])
    values = batch["next", key].squeeze(-1)[ended].float()
    return gathered(module, values, capacity=batch.numel())


def mean_over_ranks(module: LightningModule, values: torch.Tensor) -> torch.Tensor:
    """The mean of ``values`` over the ranks (itself on one)."""
    if module.trainer.world_size == 1:
        return values
    return module.trainer.strategy.reduce(values, reduce_op="mean")


def standardized(module: LightningModule, values: torch.Tensor) -> torch.Tensor:
    """``values`` standardized over the values of every rank (all ranks' shards)."""
    world = module.trainer.world_size
    if world == 1:
        return (values - values.mean()) / (values.std() + 1e-8)
    mean, square = mean_over_ranks(module, torch.stack([values.mean(), values.pow(2).mean()]))
    count = values.numel() * world
    std = ((square - mean**2).clamp_min(0) * count / (count - 1)).sqrt()
    return (values - mean) / (std + 1e-8)
