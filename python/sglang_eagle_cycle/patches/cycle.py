"""Per-cycle timing of SGLang 0.5.23's EAGLE-3 decode cycle (``EAGLEWorkerV2``), as AROUND hooks.

One decode cycle of the overlap worker (SGLang 0.5.23, scheduler and worker), the calls that bound each field, and where
the time points are marked (all on the cycle's stream, i.e. on the device's timeline)::

    EAGLEWorkerV2.forward_batch_generation (decode branch)            total0 ..................... total1
      EagleDraftWorker.draft: prepare_for_draft, attention metadata     | draft_prep
        device_timer_ctx(.., "eagle_draft") around the draft graph      |   draft0 .. draft1
        replay (eager: one device_timer_ctx(.., "decode") per draft     |
        forward, each a draft_step_ms span)                             |
        build_eagle_verify_input                                        |   (other)
      EAGLEWorkerV2.verify                                              |   verify0 ........ verify1
        device_timer_ctx(.., "target_verify") around the target verify  |     fwd0 .. fwd1
        forward's graph replay (decode_cuda_graph_runner.execute), or   |
        its eager forward (eager_runner; piecewise: model_runner)       |
      on_publish, prepare_for_draft_extend                              |   (other)
      EagleDraftWorker._draft_extend_for_decode:                        |
        device_timer_ctx(.., "eagle_draft_extend") around the draft-    |     ext0 .. ext1
        extend graph replay (eager: device_timer_ctx(.., "extend"))     |
    SchedulerBatchResultProcessor._resolve_spec_v2_tokens     read point: accept lengths, hand-over

Fields (device-span records, :attr:`~sglang_eagle_cycle.cycle.CycleRecord.device_spans`)::

    draft_prep_ms = draft0 - total0     host preparation, small prep kernels, device idle time
    draft_ms      = draft1 - draft0     the draft launch(es); None when no draft forward ran
    verify_ms     = verify1 - verify0   the whole verify call
    verify_fwd_ms = fwd1 - fwd0         the target verify forward (inside verify)
    extend_ms     = ext1 - ext0         the draft-extend launch
    other_ms      = total - draft_prep - draft - verify - extend
    gap_ms        = total0 - (previous cycle's total1), same stream, no event of its own

``device_timer_ctx`` (``sglang.srt.utils.device_timer``) is the segment SGLang brackets for its own
``DeviceTimer``; every runner calls it through its module's ``from .. import`` binding, which
HookRegistry rebinds, so the one module-level hook survives what instance shims would not: the
runner swaps of adaptive mode (``apply_runtime_state``) and a CUDA-graph recapture. The device
segment a call brackets is classified by where the cycle is: before ``verify`` (draft), inside
``verify`` (target verify forward), after it (draft-extend). At ``num_steps <= 1`` no draft
forward runs (``draft_ms`` and ``draft_prep_ms`` are ``-``; the draft's sampling falls into
``other``); at ``num_steps = 0`` (adaptive) there is no draft phase at all. In eager mode
``draft_ms`` runs from the first draft forward's launch to the last one's end (the host work
between forwards included) and ``draft_step_ms`` lists each forward's own span.

Scheduler-side cost: one HookRegistry wrapper for the branch, one for the read point, one for each
``device_timer_ctx`` call (three per cycle in graph mode), and one instance shim (``verify``,
:func:`_verify_shim`). A cycle's time points are a list of ten stamps (``time.perf_counter_ns``,
or one pooled CUDA event record each); the formatting and I/O run on the sink thread. The gap
reuses the previous cycle's ``total1`` event, which that cycle hands over instead of releasing.

Rules kept here (README, "Per-cycle timing"):

* The forward mode is checked *before* the original runs (verify mutates it): only decode batches
  are timed, never prefill/extend, idle (DP) batches or anything while a CUDA graph is being
  captured on the current stream; ``device_timer_ctx`` acts only inside a timed cycle.
* No added sync: the stamps of cycle N travel on batch N's ``GenerationBatchResult`` and are handed
  to the sink at the read point, which runs after the scheduler's own ``copy_done`` sync of that
  result (in overlap mode after batch N+1 was launched); the sink reads them only once ``query()``
  says they completed.
* Fault isolation (README, "Safety"): an exception in our code is logged once (type and message) and the
  cycle runs on upstream's path, untimed; an exception from upstream propagates unchanged and the
  cycle is discarded, so the next one starts clean.

Only ``EAGLEWorkerV2`` and subclasses that keep its decode branch are timed (:func:`worker_support`);
:func:`unsupported_workers` names the others for the banner.
"""

