"""Lightning's MLflow logger with the tracking URI resolved when the logger is made."""

from __future__ import annotations

import os
import re
import time
import warnings
from argparse import Namespace
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from lightning.pytorch.loggers import MLFlowLogger
from lightning.pytorch.utilities.rank_zero import rank_zero_only

from hts_lightning._compat import flatten_params

__all__ = ["DEFAULT_TRACKING_URI", "MLflowLogger", "resolve_tracking_uri"]

#: The embedded store, a SQLite file in the working directory (MLflow 3 refuses ``file:``
#: stores by default). Its artifacts land in ``./mlruns``.
DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"

# MLflow's limit on a param value (MAX_PARAM_VAL_LENGTH); Lightning truncates at 250.
_MAX_PARAM_LENGTH = 6000
# MLflow's limit on metrics in one log_batch call.
_MAX_METRICS_PER_BATCH = 1000


def resolve_tracking_uri(tracking_uri: str | None = None) -> str:
    """The tracking URI to use now: ``tracking_uri``, else ``MLFLOW_TRACKING_URI``, else
    the embedded store ``sqlite:///mlflow.db`` in the working directory (made absolute, so that
    the run can be found again from another directory)."""
    uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI
    prefix = "sqlite:///"
    if uri.startswith(prefix) and not uri.startswith(prefix + "/"):
        uri = prefix + str(Path(uri[len(prefix) :]).resolve())
    return uri


