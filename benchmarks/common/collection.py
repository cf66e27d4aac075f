"""Collection throughput measurements (frames/s, no learning), for ``collector_throughput``,
``fig_limit`` and ``native_throughput``.

Every collector is built by :func:`hts_lightning.collectors.make_collector` from the
same env factory, policy (``make_actor_critic``'s actor), replicas, worker processes and batch
size; :func:`run_collector` times it in steady state (after a warm-up batch; W for
MultiAsyncCollector) with a consumer that does nothing. The limit: :func:`run_env_alone` (the
env with random actions in W processes) and :func:`run_ale_native` (ale-py's C++ vector env).
"""

from __future__ import annotations

import copy
import multiprocessing
import multiprocessing.queues
import multiprocessing.synchronize
import queue
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
from tensordict.nn import TensorDictModuleBase
from torchrl.envs import EnvBase, SerialEnv

from benchmarks.common.runner import fresh_threads
from hts_lightning import VariableLatencyEnv, make_atari_env
from hts_lightning.collectors import make_collector
from hts_lightning.models import make_actor_critic

ENV_ALONE = "env alone (W procs, random actions)"
ALE_NATIVE = "env alone (ale-py AtariVectorEnv, W threads)"
HTS = "HTSCollector"
#: contender name -> collector kind of ``make_collector``
KINDS = {
    HTS: "hts",
    "Collector(ParallelEnv)": "sync",
    "MultiSyncCollector": "multi_sync",
    "MultiAsyncCollector": "multi_async",
}
COLLECTOR_NAMES = tuple(KINDS)
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


@dataclass(frozen=True)
class Measurement:
    collector: str
    fps: float
    startup_s: float
    frames: int


def worker_env_fn(case: EnvCase, sizes: Sizes) -> Callable[[], EnvBase]:
    """One worker's share of the replicas: envs_per_worker envs stepped in turn, in one process."""
    return partial(SerialEnv, sizes.envs_per_worker, case.make_env)


def build(name: str, case: EnvCase, policy: TensorDictModuleBase, sizes: Sizes):
    """Contender ``name``, endless, seeded, through ``make_collector``."""
    return make_collector(
        KINDS[name],
        case.make_env,
        policy,
        num_envs=sizes.num_envs,
        num_workers=sizes.num_workers,
        sync_interval=sizes.sync_interval,
        total_frames=ENDLESS,
        seed=SEED,
        device=sizes.device,
        inference_batch_size=sizes.inference_batch_size,
    )


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
    fresh_threads()  # each collector sets the threads by its own rule, as for a user
    start = time.perf_counter()
    collector = build(name, case, copy.deepcopy(policy), sizes)
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
