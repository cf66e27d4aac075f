"""The ``hts-rl`` command.

``hts-rl fit --config recipes/<name>.yaml [--model.init_args.lr 1e-4 ...]`` trains with
LightningCLI (Lightning 2.x has no ``lightning run`` command; this is its replacement):
``fit`` and ``--print_config`` are LightningCLI's own. Runs are tracked with MLflow
(``sqlite:///mlflow.db`` in the working directory unless ``MLFLOW_TRACKING_URI`` or
``--trainer.logger.init_args.tracking_uri`` says otherwise); ``--ckpt_path PATH`` continues
the checkpoint's MLflow run (``last``: the newest ``runs/**/last.ckpt``).

``hts-rl evaluate SOURCE [--episodes 10] [--sample] [--video out.gif]`` plays a checkpoint or
an MLflow model URI (``runs:/<run id>/model``) and logs the mean and std of its raw return.

``hts-rl collect`` runs the HTSCollector with a freshly initialized actor-critic on a gym or
Atari env and reports throughput and episode returns; it writes a JSON summary under
``--output``.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import signal
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch
from lightning import Callback, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.loggers import MLFlowLogger
from lightning.pytorch.utilities.exceptions import SIGTERMException

from hts_lightning.callbacks import StopOnSignal
from hts_lightning.collectors import EnvReplicaError, HTSCollector, WorkerDiedError
from hts_lightning.envs import env_factory
from hts_lightning.evaluate import evaluate
from hts_lightning.models import make_actor_critic
from hts_lightning.modules import OnPolicyModule
from hts_lightning.tracking import MLflowTracking, SaveConfigToMLflow
from hts_lightning.tracking.callback import CHECKPOINT_KEY


def _collect(args: argparse.Namespace) -> int:
    torch.manual_seed(args.seed)
    create_env = env_factory(args.env)
    probe = create_env()
    policy = make_actor_critic(probe.observation_spec, probe.action_spec).get_policy_operator()
    probe.close()
    frames_per_batch = args.num_envs * args.sync_interval
    returns: list[float] = []
    started = time.perf_counter()
    first_batch_at = None
    frames = 0
    with HTSCollector(
        create_env,
        policy,
        num_envs=args.num_envs,
        num_workers=args.num_workers,
        frames_per_batch=frames_per_batch,
        total_frames=args.frames,
        seed=args.seed,
    ) as collector:
        for index, batch in enumerate(collector):
            if first_batch_at is None:
                first_batch_at = time.perf_counter()
            else:
                frames += batch.numel()
            done = batch["next", "done"].squeeze(-1)
            returns.extend(batch["next", "episode_reward"].squeeze(-1)[done].tolist())
            collector.update_policy_weights_()
            elapsed = time.perf_counter() - first_batch_at
            fps = frames / elapsed if elapsed > 0 else float("nan")
            recent = statistics.fmean(returns[-20:]) if returns else float("nan")
            print(
                f"batch {index + 1}/{len(collector)}  frames {(index + 1) * frames_per_batch}  "
                f"fps {fps:.0f}  episodes {len(returns)}  return(last 20) {recent:.2f}",
                flush=True,
            )
    summary = {
        "env": args.env,
        "num_envs": args.num_envs,
        "num_workers": args.num_workers,
        "sync_interval": args.sync_interval,
        "frames": args.frames,
        "seed": args.seed,
        "steady_fps": frames / (time.perf_counter() - first_batch_at) if frames else None,
        "wall_seconds": time.perf_counter() - started,
        "episodes": len(returns),
        "episode_returns": returns,
    }
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"collect-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(summary, indent=2))
    print(f"Results written to {path.resolve()}")
    return 0


def build_collect_parser() -> argparse.ArgumentParser:
    collect = argparse.ArgumentParser(
        prog="hts-rl collect", description="Run the HTSCollector and report throughput."
    )
    collect.add_argument("--env", default="ALE/Pong-v5", help="gymnasium or ALE id")
    collect.add_argument("--num-envs", type=int, default=16)
    collect.add_argument("--num-workers", type=int, default=2)
    collect.add_argument("--sync-interval", type=int, default=128)
    collect.add_argument("--frames", type=int, default=16 * 128 * 24)
    collect.add_argument("--seed", type=int, default=0)
    collect.add_argument("--output", default="runs", help="folder for the JSON summary")
    return collect


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
    module_name, _, name = class_path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError):
        return False
    return isinstance(cls, type) and issubclass(cls, MLFlowLogger)


class _HtsCLI(LightningCLI):
    """LightningCLI with ``fit`` only, that checks a ``--ckpt_path`` before anything starts
    and continues the checkpoint's MLflow run when resuming."""

    @staticmethod
    def subcommands() -> dict[str, set[str]]:
        # The modules define no validation, test or predict steps: fit only (see _NOT_OFFERED).
        return {"fit": LightningCLI.subcommands()["fit"]}

    def parse_arguments(self, parser, args) -> None:
        from hts_lightning.checkpoint import read_checkpoint

        super().parse_arguments(parser, args)
        # Before LightningCLI reads the checkpoint's hyperparameters (right after parsing):
        # one line naming the file when it is missing, truncated, foreign or holds code to run.
        self._resumed_from = None
        subcommand = self.config.get("subcommand")
        config = self.config[subcommand] if subcommand else self.config
        if config.get("ckpt_path") == "last":
            config.ckpt_path = str(_latest_last_checkpoint())
            print(f"Resuming from {config.ckpt_path}")
        ckpt_path = config.get("ckpt_path")
        if ckpt_path and ckpt_path not in _LIGHTNING_CKPT_WORDS and "://" not in ckpt_path:
            self._resumed_from = read_checkpoint(ckpt_path)  # weights_only=True

    def before_instantiate_classes(self) -> None:
        config = self.config[self.subcommand] if self.subcommand else self.config
        logger = config.get("trainer", {}).get("logger")
        if self._resumed_from is None or not hasattr(logger, "class_path"):
            return
        init_args = logger.get("init_args")
        if (
            not _is_mlflow_logger(logger.class_path)
            or init_args is None
            or init_args.get("run_id") is not None
        ):
            return
        run = self._resumed_from.get(CHECKPOINT_KEY)
        if run and run.get("run_id"):
            # The run id is passed to the logger as an argument, before it starts a run.
            init_args.run_id = run["run_id"]
            print(f"Continuing MLflow run {run['run_id']} from {config.ckpt_path}")


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


