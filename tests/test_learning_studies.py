"""The learning studies run what they say: each cell stops at the study's agent steps, its
overrides are arguments the recipe's module takes, and its anchors are in anchors.csv."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import json
import sys

import pytest
import yaml

import hts_lightning
from benchmarks.common import sb3_atari_a2c
from benchmarks.learning import learning_study
from tests.conftest import ROOT

STUDIES = sorted(learning_study.STUDIES.items())


def _module_arguments(module_class) -> set[str]:
    names = set()
    for cls in module_class.__mro__:
        if cls is hts_lightning.OnPolicyModule or issubclass(cls, hts_lightning.OnPolicyModule):
            names |= set(inspect.signature(cls.__init__).parameters)
    return names - {"self", "kw"}


@pytest.mark.parametrize(("name", "study"), STUDIES, ids=[name for name, _ in STUDIES])
def test_a_study_cell_trains_its_recipe_to_the_studys_agent_steps(name, study):
    recipe = yaml.safe_load((ROOT / study.recipe).read_text())
    module_class = getattr(hts_lightning, recipe["model"]["class_path"].rpartition(".")[2])
    defaults = inspect.signature(module_class.__init__).parameters
    known = _module_arguments(module_class)
    for variant, overrides in study.variants.items():
        args = dict(recipe["model"]["init_args"])
        for option in overrides:
            key, _, value = option.removeprefix("--model.init_args.").partition("=")
            assert option.startswith("--model.init_args.") and value, (variant, option)
            assert key in known, f"{name}/{variant}: {module_class.__name__} has no {key}"
            args[key] = yaml.safe_load(value)
        # max_steps counts optimizer steps: a wrong batch size or steps-per-batch would stop
        # the cell at another number of agent steps than its columns say.
        assert study.frames_per_batch == args["num_envs"] * args["sync_interval"], variant
        steps_per_batch = 1
        if module_class is hts_lightning.PPO:
            epochs, minibatches = (
                args.get(k, defaults[k].default) for k in ("epochs", "minibatches")
            )
            steps_per_batch = epochs * minibatches
        assert study.optimizer_steps_per_batch == steps_per_batch, variant
    frames = (
        learning_study._max_steps(study) // study.optimizer_steps_per_batch * study.frames_per_batch
    )
    assert study.steps <= frames < study.steps + study.frames_per_batch
    # Published returns at agent steps, or (football: the poster's minutes) scores to reach.
    assert learning_study.load_anchors(study.anchors) or study.thresholds


def test_the_cell_command_resumes_only_when_asked():
    study = learning_study.STUDIES["pong_ppo_8envs_2m"]
    fresh = learning_study.command(study, "recipe", 1, resume=False)
    resumed = learning_study.command(study, "recipe", 1, resume=True)
    # 2M agent steps of 1,024-frame batches, 16 optimizer steps a batch: 1,954 batches.
    assert "--trainer.max_steps=31264" in fresh
    assert resumed == [*fresh, "--ckpt_path=last"]


def test_a_shorter_cell_stops_at_its_own_steps():
    """``run --steps`` trains new cells to fewer agent steps than the study's length."""
    study = learning_study.STUDIES["pong_a2c_2m"]
    shorter = dataclasses.replace(study, steps=1_000_000)
    # 1M agent steps of 80-frame batches, one optimizer step a batch.
    assert "--trainer.max_steps=12500" in learning_study.command(shorter, "sync", 0, resume=False)
    assert "--trainer.max_steps=25000" in learning_study.command(study, "sync", 0, resume=False)


def test_the_sb3_cell_trains_the_recipes_a2c_settings():
    """SB3's A2C gets the Pong A2C recipe's settings, on the ALE game of baselines' benchmark;
    a recipe that is not baselines' A2C is refused rather than trained otherwise."""
    args = yaml.safe_load((ROOT / "recipes/atari/pong_a2c.yaml").read_text())["model"]["init_args"]
    settings = sb3_atari_a2c.A2CSettings.from_module_args(args)
    assert (settings.num_envs, settings.n_steps, settings.lr) == (16, 5, 0.0007)
    assert (settings.lr_decay_steps, settings.gae_lambda, settings.value_coef) == (10**7, 1.0, 0.5)
    assert (settings.entropy_coef, settings.max_grad_norm, settings.gamma) == (0.01, 0.5, 0.99)
    assert sb3_atari_a2c.gymnasium_id(args["env_id"]) == "PongNoFrameskip-v4"
    with pytest.raises(SystemExit, match="TF's RMSprop"):
        sb3_atari_a2c.A2CSettings.from_module_args({**args, "optimizer": "adam"})


