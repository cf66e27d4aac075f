"""Pong PPO end to end: ``hts-rl fit`` against a plain-PyTorch PPO loop over envpool.

The plain loop is what a single-file script does (CleanRL's ``ppo_atari_envpool.py``): envpool
steps 16 Pong replicas in its C++ threads, the policy acts on all 16 at once, and after 128
steps the update runs; nothing overlaps (collection waits for the update and the other way
round). Its network is the module's (``make_actor_critic``'s Nature CNN, same initial
weights) and its update is ``plain_ppo.update``, which the PPO module's update equals number
for number (``tests/modules/test_update_equivalence.py``): the recipe's settings, 4 epochs x 4
minibatches, clip 0.1, lr 2.5e-4, torch's default threads. ``hts-rl fit --config
recipes/atari/pong_ppo.yaml`` runs as a user runs it (2 worker processes, MLflow, checkpoint).
Each run is a fresh process, timed from its start to its exit, contenders alternating; the
machine's busy CPU seconds during it (run it on a quiet machine, under the lock) say how busy
it kept the cores (``getrusage`` of the children misses hts-rl's workers: their forkserver
outlives the run unreaped). A loop that keeps the cores busy leaves overlap nothing to win: no
contender doing the same work can beat it by more than cores x wall / CPU seconds.
``--before PATH`` adds ``hts-rl`` with ``PYTHONPATH=PATH`` (an older checkout) as a third;
``--variants`` adds the recipe with other settings (:data:`VARIANTS`) as contenders of their own.

    flock /tmp/hts-cpu.lock python -m benchmarks vs_plain_pytorch --frames 16384 --repeats 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import records
from benchmarks.common.processes import ROOT, benchmark, hts_fit

NUM_ENVS, STEPS = 16, 128
#: ``hts-rl fit`` contenders beside the recipe as it is ("hts"): their extra overrides.
VARIANTS = {
    "hts-python": ["--model.init_args.env_backend=python"],  # the recipe's before stop 29
    "hts-envpool": ["--model.init_args.env_backend=envpool"],
    "hts-envpool-2threads": [
        "--model.init_args.env_backend=envpool",
        "--model.init_args.learner_threads=2",
    ],
    "hts-2threads": ["--model.init_args.learner_threads=2"],
}


def _plain_child(frames: int, seed: int) -> None:
    import envpool
    import torch
    import yaml

    from benchmarks.common import plain_ppo as plain
    from hts_lightning.envs import make_atari_env
    from hts_lightning.models import make_actor_critic

    recipe = yaml.safe_load((ROOT / "recipes/atari/pong_ppo.yaml").read_text())
    args = recipe["model"]["init_args"]
    probe = make_atari_env("ALE/Pong-v5")
    torch.manual_seed(seed)
    model = make_actor_critic(probe.observation_spec, probe.action_spec)
    probe.close()
    envs = envpool.make(
        "Pong-v5", env_type="gymnasium", num_envs=NUM_ENVS, seed=seed, reward_clip=True
    )
    batches = -(-frames // (NUM_ENVS * STEPS))
    plain.train(
        plain.networks(model),
        envs,
        settings=plain.PPOSettings.from_module_args(args),
        lr=args["lr"],
        steps_per_batch=STEPS,
        batches=batches,
        schedule_batches=batches,  # the rate decays over the run
        clip_rewards=False,  # envpool clips
        seed=seed,
    )


def _command(contender: str, frames: int, seed: int) -> tuple[list[str], dict]:
    if contender == "plain":
        return benchmark("vs_plain_pytorch", "--plain-child", str(seed), "--frames", str(frames))
    env = dict(os.environ)
    command = hts_fit(
        "recipes/atari/pong_ppo.yaml",
        f"--model.init_args.total_frames={frames}",
        "--trainer.enable_progress_bar=false",
        seed=seed,
    )
    name, _, path = contender.partition("@")
    command += VARIANTS.get(name, [])
    env["PYTHONPATH"] = path or str(ROOT)
    return command, env


def _busy_cpu() -> float:
    """The machine's busy CPU seconds so far (every core, every process)."""
    import psutil

    times = psutil.cpu_times()
    return times.user + times.nice + times.system + times.irq + times.softirq


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=16_384)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--before", help="an older checkout to run hts-rl from, as a third")
    parser.add_argument("--variants", nargs="*", default=[], choices=sorted(VARIANTS))
    parser.add_argument("--plain-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.plain_child is not None:
        _plain_child(args.frames, args.plain_child)
        return
    contenders = ["plain", "hts", *args.variants]
    contenders += [f"hts@{args.before}"] if args.before else []
    work = Path(tempfile.mkdtemp(prefix="pong_vs_plain-"))
    print(f"machine: {os.cpu_count()} cores; {args.frames} frames per run; runs in {work}")
    walls: dict[str, list[float]] = {c: [] for c in contenders}
    cpus: dict[str, list[float]] = {c: [] for c in contenders}
    for repeat in range(args.repeats):
        for contender in contenders if repeat % 2 == 0 else contenders[::-1]:
            command, env = _command(contender, args.frames, args.seed)
            load = os.getloadavg()[0]
            cpu_before, started = _busy_cpu(), time.perf_counter()
            done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
            wall = time.perf_counter() - started
            cpu = _busy_cpu() - cpu_before
            if done.returncode != 0:
                sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
                raise SystemExit(f"{contender} exited with {done.returncode}")
            walls[contender].append(wall)
            cpus[contender].append(cpu)
            busy = cpu / (wall * os.cpu_count())
            print(
                f"{contender}: {wall:.1f} s, {cpu:.1f} CPU s ({busy:.0%} of the cores; "
                f"load {load:.2f} at start)",
                flush=True,
            )
            # The plain loop's update times: what no overlap can hide (the update's share).
            updates = [line for line in done.stdout.splitlines() if line.startswith("plain: ")]
            if updates:
                print("\n".join(f"  {line}" for line in updates), flush=True)
    plain = statistics.median(walls["plain"])
    rows = []
    for contender, values in walls.items():
        median, cpu = statistics.median(values), statistics.median(cpus[contender])
        busy = cpu / (median * os.cpu_count())
        print(
            f"{contender}: median {median:.1f} s over {len(values)} runs "
            f"({', '.join(f'{v:.1f}' for v in values)}); plain / {contender} = {plain / median:.2f}"
            f"; median {cpu:.1f} CPU s ({busy:.0%} of the cores)"
        )
        rows.append([contender, f"{median:.1f}", ", ".join(f"{v:.1f}" for v in values),
                     f"{plain / median:.2f}x", f"{busy:.0%}"])  # fmt: skip
    cores = os.cpu_count() * plain / statistics.median(cpus["plain"])
    print(f"the most any contender with the plain loop's CPU work can gain on it: {cores:.2f}x")
    print(f"load average at the end: {'/'.join(f'{x:.2f}' for x in os.getloadavg())}")
    records.write(
        "pong_vs_plain",
        title=f"Pong PPO end to end against a plain PyTorch loop over envpool, {args.frames:,} "
        "frames",
        tables=[{"columns": ["contender", "median s", "runs (s)", "speed / plain loop",
                             "cores busy"], "rows": rows}],
        text=["Each run a fresh process timed from start to exit, contenders alternating; the "
              "plain loop is a single-file PPO (CleanRL's shape) with the recipe's network and "
              "an update equal to the module's number for number; hts is `hts-rl fit --config "
              "recipes/atari/pong_ppo.yaml` as a user runs it. The most any contender doing "
              f"the plain loop's CPU work could gain on it here: {cores:.2f}x."],
    )  # fmt: skip


if __name__ == "__main__":
    main()
