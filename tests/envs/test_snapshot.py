"""save_env_state / load_env_state: a fresh env put in a saved state continues identically."""

from __future__ import annotations

import pickle

import pytest
import torch
from torchrl.envs import CatFrames

from hts_lightning.envs import env_factory, load_env_state, save_env_state


def _play(env, root, actions):
    """Step ``actions``; return every step's (observation, reward, done) and the next root."""
    rows, td = [], root.clone()
    for action in actions:
        td["action"] = action.clone()
        stepped, td = env.step_and_maybe_reset(td)
        nxt = stepped["next"]
        rows.append(
            torch.cat(
                [nxt[k].float().flatten() for k in ("observation", "reward", "done")]
                + [nxt[k].float().flatten() for k in ("step_count", "episode_reward")]
            )
        )
    return torch.stack(rows), td


@pytest.mark.parametrize(
    ("env_id", "kwargs", "steps"),
    [
        ("CartPole-v1", {}, 150),
        ("ALE/Pong-v5", {}, 400),
        ("ALE/Breakout-v5", {"episodic_life": True, "fire_reset": True}, 150),
        ("VariableLatency", {"mean": 0.0, "distribution": "constant", "episode_length": 30}, 80),
        ("Counting", {"max_count": 7}, 20),
    ],
)
def test_a_restored_env_continues_as_the_original(env_id, kwargs, steps):
    make = env_factory(env_id, **kwargs)
    env = make()
    env.set_seed(1)
    generator = torch.Generator().manual_seed(0)
    n = env.action_spec.shape[-1]
    actions = [
        torch.nn.functional.one_hot(torch.randint(n, (), generator=generator), n)
        for _ in range(2 * steps)
    ]
    _, root = _play(env, env.reset(), actions[:steps])
    state = pickle.loads(pickle.dumps(save_env_state(env)))  # it travels through pipes
    expected, _ = _play(env, root, actions[steps:])
    fresh = make()
    fresh.set_seed(99)  # another seed: everything must come from the state
    fresh.reset()
    load_env_state(fresh, state)
    got, _ = _play(fresh, root, actions[steps:])
    assert torch.equal(expected, got)
    assert expected[:, -3].any() or env_id == "ALE/Pong-v5"  # episodes end inside (not Pong)


def test_envs_with_state_outside_reach_say_so_with_none():
    env = env_factory("CartPole-v1")().append_transform(
        CatFrames(2, dim=-1, in_keys=["observation"])
    )
    assert save_env_state(env) is None
