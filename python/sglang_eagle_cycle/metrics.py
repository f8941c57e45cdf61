"""Prometheus series of the EAGLE decode cycle: names, types, buckets and labels, and the text
exposition ``eagle-cycle inspect --prometheus`` writes from a log.

One definition for every writer, so a log replayed offline lands on the same dashboard as a live
server. Names follow the cycle line's rule: fields are added, never renamed.

================================================  =========  ==============================  =======
name                                              type       labels (besides the base ones)  unit
================================================  =========  ==============================  =======
``sglang:eagle_cycle_phase_seconds``              histogram  ``phase``, ``steps``            seconds
``sglang:eagle_cycle_aggregated_phase_seconds``   summary    ``phase``, ``steps``            seconds
``sglang:eagle_cycle_accept_length``              histogram  ``steps``                       tokens
``sglang:eagle_cycle_position_reached_total``     counter    ``position``                    requests
``sglang:eagle_cycle_position_accepted_total``    counter    ``position``                    requests
``sglang:eagle_cycle_cycles_total``               counter    ``steps``                       cycles
``sglang:eagle_cycle_aux_wiring_info``            gauge      ``ids``, ``positions``,         1
                                                             ``reading``, ``stock_positions``
================================================  =========  ==============================  =======

* ``phase``: the cycle line's field without ``_ms``: ``draft``, ``verify``, ``verify_fwd``,
  ``extend``, ``other``, ``total``, ``draft_prep``, ``gap`` (:data:`PHASE_LABELS`); buckets
  :data:`PHASE_BUCKETS_S` (0.1 ms to 500 ms).
* ``sglang:eagle_cycle_aggregated_phase_seconds``: the phase times of cycles a log holds only as
  ``SGLANG_EAGLE_CYCLE_LOG_EVERY`` means (aggregated lines, ``n=``): ``_sum`` their summed time
  (the mean times ``n``, seconds) and ``_count`` their cycles, no quantiles. Such a cycle's own
  time is unknown, so it is in no histogram bucket, and it is kept out of the phase histogram
  altogether so that every histogram series holds ``_count`` equal to its ``+Inf`` bucket (the
  Prometheus invariant). A phase's time over all cycles is the two metrics' ``_sum`` added, its
  cycles their ``_count`` added. Offline only: the live export observes each cycle before any
  aggregation, so it never has one.
* ``sglang:eagle_cycle_accept_length``: one observation per request per cycle (accept length,
  bonus token included), buckets :data:`ACCEPT_LENGTH_BUCKETS` (``1, 2, ..., 16, 20, 24, 32, 48, 65``, whatever the
  depth: every file and server carries the same ``le`` set, so their histograms can be summed);
  aggregated lines count here exactly (their ``accept_hist``), as they do in the counters below.
* ``position`` ``j`` (1-based draft position): ``reached`` counts requests whose accept length is
  ``>= j``, ``accepted`` those with ``>= j + 1``; per-position acceptance is their ratio
  (``rate(accepted) / rate(reached)`` in PromQL).
* ``sglang:eagle_cycle_aux_wiring_info``: 1, one series per wiring a server started with
  (:func:`wiring_info_labels`: ids and positions comma-joined, the reading, what stock SGLang
  0.5.23 would capture); a gauge in SGLang's ``mostrecent`` multiprocess mode, like its own info
  gauges.
* Base labels: those SGLang's scheduler metrics carry. Live (:class:`LiveMetrics`), SGLang's
  (:func:`sglang_eagle_cycle.runtime.sglang_metric_labels`: ``model_name``, ``engine_type``,
  ``tp_rank``, ``pp_rank``, ``moe_ep_rank``, ``priority=""`` with ``--enable-priority-scheduling``,
  ``dp_rank`` where SGLang sets it, ``--extra-metric-labels``) less any key in :data:`OWN_LABELS` (:func:`series_base_labels`: an
  ``--extra-metric-labels`` key such as ``steps`` or ``position`` would otherwise stand for two
  things on one series; it is left off every ``sglang:eagle_cycle_*`` series, with one WARNING
  naming it, and SGLang's own series keep it); offline :data:`BASE_LABELS`.

Live (:class:`LiveMetrics`, ``SGLANG_EAGLE_CYCLE_METRICS``, on by default whenever SGLang runs
with ``--enable-metrics``): the ranks that print cycle lines observe every cycle on the sink thread
through ``prometheus_client`` in SGLang's multiprocess directory (``PROMETHEUS_MULTIPROC_DIR``), so
the series appear on SGLang's own ``/metrics`` endpoint.

Offline (:func:`exposition`): a log's lines carry no model name or engine type, so they come from
the caller (``--model-name``; ``engine_type`` ``unified``, SGLang's value outside
prefill/decode disaggregation); ranks come from the lines' ``rank=`` field (``tp0.pp0.dp1``; none
means scheduler rank 0, the one that prints by default), ``all`` for a group pooling several
ranks. Aggregated lines (``SGLANG_EAGLE_CYCLE_LOG_EVERY``) carry only means: their phase times go
to ``sglang:eagle_cycle_aggregated_phase_seconds``, not to the phase histogram, and the file's first
line (a comment) says how many cycles that is.
"""

