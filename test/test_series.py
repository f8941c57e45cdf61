"""Batch-means standard errors of a group's accept length and period (``series.py``), and what
``advise`` does with them."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from cyclegen import chain_accept_len, log_lines
from sglang_eagle_cycle import advise as adv
from sglang_eagle_cycle.cycle import make_record
from sglang_eagle_cycle.report import inspect_paths
from sglang_eagle_cycle.series import BLOCK, MIN_BLOCKS, CycleSeries, obm_standard_error


def test_obm_matches_the_plain_standard_error_on_independent_values():
    rng = np.random.default_rng(0)
    ratios = []
    for _ in range(200):
        x = rng.normal(5.0, 2.0, 4000)
        ratios.append(obm_standard_error(x, 500) / (2.0 / math.sqrt(4000)))
    # unbiased for independent values, spread ~ sqrt(4/3 * b/n) = 41% in the variance
    assert np.mean(np.square(ratios)) == pytest.approx(1.0, abs=0.08)
    assert 0.25 < np.std(np.square(ratios)) < 0.6


def test_obm_sees_a_slow_wander_the_plain_error_misses():
    rng = np.random.default_rng(1)
    n, rho = 8000, 0.98   # AR(1): variance of the mean (1 + rho) / (1 - rho) = 99x the iid one
    e = rng.normal(0.0, 1.0, n)
    x = np.empty(n)
    x[0] = e[0]
    for t in range(1, n):
        x[t] = rho * x[t - 1] + math.sqrt(1 - rho ** 2) * e[t]
    plain = x.std() / math.sqrt(n)
    obm = obm_standard_error(x, n // 8)
    truth = math.sqrt((1 + rho) / (1 - rho) / n)
    assert obm > 5 * plain
    assert 0.5 * truth < obm < 1.5 * truth


def test_obm_refuses_a_batch_it_cannot_form():
    with pytest.raises(ValueError, match="batch 10 not in 1..9"):
        obm_standard_error(np.arange(10.0), 10)


def test_series_needs_enough_cycles_and_keeps_the_order():
    s = CycleSeries()
    for i in range(BLOCK * MIN_BLOCKS - 1):
        s.add(2.0, 20.0)
    assert s.standard_errors() is None          # one cycle short of 16 whole blocks
    s.add(2.0, 20.0)
    se = s.standard_errors()
    assert se == {"accept_len": 0.0, "period_ms": 0.0, "batch_cycles": 2 * BLOCK, "cycles": BLOCK * MIN_BLOCKS}
    # the same values, one order sorted and one alternating: only the order differs, and the error with it
    vals = np.array([1.0, 3.0] * 512)
    mixed, sorted_ = CycleSeries(), CycleSeries()
    mixed.add_arrays(vals, vals * 10)
    sorted_.add_arrays(np.sort(vals), np.sort(vals) * 10)
    assert mixed.standard_errors()["accept_len"] == pytest.approx(0.0, abs=1e-12)
    assert sorted_.standard_errors()["accept_len"] > 0.3
    assert sorted_.standard_errors()["period_ms"] == pytest.approx(10 * sorted_.standard_errors()["accept_len"])


def test_series_skips_cycles_without_accept_length_and_stops_at_huge_aggregates():
    s = CycleSeries()
    s.add_arrays(np.array([np.nan, 2.0]), np.array([10.0, np.nan]))
    s.add(None, 10.0)
    assert s.blocks == 0 and not s._pend_acc
    s.add(2.0, 10.0, weight=10 ** 6)
    assert s.broken and s.standard_errors() is None


def _persistent_log(tmp_path, name, easy_share, switch, cycles=1600, seed=0):
    """bs-2 log at 3 steps whose requests are easy (p 0.9) or hard (p 0.3) and switch kind with
    probability ``switch`` per cycle."""
    rng = random.Random(seed)
    state = [rng.random() < easy_share for _ in range(2)]
    records = []
    for c in range(cycles):
        state = [(not s) if rng.random() < switch else s for s in state]
        accepts = [chain_accept_len(rng, [0.9 if s else 0.3] * 3) for s in state]
        verify = round(20.0 + rng.uniform(0, 2), 2)
        phases = {"draft_ms": 0.8, "verify_ms": verify, "verify_fwd_ms": round(verify - 0.3, 2),
                  "extend_ms": 0.4, "total_ms": round(verify + 1.5, 2)}
        records.append(make_record(cycle=c, config=(2, 3, 1, 4), phases_ms=phases, accepts=accepts, graph=True))
    path = tmp_path / name
    path.write_text("\n".join(log_lines(records)) + "\n")
    return path


def test_persistent_request_difficulty_widens_the_acceptance_counts(tmp_path):
    slow = _persistent_log(tmp_path, "slow.log", 0.5, 0.002)   # a request's text keeps its kind ~500 cycles
    fast = _persistent_log(tmp_path, "fast.log", 0.5, 0.5)     # kinds redrawn about every other cycle
    runs_slow, _, _ = adv.runs_from_inspect(inspect_paths([slow]), "slow")
    runs_fast, _, _ = adv.runs_from_inspect(inspect_paths([fast]), "fast")
    phi_slow, phi_fast = runs_slow[0].accept_dispersion(), runs_fast[0].accept_dispersion()
    assert phi_slow > 4.0, phi_slow
    assert phi_fast < 2.0, phi_fast
    acc, notes = adv.build_acceptance(runs_slow)
    assert acc.dispersion == pytest.approx(phi_slow)
    assert any("batch means" in n for n in notes)
    # the Wilson intervals count reached / dispersion samples: wider by about sqrt(dispersion)
    plain, _ = adv.build_acceptance([runs_slow[0].__class__(**{**runs_slow[0].__dict__, "accept_se": None})])
    w = acc.measured[0].high - acc.measured[0].low
    w0 = plain.measured[0].high - plain.measured[0].low
    assert w / w0 == pytest.approx(math.sqrt(phi_slow), rel=0.15)
    # and the run's own tok/s noise grows with it
    r = runs_slow[0]
    assert adv.run_rel_se(r) > adv.run_rel_se(r.__class__(**{**r.__dict__, "accept_se": None})) * 1.5


def test_batch_se_in_an_inspect_document_is_checked():
    base = {"bs": 1, "steps": 2, "topk": 1, "cycles": 200, "accept_len_mean": 2.0,
            "phases": {"total_ms": {"mean": 20.0, "sd": 1.0}}}
    runs, _, _ = adv.runs_from_inspect({"groups": [{**base, "batch_se": {"accept_len": 0.05, "period_ms": 0.3}}]}, "d")
    assert (runs[0].accept_se, runs[0].period_se) == (0.05, 0.3)
    assert runs[0].total_se_ms() == pytest.approx(0.3)          # larger than 1 / sqrt(200)
    for bad, msg in (([1], "batch_se: expected an object"), ({"accept_len": -1}, "must not be negative"),
                     ({"period_ms": "x"}, "expected a finite number")):
        with pytest.raises(adv.UsageError, match=msg):
            adv.runs_from_inspect({"groups": [{**base, "batch_se": bad}]}, "d")


def test_batch_se_bounds_are_the_groups_own(tmp_path):
    base = {"bs": 3, "steps": 3, "topk": 1, "cycles": 2000, "accept_len_mean": 2.4,
            "phases": {"total_ms": {"mean": 15.0, "sd": 1.0}}}
    for bad, msg in (({"accept_len": 2.0}, r"at 3 steps \(at most 1.5\)"),
                     ({"period_ms": 20.0}, "mean cycle time of 15 ms"),
                     ({"accept_len": 0.02, "batch_cycles": "x"}, "batch_cycles"),
                     ({"accept_len": 0.02, "cycles": -5}, "batch_se.cycles")):
        with pytest.raises(adv.UsageError, match=msg):
            adv.runs_from_inspect({"groups": [{**base, "batch_se": bad}]}, "d")


def test_a_log_beside_an_older_inspect_document_keeps_its_batch_means(tmp_path):
    import json

    from sglang_eagle_cycle import cli

    log = _persistent_log(tmp_path, "slow.log", 0.5, 0.002)
    doc = inspect_paths([log])
    for g in doc["groups"]:
        g.pop("batch_se")                           # as inspect wrote it before batch_se
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    for order in ([str(old), str(log)], [str(log), str(old)]):
        import contextlib
        import io
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert cli.main(["advise", *order, "--baseline-tok-s", "200", "--json"]) == 0
        got = json.loads(buf.getvalue())
        assert got["inputs"]["acceptance"]["dispersion"] > 4.0
        assert len(got["inputs"]["runs"]) == 1 and got["inputs"]["runs"][0]["batch_se"] is not None
        assert any("counted once" in n for n in got["inputs"]["notes"])


def test_advise_says_when_a_gzip_log_is_cut(tmp_path, capsys):
    import gzip

    from sglang_eagle_cycle import cli

    data = gzip.compress(_persistent_log(tmp_path, "slow.log", 0.5, 0.02).read_bytes())
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(data[: len(data) // 2])
    assert cli.main(["advise", str(cut), "--baseline-tok-s", "200"]) == 0
    err = capsys.readouterr().err
    assert "reading stopped early (truncated gzip" in err and str(cut) in err
