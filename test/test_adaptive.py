"""``sglang_eagle_cycle.adaptive.CostAwarePolicy`` against SGLang 0.5.23's own adaptive policy.

The simulator (``benchmarks/sim_adaptive.py``) runs both policies inside SGLang's real
``AdaptiveController`` on worlds whose acceptance shifts mid-run, with the same random numbers;
here with shorter phases than the benchmark's 10,000 cycles, so the figures asserted are looser
than the ones it prints (README, "Adaptive speculation").
"""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("sglang")

from sglang_eagle_cycle.adaptive import CostAwarePolicy, expected_accept_len  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def sim():
    spec = importlib.util.spec_from_file_location("sim_adaptive", REPO / "benchmarks" / "sim_adaptive.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sim_adaptive"] = mod
    spec.loader.exec_module(mod)
    return mod


def _cfg(tmp_path, entries) -> str:
    path = tmp_path / "adaptive.json"
    path.write_text(json.dumps(entries))
    return str(path)


def test_beats_sglangs_ema_and_follows_the_shift(sim):
    """8 drawn worlds (dense, MoE, communication-bound, CUDA-graph buckets, large batch, predictable),
    two phases of 3,000 cycles each, records 2 cycles late."""
    rows = []
    for i, world in enumerate(sim.make_worlds(8, 0, 3000)):
        r = sim.evaluate(world, seed=i)
        r.pop("_policy")
        rows.append(r)
    ratios = [r["cost_ratio"] for r in rows]
    assert min(ratios) >= 0.93, ratios
    for r in rows:   # per phase, against that phase's best static depth (never above it by more than luck)
        assert len(r["cost_phase_ratio"]) == 2 and all(0.85 <= x <= 1.02 for x in r["cost_phase_ratio"]), r
    assert sum(x >= 0.98 for x in ratios) >= 7, ratios
    assert all(r["cost_vs_ema"] >= 0.99 for r in rows), [r["cost_vs_ema"] for r in rows]
    assert sum(r["cost_vs_ema"] for r in rows) / len(rows) >= 1.05
    off = [r for r in rows if r["all_below_nospec"]]
    assert off, "the drawn worlds include one where no depth beats no-spec"
    for r in off:   # settles on the best candidate and says speculation should be off
        assert r["cost_logged_off"] and r["cost_final_steps"] == r["oracle_steps"][-1]
    # the advice is never given where every phase has a depth clearly above no-spec
    assert not any(r["cost_logged_off"] for r in rows if min(r["phase_best_over_nospec"]) > 1.05)


def test_protocol_methods_match_sglangs_policy(tmp_path):
    from sglang.srt.speculative.adaptive_spec_params import AdaptiveSpeculativeParams

    cfg = _cfg(tmp_path, {"1": {"candidate_steps": [1, 3, 5, 7], "nospec_tok_s": 90.0},
                          "8": {"candidate_steps": [0, 1, 3]}, "32": {"candidate_steps": [0, 1]},
                          "comment": "ignored"})
    ours, theirs = CostAwarePolicy(3, cfg), AdaptiveSpeculativeParams(3, cfg)
    assert ours.candidate_steps == theirs.candidate_steps == [0, 1, 3, 5, 7]
    for graphs in (None, [1, 2, 4, 8, 16, 24, 32, 64]):
        ours.set_cuda_graph_bs(graphs)
        theirs.set_cuda_graph_bs(graphs)
        for step in range(8):
            assert ours.cuda_graph_bs_for_step(step) == theirs.cuda_graph_bs_for_step(step)
        for bs in (1, 3, 7, 8, 9, 31, 32, 100):
            assert ours.get_steps_for_batch(bs) == theirs.get_steps_for_batch(bs), bs


@pytest.mark.parametrize("entries, words", [
    ({"default": {"candidate_steps": [1]}}, "integer-string"),
    ({"1": {"candidate_steps": []}}, "non-negative"),
    ({"1": {"candidate_steps": [1, -2]}}, "non-negative"),
    ({"1": {"candidate_steps": [1, True]}}, "non-negative"),
    ({"1": {"candidate_steps": [1, 2], "nospec_tok_s": -5}}, "nospec_tok_s"),
    # Infinity (json.loads reads it) had passed, and every bucket then logged "speculation off" (helper 58)
    ({"1": {"candidate_steps": [1, 2], "nospec_tok_s": float("inf")}}, "nospec_tok_s"),
    ({"1": {"candidate_steps": [1, 2], "nospec_tok_s": True}}, "nospec_tok_s"),
])
def test_bad_config_is_a_value_error(tmp_path, entries, words):
    with pytest.raises(ValueError, match=words):
        CostAwarePolicy(1, _cfg(tmp_path, entries))


def test_a_fully_accepted_draft_is_cut_off_at_its_depth(tmp_path):
    """At depth 2 every request accepts both drafts: positions 1-2 are accepted every time, and
    nothing is learnt about position 3 (that request never drafted it)."""
    pol = CostAwarePolicy(2, _cfg(tmp_path, {"1": {"candidate_steps": [2, 3]}}))
    for _ in range(64):
        pol.on_verify_complete([2, 2, 2, 2], 4)
    slot = pol._slots[1]
    assert slot.reached[2] == 0 and slot.accepted[2] == 0
    assert slot.reached[0] == pytest.approx(slot.accepted[0]) and slot.reached[0] > 100
    assert slot.p()[0] > 0.95 and slot.p()[1] > 0.95


