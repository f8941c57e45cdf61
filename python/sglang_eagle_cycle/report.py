"""Server logs -> per-configuration timing report: the engine behind ``eagle-cycle inspect``.

Reads, in one streamed pass per input, our ``[eagle-cycle]`` lines (per-cycle and aggregated,
README "Per-cycle timing"), our JSONL records, and stock SGLang "Decode batch" lines (:mod:`.decode_batch`), from
plain or gzip files or stdin (``-``). Memory grows with the number of cycles as numbers (one
``value -> cycles`` count per distinct phase time), never with the text.

Per group of ``(file, bs, steps, topk, draft_tokens)`` it reports, for each phase, the mean,
exact p50/p90/p99 (linear interpolation between order statistics, numpy's default), the
standard deviation over cycles (``sd``, ms; the advisor's measurement noise) and share of
the cycle (phase mean / total mean); the accept-length histogram and mean; per-position
acceptance; and effective tok/s. Findings name what looks wrong, each with its evidence.

Definitions (README, "Terms"):

* accept length L = accepted draft tokens + 1 bonus token, per request per cycle;
* per-position acceptance p_j = P(draft token j accepted | drafts 1..j-1 accepted), from the
  accept-length histogram: a request with accept length L accepted positions 1..L-1 and, when
  L - 1 < steps, reached and rejected position L; so reached_j = #{L >= j}, accepted_j = #{L >= j + 1};
* effective tok/s = committed tokens (sum of accept lengths) / summed cycle periods: ``total_ms``
  plus, on device-span lines, ``gap_ms`` (the group's mean gap for a cycle logged without one,
  after a prefill or a pause); device time only, so host time outside the decode loop is not in it;
* aggregated lines (``n=``) count as ``n`` cycles at their mean; percentiles of a group that
  holds aggregated lines are null (per-cycle values were not logged);
* lines from several ranks (``rank=``, e.g. ``SGLANG_EAGLE_CYCLE_ALL_RANKS=1``) that carry the
  same cycle id of one replica (the tp/pp ranks of one dp replica or attention-DP rank; the rank
  label without its ``tp``/``pp`` parts) are one cycle: its acceptance and committed tokens count
  once, while every rank's times are kept (phase distributions over all ranks' lines, the spread
  of the per-rank means in ``rank_spread``).

Usage::

    from sglang_eagle_cycle.report import inspect_paths
    doc = inspect_paths(["server.log.gz"], baseline=88.8)   # the `eagle-cycle inspect --json` document
    doc["groups"][0]["phases"]["verify_ms"]["share"]
"""

from __future__ import annotations

import logging
import math
import os
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, Callable, Iterable, Mapping, Optional, Union

from . import cycle
from .cycle import ADAPTIVE_MODES, ALL_PHASES, PREFIX, CycleRecord, max_accept_len
from .decode_batch import MARKER as DECODE_MARKER
from .decode_batch import DecodeBatchStats, parse_decode_batch
from .argtypes import MAX_TOK_S, MIN_TOK_S
from .errors import UsageError
from .bulkscan import scan_chunk, scan_chunk_dropping
from .series import CycleSeries
from .logfiles import (CHUNK_CHARS, HEAD_CHARS, LogReadStopped, LogUnreadable, command_arg, cut_reason, iter_chunks,
                       label_of, other_json, text_safe, unmarked)

SCHEMA = "eagle-cycle-inspect/1"
PERCENTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99))

#: Findings thresholds.
STUCK_ACCEPT_LEN = 1.2        # mean accept length at or below: practically no draft token accepted
VERIFY_BOUND_SHARE = 0.90     # verify share of the cycle above: verify-bound
DRAFT_HEAVY_SHARE = 0.30      # draft share of the cycle above: draft-heavy
MIN_REQUESTS = 10             # accept-length findings need at least this many request-cycles
#: host_bound (device-span lines): ``draft_prep + gap`` above this share of the period
#: (``total + gap``) *and* above :data:`HOST_BOUND_FLOOR_MS`. Calibration: in a device-bound decode
#: loop the host runs ahead, so ``draft_prep`` holds only the draft's preparation kernels and
#: ``gap`` only the next cycle's input kernels. 0.5.23's ``prepare_for_draft`` and the draft
#: runner's metadata step launch on the order of ten small kernels (index arithmetic and copies of
#: a few KB), a few microseconds each on an H100/H200 class GPU, so together well under 0.1 ms.
#: The floor is five times that bound, and the share keeps a short cycle (a small model: 3 ms)
#: from tripping on them: 10% of 3 ms is 0.3 ms. Both are estimates from kernel counts, not a GPU
#: measurement; ``test/gpu/check_cuda_timing.py`` reports the prep kernels' span on a real GPU.
HOST_BOUND_SHARE = 0.10
HOST_BOUND_FLOOR_MS = 0.5

#: Decimals of the floats in the document (1e-6 ms = 1 ns; summation noise stays out of the JSON).
DIGITS = 6

_log = logging.getLogger(__name__)

RecordHook = Callable[[str, CycleRecord], None]
Baseline = Union[float, int, str, "os.PathLike[str]", Mapping[int, float], None]


# ---------------------------------------------------------------------------------------------
# Per-group accumulation
# ---------------------------------------------------------------------------------------------


