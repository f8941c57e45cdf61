"""``eagle-cycle advise`` end to end: the seed case, the published table, a generated log, SGLang's adaptive config."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sglang_eagle_cycle import cli
from sglang_eagle_cycle import costmodel as cm
from sglang_eagle_cycle.cycle import format_line, make_record

REPO = Path(__file__).resolve().parents[1]
KIMI_TARGET = "configs/01-kimi-k25-ids-2-30-58-layer-output/target"


def run_advise(capsys, *argv):
    rc = cli.main(["advise", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


def advise_json(capsys, *argv) -> dict:
    rc, out, err = run_advise(capsys, *argv, "--json")
    assert rc == 0, err
    return json.loads(out)


def cand(doc: dict, steps: int) -> dict:
    return next(c for c in doc["candidates"] if c["steps"] == steps)


# --- seed case: Kimi-K2.5 at bs 1 ---------------------------------------------------------------


@pytest.fixture(scope="module")
def seed(shared_data):
    return json.loads((shared_data / "benchmarks" / "seed_kimi_k25.json").read_text())


@pytest.fixture()
def seed_inspect(seed, tmp_path):
    path = tmp_path / "seed-inspect.json"
    path.write_text(json.dumps(seed["inputs"]["inspect_json"]))
    return path


def test_seed_case(capsys, seed, seed_inspect, shared_data):
    doc = advise_json(capsys, seed_inspect, "--baseline-tok-s", seed["inputs"]["baseline_no_spec_tok_s"],
                      "--target-config", shared_data / KIMI_TARGET)
    rec = doc["recommended"]
    assert rec["steps"] in (1, 2) and rec["topk"] == 1 and rec["num_draft_tokens"] == rec["steps"] + 1
    five, two = cand(doc, 5), cand(doc, 2)
    measured_5 = seed["inputs"]["inspect_json"]["groups"][0]["tok_s"]
    assert abs(five["predicted_tok_s"] - measured_5) / measured_5 < 0.05
    held_out = seed["held_out"]["best"]["tok_s"]
    assert abs(two["predicted_tok_s"] - held_out) / held_out < 0.15
    assert two["predicted_speedup"] > 1 > five["predicted_speedup"]
    assert five["measured_tok_s"] == pytest.approx(measured_5)
    reason = rec["reason"]
    assert "verify width" in reason and "draft cost" not in reason and "draft forward" not in reason
    # the MoE shape was read from the wrapped (text_config) Kimi config
    assert "384" in doc["inputs"]["cycle_model"]["verify_shape"]
    # depths beyond the measured 5 are flagged
    assert cand(doc, 6)["extrapolated"] and not two["extrapolated"]
    assert all(c["speedup_95"][0] <= c["predicted_speedup"] <= c["speedup_95"][1] for c in doc["candidates"])


def test_seed_file_itself_is_accepted(capsys, shared_data, seed_inspect):
    whole = advise_json(capsys, shared_data / "benchmarks" / "seed_kimi_k25.json",
                        "--target-config", shared_data / KIMI_TARGET)
    direct = advise_json(capsys, seed_inspect, "--baseline-tok-s", "88.8", "--target-config", shared_data / KIMI_TARGET)
    assert whole["recommended"] == direct["recommended"]
    assert whole["inputs"]["baseline_tok_s"] == {"1": 88.8}


def test_seed_text_output_and_launch_line(capsys, shared_data):
    rc, out, err = run_advise(capsys, shared_data / "benchmarks" / "seed_kimi_k25.json",
                              "--target-config", shared_data / KIMI_TARGET)
    assert rc == 0, err
    assert "recommended at bs 1" in out and "verify width" in out
    assert "--speculative-num-steps" in out and "extrapolated" in out


def test_baseline_too_fast_recommends_off(capsys, seed_inspect, tmp_path):
    doc = advise_json(capsys, seed_inspect, "--baseline-tok-s", "150")
    assert doc["recommended"]["steps"] == 0 and doc["recommended"]["speculation"] == "off"
    assert "--speculative-algorithm" in doc["recommended"]["reason"]
    out = tmp_path / "adaptive.json"
    doc = advise_json(capsys, seed_inspect, "--baseline-tok-s", "150", "--adaptive-config", out)
    cfg = json.loads(out.read_text())
    steps = [s for k, v in cfg.items() if k.isdigit() for s in v["candidate_steps"]]
    assert 0 not in steps and steps
    assert doc["adaptive_config"]["speculation_off_buckets"] == [1]


# --- published table (SpecBundle subset) vs a naive model ----------------------------------------


def _geometric(p, steps):
    return steps + 1.0 if p >= 1 else (1 - p ** (steps + 1)) / (1 - p)


def _naive(rows, bs, fit_steps, steps):
    """Two-point constant-rate (geometric) acceptance fit + linear cycle time in steps."""
    pts = [(s, rows[s][1]) for s in fit_steps]
    grid = np.linspace(0, 0.99999, 100_001)
    err = sum((np.where(grid >= 1, s + 1, (1 - grid ** (s + 1)) / (1 - grid)) - e) ** 2 for s, e in pts)
    p = float(grid[int(np.argmin(err))])
    (s1, s2) = fit_steps
    t1, t2 = (1000.0 * bs * rows[s][1] / rows[s][0] for s in (s1, s2))
    e = _geometric(p, steps)
    return e, 1000.0 * bs * e / (t1 + (t2 - t1) * (steps - s1) / (s2 - s1))


def _table_cases(table):
    for model, benches in table.items():
        for bench, body in benches.items():
            drafts = {}
            for r in body["results"]:
                for m in r["metrics"]:
                    key = "".join(ch for ch in m["Name"].lower() if ch.isalnum())
                    if not key.startswith("wihtout"):
                        drafts.setdefault(key, m["Name"])
            for name in drafts.values():
                yield model, bench, name


def _measured(table, model, bench, draft):
    norm = "".join(ch for ch in draft.lower() if ch.isalnum())
    rows, base, bs = {}, None, None
    for r in table[model][bench]["results"]:
        for m in r["metrics"]:
            key = "".join(ch for ch in m["Name"].lower() if ch.isalnum())
            if key.startswith("wihtout"):
                base = m["output_throughput"]
            elif key == norm and r["topk"] == 1:
                rows[r["steps"]] = (m["output_throughput"], m["accept_length"])
                bs = r["batch_size"]
    return rows, base, bs


def test_specbundle_advisor_beats_naive(capsys, shared_data):
    path = shared_data / "benchmarks" / "specbundle_subset.json"
    table = json.loads(path.read_text())
    ours = {"acc": [], "tok": [], "good": 0}
    naive = {"acc": [], "tok": [], "good": 0}
    cases = list(_table_cases(table))
    assert len(cases) >= 30
    for model, bench, draft in cases:
        rows, base, bs = _measured(table, model, bench, draft)
        common = ["--table", path, "--model", model, "--benchmark", bench, "--draft", draft]
        # interpolate: fit 3 and 7 steps, predict 5
        doc = advise_json(capsys, *common, "--fit", "3,1,4", "7,1,8")
        c5 = cand(doc, 5)
        assert c5["fitted"] is False and c5["measured_tok_s"] == pytest.approx(rows[5][0], rel=1e-4)
        assert cand(doc, 3)["fitted"] is True
        assert all(x["topk"] > 1 for x in doc["inputs"]["not_modelled"])
        n_acc, n_tok = _naive(rows, bs, [3, 7], 5)
        for who, acc, tok in ((ours, c5["predicted_accept_len"], c5["predicted_tok_s"]), (naive, n_acc, n_tok)):
            who["acc"].append(abs(acc - rows[5][1]) / rows[5][1])
            who["tok"].append(abs(tok - rows[5][0]) / rows[5][0])
        # recommend among 0/3/5/7 from 3 and 5 steps
        doc = advise_json(capsys, *common, "--fit", "3,1,4", "5,1,6", "--steps-candidates", "0", "3", "5", "7")
        assert [c["steps"] for c in doc["candidates"]] == [0, 3, 5, 7]
        assert cand(doc, 7)["extrapolated"]
        measured = {0: base, **{s: rows[s][0] for s in (3, 5, 7)}}
        best = max(measured.values())
        ours["good"] += measured[doc["recommended"]["steps"]] >= 0.97 * best
        pred = {0: base, **{s: _naive(rows, bs, [3, 5], s)[1] for s in (3, 5, 7)}}
        naive["good"] += measured[max(pred, key=pred.get)] >= 0.97 * best
    score = {k: (np.mean(v["acc"]), np.mean(v["tok"]), v["good"]) for k, v in (("ours", ours), ("naive", naive))}
    (oa, ot, og), (na, nt, ng) = score["ours"], score["naive"]
    assert oa <= na and ot <= nt and og >= ng, score
    assert oa < na or ot < nt or og > ng, score


def test_eval_script_prints_the_readme_table(repo_root, shared_data):
    sys.path.insert(0, str(repo_root / "benchmarks"))
    try:
        import eval_specbundle as ev
    finally:
        sys.path.pop(0)
    records = ev.evaluate(json.loads((shared_data / "benchmarks" / "specbundle_subset.json").read_text()))
    summary = ev.summarise(records)
    text = ev.markdown(summary)
    assert summary["cases"] == len(records) >= 30
    assert summary["ours"]["accept_len_mape_pct"] <= summary["naive"]["accept_len_mape_pct"]
    assert f"{summary['ours']['good_recommendations']}/{summary['cases']}" in text
    for s in ("steps_5", "steps_7"):   # the intervals hold the published figures
        iv = summary["ours_intervals"][s]
        assert iv["held"] >= 0.9 * summary["cases"] and 5.0 < iv["median_width_pct"] < 20.0, iv
        assert f"{iv['held']}/{summary['cases']} ({iv['median_width_pct']:.1f}%)" in text


# --- a generated cycle log with known p_j and phase costs -----------------------------------------

P_TRUE = [0.9, 0.8, 0.7, 0.3, 0.2, 0.1]
BS = 4
DRAFT_STEP, OTHER = 0.90, 0.30


def _verify(n):  # ms, linear in verified tokens
    return 8.0 + 0.25 * n


def _extend(n):
    return 0.40 + 0.02 * n


def _true_cycle(steps):
    n = BS * (steps + 1)
    return (steps - 1) * DRAFT_STEP + _verify(n) + _extend(n) + OTHER


def _write_log(path: Path, runs: dict[int, int], seed: int = 0, p=P_TRUE) -> None:
    rng = np.random.default_rng(seed)
    lines, cycle = [], 0
    for steps, cycles in runs.items():
        n = BS * (steps + 1)
        phases = {"draft_ms": (steps - 1) * DRAFT_STEP if steps > 1 else None, "verify_ms": _verify(n),
                  "verify_fwd_ms": _verify(n) - 0.2, "extend_ms": _extend(n), "total_ms": _true_cycle(steps)}
        accepted = rng.random((cycles, BS, steps)) < np.array(list(p)[:steps])
        lengths = 1 + np.cumprod(accepted, axis=2).sum(axis=2)
        for c in range(cycles):
            cycle += 1
            rec = make_record(cycle=cycle, config=(BS, steps, 1, steps + 1), phases_ms=phases,
                              accepts=[int(x) for x in lengths[c]], graph=True)
            lines.append(f"[2026-01-01 10:00:00 TP0] {format_line(rec)}")
    path.write_text("\n".join(lines) + "\n")


def test_acceptance_line_says_how_deep_the_data_go(capsys, tmp_path, seed_inspect):
    # the seed (a mean accept length at 5 steps, no histogram) had read "the deepest any request reached",
    # and a 2-step log beside it "to draft position 2" although the 5-step run's mean is used past it
    def head(*argv):
        rc, out, err = run_advise(capsys, *argv)
        assert rc == 0, err
        return " ".join(out.split("cycle time")[0].split())

    assert "to draft position 5 (the deepest run's depth)" in head(seed_inspect, "--baseline-tok-s", "88.8")
    log = tmp_path / "two.log"
    _write_log(log, {2: 600})
    assert "to draft position 2 (the deepest any request reached), 2400 request-cycles" in head(
        log, "--baseline-tok-s", "400")
    import random

    from cyclegen import generate, log_lines

    one = tmp_path / "bs1.log"   # a 2-step run at the seed's batch size: counted to 2, the seed's mean past it
    one.write_text("\n".join(log_lines(generate(random.Random(3), bs=1, steps=2, cycles=800, p=[0.7, 0.55],
                                                verify_ms=21.0).records)) + "\n")
    assert "to draft position 5 (per request to position 2, the deepest any request of those runs reached)" in head(
        one, seed_inspect, "--baseline-tok-s", "88.8")


def test_generated_log_recommends_the_exact_optimum(capsys, tmp_path):
    log = tmp_path / "server.log"
    _write_log(log, {2: 1000, 6: 3000})
    base_tok = 1000.0 * BS / _verify(BS)  # the no-spec step is the one-token-per-request verify
    truth = {0: base_tok, **{s: 1000.0 * BS * cm.expected_accept_len(P_TRUE[:s]) / _true_cycle(s) for s in range(1, 7)}}
    best = max(truth, key=truth.get)
    ranked = sorted(truth.values(), reverse=True)
    assert ranked[0] > 1.02 * ranked[1], "test design: the optimum must stand out of sampling noise"
    doc = advise_json(capsys, log, "--baseline-tok-s", f"{base_tok:.6f}", "--max-steps", "6")
    assert doc["recommended"]["steps"] == best
    for s in range(1, 7):
        c = cand(doc, s)
        assert c["predicted_cycle_ms"] == pytest.approx(_true_cycle(s), rel=0.005)  # median over hypotheses
        assert c["predicted_tok_s"] == pytest.approx(truth[s], rel=0.02)
        assert c["tok_s_95"][0] <= c["predicted_tok_s"] <= c["tok_s_95"][1]
    ppa = doc["inputs"]["acceptance"]["per_position_acceptance"]
    for q, p in zip(ppa, P_TRUE):
        assert q["low"] - 0.01 <= p <= q["high"] + 0.01
    assert doc["inputs"]["acceptance"]["source"] == "per-request accept lengths"


def test_max_steps_given_bounds_the_candidates_not_the_model(capsys, tmp_path):
    # helper 39: a measured depth past an explicit --max-steps was still a candidate and was recommended
    log = tmp_path / "server.log"
    _write_log(log, {2: 1000, 6: 3000})
    base_tok = 1000.0 * BS / _verify(BS)
    limited = advise_json(capsys, log, "--baseline-tok-s", f"{base_tok:.6f}", "--max-steps", "3")
    assert [c["steps"] for c in limited["candidates"]] == [0, 1, 2, 3]
    assert limited["recommended"]["steps"] <= 3
    assert any("6 steps, beyond --max-steps 3" in n for n in limited["inputs"]["notes"])
    # the 6-step run still informs the model: acceptance measured to position 6
    assert len(limited["inputs"]["acceptance"]["per_position_acceptance"]) >= 6
    # without --max-steps every measured depth stays a candidate (default 1..10 and the measured)
    free = advise_json(capsys, log, "--baseline-tok-s", f"{base_tok:.6f}")
    assert [c["steps"] for c in free["candidates"]] == list(range(0, 11))


@pytest.mark.parametrize("p, words", [((1.0,) * 6, "every request accepted every draft token (accept length 4)"),
                                       ((0.0,) * 6, "mean accept length 1.00, practically no draft token")])
def test_a_broken_draft_is_named_in_the_advice(capsys, tmp_path, p, words):
    # helper 39: inspect flagged these runs as a broken draft; advise recommended on them without a word
    log = tmp_path / "server.log"
    _write_log(log, {3: 200}, p=p)
    doc = advise_json(capsys, log, "--baseline-tok-s", "300")
    broken = [n for n in doc["inputs"]["notes"] if "the draft looks broken" in n]
    assert len(broken) == 1 and words in broken[0] and "3 steps, bs 4" in broken[0]
    cli.main(["advise", str(log), "--baseline-tok-s", "300"])
    assert "the draft looks broken" in " ".join(capsys.readouterr().out.split())
    # a working draft gets no such note
    good = tmp_path / "good.log"
    _write_log(good, {3: 200})
    assert not [n for n in advise_json(capsys, good, "--baseline-tok-s", "300")["inputs"]["notes"]
                if "looks broken" in n]
    # two cycles (8 request-cycles, under inspect's 10) are no finding, as in inspect (helper 81)
    short = tmp_path / "short.log"
    _write_log(short, {3: 2}, p=p)
    assert not [n for n in advise_json(capsys, short, "--baseline-tok-s", "300")["inputs"]["notes"]
                if "looks broken" in n]


def test_bench_records_and_no_spec_log_inputs(capsys, tmp_path):
    """Bench JSONL with cycle groups (from inspect of the generated log) gives the same advice."""
    from sglang_eagle_cycle.report import inspect_paths

    log = tmp_path / "server.log"
    _write_log(log, {2: 500, 6: 1500}, seed=1)
    groups = {g["steps"]: g for g in inspect_paths([log])["groups"]}
    base_tok = 1000.0 * BS / _verify(BS)
    recs = [{"schema": "eagle-cycle-bench/1", "model": "m", "draft": "d", "steps": 0, "topk": 1,
             "num_draft_tokens": 0, "concurrency": BS, "status": "ok", "output_tok_s": base_tok}]
    for s, g in groups.items():
        recs.append({"schema": "eagle-cycle-bench/1", "model": "m", "draft": "d", "steps": s, "topk": 1,
                     "num_draft_tokens": s + 1, "concurrency": BS, "status": "ok",
                     "output_tok_s": g["tok_s"], "accept_len_mean": g["accept_len_mean"],
                     "accept_hist": g["accept_hist"], "cycle": g})
    recs.append({"schema": "eagle-cycle-bench/1", "model": "m", "draft": "d", "steps": 3, "topk": 1,
                 "concurrency": BS, "status": "failed", "error": "crashed", "output_tok_s": None})
    bench = tmp_path / "bench.jsonl"
    bench.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    from_bench = advise_json(capsys, bench, "--max-steps", "6")
    from_log = advise_json(capsys, log, "--baseline-tok-s", f"{base_tok:.6f}", "--max-steps", "6")
    assert from_bench["recommended"]["steps"] == from_log["recommended"]["steps"]
    filtered = advise_json(capsys, bench, "--max-steps", "6", "--model", "M", "--draft", "D")
    assert filtered["recommended"] == from_bench["recommended"]
    assert from_bench["inputs"]["baseline_tok_s"] == {str(BS): pytest.approx(base_tok)}
    # the failed 3-step record is left out, and said so (it had vanished without a word: helper 35)
    assert [n for n in from_bench["inputs"]["notes"] if "status is not ok" in n] == \
        [f"{bench}: 1 record(s) whose status is not ok left out: {bench}:{len(recs)} (steps 3, status 'failed')"]
    # when every speculative record failed, the refusal says so (it said only "no speculative run")
    failed = tmp_path / "failed.jsonl"
    failed.write_text("\n".join(json.dumps(r) for r in [recs[0], recs[-1]]) + "\n")
    assert_refused(capsys, failed, match=f"no speculative run found in the inputs ({failed}: 1 record(s) whose status "
                                         f"is not ok left out: {failed}:2 (steps 3, status 'failed'))")
    # a no-spec server log (stock Decode batch lines without accept len) supplies the baseline
    plain = tmp_path / "nospec.log"
    plain.write_text("".join(
        f"[2026-01-01 10:00:{i:02d}] Decode batch, #running-req: {BS}, #token: 900, token usage: 0.01, "
        f"cuda graph: True, gen throughput (token/s): {base_tok:.2f}, #queue-req: 0\n" for i in range(5)))
    with_log = advise_json(capsys, log, plain, "--max-steps", "6")
    assert with_log["recommended"]["steps"] == from_log["recommended"]["steps"]
    assert with_log["inputs"]["baseline_tok_s"][str(BS)] == pytest.approx(base_tok, rel=1e-3)


def test_fifo_inputs_twin_files_and_stdin_twice(capsys, tmp_path):
    """A FIFO (or <(cmd)) is read once: it used to hang advise (read again after the bench-JSONL sniff)."""
    import threading

    log = tmp_path / "server.log"
    _write_log(log, {2: 300, 6: 900}, seed=2)
    base = ["--baseline-tok-s", "100", "--max-steps", "6"]
    plain = advise_json(capsys, log, *base)
    for content in (log.read_bytes(), None):
        fifo = tmp_path / f"fifo{content is None}"
        os.mkfifo(fifo)
        data = content
        if data is None:   # bench JSONL through a pipe: was "underlying stream is not seekable"
            rec = {"schema": "eagle-cycle-bench/1", "model": "m", "draft": "d", "steps": 2, "topk": 1,
                   "num_draft_tokens": 3, "concurrency": BS, "status": "ok", "output_tok_s": 150.0,
                   "accept_len_mean": 2.0}
            data = (json.dumps(rec) + "\n").encode()
        writer = threading.Thread(target=lambda: fifo.write_bytes(data), daemon=True)
        writer.start()
        proc = subprocess.run([sys.executable, "-m", "sglang_eagle_cycle.cli", "advise", str(fifo), *base, "--json"],
                              capture_output=True, text=True, timeout=60)   # a regression hangs: fail instead
        writer.join(timeout=10)
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
        assert rc == 0, err
        if content is not None:
            assert json.loads(out)["recommended"] == plain["recommended"]
        else:
            assert json.loads(out)["inputs"]["runs"][0]["steps"] == 2
    # the same file twice: read once, with a warning (it counted every cycle twice)
    rc, out, err = run_advise(capsys, log, tmp_path / ".." / tmp_path.name / "server.log", *base, "--json")
    assert rc == 0 and err == f"eagle-cycle advise: warning: {tmp_path / '..' / tmp_path.name / 'server.log'}: " \
                              f"same file as {log}; read once\n"
    assert json.loads(out)["inputs"]["acceptance"] == plain["inputs"]["acceptance"]
    rc, _, err = run_advise(capsys, "-", "-", *base)
    assert rc == 2 and err == "eagle-cycle advise: error: stdin (-) can be read only once\n"


# --- SGLang's own adaptive config loader ----------------------------------------------------------


@pytest.mark.parametrize("server_max_bs", [None, 256])
def test_adaptive_config_loaded_by_sglang(capsys, tmp_path, seed_inspect, shared_data, server_max_bs):
    asp = pytest.importorskip("sglang.srt.speculative.adaptive_spec_params")
    from types import SimpleNamespace

    from sglang.srt.arg_groups.cuda_graph_hook import generate_decode_cuda_graph_batch_sizes

    sizes = [1, 2, 3, 5, 8, 9, 16, 33]
    out = tmp_path / "adaptive.json"
    doc = advise_json(capsys, seed_inspect, "--baseline-tok-s", "88.8", "--target-config", shared_data / KIMI_TARGET,
                      "--batch-sizes", *sizes, "--adaptive-config", out)
    launch = doc["adaptive_config"]["speculative_num_steps"]
    cfg_steps = asp.resolve_candidate_steps_from_config(str(out))
    assert launch in cfg_steps and 0 not in cfg_steps
    params = asp.AdaptiveSpeculativeParams(initial_steps=launch, cfg_path=str(out))
    graph_bs = generate_decode_cuda_graph_batch_sizes(
        SimpleNamespace(disable_cuda_graph_padding=False, speculative_algorithm="EAGLE3"), server_max_bs or max(sizes))
    params.set_cuda_graph_bs(graph_bs)
    per_bs = {b["bs"]: b for b in doc["per_batch_size"]}
    assert sorted(per_bs) == sizes
    keys = sorted(int(k) for k in json.loads(out.read_text()) if k.isdigit())
    assert keys[0] == 1
    hit = set()
    for b in sizes:
        entry = per_bs[b]
        got = params.get_steps_for_batch(b)
        assert got == entry["adaptive_steps"] > 0
        if entry["recommended"]["steps"] > 0:
            assert got == entry["recommended"]["steps"]
        hit.add(params._find_closest_bs(params._pad_to_cuda_graph_bs(b)))
    assert hit == set(keys)  # every bucket written is one some batch size lands in


def test_adaptive_config_json_says_what_sglang_runs_where_batch_sizes_share_a_bucket(capsys, tmp_path):
    """bs 3 and 4 pad to the graph size 4, one bucket pinning bs 4's depth: the JSON's
    ``adaptive_steps`` for bs 3 is that depth (it said bs 3's own, which SGLang never runs there),
    and the merge note the text output prints is in the JSON too."""
    asp = pytest.importorskip("sglang.srt.speculative.adaptive_spec_params")
    import random

    sys.path.insert(0, str(REPO / "benchmarks"))
    import advise_worlds as aw

    rng = random.Random(1)
    p = (0.85, 0.8, 0.78, 0.75, 0.72, 0.7, 0.68, 0.66, 0.64, 0.62, 0.6, 0.58)
    inputs, base = [], []
    for bs in (1, 4, 16):
        w = aw.World(kind="dense", bs=bs, p=p, decode_ms=1.0, fixed_ms=8.0, slope_ms=0.15, draft_step_ms=0.6,
                     noise=0.02)
        w.decode_ms = w.shape(bs)
        for steps in (1, 2, 4, 6):
            path = tmp_path / f"bs{bs}_s{steps}.log"
            path.write_text("\n".join(w.log_lines(steps, 300, rng)) + "\n")
            inputs.append(path)
        base.append(f"{bs}:{w.true_tok_s(0):.2f}")
    graphs = [1, 2, 4, 8, 16, 32]
    out = tmp_path / "adaptive.json"
    doc = advise_json(capsys, *inputs, "--baseline-tok-s", *base, "--batch-sizes", 1, 3, 4, 16,
                      "--cuda-graph-bs", *graphs, "--adaptive-config", out)
    per_bs = {b["bs"]: b for b in doc["per_batch_size"]}
    assert per_bs[3]["recommended"]["steps"] != per_bs[4]["recommended"]["steps"]   # the case at hand
    params = asp.AdaptiveSpeculativeParams(doc["adaptive_config"]["speculative_num_steps"], str(out))
    params.set_cuda_graph_bs(graphs)
    for bs, entry in per_bs.items():
        assert params.get_steps_for_batch(bs) == entry["adaptive_steps"], bs
    assert per_bs[3]["adaptive_steps"] == per_bs[4]["recommended"]["steps"]
    assert any(n.startswith("bs 3, 4 pad to 4") for n in doc["adaptive_config"]["notes"])


def test_adaptive_config_never_overwrites(capsys, tmp_path, seed_inspect):
    out = tmp_path / "mine.json"
    out.write_text('{"1": {"candidate_steps": [3]}}')
    rc, stdout, err = run_advise(capsys, seed_inspect, "--baseline-tok-s", "88.8", "--adaptive-config", out)
    assert rc == 2 and "exists" in err and err.count("\n") == 1
    assert out.read_text() == '{"1": {"candidate_steps": [3]}}'
    rc, stdout, err = run_advise(capsys, seed_inspect, "--baseline-tok-s", "88.8", "--adaptive-config", out, "--force")
    assert rc == 0 and "_eagle_cycle" in json.loads(out.read_text())
    assert "--speculative-num-steps" in stdout
    rc, _, err = run_advise(capsys, seed_inspect, "--baseline-tok-s", "88.8", "--adaptive-config", seed_inspect, "--force")
    assert rc == 2 and "input" in err


@pytest.mark.parametrize("name", ["my plan [red].json", "it's\nplan.json"])
def test_adaptive_launch_line_names_the_file_as_one_shell_word(capsys, tmp_path, seed_inspect, name):
    # the launch line printed a path with spaces bare, and a line feed raw (helper 79): it is a flag
    # to copy, so the shell must read the path back from it, whatever the name holds
    out = tmp_path / name
    for flag in ("--adaptive-config", "--adaptive-candidates"):
        rc, stdout, err = run_advise(capsys, seed_inspect, "--baseline-tok-s", "88.8", flag, out, "--force")
        assert rc == 0, err
        line = next(ln for ln in stdout.splitlines() if ln.startswith("launch with:"))
        word = line.split("--speculative-adaptive-config ", 1)[1].split(" --speculative-num-steps")[0]
        back = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, check=True).stdout
        assert back == os.fsencode(out), (line, back)
        out.unlink()


def _option_input_cases(tmp_path, shared_data):
    """Each option naming a file advise reads, as ``(argv, the file read, an --adaptive-config naming it)``."""
    table = tmp_path / "table.json"
    shutil.copy(shared_data / "benchmarks" / "specbundle_subset.json", table)
    seed_file = tmp_path / "seed.json"
    shutil.copy(shared_data / "benchmarks" / "seed_kimi_k25.json", seed_file)
    target = tmp_path / "target"
    shutil.copytree(shared_data / KIMI_TARGET, target)
    config = target / "config.json"
    (tmp_path / "link.json").symlink_to(config)
    os.link(table, tmp_path / "hard.json")
    (tmp_path / "sub").mkdir()
    by_table = ["--table", table, "--model", "Llama-3.1-8B-Instruct", "--benchmark", "gsm8k", "--draft", "specforge"]
    return {
        "--table": (by_table, table, table),
        "--table, output a hard link to it": (by_table, table, tmp_path / "hard.json"),
        "--target-config file": ([seed_file, "--target-config", config], config, config),
        "--target-config dir": ([seed_file, "--target-config", target], config, config),
        "--target-config, output a symlink to it": ([seed_file, "--target-config", config], config,
                                                    tmp_path / "link.json"),
        "--target-config via a symlink": ([seed_file, "--target-config", tmp_path / "link.json"], config,
                                          tmp_path / "sub" / ".." / "target" / "config.json"),
    }


@pytest.mark.parametrize("case", ["--table", "--table, output a hard link to it", "--target-config file",
                                  "--target-config dir", "--target-config, output a symlink to it",
                                  "--target-config via a symlink"])
def test_adaptive_config_never_replaces_an_option_input(capsys, tmp_path, shared_data, case):
    argv, read, out = _option_input_cases(tmp_path, shared_data)[case]
    before = read.read_bytes()
    for force in ([], ["--force"]):
        err = assert_refused(capsys, *argv, "--adaptive-config", out, *force, match="is one of the inputs (--")
        assert err.startswith(f"eagle-cycle advise: error: --adaptive-config {out}: is one of the inputs"), err
        assert read.read_bytes() == before
    # the same command with another output file works: the refusal is about the path alone
    rc, stdout, err = run_advise(capsys, *argv, "--adaptive-config", tmp_path / "plan.json")
    assert rc == 0, err
    assert "_eagle_cycle" in json.loads((tmp_path / "plan.json").read_text())
    assert read.read_bytes() == before


# --- bad input --------------------------------------------------------------------------------------


def _bad_cases(tmp_path, shared_data):
    table = shared_data / "benchmarks" / "specbundle_subset.json"
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(b"\x00\xff{not json")
    notdoc = tmp_path / "list.json"
    notdoc.write_text("[1, 2]")
    badgroup = tmp_path / "bad-group.json"
    badgroup.write_text(json.dumps({"groups": [{"bs": 1, "steps": 2, "accept_len_mean": 7.0, "phases": {}}]}))
    empty = tmp_path / "empty.log"
    empty.write_text("")
    two = tmp_path / "two.jsonl"
    two.write_text("\n".join(json.dumps({"schema": "eagle-cycle-bench/1", "model": m, "draft": "d", "steps": 2,
                                         "topk": 1, "concurrency": 1, "status": "ok", "output_tok_s": 50.0,
                                         "accept_len_mean": 1.5}) for m in ("a", "b")))
    return {
        "missing": [tmp_path / "nope.json"],
        "directory": [tmp_path],
        "garbage json": [garbage],
        "not a document": [notdoc],
        "impossible accept length": [badgroup, "--baseline-tok-s", "50"],
        "empty log": [empty],
        "bench of two models": [two],
        "no input": [],
        "table without model": ["--table", table, "--benchmark", "gsm8k"],
        "ambiguous draft": ["--table", table, "--model", "Llama-3.1-8B-Instruct", "--benchmark", "gsm8k"],
        "unknown draft": ["--table", table, "--model", "Llama-3.1-8B-Instruct", "--benchmark", "gsm8k", "--draft", "zzz"],
        "tree fit row": ["--table", table, "--model", "Llama-3.1-8B-Instruct", "--benchmark", "gsm8k",
                         "--draft", "specforge", "--fit", "5,3,6"],
        "bad fit syntax": ["--table", table, "--model", "x", "--benchmark", "y", "--fit", "5-1-6"],
        "negative baseline": ["--table", table, "--model", "x", "--benchmark", "y", "--baseline-tok-s", "-3"],
        "bad target config": ["--table", table, "--model", "Llama-3.1-8B-Instruct", "--benchmark", "gsm8k",
                              "--draft", "specforge", "--target-config", garbage],
    }


def test_bad_input_exits_2_with_one_line(capsys, tmp_path, shared_data):
    for name, argv in _bad_cases(tmp_path, shared_data).items():
        try:
            rc, out, err = run_advise(capsys, *argv)
        except SystemExit as exc:  # argparse errors exit 2 from the parser
            rc = exc.code
            out, err = capsys.readouterr()
        assert rc == 2, (name, err)
        assert err.count("\n") == 1 and "Traceback" not in err, (name, err)
        assert out == "", name


# --- adversarial inputs: each refused with one line, exit 2, no traceback ------------------------


def assert_refused(capsys, *argv, match: str) -> str:
    """Run advise; it must exit 2 with exactly one stderr line containing ``match`` and no stdout."""
    try:
        rc, out, err = run_advise(capsys, *argv)
    except SystemExit as exc:  # argparse type errors exit from the parser
        rc = exc.code
        out, err = capsys.readouterr()
    assert rc == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert match in err, err
    assert out == ""
    return err


def _variant(seed, tmp_path, name, edit) -> Path:
    """The seed's inspect document (or, with ``edit(doc, wrapper)``, the whole seed file) changed by ``edit``."""
    whole = json.loads(json.dumps(seed))
    edit(whole["inputs"]["inspect_json"]["groups"][0], whole)
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(whole))
    return path