def test_periods_come_from_records_folded_in_on_the_sink_thread(tmp_path):
    pol = CostAwarePolicy(2, _cfg(tmp_path, {"1": {"candidate_steps": [1, 2, 3]}}))
    recs = [SimpleNamespace(steps=2, bs=1, total_ms=20.0 + (i % 3), gap_ms=0.5, draft_ms=1.0, draft_prep_ms=0.2,
                            verify_ms=17.0, extend_ms=1.0) for i in range(30)]
    t = threading.Thread(target=lambda: [pol.on_cycle_record(r) for r in recs])
    t.start()
    t.join()
    slot = pol._slots[1]   # folded in on the thread that handed them over
    assert slot.measured(2) and not slot.measured(1)
    slot.snapshot()   # as a decision does
    assert slot.period[2] == pytest.approx(21.0 + 0.5, abs=0.1)   # mean of total (20, 21, 22) + gap
    assert slot.period_lower(3) == pytest.approx(slot.period[2] + 1.0, abs=0.05)  # + one draft forward


def test_a_shift_in_acceptance_is_detected_and_old_counts_dropped(tmp_path):
    """bs 1 at depth 1: 2,000 verifies accepting 90% of first drafts, then 30%. The recent counts
    see the shift within a few decisions; the long-run counts are replaced (not left to decay over
    a half-life of 400 cycles), so the estimate is near 0.3 within 200 verifies."""
    import random

    pol = CostAwarePolicy(1, _cfg(tmp_path, {"1": {"candidate_steps": [1]}}))
    slot = pol._slots[1]

    def verify(accepted: int) -> None:
        if slot.verifies % 256 == 0:   # the timing reaches the bucket (a record now and then)
            pol.on_cycle_record(SimpleNamespace(steps=1, bs=1, total_ms=10.0))
        pol.on_verify_complete([accepted], 1)

    rng = random.Random(5)
    for _ in range(2000):
        verify(int(rng.random() < 0.9))
    assert slot.shifts == 0 and slot.p()[0] == pytest.approx(0.9, abs=0.05)
    for i in range(200):
        verify(int(rng.random() < 0.3))
        if slot.shifts:
            break
    assert slot.shifts == 1 and i < 100, i
    for _ in range(200):
        verify(int(rng.random() < 0.3))
    assert slot.p()[0] == pytest.approx(0.3, abs=0.1)


def test_a_switch_is_timed_apart_from_the_depth_it_lands_on(tmp_path):
    """The first cycle after each switch costs 20 ms more (new runners, a cold draft): that excess
    becomes the bucket's switch cost; the periods of the depths stay their own."""
    pol = CostAwarePolicy(2, _cfg(tmp_path, {"1": {"candidate_steps": [1, 2]}}))
    slot = pol._slots[1]
    base = {1: 10.0, 2: 12.0}
    for block in range(40):
        steps = 1 + block % 2
        for i in range(16):
            extra = 20.0 if i == 0 and block > 1 else 0.0
            pol.on_cycle_record(SimpleNamespace(steps=steps, bs=1, total_ms=base[steps] + extra, gap_ms=0.0,
                                                draft_ms=0.0, draft_prep_ms=0.0, verify_ms=0.0, extend_ms=0.0))
    assert slot.switch_ms == pytest.approx(20.0, rel=0.05)
    assert slot.period[1] == pytest.approx(10.0) and slot.period[2] == pytest.approx(12.0)
    assert slot.period_var[1] == pytest.approx(0.0, abs=1e-9)


def test_expected_accept_len_is_leviathans_sum():
    assert expected_accept_len([0.8, 0.5], 2) == pytest.approx(1 + 0.8 + 0.4)
    assert expected_accept_len([0.8, 0.5], 0) == 1.0


# ----------------------------------------------------------------------------- the plugin's hook
def _hook_probe(env_value):
    import os

    from sglang_fork import run_python

    env = {**os.environ, "SGLANG_PLUGINS": "none"}
    env.pop("SGLANG_EAGLE_CYCLE_ADAPTIVE", None)
    if env_value is not None:
        env["SGLANG_EAGLE_CYCLE_ADAPTIVE"] = env_value
    proc = run_python([str(REPO / "test" / "adaptive_hook_probe.py")], env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_variable_replaces_sglangs_policy_on_the_real_worker_init():
    """SGLang's real EAGLEWorkerV2.__init__ (stand-in draft worker), hooked through the plugin."""
    out = _hook_probe("cost")
    assert out["hooked"] and out["policy"] == "FallbackPolicy" and out["inner"] == "CostAwarePolicy"
    assert out["candidates"] == [0, 1, 3, 5, 7]          # SGLang's default config, read the same way
    assert out["consumer_registered"] and out["steps_for_bs1"] == 3 and out["warnings_before_fault"] == []
    # a fault in our policy: SGLang's takes over for good, one warning, the records stop
    assert out["active_after_fault"] == "AdaptiveSpeculativeParams" and len(out["fault_warnings"]) == 1
    assert not out["consumer_after_fault"]
    # without --speculative-adaptive: one warning naming the flag
    assert out["no_adaptive_controller"] and len(out["no_adaptive_warnings"]) == 1
    assert "--speculative-adaptive" in out["no_adaptive_warnings"][0]
    # tensor parallelism, TP rank 1: our policy, following TP rank 0's broadcast, fed no records
    assert out["tp2_policy"] == "FallbackPolicy" and out["tp2_synced_follower"] and not out["tp2_consumer"]
    assert out["tp2_warnings"] == []


def test_without_the_variable_sglangs_policy_is_untouched():
    out = _hook_probe(None)
    assert not out["hooked"] and out["policy"] == "AdaptiveSpeculativeParams"
    assert out["no_adaptive_warnings"] == [] and out["tp2_warnings"] == []


def test_a_world_file_is_checked_field_by_field(sim, tmp_path):
    import subprocess

    good = json.loads(json.dumps(sim.make_worlds(1, 0, 200)[0].to_json()))
    path = tmp_path / "w.json"
    path.write_text(json.dumps(good))
    assert sim.world_from_json(json.loads(path.read_text())).bs == good["bs"]
    cases = [({"bs": 0}, "bs"), ({"candidates": [9]}, "candidates"), ({"candidates": []}, "candidates"),
             ({"costs": [1]}, "costs"), ({"switch_ms": -3}, "switch_ms"),
             ({"phases": [{"cycles": 10.5, "p": [0.5] * 7}]}, "phases[0].cycles"),
             ({"phases": [{"cycles": 10, "p": [1.5] * 7}]}, "phases[0].p"),
             ({"costs": {**good["costs"], "decode_ms": -1}}, "costs.decode_ms"),
             ({"costs": {**good["costs"], "bogus": 1}}, "bogus")]
    for change, words in cases:
        with pytest.raises(sim.WorldError, match=words.replace("[", r"\[").replace("]", r"\]")):
            sim.world_from_json({**good, **change})
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**good, "bs": 0}))
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "sim_adaptive.py"), "--world", str(bad)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "bs" in proc.stderr and "Traceback" not in proc.stderr


