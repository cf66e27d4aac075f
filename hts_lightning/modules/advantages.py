"""TorchRL's GAE with its critic called once, on observations and next observations together."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from torch.nn.modules.conv import _ConvNd
from torchrl.objectives.value import GAE

__all__ = ["OneCallGAE"]

#: The keys the loss's estimator reads and writes, copied to the network-free one.
_KEYS = ("advantage", "value_target", "value", "reward", "done", "terminated")


class OneCallGAE:
    """The advantages of a loss's TorchRL :class:`~torchrl.objectives.value.GAE`, with its
    value network called once on the concatenation of the observations and the next
    observations along the batch.

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

    A critic with convolutions (the Nature CNN) keeps TorchRL's call: its convolutions under
    vmap differ from any direct call by ~1 ulp, and one call was no faster there (a 16 x 128
    Pong batch, 2 threads: 1.2 s either way, RESULTS.md "Merged main, quiet machine"), so
    pixel runs stay bitwise those of TorchRL's GAE. Any other estimator (not a ``GAE``, or one
    built with ``shifted``, chunks, ``average_gae``, ``auto_reset_env`` or without a value
    network) is called as it is too.

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
            and not any(isinstance(m, _ConvNd) for m in estimator.value_network.modules())
        )
        if not self.one_call:
            return
        self.value_network = estimator.value_network
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
        keys = self.value_network.in_keys
        value_key = self.gae.tensor_keys.value
        both = torch.cat([batch.select(*keys), batch.get("next").select(*keys)], 0)
        values = self.value_network(both).get(value_key)
        rows = batch.shape[0]
        batch.set(value_key, values[:rows])
        batch.set(("next", value_key), values[rows:])
        return self.gae(batch)