def _fit(argv: list[str] | None) -> int:
    # Our checkpoints are taken between updates, after the optimizer step, by design.
    warnings.filterwarnings("ignore", message="Using ModelCheckpoint with manual optimization")
    stop = StopOnSignal()
    try:
        _run_cli(argv, stop)
    except SIGTERMException:
        print(f"hts-rl: stopped by {signal.Signals(stop.received).name}", file=sys.stderr)
        return 128 + stop.received
    except (EnvReplicaError, WorkerDiedError, FloatingPointError) as error:
        print(f"hts-rl: error: {error}", file=sys.stderr)
        return 1
    return 0


def _run_cli(argv: list[str] | None, stop: StopOnSignal) -> None:
    _HtsCLI(
        OnPolicyModule,
        subclass_mode_model=True,
        args=argv,
        trainer_defaults={
            "max_epochs": 1,  # one epoch = the module's total_frames
            "logger": {"class_path": "hts_lightning.tracking.MLflowLogger"},
            "callbacks": [
                _ReportWhereResultsAre(),
                ModelCheckpoint(save_last=True, every_n_train_steps=50),
                MLflowTracking(),
                stop,
            ],
        },
        save_config_callback=SaveConfigToMLflow,
        save_config_kwargs={"save_to_log_dir": False},
        auto_configure_optimizers=False,
    )


# LightningCLI subcommands that the modules cannot serve, and what to use instead.
_NOT_OFFERED = {
    "validate": "the modules define no validation step",
    "test": "the modules define no test step",
    "predict": "the modules define no predict step",
}


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    try:
        if not words or words[:1] in (["-h"], ["--help"]):
            print(f"usage: hts-rl {{fit,collect,evaluate}} ...\n\n{__doc__}")
            return 0
        if words[0] in _NOT_OFFERED:
            raise ValueError(
                f"hts-rl {words[0]} is not offered: {_NOT_OFFERED[words[0]]}. To measure a "
                "trained policy, play it: hts-rl evaluate CHECKPOINT_OR_MODEL_URI --episodes 10 "
                "(greedy, seeded, logged to MLflow as eval/*)."
            )
        if words[:1] == ["collect"]:
            return _collect(build_collect_parser().parse_args(words[1:]))
        if words[:1] == ["evaluate"]:
            return evaluate(words[1:])
        return _fit(argv)  # None: LightningCLI reads sys.argv itself
    except ValueError as error:
        print(f"hts-rl: error: {error}", file=sys.stderr)
        return 2


def run() -> None:
    """The ``hts-rl`` executable: :func:`main`, then a quick exit.

    The objects of a run (MLflow, SQLAlchemy, torch) are many: the interpreter's final garbage
    collection took 7-20 s on a loaded 2-core machine, after the work was done, and a faulted
    run must exit within seconds. Freezing them skips that pass; the OS frees the memory.
    """
    code = main()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    run()