def count_of(n: int, noun: str, plural: Optional[str] = None) -> str:
    """``n`` and ``noun``, in the plural unless ``n`` is 1: ``"1 cycle"``, ``"0 cycles"``, ``"2 damaged lines"``
    (``plural``: where adding an ``s`` is wrong)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def _round(x: Optional[float], digits: int = DIGITS) -> Optional[float]:
    return None if x is None else round(x, digits)


@dataclass(slots=True)
class PhaseDist:
    """One phase's times in one group: exact distribution of per-cycle values plus aggregate means.

    ``counts`` maps a per-cycle time (ms) to the cycles that took it; ``total`` is the summed time
    (ms) and ``weight`` the cycles measured, aggregated lines included (``agg_weight`` of them).
    """

    counts: dict[float, int] = field(default_factory=dict)
    total: float = 0.0
    weight: int = 0
    agg_weight: int = 0

    def add(self, value: float, cycles: int = 1) -> None:
        self.counts[value] = self.counts.get(value, 0) + cycles
        self.total += value * cycles
        self.weight += cycles

    def add_mean(self, mean: float, cycles: int) -> None:
        self.total += mean * cycles
        self.weight += cycles
        self.agg_weight += cycles

    @property
    def mean(self) -> Optional[float]:
        return self.total / self.weight if self.weight else None

    @property
    def sd(self) -> Optional[float]:
        """Population standard deviation of the per-cycle times (ms); None when aggregated lines
        hide them or no cycle was measured."""
        if self.agg_weight or not self.counts or not self.weight:
            return None
        mean = self.total / self.weight
        var = sum(c * (v - mean) ** 2 for v, c in self.counts.items()) / self.weight
        return math.sqrt(max(var, 0.0))

    def percentiles(self) -> Optional[list[float]]:
        """Exact p50/p90/p99 (ms), or None when aggregated lines hide the per-cycle values."""
        if self.agg_weight or not self.counts:
            return None
        return exact_percentiles(self.counts, [q for _, q in PERCENTILES])


def exact_percentiles(counts: dict[float, int], qs: Iterable[float]) -> list[float]:
    """Percentiles of the multiset ``{value: count}``, equal to ``numpy.percentile(values, 100*q)``.

    Linear interpolation between order statistics: with N values sorted ascending (0-based),
    h = (N - 1) q, result = x[floor h] + (h - floor h) (x[floor h + 1] - x[floor h]) (Hyndman & Fan
    type 7). Cost: O(distinct values) memory, O(d log d) time.
    """
    values = sorted(counts)
    cum = list(accumulate(counts[v] for v in values))
    n = cum[-1]

    def order_stat(k: int) -> float:
        return values[bisect_right(cum, k)]

    out = []
    for q in qs:
        h = (n - 1) * q
        lo = math.floor(h)
        a = order_stat(lo)
        b = order_stat(min(lo + 1, n - 1))
        out.append(a + (h - lo) * (b - a))
    return out


def per_position_acceptance(hist: dict[int, int], steps: int) -> list[dict[str, Any]]:
    """Conditional acceptance per draft position from an accept-length histogram.

    Args:
        hist: ``{accept length L (tokens, bonus included): requests}``.
        steps: deepest position a draft can be accepted at (``min(steps, draft_tokens - 1)``);
            positions 1..max(steps, max L - 1) are reported.

    Returns:
        ``[{"j": 1, "p": accepted/reached or None, "accepted": n, "reached": n}, ...]`` where a
        request with accept length L reached positions 1..L (capped at the depth) and accepted 1..L-1.
    """
    depth = max([steps] + [length - 1 for length in hist])
    out = []
    for j in range(1, depth + 1):
        reached = sum(c for length, c in hist.items() if length >= j)
        accepted = sum(c for length, c in hist.items() if length >= j + 1)
        out.append({"j": j, "p": accepted / reached if reached else None,
                    "accepted": accepted, "reached": reached})
    return out


@dataclass(slots=True)
class Group:
    """Cycles of one configuration and one timing kind in one input file.

    ``device_spans``: the lines carry ``draft_prep_ms`` (device spans of the launches, see
    :attr:`~sglang_eagle_cycle.cycle.CycleRecord.device_spans`); older lines, whose ``draft_ms``
    ran from the cycle's start, are a group of their own.
    """

    file: str
    bs: int
    steps: int
    topk: int
    draft_tokens: int
    device_spans: bool = False
    cycles: int = 0
    phases: dict[str, PhaseDist] = field(default_factory=lambda: {p: PhaseDist() for p in ALL_PHASES})
    hist: Counter = field(default_factory=Counter)
    accept_len_sum: float = 0.0   # sum of accept_len x cycles for records without a histogram
    accept_len_weight: int = 0
    tokens: float = 0.0           # committed tokens (sum of accept lengths)
    ranks: set = field(default_factory=set)
    lines: int = 0                # cycle lines behind the times (every rank's), weighted by n
    rank_phases: dict = field(default_factory=dict)   # rank -> phase -> [summed ms, cycles]
    adaptive: Counter = field(default_factory=Counter)  # "explore"/"exploit" -> cycles (adaptive= lines)
    series: CycleSeries = field(default_factory=CycleSeries)  # accept length and period in file order

    def add_record(self, rec: CycleRecord, new_cycle: bool = True) -> None:
        """Add one record's times; its cycles, acceptance and tokens only when ``new_cycle`` (False
        for another rank's line of a cycle already counted)."""
        w = rec.weight
        self.lines += w
        per_rank = None
        if rec.rank:
            self.ranks.add(rec.rank)
            per_rank = self.rank_phases.get(rec.rank)
            if per_rank is None:
                per_rank = self.rank_phases[rec.rank] = {}
        for name in ALL_PHASES:
            value = getattr(rec, name)
            if value is not None:
                if rec.n is None:
                    self.phases[name].add(value)
                else:
                    self.phases[name].add_mean(value, w)
                if per_rank is not None:
                    acc = per_rank.get(name)
                    if acc is None:
                        acc = per_rank[name] = [0.0, 0]
                    acc[0] += value * w
                    acc[1] += w
        if not new_cycle:
            return
        self.cycles += w
        if rec.adaptive:
            self.adaptive[rec.adaptive] += w
        if rec.total_ms is not None:
            self.series.add(rec.accept_len, rec.total_ms + (rec.gap_ms or 0.0), w)
        hist = rec.histogram()
        if hist:
            self.add_hist(hist)
        elif rec.accept_len is not None:
            self.accept_len_sum += rec.accept_len * w
            self.accept_len_weight += w
            self.tokens += rec.accept_len * rec.bs * w

    def add_hist(self, hist: dict[int, int], times: int = 1) -> None:
        for length, requests in hist.items():
            self.hist[length] += requests * times
            self.tokens += length * requests * times

    @property
    def accept_len_mean(self) -> Optional[float]:
        requests = sum(self.hist.values())
        if requests:
            return sum(k * c for k, c in self.hist.items()) / requests
        return self.accept_len_sum / self.accept_len_weight if self.accept_len_weight else None

    @property
    def period_ms_total(self) -> float:
        """Summed cycle periods (ms): ``total_ms`` plus, for device-span lines, the mean ``gap_ms``
        per cycle (cycles after another batch have no gap of their own); with several ranks'
        lines of each cycle, scaled to one line per cycle (ranks run a cycle side by side)."""
        total_ms = self.phases["total_ms"].total
        gap = self.phases["gap_ms"].mean if self.device_spans else None
        period = total_ms + (gap or 0.0) * self.phases["total_ms"].weight
        if self.lines > self.cycles > 0:
            period *= self.cycles / self.lines
        return period

    def rank_spread(self) -> Optional[dict[str, dict[str, Any]]]:
        """Per phase measured on two ranks or more: ``{"min", "max", "spread"}`` of the per-rank
        mean times (ms; ``spread = max - min``) and ``by_rank`` ``{rank: mean ms}``; None with
        fewer than two ranks."""
        if len(self.rank_phases) < 2:
            return None
        out = {}
        for name in ALL_PHASES:
            means = {rank: acc[name][0] / acc[name][1] for rank, acc in sorted(self.rank_phases.items())
                     if name in acc and acc[name][1]}
            if len(means) < 2:
                continue
            lo, hi = min(means.values()), max(means.values())
            out[name] = {"min": _round(lo), "max": _round(hi), "spread": _round(hi - lo),
                         "by_rank": {rank: _round(m) for rank, m in means.items()}}
        return out or None

    @property
    def tok_s(self) -> Optional[float]:
        """Committed tokens per second of the cycles' periods (``total_ms + gap_ms``)."""
        period = self.period_ms_total
        return self.tokens / period * 1000.0 if period > 0 and self.tokens else None

    def share(self, name: str) -> Optional[float]:
        mean, total = self.phases[name].mean, self.phases["total_ms"].mean
        return mean / total if mean is not None and total else None

    def to_dict(self) -> dict[str, Any]:
        phases = {}
        for name, dist in self.phases.items():
            pct = dist.percentiles()
            entry = {"mean": _round(dist.mean)}
            for (key, _), value in zip(PERCENTILES, pct or [None] * len(PERCENTILES)):
                entry[key] = _round(value)
            entry["sd"] = _round(dist.sd)
            entry["share"] = _round(self.share(name))
            # exact, for comparing other writers' sums and counts (inspect --prometheus) without rounding
            entry["sum_ms"] = round(dist.total, 6)
            entry["count"] = dist.weight
            phases[name] = entry
        # a tree verifying fewer tokens than steps + 1 can accept at most draft_tokens - 1 drafts
        depth = max_accept_len(self.steps, self.draft_tokens) - 1
        pos = per_position_acceptance(self.hist, depth) if self.hist else None
        for p in pos or []:
            p["p"] = _round(p["p"])
        if not self.device_spans:
            for name in ("draft_prep_ms", "gap_ms"):
                phases.pop(name, None)   # older lines never carry them
        return {
            "file": self.file, "bs": self.bs, "steps": self.steps, "topk": self.topk,
            "draft_tokens": self.draft_tokens, "device_spans": self.device_spans, "cycles": self.cycles,
            "phases": phases,
            "accept_len_mean": _round(self.accept_len_mean),
            "accept_hist": {str(k): v for k, v in sorted(self.hist.items())} or None,
            "per_position_acceptance": pos,
            "tok_s": _round(self.tok_s),
            "ranks": sorted(self.ranks),
            "cycle_lines": self.lines,
            "rank_spread": self.rank_spread(),
            "adaptive_cycles": {m: self.adaptive[m] for m in ADAPTIVE_MODES if m in self.adaptive} or None,
            "batch_se": _batch_se(self.series),
        }


