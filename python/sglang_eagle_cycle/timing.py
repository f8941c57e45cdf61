"""Timer backends for the decode-cycle profiler: CUDA events, or ``perf_counter_ns`` on the host.

Why events and deferred reads: the overlap scheduler launches batch N+1 before it resolves batch N,
so a timer that synchronised to read its result would serialise the pipeline it measures. Each
cycle therefore keeps its own time points (*stamps*: events drawn from a reusable pool, all
recorded on the stream that is current when the cycle begins). Nothing here ever synchronises: a
cycle's stamps are read only once :meth:`CudaTimer.done` says its last one has completed
(``Event.query()``), which is already true after the scheduler's own copy-to-host sync of that
batch's result.

The recording side is as small as it can be, because it runs on the scheduler thread once per
time point (ten per decode cycle): ``stamp()`` is ``time.perf_counter_ns`` itself for the host
clock, and one pooled ``Event.record`` for CUDA.

This module imports neither SGLang nor torch at module top (the GPU check runs where SGLang is
absent; tests run where CUDA is absent). Usage::

    from sglang_eagle_cycle.timing import make_timer

    timer = make_timer()            # CUDA events when torch sees a GPU, else the host clock
    t0 = timer.begin()              # first time point of a cycle (fixes the stream for CUDA)
    t1 = timer.stamp()              # further time points of the same cycle
    # later, after an existing sync point (or polling):
    if timer.done(t1):              # never blocks
        ms = timer.elapsed_ms(t0, t1)
        timer.release((t0, t1))     # events go back to the pool

The two backends share one interface (``begin``, ``stamp``, ``done``, ``elapsed_ms``, ``release``, ``stream``,
``capturing``, ``kind``); tests inject a clock into :class:`CpuTimer` and fake events into
:class:`CudaTimer`.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable, Iterable, Optional

#: Events kept for reuse by one :class:`CudaTimer` (about 10 per in-flight cycle).
DEFAULT_POOL_LIMIT = 512


# ---------------------------------------------------------------------------------------------
# Host clock
# ---------------------------------------------------------------------------------------------


class CpuTimer:
    """Host wall clock (``time.perf_counter_ns`` unless a clock is injected); stamps are integer ns.

    Exact for synchronous execution (CPU runs, tests). On an asynchronous device it would time
    kernel *launches*, not kernels, so the profiler uses it only where there is no CUDA device.

    Args:
        clock: callable returning integer nanoseconds (monotonic).
    """

    kind = "cpu"
    stream = None  # no streams: every cycle is on the one host timeline

    def __init__(self, clock: Callable[[], int] = time.perf_counter_ns):
        self.clock = clock
        self.begin = clock  # () -> int ns: a cycle's first time point
        self.stamp = clock  # () -> int ns: a time point now

    @staticmethod
    def done(stamp: Any) -> bool:
        """Host stamps are complete when taken."""
        return True

    @staticmethod
    def elapsed_ms(start: Optional[int], end: Optional[int]) -> Optional[float]:
        """Milliseconds from ``start`` to ``end`` (ns stamps); ``None`` if either is missing."""
        if start is None or end is None:
            return None
        return (end - start) / 1e6

    @staticmethod
    def release(stamps: Iterable[Any]) -> None:
        """Nothing to give back."""

    def capturing(self) -> bool:
        """Whether a CUDA graph is being captured on the current stream (False without CUDA)."""
        return _cuda_usable is not False and is_capturing()

    @property
    def may_capture(self) -> bool:
        """Whether :meth:`capturing` can ever be True here (only where CUDA is usable)."""
        return cuda_usable()


# ---------------------------------------------------------------------------------------------
# CUDA events
# ---------------------------------------------------------------------------------------------


class CudaTimer:
    """CUDA timing events from a reusable pool; no synchronisation anywhere. Stamps are events.

    A cycle's stamps are all recorded on the stream that was current at its :meth:`begin`, so they
    complete in record order and the last one completing implies all did (:meth:`done` on the last
    stamp is enough). Stamps of different cycles are different events (one set per in-flight
    batch); :meth:`release` returns them to the pool once read.

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
    may_capture = True

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
        self._stream = None  # the stream of the cycle being recorded
        self._device: Optional[int] = None  # the recording thread's device, taken at the first begin()
        self._readers = threading.local()

    def prewarm(self, n: int) -> None:
        """Create ``n`` pooled events ahead of the first cycle (event creation is not free)."""
        while len(self._pool) < min(n, self.pool_limit):
            self._pool.append(self._new_event())

    def begin(self) -> Any:
        """The first stamp of a cycle; its later stamps go to the same (now current) stream."""
        if self._device is None and self._get_device is not None:
            self._device = self._get_device()
        self._stream = self._current_stream()
        return self.stamp()

    def stamp(self) -> Any:
        """An event recorded now on the cycle's stream."""
        pool = self._pool
        ev = pool.pop() if pool else self._new_event()
        ev.record(self._stream)
        return ev

    @property
    def stream(self) -> Any:
        """The stream of the cycle being recorded (set by :meth:`begin`)."""
        return self._stream

    def done(self, stamp: Any) -> bool:
        """Whether ``stamp`` (and every stamp recorded before it on its stream) completed; never blocks."""
        self.bind_reader()
        return stamp is None or bool(stamp.query())

    @staticmethod
    def elapsed_ms(start: Any, end: Any) -> Optional[float]:
        """Milliseconds between two completed events; ``None`` if either is missing."""
        if start is None or end is None:
            return None
        return float(start.elapsed_time(end))

    def release(self, stamps: Iterable[Any]) -> None:
        """Give read (or abandoned) events back to the pool, up to ``pool_limit``."""
        pool = self._pool
        for ev in stamps:
            if ev is not None and len(pool) < self.pool_limit:
                pool.append(ev)

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
