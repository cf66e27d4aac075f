"""The learner alone: the PPO module's update against the same update in plain PyTorch.

One batch is collected with the recipe's env and a fresh policy (CartPole: 8 x 32 frames;
Pong: 16 x 128, 4 x 84 x 84 frames). The module then trains on copies of it through
Lightning's own loop (``Trainer.fit`` with the batch as the dataloader: training_step, GAE,
ClipPPOLoss, clipping, the behaviour snapshot, logging), and ``plain_ppo.update`` does the
same update (same layers, loss terms, Adam, minibatch sizes) on the same batch. The two
alternate update by update in one process and one thread count: after each of the module's
updates (timed from the end of the previous plain update to the end of its training step:
Lightning's loop between batches included) a callback runs and times one plain update, so
both sides see the same load (on a shared machine, rounds of 15 updates each saw loads that
moved the ratio by +-0.2). ``--rounds`` fresh fits (and fresh plain networks); the first
update of each side in a round is left out. Reported: the median seconds per update of each,
their ratio, and the load average.

    python -m benchmarks learner_update --env cartpole --updates 20 --rounds 3
    python -m benchmarks learner_update --env pong --updates 3 --rounds 3 --threads 2
    python -m benchmarks learner_update --env cartpole --profile   # cProfile of the module
    python -m benchmarks learner_update --env cartpole --clock cpu   # CPU time, see below
    python -m benchmarks learner_update --mlflow   # MLflowLogger's cost per update instead

``--clock cpu``: the process's CPU time (``time.process_time``, torch's intra-op threads
included) instead of wall time. On a machine shared with other work, wall time counts the
time the process waits for a core; its CPU time does not (caches and a busy sibling core
still slow it). The two sides take turns in one process, so the ratio compares like with like;
time spent waiting (none here: the batch is in memory) would not be counted.

``--mlflow``: the seconds ``MLflowLogger.log_metrics`` takes per update for 25 metrics (what a
PPO update logs) into a SQLite store, written at once (``metrics_interval=0``, what every
update paid before) against buffered (the default), alternating, the buffer's final flush
included.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import time

import torch
import yaml
from lightning import Callback, Trainer

from benchmarks.common import ROOT, records
from benchmarks.common import plain_ppo as plain
from hts_lightning import PPO, HTSCollector

RECIPES = {
    "cartpole": ROOT / "recipes/cartpole_ppo.yaml",
    "pong": ROOT / "recipes/atari/pong_ppo.yaml",
    "halfcheetah": ROOT / "recipes/mujoco/halfcheetah_ppo.yaml",
}


class ReplayPPO(PPO):
    """The PPO module trained on copies of one fixed batch instead of a collector (set
    ``replay`` to ``(batch, count)`` after construction: a TensorDict among the init arguments
    breaks Lightning's ``save_hyperparameters``)."""

    replay: tuple = ()

    def train_dataloader(self):
        return _Copies(*self.replay)


class _Copies:
    """``count`` copies of ``batch``, as a sized iterable (a list would be read by Lightning
    as several dataloaders)."""

    def __init__(self, batch, count: int):
        self.batch, self.count = batch, count

    def __iter__(self):
        return (self.batch.clone() for _ in range(self.count))

    def __len__(self) -> int:
        return self.count


class _Interleaved(Callback):
    """Times each of the module's updates, from the end of the previous plain update (or the
    first batch's start) to the end of its training step, then runs and times ``plain()``."""

    def __init__(self, plain=None, clock=time.perf_counter):
        self.plain = plain
        self.clock = clock
        self.times: list[float] = []
        self.plain_times: list[float] = []
        self._last: float | None = None

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        if self._last is None:
            self._last = self.clock()

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        now = self.clock()
        self.times.append(now - self._last)
        if self.plain is not None:
            self.plain()
            self.plain_times.append(self.clock() - now)
        self._last = self.clock()


def recipe_args(env: str) -> dict:
    return dict(yaml.safe_load(RECIPES[env].read_text())["model"]["init_args"], num_workers=0)


def collect_batch(args: dict):
    """One batch of the recipe's env with the module's initial policy."""
    probe = PPO(**args)
    with HTSCollector(
        probe.create_env,
        probe.actor,
        num_envs=args["num_envs"],
        num_workers=0,
        frames_per_batch=probe.frames_per_batch,
        total_frames=probe.frames_per_batch,
        seed=args.get("seed", 0),
    ) as collector:
        return next(iter(collector)).clone()


def fit_module(
    args: dict,
    batch,
    updates: int,
    profile: cProfile.Profile | None = None,
    plain=None,
    clock=time.perf_counter,
) -> tuple[PPO, _Interleaved]:
    """The module's updates on ``batch`` through Lightning, each followed by ``plain()``
    when given; returns the module and the callback with the seconds of each."""
    frames = batch.numel()
    module = ReplayPPO(**dict(args, total_frames=frames * updates))
    module.replay = (batch, updates)
    times = _Interleaved(plain, clock)
    trainer = Trainer(
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[times],
    )
    if profile is not None:
        profile.enable()
    trainer.fit(module)
    if profile is not None:
        profile.disable()
    return module, times


def plain_updater(args: dict, batch, actor_critic):
    """A callable doing the next plain-PyTorch update on ``batch`` (own copies of the layers)."""
    nets = plain.networks(actor_critic)
    optimizer = torch.optim.Adam(nets.parameters(), lr=args["lr"], eps=1e-5, fused=True)
    settings = plain.PPOSettings.from_module_args(args)
    done = 0

    def update() -> None:
        nonlocal done
        generator = torch.Generator().manual_seed(args.get("seed", 0) * 1_000_003 + done)
        plain.update(nets, optimizer, batch, settings, generator)
        done += 1

    return update


def mlflow_cost(updates: int, rounds: int) -> None:
    """Seconds of ``log_metrics`` per update, unbuffered against buffered (see the docstring)."""
    import tempfile

    from hts_lightning.tracking import MLflowLogger

    store = tempfile.mkdtemp(prefix="learner_update-mlflow-")
    metrics = {f"train/metric_{k}": float(k) for k in range(25)}
    seconds: dict[float, list[float]] = {0.0: [], 5.0: []}
    for _ in range(rounds):
        for interval in seconds:
            logger = MLflowLogger(
                tracking_uri=f"sqlite:///{store}/mlflow.db",
                save_dir=store,
                metrics_interval=interval,
            )
            logger.log_metrics(metrics, step=0)  # makes the run, untimed
            start = time.perf_counter()
            for update in range(1, updates + 1):
                logger.log_metrics(metrics, step=update)
            logger.flush()
            seconds[interval].append((time.perf_counter() - start) / updates)
            logger.finalize("success")
    at_once, buffered = (statistics.median(v) for v in seconds.values())
    print(
        f"MLflowLogger.log_metrics, 25 metrics, {updates} updates x {rounds} rounds: written "
        f"at once {at_once * 1000:.2f} ms/update, buffered {buffered * 1000:.2f} ms/update; "
        f"load {'/'.join(f'{x:.2f}' for x in os.getloadavg())}",
        flush=True,
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", choices=sorted(RECIPES), default="cartpole")
    parser.add_argument("--updates", type=int, default=20, help="updates per round and side")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--profile", action="store_true", help="cProfile the module's fit")
    parser.add_argument("--mlflow", action="store_true", help="MLflowLogger's cost per update")
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall time, or the process's CPU time (see the docstring)",
    )
    options = parser.parse_args(argv)
    if options.mlflow:
        mlflow_cost(updates=max(options.updates, 100), rounds=options.rounds)
        return
    torch.set_num_threads(options.threads)
    args = recipe_args(options.env)
    batch = collect_batch(args)
    if options.profile:
        profile = cProfile.Profile()
        fit_module(args, batch, options.updates, profile)
        pstats.Stats(profile).sort_stats("tottime").print_stats(30)
        return
    module_times, plain_times = [], []
    for _ in range(options.rounds):
        plain_update = plain_updater(args, batch, PPO(**args).model)
        clock = time.process_time if options.clock == "cpu" else time.perf_counter
        _, times = fit_module(args, batch, options.updates, plain=plain_update, clock=clock)
        module_times.extend(times.times[1:])  # the first includes Lightning's loop start
        plain_times.extend(times.plain_times[1:])
    steps = args["epochs"] * args["minibatches"]
    m, p = statistics.median(module_times), statistics.median(plain_times)
    print(
        f"{options.env}: {batch.numel()} frames, {steps} optimizer steps per update, "
        f"{options.threads} thread(s), {options.clock} clock; module {m * 1000:.1f} ms/update "
        f"({m / steps * 1000:.2f} ms/step), plain PyTorch {p * 1000:.1f} ms/update "
        f"({p / steps * 1000:.2f} ms/step); module / plain = {m / p:.2f}; "
        f"load {'/'.join(f'{x:.2f}' for x in os.getloadavg())}",
        flush=True,
    )
    records.write(
        f"learner_update_{options.env}",
        title=f"The PPO module's update against plain PyTorch, {options.env}",
        claim="end_to_end",
        tables=[{"columns": ["contender", "ms per update", "ms per optimizer step"],
                 "rows": [["PPO module (Lightning, TorchRL loss)", f"{m * 1000:.1f}",
                           f"{m / steps * 1000:.2f}"],
                          ["plain PyTorch (benchmarks/common/plain_ppo.py)", f"{p * 1000:.1f}",
                           f"{p / steps * 1000:.2f}"]]}],
        text=[f"{batch.numel()} frames, {steps} optimizer steps per update, "
              f"{options.threads} torch thread(s), {options.clock} clock, median over "
              f"{options.rounds} rounds of {options.updates} updates: module / plain = "
              f"{m / p:.2f}."],
    )  # fmt: skip


if __name__ == "__main__":
    main()
