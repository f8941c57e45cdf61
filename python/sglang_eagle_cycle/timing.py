"""Timer backends for the decode-cycle profiler: CUDA events, or ``perf_counter_ns`` on the host.

Why events and deferred reads: the overlap scheduler launches batch N+1 before it resolves batch N,
so a timer that synchronised to read its result would serialise the pipeline it measures. Each
cycle therefore gets its own :class:`MarkSet` (events drawn from a reusable pool, all recorded on
the stream that is current when the cycle starts). Nothing here ever synchronises: a mark set is
read only once :meth:`MarkSet.ready` says its last event has completed (``Event.query()``), which
is already true after the scheduler's own copy-to-host sync of that batch's result.

This module imports neither SGLang nor torch at module top (the GPU check runs where SGLang is
absent; tests run where CUDA is absent). Usage::

    from sglang_eagle_cycle.timing import make_timer

    timer = make_timer()            # CUDA events when torch sees a GPU, else the host clock
    marks = timer.start()           # one set per in-flight cycle
    marks.mark("total0"); ...; marks.mark("total1")
    # later, after an existing sync point:
    if marks.ready():
        ms = marks.elapsed_ms("total0", "total1")
        marks.release()             # events go back to the pool

The two backends share one interface (``start``, ``capturing``, ``kind``); tests inject a clock
into :class:`CpuTimer` and fake events into :class:`CudaTimer`.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable, Hashable, Optional, Protocol

#: Events kept for reuse by one :class:`CudaTimer` (about 10 per in-flight cycle).
DEFAULT_POOL_LIMIT = 512


class MarkSet(Protocol):
    """Time points of one cycle, recorded in order; read once, after they completed."""

    def mark(self, key: Hashable) -> None:
        """Record time point ``key`` now (on the device stream for CUDA)."""

    def has(self, key: Hashable) -> bool:
        """Whether ``key`` was marked."""

    def ready(self) -> bool:
        """Whether every mark has completed; never blocks."""

    def elapsed_ms(self, start: Hashable, end: Hashable) -> Optional[float]:
        """Milliseconds from ``start`` to ``end``; ``None`` if either was not marked. Call only when ready."""

    def release(self) -> None:
        """Give the marks back for reuse; the set must not be used afterwards."""


# ---------------------------------------------------------------------------------------------
# Host clock
# ---------------------------------------------------------------------------------------------


class CpuMarks:
    """Mark set of :class:`CpuTimer`: integer nanoseconds from the timer's clock."""

    __slots__ = ("_clock", "_t")

    def __init__(self, clock: Callable[[], int]):
        self._clock = clock
        self._t: dict = {}

    def mark(self, key: Hashable) -> None:
        self._t[key] = self._clock()

    def has(self, key: Hashable) -> bool:
        return key in self._t

    def ready(self) -> bool:
        return True

    def elapsed_ms(self, start: Hashable, end: Hashable) -> Optional[float]:
        t = self._t
        if start not in t or end not in t:
            return None
        return (t[end] - t[start]) / 1e6

    def release(self) -> None:
        self._t = {}


class CpuTimer:
    """Host wall clock (``time.perf_counter_ns`` unless a clock is injected).

    Exact for synchronous execution (CPU runs, tests). On an asynchronous device it would time
    kernel *launches*, not kernels, so the profiler uses it only where there is no CUDA device.

    Args:
        clock: callable returning integer nanoseconds (monotonic).
    """

    kind = "cpu"

    def __init__(self, clock: Callable[[], int] = time.perf_counter_ns):
        self._clock = clock

    def start(self) -> CpuMarks:
        return CpuMarks(self._clock)

    def capturing(self) -> bool:
        """Whether a CUDA graph is being captured on the current stream (False without CUDA)."""
        return _cuda_usable is not False and is_capturing()


# ---------------------------------------------------------------------------------------------
# CUDA events
# ---------------------------------------------------------------------------------------------


class CudaMarks:
    """Mark set of :class:`CudaTimer`: timing events recorded on one stream.

    All marks go to the stream that was current when the set was started, so they complete in
    record order and the last one completing implies all did (:meth:`ready` queries only it).
    """

    __slots__ = ("_timer", "_stream", "_ev", "_last")

    def __init__(self, timer: "CudaTimer", stream: Any):
        self._timer = timer
        self._stream = stream
        self._ev: dict = {}
        self._last = None

    def mark(self, key: Hashable) -> None:
        pool = self._timer._pool
        ev = pool.pop() if pool else self._timer._new_event()
        ev.record(self._stream)
        old = self._ev.get(key)
        if old is not None:
            pool.append(old)
        self._ev[key] = ev
        self._last = ev

    def has(self, key: Hashable) -> bool:
        return key in self._ev

    def ready(self) -> bool:
        self._timer.bind_reader()
        return self._last is None or bool(self._last.query())

    def elapsed_ms(self, start: Hashable, end: Hashable) -> Optional[float]:
        ev = self._ev
        a = ev.get(start)
        b = ev.get(end)
        if a is None or b is None:
            return None
        return float(a.elapsed_time(b))

    def release(self) -> None:
        pool = self._timer._pool
        room = self._timer.pool_limit - len(pool)
        if room > 0:
            pool.extend(list(self._ev.values())[:room])
        self._ev = {}
        self._last = None


