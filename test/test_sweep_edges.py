"""The sweep against servers and places that misbehave: answers without usable ``meta_info``,
an ``--output`` that cannot be written, a ``--host`` that cannot be served, a ``--port`` that
another server holds. Each must end in a ``failed`` record or one line and exit 2, never a
traceback, a 0 tok/s "ok" record or a measurement of the wrong server."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from sglang_eagle_cycle.sweep.client import GenerateSettings, generate

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks" / "bench_eagle_cycle.py"
STANDIN = REPO / "test" / "standin_server.py"


def _generate_with(body: bytes, stream: bool):
    """One request against a transport that answers ``body`` (200)."""
    def handler(request: httpx.Request) -> httpx.Response:
        ctype = "text/event-stream" if stream else "application/json"
        return httpx.Response(200, content=body, headers={"content-type": ctype})

    async def go():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            return await generate(client, "http://fake", "hi",
                                  GenerateSettings(max_new_tokens=8, stream=stream))
    return asyncio.run(go())


@pytest.mark.parametrize("stream", [True, False])
def test_meta_info_that_is_not_an_object_fails_the_request(stream):
    ev = {"text": "x", "meta_info": "oops"}
    body = (f"data: {json.dumps(ev)}\n\ndata: [DONE]\n\n" if stream else json.dumps(ev)).encode()
    res = _generate_with(body, stream)           # raised AttributeError out of the sweep before
    assert not res.ok and "meta_info" in res.error


@pytest.mark.parametrize("stream", [True, False])
def test_answer_without_completion_tokens_is_not_a_zero_token_success(stream):
    ev = {"text": "x"}
    body = (f"data: {json.dumps(ev)}\n\ndata: [DONE]\n\n" if stream else json.dumps(ev)).encode()
    res = _generate_with(body, stream)           # was ok with 0 tokens: an "ok" 0 tok/s record
    assert not res.ok and "completion_tokens" in res.error


@pytest.mark.parametrize("stream", [True, False])
def test_answer_with_completion_tokens_is_ok(stream):
    meta = {"completion_tokens": 5, "spec_verify_ct": 2, "spec_correct_drafts_histogram": [0, 1, 1]}
    ev = {"text": "x", "meta_info": meta}
    body = (f"data: {json.dumps(ev)}\n\ndata: [DONE]\n\n" if stream else json.dumps(ev)).encode()
    res = _generate_with(body, stream)
    assert res.ok and res.error is None
    assert (res.completion_tokens, res.spec_verify_ct, res.correct_drafts_hist) == (5, 2, [0, 1, 1])


def run_bench(args: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


def standin_cmd(*flags: str) -> str:
    return " ".join([sys.executable, str(STANDIN), *flags])


def one_line_exit_2(r: subprocess.CompletedProcess, needle: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr, r.stderr[-2000:]


def _launch(out: Path, tmp_path: Path, *extra: str) -> list[str]:
    return ["--launch", "--model-path", "m", "--draft-model-path", "d", "--steps", "1",
            "--concurrency", "1", "--num-prompts", "2", "--max-new-tokens", "8", "--warmup-requests", "0",
            "--no-plot", "--no-progress", "--server-cmd", standin_cmd("--standin-base-ms", "2"),
            "--log-dir", str(tmp_path / "logs"), "--output", str(out), *extra]


@pytest.mark.parametrize("flag", ["--output", "--plot"])
def test_an_output_name_ending_in_a_separator_is_refused(tmp_path, flag):
    # helper 83: `--output adir/` wrote the records to a file named adir (Path drops the slash)
    args = _launch(tmp_path / "out.jsonl", tmp_path)
    if flag == "--plot":
        args = [a for a in args if a != "--no-plot"]
    r = run_bench([*args, flag, str(tmp_path / "adir") + "/"])
    one_line_exit_2(r, f"argument {flag}: '{tmp_path / 'adir'}/' names a folder")
    assert not (tmp_path / "adir").exists() and not list((tmp_path / "logs").glob("*.log"))


def test_a_log_dir_that_is_a_file_and_a_concurrency_past_any_batch_are_one_line_exit_2(tmp_path):
    # helper 100: a file as --log-dir said "cannot create ...: File exists"; --concurrency 10^8 was taken
    (tmp_path / "a.log").write_text("mine\n")
    args = _launch(tmp_path / "out.jsonl", tmp_path)
    args[args.index("--log-dir") + 1] = str(tmp_path / "a.log")
    one_line_exit_2(run_bench(args), f"--log-dir {tmp_path / 'a.log'}: a file, not a folder")
    assert (tmp_path / "a.log").read_text() == "mine\n"
    args = _launch(tmp_path / "out.jsonl", tmp_path)
    args[args.index("--concurrency") + 1] = "100000000"
    one_line_exit_2(run_bench(args), "argument --concurrency: expected an integer in 1..65536, got 100000000")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc")
def test_output_that_cannot_be_written_is_refused_before_any_server_starts(tmp_path):
    # /proc takes no new files, whoever runs the test (root ignores a read-only directory's mode)
    r = run_bench(_launch(Path("/proc/eagle-cycle-sweep-test.jsonl"), tmp_path))
    one_line_exit_2(r, "cannot write --output")      # was: a traceback after the baseline's measurement
    assert not list((tmp_path / "logs").glob("*.log")), "a server was started for records that cannot be kept"


def test_output_probe_leaves_the_file_and_the_directory_as_they_were(tmp_path):
    from sglang_eagle_cycle.sweep.records import RecordLog
    missing = tmp_path / "new.jsonl"
    RecordLog(missing).check_writable()
    assert not missing.exists()
    kept = tmp_path / "kept.jsonl"
    kept.write_bytes(b'{"schema": "eagle-cycle-bench/1"}\n{"cut')
    RecordLog(kept).check_writable()
    assert kept.read_bytes() == b'{"schema": "eagle-cycle-bench/1"}\n{"cut'


@pytest.mark.parametrize("host", ["192.0.2.1", "::1"])
def test_host_this_machine_cannot_listen_on_is_one_line_exit_2(tmp_path, host):
    # 192.0.2.1 is TEST-NET-1 (no interface has it); ::1 is IPv6 (the sweep's URLs and ports are IPv4)
    r = run_bench(_launch(tmp_path / "out.jsonl", tmp_path, "--host", host))
    one_line_exit_2(r, f"--host {host}")        # was: a socket error's traceback
    assert not (tmp_path / "out.jsonl").exists()


class _Foreign(BaseHTTPRequestHandler):
    """A healthy server of something else that happens to hold the port."""

    generate_calls = 0

    def log_message(self, *args):
        pass

    def _json(self, obj) -> None:
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802
        self._json({"model_path": "someone-else"} if self.path == "/server_info" else {})

    def do_POST(self):  # noqa: N802
        type(self).generate_calls += 1
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._json({"text": "x", "meta_info": {"completion_tokens": 4}})


def test_port_held_by_another_server_fails_the_configurations_and_measures_nothing_there(tmp_path):
    foreign = ThreadingHTTPServer(("127.0.0.1", 0), _Foreign)
    port = foreign.server_address[1]
    threading.Thread(target=foreign.serve_forever, daemon=True).start()
    try:
        out = tmp_path / "out.jsonl"
        r = run_bench(_launch(out, tmp_path, "--port", str(port), "--warmup-requests", "2"))
    finally:
        foreign.shutdown()
        foreign.server_close()
    assert _Foreign.generate_calls == 0, "the sweep measured the server that held --port"
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(x["steps"], x["status"], x["model"]) for x in recs] == [(0, "failed", "m"), (1, "failed", "m")]
    assert all(f"--port {port}" in x["error"]["reason"] for x in recs)
    assert r.returncode == 1 and "Traceback" not in r.stderr


def test_speculative_server_without_num_steps_is_not_recorded_as_the_baseline():
    from sglang_eagle_cycle.sweep.client import ServerError
    from sglang_eagle_cycle.sweep.grid import server_config
    info = {"model_path": "m", "speculative_algorithm": "EAGLE3", "speculative_draft_model_path": "d",
            "speculative_num_steps": None, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}
    with pytest.raises(ServerError, match="speculative_num_steps"):
        server_config(info)                      # was steps 0: a speculative server as the baseline
    assert server_config({**info, "speculative_num_steps": 3}).steps == 3
    assert server_config({"model_path": "m", "speculative_algorithm": None}).steps == 0


class _NoSpecInfo(_Foreign):
    """Healthy, but its /server_info never mentions speculation (a wrapper that drops the arguments)."""

    def do_GET(self):  # noqa: N802
        self._json({"model_path": "m"} if self.path == "/server_info" else {})


def test_speculative_launch_whose_server_reports_no_speculation_fails_instead_of_passing_as_baseline(tmp_path):
    # the "server command" only sleeps; the server at --port stands for what it started
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _NoSpecInfo)
    port = srv.server_address[1]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    from sglang_eagle_cycle.sweep.client import GenerateSettings
    from sglang_eagle_cycle.sweep.grid import build_grid
    from sglang_eagle_cycle.sweep.records import RecordLog
    from sglang_eagle_cycle.sweep.runner import Sweep, SweepSettings
    from sglang_eagle_cycle.sweep.workload import load_prompt_set
    out = tmp_path / "out.jsonl"
    settings = SweepSettings(concurrencies=[1], generate=GenerateSettings(max_new_tokens=4, stream=False),
                             num_prompts=2, warmup_requests=0, model="m", draft="d",
                             server_cmd=(sys.executable, "-c", "import time; time.sleep(30)"),
                             port=None, log_dir=tmp_path / "logs", progress=False, stop_timeout_s=2)
    sweep = Sweep(settings, load_prompt_set(None), RecordLog(out), say=lambda msg: None)
    import sglang_eagle_cycle.sweep.runner as runner
    orig = runner.free_port
    runner.free_port = lambda host: port
    try:
        outcome = sweep.run_launch(build_grid([2], [1], [None], baseline=True))
    finally:
        runner.free_port = orig
        srv.shutdown()
        srv.server_close()
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    # was: the steps-2 server's numbers skipped as the "already measured" baseline, best line
    # "speculation_pays": false for a configuration never measured
    assert [(x["steps"], x["status"]) for x in recs] == [(0, "ok"), (2, "failed")]
    assert "reports no speculative_algorithm" in recs[1]["error"]["reason"]
    assert (outcome.ok, outcome.failed, outcome.skipped) == (1, 1, 0)


def test_a_wait_for_health_stops_on_an_interrupt_whose_exception_was_lost(monkeypatch):
    """The interpreter runs a signal handler at the next bytecode; inside a weak-reference callback
    (importlib's module-lock one, run at every import) or a ``__del__`` the exception it raises is
    reported as ignored and lost (seen under load for the CLI's SIGTERM exit). The sweep's handler
    notes the signal first, so a wait for a server that never answers stops at its next poll
    instead of running to ``--startup-timeout``."""
    import signal
    import time
    import weakref

    from sglang_eagle_cycle.sweep import runner
    from sglang_eagle_cycle.sweep.signals import forget_interrupts, interrupt

    with socket.socket() as sock:   # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    lost = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: lost.append(u.exc_type))

    class Referent:
        pass

    forget_interrupts()
    try:
        assert runner._wait_health(f"http://127.0.0.1:{port}", 0.3) is False   # nothing noted: the timeout
        obj = Referent()
        ref = weakref.ref(obj, lambda r: interrupt(signal.SIGINT, None))
        del obj
        assert ref() is None and lost == [KeyboardInterrupt]
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            runner._wait_health(f"http://127.0.0.1:{port}", 60)
        assert time.monotonic() - t0 < 10
    finally:
        forget_interrupts()