def test_a_config_that_is_not_json_names_the_file(tmp_path):
    path = tmp_path / "a.json"
    path.write_text("{nope")
    with pytest.raises(ValueError, match="a.json: not JSON"):
        CostAwarePolicy(1, str(path))


def _two_ranks(tmp_path):
    import os
    import socket
    import subprocess

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    procs = [subprocess.Popen([sys.executable, str(REPO / "test" / "adaptive_sync_probe.py"), str(r), str(port),
                               str(tmp_path / f"rank{r}.json")], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    try:
        for p in procs:
            _, err = p.communicate(timeout=240)
            assert p.returncode == 0, err[-2000:]
    finally:   # a rank left waiting for a broadcast (a hang) is not left behind
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]


def test_two_ranks_with_different_timings_run_the_same_depths(tmp_path):
    """Two gloo ranks, identical verify results, disagreeing cycle timings: with BroadcastSync every
    cycle runs the same depth on both (the leader's choice); deciding alone, they part ways."""
    a, b = _two_ranks(tmp_path)
    assert a["sync"]["steps"] == b["sync"]["steps"] and len(set(a["sync"]["steps"])) > 1   # identical; it moved
    # the follower's cycle lines say what the leader's say (a probe is explore on both)
    assert a["sync"]["modes"] == b["sync"]["modes"] and {"explore", "exploit"} <= set(a["sync"]["modes"])
    assert a["nosync"]["steps"] != b["nosync"]["steps"]
    # a fault in the leader's decision state: the depth is held on both ranks, our policy kept on both
    # (handing the leader alone to SGLang's policy had left the follower waiting for its broadcast)
    assert a["fault"]["steps"] == b["fault"]["steps"] and a["fault"]["frozen"] and not b["fault"]["frozen"]
    assert a["fault"]["ours_active"] and b["fault"]["ours_active"]


def test_policy_cost_benchmark_prints_paired_figures():
    """benchmarks/bench_adaptive_policy.py: both policies timed per batch size, the paired
    difference with its interval (a figure, not a timed test: only its shape and sanity here)."""
    import subprocess

    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_adaptive_policy.py"), "--batch-sizes",
                           "1", "8", "--reps", "6", "--cycles", "300", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(proc.stdout)["rows"]
    assert [r["bs"] for r in rows] == [1, 8]
    for r in rows:
        assert r["sglang_us"] > 0 and r["cost_us"] > 0 and r["reps"] == 6
        lo, hi = r["ci95_us"]
        assert lo <= r["added_us"] <= hi
    bad = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_adaptive_policy.py"), "--reps", "2"],
                         capture_output=True, text=True, timeout=60)
    # one line naming the argument (it had been the usage block and a message naming every bound)
    assert (bad.returncode, bad.stderr) == (2, "bench_adaptive_policy.py: error: argument --reps: expected an "
                                               "integer >= 6, got 2\n")
    # a depth no draft has: the policy's per-position counts had been allocated for it (a hang, not an error)
    bad = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_adaptive_policy.py"), "--candidates", "1",
                          "100000000", "--reps", "6", "--cycles", "100"], capture_output=True, text=True, timeout=60)
    assert (bad.returncode, bad.stderr) == (2, "bench_adaptive_policy.py: error: argument --candidates: expected an "
                                               "integer in 0..64, got 100000000\n")


@pytest.mark.parametrize("argv, words", [
    # above MAX_BS, the largest batch size every eagle-cycle command takes: it had been accepted
    (["--batch-sizes", "1", "65537"], "argument --batch-sizes: expected an integer in 1..65536, got 65537"),
    # within it, but its accept counts drawn up front would not fit: the defaults had asked for 2.6e9 (over 20 GB)
    (["--batch-sizes", "8", "65536"], "--batch-sizes 65536: 65536 x 5,000 cycles x 8 candidates is 2.62e+09 accept "
                                      "counts drawn up front, above the 2e+08 that fit in under 2 GB; give fewer "
                                      "--cycles or --candidates, or a smaller batch"),
])
def test_policy_cost_benchmark_bounds_its_batch_sizes(argv, words):
    import subprocess

    bad = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_adaptive_policy.py"), *argv],
                         capture_output=True, text=True, timeout=60)
    assert (bad.returncode, bad.stderr) == (2, f"bench_adaptive_policy.py: error: {words}\n")


