"""Hold Ctrl-C (SIGINT) and SIGTERM during a short critical section, then deliver them.

Blocking with ``pthread_sigmask`` is not enough in Python: the mask is per thread, a signal can
land on a helper thread (asyncio's resolver pool, tqdm's monitor) and CPython still runs the
Python handler in the main thread at its next check. So the handlers themselves are swapped for
one that only notes the signal; at the end of the block the original handlers come back and a
noted signal is raised again, reaching them as if it had arrived then.

Usage (main thread only, as ``signal.signal`` requires)::

    with deferred_signals():
        write_record()
        count_it()
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

from ..sigterm import SignalNote

HELD = (signal.SIGINT, signal.SIGTERM)

_NOTE = SignalNote(lambda signum: KeyboardInterrupt())

#: The sweep's SIGINT/SIGTERM handler: notes the signal, then raises ``KeyboardInterrupt``. The
#: interpreter runs a handler at the next bytecode, and when that belongs to a weak-reference callback
#: or a ``__del__`` (run at every import, at garbage collection) the exception is reported as
#: "ignored" and lost; the note lets the sweep's waits and its record boundaries act on it anyway
#: (:func:`raise_if_interrupted`), instead of launching and measuring to the end.
interrupt = _NOTE.handler
#: Raise ``KeyboardInterrupt`` when :func:`interrupt` handled a signal since :func:`forget_interrupts`.
raise_if_interrupted = _NOTE.raise_if_noted
#: Start a sweep with no signal noted (a second sweep in one process, as tests run them).
forget_interrupts = _NOTE.forget


@contextmanager
def deferred_signals() -> Iterator[None]:
    """Run the block without interruption by SIGINT/SIGTERM; re-raise the first one afterwards.

    Outside the main thread (where handlers cannot be set) the block simply runs.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def hold(signum, _frame):
        pending.append(signum)

    previous = {sig: signal.signal(sig, hold) for sig in HELD}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if pending:
            signal.raise_signal(pending[0])
