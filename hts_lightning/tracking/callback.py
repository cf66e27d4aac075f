"""What the MLflow logger cannot do alone: tags, the run id in checkpoints, the final model."""

from __future__ import annotations

import importlib.metadata
import subprocess
from pathlib import Path
from typing import Any

import torch
from lightning import Callback, LightningModule, Trainer
from lightning.pytorch.loggers import MLFlowLogger

from hts_lightning.models.tensor_policy import TensorPolicy

__all__ = ["CHECKPOINT_KEY", "MLflowTracking", "git_commit", "package_version"]

#: Where the run's identity is kept in a checkpoint (read by ``hts-rl fit --ckpt_path``).
CHECKPOINT_KEY = "hts_mlflow"


def package_version() -> str:
    """The installed version of hts-lightning (``"unknown"`` when not installed)."""
    try:
        return importlib.metadata.version("hts-lightning")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def git_commit() -> str | None:
    """The commit of the checkout the package is imported from, ``+dirty`` when it has
    uncommitted changes to tracked files; ``None`` outside a git checkout."""
    folder = Path(__file__).resolve().parent
    # With every tag excluded, --always names the commit itself, all its digits (git caps
    # --abbrev at the hash's length: 40 for SHA-1, 64 for SHA-256).
    describe = ["describe", "--always", "--abbrev=64", "--dirty=+dirty", "--exclude=*"]
    try:
        return subprocess.run(
            ["git", "-C", str(folder), *describe],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None


def _mlflow_logger(trainer: Trainer) -> MLFlowLogger | None:
    return next((lg for lg in trainer.loggers if isinstance(lg, MLFlowLogger)), None)


class MLflowTracking(Callback):
    """Tags the MLflow run, stores its id in checkpoints, logs the trained policy as a model.

    It acts only when the Trainer has an MLflow logger (it is in every ``hts-rl fit`` run).

    - At the start of fitting: tags ``hts.version``, ``hts.git_commit`` (also MLflow's own
      ``mlflow.source.git.commit``; absent outside a git checkout), ``hts.seed``,
      ``hts.world_size``, ``hts.collector``, ``hts.algorithm`` and ``hts.env_id``.
    - In every checkpoint: the run id, experiment id and tracking URI under
      ``checkpoint["hts_mlflow"]``, so that ``hts-rl fit --ckpt_path`` continues the run.
    - At the end of training, when the logger's ``log_policy`` is true (default): the policy as
      pickle-free MLflow PyTorch models (see :func:`log_policy_model`): ``"model"``
      (observations in, greedy action indices out) and ``"logits"``, with a signature, an
      input example and the env id in their metadata; ``"model"`` is registered as
      ``registered_model_name`` when the logger has one.

    Example:
        >>> import tempfile
        >>> from lightning import Trainer
        >>> from hts_lightning import A2C
        >>> from hts_lightning.tracking import MLflowLogger
        >>> store = tempfile.mkdtemp()
        >>> logger = MLflowLogger(tracking_uri=f"sqlite:///{store}/mlflow.db", save_dir=store,
        ...                       artifact_location=f"{store}/artifacts")
        >>> module = A2C(num_envs=2, num_workers=0, sync_interval=8, total_frames=16)
        >>> Trainer(max_epochs=1, logger=logger, callbacks=[MLflowTracking()],
        ...         enable_checkpointing=False, enable_progress_bar=False,
        ...         enable_model_summary=False).fit(module)
        >>> logger.experiment.get_run(logger.run_id).data.tags["hts.algorithm"]
        'A2C'
    """

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        logger = _mlflow_logger(trainer)
        if logger is None or not trainer.is_global_zero:
            return
        hparams = pl_module.hparams
        commit = git_commit()  # None outside a git checkout
        tags = {
            "hts.version": package_version(),
            "hts.seed": hparams.get("seed"),
            "hts.world_size": trainer.world_size,
            "hts.collector": hparams.get("collector"),
            "hts.algorithm": type(pl_module).__name__,
            "hts.env_id": hparams.get("env_id"),
            "hts.git_commit": commit,
            # MLflow's own key, without our "+dirty" mark.
            "mlflow.source.git.commit": commit and commit.removesuffix("+dirty"),
        }
        for key, value in tags.items():
            if value is not None:
                logger.experiment.set_tag(logger.run_id, key, str(value))

    def on_save_checkpoint(
        self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        logger = _mlflow_logger(trainer)
        if logger is None or not trainer.is_global_zero:
            return
        checkpoint[CHECKPOINT_KEY] = {
            "run_id": logger.run_id,
            "experiment_id": logger.experiment_id,
            "tracking_uri": logger.experiment.tracking_uri,
        }

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        logger = _mlflow_logger(trainer)
        if logger is None or not trainer.is_global_zero or not getattr(logger, "log_policy", True):
            return
        log_policy_model(
            pl_module,
            run_id=logger.run_id,
            tracking_uri=logger.experiment.tracking_uri,
            registered_model_name=getattr(logger, "registered_model_name", None),
        )


class _Logits(torch.nn.Module):
    """A policy's logits as a module's forward, so that torch.export can export them."""

    def __init__(self, policy: TensorPolicy):
        super().__init__()
        self.policy = policy

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        return self.policy.logits(observation)


def log_policy_model(
    module: LightningModule,
    *,
    run_id: str,
    tracking_uri: str,
    registered_model_name: str | None = None,
    name: str = "model",
):
    """Log ``module``'s policy to ``run_id`` as pickle-free MLflow PyTorch models (pt2:
    ``torch.export`` programs with a dynamic batch dimension): ``name`` maps observations to
    the greedy action (:class:`~hts_lightning.models.TensorPolicy`), and for a categorical
    policy ``"logits"`` to the action logits (what sampling needs). Returns
    the ``ModelInfo`` of ``name`` (``model_uri``: ``models:/<model id>``; ``runs:/<run
    id>/<name>`` also loads); ``registered_model_name`` registers that one."""
    import mlflow
    from mlflow.models import infer_signature

    policy = TensorPolicy.from_env(module.actor, module.create_env)
    # Two rows: torch.export would fix a batch dimension of size 1 to a constant.
    example = torch.stack([policy.example_observation] * 2)
    metadata = {
        "env_id": module.hparams.env_id,
        "env_kwargs": dict(module.hparams.env_kwargs or {}),
        "algorithm": type(module).__name__,
        "frames": int(getattr(module, "frames", 0)),
    }
    # Explicit requirements: inferring them costs MLflow ~10 s in a subprocess. The programs
    # need torch only, not hts-lightning.
    requirements = [f"torch=={torch.__version__.split('+')[0]}"]
    mlflow.set_tracking_uri(tracking_uri)  # log_model resolves the store from the global URI
    infos = {}
    # In the run's context, so that the models land in the run's experiment.
    with torch.no_grad(), mlflow.start_run(run_id=run_id):
        models = [(name, policy)]
        if policy.categorical:  # what sampling needs; a Gaussian's greedy action is its mean
            models.append(("logits", _Logits(policy)))
        for model_name, model in models:
            infos[model_name] = mlflow.pytorch.log_model(
                model,
                name=model_name,
                signature=infer_signature(example.numpy(), model(example).numpy()),
                input_example=example.numpy(),
                metadata=metadata,
                registered_model_name=registered_model_name if model_name == name else None,
                serialization_format="pt2",
                pip_requirements=requirements,
            )
    return infos[name]
