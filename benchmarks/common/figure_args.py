"""The command line every figure script shares: ``--full``, ``--output``, ``--hts-inference``,
``--plot-name`` and one integer option per size."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import torch

from hts_lightning.choices import InferenceMode


def hts_inference_default() -> list[str]:
    """Both HTS inference modes on a CPU-only machine ("auto" is "workers" there); on a GPU
    "auto" is "main"."""
    return ["auto"] if torch.cuda.is_available() else ["auto", "main"]


@dataclass(frozen=True)
class Size:
    """A size option of a figure script: its value by default and with ``--full`` (either may
    be a function of the parsed arguments, for sizes that depend on other options), and what
    it is. The help reads "<what> (default D; F with --full)" unless ``help`` replaces it."""

    default: Any
    full: Any
    what: str = ""
    help: str | None = None

    def help_text(self, name: str) -> str:
        if self.help is not None:
            return self.help
        what = self.what or SIZES.get(name, name)
        return f"{what} (default {self.default}; {self.full} with --full)"


SIZES = {
    "num_envs": "env replicas",
    "num_workers": "worker processes",
    "sync_interval": "steps per replica and batch",
    "batches": "timed batches after the first",
}


def parse_figure_args(
    parser: argparse.ArgumentParser, argv=None, defaults: dict | None = None, **sizes: Size
) -> argparse.Namespace:
    """Add the options every figure script has (:func:`add_common_args`) and one integer option
    per size (``num_envs`` is ``--num-envs``), parse ``argv``, and fill in each size the command
    line left out, in the order given: its ``full`` value with ``--full``, else its default.
    ``defaults`` replace the defaults of options (the common ones included)."""
    for name, size in sizes.items():
        parser.add_argument("--" + name.replace("_", "-"), type=int, help=size.help_text(name))
    add_common_args(parser)
    parser.set_defaults(**(defaults or {}))
    args = parser.parse_args(argv)
    for name, size in sizes.items():
        if getattr(args, name) is None:
            value = size.full if args.full else size.default
            setattr(args, name, value(args) if callable(value) else value)
    return args


def figure_parser(doc: str) -> argparse.ArgumentParser:
    """A parser described by the first line of a script's docstring."""
    return argparse.ArgumentParser(description=doc.split("\n")[0])


def add_common_args(parser) -> None:
    parser.add_argument("--full", action="store_true", help="the full size (a real machine)")
    parser.add_argument("--output", type=Path, help="append a dated section to this file")
    parser.add_argument(
        "--hts-inference",
        nargs="+",
        choices=get_args(InferenceMode),
        default=hts_inference_default(),
        help="HTS runs, one per mode (default: auto and main on CPU, auto on GPU)",
    )
    parser.add_argument(
        "--plot-name", help="file name stem of the plot in benchmarks/plots (default: per script)"
    )
