"""The collection engine: one batch of ``sync_interval`` steps per replica, replicas unsynchronized.

The engine acts on whichever replicas have an observation waiting, in fixed-shape chunks, and
records each step at (replica, step) as it lands. Three rules make the batch a function of the
seed and the weights only, whatever the timing and the number of workers:

- inference always runs on ``inference_batch_size`` rows (a short chunk is padded by repeating a
  row), because CPU kernels give slightly different numbers for different batch shapes, while at
  one shape a row's output does not depend on the other rows;
- the randomness of an action is the uniform noise of its replica at its step, drawn from the
  replica's own generator at the start of the batch (see ``core.sampling``);
- storage is indexed by (replica, step), never by arrival order.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from tensordict import TensorDictBase

from hts_lightning.collectors.backends.protocols import Executor
from hts_lightning.collectors.core.layout import Layout
from hts_lightning.collectors.core.policy_runner import PolicyRunner
from hts_lightning.collectors.core.views import leaf_keys, numpy_view, rows


class CollectionEngine:
    """Fills one [num_envs, sync_interval] storage per call to :meth:`collect`."""

    def __init__(
        self,
        *,
        executor: Executor,
        runner: PolicyRunner,
        slots: TensorDictBase,
        layout: Layout,
        inference_batch_size: int,
        first_replica: int = 0,
        should_stop: Callable[[], bool] | None = None,
    ):
        self.executor = executor
        # A replica always acts from the same row of the same inference shape: row (global
        # replica index) mod inference_batch_size, whatever the worker layout or the timing.
        # Kernels may round a row by its place in the call (MKL's AVX-512 matmuls, the
        # scalar tail of torch's elementwise loops: benchmarks/row_place.py); a fixed place
        # keeps the bits.
        self.first_replica = first_replica
        self.should_stop = should_stop or executor.stopping
        self.runner = runner
        self.inference_batch_size = inference_batch_size
        self.policy_keys = layout.policy_keys
        self.action_keys = action_keys = layout.action_keys
        # Next keys the executor writes into the batch storage itself are not copied here.
        written = set(executor.next_keys_written)
        self.next_keys = [k for k in leaf_keys(slots["next"]) if k not in written]
        self._written_next = [k for k in leaf_keys(slots["next"]) if k in written]
        # Root keys the executor never changes (envpool's done flags: always False) are
        # written once a batch, not gathered and scattered at every chunk.
        constant = set(executor.constant_root_keys)
        self.root_keys = root_keys = [k for k in layout.root_keys if k not in constant]
        self.constant_root_keys = [k for k in layout.root_keys if k in constant]
        # numpy views of the slots, storage and chunk buffers (the same memory): one row's
        # gather or scatter costs a third of torch's advanced indexing, ~20 of them a step.
        self._slot_root = [numpy_view(slots["root"].get(k), k) for k in root_keys]
        self._slot_next = [numpy_view(slots["next"].get(k), k) for k in self.next_keys]
        self._slot_action = [numpy_view(slots["action"].get(k), k) for k in action_keys]
        # The chunk's constant keys hold the slots' values from here on.
        self._chunk = slots["root"][0].expand(inference_batch_size).clone()
        if runner.device.type == "cuda":  # page-locked: the copies to the GPU do not block
            self._chunk = self._chunk.pin_memory()
        self._chunk_root = [self._chunk.get(k).numpy() for k in root_keys]
        self._constant_root = [slots["root"][0].get(k) for k in self.constant_root_keys]
        runner.prepare(self._chunk)
        self._nan_per_batch = runner.nan_check_per_batch

    @torch.no_grad()  # once a batch: the runner's act needs it
    def collect(self, out: TensorDictBase, uniform: torch.Tensor | None) -> None:
        """Collect one batch into ``out`` ([replicas, sync_interval], this engine's replicas
        only); ``uniform`` ([replicas, sync_interval, noise width]) is the action noise."""
        num_envs, horizon = out.batch_size
        for key, value in zip(self.constant_root_keys, self._constant_root, strict=True):
            out.get(key).copy_(value.expand_as(out.get(key)))
        # Storage seen as [replicas * sync_interval] rows: (replica, step) is row
        # replica * sync_interval + step, one index array instead of two (~0.4 us a key).
        out_root = [rows(out.get(k), k) for k in self.root_keys]
        out_policy = [rows(out.get(k), k) for k in self.policy_keys]
        out_next = [rows(out.get("next").get(k), k) for k in self.next_keys]
        noise = self.runner.batch_noise(uniform)
        noise = None if noise is None else rows(noise, "noise")
        row = np.arange(num_envs) * horizon  # each replica's row of its next step
        end = row + horizon
        if self._written_next:
            next_ = out.get("next")
            self.executor.write_steps_into(
                {k: rows(next_.get(k), k) for k in self._written_next}, row
            )
        ready = np.arange(num_envs)
        remaining = num_envs
        while remaining and not self.should_stop():
            if ready.size:
                self._act(ready, row, noise, out_root, out_policy)
            stepped = self.executor.wait_ready()
            at = row[stepped]
            for dst, src in zip(out_next, self._slot_next, strict=True):
                dst[at] = src[stepped]
            at += 1
            row[stepped] = at
            full = at == end[stepped]
            ready = stepped[~full]
            remaining -= int(full.sum())
        if self._nan_per_batch and not remaining:  # a whole batch, acted on at every step
            self.runner.refuse_nan(out)

    def _act(self, replicas, row, noise, out_root, out_policy) -> None:
        size = self.inference_batch_size
        replicas = np.sort(replicas)
        for real in _calls(replicas, size, self.first_replica):
            places = (real + self.first_replica) % size  # each replica's own row
            chunk = np.full(size, real[0])  # unused rows repeat one: a fixed inference shape
            chunk[places] = real
            at = row[chunk]
            # Gathered into buffers kept from call to call: no TensorDict built per chunk.
            for src, buffer in zip(self._slot_root, self._chunk_root, strict=True):
                src.take(chunk, axis=0, out=buffer)
            uniform = None if noise is None else torch.from_numpy(noise.take(at, axis=0))
            # leaves the chunk as it is
            acted = self.runner.act(self._chunk, uniform, check_nan=not self._nan_per_batch)
            real_at = row[real]
            for buffer, dst in zip(self._chunk_root, out_root, strict=True):
                dst[real_at] = buffer[places]
            for key, dst in zip(self.policy_keys, out_policy, strict=True):
                dst[real_at] = acted.get(key).numpy()[places]
            for key, dst in zip(self.action_keys, self._slot_action, strict=True):
                dst[real] = acted.get(key).numpy()[places]
            self.executor.send(real)


def _calls(replicas: np.ndarray, size: int, first_replica: int) -> list[np.ndarray]:
    """The (sorted) ready replicas split into inference calls in which no two share a row:
    call k takes the k-th ready replica of each row. Replicas within ``size`` of each other
    never share one (a worker's block of at most a chunk: one call)."""
    if replicas[-1] - replicas[0] < size:
        return [replicas]
    places = (replicas + first_replica) % size
    order = np.argsort(places, kind="stable")  # by row, then by replica
    by_place = places[order]
    rank = np.arange(replicas.size) - np.searchsorted(by_place, by_place)
    return [np.sort(replicas[order[rank == k]]) for k in range(int(rank.max()) + 1)]
