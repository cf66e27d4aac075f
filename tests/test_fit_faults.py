"""`hts-rl fit` under faults: env errors, killed workers, signals, NaN, bad input.

Every run is a real `hts-rl fit` in a subprocess (its own process group and MLflow store), so
that exit codes, orphan processes and shared memory are those a user would see.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch
from mlflow import MlflowClient

from hts_lightning import A2C
from tests.conftest import (
    marked_env,
    marked_processes,
    quiet_trainer,
    shm_entries,
    worker_processes,
)
from tests.final_state import assert_checkpoint_is

ROOT = Path(__file__).parents[1]
RECIPE = str(ROOT / "recipes" / "cartpole_a2c.yaml")
# Counting env, 2 replicas in 1 worker, 16 frames per update; ModelCheckpoint writes last.ckpt
# every 50 updates (hts-rl fit's default).
COUNTING = [
    "--model.init_args.env_id=Counting",
    "--model.init_args.num_envs=2",
    "--model.init_args.num_workers=1",
    "--model.init_args.sync_interval=8",
    "--trainer.enable_progress_bar=false",
]


class _Fit:
    """`hts-rl fit` in a subprocess, tagged so that every process it starts can be found."""

    def __init__(self, tmp_path: Path, *args: str):
        self.uri = f"sqlite:///{tmp_path}/mlflow.db"
        self.cwd = tmp_path
        env, self.marker = marked_env(MLFLOW_TRACKING_URI=self.uri)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "hts_lightning.cli", "fit", "--config", RECIPE, *args],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def descendants(self) -> list[psutil.Process]:
        return marked_processes(self.marker, exclude=(self.process.pid,))

    def wait_for_checkpoint(self, timeout: float = 120) -> Path:
        """The run's last.ckpt once it is there and whole (it loads)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for path in self.cwd.glob("runs/**/last.ckpt"):
                try:
                    _global_step(path)
                except Exception:  # still being written
                    continue
                return path
            assert self.process.poll() is None, self.process.communicate()[1][-3000:]
            time.sleep(0.2)
        raise AssertionError("no whole last.ckpt within the timeout")

    def finish(self, timeout: float) -> tuple[int, str]:
        """Exit code and stderr; ``timeout`` only guards against a hang (it raises)."""
        _, stderr = self.process.communicate(timeout=timeout)
        return self.process.returncode, stderr

    def run_status(self) -> str:
        client = MlflowClient(self.uri)
        (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
        return run.info.status


def _global_step(path: Path) -> int:
    return torch.load(path, map_location="cpu", weights_only=False)["global_step"]


def test_an_env_exception_ends_the_run_with_its_replica_and_error(tmp_path):
    before = shm_entries()
    # Every replica raises when its count reaches 420: in the 53rd batch, after update 52
    # (the periodic checkpoint was at update 50).
    fit = _Fit(
        tmp_path,
        *COUNTING,
        '--model.init_args.env_kwargs={"max_count": 1000, "fail_at": 420}',
        "--model.init_args.total_frames=100000",
    )
    code, stderr = fit.finish(timeout=120)
    assert code == 1
    assert "hts-rl: error: Environment replica" in stderr
    assert "CountingEnv failing on purpose at count 420" in stderr
    (checkpoint,) = tmp_path.glob("runs/**/last.ckpt")
    assert _global_step(checkpoint) == 52  # the last whole update, intact, loadable
    assert fit.run_status() == "FAILED"
    assert fit.descendants() == []
    # Shared tensors and memory blocks. Named semaphores ("sem.mp-*") are left out: other
    # multiprocessing programs on the machine make them too, and ours are unlinked by the
    # run's resource tracker, which is among the descendants checked above.
    assert {e for e in shm_entries() - before if not e.startswith("sem.")} == set()


def test_with_on_env_error_restart_the_run_goes_on_and_counts_the_restarts(tmp_path):
    # The same failing env: each replica now restarts at count 420 (every 419 steps after
    # the first failure) and training runs to its end: 80 updates of 8 steps per replica.
    fit = _Fit(
        tmp_path,
        *COUNTING,
        '--model.init_args.env_kwargs={"max_count": 1000, "fail_at": 420}',
        "--model.init_args.total_frames=1280",
        "--model.init_args.on_env_error=restart",
        "--trainer.log_every_n_steps=1",
    )
    code, stderr = fit.finish(timeout=120)
    assert code == 0, stderr[-3000:]
    assert stderr.count("raised and was restarted") == 2  # 640 steps: one restart each
    assert "Environment replica 1 raised and was restarted" in stderr
    assert fit.run_status() == "FINISHED"
    client = MlflowClient(fit.uri)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    history = client.get_metric_history(run.info.run_id, "collector/env_restarts")
    by_frame = {m.step: m.value for m in history}
    # Both replicas fail in their 420th step: in update 53 (steps 416-423).
    assert by_frame[52 * 16] == 0.0
    assert by_frame[53 * 16] == 2.0
    assert by_frame[80 * 16] == 2.0
    assert fit.descendants() == []


def test_a_killed_worker_ends_the_run_with_its_checkpoint_and_no_process_left(tmp_path):
    fit = _Fit(
        tmp_path,
        *COUNTING,
        '--model.init_args.env_kwargs={"max_count": 1000, "max_delay": 0.002}',
        "--model.init_args.total_frames=1000000",
    )
    checkpoint = fit.wait_for_checkpoint()
    # Workers are forked by the forkserver, a child of the main process.
    (server,) = [
        p for p in psutil.Process(fit.process.pid).children() if "forkserver" in p.cmdline()[-1]
    ]
    workers = server.children()
    assert len(workers) == 1
    workers[0].kill()
    code, stderr = fit.finish(timeout=60)
    assert code == 1 and "Collector worker 0 (env replicas 0..1) died" in stderr
    assert _global_step(checkpoint) >= 50
    assert fit.run_status() == "FAILED"
    assert fit.descendants() == []


SIGNAL_RUN = [
    *COUNTING,
    '--model.init_args.env_kwargs={"max_count": 1000, "max_delay": 0.002}',
    f"--model.init_args.total_frames={16 * 400}",
]
_WALL_CLOCK_METRICS = ("perf/fps", "time/wait_for_batch", "time/update")


def _final_state(tmp_path: Path) -> tuple[dict, dict]:
    """The final parameters and every logged metric history but the wall-clock ones."""
    (checkpoint,) = tmp_path.glob("runs/**/last.ckpt")
    parameters = torch.load(checkpoint, map_location="cpu", weights_only=False)["state_dict"]
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    histories = {
        name: [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, name)]
        for name in run.data.metrics
        if name not in _WALL_CLOCK_METRICS
    }
    return parameters, histories


