"""One training run for the distributed tests; every rank writes what it saw to --out.

Run directly (Lightning's own launcher starts the other ranks) or under torchrun (the rank
comes from its environment). Not a test module: tests/strategies/test_delayed_ddp.py runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path

import torch
from lightning import Callback, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

from hts_lightning import A2C, ACKTR, PPO, DelayedGradientDDPStrategy
from hts_lightning.callbacks import StopOnSignal

ALGORITHMS = {"a2c": A2C, "ppo": PPO, "acktr": ACKTR}
HOOK_CALLS = [0]


def counting_allreduce(process_group, bucket):
    """DDP's default all-reduce, counted: shows that a hook registered on CPU runs."""
    HOOK_CALLS[0] += 1
    return default_hooks.allreduce_hook(process_group, bucket)


def flat_parameters(module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in module.loss_module.parameters()]).clone()


class _InterruptAfter(Callback):
    """Ctrl-C (on rank 0) during update ``update``: the run stops after it."""

    def __init__(self, update: int):
        self.update = update

    def on_train_batch_start(self, trainer, module, *args) -> None:
        if module.updates == self.update - 1 and trainer.is_global_zero:
            os.kill(os.getpid(), signal.SIGINT)


class _Record(Callback):
    def __init__(self):
        self.parameters = []

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.parameters.append(flat_parameters(module))


def module_kwargs(args) -> dict:
    kwargs = dict(
        env_id=getattr(args, "env_id", "CartPole-v1"),
        num_envs=args.num_envs,
        num_workers=args.num_workers,
        sync_interval=args.sync_interval,
        total_frames=args.num_envs * args.sync_interval * args.updates,
        seed=args.seed,
        shared_trunk=False,
        normalize_advantage=True,
        lr=args.lr,
        env_backend=getattr(args, "env_backend", "python"),
    )
    if getattr(args, "env_kwargs", None):
        kwargs.update(
            env_kwargs=json.loads(args.env_kwargs),
            continuous=args.continuous,
            normalize_observations=args.normalize,
            normalize_reward=args.normalize,
        )
    if args.algorithm == "ppo":
        kwargs.update(epochs=2, minibatches=getattr(args, "minibatches", 2))
    return kwargs


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--algorithm", default="a2c", choices=sorted(ALGORITHMS))
    parser.add_argument("--accelerator", default="cpu")
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--num-nodes", type=int, default=1)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--num-workers", type=int, default=1)
    parser.add_argument("--sync-interval", type=int, default=16)
    parser.add_argument("--updates", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--comm-hook", action="store_true")
    parser.add_argument("--env-backend", default="python", choices=("python", "envpool"))
    parser.add_argument("--env-id", default="CartPole-v1")
    parser.add_argument("--env-kwargs", help="JSON keyword arguments of the env factory")
    parser.add_argument("--continuous", default="normal")
    parser.add_argument("--minibatches", type=int, default=2, help="PPO's, per epoch")
    parser.add_argument("--normalize", action="store_true", help="observations and rewards")
    parser.add_argument("--checkpoint-dir", help="write last.ckpt here (at a stop, at the end)")
    parser.add_argument("--stop-after", type=int, help="Ctrl-C after this many updates")
    parser.add_argument("--resume", action="store_true", help="from checkpoint-dir/last.ckpt")
    return parser.parse_args(argv)


def main(argv: list[str]) -> None:
    args = parse(argv)
    cls = ALGORITHMS[args.algorithm]
    kwargs = module_kwargs(args)
    if args.algorithm == "acktr":
        kwargs.pop("lr")
    module = cls(**kwargs)
    record = _Record()
    strategy = DelayedGradientDDPStrategy(
        ddp_comm_hook=counting_allreduce if args.comm_hook else None,
        process_group_backend="gloo" if args.accelerator == "cpu" else "nccl",
    )
    callbacks = [record]
    if args.checkpoint_dir:
        callbacks += [ModelCheckpoint(dirpath=args.checkpoint_dir, save_last=True), StopOnSignal()]
    if args.stop_after:
        callbacks.append(_InterruptAfter(args.stop_after))
    trainer = Trainer(
        accelerator=args.accelerator,
        devices=args.devices,
        num_nodes=args.num_nodes,
        strategy=strategy,
        max_epochs=1,
        logger=False,
        enable_checkpointing=bool(args.checkpoint_dir),
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=callbacks,
    )
    resume = Path(args.checkpoint_dir, "last.ckpt") if args.resume else None
    trainer.fit(module, ckpt_path=resume)
    result = {
        "world_size": trainer.world_size,
        "parameters": record.parameters,
        "recent_returns": list(module.recent_returns),
        "frames": module.frames,
        "updates": module.updates,
        "hook_calls": HOOK_CALLS[0],
        "buffers": {k: v.clone() for k, v in module.named_buffers()},
    }
    if args.algorithm == "acktr":
        factors = module.optimizers().optimizer.factors
        result["factors"] = {n: {k: t.clone() for k, t in f.items()} for n, f in factors.items()}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.save(result, out / f"rank{trainer.global_rank}.pt")


if __name__ == "__main__":
    main(sys.argv[1:])
