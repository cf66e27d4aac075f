"""``hts-rl fit``: LightningCLI with the run's defaults (MLflow, checkpoints,
signal handling) and the resume of the checkpoint's MLflow run. Imported by :mod:`hts_lightning.cli`
only for these commands: it is where Lightning, MLflow and the training modules load.
"""

from __future__ import annotations

import contextvars
import logging
import os
import pydoc
import signal
import sys
import warnings
from pathlib import Path

import torch.distributed as dist
from lightning import Callback, Trainer
from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.loggers import MLFlowLogger
from lightning.pytorch.utilities.exceptions import SIGTERMException

from hts_lightning.callbacks import StopOnSignal, UpdateCheckpoint
from hts_lightning.checkpoint import read_checkpoint
from hts_lightning.collectors import BatchTimeoutError, EnvReplicaError, WorkerDiedError
from hts_lightning.modules import OnPolicyModule
from hts_lightning.tracking import MLflowTracking, SaveConfigToMLflow
from hts_lightning.tracking.callback import CHECKPOINT_KEY


class _ReportWhereResultsAre(Callback):
    """Say where the run and the last checkpoint went, so a user need not search (at the end
    of fitting: the last checkpoint is written at the end of training)."""

    def on_fit_end(self, trainer: Trainer, pl_module) -> None:
        if not trainer.is_global_zero:
            return
        for logger in trainer.loggers:
            if isinstance(logger, MLFlowLogger):
                uri = logger.experiment.tracking_uri
                print(f"MLflow run {logger.run_id} (experiment {logger.experiment_id}) in {uri}")
                if uri.startswith("sqlite:"):
                    print(f"  browse it: mlflow ui --backend-store-uri {uri}")
            elif logger.log_dir:
                print(f"Metrics logged under {Path(logger.log_dir).resolve()}")
        checkpoint = trainer.checkpoint_callback
        if checkpoint is not None and checkpoint.last_model_path:
            print(f"Last checkpoint: {Path(checkpoint.last_model_path).resolve()}")


def _is_mlflow_logger(class_path: str) -> bool:
    cls = pydoc.locate(class_path)  # jsonargparse imported it already, checking the config
    return isinstance(cls, type) and issubclass(cls, MLFlowLogger)


class _HtsCLI(LightningCLI):
    """LightningCLI with ``fit`` only, that checks a ``--ckpt_path`` before anything starts
    and continues the checkpoint's MLflow run when resuming."""

    @staticmethod
    def subcommands() -> dict[str, set[str]]:
        # The modules define no validation, test or predict steps: fit only (see cli's
        # _NOT_OFFERED).
        return {"fit": LightningCLI.subcommands()["fit"]}

    def parse_arguments(self, parser, args) -> None:
        super().parse_arguments(parser, args)
        # Before LightningCLI reads the checkpoint's hyperparameters (right after parsing):
        # one line naming the file when it is missing, truncated, foreign or holds code to run.
        self._resumed_run_id = None  # of the MLflow run the checkpoint was written in
        config = self.config.fit  # the only subcommand
        if config.get("ckpt_path") == "last":
            config.ckpt_path = str(_latest_last_checkpoint())
            print(f"Resuming from {config.ckpt_path}")
        ckpt_path = config.get("ckpt_path")
        if ckpt_path and ckpt_path not in _LIGHTNING_CKPT_WORDS and "://" not in ckpt_path:
            run = read_checkpoint(ckpt_path).get(CHECKPOINT_KEY) or {}  # weights_only
            self._resumed_run_id = run.get("run_id")

    def before_instantiate_classes(self) -> None:
        config = self.config.fit
        logger = config.get("trainer", {}).get("logger")
        init_args = getattr(logger, "init_args", None)  # of one logger given by class_path
        if (
            self._resumed_run_id
            and init_args is not None
            and init_args.get("run_id") is None
            and _is_mlflow_logger(logger.class_path)
        ):
            # The run id is passed to the logger as an argument, before it starts a run.
            init_args.run_id = self._resumed_run_id
            print(f"Continuing MLflow run {init_args.run_id} from {config.ckpt_path}")