def _batch_se(series: CycleSeries) -> Optional[dict[str, Any]]:
    se = series.standard_errors()
    if se is None:
        return None
    return {"accept_len": _round(se["accept_len"], 6), "period_ms": _round(se["period_ms"], 6),
            "batch_cycles": se["batch_cycles"], "cycles": se["cycles"]}


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines

#: What the start-up wiring line (README, "Aux-layer wiring") starts with.
WIRING_MARKER = "EAGLE-3 aux wiring: "


@dataclass(slots=True)
class FileResult:
    """What one input gave: counts, decode-interval stats, and why it was (partly) unusable."""

    label: str
    cycles: int = 0
    unparsed_lines: int = 0
    other_lines: int = 0
    decode: DecodeBatchStats = field(default_factory=DecodeBatchStats)
    error: Optional[str] = None     # could not be read at all
    stopped: Optional[str] = None   # reading stopped part-way
    wiring: list = field(default_factory=list)  # start-up wiring lines (metrics.parse_wiring_line), in order
    head: str = ""   # the input's first HEAD_CHARS characters as read: what it is, when nothing was usable
    head_whole: bool = False   # head is the whole input (read to its end)

    @property
    def usable(self) -> bool:
        return self.cycles > 0 or self.decode.intervals > 0

    @property
    def not_a_log(self) -> Optional[str]:
        """What the input is, in words, when it was read whole, gave nothing and is JSON of another
        kind (a Chrome trace, an inspect document, bench JSONL: :func:`logfiles.other_json`); None otherwise."""
        if self.usable or self.error or self.stopped:
            return None
        return other_json(self.head, self.label, damaged=self.unparsed_lines > 0, whole=self.head_whole)


#: Cycle ids remembered per replica to merge other ranks' lines of one cycle (the oldest are
#: forgotten beyond this; ranks print a cycle within moments of each other).
RANK_WINDOW = 1 << 16
#: Longest text of a rejected line handed to ``on_rejected`` (characters).
REJECTED_TEXT_CHARS = 300


def replica_of(rank: str) -> tuple[str, str]:
    """``(replica, member)`` of a ``rank=`` label: the tp/pp parts name the rank inside its replica
    (``tp1``, ``tp0.pp1``), every other part the replica (``dp1``, ``adp1``; ``""`` for none).

    ``tp0.pp0.dp1`` -> ``("dp1", "tp0.pp0")``; ``tp4.adp1`` -> ``("adp1", "tp4")``; ``tp3`` -> ``("", "tp3")``.
    """
    parts = rank.split(".")
    member = [p for p in parts if p[:2] in ("tp", "pp")]
    replica = [p for p in parts if p[:2] not in ("tp", "pp")]
    return ".".join(replica), ".".join(member)


