"""One EAGLE-3 decode cycle as a record, and the one format/parse pair for its log line and JSONL.

A *cycle* is one draft + verify + draft-extend round of SGLang's ``EAGLEWorkerV2`` decode branch.
The server log gets one line per cycle (README, "Per-cycle timing"), a public interface that readers such as
``eagle-cycle inspect`` depend on::

    [eagle-cycle] cycle=1234 bs=1 steps=2 topk=1 draft_tokens=3 draft_ms=0.52 verify_ms=21.40 \
verify_fwd_ms=20.85 extend_ms=0.41 other_ms=0.51 total_ms=23.24 accept_len=2.00 accepts=2 tok_s=85.4 graph=1 \
draft_prep_ms=0.40 gap_ms=0.18

Conventions:

* every ``*_ms`` field is milliseconds on the device's timeline between CUDA events on the
  cycle's stream (2 decimals in the line), idle time included; a phase that did not run (no draft
  forward when ``num_steps = 1``) is ``-`` in the line and ``null`` in JSONL;
* device-span lines (those carrying ``draft_prep_ms``): ``draft_ms``, ``verify_fwd_ms`` and
  ``extend_ms`` span the launches of the draft, the target verify forward and the draft-extend
  (SGLang's own ``device_timer_ctx`` segments); ``draft_prep_ms`` runs from the cycle's start to
  the draft launch, ``verify_ms`` is the whole ``verify`` call, ``other_ms`` the remainder, so
  ``draft_prep + draft + verify + extend + other = total``; ``gap_ms`` runs from the previous
  cycle's end to this one's start, and ``total_ms + gap_ms`` is the cycle's period. Older lines
  have no ``draft_prep_ms``: their ``draft_ms`` ran from the cycle's start to ``verify`` and their
  ``extend_ms`` from the publish to the cycle's end (readers keep the two kinds apart);
* *accept length* counts the bonus token: accepted draft tokens + 1 per request and verify;
* ``accepts`` lists per-request accept lengths when ``bs <= 64`` (:data:`ACCEPTS_MAX_BS`);
  above that, ``accept_hist=1:3,2:5`` (accept length : requests);
* ``tok_s`` is committed tokens of the whole batch per second of this cycle's period:
  ``sum(accepts) / (total_ms + gap_ms) * 1000`` (``total_ms`` alone when the gap is unknown or
  the line is older; 1 decimal);
* optional fields are appended in this order: ``draft_prep_ms=`` and ``gap_ms=`` (device-span
  lines), ``n=`` and ``total_max_ms=`` (aggregated lines only),
  ``draft_step_ms=a,b`` (eager draft forwards), ``rank=tp0`` (with ``SGLANG_EAGLE_CYCLE_ALL_RANKS=1``;
  ``rank=tp0.pp0.dp1`` whenever dp or pp size > 1, ``rank=tp4.adp1`` with DP attention),
  ``adaptive=explore|exploit`` (with ``SGLANG_EAGLE_CYCLE_ADAPTIVE=cost``: whether this cycle's
  depth was a probe of the cost-aware policy or its pick, :mod:`sglang_eagle_cycle.adaptive`).
  New fields are only ever appended; none is renamed.

An *aggregated* line (``SGLANG_EAGLE_CYCLE_LOG_EVERY=N``) has the same prefix and keys, the
``*_ms``, ``accept_len`` and ``tok_s`` fields holding means over ``n`` cycles, ``accept_hist``
instead of ``accepts``, ``total_max_ms`` the largest cycle, and ``cycle`` the last cycle's id.
Readers weight aggregated lines by ``n``.

Usage::

    from sglang_eagle_cycle.cycle import CycleRecord, format_line, parse_line
    rec = parse_line(line)          # None for lines that are not ours; never raises
    assert parse_line(format_line(rec)) == rec   # equal to the printed precision
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Optional

from .argtypes import MAX_BS

PREFIX = "[eagle-cycle]"

#: Batches up to this size list per-request accept lengths; larger ones write a histogram.
ACCEPTS_MAX_BS = 64

#: Phase fields in line order (milliseconds).
PHASES = ("draft_ms", "verify_ms", "verify_fwd_ms", "extend_ms", "other_ms", "total_ms")
#: Fields of device-span lines, written after ``graph=`` (milliseconds). A line that carries them
#: measures ``draft_ms``, ``verify_fwd_ms`` and ``extend_ms`` as device spans of the launches
#: (see :attr:`CycleRecord.device_spans`); older lines measured ``draft_ms`` from the cycle's start.
SPAN_FIELDS = ("draft_prep_ms", "gap_ms")
#: Every time field a record may carry.
ALL_PHASES = PHASES + SPAN_FIELDS

#: Configuration key of a record: cycles that share it may be aggregated together.
CONFIG_FIELDS = ("bs", "steps", "topk", "draft_tokens")
#: Values of the optional ``adaptive=`` field: the cost-aware adaptive policy probes this depth, or runs its pick.
ADAPTIVE_MODES = ("explore", "exploit")

#: Deepest draft (``steps``) a line may claim: bounds the per-position tables built from a log.
MAX_LINE_STEPS = 1024
#: Longest time (ms) a line may claim for a phase or cycle (1000 s): sums over any log stay finite.
MAX_LINE_MS = 1e6
#: Largest ``tok_s``, ``n`` or histogram count a line may claim.
MAX_LINE_COUNT = 10 ** 12
#: a per-cycle JSONL record's ``accept_len`` is the mean of its ``accepts`` to within this (the
#: JSONL keeps 4 decimals, a line 2; a record converted from a line keeps the line's rounding)
ACCEPT_LEN_TOLERANCE = 0.0051
#: Largest batch (``bs``) a line may claim: the largest batch size ``eagle-cycle`` reads anywhere.
MAX_LINE_BS = MAX_BS
#: How far (ms) a per-cycle line's parts may miss its ``total_ms``: six numbers rounded to 2 decimals
#: (five parts and the total) are each off by at most 0.005 ms.
SUM_TOLERANCE_MS = 0.03
#: How far (ms) a line's ``verify_fwd_ms`` may exceed its ``verify_ms``: the target forward runs
#: inside the verify, and each of the two rounded values is off by at most 0.005 ms.
FWD_TOLERANCE_MS = 0.01


@dataclass(slots=True)
class CycleRecord:
    """Timing and acceptance of one decode cycle (or the mean of ``n`` cycles when ``n`` is set).

    Attributes:
        cycle: decode-cycle counter of the worker (last cycle's id for an aggregate).
        bs: requests in the batch.
        steps: ``--speculative-num-steps`` (draft depth).
        topk: ``--speculative-eagle-topk``.
        draft_tokens: ``--speculative-num-draft-tokens`` (tokens verified per request).
        draft_ms, verify_ms, verify_fwd_ms, extend_ms, other_ms, total_ms: phase times in ms,
            ``None`` for a phase that did not run. ``other = total - draft - verify - extend``.
        accept_len: mean accept length over the batch's requests (tokens, bonus included).
        accepts: per-request accept lengths, length ``bs`` (per-cycle lines with ``bs <= 64``).
        accept_hist: ``{accept_length: requests}`` (aggregates, and per-cycle lines with ``bs > 64``).
        tok_s: committed tokens of the batch per second of cycle time.
        graph: whether the target verify ran from a CUDA graph.
        draft_step_ms: per draft forward, ms (eager mode only), length ``steps - 1``.
        rank: ``tp0``-style rank label (with ``SGLANG_EAGLE_CYCLE_ALL_RANKS=1``, or when dp or pp size > 1).
        n: number of cycles summarised (aggregated lines only).
        total_max_ms: longest cycle among the ``n`` (aggregated lines only).
        ts: wall-clock time (Unix seconds) the record was emitted; JSONL only, not in the line.
        device_spans: the record carries ``draft_prep_ms`` and ``gap_ms`` (written since the
            device-span timing): ``draft_ms``, ``verify_fwd_ms`` and ``extend_ms`` are the device
            spans of the phases' launches and ``draft_prep + draft + verify + extend + other = total``.
            False for older records, whose ``draft_ms`` ran from the cycle's start to ``verify``
            and whose ``extend_ms`` ran from the publish to the cycle's end.
        draft_prep_ms: cycle start to the draft launch (host preparation, small preparation
            kernels and device idle time, which events cannot tell apart); ``None`` when no draft
            forward ran (``steps <= 1``).
        gap_ms: the previous cycle's end to this cycle's start on the same stream; ``None`` when
            another batch ran in between, the stream changed, or the scheduler was idle.
            ``total_ms + gap_ms`` is the cycle's period.
        adaptive: ``explore`` (the cost-aware adaptive policy runs this depth as a probe) or
            ``exploit`` (its pick); ``None`` without that policy. One of :data:`ADAPTIVE_MODES`.
    """

    cycle: int
    bs: int
    steps: int
    topk: int
    draft_tokens: int
    draft_ms: Optional[float] = None
    verify_ms: Optional[float] = None
    verify_fwd_ms: Optional[float] = None
    extend_ms: Optional[float] = None
    other_ms: Optional[float] = None
    total_ms: Optional[float] = None
    accept_len: Optional[float] = None
    accepts: Optional[list[int]] = None
    accept_hist: Optional[dict[int, int]] = None
    tok_s: Optional[float] = None
    graph: bool = False
    draft_step_ms: Optional[list[float]] = None
    rank: Optional[str] = None
    n: Optional[int] = None
    total_max_ms: Optional[float] = None
    ts: Optional[float] = field(default=None, compare=False)
    device_spans: bool = False
    draft_prep_ms: Optional[float] = None
    gap_ms: Optional[float] = None
    adaptive: Optional[str] = None

    @property
    def config(self) -> tuple[int, int, int, int]:
        """``(bs, steps, topk, draft_tokens)``: the grouping key of ``inspect`` and the aggregator."""
        return (self.bs, self.steps, self.topk, self.draft_tokens)

    @property
    def period_ms(self) -> Optional[float]:
        """``total_ms + gap_ms`` (ms): the cycle's period; ``total_ms`` when the gap is unknown."""
        if self.total_ms is None:
            return None
        return self.total_ms + (self.gap_ms or 0.0)

    @property
    def weight(self) -> int:
        """Cycles this record stands for (``n`` for an aggregate, else 1)."""
        return self.n or 1

    def histogram(self) -> dict[int, int]:
        """Accept-length histogram ``{accept_length: requests}`` from ``accepts`` or ``accept_hist``."""
        if self.accept_hist is not None:
            return dict(self.accept_hist)
        if self.accepts is not None:
            return dict(Counter(self.accepts))
        return {}


def make_record(
    *,
    cycle: int,
    config: tuple[int, int, int, int],
    phases_ms: dict[str, Optional[float]],
    accepts: list[int],
    graph: bool,
    draft_step_ms: Optional[list[float]] = None,
    rank: Optional[str] = None,
    ts: Optional[float] = None,
    adaptive: Optional[str] = None,
) -> CycleRecord:
    """Build a per-cycle record from measured phases and per-request accept lengths.

    Args:
        cycle: cycle id.
        config: ``(bs, steps, topk, draft_tokens)``.
        phases_ms: ``draft_ms``, ``verify_ms``, ``verify_fwd_ms``, ``extend_ms``, ``total_ms`` in ms
            (``None`` where a phase did not run), and for a device-span record also
            ``draft_prep_ms`` and ``gap_ms`` (the key's presence makes it one). ``other_ms`` is
            derived as ``total - draft_prep - draft - verify - extend`` and clamped at 0 (event
            rounding), so the five parts sum to ``total``.
        accepts: per-request accept lengths (tokens, bonus included), length ``bs``.
        adaptive: the adaptive policy's state for this cycle (:data:`ADAPTIVE_MODES`), or None.

    Returns:
        A :class:`CycleRecord` with ``accept_len`` = mean of ``accepts`` and
        ``tok_s = sum(accepts) / period * 1000``, the period being ``total_ms + gap_ms``
        (``total_ms`` when the gap is unknown). Batches above :data:`ACCEPTS_MAX_BS` requests keep
        a histogram instead of the list.
    """
    bs, steps, topk, draft_tokens = config
    total = phases_ms.get("total_ms")
    spans = "draft_prep_ms" in phases_ms
    gap = phases_ms.get("gap_ms") if spans else None
    other = None
    if total is not None:
        spent = sum(phases_ms.get(k) or 0.0 for k in ("draft_prep_ms", "draft_ms", "verify_ms", "extend_ms"))
        other = max(0.0, total - spent)
    accepted = sum(accepts)
    period = None if total is None else total + (gap or 0.0)
    tok_s = accepted / period * 1000.0 if period and period > 0 else None
    if tok_s is not None and not math.isfinite(tok_s):
        tok_s = None  # a total too small to divide by (not a measurable cycle)
    big = len(accepts) > ACCEPTS_MAX_BS
    return CycleRecord(
        cycle=cycle, bs=bs, steps=steps, topk=topk, draft_tokens=draft_tokens,
        draft_ms=phases_ms.get("draft_ms"), verify_ms=phases_ms.get("verify_ms"),
        verify_fwd_ms=phases_ms.get("verify_fwd_ms"), extend_ms=phases_ms.get("extend_ms"),
        other_ms=other, total_ms=total,
        accept_len=accepted / len(accepts) if accepts else None,
        accepts=None if big else list(accepts),
        accept_hist=dict(sorted(Counter(accepts).items())) if big else None,
        tok_s=tok_s, graph=bool(graph), draft_step_ms=draft_step_ms, rank=rank, ts=ts,
        device_spans=spans, draft_prep_ms=phases_ms.get("draft_prep_ms") if spans else None, gap_ms=gap,
        adaptive=adaptive,
    )


# ---------------------------------------------------------------------------------------------
# The log line
# ---------------------------------------------------------------------------------------------


def _ms(x: Optional[float]) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.2f}"


