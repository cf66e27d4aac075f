"""Learning studies: recipes trained as a user trains them, their curves beside published anchors.

A study is a recipe, its variants (command-line overrides: another collector, another
gradient mode), seeds and a length in agent steps (``--trainer.max_steps``, so the recipe's
own schedule, e.g. a learning rate annealed over 10M frames, is untouched). Each cell (variant
x seed) is one ``hts-rl fit`` process in its own working folder under ``--work`` (its MLflow
store and checkpoints), holding the shared CPU lock (``/tmp/hts-cpu.lock``) while it runs. A
cell stopped before its end (a session over, a SIGTERM) is resumed from its ``last.ckpt``
(``--ckpt_path last``) by the next ``run``; a finished cell writes its record and is skipped
from then on.

Records (committed): ``benchmarks/results/learning/<study>/<cell>.csv`` (agent steps, wall
seconds of training and the study's metric, e.g. the mean raw return of the last 20 episodes,
per update; of a run of updates with one value, its first and last) and ``.json``
(command, machine, seconds, date). ``report`` draws each study's curves against agent steps
and wall seconds beside its anchors (``benchmarks/results/learning/anchors.csv``, with their
citations) and prints a table at the anchors' steps.

Three cells run outside ``hts-rl``: ``--variants cleanrl`` (CleanRL's script from a
checkout), ``--variants plain`` (a PPO envpool recipe as a single-file loop,
``plain_ppo.train``) and ``--variants sb3`` (an Atari A2C recipe's settings in
Stable-Baselines3's A2C on gymnasium's ALE, ``sb3_atari_a2c.train``). ``run --steps N`` trains
new cells to N agent steps instead of the study's length (a cell that would not fit a session);
a later ``run`` to more steps goes on from such a cell's checkpoint, where it is kept (the three
cells above have none: they train again from their first step). ``run --again`` trains the named
cells from step 0 even where recorded (the work folder cleared first); the record is replaced
when the new run ends, and kept until then.

    python -m benchmarks learning_study run pong_ppo_1m [--variants hts sync] [--seeds 0]
    python -m benchmarks learning_study report pong_ppo_1m
    python -m benchmarks learning_study --list
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

from benchmarks.common import report as reporting
from benchmarks.common.processes import (
    ROOT,
    benchmark,
    cpu_lock,
    hts_fit,
    log_tail,
    run_bounded,
)

RESULTS = ROOT / "benchmarks" / "results" / "learning"
ANCHORS = RESULTS / "anchors.csv"
WORK = Path.home() / ".cache" / "hts-studies"
METRIC = "rollout/return_last_20"


@dataclasses.dataclass(frozen=True)
class Study:
    recipe: str
    #: variant name -> hts-rl fit overrides
    variants: dict[str, tuple[str, ...]]
    seeds: tuple[int, ...]
    #: agent steps (env frames of the collector) to train
    steps: int
    #: optimizer steps per batch of the recipe (PPO: epochs x minibatches), for max_steps
    optimizer_steps_per_batch: int
    frames_per_batch: int
    #: the anchors' key in anchors.csv
    anchors: str
    note: str = ""
    #: CleanRL's script (in a checkout of vwxyzjn/cleanrl) and its options with the recipe's
    #: settings, for a "cleanrl" cell beside the variants; None: no CleanRL counterpart
    cleanrl: tuple[str, tuple[str, ...]] | None = None
    #: the MLflow metric the curve follows (its last part names the records' third column)
    metric: str = METRIC
    #: scores whose first crossing the report tables (agent steps and training minutes)
    thresholds: tuple[float, ...] = ()
    #: agent steps before which a crossing is not counted: until every replica has run one
    #: longest episode, the episodes that ended are the short ones (a biased sample); records
    #: keep the first row from here on (:func:`thin`): another value needs its cells rerun
    crossings_from: int = 0


_PONG_PPO = dict(
    recipe="recipes/atari/pong_ppo.yaml",
    optimizer_steps_per_batch=16,
    frames_per_batch=2048,
    anchors="pong_ppo",
    # The recipe's settings; CleanRL's defaults are the rest (clip 0.1, 4 x 4, lr 2.5e-4).
    cleanrl=(
        "cleanrl/ppo_atari_envpool.py",
        ("--env-id", "Pong-v5", "--num-envs", "16", "--num-steps", "128",
         "--total-timesteps", "10000000", "--no-cuda"),
    ),
)  # fmt: skip
#: The HalfCheetah A2C recipe's former settings, where RL Zoo's MuJoCo A2C settings differ,
#: and RL Zoo's, by label (all spelled out, so that the studies mean the same whatever the
#: recipe holds)
_OLD_HALFCHEETAH_A2C = {
    "optimizer": "adam",
    "lr_schedule": "linear",
    "gae_lambda": "0.9",
    "value_coef": "0.4",
}
_RLZOO_A2C = {
    "rmsprop": {"optimizer": "rmsprop"},
    "constant_lr": {"lr_schedule": "constant"},
    "gae_lambda_1": {"gae_lambda": "1.0"},
    "value_coef_0.5": {"value_coef": "0.5"},
}  # fmt: skip


def _halfcheetah_a2c(*labels: str) -> tuple[str, ...]:
    """Overrides: the HalfCheetah A2C recipe's former settings, RL Zoo's for ``labels``."""
    settings = dict(_OLD_HALFCHEETAH_A2C)
    for label in labels:
        settings |= _RLZOO_A2C[label]
    return tuple(f"--model.init_args.{key}={value}" for key, value in settings.items())


#: what the HalfCheetah A2C studies share: the recipe, one update a batch, 1M agent steps
_HALFCHEETAH_A2C_STUDY = dict(
    recipe="recipes/mujoco/halfcheetah_a2c.yaml",
    seeds=(0,),
    steps=1_000_000,
    optimizer_steps_per_batch=1,
    anchors="halfcheetah_a2c",
)


STUDIES = {
    "pong_ppo_1m": Study(
        **_PONG_PPO,
        variants={
            # The recipe: orthogonal init, the anchors' value weight, decoupled PPO.
            "recipe": (),
            # PPO's clip against the behaviour policy, one update behind (the old default).
            "current": ("--model.init_args.gradient_mode=current",),
            # No lag, the same engine, envs and seeds: the HTSCollector without its overlap.
            "no_overlap": ("--model.init_args.overlap=false",),
            # CleanRL's loss (value clipping, advantages standardized per minibatch) with and
            # without the lag.
            "cleanrl_loss": (
                "--model.init_args.clip_value=true",
                "--model.init_args.normalize_minibatch_advantage=true",
                "--model.init_args.normalize_advantage=false",
            ),
            "cleanrl_loss_no_overlap": (
                "--model.init_args.overlap=false",
                "--model.init_args.clip_value=true",
                "--model.init_args.normalize_minibatch_advantage=true",
                "--model.init_args.normalize_advantage=false",
            ),
            # No lag: TorchRL's synchronous collector.
            "sync": ("--model.init_args.collector=sync", "--model.init_args.gradient_mode=current"),
        },
        seeds=(0,),
        steps=1_000_000,
        note="Pong PPO to 1M agent steps: the recipe (decoupled PPO), the same with PPO's clip "
        "against the behaviour policy one update behind (current), and without the lag "
        "(no_overlap: the HTSCollector with overlap=False; sync: TorchRL's collector). "
        "'recipe before the study' is it before (torch's initialization, twice "
        "the anchors' value-loss weight, current).",
    ),
    "pong_ppo_8envs_1m": Study(
        recipe="recipes/atari/pong_ppo_8envs.yaml",
        variants={
            "recipe": (),  # the HTSCollector: lag exactly one
            # The paper's comparison (issue 36 item 4): the same PPO fed by TorchRL's
            # synchronous collector (no lag) and by its asynchronous one (unbounded lag).
            "sync": ("--model.init_args.collector=sync",),
            "multi_async": ("--model.init_args.collector=multi_async",),
        },
        seeds=(0,),
        steps=1_000_000,
        optimizer_steps_per_batch=16,
        frames_per_batch=1024,
        anchors="pong_ppo",
        note="Pong PPO to 1M agent steps with the anchors' own setting (OpenAI baselines' and "
        "CleanRL's 8 envs x 128: twice the paper's updates per frame), beside the same anchors: "
        "the recipe (HTS, lag one), TorchRL's synchronous collector (sync, no lag) and its "
        "asynchronous one (multi_async), against agent steps and wall seconds.",
        cleanrl=(
            "cleanrl/ppo_atari_envpool.py",
            ("--env-id", "Pong-v5", "--total-timesteps", "10000000", "--no-cuda"),
        ),
    ),
    "pong_ppo_8envs_2m": Study(
        recipe="recipes/atari/pong_ppo_8envs.yaml",
        variants={"recipe": ()},
        seeds=(0, 1),
        steps=2_000_000,
        optimizer_steps_per_batch=16,
        frames_per_batch=1024,
        anchors="pong_ppo",
        note="Pong PPO with the anchors' 8 envs x 128 to 2M agent steps (issue 36 item 3; "
        "OpenAI baselines' ppo2: 14.1 at 2M). The recipe's schedule is over 10M frames, so a "
        "cell's first 1M steps are the 1M study's cell of its seed, bit for bit, on the same "
        "CPU.",
    ),
    # The rest of issue 36 item 3: each is one 2M cell of OpenAI baselines' Atari benchmark.
    "breakout_ppo_8envs_2m": Study(
        recipe="recipes/atari/breakout_ppo_8envs.yaml",
        variants={"recipe": ()},
        seeds=(0,),
        steps=2_000_000,
        optimizer_steps_per_batch=16,
        frames_per_batch=1024,
        anchors="breakout_ppo",
        note="Breakout PPO with the anchors' 8 envs x 128 to 2M agent steps (OpenAI baselines' "
        "ppo2: 22.0 at 1M, 46.8 at 2M), trained as the anchors train (a life lost ends the "
        "training episode, FIRE after each reset) and scored as they score: whole games.",
    ),
    "pong_a2c_2m": Study(
        recipe="recipes/atari/pong_a2c.yaml",
        variants={
            # the recipe before this study: Adam, torch's initialization (its network went blind)
            "adam": (
                "--model.init_args.optimizer=adam",
                "--model.init_args.orthogonal_init=false",
            ),
            # baselines' a2c, the recipe's since: TensorFlow's RMSprop (alpha 0.99, eps 1e-5,
            # the same lr) and orthogonal initialization (policy output gain 0.01)
            "baselines": (
                "--model.init_args.optimizer=rmsprop_tf",
                "--model.init_args.orthogonal_init=true",
            ),
            # baselines' a2c without HTS: TorchRL's synchronous collector and the gradient at
            # the parameters it updates (rules the lag and the delayed gradient in or out)
            "sync": ("--model.init_args.collector=sync", "--model.init_args.gradient_mode=current"),
            # the recipe once the value loss reaches the shared trunk (SharedTrunkA2CLoss; the
            # cells above ran TorchRL's A2CLoss, whose value loss trained the value head only)
            "recipe": (),
            # the same with PyTorch's RMSprop (its running square starts at 0), whose A2C
            # learned Pong faster than TensorFlow's in Officium/RL-Experiments' plots
            "torch_rmsprop": ("--model.init_args.optimizer=rmsprop",),
        },
        seeds=(0,),
        steps=2_000_000,
        optimizer_steps_per_batch=1,
        frames_per_batch=80,
        anchors="pong_a2c",
        note="Pong A2C (16 envs x 5 steps) to 2M agent steps (OpenAI baselines' a2c: -20.1 at "
        "1M, -16.5 at 2M): with Adam and torch's initialization (the recipe before), with "
        "baselines' optimizer and initialization (the recipe since), the same without HTS "
        "(sync: no lag, no delayed gradient), and its settings in Stable-Baselines3's A2C on "
        "gymnasium's ALE (sb3: another implementation and env stack). Those cells ran with "
        "TorchRL's A2CLoss, whose value loss did not reach the shared trunk; recipe: the "
        "recipe with the value loss reaching it (SharedTrunkA2CLoss).",
    ),
    "pong_a2c_8envs_1m": Study(
        recipe="recipes/atari/pong_a2c.yaml",
        variants={
            # Officium/RL-Experiments' PyTorch A2C (8 envs x 5 steps, Adam at 7e-4, eps 1e-5,
            # orthogonal initialization), whose plot reads -14.4 at 1M agent steps
            "adam": ("--model.init_args.num_envs=8", "--model.init_args.optimizer=adam"),
            # the recipe's TensorFlow RMSprop on the same 8 envs
            "recipe": ("--model.init_args.num_envs=8",),
        },
        seeds=(0,),
        steps=1_000_000,
        optimizer_steps_per_batch=1,
        frames_per_batch=40,
        anchors="pong_a2c",
        note="Pong A2C on 8 envs x 5 steps (the setting of Officium/RL-Experiments' PyTorch "
        "A2C, whose plots read -14.4 at 1M agent steps with Adam and -13.7 with PyTorch's "
        "RMSprop, where its TensorFlow-baselines curve reads -20.1) to 1M agent steps: with Adam "
        "and with the recipe's TensorFlow RMSprop (OpenAI baselines' a2c: -20.1 at 1M).",
    ),
    "pong_acktr_2m": Study(
        recipe="recipes/atari/pong_acktr.yaml",
        variants={"recipe": ()},
        seeds=(0,),
        steps=2_000_000,
        optimizer_steps_per_batch=1,
        frames_per_batch=320,
        anchors="pong_acktr",
        note="Pong ACKTR (16 envs x 20 steps, baselines' K-FAC settings) to 2M agent steps "
        "(OpenAI baselines' acktr: -15.3 at 1M, 12.4 at 2M).",
    ),
}


_FOOTBALL_POSTER = (
    "The HTS-RL poster (IouJenLiu/HTS-RL, gh-pages, poster.pdf; GPUs, 16 envs, the paper's "
    "reward scoring+checkpoints): minutes to a mean score of 0.4 / 0.8, PPO against HTS-RL"
)


#: the academy scenarios' longest episode, 400 steps (their game_duration, in either engine)
_ACADEMY_EPISODE_STEPS = 400


def _football(
    scenario: str,
    poster: str,
    *,
    steps: int,
    seeds: tuple[int, ...] = (0,),
    package: bool = False,
) -> Study:
    """PPO with the paper's settings on envpool's football port (scoring reward only) or, with
    ``package``, on the gfootball package (the reference engine, the paper's reward): HTS
    against TorchRL's synchronous collector, the steps and minutes to the poster's scores."""
    if package:
        recipe = f"recipes/football/{scenario}_ppo.yaml"
        where = "the gfootball package, the paper's PPO settings and reward scoring+checkpoints"
    else:
        recipe = f"recipes/football/envpool/{scenario}_ppo.yaml"
        where = "envpool's football port, the paper's PPO settings, the scoring reward"
    return Study(
        recipe=recipe,
        variants={
            # The recipe: decoupled PPO (the clip around the policy at the start of the
            # update, the lag weighted out).
            "hts": (),
            # PPO's clip against the behaviour policy one update behind (PPO's default, the
            # recipes' before this study).
            "hts_current": ("--model.init_args.gradient_mode=current",),
            # No lag: TorchRL's collector, every step synchronous; plain PPO (no lag to weigh).
            "sync": ("--model.init_args.collector=sync", "--model.init_args.gradient_mode=current"),
        },
        seeds=seeds,
        steps=steps,
        optimizer_steps_per_batch=16,
        frames_per_batch=2048,
        anchors=f"football_{scenario}",
        note=f"PPO on {scenario} ({where}) to {steps:,} agent steps, HTS against TorchRL's "
        f"synchronous collector. {_FOOTBALL_POSTER}: {poster}.",
        metric="rollout/goal_difference_last_100",
        thresholds=(0.4, 0.8),
        crossings_from=16 * _ACADEMY_EPISODE_STEPS,  # 16 replicas, each one longest episode
    )


STUDIES.update(
    # 200k: twice the steps every cell so far took to 0.8 (its first cells ran to 400k and held
    # 0.95-1.0 from ~270k on); half an hour a cell here would not fit a session's 3 x 2 cells.
    football_empty_goal_close=_football(
        "academy_empty_goal_close", "5.4 / 15.5 against 1.0 / 2.0", steps=200_000, seeds=(0, 1, 2)
    ),
    # 800k: ~1 h a cell here (HTS ~230 agent steps/s), so a cell finishes inside a session (its
    # work folder may not outlive one). On the poster these two took 2x and 6x
    # empty_goal_close's minutes to 0.8; here empty_goal_close's HTS cells took 98k-109k steps.
    football_empty_goal=_football(
        "academy_empty_goal", "12.8 / 19.2 against 2.0 / 3.9", steps=800_000
    ),
    football_run_to_score=_football(
        "academy_run_to_score", "16.2 / 32.5 against 6.3 / 11.4", steps=800_000
    ),
    # The paper's own reward on the reference engine, beside the port's scoring-only cells:
    # what the checkpoint rewards are worth on the scenario every cell has reached 0.8 on.
    football_empty_goal_close_package=_football(
        "academy_empty_goal_close", "5.4 / 15.5 against 1.0 / 2.0", steps=200_000, package=True
    ),
)


def _mujoco_ppo(task: str, *, steps: int = 1_000_000) -> Study:
    """PPO on an envpool MuJoCo task with CleanRL's ppo_continuous_action settings (1 env x
    2048 steps, 10 epochs x 32 minibatches), beside CleanRL's published results at 1M."""
    name = task.split("-")[0].lower()
    return Study(
        recipe=f"recipes/mujoco/{name}_ppo.yaml",
        variants={"recipe": ()},
        seeds=(0,),
        steps=steps,
        optimizer_steps_per_batch=320,
        frames_per_batch=2048,
        anchors=f"{name}_ppo",
        note=f"PPO on {task} (envpool) to {steps:,} agent steps, CleanRL's "
        "ppo_continuous_action settings.",
        cleanrl=(
            "cleanrl/ppo_continuous_action.py",
            ("--env-id", task, "--total-timesteps", str(steps), "--no-cuda"),
        ),
    )


