"""advise's intervals and decision state: the seed case, settling at once, the next run, stock and
multi-depth inputs, one baseline per batch size (issue 13).

The seed fixture is built from the figures of the Kimi-K2.5 deployment that motivated the project
(the 5-step run's phase means, accept length 2.1 over 1000 cycles, the 88.8 tok/s no-spec
baseline; its sweep found 2 steps best at 94 tok/s), so the tests run without ``../shared``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import json
import math
import random
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sglang_eagle_cycle import costmodel as cm
from sglang_eagle_cycle import uncertainty as unc
from sglang_eagle_cycle.cli import main

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
import advise_worlds as aw  # noqa: E402

SEED_BASELINE = 88.8
SEED_BEST_TOK_S = 94.0


def _group(steps, phases, accept_len, tok_s, cycles=1000):
    return {"bs": 1, "steps": steps, "topk": 1, "draft_tokens": steps + 1, "cycles": cycles,
            "phases": {k: {"mean": v} for k, v in phases.items()}, "accept_len_mean": accept_len,
            "accept_hist": None, "per_position_acceptance": None, "tok_s": tok_s}


def _doc(*groups):
    return {"schema": "eagle-cycle-inspect/1", "files": ["seed.log"], "skipped_lines": 0,
            "groups": list(groups), "findings": []}


SEED_5 = _group(5, {"draft_ms": 0.95, "verify_ms": 28.1, "verify_fwd_ms": 28.0, "extend_ms": 0.25,
                    "other_ms": 0.15, "total_ms": 29.45}, 2.1, 71.3)
# a 2-step run consistent with the seed's sweep: ~94 tok/s, verify forward ~21 ms, accept length 2.1
SEED_2 = _group(2, {"draft_ms": 0.24, "verify_ms": 21.6, "verify_fwd_ms": 21.0, "extend_ms": 0.25,
                    "other_ms": 0.25, "total_ms": 22.34}, 2.1, SEED_BEST_TOK_S)


def advise(*args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["advise", *map(str, args)])
    return rc, out.getvalue(), err.getvalue()


def _inspect(*args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["inspect", *map(str, args), "--json"])
    return rc, out.getvalue(), err.getvalue()


def advise_json(*args):
    rc, out, err = advise(*args, "--json")
    assert rc == 0, err
    return json.loads(out)


def cand(doc, steps):
    return next(c for c in doc["candidates"] if c["steps"] == steps)


def _write(path: Path, doc) -> Path:
    path.write_text(json.dumps(doc))
    return path


def test_seed_one_run_is_not_settled_and_brackets_the_2_step_optimum(tmp_path):
    doc = advise_json(_write(tmp_path / "seed5.json", _doc(SEED_5)), "--baseline-tok-s", SEED_BASELINE)
    assert doc["settled"] is False and doc["regret_95"] > unc.SETTLED_REGRET
    nxt = doc["next_run"]
    assert nxt["steps"] in (1, 2, 3) and nxt["num_draft_tokens"] == nxt["steps"] + 1 and nxt["topk"] == 1
    assert "regret" in nxt["why"]
    assert 0 <= nxt["regret_95_after"] < doc["regret_95"] and nxt["useful"] is True
    two = cand(doc, 2)
    lo, hi = two["tok_s_95"]
    assert lo <= SEED_BEST_TOK_S <= hi
    assert (hi - lo) / two["predicted_tok_s"] <= 0.25
    assert two["interval_source"] == "verify shape"
    # the same per batch size, and the measured depth is bracketed by its own noise only
    assert doc["per_batch_size"][0]["next_run"] == nxt and doc["per_batch_size"][0]["settled"] is False
    five = cand(doc, 5)
    assert five["tok_s_95"][0] <= 71.3 <= five["tok_s_95"][1]
    # every candidate carries the measured fields: null where nothing was measured (they were absent)
    assert two["measured_tok_s"] is None and two["measured_accept_len"] is None and five["measured_tok_s"] == 71.3
    # the 6-token verify (28.1 ms) is 2.5 times the 11.26 ms decode step: the settled test also weighs
    # overheads up to 0.8 of that excess, and says what the regret is without them
    doubt = doc["overhead_doubt"]
    assert doubt["max_overhead"] == pytest.approx(0.8 * (28.1 / (1000 / SEED_BASELINE) - 1), abs=0.002)
    assert unc.SETTLED_REGRET < doubt["regret_95_within_assumed"] < doc["regret_95"]
    assert doc["per_batch_size"][0]["overhead_doubt"] == doubt


def test_seed_with_a_2_step_run_pins_the_2_step_interval(tmp_path):
    doc = advise_json(_write(tmp_path / "seed5.json", _doc(SEED_5)), _write(tmp_path / "seed2.json", _doc(SEED_2)),
                      "--baseline-tok-s", SEED_BASELINE)
    lo, hi = cand(doc, 2)["tok_s_95"]
    assert lo <= SEED_BEST_TOK_S <= hi and (hi - lo) / cand(doc, 2)["predicted_tok_s"] <= 0.06
    assert {r["steps"] for r in doc["inputs"]["runs"]} == {2, 5}
    # 2.1 at 2 steps and 2.1 at 5 do not say how the 2-step accept length splits between positions 1
    # and 2, which is all a 1-step prediction rests on: the sweep measured 1 step slower than 2 (94),
    # so the 1-step interval reaches below 94 and only a 1-step run settles it
    one = cand(doc, 1)
    assert one["tok_s_95"][0] < SEED_BEST_TOK_S < one["tok_s_95"][1]
    assert one["interval_source"] == "acceptance per position (mean accept lengths only)"
    assert doc["recommended"]["steps"] == 2 and doc["settled"] is False and doc["next_run"]["steps"] == 1
    # the measured depths' accept lengths are the fitted ones, split or not
    assert cand(doc, 2)["predicted_accept_len"] == pytest.approx(2.1, abs=0.03)
    assert cand(doc, 5)["predicted_accept_len"] == pytest.approx(2.1, abs=0.03)


def _seed_2_step_log(path: Path, cycles: int = 1000, seed: int = 3) -> Path:
    """Per-cycle lines (DESIGN section 3, no device spans) of a 2-step run consistent with the seed:
    accept lengths 1, 2, 3 at 0.3, 0.3, 0.4 over a shuffled deck (mean 2.1, independent cycles),
    verify forward about 21 ms, about 94 tok/s."""
    from sglang_eagle_cycle.cycle import format_line, make_record

    rng = random.Random(seed)
    deck = [1] * (3 * cycles // 10) + [2] * (3 * cycles // 10)
    deck += [3] * (cycles - len(deck))
    rng.shuffle(deck)
    lines = []
    for i, a in enumerate(deck):
        fwd = round(21.0 + rng.gauss(0, 0.2), 2)
        ph = {"draft_ms": round(0.45 + rng.gauss(0, 0.01), 2), "verify_ms": round(fwd + 0.3 + rng.gauss(0, 0.02), 2),
              "verify_fwd_ms": fwd, "extend_ms": round(0.3 + rng.gauss(0, 0.01), 2)}
        ph["total_ms"] = round(ph["draft_ms"] + ph["verify_ms"] + ph["extend_ms"] + 0.29 + rng.gauss(0, 0.02), 2)
        rec = make_record(cycle=i + 1, config=(1, 2, 1, 3), phases_ms=ph, accepts=[a], graph=True)
        lines.append("[2026-12-06 10:00:00 TP0] " + format_line(rec))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_counted_run_beside_a_deeper_mean_only_run_takes_its_acceptance_past_the_counts(tmp_path):
    """The seed's 5-step run (a mean accept length of 2.1, no histogram) beside a per-cycle 2-step log
    that counts positions 1-2 (2.1 too): past position 2 the draft accepts almost nothing, and the
    5-step run says so. The mean-only run had been left out of acceptance whenever another run had
    counts, so positions 3-5 continued the counted trend: 2.36 tokens at 5 steps, a prediction of
    80.1 tok/s against the measured 71.3 (+12.4%, "fits poorly"), and a 3-step run asked for
    (helper 36)."""
    doc = advise_json(_write(tmp_path / "seed5.json", _doc(SEED_5)), _seed_2_step_log(tmp_path / "two.log"),
                      "--baseline-tok-s", SEED_BASELINE)
    five, three = cand(doc, 5), cand(doc, 3)
    assert five["predicted_accept_len"] == pytest.approx(2.1, abs=0.04)
    assert five["tok_s_95"][0] <= 71.3 <= five["tok_s_95"][1]
    assert abs(five["predicted_tok_s"] - 71.3) / 71.3 < 0.02
    notes = " ".join(doc["inputs"]["notes"])
    assert "fits poorly" not in notes and "acceptance past position 2" in notes
    acc = doc["inputs"]["acceptance"]
    assert acc["observed_depth"] == 2 and "mean accept length at 5 steps" in acc["source"]
    pos = {q["j"]: q for q in acc["per_position_acceptance"]}
    assert [pos[j]["source"] for j in (2, 3, 5, 6)] == ["measured", "rule", "rule", "extrapolated"]
    assert pos[3]["p"] < 0.1 and pos[3]["low"] <= pos[3]["p"] <= pos[3]["high"]
    # a step past 2 buys almost no accepted token for ~2.6 ms more: 2 steps, and 3 cannot win
    assert three["predicted_accept_len"] < 2.2 and three["tok_s_95"][1] < cand(doc, 2)["tok_s_95"][1]
    assert doc["recommended"]["steps"] == 2
    lo, hi = cand(doc, 2)["tok_s_95"]
    assert lo <= SEED_BEST_TOK_S <= hi


def test_a_deeper_mean_only_run_beyond_what_the_counts_allow_is_not_used(tmp_path):
    """Counted positions 1-2 (0.70, 0.57) allow 2.10 to 3.30 tokens at 5 steps (nothing, or every
    draft past position 2, accepted). A mean-only 5-step run at 4.0 is another workload or draft: fitted
    anyway, it set the positions past 2 at their cap and the advice on a settled 10 steps (helper 37).
    It is named and left out of acceptance; one at 2.6 is used."""
    two = _seed_2_step_log(tmp_path / "two.log")
    phases = {k: v["mean"] for k, v in SEED_5["phases"].items()}
    far = _write(tmp_path / "far5.json", _doc(_group(5, phases, 4.0, 135.8)))
    doc = advise_json(two, far, "--baseline-tok-s", SEED_BASELINE)
    notes = " ".join(doc["inputs"]["notes"])
    assert "mean accept length 4.00 at 5 steps is beyond what the counted positions allow there (2.10-3.30" in notes
    assert "mean accept length at 5 steps" not in doc["inputs"]["acceptance"]["source"]
    assert not (doc["settled"] and doc["recommended"]["steps"] > 5)
    near = _write(tmp_path / "near5.json", _doc(_group(5, phases, 2.6, 88.3)))
    doc = advise_json(two, near, "--baseline-tok-s", SEED_BASELINE)
    assert "mean accept length at 5 steps" in doc["inputs"]["acceptance"]["source"]
    assert cand(doc, 5)["predicted_accept_len"] == pytest.approx(2.6, abs=0.05)


def test_independent_cycles_are_not_read_as_dispersed(tmp_path):
    """Per-cycle 2-step runs of independent accept lengths beside the seed. The batch-means dispersion
    estimate scatters by about 40%, and floored at 1 it had read 1.2-1.6 on a third of such logs,
    widening the 2-step interval past the issue's 6% (6.1%, helper 36); only a ratio past
    chi-square(12)/12's 95th percentile counts now, so about one independent run in twenty still
    reads as dispersed (here 2 of 12, at 2.3 and 2.6: chance). Every interval holds 94, and every
    one read as independent is at most 6% wide."""
    from scipy.stats import chi2

    from sglang_eagle_cycle import advise as adv
    from sglang_eagle_cycle.series import BATCHES

    dof = 1.5 * BATCHES
    assert adv.DISPERSION_GATE == pytest.approx(chi2.ppf(0.95, dof) / dof, abs=5e-4)
    seed5 = _write(tmp_path / "seed5.json", _doc(SEED_5))
    dispersed = 0
    for k in range(12):
        doc = advise_json(seed5, _seed_2_step_log(tmp_path / f"two{k}.log", seed=k), "--baseline-tok-s", SEED_BASELINE)
        two = cand(doc, 2)
        lo, hi = two["tok_s_95"]
        assert lo <= SEED_BEST_TOK_S <= hi, (k, lo, hi)
        if doc["inputs"]["acceptance"]["dispersion"] > 1.0:
            dispersed += 1
            assert doc["inputs"]["acceptance"]["dispersion"] > adv.DISPERSION_GATE
        else:
            assert (hi - lo) / two["predicted_tok_s"] <= 0.06, (k, lo, hi)
    assert dispersed <= 2
    # a run whose requests stay easy or hard for long stretches keeps its measured dispersion
    run = adv.Run(source="r", bs=1, steps=2, cycles=1000, accept_len=2.1, counts=[(700, 1000), (400, 700)])
    iid = run.iid_accept_se()
    assert dataclasses.replace(run, accept_se=iid * 1.2).accept_dispersion() == 1.0
    assert dataclasses.replace(run, accept_se=iid * 1.5).accept_dispersion() == pytest.approx(2.25)


def test_human_output_ends_with_the_run_to_do_next(tmp_path):
    rc, out, _ = advise(_write(tmp_path / "seed5.json", _doc(SEED_5)), "--baseline-tok-s", SEED_BASELINE)
    last = " ".join(out.strip().splitlines()[-3:])
    assert rc == 0 and "not settled between" in last and "once and pass both logs" in last
    assert "--speculative-num-steps" in last
    assert "launch: --speculative-num-steps" in out and "(bs 1)" in out


def test_a_run_that_decides_by_itself_settles_at_once(tmp_path):
    # speculation that loses by far at every depth: a baseline well above any depth's interval
    doc = advise_json(_write(tmp_path / "seed5.json", _doc(SEED_5)), "--baseline-tok-s", 400)
    assert doc["settled"] is True and doc["next_run"] is None and doc["regret_95"] == 0
    assert doc["recommended"]["steps"] == 0 and doc["recommended"]["speculation"] == "off"
    assert "no run at another depth is expected to change that" in doc["recommended"]["reason"]
    assert all(c["tok_s_95"][1] < 400 for c in doc["candidates"] if c["steps"] > 0)


def test_a_pick_whose_interval_does_not_clear_the_baseline_says_so(tmp_path):
    # speculation kept by the means, but every depth's interval reaches below the no-spec figure: it
    # had been advised as "1.02x, settled" with nothing said of it (helper 79)
    runs = (_write(tmp_path / "seed5.json", _doc(SEED_5)), _write(tmp_path / "seed2.json", _doc(SEED_2)))
    doc = advise_json(*runs, "--baseline-tok-s", SEED_BASELINE)
    spec = [c for c in doc["candidates"] if c["steps"] > 0]
    low = max(c["tok_s_95"][0] for c in spec)
    assert low > SEED_BASELINE and doc["recommended"]["clears_baseline"] is True
    assert "clears" not in doc["recommended"]["reason"]
    between = (low + doc["recommended"]["predicted_tok_s"]) / 2
    doc = advise_json(*runs, "--baseline-tok-s", f"{between:.2f}")
    rec = doc["recommended"]
    assert rec["steps"] > 0 and rec["clears_baseline"] is False
    assert f"no depth's 95% interval clears the no-spec {between:.1f} tok/s" in rec["reason"]
    assert "speculation may not pay here" in rec["reason"]
    # ... and whether a run could change it: the one the decision names, or none
    assert (f"a run at {doc['next_run']['steps']} step" in rec["reason"] if doc["next_run"] and
            doc["next_run"]["useful"] else "no run at another depth" in rec["reason"] or "no single run" in rec["reason"])
    assert doc["per_batch_size"][0]["recommended"]["clears_baseline"] is False
    # speculation off itself carries the flag too
    off = advise_json(runs[0], "--baseline-tok-s", 400)["recommended"]
    assert off["steps"] == 0 and off["clears_baseline"] is False


def test_speculation_off_says_which_run_could_change_it(tmp_path):
    # near the baseline: off is the pick, but not settled, and the reason names the run that decides
    doc = advise_json(_write(tmp_path / "seed5.json", _doc(SEED_5)), "--baseline-tok-s", 106)
    assert doc["recommended"]["steps"] == 0 and doc["settled"] is False
    assert f"a run at {doc['next_run']['steps']} step" in doc["recommended"]["reason"]


# --- a stand-in sweep over steps 1-5, one log, 3 steps truly best -----------------------------------


def _sweep_world():
    return aw.World(kind="dense", bs=4, p=(0.85, 0.8, 0.75, 0.3, 0.25, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2),
                    decode_ms=9.0, verify_overhead=0.1, fixed_ms=1.0, slope_ms=0.05, extend_fixed_ms=0.4,
                    extend_slope_ms=0.01, draft_step_ms=0.6, other_ms=0.3, gap_ms=0.05, noise=0.03, name="sweep")


def test_sweep_of_steps_1_to_5_in_one_log_recommends_the_measured_best(tmp_path):
    w = _sweep_world()
    truth = {s: w.true_tok_s(s) for s in range(0, 6)}
    assert max(truth, key=truth.get) == 3 and truth[3] > 1.03 * max(truth[2], truth[4])
    rng = random.Random(5)
    log = tmp_path / "adaptive.log"   # one server, several depths (as --speculative-adaptive logs them)
    log.write_text("\n".join(ln for s in range(1, 6) for ln in w.log_lines(s, 1500, rng)) + "\n")
    doc = advise_json(log, "--baseline-tok-s", truth[0], "--steps-candidates", *range(0, 9))
    assert sorted(r["steps"] for r in doc["inputs"]["runs"]) == [1, 2, 3, 4, 5]
    assert doc["inputs"]["acceptance"]["observed_depth"] == 5
    measured = {c["steps"]: c for c in doc["candidates"] if c.get("measured_tok_s")}
    assert set(measured) >= {1, 2, 3, 4, 5}
    pick = doc["recommended"]["steps"]
    assert pick == 3 or (not doc["settled"] and pick in measured)
    # never a measured depth whose measurement is more than its noise below another measured depth
    top = max(measured.values(), key=lambda c: c["measured_tok_s"])
    assert measured[pick]["tok_s_95"][1] >= top["tok_s_95"][0]
    for s, c in measured.items():   # measurements win: each measured depth predicted within its interval
        if s:
            assert c["tok_s_95"][0] <= c["measured_tok_s"] * 1.01 and c["measured_tok_s"] * 0.99 <= c["tok_s_95"][1]


def test_runs_whose_acceptance_disagrees_are_named_with_their_misses(tmp_path):
    # two restarts on different prompts: acceptance 0.06 higher per position at 3 steps, 0.06 lower at
    # 5. Their dispersion widens every interval until it holds both measurements, and 4 steps was
    # advised between them with no word that each run says another thing (helper 79)
    w = _sweep_world()
    rng = random.Random(7)
    logs = []
    for steps, shift in ((3, 0.06), (5, -0.06)):
        run = dataclasses.replace(w, p=tuple(min(0.99, max(0.01, q + shift)) for q in w.p), name=f"s{steps}")
        logs.append(tmp_path / f"s{steps}.log")
        logs[-1].write_text("\n".join(run.log_lines(steps, 1500, rng)) + "\n")
    doc = advise_json(*logs, "--baseline-tok-s", w.true_tok_s(0))
    (note,) = [n for n in doc["inputs"]["notes"] if "the runs disagree" in n]
    assert not any("fits poorly" in n for n in doc["inputs"]["notes"])   # the poor-fit check passes ...
    for steps in (3, 5):
        c = cand(doc, steps)
        assert abs(c["measured_tok_s"] / c["predicted_tok_s"] - 1) > 0.05
        assert f"{steps} steps measured {c['measured_tok_s']:.1f} tok/s against {c['predicted_tok_s']:.1f}" in note
    assert "re-run the contending depths on one workload" in note
    # ... and runs of one workload raise no such note
    same = []
    for steps in (3, 5):
        same.append(tmp_path / f"same{steps}.log")
        same[-1].write_text("\n".join(w.log_lines(steps, 1500, rng)) + "\n")
    doc = advise_json(*same, "--baseline-tok-s", w.true_tok_s(0))
    assert not any("the runs disagree" in n for n in doc["inputs"]["notes"])


# A sweep of steps 1-5 against test/standin_server.py, as `eagle-cycle sweep` writes it (figures from a
# new user's run, 2026-12-05): steps -> (output tok/s, accept hist, cycles, cycle-group accept_len batch SE)
STANDIN_SWEEP = {1: (124.682, {"1": 120, "2": 192}, 312, 0.004987), 2: (136.042, {"1": 8, "2": 248}, 256, 0.0),
                 3: (140.654, {"2": 168, "3": 56}, 224, 0.0), 4: (133.648, {"1": 8, "2": 128, "3": 80}, 216, 0.009317),
                 5: (128.6, {"1": 8, "2": 104, "3": 96}, 208, 0.00832)}


def _standin_bench_records():
    def ph(mean):
        return {"mean": mean, "sd": 0.0}
    recs = [{"schema": "eagle-cycle-bench/1", "model": "m", "draft": None, "steps": 0, "topk": None,
             "num_draft_tokens": None, "concurrency": 1, "status": "ok", "output_tok_s": 87.988}]
    for s, (tok, hist, cycles, acc_se) in STANDIN_SWEEP.items():
        n = sum(hist.values())
        mean = sum(int(k) * v for k, v in hist.items()) / n
        total = 11.3 + 1.4 + 1.4 * (s - 1)
        grp = {"bs": 1, "steps": s, "topk": 1, "draft_tokens": s + 1, "device_spans": False, "cycles": cycles,
               "phases": {"draft_ms": ph(1.4 * (s - 1)) if s > 1 else ph(None), "verify_ms": ph(11.3),
                          "extend_ms": ph(1.4), "other_ms": ph(0.0), "total_ms": ph(total)},
               "accept_len_mean": mean, "accept_hist": hist,
               "batch_se": {"accept_len": acc_se, "period_ms": 0.0, "batch_cycles": 24, "cycles": cycles}}
        recs.append({"schema": "eagle-cycle-bench/1", "model": "m", "draft": "d", "steps": s, "topk": 1,
                     "num_draft_tokens": s + 1, "concurrency": 1, "status": "ok", "output_tok_s": tok,
                     "accept_len_mean": round(mean, 4), "accept_hist": hist, "cycle": grp})
    return recs


def test_a_stand_in_sweep_of_bench_records_never_recommends_a_measured_depth_beaten_beyond_noise(tmp_path):
    """The issue's own case: `eagle-cycle sweep` over steps 1-5 against the stand-in server measures
    3 steps fastest (140.7 tok/s) and 2 steps at 136.0. The pooled chain model ranks 2 steps first (the
    stand-in's acceptance is no chain: p2 is 0 at 2 steps and 0.25-0.48 deeper), and bench records
    used to carry no noise estimate, so the measurement never won: advise recommended 2 steps. The
    records' cycle groups give it (accept-length chain variance and batch means; cycle times exact
    here): 3 steps is 2.4 standard errors above 2, and the measurement wins."""
    path = tmp_path / "sweep.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _standin_bench_records()))
    doc = advise_json(path)
    assert doc["recommended"]["steps"] == 3
    assert any("3 steps measured 140.7 tok/s" in n and "the measurement wins" in n for n in doc["inputs"]["notes"])
    measured = {c["steps"]: c["measured_tok_s"] for c in doc["candidates"] if c.get("measured_tok_s")}
    assert measured[3] == max(measured.values()) == pytest.approx(140.654, abs=0.01)
    # the adaptive config pins what is recommended (it used to pin the model's 2 steps beside a 3-step launch)
    cfg = tmp_path / "adaptive.json"
    doc = advise_json(path, "--adaptive-config", cfg)
    assert doc["adaptive_config"]["speculative_num_steps"] == 3
    assert json.loads(cfg.read_text())["1"] == {"candidate_steps": [3]}


# --- stock Decode batch logs at several depths ----------------------------------------------------


def _stock_log(path: Path, steps: int, accept_len: float, tok_s: float, server_args: bool = True) -> Path:
    rng = random.Random(steps)
    lines = []
    if server_args:
        lines.append("[2026-12-01 10:00:00] server_args={'model_path': 'm', 'speculative_algorithm': 'EAGLE3', "
                     f"'speculative_num_steps': {steps}, 'speculative_eagle_topk': 1, "
                     f"'speculative_num_draft_tokens': {steps + 1}, 'tp_size': 8}}")
    for i in range(60):
        a = accept_len * rng.uniform(0.97, 1.03)
        lines.append(f"[2026-12-01 10:01:{i % 60:02d} TP0] Decode batch, #running-req: 1, #token: {100 + 40 * i}, "
                     f"token usage: 0.00, accept len: {a:.2f}, accept rate: {(a - 1) / steps:.2f}, cuda graph: True, "
                     f"gen throughput (token/s): {tok_s * a / accept_len:.2f}, #queue-req: 0")
    path.write_text("\n".join(lines) + "\n")
    return path


def _stock_rows_log(path: Path, steps: int, rows) -> Path:
    """A stock log of one start at ``steps`` (chain drafting): a Decode batch line per ``(bs,
    accept length, gen tok/s)`` of ``rows``."""
    lines = ["[2026-12-01 10:00:00] server_args={'model_path': 'm', 'speculative_algorithm': 'EAGLE3', "
             f"'speculative_num_steps': {steps}, 'speculative_eagle_topk': 1, "
             f"'speculative_num_draft_tokens': {steps + 1}}}"]
    for i, (bs, acc, tok) in enumerate(rows):
        lines.append(f"[2026-12-01 10:01:{i % 60:02d} TP0] Decode batch, #running-req: {bs}, #token: {900 * bs}, "
                     f"token usage: 0.01, accept len: {acc:.2f}, accept rate: {(acc - 1) / steps:.2f}, "
                     f"cuda graph: True, gen throughput (token/s): {tok:.2f}, #queue-req: 0")
    path.write_text("\n".join(lines) + "\n")
    return path


def _ramp_group(bs: int, cycles: int, steps: int = 3) -> dict:
    """A plugin-log group at ``bs`` of a server whose verify grows 0.2 ms per verified token."""
    verify = 20.0 + 0.2 * bs * (steps + 1)
    phases = {"draft_ms": 0.4 * steps, "verify_ms": verify, "verify_fwd_ms": verify - 0.5, "extend_ms": 0.3,
              "other_ms": 0.5}
    phases["total_ms"] = sum(v for k, v in phases.items() if k != "verify_fwd_ms")
    g = _group(steps, phases, 2.4, 1000.0 * bs * 2.4 / phases["total_ms"], cycles=cycles)
    g["bs"] = bs
    return g


def test_the_first_stock_line_after_a_pause_does_not_carry_the_run(tmp_path):
    """SGLang divides an interval's tokens by the time since its previous line, pause included: the
    first line of a public EAGLE-3 report reads 0.39 tok/s beside 166-189. Taken in proportion to
    its time, one such line among 60 at 90 tok/s had made the run read 2.6 tok/s and advise stop
    with "a hypothesis predicts a cycle time that is not positive". A no-spec server's first line
    after a pause had pulled its baseline down by its share of the count."""
    log = _stock_log(tmp_path / "s3.log", 3, 1.95, 90.0)
    lines = log.read_text().splitlines()
    lines[1] = re.sub(r"gen throughput \(token/s\): [\d.]+", "gen throughput (token/s): 0.39", lines[1])
    log.write_text("\n".join(lines) + "\n")
    base = _nospec_log(tmp_path / "nospec.log", 88.0)
    lines = base.read_text().splitlines()
    lines[1] = re.sub(r"gen throughput \(token/s\): [\d.]+", "gen throughput (token/s): 0.52", lines[1])
    # and a ramp's interval at bs 13, whose throughput spans the batch sizes it passed
    lines.append(lines[2].replace("#running-req: 1,", "#running-req: 13,").replace("(token/s): 8", "(token/s): 60"))
    base.write_text("\n".join(lines) + "\n")
    rc, out, err = advise(log, base, "--json")
    assert rc == 0, err
    doc = json.loads(out)
    run = next(r for r in doc["inputs"]["runs"] if r["steps"] == 3)
    assert run["tok_s"] == pytest.approx(90.0, rel=0.01)
    assert doc["inputs"]["baseline_tok_s"]["1"] == pytest.approx(88.0, rel=0.005)
    assert sorted(doc["inputs"]["baseline_tok_s"]) == ["1"]
    notes = " | ".join(doc["inputs"]["notes"])
    assert "59 intervals" in notes and "left out: 1 with idle time in the interval" in notes
    assert re.search(r"baseline tok/s by batch size 1: 8[78]\.\d \(intervals left out: 1 with idle time in the interval",
                     notes) and "1 with too few at their batch size (under 3 where another has more" in notes


def test_the_top_level_answer_is_for_the_batch_size_the_server_ran_at(tmp_path):
    """A serving log passes every batch size on the ramp as clients connect (a few cycles each),
    wanders over a plateau (here 28-32, 600 cycles each) and drains, its longest requests finishing
    alone (here 900 cycles at bs 1). The top-level settled/next_run and the launch line had been
    for the smallest batch size, bs 1; the batch size with the most cycles would be the drain's
    tail too. They are for the middle of the load (request-cycles, cycles x bs)."""
    groups = [_ramp_group(1, 900)] + [_ramp_group(b, 2) for b in (2, 4, 8, 16)] + \
        [_ramp_group(b, 600) for b in (28, 29, 30, 31, 32)]
    path = _write(tmp_path / "serving.json", _doc(*groups))
    doc = advise_json(path)
    assert doc["recommended"]["bs"] == 30 and [b["bs"] for b in doc["per_batch_size"]] == [1, 2, 4, 8, 16, 28, 29,
                                                                                            30, 31, 32]
    top = next(b for b in doc["per_batch_size"] if b["bs"] == 30)
    assert (doc["settled"], doc["next_run"]) == (top["settled"], top["next_run"])
    # 900 + 2 (2 + 4 + 8 + 16) + 600 (28 + 29) = 35,160 request-cycles of 90,960 below bs 30
    assert any("is for bs 30, the middle of the measured decode load (request-cycles: 39% at smaller batch sizes, "
               "20% at bs 30, 42% at larger)" in n for n in doc["inputs"]["notes"])
    rc, out, _ = advise(path)
    launch = re.search(r"^launch: .*\(bs 30(;.*)?\)$", out, re.M)
    assert rc == 0 and launch, out[-600:]
    # the picks that differ by batch size are named on it, neighbours with one pick as a range
    assert launch.group(1) is None or re.search(r"bs \d+-\d+: \d", launch.group(1)), launch.group(0)
    # --batch-sizes: the smallest of them a run measured (bs 20, asked but never run, had been it)
    assert advise_json(path, "--batch-sizes", 1, 30)["recommended"]["bs"] == 1
    assert advise_json(path, "--batch-sizes", 20, 30)["recommended"]["bs"] == 30
    # stock lines: 3 ramp intervals at bs 1-3 (left out: their throughput spans the ramp), 20 at
    # bs 4, 60 at bs 8
    stock = _stock_rows_log(tmp_path / "stock.log", 3, [
        (bs, 2.4 + 0.01 * (i % 3), bs * 95.0 / (1 + 0.02 * bs) * (1 + 0.005 * (i % 4)))
        for i, bs in enumerate([1, 2, 3] + [4] * 20 + [8] * 60)])
    doc = advise_json(stock)
    assert doc["recommended"]["bs"] == 8 and [b["bs"] for b in doc["per_batch_size"]] == [4, 8]
    notes = " | ".join(doc["inputs"]["notes"])
    assert "80 intervals" in notes and "left out: 3 with too few at their batch size" in notes
    assert ("is for bs 8, the middle of the measured decode load (request-cycles: 14% at smaller batch sizes, "
            "86% at bs 8, 0% at larger; a stock Decode batch line counts as 40 cycles)") in notes
    # beside phase-timed runs, stock runs shape no cycle time, and do not choose the batch size
    # (their 80 intervals had outweighed a 300-cycle plugin run at bs 16)
    mixed = advise_json(stock, _write(tmp_path / "plugin.json", _doc(_ramp_group(16, 300))))
    assert mixed["recommended"]["bs"] == 16


def _counted_group(bs: int, steps: int, cycles: int, hist: dict) -> dict:
    """A plugin-log group at ``bs`` with an accept-length histogram (request-cycles by accept
    length) and a per-cycle sd, of a server whose verify grows 0.2 ms per verified token."""
    g = _ramp_group(bs, cycles, steps)
    mean = sum(int(k) * n for k, n in hist.items()) / sum(hist.values())
    g["accept_hist"] = {str(k): n for k, n in hist.items()}
    g["accept_len_mean"] = mean
    g["phases"]["total_ms"]["sd"] = 0.3
    g["tok_s"] = 1000.0 * bs * mean / g["phases"]["total_ms"]["mean"]
    return g


def test_a_run_of_a_few_cycles_is_judged_by_the_scatter_its_requests_can_have(tmp_path):
    """A ramp's batch size holds a few cycles: at bs 2, 3 cycles at 5 steps whose 6 requests all
    accepted the first draft (accept length 3.8 against the 2.9 the other runs give). Its own
    per-position rates (1, 0.83, ...) give its accept length less variance than the acceptance of
    every run does, and it had been called a poor fit. Under that acceptance (sd 1.5 tokens), 6
    request-cycles scatter by 0.6 tokens: within that, the run's luck is no misfit. Over thousands
    of request-cycles a run's own rates stand (the stand-in sweep below)."""
    chain3 = {1: 400, 2: 500, 3: 500, 4: 600}          # a chain at p ~ 0.8, 0.75, 0.7 (per 2,000)
    chain5 = {1: 400, 2: 500, 3: 500, 4: 300, 5: 150, 6: 150}
    groups = [_counted_group(16, 3, 2000, {k: 16 * v for k, v in chain3.items()}),
              _counted_group(16, 5, 2000, {k: 16 * v for k, v in chain5.items()}),
              _counted_group(2, 3, 3, {1: 2, 2: 2, 3: 1, 4: 1}),
              _counted_group(2, 5, 3, {2: 1, 3: 2, 4: 1, 5: 1, 6: 1})]
    doc = advise_json(_write(tmp_path / "ramp.json", _doc(*groups)))
    notes = " | ".join(doc["inputs"]["notes"])
    assert "measurement wins" not in notes and "fits poorly at 5 steps (bs 2)" not in notes, notes
    assert "within its own noise" in notes and "5 steps at bs 2" in notes, notes