from __future__ import annotations

import bisect
import json
import math
import os
import re
from collections import Counter
from typing import Any, Iterable, Mapping, Optional

from .argtypes import MAX_STEPS
from .cycle import ALL_PHASES, max_accept_len
from .report import per_position_acceptance

PHASE_SECONDS = "sglang:eagle_cycle_phase_seconds"
#: phase times of the cycles known only as aggregated-line means (offline only; a summary: sum, count)
AGGREGATED_PHASE_SECONDS = "sglang:eagle_cycle_aggregated_phase_seconds"
ACCEPT_LENGTH = "sglang:eagle_cycle_accept_length"
POSITION_REACHED = "sglang:eagle_cycle_position_reached_total"
POSITION_ACCEPTED = "sglang:eagle_cycle_position_accepted_total"
CYCLES = "sglang:eagle_cycle_cycles_total"
WIRING_INFO = "sglang:eagle_cycle_aux_wiring_info"
#: labels of :data:`WIRING_INFO` besides the base ones
WIRING_LABELS = ("ids", "positions", "reading", "stock_positions")
#: the switch of the live export (on by default whenever SGLang's metrics are on)
METRICS_ENV = "SGLANG_EAGLE_CYCLE_METRICS"

#: phase label of each cycle-line field
PHASE_LABELS = {field: field[:-len("_ms")] for field in ALL_PHASES}
_PHASE_FIELDS = tuple(PHASE_LABELS)
_PHASE_NAMES = tuple(PHASE_LABELS.values())
#: phase histogram bounds (s): 0.1 ms to 500 ms, finest where verify forwards of real
#: deployments fall (a few ms to ~50 ms)
PHASE_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.0125, 0.015,
                   0.0175, 0.02, 0.025, 0.03, 0.035, 0.04, 0.05, 0.06, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5)
#: accept-length histogram bounds (tokens per request per verify): every integer from 1 to 16 (exact
#: for every depth up to 15 steps, past the 1-10 that deployments sweep), then 20, 24, 32, 48 and
#: ``MAX_STEPS + 1`` = 65, the longest accept of a 64-step draft, the deepest advise and the sweep take
#: (:data:`~sglang_eagle_cycle.argtypes.MAX_STEPS`; ``inspect`` reads deeper lines). Fixed, not sized to a file's or a server's depth:
#: Prometheus sums histograms bucket by bucket (``sum by (le)``), so two files or servers at different
#: ``--speculative-num-steps`` must carry the same ``le`` set, else a sum holds a bucket from one of
#: them only, its cumulative counts fall, and ``histogram_quantile`` reads wrong (a depth-2 and a
#: depth-5 file summed had given a p90 of 6 where their pooled requests give 3.9). 21 bounds, not
#: one per integer to 65, keep a series' bucket count near SGLang's own histograms'. A longer accept
#: (a log line may claim up to 1024 steps) counts in ``+Inf``, ``_sum`` and ``_count``.
ACCEPT_LENGTH_BUCKETS = tuple(float(k) for k in range(1, 17)) + (20.0, 24.0, 32.0, 48.0, float(MAX_STEPS + 1))
#: the labels every series carries (SGLang's scheduler metric labels)
BASE_LABELS = ("model_name", "engine_type", "tp_rank", "pp_rank", "dp_rank")
#: label names our series use themselves (``le``: prometheus_client reserves it on histograms): a
#: base label of one of these names is left off our series (:func:`series_base_labels`)
OWN_LABELS = ("phase", "steps", "position", "le") + WIRING_LABELS

