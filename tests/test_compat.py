"""Each adapter of ``hts_lightning._compat`` still reaches what it reads or sets in the
installed library: an upgrade that moves a private attribute fails here, by name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from lightning import Trainer
from lightning.pytorch.core.optimizer import LightningOptimizer
from lightning.pytorch.strategies import DDPStrategy
from tensordict.nn import TensorDictModule
from torch import nn

from hts_lightning import _compat
from tests.conftest import require_module


def test_the_sigterm_flag_is_lightnings_received_sigterm():
    trainer = Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False)
    assert trainer.received_sigterm is False
    _compat.request_stop_after_batch(trainer)
    assert trainer.received_sigterm is True


def test_a_lightning_optimizer_has_its_step_callbacks():
    wrapped = LightningOptimizer(torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1))
    before, after = _compat.optimizer_step_callbacks(wrapped)
    assert callable(before) and callable(after)


def test_ddp_has_a_model_averager_slot_that_is_empty_by_default():
    strategy = DDPStrategy()
    assert hasattr(strategy, "_model_averager")
    assert _compat.strategy_model_averager(strategy) is None


def test_params_flatten_as_lightnings_loggers_flatten_them():
    flat = _compat.flatten_params({"model": {"lr": 0.1, "sizes": (64, 64)}, "seed": 3})
    assert flat == {"model/lr": 0.1, "model/sizes": (64, 64), "seed": 3}


def test_hooks_are_seen_and_cleared():
    module = nn.Linear(1, 1)
    assert not _compat.has_forward_hooks(module)
    module.register_forward_hook(lambda *args: None)
    module.register_forward_pre_hook(lambda *args: None)
    module.register_full_backward_hook(lambda *args: None)
    module.register_full_backward_pre_hook(lambda *args: None)
    assert _compat.has_forward_hooks(module)
    _compat.clear_module_hooks(module)
    assert not _compat.has_forward_hooks(module)
    calls = []
    module.register_forward_hook(lambda *args: calls.append(1))
    _compat.clear_module_hooks(module)
    module(torch.zeros(1, 1)).sum().backward()
    assert calls == []  # cleared hooks do not run


def test_the_validate_args_default_follows_its_setter():
    before = _compat.default_validate_args()
    try:
        torch.distributions.Distribution.set_default_validate_args(False)
        assert _compat.default_validate_args() is False
        torch.distributions.Distribution.set_default_validate_args(True)
        assert _compat.default_validate_args() is True
    finally:
        torch.distributions.Distribution.set_default_validate_args(before)


def test_a_tensordict_modules_kwargs_mapping():
    positional = TensorDictModule(nn.Linear(1, 1), in_keys=["x"], out_keys=["y"])
    assert _compat.module_kwargs(positional) is None
    by_name = TensorDictModule(lambda input: input, in_keys={"x": "input"}, out_keys=["y"])
    assert _compat.module_kwargs(by_name) is not None


def test_a_gym_like_env_wraps_its_gymnasium_env():
    import gymnasium
    from torchrl.envs import GymEnv

    env = GymEnv("CartPole-v1")
    assert isinstance(_compat.gym_like_env(env), gymnasium.Env)
    env.close()


def test_envpools_raw_calls_step_as_its_public_ones():
    import envpool

    def pool():
        return envpool.make("CartPole-v1", env_type="gymnasium", num_envs=2, batch_size=2,
                            seed=[1, 2])  # fmt: skip

    public, raw = pool(), pool()
    public.async_reset()
    raw.async_reset()
    first = public.recv()
    state = _compat.envpool_recv(raw)
    assert any(np.array_equal(first[0], array) for array in state)  # the observations
    action, ids = np.array([1, 0], dtype=np.int32), np.array([0, 1], dtype=np.int32)
    public.send(action, ids)
    spec_order = [ids, ids, action]  # env_id, players.env_id, action: CartPole's action spec
    assert len(raw.spec.action_array_spec) == 3
    _compat.envpool_send(raw, spec_order)
    after_public, after_raw = public.recv(), _compat.envpool_recv(raw)
    assert any(np.array_equal(after_public[0], array) for array in after_raw)


def test_footballs_scenario_config():
    require_module("gfootball")
    from gfootball import env as football

    env = football.create_environment(env_name="academy_empty_goal_close",
                                      representation="simple115v2")  # fmt: skip
    config = _compat.football_config(env)
    assert "academy_empty_goal_close" in str(config["level"])
    assert hasattr(config, "__setitem__")  # the wrapper seeds each episode through it
    env.close()


@pytest.mark.parametrize("name", _compat.__all__)
def test_every_adapter_is_tested_here(name):
    assert f"_compat.{name}(" in Path(__file__).read_text()
