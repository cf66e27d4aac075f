"""PPO end to end against CleanRL: ``hts-rl fit`` with a recipe against CleanRL's single-file
script with the same settings, A B A B in one run, each timed from process start to exit.

Tasks: ``pong`` (``recipes/atari/pong_ppo.yaml`` against ``ppo_atari_envpool.py``: 16 envs x
128 steps, 4 epochs x 4 minibatches, Nature CNN; the recipe stopped by ``--trainer.max_steps``
so its 10M-frame schedule is untouched) and the MuJoCo tasks (``halfcheetah``, ``hopper``,
``walker2d``: ``recipes/mujoco/<task>_ppo.yaml`` against ``ppo_continuous_action.py``: 1 env x
2048 steps, 10 epochs x 32 minibatches, 64x64 tanh networks, normalized observations and
rewards). HTS overlaps the collection of batch k+1 with the update on batch k; CleanRL does
one after the other. CleanRL runs from a checkout of vwxyzjn/cleanrl (never copied here) in its
own venv (Atari: torch, envpool 0.8.4, gym 0.23.1, numpy<2, tyro, tensorboard; MuJoCo: torch,
gymnasium[mujoco]==0.29.1, mujoco<=2.3.3, numpy<2, tyro, tensorboard). The record goes to
``benchmarks/results/vs_cleanrl_<task>.json``.

    python -m benchmarks vs_cleanrl --task pong --cleanrl /path/to/cleanrl \\
        --cleanrl-python /path/to/venv/bin/python [--frames 65536] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks.common import records
from benchmarks.common.processes import ROOT, cpu_lock, hts_fit

MUJOCO = {"halfcheetah": "HalfCheetah-v4", "hopper": "Hopper-v4", "walker2d": "Walker2d-v4"}


def timed(argv: list[str], env: dict) -> float:
    """Seconds from start to exit of ``argv`` in a fresh folder (it must succeed)."""
    with tempfile.TemporaryDirectory() as work:
        started = time.perf_counter()
        done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{argv[:3]} failed:\n{done.stderr[-3000:]}")
    return seconds


def commands(task: str, frames: int, checkout: Path, python: Path) -> tuple[list, list]:
    """The two command lines (hts-rl, CleanRL) of ``task`` for ``frames`` agent steps."""
    quiet = ("--trainer.enable_progress_bar=false", "--trainer.logger=false")
    if task == "pong":
        batch, optimizer_steps = 16 * 128, 16
        updates = -(-frames // batch)
        hts = hts_fit(
            "recipes/atari/pong_ppo.yaml",
            f"--trainer.max_steps={updates * optimizer_steps}",
            *quiet,
            seed=1,
        )
        cleanrl = [
            str(python),
            str(checkout / "cleanrl" / "ppo_atari_envpool.py"),
            "--env-id=Pong-v5",
            "--num-envs=16",
            "--num-steps=128",
            f"--total-timesteps={updates * batch}",
            "--no-cuda",
            "--seed=1",
        ]
        return hts, cleanrl  # fmt: skip
    hts = hts_fit(
        f"recipes/mujoco/{task}_ppo.yaml",
        f"--model.init_args.total_frames={frames}",
        *quiet,
        seed=1,
    )
    cleanrl = [
        str(python),
        str(checkout / "cleanrl" / "ppo_continuous_action.py"),
        f"--env-id={MUJOCO[task]}",
        f"--total-timesteps={frames}",
        "--no-cuda",
        "--seed=1",
    ]
    return hts, cleanrl  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=["pong", *MUJOCO], default="halfcheetah")
    parser.add_argument("--cleanrl", type=Path, required=True, help="a vwxyzjn/cleanrl checkout")
    parser.add_argument("--cleanrl-python", type=Path, required=True)
    parser.add_argument("--frames", type=int, default=40960)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    hts, cleanrl = commands(args.task, args.frames, args.cleanrl, args.cleanrl_python)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    times: dict[str, list[float]] = {"hts": [], "cleanrl": []}
    with cpu_lock():
        for _ in range(args.rounds):
            times["hts"].append(timed(hts, env))
            times["cleanrl"].append(timed(cleanrl, dict(os.environ)))
    ratios = [c / h for h, c in zip(times["hts"], times["cleanrl"], strict=True)]
    rows = [
        [
            name,
            ", ".join(f"{s:.1f}" for s in seconds),
            ", ".join(f"{args.frames / s:.0f}" for s in seconds),
        ]
        for name, seconds in (("hts-rl fit", times["hts"]), ("CleanRL", times["cleanrl"]))
    ]
    print(rows, ratios)
    records.write(
        f"vs_cleanrl_{args.task}",
        title=f"{args.task} PPO end to end against CleanRL, {args.frames:,} frames: hts-rl "
        f"{statistics.median(ratios):.2f}x CleanRL's speed",
        tables=[{"columns": ["contender", "seconds per run", "frames/s per run"], "rows": rows},
                {"columns": ["round", "CleanRL s / hts-rl s"],
                 "rows": [[i + 1, f"{r:.2f}"] for i, r in enumerate(ratios)]}],
        text=["Commands: `" + " ".join(hts[1:]).replace(str(ROOT) + "/", "") + "` and `"
              + " ".join([Path(cleanrl[1]).name, *cleanrl[2:]]) + "` (CleanRL at "
              + subprocess.run(["git", "-C", str(args.cleanrl), "rev-parse", "--short", "HEAD"],
                               capture_output=True, text=True).stdout.strip()
              + "), alternating, each from process start to exit."],
    )  # fmt: skip


if __name__ == "__main__":
    main()
