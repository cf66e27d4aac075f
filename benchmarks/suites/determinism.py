"""Determinism at a glance: one training run, bitwise the same final parameters whatever the
number of worker processes, where the policy runs and which backend steps the envs.

PPO on CartPole (8 replicas x 16 steps, 2 epochs x 2 minibatches, 6 updates, seed 3) and A2C on
Pong (4 replicas x 8 steps, 3 updates), each trained once per set-up in a fresh module with
the learner on one torch thread; the table gives a digest of the final parameters and whether
they equal the first set-up's, bit for bit. The tests assert the same
(``tests/collectors/test_determinism.py``, ``tests/modules/test_exact_resume.py``).

    flock /tmp/hts-cpu.lock python -m benchmarks determinism
"""

from __future__ import annotations

import argparse
import hashlib

import torch

from benchmarks.common import records

#: (label, module keyword arguments) per set-up; the first is the reference.
CARTPOLE = [
    ("in-process (num_workers=0)", dict(num_workers=0)),
    ("1 worker", dict(num_workers=1)),
    ("2 workers", dict(num_workers=2)),
    ("4 workers", dict(num_workers=4)),
    ("2 workers, inference in the main process", dict(num_workers=2, inference="main")),
]
#: envpool's CartPole is its own C++ port (other initial states than gymnasium's): its runs
#: are compared with each other.
CARTPOLE_ENVPOOL = [
    ("envpool backend, 1 thread", dict(num_workers=1, env_backend="envpool")),
    ("envpool backend, 2 threads", dict(num_workers=2, env_backend="envpool")),
    ("envpool backend, 4 threads", dict(num_workers=4, env_backend="envpool")),
    ("envpool backend, 2 threads, inference in the main process",
     dict(num_workers=2, env_backend="envpool", inference="main")),
]  # fmt: skip
PONG = [
    ("1 worker", dict(num_workers=1)),
    ("2 workers", dict(num_workers=2)),
    ("4 workers", dict(num_workers=4)),
]


def digest(module: torch.nn.Module) -> str:
    hasher = hashlib.sha256()
    for name, tensor in module.state_dict().items():
        hasher.update(name.encode())
        hasher.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return hasher.hexdigest()[:16]


def train(algorithm: str, kwargs: dict) -> str:
    from lightning import Trainer

    from hts_lightning import A2C, PPO

    if algorithm == "ppo":
        module = PPO(env_id="CartPole-v1", num_envs=8, sync_interval=16, total_frames=8 * 16 * 6,
                     seed=3, epochs=2, minibatches=2, learner_threads=1, **kwargs)  # fmt: skip
    else:
        module = A2C(env_id="ALE/Pong-v5", num_envs=4, sync_interval=8, total_frames=4 * 8 * 3,
                     seed=3, learner_threads=1, **kwargs)  # fmt: skip
    Trainer(
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    ).fit(module)
    return digest(module)


def main(argv=None) -> None:
    argparse.ArgumentParser(description=__doc__.split("\n")[0]).parse_args(argv)
    rows = []
    runs = (
        ("CartPole PPO", "ppo", CARTPOLE),
        ("CartPole PPO, envpool's CartPole", "ppo", CARTPOLE_ENVPOOL),
        ("Pong A2C", "a2c", PONG),
    )
    for task, algorithm, setups in runs:
        reference = None
        for label, kwargs in setups:
            found = train(algorithm, kwargs)
            reference = reference or found
            rows.append([task, label, found, "yes" if found == reference else "NO"])
            print(rows[-1], flush=True)
    records.write(
        "determinism",
        title="The same run, bitwise, whatever the worker count, inference place and backend",
        tables=[{"columns": ["run", "set-up", "digest of the final parameters",
                             "equal to the run's first set-up"], "rows": rows}],
        text=["Each row is a fresh training run in its own module (seed 3, learner on one torch "
              "thread). Bitwise equality holds on one machine: CPU models round differently "
              "(an AMD EPYC and an Intel Xeon give other bits for the same run)."],
    )  # fmt: skip
    if any(row[-1] != "yes" for row in rows):
        raise SystemExit("a set-up differs")


if __name__ == "__main__":
    main()
