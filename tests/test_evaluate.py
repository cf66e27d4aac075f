"""``hts-rl evaluate``'s parts: actions in the form of the env's spec, frames from its render."""

from __future__ import annotations

import pytest
import torch
from torchrl.data import Bounded, Categorical, MultiCategorical, OneHot, Unbounded

from hts_lightning.envs import env_factory
from hts_lightning.evaluate import _frame, env_action


def test_one_hot_single_and_multi_player_and_index_actions():
    assert env_action(torch.tensor(1), OneHot(3)).tolist() == [0, 1, 0]
    players = env_action(torch.tensor([2, 0, 1]), OneHot(4, shape=(3, 4), dtype=torch.bool))
    assert players.dtype == torch.bool
    assert players.int().tolist() == [[0, 0, 1, 0], [1, 0, 0, 0], [0, 1, 0, 0]]
    assert env_action(torch.tensor(3), Categorical(5)).item() == 3
    assert env_action(torch.tensor([4, 0]), Categorical(5, shape=(2,))).tolist() == [4, 0]


def test_multi_discrete_and_box_actions_in_the_form_of_the_spec():
    assert env_action(torch.tensor([1, 2]), MultiCategorical(nvec=[2, 3])).tolist() == [1, 2]
    box = env_action(torch.tensor([3.0, -5.0]), Bounded(-1.0, 1.0, shape=(2,)))
    assert box.tolist() == [1.0, -1.0]  # clipped to the bounds, as in training
    assert env_action(torch.tensor([3.0, -5.0]), Unbounded(shape=(2,))).tolist() == [3.0, -5.0]


def test_an_action_outside_the_spec_or_of_another_kind_is_a_clear_error():
    with pytest.raises(ValueError, match=r"chose action 5, outside this env's actions \(5\)"):
        env_action(torch.tensor(5), Categorical(5))
    with pytest.raises(ValueError, match=r"chose action 3, outside this env's actions \(2\)"):
        env_action(torch.tensor(3), OneHot(2))
    with pytest.raises(ValueError, match=r"chose action \[1, 3\], outside.*\[2, 3\]"):
        env_action(torch.tensor([1, 3]), MultiCategorical(nvec=[2, 3]))
    with pytest.raises(ValueError, match="gives box actions and this env takes discrete ones"):
        env_action(torch.tensor([0.5]), Categorical(2))
    with pytest.raises(ValueError, match=r"action has shape \(3,\), this env's \(2,\)"):
        env_action(torch.zeros(3), Bounded(-1.0, 1.0, shape=(2,)))


def test_frames_come_from_the_env_render_and_other_envs_say_they_have_none():
    env = env_factory("ALE/Pong-v5")()
    env.reset()
    frame = _frame(env)
    assert frame.shape == (210, 160, 3) and frame.dtype.name == "uint8"
    assert (frame == env.unwrapped.ale.getScreenRGB()).all()  # the emulator's own screen
    env.close()
    with pytest.raises(ValueError, match="a video needs a gymnasium env; TransformedEnv"):
        _frame(env_factory("Counting")())
