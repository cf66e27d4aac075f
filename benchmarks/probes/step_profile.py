"""Where one step of the Python step path goes: cProfile of the serial collector.

``num_workers=0`` runs the engine that each worker process runs (``inference="workers"``), in
this process, so its profile is a worker's. Prints frames/s and the top functions by their own
time, per env (CartPole with the MLP actor-critic, Pong with the Nature CNN,
``VariableLatencyEnv`` with no latency).

    python -m benchmarks step_profile [--envs latency cartpole pong] [--num-envs 1]
        [--inference-batch-size N] [--top 25]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import torch

from hts_lightning import HTSCollector
from hts_lightning.envs.factory import env_factory
from hts_lightning.models import make_actor_critic

ENVS = {
    "latency": ("VariableLatency", dict(mean=0.0, distribution="constant")),
    "cartpole": ("CartPole-v1", {}),
    "pong": ("ALE/Pong-v5", {}),
}


def profile(env: str, num_envs: int, chunk: int | None, steps: int, top: int) -> float:
    env_id, kwargs = ENVS[env]
    make = env_factory(env_id, **kwargs)
    probe = make()
    torch.manual_seed(0)
    policy = make_actor_critic(probe.observation_spec, probe.action_spec).get_policy_operator()
    probe.close()
    collector = HTSCollector(
        make,
        policy,
        num_envs=num_envs,
        num_workers=0,
        sync_interval=steps,
        total_frames=-1,
        inference_batch_size=chunk,
    )
    batches = iter(collector)
    next(batches)  # start-up and a warm batch
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    next(batches)
    profiler.disable()
    seconds = time.perf_counter() - start
    collector.shutdown()
    fps = num_envs * steps / seconds
    print(
        f"== {env}: {num_envs} envs, chunk {collector.inference_batch_size}: {fps:.0f} frames/s "
        f"under cProfile ({1e6 * seconds / (num_envs * steps):.0f} us per step)"
    )
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(top)
    print(text.getvalue())
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumtime").print_stats(top)
    print(text.getvalue())
    return fps


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--envs", nargs="+", choices=ENVS, default=list(ENVS))
    parser.add_argument("--num-envs", type=int, default=1)
    parser.add_argument("--inference-batch-size", type=int)
    parser.add_argument("--steps", type=int, default=512)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    for env in args.envs:
        profile(env, args.num_envs, args.inference_batch_size, args.steps, args.top)


if __name__ == "__main__":
    main()
