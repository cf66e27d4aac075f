"""The tensor path's categorical terms give TorchRL's OneHotCategorical's bits."""

from __future__ import annotations

import pytest
import torch
from torchrl.modules.distributions import OneHotCategorical

from hts_lightning.models.tensor_chain import one_hot_terms


@pytest.mark.parametrize("shape", [(256, 2), (64, 6), (5, 3, 19)])
@pytest.mark.parametrize("masked", [False, True])
def test_one_hot_terms_give_the_distribution_s_log_prob_entropy_and_gradient(shape, masked):
    """Forward values and the logits' gradient equal the distribution's bit for bit, with a
    masked (-inf) action too (where both give the same NaN gradients)."""
    generator = torch.Generator().manual_seed(0)
    logits = 3 * torch.randn(*shape, generator=generator)
    index = torch.randint(0, shape[-1], shape[:-1], generator=generator)
    if masked:
        logits[..., 1] = float("-inf")
        index[index == 1] = 0
    action = torch.nn.functional.one_hot(index, shape[-1]).float()
    weights = torch.randn(2, *shape[:-1], generator=generator)

    def terms(fast: bool):
        x = logits.clone().requires_grad_()
        if fast:
            log_prob, entropy = one_hot_terms(x, action)
        else:
            dist = OneHotCategorical(logits=x, validate_args=False)
            log_prob, entropy = dist.log_prob(action), dist.entropy()
        ((log_prob * weights[0]).sum() + (entropy * weights[1]).sum()).backward()
        return log_prob.detach(), entropy.detach(), x.grad

    for got, expected in zip(terms(fast=True), terms(fast=False)):
        assert torch.equal(got.isnan(), expected.isnan())
        assert torch.equal(got.nan_to_num(), expected.nan_to_num())
    if not masked:
        assert terms(fast=True)[1].gt(0).all()  # a real entropy, not zeros
