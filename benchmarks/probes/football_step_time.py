"""Google Research Football: env step time per scenario, and HTS vs synchronous PPO end to end.

Two parts, one RESULTS.md section:

- ``steps``: the step time (mean, std, coefficient of variation, median, p99) of one env per
  scenario in this process, stepped with uniformly random actions (seeded) through the TorchRL
  env ``make_football_env`` gives the recipes (stacked SMM observations, rewards
  scoring+checkpoints); automatic resets at episode ends are timed with the step that ends the
  episode, as a collector sees them.
- ``ratio``: end-to-end PPO training frames/s on academy_3_vs_1_with_keeper with the recipe's
  hyperparameters (2 epochs x 8 minibatches, clip 0.08, ...), the HTSCollector against
  TorchRL's ``Collector(ParallelEnv)`` ("sync", the synchronous baseline) and optionally its
  multi-process collectors, through the shared ``runner.train`` (same module, model, learner,
  replicas and processes; only ``collector=`` differs). The paper: 4.85x on 3 vs 1.

    python -m benchmarks football_step_time [--steps 300] [--scenarios ...] [--num-envs 8]
        [--num-workers 2] [--sync-interval 64] [--batches 3] [--full] [--output RESULTS.md]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import get_args

import torch
import yaml

from benchmarks.common import ROOT
from benchmarks.common.figure_args import add_common_args
from benchmarks.common.report import announce, emit, load_str, ratio_header, ratios, section
from benchmarks.common.runner import FOOTBALL, Run, contenders, train
from hts_lightning import make_football_env
from hts_lightning.choices import CollectorKind
from hts_lightning.envs.football import PAPER_SCENARIOS

SCENARIOS = PAPER_SCENARIOS
RECIPE = ROOT / "recipes" / "football" / f"{FOOTBALL}_ppo.yaml"
#: The recipe's PPO hyperparameters (not its sizes: those are the benchmark's arguments).
PPO_KEYS = (
    "gamma",
    "gae_lambda",
    "lr",
    "entropy_coef",
    "value_coef",
    "max_grad_norm",
    "normalize_advantage",
    "clip_epsilon",
    "epochs",
    "minibatches",
)


def step_times(scenario: str, steps: int, seed: int = 0) -> dict:
    """Seconds per env step (random actions), and the episodes that ended."""
    env = make_football_env(scenario, seed=seed)
    generator = torch.Generator().manual_seed(seed)
    n = env.action_spec.shape[-1]
    td = env.reset()
    times, episodes = [], 0
    for _ in range(steps):
        td.set("action", torch.nn.functional.one_hot(torch.randint(n, (), generator=generator), n))
        start = time.perf_counter()
        stepped, td = env.step_and_maybe_reset(td)
        times.append(time.perf_counter() - start)
        episodes += int(stepped["next", "done"].item())
    env.close()
    times_ms = sorted(t * 1000 for t in times)
    mean = statistics.fmean(times_ms)
    std = statistics.pstdev(times_ms)
    return {
        "scenario": scenario,
        "mean": mean,
        "std": std,
        "cv": std / mean,
        "p50": times_ms[len(times_ms) // 2],
        "p99": times_ms[min(len(times_ms) - 1, int(0.99 * len(times_ms)))],
        "steps_per_s": 1000 / mean,
        "episodes": episodes,
        "load": os.getloadavg()[0],
    }


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--parts", nargs="+", choices=("steps", "ratio"), default=["steps", "ratio"]
    )
    parser.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    parser.add_argument("--steps", type=int, default=300, help="timed env steps per scenario")
    parser.add_argument(
        "--collectors",
        nargs="+",
        choices=get_args(CollectorKind),
        default=["hts", "sync"],
    )
    parser.add_argument("--num-envs", type=int, help="default 8; --full 16")
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--sync-interval", type=int, help="default 64; --full 128")
    parser.add_argument("--batches", type=int, help="timed batches after the first (3; --full 10)")
    add_common_args(parser)
    args = parser.parse_args(argv)
    args.num_envs = args.num_envs or (16 if args.full else 8)
    args.sync_interval = args.sync_interval or (128 if args.full else 64)
    args.batches = args.batches or (10 if args.full else 3)
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    table: list[str] = []
    settings: list[str] = []
    if "steps" in args.parts:
        print(f"== step time, {args.steps} random-action steps per scenario", flush=True)
        rows = []
        for scenario in args.scenarios:
            row = step_times(scenario, args.steps)
            rows.append(row)
            print(
                f"  {scenario:40s} {row['mean']:6.2f} +- {row['std']:5.2f} ms "
                f"({row['steps_per_s']:.0f} steps/s), {row['episodes']} episodes",
                flush=True,
            )
        table += [
            "| scenario | mean ms | std ms | CV | median ms | p99 ms | steps/s | episodes "
            "| load 1 min |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
            *(
                f"| {r['scenario']} | {r['mean']:.2f} | {r['std']:.2f} | {r['cv']:.2f} | "
                f"{r['p50']:.2f} | {r['p99']:.2f} | {r['steps_per_s']:.0f} | {r['episodes']} "
                f"| {r['load']:.1f} |"
                for r in rows
            ),
            "",
        ]
        settings.append(
            f"step time: one env in the benchmark's process, {args.steps} steps with uniformly "
            "random actions (seed 0), auto-resets included in the step that ends the episode; "
            "`make_football_env` defaults (stacked SMM, scoring+checkpoints)"
        )
    if "ratio" in args.parts:
        with open(RECIPE) as handle:
            init_args = yaml.safe_load(handle)["model"]["init_args"]
        ppo = {key: init_args[key] for key in PPO_KEYS}
        runs: list[Run] = []
        print(f"== end to end, {FOOTBALL}", flush=True)
        for kind, inference in contenders(args.collectors, args.hts_inference):
            run = Run(FOOTBALL, kind, args.num_envs, args.num_workers, args.sync_interval)
            run.inference = inference
            runs.append(train(run, init_args["env_id"], {}, batches=args.batches, **ppo))
            announce(run)
        labels, titles = ratio_header(runs)
        table += [
            f"| env | collector | frames/s | {' | '.join(titles)} | policy lag "
            "| update / wait s | load 1/5/15 min |",
            "| --- | --- | ---: | " + "---: | " * len(titles) + "--- | --- | --- |",
        ]
        for r in runs:
            cells = " | ".join(ratios(runs, r, lambda x: x.env, labels))
            table.append(
                f"| {r.env} | {r.label} | {r.fps:.0f} | {cells} | {r.lag} | {r.per_batch} "
                f"| {load_str(r.load)} |"
            )
        settings.append(
            f"end to end: PPO with `recipes/football/{FOOTBALL}_ppo.yaml`'s hyperparameters; "
            f"{args.num_envs} envs in {args.num_workers} processes, {args.sync_interval} steps "
            f"per replica and batch, {args.batches} timed batches after the first"
        )
    title = "Google Research Football: step time and HTS vs synchronous PPO"
    emit(section(title, "; ".join(settings), table, []), args.output)


if __name__ == "__main__":
    main()
