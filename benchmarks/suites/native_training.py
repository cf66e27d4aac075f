"""End-to-end PPO training throughput with the envpool backend next to the Python env stack.

The same module (the recipe's PPO hyperparameters), learner and replica count; only the
module's ``env_backend`` (HTSCollector over envpool, its policy in the pool's worker process
or in a thread of the learner's process, or over TorchRL envs in W worker processes) or
``collector`` (``multi_sync``, TorchRL's ``MultiSyncCollector`` over the Python
stack) changes. Timed by ``runner.train`` (from the end of the first update to the end of the
last), learner threads each collector's own (``runner.fresh_threads``). This is what decides a
recipe's ``env_backend``.

    python -m benchmarks native_training --envs cartpole pong --output benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.common import report, runner

# (env_id, num_envs, sync_interval, PPO kwargs of the recipe[, env_kwargs])
_FOOTBALL_PPO = dict(
    gamma=0.993, gae_lambda=0.95, lr=0.000343, entropy_coef=0.003, max_grad_norm=0.64,
    clip_epsilon=0.08, epochs=2, minibatches=8,
)  # fmt: skip
ENVS = {
    "cartpole": (
        "CartPole-v1",
        8,
        32,
        dict(gamma=0.98, gae_lambda=0.8, lr=0.001, entropy_coef=0.0, epochs=20, minibatches=1),
    ),
    "pong": ("ALE/Pong-v5", 16, 128, dict(lr=0.00025, clip_epsilon=0.1, epochs=4, minibatches=4)),
    # The football recipes' PPO on the gfootball package and on envpool's port, both with the
    # scoring reward (the port has no checkpoint rewards).
    "football": (
        "GFootball/academy_empty_goal_close",
        16,
        128,
        _FOOTBALL_PPO,
        {"rewards": "scoring"},
    ),
}
CONTENDERS = {
    "HTS envpool": ("hts", "envpool", "auto"),
    "HTS envpool, inference in the learner's process": ("hts", "envpool", "main"),
    "HTS python": ("hts", "python", "auto"),
    "MultiSyncCollector": ("multi_sync", "python", "auto"),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", nargs="+", default=list(ENVS), choices=list(ENVS))
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--batches", type=int, default=6, help="timed batches after the first")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    cells = []
    for env in args.envs:
        env_id, num_envs, sync_interval, ppo, *env_kwargs = ENVS[env]
        found = {}
        for name, (collector, backend, inference) in CONTENDERS.items():
            run = runner.Run(
                env, collector, num_envs, args.num_workers, sync_interval, inference=inference
            )
            runner.train(run, env_id, *env_kwargs, batches=args.batches, env_backend=backend, **ppo)
            found[name] = run
            print(
                f"{env} {name}: {run.fps:.0f} frames/s, update/wait {run.per_batch} s, "
                f"lag {run.lag}, load {report.load_str(run.load)}",
                flush=True,
            )
        native = found["HTS envpool"].fps
        for name, run in found.items():
            cells.append(
                [
                    env,
                    name,
                    f"{run.fps:.0f}",
                    f"{native / run.fps:.2f}x",
                    run.per_batch,
                    run.lag,
                    report.load_str(run.load),
                ]
            )
    header = [
        "env",
        "contender",
        "frames/s",
        "HTS envpool / this",
        "update / wait s per batch",
        "lag",
        "load",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    text = "\n\n".join(
        [
            "### Native (envpool) PPO training throughput",
            report.machine_line(),
            f"Command: `{report.command_line()}`; W={args.num_workers}, "
            f"{args.batches} timed batches.",
            "\n".join(lines),
        ]
    )
    report.emit(text, args.output, record="native_training_" + "_".join(args.envs))


if __name__ == "__main__":
    main()