class LogReader:
    """Streams logs into :class:`Group` accumulators and per-file :class:`FileResult`.

    Args:
        on_record: called as ``on_record(file_label, record)`` for every cycle record in file
            order, every rank's (used by ``--trace``); it turns the bulk path off.
        chunk_chars: characters per read chunk.
        on_rejected: called as ``on_rejected({"file", "line", "reason", "text"})`` for each of the
            first ``max_rejected`` damaged lines (``line``: 1-based line number in the input,
            ``text`` cut to :data:`REJECTED_TEXT_CHARS` characters).
        max_rejected: how many damaged lines to hand to ``on_rejected``.
    """

    def __init__(self, on_record: Optional[RecordHook] = None, chunk_chars: int = CHUNK_CHARS,
                 on_rejected: Optional[Callable[[dict[str, Any]], None]] = None, max_rejected: int = 0):
        self.on_record = on_record
        self.chunk_chars = chunk_chars
        self.on_rejected = on_rejected
        self.max_rejected = max_rejected if on_rejected is not None else 0
        self.rejected = 0          # damaged lines handed to on_rejected so far
        self.groups: dict[tuple, Group] = {}
        self.files: list[FileResult] = []
        self._seen: dict[tuple[str, str], dict[int, set]] = {}   # (file, replica) -> cycle id -> ranks

    def _group(self, label: str, config: tuple[int, int, int, int], spans: bool = False) -> Group:
        key = (label, config, spans)
        g = self.groups.get(key)
        if g is None:
            g = self.groups[key] = Group(label, *config, device_spans=spans)
        return g

    def _tracking(self) -> bool:
        return self.rejected < self.max_rejected

    def read(self, path) -> FileResult:
        """Read one input (path or ``-``); failures are recorded on the result, never raised."""
        res = FileResult(label_of(path))
        self.files.append(res)
        base = 0   # lines before the chunk (counted while damaged lines are wanted with their numbers)
        chars = 0
        try:
            for chunk in iter_chunks(path, self.chunk_chars):
                if not res.head:
                    res.head = chunk[:HEAD_CHARS]
                chars += len(chunk)
                tracking = self._tracking()
                self._chunk(chunk, res, base if tracking else None)
                if tracking:
                    base += chunk.count("\n")
            res.head_whole = chars == len(res.head)
        except LogUnreadable as exc:
            res.error = exc.reason
        except LogReadStopped as exc:
            res.stopped = exc.reason
        return res

    def feed(self, text: str, res: FileResult) -> None:
        """Read ``text`` (whole lines) into ``res`` and this reader's groups, as :meth:`read` reads
        each chunk of a file: for a caller that cuts one log into parts (advise, one part per server
        start), each with a ``FileResult`` of its own."""
        self._chunk(text, res)

    # -- one chunk ------------------------------------------------------------------------------

    def _chunk(self, text: str, res: FileResult, base: Optional[int] = None) -> None:
        if WIRING_MARKER in text:
            from .metrics import parse_wiring_line

            for ln in _lines(text):
                if WIRING_MARKER in ln:
                    info = parse_wiring_line(ln)
                    if info is not None:
                        res.wiring.append(info)
        if PREFIX not in text:
            self._other_lines(_lines(text), res, base)
            return
        if self.on_record is None and self._bulk(text, res):
            return  # every line a plain per-cycle line: counted at once
        lines = _lines(text)
        if base is not None:   # damaged lines are wanted with their line numbers: in file order
            for i, ln in enumerate(lines, start=base + 1):
                if PREFIX in ln:
                    self._our_line(ln, res, i)
                else:
                    self._other_line(ln, res, i)
            return
        ours = [ln for ln in lines if PREFIX in ln]
        if len(ours) < len(lines):
            self._other_lines([ln for ln in lines if PREFIX not in ln], res)
            if self.on_record is None and self._bulk("\n".join(ours), res):
                return
        for ln in ours:
            self._our_line(ln, res)

    def _reject(self, res: FileResult, lineno: Optional[int], line: str, why: Callable[[], Optional[str]]) -> None:
        """Count one damaged line; hand it to ``on_rejected`` while fewer than ``max_rejected`` were."""
        res.unparsed_lines += 1
        if lineno is not None and self._tracking():
            self.rejected += 1
            self.on_rejected({"file": res.label, "line": lineno, "reason": why() or "damaged",
                              "text": unmarked(line)[:REJECTED_TEXT_CHARS]})

    def _our_line(self, line: str, res: FileResult, lineno: Optional[int] = None) -> None:
        rec = cycle.parse_line(line)
        if rec is None:
            self._reject(res, lineno, line, lambda: cycle.line_rejection(line))
        else:
            self._add(rec, res)

    def _new_cycle(self, label: str, rec: CycleRecord) -> bool:
        """False when ``rec`` is another rank's line of a cycle of its replica already counted.

        A rank printing a cycle id it printed before (a restart) starts that cycle anew."""
        replica, member = replica_of(rec.rank)
        seen = self._seen.get((label, replica))
        if seen is None:
            seen = self._seen[(label, replica)] = {}
        ranks = seen.get(rec.cycle)
        if ranks is not None and member not in ranks:
            ranks.add(member)
            return False
        if ranks is not None:
            del seen[rec.cycle]   # keep insertion order: oldest first
        seen[rec.cycle] = {member}
        if len(seen) > RANK_WINDOW:
            del seen[next(iter(seen))]
        return True

    def _add(self, rec: CycleRecord, res: FileResult) -> None:
        new = True if not rec.rank else self._new_cycle(res.label, rec)
        self._group(res.label, rec.config, rec.device_spans).add_record(rec, new)
        if new:
            res.cycles += rec.weight
        if self.on_record is not None:
            self.on_record(res.label, rec)

    def _other_lines(self, lines: list[str], res: FileResult, base: Optional[int] = None) -> None:
        for i, line in enumerate(lines, start=1):
            self._other_line(line, res, None if base is None else base + i)

    def _other_line(self, line: str, res: FileResult, lineno: Optional[int] = None) -> None:
        if DECODE_MARKER in line:
            d = parse_decode_batch(line)
            if d is None:
                self._reject(res, lineno, line, lambda: cut_reason(line) or
                             "a Decode batch line with a damaged or impossible value, or two lines run together")
            else:
                res.decode.add(d)
        elif line.lstrip().startswith("{"):
            rec = cycle.from_json(line)
            if rec is not None:
                self._add(rec, res)
            elif line.lstrip().startswith('{"cycle":') or ('"cycle"' in line and '"total_ms"' in line):
                # one of our JSONL records (ours start {"cycle":), damaged or cut
                self._reject(res, lineno, line, lambda: "JSONL record: " + (cycle.json_rejection(line) or "damaged"))
            else:
                res.other_lines += 1
        else:
            res.other_lines += 1

    def _bulk(self, text: str, res: FileResult) -> bool:
        """Count a chunk of our lines at once (:mod:`.bulkscan`); False when it needs the per-line path.

        Lines the bulk reader can tell are damaged (parts that do not add up to the total) are
        counted as damaged there, unless damaged lines are wanted with their line numbers."""
        if self._tracking():
            tallies = scan_chunk(text)
            dropped = 0
        else:
            got = scan_chunk_dropping(text)
            if got is None:
                return False
            tallies, dropped = got
        if tallies is None:
            return False
        res.unparsed_lines += dropped
        for t in tallies:
            g = self._group(res.label, t.config, t.device_spans)
            g.cycles += t.cycles
            g.lines += t.cycles
            for name, counts in t.phases.items():
                dist = g.phases[name]
                for value, count in counts.items():
                    dist.add(value, count)
            g.add_hist(t.hist)
            if t.adaptive:
                g.adaptive.update(t.adaptive)
            if t.series is not None:
                g.series.add_arrays(*t.series)
            res.cycles += t.cycles
        return True


