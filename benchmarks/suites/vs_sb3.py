"""CartPole PPO or A2C: Stable-Baselines3 against ``hts-rl fit``, frames and seconds to solve.

The same PPO settings on both sides (RL-Zoo's for CartPole-v1: 8 envs x 32 steps, 20 epochs
of one 256-frame minibatch, lr 1e-3 decaying linearly, gamma 0.98, GAE lambda 0.8, clip 0.2,
no entropy bonus, gradient norm 0.5): SB3 2.9.2 ``PPO("MlpPolicy")`` with its defaults
otherwise, and ``hts-rl fit --config recipes/cartpole_ppo.yaml`` as a user runs it (MLflow,
checkpoints, progress bar), with ``hts_lightning.callbacks.StopAtReturn``. Each run is a fresh
process, seeds alternate between the contenders (which one goes first alternates too), and
each is timed from its process start to the line that says the mean return of its last 20
episodes reached 475 (checked once per 256-frame batch on both sides), within 100k frames.
``--contenders`` may add ``sync``: the same recipe with TorchRL's ``Collector`` (no policy
lag), to tell the lag's cost from the rest. ``--algo a2c``: SB3's ``A2C("MlpPolicy")`` with
RL Zoo's CartPole-v1 settings (8 envs, no entropy bonus, SB3's defaults otherwise: 5 steps,
RMSprop, lr 7e-4, GAE lambda 1) against ``recipes/cartpole_a2c.yaml``, within RL Zoo's
budget of 500k frames (checked every 40-frame batch on SB3's side). ``--algo acktr``:
``recipes/cartpole_acktr.yaml`` within RL Zoo's ACKTR budget of 1M frames against SB3's A2C as
above (SB3 and sb3-contrib have no ACKTR).

    pip install -e ".[bench]"
    flock /tmp/hts-cpu.lock python -m benchmarks vs_sb3 --seeds 0 1 2 3 4
    flock /tmp/hts-cpu.lock python -m benchmarks vs_sb3 --algo acktr --seeds 20 21 22 23 24
    python -m benchmarks vs_sb3 --seeds 0 1 2 3 4 --contenders hts sync --hts-args \\
        --model.init_args.shared_trunk=false
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import records
from benchmarks.common import report as reporting
from benchmarks.common.processes import benchmark, hts_fit

TARGET, WINDOW = 475.0, 20
#: algorithm -> (hts-rl recipe, frame budget: RL Zoo's for A2C and ACKTR, 100k for PPO)
ALGORITHMS = {"ppo": ("recipes/cartpole_ppo.yaml", 100_000),
              "a2c": ("recipes/cartpole_a2c.yaml", 500_000),
              "acktr": ("recipes/cartpole_acktr.yaml", 1_000_000)}  # fmt: skip
#: hts-rl's algorithm -> SB3's counterpart (SB3 has no ACKTR: its A2C, RL Zoo's budget)
SB3_ALGORITHM = {"ppo": "ppo", "a2c": "a2c", "acktr": "a2c"}
_REACHED = re.compile(r"reached \S+ \(\S+\) at ([\d,]+) frames")


def _sb3_child(seed: int, algo: str) -> None:
    """One SB3 run (in its own process): prints the same line as StopAtReturn."""
    from stable_baselines3 import A2C, PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    class Reach(BaseCallback):
        solved = False

        def _on_step(self) -> bool:
            return not self.solved

        def _on_rollout_end(self) -> None:
            returns = [info["r"] for info in self.model.ep_info_buffer][-WINDOW:]
            if len(returns) == WINDOW and statistics.fmean(returns) >= TARGET:
                self.solved = True
                print(
                    f"sb3: reached {TARGET:g} ({statistics.fmean(returns):.1f}) at "
                    f"{self.num_timesteps:,} frames",
                    flush=True,
                )

    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    budget = ALGORITHMS[algo][1]
    if algo == "a2c":
        model = A2C("MlpPolicy", env, ent_coef=0.0, seed=seed, device="cpu")
        model.learn(total_timesteps=budget, callback=Reach())
        return
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=32,
        batch_size=256,
        n_epochs=20,
        gamma=0.98,
        gae_lambda=0.8,
        ent_coef=0.0,
        learning_rate=lambda progress: 1e-3 * progress,
        clip_range=0.2,
        max_grad_norm=0.5,
        seed=seed,
        device="cpu",
    )
    model.learn(total_timesteps=budget, callback=Reach())


def _command(
    contender: str, seed: int, hts_args: list[str], algo: str
) -> tuple[list[str], dict | None]:
    """The contender's command line and environment (``None``: this process's)."""
    if contender == "sb3":
        return benchmark("vs_sb3", "--sb3-child", str(seed), "--algo", SB3_ALGORITHM[algo])
    command = hts_fit(
        ALGORITHMS[algo][0],
        f"--model.init_args.total_frames={ALGORITHMS[algo][1]}",
        "--trainer.callbacks+=hts_lightning.callbacks.StopAtReturn",
        f"--trainer.callbacks.target={TARGET}",
        f"--trainer.callbacks.window={WINDOW}",
        seed=seed,
    )
    if contender == "sync":
        command.append("--model.init_args.collector=sync")
    return command + hts_args, None


def _run(command: list[str], env: dict | None, cwd: Path) -> tuple[int | None, float | None, float]:
    """(frames at the target or None, seconds from start to the line, total seconds)."""
    started = time.perf_counter()
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    frames = reached = None
    lines = []
    for line in process.stdout:
        lines.append(line)
        match = _REACHED.search(line)
        if match and frames is None:
            reached = time.perf_counter() - started
            frames = int(match.group(1).replace(",", ""))
    if process.wait() != 0:
        sys.stderr.write("".join(lines[-30:]))
        raise SystemExit(f"{command[0]} exited with {process.returncode}")
    return frames, reached, time.perf_counter() - started


def _median(values: list) -> str:
    return f"{statistics.median(values):,.1f}" if values else "-"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--algo", choices=sorted(ALGORITHMS), default="ppo")
    parser.add_argument("--contenders", nargs="+", default=["sb3", "hts"])
    parser.add_argument("--hts-args", nargs=argparse.REMAINDER, default=[])
    parser.add_argument("--sb3-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.sb3_child is not None:
        _sb3_child(args.sb3_child, args.algo)
        return
    work = Path(tempfile.mkdtemp(prefix="vs_sb3-"))
    print(f"machine: {os.cpu_count()} cores; runs in {work}; hts args {args.hts_args}")
    results: dict[str, list] = {c: [] for c in args.contenders}
    for index, seed in enumerate(args.seeds):
        order = args.contenders if index % 2 == 0 else args.contenders[::-1]
        for contender in order:
            load = os.getloadavg()[0]
            command, env = _command(contender, seed, args.hts_args, args.algo)
            frames, reached, total = _run(command, env, work)
            results[contender].append((seed, frames, reached, total, load))
            hit = f"{frames:,} frames, {reached:.1f} s" if frames else "not reached"
            print(f"seed {seed} {contender}: {hit} (process {total:.1f} s, load {load:.2f})")
            sys.stdout.flush()
    columns = ["contender", "seeds solved", "median frames", "median wall s",
               "per seed (frames / s)"]  # fmt: skip
    rows = []
    for contender, runs in results.items():
        solved = [r for r in runs if r[1] is not None]
        per_seed = ", ".join(
            f"{s}: {f:,} / {w:.1f}" if f else f"{s}: not reached" for s, f, w, _, _ in runs
        )
        rows.append([contender, f"{len(solved)}/{len(runs)}", _median([r[1] for r in solved]),
                     _median([r[2] for r in solved]), per_seed])  # fmt: skip
    print("\n" + "\n".join(reporting.markdown_table(columns, rows)))
    print(f"load average at the end: {'/'.join(f'{x:.2f}' for x in os.getloadavg())}")
    recipe, budget = ALGORITHMS[args.algo]
    sb3_algo = SB3_ALGORITHM[args.algo]
    records.write(
        f"vs_sb3_{args.algo}_" + "_".join(args.contenders),
        title=f"CartPole {args.algo.upper()} against Stable-Baselines3's {sb3_algo.upper()}: "
        "frames and seconds to a mean return of 475",
        tables=[{"columns": columns, "rows": rows}],
        text=[f"RL Zoo's {sb3_algo.upper()} settings on SB3's side (within "
              f"{ALGORITHMS[sb3_algo][1]:,} frames), `{recipe}` on hts-rl's (within {budget:,}); "
              f"seeds {args.seeds}, alternating; each run a fresh process timed from its start "
              f"to the 20-episode mean reaching 475. hts-rl extra "
              f"arguments: {args.hts_args or 'none'}."],
    )  # fmt: skip


if __name__ == "__main__":
    main()
