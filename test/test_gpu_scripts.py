"""CPU tests of the tiny-pair GPU scripts under ``test/gpu/``: their no-CUDA paths and their check logic.

* ``e2e_tiny_pair.sh`` and ``check_tiny_pair_gpu.py`` print one ``skipped`` line and exit 0 without CUDA;
* the log checker (``test/gpu/tiny_pair_e2e.py``) passes a synthetic good log, whose ``[eagle-cycle]``
  lines come from the project's own formatter, and fails each broken variant naming the check;
* the agreement verdict of ``check_tiny_pair_gpu.py`` on synthetic figures, and its exit 2 naming a
  missing package or file;
* the whole e2e script against the stand-in server (``test/standin_server.py``) with a fake pair: health
  wait, sweep, process-group stop, inspect and the checks, in about 15 s.
* the capture-safety part of ``check_cuda_timing.py``: its child processes' argument parsing and their
  one ``skipped`` line without CUDA, the parent's reading of a child's output, its verdicts, and the case
  runner itself (sink thread, handshake, ``capture_pause``) against a model of CUDA's global-capture rule.

No training, no SGLang server, no GPU.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
GPU = REPO / "test" / "gpu"
E2E = GPU / "e2e_tiny_pair.sh"
AGREE = GPU / "check_tiny_pair_gpu.py"
TIMING = GPU / "check_cuda_timing.py"
sys.path.insert(0, str(GPU))

import tiny_pair_e2e as e2e  # noqa: E402

from sglang_eagle_cycle.cycle import CycleRecord, format_line, make_record  # noqa: E402

torch = pytest.importorskip("torch")
CUDA = torch.cuda.is_available()
no_cuda_only = pytest.mark.skipif(CUDA, reason="checks the no-CUDA path; this machine has CUDA")

IDS, POSITIONS, N = [2, 4, 6], [3, 5, 7], 8
WIRING = ("[2026-11-30 12:00:00 TP0] EAGLE-3 aux wiring: ids [2, 4, 6] (layer outputs, draft eagle_config) "
          "-> capture positions [3, 5, 7] of 8; same as stock SGLang 0.5.23")
ITL = 10.0  # ms per token; the good log's cycles are 2.5 tokens x 10 ms = 25 ms


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_EAGLE_CYCLE")}
    env["PYTHONPATH"] = str(REPO / "python") + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


# ----------------------------------------------------------------------------- no-CUDA paths
@no_cuda_only
def test_e2e_script_skips_without_cuda(tmp_path):
    work = tmp_path / "work"
    proc = subprocess.run(["bash", str(E2E), str(work)], capture_output=True, text=True, timeout=120,
                          env=_env(PYTHON=sys.executable))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("skipped: no CUDA device"), proc.stdout
    assert not work.exists()  # nothing made, nothing launched


@no_cuda_only
def test_agreement_check_skips_without_cuda(tmp_path):
    proc = subprocess.run([sys.executable, str(AGREE), str(tmp_path / "no-pair")], capture_output=True,
                          text=True, timeout=120, env=_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["skipped: no CUDA device"]


def test_e2e_script_is_valid_bash_with_strict_mode():
    text = E2E.read_text()
    assert "set -euo pipefail" in text
    subprocess.run(["bash", "-n", str(E2E)], check=True, timeout=30)


# ----------------------------------------------------------------------------- agreement verdict
def _fig(device, agree, ablated=0.2, minus=0.3, plus=0.35):
    return {"device": device, "draft_top1_agreement": agree, "aux_ablated_top1": ablated,
            "agreement_by_wiring": {"-1": minus, "+1": plus}, "scored_positions": 1000}


def _agree_module():
    import importlib

    return importlib.import_module("check_tiny_pair_gpu")


def test_agreement_verdict_within_and_beyond_tolerance():
    m = _agree_module()
    rec = {"draft_top1_agreement": 0.712}
    ok = m.compare(_fig("cuda", 0.714), _fig("cpu", 0.712), rec, 0.5)
    assert ok["failed"] == [] and ok["diff_points"]["draft_top1_agreement"] == pytest.approx(0.2)
    bad = m.compare(_fig("cuda", 0.70), _fig("cpu", 0.712), rec, 0.5)
    assert bad["failed"] == ["gpu_vs_cpu_agreement"]
    assert "1.20 points" in bad["checks"][0]["detail"]
    # the recorded figure is compared and reported, but does not set the exit code
    off = m.compare(_fig("cuda", 0.60), _fig("cpu", 0.60), rec, 0.5)
    assert off["failed"] == []
    assert {c["name"]: c["ok"] for c in off["checks"]} == {
        "gpu_vs_cpu_agreement": True, "recorded_vs_cpu": False, "recorded_vs_gpu": False}


def test_agreement_check_names_what_is_missing(tmp_path):
    # --smoke-cpu gets past the CUDA test; safetensors hidden from the interpreter, and no pair files
    code = ("import sys, runpy; sys.modules['safetensors'] = None; "
            "import importlib.util as u; real = u.find_spec; "
            "u.find_spec = lambda n, *a: None if n == 'safetensors' else real(n, *a); "
            f"sys.argv = [{str(AGREE)!r}, {str(tmp_path)!r}, '--smoke-cpu']; "
            f"runpy.run_path({str(AGREE)!r}, run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=_env())
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert "missing: python package safetensors (pip install safetensors)" in lines
    assert f"missing: file {tmp_path / 'pair.json'}" in lines
    assert f"missing: file {tmp_path / 'draft' / 'model.safetensors'}" in lines


# ----------------------------------------------------------------------------- the log checker
def _cycle(i, accepts=(3,), total=25.0, verify=20.0, fwd=19.0, draft=2.0, extend=2.0) -> str:
    rec = make_record(cycle=i, config=(len(accepts), 2, 1, 3),
                      phases_ms={"draft_ms": draft, "verify_ms": verify, "verify_fwd_ms": fwd,
                                 "extend_ms": extend, "total_ms": total},
                      accepts=list(accepts), graph=True)
    return "[2026-11-30 12:00:01 TP0] " + format_line(rec)


def good_log() -> list[str]:
    lines = ["[2026-11-30 12:00:00] server_args=ServerArgs(...)", WIRING, "INFO: Application startup complete."]
    for i in range(1, 9):  # accept lengths 2 and 3 alternate: mean 2.5 -> 2.5 x ITL 10 ms = 25 ms
        lines.append(_cycle(i, accepts=(2 if i % 2 else 3,)))
    return lines


def _check(lines, itl=ITL, **kw) -> dict:
    checks = e2e.check_log(lines, expected_ids=IDS, expected_positions=POSITIONS, num_layers=N, itl_ms=itl, **kw)
    return {c.name: c for c in checks}


def _failed(lines, **kw) -> set[str]:
    return {name for name, c in _check(lines, **kw).items() if not c.ok}


def test_good_log_passes_every_check():
    checks = _check(good_log())
    assert all(c.ok for c in checks.values()), [c.line() for c in checks.values() if not c.ok]
    assert set(checks) == {"wiring_line", "wiring_positions", "cycle_lines", "cycle_lines_valid", "accept_len_gt_1",
                           "other_ms_nonnegative", "verify_fwd_within_verify", "sweep_record", "total_vs_itl"}
    assert checks["accept_len_gt_1"].values["accept_len_mean"] == pytest.approx(2.5)
    assert checks["total_vs_itl"].values["total_ms_mean"] == pytest.approx(25.0)
    assert "+0.0%" in checks["total_vs_itl"].detail


def test_missing_wiring_line_fails():
    failed = _failed([ln for ln in good_log() if "aux wiring" not in ln])
    assert {"wiring_line", "wiring_positions"} == failed


def test_wrong_positions_fail():
    # what stock SGLang's DeepSeek rule would capture: every state one layer early
    stock = WIRING.replace("capture positions [3, 5, 7]", "capture positions [2, 4, 6]")
    checks = _check([stock if "aux wiring" in ln else ln for ln in good_log()])
    assert {n for n, c in checks.items() if not c.ok} == {"wiring_positions"}
    assert "[2, 4, 6]" in checks["wiring_positions"].detail and "[3, 5, 7]" in checks["wiring_positions"].detail


def test_wrong_layer_count_or_ids_fail():
    assert _failed([ln.replace("of 8;", "of 61;") for ln in good_log()]) == {"wiring_positions"}
    assert _failed([ln.replace("ids [2, 4, 6]", "ids [3, 5, 7]") for ln in good_log()]) == {"wiring_positions"}


def test_no_cycle_lines_fails():
    failed = _failed([ln for ln in good_log() if "[eagle-cycle]" not in ln])
    assert {"cycle_lines", "cycle_lines_valid", "accept_len_gt_1", "other_ms_nonnegative",
            "verify_fwd_within_verify", "total_vs_itl"} == failed


def test_accept_length_one_fails():
    lines = [ln for ln in good_log() if "[eagle-cycle]" not in ln]
    # 1 token per 10 ms cycle: ITL 10 (parts within the total, or the line is damaged)
    lines += [_cycle(i, accepts=(1,), total=10.0, verify=7.0, fwd=6.5, draft=1.0, extend=1.0) for i in range(1, 9)]
    failed = _failed(lines)
    assert failed == {"accept_len_gt_1"}


def test_negative_other_ms_fails():
    # other_ms is derived and clamped at 0 by make_record; a record written with a negative one directly
    bad = CycleRecord(cycle=99, bs=1, steps=2, topk=1, draft_tokens=3, draft_ms=2.0, verify_ms=20.0,
                      verify_fwd_ms=19.0, extend_ms=2.0, other_ms=-0.5, total_ms=23.5, accept_len=2.0,
                      accepts=[2], tok_s=85.1, graph=True)
    lines = good_log() + ["[2026-11-30 12:00:02 TP0] " + format_line(bad)]
    checks = _check(lines)
    assert not checks["other_ms_nonnegative"].ok and "-0.50" in checks["other_ms_nonnegative"].detail
    # the project's parser rejects that line as implausible; the lenient read still sees it
    assert not checks["cycle_lines_valid"].ok
    assert {n for n, c in checks.items() if not c.ok} == {"other_ms_nonnegative", "cycle_lines_valid"}


def test_verify_forward_longer_than_verify_fails():
    lines = good_log() + [_cycle(50, accepts=(2,), verify=20.0, fwd=20.5, total=25.0)]
    checks = _check(lines)
    # the parser also rejects such a line (cycle.implausible: the forward runs inside the verify)
    assert {n for n, c in checks.items() if not c.ok} == {"verify_fwd_within_verify", "cycle_lines_valid"}
    assert "20.50 > 20.00" in checks["verify_fwd_within_verify"].detail
    assert "1 of " in checks["cycle_lines_valid"].detail


def test_dash_fields_are_skipped_not_failed():
    lines = good_log() + [_cycle(60, accepts=(2,), fwd=None, draft=None)]
    checks = _check(lines)
    assert all(c.ok for c in checks.values()), [c.line() for c in checks.values() if not c.ok]
    assert checks["verify_fwd_within_verify"].values["skipped"] == 1


@pytest.mark.parametrize("itl, ok", [(10.0 * 25 / 32.6, False), (10.0 * 25 / 32.4, True),
                                     (10.0 * 25 / 17.4, False), (10.0 * 25 / 17.6, True)])
def test_total_ms_against_itl_times_accept_length(itl, ok):
    # mean total 25 ms, accept 2.5: expected = 2.5 itl; itl = 250 / x makes total / expected = x / 25,
    # so x = 32.5 and x = 17.5 are the +-30% bounds
    checks = _check(good_log(), itl=itl)
    assert checks["total_vs_itl"].ok is ok, checks["total_vs_itl"].detail
    assert {n for n, c in checks.items() if not c.ok} == (set() if ok else {"total_vs_itl"})


def test_total_ms_off_by_more_than_30_percent_fails():
    lines = [ln for ln in good_log() if "[eagle-cycle]" not in ln]
    lines += [_cycle(i, accepts=(2 if i % 2 else 3,), total=40.0, verify=30.0, fwd=29.0) for i in range(1, 9)]
    checks = _check(lines)
    assert {n for n, c in checks.items() if not c.ok} == {"total_vs_itl"}
    assert "+60.0%" in checks["total_vs_itl"].detail


def test_missing_sweep_record_fails_both_sweep_checks():
    failed = _failed(good_log(), itl=None, sweep_problem="no ok speculative record in sweep.jsonl")
    assert failed == {"sweep_record", "total_vs_itl"}


def test_cli_reads_pair_sweep_and_log(tmp_path):
    pair = tmp_path / "pair"
    pair.mkdir()
    (pair / "pair.json").write_text(json.dumps({"aux_layer_ids": IDS, "positions": POSITIONS, "num_layers": N}))
    log = tmp_path / "server.log"
    log.write_text("\n".join(good_log()) + "\n")
    sweep = tmp_path / "sweep.jsonl"
    rec = {"schema": "eagle-cycle-bench/1", "status": "ok", "steps": 2, "topk": 1, "num_draft_tokens": 3,
           "concurrency": 1, "itl_ms": {"p50": ITL, "p99": 30.0}, "accept_len_mean": 2.5, "cycle": None}
    sweep.write_text(json.dumps(rec) + "\n")
    base = [sys.executable, str(GPU / "tiny_pair_e2e.py"), "check", "--log", str(log), "--pair", str(pair)]
    ok = subprocess.run(base + ["--sweep", str(sweep)], capture_output=True, text=True, timeout=60, env=_env())
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.count("[PASS]") == 9
    doc = json.loads(ok.stdout.splitlines()[-1])
    assert doc["failed"] == [] and doc["expected_positions"] == POSITIONS and doc["sweep"]["itl_ms"]["p50"] == ITL
    # positions read from pair.json: a pair trained on other positions fails the same log
    (pair / "pair.json").write_text(json.dumps({"aux_layer_ids": [1, 3, 5], "positions": [2, 4, 6], "num_layers": N}))
    bad = subprocess.run(base + ["--sweep", str(sweep)], capture_output=True, text=True, timeout=60, env=_env())
    assert bad.returncode == 1 and "[FAIL] wiring_positions" in bad.stdout
    missing = subprocess.run(base[:4] + [str(tmp_path / "nope.log"), "--pair", str(pair)], capture_output=True,
                             text=True, timeout=60, env=_env())
    assert missing.returncode == 2 and "server log not found" in missing.stderr


def test_prompts_fall_back_to_the_fixed_code_prompts(tmp_path):
    out = tmp_path / "prompts.jsonl"
    e2e.write_prompts(tmp_path, out, 8)  # no tokenizer.json / eval_prompts.json there
    from sglang_eagle_cycle.sweep.workload import load_prompt_set
    from sglang_eagle_cycle.tiny.corpus import PROMPTS

    assert [json.loads(ln)["prompt"] for ln in out.read_text().splitlines()] == list(PROMPTS)
    assert len(load_prompt_set(out).prompts) == len(PROMPTS)


# ----------------------------------------------------------------------------- e2e against the stand-in
@no_cuda_only
def test_e2e_script_end_to_end_against_the_standin_server(tmp_path):
    """The script's whole path with ``python -m sglang.launch_server`` replaced by the stand-in server,
    behind a wrapper that first prints the plugin's wiring line (the stand-in has no plugin)."""
    work = tmp_path / "work"
    (work / "pair").mkdir(parents=True)
    (work / "pair" / "pair.json").write_text(json.dumps(
        {"arch": "llama", "seed": 11, "aux_layer_ids": IDS, "positions": POSITIONS, "num_layers": N,
         "draft_top1_agreement": 0.7, "aux_ablated_top1": 0.2, "agreement_by_wiring": {"-1": 0.3, "+1": 0.4}}))
    pids = tmp_path / "pids"
    wrapper = tmp_path / "fake_server.sh"
    wrapper.write_text(
        "#!/usr/bin/env bash\n"
        f"echo '{WIRING}'\n"
        f"exec \"$PYTHON\" {REPO / 'test' / 'standin_server.py'} --standin-cycle-log --standin-base-ms 20 "
        f"--standin-step-ms 2 --standin-accept-rate 0.7 --standin-children 2 --standin-pid-dir {pids} \"$@\"\n")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.run(["bash", str(E2E), str(work)], capture_output=True, text=True, timeout=300,
                          env=_env(PYTHON=sys.executable, PORT=str(port), E2E_ASSUME_CUDA="1",
                                   E2E_SERVER_CMD=f"bash {wrapper}", E2E_NUM_PROMPTS="4",
                                   E2E_MAX_NEW_TOKENS="32"))
    out = proc.stdout
    assert proc.returncode == 0, out[-6000:] + proc.stderr[-3000:]
    assert "reusing the pair" in out and "healthy after" in out and "server stopped" in out
    assert out.count("[PASS]") == 9 and "[FAIL]" not in out
    assert out.splitlines()[-2] == "skipped: no CUDA device"  # the agreement check, on this machine
    assert out.splitlines()[-1].startswith("e2e_tiny_pair: PASS")
    for name in ("server.log", "sweep.jsonl", "inspect.json", "prompts.jsonl", "log_check.out"):
        assert (work / name).is_file(), name
    # the server's whole process group is gone (the stand-in's children too)
    started = [int(p.name.split("-")[1]) for p in pids.iterdir()]
    assert len(started) == 3
    for pid in started:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1][:3]


