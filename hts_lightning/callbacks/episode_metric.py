"""Log a per-episode env output (e.g. Google Research Football's goal difference)."""

from __future__ import annotations

import statistics
from collections import deque

from lightning import Callback, LightningModule, Trainer

from hts_lightning.ranks import episode_end_values

__all__ = ["EpisodeEndMetric"]


class EpisodeEndMetric(Callback):
    """Log the value of ``("next", key)`` at the end of every episode in each training batch.

    ``name`` gets the mean over the episodes that ended in the batch and ``name + "_last_N"``
    the mean of the last ``window`` episodes (of every rank under DDP), with the env-frame
    count as the step, as the training module logs its returns. For football,
    ``key="goal_difference"`` is the score the HTS-RL paper reports: goals for minus goals
    against per episode.

    In a recipe::

        trainer:
          callbacks:
            - class_path: hts_lightning.callbacks.EpisodeEndMetric
              init_args: {key: goal_difference, name: rollout/goal_difference}

    Example:
        >>> from types import SimpleNamespace
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from hts_lightning.ranks import episode_end_values
        >>> metric = EpisodeEndMetric(key="goal_difference", name="rollout/goal_difference")
        >>> batch = TensorDict({"next": {
        ...     "done": torch.tensor([[False], [True], [True]]),
        ...     "goal_difference": torch.tensor([[0.0], [1.0], [-1.0]])}}, [3])
        >>> module = SimpleNamespace(trainer=SimpleNamespace(world_size=1))
        >>> episode_end_values(module, batch, metric.key)  # what it logs the mean of
        tensor([ 1., -1.])
    """

    def __init__(
        self,
        key: str = "goal_difference",
        name: str = "rollout/goal_difference",
        window: int = 100,
    ):
        self.key = key
        self.name = name
        self.window = window
        self.recent: deque[float] = deque(maxlen=window)

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs, batch, batch_idx: int
    ) -> None:
        values = episode_end_values(pl_module, batch, self.key)  # of every rank
        if values is None or not values.numel():
            return
        self.recent.extend(values.tolist())
        metrics = {
            self.name: float(values.mean()),
            f"{self.name}_last_{self.window}": statistics.fmean(self.recent),
        }
        step = int(getattr(pl_module, "frames", trainer.global_step))
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=step)
        pl_module.log_dict(metrics, logger=False, on_step=True, on_epoch=False)

    def state_dict(self) -> dict:
        return {"recent": list(self.recent)}

    def load_state_dict(self, state_dict: dict) -> None:
        self.recent.clear()
        self.recent.extend(state_dict.get("recent", []))
