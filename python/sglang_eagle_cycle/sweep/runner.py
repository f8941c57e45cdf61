"""Run the sweep: for each configuration (launch mode) or the one running server (URL mode),
warm up, measure every concurrency, append one record per (configuration, concurrency).

Failure policy (the sweep always continues with the next configuration):

* the server exits or is not healthy within ``--startup-timeout``: every pending concurrency of
  that configuration gets a ``failed`` record with the reason and the log's last lines;
* a request fails (HTTP error, error event, connection reset, stream cut before ``[DONE]``):
  that measurement is ``failed``; if the server died, the remaining concurrencies are too;
* Ctrl-C / SIGTERM: the running server group is stopped, nothing partial is written, and the
  records already appended stay.

Exit code (:attr:`Outcome.exit_code`): 0 when at least one configuration of the sweep is
measured (now or by an earlier run), 1 when none is, 130 when interrupted before any.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Optional

from .breakdown import cycle_breakdown
from .client import GenerateSettings, RequestResult, ServerError, get_server_info, health_ok, run_load
from .grid import ServerConfig, SpecConfig, server_config
from .launcher import (DEFAULT_SERVER_CMD, ServerProcess, ServerStartError, build_launch_argv,
                       free_port, log_size, log_tail, port_taken, unique_path)
from .metrics import summarize
from .records import RecordLog, new_record, record_key
from .signals import deferred_signals, raise_if_interrupted
from .workload import PromptSet

#: Lines of the server log kept in a failed record.
LOG_TAIL_LINES = 30


class SweepError(Exception):
    """The sweep cannot run at all (URL mode: the server does not answer)."""


@dataclass
class SweepSettings:
    """Everything a sweep needs besides the prompts and the output file.

    Times are seconds. ``num_prompts`` and ``duration_s``: exactly one is set (per measurement).
    """

    concurrencies: list[int]
    generate: GenerateSettings
    num_prompts: Optional[int] = None
    duration_s: Optional[float] = None
    warmup_requests: int = 4
    seed: int = 0
    startup_timeout_s: float = 900.0
    stop_timeout_s: float = 30.0
    # launch mode
    model: Optional[str] = None
    draft: Optional[str] = None
    algorithm: str = "EAGLE3"
    server_cmd: tuple[str, ...] = DEFAULT_SERVER_CMD
    extra_args: list[str] = field(default_factory=list)
    host: str = "127.0.0.1"
    port: Optional[int] = None
    log_dir: Optional[Path] = None
    progress: bool = True


@dataclass
class Target:
    """A server being measured."""

    base_url: str
    server: ServerConfig
    log_path: Optional[Path]
    process: Optional[ServerProcess]


@dataclass
class Outcome:
    """Counts of this run: measurements ok / failed, configurations skipped as already done."""

    ok: int = 0
    failed: int = 0
    skipped: int = 0
    interrupted: bool = False

    @property
    def exit_code(self) -> int:
        if self.ok or self.skipped:
            return 0
        return 130 if self.interrupted else 1


def run_settings(s: SweepSettings, steps: int) -> dict:
    """A record's ``settings`` (:mod:`.records`): what else a configuration at ``steps`` ran with.
    ``algorithm``: ``--algorithm`` for a speculative launch (None for the baseline and in URL mode,
    where the server's own flags are not the sweep's); ``server_args``: the arguments after ``--``
    (launch mode); ``ignore_eos`` and ``stream``: the requests'; ``workload``: the measurement asked
    for (``--num-prompts`` or ``--duration`` in s, ``--seed`` of the request order,
    ``--warmup-requests``), so that a re-run with another one measures again."""
    launch = s.model is not None
    return {"algorithm": s.algorithm if launch and steps > 0 else None,
            "server_args": list(s.extra_args) if launch else [],
            "ignore_eos": bool(s.generate.ignore_eos), "stream": bool(s.generate.stream),
            "workload": {"num_prompts": s.num_prompts, "duration_s": s.duration_s, "seed": s.seed,
                         "warmup_requests": s.warmup_requests}}


def _setup(settings) -> Optional[str]:
    """A record's ``settings`` but the algorithm (a baseline runs none), as text: the baselines a
    speculative record's speedup may use are those run with it (None: a record from before settings)."""
    if not isinstance(settings, dict):
        return None
    return json.dumps({k: v for k, v in settings.items() if k != "algorithm"}, sort_keys=True)


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Sweep:
    """One sweep over a grid (launch mode) or one server (URL mode), writing to ``log``."""

    def __init__(self, settings: SweepSettings, prompt_set: PromptSet, log: RecordLog,
                 say: Optional[Callable[[str], None]] = None):
        self.s = settings
        self.prompt_set = prompt_set
        self.log = log
        self.prompts = [p.text for p in prompt_set.request_order(settings.seed)]
        self.outcome = Outcome()
        self._say = say or (lambda msg: print(msg, file=sys.stderr))
        self._warned: set[str] = set()
        self._bar = None
        self._last_refresh = 0.0
        self._requests_done = 0
        self._phase = ""
        existing = log.read()
        self.done = {record_key(r) for r in existing if r.get("status") == "ok"}
        self.baseline_tok_s: dict[tuple, float] = {}
        for r in existing:
            self._note_baseline(r)

    # -- bookkeeping --------------------------------------------------------------------------

    def _same_workload(self, rec: dict) -> bool:
        return (rec.get("prompt_set_sha256") == self.prompt_set.sha256
                and rec.get("max_new_tokens") == self.s.generate.max_new_tokens)

    def _note_baseline(self, rec: dict) -> None:
        if (rec.get("status") == "ok" and rec.get("steps") == 0 and self._same_workload(rec)
                and isinstance(rec.get("output_tok_s"), (int, float))):
            self.baseline_tok_s[(rec.get("model"), rec.get("concurrency"), _setup(rec.get("settings")))] = \
                float(rec["output_tok_s"])

    def key(self, server: ServerConfig, concurrency: int) -> tuple:
        return record_key({
            "model": server.model, "draft": server.draft, "steps": server.steps,
            "topk": server.topk, "num_draft_tokens": server.num_draft_tokens,
            "concurrency": concurrency, "max_new_tokens": self.s.generate.max_new_tokens,
            "prompt_set_sha256": self.prompt_set.sha256, "settings": run_settings(self.s, server.steps),
        })

    def _pending(self, server: ServerConfig, concurrencies: list[int]) -> list[int]:
        todo = [c for c in concurrencies if self.key(server, c) not in self.done]
        skipped = len(concurrencies) - len(todo)
        if skipped:
            self.outcome.skipped += skipped
            self._advance(skipped)
        return todo

    def warn(self, msg: str) -> None:
        """Say ``msg`` once per run."""
        if msg not in self._warned:
            self._warned.add(msg)
            self._write_line(f"warning: {msg}")

    def _write_line(self, msg: str) -> None:
        if self._bar is not None:
            from tqdm import tqdm
            tqdm.write(msg, file=sys.stderr)
        else:
            self._say(msg)

    def _advance(self, n: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def _status(self, text: str) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=True)

    def _on_result(self, _res: RequestResult) -> None:
        self._requests_done += 1
        now = time.monotonic()
        if self._bar is not None and now - self._last_refresh > 0.5:
            self._last_refresh = now
            self._bar.set_postfix_str(f"{self._phase} {self._requests_done} req", refresh=True)

    def _emit(self, rec: dict) -> None:
        with deferred_signals():  # written and counted, or neither
            self.log.append(rec)
            if rec["status"] == "ok":
                self.outcome.ok += 1
                self.done.add(record_key(rec))
                self._note_baseline(rec)
            else:
                self.outcome.failed += 1
        raise_if_interrupted()   # a Ctrl-C whose KeyboardInterrupt was lost: stop at the record
        if rec["status"] == "ok":
            tok = rec["output_tok_s"]
            sp = rec["speedup_vs_baseline"]
            self._write_line(
                f"{_label(rec)} c={rec['concurrency']}: {tok:.1f} tok/s"
                + (f", {sp:.3f}x baseline" if sp is not None else "")
                + (f", accept length {rec['accept_len_mean']:.2f}" if rec["accept_len_mean"] else ""))
        else:
            self._write_line(f"{_label(rec)} c={rec['concurrency']}: FAILED: {rec['error']['reason']}"
                             + _where(rec))
        self._advance()

    def _base_fields(self, server: ServerConfig, concurrency: int, log_path: Optional[Path]) -> dict:
        return {
            "model": server.model, "draft": server.draft, "steps": server.steps,
            "topk": server.topk, "num_draft_tokens": server.num_draft_tokens,
            "concurrency": concurrency, "max_new_tokens": self.s.generate.max_new_tokens,
            "prompt_set_sha256": self.prompt_set.sha256, "settings": run_settings(self.s, server.steps),
            "server_log": None if log_path is None else str(log_path),
        }

    def _failed(self, server: ServerConfig, concurrency: int, reason: str, log_path: Optional[Path],
                **extra) -> dict:
        tail = log_tail(log_path, LOG_TAIL_LINES) if log_path is not None else []
        fields = self._base_fields(server, concurrency, log_path)
        fields.update(extra)
        fields.setdefault("started_at", _now_iso())
        fields.setdefault("duration_s", 0.0)
        return new_record(**fields, status="failed", error={"reason": reason, "log_tail": tail})

    def _fail_all(self, server: ServerConfig, concurrencies: list[int], reason: str,
                  log_path: Optional[Path]) -> None:
        for c in concurrencies:
            self._emit(self._failed(server, c, reason, log_path))

    # -- modes --------------------------------------------------------------------------------

    def run_launch(self, grid: list[SpecConfig]) -> Outcome:
        """Launch mode: one server per configuration of ``grid`` (baseline first)."""
        assert self.s.model is not None and self.s.log_dir is not None
        self._open_bar(len(grid) * len(self.s.concurrencies))
        try:
            for cfg in grid:
                self._run_config(cfg)
        except KeyboardInterrupt:
            self.outcome.interrupted = True
            self._write_line("interrupted: server stopped; records written so far are kept")
        finally:
            self._close_bar()
        return self.outcome

    def run_url(self, base_url: str, server_log: Optional[Path]) -> Outcome:
        """URL mode: measure the server at ``base_url`` (its log, if given, for the cycle breakdown).

        Raises:
            SweepError: the server is not healthy within the startup timeout or has no ``/server_info``.
        """
        base_url = base_url.rstrip("/")
        self._open_bar(len(self.s.concurrencies))
        try:
            self._phase = "health"
            wait_s = min(self.s.startup_timeout_s, 60.0)
            if not _wait_health(base_url, wait_s):
                raise SweepError(f"no healthy server at {base_url} within {wait_s:g} s (GET /health)")
            try:
                server = server_config(get_server_info(base_url))
            except ServerError as exc:
                raise SweepError(str(exc)) from None
            todo = self._pending(server, self.s.concurrencies)
            if not todo:
                self._write_line("every concurrency was already measured for this server: nothing to do")
                return self.outcome
            target = Target(base_url, server, server_log, None)
            if self._warmup(target, todo):
                self._measure_all(target, todo)
        except KeyboardInterrupt:
            self.outcome.interrupted = True
            self._write_line("interrupted: records written so far are kept")
        finally:
            self._close_bar()
        return self.outcome

    # -- one configuration --------------------------------------------------------------------

    def _run_config(self, cfg: SpecConfig) -> None:
        raise_if_interrupted()
        s = self.s
        draft = None if cfg.is_baseline else s.draft
        pred = cfg.predicted()
        if pred is not None:
            planned = ServerConfig(s.model, draft, *pred)
            todo = self._pending(planned, s.concurrencies)
            if not todo:
                self._write_line(f"{cfg.label}: already measured at every concurrency, skipped")
                return
        else:
            planned = ServerConfig(s.model, draft, cfg.steps, cfg.topk, cfg.draft_tokens)
            todo = list(s.concurrencies)
        if s.port is not None:
            taken = port_taken(s.host, s.port)
            if taken is not None:   # /health would answer from whatever holds it: never measure that
                self._fail_all(planned, todo, f"--port {s.port} on {s.host} is not free ({taken}): "
                               "another server listens there; stop it or pick another --port", None)
                return
        port = s.port or free_port(s.host)
        argv = build_launch_argv(s.server_cmd, model=s.model, draft=draft, algorithm=s.algorithm,
                                 steps=cfg.steps, topk=cfg.topk, draft_tokens=cfg.draft_tokens,
                                 host=s.host, port=port, extra=s.extra_args)
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        log_path = unique_path(s.log_dir / f"server_{cfg.label}_{stamp}.log")
        url = f"http://{s.host}:{port}"
        proc = ServerProcess(argv, log_path, url)
        self._phase = f"{cfg.label} starting"
        self._status(self._phase)
        try:
            try:
                proc.start()
                proc.wait_healthy(s.startup_timeout_s)
                server = server_config(get_server_info(url))
            except (ServerStartError, ServerError) as exc:
                self._fail_all(planned, todo, str(exc), log_path)
                return
            if server.model is None:
                server = replace(server, model=s.model)
            if not cfg.is_baseline and server.steps == 0:
                # recorded as steps 0 it would pass for the baseline (or be skipped as measured)
                self._fail_all(planned, todo, f"launched with --speculative-algorithm {s.algorithm} but "
                               "/server_info reports no speculative_algorithm (does --server-cmd pass "
                               "the arguments on?)", log_path)
                return
            if pred is not None and (server.steps, server.topk, server.num_draft_tokens) != pred:
                self.warn(f"{cfg.label}: server reports steps={server.steps} topk={server.topk} "
                          f"num_draft_tokens={server.num_draft_tokens}; records use these")
            if pred is None or server != planned:
                before = len(todo)
                todo = [c for c in todo if self.key(server, c) not in self.done]
                self.outcome.skipped += before - len(todo)
                self._advance(before - len(todo))
            if not todo:
                return
            target = Target(url, server, log_path, proc)
            if self._warmup(target, todo):
                self._measure_all(target, todo)
        finally:
            self._status(f"{cfg.label} stopping")
            proc.stop(s.stop_timeout_s)

    def _warmup(self, target: Target, todo: list[int]) -> bool:
        n = self.s.warmup_requests
        if n <= 0:
            return True
        self._phase = f"{_label_server(target.server)} warm-up"
        gen = replace(self.s.generate, max_new_tokens=min(32, self.s.generate.max_new_tokens))
        load = run_load(target.base_url, self.prompts, min(n, max(self.s.concurrencies)), gen,
                        num_requests=n, on_result=self._on_result)
        if load.failures:
            reason = f"warm-up failed: {load.failures[0].error}"
            code = _wait_exit(target.process)
            if code is not None:
                reason = f"server exited with code {code} during warm-up; {reason}"
            self._fail_all(target.server, todo, reason, target.log_path)
            return False
        return True

    def _measure_all(self, target: Target, todo: list[int]) -> None:
        for i, c in enumerate(todo):
            code = None if target.process is None else target.process.returncode()
            if code is not None:
                self._fail_all(target.server, todo[i:],
                               f"server exited with code {code} before this measurement",
                               target.log_path)
                return
            self._emit(self._measure(target, c))

    def _measure(self, target: Target, concurrency: int) -> dict:
        s = self.s
        self._phase = f"{_label_server(target.server)} c={concurrency}"
        self._requests_done = 0
        self._status(self._phase)
        start_off = log_size(target.log_path) if target.log_path else 0
        started_at = _now_iso()
        t0 = time.monotonic()
        load = run_load(target.base_url, self.prompts, concurrency, s.generate,
                        num_requests=s.num_prompts, duration_s=s.duration_s,
                        on_result=self._on_result)
        duration = round(time.monotonic() - t0, 3)
        timing = {"started_at": started_at, "duration_s": duration, "num_prompts": len(load.results)}
        if load.failures or not load.results:
            n_fail = len(load.failures)
            first = load.failures[0].error if load.failures else "no request completed"
            reason = f"{n_fail} of {len(load.results)} requests failed; first: {first}"
            code = _wait_exit(target.process)
            if code is not None:
                reason = f"server exited with code {code} during the measurement; {reason}"
            return self._failed(target.server, concurrency, reason, target.log_path, **timing)
        end_off = log_size(target.log_path) if target.log_path else 0
        stats = summarize(load.results, load.wall_s)
        cycle = cycle_breakdown(target.log_path, start_off, end_off, target.server, concurrency,
                                self.warn)
        fields = self._base_fields(target.server, concurrency, target.log_path)
        fields.update(stats)
        fields.update(started_at=started_at, duration_s=duration)
        return new_record(**fields, status="ok", error=None, cycle=cycle,
                          speedup_vs_baseline=self._speedup(target.server, concurrency,
                                                            stats["output_tok_s"]))

    def _speedup(self, server: ServerConfig, concurrency: int, tok_s: float) -> Optional[float]:
        if server.steps == 0:
            return 1.0
        base = self.baseline_tok_s.get((server.model, concurrency, _setup(run_settings(self.s, 0))))
        return round(tok_s / base, 4) if base else None

    # -- progress -----------------------------------------------------------------------------

    def _open_bar(self, total: int) -> None:
        if not self.s.progress:
            return
        from tqdm import tqdm
        self._bar = tqdm(total=total, unit="meas", desc="eagle-cycle sweep", file=sys.stderr,
                         dynamic_ncols=True, leave=True)

    def _close_bar(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def _where(rec: dict) -> str:
    """`` (server log PATH; last line: ...)`` for a failed record: the cause is usually the log's end."""
    if not rec.get("server_log"):
        return ""
    tail = [ln.strip() for ln in rec["error"].get("log_tail") or [] if ln.strip()]
    last = f"; last line: {tail[-1][:200]}" if tail else ""
    return f" (server log {rec['server_log']}{last})"


def _label(rec: dict) -> str:
    if rec.get("steps") == 0:
        return "baseline"
    return f"steps={rec.get('steps')} topk={rec.get('topk')} draft_tokens={rec.get('num_draft_tokens')}"


def _label_server(server: ServerConfig) -> str:
    return _label({"steps": server.steps, "topk": server.topk,
                   "num_draft_tokens": server.num_draft_tokens})


def _wait_exit(process: Optional[ServerProcess], wait_s: float = 2.0) -> Optional[int]:
    """The server's exit code if it is exiting (requests fail a moment before the exit is seen)."""
    if process is None:
        return None
    end = time.monotonic() + wait_s
    while True:
        code = process.returncode()
        if code is not None or time.monotonic() >= end:
            return code
        time.sleep(0.05)


def _wait_health(base_url: str, timeout_s: float) -> bool:
    end = time.monotonic() + timeout_s
    delay = 0.1
    while True:
        if health_ok(base_url):
            return True
        if time.monotonic() >= end:
            return False
        raise_if_interrupted()
        time.sleep(delay)
        delay = min(2.0, delay * 1.5)
