"""Bounds and ``argparse`` value types shared by ``eagle-cycle`` and the benchmarks (stdlib only).

The CLI builds every subcommand's parser at startup, so this module imports nothing heavy; the
advisor (:mod:`sglang_eagle_cycle.advise`) reads the same bounds from here.
"""

from __future__ import annotations

import argparse
from typing import Callable, Optional

#: deepest draft depth (``num_steps``) read from inputs or considered as a candidate
MAX_STEPS = 64
#: largest batch size read from inputs or advised for (a CUDA-graph list up to it stays small)
MAX_BS = 65536
#: largest plausible output throughput of one server (tok/s); beyond it a figure is refused
MAX_TOK_S = 1e8
#: smallest throughput a baseline given on the command line may be (tok/s): below, not a measurement
MIN_TOK_S = 0.01


def int_in(lo: int, hi: Optional[int] = None) -> Callable[[str], int]:
    """An ``argparse`` type accepting an integer in ``lo..hi`` (``hi=None``: no upper bound).

    Raises (from the returned callable):
        argparse.ArgumentTypeError: ``expected an integer in 1..64, got 0`` (or ``>= 1``), which
            argparse prints as one line after the option's name, with exit code 2.
    """
    want = f"an integer >= {lo}" if hi is None else f"an integer in {lo}..{hi}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {want}, got {text!r}") from None
        if value < lo or (hi is not None and value > hi):
            raise argparse.ArgumentTypeError(f"expected {want}, got {value}")
        return value

    return parse
