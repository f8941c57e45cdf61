"""From measured runs to a recommended speculation depth: the engine of ``eagle-cycle advise``.

Inputs become :class:`Run` objects (one measured configuration each) and no-spec baselines
(``{bs: tok/s}``); :func:`advise` fits :mod:`costmodel` to them and ranks every candidate depth
at every batch size. Readers here take already-decoded JSON (no file IO):

* :func:`runs_from_inspect`: an ``eagle-cycle inspect --json`` document (``eagle-cycle-inspect/1``)
  with optional parts missing or null;
* :func:`runs_from_bench`: ``eagle-cycle-bench/1`` records (``steps == 0`` records are baselines);
* :func:`runs_from_table`: a published table in the SpecBundle format
  (``{model: {benchmark: {"results": [{batch_size, steps, topk, num_draft_tokens,
  metrics: [{Name, output_throughput, accept_length}]}]}}}``).

:func:`adaptive_config` turns an :class:`Advice` into an SGLang 0.5.23
``--speculative-adaptive-config`` document.

Usage::

    from sglang_eagle_cycle import advise as adv
    runs, base, notes = adv.runs_from_inspect(doc, "seed.json")
    advice = adv.advise(runs, {1: 88.8}, steps=range(0, 11), batch_sizes=[1])
    print(advice.primary.recommendation.reason)
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import re
import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence

from . import costmodel as cm
from . import uncertainty as unc
from .argtypes import MAX_BS, MAX_STEPS, MAX_TOK_S, MIN_TOK_S
from .errors import UsageError

INSPECT_SCHEMA = "eagle-cycle-inspect/1"
BENCH_SCHEMA = "eagle-cycle-bench/1"

#: a run's acceptance dispersion, ``(accept_se / iid_accept_se)^2``, counts only above this: the
#: batch-means ``accept_se^2`` (:mod:`.series`, ``b = n / 8``) has about ``1.5 n / b = 12`` degrees of
#: freedom (relative variance ``4 b / 3 n``), and independent cycles read above 1 one run in two (the
#: floor at 1 lifted them 15% on average; 2 of 6 independent 2-step runs of the Kimi seed widened the
#: 2-step interval past 6%, helper 36). 1.752 is the 95th percentile of chi-square(12) / 12: the ratio
#: independent cycles stay under in 19 runs of 20. Blind-generator worlds, whose requests stay easy or
#: hard, measure 2-10 and are untouched (sim_advise seeds 0-15 identical on --blind, --third, --wide)
DISPERSION_GATE = 1.752

#: largest cycle or request-cycle count accepted (beyond it a float loses integer precision)
MAX_COUNT = 10 ** 15
#: largest routed-expert count read from a target config
MAX_EXPERTS = 1 << 20


@dataclass
class Run:
    """One measured configuration.

    Attributes:
        source: where it came from (file, table row), for messages.
        bs, steps, topk, num_draft_tokens: the configuration (``num_draft_tokens`` may be None).
        cycles: cycles behind the means (None when unknown, e.g. a published table).
        accept_len: mean accept length (tokens per request per cycle, bonus included).
        counts: per-position ``(accepted, reached)`` from per-request accept lengths, or None.
        phases: ``draft_ms``, ``verify_ms``, ``extend_ms``, ``other_ms``, ``total_ms`` means (ms),
            any may be None; None when no phase breakdown is known.
        tok_s: measured output throughput of the batch (tok/s).
        fitted: the model learns from this run (False: held out, shown beside its prediction).
        device_spans: from device-span cycle lines (True), older cycle lines (False), or not
            from cycle lines at all (None: bench records, tables). For device-span runs
            ``phases`` holds the device spans as the depth-dependent costs, ``other_ms`` the
            remainder plus ``host_ms``, and ``total_ms`` the period (``total + gap``).
        host_ms: ``draft_prep_ms + gap_ms`` (device-span runs): host preparation and idle time
            per cycle, a cost of its own that does not grow with the depth.
        prep_ms: its ``draft_prep_ms`` part (ms per cycle), which a one-step cycle may not pay.
        total_sd: standard deviation of the per-cycle time over the cycles (ms), None when unknown.
        accept_se, period_se: standard errors of the mean accept length (tokens) and of the mean
            cycle period (ms) by batch means over the cycle sequence (``batch_se`` of an inspect
            group, :mod:`.series`), None when unknown. They hold what the per-cycle spread misses:
            requests whose text stays easy or hard over many cycles, drift.
        tok_s_se: standard error of ``tok_s`` itself (tok/s), where neither the cycle time's nor the
            acceptance's is known: stock Decode batch lines (batch means over their intervals).
        pair: ``(model, draft)`` of a bench record (None for other inputs): runs of two pairs
            (:func:`pair_key`) are never fitted together.
        log_file: the server log a bench record's cycle group was read from (``cycle.file``), else
            its run's server log (``server_log``), so that the same log given as an INPUT is not
            counted twice.
        group_counts: a bench record's cycle group's own per-position counts (``counts`` holds the
            client's histogram where the record has one): what a log or document of the same
            cycles shows.
        concurrency: a bench record's client concurrency (``bs`` is its cycle group's batch size):
            its run's cycles in its server log lie at batch sizes up to it.
        intervals: stock Decode batch intervals behind the means (None for other inputs); each
            holds ``--decode-log-interval`` decode batches (:data:`STOCK_INTERVAL_BATCHES`).
    """

    source: str
    bs: int
    steps: int
    topk: int = 1
    num_draft_tokens: Optional[int] = None
    cycles: Optional[int] = None
    accept_len: Optional[float] = None
    counts: Optional[list[tuple[int, int]]] = None
    phases: Optional[dict[str, Optional[float]]] = None
    tok_s: Optional[float] = None
    fitted: bool = True
    device_spans: Optional[bool] = None
    host_ms: Optional[float] = None
    prep_ms: Optional[float] = None
    total_sd: Optional[float] = None
    accept_se: Optional[float] = None
    period_se: Optional[float] = None
    tok_s_se: Optional[float] = None
    pair: Optional[tuple] = None
    log_file: Optional[str] = None
    group_counts: Optional[list[tuple[int, int]]] = None
    concurrency: Optional[int] = None
    intervals: Optional[int] = None

    def iid_accept_se(self) -> Optional[float]:
        """Standard error of the mean accept length were every request-cycle independent (tokens):
        the chain's variance from the per-position counts over ``bs * cycles``; None without counts."""
        if not self.counts or not self.cycles:
            return None
        mean, var = cm.accept_len_moments([a / n if n else 0.0 for a, n in self.counts])
        return math.sqrt(var / (self.bs * self.cycles))

    def accept_dispersion(self) -> float:
        """How many times the independent-cycles variance of the mean accept length the cycle
        sequence shows: ``(accept_se / iid_accept_se)^2`` when above :data:`DISPERSION_GATE`, else 1
        (also when either is unknown)."""
        iid = self.iid_accept_se()
        if not self.accept_se or not iid:
            return 1.0
        ratio = (self.accept_se / iid) ** 2
        # the batch-means estimate scatters by about 40%: independent cycles read above 1 one run in
        # two (floored at 1, up by 15% on average); only a ratio beyond that scatter counts
        return ratio if ratio > DISPERSION_GATE else 1.0

    def total_se_ms(self) -> Optional[float]:
        """Standard error of the mean cycle time (ms): for a measured one, the larger of
        ``total_sd / sqrt(cycles)`` and the batch-means ``period_se`` (either alone where the other
        is unknown: aggregated lines, ``SGLANG_EAGLE_CYCLE_LOG_EVERY`` > 1, have no per-cycle sd but
        their batch means); for one derived from tok/s (stock Decode batch lines), the tok/s error's
        share of it; None when neither is known."""
        if self.phases and self.phases.get("total_ms"):
            per_cycle = self.total_sd / math.sqrt(self.cycles) if self.total_sd is not None and self.cycles else None
            if per_cycle is None and self.period_se is None:
                return None
            return max(per_cycle or 0.0, self.period_se or 0.0)
        total = self.total_ms()
        if self.tok_s_se is None or total is None:
            return None
        return total * self.tok_s_se / self.tok_s

    def total_ms(self) -> Optional[float]:
        """Mean cycle time: measured, else ``1000 bs accept_len / tok_s``."""
        if self.phases and self.phases.get("total_ms"):
            return self.phases["total_ms"]
        if self.accept_len and self.tok_s:
            return 1000.0 * self.bs * self.accept_len / self.tok_s
        return None

    def observation(self) -> Optional[cm.CycleObservation]:
        total = self.total_ms()
        if total is None:
            return None
        ph = self.phases or {}
        return cm.CycleObservation(
            bs=self.bs, steps=self.steps, total_ms=total, draft_ms=ph.get("draft_ms"),
            verify_ms=ph.get("verify_ms"), extend_ms=ph.get("extend_ms"), other_ms=ph.get("other_ms"),
            weight=float(self.cycles or 1),
            total_se_ms=self.total_se_ms(), prep_ms=self.prep_ms,
        )


# ---------------------------------------------------------------------------------------------
# small validators
# ---------------------------------------------------------------------------------------------