# ---------------------------------------------------------------------------------------------
# Findings
# ---------------------------------------------------------------------------------------------


def _config_of(g: Group) -> dict[str, int]:
    return {"bs": g.bs, "steps": g.steps, "topk": g.topk, "draft_tokens": g.draft_tokens}


def _finding(code: str, message: str, file: str, config: Optional[dict], evidence: dict) -> dict[str, Any]:
    evidence = {k: _round(v) if isinstance(v, float) else v for k, v in evidence.items()}
    return {"code": code, "message": message, "file": file, "config": config, "evidence": evidence}


def _where(g: Group) -> str:
    return f"{g.file} bs={g.bs} steps={g.steps} topk={g.topk} draft_tokens={g.draft_tokens}"


class BaselineRef:
    """No-speculation throughput to compare against: one number, or per batch size from a log."""

    def __init__(self, tok_s: Optional[float] = None, by_bs: Optional[dict[int, float]] = None,
                 source: str = "--baseline"):
        self.tok_s = tok_s
        self.by_bs = by_bs or {}
        self.source = source

    def at(self, bs: int) -> Optional[float]:
        return self.tok_s if self.tok_s is not None else self.by_bs.get(bs)


def _host_share(g: Group) -> Optional[tuple[float, float, float]]:
    """``(draft_prep + gap, period, share)`` in ms from a device-span group's means; None otherwise."""
    total = g.phases["total_ms"].mean
    if not g.device_spans or not total:
        return None
    prep, gap = g.phases["draft_prep_ms"].mean, g.phases["gap_ms"].mean
    if prep is None and gap is None:
        return None
    idle = (prep or 0.0) + (gap or 0.0)
    period = total + (gap or 0.0)
    return idle, period, idle / period


def group_findings(g: Group, baseline: Optional[BaselineRef]) -> list[dict[str, Any]]:
    """Findings for one group of our cycle lines (thresholds are the module constants)."""
    out = []
    cfg = _config_of(g)
    requests = sum(g.hist.values())
    mean_len = g.accept_len_mean
    if mean_len is not None and mean_len <= STUCK_ACCEPT_LEN and (requests or g.cycles) >= MIN_REQUESTS:
        ones = g.hist.get(1, 0) / requests if requests else None
        out.append(_finding(
            "accept_len_stuck_at_1",
            f"{_where(g)}: mean accept length {mean_len:.2f} over {count_of(g.cycles, 'cycle')}"
            + (f" ({ones:.0%} of requests accepted no draft token)" if ones is not None else "")
            + ": the draft or its aux-layer wiring is broken; run `eagle-cycle wiring TARGET DRAFT`",
            g.file, cfg, {"accept_len_mean": mean_len, "share_accept_len_1": ones, "cycles": g.cycles,
                          "requests": requests}))
    full = min(g.draft_tokens, g.steps + 1)
    if requests >= MIN_REQUESTS and set(g.hist) == {full}:
        out.append(_finding(
            "accept_len_equals_draft_tokens",
            f"{_where(g)}: every request of {'the one cycle' if g.cycles == 1 else f'all {g.cycles} cycles'} accepted "
            f"every draft token (accept length {full} = draft_tokens): no real draft is that good; suspect "
            "NaN/inf logits in the target or the draft, which make verification accept anything",
            g.file, cfg, {"accept_len": full, "requests": requests, "cycles": g.cycles}))
    verify_share = g.share("verify_ms")
    if verify_share is not None and verify_share > VERIFY_BOUND_SHARE:
        out.append(_finding(
            "verify_bound",
            f"{_where(g)}: verify is {verify_share:.0%} of the cycle ({g.phases['verify_ms'].mean:.2f} of "
            f"{g.phases['total_ms'].mean:.2f} ms): every extra draft token widens the verify; "
            "run `eagle-cycle advise` on this report to pick the depth",
            g.file, cfg, {"verify_share": verify_share, "verify_ms_mean": g.phases["verify_ms"].mean,
                          "verify_fwd_ms_mean": g.phases["verify_fwd_ms"].mean,
                          "total_ms_mean": g.phases["total_ms"].mean, "threshold": VERIFY_BOUND_SHARE}))
    draft_share = g.share("draft_ms")
    if draft_share is not None and draft_share > DRAFT_HEAVY_SHARE:
        per_step = (g.phases["draft_ms"].mean / (g.steps - 1)) if g.steps > 1 else None
        out.append(_finding(
            "draft_heavy",
            f"{_where(g)}: draft is {draft_share:.0%} of the cycle ({g.phases['draft_ms'].mean:.2f} ms"
            + (f", {per_step:.2f} ms per draft forward" if per_step is not None else "")
            + "): fewer steps, or check the draft runs from a CUDA graph; see `eagle-cycle advise`",
            g.file, cfg, {"draft_share": draft_share, "draft_ms_mean": g.phases["draft_ms"].mean,
                          "draft_ms_per_forward": per_step, "total_ms_mean": g.phases["total_ms"].mean,
                          "threshold": DRAFT_HEAVY_SHARE}))
    host = _host_share(g)
    if host is not None:
        idle_ms, period, share = host
        if share > HOST_BOUND_SHARE and idle_ms > HOST_BOUND_FLOOR_MS:
            out.append(_finding(
                "host_bound",
                f"{_where(g)}: the device waits on the host for {share:.0%} of each cycle's period "
                f"(draft_prep + gap = {idle_ms:.2f} of {period:.2f} ms): the GPU idles while the scheduler "
                "prepares the next launch. Usual causes: an attention backend that needs host sequence "
                "lengths (FlashInfer and the base default: the scheduler waits in resolve_seq_lens_cpu; "
                "try --attention-backend fa3 where supported), CPU contention (TP ranks, tokenizer and "
                "NCCL threads on too few cores), or --disable-overlap-schedule (every cycle then starts "
                "after a host sync)",
                g.file, cfg, {"host_share": share, "draft_prep_ms_mean": g.phases["draft_prep_ms"].mean,
                              "gap_ms_mean": g.phases["gap_ms"].mean, "period_ms_mean": period,
                              "threshold": HOST_BOUND_SHARE, "floor_ms": HOST_BOUND_FLOOR_MS}))
    base = baseline.at(g.bs) if baseline else None
    if base is not None and g.tok_s is not None and g.tok_s < base:
        out.append(_finding(
            "slower_than_baseline",
            f"{_where(g)}: {g.tok_s:.1f} tok/s (committed tokens / GPU cycle time, an upper bound) is "
            f"below the no-speculation baseline {base:.1f} tok/s ({baseline.source}): speculation does "
            "not pay here; try fewer steps (`eagle-cycle advise`) or restart without --speculative-algorithm",
            g.file, cfg, {"tok_s": g.tok_s, "baseline_tok_s": base, "baseline_source": baseline.source}))
    return out


