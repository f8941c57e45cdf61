"""Stock SGLang "Decode batch" lines: parse every known shape, drop TP repeats, keep running means.

SGLang's scheduler prints one line per ``--decode-log-interval`` decode batches (default 40);
with speculative decoding it carries the interval's accept length and accept rate::

    [2026-11-30 10:02:11 TP0] Decode batch, #running-req: 1, #token: 1834, token usage: 0.01, \
accept len: 2.31, accept rate: 0.26, cuda graph: True, gen throughput (token/s): 71.30, #queue-req: 0

Shapes read (``shared/data/logs/README.md``): ``Decode batch.`` (0.5.x before the scheduler split,
often with a trailing ``", "``) or ``Decode batch,`` (0.5.23), an optional `` [iteration]``, no
speculative fields (a no-speculation server), ``cap len``, any ``<backend> graph`` label, the
hybrid-SWA ``#full token``/``#swa token`` fields, and a ``[DATE TIME TPn]`` or Python-logging
``DATE TIME LEVEL PID [file:line]`` prefix. A line is a decode interval only when it has
``#running-req``, ``gen throughput (token/s)`` and ``#queue-req`` (the last field, so a truncated
line is caught); accept fields are optional.

Units and definitions (SGLang 0.5.23, ``metrics_reporter.py``): accept len = committed tokens
(bonus included) / requests summed over the interval; accept rate = accepted drafts /
(requests x (num_draft_tokens - 1)); gen throughput in tokens/s of the whole server.

Several tensor-parallel ranks can print the same interval (README, "Per-cycle timing"): :class:`DecodeBatchStats`
counts it once. Usage::

    stats = DecodeBatchStats()
    for line in lines:
        if is_decode_line(line):
            d = parse_decode_batch(line)     # None for a damaged line
            if d is not None:
                stats.add(d)
    stats.summary()   # {"decode_lines_seen": .., "intervals": .., "accept_len_mean": .., ...}
"""

from __future__ import annotations

import math
import re
from array import array
from collections import deque
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

from .argtypes import MAX_STEPS, MIN_STOCK_INTERVALS

MARKER = "Decode batch"

#: How many recent intervals a repeat from another rank is looked for in (ranks log within a few lines).
TP_REPEAT_WINDOW = 64

_HEAD_RE = re.compile(r"Decode batch(?: \[(\d+)\])?[.,]")
# "[2026-11-30 10:02:13 TP1] " -> "TP1"; "[2026-11-30 10:02:13 DP0 TP1 EP1] " -> "DP0 TP1 EP1"
_BRACKET_PREFIX_RE = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?(?: ([^\]]+))?\]")
# "2026-11-12 09:16:53 INFO 151972 [file.py:287] " -> "pid 151972"
_LOGGING_PREFIX_RE = re.compile(r"(?<![\d-])\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)? [A-Z]+ (\d+) ")


@dataclass(frozen=True, slots=True)
class DecodeBatch:
    """One stock "Decode batch" interval.

    Attributes:
        running_req: ``#running-req``, requests in the batch at print time.
        gen_tok_s: ``gen throughput (token/s)`` of the interval (tokens/s, whole server).
        accept_len: ``accept len`` (tokens per request per verify, bonus included); None without
            speculative decoding.
        accept_rate: ``accept rate`` (SGLang 0.5.23 definition, see module doc); None when absent.
        graph: the ``<backend> graph`` flag, None when absent.
        queue_req: ``#queue-req``.
        rank: the printing process (``TP1``, ``DP0 TP1``, ``pid 151972``), None when the prefix names none.
        body: the text after ``Decode batch``: equal bodies from different ranks are one interval.
    """

    running_req: int
    gen_tok_s: float
    accept_len: Optional[float]
    accept_rate: Optional[float]
    graph: Optional[bool]
    queue_req: int
    rank: Optional[str]
    body: str


def is_decode_line(line: str) -> bool:
    """True when ``line`` looks like a stock decode-interval line (whether or not it parses)."""
    return MARKER in line


def _rank_label(prefix: str) -> Optional[str]:
    """The printing process named by SGLang's own prefix, the last one in ``prefix``: what a collector
    puts before it (``docker logs --timestamps``, ``kubectl logs --prefix``, journald) is not it."""
    m = None
    for m in _BRACKET_PREFIX_RE.finditer(prefix):
        pass
    if m is not None:
        return m.group(1)
    for m in _LOGGING_PREFIX_RE.finditer(prefix):
        pass
    return f"pid {m.group(1)}" if m is not None else None


def _finite_non_negative(x: Optional[float]) -> bool:
    """None (field absent), or a finite value >= 0 (False for nan and inf)."""
    return x is None or (math.isfinite(x) and x >= 0.0)


