"""A rich console for the CLI's terminal output whose closed pipe is an ordinary ``BrokenPipeError``.

rich's own :meth:`rich.console.Console.on_broken_pipe` exits with status 1 when the reader of the
output stops early (``eagle-cycle advise LOG | head -1``), which scripts under ``set -o pipefail``
read as a failure. Raised instead, the error reaches :func:`sglang_eagle_cycle.cli.main`, which
silences the output and keeps the exit status already decided (0 when the command succeeded).
"""

from __future__ import annotations

import errno

from rich.console import Console


class PipeConsole(Console):
    """:class:`rich.console.Console` that raises ``BrokenPipeError`` on a closed pipe (no exit)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True   # nothing more to write
        raise BrokenPipeError(errno.EPIPE, "the reader closed the pipe")