def _hist_text(hist: dict[int, int]) -> str:
    return ",".join(f"{k}:{v}" for k, v in sorted(hist.items())) or "-"


def format_line(rec: CycleRecord) -> str:
    """The ``[eagle-cycle]`` line for ``rec`` (README, "Per-cycle timing"), without a trailing newline.

    Per-cycle records write ``accepts=`` when they hold a list, aggregates (``n`` set) and
    records holding only a histogram write ``accept_hist=``.
    """
    if rec.accepts is not None and rec.n is None:
        acc = "accepts=" + (",".join(str(a) for a in rec.accepts) or "-")
    else:
        acc = "accept_hist=" + _hist_text(rec.histogram())
    # (x - x != 0: None-free test for inf and nan, cheaper than math.isfinite per value; hot path)
    dr, vf, fw, ex, ot, tt, al = ["-" if x is None or x - x != 0 else f"{x:.2f}" for x in (
        rec.draft_ms, rec.verify_ms, rec.verify_fwd_ms, rec.extend_ms, rec.other_ms, rec.total_ms, rec.accept_len)]
    parts = [
        PREFIX,
        f"cycle={rec.cycle} bs={rec.bs} steps={rec.steps} topk={rec.topk} draft_tokens={rec.draft_tokens}",
        f"draft_ms={dr} verify_ms={vf} verify_fwd_ms={fw} extend_ms={ex} other_ms={ot} total_ms={tt}",
        "accept_len=" + al,
        acc,
        "tok_s=" + ("-" if rec.tok_s is None or not math.isfinite(rec.tok_s) else f"{rec.tok_s:.1f}"),
        f"graph={1 if rec.graph else 0}",
    ]
    if rec.device_spans:
        parts.append(f"draft_prep_ms={_ms(rec.draft_prep_ms)} gap_ms={_ms(rec.gap_ms)}")
    if rec.n is not None:
        parts.append(f"n={rec.n} total_max_ms={_ms(rec.total_max_ms)}")
    if rec.draft_step_ms:
        parts.append("draft_step_ms=" + ",".join(_ms(x) for x in rec.draft_step_ms))
    if rec.rank:
        parts.append(f"rank={rec.rank}")
    if rec.adaptive:
        parts.append(f"adaptive={rec.adaptive}")
    return " ".join(parts)