@pytest.fixture(scope="module")
def uninterrupted_run(tmp_path_factory) -> tuple[dict, dict]:
    tmp_path = tmp_path_factory.mktemp("uninterrupted")
    code, stderr = _Fit(tmp_path, *SIGNAL_RUN).finish(timeout=300)
    assert code == 0, stderr[-3000:]
    return _final_state(tmp_path)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_after_the_update_with_a_checkpoint_and_resume_is_exact(
    tmp_path, signum, uninterrupted_run, monkeypatch
):
    args, total = SIGNAL_RUN, 16 * 400
    final_state = tmp_path / "final_state.pt"
    monkeypatch.setenv("HTS_TEST_FINAL_STATE", str(final_state))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    fit = _Fit(tmp_path, *args, "--trainer.callbacks+=tests.final_state.RecordFinalState")
    checkpoint = fit.wait_for_checkpoint()
    fit.process.send_signal(signum)
    code, stderr = fit.finish(timeout=60)
    assert code == 128 + signum, stderr[-3000:]
    assert f"stopped by {signal.Signals(signum).name}" in stderr
    stopped_at = _global_step(checkpoint)
    # At the stop: after the periodic checkpoint of update 50 was read (the stop may land in
    # the wait right after it, where the periodic checkpoint is the stop's state too).
    assert 50 <= stopped_at < 400
    # The module's state at the stop, parameters and optimizer included.
    assert_checkpoint_is(torch.load(checkpoint, weights_only=True), torch.load(final_state))
    monkeypatch.delenv("HTS_TEST_FINAL_STATE")
    assert fit.run_status() == "KILLED"
    assert fit.descendants() == []
    # Resume from it: the same MLflow run goes on to the end.
    resumed = _Fit(tmp_path, *args, "--ckpt_path=last")
    code, stderr = resumed.finish(timeout=300)
    assert code == 0, stderr[-3000:]
    assert resumed.run_status() == "FINISHED"
    client = MlflowClient(resumed.uri)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    frames = [m.step for m in client.get_metric_history(run.info.run_id, "perf/frames")]
    assert frames[-1] == total and frames == sorted(frames)
    # Exact resume: the parameters and the metric histories of an uninterrupted run, bitwise.
    parameters, histories = _final_state(tmp_path)
    expected_parameters, expected_histories = uninterrupted_run
    assert parameters.keys() == expected_parameters.keys()
    for name, value in parameters.items():
        assert torch.equal(value, expected_parameters[name]), f"{name} differs"
    assert histories == expected_histories
    # Not vacuous: the losses of every update (each is logged), and returns of episodes.
    assert len(histories["train/grad_norm"]) == 400
    assert len(histories["rollout/return_last_20"]) > 2


