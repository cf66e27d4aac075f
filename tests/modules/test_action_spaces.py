"""A2C, PPO and ACKTR on every action spec kind the actor-critic takes (index, one-hot and
multi-discrete categoricals, index or one-hot, Bounded and Unbounded boxes with a Gaussian or
a TanhNormal), on
an env named by import path as a user's own: bitwise the same with 0 and 2 workers, every
parameter trained (the Gaussian's log-std included), resumed exactly, and played greedily by
the checkpoint and the logged MLflow model alike."""

from __future__ import annotations

import pytest
import torch
from mlflow import MlflowClient

from hts_lightning import A2C, ACKTR, PPO
from hts_lightning.cli import main
from hts_lightning.envs import env_factory
from hts_lightning.evaluate import load_policy, run_episodes
from tests.conftest import quiet_trainer
from tests.modules.test_exact_resume import _assert_resume_is_exact

SPEC_ENV = "tests.collectors.spec_envs:SpecEnv"
# (action kind, the module's continuous option)
ACTIONS = [
    ("index", "normal"),
    ("one_hot", "normal"),
    ("multi_index", "normal"),
    ("multi_one_hot", "normal"),
    ("bounded", "normal"),
    ("bounded", "tanh_normal"),
    ("unbounded", "normal"),
]


def _module(
    algorithm, action: str, continuous: str, *, num_workers: int, total_frames: int = 4 * 8 * 3
):
    extra = {"epochs": 2, "minibatches": 2} if algorithm is PPO else {}
    return algorithm(
        env_id=SPEC_ENV,
        env_kwargs={"action": action, "observation": "vector"},
        continuous=continuous,
        num_envs=4,
        num_workers=num_workers,
        sync_interval=8,
        total_frames=total_frames,
        shared_trunk=False,
        seed=3,
        **extra,
    )


@pytest.mark.parametrize("algorithm", [A2C, PPO, ACKTR])
@pytest.mark.parametrize(("action", "continuous"), ACTIONS)
def test_each_action_kind_trains_the_same_with_any_worker_count(algorithm, action, continuous):
    runs = []
    for workers in (0, 2):
        module = _module(algorithm, action, continuous, num_workers=workers)
        initial = {k: v.clone() for k, v in module.model.named_parameters()}
        quiet_trainer().fit(module)
        assert module.updates == 3
        runs.append(module.state_dict())
        # Every parameter moved: the policy and value layers, and a Gaussian's log-std.
        moved = [k for k, v in module.model.named_parameters() if not torch.equal(v, initial[k])]
        assert moved == list(initial)
        if continuous == "normal" and action in ("bounded", "unbounded"):
            assert any(k.endswith("log_std") for k in moved)
    assert runs[0].keys() == runs[1].keys()
    for name, value in runs[0].items():
        assert torch.equal(value, runs[1][name]), name


def test_a_gaussian_samples_beyond_the_bounds_and_the_env_gets_them_clipped():
    module = _module(PPO, "bounded", "normal", num_workers=0)
    with torch.no_grad():  # a wide policy: most samples fall outside [-2, 2]
        for name, parameter in module.actor.named_parameters():
            if name.endswith("log_std"):
                parameter.fill_(2.0)
    batches = []
    module.on_train_batch_start = lambda batch, batch_idx: batches.append(batch.clone())
    quiet_trainer().fit(module)
    batch = torch.cat([b.reshape(-1) for b in batches])
    action = batch["action"]
    assert (action.abs() > 2).any()  # stored as sampled, so the log-prob is the sample's
    # SpecEnv's reward reads the action it was stepped with: the clipped one.
    clipped = action.clamp(-2, 2)
    expected = (clipped * torch.tensor([1.0, 2.0])).sum(-1, keepdim=True)
    torch.testing.assert_close(batch["next", "reward"], expected)


@pytest.mark.parametrize(
    ("algorithm", "action", "continuous"),
    [
        (PPO, "bounded", "normal"),
        (A2C, "index", "normal"),
        (ACKTR, "multi_index", "normal"),
        (PPO, "multi_one_hot", "normal"),
        (PPO, "bounded", "tanh_normal"),
    ],
)
def test_resume_is_exact_for_each_action_kind(algorithm, action, continuous, tmp_path):
    def make():
        return _module(algorithm, action, continuous, num_workers=2, total_frames=4 * 8 * 6)

    rows = _assert_resume_is_exact(make, tmp_path, stop_after=3)
    assert len(rows) == 6