def decode_findings(label: str, d: DecodeBatchStats, baseline: Optional[BaselineRef]) -> list[dict[str, Any]]:
    """Findings from one file's stock Decode batch intervals."""
    out = []
    mean_len = d.accept_len.value
    if mean_len is not None and mean_len <= STUCK_ACCEPT_LEN:
        out.append(_finding(
            "accept_len_stuck_at_1",
            f"{label}: stock Decode batch lines report mean accept length {mean_len:.2f} over "
            f"{count_of(d.accept_len.count, 'interval')}: the draft or its aux-layer wiring is broken; "
            "run `eagle-cycle wiring TARGET DRAFT`",
            label, None, {"accept_len_mean": mean_len, "intervals_with_accept": d.accept_len.count}))
    if d.accept_rate.count and d.all_accepted:
        out.append(_finding(
            "accept_len_equals_draft_tokens",
            f"{label}: " + ("the one Decode batch interval" if d.accept_rate.count == 1 else
                            f"every one of {d.accept_rate.count} Decode batch intervals") + " reports accept rate 1.00 "
            "(all draft tokens accepted): suspect NaN/inf logits, which make verification accept anything",
            label, None, {"accept_rate_mean": d.accept_rate.value, "intervals": d.accept_rate.count}))
    for bs, spec, p10, p90, n, _p50 in d.spread():
        out.append(_finding(
            "stock_throughput_spread",
            f"{label}: Decode batch " + ("gen throughput over accept length" if spec else "gen throughput")
            + f" at {bs} running requests ({'speculative' if spec else 'no-spec'} lines) spans {p10:.1f}-{p90:.1f} "
            f"(10th-90th percentile of {count_of(n, 'interval')}, those over 5x the low median time left out"
            + (f"; {p90 / p10:.1f}x): " if p10 > 0 else "): ") +
            "intervals that hold idle time between requests (a client that pauses) or other work; means over "
            "them understate the server: measure under a steady load",
            label, None, {"bs": bs, "speculative": spec, "gen_tok_s_p10": round(p10, 3), "gen_tok_s_p90": round(p90, 3),
                          "intervals": n}))
    if baseline:
        for bs, tok_s in d.spec_tok_s_by_bs().items():
            base = baseline.at(bs)
            if base is not None and tok_s < base:
                out.append(_finding(
                    "slower_than_baseline",
                    f"{label}: Decode batch gen throughput at {bs} running requests is {tok_s:.1f} tok/s, "
                    f"below the no-speculation baseline {base:.1f} tok/s ({baseline.source})",
                    label, None, {"bs": bs, "gen_tok_s_mean": tok_s, "baseline_tok_s": base,
                                  "baseline_source": baseline.source}))
    return out


# ---------------------------------------------------------------------------------------------
# The document
# ---------------------------------------------------------------------------------------------


def _line_counts(f: FileResult) -> str:
    """``"3 other, 1 damaged line"``: the lines of an input that gave nothing."""
    return f"{f.other_lines} other, {count_of(f.unparsed_lines, 'damaged line')}"


def _nothing_message(files: list[FileResult], shown: bool = False) -> str:
    """``shown``: the rejected lines were printed already (``--show-rejected``), so the command that
    shows them is not suggested again (helper 100)."""
    parts = []
    for f in files:
        # lines of ours, every one damaged: "no line" alone had read as the wrong file given; the
        # command names the file (it had said LOG, a word to replace by hand)
        why = (f": `eagle-cycle inspect {command_arg(f.label)} --show-rejected 5` says why"
               if f.unparsed_lines and not shown else "")
        if f.error:
            parts.append(f"{f.label}: {f.error}")
        elif f.stopped:
            parts.append(f"{f.label}: reading stopped early: {f.stopped}; no [eagle-cycle], JSONL or "
                         f"Decode batch line before it ({_line_counts(f)}{why})")
        elif f.not_a_log:   # a trace, an inspect document, bench JSONL: said in words, not as lines
            parts.append(f"{f.label}: {f.not_a_log}")
        else:
            parts.append(f"{f.label}: no [eagle-cycle], JSONL or Decode batch line ({_line_counts(f)}{why})")
    return "nothing to inspect: " + "; ".join(parts)


def _baseline_tok_s(tok: Any, what: str) -> float:
    """``tok`` as a baseline throughput (tok/s), ``what`` naming it in the error.

    Raises:
        UsageError: not a number, not finite or not positive, or outside ``MIN_TOK_S..MAX_TOK_S``.
    """
    if isinstance(tok, bool) or not isinstance(tok, (int, float)) or not math.isfinite(tok) or tok <= 0:
        raise UsageError(f"{what} must be a positive tok/s, got {tok}")
    if not MIN_TOK_S <= tok <= MAX_TOK_S:
        raise UsageError(f"{what}: {tok:.10g} tok/s is not a throughput (expected {MIN_TOK_S:g} to {MAX_TOK_S:.0e})")
    return float(tok)