def parse_decode_batch(line: str) -> Optional[DecodeBatch]:
    """Parse one stock "Decode batch" line of any shape listed in the module doc.

    Returns:
        The :class:`DecodeBatch`, or None when the line is not a decode line or is damaged
        (truncated, a required field missing, a value that is not a number, a negative count
        or rate, nan or inf). Never raises.
    """
    m = _HEAD_RE.search(line)
    if m is None or line.count(MARKER) > 1:   # two lines run together: later fields would overwrite
        return None
    body = line[m.start() + len(MARKER):].rstrip()
    fields: dict[str, str] = {}
    for item in line[m.end():].split(","):
        key, sep, value = item.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    try:
        running = int(fields["#running-req"])
        gen = float(fields["gen throughput (token/s)"])
        queue = int(fields["#queue-req"])
        acc_len = float(fields["accept len"]) if "accept len" in fields else None
        acc_rate = float(fields["accept rate"]) if "accept rate" in fields else None
    except (KeyError, ValueError):
        return None
    # no SGLang prints negative counts or nan/inf. The accept rate can pass 1: with adaptive depth its
    # denominator uses the launch depth while a deeper candidate runs
    if min(running, queue) < 0 or not all(_finite_non_negative(x) for x in (gen, acc_len, acc_rate)):
        return None
    graph = None
    for key, value in fields.items():
        if key.endswith(" graph"):
            graph = value == "True"
    return DecodeBatch(running, gen, acc_len, acc_rate, graph, queue, _rank_label(line[: m.start()]), body)


class _Mean:
    __slots__ = ("total", "count")

    def __init__(self) -> None:
        self.total = 0.0
        self.count = 0

    def add(self, x: float) -> None:
        self.total += x
        self.count += 1

    def merge(self, other: "_Mean") -> None:
        self.total += other.total
        self.count += other.count

    @property
    def value(self) -> Optional[float]:
        return round(self.total / self.count, 6) if self.count else None


class _SeriesMean(_Mean):
    """A :class:`_Mean` that also keeps its values in order (one float per interval)."""

    __slots__ = ("values",)

    def __init__(self) -> None:
        super().__init__()
        self.values = array("d")

    def add(self, x: float) -> None:
        super().add(x)
        self.values.append(x)

    def merge(self, other: "_Mean") -> None:
        super().merge(other)
        self.values.extend(getattr(other, "values", ()))


#: fewest speculative Decode batch intervals at one batch size behind a standard error of their mean
MIN_SE_INTERVALS = 16
#: a batch size's stock gen throughput whose 90th percentile is over this many times its 10th
#: (over at least SPREAD_MIN_INTERVALS intervals) is one whose intervals hold idle time or other
#: work (:meth:`DecodeBatchStats.spread`, inspect's ``stock_throughput_spread``)
SPREAD_RATIO = 2.0
SPREAD_MIN_INTERVALS = 8
#: an interval whose time (its accept length over its gen throughput; one over it without
#: speculation) is above this multiple of the low median at its batch size held idle time, and is left
#: out of the per-batch-size throughputs: SGLang divides an interval's tokens by the time since its
#: previous line, idle included, so the first line after a pause reads a fraction of a token per
#: second (a public EAGLE-3 report's 0.39 tok/s before 166-189; taken in proportion to its time, it
#: had put a 90 tok/s run at 2.6). A longer interval from prefills between the decode batches stays
IDLE_FACTOR = 5.0
EMPTY_REASON = "#running-req 0"
IDLE_REASON = "idle time in the interval (a gen throughput of 0.00, or its time over 5x the low median at its batch size)"