def test_a_world_without_depth_3_among_its_candidates_starts_on_one_of_them(sim, tmp_path):
    """The launch depth was fixed at 3: candidates [5] or [2, 4] failed inside SGLang's policy
    ('Missing adaptive runtime state for steps=3', helper 48); it is now a candidate."""
    doc = {"name": "w", "bs": 4, "candidates": [2, 4],
           "phases": [{"cycles": 300, "p": [0.8] * 7}, {"cycles": 300, "p": [0.4] * 7}],
           "costs": {"kind": "dense", "decode_ms": 10, "fixed_ms": 10, "slope_ms": 0.01, "extend_fixed_ms": 0.5,
                     "extend_slope_ms": 0.001, "draft_step_ms": 0.5, "other_ms": 0.3, "gap_ms": 0.05,
                     "noise": 0.03}}
    for cands in ([5], [2, 4]):
        r = sim.evaluate(sim.world_from_json({**doc, "candidates": cands}), seed=1)
        assert r["cost_final_steps"] in cands and 0.5 < r["cost_ratio"] <= 1.0 + 1e-9
    with pytest.raises(sim.WorldError, match="costs.noise: expected a number >= 0 and <= 2"):
        sim.world_from_json({**doc, "costs": {**doc["costs"], "noise": 1e6}})


@pytest.mark.parametrize("argv, words", [
    (["--switch-ms", "-5"], "argument --switch-ms: expected a finite time >= 0 ms, got '-5'"),
    (["--switch-ms", "inf"], "argument --switch-ms: expected a finite time >= 0 ms, got 'inf'"),
    (["--seed", "-1"], "argument --seed: expected an integer >= 0, got -1"),
    (["--cycles", "99"], "argument --cycles: expected an integer >= 100, got 99"),
    # a --world gives its own phases: --worlds and --cycles had been ignored without a word
    (["--world", "w.json", "--worlds", "3"], "--worlds: not with --world (the world file gives its phases' cycles)"),
    (["--cycles", "3000", "--world", "w.json"], "--cycles: not with --world (the world file gives its phases' cycles)"),
])
def test_bad_simulator_arguments_are_one_line_exit_2(sim, capsys, argv, words):
    with pytest.raises(SystemExit) as exc:
        sim.main(argv)
    assert exc.value.code == 2 and capsys.readouterr().err == f"sim_adaptive.py: error: {words}\n"


def test_a_world_too_large_for_memory_is_refused_before_drawing(sim, tmp_path):
    """bs 4096 and 10,000,000 cycles passed every field's own bound, and its draws asked numpy for 1 TiB
    (a MemoryError traceback, or swap where memory is overcommitted). One world holds at most 1e8
    request-cycles (bs x cycles over all phases, about 4 GB of draws); a large realistic one is taken."""
    import dataclasses
    import subprocess

    good = json.loads(json.dumps(sim.make_worlds(1, 0, 100)[0].to_json()))
    big = {**good, "bs": 4096, "phases": [{"cycles": 10_000_000, "p": [0.8] * 7}]}
    words = ("phases: bs 4096 x 10,000,000 cycles is 4.1e+10 request-cycles, above the 1e+08 whose draws fit in about "
             "4 GB; give fewer cycles or a smaller bs")
    with pytest.raises(sim.WorldError) as exc:
        sim.world_from_json(big)
    assert str(exc.value) == words
    # a world built in code is checked where its draws are made
    w = sim.ShiftWorld("big", dataclasses.replace(sim.make_worlds(1, 0, 100)[0].costs, bs=4096),
                       [(10_000_000, (0.8,) * 7)])
    with pytest.raises(sim.WorldError, match="above the 1e"):
        sim.Draws(w, 0)
    two = [{"cycles": 50_000, "p": [0.8] * 7}, {"cycles": 50_000, "p": [0.4] * 7}]
    assert sim.world_from_json({**good, "bs": 1000, "phases": two}).bs == 1000   # at the bound: taken
    with pytest.raises(sim.WorldError, match="bs 1000 x 100,001 cycles"):
        sim.world_from_json({**good, "bs": 1000, "phases": [*two, {"cycles": 1, "p": [0.5] * 7}]})
    path = tmp_path / "big.json"
    path.write_text(json.dumps(big))
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "sim_adaptive.py"), "--world", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stderr) == (2, f"sim_adaptive: {path}: {words}\n")
    # within memory (1e8 request-cycles at bs 1) but 1.01e10 units of work: refused by the run's bound
    path.write_text(json.dumps({**good, "bs": 1, "phases": [{"cycles": 10_000_000, "p": [0.8] * 7}] * 10}))
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "sim_adaptive.py"), "--world", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.startswith("sim_adaptive.py: error: 1 world(s) x 1 run(s) x "
                                                           "100,000,000 cycles at bs up to 1 is 1.01e+10 units")
    assert proc.stderr.count("\n") == 1


def test_static_runs_read_each_phase_as_a_slice(sim):
    """A mask per phase (``phase_of == k``) made the static runs cost phases x cycles, which the work
    bound (cycles, not phases) does not count: 20,000 phases of 2 cycles took 21.5 s of static runs
    on a 2-core VM, 1.3 s as slices. The per-phase figures are the same."""
    good = json.loads(json.dumps(sim.make_worlds(1, 0, 100)[0].to_json()))
    phases = [{"cycles": 3, "p": [0.2 + 0.01 * k] * 7} for k in range(50)]
    w = sim.world_from_json({**good, "bs": 2, "phases": phases})
    d = sim.Draws(w, 0)
    want = [int(d.lengths[2][3 * k:3 * k + 3].sum()) for k in range(50)]
    d.phase_of = None   # not read: the phases are consecutive cycles
    assert sim.run_static(w, d, 2).tokens == want