STUDIES.update(
    halfcheetah_ppo_1m=_mujoco_ppo("HalfCheetah-v4"),
    hopper_ppo_1m=_mujoco_ppo("Hopper-v4"),
    walker2d_ppo_1m=_mujoco_ppo("Walker2d-v4"),
    halfcheetah_a2c_1m=Study(
        **_HALFCHEETAH_A2C_STUDY,
        variants={
            # the recipe as shipped
            "recipe": (),
            # Adam, a linear schedule, gae_lambda 0.9, value weight 0.4 (recorded as the recipe)
            "old_recipe": _halfcheetah_a2c(),
        },
        frames_per_batch=40,
        note="A2C on HalfCheetah-v4 (envpool) to 1M agent steps, 8 envs x 5 steps: the recipe "
        "(RL Zoo's MuJoCo A2C settings: RMSprop, a constant rate, gae_lambda 1.0, value weight "
        "0.5) and its former settings (Adam, a linear schedule, gae_lambda 0.9, value weight "
        "0.4).",
    ),
    halfcheetah_a2c_rlzoo_1m=Study(
        **_HALFCHEETAH_A2C_STUDY,
        variants={
            # RL Zoo's MuJoCo A2C: SB3's A2C defaults with normalization.
            "rlzoo": (
                "--model.init_args.num_envs=1", "--model.init_args.num_workers=1",
                "--model.init_args.sync_interval=5", *_halfcheetah_a2c(*_RLZOO_A2C),
            ),
        },
        frames_per_batch=5,
        note="A2C on HalfCheetah-v4 (envpool) to 1M agent steps with RL Zoo's MuJoCo A2C "
        "settings as they map here (SB3's A2C defaults with normalized observations and "
        "rewards: 1 env x 5 steps, RMSprop, constant lr 7e-4, gae_lambda 1.0, value weight "
        "0.5, no entropy bonus).",
    ),
    halfcheetah_a2c_settings_1m=Study(
        **_HALFCHEETAH_A2C_STUDY,
        variants={
            # the recipe's 8 envs x 5 steps with its former settings, with one of RL Zoo's,
            # with all of them (the recipe now), and with all but one
            "old_recipe": _halfcheetah_a2c(),
            **{label: _halfcheetah_a2c(label) for label in _RLZOO_A2C},
            "rlzoo_8_envs": _halfcheetah_a2c(*_RLZOO_A2C),
            **{
                f"rlzoo_8_envs_but_{label}": _halfcheetah_a2c(*(set(_RLZOO_A2C) - {label}))
                for label in _RLZOO_A2C
            },
        },
        frames_per_batch=40,
        note="Which of RL Zoo's MuJoCo A2C settings carries its gain over the recipe's former "
        "settings on HalfCheetah-v4 (8 envs x 5 steps): those settings (old_recipe) with one "
        "of RL Zoo's, all four (rlzoo_8_envs: the recipe since 2026-12-07), and all but one.",
    ),
)  # fmt: skip


