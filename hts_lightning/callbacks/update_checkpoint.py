"""Lightning's ModelCheckpoint with its period counted in updates, and a last checkpoint that
is the run's final state however the run ends."""

from __future__ import annotations

from lightning import LightningModule, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint

from hts_lightning.collectors.errors import BatchTimeoutError, EnvReplicaError, WorkerDiedError

__all__ = ["UpdateCheckpoint"]

# Raised while the module waits for a batch: the last update is whole, its state worth keeping.
_BETWEEN_UPDATES = (EnvReplicaError, WorkerDiedError, BatchTimeoutError)


class UpdateCheckpoint(ModelCheckpoint):
    """A ``ModelCheckpoint`` taken after every ``every_n_updates``-th update; the other
    arguments are ``ModelCheckpoint``'s.

    Why: ``every_n_train_steps`` counts ``trainer.global_step``, the optimizer steps, and an
    update takes ``epochs x minibatches`` of them (20 in the CartPole PPO recipe, where 50
    steps meant a checkpoint every 5 updates and 7-12% of the run's time;
    benchmarks/RESULTS.md). A module without ``updates`` counts Lightning's batches.

    With ``save_last``, ``last.ckpt`` holds the run's final state whatever ended it
    (``total_frames``, ``max_steps``, ``max_time``, a callback's stop), not the last periodic
    one: Lightning's ``ModelCheckpoint`` writes ``last`` at the end of training only if it never
    wrote it. An env error, a dead worker or a batch timeout, raised between updates, leave
    ``last.ckpt`` at the last whole update too (one process; under DDP the other ranks are
    stopped in a collective, and the periodic checkpoint is the last). A stop signal's
    checkpoint is :class:`~hts_lightning.callbacks.StopOnSignal`'s. A run that ended before its
    ``total_frames`` goes on from its ``last.ckpt`` when resumed with a larger ``max_steps``
    or ``max_time``, or without the callback that stopped it.

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
        self._last_saved_at: int | None = None  # the global step of the last `last` written

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs, batch, batch_idx: int
    ) -> None:
        updates = getattr(pl_module, "updates", batch_idx + 1)
        if updates % self.every_n_updates == 0:
            super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
            if self.save_last:
                self._last_saved_at = trainer.global_step
        elif _ends_after_this_batch(trainer):
            # Saved inside the epoch, not at the end of training: a checkpoint taken after
            # Lightning closed the epoch resumes as finished, and a larger max_steps or
            # max_time could not extend the run.
            self._save_final_state(trainer, pl_module)

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._save_final_state(trainer, pl_module)

    def on_exception(
        self, trainer: Trainer, pl_module: LightningModule, exception: BaseException
    ) -> None:
        super().on_exception(trainer, pl_module, exception)
        if isinstance(exception, _BETWEEN_UPDATES) and trainer.world_size == 1:
            self._save_final_state(trainer, pl_module)

    def _save_final_state(self, trainer: Trainer, pl_module: LightningModule) -> None:
        step = trainer.global_step
        if not self.save_last or self.dirpath is None or self._last_saved_at == step:
            return
        path = self.format_checkpoint_name({}, self.CHECKPOINT_NAME_LAST)
        trainer.save_checkpoint(path)  # on every rank: saving is collective
        self.last_model_path = path
        self._last_saved_at = step
        # As ModelCheckpoint does after its saves: a logger that keeps checkpoints (MLflow's
        # log_model) takes this one when the run ends.
        for logger in trainer.loggers:
            logger.after_save_checkpoint(self)


def _ends_after_this_batch(trainer: Trainer) -> bool:
    """Whether Lightning ends training after the current batch: ``max_steps`` reached, or a
    callback's stop (``max_time``'s timer, :class:`~hts_lightning.callbacks.StopAtReturn`),
    which run before checkpoint callbacks. Lightning stops the ranks at one batch only if the
    decision is the same on all of them, so a collective save here leaves none waiting."""
    reached = trainer.max_steps != -1 and trainer.global_step >= trainer.max_steps
    return reached or trainer.should_stop