from __future__ import annotations

import logging
import os
import time
from contextlib import nullcontext
from typing import Any, Optional

from ..cycle import CycleRecord, make_record
from ..sinks import LOGGER_NAME, CycleSink, SinkConfig, load_nvtx
from ..sinks import _clock as _perf  # the stamps the sink thread reads are on its clock
from ..timing import make_timer
from . import HookSpec

EW = "sglang.srt.speculative.eagle_worker_v2"
BRP = "sglang.srt.managers.scheduler_components.batch_result_processor"
DT = "sglang.srt.utils.device_timer"
MR = "sglang.srt.model_executor.model_runner"
OU = "sglang.srt.managers.overlap_utils"

#: ``ModelRunner`` methods that capture CUDA graphs in SGLang 0.5.23: at start-up
#: (``init_cuda_graphs``, target and draft) and while serving (a weight update with
#: ``recapture_cuda_graph``, elastic EP, the PD role switch). The sink reads no event during them
#: unless its thread runs in thread-local capture mode (:meth:`CycleSink.capture_pause`).
CAPTURE_METHODS = ("init_cuda_graphs", "recapture_decode_cuda_graph", "_recapture_elastic_cuda_graphs",
                   "ensure_decode_cuda_graphs")

#: Attribute of the ``GenerationBatchResult`` that carries a timed cycle to the read point.
RESULT_ATTR = "_eagle_cycle_pending"

#: Eager draft forwards timed per cycle (``num_steps - 1`` of them).
MAX_DRAFT_STEPS = 64

#: Longest host time (seconds) from one cycle's launch end to the next cycle's start for which
#: the two are taken as back to back (``gap_ms``); a longer pause is an idle scheduler.
GAP_LINK_MAX_S = 1.0

#: ``device_timer_ctx`` category of the draft's CUDA-graph replay (eager draft forwards are
#: ``decode``): only eager forwards are listed in ``draft_step_ms``.
DRAFT_GRAPH_CATEGORY = "eagle_draft"

#: Decode cycles between two questions to the sink whether anything is wanted (a log level or a
#: JSONL file); asking costs the scheduler a few calls, so it is not asked every cycle.
RECHECK_CYCLES = 256

# Where each time point of a cycle is kept in ``_Cycle.t`` (the hooks write the literal indices).
(T_TOTAL0, T_VERIFY0, T_FWD0, T_FWD1, T_VERIFY1, T_EXT0, T_TOTAL1, T_DRAFT0, T_DRAFT1, T_EXT1) = range(10)
N_STAMPS = 10

#: The span of time points each field measures (module docstring).
PHASE_SPANS = {
    "draft_prep_ms": (T_TOTAL0, T_DRAFT0),
    "draft_ms": (T_DRAFT0, T_DRAFT1),
    "verify_ms": (T_VERIFY0, T_VERIFY1),
    "verify_fwd_ms": (T_FWD0, T_FWD1),
    "extend_ms": (T_EXT0, T_EXT1),
    "total_ms": (T_TOTAL0, T_TOTAL1),
}

#: Where a cycle is (``_Cycle.phase``): which field a ``device_timer_ctx`` segment belongs to.
IN_DRAFT, IN_VERIFY, AFTER_VERIFY = 0, 1, 2



def unsupported_workers() -> list[str]:
    """Speculative workers of SGLang 0.5.23 this profiler does not time, with the reason (for the banner)."""
    return [
        "MultiLayerEagleWorkerV2 (--enable-multi-layer-eagle: its own decode loop)",
        "FrozenKVMTPWorkerV2 (frozen-KV MTP: overrides forward_batch_generation)",
        "DFlashWorkerV2 (DFlash: not an EAGLE worker)",
        "EAGLEWorkerV2 with --pp-size > 1 (the PP tail draft runs inside the cycle)",
        "UnoWorkerV2, DSparkWorkerV2, NGRAMWorker (not EAGLE workers)",
    ]


