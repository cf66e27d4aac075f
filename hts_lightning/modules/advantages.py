"""TorchRL's GAE with its critic called once per observation: observations and next observations
together, and on pixels only the next observations no following step starts from."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from torch.nn.modules.conv import _ConvNd
from torchrl.objectives.value import GAE

__all__ = ["OneCallGAE"]

#: Rows a critic call on pixels on the CPU, where the Nature CNN cost least a row in chunks of
#: 32-256 rows, ~1.6x less than in one call ("Pong's GAE"); on an accelerator, one call.
_PIXEL_CHUNK = 64
#: The keys the loss's estimator reads and writes, copied to the network-free one.
_KEYS = ("advantage", "value_target", "value", "reward", "done", "terminated")


class OneCallGAE:
    """The advantages of a loss's TorchRL :class:`~torchrl.objectives.value.GAE`, with its
    value network called once on the concatenation of the observations and the next
    observations along the batch (on pixels, once per distinct observation: below).

    TorchRL's ``GAE`` stacks the two sets and calls the critic under ``vmap``; on a CartPole
    PPO batch (8 x 32 frames) its forward took ~1.0-1.5 ms against ~0.6-0.9 ms for the same
    critic on the concatenation and the same estimator reading the values
    (``benchmarks/RESULTS.md``, "Learner speed, seventh pass"). This writes the values at the
    estimator's ``value`` and ``("next", value)`` keys and hands the batch to a ``GAE`` of the
    same ``gamma``, ``lmbda`` and keys without a value network: TorchRL's own recursion, with
    ``terminated`` (no bootstrap) and ``done`` (the trace is cut; a truncation bootstraps from
    the next observation's value) as the loss's estimator reads them. ``vmap`` folds its
    dimension into the batch, so the critic sees the same rows in the same order: the values
    and advantages are bitwise those of the loss's estimator for the MLP and the players'
    critics. One difference: TorchRL's path replaces NaN next observations by the
    observations (``compact_obs`` collectors); here a NaN reaches the loss, which refuses the
    step.

    A critic with convolutions (the Nature CNN) is called once per distinct observation, in
    chunks of 64 rows on the CPU: a next observation that is the following step's observation
    (no reset between them; compared exactly) takes that observation's value, so a 16 x 128
    Pong batch costs ~2.1k critic rows, not 4.1k: 0.2 s against TorchRL's 0.9-1.3 s (2
    threads; ``benchmarks/RESULTS.md``, "Pong's GAE"). A row's value depends only on its input
    and its chunk's shape: deterministic, within ~1e-6 of TorchRL's call (under vmap), not
    bitwise it. Any other estimator (not a ``GAE``, or one built with ``shifted``,
    chunks, ``average_gae``, ``auto_reset_env`` or without a value network) is called as it is.

    No gradient reaches the critic's parameters (TorchRL holds the network out the same way).
    Not an ``nn.Module``: it holds no state of its own (``gamma`` and ``lmbda`` are the
    loss estimator's tensors), so the LightningModule's ``state_dict`` does not change.

    Example:
        >>> from hts_lightning import PPO, make_gym_env
        >>> module = PPO(env_id="CartPole-v1", num_envs=2, num_workers=0, sync_interval=4)
        >>> env = make_gym_env("CartPole-v1")
        >>> batch = env.rollout(4, module.actor).unsqueeze(0)
        >>> estimate = OneCallGAE(module.loss_module.value_estimator)
        >>> estimate.one_call, estimate(batch)["advantage"].shape
        (True, torch.Size([1, 4, 1]))
    """

    def __init__(self, estimator):
        self.estimator = estimator
        #: Whether the critic runs here (else the estimator is called as it is).
        self.one_call = (
            type(estimator) is GAE
            and estimator.value_network is not None
            and not estimator.shifted
            and not estimator.average_gae
            and not estimator.auto_reset_env
            and getattr(estimator, "value_chunk_size", None) is None
            and getattr(estimator, "num_chunks", None) is None
        )
        if not self.one_call:
            return
        self.value_network = estimator.value_network
        #: Whether the critic has convolutions: distinct observations only, in chunks.
        self.pixels = any(isinstance(m, _ConvNd) for m in self.value_network.modules())
        self.gae = GAE(
            gamma=estimator.gamma,
            lmbda=estimator.lmbda,
            value_network=None,
            vectorized=estimator.vectorized,
        )
        self.gae.set_keys(**{k: getattr(estimator.tensor_keys, k) for k in _KEYS})

    @torch.no_grad()
    def __call__(self, batch: TensorDictBase) -> TensorDictBase:
        """Writes the advantage, the value target and both values into ``batch`` (``[*B, T]``)."""
        if not self.one_call:
            return self.estimator(batch)
        value_key = self.gae.tensor_keys.value
        values = self._distinct_values if self.pixels else self._values
        value, next_value = values(batch, value_key)
        batch.set(value_key, value)
        batch.set(("next", value_key), next_value)
        return self.gae(batch)

    def _values(self, batch: TensorDictBase, value_key) -> tuple[torch.Tensor, torch.Tensor]:
        keys = self.value_network.in_keys
        both = torch.cat([batch.select(*keys), batch.get("next").select(*keys)], 0)
        values = self.value_network(both).get(value_key)
        return values[: batch.shape[0]], values[batch.shape[0] :]

    def _distinct_values(self, batch, value_key) -> tuple[torch.Tensor, torch.Tensor]:
        keys = self.value_network.in_keys
        inputs, next_inputs = batch.select(*keys), batch.get("next").select(*keys)
        time, steps = batch.ndim - 1, batch.shape[-1]
        # The next observations the following step does not start from (resets, the last step).
        fresh = torch.ones(batch.shape, dtype=torch.bool)
        for key in keys if steps > 1 else ():
            follows = next_inputs.get(key).narrow(time, 0, steps - 1) == inputs.get(key).narrow(
                time, 1, steps - 1
            )
            fresh.narrow(time, 0, steps - 1).logical_and_(
                ~follows.reshape(*batch.shape[:-1], steps - 1, -1).all(-1)
            )
        chunk = _PIXEL_CHUNK if inputs.get(keys[0]).device.type == "cpu" else batch.numel()
        values = torch.cat(
            [
                self.value_network(rows_chunk).get(value_key)
                for rows in (inputs.reshape(-1), next_inputs[fresh])
                for rows_chunk in rows.split(chunk)
            ]
        )
        value = values[: batch.numel()].reshape(*batch.shape, *values.shape[1:])
        next_value = torch.empty_like(value)
        next_value.narrow(time, 0, steps - 1).copy_(value.narrow(time, 1, steps - 1))
        next_value[fresh] = values[batch.numel() :]
        return value, next_value
