"""Per-cycle timing of SGLang 0.5.23's EAGLE-3 decode cycle (``EAGLEWorkerV2``), as AROUND hooks.

One decode cycle of the overlap worker (UPSTREAM §2), and where its time points are marked::

    EAGLEWorkerV2.forward_batch_generation (decode branch)     total0 ........................... total1
      EagleDraftWorker.draft                                     |  draft = total0 .. verify0
        EagleDraftWorker.draft_forward (eager mode only)         |
          draft_runner.forward, once per draft step              |  step{i} .. step{i}_end
      EAGLEWorkerV2.verify                                                verify0 ....... verify1
        target_worker.forward_batch_generation(is_verify=True)            fwd0 .. fwd1
      on_publish(new_seq_lens)                                                       (other)
      EagleDraftWorker._draft_extend_for_decode                                      extend0 .. total1
    SchedulerBatchResultProcessor._resolve_spec_v2_tokens      read point: accept lengths, hand-over

``other = total - draft - verify - extend`` (the publish, host bookkeeping, GPU gaps).
At ``num_steps = 1`` the draft phase has no draft forward and is not timed (``-``; its sampling
falls into ``other``); at ``num_steps = 0`` (adaptive) there is no draft phase at all.

Two HookRegistry wrappers per cycle (the branch and the read point; eager mode adds ``draft_forward``) and two instance shims
(``verify``, the target verify forward), not one wrapper per boundary, because every wrapped call
costs the scheduler host time (budget: 20 us per cycle):

* the draft is all the device work the decode branch does before ``verify`` (in 0.5.23 nothing
  but ``draft()`` runs on the device there), so it is ``total0 .. verify0``;
* the draft-extend is all the device work after ``on_publish`` returns (nothing but
  ``_draft_extend_for_decode`` in 0.5.23), so it is ``extend0 .. total1``, where ``extend0`` is
  marked by the ``on_publish`` callback the branch receives: ours, which calls the scheduler's
  own first (or nothing, when the scheduler passed none, as in non-overlap mode);
* ``verify`` is timed by a shim put on the worker *instance* at its first timed decode cycle
  (:func:`_verify_shim`: one call layer instead of the registry's two);
* the target verify forward and the eager draft forwards are not HookRegistry targets (every
  ``TpModelWorker.forward_batch_generation`` / ``ModelRunner.forward`` call of the server would pay
  a wrapper for them). The target verify forward is marked by a shim put once, at the first timed
  verify, on that one target worker *instance* (putting it there and taking it off every cycle
  cost more than leaving it): it marks ``is_verify=True`` calls inside a timed cycle and passes
  every other call straight to whatever the class provides (so class-level hooks still run). The
  eager draft forwards are marked by a shim on the draft runner instance that exists only while a
  timed eager ``draft_forward`` runs (eager mode is slow anyway).

Scheduler-side cost, the budget being 20 us per cycle: a cycle's time points are kept as a list
of seven stamps (``time.perf_counter_ns`` itself, or one pooled CUDA event record each); the
formatting and I/O run on the sink thread. This module stamps when the scheduler starts blocking
on the device (``CycleSink.opened_at``, at the end of a launch) and when it resumes
(``CycleSink.closed_at``, at the read point); the sink thread times its own wake-ups into those
waits from the stamps and is woken by the scheduler only after an idle spell (see :mod:`..sinks`).

Rules kept here (DESIGN §2):

* The forward mode is checked *before* the original runs (verify mutates it): only decode batches
  are timed, never prefill/extend, idle (DP) batches or anything while a CUDA graph is being
  captured on the current stream; nested hooks act only inside a timed cycle.
* No added sync: the stamps of cycle N travel on batch N's ``GenerationBatchResult`` and are handed
  to the sink at the read point, which runs after the scheduler's own ``copy_done`` sync of that
  result (in overlap mode after batch N+1 was launched); the sink reads them only once ``query()``
  says they completed.
* Fault isolation (DESIGN §0): an exception in our code is logged once (type and message) and the
  cycle runs on upstream's path, untimed; an exception from upstream propagates unchanged and the
  cycle is discarded, so the next one starts clean.

Only ``EAGLEWorkerV2`` and subclasses that keep its decode branch are timed (:func:`worker_support`);
:func:`unsupported_workers` names the others for the banner.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Optional

from ..cycle import CycleRecord, make_record
from ..sinks import LOGGER_NAME, CycleSink, SinkConfig, load_nvtx
from ..sinks import _clock as _perf  # the stamps the sink thread reads are on its clock
from ..timing import make_timer
from . import HookSpec

EW = "sglang.srt.speculative.eagle_worker_v2"
BRP = "sglang.srt.managers.scheduler_components.batch_result_processor"

#: Attribute of the ``GenerationBatchResult`` that carries a timed cycle to the read point.
RESULT_ATTR = "_eagle_cycle_pending"

#: Eager draft forwards timed per cycle (``num_steps - 1`` of them).
MAX_DRAFT_STEPS = 64

#: Decode cycles between two questions to the sink whether anything is wanted (a log level or a
#: JSONL file); asking costs the scheduler a few calls, so it is not asked every cycle.
RECHECK_CYCLES = 256

# Where each time point of a cycle is kept in ``_Cycle.t`` (the hooks write the literal indices).
T_TOTAL0, T_VERIFY0, T_FWD0, T_FWD1, T_VERIFY1, T_EXTEND0, T_TOTAL1 = range(7)

#: The span of time points each phase measures (see the module docstring for draft and extend).
PHASE_SPANS = {
    "draft_ms": (T_TOTAL0, T_VERIFY0),
    "verify_ms": (T_VERIFY0, T_VERIFY1),
    "verify_fwd_ms": (T_FWD0, T_FWD1),
    "extend_ms": (T_EXTEND0, T_TOTAL1),  # extend0: right after on_publish
    "total_ms": (T_TOTAL0, T_TOTAL1),
}



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

    ``t`` holds the cycle's 7 time points (``T_*`` indices; ``None`` until marked), ``step_t`` the
    start and end of each eager draft forward. ``stamp`` is the timer's, or :func:`_no_stamp` when
    the cycle records nothing. (No ``__slots__``: the rarely changed fields are class defaults, so
    making a cycle on the scheduler thread sets four attributes.)
    """

    step_t: Optional[list] = None
    broken = False
    nvtx_open = 0  # NVTX ranges pushed and not yet popped
    publish = None  # upstream's on_publish for this cycle
    per_req: Optional[list] = None  # accepted drafts per request (bonus excluded), from the read point
    bonus = 1
    run = (0, 0, 0, False)  # (num_steps, topk, num_draft_tokens, verify from a CUDA graph), set at the launch's end

    def __init__(self, cycle_id: int, timer, stamp, t0):
        self.id = cycle_id
        self.timer = timer
        self.stamp = stamp
        self.t = [t0, None, None, None, None, None, None]

    def stamps(self) -> list:
        return self.t + (self.step_t or [])

    def ready(self) -> bool:
        return self.timer.done(self.t[T_TOTAL1])

    def release(self) -> None:
        """Give the stamps back (a dropped cycle)."""
        stamps, self.t, self.step_t = self.stamps(), [None] * 7, None
        self.timer.release(stamps)

    def build(self) -> CycleRecord:
        """Read the stamps (they completed) into a record and release them (on the sink thread)."""
        t, ms = self.t, self.timer.elapsed_ms
        steps, topk, draft_tokens, graph = self.run
        try:
            phases = {name: ms(t[a], t[b]) for name, (a, b) in PHASE_SPANS.items()}
            if steps <= 1:
                phases["draft_ms"] = None  # no draft forward ran (module docstring)
            st = self.step_t
            step_ms = [ms(st[i], st[i + 1]) for i in range(0, len(st) - 1, 2)] if st else None
        finally:
            self.release()
        accepts = [int(c) + self.bonus for c in self.per_req]
        return make_record(
            cycle=self.id, config=(len(accepts), steps, topk, draft_tokens),
            phases_ms=phases, accepts=accepts, graph=bool(graph), draft_step_ms=step_ms, ts=time.time(),
        )


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
    """

    def __init__(self, *, timer=None, sink: Optional[CycleSink] = None, nvtx=None, env=None,
                 log: Optional[logging.Logger] = None):
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
        self._shimmed = None  # the target worker whose forward_batch_generation carries our shim
        self._step_shim = None  # (draft runner, shim), made once per runner
        self._on_publish = self._publish  # one bound method, passed to upstream as on_publish
        self._until_check = 0  # cycles until the sink is asked again whether anything is wanted
        self._recording = self._wanted = False
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
        # a CUDA graph can only be under capture where CUDA is usable (the host timer knows)
        self._may_capture = bool(getattr(self._timer, "may_capture", True))

    # -- the cycle -----------------------------------------------------------------------------

    def around_forward(self, original, worker, batch, *args, **kwargs):
        """``EAGLEWorkerV2.forward_batch_generation``: the cycle (``total``); draft-extend starts after ``on_publish``.

        Only decode batches are timed (the mode is read before upstream mutates it): prefill/extend
        batches take upstream's prefill path and idle (DP) batches are not decode.
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
                    else:
                        cyc = _Cycle(self._next_id, timer, _no_stamp, None)
                    if self._nvtx is not None:
                        self._nvtx.push("eagle_cycle.cycle")
                        cyc.nvtx_open = 1
                        if worker.speculative_num_steps > 1:
                            self._nvtx.push("eagle_cycle.draft")  # closed where verify starts
                            cyc.nvtx_open = 2
                    # upstream calls on_publish(new_seq_lens) between verify and draft-extend
                    if args:
                        cyc.publish, args = args[0], (self._on_publish, *args[1:])
                    else:
                        cyc.publish = kwargs.get("on_publish")
                        kwargs["on_publish"] = self._on_publish
        except Exception as exc:
            self._fault("cycle start", exc)
            cyc = None
        if cyc is None:
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
            cyc.publish = None
            if cyc.nvtx_open:
                self._close_nvtx(cyc)
            if cyc.stamp is not _no_stamp:
                # (num_steps, topk, num_draft_tokens, graph) as run: adaptive mode changes them per batch
                cyc.run = (worker.speculative_num_steps, worker.topk, worker.speculative_num_draft_tokens,
                           result.can_run_cuda_graph)
                setattr(result, RESULT_ATTR, cyc)  # to the read point
                # the scheduler now copies the result to the host and blocks in copy_done.synchronize()
                # (GIL released): the sink thread may write meanwhile
                sink = self._sink
                sink.opened_at = _perf()
                if sink.dozing:  # the sink thread sleeps long (after an idle spell): wake it now
                    sink.kick()
        except Exception as exc:
            self._fault("cycle end", exc, cyc)
        return result

    def _close_nvtx(self, cyc: _Cycle) -> None:
        for _ in range(cyc.nvtx_open):
            self._nvtx.pop()
        cyc.nvtx_open = 0

    def _drop(self, cyc: _Cycle) -> None:
        """A cycle upstream did not finish: close its NVTX ranges, give its stamps back."""
        try:
            cyc.publish = None
            if cyc.nvtx_open:
                self._close_nvtx(cyc)
            cyc.release()
        except Exception as exc:
            self._fault("cycle end", exc, cyc)

    def _publish(self, new_seq_lens) -> None:
        """Upstream's ``on_publish`` (if the scheduler passed one), then the draft-extend starts."""
        cyc = self._active
        publish = cyc.publish if cyc is not None else None
        if publish is not None:
            publish(new_seq_lens)  # upstream's exceptions propagate unchanged
        if cyc is None:
            return
        try:
            cyc.t[5] = cyc.stamp()  # extend0
            if self._nvtx is not None:
                self._nvtx.push("eagle_cycle.extend")
                cyc.nvtx_open += 1
        except Exception as exc:
            self._fault("extend", exc, cyc)

    def _shim_target(self, target) -> None:
        """Put the verify-forward shim on ``target`` (once); leave a method someone else shadows alone."""
        self._shimmed = target
        if "forward_batch_generation" not in target.__dict__:
            target.forward_batch_generation = _target_forward_shim(self, target)

    def around_draft_forward(self, original, draft_worker, *args, **kwargs):
        """``EagleDraftWorker.draft_forward`` (eager draft only): times each draft runner forward (``draft_step_ms``).

        Under CUDA graphs the draft is one graph replay and this method is not called in a cycle
        (it runs at capture time, outside any cycle, and passes through).
        """
        cyc = self._active
        if cyc is None or cyc.broken:
            return original(draft_worker, *args, **kwargs)
        runner = None
        try:
            dr = draft_worker.draft_runner
            if not self._timer.capturing() and "forward" not in dr.__dict__:
                cached = self._step_shim
                if cached is None or cached[0] is not dr:
                    cached = self._step_shim = (dr, _draft_step_shim(self, dr))
                dr.forward = cached[1]
                runner = dr
        except Exception as exc:
            self._fault("draft step", exc, cyc)
        try:
            return original(draft_worker, *args, **kwargs)
        finally:
            if runner is not None:
                try:
                    del runner.forward
                except Exception as exc:
                    self._fault("draft step", exc, cyc)

    def around_resolve(self, original, *args, **kwargs):
        """``_resolve_spec_v2_tokens(result, batch)``: after the ``copy_done`` sync; hands the cycle to the sink."""
        sink = self._sink
        if sink is not None:  # the scheduler runs Python until it launches the next cycle
            try:
                sink.closed_at = now = _perf()
                sink.last_wait = now - sink.opened_at
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
    """Shadows ``worker.verify`` on the instance: times ``verify`` and puts the verify-forward shim in place.

    ``EAGLEWorkerV2.verify`` runs the verify-input preparation, the target verify forward, sampling
    and commit bookkeeping (``verify_ms``). The target verify forward is timed by a shim on the
    target worker *instance*, put there at the first timed verify (:func:`_target_forward_shim`).
    Looks the method up on the class at each call (class-level hooks still run); calls outside a
    timed cycle pass straight through.
    """

    def verify(*args, **kwargs):
        fn = type(worker).verify
        cyc = prof._active
        if cyc is None:
            return fn(worker, *args, **kwargs)
        nvtx = prof._nvtx
        try:
            cyc.t[1] = cyc.stamp()  # verify0
            if nvtx is not None:
                if cyc.nvtx_open == 2:  # the draft range
                    nvtx.pop()
                    cyc.nvtx_open = 1
                nvtx.push("eagle_cycle.verify")
                cyc.nvtx_open += 1
            target = worker._target_worker
            if prof._shimmed is not target:
                prof._shim_target(target)
        except Exception as exc:
            prof._fault("verify", exc, cyc)
        try:
            return fn(worker, *args, **kwargs)
        finally:
            try:
                cyc.t[4] = cyc.stamp()  # verify1
                if nvtx is not None and cyc.nvtx_open > 1:
                    nvtx.pop()
                    cyc.nvtx_open -= 1
            except Exception as exc:
                prof._fault("verify", exc, cyc)

    verify.eagle_cycle_shim = True
    return verify