def _keeps(cls: type, base: str, methods: tuple[str, ...]) -> Optional[str]:
    """None when ``cls`` reaches ``eagle_worker_v2.<base>`` without overriding ``methods``; else why not."""
    for k in cls.__mro__:
        if k.__name__ == base and k.__module__ == EW:
            return None
        for m in methods:
            if m in vars(k):
                return f"{k.__name__} overrides {m}"
    return f"{cls.__name__} is not an {base}"


def worker_support(worker: Any) -> tuple[bool, str]:
    """``(profiled, reason)`` for a speculative worker instance (the scheduler's ``draft_worker``).

    Profiled: ``EAGLEWorkerV2`` and subclasses (e.g. ``StandaloneWorkerV2``) whose own and whose draft
    worker's cycle methods are upstream's, the ones hooked here.
    """
    why = _keeps(type(worker), "EAGLEWorkerV2", ("forward_batch_generation", "verify"))
    if why is None:
        dw = getattr(worker, "_draft_worker", None)
        if dw is None:
            why = "no draft worker on this rank"
        else:
            why = _keeps(type(dw), "EagleDraftWorker", ("draft", "draft_forward", "_draft_extend_for_decode"))
    if why is None:
        return True, f"profiling {type(worker).__name__}"
    return False, f"{type(worker).__name__} is not profiled ({why})"


def _no_stamp():
    """The stamp of a cycle that records nothing (NVTX only, or broken by a fault in our code)."""
    return None


class _Cycle:
    """One timed decode cycle on its way from launch to the sink (a :class:`sinks.Pending`).

    ``t`` holds the cycle's ten time points (``T_*`` indices; ``None`` until marked), ``step_t`` the
    start and end of each eager draft forward, ``prev_end`` the previous cycle's ``total1`` (for
    ``gap_ms``; this cycle releases it), ``keep_end`` whether this cycle's ``total1`` was handed to
    the next cycle (then that one releases it). ``stamp`` is the timer's, or :func:`_no_stamp` when
    the cycle records nothing. Slots, every one set here: an attribute first set later would turn
    a shared-key instance dict into a private one on the scheduler thread (about 1 us a cycle).
    """

    __slots__ = ("id", "timer", "stamp", "t", "step_t", "broken", "nvtx_open", "phase", "extend_nvtx",
                 "prev_end", "keep_end", "per_req", "bonus", "run")

    def __init__(self, cycle_id: int, timer, stamp, t0):
        self.id = cycle_id
        self.timer = timer
        self.stamp = stamp
        self.t = [t0, None, None, None, None, None, None, None, None, None]
        self.step_t: Optional[list] = None
        self.broken = False
        self.nvtx_open = 0  # NVTX ranges pushed and not yet popped
        self.phase = IN_DRAFT
        self.extend_nvtx = False  # the draft-extend's NVTX range was pushed
        self.prev_end = None
        self.keep_end = False
        self.per_req: Optional[list] = None  # accepted drafts per request (bonus excluded), from the read point
        self.bonus = 1
        # (num_steps, topk, num_draft_tokens, verify from a CUDA graph, adaptive state), set at the launch's end
        self.run = (0, 0, 0, False, None)

    def stamps(self) -> list:
        """Each stamp this cycle owns, once (an eager draft's first and last step stamps are also
        ``draft0``/``draft1``; a ``total1`` handed to the next cycle is not owned any more)."""
        own = self.t if not self.keep_end else self.t[:T_TOTAL1] + self.t[T_TOTAL1 + 1:]
        every = own + (self.step_t or []) + [self.prev_end]
        return list({id(x): x for x in every if x is not None}.values())

    def ready(self) -> bool:
        return self.timer.done(self.t[T_TOTAL1])

    def release(self) -> None:
        """Give the stamps back (a read or dropped cycle); a ``total1`` handed on stays with its taker."""
        stamps = self.stamps()
        self.t, self.step_t, self.prev_end = [None] * N_STAMPS, None, None
        self.timer.release(stamps)

    def build(self) -> CycleRecord:
        """Read the stamps (they completed) into a record and release them (on the sink thread)."""
        t, ms = self.t, self.timer.elapsed_ms
        steps, topk, draft_tokens, graph, adaptive = self.run
        try:
            phases = {name: ms(t[a], t[b]) for name, (a, b) in PHASE_SPANS.items()}
            phases["gap_ms"] = ms(self.prev_end, t[T_TOTAL0])
            st = self.step_t
            step_ms = [ms(st[i], st[i + 1]) for i in range(0, len(st) - 1, 2)] if st else None
        finally:
            self.release()
        accepts = [int(c) + self.bonus for c in self.per_req]
        return make_record(
            cycle=self.id, config=(len(accepts), steps, topk, draft_tokens),
            phases_ms=phases, accepts=accepts, graph=bool(graph), draft_step_ms=step_ms, ts=time.time(),
            adaptive=adaptive,
        )