def server_starts(path) -> list[tuple[Optional[dict[str, Any]], "FileResult"]]:
    """The log cut at each start-up ``server_args=`` line (:func:`decode_batch.is_startup_line`; a
    warning that mentions ``server_args=`` starts no server): ``(speculative settings or None,
    FileResult)`` per server start, in log order (lines before the first start: settings None). A
    log appended to across restarts (``>> server.log``) holds several runs. Each part is parsed as
    ``inspect`` parses a log (:class:`LogReader`'s chunk parser, one ``FileResult`` per part, so the
    TP-rank repeat window does not cross a restart; ``cycles`` counts its ``[eagle-cycle]`` lines).
    Settings: :func:`decode_batch.speculative_server_args`, with ``"model_path"``
    (:func:`decode_batch.target_model_path`).

    A read that stops early (:class:`logfiles.LogReadStopped`) keeps the parts before it, the last
    one's ``stopped`` saying why.

    Raises:
        LogUnreadable: the input cannot be read as a text log (:func:`logfiles.iter_chunks`).
    """
    from .decode_batch import is_startup_line, speculative_server_args, target_model_path

    reader = LogReader()
    segs: list[tuple[Optional[dict[str, Any]], FileResult]] = [(None, FileResult(label_of(path)))]
    chars = 0
    try:
        for chunk in iter_chunks(path):
            if not segs[0][1].head:
                segs[0][1].head = chunk[:HEAD_CHARS]
            chars += len(chunk)
            if "server_args=" not in chunk:
                reader.feed(chunk, segs[-1][1])
                continue
            buf: list[str] = []
            for ln in chunk.split("\n"):
                if is_startup_line(ln):
                    if buf:
                        reader.feed("\n".join(buf) + "\n", segs[-1][1])
                        buf = []
                    spec = speculative_server_args(ln)
                    if spec is not None:
                        spec["model_path"] = target_model_path(ln)
                    segs.append((spec, FileResult(label_of(path))))
                buf.append(ln)
            if buf:
                reader.feed("\n".join(buf), segs[-1][1])
        segs[0][1].head_whole = chars == len(segs[0][1].head)
    except LogReadStopped as exc:   # the lines before the stop stand, as LogReader.read keeps them
        segs[-1][1].stopped = exc.reason
    return segs


def load_baseline(baseline: Baseline) -> Optional[BaselineRef]:
    """A number (tok/s) or a no-speculation server log (per-batch-size gen throughput).

    Raises:
        UsageError: a number <= 0 or not finite, an empty path, or a log without Decode batch
            intervals of a no-spec server (or whose ``server_args=`` line names a speculative algorithm).
    """
    if baseline is None:
        return None
    if isinstance(baseline, Mapping):
        by_bs = {}
        for bs, tok in baseline.items():
            if not isinstance(bs, int) or isinstance(bs, bool) or bs < 1:
                raise UsageError(f"baseline batch size must be a positive integer, got {bs!r}")
            by_bs[bs] = _baseline_tok_s(tok, f"baseline at bs {bs}")
        if not by_bs:
            raise UsageError("baseline: no batch size given")
        return BaselineRef(by_bs=by_bs, source="--baseline")
    if isinstance(baseline, (str, os.PathLike)) and not os.fspath(baseline).strip():
        raise UsageError("baseline is empty: give the no-speculation tok/s or a no-speculation server log")
    if isinstance(baseline, (int, float)) and not isinstance(baseline, bool):
        return BaselineRef(tok_s=_baseline_tok_s(baseline, "baseline"))
    label = label_of(baseline)
    try:
        starts = server_starts(baseline)
    except LogUnreadable as exc:
        raise UsageError(f"baseline log {label}: {exc.reason}") from None
    # one server start at a time (a log appended across restarts): only no-spec starts give a
    # baseline; a start whose server_args= line names a speculative algorithm is none, even when its
    # lines print no accept length
    plain = DecodeBatchStats()
    speculative = []
    for spec, part in starts:
        if spec is not None and spec.get("algorithm"):
            speculative.append(spec["algorithm"])
        else:
            plain.merge(part.decode)
    by_bs = plain.plain_tok_s_by_bs()
    if not by_bs and speculative:
        raise UsageError(f"baseline log {label}: its server_args= line names speculative_algorithm "
                         f"{speculative[0]}: not a no-speculation server")
    what = starts[0][1].not_a_log if len(starts) == 1 else None
    if not by_bs and what:   # a trace or an inspect document given as the baseline log
        raise UsageError(f"baseline log {label}: {what}")
    if not by_bs:
        raise UsageError(f"baseline log {label} has no Decode batch line of a no-speculation server "
                         "(lines without accept len)")
    return BaselineRef(by_bs=by_bs, source=f"baseline log {label}")


def _file_identity(path) -> Union[tuple[int, int], str]:
    """(device, inode) of an existing file, else its resolved path (so a missing file still compares)."""
    try:
        st = os.stat(path)
        return (st.st_dev, st.st_ino)
    except (OSError, ValueError):
        return os.path.realpath(path)


def _distinct_inputs(paths: list, baseline: Baseline, warn: Callable[[str], None]) -> list:
    """``paths`` with later copies of the same file dropped (a warning per name given again:
    :func:`repeats_read_once`).

    Raises:
        UsageError: stdin (``-``) given twice, as a log twice or as a log and the baseline log.
    """
    stdin_logs = sum(1 for p in paths if os.fspath(p) == "-")
    if stdin_logs > 1:
        raise UsageError("- (stdin) is given more than once; stdin can be read only once")
    if stdin_logs and isinstance(baseline, (str, os.PathLike)) and os.fspath(baseline) == "-":
        raise UsageError("- (stdin) is given as a log and as the baseline log; stdin can be read only once")
    out: list = []
    for msg in repeats_read_once(paths, _file_identity, label_of, out):
        warn(msg)
    return out


def repeats_read_once(paths: Iterable, identity: Callable[[Any], Any], label: Callable[[Any], str],
                      out: list) -> list[str]:
    """Append each file of ``paths`` to ``out`` once (``-`` every time: the callers refuse it twice)
    and return a warning per name given again, in the order of their first repeat: ``"a.log: given
    twice; read once"`` (``given 3 times``) where the same name came again, ``"b.log: same file as
    a.log; read once"`` where another name of the file (a link, another path) came after it.
    ``identity``: what makes two paths one file; ``label``: a path's name in the messages."""
    first_of: dict[Any, str] = {}   # file -> the name it was first given as
    again: dict[str, list] = {}     # a name given again -> [the file's first name, times given in all]
    for path in paths:
        if os.fspath(path) == "-":
            out.append(path)
            continue
        name, key = label(path), identity(path)
        if key not in first_of:
            first_of[key] = name
            out.append(path)
            continue
        first = first_of[key]
        seen = again.setdefault(name, [first, 1 if name == first else 0])
        seen[1] += 1
    return [f"{name}: given {'twice' if n == 2 else f'{n} times'}; read once" if name == first else
            f"{name}: same file as {first}; read once" for name, (first, n) in again.items()]


