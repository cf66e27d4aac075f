"""Small policies for collector tests, and batches collected while the weights change."""

from __future__ import annotations

import torch
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.modules import MLP, ProbabilisticActor
from torchrl.modules.distributions import OneHotCategorical

from hts_lightning import HTSCollector


def sampling_policy(
    in_features: int = 1, num_actions: int = 2, seed: int = 0, num_cells: tuple = (16,)
):
    """An MLP actor that samples one-hot actions and reports their log-probabilities."""
    torch.manual_seed(seed)
    net = MLP(in_features=in_features, out_features=num_actions, num_cells=list(num_cells))
    module = TensorDictModule(net, in_keys=["observation"], out_keys=["logits"])
    return ProbabilisticActor(
        module,
        in_keys=["logits"],
        distribution_class=OneHotCategorical,
        return_log_prob=True,
    )


class _ChooseByBias(nn.Module):
    """Picks the argmax of a learnable bias: the action is a readable function of the weights."""

    def __init__(self, num_actions: int):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(num_actions))

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        index = self.bias.argmax().expand(observation.shape[:-1])
        return nn.functional.one_hot(index, self.bias.numel())


def weight_readable_policy(num_actions: int = 4):
    """A deterministic policy whose action index is ``bias.argmax()``."""
    return TensorDictModule(
        _ChooseByBias(num_actions), in_keys=["observation"], out_keys=["action"]
    )


def set_choice(policy, choice: int) -> None:
    """Make ``weight_readable_policy`` choose action ``choice``."""
    with torch.no_grad():
        bias = policy.module.bias
        bias.zero_()
        bias[choice] = 1.0


def perturb(policy, generator: torch.Generator, scale: float = 1.0) -> None:
    """An 'update' that changes the policy's actions, reproducible from ``generator``."""
    with torch.no_grad():
        for parameter in policy.parameters():
            parameter.add_(scale * torch.randn(parameter.shape, generator=generator))


def collect(
    create_env_fn,
    policy,
    *,
    num_workers,
    num_envs,
    sync_interval,
    batches,
    seed=0,
    perturb_scale=1.0,
    **kwargs,
):
    """The stacked batches of an HTSCollector whose policy is perturbed (seeded, by
    ``perturb_scale``) after each."""
    generator = torch.Generator().manual_seed(123)
    out = []
    with HTSCollector(
        create_env_fn,
        policy,
        num_envs=num_envs,
        num_workers=num_workers,
        frames_per_batch=num_envs * sync_interval,
        total_frames=num_envs * sync_interval * batches,
        seed=seed,
        **kwargs,
    ) as collector:
        for batch in collector:
            out.append(batch)
            perturb(policy, generator, perturb_scale)  # an update that changes the actions
            collector.update_policy_weights_()
    return torch.stack(out)


def assert_bitwise_equal(a, b):
    assert a.batch_size == b.batch_size
    for key in a.keys(include_nested=True, leaves_only=True):
        assert torch.equal(a[key], b[key]), f"{key} differs"