class _Segment:
    """What the hooked ``device_timer_ctx`` returns inside a timed cycle: SGLang's own context
    manager (``inner``), whose exit is followed by the segment's end stamp. The start was stamped
    by the hook (:meth:`CycleProfiler.around_device_timer_ctx`), right before the ``with``
    statement enters. ``slot`` is the end's index in ``_Cycle.t``; ``step`` marks an eager draft
    forward."""

    __slots__ = ("prof", "cyc", "inner", "slot", "step")

    def __init__(self, prof, cyc, inner, slot, step):
        self.prof, self.cyc, self.inner, self.slot, self.step = prof, cyc, inner, slot, step

    def __enter__(self):
        return self.inner.__enter__()

    def __exit__(self, exc_type, exc, tb):
        out = self.inner.__exit__(exc_type, exc, tb)
        cyc = self.cyc
        if not cyc.broken:
            try:
                cyc.t[self.slot] = st = cyc.stamp()  # the last segment's end
                if self.step:
                    steps = cyc.step_t
                    if len(steps) % 2:
                        steps.append(st)
            except Exception as err:
                self.prof._fault("device segment", err, cyc)
        return out


class _SegmentEnd:
    """The common case of :class:`_Segment`, made once per slot: upstream's context would be a
    no-op (no ``DeviceTimer``) and the segment is not an eager draft forward. Its exit stamps the
    end of the profiler's active cycle; nothing is allocated per call."""

    __slots__ = ("prof", "slot")

    def __init__(self, prof, slot):
        self.prof, self.slot = prof, slot

    def __enter__(self):
        return None

    def __exit__(self, exc_type, exc, tb):
        cyc = self.prof._active
        if cyc is not None and not cyc.broken:
            try:
                cyc.t[self.slot] = cyc.stamp()  # the last segment's end
            except Exception as err:
                self.prof._fault("device segment", err, cyc)
        return None


def _stats_logging_rank(ranks) -> bool:
    """SGLang's stats-logging rank (attention-TP rank 0, attention-CP rank 0), as for its Decode line."""
    try:
        from sglang.srt.runtime_context import get_parallel

        par = get_parallel()
        return par.attn_tp_rank == 0 and par.attn_cp_rank == 0
    except Exception:
        return ranks.is_first