@pytest.mark.parametrize("argv, words", [
    (["--cycles", "10000000"], "--cycles 10000000: bs 64 x 20,000,000 cycles is 1.28e+09 request-cycles, above the "
                               "1e+08 whose draws fit in about 4 GB (drawn worlds run 2 phases at bs up to 64); give "
                               "at most 781,250"),
    (["--worlds", "1000000"], "1,000,000 world(s) x 1 run(s) x 20,000 cycles at bs up to 64 is 3.28e+12 units of work "
                              "(request-cycles, plus 100 per cycle), above the 1e+10 of about 1.5 hours on 2 cores; "
                              "give fewer worlds, cycles or --switch-ms values"),
    (["--worlds", "3000", "--switch-ms", "0", "5", "20"],
     "3,000 world(s) x 4 run(s) x 20,000 cycles at bs up to 64 is 3.94e+10 units of work (request-cycles, plus 100 "
     "per cycle), above the 1e+10 of about 1.5 hours on 2 cores; give fewer worlds, cycles or --switch-ms values"),
])
def test_a_drawn_run_beyond_the_memory_or_work_bound_is_one_line_exit_2(sim, argv, words):
    """--cycles 10000000 had drawn 16.7 GiB of uniforms for its first world; --worlds 1000000 had
    drawn every world and then run for days. Refused before drawing; the README's runs are far inside."""
    import subprocess

    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "sim_adaptive.py"), *argv],
                          capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stderr) == (2, f"sim_adaptive.py: error: {words}\n")
    # what the README runs (12 worlds, 2 x 10,000 or 30,000 cycles, 3 switch costs) and the largest --cycles
    assert sim.work_error(12, 4, 64, 60_000) is None and sim.memory_error(64, 2 * 781_250) is None


class _StandInWorker:
    """What SGLang's ``AdaptiveController`` needs of ``EAGLEWorkerV2``: states are just depths."""

    def __init__(self, steps):
        self.speculative_num_steps = steps

    def build_adaptive_runtime_state(self, speculative_num_steps, speculative_num_draft_tokens, cuda_graph_bs=None):
        from sglang.srt.speculative.adaptive_runtime_state import SpecRuntimeState

        return SpecRuntimeState(speculative_num_steps, speculative_num_draft_tokens, None, None, None, None, None,
                                None)

    def apply_runtime_state(self, state):
        self.speculative_num_steps = state.speculative_num_steps


def _drive(cfg: str, accepted, records: bool = True, verifies: int = 3000):
    """SGLang's own ``AdaptiveController`` over ``FallbackPolicy(CostAwarePolicy, SGLang's policy)`` at
    bs 1 for ``verifies`` verifies, ``accepted(steps)`` drafts accepted each; with ``records``, a cycle
    record per verify (10 ms + 0.5 ms per step) reaches our policy 2 cycles late.
    Returns ``(ours, policy, worker)``."""
    from sglang.srt.speculative.adaptive_runtime_state import AdaptiveController
    from sglang.srt.speculative.adaptive_spec_params import AdaptiveSpeculativeParams

    from sglang_eagle_cycle.patches.adaptive import FallbackPolicy

    ours = CostAwarePolicy(1, cfg)
    worker, policy = _StandInWorker(1), FallbackPolicy(ours, AdaptiveSpeculativeParams(1, cfg))
    ctl = AdaptiveController(worker, policy)
    ctl.init_states(None)
    late: list = []
    for _ in range(verifies):
        ctl.activate_step_by_batch(1)
        s = worker.speculative_num_steps
        ctl.on_verify_complete([accepted(s)], 1)
        if records:
            late.append(SimpleNamespace(steps=s, bs=1, total_ms=10.0 + 0.5 * s, gap_ms=0.1, draft_ms=0.5 * s,
                                        draft_prep_ms=0.1, verify_ms=9.0, extend_ms=0.3))
            if len(late) > 2:
                ours.on_cycle_record(late.pop(0))
    return ours, policy, worker


@pytest.mark.parametrize("records", [False, True])
def test_without_cycle_records_sglangs_policy_takes_over(tmp_path, caplog, records):
    """Every draft accepted at bs 1. With no cycle record ever (the timing not profiling this worker,
    or turned off by a fault) no depth can be measured: the policy had stayed on depth 1 for good,
    silently, where SGLang's own climbs to 7. Now that is a fault: SGLang's policy takes over, with
    one WARNING. With the records arriving (2 cycles late) ours keeps deciding."""
    cfg = _cfg(tmp_path, {"1": {"candidate_steps": [1, 3, 5, 7]}})
    with caplog.at_level("WARNING", logger="sglang_eagle_cycle"):
        ours, policy, worker = _drive(cfg, lambda s: s, records)
    warned = [r.getMessage() for r in caplog.records if "adaptive policy" in r.getMessage()]
    if records:
        assert policy.active is ours and warned == [] and worker.speculative_num_steps == 7
    else:
        assert policy.active is policy.theirs and worker.speculative_num_steps == 7
        assert len(warned) == 1 and "no cycle record after 1024 verifies at bs 1" in warned[0]


