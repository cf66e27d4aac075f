"""How long would a long learning run take here? A short measured ``hts-rl fit`` of a recipe.

Runs the recipe as a user would (``hts-rl fit --config R``, MLflow, checkpoints) for
``--minutes`` of training (Lightning's ``max_time``) under the shared CPU lock, reads the
run's ``perf/frames`` history from its MLflow store (one value per update, MLflow's
timestamps), and prints the steady-state frames/s (from the end of the first update to the
last, so start-up and the first batch are left out) and the wall time that ``--frames`` would
need at that rate. The number is for this machine and its load at the time (printed).

    python -m benchmarks long_run_estimate recipes/atari/pong_ppo.yaml --frames 1000000 10000000
    python -m benchmarks long_run_estimate recipes/atari/pong_ppo_8envs.yaml --set collector=sync
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks.common import records
from benchmarks.common.processes import ROOT, cpu_lock, hts_fit


def steady_rate(history: list[tuple[int, float]]) -> float:
    """Frames per second between the first and the last ``(frames, unix seconds)`` point."""
    if len(history) < 2:
        raise ValueError("fewer than two updates were logged: give the run more --minutes.")
    (f0, t0), (f1, t1) = history[0], history[-1]
    return (f1 - f0) / (t1 - t0)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("recipe", type=Path)
    parser.add_argument("--minutes", type=int, default=1)
    parser.add_argument("--frames", type=float, nargs="+", default=[1e6])
    parser.add_argument(
        "--set", nargs="*", default=[], metavar="K=V", help="model overrides: collector=sync"
    )
    args = parser.parse_args(argv)
    args.set = [f"--model.init_args.{option}" for option in args.set]
    work = Path(tempfile.mkdtemp(prefix="long_run_estimate-"))
    command = hts_fit(
        args.recipe.resolve(),
        f"--trainer.max_time=00:00:{args.minutes:02d}:00",
        "--trainer.enable_progress_bar=false",
        *args.set,
    )
    environ = dict(
        os.environ, PYTHONPATH=str(ROOT), MLFLOW_TRACKING_URI=f"sqlite:///{work}/mlflow.db"
    )
    with cpu_lock():
        started = time.time()
        with (work / "log.txt").open("w") as log:
            code = subprocess.call(command, cwd=work, env=environ, stdout=log, stderr=log)
        seconds = time.time() - started
        load = os.getloadavg()
    if code != 0:
        raise SystemExit(f"hts-rl exited with {code}; see {work / 'log.txt'}")
    from mlflow import MlflowClient

    client = MlflowClient(environ["MLFLOW_TRACKING_URI"])
    (run,) = client.search_runs([client.get_experiment_by_name("hts-rl").experiment_id])
    points = client.get_metric_history(run.info.run_id, "perf/frames")
    history = [(int(m.value), m.timestamp / 1000) for m in points]
    rate = steady_rate(history)
    print(
        f"{args.recipe}: {len(history)} updates, {history[-1][0]:,} frames in a "
        f"{seconds:.0f} s process; steady {rate:.0f} frames/s; load "
        f"{'/'.join(f'{x:.2f}' for x in load)}; {' '.join(args.set)}"
    )
    for frames in args.frames:
        print(f"  {frames:,.0f} frames: {frames / rate / 3600:.1f} h at that rate")
    # One record per recipe and overrides (collector=sync: "_collector_sync").
    overrides = re.sub(
        r"\W+", "_", "".join(f"_{o.removeprefix('--model.init_args.')}" for o in args.set)
    )
    records.write(
        f"long_run_estimate_{Path(args.recipe).stem}{overrides}",
        title=f"How long a long run of {Path(args.recipe).name} takes here"
        + "".join(f", {o.removeprefix('--model.init_args.')}" for o in args.set),
        claim="probes",
        tables=[{"columns": ["frames", "hours at the steady rate"],
                 "rows": [[f"{f:,.0f}", f"{f / rate / 3600:.1f}"] for f in args.frames]}],
        text=[f"Steady {rate:.0f} frames/s over {history[-1][0]:,} frames of a {seconds:.0f} s "
              f"process; overrides: {' '.join(args.set) or 'none'}."],
    )  # fmt: skip


if __name__ == "__main__":
    main()
