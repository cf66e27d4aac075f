"""The resolved recipe of ``hts-rl fit``, logged to MLflow as params and as an artifact."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from lightning import LightningModule, Trainer
from lightning.pytorch.cli import SaveConfigCallback
from lightning.pytorch.loggers import MLFlowLogger

__all__ = ["SaveConfigToMLflow", "flatten_config"]


def flatten_config(config: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested dicts as ``{"model.init_args.lr": "0.001", ...}``; lists and leaves as text.

    Example:
        >>> flatten_config({"model": {"init_args": {"lr": 0.001, "hidden_sizes": [64, 64]}}})
        {'model.init_args.lr': '0.001', 'model.init_args.hidden_sizes': '[64, 64]'}
    """
    flat: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten_config(value, prefix=f"{name}."))
        else:
            flat[name] = str(value)
    return flat


class SaveConfigToMLflow(SaveConfigCallback):
    """LightningCLI's config saver, writing to the MLflow run instead of a log folder.

    The full resolved recipe (every default filled in, every command-line override applied)
    goes to the run as params with dotted keys (``model.init_args.lr``,
    ``trainer.max_epochs``, ...) and as the artifact ``config/config.yaml``. A resumed run
    (``--ckpt_path``) keeps the params of its first config (MLflow params cannot change) and
    gets the resumed config as the artifact ``config/config-resumed-<UTC time>.yaml``.
    Without an MLflow logger it writes nothing. Made by LightningCLI
    (``save_config_callback=SaveConfigToMLflow``, ``save_config_kwargs={"save_to_log_dir":
    False}``), which passes the parser and the config.

    Example:
        >>> import tempfile
        >>> from jsonargparse import ArgumentParser
        >>> from lightning import Trainer
        >>> from hts_lightning.tracking import MLflowLogger
        >>> parser = ArgumentParser()
        >>> _ = parser.add_argument("--lr", type=float, default=0.001)
        >>> store = tempfile.mkdtemp()
        >>> logger = MLflowLogger(tracking_uri=f"sqlite:///{store}/mlflow.db", save_dir=store,
        ...                       artifact_location=f"{store}/artifacts")
        >>> trainer = Trainer(logger=logger, enable_progress_bar=False)
        >>> saver = SaveConfigToMLflow(parser, parser.parse_args([]), save_to_log_dir=False)
        >>> saver.save_config(trainer, None, "fit")
        >>> logger.experiment.get_run(logger.run_id).data.params
        {'lr': '0.001'}
        >>> [a.path for a in logger.experiment.list_artifacts(logger.run_id, "config")]
        ['config/config.yaml']
    """

    def save_config(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        logger = next((lg for lg in trainer.loggers if isinstance(lg, MLFlowLogger)), None)
        if logger is None:
            return
        text = self.parser.dump(self.config, skip_none=False)
        artifacts = logger.experiment.list_artifacts(logger.run_id, "config")
        filename = self.config_filename
        if any(Path(a.path).name == filename for a in artifacts):  # a resumed run
            filename = f"config-resumed-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.yaml"
        else:
            logger.log_hyperparams(flatten_config(self.config.as_dict()))
        logger.experiment.log_text(logger.run_id, text, f"config/{filename}")