# Values are matched loosely (``[-.\d]+``: no backtracking, the hot path of ``inspect``) and
# validated by int()/float(): a damaged value makes the whole line None.
# The tail's repeat is possessive (``*+``): a plain ``(?: ...)*`` keeps backtracking state for every
# token it took, about 1 KB each, so one damaged line of millions of ``k=v`` tokens took gigabytes.
_V = r"([-.\d]+)"
#: keys of the line's fixed part (before ``graph=``): one repeated after it makes the line damaged
_FIXED_KEYS = frozenset(("cycle", *CONFIG_FIELDS, *PHASES, "accept_len", "accepts", "accept_hist", "tok_s", "graph"))
_LINE_RE = re.compile(
    r"\[eagle-cycle\] cycle=(\d+) bs=(\d+) steps=(\d+) topk=(\d+) draft_tokens=(\d+)"
    rf" draft_ms={_V} verify_ms={_V} verify_fwd_ms={_V} extend_ms={_V} other_ms={_V} total_ms={_V}"
    rf" accept_len={_V} (accepts|accept_hist)=([-,:\d]+) tok_s={_V} graph=([01])((?: \S+=\S*)*+)\s*$"
)


def _opt_float(s: str) -> Optional[float]:
    return None if s == "-" else float(s)


def _parse_hist(text: str) -> dict[int, int]:
    if text == "-":
        return {}
    out: dict[int, int] = {}
    for item in text.split(","):
        k, v = item.split(":")
        if int(k) in out:   # an accept length given twice, as a JSONL key given twice
            raise ValueError(f"accept length {k} twice")
        out[int(k)] = int(v)
    return out