class MLflowLogger(MLFlowLogger):
    """The default logger of every recipe: MLflow, with the URI read when the logger is made.

    Lightning's ``MLFlowLogger`` reads ``MLFLOW_TRACKING_URI`` once, when Lightning is
    imported, and falls back to a ``file:`` store that MLflow 3 refuses. This one resolves the
    URI when it is constructed (see :func:`resolve_tracking_uri`), keeps checkpoints in a local
    folder, logs params so that resuming a run never tries to change one, and carries the
    settings of the end-of-training model logging that
    :class:`~hts_lightning.tracking.MLflowTracking` performs.

    Metrics are buffered and written in one ``log_batch`` at most every ``metrics_interval``
    seconds (the first at once), at every checkpoint and when the run ends, whether it
    finishes, fails or is stopped by a signal (Lightning calls ``finalize`` then): a write to
    the SQLite store costs ~14 ms whether it holds 25 points or 1000, so writing every update
    put ~14 ms on each CartPole update. Only a hard kill (SIGKILL, power loss) loses the
    points of the last ``metrics_interval`` seconds; ``metrics_interval=0`` writes at once.

    Keyword Args:
        experiment_name: MLflow experiment of the run (created when missing).
        run_name: name shown in the MLflow UI (MLflow picks one when ``None``).
        tracking_uri: where to log; ``None``: ``MLFLOW_TRACKING_URI``, else the embedded store
            ``sqlite:///mlflow.db`` in the working directory.
        tags: extra run tags.
        save_dir: local folder for checkpoints
            (``<save_dir>/<experiment id>/<run id>/checkpoints``); they are also logged to the
            run as artifacts.
        log_model: Lightning's: ``True`` logs the checkpoints as artifacts at the end of
            training, ``"all"`` whenever one is saved, ``False`` never.
        run_id: continue this run instead of starting one (``hts-rl fit --ckpt_path`` sets it
            from the checkpoint).
        log_policy: log the trained policy as an MLflow model named ``"model"`` at the end.
        registered_model_name: also register that model under this name in the model registry.
        artifact_location: where a new experiment keeps its artifacts (default: the store's
            choice; ``./mlruns`` for a SQLite store without a server).
        metrics_interval: seconds between writes of the buffered metrics (see above).

    Example:
        >>> import tempfile
        >>> store = tempfile.mkdtemp()
        >>> logger = MLflowLogger(tracking_uri=f"sqlite:///{store}/mlflow.db", save_dir=store,
        ...                       artifact_location=f"{store}/artifacts")
        >>> logger.log_metrics({"perf/fps": 100.0}, step=16)
        >>> logger.log_metrics({"perf/fps": 120.0}, step=32)
        >>> logger.flush()  # the end of the run, a checkpoint or metrics_interval do it too
        >>> [m.step for m in logger.experiment.get_metric_history(logger.run_id, "perf/fps")]
        [16, 32]
    """

    def __init__(
        self,
        *,
        experiment_name: str = "hts-rl",
        run_name: str | None = None,
        tracking_uri: str | None = None,
        tags: dict[str, Any] | None = None,
        save_dir: str = "runs",
        log_model: Literal[True, False, "all"] = True,
        run_id: str | None = None,
        log_policy: bool = True,
        registered_model_name: str | None = None,
        artifact_location: str | None = None,
        metrics_interval: float = 5.0,
    ):
        self._resolved_tracking_uri = resolve_tracking_uri(tracking_uri)
        super().__init__(
            experiment_name=experiment_name,
            run_name=run_name,
            tracking_uri=self._resolved_tracking_uri,
            tags=tags,
            save_dir=save_dir,
            log_model=log_model,
            run_id=run_id,
            artifact_location=artifact_location,
        )
        self._checkpoint_dir = save_dir
        #: MLflow status of a run that ends by an exception; StopOnSignal makes it "KILLED".
        self.status_on_failure = "FAILED"
        self.log_policy = log_policy
        self.registered_model_name = registered_model_name
        self.metrics_interval = metrics_interval
        self._pending_metrics: list = []
        self._last_flush = -float("inf")

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Buffer ``metrics`` at ``step``; they reach the store at the next :meth:`flush`."""
        from mlflow.entities import Metric

        timestamp = int(time.time() * 1000)
        for key, value in metrics.items():
            if isinstance(value, str):
                warnings.warn(f"Discarding metric with string value {key}={value}.", stacklevel=2)
                continue
            name = re.sub("[^a-zA-Z0-9_/. -]+", "", key)  # MLflow's allowed characters
            if name != key:
                warnings.warn(f"MLflow metric names: {key!r} logged as {name!r}.", stacklevel=2)
            self._pending_metrics.append(
                Metric(key=name, value=float(value), timestamp=timestamp, step=step or 0)
            )
        if time.monotonic() - self._last_flush >= self.metrics_interval:
            self.flush()

    @rank_zero_only
    def flush(self) -> None:
        """Write the buffered metrics to the store now, in order."""
        pending, self._pending_metrics = self._pending_metrics, []
        for start in range(0, len(pending), _MAX_METRICS_PER_BATCH):
            chunk = pending[start : start + _MAX_METRICS_PER_BATCH]
            self.experiment.log_batch(run_id=self.run_id, metrics=chunk)
        self._last_flush = time.monotonic()

    def after_save_checkpoint(self, checkpoint_callback) -> None:
        self.flush()  # a checkpoint's run holds the metrics up to it
        super().after_save_checkpoint(checkpoint_callback)

    def finalize(self, status: str = "success") -> None:
        if self._initialized:
            self.flush()
        super().finalize(self.status_on_failure if status == "failed" else status)

    @property
    def tracking_uri(self) -> str:
        """The resolved tracking URI of this logger."""
        return self._resolved_tracking_uri

    @property
    def save_dir(self) -> str:
        """The local folder under which checkpoints are written."""
        return self._checkpoint_dir

    @property
    def experiment(self):
        """The ``MlflowClient`` (rank zero); a ``run_id`` missing from the store is an error
        that says how to fix it, not MLflow's bare "Run not found"."""
        if not self._initialized and self._run_id is not None and rank_zero_only.rank == 0:
            from mlflow.exceptions import MlflowException

            try:
                self._mlflow_client.get_run(self._run_id)
            except MlflowException as error:
                raise ValueError(
                    f"MLflow run {self._run_id} is not in the store {self.tracking_uri} "
                    f"({error.message.splitlines()[0]}). To continue it, log to the store it "
                    "was made in (MLFLOW_TRACKING_URI or --trainer.logger.init_args.tracking_uri); "
                    "to start a new run instead, pass --trainer.logger.init_args.run_id=null."
                ) from None
        return super().experiment

    @rank_zero_only
    def log_hyperparams(self, params: dict[str, Any] | Namespace) -> None:
        """Log params (nested keys joined by ``/``). Values MLflow already holds for this run
        are skipped; a value that changed on resume is kept as first logged, with a warning
        (MLflow params cannot change; the resumed config is logged as an artifact)."""
        from mlflow.entities import Param

        flat = flatten_params(params)
        existing = self.experiment.get_run(self.run_id).data.params
        new = []
        for key, value in flat.items():
            text = str(value)[:_MAX_PARAM_LENGTH]
            if key not in existing:
                new.append(Param(key=key, value=text))
            elif existing[key] != text:
                warnings.warn(
                    f"Param {key!r} of MLflow run {self.run_id} was {existing[key]!r} and is "
                    f"now {text!r}; MLflow params cannot change, so the run keeps the first value.",
                    stacklevel=2,
                )
        for start in range(0, len(new), 100):  # MLflow takes at most 100 params a call
            self.experiment.log_batch(run_id=self.run_id, params=new[start : start + 100])
