"""Ctrl-C and SIGTERM end a run between updates, with a checkpoint, never mid-step."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from lightning import Callback, LightningModule, Trainer
from lightning.pytorch.utilities.exceptions import SIGTERMException

from hts_lightning._compat import request_stop_after_batch

__all__ = ["StopOnSignal", "stop_at_once_while"]

# Depth of the waits in progress, in the main thread, where a stop signal may end the run at
# once (signal handlers run in the main thread, between its bytecodes).
_waits_to_cut = 0


@contextmanager
def stop_at_once_while() -> Iterator[None]:
    """Mark a wait between updates, in which nothing is half done (the wait for a batch): a
    stop signal in it ends the run at once, with the checkpoint of the last update, instead
    of after an update that may be long in coming (or never come).

    Example:
        >>> with stop_at_once_while():
        ...     batch = [1, 2]
        >>> batch
        [1, 2]
    """
    global _waits_to_cut
    _waits_to_cut += 1
    try:
        yield
    finally:
        _waits_to_cut -= 1


def _raise_sigterm_after_this_batch(trainer: Trainer) -> None:
    """Set Lightning's own stop flag: after this batch every rank raises SIGTERMException, the
    batch counted as done, so the checkpoint resumes at the next one.

    ``Trainer.received_sigterm`` is public but read-only; its value is the signal connector's
    flag. No public setter exists (checked against Lightning 2.6.6): this is the one adapter.
    """
    request_stop_after_batch(trainer)


class StopOnSignal(Callback):
    """Stop after the current update on SIGINT or SIGTERM, save ``last.ckpt``, mark the run
    KILLED.

    The first Ctrl-C or SIGTERM is noted (a second Ctrl-C aborts at once); after the update in
    progress, the ranks agree (any rank that got a signal stops them all, at the same update)
    and Lightning's stop is raised on every rank. This callback then writes the checkpoint that
    ``--ckpt_path last`` resumes from and tells the loggers that the run was killed rather than
    failed. The collector's batch in flight is dropped (its workers are stopped by the module);
    the checkpoint describes where it starts, so a resume collects it again, identically.

    Lightning's own SIGTERM handling is replaced while training: it sets the stop flag on the
    signalled rank alone, which stops that rank one update before the others (a hang under
    DDP), and its handler broadcasts from inside the signal handler.

    A signal while the module waits for a batch (a wait marked by ``stop_at_once_while``)
    stops the run at once, on a single process: the update before it is done, the batch in
    flight is dropped, and the checkpoint is the same as after that update. Under DDP the
    ranks still stop together, after an update (the wait for a batch is bounded by the
    module's ``batch_timeout``).

    ``received`` is the signal that stopped the run (``None`` if none did; SIGTERM on a rank
    stopped by another rank's signal).

    Example:
        >>> from lightning import Trainer
        >>> trainer = Trainer(callbacks=[StopOnSignal()], logger=False)
        >>> [type(c).__name__ for c in trainer.callbacks if isinstance(c, StopOnSignal)]
        ['StopOnSignal']
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous_handlers: dict[int, object] = {}
        self._single_process = True

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        # Not on_fit_start: Lightning installs its SIGTERM handler after that hook.
        self.received = None
        self._single_process = trainer.world_size == 1
        try:
            self._previous_handlers = {
                signum: signal.signal(signum, self._on_signal)
                for signum in (signal.SIGINT, signal.SIGTERM)
            }
        except ValueError:  # not the main thread: leave the signals alone
            self._previous_handlers = {}

    def _on_signal(self, signum, frame) -> None:
        if self.received is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt  # the second Ctrl-C: abort now
        if self.received is None:
            self.received = signum
            name = signal.Signals(signum).name
            if _waits_to_cut and self._single_process:
                print(f"\n{name}: stopping now (waiting for a batch, no update under way)...")
                raise SIGTERMException
            print(f"\n{name}: stopping after the current update (Ctrl-C again to abort)...")

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, *args) -> None:
        stop = self.received is not None
        if trainer.world_size > 1:
            flag = torch.tensor([float(stop)], device=pl_module.device)
            stop = bool(trainer.strategy.reduce(flag, reduce_op="sum") > 0)
        if stop:
            _raise_sigterm_after_this_batch(trainer)

    def on_fit_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._restore()

    def on_exception(
        self, trainer: Trainer, pl_module: LightningModule, exception: BaseException
    ) -> None:
        self._restore()
        if not isinstance(exception, SIGTERMException):
            return
        if self.received is None:
            self.received = signal.SIGTERM
        checkpoint = trainer.checkpoint_callback
        if checkpoint is not None and checkpoint.dirpath:
            path = Path(checkpoint.dirpath) / f"{checkpoint.CHECKPOINT_NAME_LAST}.ckpt"
            trainer.save_checkpoint(path)  # every rank: saving is collective
            if trainer.is_global_zero:
                print(f"Checkpoint written: {path.resolve()}", flush=True)
        for logger in trainer.loggers:
            if hasattr(logger, "status_on_failure"):
                logger.status_on_failure = "KILLED"

    def _restore(self) -> None:
        for signum, handler in self._previous_handlers.items():
            # on_fit_end runs after Lightning's teardown has put back the SIGTERM handler it
            # found: putting back Lightning's own (the one we replaced) would leave it
            # installed after the run, holding the trainer, the module and its collector.
            if signal.getsignal(signum) == self._on_signal:
                signal.signal(signum, handler)
        self._previous_handlers = {}
