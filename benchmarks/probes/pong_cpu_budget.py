"""Pong collection's CPU budget: what #16's ">= 2x MultiSyncCollector" asks of the machine.

In one process, per round: envpool's CPU a frame (16 envs, 2 threads, random actions, async
``recv`` of 8; the process's CPU time over the frames), the policy's CPU a frame (the Nature CNN
actor and a categorical sample on 8 real frames, 1 torch thread), and the ceiling the two set on
the machine's cores (cores / (env + policy CPU a frame): every core busy, no other cost). Beside
it, in the same round, ``MultiSyncCollector`` over the Python env stack, HTS envpool and the hand
loop (``native_throughput``'s contenders), each as a fraction of that ceiling.

    flock /tmp/hts-cpu.lock python -m benchmarks pong_cpu_budget --rounds 2
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from benchmarks.common import envpool_collection as contenders
from benchmarks.common import records

SETTING = contenders.Setting("pong", num_envs=16, threads=2, sync_interval=128, batches=8)


def envpool_cpu_ms(frames: int = 8192) -> tuple[float, np.ndarray]:
    """envpool's process CPU ms a frame with random actions, and the last observations."""
    pool = contenders.make_pool(SETTING)
    pool.async_reset()
    rng = np.random.default_rng(0)
    stepped, start = -256 * SETTING.chunk, 0.0  # warm-up first
    while stepped < frames:
        if stepped == 0:
            start = time.process_time()
        observation, *_, info = pool.recv()
        pool.send(rng.integers(0, 6, len(observation), dtype=np.int32), info["env_id"])
        stepped += len(observation)
    cpu = time.process_time() - start
    pool.close()
    return cpu / stepped * 1e3, observation


@torch.no_grad()
def policy_cpu_ms(model, observation: np.ndarray, calls: int = 400) -> float:
    """The actor's thread CPU ms a frame on ``observation`` (one chunk), 1 torch thread."""
    actor = model.get_policy_operator()
    trunk, head = actor.module[0].module, actor.module[1].module
    frames = torch.from_numpy(observation)

    def act():
        return torch.distributions.Categorical(logits=head(trunk(frames))).sample()

    for _ in range(20):
        act()
    start = time.thread_time()
    for _ in range(calls):
        act()
    return (time.thread_time() - start) / (calls * len(frames)) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    rounds = parser.parse_args().rounds
    cores = len(os.sched_getaffinity(0))
    torch.set_num_threads(1)
    model = contenders.make_model(contenders.GAMES["pong"])
    rows = []
    for round_ in range(rounds):
        env_ms, observation = envpool_cpu_ms()
        policy_ms = policy_cpu_ms(model, observation)
        ceiling = cores / ((env_ms + policy_ms) / 1e3)
        multi_sync = contenders.multi_sync(SETTING, model)
        hts = contenders.hts("envpool", SETTING, model)
        hand = contenders.hand_loop(SETTING, model)
        print(
            f"round {round_ + 1}: envpool {env_ms:.3f} + policy {policy_ms:.3f} CPU ms a frame; "
            f"ceiling on {cores} cores {ceiling:.0f} frames/s; MultiSync {multi_sync:.0f} "
            f"(2x = {2 * multi_sync / ceiling:.2f} of the ceiling), HTS envpool {hts:.0f} "
            f"({hts / ceiling:.2f}, {hts / multi_sync:.2f}x MultiSync), hand loop {hand:.0f} "
            f"({hand / ceiling:.2f}); load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        rows.append([round_ + 1, f"{env_ms:.3f}", f"{policy_ms:.3f}", f"{ceiling:.0f}",
                     f"{multi_sync:.0f}", f"{hts:.0f}", f"{hand:.0f}"])  # fmt: skip
    records.write(
        "pong_cpu_budget",
        title=f"Pong collection against its CPU ceiling on {cores} cores",
        claim="probes",
        tables=[{"columns": ["round", "envpool CPU ms a frame", "policy CPU ms a frame",
                             "ceiling frames/s", "MultiSync", "HTS envpool", "hand loop"],
                 "rows": rows}],
    )  # fmt: skip


if __name__ == "__main__":  # MultiSyncCollector's workers re-import this file
    main()
