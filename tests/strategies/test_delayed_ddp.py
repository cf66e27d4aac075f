"""The delayed-gradient DDP strategy on CPU with 2 gloo processes (and NCCL where CUDA is)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from lightning.pytorch.strategies import StrategyRegistry

from hts_lightning import A2C, DelayedGradientDDPStrategy
from tests.conftest import marked_env, marked_processes, quiet_trainer
from tests.strategies import ddp_run
from tests.strategies.ddp_run import _Record, module_kwargs

pytestmark = pytest.mark.distributed
SCRIPT = Path(__file__).with_name("ddp_run.py")
ROOT = Path(__file__).parents[2]


def _run(out: Path, *args: str, timeout: float = 180) -> list[dict]:
    """Run ddp_run.py (Lightning launches the other ranks) and load every rank's record."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [torch.load(path) for path in sorted(out.glob("rank*.pt"))]


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory) -> list[dict]:
    records = _run(tmp_path_factory.mktemp("two_ranks"), "--devices", "2")
    assert len(records) == 2  # a record from each rank
    return records


def test_hts_ddp_is_a_registered_ddp_strategy():
    entry = StrategyRegistry["hts_ddp"]
    assert entry["strategy"] is DelayedGradientDDPStrategy
    trainer = quiet_trainer(strategy="hts_ddp", accelerator="cpu", devices=1)
    assert isinstance(trainer.strategy, DelayedGradientDDPStrategy)


def test_parameters_are_identical_across_ranks_after_every_update(two_ranks):
    rank0, rank1 = two_ranks
    assert rank0["world_size"] == 2 and rank0["updates"] == 6
    assert len(rank0["parameters"]) == len(rank1["parameters"]) == 6
    for step0, step1 in zip(rank0["parameters"], rank1["parameters"], strict=True):
        assert torch.equal(step0, step1)


def test_two_ranks_with_half_the_envs_each_match_one_rank_with_all(two_ranks):
    args = SimpleNamespace(
        algorithm="a2c", num_envs=8, num_workers=1, sync_interval=16, updates=6, seed=0, lr=3e-3
    )
    module = A2C(**module_kwargs(args))
    record = _Record()
    quiet_trainer(record).fit(module)
    rank0 = two_ranks[0]
    assert rank0["frames"] == module.frames == 8 * 16 * 6  # frames of every shard
    assert rank0["recent_returns"] == list(module.recent_returns)  # episodes of every shard
    assert len(record.parameters) == len(rank0["parameters"]) == 6
    moved = (record.parameters[-1] - record.parameters[0]).abs().max()
    assert moved > 1e-3  # the updates did change the parameters...
    for one, two in zip(record.parameters, rank0["parameters"], strict=True):
        torch.testing.assert_close(two, one, rtol=0, atol=1e-5)  # ...the same way on 2 ranks


