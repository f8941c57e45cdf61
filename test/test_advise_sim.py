"""``benchmarks/advise_worlds.py``: the hidden-world generator, and ``eagle-cycle advise`` scored on
24 simulated worlds by the fixed protocol (first run at 3 or 5 steps, a second only when advise
says ``settled: false``; regret against the noise-free truth, coverage of ``tok_s_95``)."""

from __future__ import annotations

import importlib.util
import math
import random
import statistics
import sys
from pathlib import Path

import pytest

from sglang_eagle_cycle.cycle import parse_line

REPO = Path(__file__).resolve().parents[1]

#: Looser versions of the targets ``benchmarks/sim_advise.py`` prints (23/24, 0.5%, 3%, 90%, 1.8).
MIN_WITHIN_2PCT = 20          # of 24 worlds, regret <= 2%
MAX_MEAN_REGRET = 0.015
MAX_MAX_REGRET = 0.08
MIN_COVERAGE = 0.80           # tok_s_95 holding the true tok/s, unmeasured depths 1..8
MAX_MEAN_RUNS = 2.0
MAX_MEDIAN_WIDTH = 0.25      # of the prediction
SIM_WORLDS, SIM_SEED = 24, 0


def _benchmark_module(name: str):
    """``benchmarks/NAME.py`` imported as module ``NAME`` (registered in ``sys.modules``: dataclasses
    look their module up)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def aw():
    return _benchmark_module("advise_worlds")


def _hand_world(aw, **kw):
    args = dict(kind="hand", bs=2, p=(0.8, 0.5, 0.5) + (0.1,) * 9, decode_ms=10.0, verify_overhead=0.2,
                fixed_ms=4.0, slope_ms=0.5, extend_fixed_ms=1.0, extend_slope_ms=0.1, draft_step_ms=0.7,
                draft_prep_ms=0.2, other_ms=0.4, gap_ms=0.1, outlier_rate=0.01, outlier_ms=30.0)
    args.update(kw)
    return aw.World(**args)


def test_true_tok_s_follows_the_stated_formula_on_a_hand_made_world(aw):
    w = _hand_world(aw)
    assert w.true_tok_s(0) == pytest.approx(1000 * 2 / 10.0)
    # steps 2: n = 2 * 3 = 6 tokens; shape(6) = 4 + 0.5*6 = 7, shape(bs=2) = 5
    verify = 10.0 * 1.2 * 7 / 5                      # 16.8 ms
    extend = 1.0 + 0.1 * 6                            # 1.6 ms
    cycle = 0.2 + 1 * 0.7 + verify + extend + (0.4 + 0.01 * 30.0)
    el = 1 + 0.8 + 0.8 * 0.5                          # E[L(2)] = 2.2
    assert w.accept_len(2) == pytest.approx(2.2)
    assert w.true_tok_s(2) == pytest.approx(1000 * 2 * el / (cycle + 0.1))
    # steps 1: no draft forward, no draft prep; n = 4
    c1 = 10.0 * 1.2 * 6 / 5 + (1.0 + 0.4) + 0.7
    assert w.true_tok_s(1) == pytest.approx(1000 * 2 * 1.8 / (c1 + 0.1))
    assert w.verify_ms(w.bs) == pytest.approx(12.0)   # verify mode costs more than the decode step


def test_moe_shape_counts_expected_distinct_experts(aw):
    w = _hand_world(aw, fixed_ms=1.0, slope_ms=0.0, moe_experts=64, moe_topk=8, moe_ms_per_expert=0.1)
    for n in (1, 3, 17):
        assert w.shape(n) == pytest.approx(1.0 + 0.1 * 64 * (1 - (1 - 8 / 64) ** n))
    g = _hand_world(aw, buckets=aw.GRAPH_BUCKETS)
    assert g.shape(9) == g.shape(12) < g.shape(13) == g.shape(16)


def test_log_lines_parse_and_their_phases_sum_to_the_total(aw):
    w = aw.make_worlds(6, 5)[0]
    lines = w.log_lines(4, 200, random.Random(1))
    assert len(lines) == 200 and all(ln.startswith("[2026-12-01 ") and " TP0] [eagle-cycle] " in ln for ln in lines)
    recs = [parse_line(ln) for ln in lines]
    assert all(r is not None and r.device_spans and r.config == (w.bs, 4, 1, 5) for r in recs)
    for r in recs:
        parts = r.draft_prep_ms + r.draft_ms + r.verify_ms + r.extend_ms + r.other_ms
        assert parts == pytest.approx(r.total_ms, abs=0.03)
        assert len(r.histogram()) and sum(r.histogram().values()) == w.bs
    assert recs[0].gap_ms is None and all(r.gap_ms is not None for r in recs[1:])
    one = [parse_line(ln) for ln in w.log_lines(1, 20, random.Random(2))]
    assert all(r.draft_ms is None and r.draft_prep_ms is None for r in one)


@pytest.mark.parametrize("form", ["design", "legacy"])
def test_lines_without_device_spans_keep_each_cycles_period_and_accepts(aw, form):
    w = _hand_world(aw)
    spans = w.log_lines(3, 50, random.Random(4))
    rewritten = aw.design_lines(spans, form)
    assert aw.design_lines(spans, "spans") == spans
    for a, b in zip(map(parse_line, spans), map(parse_line, rewritten)):
        assert not b.device_spans and b.draft_prep_ms is None and b.gap_ms is None
        assert b.accepts == a.accepts and b.config == a.config
        # the whole period is the line's total now, so tok/s is the same
        assert b.total_ms == pytest.approx(a.total_ms + (a.gap_ms or 0.0), abs=0.02)
        assert b.tok_s == pytest.approx(a.tok_s, rel=2e-3)
        assert b.draft_ms + b.verify_ms + b.extend_ms + b.other_ms == pytest.approx(b.total_ms, abs=0.03)
        prep_in_draft = a.draft_ms + a.draft_prep_ms if form == "legacy" else a.draft_ms
        assert b.draft_ms == pytest.approx(prep_in_draft, abs=0.011)
    with pytest.raises(ValueError, match="line form"):
        aw.design_lines(spans, "nope")


def test_legacy_lines_whose_draft_holds_its_preparation_keep_their_coverage(aw, tmp_path):
    # the plugin's lines before device spans time the draft from the cycle's start: its preparation,
    # a cost that does not grow with the depth, sits in draft_ms. Taken as num_steps - 1 forwards it
    # is charged again at every deeper step (these runs: 90.1% coverage, 93.4% with the fixed-part
    # hypotheses; on sim_advise.py's seed 0, 87.5% and 94.0%)
    ws = aw.make_worlds(SIM_WORLDS, SIM_SEED)
    results = [aw.run_protocol(w, aw.advise_in_process, aw.first_steps(i), random.Random(f"test-sim:{i}"),
                               tmp_path, lines="legacy") for i, w in enumerate(ws)]
    s = aw.score(results)
    assert s["failures"] == 0, s["failure_lines"]
    assert s["coverage"] >= 0.92 and s["within_2pct"] >= MIN_WITHIN_2PCT, s


def _aggregated(lines: list[str], every: int) -> list[str]:
    """``lines`` as the plugin logs them with ``SGLANG_EAGLE_CYCLE_LOG_EVERY=every`` (its own
    :class:`Aggregator`: one line of means and an ``accept_hist`` per ``every`` cycles)."""
    from sglang_eagle_cycle.cycle import Aggregator, format_line

    agg, out = Aggregator(every), []
    for line in lines:
        out += [format_line(r) for r in agg.add(parse_line(line))]
    return out + [format_line(r) for r in agg.flush()]


def test_aggregated_lines_advise_as_the_per_cycle_lines_they_fold(aw, tmp_path):
    # a server run with LOG_EVERY=20 logs one line of means per 20 cycles: no per-cycle sd, no
    # per-cycle accepts. The same runs read that way must advise as their per-cycle lines do (over
    # sim_advise.py seeds 0-3, our worlds: the same picks and regret, coverage 99.0% against 98.8%).
    # Until a run without a per-cycle sd took its batch means as its cycle-time error, it counted as
    # exact, and w05's measured 3-step interval was a third as wide as its per-cycle one's
    tail = ["--json", "--steps-candidates", *map(str, range(9))]
    for w in aw.make_worlds(6, 2):
        rng = random.Random(4)
        runs = {s: w.log_lines(s, None, rng) for s in (3, 5)}
        docs = {}
        for every in (1, 20):
            paths = []
            for s, lines in runs.items():
                path = tmp_path / f"{w.name}-s{s}-every{every}.log"
                path.write_text("\n".join(lines if every == 1 else _aggregated(lines, every)) + "\n")
                paths.append(str(path))
            docs[every] = aw.advise_in_process([*paths, "--baseline-tok-s", repr(w.true_tok_s(0)), *tail])
        assert len(_aggregated(runs[3], 20)) == math.ceil(len(runs[3]) / 20)
        one, agg = ({c["steps"]: c for c in docs[k]["candidates"]} for k in (1, 20))
        for s in range(1, 9):
            assert agg[s]["predicted_tok_s"] == pytest.approx(one[s]["predicted_tok_s"], rel=0.012), (w.name, s)
            lo, hi = one[s]["tok_s_95"]
            alo, ahi = agg[s]["tok_s_95"]
            assert min(hi, ahi) - max(lo, alo) >= 0.5 * (hi - lo), (w.name, s)   # the intervals mostly overlap
        # the pick may differ only between depths the per-cycle reading holds within 1% of each other
        p1, p20 = docs[1]["recommended"]["steps"], docs[20]["recommended"]["steps"]
        assert one[p20]["predicted_tok_s"] >= 0.99 * one[p1]["predicted_tok_s"], (w.name, p1, p20)
        assert docs[20]["regret_95"] == pytest.approx(docs[1]["regret_95"], abs=0.02)


def test_mean_accept_length_of_a_long_run_matches_the_chain_formula(aw):
    w = _hand_world(aw, bs=16, p=(0.85, 0.8, 0.7, 0.75, 0.6) + (0.5,) * 7)
    steps = 5
    recs = w.records(steps, 1500, random.Random(3))
    acc = [a for r in recs for a in r.accepts]
    # exact variance of L under the chain model
    surv = [1.0]
    for pj in w.p[:steps]:
        surv.append(surv[-1] * pj)
    probs = [surv[k] - (surv[k + 1] if k < steps else 0.0) for k in range(steps + 1)]
    mean = sum((k + 1) * q for k, q in enumerate(probs))
    var = sum((k + 1) ** 2 * q for k, q in enumerate(probs)) - mean ** 2
    assert mean == pytest.approx(w.accept_len(steps))
    assert abs(statistics.fmean(acc) - mean) < 4 * math.sqrt(var / len(acc))


def test_make_worlds_covers_every_kind_and_is_seeded(aw):
    ws = aw.make_worlds(24, 11)
    assert {w.kind for w in ws} == set(aw.KINDS) and len(aw.KINDS) == 6
    assert [w.decode_ms for w in ws] == [w.decode_ms for w in aw.make_worlds(24, 11)]
    assert all(5.0 <= w.decode_ms <= 40.0 and len(w.p) == 12 for w in ws)
    assert all(w.verify_ms(w.bs) >= w.decode_ms * (1 - 1e-9) and w.verify_overhead <= 0.4 for w in ws)


def test_advise_meets_the_loose_targets_on_24_simulated_worlds(aw, tmp_path):
    ws = aw.make_worlds(SIM_WORLDS, SIM_SEED)
    results = [aw.run_protocol(w, aw.advise_in_process, aw.first_steps(i),
                               random.Random(f"test-sim:{i}"), tmp_path) for i, w in enumerate(ws)]
    s = aw.score(results)
    figures = (f"within 2%: {s['within_2pct']}/{s['worlds']}, mean regret {s['mean_regret']}, "
               f"max regret {s['max_regret']}, coverage {s['coverage']} of {s['intervals']}, "
               f"median width {s['median_width']}, mean runs {s['mean_runs']}, failures {s['failures']} "
               f"{s['failure_lines']}")
    print(figures)
    assert s["failures"] == 0, figures
    assert s["within_2pct"] >= MIN_WITHIN_2PCT, figures
    assert s["mean_regret"] <= MAX_MEAN_REGRET, figures
    assert s["max_regret"] <= MAX_MAX_REGRET, figures
    assert s["coverage"] >= MIN_COVERAGE, figures
    assert s["mean_runs"] <= MAX_MEAN_RUNS, figures
    assert s["median_width"] <= MAX_MEDIAN_WIDTH, figures
    # the forecast a next_run carries is checked against the second call: most that were forecast
    # to settle did (74% over seeds 0-47); a forecast that never came true would fail here
    fc = s["forecasts"]
    assert fc["settle_forecast"] >= 3 and fc["settled"] >= fc["settle_forecast"] / 2, fc
    assert all(r.forecast_after is not None for r in results if r.runs == 2)


def test_wide_worlds_reach_outside_the_default_ranges_and_advise_never_fails_on_them(aw, tmp_path):
    """``--wide`` worlds: a separate seeded stream with bs up to 128, three bucket lists and knees up
    to 4x bs; advise runs the protocol on them without an error (its picks are printed, not graded)."""
    ws = aw.make_worlds(48, 2, wide=True)
    assert [w.decode_ms for w in ws] == [w.decode_ms for w in aw.make_worlds(48, 2, wide=True)]
    assert [w.decode_ms for w in ws[:6]] != [w.decode_ms for w in aw.make_worlds(6, 2)]
    assert {w.kind for w in ws} == set(aw.KINDS) and max(w.bs for w in ws) > 64
    assert {w.buckets for w in ws if w.kind == "graph_buckets"} >= {aw.POW2_BUCKETS}
    assert any(w.knee_tokens > 2 * w.bs for w in ws if w.kind == "large_batch")
    results = [aw.run_protocol(w, aw.advise_in_process, aw.first_steps(i), random.Random(f"test-wide:{i}"), tmp_path)
               for i, w in enumerate(ws[:6])]
    assert [r.failure for r in results] == [None] * 6
    assert all(0.0 <= r.regret < 1.0 and r.runs in (1, 2) for r in results)


@pytest.fixture(scope="module")
def awb(aw):
    return _benchmark_module("advise_worlds_blind")


def test_blind_worlds_log_what_their_truth_says_and_the_protocol_runs_on_them(aw, awb, tmp_path):
    """``advise_worlds_blind.py`` (the generator written without the model): its lines parse, a long
    iid run's mean accept length and period match the world's expected ones, and the scoring protocol
    runs on one world of each kind without an error (picks are printed by the benchmark, not graded)."""
    ws = awb.make_worlds(6, 3, iid=True)
    assert [w.kind for w in ws] == list(awb.KINDS)
    assert [w.true_tok_s(2) for w in ws] == [w.true_tok_s(2) for w in awb.make_worlds(6, 3, iid=True)]
    no_stalls = [w for w in ws if not w.p_stall]
    assert len(no_stalls) >= 2
    for w in ws[:1] + no_stalls[:2]:
        assert w.true_tok_s(0) == pytest.approx(1000.0 * w.bs / w.decode_ms())
        recs = [parse_line(ln) for ln in w.log_lines(3, 1500, random.Random(4))]
        assert all(r is not None and r.config == (w.bs, 3, 1, 4) for r in recs)
        acc = [a for r in recs for a in r.accepts]
        assert statistics.fmean(acc) == pytest.approx(w.mean_accept(3), rel=0.05)
        if not w.p_stall:
            # the mean period is the phase means' sum (every noise factor has mean 1)
            period = statistics.fmean(r.total_ms + (r.gap_ms or 0.0) for r in recs[1:])
            assert period == pytest.approx(w.period_ms(3), rel=0.03)
    results = [aw.run_protocol(w, aw.advise_in_process, aw.first_steps(i), random.Random(f"test-blind:{i}"), tmp_path)
               for i, w in enumerate(ws)]
    assert [r.failure for r in results] == [None] * 6
    assert all(0.0 <= r.regret < 1.0 and r.runs in (1, 2) for r in results)


def test_sim_advise_refuses_iid_without_blind():
    import subprocess
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "sim_advise.py"), "--iid"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "--iid goes with --blind" in out.stderr and "Traceback" not in out.stderr


def test_sim_advise_gives_moe_worlds_their_own_target_config(aw, tmp_path):
    # --moe-config: every advise call of an MoE world carries --target-config with its experts;
    # a dense world's calls carry none (the protocol itself gives no config)
    sys.path.insert(0, str(REPO / "benchmarks"))
    import sim_advise

    moe = _hand_world(aw, moe_experts=256, moe_topk=8, moe_ms_per_expert=0.01)
    assert sim_advise.moe_config(moe)["n_routed_experts"] == 256
    assert sim_advise.moe_config(_hand_world(aw)) is None
    calls = []

    def spy(args):
        calls.append(list(args))
        return aw.advise_in_process(args)

    cfg = tmp_path / "config.json"
    cfg.write_text('{"num_hidden_layers": 61, "n_routed_experts": 256, "num_experts_per_tok": 8}')
    res = aw.run_protocol(moe, spy, 3, random.Random(0), tmp_path, extra_args=["--target-config", str(cfg)])
    assert res.failure is None and calls
    assert all(c[-2:] == ["--target-config", str(cfg)] for c in calls)


def test_the_next_run_can_be_the_neighbour_that_tells_a_padding_step(aw, tmp_path):
    """Our seed 19, world 21 (CUDA-graph buckets, first run at 5 steps, best 5): the smooth curves
    alone asked for 4 steps, then picked 6, 7.2% below the best; with staircase hypotheses in the
    next-run choice it asks for 6, whose run shows the padding step, and keeps 5."""
    w = aw.make_worlds(24, 19)[21]
    assert w.kind == "graph_buckets" and w.best_steps() == 5
    res = aw.run_protocol(w, aw.advise_in_process, aw.first_steps(21), random.Random("sim-advise-logs:19:21"),
                          tmp_path)
    assert res.failure is None
    assert res.measured == [5, 6]
    assert res.regret is not None and res.regret <= 0.02


def test_a_verify_far_above_the_decode_step_keeps_one_run_from_settling(aw, aw4, tmp_path):
    """``--fourth`` seed 1, world 8 (communication-bound, bs 4, speculation off best; first run at 5
    steps, its 24-token verify 2.2 times the decode step). With the verify-mode overhead assumed in
    0-50%, every hypothesis made 2 steps far cheaper than 5, and the one run settled on 2 steps, 4.6%
    below speculation off. The settled test now also weighs overheads up to 0.8 of the measured excess
    (``uncertainty.settle_overhead``): not settled, a run at 2 steps is asked for, and it shows
    speculation off is best."""
    w = aw4.make_worlds(24, 1)[8]
    assert w.best_steps() == 0
    res = aw.run_protocol(w, aw.advise_in_process, 5, random.Random("sim-advise-logs:1:8"), tmp_path)
    assert res.failure is None
    assert res.measured == [5, 2]
    assert res.pick == 0 and res.regret == 0.0


def test_settle_overhead_widens_only_past_the_assumed_range_at_narrow_widths():
    """The settled test's own overhead range: none where the lowest run's verify lies within
    ``0.5 / 0.8`` of the decode step, or is wider than 32 tokens, or the anchor is not below it;
    else 0.8 of the measured excess."""
    from sglang_eagle_cycle import uncertainty as unc

    assert unc.settle_overhead([(6.0, 16.0)], (1.0, 10.0)) is None             # 60% above: 0.48 < 0.5
    assert unc.settle_overhead([(6.0, 21.0), (12.0, 30.0)], (1.0, 10.0)) == pytest.approx(0.88)
    assert unc.settle_overhead([(64.0, 30.0)], (16.0, 10.0)) is None           # past 32 tokens
    assert unc.settle_overhead([(6.0, 30.0)], (6.0, 10.0)) is None             # anchor not below
    assert unc.settle_overhead([(6.0, 30.0)], None) is None


@pytest.fixture(scope="module")
def awt(aw):
    return _benchmark_module("advise_worlds_third")


def test_third_worlds_cover_every_kind_and_their_logs_reach_advise(aw, awt, tmp_path):
    """``advise_worlds_third.py`` (a third generator written without the model): one seed's worlds
    hold all six kinds with a finite positive truth at depths 0-8 and are seeded; a run's lines parse
    and a log at 3 steps is read by advise as measured at 3; world 1 is the calibrated Kimi-K2.5-like
    seed deployment (decode 11.3 ms, verify forward 21 ms at 3 tokens and ~28 ms at 6, best 2 steps
    near 94 tok/s)."""
    ws = awt.make_worlds(6, 0)
    assert [w.kind for w in ws] == list(awt.KINDS) and len(awt.KINDS) == 6
    for w in ws:
        tps = [w.true_tok_s(s) for s in aw.DEPTHS]
        assert all(math.isfinite(x) and x > 0 for x in tps), (w.name, tps)
    assert [w.true_tok_s(2) for w in ws] == [w.true_tok_s(2) for w in awt.make_worlds(6, 0)]
    assert [w.true_tok_s(2) for w in ws] != [w.true_tok_s(2) for w in awt.make_worlds(6, 1)]
    # a run is fixed by the world and the rng passed in
    w = ws[0]
    lines = w.log_lines(3, 400, random.Random(3))
    assert lines == w.log_lines(3, 400, random.Random(3)) and lines != w.log_lines(3, 400, random.Random(4))
    recs = [parse_line(ln) for ln in lines]
    assert all(r is not None and r.device_spans and r.config == (w.bs, 3, 1, 4) for r in recs)
    assert recs[0].gap_ms is None
    log = tmp_path / "third-steps3.log"
    log.write_text("\n".join(lines) + "\n")
    doc = aw.advise_in_process([str(log), "--baseline-tok-s", repr(w.true_tok_s(0)), "--json",
                                "--steps-candidates", *[str(s) for s in aw.DEPTHS]])
    assert doc["inputs"]["acceptance"]["observed_depth"] == 3
    assert [c["steps"] for c in doc["candidates"] if c["steps"] and c.get("measured_tok_s") is not None] == [3]
    # the Kimi-K2.5-like world
    k = ws[awt.KIMI_INDEX]
    assert k.kind == "moe" and k.bs == 1 and (k.moe_experts, k.moe_topk) == (384, 8)
    assert k.decode_ms() == pytest.approx(11.3)
    assert k.mean_phases(2)["verify_fwd_ms"] == pytest.approx(21.0)           # 3 verified tokens
    assert k.mean_phases(5)["verify_fwd_ms"] == pytest.approx(28.0, abs=0.5)  # 6
    assert k.best_steps() == 2 and 90.0 <= k.true_tok_s(2) <= 100.0


@pytest.fixture(scope="module")
def aw4(aw):
    return _benchmark_module("advise_worlds_fourth")


def test_fourth_worlds_format_their_own_lines_and_the_protocol_runs_on_them(aw, aw4, tmp_path):
    """``advise_worlds_fourth.py`` (a fourth generator, written without the model, formatting its own
    lines): one seed's worlds hold all six kinds with a finite positive truth at depths 0-8 and are
    seeded; a run's cycle lines parse as what the world logged (start-up and ``Decode batch.`` lines
    mixed in), a long run's mean accept length and tok/s agree with the truth, and two worlds go
    through the protocol."""
    ws = aw4.make_worlds(6, 1)
    assert [w.kind for w in ws] == list(aw4.KINDS)
    for w in ws:
        tps = [w.true_tok_s(s) for s in aw.DEPTHS]
        assert all(math.isfinite(x) and x > 0 for x in tps), (w.name, tps)
    assert [w.true_tok_s(2) for w in ws] == [w.true_tok_s(2) for w in aw4.make_worlds(6, 1)]
    w = ws[0]
    lines = w.log_lines(3, 3000, random.Random(3))
    assert lines == w.log_lines(3, 3000, random.Random(3)) and lines != w.log_lines(3, 3000, random.Random(4))
    recs = [r for r in map(parse_line, lines) if r is not None]
    assert len(recs) == 3000 and len(lines) == 3000 + 2 + 3000 // 200
    assert all(r.config == (w.bs, 3, 1, 4) and not r.device_spans for r in recs)
    steady = recs[3:]   # the first three cycles run at twice the cost (warm-up)
    acc = sum(r.accept_len for r in steady) / len(steady)
    assert acc == pytest.approx(w.accept_len(3), rel=0.05)
    period = sum(r.total_ms for r in steady) / len(steady)
    assert 1000 * w.bs * w.accept_len(3) / period == pytest.approx(w.true_tok_s(3), rel=0.06)
    results = [aw.run_protocol(v, aw.advise_in_process, first, random.Random(f"test-fourth:{i}"), tmp_path)
               for i, (v, first) in enumerate(((ws[1], 3), (ws[4], 5)))]
    assert all(r.failure is None and r.pick is not None and 1 <= r.runs <= 2 for r in results), results


def test_sim_advise_refuses_third_or_fourth_with_another_generator():
    sys.path.insert(0, str(REPO / "benchmarks"))
    import sim_advise

    for one, other in (("--third", "--blind"), ("--third", "--wide"), ("--fourth", "--third"), ("--fourth", "--blind")):
        with pytest.raises(SystemExit) as exc:
            sim_advise.main([one, other, "--worlds", "1"])
        assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        sim_advise.main(["--fourth", "--overhead-scale", "0.3", "--worlds", "1"])
    assert exc.value.code == 2


def test_overhead_scale_changes_only_the_verify_mode_overhead(aw, capsys):
    base, none, third = (aw.make_worlds(12, 5, overhead_scale=x) for x in (1.0, 0.0, 0.3))
    assert any(w.verify_overhead > 0.05 for w in base)
    for b, z, t in zip(base, none, third):
        assert (z.bs, z.p, z.decode_ms, z.draft_step_ms) == (b.bs, b.p, b.decode_ms, b.draft_step_ms)
        assert z.verify_overhead == 0.0 and z.verify_ms(z.bs) == pytest.approx(z.decode_ms)
        assert t.verify_overhead == pytest.approx(0.3 * b.verify_overhead, abs=1e-4)
    with pytest.raises(ValueError):
        aw.make_worlds(2, 0, wide=True, overhead_scale=0.5)
    sys.path.insert(0, str(REPO / "benchmarks"))
    import sim_advise

    for bad in (["--overhead-scale", "-1"], ["--overhead-scale", "nan"], ["--overhead-scale", "0.3", "--blind"]):
        with pytest.raises(SystemExit) as exc:
            sim_advise.main([*bad, "--worlds", "1"])
        assert exc.value.code == 2
    assert "--overhead-scale" in capsys.readouterr().err


@pytest.mark.parametrize("share", [0.5, None])
def test_below_two_runs_the_floor_takes_a_quarter_of_the_verify_mode_overhead(aw, awt, tmp_path, monkeypatch, share):
    """Below the lowest of two runs the measured slope continued down stops at a floor, the decode
    step plus a share of each hypothesis' verify-mode overhead (BELOW_FLOOR_OVERHEAD). The data do
    not tell a sharp knee from a smooth roofline there, and the share trades one for the other:

    * our generator at three tenths of its verify-mode overhead (``--overhead-scale 0.3``, the setting
      nearest the issue's own figures), seed 28 world 22: bs 16, a sharp compute knee at 32 tokens,
      measured at 5 then 2 steps, 1 step best. At half the overhead the floor read 1 step about 10%
      too dear and 2 was picked, 11.4% below; at a quarter 1 is picked;
    * the third generator's seed 25 world 4: bs 48, a smooth roofline, measured at 3 then 2 steps, 2
      best. At half it keeps 2; at a quarter 1 step looks cheap enough and is picked, 5.2% below.
    """
    from sglang_eagle_cycle import uncertainty as unc

    if share is not None:
        monkeypatch.setattr(unc, "BELOW_FLOOR_OVERHEAD", share)
    sharp = aw.make_worlds(24, 28, overhead_scale=0.3)[22]
    assert sharp.kind == "large_batch" and sharp.bs == 16 and sharp.knee_tokens == 32 and sharp.best_steps() == 1
    res = aw.run_protocol(sharp, aw.advise_in_process, aw.first_steps(22), random.Random("sim-advise-logs:28:22"),
                          tmp_path)
    assert res.failure is None and res.measured == [5, 2]
    assert (res.pick, round(res.regret, 3)) == ((2, 0.114) if share == 0.5 else (1, 0.0))
    smooth = awt.make_worlds(24, 25)[4]
    assert smooth.kind == "largebs" and smooth.bs == 48 and smooth.best_steps() == 2
    res = aw.run_protocol(smooth, aw.advise_in_process, aw.first_steps(4), random.Random("sim-advise-logs:25:4"),
                          tmp_path)
    assert res.failure is None and res.measured == [3, 2]
    assert (res.pick, round(res.regret, 3)) == ((2, 0.0) if share == 0.5 else (1, 0.052))
