"""Does a recipe's network stay sighted? Short fits, then how much its trunk still sees.

A policy whose trunk features no longer vary with the observation acts the same everywhere:
its entropy stays at the maximum and it cannot learn, however long it trains (the Pong A2C
recipe under Adam, when its value loss did not reach the trunk: -20.1 at 900k agent steps,
entropy ln 6). For each configuration (the
recipe with ``K=V`` overrides of its model arguments) this fits the recipe's module for
``--updates`` updates from the same seed under the shared CPU lock and, at 1/8, 1/4, 1/2 and
all of them, measures the trunk's features on the same 400 frames of a random policy: the
share of features that are non-zero, the number of units active on any frame, and the mean
over units of their standard deviation over the frames (0: blind).

    python -m benchmarks blind_trunk recipes/atari/pong_a2c.yaml --updates 400 \\
        --configs "" "orthogonal_init=true" "optimizer=rmsprop_tf orthogonal_init=true"
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
import yaml

from benchmarks.common import records
from benchmarks.common.processes import cpu_lock


def random_policy_frames(env_id: str, env_backend: str, env_kwargs: dict, count: int = 400):
    """``count`` observations of a seeded random policy (one-hot discrete actions)."""
    from hts_lightning.envs import env_factory

    env = env_factory(env_id, backend=env_backend, **env_kwargs)()
    env.set_seed(0)
    actions, generator = env.action_spec.shape[-1], torch.Generator().manual_seed(0)
    td, frames = env.reset(), []
    for _ in range(count):
        action = torch.randint(actions, (), generator=generator)
        td["action"] = torch.nn.functional.one_hot(action, actions)
        stepped, td = env.step_and_maybe_reset(td)
        frames.append(stepped["next", "observation"])
    env.close()
    return torch.stack(frames)


def sight(module, frames: torch.Tensor) -> tuple[float, int, float]:
    """(share of non-zero features, units active on any frame, mean std over frames)."""
    with torch.no_grad():
        features = module.actor.module[0].module(frames)
    return (
        float((features != 0).float().mean()),
        int((features > 0).any(0).sum()),
        float(features.std(0).mean()),
    )


def fit_and_watch(recipe: dict, overrides: dict, updates: int, frames) -> list[tuple]:
    """The recipe's module fitted ``updates`` updates; its sight at 0 and at the marks."""
    import lightning

    import hts_lightning

    class_name = recipe["model"]["class_path"].rpartition(".")[2]
    lightning.seed_everything(recipe.get("seed_everything", 0))
    module = getattr(hts_lightning, class_name)(**{**recipe["model"]["init_args"], **overrides})
    marks = {updates // 8, updates // 4, updates // 2, updates}
    seen = [(0, *sight(module, frames))]

    class Watch(lightning.Callback):
        def on_train_batch_end(self, trainer, pl_module, *args):
            if pl_module.updates in marks:
                seen.append((pl_module.updates, *sight(pl_module, frames)))

    lightning.Trainer(
        max_steps=updates,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[Watch()],
    ).fit(module)
    return seen


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("recipe", type=Path)
    parser.add_argument("--updates", type=int, default=400)
    parser.add_argument(
        "--configs", nargs="+", default=[""], help='space-separated K=V overrides each; "": none'
    )
    args = parser.parse_args(argv)
    recipe = yaml.safe_load(args.recipe.read_text())
    init = recipe["model"]["init_args"]
    rows, started = [], time.time()
    with cpu_lock():
        frames = random_policy_frames(
            init["env_id"], init.get("env_backend", "python"), init.get("env_kwargs", {})
        )
        for config in args.configs:
            overrides = {k: yaml.safe_load(v) for k, v in (o.split("=", 1) for o in config.split())}
            for updates, share, units, spread in fit_and_watch(
                recipe, overrides, args.updates, frames
            ):
                rows.append(
                    [config or "(the recipe)", updates, f"{share:.3f}", units, f"{spread:.2e}"]
                )
                print(*rows[-1], sep="  ", flush=True)
    records.write(
        f"blind_trunk_{args.recipe.stem}",
        title=f"Does {args.recipe.name}'s trunk still see? {args.updates} updates",
        claim="probes",
        tables=[{"columns": ["configuration", "updates", "non-zero features", "units active",
                             "std over frames"], "rows": rows}],
        text=[f"{len(args.configs)} configurations, {time.time() - started:.0f} s; the features "
              "of the module's trunk on 400 frames of a seeded random policy."],
    )  # fmt: skip


if __name__ == "__main__":
    main()