def _drive_records(cfg: str, verifies: int, bs_of, recorded, accepted=lambda s, bs: [s] * bs,
                   stall: int = 1, cycle_s: float = 0.02):
    """As :func:`_drive`, with the batch size of verify ``i`` given by ``bs_of(i)`` and its cycle record
    delivered (2 cycles late) only when ``recorded(i, bs)``; with ``stall`` > 1, records are handed
    over, after the first 64 verifies, only at every ``stall``-th verify, in a burst (a sink thread
    that lags). The policy's clock
    advances ``cycle_s`` seconds a verify. Returns ``(ours, policy, worker, handed)``, ``handed`` the verify
    at which SGLang's policy took over (None: it did not)."""
    from sglang.srt.speculative.adaptive_runtime_state import AdaptiveController
    from sglang.srt.speculative.adaptive_spec_params import AdaptiveSpeculativeParams

    from sglang_eagle_cycle.patches.adaptive import FallbackPolicy

    at = [0]
    ours = CostAwarePolicy(1, cfg, clock=lambda: at[0] * cycle_s)
    worker, policy = _StandInWorker(1), FallbackPolicy(ours, AdaptiveSpeculativeParams(1, cfg))
    ctl = AdaptiveController(worker, policy)
    ctl.init_states(None)
    late: list = []
    handed = None
    for i in range(verifies):
        at[0] = i
        bs = bs_of(i)
        ctl.activate_step_by_batch(bs)
        s = worker.speculative_num_steps
        ctl.on_verify_complete(accepted(s, bs), bs)
        if handed is None and policy.active is not ours:
            handed = i
        if recorded(i, bs):
            late.append(SimpleNamespace(steps=s, bs=bs, total_ms=10.0 + 0.5 * s + bs, gap_ms=0.1, draft_ms=0.5 * s,
                                        draft_prep_ms=0.1, verify_ms=9.0, extend_ms=0.3))
        while len(late) > 2 and (i % stall == 0 or i < 64):   # a stalling sink starts on time
            ours.on_cycle_record(late.pop(0))
    return ours, policy, worker, handed


def test_a_bucket_that_never_gets_a_record_is_said_while_others_do(tmp_path, caplog):
    """Batches alternate between bs 1 and bs 8; only bs 1's cycles reach the policy as records. The
    check counted records for the whole policy, so bs 8 stayed on its launch depth for good, without a
    word. Now its 1,024th verify without a record is the same fault as a policy without any: one
    WARNING naming the bucket, SGLang's policy takes over."""
    cfg = _cfg(tmp_path, {"1": {"candidate_steps": [1, 3, 5, 7]}, "8": {"candidate_steps": [1, 2, 3]}})
    with caplog.at_level("WARNING", logger="sglang_eagle_cycle"):
        ours, policy, worker, handed = _drive_records(cfg, 3000, lambda i: 1 if i % 2 == 0 else 8,
                                                      lambda i, bs: bs == 1)
    warned = [r.getMessage() for r in caplog.records if "adaptive policy" in r.getMessage()]
    assert len(warned) == 1 and "no cycle record after 1024 verifies at bs 8, while other buckets received" in warned[0]
    assert policy.active is policy.theirs and handed == 2 * 1024 - 1   # bs 8's 1,024th verify
    assert ours._slots[1].records > 1000 and ours._slots[8].records == 0


def test_records_that_stop_after_the_first_ones_are_said(tmp_path, caplog):
    """One bucket; its cycle records stop after 400 verifies (the timing faulted after its first
    records). The policy had kept deciding on the periods measured before, for good, without a word.
    Now the bucket's 1,024th verify without a record is the fault: one WARNING, SGLang's policy takes over.
    Records that keep arriving (a control) never trip it."""
    cfg = _cfg(tmp_path, {"1": {"candidate_steps": [1, 3, 5, 7]}})
    with caplog.at_level("WARNING", logger="sglang_eagle_cycle"):
        ours, policy, worker, handed = _drive_records(cfg, 3000, lambda i: 1, lambda i, bs: i < 400)
    warned = [r.getMessage() for r in caplog.records if "adaptive policy" in r.getMessage()]
    assert len(warned) == 1 and "no cycle record in the last 1024 verifies at bs 1 (" in warned[0], warned
    # 398 arrived (the last two were still on their way, 2 cycles late); the decision at verify 416 was
    # the first to find the last of them, and the 1,024th verify after it hands over
    assert "(398 received before)" in warned[0] and ours._slots[1].records == 398
    assert policy.active is policy.theirs and handed == 416 + 1024 - 1
    caplog.clear()
    with caplog.at_level("WARNING", logger="sglang_eagle_cycle"):
        ours, policy, _, handed = _drive_records(cfg, 3000, lambda i: 1, lambda i, bs: True)
    assert policy.active is ours and handed is None and not caplog.records


def test_records_that_lag_behind_short_cycles_are_not_a_stopped_timing(tmp_path, caplog):
    """A sink thread that lags (it waits up to 5 s for a cycle's events; a busy scheduler starves it)
    delivers every record, in bursts 1,200 cycles apart at 3 ms a cycle (3.6 s). Counted in verifies
    alone, the bucket went 1,024 verifies without a new record and SGLang's policy took over for
    good; with the clock it must also have been 15 s (NO_RECORDS_QUIET_S). A timing that stops for
    good still trips once both hold: at 3 ms a cycle, 5,000 verifies (15 s) after the last record found."""
    cfg = _cfg(tmp_path, {"1": {"candidate_steps": [1, 3, 5, 7]}})
    with caplog.at_level("WARNING", logger="sglang_eagle_cycle"):
        ours, policy, _, handed = _drive_records(cfg, 6000, lambda i: 1, lambda i, bs: True, stall=1200,
                                                 cycle_s=0.003)
    assert policy.active is ours and handed is None and not caplog.records
    assert ours._slots[1].records == 4799   # verifies 0 .. 4,798: the last burst, at 4,800, two cycles late
    with caplog.at_level("WARNING", logger="sglang_eagle_cycle"):
        ours, policy, _, handed = _drive_records(cfg, 12000, lambda i: 1, lambda i, bs: i < 400,
                                                 cycle_s=0.003)
    warned = [r.getMessage() for r in caplog.records if "adaptive policy" in r.getMessage()]
    assert len(warned) == 1 and "(398 received before)" in warned[0] and policy.active is policy.theirs
    assert 416 + 5000 <= handed < 416 + 5000 + 16   # the first decision 15 s after the last record found


