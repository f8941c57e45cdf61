"""A protocol-faithful stand-in for ``python -m sglang.launch_server`` (SGLang 0.5.23) for CPU tests.

It takes the launch arguments the sweep passes to SGLang (``--model-path``, ``--host``,
``--port``, ``--speculative-*``; unknown ones are accepted and ignored, as extra user arguments
would be), resolves them as SGLang does (no ``--speculative-num-steps``: (3, 1, 4); topk 1 forces
``num_draft_tokens = steps + 1``) and serves, on the given host (127.0.0.1 in tests):

* ``GET /health`` - 503 while "starting", 200 once ready;
* ``GET /model_info`` - ``model_path``, ``is_generation``;
* ``GET /server_info`` - flat resolved arguments (``model_path``, ``speculative_*``...), ``version``;
* ``POST /generate`` - ``{"text", "sampling_params": {"max_new_tokens", ...}, "stream"}``; streaming
  as SSE ``data: {json}`` events, one per scheduler tick that gave the request tokens, then
  ``data: [DONE]``, with chunked transfer encoding like uvicorn; ``meta_info.completion_tokens``
  cumulative, and on the last event only ``spec_verify_ct``, ``spec_accept_length``,
  ``spec_correct_drafts_histogram``... exactly where SGLang puts them.

Its timing is built so results are known in advance. A scheduler thread runs ticks of
``cycle_ms = base_ms + step_ms * steps`` while requests are active (a tick starts as soon as the
first request arrives on an idle server). A request arriving during a tick gets its first token
(the "prefill") at the end of the next tick, then ``accept length`` tokens per tick: a fixed
sequence whose mean is ``E(steps) = 1 + sum_{j=1..steps} p^j`` (chain drafting with
per-position acceptance ``p``), or 1 token per tick for the baseline. :func:`expected` gives the
output tok/s and accept length that follow. Ticks follow a fixed monotonic schedule (a late tick
is caught up, never pushes the later ones), and every finished request is logged as
``stand-in served RID arrived=T finished=T tokens=N`` (``time.monotonic()`` seconds, a clock all
processes share), so tests can compare the bench with what was actually served (:func:`served`). With ``--standin-cycle-log`` every tick writes an
``[eagle-cycle]`` line through :func:`sglang_eagle_cycle.cycle.format_line`.

Failure knobs: ``--standin-never-healthy [STEPS...]`` (always, or only at those steps),
``--standin-crash-after N`` (``os._exit(3)`` at the first tick after the N-th request arrived,
other requests mid-stream; ``--standin-crash-steps`` restricts it), ``--standin-children N``
(sleeping child processes in the same process group, like SGLang's scheduler processes),
``--standin-ignore-sigterm`` (server and children survive SIGTERM: only SIGKILL stops them),
``--standin-pid-dir`` (one file per process, named ``server-PID`` / ``child-PID``).

Usage::

    python test/standin_server.py --model-path m --port 30000 --speculative-algorithm EAGLE3 \\
        --speculative-num-steps 3 --speculative-eagle-topk 1 --standin-cycle-log
"""

from __future__ import annotations

import argparse
import json
import math
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Optional

# ---------------------------------------------------------------------------------------------
# The model the stand-in was built to follow (pure; the tests import these)
# ---------------------------------------------------------------------------------------------


def mean_accept_len(steps: int, p: float) -> float:
    """``E(steps) = 1 + sum_{j=1..steps} p^j``: committed tokens per verify step (0 steps: 1)."""
    return 1.0 + sum(p ** j for j in range(1, steps + 1))


def accept_sequence(steps: int, p: float, n: int) -> list[int]:
    """Per-cycle accept lengths of one request: ``n`` integers in ``[1, steps + 1]`` whose running
    sum stays within 1 of ``k * E(steps)`` (error diffusion), so their mean is ``E`` up to ``1/n``."""
    e = mean_accept_len(steps, p)
    return [math.floor(k * e + 0.5) - math.floor((k - 1) * e + 0.5) for k in range(1, n + 1)]


