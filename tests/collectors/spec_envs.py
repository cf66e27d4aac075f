"""Envs and policies of every spec kind a TorchRL user brings, for the conformance tests.

:class:`SpecEnv` takes its action and observation specs by name. Its trajectory is a
deterministic function of its seed and the actions it receives: the reward is a number read
off the action (so a test can tell that the env got the action that was stored), and the
next observation follows the action, so a different action anywhere changes what follows.
"""

from __future__ import annotations

import torch
import torch.distributions as D
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import NormalParamExtractor, TensorDictModule, TensorDictSequential
from torch import nn
from torchrl.data import (
    Bounded,
    Categorical,
    Composite,
    MultiCategorical,
    MultiOneHot,
    OneHot,
    Unbounded,
)
from torchrl.envs import EnvBase
from torchrl.modules import ProbabilisticActor, TanhNormal
from torchrl.modules.distributions import OneHotCategorical

ACTIONS = {
    "index": lambda: Categorical(4),  # shape (): TorchRL's usual discrete encoding
    "one_hot": lambda: OneHot(4),
    "multi_index": lambda: MultiCategorical(nvec=[3, 3]),
    "multi_one_hot": lambda: MultiOneHot(nvec=[3, 2]),
    "bounded": lambda: Bounded(low=-2.0, high=2.0, shape=(2,)),
    "unbounded": lambda: Unbounded(shape=(3,)),
}

OBSERVATIONS = {
    "vector": {"observation": Unbounded(shape=(4,))},
    "pixels": {"pixels": Bounded(low=0, high=255, shape=(3, 8, 8), dtype=torch.uint8)},
    "nested": {
        ("obs", "pixels"): Bounded(low=0, high=255, shape=(2, 6, 6), dtype=torch.uint8),
        ("obs", "speed"): Unbounded(shape=(2,)),
    },
    "several": {"observation": Unbounded(shape=(4,)), "position": Unbounded(shape=(2,))},
    "integer": {
        "observation": Bounded(low=-1000, high=1000, shape=(3,), dtype=torch.int64),
    },
}


_DONE_KEYS = ("done", "terminated", "truncated")


def action_value(action: torch.Tensor) -> torch.Tensor:
    """The number an action stands for: its (weighted) entries summed, as a float."""
    weights = torch.arange(1, action.numel() + 1, dtype=torch.float32).reshape(action.shape)
    return (action.to(torch.float32) * weights).sum().reshape(1)


class SpecEnv(EnvBase):
    """Episodes of 3-11 steps (from the seed) with the named action and observation specs;
    an even length ends ``terminated``, an odd one ``truncated``."""

    def __init__(self, *, action: str = "one_hot", observation: str = "vector"):
        super().__init__(batch_size=torch.Size([]))
        self.action_spec = ACTIONS[action]()
        self.observation_spec = Composite()
        for key, spec in OBSERVATIONS[observation].items():
            self.observation_spec[key] = spec.clone()
        self.reward_spec = Unbounded(shape=(1,))
        self.full_done_spec = Composite(
            {k: Categorical(2, shape=(1,), dtype=torch.bool) for k in _DONE_KEYS}
        )
        self._generator = torch.Generator().manual_seed(0)
        self._state = torch.zeros(())
        self._t = 0
        self._length = 0

    def _observation(self) -> TensorDict:
        out = TensorDict()
        for key, spec in self.observation_spec.items(True, True):
            ramp = torch.arange(spec.shape.numel(), dtype=torch.float32).reshape(spec.shape)
            value = self._state + 0.25 * ramp
            if spec.dtype == torch.uint8:
                value = (value * 17).remainder(256)
            elif not spec.dtype.is_floating_point:
                value = (value * 3).floor()
            out.set(key, value.to(spec.dtype))
        return out

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        self._t = 0
        self._length = int(torch.randint(3, 12, (), generator=self._generator))
        self._state = torch.rand((), generator=self._generator) * 4
        out = self._observation()
        out.update(self.full_done_spec.zero())
        return out

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        value = action_value(tensordict.get("action"))
        self._t += 1
        self._state = (0.5 * self._state + 0.1 * value.squeeze() + 0.3).remainder(50)
        ended = self._t >= self._length
        terminated = ended and self._length % 2 == 0
        out = self._observation()
        out.set("reward", value)
        out.set("terminated", torch.tensor([terminated]))
        out.set("truncated", torch.tensor([ended and not terminated]))
        out.set("done", torch.tensor([ended]))
        return out

    def _set_seed(self, seed: int | None) -> None:
        self._generator.manual_seed(0 if seed is None else int(seed))

    def snapshot(self) -> dict:
        """All of this env's state, for exact resume (``hts_lightning.envs.save_env_state``)."""
        return {
            "generator": self._generator.get_state(),
            "state": self._state.clone(),
            "t": self._t,
            "length": self._length,
        }

    def restore(self, snapshot: dict) -> None:
        self._generator.set_state(snapshot["generator"])
        self._state = snapshot["state"].clone()
        self._t, self._length = snapshot["t"], snapshot["length"]


