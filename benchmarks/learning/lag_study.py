"""Lag one against no lag and unbounded lag: return against frames and wall seconds, with seeds.

Each cell (env x algorithm x collector x seed) is one ``hts-rl fit`` process, as a user runs
it: the recipe ``recipes/<env>_<algo>.yaml`` with ``--model.init_args.collector`` set to
``hts`` (HTSCollector, policy lag exactly one), ``sync`` (TorchRL's ``Collector(ParallelEnv)``,
no lag: the paper's A2C/PPO) or ``multi_async`` (``MultiAsyncCollector``, unbounded lag, the
IMPALA-like contender), the seed on ``--seed_everything`` and ``--model.init_args.seed``.
Every collector runs the recipe's own ``env_backend`` (``envpool`` for cartpole_ppo, else
``python``), so the wall seconds of one recipe compare collectors on the same env stack. Each
run trains the recipe's whole frame budget (no early stop) in its own MLflow store; its
per-update ``rollout/return_last_20`` (step = env frames; MLflow's timestamp minus the process
start = wall seconds) goes to ``benchmarks/raw/lag_study/<cell>.csv`` with a ``.json`` beside it
(command, load, process seconds). A cell whose ``.json`` exists is skipped (resumable). Each run
holds the shared CPU lock (``/tmp/hts-cpu.lock``) from its start to its end, one at a time.

A cell that exits non-zero, or runs past ``--cell-timeout`` seconds (then its process group gets
SIGTERM and, after a grace period, SIGKILL: a hung run ends), is recorded as failed: its
``.json`` holds ``"failed"`` (the reason), the updates it logged and its log's tail, and no
``.csv``; ``report`` lists it as a failure, not as a curve, and ``run`` goes on with the next
cell. Delete the ``.json`` to rerun it.

``report`` turns the CSVs into one figure per env and algorithm in ``benchmarks/plots/``
(mean over seeds with a 95% Student-t confidence band, against frames and against wall
seconds) and a markdown table: frames to the threshold per seed, how many seeds reached it,
and the lowest return of the last 10% of the frames ("stays there").

    python -m benchmarks lag_study run --envs cartpole --algos ppo a2c --seeds 1 2 3 4 5 \\
        [--cell-timeout 1800]
    python -m benchmarks lag_study report [--output benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from benchmarks.common import curves, records
from benchmarks.common import report as reporting
from benchmarks.common.processes import ROOT, cpu_lock, hts_fit, log_tail, run_bounded

RAW = ROOT / "benchmarks" / "raw" / "lag_study"
#: env -> (threshold on the 20-episode mean return, level the last 10% must stay above).
ENVS = {"cartpole": (475.0, 400.0), "acrobot": (-100.0, -150.0)}
ALGOS = ("a2c", "ppo", "acktr")
COLLECTORS = {
    "hts": "HTS (lag 1)",
    "sync": "sync (lag 0)",
    "multi_async": "multi_async (unbounded)",
}
COLORS = {"hts": "tab:blue", "sync": "tab:orange", "multi_async": "tab:red"}
METRIC = "rollout/return_last_20"
#: Seconds a timed-out cell's process group gets between SIGTERM and SIGKILL.
KILL_GRACE_S = 30.0


def recipe(env: str, algo: str) -> Path:
    return ROOT / "recipes" / f"{env}_{algo}.yaml"


def cell_name(env: str, algo: str, collector: str, seed: int) -> str:
    return f"{env}_{algo}_{collector}_seed{seed}"


def command(env: str, algo: str, collector: str, seed: int) -> list[str]:
    """The ``hts-rl fit`` command line of one cell."""
    return hts_fit(
        recipe(env, algo),
        f"--model.init_args.collector={collector}",
        "--trainer.enable_progress_bar=false",
        seed=seed,
    )


def read_mlflow_curve(store: Path, started: float) -> list[tuple[int, float, float]]:
    """(frames, wall seconds since ``started``, return) per update of the only run in
    ``store``'s ``hts-rl`` experiment."""
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{store}")
    (run,) = client.search_runs([client.get_experiment_by_name("hts-rl").experiment_id])
    history = client.get_metric_history(run.info.run_id, METRIC)
    return [(m.step, m.timestamp / 1000 - started, m.value) for m in history]


