"""What the tracking tests share: the tiny recipe overrides, a crash, reading runs back."""

from __future__ import annotations

from pathlib import Path

from lightning import Callback

RECIPES = Path(__file__).resolve().parents[2] / "recipes"

# Two updates of 16 frames: the recipe smoke tests' overrides (tests/test_recipes.py too).
TINY = [
    "--model.init_args.num_envs=2",
    "--model.init_args.num_workers=1",
    "--model.init_args.sync_interval=8",
    "--model.init_args.total_frames=32",
    "--trainer.log_every_n_steps=1",
    "--trainer.enable_progress_bar=false",
    "--trainer.enable_model_summary=false",
]


class CrashAfterCheckpoint(Callback):
    """Writes a checkpoint after update ``at``, as a periodic checkpoint would, then crashes."""

    def __init__(self, at: int = 2, path: str = "crash.ckpt"):
        self.at = at
        self.path = path

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        if module.updates == self.at:
            trainer.save_checkpoint(self.path)
            raise RuntimeError("simulated crash")


def metric_steps(client, run_id: str, key: str) -> list[tuple[int, float]]:
    return [(m.step, m.value) for m in client.get_metric_history(run_id, key)]


def child_runs(client, run) -> list:
    return client.search_runs(
        [run.info.experiment_id], f"tags.mlflow.parentRunId = '{run.info.run_id}'"
    )
