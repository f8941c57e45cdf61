"""Where cycle records go: the ``[eagle-cycle]`` log line, the JSONL file, NVTX ranges.

Environment (read once, in the scheduler process, at the first profiled decode cycle):

* ``SGLANG_EAGLE_CYCLE_LOG_EVERY=N`` (default 1): one log line per cycle, or one aggregated line
  per ``N`` cycles (:class:`~sglang_eagle_cycle.cycle.Aggregator`). The line goes to the logger
  ``sglang_eagle_cycle`` at INFO, so SGLang's ``--log-level`` decides whether it is printed.
* ``SGLANG_EAGLE_CYCLE_JSONL=path``: one JSON object per cycle whatever ``LOG_EVERY`` is, appended
  (an existing file is never truncated) in whole lines, flushed as soon as written (the sink
  thread writes every few cycles while cycles arrive); with tp x pp x dp > 1 each rank writes
  ``name.tp{T}.pp{P}.dp{D}.ext``.
* ``SGLANG_EAGLE_CYCLE_ALL_RANKS=1``: every rank prints its line, labelled ``rank=...``; by
  default only SGLang's stats-logging rank (attention-TP rank 0) prints.
* ``SGLANG_EAGLE_CYCLE_NVTX=1``: NVTX ranges per phase for Nsight Systems (``nvtx`` package, or
  ``torch.cuda.nvtx`` when it is missing).

Cost: reading events, formatting and file I/O take tens of microseconds per cycle (about 120 us
on the scheduler thread when done there, ``inline sinks`` in ``benchmarks/bench_hook_overhead.py``
on a 2-core VM), more than the scheduler can spare, so by default :class:`CycleSink` hands each
cycle to one daemon thread (``submit`` is a ``deque.append``) at the lowest CPU priority (nice 19).
Where that thread runs matters as much as what it does: a thread that *waits for the GIL* while
the scheduler runs Python takes the GIL at every GIL-releasing call of the scheduler (each torch
op), and each such hand-over costs the scheduler microseconds. So the thread writes only while
the scheduler blocks on the device (:attr:`CycleSink.host_busy` False, set by the profiler), in
slices of at most :data:`SLICE_S`, woken by the scheduler once :data:`KICK_BACKLOG` cycles wait
(a wake-up is a system call, so not every cycle) or by its own timer.
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


#: Cycles the scheduler hands over before it wakes the sink thread (:meth:`CycleSink.kick`).
KICK_BACKLOG = 8
#: Sink thread sleep when no kick comes while cycles arrive, and the longest sleep when idle (seconds).
POLL_BUSY_S = 0.05
POLL_IDLE_S = 0.2
#: Longest the sink thread writes in one go before it lets the scheduler have the GIL back (seconds),
#: the pause after such a slice, and the most slices per wake-up.
SLICE_S = 0.0004
SLICE_GAP_S = 0.00005
MAX_SLICES = 8
#: Cycles older than this are written even while the scheduler is busy (seconds).
OVERDUE_S = 0.5


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
        #: Cycles submitted and not yet taken by the sink thread (its length is the backlog).
        self.inbox: deque = deque()
        self._waiting: deque = deque()
        self._wake = threading.Lock()  # released by kick(): the sink thread's wake-up (a futex, no Python lock)
        self._wake.acquire()
        #: Set by the submitting thread: True while it runs Python (the sink thread then keeps off
        #: the GIL), False while it waits for the device. Never set: the sink writes whenever it wakes.
        self.host_busy = False
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
        if len(self.inbox) >= MAX_INBOX:
            self.dropped += 1
            self._fault("queue", OverflowError(f"{MAX_INBOX} cycles waiting for the sink thread"), "cycles dropped")
            return
        self.inbox.append(item)
        if self._thread is None:
            self._start()

    def kick(self) -> None:
        """Wake the sink thread now (never blocks). The scheduler does it once :data:`KICK_BACKLOG` cycles wait.

        Call it when the submitting thread is about to block with the GIL released (the
        scheduler, right after it launched a cycle and before it waits for the device): the
        thread then writes while the scheduler does not need the GIL. Waking a thread costs the
        caller a system call, so it is done once per :data:`KICK_BACKLOG` cycles, not per cycle.
        """
        if self._thread is not None:
            self._wake_now()

    # -- control -------------------------------------------------------------------------------

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until everything submitted so far is written (or dropped). True if it finished in time."""
        if self._thread is None:
            self._take_inbox()
            self._drain(final=True)
            return not self._waiting
        marker = _Flush()
        self.inbox.append(marker)
        self._wake_now()
        return marker.done.wait(timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Flush, write the pending aggregate, stop the thread and close the JSONL file. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:
            self._stopping = True
            self._wake_now()
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
        inbox, now = self.inbox, time.monotonic()
        while inbox:
            item = inbox.popleft()
            if isinstance(item, _Flush):
                markers.append(item)
            else:
                self._waiting.append((item, now))
        return markers

    def _wake_now(self) -> None:
        try:
            self._wake.release()
        except RuntimeError:  # already released: the thread wakes anyway
            pass

    def _run(self) -> None:
        """The sink thread: wake, write what is complete while the scheduler waits, sleep.

        Why the care: a thread that waits for the GIL while the scheduler runs Python takes the
        GIL at each of the scheduler's GIL-releasing calls (every torch op), and each of those
        hand-overs costs the scheduler microseconds. So the thread writes only while
        :attr:`host_busy` is False (the scheduler blocks on the device, GIL released), stops as
        soon as it turns True, and otherwise sleeps without asking for the GIL. Cycles waiting
        longer than :data:`OVERDUE_S` are written regardless (a scheduler that never waits).
        """
        try:  # lowest CPU priority: the thread uses cores the scheduler leaves idle (Linux: per thread)
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        except (AttributeError, OSError):
            pass
        sleep = POLL_BUSY_S
        while True:
            self._wake.acquire(timeout=sleep)  # a kick, a flush or the timeout
            stopping = self._stopping
            markers = []
            had_work = False
            try:
                markers = self._take_inbox()
                had_work = bool(self._waiting)
                final = bool(markers) or stopping
                if final:
                    self._drain(final=True)
                else:
                    # slices while the scheduler still waits, each followed by a short sleep that
                    # gives the GIL back should it want it
                    for _ in range(MAX_SLICES):
                        if self._drain(gated=True, budget_s=SLICE_S) != "budget":
                            break
                        time.sleep(SLICE_GAP_S)
                if stopping:
                    self._finish()
            except Exception as exc:  # never let the thread die: the scheduler would queue forever
                self._fault("thread", exc, "writing goes on")
            for m in markers:
                m.done.set()
            if stopping:
                return
            # back off only after wake-ups that found nothing at all (no cycles are coming)
            sleep = POLL_BUSY_S if had_work or self.inbox else min(sleep * 2, POLL_IDLE_S)

    def _drain(self, final: bool = False, gated: bool = False, budget_s: Optional[float] = None) -> Optional[str]:
        """Write waiting cycles from the head while their events are complete (JSONL in one write).

        Args:
            final: wait up to 1 s for incomplete events (flush, close).
            gated: stop while :attr:`host_busy` (unless the head cycle is overdue).
            budget_s: stop after about this long; the rest waits for the next slice or wake-up.

        Returns:
            ``"busy"`` or ``"budget"`` when it stopped for that reason with cycles left, else None.
        """
        w = self._waiting
        deadline = time.monotonic() + (1.0 if final else 0.0)
        stop_at = time.perf_counter() + budget_s if budget_s is not None else None
        lines: list = []
        done = 0
        try:
            while w:
                item, t0 = w[0]
                if gated and self.host_busy and time.monotonic() - t0 < OVERDUE_S and len(w) < MAX_WAITING // 2:
                    return "busy"
                if stop_at is not None and done and time.perf_counter() > stop_at:
                    return "budget"
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
                done += 1
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

