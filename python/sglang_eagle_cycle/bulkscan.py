"""Bulk reader for chunks of per-cycle ``[eagle-cycle]`` lines: tallies per configuration, no per-line Python.

``cycle.parse_line`` runs a regex per line and builds a record: about 200,000 lines/s here, while a
day of bs-1 logging is millions of lines. This module reads a whole chunk of lines at once with
C-level string operations (``str.split``, list slicing, ``Counter``) and validates each *distinct*
value once, so the cost per line is a few list operations.

It accepts a chunk only when every line is a plain per-cycle line exactly as ``cycle.format_line``
writes it, all in one of its two layouts (the older one ending in ``graph=``, or a device-span line
ending in ``draft_prep_ms= gap_ms=``; field order taken from ``format_line`` at import, single
spaces, no optional tail such as ``n=``, ``draft_step_ms=`` or ``rank=``, the same log prefix width
on every line) and every
value is one ``cycle.parse_line`` accepts. Anything else returns ``None`` and the caller parses the
chunk line by line with ``cycle.parse_line``, so results never differ from the per-line path
(``test/test_report.py`` checks both paths agree on clean, damaged and mixed logs).

Usage::

    tallies = scan_chunk(text)        # text: whole lines, each holding one [eagle-cycle] line
    if tallies is None:
        ...                           # fall back to cycle.parse_line per line
    for t in tallies:
        t.config, t.cycles, t.phases["total_ms"], t.hist   # {ms: cycles}, {accept length: requests}
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from itertools import groupby
from operator import itemgetter
from typing import Optional

from . import cycle
from .cycle import ALL_PHASES, CONFIG_FIELDS, PHASES, PREFIX, SPAN_FIELDS


def _probe_keys(phases: tuple[str, ...]) -> tuple[str, ...]:
    rec = cycle.make_record(cycle=1, config=(1, 2, 1, 3),
                            phases_ms={p: 1.0 for p in phases}, accepts=[2], graph=True)
    tokens = cycle.format_line(rec).split(" ")
    return tuple(t.partition("=")[0] for t in tokens[1:]) if tokens[0] == PREFIX else ()


#: Keys of a per-cycle line in ``format_line`` order (``accepts`` also stands for ``accept_hist``):
#: the older layout, and the device-span layout (:attr:`cycle.CycleRecord.device_spans`).
KEYS = _probe_keys(PHASES)
WIDTH = len(KEYS)
KEYS_SPANS = _probe_keys(ALL_PHASES)
WIDTH_SPANS = len(KEYS_SPANS)

# Value grammar of cycle.parse_line for each key (checked against parse_line by the tests).
_INT = r"\d+"
_NUM = r"(?:-|\d+(?:\.\d+)?)"          # no sign: times, accept_len and tok_s are never negative
_VALUE = {"cycle": _INT, **{k: _INT for k in CONFIG_FIELDS}, **{k: _NUM for k in ALL_PHASES},
          "accept_len": _NUM, "tok_s": _NUM, "graph": "[01]"}
_COLUMN_RE = {k: re.compile(rf"(?:{re.escape(k)}={v}\n)*") for k, v in _VALUE.items()}
_ACCEPT_KINDS = ("accepts=", "accept_hist=")
_ACCEPT_TEXT_RE = re.compile(r"[-,:\d]+")   # parse_line's character class for accepts/accept_hist
_READY = (set(KEYS) | set(SPAN_FIELDS) == set(_VALUE) | {"accepts"}
          and KEYS[: 1 + len(CONFIG_FIELDS)] == ("cycle",) + CONFIG_FIELDS and KEYS[-1] == "graph"
          and KEYS_SPANS == KEYS + SPAN_FIELDS)
_LAST_RE = {k: re.compile(f"{re.escape(k)}={_VALUE[k]}") for k in ("graph", SPAN_FIELDS[-1])}


@dataclass(slots=True)
class ConfigTally:
    """Per-cycle lines of one ``(bs, steps, topk, draft_tokens)`` in a chunk.

    Attributes:
        config: ``(bs, steps, topk, draft_tokens)``.
        cycles: lines (cycles) counted.
        phases: per phase, ``{time in ms: cycles}`` over cycles where it ran.
        hist: ``{accept length: requests}`` summed over the cycles.
        device_spans: the lines are device-span lines (``draft_prep_ms``, ``gap_ms`` in ``phases``).
    """

    config: tuple[int, int, int, int]
    cycles: int
    phases: dict[str, dict[float, int]]
    hist: Counter
    device_spans: bool = False


def _valid_column(key: str, values) -> bool:
    """Every value of the column is ``key=<value parse_line accepts>``."""
    return _COLUMN_RE[key].fullmatch("\n".join(values) + "\n") is not None


def _tally(config_tokens: tuple[str, ...], cols: dict[str, list[str]], spans: bool,
           counted: Optional[dict[str, Counter]] = None) -> Optional[ConfigTally]:
    """One configuration's lines: ``cols`` per key (``counted``: columns already counted instead)."""
    config = tuple(int(t.partition("=")[2]) for t in config_tokens)
    bs, steps, topk, draft_tokens = config
    if min(bs, topk, draft_tokens) < 1 or steps > cycle.MAX_LINE_STEPS:
        return None                                      # what cycle.plausible refuses
    top = cycle.max_accept_len(steps, draft_tokens)
    if not _valid_column("cycle", cols["cycle"]):        # all distinct: one regex pass
        return None
    for key in ("accept_len", "tok_s"):                  # few distinct values: check each once
        if not _valid_column(key, Counter(cols[key])):
            return None
    if not all(v == "accept_len=-" or 1.0 <= float(v[11:]) <= top for v in set(cols["accept_len"])):
        return None
    if not all(v == "tok_s=-" or float(v[6:]) <= cycle.MAX_LINE_COUNT for v in set(cols["tok_s"])):
        return None                                      # 400 digits read as inf
    if spans:   # graph= is not the line's last word here: check it apart (two C-level counts)
        g = cols["graph"]
        if g.count("graph=1") + g.count("graph=0") != len(g):
            return None
    phases = {}
    for key in ALL_PHASES if spans else PHASES:
        counts = counted[key] if counted and key in counted else Counter(cols[key])
        if not _valid_column(key, counts):
            return None
        start = len(key) + 1
        phases[key] = {float(tok[start:]): c for tok, c in counts.items() if tok[start:] != "-"}
        if phases[key] and max(phases[key]) > cycle.MAX_LINE_MS:     # inf included
            return None
    hist: Counter = Counter()
    for tok, c in Counter(cols["accepts"]).items():
        kind, _, text = tok.partition("=")
        if kind + "=" not in _ACCEPT_KINDS or text == "-" or not _ACCEPT_TEXT_RE.fullmatch(text):
            return None   # "accepts=-" has no histogram: the per-line path uses accept_len
        try:
            one = (Counter(int(a) for a in text.split(",")) if kind == "accepts" else cycle._parse_hist(text))
        except ValueError:
            return None
        for length, requests in one.items():
            if not 1 <= length <= top or not 0 <= requests <= cycle.MAX_LINE_COUNT:
                return None
            hist[length] += requests * c
    return ConfigTally(config, len(cols["cycle"]), phases, hist, spans)


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