class CycleProfiler:
    """State and AROUND hooks of the decode-cycle timer (one per scheduler process).

    Args:
        timer: a :mod:`~sglang_eagle_cycle.timing` backend; default chosen from the worker's device
            at the first decode cycle (CUDA events on CUDA, the host clock on CPU).
        sink: a :class:`~sglang_eagle_cycle.sinks.CycleSink`; default from the environment.
        nvtx: NVTX ranges (``push(name)``/``pop()``); default from ``SGLANG_EAGLE_CYCLE_NVTX``.
        env: environment mapping (default ``os.environ``), read once at the first decode cycle.
        log: logger for faults and notices (default ``sglang_eagle_cycle``).
        device_spans: False leaves out the stamps that give the device spans and the scheduler's
            ``seq_lens`` wait (``device_timer_ctx`` segments, the ``total1`` kept for ``gap_ms``,
            the ``resolve_seq_lens_cpu`` stamps): only ``total_ms`` and ``verify_ms`` are measured.
            For ``benchmarks/bench_hook_overhead.py``, which prices those stamps against the cycle
            without them in one process; a server always runs with them.
    """

    def __init__(self, *, timer=None, sink: Optional[CycleSink] = None, nvtx=None, env=None,
                 log: Optional[logging.Logger] = None, device_spans: bool = True):
        self._timer = timer
        self._sink = sink
        self._nvtx = nvtx
        self._env = env
        self._log = log or logging.getLogger(LOGGER_NAME)
        self._set_up = False
        self._disabled = False
        self._active: Optional[_Cycle] = None
        self._next_id = 0
        self._ok_worker = self._ok_type = None  # the worker found profiled (a scheduler has one)
        self._type_ok: dict = {}
        self._prev_end = None  # (total1 stamp, stream, host seconds) of the last recorded cycle, for gap_ms
        self._until_check = 0  # cycles until the sink is asked again whether anything is wanted
        self._recording = self._wanted = False
        self._seq_wait = None  # the sink's seq_lens wait while cycles are recorded
        self._spans = bool(device_spans)
        self._noop_ctx = None  # upstream's device_timer_ctx, once seen unwrapped (False: wrapped by another hook)
        self._ends = {slot: _SegmentEnd(self, slot) for slot in (T_DRAFT1, T_FWD1, T_EXT1)}
        self._may_capture = True
        self._faults: set = set()
        self.fault_count = 0

    @property
    def sink(self) -> Optional[CycleSink]:
        return self._sink

    # -- set-up and faults ---------------------------------------------------------------------

    def _setup(self, worker) -> None:
        """Configure from the environment at the first decode cycle; any problem turns timing off, once."""
        self._set_up = True
        try:
            from ..runtime import ranks

            env = os.environ if self._env is None else self._env
            r = ranks()
            if r.pp_size > 1:
                self._disabled = True
                self._log.info("sglang-eagle-cycle: timing off: --pp-size > 1 (the PP tail draft is not profiled)")
                return
            if self._timer is None:
                device = str(getattr(worker, "device", "") or "") or None
                self._timer = make_timer(device=device)
                if hasattr(self._timer, "prewarm"):
                    self._timer.prewarm(32)
            if self._sink is None:
                self._sink = CycleSink(SinkConfig.from_env(env, r, stats_rank=_stats_logging_rank(r)))
            if self._nvtx is None and self._sink.config.nvtx:
                self._nvtx = load_nvtx(self._log)
        except Exception as exc:
            self._disabled = True
            self._log.warning("sglang-eagle-cycle: timing off (%s: %s)", type(exc).__name__, exc)

    def _fault(self, where: str, exc: BaseException, cyc: Optional[_Cycle] = None) -> None:
        """Log an exception of ours once per (place, type); the cycle, if any, stops recording."""
        self.fault_count += 1
        if cyc is not None:
            cyc.broken = True
            cyc.stamp = _no_stamp
        key = (where, type(exc))
        if key in self._faults:
            return
        self._faults.add(key)
        self._log.warning("sglang-eagle-cycle: internal error in timing %s (%s: %s); "
                          "the cycle continues on the upstream path, untimed", where, type(exc).__name__, exc)

    def _admit(self, worker) -> bool:
        """First decode cycle of a worker: set up, check it is profiled, remember it (the fast path).

        A profiled worker gets the ``verify`` shim on its instance (:func:`_verify_shim`), unless
        something else already shadows ``verify`` there (then ``verify`` is not timed).
        """
        if not self._set_up:
            self._setup(worker)
        if self._disabled or not self._supported(worker):
            return False
        self._ok_worker, self._ok_type = worker, type(worker)
        self._until_check = 0
        if "verify" not in worker.__dict__:
            worker.verify = _verify_shim(self, worker)
        return True

    def _supported(self, worker) -> bool:
        key = (type(worker), type(getattr(worker, "_draft_worker", None)))
        ok = self._type_ok.get(key)
        if ok is None:
            ok, why = worker_support(worker)
            self._type_ok[key] = ok
            if not ok:
                self._log.info("sglang-eagle-cycle: %s", why)
        return ok

    def _refresh(self) -> None:
        """Ask the sink whether cycles are wanted (log level, JSONL); again every :data:`RECHECK_CYCLES`."""
        self._until_check = RECHECK_CYCLES
        self._recording = bool(self._sink.active)
        self._wanted = self._recording or self._nvtx is not None
        self._seq_wait = self._sink.seq_lens_wait if self._recording and self._spans else None
        # a CUDA graph can only be under capture where CUDA is usable (the host timer knows)
        self._may_capture = bool(getattr(self._timer, "may_capture", True))

    # -- the cycle -----------------------------------------------------------------------------

    def around_forward(self, original, worker, batch, *args, **kwargs):
        """``EAGLEWorkerV2.forward_batch_generation``: the cycle (``total``), and the stamps it carries.

        Only decode batches are timed (the mode is read before upstream mutates it): prefill/extend
        batches take upstream's prefill path and idle (DP) batches are not decode. Any other batch
        between two timed cycles unlinks them (no ``gap_ms`` across it).
        """
        if self._active is not None or self._disabled:
            return original(worker, batch, *args, **kwargs)
        cyc = None
        try:
            if batch.forward_mode.is_decode() and not batch.is_extend_in_batch and (
                    (worker is self._ok_worker and type(worker) is self._ok_type) or self._admit(worker)):
                self._until_check -= 1
                if self._until_check < 0:
                    self._refresh()
                if self._wanted and not (self._may_capture and self._timer.capturing()):
                    # (a PP-relayed verify input, which skips the draft, cannot occur: pp_size > 1 is not timed)
                    self._next_id += 1
                    timer = self._timer
                    if self._recording:
                        cyc = _Cycle(self._next_id, timer, timer.stamp, timer.begin())
                        prev = self._prev_end
                        if prev is not None:
                            # (==: torch makes a new Stream object at each current_stream())
                            if prev[1] == timer.stream and _perf() - prev[2] < GAP_LINK_MAX_S:
                                cyc.prev_end, self._prev_end = prev[0], None
                            else:
                                self._unlink()
                    else:  # NVTX only: nothing recorded, so no gap may span this cycle
                        cyc = _Cycle(self._next_id, timer, _no_stamp, None)
                        if self._prev_end is not None:
                            self._unlink()
                    if self._nvtx is not None:
                        self._nvtx.push("eagle_cycle.cycle")
                        cyc.nvtx_open = 1
                        if worker.speculative_num_steps > 1:
                            self._nvtx.push("eagle_cycle.draft")  # closed where verify starts
                            cyc.nvtx_open = 2
        except Exception as exc:
            self._fault("cycle start", exc)
            cyc = None
        if cyc is None:
            if self._prev_end is not None:
                self._unlink()
            return original(worker, batch, *args, **kwargs)
        self._active = cyc
        try:
            result = original(worker, batch, *args, **kwargs)
        except BaseException:
            self._active = None
            self._drop(cyc)  # upstream failed: the cycle is dropped, its stamps go back
            raise
        self._active = None
        try:
            cyc.t[6] = cyc.stamp()  # total1
            if cyc.nvtx_open:
                self._close_nvtx(cyc)
            if cyc.stamp is not _no_stamp:
                # (num_steps, topk, num_draft_tokens, graph) as run: adaptive mode changes them per batch;
                # with our adaptive policy, its state for this batch (set when SGLang routed the batch,
                # at the start of this decode branch)
                ctl = getattr(worker, "adaptive_controller", None)
                cyc.run = (worker.speculative_num_steps, worker.topk, worker.speculative_num_draft_tokens,
                           result.can_run_cuda_graph,
                           None if ctl is None else getattr(ctl.params, "last_mode", None))
                setattr(result, RESULT_ATTR, cyc)  # to the read point
                # the scheduler now copies the result to the host and blocks in copy_done.synchronize()
                # (GIL released): the sink thread may write meanwhile
                sink = self._sink
                sink.copy_wait.opened = now = _perf()
                if self._spans:
                    cyc.keep_end = True  # total1 goes on to the next cycle, for its gap_ms
                    self._prev_end = (cyc.t[6], self._timer.stream, now)
                if sink.dozing:  # the sink thread sleeps long (after an idle spell): wake it now
                    sink.kick()
        except Exception as exc:
            self._fault("cycle end", exc, cyc)
        return result

    def _unlink(self) -> None:
        """Another batch ran (or nothing is recorded): no gap across. The kept ``total1`` is let go,
        not pooled: the cycle it ends may not be read yet (in overlap mode it resolves after the next
        launch), and a pooled event would be recorded again by the next cycle before that read."""
        self._prev_end = None

    def _close_nvtx(self, cyc: _Cycle) -> None:
        for _ in range(cyc.nvtx_open):
            self._nvtx.pop()
        cyc.nvtx_open = 0

    def _drop(self, cyc: _Cycle) -> None:
        """A cycle upstream did not finish: close its NVTX ranges, give its stamps back."""
        try:
            if cyc.nvtx_open:
                self._close_nvtx(cyc)
            cyc.prev_end = None  # the previous cycle's total1: that cycle may not be read yet (_unlink)
            cyc.release()
        except Exception as exc:
            self._fault("cycle end", exc, cyc)

    def around_device_timer_ctx(self, original, timer, category, *args, **kwargs):
        """``sglang.srt.utils.device_timer.device_timer_ctx(timer, category)``: bounds a device segment.

        Outside a timed cycle it returns upstream's context manager untouched. Inside one it
        stamps the segment's launch start and returns a :class:`_Segment` (upstream's context
        inside, whose exit is followed by the end stamp), both on the cycle's stream, filed under
        the draft, the target verify forward or the draft-extend by where the cycle is (module
        docstring). Without a ``DeviceTimer`` (``timer`` None) upstream's function returns a no-op
        context, which is then not made at all (unless another hook wraps the function).
        """
        cyc = self._active
        if cyc is None or cyc.broken or not self._spans or (cyc.stamp is _no_stamp and self._nvtx is None):
            return original(timer, category, *args, **kwargs)
        noop = self._noop_ctx
        if noop is None:
            noop = self._noop_ctx = original if (getattr(original, "__module__", None) == DT
                                                 and not hasattr(original, "__wrapped__")) else False
        inner = None if (timer is None and original is noop and not args and not kwargs) else original(
            timer, category, *args, **kwargs)
        try:
            st = cyc.stamp()
            t = cyc.t
            phase = cyc.phase
            step = False
            if phase == IN_DRAFT:
                if t[T_DRAFT0] is None:
                    t[T_DRAFT0] = st
                slot = T_DRAFT1
                if category != DRAFT_GRAPH_CATEGORY:  # an eager draft forward: one draft_step_ms span
                    steps = cyc.step_t
                    if steps is None:
                        cyc.step_t = [st]
                        step = True
                    elif len(steps) < 2 * MAX_DRAFT_STEPS:
                        steps.append(st)
                        step = True
            elif phase == IN_VERIFY:
                if t[T_FWD0] is None:
                    t[T_FWD0] = st
                slot = T_FWD1
            else:
                if t[T_EXT0] is None:
                    t[T_EXT0] = st
                slot = T_EXT1
                if not cyc.extend_nvtx and self._nvtx is not None:
                    self._nvtx.push("eagle_cycle.extend")
                    cyc.extend_nvtx = True
                    cyc.nvtx_open += 1
            if inner is None and not step:
                return self._ends[slot]
            return _Segment(self, cyc, inner if inner is not None else nullcontext(), slot, step)
        except Exception as exc:
            self._fault("device segment", exc, cyc)
            return inner if inner is not None else original(timer, category, *args, **kwargs)

    def around_capture(self, original, *args, **kwargs):
        """A ``ModelRunner`` method that captures CUDA graphs (:data:`CAPTURE_METHODS`): the sink
        reads no event while it runs (no-op in thread-local capture mode, or before any cycle)."""
        sink = self._sink
        if sink is None:
            return original(*args, **kwargs)
        try:
            pause = sink.capture_pause()
            pause.__enter__()
        except Exception as exc:
            self._fault("capture guard", exc)
            return original(*args, **kwargs)
        try:
            return original(*args, **kwargs)
        finally:
            try:
                pause.__exit__(None, None, None)
            except Exception as exc:   # never in place of upstream's result or exception
                self._fault("capture guard", exc)

    def around_seq_lens(self, original, *args, **kwargs):
        """``FutureMap.resolve_seq_lens_cpu(batch)``: the scheduler's wait before it launches a cycle.

        With attention backends that need host sequence lengths (FlashInfer and the base default)
        it blocks until the previous cycle's verify has published them, usually the longest wait
        of the cycle; stamped as the sink's ``seq_lens`` wait (:class:`~..sinks.DeviceWait`), so
        the sink thread writes inside it. Stamps only while cycles are recorded.
        """
        w = self._seq_wait
        if w is None:
            return original(*args, **kwargs)
        try:
            w.opened = t0 = _perf()
        except Exception as exc:
            self._fault("seq_lens wait", exc)
            return original(*args, **kwargs)
        try:
            return original(*args, **kwargs)
        finally:
            try:
                w.closed = t1 = _perf()
                w.last = t1 - t0
            except Exception as exc:
                self._fault("seq_lens wait", exc)

    def around_resolve(self, original, *args, **kwargs):
        """``_resolve_spec_v2_tokens(result, batch)``: after the ``copy_done`` sync; hands the cycle to the sink."""
        sink = self._sink
        if sink is not None:  # the scheduler runs Python until it launches the next cycle
            try:
                w = sink.copy_wait
                w.closed = now = _perf()
                w.last = now - w.opened
            except Exception as exc:
                self._fault("read", exc)
        out = original(*args, **kwargs)
        try:
            result = args[1] if len(args) > 1 else kwargs["result"]
            cyc = result.__dict__.pop(RESULT_ATTR, None)
            if cyc is None:
                return out
            per_req = result.num_correct_drafts_per_req_cpu
            if per_req is None:
                per_req, cyc.bonus = result.accept_lens.tolist(), 0
            else:
                cyc.bonus = result.num_non_draft_tokens_per_req
            cyc.per_req = per_req
            self._sink.submit(cyc)
        except Exception as exc:
            self._fault("read", exc)
        return out


