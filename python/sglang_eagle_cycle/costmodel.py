"""Acceptance and cycle-cost model for EAGLE-3 chain drafting: the maths behind ``eagle-cycle advise``.

Why: choosing ``--speculative-num-steps`` by restarting a large server for every depth is slow.
A cost-benefit model ranks every depth from one or two measured runs: each extra draft step adds
the probability that all drafts so far are accepted, and costs one more draft forward plus a
wider target verify and draft-extend (README, "eagle-cycle advise").

Conventions (README, "Terms"):

* *accept length* counts the bonus token: accepted drafts + 1, per request per cycle;
* *per-position acceptance* ``p_j`` = P(draft token ``j`` accepted | tokens ``< j`` accepted);
* ``S`` = ``num_steps`` (draft depth, chain drafting, ``topk = 1``); a cycle verifies
  ``S + 1`` tokens per request, ``bs x (S + 1)`` in all;
* all times are milliseconds per cycle, throughputs are output tokens per second of the whole
  batch (tok/s).

Formulas and their sources:

* expected accept length, chain drafting::

      E[L(S)] = 1 + sum_{j=1..S} prod_{i=1..j} p_i

  Leviathan, Kalman, Matias, "Fast Inference from Transformers via Speculative Decoding",
  ICML 2023, eq. (1) ``(1 - a^(S+1)) / (1 - a)`` for a constant rate ``a``, generalised to
  per-position rates;
* cycle time (README, "eagle-cycle advise")::

      T(S) = (S - 1) t_step + T_verify(bs (S+1)) + T_extend(bs (S+1)) + T_other

  with a no-spec decode step as the one-token point of the verify curve,
  ``T_verify(bs) ~ 1000 bs / baseline_tok_s``; throughput ``1000 bs E[L(S)] / T(S)``;
* MoE targets: expected distinct experts touched by ``n`` tokens, ``E`` routed experts, ``k``
  per token, independent uniform routing: ``E (1 - (1 - k/E)^n)`` (occupancy, e.g. Feller,
  *An Introduction to Probability Theory*, vol. 1, ch. II); used only as the interpolation
  shape between measured verify points;
* 95% intervals of a proportion: Wilson, "Probable inference, the law of succession, and
  statistical inference", JASA 22 (1927) 209-212.

Decay rule (stated, not tuned): when only *mean* accept lengths are known, the conditional
acceptance follows ``p_j = p_1 r^(j-1)`` (capped at 1): one depth fixes ``p_1`` with ``r = 1``
(Leviathan's constant rate); two or more depths fit ``p_1`` and ``r`` by least squares. Beyond
the deepest observed position the rule continues with ``min(r, 1)``: acceptance is never assumed
to rise past what was measured, and every such prediction is flagged as extrapolated.

Tree drafting (``topk > 1``) is not modelled here.

Usage::

    from sglang_eagle_cycle import costmodel as cm
    acc = cm.AcceptanceModel.from_means([cm.MeanPoint(steps=5, accept_len=2.1, samples=1000)])
    cost = cm.CycleCostModel.fit(
        [cm.CycleObservation(bs=1, steps=5, total_ms=29.45, draft_ms=0.95, verify_ms=28.1,
                             extend_ms=0.25, other_ms=0.15)],
        baseline_tok_s={1: 88.8}, shape=cm.WidthShape(num_experts=384, top_k=8))
    cands = cm.predict_candidates(acc, cost, bs=1, steps=range(1, 11))
    print(cm.best_speculative(cands).steps)     # the central model's fastest depth

These are point predictions from one fitted model; ``eagle-cycle advise`` picks a depth, with
intervals and a decision state, from the ensemble of :mod:`.uncertainty` built on them.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace
from typing import Mapping, Optional, Sequence

import numpy as np

#: two-sided 95% normal quantile
Z95 = 1.959963984540054

#: search box of the decay factor r when fitting p_j = p_1 r^(j-1) to mean accept lengths
_R_BOUNDS = (0.05, 2.0)


# ---------------------------------------------------------------------------------------------
# Acceptance maths
# ---------------------------------------------------------------------------------------------


def steps_text(s: int) -> str:
    """``"1 step"``, ``"2 steps"``: a depth in words."""
    return f"{s} step{'s' if s != 1 else ''}"


def expected_accept_len(p: Sequence[float]) -> float:
    """``E[L(S)] = 1 + sum_j prod_{i<=j} p_i`` for ``S = len(p)`` (tokens per request per cycle).

    Args:
        p: conditional per-position acceptance ``p_1..p_S``, each in ``[0, 1]``.

    Source: Leviathan et al. 2023, eq. (1), generalised from a constant rate.
    """
    total, surv = 1.0, 1.0
    for pj in p:
        surv *= float(pj)
        total += surv
    return total


def expected_accept_len_constant(p: float, steps: int) -> float:
    """Closed form for a constant rate: ``(1 - p^(S+1)) / (1 - p)`` (``S + 1`` when ``p = 1``).

    Source: Leviathan et al. 2023, eq. (1).
    """
    if p >= 1.0:
        return float(steps + 1)
    return (1.0 - p ** (steps + 1)) / (1.0 - p)


def accept_len_moments(p: Sequence[float]) -> tuple[float, float]:
    """Mean and variance of the accept length ``L`` under chain drafting with rates ``p``.

    ``P(L >= m) = prod_{i<m} p_i`` for ``m = 1..S+1``; ``E[L] = sum_m P(L >= m)``,
    ``E[L^2] = sum_m (2m - 1) P(L >= m)`` (tail-sum formulas for positive integers).
    """
    mean = second = 0.0
    surv = 1.0
    for m in range(1, len(p) + 2):
        mean += surv
        second += (2 * m - 1) * surv
        if m <= len(p):
            surv *= float(p[m - 1])
    return mean, max(0.0, second - mean * mean)


#: a rising acceptance trend past the measured positions continues up to this per position (or the
#: highest measured rate, whichever is higher): EAGLE-3 drafts on very predictable text measure 0.85-0.95
RISE_CAP = 0.95
#: highest decay :func:`beyond_decay` searches (a rate that rises past the counted positions, each
#: position capped as the caller says)
BEYOND_R_MAX = 1.5


def beyond_decay(known: np.ndarray, anchor: np.ndarray, cap: np.ndarray, depths: Sequence[int],
                 means: np.ndarray, weights: Sequence[float]) -> np.ndarray:
    """Per hypothesis, the decay ``r`` past the counted positions that fits mean accept lengths
    measured deeper (weighted least squares; a grid over ``0..BEYOND_R_MAX``, then a finer one).

    Position ``D + k`` (``D = known.shape[1]``) accepts ``min(anchor r^k, cap)``, so
    ``E[L(S)] = 1 + sum_{j<=D} prod_{i<=j} p_i + prod_{i<=D} p_i sum_{k=1..S-D} prod_{i=1..k}
    min(anchor r^i, cap)`` (Leviathan et al. 2023, eq. (1), generalised from a constant rate).

    Args:
        known: ``(n, D)`` counted per-position acceptance per hypothesis.
        anchor: ``(n,)`` the rate the decay starts from (position ``D``'s).
        cap: ``(n,)`` the highest rate a position past ``D`` may take.
        depths: the deeper runs' depths (each ``> D``).
        means: ``(n, len(depths))`` their mean accept lengths (tokens), per hypothesis.
        weights: per depth (request-cycles).

    Returns:
        ``(n,)`` decays; a mean below what the counted positions alone give is met by ``r = 0``.
    """
    n, d = known.shape
    top = max(depths) - d
    base = 1.0 + np.cumprod(known, axis=1).sum(axis=1)           # E[L(D)]
    reach = np.prod(known, axis=1)
    w = np.asarray(weights, dtype=float)
    w = w / w.sum()
    k = np.arange(1, top + 1)

    def err(r: np.ndarray) -> np.ndarray:            # r (n, G) -> weighted squared error (n, G)
        rates = np.minimum(anchor[:, None, None] * r[:, :, None] ** k, cap[:, None, None])   # (n, G, top)
        tail = np.cumsum(np.cumprod(rates, axis=2), axis=2)                                 # (n, G, top)
        e = base[:, None, None] + reach[:, None, None] * tail[:, :, [s - d - 1 for s in depths]]
        return (w * (e - means[:, None, :]) ** 2).sum(axis=2)

    grid = np.broadcast_to(np.linspace(0.0, BEYOND_R_MAX, 61), (n, 61))
    r = grid[np.arange(n), err(grid).argmin(axis=1)]
    fine = np.clip(r[:, None] + np.linspace(-0.025, 0.025, 21), 0.0, BEYOND_R_MAX)
    return fine[np.arange(n), err(fine).argmin(axis=1)]


def wilson_interval(successes: int, trials: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (Wilson 1927). ``(0, 1)`` for no trials.

    Raises:
        ValueError: negative counts or ``successes > trials``.
    """
    if trials < 0 or successes < 0 or successes > trials:
        raise ValueError(f"bad counts: {successes} successes of {trials} trials")
    if trials == 0:
        return 0.0, 1.0
    n, ph = float(trials), successes / trials
    denom = 1.0 + z * z / n
    centre = (ph + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(ph * (1 - ph) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def position_counts(hist: Mapping[int, int], steps: int) -> list[tuple[int, int]]:
    """Per-position ``(accepted, reached)`` counts from an accept-length histogram.

    Args:
        hist: ``{accept_length: request-cycles}``; accept lengths in ``1..steps+1``.
        steps: draft depth of the run.

    Returns:
        ``steps`` pairs; draft ``j`` was *reached* when ``L >= j`` and *accepted* when
        ``L >= j + 1``.

    Raises:
        ValueError: an accept length outside ``1..steps+1`` or a negative count.
    """
    tail = [0] * (steps + 3)
    for length, count in hist.items():
        length, count = int(length), int(count)
        if not 1 <= length <= steps + 1:
            raise ValueError(f"accept length {length} impossible with {steps_text(steps)}")
        if count < 0:
            raise ValueError(f"negative count {count} for accept length {length}")
        tail[length] += count
    for m in range(steps + 1, 0, -1):  # tail[m] = #(L >= m)
        tail[m] += tail[m + 1]
    return [(tail[j + 1], tail[j]) for j in range(1, steps + 1)]


def distinct_experts(n_tokens: float, num_experts: int, top_k: int) -> float:
    """Expected distinct routed experts touched by ``n_tokens`` tokens: ``E (1 - (1 - k/E)^n)``.

    Assumes each token picks ``k`` of ``E`` experts uniformly and independently (occupancy).
    """
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** n_tokens)


# ---------------------------------------------------------------------------------------------
# Decay rule for mean accept lengths
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DecayRule:
    """``p_j = min(1, p1 r^(j-1))``: conditional acceptance decaying geometrically with depth."""

    p1: float
    r: float = 1.0

    def p(self, j: int) -> float:
        return min(1.0, max(0.0, self.p1 * self.r ** (j - 1)))

    def probs(self, steps: int) -> list[float]:
        return [self.p(j) for j in range(1, steps + 1)]

    def expected(self, steps: int) -> float:
        return expected_accept_len(self.probs(steps))


def _solve_constant_rate(mean: float, steps: int) -> float:
    """``p`` with ``(1 - p^(S+1)) / (1 - p) = mean`` (bisection; the left side rises with p)."""
    if mean <= 1.0:
        return 0.0
    if mean >= steps + 1:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if expected_accept_len_constant(mid, steps) < mean:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _and_list(items: Sequence) -> str:
    """``"5"``, ``"2 and 5"``, ``"2, 3 and 5"``."""
    words = [str(x) for x in items]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _expected_grid(p1: np.ndarray, r: np.ndarray, max_steps: int) -> np.ndarray:
    """E[L(S)] for S = 1..max_steps on broadcast grids of ``p1`` and ``r`` (last axis = S)."""
    j = np.arange(max_steps)
    p = np.clip(p1[..., None] * r[..., None] ** j, 0.0, 1.0)
    return 1.0 + np.cumsum(np.cumprod(p, axis=-1), axis=-1)


def fit_decay_rule(points: Sequence[tuple[int, float]], weights: Optional[Sequence[float]] = None) -> DecayRule:
    """Fit :class:`DecayRule` to mean accept lengths at one or more depths.

    Args:
        points: ``(steps, mean accept length)`` pairs; the mean must lie in ``[1, steps + 1]``.
        weights: least-squares weight per point (e.g. request-cycles); equal by default.

    Returns:
        One distinct depth: ``r = 1`` and the constant rate solving Leviathan's closed form
        (weighted mean of the points at that depth). Several depths: ``(p1, r)`` minimising
        ``sum w (E[L(S_i)] - mean_i)^2`` over ``p1 in [0, 1]``, ``r`` in :data:`_R_BOUNDS`
        (grid search with zoom; two depths are fitted exactly when the rule can).

    Raises:
        ValueError: no points, steps < 1, or a mean outside ``[1, steps + 1]``.
    """
    if not points:
        raise ValueError("no mean accept lengths to fit")
    w = np.ones(len(points)) if weights is None else np.asarray(weights, dtype=float)
    for s, m in points:
        if s < 1 or not (1.0 - 1e-9 <= m <= s + 1 + 1e-9):
            raise ValueError(f"mean accept length {m} impossible with {steps_text(s)}")
    depths = sorted({int(s) for s, _ in points})
    if len(depths) == 1:
        mean = float(np.average([m for _, m in points], weights=w))
        return DecayRule(_solve_constant_rate(mean, depths[0]), 1.0)
    steps = np.array([int(s) for s, _ in points])
    means = np.array([float(m) for _, m in points])
    smax = int(steps.max())

    def sse(p1g: np.ndarray, rg: np.ndarray) -> np.ndarray:
        e = _expected_grid(p1g, rg, smax)[..., steps - 1]
        return np.sum(w * (e - means) ** 2, axis=-1)

    p_lo, p_hi = 0.0, 1.0
    r_lo, r_hi = _R_BOUNDS
    best = (0.5, 1.0)
    for n in (201, 41, 41, 41, 41, 41):
        pg, rg = np.meshgrid(np.linspace(p_lo, p_hi, n), np.linspace(r_lo, r_hi, n), indexing="ij")
        err = sse(pg, rg)
        i, k = np.unravel_index(int(np.argmin(err)), err.shape)
        best = (float(pg[i, k]), float(rg[i, k]))
        dp, dr = 2 * (p_hi - p_lo) / (n - 1), 2 * (r_hi - r_lo) / (n - 1)
        p_lo, p_hi = max(0.0, best[0] - dp), min(1.0, best[0] + dp)
        r_lo, r_hi = max(_R_BOUNDS[0], best[1] - dr), min(_R_BOUNDS[1], best[1] + dr)
    return DecayRule(*best)


def fit_decay_to_positions(p: Sequence[float], weights: Sequence[float]) -> DecayRule:
    """Weighted least squares of ``log p_j = log p1 + (j-1) log r`` over positions with ``p_j > 0``.

    Used only to continue measured per-position acceptance beyond the deepest measured position.
    One usable position gives ``r = 1``; none gives ``p1 = 0``.
    """
    js = [j + 1 for j, pj in enumerate(p) if pj > 0 and weights[j] > 0]
    if not js:
        return DecayRule(0.0, 1.0)
    if len(js) == 1:
        return DecayRule(float(p[js[0] - 1]), 1.0)
    x = np.array(js, dtype=float) - 1.0
    y = np.log([p[j - 1] for j in js])
    sw = np.sqrt([weights[j - 1] for j in js])
    a = np.stack([np.ones_like(x), x], axis=1) * sw[:, None]
    coef, *_ = np.linalg.lstsq(a, y * sw, rcond=None)
    return DecayRule(float(math.exp(coef[0])), float(math.exp(coef[1])))


# ---------------------------------------------------------------------------------------------
# Acceptance model
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MeanPoint:
    """A mean accept length measured at one depth; ``samples`` = request-cycles behind it (or None)."""

    steps: int
    accept_len: float
    samples: Optional[int] = None


@dataclass(frozen=True)
class Position:
    """Conditional acceptance of draft position ``j`` with its 95% interval.

    ``source`` is ``"measured"`` (counts, Wilson interval), ``"rule"`` (implied by mean accept
    lengths through the decay rule) or ``"extrapolated"`` (beyond the deepest observed position).
    ``low``/``high`` are ``None`` when no sample count is known.
    """

    j: int
    p: float
    low: Optional[float]
    high: Optional[float]
    accepted: Optional[int] = None
    reached: Optional[int] = None
    source: str = "measured"

    def to_dict(self) -> dict:
        return {"j": self.j, "p": _rnd(self.p, 4), "low": _rnd(self.low, 4), "high": _rnd(self.high, 4),
                "accepted": self.accepted, "reached": self.reached, "source": self.source}


@dataclass(frozen=True)
class AcceptanceModel:
    """Per-position acceptance for any depth, measured where possible, else by the decay rule.

    Build it with :meth:`from_counts` (per-request accept lengths) or :meth:`from_means`.
    """

    source: str
    observed_depth: int
    measured: tuple[Position, ...]
    rule: DecayRule
    samples: Optional[int] = None
    rule_low: Optional[DecayRule] = None
    rule_high: Optional[DecayRule] = None
    #: the mean accept lengths it was built from (:meth:`from_means`; empty for counts)
    points: tuple[MeanPoint, ...] = ()
    #: variance of the measured acceptance over what independent request-cycles give (>= 1;
    #: from batch means over the cycle sequence): counts weigh ``1 / dispersion`` in intervals
    dispersion: float = 1.0
    #: mean accept lengths of runs without counts, deeper than the counted positions
    #: (:meth:`from_counts`): they set the decay past :attr:`observed_depth`
    beyond: tuple[MeanPoint, ...] = ()

    @classmethod
    def from_counts(cls, counts: Sequence[tuple[int, int]], dispersion: float = 1.0,
                    beyond: Sequence[MeanPoint] = ()) -> "AcceptanceModel":
        """From per-position ``(accepted, reached)`` counts (sum them over runs of any depth).

        Positions never reached are dropped from the end; ``samples`` = reached at position 1.
        ``dispersion`` (>= 1): the counts' variance over the binomial one; the Wilson intervals use
        ``counts / dispersion`` as their sample. ``beyond``: mean accept lengths of runs without
        counts at depths past the counted ones (a stock log, an inspect document without a
        histogram); the decay past the counted positions is fitted to them (:func:`beyond_decay`)
        instead of continuing the counted positions' trend. Points at other depths are ignored.

        Raises:
            ValueError: no position was reached, accepted > reached somewhere, or dispersion < 1.
        """
        if not dispersion >= 1.0:
            raise ValueError(f"dispersion {dispersion!r} is below 1")
        counts = [(int(a), int(n)) for a, n in counts]
        while counts and counts[-1][1] == 0:
            counts.pop()
        if not counts:
            raise ValueError("no draft position was reached: no acceptance to measure")
        pos = []
        for j, (a, n) in enumerate(counts, start=1):
            if n == 0:
                raise ValueError(f"position {j} never reached while a deeper one was")
            lo, hi = wilson_interval(a / dispersion, n / dispersion)
            pos.append(Position(j, a / n, lo, hi, a, n, "measured"))
        rule = fit_decay_to_positions([q.p for q in pos], [q.reached for q in pos])
        deeper = tuple(sorted((b for b in beyond if b.steps > len(pos)), key=lambda b: b.steps))
        source = "per-request accept lengths"
        if deeper:
            source += (f"; past position {len(pos)}, the mean accept length at "
                       f"{_and_list(sorted({b.steps for b in deeper}))} steps")
        return cls(
            source=source, observed_depth=len(pos), measured=tuple(pos),
            rule=rule, samples=counts[0][1], dispersion=float(dispersion), beyond=deeper,
        )

    @property
    def _beyond_cap(self) -> float:
        """The highest rate a position past the counted ones takes from :attr:`beyond`."""
        return max(RISE_CAP, max(q.p for q in self.measured))

    @functools.cached_property
    def _beyond_decays(self) -> tuple[float, Optional[float], Optional[float]]:
        """``(r, r_low, r_high)`` past the counted positions from :attr:`beyond`, from the last
        counted rate up to :attr:`_beyond_cap`: fitted to the means, and to every mean moved by
        ``-+1.96`` of its standard error (the chain's variance at the fitted rates over its
        request-cycles; both None when a point has no count). Computed once per model."""
        anchor, cap = self.measured[-1].p, self._beyond_cap
        known = np.array([[q.p for q in self.measured]])
        depths = [b.steps for b in self.beyond]
        weights = [float(b.samples or 1) for b in self.beyond]
        one = np.array([anchor]), np.array([cap])

        def fit(means: list[float]) -> float:
            return float(beyond_decay(known, *one, depths, np.array([means]), weights)[0])

        r = fit([b.accept_len for b in self.beyond])
        if not all(b.samples for b in self.beyond):
            return r, None, None
        d = self.observed_depth
        moved = {-1: [], 1: []}
        for b in self.beyond:
            rates = [q.p for q in self.measured] + [min(anchor * r ** k, cap) for k in range(1, b.steps - d + 1)]
            half = Z95 * math.sqrt(accept_len_moments(rates)[1] * self.dispersion / b.samples)
            for sign in (-1, 1):
                moved[sign].append(min(b.steps + 1.0, max(1.0, b.accept_len + sign * half)))
        return r, fit(moved[-1]), fit(moved[1])

    @classmethod
    def from_means(cls, points: Sequence[MeanPoint]) -> "AcceptanceModel":
        """From mean accept lengths at one or more depths, through the decay rule.

        The 95% interval, when every point has ``samples``: each mean moved by
        ``+-1.96 sd / sqrt(samples)`` (``sd`` implied by the fitted rule, cycles treated as
        independent) and the rule refitted. Without sample counts there is no interval.

        Raises:
            ValueError: no points, or an impossible mean (see :func:`fit_decay_rule`).
        """
        if not points:
            raise ValueError("no mean accept lengths")
        pairs = [(p.steps, p.accept_len) for p in points]
        known = all(p.samples for p in points)
        weights = [float(p.samples) for p in points] if known else None
        rule = fit_decay_rule(pairs, weights)
        depth = max(p.steps for p in points)
        low = high = None
        if known:
            shifted = {-1: [], 1: []}
            for pt in points:
                _, var = accept_len_moments(rule.probs(pt.steps))
                half = Z95 * math.sqrt(var / pt.samples)
                for sign in (-1, 1):
                    m = min(pt.steps + 1.0, max(1.0, pt.accept_len + sign * half))
                    shifted[sign].append((pt.steps, m))
            low, high = fit_decay_rule(shifted[-1], weights), fit_decay_rule(shifted[1], weights)
        kind = ("one depth: p_j = p1 r^(j-1), r not measured" if len({p.steps for p in points}) == 1
                else "p_j = p1 r^(j-1)")
        pos = tuple(
            Position(j, rule.p(j), low.p(j) if low else None, high.p(j) if high else None, source="rule")
            for j in range(1, depth + 1)
        )
        return cls(
            source=f"mean accept length at {_and_list(sorted({p.steps for p in points}))} steps ({kind})",
            observed_depth=depth, measured=pos, rule=rule,
            samples=sum(p.samples for p in points) if known else None, rule_low=low, rule_high=high,
            points=tuple(points),
        )

    def positions(self, steps: int) -> list[Position]:
        """Positions ``1..steps``; beyond :attr:`observed_depth` continued by the rule with ``min(r, 1)``."""
        out = list(self.measured[:steps])
        if steps <= self.observed_depth:
            return out
        d = self.observed_depth
        last = self.measured[d - 1]
        if self.beyond:
            # past the counted positions, the decay the deeper runs' mean accept lengths give
            cap = self._beyond_cap
            decay, r_lo, r_hi = self._beyond_decays
            for j in range(d + 1, steps + 1):
                pj = min(last.p * decay ** (j - d), cap)
                lo = None if r_lo is None else min(pj, last.p * r_lo ** (j - d), cap)
                hi = None if r_hi is None else max(pj, min(last.p * r_hi ** (j - d), cap))
                out.append(Position(j, pj, lo, hi, source="rule" if j <= self.beyond[-1].steps else "extrapolated"))
            return out
        anchor = self.rule.p(d)
        if last.low is not None:  # the rule's value, unless the last measured interval rules it out
            anchor = min(max(anchor, last.low), last.high)
        decay = min(self.rule.r, 1.0)
        for j in range(d + 1, steps + 1):
            pj = min(1.0, anchor * decay ** (j - d))
            lo = hi = None
            if last.low is not None and last.p > 0:
                lo = min(pj, pj * last.low / last.p)
                hi = min(1.0, max(pj, pj * last.high / last.p))
            out.append(Position(j, pj, lo, hi, source="extrapolated"))
        return out

    def expected(self, steps: int) -> tuple[float, Optional[float], Optional[float]]:
        """``(E[L(S)], low, high)``; bounds evaluate E at every position's bound (E rises in each p_j)."""
        if steps <= 0:
            return 1.0, 1.0, 1.0
        pos = self.positions(steps)
        mean = expected_accept_len([q.p for q in pos])
        if any(q.low is None for q in pos):
            return mean, None, None
        lo = expected_accept_len([q.low for q in pos])
        hi = expected_accept_len([q.high for q in pos])
        return mean, min(lo, mean), max(hi, mean)

    def extrapolated(self, steps: int) -> bool:
        """Whether ``steps`` lies past every depth a run measured (counted positions, or a deeper
        run's mean accept length)."""
        return steps > max([self.observed_depth] + [b.steps for b in self.beyond])

    def to_dict(self, steps: int) -> dict:
        return {
            "source": self.source, "observed_depth": self.observed_depth, "samples": self.samples,
            "dispersion": _rnd(self.dispersion, 3),
            "decay_rule": {"p1": _rnd(self.rule.p1, 4), "r": _rnd(self.rule.r, 4)},
            "per_position_acceptance": [q.to_dict() for q in self.positions(max(steps, self.observed_depth))],
        }


# ---------------------------------------------------------------------------------------------
# Cycle cost
# ---------------------------------------------------------------------------------------------


#: The least growth in expected distinct experts (experts) between two widths for an MoE shape to
#: interpolate or extrapolate along them (:meth:`WidthShape.grows`); half an expert's load.
MIN_EXPERT_GAIN = 0.5


@dataclass(frozen=True)
class WidthShape:
    """Interpolation shape of the verify cost over verified tokens ``n``.

    Dense targets: ``n`` (linear). MoE targets (both fields set): distinct experts
    ``E (1 - (1 - k/E)^n)`` (:func:`distinct_experts`).
    """

    num_experts: Optional[int] = None
    top_k: Optional[int] = None

    def __call__(self, n: float) -> float:
        if self.num_experts and self.top_k:
            return distinct_experts(n, self.num_experts, self.top_k)
        return float(n)

    def grows(self, a: float, b: float) -> bool:
        """Whether the shape still grows from width ``a`` to ``b > a`` (tokens): always for the
        linear one; for the MoE one, by at least :data:`MIN_EXPERT_GAIN` experts. Below that every
        expert is loaded at both widths, and a cost difference between them is the dense part's:
        read along the experts, it would be a step at one width and flat beyond."""
        if self.num_experts and self.top_k:
            return self(b) - self(a) >= MIN_EXPERT_GAIN
        return b > a

    @property
    def label(self) -> str:
        if self.num_experts and self.top_k:
            return f"distinct experts E(1-(1-k/E)^n), E={self.num_experts}, k={self.top_k}"
        return "linear in verified tokens"


LINEAR = WidthShape()

#: the verify forward at width bs over the no-spec decode step, central value (the middle of
#: :data:`uncertainty.VERIFY_MODE_OVERHEAD`): carries one baseline to other batch sizes when the verify
#: was measured at one width (:meth:`CycleCostModel.baseline_step_ms`)
VERIFY_MODE_OVERHEAD_CENTRAL = 0.25


@dataclass(frozen=True)
class MeasuredCurve:
    """``y(x)`` through measured points, piecewise linear in ``shape(x)`` between them.

    Outside the measured range: a straight line in ``x`` from the nearest point with the nearest
    segment's secant slope, never below 0 (a cost that falls as the batch or the verify widens is
    a measurement artefact, held flat instead), clamped at 0 ms, flagged extrapolated (a saturating
    shape such as the MoE curve is used only between measured points). One point: held constant
    (flagged away from it). Duplicate ``x`` are averaged with their weights.
    """

    points: tuple[tuple[float, float], ...]
    shape: WidthShape = LINEAR

    @classmethod
    def from_points(cls, pts: Sequence[tuple[float, float, float]], shape: WidthShape = LINEAR) -> Optional["MeasuredCurve"]:
        """From ``(x, y, weight)`` triples; ``None`` when there are none."""
        acc: dict[float, list[float]] = {}
        for x, y, w in pts:
            s = acc.setdefault(float(x), [0.0, 0.0])
            s[0] += w * y
            s[1] += w
        if not acc:
            return None
        return cls(tuple(sorted((x, s[0] / s[1]) for x, s in acc.items())), shape)

    def __call__(self, x: float) -> tuple[float, bool]:
        pts = self.points
        if len(pts) == 1:
            return pts[0][1], not math.isclose(x, pts[0][0])
        if x < pts[0][0] or x > pts[-1][0]:
            return max(0.0, self.unclamped(x)), True
        i = min(max(int(np.searchsorted([px for px, _ in pts], x)) - 1, 0), len(pts) - 2)
        (x0, y0), (x1, y1) = pts[i], pts[i + 1]
        g, g0, g1 = self.shape(x), self.shape(x0), self.shape(x1)
        if not self.shape.grows(x0, x1):  # every expert loaded at both widths: no bend left
            g, g0, g1 = x, x0, x1
        return y0 + (y1 - y0) * (g - g0) / (g1 - g0), False

    def unclamped(self, x: float) -> float:
        """``y(x)`` (ms) as :meth:`__call__` gives it, but outside the measured range the straight
        line in ``x`` with the nearest segment's secant slope (no saturating shape is trusted where
        nothing was measured) is not clamped at 0 ms: a difference of two such values keeps the
        measured slope."""
        pts = self.points
        if len(pts) == 1 or pts[0][0] <= x <= pts[-1][0]:
            return self(x)[0]
        (x0, y0), (x1, y1) = pts[:2] if x < pts[0][0] else pts[-2:]
        slope = max(0.0, (y1 - y0) / (x1 - x0))
        ax, ay = (x0, y0) if x < x0 else (x1, y1)
        return ay + slope * (x - ax)

    @property
    def x_range(self) -> tuple[float, float]:
        return self.points[0][0], self.points[-1][0]

    def falls(self) -> Optional[tuple[tuple[float, float], tuple[float, float]]]:
        """The first pair of neighbouring points where ``y`` falls as ``x`` grows, else ``None``."""
        return next(((a, b) for a, b in zip(self.points, self.points[1:]) if b[1] < a[1]), None)

    def biggest_fall(self) -> tuple[Optional[tuple[tuple[float, float], tuple[float, float]]], int]:
        """``(the neighbouring pair whose y falls most, relatively, beyond FALL_TOL, how many do)``;
        ``(None, 0)`` when none does."""
        pairs = [(a, b) for a, b in zip(self.points, self.points[1:]) if b[1] < a[1] * (1.0 - FALL_TOL)]
        if not pairs:
            return None, 0
        return max(pairs, key=lambda p: (p[0][1] - p[1][1]) / p[0][1]), len(pairs)

    def fall_notes(self, what: str, unit: str, why: str = "") -> list[str]:
        """``[note]`` naming the largest fall of ``what`` (ms) over ``x`` in ``unit`` beyond
        :data:`FALL_TOL` (smaller ones are the points' own noise: a serving log's hundred widths
        dip here and there), and how many there are, else ``[]``. A fall at either end is held flat
        beyond the measured widths (:meth:`unclamped`); between them the curve follows the points."""
        fall, count = self.biggest_fall()
        if fall is None:
            return []
        (xa, ya), (xb, yb) = fall
        held = ("held flat beyond the measured widths" if xa == self.points[-2][0] or xa == self.points[0][0]
                else "the curve follows the measured points there")
        more = f" (one of {count} falls over {100 * FALL_TOL:.0f}%)" if count > 1 else ""
        u = unit[:-1] if xa == 1 and unit.endswith("s") else unit
        return [f"{what} falls from {ya:.2f} ms at {xa:g} {u} to {yb:.2f} ms at {xb:g}{why}{more}: {held}"]


def span_text(values: Sequence[int]) -> str:
    """``"1-4, 8, 16"`` for integers (ascending; consecutive ones as a range): batch sizes or depths
    named in a note (a serving log's 32 batch sizes had been listed one by one in every row)."""
    values = sorted(set(values))
    parts, start = [], None
    for i, v in enumerate(values):
        if start is None:
            start = v
        if i + 1 == len(values) or values[i + 1] != v + 1:
            parts.append(str(start) if start == v else f"{start}-{v}")
            start = None
    return ", ".join(parts)


def _least_period(observations: Sequence["CycleObservation"]) -> dict[int, float]:
    """``{bs: the least cycle period measured there}`` (ms): :attr:`CycleCostModel.step_ceiling`."""
    out: dict[int, float] = {}
    for ob in observations:
        out[ob.bs] = min(out.get(ob.bs, math.inf), ob.total_ms)
    return out


#: a fall of a measured cost curve under this share of its higher point is the points' own noise
#: and goes unnamed (:meth:`MeasuredCurve.fall_notes`)
FALL_TOL = 0.02


@dataclass(frozen=True)
class CycleObservation:
    """Mean phase times of one measured configuration (ms per cycle).

    ``total_ms`` is required; the phases are optional (a published table gives only totals,
    derived as ``1000 bs accept_len / tok_s``). ``weight`` = cycles behind the means.
    ``total_se_ms``: standard error of ``total_ms`` (ms; per-cycle sd / sqrt(cycles)), None when unknown.
    ``prep_ms``: the host draft preparation inside ``other_ms`` (ms; device-span lines), None when unknown.
    """

    bs: int
    steps: int
    total_ms: float
    draft_ms: Optional[float] = None
    verify_ms: Optional[float] = None
    extend_ms: Optional[float] = None
    other_ms: Optional[float] = None
    weight: float = 1.0
    total_se_ms: Optional[float] = None
    prep_ms: Optional[float] = None

    @property
    def has_phases(self) -> bool:
        return self.verify_ms is not None and (self.draft_ms is not None or self.steps <= 1)

    @property
    def verified_tokens(self) -> int:
        return self.bs * (self.steps + 1)


@dataclass(frozen=True)
class CyclePrediction:
    """Predicted cycle at ``(bs, steps)``: phase times in ms (``None`` in whole-cycle mode)."""

    bs: int
    steps: int
    total_ms: float
    draft_ms: Optional[float] = None
    verify_ms: Optional[float] = None
    extend_ms: Optional[float] = None
    other_ms: Optional[float] = None
    extrapolated: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {k: _rnd(getattr(self, k), 3) for k in ("draft_ms", "verify_ms", "extend_ms", "other_ms", "total_ms")}


@dataclass(frozen=True)
class CycleCostModel:
    """Cycle time ``T(bs, S)`` from measured phases (README, "eagle-cycle advise"), or from whole-cycle times.

    *phases* mode (any observation with phases): ``T = (S-1) t_step(bs) + V(bs(S+1)) +
    X(bs(S+1)) + O(bs)`` where ``V`` (verify) runs through the measured verify points and the
    no-spec one-token points ``(bs, 1000 bs / baseline_tok_s)`` in ``shape``; ``X``
    (draft-extend, a dense draft forward) is linear in verified tokens; ``t_step`` (per draft
    forward) and ``O`` (other) are linear in bs. A curve with one point is held constant.
    Predictions outside the measured verify widths or batch sizes are flagged extrapolated.

    *totals* mode (no phases anywhere): ``T`` is linear in verified tokens through the measured
    whole-cycle times; with one measured width the no-spec step is added as the ``S = 0`` point.
    The MoE shape is not applied here: it describes the verify alone, which a total does not
    isolate.
    """

    mode: str
    shape: WidthShape
    verify: Optional[MeasuredCurve] = None
    extend: Optional[MeasuredCurve] = None
    draft_step: Optional[MeasuredCurve] = None
    other: Optional[MeasuredCurve] = None
    total: Optional[MeasuredCurve] = None
    baseline_ms: Mapping[int, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    bs_range: tuple[int, int] = (0, 0)
    verify_runs: Optional[MeasuredCurve] = None   # the runs' verify points alone (no baseline among them)
    #: per batch size a run measured, the least cycle period it measured there (ms): a no-spec
    #: decode step carried there is never above it (a cycle holds a verify forward over more tokens
    #: for the same requests, and host time as a decode step does; a verify's device span alone
    #: leaves that host time out, and had capped an 8.0 ms step at 6.06)
    step_ceiling: Mapping[int, float] = field(default_factory=dict)
    #: batch sizes whose no-spec decode step is slower than a cycle a run measured there
    #: (:attr:`step_ceiling`): a baseline from another setup or load, which cannot bound a verify
    #: forward over more tokens from below. It stays the speculation-off figure there
    #: (:attr:`baseline_ms`) but shapes no cost curve and anchors none (helper 98: a 30 tok/s
    #: baseline against 3- and 5-step runs at 111 and 119 tok/s held every verify at its 33.3 ms step,
    #: predicted the measured depths 28% low and recommended 10 steps)
    unanchored: frozenset = frozenset()

    @classmethod
    def fit(cls, observations: Sequence[CycleObservation], baseline_tok_s: Optional[Mapping[int, float]] = None,
            shape: WidthShape = LINEAR) -> "CycleCostModel":
        """Fit the curves; ``baseline_tok_s`` maps bs -> no-spec output tok/s.

        Raises:
            ValueError: no observation, a non-positive or non-finite cycle time, verify time or
                baseline throughput, or a negative or non-finite phase time.
        """
        if not observations:
            raise ValueError("no measured cycle to fit the cost model to")
        base = {}
        for bs, tok in (baseline_tok_s or {}).items():
            if not tok or not math.isfinite(tok) or tok <= 0:
                raise ValueError(f"baseline throughput must be a positive finite tok/s, got {tok}")
            base[int(bs)] = 1000.0 * int(bs) / float(tok)
        for ob in observations:
            if not ob.total_ms or not math.isfinite(ob.total_ms) or ob.total_ms <= 0:
                raise ValueError(f"cycle time must be positive (bs {ob.bs}, {ob.steps} steps), got {ob.total_ms}")
            for name in ("draft_ms", "verify_ms", "extend_ms", "other_ms"):
                v = getattr(ob, name)
                if v is not None and (not math.isfinite(v) or v < 0):
                    raise ValueError(f"{name} must be a finite time >= 0 (bs {ob.bs}, {ob.steps} steps), got {v}")
            if ob.verify_ms is not None and ob.verify_ms <= 0:
                raise ValueError(f"verify_ms must be positive (bs {ob.bs}, {ob.steps} steps), got {ob.verify_ms}")
        phased = [ob for ob in observations if ob.has_phases]
        notes = []
        # a decode step slower than a cycle measured at its batch size bounds no verify curve
        ceiling = _least_period(phased or observations)
        curve_base = {b: ms for b, ms in base.items() if ms <= ceiling.get(b, math.inf)}
        unanchored = frozenset(base) - frozenset(curve_base)
        if phased:
            run_verify = [(ob.verified_tokens, ob.verify_ms, ob.weight) for ob in phased]
            derived, left = cls._derived_verify(observations, curve_base, shape)
            if derived:
                notes.append(f"{len(derived)} run(s) without a phase breakdown (whole-cycle times) set the verify "
                             "time at their width: their cycle less the draft, draft-extend and other time the "
                             "phase-timed runs give there")
            if left:
                notes.append(f"{left} run(s) without a phase breakdown not used for cycle time (a phase-timed run "
                             "measured their depth; the draft step is unknown, only 1-step runs being timed; or "
                             "their cycle leaves the verify less than the no-spec decode step: another setup or "
                             "load?)")
            run_verify += derived
            verify = MeasuredCurve.from_points(run_verify + [(bs, ms, 1.0) for bs, ms in curve_base.items()], shape)
            extend = MeasuredCurve.from_points(
                [(ob.verified_tokens, ob.extend_ms or 0.0, ob.weight) for ob in phased])
            steps_pts = [(ob.bs, ob.draft_ms / (ob.steps - 1), ob.weight) for ob in phased if ob.steps > 1]
            draft = MeasuredCurve.from_points(steps_pts)
            if draft is None:
                from .uncertainty import UNKNOWN_STEP   # here: uncertainty imports this module

                notes.append("draft step cost unknown (only 1-step runs): deeper depths take one draft forward as "
                             f"{UNKNOWN_STEP[0]:g}-{UNKNOWN_STEP[1]:g} times the draft-extend at their batch size "
                             "(an assumption, not a measurement; a run at 2 steps or more measures it)")
            other = MeasuredCurve.from_points([(ob.bs, other_time(ob), ob.weight) for ob in phased])
            if len(extend.points) == 1:
                notes.append("draft-extend measured at one width: its growth with the width is assumed (a fixed cost "
                             "worth 16-1024 tokens of its per-token cost)")
            if len(verify.points) == 1:
                notes.append("verify measured at one width and no baseline: its growth with the width is assumed, flat "
                             "to proportional (give --baseline-tok-s)" if not unanchored else
                             "verify measured at one width, and the no-spec baseline is slower than a cycle measured "
                             "at its batch size, so it bounds no verify: its growth with the width is assumed, flat "
                             "to proportional")
            fall, _ = verify.biggest_fall()
            run_widths = {float(x) for x, _, _ in run_verify}
            # a fall to or from a point no run measured: the no-spec decode step there
            from_base = fall is not None and not {float(fall[0][0]), float(fall[1][0])} <= run_widths
            notes += verify.fall_notes("verify time", "tokens",
                                       " (a baseline from another setup, or a client's throughput with its prefill?)"
                                       if from_base else " (runs from different setups or loads?)")
            sizes = [ob.bs for ob in phased]
            # the whole period, not the verify: a device span leaves out host time the decode step holds
            return cls("phases", shape, verify=verify, extend=extend, draft_step=draft, other=other,
                       baseline_ms=base, notes=tuple(notes), bs_range=(min(sizes), max(sizes)),
                       verify_runs=MeasuredCurve.from_points(run_verify, shape), step_ceiling=ceiling,
                       unanchored=unanchored)
        pts = [(ob.verified_tokens, ob.total_ms, ob.weight) for ob in observations]
        if len({ob.verified_tokens for ob in observations}) == 1:
            pts += [(bs, ms, 1.0) for bs, ms in curve_base.items()]
        notes.append("no phase breakdown (a published table, bench records or stock Decode batch lines): whole-cycle "
                     "times only, so depths are ranked only as well as a two-point fit of those times can rank them; "
                     "per-cycle [eagle-cycle] logs separate verify, draft and draft-extend")
        total = MeasuredCurve.from_points(pts)
        # whole-cycle times shape the curve of their own batch size only (another batch size's cycle
        # at the same width is another depth's): a fall is looked for within each batch size
        sizes = sorted({ob.bs for ob in observations})
        for b in sizes:
            own = MeasuredCurve.from_points([(ob.verified_tokens, ob.total_ms, ob.weight)
                                             for ob in observations if ob.bs == b])
            notes += [f"bs {b}: {n}" if len(sizes) > 1 else n for n in own.fall_notes("cycle time", "verified tokens")]
        if shape.num_experts:
            notes.append("MoE shape needs the verify phase; not applied to whole-cycle times")
        return cls("totals", shape, total=total, baseline_ms=base, notes=tuple(notes),
                   step_ceiling=ceiling, unanchored=unanchored)

    @classmethod
    def _derived_verify(cls, observations: Sequence[CycleObservation], base: Mapping[int, float],
                        shape: WidthShape) -> tuple[list[tuple[int, float, float]], int]:
        """``([(width, verify ms, weight)], left)``: a verify point for each whole-cycle observation
        (no phase breakdown) beside phase-timed ones, its cycle time less the draft, draft-extend and
        other time the phase-timed observations predict at its batch size and depth, so that every
        measured width shapes the verify curve (issue 13: the curves pass through all measured
        points); ``left``: whole-cycle observations not turned into one (a phase-timed run measured
        that depth; a depth past 1 where only 1-step runs were timed, whose draft forwards are
        unknown; or a verify left below the no-spec decode step at its batch size)."""
        phased = [ob for ob in observations if ob.has_phases]
        whole = [ob for ob in observations if not ob.has_phases]
        if not whole:
            return [], 0
        model = cls.fit(phased, {b: 1000.0 * b / ms for b, ms in base.items()}, shape)
        timed = {(ob.bs, ob.steps) for ob in phased}
        out = []
        for ob in whole:
            # the draft forwards of a deeper run are unknown where only 1-step runs were timed: its
            # cycle would put them in the verify (helper 45: every deeper depth read 6-10% low)
            if (ob.bs, ob.steps) in timed or ob.steps < 1 or (ob.steps > 1 and model.draft_step is None):
                continue
            pred = model.predict(ob.bs, ob.steps)
            verify = ob.total_ms - (pred.total_ms - pred.verify_ms)
            # a verify no longer than the no-spec decode step at its batch size (a lower bound: the
            # same forward over fewer tokens) says the run is from another setup or load; it is left
            # out, so its poor fit is named (helper 45: a run 30% fast had reshaped the curve silently)
            step = model.baseline_step_ms(ob.bs)
            if verify > 0 and (step is None or verify >= step[0]):
                out.append((ob.verified_tokens, verify, ob.weight))
        return out, len(whole) - len(out)

    def predict(self, bs: int, steps: int) -> CyclePrediction:
        """Predicted cycle for ``steps >= 1`` draft steps at batch size ``bs``."""
        n = bs * (steps + 1)
        if self.mode == "totals":
            t, ex = self.total(n)
            return CyclePrediction(bs, steps, t, extrapolated=("cycle time",) if ex else ())
        flags = []
        v, ex = self.verify(n)
        if ex:
            flags.append("verify")
        if not self.bs_range[0] <= bs <= self.bs_range[1]:
            flags.append("batch size")  # draft step, draft-extend and other measured at other batch sizes
        x, _ = self.extend(n)
        step = self.draft_step(bs)[0] if self.draft_step else 0.0
        o = self.other(bs)[0]
        d = (steps - 1) * step
        return CyclePrediction(bs, steps, d + v + x + o, d if steps > 1 else None, v, x, o, tuple(flags))

    def baseline_step_ms(self, bs: int) -> Optional[tuple[float, bool]]:
        """No-spec decode step (ms) at ``bs``, and whether it is extrapolated; ``None`` if unknown,
        or where the extrapolation reaches no positive time there (a steep, compute-bound verify
        carried down to a small batch): no decode step is better than one of 0 ms, which refused the
        whole command.

        At a batch size without a baseline: with baselines at two batch sizes or more, their own
        line over the batch size (piecewise linear, the nearest secant beyond them: decode steps at
        other batch sizes are the same forward); with one, in phases mode, that baseline scaled by
        the runs' verify curve between its batch size and ``bs`` (``b0 V(bs) / V(b0)``: the only
        slope measured, and a verify-mode overhead in proportion to the forward drops out; the
        verify's own level is not the decode step's; with the verify measured at one width, the
        chord to it from ``b0 (1 + VERIFY_MODE_OVERHEAD_CENTRAL)`` at width ``b0``, the central
        curve of the ensemble's verify hypotheses), never above it at a smaller batch size nor
        below it at a larger one; in totals mode the one baseline."""
        if bs in self.baseline_ms:
            return self.baseline_ms[bs], False
        if not self.baseline_ms:
            return None
        if self.mode == "phases" and len(self.baseline_ms) == 1:
            (b0, ms0), = self.baseline_ms.items()
            runs = self.verify_runs or self.verify
            if len(runs.points) == 1 and not math.isclose(runs.points[0][0], b0):
                # one measured width: a flat curve would leave the decode step where it is at every
                # batch size while the verify hypotheses grow along the chord from the decode step;
                # the chord with the central verify-mode overhead is the slope they share
                (x0, y0), = runs.points
                anchor = min(ms0 * (1.0 + VERIFY_MODE_OVERHEAD_CENTRAL), y0)
                runs = MeasuredCurve(tuple(sorted([(float(b0), anchor), (x0, y0)])), LINEAR)
            at, at0 = runs.unclamped(bs), runs.unclamped(b0)
            # in proportion (a verify-mode overhead in proportion to the forward, as the ensemble's
            # anchor takes it, drops out); where the line reaches no positive time at b0, by difference
            ms = ms0 * at / at0 if at0 > 0 else ms0 + at - at0
            ms = min(ms, ms0) if bs < b0 else max(ms, ms0)
        else:
            ms = MeasuredCurve.from_points([(b, v, 1.0) for b, v in self.baseline_ms.items()])(bs)[0]
        # a decode step is one forward over bs tokens for the same bs requests as a cycle a run
        # measured here (its verify over more, and host time): never above that cycle (three
        # baselines at bs 7-9 whose line rose 1.3 ms per request had carried a 32.6 ms step to bs
        # 30, where the cycles took 19-20 ms, and every prediction there fell by half)
        if bs in self.step_ceiling:
            ms = min(ms, self.step_ceiling[bs])
        return (ms, True) if math.isfinite(ms) and ms > 0 else None

    def to_dict(self) -> dict:
        def pts(c):
            return None if c is None else [[x, _rnd(y, 4)] for x, y in c.points]
        return {
            "mode": self.mode, "verify_shape": self.shape.label,
            "verify_points_ms": pts(self.verify), "extend_points_ms": pts(self.extend),
            "draft_step_points_ms": pts(self.draft_step), "other_points_ms": pts(self.other),
            "total_points_ms": pts(self.total),
            "baseline_step_ms": {str(k): _rnd(v, 4) for k, v in self.baseline_ms.items()},
            "notes": list(self.notes),
        }


def other_time(ob: CycleObservation) -> float:
    """Time of ``ob`` outside draft, verify and draft-extend (ms): ``other_ms``, or what the
    measured total leaves of the phases (never below 0)."""
    if ob.other_ms is not None:
        return ob.other_ms
    return max(0.0, ob.total_ms - (ob.draft_ms or 0.0) - ob.verify_ms - (ob.extend_ms or 0.0))


# ---------------------------------------------------------------------------------------------
# Candidates and the recommendation
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """Prediction for one depth at one batch size. ``steps == 0`` is the no-spec baseline.

    ``gain_tokens`` / ``cost_ms``: what the last step adds over ``steps - 1`` (accept length per
    request, ms per cycle); the step pays when ``gain_tokens / E(S-1) > cost_ms / T(S-1)``.
    """

    bs: int
    steps: int
    accept_len: float
    cycle: CyclePrediction
    tok_s: float
    accept_len_low: Optional[float] = None
    accept_len_high: Optional[float] = None
    tok_s_low: Optional[float] = None
    tok_s_high: Optional[float] = None
    baseline_tok_s: Optional[float] = None
    gain_tokens: Optional[float] = None
    cost_ms: Optional[float] = None
    extrapolated: tuple[str, ...] = ()
    #: what dominates the interval ("verify shape", "acceptance beyond position 3", ...), when known
    interval_source: Optional[str] = None

    @property
    def num_draft_tokens(self) -> int:
        return self.steps + 1 if self.steps else 0

    def speedup(self, tok_s: Optional[float] = None) -> Optional[float]:
        if not self.baseline_tok_s:
            return None
        return (self.tok_s if tok_s is None else tok_s) / self.baseline_tok_s

    def to_dict(self) -> dict:
        sp = self.speedup()
        return {
            "steps": self.steps, "topk": 1, "num_draft_tokens": self.num_draft_tokens, "bs": self.bs,
            "predicted_accept_len": _rnd(self.accept_len, 4),
            "accept_len_95": _pair(self.accept_len_low, self.accept_len_high, 4),
            "predicted_cycle_ms": _rnd(self.cycle.total_ms, 3), "cycle_phases_ms": self.cycle.to_dict(),
            "predicted_tok_s": _rnd(self.tok_s, 2), "tok_s_95": _pair(self.tok_s_low, self.tok_s_high, 2),
            "predicted_speedup": _rnd(sp, 4),
            "speedup_95": _pair(self.speedup(self.tok_s_low) if self.tok_s_low else None,
                                self.speedup(self.tok_s_high) if self.tok_s_high else None, 4),
            "marginal_accept_gain": _rnd(self.gain_tokens, 4), "marginal_cycle_ms": _rnd(self.cost_ms, 3),
            "extrapolated": bool(self.extrapolated), "extrapolated_parts": list(self.extrapolated),
            "interval_source": self.interval_source,
        }


def _candidate(acc: AcceptanceModel, cost: CycleCostModel, bs: int, steps: int,
               base: Optional[tuple[float, bool]]) -> Candidate:
    if base and not (math.isfinite(base[0]) and base[0] > 0):
        raise ValueError(f"no-spec decode step at bs {bs} extrapolates to {base[0]:.3g} ms: a measured "
                         "baseline at that batch size is needed")
    base_tok = 1000.0 * bs / base[0] if base else None
    if steps == 0:
        if base is None:
            raise ValueError("steps 0 (speculation off) needs a baseline throughput")
        cyc = CyclePrediction(bs, 0, base[0], extrapolated=("baseline",) if base[1] else ())
        return Candidate(bs, 0, 1.0, cyc, base_tok, 1.0, 1.0, base_tok, base_tok, base_tok,
                         extrapolated=cyc.extrapolated)
    e, lo, hi = acc.expected(steps)
    cyc = cost.predict(bs, steps)
    if not (math.isfinite(cyc.total_ms) and cyc.total_ms > 0):
        raise ValueError(f"predicted cycle time at bs {bs}, {steps} steps is {cyc.total_ms:.3g} ms: the measured "
                         "phase times cannot be extrapolated there")
    k = 1000.0 * bs / cyc.total_ms
    flags = (("acceptance",) if acc.extrapolated(steps) else ()) + cyc.extrapolated
    if base and base[1]:
        flags += ("baseline",)
    return Candidate(bs, steps, e, cyc, k * e, lo, hi, k * lo if lo else None, k * hi if hi else None,
                     base_tok, extrapolated=flags)


def predict_candidates(acc: AcceptanceModel, cost: CycleCostModel, bs: int, steps: Sequence[int]) -> list[Candidate]:
    """Predictions for every depth in ``steps`` at batch size ``bs``, sorted by depth.

    The no-spec baseline (``steps = 0``) is included whenever a baseline is known; depth 0 is
    ignored otherwise. Throughput ``1000 bs E[L(S)] / T(S)``; its interval uses the acceptance
    interval only (phase means over many cycles are taken as exact).

    Raises:
        ValueError: a predicted cycle time (or extrapolated no-spec step) that is not positive.
    """
    base = cost.baseline_step_ms(bs)
    wanted = sorted({int(s) for s in steps if s > 0} | ({0} if base else set()))
    out = []
    for s in wanted:
        c = _candidate(acc, cost, bs, s, base)
        if s > 0:
            prev = _candidate(acc, cost, bs, s - 1, base) if (s > 1 or base) else None
            if prev is not None:
                c = replace(c, gain_tokens=c.accept_len - prev.accept_len,
                             cost_ms=c.cycle.total_ms - prev.cycle.total_ms)
        out.append(c)
    return out


@dataclass(frozen=True)
class Recommendation:
    """The chosen depth (``steps == 0``: turn speculation off) with one sentence of why."""

    steps: int
    candidate: Candidate
    reason: str
    baseline_tok_s: Optional[float]
    #: whether some depth's 95% interval lies wholly above the no-spec baseline (None: no baseline
    #: at this batch size, or no interval)
    clears_baseline: Optional[bool] = None

    @property
    def speculation_off(self) -> bool:
        return self.steps == 0

    def to_dict(self) -> dict:
        c = self.candidate
        return {"steps": self.steps, "topk": 1, "num_draft_tokens": c.num_draft_tokens, "bs": c.bs,
                "speculation": "off" if self.steps == 0 else "on",
                "predicted_tok_s": _rnd(c.tok_s, 2), "predicted_speedup": _rnd(c.speedup(), 4),
                "clears_baseline": self.clears_baseline, "reason": self.reason}


def best_speculative(candidates: Sequence[Candidate]) -> Candidate:
    """Fastest candidate with ``steps > 0`` (the shallower one on a tie)."""
    spec = [c for c in candidates if c.steps > 0]
    if not spec:
        raise ValueError("no speculative depth among the candidates")
    return max(spec, key=lambda c: (c.tok_s, -c.steps))


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def _rnd(x: Optional[float], nd: int) -> Optional[float]:
    return None if x is None else round(float(x), nd)


def _pair(lo: Optional[float], hi: Optional[float], nd: int) -> Optional[list[float]]:
    if lo is None or hi is None:
        return None
    return [round(float(lo), nd), round(float(hi), nd)]
