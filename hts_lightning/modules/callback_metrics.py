"""Which metrics Lightning's callbacks read from ``trainer.callback_metrics``."""

from __future__ import annotations

import re

from lightning import Trainer
from lightning.pytorch.callbacks import ModelCheckpoint

__all__ = ["PROGRESS_BAR", "read_by_callbacks"]

#: What the progress bar shows, when there is one.
PROGRESS_BAR = ("perf/frames", "perf/fps", "rollout/return_last_20")


def read_by_callbacks(trainer: Trainer) -> frozenset[str]:
    """The metric names the trainer's callbacks read: every ``monitor`` (ModelCheckpoint,
    EarlyStopping...), the fields of a ModelCheckpoint's ``filename``, a scheduler's
    ``monitor``, and :data:`PROGRESS_BAR` when a progress bar is shown.

    Why: each key through ``LightningModule.log`` cost ~0.3-0.5 ms an update (5 keys: 1.1-1.4
    ms of a ~29 ms CartPole PPO update), so only these go through it; every metric reaches
    the loggers and ``last_metrics`` regardless.

    Example:
        >>> from lightning.pytorch.callbacks import EarlyStopping
        >>> trainer = Trainer(callbacks=[ModelCheckpoint(monitor="rollout/return_last_20",
        ...     filename="{perf/frames:.0f}"), EarlyStopping(monitor="train/kl_approx")],
        ...     enable_progress_bar=False, logger=False)
        >>> sorted(read_by_callbacks(trainer))
        ['perf/frames', 'rollout/return_last_20', 'train/kl_approx']
    """
    names = set(PROGRESS_BAR) if trainer.progress_bar_callback is not None else set()
    for callback in trainer.callbacks:
        monitor = getattr(callback, "monitor", None)
        if isinstance(monitor, str):
            names.add(monitor)
        if isinstance(callback, ModelCheckpoint) and callback.filename:
            names.update(re.findall(r"\{([^:}]+)", callback.filename))
    names.update(config.monitor for config in trainer.lr_scheduler_configs if config.monitor)
    return frozenset(names)