def scan_chunk(text: str) -> Optional[list[ConfigTally]]:
    """Tally a chunk whose every line is one per-cycle ``[eagle-cycle]`` line.

    Args:
        text: whole lines (``\\n``-separated, the last one may lack its newline); each line
            holds our prefix once, after a log prefix of the same number of words on every line.

    Returns:
        One :class:`ConfigTally` per configuration in the chunk, or None when any line is not a
        plain per-cycle line ``cycle.parse_line`` would accept (then nothing was counted).
    """
    if not _READY or not text:
        return None
    if not text.endswith("\n"):
        text += "\n"
    n = text.count("\n")
    if text.count(PREFIX) != n:
        return None
    # Split on single spaces only: a line's last word and the next line's first word stay one
    # token "graph=1\n[2026-11-30", so each line spans p + WIDTH tokens (p: log-prefix words).
    tokens = text.split(" ")
    try:
        p = tokens.index(PREFIX)
    except ValueError:
        return None
    for keys in (KEYS, KEYS_SPANS):   # the layout is fixed by the token count: one for the whole chunk
        width = p + len(keys)
        if len(tokens) == n * width + 1:
            break
    else:
        return None
    spans = keys is KEYS_SPANS
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
    if single:   # the last field's values were counted while checking the line ends
        tally = _tally(tuple(c[0] for c in config_cols), cols, spans, {keys[-1]: heads} if spans else None)
        return None if tally is None else [tally]
    if spans:   # the last column holds "gap_ms=v\n<next line's first word>": keep the value per line
        cols[keys[-1]] = [t.partition("\n")[0] for t in last_col]
    configs = list(zip(*config_cols))
    order = sorted(range(n), key=configs.__getitem__)
    out = []
    start = 0
    for config, run in groupby(order, key=configs.__getitem__):
        size = sum(1 for _ in run)
        pick = itemgetter(*order[start:start + size])
        sub = {key: list(pick(col)) if size > 1 else [pick(col)] for key, col in cols.items()}
        start += size
        tally = _tally(config, sub, spans)
        if tally is None:
            return None
        out.append(tally)
    return out
