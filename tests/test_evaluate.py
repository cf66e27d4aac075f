"""``hts-rl evaluate``'s parts: actions in the form of the env's spec, frames from its render."""

from __future__ import annotations

import pytest
import torch
from torchrl.data import Bounded, Categorical, OneHot

from hts_lightning.envs import env_factory
from hts_lightning.evaluate import _frame, env_action


def test_one_hot_single_and_multi_player_and_index_actions():
    assert env_action(torch.tensor(1), OneHot(3)).tolist() == [0, 1, 0]
    players = env_action(torch.tensor([2, 0, 1]), OneHot(4, shape=(3, 4), dtype=torch.bool))
    assert players.dtype == torch.bool
    assert players.int().tolist() == [[0, 0, 1, 0], [1, 0, 0, 0], [0, 1, 0, 0]]
    assert env_action(torch.tensor(3), Categorical(5)).item() == 3
    assert env_action(torch.tensor([4, 0]), Categorical(5, shape=(2,))).tolist() == [4, 0]


def test_an_action_outside_the_spec_or_a_continuous_spec_is_a_clear_error():
    with pytest.raises(ValueError, match=r"chose action 5, outside this env's 5 actions.*--env"):
        env_action(torch.tensor(5), Categorical(5))
    with pytest.raises(ValueError, match="chose action 3, outside this env's 2 actions"):
        env_action(torch.tensor(3), OneHot(2))
    with pytest.raises(ValueError, match="action spec is a Bounded"):
        env_action(torch.tensor(0), Bounded(-1.0, 1.0, shape=(2,)))


def test_frames_come_from_the_env_render_and_other_envs_say_they_have_none():
    env = env_factory("ALE/Pong-v5")()
    env.reset()
    frame = _frame(env)
    assert frame.shape == (210, 160, 3) and frame.dtype.name == "uint8"
    assert (frame == env.unwrapped.ale.getScreenRGB()).all()  # the emulator's own screen
    env.close()
    with pytest.raises(ValueError, match="a video needs a gymnasium env; TransformedEnv"):
        _frame(env_factory("Counting")())
