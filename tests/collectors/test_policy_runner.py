"""The collector's policy call: its tensor path samples as get_dist; NaN policies are refused."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.data import Composite, OneHot, Unbounded
from torchrl.envs.utils import ExplorationType
from torchrl.modules import ProbabilisticActor
from torchrl.modules.distributions import OneHotCategorical

from hts_lightning import CountingEnv, HTSCollector
from hts_lightning.collectors.core.policy_runner import PolicyRunner
from hts_lightning.models import make_actor_critic
from tests.collectors.policies import sampling_policy
from tests.conftest import require_module

CPU = torch.device("cpu")


def _runner(policy) -> PolicyRunner:
    return PolicyRunner(policy, device=CPU, exploration_type=ExplorationType.RANDOM)


def _chunk(observation_shape, dtype=torch.float32, rows=8) -> TensorDict:
    generator = torch.Generator().manual_seed(0)
    if dtype == torch.uint8:
        observation = torch.randint(0, 256, (rows, *observation_shape), generator=generator)
    else:
        observation = torch.randn((rows, *observation_shape), generator=generator)
    return TensorDict(
        observation=observation.to(dtype), done=torch.zeros(rows, 1, dtype=torch.bool)
    ).auto_batch_size_(1)


def _policy(observation_shape, action_shape, **kwargs):
    torch.manual_seed(0)
    observation = Composite(observation=Unbounded(observation_shape))
    model = make_actor_critic(observation, OneHot(action_shape[-1], shape=action_shape), **kwargs)
    return model.get_policy_operator()


CASES = {
    "mlp, shared trunk": (_policy((4,), (2,)), (4,), torch.float32),
    "mlp, separate trunks": (_policy((4,), (2,), shared_trunk=False), (4,), torch.float32),
    "nature cnn": (_policy((4, 84, 84), (6,)), (4, 84, 84), torch.uint8),
    "three players": (_policy((3, 115), (3, 19)), (3, 115), torch.float32),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_tensor_path_gives_get_dist_s_samples_and_leaves_the_chunk_alone(case):
    """The project's actor-critics take the tensor path; its actions and module outputs equal
    those of the TensorDict call (``policy.get_dist``) bit for bit, its log-probs (one
    ``log_softmax`` for TorchRL's OneHotCategorical) to float rounding, for rows of several
    noise draws, and the chunk it read keeps its keys and values."""
    policy, shape, dtype = CASES[case]
    fast = _runner(policy)
    assert fast._chain is not None
    reference = _runner(policy)
    reference._chain = None  # policy.get_dist, the library's call
    chunk = _chunk(shape, dtype)
    before = chunk.clone()
    chunk_keys = set(chunk.keys())
    width = fast.noise_width(chunk.clone())
    for draw in range(3):
        uniform = torch.rand(8, width, generator=torch.Generator().manual_seed(draw))
        got, expected = fast(chunk, uniform), reference(chunk, uniform)
        keys = ["features", "logits", "action", "action_log_prob"]
        assert [k for k in expected.keys(True, True) if k not in chunk_keys] == keys
        assert [k for k in got.keys(True, True) if k not in chunk_keys] == keys
        for key in keys:
            assert got[key].dtype == expected[key].dtype
            if key == "action_log_prob":
                torch.testing.assert_close(got[key], expected[key], rtol=1e-6, atol=1e-6)
            else:
                assert torch.equal(got[key], expected[key]), key
        assert (chunk == before).all() and set(chunk.keys()) == chunk_keys
    assert got["action"].sum(-1).eq(1).all()  # one-hot actions (per player)


ENGINE_CASES = {
    **CASES,
    "mlp, float64": (_policy((4,), (2,)).double(), (4,), torch.float64),
}


@pytest.mark.parametrize("case", list(ENGINE_CASES))
def test_the_engine_s_call_on_a_batch_s_noise_gives_each_chunk_s_call_bit_for_bit(case):
    """The engine turns a whole batch's uniforms into the sampling noise at once
    (``prepare``, ``batch_noise``: minus the Gumbel noise, in the logits' dtype, for a
    categorical head) and acts on each chunk's rows of it (``act``): the same tensors, bit
    for bit, as the call on the chunk's own uniforms, uniforms of 0 and 1 included."""
    policy, shape, dtype = ENGINE_CASES[case]
    engine, reference = _runner(policy), _runner(policy)
    chunk = _chunk(shape, dtype)
    width = reference.noise_width(chunk.clone())
    engine.prepare(chunk)
    assert (engine._gumbel_dtype is None) == (case == "three players")  # a players head
    uniform = torch.rand(8, 16, width, generator=torch.Generator().manual_seed(1))
    uniform[0, 0], uniform[1, 0] = 0.0, 1.0
    noise = engine.batch_noise(uniform)
    for step in range(uniform.shape[1]):
        with torch.no_grad():
            got = engine.act(chunk, noise[:, step].contiguous())
        expected = reference(chunk, uniform[:, step].contiguous())
        for key in ["features", "logits", "action", "action_log_prob"]:
            assert got.get(key).dtype == expected[key].dtype, key
            assert torch.equal(got.get(key), expected[key]), key


class _Masked(nn.Module):
    """Logits with action 1 masked out (-inf), as action masking does."""

    def forward(self, observation):
        logits = torch.zeros(*observation.shape[:-1], 3)
        logits[..., 1] = float("-inf")
        return logits


def _masked_policy():
    module = TensorDictModule(_Masked(), in_keys=["observation"], out_keys=["logits"])
    return ProbabilisticActor(
        module, in_keys=["logits"], distribution_class=OneHotCategorical, return_log_prob=True
    )


def test_other_actors_take_torchrl_s_call_and_masked_logits_are_valid():
    """A module with a forward hook is not a plain TensorDictModule: that actor takes the
    TensorDict call (hooks run). A logit of -inf (a masked action) is not refused: the masked
    action is never taken."""
    calls = []
    policy = _masked_policy()
    policy.module[0].register_forward_hook(lambda *args: calls.append(1))
    hooked = _runner(policy)
    assert hooked._chain is None
    chunk = _chunk((1,), rows=4)
    uniform = torch.rand(4, 3, generator=torch.Generator().manual_seed(0))
    acted = hooked(chunk, uniform)
    assert calls == [1]
    plain = _runner(_masked_policy())
    assert plain._chain is not None
    for out in (acted, plain(chunk, uniform)):
        assert out["action"][:, 1].eq(0).all()
        assert torch.isfinite(out["action_log_prob"]).all()


def test_a_policy_that_turns_nan_is_refused_with_the_cause_and_the_fix():
    """NaN weights: refused when the collector is built (its probe acts once), and, when an
    update makes them NaN, the collection that acts with them raises the same clear error."""
    nan = "The policy's action distribution got NaN 'logits'.*lower the learning rate"
    broken = sampling_policy()
    with torch.no_grad():
        broken.module[0].module[-1].bias.fill_(float("nan"))
    with pytest.raises(ValueError, match=nan):
        HTSCollector(CountingEnv, broken, num_envs=2, num_workers=1, frames_per_batch=8)

    policy = sampling_policy()
    collector = HTSCollector(
        CountingEnv,
        policy,
        num_envs=2,
        num_workers=1,
        inference="main",
        frames_per_batch=8,
        total_frames=8 * 4,
    )
    batches = []
    with collector, pytest.raises(ValueError, match=nan):
        for batch in collector:
            batches.append(batch)
            assert torch.isfinite(batch["action_log_prob"]).all()
            with torch.no_grad():
                policy.module[0].module[-1].bias.fill_(float("nan"))
            collector.update_policy_weights_()
    assert len(batches) == 2  # batch 1 used the weights before the update (lag one)


def test_envpool_workers_refuse_the_batch_collected_with_nan_logits():
    """The native backend's default (worker inference, a categorical head on the CPU) checks
    for NaN once a batch, on the stored logits: the batch collected with NaN weights raises
    the same error, naming the cause, and the batches before it were finite."""
    from hts_lightning.envs import env_factory

    require_module("envpool")
    make = env_factory("CartPole-v1", backend="envpool")
    policy = _policy((4,), (2,))
    assert _runner(policy).nan_check_per_batch is False  # until prepare finds the head
    collector = HTSCollector(
        make, policy, num_envs=4, num_workers=1, sync_interval=8, total_frames=4 * 8 * 4
    )
    batches = []
    with collector, pytest.raises(RuntimeError, match=r"got NaN 'logits'.*lower the learning"):
        for batch in collector:
            batches.append(batch)
            assert torch.isfinite(batch["logits"]).all()
            with torch.no_grad():
                for parameter in policy.module[1].parameters():
                    parameter.fill_(float("nan"))
            collector.update_policy_weights_()
    assert len(batches) == 2  # batch 1 used the weights before the update (lag one)
