"""What a TorchRL user brings, through every backend that can step it: each action spec kind
(index ``Categorical`` of shape ``()``, ``OneHot``, ``MultiCategorical``, ``MultiOneHot``,
``Bounded`` and ``Unbounded`` boxes) and each observation kind (a vector, uint8 pixels,
nested keys, several keys, integers).

For each row: the batches are bitwise the same inline (0 workers), with inference in 1 and 2
worker processes and with inference in the main process; every transition's reward says the
env received the action stored for it; the actions lie in the spec; ``("next", obs)`` is the
next step's observation within an episode; and the keys, shapes and dtypes are those of
TorchRL's own ``Collector`` on the same env and policy (plus ``policy_version``).
"""

from __future__ import annotations

from functools import partial

import pytest
import torch
from torchrl.collectors import Collector
from torchrl.envs import SerialEnv

from hts_lightning import HTSCollector
from hts_lightning.collectors.core.seeding import replica_seeds
from hts_lightning.envs import env_factory
from tests.collectors.spec_envs import ACTIONS, OBSERVATIONS, SpecEnv, action_value, spec_policy
from tests.conftest import require_module

NUM_ENVS, STEPS, BATCHES = 4, 8, 3
# (num_workers, inference): inline, workers' inference, the main process's inference.
BACKENDS = [(0, "auto"), (1, "workers"), (2, "workers"), (2, "main")]

ROWS = [(action, "vector") for action in ACTIONS] + [
    ("index", observation) for observation in OBSERVATIONS if observation != "vector"
]


def _collect(make, policy, *, num_workers: int, inference: str) -> torch.Tensor:
    with HTSCollector(
        make,
        policy,
        num_envs=NUM_ENVS,
        num_workers=num_workers,
        inference=inference,
        sync_interval=STEPS,
        total_frames=NUM_ENVS * STEPS * BATCHES,
        seed=7,
    ) as collector:
        return torch.stack([batch.clone() for batch in collector])


def _torchrl_batch(make, policy):
    collector = Collector(
        SerialEnv(NUM_ENVS, make),
        policy,
        frames_per_batch=NUM_ENVS * STEPS,
        total_frames=-1,
        auto_register_policy_transforms=False,
    )
    try:
        return next(iter(collector))
    finally:
        collector.shutdown()


def _assert_layout_of_torchrl(ours, theirs) -> None:
    """Our batch ``[NUM_ENVS, STEPS]`` has TorchRL's keys, shapes and dtypes."""
    our_keys = set(ours.keys(True, True))
    their_keys = set(theirs.keys(True, True))
    assert their_keys <= our_keys, their_keys - our_keys
    assert our_keys - their_keys == {"policy_version"}
    assert ours.batch_size == theirs.batch_size == torch.Size([NUM_ENVS, STEPS])
    for key in their_keys:
        assert ours.get(key).shape == theirs.get(key).shape, key
        assert ours.get(key).dtype == theirs.get(key).dtype, key


def _assert_in_spec(actions, spec) -> None:
    """Each action is in ``spec`` in the spec's dtype, and that dtype holds it exactly (the
    batch keeps the policy's dtype, as TorchRL's collectors do: int64 one-hots of a bool
    spec)."""
    as_spec = actions.to(spec.dtype)
    assert torch.equal(as_spec.to(actions.dtype), actions)
    assert all(spec.is_in(a) for a in as_spec)


def _assert_bitwise_equal(first, other, label: str) -> None:
    assert set(first.keys(True, True)) == set(other.keys(True, True)), label
    for key in first.keys(True, True):
        assert torch.equal(first.get(key), other.get(key)), (label, key)


@pytest.mark.parametrize(("action", "observation"), ROWS)
def test_every_spec_kind_through_every_python_backend(action, observation):
    make = partial(SpecEnv, action=action, observation=observation)
    env = make()
    policy = spec_policy(env)
    batches = {
        backend: _collect(make, policy, num_workers=backend[0], inference=backend[1])
        for backend in BACKENDS
    }
    first = batches[BACKENDS[0]]
    for backend, batch in batches.items():
        _assert_bitwise_equal(first, batch, f"{backend} against inline")
    _assert_layout_of_torchrl(first[0], _torchrl_batch(make, policy))

    actions = first.get("action").reshape(-1, *env.action_spec.shape)
    _assert_in_spec(actions, env.action_spec)
    rewards = first.get(("next", "reward")).reshape(-1)
    assert torch.equal(rewards, torch.cat([action_value(a) for a in actions]))
    # Not one action repeated: the policy's choices (and so the trajectories) vary.
    assert len({tuple(a.flatten().tolist()) for a in actions}) > 1
    # Within an episode, a step's next observation is the following step's observation
    # (batches are [BATCHES, NUM_ENVS, STEPS]; steps are dim 2).
    going_on = ~first.get(("next", "done"))[:, :, :-1, 0]
    assert going_on.any() and not going_on.all()
    for key in env.observation_spec.keys(True, True):
        current, following = first.get(key), first.get(("next", key))
        assert torch.equal(following[:, :, :-1][going_on], current[:, :, 1:][going_on]), key
    # Episodes end both ways, and each way is stored as it happened.
    terminated = first.get(("next", "terminated"))
    truncated = first.get(("next", "truncated"))
    assert terminated.any() and truncated.any()
    assert torch.equal(first.get(("next", "done")), terminated | truncated)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_envpool_replicas_give_torchrl_layout_and_the_same_bits_for_any_thread_count(env_id):
    require_module("envpool")
    make = env_factory(env_id, backend="envpool")
    env = make()
    policy = spec_policy(env)
    batches = [_collect(make, policy, num_workers=w, inference="auto") for w in (1, 2)]
    _assert_bitwise_equal(batches[0], batches[1], "1 against 2 threads")
    _assert_layout_of_torchrl(batches[0][0], _torchrl_batch(make, policy))
    actions = batches[0].get("action").reshape(-1, *env.action_spec.shape)
    _assert_in_spec(actions, env.action_spec)
    assert len({tuple(a.flatten().tolist()) for a in actions}) > 1
    # The pool stepped replica 0 with the actions stored for it: one replica env, seeded as
    # replica 0 and stepped with them, gives the stored transitions until its episode ends.
    replica = batches[0][:, 0].reshape(-1)  # [BATCHES * STEPS]
    env.set_seed(replica_seeds(7, range(1))[0][0])
    td = env.reset()
    compared = 0
    for step in replica:
        assert torch.equal(td["observation"], step["observation"])
        td = env.step(td.set("action", step["action"]))
        assert torch.equal(td["next", "reward"], step["next", "reward"])
        compared += 1
        if step["next", "done"]:
            break
        td = td["next"]
    assert compared >= 8
