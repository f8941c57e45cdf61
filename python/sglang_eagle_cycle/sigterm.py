"""Holding a SIGTERM off while a temporary folder is made and its removal armed.

The CLI turns SIGTERM (``timeout``, ``kill``) into an exit so that temporary folders are removed on
the way out (``cli._exit_on_sigterm``). An exit raised between a folder's ``mkdir`` and the code that
removes it (``TemporaryDirectory``'s finalizer, a ``try``/``finally``) leaves the folder behind.

The exit the handler raises can also be lost: the interpreter runs a pending signal handler at the
next bytecode, and when that bytecode belongs to a weak-reference callback or a ``__del__`` (the
import system's module-lock callback, run at every import), the exception is reported as "ignored"
and the code goes on. Seen under load: a SIGTERM landing while advise imported ``logging`` was
swallowed so, and advise then copied an endless pipe into its spool until a second SIGTERM. The
handler therefore notes the signal (:func:`received`) before it raises, and the places that could
run without end (the spool's copy loop) and the CLI's return check the note (:func:`exit_if_received`).
"""

from __future__ import annotations

import contextlib
import signal
from typing import Callable, Iterator


_received: list[int] = []


def terminate(signum: int, frame) -> None:
    """The CLI's SIGTERM handler: note the signal, then raise ``SystemExit(128 + signum)`` (143).

    Raises:
        SystemExit: always.
    """
    _received.append(signum)
    raise SystemExit(128 + signum)


def forget() -> None:
    """Start a command with no signal noted (the CLI, called again in one process, as tests do)."""
    _received.clear()


def received() -> int:
    """The first signal :func:`terminate` handled in this process, 0 when none."""
    return _received[0] if _received else 0


def exit_if_received() -> None:
    """Raise the exit of a signal :func:`terminate` handled, in case the one it raised was lost
    (raised inside a weak-reference callback or a ``__del__``: see the module's note).

    Raises:
        SystemExit: ``128 + signum`` when a signal was noted.
    """
    if _received:
        raise SystemExit(128 + _received[0])


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