def cycles_for(steps: int, p: float, max_new_tokens: int) -> list[int]:
    """Tokens committed per decode cycle for one request after its prefill token (the last one
    truncated to ``max_new_tokens``, as SGLang discards accepted tokens beyond the limit)."""
    remaining = max_new_tokens - 1
    out: list[int] = []
    seq = accept_sequence(steps, p, remaining + 1) if steps > 0 else [1] * (remaining + 1)
    for a in seq:
        if remaining <= 0:
            break
        take = min(a, remaining)
        out.append(take)
        remaining -= take
    return out


def cycle_ms(steps: int, base_ms: float, step_ms: float) -> float:
    """One tick: the verify (``base_ms``, a plain decode step for the baseline) plus ``step_ms`` per draft step."""
    return base_ms + step_ms * steps


@dataclass(frozen=True)
class Expected:
    """What the stand-in produces for a closed loop of ``concurrency`` identical requests."""

    output_tok_s: float
    accept_len: Optional[float]
    request_s: float


def expected(steps: int, *, p: float, base_ms: float, step_ms: float, max_new_tokens: int,
             concurrency: int) -> Expected:
    """Built values: a request takes ``(1 + cycles) * cycle_ms`` (prefill tick + decode ticks);
    ``concurrency`` of them run in lockstep; SGLang's per-request accept length is
    ``completion_tokens / spec_verify_ct`` = ``max_new_tokens / cycles``."""
    cyc = cycles_for(steps, p, max_new_tokens)
    req_s = (1 + len(cyc)) * cycle_ms(steps, base_ms, step_ms) / 1000.0
    return Expected(
        output_tok_s=concurrency * max_new_tokens / req_s,
        accept_len=(max_new_tokens / len(cyc)) if steps > 0 and cyc else None,
        request_s=req_s,
    )


@dataclass(frozen=True)
class Served:
    """One request as the stand-in served it: ``time.monotonic()`` seconds and output tokens."""

    rid: str
    arrived: float
    finished: float
    tokens: int


def served(log_text: str) -> list[Served]:
    """The ``stand-in served`` lines of a stand-in log, in arrival order."""
    out = []
    for line in log_text.splitlines():
        _, sep, rest = line.partition("stand-in served ")
        if not sep:
            continue
        rid, *fields = rest.split()
        kv = dict(f.split("=", 1) for f in fields)
        out.append(Served(rid, float(kv["arrived"]), float(kv["finished"]), int(kv["tokens"])))
    return sorted(out, key=lambda s: s.arrived)


def served_tok_s(requests: list[Served]) -> float:
    """Output tokens over the served span (first arrival to last finish), tok/s."""
    span = max(r.finished for r in requests) - min(r.arrived for r in requests)
    return sum(r.tokens for r in requests) / span


# ---------------------------------------------------------------------------------------------
# Server
# ---------------------------------------------------------------------------------------------


def log(msg: str) -> None:
    """One log line on stdout (the launcher sends it to the server log), SGLang-like prefix."""
    stamp = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    sys.stdout.write(f"[{stamp}] {msg}\n")
    sys.stdout.flush()


@dataclass
class Request:
    rid: str
    max_new_tokens: int
    prompt_tokens: int
    plan: list[int]
    chunks: "queue.Queue[Optional[dict]]" = field(default_factory=queue.Queue)
    tokens: int = 0
    verify_ct: int = 0
    hist: list[int] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    aborted: bool = False


