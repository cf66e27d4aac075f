"""At which parameters each gradient mode takes its gradient, proven on real training steps."""

from __future__ import annotations

import pytest
import torch
from lightning import Callback
from tensordict import TensorDict

from hts_lightning import A2C, PPO
from tests.conftest import quiet_trainer


class _Recorder(Callback):
    """Per batch: the batch, the parameters before the step, and the first applied gradient."""

    def __init__(self):
        self.batches, self.params, self.grads, self.versions = [], [], [], []

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        self.batches.append(batch.clone())
        self.params.append(TensorDict.from_module(module.loss_module).data.clone())
        self.versions.append(int(batch["policy_version"].max()))
        self._first = True

    def on_before_optimizer_step(self, trainer, module, optimizer):
        if self._first:
            self.grads.append({n: p.grad.clone() for n, p in module.loss_module.named_parameters()})
            self._first = False


def _train(module, batches=4):
    recorder = _Recorder()
    quiet_trainer(recorder).fit(module)
    assert len(recorder.grads) == batches
    return recorder


def _gradient_at(module, params, batch):
    """The loss gradient of ``batch`` at ``params``, on a fresh copy of the module."""
    reference = type(module)(**module.hparams)
    TensorDict.from_module(reference.loss_module).data.update_(params)
    batch = batch.reshape(-1, batch.shape[-1]).clone()
    with torch.no_grad():
        reference.loss_module.value_estimator(batch)
    if module.hparams.normalize_advantage:
        advantage = batch["advantage"]
        batch["advantage"] = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
    losses = reference.loss_module(batch.reshape(-1))
    total = sum(v for k, v in losses.items() if k.startswith("loss_"))
    total.backward()
    return {n: p.grad.clone() for n, p in reference.loss_module.named_parameters()}


def _assert_same(a, b):
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-5, atol=1e-6, msg=name)


def _differs(a, b):
    return any(not torch.allclose(a[n], b[n], rtol=1e-4, atol=1e-6) for n in a)


common = dict(
    env_id="CartPole-v1",
    num_envs=2,
    num_workers=0,
    sync_interval=16,
    total_frames=2 * 16 * 4,
    max_grad_norm=None,
    lr=0.05,
)


def test_a2c_delayed_gradient_is_taken_at_the_behaviour_parameters():
    module = A2C(**common)
    assert module.gradient_mode == "delayed"
    rec = _train(module)
    assert rec.versions == [0, 0, 1, 2]
    for k in (2, 3):
        behaviour = rec.params[rec.versions[k]]  # params at the start of step v = theta_v
        expected = _gradient_at(module, behaviour, rec.batches[k])
        _assert_same(rec.grads[k], expected)
        # ... and not at the current parameters theta_k, which really differ.
        assert _differs(rec.grads[k], _gradient_at(module, rec.params[k], rec.batches[k]))
    # The step was applied to the current parameters: theta_{k+1} = theta_k - Adam(grad).
    before, after = rec.params[2], rec.params[3]
    assert any(not torch.equal(before[k], after[k]) for k in before.keys(True, True))


def test_ppo_current_mode_takes_the_gradient_at_the_current_parameters():
    module = PPO(**common, epochs=1, minibatches=1)
    assert module.gradient_mode == "current"
    rec = _train(module)
    for k in (2, 3):
        expected = _gradient_at(module, rec.params[k], rec.batches[k])
        _assert_same(rec.grads[k], expected)
        behaviour = rec.params[rec.versions[k]]
        assert _differs(rec.grads[k], _gradient_at(module, behaviour, rec.batches[k]))


@pytest.mark.parametrize("cls", [A2C, PPO])
def test_other_mode_is_available_and_named(cls):
    other = "current" if cls is A2C else "delayed"
    extra = {} if cls is A2C else dict(epochs=1, minibatches=1)
    module = cls(**common, gradient_mode=other, **extra)
    rec = _train(module)
    k = 3
    at = rec.params[k] if other == "current" else rec.params[rec.versions[k]]
    _assert_same(rec.grads[k], _gradient_at(module, at, rec.batches[k]))


def test_unknown_gradient_mode_is_refused():
    expected = r"gradient_mode must be one of \('delayed', 'current', 'decoupled'\)"
    with pytest.raises(ValueError, match=expected):
        A2C(**common, gradient_mode="stale")
