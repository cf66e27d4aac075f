"""``hts-rl evaluate``: play a trained policy for N episodes, report and log its raw return.

The policy comes from a Lightning checkpoint (``runs/.../last.ckpt``; the module class and the
env id are read from it) or from an MLflow model URI (``runs:/<run id>/model``,
``models:/<name>/<version>``, ``models:/<model id>``; the env id is in the model's metadata).
Actions are greedy (argmax of the logits) or, with ``--sample``, drawn from the policy with a
generator seeded by ``--seed``; the env is seeded by ``--seed`` too, so an evaluation is
repeatable. The mean and the (population) standard deviation of the raw episode return are
printed and logged to MLflow as a new run, nested under the training run when that run is in
the same store (tag ``mlflow.parentRunId``), else in the experiment ``--experiment-name``.
``--video out.gif`` records the first episode as a GIF (Pillow), logged as an artifact too.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from hts_lightning.envs import env_factory
from hts_lightning.models.tensor_policy import TensorPolicy
from hts_lightning.tracking.callback import CHECKPOINT_KEY
from hts_lightning.tracking.mlflow import resolve_tracking_uri

__all__ = ["build_evaluate_parser", "evaluate", "load_policy", "run_episodes"]


@dataclass
class _Loaded:
    policy: TensorPolicy
    env_id: str
    env_kwargs: dict = field(default_factory=dict)
    training_run_id: str | None = None


def build_evaluate_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hts-rl evaluate",
        description="Play a trained policy for N episodes; print and log the raw return.",
    )
    parser.add_argument(
        "source", help="checkpoint file, or MLflow model URI such as runs:/<run id>/model"
    )
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument(
        "--sample", action="store_true", help="sample actions from the policy (default: greedy)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seeds the env and the sampling")
    parser.add_argument("--env", default=None, help="env id (default: the one trained on)")
    parser.add_argument("--video", default=None, help="write the first episode to this .gif")
    parser.add_argument("--video-fps", type=int, default=30)
    parser.add_argument("--video-max-frames", type=int, default=1000)
    parser.add_argument(
        "--tracking-uri",
        default=None,
        help="MLflow store (default: MLFLOW_TRACKING_URI, else sqlite:///mlflow.db here)",
    )
    parser.add_argument(
        "--experiment-name", default="hts-rl", help="for a run with no training run to nest in"
    )
    parser.add_argument("--no-mlflow", action="store_true", help="print only, log nothing")
    return parser


def _is_model_uri(source: str) -> bool:
    return ":/" in source and not Path(source).exists()


def load_policy(source: str, *, tracking_uri: str) -> _Loaded:
    """The policy, env and training run of a checkpoint path or an MLflow model URI."""
    if _is_model_uri(source):
        import mlflow

        mlflow.set_tracking_uri(tracking_uri)
        info = mlflow.models.get_model_info(source)
        policy = mlflow.pytorch.load_model(source, map_location="cpu")
        if not isinstance(policy, TensorPolicy):
            raise ValueError(
                f"{source} holds a {type(policy).__name__}, not a policy logged by hts-rl fit "
                "(a TensorPolicy); evaluate a model that hts-rl logged, or its checkpoint."
            )
        metadata = info.metadata or {}
        return _Loaded(
            policy, metadata.get("env_id"), metadata.get("env_kwargs") or {}, info.run_id
        )
    path = Path(source)
    if not path.is_file():
        raise ValueError(
            f"no checkpoint file at {source!r}, and it is not an MLflow model URI: pass a "
            "checkpoint (e.g. runs/<experiment id>/<run id>/checkpoints/last.ckpt) or a URI "
            "such as runs:/<run id>/model."
        )
    checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    module_class = _module_class(checkpoint, path)
    module = module_class.load_from_checkpoint(path, map_location="cpu")
    probe = module.create_env()
    observation = probe.reset()["observation"]
    probe.close()
    policy = TensorPolicy(module.actor, observation_ndim=observation.dim())
    run = checkpoint.get(CHECKPOINT_KEY) or {}
    return _Loaded(
        policy,
        module.hparams.env_id,
        dict(module.hparams.env_kwargs or {}),
        run.get("run_id"),
    )


def _module_class(checkpoint: dict, path: Path):
    name = checkpoint.get("hts_module_class") or checkpoint.get("hyper_parameters", {}).get(
        "_class_path"
    )
    if not name:
        raise ValueError(
            f"{path} does not say which module class it holds (no 'hts_module_class'): was it "
            "written by hts-rl fit? Use a checkpoint of an hts_lightning module."
        )
    module_name, _, class_name = name.rpartition(".")
    return getattr(importlib.import_module(module_name), class_name)


def run_episodes(
    policy: TensorPolicy,
    create_env,
    *,
    episodes: int,
    greedy: bool = True,
    seed: int = 0,
    record_frames: int = 0,
) -> tuple[list[float], list[int], list]:
    """Play ``episodes`` episodes; returns the raw returns, the lengths and, when
    ``record_frames > 0``, up to that many RGB frames of the first episode.

    The raw return is the env's ``"episode_reward"`` (unclipped for Atari), else the sum of
    the rewards.
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    env = create_env()
    env.set_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    returns: list[float] = []
    lengths: list[int] = []
    frames: list = []
    data = env.reset()
    try:
        for episode in range(episodes):
            total, length = 0.0, 0
            recording = episode == 0 and record_frames > 0
            while True:
                if recording and len(frames) < record_frames:
                    frames.append(_frame(env))
                logits = policy.logits(data["observation"].unsqueeze(0))[0]
                if greedy:
                    action = logits.argmax(-1)
                else:
                    # One draw per row: per player when the logits are [players, actions].
                    action = torch.multinomial(logits.softmax(-1), 1, generator=generator)
                    action = action.squeeze(-1)
                one_hot = torch.nn.functional.one_hot(action, logits.shape[-1])
                data["action"] = one_hot.to(env.action_spec.dtype)
                data, following = env.step_and_maybe_reset(data)
                step = data["next"]
                total += float(step["reward"].sum())
                length += 1
                if bool(step["done"].any()):
                    if "episode_reward" in step:
                        total = float(step["episode_reward"].sum())
                    returns.append(total)
                    lengths.append(length)
                    data = following
                    break
                data = following
    finally:
        env.close()
    return returns, lengths, frames


