"""Collection throughput of HTSCollector next to TorchRL's own collectors (frames/s, no learning).

Every collector gets the same env factory, the same policy (``make_actor_critic``'s actor), the
same number of env replicas, the same number of worker processes and the same batch size
(``num_envs * sync_interval`` frames). Throughput is measured in steady state: the first batch
(process start-up, first resets, first inference; W batches for MultiAsyncCollector) is a warm-up
and is not timed, and the consumer does nothing with the batches. The collectors
run one after the other in the same invocation, so that they share the machine's load of the
moment (the machines are shared and noisy: compare ratios, not absolute numbers across runs).

Contenders, all with W worker processes:

- ``HTSCollector``: W processes step the replicas; one barrier per batch, and batch k+1 is
  collected while batch k is consumed. Inference runs in the workers on a CPU-only machine and in
  the main process (batched over whichever replicas are ready) with a GPU: its ``inference="auto"``.
- ``Collector(ParallelEnv)``: the classic A2C/PPO vectorized setup, synchronous at every step.
- ``MultiSyncCollector``: W sub-collectors, each with its own policy copy and envs, synchronized at
  every batch; every yielded batch holds frames from all of them.
- ``MultiAsyncCollector``: the same sub-collectors, unsynchronized; every yielded batch comes from
  one of them (so its trajectories are W times longer, with the same frame count).
- env alone: the env with random actions and no policy, "the limit". For Pong also ale-py's native
  C++ vector env (``AtariVectorEnv`` with W threads), which skips the Python/gymnasium/TorchRL
  stack altogether and shows what the emulator itself can do.

Run ``python benchmarks/collector_throughput.py --help``; see ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import math
import multiprocessing
import multiprocessing.queues
import multiprocessing.synchronize
import os
import platform
import queue
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import tensordict
import torch
import torchrl
from tensordict.nn import TensorDictModuleBase
from torchrl.collectors import BaseCollector, Collector, MultiAsyncCollector, MultiSyncCollector
from torchrl.envs import EnvBase, ParallelEnv, SerialEnv

from hts_lightning import HTSCollector, VariableLatencyEnv, make_atari_env
from hts_lightning.models import make_actor_critic

ENV_ALONE = "env alone (W procs, random actions)"
ALE_NATIVE = "env alone (ale-py AtariVectorEnv, W threads)"
HTS = "HTSCollector"
COLLECTOR_NAMES = (HTS, "Collector(ParallelEnv)", "MultiSyncCollector", "MultiAsyncCollector")
SEED = 0
# Every collector is endless and stopped by the benchmark after the batches it times. With a finite
# total_frames, TorchRL's Collector closes its env (joining the ParallelEnv workers) before it
# yields the last batch, so that batch's time would include the teardown.
ENDLESS = -1


@dataclass(frozen=True)
class EnvCase:
    """One benchmarked env: a picklable factory and its default steps per batch."""

    name: str
    make_env: Callable[[], EnvBase]
    sync_interval: int
    ale_game: str | None = None
    mean_step_s: float | None = None


def env_cases() -> dict[str, EnvCase]:
    # mean 2 ms per step; std 0.5 ms is a steady simulator, std 10 ms the heavy tail of Google
    # Research Football (paper section 5), where synchronous-every-step stepping suffers most.
    latency = partial(VariableLatencyEnv, distribution="lognormal", mean=0.002)
    return {
        "pong": EnvCase("pong", partial(make_atari_env, "ALE/Pong-v5"), 128, ale_game="pong"),
        "latency-low": EnvCase("latency-low", partial(latency, std=0.0005), 128, mean_step_s=0.002),
        "latency-high": EnvCase("latency-high", partial(latency, std=0.01), 128, mean_step_s=0.002),
    }


@dataclass(frozen=True)
class Sizes:
    num_envs: int
    num_workers: int
    sync_interval: int
    batches: int
    device: str
    inference_batch_size: int | None

    @property
    def envs_per_worker(self) -> int:
        return self.num_envs // self.num_workers

    @property
    def frames_per_batch(self) -> int:
        return self.num_envs * self.sync_interval

    @property
    def main_threads(self) -> int:
        # What TorchRL itself picks for the main process (one core per worker left free).
        return max(1, (os.cpu_count() or 1) - self.num_workers)


@dataclass(frozen=True)
class Measurement:
    collector: str
    fps: float
    startup_s: float
    frames: int


# --- collectors ------------------------------------------------------------------------------


def worker_env_fn(case: EnvCase, sizes: Sizes) -> Callable[[], EnvBase]:
    """One worker's share of the replicas: envs_per_worker envs stepped in turn, in one process."""
    return partial(SerialEnv, sizes.envs_per_worker, case.make_env)