class _PoisonRewards:
    """Makes the rewards of the third batch NaN, as a broken env would."""

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        if batch_idx == 2:
            batch["next", "reward"][:] = float("nan")


def test_a_nan_loss_stops_training_before_the_step():
    from lightning import Callback

    poison = type("Poison", (_PoisonRewards, Callback), {})()
    module = A2C(num_envs=2, num_workers=1, sync_interval=8, total_frames=16 * 10)
    with pytest.raises(FloatingPointError, match="Non-finite loss or gradient at update 2"):
        quiet_trainer(poison).fit(module)
    assert module.updates == 2
    assert all(torch.isfinite(p).all() for p in module.parameters())
    assert worker_processes() == []


# Bad input that a module's constructor refuses: its own message, alone on one line.
_REFUSED_BY_THE_MODULE = [
    ("--model.init_args.env_id=CartPole-v7", "Did you mean one of: CartPole-v1"),
    ("--model.init_args.num_workers=3", "num_envs=8 is not divisible by num_workers=3"),
    (
        (
            "--model.init_args.env_id=no_such_module:make_env",
            "--model.init_args.env_backend=python",
        ),
        "module 'no_such_module' cannot be imported",
    ),
    (
        ("--model.init_args.collector=sync", "--model.init_args.on_env_error=restart"),
        "on_env_error='restart' needs collector='hts'",
    ),
]
# Bad input that jsonargparse refuses while parsing: the key named, in a line and a tip.
_REFUSED_BY_THE_PARSER = [
    ("--model.init_args.num_env=4", "Option 'num_env' is not accepted"),  # unknown key
    ("--model.init_args.num_envs=four", "Parser key \"num_envs\": Expected a <class 'int'>"),
    ("--model.init_args.on_env_error=retry", 'Parser key "on_env_error"'),
]


def _gone(fit: _Fit, timeout: float = 10) -> bool:
    """Whether every process the command started has ended (its forkserver ends after it)."""
    deadline = time.monotonic() + timeout
    while fit.descendants() and time.monotonic() < deadline:
        time.sleep(0.2)
    return fit.descendants() == []


@pytest.mark.parametrize(
    ("override", "message", "ours"),
    [(*case, True) for case in _REFUSED_BY_THE_MODULE]
    + [(*case, False) for case in _REFUSED_BY_THE_PARSER],
)
def test_bad_input_is_named_before_any_process_starts(override, message, ours, tmp_path):
    overrides = [override] if isinstance(override, str) else list(override)
    fit = _Fit(tmp_path, *overrides)
    code, stderr = fit.finish(timeout=120)
    assert code == 2, stderr[-3000:]
    lines = stderr.splitlines()
    assert lines[0].startswith("hts-rl: error: ") and message in lines[0], stderr
    if ours:  # the module's message and nothing else
        assert len(lines) == 1, stderr
    else:  # and where to find the options
        assert len(lines) == 2 and "hts-rl fit --help" in lines[1], stderr
    assert "Does not validate against any of the Union subtypes" not in stderr
    assert "Namespace(" not in stderr and "usage:" not in stderr
    assert not (tmp_path / "runs").exists()
    assert _gone(fit)
