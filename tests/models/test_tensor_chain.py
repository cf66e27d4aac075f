"""The tensor path's categorical terms are TorchRL's OneHotCategorical's, to float rounding."""

from __future__ import annotations

import pytest
import torch
from torchrl.data import Composite, OneHot, Unbounded
from torchrl.modules.distributions import OneHotCategorical

from hts_lightning.models import make_actor_critic
from hts_lightning.models.tensor_chain import TensorChain


def _chain(actions: int) -> TensorChain:
    spec = Composite(observation=Unbounded((4,)))
    chain = TensorChain.of(make_actor_critic(spec, OneHot(actions)).get_policy_operator())
    assert chain is not None and chain.one_hot_logits == "logits"
    return chain


@pytest.mark.parametrize("shape", [(256, 2), (64, 6), (5, 3, 19)])
@pytest.mark.parametrize("masked", [False, True])
def test_one_hot_gives_the_distribution_s_log_prob_entropy_and_gradient(shape, masked):
    """The log-probability of the chosen index, the loss's entropy on the normalized
    log-probabilities and the logits' gradient match the distribution's to float rounding,
    with a masked (-inf) action too: there the entropy stays finite, as the distribution's."""
    generator = torch.Generator().manual_seed(0)
    logits = 3 * torch.randn(*shape, generator=generator)
    index = torch.randint(0, shape[-1], shape[:-1], generator=generator)
    if masked:
        logits[..., 1] = float("-inf")
        index[index == 1] = 0
    action = torch.nn.functional.one_hot(index, shape[-1]).float()
    weights = torch.randn(2, *shape[:-1], generator=generator)
    chain = _chain(shape[-1])

    def terms(fast: bool):
        x = logits.clone().requires_grad_()
        if fast:
            log_probs, chosen, log_prob = chain.one_hot({"logits": x}, choose=lambda _: index)
            assert chosen is index
            finite = log_probs.clamp(min=torch.finfo(log_probs.dtype).min)  # as the loss
            entropy = -(finite * log_probs.exp()).sum(-1)
        else:
            dist = OneHotCategorical(logits=x, validate_args=False)
            log_prob, entropy = dist.log_prob(action), dist.entropy()
        ((log_prob * weights[0]).sum() + (entropy * weights[1]).sum()).backward()
        return log_prob.detach(), entropy.detach(), x.grad

    fast, reference = terms(fast=True), terms(fast=False)
    for got, expected in zip(fast[:2], reference[:2], strict=True):
        assert got.isfinite().all()
        torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)
    if masked:  # both give NaN gradients through the -inf logit; the others agree
        assert torch.equal(fast[2].isnan(), reference[2].isnan())
    else:
        assert fast[1].gt(0).all()  # a real entropy, not zeros
        torch.testing.assert_close(fast[2], reference[2], rtol=1e-5, atol=1e-6)


def test_one_hot_is_none_where_the_head_is_another_distribution_or_one_logit():
    chain = _chain(2)
    assert chain.one_hot({"logits": torch.zeros(3, 1)}, choose=lambda p: p.argmax(-1)) is None
    chain.one_hot_logits = None  # as for any other distribution class
    assert chain.one_hot({"logits": torch.zeros(3, 2)}, choose=lambda p: p.argmax(-1)) is None


def test_a_gaussian_head_writing_loc_and_scale_takes_the_tensor_path_bit_for_bit():
    """A layer with two out-keys (the Gaussian head's loc and scale) is plain too: the chain
    builds the distribution get_dist builds, from the same bits. (A TanhNormal takes
    TensorDict's path: its constructor has no validate_args to turn off.)"""
    from tensordict import TensorDict
    from torchrl.data import Bounded

    spec = Composite(observation=Unbounded((5,)))
    action = Bounded(low=-1.0, high=1.0, shape=(3,))
    policy = make_actor_critic(spec, action, normalize_observations=True).get_policy_operator()
    chain = TensorChain.of(policy)
    assert chain is not None and chain.one_hot_logits is None
    td = TensorDict(observation=torch.randn(7, 5), batch_size=[7])
    values = chain.values(td)
    assert {"loc", "scale"} <= values.keys()
    expected = policy.get_dist(td.clone())
    dist = chain.dist(values)
    assert type(dist) is type(expected)
    assert torch.equal(dist.base_dist.loc, expected.base_dist.loc)
    assert torch.equal(dist.base_dist.scale, expected.base_dist.scale)
    tanh = make_actor_critic(spec, action, continuous="tanh_normal").get_policy_operator()
    assert TensorChain.of(tanh) is None
