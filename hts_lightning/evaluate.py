"""``hts-rl evaluate``: play a trained policy for N episodes, report and log its raw return.

The policy comes from a Lightning checkpoint (``runs/.../last.ckpt``, read with
``weights_only=True``; the module class, only one of hts_lightning's, and the env id are read
from it) or from a pickle-free MLflow model URI (``runs:/<run id>/model``,
``models:/<name>/<version>``, ``models:/<model id>``; the env id is in the model's metadata).
Actions are greedy or, with ``--sample``, drawn from the policy's logits with a generator
seeded by ``--seed``, in the form of the env's action spec; the env is seeded by ``--seed``
too, so an evaluation is repeatable. The mean and the (population) standard deviation of the
raw episode return are printed and logged to MLflow as a new run (``tracking.log_evaluation``),
nested under the training run when that run is in the same store (tag
``mlflow.parentRunId``), else in the experiment ``--experiment-name``.
``--video out.gif`` records the first episode as a GIF (Pillow), logged as an artifact too.
"""

from __future__ import annotations

import argparse
import math
import os
import pydoc
import statistics
from pathlib import Path
from typing import NamedTuple

import torch
from torchrl.data import (
    Bounded,
    Categorical,
    MultiCategorical,
    MultiOneHot,
    OneHot,
    TensorSpec,
    Unbounded,
)

from hts_lightning.checkpoint import MODULE_CLASS_KEY, read_checkpoint
from hts_lightning.envs import env_factory, episode_ends
from hts_lightning.import_path import is_import_path
from hts_lightning.models.tensor_policy import TensorPolicy
from hts_lightning.tracking.callback import CHECKPOINT_KEY
from hts_lightning.tracking.evaluation import log_evaluation
from hts_lightning.tracking.mlflow import resolve_tracking_uri

__all__ = [
    "LoadedPolicy",
    "build_evaluate_parser",
    "env_action",
    "evaluate",
    "load_policy",
    "run_episodes",
]


def build_evaluate_parser() -> argparse.ArgumentParser:
    """The command line of ``hts-rl evaluate`` (``--help`` prints it)."""
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
    parser.add_argument("--env", help="env id (default: the one trained on)")
    parser.add_argument("--video", help="write the first episode to this .gif")
    parser.add_argument("--video-fps", type=int, default=30)
    parser.add_argument("--video-max-frames", type=int, default=1000)
    parser.add_argument(
        "--tracking-uri",
        help="MLflow store (default: MLFLOW_TRACKING_URI, else sqlite:///mlflow.db here)",
    )
    parser.add_argument(
        "--experiment-name", default="hts-rl", help="for a run with no training run to nest in"
    )
    parser.add_argument("--no-mlflow", action="store_true", help="print only, log nothing")
    return parser


class LoadedPolicy(NamedTuple):
    """What :func:`load_policy` returns; it unpacks as a tuple too.

    Example:
        >>> loaded = LoadedPolicy(torch.nn.Identity(), "CartPole-v1", {}, None)
        >>> policy, env_id, env_kwargs, training_run_id = loaded
        >>> loaded.env_id
        'CartPole-v1'
    """

    policy: torch.nn.Module
    env_id: str | None
    env_kwargs: dict
    training_run_id: str | None


