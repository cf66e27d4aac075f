"""Backward and optimizer step without Lightning's per-call hook dispatch, where it is a no-op."""

from __future__ import annotations

import torch
from lightning import Callback, LightningModule, Trainer
from lightning.pytorch.core.optimizer import LightningOptimizer
from lightning.pytorch.plugins.precision import Precision
from lightning.pytorch.strategies import DDPStrategy, Strategy

from hts_lightning._compat import optimizer_step_callbacks, strategy_model_averager

__all__ = ["LightningSteps"]

#: The hooks ``manual_backward`` and ``LightningOptimizer.step`` call around every step.
_STEP_HOOKS = ("on_before_backward", "on_after_backward", "on_before_optimizer_step")
#: Precision methods on the step path; Lightning's plain ones (32- and 64-bit) only call hooks.
_PRECISION_STEP = ("pre_backward", "backward", "post_backward", "optimizer_step")


class LightningSteps:
    """``manual_backward`` and ``optimizer.step()`` as Lightning runs them, with the hook
    dispatch left out when every hook on the path is Lightning's own no-op.

    Why: on a CartPole minibatch (256 rows, 1 thread) the two wrappers cost ~0.4 ms of a
    ~2 ms optimizer step: each step dispatches the callbacks' and the module's
    ``on_before_backward``, ``on_after_backward``, ``on_before_optimizer_step`` and
    ``configure_gradient_clipping`` and builds the optimizer's closure. When no callback and
    not the module override those hooks, the precision plugin is a plain one (no gradient
    scaling) and the strategy does not change ``backward`` or the optimizer step (Lightning's
    ``Strategy`` and ``DDPStrategy`` without model averaging), the direct path does what
    Lightning would: the strategy's ``pre_backward`` (DDP's ``prepare_for_backward``),
    ``loss.backward()``, its ``post_backward``, and the optimizer's step between the two
    callables Lightning's manual-optimization loop injects into every ``LightningOptimizer``
    (they count the step in ``trainer.global_step``, which ``max_steps`` reads, and run the
    profiler). Otherwise (any hook overridden, mixed precision, another strategy) every step
    goes through ``manual_backward`` and ``LightningOptimizer.step``. Checked against
    Lightning 2.6.6.

    Example:
        >>> from hts_lightning import A2C
        >>> from lightning import Trainer
        >>> module = A2C(env_id="CartPole-v1", num_envs=4, num_workers=0, sync_interval=8,
        ...              total_frames=64)
        >>> trainer = Trainer(max_epochs=1, logger=False, enable_checkpointing=False,
        ...                   enable_progress_bar=False, enable_model_summary=False)
        >>> trainer.fit(module)
        >>> LightningSteps(trainer, module).direct, trainer.global_step
        (True, 2)
    """

    def __init__(self, trainer: Trainer, module: LightningModule):
        self.module = module
        self.strategy = trainer.strategy
        self.direct = _hooks_are_no_ops(trainer, module)

    @staticmethod
    def zero_grad(optimizer: LightningOptimizer) -> None:
        """``optimizer.zero_grad()``; where that is torch's own, its effect (every gradient set
        to ``None``) without the profiler scope it opens, ~8 us a call."""
        inner = optimizer.optimizer
        if type(inner).zero_grad is not torch.optim.Optimizer.zero_grad:
            optimizer.zero_grad()
            return
        for group in inner.param_groups:
            for parameter in group["params"]:
                parameter.grad = None

    def backward(self, loss: torch.Tensor) -> None:
        """``module.manual_backward(loss)``."""
        if not self.direct:
            self.module.manual_backward(loss)
            return
        self.strategy.pre_backward(loss)
        loss.backward()
        self.strategy.post_backward(loss.detach())

    def step(self, optimizer: LightningOptimizer) -> None:
        """``optimizer.step()``."""
        before, after = optimizer_step_callbacks(optimizer)
        if not self.direct or before is None or after is None:
            optimizer.step()
            return
        before()
        optimizer.optimizer.step()
        after()


def _overrides(obj: object, base: type, names: tuple[str, ...]) -> bool:
    return any(getattr(type(obj), name) is not getattr(base, name) for name in names)


def _hooks_are_no_ops(trainer: Trainer, module: LightningModule) -> bool:
    strategy = trainer.strategy
    plain_step = type(strategy).optimizer_step is Strategy.optimizer_step or (
        type(strategy).optimizer_step is DDPStrategy.optimizer_step
        and strategy_model_averager(strategy) is None
    )
    return (
        plain_step
        and type(strategy).backward is Strategy.backward
        and isinstance(strategy.precision_plugin, Precision)
        and not _overrides(strategy.precision_plugin, Precision, _PRECISION_STEP)
        and not any(_overrides(callback, Callback, _STEP_HOOKS) for callback in trainer.callbacks)
        and not _overrides(
            module, LightningModule, (*_STEP_HOOKS, "backward", "configure_gradient_clipping")
        )
        and not trainer.gradient_clip_val
    )
