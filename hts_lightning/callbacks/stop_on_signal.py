"""Ctrl-C and SIGTERM end a run between updates, with a checkpoint, never mid-step."""

from __future__ import annotations

import signal
from pathlib import Path

from lightning import Callback, LightningModule, Trainer
from lightning.pytorch.utilities.exceptions import SIGTERMException

__all__ = ["StopOnSignal"]


class StopOnSignal(Callback):
    """Stop after the current update on SIGINT or SIGTERM, save ``last.ckpt``, mark the run
    KILLED.

    Lightning already turns SIGTERM into a stop at the end of the running training step (its
    ``SIGTERMException``, agreed on by every rank under DDP); this callback does the same for
    the first Ctrl-C (a second one aborts at once), then, when the stop arrives, writes the
    checkpoint that ``--ckpt_path last`` resumes from and tells the loggers that the run was
    killed rather than failed. The collector's in-flight batch is dropped (its workers are
    stopped by the module): a resume collects it again.

    ``received`` is the signal that stopped the run (``None`` if none did).

    Example:
        >>> from lightning import Trainer
        >>> trainer = Trainer(callbacks=[StopOnSignal()], logger=False)
        >>> [type(c).__name__ for c in trainer.callbacks if isinstance(c, StopOnSignal)]
        ['StopOnSignal']
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous_handler = None

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.received = None
        try:
            self._previous_handler = signal.signal(signal.SIGINT, self._on_sigint(trainer))
        except ValueError:  # not the main thread: leave Ctrl-C alone
            self._previous_handler = None

    def _on_sigint(self, trainer: Trainer):
        def handler(signum, frame):
            if self.received is not None:
                raise KeyboardInterrupt  # the second Ctrl-C: abort now
            self.received = signum
            print("\nStopping after the current update (Ctrl-C again to abort)...", flush=True)
            # Lightning's own SIGTERM flag: the loop raises SIGTERMException after this step.
            trainer._signal_connector.received_sigterm = True

        return handler

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
        if self._previous_handler is not None:
            signal.signal(signal.SIGINT, self._previous_handler)
            self._previous_handler = None