def _target_forward_shim(prof: CycleProfiler, target):
    """Shadows ``target.forward_batch_generation``: marks the target verify forward of a timed cycle.

    Looks the method up on the class at each call (class-level hooks still run); calls outside a
    timed cycle and calls other than ``is_verify=True`` pass straight through.
    """

    def forward_batch_generation(*args, **kwargs):
        cyc = prof._active
        fn = type(target).forward_batch_generation
        if cyc is None or cyc.broken or not (kwargs.get("is_verify") or (len(args) > 3 and args[3] is True)):
            return fn(target, *args, **kwargs)
        try:
            cyc.t[2] = cyc.stamp()  # fwd0
        except Exception as exc:
            prof._fault("verify_fwd", exc, cyc)
        try:
            return fn(target, *args, **kwargs)
        finally:
            try:
                cyc.t[3] = cyc.stamp()  # fwd1
            except Exception as exc:
                prof._fault("verify_fwd", exc, cyc)

    forward_batch_generation.eagle_cycle_shim = True
    return forward_batch_generation


def _draft_step_shim(prof: CycleProfiler, runner):
    """Shadows ``draft_runner.forward`` during an eager ``draft_forward``: marks each draft forward."""

    def forward(*args, **kwargs):
        fn = type(runner).forward
        cyc = prof._active
        if cyc is None or cyc.broken:
            return fn(runner, *args, **kwargs)
        st = cyc.step_t
        if st is None:
            st = cyc.step_t = []
        elif len(st) >= 2 * MAX_DRAFT_STEPS:
            return fn(runner, *args, **kwargs)
        try:
            st.append(cyc.stamp())
        except Exception as exc:
            prof._fault("draft step", exc, cyc)
        try:
            return fn(runner, *args, **kwargs)
        finally:
            try:
                st.append(cyc.stamp())
            except Exception as exc:
                prof._fault("draft step", exc, cyc)

    return forward


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
        HookSpec(f"{EW}.EagleDraftWorker.draft_forward", EW, p.around_draft_forward, "timing"),
        HookSpec(f"{BRP}.SchedulerBatchResultProcessor._resolve_spec_v2_tokens", BRP, p.around_resolve, "timing"),
    ]