def test_a_stock_run_beside_phase_timed_ones_is_not_overruled_by_carried_curves(tmp_path):
    """Stock Decode batch lines beside phase-timed runs at another batch size (here 32, 3 steps, 2,000
    tok/s measured; the plugin run at bs 8). They had shaped no cycle time, so the curves carried from
    bs 8 predicted far less for 3 steps, and the model recommended a depth whose prediction lay below
    that measurement (from helper 29: 1 step at 3,257 tok/s beside a measured 4,546, 17% below the
    best). Their cycle now sets the verify at their width (the other phases from the plugin run), so
    the prediction there is the measurement's cycle, and nothing overrules it."""
    rng = random.Random(9)
    stock = _stock_rows_log(tmp_path / "stock.log", 3, [(32, 2.4 * rng.uniform(0.98, 1.02), 2000.0 * rng.uniform(0.98, 1.02))
                                                       for _ in range(40)])
    plugin = _write(tmp_path / "plugin.json", _doc(_counted_group(8, 5, 1000, {1: 1800, 2: 2000, 3: 1800, 4: 1200,
                                                                             5: 700, 6: 500})))
    doc = advise_json(stock, plugin)
    b32 = next(b for b in doc["per_batch_size"] if b["bs"] == 32)
    three = next(c for c in b32["candidates"] if c["steps"] == 3)
    assert three["measured_tok_s"] == pytest.approx(2000.0, rel=0.02)
    # within the acceptance the bs-8 run counted (its accept length at 3 steps is not the stock 2.4)
    assert three["predicted_tok_s"] == pytest.approx(three["measured_tok_s"], rel=0.10)
    assert b32["recommended"]["steps"] == 3


def test_a_stock_plateau_is_one_batch_size_and_a_carried_step_stays_below_the_measured_cycle(tmp_path):
    """A no-spec server whose load wandered over bs 28-32: each stock line's throughput is the
    plateau's (1,200 tok/s), whatever batch size it names, so per batch size they made the step
    grow in proportion to the batch, and their line carried to bs 1 put the no-spec step at 4.4 ms
    beside a measured 20.8 ms verify there: speculation off (helper 30: at bs 1-3, 57% below the
    best). They are one baseline at bs 30 now, and a step carried to a batch size a run measured is
    never above that run's cycle (three user baselines at bs 7-9 had carried 32.6 ms to bs 30,
    where the cycles took 19-20 ms)."""
    nospec = _nospec_log(tmp_path / "nospec.log", 1200.0, lines_n=60, seed=5, spread=0.01,
                         bs=lambda rng: rng.randint(28, 32))
    chain = {1: 400, 2: 500, 3: 500, 4: 600}
    plugin = _write(tmp_path / "plugin.json", _doc(_counted_group(1, 3, 2000, chain),
                                                   _counted_group(30, 3, 2000, {k: 30 * v for k, v in chain.items()})))
    doc = advise_json(nospec, plugin)
    assert sorted(doc["inputs"]["baseline_tok_s"]) == ["30"]
    assert doc["inputs"]["baseline_tok_s"]["30"] == pytest.approx(1200.0, rel=0.01)
    notes = " | ".join(doc["inputs"]["notes"])
    assert "stock batch sizes pooled by plateau, 28-32 as bs 30" in notes
    one = next(b for b in doc["per_batch_size"] if b["bs"] == 1)
    assert one["recommended"]["speculation"] == "on"
    off = next(c for c in one["candidates"] if c["steps"] == 0)
    assert off["predicted_cycle_ms"] <= 22.8 + 1e-6   # the 3-step cycle measured there
    # the ceiling alone, on baselines given by hand: three at bs 7-9 as flat as the plateau's, whose
    # line reaches 100 ms at bs 30, where the 3-step cycle took 46 ms
    doc = advise_json(plugin, "--baseline-tok-s", "7:300", "8:300", "9:300", "--batch-sizes", 1, 30)
    thirty = next(b for b in doc["per_batch_size"] if b["bs"] == 30)
    assert next(c for c in thirty["candidates"] if c["steps"] == 0)["predicted_cycle_ms"] <= 46.0 + 1e-6


def test_stock_decode_batch_logs_at_two_depths_are_runs(tmp_path):
    a = _stock_log(tmp_path / "s3.log", 3, 1.95, 90.0)
    b = _stock_log(tmp_path / "s5.log", 5, 2.1, 71.3)
    doc = advise_json(a, b, "--baseline-tok-s", SEED_BASELINE)
    runs = {r["steps"]: r for r in doc["inputs"]["runs"]}
    assert set(runs) == {3, 5} and runs[3]["accept_len"] == pytest.approx(1.95, abs=0.03)
    assert runs[5]["tok_s"] == pytest.approx(71.3, rel=0.03)
    assert any("two-point fit" in n for n in doc["inputs"]["cycle_model"]["notes"])
    for s in (3, 5):
        # the intervals' own spread gives the noise (batch means over 60 intervals, +-3% each:
        # about 0.2-0.5% of the mean), so the measured depth's interval is no longer zero-wide
        se = runs[s]["tok_s_se"] / runs[s]["tok_s"]
        assert 0.0005 < se < 0.01, se
        lo, hi = cand(doc, s)["tok_s_95"]
        assert lo < runs[s]["tok_s"] < hi and hi - lo > 2 * runs[s]["tok_s_se"]
    assert not any("fits poorly" in n for n in doc["inputs"]["notes"])
    # the logs themselves were given: no note that an inspect document lacks their depth
    assert not any("inspect document" in n for n in doc["inputs"]["notes"])
    # fewer than 16 intervals: no estimate, and the sub-1% rule for runs without noise
    short = tmp_path / "short.log"
    short.write_text("\n".join(a.read_text().splitlines()[:10]) + "\n")
    doc = advise_json(short, b, "--baseline-tok-s", SEED_BASELINE)
    assert {r["steps"]: r["tok_s_se"] is None for r in doc["inputs"]["runs"]} == {3: True, 5: False}
    # the human output keeps "[eagle-cycle]" (it was read as rich markup and dropped)
    rc, out, _ = advise(a, b, "--baseline-tok-s", SEED_BASELINE)
    assert rc == 0 and "per-cycle [eagle-cycle] logs" in " ".join(out.split())
    # without the start-up line the depth is the one its lines' accept len and accept rate pin, said
    # in a note (lines that pin none are refused: test_stock_lines_that_pin_no_one_depth_are_still_refused)
    c = _stock_log(tmp_path / "bare.log", 3, 1.95, 90.0, server_args=False)
    doc = advise_json(c, "--baseline-tok-s", SEED_BASELINE)
    assert [r["steps"] for r in doc["inputs"]["runs"]] == [3]
    assert any("inferred, no server_args= line naming it" in n for n in doc["inputs"]["notes"])



def test_a_stock_log_appended_across_restarts_is_one_run_per_server_start(tmp_path):
    """``>> server.log`` over two restarts: each server_args= line starts a run at its own depth,
    whichever comes first, and the advice is that of the two logs given apart. Only the first
    start's depth had been read: the 1-step run first was refused (accept length 2.1 impossible
    with 1 step), the 5-step run first pooled both under 5 steps."""
    a = _stock_log(tmp_path / "s1.log", 1, 1.7, 95.0)
    b = _stock_log(tmp_path / "s5.log", 5, 2.1, 71.3)
    apart = advise_json(a, b, "--baseline-tok-s", SEED_BASELINE)
    for first, second in ((a, b), (b, a)):
        both = tmp_path / "server.log"
        both.write_text(first.read_text() + second.read_text())
        doc = advise_json(both, "--baseline-tok-s", SEED_BASELINE)
        runs = {r["steps"]: r for r in doc["inputs"]["runs"]}
        assert set(runs) == {1, 5}
        assert runs[1]["accept_len"] == pytest.approx(1.7, abs=0.03) and runs[5]["tok_s"] == pytest.approx(71.3, rel=0.03)
        assert [c["predicted_tok_s"] for c in doc["candidates"]] == [c["predicted_tok_s"] for c in apart["candidates"]]
        assert sum("(part " in n for n in doc["inputs"]["notes"]) == 2


def test_a_stock_runs_throughput_weighs_each_interval_by_its_time(tmp_path):
    """One interval line at 2,000 tok/s among sixty at about 90: the run's throughput is tokens over
    time (the line's share of the time is tiny), not the plain mean of the lines, which it moved by
    36%; a #running-req past 65536 is left out with a note."""
    clean = _stock_log(tmp_path / "s3.log", 3, 1.95, 90.0)
    lines = clean.read_text().splitlines()
    odd = lines[5].replace(lines[5].split("gen throughput (token/s): ")[1].split(",")[0], "2000.00")
    big = lines[6].replace("#running-req: 1,", "#running-req: 99999999,")
    dirty = tmp_path / "s3-odd.log"
    dirty.write_text("\n".join(lines + [odd, big]) + "\n")
    tok = lambda path: advise_json(path, "--baseline-tok-s", SEED_BASELINE)["inputs"]["runs"]   # noqa: E731
    runs_clean, runs_dirty = tok(clean), tok(dirty)
    assert [r["bs"] for r in runs_dirty] == [1]
    assert runs_dirty[0]["tok_s"] == pytest.approx(runs_clean[0]["tok_s"], rel=0.02)   # its tokens, 1 in 61
    assert runs_clean[0]["tok_s"] == pytest.approx(90.0, rel=0.01)
    doc = advise_json(dirty, "--baseline-tok-s", SEED_BASELINE)
    assert any("left out: 1 with #running-req above 65536" in n for n in doc["inputs"]["notes"])


def test_stock_runs_at_two_batch_sizes_make_no_fall_of_the_cycle_time_across_them(tmp_path):
    """A 5-step cycle at bs 1 (6 tokens) and a 1-step one at bs 4 (8 tokens) are different depths:
    no "cycle time falls" note from one to the other (each batch size's own curve is looked at)."""
    a = _stock_log(tmp_path / "s5.log", 5, 2.1, 71.3)
    b = _stock_log(tmp_path / "s1.log", 1, 1.7, 95.0)
    b.write_text(b.read_text().replace("#running-req: 1,", "#running-req: 4,").replace(
        "gen throughput (token/s): ", "gen throughput (token/s): 4"))
    doc = advise_json(a, b, "--baseline-tok-s", "1:88.8", "4:300")
    assert {(r["bs"], r["steps"]) for r in doc["inputs"]["runs"]} == {(1, 5), (4, 1)}
    assert not any("falls" in n for n in doc["inputs"]["cycle_model"]["notes"] + doc["inputs"]["notes"])

def test_an_inspect_document_of_stock_lines_is_read_at_its_inferred_depth(tmp_path):
    # inspect's document of a stock log carries no server_args= line, but the one num_draft_tokens
    # its intervals' accept len and accept rate fit: advise refused it, though it reads the log alone
    # at that inferred depth (helper 79)
    from sglang_eagle_cycle.report import inspect_paths

    logs = [_stock_log(tmp_path / f"stock{s}.log", s, a, t) for s, a, t in ((3, 2.4, 80.0), (5, 2.9, 84.0))]
    docs = [_write(tmp_path / f"stock{i}.json", inspect_paths([p])) for i, p in enumerate(logs)]
    assert [json.loads(d.read_text())["decode_batch"]["num_draft_tokens_inferred"] for d in docs] == [4, 6]
    from_docs = advise_json(*docs, "--baseline-tok-s", 60)
    from_logs = advise_json(*logs, "--baseline-tok-s", 60)
    pick = lambda d: {(r["bs"], r["steps"], round(r["accept_len"], 3), round(r["tok_s"], 2)) for r in d["inputs"]["runs"]}
    assert pick(from_docs) == pick(from_logs) and {(b, s) for b, s, _a, _t in pick(from_docs)} == {(1, 3), (1, 5)}
    assert any("the depth inferred from their accept len and accept rate (num_draft_tokens 4" in n
               for n in from_docs["inputs"]["notes"])
    # a log beside its own document counts once, as the log (which knows its throughput's error)
    both = advise_json(logs[0], docs[0], "--baseline-tok-s", 60)
    assert len(both["inputs"]["runs"]) == 1 and both["inputs"]["runs"][0]["tok_s_se"] is not None
    assert any("holds the same run" in n for n in both["inputs"]["notes"])
    # no depth fits (an accept rate of another convention): refused as before, in one line
    bad = tmp_path / "odd.log"
    bad.write_text(logs[0].read_text().replace("accept rate: 0.", "accept rate: 0.9"))
    rc, _, err = advise(_write(tmp_path / "odd.json", inspect_paths([bad])), "--baseline-tok-s", 60)
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "an inspect document does not carry the depth they ran at" in err and "give the log itself" in err


def test_server_args_line_in_both_shapes():
    from sglang_eagle_cycle.decode_batch import speculative_server_args as parse

    new = parse("x\n[t] server_args={'speculative_algorithm': 'EAGLE3', 'speculative_num_steps': 2, "
                "'speculative_eagle_topk': 1, 'speculative_num_draft_tokens': 3}\n")
    old = parse("[t] server_args=ServerArgs(model_path='m', speculative_algorithm='EAGLE3', "
                "speculative_num_steps=5, speculative_eagle_topk=None, speculative_num_draft_tokens=6)")
    assert new == {"algorithm": "EAGLE3", "num_steps": 2, "eagle_topk": 1, "num_draft_tokens": 3, "adaptive": None}
    assert old == {"algorithm": "EAGLE3", "num_steps": 5, "eagle_topk": None, "num_draft_tokens": 6, "adaptive": None}
    both = parse("[t] server_args=ServerArgs(speculative_algorithm='EAGLE3', speculative_num_steps=-1, "
                 "speculative_adaptive=True, speculative_adaptive_config=None)")
    assert both["num_steps"] == -1 and both["adaptive"] is True
    assert parse("no such line\n") is None


# --- one baseline per batch size -------------------------------------------------------------------


def test_one_baseline_value_needs_its_batch_size(tmp_path):
    g1 = SEED_5
    g8 = dict(SEED_5, bs=8, tok_s=400.0)
    path = _write(tmp_path / "two_bs.json", _doc(g1, g8))
    rc, _, err = advise(path, "--baseline-tok-s", SEED_BASELINE)
    assert rc == 2 and "several batch sizes (1, 8)" in err and "--batch-sizes" in err
    doc = advise_json(path, "--baseline-tok-s", SEED_BASELINE, "--batch-sizes", 1)
    assert doc["inputs"]["baseline_tok_s"] == {"1": SEED_BASELINE}
    assert cand(doc, 0)["predicted_tok_s"] == pytest.approx(SEED_BASELINE)
    # a single run: the bare value is the one at --batch-sizes N, not at the run's batch size
    doc = advise_json(_write(tmp_path / "one.json", _doc(SEED_5)), "--baseline-tok-s", 600, "--batch-sizes", 8)
    assert doc["inputs"]["baseline_tok_s"] == {"8": 600.0} and doc["recommended"]["bs"] == 8
    # ... and said, since the same value could be meant for the run's bs 1 (it went there silently)
    assert any("taken at bs 8, the one --batch-sizes names, not at the runs' bs 1" in n for n in doc["inputs"]["notes"])
    doc = advise_json(_write(tmp_path / "one.json", _doc(SEED_5)), "--baseline-tok-s", 88.8, "--batch-sizes", 8, 16)
    assert doc["inputs"]["baseline_tok_s"] == {"1": 88.8}
    assert any("taken at the runs' bs 1, not at the other --batch-sizes" in n for n in doc["inputs"]["notes"])


def test_inspect_and_advise_place_one_baseline_alike_past_a_stock_ramp(tmp_path):
    # a serving log: a line or two at each batch size the clients passed while connecting, then the
    # steady bs 8. Advise took a bare baseline at bs 8; inspect refused it for "several batch sizes
    # (2, 3, 4, 6, 8)" (helper 79). Both now read the ramp as advise does, and inspect compares the
    # value with bs 8 alone (a ramp interval's throughput is over the batch sizes it passed)
    ramp = [(2, 2.8, 410.9), (4, 2.8, 768.0), (4, 2.85, 790.6), (6, 2.76, 1113.6)]
    rng = random.Random(5)
    steady = [(8, 2.8 * rng.uniform(0.98, 1.02), 1430.0 * rng.uniform(0.98, 1.02)) for _ in range(60)]
    path = _stock_rows_log(tmp_path / "ramp.log", 3, ramp + steady + [(3, 2.8, 600.0)])
    doc = advise_json(path, "--baseline-tok-s", 1500)
    assert doc["inputs"]["baseline_tok_s"] == {"8": 1500.0} and doc["recommended"]["bs"] == 8
    rc, out, err = _inspect(path, "--baseline", 1500)
    assert rc == 0, err
    slow = [f for f in json.loads(out)["findings"] if f["code"] == "slower_than_baseline"]
    assert [f["evidence"]["bs"] for f in slow] == [8]          # not the ramp's bs 2-6, all below 1500
    # a load that wandered over 28-32 is one plateau in both: advise puts the value at bs 30, the
    # plateau's, and inspect compares every member with it (the ramp's bs 2 and 8 still with none)
    rng = random.Random(3)
    wander = [(28 + i % 5, 2.8, 30.0 * (28 + i % 5) * rng.uniform(0.98, 1.02)) for i in range(300)]
    plateau = _stock_rows_log(tmp_path / "plateau.log", 3, [(2, 2.8, 60.0), (8, 2.8, 240.0)] + wander)
    assert advise_json(plateau, "--baseline-tok-s", 2000)["inputs"]["baseline_tok_s"] == {"30": 2000.0}
    rc, out, err = _inspect(plateau, "--baseline", 2000)
    slow = [f for f in json.loads(out)["findings"] if f["code"] == "slower_than_baseline"]
    assert rc == 0 and sorted(f["evidence"]["bs"] for f in slow) == [28, 29, 30, 31, 32], err
    # a second steady batch size makes the one value ambiguous in both
    path2 = _stock_rows_log(tmp_path / "two.log", 3, steady + [(16, 2.8, 2500.0)] * 20)
    assert "several batch sizes (8, 16)" in advise(path2, "--baseline-tok-s", 1500)[2]
    rc, _, err = _inspect(path2, "--baseline", 1500)
    assert rc == 2 and "several batch sizes (8, 16)" in err


def test_a_measured_depth_clearly_faster_than_the_measured_pick_wins():
    from sglang_eagle_cycle import advise as adv

    def run(steps, tok, sd):
        return adv.Run(source=f"r{steps}", bs=32, steps=steps, cycles=2000, accept_len=4.0, tok_s=tok,
                       phases={"total_ms": 1000.0 * 32 * 4.0 / tok}, total_sd=sd,
                       counts=[(1800, 2000), (1500, 1800), (1200, 1500)])
    six, seven = run(6, 2500.0, 2.0), run(7, 2560.0, 2.0)        # 0.09% relative error each; 2.4% apart
    won = adv._measured_winner(6, [six, seven], [0, 6, 7, 8])
    assert won is not None and won[0] is seven and won[1] is six and won[2] > adv.MEASURED_WINS_Z
    assert adv._measured_winner(7, [six, seven], [0, 6, 7, 8]) is None        # the pick is the faster one
    noisy6, noisy7 = run(6, 2500.0, 400.0), run(7, 2560.0, 400.0)      # ~1.1% each: within noise
    assert adv._measured_winner(6, [noisy6, noisy7], [0, 6, 7, 8]) is None
    # a pick without a noise estimate (a table row, a bench record without its cycle group) counts as
    # 1% wide at 95%: 2.4% below the other loses, 0.6% below does not (it used to never lose)
    unknown6 = dataclasses.replace(six, total_sd=None)
    assert adv._measured_winner(6, [unknown6, seven], [0, 6, 7, 8])[0] is seven
    assert adv._measured_winner(6, [unknown6, run(7, 2515.0, 2.0)], [0, 6, 7, 8]) is None
    assert adv._measured_winner(5, [six, seven], [0, 5, 6, 7]) is None        # an unmeasured pick: the model's
    # two runs at the pick's depth count together (a sweep re-run into the same file; only the last
    # run at a depth used to count): 2500 and 2506 average 2503 (inverse-variance), 2.2% below the
    # 2560 at 7 steps, which wins
    again = dataclasses.replace(six, tok_s=2506.0, phases={"total_ms": 1000.0 * 32 * 4.0 / 2506.0}, source="r6b")
    won = adv._measured_winner(6, [six, again, seven], [0, 6, 7, 8])
    assert won is not None and won[0] is seven and won[1].tok_s == pytest.approx(2503.0, abs=0.5)
    assert won[1].source.startswith("2 runs")
    # 2500 and 2570, each within 0.3%, disagree far beyond their noise: their mean (2534) is that
    # uncertain (Cochran's Q inflates its error), and 2560 no longer wins over it (helper 37: two stock
    # logs at 291.8 and 179.6 had let the faster one win and settle)
    apart = dataclasses.replace(six, tok_s=2570.0, phases={"total_ms": 1000.0 * 32 * 4.0 / 2570.0}, source="r6c")
    run6, se6 = adv.pooled_runs([six, apart])
    assert run6.tok_s == pytest.approx(2534.0, abs=1.0) and se6 > 3 * adv.pooled_runs([six, again])[1]
    assert adv._measured_winner(6, [six, apart, seven], [0, 6, 7, 8]) is None


def test_a_batch_size_wider_than_the_measured_verify_keeps_the_verify_from_the_baseline_below(tmp_path):
    """One run at bs 4 and 3 steps (16 verified tokens, 27.6 ms), its baseline at bs 4, advice asked
    for bs 16 and 32 too: their verifies (32-128 tokens) lie past the measured width, where the
    decode step at their own batch size is no anchor below it. The curve was then proportional from
    the one point (55.3 ms at 32 tokens, 110.5 at 128; truth 28.4 and 33.2) and speculation was
    advised off at bs 16 and up; it is now anchored at the bs-4 baseline. A decode step given at bs
    32 still bounds that batch size's verify from below."""
    w = aw.World(kind="dense", bs=4, p=(0.8, 0.72, 0.64, 0.57, 0.51, 0.46, 0.41, 0.36, 0.32, 0.29, 0.26, 0.23),
                 decode_ms=24.7, verify_overhead=0.09, fixed_ms=24.5, slope_ms=0.046, extend_fixed_ms=0.5,
                 extend_slope_ms=0.0017, draft_step_ms=0.88, other_ms=0.88, gap_ms=0.08, noise=0.04, name="wide-bs")
    log = tmp_path / "bs4.log"
    log.write_text("\n".join(w.log_lines(3, 2000, random.Random(3))) + "\n")
    doc = advise_json(log, "--baseline-tok-s", f"4:{w.true_tok_s(0)}", "--batch-sizes", 4, 16, 32)
    per = {p["bs"]: p for p in doc["per_batch_size"]}
    for bs in (16, 32):
        for c in per[bs]["candidates"]:
            if 1 <= c["steps"] <= 3:
                width = bs * (c["steps"] + 1)
                assert 0.8 * w.verify_ms(width) <= c["cycle_phases_ms"]["verify_ms"] <= 1.25 * w.verify_ms(width)
        assert per[bs]["recommended"]["steps"] >= 1
    slow = 1000.0 * 32 / 40.0           # a 40 ms decode step at bs 32, above every measured verify
    doc = advise_json(log, "--baseline-tok-s", f"4:{w.true_tok_s(0)}", f"32:{slow}", "--batch-sizes", 4, 32)
    per = {p["bs"]: p for p in doc["per_batch_size"]}
    assert all(c["cycle_phases_ms"]["verify_ms"] >= 40.0 for c in per[32]["candidates"] if c["steps"] >= 1)


def test_whole_cycle_times_at_a_wider_batch_size_keep_the_baseline_below(tmp_path):
    """Stock lines at bs 1 and 3 steps (a 21.7 ms cycle over 4 tokens), advice for bs 8 too: its
    cycles (16 tokens and up) were proportional to the one measured point (86.7 ms at 1 step) and
    speculation was advised off; now the curve runs from the bs-1 baseline, with bs 8's own decode
    step (20 ms, when given) as a floor."""
    log = _stock_log(tmp_path / "s3.log", 3, 1.95, 90.0)
    for extra in ([], ["8:400"]):
        doc = advise_json(log, "--baseline-tok-s", "1:60", *extra, "--batch-sizes", 1, 8)
        eight = next(p for p in doc["per_batch_size"] if p["bs"] == 8)
        one_step = next(c for c in eight["candidates"] if c["steps"] == 1)
        assert 20.0 <= one_step["predicted_cycle_ms"] <= 1.5 * 1000.0 * 1.95 / 90.0
        assert eight["recommended"]["steps"] >= 1


def _dense_world(bs, slope):
    """One dense target seen at batch size ``bs``: decode step ``6 + slope * bs`` ms, verify 15% above
    the forward ``6 + slope * tokens``, draft and host costs growing a little with ``bs``."""
    return aw.World(kind="dense", bs=bs, p=tuple(round(0.8 * 0.95 ** j, 4) for j in range(12)),
                    decode_ms=6.0 + slope * bs, verify_overhead=0.15, fixed_ms=6.0, slope_ms=slope,
                    extend_fixed_ms=0.5, extend_slope_ms=0.002, draft_step_ms=0.4 + 0.004 * bs,
                    draft_prep_ms=0.1, other_ms=0.3 + 0.005 * bs, gap_ms=0.05, noise=0.03, name=f"bs{bs}")


def _runs_at_1_and_32(world, tmp_path):
    """Logs of a 3-step run at bs 1 and a 2-step run at bs 32 of ``world(bs)``."""
    logs = []
    for bs, steps in ((1, 3), (32, 2)):
        logs.append(tmp_path / f"bs{bs}.log")
        logs[-1].write_text("\n".join(world(bs).log_lines(steps, None, random.Random(bs))) + "\n")
    return logs