def run_cell(
    env: str,
    algo: str,
    collector: str,
    seed: int,
    *,
    timeout_s: float,
    grace_s: float = KILL_GRACE_S,
) -> None:
    name = cell_name(env, algo, collector, seed)
    meta_path = RAW / f"{name}.json"
    if meta_path.exists():
        print(f"{name}: done before, skipped", flush=True)
        return
    work = Path(tempfile.mkdtemp(prefix=f"lag_study-{name}-"))
    argv = command(env, algo, collector, seed)
    environ = dict(
        os.environ, PYTHONPATH=str(ROOT), MLFLOW_TRACKING_URI=f"sqlite:///{work}/mlflow.db"
    )
    with cpu_lock():  # one measured run at a time, across helpers
        if meta_path.exists():  # another driver ran it while this one waited
            print(f"{name}: done meanwhile, skipped", flush=True)
            return
        started = time.time()
        returncode, failed = run_bounded(
            argv, cwd=work, env=environ, log=work / "log.txt", timeout_s=timeout_s, grace_s=grace_s
        )
        seconds = time.time() - started
        load = os.getloadavg()
    if failed is None and returncode != 0:
        failed = f"hts-rl exited with {returncode}"
    try:
        rows = read_mlflow_curve(work / "mlflow.db", started)
    except Exception as error:  # a failed run may have left no store, or no run in it
        if failed is None:
            raise
        rows = []
        print(f"{name}: no curve in its MLflow store ({error!r})", flush=True)
    meta = {
        "command": argv,
        "process_seconds": round(seconds, 1),
        "load_after": [round(x, 2) for x in load],
        "utc_end": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "machine": reporting.machine_line(),
    }
    if failed is not None:
        meta |= {
            "failed": failed,
            "returncode": returncode,
            "updates_logged": len(rows),
            "last_update": list(rows[-1]) if rows else None,
            "log_tail": log_tail(work / "log.txt"),
        }
    else:
        curves.write_curve(RAW / f"{name}.csv", rows)
    RAW.mkdir(parents=True, exist_ok=True)
    meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    end = rows[-1] if rows else (0, 0.0, float("nan"))
    print(
        f"{name}: {'FAILED (' + failed + '), ' if failed else ''}{seconds:.0f} s, "
        f"{end[0]} frames, return_last_20 {end[2]:.1f}, load {reporting.load_str(load)}",
        flush=True,
    )


def load_cells(
    env: str, algo: str
) -> tuple[dict[str, dict[int, tuple[curves.Curve, dict]]], dict[str, dict]]:
    """The finished cells of ``env`` and ``algo``: collector -> seed -> (curve, meta) of those
    that trained, and cell name -> meta of those recorded as failed."""
    found: dict[str, dict[int, tuple[curves.Curve, dict]]] = {}
    failed: dict[str, dict] = {}
    for collector in COLLECTORS:
        for meta_path in sorted(RAW.glob(f"{env}_{algo}_{collector}_seed*.json")):
            seed = int(meta_path.stem.rpartition("_seed")[2])
            meta = json.loads(meta_path.read_text())
            if "failed" in meta:
                failed[meta_path.stem] = meta
                continue
            curve = curves.read_curve(meta_path.with_suffix(".csv"))
            found.setdefault(collector, {})[seed] = (curve, meta)
    return found, failed


def failure_lines(failed: dict[str, dict]) -> list[str]:
    """One line per failed cell: why, after how long, how far it got."""
    lines = []
    for name, meta in failed.items():
        last = meta.get("last_update")
        got = f"last update at {last[0]:,} frames, return {last[2]:.1f}" if last else "no update"
        lines.append(
            f"- FAILED `{name}`: {meta['failed']} after {meta['process_seconds']:.0f} s "
            f"({meta['updates_logged']} updates logged, {got}; load {meta['load_after'][0]:.1f})"
        )
    return lines


def total_frames(env: str, algo: str) -> int:
    return int(yaml.safe_load(recipe(env, algo).read_text())["model"]["init_args"]["total_frames"])