def load_policy(
    source: str, *, tracking_uri: str, sample: bool = False, env: str | None = None
) -> LoadedPolicy:
    """The policy, env id, env arguments and training run id of a checkpoint path or an MLflow
    model URI. The policy maps observations to greedy action indices; its ``logits`` gives
    the action logits (for an MLflow model, only when ``sample``).

    Nothing from the source is executed: a checkpoint is read with ``weights_only=True``
    (:func:`~hts_lightning.checkpoint.read_checkpoint`) and only a module class of
    hts_lightning is built from it; an MLflow model must be a pickle-free ``pt2`` one.
    """
    if ":/" in source and not Path(source).exists():  # an MLflow model URI
        return _load_mlflow_policy(source, tracking_uri=tracking_uri, sample=sample)
    path = Path(source)
    if not path.exists():
        raise ValueError(
            f"no checkpoint file at {source!r}, and it is not an MLflow model URI: pass a "
            "checkpoint (e.g. runs/<experiment id>/<run id>/checkpoints/last.ckpt) or a URI "
            "such as runs:/<run id>/model."
        )
    checkpoint = read_checkpoint(path)
    module_class = _module_class(checkpoint[MODULE_CLASS_KEY], path)
    # LightningCLI adds "_class_path" and "_instantiator"; the rest are the module's arguments.
    hparams = {
        k: v for k, v in checkpoint.get("hyper_parameters", {}).items() if not k.startswith("_")
    }
    if hparams.get("network") is not None:
        raise ValueError(
            f"{path} was trained with your own network {hparams['network']!r}: hts-rl evaluate "
            "imports no code a checkpoint names. Evaluate the run's MLflow model (runs:/<run "
            "id>/model, a program without code to import), or load the checkpoint in Python "
            "with the module class's load_from_checkpoint."
        )
    if hparams.get("env_id") != env:
        _refuse_user_env(hparams.get("env_id"), path)
    module = module_class(**hparams)
    module.load_state_dict(checkpoint["state_dict"])
    run = checkpoint.get(CHECKPOINT_KEY) or {}
    return LoadedPolicy(
        TensorPolicy.from_env(module.actor, module.create_env),
        module.hparams.env_id,
        dict(module.hparams.env_kwargs or {}),
        run.get("run_id"),
    )


def _load_mlflow_policy(source: str, *, tracking_uri: str, sample: bool) -> LoadedPolicy:
    import mlflow
    from mlflow.exceptions import MlflowException

    mlflow.set_tracking_uri(tracking_uri)
    info = mlflow.models.get_model_info(source)
    metadata = info.metadata or {}

    def load(uri: str) -> torch.nn.Module:
        # MLflow's own guard: a pt2 archive is checked to be pickle-free, a pickle refused.
        # Only this one variable is set and put back (patching all of os.environ would
        # briefly empty it for other threads).
        previous = os.environ.get("MLFLOW_ALLOW_PICKLE_DESERIALIZATION")
        os.environ["MLFLOW_ALLOW_PICKLE_DESERIALIZATION"] = "false"
        try:
            return mlflow.pytorch.load_model(uri)
        except MlflowException as error:
            raise ValueError(
                f"{uri} cannot be loaded without running code in it "
                f"({error.message.splitlines()[0]}); hts-rl evaluate loads only the "
                "pickle-free (pt2) models that hts-rl fit logs. Evaluate the run's checkpoint "
                "instead."
            ) from None
        finally:
            if previous is None:
                os.environ.pop("MLFLOW_ALLOW_PICKLE_DESERIALIZATION")
            else:
                os.environ["MLFLOW_ALLOW_PICKLE_DESERIALIZATION"] = previous

    policy = load(source)
    if sample:
        # The logits are their own model, logged beside "model" in the same run.
        logits_uri = f"runs:/{info.run_id}/logits"
        try:
            mlflow.models.get_model_info(logits_uri)
        except MlflowException:
            raise ValueError(
                f"--sample needs the policy's logits, and run {info.run_id} has no 'logits' "
                f"model beside {source}: evaluate greedily, or evaluate the run's checkpoint."
            ) from None
        # A submodule beside the greedy program, read as TensorPolicy.logits is.
        policy.logits = load(logits_uri)
    return LoadedPolicy(
        policy, metadata.get("env_id"), metadata.get("env_kwargs") or {}, info.run_id
    )


