"""A time bound on a blocking call in the main thread, that interrupts any wait."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["deadline"]


@contextmanager
def deadline(seconds: float | None, error: Callable[[], BaseException]) -> Iterator[None]:
    """Raise ``error()`` in the block if it lasts over ``seconds``.

    A real timer signal (``SIGALRM``) interrupts whatever the block waits in (a pipe, a queue,
    a semaphore) without polling. A timer already running outside (pytest-timeout's, a
    user's) keeps its own expiry: it fires through its own handler if it comes first, and it
    is re-armed with its remaining time on exit. The error is raised once (a repeat would cut
    short the clean-up the code waited in does on its way out). ``seconds=None``, or a block
    outside the main thread (where Python runs signal handlers), is not bounded.

    Example:
        >>> with deadline(5.0, lambda: TimeoutError("took over 5 s")):
        ...     total = sum(range(10))
        >>> total
        45
    """
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    start = time.monotonic()
    outer_left, _ = signal.getitimer(signal.ITIMER_REAL)

    def expire(signum, frame):
        nonlocal outer_left
        waited = time.monotonic() - start
        if waited >= seconds:
            raise error()
        if outer_left and waited >= outer_left and callable(outer_handler):
            outer_left = 0.0  # the outer timer came first: its handler runs, ours goes on
            outer_handler(signum, frame)
        signal.setitimer(signal.ITIMER_REAL, seconds - waited)

    outer_handler = signal.signal(signal.SIGALRM, expire)
    first = min(seconds, outer_left) if outer_left else seconds
    signal.setitimer(signal.ITIMER_REAL, first)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, outer_handler)
        if outer_left:
            left = outer_left - (time.monotonic() - start)
            signal.setitimer(signal.ITIMER_REAL, max(left, 1e-3))
