"""Inference on CUDA: same guarantees, batches delivered on the CPU."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from hts_lightning import HTSCollector, make_atari_env
from hts_lightning.models import make_actor_critic

pytestmark = pytest.mark.gpu


def _pong_policy(probe):
    torch.manual_seed(0)
    model = make_actor_critic(probe.observation_spec, probe.action_spec)
    return model.get_policy_operator().to("cuda")


def _collect(num_workers: int, *, num_envs: int, steps: int, batches: int, seed: int, **kwargs):
    """Batches collected with a CUDA policy whose weights change (seeded) after each one."""
    env = partial(make_atari_env, "ALE/Pong-v5")
    probe = env()
    policy = _pong_policy(probe)
    probe.close()
    generator = torch.Generator(device="cuda").manual_seed(seed)
    out = []
    with HTSCollector(
        env,
        policy,
        num_envs=num_envs,
        num_workers=num_workers,
        frames_per_batch=num_envs * steps,
        total_frames=num_envs * steps * batches,
        **kwargs,
    ) as collector:
        assert collector.device.type == "cuda"
        for batch in collector:
            out.append(batch)
            with torch.no_grad():
                for p in policy.parameters():
                    p.add_(0.05 * torch.randn(p.shape, device="cuda", generator=generator))
            collector.update_policy_weights_()
    return torch.stack(out)


_PAIR = dict(num_envs=8, steps=32, batches=2, seed=0)
#: Three batches with inference in this process on CUDA, weights changed between them.
_MAIN = dict(num_envs=4, steps=16, batches=3, seed=1)


def test_cuda_inference_is_identical_across_worker_counts():
    serial, parallel = _collect(0, **_PAIR), _collect(2, **_PAIR)
    assert serial["observation"].device.type == "cpu"
    for key in serial.keys(include_nested=True, leaves_only=True):
        assert torch.equal(serial[key], parallel[key]), f"{key} differs"
    actions = serial["action"]
    assert actions.sum(-1).eq(1).all()
    assert torch.isfinite(serial["action_log_prob"]).all()
    assert serial["policy_version"][:, 0, 0].tolist() == [0, 0]


def test_worker_inference_runs_on_the_cpu_for_a_cuda_policy():
    env = partial(make_atari_env, "ALE/Pong-v5")
    probe = env()
    policy = _pong_policy(probe)
    probe.close()
    with HTSCollector(
        env,
        policy,
        num_envs=4,
        num_workers=2,
        frames_per_batch=4 * 16,
        total_frames=4 * 16,
        inference="workers",
    ) as collector:
        assert collector.device.type == "cpu"
        batch = next(iter(collector))
    assert batch["action"].sum(-1).eq(1).all()


def test_cuda_graph_replays_give_the_eager_batches_and_take_up_new_weights():
    eager = _collect(2, **_MAIN)
    graphed = _collect(2, cuda_graph=True, **_MAIN)
    serial_graphed = _collect(0, cuda_graph=True, **_MAIN)
    for key in eager.keys(include_nested=True, leaves_only=True):
        assert torch.equal(eager[key], graphed[key]), f"{key} differs with cuda_graph"
        assert torch.equal(eager[key], serial_graphed[key]), f"{key} differs, serial graph"
    # Lag one through the graph: the weights sent after batch 0 act from batch 2 on, and they
    # change the log-probs (the graph reads the updated parameters in place).
    assert graphed["policy_version"][:, 0, 0].tolist() == [0, 0, 1]
    log_probs = graphed["action_log_prob"]
    assert not torch.equal(log_probs[1], log_probs[2])