def torchrl_kwargs(sizes: Sizes) -> dict[str, str | bool]:
    """Arguments common to the TorchRL collectors."""
    return {
        # Envs and the yielded batch stay on CPU, as with HTSCollector; only inference moves.
        "policy_device": sizes.device,
        "env_device": "cpu",
        "storing_device": "cpu",
        # The actor is feed-forward, yet torchrl 0.14 warns that 0.15 will append an InitTracker
        # to the env for any module policy; keep the env exactly the one HTSCollector steps.
        "auto_register_policy_transforms": False,
    }


def build_hts(case: EnvCase, policy: TensorDictModuleBase, sizes: Sizes) -> BaseCollector:
    return HTSCollector(
        case.make_env,
        policy,
        num_envs=sizes.num_envs,
        num_workers=sizes.num_workers,
        frames_per_batch=sizes.frames_per_batch,
        total_frames=ENDLESS,
        seed=SEED,
        device=sizes.device,
        inference_batch_size=sizes.inference_batch_size,
    )


def build_parallel_env_collector(
    case: EnvCase, policy: TensorDictModuleBase, sizes: Sizes
) -> BaseCollector:
    # ParallelEnv(N, fn) starts one process per env, and has no "k envs per process" option, so
    # to hold the process count at W each of its W workers runs a SerialEnv of num_envs/W envs.
    # The env's batch size is then [W, num_envs/W]; the collector handles it as is.
    # num_threads pins the main process's thread count (see run_collector).
    env = ParallelEnv(sizes.num_workers, worker_env_fn(case, sizes), num_threads=sizes.main_threads)
    collector = Collector(
        env,
        policy,
        frames_per_batch=sizes.frames_per_batch,
        total_frames=ENDLESS,
        **torchrl_kwargs(sizes),
    )
    # Seeded through the collector: a ParallelEnv seeded before the collector moves it to
    # env_device warns and re-seeds.
    collector.set_seed(SEED)
    return collector


def build_multi(
    collector_class: type[BaseCollector],
    case: EnvCase,
    policy: TensorDictModuleBase,
    sizes: Sizes,
) -> BaseCollector:
    # One sub-collector per worker process, each with its SerialEnv of num_envs/W replicas.
    # frames_per_batch is the size of every yielded batch for both classes: MultiSync splits it
    # over its workers, MultiAsync has each worker collect all of it.
    collector = collector_class(
        [worker_env_fn(case, sizes)] * sizes.num_workers,
        policy,
        frames_per_batch=sizes.frames_per_batch,
        total_frames=ENDLESS,
        num_threads=sizes.main_threads,
        **torchrl_kwargs(sizes),
    )
    collector.set_seed(SEED)
    return collector


BUILDERS: dict[str, Callable[[EnvCase, TensorDictModuleBase, Sizes], BaseCollector]] = {
    HTS: build_hts,
    "Collector(ParallelEnv)": build_parallel_env_collector,
    "MultiSyncCollector": partial(build_multi, MultiSyncCollector),
    "MultiAsyncCollector": partial(build_multi, MultiAsyncCollector),
}


def warmup_batches(name: str, sizes: Sizes) -> int:
    """Batches to discard before timing: start-up, first resets, a full pipeline."""
    if name == "MultiAsyncCollector":
        # Its W workers start together and collect whole batches each, so their first batches
        # arrive together: timing from the first one would count the others' head start.
        return sizes.num_workers
    # The others collect nothing ahead of the consumer before the first yield (HTSCollector
    # starts the next batch at the yield, when the clock starts), so one batch is enough.
    return 1


