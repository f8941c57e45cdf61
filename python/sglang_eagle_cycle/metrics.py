"""Prometheus series of the EAGLE decode cycle: names, types, buckets and labels, and the text
exposition ``eagle-cycle inspect --prometheus`` writes from a log.

One definition for every writer, so a log replayed offline lands on the same dashboard as a live
server. Names follow the cycle line's rule: fields are added, never renamed.

============================================  =========  ==============================  =======
name                                          type       labels (besides the base ones)  unit
============================================  =========  ==============================  =======
``sglang:eagle_cycle_phase_seconds``          histogram  ``phase``, ``steps``            seconds
``sglang:eagle_cycle_accept_length``          histogram  ``steps``                       tokens
``sglang:eagle_cycle_position_reached_total`` counter    ``position``                    requests
``sglang:eagle_cycle_position_accepted_total`` counter   ``position``                    requests
``sglang:eagle_cycle_cycles_total``           counter    ``steps``                       cycles
============================================  =========  ==============================  =======

* ``phase``: the cycle line's field without ``_ms``: ``draft``, ``verify``, ``verify_fwd``,
  ``extend``, ``other``, ``total``, ``draft_prep``, ``gap`` (:data:`PHASE_LABELS`); buckets
  :data:`PHASE_BUCKETS_S` (0.1 ms to 500 ms).
* ``sglang:eagle_cycle_accept_length``: one observation per request per cycle (accept length,
  bonus token included), buckets ``1, 2, ..., num_steps + 1``.
* ``position`` ``j`` (1-based draft position): ``reached`` counts requests whose accept length is
  ``>= j``, ``accepted`` those with ``>= j + 1``; per-position acceptance is their ratio
  (``rate(accepted) / rate(reached)`` in PromQL).
* Base labels (:data:`BASE_LABELS`): those SGLang's scheduler metrics carry, ``model_name``,
  ``engine_type``, ``tp_rank``, ``pp_rank`` (and ``dp_rank`` where SGLang sets it).

Offline (:func:`exposition`): a log's lines carry no model name or engine type, so they come from
the caller (``--model-name``; ``engine_type`` ``unified``, SGLang's value outside
prefill/decode disaggregation); ranks come from the lines' ``rank=`` field (``tp0.pp0.dp1``; none
means scheduler rank 0, the one that prints by default), ``all`` for a group pooling several
ranks. Aggregated lines (``SGLANG_EAGLE_CYCLE_LOG_EVERY``) carry only means: they count in
``_sum`` and ``_count`` and in no bucket, so ``_count`` can exceed the ``+Inf`` bucket; the file
says so in a comment.
"""

from __future__ import annotations

import math
import re
from typing import Iterable, Mapping

from .cycle import ALL_PHASES
from .report import per_position_acceptance

PHASE_SECONDS = "sglang:eagle_cycle_phase_seconds"
ACCEPT_LENGTH = "sglang:eagle_cycle_accept_length"
POSITION_REACHED = "sglang:eagle_cycle_position_reached_total"
POSITION_ACCEPTED = "sglang:eagle_cycle_position_accepted_total"
CYCLES = "sglang:eagle_cycle_cycles_total"

#: phase label of each cycle-line field
PHASE_LABELS = {field: field[:-len("_ms")] for field in ALL_PHASES}
#: phase histogram bounds (s): 0.1 ms to 500 ms, finest where verify forwards of real
#: deployments fall (a few ms to ~50 ms)
PHASE_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.0125, 0.015,
                   0.0175, 0.02, 0.025, 0.03, 0.035, 0.04, 0.05, 0.06, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5)
#: the labels every series carries (SGLang's scheduler metric labels)
BASE_LABELS = ("model_name", "engine_type", "tp_rank", "pp_rank", "dp_rank")

HELP = {
    PHASE_SECONDS: "Time of one phase of the EAGLE decode cycle (draft, verify, verify_fwd, extend, other, "
                   "total, draft_prep, gap), per cycle.",
    ACCEPT_LENGTH: "Accept length per request per verify (accepted draft tokens + 1 bonus token).",
    POSITION_REACHED: "Requests whose draft reached position j (accept length >= j).",
    POSITION_ACCEPTED: "Requests whose draft token at position j was accepted (accept length >= j + 1).",
    CYCLES: "EAGLE decode cycles, by speculation depth.",
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

    def add_unbucketed(self, total: float, n: int) -> None:
        self.sum += total
        self.count += n


def exposition(groups, model_name: str = "", engine_type: str = "unified") -> str:
    """The Prometheus text exposition (format 0.0.4) of ``inspect``'s groups.

    Args:
        groups: :class:`~.report.Group` objects (``inspect_paths(..., groups_out=[])``); groups
            that share a label set (several files or batch sizes at one depth and rank) are summed.
        model_name, engine_type: base label values the log does not carry.

    Returns:
        The text, one ``# HELP``/``# TYPE`` pair per metric; phase times in seconds.
    """
    phase: dict[tuple, _Hist] = {}
    accept: dict[tuple, _Hist] = {}
    reached: dict[tuple, int] = {}
    accepted: dict[tuple, int] = {}
    cycles: dict[tuple, int] = {}
    aggregated = 0
    max_len = max([g.steps + 1 for g in groups] + [max(g.hist, default=1) for g in groups] + [1])
    for g in groups:
        base = {"model_name": model_name, "engine_type": engine_type, **rank_labels(g.ranks)}
        bkey = tuple(base.items())
        steps = str(g.steps)
        for field, dist in g.phases.items():
            if not dist.weight:
                continue
            key = bkey + (("phase", PHASE_LABELS[field]), ("steps", steps))
            h = phase.setdefault(key, _Hist(PHASE_BUCKETS_S))
            for value_ms, n in dist.counts.items():
                h.add(value_ms / 1000.0, n)
            if dist.agg_weight:
                exact = sum(v * n for v, n in dist.counts.items())
                h.add_unbucketed((dist.total - exact) / 1000.0, dist.agg_weight)
                aggregated += dist.agg_weight
        if g.hist:
            h = accept.setdefault(bkey + (("steps", steps),), _Hist(range(1, max_len + 1)))
            for length, n in g.hist.items():
                h.add(float(length), n)
            for pos in per_position_acceptance(g.hist, g.steps):
                pkey = bkey + (("position", str(pos["j"])),)
                reached[pkey] = reached.get(pkey, 0) + pos["reached"]
                accepted[pkey] = accepted.get(pkey, 0) + pos["accepted"]
        ckey = bkey + (("steps", steps),)
        cycles[ckey] = cycles.get(ckey, 0) + g.cycles

    out = []
    if aggregated:
        out.append(f"# {aggregated} aggregated cycles (SGLANG_EAGLE_CYCLE_LOG_EVERY lines: means only) count in "
                   f"{PHASE_SECONDS}_sum and _count but in no bucket")

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
        family = name[:-len("_total")]
        out.append(f"# HELP {family} {HELP[name]}")
        out.append(f"# TYPE {family} counter")
        for key, v in sorted(series.items(), key=lambda kv: _sort_key(kv[0])):
            out.append(f"{name}{_labels(dict(key))} {v}")

    histogram(PHASE_SECONDS, phase)
    histogram(ACCEPT_LENGTH, accept)
    counter(POSITION_REACHED, reached)
    counter(POSITION_ACCEPTED, accepted)
    counter(CYCLES, cycles)
    return "\n".join(out) + "\n"


def _sort_key(key: tuple) -> tuple:
    return tuple((k, int(v) if k == "position" else v) for k, v in key)