def _frame(env):
    """An RGB frame ``[H, W, 3]`` of a TorchRL-wrapped gymnasium env."""
    base = getattr(env, "base_env", env)
    gym_env = getattr(base, "_env", None)
    if gym_env is None:
        raise ValueError(f"a video needs a gymnasium env; {type(base).__name__} has no frames.")
    unwrapped = gym_env.unwrapped
    if hasattr(unwrapped, "ale"):  # Atari: the emulator screen, whatever the render mode
        return unwrapped.ale.getScreenRGB()
    from gymnasium.error import DependencyNotInstalled

    unwrapped.render_mode = "rgb_array"
    try:
        frame = unwrapped.render()
    except DependencyNotInstalled as error:
        name = unwrapped.spec.id if unwrapped.spec else "this env"
        raise ValueError(
            f"a video of {name} needs its renderer, and {error}; or evaluate without --video."
        ) from None
    if frame is None:
        raise ValueError("this env renders no RGB frames; evaluate without --video.")
    return frame


def _write_gif(frames: list, path: Path, fps: int) -> None:
    try:
        from PIL import Image
    except ImportError:
        raise ValueError(
            "--video writes a GIF with Pillow, which is not installed: pip install pillow."
        ) from None
    images = [Image.fromarray(frame) for frame in frames]
    images[0].save(
        path, save_all=True, append_images=images[1:], duration=round(1000 / fps), loop=0
    )