@pytest.mark.parametrize(
    ("algorithm", "action", "continuous", "normalize"),
    [
        ("ppo", "index", "normal", False),
        ("a2c", "multi_index", "normal", False),
        ("ppo", "multi_one_hot", "normal", False),
        ("acktr", "bounded", "normal", False),
        ("ppo", "bounded", "tanh_normal", False),
        # The MuJoCo recipes' set-up: running observation and reward statistics of every shard.
        ("ppo", "unbounded", "normal", True),
    ],
)
def test_each_action_kind_on_two_ranks_matches_one_rank(
    algorithm, action, continuous, normalize, tmp_path
):
    # PPO's minibatches are drawn per rank from its shard: one minibatch, so that N ranks
    # take the step one rank takes (with more, the same algorithm but other samples).
    options = [
        *("--algorithm", algorithm, "--env-id", "tests.collectors.spec_envs:SpecEnv"),
        *("--minibatches", "1"),
        *("--env-kwargs", json.dumps({"action": action, "observation": "vector"})),
        *("--continuous", continuous, "--num-envs", "4", "--sync-interval", "8"),
        *("--updates", "4", "--lr", "1e-3"),
    ]
    if normalize:
        options.append("--normalize")
    rank0, rank1 = _run(tmp_path, "--devices", "2", *options)
    args = ddp_run.parse(["--out", str(tmp_path), *options])
    kwargs = module_kwargs(args)
    if algorithm == "acktr":
        kwargs.pop("lr")
    module = ddp_run.ALGORITHMS[algorithm](**kwargs)
    record = _Record()
    quiet_trainer(record).fit(module)
    assert rank0["frames"] == module.frames == 4 * 8 * 4
    for step0, step1 in zip(rank0["parameters"], rank1["parameters"], strict=True):
        assert torch.equal(step0, step1)
    assert len(record.parameters) == len(rank0["parameters"]) == 4
    assert (record.parameters[-1] - record.parameters[0]).abs().max() > 1e-3
    for one, two in zip(record.parameters, rank0["parameters"], strict=True):
        torch.testing.assert_close(two, one, rtol=0, atol=1e-5)
    # The running statistics (and every replica's return for the reward scale) agree too.
    buffers = dict(module.named_buffers())
    assert rank0["buffers"].keys() == rank1["buffers"].keys() == buffers.keys()
    for name, value in buffers.items():
        assert torch.equal(rank0["buffers"][name], rank1["buffers"][name]), name
        torch.testing.assert_close(rank0["buffers"][name], value, rtol=1e-6, atol=1e-6)
    if normalize:  # rank 1's replicas' returns are in the buffers every rank checkpoints
        assert buffers["reward_scaler.returns"][2:].ne(0).any()


def test_two_identical_two_rank_runs_are_bitwise_identical(two_ranks, tmp_path):
    again = _run(tmp_path, "--devices", "2")
    assert len(again) == 2 and len(again[0]["parameters"]) == len(two_ranks[0]["parameters"])
    for first, second in zip(two_ranks[0]["parameters"], again[0]["parameters"], strict=True):
        assert torch.equal(first, second)


