"""The direct backward/optimizer step: the same training as Lightning's wrappers, step counts
included, and Lightning's wrappers again as soon as a hook on their path is overridden."""

from __future__ import annotations

import torch
from lightning import Callback

from hts_lightning import PPO
from tests.conftest import quiet_trainer

ARGS = dict(
    env_id="CartPole-v1",
    num_envs=4,
    num_workers=0,
    sync_interval=8,
    seed=5,
    epochs=2,
    minibatches=2,
    normalize_advantage=True,
)


class _StepHooks(Callback):
    """Counts the hooks Lightning calls around every backward and optimizer step."""

    def __init__(self):
        names = ("on_before_backward", "on_after_backward", "on_before_optimizer_step")
        self.calls = dict.fromkeys(names, 0)

    def on_before_backward(self, trainer, module, loss):
        self.calls["on_before_backward"] += 1

    def on_after_backward(self, trainer, module):
        self.calls["on_after_backward"] += 1

    def on_before_optimizer_step(self, trainer, module, optimizer):
        self.calls["on_before_optimizer_step"] += 1


def test_direct_steps_count_like_lightning_and_stop_at_max_steps():
    module = PPO(**ARGS)
    trainer = quiet_trainer(max_steps=12)  # 3 updates of 2 epochs x 2 minibatches
    trainer.fit(module)
    assert module._steps.direct
    assert (trainer.global_step, module.updates) == (12, 3)


def test_an_overridden_step_hook_runs_every_step_and_trains_the_same_parameters():
    direct = PPO(**ARGS)
    quiet_trainer(max_steps=12).fit(direct)
    hooks = _StepHooks()
    wrapped = PPO(**ARGS)
    trainer = quiet_trainer(hooks, max_steps=12)
    trainer.fit(wrapped)
    assert not wrapped._steps.direct
    assert hooks.calls == dict.fromkeys(hooks.calls, 12)
    assert trainer.global_step == 12
    assert list(wrapped.state_dict()) == list(direct.state_dict())
    for (name, a), b in zip(
        direct.state_dict().items(), wrapped.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), name


def test_zero_grad_sets_gradients_to_none_or_calls_an_own_zero_grad():
    """torch's zero_grad is replaced by its effect (every gradient None); an optimizer with
    its own zero_grad gets that called."""
    from lightning.pytorch.core.optimizer import LightningOptimizer

    from hts_lightning.modules.lightning_steps import LightningSteps

    class _Counting(torch.optim.SGD):
        calls = 0

        def zero_grad(self, set_to_none: bool = True) -> None:
            _Counting.calls += 1
            super().zero_grad(set_to_none)

    net = torch.nn.Linear(3, 2)
    for optimizer, calls in (
        (torch.optim.Adam(net.parameters()), 0),
        (_Counting(net.parameters(), lr=0.1), 1),
    ):
        net(torch.ones(1, 3)).sum().backward()
        assert all(p.grad is not None for p in net.parameters())
        LightningSteps.zero_grad(LightningOptimizer(optimizer))
        assert all(p.grad is None for p in net.parameters())
        assert _Counting.calls == calls
