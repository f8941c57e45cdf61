"""Bulk reader for chunks of per-cycle ``[eagle-cycle]`` lines: tallies per configuration, no per-line Python.

``cycle.parse_line`` runs a regex per line and builds a record: about 200,000 lines/s here, while a
day of bs-1 logging is millions of lines. This module reads a whole chunk of lines at once and
validates each *distinct* value once, so the cost per line is a few array or list operations.

It accepts a chunk only when every line is a plain per-cycle line exactly as ``cycle.format_line``
writes it, all in one of its three layouts (the older one ending in ``graph=``, a device-span line
ending in ``draft_prep_ms= gap_ms=``, or one with the adaptive policy's ``adaptive=`` after those;
field order taken from ``format_line`` at import, single spaces, no other optional tail such as
``n=``, ``draft_step_ms=`` or ``rank=``, the same log prefix width on every line) and every
value is one ``cycle.parse_line`` accepts. Anything else returns ``None`` and the caller parses the
chunk line by line with ``cycle.parse_line``, so results never differ from the per-line path
(``test/test_report.py`` checks both paths agree on clean, damaged and mixed logs).

Two readers share the checks (:func:`_tally`): the *array reader* cuts the chunk's bytes into a
grid of tokens with numpy and counts each column's distinct values with one sort, creating no
Python object per line; it takes only chunks it is sure of (UTF-8 text without NUL or control
bytes other than the line end, values of at most 256 bytes) and hands any other chunk to the
*token reader* (``str.split`` and ``Counter``), which decides. Both give the same tallies, counts in
the same order (the order in which phase times are summed), so which one read a chunk never shows
in a report.

Usage::

    tallies = scan_chunk(text)        # text: whole lines, each holding one [eagle-cycle] line
    if tallies is None:
        ...                           # fall back to cycle.parse_line per line
    for t in tallies:
        t.config, t.cycles, t.phases["total_ms"], t.hist   # {ms: cycles}, {accept length: requests}
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter
from typing import Optional

import numpy as np

from . import cycle
from .cycle import ADAPTIVE_MODES, ALL_PHASES, CONFIG_FIELDS, PHASES, PREFIX, SPAN_FIELDS


def _probe_keys(phases: tuple[str, ...], adaptive: Optional[str] = None) -> tuple[str, ...]:
    rec = cycle.make_record(cycle=1, config=(1, 2, 1, 3),
                            phases_ms={p: 1.0 for p in phases}, accepts=[2], graph=True, adaptive=adaptive)
    tokens = cycle.format_line(rec).split(" ")
    return tuple(t.partition("=")[0] for t in tokens[1:]) if tokens[0] == PREFIX else ()


#: Keys of a per-cycle line in ``format_line`` order (``accepts`` also stands for ``accept_hist``):
#: the older layout, the device-span layout (:attr:`cycle.CycleRecord.device_spans`), and the
#: device-span layout with the adaptive policy's state (:attr:`cycle.CycleRecord.adaptive`).
KEYS = _probe_keys(PHASES)
WIDTH = len(KEYS)
KEYS_SPANS = _probe_keys(ALL_PHASES)
WIDTH_SPANS = len(KEYS_SPANS)
KEYS_ADAPTIVE = _probe_keys(ALL_PHASES, ADAPTIVE_MODES[0])
WIDTH_ADAPTIVE = len(KEYS_ADAPTIVE)
#: The layouts, by their keys (the layout of a chunk is fixed by its words per line).
LAYOUTS = (KEYS, KEYS_SPANS, KEYS_ADAPTIVE)

# Value grammar of cycle.parse_line for each key (checked against parse_line by the tests).
_INT = r"\d+"
_NUM = r"(?:-|\d+(?:\.\d+)?)"          # no sign: times, accept_len and tok_s are never negative
_VALUE = {"cycle": _INT, **{k: _INT for k in CONFIG_FIELDS}, **{k: _NUM for k in ALL_PHASES},
          "accept_len": _NUM, "tok_s": _NUM, "graph": "[01]", "adaptive": "(?:" + "|".join(ADAPTIVE_MODES) + ")"}
_COLUMN_RE = {k: re.compile(rf"(?:{re.escape(k)}={v}\n)*") for k, v in _VALUE.items()}
_ACCEPT_KINDS = ("accepts=", "accept_hist=")
_ACCEPT_TEXT_RE = re.compile(r"[-,:\d]+")   # parse_line's character class for accepts/accept_hist
_READY = (set(KEYS) | set(SPAN_FIELDS) | {"adaptive"} == set(_VALUE) | {"accepts"}
          and KEYS[: 1 + len(CONFIG_FIELDS)] == ("cycle",) + CONFIG_FIELDS and KEYS[-1] == "graph"
          and KEYS_SPANS == KEYS + SPAN_FIELDS and KEYS_ADAPTIVE == KEYS_SPANS + ("adaptive",))
_LAST_RE = {k: re.compile(f"{re.escape(k)}={_VALUE[k]}") for k in ("graph", SPAN_FIELDS[-1], "adaptive")}
#: Columns counted per configuration (``{token: lines}``) and checked by :func:`_tally`, per layout.
_COUNTED = {False: ("accept_len", "tok_s", "accepts") + PHASES,
            True: ("accept_len", "tok_s", "accepts") + ALL_PHASES}
#: The parts of a cycle that must add up to ``total_ms`` (``cycle.plausible``), in the order it adds them.
_SUM_PARTS = {False: ("draft_ms", "verify_ms", "extend_ms", "other_ms"),
              True: ("draft_prep_ms", "draft_ms", "verify_ms", "extend_ms", "other_ms")}
#: :data:`cycle.SUM_TOLERANCE_MS` in hundredths of a millisecond (the line's unit).
_SUM_TOLERANCE_CS = round(cycle.SUM_TOLERANCE_MS * 100)
#: :data:`cycle.FWD_TOLERANCE_MS` in hundredths of a millisecond.
_FWD_TOLERANCE_CS = round(cycle.FWD_TOLERANCE_MS * 100)


@dataclass(slots=True)
class ConfigTally:
    """Per-cycle lines of one ``(bs, steps, topk, draft_tokens)`` in a chunk.

    Attributes:
        config: ``(bs, steps, topk, draft_tokens)``.
        cycles: lines (cycles) counted.
        phases: per phase, ``{time in ms: cycles}`` over cycles where it ran.
        hist: ``{accept length: requests}`` summed over the cycles.
        device_spans: the lines are device-span lines (``draft_prep_ms``, ``gap_ms`` in ``phases``).
        adaptive: ``{"explore" | "exploit": cycles}`` for lines with the ``adaptive=`` field, else empty.
        series: ``(accept_len, period_ms)`` per line in chunk order, float arrays of shape
            ``(cycles,)``: the line's ``accept_len`` (tokens) and ``total_ms`` plus ``gap_ms`` (ms),
            NaN for ``-`` (:class:`~sglang_eagle_cycle.series.CycleSeries`).
    """

    config: tuple[int, int, int, int]
    cycles: int
    phases: dict[str, dict[float, int]]
    hist: Counter
    device_spans: bool = False
    adaptive: Optional[dict] = None
    series: Optional[tuple[np.ndarray, np.ndarray]] = field(default=None, compare=False)


def _valid_column(key: str, values) -> bool:
    """Every value of the column is ``key=<value parse_line accepts>``."""
    return _COLUMN_RE[key].fullmatch("\n".join(values) + "\n") is not None


def _tally(config_tokens: tuple[str, ...], cycles: int, counts: dict[str, dict[str, int]],
           spans: bool) -> Optional[ConfigTally]:
    """One configuration's lines from its columns' counts; None when a value is not one parse_line accepts.

    Args:
        config_tokens: the line's ``bs= steps= topk= draft_tokens=`` tokens (grammar checked by the caller).
        cycles: lines of this configuration.
        counts: per column of :data:`_COUNTED` (``accept_len``, ``tok_s``, ``accepts``, the layout's
            phases, and ``adaptive`` in that layout), ``{"key=value" token: lines}`` in order of first
            occurrence: the phase times are added up in that order. The ``cycle`` and ``graph``
            columns are the caller's to check.
        spans: device-span lines.
    """
    config = tuple(int(t.partition("=")[2]) for t in config_tokens)
    bs, steps, topk, draft_tokens = config
    if min(bs, topk, draft_tokens) < 1 or steps > cycle.MAX_LINE_STEPS or bs > cycle.MAX_LINE_BS:
        return None                                      # what cycle.plausible refuses
    top = cycle.max_accept_len(steps, draft_tokens)
    for key in ("accept_len", "tok_s"):                  # few distinct values: check each once
        if not _valid_column(key, counts[key]):
            return None
    if not all(v == "accept_len=-" or 1.0 <= float(v[11:]) <= top for v in counts["accept_len"]):
        return None
    if not all(v == "tok_s=-" or float(v[6:]) <= cycle.MAX_LINE_COUNT for v in counts["tok_s"]):
        return None                                      # 400 digits read as inf
    phases = {}
    for key in ALL_PHASES if spans else PHASES:
        column = counts[key]
        if not _valid_column(key, column):
            return None
        start = len(key) + 1
        phases[key] = {float(tok[start:]): c for tok, c in column.items() if tok[start:] != "-"}
        if phases[key] and max(phases[key]) > cycle.MAX_LINE_MS:     # inf included
            return None
    if 0.0 in phases["total_ms"]:                        # no cycle takes no time
        return None
    hist: Counter = Counter()
    for tok, c in counts["accepts"].items():
        kind, _, text = tok.partition("=")
        if kind + "=" not in _ACCEPT_KINDS or text == "-" or not _ACCEPT_TEXT_RE.fullmatch(text):
            return None   # "accepts=-" has no histogram: the per-line path uses accept_len
        try:
            one = (Counter(int(a) for a in text.split(",")) if kind == "accepts" else cycle._parse_hist(text))
        except ValueError:
            return None
        if sum(one.values()) != bs:
            return None   # a per-cycle line lists (or counts) one accept length per request
        for length, requests in one.items():
            if not 1 <= length <= top or not 0 <= requests <= cycle.MAX_LINE_COUNT:
                return None
            hist[length] += requests * c
    modes = {}
    if "adaptive" in counts:
        for tok, c in counts["adaptive"].items():
            key, _, mode = tok.partition("=")
            if key != "adaptive" or mode not in ADAPTIVE_MODES:
                return None
            modes[mode] = modes.get(mode, 0) + c
    return ConfigTally(config, cycles, phases, hist, spans, modes)


def scan_chunk(text: str) -> Optional[list[ConfigTally]]:
    """Tally a chunk whose every line is one per-cycle ``[eagle-cycle]`` line.

    Args:
        text: whole lines (``\\n``-separated, the last one may lack its newline); each line
            holds our prefix once, after a log prefix of the same number of words on every line.

    Returns:
        One :class:`ConfigTally` per configuration in the chunk (sorted by the configuration's
        tokens), or None when any line is not a plain per-cycle line ``cycle.parse_line`` would
        accept (then nothing was counted).
    """
    if not _READY or not text:
        return None
    if not text.endswith("\n"):
        text += "\n"
    n = text.count("\n")
    if text.count(PREFIX) != n:   # another line, or our prefix twice in a line: neither reader takes it
        return None
    tallies = _scan_array(text, n)
    return tallies if tallies is not None else _scan_tokens(text, n)


def scan_chunk_dropping(text: str) -> Optional[tuple[list[ConfigTally], int]]:
    """:func:`scan_chunk`, except that lines whose parts do not add up to their ``total_ms``
    (``cycle.plausible``; damaged whatever else they hold) are left out rather than refusing the
    chunk, when the array reader can tell them (values written with two decimals).

    Returns:
        ``(tallies of the other lines, lines left out)``, or None as :func:`scan_chunk`.
    """
    if not _READY or not text:
        return None
    if not text.endswith("\n"):
        text += "\n"
    n = text.count("\n")
    if text.count(PREFIX) != n:
        return None
    got = _scan_array(text, n, drop=True)
    if got is not None:
        return got
    tallies = _scan_tokens(text, n)
    return None if tallies is None else (tallies, 0)


# ---------------------------------------------------------------------------------------------
# The token reader: str.split and Counter (any chunk)
# ---------------------------------------------------------------------------------------------


def _sums_ok(cols: dict[str, list[str]], spans: bool) -> bool:
    """Every line's parts add up to its ``total_ms`` and its ``verify_fwd_ms`` is no more than its
    ``verify_ms``, as ``cycle.plausible`` requires, in the same
    float arithmetic (``cols``: per key, the line's ``key=value`` tokens, values already checked)."""
    def floats(key: str, dash):
        start = len(key) + 1
        values = {tok: dash if tok[start:] == "-" else float(tok[start:]) for tok in set(cols[key])}
        return list(map(values.__getitem__, cols[key]))

    tol = cycle.SUM_TOLERANCE_MS + 1e-6
    parts = [floats(key, 0.0) for key in _SUM_PARTS[spans]]   # "-": not run (adding 0.0 changes nothing)
    for total, *ps in zip(floats("total_ms", None), *parts):
        if total is None:
            continue
        spent = 0.0
        for x in ps:
            spent += x
        if spent - total > tol or (spans and total - spent > tol):
            return False
    # the target forward runs inside the verify (cycle.FWD_TOLERANCE_MS)
    fwd_tol = cycle.FWD_TOLERANCE_MS + 1e-6
    return all(fwd is None or fwd - verify <= fwd_tol
               for fwd, verify in zip(floats("verify_fwd_ms", None), floats("verify_ms", 0.0)))



def _valid_line_ends(col: list[str], p: int, last: str) -> Optional[Counter]:
    """The last column (``graph=0|1``, or ``gap_ms=`` of a device-span line), the line end, then
    the next line's first word, which is ``[eagle-cycle]`` itself when lines have no log prefix
    (``p == 0``); nothing after the last. Returns the last field's ``key=value`` counts, or None
    when any token is not so."""
    next_prefix = 0
    value = _LAST_RE[last]
    heads: Counter = Counter()
    for tok, count in Counter(col).items():
        head, sep, tail = tok.partition("\n")
        if not sep or not value.fullmatch(head) or "\n" in tail:
            return None
        heads[head] += count
        next_prefix += count if tail == PREFIX else 0
    return heads if p > 0 or next_prefix == len(col) - 1 else None


def _scan_tokens(text: str, n: int) -> Optional[list[ConfigTally]]:
    """:func:`scan_chunk` with ``str.split`` and ``Counter``: ``text`` holds ``n`` lines, each ending
    with a newline, and our prefix ``n`` times."""
    # Split on single spaces only: a line's last word and the next line's first word stay one
    # token "graph=1\n[2026-11-30", so each line spans p + WIDTH tokens (p: log-prefix words).
    tokens = text.split(" ")
    try:
        p = tokens.index(PREFIX)
    except ValueError:
        return None
    for keys in LAYOUTS:   # the layout is fixed by the token count: one for the whole chunk
        width = p + len(keys)
        if len(tokens) == n * width + 1:
            break
    else:
        return None
    spans = keys is not KEYS
    if p and tokens[p::width].count(PREFIX) != n:
        return None
    last_col = tokens[p + len(keys)::width]
    heads = _valid_line_ends(last_col, p, keys[-1])
    if heads is None:
        return None
    cols = {key: tokens[p + 1 + k::width] for k, key in enumerate(keys[:-1])}
    config_cols = [cols[k] for k in CONFIG_FIELDS]
    single = all(c.count(c[0]) == n for c in config_cols)
    for key, col in zip(CONFIG_FIELDS, config_cols):
        if not _valid_column(key, col[:1] if single else Counter(col)):
            return None
    if not _valid_column("cycle", cols["cycle"]):        # all distinct: one regex pass
        return None
    if spans:   # graph= is not the line's last word here: check it apart (two C-level counts)
        g = cols["graph"]
        if g.count("graph=1") + g.count("graph=0") != n:
            return None
    counted = _COUNTED[spans] + (("adaptive",) if keys is KEYS_ADAPTIVE else ())
    if spans:   # the last column holds "gap_ms=v\n<next line's first word>": keep the value per line
        cols[keys[-1]] = [t.partition("\n")[0] for t in last_col]
    if single:   # the last field's values were counted while checking the line ends
        counts = {key: heads if key == keys[-1] else Counter(cols[key]) for key in counted}
        tally = _tally(tuple(c[0] for c in config_cols), n, counts, spans)
        if tally is None or not _sums_ok(cols, spans):
            return None
        tally.series = _token_series(cols, spans, range(n))
        return [tally]
    configs = list(zip(*config_cols))
    order = sorted(range(n), key=configs.__getitem__)
    out = []
    start = 0
    for config, run in groupby(order, key=configs.__getitem__):
        size = sum(1 for _ in run)
        pick = itemgetter(*order[start:start + size])
        counts = {key: Counter(pick(cols[key]) if size > 1 else [pick(cols[key])]) for key in counted}
        rows = order[start:start + size]   # ascending: the sort by configuration is stable
        start += size
        tally = _tally(config, size, counts, spans)
        if tally is None:
            return None
        tally.series = _token_series(cols, spans, rows)
        out.append(tally)
    return out if _sums_ok(cols, spans) else None


def _token_series(cols: dict[str, list[str]], spans: bool, rows) -> tuple[np.ndarray, np.ndarray]:
    """:attr:`ConfigTally.series` of the lines ``rows`` (ascending) from the token columns (values checked)."""
    def floats(key: str) -> np.ndarray:
        start = len(key) + 1
        col = cols[key]
        return np.array([math.nan if col[i][start:] == "-" else float(col[i][start:]) for i in rows], dtype=float)

    period = floats("total_ms")
    if spans:
        period = period + np.nan_to_num(floats("gap_ms"), nan=0.0)
    return floats("accept_len"), period


# ---------------------------------------------------------------------------------------------
# The array reader: numpy over the chunk's bytes (the common chunk, at a fraction of the cost)
# ---------------------------------------------------------------------------------------------

#: Longest token value (bytes) the array reader keys; a chunk with a longer one goes to the token reader.
_MAX_VALUE_BYTES = 256
#: Zero bytes after the chunk, so that every 8-byte word a value can start is in the buffer.
_PAD = _MAX_VALUE_BYTES + 8
#: ``_LOW_BYTES[k]``: a 64-bit mask of the low ``k`` bytes (``k`` in 0..8).
_LOW_BYTES = np.array([(1 << 8 * k) - 1 for k in range(9)], dtype=np.uint64)
_PREFIX_BYTES = PREFIX.encode()


def _word(data: bytes) -> int:
    """Up to 8 bytes as the number a word of :class:`_Grid` holds (little-endian)."""
    return int.from_bytes(data, "little")


class _Grid:
    """A chunk's bytes as ``n`` lines of ``width + 1`` tokens (``width`` single spaces per line).

    Attributes:
        raw: the chunk as UTF-8 bytes.
        words: ``words[i]``, uint64: the bytes ``raw[i:i + 8]`` as a little-endian number (zero bytes
            past the end); shape ``(len(raw) + _PAD - 7,)``, a view with a stride of one byte.
        n, width: lines, spaces per line.
        ends: shape ``(n, width + 1)``: ``ends[i, t]`` is the offset of the space (or line end)
            after token ``t`` of line ``i``; token ``t > 0`` spans ``ends[i, t - 1] + 1 .. ends[i, t] - 1``.
    """

    def __init__(self, raw: bytes, buf: np.ndarray, delims: np.ndarray, n: int, width: int):
        self.raw = raw
        self.words = np.ndarray((len(buf) - 7,), dtype="<u8", buffer=buf, strides=(1,))
        self.n = n
        self.width = width
        self.ends = delims.reshape(n, width + 1)

    @classmethod
    def of(cls, text: str) -> Optional["_Grid"]:
        """The grid of ``text`` (ends with a newline), or None when a line holds a NUL or control
        byte other than its end (so no byte equals the zero padding of a word), or not as many
        spaces as the first line."""
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError:   # a lone surrogate
            return None
        buf = np.frombuffer(raw + bytes(_PAD), dtype=np.uint8)
        delims = np.flatnonzero(buf[: len(raw)] <= 32)           # spaces, line ends, NUL, control bytes
        width = int(np.searchsorted(delims, raw.index(b"\n")))   # delimiters before the first line end
        n, rest = divmod(len(delims), width + 1)
        if rest or not width:
            return None
        kinds = buf[delims]
        if not (kinds[width::width + 1] == 10).all() or np.count_nonzero(kinds == 32) != n * width:
            return None   # each line: exactly `width` spaces, then its end
        return cls(raw, buf, delims, n, width)

    def token(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """``(start, end)``: byte offsets of token ``t`` (0..width) of every line, shape ``(n,)``,
        end exclusive."""
        if t:
            return self.ends[:, t - 1] + 1, self.ends[:, t]
        return np.concatenate(([0], self.ends[:-1, self.width] + 1)), self.ends[:, 0]

    def starts_with(self, start: np.ndarray, head: bytes) -> bool:
        """Every token at ``start`` begins with ``head`` (at most 16 bytes)."""
        first = head[:8]
        if not ((self.words[start] & _LOW_BYTES[len(first)]) == _word(first)).all():
            return False
        return len(head) <= 8 or bool((self.words[start + len(head) - 8] == _word(head[-8:])).all())

    def values(self, start: np.ndarray, end: np.ndarray, head: bytes) -> Optional[np.ndarray]:
        """Keys of the values of the tokens ``start .. end - 1`` when every token begins with
        ``head`` (at most 16 bytes), else None (also for a value past :data:`_MAX_VALUE_BYTES`).

        A key stands for the value's bytes: two keys are equal exactly when the values are (the
        text holds no NUL). uint64, the bytes as a little-endian number, for values of at most 8
        bytes, else raw bytes (numpy void) of 8 per started word. For short values one word read
        per line holds the end of the head and the value; the rest of the head takes one or two.
        """
        size = len(head)
        length = end - start - size                        # value bytes, where the head matched
        if length.min() < 0:                               # a token shorter than the head
            return None
        longest = int(length.max())
        if longest > 8:
            if not self.starts_with(start, head) or longest > _MAX_VALUE_BYTES:
                return None
            at = start + size
            parts = [self.words[at + k] & _LOW_BYTES[np.clip(length - k, 0, 8)]
                     for k in range(0, longest, 8)]
            return np.stack(parts, axis=1).view(np.dtype((np.void, 8 * len(parts))))[:, 0]
        skip = max(0, size + longest - 8)                  # the word read starts at head[skip:]
        if skip and not self.starts_with(start, head[:skip]):
            return None
        tail = size - skip                                 # head bytes in the word, then the value
        word = self.words[start + skip] & _LOW_BYTES[tail + length]
        if not ((word & _LOW_BYTES[tail]) == _word(head[skip:])).all():
            return None
        return word >> (8 * tail)

    def counts(self, start: np.ndarray, end: np.ndarray, keys: np.ndarray,
               rows: Optional[np.ndarray] = None) -> dict[str, int]:
        """``{token text: lines}`` of the tokens ``start .. end - 1`` (``keys`` from :meth:`values`)
        over ``rows`` (ascending line numbers; all lines when None), in order of first occurrence,
        as ``Counter`` over the token strings gives it."""
        first, count = _distinct(keys if rows is None else keys[rows])
        if rows is not None:
            first = rows[first]
        raw = self.raw
        return {raw[s:e].decode(): c
                for s, e, c in zip(start[first].tolist(), end[first].tolist(), count.tolist())}


def _distinct(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(first, count)``: for each distinct key, the index of its first occurrence and its
    occurrences, both shape ``(distinct,)``, in order of first occurrence.

    Keys that leave room for the index in 64 bits (values of up to 6 bytes in a chunk of up to
    65,536 lines) are sorted as one number ``key << bits | index``: each run of one key then starts
    at its first occurrence. That one sort of integers costs a third of ``numpy.unique``'s stable
    argsort, which takes the other keys.
    """
    n = len(keys)
    bits = n.bit_length()   # indexes 0..n-1 fit in `bits` bits
    if keys.dtype != np.uint64 or int(keys.max()).bit_length() + bits > 64:
        _, first, count = np.unique(keys, return_index=True, return_counts=True)
    else:
        packed = np.sort((keys << bits) | np.arange(n, dtype=np.uint64))
        key = packed >> bits
        runs = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
        first = (packed[runs] & ((1 << bits) - 1)).astype(np.int64)
        count = np.diff(runs, append=n)
    order = np.argsort(first)
    return first[order], count[order]


def _digits(grid: _Grid, start: np.ndarray, end: np.ndarray) -> bool:
    """Every value ``start .. end - 1`` is one or more ASCII digits (at most :data:`_MAX_VALUE_BYTES`)."""
    length = end - start
    longest = int(length.max())
    if length.min() < 1 or longest > _MAX_VALUE_BYTES:
        return False
    place = np.arange(8)
    for at in range(0, longest, 8):
        data = grid.words[start + at].view(np.uint8).reshape(-1, 8)   # byte k of a word: position at + k
        if not ((data - 48 < 10) | (place >= (length - at)[:, None])).all():
            return False
    return True


_ASCII_ZEROS = np.uint64(0x3030303030303030)
_DIGIT_PAIRS = np.uint64(0x000000FF000000FF)
_MUL_HIGH = np.uint64(100 + (1000000 << 32))
_MUL_LOW = np.uint64(1 + (10000 << 32))


def _hundredths(grid: _Grid, start: np.ndarray, end: np.ndarray) -> Optional[np.ndarray]:
    """The values ``start .. end - 1`` (each ``-`` or ASCII digits, checked by the caller) in
    hundredths, int64 shape ``(n,)``, ``-1`` for ``-``; None when a number is not written with
    exactly two decimals (``cycle.format_line``'s form), so that the float arithmetic of the
    token reader must decide.

    Eight-digit SWAR: the value, right-aligned in its 64-bit word, loses its dot and is read as
    an integer in three multiplications per line; the rare value past 8 bytes is read in Python.
    """
    length = (end - start).astype(np.int64)
    if length.min() < 1:
        return None
    short = np.minimum(length, 8)
    word = grid.words[start] & _LOW_BYTES[short]
    dash = word == 45                                          # "-" (a digit-only value never is)
    numeric = ~dash
    shift = (8 * np.maximum(short - 3, 0)).astype(np.uint64)
    dot = ((word >> shift) & np.uint64(0xFF)) == 46
    if not (dash | ((short >= 4) & dot) | (length > 8)).all():
        return None
    aligned = word << (8 * (8 - short)).astype(np.uint64)     # the value's last byte is the word's top byte
    digits = ((aligned & np.uint64(0x000000FFFFFFFFFF)) << np.uint64(8)) | (aligned & np.uint64(0xFFFF000000000000))
    digits |= _ASCII_ZEROS & _LOW_BYTES[9 - short]             # leading zeros in the emptied low bytes
    x = digits - _ASCII_ZEROS
    x = x * np.uint64(10) + (x >> np.uint64(8))
    x = (((x & _DIGIT_PAIRS) * _MUL_HIGH) + (((x >> np.uint64(16)) & _DIGIT_PAIRS) * _MUL_LOW)) >> np.uint64(32)
    out = np.where(numeric, x.astype(np.int64), -1)
    for row in np.flatnonzero(length > 8).tolist():            # values of 9 bytes or more: rare
        text = grid.raw[int(start[row]):int(end[row])]
        if text[-3:-2] != b".":
            return None
        out[row] = int(text[:-3] + text[-2:])
    return out


#: ``_ZERO_FILL[k]``: ASCII zeros in the low ``9 - k`` bytes (below the ``k - 1`` digits of a
#: right-aligned ``k``-byte value without its dot).
_ZERO_FILL = np.array([0] + [0x3030303030303030 & ((1 << 8 * (9 - k)) - 1) for k in range(1, 9)], dtype=np.uint64)


def _hundredths_short(keys: np.ndarray, length: np.ndarray) -> Optional[np.ndarray]:
    """:func:`_hundredths` for values of at most 8 bytes given as :meth:`_Grid.values` keys (the
    value's bytes as a little-endian number), ``length`` their byte counts: fewer array passes."""
    aligned = keys << ((8 - length) << 3).astype(np.uint64)   # the value's last byte is the word's top byte
    dash = keys == 45
    if not ((((aligned >> np.uint64(40)) & np.uint64(0xFF)) == 46) | dash).all():
        return None                                           # not two decimals
    digits = ((aligned & np.uint64(0x000000FFFFFFFFFF)) << np.uint64(8)) | (aligned & np.uint64(0xFFFF000000000000))
    x = (digits | _ZERO_FILL[length]) - _ASCII_ZEROS
    x = x * np.uint64(10) + (x >> np.uint64(8))
    x = (((x & _DIGIT_PAIRS) * _MUL_HIGH) + (((x >> np.uint64(16)) & _DIGIT_PAIRS) * _MUL_LOW)) >> np.uint64(32)
    return np.where(dash, -1, x.view(np.int64))


def _cents(grid: _Grid, columns: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]],
           keys: tuple[str, ...]) -> Optional[dict[str, np.ndarray]]:
    """The columns ``keys`` in hundredths (:func:`_hundredths`; ``-1`` for ``-``), int64 shape ``(n,)``
    each; None when a value is not in the two-decimal form.

    Args:
        columns: per key, ``(token start, token end, value keys)``; each token is ``key=value``.
    """
    out = {}
    for key in keys:
        start, end, values = columns[key]
        head = len(key) + 1
        if values.dtype == np.uint64:
            cents = _hundredths_short(values, end - start - head)
        else:
            cents = _hundredths(grid, start + head, end)
        if cents is None:
            return None
        out[key] = cents
    return out


def _bad_sums(cents: dict[str, np.ndarray], spans: bool) -> np.ndarray:
    """Lines whose parts do not add up to their ``total_ms``, or whose ``verify_fwd_ms`` exceeds their
    ``verify_ms`` (``cycle.plausible``), decided in hundredths (``cents``: :func:`_cents` of the
    parts, the total and the target forward): bool shape ``(n,)``."""
    total = cents["total_ms"]
    spent = sum(np.maximum(cents[key], 0) for key in _SUM_PARTS[spans])
    over = spent - total
    bad = over > _SUM_TOLERANCE_CS
    if spans:
        bad |= -over > _SUM_TOLERANCE_CS
    bad &= total >= 0
    fwd, verify = cents["verify_fwd_ms"], cents["verify_ms"]
    # the target forward runs inside the verify (cycle.FWD_TOLERANCE_MS), whatever the total
    return bad | ((fwd >= 0) & (verify >= 0) & (fwd - verify > _FWD_TOLERANCE_CS))


def _array_series(cents: dict[str, np.ndarray], spans: bool) -> tuple[np.ndarray, np.ndarray]:
    """:attr:`ConfigTally.series` of every line of the chunk from its :func:`_cents`."""
    def ms(key: str) -> np.ndarray:
        return np.where(cents[key] < 0, np.nan, cents[key] / 100.0)

    period = ms("total_ms")
    if spans:
        period = period + np.nan_to_num(ms("gap_ms"), nan=0.0)
    return ms("accept_len"), period


def _config_groups(raw: bytes, config_columns: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
                   ) -> list[tuple[tuple[str, ...], Optional[np.ndarray]]]:
    """The chunk's configurations as ``(config tokens, lines)``, sorted by the tokens as the token
    reader sorts them; lines: ascending line numbers, or None when the chunk holds one configuration.

    Args:
        config_columns: ``(token start, token end, value keys)`` of ``bs``, ``steps``, ``topk`` and
            ``draft_tokens``, each shape ``(n,)``.
    """
    def tokens_at(row: int) -> tuple[str, ...]:
        return tuple(raw[start[row]:end[row]].decode() for start, end, _ in config_columns)

    if all((keys == keys[0]).all() for _, _, keys in config_columns):
        return [(tokens_at(0), None)]
    ids = np.zeros(len(config_columns[0][2]), dtype=np.int64)   # dense configuration id per line
    for _, _, keys in config_columns:
        _, inv = np.unique(keys, return_inverse=True)
        _, ids = np.unique(ids * (int(inv.max()) + 1) + inv.reshape(-1), return_inverse=True)
        ids = ids.reshape(-1)
    by_group = np.argsort(ids, kind="stable")          # each configuration's lines, ascending
    runs = np.split(by_group, np.flatnonzero(np.diff(ids[by_group])) + 1)
    return sorted(((tokens_at(int(rows[0])), rows) for rows in runs), key=itemgetter(0))


def _scan_array(text: str, n: int, drop: bool = False):
    """:func:`scan_chunk` with numpy on the chunk's bytes (``text``: ``n`` lines, each ending with a
    newline, and our prefix ``n`` times).

    The same checks and counts as :func:`_scan_tokens`: the line grid with our prefix as word
    ``p`` of every line (the caller counted it once per line), the layout from the words per line,
    each column's key, ``cycle`` values of ASCII digits, ``graph`` 0 or 1, and :func:`_tally` on
    the other columns' distinct tokens. None whenever the token reader is needed to decide; a chunk
    it returns tallies for is one the token reader counts alike.

    With ``drop``, lines whose only fault may be parts that do not add up to their total (every
    other value checked as on any line; such a line is damaged whatever else it holds) are left
    out instead of refusing the chunk: returns ``(tallies, lines left out)``. Without it, returns
    the tallies (a list).
    """
    grid = _Grid.of(text)
    if grid is None or grid.n != n:
        return None
    raw = grid.raw
    try:
        p = raw[: raw.index(b"\n")].split(b" ").index(_PREFIX_BYTES)
    except ValueError:
        return None
    keys = {WIDTH: KEYS, WIDTH_SPANS: KEYS_SPANS, WIDTH_ADAPTIVE: KEYS_ADAPTIVE}.get(grid.width - p)
    if keys is None:
        return None
    spans = keys is not KEYS
    counted = _COUNTED[spans] + (("adaptive",) if keys is KEYS_ADAPTIVE else ())
    start, end = grid.token(p)
    if not ((end - start == len(_PREFIX_BYTES)).all() and grid.starts_with(start, _PREFIX_BYTES)):
        return None
    columns = {}   # key -> (token start, token end, value keys), each shape (n,)
    for t, key in enumerate(keys, start=p + 1):
        start, end = grid.token(t)
        if key == "accepts":   # accepts= or accept_hist= in the whole chunk, else keyed by the token
            head = next((h for h in (b"accepts=", b"accept_hist=") if grid.starts_with(start, h)), b"")
        else:
            head = key.encode() + b"="
        if key == "cycle":
            if not (grid.starts_with(start, head) and _digits(grid, start + len(head), end)):
                return None
            continue
        values = grid.values(start, end, head)
        if values is None:
            return None
        if key == "graph":   # graph=0 or graph=1 (a value past 8 bytes has raw-byte keys: no digit)
            if values.dtype.kind != "u" or not ((values == 48) | (values == 49)).all():
                return None
            continue
        columns[key] = (start, end, values)
    groups = _config_groups(raw, [columns[k] for k in CONFIG_FIELDS])
    for key, col in zip(CONFIG_FIELDS, zip(*(config for config, _ in groups))):
        if not _valid_column(key, col):
            return None
    cents = _cents(grid, columns, _SUM_PARTS[spans] + ("total_ms", "accept_len", "verify_fwd_ms")
                   + (("gap_ms",) if spans else ()))
    if cents is None:                # a value in another form: the token reader decides
        return None
    bad = _bad_sums(cents, spans)
    dropped = int(np.count_nonzero(bad))
    if dropped and not drop:
        return None
    if dropped:                      # count the other lines; these are damaged whatever else they hold
        keep = ~bad
        groups = [(config, kept) for config, rows in groups
                  for kept in [np.flatnonzero(keep) if rows is None else rows[keep[rows]]] if len(kept)]
    series = _array_series(cents, spans)
    out = []
    for config, rows in groups:
        counts = {key: grid.counts(*columns[key], rows) for key in counted}
        tally = _tally(config, n if rows is None else len(rows), counts, spans)
        if tally is None:
            return None
        tally.series = series if rows is None else (series[0][rows], series[1][rows])
        out.append(tally)
    return (out, dropped) if drop else out
