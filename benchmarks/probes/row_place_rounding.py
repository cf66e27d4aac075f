"""Which kernels round a row by its place in the call (RESULTS.md, "A replica's row").

HTSCollector's determinism needs a replica's inference row to give the same bits wherever the
replica lands in the chunk. This rolls random chunks by one row and counts the trials whose
rolled output is not the output rolled, for the CartPole recipe's actor under each
``MKL_CBWR`` mode (MKL reads it once, so each mode runs in its own process), and for torch's
elementwise activations at a few (rows, width) shapes. It also times the learner's small
matmul under each mode.

    python -m benchmarks row_place_rounding
"""

from __future__ import annotations

import argparse
import subprocess
import time

from benchmarks.common import records
from benchmarks.common.processes import benchmark

MODES = ("unset", "AUTO", "AUTO,STRICT", "AVX2", "COMPATIBLE")
SHAPES = ((8, 64), (8, 6), (8, 100), (6, 100), (8, 18))


def _actor_and_matmul(trials: int) -> str:
    """One mode's line: the recipe actor's rolled 8-row chunks, and a 2048x64 @ 64x64 time."""
    import torch

    from hts_lightning.envs import make_gym_env
    from hts_lightning.models import make_actor_critic

    torch.set_num_threads(1)
    env = make_gym_env("CartPole-v1")
    torch.manual_seed(0)
    actor = make_actor_critic(env.observation_spec, env.action_spec).get_policy_operator()
    # observation -> features -> logits (the 64 -> 2 head is where MKL rounds by place)
    net = torch.nn.Sequential(actor.module[0].module, actor.module[1].module)
    changed = {shift: 0 for shift in (1, 2, 4)}
    with torch.no_grad():
        for _ in range(trials):
            x = torch.randn(8, 4)
            y = net(x)
            for shift in changed:
                changed[shift] += not torch.equal(net(x.roll(shift, 0)), y.roll(shift, 0))
        a, w = torch.randn(2048, 64), torch.randn(64, 64)
        a @ w
        start = time.perf_counter()
        for _ in range(2000):
            a @ w
        us = (time.perf_counter() - start) / 2000 * 1e6
    shifts = ", ".join(f"by {s}: {n}/{trials}" for s, n in changed.items())
    return f"rolled chunks changed {shifts}; 2048x64 @ 64x64 {us:.0f} us"


def _elementwise(trials: int) -> list[str]:
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    ops = {
        "tanh": torch.tanh,
        "relu": torch.relu,
        "exp": torch.exp,
        "softmax": lambda x: torch.softmax(x, -1),
        "elu": torch.nn.functional.elu,
        "silu": torch.nn.functional.silu,
        "sigmoid": torch.sigmoid,
        "softplus": torch.nn.functional.softplus,
    }
    lines = []
    for rows, width in SHAPES:
        changed = {}
        for name, op in ops.items():
            count = 0
            for _ in range(trials):
                x = 3 * torch.randn(rows, width)
                count += not torch.equal(op(x.roll(1, 0)), op(x).roll(1, 0))
            changed[name] = count
        cells = ", ".join(f"{k} {v}" for k, v in changed.items())
        lines.append(f"| {rows}x{width} | {cells} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--one-mode", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_mode:
        print(_actor_and_matmul(args.trials))
        return
    print("| MKL_CBWR | CartPole actor, 8 rows, 1 thread |\n|---|---|")
    modes = []
    for mode in MODES:
        command, env = benchmark("row_place_rounding", "--one-mode", "--trials", str(args.trials))
        # hts_lightning sets AUTO,STRICT where MKL_CBWR is absent; MKL reads empty as unset.
        env["MKL_CBWR"] = "" if mode == "unset" else mode
        out = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
        print(f"| {mode} | {out.stdout.strip()} |")
        modes.append([mode, out.stdout.strip()])
    print(f"\nRolled by one row, changed trials of {args.trials // 2} (no MKL in these):\n")
    print("| rows x width | ops |\n|---|---|")
    elementwise = _elementwise(args.trials // 2)
    print("\n".join(elementwise))
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in elementwise]
    records.write(
        "row_place",
        title="Do a row's results depend on its place in the batch?",
        claim="probes",
        tables=[{"columns": ["MKL_CBWR", "CartPole actor, 8 rows, 1 thread"], "rows": modes},
                {"columns": ["rows x width", "ops"], "rows": cells}],
        text=[f"Rolled by one row, changed trials of {args.trials // 2} (no MKL in the "
              "second table)."],
    )  # fmt: skip


if __name__ == "__main__":
    main()