def max_accept_len(steps: int, draft_tokens: int) -> int:
    """Longest possible accept length (tokens): ``min(steps + 1, draft_tokens)``.

    A verify accepts at most one token per draft position (``steps`` deep) plus the bonus token,
    and never more than the ``draft_tokens`` it verified.
    """
    return min(steps + 1, draft_tokens)


def _time_ok(x: Optional[float]) -> bool:
    return x is None or 0.0 <= x <= MAX_LINE_MS        # False for NaN and inf ("1e999", 400 digits) too


def _sum_reason(rec: CycleRecord) -> Optional[str]:
    """Why the parts of a per-cycle record do not add up to its total, or None when they do."""
    total = rec.total_ms
    if total is None:
        return None
    parts = (rec.draft_prep_ms, rec.draft_ms, rec.verify_ms, rec.extend_ms, rec.other_ms) if rec.device_spans \
        else (rec.draft_ms, rec.verify_ms, rec.extend_ms, rec.other_ms)
    spent = 0.0
    for x in parts:          # in line order: the bulk reader decides the same lines in hundredths
        if x is not None:
            spent += x
    over = spent - total
    if over > SUM_TOLERANCE_MS + 1e-6:
        return f"the parts add up to {spent:.2f} ms, more than total_ms={total:.2f}"
    if rec.device_spans and -over > SUM_TOLERANCE_MS + 1e-6:
        return f"the parts add up to {spent:.2f} ms, less than total_ms={total:.2f}"
    return None