def test_deeply_nested_json_is_invalid_json(capsys, tmp_path, seed_inspect, shared_data):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000)
    assert_refused(capsys, deep, match="deep.json: invalid JSON")
    assert_refused(capsys, "--table", deep, "--model", "m", "--benchmark", "b", match="deep.json: invalid JSON")
    assert_refused(capsys, seed_inspect, "--baseline-tok-s", "88.8", "--target-config", deep,
                   match="deep.json: invalid JSON")
    bench = tmp_path / "bench.jsonl"
    bench.write_text(json.dumps({"schema": "eagle-cycle-bench/1", "status": "ok"}) + "\n" + "[" * 100_000 + "\n")
    assert_refused(capsys, bench, match="bench.jsonl:2: invalid JSON")
    huge_int = tmp_path / "huge-int.json"
    huge_int.write_text('{"groups": [{"bs": 1' + "0" * 5000 + "}]}")
    assert_refused(capsys, huge_int, match="huge-int.json: invalid JSON")


@pytest.mark.parametrize("value", ["inf", "1e400", "nan", "1:inf"])
def test_non_finite_baseline_option_refused(capsys, seed_inspect, value):
    assert_refused(capsys, seed_inspect, "--baseline-tok-s", value, match="finite")


@pytest.mark.parametrize("value, match", [
    ("0:88", "expected a batch size >= 1 before the colon, got '0:88'"),
    ("1e-9", "1e-09 tok/s is not a throughput (expected 0.01 to 1e+08)"),
    ("-5", "expected a positive finite throughput, got '-5'"),
    # Python's int() and float() read 1_0 as 10 and full-width digits as digits: not what was typed
    ("1_0:100", "expected TOK_S or BS:TOK_S, got '1_0:100'"),
    ("1:1_00", "expected TOK_S or BS:TOK_S, got '1:1_00'"),
    ("\uff11:100", "expected TOK_S or BS:TOK_S, got '\uff11:100'"),
])
def test_bad_baseline_option_says_which_part_is_wrong(capsys, seed_inspect, value, match):
    assert_refused(capsys, seed_inspect, "--baseline-tok-s", value, match=match)


