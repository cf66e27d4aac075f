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
import json
import multiprocessing
import multiprocessing.forkserver
import os
import statistics
import sys
import time
from pathlib import Path

from hts_lightning._text import plain_text


def _collect(args: argparse.Namespace) -> int:
    import torch

    from hts_lightning.collectors import HTSCollector
    from hts_lightning.envs import env_factory, episode_ends
    from hts_lightning.models import make_actor_critic

    torch.manual_seed(args.seed)
    create_env = env_factory(args.env)
    probe = create_env()
    policy = make_actor_critic(probe.observation_spec, probe.action_spec).get_policy_operator()
    probe.close()
    frames_per_batch = args.num_envs * args.sync_interval
    returns: list[float] = []
    started = time.perf_counter()
    frames = 0  # after the first batch: the steady rate leaves start-up out
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
            if index == 0:
                first_batch_at = time.perf_counter()
            else:
                frames += batch.numel()
            ended = episode_ends(batch["next"])
            returns.extend(batch["next", "episode_reward"].squeeze(-1)[ended].tolist())
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
        **{key: value for key, value in vars(args).items() if key != "output"},
        "steady_fps": frames / (time.perf_counter() - first_batch_at) if frames else None,
        "wall_seconds": time.perf_counter() - started,
        "episodes": len(returns),
        "episode_returns": returns,
    }
    path = Path(args.output) / f"collect-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
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


def _start_forkserver_early() -> None:
    """Start the collectors' forkserver now, before this process imports Lightning and MLflow.

    The server imports torch, TorchRL and the env factories once (HTSCollector's default start
    method forks every worker from it); started here, it does so on another core while this
    process imports the rest, instead of after, on the way to the first batch.
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return
    multiprocessing.get_context("forkserver").set_forkserver_preload(
        ["hts_lightning.collectors.backends.table"]  # backends.pipes.PRELOAD
    )
    multiprocessing.forkserver.ensure_running()


# LightningCLI subcommands that the modules cannot serve: the step each would need.
_NOT_OFFERED = {"validate": "validation", "test": "test", "predict": "predict"}
_COMMANDS = ("fit", "collect", "evaluate")


def _option_values(words: list[str], names: tuple[str, ...]) -> list[str]:
    """The values given to the options ``names`` in ``words`` (``--name V`` or ``--name=V``)."""
    values = []
    for index, word in enumerate(words):
        name, equals, value = word.partition("=")
        if name in names and equals:
            values.append(value)
        elif word in names and index + 1 < len(words):
            values.append(words[index + 1])
    return values


def _is_inline_config(value: str) -> bool:
    """Whether jsonargparse would read ``value`` as a configuration itself, not a path: YAML
    that is more than a string (``--config '{trainer: {max_epochs: 2}}'``)."""
    import yaml  # 10 ms; only when a --config value is no file

    try:
        return not isinstance(yaml.safe_load(value), str)
    except yaml.YAMLError:
        return True  # not a path either: jsonargparse says what is wrong with it


def _check_config_files(words: list[str]) -> None:
    """Every ``--config`` of ``hts-rl fit`` names a readable file: said here, in milliseconds,
    rather than by jsonargparse after the seconds of importing Lightning and the modules."""
    for value in _option_values(words, ("-c", "--config")):
        path = Path(value)
        if path.is_file() and os.access(path, os.R_OK):
            continue
        if path.is_dir():
            raise ValueError(f"--config {value}: {path.resolve()} is a folder; pass a YAML file.")
        if path.exists():
            raise ValueError(f"--config {value}: {path.resolve()} cannot be read (permissions).")
        if not _is_inline_config(value):
            raise ValueError(
                f"--config {value}: no such file ({path.resolve()}). The recipes are in the "
                "repository's recipes/ folder, e.g. --config recipes/cartpole_ppo.yaml."
            )


def _check_command(words: list[str]) -> None:
    """The first word names a command (or is an option of ``hts-rl fit``'s parser)."""
    if words[0].startswith("-") or words[0] in _COMMANDS:
        return
    raise ValueError(
        f"no command {words[0]!r}: hts-rl's commands are {', '.join(_COMMANDS)} "
        "(hts-rl --help says what each does)."
    )


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    try:
        if not words or words[:1] in (["-h"], ["--help"]):
            print(f"usage: hts-rl {{fit,collect,evaluate}} ...\n\n{plain_text(__doc__)}")
            return 0
        if words[0] in _NOT_OFFERED:
            raise ValueError(
                f"hts-rl {words[0]} is not offered: the modules define no {_NOT_OFFERED[words[0]]} "
                "step. To measure a trained policy, play it: hts-rl evaluate "
                "CHECKPOINT_OR_MODEL_URI --episodes 10 (greedy, seeded, logged to MLflow as "
                "eval/*)."
            )
        _check_command(words)
        if words[:1] == ["collect"]:
            return _collect(build_collect_parser().parse_args(words[1:]))
        if words[:1] == ["evaluate"]:
            from hts_lightning.evaluate import evaluate

            return evaluate(words[1:])
        if not {"-h", "--help"} & set(words):
            _check_config_files(words)
        if not {"-h", "--help", "--print_config"} & set(words):
            _start_forkserver_early()
        from hts_lightning._fit import fit  # Lightning, MLflow, the modules: seconds

        return fit(argv)  # None: LightningCLI reads sys.argv itself
    except ValueError as error:
        print(f"hts-rl: error: {error}", file=sys.stderr)
        return 2


def run() -> None:
    """The ``hts-rl`` executable: :func:`main`, then a quick exit.

    The objects of a run (MLflow, SQLAlchemy, torch) are many: the interpreter's final garbage
    collection took 7-20 s on a loaded 2-core machine, after the work was done, and a faulted
    run must exit within seconds. Freezing them skips that pass; the OS frees the memory. One
    collection first (0.4 s after a Pong run, quiet machine) frees the run's cycles: left
    alive, the env snapshots in them (ale_py's ALEState) made nanobind print ~40 lines of
    "leaked instance" warnings at exit.
    """
    code = main()
    gc.collect()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    run()
