"""The contenders of envpool collection (frames/s, no learning), each a function of a
:class:`Setting` and the actor: envpool alone, a hand-written loop over its async API, the
HTSCollector's native backend and over the Python env stack, and TorchRL's collectors
(``python -m benchmarks native_throughput`` times them side by side; ``pong_cpu_budget``
measures their CPU).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass

import gymnasium
import numpy as np
import torch
from tensordict.nn import TensorDictSequential
from torchrl.collectors import Collector
from torchrl.data import Bounded, OneHot
from torchrl.modules import ProbabilisticActor

from benchmarks.common import collection
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


def make_pool(setting: Setting):
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
    pool = make_pool(setting)
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
