"""What the tracking tests share: the tiny recipe overrides, a crash, reading runs back."""

from __future__ import annotations

from pathlib import Path

import torch
from lightning import Callback

from hts_lightning.checkpoint import MODULE_CLASS_KEY, read_checkpoint
from hts_lightning.evaluate import _module_class
from hts_lightning.models.tensor_policy import TensorPolicy

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


def checkpoint_policy(checkpoint: Path, state_dict: dict | None) -> TensorPolicy:
    """The policy of the module ``checkpoint`` names, built from its hyperparameters (its seed
    included) with ``state_dict`` loaded; with ``None``, the untrained policy the run started
    from."""
    saved = read_checkpoint(checkpoint)
    module_class = _module_class(saved[MODULE_CLASS_KEY], checkpoint)
    hparams = {k: v for k, v in saved["hyper_parameters"].items() if not k.startswith("_")}
    module = module_class(**hparams)
    if state_dict is not None:
        module.load_state_dict(state_dict)
    return TensorPolicy.from_env(module.actor, module.create_env)


def cartpole_observations() -> torch.Tensor:
    """64 fixed CartPole observations, spread over (and a little beyond) where episodes go."""
    generator = torch.Generator().manual_seed(0)
    scale = torch.tensor([2.4, 2.0, 0.21, 2.0])
    return (torch.rand(64, 4, generator=generator) * 2 - 1) * scale


def assert_acts_as_trained(greedy, logits, trained: TensorPolicy, untrained: TensorPolicy):
    """``greedy`` (observations to action indices) and ``logits`` (to action logits) act as
    the ``trained`` policy: the logits to 1e-6, the greedy actions exactly. Not vacuous:
    ``untrained`` (the run's initial parameters) is further from ``trained`` than that."""
    observations = cartpole_observations()
    expected = trained.logits(observations)
    assert not torch.allclose(expected, expected[:1])  # the logits depend on the observation
    torch.testing.assert_close(logits(observations), expected, rtol=0, atol=1e-6)
    assert torch.equal(greedy(observations), expected.argmax(-1))
    moved = float((untrained.logits(observations) - expected).abs().max())
    assert moved > 1e-4, f"training moved the logits by {moved} only"