def test_an_empty_input_is_named_as_given(capsys, tmp_path):
    fifo = tmp_path / "empty.fifo"
    os.mkfifo(fifo)
    import threading

    threading.Thread(target=lambda: open(fifo, "w").close(), daemon=True).start()
    assert_refused(capsys, fifo, match=f"{fifo}: empty file")


@pytest.mark.parametrize("value", ["abc", [1], 0, True, -1, {"x": 1}])
def test_bad_seed_wrapper_baseline_refused(capsys, seed, tmp_path, value):
    path = _variant(seed, tmp_path, "seed", lambda g, w: w["inputs"].update(baseline_no_spec_tok_s=value))
    assert_refused(capsys, path, match="inputs.baseline_no_spec_tok_s")


def test_infinite_seed_wrapper_baseline_refused(capsys, shared_data, tmp_path):
    text = (shared_data / "benchmarks" / "seed_kimi_k25.json").read_text()
    assert text.count('"baseline_no_spec_tok_s": 88.8') == 1
    path = tmp_path / "seed-inf.json"
    path.write_text(text.replace('"baseline_no_spec_tok_s": 88.8', '"baseline_no_spec_tok_s": Infinity'))
    assert_refused(capsys, path, match="inputs.baseline_no_spec_tok_s: expected a finite number")
    path.write_text(text.replace('"baseline_no_spec_tok_s": 88.8', '"baseline_no_spec_tok_s": null'))
    doc = advise_json(capsys, path)  # null: simply no baseline
    assert doc["inputs"]["baseline_tok_s"] == {} and doc["recommended"]["steps"] > 0