HELP = {
    PHASE_SECONDS: "Time of one phase of the EAGLE decode cycle (draft, verify, verify_fwd, extend, other, "
                   "total, draft_prep, gap), per cycle.",
    AGGREGATED_PHASE_SECONDS: "Time of one phase of the EAGLE decode cycle over cycles logged only as "
                              "SGLANG_EAGLE_CYCLE_LOG_EVERY means (sum and count; no per-cycle distribution).",
    ACCEPT_LENGTH: "Accept length per request per verify (accepted draft tokens + 1 bonus token).",
    POSITION_REACHED: "Requests whose draft reached position j (accept length >= j).",
    POSITION_ACCEPTED: "Requests whose draft token at position j was accepted (accept length >= j + 1).",
    CYCLES: "EAGLE decode cycles, by speculation depth.",
    WIRING_INFO: "EAGLE-3 aux hidden-state wiring this server captures (1): declared layer ids, capture "
                 "positions, how the ids were read, and what stock SGLang 0.5.23 would capture.",
}

_RANK = re.compile(r"(tp|pp|dp|adp)(\d+)")


def rank_labels(ranks: Iterable[str]) -> dict[str, str]:
    """``tp_rank``/``pp_rank``/``dp_rank`` from the lines' ``rank=`` values (``tp0.pp0.dp1``,
    ``tp4.adp1``): none -> rank 0; one -> its numbers (missing parts 0); several -> ``all``."""
    ranks = sorted(set(r for r in ranks if r))
    if len(ranks) > 1:
        return {"tp_rank": "all", "pp_rank": "all", "dp_rank": "all"}
    out = {"tp_rank": "0", "pp_rank": "0", "dp_rank": "0"}
    for kind, num in _RANK.findall(ranks[0] if ranks else ""):
        out["dp_rank" if kind in ("dp", "adp") else f"{kind}_rank"] = num
    return out


def _fmt(v: float) -> str:
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


def _labels(labels: Mapping[str, str]) -> str:
    def esc(s: str) -> str:
        return str(s).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return "{" + ",".join(f'{k}="{esc(v)}"' for k, v in labels.items()) + "}"


class _Hist:
    """Cumulative bucket counts, sum and count of one series (values in the metric's unit)."""

    def __init__(self, bounds):
        self.bounds = tuple(bounds)
        self.buckets = [0] * len(self.bounds)
        self.inf = 0
        self.sum = 0.0
        self.count = 0

    def add(self, value: float, n: int = 1) -> None:
        for i, b in enumerate(self.bounds):
            if value <= b:
                self.buckets[i] += n
        self.inf += n
        self.sum += value * n
        self.count += n


def _ids(values) -> str:
    """``[2, 30, 58]`` -> ``"2,30,58"``; None -> ``""``; a non-integer element or a value that is
    not a list as JSON (``"1",15,28``), as the start-up line shows it."""
    def one(v):
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else json.dumps(v)
    if values is None:
        return ""
    return ",".join(one(v) for v in values) if isinstance(values, list) else one(values)


def reading_label(reading: str, convention: str = "output") -> str:
    """The ``reading`` label: ``layer_output``, ``position`` or ``default``, with the
    ``SGLANG_EAGLE_CYCLE_AUX_CONVENTION`` value in brackets when it is not ``output``
    (``position (input)``, ``layer_output (stock)``)."""
    if reading == "default" or convention in ("", "output"):
        return reading
    return f"{reading} ({convention})"


def wiring_info_labels(report) -> dict[str, str]:
    """:data:`WIRING_LABELS` of a :class:`~sglang_eagle_cycle.wiring.WiringReport`.

    ``ids``/``positions``: comma-joined (``""`` when none are declared, or no positions are
    captured); ``reading``: :func:`reading_label`; ``stock_positions``: what stock SGLang 0.5.23
    would capture, ``fails`` when its setter would raise, ``unknown`` when its rule is unknown.
    """
    if report.stock_family is None or not report.stock_ids_valid:
        stock = "unknown"
    elif report.stock_positions is None:
        stock = "fails"
    else:
        stock = _ids(report.stock_positions)
    return {"ids": _ids(report.ids), "positions": _ids(report.positions),
            "reading": reading_label(report.reading, report.convention), "stock_positions": stock}