def test_one_baseline_moves_along_the_verify_slope_not_to_its_level(tmp_path):
    """Runs at bs 1 (3 steps) and bs 32 (2 steps) of one dense target, decode step 6 + 0.03 bs ms,
    verify 15% above it; one baseline, at bs 8. The decode step at bs 1-4 was the verify curve's
    value there (7.03 ms, the measured 4-token verify, overhead included: above the 6.24 ms given at
    bs 8). Now it is the baseline moved by the verify's slope: within 2% of the truth, never above
    the bs-8 step."""
    world = functools.partial(_dense_world, slope=0.03)
    logs = _runs_at_1_and_32(world, tmp_path)
    doc = advise_json(*logs, "--baseline-tok-s", f"8:{world(8).true_tok_s(0)}", "--batch-sizes", 1, 2, 4, 8, 16)
    for p in doc["per_batch_size"]:
        off = cand(p, 0)
        assert off["predicted_cycle_ms"] == pytest.approx(world(p["bs"]).decode_ms, rel=0.02)
        if p["bs"] < 8:
            assert off["predicted_cycle_ms"] <= world(8).decode_ms + 1e-9


def test_a_one_step_cycle_may_leave_out_the_draft_preparation_of_the_deeper_runs(tmp_path):
    """3-step runs at bs 8 and 16 of a target whose one-step cycles prepare no draft (0.1 ms per
    cycle in the deeper runs' other time). The 1-step prediction paid it in every hypothesis, and its
    interval, about 1% wide, left out the truth at bs 16 (3145-3186 against 3201 tok/s): now none
    to all of it is left out."""
    world = functools.partial(_dense_world, slope=0.03)
    logs = []
    for bs in (8, 16):
        logs.append(tmp_path / f"bs{bs}.log")
        logs[-1].write_text("\n".join(world(bs).log_lines(3, None, random.Random(bs * 100 + 3))) + "\n")
    doc = advise_json(*logs, "--baseline-tok-s", f"8:{world(8).true_tok_s(0)}", f"16:{world(16).true_tok_s(0)}",
                      "--batch-sizes", 8, 16)
    for p in doc["per_batch_size"]:
        lo, hi = cand(p, 1)["tok_s_95"]
        assert lo <= world(p["bs"]).true_tok_s(1) <= hi


def test_an_adaptive_config_lists_each_off_bucket_once_and_names_every_merged_batch_size(tmp_path):
    """A dense target whose no-spec step is 6 + 0.15 bs ms: speculation loses from about bs 40 up.
    Runs at bs 1 and 32, advice at bs 1-64 over graph sizes 1, 8, 32, 64: the off bucket was listed
    once per batch size padded to it ([64, 64, 64], a warning each), and a merge note named only
    the last two batch sizes of a bucket."""
    world = functools.partial(_dense_world, slope=0.15)
    logs = _runs_at_1_and_32(world, tmp_path)
    out = tmp_path / "adaptive.json"
    rc, text, err = advise(*logs, "--baseline-tok-s", f"1:{world(1).true_tok_s(0)}", "--cuda-graph-bs", 1, 8, 32, 64,
                           "--batch-sizes", 1, 2, 4, 8, 16, 24, 32, 40, 48, 64, "--adaptive-config", out)
    assert rc == 0, err
    off = json.loads(out.read_text())["_eagle_cycle"]["speculation_off_buckets"]
    assert off == sorted(set(off)) and 64 in off
    assert text.count("speculation is predicted slower than none") == len(off)
    merged = [ln for ln in text.splitlines() if "pad to 8" in ln]
    assert merged and all("bs 2, 4, 8 pad to 8" in ln for ln in merged)


def test_the_same_run_given_twice_counts_once(tmp_path):
    w = _sweep_world()
    log = tmp_path / "a.log"
    log.write_text("\n".join(w.log_lines(3, 400, random.Random(2))) + "\n")
    copy = tmp_path / "copy.log"
    copy.write_text(log.read_text())
    one = advise_json(log, "--baseline-tok-s", w.true_tok_s(0))
    two = advise_json(log, copy, "--baseline-tok-s", w.true_tok_s(0))
    assert len(two["inputs"]["runs"]) == 1
    assert two["inputs"]["acceptance"]["samples"] == one["inputs"]["acceptance"]["samples"]
    assert cand(two, 5)["tok_s_95"] == cand(one, 5)["tok_s_95"]
    assert any("holds the same run as" in n and "counted once" in n for n in two["inputs"]["notes"])


def test_a_document_beside_its_own_many_run_log_says_so_once(tmp_path):
    """A serving log's inspect document given beside the log: 10 batch sizes x 2 depths, each run
    twice. There had been one note per run (144 in helper 29's case)."""
    groups = [_ramp_group(b, 50, s) for b in range(24, 34) for s in (3, 5)]
    doc_a = _write(tmp_path / "a.json", _doc(*groups))
    doc_b = _write(tmp_path / "b.json", _doc(*groups))
    doc = advise_json(doc_a, doc_b)
    same = [n for n in doc["inputs"]["notes"] if "holds the same" in n]
    assert len(doc["inputs"]["runs"]) == 20 and len(same) == 1, same
    assert same[0] == (f"{doc_b} holds the same 20 runs as {doc_a} (bs 24-33, 3, 5 steps, identical cycles, accept "
                       f"lengths and tok/s): each counted once, as {doc_a}'s")


def test_a_batch_size_no_run_measured_is_never_settled(tmp_path):
    # bs 8 carried over from the bs-1 run: it said "speculation off, settled 0.0%, no run at another
    # depth is expected to change that", though how costs scale with the batch is not modelled at all
    seed = _write(tmp_path / "seed5.json", _doc(SEED_5))
    doc = advise_json(seed, "--baseline-tok-s", f"1:{SEED_BASELINE}", "8:400", "--batch-sizes", 1, 8)
    b8 = next(b for b in doc["per_batch_size"] if b["bs"] == 8)
    assert b8["recommended"]["speculation"] == "off"
    assert b8["settled"] is False and b8["next_run"]["bs"] == 8 and b8["next_run"]["steps"] >= 1
    assert b8["next_run"]["regret_95_after"] is None and "no run at bs 8" in b8["next_run"]["why"]
    assert "no run at bs 8" in b8["recommended"]["reason"]
    b1 = next(b for b in doc["per_batch_size"] if b["bs"] == 1)
    assert b1["next_run"].get("bs") is None and b1["next_run"]["steps"] in (1, 2, 3)
    rc, out, _ = advise(seed, "--baseline-tok-s", f"1:{SEED_BASELINE}", "8:400", "--batch-sizes", 1, 8)
    assert rc == 0 and "not settled at bs 8: no run at this batch size" in out


def test_the_decode_step_at_a_batch_size_without_a_baseline_carries_an_interval(tmp_path):
    # runs at bs 4 and 16, asked at bs 8 and 64: the speculation-off row there was a point ([x, x]),
    # and with baselines at 4 and 16 it came from the verify curve (a verify forward at width bs,
    # between the bs-4 baseline and bs-4 runs' verify points) rather than the two decode steps
    from cyclegen import generate, log_lines

    rng, lines = random.Random(11), []
    for bs, verify in ((4, 14.0), (16, 18.0)):
        for steps in (3, 5):
            lines += log_lines(generate(rng, bs, steps, 600, [0.7] * steps, verify_ms=verify + steps,
                                        spans=True, first_cycle=len(lines)).records)
    log = tmp_path / "multi.log"
    log.write_text("\n".join(lines) + "\n")
    d4, d16 = 1000.0 * 4 / 320.0, 1000.0 * 16 / 1150.0   # decode steps (ms) of the two baselines
    doc = advise_json(log, "--baseline-tok-s", "4:320", "16:1150", "--batch-sizes", 1, 4, 8, 16, 64)
    off = {b["bs"]: next(c for c in b["candidates"] if c["steps"] == 0) for b in doc["per_batch_size"]}
    assert off[4]["tok_s_95"] == [320.0, 320.0] and off[16]["tok_s_95"] == [1150.0, 1150.0]
    d8 = d4 + (d16 - d4) * 4 / 12      # the two baselines' own line over the batch size
    assert off[8]["predicted_tok_s"] == pytest.approx(8000.0 / d8, rel=0.01)
    for bs in (1, 8, 64):
        lo, hi = off[bs]["tok_s_95"]
        assert lo < off[bs]["predicted_tok_s"] < hi and off[bs]["interval_source"].startswith("no-spec decode step")
    # below the lowest baseline: between flat and the secant half again as steep (or a quarter of
    # proportional growth), not down towards a step proportional to the batch (a first version drew
    # bs-1 steps down to d4 / 4: 4.3x the tok/s, and the mean over that tail advised speculation off)
    steep = max(1.5 * (d16 - d4) / 12, 0.25 * d4 / 4)
    assert off[1]["tok_s_95"][0] >= 1000.0 / d4 * 0.999
    assert off[1]["tok_s_95"][1] <= 1000.0 / (d4 - steep * 3) * 1.001
    # the row is the mean over the step's hypotheses, its cycle the step that gives it, and every speedup
    # at that batch size is against it; the table shows its interval (it printed '-' for every off row)
    for bs in (1, 8, 64):
        assert off[bs]["predicted_cycle_ms"] * off[bs]["predicted_tok_s"] == pytest.approx(1000.0 * bs, rel=1e-3)
    rc, out, _ = advise(log, "--baseline-tok-s", "4:320", "16:1150", "--batch-sizes", 1, 4, 8, 16, 64)
    lo, hi = off[8]["tok_s_95"]
    assert rc == 0 and re.search(rf"\b{off[8]['predicted_tok_s']:.1f}\s+{lo:.1f}-{hi:.1f}\b", out)
    b8 = next(b for b in doc["per_batch_size"] if b["bs"] == 8)
    for c in b8["candidates"]:
        assert c["predicted_speedup"] == pytest.approx(c["predicted_tok_s"] / off[8]["predicted_tok_s"], abs=1e-3)
    # a line steep enough to reach no positive step at bs 1: no speculation-off row there, and a note says so
    doc = advise_json(log, "--baseline-tok-s", "4:320", "16:200", "--batch-sizes", 1, 4, 16)
    assert not any(c["steps"] == 0 for c in doc["per_batch_size"][0]["candidates"])
    assert any(n.startswith("bs 1: no no-spec decode step") and "--baseline-tok-s 1:TOK_S" in n
               for n in doc["inputs"]["notes"])
    # one baseline (bs 4): the step at bs 16 is carried along the verify curve's slope, leaning from flat
    # (the bs-4 step: 16 / 4 x 320 tok/s at most) to twice that slope; it had no range, and speculation
    # off at a batch size no baseline measured could be settled on a margin the carry cannot promise
    doc = advise_json(log, "--baseline-tok-s", "4:320", "--batch-sizes", 4, 16)
    b16 = doc["per_batch_size"][1]
    c = next(c for c in b16["candidates"] if c["steps"] == 0)
    lo, hi = c["tok_s_95"]
    assert lo < c["predicted_tok_s"] < hi <= 4 * 320 * 1.001 and hi - lo > 0.05 * c["predicted_tok_s"]
    assert c["interval_source"] == "no-spec decode step (no baseline at this bs)"
    # where a no-spec run at bs 16 would lower the regret, it is named beside the depth run, with its forecast
    br = b16.get("baseline_run")
    if br is not None:
        assert b16["settled"] is False and br["bs"] == 16 and 0 <= br["regret_95_after"] < b16["regret_95"]
        assert "--baseline-tok-s 16:TOK_S" in br["why"]
    # at bs 4, where the baseline was given, there is none
    assert doc["per_batch_size"][0].get("baseline_run") is None


def test_several_batch_sizes_with_different_picks_point_to_an_adaptive_config(tmp_path):
    rc, out, _ = advise(_write(tmp_path / "one.json", _doc(SEED_5)), "--baseline-tok-s", "1:88.8", "8:600",
                        "--batch-sizes", 1, 8)
    launch = next(ln for ln in out.splitlines() if ln.startswith("launch:"))
    # the launch line itself names the batch size it is for and the adaptive config (a note above it did)
    assert rc == 0 and "(bs 1; the best depth differs by batch size (bs 1: " in launch
    assert "add --adaptive-config FILE" in launch
    rc, out, _ = advise(_write(tmp_path / "one.json", _doc(SEED_5)), "--baseline-tok-s", "1:88.8", "--batch-sizes", 1)
    launch = next(ln for ln in out.splitlines() if ln.startswith("launch:"))
    assert rc == 0 and launch.endswith("(bs 1)") and "adaptive" not in out.split("launch:")[-1]


def _two_workloads_log(path: Path, p_bs8: float, p_bs1: float = 0.5) -> Path:
    # bs 1 runs at p_bs1 per position, bs 8 runs at p_bs8, at 3 and 5 steps each (a helper's case)
    from cyclegen import generate, log_lines

    rng, lines, first = random.Random(5), [], 0
    for bs, steps, p, verify in ((1, 3, p_bs1, 20), (1, 5, p_bs1, 22), (8, 3, p_bs8, 24), (8, 5, p_bs8, 27)):
        lines += log_lines(generate(rng, bs, steps, 1500, [p] * steps, verify_ms=verify, spans=True,
                                    first_cycle=first).records)
        first += 1510
    path.write_text("\n".join(lines) + "\n")
    return path