def test_zero_and_negative_phase_means_refused(capsys, seed, tmp_path):
    def zero_all(g, w):
        for ph in g["phases"].values():
            ph["mean"] = 0
    assert_refused(capsys, _variant(seed, tmp_path, "zero", zero_all), "--baseline-tok-s", "88.8",
                   match="phases.verify_ms: must be positive, got 0")
    for phase in ("verify_ms", "draft_ms", "extend_ms", "other_ms", "total_ms"):
        path = _variant(seed, tmp_path, phase, lambda g, w: g["phases"][phase].update(mean=-g["phases"][phase]["mean"]))
        assert_refused(capsys, path, "--baseline-tok-s", "88.8", match=f"phases.{phase}: must")


def test_a_measured_throughput_of_zero_is_refused(capsys, seed, tmp_path):
    # a group's tok_s of 0 was taken as measured: the row showed 0.0 against a prediction of 351.5
    # with no note (a throughput of 100 did get the poor-fit note); inspect writes null, never 0
    path = _variant(seed, tmp_path, "tok0", lambda g, w: g.update(tok_s=0))
    assert_refused(capsys, path, "--baseline-tok-s", "88.8", match="tok_s: must be positive, got 0")


def test_huge_depths_are_refused_quickly(capsys, seed, seed_inspect, tmp_path):
    import time

    start = time.monotonic()
    assert_refused(capsys, seed_inspect, "--max-steps", "1000000", match="expected an integer in 1..64")
    assert_refused(capsys, seed_inspect, "--steps-candidates", "3", "1000000", match="in 0..64")
    path = _variant(seed, tmp_path, "deep-steps", lambda g, w: g.update(steps=10 ** 9))
    assert_refused(capsys, path, "--baseline-tok-s", "88.8", match="groups[0].steps: expected an integer in 0..64")
    bench = tmp_path / "bench.jsonl"
    bench.write_text(json.dumps({"schema": "eagle-cycle-bench/1", "model": "m", "draft": "d", "steps": 10 ** 9,
                                 "topk": 1, "concurrency": 1, "status": "ok", "output_tok_s": 70.0}) + "\n")
    assert_refused(capsys, bench, match="steps: expected an integer in 0..64")
    assert_refused(capsys, seed_inspect, "--batch-sizes", str(10 ** 9), "--adaptive-config", tmp_path / "a.json",
                   match="--batch-sizes: expected an integer in 1..65536")
    assert time.monotonic() - start < 20
    assert not (tmp_path / "a.json").exists()
    # 64 itself is allowed
    doc = advise_json(capsys, seed_inspect, "--baseline-tok-s", "88.8", "--max-steps", "64")
    assert max(c["steps"] for c in doc["candidates"]) == 64


