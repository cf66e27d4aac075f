"""Start-up: seconds from ``hts-rl fit --config recipes/cartpole_ppo.yaml`` starting to its
first training batch, beside the imports alone (the floor no deferral can cut).

Each run is a fresh process in one working folder (its MLflow database made by an untimed
first run, as for a user's second run), timed from just before the process is started to the
wall-clock time a callback prints at the first batch (the run then stops after that update).
Contenders alternate: ``fit``; ``imports``: ``import torch, tensordict, torchrl, lightning,
mlflow`` and exit; ``python``: the interpreter alone.

    flock /tmp/hts-cpu.lock python -m benchmarks startup_time --repeats 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lightning import Callback

from benchmarks.common import records
from benchmarks.common.processes import ROOT, hts_fit

_IMPORTS = "import torch, tensordict, torchrl, lightning, mlflow"


class FirstBatch(Callback):
    """Prints the wall-clock time at the first training batch and stops after it."""

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        if batch_idx == 0:
            print(f"first batch at {time.time():.3f}", flush=True)

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        trainer.should_stop = True


def _command(contender: str) -> list[str]:
    if contender == "python":
        return [sys.executable, "-c", "pass"]
    if contender == "imports":
        return [sys.executable, "-c", _IMPORTS]
    return hts_fit(
        "recipes/cartpole_ppo.yaml",
        "--trainer.callbacks+=startup.FirstBatch",
        "--trainer.enable_progress_bar=false",
    )


def _run(contender: str, work: Path) -> float:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "benchmarks")]))
    started = time.time()
    done = subprocess.run(_command(contender), cwd=work, env=env, capture_output=True, text=True)
    ended = time.time()
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit(f"{contender} exited with {done.returncode}")
    for line in done.stdout.splitlines():
        if line.startswith("first batch at "):
            return float(line.split()[-1]) - started
    return ended - started


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="startup-"))
    _run("fit", work)  # makes the MLflow database, untimed
    contenders = ["fit", "imports", "python"]
    seconds: dict[str, list[float]] = {c: [] for c in contenders}
    for repeat in range(args.repeats):
        for contender in contenders if repeat % 2 == 0 else contenders[::-1]:
            load = os.getloadavg()[0]
            seconds[contender].append(_run(contender, work))
            print(f"{contender}: {seconds[contender][-1]:.2f} s (load {load:.2f})", flush=True)
    rows = []
    for contender, values in seconds.items():
        print(
            f"{contender}: median {statistics.median(values):.2f} s "
            f"({', '.join(f'{v:.2f}' for v in values)})"
        )
        rows.append([contender, f"{statistics.median(values):.2f}",
                     ", ".join(f"{v:.2f}" for v in values)])  # fmt: skip
    print(f"load average at the end: {'/'.join(f'{x:.2f}' for x in os.getloadavg())}")
    records.write(
        "startup",
        title="Start-up: `hts-rl fit` to its first batch, against its imports and bare Python",
        claim="end_to_end",
        tables=[{"columns": ["contender", "median s", "runs (s)"], "rows": rows}],
        text=["fit: `hts-rl fit --config recipes/cartpole_ppo.yaml` from process start to its "
              "first batch; imports: the same process's imports alone; python: an empty "
              "interpreter. Contenders alternate."],
    )  # fmt: skip


if __name__ == "__main__":
    main()