_WIRING_LINE = re.compile(
    r"EAGLE-3 aux wiring: (?:ids (?P<ids>.+?) \((?P<words>[^()]*)\)|no ids declared \([^()]*\))"
    r" -> (?:(?:default )?capture positions (?P<pos>\[[^\]]*\])|no (?:default )?capture positions)"
    r"[^;]*; (?P<tail>.*)$")
_LIST = re.compile(r"\[([^\]]*)\]")


def parse_wiring_line(line: str) -> Optional[dict[str, str]]:
    """:data:`WIRING_LABELS` from a server log's start-up wiring line (README, "Aux-layer wiring"),
    or None when ``line`` holds none. Never raises.

    >>> parse_wiring_line("[TP0] EAGLE-3 aux wiring: ids [2, 30, 58] (layer outputs, draft eagle_config) -> "
    ...                   "capture positions [3, 31, 59] of 61; stock SGLang 0.5.23 would capture [2, 30, 58]")
    {'ids': '2,30,58', 'positions': '3,31,59', 'reading': 'layer_output', 'stock_positions': '2,30,58'}
    """
    m = _WIRING_LINE.search(line.rstrip())
    if m is None:
        return None

    def ints(text: Optional[str]) -> str:
        if text is None:
            return ""
        if not (text.startswith("[") and text.endswith("]")):
            return text
        return ",".join(x.strip() for x in text[1:-1].split(",") if x.strip())

    words = m.group("words") or ""
    if m.group("ids") is None:
        reading = "default"
    else:
        reading = "position" if words.startswith("positions") else "layer_output"
        conv = re.search(r"=(input|stock)\b", words)
        reading = reading_label(reading, conv.group(1) if conv else "output")
    tail = m.group("tail")
    positions = ints(m.group("pos"))
    if tail.startswith("same as stock"):
        stock = positions
    elif "would capture only" in tail and (handed := re.search(r"\] of (\[[^\]]*\])", tail)):
        # "would capture only [2, 30, 58] of [-1, 2, 30, 58] ...": the label is what stock is handed
        stock = ints(handed.group(1))
    elif "would capture" in tail and _LIST.search(tail):
        stock = ints(_LIST.search(tail).group(0))
    elif "would fail" in tail:
        stock = "fails"
    else:
        stock = "unknown"
    return {"ids": ints(m.group("ids")), "positions": positions, "reading": reading, "stock_positions": stock}