def _busy(a: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Mask of the intervals of accept lengths ``a`` (ones without speculation) and gen throughputs
    ``r`` (tok/s) that held no idle time: time ``a / r`` at most :data:`IDLE_FACTOR` times the
    low median (a throughput of 0 or less is all idle). The low median, the smaller middle value of an
    even count, so that of two intervals the idle one is told by the other: their mean had been the
    median, and a log's first two lines at 0.39 and 178.9 tok/s were both kept (helper 43)."""
    if not len(r):
        return np.ones(0, dtype=bool)
    t = np.where(r > 0, a / np.where(r > 0, r, 1.0), np.inf)
    fin = np.isfinite(t)
    if not fin.any():
        return fin
    tf = t[fin]
    k = (len(tf) - 1) // 2
    return fin & (t <= IDLE_FACTOR * float(np.partition(tf, k)[k]))


#: half the last printed digit of SGLang's ``accept len`` / ``accept rate`` (``{:.2f}``)
PRINTED_HALF_STEP = 0.005


@dataclass
class _Range:
    """A closed range narrowed line by line (the values every line so far allows), empty once ``lo > hi``."""

    lo: float = 0.0
    hi: float = math.inf

    def meet(self, lo: float, hi: float) -> None:
        self.lo, self.hi = max(self.lo, lo), min(self.hi, hi)

    def holds(self, x: float) -> bool:
        return self.lo - 1e-9 <= x <= self.hi + 1e-9


class DecodeBatchStats:
    """Counts and unweighted means of decode intervals from one log (or several, via :meth:`merge`).

    An interval printed by several ranks (same text after ``Decode batch``, different rank label,
    within :data:`TP_REPEAT_WINDOW` intervals) counts once. Lines with no rank label are never
    treated as repeats. Memory: a few numbers per batch size, one per speculative interval (for the
    standard error of its mean), plus the repeat window.
    """

    def __init__(self) -> None:
        self.lines_seen = 0
        self.intervals = 0
        self.accept_len = _Mean()
        self.accept_rate = _Mean()
        self.gen_tok_s = _Mean()
        #: ``{running_req: mean gen tok/s}`` of intervals without / with speculative fields.
        self.gen_tok_s_by_bs_plain: dict[int, _SeriesMean] = {}
        self.gen_tok_s_by_bs_spec: dict[int, _SeriesMean] = {}   # in log order (spec_run_by_bs)
        self.accept_len_by_bs_spec: dict[int, _SeriesMean] = {}  # beside it, interval for interval
        self.all_accepted = True  # every interval with an accept rate had accept rate 1.0
        #: ``#running-req`` of each counted interval in log order, with / without speculative fields
        #: (:func:`plateaus`: a wandering load switches between batch sizes, a steady one does not)
        self.labels_spec = array("i")
        self.labels_plain = array("i")
        #: num_draft_tokens - 1 every interval's printed accept len and accept rate allow (their
        #: intersection; :meth:`inferred_draft_tokens`), and how many intervals narrowed it
        self.drafts_per_verify, self.ndt_intervals = _Range(), 0
        #: num_draft_tokens the same intervals allow read as an older SGLang's ``accept rate = accept len /
        #: num_draft_tokens`` (their intersection): where one fits too, the lines do not say which rate they
        #: print, and pin no depth
        self.old_draft_tokens = _Range()
        #: intervals whose printed accept rate is above 1: no fixed depth prints one (accepted drafts are at
        #: most num_draft_tokens - 1), an adaptive server running deeper than its launch depth does (SGLang
        #: divides by the launch num_draft_tokens - 1), so its lines fit the launch value, not the depths run
        self.ndt_over_one = 0
        self._recent: deque[tuple[str, set]] = deque(maxlen=TP_REPEAT_WINDOW)

    def _is_repeat(self, d: DecodeBatch) -> bool:
        if d.rank is None:
            return False
        for body, ranks in reversed(self._recent):
            if body == d.body and d.rank not in ranks:
                ranks.add(d.rank)
                return True
        self._recent.append((d.body, {d.rank}))
        return False

    def add(self, d: DecodeBatch) -> bool:
        """Count one parsed line; returns False when it repeats an interval another rank printed."""
        self.lines_seen += 1
        if self._is_repeat(d):
            return False
        self.intervals += 1
        # ``#running-req: 0`` (an idle data-parallel rank, a server between requests): no request
        # decoded, its accept length and throughput say nothing; in no headline mean, and the
        # per-batch-size readers leave batch size 0 out as idle
        empty = d.running_req <= 0
        if not empty:
            self.gen_tok_s.add(d.gen_tok_s)
        if d.accept_len is not None:
            if not empty:
                self.accept_len.add(d.accept_len)
            self.gen_tok_s_by_bs_spec.setdefault(d.running_req, _SeriesMean()).add(d.gen_tok_s)
            self.accept_len_by_bs_spec.setdefault(d.running_req, _SeriesMean()).add(d.accept_len)
            self.labels_spec.append(_label(d.running_req))
        else:
            self.gen_tok_s_by_bs_plain.setdefault(d.running_req, _SeriesMean()).add(d.gen_tok_s)
            self.labels_plain.append(_label(d.running_req))
        if d.accept_rate is not None and not empty:
            self.accept_rate.add(d.accept_rate)
            self.all_accepted = self.all_accepted and d.accept_rate >= 0.995
            if d.accept_len is not None:
                self._narrow_ndt(d.accept_len, d.accept_rate)
        return True

    def _narrow_ndt(self, accept_len: float, accept_rate: float) -> None:
        """SGLang 0.5.23 prints ``accept rate = (accept len - 1) / (num_draft_tokens - 1)`` (both per
        request and interval, to 2 decimals): the range of ``num_draft_tokens - 1`` this line allows,
        intersected with the others'. A line with nothing accepted (1.00, 0.00) allows any."""
        half = PRINTED_HALF_STEP
        drafts_hi, drafts_lo = accept_len + half - 1.0, max(0.0, accept_len - half - 1.0)
        rate_hi, rate_lo = accept_rate + half, accept_rate - half
        if drafts_lo <= 0.0 and rate_lo <= 0.0:
            return
        self.ndt_intervals += 1
        if rate_lo > 1.0:
            self.ndt_over_one += 1
        self.drafts_per_verify.meet(drafts_lo / rate_hi, drafts_hi / rate_lo if rate_lo > 0 else math.inf)
        # the same line under the older rate, accept len / num_draft_tokens (0.5.x before, with either
        # "Decode batch." or "Decode batch,"): a steady accept length fits one value there too (accept len
        # 1.50, accept rate 0.25 at num_draft_tokens 6 reads as 3 under 0.5.23's rate)
        self.old_draft_tokens.meet(max(0.0, accept_len - half) / rate_hi,
                                   (accept_len + half) / rate_lo if rate_lo > 0 else math.inf)

    def inferred_draft_tokens(self, max_steps: int, min_intervals: int = 3) -> Optional[int]:
        """``num_draft_tokens`` when one value alone fits every speculative interval's printed accept
        len and accept rate (:meth:`_narrow_ndt`; at least ``min_intervals`` that say something),
        with ``num_draft_tokens - 1`` in ``1..max_steps``; else None (too few lines, lines of another
        SGLang's accept rate, several servers' lines mixed, or a range holding several values). Also
        None where the older rate, ``accept len / num_draft_tokens``, fits every line at another value:
        a steady accept length fits one value under either rate, and the lines do not say which they print;
        and None where a line's accept rate is above 1 (an adaptive server running deeper than its launch
        depth: its lines fit the launch num_draft_tokens, not the depths it ran). Why it is None:
        :meth:`draft_tokens_unknown`."""
        return self._draft_tokens(max_steps, min_intervals)[0]

    def draft_tokens_unknown(self, max_steps: int, min_intervals: int = 3) -> Optional[str]:
        """Why :meth:`inferred_draft_tokens` pins no ``num_draft_tokens``, in words (e.g. "no one
        num_draft_tokens fits every line: lines of several servers, or of another SGLang's accept
        rate"); None where it pins one."""
        return self._draft_tokens(max_steps, min_intervals)[1]

    def _draft_tokens(self, max_steps: int, min_intervals: int) -> tuple[Optional[int], Optional[str]]:
        """``(num_draft_tokens, None)`` or ``(None, why)`` (:meth:`inferred_draft_tokens`)."""
        if self.ndt_intervals < min_intervals:
            return None, (f"{self.ndt_intervals} interval{'s' if self.ndt_intervals != 1 else ''} whose accept len "
                          f"and rate say something, fewer than {min_intervals}")
        if self.ndt_over_one:
            return None, (f"{self.ndt_over_one} interval{'s' if self.ndt_over_one != 1 else ''} print an accept rate "
                          "above 1 (an adaptive server's, running deeper than its launch depth)")
        # max_steps + 1 counted too: a range that also holds a value above max_steps (a tree of more
        # draft tokens; an open range) does not pin its one value inside, max_steps
        fits = [n for n in range(1, max_steps + 2) if self.drafts_per_verify.holds(n)]
        if not fits:
            return None, ("no one num_draft_tokens fits every line: lines of several servers at different depths, "
                          "or of another SGLang's accept rate")
        if len(fits) != 1 or fits[0] > max_steps:
            top = "more" if fits[-1] > max_steps else str(fits[-1] + 1)
            return None, f"num_draft_tokens {fits[0] + 1} to {top} all fit every line"
        # lines that an older SGLang's rate (accept len / num_draft_tokens) fits at another value say
        # nothing of which one ran: refused, not guessed
        other = [n for n in range(2, max_steps + 2) if self.old_draft_tokens.holds(n) and n != fits[0] + 1]
        if other:
            return None, (f"num_draft_tokens {fits[0] + 1} fits every line under SGLang 0.5.23's rate, {other[0]} "
                          "under the older accept len / num_draft_tokens, and the lines do not say which they print")
        return fits[0] + 1, None

    @property
    def speculative_intervals(self) -> int:
        """Intervals whose lines give an accept length, ``#running-req: 0`` ones included (in no mean,
        yet they say the server speculates)."""
        return sum(m.count for m in self.gen_tok_s_by_bs_spec.values())

    def merge(self, other: "DecodeBatchStats") -> None:
        """Add another log's counts (the repeat window is per log and is not merged)."""
        self.lines_seen += other.lines_seen
        self.intervals += other.intervals
        self.accept_len.merge(other.accept_len)
        self.accept_rate.merge(other.accept_rate)
        self.gen_tok_s.merge(other.gen_tok_s)
        for mine, theirs, kind in ((self.gen_tok_s_by_bs_plain, other.gen_tok_s_by_bs_plain, _SeriesMean),
                                   (self.gen_tok_s_by_bs_spec, other.gen_tok_s_by_bs_spec, _SeriesMean),
                                   (self.accept_len_by_bs_spec, other.accept_len_by_bs_spec, _SeriesMean)):
            for bs, mean in theirs.items():
                mine.setdefault(bs, kind()).merge(mean)
        self.all_accepted = self.all_accepted and other.all_accepted
        self.drafts_per_verify.meet(other.drafts_per_verify.lo, other.drafts_per_verify.hi)
        self.ndt_intervals += other.ndt_intervals
        self.old_draft_tokens.meet(other.old_draft_tokens.lo, other.old_draft_tokens.hi)
        self.ndt_over_one += other.ndt_over_one
        self.labels_spec.extend(other.labels_spec)
        self.labels_plain.extend(other.labels_plain)

    def series(self, bs: int, spec: bool) -> tuple[np.ndarray, np.ndarray]:
        """``(gen tok/s, accept lengths)`` of the intervals at ``bs`` in log order, speculative
        ones or not (accept lengths of 1 for those without speculation, or where none was read)."""
        r = np.frombuffer((self.gen_tok_s_by_bs_spec if spec else self.gen_tok_s_by_bs_plain)[bs].values, dtype=float)
        acc = self.accept_len_by_bs_spec.get(bs) if spec else None
        return r, (np.frombuffer(acc.values, dtype=float) if acc is not None else np.ones_like(r))

    def summary(self) -> dict[str, Any]:
        """The ``decode_batch`` part of the inspect document (means unweighted over intervals), with
        ``by_bs`` (:meth:`by_bs`), ``intervals_idle`` (:meth:`idle_intervals`) and
        ``num_draft_tokens_inferred`` (:meth:`inferred_draft_tokens`: the one num_draft_tokens every
        interval's accept len and accept rate fit, else None)."""
        return {
            "decode_lines_seen": self.lines_seen,
            "intervals": self.intervals,
            "intervals_with_accept": self.accept_len.count,
            "accept_len_mean": self.accept_len.value,
            "accept_rate_mean": self.accept_rate.value,
            "gen_tok_s_mean": self.gen_tok_s.value,
            "num_draft_tokens_inferred": self.inferred_draft_tokens(MAX_STEPS),
            **dict(zip(("by_bs", "intervals_idle"), self._per_bs())),
        }

    def by_bs(self) -> list[dict[str, Any]]:
        """Per batch size (``#running-req``) and kind of server, ascending: ``{"bs", "speculative",
        "intervals", "accept_len_mean", "gen_tok_s"}``.

        The pooled means mix every batch size the load passed through (a ramp as clients connect
        runs at a fraction of the plateau's throughput). Speculative intervals give their
        throughput over the intervals together and their mean accept length, as ``advise`` reads
        a run (:func:`spec_run_by_bs`: impossible values left out, so ``intervals`` counts the ones
        used); intervals without speculative fields (a no-spec server) their gen throughput over the intervals together (:meth:`plain_by_bs`),
        the baseline ``advise`` takes, and ``accept_len_mean`` None.
        """
        return self._per_bs()[0]

    def _per_bs(self) -> tuple[list[dict[str, Any]], int]:
        """``(by_bs rows, idle intervals left out of them)`` from one pass over the series."""
        rows = []
        spec, dropped = spec_run_by_bs(self)
        for bs, (tok, acc, _se, n) in spec.items():
            rows.append({"bs": bs, "speculative": True, "intervals": n, "accept_len_mean": round(acc, 6),
                         "gen_tok_s": round(tok, 6)})
        plain = self.plain_by_bs()
        for bs, (tok, n) in plain.items():
            rows.append({"bs": bs, "speculative": False, "intervals": n, "accept_len_mean": None,
                         "gen_tok_s": tok})
        idle = (dropped.get(IDLE_REASON, 0) + dropped.get(EMPTY_REASON, 0) + self._plain_count()
                - sum(n for _tok, n in plain.values()))
        return sorted(rows, key=lambda r: (r["bs"], r["speculative"])), idle

    def _plain_count(self) -> int:
        return sum(m.count for m in self.gen_tok_s_by_bs_plain.values())

    def plain_by_bs(self) -> dict[int, tuple[Optional[float], int]]:
        """``{batch size: (gen tok/s, intervals used)}`` of intervals without speculative fields,
        those that held idle time left out (:data:`IDLE_FACTOR`). The throughput is over the
        intervals together, tokens over seconds, as :func:`spec_run_by_bs` takes a run's: each
        interval is the same number of decode forwards at its batch size, so the same tokens, and
        its time is one over its rate (the harmonic mean ``n / sum(1 / r_i)``). Their plain mean
        had weighed a short fast interval as much as a long slow one: one line at 2,000 tok/s among
        thirty at 297 put the baseline at 351.9, not 305.4 (helper 49)."""
        out = {}
        for bs in sorted(self.gen_tok_s_by_bs_plain):
            if bs < 1:   # #running-req 0: idle
                continue
            r, a = self.series(bs, spec=False)
            r = r[_busy(a, r)]   # rates above 0 only
            out[bs] = (round(float(len(r) / (1.0 / r).sum()), 6) if len(r) else None, int(len(r)))
        return out

    def plain_tok_s_by_bs(self) -> dict[int, float]:
        """``{batch size: mean gen tok/s}`` of intervals without speculative fields (a baseline
        server), intervals that held idle time left out (:data:`IDLE_FACTOR`)."""
        return {bs: tok for bs, (tok, _n) in self.plain_by_bs().items()}

    def spread(self, min_intervals: int = SPREAD_MIN_INTERVALS) -> list[tuple[int, bool, float, float, int, float]]:
        """``[(bs, speculative, p10, p90, intervals, p50)]``: batch sizes of at least ``min_intervals``
        intervals, those that held idle time left out (:func:`_busy`), whose decode-step rate's 90th
        percentile is over :data:`SPREAD_RATIO` times its 10th. The rate is the gen throughput over
        the accept length (steps per second, times the batch; the gen throughput itself without
        speculation): a steady server's differ by a few percent, while its throughput at bs 1 swings
        with each request's accept length (1.2-3.3 tokens for text of mixed difficulty). A client
        that pauses between requests, too briefly for :data:`IDLE_FACTOR`, leaves the rest."""
        out = []
        for spec, by in ((True, self.gen_tok_s_by_bs_spec), (False, self.gen_tok_s_by_bs_plain)):
            for bs in sorted(by):
                r, a = self.series(bs, spec)
                if len(a) != len(r):
                    continue
                ok = np.isfinite(a) & (a >= 1.0)
                r, a = r[ok], a[ok]
                busy = _busy(a, r)
                rate = r[busy] / a[busy]
                if len(rate) < min_intervals:
                    continue
                p10, p50, p90 = (float(x) for x in np.percentile(rate, [10, 50, 90]))
                if p90 > SPREAD_RATIO * max(p10, 1e-12):
                    out.append((bs, spec, p10, p90, int(len(rate)), p50))
        return out

    def relabelled(self, mapping: dict[int, int]) -> "DecodeBatchStats":
        """A copy whose per-batch-size series hold, under each target batch size, the intervals of
        every batch size ``mapping`` sends there (in batch-size order); batch sizes ``mapping``
        leaves out are dropped. The pooled counts and means are not copied (per batch size only)."""
        out = DecodeBatchStats()
        for mine, theirs in ((out.gen_tok_s_by_bs_plain, self.gen_tok_s_by_bs_plain),
                             (out.gen_tok_s_by_bs_spec, self.gen_tok_s_by_bs_spec),
                             (out.accept_len_by_bs_spec, self.accept_len_by_bs_spec)):
            for bs, series in sorted(theirs.items()):
                if bs in mapping:
                    mine.setdefault(mapping[bs], _SeriesMean()).merge(series)
        return out

    def idle_intervals(self) -> int:
        """Intervals left out of :meth:`by_bs` as holding idle time (:data:`IDLE_FACTOR`)."""
        return self._per_bs()[1]

    def plain_idle_intervals(self) -> int:
        """Intervals without speculative fields left out of :meth:`plain_tok_s_by_bs` as idle."""
        return self._plain_count() - sum(n for _tok, n in self.plain_by_bs().values())

    def spec_tok_s_by_bs(self) -> dict[int, float]:
        """``{batch size: gen tok/s}`` of intervals with speculative fields: the figure :meth:`by_bs`
        gives, the throughput over the intervals together (:func:`spec_run_by_bs`: impossible values
        and intervals that held idle time left out). A plain mean over the intervals weighs a short
        fast one as much as a long slow one, and read the baseline check differently from the table."""
        return {bs: round(tok, 6) for bs, (tok, _acc, _se, _n) in spec_run_by_bs(self)[0].items()}

    def spec_run_sizes(self) -> dict[int, int]:
        """``{batch size: the batch size advise makes its run at}`` for these speculative intervals:
        those of :meth:`spec_tok_s_by_bs` less a ramp's or drain's (:func:`steady_batch_sizes`), each
        member of a plateau sent to the one it is pooled as (:func:`plateaus`). What a bare baseline
        is placed by, in ``inspect --baseline`` as in advise (a serving log's few intervals at the
        batch sizes it passed while clients connected count as no batch size)."""
        kept, _dropped, _few, pooled = steady_spec_runs(self)
        return {bs: pooled.get(bs, bs) for bs in sorted(kept)}


def spec_run_by_bs(stats: DecodeBatchStats, max_accept: Optional[float] = None
                   ) -> tuple[dict[int, tuple[float, float, Optional[float], int]], dict[str, int]]:
    """Per batch size, what its speculative intervals say of the run: ``({bs: (tok_s, accept_len,
    tok_s_se, intervals)}, {why: intervals left out})``.

    ``tok_s`` (tok/s) is the throughput over the intervals together, ``sum(a_i) / sum(a_i / r_i)``
    for intervals of gen throughput ``r_i`` and accept length ``a_i``: SGLang prints one line per
    fixed number of decode forwards, so an interval's tokens are in proportion to its accept length
    and its time to that over its rate. An interval whose rate is far off the others' (a clock
    glitch, a tiny interval) moves it by its share of the time, not of the count: one line at 2,000
    tok/s among thirty at 297 moves the plain mean by 18%, this by 3%. ``accept_len`` is the mean
    over the intervals (each the same number of forwards). ``tok_s_se``: overlapping batch means of
    the ratio's linearised terms (:func:`.series.obm_standard_error`), None below
    :data:`MIN_SE_INTERVALS` intervals.

    Left out, and counted by reason: a gen throughput outside ``MIN_TOK_S..MAX_TOK_S``, an accept
    length below 1 or above ``max_accept`` (``num_steps + 1`` for chain drafting), a batch size
    below 1 or above ``MAX_BS``; then an interval that held idle time (:data:`IDLE_FACTOR`: the
    first line after a pause, whose throughput counts the pause, would otherwise carry most of
    the run's time).
    """
    from .argtypes import MAX_BS, MAX_TOK_S, MIN_TOK_S

    out: dict[int, tuple[float, float, Optional[float], int]] = {}
    dropped: dict[str, int] = {}

    def drop(why: str, count: int) -> None:
        if count:
            dropped[why] = dropped.get(why, 0) + count

    for bs in sorted(stats.gen_tok_s_by_bs_spec):
        r, a = stats.series(bs, spec=True)
        if not 1 <= bs <= MAX_BS:
            drop(EMPTY_REASON if bs < 1 else f"#running-req above {MAX_BS}", len(r))
            continue
        # a throughput under MIN_TOK_S (0.00 in the log) is an interval that was all idle
        slow = np.isfinite(r) & (r < MIN_TOK_S)
        drop(IDLE_REASON, int(slow.sum()))
        rate_ok = np.isfinite(r) & (r >= MIN_TOK_S) & (r <= MAX_TOK_S)
        acc_ok = np.isfinite(a) & (a >= 1.0) & (a <= (max_accept if max_accept is not None else np.inf) + 1e-9)
        drop(f"gen throughput outside {MIN_TOK_S:g}-{MAX_TOK_S:.0e} tok/s", int((~rate_ok & ~slow).sum()))
        drop("accept len below 1" + (f" or above {max_accept:g}" if max_accept is not None else ""),
             int((rate_ok & ~acc_ok).sum()))
        keep = rate_ok & acc_ok
        r, a = r[keep], a[keep]
        busy = _busy(a, r)
        drop(IDLE_REASON, int((~busy).sum()))
        r, a = r[busy], a[busy]
        if not len(r):
            continue
        t = a / r
        tok = float(a.sum() / t.sum())
        se = None
        if len(r) >= MIN_SE_INTERVALS:
            from .series import BATCHES, obm_standard_error

            se = obm_standard_error((a - tok * t) / t.mean(), max(1, len(r) // BATCHES))
        out[bs] = (tok, float(a.mean()), se, int(len(r)))
    return out, dropped


#: ``speculative_<name>`` in SGLang's start-up ``server_args=`` line, in both shapes it has had:
#: ``ServerArgs(..., speculative_num_steps=3, ...)`` and 0.5.23's ``{..., 'speculative_num_steps': 3, ...}``
_SPEC_ARG = re.compile(r"""['"]?speculative_(algorithm|num_steps|eagle_topk|num_draft_tokens|adaptive)['"]?\s*"""
                       r"""[=:]\s*(?:'(\w+)'|"(\w+)"|(-?\d+)|(True|False)|None)""")


#: the target's ``model_path`` in a start-up ``server_args=`` line, in both shapes (``model_path='x'``,
#: ``'model_path': 'x'``); not ``speculative_draft_model_path`` nor ``tokenizer_path``
_MODEL_ARG = re.compile(r"""(?<![\w])['"]?model_path['"]?\s*[=:]\s*(?:'([^']*)'|"([^"]*)")""")


def target_model_path(line: str) -> Optional[str]:
    """The target ``model_path`` a start-up ``server_args=`` line names, else None."""
    m = _MODEL_ARG.search(line)
    return None if m is None else (m.group(1) if m.group(1) is not None else m.group(2))


def _label(bs: int) -> int:
    """``bs`` as a C int for the label arrays (out-of-range values, which every reader refuses, clipped)."""
    return max(-(2 ** 31), min(2 ** 31 - 1, int(bs)))


#: a plateau spans at most this ratio of its smallest batch size (or 2 above it): one interval's
#: worth of wandering, not a ramp's
PLATEAU_SPAN = 1.25
#: two batch sizes are one plateau when the load switched between them (in log order, their
#: intervals next to each other) at least this share of the fewer intervals' count, and twice
PLATEAU_SWITCH_SHARE = 0.2


def steady_spec_runs(stats: DecodeBatchStats, max_accept: Optional[float] = None
                     ) -> tuple[dict[int, tuple[float, float, Optional[float], int]], dict[str, int], int, dict[int, int]]:
    """The speculative intervals of ``stats`` at the batch sizes a run is made at: ``(by_bs,
    dropped, few, pooled)``.

    ``by_bs`` and ``dropped`` are :func:`spec_run_by_bs`'s (``max_accept`` as there) less the batch
    sizes of a ramp or drain (:func:`steady_batch_sizes`; ``few`` counts their intervals);
    ``pooled`` maps each kept batch size to the one its plateau is pooled as (:func:`plateaus`).
    One reading for ``inspect --baseline`` (:meth:`DecodeBatchStats.spec_run_sizes`) and advise's
    stock runs, so that both place a bare baseline at the same batch sizes."""
    by_bs, dropped = spec_run_by_bs(stats, max_accept)
    by_bs, few = steady_batch_sizes(by_bs, lambda v: v[3])
    pooled = plateaus(stats.labels_spec, {bs: v[3] for bs, v in by_bs.items()})
    return by_bs, dropped, few, pooled


def steady_batch_sizes(by_bs: dict, count) -> tuple[dict, int]:
    """``(by_bs without the batch sizes of fewer than MIN_STOCK_INTERVALS intervals, intervals left
    out)``, where some batch size has at least that many (else all kept: a short log); ``count``
    gives a value's interval count. SGLang prints a stock line every ``--decode-log-interval``
    decode batches with the throughput over all of them and the batch size at the last: while
    clients connect or finish, its batch size is not the one its throughput was measured at."""
    if not any(count(v) >= MIN_STOCK_INTERVALS for v in by_bs.values()):
        return by_bs, 0
    keep = {bs: v for bs, v in by_bs.items() if count(v) >= MIN_STOCK_INTERVALS}
    return keep, sum(count(v) for bs, v in by_bs.items() if bs not in keep)


def plateaus(labels: Sequence[int], counts: dict[int, int]) -> dict[int, int]:
    """``{batch size: the batch size its plateau is pooled as}`` for the stock batch sizes of
    ``counts`` (intervals kept at each), from ``labels``, every interval's ``#running-req`` in log
    order (those of batch sizes not in ``counts`` skipped).

    SGLang prints a stock line every ``--decode-log-interval`` decode batches with the throughput
    over all of them and the running batch size at the last: where the load wanders over 28-32,
    each line's throughput is the plateau's, whatever batch size it names, and taken per batch
    size they make the step grow in proportion to the batch (a baseline line through them had put
    the no-spec step at bs 1 at 2.55 ms, beside an 11 ms verify there, and advised speculation off
    at bs 1-3). A wandering load switches between its batch sizes from line to line; a steady one
    (a sweep at 10 requests, then at 12; a load rising slowly) does not. Batch sizes joined by at
    least :data:`PLATEAU_SWITCH_SHARE` of the fewer intervals' count of switches, and two, are one
    plateau, at most :data:`PLATEAU_SPAN` wide (the most switched pairs joined first), pooled as its
    member nearest its interval-weighted mean batch size.
    """
    seq = [b for b in labels if b in counts]
    switches: dict[tuple[int, int], int] = {}
    for a, b in zip(seq, seq[1:]):
        if a != b:
            key = (min(a, b), max(a, b))
            switches[key] = switches.get(key, 0) + 1
    parent = {b: b for b in counts}

    def root(b: int) -> int:
        while parent[b] != b:
            parent[b] = parent[parent[b]]
            b = parent[b]
        return b

    span = {b: (b, b) for b in counts}   # per root: the group's smallest and largest batch size
    # the most switched pairs first; a join that would widen a plateau past PLATEAU_SPAN is refused
    # (a load rising slowly with jitter switches between every neighbouring pair, and the chain
    # had joined bs 8-37 into one)
    for (a, b), n in sorted(switches.items(), key=lambda kv: -kv[1]):
        if n < max(2.0, PLATEAU_SWITCH_SHARE * min(counts[a], counts[b])):
            continue
        ra, rb = root(a), root(b)
        if ra == rb:
            continue
        lo, hi = min(span[ra][0], span[rb][0]), max(span[ra][1], span[rb][1])
        if hi > max(PLATEAU_SPAN * lo, lo + 2):
            continue
        parent[ra] = rb
        span[rb] = (lo, hi)
    groups: dict[int, list[int]] = {}
    for b in counts:
        groups.setdefault(root(b), []).append(b)
    out: dict[int, int] = {}
    for members in groups.values():
        n = sum(counts[b] for b in members)
        mean = sum(b * counts[b] for b in members) / n if n else min(members)
        # pooled as the member nearest the mean (the more populated on a tie): a batch size of its
        # own, so that no two plateaus, nor a plateau and a batch size the load seldom switched
        # from, share a key
        target = min(members, key=lambda b: (abs(b - mean), -counts[b], b))
        for b in members:
            out[b] = target
    return out


#: SGLang's start-up line, in both shapes it has had: ``server_args=ServerArgs(...)`` and 0.5.23's
#: ``server_args={...}``; another line that mentions ``server_args=`` (a warning, a user's note) starts
#: no server
STARTUP_LINE = re.compile(r"server_args=(?:ServerArgs\(|\{)")


def is_startup_line(line: str) -> bool:
    """Whether ``line`` is SGLang's start-up ``server_args=`` line (:data:`STARTUP_LINE`)."""
    return "server_args=" in line and STARTUP_LINE.search(line) is not None


def speculative_server_args(text: str) -> Optional[dict[str, Any]]:
    """The speculative settings of the first start-up ``server_args=`` line in ``text``
    (:func:`is_startup_line`), else None.

    Returns:
        ``{"algorithm": str or None, "num_steps": int or None, "eagle_topk": int or None,
        "num_draft_tokens": int or None, "adaptive": bool or None}`` (None where the line says
        None or lacks the key; integers as written, negative ones included).
    """
    for line in text.splitlines():
        if not is_startup_line(line):
            continue
        out: dict[str, Any] = {"algorithm": None, "num_steps": None, "eagle_topk": None, "num_draft_tokens": None,
                               "adaptive": None}
        for m in _SPEC_ARG.finditer(line):
            name, word = m.group(1), m.group(2) or m.group(3)
            if name == "algorithm":
                out[name] = word
            elif name == "adaptive":
                out[name] = {"True": True, "False": False}.get(m.group(5) or word or "")
            else:
                out[name] = int(m.group(4)) if m.group(4) else None
        return out
    return None