def implausible(rec: CycleRecord) -> Optional[str]:
    """Why ``rec`` is not a record the profiler can write (one short phrase), or None when it is.

    See :func:`plausible` for the checks.
    """
    if rec.bs < 1 or rec.topk < 1 or rec.draft_tokens < 1:
        return "bs, topk and draft_tokens must be at least 1"
    if rec.bs > MAX_LINE_BS:
        return f"bs={rec.bs} is beyond any batch (at most {MAX_LINE_BS})"
    if not 0 <= rec.steps <= MAX_LINE_STEPS:
        return f"steps={rec.steps} is beyond any draft (at most {MAX_LINE_STEPS})"
    if not all(_time_ok(getattr(rec, k)) for k in ALL_PHASES):
        return f"a phase time is negative, not finite or above {MAX_LINE_MS:g} ms"
    if rec.total_ms is not None and rec.total_ms <= 0.0:
        return "total_ms=0: no cycle takes no time"
    if not _time_ok(rec.total_max_ms):
        return f"total_max_ms is negative, not finite or above {MAX_LINE_MS:g} ms"
    if not (rec.tok_s is None or 0.0 <= rec.tok_s <= MAX_LINE_COUNT):
        return "tok_s is negative or not finite"
    if rec.draft_step_ms is not None and not all(_time_ok(x) for x in rec.draft_step_ms):
        return "a draft_step_ms value is negative, not finite or too large"
    if rec.n is not None and not 1 <= rec.n <= MAX_LINE_COUNT:
        return f"n={rec.n} is not a count of cycles"
    top = max_accept_len(rec.steps, rec.draft_tokens)
    if rec.accept_len is not None and not 1.0 <= rec.accept_len <= top:
        return f"accept_len={rec.accept_len:g} is outside 1..{top}"
    if rec.accepts is not None:
        if len(rec.accepts) != rec.bs:
            return f"accepts lists {len(rec.accepts)} requests for bs={rec.bs}"
        if not all(1 <= a <= top for a in rec.accepts):
            return f"an accept length is outside 1..{top}"
    if rec.accept_hist is not None and not all(1 <= k <= top and 0 <= c <= MAX_LINE_COUNT
                                               for k, c in rec.accept_hist.items()):
        return f"an accept_hist length is outside 1..{top} or a count is negative"
    if rec.accept_hist is not None and sum(rec.accept_hist.values()) != rec.bs * (rec.n or 1):
        # one accept length per request and cycle, as accepts lists them
        return (f"accept_hist counts {sum(rec.accept_hist.values())} requests for bs={rec.bs}"
                + (f" over n={rec.n} cycles" if rec.n else ""))
    # one cycle's (an aggregated line's means may run over different cycles: a forward timed in some)
    if rec.n is None and rec.verify_fwd_ms is not None and rec.verify_ms is not None \
            and rec.verify_fwd_ms - rec.verify_ms > FWD_TOLERANCE_MS + 1e-6:
        return (f"verify_fwd_ms={rec.verify_fwd_ms:.2f} exceeds verify_ms={rec.verify_ms:.2f}: the target forward "
                "is part of the verify")
    if rec.n is None:
        return _sum_reason(rec)
    return None


def plausible(rec: CycleRecord) -> bool:
    """Whether ``rec`` is a record the profiler can write; the parsers drop any other as damaged.

    Checks: ``bs``, ``topk``, ``draft_tokens`` >= 1, ``bs`` <= :data:`MAX_LINE_BS` and ``steps`` <=
    :data:`MAX_LINE_STEPS`; phase times, ``total_max_ms`` and ``draft_step_ms`` in ``0..MAX_LINE_MS``
    ms and ``total_ms`` above 0; ``tok_s``, ``n`` (>= 1) and histogram counts at most
    :data:`MAX_LINE_COUNT`; every accept length in ``1..max_accept_len(steps, draft_tokens)``
    (``accept_len`` too, as a mean); an ``accepts`` list of exactly ``bs`` requests (so never
    empty). Per-cycle records (no ``n``) must also add up, to within :data:`SUM_TOLERANCE_MS`
    (the line's 2-decimal rounding of six numbers): device-span records
    ``draft_prep + draft + verify + extend + other = total``, older records
    ``draft + verify + extend + other <= total``. Aggregated records are means over cycles whose
    parts may have run in some cycles only, so they are not held to the sum.
    """
    return implausible(rec) is None


def is_ours(line: str) -> bool:
    """True when ``line`` carries our prefix (whether or not it parses)."""
    return PREFIX in line


def parse_line(line: str) -> Optional[CycleRecord]:
    """Parse one ``[eagle-cycle]`` line (any log prefix before it is ignored).

    Returns:
        The :class:`CycleRecord`, or ``None`` when the line is not ours or is damaged
        (truncated, garbage values, or values the profiler cannot write: see :func:`plausible`;
        :func:`line_rejection` says why). Never raises on any ``str`` input.
    """
    i = line.find(PREFIX)
    if i < 0:
        return None
    m = _LINE_RE.match(line, i)
    if m is None:
        return None
    rec = _record_of(m)
    return rec if rec is not None and plausible(rec) else None


def line_rejection(line: str) -> Optional[str]:
    """Why :func:`parse_line` refuses ``line`` (one short phrase), or None when it parses.

    Slower than :func:`parse_line`: meant for the few lines a user asks to see. Never raises.
    """
    i = line.find(PREFIX)
    if i < 0:
        return f"no {PREFIX} prefix"
    from .logfiles import cut_reason   # here: the server's processes import this module, not that one

    cut = cut_reason(line)
    if cut is not None:
        return cut
    m = _LINE_RE.match(line, i)
    if m is None:
        return "not the [eagle-cycle] layout: a field missing, cut, malformed or out of order, or text after it"
    rec = _record_of(m)
    if rec is None:
        tail = m.group(m.lastindex) or ""
        twice = _field_twice(tail)
        if twice:
            return f"{twice} given twice"
        return _half_span(tail) or "a value is not a number"
    return implausible(rec)


def _half_span(tail: str) -> Optional[str]:
    """Why a line's tail holds one of the device-span pair without the other, else None:
    :func:`format_line` writes ``draft_prep_ms=`` and ``gap_ms=`` together (``-`` where unknown), so a
    line with one alone was cut between them (helper 100: a mid-file line cut after
    ``draft_prep_ms=0.35`` had been counted as a cycle)."""
    keys = {tok.partition("=")[0] for tok in tail.split()}
    if ("draft_prep_ms" in keys) != ("gap_ms" in keys):
        have, lack = ("draft_prep_ms", "gap_ms") if "draft_prep_ms" in keys else ("gap_ms", "draft_prep_ms")
        return f"{have} without {lack}: a device-span line cut short"
    return None