def test_the_report_shows_a_shorter_cell_at_its_end(tmp_path, monkeypatch):
    """A cell trained to fewer steps than its study (``run --steps``) gets a column at its end,
    where its value is read; a full-length cell reads '-' nowhere it has data."""
    monkeypatch.setattr(learning_study, "RESULTS", tmp_path)
    (tmp_path / "football_run_to_score").mkdir()
    for cell, last in (("short_seed0", 301_056), ("full_seed0", 800_768)):
        rows = [(step, step / 200, step / 1_000_000) for step in range(2048, last + 1, 2048)]
        learning_study._write_record(
            "football_run_to_score", cell, rows, {"command": "fit"}, seconds=1.0, load=(0.0,)
        )
    table = learning_study.report("football_run_to_score").splitlines()
    assert "| cell | 300,000 steps | 400,000 steps | 800,000 steps |" in table
    # the last update at or before each column: 299,008 and 399,360 agent steps
    assert "| short_seed0 | 0.3 | - | - |" in table
    assert "| full_seed0 | 0.3 | 0.4 | 0.8 |" in table


def test_a_record_keeps_only_the_rows_where_its_value_moves_and_reads_the_same(
    tmp_path, monkeypatch
):
    """A record leaves out the updates inside a run of equal values, yet its table, its
    crossings (counted from the study's ``crossings_from``, inside such a run here) and its
    plot's lines are those of every update's row."""
    monkeypatch.setattr(learning_study, "RESULTS", tmp_path)
    (tmp_path / "football_empty_goal_close").mkdir()
    study = learning_study.STUDIES["football_empty_goal_close"]
    assert study.crossings_from == 6400

    def value(step):  # above both thresholds before crossings_from and on past it
        if step < 3000:
            return 0.0
        if step < 9000:
            return 0.9
        return 0.3 if step < 20_000 else min(1.0, step // 10_000 * 0.05)

    rows = [(step, step / 100, value(step)) for step in range(128, 200_065, 128)]
    full = tmp_path / "football_empty_goal_close" / "hts_seed0.csv"
    full.write_text(
        "agent_steps,wall_seconds,goal_difference_last_100\n"
        + "".join(f"{s},{w},{v}\n" for s, w, v in rows)
    )
    full.with_suffix(".json").write_text('{"command": "fit", "machine": "m", "utc_end": "d"}')
    every_row = learning_study.report("football_empty_goal_close")
    learning_study._write_record(
        "football_empty_goal_close", "hts_seed0", rows, {"command": "fit"}, seconds=1.0, load=(0,)
    )
    kept = learning_study._curve(full)
    assert len(kept) < len(rows) // 20
    table = learning_study.report("football_empty_goal_close")
    # the machine and date lines differ (the record wrote this machine's); the rest is equal
    assert table.split("- `hts_seed0`")[0] == every_row.split("- `hts_seed0`")[0]
    assert "| hts_seed0 | 6,400 | 1.1 | 6,400 | 1.1 |" in table
    # each left-out row lies on the line between the kept rows around it
    for step, _wall, v in rows:
        before = max(r for r in kept if r[0] <= step)
        after = min(r for r in kept if r[0] >= step)
        assert before[2] == v == after[2] or step in (before[0], after[0])


@pytest.mark.parametrize(
    ("values", "keep_from", "kept_steps"),
    [
        ([1.0], 0, [1]),
        ([1.0, 1.0], 0, [1, 2]),
        ([1.0, 1.0, 1.0, 1.0], 0, [1, 4]),
        ([1.0, 1.0, 1.0, 1.0], 3, [1, 3, 4]),
        ([1.0, 1.0, 1.0, 1.0], 9, [1, 4]),  # crossings from past the end: the ends alone
        ([0.0, float("nan"), float("nan"), 0.0], 0, [1, 2, 3, 4]),  # nan equals nothing
        ([0.0, 0.0, 2.0, 2.0, 2.0, 0.0], 0, [1, 2, 3, 5, 6]),
    ],
)
def test_thinning_keeps_each_runs_ends_and_the_first_row_from_keep_from(
    values, keep_from, kept_steps
):
    rows = [(step, step / 10, value) for step, value in enumerate(values, start=1)]
    assert [row[0] for row in learning_study.thin(rows, keep_from=keep_from)] == kept_steps


def test_a_cell_recorded_short_of_the_steps_goes_on_from_its_checkpoint(
    tmp_path, monkeypatch, capsys
):
    """``run --steps 1000000`` then ``run`` (2M): the second goes on from the first's
    last.ckpt; a cell recorded to its steps, or without its checkpoint here (then it says
    how to train it again), is left."""
    monkeypatch.setattr(learning_study, "RESULTS", tmp_path / "results")
    (tmp_path / "results" / "pong_a2c_2m").mkdir(parents=True)
    rows = [(step, step / 500, -20.0) for step in range(80, 1_000_001, 80)]
    learning_study._write_record(
        "pong_a2c_2m", "recipe_seed0", rows, {"command": "fit"}, seconds=1.0, load=(0.0,)
    )
    folder = tmp_path / "work" / "pong_a2c_2m" / "recipe_seed0"
    assert not learning_study.extends("pong_a2c_2m", "recipe_seed0", 2_000_000, folder)
    said = capsys.readouterr().out
    assert "recorded to 1,000,000 steps, but no last.ckpt" in said and "run --again" in said
    (folder / "runs" / "1" / "abc" / "checkpoints").mkdir(parents=True)
    (folder / "runs" / "1" / "abc" / "checkpoints" / "last.ckpt").touch()
    assert learning_study.extends("pong_a2c_2m", "recipe_seed0", 2_000_000, folder)
    assert not learning_study.extends("pong_a2c_2m", "recipe_seed0", 1_000_000, folder)
    assert not learning_study.extends("pong_a2c_2m", "sync_seed0", 2_000_000, folder)


def test_again_trains_a_recorded_cell_from_step_0_and_replaces_its_record(tmp_path, monkeypatch):
    """``run --again`` on a cell recorded to its steps, with a checkpoint in its folder: the
    cell is not skipped, the checkpoint is not resumed (an empty last.ckpt here would fail
    to load) and the record is the new run's. Without it the recorded cell is left."""
    study = learning_study.Study(
        recipe="recipes/cartpole_ppo.yaml",
        variants={"hts": ()},
        seeds=(0,),
        steps=512,
        optimizer_steps_per_batch=20,
        frames_per_batch=256,
        anchors="none",
    )
    monkeypatch.setitem(learning_study.STUDIES, "cartpole_again", study)
    monkeypatch.setattr(learning_study, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(learning_study, "cpu_lock", contextlib.nullcontext)
    old = [(256, 1.0, 999.0), (512, 2.0, 999.0)]
    learning_study._write_record(
        "cartpole_again", "hts_seed0", old, {"command": "old"}, seconds=1.0, load=(0.0,)
    )
    stale = tmp_path / "work" / "cartpole_again" / "hts_seed0" / "runs" / "1" / "x" / "last.ckpt"
    stale.parent.mkdir(parents=True)
    stale.touch()
    record = tmp_path / "results" / "cartpole_again" / "hts_seed0.csv"
    learning_study.run_cell("cartpole_again", study, "hts", 0, tmp_path / "work")
    assert learning_study._curve(record) == old
    learning_study.run_cell("cartpole_again", study, "hts", 0, tmp_path / "work", again=True)
    curve = learning_study._curve(record)
    assert curve[-1][0] == 512 and all(0 < value < 100 for _, _, value in curve)
    assert not stale.exists()
    meta = json.loads(record.with_suffix(".json").read_text())
    assert "--ckpt_path" not in meta["command"] and "--trainer.max_steps=40" in meta["command"]


def test_a_printing_cell_recorded_short_trains_again_from_its_first_step(tmp_path, monkeypatch):
    """CleanRL's, the plain loop's and SB3's processes have no checkpoint: a cell recorded
    short of the study's steps is trained again from step 0 and its longer curve replaces the
    short one; a cell recorded to its steps is left."""
    monkeypatch.setattr(learning_study, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(learning_study, "WORK", tmp_path / "work")
    monkeypatch.setattr(learning_study, "cpu_lock", contextlib.nullcontext)
    (tmp_path / "results" / "pong_ppo_1m").mkdir(parents=True)
    short = [(step, step / 500, -20.0) for step in range(1000, 500_001, 1000)]
    learning_study._write_record(
        "pong_ppo_1m", "plain_seed0", short, {"command": "plain"}, seconds=1.0, load=(0.0,)
    )
    printer = (
        "for step in range(1000, 2_000_001, 1000):\n"
        "    print(f'global_step={step}, episodic_return=[{step / 100_000}]', flush=True)"
    )
    study = dataclasses.replace(learning_study.STUDIES["pong_ppo_1m"], steps=1_000_000)
    argv = [sys.executable, "-c", printer]
    learning_study._run_printing_cell("pong_ppo_1m", study, "plain", 0, argv, {}, {})
    curve = learning_study._curve(tmp_path / "results" / "pong_ppo_1m" / "plain_seed0.csv")
    assert curve[0][0] == 1000 and curve[0][2] == pytest.approx(0.01)
    assert curve[-1][0] == 1_000_000
    # the mean of the last 20 returns: steps 981,000 ... 1,000,000
    assert curve[-1][2] == pytest.approx(sum(range(981, 1001)) / 20 / 100)
    # a study of fewer steps than recorded: the record stands, nothing is trained
    argv = [sys.executable, "-c", printer.replace("step / 100_000", "-1")]
    shorter = dataclasses.replace(study, steps=600_000)
    learning_study._run_printing_cell("pong_ppo_1m", shorter, "plain", 0, argv, {}, {})
    record = learning_study._curve(tmp_path / "results" / "pong_ppo_1m" / "plain_seed0.csv")
    assert record == curve
    # run --again: the same study trains it from step 0, the new curve replaces the record
    learning_study._run_printing_cell("pong_ppo_1m", shorter, "plain", 0, argv, {}, {}, again=True)
    again = learning_study._curve(tmp_path / "results" / "pong_ppo_1m" / "plain_seed0.csv")
    assert again[-1][0] == 600_000 and again[-1][2] == pytest.approx(-1.0)


def test_a_cleanrl_cell_records_its_own_venvs_versions():
    """CleanRL runs in a venv of its own (envpool 0.8.4, gym 0.23.1): its record names that
    venv's versions, read by running its Python."""
    import numpy
    import torch

    versions = learning_study.venv_versions(sys.executable)
    assert versions.startswith(f"python {sys.version.split()[0]}, torch {torch.__version__}")
    assert f"numpy {numpy.__version__}" in versions
