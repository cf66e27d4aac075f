"""Every update reaches the loggers, whatever Lightning's ``log_every_n_steps`` says."""

from __future__ import annotations

from hts_lightning import PPO
from hts_lightning.tracking import MLflowLogger
from tests.conftest import quiet_trainer


def test_every_update_is_logged_with_its_frame_count_as_step(tmp_path):
    module = PPO(
        env_id="CartPole-v1",
        num_envs=4,
        num_workers=0,
        sync_interval=16,
        total_frames=8 * 64,  # 8 updates: fewer than Lightning's log_every_n_steps=50
        epochs=1,
        minibatches=2,
    )
    logger = MLflowLogger(
        tracking_uri=f"sqlite:///{tmp_path}/mlflow.db", save_dir=str(tmp_path), log_policy=False
    )
    trainer = quiet_trainer(logger=logger)
    assert trainer.log_every_n_steps == 50
    trainer.fit(module)

    client = logger.experiment

    def history(name):
        return sorted((m.step, m.value) for m in client.get_metric_history(logger.run_id, name))

    steps = [64 * k for k in range(1, 9)]
    assert history("perf/frames") == [(s, float(s)) for s in steps]
    for name in ("perf/fps", "time/update", "train/loss_objective", "train/grad_norm"):
        assert [s for s, _ in history(name)] == steps, name
    # Episodes end from the third batch on (CartPole's first episodes last 10-40 steps):
    # the return curve has a point at every update from its first episode on.
    returns = history("rollout/return_last_20")
    assert len(returns) >= 6 and [s for s, _ in returns] == steps[-len(returns) :]
    assert all(8.0 <= value <= 200.0 for _, value in returns)
    # Lightning's callback metrics hold the rollout, perf and time metrics, not train/.
    metrics = trainer.callback_metrics
    assert float(metrics["perf/frames"]) == 512.0 and float(metrics["perf/policy_lag"]) == 1.0
    assert not any(key.startswith("train/") for key in metrics)