class _EchoSync:
    """The leader's view of BroadcastSync on one rank: each boundary's value comes back at the next;
    ``sent`` holds every value broadcast."""
    leader = True

    def __init__(self):
        self.last, self.sent = {}, []

    def exchange(self, bucket, value):
        self.sent.append(value)
        prev, self.last[bucket] = self.last.get(bucket), value
        return prev


def test_with_several_ranks_a_silent_bucket_freezes_the_leaders_depth_once(tmp_path, caplog):
    """Under tensor parallelism the leader decides and broadcasts; a fault there freezes the depth on
    every rank (SGLang's policy taking over on one rank alone would split them). Records stopping
    after 400 verifies: one WARNING, the depth broadcast stays what it was, no decision after."""
    sync = _EchoSync()
    at = [0]
    policy = CostAwarePolicy(1, _cfg(tmp_path, {"1": {"candidate_steps": [1, 3, 5, 7]}}), sync=sync,
                             clock=lambda: at[0] * 0.02)
    late: list = []
    with caplog.at_level("WARNING", logger="sglang_eagle_cycle"):
        for i in range(3000):
            at[0] = i
            s = policy.get_steps_for_batch(1)
            policy.on_verify_complete([s], 1)
            if i < 400:
                late.append(SimpleNamespace(steps=s, bs=1, total_ms=10.0 + 0.5 * s, gap_ms=0.1, draft_ms=0.5 * s,
                                            draft_prep_ms=0.1, verify_ms=9.0, extend_ms=0.3))
            if late and (len(late) > 2 or i >= 400):
                policy.on_cycle_record(late.pop(0))
    warned = [r.getMessage() for r in caplog.records if "adaptive policy" in r.getMessage()]
    assert policy.frozen and len(warned) == 1 and "no cycle record in the last 1024 verifies at bs 1" in warned[0]
    # the last record arrived after verify 401; the decision at 416 found it; the one at 416 + 1,024 raised
    raised = (416 + 1024) // 16 - 1   # that boundary, 0-based
    assert len(sync.sent) == 3000 // 16 and len(set(sync.sent[raised:])) == 1   # one depth broadcast from then on
    assert not [sw for sw in policy.switches if sw[0] >= 416 + 1024]


def test_with_several_ranks_a_leaders_bad_decision_state_is_held_not_raised(tmp_path, caplog):
    """The leader reads its decision (depth and probe flag) to broadcast it after the guarded decision
    step; a fault there (here a decision that left the depth None) had reached FallbackPolicy, which
    hands that rank alone to SGLang's policy: the other ranks would wait for a broadcast that never
    comes. Now the depth applied so far is broadcast on, one WARNING, and our policy stays active."""
    from sglang_eagle_cycle.patches.adaptive import FallbackPolicy

    class _Theirs:   # SGLang's policy: must never be asked
        candidate_steps = [1, 3, 5]

        def __getattr__(self, name):
            raise AssertionError(f"SGLang's policy was asked for {name} on the leader alone")

    sync = _EchoSync()
    ours = CostAwarePolicy(3, _cfg(tmp_path, {"1": {"candidate_steps": [1, 3, 5]}}), sync=sync)
    decide, calls = ours._decide, [0]

    def bad_decide(slot):
        calls[0] += 1
        out = decide(slot)
        if calls[0] == 5:
            slot.current = None   # a decision state no depth can be read from
        return out

    ours._decide = bad_decide
    policy = FallbackPolicy(ours, _Theirs())
    with caplog.at_level("WARNING", logger="sglang_eagle_cycle"):
        for _ in range(400):
            s = policy.get_steps_for_batch(1)
            policy.on_verify_complete([s], 1)
    warned = [r.getMessage() for r in caplog.records if "adaptive policy" in r.getMessage()]
    assert policy.active is ours and ours.frozen and len(warned) == 1 and "stays" in warned[0]
    assert len(sync.sent) == 400 // 16 and all(isinstance(v, int) and v >= 0 for v in sync.sent)
    held = sync.sent[5]
    assert held in (1, 3, 5) and set(sync.sent[5:]) == {held} and policy.get_steps_for_batch(1) == held


@pytest.mark.parametrize("nospec_bs", [None, 1, 4])
def test_speculation_off_is_said_only_against_a_baseline_of_the_running_batch_size(tmp_path, caplog, nospec_bs):
    """A bucket's nospec_tok_s is compared with the measured depths only where the batches running
    average the batch size it was measured at (nospec_bs; the bucket's key where the file names none):
    advise had written bs 4's no-spec figure under key 1, and at bs 1 the policy said "speculation
    should be off" against it (helper 63). Here every depth runs below a no-spec 400 tok/s at bs 1."""
    entry = {"candidate_steps": [1, 3], "nospec_tok_s": 400.0}
    if nospec_bs is not None:
        entry["nospec_bs"] = nospec_bs
    with caplog.at_level("INFO", logger="sglang_eagle_cycle"):
        ours, policy, _ = _drive(_cfg(tmp_path, {"1": entry}), lambda s: 1)
    said = [r.getMessage() for r in caplog.records if "speculation should be off" in r.getMessage()]
    assert policy.active is ours
    if nospec_bs == 4:
        assert said == []
    else:
        assert len(said) == 1 and "no-spec 400.0 tok/s measured at bs 1" in said[0], said


