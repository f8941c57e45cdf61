"""Where cycle records go: the ``[eagle-cycle]`` log line, the JSONL file, NVTX ranges.

Environment (read once, in the scheduler process, at the first profiled decode cycle):

* ``SGLANG_EAGLE_CYCLE_LOG_EVERY=N`` (default 1): one log line per cycle, or one aggregated line
  per ``N`` cycles (:class:`~sglang_eagle_cycle.cycle.Aggregator`), a partial one once no cycle
  has come for :data:`AGG_IDLE_S`. The line goes to the logger
  ``sglang_eagle_cycle`` at INFO, so SGLang's ``--log-level`` decides whether it is printed.
* ``SGLANG_EAGLE_CYCLE_JSONL=path``: one JSON object per cycle whatever ``LOG_EVERY`` is, appended
  (an existing file is never truncated) in whole lines, flushed as soon as written (the sink
  thread writes during the scheduler's next device wait, so a cycle is on disk one or two cycles
  later); with tp x pp x dp > 1 each rank writes
  ``name.tp{T}.pp{P}.dp{D}.ext``.
* ``SGLANG_EAGLE_CYCLE_ALL_RANKS=1``: every rank prints its line, labelled ``rank=...``; by
  default only SGLang's stats-logging ranks (attention-TP rank 0) print, one per DP (or
  DP-attention) replica, labelled ``rank=tp0.pp0.dp1`` with DP or PP and ``rank=tp4.adp1`` with
  DP attention.
* ``SGLANG_EAGLE_CYCLE_NVTX=1``: NVTX ranges per phase for Nsight Systems (``nvtx`` package, or
  ``torch.cuda.nvtx`` when it is missing).
* ``SGLANG_EAGLE_CYCLE_METRICS`` (default on): with SGLang's ``--enable-metrics``, the ranks that
  print cycle lines also observe each cycle into Prometheus series on SGLang's ``/metrics``
  (:class:`~sglang_eagle_cycle.metrics.LiveMetrics`), on the sink thread; ``0`` turns it off.

Cost: reading events, formatting and file I/O take tens of microseconds per cycle (about 120 us
on the scheduler thread when done there, ``inline sinks`` in ``benchmarks/bench_hook_overhead.py``
on a 2-core VM), more than the scheduler can spare, so by default :class:`CycleSink` hands each
cycle to one daemon thread (``submit`` is a ``deque.append``) at the scheduler's own CPU priority
(:data:`SINK_NICE`).
When that thread runs matters as much as what it does: a thread that *waits for the GIL* while
the scheduler runs Python takes the GIL at every GIL-releasing call of the scheduler (each torch
op), each such hand-over costs the scheduler microseconds, and waking a thread costs its waker a
system call (about 13 us on that VM). So the scheduler only stamps when it starts and stops
waiting for the device (GIL released), at each of its two waits per cycle (:class:`DeviceWait`:
``seq_lens`` in ``FutureMap.resolve_seq_lens_cpu``, ``copy_done`` from the launch's end to the
read point), each with its own samples. The thread learns the scheduler's rhythm from them
(:class:`HostPhases`), wakes by its own timer a little after the longest wait should have begun,
and writes until shortly before it should end. The scheduler wakes it only after an idle spell
(:attr:`CycleSink.dozing`).

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
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Protocol

from .cycle import Aggregator, CycleRecord, format_line, to_json
from .runtime import _FLAG_OFF, _FLAG_ON, env_flag

LOGGER_NAME = "sglang_eagle_cycle"
logger = logging.getLogger(LOGGER_NAME)

#: Objects with ``on_cycle_record(record)`` handed every cycle record on the sink thread (the adaptive
#: policy, :mod:`sglang_eagle_cycle.patches.adaptive`); while one is registered the cycles are timed.
RECORD_CONSUMERS: list = []

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


def _jsonl_env(env: Mapping[str, str]) -> Optional[str]:
    """``SGLANG_EAGLE_CYCLE_JSONL`` as a path, or None. A switch word is no file name an operator
    means: ``0/false/no/off`` (any case) is off, ``1/true/yes/on`` too, with one WARNING asking for
    a path (rather than a file named ``1`` in the server's working directory)."""
    raw = (env.get("SGLANG_EAGLE_CYCLE_JSONL") or "").strip()
    word = raw.lower()
    if word in _FLAG_OFF:
        return None
    if word in _FLAG_ON:
        logger.warning("sglang-eagle-cycle: SGLANG_EAGLE_CYCLE_JSONL=%r is a switch, not a file; no JSONL is "
                       "written (give a path, e.g. /tmp/eagle-cycle.jsonl)", raw)
        return None
    return os.path.expanduser(raw) or None


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
        metrics_labels: base labels of the Prometheus export as ``(name, value)`` pairs, or None
            (no export; :func:`~sglang_eagle_cycle.metrics.export_wanted`).
    """

    log_every: int = 1
    log_line: bool = True
    rank_label: Optional[str] = None
    jsonl_path: Optional[str] = None
    nvtx: bool = False
    background: bool = True
    metrics_labels: Optional[tuple] = None

    @classmethod
    def from_env(cls, env: Mapping[str, str], ranks: Any, *, stats_rank: bool = True,
                 background: bool = True) -> "SinkConfig":
        """Read the ``SGLANG_EAGLE_CYCLE_*`` variables for a process with ``ranks``.

        Args:
            env: the environment (``os.environ``).
            ranks: :class:`sglang_eagle_cycle.runtime.Ranks` (or any object with its fields and ``label()``).
            stats_rank: whether SGLang's stats-logging rank is this process (it prints by default).
                With dp_size or pp_size > 1 there is one per replica, so lines carry ``rank=``.

        The Prometheus export runs on the ranks that print the line, when SGLang's metrics are
        on (:func:`~sglang_eagle_cycle.metrics.export_wanted`).

        Bad values are a WARNING and the default, never an exception (the server must start).
        """
        all_ranks = env_flag("SGLANG_EAGLE_CYCLE_ALL_RANKS", False, env)
        metrics_labels = None
        if stats_rank or all_ranks:
            from .metrics import export_wanted

            labels = export_wanted(env)
            if labels is not None:
                metrics_labels = tuple(labels.items())
        path = _jsonl_env(env)
        # with DP, DP attention (or PP) one stats-logging rank per replica prints: their lines are told apart
        several_print = all_ranks or ranks.dp_size > 1 or ranks.pp_size > 1 or getattr(ranks, "attn_dp_size", 1) > 1
        return cls(
            log_every=_env_int(env, "SGLANG_EAGLE_CYCLE_LOG_EVERY", 1, 1),
            log_line=stats_rank or all_ranks,
            rank_label=ranks.label() if several_print else None,
            jsonl_path=jsonl_path_for(path, ranks) if path else None,
            nvtx=env_flag("SGLANG_EAGLE_CYCLE_NVTX", False, env),
            background=background,
            metrics_labels=metrics_labels,
        )


class _JsonlFile:
    """Append-only JSONL writer: whole lines, flushed after each batch of cycles (every few ms).

    Missing folders above ``path`` are created (a server must not fail on them).

    Attributes:
        created: ``(topmost, parent)``, the highest folder that was missing and the file's own folder,
            when this writer created them; None when the folder was there.
    """

    def __init__(self, path: str):
        parent = os.path.dirname(os.path.abspath(path))
        topmost = None
        folder = parent
        while not os.path.exists(folder) and os.path.dirname(folder) != folder:
            topmost, folder = folder, os.path.dirname(folder)
        os.makedirs(parent, exist_ok=True)
        self.created = (topmost, parent) if topmost else None
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


#: Sink thread sleep when no prediction of the scheduler's next device wait exists while cycles
#: arrive, and the longest sleep when idle (seconds).
POLL_BUSY_S = 0.05
POLL_IDLE_S = 0.2
#: Sink thread sleep while it learns the scheduler's cycle (no prediction yet; seconds).
LEARN_SLEEP_S = 0.002
#: Device waits shorter than this (median) are not worth waking for (seconds).
MIN_WINDOW_S = 0.0002
#: Shortest sleep of the sink thread (seconds).
MIN_SLEEP_S = 0.0001
#: Distance the sink thread keeps from the edges of a predicted device wait: it starts this long
#: after the wait began and stops this long (plus one cycle's write time) before it should end (seconds).
GUARD_S = 0.00005
#: The sink thread wakes this fraction of a typical device wait after the wait should have begun.
WAKE_INTO = 0.15
#: Longest the sink thread writes in one go while it has no prediction yet (seconds).
SLICE_S = 0.0004
#: Cycles older than this are written even while the scheduler is busy (seconds).
OVERDUE_S = 0.5
#: Recent device waits and host phases the prediction is made from.
PHASE_SAMPLES = 8
#: Longer phases are not samples of a decode loop (an idle scheduler) and are left out (seconds).
MAX_PHASE_S = 1.0
#: With ``SGLANG_EAGLE_CYCLE_LOG_EVERY`` > 1, a partial window is printed once no cycle has come
#: for this long (seconds): traffic stopped, and SGLang ends its schedulers with SIGKILL, so a
#: window held until shutdown would never be printed.
AGG_IDLE_S = 1.0

#: Nice value of the sink thread (0: the scheduler's own priority). Measured, not assumed
#: (``bench_hook_overhead.py --load N``: the scheduler's per-cycle wall-clock with busy processes
#: beside it, the thread at nice 19 and at nice 0, interleaved): at nice 19 the thread can be
#: descheduled while it holds the GIL, and the scheduler then waits for it (a 1.02 s cycle and 7
#: cycles over 20 ms in 7,960 on a 2-core VM with three CPU-bound processes beside it; at nice 0
#: at most 102 ms and 2, as many as without the plugin), at equal p99. Hence 0.
SINK_NICE = 0

#: The clock of the stamps (``time.perf_counter``: seconds, monotonic, process-wide).
_clock = time.perf_counter


def enter_thread_local_capture_mode() -> bool:
    """Put the calling thread in CUDA's thread-local stream-capture mode; True when it took.

    A CUDA call such as ``cudaEventQuery`` from a thread in the default (global) mode while another
    thread captures a graph in global mode invalidates that capture; SGLang captures in global mode,
    at start-up and while serving (a weight update with ``recapture_cuda_graph``, elastic EP, the
    PD role switch). A thread in thread-local mode is restricted only by its own captures, so its
    event queries cannot break another thread's capture (PyTorch does the same for its NCCL
    watchdog thread). Uses ``cuda.bindings.runtime.cudaThreadExchangeStreamCaptureMode`` (the
    ``cuda-python`` package SGLang depends on). False without CUDA, on ROCm (which ignores the
    mode) or when the binding is missing; the sink then pauses around SGLang's captures instead
    (:meth:`CycleSink.capture_pause`).
    """
    try:
        from .timing import cuda_usable

        if not cuda_usable():
            return False
        import torch

        if getattr(torch.version, "hip", None):
            return False
        from cuda.bindings import runtime as rt

        mode = rt.cudaStreamCaptureMode.cudaStreamCaptureModeThreadLocal
        err, _previous = rt.cudaThreadExchangeStreamCaptureMode(mode)
        return err == rt.cudaError_t.cudaSuccess
    except Exception:
        return False


#: What the sink thread calls when it starts (tests put a fake here).
_thread_local_capture = enter_thread_local_capture_mode


class HostPhases:
    """The sink thread's model of the scheduler's cycle: when it waits for the device, when it runs Python.

    One per kind of wait (:class:`DeviceWait`): the scheduler stamps ``opened``
    (``time.perf_counter()`` seconds) when it starts that wait with the GIL released, and
    ``closed`` when it resumes, with ``last`` (``closed - opened`` of that wait). Each new set of
    stamps the sink thread sees gives the last device wait and, while the scheduler waits again,
    the host phase before it (``opened - closed``: from the end of the previous wait of this
    kind, so it includes the scheduler's other waits; wait plus host phase is one cycle). (The
    thread cannot see a host phase while it lasts: a thread woken then gets the GIL only when
    the scheduler releases it, usually at its next wait.)
    From the last :data:`PHASE_SAMPLES` of each it predicts when the current wait ends (after
    the shortest recent wait: stopping early costs nothing, overrunning costs the scheduler a GIL
    hand-over) and when the next one begins (the median host phase after the median wait).
    """

    def __init__(self):
        self.waits: deque = deque(maxlen=PHASE_SAMPLES)
        self.host: deque = deque(maxlen=PHASE_SAMPLES)
        self._seen = (0.0, 0.0)

    def observe(self, opened: float, closed: float, last_wait: float) -> None:
        """Take the scheduler's latest stamps (seconds; <= 0 = never stamped)."""
        if (opened, closed) == self._seen:
            return
        self._seen = (opened, closed)
        if opened <= 0 or closed <= 0:
            return
        if 0 <= last_wait < MAX_PHASE_S:
            self.waits.append(last_wait)
        if 0 < opened - closed < MAX_PHASE_S:
            self.host.append(opened - closed)

    def wait_end(self, opened: float) -> Optional[float]:
        """Predicted end of the device wait that began at ``opened`` (seconds); None before any sample."""
        return opened + min(self.waits) if self.waits else None

    def next_open(self, opened: float, closed: float) -> Optional[float]:
        """Predicted start of the next device wait (seconds); None before samples of both phases."""
        if not self.waits or not self.host:
            return None
        if closed < opened:  # waiting now: after this wait and the next host phase
            return opened + self.period()
        return closed + self.host_phase()

    def typical_wait(self) -> float:
        """Median device wait (seconds; 0 before any sample)."""
        return sorted(self.waits)[len(self.waits) // 2] if self.waits else 0.0

    def period(self) -> float:
        """Median device wait plus median host phase: one decode cycle (seconds)."""
        return self.typical_wait() + self.host_phase()

    def host_phase(self) -> float:
        """Median host phase (seconds; :data:`MIN_SLEEP_S` before any sample)."""
        return sorted(self.host)[len(self.host) // 2] if self.host else MIN_SLEEP_S


class DeviceWait:
    """One place in the scheduler's cycle where it blocks on the device with the GIL released.

    The scheduler thread stamps :attr:`opened` when it starts waiting and :attr:`closed` and
    :attr:`last` (``closed - opened``, the wait's length) when it resumes (``time.perf_counter()``
    seconds; ``opened <= 0``: never stamped). Each kind of wait has its own samples
    (:attr:`phases`), so a short wait and a long one are never averaged into one.

    SGLang 0.5.23's overlap scheduler waits twice per decode cycle (:data:`WAIT_NAMES`):
    ``seq_lens``, in ``FutureMap.resolve_seq_lens_cpu`` before it launches cycle N+1 (the host
    copy of the sequence lengths waits for cycle N's verify, with attention backends that need
    host sequence lengths, e.g. FlashInfer; about nothing with the others), and ``copy_done``,
    from the end of that launch to the read point of cycle N (its ``copy_done`` sync, short
    when the previous wait was long).
    """

    __slots__ = ("name", "opened", "closed", "last", "phases")

    def __init__(self, name: str):
        self.name = name
        self.opened = 0.0
        self.closed = -1.0
        self.last = -1.0
        self.phases = HostPhases()

    def observe(self) -> None:
        """Feed the latest stamps to :attr:`phases` (on the sink thread)."""
        self.phases.observe(self.opened, self.closed, self.last)

    @property
    def waiting(self) -> bool:
        """Stamped, and the scheduler is inside this wait now."""
        return 0 < self.opened and self.closed < self.opened

    @property
    def last_stamp(self) -> float:
        """The latest stamp (seconds; <= 0: never stamped)."""
        return self.opened if self.opened > self.closed else self.closed


#: The scheduler's device waits per decode cycle, in its order (:class:`DeviceWait`).
WAIT_NAMES = ("seq_lens", "copy_done")


class CycleSink:
    """Turns measured cycles into log lines and JSONL records, off the scheduler's thread.

    Args:
        config: :class:`SinkConfig`.
        log: logger for the line (default ``sglang_eagle_cycle``); faults go to it at WARNING.

    The scheduler thread only appends to a deque (no lock, no wake-up syscall) and stamps
    its device waits (:attr:`device_waits`); the sink thread writes the cycles in submission order
    during the scheduler's device waits (:meth:`_run`). A cycle whose events have not completed
    is retried (``query()``, never a sync) for :data:`STALE_AFTER_S` seconds, then dropped.
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
        #: The scheduler's device waits (:data:`WAIT_NAMES`), stamped by the submitting thread.
        #: The sink thread writes only during them (see :class:`HostPhases`). None stamped (a sink
        #: used without the profiler): it writes whenever it wakes.
        self.seq_lens_wait = DeviceWait("seq_lens")
        self.copy_wait = DeviceWait("copy_done")
        self.device_waits = (self.seq_lens_wait, self.copy_wait)
        #: True while the sink thread sleeps for long (no cycles came for a while): the submitting
        #: thread then wakes it (:meth:`kick`) at the start of its next device wait.
        self.dozing = False
        #: CPU priority (nice) of the sink thread, set when it starts (:data:`SINK_NICE`).
        self.nice = SINK_NICE
        self._item_s = 0.0001  # running estimate of the time to write one cycle (seconds)
        self._thread: Optional[threading.Thread] = None
        #: Whether the sink thread runs in CUDA's thread-local capture mode (None until it starts).
        self.thread_local_capture: Optional[bool] = None
        # Held by whichever thread reads events (ready/build); capture_pause() waits for it, so no
        # event is queried while SGLang captures a graph (when thread-local mode is not in effect).
        self._cuda_lock = threading.Lock()
        self._paused = 0
        #: Reads put off because a capture was open.
        self.deferred = 0
        self._start_lock = threading.Lock()
        self._last_taken = 0.0  # time.monotonic() when the sink thread last took a cycle
        self._stopping = False
        self._closed = False
        self.written = 0
        self.dropped = 0
        #: Sink-thread wake-ups; those that found the scheduler running Python in a decode loop
        #: (each cost it a GIL hand-over); writes in a device wait that outlasted it; kicks.
        self.wakeups = self.wakeups_busy = self.overruns = self.kicks = 0
        if config.jsonl_path:
            try:
                self._jsonl = _JsonlFile(config.jsonl_path)
            except OSError as exc:
                self._fault("jsonl-open", exc, f"cannot open {config.jsonl_path}; JSONL disabled")
            else:
                if self._jsonl.created:
                    topmost, parent = self._jsonl.created
                    above = "" if topmost == parent else f" (and the missing folders above it, from {topmost})"
                    self._log.info("sglang-eagle-cycle: created the folder %s%s for the JSONL file %s",
                                   parent, above, config.jsonl_path)
        #: The Prometheus export (:class:`~sglang_eagle_cycle.metrics.LiveMetrics`), or None.
        self.metrics = None
        if config.metrics_labels is not None:
            try:
                from .metrics import LiveMetrics

                self.metrics = LiveMetrics(dict(config.metrics_labels))
                self._log.info("sglang-eagle-cycle: cycle metrics exported on SGLang's /metrics "
                               "(sglang:eagle_cycle_*; SGLANG_EAGLE_CYCLE_METRICS=0 turns them off)")
            except Exception as exc:
                self._fault("metrics-init", exc, "no cycle metrics exported")

    # -- hot path ------------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        """Whether a submitted cycle would be written anywhere (JSONL open, the Prometheus export on,
        a :data:`RECORD_CONSUMERS` entry, or the line enabled at INFO)."""
        return self._jsonl is not None or self.metrics is not None or bool(RECORD_CONSUMERS) or (
            self.config.log_line and self._log.isEnabledFor(logging.INFO))

    def submit(self, item: Any) -> None:
        """Hand over one measured cycle (a :class:`Pending` or a ready :class:`CycleRecord`)."""
        if self._closed:
            return
        if not self.config.background:
            self._waiting.append((item, time.monotonic()))
            self._drain()
            if self.metrics is not None:
                self._push_metrics()
            return
        if len(self.inbox) >= MAX_INBOX:
            self.dropped += 1
            self._fault("queue", OverflowError(f"{MAX_INBOX} cycles waiting for the sink thread"), "cycles dropped")
            return
        self.inbox.append(item)
        if self._thread is None:
            self._start()

    @property
    def host_busy(self) -> bool:
        """Whether the submitting thread runs Python now (the sink thread then keeps off the GIL):
        some device wait was stamped and none is open."""
        stamped = False
        for w in self.device_waits:
            if w.opened > w.closed:
                if w.opened > 0:
                    return False
            elif w.closed > 0:
                stamped = True
        return stamped

    def current_wait(self) -> Optional["DeviceWait"]:
        """The device wait the submitting thread is in now (the latest opened of the open ones), or None."""
        cur = None
        for w in self.device_waits:
            if w.waiting and (cur is None or w.opened > cur.opened):
                cur = w
        return cur

    @host_busy.setter
    def host_busy(self, busy: bool) -> None:
        """Stamp the ``copy_done`` wait's end (True) or start (False) now (a sink without the profiler)."""
        w = self.copy_wait
        if busy:
            w.closed = _clock()
            w.last = w.closed - w.opened
        else:
            w.opened = _clock()

    # The ``copy_done`` wait's stamps under their older names.
    opened_at = property(lambda self: self.copy_wait.opened, lambda self, v: setattr(self.copy_wait, "opened", v))
    closed_at = property(lambda self: self.copy_wait.closed, lambda self, v: setattr(self.copy_wait, "closed", v))
    last_wait = property(lambda self: self.copy_wait.last, lambda self, v: setattr(self.copy_wait, "last", v))
    _phases = property(lambda self: self.copy_wait.phases,
                       lambda self, v: setattr(self.copy_wait, "phases", v))

    def kick(self) -> None:
        """Wake the sink thread now (never blocks).

        While cycles arrive the thread wakes by itself when the scheduler's next device wait
        should begin (:class:`HostPhases`); the profiler kicks it only while it dozes
        (:attr:`dozing`: after an idle spell), at the end of a launch, as a wake-up costs the
        caller a system call.
        """
        if self._thread is not None:
            self.kicks += 1
            self._wake_now()

    # -- control -------------------------------------------------------------------------------

    @contextmanager
    def capture_pause(self):
        """No event is read (``query``, ``elapsed_time``) while the block runs: wrap a CUDA-graph capture.

        Entering waits for a read in progress on the sink thread to finish (it holds the read
        lock); reads resume when the block exits. Not needed, and a no-op, when the sink thread
        runs in thread-local capture mode (:func:`enter_thread_local_capture_mode`).
        """
        if self.thread_local_capture:
            yield
            return
        self._paused += 1
        try:
            with self._cuda_lock:
                pass
            yield
        finally:
            self._paused -= 1

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until everything submitted so far is written (or dropped). True if it finished in time."""
        if self._thread is None:
            self._take_inbox()
            self._drain(final=True)
            self._push_metrics(force=True)
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
                self._last_taken = now
        return markers

    def _wake_now(self) -> None:
        try:
            self._wake.release()
        except RuntimeError:  # already released: the thread wakes anyway
            pass

    def _run(self) -> None:
        """The sink thread: sleep until the scheduler's next device wait, write what is complete in it, repeat.

        Why the care: a thread that waits for the GIL while the scheduler runs Python takes the
        GIL at each of the scheduler's GIL-releasing calls (every torch op), and each of those
        hand-overs costs the scheduler microseconds; waking a thread costs its waker a system
        call. So the scheduler only stamps when it starts and stops waiting for the device
        (:attr:`device_waits`); this thread predicts the next wait from those
        stamps (:class:`HostPhases`), wakes by its own timer when it should have begun, writes
        until shortly before it should end, and asks for the GIL at no other time. Cycles
        waiting longer than :data:`OVERDUE_S` are written regardless (a scheduler that never waits).
        """
        if self.nice:  # (Linux: per thread)
            try:
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self.nice)
            except (AttributeError, OSError):
                pass
        # before any event is read on this thread: no read of ours can break a capture elsewhere
        self.thread_local_capture = bool(_thread_local_capture())
        sleep = idle = POLL_BUSY_S
        self.dozing = True  # the scheduler wakes it at its next device wait
        while True:
            self._wake.acquire(timeout=sleep)  # the timer, a kick, a flush or close
            self.dozing = False
            stopping = self._stopping
            markers = []
            try:
                markers = self._take_inbox()
                if markers or stopping:
                    self._drain(final=True)
                    self._push_metrics(force=True)
                    sleep = POLL_BUSY_S
                else:
                    sleep = self._write_in_window()
                    m = self.metrics
                    # when due and the scheduler is idle or waits for the device; regardless when overdue
                    if m is not None and (m.overdue or (m.due and (sleep is None or self.current_wait() is not None))):
                        self._push_metrics(force=True)
                    if self._agg.pending and not self._waiting and time.monotonic() - self._last_taken >= AGG_IDLE_S:
                        self._log_aggregate()  # traffic stopped: the partial window now, not never
                if stopping:
                    self._finish()
            except Exception as exc:  # never let the thread die: the scheduler would queue forever
                self._fault("thread", exc, "writing goes on")
                sleep = POLL_BUSY_S
            for m in markers:
                m.done.set()
            if stopping:
                return
            if sleep is None:  # no decode loop running: sleep long, the scheduler kicks when it resumes
                idle = min(idle * 2, POLL_IDLE_S) if not (self._waiting or self.inbox) else POLL_BUSY_S
                sleep = idle
                self.dozing = True
            else:
                idle = POLL_BUSY_S

    def _write_in_window(self) -> Optional[float]:
        """Write what fits in the scheduler's current device wait; returns how long to sleep.

        Writes only inside an open wait (until shortly before its predicted end), then sleeps
        until a little after the next start of the *longest* of the scheduler's live waits (one
        stamped within its last two periods): with FlashInfer that is ``seq_lens``, without
        host sequence lengths ``copy_done``. None: the scheduler is not in a decode loop (idle,
        or running other batches); the thread then dozes until the scheduler's next device
        wait (:attr:`dozing`).
        """
        now = _clock()
        stamped, current, last = [], None, 0.0
        for w in self.device_waits:
            w.observe()
            if w.opened > 0 or w.closed > 0:
                stamped.append(w)
                last = max(last, w.last_stamp)
                if w.waiting and (current is None or w.opened > current.opened):
                    current = w  # (a wait left open with no close, e.g. the first launch's copy_done)
        self.wakeups += 1
        since = now - last  # since the scheduler's last stamp
        if stamped and current is None and since < max(w.phases.period() for w in stamped):
            self.wakeups_busy += 1
        if self._waiting:
            if current is None:
                # the scheduler runs Python: only overdue cycles; or never stamped: no scheduler to keep clear of
                self._drain(gated=True)
            else:  # the scheduler waits for the device
                opened = current.opened
                end = current.phases.wait_end(opened)
                self._drain(gated=True, deadline=end - GUARD_S if end is not None else _clock() + SLICE_S)
                if current.closed > opened:
                    self.overruns += 1
        now = _clock()
        target, nxt = None, None
        for w in stamped:  # the longest live wait with a prediction
            ph = w.phases
            n = ph.next_open(w.opened, w.closed)
            if n is None or now - w.last_stamp > 2 * ph.period():
                continue
            if target is None or ph.typical_wait() > target.phases.typical_wait():
                target, nxt = w, n
        if target is None:
            if any(w.phases.next_open(w.opened, w.closed) is not None for w in stamped):
                return None  # no stamp for two cycles: the decode loop stopped
            # still learning the scheduler's cycle
            return LEARN_SLEEP_S if stamped and now - last < POLL_BUSY_S else None
        phases = target.phases
        if phases.typical_wait() < MIN_WINDOW_S:
            # the scheduler hardly ever waits for the device (CPU-bound): no window worth waking
            # for; overdue cycles are written at the timer's wake-ups
            return POLL_BUSY_S
        # wake a little into the wait (phases jitter; waking early costs the scheduler a GIL hand-over)
        sleep = nxt + max(GUARD_S, WAKE_INTO * phases.typical_wait()) - now
        if sleep >= MIN_SLEEP_S:
            return min(sleep, POLL_BUSY_S)
        return max(MIN_SLEEP_S, phases.host_phase())  # a slow host phase: look again soon

    def _drain(self, final: bool = False, gated: bool = False, deadline: Optional[float] = None) -> None:
        """Write waiting cycles from the head while their events are complete (JSONL in one write).

        Args:
            final: wait up to 1 s for incomplete events (flush, close).
            gated: stop while :attr:`host_busy` (unless the head cycle is overdue).
            deadline: ``time.perf_counter()`` after which no cycle is started (the first one is:
                one cycle per call at least); the estimate of one cycle's write time is kept clear.
        """
        with self._cuda_lock:
            if self._paused:   # a CUDA graph is being captured: read nothing now
                self.deferred += 1
                return
            self._drain_locked(final, gated, deadline)

    def _drain_locked(self, final: bool, gated: bool, deadline: Optional[float]) -> None:
        w = self._waiting
        give_up = time.monotonic() + (1.0 if final else 0.0)
        lines: list = []
        done = 0
        perf = _clock
        try:
            while w:
                item, t0 = w[0]
                if gated and self.host_busy and time.monotonic() - t0 < OVERDUE_S and len(w) < MAX_WAITING // 2:
                    return
                t_item = perf()
                if deadline is not None and done and t_item + self._item_s > deadline:
                    return
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
                    if final and now < give_up:
                        time.sleep(0.001)
                        continue
                    return
                w.popleft()
                self._write(item, lines)
                done += 1
                self._item_s += (perf() - t_item - self._item_s) * 0.2
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
        if self.metrics is not None:
            self._metrics_do(self.metrics.observe, rec)
        for consumer in RECORD_CONSUMERS:
            try:
                consumer.on_cycle_record(rec)
            except Exception as exc:
                self._fault("record consumer", exc, "records still go to it")
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

    def _push_metrics(self, force: bool = False) -> None:
        """Hand the cycles observed since the last push to ``prometheus_client`` (now, or when due)."""
        m = self.metrics
        if m is not None and (force or m.due):
            self._metrics_do(m.push)

    def _metrics_do(self, action, *args) -> None:
        """Run one export step; a fault is logged once and ends the export (never the sink)."""
        try:
            action(*args)
        except Exception as exc:
            self._fault("metrics", exc, "cycle metrics export off")
            self.metrics = None

    def _log_aggregate(self) -> None:
        """Print the pending partial window of ``LOG_EVERY`` cycles (nothing when there is none)."""
        try:
            for out in self._agg.flush():
                if self.config.log_line and self._log.isEnabledFor(logging.INFO):
                    self._info(format_line(out))
        except Exception as exc:
            self._fault("log-line", exc, "line skipped")

    def _finish(self) -> None:
        self._push_metrics(force=True)
        self._log_aggregate()
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