@pytest.mark.parametrize(
    ("action", "continuous"),
    [
        ("index", "normal"),
        ("multi_index", "normal"),
        ("multi_one_hot", "normal"),
        ("bounded", "normal"),
        ("bounded", "tanh_normal"),
        ("unbounded", "normal"),
    ],
)
def test_checkpoint_and_mlflow_model_play_the_same_greedy_actions(
    action, continuous, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    code = main(
        [
            "fit",
            "--model=PPO",
            f"--model.env_id={SPEC_ENV}",
            f'--model.env_kwargs={{"action": "{action}", "observation": "vector"}}',
            f"--model.continuous={continuous}",
            "--model.num_envs=2",
            "--model.num_workers=0",
            "--model.sync_interval=8",
            "--model.total_frames=64",
            "--trainer.enable_progress_bar=false",
        ]
    )
    assert code == 0
    (checkpoint,) = tmp_path.glob("runs/**/last.ckpt")
    with pytest.raises(ValueError, match=f"pass --env {SPEC_ENV}"):
        load_policy(str(checkpoint), tracking_uri=uri)
    trained = load_policy(str(checkpoint), tracking_uri=uri, env=SPEC_ENV).policy
    client = MlflowClient(uri)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    logged = load_policy(f"runs:/{run.info.run_id}/model", tracking_uri=uri).policy
    observations = torch.linspace(-3, 3, 40).reshape(10, 4)
    greedy = trained(observations)
    assert torch.equal(logged(observations), greedy)
    assert len({tuple(a.flatten().tolist()) for a in greedy}) > 1  # not a constant policy
    make = env_factory(SPEC_ENV, action=action, observation="vector")
    returns, lengths, _ = run_episodes(logged, make, episodes=3)
    assert len(returns) == 3 and all(3 <= n <= 11 for n in lengths)


def test_multi_one_hot_actions_are_each_heads_one_hot_vector_and_score_as_indices():
    module = _module(PPO, "multi_one_hot", "normal", num_workers=2)
    batches = []
    module.on_train_batch_start = lambda batch, batch_idx: batches.append(batch.clone())
    quiet_trainer().fit(module)
    batch = torch.cat([b.reshape(-1) for b in batches])
    action = batch["action"]  # MultiOneHot(nvec=[3, 2]): one 1 in each head's slice
    assert action.shape[-1] == 5
    assert action[:, :3].sum(-1).eq(1).all() and action[:, 3:].sum(-1).eq(1).all()
    # Both heads vary: sampled per head, not one joint choice.
    assert len(set(action[:, :3].argmax(-1).tolist())) == 3
    assert len(set(action[:, 3:].argmax(-1).tolist())) == 2
    # Its log-probability is the heads' indices' summed (no mass on other vectors).
    with torch.no_grad():
        dist = module.actor.get_dist(batch.select("observation").clone())
        logits = dist.logits.log_softmax(-1)
        index = torch.stack([action[:, :3].argmax(-1), action[:, 3:].argmax(-1)], -1)
        by_heads = logits.gather(-1, index.unsqueeze(-1)).squeeze(-1).sum(-1)
        torch.testing.assert_close(dist.log_prob(action), by_heads)
        assert by_heads.lt(0).all() and by_heads.gt(torch.tensor(6.0).log().neg() * 3).all()


def test_other_action_specs_are_named_with_their_alternatives():
    from torchrl.data import Bounded

    from hts_lightning.models import action_head

    integer_box = Bounded(low=0, high=3, shape=(2,), dtype=torch.int64)
    with pytest.raises(ValueError, match=r"got BoundedDiscrete \(2,\)\. Bring your own network"):
        action_head(integer_box)


@pytest.mark.parametrize(("loc", "scale"), [(0.0, 1.0), (-1.0, 3.0), (5.0, 2.0), (0.5, 0.01)])
def test_the_tanh_normals_entropy_is_computed_without_random_numbers(loc, scale):
    from hts_lightning.models import TanhNormalWithEntropy

    dist = TanhNormalWithEntropy(
        torch.tensor([loc, -loc]), torch.tensor([scale, scale]), low=-2.0, high=1.0
    )
    state = torch.random.get_rng_state()
    entropy = dist.entropy()
    assert torch.equal(torch.random.get_rng_state(), state)  # no draw from torch's generator
    # Against the definition: the Gaussian's entropy plus E[log |d squash / du|], sampled.
    u = dist.base_dist.base_dist.sample((2_000_000,)).double()
    log_jacobian = torch.log(torch.tensor(1.5)) + torch.log1p(
        -torch.tanh(u).pow(2).clamp(max=1 - 1e-12)
    )
    sampled = dist.base_dist.base_dist.entropy().double() + log_jacobian.mean(0)
    torch.testing.assert_close(entropy.double(), sampled.sum(), rtol=0, atol=0.01)
