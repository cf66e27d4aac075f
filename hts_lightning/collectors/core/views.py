"""numpy views of the collector's tensors (the same memory): the engine and the executors
index rows through numpy, a third of the cost of torch's advanced indexing."""

from __future__ import annotations

import numpy as np
import torch
from tensordict import TensorDictBase


def leaf_keys(td: TensorDictBase) -> list:
    return list(td.keys(include_nested=True, leaves_only=True))


def rows(tensor: torch.Tensor, key) -> np.ndarray:
    """A numpy view of a [replicas, steps, ...] tensor as [replicas * steps, ...] rows
    (setting ``shape`` raises rather than copy)."""
    view = numpy_view(tensor, key).view()
    view.shape = (-1, *view.shape[2:])
    return view


def numpy_view(tensor: torch.Tensor, key) -> np.ndarray:
    """A numpy view of a CPU tensor (the engine indexes rows through numpy)."""
    try:
        return tensor.numpy()
    except TypeError as error:
        raise TypeError(
            f"HTSCollector keeps {key!r} ({tensor.dtype}) in its storage, which needs a dtype "
            "numpy has (bfloat16 has none): cast it in the env or the policy, e.g. with a "
            "DTypeCastTransform."
        ) from error
