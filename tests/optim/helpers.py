"""Helpers of the optimizer tests (and the modules' checkpoint tests)."""

from __future__ import annotations

import torch


def assert_same(a, b) -> None:
    """Nested dicts/lists/tuples of tensors and plain values, bitwise equal (dtypes included)."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            assert_same(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_same(x, y)
    else:
        assert a == b