def test_a_two_rank_run_stopped_and_resumed_matches_an_uninterrupted_one(two_ranks, tmp_path):
    """The checkpoint holds every rank's collector (rank 0's alone would restore rank 1's
    replicas from rank 0's states); resumed, both ranks end on the uninterrupted parameters."""
    checkpoints = tmp_path / "checkpoints"
    stopped = subprocess.run(
        [
            *(sys.executable, str(SCRIPT), "--out", str(tmp_path / "stopped"), "--devices", "2"),
            *("--checkpoint-dir", str(checkpoints), "--stop-after", "2"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert "SIGINT: stopping after the current update" in stopped.stdout, stopped.stderr[-3000:]
    assert "Checkpoint written" in stopped.stdout
    saved = torch.load(checkpoints / "last.ckpt", weights_only=False)
    assert saved["hts_progress"]["updates"] == 2
    assert len(saved["hts_collector"]["state"]["replica_states"]) == 8  # both ranks' replicas
    resumed = _run(
        tmp_path / "resumed", "--devices", "2", "--checkpoint-dir", str(checkpoints), "--resume"
    )
    assert len(resumed) == 2
    for rank in resumed:
        assert rank["updates"] == 6 and len(rank["parameters"]) == 4  # updates 3 to 6
        assert torch.equal(rank["parameters"][-1], two_ranks[0]["parameters"][-1])


def test_ppo_with_a_communication_hook_registered_on_cpu(tmp_path):
    rank0, rank1 = _run(tmp_path, "--devices", "2", "--algorithm", "ppo", "--comm-hook")
    # 2 epochs x 2 minibatches per update, 6 updates: one all-reduce per backward at least.
    assert rank0["hook_calls"] >= 2 * 2 * 6 and rank1["hook_calls"] == rank0["hook_calls"]
    assert len(rank0["parameters"]) == len(rank1["parameters"]) == 6
    for step0, step1 in zip(rank0["parameters"], rank1["parameters"], strict=True):
        assert torch.equal(step0, step1)
    assert not torch.equal(rank0["parameters"][0], rank0["parameters"][-1])


def test_acktr_factors_are_averaged_and_identical_on_both_ranks(tmp_path):
    rank0, rank1 = _run(tmp_path, "--devices", "2", "--algorithm", "acktr", "--updates", "4")
    assert rank0["factors"].keys() == rank1["factors"].keys() and rank0["factors"]
    for name, factors in rank0["factors"].items():
        for kind in ("A", "G"):
            assert torch.equal(factors[kind], rank1["factors"][name][kind])
    assert len(rank0["parameters"]) == len(rank1["parameters"]) == 4
    for step0, step1 in zip(rank0["parameters"], rank1["parameters"], strict=True):
        assert torch.equal(step0, step1)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_two_nodes_on_loopback_under_torchrun(two_ranks, tmp_path):
    port = _free_port()
    nodes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--nnodes=2",
                "--nproc_per_node=1",
                f"--node_rank={node}",
                "--master_addr=127.0.0.1",
                f"--master_port={port}",
                str(SCRIPT),
                "--out",
                str(tmp_path),
                "--devices",
                "1",
                "--num-nodes",
                "2",
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for node in range(2)
    ]
    outputs = [node.communicate(timeout=180)[0] for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], outputs[0][-3000:] + outputs[1][-3000:]
    records = [torch.load(path) for path in sorted(tmp_path.glob("rank*.pt"))]
    assert [r["world_size"] for r in records] == [2, 2]
    assert len(records[0]["parameters"]) == len(two_ranks[0]["parameters"]) == 6
    # Two nodes of one process each are the same two ranks as one node with two devices.
    for node_run, device_run in zip(
        records[0]["parameters"], two_ranks[0]["parameters"], strict=True
    ):
        assert torch.equal(node_run, device_run)


def test_num_envs_not_divisible_by_the_ranks_is_a_clear_error(tmp_path):
    env, marker = marked_env()
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path), "--devices", "2", "--num-envs", "3"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "num_envs=3 is not divisible by the 2 ranks" in done.stderr
    assert marked_processes(marker) == []  # the run's processes, orphans included


@pytest.mark.gpu
def test_nccl_ranks_stay_identical(tmp_path):
    devices = min(torch.cuda.device_count(), 2)
    records = _run(tmp_path, "--accelerator", "gpu", "--devices", str(devices))
    assert len(records) == devices
    for record in records[1:]:
        assert len(record["parameters"]) == len(records[0]["parameters"]) == 6
        for mine, first in zip(record["parameters"], records[0]["parameters"], strict=True):
            assert torch.equal(mine, first)


def test_hts_rl_fit_with_hts_ddp_logs_one_run_with_every_shard(tmp_path):
    """The recipe route: `--trainer.strategy hts_ddp --trainer.devices 2`, MLflow by default."""
    import mlflow

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hts_lightning.cli",
            "fit",
            "--config",
            str(ROOT / "recipes" / "cartpole_a2c.yaml"),
            *["--trainer.strategy=hts_ddp", "--trainer.devices=2", "--trainer.accelerator=cpu"],
            *["--model.init_args.num_envs=4", "--model.init_args.num_workers=1"],
            *["--model.init_args.sync_interval=8", "--model.init_args.total_frames=96"],
            *["--trainer.log_every_n_steps=1", "--trainer.enable_progress_bar=false"],
        ],
        cwd=tmp_path,
        env={**os.environ, "MLFLOW_TRACKING_URI": uri},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    client = mlflow.MlflowClient(uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(experiments)
    assert len(runs) == 1  # rank 0 logs; the other rank does not start a run of its own
    run = runs[0]
    assert run.data.tags["hts.world_size"] == "2"
    frames = client.get_metric_history(run.info.run_id, "perf/frames")
    assert [(m.step, m.value) for m in frames] == [(32, 32.0), (64, 64.0), (96, 96.0)]