def _verify_shim(prof: CycleProfiler, worker):
    """Shadows ``worker.verify`` on the instance: times ``verify`` and marks where the cycle is.

    ``EAGLEWorkerV2.verify`` runs the verify-input preparation, the target verify forward, sampling
    and commit bookkeeping (``verify_ms``); the ``device_timer_ctx`` segment met inside it is the
    target verify forward (``verify_fwd_ms``). Looks the method up on the class at each call
    (class-level hooks still run); calls outside a timed cycle pass straight through.
    """

    def verify(*args, **kwargs):
        fn = type(worker).verify
        cyc = prof._active
        if cyc is None:
            return fn(worker, *args, **kwargs)
        nvtx = prof._nvtx
        try:
            cyc.t[1] = cyc.stamp()  # verify0
            cyc.phase = IN_VERIFY
            if nvtx is not None:
                if cyc.nvtx_open == 2:  # the draft range
                    nvtx.pop()
                    cyc.nvtx_open = 1
                nvtx.push("eagle_cycle.verify")
                cyc.nvtx_open += 1
        except Exception as exc:
            prof._fault("verify", exc, cyc)
        try:
            return fn(worker, *args, **kwargs)
        finally:
            try:
                cyc.t[4] = cyc.stamp()  # verify1
                cyc.phase = AFTER_VERIFY
                if nvtx is not None and cyc.nvtx_open > 1:
                    nvtx.pop()
                    cyc.nvtx_open -= 1
            except Exception as exc:
                prof._fault("verify", exc, cyc)

    verify.eagle_cycle_shim = True
    return verify


_default: Optional[CycleProfiler] = None


def default_profiler() -> CycleProfiler:
    """The process's profiler (created on first use; configured from the environment at the first cycle)."""
    global _default
    if _default is None:
        _default = CycleProfiler()
    return _default


def hook_specs(profiler: Optional[CycleProfiler] = None) -> list[HookSpec]:
    """The AROUND hooks of the timing area, bound to ``profiler`` (default: :func:`default_profiler`)."""
    p = profiler or default_profiler()
    return [
        HookSpec(f"{EW}.EAGLEWorkerV2.forward_batch_generation", EW, p.around_forward, "timing"),
        HookSpec(f"{DT}.device_timer_ctx", DT, p.around_device_timer_ctx, "timing"),
        *(HookSpec(f"{MR}.ModelRunner.{name}", MR, p.around_capture, "timing") for name in CAPTURE_METHODS),
        HookSpec(f"{OU}.FutureMap.resolve_seq_lens_cpu", OU, p.around_seq_lens, "timing"),
        HookSpec(f"{BRP}.SchedulerBatchResultProcessor._resolve_spec_v2_tokens", BRP, p.around_resolve, "timing"),
    ]
