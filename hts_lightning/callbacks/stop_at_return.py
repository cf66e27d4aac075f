"""Stop training once the mean return of the last episodes reaches a target ("solved")."""

from __future__ import annotations

import statistics

from lightning import Callback, LightningModule, Trainer

__all__ = ["StopAtReturn"]


class StopAtReturn(Callback):
    """Stop after the update where the mean raw return of the last ``window`` episodes first
    reaches ``target`` (with at least ``window`` episodes seen), and print when it did.

    The line names the env frames, e.g. ``hts-rl: the mean return of the last 20 episodes
    reached 475 (476.3) at 22,784 frames``; ``reached_at`` keeps the frame count (``None``
    until then). The run ends as any other (checkpoint, MLflow run).

    In a recipe, or ``--trainer.callbacks+=hts_lightning.callbacks.StopAtReturn
    --trainer.callbacks.target=475`` on the command line::

        trainer:
          callbacks:
            - class_path: hts_lightning.callbacks.StopAtReturn
              init_args: {target: 475, window: 20}

    Example:
        >>> from collections import deque
        >>> from types import SimpleNamespace
        >>> stop = StopAtReturn(target=10.0, window=2)
        >>> module = SimpleNamespace(recent_returns=deque([9.0, 12.0]), frames=64)
        >>> trainer = SimpleNamespace(should_stop=False, is_global_zero=True)
        >>> stop.on_train_batch_end(trainer, module, None, None, 0)
        hts-rl: the mean return of the last 2 episodes reached 10 (10.5) at 64 frames
        >>> trainer.should_stop, stop.reached_at
        (True, 64)
    """

    def __init__(self, target: float, window: int = 20):
        if window < 1:
            raise ValueError(f"window must be at least 1 episode, got {window}.")
        self.target = target
        self.window = window
        self.reached_at: int | None = None

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        kept = pl_module.recent_returns.maxlen
        if kept is not None and self.window > kept:
            raise ValueError(
                f"StopAtReturn(window={self.window}): the module keeps the returns of its last "
                f"{kept} episodes only. Choose window <= {kept}."
            )

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs, batch, batch_idx: int
    ) -> None:
        # The module's recent returns are every rank's episodes (the same on all ranks), so
        # every rank stops at the same update.
        returns = list(pl_module.recent_returns)[-self.window :]
        if self.reached_at is not None or len(returns) < self.window:
            return
        mean = statistics.fmean(returns)
        if mean < self.target:
            return
        self.reached_at = int(pl_module.frames)
        trainer.should_stop = True
        if trainer.is_global_zero:
            print(
                f"hts-rl: the mean return of the last {self.window} episodes reached "
                f"{self.target:g} ({mean:.1f}) at {self.reached_at:,} frames",
                flush=True,
            )
