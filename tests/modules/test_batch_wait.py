"""Every wait for a batch is bounded, whichever collector the module drives."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
import torch
from lightning import Trainer
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.utilities.exceptions import SIGTERMException

from hts_lightning import A2C
from hts_lightning.callbacks import StopOnSignal, stop_on_signal
from hts_lightning.collectors import BatchTimeoutError
from hts_lightning.envs import env_factory
from hts_lightning.models import make_actor_critic
from hts_lightning.modules.collection import CollectionBinding
from tests.conftest import worker_processes


def _binding(kind: str, *, batch_timeout: float | None, **env_kwargs) -> CollectionBinding:
    create_env = env_factory("Counting", max_count=1000, **env_kwargs)
    probe = create_env()
    actor = make_actor_critic(probe.observation_spec, probe.action_spec).get_policy_operator()
    probe.close()
    return CollectionBinding(
        kind=kind,
        create_env=create_env,
        policy=actor,
        num_envs=2,
        num_workers=1,
        sync_interval=8,
        seed=0,
        batch_timeout=batch_timeout,
    )


# The bound is the loader's, the same for every kind: ours and a TorchRL one (sync and multi_sync
# pass too, at 20-40 s each here, most of it their shutdown of the stalled worker).
@pytest.mark.parametrize("kind", ["hts", "multi_async"])
def test_a_batch_that_never_comes_ends_the_wait_with_an_error_naming_the_collector(kind):
    # Both replicas' third step never returns: the first batch never comes.
    binding = _binding(kind, batch_timeout=2, stall_at=3)
    loader = binding.start(batches=3, updates=0, world_size=1, rank=0)
    expected = (
        rf"No batch from the '{kind}' collector within batch_timeout=2 s: it was collecting "
        r"its batch 1 \(2 env replicas x 8 steps, in 1 worker processes\)\. An env step that "
        r"never returns.*raise batch_timeout \(model\.init_args\.batch_timeout"
    )
    try:
        with pytest.raises(BatchTimeoutError, match=expected):
            next(iter(loader))
    finally:
        binding.shutdown()  # bounded too: the stalled worker is killed
    assert worker_processes() == []


def test_batch_timeout_must_be_positive():
    with pytest.raises(ValueError, match="batch_timeout=0: give the seconds a batch may take"):
        _binding("hts", batch_timeout=0)


@pytest.mark.parametrize("kind", ["hts", "sync", "multi_sync"])
def test_a_signal_while_waiting_for_a_batch_stops_at_once_with_the_checkpoint(kind, tmp_path):
    # Both replicas' step to count 27 never returns: batch 4 (counts 25..32) never comes, so
    # after update 3 the module waits for it and no update ends. batch_timeout is only the
    # hang guard here (before the stop was at once, the run waited out the bound).
    module = A2C(
        collector=kind,
        env_id="Counting",
        env_kwargs={"max_count": 1000, "stall_at": 27},
        num_envs=2,
        num_workers=1,
        sync_interval=8,
        total_frames=16 * 100,
        batch_timeout=60,
    )

    fitted = threading.Event()

    def terminate_when_waiting():
        # Update 3 and its logging and checkpoint hooks have ended when the module waits for
        # batch 4 (in the wait that a stop signal cuts short): then the signal. The deadline
        # only ends this thread if that never comes (batch_timeout then fails the test).
        deadline = time.monotonic() + 120
        while not (module.updates >= 3 and stop_on_signal._waits_to_cut > 0):
            if fitted.is_set() or time.monotonic() > deadline:
                return
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)

    trainer = Trainer(
        max_epochs=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[ModelCheckpoint(dirpath=tmp_path, save_last=True), StopOnSignal()],
    )
    threading.Thread(target=terminate_when_waiting, daemon=True).start()
    try:
        with pytest.raises(SIGTERMException):
            trainer.fit(module)
    finally:
        fitted.set()
    assert module.updates == 3
    saved = torch.load(tmp_path / "last.ckpt", map_location="cpu", weights_only=False)
    assert saved["global_step"] == 3 and saved["hts_progress"]["updates"] == 3
    if kind == "sync":
        # TorchRL's collector as it was before the wait: 3 batches of 16 frames. Asking its
        # stalled worker for the state instead lost the checkpoint after 2 minutes.
        assert saved["hts_collector"]["states"][0]["frames"] == 48
    if kind == "multi_sync":
        assert saved["hts_collector"] == {"kind": "new"}  # its workers were not asked
    assert worker_processes() == []


def test_a_multi_async_collector_goes_on_after_its_state_is_saved():
    # One worker, slow steps: right after a batch its next rollout is in flight when the
    # checkpoint reads the collector's state. TorchRL 0.14.1's MultiAsyncCollector.state_dict()
    # made that worker drop the rollout and wait for a "continue" that never came: the next
    # batch never came (until batch_timeout, the hang guard here).
    binding = _binding("multi_async", batch_timeout=30, max_delay=0.02)
    loader = binding.start(batches=3, updates=0, world_size=1, rank=0)
    batches = iter(loader)
    try:
        sizes = [next(batches).numel()]
        saved = binding.state_dict(world_size=1)
        sizes += [batch.numel() for batch in batches]
    finally:
        binding.shutdown()
    assert sizes == [16, 16, 16]
    # A resumed run starts a new collector (with the trained weights): it yields batches.
    resumed = _binding("multi_async", batch_timeout=30)
    resumed.load_state_dict(saved)
    try:
        first = next(iter(resumed.start(batches=3, updates=1, world_size=1, rank=0)))
    finally:
        resumed.shutdown()
    assert first.numel() == 16
    assert worker_processes() == []
