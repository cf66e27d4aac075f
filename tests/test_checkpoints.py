"""Checkpoints are read without running anything in them, and a bad one is named in one line,
before anything starts: ``hts-rl evaluate`` and ``hts-rl fit --ckpt_path`` alike."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from lightning import Callback

from hts_lightning import A2C
from hts_lightning.cli import main
from tests.conftest import quiet_trainer, worker_processes

ROOT = Path(__file__).resolve().parents[1]
RECIPE = str(ROOT / "recipes" / "cartpole_a2c.yaml")


class _WritesMarker:
    """Unpickling it would run ``exec``, which writes the file ``path``."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return (exec, (f"open({str(self.path)!r}, 'w').write('ran')",))


class _SaveAt(Callback):
    def __init__(self, path: Path):
        self.path = path

    def on_train_batch_end(self, trainer, module, *args):
        if module.updates == 1:
            trainer.save_checkpoint(self.path)


@pytest.fixture(scope="module")
def real_checkpoint(tmp_path_factory) -> Path:
    """A checkpoint of a 1-worker CartPole A2C run, taken between updates (env snapshots
    and the collector's state included), as hts-rl fit writes them."""
    path = tmp_path_factory.mktemp("real") / "real.ckpt"
    module = A2C(env_id="CartPole-v1", num_envs=2, num_workers=1, sync_interval=8)
    quiet_trainer(_SaveAt(path), max_steps=2).fit(module)
    return path


@pytest.fixture
def code_running_checkpoint(tmp_path, real_checkpoint) -> tuple[Path, Path]:
    """A real checkpoint with one object added whose unpickling would write ``marker``."""
    marker = tmp_path / "marker"
    checkpoint = torch.load(real_checkpoint, weights_only=True)
    checkpoint["hts_progress"]["note"] = _WritesMarker(marker)
    path = tmp_path / "crafted.ckpt"
    torch.save(checkpoint, path)
    return path, marker


def _fit(*args: str) -> int:
    try:
        return main(["fit", "--config", RECIPE, "--trainer.enable_progress_bar=false", *args])
    except SystemExit as exit:
        return exit.code


def test_a_real_checkpoint_is_plain_data(real_checkpoint):
    # Nothing in it needs pickle's code execution: weights_only=True reads every part of it.
    assert torch.serialization.get_unsafe_globals_in_checkpoint(real_checkpoint) == []
    checkpoint = torch.load(real_checkpoint, weights_only=True)
    assert checkpoint["hts_module_class"] == "hts_lightning.modules.a2c.A2C"
    assert checkpoint["hts_collector"]["kind"] == "hts"


def test_evaluate_runs_nothing_from_a_crafted_checkpoint(code_running_checkpoint, capsys):
    path, marker = code_running_checkpoint
    assert main(["evaluate", str(path), "--no-mlflow"]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"hts-rl: error: {path} holds Python objects that loading would ")
    assert "(builtins.exec)" in error and "Nothing in it was run" in error
    assert len(error.strip().splitlines()) == 1
    assert not marker.exists()


def test_resume_runs_nothing_from_a_crafted_checkpoint(
    code_running_checkpoint, capsys, tmp_path, monkeypatch
):
    path, marker = code_running_checkpoint
    monkeypatch.chdir(tmp_path)
    assert _fit(f"--ckpt_path={path}") == 2
    assert "holds Python objects that loading would execute" in capsys.readouterr().err
    assert not marker.exists()
    assert not (tmp_path / "runs").exists() and not (tmp_path / "mlflow.db").exists()
    assert worker_processes() == []


