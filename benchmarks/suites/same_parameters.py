"""Bitwise equality of training across two checkouts: an optimization of the update path must
leave every number as it was.

A2C (delayed and current gradient), PPO (current and delayed gradient, several minibatches;
one minibatch with a shared trunk) and ACKTR train 6 updates each on CartPole in one process
(``num_workers=0``: the same batches as with worker processes). ``--save`` writes their
parameters, optimizer states, ``global_step`` and the last update's metrics; ``--compare``
says what differs between two such files. Run ``--save`` once per checkout, from its root
(``python -m`` imports from the working folder first, ``PYTHONPATH`` after it):

    git archive main | tar -x -C /tmp/main
    (cd /tmp/main && python -m benchmarks same_parameters --save /tmp/main.pt)
    python -m benchmarks same_parameters --save /tmp/new.pt
    python -m benchmarks same_parameters --compare /tmp/main.pt /tmp/new.pt
"""

from __future__ import annotations

import argparse

import torch

from benchmarks.common import records

#: Logged per update but timing-dependent: not compared.
TIMED = ("perf/fps", "time/update", "time/wait_for_batch")


def train_all(path: str) -> None:
    from lightning import Trainer

    from hts_lightning import A2C, ACKTR, PPO

    torch.set_num_threads(1)
    common = dict(
        env_id="CartPole-v1",
        num_envs=4,
        num_workers=0,
        sync_interval=16,
        seed=3,
        shared_trunk=False,
        total_frames=64 * 6,
    )
    cases = {
        "a2c": (A2C, {}),
        "a2c_current": (A2C, dict(gradient_mode="current", normalize_advantage=True)),
        "ppo_current": (
            PPO,
            dict(epochs=3, minibatches=2, normalize_advantage=True, lr_schedule="linear"),
        ),
        "ppo_delayed": (
            PPO,
            dict(epochs=2, minibatches=2, gradient_mode="delayed", normalize_advantage=True),
        ),
        "ppo_one_minibatch_shared": (PPO, dict(epochs=4, minibatches=1, shared_trunk=True)),
        "acktr": (ACKTR, {}),
    }
    out = {}
    for name, (cls, kwargs) in cases.items():
        module = cls(**{**common, **kwargs})
        trainer = Trainer(
            max_epochs=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
        )
        trainer.fit(module)
        out[name] = {
            "parameters": {k: v.detach().clone() for k, v in module.state_dict().items()},
            "counts": (trainer.global_step, module.updates),
            # Every metric of the last update (Lightning's callback metrics hold only those
            # a callback reads: none here).
            "metrics": dict(module.last_metrics),
            "optimizer": trainer.optimizers[0].state_dict(),
        }
    torch.save(out, path)
    print(f"saved {sorted(out)} to {path}")


def _optimizer_tensors(state: dict) -> list[torch.Tensor]:
    return [t for s in state["state"].values() for t in s.values() if torch.is_tensor(t)]


def compare(path_a: str, path_b: str) -> bool:
    a, b = torch.load(path_a, weights_only=False), torch.load(path_b, weights_only=False)
    same_everywhere = a.keys() == b.keys()
    rows = []
    for name in a:
        pa, pb = a[name]["parameters"], b[name]["parameters"]
        parameters = list(pa) == list(pb) and all(torch.equal(pa[k], pb[k]) for k in pa)
        ta, tb = _optimizer_tensors(a[name]["optimizer"]), _optimizer_tensors(b[name]["optimizer"])
        optimizer = len(ta) == len(tb) and all(
            torch.equal(x, y) for x, y in zip(ta, tb, strict=True)
        )
        counts = a[name]["counts"] == b[name]["counts"]
        ma, mb = a[name]["metrics"], b[name]["metrics"]
        keys = (ma.keys() | mb.keys()) - set(TIMED)
        metrics = sorted(k for k in keys if ma.get(k) != mb.get(k))
        print(
            f"{name}: parameters bitwise equal {parameters}, optimizer state {optimizer}, "
            f"global_step/updates {a[name]['counts']} equal {counts}, metrics differing {metrics}"
        )
        same_everywhere &= parameters and optimizer and counts and not metrics
        rows.append([name, parameters, optimizer, counts, ", ".join(metrics) or "none"])
    print("bitwise equal" if same_everywhere else "DIFFERENT")
    records.write(
        "same_parameters",
        title="The same parameters, bitwise, before and after a change of the code",
        tables=[{"columns": ["set-up", "parameters equal", "optimizer state equal",
                             "step counts equal", "metrics differing"], "rows": rows}],
        text=[f"6 updates on CartPole per set-up, in one process; compared: {path_a} and "
              f"{path_b} (each written by `--save` from one checkout)."],
    )  # fmt: skip
    return same_everywhere


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", metavar="PATH")
    group.add_argument("--compare", nargs=2, metavar=("A", "B"))
    options = parser.parse_args(argv)
    if options.save:
        train_all(options.save)
    elif not compare(*options.compare):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
