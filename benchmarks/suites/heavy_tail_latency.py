"""Issue 16's latency targets: HTS on a sleep-bound, heavy-tailed env, one replica per worker.

``VariableLatencyEnv`` with a log-normal step time (mean 2 ms, std 10 ms by default), 8
replicas, each in its own worker process, the project's MLP actor-critic. Two panels, the
contenders one after the other in one invocation:

- ``ceiling``: collection only (the consumer does nothing). HTS's frames/s against the sleep
  ceiling ``num_envs / mean`` (4000 frames/s for 8 replicas at 2 ms) and against the ceiling the
  batch barrier leaves: a batch ends when its slowest replica has slept its ``sync_interval``
  draws, so at best ``num_envs * sync_interval / E[max over replicas of the sum of its draws]``
  (Monte Carlo over the same distribution). Also the lag-one ceiling: no barrier at all, only
  the rule that keeps the policy lag at one (a replica may run at most one batch ahead of the
  slowest). Target: HTS >= 0.9x the sleep ceiling.
- ``learner``: a fixed learner (the consumer sleeps ``--learner-ms`` per batch, a stand-in for a
  GPU update that holds no core). HTS (collection of batch k+1 during the update of k) against
  TorchRL's per-step synchronous ``Collector(ParallelEnv)`` and ``MultiSyncCollector`` (8 workers,
  one env each). Targets: HTS >= 2x the per-step synchronous collector and >= 1.2x MultiSync.

Every row also gives the CPU milliseconds the whole process tree (the workers included) spent
per frame: the env only sleeps, so that is the step path's own work.

    python -m benchmarks heavy_tail_latency [--panels ceiling learner] [--std-ms 10]
        [--sync-interval 64] [--batches 6] [--learner-ms 128]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import random
import time

import psutil
import torch
from torchrl.collectors import Collector, MultiSyncCollector
from torchrl.envs import ParallelEnv

from benchmarks.common import records, report
from hts_lightning import HTSCollector
from hts_lightning.envs.factory import env_factory
from hts_lightning.envs.latency import lognormal_parameters
from hts_lightning.models import make_actor_critic


def make_policy(make_env):
    probe = make_env()
    torch.manual_seed(0)
    policy = make_actor_critic(probe.observation_spec, probe.action_spec).get_policy_operator()
    probe.close()
    return policy


def barrier_ceiling(num_envs: int, steps: int, mean: float, std: float, rounds: int = 4000):
    """Frames/s when every batch waits for its slowest replica's ``steps`` sleeps."""
    mu, sigma = lognormal_parameters(mean, std)
    draw = random.Random(0).lognormvariate
    slowest = [
        max(sum(draw(mu, sigma) for _ in range(steps)) for _ in range(num_envs))
        for _ in range(rounds)
    ]
    return num_envs * steps / (sum(slowest) / rounds)


def lag_one_ceiling(num_envs: int, steps: int, mean: float, std: float, batches: int = 4000):
    """Frames/s of the tightest schedule that keeps the policy lag at one, with an instant
    learner: a replica starts batch k once it has slept batch k-1 and every replica has
    slept batch k-2 (whose update gives batch k's weights), instead of waiting at each batch
    boundary for the slowest replica."""
    mu, sigma = lognormal_parameters(mean, std)
    draw = random.Random(0).lognormvariate
    two_back, one_back = [0.0] * num_envs, [0.0] * num_envs
    for _ in range(batches):
        ready = max(two_back)
        ends = [max(end, ready) + sum(draw(mu, sigma) for _ in range(steps)) for end in one_back]
        two_back, one_back = one_back, ends
    return num_envs * steps * batches / max(one_back)


