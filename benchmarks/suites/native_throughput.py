"""Collection throughput over envpool: HTS's native backend next to its limits and baselines.

Frames/s with no learning, contenders side by side in one invocation (same env, same network,
same number of replicas, W threads or processes, the same torch thread count):

- ``envpool alone``: the pool with random actions (async, ``recv`` of num_envs/2 ready envs,
  ``send`` to their ids): the machine's limit.
- ``hand loop``: the minimal loop a user would write over envpool's async API: ``recv`` the
  num_envs/2 ready envs, run the actor's network on them (plain modules, no TensorDict),
  sample, ``send``. What the native backend must at least match.
- ``HTS envpool``: ``HTSCollector(env_factory(id, backend="envpool"))``, W envpool threads in
  worker processes that also run the policy (CPU default: W threads over the processes that
  whole inference chunks fill); also with the policy in a thread
  of the consumer's process (``inference="main"``, the GPU mode). Inference in chunks of the
  default ``min(num_envs, 8)`` rows; and with chunks of all
  ``num_envs`` rows (it then waits for every replica in flight before acting: synchronous
  stepping within the batch, fewer and larger inference calls).
- ``HTS python``: the HTSCollector over the Python env stack, W worker processes.
- ``MultiSyncCollector``: TorchRL's, over the Python env stack, W processes.
- ``Collector(MultiThreadedEnv)``: TorchRL's own envpool path, synchronous at every step.
  torchrl 0.14's wrapper asks envpool for ``env_type="gym"`` and converts its spaces with the
  old gym's registry, but envpool 1.2.5 only makes gymnasium spaces: the two conversions it
  needs are registered here through TorchRL's public ``register_gym_spec_conversion``. Its
  actions are categorical, so its actor is the same network with a categorical head.
  Preprocessing: envpool's defaults (it has no place for ours): Atari with fire-reset on.

Steady state: one batch (or as many frames) of warm-up, then batches timed until both
``--batches`` batches and ``--min-seconds`` have passed (4 CartPole batches are ~0.2 s, too
short to tell a ratio from noise). ``--repeats`` rounds run the contenders in turn; the table
gives each one's median, and a line per env the per-round ratio HTS envpool / hand loop (its
median and range: the two contenders of one round ran next to each other).

    .venv/bin/python -m benchmarks native_throughput --repeats 5 --output benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import torch

from benchmarks.common import report
from benchmarks.common.envpool_collection import (
    CONTENDERS,
    GAMES,
    HAND,
    HTS_NATIVE,
    SYNC_INTERVAL,
    Setting,
    make_model,
)


def bench(setting: Setting, names: list[str], repeats: int) -> dict[str, list[float]]:
    """Each contender's frames/s in each round (the contenders in turn, round after round)."""
    model = make_model(GAMES[setting.env])
    samples: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(repeats):
        for name in names:
            torch.set_num_threads(max(1, (os.cpu_count() or 1) - setting.threads))
            try:
                fps = CONTENDERS[name](setting, model)
            except Exception as error:  # a baseline that cannot run is reported, not hidden
                print(f"[{setting.env}] {name} failed: {type(error).__name__}: {error}")
                fps = float("nan")
            samples[name].append(fps)
            load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
            print(f"[{setting.env}] round {round_ + 1} {name}: {fps:.0f} frames/s (load {load})")
    return samples


def round_ratios(results: dict[str, dict[str, list[float]]]) -> str:
    """Per env, HTS envpool / hand loop in each round, with their median and range."""
    lines = []
    for env, samples in results.items():
        if HTS_NATIVE in samples and HAND in samples:
            ratios = [a / b for a, b in zip(samples[HTS_NATIVE], samples[HAND], strict=True)]
            lines.append(
                f"- {env}: HTS envpool / hand loop per round "
                + ", ".join(f"{r:.2f}" for r in ratios)
                + f"; median {statistics.median(ratios):.2f}, range {min(ratios):.2f}-"
                f"{max(ratios):.2f}"
            )
    return "\n".join(lines)


def table(results: dict[str, dict[str, float]], settings: dict[str, Setting]) -> str:
    lines = [
        "| env | contender | frames/s | HTS envpool / this | this / hand loop |",
        "|---|---|---:|---:|---:|",
    ]
    for env, found in results.items():
        native, hand = found.get(HTS_NATIVE, float("nan")), found.get(HAND, float("nan"))
        for name, fps in found.items():
            lines.append(f"| {env} | {name} | {fps:.0f} | {native / fps:.2f} | {fps / hand:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", nargs="+", choices=list(GAMES), default=list(GAMES))
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2, help="W: envpool threads / processes")
    parser.add_argument("--sync-interval", type=int)
    parser.add_argument("--batches", type=int, default=4, help="at least this many timed")
    parser.add_argument(
        "--min-seconds", type=float, default=3.0, help="time each contender at least this long"
    )
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--contenders", nargs="+", choices=list(CONTENDERS), default=None)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    names = args.contenders or list(CONTENDERS)
    settings = {
        env: Setting(
            env,
            args.num_envs,
            args.threads,
            args.sync_interval or SYNC_INTERVAL[env],
            args.batches,
            args.min_seconds,
        )
        for env in args.envs
    }
    rounds = {env: bench(setting, names, args.repeats) for env, setting in settings.items()}
    medians = {
        env: {name: statistics.median(found) for name, found in samples.items()}
        for env, samples in rounds.items()
    }
    described = "; ".join(
        f"{s.env}: {s.num_envs} envs, W={s.threads}, sync_interval={s.sync_interval}, "
        f"timed >= {s.batches} batches and >= {s.min_seconds:g} s, hand-loop chunk {s.chunk}"
        for s in settings.values()
    )
    text = "\n\n".join(
        [
            "### Native (envpool) collection throughput, "
            + time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            report.machine_line() + f"; load average at the end {report.load_str(os.getloadavg())}",
            f"Command: `{report.command_line()}`\n\nSettings: {described}; repeats="
            f"{args.repeats} (median); torch threads max(1, cores - W) for all.",
            table(medians, settings),
            round_ratios(rounds),
        ]
    )
    report.emit(text, args.output, record="native_throughput_" + "_".join(args.envs))


if __name__ == "__main__":
    main()