@pytest.mark.parametrize("hist,match", [
    ("x", "accept_hist: expected an object"),
    ({"a": 1}, "accept_hist: key 'a' is not an accept length"),
    ({"1": -3, "2": 5}, "accept_hist[1]: expected an integer in 0.."),
    ({"1": 2, "99": 3}, "accept length 99 impossible with 5 steps"),
    ({"1": 2.5}, "accept_hist[1]: expected an integer"),
])
def test_bad_accept_hist_refused(capsys, seed, tmp_path, hist, match):
    path = _variant(seed, tmp_path, "hist", lambda g, w: g.update(accept_hist=hist))
    assert_refused(capsys, path, "--baseline-tok-s", "88.8", match=match)


@pytest.mark.parametrize("ppa,match", [
    ([1.5, -1, None], "per_position_acceptance[0]: expected an object"),
    ("x", "per_position_acceptance: expected a list"),
    ([{"j": 1, "p": 1.5, "accepted": None, "reached": None}], "p: a probability must be in 0..1"),
    ([{"j": 1, "p": -0.1}], "per_position_acceptance[0].p: must not be negative"),
    ([{"j": 9, "p": 0.5, "accepted": 1, "reached": 2}], "per_position_acceptance[0].j: expected an integer in 1..5"),
    ([{"j": 1, "p": 0.5, "accepted": -1, "reached": 2}], "accepted: expected an integer in 0.."),
    ([{"j": 1, "p": 0.5, "accepted": 3, "reached": 2}], "accepted 3 > reached 2"),
    ([{"j": 1, "accepted": 1, "reached": 2}, {"j": 1, "accepted": 1, "reached": 2}], "position 1 given twice"),
    # was used as p2 = 1.0 (a 6.47x prediction)
    ([{"j": 1, "accepted": 6, "reached": 10}, {"j": 2, "accepted": 100, "reached": 100}],
     "per_position_acceptance: 100 reached position 2 but only 6 accepted position 1"),
])
def test_bad_per_position_acceptance_refused(capsys, seed, tmp_path, ppa, match):
    path = _variant(seed, tmp_path, "ppa", lambda g, w: g.update(per_position_acceptance=ppa))
    assert_refused(capsys, path, "--baseline-tok-s", "88.8", match=match)


def test_valid_counts_are_still_used(capsys, seed, tmp_path):
    # accept lengths 1..6 at 5 steps with mean 2.1 over 1000 request-cycles
    hist = {"1": 460, "2": 250, "3": 130, "4": 80, "5": 50, "6": 30}
    assert sum(int(k) * v for k, v in hist.items()) == 2100
    path = _variant(seed, tmp_path, "hist-ok", lambda g, w: g.update(accept_hist=hist))
    doc = advise_json(capsys, path, "--baseline-tok-s", "88.8")
    acc = doc["inputs"]["acceptance"]
    assert acc["source"] == "per-request accept lengths" and acc["samples"] == 1000
    assert acc["per_position_acceptance"][0]["p"] == pytest.approx(540 / 1000)


