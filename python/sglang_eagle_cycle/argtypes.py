"""Bounds and ``argparse`` value types shared by ``eagle-cycle`` and the benchmarks (stdlib only).

The CLI builds every subcommand's parser at startup, so this module imports nothing heavy; the
advisor (:mod:`sglang_eagle_cycle.advise`) reads the same bounds from here.
"""

from __future__ import annotations

import argparse
import math
import re
from typing import Callable, Optional

#: deepest draft depth (``num_steps``) read from inputs or considered as a candidate
MAX_STEPS = 64
#: largest batch size read from inputs or advised for (a CUDA-graph list up to it stays small)
MAX_BS = 65536
#: largest plausible output throughput of one server (tok/s); beyond it a figure is refused
MAX_TOK_S = 1e8
#: smallest throughput a baseline given on the command line may be (tok/s): below, not a measurement
MIN_TOK_S = 0.01
#: a stock batch size with fewer Decode batch intervals than this, in a start where another has at
#: least this many, is a ramp's or a drain's and is left out of advise's runs and baselines (a log's
#: and an inspect document's alike)
MIN_STOCK_INTERVALS = 3


_INT_TEXT = re.compile(r"\s*[+-]?[0-9]+\s*")
_FLOAT_TEXT = re.compile(r"\s*[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*"
                         r"|\s*[+-]?(?:inf(?:inity)?|nan)\s*", re.IGNORECASE)


def strict_int(text: str) -> int:
    """``int(text)`` for ASCII decimal digits only (Python's ``int`` also reads ``1_0`` as 10 and
    full-width or other Unicode digits, which a user did not mean as a number).

    Raises:
        ValueError: anything else.
    """
    if not isinstance(text, str) or not _INT_TEXT.fullmatch(text):
        raise ValueError(f"not an integer: {text!r}")
    return int(text)


def strict_float(text: str) -> float:
    """``float(text)`` for an ASCII decimal literal (or inf/nan) only: no ``1_0``, no Unicode digits.

    Raises:
        ValueError: anything else.
    """
    if not isinstance(text, str) or not _FLOAT_TEXT.fullmatch(text):
        raise ValueError(f"not a number: {text!r}")
    return float(text)


def int_in(lo: int, hi: Optional[int] = None) -> Callable[[str], int]:
    """An ``argparse`` type accepting an integer in ``lo..hi`` (``hi=None``: no upper bound).

    Raises (from the returned callable):
        argparse.ArgumentTypeError: ``expected an integer in 1..64, got 0`` (or ``>= 1``), which
            argparse prints as one line after the option's name, with exit code 2.
    """
    want = f"an integer >= {lo}" if hi is None else f"an integer in {lo}..{hi}"

    def parse(text: str) -> int:
        try:
            value = strict_int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {want}, got {text!r}") from None
        if value < lo or (hi is not None and value > hi):
            raise argparse.ArgumentTypeError(f"expected {want}, got {value}")
        return value

    return parse


_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]i?B)?\s*$", re.IGNORECASE)


def memory_size(text: str):
    """A memory size as accelerate's ``max_memory`` takes it: ``20GiB``, ``500MB``, ``1.5GB`` (the
    unit's spelling normalised, ``20gib`` -> ``20GiB``: accelerate reads a lower-case ``b`` as bits), or
    a whole number of bytes (``1073741824``, returned as an int).

    Raises:
        argparse.ArgumentTypeError: anything else (accelerate 1.x knows no TB), or not positive.
    """
    m = _MEMORY.match(text)
    if not m or float(m.group(1)) <= 0 or (m.group(2) is None and "." in m.group(1)):
        raise argparse.ArgumentTypeError(f"expected a memory size such as 20GiB, 500MB or a number of bytes, "
                                         f"got {text!r}")
    if m.group(2) is None:
        return int(m.group(1))
    unit = m.group(2).upper().replace("IB", "iB")
    return f"{m.group(1)}{unit}"


def negative_values_are_values(parser: argparse.ArgumentParser) -> None:
    """Let ``parser`` read ``-inf``, ``-1e3``, ``-1:88`` or ``-3,1,4`` as option values.

    argparse takes an argument that starts with ``-`` for an option unless it looks like a plain
    negative number, so ``--baseline-tok-s -1:88`` failed with "expected at least one argument"
    instead of the value check's own message. No option of ours starts with a digit, ``inf`` or
    ``nan``, so every such argument is passed on as a value (to be refused by its type).
    """
    import re

    if hasattr(parser, "_negative_number_matcher"):
        parser._negative_number_matcher = re.compile(
            r"^-(?:[\d.][\d.,:eE+-]*|inf(?:inity)?|nan)$", re.IGNORECASE)


def baseline_item(text: str) -> tuple[int, float]:
    """A ``TOK_S`` or ``BS:TOK_S`` baseline value (``bs`` 0 for a bare throughput): ASCII decimal
    numbers, a batch size in ``1..MAX_BS``, a throughput in ``MIN_TOK_S..MAX_TOK_S`` (tok/s).

    Raises:
        argparse.ArgumentTypeError: anything else, with a one-line message saying which part.
    """
    bs, sep, tok = text.rpartition(":")
    try:
        value = strict_float(tok)
        key = strict_int(bs) if sep else 0
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected TOK_S or BS:TOK_S, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive finite throughput, got {text!r}")
    if key < 0 or (sep and key == 0):
        raise argparse.ArgumentTypeError(f"expected a batch size >= 1 before the colon, got {text!r}")
    if key > MAX_BS:
        raise argparse.ArgumentTypeError(f"batch size {key} above {MAX_BS}, got {text!r}")
    if value > MAX_TOK_S or value < MIN_TOK_S:
        raise argparse.ArgumentTypeError(f"{value:.10g} tok/s is not a throughput (expected {MIN_TOK_S:g} to "
                                         f"{MAX_TOK_S:.0e}), got {text!r}")
    return key, value


class StoreOnce(argparse.Action):
    """``store`` for an output file's option: the option given twice with two different values is an
    error (``--csv a.csv --csv b.csv``), where argparse's last-one-wins would silently leave out
    an output the user asked for. The same value twice is taken. An option whose default is not
    None cannot tell its default given explicitly from none given; the default then passes as unset.
    """

    def __call__(self, parser, namespace, values, option_string=None):
        before = getattr(namespace, self.dest, None)
        if before is not None and before != self.default and before != values:
            raise argparse.ArgumentError(self, f"given twice ({before} and {values}); "
                                               "give it once: it names one file")
        setattr(namespace, self.dest, values)