def _field_twice(tail: str) -> Optional[str]:
    """The first key of a line's tail (the ``key=value`` tokens after ``graph=``) that the line gives
    twice, in its fixed part or earlier in the tail, else None."""
    seen: set[str] = set()
    for tok in tail.split():
        key = tok.partition("=")[0]
        if key in _FIXED_KEYS or key in seen:
            return key
        seen.add(key)
    return None


def _record_of(m: "re.Match[str]") -> Optional[CycleRecord]:
    """The record of a :data:`_LINE_RE` match, None when a value does not convert (not yet checked
    with :func:`plausible`)."""
    c, bs, st, tk, dt, d, v, vf, e, o, t, al, kind, acc, ts, g, tail = m.groups()
    try:
        rec = CycleRecord(
            int(c), int(bs), int(st), int(tk), int(dt),
            None if d == "-" else float(d), None if v == "-" else float(v),
            None if vf == "-" else float(vf), None if e == "-" else float(e),
            None if o == "-" else float(o), None if t == "-" else float(t),
            None if al == "-" else float(al), None, None,
            None if ts == "-" else float(ts), g == "1",
        )
        if kind == "accepts":
            rec.accepts = [] if acc == "-" else [int(a) for a in acc.split(",")]
        else:
            rec.accept_hist = _parse_hist(acc)
        if tail:
            twice = _field_twice(tail)
            if twice:   # a field given twice: which one holds?
                raise ValueError(f"{twice} twice")
            gap_given = False
            for tok in tail.split():
                key, _, val = tok.partition("=")
                if key == "n":
                    rec.n = int(val)
                elif key == "total_max_ms":
                    rec.total_max_ms = _opt_float(val)
                elif key == "draft_step_ms":
                    rec.draft_step_ms = [_opt_float(x) for x in val.split(",")] if val else None
                elif key == "rank":
                    rec.rank = val or None
                elif key == "draft_prep_ms":
                    rec.draft_prep_ms, rec.device_spans = _opt_float(val), True
                elif key == "gap_ms":
                    rec.gap_ms, gap_given = _opt_float(val), True
                elif key == "adaptive":
                    if val not in ADAPTIVE_MODES:
                        raise ValueError(f"adaptive={val}")
                    rec.adaptive = val
                # unknown keys: fields appended by a newer version; ignore them
            if rec.device_spans != gap_given:   # written as a pair: one alone is a cut line (_half_span)
                raise ValueError("a device-span pair half given")
    except (ValueError, OverflowError):
        return None
    return rec


# ---------------------------------------------------------------------------------------------
# JSONL
# ---------------------------------------------------------------------------------------------


def _r(x: Optional[float], nd: int = 4) -> Optional[float]:
    return None if x is None else round(float(x), nd)


def to_dict(rec: CycleRecord) -> dict[str, Any]:
    """JSON-ready dict with the line's keys (``accepts`` a list, ``accept_hist`` ``{"2": 5}``)."""
    d: dict[str, Any] = {
        "cycle": rec.cycle, "bs": rec.bs, "steps": rec.steps, "topk": rec.topk,
        "draft_tokens": rec.draft_tokens,
    }
    for k in PHASES:
        d[k] = _r(getattr(rec, k))
    d["accept_len"] = _r(rec.accept_len)
    if rec.accepts is not None and rec.n is None:
        d["accepts"] = list(rec.accepts)
    else:
        d["accept_hist"] = {str(k): v for k, v in sorted(rec.histogram().items())}
    d["tok_s"] = _r(rec.tok_s, 2)
    d["graph"] = 1 if rec.graph else 0
    if rec.device_spans:
        d["draft_prep_ms"] = _r(rec.draft_prep_ms)
        d["gap_ms"] = _r(rec.gap_ms)
    if rec.n is not None:
        d["n"] = rec.n
        d["total_max_ms"] = _r(rec.total_max_ms)
    if rec.draft_step_ms:
        d["draft_step_ms"] = [_r(x) for x in rec.draft_step_ms]
    if rec.rank:
        d["rank"] = rec.rank
    if rec.adaptive:
        d["adaptive"] = rec.adaptive
    if rec.ts is not None:
        d["ts"] = round(rec.ts, 6)
    return d


def _jn(x: Optional[float], nd: int) -> str:
    if x is None:
        return "null"
    x = float(x)
    return repr(round(x, nd)) if math.isfinite(x) else "null"