def _refuse_user_env(env_id: str | None, source) -> None:
    """A run of your own env names it by import path: importing it runs its module's code,
    which hts-rl evaluate does only when asked on the command line (``--env``)."""
    if env_id is not None and is_import_path(env_id):
        raise ValueError(
            f"{source} was trained on your own env {env_id!r}: hts-rl evaluate imports it only "
            f"when you name it: pass --env {env_id}"
        )


def _module_class(name: str, path: Path):
    """The class a checkpoint names, imported only from hts_lightning: an arbitrary module
    name would run that module's import-time code."""
    from hts_lightning.modules import OnPolicyModule

    if name.partition(".")[0] != "hts_lightning":
        raise ValueError(
            f"{path} names the module class {name!r}, outside hts_lightning; hts-rl evaluate "
            "imports only hts_lightning's own classes (A2C, PPO, ACKTR)."
        )
    cls = pydoc.locate(name)  # None for a module or class that does not exist
    if not (isinstance(cls, type) and issubclass(cls, OnPolicyModule)):
        raise ValueError(
            f"{path} names {name!r}, which is not an hts_lightning training module; use a "
            "checkpoint written by hts-rl fit."
        )
    return cls


def env_action(action: torch.Tensor, spec: TensorSpec) -> torch.Tensor:
    """The greedy ``action`` of a :class:`~hts_lightning.models.TensorPolicy` in the form of
    the env's action spec: one-hot for a ``OneHot`` spec (``[actions]`` or ``[players,
    actions]``) from the index, the index for a ``Categorical`` one, the indices for a
    ``MultiCategorical`` one, the heads' one-hot vectors side by side for a ``MultiOneHot``
    one, and a box action clipped to a ``Bounded`` spec's bounds.

    Example:
        >>> env_action(torch.tensor([2, 0]), OneHot(3, shape=(2, 3), dtype=torch.int64))
        tensor([[0, 0, 1],
                [1, 0, 0]])
        >>> env_action(torch.tensor(1), Categorical(4))
        tensor(1)
        >>> env_action(torch.tensor([1, 2]), MultiOneHot(nvec=[2, 3], dtype=torch.int64))
        tensor([0, 1, 0, 0, 1])
        >>> env_action(torch.tensor([3.0]), Bounded(low=-2.0, high=2.0, shape=(1,)))
        tensor([2.])
    """
    if isinstance(spec, (Bounded, Unbounded)) and spec.dtype.is_floating_point:
        if action.shape != spec.shape:
            raise ValueError(
                f"the policy's action has shape {tuple(action.shape)}, this env's "
                f"{tuple(spec.shape)}: was the policy trained on another env (see --env)?"
            )
        if isinstance(spec, Bounded):
            action = action.clamp(spec.space.low, spec.space.high)
        return action.to(spec.dtype)
    if not isinstance(spec, (OneHot, Categorical, MultiCategorical)):
        raise ValueError(
            "hts-rl evaluate plays OneHot, Categorical, MultiCategorical, MultiOneHot and box "
            f"actions; this env's action spec is a {type(spec).__name__}."
        )
    if action.is_floating_point():
        raise ValueError(
            "the policy gives box actions and this env takes discrete ones: was the policy "
            "trained on another env (see --env)?"
        )
    if isinstance(spec, MultiOneHot):
        counts = torch.tensor(spec.nvec)
    elif isinstance(spec, MultiCategorical):
        counts = spec.nvec
    else:
        counts = spec.space.n
    if action.lt(0).any() or action.ge(counts).any():
        raise ValueError(
            f"the policy chose action {action.tolist()}, outside this env's actions ("
            f"{counts.tolist() if torch.is_tensor(counts) else counts}): was the policy "
            "trained on another env (see --env)?"
        )
    if isinstance(spec, MultiOneHot):
        one_hot = torch.nn.functional.one_hot
        action = torch.cat([one_hot(a, int(n)) for a, n in zip(action, counts, strict=True)])
    elif isinstance(spec, OneHot):
        action = torch.nn.functional.one_hot(action, spec.space.n)
    return action.to(spec.dtype).reshape(spec.shape)