def cell_name(variant: str, seed: int) -> str:
    return f"{variant}_seed{seed}"


def _max_steps(study: Study) -> int:
    batches = -(-study.steps // study.frames_per_batch)
    return batches * study.optimizer_steps_per_batch


def command(study: Study, variant: str, seed: int, *, resume: bool) -> list[str]:
    options = [
        *study.variants[variant],
        f"--trainer.max_steps={_max_steps(study)}",
        "--trainer.enable_progress_bar=false",
    ]
    if resume:
        options.append("--ckpt_path=last")
    return hts_fit(study.recipe, *options, seed=seed)


def _recorded_steps(name: str, cell: str) -> int | None:
    """The agent steps the cell's recorded curve reaches (``None``: not recorded)."""
    record = RESULTS / name / f"{cell}.csv"
    return _curve(record)[-1][0] if record.exists() else None


def _recorded(name: str, cell: str) -> bool:
    """Whether the cell has its record already (then it is skipped)."""
    if (RESULTS / name / f"{cell}.json").exists():
        print(f"{name}/{cell}: recorded before, skipped", flush=True)
        return True
    return False


_VERSIONS = """
import importlib.metadata as metadata, platform
found = []
for package in ("torch", "envpool", "gym", "gymnasium", "mujoco", "numpy"):
    try:
        found.append(f"{package} {metadata.version(package)}")
    except metadata.PackageNotFoundError:
        pass
print(f"python {platform.python_version()}, " + ", ".join(found))
"""


def venv_versions(python: Path) -> str:
    """The versions that matter in the venv of ``python`` (CleanRL's own, not this one)."""
    return subprocess.run(
        [str(python), "-c", _VERSIONS], capture_output=True, text=True, check=True
    ).stdout.strip()


def run_cleanrl_cell(
    name: str, study: Study, seed: int, *, checkout: Path, python: Path, again: bool = False
) -> None:
    """CleanRL's script with the recipe's settings, from a checkout (never copied here),
    stopped at the study's agent steps; its printed episode returns make the curve."""
    script, options = study.cleanrl
    argv = [str(python), str(checkout / script), *options, "--seed", str(seed)]
    commit = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    meta = {
        "command": " ".join([Path(argv[1]).name, *argv[2:]]),
        "cleanrl_commit": commit,
        "cleanrl_venv": venv_versions(python),  # the record's "machine" names this venv's
    }
    _run_printing_cell(name, study, "cleanrl", seed, argv, dict(os.environ), meta, again=again)


def run_plain_cell(name: str, study: Study, seed: int, *, again: bool = False) -> None:
    """The recipe's PPO as a single-file loop (``plain_ppo.train``): the module's networks,
    initial weights and update, a synchronous envpool with the recipe's env options and the
    HTS cell's env seeds; no HTS engine, no TorchRL, no lag. Beside the ``no_overlap`` cell it
    tells the engine's data from the rest."""
    argv, env = benchmark("learning_study", "plain-child", name, str(seed))
    meta = {"command": f"python -m benchmarks learning_study plain-child {name} {seed}"}
    _run_printing_cell(name, study, "plain", seed, argv, env, meta, again=again)


def run_sb3_cell(name: str, study: Study, seed: int, *, again: bool = False) -> None:
    """The recipe's A2C settings in Stable-Baselines3's A2C on its own Atari stack
    (``sb3_atari_a2c.train``): tells a defect of ours from what A2C does on this game."""
    argv, env = benchmark("learning_study", "sb3-child", name, str(seed), str(study.steps))
    meta = {"command": f"python -m benchmarks learning_study sb3-child {name} {seed} {study.steps}"}
    _run_printing_cell(name, study, "sb3", seed, argv, env, meta, again=again)


def sb3_child(name: str, seed: int, steps: int) -> None:
    """The process of :func:`run_sb3_cell`."""
    import yaml

    from benchmarks.common import sb3_atari_a2c

    recipe = yaml.safe_load((ROOT / STUDIES[name].recipe).read_text())
    args = recipe["model"]["init_args"]
    if not recipe["model"]["class_path"].endswith(".A2C"):
        raise SystemExit(f"{name}: the SB3 cell is A2C; {STUDIES[name].recipe} is not")
    settings = sb3_atari_a2c.A2CSettings.from_module_args(args)
    sb3_atari_a2c.train(args["env_id"], settings, steps=steps, seed=seed)


def _run_printing_cell(
    name: str,
    study: Study,
    variant: str,
    seed: int,
    argv: list,
    env: dict,
    meta: dict,
    *,
    again: bool = False,
) -> None:
    """A cell whose process prints CleanRL's ``global_step=..., episodic_return=...`` lines:
    the mean of the last 20 returns is its curve; stopped at the study's agent steps."""
    cell = cell_name(variant, seed)
    recorded = _recorded_steps(name, cell)
    if again:
        print(f"{name}/{cell}: trained again from step 0", flush=True)
    elif recorded is not None and recorded < study.steps:
        # such a process has no checkpoint to go on from: it trains again from its first step
        print(f"{name}/{cell}: recorded to {recorded:,} steps, trained again to "
              f"{study.steps:,}", flush=True)  # fmt: skip
    elif _recorded(name, cell):
        return
    recent: deque[float] = deque(maxlen=20)
    rows = []
    with cpu_lock():
        started = time.time()
        work = WORK / name / cell
        work.mkdir(parents=True, exist_ok=True)
        process = subprocess.Popen(
            argv, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        with (work / "log.txt").open("w", buffering=1) as log:  # line by line: progress shows
            for line in process.stdout:
                log.write(line)
                if line.startswith("global_step=") and "episodic_return=" in line:
                    step_text, _, return_text = line.strip().partition(", episodic_return=")
                    step = int(step_text.removeprefix("global_step="))
                    recent.append(float(return_text.strip("[]")))
                    rows.append((step, round(time.time() - started, 2), sum(recent) / len(recent)))
                elif "global_step=" in line and rows:  # steps so far, no episode ended
                    step = int(line.rpartition("global_step=")[2])
                    rows.append((step, round(time.time() - started, 2), rows[-1][2]))
                if rows and rows[-1][0] >= study.steps:
                    process.terminate()
                    break
        process.wait()
        seconds = time.time() - started
        load = os.getloadavg()
    if not rows or rows[-1][0] < study.steps:
        print(f"{name}/{cell}: stopped at {rows[-1][0] if rows else 0} steps\n"
              f"{log_tail(work / 'log.txt')}")  # fmt: skip
        return
    meta = {"study": name, "variant": variant, "seed": seed, **meta}
    _write_record(name, cell, rows, meta, seconds=seconds, load=load)


def plain_child(name: str, seed: int) -> None:
    """The process of :func:`run_plain_cell`."""
    import lightning
    import yaml

    import hts_lightning
    from benchmarks.common import plain_ppo as plain
    from hts_lightning.collectors.core.seeding import replica_seeds
    from hts_lightning.envs.envpool import envpool_factory

    study = STUDIES[name]
    recipe = yaml.safe_load((ROOT / study.recipe).read_text())
    args = {**recipe["model"]["init_args"], "seed": seed}
    module_class = getattr(hts_lightning, recipe["model"]["class_path"].rpartition(".")[2])
    if module_class is not hts_lightning.PPO or args.get("env_backend") != "envpool":
        raise SystemExit(f"{name}: the plain loop is PPO over envpool; {study.recipe} is not")
    lightning.seed_everything(seed)  # as hts-rl fit --seed_everything: the same initial weights
    module = module_class(**args)
    factory = envpool_factory(args["env_id"], **args.get("env_kwargs", {}))
    num_envs, steps = args["num_envs"], args["sync_interval"]
    seeds = [env_seed for env_seed, _ in replica_seeds(seed, range(num_envs))]
    pool = factory.make_pool(seeds=seeds, num_threads=args["num_workers"], batch_size=num_envs)
    plain.train(
        plain.networks(module.model),
        pool,
        settings=plain.PPOSettings.from_module_args(args),
        lr=args["lr"],
        steps_per_batch=steps,
        batches=-(-study.steps // (num_envs * steps)),
        schedule_batches=args["total_frames"] // (num_envs * steps),
        clip_rewards=factory.clip_rewards,
        seed=seed,
    )


def thin(rows: list, *, keep_from: int = 0) -> list:
    """The rows that draw and read the same curve: a row whose value equals the rows' before
    and after it is left out (HalfCheetah's return moves once a 1,000-step episode: 25k
    updates, ~250 rows), the first row from ``keep_from`` agent steps on kept (where crossings
    are counted from), so every table, crossing and plot reads as from all rows."""
    first_from = next((i for i, row in enumerate(rows) if row[0] >= keep_from), None)
    return [
        row
        for i, row in enumerate(rows)
        if i in (0, len(rows) - 1, first_from) or not rows[i - 1][2] == row[2] == rows[i + 1][2]
    ]


def _write_record(
    name: str, cell: str, rows: list, meta: dict, *, seconds: float, load: tuple[float, ...]
) -> None:
    """The cell's curve (``.csv``, :func:`thin`'s rows) and its ``meta`` with the process's
    seconds, the load after it, the date and the machine (``.json``)."""
    RESULTS.joinpath(name).mkdir(parents=True, exist_ok=True)
    with (RESULTS / name / f"{cell}.csv").open("w", newline="") as out:
        writer = csv.writer(out, lineterminator="\n")  # csv writes \r\n by default
        writer.writerow(["agent_steps", "wall_seconds", STUDIES[name].metric.split("/")[-1]])
        writer.writerows(thin(rows, keep_from=STUDIES[name].crossings_from))
    meta |= {
        "last_process_seconds": round(seconds, 1),
        "load_after": [round(x, 2) for x in load],
        "utc_end": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "machine": reporting.machine_line(),
    }
    (RESULTS / name / f"{cell}.json").write_text(json.dumps(meta, indent=1) + "\n")
    metric = STUDIES[name].metric
    print(f"{name}/{cell}: {rows[-1][0]:,} steps, {metric} {rows[-1][2]:.2f}", flush=True)


def read_curve(store: Path, metric: str = METRIC) -> list[tuple[int, float, float]]:
    """(agent steps, training wall seconds, ``metric``) per update, from the run in ``store``.
    Wall seconds add up the updates' ``time/update`` and ``time/wait_for_batch`` (a resumed
    run's restart is not counted)."""
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{store}")
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    steps = {}
    for key in ("time/update", "time/wait_for_batch", metric):
        for m in client.get_metric_history(run.info.run_id, key):
            steps.setdefault(m.step, {})[key] = m.value
    rows, seconds = [], 0.0
    for step in sorted(steps):
        values = steps[step]
        seconds += values.get("time/update", 0.0) + values.get("time/wait_for_batch", 0.0)
        if metric in values:
            rows.append((step, round(seconds, 2), values[metric]))
    return rows


def extends(name: str, cell: str, steps: int, folder: Path) -> bool:
    """Whether a recorded cell ended short of ``steps`` (``run --steps N`` trained it) and its
    checkpoint is here: then ``run`` goes on from it and records the longer curve."""
    recorded = _recorded_steps(name, cell)
    if recorded is None or recorded >= steps:
        return False
    if not any(folder.glob("runs/**/last.ckpt")):
        print(
            f"{name}/{cell}: recorded to {recorded:,} steps, but no last.ckpt under {folder} "
            "to go on from; `run --again` trains it again from step 0",
            flush=True,
        )
        return False
    print(f"{name}/{cell}: recorded to {recorded:,} steps, going on to {steps:,}", flush=True)
    return True


def run_cell(
    name: str, study: Study, variant: str, seed: int, work: Path, *, again: bool = False
) -> None:
    """One ``hts-rl fit`` cell; ``again``: from step 0 whatever is recorded or checkpointed."""
    cell = cell_name(variant, seed)
    folder = work / name / cell
    if again:
        print(f"{name}/{cell}: trained again from step 0", flush=True)
        shutil.rmtree(folder, ignore_errors=True)
    elif not extends(name, cell, study.steps, folder) and _recorded(name, cell):
        return
    folder.mkdir(parents=True, exist_ok=True)
    environ = dict(
        os.environ, PYTHONPATH=str(ROOT), MLFLOW_TRACKING_URI=f"sqlite:///{folder}/mlflow.db"
    )
    with cpu_lock():  # one long run at a time on this machine
        resume = any(folder.glob("runs/**/last.ckpt"))
        argv = command(study, variant, seed, resume=resume)
        started = time.time()
        returncode, failed = run_bounded(
            argv, cwd=folder, env=environ, log=folder / "log.txt", timeout_s=6 * 3600, grace_s=60
        )
        seconds = time.time() - started
        load = os.getloadavg()
    if failed is None and returncode != 0:
        failed = f"hts-rl exited with {returncode}"
    if failed is not None:
        print(f"{name}/{cell}: {failed}; rerun `run` to resume it\n{log_tail(folder / 'log.txt')}")
        return
    rows = read_curve(folder / "mlflow.db", study.metric)
    _write_record(name, cell, rows, {
        "study": name, "variant": variant, "seed": seed,
        "command": " ".join(argv[1:]).replace(str(ROOT) + "/", ""),
        "overrides": list(study.variants[variant]),
    }, seconds=seconds, load=load)  # fmt: skip


def load_anchors(key: str) -> list[dict]:
    with ANCHORS.open() as source:
        return [row for row in csv.DictReader(source) if row["study"] == key]


def _curve(path: Path) -> list[tuple[int, float, float]]:
    with path.open() as source:  # the third column: the study's metric
        return [(int(r[0]), float(r[1]), float(r[2])) for r in list(csv.reader(source))[1:]]


def at_step(rows, step: int) -> float | None:
    """The return of the last update at or before ``step`` (``None`` before the first)."""
    before = [r[2] for r in rows if r[0] <= step]
    return before[-1] if before and rows[-1][0] >= step * 0.98 else None


def first_crossing(rows, score: float, start: int = 0) -> tuple[int, float] | None:
    """(agent steps, training wall seconds) of the first update from ``start`` steps on at or
    above ``score``."""
    crossed = ((s, wall) for s, wall, value in rows if s >= start and value >= score)
    return next(crossed, None)


def _threshold_table(curves: dict, thresholds: tuple[float, ...], start: int) -> list[str]:
    """Per cell, the agent steps and training minutes to each threshold ("-": not reached),
    counted from ``start`` agent steps on."""
    header = "| cell | " + " | ".join(f"steps to {t:g} | minutes to {t:g}" for t in thresholds)
    lines = [header + " |", "|" + " --- |" * (2 * len(thresholds) + 1)]
    for cell, rows in curves.items():
        shown = []
        for score in thresholds:
            hit = first_crossing(rows, score, start)
            shown += ["-", "-"] if hit is None else [f"{hit[0]:,}", f"{hit[1] / 60:.1f}"]
        lines.append(f"| {cell} | " + " | ".join(shown) + " |")
    return lines


def draw(name: str) -> Path:
    """The study's plot: its curves against agent steps and wall seconds, beside its anchors."""
    study = STUDIES[name]
    curves = {p.stem: _curve(p) for p in sorted((RESULTS / name).glob("*.csv"))}
    anchors = load_anchors(study.anchors)
    plt = reporting.pyplot()
    fig, (by_steps, by_time) = plt.subplots(1, 2, figsize=(11, 4))
    for cell, rows in curves.items():
        x, wall, y = zip(*rows, strict=True)
        by_steps.plot(x, y, label=cell)
        by_time.plot(wall, y, label=cell)
    for source in sorted({a["source"] for a in anchors}):
        points = sorted(
            (int(a["agent_steps"]), float(a["return"])) for a in anchors if a["source"] == source
        )
        by_steps.plot(*zip(*points, strict=True), linestyle=":", marker="x", label=source)
    by_steps.set(xlabel="agent steps", ylabel=study.metric, title=name)
    by_time.set(xlabel="training wall seconds (2 cores)", title=name)
    by_steps.legend(fontsize=7)
    plot = ROOT / "benchmarks" / "plots" / f"learning_{name}.png"
    fig.tight_layout()
    fig.savefig(plot, dpi=100)
    return plot


def report(name: str, *, images: str = "plots/", heading: str = "###") -> str:
    """The study's table at its anchors' steps, its cells' commands, its reading
    (``results/learning/<study>/reading.md``, where written) and its plot (drawn by
    :func:`draw`, linked under ``images``), from the records alone."""
    study = STUDIES[name]
    curves = {p.stem: _curve(p) for p in sorted((RESULTS / name).glob("*.csv"))}
    anchors = load_anchors(study.anchors)
    # A cell trained shorter than the study (``run --steps N``) is shown at its end too.
    ends = {rows[-1][0] // 50_000 * 50_000 for rows in curves.values()}
    steps = sorted(
        {int(a["agent_steps"]) for a in anchors}
        | {study.steps // 2, study.steps}
        | {end for end in ends if 0 < end < study.steps}
    )
    lines = [f"{heading} Learning study `{name}`", "", study.note, ""]
    header = "| cell | " + " | ".join(f"{s:,} steps" for s in steps) + " |"
    lines += [header, "|" + " --- |" * (len(steps) + 1)]
    for cell, rows in curves.items():
        values = [at_step(rows, s) for s in steps]
        shown = ["-" if v is None else f"{v:.1f}" for v in values]
        lines.append(f"| {cell} | " + " | ".join(shown) + " |")
    for source in sorted({a["source"] for a in anchors}):
        values = {int(a["agent_steps"]): a["return"] for a in anchors if a["source"] == source}
        lines.append(f"| {source} | " + " | ".join(values.get(s, "-") for s in steps) + " |")
    if anchors:
        lines += ["", "Anchors: " + "; ".join(sorted({a["citation"] for a in anchors}))]
    if study.thresholds:
        lines += ["", f"First crossings, counted from {study.crossings_from:,} agent steps on:"]
        lines += ["", *_threshold_table(curves, study.thresholds, study.crossings_from)]
    lines.append("")
    for cell in curves:
        meta = json.loads((RESULTS / name / f"{cell}.json").read_text())
        lines.append(f"- `{cell}`: `{meta['command']}` ({meta['machine']}, {meta['utc_end']})")
    reading = RESULTS / name / "reading.md"
    if reading.exists():
        lines += ["", reading.read_text().strip()]
    lines.append(f"\n![{name}]({images}learning_{name}.png)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="list the studies")
    sub = parser.add_subparsers(dest="verb")
    run = sub.add_parser("run", help="train the study's cells not recorded yet")
    run.add_argument("study", choices=sorted(STUDIES))
    run.add_argument("--variants", nargs="*")
    run.add_argument("--seeds", nargs="*", type=int)
    run.add_argument("--work", type=Path, default=WORK)
    run.add_argument("--cleanrl", type=Path, help="a checkout of vwxyzjn/cleanrl: run its cell too")
    run.add_argument(
        "--cleanrl-python",
        type=Path,
        help="the Python of CleanRL's own venv (Atari: torch, envpool 0.8.4, gym 0.23.1, "
        "numpy<2, tyro, tensorboard; MuJoCo: torch, gymnasium[mujoco]==0.29.1, mujoco<=2.3.3, "
        "numpy<2, tyro, tensorboard)",
    )
    run.add_argument("--steps", type=int, help="agent steps of new cells (default: the study's)")
    run.add_argument(
        "--again",
        action="store_true",
        help="train the named cells from step 0 even where recorded (their checkpoints dropped; "
        "the record replaced when the new run ends)",
    )
    show = sub.add_parser("report", help="the study's table and plot")
    show.add_argument("study", choices=sorted(STUDIES))
    child = sub.add_parser("plain-child", help=argparse.SUPPRESS)
    child.add_argument("study", choices=sorted(STUDIES))
    child.add_argument("seed", type=int)
    sb3 = sub.add_parser("sb3-child", help=argparse.SUPPRESS)
    sb3.add_argument("study", choices=sorted(STUDIES))
    sb3.add_argument("seed", type=int)
    sb3.add_argument("steps", type=int)
    args = parser.parse_args()
    if args.list or args.verb is None:
        for name, study in STUDIES.items():
            print(f"{name}: {study.recipe}, {study.steps:,} steps, {sorted(study.variants)}")
        return
    study = STUDIES[args.study]
    if args.verb == "plain-child":
        plain_child(args.study, args.seed)
        return
    if args.verb == "sb3-child":
        sb3_child(args.study, args.seed, args.steps)
        return
    if args.verb == "report":
        draw(args.study)
        print(report(args.study))
        return
    if args.again and not (args.variants and args.seeds):
        parser.error(
            "--again drops the named cells' checkpoints: name them with --variants and --seeds"
        )
    if args.steps:
        study = dataclasses.replace(study, steps=args.steps)
    # A SIGTERM stops the cell's run too (it saves last.ckpt), not this process alone.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    for variant in args.variants or study.variants:
        for seed in args.seeds or study.seeds:
            if variant == "cleanrl":
                run_cleanrl_cell(
                    args.study,
                    study,
                    seed,
                    checkout=args.cleanrl,
                    python=args.cleanrl_python,
                    again=args.again,
                )
            elif variant == "plain":
                run_plain_cell(args.study, study, seed, again=args.again)
            elif variant == "sb3":
                run_sb3_cell(args.study, study, seed, again=args.again)
            else:
                run_cell(args.study, study, variant, seed, args.work, again=args.again)


if __name__ == "__main__":
    main()