def to_json(rec: CycleRecord) -> str:
    """One JSONL line (no newline) for ``rec``: ``json.dumps(to_dict(rec))`` in compact form.

    Written out by hand (a third of ``json.dumps``' cost: it runs once per cycle); non-finite
    numbers become ``null``.
    """
    # _jn inlined for the seven 4-decimal fields (x - x != 0 is true for inf and nan; hot path)
    dr, vf, fw, ex, ot, tt, al = ["null" if x is None or x - x != 0 else repr(round(float(x), 4)) for x in (
        rec.draft_ms, rec.verify_ms, rec.verify_fwd_ms, rec.extend_ms, rec.other_ms, rec.total_ms, rec.accept_len)]
    parts = [
        f'{{"cycle":{rec.cycle:d},"bs":{rec.bs:d},"steps":{rec.steps:d},"topk":{rec.topk:d},'
        f'"draft_tokens":{rec.draft_tokens:d},"draft_ms":{dr},"verify_ms":{vf},"verify_fwd_ms":{fw},'
        f'"extend_ms":{ex},"other_ms":{ot},"total_ms":{tt},"accept_len":{al},'
    ]
    if rec.accepts is not None and rec.n is None:
        parts.append('"accepts":[' + ",".join([f"{a:d}" for a in rec.accepts]) + "],")
    else:
        parts.append('"accept_hist":{' + ",".join(
            [f'"{k:d}":{v:d}' for k, v in sorted(rec.histogram().items())]) + "},")
    parts.append(f'"tok_s":{_jn(rec.tok_s, 2)},"graph":{1 if rec.graph else 0}')
    if rec.device_spans:
        parts.append(f',"draft_prep_ms":{_jn(rec.draft_prep_ms, 4)},"gap_ms":{_jn(rec.gap_ms, 4)}')
    if rec.n is not None:
        parts.append(f',"n":{rec.n:d},"total_max_ms":{_jn(rec.total_max_ms, 4)}')
    if rec.draft_step_ms:
        parts.append(',"draft_step_ms":[' + ",".join([_jn(x, 4) for x in rec.draft_step_ms]) + "]")
    if rec.rank:
        parts.append(',"rank":' + json.dumps(rec.rank))
    if rec.adaptive:
        parts.append(f',"adaptive":"{rec.adaptive}"')
    if rec.ts is not None:
        parts.append(f',"ts":{_jn(rec.ts, 6)}')
    parts.append("}")
    return "".join(parts)


def _num(v: Any, kind=float):
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError("not a number")
    if kind is int and (not float(v).is_integer()):
        raise ValueError("not an int")
    out = kind(v)
    if isinstance(out, float) and not math.isfinite(out):
        raise ValueError("not finite")
    return out


def from_json(obj: Any) -> Optional[CycleRecord]:
    """Parse one JSONL record (a ``str`` line or an already-decoded ``dict``).

    Returns ``None`` for anything that is not one of our records (or not :func:`plausible`; an
    empty ``accepts`` list is not); never raises. :func:`json_rejection` says why.
    """
    rec = _json_record(obj)
    return rec if isinstance(rec, CycleRecord) and plausible(rec) else None


def json_rejection(obj: Any) -> Optional[str]:
    """Why :func:`from_json` refuses ``obj`` (one short phrase), or None when it parses. Never raises."""
    rec = _json_record(obj)
    return rec if isinstance(rec, str) else implausible(rec)