def _finite(v: Any) -> bool:
    """A real JSON number (not a bool) that fits a float and is finite."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:  # an int beyond the float range
        return False


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _num(v: Any, what: str, *, positive: bool = False, nonneg: bool = False,
         allow_none: bool = True) -> Optional[float]:
    if v is None and allow_none:
        return None
    if not _finite(v):
        raise UsageError(f"{what}: expected a finite number, got {_short(v)}")
    if positive and v <= 0:
        raise UsageError(f"{what}: must be positive, got {v!r}")
    if nonneg and v < 0:
        raise UsageError(f"{what}: must not be negative, got {v!r}")
    return float(v)


def _int(v: Any, what: str, *, minimum: int = 1, maximum: Optional[int] = None,
         allow_none: bool = False) -> Optional[int]:
    if v is None and allow_none:
        return None
    ok = _finite(v) and float(v).is_integer() and v >= minimum and (maximum is None or v <= maximum)
    if not ok:
        want = f"an integer >= {minimum}" if maximum is None else f"an integer in {minimum}..{maximum}"
        raise UsageError(f"{what}: expected {want}, got {_short(v)}")
    return int(v)


def normalise_name(name: str) -> str:
    """Lower-case alphanumerics only: ``"Spec for ge"`` and ``"SpecForge"`` compare equal."""
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


def pair_key(model: Optional[str], draft: Optional[str]) -> tuple[str, str]:
    """``(model, draft)`` as compared: :func:`normalise_name` of each (None as empty), as the
    ``--model``/``--draft`` filters match them."""
    return normalise_name(model or ""), normalise_name(draft or "")


def check_one_pair(pairs: Mapping[tuple[str, str], tuple], baseline_models: Iterable[tuple[Optional[str], str]],
                   source: str) -> None:
    """Refuse bench runs of several model/draft pairs, or a no-spec baseline of another model.

    One check for records within one file (:func:`runs_from_bench`) and across the files of one
    ``advise`` call, so both say the same.

    Args:
        pairs: :func:`pair_key` of each speculative run's model/draft -> the names as written.
        baseline_models: ``(model, where)`` of each no-spec record used: the model as written (None
            when unnamed) and the record (``FILE:LINE``), named in the message.
        source: the input named in the message.

    Raises:
        UsageError: more than one pair, a baseline whose model is none of the runs', or, with no
            runs, baselines of several models.
    """
    def name(m: Optional[str]) -> str:
        return "unnamed" if m is None else str(m)

    if len(pairs) > 1:
        names = ", ".join(sorted(f"{name(m)} + {name(d)}" for m, d in pairs.values()))
        raise UsageError(f"{source}: bench records of several model/draft pairs ({names}): "
                         "choose with --model/--draft")
    models = {k[0] for k in pairs}
    baseline_models = list(baseline_models)
    if not pairs and len({normalise_name(m or "") for m, _ in baseline_models}) > 1:
        first = {}
        for m, where in baseline_models:
            first.setdefault(normalise_name(m or ""), f"{name(m)} at {where}")
        raise UsageError(f"{source}: no-spec bench baselines of several models ({', '.join(sorted(first.values()))}): "
                         "choose with --model")
    foreign = {}
    for m, where in baseline_models:
        if models and normalise_name(m or "") not in models:
            foreign.setdefault(normalise_name(m or ""), f"{name(m)} at {where}")
    if foreign:
        raise UsageError(f"{source}: a no-spec bench baseline of another model ({', '.join(sorted(foreign.values()))}) "
                         f"than the runs' ({', '.join(sorted(name(m) for m, _ in pairs.values()))}): "
                         "choose with --model")


# ---------------------------------------------------------------------------------------------
# inspect --json documents
# ---------------------------------------------------------------------------------------------


#: phases whose mean must be above 0 when given (a cycle always verifies)
_POSITIVE_PHASES = ("verify_ms", "total_ms")


#: longest plausible mean of one phase of a decode cycle (ms): a minute per cycle is a stalled
#: server, not a measurement; larger values are refused (they printed 309-digit reasons)
MAX_PHASE_MS = 60_000.0
#: shortest plausible mean cycle (ms): below it the throughput is not a measurement (infinite tok/s)
MIN_CYCLE_MS = 1e-3


def _phase_mean(phases: Mapping, name: str, what: str) -> Optional[float]:
    v = phases.get(name)
    if isinstance(v, Mapping):
        v = v.get("mean")
    out = _num(v, f"{what}.{name}", positive=name in _POSITIVE_PHASES, nonneg=True)
    if out is not None and out > MAX_PHASE_MS:
        raise UsageError(f"{what}.{name}: {out:.3g} ms is not a decode-cycle time (at most {MAX_PHASE_MS:g} ms)")
    if out is not None and name == "total_ms" and out < MIN_CYCLE_MS:
        raise UsageError(f"{what}.{name}: {out:.3g} ms is not a decode-cycle time (at least {MIN_CYCLE_MS:g} ms)")
    return out


def _tok(v: Any, what: str, positive: bool = False) -> Optional[float]:
    """A throughput field (tok/s): finite, not negative (``positive``: above 0), 0 or within
    :data:`MIN_TOK_S` .. :data:`MAX_TOK_S`."""
    out = _num(v, what, positive=positive, nonneg=True)
    if out is not None and (out > MAX_TOK_S or 0 < out < MIN_TOK_S):
        raise UsageError(f"{what}: {out:.10g} tok/s is not a throughput (expected {MIN_TOK_S:g} to {MAX_TOK_S:.0e})")
    return out


def _check_phase_sum(phases: Mapping[str, Optional[float]], what: str) -> None:
    """The parts of a cycle may not add up to more than its total (beyond 1% + 0.05 ms of rounding).

    Raises:
        UsageError: they do.
    """
    total = phases.get("total_ms")
    parts = sum(phases.get(k) or 0.0 for k in ("draft_ms", "verify_ms", "extend_ms", "other_ms"))
    if total is not None and parts > total * 1.01 + 0.05:
        raise UsageError(f"{what}.phases: draft + verify + extend + other = {parts:.3f} ms exceeds total_ms "
                         f"{total:.3f} ms: not one cycle's breakdown")


#: an inspect group's ``tok_s`` may lie up to this factor either way from ``1000 bs accept_len_mean /
#: period`` before the group is refused as inconsistent: the two are one ratio of the same cycles
#: (cycles without an accept length or a time make them differ a little), so only an edit moves it
#: this far; a smaller disagreement is left to the poor-fit notes, which name it
TOK_S_CONSISTENCY = 2.0
#: an inspect group's ``accept_len_mean`` may lie this far (tokens) from its ``accept_hist``'s mean
ACCEPT_CONSISTENCY = 0.05


def _check_group_consistency(g: Mapping, phases_doc: Mapping, phases: Mapping[str, Optional[float]],
                             accept: Optional[float], bs: int, hist_counts: Optional[list[tuple[int, int]]],
                             cycles: Optional[int], what: str) -> None:
    """An inspect group whose figures contradict each other (a hand-edited document) is refused, not
    advised on: the measured column would show one figure and the model fit another. Only documents
    and bench records' groups as given: a log's cycles are measurements, read line by line (a
    generator's lines whose figures disagree a little were advised on before and still are).

    Checked where both sides are present: ``verify_fwd_ms`` (the target forward) within
    ``verify_ms`` (beyond 1% + 0.05 ms of rounding); ``accept_len_mean`` within
    :data:`ACCEPT_CONSISTENCY` of the mean of ``accept_hist`` (``hist_counts``: its per-position
    counts, :func:`counts_from_hist`; the mean is 1 plus the accepted drafts over the request-cycles,
    which all reach position 1); the histogram's request-cycles at most
    ``cycles x bs``; ``tok_s`` within a factor :data:`TOK_S_CONSISTENCY` of ``1000 bs
    accept_len_mean / (total_ms + gap_ms)`` (the period the plugin divides by).

    Raises:
        UsageError: one line naming the fields that disagree.
    """
    fwd = _phase_mean(phases_doc, "verify_fwd_ms", f"{what}.phases")
    verify = phases.get("verify_ms")
    if fwd is not None and verify is not None and fwd > verify * 1.01 + 0.05:
        raise UsageError(f"{what}.phases: verify_fwd_ms {fwd:.3f} exceeds verify_ms {verify:.3f} (the target forward "
                         "is part of the verify): the document contradicts itself (edited?); regenerate it with "
                         "eagle-cycle inspect LOG --json")
    if hist_counts:
        n = hist_counts[0][1]
        if n and accept is not None:
            mean = 1.0 + sum(a for a, _ in hist_counts) / n
            if abs(mean - accept) > ACCEPT_CONSISTENCY:
                raise UsageError(f"{what}: accept_len_mean {accept:g} but its accept_hist's mean is {mean:.3f}: the "
                                 "document contradicts itself (edited?); regenerate it with eagle-cycle inspect LOG --json")
        if cycles is not None and n > cycles * bs + 1:
            raise UsageError(f"{what}: accept_hist counts {n} request-cycles, more than cycles x bs = {cycles} x {bs}: "
                             "the document contradicts itself (edited?); regenerate it with eagle-cycle inspect LOG --json")
    tok = g.get("tok_s")
    total = phases.get("total_ms")   # gap included for device-span groups (the caller's period)
    if _finite(tok) and tok > 0 and accept is not None and total:
        expect = 1000.0 * bs * accept / total
        if not 1.0 / TOK_S_CONSISTENCY <= tok / expect <= TOK_S_CONSISTENCY:
            raise UsageError(f"{what}: tok_s {tok:g} but bs x accept_len_mean / total_ms gives {expect:.1f} tok/s: "
                             "the document contradicts itself (edited?); regenerate it with eagle-cycle inspect LOG --json")


def counts_from_hist(hist: Any, steps: int, what: str) -> Optional[list[tuple[int, int]]]:
    """Per-position ``(accepted, reached)`` from an ``accept_hist`` object ``{"L": request-cycles}``.

    ``None`` when the histogram is missing, null or empty.

    Raises:
        UsageError: not an object, a key that is not an accept length in ``1..steps+1``, or a
            count that is not an integer in ``0..MAX_COUNT``.
    """
    if hist is None:
        return None
    if not isinstance(hist, Mapping):
        raise UsageError(f"{what}.accept_hist: expected an object {{accept length: request-cycles}}, "
                         f"got {_short(hist)}")
    clean: dict[int, int] = {}
    for k, v in hist.items():
        try:
            length = int(str(k).strip())
        except ValueError:
            raise UsageError(f"{what}.accept_hist: key {_short(k)} is not an accept length") from None
        if not 1 <= length <= steps + 1:
            raise UsageError(f"{what}.accept_hist: accept length {length} impossible with {cm.steps_text(steps)} "
                             f"(1..{steps + 1})")
        if length in clean:
            raise UsageError(f"{what}.accept_hist: accept length {length} given twice")
        clean[length] = _int(v, f"{what}.accept_hist[{k}]", minimum=0, maximum=MAX_COUNT)
    return cm.position_counts(clean, steps) if clean else None


def _check_chain_tokens(topk: int, steps: int, draft_tokens: Optional[int], what: str) -> None:
    """A chain draft (topk 1) verifies ``steps + 1`` tokens, as SGLang enforces.

    Raises:
        UsageError: topk 1 with another ``draft_tokens``.
    """
    if topk == 1 and draft_tokens is not None and draft_tokens != steps + 1:
        raise UsageError(f"{what}: with topk 1 the draft tokens must be steps + 1 = {steps + 1}, got {draft_tokens}")


def _ppa_counts(ppa: Any, steps: int, what: str) -> Optional[list[tuple[int, int]]]:
    """Counts from ``per_position_acceptance`` when every entry has them; entries are validated."""
    if ppa is None:
        return None
    where = f"{what}.per_position_acceptance"
    if not isinstance(ppa, list):
        raise UsageError(f"{where}: expected a list of {{j, p, accepted, reached}} objects, got {_short(ppa)}")
    counts: list[Optional[tuple[int, int]]] = [None] * steps
    complete = bool(ppa)
    for i, q in enumerate(ppa):
        if not isinstance(q, Mapping):
            raise UsageError(f"{where}[{i}]: expected an object {{j, p, accepted, reached}}, got {_short(q)}")
        j = _int(q.get("j"), f"{where}[{i}].j", maximum=steps)
        p = _num(q.get("p"), f"{where}[{i}].p", nonneg=True)
        if p is not None and p > 1:
            raise UsageError(f"{where}[{i}].p: a probability must be in 0..1, got {p!r}")
        a = _int(q.get("accepted"), f"{where}[{i}].accepted", minimum=0, maximum=MAX_COUNT, allow_none=True)
        n = _int(q.get("reached"), f"{where}[{i}].reached", minimum=0, maximum=MAX_COUNT, allow_none=True)
        if a is not None and n is not None and a > n:
            raise UsageError(f"{where}[{i}]: accepted {a} > reached {n} at position {j}")
        if counts[j - 1] is not None:
            raise UsageError(f"{where}: position {j} given twice")
        if a is None or n is None:
            complete = False
        counts[j - 1] = (a or 0, n or 0)
    if not complete:
        return None
    out = [c or (0, 0) for c in counts]
    for j in range(1, steps):   # a draft is reached only after every earlier one was accepted
        if out[j][1] > out[j - 1][0]:
            raise UsageError(f"{where}: {out[j][1]} reached position {j + 1} but only {out[j - 1][0]} "
                             f"accepted position {j}")
    return out


def runs_from_inspect(doc: Any, source: str, group_label: Optional[str] = None, from_log: bool = False
                      ) -> tuple[list[Run], dict[int, float], list[str]]:
    """Runs from an ``eagle-cycle inspect --json`` document.

    ``group_label``: how errors name a group (default ``"SOURCE: groups[i]"``), e.g. a bench
    record's ``cycle`` group. ``from_log``: the document was made here from a log the user gave,
    whose own ``server_args=`` line the caller reads for stock lines (no note that a document
    lacks their depth).

    Each group ``(bs, steps, topk, draft_tokens)`` is one run; phase means, accept-length
    histogram and per-position counts are used when present (they may be missing or null).
    A document whose stock "Decode batch" lines carry no accept length (a server without
    speculation) yields a baseline: its mean gen throughput, at the batch size of the groups
    of the other inputs (resolved by :func:`advise`'s caller), keyed ``0`` here.

    Returns:
        ``(runs, baselines, notes)``; baselines ``{0: tok/s}`` for an unknown batch size.

    Raises:
        UsageError: not an inspect document, or a group with invalid fields.
    """
    if not isinstance(doc, Mapping) or not isinstance(doc.get("groups"), list):
        raise UsageError(f"{source}: not an eagle-cycle inspect --json document (no \"groups\" list)")
    schema = doc.get("schema")
    if schema not in (None, INSPECT_SCHEMA):
        raise UsageError(f"{source}: schema {schema!r} is not {INSPECT_SCHEMA}")
    runs, notes = [], []
    for i, g in enumerate(doc["groups"]):
        what = group_label or f"{source}: groups[{i}]"
        if not isinstance(g, Mapping):
            raise UsageError(f"{what}: expected an object")
        bs = _int(g.get("bs"), f"{what}.bs", maximum=MAX_BS)
        steps = _int(g.get("steps"), f"{what}.steps", minimum=0, maximum=MAX_STEPS)
        topk = _int(g.get("topk", 1), f"{what}.topk")
        if steps == 0:
            notes.append(f"{what}: 0-step group skipped")
            continue
        phases_doc = g.get("phases")
        if phases_doc is None:
            phases_doc = {}
        if not isinstance(phases_doc, Mapping):
            raise UsageError(f"{what}.phases: expected an object")
        phases = {k: _phase_mean(phases_doc, k, f"{what}.phases")
                  for k in ("draft_ms", "verify_ms", "extend_ms", "other_ms", "total_ms")}
        _check_phase_sum(phases, what)
        spans = g.get("device_spans")
        if spans is not None and not isinstance(spans, bool):
            raise UsageError(f"{what}.device_spans: expected true or false, got {_short(spans)}")
        host = prep = None
        if spans:
            # the device spans are the depth-dependent costs; host prep + idle gap is a cost of its own
            prep = _phase_mean(phases_doc, "draft_prep_ms", f"{what}.phases")
            gap = _phase_mean(phases_doc, "gap_ms", f"{what}.phases")
            host = (prep or 0.0) + (gap or 0.0)
            if phases["other_ms"] is not None:
                phases["other_ms"] += host
            if phases["total_ms"] is not None:
                phases["total_ms"] += gap or 0.0
        accept = _num(g.get("accept_len_mean"), f"{what}.accept_len_mean")
        if accept is not None and not 1.0 <= accept <= steps + 1 + 1e-9:
            raise UsageError(f"{what}: accept_len_mean {accept} impossible with {cm.steps_text(steps)}")
        # both validated whatever the topk; the counts of per_position_acceptance first, else the histogram's
        ppa_counts = _ppa_counts(g.get("per_position_acceptance"), steps, what)
        hist_counts = counts_from_hist(g.get("accept_hist"), steps, what)
        counts = ppa_counts if ppa_counts is not None else hist_counts
        cycles = _int(g.get("cycles"), f"{what}.cycles", maximum=MAX_COUNT, allow_none=True)
        tok_s = _tok(g.get("tok_s"), f"{what}.tok_s", positive=True)   # its range first, then its agreement
        if not from_log:   # a document (or a bench record's group) as given, not one made here from a log
            _check_group_consistency(g, phases_doc, phases, accept, bs, hist_counts, cycles, what)
        ndt = _int(g.get("draft_tokens"), f"{what}.draft_tokens", allow_none=True)
        _check_chain_tokens(topk, steps, ndt, what)
        total_doc = phases_doc.get("total_ms")
        total_sd = _num(total_doc.get("sd"), f"{what}.phases.total_ms.sd", nonneg=True) \
            if isinstance(total_doc, Mapping) else None
        if total_sd is not None and total_sd > MAX_PHASE_MS:
            raise UsageError(f"{what}.phases.total_ms.sd: {total_sd:.3g} ms is not a decode-cycle spread")
        accept_se, period_se = _batch_se(g.get("batch_se"), f"{what}.batch_se", steps, phases["total_ms"])
        runs.append(Run(
            source=f"{source}#{i}", bs=bs, steps=steps, topk=topk,
            num_draft_tokens=ndt,
            cycles=cycles,
            accept_len=accept, counts=counts if topk == 1 else None,
            phases=phases if any(v is not None for v in phases.values()) else None,
            tok_s=tok_s,
            device_spans=spans if spans is not None else (False if phases_doc else None), host_ms=host,
            prep_ms=prep,
            total_sd=total_sd, accept_se=accept_se, period_se=period_se,
        ))
    damaged = doc.get("unparsed_lines")
    if isinstance(damaged, int) and not isinstance(damaged, bool) and 0 < damaged <= MAX_COUNT:
        from .logfiles import command_arg
        log = command_arg(source) if from_log else "LOG"   # a document: the log it was made from
        notes.append(f"{source}: {damaged} damaged line{'s' if damaged != 1 else ''} left out (`eagle-cycle "
                     f"inspect {log} --show-rejected 20` names them and why): each run is what its other lines "
                     "measured")
    base: dict[int, float] = {}
    db = doc.get("decode_batch")
    stock_only = not runs and not from_log and isinstance(db, Mapping)   # a document of stock lines alone
    no_spec = stock_only and db.get("accept_len_mean") is None
    rows = _plain_rows(db, source) if no_spec else None
    if rows:
        # per batch size, as the log itself gives it (idle intervals and a ramp's left out): the
        # pooled gen_tok_s_mean mixes the ramp's batch sizes and the idle intervals in, and was put
        # at the runs' batch size whatever the lines' own (helper 49: 203.1 tok/s against 221.9)
        base.update(rows)
        notes.append(f"{source}: no speculation in its Decode batch lines: baseline tok/s by batch size "
                     + ", ".join(f"{k}: {v:.1f}" for k, v in sorted(rows.items())))
        from .decode_batch import PLATEAU_SPAN

        near = sorted(rows)
        if any(b <= max(PLATEAU_SPAN * a, a + 2) for a, b in zip(near, near[1:])):
            # a load that wandered over 6-8 is pooled as one plateau from the log (decode_batch.plateaus),
            # which needs the lines' order; the document has none (helper 54: 401.8 / 461.5 / 518.5
            # per batch size against the log's 486.3 at bs 8)
            notes.append(f"{source}: its no-spec batch sizes {', '.join(map(str, near))} lie close together: "
                         "an inspect document keeps no line order, so a load that wandered between them is not "
                         "pooled into one plateau as the log would be (give the log itself if it did)")
    elif rows == {} and isinstance(db.get("intervals"), int) and db["intervals"] > 0:
        notes.append(f"{source}: no speculation in its Decode batch lines, but no batch size with a usable "
                     "throughput (every interval idle, or none kept): no baseline from it")
    elif no_spec and rows is None and _finite(db.get("gen_tok_s_mean")) and db["gen_tok_s_mean"] > 0:
        base[0] = float(db["gen_tok_s_mean"])   # a document without by_bs: no batch size known
        notes.append(f"{source}: no speculation in its Decode batch lines: baseline {base[0]:.1f} tok/s")
    elif runs and not from_log and isinstance(db, Mapping) and isinstance(db.get("by_bs"), list) \
            and any(isinstance(x, Mapping) and x.get("speculative") is False for x in db["by_bs"]):
        # no-spec lines beside cycle groups (an appended log, several files): the log would give a
        # baseline from its no-spec start; the document does not say which start they are (helper 49)
        notes.append(f"{source}: Decode batch lines without speculation beside its cycle groups: not taken as a "
                     "baseline, since an inspect document does not say which server start they came from (give "
                     "the log itself, or --baseline-tok-s)")
    elif stock_only and db.get("accept_len_mean") is not None:
        stock = _stock_runs_of_document(db, source)
        if stock:
            runs += stock
            ndt = db["num_draft_tokens_inferred"]
            notes.append(f"{source}: stock Decode batch lines at {cm.steps_text(ndt - 1)}, the depth inferred from "
                         f"their accept len and accept rate (num_draft_tokens {ndt}, the one value every interval "
                         "fits; an inspect document does not carry the log's server_args= line; chain drafting, "
                         "topk 1, assumed): per batch size its throughput and mean accept length, without a noise "
                         "estimate or the line order that pools a wandering load (give the log itself for both)")
        else:
            notes.append(f"{source}: stock Decode batch lines with accept lengths, but an inspect document does not "
                         "carry the depth they ran at (the log's server_args= line), and their accept len and "
                         "accept rate pin none: give the log itself: not used")
    return runs, base, notes


def _stock_runs_of_document(db: Mapping, source: str) -> list[Run]:
    """Runs from an inspect document's speculative ``decode_batch.by_bs`` rows, at the depth its
    ``num_draft_tokens_inferred`` gives (``num_draft_tokens - 1`` steps, topk 1), a ramp's or
    drain's few intervals left out as the log reader leaves them out
    (:func:`decode_batch.steady_batch_sizes`); ``[]`` when no depth was inferred or no row is
    usable (a row of an impossible accept length or throughput is skipped)."""
    from .decode_batch import steady_batch_sizes

    ndt = db.get("num_draft_tokens_inferred")
    rows = db.get("by_bs")
    if isinstance(ndt, bool) or not isinstance(ndt, int) or not 2 <= ndt <= MAX_STEPS + 1 or not isinstance(rows, list):
        return []
    found: dict[int, tuple[float, float, int]] = {}
    for x in rows:
        if not isinstance(x, Mapping) or x.get("speculative") is not True:
            continue
        bs, n, acc, tok = x.get("bs"), x.get("intervals"), x.get("accept_len_mean"), x.get("gen_tok_s")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (bs, n)) or not 1 <= bs <= MAX_BS or n < 1:
            continue
        if not (_finite(acc) and 1.0 <= acc <= ndt and _finite(tok) and MIN_TOK_S <= tok <= MAX_TOK_S):
            continue
        found[bs] = (float(tok), float(acc), n)
    kept, _few = steady_batch_sizes(found, lambda v: v[2])
    return [Run(source=f"{source} (Decode batch, bs {bs}, {n} intervals)", bs=bs, steps=ndt - 1, topk=1,
                num_draft_tokens=ndt, accept_len=acc, tok_s=tok, intervals=n)
            for bs, (tok, acc, n) in sorted(kept.items())]


def _plain_rows(db: Mapping, source: str) -> Optional[dict[int, float]]:
    """``{batch size: gen tok/s}`` of an inspect document's no-spec ``decode_batch.by_bs`` rows
    (None where it has none: an older document), batch sizes of fewer than
    ``MIN_STOCK_INTERVALS`` intervals left out where another has that many (a ramp or a drain, as
    advise leaves them out of a log).

    Raises:
        UsageError: a row with an invalid batch size, throughput or interval count.
    """
    from .argtypes import MIN_STOCK_INTERVALS

    rows = db.get("by_bs")
    if not isinstance(rows, list):
        return None
    out: dict[int, tuple[float, int]] = {}
    for i, row in enumerate(rows):
        what = f"{source}: decode_batch.by_bs[{i}]"
        if not isinstance(row, Mapping):
            raise UsageError(f"{what}: expected an object")
        if row.get("speculative") is not False:
            continue
        tok = _tok(row.get("gen_tok_s"), f"{what}.gen_tok_s", positive=True)
        if tok is None:   # every interval at that batch size held idle time
            continue
        bs = _int(row.get("bs"), f"{what}.bs", maximum=MAX_BS)
        n = _int(row.get("intervals"), f"{what}.intervals", maximum=MAX_COUNT)
        out[bs] = (tok, n)
    if any(n >= MIN_STOCK_INTERVALS for _tok, n in out.values()):
        out = {bs: v for bs, v in out.items() if v[1] >= MIN_STOCK_INTERVALS}
    return {bs: tok for bs, (tok, _n) in out.items()}


def _batch_se(doc: Any, what: str, steps: int, total_ms: Optional[float]) -> tuple[Optional[float], Optional[float]]:
    """``(accept_len SE, period_ms SE)`` from an inspect group's ``batch_se`` (absent or null: unknown).

    Raises:
        UsageError: not an object; a value that is not a finite non-negative number; an accept-length
            error above ``steps / 2`` (the largest standard deviation of a value in ``1..steps + 1``);
            a period error above the group's mean cycle time; ``batch_cycles`` or ``cycles`` not a
            count.
    """
    if doc is None:
        return None, None
    if not isinstance(doc, Mapping):
        raise UsageError(f"{what}: expected an object")
    acc = _num(doc.get("accept_len"), f"{what}.accept_len", nonneg=True)
    per = _num(doc.get("period_ms"), f"{what}.period_ms", nonneg=True)
    for key in ("batch_cycles", "cycles"):
        _int(doc.get(key), f"{what}.{key}", maximum=MAX_COUNT, allow_none=True)
    if acc is not None and acc > steps / 2:
        raise UsageError(f"{what}.accept_len: {acc:.3g} tokens is not a standard error of a mean accept length "
                         f"at {cm.steps_text(steps)} (at most {steps / 2:g})")
    if per is not None and per > (total_ms if total_ms else MAX_PHASE_MS):
        raise UsageError(f"{what}.period_ms: {per:.3g} ms is not a standard error of a mean cycle time"
                         + (f" of {total_ms:.3g} ms" if total_ms else ""))
    return acc, per


def unwrap_seed(doc: Any, source: str = "input") -> tuple[Any, Optional[float]]:
    """``(inspect document, baseline tok/s)`` from a seed file that wraps one in ``inputs``.

    The format of ``data/benchmarks/seed_kimi_k25.json``: ``{"inputs": {"inspect_json": {...},
    "baseline_no_spec_tok_s": 88.8}}``. Anything else is returned unchanged with no baseline.
    A missing or null baseline is no baseline.

    Raises:
        UsageError: a baseline that is not a positive finite number (tok/s).
    """
    if isinstance(doc, Mapping) and isinstance(doc.get("inputs"), Mapping) \
            and isinstance(doc["inputs"].get("inspect_json"), Mapping):
        base = _num(doc["inputs"].get("baseline_no_spec_tok_s"), f"{source}: inputs.baseline_no_spec_tok_s",
                    positive=True)
        return doc["inputs"]["inspect_json"], base
    return doc, None


# ---------------------------------------------------------------------------------------------
# bench records
# ---------------------------------------------------------------------------------------------


def runs_from_bench(records: Iterable[Any], source: str, model: Optional[str] = None,
                    draft: Optional[str] = None, baseline_models: Optional[list] = None,
                    excluded_logs: Optional[list] = None, copies: Optional[dict] = None
                    ) -> tuple[list[Run], dict[int, float], list[str]]:
    """Runs and baselines from ``eagle-cycle-bench/1`` JSONL records.

    Only ``status == "ok"`` records count (the others are named in a note). ``steps == 0`` records
    are no-spec baselines at their
    concurrency (several at one concurrency: their mean, with a note); the others are runs at batch size = concurrency, or at the ``cycle`` group's
    batch size with its phase breakdown when the record has one. ``model``/``draft`` filter
    (normalised names; baselines have no draft). ``baseline_models``: when given, ``(model, FILE:LINE)``
    of every no-spec record used is appended to it (for checks across files); ``excluded_logs``: when
    given, ``(log, FILE:LINE, model, flag)`` of every record a filter left out that names its server log
    (``cycle.file`` or ``server_log``), so that log is not taken for the chosen model's. ``copies``:
    each record read so far (its JSON, keys sorted) -> ``FILE:LINE``, shared across files: a record
    read before (a copied bench file, a line appended twice) counts once, with a note (helper 101: a
    copy had doubled the runs and narrowed the intervals without a word).

    Raises:
        UsageError: a record that is not a bench record, or records of several models/drafts
            with no filter to choose.
    """
    runs, notes = [], []
    base_runs: dict[int, list[float]] = {}
    workloads: dict[tuple, list[str]] = {}
    setups: dict[str, list[str]] = {}
    seen: dict[tuple[str, str], tuple] = {}
    base_models: list[tuple[Optional[str], str]] = []
    failed: list[str] = []
    copies = {} if copies is None else copies
    again: list[tuple[str, str]] = []
    for i, rec in enumerate(records):
        what = f"{source}:{i + 1}"
        if not isinstance(rec, Mapping) or rec.get("schema") != BENCH_SCHEMA:
            raise UsageError(f"{what}: not an {BENCH_SCHEMA} record")
        first = copies.setdefault(json.dumps(rec, sort_keys=True, default=repr), what)
        if first != what:
            again.append((what, first))
            continue
        status = rec.get("status")
        if not isinstance(status, str):
            raise UsageError(f"{what}.status: expected text (\"ok\" or an error), got {_short(status)}")
        for key in ("model", "draft"):
            if rec.get(key) is not None and not isinstance(rec.get(key), str):
                raise UsageError(f"{what}.{key}: expected a name, got {_short(rec.get(key))}")
        if status != "ok":
            failed.append(f"{what} (steps {_short(rec.get('steps'))}, status {_short(status)})")
            continue
        left_out = "--model" if model and normalise_name(rec.get("model") or "") != normalise_name(model) else None
        steps = None if left_out else _int(rec.get("steps"), f"{what}.steps", minimum=0, maximum=MAX_STEPS)
        if steps and draft and normalise_name(rec.get("draft") or "") != normalise_name(draft):
            left_out = "--draft"   # baselines (steps 0) have no draft
        if left_out:
            if excluded_logs is not None:
                grp = rec.get("cycle") if isinstance(rec.get("cycle"), Mapping) else {}
                for log in (grp.get("file"), rec.get("server_log")):
                    if isinstance(log, str) and log:
                        excluded_logs.append((log, what, rec.get("model"), left_out))
            continue
        bs = _int(rec.get("concurrency"), f"{what}.concurrency", maximum=MAX_BS)
        tok = _tok(rec.get("output_tok_s"), f"{what}.output_tok_s", positive=True)
        key = tuple(v if v is None or isinstance(v, (str, int)) else repr(v)
                    for v in (rec.get("prompt_set_sha256"), rec.get("max_new_tokens")))
        if key != (None, None):   # records that name neither (older sweeps) compare with any
            workloads.setdefault(key, []).append(what)
        run_with = rec.get("settings")
        if isinstance(run_with, Mapping):   # the server arguments and request settings (not the
            # algorithm, which the baseline has none of); records without (older sweeps) compare with any
            setups.setdefault(repr([run_with.get(k) for k in ("server_args", "ignore_eos", "stream")]),
                              []).append(what)
        if steps == 0:
            if tok is None:   # a baseline is its throughput: None had failed the mean below with a TypeError
                raise UsageError(f"{what}.output_tok_s: a no-speculation record (steps 0) with status ok and no "
                                 "throughput (null): not a measured baseline")
            base_runs.setdefault(bs, []).append(tok)
            base_models.append((rec.get("model"), what))
            if baseline_models is not None:
                baseline_models.append((rec.get("model"), what))
            continue
        seen.setdefault(pair_key(rec.get("model"), rec.get("draft")), (rec.get("model"), rec.get("draft")))
        topk = _int(rec.get("topk", 1), f"{what}.topk")
        accept = _num(rec.get("accept_len_mean"), f"{what}.accept_len_mean")
        if accept is not None and not 1.0 <= accept <= steps + 1 + 1e-9:
            raise UsageError(f"{what}: accept_len_mean {accept} impossible with {cm.steps_text(steps)}")
        counts = counts_from_hist(rec.get("accept_hist"), steps, what)
        if topk != 1:
            counts = None
        phases, cycles, from_group = None, None, {}
        concurrency = bs
        grp = rec.get("cycle")
        if grp is not None and not isinstance(grp, Mapping):
            raise UsageError(f"{what}.cycle: expected an object (the run's cycle group) or null, got {_short(grp)}")
        if isinstance(grp, Mapping):
            sub, _, _ = runs_from_inspect({"groups": [grp]}, what, group_label=f"{what}.cycle")
            if sub and sub[0].steps != steps:
                raise UsageError(f"{what}.cycle: a group at {cm.steps_text(sub[0].steps)} in a record at "
                                 f"{cm.steps_text(steps)}: not this run's cycles")
            if sub and sub[0].bs > bs:
                raise UsageError(f"{what}.cycle: batch size {sub[0].bs} above the record's concurrency {bs}: "
                                 "not this run's cycles")
            if sub:
                # the cycle breakdown was measured at the running batch size, which may be below
                # the client concurrency; its noise (cycle-time spread, batch means) is the noise of
                # the record's tok/s too: the decode cycles are where the run's randomness lies
                if sub[0].bs < bs:   # the client's throughput is not that batch size's
                    notes.append(f"{what}: its cycle group ran at bs {sub[0].bs}, below the concurrency {bs}: "
                                 + (f"the group's {sub[0].tok_s:.1f} tok/s stands for the run, not the client's "
                                    f"{tok:.1f}" if sub[0].tok_s else "no measured tok/s at that batch size"))
                    tok = sub[0].tok_s
                bs, phases, cycles = sub[0].bs, sub[0].phases, sub[0].cycles
                counts = counts or sub[0].counts
                from_group = {"total_sd": sub[0].total_sd, "accept_se": sub[0].accept_se, "period_se": sub[0].period_se,
                              "log_file": grp.get("file") if isinstance(grp.get("file"), str) else None,
                              "group_counts": sub[0].counts, "device_spans": sub[0].device_spans,
                              "host_ms": sub[0].host_ms, "prep_ms": sub[0].prep_ms}
        if not from_group.get("log_file") and isinstance(rec.get("server_log"), str):
            from_group["log_file"] = rec["server_log"]   # the run's server log, cycle group or not
        ndt = _int(rec.get("num_draft_tokens"), f"{what}.num_draft_tokens", allow_none=True)
        _check_chain_tokens(topk, steps, ndt, what)
        runs.append(Run(source=what, bs=bs, steps=steps, topk=topk, num_draft_tokens=ndt,
                        cycles=cycles, accept_len=accept, counts=counts, phases=phases, tok_s=tok, **from_group,
                        pair=(rec.get("model"), rec.get("draft")), concurrency=concurrency))
    if again:
        shown = ", ".join(f"{w} = {f}" for w, f in again[:3])
        shown += f", and {len(again) - 3} more" if len(again) > 3 else ""
        notes.append(f"{source}: {len(again)} record{'s' if len(again) > 1 else ''} the same as one read "
                     f"before ({shown}): counted once")
    check_one_pair(seen, base_models, source)
    base = {bs: sum(toks) / len(toks) for bs, toks in base_runs.items()}
    for bs, toks in base_runs.items():
        if len(toks) > 1:   # a sweep re-run appends another baseline; the last one used to win silently
            notes.append(f"{source}: {len(toks)} baselines at concurrency {bs} "
                         f"({', '.join(f'{t:.1f}' for t in toks)} tok/s): their mean {base[bs]:.1f} is used")
    def named(groups: Mapping[str, list[str]]) -> str:
        return "; ".join(f"{k} ({len(w)} record{'s' if len(w) != 1 else ''})" for k, w in groups.items())

    if len(workloads) > 1:   # a client's throughput holds its prompts' prefill and its output length
        kinds = named({f"{sha[:12] if isinstance(sha, str) else sha} x {mnt} max_new_tokens": w
                       for (sha, mnt), w in workloads.items()})
        notes.append(f"{source}: warning: the records ran {len(workloads)} workloads (prompt set x max_new_tokens: "
                     f"{kinds}): their client throughputs, and the depths and baselines they compare, are not "
                     "like for like")
    if len(setups) > 1:   # another TP size, attention backend or request setting is another deployment
        notes.append(f"{source}: warning: the records ran {len(setups)} server settings ([server arguments after "
                     f"--, ignore_eos, stream]: {named(setups)}): the depths and baselines they compare are not like for "
                     "like (choose one setting's records)")
    # the clients' throughput includes prefill and scheduling beside the decode cycles the model
    # predicts, and the no-spec baseline is a client's: say how much, not convert (the share differs
    # between prompt sets and output lengths, which records of one sweep need not share)
    shares = [1.0 - r.tok_s / dec for r in runs
              if base and (dec := decode_tok_s(r)) and r.tok_s and dec != r.tok_s and r.concurrency in base]
    if shares and statistics.median(shares) > 0.005:
        notes.append(f"{source}: the speculative records' clients measured {100.0 * statistics.median(shares):.1f}% "
                     f"below their cycle groups' decode throughput (median of {len(shares)}: prefill, scheduling), "
                     "which the predictions are (the poor-fit checks take the groups' decode; the measured "
                     "column shows the clients'); the no-spec baselines are the clients': speedups read high by "
                     "up to about that share")
    if failed:
        notes.append(f"{source}: {len(failed)} record(s) whose status is not ok left out: "
                     + ", ".join(failed[:3]) + (f" and {len(failed) - 3} more" if len(failed) > 3 else ""))
    return runs, base, notes


def decode_tok_s(r: Run) -> Optional[float]:
    """The decode throughput of ``r``'s own cycles (tok/s): ``1000 bs L / T`` from its accept
    length and cycle period, where a bench record carries its cycle group's phases (its
    ``tok_s`` is the client's, prefill and scheduling included); else ``r.tok_s``."""
    total = r.total_ms() if r.phases else None
    if r.concurrency is not None and total and r.accept_len:
        return 1000.0 * r.bs * r.accept_len / total
    return r.tok_s


# ---------------------------------------------------------------------------------------------
# published tables
# ---------------------------------------------------------------------------------------------


def _is_baseline_name(name: str) -> bool:
    n = normalise_name(name)
    return n.startswith(("without", "wihtout", "noeagle", "nospec", "baseline"))


def _pick(options: Sequence[str], wanted: str, what: str, *, substring: bool = False) -> str:
    exact = [o for o in options if normalise_name(o) == normalise_name(wanted)]
    if len(set(map(normalise_name, exact))) == 1:
        return exact[0]
    if substring and not exact:
        sub = [o for o in options if normalise_name(wanted) in normalise_name(o)]
        if len(set(map(normalise_name, sub))) == 1:
            return sub[0]
    raise UsageError(f"{what} {wanted!r} not found or ambiguous; choose one of: {', '.join(sorted(set(options)))}")


@dataclass
class TableSelection:
    """Rows of one model/benchmark/draft from a published table."""

    model: str
    benchmark: str
    draft: str
    runs: list[Run]
    baseline_tok_s: dict[int, float]
    not_modelled: list[dict]


def runs_from_table(table: Any, model: str, benchmark: str, draft: Optional[str] = None,
                    fit: Optional[Sequence[tuple[int, int, int]]] = None, source: str = "table") -> TableSelection:
    """Select one model/benchmark/draft from a SpecBundle-format table.

    Draft names are matched case- and punctuation-insensitively (a unique substring also
    matches); ``draft`` is required when the benchmark has several drafts. ``fit`` names the
    ``(steps, topk, num_draft_tokens)`` rows the model learns from (default: every topk-1 row);
    other topk-1 rows are held out, topk > 1 rows are listed as not modelled. The baseline is
    the row named "Without EAGLE3" (any spelling starting without/wihtout/no-spec/baseline).

    Raises:
        UsageError: a JSON object with no benchmark holding a ``results`` list (no published table),
            unknown names, malformed rows, one row given twice with different values, or a ``fit`` row
            missing, given twice or with topk > 1.
    """
    if not isinstance(table, Mapping) or not table:
        raise UsageError(f"{source}: expected an object {{model: {{benchmark: {{results: [...]}}}}}}")
    schema = table.get("schema")
    if isinstance(schema, str) and schema.startswith("eagle-cycle-"):
        raise UsageError(f"{source}: an {schema} document, not a published table: give it as an input, "
                         "without --table")
    written = adaptive_written_by(table)
    if written:
        raise UsageError(f"{source}: {written}")
    if not any(isinstance(b, Mapping) and isinstance(b.get("results"), list)
               for m in table.values() if isinstance(m, Mapping) for b in m.values()):
        # another JSON object (a seed document, a config.json): its keys are no models to choose from
        raise UsageError(f"{source}: not a published table (no {{model: {{benchmark: {{results: [...]}}}}}} in it): "
                         "runs (a log, JSONL, an inspect or seed document, bench records) go in as inputs, without --table")
    mkey = _pick(list(table), model, "model")
    benches = table[mkey]
    if not isinstance(benches, Mapping):
        raise UsageError(f"{source}: {mkey}: expected an object of benchmarks")
    bkey = _pick(list(benches), benchmark, "benchmark")
    results = benches[bkey].get("results") if isinstance(benches[bkey], Mapping) else None
    if not isinstance(results, list):
        raise UsageError(f"{source}: {mkey}/{bkey}: no results list")
    if fit:
        dup = next((f for i, f in enumerate(fit) if f in fit[:i]), None)
        if dup is not None:
            raise UsageError(f"--fit {','.join(map(str, dup))} given twice")
    rows = []  # (config, bs, name, tok_s, accept_len)
    seen: dict[tuple, tuple[float, float]] = {}
    for i, r in enumerate(results):
        what = f"{source}: {mkey}/{bkey} results[{i}]"
        if not isinstance(r, Mapping) or not isinstance(r.get("metrics"), list):
            raise UsageError(f"{what}: expected an object with a metrics list")
        cfg = (_int(r.get("steps"), f"{what}.steps", maximum=MAX_STEPS), _int(r.get("topk"), f"{what}.topk"),
               _int(r.get("num_draft_tokens"), f"{what}.num_draft_tokens"))
        bs = _int(r.get("batch_size"), f"{what}.batch_size", maximum=MAX_BS)
        for m in r["metrics"]:
            if not isinstance(m, Mapping) or not isinstance(m.get("Name"), str):
                raise UsageError(f"{what}: metric without a Name")
            if m.get("output_throughput") is None:
                raise UsageError(f"{what}.output_throughput: expected a finite number, got None")
            row = (cfg, bs, m["Name"], _tok(m.get("output_throughput"), f"{what}.output_throughput", positive=True),
                   _num(m.get("accept_length"), f"{what}.accept_length", allow_none=False))
            key = (cfg, bs, normalise_name(m["Name"]))
            if key in seen:
                if seen[key] != row[3:]:
                    raise UsageError(f"{what}: {m['Name']} at steps,topk,tokens {','.join(map(str, cfg))} bs {bs} "
                                     f"given twice with different values ({seen[key][0]} vs {row[3]} tok/s, "
                                     f"accept length {seen[key][1]} vs {row[4]})")
                continue  # an identical repeat adds nothing
            seen[key] = row[3:]
            rows.append(row)
    drafts = sorted({normalise_name(n) for _, _, n, _, _ in rows if not _is_baseline_name(n)})
    display = {normalise_name(n): n for _, _, n, _, _ in rows}
    if not drafts:
        raise UsageError(f"{source}: {mkey}/{bkey} has no draft rows")
    if draft is None:
        if len(drafts) > 1:
            raise UsageError(f"{mkey}/{bkey} has several drafts, choose with --draft: "
                             + ", ".join(display[d] for d in drafts))
        dkey = drafts[0]
    else:
        dkey = normalise_name(_pick([display[d] for d in drafts], draft, "draft", substring=True))
    base: dict[int, float] = {}
    for _, bs, name, tok, _ in rows:
        if _is_baseline_name(name):
            base.setdefault(bs, tok)
    fit_set = set(fit) if fit else None
    configs = {cfg for cfg, _, n, _, _ in rows if normalise_name(n) == dkey}
    if fit_set:
        for cfg in fit_set:
            if cfg[1] != 1:
                raise UsageError(f"--fit {','.join(map(str, cfg))}: topk > 1 (tree drafting) is not modelled")
            if cfg not in configs:
                raise UsageError(f"--fit {','.join(map(str, cfg))}: no such row for {display[dkey]} "
                                 f"(rows: {' '.join(','.join(map(str, c)) for c in sorted(configs))})")
    runs, not_modelled = [], []
    for cfg, bs, name, tok, acc in rows:
        if normalise_name(name) != dkey:
            continue
        steps, topk, ndt = cfg
        if topk != 1:
            not_modelled.append({"steps": steps, "topk": topk, "num_draft_tokens": ndt, "bs": bs,
                                 "measured_tok_s": round(tok, 2), "measured_accept_len": round(acc, 4),
                                 "reason": "tree drafting (topk > 1) is not modelled"})
            continue
        if ndt != steps + 1:
            raise UsageError(f"{source}: row {steps},{topk},{ndt}: with topk 1 num_draft_tokens must be steps + 1")
        if not 1.0 <= acc <= steps + 1 + 1e-9:
            raise UsageError(f"{source}: row {steps},{topk},{ndt}: accept length {acc} impossible")
        runs.append(Run(source=f"{source}: {mkey}/{bkey}/{display[dkey]} {steps},{topk},{ndt}", bs=bs,
                        steps=steps, topk=1, num_draft_tokens=ndt, accept_len=acc, tok_s=tok,
                        fitted=fit_set is None or cfg in fit_set))
    if not any(r.fitted for r in runs):
        raise UsageError(f"{mkey}/{bkey}/{display[dkey]}: no topk-1 row to fit")
    return TableSelection(mkey, bkey, display[dkey], runs, base, not_modelled)


# ---------------------------------------------------------------------------------------------
# target config
# ---------------------------------------------------------------------------------------------

_EXPERT_KEYS = ("n_routed_experts", "num_experts", "num_local_experts")
_TOPK_KEYS = ("num_experts_per_tok", "experts_per_token", "moe_topk")


def shape_from_config(cfg: Mapping) -> tuple[cm.WidthShape, str]:
    """Verify-cost interpolation shape from a target ``config.json`` (wrapped configs too).

    Reads routed experts from ``n_routed_experts`` / ``num_experts`` / ``num_local_experts``
    and experts per token from ``num_experts_per_tok`` / ``experts_per_token``, top level first,
    then ``text_config`` and other text wrappers (Kimi-K2.5). Returns the linear shape for
    dense targets, with a description of what was found.

    Raises:
        UsageError: an expert field that is not an integer (``"384"``, ``384.5``) or is negative, more than
            :data:`MAX_EXPERTS` experts, or more experts per token than experts.
    """
    from .wiring import _is_int, field_values, find_field

    for key in (*_EXPERT_KEYS, *_TOPK_KEYS):
        bad = next(((v, path) for v, path in field_values(cfg, key) if not _is_int(v)), None)
        if bad is not None:
            raise UsageError(f"target config: {bad[1]}={_short(bad[0])} is not an integer")
        neg = next(((v, path) for v, path in field_values(cfg, key) if v < 0), None)
        if neg is not None:
            raise UsageError(f"target config: {neg[1]}={neg[0]} is negative")
    experts = next((f for f in (find_field(cfg, k) for k in _EXPERT_KEYS) if f and f[0] > 1), None)
    topk = next((f for f in (find_field(cfg, k) for k in _TOPK_KEYS) if f and f[0] >= 1), None)
    if experts and experts[0] > MAX_EXPERTS:
        raise UsageError(f"target config: {experts[1]}={_short(experts[0])} is not a plausible expert count "
                         f"(> {MAX_EXPERTS})")
    if experts and topk:
        if topk[0] > experts[0]:
            raise UsageError(f"target config: {topk[1]}={topk[0]} exceeds {experts[1]}={experts[0]}")
        return cm.WidthShape(experts[0], topk[0]), f"MoE target ({experts[1]}={experts[0]}, {topk[1]}={topk[0]})"
    if experts:   # routed experts without experts per token: the MoE shape cannot be drawn (helper 101)
        return cm.LINEAR, (f"{experts[1]}={experts[0]} routed experts but no experts per token "
                           f"({' / '.join(_TOPK_KEYS)}) in the target config: verify cost taken as dense "
                           "(linear in verified tokens); add the field to use the MoE shape")
    if topk:
        return cm.LINEAR, (f"{topk[1]}={topk[0]} experts per token but no routed experts "
                           f"({' / '.join(_EXPERT_KEYS)}) in the target config: verify cost taken as dense "
                           "(linear in verified tokens)")
    return cm.LINEAR, "dense target (no routed experts in its config)"


# ---------------------------------------------------------------------------------------------
# the advisor
# ---------------------------------------------------------------------------------------------


@dataclass
class BatchAdvice:
    """Candidates and the recommendation at one batch size.

    ``adaptive_steps`` is what an adaptive-config bucket of this batch size alone pins: the
    recommended depth, or the fastest depth ``> 0`` when the recommendation is to turn speculation
    off (SGLang's steps 0 still runs draft-extend). Batch sizes that pad to one bucket share the
    depth of the largest of them (:func:`adaptive_config`; the JSON output reports that one).
    """

    bs: int
    candidates: list[cm.Candidate]
    recommendation: cm.Recommendation
    adaptive_steps: int
    decision: Optional[unc.Decision] = None
    #: this batch size's own acceptance, where the batch sizes' disagree (:func:`acceptance_by_bs`)
    acceptance: Optional[cm.AcceptanceModel] = None

    def decision_dict(self) -> dict:
        """``settled``, ``regret_95`` and ``next_run`` (null when settled) for the JSON output."""
        dec = self.decision
        if dec is None:
            return {"settled": None, "regret_95": None, "next_run": None}
        nxt = None
        if dec.next_run is not None and dec.no_run_at_bs:
            nxt = {"steps": dec.next_run, "topk": 1, "num_draft_tokens": dec.next_run + 1, "bs": self.bs,
                   "regret_95_after": None, "useful": True,
                   "why": (f"no run at bs {self.bs}: its figures are carried over from the runs' batch sizes; "
                           f"a run at bs {self.bs} at {cm.steps_text(dec.next_run)} measures them")}
        elif dec.next_run is not None:
            if dec.regret_95_after < dec.regret_95:
                why = (f"a run at {cm.steps_text(dec.next_run)} is expected to cut the pick's 95th-percentile "
                       f"regret from {100 * dec.regret_95:.1f}% to {100 * dec.regret_95_after:.1f}%")
            else:  # the run lowers the mean regret, not its 95th percentile
                why = (f"a run at {cm.steps_text(dec.next_run)} is the most useful one, yet the pick's 95th-percentile "
                       f"regret is expected to stay at {100 * dec.regret_95_after:.1f}% (now {100 * dec.regret_95:.1f}%)")
            if not dec.useful:
                why += (f", cut by less than {100 * unc.MIN_CUT:.0f}% of it: no single run is expected to settle this (the remaining doubt "
                        "lies in the runs' own noise or across several depths at once: longer runs at the contending "
                        "depths narrow it)")
            nxt = {"steps": dec.next_run, "topk": 1, "num_draft_tokens": dec.next_run + 1,
                   "regret_95_after": round(dec.regret_95_after, 4), "useful": dec.useful, "why": why}
        out = {"settled": dec.settled, "regret_95": round(dec.regret_95, 4), "next_run": nxt}
        if dec.regret_95_assumed is not None and dec.doubt_overhead is not None:
            # the settled test weighed larger verify-mode overheads (uncertainty.settle_overhead)
            out["overhead_doubt"] = {
                "max_overhead": round(dec.doubt_overhead, 3),
                "regret_95_within_assumed": round(dec.regret_95_assumed, 4),
                "why": (f"the lowest run's verify lies far above the no-spec decode step, so the settled test also "
                        f"weighs verify-mode overheads up to {100 * dec.doubt_overhead:.0f}% of it, past the "
                        f"0-{100 * unc.VERIFY_MODE_OVERHEAD[1]:.0f}% the predictions take")}
        if _baseline_run_helps(dec):
            # the no-spec decode step here is carried from another batch size's baseline: a no-spec
            # run at this batch size measures it (next_run stays the most useful depth)
            better = baseline_run_first(dec)
            out["baseline_run"] = {
                "bs": self.bs, "regret_95_after": round(dec.baseline_after, 4), "before_next_run": better,
                "why": (f"the no-spec tok/s at bs {self.bs} is carried from another batch size's baseline; a run "
                        f"without --speculative-algorithm at bs {self.bs} (then --baseline-tok-s {self.bs}:TOK_S) is "
                        f"expected to leave a 95th-percentile regret of {100 * dec.baseline_after:.1f}%"
                        + (", less than the depth run would" if better and nxt is not None else ""))}
        return out


def _baseline_run_helps(dec) -> bool:
    """Whether a no-spec run at the batch size (a baseline there) is expected to lower the pick's
    95th-percentile regret (:attr:`uncertainty.Decision.baseline_after`)."""
    return (dec is not None and not dec.settled and dec.baseline_after is not None
            and dec.baseline_after < dec.regret_95 - 1e-4)


def baseline_run_first(dec) -> bool:
    """Whether a no-spec run at the batch size is expected to lower the regret, and more than
    ``dec.next_run`` would (:func:`_baseline_run_helps`)."""
    return _baseline_run_helps(dec) and (dec.next_run is None or dec.regret_95_after is None
                                         or dec.baseline_after < dec.regret_95_after)


@dataclass
class Advice:
    acceptance: cm.AcceptanceModel
    cost: cm.CycleCostModel
    per_bs: list[BatchAdvice]
    primary_bs: int
    measured: dict[tuple[int, int], Run] = field(default_factory=dict)
    runs: list[Run] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    not_modelled: list[dict] = field(default_factory=list)

    @property
    def primary(self) -> BatchAdvice:
        return next(b for b in self.per_bs if b.bs == self.primary_bs)

    def candidate_dict(self, c: cm.Candidate) -> dict:
        d = c.to_dict()
        run = self.measured.get((c.bs, c.steps))
        if c.steps == 0 and c.baseline_tok_s and "baseline" not in c.extrapolated:
            d["measured_tok_s"], d["measured_accept_len"] = round(c.baseline_tok_s, 2), 1.0
        elif run is not None:
            d["measured_tok_s"] = None if run.tok_s is None else round(run.tok_s, 2)
            d["measured_accept_len"] = None if run.accept_len is None else round(run.accept_len, 4)
            d["fitted"] = run.fitted
        else:   # every candidate carries the keys: null where nothing was measured
            d["measured_tok_s"] = d["measured_accept_len"] = None
        return d

    def to_dict(self) -> dict:
        p = self.primary
        max_s = max(c.steps for b in self.per_bs for c in b.candidates)
        return {
            "recommended": p.recommendation.to_dict(),
            **p.decision_dict(),
            "candidates": [self.candidate_dict(c) for c in p.candidates],
            "per_batch_size": [
                {"bs": b.bs, "recommended": b.recommendation.to_dict(), **b.decision_dict(),
                 "adaptive_steps": b.adaptive_steps,
                 "candidates": [self.candidate_dict(c) for c in b.candidates],
                 **({"acceptance": b.acceptance.to_dict(max_s)} if b.acceptance is not None else {})}
                for b in self.per_bs
            ],
            "inputs": {
                "acceptance": self.acceptance.to_dict(max_s),
                "cycle_model": self.cost.to_dict(),
                "runs": [{"source": r.source, "bs": r.bs, "steps": r.steps, "topk": r.topk,
                          "cycles": r.cycles, "accept_len": r.accept_len, "tok_s": r.tok_s,
                          "total_ms": None if r.total_ms() is None else round(r.total_ms(), 4),
                          "per_request_counts": r.counts is not None, "fitted": r.fitted,
                          "device_spans": r.device_spans,
                          "host_ms": None if r.host_ms is None else round(r.host_ms, 4),
                          "tok_s_se": None if r.tok_s_se is None else round(r.tok_s_se, 4),
                          "batch_se": None if r.accept_se is None and r.period_se is None else
                          {"accept_len": r.accept_se, "period_ms": r.period_se,
                           "dispersion": round(r.accept_dispersion(), 3)}}
                         for r in self.runs],
                "not_modelled": self.not_modelled,
                "notes": self.notes,
            },
        }


#: a pooled acceptance dispersion from this factor up is named in the notes
DISPERSION_NOTE = 1.5


def _summed_counts(runs: Sequence[Run]) -> list[list[int]]:
    """Per-position ``[accepted, reached]`` summed over ``runs`` (each with ``counts``), as deep as the deepest."""
    total = [[0, 0] for _ in range(max(len(r.counts) for r in runs))]
    for r in runs:
        for j, (a, n) in enumerate(r.counts):
            total[j][0] += a
            total[j][1] += n
    return total


def chi2_sf(x: float, k: int) -> float:
    """Survival function ``P(X >= x)`` of the chi-square distribution with ``k`` degrees of freedom
    (an integer ``>= 1``), in closed form: the regularized upper incomplete gamma ``Q(k / 2, x / 2)``
    summed by its recurrence ``Q(a + 1, y) = Q(a, y) + y^a e^-y / Gamma(a + 1)`` from ``Q(1, y) =
    e^-y`` (even ``k``) or ``Q(1/2, y) = erfc(sqrt(y))`` (odd ``k``) (Abramowitz and Stegun 26.4.4-5).
    Each term is taken in logarithms, so a large ``x`` or ``k`` neither overflows nor loses the sum.
    Agrees with ``scipy.stats.chi2.sf`` to about 1e-12 relative, without importing ``scipy.stats``
    (about 1.3 s of an advise call on 2 cores).

    NaN for a NaN ``x`` (no test result: nothing compares below it), 0.0 for an infinite one.

    Raises:
        ValueError: ``k`` below 1.
    """
    if k < 1:
        raise ValueError(f"chi-square degrees of freedom must be >= 1, not {k}")
    if math.isnan(x):
        return math.nan
    if x <= 0.0:
        return 1.0
    if math.isinf(x):
        return 0.0
    y = 0.5 * x
    log_y = math.log(y)
    a = 1.0 if k % 2 == 0 else 0.5
    total = math.exp(-y) if k % 2 == 0 else math.erfc(math.sqrt(y))   # Q(a, y)
    for j in range(k // 2 - (k % 2 == 0)):   # Q(a + j + 1) = Q(a + j) + y^(a + j) e^-y / Gamma(a + j + 1)
        total += math.exp((a + j) * log_y - y - math.lgamma(a + j + 1.0))
    return min(1.0, total)


def _cochran_term(rows: Sequence[tuple[float, float]]) -> Optional[tuple[float, float]]:
    """``(Q, pooled rate)`` of the ``(accepted, reached)`` rows of one position: the rows' squared
    deviations from the pooled rate over its binomial variance (Cochran's ``Q``, ``len(rows) - 1``
    degrees of freedom); None with fewer than two rows or a pooled rate of 0 or 1."""
    if len(rows) < 2:
        return None
    pbar = sum(a for a, _ in rows) / sum(n for _, n in rows)
    v = pbar * (1.0 - pbar)
    if v <= 0.0:
        return None
    return sum((a / n - pbar) ** 2 * n / v for a, n in rows), pbar


def _pooled_dispersion(counted: Sequence[Run]) -> tuple[float, float]:
    """``(dispersion, between)`` of the pooled per-position counts of ``counted`` (runs with counts).

    Within runs: each run's request-cycles weigh ``1 / dispersion`` (:meth:`Run.accept_dispersion`),
    so the pooled factor is the ``reached``-weighted harmonic mean. Between runs: at the positions
    two runs or more reached, Cochran's ``Q`` of the runs' rates about their pooled rate, each with
    its own (dispersed) binomial variance, over its degrees of freedom is the multiplicative
    heterogeneity ``H^2`` (Higgins and Thompson, Stat. Med. 21 (2002) 1539, eq. 6); ``between`` is
    ``max(1, H^2)`` and multiplies the dispersion: runs whose request mixes differ more than their
    noise say so. 1 with one run."""
    n1 = [float(r.counts[0][1]) for r in counted]
    phi = [r.accept_dispersion() for r in counted]
    eff = sum(n / f for n, f in zip(n1, phi))
    within = sum(n1) / eff if eff > 0 else 1.0
    q = df = 0.0
    depth = max(len(r.counts) for r in counted)
    for j in range(depth):
        rows = [(a / f, n / f) for r, f in zip(counted, phi) if j < len(r.counts)
                for a, n in [r.counts[j]] if n > 0]
        term = _cochran_term(rows)
        if term is not None:
            q += term[0]
            df += len(rows) - 1
    between = max(1.0, q / df) if df else 1.0
    return within * between, between


def _effective_samples(r: Run) -> Optional[int]:
    """Request-cycles behind ``r``'s mean accept length (``bs * cycles``), fewer when batch means
    show a larger standard error than independent request-cycles would: ``var / accept_se^2`` with
    ``var`` the Bhatia-Davis bound ``(m - 1)(steps + 1 - m)`` on the variance of an accept length of
    mean ``m`` (Bhatia and Davis, Amer. Math. Monthly 107 (2000) 353), so the count shrinks no
    more than the standard error demands. None without a cycle count."""
    if not r.cycles:
        return None
    n = r.cycles * r.bs
    if r.accept_se and r.accept_len:
        n = min(n, max(1, int(_accept_len_var_bound(r) / r.accept_se ** 2)))
    return n


def _accept_len_var_bound(r: Run) -> float:
    """The Bhatia-Davis bound ``(m - 1)(steps + 1 - m)`` on the variance of an accept length of mean
    ``m`` (``r.accept_len``) in ``1..steps + 1`` (tokens^2, at least 1e-9)."""
    return max((r.accept_len - 1.0) * (r.steps + 1.0 - r.accept_len), 1e-9)


def broken_draft_notes(runs: Sequence[Run]) -> list[str]:
    """Warnings for runs whose acceptance says the draft is broken, as ``inspect``'s findings do
    (:func:`report.group_findings`): a mean accept length at or below
    :data:`report.STUCK_ACCEPT_LEN` (practically no draft token accepted: wrong aux-layer wiring
    accepted 1.12 in the seed deployment), or every request accepting every draft token (no real
    draft is that good: NaN/inf logits make verification accept anything). The advice still takes
    such a run at face value; the warning says it should not be trusted until the draft is fixed.
    Where the request-cycles behind the mean are known, both take :data:`report.MIN_REQUESTS` of them
    (one cycle of accept length 1 is no finding in ``inspect``, and was one here)."""
    from .report import MIN_REQUESTS, STUCK_ACCEPT_LEN

    out = []
    for r in runs:
        if r.steps < 1 or r.accept_len is None:
            continue
        where = f"{r.source} ({cm.steps_text(r.steps)}, bs {r.bs})"
        # request-cycles behind the mean, where known: fewer than inspect's MIN_REQUESTS say nothing
        seen = r.counts[0][1] if r.counts else (r.cycles * r.bs if r.cycles else None)
        if r.accept_len <= STUCK_ACCEPT_LEN and (seen is None or seen >= MIN_REQUESTS):
            out.append(f"{where}: the draft looks broken: mean accept length {r.accept_len:.2f}, practically no "
                       "draft token accepted (its aux-layer wiring? run `eagle-cycle wiring TARGET DRAFT`); the "
                       "advice takes this acceptance at face value")
            continue
        if r.topk != 1:
            continue
        full = r.steps + 1 if r.num_draft_tokens is None else min(r.num_draft_tokens, r.steps + 1)
        if r.counts:
            every = len(r.counts) >= r.steps and r.counts[0][1] >= MIN_REQUESTS and all(
                a == n for a, n in r.counts[:r.steps])
        else:
            every = r.accept_len >= full - 1e-9
        if every:
            out.append(f"{where}: the draft looks broken: every request accepted every draft token (accept length "
                       f"{full}), which no real draft does; suspect NaN/inf logits in the target or the draft, which "
                       "make verification accept anything; the advice takes this acceptance at face value")
    return out


def unreachable_means(runs: Sequence[Run]) -> list[tuple[Run, float, float]]:
    """Runs without per-request counts, deeper than every position the counted runs of ``runs``
    reached, whose mean accept length those positions cannot give at their depth: ``[(run, low,
    high)]``, the range from nothing to every draft past them accepted (tokens), widened by
    :data:`SPLIT_MIN_REL` and :data:`SPLIT_Z` standard errors of the mean (the Bhatia-Davis bound over
    its request-cycles) before a run counts. Another workload or draft: it sets no acceptance and
    overrules no prediction."""
    counted = [r for r in runs if r.counts]
    if not counted:
        return []
    total = _summed_counts(counted)
    depth = max((j + 1 for j, (_a, n) in enumerate(total) if n > 0), default=0)
    rates = [a / n if n else 0.0 for a, n in total[:depth]]
    out = []
    for r in runs:
        if r.counts or r.accept_len is None or r.steps <= depth:
            continue
        low = cm.expected_accept_len(rates)
        high = cm.expected_accept_len(rates + [1.0] * (r.steps - depth))
        n = _effective_samples(r)
        margin = SPLIT_Z * math.sqrt(_accept_len_var_bound(r) / n) if n else 0.0
        if not low * (1.0 - SPLIT_MIN_REL) - margin <= r.accept_len <= high * (1.0 + SPLIT_MIN_REL) + margin:
            out.append((r, low, high))
    return out


def build_acceptance(runs: Sequence[Run]) -> tuple[cm.AcceptanceModel, list[str]]:
    """Acceptance from per-position counts when any run has them (summed), else from means.

    Raises:
        UsageError: no run with counts or a mean accept length.
    """
    notes = []
    counted = [r for r in runs if r.counts]
    if counted:
        total = _summed_counts(counted)
        depth = max((j + 1 for j, (_a, n) in enumerate(total) if n > 0), default=0)
        # a run without counts deeper than every counted position says how acceptance goes on past
        # them (its mean accept length); one at a counted depth adds nothing the counts lack
        odd = unreachable_means(runs)
        for r, low, high in odd:
            notes.append(f"{r.source}: mean accept length {r.accept_len:.2f} at {cm.steps_text(r.steps)} is "
                         f"beyond what the counted positions allow there ({low:.2f}-{high:.2f}: none to every "
                         f"draft past position {depth} accepted): another workload or draft? Not used for "
                         "acceptance, nor to overrule the model")
        left_out = {id(r) for r, _low, _high in odd}
        deeper = [r for r in runs if not r.counts and r.accept_len is not None and r.steps > depth
                  and id(r) not in left_out]
        beyond = [cm.MeanPoint(r.steps, r.accept_len, _effective_samples(r)) for r in deeper]
        if any(b.samples is None for b in beyond):
            beyond = [cm.MeanPoint(b.steps, b.accept_len, None) for b in beyond]
        if deeper:
            notes.append(f"acceptance past position {depth} (the deepest counted) from the mean accept length of "
                         f"{len(deeper)} run(s) without per-request accept lengths at "
                         f"{cm.span_text({r.steps for r in deeper})} steps")
        shallow = sum(1 for r in runs if not r.counts and r.accept_len is not None and r.steps <= depth)
        if shallow:
            notes.append(f"{shallow} run(s) without per-request accept lengths not used for acceptance (no deeper "
                         "than the counted positions)")
        dispersion, between = _pooled_dispersion(counted)
        if dispersion >= DISPERSION_NOTE:
            notes.append(f"acceptance varies {dispersion:.1f}x more than independent request-cycles would ("
                         + ("between the runs, beyond each run's own noise" if between > 1.0 else
                            "batch means over the cycle sequence: requests that stay easy or hard")
                         + "); its intervals count that many times fewer samples")
        try:
            return cm.AcceptanceModel.from_counts([tuple(t) for t in total], dispersion=dispersion,
                                                  beyond=beyond), notes
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    points = [cm.MeanPoint(r.steps, r.accept_len, _effective_samples(r))
              for r in runs if r.accept_len is not None]
    if not points:
        raise UsageError("no accept length in the inputs: nothing to model acceptance from")
    if any(p.samples is None for p in points) and any(p.samples for p in points):
        points = [cm.MeanPoint(p.steps, p.accept_len, None) for p in points]
    try:
        return cm.AcceptanceModel.from_means(points), notes
    except ValueError as exc:
        raise UsageError(str(exc)) from None


#: acceptance is split by batch size only when some batch size's rates differ by at least this much
#: (absolute, averaged over the shared positions by its reached counts) from the pooled rates, as well
#: as beyond their noise
SPLIT_MIN_GAP = 0.05
#: ... and when the homogeneity test's p-value is below this
SPLIT_P = 1e-3
#: a mean-only run splits when its mean accept length is this many standard errors (two-sided
#: p 0.001) ...
SPLIT_Z = 3.29
#: ... and this share or more off what the counted runs' acceptance gives at its depth
SPLIT_MIN_REL = 0.03
#: in the split test, the least dispersion of runs that saw few requests (:func:`_split_floor`)
SPLIT_UNKNOWN_DISPERSION = 4.0
#: request-cycles below which runs count as having seen few requests: 16 requests of about 200 cycles
#: (a 512-token answer at an accept length near 2.5)
SPLIT_MIN_REQUEST_CYCLES = 3200


def _split_floor(runs: Sequence[Run]) -> float:
    """The least dispersion :func:`acceptance_by_bs` gives ``runs``: :data:`SPLIT_UNKNOWN_DISPERSION`
    when together they hold fewer than :data:`SPLIT_MIN_REQUEST_CYCLES` request-cycles or one has no
    cycle count or batch-means estimate, else 1."""
    if any(not r.cycles or r.accept_se is None for r in runs) or \
            sum(r.bs * r.cycles for r in runs) < SPLIT_MIN_REQUEST_CYCLES:
        return SPLIT_UNKNOWN_DISPERSION
    return 1.0


def _expected_se(acc: cm.AcceptanceModel, steps: int) -> float:
    """Standard error of the mean accept length at ``steps`` (tokens) under ``acc``'s measured
    positions (``steps`` at most their depth): the delta method over independent per-position
    binomial rates, each over ``reached / dispersion`` samples; ``dE/dp_k = sum_{j>=k} prod_{i<=j}
    p_i / p_k`` for ``E = 1 + sum_j prod_{i<=j} p_i``. (The interval of :meth:`AcceptanceModel.expected`
    puts every position at its bound together, about 1.5x wider.)"""
    pos = [q for q in acc.measured[:steps] if q.reached]
    prods = list(itertools.accumulate((q.p for q in pos), lambda a, b: a * b))
    var = 0.0
    for k, q in enumerate(pos):
        if 0.0 < q.p < 1.0:
            d = sum(prods[k:]) / q.p
            var += d * d * q.p * (1.0 - q.p) / (q.reached / acc.dispersion)
    return math.sqrt(var)


def acceptance_by_bs(runs: Sequence[Run]) -> tuple[dict[int, cm.AcceptanceModel], list[str]]:
    """Acceptance per batch size, where runs at different batch sizes disagree (else ``{}``).

    One draft on one workload accepts alike at every batch size, so :func:`build_acceptance` pools
    every run. Runs of different workloads (or sampling settings) in one log do not: pooled, the
    larger batch's request-cycles set every batch size's acceptance. Two tests, either of which splits:

    * batch sizes with per-position counts: at the positions two of them or more reached, Cochran's
      ``Q`` of their rates about the pooled rate (each batch size's counts weighed by
      ``1 / dispersion``, :func:`_pooled_dispersion` over its own runs) against chi-square with
      ``sum(groups - 1)`` degrees of freedom (Cochran, Biometrics 10 (1954) 101), ``p <``
      :data:`SPLIT_P`, and some batch size's rates off the pooled ones by :data:`SPLIT_MIN_GAP` or more
      on average over those positions (weighed by its reached counts: one noisy position does not split);
    * a batch size whose runs carry a mean accept length only (no counts, which pooling then ignores):
      a run's mean off what the counted runs' acceptance gives at its depth (one they reached) by more
      than :data:`SPLIT_Z` standard errors of the difference (the run's batch-means one, else the
      Bhatia-Davis bound over its request-cycles, :func:`_effective_samples`, with the counted
      acceptance's own, :func:`_expected_se`) and by :data:`SPLIT_MIN_REL` of it or more.

    Runs that saw few requests count with a dispersion of at least :data:`SPLIT_UNKNOWN_DISPERSION` in
    both tests (:func:`_split_floor`): a request stays easy or hard for its hundreds of cycles, and
    batch means over a run of a few requests cannot see it (a helper's one-workload runs of 100-300
    cycles at bs 1-2 split in 2-6 of 48 worlds).

    Then each batch size with runs gets an acceptance from its own runs alone.

    Args:
        runs: fitted chain-drafting runs, any batch sizes.

    Returns:
        ``({bs: acceptance}, notes)``: empty when the batch sizes agree, or when fewer than two have runs.
    """
    groups: dict[int, list[Run]] = {}
    for r in runs:
        if r.counts or r.accept_len is not None:
            groups.setdefault(r.bs, []).append(r)
    if len(groups) < 2:
        return {}, []
    counted = {bs: [r for r in rs if r.counts] for bs, rs in groups.items()}
    counted = {bs: rs for bs, rs in counted.items() if rs}
    why = None
    if len(counted) >= 2:
        pooled = {bs: (_summed_counts(rs), max(_pooled_dispersion(rs)[0], _split_floor(rs))) for bs, rs in counted.items()}
        q = df = 0.0
        dev = {bs: [0.0, 0.0] for bs in pooled}    # reached-weighted sum of (rate - pooled rate), weight
        first = None
        for j in range(max(len(t) for t, _ in pooled.values())):
            rows = [(bs, a / f, n / f) for bs, (t, f) in pooled.items() if j < len(t) for a, n in [t[j]] if n > 0]
            term = _cochran_term([(a, n) for _, a, n in rows])
            if term is None:
                continue
            q += term[0]
            df += len(rows) - 1
            for bs, a, n in rows:
                dev[bs][0] += n * (a / n - term[1])
                dev[bs][1] += n
            first = first or (j, rows)
        if df:
            p = chi2_sf(q, int(round(df)))
            gap = max(abs(d / w) for d, w in dev.values() if w > 0)
            if p < SPLIT_P and gap >= SPLIT_MIN_GAP:
                j, rows = first
                rates = ", ".join(f"{a / n:.2f} at bs {bs}" for bs, a, n in sorted(rows))
                why = f"position {j + 1}: {rates}; chi-square p {'< 1e-12' if p < 1e-12 else f'= {p:.2g}'}"
    if why is None and counted:
        ref_runs = [r for rs in counted.values() for r in rs]
        ref = build_acceptance(ref_runs)[0]
        ref_scale = math.sqrt(max(1.0, _split_floor(ref_runs) / ref.dispersion))
        # the depth the counted runs ran at, not their observed depth: positions none reached are
        # dropped from the counts (a position accepted 0 times leaves the next unreached), yet the
        # mean accept length there is measured all the same
        ref_depth = max(r.steps for r in ref_runs)
        for bs, rs in sorted(groups.items()):
            if bs in counted:
                continue
            for r in rs:
                n = _effective_samples(r)
                if r.accept_len is None or (r.accept_se is None and not n) or r.steps > ref_depth:
                    continue   # no noise estimate, or a depth no counted run ran at (extrapolated)
                e = ref.expected(r.steps)[0]
                se = r.accept_se or math.sqrt(_accept_len_var_bound(r) / n)
                se = math.hypot(se * math.sqrt(_split_floor([r])), ref_scale * _expected_se(ref, r.steps))
                if abs(r.accept_len - e) > SPLIT_Z * se and abs(r.accept_len - e) >= SPLIT_MIN_REL * e:
                    why = (f"bs {bs} measured a mean accept length of {r.accept_len:.2f} at {cm.steps_text(r.steps)}, "
                           f"the per-position counts of bs {', '.join(map(str, sorted(counted)))} give {e:.2f}")
                    break
            if why is not None:
                break
    if why is None:
        return {}, []
    notes = [f"acceptance differs between batch sizes beyond its noise ({why}): each batch size's runs make its "
             "own acceptance (different workloads or sampling settings in these inputs?); a batch size no run "
             "measured takes all runs'"]
    split = {}
    for bs, rs in sorted(groups.items()):
        split[bs], more = build_acceptance(rs)
        notes += [f"bs {bs}: {n}" for n in more]
    return split, notes


def advise(runs: Sequence[Run], baseline_tok_s: Mapping[int, float], *, steps: Sequence[int],
           batch_sizes: Optional[Sequence[int]] = None, shape: cm.WidthShape = cm.LINEAR,
           notes: Sequence[str] = (), not_modelled: Sequence[dict] = ()) -> Advice:
    """Fit the models to the fitted topk-1 runs and rank ``steps`` at every batch size.

    Args:
        runs: measured runs; topk > 1 runs are listed as not modelled, unfitted ones are shown
            beside their predictions.
        baseline_tok_s: no-spec output tok/s by batch size (may be empty: no speedups then).
        steps: candidate depths (0 = speculation off, considered whenever a baseline is known).
        batch_sizes: where to predict; default the batch sizes of the fitted runs.
        shape: verify-cost interpolation shape (:func:`shape_from_config`).

    Raises:
        UsageError: nothing to fit; or cycle-line runs of both timing kinds (device-span lines,
            which carry ``draft_prep_ms``, and older lines, whose ``draft_ms`` ran from the cycle's
            start): their phase times mean different things and are never fitted together.
    """
    kinds = {r.device_spans for r in runs if r.device_spans is not None}
    if len(kinds) > 1:
        old = next(r.source for r in runs if r.device_spans is False)
        new = next(r.source for r in runs if r.device_spans)
        raise UsageError(f"the inputs mix device-span cycle lines ({new}: with draft_prep_ms) and older ones "
                         f"({old}: draft_ms from the cycle's start); their phase times mean different "
                         "things: advise one kind at a time")
    notes, not_modelled = list(notes), list(not_modelled)
    runs, more = _distinct_runs(runs)
    notes += more
    hosts = [r.host_ms for r in runs if r.fitted and r.host_ms is not None]
    if hosts:
        span = f"{min(hosts):.2f}" if f"{min(hosts):.2f}" == f"{max(hosts):.2f}" else f"{min(hosts):.2f}-{max(hosts):.2f}"
        notes.append(f"host preparation + idle gap (draft_prep_ms + gap_ms): {span} ms "
                     "per cycle, counted as a depth-independent cost beside the device spans")
    modelled = []
    for r in runs:
        if r.topk != 1:
            not_modelled.append({"steps": r.steps, "topk": r.topk, "num_draft_tokens": r.num_draft_tokens,
                                 "bs": r.bs, "source": r.source,
                                 "reason": "tree drafting (topk > 1) is not modelled"})
        else:
            modelled.append(r)
    fitted = [r for r in modelled if r.fitted]
    if not fitted:
        raise UsageError("no chain-drafting (topk 1) run to learn from" +
                         (" (tree drafting, topk > 1, is not modelled)" if not_modelled else ""))
    acc, more = build_acceptance(fitted)
    acc_at, split_notes = acceptance_by_bs(fitted)
    # split: each batch size's own acceptance notes (prefixed with it) replace the pooled one's
    notes += split_notes if acc_at else more
    obs = [o for o in (r.observation() for r in fitted) if o is not None]
    if not obs:
        raise UsageError("no cycle time in the inputs (need phase times, or accept length with tok/s)")
    try:
        cost = cm.CycleCostModel.fit(obs, baseline_tok_s, shape)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    for b, ms in sorted(cost.baseline_ms.items()):
        if b in cost.unanchored:
            notes.append(f"bs {b}: the no-spec baseline ({1000.0 * b / ms:.1f} tok/s, {ms:.2f} ms a step) is slower "
                         f"than a speculative cycle measured there ({cost.step_ceiling[b]:.2f} ms, which holds a verify "
                         "forward over more tokens): a baseline from another setup or load, or a client's throughput "
                         "with its prefill? Speedups there read high, and the cost curves leave it out (a decode step "
                         "slower than a measured cycle bounds no verify there): it is the speculation-off figure alone")
    sizes = sorted(set(batch_sizes or [r.bs for r in fitted]))
    run_bs = sorted({r.bs for r in fitted})
    # the runs the cycle-time curves pass through (phase-timed ones, where any run has phases)
    cost_runs = [r for r in fitted if (o := r.observation()) is not None
                 and (cost.mode != "phases" or o.has_phases)]
    primary, why_primary = primary_batch_size(cost_runs or fitted, sizes, asked=bool(batch_sizes))
    if why_primary:
        notes.append(why_primary)
    per_bs = []
    noisy_misses: list[str] = []
    z_fit = fit_z(sum(1 for r in fitted if r.tok_s and r.bs in sizes))
    counted = [r for r in fitted if r.counts]
    between = _pooled_dispersion(counted)[1] if counted else 1.0
    for bs in sizes:
        try:
            a = acc_at.get(bs, acc)
            if cost.baseline_ms and cost.baseline_step_ms(bs) is None:
                notes.append(f"bs {bs}: no no-spec decode step: carried there from the baselines (or the verify "
                             f"curve) it reaches no positive time, so speculation off is not among its candidates "
                             f"(give --baseline-tok-s {bs}:TOK_S)")
            cands = cm.predict_candidates(a, cost, bs, steps)
            if not any(c.steps > 0 for c in cands):
                raise UsageError("no candidate depth above 0 (check --steps-candidates / --max-steps)")
            ens = unc.build(a, cost, obs, bs, [c.steps for c in cands],
                            draft_fixed_share=0.0 if any(r.device_spans for r in fitted) else unc.DRAFT_FIXED_SHARE)
            cands = _from_ensemble(cands, ens)
            dec = unc.decide(ens, measured=[r.steps for r in fitted if r.bs == bs])
            # the runs that may overrule the model here: not one whose mean accept length the counted
            # positions cannot give (another workload or draft)
            odd = {id(r) for r, _lo, _hi in unreachable_means([r for r in fitted if acc_at.get(r.bs, acc) is a])}
            here = [r for r in fitted if r.bs == bs and id(r) not in odd]
            won = _measured_winner(dec.pick, here, [c.steps for c in cands], a)
            # measured depths the model misses beyond their noise (the poor fits the notes name) weigh
            # in the decision as measured, whoever picks: a 1-step run measured 15% below its
            # prediction had left 3 steps "not settled" at a 9.3% regret (helper 44)
            missed = _missed_measurements(cands, here, a, z_fit)
            # where a measurement wins, the decision (regret, settled, next run) weighs the measured
            # figures at those depths, not the curves that missed them
            measured_pick = None
            if won is not None:
                winner, loser, gap, se_w, se_l = won
                notes.append(f"bs {bs}: {cm.steps_text(winner.steps)} measured {winner.tok_s:.1f} tok/s, "
                             f"{gap:.1f} standard errors above the {loser.tok_s:.1f} measured at "
                             f"{cm.steps_text(loser.steps)}, which the model ranked first: the measurement wins")
                measured_pick = (winner.tok_s, se_w, f"{cm.steps_text(loser.steps)}, its first, measured "
                                 f"{loser.tok_s:.1f}", _noise_words([r for r in here if r.steps == winner.steps]))
                dec = unc.decide(unc.with_measurements(ens, {**missed, winner.steps: (winner.tok_s, se_w),
                                                             loser.steps: (loser.tok_s, se_l)}),
                                 measured=[r.steps for r in fitted if r.bs == bs], pick=winner.steps)
            else:
                # runs no cycle-time curve passes through (whole-cycle ones beside phase-timed ones)
                unshaped = [r for r in here if not any(r is c for c in cost_runs)]
                over = _measured_over_prediction(dec.pick, cands, here, a, unshaped)
                if over is not None:
                    r, pred, z, se_r = over
                    notes.append(f"bs {bs}: {cm.steps_text(r.steps)} measured {r.tok_s:.1f} tok/s, {z:.1f} of its "
                                 f"standard errors above the {pred:.1f} predicted for {cm.steps_text(dec.pick)}, "
                                 "the model's first (the model misses that measurement: "
                                 f"{next(c.tok_s for c in cands if c.steps == r.steps):.1f} predicted there): "
                                 "the measurement wins")
                    measured_pick = (r.tok_s, se_r, f"it predicted {pred:.1f} for {cm.steps_text(dec.pick)}, its first",
                                     _noise_words([x for x in here if x.steps == r.steps]))
                    dec = unc.decide(unc.with_measurements(ens, {**missed, r.steps: (r.tok_s, se_r)}),
                                     measured=[r.steps for r in fitted if r.bs == bs], pick=r.steps)
            base_tok = next((c.baseline_tok_s for c in cands if c.baseline_tok_s), None)
            below = _measured_below_baseline(dec.pick, here, a, base_tok) if measured_pick is None else None
            if below is not None:
                r, z, se_r = below
                notes.append(f"bs {bs}: {cm.steps_text(r.steps)}, the model's first, measured {r.tok_s:.1f} tok/s, "
                             f"{z:.1f} of its standard errors below the no-spec {base_tok:.1f} tok/s: the measurement wins "
                             f"(the model predicted {next(c.tok_s for c in cands if c.steps == r.steps):.1f} there)")
                measured_pick = (r.tok_s, se_r, f"{cm.steps_text(r.steps)}, the model's first", "")
                dec = unc.decide(unc.with_measurements(ens, {**missed, r.steps: (r.tok_s, se_r)}),
                                 measured=[x.steps for x in fitted if x.bs == bs], pick=0)
            missed.pop(dec.pick, None)
            if measured_pick is None and missed:   # the model's pick kept
                dec = unc.decide(unc.with_measurements(ens, missed),
                                 measured=[x.steps for x in fitted if x.bs == bs], pick=dec.pick)
            if bs not in run_bs:
                dec = unc.unmeasured_batch(dec, cm.best_speculative(cands).steps)
            rec = _recommend(cands, dec, ens, run_bs, measured_pick)
            poor, within = _fit_notes(cands, [r for r in fitted if r.bs == bs], a, z_fit)
            notes += poor
            if between >= DISPERSION_NOTE:
                told, named = _disagreement_note(bs, cands, here, a, z_fit)
                notes += told
                # a miss the runs' disagreement explains is not "the run's scatter"
                within = [w for w in within if not any(w == f"{cm.steps_text(s)} at bs {bs}" for s in named)]
            noisy_misses += within
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        # the adaptive config pins the recommended depth (a measurement that won over the model
        # included); with speculation off, the fastest depth (SGLang's steps 0 still drafts)
        pinned = rec.steps if rec.steps > 0 else cm.best_speculative(cands).steps
        per_bs.append(BatchAdvice(bs, cands, rec, pinned, dec, acc_at.get(bs)))
    if noisy_misses:
        shown = ", ".join(noisy_misses[:6]) + (f" and {len(noisy_misses) - 6} more" if len(noisy_misses) > 6 else "")
        notes.append(f"the measurement lies outside the prediction's 95% interval, but within its own noise ({z_fit:.2f} "
                     f"of its standard errors, for {sum(1 for r in fitted if r.tok_s and r.bs in sizes)} measured runs: "
                     f"a run of few cycles or requests), at {shown}: the run's scatter, not a misfit")
    at_depth: dict[tuple[int, int], list[Run]] = {}
    for r in modelled:
        at_depth.setdefault((r.bs, r.steps), []).append(r)
    # several runs at one depth show their pooled figures (the last one's had been shown)
    measured = {k: (pooled_runs([r for r in rs if r.tok_s])[0] if any(r.tok_s for r in rs) else rs[0])
                for k, rs in at_depth.items()}
    return Advice(acc, cost, per_bs, primary, measured, list(modelled), notes, not_modelled)


#: decode batches behind one stock ``Decode batch`` line: SGLang's ``--decode-log-interval`` default
#: (a server started with another value weighs its stock runs off by that ratio, which matters only
#: where stock and plugin runs at different batch sizes are compared: :func:`primary_batch_size`)
STOCK_INTERVAL_BATCHES = 40


def primary_batch_size(runs: Sequence[Run], sizes: Sequence[int], asked: bool = False
                       ) -> tuple[int, Optional[str]]:
    """The batch size the top-level answer is for (``settled``, ``next_run``, the ``launch:`` line).

    ``runs``: those the cycle-time curves pass through; ``sizes``: the advised batch sizes,
    ``asked`` when ``--batch-sizes`` named them: then the smallest of them a run measured (the
    smallest of them where none did).

    Otherwise the middle of the measured decode load: the batch size at or below which half the
    request-cycles ran (``cycles x bs`` per run; a stock Decode batch line counts as
    :data:`STOCK_INTERVAL_BATCHES` cycles, a run without a count, a table row or a bench record
    without its cycle group, as none; without any count, the smallest measured batch size). A
    serving log holds a few cycles at every batch size of the ramp as clients connect and of the
    drain as they finish, and a plateau that wanders over a range of batch sizes splits its cycles
    between them: the smallest batch size (or the one with the most cycles) can be a drain's tail.

    Returns:
        ``(bs, note)``: ``note`` says why, where several batch sizes are advised (else None).
    """
    measured = sorted({r.bs for r in runs if r.bs in sizes})
    if asked or not measured:
        return (measured[0] if measured else min(sizes)), None
    load: dict[int, float] = {}
    stock = False
    for r in runs:
        if r.bs in sizes:
            n = r.cycles if r.cycles is not None else (r.intervals or 0) * STOCK_INTERVAL_BATCHES
            stock = stock or (r.cycles is None and bool(r.intervals))
            load[r.bs] = load.get(r.bs, 0.0) + n * r.bs
    total = sum(load.values())
    if total <= 0:
        return measured[0], None
    below = 0.0
    for bs in measured:
        if below + load.get(bs, 0.0) >= total / 2.0:
            break
        below += load.get(bs, 0.0)
    if len(sizes) == 1:
        return bs, None
    at = load.get(bs, 0.0)
    each = f"; a stock Decode batch line counts as {STOCK_INTERVAL_BATCHES} cycles" if stock else ""
    return bs, (f"the top-level answer (settled, next_run, the launch line) is for bs {bs}, the middle of the "
                f"measured decode load (request-cycles: {100.0 * below / total:.0f}% at smaller batch sizes, "
                f"{100.0 * at / total:.0f}% at bs {bs}, {100.0 * (total - below - at) / total:.0f}% at larger"
                f"{each}); the other batch sizes are under per_batch_size (--batch-sizes names the one to "
                "answer for)")


def _has_batch_se(r: Run) -> bool:
    return r.accept_se is not None or r.period_se is not None


def _distinct_runs(runs: Sequence[Run]) -> tuple[list[Run], list[str]]:
    """``runs`` with any run given twice (a copied log, a log beside its own inspect document)
    counted once, and a note for each: identical batch size, depth, cycle count, accept length,
    tok/s and mean cycle time. The first copy is kept unless only a later one carries batch-means
    errors (a log beside an inspect document written before ``batch_se``). Runs without a cycle
    count are never merged (table rows), except stock Decode batch runs, told by their interval
    count instead: the same figures over as many intervals (a copied log, or a log beside its inspect
    document, whose copy lacks the throughput's standard error: the log's is kept)."""
    seen: dict[tuple, Run] = {}
    out, notes = [], []
    pairs: dict[tuple[str, str, bool], list[tuple[Run, Run]]] = {}
    for r in runs:
        total = r.total_ms()
        # a stock run is told by its interval count (an inspect document's copy has no standard error)
        # rounded first to the 6 decimals an inspect document keeps, so that a log's value and its
        # document's copy never fall on two sides of a rounding boundary (2.38875 against
        # 2.3887500000000004 had made a stock log and its own document two runs; helper 81)
        key = (r.bs, r.steps, r.topk, r.cycles, _key_round(r.accept_len, 4), _key_round(r.tok_s, 3),
               _key_round(total, 4),
               ("stock", r.intervals) if r.intervals is not None else
               None if r.tok_s_se is None else round(r.tok_s_se, 6))
        twin = seen.get(key) if r.cycles or r.tok_s_se is not None or r.intervals is not None else None
        if twin is not None:
            kept = twin
            if (_has_batch_se(r) and not _has_batch_se(twin)) or (r.tok_s_se is not None and twin.tok_s_se is None):
                # keep the copy that knows its batch means, or its throughput's standard error
                out[out.index(twin)] = seen[key] = kept = r
            pairs.setdefault((_file_of(r.source), _file_of(twin.source), kept is r), []).append((r, twin))
            continue
        seen[key] = r
        out.append(r)
    for (mine, theirs, later), group in pairs.items():
        if len(group) == 1:
            r, twin = group[0]
            notes.append(f"{r.source} holds the same run as {twin.source} (bs {r.bs}, {cm.steps_text(r.steps)}, "
                         + (f"{r.cycles} cycles, " if r.cycles else "")
                         + "identical accept length and tok/s): counted once, as "
                         f"{r.source if later else twin.source}" + (" (its noise estimate)" if later else ""))
        else:   # a log beside its own inspect document: one note, not one per batch size and depth
            sizes = sorted({r.bs for r, _ in group})
            depths = sorted({r.steps for r, _ in group})
            notes.append(f"{mine} holds the same {len(group)} runs as {theirs} (bs {cm.span_text(sizes)}, "
                         f"{cm.steps_text(depths[0]) if len(depths) == 1 else cm.span_text(depths) + ' steps'}, identical "
                         "cycles, accept lengths and tok/s): each counted once, as "
                         f"{mine if later else theirs}'s" + (" (their noise estimates)" if later else ""))
    return out, notes


def _key_round(x: Optional[float], digits: int) -> Optional[float]:
    """``x`` rounded to 6 decimals, then to ``digits`` (None stays None): :func:`_distinct_runs`' key."""
    return None if x is None else round(round(float(x), 6), digits)


def _file_of(source: str) -> str:
    """The input a run's ``source`` names (``"FILE#3"``, ``"FILE (Decode batch, bs 8, 60 intervals)"``)."""
    return re.sub(r"(#\d+| \(Decode batch, .*\))$", "", source)


#: a run without a noise estimate (a table row, a bench record, stock Decode batch lines) gets a
#: zero-width interval at its own depth; a miss there is called a poor fit only past this (percent)
UNKNOWN_NOISE_PCT = 1.0
#: a measured depth overrules the model's pick (itself measured) when its measured tok/s is higher
#: by more than this many standard errors of the difference (a two-sided 95% test)
MEASURED_WINS_Z = 1.96


def run_rel_se(r: Run) -> Optional[float]:
    """Relative standard error of run ``r``'s measured tok/s: the cycle time's
    (:meth:`Run.total_se_ms` / ``total_ms``) and the accept length's (the larger of the chain
    variance from the per-position counts over ``bs * cycles`` request-cycles,
    :func:`costmodel.accept_len_moments`, and the batch-means ``accept_se``) in quadrature; for stock
    Decode batch lines, ``tok_s_se / tok_s``; None when the cycle time's noise is unknown (tables,
    bench records, stock lines of fewer than 16 intervals)."""
    total = r.total_ms()
    se_t = r.total_se_ms()
    if se_t is None or not total:
        return None
    rel = (se_t / total) ** 2
    iid = r.iid_accept_se()
    if iid is not None:
        mean = cm.accept_len_moments([a / n if n else 0.0 for a, n in r.counts])[0]
        rel += (max(iid, r.accept_se or 0.0) / mean) ** 2
    return math.sqrt(rel)


def _tok_s_rel_se(r: Run, acc: Optional[cm.AcceptanceModel] = None) -> float:
    """Relative standard error of ``r``'s tok/s for the measurement-wins tests: :func:`run_rel_se`
    (with ``acc``, :func:`_rel_se_under`), or for a run without a noise estimate
    :data:`UNKNOWN_NOISE_PCT` wide at 95%, but never below what its accept length alone scatters over
    its request-cycles where it has a cycle count (the chain's variance from its counts, else the
    Bhatia-Davis bound :func:`_accept_len_var_bound`): a 20-cycle inspect document without ``sd``
    had counted as 1% wide (helper 37)."""
    rel = (run_rel_se(r) if acc is None else _rel_se_under(r, acc)) or UNKNOWN_NOISE_PCT / 100.0 / MEASURED_WINS_Z
    if r.total_se_ms() is None and r.cycles and r.accept_len:
        iid = r.iid_accept_se()
        if iid is None:
            iid = math.sqrt(_accept_len_var_bound(r) / (r.bs * r.cycles))
        rel = max(rel, iid / r.accept_len)
    return rel


def _noise_words(rs: Sequence[Run]) -> str:
    """What a winning measurement's interval is, in words, from the runs behind it: their own noise,
    an assumed width, or both."""
    known = [run_rel_se(r) is not None for r in rs]
    if len(rs) == 1:
        return "its run's noise" if known[0] else "no noise estimate: taken as at least 1% wide"
    if all(known):
        return "its runs' noise and spread"
    if not any(known):
        return "runs without a noise estimate: taken as at least 1% wide each, and as far apart as they are"
    return "its runs' noise and spread, those without a noise estimate taken as at least 1% wide"


def pooled_runs(rs: Sequence[Run], acc: Optional[cm.AcceptanceModel] = None) -> tuple[Run, float]:
    """Several runs at one depth and batch size as one: ``(run, standard error in tok/s)``.

    The tok/s is the inverse-variance mean over the runs' relative errors (:func:`_tok_s_rel_se`);
    its error is that of the mean times ``sqrt(max(1, Q / (k - 1)))``, Cochran's ``Q`` over the
    ``k`` runs (Higgins and Thompson,
    Stat. Med. 21 (2002) 1539): runs that disagree beyond their noise (a stock log at 291.8 tok/s and
    another at 179.6, each within 0.5%) say the depth's figure is that uncertain, not that their mean
    is known to 0.4% (helper 37). The accept length is the request-cycle-weighted mean where known.
    One run is returned as it is; several as a copy holding those means, its ``source`` naming them."""
    rs = list(rs)
    if len(rs) == 1:
        return rs[0], rs[0].tok_s * _tok_s_rel_se(rs[0], acc)
    # weights from the relative errors (each run's error is a share of its own tok/s: weighed in
    # tok/s, the slower of two equally noisy runs would count more, and 200 and 160 made 175.6)
    w = [1.0 / _tok_s_rel_se(r, acc) ** 2 for r in rs]
    mean = sum(wi * r.tok_s for wi, r in zip(w, rs)) / sum(w)
    se = mean / math.sqrt(sum(w))
    q = sum(wi * ((r.tok_s - mean) / mean) ** 2 for wi, r in zip(w, rs))
    se *= math.sqrt(max(1.0, q / (len(rs) - 1)))
    counted = [(r.accept_len, r.bs * (r.cycles or 1)) for r in rs if r.accept_len is not None]
    acc_len = (sum(a * n for a, n in counted) / sum(n for _a, n in counted)) if counted else rs[0].accept_len
    return dataclasses.replace(rs[0], tok_s=mean, accept_len=acc_len,
                               source=f"{len(rs)} runs ({', '.join(r.source for r in rs)})"), se


def _measured_winner(pick: int, runs: Sequence[Run], steps: Sequence[int], acc: Optional[cm.AcceptanceModel] = None
                     ) -> Optional[tuple[Run, Run, float, float, float]]:
    """``(winner, pick's run, z, winner's se, pick's se)`` (standard errors in tok/s) when the pick
    was measured and another measured candidate depth beat it by more than :data:`MEASURED_WINS_Z`
    standard errors, else None. A run's error is :func:`_tok_s_rel_se` (a run without a noise
    estimate, a table row or a bench record without its cycle group, counts as
    :data:`UNKNOWN_NOISE_PCT` wide at 95%, as its poor-fit check does). Several runs at one depth
    (a sweep re-run into the same file) count together (:func:`pooled_runs`: the run returned is
    then a copy holding their mean). ``acc``: the acceptance the prediction takes, whose scatter over
    a run's request-cycles bounds the run's own from below (:func:`_rel_se_under`)."""
    by_depth: dict[int, list[Run]] = {}
    for r in runs:
        if r.tok_s and r.topk == 1 and r.steps in steps:
            by_depth.setdefault(r.steps, []).append(r)
    if pick not in by_depth:
        return None
    mine, se_p = pooled_runs(by_depth[pick], acc)
    best = None
    for depth, rs in by_depth.items():
        if depth == pick:
            continue
        r, se = pooled_runs(rs, acc)
        if r.tok_s <= mine.tok_s:
            continue
        z = (r.tok_s - mine.tok_s) / math.hypot(se, se_p)
        if z > MEASURED_WINS_Z and (best is None or r.tok_s > best[0].tok_s):
            best = (r, mine, z, se, se_p)
    return best


def _measured_below_baseline(pick: int, runs: Sequence[Run], acc: cm.AcceptanceModel,
                             base_tok: Optional[float]) -> Optional[tuple[Run, float, float]]:
    """``(pick's run, z, its se in tok/s)`` when the pick (``pick > 0``) was measured (``runs``: this
    batch size's, pooled at one depth with :func:`pooled_runs`) more than :data:`MEASURED_WINS_Z` of
    its standard errors below the no-spec ``base_tok`` (tok/s, taken as exact), else None: a
    measured depth slower than speculation off is never recommended on the model's word (helper 44:
    a 1-step run measured 86.0 tok/s against a no-spec 88.1 was advised at a predicted 93.1)."""
    rs = [r for r in runs if r.steps == pick and r.tok_s and r.topk == 1]
    if pick <= 0 or not rs or not base_tok:
        return None
    mine, se = pooled_runs(rs, acc)
    z = (base_tok - mine.tok_s) / se if se > 0 else math.inf
    return (mine, z, se) if z > MEASURED_WINS_Z else None


def _measured_over_prediction(pick: int, cands: Sequence[cm.Candidate], runs: Sequence[Run],
                              acc: cm.AcceptanceModel, unshaped: Sequence[Run]
                              ) -> Optional[tuple[Run, float, float, float]]:
    """``(run, predicted tok/s of the pick, z, run's se in tok/s)`` when the pick was not measured
    (``runs``: this batch size's) and the runs of ``unshaped`` (runs no cycle-time curve passes
    through) at one depth, together (:func:`pooled_runs`, with every run measured there), measured
    more than the pick's predicted mean by over :data:`MEASURED_WINS_Z` of their standard errors
    (the fastest such depth), else None.

    Stock or whole-cycle runs beside phase-timed ones shape no cycle time: at their batch size the
    carried curves had predicted 2,720 tok/s for a depth measured at 4,546, and recommended a depth
    predicted at 3,257. A prediction below a measurement does not overrule it. Runs the curves do
    pass through are left to the model, which weighs them against the other runs (acceptance
    pooled over them): a 3-step run of persistent easy requests measured 10% above its truth."""
    if any(r.steps == pick for r in runs):
        return None
    by = {c.steps: c for c in cands}
    if pick not in by:
        return None
    pred = by[pick].tok_s
    depths = {r.steps for r in unshaped if r.tok_s and r.topk == 1 and r.steps in by}
    best = None
    for depth in sorted(depths):
        r, se = pooled_runs([x for x in runs if x.steps == depth and x.tok_s and x.topk == 1], acc)
        z = (r.tok_s - pred) / se
        if z > MEASURED_WINS_Z and (best is None or r.tok_s > best[0].tok_s):
            best = (r, pred, z, se)
    return best


def _from_ensemble(cands: Sequence[cm.Candidate], ens: unc.Ensemble) -> list[cm.Candidate]:
    """Candidates whose predictions are the ensemble's: mean tok/s, 95% intervals, median phases.

    At a batch size without a baseline of its own, the speculation-off row is the mean over the
    decode step's hypotheses (:func:`uncertainty._decode_step_at`, from one baseline or several),
    with their 95% interval, and every candidate's speedup is against it: the figures the decision
    compares."""
    import numpy as np

    out = []
    base_mean = None
    for c in cands:
        i = ens.steps.index(c.steps)
        if c.steps == 0:
            if "baseline" in c.extrapolated:   # the decode step's own hypotheses
                base_mean = float(ens.tok_s[:, i].mean())
                lo, hi = np.percentile(ens.tok_s[:, i], unc.LEVELS)
                # the step that gives that mean tok/s, so that the row's cycle and tok/s agree
                cyc = dataclasses.replace(c.cycle, total_ms=1000.0 * c.bs / base_mean)
                c = dataclasses.replace(c, tok_s=base_mean, tok_s_low=float(lo), tok_s_high=float(hi), cycle=cyc,
                                        interval_source="no-spec decode step (no baseline at this bs)")
            out.append(c)
            continue
        tok, e = ens.tok_s[:, i], ens.accept_len[:, i]
        lo, hi = np.percentile(tok if ens.tok_s_band is None else ens.tok_s_band[:, i], unc.LEVELS)
        if ens.sources[i] == unc.NO_NOISE_SOURCE:
            # a run with no noise estimate (a table row, a bench record without its cycle group) is
            # taken as UNKNOWN_NOISE_PCT wide, as its poor-fit check and the why-line take it: a
            # zero-wide interval had shown 322.3-322.3 beside the row's own 321.2 (helper 39)
            half = UNKNOWN_NOISE_PCT / 100.0 * float(tok.mean())
            lo, hi = min(lo, float(tok.mean()) - half), max(hi, float(tok.mean()) + half)
        elo, ehi = np.percentile(e, unc.LEVELS)
        med = {k: float(np.median(v[:, i])) for k, v in ens.phases.items()}
        phases = c.cycle.verify_ms is not None
        cyc = cm.CyclePrediction(
            c.bs, c.steps, med["total_ms"], (med["draft_ms"] if c.steps > 1 else None) if phases else None,
            med["verify_ms"] if phases else None, med["extend_ms"] if phases else None,
            med["other_ms"] if phases else None, c.cycle.extrapolated)
        out.append(dataclasses.replace(
            c, accept_len=float(e.mean()), accept_len_low=float(elo), accept_len_high=float(ehi), cycle=cyc,
            tok_s=float(tok.mean()), tok_s_low=float(lo), tok_s_high=float(hi), interval_source=ens.sources[i]))
    if base_mean is not None:
        out = [dataclasses.replace(c, baseline_tok_s=base_mean) for c in out]
    by = {c.steps: c for c in out}
    for k, c in enumerate(out):
        prev = by.get(c.steps - 1)
        if c.steps > 0 and prev is not None:
            out[k] = dataclasses.replace(c, gain_tokens=c.accept_len - prev.accept_len,
                                         cost_ms=c.cycle.total_ms - prev.cycle.total_ms)
        elif c.steps > 0:   # one step fewer is not a candidate: no figure (the point fit's was not
            # the ensemble's, so a depth's step read differently as its neighbour was listed or not)
            out[k] = dataclasses.replace(c, gain_tokens=None, cost_ms=None)
    return out


#: request-cycles the acceptance model's accept-length variance weighs as beside a run's own
#: (:func:`_rel_se_under`): a sample variance from 30 draws is good to about +-26%
PRIOR_REQUEST_CYCLES = 30


def _rel_se_under(r: Run, acc: cm.AcceptanceModel) -> Optional[float]:
    """:func:`run_rel_se` with the accept length's variance shrunk toward what the acceptance
    ``acc`` gives: ``(n v_run + K v_acc) / (n + K)`` over the run's ``n = bs * cycles``
    request-cycles, ``K`` :data:`PRIOR_REQUEST_CYCLES`. A run's own per-position rates understate
    their scatter when few requests reached them (6 requests that all accepted the first two
    drafts give rates of 1 there, and little variance); over thousands the run's own stand.
    The batch-means part (persistent requests, drift) is kept as measured."""
    total, se_t = r.total_ms(), r.total_se_ms()
    if se_t is None or not total or not r.cycles or not r.counts:
        return run_rel_se(r)
    n = r.bs * r.cycles
    mean, v_run = cm.accept_len_moments([a / k if k else 0.0 for a, k in r.counts])
    _, v_acc = cm.accept_len_moments([q.p for q in acc.positions(r.steps)])
    if mean <= 0:
        return run_rel_se(r)
    iid = math.sqrt((n * v_run + PRIOR_REQUEST_CYCLES * v_acc) / (n + PRIOR_REQUEST_CYCLES) / n)
    return math.sqrt((se_t / total) ** 2 + (max(iid, r.accept_se or 0.0) / mean) ** 2)


def fit_z(checked: int) -> float:
    """How many of its standard errors a measurement may lie outside its prediction's interval
    before :func:`_fit_notes` calls it a poor fit, with ``checked`` measurements checked in all:
    1.96 for one, Bonferroni-corrected for several (``Phi^-1(1 - 0.025 / checked)``: 2.24 for two,
    3.59 for 150), so a serving log's hundred runs do not raise the few notes chance gives."""
    return statistics.NormalDist().inv_cdf(1.0 - 0.025 / max(1, checked))


def _measured_beside(cands: Sequence[cm.Candidate], runs: Sequence[Run], acc: cm.AcceptanceModel
                     ) -> Iterator[tuple[int, cm.Candidate, float, float, float]]:
    """``(steps, candidate, measured tok/s, its standard error, outside)`` per measured depth with a
    prediction interval: the depth's runs pooled (:func:`pooled_runs`; a bench record by its decode
    throughput, :func:`decode_tok_s`), ``outside`` how far (tok/s) the measurement lies outside the
    interval (negative inside it). Depths whose runs have no noise estimate are left out."""
    by = {c.steps: c for c in cands}
    for steps in sorted({r.steps for r in runs if r.tok_s and r.topk == 1}):
        c = by.get(steps)
        if c is None or c.tok_s_low is None:
            continue
        rs = [dataclasses.replace(r, tok_s=decode_tok_s(r)) for r in runs
              if r.steps == steps and r.tok_s and r.topk == 1]
        if any(_rel_se_under(r, acc) is None for r in rs):
            continue
        r, se = pooled_runs(rs, acc)
        yield steps, c, r.tok_s, se, max(r.tok_s - c.tok_s_high, c.tok_s_low - r.tok_s)


def _missed_measurements(cands: Sequence[cm.Candidate], runs: Sequence[Run], acc: cm.AcceptanceModel,
                         z: float) -> dict[int, tuple[float, float]]:
    """``{steps: (tok/s, standard error)}`` of the measured depths (:func:`_measured_beside`) that
    lie outside their prediction's 95% interval by more than ``z`` of their standard errors: what
    :func:`_fit_notes` calls a poor fit, for the decision to weigh as measured
    (:func:`uncertainty.with_measurements`). Runs without a noise estimate are left to the model."""
    return {steps: (tok, se) for steps, _c, tok, se, outside in _measured_beside(cands, runs, acc)
            if outside > z * se}


def _disagreement_note(bs: int, cands: Sequence[cm.Candidate], runs: Sequence[Run], acc: cm.AcceptanceModel,
                       z: float) -> tuple[list[str], list[int]]:
    """One note naming the measured depths at ``bs`` (:func:`_measured_beside`) whose tok/s lies
    more than ``z`` of the run's own standard errors (:func:`_rel_se_under`, no between-run term)
    from the prediction's mean, though inside its interval or within that noise of it (no poor fit,
    :func:`_missed_measurements`): where the runs' acceptance differs beyond their noise
    (:func:`_pooled_dispersion`), the prediction pools every run's and its intervals count the
    difference as noise, so the measurements pass the poor-fit check while each run says another
    thing (helper 79: 3 steps measured 226.4 tok/s against 206.9 predicted, 5 steps 193.9 against
    214.2, and an unmeasured 4 steps advised between them without a word). Returns ``(notes, depths
    named)``, ``([], [])`` when none."""
    parts, named = [], []
    for steps, c, tok, se, outside in _measured_beside(cands, runs, acc):
        if outside <= z * se < abs(tok - c.tok_s):   # a poor fit beyond that is a note of its own
            named.append(steps)
            parts.append(f"{cm.steps_text(steps)} measured {tok:.1f} tok/s against {c.tok_s:.1f} predicted "
                         f"({100.0 * (tok - c.tok_s) / c.tok_s:+.1f}%, {abs(tok - c.tok_s) / se:.1f} of the "
                         "run's own standard errors)")
    if not parts:
        return [], []
    return [f"bs {bs}: the runs disagree: " + "; ".join(parts) + ". The prediction pools every run's acceptance, "
            "and its intervals hold these measurements only by counting the runs' difference as noise: if they "
            "served other prompts or another load, re-run the contending depths on one workload and advise on those"], named


def _fit_notes(cands: Sequence[cm.Candidate], runs: Sequence[Run], acc: Optional[cm.AcceptanceModel] = None,
               z: float = MEASURED_WINS_Z) -> tuple[list[str], list[str]]:
    """``(notes, within_noise)``: one note per measured depth whose measured tok/s lies outside the
    prediction's 95% interval by more than its own noise (``z`` of its standard errors, 1.96 for
    one run, :func:`fit_z` for several; :func:`run_rel_se`, with ``acc`` :func:`_rel_se_under`;
    for a run without a noise estimate, a miss over :data:`UNKNOWN_NOISE_PCT`), and ``"STEPS at
    bs BS"`` for each one outside the interval within its own noise. A bench record is judged by
    its cycle group's decode throughput (:func:`decode_tok_s`).

    The model's curves pass through every measured point, so a miss there means the runs disagree
    with each other under the model (acceptance pooled over runs, or phases that do not add up to
    the measured throughput). A run of a few cycles (a ramp's batch size) measures its own accept
    length from a few dozen requests, while the prediction takes the acceptance of every run: a
    miss within that run's own noise is the run's, not the model's.
    """
    by = {c.steps: c for c in cands}
    out, within = [], []
    for r in runs:
        c = by.get(r.steps)
        if c is None or not r.tok_s or c.tok_s_low is None:
            continue
        # a bench record's own decode throughput (the client's includes prefill, which the model
        # does not predict: every record of a sweep had been a poor fit by 3-4%)
        dec = decode_tok_s(r)
        r = dataclasses.replace(r, tok_s=dec) if dec != r.tok_s else r
        if not c.tok_s_low <= r.tok_s <= c.tok_s_high:
            off = 100.0 * (c.tok_s - r.tok_s) / r.tok_s
            rel = run_rel_se(r) if acc is None else _rel_se_under(r, acc)
            if rel is None and abs(off) <= UNKNOWN_NOISE_PCT:
                continue   # no noise estimate (table, bench record, stock line): the interval cannot hold it
            outside = r.tok_s - c.tok_s_high if r.tok_s > c.tok_s_high else c.tok_s_low - r.tok_s
            if rel is not None and outside <= z * rel * r.tok_s:
                within.append(f"{cm.steps_text(r.steps)} at bs {r.bs}")
                continue
            out.append(f"the model fits poorly at {cm.steps_text(r.steps)} (bs {r.bs}): measured {r.tok_s:.1f} tok/s, "
                       f"predicted {c.tok_s:.1f} (95%: {c.tok_s_low:.1f}-{c.tok_s_high:.1f}), {off:+.1f}% ({r.source})")
    return out, within


def _source_clause(source: Optional[str]) -> str:
    """``", mostly verify shape"``: what dominates the pick's interval, for its why-line; a run with no
    noise estimate has no such source, and is said as it is (not "mostly none: ...")."""
    if not source:
        return ""
    if source == unc.NO_NOISE_SOURCE:
        return "; its run has no noise estimate (taken as 1% wide)"
    return ", mostly " + source


def _recommend(cands: Sequence[cm.Candidate], dec: unc.Decision, ens: unc.Ensemble,
               run_bs: Sequence[int] = (), measured_pick: Optional[tuple[float, float, str, str]] = None
               ) -> cm.Recommendation:
    """The decision's pick, with why: its throughput and interval, what the next step would cost, and
    whether the data settle it (95th-percentile regret against the best depth). ``measured_pick``:
    ``(tok/s, standard error, what it won over, what its interval is)`` of a measurement that won
    over the model, quoted in the model's place, without the model's marginal figures for a step
    more (what it overruled)."""
    by = {c.steps: c for c in cands}
    pick = by[dec.pick]
    base_tok = pick.baseline_tok_s
    spec = [c for c in cands if c.steps > 0 and c.tok_s_low is not None]
    clears = None if not base_tok or not spec else any(c.tok_s_low > base_tok for c in spec)
    state = (f"settled: its 95th-percentile regret against the best depth is {100 * dec.regret_95:.1f}%"
             if dec.settled else
             f"not settled: its 95th-percentile regret is {100 * dec.regret_95:.1f}% (over "
             f"{100 * unc.SETTLED_REGRET:.0f}%)")
    if (not dec.settled and dec.regret_95_assumed is not None and dec.doubt_overhead is not None
            and dec.regret_95 > dec.regret_95_assumed + 0.001):
        state += (f", counting verify-mode overheads up to {100 * dec.doubt_overhead:.0f}% of the no-spec decode "
                  f"step, as the lowest run's verify, far above that step, allows ({dec.regret_95_assumed:.1%} "
                  f"within the 0-{100 * unc.VERIFY_MODE_OVERHEAD[1]:.0f}% the predictions take)")
    if (pick.interval_source or "").startswith(unc.KERNEL_SOURCE):
        state += (" (the regret leaves out the kernel time that widens its interval: only a run at that "
                  "depth measures it)")
    if dec.no_run_at_bs:
        state = (f"not settled: no run at bs {pick.bs}, every figure here is carried over from bs "
                 f"{cm.span_text(run_bs)} (how the costs scale with the batch is not among the hypotheses; "
                 f"the {100 * dec.regret_95:.1f}% regret is within them only)")
    if dec.pick == 0 and measured_pick is not None:   # the model's first measured below the baseline
        tok, se, first, _ = measured_pick
        reason = (f"turn speculation off (restart without --speculative-algorithm; adaptive steps 0 still runs "
                  f"draft-extend): {first}, measured {tok:.1f} tok/s (95%: {tok - cm.Z95 * se:.1f}-"
                  f"{tok + cm.Z95 * se:.1f}), below the no-spec {base_tok:.1f} tok/s; the measurement wins over the "
                  f"model; {state}")
    elif dec.pick == 0:
        best = cm.best_speculative(cands)
        reason = (f"turn speculation off (restart without --speculative-algorithm; adaptive steps 0 still runs "
                  f"draft-extend): no depth is expected to beat the no-spec {base_tok:.1f} tok/s, the best being "
                  f"{cm.steps_text(best.steps)} at {best.tok_s:.1f} tok/s (95%: {best.tok_s_low:.1f}-"
                  f"{best.tok_s_high:.1f}); {state}")
    if dec.pick == 0:
        if dec.settled:
            reason += "; no run at another depth is expected to change that"
        elif dec.no_run_at_bs:
            reason += f"; a run at bs {pick.bs} decides"
        elif baseline_run_first(dec):
            reason += (f"; its no-spec figure is carried from another batch size's baseline: a no-spec run at "
                       f"bs {pick.bs} could change it")
        elif dec.next_run is not None:
            reason += f"; a run at {cm.steps_text(dec.next_run)} could change it"
        return cm.Recommendation(0, pick, reason, base_tok, clears)
    if clears is False:
        # speculation kept, but no interval lies above speculation off: said, with what would decide it
        low = max(spec, key=lambda c: (c.tok_s_low, -c.steps))
        off = (f"no depth's 95% interval clears the no-spec {base_tok:.1f} tok/s (the highest low end: "
               f"{low.tok_s_low:.1f} tok/s at {cm.steps_text(low.steps)}): speculation may not pay here")
        if dec.settled:
            off += (f", though the pick is expected to cost at most {100 * dec.regret_95:.1f}% against speculation "
                    "off (its 95th-percentile regret counts it), so no run at another depth is expected to change this")
        elif dec.no_run_at_bs:
            off += f"; a run at bs {pick.bs} decides"
        elif baseline_run_first(dec):
            off += (f"; the no-spec figure is carried from another batch size's baseline: a no-spec run at "
                    f"bs {pick.bs} could decide whether it does")
        elif dec.next_run is not None and dec.useful:
            off += f"; a run at {cm.steps_text(dec.next_run)} could decide whether it does"
        else:
            off += ("; no single run is expected to decide it (the depths lie within the runs' noise of the "
                    "baseline: longer runs, and a no-spec run under the same load, narrow it)")
        state = f"{state}; {off}"
    if measured_pick is not None:
        tok, se, over, noise = measured_pick
        head = (f"{cm.steps_text(dec.pick)} measured {tok:.1f} tok/s (95%: {tok - cm.Z95 * se:.1f}-"
                f"{tok + cm.Z95 * se:.1f}, {noise})")
        if base_tok:
            head += f", {tok / base_tok:.2f}x the no-spec {base_tok:.1f} tok/s"
        return cm.Recommendation(dec.pick, pick, f"{head}; the measurement wins over the model ({over}); {state}",
                                 base_tok, clears)
    head = (f"{cm.steps_text(dec.pick)} gives {pick.tok_s:.1f} tok/s (95%: {pick.tok_s_low:.1f}-"
            f"{pick.tok_s_high:.1f}{_source_clause(pick.interval_source)})")
    if base_tok:
        head += f", {pick.speedup():.2f}x the no-spec {base_tok:.1f} tok/s"
    nxt = by.get(dec.pick + 1)
    clause = ""
    if nxt is not None and nxt.gain_tokens is not None:
        clause = (f"; a step more would add {nxt.gain_tokens:.2f} accepted tokens per request per cycle "
                  f"(+{100 * nxt.gain_tokens / pick.accept_len:.0f}%) for +{nxt.cost_ms:.2f} ms "
                  f"(+{100 * nxt.cost_ms / pick.cycle.total_ms:.0f}%)")
        if pick.cycle.verify_ms is not None and nxt.cycle.verify_ms is not None:
            parts = {"verify width": nxt.cycle.verify_ms - pick.cycle.verify_ms,
                     "draft forward": (nxt.cycle.draft_ms or 0.0) - (pick.cycle.draft_ms or 0.0),
                     "draft-extend": (nxt.cycle.extend_ms or 0.0) - (pick.cycle.extend_ms or 0.0)}
            name = max(parts, key=parts.get)
            clause += f", mostly {name} (+{parts[name]:.2f} ms)"
    return cm.Recommendation(dec.pick, pick, f"{head}{clause}; {state}", base_tok, clears)


# ---------------------------------------------------------------------------------------------
# SGLang adaptive config
# ---------------------------------------------------------------------------------------------


def sglang_spec_cuda_graph_bs(max_bs: int) -> list[int]:
    """Decode CUDA-graph batch sizes SGLang 0.5.23 captures with speculative decoding (padding on).

    1..8, 10..32 by 2, 40..64 by 4, 72..256 by 8, 272.. by 16, cut at ``max_bs``, plus ``max_bs``
    (``arg_groups/cuda_graph_hook.py``, ``generate_decode_cuda_graph_batch_sizes``).
    """
    sizes = (list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4))
             + list(range(72, 257, 8)) + list(range(272, max_bs + 1, 16)))
    sizes = [s for s in sizes if s <= max_bs]
    if max_bs not in sizes:
        sizes.append(max_bs)
    return sizes


def pad_to_graph_bs(bs: int, graph_bs: Sequence[int]) -> int:
    """Smallest captured batch size ``>= bs`` (``bs`` itself above the largest), as SGLang pads."""
    return next((g for g in sorted(graph_bs) if g >= bs), bs)


@dataclass
class AdaptivePlan:
    """An SGLang ``--speculative-adaptive-config`` document and how to launch with it."""

    config: dict
    launch_steps: int
    buckets: dict  # bucket key -> pinned steps (adaptive_config) or candidate list (adaptive_candidates)
    off_buckets: list[int]
    merged: list[str]
    #: adaptive_config: each advised batch size -> the depth its bucket pins (that of the bucket's
    #: largest batch size where several share one)
    steps_by_bs: dict = field(default_factory=dict)


def _bucket_keys(advice: Advice, graph_bs: Optional[Sequence[int]]) -> tuple[list[int], list, int]:
    """``(graph sizes, [(bucket key, BatchAdvice)] by batch size, primary key)``: each batch size gets
    the config key it pads to; the smallest key is written as 1 so every batch size has a bucket."""
    sizes = [b.bs for b in advice.per_bs]
    graph = sorted(graph_bs) if graph_bs else sglang_spec_cuda_graph_bs(max(sizes))
    keyed = [(pad_to_graph_bs(b.bs, graph), b) for b in sorted(advice.per_bs, key=lambda b: b.bs)]
    primary_key = pad_to_graph_bs(advice.primary_bs, graph)
    low = min(k for k, _ in keyed)
    if low != 1:
        keyed = [(1 if k == low else k, b) for k, b in keyed]
        primary_key = 1 if primary_key == low else primary_key
    return graph, keyed, primary_key


def _pads(sizes: Sequence[int], key: int, graph: Sequence[int]) -> str:
    """How batch sizes sharing the config key ``key`` meet: "pad to 32", or "pad to 32 (config key
    1)" where the smallest key was rewritten as 1, or "share config key 1" where they pad apart."""
    to = sorted({pad_to_graph_bs(b, graph) for b in sizes})
    if len(to) > 1:
        return f"share config key {key} (they pad to {', '.join(map(str, to))})"
    return f"pad to {to[0]}" + (f" (config key {key})" if to[0] != key else "")


def contenders(b: BatchAdvice) -> list[int]:
    """Depths >= 1 still in contention at one batch size: the fastest one, and every depth whose
    tok/s interval reaches the fastest one's lower end (point estimates when there is no interval)."""
    spec = [c for c in b.candidates if c.steps >= 1]
    if not spec:
        return [max(1, b.adaptive_steps)]
    best = max(spec, key=lambda c: (c.tok_s, -c.steps))
    floor = best.tok_s_low if best.tok_s_low is not None else best.tok_s
    keep = {c.steps for c in spec if (c.tok_s_high if c.tok_s_high is not None else c.tok_s) >= floor}
    return sorted(keep | {best.steps})


def adaptive_candidates(advice: Advice, graph_bs: Optional[Sequence[int]] = None) -> AdaptivePlan:
    """A config for :class:`sglang_eagle_cycle.adaptive.CostAwarePolicy` (``SGLANG_EAGLE_CYCLE_ADAPTIVE=cost``):
    per batch-size bucket the :func:`contenders` as ``candidate_steps`` and the no-spec baseline
    as ``nospec_tok_s`` when known, with ``nospec_bs``, the batch size it is for (SGLang's own policy
    ignores both keys). Batch sizes that pad to
    one key pool their contenders."""
    graph, keyed, primary_key = _bucket_keys(advice, graph_bs)
    cands: dict[int, set] = {}
    nospec: dict[int, float] = {}
    nospec_bs: dict[int, int] = {}   # the batch size each bucket's nospec_tok_s was measured at
    owner: dict[int, list] = {}
    off_at: dict[int, bool] = {}   # the bucket's largest batch size decides, as its nospec_tok_s does
    for key, b in keyed:
        cands.setdefault(key, set()).update(contenders(b))
        owner.setdefault(key, []).append(b.bs)
        base = next((c.baseline_tok_s for c in b.candidates if c.baseline_tok_s), None)
        if base:
            nospec[key], nospec_bs[key] = round(base, 3), b.bs
        off_at[key] = b.recommendation.speculation_off
    off = [k for k, v in off_at.items() if v]
    merged = [f"bs {', '.join(map(str, v))} {_pads(v, k, graph)}: their contenders are pooled"
              for k, v in owner.items() if len(v) > 1]
    cfg = {}
    for k in sorted(cands):
        cfg[str(k)] = {"candidate_steps": sorted(cands[k])}
        if k in nospec:
            cfg[str(k)]["nospec_tok_s"] = nospec[k]
            cfg[str(k)]["nospec_bs"] = nospec_bs[k]
    cfg["_eagle_cycle"] = {
        "generated_by": "eagle-cycle advise --adaptive-candidates",
        "note": "for SGLANG_EAGLE_CYCLE_ADAPTIVE=cost: the depths still in contention per bucket and the "
                "no-spec tok/s; the policy measures them live",
        "speculation_off_buckets": sorted(off),
        "cuda_graph_bs_assumed": graph,
    }
    buckets = {k: sorted(v) for k, v in sorted(cands.items())}
    launch = advice.primary.recommendation.steps if advice.primary.recommendation.steps in buckets[primary_key] \
        else buckets[primary_key][len(buckets[primary_key]) // 2]
    return AdaptivePlan(cfg, launch, buckets, sorted(off), merged)


def adaptive_written_by(doc) -> Optional[str]:
    """What an adaptive config this command wrote is, in words, where ``doc`` is one (its
    ``_eagle_cycle.generated_by`` names ``eagle-cycle advise``), else None: given back to advise as a
    run or as ``--table``, it had been sent from one to the other (helper 101)."""
    mark = doc.get("_eagle_cycle") if isinstance(doc, Mapping) else None
    by = mark.get("generated_by") if isinstance(mark, Mapping) else None
    if not (isinstance(by, str) and by.startswith("eagle-cycle advise")):
        return None
    flag = "--adaptive-candidates" if by.endswith("--adaptive-candidates") else "--adaptive-config"
    return (f"an adaptive config written by `eagle-cycle advise {flag}`, not a run or a table: it goes to the "
            "server (see its launch line), not back to advise")


def adaptive_config(advice: Advice, graph_bs: Optional[Sequence[int]] = None) -> AdaptivePlan:
    """Pin the recommended depth per batch-size bucket.

    SGLang 0.5.23 pads a running batch size up to a captured CUDA-graph size, then picks the
    largest config key ``<=`` that (the smallest key for anything below). Each requested batch
    size gets the key it pads to, with ``candidate_steps = [its depth]`` so the EMA cannot move
    it; the smallest key is written as ``"1"`` so every batch size lands in a bucket. A bucket
    where speculation does not pay still gets its fastest depth ``> 0`` (never 0, which still
    runs draft-extend) and is listed in ``off_buckets`` so the caller can say so. Batch sizes
    that pad to one key share the depth of the largest of them, and it decides whether the bucket
    is off.
    """
    graph, keyed, primary_key = _bucket_keys(advice, graph_bs)
    buckets: dict[int, int] = {}
    owners: dict[int, list[BatchAdvice]] = {}
    for key, b in keyed:   # ascending bs: the largest in a bucket is the last, and its depth is pinned
        buckets[key] = b.adaptive_steps
        owners.setdefault(key, []).append(b)
    merged = [f"bs {', '.join(str(b.bs) for b in bs_)} {_pads([b.bs for b in bs_], key, graph)}: using bs {bs_[-1].bs}'s "
              f"{cm.steps_text(bs_[-1].adaptive_steps)}" for key, bs_ in owners.items()
              if len({b.adaptive_steps for b in bs_}) > 1]
    off = [key for key, bs_ in owners.items() if bs_[-1].recommendation.speculation_off]
    cfg = {str(k): {"candidate_steps": [v]} for k, v in sorted(buckets.items())}
    cfg["_eagle_cycle"] = {
        "generated_by": "eagle-cycle advise",
        "note": "each bucket pins one depth; buckets listed in speculation_off_buckets are predicted "
                "slower than no speculation at all (disable speculation for that load instead)",
        "speculation_off_buckets": sorted(off),
        "cuda_graph_bs_assumed": graph,
    }
    return AdaptivePlan(cfg, buckets[primary_key], dict(sorted(buckets.items())), sorted(off), merged,
                        {b.bs: buckets[key] for key, b in keyed})