class Scheduler(threading.Thread):
    """Lockstep decode ticks over the active requests (see the module docstring)."""

    def __init__(self, cfg: argparse.Namespace):
        super().__init__(daemon=True)
        self.cfg = cfg
        self.cycle_s = cycle_ms(cfg.steps, cfg.standin_base_ms, cfg.standin_step_ms) / 1000.0
        self.cond = threading.Condition()
        self.pending: list[Request] = []
        self.active: list[Request] = []
        self.arrived = 0
        self.cycle_id = 0
        self._emit_line = None
        if cfg.standin_cycle_log and cfg.steps > 0:
            from sglang_eagle_cycle.cycle import format_line, make_record
            self._emit_line = (format_line, make_record)

    def submit(self, req: Request) -> None:
        with self.cond:
            self.pending.append(req)
            self.arrived += 1
            self.cond.notify()

    def run(self) -> None:
        next_tick: Optional[float] = None
        while True:
            with self.cond:
                while not self.pending and not self.active:
                    next_tick = None
                    self.cond.wait()
                if next_tick is None:
                    next_tick = time.monotonic() + self.cycle_s
            delay = next_tick - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            with self.cond:
                joining, self.pending = self.pending, []
                decoding = [r for r in self.active if not r.aborted]
            self._tick(joining, decoding)
            next_tick += self.cycle_s
            self._maybe_crash()

    def _tick(self, joining: list[Request], decoding: list[Request]) -> None:
        spec = self.cfg.steps > 0
        accepts = []
        for r in decoding:
            take = r.plan[r.verify_ct]
            r.tokens += take
            if spec:
                r.verify_ct += 1
                accepted = take - 1
                if len(r.hist) <= accepted:
                    r.hist.extend([0] * (accepted + 1 - len(r.hist)))
                r.hist[accepted] += 1
            else:
                r.verify_ct += 1
            accepts.append(take)
            r.chunks.put(self._event(r, finished=r.tokens >= r.max_new_tokens))
        for r in joining:
            r.tokens = 1
            r.chunks.put(self._event(r, finished=r.tokens >= r.max_new_tokens))
        with self.cond:
            self.active = [r for r in decoding + joining
                           if r.tokens < r.max_new_tokens and not r.aborted]
        if decoding and self._emit_line is not None:
            self.cycle_id += 1
            self._log_cycle(accepts)

    def _log_cycle(self, accepts: list[int]) -> None:
        format_line, make_record = self._emit_line
        c = self.cfg
        total = self.cycle_s * 1000.0
        draft = c.standin_step_ms * (c.steps - 1) if c.steps > 1 else None
        rec = make_record(
            cycle=self.cycle_id,
            config=(len(accepts), c.steps, c.topk, c.num_draft_tokens),
            phases_ms={"draft_ms": draft, "verify_ms": c.standin_base_ms,
                       "verify_fwd_ms": 0.9 * c.standin_base_ms, "extend_ms": c.standin_step_ms,
                       "total_ms": total},
            accepts=accepts, graph=True,
        )
        log(format_line(rec))

    def _event(self, r: Request, finished: bool) -> dict:
        meta = {"id": r.rid, "finish_reason": None, "prompt_tokens": r.prompt_tokens,
                "weight_version": "default", "num_retractions": 0, "reasoning_tokens": 0,
                "completion_tokens": r.tokens, "cached_tokens": 0}
        if finished:
            meta["finish_reason"] = {"type": "length", "length": r.max_new_tokens}
            now = time.monotonic()
            meta["e2e_latency"] = now - r.started
            # what was actually served, on the shared CLOCK_MONOTONIC (tests compare the bench to it)
            log(f"stand-in served {r.rid} arrived={r.started:.6f} finished={now:.6f} tokens={r.tokens}")
            if self.cfg.steps > 0 and r.verify_ct > 0:
                proposed = r.verify_ct * (self.cfg.num_draft_tokens - 1)
                correct = sum(i * n for i, n in enumerate(r.hist))
                meta.update({
                    "spec_accept_rate": correct / proposed if proposed else 0.0,
                    "spec_accept_length": r.tokens / r.verify_ct,
                    "spec_num_correct_drafts": correct,
                    "spec_num_proposed_drafts": proposed,
                    "spec_verify_ct": r.verify_ct,
                    "spec_correct_drafts_histogram": list(r.hist),
                })
        return {"text": "".join(f" tok{i}" for i in range(r.tokens)),
                "output_ids": list(range(100, 100 + r.tokens)), "meta_info": meta,
                "_finished": finished}

    def _maybe_crash(self) -> None:
        c = self.cfg
        if c.standin_crash_after is None:
            return
        if c.standin_crash_steps and c.steps not in c.standin_crash_steps:
            return
        if self.arrived >= c.standin_crash_after:
            log("stand-in: simulated crash (os._exit(3)) with requests in flight")
            os._exit(3)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"

    def setup(self):
        super().setup()
        # small SSE writes must not wait for the peer's delayed ACK (asyncio/uvicorn set this too)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, fmt, *args):  # access log off (SGLang's is off by default too)
        pass

    # -- helpers ----------------------------------------------------------------------------

    def _send_json(self, status: int, obj) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _send_empty(self, status: int) -> None:
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    # -- routes -----------------------------------------------------------------------------

    def do_GET(self):  # noqa: N802 - http.server API
        app = self.server.app  # type: ignore[attr-defined]
        if self.path in ("/health", "/health_generate"):
            self._send_empty(200 if app.healthy() else 503)
        elif self.path == "/model_info":
            self._send_json(200, {"model_path": app.cfg.model_path, "is_generation": True})
        elif self.path in ("/server_info", "/get_server_info"):
            if self.path == "/get_server_info":
                log("WARNING Endpoint '/get_server_info' is deprecated; use '/server_info'")
            self._send_json(200, app.server_info())
        else:
            self._send_json(404, {"detail": "Not Found"})

    def do_POST(self):  # noqa: N802 - http.server API
        app = self.server.app  # type: ignore[attr-defined]
        if self.path != "/generate":
            self._send_json(404, {"detail": "Not Found"})
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            text = body["text"]
            if not isinstance(text, str):
                raise ValueError("text must be a string (batches are not supported by the stand-in)")
            sp = body.get("sampling_params") or {}
            max_new = int(sp.get("max_new_tokens", 128))
            if max_new < 1:
                raise ValueError("max_new_tokens must be >= 1")
            stream = bool(body.get("stream", False))
        except (ValueError, KeyError, TypeError) as exc:
            self._send_json(400, {"error": {"message": str(exc)}})
            return
        if not app.healthy():
            self._send_json(503, {"error": {"message": "server is starting"}})
            return
        req = app.new_request(text, max_new)
        if stream:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                while True:
                    ev = req.chunks.get()
                    done = ev.pop("_finished")
                    self._chunk(b"data: " + json.dumps(ev).encode() + b"\n\n")
                    if done:
                        break
                done_event = b"data: [DONE]\n\n"
                self.wfile.write(f"{len(done_event):x}\r\n".encode() + done_event + b"\r\n0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                req.aborted = True
        else:
            while True:
                ev = req.chunks.get()
                if ev.pop("_finished"):
                    break
            self._send_json(200, ev)


class App:
    def __init__(self, cfg: argparse.Namespace):
        self.cfg = cfg
        self.t0 = time.monotonic()
        self.scheduler = Scheduler(cfg)
        self.scheduler.start()
        self._rid = 0
        self._lock = threading.Lock()

    def healthy(self) -> bool:
        c = self.cfg
        if c.standin_never_healthy is not None and (not c.standin_never_healthy
                                                    or c.steps in c.standin_never_healthy):
            return False
        return time.monotonic() - self.t0 >= c.standin_startup_s

    def new_request(self, text: str, max_new: int) -> Request:
        with self._lock:
            self._rid += 1
            rid = f"standin-{self._rid}"
        c = self.cfg
        req = Request(rid=rid, max_new_tokens=max_new, prompt_tokens=len(text.split()),
                      plan=cycles_for(c.steps, c.standin_accept_rate, max_new))
        self.scheduler.submit(req)
        return req

    def server_info(self) -> dict:
        c = self.cfg
        return {
            "model_path": c.model_path, "tokenizer_path": c.model_path, "host": c.host,
            "port": c.port, "speculative_algorithm": c.speculative_algorithm,
            "speculative_draft_model_path": c.speculative_draft_model_path,
            "speculative_num_steps": c.steps if c.speculative_algorithm else None,
            "speculative_eagle_topk": c.topk if c.speculative_algorithm else None,
            "speculative_num_draft_tokens": c.num_draft_tokens if c.speculative_algorithm else None,
            "speculative_adaptive": False, "max_running_requests": 48,
            "launch_command": " ".join(sys.argv), "internal_states": [{}],
            "version": "0.5.23", "frontend": "python",
        }


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="stand-in for python -m sglang.launch_server")
    p.add_argument("--model-path", "--model", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--speculative-algorithm", default=None)
    p.add_argument("--speculative-draft-model-path", "--speculative-draft-model", default=None)
    p.add_argument("--speculative-num-steps", type=int, default=None)
    p.add_argument("--speculative-eagle-topk", type=int, default=None)
    p.add_argument("--speculative-num-draft-tokens", type=int, default=None)
    p.add_argument("--standin-base-ms", type=float, default=20.0,
                   help="verify (or plain decode) time per tick, ms")
    p.add_argument("--standin-step-ms", type=float, default=2.0, help="extra ms per draft step")
    p.add_argument("--standin-accept-rate", type=float, default=0.7,
                   help="per-position acceptance p of the chain draft")
    p.add_argument("--standin-startup-s", type=float, default=0.0)
    p.add_argument("--standin-cycle-log", action="store_true", help="write [eagle-cycle] lines")
    p.add_argument("--standin-never-healthy", type=int, nargs="*", default=None, metavar="STEPS")
    p.add_argument("--standin-crash-after", type=int, default=None, metavar="N")
    p.add_argument("--standin-crash-steps", type=int, nargs="*", default=None, metavar="STEPS")
    p.add_argument("--standin-children", type=int, default=0)
    p.add_argument("--standin-ignore-sigterm", action="store_true")
    p.add_argument("--standin-pid-dir", type=Path, default=None)
    args, unknown = p.parse_known_args(argv)
    args.unknown = unknown
    # SGLang's resolution of the speculation arguments (speculative_hook.py)
    if args.speculative_algorithm:
        if args.speculative_num_steps is None:
            args.speculative_num_steps, args.speculative_eagle_topk = 3, 1
            args.speculative_num_draft_tokens = 4
        args.steps = args.speculative_num_steps
        args.topk = args.speculative_eagle_topk or 1
        if args.topk == 1 and args.speculative_num_draft_tokens != args.steps + 1:
            if args.speculative_num_draft_tokens is not None:
                log("WARNING speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 "
                    "when speculative_eagle_topk == 1")
            args.speculative_num_draft_tokens = args.steps + 1
        args.num_draft_tokens = args.speculative_num_draft_tokens or args.steps + 1
    else:
        args.steps, args.topk, args.num_draft_tokens = 0, None, None
    return args


def _spawn_children(cfg: argparse.Namespace) -> list[subprocess.Popen]:
    code = ("import signal, time\n"
            + ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" if cfg.standin_ignore_sigterm else "")
            + "time.sleep(600)\n")
    kids = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(cfg.standin_children)]
    if cfg.standin_pid_dir is not None:
        for k in kids:
            (cfg.standin_pid_dir / f"child-{k.pid}").write_text(str(k.pid))
    return kids


def main(argv: Optional[list[str]] = None) -> int:
    cfg = parse_args(sys.argv[1:] if argv is None else argv)
    log(f"stand-in server: model={cfg.model_path} steps={cfg.steps} topk={cfg.topk} "
        f"draft_tokens={cfg.num_draft_tokens} ignored={cfg.unknown}")
    if cfg.standin_pid_dir is not None:
        cfg.standin_pid_dir.mkdir(parents=True, exist_ok=True)
        (cfg.standin_pid_dir / f"server-{os.getpid()}").write_text(str(os.getpid()))
    if cfg.standin_ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        def _term(signum, frame):
            log("received SIGTERM, shutting down")
            os._exit(0)
        signal.signal(signal.SIGTERM, _term)
    _spawn_children(cfg)
    httpd = ThreadingHTTPServer((cfg.host, cfg.port), Handler)
    httpd.daemon_threads = True
    httpd.app = App(cfg)  # type: ignore[attr-defined]
    log(f"Uvicorn running on http://{cfg.host}:{cfg.port}")
    try:
        httpd.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
