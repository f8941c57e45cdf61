"""Where cycle records go: the ``[eagle-cycle]`` log line, the JSONL file, NVTX ranges.

Environment (read once, in the scheduler process, at the first profiled decode cycle):

* ``SGLANG_EAGLE_CYCLE_LOG_EVERY=N`` (default 1): one log line per cycle, or one aggregated line
  per ``N`` cycles (:class:`~sglang_eagle_cycle.cycle.Aggregator`). The line goes to the logger
  ``sglang_eagle_cycle`` at INFO, so SGLang's ``--log-level`` decides whether it is printed.
* ``SGLANG_EAGLE_CYCLE_JSONL=path``: one JSON object per cycle whatever ``LOG_EVERY`` is, appended
  (an existing file is never truncated) in whole lines, flushed as soon as written (the sink
  thread writes every 10 ms while cycles arrive); with tp x pp x dp > 1 each rank writes
  ``name.tp{T}.pp{P}.dp{D}.ext``.
* ``SGLANG_EAGLE_CYCLE_ALL_RANKS=1``: every rank prints its line, labelled ``rank=...``; by
  default only SGLang's stats-logging rank (attention-TP rank 0) prints.
* ``SGLANG_EAGLE_CYCLE_NVTX=1``: NVTX ranges per phase for Nsight Systems (``nvtx`` package, or
  ``torch.cuda.nvtx`` when it is missing).

Cost: reading events, formatting and file I/O take tens of microseconds per cycle (about 35 us
measured in ``benchmarks/bench_hook_overhead.py`` on a 2-core VM), more than the scheduler can
spare, so by default :class:`CycleSink` hands each cycle to one daemon thread (``submit`` is a
``deque.append``); all of that happens there, in batches, every 10 ms while cycles arrive, at the
lowest CPU priority (nice 19): it uses cores the scheduler leaves idle.
Usage::

    sink = CycleSink(SinkConfig.from_env(os.environ, ranks))
    if sink.active:
        sink.submit(pending)        # an object with ready() and build() -> CycleRecord
    sink.flush(); sink.close()
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Protocol

from .cycle import Aggregator, CycleRecord, format_line, to_json

LOGGER_NAME = "sglang_eagle_cycle"
logger = logging.getLogger(LOGGER_NAME)

#: A record whose events are still not complete after this long is dropped (seconds).
STALE_AFTER_S = 5.0
#: Most records waiting for their events before the oldest is dropped.
MAX_WAITING = 1024
#: Most cycles queued for the sink thread; beyond it new ones are dropped (a scheduler that never
#: releases the GIL would otherwise grow the queue without bound).
MAX_INBOX = 10000


class Pending(Protocol):
    """One measured cycle whose events may not be readable yet."""

    def ready(self) -> bool:
        """Whether its events completed (non-blocking)."""

    def build(self) -> Optional[CycleRecord]:
        """Read the events into a record (only once ``ready``); releases them."""


def _env_int(env: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        logger.warning("sglang-eagle-cycle: %s=%r is not an integer >= %d; using %d", name, raw, minimum, default)
        return default
    return value


def _env_flag(env: Mapping[str, str], name: str) -> bool:
    return (env.get(name) or "").strip().lower() in ("1", "true", "yes", "on")


def jsonl_path_for(path: str, ranks: Any) -> str:
    """The JSONL file of this rank: ``path`` itself, or with ``.tp{T}.pp{P}.dp{D}`` before the extension.

    Args:
        path: ``SGLANG_EAGLE_CYCLE_JSONL`` as given.
        ranks: object with ``tp_rank, pp_rank, dp_rank, tp_size, pp_size, dp_size`` (ints).

    >>> from types import SimpleNamespace as N
    >>> jsonl_path_for("/tmp/c.jsonl", N(tp_rank=1, pp_rank=0, dp_rank=0, tp_size=8, pp_size=1, dp_size=1))
    '/tmp/c.tp1.pp0.dp0.jsonl'
    """
    if ranks.tp_size * ranks.pp_size * ranks.dp_size <= 1:
        return path
    p = Path(path)
    suffix = f".tp{ranks.tp_rank}.pp{ranks.pp_rank}.dp{ranks.dp_rank}"
    return str(p.with_name(p.stem + suffix + p.suffix)) if p.suffix else path + suffix


@dataclass(frozen=True)
class SinkConfig:
    """What this rank writes.

    Attributes:
        log_every: cycles per log line (1 = every cycle).
        log_line: whether this rank prints the line at all.
        rank_label: ``rank=`` value added to lines and JSONL records (None: not added).
        jsonl_path: this rank's JSONL file (suffix already applied), or None.
        nvtx: NVTX ranges per phase.
        background: format and write on a daemon thread (default) instead of the caller's thread.
    """

    log_every: int = 1
    log_line: bool = True
    rank_label: Optional[str] = None
    jsonl_path: Optional[str] = None
    nvtx: bool = False
    background: bool = True

    @classmethod
    def from_env(cls, env: Mapping[str, str], ranks: Any, *, stats_rank: bool = True,
                 background: bool = True) -> "SinkConfig":
        """Read the ``SGLANG_EAGLE_CYCLE_*`` variables for a process with ``ranks``.

        Args:
            env: the environment (``os.environ``).
            ranks: :class:`sglang_eagle_cycle.runtime.Ranks` (or any object with its fields and ``label()``).
            stats_rank: whether SGLang's stats-logging rank is this process (it prints by default).

        Bad values are a WARNING and the default, never an exception (the server must start).
        """
        all_ranks = _env_flag(env, "SGLANG_EAGLE_CYCLE_ALL_RANKS")
        path = os.path.expanduser((env.get("SGLANG_EAGLE_CYCLE_JSONL") or "").strip()) or None
        return cls(
            log_every=_env_int(env, "SGLANG_EAGLE_CYCLE_LOG_EVERY", 1, 1),
            log_line=stats_rank or all_ranks,
            rank_label=ranks.label() if all_ranks else None,
            jsonl_path=jsonl_path_for(path, ranks) if path else None,
            nvtx=_env_flag(env, "SGLANG_EAGLE_CYCLE_NVTX"),
            background=background,
        )


class _JsonlFile:
    """Append-only JSONL writer: whole lines, flushed after each batch of cycles (every few ms)."""

    def __init__(self, path: str):
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        self.path = path
        self._f = open(path, "a", encoding="utf-8")

    def write_lines(self, lines: list) -> None:
        self._f.write("\n".join(lines) + "\n")
        self._f.flush()

    def close(self) -> None:
        try:
            self._f.close()
        except OSError:
            pass


class _Flush:
    __slots__ = ("done",)

    def __init__(self):
        self.done = threading.Event()


#: Sink thread wake-up period while cycles arrive, and the longest sleep when idle (seconds).
POLL_BUSY_S = 0.01
POLL_IDLE_S = 0.2


class CycleSink:
    """Turns measured cycles into log lines and JSONL records, off the scheduler's thread.

    Args:
        config: :class:`SinkConfig`.
        log: logger for the line (default ``sglang_eagle_cycle``); faults go to it at WARNING.

    The scheduler thread only appends to a deque (no lock, no wake-up syscall); the sink thread
    wakes every :data:`POLL_BUSY_S` while cycles arrive and writes them in submission order. A
    cycle whose events have not completed is retried (``query()``, never a sync) for
    :data:`STALE_AFTER_S` seconds, then dropped.
    """

    def __init__(self, config: SinkConfig, *, log: Optional[logging.Logger] = None):
        self.config = config
        self._log = log or logger
        self._agg = Aggregator(config.log_every)
        self._jsonl: Optional[_JsonlFile] = None
        self._faults: set = set()
        self._inbox: deque = deque()
        self._waiting: deque = deque()
        self._kick = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._start_lock = threading.Lock()
        self._stopping = False
        self._closed = False
        self.written = 0
        self.dropped = 0
        if config.jsonl_path:
            try:
                self._jsonl = _JsonlFile(config.jsonl_path)
            except OSError as exc:
                self._fault("jsonl-open", exc, f"cannot open {config.jsonl_path}; JSONL disabled")

    # -- hot path ------------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        """Whether a submitted cycle would be written anywhere (JSONL open, or the line enabled at INFO)."""
        return self._jsonl is not None or (self.config.log_line and self._log.isEnabledFor(logging.INFO))

    def submit(self, item: Any) -> None:
        """Hand over one measured cycle (a :class:`Pending` or a ready :class:`CycleRecord`)."""
        if self._closed:
            return
        if not self.config.background:
            self._waiting.append((item, time.monotonic()))
            self._drain()
            return
        if len(self._inbox) >= MAX_INBOX:
            self.dropped += 1
            self._fault("queue", OverflowError(f"{MAX_INBOX} cycles waiting for the sink thread"), "cycles dropped")
            return
        self._inbox.append(item)
        if self._thread is None:
            self._start()

    # -- control -------------------------------------------------------------------------------

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until everything submitted so far is written (or dropped). True if it finished in time."""
        if self._thread is None:
            self._take_inbox()
            self._drain(final=True)
            return not self._waiting
        marker = _Flush()
        self._inbox.append(marker)
        self._kick.set()
        return marker.done.wait(timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Flush, write the pending aggregate, stop the thread and close the JSONL file. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:
            self._stopping = True
            self._kick.set()
            self._thread.join(timeout)
        else:
            self._take_inbox()
            self._drain(final=True)
            self._finish()

    # -- writer side ---------------------------------------------------------------------------

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name="eagle-cycle-sink", daemon=True)
            self._thread.start()
        atexit.register(self.close, 2.0)

    def _take_inbox(self) -> list:
        """Move submitted cycles to the waiting list; returns the flush markers met on the way."""
        markers = []
        inbox, now = self._inbox, time.monotonic()
        while inbox:
            item = inbox.popleft()
            if isinstance(item, _Flush):
                markers.append(item)
            else:
                self._waiting.append((item, now))
        return markers

    def _run(self) -> None:
        try:  # lowest CPU priority: the thread uses cores the scheduler leaves idle (Linux: per thread)
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        except (AttributeError, OSError):
            pass
        sleep = POLL_BUSY_S
        while True:
            self._kick.wait(sleep)
            self._kick.clear()
            stopping = self._stopping
            busy = bool(self._inbox)
            markers = []
            try:
                markers = self._take_inbox()
                self._drain(final=bool(markers) or stopping)
                if stopping:
                    self._finish()
            except Exception as exc:  # never let the thread die: the scheduler would queue forever
                self._fault("thread", exc, "writing goes on")
            for m in markers:
                m.done.set()
            if stopping:
                return
            sleep = POLL_BUSY_S if busy or self._waiting else min(sleep * 2, POLL_IDLE_S)

    def _drain(self, final: bool = False) -> None:
        """Write waiting cycles from the head while their events are complete (JSONL in one write)."""
        w = self._waiting
        deadline = time.monotonic() + (1.0 if final else 0.0)
        lines: list = []
        try:
            while w:
                item, t0 = w[0]
                try:
                    ok = item.ready() if not isinstance(item, CycleRecord) else True
                except Exception as exc:
                    self._fault("ready", exc, "cycle dropped")
                    w.popleft()
                    self.dropped += 1
                    continue
                if not ok:
                    now = time.monotonic()
                    if now - t0 > STALE_AFTER_S or len(w) > MAX_WAITING:
                        w.popleft()
                        self.dropped += 1
                        self._fault("stale", TimeoutError("events not complete"), "cycle dropped")
                        continue
                    if final and now < deadline:
                        time.sleep(0.001)
                        continue
                    return
                w.popleft()
                self._write(item, lines)
        finally:
            if lines and self._jsonl is not None:
                try:
                    self._jsonl.write_lines(lines)
                except Exception as exc:
                    self._fault("jsonl-write", exc, f"JSONL {self._jsonl.path} disabled")
                    self._jsonl.close()
                    self._jsonl = None

    def _write(self, item: Any, lines: list) -> None:
        try:
            rec = item if isinstance(item, CycleRecord) else item.build()
            if rec is None:
                return
            if self.config.rank_label:
                rec.rank = self.config.rank_label
            if self._jsonl is not None:
                lines.append(to_json(rec))
        except Exception as exc:
            self._fault("build", exc, "cycle dropped")
            self.dropped += 1
            return
        if self.config.log_line and self._log.isEnabledFor(logging.INFO):
            try:
                for out in self._agg.add(rec):
                    self._info(format_line(out))
            except Exception as exc:
                self._fault("log-line", exc, "line skipped")
        self.written += 1

    def _info(self, line: str) -> None:
        # Logger.info() would walk the stack to find the caller; it is always this method.
        log = self._log
        log.handle(log.makeRecord(log.name, logging.INFO, __file__, 0, line, None, None, "_info"))

    def _finish(self) -> None:
        if self.config.log_line and self._log.isEnabledFor(logging.INFO):
            try:
                for out in self._agg.flush():
                    self._info(format_line(out))
            except Exception as exc:
                self._fault("log-line", exc, "line skipped")
        if self._jsonl is not None:
            self._jsonl.close()
            self._jsonl = None

    def _fault(self, where: str, exc: BaseException, consequence: str) -> None:
        key = (where, type(exc))
        if key in self._faults:
            return
        self._faults.add(key)
        self._log.warning("sglang-eagle-cycle: internal error in sink %s (%s: %s); %s",
                          where, type(exc).__name__, exc, consequence)