def run_collector(
    name: str, case: EnvCase, policy: TensorDictModuleBase, sizes: Sizes
) -> Measurement:
    """Steady-state frames/s of one collector: batches after the warm-up, consumer doing nothing."""
    # TorchRL's ParallelEnv and multi-process collectors lower the main process's thread count
    # when they start and raise it again on shutdown, so the order of runs would change the
    # inference speed of the next collector. Pin it to the same value for everyone.
    torch.set_num_threads(sizes.main_threads)
    start = time.perf_counter()
    collector = BUILDERS[name](case, copy.deepcopy(policy), sizes)
    try:
        batches = iter(collector)
        for _ in range(warmup_batches(name, sizes)):
            next(batches)
        steady = time.perf_counter()
        frames = sum(next(batches).numel() for _ in range(sizes.batches))
        elapsed = time.perf_counter() - steady
    finally:
        collector.shutdown()
    return Measurement(name, frames / elapsed, steady - start, frames)


# --- env alone -------------------------------------------------------------------------------


def _step_randomly(
    make_env: Callable[[], EnvBase],
    seed: int,
    warmup_steps: int,
    steps: int,
    barrier: multiprocessing.synchronize.Barrier,
    results: multiprocessing.queues.Queue,
) -> None:
    # The collectors' inner loop without a policy and without storage. One thread, as TorchRL
    # gives its env workers (num_sub_threads=1).
    torch.set_num_threads(1)
    env = make_env()
    env.set_seed(seed)
    td = env.reset()
    for _ in range(warmup_steps):
        _, td = env.step_and_maybe_reset(env.rand_action(td))
    barrier.wait()
    start = time.monotonic()  # CLOCK_MONOTONIC: comparable across processes
    for _ in range(steps):
        _, td = env.step_and_maybe_reset(env.rand_action(td))
    results.put((start, time.monotonic(), steps * env.batch_size.numel()))
    env.close()


def run_env_alone(case: EnvCase, sizes: Sizes) -> Measurement:
    """W processes, each stepping its num_envs/W replicas with random actions, never syncing."""
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(sizes.num_workers), context.Queue()
    start = time.monotonic()
    processes = [
        context.Process(
            target=_step_randomly,
            args=(
                worker_env_fn(case, sizes),
                SEED + rank,
                sizes.sync_interval,
                sizes.batches * sizes.sync_interval,
                barrier,
                results,
            ),
        )
        for rank in range(sizes.num_workers)
    ]
    for process in processes:
        process.start()
    try:
        reports = [_next_report(results, processes) for _ in processes]
    finally:
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    # The sum of the workers' own rates: what they sustain when nobody ever waits for anybody
    # (timing to the last one's end would charge the limit with the slowest worker's luck).
    fps = sum(frames / (end - begin) for begin, end, frames in reports)
    frames = sum(r[2] for r in reports)
    return Measurement(ENV_ALONE, fps, min(r[0] for r in reports) - start, frames)


def _next_report(
    results: multiprocessing.queues.Queue, processes: list[multiprocessing.Process]
) -> tuple[float, float, int]:
    # A worker that dies (bad env, out of memory) would otherwise leave us waiting forever.
    while True:
        try:
            return results.get(timeout=1.0)
        except queue.Empty:
            failed = [p.exitcode for p in processes if p.exitcode not in (None, 0)]
            if failed:
                raise RuntimeError(f"an env-alone worker exited with code {failed[0]}") from None


