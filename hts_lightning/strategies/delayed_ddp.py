"""Lightning's DDP for the HTS-RL modules, registered as ``hts_ddp``."""

from __future__ import annotations

from typing import Any

from lightning.pytorch.strategies import DDPStrategy, StrategyRegistry

__all__ = ["DelayedGradientDDPStrategy"]


class DelayedGradientDDPStrategy(DDPStrategy):
    """Many learners, one policy: DDP over torch.distributed for A2C, PPO and ACKTR.

    Every rank runs one learner and owns one collector shard: ``num_envs / world_size``
    replicas with global indices from ``rank * num_envs / world_size``, seeded by that index,
    so that the union of the shards is the set of replicas one process would hold (the
    module does the sharding, for any strategy). DDP averages each backward's gradients
    across ranks while the backward runs (bucket by bucket: the all-reduce overlaps the
    rest of the backward), and the module takes that gradient at the behaviour parameters
    theta_{k-1} and applies it to theta_k: the one-step delayed gradient. Every rank applies
    the same averaged step to the same parameters, so the ranks stay identical.

    Beyond :class:`~lightning.pytorch.strategies.DDPStrategy`: communication hooks
    (``ddp_comm_hook``, ``ddp_comm_state``, ``ddp_comm_wrapper``) are registered on CPU (gloo)
    as well, where Lightning registers them only on CUDA, and unused parameters are not
    searched for (every parameter takes part in the losses).

    A hook that started a reduction and consumed it at the next step would add a second step
    of delay (the gradient of batch k applied at update k+1): the policy lag would no longer
    be exactly one, so none is installed by default.

    Use ``--trainer.strategy hts_ddp`` in a recipe, or ``Trainer(strategy="hts_ddp")``.

    Example:
        >>> from lightning.pytorch.strategies import StrategyRegistry
        >>> StrategyRegistry["hts_ddp"]["strategy"].__name__
        'DelayedGradientDDPStrategy'
    """

    strategy_name = "hts_ddp"

    def __init__(self, *, find_unused_parameters: bool = False, **kwargs: Any) -> None:
        super().__init__(find_unused_parameters=find_unused_parameters, **kwargs)
        # DDPStrategy's arguments, kept here rather than read from its private attributes.
        self._comm = [
            kwargs.get(k) for k in ("ddp_comm_state", "ddp_comm_hook", "ddp_comm_wrapper")
        ]

    @classmethod
    def register_strategies(cls, strategy_registry: Any) -> None:
        strategy_registry.register(
            cls.strategy_name,
            cls,
            description="HTS-RL: one collector shard per rank, delayed-gradient DDP",
            override=True,
        )

    def configure_ddp(self) -> None:
        super().configure_ddp()
        state, hook, wrapper = self._comm
        # Lightning (checked against 2.6.6) registers the hook itself on CUDA only; elsewhere
        # (gloo) it is torch's public call on the wrapped model. Were Lightning to register it
        # on CPU too, torch would refuse the second registration: loudly, not silently.
        if hook is not None and self.root_device.type != "cuda":
            self.model.register_comm_hook(state, hook if wrapper is None else wrapper(hook))


DelayedGradientDDPStrategy.register_strategies(StrategyRegistry)