# ckpt_path values that Lightning resolves itself (no local file to check here).
_LIGHTNING_CKPT_WORDS = ("best", "hpc", "registry")


def _latest_last_checkpoint(root: Path = Path("runs")) -> Path:
    """``--ckpt_path last``: the newest ``last.ckpt`` under ``runs/`` (every run keeps its
    checkpoints in ``runs/<experiment>/<run>/checkpoints``)."""
    candidates = sorted(root.glob("**/last.ckpt"), key=lambda path: path.stat().st_mtime)
    if not candidates:
        raise ValueError(
            f"--ckpt_path last: no last.ckpt under {root.resolve()}. Run from the folder of the "
            "interrupted run, or pass the checkpoint's path."
        )
    return candidates[-1]


def fit(argv: list[str] | None) -> int:
    """Run ``hts-rl fit`` with ``argv`` (``None``: ``sys.argv``); the exit code."""
    # The console holds our lines: other libraries' notes on their own internals go.
    logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(
        lambda record: not record.getMessage().startswith("💡 Tip")
    )
    # A first run in a folder creates its mlflow.db and experiment: routine, not warnings.
    logging.getLogger("lightning.pytorch.loggers.mlflow").addFilter(
        lambda record: not record.getMessage().startswith("Experiment with name")
    )
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.WARNING)
    os.environ.setdefault("JSONARGPARSE_DEPRECATION_WARNINGS", "off")  # LightningCLI's calls
    for message in (
        r"`isinstance\(treespec, LeafSpec\)` is deprecated",  # Lightning 2.6 on torch 2.13
        r"The ``noload`` loader strategy is deprecated",  # MLflow's SQLAlchemy store
        # The modules log every update themselves, whatever log_every_n_steps says.
        r"The number of training batches \(\d+\) is smaller than the logging interval",
        # Our checkpoints are taken between updates, after the optimizer step, by design.
        "Using ModelCheckpoint with manual optimization",
    ):
        warnings.filterwarnings("ignore", message=message)
    stop = StopOnSignal()
    try:
        # In a context of its own: jsonargparse leaves its parser in a context variable, and
        # the parser reaches the CLI, the module and the collector's env snapshots, which then
        # outlived the run (ale_py's printed ~40 "leaked instance" lines at exit).
        contextvars.copy_context().run(
            _HtsCLI,
            OnPolicyModule,
            subclass_mode_model=True,
            args=argv,
            trainer_defaults={
                "max_epochs": 1,  # one epoch = the module's total_frames
                "logger": {"class_path": "hts_lightning.tracking.MLflowLogger"},
                "callbacks": [
                    _ReportWhereResultsAre(),
                    UpdateCheckpoint(save_last=True, every_n_updates=50),
                    MLflowTracking(),
                    stop,
                ],
            },
            save_config_callback=SaveConfigToMLflow,
            save_config_kwargs={"save_to_log_dir": False},
            auto_configure_optimizers=False,
        )
    except SIGTERMException:
        print(f"hts-rl: stopped by {signal.Signals(stop.received).name}", file=sys.stderr)
        return 128 + stop.received
    except (EnvReplicaError, WorkerDiedError, BatchTimeoutError, FloatingPointError) as error:
        print(f"hts-rl: error: {error}", file=sys.stderr)
        return 1
    except RuntimeError as error:
        # gloo's words when another rank's process ended mid-collective (torch 2.13); that
        # rank printed its own error. NCCL was not tried here (no GPU).
        if "Connection closed by peer" not in str(error):
            raise
        rank = dist.get_rank() if dist.is_initialized() else "?"
        print(
            f"hts-rl: error: rank {rank} lost its connection to another rank, which stopped "
            f"first (its error is above): {str(error).splitlines()[0]}",
            file=sys.stderr,
        )
        return 1
    return 0
