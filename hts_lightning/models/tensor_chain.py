"""A ProbabilisticActor's ``get_dist`` on tensors, for actors made of plain modules (the
collector's policy call and the PPO loss share it)."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import torch
from tensordict.nn import (
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
)
from torchrl.envs.utils import exploration_type, set_exploration_type
from torchrl.modules.distributions import OneHotCategorical

from hts_lightning._compat import has_forward_hooks, module_kwargs

__all__ = ["TensorChain", "plain"]


class TensorChain:
    """A ProbabilisticActor's ``get_dist`` on tensors, for actors made of plain modules.

    ``policy.get_dist(td)`` runs each deterministic module through TensorDict's call machinery
    (dispatch, key checks, hooks, one TensorDict write per output: ~100 us of a CartPole
    chunk's ~500) and builds the distribution. When every deterministic module is
    :func:`plain` and the last is a :class:`~tensordict.nn.ProbabilisticTensorDictModule`
    reading their outputs, this calls the same modules on the same tensors in the same order,
    under the same interaction type, and builds the same distribution from the same
    parameters: the same operations, so the same bits. Its argument checks are off unless the
    actor's ``distribution_kwargs`` turn them on (as torchrl's import makes the default): the
    collector refuses NaN parameters with one explicit check, and a non-finite logit makes the
    loss non-finite, which the update refuses before its step.

    Example:
        >>> from tensordict import TensorDict
        >>> from torchrl.data import Composite, OneHot, Unbounded
        >>> from hts_lightning.models import make_actor_critic
        >>> spec = Composite(observation=Unbounded((4,)))
        >>> policy = make_actor_critic(spec, OneHot(2)).get_policy_operator()
        >>> chain = TensorChain.of(policy)
        >>> td = TensorDict(observation=torch.randn(3, 4), batch_size=[3])
        >>> values = chain.values(td)
        >>> sorted(values), chain.one_hot_logits
        (['features', 'logits'], 'logits')
        >>> torch.equal(chain.dist(values).logits, policy.get_dist(td).logits)
        True
    """

    def __init__(self, layers: list, head: ProbabilisticTensorDictModule, default_interaction):
        self._layers = [(layer.module, layer.in_keys, layer.out_keys) for layer in layers]
        self._dist_keys = list(zip(head.dist_keys, head.in_keys, strict=True))
        self._distribution = head.distribution_class
        self._kwargs = {"validate_args": False, **head.distribution_kwargs}
        self._default_interaction = default_interaction
        #: The logits' key when the distribution is TorchRL's unchecked ``OneHotCategorical``
        #: of logits (see :meth:`one_hot`; its log_prob and entropy ignore grad_method).
        self.one_hot_logits = (
            head.in_keys[0]
            if self._distribution is OneHotCategorical
            and head.dist_keys == ["logits"]
            and set(head.distribution_kwargs) <= {"grad_method"}
            else None
        )

    @classmethod
    def of(cls, policy) -> TensorChain | None:
        """The chain of ``policy`` where its modules allow one, else ``None``."""
        if not isinstance(policy, ProbabilisticTensorDictSequential) or policy.return_composite:
            return None
        *layers, head = policy.module
        usable = (
            type(head).get_dist is ProbabilisticTensorDictModule.get_dist
            and all(map(plain, layers))
            and all(isinstance(k, str) for k in (*head.dist_keys, *head.in_keys, *head.out_keys))
            # else parameters the collector's NaN check would not see in the result
            and set(head.in_keys) <= {key for layer in layers for key in layer.out_keys}
            and _takes_validate_args(head.distribution_class)
        )
        return cls(layers, head, policy.default_interaction_type) if usable else None

    def values(self, td) -> dict:
        """The deterministic modules' outputs, in the order they are written; ``td`` is only
        read."""
        values = {}
        # get_dist_params' rule: the global interaction type, else the actor's default.
        with set_exploration_type(exploration_type() or self._default_interaction):
            for module, in_keys, out_keys in self._layers:
                inputs = [values[k] if k in values else td.get(k) for k in in_keys]
                outputs = module(*inputs)
                if len(out_keys) == 1:
                    values[out_keys[0]] = outputs
                else:  # e.g. a Gaussian head's (loc, scale)
                    values.update(zip(out_keys, outputs, strict=True))
        return values

    def dist(self, values: dict) -> torch.distributions.Distribution:
        params = {name: values[key] for name, key in self._dist_keys}
        return self._distribution(**params, **self._kwargs)

    def one_hot(
        self, values: dict, choose: Callable[[torch.Tensor], torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
        """The categorical head's terms without building the distribution, or ``None`` where
        the head is not TorchRL's ``OneHotCategorical`` of more than one logit (then use
        :meth:`dist`).

        Returns ``(log_probs, index, log_prob)``: the normalized log-probabilities
        (``log_softmax`` of the logits), the action index ``choose(log_probs)`` picks (the
        collector's Gumbel-max draw, the loss's stored action) and its log-probability. The
        distribution's own ``logits - logsumexp`` (its ``log_prob``, and the entropy on it)
        cost 0.1 ms more a CartPole PPO step, forward and backward (256 x 2 logits); the two
        agree to float rounding (``tests/models/test_tensor_chain.py``).
        """
        logits = values.get(self.one_hot_logits) if self.one_hot_logits is not None else None
        if logits is None or logits.shape[-1] < 2:  # TorchRL reads a last dimension of 1 apart
            return None
        log_probs = logits.log_softmax(-1)
        index = choose(log_probs)
        return log_probs, index, log_probs.gather(-1, index.unsqueeze(-1)).squeeze(-1)


def plain(module) -> bool:
    """A TensorDictModule whose call is ``module.module(*inputs)`` written to its out-keys (one
    tensor, or a tuple of one per key)."""
    return (
        isinstance(module, TensorDictModule)
        and type(module).forward is TensorDictModule.forward
        and module.method is None
        and not module.method_kwargs
        and module_kwargs(module) is None
        and module.inplace is True
        and list(module.out_keys_source) == list(module.out_keys)
        and all(isinstance(k, str) for k in (*module.in_keys, *module.out_keys))
        and not has_forward_hooks(module)
    )


def _takes_validate_args(distribution_class) -> bool:
    try:
        parameters = inspect.signature(distribution_class).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "validate_args" or p.kind is p.VAR_KEYWORD for p in parameters)