def test_one_noisy_position_does_not_split_the_acceptance():
    # rates 0.70 / 0.70 / 0.80 at bs 1 against 0.74 at every position at bs 8: the batch sizes differ
    # beyond their noise, but by about 0.04 on average; the largest gap at any one position (position
    # 3, 0.06 off the pooled rate) split it before
    from sglang_eagle_cycle.advise import Run, acceptance_by_bs

    def run(bs, rates, reached):
        counts, n = [], reached
        for p in rates:
            counts.append((round(p * n), n))
            n = round(p * n)
        return Run(source=f"bs{bs}", bs=bs, steps=len(rates), counts=counts, cycles=reached // bs)

    one, eight = run(1, (0.70, 0.70, 0.80), 6000), run(8, (0.74, 0.74, 0.74), 48000)
    assert acceptance_by_bs([one, eight]) == ({}, [])
    split, notes = acceptance_by_bs([one, run(8, (0.80, 0.80, 0.80), 48000)])   # 0.08 apart: split
    assert set(split) == {1, 8} and notes[0].startswith("acceptance differs between batch sizes")


def test_a_mean_only_run_is_compared_with_the_counted_acceptance_and_its_noise():
    # one workload: a short counted run at bs 1 (accept length 2.62 at 3 steps from 300 request-cycles)
    # and a mean-only bs-8 run 5% below it with a small error of its own. Against the mean-only run's
    # error alone the gap was 6.5 standard errors and split the acceptance (a helper: 10 of 24 blind
    # worlds split so); with the counted acceptance's own error it is about 2
    from sglang_eagle_cycle.advise import Run, acceptance_by_bs

    counted = Run(source="bs1", bs=1, steps=3, counts=[(225, 300), (158, 225), (103, 158)], cycles=300)
    e = 1 + 0.75 + 0.75 * 158 / 225 + 0.75 * 158 / 225 * 103 / 158
    means = Run(source="bs8", bs=8, steps=3, accept_len=0.95 * e, accept_se=0.02, cycles=3000)
    assert acceptance_by_bs([counted, means]) == ({}, [])
    # a depth the counted runs never reached is not compared (the acceptance there is extrapolated)
    deep = Run(source="bs8", bs=8, steps=5, accept_len=0.8 * e, accept_se=0.01, cycles=3000)
    assert acceptance_by_bs([counted, deep]) == ({}, [])
    # far off (30%) with a small error: split
    split, notes = acceptance_by_bs([counted, Run(source="bs8", bs=8, steps=3, accept_len=1.3 * e,
                                                  accept_se=0.02, cycles=3000)])
    assert set(split) == {1, 8} and "bs 8 measured a mean accept length of" in notes[0]


@pytest.mark.parametrize("mean", [2.5, 3.3, 3.6, 3.9])
def test_a_mean_accept_length_at_one_depth_is_what_the_model_gives_there(tmp_path, mean):
    # with a mean accept length only, the decay r was drawn from 0.6-1.0 whatever the mean; where even
    # p1 = 1 could not reach it (at r = 0.6 the most is 2.82 at 3 steps) p1 stayed at 1 and the
    # hypothesis fell short: 3.17 predicted where 3.3 was measured, 3.29 for 3.6
    group = {"bs": 8, "steps": 3, "topk": 1, "draft_tokens": 4, "cycles": 3000,
             "phases": {"total_ms": {"mean": 20.0}}, "accept_len_mean": mean, "accept_hist": None,
             "per_position_acceptance": None, "tok_s": 8000.0 * mean / 20.0,
             "batch_se": {"accept_len": 0.01, "period_ms": 0.01, "batch_cycles": 375, "cycles": 3000}}
    doc = advise_json(_write(tmp_path / "m.json", _doc(group)), "--baseline-tok-s", 500, "--steps-candidates", 1, 2, 3, 4, 5)
    c = cand(doc, 3)
    assert c["predicted_accept_len"] == pytest.approx(mean, abs=0.01)
    assert c["predicted_tok_s"] == pytest.approx(8000.0 * mean / 20.0, rel=0.01)


def test_the_split_weighs_each_side_by_its_own_noise():
    from sglang_eagle_cycle.advise import Run, acceptance_by_bs

    # the counted side's error by the delta method: its expected-length interval puts every position at
    # its bound together (1.6x wider here), and a helper's 42% gap went unsplit behind it
    counted = Run(source="bs2", bs=2, steps=3, counts=[(2400, 4000), (1320, 2400), (660, 1320)], cycles=2000,
                  accept_se=0.02)
    e = 1 + 0.6 + 0.6 * 0.55 + 0.6 * 0.55 * 0.5
    assert set(acceptance_by_bs([counted, Run(source="bs8", bs=8, steps=3, accept_len=1.05 * e, accept_se=0.02,
                                              cycles=3000)])[0]) == {2, 8}
    # a run that saw few requests (300 cycles at bs 1) counts four times noisier: 0.8 against 0.7 per
    # position split one workload's runs (a helper: 2-6 of 48 worlds with runs of 100-300 cycles at bs 1-2)
    def run(bs, p, reached, cycles):
        counts, n = [], reached
        for _ in range(3):
            counts.append((round(p * n), n))
            n = round(p * n)
        return Run(source=f"bs{bs}", bs=bs, steps=3, counts=counts, cycles=cycles, accept_se=0.01)
    assert acceptance_by_bs([run(1, 0.8, 300, 300), run(32, 0.7, 9600, 300)]) == ({}, [])
    assert set(acceptance_by_bs([run(1, 0.8, 3300, 3300), run(32, 0.7, 9600, 300)])[0]) == {1, 32}
    # a counted 3-step run whose position 2 was never accepted reaches no position 3, which the counts
    # drop: its depth is still 3 (accept length 2.0 there), and a mean-only 2.5 at 3 steps is compared
    # with it (it was skipped as deeper than the counts, and bs 8 was 'settled' 20% off its own run)
    zero = Run(source="bs1", bs=1, steps=3, counts=[(3000, 3000), (0, 3000), (0, 0)], cycles=3000, accept_se=0.01)
    assert set(acceptance_by_bs([zero, Run(source="bs8", bs=8, steps=3, accept_len=2.5, accept_se=0.01,
                                           cycles=3000)])[0]) == {1, 8}


def test_batch_sizes_whose_acceptance_disagrees_each_keep_their_own(tmp_path):
    # pooled, bs 8's request-cycles set bs 1's acceptance near 0.86 per position: bs 1 was advised 10
    # steps (6 steps predicted 174 tok/s) though its runs measured 82.4 at 3 steps and 75.5 at 5
    doc = advise_json(_two_workloads_log(tmp_path / "mixed.log", 0.9), "--baseline-tok-s", "1:60", "8:400")
    split = [n for n in doc["inputs"]["notes"] if n.startswith("acceptance differs between batch sizes")]
    assert len(split) == 1 and "(position 1: 0.51 at bs 1, 0.90 at bs 8; chi-square p < 1e-12)" in split[0]
    by = {b["bs"]: b for b in doc["per_batch_size"]}
    p1 = {bs: by[bs]["acceptance"]["per_position_acceptance"][0]["p"] for bs in (1, 8)}
    assert p1[1] == pytest.approx(0.5, abs=0.03) and p1[8] == pytest.approx(0.9, abs=0.02)
    assert by[1]["recommended"]["steps"] in (2, 3, 4)
    for b in by.values():   # each measured depth now predicted within its interval
        for c in b["candidates"]:
            if c.get("measured_tok_s") and c["steps"]:
                assert c["tok_s_95"][0] <= c["measured_tok_s"] <= c["tok_s_95"][1]
    # one workload at both batch sizes, or two 0.04 apart (beyond the noise of 12,000 request-cycles, not
    # by 0.05): one pooled acceptance, no note (the largest gap at any one position split the second)
    for p1 in (0.5, 0.86):
        doc = advise_json(_two_workloads_log(tmp_path / "same.log", 0.9 if p1 > 0.5 else 0.5, p1),
                          "--baseline-tok-s", "1:60", "8:400")
        assert not any("differs between batch sizes" in n for n in doc["inputs"]["notes"]), p1
        assert all("acceptance" not in b for b in doc["per_batch_size"])
    # the bs-8 runs as an inspect document without per-position counts (mean accept lengths only, which
    # pooling leaves out): bs 8 took bs 1's acceptance and missed its own runs by -46% and -59%
    from sglang_eagle_cycle.report import inspect_paths

    insp = inspect_paths([_two_workloads_log(tmp_path / "mixed.log", 0.9)])
    for g in insp["groups"]:
        if g["bs"] == 8:
            g["accept_hist"] = g["per_position_acceptance"] = None
    doc = advise_json(_write(tmp_path / "means.json", insp), "--baseline-tok-s", "1:60", "8:400")
    split = [n for n in doc["inputs"]["notes"] if n.startswith("acceptance differs between batch sizes")]
    assert len(split) == 1 and "bs 8 measured a mean accept length of" in split[0], doc["inputs"]["notes"]
    b8 = next(b for b in doc["per_batch_size"] if b["bs"] == 8)
    for c in b8["candidates"]:
        if c.get("measured_tok_s") and c["steps"]:
            assert c["tok_s_95"][0] <= c["measured_tok_s"] * 1.01 and c["measured_tok_s"] * 0.99 <= c["tok_s_95"][1]


def test_whole_cycle_times_from_one_depth_grow_by_a_draft_forward_a_step(tmp_path):
    # stock-like input (mean accept length and cycle time, no phases) at one depth whose cycle is barely
    # above the decode step: every chord from the decode step was flat, every deeper depth free, and
    # advise said 8 steps, settled, on 13.83 ms at every depth
    doc = {"schema": "eagle-cycle-inspect/1", "files": ["x.log"], "skipped_lines": 0, "findings": [],
           "groups": [{"bs": 8, "steps": 3, "topk": 1, "draft_tokens": 4, "cycles": 2000,
                       "phases": {"total_ms": {"mean": 13.83}}, "accept_len_mean": 2.23, "accept_hist": None,
                       "per_position_acceptance": None, "tok_s": 1290.0}]}
    out = advise_json(_write(tmp_path / "tot.json", doc), "--baseline-tok-s", 600)
    assert out["inputs"]["cycle_model"]["mode"] == "totals"
    cyc = {c["steps"]: c["predicted_cycle_ms"] for c in out["candidates"]}
    decode = 8000.0 / 600
    for s in range(4, 11):   # at least 0.5% of the decode step more per step, at most 8%
        assert 0.005 * decode * (s - 3) <= cyc[s] - 13.83 + 0.01 <= 0.08 * decode * (s - 3) + 0.01
    # the median hypothesis: 2% a step (log-uniform in 0.5-8%; a uniform draw put it at 4.25%, and a
    # helper's grid of worlds growing by 0.3-1% a step lost 3-4% regret to it)
    assert cyc[4] - 13.83 == pytest.approx(0.02 * decode, rel=0.2)
    for s in (1, 2):         # fewer draft forwards, never below the decode step
        assert decode - 1e-3 <= cyc[s] < 13.83
    assert out["recommended"]["steps"] <= 4


# --- the ensemble itself ---------------------------------------------------------------------------


def test_curve_hypotheses_pass_through_every_measured_point_and_respect_the_decode_step():
    rng = np.random.default_rng(0)
    pts = [(12.0, 11.0), (28.0, 15.0)]
    xq = [8.0, 12.0, 20.0, 28.0, 40.0]
    y = unc.sample_curve(pts, xq, 4000, rng, anchor=(4.0, 9.0))
    assert np.allclose(y[:, 1], 11.0) and np.allclose(y[:, 3], 15.0)
    assert y[:, 0].min() >= 9.0 - 1e-9 and y[:, 0].max() <= 11.0 + 1e-9   # between decode step and measured
    assert 11.0 <= y[:, 2].min() and y[:, 2].max() <= 15.0                   # between measured points
    assert y[:, 4].min() >= 15.0 - 1e-9                                      # flat at the lowest beyond
    assert y[:, 4].max() == pytest.approx(15.0 + 1.5 * 0.25 * 12, rel=0.02)  # steepening by half at most
    central = np.median(y[:, 0])
    assert central == pytest.approx(10.0, abs=0.15)   # the measured slope continued down


def test_decide_settles_apart_and_asks_for_the_uncertain_depth():
    steps = [0, 1, 2, 3]
    rng = np.random.default_rng(1)
    clear = np.column_stack([np.full(1000, 100.0), rng.normal(150, 1, 1000), rng.normal(120, 1, 1000),
                             rng.normal(110, 1, 1000)])
    ens = unc.Ensemble(1, steps, clear, np.ones_like(clear), {}, 3, [None] * 4)
    d = unc.decide(ens, measured=[1])
    assert d.settled and d.pick == 1 and d.next_run is None
    # depth 2 unmeasured and uncertain around the measured depth 1: measure 2
    vague = clear.copy()
    vague[:, 2] = rng.uniform(120, 180, 1000)
    d = unc.decide(unc.Ensemble(1, steps, vague, np.ones_like(vague), {}, 3, [None] * 4), measured=[1, 3])
    assert not d.settled and d.next_run == 2 and d.regret_95_after < d.regret_95


def test_the_settled_test_weighs_the_doubt_hypotheses_and_nothing_else_does():
    """An ensemble that settles 2 steps over its own hypotheses, with doubt hypotheses (larger
    verify-mode overheads) in which 2 steps is dear and the measured 5 steps best: not settled, the
    regret over both, the regret without them kept for the why; the pick and the next run are the
    ensemble's own (with the doubt ensemble alone 5 would be picked)."""
    rng = np.random.default_rng(3)
    n, steps = 2000, [0, 1, 2, 3, 5]
    tok = np.column_stack([np.full(n, 100.0), rng.normal(118, 1, n), rng.normal(130, 1, n),
                           rng.normal(120, 1, n), np.full(n, 121.0)])
    dear = tok.copy()
    dear[:, 1:4] *= rng.uniform(0.8, 1.0, (n, 1))       # shallower depths dearer, together
    plain = unc.Ensemble(1, steps, tok, np.ones_like(tok), {}, 3, [None] * 5)
    d0 = unc.decide(plain, measured=[5])
    assert d0.settled and d0.pick == 2 and d0.regret_95_assumed is None
    doubt = unc.Ensemble(1, steps, dear, np.ones_like(dear), {}, 3, [None] * 5)
    both = unc.Ensemble(1, steps, tok, np.ones_like(tok), {}, 3, [None] * 5, doubt=doubt, doubt_overhead=0.9)
    d = unc.decide(both, measured=[5])
    assert not d.settled and d.pick == 2 and d.next_run == 2
    assert d.regret_95 > unc.SETTLED_REGRET >= d.regret_95_assumed == pytest.approx(d0.regret_95)
    assert d.doubt_overhead == 0.9
    assert unc.decide(doubt, measured=[5]).pick == 5
    # a measurement replaces its depth in the doubt hypotheses too
    m = unc.with_measurements(both, {2: (100.0, 0.5)})
    assert np.all(np.abs(m.doubt.tok_s[:, 2] - 100.0) < 5) and np.all(np.abs(m.tok_s[:, 2] - 100.0) < 5)


def test_the_forecast_counts_the_new_runs_noise_and_not_the_old_runs_errors():
    """A run at c reveals c's shape within its own sampling error, not the errors of the runs
    already made: a forecast that binned on the noisy tok/s promised what the next run could not
    deliver (following next_run, regret stayed at 3% after forecasts of 0.5%)."""
    rng = np.random.default_rng(4)
    n, steps = 4000, [0, 1, 2, 3]
    tok = np.column_stack([np.full(n, 100.0), rng.normal(150, 1, n), rng.uniform(120, 180, n), np.full(n, 110.0)])
    clean = unc.Ensemble(1, steps, tok, np.ones_like(tok), {}, 3, [None] * 4, run_se=np.zeros(4))
    noisy = unc.Ensemble(1, steps, tok, np.ones_like(tok), {}, 3, [None] * 4, run_se=np.array([0, 0, 0.1, 0]))
    d0, d1 = unc.decide(clean, measured=[1, 3]), unc.decide(noisy, measured=[1, 3])
    assert d0.next_run == d1.next_run == 2
    assert d1.regret_95_after > d0.regret_95_after + 0.01      # a 10% error hides part of what depth 2 is
    # depths 1 and 2 measured, each off by its own error; depth 3's shape is known: no run helps
    # (depth 3's tok/s inherits depth 2's error, as a neighbour of a measured width does)
    e1, e2 = rng.normal(0, 3, n), rng.normal(0, 3, n)
    tok2 = np.column_stack([np.full(n, 100.0), 150 + e1, 150 + e2, 140 + 0.9 * e2])
    shape = tok2.copy()
    shape[:, 3] = 140.0
    stuck = unc.Ensemble(1, steps, tok2, np.ones_like(tok2), {}, 3, [None] * 4, run_se=np.zeros(4), tok_s_shape=shape)
    d = unc.decide(stuck, measured=[1, 2])
    assert not d.settled and d.regret_95 > unc.SETTLED_REGRET and d.next_run == 3 and not d.useful
    assert d.regret_95_after > (1 - unc.MIN_CUT) * d.regret_95


def test_bends_between_measured_widths_are_drawn_per_interval():
    """A bend seen between two measured widths says nothing of another interval's: with three
    measured widths the hypotheses' values inside the two intervals are uncorrelated."""
    pts = [(4.0, 10.0), (8.0, 14.0), (16.0, 20.0)]
    y = unc.sample_curve(pts, [6.0, 12.0], 8000, np.random.default_rng(5), anchor=(1.0, 8.0))
    assert np.ptp(y[:, 0]) > 1.0 and np.ptp(y[:, 1]) > 1.0
    assert abs(np.corrcoef(y[:, 0], y[:, 1])[0, 1]) < 0.05


def test_acceptance_hypotheses_from_counts_keep_measured_positions_and_never_rise_beyond():
    acc = cm.AcceptanceModel.from_counts([(800, 1000), (600, 800), (420, 600)])
    p, depth = unc.sample_acceptance(acc, 6, 3000, np.random.default_rng(2))
    assert depth == 3 and p.shape == (3000, 6)
    assert np.mean(p[:, 0]) == pytest.approx(0.8, abs=0.01) and np.mean(p[:, 2]) == pytest.approx(0.7, abs=0.01)
    assert np.all(p[:, 3:] <= p[:, 2:3] + 1e-12)          # beyond: never above the deepest measured position
    lo, hi = np.percentile(p[:, 5], [2.5, 97.5])
    assert hi - lo > 0.15                                   # and genuinely uncertain there


def test_a_rising_measured_trend_continues_no_faster_and_capped():
    """Measured positions rising 0.5 -> 0.6 -> 0.7 (easy text survives the first drafts): beyond
    them acceptance keeps rising in most hypotheses, never faster than the fitted rate (about 1.18
    per position) and never above RISE_CAP; a falling trend (the test above) never rises."""
    acc = cm.AcceptanceModel.from_counts([(5000, 10000), (3000, 5000), (2100, 3000)])
    p, depth = unc.sample_acceptance(acc, 8, 3000, np.random.default_rng(4))
    assert depth == 3
    assert np.mean(p[:, 3] > p[:, 2]) > 0.6                                   # the rise goes on
    assert np.mean(p[:, 7]) > np.mean(p[:, 2]) + 0.05
    assert p[:, 3:].max() <= unc.RISE_CAP + 1e-12                            # capped
    rate = p[:, 3] / p[:, 2]
    assert np.percentile(rate, 99) <= 1.25                                    # no faster than measured


def test_saturation_through_three_nodes_recovers_the_scale():
    """``A - B exp(-x / lam)`` through three exact nodes gives back ``lam``; a straight line or a
    steepening curve is not a saturation."""
    x = np.array([10.0, 30.0, 60.0])
    y = 10.0 - 8.0 * np.exp(-x / 20.0)
    lam, ok = unc._saturation(x, np.vstack([y, 1.0 + 0.1 * x, 1.0 + 0.001 * x ** 2]))
    assert ok.tolist() == [True, False, False]
    assert lam[0] == pytest.approx(20.0, rel=1e-3)
    on = unc._on_saturation(100.0, (lam, ok), x, y[None, :], 1)
    assert on[0] == pytest.approx(10.0 - 8.0 * np.exp(-5.0), rel=1e-6)


def test_a_saturating_verify_is_continued_as_one_and_a_flat_one_with_a_large_overhead_is_not():
    """An MoE verify (256 experts, top-8: y = 4 + 0.2 * distinct experts, the decode step on the
    curve at bs 16) measured at widths 64 and 128: past them the central hypotheses follow the
    saturation (55.1 ms at 192 tokens), where the last secant continued says 60.2, which stays
    inside the envelope as its upper extreme's way; between them the curve bends the same way. A
    communication-bound verify (flat, 35% above the decode step) makes the first segment steep only
    through the overhead: continued straight."""
    def moe(w):
        return 4.0 + 0.2 * 256 * (1 - (1 - 8 / 256) ** w)
    pts = [(64.0, moe(64)), (128.0, moe(128))]
    y = unc.sample_curve(pts, [96.0, 192.0], 4000, np.random.default_rng(5), anchor=(16.0, moe(16)))
    straight = pts[1][1] + (pts[1][1] - pts[0][1])
    assert np.median(y[:, 1]) == pytest.approx(moe(192), rel=0.01)
    assert np.percentile(y[:, 1], 97.5) > moe(192) + 0.5 * (straight - moe(192))
    assert np.median(y[:, 0]) == pytest.approx(moe(96), rel=0.01)
    assert np.median(y[:, 0]) > 0.5 * (pts[0][1] + pts[1][1]) + 0.5       # above the chord
    comm = [(16.0, 20.0 * 1.35 + 0.08), (48.0, 20.0 * 1.35 + 0.4)]
    y = unc.sample_curve(comm, [72.0], 4000, np.random.default_rng(5), anchor=(8.0, 20.0))
    assert np.median(y[:, 0]) == pytest.approx(comm[1][1] + 0.01 * 24.0, abs=0.02)


def test_a_bend_through_the_decode_step_that_an_overhead_could_make_saturates_half_the_hypotheses():
    """An MoE verify (128 experts, top-6: y = 6 + 1.2 ms per k distinct experts, 2 ms verify-mode
    cost) at bs 12, measured at widths 24 and 72: the bend through the decode step is one a 40%
    verify-mode overhead on a straight verify would also make, so it was continued straight in
    every hypothesis (25th percentile at 108 tokens 37.0 ms, truth 33.5, straight 38.3). Now half
    the bending hypotheses saturate: the quartile falls below halfway to the truth, the interval
    holds both. A straight verify 45% above the decode step (communication-bound, bs 96) keeps
    its continuation inside the interval and at or under the 75th percentile."""
    def moe(w):
        return 6.0 + 1.2 * 128 / 6 * (1 - (1 - 6 / 128) ** w)
    pts = [(24.0, moe(24) + 2.0), (72.0, moe(72) + 2.0)]
    truth, straight = moe(108) + 2.0, pts[1][1] + (pts[1][1] - pts[0][1]) / 48.0 * 36.0
    y = unc.sample_curve(pts, [108.0], 4000, np.random.default_rng(5), anchor=(12.0, moe(12)))[:, 0]
    lo, q1, q3, hi = np.percentile(y, [2.5, 25, 75, 97.5])
    assert q1 < straight - 0.5 * (straight - truth)
    assert lo <= truth and hi >= straight
    comm = [(192.0, 67.8 * 1.45 + 0.2 * 96), (384.0, 67.8 * 1.45 + 0.2 * 288)]
    y = unc.sample_curve(comm, [864.0], 4000, np.random.default_rng(5), anchor=(96.0, 67.8))[:, 0]
    straight = comm[1][1] + 0.2 * 480
    lo, q3, hi = np.percentile(y, [2.5, 75, 97.5])
    assert lo <= straight <= q3 <= hi


def test_a_flat_last_secant_is_not_carried_flat_beyond_the_runs():
    """bs 2, runs at widths 6 and 8 that pad to one CUDA-graph size (14 ms both), the decode step
    10 ms at width 2: the last secant is flat, yet the next size may cost what the chord from the
    decode step says. At width 10 the central curve stays the flat secant, and the upper extreme
    reaches towards that chord (0.67 ms/token at no verify-mode overhead: 15.3 ms), where it used
    to be 14 ms in every hypothesis. A last secant that is not flat (a steady slope) keeps its
    envelope: at most 1.5 times that secant beyond."""
    y = unc.sample_curve([(6.0, 14.0), (8.0, 14.0)], [10.0], 4000, np.random.default_rng(8),
                         anchor=(2.0, 10.0))[:, 0]
    assert np.percentile(y, 45) == pytest.approx(14.0)
    assert 14.0 + 0.5 * 2 * (14.0 - 10.0) / 6.0 < np.percentile(y, 97.5) <= 14.0 + 2 * (14.0 - 10.0) / 6.0 + 1e-9
    steady = unc.sample_curve([(6.0, 13.0), (8.0, 14.0)], [10.0], 4000, np.random.default_rng(8),
                              anchor=(2.0, 10.0))[:, 0]
    assert steady.max() <= 14.0 + 1.5 * 0.5 * 2 + 1e-9


def test_a_steep_slope_between_narrow_runs_is_a_padding_step_not_a_knee():
    """bs 2, runs at widths 12 and 18 whose slope (0.5 ms/token) is steeper than every chord from
    the decode step (10 ms at width 2): at 10 tokens the chord stays central, not the slope continued
    down (12 ms). The same shape at widths past the compute threshold is a knee: continued."""
    narrow = unc.sample_curve([(12.0, 13.0), (18.0, 16.0)], [10.0], 4000, np.random.default_rng(6),
                              anchor=(2.0, 10.0))
    assert np.median(narrow[:, 0]) > 12.4
    wide = unc.sample_curve([(96.0, 13.0), (144.0, 16.0)], [80.0], 4000, np.random.default_rng(6),
                            anchor=(16.0, 10.0))
    assert np.median(wide[:, 0]) == pytest.approx(13.0 - 3.0 / 48.0 * 16.0, abs=0.05)


def test_mean_only_acceptance_splits_the_shallowest_depth_only_below_it():
    """Mean accept lengths at 3 and 5 steps: below 3 steps the split among positions 1-3 is a
    hypothesis (leaning from the fitted rule to DECAY_PRIOR's ends); E[L(3)], E[L(5)] and every
    deeper depth are those of the fit in each hypothesis, and nothing moves when no candidate lies
    below the shallowest measured depth."""
    acc = cm.AcceptanceModel.from_means([cm.MeanPoint(3, 2.6, 4000), cm.MeanPoint(5, 3.0, 4000)])

    def expected(p):
        return 1.0 + np.concatenate([np.zeros((len(p), 1)), np.cumsum(np.cumprod(p, axis=1), axis=1)], axis=1)

    fit, _ = unc.sample_acceptance(acc, 8, 4000, np.random.default_rng(3))
    split, _ = unc.sample_acceptance(acc, 8, 4000, np.random.default_rng(3), shallowest=1)
    same, _ = unc.sample_acceptance(acc, 8, 4000, np.random.default_rng(3), shallowest=3)
    assert np.array_equal(fit, same)
    ef, es = expected(fit), expected(split)
    assert np.allclose(es[:, 3:], ef[:, 3:], atol=1e-6)            # depths 3..8 unchanged per hypothesis
    assert not np.allclose(es[:, 1], ef[:, 1])                     # depth 1 is not pinned by the rule
    lo_f, hi_f = np.percentile(ef[:, 1], [2.5, 97.5])
    lo_s, hi_s = np.percentile(es[:, 1], [2.5, 97.5])
    assert hi_s - lo_s > 2 * (hi_f - lo_f)
    assert np.all((split >= 0) & (split <= 1))


def test_measurement_noise_follows_the_measured_widths():
    """Errors of the measured means: sd se_i at a measured width, mixed in proportion between two,
    the nearest one's outside them; two runs at one width pool by inverse variance."""
    import numpy as np

    from sglang_eagle_cycle import costmodel as cm
    from sglang_eagle_cycle import uncertainty as unc

    obs = [cm.CycleObservation(bs=1, steps=1, total_ms=10.0, total_se_ms=0.2),
           cm.CycleObservation(bs=1, steps=3, total_ms=12.0, total_se_ms=0.4),
           cm.CycleObservation(bs=1, steps=3, total_ms=12.0, total_se_ms=0.4)]
    err = unc.measurement_noise(obs, [1, 2, 3, 4, 8], 200_000, np.random.default_rng(0))
    sd = err.std(axis=0)
    pooled = 0.4 / np.sqrt(2)
    mid = np.sqrt(0.5 ** 2 * 0.2 ** 2 + 0.5 ** 2 * pooled ** 2)
    assert np.allclose(sd, [0.2, 0.2, mid, pooled, pooled], rtol=0.01)


def test_two_widths_keep_their_bend_below_the_lowest():
    """A measured slope steeper than every chord from the decode step (a knee) rules out a curve
    that saturates below the lowest measured width; a flat measured slope keeps it."""
    import numpy as np

    from sglang_eagle_cycle import uncertainty as unc

    anchor = (16.0, 20.0)          # decode step at bs 16 (ms)
    knee = unc.sample_curve([(64.0, 40.0), (112.0, 64.0)], [32.0], 4000, np.random.default_rng(1), anchor=anchor)
    flat = unc.sample_curve([(64.0, 40.0), (112.0, 42.0)], [32.0], 4000, np.random.default_rng(1), anchor=anchor)
    # the highest chord from the anchor: b (1 + 0.5) = 30 ms at width 16, 40 ms at 64 -> 33.3 ms at 32
    assert knee.max() <= 30.0 + 10.0 / 3.0 + 1e-9
    assert flat.max() > 34.0       # the saturating alternative (t^(1/3) from the anchor) is kept


# --- a compute knee below the one measured width (large batch) -------------------------------------


def _knee_world():
    """bs 32, memory-bound up to 64 verified tokens, compute-bound past them: 1 step beats the
    no-spec decode by 28%, 3 steps lose 16% to it (true tok/s 2207 off, 2823 at 1, 1858 at 3)."""
    return aw.World(kind="large_batch", bs=32, p=(0.70, 0.61, 0.54, 0.47, 0.41, 0.36, 0.31, 0.27, 0.24, 0.21,
                                                  0.18, 0.16),
                    decode_ms=14.5, verify_overhead=0.18, fixed_ms=1.0, slope_ms=0.001, knee_tokens=64,
                    knee_slope_ms=1.1 / 64, extend_fixed_ms=0.8, extend_slope_ms=0.002, draft_step_ms=0.9,
                    other_ms=0.6, gap_ms=0.1, noise=0.03, name="knee")


def test_one_wide_run_keeps_a_compute_knee_below_it():
    """One measured width of 128 tokens at bs 32: a share of the hypotheses is a knee
    ``max(b (1 + f), y0 (x / x0)^a)`` (at 64 tokens: at most y0 / 2), never below the decode step;
    with a second measured width the measured slope decides and no knee hypothesis is drawn."""
    anchor, y0 = (32.0, 14.5), 39.3
    one = unc.sample_curve([(128.0, y0)], [64.0, 128.0], 4000, np.random.default_rng(3), anchor=anchor)
    assert np.allclose(one[:, 1], y0)
    below_roofline = np.mean(one[:, 0] <= y0 / 2 + 1e-9)
    assert 0.10 <= below_roofline <= 0.25                       # about KNEE_SHARE of them
    assert one[:, 0].min() >= 14.5 - 1e-9                       # never below the decode step
    assert one[:, 0].min() <= y0 * 0.5 ** unc.KNEE_EXPONENT[1] * 1.01
    two = unc.sample_curve([(96.0, 33.0), (128.0, y0)], [64.0], 4000, np.random.default_rng(3), anchor=anchor)
    assert np.mean(two[:, 0] <= y0 / 2 + 1e-9) < 0.05


def test_a_knee_hypothesis_stays_compute_bound_above_the_run(monkeypatch):
    """A hypothesis is one curve: one that puts a compute knee below the one measured width (128
    tokens at bs 32) grows past it as compute does, ``y0 (x / x0)^a``: at 256 tokens between 2 and
    2^1.25 times y0, not along the secant from the decode step (``y0 + u s (x - x0)``, ``u`` 0-1.5)
    that the other hypotheses continue, 39.3-88.9 ms there. Every hypothesis is a knee here
    (``KNEE_SHARE`` 1); the shipped share is checked above."""
    monkeypatch.setattr(unc, "KNEE_SHARE", 1.0)
    anchor, y0 = (32.0, 14.5), 39.3
    c = unc.sample_curve([(128.0, y0)], [64.0, 256.0], 4000, np.random.default_rng(3), anchor=anchor)
    assert c[:, 1].min() >= 2.0 * y0 - 1e-6
    assert c[:, 1].max() <= y0 * 2.0 ** unc.KNEE_EXPONENT[1] + 1e-6
    # below the run, the same hypotheses: at most y0 / 2 unless their verify at bs is above it
    assert np.all(c[:, 0] <= np.maximum(y0 / 2, 14.5 * (1 + unc.VERIFY_MODE_OVERHEAD[1])) + 1e-6)


def test_a_large_batch_run_past_the_knee_does_not_settle_on_speculation_off(tmp_path):
    """The 3-step run alone loses to the baseline at every measured figure; the one run that
    decides is a shallower one, and with it advise picks the true best, 1 step."""
    w = _knee_world()
    truth = {s: w.true_tok_s(s) for s in range(9)}
    assert max(truth, key=truth.get) == 1 and truth[1] > 1.2 * truth[0] > 1.4 * truth[3]
    rng = random.Random(7)
    logs = []
    for steps in (3,):
        logs.append(tmp_path / f"s{steps}.log")
        logs[-1].write_text("\n".join(w.log_lines(steps, None, rng)) + "\n")
    tail = ["--baseline-tok-s", truth[0], "--steps-candidates", *range(9)]
    doc = advise_json(*logs, *tail)
    assert doc["settled"] is False and doc["next_run"]["steps"] in (1, 2)
    assert cand(doc, 1)["tok_s_95"][1] > truth[1]                # the knee's upside is inside the interval
    nxt = doc["next_run"]["steps"]
    logs.append(tmp_path / f"s{nxt}.log")
    logs[-1].write_text("\n".join(w.log_lines(nxt, None, rng)) + "\n")
    doc = advise_json(*logs, *tail)
    assert doc["recommended"]["steps"] == 1



def _bench_file(path, recs, prefix=""):
    path.write_text(prefix + "".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    return path



def test_a_copied_bench_file_and_a_repeated_record_count_once(tmp_path):
    """A copy of a bench file beside it, or every record appended twice, had doubled the runs and
    narrowed the intervals without a word (helper 101); a copied stock log already counted once."""
    recs = _standin_bench_records()
    one = _bench_file(tmp_path / "sweep.jsonl", recs)
    alone = advise_json(one)
    copy = _bench_file(tmp_path / "copy.jsonl", recs)
    both = advise_json(one, copy)
    assert len(both["inputs"]["runs"]) == len(alone["inputs"]["runs"]) == len(recs) - 1
    assert f"{copy}: {len(recs)} records the same as one read before ({copy}:1 = {one}:1" in " | ".join(
        both["inputs"]["notes"])
    assert both["per_batch_size"][0]["candidates"] == alone["per_batch_size"][0]["candidates"]
    twice = _bench_file(tmp_path / "twice.jsonl", recs + recs)
    assert advise_json(twice)["per_batch_size"][0]["candidates"] == alone["per_batch_size"][0]["candidates"]


def test_a_bench_records_server_log_is_never_written_over(tmp_path):
    """--adaptive-config naming the server log a bench record names (not given as an input) had been
    replaced with --force (helper 101); and an adaptive config given back to advise is named as one,
    as a run and as --table (it had been sent from one refusal to the other)."""
    log = tmp_path / "server.log"
    log.write_text("my server's log\n")
    recs = _standin_bench_records()
    recs[2]["server_log"] = str(log)
    path = _bench_file(tmp_path / "sweep.jsonl", recs)
    rc, out, err = advise(path, "--adaptive-config", log, "--force")
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert f"--adaptive-config {log}: is one of the inputs (the server log of bench record {path}:3)" in err
    assert log.read_text() == "my server's log\n"
    plan = tmp_path / "plan.json"
    rc, _, err = advise(path, "--adaptive-config", plan)
    assert rc == 0, err
    for argv in ((plan,), ("--table", plan, "--model", "m", "--benchmark", "b")):
        rc, out, err = advise(*argv)
        assert rc == 2 and err.count("\n") == 1
        assert f"{plan}: an adaptive config written by `eagle-cycle advise --adaptive-config`, not a run" in err


def test_bench_records_compare_decode_with_decode(tmp_path):
    """A sweep's client throughput includes prefill and scheduling beside the decode cycles the
    model predicts (its cycle groups). Every record had been "a poor fit" by the client's share
    (helper 29: 3-4%); the poor-fit check now takes the group's decode throughput. The no-spec
    baseline is a client's: a note says the speedups read high by about that share (converting it
    was tried, and prompt sets that differ between records made it 44% wrong: helper 31)."""
    recs = [{"schema": "eagle-cycle-bench/1", "model": "m", "draft": "d", "steps": 0, "topk": 1,
             "num_draft_tokens": 0, "concurrency": 1, "status": "ok", "output_tok_s": 80.0}]
    for s, acc in ((2, 1.9), (3, 2.2), (5, 2.5)):
        total = 11.3 + 1.4 + 1.4 * (s - 1)
        decode = 1000.0 * acc / total
        client = 1.0 / (1.0 / decode + 0.0003)
        grp = {"bs": 1, "steps": s, "topk": 1, "draft_tokens": s + 1, "cycles": 2000,
               "phases": {"draft_ms": {"mean": 1.4 * (s - 1)}, "verify_ms": {"mean": 11.3}, "extend_ms": {"mean": 1.4},
                          "other_ms": {"mean": 0.0}, "total_ms": {"mean": total, "sd": 0.2}},
               "accept_len_mean": acc, "tok_s": decode}
        recs.append({"schema": "eagle-cycle-bench/1", "model": "m", "draft": "d", "steps": s, "topk": 1,
                     "num_draft_tokens": s + 1, "concurrency": 1, "status": "ok", "output_tok_s": round(client, 3),
                     "accept_len_mean": acc, "cycle": grp})
    doc = advise_json(_bench_file(tmp_path / "sweep.jsonl", recs))
    notes = " | ".join(doc["inputs"]["notes"])
    assert "fits poorly" not in notes, notes
    assert doc["inputs"]["baseline_tok_s"] == {"1": 80.0}
    # 0.3 ms per token beside a 7.3-7.7 ms decode token: 3.9-4.1%
    assert "clients measured 3.9% below their cycle groups' decode throughput (median of 3" in notes
    assert "workloads" not in notes
    # records of two prompt sets (helper 31: 6x the prefill per token at two depths) do not compare
    for i, r in enumerate(recs):
        r.update(prompt_set_sha256="a" * 64 if i < 3 else "b" * 64, max_new_tokens=256)
    notes = " | ".join(advise_json(_bench_file(tmp_path / "two.jsonl", recs))["inputs"]["notes"])
    assert ("the records ran 2 workloads (prompt set x max_new_tokens: aaaaaaaaaaaa x 256 max_new_tokens (3 records); "
            "bbbbbbbbbbbb x 256 max_new_tokens (1 record))") in notes
    # a field of another type is named, not a traceback (helper 33: TypeError: unhashable type);
    # records that name neither compare with any
    recs[0]["max_new_tokens"] = [256]
    for r in recs[1:3]:
        r.pop("prompt_set_sha256"), r.pop("max_new_tokens")
    notes = " | ".join(advise_json(_bench_file(tmp_path / "odd.jsonl", recs))["inputs"]["notes"])
    assert "aaaaaaaaaaaa x [256] max_new_tokens (1 record)" in notes and "None x None" not in notes


@pytest.mark.parametrize("damage, says", [
    (lambda rs: rs[1].update(model=["a"]), ".model: expected a name"),                 # used to be a traceback
    (lambda rs: rs[1].update(draft={"a": 1}), ".draft: expected a name"),
    (lambda rs: rs[1].update(status=1), ".status: expected text"),
    (lambda rs: rs[1].update(cycle="garbage"), ".cycle: expected an object"),         # used to be ignored
    (lambda rs: rs[3]["cycle"].update(steps=2, draft_tokens=3), ".cycle: a group at 2 steps in a record at 3 steps"),
    (lambda rs: rs[1]["cycle"].update(bs=4), ".cycle: batch size 4 above the record's concurrency 1"),
    (lambda rs: rs[0].update(model="other"), "a no-spec bench baseline of another model (other at "),
    # unnamed runs beside a named baseline: named as unnamed, not None
    (lambda rs: [r.update(model=None) for r in rs[1:]], "than the runs' (unnamed)"),
    # within one file in the words used across files (one shared check)
    (lambda rs: rs[2].update(model="other"), "bench records of several model/draft pairs (m + d, other + d)"),
])
def test_damaged_or_foreign_bench_records_are_refused_in_one_line(tmp_path, damage, says):
    recs = _standin_bench_records()
    damage(recs)
    rc, out, err = advise(_bench_file(tmp_path / "sweep.jsonl", recs))
    assert rc == 2 and out == "" and says in err and len(err.strip().splitlines()) == 1, err


def test_bench_records_of_two_pairs_in_two_files_are_refused_and_odd_but_valid_files_are_read(tmp_path):
    recs = _standin_bench_records()
    mine = _bench_file(tmp_path / "mine.jsonl", recs)
    theirs = _bench_file(tmp_path / "theirs.jsonl", [dict(r, model="other") for r in recs])
    rc, _, err = advise(mine, theirs)
    assert rc == 2 and "several model/draft pairs" in err and "choose with --model" in err
    assert advise_json(mine, theirs, "--model", "m")["recommended"]["steps"] == 3
    # a baseline of another model in a file of its own (it used to be used silently), either order
    spec = _bench_file(tmp_path / "spec.jsonl", recs[1:])
    other_base = _bench_file(tmp_path / "base.jsonl", [dict(recs[0], model="other/m", output_tok_s=175.6)])
    for order in ((spec, other_base), (other_base, spec)):
        rc, _, err = advise(*order)
        assert rc == 2 and f"a no-spec bench baseline of another model (other/m at {other_base}:1)" in err, err
    # names are compared as --model/--draft match them (case and punctuation aside): not two pairs
    shouty = _bench_file(tmp_path / "shouty.jsonl", [dict(r, model="M") for r in recs[3:]])
    assert advise_json(mine, shouty)["recommended"]["steps"] == 3
    mixed = _bench_file(tmp_path / "mixed.jsonl", recs[:3] + [dict(r, model="M") for r in recs[3:]])
    assert advise_json(mixed)["recommended"]["steps"] == 3
    # a byte-order mark, and a first record longer than the 64 KiB the input kind is told from (a
    # failed run keeps its server's log tail): both are bench JSONL, read as such
    bom = _bench_file(tmp_path / "bom.jsonl", recs, prefix="\ufeff")
    failed = {"schema": "eagle-cycle-bench/1", "model": "m", "draft": "d", "steps": 6, "topk": 1,
              "num_draft_tokens": 7, "concurrency": 1, "status": "error", "error": "server died: " + "é" * 70000}
    long_first = _bench_file(tmp_path / "long.jsonl", [failed] + recs)
    bom_blank = _bench_file(tmp_path / "bom_blank.jsonl", recs, prefix="\ufeff\n")
    blank_long = _bench_file(tmp_path / "blank_long.jsonl", [failed] + recs, prefix="\n")
    # a record cut short by a killed sweep, which closes it with a newline and skips it on resume
    cut = tmp_path / "cut.jsonl"
    cut.write_text(json.dumps(recs[0]) + "\n" + json.dumps(recs[1])[:60] + "\n"
                   + "".join(json.dumps(r) + "\n" for r in recs[1:]))
    for path in (bom, long_first, bom_blank, blank_long, cut):
        rc, out, err = advise(path, "--json")
        assert rc == 0 and json.loads(out)["recommended"]["steps"] == 3, (path, err)
        assert ("a record cut short" in err) == (path == cut)
    # any other line that is not JSON is still the error
    bad = tmp_path / "bad.jsonl"
    bad.write_text(cut.read_text().replace(json.dumps(recs[1])[:60], "garbage"))
    rc, _, err = advise(bad)
    assert rc == 2 and f"{bad}:2: invalid JSON" in err


def test_whole_cycle_times_of_another_batch_size_do_not_stand_in_for_this_ones(tmp_path):
    """Bench records without cycle groups (whole-cycle times from tok/s only) at concurrency 1 and 4.
    The 1-step run at bs 4 verifies 8 tokens, as 7 steps would at bs 1, but its cycle has no draft
    steps: taken as bs 1's cycle at width 8, it made 7 steps (never run) the pick at bs 1, 'settled'
    at 0% regret. Only bs 1's runs now shape bs 1's curve."""
    recs = [dict(r, cycle=None) for r in _standin_bench_records()]
    bs4_tok = {0: 351.7, 1: 499.4, 2: 543.0, 3: 561.0, 4: 532.9, 5: 511.9}
    for r in list(recs):
        hist = {k: 4 * v for k, v in (r.get("accept_hist") or {}).items()} or None
        recs.append(dict(r, concurrency=4, output_tok_s=bs4_tok[r["steps"]], accept_hist=hist))
    doc = advise_json(_bench_file(tmp_path / "nocycle.jsonl", recs))
    for b in doc["per_batch_size"]:
        assert b["recommended"]["steps"] <= 5, b   # a measured depth: 6-8 rest on the curve beyond the runs
    one = next(b for b in doc["per_batch_size"] if b["bs"] == 1)
    assert one["recommended"]["steps"] in (1, 2, 3) and one["settled"] is False


def test_a_log_with_nothing_in_it_among_several_is_skipped_with_a_warning(tmp_path):
    """`eagle-cycle sweep` keeps every server's log, the no-spec one included; passing them all
    (`sweep_server_logs/*.log`) stopped advise at the first log without cycle or Decode batch lines,
    where inspect warns and goes on. Among several inputs it is now skipped with a warning; alone it
    is still the error."""
    w = _sweep_world()
    run = tmp_path / "steps3.log"
    run.write_text("\n".join(w.log_lines(3, 400, random.Random(3))) + "\n")
    empty = tmp_path / "server_baseline.log"
    empty.write_text("[2026-12-05 00:53:04] stand-in server: model=org/target steps=0\n")
    rc, out, err = advise(empty, run, "--baseline-tok-s", w.true_tok_s(0))
    assert rc == 0 and "recommended at bs 4" in out
    assert f"warning: {empty}: no [eagle-cycle], JSONL or Decode batch line" in err and "skipped" in err
    rc, out, err = advise(empty, "--baseline-tok-s", w.true_tok_s(0))
    assert rc == 2 and "nothing to advise on" in err and out == ""


def _write_lines(path: Path, lines) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_bench_records_own_server_log_counts_once(tmp_path):
    """A sweep's bench records carry each run's cycle group read from its server log (`cycle.file`);
    given the records and those logs, every run was counted twice (twice the request-cycles). The log
    a record names counts once, as the record; so does a copy elsewhere (moved, renamed, gzipped) whose
    groups are exactly a record's; a log that only overlaps a record's depth gets a warning."""
    import gzip

    from sglang_eagle_cycle.report import inspect_paths

    w = _sweep_world()
    log = tmp_path / "server_steps3.log"
    log.write_text("\n".join(w.log_lines(3, 300, random.Random(4))) + "\n")
    grp = inspect_paths([str(log)])["groups"][0]
    grp["file"] = str(log)
    rec = {"schema": "eagle-cycle-bench/1", "model": "m", "draft": "d", "steps": 3, "topk": 1, "num_draft_tokens": 4,
           "concurrency": grp["bs"], "status": "ok", "output_tok_s": grp["tok_s"] * 0.97, "cycle": grp}
    bench = _bench_file(tmp_path / "sweep.jsonl", [rec])
    alone = advise_json(bench, "--baseline-tok-s", w.true_tok_s(0))
    copy = tmp_path / "moved" / "renamed.log.gz"
    copy.parent.mkdir()
    copy.write_bytes(gzip.compress(log.read_bytes()))
    for given, says in ((log, "the server log bench record"), (copy, "are those of bench record")):
        rc, out, err = advise(bench, given, "--baseline-tok-s", w.true_tok_s(0), "--json")
        both = json.loads(out)
        assert rc == 0 and both["inputs"]["acceptance"]["samples"] == alone["inputs"]["acceptance"]["samples"]
        assert len(both["inputs"]["runs"]) == 1 and "count twice" not in err
        assert any(n.startswith(str(given)) and says in n and "counted once" in n for n in both["inputs"]["notes"])
    # an inspect document of that log holds the record's group once more: counted once, either order
    doc = tmp_path / "inspect.json"
    doc.write_text(json.dumps(inspect_paths([str(log)])))
    for order in ((bench, doc), (doc, bench)):
        got = advise_json(*order, "--baseline-tok-s", w.true_tok_s(0))
        assert got["inputs"]["acceptance"]["samples"] == alone["inputs"]["acceptance"]["samples"]
        assert len(got["inputs"]["runs"]) == 1
        assert any(n.startswith(str(doc)) and "are those of bench record" in n for n in got["inputs"]["notes"])
    # a document of other cycles at the record's depth: a run of its own, with a warning
    other_doc = tmp_path / "other_inspect.json"
    other_doc.write_text(json.dumps(inspect_paths([str(_write_lines(tmp_path / "o.log",
                                                                     w.log_lines(3, 200, random.Random(11))))])))
    rc, out, err = advise(bench, other_doc, "--baseline-tok-s", w.true_tok_s(0), "--json")
    assert rc == 0 and len(json.loads(out)["inputs"]["runs"]) == 2 and "its cycles count twice" in err
    # the named log also holds cycles no record has (a sweep stopped before its next record): those count
    longer = tmp_path / "server_steps3_then_5.log"
    longer.write_text(log.read_text() + "\n".join(w.log_lines(5, 300, random.Random(5))) + "\n")
    grp5 = dict(grp, file=str(longer))
    rec5 = dict(rec, cycle=grp5)
    bench5 = _bench_file(tmp_path / "sweep5.jsonl", [rec5])
    rc, out, err = advise(bench5, longer, "--baseline-tok-s", w.true_tok_s(0), "--json")
    got = json.loads(out)
    assert rc == 0 and sorted(r["steps"] for r in got["inputs"]["runs"]) == [3, 5] and "count twice" not in err
    assert any("at bs" in n and "5 steps, which no bench record holds, are used" in n for n in got["inputs"]["notes"])
    # another log at the record's depth (other cycles): a run of its own, with a warning
    other = tmp_path / "other.log"
    other.write_text("\n".join(w.log_lines(3, 200, random.Random(9))) + "\n")
    rc, out, err = advise(bench, other, "--baseline-tok-s", w.true_tok_s(0), "--json")
    assert rc == 0 and len(json.loads(out)["inputs"]["runs"]) == 2 and "its cycles count twice" in err


def test_a_record_whose_cycles_ran_below_its_concurrency_competes_with_its_groups_throughput(tmp_path):
    """A concurrency-2 record whose cycle group ran at bs 1 (the sweep keeps the group with the most
    cycles) was placed at bs 1 with the client's concurrency-2 throughput: 263.5 tok/s at 2 steps
    then 'won' over every bs-1 run. The group's own tok/s stands for it now, with a note."""
    recs = _standin_bench_records()
    extra = json.loads(json.dumps(recs[2]))          # the 2-step record, its group at bs 1
    extra.update(concurrency=2, output_tok_s=263.5)
    extra["cycle"]["tok_s"] = 137.4
    doc = advise_json(_bench_file(tmp_path / "sweep.jsonl", recs + [extra]))
    assert doc["recommended"]["steps"] == 3
    assert any("below the concurrency 2" in n and "137.4 tok/s stands for the run" in n for n in doc["inputs"]["notes"])
    assert not any("263.5" in n for n in doc["inputs"]["notes"] if "measurement wins" in n)


def test_baselines_from_several_files_are_averaged_in_any_order_and_of_one_model(tmp_path):
    """Bench baselines at one concurrency in two files: the first file's used to win silently, so
    the pick followed the order of the arguments. Baselines of two models with no speculative
    record to choose between them used to be averaged (within a file) or the first taken."""
    recs = _standin_bench_records()
    spec = _bench_file(tmp_path / "spec.jsonl", recs[1:])
    b100 = _bench_file(tmp_path / "b100.jsonl", [dict(recs[0], output_tok_s=100.0)])
    b140 = _bench_file(tmp_path / "b140.jsonl", [dict(recs[0], output_tok_s=140.0)])
    docs = [advise_json(spec, *order) for order in ((b100, b140), (b140, b100))]
    for doc in docs:
        assert cand(doc, 0)["predicted_tok_s"] == pytest.approx(120.0)
        assert any(n.startswith("2 no-spec baselines at bs 1") and "their mean 120.0 is used" in n
                   for n in doc["inputs"]["notes"])
    assert docs[0]["recommended"] == docs[1]["recommended"]
    # no speculative bench record: baselines of two models are refused, within a file or across files
    seed = _write(tmp_path / "seed5.json", _doc(SEED_5))
    both = _bench_file(tmp_path / "two.jsonl", [dict(recs[0], output_tok_s=100.0),
                                               dict(recs[0], model="other", output_tok_s=140.0)])
    other = _bench_file(tmp_path / "other.jsonl", [dict(recs[0], model="other", output_tok_s=140.0)])
    for args in ((seed, both), (seed, b100, other), (seed, other, b100)):
        rc, out, err = advise(*args)
        assert rc == 2 and out == "" and "no-spec bench baselines of several models (m at " in err, err
        assert ", other at " in err and "): choose with --model" in err
    assert advise_json(seed, both, "--model", "other")["candidates"][0]["predicted_tok_s"] == pytest.approx(140.0)


def test_a_records_server_log_counts_once_with_or_without_its_cycle_group(tmp_path):
    """A record without a cycle group (a sweep run without the plugin's group) names its run's log in
    ``server_log``: given beside it, that log's cycles counted twice, silently. And a record carries
    the client's histogram beside its group's: the group's own must be what a document of the log is
    matched by (one verify apart, the document counted twice)."""
    from sglang_eagle_cycle.report import inspect_paths

    w = _sweep_world()
    log = _write_lines(tmp_path / "server_steps3.log", w.log_lines(3, 300, random.Random(4)))
    grp = inspect_paths([str(log)])["groups"][0]
    hist = {str(k): v for k, v in grp["accept_hist"].items()}
    client = dict(hist)
    first = next(iter(client))
    client[first] += 1                                   # the client saw one verify more than the window
    bare = {"schema": "eagle-cycle-bench/1", "model": "m", "draft": "d", "steps": 3, "topk": 1,
            "num_draft_tokens": 4, "concurrency": grp["bs"], "status": "ok", "output_tok_s": grp["tok_s"] * 0.97,
            "accept_hist": client, "cycle": None, "server_log": str(log),
            "accept_len_mean": sum(int(k) * v for k, v in client.items()) / sum(client.values())}
    bench = _bench_file(tmp_path / "bare.jsonl", [bare])
    log_alone = advise_json(log, "--baseline-tok-s", w.true_tok_s(0))
    rc, out, err = advise(bench, log, "--baseline-tok-s", w.true_tok_s(0), "--json")
    both = json.loads(out)
    # the log's cycles (phases, per-position counts) stand for the record, whose own figures are the client's
    assert rc == 0 and both["inputs"]["acceptance"]["samples"] == log_alone["inputs"]["acceptance"]["samples"]
    assert len(both["inputs"]["runs"]) == 1 and "count twice" not in err
    assert cand(both, 3)["predicted_cycle_ms"] == cand(log_alone, 3)["predicted_cycle_ms"]
    assert any(n.startswith(str(log)) and "its cycles stand for bench record" in n for n in both["inputs"]["notes"])
    # on standard input from that file, the same
    with log.open("rb") as stdin:
        proc = subprocess.run([sys.executable, "-m", "sglang_eagle_cycle.cli", "advise", str(bench), "-",
                               "--baseline-tok-s", repr(w.true_tok_s(0)), "--json"], stdin=stdin,
                              capture_output=True, text=True)
    assert proc.returncode == 0 and len(json.loads(proc.stdout)["inputs"]["runs"]) == 1, proc.stderr
    # a copy of it elsewhere cannot be matched (no group to compare): a run of its own, with a warning
    copy = _write_lines(tmp_path / "copy.log", log.read_text().splitlines())
    rc, out, err = advise(bench, copy, "--baseline-tok-s", w.true_tok_s(0), "--json")
    assert rc == 0 and len(json.loads(out)["inputs"]["runs"]) == 2 and "already hold a run" in err
    # with its group as well, an inspect document of the log matches the group's histogram
    full = dict(bare, cycle=dict(grp, file=str(log)))
    bench2 = _bench_file(tmp_path / "full.jsonl", [full])
    doc = tmp_path / "inspect.json"
    doc.write_text(json.dumps(inspect_paths([str(log)])))
    alone2 = advise_json(bench2, "--baseline-tok-s", w.true_tok_s(0))
    got = advise_json(bench2, doc, "--baseline-tok-s", w.true_tok_s(0))
    assert got["inputs"]["acceptance"]["samples"] == alone2["inputs"]["acceptance"]["samples"]
    assert len(got["inputs"]["runs"]) == 1


def test_a_log_named_by_a_record_the_filter_left_out_is_not_taken_for_the_chosen_models(tmp_path):
    """``--model other`` with model m's record and its server log given: the log used to count as
    model other's run (only the generic 'filters bench JSONL only' warning said anything)."""
    from sglang_eagle_cycle.report import inspect_paths

    w = _sweep_world()
    logs, recs = {}, []
    for model, seed in (("m", 4), ("other", 6)):
        logs[model] = _write_lines(tmp_path / f"server_{model}.log", w.log_lines(3, 300, random.Random(seed)))
        grp = dict(inspect_paths([str(logs[model])])["groups"][0], file=str(logs[model]))
        recs.append({"schema": "eagle-cycle-bench/1", "model": model, "draft": "d", "steps": 3, "topk": 1,
                     "num_draft_tokens": 4, "concurrency": grp["bs"], "status": "ok",
                     "output_tok_s": grp["tok_s"], "cycle": grp})
    bench = _bench_file(tmp_path / "sweep.jsonl", recs)
    rc, out, err = advise(bench, logs["m"], "--model", "other", "--baseline-tok-s", w.true_tok_s(0), "--json")
    got = json.loads(out)
    assert rc == 0 and len(got["inputs"]["runs"]) == 1
    assert f"{logs['m']}: the server log of bench record {bench}:1 (model m), which --model left out: not used" in err
    # the chosen model's own log still counts once, as its record
    got = advise_json(bench, logs["other"], "--model", "other", "--baseline-tok-s", w.true_tok_s(0))
    assert len(got["inputs"]["runs"]) == 1
    # left out by --draft: said so
    drafts = _bench_file(tmp_path / "drafts.jsonl", [recs[0], dict(recs[1], model="m", draft="d2")])
    rc, out, err = advise(drafts, logs["m"], "--draft", "d2", "--baseline-tok-s", w.true_tok_s(0))
    assert rc == 0 and f"{logs['m']}: the server log of bench record {drafts}:1 (model m), which --draft left out" in err


def test_a_named_logs_other_runs_count_and_extra_cycles_are_said(tmp_path):
    """A log named by a concurrency-4 record's cycle group also holds a concurrency-1 run at the same
    depth (its record not given): that run counts (it used to be taken for the bs-4 run's ramp-up and
    dropped, with a note saying 'counted once'). A named log with more cycles at the record's batch
    size and depth than its group holds says so."""
    from sglang_eagle_cycle.report import inspect_paths

    w4 = _sweep_world()
    w1 = dataclasses.replace(w4, bs=1)
    log = _write_lines(tmp_path / "server.log", w1.log_lines(3, 300, random.Random(2)) + w4.log_lines(3, 300, random.Random(3)))
    groups = inspect_paths([str(log)])["groups"]
    g4 = dict(next(g for g in groups if g["bs"] == 4), file=str(log))
    rec = {"schema": "eagle-cycle-bench/1", "model": "m", "draft": "d", "steps": 3, "topk": 1, "num_draft_tokens": 4,
           "concurrency": 4, "status": "ok", "output_tok_s": g4["tok_s"], "cycle": g4}
    bench = _bench_file(tmp_path / "only4.jsonl", [rec])
    got = advise_json(bench, log, "--baseline-tok-s", f"4:{w4.true_tok_s(0)}", "--baseline-tok-s", f"1:{w1.true_tok_s(0)}")
    assert sorted(r["bs"] for r in got["inputs"]["runs"]) == [1, 4]
    assert any("bs 1, 3 steps, which no bench record holds, are used" in n for n in got["inputs"]["notes"])
    # the record's group cut to half its cycles: the log's other half is not used, and that is said
    half = dict(g4, cycles=150, accept_hist={k: v // 2 for k, v in g4["accept_hist"].items()})
    rc, out, err = advise(_bench_file(tmp_path / "half.jsonl", [dict(rec, cycle=half)]), log,
                          "--baseline-tok-s", f"4:{w4.true_tok_s(0)}", "--baseline-tok-s", f"1:{w1.true_tok_s(0)}")
    assert rc == 0 and "300 cycles at bs 4, 3 steps, where bench record" in err and "holds 150" in err


def test_a_bare_records_log_stands_for_it_only_with_cycle_data_at_its_batch_size(tmp_path):
    """A record without a cycle group gave way to its log whatever the log held: stock Decode batch
    lines (a mean accept length) replaced the record's accept histogram, and a run at another batch
    size replaced a concurrency-1 record. Now the record keeps its run in both cases; a named log
    nothing can be read from is said in a warning."""
    hist = {"1": 80, "2": 60, "3": 60, "4": 100}
    bare = {"schema": "eagle-cycle-bench/1", "model": "m", "draft": "d", "steps": 3, "topk": 1,
            "num_draft_tokens": 4, "concurrency": 1, "status": "ok", "output_tok_s": 140.0,
            "accept_hist": hist, "accept_len_mean": 2.6, "cycle": None}
    base = dict(bare, steps=0, draft=None, num_draft_tokens=None, accept_hist=None, accept_len_mean=None,
                output_tok_s=90.0)
    stock = _stock_log(tmp_path / "stock.log", 3, 2.6, 140.0)
    bench = _bench_file(tmp_path / "b.jsonl", [base, dict(bare, server_log=str(stock))])
    alone = advise_json(bench)
    got = advise_json(bench, stock)
    assert got["inputs"]["acceptance"]["samples"] == alone["inputs"]["acceptance"]["samples"]
    assert len(got["inputs"]["runs"]) == 1
    assert any("Decode batch lines at bs 1, 3 steps are the run of a bench record" in n for n in got["inputs"]["notes"])
    # a log holding only a bs-4 run at the record's depth: not the concurrency-1 record's run
    w4 = _sweep_world()
    other = _write_lines(tmp_path / "bs4.log", w4.log_lines(3, 300, random.Random(7)))
    bench4 = _bench_file(tmp_path / "b4.jsonl", [base, dict(bare, server_log=str(other))])
    got = advise_json(bench4, other, "--baseline-tok-s", "1:90", "--baseline-tok-s", f"4:{w4.true_tok_s(0)}")
    assert sorted(r["bs"] for r in got["inputs"]["runs"]) == [1, 4]
    # a named log that cannot be read: a warning that names it, the records' own figures used
    broken = tmp_path / "broken.log.gz"
    broken.write_bytes(b"\x1f\x8b\x08\x00garbage")
    rc, out, err = advise(_bench_file(tmp_path / "bb.jsonl", [base, dict(bare, server_log=str(broken))]), broken)
    assert rc == 0 and f"{broken}" in err and "whose own figures are used" in err


def test_a_bare_record_gives_way_only_to_a_run_at_its_own_concurrency_or_when_it_has_no_acceptance(tmp_path):
    """A concurrency-4 record without a cycle group was replaced by its log's bs-1 cycles; and a
    record with no accept figures at all (the sweep writes nulls when the server returns no spec
    counts) lost its stock log's mean accept length, so advise stopped at 'no accept length'."""
    w1 = dataclasses.replace(_sweep_world(), bs=1)
    only1 = _write_lines(tmp_path / "only_bs1.log", w1.log_lines(3, 300, random.Random(8)))
    hist = {"1": 300, "2": 250, "3": 250, "4": 400}
    bare4 = {"schema": "eagle-cycle-bench/1", "model": "m", "draft": "d", "steps": 3, "topk": 1,
             "num_draft_tokens": 4, "concurrency": 4, "status": "ok", "output_tok_s": 706.0,
             "accept_hist": hist, "accept_len_mean": 2.6, "cycle": None, "server_log": str(only1)}
    rc, out, err = advise(_bench_file(tmp_path / "b4.jsonl", [bare4]), only1, "--baseline-tok-s", "4:400",
                          "--baseline-tok-s", f"1:{w1.true_tok_s(0)}", "--json")
    got = json.loads(out)
    assert rc == 0 and sorted(r["bs"] for r in got["inputs"]["runs"]) == [1, 4]
    assert not any("stand for" in n for n in got["inputs"]["notes"]) and "count twice" in err
    # no accept figures in the record: its stock log's Decode batch lines stand for it
    stock = _stock_log(tmp_path / "stock.log", 3, 2.6, 140.0)
    base = {"schema": "eagle-cycle-bench/1", "model": "m", "draft": None, "steps": 0, "topk": None,
            "num_draft_tokens": None, "concurrency": 1, "status": "ok", "output_tok_s": 90.0}
    empty = dict(bare4, concurrency=1, output_tok_s=140.0, accept_hist=None, accept_len_mean=None,
                 server_log=str(stock))
    got = advise_json(_bench_file(tmp_path / "b1.jsonl", [base, empty]), stock)
    assert len(got["inputs"]["runs"]) == 1 and cand(got, 3)["predicted_accept_len"] == pytest.approx(2.6, abs=0.05)
    assert any("its cycles stand for bench record" in n for n in got["inputs"]["notes"])


def test_a_stock_log_on_standard_input_keeps_its_depth(tmp_path):
    """Stock Decode batch lines take their depth from the log's server_args= line, read in a second
    pass: from stdin (a file or a pipe) that pass found nothing, and advise said the log held no
    server_args= line."""
    stock = _stock_log(tmp_path / "stock.log", 3, 2.6, 140.0)
    by_path = advise_json(stock, "--baseline-tok-s", "90")
    cmd = [sys.executable, "-m", "sglang_eagle_cycle.cli", "advise", "-", "--baseline-tok-s", "90", "--json"]
    with stock.open("rb") as stdin:
        from_file = subprocess.run(cmd, stdin=stdin, capture_output=True, text=True)
    from_pipe = subprocess.run(cmd, input=stock.read_text(), capture_output=True, text=True)
    for proc in (from_file, from_pipe):
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)
        assert [r["steps"] for r in doc["inputs"]["runs"]] == [3]
        assert doc["recommended"] == by_path["recommended"]


def test_a_seed_files_baseline_beside_a_bench_baseline_is_not_dropped(tmp_path):
    """A seed wrapper's baseline has no batch size; beside a bench baseline at the runs' batch size it
    was dropped silently. Both count now, with a note."""
    seed = {"inputs": {"baseline_no_spec_tok_s": 88.8, "inspect_json": _doc(SEED_5)}}
    wrapper = _write(tmp_path / "seed.json", seed)
    bench = _bench_file(tmp_path / "b.jsonl", [{"schema": "eagle-cycle-bench/1", "model": "m", "draft": None,
                                                "steps": 0, "topk": None, "num_draft_tokens": None,
                                                "concurrency": 1, "status": "ok", "output_tok_s": 100.0}])
    doc = advise_json(wrapper, bench)
    assert cand(doc, 0)["predicted_tok_s"] == pytest.approx(94.4)
    assert any("without a batch size (88.8 tok/s)" in n and "their mean 94.4 is used" in n
               for n in doc["inputs"]["notes"])


def _draft_ensemble(observations, share):
    acc = cm.AcceptanceModel.from_counts([(800, 1000), (640, 800), (512, 640)])
    cost = cm.CycleCostModel.fit(observations, {1: 125.0})
    return unc.build(acc, cost, observations, 1, [0, 1, 2, 3, 8], n=2000, draft_fixed_share=share)


def test_a_draft_phase_at_two_depths_is_split_into_a_fixed_part_and_the_per_step_cost():
    # lines without device spans time the draft from the cycle's start: 1.2 ms of preparation plus
    # 0.3 ms per draft forward measure 1.8 ms at 3 steps and 2.7 ms at 6. Read as forwards alone,
    # the 2-step draft would be 0.7 ms; the two depths say 1.5
    obs = [cm.CycleObservation(bs=1, steps=s, total_ms=1.2 + 0.3 * (s - 1) + 5.0 + 0.5 * s + 0.9,
                               draft_ms=1.2 + 0.3 * (s - 1), verify_ms=5.0 + 0.5 * s, extend_ms=0.5,
                               other_ms=0.4, weight=1000.0) for s in (3, 6)]
    ens = _draft_ensemble(obs, unc.DRAFT_FIXED_SHARE)
    draft = ens.phases["draft_ms"]
    assert draft[:, ens.steps.index(2)] == pytest.approx(1.5, abs=1e-6)
    assert draft[:, ens.steps.index(8)] == pytest.approx(1.2 + 0.3 * 7, abs=1e-6)
    # at one step no draft forward runs: none to all of the fixed part, as other time
    assert not draft[:, ens.steps.index(1)].any()
    one = ens.phases["other_ms"][:, ens.steps.index(1)] - 0.4
    assert one.min() >= -1e-9 and one.max() <= 1.2 + 1e-9 and np.ptp(one) > 1.0
    parts = sum(ens.phases[k] for k in ("draft_ms", "verify_ms", "extend_ms", "other_ms"))
    assert parts[:, 1:] == pytest.approx(ens.phases["total_ms"][:, 1:])
    # a fixed part that the two depths say is negative is none: the forwards through the origin
    neg = [dataclasses.replace(o, draft_ms=-0.3 + 0.5 * (o.steps - 1)) for o in obs]
    assert _draft_ensemble(neg, 0.5).phases["draft_ms"][:, 2] == pytest.approx((2 * 0.7 + 5 * 2.2) / 29)
    # a slope below 0 is noise about a flat draft (a fixed part and no per-step cost): flat, never
    # charged again per step (5.05 ms at 3 steps and 5.00 at 6 read through the origin: 14 ms at 8)
    flat = [dataclasses.replace(o, draft_ms=5.05 if o.steps == 3 else 5.0) for o in obs]
    at8 = _draft_ensemble(flat, 0.5).phases["draft_ms"][:, 4]
    assert at8 == pytest.approx((5.05 + 5.0) / 2)


def test_a_draft_phase_at_one_depth_may_hold_a_fixed_part_unless_it_is_a_device_span():
    obs = [cm.CycleObservation(bs=1, steps=8, total_ms=3.3 + 9.0 + 0.7 + 0.4, draft_ms=3.3, verify_ms=9.0,
                               extend_ms=0.7, other_ms=0.4, weight=2000.0)]
    share = unc.DRAFT_FIXED_SHARE
    at2 = _draft_ensemble(obs, share).phases["draft_ms"][:, 2]
    lo, hi = np.percentile(at2, [2.5, 97.5])

    def two_steps(f):  # a fixed share f of the 3.3 ms, the rest seven forwards
        return f * 3.3 + (1 - f) * 3.3 / 7

    # seven forwards read from 3.3 ms give 0.47 ms at 2 steps; the fixed share f = share U(0,1)^2
    # reaches 0.95 share at its 97.5th percentile and share / 4 at its median
    assert lo == pytest.approx(two_steps(0.0), rel=0.02) and hi == pytest.approx(two_steps(0.95 * share), rel=0.03)
    assert float(np.median(at2)) == pytest.approx(two_steps(share / 4), rel=0.05)
    assert hi > 2 * two_steps(0.0)
    spans = _draft_ensemble(obs, 0.0).phases["draft_ms"][:, 2]
    assert spans == pytest.approx(3.3 / 7)


def test_a_draft_time_logged_at_one_step_is_the_fixed_part():
    # a generator that counts num_steps draft forwards (or lines timing the draft from the cycle's
    # start) logs a draft time at one step: 3 ms there and 4 ms at 3 steps are a 3 ms fixed part
    # and 0.5 ms per forward, and the 1-step cycle must still add up to its measurement
    obs = [cm.CycleObservation(bs=1, steps=s, total_ms=d + 8.0 + 0.5 + 0.3, draft_ms=d, verify_ms=8.0,
                               extend_ms=0.5, other_ms=0.3, weight=1000.0) for s, d in ((1, 3.0), (3, 4.0))]
    ens = _draft_ensemble(obs, unc.DRAFT_FIXED_SHARE)
    total, draft = ens.phases["total_ms"], ens.phases["draft_ms"]
    assert total[:, ens.steps.index(1)] == pytest.approx(11.8) and not draft[:, ens.steps.index(1)].any()
    assert total[:, ens.steps.index(3)] == pytest.approx(12.8)
    assert draft[:, ens.steps.index(8)] == pytest.approx(3.0 + 7 * 0.5)
    # the other time of the deeper runs is their own: no 1-step draft time averaged into it
    assert ens.phases["other_ms"][:, ens.steps.index(8)] == pytest.approx(0.3)
    # with 1-step draft times only, the fixed part is known and the per-forward cost is not
    alone = _draft_ensemble(obs[:1], unc.DRAFT_FIXED_SHARE)
    assert alone.phases["total_ms"][:, alone.steps.index(1)] == pytest.approx(11.8)
    assert (alone.phases["draft_ms"][:, alone.steps.index(2)] > 3.0).all()


def test_a_batch_size_no_run_measured_carries_the_fixed_part_and_the_per_forward_cost():
    # 3 ms of draft preparation at every batch size, 0.5 ms per forward at bs 1 and 1.0 at bs 4,
    # each measured at two depths; bs 2 and bs 8 were never run. Read as forwards alone, the
    # preparation would be charged at every step there too
    def ob(bs, s, t):
        d = 3.0 + (s - 1) * t
        return cm.CycleObservation(bs=bs, steps=s, total_ms=d + 10.0 + 0.5 + 0.3, draft_ms=d, verify_ms=10.0,
                                   extend_ms=0.5, other_ms=0.3, weight=1000.0)

    obs = [ob(1, 2, 0.5), ob(1, 4, 0.5), ob(4, 3, 1.0), ob(4, 5, 1.0)]
    acc = cm.AcceptanceModel.from_counts([(800, 1000), (640, 800), (512, 640)])
    cost = cm.CycleCostModel.fit(obs, {1: 90.0, 4: 300.0})
    for bs, t in ((2, 0.5 + 0.5 / 3), (8, 1.0 + 0.5 / 3 * 4)):
        ens = unc.build(acc, cost, obs, bs, [1, 2, 8], n=500)
        draft = ens.phases["draft_ms"]
        assert draft[:, ens.steps.index(2)] == pytest.approx(3.0 + t)
        assert draft[:, ens.steps.index(8)] == pytest.approx(3.0 + 7 * t)


def test_runs_at_one_step_and_deeper_keep_their_own_other_time():
    # the plugin's older lines at one step log no draft time and put the preparation (3 ms) in
    # other_ms; from two steps up it sits in draft_ms. One mean other time over both runs (1.8 ms)
    # missed both measured cycles, by 1.5 ms each way
    obs = [cm.CycleObservation(bs=1, steps=1, total_ms=8.0 + 0.5 + 3.3, verify_ms=8.0, extend_ms=0.5,
                               other_ms=3.3, weight=1000.0),
           cm.CycleObservation(bs=1, steps=3, total_ms=4.0 + 8.0 + 0.5 + 0.3, draft_ms=4.0, verify_ms=8.0,
                               extend_ms=0.5, other_ms=0.3, weight=1000.0)]
    ens = _draft_ensemble(obs, unc.DRAFT_FIXED_SHARE)
    total = ens.phases["total_ms"]
    assert total[:, ens.steps.index(1)] == pytest.approx(11.8)
    assert total[:, ens.steps.index(3)] == pytest.approx(12.8)
    assert ens.phases["other_ms"][:, ens.steps.index(8)] == pytest.approx(0.3)


def test_a_batch_size_measured_at_one_depth_borrows_the_fixed_part_and_nothing_overshoots():
    # 0.8 ms of preparation and 0.6 ms per forward at every batch size: bs 2 measured at 2 and 4
    # steps, bs 4 at 3 steps only. Drawn from the share prior, bs 4's per-forward cost came out
    # above bs 2's, and that slope, carried to bs 32, predicted 38 ms of draft at 8 steps (true 5.0)
    def ob(bs, s, other=0.3):
        d = 0.8 + (s - 1) * 0.6 if s > 1 else None
        return cm.CycleObservation(bs=bs, steps=s, total_ms=(d or 0.0) + 18.0 + 0.5 + other, draft_ms=d,
                                   verify_ms=18.0, extend_ms=0.5, other_ms=other, weight=400.0)

    obs = [ob(2, 2), ob(2, 4), ob(4, 3)]
    acc = cm.AcceptanceModel.from_counts([(800, 1000), (640, 800), (512, 640)])
    cost = cm.CycleCostModel.fit(obs, {2: 150.0})
    for bs in (4, 8, 32):
        ens = unc.build(acc, cost, obs, bs, [1, 2, 8], n=300)
        assert ens.phases["draft_ms"][:, 1] == pytest.approx(1.4), bs
        assert ens.phases["draft_ms"][:, 2] == pytest.approx(0.8 + 7 * 0.6), bs
    # one-step runs keep their own other time across batch sizes (the older lines' preparation
    # sits there), and deeper runs theirs: bs 1 measured at one step only, bs 4 deeper
    obs = [ob(1, 1, other=1.1), ob(4, 2), ob(4, 4)]
    cost = cm.CycleCostModel.fit(obs, {1: 60.0})
    for bs in (1, 2, 8):
        ens = unc.build(acc, cost, obs, bs, [1, 2, 8], n=300)
        other = ens.phases["other_ms"]
        assert other[:, 0] == pytest.approx(1.1) and other[:, 1:] == pytest.approx(0.3), bs


def test_below_the_runs_without_a_baseline_the_measured_slope_continues():
    # bs 8 measured at 24 and 40 verified tokens (12.0 and 12.5 ms: a memory-bound, nearly flat
    # verify), asked at bs 2 with no baseline anywhere: 1 step verifies 4 tokens. Drawn as
    # y0 (x / x0)^U(0,1), the median hypothesis put it at 5.1 ms (true 11.9) and 1 step at 2.2
    # times its true tok/s
    pts = [(24.0, 12.0), (40.0, 12.5)]
    y = unc.sample_curve(pts, [4.0, 16.0], 4000, np.random.default_rng(2))
    cont = [12.0 - 0.5 / 16 * 20, 12.0 - 0.5 / 16 * 8]
    assert np.median(y, axis=0) == pytest.approx(cont, rel=0.01)
    assert (y <= 12.0 + 1e-9).all()                               # never above flat
    assert (y[:, 0] >= 12.0 * 4 / 24 - 1e-9).all()                # never below proportional
    assert np.percentile(y[:, 0], 2.5) < 0.5 * cont[0]             # a concave curve's drop stays possible
    # one measured width says nothing of the slope: flat to proportional, as before
    one = unc.sample_curve(pts[:1], [4.0], 4000, np.random.default_rng(2))
    assert np.median(one) < 0.5 * 12.0
    # a falling measured shape is a flat one: nothing below the runs costs more than the narrowest
    falling = unc.sample_curve([(24.0, 12.0), (40.0, 10.0)], [4.0, 16.0], 4000, np.random.default_rng(2))
    assert falling.max() <= 12.0 + 1e-9 and np.median(falling, axis=0) == pytest.approx([12.0, 12.0], rel=1e-3)
    # a steep measured slope (compute-bound runs) flattens somewhere below, where is unknown: the
    # central curve stops at the geometric mean of flat and proportional (at 8 tokens from 256:
    # 14.1 ms, the truth of a 20 ms memory floor inside the interval; the secant continued gave 2.5)
    steep = unc.sample_curve([(256.0, 80.0), (384.0, 120.0)], [8.0], 4000, np.random.default_rng(2))
    assert np.median(steep) == pytest.approx(80.0 * math.sqrt(8 / 256), rel=0.01)
    assert np.percentile(steep, 2.5) < 20.8 < np.percentile(steep, 97.5)


def test_a_smaller_batch_without_a_baseline_keeps_the_runs_flat_verify(tmp_path):
    def world(bs):
        kw = dict(kind="hand", p=(0.8,) * 12, verify_overhead=0.2, fixed_ms=1.0, slope_ms=0.003,
                  extend_fixed_ms=0.4, extend_slope_ms=0.01, draft_step_ms=0.4, draft_prep_ms=0.3,
                  other_ms=0.4, gap_ms=0.1)
        ref = aw.World(bs=8, decode_ms=10.0, **kw)
        return aw.World(bs=bs, decode_ms=10.0 * ref.shape(bs) / ref.shape(8), **kw)

    w8, w2 = world(8), world(2)
    logs = []
    for s in (2, 4):
        logs.append(tmp_path / f"r{s}.log")
        logs[-1].write_text("\n".join(w8.log_lines(s, None, random.Random(s))) + "\n")
    doc = advise_json(*logs, "--batch-sizes", "2", "--steps-candidates", *range(1, 9))
    one = next(c for c in doc["candidates"] if c["steps"] == 1)
    assert one["cycle_phases_ms"]["verify_ms"] == pytest.approx(w2.verify_ms(4), rel=0.02)
    lo, hi = one["tok_s_95"]
    assert lo <= w2.true_tok_s(1) <= hi
    assert one["predicted_tok_s"] < 1.3 * w2.true_tok_s(1)        # was 2.2 times


def test_other_time_that_grows_with_the_width_follows_it_between_and_beyond_the_runs():
    # host work per verified token (sampling, bookkeeping): other time 1.0 ms at 3 steps (32
    # tokens at bs 8) and 1.6 ms at 6 steps (56 tokens). One mean (1.3 ms) missed both measured
    # cycles by 0.3 ms, outside their intervals on a long run
    def ob(s, other):
        return cm.CycleObservation(bs=8, steps=s, total_ms=0.4 * (s - 1) + 20.0 + 1.0 + other, draft_ms=0.4 * (s - 1),
                                   verify_ms=20.0, extend_ms=1.0, other_ms=other, weight=2000.0)

    obs = [ob(3, 1.0), ob(6, 1.6)]
    acc = cm.AcceptanceModel.from_counts([(800, 1000), (640, 800), (512, 640)])
    cost = cm.CycleCostModel.fit(obs, {8: 500.0})
    ens = unc.build(acc, cost, obs, 8, [0, 2, 3, 4, 6, 8], n=2000)
    other = ens.phases["other_ms"]
    col = ens.steps.index
    assert other[:, col(3)] == pytest.approx(1.0) and other[:, col(6)] == pytest.approx(1.6)
    assert np.median(other[:, col(4)]) == pytest.approx(1.2, abs=0.03)
    beyond = other[:, col(8)]                       # 72 tokens: 2.0 ms on the secant, flat to 1.5x it
    assert np.median(beyond) == pytest.approx(2.0, abs=0.03)
    assert beyond.min() >= 1.6 - 1e-9 and beyond.max() <= 2.2 + 1e-9
    # below the runs: the secant continued (0.8 ms at 24 tokens) but not below the geometric mean
    # of flat and proportional (0.87); a one-step cycle follows the same curve when no one-step run
    # was measured (0.71 at 16 tokens): it was charged the runs' mean, more than a 2-step one
    assert np.median(other[:, col(2)]) == pytest.approx(math.sqrt(24 / 32), abs=0.01)
    ens1 = unc.build(acc, cost, obs, 8, [1, 2], n=2000)
    assert np.median(ens1.phases["other_ms"][:, 0]) == pytest.approx(math.sqrt(16 / 32), abs=0.01)
    # one measured width: the runs' mean, as before
    one = unc.build(acc, cm.CycleCostModel.fit(obs[:1], {8: 500.0}), obs[:1], 8, [2, 8], n=200)
    assert one.phases["other_ms"] == pytest.approx(1.0)
    # other times that differ within the runs' noise (a stall in one run) are one mean: carried past
    # the runs by their secant, a stall moved every deeper prediction out of its interval
    noisy = [dataclasses.replace(o, total_se_ms=0.25) for o in obs]
    flat = unc.build(acc, cm.CycleCostModel.fit(noisy, {8: 500.0}), noisy, 8, [2, 8], n=200)
    assert flat.phases["other_ms"] == pytest.approx(1.3)
    sure = [dataclasses.replace(o, total_se_ms=0.05) for o in obs]
    grows = unc.build(acc, cm.CycleCostModel.fit(sure, {8: 500.0}), sure, 8, [2, 8], n=2000)
    assert np.median(grows.phases["other_ms"][:, 1]) == pytest.approx(2.0, abs=0.03)


def test_a_draft_extend_measured_at_one_width_stays_near_flat_when_narrow():
    # one decoder layer and an LM head read their weights once per forward: 0.93 ms at 4 tokens
    # (bs 1, 3 steps) is nearly all fixed cost, and 9 tokens (8 steps) cost 1.0 ms in the world
    # that logged it. Proportional growth from the one point put them at 2.08 ms
    y = unc._extend_one_width((4.0, 0.93), [2.0, 4.0, 9.0, 576.0], 4000, np.random.default_rng(0))
    assert y[:, 1] == pytest.approx(0.93)
    assert 0.93 < np.median(y[:, 2]) < 0.93 * 1.1 and y[:, 2].max() <= 0.93 * (16 + 9) / (16 + 4) + 1e-9
    assert (y[:, 0] <= 0.93).all() and np.median(y[:, 0]) > 0.93 * 0.95
    # 144x the width: 5.3x the time at the median knee (128 tokens), 1.6x to 30x at the extremes
    assert 0.93 * 4 < np.median(y[:, 3]) < 0.93 * 7 and 0.93 * 1.5 < y[:, 3].min() < y[:, 3].max() < 0.93 * 31
    wide = unc._extend_one_width((256.0, 4.0), [576.0], 4000, np.random.default_rng(0))
    assert 4.0 * 1.4 < np.median(wide) < 4.0 * 2.25                 # between flat-ish and proportional


def test_an_moe_target_whose_experts_are_all_loaded_at_both_runs_is_advised(tmp_path):
    # 64 experts, top-8: at 320 and 384 verified tokens (bs 64, 4 and 5 steps) every expert is
    # loaded, and the distinct-experts shape is the same float at both widths. advise divided by
    # their difference and died with a ZeroDivisionError traceback
    w = aw.World(kind="moe", bs=64, p=(0.7,) * 12, decode_ms=30.0, verify_overhead=0.2, fixed_ms=1.0,
                 slope_ms=0.002, moe_experts=64, moe_topk=8, moe_ms_per_expert=0.02, extend_fixed_ms=0.8,
                 extend_slope_ms=0.002, draft_step_ms=0.9, other_ms=0.5, gap_ms=0.1)
    assert cm.distinct_experts(320, 64, 8) == cm.distinct_experts(384, 64, 8)
    logs = []
    for s in (4, 5):
        logs.append(tmp_path / f"r{s}.log")
        logs[-1].write_text("\n".join(w.log_lines(s, 300, random.Random(s))) + "\n")
    cfg = _write(tmp_path / "config.json", {"num_hidden_layers": 48, "hidden_size": 2048,
                                             "num_experts": 64, "num_experts_per_tok": 8})
    doc = advise_json(*logs, "--baseline-tok-s", w.true_tok_s(0), "--target-config", cfg,
                      "--steps-candidates", *range(0, 9))
    for c in doc["candidates"]:
        lo, hi = c["tok_s_95"]
        assert 0 < lo <= c["predicted_tok_s"] <= hi
    six = cand(doc, 6)
    assert six["tok_s_95"][0] <= w.true_tok_s(6) <= six["tok_s_95"][1]
    curve = cm.MeasuredCurve(((320.0, 60.0), (384.0, 66.0)), cm.WidthShape(64, 8))
    assert curve(352.0) == (pytest.approx(63.0), False)
    # one measured width, asked at that width: the node itself (the fallback above once made it 0/0)
    one = unc.sample_curve([(6.0, 28.1)], [6.0], 50, np.random.default_rng(0), shapes=(cm.LINEAR, cm.WidthShape(384, 8)))
    assert one == pytest.approx(28.1)


def test_an_moe_shape_carries_the_last_secant_in_distinct_experts_beyond_the_runs():
    # --target-config MoE (256 experts, top-8), verify 40 ms at 64 tokens and 50 at 128: the secant
    # in tokens reaches 70 ms at 256, while the expert loads saturate (222.5 -> 251.6 -> 255.9
    # distinct experts) and the secant in experts reaches 51.5. The MoE shape was used between the
    # runs only; beyond them every hypothesis grew linearly
    moe = cm.WidthShape(256, 8)
    alone = unc.sample_curve([(64.0, 40.0), (128.0, 50.0)], [256.0], 4000, np.random.default_rng(0), shapes=(moe,))
    assert np.median(alone) == pytest.approx(51.5, abs=0.2) and alone.min() >= 50.0 and alone.max() < 53.0
    both = unc.sample_curve([(64.0, 40.0), (128.0, 50.0)], [256.0], 4000, np.random.default_rng(0),
                            shapes=(cm.LINEAR, moe))
    assert np.percentile(both, 25) < 52.0 and np.percentile(both, 75) == pytest.approx(70.0, abs=1.0)


def test_an_moe_shape_nearly_saturated_between_the_runs_is_read_along_the_width():
    # 64 experts, top-8, bs 48 at 4 and 5 steps (240 and 288 tokens): the expected distinct experts
    # differ by about 1e-12 there, so the verify's growth between the runs is the dense part's. Read
    # along the experts it became a step between the runs and a flat line beyond: 10 steps (528
    # tokens) predicted at the 5-step verify, 15% over the true tok/s
    moe = cm.WidthShape(64, 8)
    assert 0 < moe(288) - moe(240) < 1e-9 and not moe.grows(240, 288) and moe.grows(8, 16)
    pts = [(240.0, 20.0), (288.0, 21.0)]
    y = unc.sample_curve(pts, [264.0, 528.0], 4000, np.random.default_rng(0), shapes=(cm.LINEAR, moe))
    assert np.median(y[:, 0]) == pytest.approx(20.5, abs=0.05)
    assert np.median(y[:, 1]) == pytest.approx(21.0 + 240 / 48, abs=0.3)
    assert cm.MeasuredCurve(tuple(pts), moe)(264.0)[0] == pytest.approx(20.5)


def test_a_smaller_batch_whose_extrapolated_decode_step_is_not_positive_is_advised_without_one(tmp_path):
    # runs at bs 32 with a steep, compute-bound verify and a baseline at bs 32 only, asked at bs 4 as
    # well: the verify line carried down to 4 tokens reaches no positive time, and the decode step
    # taken from it refused the whole command ("extrapolates to 0 ms") where no baseline at all passed
    obs = [cm.CycleObservation(bs=32, steps=s, total_ms=0.5 * (s - 1) + v + 1.0 + 0.5, draft_ms=0.5 * (s - 1),
                               verify_ms=v, extend_ms=1.0, other_ms=0.5, weight=300.0)
           for s, v in ((3, 40.0), (5, 70.0))]
    cost = cm.CycleCostModel.fit(obs, {32: 4000.0})      # 8 ms at width 32, 40 ms at 128
    assert cost.verify(4)[0] <= 0.0 and cost.baseline_step_ms(4) is None
    # the one baseline moved by the runs' verify slope (30 ms per 64 tokens), not the verify's level
    assert cost.baseline_step_ms(31) == (pytest.approx(8.0 - 30.0 / 64.0), True)
    acc = cm.AcceptanceModel.from_counts([(800, 1000), (640, 800), (512, 640), (400, 512), (300, 400)])
    cands = cm.predict_candidates(acc, cost, 4, [1, 2, 3])
    assert [c.steps for c in cands] == [1, 2, 3]          # no speculation-off row without a decode step


def _stair_ensemble(n: int = 400) -> unc.Ensemble:
    """Four depths at bs 1 whose cycle grows 10% a step; accept lengths 1.8, 2.4, 2.8, 3.1."""
    steps = [0, 1, 2, 3, 4]
    e = np.tile([1.0, 1.8, 2.4, 2.8, 3.1], (n, 1))
    t = np.tile([10.0, 12.0, 13.2, 14.52, 15.97], (n, 1))
    tok = 1000.0 * e / t
    return unc.Ensemble(1, steps, tok, e, {}, 4, [None] * 5, None, tok.copy())


def test_stair_hypotheses_pad_depths_to_their_cell_and_keep_a_measured_cell(monkeypatch):
    ens = _stair_ensemble()
    monkeypatch.setattr(unc, "STAIR_SHARE", 1.0)
    # every depth in one cell: each runs the measured 2-step cycle (13.2 ms), its own accept length
    monkeypatch.setattr(unc, "STAIR_SAME", (1.0, 1.0))
    one = unc._stairs(ens, ens.tok_s, [2], seed=3)
    assert np.allclose(one[:, 1:], 1000.0 * np.array([1.8, 2.4, 2.8, 3.1]) / 13.2)
    assert np.allclose(one[:, 0], 100.0)                       # speculation off is left alone
    # with nothing measured, the cell's top depth (4 steps) sets every depth's cycle
    top = unc._stairs(ens, ens.tok_s, [], seed=3)
    assert np.allclose(top[:, 1:], 1000.0 * np.array([1.8, 2.4, 2.8, 3.1]) / 15.97)
    # no neighbours share a cell: the smooth hypotheses unchanged
    monkeypatch.setattr(unc, "STAIR_SAME", (0.0, 0.0))
    assert np.allclose(unc._stairs(ens, ens.tok_s, [2], seed=3), ens.tok_s)
    # the share: about that many hypotheses change, the same ones for the same seed
    monkeypatch.setattr(unc, "STAIR_SHARE", 0.25)
    monkeypatch.setattr(unc, "STAIR_SAME", (1.0, 1.0))
    a, b = unc._stairs(ens, ens.tok_s, [2], seed=3), unc._stairs(ens, ens.tok_s, [2], seed=3)
    changed = ~np.all(np.isclose(a, ens.tok_s), axis=1)
    assert np.array_equal(a, b) and 0.18 < changed.mean() < 0.32



def test_one_baseline_and_a_verify_at_one_width_carry_the_decode_step_along_their_chord(tmp_path):
    """The seed's one run (verify 28.1 ms at 6 tokens) and its bs-1 baseline: at bs 8 the decode
    step grows along the chord from the decode step (times the central verify-mode overhead, 1.25)
    to the measured verify, as the verify hypotheses do; it had stayed at 11.26 ms, 8 x 88.8 tok/s.
    That slope is a verify's, not a decode step's: the hypotheses take half of it to half again."""
    doc = advise_json(_write(tmp_path / "seed5.json", _doc(SEED_5)), "--baseline-tok-s", SEED_BASELINE,
                      "--batch-sizes", 1, 8)
    b0 = 1000.0 / SEED_BASELINE
    anchor = b0 * (1.0 + cm.VERIFY_MODE_OVERHEAD_CENTRAL)
    step8 = b0 * (anchor + (28.1 - anchor) * (8 - 1) / (6 - 1)) / anchor
    bs8 = next(b for b in doc["per_batch_size"] if b["bs"] == 8)
    off = next(c for c in bs8["candidates"] if c["steps"] == 0)
    # the row is the mean over the step's hypotheses (that slope, half of it to half again as steep):
    # near the carried step's tok/s, which its interval holds, and the slopes' ends bound it
    lo, hi = off["tok_s_95"]
    assert off["predicted_tok_s"] == pytest.approx(8000.0 / step8, rel=0.03)
    assert lo < 8000.0 / step8 < hi
    slope = (step8 - b0) / 7
    assert 8000.0 / (b0 + 1.5 * slope * 7) * 0.999 <= lo and hi <= 8000.0 / (b0 + 0.5 * slope * 7) * 1.001
    assert off["predicted_tok_s"] < 0.5 * 8 * SEED_BASELINE
    assert not bs8["settled"] and bs8["next_run"]["bs"] == 8
    # the centre is the middle of the ensemble's verify-mode overheads
    assert cm.VERIFY_MODE_OVERHEAD_CENTRAL == pytest.approx(sum(unc.VERIFY_MODE_OVERHEAD) / 2)


def test_bench_records_keep_their_cycle_groups_device_spans_and_host_time(tmp_path):
    """The same two device-span runs as logs and as bench records with their cycle groups: the same
    predictions, and the records beside an older log are refused as the logs are (the records had
    lost device_spans and host_ms: 1-step predictions differed, and the mix was fitted silently)."""
    from sglang_eagle_cycle.report import inspect_paths

    w = _sweep_world()
    logs, recs = [], []
    for steps, seed in ((2, 4), (5, 6)):
        log = _write_lines(tmp_path / f"s{steps}.log", w.log_lines(steps, 300, random.Random(seed)))
        logs.append(log)
        grp = inspect_paths([str(log)])["groups"][0]
        assert grp["device_spans"] is True
        recs.append({"schema": "eagle-cycle-bench/1", "model": "m", "draft": "d", "steps": steps, "topk": 1,
                     "num_draft_tokens": steps + 1, "concurrency": grp["bs"], "status": "ok",
                     "output_tok_s": grp["tok_s"], "cycle": grp})
    bench = _bench_file(tmp_path / "sweep.jsonl", recs)
    base = ("--baseline-tok-s", w.true_tok_s(0))
    from_logs, from_recs = advise_json(*logs, *base), advise_json(bench, *base)
    assert [r["device_spans"] for r in from_recs["inputs"]["runs"]] == [True, True]
    assert [r["host_ms"] for r in from_recs["inputs"]["runs"]] == [r["host_ms"] for r in from_logs["inputs"]["runs"]]
    assert [c["predicted_tok_s"] for c in from_recs["candidates"]] == [c["predicted_tok_s"] for c in from_logs["candidates"]]
    old = _write_lines(tmp_path / "legacy.log", aw.design_lines(w.log_lines(3, 300, random.Random(8)), "legacy"))
    rc, _, err = advise(bench, old, *base)
    assert rc == 2 and "mix device-span cycle lines" in err


def test_a_throughput_below_the_range_is_refused_and_the_error_shows_the_value_given(tmp_path):
    """An inspect group's ``tok_s: 1e-300`` was taken (300-digit figures in the table); a baseline of
    100000001 tok/s was refused as "1e+08 tok/s", inside the range the same line stated."""
    rc, _, err = advise(_write(tmp_path / "tiny.json", _doc(dict(SEED_5, tok_s=1e-300))))
    assert rc == 2 and err.count("\n") == 1 and "1e-300 tok/s is not a throughput (expected 0.01 to 1e+08)" in err
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as stop:
        main(["advise", str(_write(tmp_path / "seed.json", _doc(SEED_5))), "--baseline-tok-s", "1:100000001"])
    assert stop.value.code == 2 and "100000001 tok/s is not a throughput" in err.getvalue()


def test_a_batch_size_no_run_measured_says_its_figures_are_carried_over_and_keeps_their_noise(tmp_path):
    """Stock runs at bs 1 (whole-cycle times), advice asked at bs 2 as well: every interval there says
    it is carried over from bs 1, and none is zero-wide (the carried cycles keep their measurement
    error; a 2-step cycle at bs 2 verifies 6 tokens, the 5-step run's width at bs 1, and its
    interval had been that point's, zero-wide, labelled "acceptance sampling")."""
    a = _stock_log(tmp_path / "s1.log", 1, 1.7, 95.0)
    b = _stock_log(tmp_path / "s5.log", 5, 2.1, 71.3)
    doc = advise_json(a, b, "--baseline-tok-s", "1:88.8", "2:170", "--batch-sizes", 1, 2)
    at = {b_["bs"]: b_ for b_ in doc["per_batch_size"]}
    for c in at[2]["candidates"]:
        if c["steps"] > 0:
            lo, hi = c["tok_s_95"]
            assert c["interval_source"].endswith("carried over from bs 1") and hi - lo > 0.001 * c["predicted_tok_s"], c
    assert not any("carried over" in (c["interval_source"] or "") for c in at[1]["candidates"])


def _db_line(stamp: str, bs: int, token: int, tok_s: float, accept_len=None, accept_rate=None,
             usage: str = "0.00") -> str:
    """One stock ``Decode batch`` line as SGLang 0.5.23 prints it (TP rank 0), with the speculative
    fields where ``accept_len`` is given."""
    spec = "" if accept_len is None else f"accept len: {accept_len:.2f}, accept rate: {accept_rate:.2f}, "
    return (f"[{stamp} TP0] Decode batch, #running-req: {bs}, #token: {token}, token usage: {usage}, {spec}"
            f"cuda graph: True, gen throughput (token/s): {tok_s:.2f}, #queue-req: 0")


def _nospec_log(path: Path, tok_s: float = 88.0, lines_n: int = 40, seed: int = 7, spread: float = 0.02,
                bs=lambda rng: 1) -> Path:
    """A no-spec server's stock log: ``lines_n`` Decode batch lines at ``tok_s`` (+-``spread``), each
    at the batch size ``bs(rng)`` names."""
    rng = random.Random(seed)
    lines = ["[2026-12-01 09:00:00] server_args={'model_path': 'm', 'speculative_algorithm': None, "
             "'speculative_num_steps': None, 'tp_size': 8}"]
    for i in range(lines_n):
        b = bs(rng)
        lines.append(_db_line(f"2026-12-01 09:01:{i % 60:02d}", b, 100 + 40 * i,
                              tok_s * rng.uniform(1 - spread, 1 + spread)))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_one_run_without_a_baseline_grows_flat_to_proportional_on_both_sides(tmp_path):
    """One 3-step run and no baseline: the verify's growth with the width is unknown, flat to
    proportional, as the note says. Below the measured width the hypotheses took that range, but
    beyond it their central curve was proportional growth itself (11.33 ms at 4 tokens, 14.17 at 5,
    31.17 at 11), the upper extreme: a nearly flat verify's 4 to 10 steps fell outside their
    intervals (helper 35: 222.7 tok/s true at 4 steps against 170.5-220.6, 195.2 at 10 against
    73.2-183.8)."""
    w = aw.World(kind="dense", bs=1, p=(0.8, 0.75, 0.7, 0.65, 0.6, 0.55, 0.5, 0.45, 0.4, 0.35, 0.3, 0.25),
                 decode_ms=10.0, verify_overhead=0.1, fixed_ms=1.0, slope_ms=0.01, draft_step_ms=0.5, name="flat")
    log = _write_lines(tmp_path / "s3.log", w.log_lines(3, None, random.Random(3)))
    doc = advise_json(log)
    assert "its growth with the width is assumed, flat to proportional" in json.dumps(doc)
    v3 = cand(doc, 3)["cycle_phases_ms"]["verify_ms"]
    for s in (4, 5, 7, 10):
        c = cand(doc, s)
        ratio = c["cycle_phases_ms"]["verify_ms"] / v3
        assert 1.0 < ratio < ((s + 1) / 4) ** 0.75, (s, ratio)         # between flat and proportional
        lo, hi = c["tok_s_95"]
        assert lo <= w.true_tok_s(s) <= hi, (s, w.true_tok_s(s), lo, hi)
    # below the measured width the same law (the same per-hypothesis exponent)
    assert 0.5 < cand(doc, 1)["cycle_phases_ms"]["verify_ms"] / v3 < 1.0
    # an exactly flat verify, the common case at bs 1, is inside: flat itself had been just outside the
    # 95% interval (beta uniform on 0-1; helper 37: 4-10 steps missed by up to 2%)
    flat = aw.World(kind="dense", bs=1, p=tuple(round(0.8 * 0.95 ** j, 4) for j in range(12)), decode_ms=9.0,
                    verify_overhead=0.1, fixed_ms=1.0, slope_ms=0.0, extend_fixed_ms=0.4, extend_slope_ms=0.01,
                    draft_step_ms=0.6, other_ms=0.3, gap_ms=0.05, noise=0.03, name="flat0")
    doc = advise_json(_write_lines(tmp_path / "flat.log", flat.log_lines(3, 8000, random.Random(1))))
    for s in range(1, 11):
        lo, hi = cand(doc, s)["tok_s_95"]
        assert lo <= flat.true_tok_s(s) <= hi, (s, flat.true_tok_s(s), lo, hi)


def test_stock_lines_without_accept_lengths_from_a_speculative_start_are_no_baseline(tmp_path):
    """A start whose server_args= line names EAGLE3 but whose Decode batch lines print no accept
    length (another SGLang version) had been read as a no-spec server: its speculative throughput
    became the baseline (helper 35). It is neither a baseline nor a run; a start that names no
    algorithm still gives its baseline."""
    w = dataclasses.replace(_sweep_world(), bs=1, name="one")
    five = _write_lines(tmp_path / "s5.log", w.log_lines(5, 600, random.Random(5)))
    nospec = _nospec_log(tmp_path / "nospec.log", tok_s=88.0)
    spec = tmp_path / "spec-noacc.log"
    spec.write_text(nospec.read_text().replace("'speculative_algorithm': None, 'speculative_num_steps': None",
                                               "'speculative_algorithm': 'EAGLE3', 'speculative_num_steps': 3"))
    doc = advise_json(five, spec)
    assert doc["inputs"]["baseline_tok_s"] == {}
    assert any("without accept lengths, but its server_args= line names speculative_algorithm EAGLE3" in n
               and "not used" in n for n in doc["inputs"]["notes"])
    doc = advise_json(five, nospec)
    assert doc["inputs"]["baseline_tok_s"]["1"] == pytest.approx(88.0, rel=0.01)


def test_a_measurement_that_wins_is_what_the_decision_weighs(tmp_path):
    """A plugin run at 3 steps and a stock run at 4 that measured a quarter slower. The measured 3
    steps wins; its regret had still been reckoned against the model's 4 steps (6.8%, "not settled",
    "no single further run is expected to settle it" with every candidate measured and next_run
    null), and the why-line quoted the model's case for a step more (helper 35). The stock run's
    cycle now sets the verify at its width, so the model itself puts 4 steps below 3; the weighing of
    measurements that win over the model is checked on an ensemble that still ranks 4 first."""
    w = dataclasses.replace(_sweep_world(), bs=1, name="one")
    three = _write_lines(tmp_path / "s3.log", w.log_lines(3, 1500, random.Random(3)))
    measured3 = advise_json(three)["inputs"]["runs"][0]["tok_s"]
    slow4 = _stock_log(tmp_path / "s4.log", 4, w.accept_len(4), 0.75 * measured3)
    doc = advise_json(three, slow4, "--baseline-tok-s", w.true_tok_s(0), "--steps-candidates", 0, 3, 4)
    assert cand(doc, 4)["predicted_tok_s"] == pytest.approx(cand(doc, 4)["measured_tok_s"], rel=0.03)
    rec = doc["recommended"]
    assert rec["steps"] == 3 and doc["settled"] is True and doc["next_run"] is None and doc["regret_95"] <= 0.02
    assert "a step more" in rec["reason"] or "measured" in rec["reason"]
    # the weighing itself: an ensemble whose 4 steps lie above 3, with the measurements swapped in
    rng = np.random.default_rng(1)
    tok = np.column_stack([np.full(500, 100.0), 110.0 + rng.normal(0, 1, 500)])
    ens = unc.Ensemble(bs=1, steps=[3, 4], tok_s=tok, accept_len=np.ones_like(tok), phases={}, depth=3,
                       sources=[None, None])
    assert unc.decide(ens).pick == 4
    dec = unc.decide(unc.with_measurements(ens, {3: (100.0, 0.5), 4: (75.0, 0.5)}), measured=[3, 4], pick=3)
    assert (dec.pick, dec.settled, dec.next_run) == (3, True, None) and dec.regret_95 <= 0.02


def test_stock_runs_at_one_depth_count_together_with_their_spread(tmp_path):
    """Two stock 5-step logs, 30% above and 20% below what the depth makes, beside a plugin 3-step
    run (helper 37): the faster one alone had won over the model and settled 5 steps, while the
    table's measured column showed whichever log came last. Together they are one measurement, their
    inverse-variance mean with an error as wide as they disagree: in either order the same figure,
    and no settled 5 steps on it."""
    w = dataclasses.replace(_sweep_world(), bs=1, name="one")
    three = _write_lines(tmp_path / "s3.log", w.log_lines(3, 1500, random.Random(3)))
    hi = _stock_log(tmp_path / "s5hi.log", 5, w.accept_len(5), 1.3 * w.true_tok_s(5))
    lo = _stock_log(tmp_path / "s5lo.log", 5, w.accept_len(5), 0.8 * w.true_tok_s(5))
    one = advise_json(three, hi, lo, "--baseline-tok-s", w.true_tok_s(0))
    other = advise_json(three, lo, hi, "--baseline-tok-s", w.true_tok_s(0))
    m1, m2 = cand(one, 5)["measured_tok_s"], cand(other, 5)["measured_tok_s"]
    assert m1 == pytest.approx(m2) and 0.8 * w.true_tok_s(5) < m1 < 1.3 * w.true_tok_s(5)
    for doc in (one, other):
        assert not (doc["recommended"]["steps"] == 5 and doc["settled"])
        assert "the measurement wins" not in doc["recommended"]["reason"]


def test_pooled_runs_and_unreachable_means_in_the_decision(tmp_path):
    """From helper 38. (1) Runs at one depth pool on their relative errors: two equally noisy runs at
    200 and 160 tok/s read 180, not 175.6 (weighed in tok/s, the slower counted more). (2) The
    measured column pools the runs that have a tok/s whatever the order (one without had blanked it).
    (3) A mean-only run the counted positions cannot give (named "another workload or draft") no
    longer overrules the model: a 64-step mean of 65.0 had won by 142 standard errors and settled
    64 steps."""
    from sglang_eagle_cycle import advise as adv

    def run(tok, src):
        return adv.Run(source=src, bs=1, steps=3, cycles=1000, accept_len=3.0, tok_s=tok,
                       phases={"total_ms": 1000.0 * 3.0 / tok}, total_sd=0.05 * 1000.0 * 3.0 / tok,
                       counts=[(900, 1000), (800, 900), (700, 800)])
    a, b = run(200.0, "a"), run(160.0, "b")
    assert adv.run_rel_se(a) == pytest.approx(adv.run_rel_se(b))
    assert adv.pooled_runs([a, b])[0].tok_s == pytest.approx(180.0)
    two = _seed_2_step_log(tmp_path / "two.log")
    phases = {k: v["mean"] for k, v in SEED_5["phases"].items()}
    with_tok = _write(tmp_path / "p5a.json", _doc(_group(5, phases, 2.1, 71.3)))
    no_tok = _write(tmp_path / "p5none.json", _doc(dict(_group(5, phases, 2.1, 71.3), tok_s=None)))
    for order in ((with_tok, no_tok), (no_tok, with_tok)):
        doc = advise_json(two, *order, "--baseline-tok-s", SEED_BASELINE)
        assert cand(doc, 5)["measured_tok_s"] == pytest.approx(71.3)
    odd = _write(tmp_path / "odd.json", _doc(_group(5, phases, 5.9, 200.3)))
    doc = advise_json(two, odd, "--baseline-tok-s", SEED_BASELINE)
    assert any("beyond what the counted positions allow" in n and "nor to overrule the model" in n
               for n in doc["inputs"]["notes"])
    assert doc["recommended"]["steps"] != 5 and "the measurement wins" not in doc["recommended"]["reason"]


def test_a_line_that_mentions_server_args_starts_no_server(tmp_path):
    """Only SGLang's start-up line (server_args=ServerArgs(...) or server_args={...}) opens a server
    start: a later warning that mentions server_args= inside a speculative start had opened a
    "no-spec" part, whose speculative throughput became the baseline (helper 38)."""
    nospec = _nospec_log(tmp_path / "nospec.log", tok_s=120.0)
    lines = nospec.read_text().replace("'speculative_algorithm': None, 'speculative_num_steps': None",
                                       "'speculative_algorithm': 'EAGLE3', 'speculative_num_steps': 3").splitlines()
    lines.insert(3, "[2026-12-01 09:01:02] WARNING: overriding server_args=None for the tokenizer")
    spec = _write_lines(tmp_path / "spec-mention.log", lines)
    w = dataclasses.replace(_sweep_world(), bs=1, name="one")
    five = _write_lines(tmp_path / "s5.log", w.log_lines(5, 600, random.Random(5)))
    doc = advise_json(five, spec)
    assert doc["inputs"]["baseline_tok_s"] == {}
    from sglang_eagle_cycle.decode_batch import is_startup_line
    from sglang_eagle_cycle.errors import UsageError
    from sglang_eagle_cycle.report import inspect_paths

    assert is_startup_line(lines[0]) and not is_startup_line(lines[3])
    with pytest.raises(UsageError, match="names speculative_algorithm EAGLE3"):
        inspect_paths([five], baseline=spec)


def test_each_server_start_of_an_appended_log_counts_for_what_it_is(tmp_path):
    """One log over four starts (from helper 25): a no-spec start gives the baseline, a start whose
    server_args line names a depth past 64, or no drafting algorithm, is left out with the reason, a
    start with [eagle-cycle] lines is that run, a stock start is its own run: the same advice as the
    usable files given apart. The no-spec start and the stock start beside plugin lines had been
    dropped without a word, and a depth of 999999 hung."""
    a = _stock_log(tmp_path / "s5.log", 5, 2.1, 71.3)
    n = _nospec_log(tmp_path / "nospec.log")
    w = _sweep_world()
    ours = _write_lines(tmp_path / "ours.log", ["[2026-12-01 11:00:00] server_args={'speculative_algorithm': 'EAGLE3', "
                                                "'speculative_num_steps': 3}"] + w.log_lines(3, 300, random.Random(3)))
    huge = a.read_text().replace("'speculative_num_steps': 5", "'speculative_num_steps': 999999")
    ngram = a.read_text().replace("'speculative_algorithm': 'EAGLE3'", "'speculative_algorithm': 'NGRAM'")
    both = tmp_path / "server.log"
    both.write_text(n.read_text() + huge + a.read_text() + ngram + ours.read_text())
    doc = advise_json(both)
    apart = advise_json(n, a, ours)
    assert doc["inputs"]["runs"] and {r["steps"] for r in doc["inputs"]["runs"]} == {3, 5}
    assert [c["predicted_tok_s"] for c in doc["candidates"]] == [c["predicted_tok_s"] for c in apart["candidates"]]
    # the no-spec start's baseline, at its bs 1 (the top level is at the plugin run's batch size:
    # stock runs beside phase-timed ones shape no cycle time)
    one = next(b for b in doc["per_batch_size"] if b["bs"] == 1)
    assert next(c for c in one["candidates"] if c["steps"] == 0)["predicted_tok_s"] == pytest.approx(88.0, rel=0.01)
    assert doc["recommended"]["bs"] == w.bs
    notes = " | ".join(doc["inputs"]["notes"])
    assert "speculative_num_steps 999999, outside 1-64: not used" in notes
    assert "speculative_algorithm NGRAM, not a drafting one" in notes
    # a no-spec log on stdin gives its baseline too (it had been read as nothing)
    rc, out, err = 0, "", ""
    with open(n) as fh:
        stdin, sys.stdin = sys.stdin, fh
        try:
            rc, out, err = advise(a, "-", "--json")
        finally:
            sys.stdin = stdin
    assert rc == 0 and cand(json.loads(out), 0)["predicted_tok_s"] == pytest.approx(88.0, rel=0.01)


def test_stock_intervals_outside_the_possible_are_left_out_and_counted(tmp_path):
    """An accept length above steps + 1 and a throughput past 1e8 tok/s are left out of a stock run,
    the note counts them; a run all of whose intervals are left out says why in the one-line error;
    a copied stock log counts once (from helper 25)."""
    a = _stock_log(tmp_path / "s3.log", 3, 1.95, 90.0)
    lines = a.read_text().splitlines()
    bad_acc = lines[3].replace("accept len: ", "accept len: 9").replace("accept len: 91.", "accept len: 9.")
    bad_tok = lines[4].split("gen throughput (token/s): ")[0] + "gen throughput (token/s): 1000000000000.00, #queue-req: 0"
    dirty = tmp_path / "dirty.log"
    dirty.write_text("\n".join(lines + [bad_acc, bad_tok]) + "\n")
    clean_run = advise_json(a, "--baseline-tok-s", 80)["inputs"]["runs"][0]
    doc = advise_json(dirty, "--baseline-tok-s", 80)
    run = doc["inputs"]["runs"][0]
    assert run["accept_len"] == pytest.approx(clean_run["accept_len"]) and run["tok_s"] == pytest.approx(clean_run["tok_s"])
    note = next(n for n in doc["inputs"]["notes"] if "left out:" in n)
    assert "1 with gen throughput outside 0.01-1e+08 tok/s" in note and "1 with accept len below 1 or above 4" in note
    allbad = tmp_path / "allbad.log"
    allbad.write_text("\n".join(lines[:1] + [ln.replace("accept len: ", "accept len: 9") for ln in lines[1:]]) + "\n")
    rc, _, err = advise(allbad, "--baseline-tok-s", 80)
    assert rc == 2 and err.count("\n") == 1 and "every interval left out" in err and "accept len below 1 or above 4" in err
    copy = tmp_path / "copy.log"
    copy.write_text(a.read_text())
    doc = advise_json(a, copy, "--baseline-tok-s", 80)
    assert len(doc["inputs"]["runs"]) == 1 and any("holds the same run as" in n for n in doc["inputs"]["notes"])


def test_a_width_no_run_measured_gets_its_own_kernel_time_in_the_interval_only(tmp_path):
    """Runs at 1 and 3 steps (bs 1: 2 and 4 verified tokens) with one verify time at both widths,
    the acceptance counted to position 3: every smooth curve through them gives the 2-step cycle
    exactly, so the 2-step interval had been acceptance sampling alone (+-1%), and a verify at 3
    tokens whose kernels run 3% slower than at 2 and 4 (a captured graph of its own) fell outside
    it. The interval now holds it; the measured depths' intervals and the decision do not move."""
    def grp(steps, draft, counts):
        hist = None
        reached = [n for _, n in counts]
        acc = [a for a, _ in counts]
        mean = 1.0 + sum(acc) / reached[0]
        total = draft + 20.0 + 0.5 + 0.3
        return {"bs": 1, "steps": steps, "topk": 1, "draft_tokens": steps + 1, "cycles": reached[0],
                "phases": {"draft_ms": {"mean": draft if steps > 1 else None}, "verify_ms": {"mean": 20.0},
                           "extend_ms": {"mean": 0.5}, "other_ms": {"mean": 0.3}, "total_ms": {"mean": total}},
                "accept_len_mean": mean, "accept_hist": hist, "tok_s": 1000.0 * mean / total,
                "per_position_acceptance": [{"j": j + 1, "p": a / n, "accepted": a, "reached": n}
                                            for j, (a, n) in enumerate(counts)]}
    n = 40000
    g1 = grp(1, 0.0, [(int(0.7 * n), n)])
    g3 = grp(3, 1.0, [(int(0.7 * n), n), (int(0.42 * n), int(0.7 * n)), (int(0.21 * n), int(0.42 * n))])
    doc = advise_json(_write(tmp_path / "runs.json", _doc(g1, g3)), "--baseline-tok-s", 60.0,
                      "--steps-candidates", 0, 1, 2, 3)
    c2 = cand(doc, 2)
    e2 = 1.0 + 0.7 + 0.42
    smooth = 1000.0 * e2 / (0.5 + 20.0 + 0.5 + 0.3)     # one draft forward of 0.5 ms
    slow, fast = 1000.0 * e2 / (21.3 + 0.6), 1000.0 * e2 / (21.3 - 0.6)
    lo, hi = c2["tok_s_95"]
    assert c2["predicted_tok_s"] == pytest.approx(smooth, rel=0.01)
    assert lo <= slow and hi >= fast and (hi - lo) / c2["predicted_tok_s"] < 0.12
    assert c2["interval_source"].startswith("kernel time at a width no run measured")
    for s in (1, 3):   # measured widths: sampling alone
        lo, hi = cand(doc, s)["tok_s_95"]
        assert (hi - lo) / cand(doc, s)["predicted_tok_s"] < 0.02
    assert doc["recommended"]["steps"] == 3    # 2.33 tokens in 22.3 ms against 2.12 in 21.3
    # a whole-cycle run at 2 steps (no phase split, as a stock log gives) measured that width: no
    # kernel term there; its cycle, 3% slower than the phase curves said, sets the verify at that
    # width (its cycle less the other phases), so the interval holds it and no poor fit is said
    whole = {"bs": 1, "steps": 2, "topk": 1, "draft_tokens": 3, "cycles": 1000,
             "phases": {"total_ms": {"mean": 21.3 + 0.6}}, "accept_len_mean": e2, "accept_hist": None,
             "per_position_acceptance": None, "tok_s": slow}
    doc = advise_json(_write(tmp_path / "runs3.json", _doc(g1, g3, whole)), "--baseline-tok-s", 60.0,
                      "--steps-candidates", 0, 1, 2, 3)
    lo, hi = cand(doc, 2)["tok_s_95"]
    assert not cand(doc, 2)["interval_source"].startswith("kernel time") and lo <= slow <= hi
    assert cand(doc, 2)["predicted_tok_s"] == pytest.approx(slow, rel=0.01)
    assert not any("fits poorly" in n for n in doc["inputs"]["notes"]), doc["inputs"]["notes"]
    # where that term dominates the pick's interval, the decision's line says the regret leaves it out
    g3 = grp(3, 1.0, [(int(0.7 * n), n), (int(0.42 * n), int(0.7 * n)), (int(0.042 * n), int(0.42 * n))])
    rc, out, err = advise(_write(tmp_path / "runs2.json", _doc(g1, g3)), "--baseline-tok-s", 60.0,
                          "--steps-candidates", 0, 1, 2, 3)
    why = " ".join(out.split())
    assert rc == 0 and "recommended at bs 1: 2 steps" in why, out + err
    assert "mostly kernel time at a width no run measured" in why
    assert "the regret leaves out the kernel time that widens its interval" in why


def test_a_zero_wide_interval_at_a_run_without_noise_says_so():
    """A published table's rows carry no noise estimate: the interval at a measured depth is the
    point itself widened to the 1% such a run is taken as, and it had been labelled "acceptance
    sampling" (helper 26)."""
    doc = advise_json("--table", REPO / "data" / "benchmarks" / "specbundle_subset.json", "--model",
                      "Llama-3.3-70B-Instruct", "--benchmark", "gsm8k", "--draft", "Specforge", "--fit", "3,1,4", "5,1,6")
    rows = {r["steps"]: r for r in doc["inputs"]["runs"]}
    for s in (3, 5):
        c = cand(doc, s)
        assert c["interval_source"] == "none: its run has no noise estimate (taken as 1% wide)"
        # as wide as the 1% the poor-fit check allows, so it holds the row's own figure (it had been
        # the point itself, beside a measurement 0.3% off: helper 39)
        assert c["tok_s_95"] == pytest.approx([0.99 * c["predicted_tok_s"], 1.01 * c["predicted_tok_s"]], abs=0.02)
        assert c["tok_s_95"][0] <= rows[s]["tok_s"] <= c["tok_s_95"][1]
    assert cand(doc, 4)["tok_s_95"][1] - cand(doc, 4)["tok_s_95"][0] > 0.01 * cand(doc, 4)["predicted_tok_s"]
    assert not cand(doc, 4)["interval_source"].startswith("none:")
    # the why-line of a pick measured without noise says so, not "mostly none: ..." (helper 55)
    doc = advise_json("--table", REPO / "data" / "benchmarks" / "specbundle_subset.json", "--model",
                      "Llama-3.3-70B-Instruct", "--benchmark", "gsm8k", "--draft", "Specforge", "--fit", "3,1,4",
                      "5,1,6", "--steps-candidates", "3", "5")
    why = doc["recommended"]["reason"]
    assert doc["recommended"]["steps"] in (3, 5) and "mostly none" not in why
    assert "its run has no noise estimate (taken as 1% wide)" in why


def test_a_bucket_note_names_the_size_its_batch_sizes_pad_to():
    """bs 10 and 30 pad to 32 on a capture list 1 2 4 8 32 64, whose lowest key used is written as
    1: the note had said "pad to 1"."""
    from sglang_eagle_cycle.advise import _pads

    graph = [1, 2, 4, 8, 32, 64]
    assert _pads([10, 30], 1, graph) == "pad to 32 (config key 1)"
    assert _pads([10, 30], 32, graph) == "pad to 32"
    assert _pads([3, 4], 1, graph) == "pad to 4 (config key 1)"
    assert _pads([1, 3], 1, graph) == "share config key 1 (they pad to 1, 4)"


def test_poor_fit_notes_allow_for_the_number_of_runs_checked():
    """Over a serving log's 96-150 runs, 1.96 standard errors raised 2-6 "fits poorly" notes by
    chance where the generator was the model itself (helper 30)."""
    from sglang_eagle_cycle.advise import fit_z

    assert [round(fit_z(n), 2) for n in (0, 1, 2, 150)] == [1.96, 1.96, 2.24, 3.59]


def test_a_carried_no_spec_step_is_capped_by_the_cycle_not_the_verify_span():
    """Device-span lines time the verify's kernels alone (6.06 ms here); host preparation and the
    gap (1.6 ms) lie outside it, and the no-spec step holds its own host time. Capped at the span,
    the step carried to bs 1 from baselines at bs 8 and 16 (8.0 ms) had become 6.06 ms, the no-spec
    165 tok/s, and speculation off where 2 steps were right (helper 31)."""
    import tempfile

    phases = {"draft_prep_ms": 0.8, "draft_ms": 0.5, "verify_ms": 6.06, "verify_fwd_ms": 6.0, "extend_ms": 0.3,
              "other_ms": 0.2, "gap_ms": 0.8}
    phases["total_ms"] = sum(v for k, v in phases.items() if k not in ("gap_ms", "verify_fwd_ms"))
    g = _group(2, phases, 2.4, 1000.0 * 2.4 / (phases["total_ms"] + 0.8))
    g["device_spans"] = True
    g["phases"]["total_ms"]["sd"] = 0.2
    with tempfile.TemporaryDirectory() as tmp:
        doc = advise_json(_write(Path(tmp) / "spans.json", _doc(g)), "--baseline-tok-s", "8:973", "16:1890")
    off = cand(doc, 0)
    assert 7.5 < off["predicted_cycle_ms"] <= 8.66 + 1e-6, off   # the hypotheses about 8.0 ms, under the 8.66 ms period
    assert doc["recommended"]["speculation"] == "on"


def test_a_baseline_from_stock_lines_that_swing_twofold_is_flagged(tmp_path):
    """Bursty clients leave idle time in some stock intervals (helper 30: a baseline 210-239 tok/s
    against a true 1,434, with no word of it): advise warns that the baseline reads low."""
    spec = _stock_log(tmp_path / "s3.log", 3, 1.95, 90.0)
    steady = advise_json(spec, _nospec_log(tmp_path / "steady.log", 88.0))
    assert not any("warning: stock gen throughput" in n for n in steady["inputs"]["notes"])
    bursty = advise_json(spec, _nospec_log(tmp_path / "bursty.log", 88.0, spread=0.6))
    assert any("warning: stock gen throughput at bs 1 (no-spec) spans" in n and "its baseline reads low" in n
               for n in bursty["inputs"]["notes"])
    # every third speculative line garbled to 5,000 tok/s: the run reads high, and the warning said "low"
    # (helper 79: 318 tok/s against a true 217)
    garbled = tmp_path / "garbled.log"
    lines = spec.read_text().splitlines()
    lines = [re.sub(r"gen throughput \(token/s\): [\d.]+", "gen throughput (token/s): 5000.00", ln)
             if "Decode batch" in ln and i % 3 == 0 else ln for i, ln in enumerate(lines)]
    garbled.write_text("\n".join(lines) + "\n")
    doc = advise_json(garbled, _nospec_log(tmp_path / "steady.log", 88.0))
    (warn,) = [n for n in doc["inputs"]["notes"] if "warning: stock gen throughput over accept length" in n]
    assert "its run reads high" in warn and "far faster than their median" in warn


def test_a_no_spec_baseline_is_its_tokens_over_its_seconds(tmp_path):
    """A no-spec stock log's baseline is the throughput over its intervals together, as a run's is
    (each interval the same decode forwards, so the same tokens, in one over its rate): one line at
    2,000 tok/s among thirty at 297 had put the baseline at their plain mean, 351.9 tok/s, 15% high,
    and every speedup beside it low (helper 49); tokens over seconds it is 305.4."""
    spec = _stock_log(tmp_path / "s3.log", 3, 1.95, 90.0)
    base = _nospec_log(tmp_path / "nospec.log", 297.0, lines_n=31, spread=0.0)
    lines = base.read_text().splitlines()
    lines[16] = re.sub(r"gen throughput \(token/s\): [\d.]+", "gen throughput (token/s): 2000.00", lines[16])
    base.write_text("\n".join(lines) + "\n")
    doc = advise_json(spec, base)
    assert doc["inputs"]["baseline_tok_s"]["1"] == pytest.approx(31 / (30 / 297.0 + 1 / 2000.0), rel=1e-4)
    assert any("baseline tok/s by batch size 1: 305.4" in n for n in doc["inputs"]["notes"])


def test_an_inspect_document_of_a_no_spec_log_gives_the_logs_baseline_at_its_batch_size(tmp_path):
    """``eagle-cycle inspect nospec.log --json`` given to advise had given its pooled
    ``gen_tok_s_mean`` as the baseline, at the runs' batch size: the ramp's batch sizes and the
    idle first line went into it (203.1 tok/s where the log itself gives 221.9 at bs 4), and a
    no-spec server measured at bs 1 was put at the runs' bs 4 (helper 49). Now the document's no-spec
    by_bs rows are read as the log is: per batch size, a ramp's left out."""
    rng = random.Random(3)
    rows = [(1, 0.52), (1, 55.0), (2, 110.0), (3, 165.0)] + [(4, 221.7 * rng.uniform(0.98, 1.02)) for _ in range(40)] \
        + [(3, 170.0), (2, 112.0), (1, 56.0)]
    base = _nospec_log(tmp_path / "ramp.log", lines_n=0)
    base.write_text(base.read_text() + "".join(
        f"[2026-12-01 09:{1 + i // 60:02d}:{i % 60:02d} TP0] Decode batch, #running-req: {bs}, #token: {100 + 40 * i}, "
        f"token usage: 0.00, cuda graph: True, gen throughput (token/s): {tok:.2f}, #queue-req: 0\n"
        for i, (bs, tok) in enumerate(rows)))
    rc, out, err = _inspect(base)
    assert rc == 0, err
    doc_path = tmp_path / "ramp.json"
    doc_path.write_text(out)
    run = tmp_path / "run.json"
    run.write_text(json.dumps(_doc(_ramp_group(4, 600))))
    from_log = advise_json(run, base)["inputs"]["baseline_tok_s"]
    from_doc = advise_json(run, doc_path)["inputs"]["baseline_tok_s"]
    assert list(from_log) == list(from_doc) == ["4"] and from_doc["4"] == pytest.approx(from_log["4"], rel=1e-6)
    # a no-spec server at bs 1 is a baseline at bs 1, not at the runs' bs 4
    one = _nospec_log(tmp_path / "bs1.log", 88.0)
    rc, out, err = _inspect(one)
    assert rc == 0, err
    (tmp_path / "bs1.json").write_text(out)
    doc = advise_json(run, tmp_path / "bs1.json")
    assert sorted(doc["inputs"]["baseline_tok_s"]) == ["1"]
    assert doc["inputs"]["baseline_tok_s"]["1"] == pytest.approx(88.0, rel=0.01)


def test_no_spec_lines_beside_an_inspect_documents_cycle_groups_are_named(tmp_path):
    """An inspect document of a log appended to across a speculative and a no-spec start holds cycle
    groups and no-spec Decode batch rows; the log itself gives the no-spec start's baseline, the
    document cannot say which start the rows are. They had been dropped without a word, and advise
    said only "no baseline" (helper 49)."""
    doc = _doc(SEED_5)
    doc["decode_batch"] = {"intervals": 40, "accept_len_mean": None, "gen_tok_s_mean": 88.0,
                           "by_bs": [{"bs": 1, "speculative": False, "intervals": 40, "accept_len_mean": None,
                                      "gen_tok_s": 88.0}]}
    path = tmp_path / "appended.json"
    path.write_text(json.dumps(doc))
    notes = advise_json(path)["inputs"]["notes"]
    assert any("Decode batch lines without speculation beside its cycle groups: not taken as a baseline" in n
               for n in notes)
    # a document of the speculative start alone says nothing of it
    del doc["decode_batch"]
    path.write_text(json.dumps(doc))
    assert not any("without speculation beside" in n for n in advise_json(path)["inputs"]["notes"])


def test_a_baseline_slower_than_a_measured_cycle_is_named():
    """A no-spec step cannot outlast a speculative cycle at the same batch size (that cycle holds a
    verify forward over more tokens): a 140 tok/s baseline beside a 3-step run cycling in 6.7 ms at
    bs 1 is another setup's, or a client's with its prefill, and had passed without a word (helper
    32). The seed's baseline is not."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        log = _stock_log(Path(tmp) / "s3.log", 3, 2.0, 297.0)
        notes = " | ".join(advise_json(log, "--baseline-tok-s", 140)["inputs"]["notes"])
        assert "bs 1: the no-spec baseline (140.0 tok/s, 7.14 ms a step) is slower than a speculative cycle" in notes
        notes = " | ".join(advise_json(log, "--baseline-tok-s", 160)["inputs"]["notes"])
        assert "is slower than a speculative cycle" not in notes


def test_a_baseline_slower_than_the_measured_cycles_bounds_no_verify(tmp_path):
    """A no-spec step slower than every measured cycle (30 tok/s at bs 1 beside 3- and 5-step runs
    cycling in about 23 ms) is another setup's: it stays the speculation-off figure but no longer
    floors the verify. It had held every depth's cycle at its 33.3 ms, predicted the measured
    depths 28% low, said the model fits poorly and recommended 10 steps, the deepest candidate
    (helper 98). With it left out, the predictions hold the measurements and the pick is a depth
    near the measured ones, not the edge of the candidates."""
    from cyclegen import generate, log_lines

    p = [0.8, 0.65, 0.5, 0.35, 0.25]
    logs = []
    for steps, seed in ((3, 11), (5, 12)):
        path = tmp_path / f"s{steps}.log"
        path.write_text("\n".join(log_lines(generate(random.Random(seed), bs=1, steps=steps, cycles=600,
                                                      p=p[:steps], verify_ms=20.0).records)) + "\n")
        logs.append(path)
    doc = advise_json(*logs, "--baseline-tok-s", 30)
    notes = " | ".join(doc["inputs"]["notes"])
    assert "bs 1: the no-spec baseline (30.0 tok/s, 33.33 ms a step) is slower than a speculative cycle" in notes
    assert "the cost curves leave it out" in notes
    assert "fits poorly" not in notes
    by = {c["steps"]: c for c in doc["candidates"]}
    for run in doc["inputs"]["runs"]:
        lo, hi = by[run["steps"]]["tok_s_95"]
        assert lo <= run["tok_s"] <= hi, (run["steps"], run["tok_s"], lo, hi)
        assert by[run["steps"]]["predicted_cycle_ms"] < 30.0
    assert 3 <= doc["recommended"]["steps"] <= 6
    assert by[0]["predicted_tok_s"] == pytest.approx(30.0)
    # a consistent baseline still anchors the verify: the same runs with 45 tok/s (a 22.2 ms step,
    # below the cycles) name nothing
    notes = " | ".join(advise_json(*logs, "--baseline-tok-s", 45)["inputs"]["notes"])
    assert "slower than a speculative cycle" not in notes


def test_the_unsettled_line_names_the_rival_and_a_third_run_apart():
    """The line had named the pick and the next run as the two in contention; where the run that
    tells them apart best is a third depth, it named one predicted 16% below the pick (helper 32)."""
    from types import SimpleNamespace

    from rich.console import Console

    from sglang_eagle_cycle.commands.advise_cmd import _print_unsettled

    def line(next_run, toks):
        dec = unc.Decision(pick=2, regret_95=0.09, settled=False, next_run=next_run, regret_95_after=0.02)
        b = SimpleNamespace(bs=38, decision=dec, candidates=[SimpleNamespace(steps=s, tok_s=t) for s, t in toks])
        out = io.StringIO()
        _print_unsettled(b, Console(file=out, width=400), measured=1)
        return out.getvalue().strip()

    toks = [(0, 2500.0), (1, 4299.0), (2, 5133.0), (3, 5120.0)]
    assert line(1, toks).startswith("not settled between 2 and 3 steps (a run at 1 step tells them apart best) at bs "
                                    "38: run `--speculative-num-steps 1 ")
    assert line(3, toks).startswith("not settled between 2 and 3 steps at bs 38: run `--speculative-num-steps 3 ")
    off = [(0, 5200.0), (1, 4299.0), (2, 5133.0)]
    assert line(1, off).startswith("not settled between speculation off and 2 steps (a run at 1 step tells them apart")


def test_a_serving_log_of_many_batch_sizes_prints_one_table_and_a_row_for_each_other(tmp_path):
    """A serving log's ramp and drain leave runs at dozens of batch sizes, and the human output had
    printed a full per-depth table for each (1,446 lines for 32; helper 32). Past 8 batch sizes the
    top-level one keeps its table and the others a summary row each; --batch-sizes or --json give
    every table."""
    groups = [_ramp_group(b, 40) for b in range(1, 13)] + [_ramp_group(16, 2000)]
    path = _write(tmp_path / "serving.json", _doc(*groups))
    rc, out, _ = advise(path)
    assert rc == 0 and out.count("predicted per depth") == 1 and "bs 16: predicted per depth" in out
    assert "the other 12 batch sizes (a row each" in out
    rc, out, _ = advise(path, "--batch-sizes", *range(1, 13), 16)
    assert rc == 0 and out.count("predicted per depth") == 13


def test_pooled_stock_counts_agree_with_the_runs(tmp_path):
    """After a plateau is pooled its intervals are filtered again (idle against the plateau's
    median); the note's counts had come from before, and named as left out an interval the pooled
    run used (helper 33)."""
    rows = [(28 if i % 2 else 32, 2.4, (1600.0 if i % 2 else 700.0)) for i in range(40)]
    rows[5] = (28, 2.4, 1600.0 / 5.5)      # 5.5x its batch size's median time; pooled, about 3.5x
    doc = advise_json(_stock_rows_log(tmp_path / "plateau.log", 3, rows))
    note = next(n for n in doc["inputs"]["notes"] if "stock Decode batch lines at 3 steps" in n)
    used = sum(int(re.search(r"(\d+) intervals\)$", r["source"]).group(1)) for r in doc["inputs"]["runs"])
    said = int(re.search(r"\): (\d+) intervals", note).group(1))
    left = sum(int(m) for m in re.findall(r"(\d+) with ", note))
    assert said == used and used + left == 40, (note, used)
    # with ramp lines too (one idle at 0 tok/s, one naming no request): their drops had gone
    # uncounted once the plateau was pooled
    ramp = [(0, 2.4, 500.0), (1, 2.4, 0.0), (2, 2.4, 150.0), (4, 2.4, 300.0)]
    doc = advise_json(_stock_rows_log(tmp_path / "ramp.log", 3, ramp + rows))
    note = next(n for n in doc["inputs"]["notes"] if "stock Decode batch lines at 3 steps" in n)
    used = sum(int(re.search(r"(\d+) intervals\)$", r["source"]).group(1)) for r in doc["inputs"]["runs"])
    left = sum(int(m) for m in re.findall(r"(\d+) with ", note))
    assert used + left == 44 and "1 with idle time" in note and "1 with #running-req 0" in note, (note, used)


def test_zero_gen_throughput_is_named_an_idle_interval(tmp_path):
    # helper 39: a stock log whose gen throughputs were all 0.00 was refused with "its time over 5x
    # the median", which those intervals never were; the reason names the 0.00 now
    log = _stock_log(tmp_path / "s3.log", 3, 2.4, 80.0)
    text = re.sub(r"gen throughput \(token/s\): [0-9.]+", "gen throughput (token/s): 0.00", log.read_text())
    log.write_text(text)
    rc, _out, err = advise(log, _nospec_log(tmp_path / "ns.log"))
    assert rc == 2 and "a gen throughput of 0.00" in err


def test_a_whole_cycle_run_beside_a_phase_timed_one_sets_the_verify_at_its_width(tmp_path):
    """The seed's 5-step run (phases) and a 2-step run as stock Decode batch lines (94 tok/s, accept
    length 2.1: whole-cycle times). The stock run shaped no curve: 2 steps was predicted at 102.7 tok/s
    (95.0-111.3) beside its measured 94.0, and 1 step recommended (helper 44). Its cycle less the
    draft, draft-extend and other time of the phase-timed run is now a verify point."""
    two = _stock_log(tmp_path / "two.log", 2, 2.1, SEED_BEST_TOK_S)
    doc = advise_json(_write(tmp_path / "seed5.json", _doc(SEED_5)), two, "--baseline-tok-s", SEED_BASELINE)
    c2 = cand(doc, 2)
    lo, hi = c2["tok_s_95"]
    assert doc["recommended"]["steps"] == 2
    assert abs(c2["predicted_tok_s"] / c2["measured_tok_s"] - 1) < 0.02 and (hi - lo) / c2["predicted_tok_s"] <= 0.06
    # the verify at 3 tokens is the stock cycle less the seed's other phases (about 21.6 ms, as the seed's own)
    assert 20.5 < c2["cycle_phases_ms"]["verify_ms"] < 22.5
    assert any("set the verify time at their width" in n for n in doc["inputs"]["cycle_model"]["notes"])


def _standin_sweep_file(path: Path, baseline: float, step_ms: float, sweep: dict) -> Path:
    """Bench records of a stand-in sweep (``test/standin_server.py``: verify 11.3 ms, a draft forward
    and the draft-extend ``step_ms`` each): ``sweep`` maps steps to (client tok/s, accept histogram,
    batch-means accept-length se)."""
    def ph(mean):
        return {"mean": mean, "sd": 0.0}
    recs = [{"schema": "eagle-cycle-bench/1", "model": "m", "draft": None, "steps": 0, "topk": None,
             "num_draft_tokens": None, "concurrency": 1, "status": "ok", "output_tok_s": baseline}]
    for s, (tok, hist, acc_se) in sweep.items():
        n = sum(hist.values())
        mean = sum(int(k) * v for k, v in hist.items()) / n
        grp = {"bs": 1, "steps": s, "topk": 1, "draft_tokens": s + 1, "device_spans": False, "cycles": n,
               "phases": {"draft_ms": ph(step_ms * (s - 1)) if s > 1 else ph(None), "verify_ms": ph(11.3),
                          "extend_ms": ph(step_ms), "other_ms": ph(0.0), "total_ms": ph(11.3 + step_ms * s)},
               "accept_len_mean": mean, "accept_hist": hist,
               "batch_se": {"accept_len": acc_se, "period_ms": 0.0, "batch_cycles": n // 8, "cycles": n}}
        recs.append({"schema": "eagle-cycle-bench/1", "model": "m", "draft": "d", "steps": s, "topk": 1,
                     "num_draft_tokens": s + 1, "concurrency": 1, "status": "ok", "output_tok_s": tok,
                     "accept_len_mean": round(mean, 4), "accept_hist": hist, "cycle": grp})
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_a_measured_depth_the_model_misses_weighs_in_the_decision_as_measured(tmp_path):
    """A stand-in sweep (accept rate 0.62, 1.4 ms a draft forward) where 3 steps is best: the pick is
    right, but the 1-step run, measured 15% below its prediction (the stand-in's acceptance is no
    chain, so pooled over the runs it misses there), kept its predicted 147 tok/s in the decision and
    left 3 steps "not settled" at a 9.3% regret (helper 44)."""
    path = _standin_sweep_file(tmp_path / "sweep.jsonl", 88.007, 1.4, {
        1: (125.361, {"1": 496, "2": 768}, 0.001293), 2: (138.817, {"1": 16, "2": 1008}, 0.0),
        3: (141.03, {"1": 16, "2": 672, "3": 224}, 0.001743), 4: (139.432, {"2": 512, "3": 336}, 0.001444),
        5: (133.728, {"2": 416, "3": 400}, 0.000867)})
    doc = advise_json(path, "--steps-candidates", 0, 1, 2, 3, 4, 5)
    one = cand(doc, 1)
    assert one["predicted_tok_s"] > 1.1 * one["measured_tok_s"]       # the miss the notes name
    assert any("fits poorly at 1 step" in n for n in doc["inputs"]["notes"])
    assert doc["recommended"]["steps"] == 3 and doc["regret_95"] < 0.03


def test_a_measured_pick_below_the_no_spec_baseline_is_not_recommended(tmp_path):
    """A stand-in sweep (accept rate 0.32, 4 ms a draft forward) where speculation off is best: the
    1-step run measured 86.0 tok/s against the no-spec 88.1, but the chain model, pooling the deeper
    runs' acceptance, predicted 93.1 there and recommended 1 step, "settled" (helper 44)."""
    path = _standin_sweep_file(tmp_path / "sweep.jsonl", 88.056, 4.0, {
        1: (85.981, {"1": 1040, "2": 496}, 0.0), 2: (73.475, {"1": 816, "2": 608}, 0.000754),
        3: (62.259, {"1": 752, "2": 640}, 0.000942), 4: (53.152, {"1": 752, "2": 640}, 0.000951),
        5: (46.387, {"1": 752, "2": 640}, 0.000959)})
    doc = advise_json(path)
    assert cand(doc, 1)["predicted_tok_s"] > 88.056      # the model still ranks 1 step above the baseline
    assert doc["recommended"]["steps"] == 0 and doc["recommended"]["speculation"] == "off"
    assert any("1 step, the model's first, measured" in n and "below the no-spec 88.1 tok/s: the measurement wins" in n
               for n in doc["inputs"]["notes"])
    out = subprocess.run([sys.executable, "-m", "sglang_eagle_cycle.cli", "advise", str(path)], capture_output=True,
                         text=True, timeout=300).stdout
    flat = " ".join(out.split())
    assert "1 step, the model's first, measured" in flat and "below the no-spec 88.1 tok/s; the measurement wins" in flat
    assert "launch: without --speculative-algorithm (speculation does not pay here; bs 1)" in flat


def test_a_whole_cycle_run_sets_no_verify_where_it_cannot_be_told_apart(tmp_path):
    """Two whole-cycle runs that set no verify point (helper 45). Beside 1-step runs alone, a deeper
    stock run's cycle holds draft forwards no run timed: taken as verify it read every deeper depth
    6-10% low. And a stock run whose cycle leaves less verify time than the no-spec decode step (a
    forward over more tokens) is from another setup: it had reshaped the curve without a word."""
    one = _group(1, {"verify_ms": 20.0, "verify_fwd_ms": 19.5, "extend_ms": 0.5, "other_ms": 0.5,
                     "total_ms": 21.0}, 1.7, 1000.0 * 1.7 / 21.0)
    stock3 = _stock_log(tmp_path / "s3.log", 3, 2.4, 1000.0 * 2.4 / 24.0)
    doc = advise_json(_write(tmp_path / "one.json", _doc(one)), stock3, "--baseline-tok-s", 60.0)
    notes = doc["inputs"]["cycle_model"]["notes"]
    assert any(n.startswith("1 run(s) without a phase breakdown not used for cycle time") for n in notes)
    assert not any("set the verify time at their width" in n for n in notes)
    # the seed's 5-step run and a 1-step stock run 30% faster than its decode step allows
    fast = _stock_log(tmp_path / "fast1.log", 1, 1.7, 1000.0 * 1.7 / 8.5)
    doc = advise_json(_write(tmp_path / "seed5.json", _doc(SEED_5)), fast, "--baseline-tok-s", SEED_BASELINE)
    assert any(n.startswith("1 run(s) without a phase breakdown not used") and "another setup" in n
               for n in doc["inputs"]["cycle_model"]["notes"])
    assert any("the model fits poorly at 1 step" in n for n in doc["inputs"]["notes"])


def test_a_stock_log_of_idle_intervals_is_named_as_such(tmp_path):
    """Intervals with #running-req 0 are in no mean, yet they say the server speculates: a log of
    them alone was called one 'without accept lengths' (helper 45)."""
    log = _stock_rows_log(tmp_path / "idle.log", 3, [(0, 1.0, 0.0)] * 3)
    rc, out, err = advise(log, "--baseline-tok-s", 90)
    assert rc == 2 and "every interval left out (3 with #running-req 0)" in err


def _warned_of_another_target(run: Path, nospec: Path, tmp_path: Path) -> None:
    """``run`` (model_path m) beside ``nospec`` rewritten to another target: one warning naming both."""
    other = tmp_path / "nospec-other.log"
    other.write_text(nospec.read_text().replace("'model_path': 'm'", "'model_path': 'org/Other-70B'"))
    rc, _, err = advise(run, other)
    warned = [ln for ln in err.splitlines() if "target models" in ln]
    assert rc == 0 and len(warned) == 1, err
    assert f"model_path m in {run}" in warned[0] and f"model_path org/Other-70B in {other}" in warned[0]


def test_stock_logs_of_two_target_models_are_named_in_a_warning(tmp_path):
    """Bench records of two models are refused; stock logs name their model only in the start-up
    line, and a no-spec log of another target had given every speedup without a word (helper 49).
    Logs of one model_path, in either server_args shape, raise no warning; the draft's own
    ``speculative_draft_model_path`` is not taken for the target's."""
    run = _stock_log(tmp_path / "s3.log", 3, 1.95, 90.0)
    same = _nospec_log(tmp_path / "nospec.log", 88.0)
    old_shape = tmp_path / "nospec-old.log"   # ServerArgs(...) of older versions, the draft path before it
    old_shape.write_text(same.read_text().replace(
        "server_args={'model_path': 'm', 'speculative_algorithm': None, 'speculative_num_steps': None, 'tp_size': 8}",
        "server_args=ServerArgs(speculative_draft_model_path='d', model_path='m', speculative_algorithm=None, "
        "speculative_num_steps=None, tp_size=8)"))
    for base in (same, old_shape):
        rc, _, err = advise(run, base)
        assert rc == 0 and "target models" not in err
    _warned_of_another_target(run, same, tmp_path)


def test_a_plugin_log_and_a_no_spec_log_of_another_target_are_named_in_a_warning(tmp_path):
    """The two-models warning took only stock speculative starts: a start whose runs are its
    [eagle-cycle] lines (the plugin's own log, Decode batch lines beside them) named no model, so a
    no-spec log of another target gave every speedup without a word."""
    cyc = _seed_2_step_log(tmp_path / "cyc.log")
    lines = cyc.read_text().splitlines()
    stock = [f"[2026-12-06 10:00:00 TP0] Decode batch, #running-req: 1, #token: {100 + i}, token usage: 0.00, "
             "accept len: 2.10, accept rate: 0.55, cuda graph: True, gen throughput (token/s): 94.00, #queue-req: 0"
             for i in range(5)]
    cyc.write_text("\n".join(["[2026-12-06 09:59:00] server_args={'model_path': 'm', 'speculative_algorithm': "
                              "'EAGLE3', 'speculative_num_steps': 2, 'speculative_eagle_topk': 1, "
                              "'speculative_num_draft_tokens': 3, 'tp_size': 8}", *lines, *stock]) + "\n")
    same = _nospec_log(tmp_path / "nospec.log", 88.0)
    rc, _, err = advise(cyc, same)
    assert rc == 0 and "target models" not in err
    _warned_of_another_target(cyc, same, tmp_path)


def test_an_inspect_documents_close_no_spec_batch_sizes_and_unusable_rows_are_named(tmp_path):
    """A no-spec load that wandered over bs 6-8 is pooled into one plateau from the log, which needs
    the lines' order; its inspect document has none, so its batch sizes stay apart and a note says
    so (helper 54: 401.8 / 461.5 / 518.5 against the log's 486.3). A document whose no-spec rows
    hold no usable throughput says why it gives no baseline."""
    run = tmp_path / "run.json"
    run.write_text(json.dumps(_doc(_ramp_group(8, 600))))
    rng = random.Random(4)
    jitter = _nospec_log(tmp_path / "jitter.log", 480.0, lines_n=60, bs=lambda r: rng.choice([6, 7, 8]))
    rc, out, err = _inspect(jitter)
    assert rc == 0, err
    (tmp_path / "jitter.json").write_text(out)
    notes = advise_json(run, tmp_path / "jitter.json")["inputs"]["notes"]
    assert any("no-spec batch sizes 6, 7, 8 lie close together" in n for n in notes)
    far = _nospec_log(tmp_path / "far.log", 480.0, lines_n=60, bs=lambda r: r.choice([1, 8]))
    rc, out, err = _inspect(far)
    (tmp_path / "far.json").write_text(out)
    assert not any("lie close together" in n for n in advise_json(run, tmp_path / "far.json")["inputs"]["notes"])
    doc = json.loads(out)
    for row in doc["decode_batch"]["by_bs"]:
        row["gen_tok_s"] = None
    (tmp_path / "idle.json").write_text(json.dumps(doc))
    got = advise_json(run, tmp_path / "idle.json")["inputs"]
    assert got["baseline_tok_s"] == {}
    assert any("no batch size with a usable throughput" in n for n in got["notes"])


def test_one_target_spelt_two_ways_is_not_two_models(tmp_path):
    """model_path '/models/Kimi-K2.5/' in one start-up line and '/models/Kimi-K2.5' in another, or a
    Hugging Face cache snapshot folder beside its repo id, are one target: the two-models warning had
    named them as two."""
    cyc = _seed_2_step_log(tmp_path / "cyc.log")
    lines = cyc.read_text().splitlines()
    stock = [f"[2026-12-06 10:00:00 TP0] Decode batch, #running-req: 1, #token: {100 + i}, token usage: 0.00, "
             "accept len: 2.10, accept rate: 0.55, cuda graph: True, gen throughput (token/s): 94.00, #queue-req: 0"
             for i in range(5)]
    same = _nospec_log(tmp_path / "nospec.log", 88.0)
    for run_path, base_path in (("/models/Kimi-K2.5/", "/models/./Kimi-K2.5"),
                                ("moonshotai/Kimi-K2.5",
                                 "/root/.cache/huggingface/hub/models--moonshotai--Kimi-K2.5/snapshots/0123abc"),
                                ("/models/Kimi-K2.5", "/models/Other-70B")):
        cyc.write_text("\n".join([f"[2026-12-06 09:59:00] server_args={{'model_path': '{run_path}', "
                                  "'speculative_algorithm': 'EAGLE3', 'speculative_num_steps': 2, "
                                  "'speculative_eagle_topk': 1, 'speculative_num_draft_tokens': 3, 'tp_size': 8}",
                                  *lines, *stock]) + "\n")
        other = tmp_path / "nospec-spelt.log"
        other.write_text(same.read_text().replace("'model_path': 'm'", f"'model_path': '{base_path}'"))
        rc, _, err = advise(cyc, other)
        warned = [ln for ln in err.splitlines() if "target models" in ln]
        assert rc == 0 and len(warned) == (1 if "Other" in base_path else 0), (run_path, base_path, err)


def _stock_lines(path: Path, rates, steps: int, bs: int = 1, version: str = "0.5.23") -> Path:
    """Stock Decode batch lines without a start-up line, one per per-interval acceptance rate in
    ``rates``: accept len 1 + steps * rate, accept rate as SGLang 0.5.23 prints it ((L - 1) / (ndt - 1)
    for chain drafting), or, with ``version="old"``, the older L / num_draft_tokens."""
    accs = [1 + steps * r for r in rates]
    shown = list(rates) if version == "0.5.23" else [a / (steps + 1) for a in accs]
    path.write_text("\n".join(_db_line(f"2026-12-06 10:00:{i % 60:02d}", bs, 1000 + 50 * i, bs * (60 + 25 * a), a, r,
                                       usage="0.01") for i, (a, r) in enumerate(zip(accs, shown))) + "\n")
    return path


def test_a_stock_log_without_its_start_up_line_gives_the_depth_its_lines_pin(tmp_path):
    """SGLang 0.5.23 prints accept rate = (accept len - 1) / (num_draft_tokens - 1): where exactly one
    depth fits every interval's two printed figures, a stock log without its server_args= line is a run
    at that depth (chain drafting assumed, said in a note). Before, it was refused ('no server_args=
    line before them names the depth')."""
    rng = np.random.default_rng(3)
    log = _stock_lines(tmp_path / "five.log", rng.uniform(0.15, 0.4, 30), steps=5)
    doc = advise_json(log, "--baseline-tok-s", 70)
    (run,) = doc["inputs"]["runs"]
    assert (run["steps"], run["topk"], run["bs"]) == (5, 1, 1)
    (note,) = [n for n in doc["inputs"]["notes"] if "inferred" in n]
    assert "num_draft_tokens 6" in note and "every one of its 30 intervals" in note and "topk 1" in note
    # the three real 0.5.23 lines of data/logs (5 steps, bs 1; one of them printed by two ranks)
    real = tmp_path / "real.log"
    real.write_text("\n".join(ln for ln in (REPO / "data" / "logs" / "decode_batch_variants.log").read_text().splitlines()
                              if "2026-11-30 10:02" in ln) + "\n")
    (run,) = advise_json(real, "--baseline-tok-s", 70)["inputs"]["runs"]
    assert run["steps"] == 5


@pytest.mark.parametrize("case", ["older_rate", "two_servers", "too_few", "nothing_accepted"])
def test_stock_lines_that_pin_no_one_depth_are_still_refused(tmp_path, case):
    rng = np.random.default_rng(4)
    log = tmp_path / "x.log"
    if case == "older_rate":      # accept rate = L / num_draft_tokens (an older SGLang): no one depth fits
        _stock_lines(log, rng.uniform(0.15, 0.4, 30), steps=3, version="old")
    elif case == "two_servers":   # 2-step and 5-step intervals in one log, no start-up lines between
        a = _stock_lines(tmp_path / "a.log", rng.uniform(0.3, 0.6, 15), steps=2).read_text()
        b = _stock_lines(tmp_path / "b.log", rng.uniform(0.15, 0.4, 15), steps=5).read_text()
        log.write_text(a + b)
    elif case == "too_few":
        _stock_lines(log, [0.3, 0.25], steps=5)
    else:                         # accept len 1.00, accept rate 0.00: any depth fits
        _stock_lines(log, [0.0] * 20, steps=5)
    rc, _, err = advise(log, "--baseline-tok-s", 70)
    assert rc == 2 and "no server_args= line" in err and "nor do their accept len and accept rate pin one" in err
    # the reason the lines give, not a list of every reason there could be
    why = {"older_rate": "no one num_draft_tokens fits every line: lines of several servers at different depths, "
                         "or of another SGLang's accept rate",
           "two_servers": "no one num_draft_tokens fits every line",
           "too_few": "2 intervals whose accept len and rate say something, fewer than 3",
           "nothing_accepted": "0 intervals whose accept len and rate say something, fewer than 3"}[case]
    assert f"(accept len - 1) / (num_draft_tokens - 1)): {why}" in err, err


def test_steady_lines_of_the_older_rate_pin_no_depth(tmp_path):
    """An older SGLang prints accept rate = accept len / num_draft_tokens. Where the accept length holds
    steady, its lines fit one value under 0.5.23's rate as well: 5 steps at accept len 1.50, rate 0.25
    read as (1.50 - 1) / 0.25 = 2, num_draft_tokens 3, and advise had taken the run as 2 steps. The
    lines fit num_draft_tokens 6 under the older rate just as well, so they pin none: refused."""
    rng = np.random.default_rng(5)
    log = _stock_lines(tmp_path / "old.log", rng.uniform(0.098, 0.102, 30), steps=5, version="old")
    rc, _, err = advise(log, "--baseline-tok-s", 70)
    assert rc == 2 and "nor do their accept len and accept rate pin one" in err, err
    assert "num_draft_tokens 3 fits every line under SGLang 0.5.23's rate, 6 under the older" in err, err


def test_an_adaptive_servers_lines_pin_no_depth(tmp_path):
    """An adaptive server's accept rate divides by its launch num_draft_tokens - 1 whatever depth ran
    (SGLang 0.5.23's metrics_reporter reads get_spec(), which the adaptive controller leaves alone), so
    its lines fit the launch value exactly: launched at 3 steps and running 5-7 (accept len up to 6,
    accept rate up to 1.67), advise had taken them as a 3-step run. No fixed depth prints a rate above
    1: such lines pin none."""
    rng = np.random.default_rng(6)
    lines = []
    for i, acc in enumerate(rng.uniform(2.0, 6.0, 30)):
        lines.append(_db_line(f"2026-12-06 10:00:{i % 60:02d}", 1, 1000 + 50 * i, 60 + 25 * acc, acc, (acc - 1) / 3))
    log = tmp_path / "adaptive.log"
    log.write_text("\n".join(lines) + "\n")
    rc, _, err = advise(log, "--baseline-tok-s", 70)
    over = sum(round((acc - 1) / 3, 2) > 1.005 for acc in np.random.default_rng(6).uniform(2.0, 6.0, 30))
    assert over >= 5
    assert rc == 2 and f"{over} intervals print an accept rate above 1 (an adaptive server's, running deeper than " \
        "its launch depth)" in err, err


def test_runs_of_one_depth_without_noise_estimates_take_their_scatter_as_noise(tmp_path):
    """Two bench records of 3 steps without cycle groups (no noise estimate each) at 141.6 and 60 tok/s
    (helper 81): their mean cycle had counted as exact, the 3-step interval 1% wide (83.4-85.1) beside
    two 'fits poorly' notes. Their scatter is now the mean's noise: the interval holds both records,
    nothing is settled. Two records that agree keep a narrow interval."""
    def rec(steps, tok, acc=None):
        return {"schema": "eagle-cycle-bench/1", "model": "m", "draft": "d", "steps": steps,
                "topk": 1 if steps else None, "num_draft_tokens": steps + 1 if steps else None,
                "concurrency": 1, "status": "ok", "output_tok_s": tok, "accept_len_mean": acc}

    base = rec(0, 88.1)
    doc = advise_json(_bench_file(tmp_path / "far.jsonl", [base, rec(3, 141.6, 2.29), rec(3, 60.0, 2.29)]))
    c3 = cand(doc, 3)
    lo, hi = c3["tok_s_95"]
    assert lo < 60.0 * 1.05 and hi > 141.6 * 0.95, c3["tok_s_95"]
    assert doc["settled"] is False and "no noise estimate" not in c3["interval_source"]
    near = advise_json(_bench_file(tmp_path / "near.jsonl", [base, rec(3, 141.6, 2.29), rec(3, 140.2, 2.29)]))
    lo, hi = cand(near, 3)["tok_s_95"]
    assert (hi - lo) / cand(near, 3)["predicted_tok_s"] < 0.05


def test_a_carried_baseline_that_holds_the_doubt_names_a_no_spec_run():
    """Speculation off at 270-340 tok/s (a no-spec step carried from another batch size's baseline)
    against depths known to about 1%: only a no-spec run at this batch size tells them apart, and the
    decision says so (baseline_after), where a run at another depth cannot; with the no-spec figure
    exact (a baseline given here) there is no such forecast."""
    from sglang_eagle_cycle.advise import baseline_run_first

    rng = np.random.default_rng(0)
    n, steps = 2000, [0, 1, 2, 3]
    off = rng.uniform(270.0, 340.0, n)
    tok = np.column_stack([off, 280 + 2 * rng.standard_normal(n), 305 + 2 * rng.standard_normal(n),
                           300 + 2 * rng.standard_normal(n)])
    ens = unc.Ensemble(4, steps, tok, np.ones_like(tok), {}, 3, [None] * 4, run_se=np.full(4, 0.01))
    d = unc.decide(ens, measured=[2])
    assert not d.settled and d.regret_95 > 0.05
    assert d.baseline_after is not None and d.baseline_after < 0.5 * d.regret_95
    assert d.next_run is not None and d.baseline_after < d.regret_95_after and baseline_run_first(d)
    exact = tok.copy()
    exact[:, 0] = 300.0
    d = unc.decide(unc.Ensemble(4, steps, exact, np.ones_like(exact), {}, 3, [None] * 4, run_se=np.full(4, 0.01)),
                   measured=[2])
    assert d.baseline_after is None and not baseline_run_first(d)


def test_a_stock_log_beside_its_own_inspect_document_counts_once_at_a_rounding_boundary(tmp_path):
    """40 stock intervals whose mean accept length is 2.38875, the half-way point of the key's 4
    decimals: the log's float (2.3887500000000004) and its inspect document's 6-decimal copy had
    rounded to two keys, and the one run counted twice without a note (helper 81)."""
    rows = [(1, 2.39 if i < 35 else 2.38, 99.5 + 0.01 * i) for i in range(40)]
    log = _stock_rows_log(tmp_path / "stock3.log", 3, rows)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["inspect", str(log), "--json"]) == 0
    doc_path = tmp_path / "stock3.json"
    doc_path.write_text(out.getvalue())
    doc = advise_json(doc_path, log, "--baseline-tok-s", 88)
    assert len(doc["inputs"]["runs"]) == 1, doc["inputs"]["runs"]
    assert any("holds the same run as" in n and "counted once" in n for n in doc["inputs"]["notes"])


@pytest.mark.parametrize("edit, words", [
    (lambda g: g.update(tok_s=g["tok_s"] * 10), "tok_s"),
    (lambda g: g.update(accept_len_mean=1.1), "accept_hist's mean"),
    (lambda g: g.update(cycles=5), "more than cycles x bs"),
    (lambda g: g["phases"]["verify_fwd_ms"].update(mean=g["phases"]["verify_ms"]["mean"] + 30.0), "verify_fwd_ms"),
])
def test_an_inspect_document_that_contradicts_itself_is_refused(tmp_path, edit, words):
    """Hand-edited inspect documents (helper 81): a tok_s ten times what its accept length and cycle
    time give had shown 1000 tok/s measured beside a pick predicted at 105.6; an accept_len_mean beside
    a histogram of another mean, a histogram of more request-cycles than the group's cycles, a target
    forward longer than its verify were all advised on. Now one line and exit 2; the document as
    written by inspect is advised."""
    from cyclegen import generate, log_lines

    log = tmp_path / "run.log"
    log.write_text("\n".join(log_lines(generate(random.Random(3), 1, 2, 300, [0.8, 0.6], spans=True).records)) + "\n")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["inspect", str(log), "--json"]) == 0
    doc = json.loads(out.getvalue())
    good = tmp_path / "good.json"
    good.write_text(json.dumps(doc))
    assert advise(good, "--baseline-tok-s", 88)[0] == 0
    edit(doc["groups"][0])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    rc, _, err = advise(bad, "--baseline-tok-s", 88)
    assert rc == 2 and err.count("\n") == 1 and words in err and "contradicts itself" in err, err


def test_a_bench_record_of_another_schema_version_is_named_as_such(tmp_path):
    """Bench JSONL whose records say eagle-cycle-bench/9 had been read as one JSON document and refused
    as "invalid JSON (line 2 column 1: Extra data)" (helper 81)."""
    rec = {"schema": "eagle-cycle-bench/9", "model": "m", "draft": "d", "steps": 3, "topk": 1,
           "num_draft_tokens": 4, "concurrency": 1, "status": "ok", "output_tok_s": 140.0}
    path = _bench_file(tmp_path / "v9.jsonl", [rec, dict(rec, steps=0, topk=None, num_draft_tokens=None)])
    rc, _, err = advise(path)
    assert rc == 2 and err.count("\n") == 1
    assert "schema 'eagle-cycle-bench/9' is not eagle-cycle-bench/1" in err and "Extra data" not in err