def test_adaptive_config_dash_refused(capsys, seed_inspect, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert_refused(capsys, seed_inspect, "--baseline-tok-s", "88.8", "--adaptive-config", "-",
                   match="--adaptive-config -: stdout carries the advice")
    assert not (tmp_path / "-").exists()


def test_duplicate_and_conflicting_options(capsys, shared_data, seed_inspect):
    seed_file = shared_data / "benchmarks" / "seed_kimi_k25.json"
    assert_refused(capsys, seed_inspect, "--baseline-tok-s", "1:88", "1:90", match="given twice for bs 1 (88 and 90)")
    assert_refused(capsys, seed_inspect, "--baseline-tok-s", "88", "1:90", match="given twice for bs 1")
    assert_refused(capsys, seed_inspect, "--baseline-tok-s", "88", "89", match="given twice without a batch size")
    # a command-line baseline replacing the seed file's own is said, not silent
    doc = advise_json(capsys, seed_file, "--baseline-tok-s", "90")
    assert doc["inputs"]["baseline_tok_s"] == {"1": 90.0}
    assert any("90 tok/s at bs 1 replaces the inputs' 88.8" in n for n in doc["inputs"]["notes"])
    same = advise_json(capsys, seed_file, "--baseline-tok-s", "88.8")
    assert not any("replaces" in n for n in same["inputs"]["notes"])
    table = shared_data / "benchmarks" / "specbundle_subset.json"
    assert_refused(capsys, "--table", table, "--model", "Llama-3.1-8B-Instruct", "--benchmark", "gsm8k",
                   "--draft", "specforge", "--fit", "3,1,4", "3,1,4", match="--fit 3,1,4 given twice")


def test_duplicated_table_rows(capsys, shared_data, tmp_path):
    table = json.loads((shared_data / "benchmarks" / "specbundle_subset.json").read_text())
    common = ["--model", "Llama-3.1-8B-Instruct", "--benchmark", "gsm8k", "--draft", "specforge",
              "--fit", "3,1,4", "7,1,8"]
    results = table["Llama-3.1-8B-Instruct"]["gsm8k"]["results"]
    row = next(r for r in results if (r["steps"], r["topk"]) == (5, 1))
    original = advise_json(capsys, "--table", shared_data / "benchmarks" / "specbundle_subset.json", *common)
    results.append(json.loads(json.dumps(row)))  # an identical repeat changes nothing
    same = tmp_path / "same.json"
    same.write_text(json.dumps(table))
    again = advise_json(capsys, "--table", same, *common)
    assert again["candidates"] == original["candidates"]
    results[-1]["metrics"] = [dict(m, output_throughput=m["output_throughput"] * 1.1) for m in row["metrics"]]
    conflict = tmp_path / "conflict.json"
    conflict.write_text(json.dumps(table))
    assert_refused(capsys, "--table", conflict, *common, match="given twice with different values")


def test_target_config_must_be_a_usable_target(capsys, shared_data, seed_inspect, tmp_path):
    kimi = shared_data / KIMI_TARGET
    cfg = json.loads((kimi / "config.json").read_text())
    cfg["text_config"]["num_hidden_layers"] = -5
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps(cfg))
    assert_refused(capsys, seed_inspect, "--baseline-tok-s", "88.8", "--target-config", bad,
                   match="not a usable target config (num_hidden_layers: text_config.num_hidden_layers=-5")
    draft = kimi.parent / "draft"
    assert_refused(capsys, seed_inspect, "--baseline-tok-s", "88.8", "--target-config", draft,
                   match="a draft model's config (architecture LlamaForCausalLMEagle3)")
    # a draft config without an Eagle architecture is still recognised by its draft-only keys
    plain = shared_data / "configs" / "12-llama31-8b-arch-llamaforcausallm" / "draft"
    assert_refused(capsys, seed_inspect, "--baseline-tok-s", "88.8", "--target-config", plain,
                   match="a draft model's config (it has draft_vocab_size)")
    # the draft's checkpoint file: said to be a draft's at once (helper 81: "give its folder", which
    # was then refused as a draft's config)
    ckpt = tmp_path / "draft"
    ckpt.mkdir()
    (ckpt / "config.json").write_text((draft / "config.json").read_text())
    (ckpt / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    assert_refused(capsys, seed_inspect, "--baseline-tok-s", "88.8", "--target-config", ckpt / "model.safetensors",
                   match="a draft model's checkpoint (its folder's config.json: architecture LlamaForCausalLMEagle3)")


@pytest.mark.parametrize("argv,match", [
    (["--max-steps", "-1"], "--max-steps: expected an integer in 1..64, got -1"),
    (["--max-steps", "0"], "--max-steps: expected an integer in 1..64, got 0"),
    (["--batch-sizes", "-1"], "--batch-sizes: expected an integer in 1..65536, got -1"),
    (["--cuda-graph-bs", "-4"], "--cuda-graph-bs: expected an integer in 1..65536, got -4"),
    (["--steps-candidates", "-2"], "--steps-candidates: expected an integer in 0..64, got -2"),
    # both: --max-steps was ignored without a word
    (["--max-steps", "2", "--steps-candidates", "5", "6"], "--steps-candidates: not allowed with argument --max-steps"),
])
def test_range_messages_name_the_real_range(capsys, seed_inspect, argv, match):
    assert_refused(capsys, seed_inspect, "--baseline-tok-s", "88.8", *argv, match=match)


def test_cuda_graph_bs_without_an_adaptive_file_is_refused(capsys, seed_inspect):
    # it was accepted and dropped without a word: it sets those files' buckets alone
    assert_refused(capsys, seed_inspect, "--baseline-tok-s", "88.8", "--cuda-graph-bs", "4",
                   match="--cuda-graph-bs applies to --adaptive-config / --adaptive-candidates only")


def test_a_trace_given_as_input_is_named_as_inspect_names_it(capsys, tmp_path):
    # it said only "not an eagle-cycle inspect --json document"
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [{"name": "verify", "ph": "X", "ts": 0, "dur": 21000}]}))
    assert_refused(capsys, path, "--baseline-tok-s", "88.8",
                   match=f"{path}: not an eagle-cycle inspect --json document: a Chrome trace (trace-event JSON), "
                         "not a server log")


def test_an_inspect_document_given_as_table_is_named(capsys, seed_inspect):
    # it answered "model 'x' not found; choose one of: decode_batch, files, findings, groups, ..."
    assert_refused(capsys, "--table", seed_inspect, "--model", "x", "--benchmark", "y",
                   match="an eagle-cycle-inspect/1 document, not a published table: give it as an input")


@pytest.mark.parametrize("doc", [{"about": "seed", "inputs": {"runs": []}, "held_out": {"tok_s": 94.0}},
                                 {"architectures": ["X"], "text_config": {"num_hidden_layers": 61}}])
def test_other_json_given_as_table_is_no_table(capsys, tmp_path, doc):
    # it offered the file's top-level keys as model names ("choose one of: about, held_out, inputs")
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    assert_refused(capsys, "--table", str(path), "--model", "x", "--benchmark", "y",
                   match=f"{path}: not a published table (no {{model: {{benchmark: {{results: [...]}}}}}} in it): "
                         "runs (a log, JSONL, an inspect or seed document, bench records) go in as inputs, "
                         "without --table")


def test_table_only_options_warn_for_other_inputs(capsys, seed_inspect):
    rc, out, err = run_advise(capsys, seed_inspect, "--baseline-tok-s", "88.8", "--model", "x",
                              "--draft", "y", "--benchmark", "gsm8k", "--json")
    assert rc == 0 and "Traceback" not in err
    lines = err.splitlines()
    assert lines == ["eagle-cycle advise: warning: --benchmark applies to --table only: ignored",
                     f"eagle-cycle advise: warning: --model/--draft filter bench JSONL records only: "
                     f"ignored for {seed_inspect}"]
    assert json.loads(out)["recommended"]["steps"] in (1, 2)


@pytest.mark.parametrize("argv, flag", [(["", "--baseline-tok-s", "100"], "INPUT"),
                                        (["x.log", "--target-config", ""], "--target-config"),
                                        (["x.log", "--adaptive-config", " "], "--adaptive-config"),
                                        (["--table", "", "--model", "m", "--benchmark", "b"], "--table")])
def test_empty_file_names_are_refused(capsys, argv, flag):
    # "" was read as the current directory ("is a directory") or the option silently dropped
    rc, _, err = run_advise(capsys, *argv)
    assert rc == 2 and err == f"eagle-cycle advise: error: {flag}: the file name is empty\n"


def test_baseline_flag_repeated_adds_values_and_conflicts_are_refused(capsys, tmp_path):
    log = tmp_path / "server.log"
    _write_log(log, {2: 200, 6: 600}, seed=3)
    # the second flag used to replace the first without a word
    rc, _, err = run_advise(capsys, log, "--baseline-tok-s", "100", "--baseline-tok-s", "200")
    assert rc == 2 and err == "eagle-cycle advise: error: --baseline-tok-s given twice without a batch size (100 and 200)\n"
    doc = advise_json(capsys, log, "--baseline-tok-s", f"{BS}:100", "--baseline-tok-s", f"{BS + 1}:150",
                      "--batch-sizes", BS, BS + 1)
    assert doc["inputs"]["baseline_tok_s"] == {str(BS): 100.0, str(BS + 1): 150.0}
    # a baseline at a batch size with no run and no prediction is dropped, and says so
    doc = advise_json(capsys, log, "--baseline-tok-s", f"{BS}:100", "--baseline-tok-s", f"{BS + 1}:150")
    assert doc["inputs"]["baseline_tok_s"] == {str(BS): 100.0}
    assert f"--baseline-tok-s at bs {BS + 1} (150 tok/s) not used: no run and no --batch-sizes at bs {BS + 1}" \
        in doc["inputs"]["notes"]
    # ... unless a batch size advised without a baseline reads its decode step off the baselines' line
    doc = advise_json(capsys, log, "--baseline-tok-s", f"{BS}:100", "--baseline-tok-s", f"{BS + 2}:150",
                      "--batch-sizes", BS, BS + 1)
    assert doc["inputs"]["baseline_tok_s"] == {str(BS): 100.0, str(BS + 2): 150.0}
    assert any(n.startswith(f"--baseline-tok-s at bs {BS + 2} (150 tok/s), where no run is and none is advised, "
                            "is used for the decode step") for n in doc["inputs"]["notes"])
    b1 = next(b for b in doc["per_batch_size"] if b["bs"] == BS + 1)
    off = next(c for c in b1["candidates"] if c["steps"] == 0)
    d0, d2 = 1000.0 * BS / 100, 1000.0 * (BS + 2) / 150   # halfway along the two baselines' line
    assert off["predicted_tok_s"] == pytest.approx(1000.0 * (BS + 1) / ((d0 + d2) / 2), rel=1e-3)


@pytest.mark.parametrize("value", ['"384"', "384.5", "1e308", "true", "[384]"])
def test_non_integer_expert_count_is_refused(capsys, seed_inspect, tmp_path, value):
    # these were read as "dense target (no routed experts in its config)"
    cfg = tmp_path / "config.json"
    cfg.write_text('{"num_hidden_layers": 61, "text_config": {"n_routed_experts": %s, "num_experts_per_tok": 8}}' % value)
    rc, _, err = run_advise(capsys, seed_inspect, "--target-config", cfg)
    assert rc == 2 and err.startswith("eagle-cycle advise: error: target config: text_config.n_routed_experts=")
    assert err.endswith(" is not an integer\n")


def test_routed_experts_without_experts_per_token_are_named_not_called_dense(capsys, seed_inspect, tmp_path):
    # helper 101: Qwen3-30B-A3B's config without num_experts_per_tok read "dense target (no routed experts ...)"
    cfg = tmp_path / "config.json"
    cfg.write_text('{"num_hidden_layers": 48, "num_experts": 128}')
    doc = advise_json(capsys, seed_inspect, "--baseline-tok-s", "88.8", "--target-config", cfg)
    notes = json.dumps(doc["inputs"])
    assert "num_experts=128 routed experts but no experts per token" in notes and "no routed experts" not in notes