def cpu_seconds() -> float:
    """CPU time (user + system) of this process and all its descendants (the workers)."""
    total = 0.0
    for process in [psutil.Process(), *psutil.Process().children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += sum(process.cpu_times()[:2])
    return total


def timed(collector, frames_per_batch: int, batches: int, learner_s: float) -> tuple[float, float]:
    """Frames/s over ``batches`` after one warm-up batch, the consumer sleeping ``learner_s``,
    and the CPU milliseconds the whole process tree spent per frame meanwhile (the env only
    sleeps: what is above zero is the step path's own work)."""
    try:
        iterator = iter(collector)
        next(iterator)
        time.sleep(learner_s)
        cpu, start = cpu_seconds(), time.perf_counter()
        for _ in range(batches):
            next(iterator)
            time.sleep(learner_s)
        frames = frames_per_batch * batches
        return frames / (time.perf_counter() - start), 1e3 * (cpu_seconds() - cpu) / frames
    finally:
        collector.shutdown()


def hts(make_env, args, **kwargs) -> HTSCollector:
    return HTSCollector(
        make_env,
        make_policy(make_env),
        num_envs=args.num_envs,
        num_workers=args.num_envs,
        sync_interval=args.sync_interval,
        # The fixed learner holds no core: there is nothing for lower-priority workers to
        # yield to, except, on a shared machine, other people's processes (TorchRL's workers
        # run at normal priority too).
        worker_niceness=0,
        **kwargs,
    )


TORCHRL = dict(
    env_device="cpu",
    storing_device="cpu",
    policy_device="cpu",
    auto_register_policy_transforms=False,
)


def per_step_sync(make_env, args):
    env = ParallelEnv(args.num_envs, make_env, num_threads=1)
    collector = Collector(
        env, make_policy(make_env), frames_per_batch=args.frames, total_frames=-1, **TORCHRL
    )
    collector.set_seed(0)
    return collector


def multi_sync(make_env, args):
    collector = MultiSyncCollector(
        [make_env] * args.num_envs,
        make_policy(make_env),
        frames_per_batch=args.frames,
        total_frames=-1,
        num_threads=1,
        **TORCHRL,
    )
    collector.set_seed(0)
    return collector


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--panels", nargs="+", choices=("ceiling", "learner"), default=None)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--mean-ms", type=float, default=2.0)
    parser.add_argument("--std-ms", type=float, default=10.0)
    parser.add_argument("--sync-interval", type=int, default=64)
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--learner-ms", type=float, help="default: sync_interval * mean")
    args = parser.parse_args(argv)
    args.panels = args.panels or ["ceiling", "learner"]
    args.frames = args.num_envs * args.sync_interval
    mean, std = args.mean_ms / 1e3, args.std_ms / 1e3
    learner_s = (args.learner_ms / 1e3) if args.learner_ms else args.sync_interval * mean
    make_env = env_factory("VariableLatency", distribution="lognormal", mean=mean, std=std)
    torch.set_num_threads(1)
    print(
        f"{os.cpu_count()} CPUs ({platform.machine()}), torch {torch.__version__}; "
        f"VariableLatencyEnv lognormal mean {args.mean_ms} ms std {args.std_ms} ms; "
        f"{args.num_envs} envs, one per worker; sync_interval {args.sync_interval}; "
        f"{args.batches} timed batches"
    )
    rows = []
    if "ceiling" in args.panels:
        sleep = args.num_envs / mean
        barrier = barrier_ceiling(args.num_envs, args.sync_interval, mean, std)
        lag_one = lag_one_ceiling(args.num_envs, args.sync_interval, mean, std)
        print(
            f"sleep ceiling {sleep:.0f} frames/s; barrier ceiling {barrier:.0f} frames/s; "
            f"lag-one ceiling (no barrier, replicas one batch apart) {lag_one:.0f} frames/s"
        )
        for label, kwargs in (
            ("HTS (default inference_batch_size)", {}),
            ("HTS, inference_batch_size=1", dict(inference_batch_size=1)),
        ):
            fps, cpu = timed(hts(make_env, args, **kwargs), args.frames, args.batches, 0.0)
            rows.append(("ceiling", label, fps, cpu, f"{fps / sleep:.2f}", f"{fps / barrier:.2f}"))
            print(rows[-1], os.getloadavg(), flush=True)
    if "learner" in args.panels:
        found = {}
        for label, build in (
            ("HTS", lambda: hts(make_env, args)),
            ("HTS, inference_batch_size=1", lambda: hts(make_env, args, inference_batch_size=1)),
            ("Collector(ParallelEnv)", lambda: per_step_sync(make_env, args)),
            ("MultiSyncCollector", lambda: multi_sync(make_env, args)),
        ):
            found[label] = timed(build(), args.frames, args.batches, learner_s)
            print(label, f"{found[label][0]:.0f}", os.getloadavg(), flush=True)
        best = max(found["HTS"][0], found["HTS, inference_batch_size=1"][0])
        for label, (fps, cpu) in found.items():
            rows.append(("learner", label, fps, cpu, f"{best / fps:.2f}", ""))
        print(f"fixed learner: {learner_s * 1e3:.0f} ms per batch (sleep)")
    columns = ["panel", "contender", "frames/s", "CPU ms per frame",
               "/ sleep ceiling (ceiling) or best HTS / this", "/ barrier ceiling"]  # fmt: skip
    cells = [[panel, label, f"{fps:.0f}", f"{cpu:.2f}", a, b]
             for panel, label, fps, cpu, a, b in rows]  # fmt: skip
    print("\n".join(report.markdown_table(columns, cells)))
    print("load", " / ".join(f"{x:.1f}" for x in os.getloadavg()))
    records.write(
        "latency_targets",
        title="Heavy-tailed env latency: HTS against the per-step and per-batch synchronous "
        "collectors",
        tables=[{"columns": columns, "rows": cells}],
        text=[f"VariableLatencyEnv, log-normal step time, mean {args.mean_ms} ms, std "
              f"{args.std_ms} ms; {args.num_envs} envs, one per worker process; sync_interval "
              f"{args.sync_interval}; {args.batches} timed batches. 'learner': a fixed learner "
              f"of {learner_s * 1e3:.0f} ms per batch (a sleep) consumes each batch."],
    )  # fmt: skip


if __name__ == "__main__":
    main()
