"""``hts-rl fit``: LightningCLI with the run's defaults (MLflow, checkpoints,
signal handling) and the resume of the checkpoint's MLflow run. Imported by :mod:`hts_lightning.cli`
only for these commands: it is where Lightning, MLflow and the training modules load.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import logging
import os
import pydoc
import signal
import sys
import traceback
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import jsonargparse
import torch.distributed as dist
from jsonargparse import DefaultHelpFormatter
from lightning import Callback, Trainer
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI
from lightning.pytorch.loggers import MLFlowLogger
from lightning.pytorch.utilities.exceptions import SIGTERMException

from hts_lightning._text import plain_text
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


# jsonargparse's lines about a Union that none of its types accepted (checked with jsonargparse
# 4.53.0): the types tried, the headings, Optional's NoneType and the given value again, a
# Namespace of every argument for a module.
_UNION_NOISE = (
    "Does not validate against any of the Union subtypes",
    "Subtypes: ",
    "Errors:",
    "- Expected a <class 'NoneType'>",
    "Given value type: ",
    "Given value: ",
)


def _one_line(message: str) -> str:
    """A jsonargparse error ``message`` in one line, without the Union's noise."""
    lines = (line.strip() for line in message.splitlines())
    kept = [line.removeprefix("- ") for line in lines if line and not line.startswith(_UNION_NOISE)]
    return " ".join(kept)


class _PlainHelpFormatter(DefaultHelpFormatter):
    """jsonargparse's help formatter, with the docstrings' reStructuredText markup taken out
    before the lines are wrapped (after, a ``:class:`~a.b.C``` broken over two lines is left).

    It overrides argparse.HelpFormatter's ``_expand_help`` (an argument's help) and
    ``_format_text`` (a description): private, but the ones jsonargparse's formatter overrides
    too (checked with jsonargparse 4.53.0 on Python 3.11); ``start_section`` gets a group's
    title (a module's docstring, for ``--model.help``).
    """

    def _expand_help(self, action: argparse.Action) -> str:
        return plain_text(super()._expand_help(action))

    def _format_text(self, text: str) -> str:
        return super()._format_text(plain_text(text))

    def start_section(self, heading: str | None) -> None:
        super().start_section(plain_text(heading) if heading else heading)


class _ArgumentParser(LightningArgumentParser):
    """LightningArgumentParser whose errors are one line and a tip, without the usage block,
    and whose help is plain text."""

    def __init__(self, *args, **kwargs):
        # Every parser of the command is of this class (jsonargparse makes a module's, for
        # --model.help, of its parent's class).
        kwargs.setdefault("formatter_class", _PlainHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str, ex: Exception | None = None) -> NoReturn:
        if not self.exit_on_error:  # an inner parser's error, which its caller handles
            super().error(message, ex)
        print(f"hts-rl: error: {_one_line(message)}", file=sys.stderr)
        print(
            "hts-rl: the options: hts-rl fit --help; a module's arguments: "
            "hts-rl fit --model.help PPO (or A2C, ACKTR)",
            file=sys.stderr,
        )
        self.exit(2)


_JSONARGPARSE_DIR = Path(jsonargparse.__file__).parent


def _raised_by_jsonargparse(error: BaseException) -> bool:
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and _JSONARGPARSE_DIR in Path(frames[-1].filename).parents


def _constructor_error(error: BaseException) -> BaseException | None:
    """The exception that a class of the config raised when jsonargparse instantiated it, and
    wrapped in its own (a Union's message, with every argument given); ``None`` when ``error``
    is no such wrapper.

    jsonargparse chains its error to the one it caught (``raise ... from``, checked with
    4.53.0): the first in the chain raised outside jsonargparse is the constructor's.
    """
    if not _raised_by_jsonargparse(error):
        return None
    cause = error.__cause__
    while cause is not None and _raised_by_jsonargparse(cause):
        cause = cause.__cause__
    return cause


class _HeldBack(logging.Filter):
    """Holds a logger's records back until :meth:`release`; those never released are dropped."""

    def __init__(self, logger: logging.Logger):
        super().__init__()
        self.logger = logger
        self.holding = True
        self.records: list[logging.LogRecord] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if self.holding:
            self.records.append(record)
        return not self.holding

    def release(self) -> None:
        self.holding = False
        for record in self.records:
            self.logger.handle(record)


@contextlib.contextmanager
def _held_back(logger: logging.Logger) -> Iterator[_HeldBack]:
    held = _HeldBack(logger)
    logger.addFilter(held)
    try:
        yield held
    finally:
        logger.removeFilter(held)


class _HtsCLI(LightningCLI):
    """LightningCLI with ``fit`` only, that checks a ``--ckpt_path`` before anything starts
    and continues the checkpoint's MLflow run when resuming.

    A bad argument that a module's constructor refuses ends the command with the module's own
    message, one line; Lightning's "Seed set to N" (logged before the classes are made) is held
    back until they are.
    """

    def __init__(self, *args, seed_message: _HeldBack, **kwargs):
        self._seed_message = seed_message
        super().__init__(*args, **kwargs)

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

    def instantiate_classes(self) -> None:
        try:
            super().instantiate_classes()
        except Exception as error:
            raised = _constructor_error(error)
            if raised is None:
                raise
            # The constructor's message names the argument and what to do; jsonargparse's
            # wrapper adds the Union's types and a dump of every argument.
            ours = isinstance(raised, (ValueError, TypeError))  # the modules' refusals
            message = str(raised) if ours else f"{type(raised).__name__}: {raised}"
            raise ValueError(message) from raised
        self._seed_message.release()


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
        with _held_back(logging.getLogger("lightning.fabric.utilities.seed")) as seed_message:
            contextvars.copy_context().run(
                _HtsCLI,
                OnPolicyModule,
                seed_message=seed_message,
                parser_class=_ArgumentParser,
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