def test_the_measured_column_rounds_the_run_once(capsys, tmp_path):
    # helper 101: the measured column rounded the JSON's 2 decimals again: 442.5452 printed 442.6, and a
    # no-spec 190.45 printed 190.4 beside its own 190.5 in the tok/s column
    table = tmp_path / "t.json"
    rows = [{"batch_size": 1, "steps": s, "topk": 1, "num_draft_tokens": s + 1, "metrics": [
        {"Name": "Without EAGLE3", "output_throughput": 190.45, "accept_length": 1.0},
        {"Name": "d", "output_throughput": tok, "accept_length": acc}]}
        for s, tok, acc in ((3, 442.5452, 3.1), (5, 506.6, 3.9), (7, 513.9, 4.3))]
    table.write_text(json.dumps({"m": {"b": {"benchmark_name": "b", "results": rows}}}))
    rc, out, err = run_advise(capsys, "--table", table, "--model", "m", "--benchmark", "b")
    assert rc == 0, err
    row = {ln.split()[0]: ln.split() for ln in out.splitlines() if re.match(r"^ +[0-9]+ +[0-9]+ ", ln)}
    assert row["3"][9] == "442.5" and row["0"][4] == row["0"][9] == "190.4"


def test_chain_draft_with_other_draft_tokens_is_refused(capsys, seed, tmp_path):
    # topk 1 verifies steps + 1 tokens; the seed group is 5 steps, topk 1, 6 draft tokens. --table refused this,
    # inspect documents and bench records were used silently
    path = _variant(seed, tmp_path, "ndt", lambda g, w: g.update(draft_tokens=4))
    assert_refused(capsys, path, "--baseline-tok-s", "88.8",
                   match="groups[0]: with topk 1 the draft tokens must be steps + 1 = 6, got 4")
    bench = tmp_path / "bench.jsonl"
    bench.write_text(json.dumps({"schema": "eagle-cycle-bench/1", "model": "m", "draft": "d", "steps": 3, "topk": 1,
                                 "num_draft_tokens": 2, "concurrency": 1, "status": "ok", "output_tok_s": 90.0,
                                 "accept_len_mean": 2.0}) + "\n")
    assert_refused(capsys, bench, "--baseline-tok-s", "88.8", match="with topk 1 the draft tokens must be steps + 1 = 4, got 2")


def test_repeated_bench_baselines_are_averaged_with_a_note(capsys, tmp_path):
    recs = [{"schema": "eagle-cycle-bench/1", "model": "m", "draft": None, "steps": 0, "topk": 1, "num_draft_tokens": 0,
             "concurrency": 1, "status": "ok", "output_tok_s": tok} for tok in (100.0, 10.0)]
    recs.append({"schema": "eagle-cycle-bench/1", "model": "m", "draft": "d", "steps": 2, "topk": 1,
                 "num_draft_tokens": 3, "concurrency": 1, "status": "ok", "output_tok_s": 90.0, "accept_len_mean": 2.0})
    bench = tmp_path / "bench.jsonl"
    bench.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    doc = advise_json(capsys, bench)
    assert doc["inputs"]["baseline_tok_s"] == {"1": 55.0}   # the last record (10 tok/s) used to win silently
    assert f"{bench}: 2 baselines at concurrency 1 (100.0, 10.0 tok/s): their mean 55.0 is used" in doc["inputs"]["notes"]


# --- device-span lines ---------------------------------------------------------------------------------

def _span_log(path, steps_cycles: dict, *, spans: bool, prep: float = 0.4, gap: float = 0.2):
    """A log of steps -> cycles at bs 1 with fixed phase times (ms); device-span lines when ``spans``."""
    lines, cid = [], 0
    for steps, cycles in steps_cycles.items():
        for i in range(cycles):
            cid += 1
            draft, verify, extend, other = 0.5 * (steps - 1), 20.0 + 0.3 * steps, 0.4, 0.2
            phases = {"draft_ms": draft, "verify_ms": verify, "verify_fwd_ms": verify - 0.5, "extend_ms": extend}
            if spans:
                phases.update(draft_prep_ms=prep, gap_ms=gap if i else None)
            phases["total_ms"] = draft + verify + extend + other + (prep if spans else 0.0)
            lines.append(format_line(make_record(cycle=cid, config=(1, steps, 1, steps + 1), phases_ms=phases,
                                                 accepts=[1 + (i % (steps + 1))], graph=True)))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_advise_refuses_to_mix_device_span_and_older_lines(capsys, tmp_path):
    old = _span_log(tmp_path / "old.log", {2: 200}, spans=False)
    new = _span_log(tmp_path / "new.log", {4: 200}, spans=True)
    rc, out, err = run_advise(capsys, old, new, "--baseline-tok-s", "45")
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "draft_prep_ms" in err and "one kind at a time" in err
    # each kind alone is advised
    assert advise_json(capsys, new, "--baseline-tok-s", "45")["recommended"]["steps"] >= 0
    assert advise_json(capsys, old, "--baseline-tok-s", "45")["recommended"]["steps"] >= 0


def test_host_prep_and_gap_are_a_depth_independent_cost(capsys, tmp_path):
    """draft_prep + gap enter the model as a fixed cost per cycle: the predicted cycle of a measured
    depth is its period (total + gap), and the note names the host cost."""
    new = _span_log(tmp_path / "new.log", {2: 300, 5: 300}, spans=True, prep=0.9, gap=0.6)
    doc = advise_json(capsys, new, "--baseline-tok-s", "45")
    for steps in (2, 5):
        period = 0.5 * (steps - 1) + 20.0 + 0.3 * steps + 0.4 + 0.2 + 0.9 + 0.6
        assert cand(doc, steps)["predicted_cycle_ms"] == pytest.approx(period, abs=0.05)
    assert any("draft_prep_ms + gap_ms" in n and "1.50" in n for n in doc["inputs"]["notes"])
    assert [r["host_ms"] for r in doc["inputs"]["runs"]] == [pytest.approx(1.5, abs=1e-3)] * 2


def test_adaptive_candidates_for_the_cost_policy(capsys, tmp_path, seed_inspect):
    """--adaptive-candidates: the contenders per bucket and the no-spec tok/s; both CostAwarePolicy and
    SGLang's own policy load the file, with the same candidates."""
    asp = pytest.importorskip("sglang.srt.speculative.adaptive_spec_params")
    from sglang_eagle_cycle.adaptive import CostAwarePolicy

    out = tmp_path / "cost.json"
    doc = advise_json(capsys, seed_inspect, "--baseline-tok-s", "88.8", "--adaptive-candidates", out)
    cfg = json.loads(out.read_text())
    (key,) = [k for k in cfg if k.isdigit()]
    entry = cfg[key]
    assert entry["nospec_tok_s"] == 88.8 and entry["nospec_bs"] == 1   # the seed's batch size
    primary = doc["per_batch_size"][0]
    rec = primary["recommended"]["steps"]
    steps = entry["candidate_steps"]
    assert steps == sorted(set(steps)) and 0 not in steps and (rec in steps or rec == 0)
    # every candidate's interval reaches the fastest depth's lower end; the others do not
    spec = [c for c in primary["candidates"] if c["steps"] >= 1]
    best = max(spec, key=lambda c: c["predicted_tok_s"])
    floor = (best.get("tok_s_95") or [best["predicted_tok_s"]])[0]
    for c in spec:   # (the JSON rounds to 0.01 tok/s; the file was written from unrounded values)
        high = (c.get("tok_s_95") or [None, c["predicted_tok_s"]])[1]
        if abs(high - floor) > 0.02:
            assert (c["steps"] in steps) == (high >= floor or c["steps"] == best["steps"]), c["steps"]
    launch = doc["adaptive_candidates"]["speculative_num_steps"]
    ours, theirs = CostAwarePolicy(launch, str(out)), asp.AdaptiveSpeculativeParams(launch, str(out))
    assert ours.candidate_steps == theirs.candidate_steps == steps
    assert ours.get_steps_for_batch(1) == theirs.get_steps_for_batch(1) == launch
    rc, _, err = run_advise(capsys, seed_inspect, "--baseline-tok-s", "88.8", "--adaptive-candidates", out)
    assert rc == 2 and "--adaptive-candidates" in err and "exists" in err and err.count("\n") == 1
    rc, _, err = run_advise(capsys, seed_inspect, "--adaptive-candidates", "x.json", "--adaptive-config", "x.json")
    assert rc == 2 and "same file" in err


@pytest.mark.parametrize("phases", [[], 0, "", False])
def test_phases_that_are_not_an_object_are_refused_even_when_empty(capsys, seed, tmp_path, phases):
    # these once read as "no phase data" and dropped the run to totals mode without a word
    path = _variant(seed, tmp_path, "phases", lambda g, w: g.update(phases=phases))
    assert_refused(capsys, path, "--baseline-tok-s", "88.8", match="groups[0].phases: expected an object")


def test_a_byte_order_mark_before_a_document_is_not_part_of_it(capsys, seed, tmp_path):
    plain = _variant(seed, tmp_path, "plain", lambda g, w: None)
    bom = tmp_path / "bom.json"
    bom.write_text("\ufeff" + plain.read_text(), encoding="utf-8")
    got = advise_json(capsys, bom, "--baseline-tok-s", "88.8")
    assert got["recommended"] == advise_json(capsys, plain, "--baseline-tok-s", "88.8")["recommended"]


