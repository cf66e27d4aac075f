"""The Nature CNN's memory layout on the CPU: channels-first (NCHW) against channels-last.

``NatureCNN`` hands its convolutions channels-last frames. This times the two layouts on the
same weights and frames, alternating, in one process: the learner's forward and backward of a
PPO minibatch (512 frames of 4 x 84 x 84, the Pong recipe's) and the collector's inference of
one chunk (8 frames, no gradient). Reported: the median wall and CPU seconds of each, and
their ratio (channels-last / NCHW), with the thread count and the load.

    flock /tmp/hts-cpu.lock python -m benchmarks conv_layout --threads 1
    flock /tmp/hts-cpu.lock python -m benchmarks conv_layout --threads 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from benchmarks.common import records
from hts_lightning.models import NatureCNN


class _ChannelsFirst(NatureCNN):
    """The trunk as it was before: frames go to the convolutions channels-first."""

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        x = frames.reshape(-1, *frames.shape[-3:]).float() / 255.0
        return self.head(self.convs(x)).reshape(*frames.shape[:-3], -1)


def _timed(call) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return time.perf_counter() - wall, time.process_time() - cpu


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--repeats", type=int, default=8, help="timed calls per layout and task")
    options = parser.parse_args(argv)
    torch.set_num_threads(options.threads)
    torch.manual_seed(0)
    layouts = {"NCHW": _ChannelsFirst(), "channels-last": NatureCNN()}
    layouts["channels-last"].load_state_dict(layouts["NCHW"].state_dict())
    frames = torch.randint(0, 256, (512, 4, 84, 84), dtype=torch.uint8)
    tasks = {
        "learner: forward + backward, 512 frames": lambda net: net(frames).sum().backward(),
        "collector: inference, 8 frames": lambda net: torch.no_grad()(net)(frames[:8]),
    }
    rows = []
    for task, call in tasks.items():
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in layouts}
        for repeat in range(options.repeats + 1):
            for name, net in layouts.items():
                measured = _timed(lambda net=net, call=call: call(net))
                if repeat:  # the first call of each warms its kernels up
                    times[name].append(measured)
        wall = {n: statistics.median(t[0] for t in v) for n, v in times.items()}
        cpu = {n: statistics.median(t[1] for t in v) for n, v in times.items()}
        print(
            f"{task}, {options.threads} thread(s): "
            + ", ".join(
                f"{n} {wall[n] * 1000:.1f} ms wall / {cpu[n] * 1000:.1f} ms CPU" for n in wall
            )
            + f"; channels-last / NCHW: wall {wall['channels-last'] / wall['NCHW']:.2f}, "
            f"CPU {cpu['channels-last'] / cpu['NCHW']:.2f}; "
            f"load {'/'.join(f'{x:.2f}' for x in os.getloadavg())}",
            flush=True,
        )
        rows += [[task, name, f"{wall[name] * 1000:.1f}", f"{cpu[name] * 1000:.1f}"]
                 for name in wall]  # fmt: skip
    records.write(
        f"conv_layout_{options.threads}threads",
        title=f"Nature CNN memory layout, {options.threads} torch thread(s)",
        claim="probes",
        tables=[{"columns": ["task", "layout", "ms wall", "ms CPU"], "rows": rows}],
        text=[f"Median of {options.repeats} timed calls after one warm-up call each."],
    )  # fmt: skip


if __name__ == "__main__":
    main()