class _DuplicateKey(ValueError):
    """A JSON object names one key twice (``json.loads`` would keep the last silently)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(k)
        out[k] = v
    return out


def _json_record(obj: Any) -> "CycleRecord | str":
    """The record of a JSONL record (not yet checked with :func:`plausible`), or why there is none."""
    try:
        if isinstance(obj, (str, bytes)):
            obj = json.loads(obj, object_pairs_hook=_unique_keys)
    except _DuplicateKey as exc:
        return f"{exc.args[0]} given twice"
    except (ValueError, TypeError, RecursionError):
        return "not valid JSON (cut or damaged)"
    try:
        if not isinstance(obj, dict) or "cycle" not in obj or "total_ms" not in obj:
            return "not an eagle-cycle JSONL record (no cycle or total_ms)"
        rec = CycleRecord(
            cycle=_num(obj["cycle"], int), bs=_num(obj["bs"], int), steps=_num(obj["steps"], int),
            topk=_num(obj["topk"], int), draft_tokens=_num(obj["draft_tokens"], int),
            accept_len=_num(obj.get("accept_len")), tok_s=_num(obj.get("tok_s")),
            graph=bool(obj.get("graph", 0)),
        )
        if None in (rec.cycle, rec.bs, rec.steps, rec.topk, rec.draft_tokens):
            return "cycle, bs, steps, topk or draft_tokens is null"
        if not 0 <= rec.cycle <= MAX_LINE_COUNT:
            return f"cycle={rec.cycle} is not a cycle counter"
        if obj.get("graph", 0) not in (0, 1):  # True and False are 1 and 0
            return "graph is not 0 or 1"
        for k in PHASES:
            setattr(rec, k, _num(obj.get(k)))
        if "draft_prep_ms" in obj:
            rec.device_spans = True
            rec.draft_prep_ms, rec.gap_ms = _num(obj.get("draft_prep_ms")), _num(obj.get("gap_ms"))
        if obj.get("accepts") is not None:
            rec.accepts = [_num(a, int) for a in obj["accepts"]]
        elif obj.get("accept_hist") is not None:
            rec.accept_hist = {int(k): _num(v, int) for k, v in obj["accept_hist"].items()}
        if obj.get("n") is not None:
            rec.n = _num(obj["n"], int)
            rec.total_max_ms = _num(obj.get("total_max_ms"))
        if obj.get("draft_step_ms"):
            rec.draft_step_ms = [_num(x) for x in obj["draft_step_ms"]]
        if obj.get("rank") is not None:
            if not isinstance(obj["rank"], str):
                return "rank is not text"
            rec.rank = obj["rank"] or None
        if obj.get("adaptive") is not None:
            if obj["adaptive"] not in ADAPTIVE_MODES:
                return "adaptive is not explore or exploit"
            rec.adaptive = obj["adaptive"]
        if obj.get("ts") is not None:
            rec.ts = _num(obj["ts"])
        if (rec.n is None and rec.accepts and rec.accept_len is not None and None not in rec.accepts
                and abs(rec.accept_len - sum(rec.accepts) / len(rec.accepts)) > ACCEPT_LEN_TOLERANCE):
            return "accept_len is not the mean of accepts"
        return rec
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError, RecursionError):
        return "a field is missing or not a number of the right kind"


# ---------------------------------------------------------------------------------------------
# Aggregation (SGLANG_EAGLE_CYCLE_LOG_EVERY=N)
# ---------------------------------------------------------------------------------------------


#: fields an aggregate holds as means over the cycles where they were measured
_MEAN_FIELDS = ALL_PHASES + ("accept_len", "tok_s")


class _Fold:
    """Running state of one aggregate: sums, counts, the summed histogram and the last record.

    Holds no list of records, so a window of any size (``SGLANG_EAGLE_CYCLE_LOG_EVERY=10**9``)
    takes the same memory as one of two cycles.
    """

    __slots__ = ("key", "last", "n", "hist", "sums", "counts", "total_max")

    def __init__(self, rec: CycleRecord):
        self.key = (rec.config, rec.device_spans, rec.adaptive)
        self.last = rec
        self.n = 0
        self.hist: Counter = Counter()
        self.sums = [0.0] * len(_MEAN_FIELDS)
        self.counts = [0] * len(_MEAN_FIELDS)
        self.total_max: Optional[float] = None

    def add(self, rec: CycleRecord) -> None:
        if (rec.config, rec.device_spans, rec.adaptive) != self.key:
            raise ValueError("aggregate() got records of different configurations (or timing kinds, or adaptive "
                             "states)")
        self.hist.update(rec.histogram())
        sums, counts = self.sums, self.counts
        for i, k in enumerate(_MEAN_FIELDS):
            v = getattr(rec, k)
            if v is not None:
                sums[i] += v
                counts[i] += 1
        if rec.total_ms is not None and (self.total_max is None or rec.total_ms > self.total_max):
            self.total_max = rec.total_ms
        self.last = rec
        self.n += 1

    def record(self) -> CycleRecord:
        out = replace(self.last, accepts=None, accept_hist=dict(sorted(self.hist.items())), draft_step_ms=None,
                      n=self.n, total_max_ms=self.total_max)
        for k, s, c in zip(_MEAN_FIELDS, self.sums, self.counts):
            setattr(out, k, s / c if c else None)
        return out


def aggregate(records: Iterable[CycleRecord]) -> CycleRecord:
    """Summarise per-cycle records of one configuration into one aggregated record.

    Phase fields, ``accept_len`` and ``tok_s`` become means over the cycles where they were
    measured; ``accept_hist`` sums the per-request histograms; ``n`` counts cycles;
    ``total_max_ms`` is the longest cycle; ``cycle``, ``graph`` and ``rank`` come from the last
    record.

    Raises:
        ValueError: no records, or records of different ``(bs, steps, topk, draft_tokens)``.
    """
    fold = None
    for r in records:
        if fold is None:
            fold = _Fold(r)
        fold.add(r)
    if fold is None:
        raise ValueError("aggregate() needs at least one record")
    return fold.record()


class Aggregator:
    """Collects per-cycle records and emits one aggregate per ``every`` cycles.

    A change of ``(bs, steps, topk, draft_tokens)`` (or of the timing kind, or of the adaptive
    state) flushes early, so an aggregate never mixes configurations. With ``every == 1`` records pass through unchanged.
    Only running sums are kept (:class:`_Fold`), never the records, whatever ``every`` is.
    """

    def __init__(self, every: int):
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self.every = every
        self._fold: Optional[_Fold] = None

    @property
    def pending(self) -> int:
        """Cycles added and not emitted yet."""
        return self._fold.n if self._fold is not None else 0

    def add(self, rec: CycleRecord) -> list[CycleRecord]:
        """Add one record; returns the records ready to print (zero, one or two)."""
        if self.every == 1:
            return [rec]
        out = []
        fold = self._fold
        if fold is not None and fold.key != (rec.config, rec.device_spans, rec.adaptive):
            out.extend(self.flush())
            fold = None
        if fold is None:
            fold = self._fold = _Fold(rec)
        fold.add(rec)
        if fold.n >= self.every:
            out.extend(self.flush())
        return out

    def flush(self) -> list[CycleRecord]:
        """Emit what is pending (at a configuration change or shutdown)."""
        if self._fold is None:
            return []
        rec = self._fold.record()
        self._fold = None
        return [rec]