def run_ale_native(game: str, sizes: Sizes) -> Measurement:
    """ale-py's C++ vector env with the same preprocessing, random actions, W threads."""
    import numpy as np
    from ale_py.vector_env import AtariVectorEnv

    start = time.perf_counter()
    # No fire-reset and no sticky actions, as in make_atari_env.
    env = AtariVectorEnv(
        game,
        sizes.num_envs,
        num_threads=sizes.num_workers,
        use_fire_reset=False,
        repeat_action_probability=0.0,
    )
    rng = np.random.default_rng(SEED)
    num_actions = int(env.single_action_space.n)
    try:
        env.reset(seed=SEED)
        for _ in range(sizes.sync_interval):
            env.step(rng.integers(0, num_actions, sizes.num_envs))
        steady = time.perf_counter()
        steps = sizes.batches * sizes.sync_interval
        for _ in range(steps):
            env.step(rng.integers(0, num_actions, sizes.num_envs))
        elapsed = time.perf_counter() - steady
    finally:
        env.close()
    frames = steps * sizes.num_envs
    return Measurement(ALE_NATIVE, frames / elapsed, steady - start, frames)


# --- driver ----------------------------------------------------------------------------------


def make_policy(case: EnvCase) -> TensorDictModuleBase:
    torch.manual_seed(SEED)  # the same weights in every run
    env = case.make_env()
    try:
        model = make_actor_critic(env.observation_spec, env.action_spec)
    finally:
        env.close()
    return model.get_policy_operator()


def bench_env(case: EnvCase, sizes: Sizes, repeats: int) -> list[Measurement]:
    """Every contender on one env; with repeats, the median of rounds run in turn."""
    policy = make_policy(case)
    runs: dict[str, Callable[[], Measurement]] = {ENV_ALONE: partial(run_env_alone, case, sizes)}
    if case.ale_game is not None:
        runs[ALE_NATIVE] = partial(run_ale_native, case.ale_game, sizes)
    for name in COLLECTOR_NAMES:
        runs[name] = partial(run_collector, name, case, policy, sizes)
    samples: dict[str, list[Measurement]] = {name: [] for name in runs}
    for round_ in range(repeats):
        for name, run in runs.items():
            print(f"[{case.name}] round {round_ + 1}/{repeats} {name} ...", flush=True)
            result = run()
            samples[name].append(result)
            print(
                f"[{case.name}]   {result.fps:8.0f} frames/s ({result.frames} frames timed, "
                f"{result.startup_s:.1f} s start-up and warm-up)",
                flush=True,
            )
    return [median_measurement(name, found) for name, found in samples.items()]


def median_measurement(name: str, found: list[Measurement]) -> Measurement:
    fps = statistics.median(m.fps for m in found)
    return Measurement(name, fps, statistics.median(m.startup_s for m in found), found[0].frames)


