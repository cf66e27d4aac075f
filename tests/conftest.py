from __future__ import annotations

import importlib
import os
import subprocess
import sys
import uuid
from pathlib import Path
from types import ModuleType

import psutil
import pytest
import torch


def worker_processes() -> list[psutil.Process]:
    """Live descendants of this process, except multiprocessing's own helpers.

    The forkserver and the resource tracker are started once per interpreter, shared by every
    collector, and end with it; they are not workers.
    """
    alive = []
    for child in psutil.Process().children(recursive=True):
        try:
            command = " ".join(child.cmdline())
            helper = "multiprocessing.forkserver" in command or "resource_tracker" in command
            # Workers forked by the forkserver share its command line but are its children.
            if helper and child.ppid() == os.getpid():
                continue
            if child.status() != psutil.STATUS_ZOMBIE:
                alive.append(child)
        except psutil.NoSuchProcess:
            continue
    return alive


# How each optional package the tests use is installed.
INSTALL_STEPS = {
    "envpool": (
        "`pip install -e .` installs envpool 1.2.5 on Linux x86-64; it has no wheels elsewhere"
    ),
    "gfootball": "the football extra: scripts/install_football.sh .venv",
}


def require_module(name: str) -> ModuleType:
    """The optional package ``name``, imported; where it does not import, the test (or, called
    at a test module's top, the whole module) is skipped, but with the environment variable
    ``CI`` set to ``true`` it fails instead, naming the install step: a broken install must not
    turn CI's tests of that package into skips."""
    try:
        return importlib.import_module(name)
    except ImportError as error:
        message = f"{name} does not import ({error}); install it: {INSTALL_STEPS[name]}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {message}", pytrace=False)
    pytest.skip(message, allow_module_level=True)


# The environment variable that marks every process of one test's run.
RUN_MARK = "HTS_TEST_RUN"


def marked_env(**extra: str) -> tuple[dict[str, str], str]:
    """This process's environment plus ``extra`` and a new unique ``HTS_TEST_RUN`` marker, and
    the marker. Every process a subprocess started with it starts in turn inherits it."""
    marker = uuid.uuid4().hex
    return {**os.environ, **extra, RUN_MARK: marker}, marker


def marked_processes(marker: str, *, exclude: tuple[int, ...] = ()) -> list[psutil.Process]:
    """Live processes (zombies aside) whose environment holds ``HTS_TEST_RUN=marker``.

    A subprocess's descendants, found wherever they are: once the subprocess has ended, its
    orphans are the children of init, not of pytest, and ``worker_processes`` cannot see them.
    """
    found = []
    for process in psutil.process_iter():
        try:
            ours = process.environ().get(RUN_MARK) == marker
            if ours and process.pid not in exclude and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


ROOT = Path(__file__).resolve().parents[1]


def run_script(code: str, path: Path, *, timeout: float) -> subprocess.CompletedProcess:
    """``code`` saved to ``path`` and run as a new user would (``python path``), its output
    captured; the package imported is this checkout's."""
    path.write_text(code)
    return subprocess.run(
        [sys.executable, str(path)],
        cwd=path.parent,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def shm_entries() -> set[str]:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


@pytest.fixture(autouse=True)
def _seed_global_rng(monkeypatch):
    torch.manual_seed(1234)
    # A module's seed defaults to Lightning's global seed: one test's seed_everything must not
    # become the next test's default.
    monkeypatch.delenv("PL_GLOBAL_SEED", raising=False)


@pytest.fixture(autouse=True)
def _forget_mlflow_global_tracking_uri(monkeypatch):
    """MLflow keeps the last tracking URI in a global and in MLFLOW_TRACKING_URI (Lightning's
    MLflow logger sets both): forget the global after each test and put the variable back,
    so that no test logs to the store of an earlier one."""
    original = os.environ.get("MLFLOW_TRACKING_URI")
    monkeypatch.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    yield
    if "mlflow" in sys.modules:
        sys.modules["mlflow"].set_tracking_uri(None)
    if original is not None:
        os.environ["MLFLOW_TRACKING_URI"] = original


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def quiet_trainer(*callbacks, **kwargs):
    """A Trainer for tests: one epoch (the module's total_frames), no logs, bars or files."""
    from lightning import Trainer

    options = dict(
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    options.update(kwargs)
    return Trainer(callbacks=list(callbacks), **options)


def first_batch_keeper():
    """A callback whose ``batch`` becomes a copy of the first batch the module trains on."""
    from lightning import Callback

    class FirstBatch(Callback):
        def on_train_batch_start(self, trainer, module, batch, batch_idx):
            if batch_idx == 0:
                self.batch = batch.clone()

    return FirstBatch()