def exposition(groups, model_name: str = "", engine_type: str = "unified", wiring: Iterable[Mapping] = ()) -> str:
    """The Prometheus text exposition (format 0.0.4) of ``inspect``'s groups.

    Args:
        groups: :class:`~.report.Group` objects (``inspect_paths(..., groups_out=[])``); groups
            that share a label set (several files or batch sizes at one depth and rank) are summed.
        model_name, engine_type: base label values the log does not carry.
        wiring: :func:`parse_wiring_line` results (the log's start-up wiring lines); each distinct
            one is a :data:`WIRING_INFO` series of value 1 (ranks 0).

    Returns:
        The text, one ``# HELP``/``# TYPE`` pair per metric; phase times in seconds. Every histogram
        series holds cumulative buckets and ``_count`` equal to its ``+Inf`` bucket, over bounds that
        do not depend on the groups (:data:`PHASE_BUCKETS_S`, :data:`ACCEPT_LENGTH_BUCKETS`, so
        files of different depths sum bucket by bucket): the phase times of aggregated lines
        (means only) are in :data:`AGGREGATED_PHASE_SECONDS`, a summary of sum and count written
        only when the groups hold some, and the first line, a comment, says how many cycles that is.
    """
    phase: dict[tuple, _Hist] = {}
    agg_phase: dict[tuple, list] = {}   # key -> [seconds, cycles] of aggregated-line means
    accept: dict[tuple, _Hist] = {}
    reached: dict[tuple, int] = {}
    accepted: dict[tuple, int] = {}
    cycles: dict[tuple, int] = {}
    aggregated = 0
    for g in groups:
        base = {"model_name": model_name, "engine_type": engine_type, **rank_labels(g.ranks)}
        bkey = tuple(base.items())
        steps = str(g.steps)
        for field, dist in g.phases.items():
            key = bkey + (("phase", PHASE_LABELS[field]), ("steps", steps))
            if dist.counts:
                h = phase.setdefault(key, _Hist(PHASE_BUCKETS_S))
                for value_ms, n in dist.counts.items():
                    h.add(value_ms / 1000.0, n)
            if dist.agg_weight:
                # total holds both kinds; what the exact values do not explain is the means' time
                # (clamped: float rounding of a near-zero phase must not give a negative sum)
                exact = math.fsum(v * n for v, n in dist.counts.items())
                a = agg_phase.setdefault(key, [0.0, 0])
                a[0] += max(0.0, dist.total - exact) / 1000.0
                a[1] += dist.agg_weight
        # cycles of aggregated lines (every line carries total_ms; other phases may be absent)
        aggregated += max((d.agg_weight for d in g.phases.values()), default=0)
        if g.hist:
            h = accept.setdefault(bkey + (("steps", steps),), _Hist(ACCEPT_LENGTH_BUCKETS))
            for length, n in g.hist.items():
                h.add(float(length), n)
            # positions 1..min(steps, draft_tokens - 1), as inspect --json counts them: a tree verifying
            # fewer tokens than steps + 1 has no deeper position (one had read acceptance 0 there)
            for pos in per_position_acceptance(g.hist, max_accept_len(g.steps, g.draft_tokens) - 1):
                pkey = bkey + (("position", str(pos["j"])),)
                reached[pkey] = reached.get(pkey, 0) + pos["reached"]
                accepted[pkey] = accepted.get(pkey, 0) + pos["accepted"]
        ckey = bkey + (("steps", steps),)
        cycles[ckey] = cycles.get(ckey, 0) + g.cycles

    out = []
    if aggregated:
        out.append(f"# {aggregated} aggregated cycles (SGLANG_EAGLE_CYCLE_LOG_EVERY lines: means only): their phase "
                   f"times are in {AGGREGATED_PHASE_SECONDS} (sum, count), not in {PHASE_SECONDS}")

    def histogram(name: str, series: dict[tuple, _Hist]) -> None:
        out.append(f"# HELP {name} {HELP[name]}")
        out.append(f"# TYPE {name} histogram")
        for key, h in sorted(series.items()):
            labels = dict(key)
            for b, c in zip(h.bounds, h.buckets):
                out.append(f"{name}_bucket{_labels({**labels, 'le': _fmt(b)})} {c}")
            out.append(f"{name}_bucket{_labels({**labels, 'le': '+Inf'})} {h.inf}")
            out.append(f"{name}_sum{_labels(labels)} {_fmt(h.sum)}")
            out.append(f"{name}_count{_labels(labels)} {h.count}")

    def counter(name: str, series: dict[tuple, int]) -> None:
        # the sample name in HELP/TYPE, as prometheus_client writes counters in format 0.0.4
        out.append(f"# HELP {name} {HELP[name]}")
        out.append(f"# TYPE {name} counter")
        for key, v in sorted(series.items(), key=lambda kv: _sort_key(kv[0])):
            out.append(f"{name}{_labels(dict(key))} {v}")

    histogram(PHASE_SECONDS, phase)
    if agg_phase:
        out.append(f"# HELP {AGGREGATED_PHASE_SECONDS} {HELP[AGGREGATED_PHASE_SECONDS]}")
        out.append(f"# TYPE {AGGREGATED_PHASE_SECONDS} summary")
        for key, (seconds, n) in sorted(agg_phase.items()):
            out.append(f"{AGGREGATED_PHASE_SECONDS}_sum{_labels(dict(key))} {_fmt(seconds)}")
            out.append(f"{AGGREGATED_PHASE_SECONDS}_count{_labels(dict(key))} {n}")
    histogram(ACCEPT_LENGTH, accept)
    counter(POSITION_REACHED, reached)
    counter(POSITION_ACCEPTED, accepted)
    counter(CYCLES, cycles)
    infos = sorted({tuple((k, str(w.get(k, ""))) for k in WIRING_LABELS) for w in wiring})
    if infos:
        out.append(f"# HELP {WIRING_INFO} {HELP[WIRING_INFO]}")
        out.append(f"# TYPE {WIRING_INFO} gauge")
        base = {"model_name": model_name, "engine_type": engine_type, **rank_labels(())}
        for info in infos:
            out.append(f"{WIRING_INFO}{_labels({**base, **dict(info)})} 1")
    return "\n".join(out) + "\n"


