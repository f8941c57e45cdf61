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


class SignalNote:
    """A signal handler that notes the signal before it raises, and the checks of that note.

    ``exc_for(signum)`` builds the exception the handler raises. Where the interpreter loses that
    exception (see the module's note), code that could run without end calls :meth:`raise_if_noted`
    and raises a new one. The CLI's SIGTERM (below) and the sweep's SIGINT/SIGTERM
    (:mod:`.sweep.signals`) each keep one.
    """

    def __init__(self, exc_for: Callable[[int], BaseException]):
        self._exc_for = exc_for
        self._noted: list[int] = []

    def handler(self, signum: int, frame) -> None:
        """Note ``signum``, then raise ``exc_for(signum)`` (install with ``signal.signal``).

        Raises:
            BaseException: ``exc_for(signum)``, always.
        """
        self._noted.append(signum)
        raise self._exc_for(signum)

    def noted(self) -> int:
        """The first signal the handler noted since :meth:`forget`, 0 when none."""
        return self._noted[0] if self._noted else 0

    def raise_if_noted(self) -> None:
        """Raise ``exc_for`` of the first noted signal, in case the handler's own was lost.

        Raises:
            BaseException: ``exc_for(signum)`` when a signal was noted.
        """
        if self._noted:
            raise self._exc_for(self._noted[0])

    def forget(self) -> None:
        """Start with no signal noted (a command run again in one process, as tests do)."""
        self._noted.clear()


_NOTE = SignalNote(lambda signum: SystemExit(128 + signum))

#: The CLI's SIGTERM handler: notes the signal, then raises ``SystemExit(128 + signum)`` (143).
terminate = _NOTE.handler
#: Start a command with no signal noted.
forget = _NOTE.forget
#: The first signal :func:`terminate` handled in this process, 0 when none.
received = _NOTE.noted
#: Raise the exit (``SystemExit(128 + signum)``) of a signal :func:`terminate` handled, in case the
#: one it raised was lost (raised inside a weak-reference callback or a ``__del__``).
exit_if_received = _NOTE.raise_if_noted


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
