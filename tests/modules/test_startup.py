"""Start-up: what each process imports, and what a default run prints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_HEAVY = ("torch", "lightning", "mlflow", "torchmetrics", "scipy")


def _loaded_after(statement: str) -> list[str]:
    code = f"import sys\n{statement}\nprint(sorted(m for m in {_HEAVY!r} if m in sys.modules))"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    return eval(done.stdout.strip().splitlines()[-1])


def test_the_command_line_loads_no_library_before_a_command_needs_it():
    assert _loaded_after("import hts_lightning.cli") == []
    assert _loaded_after("import hts_lightning") == []


def test_a_worker_process_imports_neither_lightning_nor_mlflow():
    # What the collectors' forkserver preloads, and so what every worker holds.
    from hts_lightning.collectors.backends.pipes import PRELOAD

    assert _loaded_after(f"import {PRELOAD}") == ["torch"]
    # hts-rl starts the forkserver early with the same preload, without importing torch.
    assert f'"{PRELOAD}"' in (ROOT / "hts_lightning/cli.py").read_text()


def test_a_default_fit_prints_our_lines_and_no_other_librarys_notes(tmp_path):
    command = [
        sys.executable,
        "-m",
        "hts_lightning.cli",
        "fit",
        "--config",
        str(ROOT / "recipes/cartpole_ppo.yaml"),
        "--model.init_args.total_frames=512",  # 2 updates, 2 worker processes
        "--trainer.enable_progress_bar=false",
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        command, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=240
    )
    assert done.returncode == 0, done.stderr[-2000:]
    console = done.stdout + done.stderr
    assert "MLflow run" in done.stdout and "Last checkpoint:" in done.stdout
    noises = ("unmaintained", "Tip:", "Deprecat", "deprecated", "Warning", "INFO", "not found")
    for noise in noises:
        assert noise not in console, console
