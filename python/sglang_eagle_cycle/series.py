"""A group's per-cycle accept length and period in file order, and the standard errors of their means.

The mean accept length of a run is not a mean of independent cycles: a request stays in the batch
for hundreds of cycles and its text is easy or hard all along, a batch's request mix changes
slowly, clocks and load drift. The per-cycle spread (``sd / sqrt(cycles)``, or the chain's
binomial variance for acceptance) then understates how far a run's mean lies from what another run
of the same server would measure. *Overlapping batch means* estimate the standard error from the
cycle sequence itself, whatever the correlation, as long as a batch is longer than it:

    sigma^2 = n b / ((n - b + 1)(n - b)) * sum_j (Y_j(b) - Y)^2,   SE = sqrt(sigma^2 / n)

over the ``n - b + 1`` overlapping batches of ``b`` consecutive values, ``Y_j(b)`` their means and
``Y`` the overall mean (Meketon and Schmeiser, "Overlapping batch means: something for nothing?",
Winter Simulation Conference 1984, eq. for the OBM estimator; Flyvbjerg and Petersen, J. Chem.
Phys. 91, 461 (1989), for the blocking argument). Here the values are the means of blocks of
:data:`BLOCK` cycles, so memory grows by two numbers per block, and ``b = n // BATCHES`` blocks:
with 8 batch lengths per run the estimate's relative spread is about 40% (variance of the OBM
estimator ``~ 4 b / 3 n`` relative), and a correlation longer than an eighth of the run is not seen.

Usage::

    s = CycleSeries()
    s.add(accept_len, period_ms)             # one cycle (per-line path), or
    s.add_arrays(accept_lens, periods_ms)    # a chunk's cycles of one group, in order
    s.standard_errors()                      # {"accept_len": tokens, "period_ms": ms, ...} or None
"""

from __future__ import annotations

from array import array
from typing import Optional

import numpy as np

#: cycles averaged into one stored block
BLOCK = 8
#: a batch spans 1/BATCHES of the stored blocks
BATCHES = 8
#: fewest stored blocks behind a standard error (16 blocks: 128 cycles)
MIN_BLOCKS = 16
#: an aggregated line (``n=``) standing for more cycles than this stops the series (its cycles'
#: order is unknown)
MAX_REPEAT = 4096


def obm_standard_error(values: np.ndarray, batch: int) -> float:
    """Overlapping-batch-means standard error of ``values.mean()`` (module docstring).

    Args:
        values: shape ``(n,)``, in sequence order, ``n > batch >= 1``.
        batch: values per batch.

    Raises:
        ValueError: ``batch`` not in ``1..n-1``.
    """
    n = len(values)
    if not 1 <= batch < n:
        raise ValueError(f"batch {batch} not in 1..{n - 1}")
    csum = np.concatenate(([0.0], np.cumsum(values, dtype=float)))
    means = (csum[batch:] - csum[:-batch]) / batch          # n - batch + 1 batch means
    dev = means - csum[-1] / n
    var = n * batch / ((n - batch + 1) * (n - batch)) * float(dev @ dev)
    return float(np.sqrt(max(var, 0.0) / n))


class CycleSeries:
    """Per-cycle accept length (tokens, mean over the batch's requests) and period (ms, ``total_ms``
    plus ``gap_ms`` where logged), kept as means of :data:`BLOCK` consecutive cycles.

    A cycle without an accept length is left out of both series; an aggregated record standing for
    more than :data:`MAX_REPEAT` cycles ends the series (``standard_errors`` then returns None).
    """

    __slots__ = ("_acc", "_per", "_pend_acc", "_pend_per", "broken")

    def __init__(self) -> None:
        self._acc = array("d")
        self._per = array("d")
        self._pend_acc: list[float] = []
        self._pend_per: list[float] = []
        self.broken = False

    def add(self, accept_len: Optional[float], period_ms: Optional[float], weight: int = 1) -> None:
        """One record: ``weight`` cycles at these values (an aggregated line counts as its mean)."""
        if self.broken or accept_len is None or period_ms is None:
            return
        if weight > MAX_REPEAT:
            self.broken = True
            return
        for _ in range(max(1, int(weight))):
            self._pend_acc.append(accept_len)
            self._pend_per.append(period_ms)
        if len(self._pend_acc) >= BLOCK:
            self._flush()

    def add_arrays(self, accept_len: np.ndarray, period_ms: np.ndarray) -> None:
        """A chunk's cycles of one group, in file order (shape ``(n,)`` each; a cycle whose accept
        length or period is NaN is left out)."""
        if self.broken:
            return
        keep = ~(np.isnan(accept_len) | np.isnan(period_ms))
        a, p = accept_len[keep], period_ms[keep]
        if self._pend_acc:
            a = np.concatenate((np.asarray(self._pend_acc, dtype=float), a))
            p = np.concatenate((np.asarray(self._pend_per, dtype=float), p))
        k = len(a) // BLOCK
        if k:
            self._acc.frombytes(a[:k * BLOCK].reshape(k, BLOCK).mean(axis=1).tobytes())
            self._per.frombytes(p[:k * BLOCK].reshape(k, BLOCK).mean(axis=1).tobytes())
        self._pend_acc = a[k * BLOCK:].tolist()
        self._pend_per = p[k * BLOCK:].tolist()

    def _flush(self) -> None:
        k = len(self._pend_acc) // BLOCK
        if not k:
            return
        a = np.asarray(self._pend_acc[:k * BLOCK], dtype=float).reshape(k, BLOCK).mean(axis=1)
        p = np.asarray(self._pend_per[:k * BLOCK], dtype=float).reshape(k, BLOCK).mean(axis=1)
        self._acc.extend(a.tolist())
        self._per.extend(p.tolist())
        del self._pend_acc[:k * BLOCK]
        del self._pend_per[:k * BLOCK]

    @property
    def blocks(self) -> int:
        return len(self._acc)

    def standard_errors(self) -> Optional[dict]:
        """``{"accept_len": SE (tokens), "period_ms": SE (ms), "batch_cycles": cycles per batch,
        "cycles": cycles in the series}`` by overlapping batch means over the stored blocks (the
        last partial block left out); None with fewer than :data:`MIN_BLOCKS` blocks or a broken
        series."""
        nb = len(self._acc)
        if self.broken or nb < MIN_BLOCKS:
            return None
        b = max(1, nb // BATCHES)
        acc = np.frombuffer(self._acc, dtype=float)
        per = np.frombuffer(self._per, dtype=float)
        return {"accept_len": obm_standard_error(acc, b), "period_ms": obm_standard_error(per, b),
                "batch_cycles": b * BLOCK, "cycles": nb * BLOCK}
