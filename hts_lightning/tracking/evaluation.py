"""``hts-rl evaluate``'s MLflow run: nested under the training run when the store has it."""

from __future__ import annotations

import statistics
from pathlib import Path

from hts_lightning.tracking.mlflow import MLflowLogger

__all__ = ["log_evaluation"]


def log_evaluation(
    *,
    tracking_uri: str,
    training_run_id: str | None,
    experiment_name: str,
    run_name: str,
    params: dict,
    returns: list[float],
    lengths: list[int],
    video: Path | None = None,
) -> str:
    """Log an evaluation as a new MLflow run through :class:`MLflowLogger`; returns its id.

    Metrics: ``eval/return_mean``, ``eval/return_std`` (population), ``eval/length_mean``,
    ``eval/episodes``, and ``eval/episode_return`` with the episode index as step; ``video``
    as an artifact under ``video/``. The run goes into the training run's experiment with
    the tag ``mlflow.parentRunId`` when ``training_run_id`` is in the store, else into
    ``experiment_name``.
    """
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    tags = {}
    if training_run_id is not None:
        client = MlflowClient(tracking_uri)
        try:
            parent = client.get_run(training_run_id)
        except MlflowException:
            print(f"Training run {training_run_id} is not in {tracking_uri}: logging a new run.")
        else:
            experiment_name = client.get_experiment(parent.info.experiment_id).name
            run_name = f"{parent.info.run_name}-{run_name}"
            tags["mlflow.parentRunId"] = parent.info.run_id  # MLflow's nesting tag
    logger = MLflowLogger(
        experiment_name=experiment_name,
        run_name=run_name,
        tracking_uri=tracking_uri,
        tags=tags,
        log_model=False,
        log_policy=False,
    )
    logger.log_hyperparams(params)
    logger.log_metrics(
        {
            "eval/return_mean": statistics.fmean(returns),
            "eval/return_std": statistics.pstdev(returns),
            "eval/length_mean": statistics.fmean(lengths),
            "eval/episodes": float(len(returns)),
        },
        step=0,
    )
    for episode, value in enumerate(returns):
        logger.log_metrics({"eval/episode_return": value}, step=episode)
    if video is not None:
        logger.experiment.log_artifact(logger.run_id, str(video), "video")
    logger.finalize("success")
    return logger.run_id