def test_a_nospec_bs_that_is_no_positive_integer_is_refused(tmp_path):
    for bad in (0, -2, 1.5, True, "4"):
        cfg = _cfg(tmp_path, {"1": {"candidate_steps": [1, 3], "nospec_tok_s": 100.0, "nospec_bs": bad}})
        with pytest.raises(ValueError, match="nospec_bs must be a positive integer"):
            CostAwarePolicy(1, cfg)


@pytest.mark.parametrize("nospec, said_expected", [(450.0, False), (550.0, True)])
def test_speculation_off_compares_per_request_where_the_batch_sizes_differ(tmp_path, caplog, nospec, said_expected):
    """The live batches (bs 4) average 0.8x the no-spec figure's batch size (nospec_bs 5), inside the
    window where it is compared. The best depth is estimated at about 413 tok/s at bs 4 (103 per request).
    Against 450 tok/s at bs 5 (90 per request) speculation is the faster, yet the policy had said
    "speculation should be off": it compared totals of two batch sizes. No-spec throughput grows at most
    in proportion to the batch, so 450 at bs 5 is at least 360 at bs 4: not said. Against 550 at bs 5
    (110 per request, at least 440 at bs 4) it still is."""
    from sglang.srt.speculative.adaptive_runtime_state import AdaptiveController
    from sglang.srt.speculative.adaptive_spec_params import AdaptiveSpeculativeParams

    from sglang_eagle_cycle.patches.adaptive import FallbackPolicy

    cfg = _cfg(tmp_path, {"4": {"candidate_steps": [1, 3], "nospec_tok_s": nospec, "nospec_bs": 5}})
    ours = CostAwarePolicy(1, cfg)
    worker, policy = _StandInWorker(1), FallbackPolicy(ours, AdaptiveSpeculativeParams(1, cfg))
    ctl = AdaptiveController(worker, policy)
    ctl.init_states(None)
    late: list = []
    with caplog.at_level("INFO", logger="sglang_eagle_cycle"):
        for _ in range(3000):
            ctl.activate_step_by_batch(4)
            s = worker.speculative_num_steps
            ctl.on_verify_complete([0, 0, 0, 0], 4)
            late.append(SimpleNamespace(steps=s, bs=4, total_ms=10.0 + 0.5 * s, gap_ms=0.1, draft_ms=0.5 * s,
                                        draft_prep_ms=0.1, verify_ms=9.0, extend_ms=0.3))
            if len(late) > 2:
                ours.on_cycle_record(late.pop(0))
    said = [r.getMessage() for r in caplog.records if "speculation should be off" in r.getMessage()]
    assert policy.active is ours
    assert len(said) == (1 if said_expected else 0), said


def test_a_bucket_keyed_0_with_a_nospec_figure_keeps_our_policy(tmp_path, caplog):
    """SGLang's config accepts the key "0" (the bucket below the next key). Without nospec_bs the
    no-spec figure's batch size had been taken as that key, 0, and the first decision divided by it:
    a ZeroDivisionError, and SGLang's policy took over. The key 0 bucket's figure counts as bs 1's."""
    cfg = _cfg(tmp_path, {"0": {"candidate_steps": [1, 3], "nospec_tok_s": 400.0}})
    with caplog.at_level("INFO", logger="sglang_eagle_cycle"):
        ours, policy, _ = _drive(cfg, lambda s: 1, verifies=600)
    assert policy.active is ours
    assert not [r for r in caplog.records if "internal error" in r.getMessage()]
    assert [r.getMessage() for r in caplog.records if "speculation should be off" in r.getMessage()]


@pytest.mark.parametrize("name", ["x/y", "../outside"])
def test_a_world_name_with_a_path_separator_is_only_a_label(sim, tmp_path, name):
    """The world's name had named the config file in the run's temporary folder: ``x/y`` ended in a
    FileNotFoundError traceback and ``../outside`` wrote the config beside that folder."""
    doc = {"name": name, "bs": 4, "candidates": [1, 2],
           "phases": [{"cycles": 100, "p": [0.8] * 7}],
           "costs": {"kind": "dense", "decode_ms": 10, "fixed_ms": 10, "slope_ms": 0.01, "extend_fixed_ms": 0.5,
                     "extend_slope_ms": 0.001, "draft_step_ms": 0.5, "other_ms": 0.3, "gap_ms": 0.05,
                     "noise": 0.03}}
    r = sim.evaluate(sim.world_from_json(doc), seed=1)
    assert r["world"] == name and 0.5 < r["cost_ratio"] <= 1.0 + 1e-9


def test_a_decode_step_too_small_for_a_throughput_is_a_world_error(sim, tmp_path):
    """costs.decode_ms 1e-320 passed as "> 0" and made the no-spec tok/s infinite: the policy's
    config refused it with a ValueError traceback in the middle of the run. Now a WorldError, exit 2."""
    import subprocess

    good = json.loads(json.dumps(sim.make_worlds(1, 0, 100)[0].to_json()))
    bad = tmp_path / "w.json"
    bad.write_text(json.dumps({**good, "costs": {**good["costs"], "decode_ms": 1e-320}}))
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "sim_adaptive.py"), "--world", str(bad)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == [f"sim_adaptive: {bad}: costs.decode_ms: expected a number >= 0.001 "
                                                "and <= 1e+06, got 1e-320"]