def inspect_paths(paths: Iterable[Union[str, "os.PathLike[str]"]], *, baseline: Baseline = None,
                  warn: Optional[Callable[[str], None]] = None, on_record: Optional[RecordHook] = None,
                  chunk_chars: int = CHUNK_CHARS, on_rejected: Optional[Callable[[dict[str, Any]], None]] = None,
                  max_rejected: int = 0, groups_out: Optional[list] = None) -> dict[str, Any]:
    """Read logs and return the ``eagle-cycle inspect --json`` document (schema ``eagle-cycle-inspect/1``).

    Args:
        paths: log files (plain or gzip, by content) as ``str``/``Path``, or ``-`` for stdin.
        baseline: no-speculation tok/s (number), or the path of a no-spec server log whose
            Decode batch gen throughput per batch size is the baseline; enables ``slower_than_baseline``.
        warn: called with one line per input that was skipped or cut short (default: logging WARNING).
        on_record: called with ``(file_label, CycleRecord)`` per cycle record in file order
            (every rank's line, including those merged into a cycle another rank printed).
        chunk_chars: characters per read chunk.
        on_rejected: called with ``{"file", "line", "reason", "text"}`` for each of the first
            ``max_rejected`` damaged lines (``line`` 1-based; see :class:`LogReader`).
        max_rejected: how many damaged lines to hand to ``on_rejected`` (0: none).
        groups_out: when a list, the :class:`Group` objects behind ``groups`` are appended to it
            (their exact per-cycle distributions, for :func:`~.metrics.exposition`).

    Returns:
        ``{"schema", "files", "unparsed_lines", "other_lines", "groups": [...], "decode_batch": {...}
        or None, "findings": [...], "wiring": [...]}``; times in ms, throughput in tok/s, shares
        in [0, 1]; ``wiring``: each start-up wiring line found, ``{"file", "ids", "positions",
        "reading", "stock_positions"}`` (:func:`~.metrics.parse_wiring_line`).

    Raises:
        UsageError: no input gave a cycle or a Decode batch interval (every input missing, a
            directory, empty, binary, or without any such line); stdin (``-``) given twice (as
            logs, or as a log and ``baseline``); or a bad ``baseline``. The same file given twice
            is read once, with a warning.
    """
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]   # one path, not an iterable of characters
    warn = warn or _log.warning
    paths = _distinct_inputs(list(paths), baseline, warn)
    base = load_baseline(baseline)
    reader = LogReader(on_record=on_record, chunk_chars=chunk_chars, on_rejected=on_rejected,
                       max_rejected=max_rejected)
    for path in paths:
        reader.read(path)
    files = reader.files
    if not files:
        raise UsageError("no log given")
    if not any(f.usable for f in files):
        raise UsageError(_nothing_message(files, shown=bool(max_rejected and on_rejected)))
    for f in files:
        if f.error:
            warn(f"{f.label}: skipped: {f.error}")
        elif f.stopped:
            warn(f"{f.label}: reading stopped early ({f.stopped}); the lines before it are in the report")
        elif f.not_a_log:
            warn(f"{f.label}: skipped: {f.not_a_log}")
        elif not f.usable:
            warn(f"{f.label}: no [eagle-cycle], JSONL or Decode batch line ({_line_counts(f)})")

    # one order whichever reader counted them (the bulk reader meets a chunk's configurations in
    # token order, the per-line path in line order): by input, then configuration, then timing kind
    order = {}
    for i, f in enumerate(reader.files):
        order.setdefault(f.label, i)
    groups = sorted(reader.groups.values(), key=lambda g: (order.get(g.file, len(order)), g.bs, g.steps, g.topk,
                                                             g.draft_tokens, g.device_spans))
    if groups_out is not None:
        groups_out.extend(groups)
    # the input's batch sizes: the cycle groups' and the stock speculative lines'
    # the stock speculative lines' batch sizes as advise makes runs of them (a plateau's members as one)
    stock = {} if base is None else {b: t for f in files for b, t in f.decode.spec_run_sizes().items()}
    sizes = [] if base is None else sorted({g.bs for g in groups} | set(stock.values()))
    if base is not None and base.source.startswith("baseline log"):
        if sizes and not set(sizes) & set(base.by_bs):
            # the BS:TOK_S form warns at the command line; a log's batch sizes are known only here
            warn(f"{base.source}: no-spec throughput at bs {', '.join(map(str, sorted(base.by_bs)))}, none of the "
                 f"input's ({', '.join(map(str, sizes))}); not used")
    if base is not None and base.tok_s is not None:
        if len(sizes) > 1:
            raise UsageError(f"one baseline {base.tok_s:g} tok/s for runs at several batch sizes "
                             f"({', '.join(map(str, sizes))}): give BS:TOK_S per batch size, or a no-spec server log")
        if sizes:   # the runs' one batch size, as advise places it (not a ramp's or drain's stock intervals)
            base = BaselineRef(by_bs={**{b: base.tok_s for b in stock}, sizes[0]: base.tok_s}, source=base.source)
    findings = []
    for g in groups:
        findings += group_findings(g, base)
    decode_total = DecodeBatchStats()
    per_file = {}
    for f in files:
        if f.decode.lines_seen:
            per_file[f.label] = f.decode.summary()
            decode_total.merge(f.decode)
            findings += decode_findings(f.label, f.decode, base)
    decode_doc = None
    if per_file:
        decode_doc = decode_total.summary()
        decode_doc["per_file"] = per_file
    # file names are labels already (logfiles.label_of); a JSONL record's rank is any text: a lone
    # surrogate there (a "\\udcff" escape) is written as a name's byte would be
    return text_safe({
        "schema": SCHEMA,
        "files": [f.label for f in files if not f.error],
        "unparsed_lines": sum(f.unparsed_lines for f in files),
        "other_lines": sum(f.other_lines for f in files),
        "groups": [g.to_dict() for g in groups],
        "decode_batch": decode_doc,
        "findings": findings,
        "wiring": [{"file": f.label, **w} for f in files for w in f.wiring],
    })