def test_stdin_takes_an_inspect_document_and_bench_records_as_well_as_a_log(capsys, tmp_path):
    """``advise -`` read only logs: an inspect --json piped in was "nothing to inspect"."""
    from sglang_eagle_cycle.report import inspect_paths

    log = tmp_path / "server.log"
    _write_log(log, {2: 300, 6: 900}, seed=2)
    base = ["--baseline-tok-s", "100", "--max-steps", "6", "--json"]
    plain = advise_json(capsys, log, *base[:-1])
    rec = {"schema": "eagle-cycle-bench/1", "model": "m", "draft": "d", "steps": 2, "topk": 1,
           "num_draft_tokens": 3, "concurrency": BS, "status": "ok", "output_tok_s": 150.0, "accept_len_mean": 2.0}
    for data, check in ((log.read_bytes(), lambda d: d["recommended"] == plain["recommended"]),
                        (("\ufeff" + json.dumps(inspect_paths([log]), indent=1)).encode(),
                         lambda d: d["recommended"] == plain["recommended"]),
                        ((json.dumps(rec) + "\n").encode(), lambda d: d["inputs"]["runs"][0]["steps"] == 2)):
        proc = subprocess.run([sys.executable, "-m", "sglang_eagle_cycle.cli", "advise", "-", *base],
                              input=data, capture_output=True, timeout=120)
        assert proc.returncode == 0, proc.stderr.decode()
        assert check(json.loads(proc.stdout))


def test_help_says_a_log_on_stdin_is_copied_as_advise_does(capsys, tmp_path, monkeypatch):
    """``advise --help`` said a log on stdin "is streamed"; advise copies it to a temporary file
    first (its stock lines are read more than once), as it does a document or JSONL."""
    from sglang_eagle_cycle.commands import advise_cmd

    with pytest.raises(SystemExit):
        cli.main(["advise", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "streamed" not in text and "``-`` reads one of them from stdin (copied to a temporary file" in text
    log = tmp_path / "server.log"
    _write_log(log, {2: 200})
    copies = []
    real = advise_cmd._stdin_copy
    monkeypatch.setattr(advise_cmd, "_stdin_copy", lambda spool, name: copies.append(name) or real(spool, name))
    with log.open("rb") as fh:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(fh)))
        advise_json(capsys, "-", "--baseline-tok-s", "100")
    assert copies == ["stdin.log"]


@pytest.mark.parametrize("command", ["advise", "inspect"])
def test_a_reader_that_stops_early_is_no_failure(tmp_path, command):
    # helper 39: `eagle-cycle advise LOG | head -1` exited 1 (rich's broken-pipe exit), a failure
    # under `set -o pipefail`; the command had succeeded. A pipe closed before the first write:
    log = tmp_path / "server.log"
    _write_log(log, {2: 200})
    read_end, write_end = os.pipe()
    os.close(read_end)
    extra = ["--baseline-tok-s", "100"] if command == "advise" else []
    try:
        proc = subprocess.run([sys.executable, "-m", "sglang_eagle_cycle.cli", command, str(log), *extra],
                              stdout=write_end, stderr=subprocess.PIPE, timeout=120)
    finally:
        os.close(write_end)
    assert proc.returncode == 0 and proc.stderr == b""
    # bad input through the same closed pipe still fails as bad input
    proc = subprocess.run([sys.executable, "-m", "sglang_eagle_cycle.cli", command, str(tmp_path / "missing.log")],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
    assert proc.returncode == 2 and b"missing.log" in proc.stderr


def test_one_step_runs_name_the_draft_step_they_assume(capsys, tmp_path):
    # helper 39: the note said deeper depths "omit" the draft step, while the table charged one
    log = tmp_path / "server.log"
    _write_log(log, {1: 400})
    doc = advise_json(capsys, log, "--baseline-tok-s", f"{1000.0 * BS / _verify(BS):.6f}", "--max-steps", "4")
    note = next(n for n in doc["inputs"]["cycle_model"]["notes"] if n.startswith("draft step cost unknown"))
    assert "0.25-1.5 times the draft-extend" in note and "omit" not in note
    draft = [cand(doc, s)["cycle_phases_ms"]["draft_ms"] for s in (2, 3, 4)]
    assert 0 < draft[0] < draft[1] < draft[2]


def test_the_marginal_columns_say_what_they_compare(capsys, tmp_path):
    # helper 39: with --steps-candidates 0 3 5 the 3-step row's +accept / +cycle were the step from an
    # unlisted 2 steps, and (helper 41) from the point fit, not the hypotheses: the same depth read
    # +0.32 or +0.30 as its neighbour was listed or not. Now only a listed neighbour gives one
    log = tmp_path / "server.log"
    _write_log(log, {2: 300, 6: 900})
    args = [str(log), "--baseline-tok-s", f"{1000.0 * BS / _verify(BS):.6f}"]
    assert cli.main(["advise", *args, "--steps-candidates", "0", "3", "5"]) == 0
    assert "one step fewer, '-' where that depth is not listed" in " ".join(capsys.readouterr().out.split())
    sparse = advise_json(capsys, *args, "--steps-candidates", "0", "3", "5")
    dense = advise_json(capsys, *args, "--steps-candidates", "0", "2", "3", "4", "5")
    for s in (3, 5):
        assert cand(sparse, s)["marginal_accept_gain"] is None and cand(sparse, s)["marginal_cycle_ms"] is None
        assert cand(dense, s)["marginal_accept_gain"] == pytest.approx(
            cand(dense, s)["predicted_accept_len"] - cand(dense, s - 1)["predicted_accept_len"], abs=0.002)


def test_bench_records_of_two_server_settings_are_warned_about(capsys, tmp_path):
    # helper 40: records now carry their settings; two TP sizes (or backends) in one input are two
    # deployments, and advise says so rather than comparing them silently
    def rec(steps, tok, args):
        return {"schema": "eagle-cycle-bench/1", "model": "m", "draft": "d", "steps": steps, "topk": 1,
                "num_draft_tokens": steps + 1 if steps else None, "concurrency": 1, "status": "ok",
                "output_tok_s": tok, "accept_len_mean": 2.0 if steps else None,
                "settings": {"algorithm": "EAGLE3" if steps else None, "server_args": args, "ignore_eos": False,
                             "stream": True}}

    one = [rec(0, 80.0, ["--tp", "8"]), rec(2, 100.0, ["--tp", "8"])]
    path = tmp_path / "b.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in one) + "\n")
    assert not [n for n in advise_json(capsys, path)["inputs"]["notes"] if "server settings" in n]
    path.write_text("\n".join(json.dumps(r) for r in one + [rec(3, 120.0, ["--tp", "4"])]) + "\n")
    notes = [n for n in advise_json(capsys, path)["inputs"]["notes"] if "server settings" in n]
    assert len(notes) == 1 and "2 server settings" in notes[0] and "'--tp', '4'" in notes[0]


def test_adaptive_config_into_a_fifo_no_process_reads_is_refused_not_waited_on(capsys, seed_inspect, tmp_path,
                                                                               monkeypatch):
    """With --force, a FIFO that no process reads had blocked advise forever in its open (helper 98);
    it is refused with one line, after a short wait for a reader, and stays a FIFO."""
    import stat

    from sglang_eagle_cycle.commands import advise_cmd

    monkeypatch.setattr(advise_cmd, "FIFO_READER_WAIT_TRIES", 2)
    fifo = tmp_path / "plan.fifo"
    os.mkfifo(fifo)
    rc, _, err = run_advise(capsys, seed_inspect, "--baseline-tok-s", "88.8", "--adaptive-config", fifo, "--force")
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"--adaptive-config {fifo}: a FIFO no process reads; not written" in err
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_an_inspect_schema_without_groups_says_what_is_missing(capsys, tmp_path):
    """A document whose schema says inspect but whose "groups" list is gone had been told to run the
    very command it ran (helper 98)."""
    doc = tmp_path / "cut.json"
    doc.write_text('{"schema": "eagle-cycle-inspect/1"}')
    assert_refused(capsys, doc, match=f'{doc}: an eagle-cycle inspect --json document without its "groups" list')


def test_adaptive_config_into_a_fifo_is_written_with_force_and_left_a_fifo(capsys, seed_inspect, tmp_path):
    """advise writes its outputs in place (no rename over the path), so with --force a FIFO (a
    ``>(cat)``) is written to and stays a FIFO; without --force it exists and is refused. The
    refusal of devices and FIFOs belongs to the writers that rename a new file over the path
    (inspect): it had refused this too (helper 54)."""
    import stat
    import threading

    fifo = tmp_path / "plan.fifo"
    os.mkfifo(fifo)
    assert_refused(capsys, seed_inspect, "--baseline-tok-s", "88.8", "--adaptive-config", fifo,
                   match="file exists, not overwritten (use --force)")
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo).read()), daemon=True)
    reader.start()
    rc, _, err = run_advise(capsys, seed_inspect, "--baseline-tok-s", "88.8", "--adaptive-config", fifo, "--force")
    reader.join(10)
    assert rc == 0, err
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and "candidate_steps" in got[0]
