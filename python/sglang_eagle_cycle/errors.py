"""Errors shared by the command-line tools.

``UsageError`` is the one way a command says "this input cannot be used":
the CLI prints its message on one line and exits with code 2, never a traceback.
"""

import re

#: characters that end or break a terminal line, or steer the terminal: C0 controls (line feed,
#: carriage return, escape...), DEL, C1 controls (NEL) and the Unicode line and paragraph separators
_LINE_BREAKING = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


class UsageError(Exception):
    """Unusable input (missing file, invalid JSON, bad option value). Exit code 2."""


def one_line(text: str) -> str:
    """``text`` as one terminal line: every control character (a line feed in a file name the
    message quotes, an escape sequence) written as its escape (``\\n``, ``\\x1b``), so that an error
    stays the one line it is promised to be. Other characters, a file name's undecodable bytes
    included, are left to the output stream's own handler."""
    return _LINE_BREAKING.sub(lambda m: repr(m.group())[1:-1], text)