def plot(env: str, algo: str, cells: dict, threshold: float) -> Path:
    plt = reporting.pyplot()
    fig, (by_frames, by_wall) = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    frames_grid = np.linspace(0, total_frames(env, algo), 201)
    longest = max(c.wall_s[-1] for runs in cells.values() for c, _ in runs.values())
    wall_grid = np.linspace(0, longest, 201)
    for collector, runs in cells.items():
        for ax, grid, x in ((by_frames, frames_grid, "frames"), (by_wall, wall_grid, "wall_s")):
            matrix = np.array(
                [curves.on_grid(getattr(c, x), c.returns, grid) for c, _ in runs.values()]
            )
            mean, half = curves.mean_ci(matrix)
            color = COLORS[collector]
            ax.plot(grid, mean, color=color, label=f"{COLLECTORS[collector]}, {len(runs)} seeds")
            ax.fill_between(grid, mean - half, mean + half, color=color, alpha=0.2, lw=0)
    for ax in (by_frames, by_wall):
        ax.axhline(threshold, color="gray", lw=0.8)
    by_frames.set_xlabel("env frames")
    by_wall.set_xlabel("wall seconds from process start (2 cores, shared)")
    by_frames.set_ylabel("mean return of the last 20 episodes")
    by_frames.set_title(f"{algo.upper()}, {env}: mean and 95% CI over seeds, per frame")
    by_wall.set_title("per wall second (a seed's curve ends with its run)")
    by_wall.legend(fontsize=8)
    reporting.PLOTS.mkdir(exist_ok=True)
    path = reporting.PLOTS / f"lag_study_{env}_{algo}.png"
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def table(env: str, algo: str, cells: dict) -> list[str]:
    threshold, stay = ENVS[env]
    frames = total_frames(env, algo)
    rows = []
    for collector, runs in cells.items():
        hits = {s: curves.first_reach(c, threshold) for s, (c, _) in runs.items()}
        tails = {s: curves.tail_min(c, frames) for s, (c, _) in runs.items()}
        reached = [h for h in hits.values() if h]
        per_seed = ", ".join(
            f"{s}: {h[0] / 1000:.1f}k" if h else f"{s}: -" for s, h in sorted(hits.items())
        )
        stays = sum(t > stay for t in tails.values())
        loads = [m["load_after"][0] for _, m in runs.values()]
        rows.append(
            [
                COLLECTORS[collector],
                f"{len(reached)}/{len(runs)}",
                f"{statistics.median(h[0] for h in reached) / 1000:.1f}k" if reached else "-",
                f"{statistics.median(h[1] for h in reached):.0f}" if reached else "-",
                per_seed,
                f"{stays}/{len(runs)}",
                f"{statistics.fmean(c.returns[-1] for c, _ in runs.values()):.1f}",
                f"{statistics.median(m['process_seconds'] for _, m in runs.values()):.0f}",
                f"{min(loads):.1f}-{max(loads):.1f}",
            ]
        )
    numbers = (
        f"reached {threshold:g}",
        "median frames",
        "median wall s",
        f"frames to {threshold:g} per seed",
        f"last 10% > {stay:g}",
        "mean final return",
        "median run s",
        "load (1 min)",
    )
    return reporting.markdown_table(["collector", *numbers], rows, right=numbers[:3] + numbers[4:])


def report(args: argparse.Namespace) -> None:
    sections, plots, runs = [], [], []
    for env in ENVS:
        for algo in ALGOS:
            cells, failed = load_cells(env, algo)
            if not cells and not failed:
                continue
            runs += [meta for seeds in cells.values() for _, meta in seeds.values()]
            runs += failed.values()
            sections += [f"**{env} {algo}** ({total_frames(env, algo):,} frames)", ""]
            if cells:
                plots.append(plot(env, algo, cells, ENVS[env][0]))
                sections += table(env, algo, cells)
                sections += ["", f"![{env} {algo}](plots/{plots[-1].name})", ""]
            if failed:
                sections += [*failure_lines(failed), ""]
    if runs:
        utc, machine, _ = records.provenance(runs)
        machine_line = f"{machine} (the cells', {utc} UTC)"
    else:
        machine_line = "no cell recorded"
    parts = [
        "### Lag study: HTS (lag 1) against sync (lag 0) and multi_async",
        "",
        f"- machine: {machine_line}",
        f"- command: `{reporting.command_line()}`; each cell: `hts-rl fit --config "
        "recipes/<env>_<algo>.yaml --seed_everything=S --model.init_args.seed=S "
        "--model.init_args.collector=C` (every collector on the recipe's `env_backend`), one "
        "at a time under the shared CPU lock; raw curves in `raw/lag_study/`",
        "- thresholds: "
        + "; ".join(
            f"{e} {t:g} (stays: last 10% of the frames above {s:g})" for e, (t, s) in ENVS.items()
        ),
        "",
        *sections,
    ]
    # the record's date, machine and load are the cells', not this report's
    reporting.emit("\n".join(parts), args.output, plots=plots, runs=runs)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    run = sub.add_parser("run", help="run the missing cells, in order (env, algo, seed, collector)")
    run.add_argument("--envs", nargs="+", choices=list(ENVS), default=["cartpole"])
    run.add_argument("--algos", nargs="+", choices=ALGOS, default=["ppo", "a2c"])
    run.add_argument("--collectors", nargs="+", choices=list(COLLECTORS), default=list(COLLECTORS))
    run.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    run.add_argument(
        "--cell-timeout",
        type=float,
        default=1800.0,
        help="seconds a cell may run before it is ended and recorded as failed (default 1800: "
        "~3x a Python-env CartPole run at load 5 on 2 cores)",
    )
    rep = sub.add_parser("report", help="figures and tables from benchmarks/raw/lag_study")
    rep.add_argument("--output", type=Path, help="append the section to this file")
    args = parser.parse_args(argv)
    if args.action == "report":
        report(args)
        return
    for env in args.envs:
        for algo in args.algos:
            if not recipe(env, algo).exists():
                raise SystemExit(
                    f"No recipe {recipe(env, algo)}: choose --algos among those with one."
                )
    for env in args.envs:
        for algo in args.algos:
            for seed in args.seeds:
                for collector in args.collectors:
                    run_cell(env, algo, collector, seed, timeout_s=args.cell_timeout)


if __name__ == "__main__":
    main()
