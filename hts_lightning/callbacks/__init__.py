"""Lightning callbacks of the training runs."""

from hts_lightning.callbacks.episode_metric import EpisodeEndMetric
from hts_lightning.callbacks.stop_at_return import StopAtReturn
from hts_lightning.callbacks.stop_on_signal import StopOnSignal
from hts_lightning.callbacks.update_checkpoint import UpdateCheckpoint

__all__ = ["EpisodeEndMetric", "StopAtReturn", "StopOnSignal", "UpdateCheckpoint"]
