"""Errors shared by the command-line tools.

``UsageError`` is the one way a command says "this input cannot be used":
the CLI prints its message on one line and exits with code 2, never a traceback.
"""


class UsageError(Exception):
    """Unusable input (missing file, invalid JSON, bad option value). Exit code 2."""