class CudaTimer:
    """CUDA timing events from a reusable pool; no synchronisation anywhere.

    Args:
        event_factory: ``() -> event`` with ``record(stream)``, ``query()``, ``elapsed_time(other)``;
            default ``torch.cuda.Event(enable_timing=True)``.
        current_stream: ``() -> stream``; default ``torch.cuda.current_stream``.
        is_capturing: ``() -> bool``; default ``torch.cuda.is_current_stream_capturing``.
        pool_limit: events kept for reuse.

    Raises:
        RuntimeError: torch is not installed or sees no CUDA device (defaults only).
    """

    kind = "cuda"

    def __init__(
        self,
        *,
        event_factory: Optional[Callable[[], Any]] = None,
        current_stream: Optional[Callable[[], Any]] = None,
        is_capturing: Optional[Callable[[], bool]] = None,
        pool_limit: int = DEFAULT_POOL_LIMIT,
    ):
        self._get_device = self._set_device = None
        if event_factory is None or current_stream is None or is_capturing is None:
            if not cuda_usable():
                raise RuntimeError("CudaTimer needs torch with a CUDA device")
            import torch

            event_factory = event_factory or (lambda: torch.cuda.Event(enable_timing=True))
            current_stream = current_stream or torch.cuda.current_stream
            is_capturing = is_capturing or torch.cuda.is_current_stream_capturing
            self._get_device, self._set_device = torch.cuda.current_device, torch.cuda.set_device
        self._new_event = event_factory
        self._current_stream = current_stream
        self._is_capturing = is_capturing
        self.pool_limit = pool_limit
        self._pool: list = []
        self._device: Optional[int] = None  # the recording thread's device, taken at the first start()
        self._readers = threading.local()

    def prewarm(self, n: int) -> None:
        """Create ``n`` pooled events ahead of the first cycle (event creation is not free)."""
        while len(self._pool) < min(n, self.pool_limit):
            self._pool.append(self._new_event())

    def start(self) -> CudaMarks:
        if self._device is None and self._get_device is not None:
            self._device = self._get_device()
        return CudaMarks(self, self._current_stream())

    def bind_reader(self) -> None:
        """Make the recording thread's device current in a reading thread (once per thread; not a sync).

        A scheduler rank drives one GPU, not necessarily device 0; the sink thread reads its events.
        """
        if self._set_device is not None and self._device is not None \
                and getattr(self._readers, "device", None) != self._device:
            self._set_device(self._device)
            self._readers.device = self._device

    def capturing(self) -> bool:
        return bool(self._is_capturing())

    @property
    def pooled(self) -> int:
        """Events waiting in the pool."""
        return len(self._pool)


# ---------------------------------------------------------------------------------------------
# Choosing a backend
# ---------------------------------------------------------------------------------------------

_cuda_usable: Optional[bool] = None


def cuda_usable() -> bool:
    """True when torch is installed and sees a CUDA (or ROCm) device; cached after the first call."""
    global _cuda_usable
    if _cuda_usable is None:
        try:
            import torch

            _cuda_usable = bool(torch.cuda.is_available())
        except Exception:
            _cuda_usable = False
    return _cuda_usable


def is_capturing() -> bool:
    """Whether the current CUDA stream is capturing a graph.

    ``torch.cuda.is_current_stream_capturing()`` raises without CUDA, so this answers False when
    torch is not imported or has no device.
    """
    if "torch" not in sys.modules or not cuda_usable():
        return False
    import torch

    return bool(torch.cuda.is_current_stream_capturing())


def make_timer(kind: str = "auto", *, device: Optional[str] = None,
               clock: Optional[Callable[[], int]] = None):
    """A timer backend.

    Args:
        kind: ``"cuda"``, ``"cpu"`` or ``"auto"`` (CUDA events when ``device`` is a CUDA device, or
            when ``device`` is ``None`` and torch sees a GPU; the host clock otherwise).
        device: the worker's device string (``"cuda"``, ``"cuda:0"``, ``"cpu"``), if known.
        clock: nanosecond clock for the CPU backend (tests).

    Raises:
        ValueError: unknown ``kind``, or ``auto`` on a device that is neither CUDA nor CPU
            (host timing of an asynchronous accelerator would time launches, not work).
        RuntimeError: ``kind="cuda"`` without a usable CUDA device.
    """
    if kind == "auto":
        dev = (device or "").split(":")[0].lower()
        if dev in ("cuda", "hip") or (dev == "" and cuda_usable()):
            kind = "cuda"
        elif dev in ("", "cpu"):
            kind = "cpu"
        else:
            raise ValueError(f"no timer for device {device!r}: only CUDA and CPU are profiled")
    if kind == "cuda":
        return CudaTimer()
    if kind == "cpu":
        return CpuTimer(clock) if clock is not None else CpuTimer()
    raise ValueError(f"unknown timer kind {kind!r} (expected auto, cuda or cpu)")