class _Features(nn.Module):
    """Observation leaves (their event shapes known) to a feature vector."""

    def __init__(self, shapes: list[torch.Size], out_features: int):
        super().__init__()
        self.shapes = shapes
        width = sum(s.numel() for s in shapes)
        self.layer = nn.Linear(width, out_features)

    def forward(self, *leaves: torch.Tensor) -> torch.Tensor:
        batch = leaves[0].shape[: leaves[0].dim() - len(self.shapes[0])]
        flat = [x.reshape(*batch, -1).to(torch.float32) / 64 for x in leaves]
        return torch.tanh(self.layer(torch.cat(flat, -1)))


class _Reshape(nn.Module):
    def __init__(self, *shape: int):
        super().__init__()
        self.shape = shape

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(*x.shape[:-1], *self.shape)


class _MultiOneHotArgmax(nn.Module):
    """A deterministic multi-one-hot action: the argmax of each group of scores."""

    def __init__(self, nvec: list[int]):
        super().__init__()
        self.nvec = nvec

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        # sin of large multiples: nearby observations get unrelated choices.
        groups = (scores * 1000).sin().split(self.nvec, -1)
        return torch.cat([nn.functional.one_hot(g.argmax(-1), g.shape[-1]) for g in groups], -1)


def _independent_categorical(logits: torch.Tensor) -> D.Distribution:
    return D.Independent(D.Categorical(logits=logits), 1)


def _independent_normal(loc: torch.Tensor, scale: torch.Tensor) -> D.Distribution:
    return D.Independent(D.Normal(loc, scale), 1)


def spec_policy(env: EnvBase, seed: int = 0) -> TensorDictModule:
    """A policy for ``env``'s action spec, as a TorchRL user would write it: a sampling
    ``ProbabilisticActor`` (Categorical, OneHotCategorical, independent categoricals, a
    TanhNormal in the bounds, a Normal), or a deterministic module for multi-one-hot."""
    torch.manual_seed(seed)
    keys = list(env.observation_spec.keys(True, True))
    shapes = [env.observation_spec[k].shape for k in keys]
    spec = env.action_spec
    features = TensorDictModule(_Features(shapes, 16), in_keys=keys, out_keys=["features"])

    def head(width: int, *layers: nn.Module, out_keys=("logits",)):
        return TensorDictModule(
            nn.Sequential(nn.Linear(16, width), *layers),
            in_keys=["features"],
            out_keys=list(out_keys),
        )

    def actor(module, distribution, in_keys=("logits",), **kwargs):
        return ProbabilisticActor(
            TensorDictSequential(features, module),
            in_keys=list(in_keys),
            distribution_class=distribution,
            return_log_prob=True,
            spec=spec,
            **kwargs,
        )

    if isinstance(spec, MultiOneHot):
        nvec = [int(n) for n in spec.nvec]
        return TensorDictSequential(
            features, head(sum(nvec), _MultiOneHotArgmax(nvec), out_keys=["action"])
        )
    if isinstance(spec, OneHot):
        return actor(head(spec.shape[-1]), OneHotCategorical)
    if isinstance(spec, MultiCategorical):
        heads, n = spec.shape[-1], int(spec.nvec.max())
        return actor(head(heads * n, _Reshape(heads, n)), _independent_categorical)
    if isinstance(spec, Categorical):
        return actor(head(spec.n), D.Categorical)
    width = spec.shape[-1]
    params = head(2 * width, NormalParamExtractor(), out_keys=["loc", "scale"])
    if isinstance(spec, Bounded):
        bounds = {"low": spec.space.low, "high": spec.space.high}
        return actor(params, TanhNormal, in_keys=("loc", "scale"), distribution_kwargs=bounds)
    return actor(params, _independent_normal, in_keys=("loc", "scale"))
