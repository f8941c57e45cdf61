"""Holding a SIGTERM off while a temporary folder is made and its removal armed.

The CLI turns SIGTERM (``timeout``, ``kill``) into an exit so that temporary folders are removed on
the way out (``cli._exit_on_sigterm``). An exit raised between a folder's ``mkdir`` and the code that
removes it (``TemporaryDirectory``'s finalizer, a ``try``/``finally``) leaves the folder behind.
"""

from __future__ import annotations

import contextlib
import signal
from typing import Callable, Iterator


@contextlib.contextmanager
def deferred() -> Iterator[Callable[[], None]]:
    """Within the block a SIGTERM is noted, not acted on; yields ``replay()``, which acts on a noted
    one through the handler in place before the block (for the CLI's: ``SystemExit(143)``; for the
    default action: the same exit; an ignored one stays ignored). Call ``replay()`` first thing
    inside the removal's reach. Outside the main thread (no handler can be set) nothing is held.

    Masking the signal instead is not enough: the kernel hands a process-wide SIGTERM to any thread
    that does not mask it, and the interpreter then runs the handler in the main thread anyway.
    """
    fired: list[int] = []
    try:
        previous = signal.signal(signal.SIGTERM, lambda signum, frame: fired.append(signum))
    except (ValueError, OSError):
        previous = None

    def replay() -> None:
        if not fired or previous is None or previous == signal.SIG_IGN:
            return
        if callable(previous):
            previous(fired[0], None)
        else:
            raise SystemExit(128 + fired[0])

    try:
        yield replay
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