def _log_to_mlflow(args, loaded: _Loaded, returns, lengths, video: Path | None, uri: str) -> str:
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param
    from mlflow.exceptions import MlflowException
    from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME

    client = MlflowClient(uri)
    parent = None
    if loaded.training_run_id is not None:
        try:
            parent = client.get_run(loaded.training_run_id)
        except MlflowException:
            print(f"Training run {loaded.training_run_id} is not in {uri}: logging a new run.")
    tags = {MLFLOW_RUN_NAME: f"evaluate-{'sample' if args.sample else 'greedy'}"}
    if parent is not None:
        experiment_id = parent.info.experiment_id
        tags[MLFLOW_PARENT_RUN_ID] = parent.info.run_id
        tags[MLFLOW_RUN_NAME] = f"{parent.info.run_name}-{tags[MLFLOW_RUN_NAME]}"
    else:
        experiment = client.get_experiment_by_name(args.experiment_name)
        experiment_id = (
            experiment.experiment_id
            if experiment is not None
            else client.create_experiment(args.experiment_name)
        )
    run = client.create_run(experiment_id, tags=tags)
    run_id = run.info.run_id
    params = {
        "source": args.source,
        "env_id": loaded.env_id,
        "episodes": args.episodes,
        "actions": "sample" if args.sample else "greedy",
        "seed": args.seed,
    }
    metrics = {
        "eval/return_mean": statistics.fmean(returns),
        "eval/return_std": statistics.pstdev(returns),
        "eval/length_mean": statistics.fmean(lengths),
        "eval/episodes": float(len(returns)),
    }
    now = int(1000 * time.time())
    batch = [Metric(k, v, now, 0) for k, v in metrics.items()]
    batch += [Metric("eval/episode_return", r, now, i) for i, r in enumerate(returns)]
    client.log_batch(run_id, metrics=batch, params=[Param(k, str(v)) for k, v in params.items()])
    if video is not None:
        client.log_artifact(run_id, str(video), "video")
    client.set_terminated(run_id, "FINISHED")
    return run_id


def evaluate(argv: list[str]) -> int:
    """Run ``hts-rl evaluate`` with the command-line words ``argv``; returns the exit code."""
    args = build_evaluate_parser().parse_args(argv)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    if args.video is not None and not args.video.endswith(".gif"):
        raise ValueError(
            f"--video {args.video}: only GIF is written (Pillow); MP4 would need ffmpeg, which "
            "is not a dependency. Name the file *.gif."
        )
    uri = resolve_tracking_uri(args.tracking_uri)
    loaded = load_policy(args.source, tracking_uri=uri)
    env_id = args.env or loaded.env_id
    if env_id is None:
        raise ValueError(f"{args.source} does not name its env: pass --env (e.g. CartPole-v1).")
    # The trained env's arguments (e.g. Atari's sticky actions) apply to that env only.
    env_kwargs = loaded.env_kwargs if env_id == loaded.env_id else {}
    create_env = env_factory(env_id, **env_kwargs)
    returns, lengths, frames = run_episodes(
        loaded.policy,
        create_env,
        episodes=args.episodes,
        greedy=not args.sample,
        seed=args.seed,
        record_frames=args.video_max_frames if args.video else 0,
    )
    mean, std = statistics.fmean(returns), statistics.pstdev(returns)
    mode = "sampled" if args.sample else "greedy"
    print(
        f"{env_id}: return {mean:.2f} +- {std:.2f} (mean +- std) over {len(returns)} episodes, "
        f"{mode} actions, mean length {statistics.fmean(lengths):.1f}"
    )
    video = None
    if args.video:
        video = Path(args.video)
        video.parent.mkdir(parents=True, exist_ok=True)
        _write_gif(frames, video, args.video_fps)
        print(f"Video of episode 1 ({len(frames)} frames): {video.resolve()}")
    if not args.no_mlflow:
        run_id = _log_to_mlflow(args, loaded, returns, lengths, video, uri)
        print(f"Logged to MLflow run {run_id} in {uri}")
    return 0 if all(math.isfinite(r) for r in returns) else 1