def _sort_key(key: tuple) -> tuple:
    return tuple((k, int(v) if k == "position" else v) for k, v in key)


# ---------------------------------------------------------------------------------------------
# Live export (the server)
# ---------------------------------------------------------------------------------------------


def export_wanted(env: Optional[Mapping[str, str]] = None) -> Optional[dict[str, str]]:
    """The base labels of the live export when it should run in this process, else None.

    It runs when SGLang's metrics are on (``--enable-metrics``: its runtime context says so and
    ``PROMETHEUS_MULTIPROC_DIR`` is set, as SGLang sets it before starting the scheduler) and
    :data:`METRICS_ENV` is not ``0``. Which ranks export is the caller's choice (those printing
    cycle lines). Never raises.
    """
    from .runtime import env_flag, sglang_metric_labels

    env = os.environ if env is None else env
    if not env_flag(METRICS_ENV, True, env) or not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return None
    return sglang_metric_labels()


_collisions_warned: set = set()


def series_base_labels(labels: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Split SGLang's metric labels into the base labels of our series and those left off them.

    A key of ``labels`` that is one of :data:`OWN_LABELS` (an ``--extra-metric-labels`` key such as
    ``steps``, ``position`` or ``reading``; SGLang's own keys never are) is left off every
    ``sglang:eagle_cycle_*`` series: prometheus_client would either refuse it (``le``) or give one
    series two values for one name and keep either, silently. Our label keeps its meaning, since
    dashboards read it; the user's key stays on SGLang's own series. Left off every series, not
    only the one that uses the name, so all our series share one base label set and PromQL can
    divide one by another. The first time a given set is left off in this process, one WARNING on
    logger ``sglang_eagle_cycle`` names the keys and their values.

    Args:
        labels: label name -> value (:func:`~sglang_eagle_cycle.runtime.sglang_metric_labels`).

    Returns:
        ``(kept, dropped)``: two dicts, values as strings, ``labels``' order kept. Never raises.
    """
    kept, dropped = {}, {}
    for k, v in labels.items():
        (dropped if str(k) in OWN_LABELS else kept)[str(k)] = "" if v is None else str(v)
    if dropped:
        seen = tuple(sorted(dropped.items()))
        if seen not in _collisions_warned:
            _collisions_warned.add(seen)
            import logging

            logging.getLogger("sglang_eagle_cycle").warning(
                "sglang-eagle-cycle: metric label(s) %s (--extra-metric-labels) share a name with a label of the "
                "sglang:eagle_cycle_* series (%s); left off those series, kept on SGLang's own. Rename the key "
                "to have it on every series", ", ".join(f"{k}={v!r}" for k, v in dropped.items()),
                ", ".join(OWN_LABELS))
    return kept, dropped


#: The live export pushes what its cycles added to ``prometheus_client`` at most this often
#: (seconds): each value it touches there is a locked write to a memory-mapped file, several
#: microseconds apiece on the sink thread, so per-cycle pushes would cost the scheduler GIL time
#: (``benchmarks/bench_hook_overhead.py``). Prometheus scrapes every 5-60 s.
PUSH_EVERY_S = 1.0


class LiveMetrics:
    """The series of this rank: cycles counted in plain Python per cycle, pushed to
    ``prometheus_client`` every :data:`PUSH_EVERY_S` seconds.

    Args:
        labels: SGLang's metric labels (:func:`export_wanted`); every series carries them, less
            those named as one of our own labels (:func:`series_base_labels`: left off, with one
            WARNING; :attr:`labels` holds the kept ones, :attr:`dropped_labels` the others).
        registry: where the metrics register (None: nowhere; in SGLang's multiprocess mode the
            values go to the shared directory whatever the registry, and ``/metrics`` reads them
            from there).
        push_every_s: seconds between pushes (0: push at every cycle).
        clock: monotonic clock in seconds (tests).

    Raises:
        ImportError: ``prometheus_client`` is missing. ValueError: a label name prometheus_client
        refuses (``a-b``, ``__x``; SGLang's own metrics refuse it first).

    Only per-cycle records come here (:meth:`observe`), so it never writes
    :data:`AGGREGATED_PHASE_SECONDS`; its series are otherwise those :func:`exposition` writes, on
    the same fixed buckets (:data:`ACCEPT_LENGTH_BUCKETS` whatever depth the server runs, so servers
    of different depths sum on one dashboard).

    :meth:`observe` and :meth:`push` run on the sink thread: the sink pushes once :attr:`due`
    when the scheduler is idle or waiting for the device, regardless once :attr:`overdue`, and
    when it is flushed or closed. A push adds each series' new observations in one
    increment per touched bucket where ``prometheus_client``'s histogram layout is the known one
    (:func:`_observe_n`), else one ``observe`` per observation.
    """

    def __init__(self, labels: Mapping[str, str], registry: Any = None, push_every_s: float = PUSH_EVERY_S,
                 clock=None):
        import time

        from prometheus_client import Counter as PCounter
        from prometheus_client import Histogram

        self.labels, self.dropped_labels = series_base_labels(labels)
        base = tuple(self.labels)
        self._base = tuple(self.labels.values())
        self._phase = Histogram(PHASE_SECONDS, HELP[PHASE_SECONDS], base + ("phase", "steps"),
                                buckets=PHASE_BUCKETS_S, registry=registry)
        self._accept = Histogram(ACCEPT_LENGTH, HELP[ACCEPT_LENGTH], base + ("steps",),
                                 buckets=ACCEPT_LENGTH_BUCKETS, registry=registry)
        self._reached = PCounter(POSITION_REACHED[:-len("_total")], HELP[POSITION_REACHED], base + ("position",),
                                 registry=registry)
        self._accepted = PCounter(POSITION_ACCEPTED[:-len("_total")], HELP[POSITION_ACCEPTED],
                                  base + ("position",), registry=registry)
        self._cycles = PCounter(CYCLES[:-len("_total")], HELP[CYCLES], base + ("steps",), registry=registry)
        self._children: dict = {}
        self._clock = clock or time.monotonic
        self.push_every_s = float(push_every_s)
        self._due = self._clock() + self.push_every_s
        # observed since the last push
        self._phases: dict = {}     # steps -> one list of ms per phase (_PHASE_FIELDS order)
        self._accepts: dict = {}    # steps -> {accept length: requests}
        self._positions: list = []  # [reached, accepted] of position j at index j - 1
        self._cycle_counts: Counter = Counter()  # steps -> cycles
        self.observed = 0
        self.pushes = 0

    def _child(self, metric, *extra):
        key = (id(metric),) + extra
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*self._base, *extra)
        return child

    @property
    def pending(self) -> bool:
        """Cycles observed and not pushed yet."""
        return bool(self._cycle_counts)

    def observe(self, rec) -> None:
        """Count one :class:`~sglang_eagle_cycle.cycle.CycleRecord` (a per-cycle one: an aggregate's
        means would land in buckets they were never measured in), in plain Python: nothing reaches
        ``prometheus_client`` before :meth:`push`.

        Raises:
            ValueError: ``rec`` is an aggregate (``n`` set).
        """
        if rec.n is not None:
            raise ValueError("LiveMetrics.observe takes per-cycle records, not aggregates")
        steps = rec.steps
        per_phase = self._phases.get(steps)
        if per_phase is None:
            per_phase = self._phases[steps] = tuple([] for _ in _PHASE_FIELDS)
        for field, values in zip(_PHASE_FIELDS, per_phase):
            value = getattr(rec, field)
            if value is not None:
                values.append(value)
        lengths = rec.accepts if rec.accepts is not None else rec.accept_hist
        if lengths:
            acc = self._accepts.get(steps)
            if acc is None:
                acc = self._accepts[steps] = {}
            if isinstance(lengths, dict):
                pairs = lengths.items()
            elif len(lengths) == 1:
                pairs = ((lengths[0], 1),)
            else:
                pairs = Counter(lengths).items()
            # as report.per_position_acceptance: this cycle's positions are 1..depth (min(steps,
            # draft_tokens - 1): a tree of fewer tokens is shallower); a request of accept length L
            # reached 1..min(L, depth) and accepted 1..L-1
            top = max(lengths)
            cap = max_accept_len(steps, rec.draft_tokens) - 1
            depth = cap if top <= cap + 1 else top - 1
            pos = self._positions
            while len(pos) < depth:
                pos.append([0, 0])
            for length, n in pairs:
                acc[length] = acc.get(length, 0) + n
                for j in range(min(length, depth)):
                    pos[j][0] += n
                for j in range(length - 1):
                    pos[j][1] += n
        self._cycle_counts[steps] += 1
        self.observed += 1

    @property
    def due(self) -> bool:
        """Something is pending and :data:`PUSH_EVERY_S` has passed since the last push."""
        return bool(self._cycle_counts) and self._clock() >= self._due

    @property
    def overdue(self) -> bool:
        """Something is pending and five push periods have passed since the last push."""
        return bool(self._cycle_counts) and self._clock() >= self._due + 4 * self.push_every_s

    def push(self) -> None:
        """Add everything observed since the last push to the ``prometheus_client`` series."""
        self._due = self._clock() + self.push_every_s
        if not self._cycle_counts:
            return
        phases, accepts, positions, cycles = self._phases, self._accepts, self._positions, self._cycle_counts
        self._phases, self._accepts, self._positions, self._cycle_counts = {}, {}, [], Counter()
        for steps, per_phase in phases.items():
            for label, values in zip(_PHASE_NAMES, per_phase):
                if values:
                    _observe_all(self._child(self._phase, label, str(steps)), [v / 1000.0 for v in values])
        for steps, hist in accepts.items():
            child = self._child(self._accept, str(steps))
            for length, n in hist.items():
                _observe_n(child, float(length), n)
        for j, (reached, accepted) in enumerate(positions, start=1):
            self._child(self._reached, str(j)).inc(reached)
            self._child(self._accepted, str(j)).inc(accepted)
        for steps, n in cycles.items():
            self._child(self._cycles, str(steps)).inc(n)
        self.pushes += 1


def _layout_known(child) -> bool:
    """Whether a histogram child has the layout :func:`_observe_n` adds to directly: ``_sum`` and
    non-cumulative ``_buckets`` over ``_upper_bounds`` (prometheus_client 0.x)."""
    bounds = getattr(child, "_upper_bounds", None)
    buckets = getattr(child, "_buckets", None)
    return (bounds is not None and buckets is not None and len(bounds) == len(buckets)
            and hasattr(getattr(child, "_sum", None), "inc"))


def _observe_n(child, value: float, n: int) -> None:
    """``n`` observations of ``value`` in one histogram child: its sum once and its bucket once
    where the layout is the known one (:func:`_layout_known`), else ``n`` calls of ``observe``."""
    if n <= 1 or not _layout_known(child):
        for _ in range(n):
            child.observe(value)
        return
    child._sum.inc(value * n)
    child._buckets[bisect.bisect_left(child._upper_bounds, value)].inc(n)


def _observe_all(child, values: list) -> None:
    """Every value of ``values`` into one histogram child: the sum once and each touched bucket once
    where the layout is the known one, else one ``observe`` per value."""
    if len(values) <= 1 or not _layout_known(child):
        for v in values:
            child.observe(v)
        return
    bounds = child._upper_bounds
    counts = Counter(bisect.bisect_left(bounds, v) for v in values)
    child._sum.inc(math.fsum(values))
    for i, n in counts.items():
        child._buckets[i].inc(n)


def set_wiring_info(base: Mapping[str, str], report, registry: Any = None) -> None:
    """Set :data:`WIRING_INFO` to 1 for ``report`` (a
    :class:`~sglang_eagle_cycle.wiring.WiringReport`), labels ``base`` (less any of
    :data:`OWN_LABELS`, :func:`series_base_labels`) + :func:`wiring_info_labels`. ``registry``: as
    :class:`LiveMetrics`' (None: nowhere; SGLang's multiprocess directory holds the value).

    Raises:
        ImportError: ``prometheus_client`` is missing.
    """
    from prometheus_client import Gauge

    base, _ = series_base_labels(base)
    info = wiring_info_labels(report)
    names = tuple(base) + WIRING_LABELS
    gauge = Gauge(WIRING_INFO, HELP[WIRING_INFO], names, multiprocess_mode="mostrecent", registry=registry)
    gauge.labels(*(str(v) for v in base.values()), *(info[k] for k in WIRING_LABELS)).set(1)
