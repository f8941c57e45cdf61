"""Formulas of the acceptance and cycle-cost model against hand-computed values and closed forms."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_eagle_cycle import costmodel as cm

# --- acceptance -----------------------------------------------------------------------------


def test_expected_accept_len_hand_values():
    # 1 + 0.8 + 0.8*0.5
    assert cm.expected_accept_len([0.8, 0.5]) == pytest.approx(2.2)
    # constant 0.5 at 2 steps: 1 + .5 + .25; closed form (1 - .5^3) / (1 - .5)
    assert cm.expected_accept_len([0.5, 0.5]) == pytest.approx(1.75)
    assert cm.expected_accept_len_constant(0.5, 2) == pytest.approx(1.75)
    assert cm.expected_accept_len([]) == 1.0
    assert cm.expected_accept_len([1.0] * 4) == 5.0
    assert cm.expected_accept_len([0.0, 0.9, 0.9]) == 1.0


@settings(max_examples=200, deadline=None)
@given(p=st.floats(0.0, 0.999), steps=st.integers(1, 12))
def test_constant_rate_matches_leviathan_closed_form(p, steps):
    """Leviathan et al. 2023 eq. (1): E = (1 - p^(S+1)) / (1 - p)."""
    assert cm.expected_accept_len([p] * steps) == pytest.approx((1 - p ** (steps + 1)) / (1 - p), rel=1e-12)
    assert cm.expected_accept_len_constant(p, steps) == pytest.approx((1 - p ** (steps + 1)) / (1 - p), rel=1e-12)


def test_accept_len_moments_hand_values():
    # P(L=1)=.2, P(L=2)=.8*.5=.4, P(L=3)=.4 -> mean 2.2, E[L^2] = .2 + 1.6 + 3.6 = 5.4
    mean, var = cm.accept_len_moments([0.8, 0.5])
    assert mean == pytest.approx(2.2)
    assert var == pytest.approx(5.4 - 2.2 ** 2)


def test_wilson_interval_hand_values():
    lo, hi = cm.wilson_interval(8, 10)
    assert (lo, hi) == (pytest.approx(0.4902, abs=1e-4), pytest.approx(0.9433, abs=1e-4))
    lo0, hi0 = cm.wilson_interval(0, 10)
    assert lo0 == 0.0 and hi0 == pytest.approx(0.2775, abs=1e-4)
    # symmetric in successes <-> failures
    a = cm.wilson_interval(3, 17)
    b = cm.wilson_interval(14, 17)
    assert a[0] == pytest.approx(1 - b[1]) and a[1] == pytest.approx(1 - b[0])
    assert cm.wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        cm.wilson_interval(5, 4)


def test_position_counts_from_histogram():
    # 10 request-cycles at 2 steps: L=1 twice, L=2 three times, L=3 five times
    assert cm.position_counts({1: 2, 2: 3, 3: 5}, 2) == [(8, 10), (5, 8)]
    with pytest.raises(ValueError):
        cm.position_counts({4: 1}, 2)  # 3 accepted drafts + bonus impossible with 2 steps


def test_distinct_experts():
    assert cm.distinct_experts(1, 384, 8) == pytest.approx(8.0)
    assert cm.distinct_experts(2, 384, 8) == pytest.approx(384 * (1 - (1 - 8 / 384) ** 2))
    assert cm.distinct_experts(2, 384, 8) == pytest.approx(15.8333, abs=1e-3)
    assert cm.distinct_experts(10_000, 128, 8) == pytest.approx(128.0)
    assert cm.distinct_experts(3, 16, 16) == pytest.approx(16.0)


def test_fit_decay_rule_one_depth_is_constant_rate():
    e = cm.expected_accept_len_constant(0.6, 5)
    rule = cm.fit_decay_rule([(5, e)])
    assert rule.r == 1.0 and rule.p1 == pytest.approx(0.6, abs=1e-9)


def test_fit_decay_rule_two_depths_recovers_rule():
    truth = cm.DecayRule(0.82, 0.93)
    pts = [(3, truth.expected(3)), (7, truth.expected(7))]
    rule = cm.fit_decay_rule(pts)
    assert rule.p1 == pytest.approx(0.82, abs=1e-4) and rule.r == pytest.approx(0.93, abs=1e-4)
    assert rule.expected(5) == pytest.approx(truth.expected(5), rel=1e-5)


def test_fit_decay_rule_rejects_impossible_mean():
    with pytest.raises(ValueError):
        cm.fit_decay_rule([(2, 3.5)])


def test_acceptance_from_counts_and_extrapolation():
    acc = cm.AcceptanceModel.from_counts([(80, 100), (40, 80)])
    pos = acc.positions(4)
    assert [q.p for q in pos[:2]] == [pytest.approx(0.8), pytest.approx(0.5)]
    assert [q.source for q in pos] == ["measured", "measured", "extrapolated", "extrapolated"]
    assert pos[0].low < 0.8 < pos[0].high
    # the decay of the measured positions continues, never rising past them
    assert pos[2].p < pos[1].p and pos[3].p < pos[2].p
    e, lo, hi = acc.expected(2)
    assert e == pytest.approx(2.2) and lo < e < hi
    assert not acc.extrapolated(2) and acc.extrapolated(3)


def test_acceptance_extrapolation_never_rises():
    acc = cm.AcceptanceModel.from_counts([(50, 100), (40, 50)])  # p rises 0.5 -> 0.8
    pos = acc.positions(5)
    assert all(q.p <= pos[1].p + 1e-12 for q in pos[2:])


def test_acceptance_from_means_interval_shrinks_with_samples():
    e = cm.expected_accept_len_constant(0.55, 5)
    small = cm.AcceptanceModel.from_means([cm.MeanPoint(5, e, 100)])
    big = cm.AcceptanceModel.from_means([cm.MeanPoint(5, e, 10_000)])
    m1, lo1, hi1 = small.expected(2)
    m2, lo2, hi2 = big.expected(2)
    assert m1 == pytest.approx(1 + 0.55 + 0.55 ** 2, abs=1e-6) == pytest.approx(m2)
    assert lo1 < lo2 < m2 < hi2 < hi1
    none = cm.AcceptanceModel.from_means([cm.MeanPoint(5, e, None)])
    assert none.expected(2)[1:] == (None, None)


# --- cycle cost -----------------------------------------------------------------------------


def test_measured_curve_moe_interpolation_hand_value():
    shape = cm.WidthShape(384, 8)
    curve = cm.MeasuredCurve.from_points([(1, 11.0, 1), (6, 28.0, 1)], shape)
    g = [cm.distinct_experts(n, 384, 8) for n in (1, 3, 6)]
    v3, ex = curve(3)
    assert not ex and v3 == pytest.approx(11.0 + 17.0 * (g[1] - g[0]) / (g[2] - g[0]))
    # outside: straight line in tokens with the end segment's slope, flagged
    v8, ex8 = curve(8)
    assert ex8 and v8 == pytest.approx(28.0 + 17.0 / 5 * 2)
    one = cm.MeasuredCurve.from_points([(4, 2.0, 1)])
    assert one(4) == (2.0, False) and one(9) == (2.0, True)


def test_cycle_time_formula_phases_mode():
    """T(S) = (S-1) t_step + V(bs(S+1)) + X(bs(S+1)) + O, V through the no-spec point."""
    obs = [cm.CycleObservation(bs=2, steps=3, total_ms=20.0, draft_ms=1.2, verify_ms=16.0, extend_ms=2.0, other_ms=0.8),
           cm.CycleObservation(bs=2, steps=5, total_ms=24.4, draft_ms=2.4, verify_ms=18.0, extend_ms=3.0, other_ms=1.0)]
    cost = cm.CycleCostModel.fit(obs, {2: 2000 / 14.0}, cm.LINEAR)  # no-spec step: 14 ms at bs 2
    assert cost.mode == "phases"
    pred = cost.predict(2, 4)  # 10 verified tokens, between 8 and 12
    assert pred.draft_ms == pytest.approx(3 * 0.6)
    assert pred.verify_ms == pytest.approx(17.0)
    assert pred.extend_ms == pytest.approx(2.5)
    assert pred.other_ms == pytest.approx(0.9)
    assert pred.total_ms == pytest.approx(1.8 + 17.0 + 2.5 + 0.9)
    p1 = cost.predict(2, 1)  # 4 verified tokens: between the no-spec 2 and 8
    assert p1.draft_ms is None and p1.verify_ms == pytest.approx(14.0 + 2.0 * 2 / 6)
    assert cost.baseline_step_ms(2) == (pytest.approx(14.0), False)


def test_cycle_time_totals_mode_is_linear_in_verified_tokens():
    obs = [cm.CycleObservation(bs=8, steps=3, total_ms=20.0), cm.CycleObservation(bs=8, steps=7, total_ms=28.0)]
    cost = cm.CycleCostModel.fit(obs, {8: 500.0}, cm.WidthShape(128, 8))
    assert cost.mode == "totals"
    assert cost.predict(8, 5).total_ms == pytest.approx(24.0)
    assert cost.predict(8, 5).extrapolated == ()
    assert cost.predict(8, 9).extrapolated == ("cycle time",)
    assert any("MoE" in n for n in cost.notes)


# --- candidates and recommendation ----------------------------------------------------------


def _model(p, draft_step, verify_slope, base_ms=10.0, bs=1):
    """Acceptance with known p_j; verify linear from the no-spec point; constant other."""
    n = 100_000
    counts, reached = [], n
    for pj in p:
        acc = round(reached * pj)
        counts.append((acc, reached))
        reached = acc
    acc_m = cm.AcceptanceModel.from_counts(counts)
    s = len(p)
    nv = bs * (s + 1)
    obs = cm.CycleObservation(bs=bs, steps=s, total_ms=0.0 + (s - 1) * draft_step + base_ms + verify_slope * (nv - bs) + 0.5,
                              draft_ms=(s - 1) * draft_step, verify_ms=base_ms + verify_slope * (nv - bs),
                              extend_ms=0.3, other_ms=0.2)
    cost = cm.CycleCostModel.fit([obs], {bs: 1000.0 * bs / base_ms})
    return acc_m, cost


def test_throughput_and_marginals():
    acc, cost = _model([0.8, 0.6, 0.5], draft_step=0.5, verify_slope=1.0)
    cands = cm.predict_candidates(acc, cost, 1, [1, 2, 3])
    assert [c.steps for c in cands] == [0, 1, 2, 3]
    c2 = cands[2]
    assert c2.accept_len == pytest.approx(1 + 0.8 + 0.48, abs=1e-3)
    t2 = 0.5 + (10 + 2 * 1.0) + 0.3 + 0.2
    assert c2.cycle.total_ms == pytest.approx(t2)
    assert c2.tok_s == pytest.approx(1000 * c2.accept_len / t2, rel=1e-6)
    assert c2.speedup() == pytest.approx(c2.tok_s / 100.0)
    assert c2.gain_tokens == pytest.approx(0.48, abs=1e-3)
    assert c2.cost_ms == pytest.approx(t2 - cands[1].cycle.total_ms)


def test_candidate_zero_needs_baseline():
    acc = cm.AcceptanceModel.from_counts([(5, 10)])
    cost = cm.CycleCostModel.fit([cm.CycleObservation(bs=1, steps=1, total_ms=10.0)])
    cands = cm.predict_candidates(acc, cost, 1, [0, 1, 2])
    assert [c.steps for c in cands] == [1, 2] and cands[0].speedup() is None
    assert math.isclose(cands[0].tok_s, 1000 * 1.5 / 10.0)


# --- unusable measurements are refused, not turned into nonsense or a ZeroDivisionError -------


@pytest.mark.parametrize("bad", [
    {"verify_ms": -28.1}, {"draft_ms": -0.5}, {"extend_ms": float("nan")}, {"other_ms": float("inf")},
    {"verify_ms": 0.0}, {"total_ms": float("inf")},
])
def test_fit_refuses_negative_zero_or_non_finite_phases(bad):
    good = dict(bs=1, steps=5, total_ms=29.45, draft_ms=0.95, verify_ms=28.1, extend_ms=0.25, other_ms=0.15)
    cm.CycleCostModel.fit([cm.CycleObservation(**good)], {1: 88.8})  # the seed case fits
    with pytest.raises(ValueError, match="bs 1, 5 steps"):
        cm.CycleCostModel.fit([cm.CycleObservation(**{**good, **bad})], {1: 88.8})


@pytest.mark.parametrize("tok", [float("inf"), float("nan"), 0.0, -88.8])
def test_fit_refuses_unusable_baseline(tok):
    obs = cm.CycleObservation(bs=1, steps=5, total_ms=29.45)
    with pytest.raises(ValueError, match="baseline throughput"):
        cm.CycleCostModel.fit([obs], {1: tok})


def test_non_positive_predicted_cycle_is_an_error_not_a_division():
    # totals 30 ms at 4 verified tokens, 60 ms at 6: 15 ms per token, so 2 tokens (1 step) extrapolates to 0 ms
    obs = [cm.CycleObservation(bs=1, steps=3, total_ms=30.0), cm.CycleObservation(bs=1, steps=5, total_ms=60.0)]
    cost = cm.CycleCostModel.fit(obs)
    assert cost.predict(1, 1).total_ms == 0.0
    acc = cm.AcceptanceModel.from_counts([(8, 10), (6, 8), (3, 6)])
    assert [c.steps for c in cm.predict_candidates(acc, cost, 1, [3, 5])] == [3, 5]
    with pytest.raises(ValueError, match="predicted cycle time at bs 1, 1 steps"):
        cm.predict_candidates(acc, cost, 1, [1, 3])


def test_verify_cost_never_falls_past_the_measured_widths():
    # a baseline slower than the measured verify (20 ms for 2 tokens vs 10 ms for 8) used to slope the
    # verify line down to 0 ms at 14 tokens, and advise recommended that depth. Slower than the whole
    # measured cycle (14 ms), it bounds no verify (helper 98): it is the speculation-off figure alone
    obs = [cm.CycleObservation(bs=2, steps=3, total_ms=14.0, draft_ms=1.0, verify_ms=10.0, extend_ms=2.0, other_ms=1.0)]
    cost = cm.CycleCostModel.fit(obs, {2: 100.0})
    assert cost.unanchored == {2} and cost.baseline_step_ms(2) == (20.0, False)
    for steps in (4, 6, 10):
        p = cost.predict(2, steps)
        assert p.verify_ms == 10.0 and "verify" in p.extrapolated
    assert cost.predict(2, 3).verify_ms == 10.0
    assert not any(n.startswith("verify time falls") for n in cost.notes)
    assert any("the no-spec baseline is slower than a cycle measured at its batch size, so it bounds no verify" in n
               for n in cost.notes)
    # between the measured verify and the cycle (12 ms: a forward over fewer tokens slower than the
    # verify, another setup's, but not slower than the cycle) it stays on the curve, and its fall is named
    cost = cm.CycleCostModel.fit(obs, {2: 1000.0 * 2 / 12.0})
    assert cost.unanchored == frozenset()
    for steps in (4, 6, 10):
        p = cost.predict(2, steps)
        assert p.verify_ms == 10.0 and "verify" in p.extrapolated
    assert any(n.startswith("verify time falls from 12.00 ms at 2 tokens to 10.00 ms at 8") for n in cost.notes)
    assert any("(a baseline from another setup, or a client's throughput with its prefill?)" in n
               for n in cost.notes)
    # a fall from a run's width to a wider no-spec step is the baseline's too (helper 44: a run at 6
    # tokens and a bs-8 decode step at 8.00 ms were called "runs from different setups or loads")
    obs = [cm.CycleObservation(bs=2, steps=2, total_ms=11.0, draft_ms=0.5, verify_ms=8.79, extend_ms=1.0, other_ms=0.71)]
    notes = [n for n in cm.CycleCostModel.fit(obs, {8: 1000.0}).notes if n.startswith("verify time falls")]
    assert len(notes) == 1 and notes[0].startswith("verify time falls from 8.79 ms at 6 tokens to 8.00 ms at 8")
    assert "a baseline from another setup" in notes[0] and "runs from different setups" not in notes[0]
    # a rising curve still extrapolates along its end slope
    curve = cm.MeasuredCurve.from_points([(2, 5.0, 1), (8, 11.0, 1)])
    assert curve(14) == (17.0, True) and curve(1) == (4.0, True) and curve.falls() is None


def test_a_fall_note_names_the_largest_fall_beyond_noise_and_where_it_is_held():
    """A serving log's hundred verify widths dip here and there by a fraction of a percent: they
    had each raised "verify time falls ... held flat beyond the measured widths", though between
    the widths the curve follows the points and nothing is held flat (helper 32)."""
    noisy = cm.MeasuredCurve.from_points([(16, 11.66, 1.0), (18, 11.60, 1.0), (20, 11.9, 1.0), (24, 12.3, 1.0)])
    assert noisy.fall_notes("verify time", "tokens") == []
    inner = cm.MeasuredCurve.from_points([(4, 10.0, 1.0), (8, 12.0, 1.0), (12, 11.0, 1.0), (16, 13.0, 1.0),
                                          (20, 12.5, 1.0), (24, 14.0, 1.0)])
    assert inner.fall_notes("verify time", "tokens") == [
        "verify time falls from 12.00 ms at 8 tokens to 11.00 ms at 12 (one of 2 falls over 2%): "
        "the curve follows the measured points there"]
    end = cm.MeasuredCurve.from_points([(1, 11.13, 1.0), (3, 10.5, 1.0), (6, 12.0, 1.0)])
    assert end.fall_notes("verify time", "tokens") == [
        "verify time falls from 11.13 ms at 1 token to 10.50 ms at 3: held flat beyond the measured widths"]


def test_span_text_names_runs_of_integers_as_ranges():
    assert cm.span_text([32, 1, 2, 3, 4, 8, 16, 17]) == "1-4, 8, 16-17, 32"
    assert cm.span_text([5]) == "5" and cm.span_text([]) == ""