@no_cuda_only
def test_e2e_script_reports_a_server_that_dies_before_health(tmp_path):
    work = tmp_path / "work"
    (work / "pair").mkdir(parents=True)
    (work / "pair" / "pair.json").write_text(json.dumps({"aux_layer_ids": IDS, "positions": POSITIONS,
                                                         "num_layers": N}))
    wrapper = tmp_path / "dying_server.sh"
    wrapper.write_text("#!/usr/bin/env bash\necho 'RuntimeError: no kernel image for this device'\nexit 3\n")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.run(["bash", str(E2E), str(work)], capture_output=True, text=True, timeout=120,
                          env=_env(PYTHON=sys.executable, PORT=str(port), E2E_ASSUME_CUDA="1",
                                   E2E_SERVER_CMD=f"bash {wrapper}"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "the server exited (code 3) before /health answered" in proc.stderr
    assert "RuntimeError: no kernel image for this device" in proc.stderr   # the log's tail
    assert not (work / "sweep.jsonl").exists()


# ----------------------------------------------------------------------------- capture safety (check_cuda_timing.py)
def _timing_module():
    import importlib

    return importlib.import_module("check_cuda_timing")


@no_cuda_only
def test_capture_children_parse_their_arguments_and_skip_without_cuda():
    proc = subprocess.run([sys.executable, str(TIMING), "--capture-child", "paused", "query"], capture_output=True,
                          text=True, timeout=120, env=_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ['{"mode": "paused", "call": "query", "skipped": "no CUDA device"}']
    bad = subprocess.run([sys.executable, str(TIMING), "--capture-child", "guarded", "query"], capture_output=True,
                         text=True, timeout=120, env=_env())
    assert bad.returncode == 2 and "MODE one of unguarded, thread_local, paused" in bad.stderr
    # the parent's plumbing: a child process per case, its one line read back
    m = _timing_module()
    got = m.run_capture_children([("unguarded", "set_device")], jobs=1, timeout=120)
    assert got == {("unguarded", "set_device"): {"mode": "unguarded", "call": "set_device",
                                                 "skipped": "no CUDA device"}}


def test_capture_child_output_is_read_or_the_failure_named():
    m = _timing_module()
    line = json.dumps({"mode": "paused", "call": "query", "capture_ok": True})
    assert m.parse_child_output("paused", "query", 0, f"noise\n{line}\n", "")["capture_ok"] is True
    # a result line for another case is not this case's
    other = m.parse_child_output("paused", "elapsed_time", 0, line, "Traceback\nRuntimeError: boom\n")
    assert other["error"] == "no result line (exit status 0); stderr: Traceback | RuntimeError: boom"
    late = m.parse_child_output("paused", "query", None, line + "\n", "", timed_out=150)
    assert late["capture_ok"] is True and "killed after 150 s" in late["note"]
    dead = m.parse_child_output("unguarded", "query", -6, "{not json", "", timed_out=None)
    assert dead["error"] == "no result line (exit status -6); stderr: -"
    # a child that dies at the capture's end leaves its progress trace
    trace = json.dumps({"mode": "unguarded", "call": "query", "partial": "polled", "polled_during_capture": True,
                        "thread_local_capture": False, "outcomes": [[True, "raised", "RuntimeError: not permitted"]]})
    died = m.parse_child_output("unguarded", "query", -6, trace + "\n", "Aborted\n")
    assert died["error"] == "the child died after its 'polled' stage (exit status -6); stderr: Aborted"
    checks, _, _ = m.judge_capture({("unguarded", "query"): died}, calls=("query",))
    assert checks[0][0].startswith("capture unguarded/query") and checks[0][1] is True
    assert "raised RuntimeError: not permitted; then the child died" in checks[0][2]
    # the same death in a guarded mode is a failure
    guarded = m.parse_child_output("thread_local", "query", -6, trace.replace("unguarded", "thread_local"), "")
    checks, _, _ = m.judge_capture({("thread_local", "query"): guarded}, calls=("query",))
    assert [ok for name, ok, _ in checks if name.startswith("capture thread_local/")] == [False]


def test_ctypes_fallback_says_no_without_cuda():
    if CUDA:
        pytest.skip("a CUDA device is present")
    m = _timing_module()
    assert m.ctypes_thread_local_capture() is False and "no CUDA" in m._CTYPES_INFO["why"]


class GlobalCaptureModel:
    """CUDA's rule for a global-mode capture, modelled: while it is open, a call from another thread
    that is not in thread-local mode fails and invalidates it (when ``breaks``); the capture's end then
    raises. The call returns False otherwise, as ``query()`` of an incomplete event does."""

    def __init__(self, breaks: bool = True):
        self.breaks, self.open, self.invalid = breaks, False, False
        self.local = threading.local()

    def enter_thread_local(self):
        self.local.on = True
        return True

    def call(self):
        if self.open and self.breaks and not getattr(self.local, "on", False):
            self.invalid = True
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
        return False

    def begin(self):
        self.open = True

    def before(self):
        pass

    def after(self):
        if self.invalid:
            raise RuntimeError("CUDA error: operation failed due to a previous error during capture")

    def end(self):
        self.open = False
        if self.invalid:
            raise RuntimeError("CUDA error: operation failed due to a previous error during capture")

    def replay_ok(self):
        return not self.invalid


def _model_results(m, call: str, breaks: bool) -> dict:
    results = {}
    for mode in m.CAPTURE_MODES:
        model = GlobalCaptureModel(breaks)
        r = m.run_case(mode, m._Probe(model.call), model, logging.getLogger("test.capture"),
                       enter_thread_local=model.enter_thread_local, late_incomplete=lambda: True)
        results[(mode, call)] = {"mode": mode, "call": call, **r}
    return results


def test_capture_cases_against_a_model_of_the_global_capture_rule():
    m = _timing_module()
    from sglang_eagle_cycle import sinks

    default = sinks._thread_local_capture
    results = _model_results(m, "query", breaks=True)
    assert sinks._thread_local_capture is default  # put back after each case
    unguarded = results[("unguarded", "query")]
    assert unguarded["polled_during_capture"] and not unguarded["capture_ok"]
    assert unguarded["outcomes"][0][:2] == [True, "raised"]
    paused = results[("paused", "query")]
    assert paused["capture_ok"] and paused["deferred"] >= 1 and not paused["polled_during_capture"]
    assert paused["resumed_after"] is True and paused["thread_local_capture"] is False
    assert results[("thread_local", "query")]["outcomes"][0] == [True, "returned", "False"]
    checks, info, summary = m.judge_capture(results, calls=("query",))
    assert [(name.split(":")[0], ok) for name, ok, _ in checks] == [
        ("capture unguarded/query", True), ("capture thread_local/query", True), ("capture paused/query", True)]
    assert "operation not permitted when stream is capturing" in checks[0][2]
    assert summary["proposal_ctypes"]["query"].startswith("works: ")
    assert summary["harmless_unguarded"] == [] and summary["skipped"] == {}


def test_an_unguarded_call_that_leaves_the_capture_intact():
    m = _timing_module()
    checks, info, summary = m.judge_capture(_model_results(m, "query", breaks=False), calls=("query",))
    # query is the negative control: a capture that survives it means the check proves nothing
    failed = [(name, detail) for name, ok, detail in checks if not ok]
    assert len(failed) == 1 and failed[0][0].startswith("capture unguarded/query")
    assert "the negative control did not fail" in failed[0][1]
    # for the other calls it is a finding, reported, not a failure
    checks, info, summary = m.judge_capture(_model_results(m, "elapsed_time", breaks=False),
                                            calls=("elapsed_time",))
    assert all(ok for _, ok, _ in checks) and summary["harmless_unguarded"] == ["elapsed_time"]
    assert any(line.startswith("capture unguarded/elapsed_time: finding: ") for line in info)


def test_capture_verdicts_name_what_went_wrong():
    m = _timing_module()
    good = {"thread_local_capture": False, "capture_ok": True, "replay_ok": True, "deferred": 2,
            "polled_during_capture": False, "resumed_after": True, "outcomes": [[False, "returned", "1.0"]]}
    results = {
        ("unguarded", "set_device"): {"error": "no result line (timed out after 150 s); stderr: -"},
        ("thread_local", "set_device"): {"skipped": "cuda.bindings (cuda-python) is not installed (...)"},
        ("paused", "set_device"): dict(good, deferred=0, resumed_after=False),
        ("thread_local_ctypes", "set_device"): dict(good, thread_local_capture=True, ctypes={"rc": 0},
                                                    outcomes=[[False, "returned", "0"]]),
    }
    checks, info, summary = m.judge_capture({k: dict(v, mode=k[0], call=k[1]) for k, v in results.items()},
                                            calls=("set_device",))
    verdicts = {name.split(":")[0]: (ok, detail) for name, ok, detail in checks}
    assert verdicts["capture unguarded/set_device"] == (False, "no result line (timed out after 150 s); stderr: -")
    assert "capture thread_local/set_device" not in verdicts  # skipped with its reason, not failed
    assert summary["skipped"]["set_device"].startswith("skipped: cuda.bindings")
    ok, detail = verdicts["capture paused/set_device"]
    assert not ok and "no read deferred" in detail and "did not read again" in detail
    assert summary["proposal_ctypes"]["set_device"].startswith(
        "fails: the sink thread made no set_device call while the capture was open")
    # cases never run are failures too (the capture checks must all run on a GPU)
    checks, _, _ = m.judge_capture({})
    assert sum(not ok for _, ok, _ in checks) == 2 * len(m.CAPTURE_CALLS) + len(m.CAPTURE_CALLS)
