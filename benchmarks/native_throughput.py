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

    .venv/bin/python benchmarks/native_throughput.py --repeats 5 --output benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import _collection as collection
import _report as report
import gymnasium
import numpy as np
import torch
from tensordict.nn import TensorDictSequential
from torchrl.collectors import Collector
from torchrl.data import Bounded, OneHot
from torchrl.modules import ProbabilisticActor

from hts_lightning import HTSCollector
from hts_lightning.envs import env_factory
from hts_lightning.models import make_actor_critic

GAMES = {"pong": "ALE/Pong-v5", "cartpole": "CartPole-v1"}
SYNC_INTERVAL = {"pong": 128, "cartpole": 128}
SEED = 0


@dataclass(frozen=True)
class Setting:
    env: str
    num_envs: int
    threads: int
    sync_interval: int
    batches: int
    min_seconds: float = 0.0  # 0: exactly `batches` batches timed

    @property
    def frames_per_batch(self) -> int:
        return self.num_envs * self.sync_interval

    @property
    def chunk(self) -> int:
        return max(1, self.num_envs // 2)


def make_model(env_id: str):
    torch.manual_seed(SEED)
    probe = env_factory(env_id)()
    return make_actor_critic(probe.observation_spec, probe.action_spec)


# --- envpool alone and the hand loop ----------------------------------------------------------


def _pool(setting: Setting):
    make = env_factory(GAMES[setting.env], backend="envpool")
    import envpool

    return envpool.make(
        make.task_id,
        env_type="gymnasium",
        num_envs=setting.num_envs,
        batch_size=setting.chunk,
        num_threads=setting.threads,
        seed=SEED,
        **dict(make.options),
    )


def _loop(setting: Setting, act: Callable[[np.ndarray], np.ndarray]) -> float:
    pool = _pool(setting)
    pool.async_reset()
    per_batch = setting.frames_per_batch // setting.chunk  # recvs of one batch's frames

    def batch() -> int:
        for _ in range(per_batch):
            observation, _, _, _, info = pool.recv()
            pool.send(act(observation), info["env_id"])
        return per_batch * setting.chunk

    return _steady(batch, setting)


def _steady(batch: Callable[[], int], setting: Setting) -> float:
    """Frames/s of ``batch()`` calls (each returns its frames) after one of warm-up, timed
    until both ``setting.batches`` calls and ``setting.min_seconds`` have passed."""
    batch()
    start, frames, count = time.perf_counter(), 0, 0
    while count < setting.batches or time.perf_counter() - start < setting.min_seconds:
        frames += batch()
        count += 1
    return frames / (time.perf_counter() - start)


def envpool_alone(setting: Setting, model) -> float:
    rng = np.random.default_rng(SEED)
    actions = env_factory(GAMES[setting.env])().action_spec.shape[-1]
    return _loop(setting, lambda obs: rng.integers(0, actions, len(obs), dtype=np.int32))


def hand_loop(setting: Setting, model) -> float:
    actor = model.get_policy_operator()
    trunk, head = actor.module[0].module, actor.module[1].module

    @torch.no_grad()
    def act(observation: np.ndarray) -> np.ndarray:
        logits = head(trunk(torch.from_numpy(observation)))
        return torch.distributions.Categorical(logits=logits).sample().numpy().astype(np.int32)

    return _loop(setting, act)


# --- collectors -------------------------------------------------------------------------------


def _timed(collector, setting: Setting) -> float:
    try:
        batches = iter(collector)
        return _steady(lambda: next(batches).numel(), setting)
    finally:
        collector.shutdown()


def hts(
    backend: str, setting: Setting, model, chunk: int | None = None, inference: str = "auto"
) -> float:
    make = env_factory(GAMES[setting.env], backend=backend)
    collector = HTSCollector(
        make,
        copy.deepcopy(model.get_policy_operator()),
        num_envs=setting.num_envs,
        num_workers=setting.threads,
        sync_interval=setting.sync_interval,
        total_frames=-1,
        seed=SEED,
        inference_batch_size=chunk,
        inference=inference,
    )
    return _timed(collector, setting)


def multi_sync(setting: Setting, model) -> float:
    sizes = collection.Sizes(
        setting.num_envs, setting.threads, setting.sync_interval, setting.batches, "cpu", None
    )
    case = collection.EnvCase(setting.env, env_factory(GAMES[setting.env]), setting.sync_interval)
    policy = copy.deepcopy(model.get_policy_operator())
    return _timed(collection.build("MultiSyncCollector", case, policy, sizes), setting)


def _register_gymnasium_spaces() -> None:
    """Make torchrl 0.14's envpool wrapper read envpool 1.2.5's gymnasium spaces."""
    from torchrl.envs.libs.gym import register_gym_spec_conversion

    @register_gym_spec_conversion(gymnasium.spaces.Discrete)
    def _discrete(spec, dtype=None, device=None, categorical_action_encoding=False, **kwargs):
        from torchrl.data import Categorical

        batch = tuple(kwargs.get("batch_size") or ())
        if categorical_action_encoding:
            return Categorical(int(spec.n), shape=batch, device=device, dtype=torch.int64)
        return OneHot(int(spec.n), shape=(*batch, int(spec.n)), device=device, dtype=torch.int64)

    @register_gym_spec_conversion(gymnasium.spaces.Box)
    def _box(spec, dtype=None, device=None, **kwargs):
        batch = tuple(kwargs.get("batch_size") or ())
        low, high = torch.as_tensor(spec.low), torch.as_tensor(spec.high)
        return Bounded(
            low=low.expand(*batch, *low.shape),
            high=high.expand(*batch, *high.shape),
            shape=(*batch, *spec.shape),
            device=device,
            dtype=low.dtype,
        )


def multi_threaded_env(setting: Setting, model) -> float:
    from torchrl.envs import MultiThreadedEnv

    _register_gymnasium_spaces()
    env = MultiThreadedEnv(
        setting.num_envs,
        GAMES[setting.env],
        create_env_kwargs={"num_threads": setting.threads, "seed": SEED},
    )
    model = copy.deepcopy(model)
    actor = model.get_policy_operator()
    network = TensorDictSequential(actor.module[0], actor.module[1])
    policy = ProbabilisticActor(
        network,
        in_keys=["logits"],
        distribution_class=torch.distributions.Categorical,
        return_log_prob=True,
    )
    collector = Collector(
        env,
        policy,
        frames_per_batch=setting.frames_per_batch,
        total_frames=-1,
        # As make_collector sets TorchRL's collectors up: envs, policy and batches on the CPU.
        policy_device="cpu",
        env_device="cpu",
        storing_device="cpu",
        auto_register_policy_transforms=False,
    )
    return _timed(collector, setting)


CONTENDERS: dict[str, Callable[[Setting, object], float]] = {
    "envpool alone (W threads, random actions)": envpool_alone,
    "hand loop (envpool async + batched inference)": hand_loop,
    "HTS envpool (native backend)": lambda s, m: hts("envpool", s, m),
    "HTS envpool, inference on all envs at once": lambda s, m: hts("envpool", s, m, s.num_envs),
    "HTS envpool, inference in this process": lambda s, m: hts("envpool", s, m, None, "main"),
    "HTS python (W worker processes)": lambda s, m: hts("python", s, m),
    "MultiSyncCollector (Python env stack)": multi_sync,
    "Collector(MultiThreadedEnv) (TorchRL's envpool)": multi_threaded_env,
}
HTS_NATIVE, HAND = "HTS envpool (native backend)", "hand loop (envpool async + batched inference)"


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