def run_episodes(
    policy: torch.nn.Module,
    create_env,
    *,
    episodes: int,
    greedy: bool = True,
    seed: int = 0,
    record_frames: int = 0,
) -> tuple[list[float], list[int], list]:
    """Play ``episodes`` episodes; returns the raw returns, the lengths and, when
    ``record_frames > 0``, up to that many RGB frames of the first episode.

    ``policy(observations)`` gives the greedy action indices; ``policy.logits`` is used to
    sample when ``greedy`` is false. Actions take the form of the env's action spec
    (:func:`env_action`).

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
    total, length = 0.0, 0  # of the episode under way
    try:
        while len(returns) < episodes:
            if not returns and len(frames) < record_frames:  # the first episode's
                frames.append(_frame(env))
            observation = data["observation"].unsqueeze(0)
            if greedy:
                action = policy(observation)[0]
            else:
                # One draw per row: per player when the logits are [players, actions].
                probabilities = policy.logits(observation)[0].softmax(-1)
                action = torch.multinomial(probabilities, 1, generator=generator).squeeze(-1)
            data["action"] = env_action(action, env.action_spec)
            stepped, data = env.step_and_maybe_reset(data)
            step = stepped["next"]
            total += float(step["reward"].sum())
            length += 1
            if bool(episode_ends(step).any()):
                if "episode_reward" in step:
                    total = float(step["episode_reward"].sum())
                returns.append(total)
                lengths.append(length)
                total, length = 0.0, 0
    finally:
        env.close()
    return returns, lengths, frames


def _frame(env):
    """An RGB frame ``[H, W, 3]`` from the env's own ``render()`` (gymnasium, behind TorchRL)."""
    import gymnasium

    unwrapped = getattr(env, "unwrapped", None)  # TorchRL's wrappers pass it through
    if not isinstance(unwrapped, gymnasium.Env):
        raise ValueError(f"a video needs a gymnasium env; {type(env).__name__} renders no frames.")
    from gymnasium.error import DependencyNotInstalled

    # Our env factories take no render_mode: ask for RGB arrays on the built env.
    if unwrapped.render_mode is None and "rgb_array" in unwrapped.metadata.get("render_modes", []):
        unwrapped.render_mode = "rgb_array"
    try:
        frame = unwrapped.render() if unwrapped.render_mode == "rgb_array" else None
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
    policy, trained_env_id, env_kwargs, training_run_id = load_policy(
        args.source, tracking_uri=uri, sample=args.sample, env=args.env
    )
    if args.env is None:
        _refuse_user_env(trained_env_id, args.source)
    env_id = args.env or trained_env_id
    if env_id is None:
        raise ValueError(f"{args.source} does not name its env: pass --env (e.g. CartPole-v1).")
    # The trained env's arguments (e.g. Atari's sticky actions) apply to that env only.
    create_env = env_factory(env_id, **(env_kwargs if env_id == trained_env_id else {}))
    returns, lengths, frames = run_episodes(
        policy,
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
    video = Path(args.video) if args.video else None
    if video:
        video.parent.mkdir(parents=True, exist_ok=True)
        _write_gif(frames, video, args.video_fps)
        print(f"Video of episode 1 ({len(frames)} frames): {video.resolve()}")
    if not args.no_mlflow:
        mode = "sample" if args.sample else "greedy"
        run_id = log_evaluation(
            tracking_uri=uri,
            training_run_id=training_run_id,
            experiment_name=args.experiment_name,
            run_name=f"evaluate-{mode}",
            params={
                "source": args.source,
                "env_id": env_id,
                "episodes": args.episodes,
                "actions": mode,
                "seed": args.seed,
            },
            returns=returns,
            lengths=lengths,
            video=video,
        )
        print(f"Logged to MLflow run {run_id} in {uri}")
    return 0 if all(math.isfinite(r) for r in returns) else 1