# ---------------------------------------------------------------------------------------------
# NVTX
# ---------------------------------------------------------------------------------------------


class NvtxRanges:
    """``push(name)`` / ``pop()`` of NVTX ranges named ``eagle_cycle.<phase>``."""

    def __init__(self, push, pop, source: str):
        self.push = push
        self.pop = pop
        self.source = source


def load_nvtx(log: Optional[logging.Logger] = None) -> Optional[NvtxRanges]:
    """NVTX push/pop from the ``nvtx`` package, else ``torch.cuda.nvtx``; None (with one WARNING) if neither works."""
    log = log or logger
    try:
        import nvtx  # type: ignore[import-not-found]

        return NvtxRanges(lambda name: nvtx.push_range(name, domain="eagle_cycle"),
                          lambda: nvtx.pop_range(domain="eagle_cycle"), "nvtx")
    except Exception:
        pass
    try:
        import torch

        if torch.cuda.is_available():
            log.warning("sglang-eagle-cycle: SGLANG_EAGLE_CYCLE_NVTX=1 but the nvtx package is not installed "
                        "(pip install nvtx); using torch.cuda.nvtx")
            return NvtxRanges(torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop, "torch.cuda.nvtx")
    except Exception:
        pass
    log.warning("sglang-eagle-cycle: SGLANG_EAGLE_CYCLE_NVTX=1 but neither the nvtx package nor CUDA is "
                "available; no NVTX ranges")
    return None

