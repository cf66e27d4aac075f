"""Every update reaches the loggers, whatever Lightning's ``log_every_n_steps`` says."""

from __future__ import annotations

from pathlib import Path

import pytest
from lightning import Callback
from lightning.pytorch.callbacks import ModelCheckpoint

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
    # Every metric of the last update stays on the module, as the logger got it.
    last = {name: history(name)[-1] for name in module.last_metrics}
    assert len(last) == 17 and module.last_metrics["perf/policy_lag"] == 1.0
    assert {name: value for name, (_, value) in last.items()} == module.last_metrics
    assert {step for step, _ in last.values()} == {512}
    # No callback reads Lightning's callback metrics here (no bar, no monitor): none logged.
    assert trainer.callback_metrics == {}


def test_callback_metrics_hold_what_the_callbacks_read():
    """Lightning's callback metrics hold the keys monitored (any metric) and, with a progress
    bar, the frames, fps and recent return it shows; each with the update's value."""
    from lightning.pytorch.callbacks import EarlyStopping

    module = PPO(
        env_id="CartPole-v1",
        num_envs=4,
        num_workers=0,
        sync_interval=16,
        total_frames=6 * 64,
        epochs=1,
        minibatches=2,
    )
    early = EarlyStopping(monitor="train/kl_approx", mode="max", patience=100, check_finite=False)
    returns = ModelCheckpoint(monitor="rollout/episode_return", save_top_k=0)
    trainer = quiet_trainer(early, returns, enable_progress_bar=True, enable_checkpointing=True)
    trainer.fit(module)
    metrics = trainer.callback_metrics
    assert sorted(metrics) == [
        "perf/fps",
        "perf/frames",
        "rollout/episode_return",
        "rollout/return_last_20",
        "train/kl_approx",
    ]
    assert float(metrics["perf/frames"]) == 6 * 64
    for key in ("perf/fps", "rollout/return_last_20", "train/kl_approx"):
        # Lightning keeps them as float32 tensors
        assert float(metrics[key]) == pytest.approx(module.last_metrics[key], rel=1e-6), key
    assert sorted(trainer.progress_bar_metrics) == [
        "perf/fps",
        "perf/frames",
        "rollout/return_last_20",
    ]


def test_a_checkpoint_monitor_on_the_recent_return_keeps_the_best_update(tmp_path):
    """ModelCheckpoint(monitor="rollout/return_last_20") checks after every update and keeps
    the update whose recent return was the highest."""
    module = PPO(
        env_id="CartPole-v1",
        num_envs=4,
        num_workers=0,
        sync_interval=16,
        total_frames=8 * 64,
        epochs=1,
        minibatches=2,
    )

    class _Returns(Callback):
        returns: list[float] = []

        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            self.returns.append(module.last_metrics.get("rollout/return_last_20", float("nan")))

    best = ModelCheckpoint(
        dirpath=tmp_path,
        monitor="rollout/return_last_20",
        mode="max",
        every_n_train_steps=2,  # PPO's two optimizer steps: one update
        save_top_k=1,
    )
    returns = _Returns()
    trainer = quiet_trainer(returns, best, enable_checkpointing=True)
    trainer.fit(module)
    seen = [r for r in returns.returns if r == r]
    assert len(seen) >= 6
    assert float(best.best_model_score) == max(seen)
    update = returns.returns.index(max(seen)) + 1
    assert Path(best.best_model_path).name == f"epoch=0-step={2 * update}.ckpt"


@pytest.mark.parametrize("env_backend", ["envpool", "python"])
def test_with_episodic_life_the_returns_logged_are_whole_games(env_backend):
    """Breakout with episodic life: a life loss ends the training episode, but the returns and
    lengths logged are those of whole games (each batch's ``episode_reward`` where
    ``game_over``), not of lives."""

    class GameEnds(Callback):
        def __init__(self):
            self.returns, self.lives_lost = [], 0

        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            after = batch["next"]
            game_over, done = after["game_over"].squeeze(-1), after["done"].squeeze(-1)
            self.returns += after["episode_reward"].squeeze(-1)[game_over].tolist()
            self.lives_lost += int((done & ~game_over).sum())

    module = PPO(
        env_id="ALE/Breakout-v5",
        env_backend=env_backend,
        env_kwargs={"episodic_life": True, "fire_reset": True},
        num_envs=2,
        num_workers=1,
        sync_interval=200,
        total_frames=3 * 400,
        epochs=1,
        minibatches=2,
    )
    games = GameEnds()
    quiet_trainer(games).fit(module)
    assert games.lives_lost >= 4 and len(games.returns) >= 1  # random play: ~200 steps a game
    assert list(module.recent_returns) == games.returns
