"""Lightning's ModelCheckpoint with its period counted in updates."""

from __future__ import annotations

from lightning import LightningModule, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint

__all__ = ["UpdateCheckpoint"]


class UpdateCheckpoint(ModelCheckpoint):
    """A ``ModelCheckpoint`` taken after every ``every_n_updates``-th update; the other
    arguments are ``ModelCheckpoint``'s.

    Why: ``every_n_train_steps`` counts ``trainer.global_step``, the optimizer steps, and an
    update takes ``epochs x minibatches`` of them (20 in the CartPole PPO recipe, where 50
    steps meant a checkpoint every 5 updates and 7-12% of the run's time;
    benchmarks/RESULTS.md). A module without ``updates`` counts Lightning's batches.

    Example:
        >>> UpdateCheckpoint(every_n_updates=50, save_last=True).every_n_updates
        50
    """

    def __init__(self, *, every_n_updates: int = 50, **kwargs):
        if every_n_updates < 1:
            raise ValueError(f"every_n_updates must be >= 1, got {every_n_updates}")
        # Lightning's check passes every step; this class decides which updates reach it.
        super().__init__(every_n_train_steps=1, **kwargs)
        self.every_n_updates = every_n_updates

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs, batch, batch_idx: int
    ) -> None:
        updates = getattr(pl_module, "updates", batch_idx + 1)
        if updates % self.every_n_updates == 0:
            super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