def markdown_table(results: dict[str, list[Measurement]], sizes_by_env: dict[str, Sizes]) -> str:
    lines = [
        "| env | contender | frames/batch | frames/s | HTS / this | this / env alone |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for env_name, measurements in results.items():
        by_name = {m.collector: m for m in measurements}
        hts, limit = by_name[HTS].fps, by_name[ENV_ALONE].fps
        for m in measurements:
            lines.append(
                f"| {env_name} | {m.collector} | {sizes_by_env[env_name].frames_per_batch} "
                f"| {m.fps:.0f} | {hts / m.fps:.2f} | {m.fps / limit:.2f} |"
            )
    return "\n".join(lines)


def ratio_lines(results: dict[str, list[Measurement]], sizes_by_env: dict[str, Sizes]) -> str:
    cases = env_cases()
    lines = []
    for env_name, measurements in results.items():
        by_name = {m.collector: m.fps for m in measurements}
        parts = [f"{by_name[HTS] / by_name[name]:.2f}x vs {name}" for name in COLLECTOR_NAMES[1:]]
        line = f"- {env_name}: HTSCollector is " + ", ".join(parts)
        mean_step_s = cases[env_name].mean_step_s
        if mean_step_s:
            # A worker steps its replicas one after the other, so it cannot beat 1 / mean; the
            # measured env-alone rate scatters around this (heavy-tailed step times).
            ceiling = sizes_by_env[env_name].num_workers / mean_step_s
            line += f"; sleep-bound ceiling W / mean step time = {ceiling:.0f} frames/s"
        lines.append(line)
    return "\n".join(lines)


def machine_info(sizes: Sizes) -> str:
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    gpu = (
        f"{torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}"
        if torch.cuda.is_available()
        else "none"
    )
    return "\n".join(
        [
            f"- host: {platform.node()} ({platform.platform()})",
            f"- CPU: {cpu_model()}, {os.cpu_count()} logical cores ({affinity} usable)",
            f"- GPU: {gpu}; inference device: {sizes.device}",
            f"- python {platform.python_version()}, torch {torch.__version__}, "
            f"torchrl {torchrl.__version__}, tensordict {tensordict.__version__}",
            f"- load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}",
        ]
    )


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def report(
    results: dict[str, list[Measurement]], sizes_by_env: dict[str, Sizes], repeats: int
) -> str:
    sizes = next(iter(sizes_by_env.values()))
    command = shlex.join([Path(sys.executable).name, *sys.argv])
    settings = (
        f"num_envs={sizes.num_envs}, num_workers={sizes.num_workers}, "
        + ", ".join(f"sync_interval[{k}]={s.sync_interval}" for k, s in sizes_by_env.items())
        + f", measured batches={sizes.batches} (after warm-up: 1 batch, W for MultiAsync), "
        f"repeats={repeats}, HTS inference_batch_size={sizes.inference_batch_size or 'default'}"
    )
    stamp = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    return "\n\n".join(
        [
            f"## Collector throughput, {stamp}",
            machine_info(sizes),
            f"Command: `{command}`\n\nSettings: {settings}.",
            markdown_table(results, sizes_by_env),
            ratio_lines(results, sizes_by_env),
        ]
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--envs", nargs="+", choices=list(env_cases()), default=list(env_cases()), metavar="ENV"
    )
    parser.add_argument("--num-envs", type=int, help="replicas (default 16; 32 with --full)")
    parser.add_argument("--num-workers", type=int, help="processes (default 2; 8 with --full)")
    parser.add_argument("--sync-interval", type=int, help="steps per replica per batch")
    parser.add_argument(
        "--batches",
        type=int,
        help="measured batches, rounded up to a multiple of W (default 4; 12 with --full)",
    )
    parser.add_argument("--repeats", type=int, default=1, help="rounds; the median is reported")
    parser.add_argument("--inference-batch-size", type=int, help="HTSCollector's; its default")
    parser.add_argument("--full", action="store_true", help="bigger sizes, for a real machine")
    parser.add_argument("--output", type=Path, help="append a dated section to this file")
    return parser.parse_args(argv)


def resolve_sizes(args: argparse.Namespace, case: EnvCase) -> Sizes:
    cores = os.cpu_count() or 1
    num_workers = args.num_workers or (min(8, cores) if args.full else 2)
    num_envs = args.num_envs or (max(32, 4 * num_workers) if args.full else 16)
    if num_envs % num_workers:
        raise SystemExit(f"--num-envs ({num_envs}) must be a multiple of --num-workers.")
    batches = args.batches or (12 if args.full else 4)
    # A multiple of W, so that MultiAsyncCollector's timed window holds whole rounds of its
    # workers' batches.
    batches = math.ceil(batches / num_workers) * num_workers
    return Sizes(
        num_envs=num_envs,
        num_workers=num_workers,
        sync_interval=args.sync_interval or case.sync_interval,
        batches=batches,
        device="cuda" if torch.cuda.is_available() else "cpu",
        inference_batch_size=args.inference_batch_size,
    )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    cases = env_cases()
    sizes_by_env = {name: resolve_sizes(args, cases[name]) for name in args.envs}
    results = {}
    started = time.perf_counter()
    for name, sizes in sizes_by_env.items():
        print(f"== {name}: {sizes}", flush=True)
        results[name] = bench_env(cases[name], sizes, args.repeats)
    text = report(results, sizes_by_env, args.repeats)
    print(f"\n{text}\n\n(total {time.perf_counter() - started:.0f} s)")
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        with args.output.open("a") as out:
            out.write(text + "\n\n")
        print(f"appended to {args.output}")


if __name__ == "__main__":  # workers are spawned or forkserver'd: they re-import this module
    main()