def test_evaluate_imports_no_module_a_checkpoint_names_outside_the_package(
    tmp_path, real_checkpoint, capsys, monkeypatch
):
    marker = tmp_path / "imported"
    (tmp_path / "side_effect.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    checkpoint = torch.load(real_checkpoint, weights_only=True)
    checkpoint["hts_module_class"] = "side_effect.A2C"
    path = tmp_path / "other.ckpt"
    torch.save(checkpoint, path)
    assert main(["evaluate", str(path), "--no-mlflow"]) == 2
    assert "names the module class 'side_effect.A2C', outside hts_lightning" in (
        capsys.readouterr().err
    )
    assert not marker.exists() and "side_effect" not in sys.modules


def test_evaluate_names_a_missing_module_class_in_one_line(tmp_path, real_checkpoint, capsys):
    checkpoint = torch.load(real_checkpoint, weights_only=True)
    checkpoint["hts_module_class"] = "hts_lightning.modules.gone.PPO"
    path = tmp_path / "renamed.ckpt"
    torch.save(checkpoint, path)
    assert main(["evaluate", str(path), "--no-mlflow"]) == 2
    err = capsys.readouterr().err
    assert "names 'hts_lightning.modules.gone.PPO', which is not an hts_lightning training" in err
    assert "Traceback" not in err


def _truncated(real_checkpoint: Path, folder: Path) -> Path:
    data = real_checkpoint.read_bytes()
    path = folder / "truncated.ckpt"
    path.write_bytes(data[: len(data) // 2])  # a copy cut off halfway
    return path


def _foreign(folder: Path) -> Path:
    path = folder / "weights.pt"
    torch.save({"state_dict": {"layer.weight": torch.zeros(2)}}, path)  # someone else's
    return path


def _text(folder: Path) -> Path:
    path = folder / "notes.ckpt"
    path.write_text("not a checkpoint\n")
    return path


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (_truncated, "is not a readable checkpoint ("),
        (lambda real, folder: _foreign(folder), "is not an hts-lightning checkpoint (no "),
        (lambda real, folder: _text(folder), "is not a readable checkpoint (17 bytes, not a"),
        (lambda real, folder: folder / "missing.ckpt", "no checkpoint file at "),
    ],
    ids=["truncated", "foreign", "text", "missing"],
)
def test_a_bad_ckpt_path_is_one_line_naming_the_file_before_anything_starts(
    make, message, real_checkpoint, tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    path = make(real_checkpoint, tmp_path)
    assert _fit(f"--ckpt_path={path}") == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and message in error and str(path) in error
    assert "PytorchStreamReader" not in error
    assert not (tmp_path / "runs").exists() and not (tmp_path / "mlflow.db").exists()
    assert worker_processes() == []
    # hts-rl evaluate says the same.
    assert main(["evaluate", str(path), "--no-mlflow"]) == 2
    assert message in capsys.readouterr().err


def test_hts_rl_validate_is_not_offered_and_points_at_evaluate(capsys):
    assert main(["validate", "--config", RECIPE]) == 2
    error = capsys.readouterr().err
    assert "hts-rl validate is not offered: the modules define no validation step" in error
    assert "hts-rl evaluate" in error
    main(["--help"])
    assert "{fit,collect,evaluate}" in capsys.readouterr().out


# A PPO checkpoint written by the code of commit 72d0fc1 (before the loss kept its own modules
# and only the critic's value head): its loss parameters have TorchRL's functional names.
OLD_CHECKPOINT = ROOT / "tests" / "data" / "ppo_cartpole_before_2026-12-01.ckpt"


def test_a_checkpoint_of_the_format_before_2026_12_01_is_one_line_naming_it_and_the_fix(
    tmp_path, capsys, monkeypatch
):
    from hts_lightning.checkpoint import read_checkpoint

    message = f"{OLD_CHECKPOINT} predates the current checkpoint format (written before 2026-12-01"
    with pytest.raises(ValueError) as raised:
        read_checkpoint(OLD_CHECKPOINT)
    assert str(raised.value).startswith(message) and "commit c03881b" in str(raised.value)
    assert "python -m hts_lightning.checkpoint OLD.ckpt NEW.ckpt" in str(raised.value)
    monkeypatch.chdir(tmp_path)
    assert _fit(f"--ckpt_path={OLD_CHECKPOINT}") == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and message in error
    assert not (tmp_path / "runs").exists()
    assert main(["evaluate", str(OLD_CHECKPOINT), "--no-mlflow"]) == 2
    assert message in capsys.readouterr().err


def test_the_periodic_checkpoint_counts_updates_not_optimizer_steps(tmp_path):
    """PPO takes epochs x minibatches optimizer steps an update (2 here): every 2nd update is
    global steps 4 and 8, where ``every_n_train_steps=2`` would save after every update."""
    from hts_lightning import PPO
    from hts_lightning.callbacks import UpdateCheckpoint

    module = PPO(
        env_id="CartPole-v1",
        num_envs=4,
        num_workers=0,
        sync_interval=8,
        total_frames=5 * 32,
        epochs=2,
        minibatches=1,
    )

    class _Saves(Callback):
        steps: list[int] = []

        def on_save_checkpoint(self, trainer, module, checkpoint):
            self.steps.append(trainer.global_step)

    saves = _Saves()
    periodic = UpdateCheckpoint(dirpath=tmp_path, every_n_updates=2, save_last=False)
    quiet_trainer(periodic, saves, enable_checkpointing=True).fit(module)
    assert module.updates == 5 and module.global_step == 10
    assert saves.steps == [4, 8]
    assert sorted(p.name for p in tmp_path.glob("*.ckpt")) == ["epoch=0-step=8.ckpt"]
    with pytest.raises(ValueError, match="every_n_updates must be >= 1, got 0"):
        UpdateCheckpoint(every_n_updates=0)
