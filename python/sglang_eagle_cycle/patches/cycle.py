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

Three HookRegistry wrappers per cycle (the branch, ``verify``, the read point), not one per
boundary, because every wrapped call costs the scheduler host time (budget: 20 us per cycle):

* the draft is all the device work the decode branch does before ``verify`` (in 0.5.23 nothing
  but ``draft()`` runs on the device there), so it is ``total0 .. verify0``;
* the draft-extend is all the device work after ``on_publish`` returns (nothing but
  ``_draft_extend_for_decode`` in 0.5.23), so it is ``extend0 .. total1``, where ``extend0`` is
  marked by the ``on_publish`` callback the branch receives: ours, which calls the scheduler's
  own first (or nothing, when the scheduler passed none, as in non-overlap mode);
* the target verify forward and the eager draft forwards are not HookRegistry targets (every
  ``TpModelWorker.forward_batch_generation`` / ``ModelRunner.forward`` call of the server would pay
  for them): while a timed ``verify`` (or eager ``draft_forward``) runs, that one instance's method
  is shadowed by a shim that calls whatever the class provides (so class-level hooks still run),
  and the shadow is removed in a ``finally``.

Rules kept here (DESIGN §2):

* The forward mode is checked *before* the original runs (verify mutates it): only decode batches
  are timed, never prefill/extend, idle (DP) batches or anything while a CUDA graph is being
  captured on the current stream; nested hooks act only inside a timed cycle.
* No added sync: the marks of cycle N travel on batch N's ``GenerationBatchResult`` and are handed
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
from ..timing import make_timer
from . import HookSpec

EW = "sglang.srt.speculative.eagle_worker_v2"
BRP = "sglang.srt.managers.scheduler_components.batch_result_processor"

#: Attribute of the ``GenerationBatchResult`` that carries a timed cycle to the read point.
RESULT_ATTR = "_eagle_cycle_pending"

#: Eager draft forwards timed per cycle (``num_steps - 1`` of them).
MAX_DRAFT_STEPS = 64

# Mark keys (the hooks spell them out as literals) and the phase each pair measures.
TOTAL = ("total0", "total1")
DRAFT = ("total0", "verify0")  # see the module docstring
VERIFY = ("verify0", "verify1")
VERIFY_FWD = ("fwd0", "fwd1")
EXTEND = ("extend0", "total1")  # extend0: right after on_publish
STEP_KEYS = tuple((f"step{i}", f"step{i}_end") for i in range(MAX_DRAFT_STEPS))

#: Workers whose decode branch these hooks time.
PROFILED_WORKERS = ("EAGLEWorkerV2", "StandaloneWorkerV2")


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


class _NullMarks:
    """Marks of a cycle that records nothing (NVTX only, or broken by a fault in our code)."""

    def mark(self, key):
        pass

    def release(self):
        pass


_NULL_MARKS = _NullMarks()


class _Cycle:
    """One timed decode cycle on its way from launch to the sink (a :class:`sinks.Pending`)."""

    __slots__ = ("id", "marks", "broken", "nvtx_open", "publish", "n_steps", "steps", "topk", "draft_tokens",
                 "graph", "per_req", "bonus")

    def __init__(self, cycle_id: int, marks):
        self.id = cycle_id
        self.marks = marks
        self.broken = False
        self.nvtx_open = 0  # NVTX ranges pushed and not yet popped
        self.publish = None  # upstream's on_publish for this cycle
        self.n_steps = 0  # eager draft forwards timed
        self.steps = self.topk = self.draft_tokens = 0
        self.graph = False
        self.per_req: Optional[list] = None  # accepted drafts per request (bonus excluded), from the read point
        self.bonus = 1

    def ready(self) -> bool:
        return self.marks.ready()

    def build(self) -> CycleRecord:
        """Read the marks (they completed) into a record and release them (on the sink thread)."""
        m = self.marks
        try:
            phases = {
                "draft_ms": m.elapsed_ms(*DRAFT) if self.steps > 1 else None,
                "verify_ms": m.elapsed_ms(*VERIFY),
                "verify_fwd_ms": m.elapsed_ms(*VERIFY_FWD),
                "extend_ms": m.elapsed_ms(*EXTEND),
                "total_ms": m.elapsed_ms(*TOTAL),
            }
            step_ms = [m.elapsed_ms(a, b) for a, b in STEP_KEYS[: self.n_steps]] or None
        finally:
            m.release()
        accepts = [int(c) + self.bonus for c in self.per_req]
        return make_record(
            cycle=self.id, config=(len(accepts), self.steps, self.topk, self.draft_tokens),
            phases_ms=phases, accepts=accepts, graph=self.graph, draft_step_ms=step_ms, ts=time.time(),
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
        self._target_shim = self._step_shim = None  # (object, shim), made once per object
        self._on_publish = self._publish  # one bound method, passed to upstream as on_publish
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
            cyc.marks = _NULL_MARKS
        key = (where, type(exc))
        if key in self._faults:
            return
        self._faults.add(key)
        self._log.warning("sglang-eagle-cycle: internal error in timing %s (%s: %s); "
                          "the cycle continues on the upstream path, untimed", where, type(exc).__name__, exc)

    def _supported(self, worker) -> bool:
        key = (type(worker), type(getattr(worker, "_draft_worker", None)))
        ok = self._type_ok.get(key)
        if ok is None:
            ok, why = worker_support(worker)
            self._type_ok[key] = ok
            if not ok:
                self._log.info("sglang-eagle-cycle: %s", why)
        return ok

    # -- the cycle -----------------------------------------------------------------------------

    def _begin(self, worker, batch) -> Optional[_Cycle]:
        if not batch.forward_mode.is_decode() or getattr(batch, "is_extend_in_batch", False):
            return None  # prefill/extend take upstream's prefill path; idle batches are not decode
        if worker is not self._ok_worker or type(worker) is not self._ok_type:
            if not self._set_up:
                self._setup(worker)
            if self._disabled or not self._supported(worker):
                return None
            self._ok_worker, self._ok_type = worker, type(worker)
        recording = self._sink.active
        if not (recording or self._nvtx is not None) or self._timer.capturing():
            return None
        # (a PP-relayed verify input, which skips the draft, cannot occur: pp_size > 1 is not timed)
        self._next_id += 1
        cyc = _Cycle(self._next_id, self._timer.start() if recording else _NULL_MARKS)
        cyc.marks.mark("total0")
        if self._nvtx is not None:
            self._nvtx.push("eagle_cycle.cycle")
            cyc.nvtx_open = 1
            if worker.speculative_num_steps > 1:
                self._nvtx.push("eagle_cycle.draft")  # closed where verify starts
                cyc.nvtx_open = 2
        return cyc

    def around_forward(self, original, worker, batch, *args, **kwargs):
        """``EAGLEWorkerV2.forward_batch_generation``: the cycle (``total``); draft-extend starts after ``on_publish``."""
        if self._active is not None or self._disabled:
            return original(worker, batch, *args, **kwargs)
        try:
            cyc = self._begin(worker, batch)
            if cyc is not None:
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
            self._end(cyc, None)  # upstream failed: the cycle is dropped, its marks go back
            raise
        self._active = None
        self._end(cyc, result)
        return result

    def _publish(self, new_seq_lens) -> None:
        """Upstream's ``on_publish`` (if the scheduler passed one), then the draft-extend starts."""
        cyc = self._active
        publish = cyc.publish if cyc is not None else None
        if publish is not None:
            publish(new_seq_lens)  # upstream's exceptions propagate unchanged
        if cyc is None:
            return
        try:
            cyc.marks.mark("extend0")
            if self._nvtx is not None:
                self._nvtx.push("eagle_cycle.extend")
                cyc.nvtx_open += 1
        except Exception as exc:
            self._fault("extend", exc, cyc)

    def _end(self, cyc: _Cycle, result) -> None:
        """Close the cycle; attach it to ``result`` for the read point, or drop it (``result`` None)."""
        try:
            cyc.marks.mark("total1")
            cyc.publish = None
            if self._nvtx is not None:
                for _ in range(cyc.nvtx_open):
                    self._nvtx.pop()
                cyc.nvtx_open = 0
            if cyc.marks is _NULL_MARKS:
                return
            if result is None:
                cyc.marks.release()
                return
            worker = self._ok_worker
            cyc.steps = worker.speculative_num_steps
            cyc.topk = worker.topk
            cyc.draft_tokens = worker.speculative_num_draft_tokens
            cyc.graph = bool(result.can_run_cuda_graph)
            setattr(result, RESULT_ATTR, cyc)
        except Exception as exc:
            self._fault("cycle end", exc, cyc)

    def around_verify(self, original, worker, *args, **kwargs):
        """``EAGLEWorkerV2.verify``: target verify forward, sampling, bookkeeping (``verify``, ``verify_fwd``)."""
        cyc = self._active
        if cyc is None:
            return original(worker, *args, **kwargs)
        nvtx = self._nvtx
        target = None
        try:
            cyc.marks.mark("verify0")
            if nvtx is not None:
                if cyc.nvtx_open == 2:  # the draft range
                    nvtx.pop()
                    cyc.nvtx_open = 1
                nvtx.push("eagle_cycle.verify")
                cyc.nvtx_open += 1
            tw = worker._target_worker
            # (if someone else already shadows the method on this instance, leave it: no verify_fwd)
            if not cyc.broken and "forward_batch_generation" not in tw.__dict__:
                cached = self._target_shim
                if cached is None or cached[0] is not tw:
                    cached = self._target_shim = (tw, _target_forward_shim(self, tw))
                tw.forward_batch_generation = cached[1]
                target = tw
        except Exception as exc:
            self._fault("verify", exc, cyc)
        try:
            return original(worker, *args, **kwargs)
        finally:
            try:
                if target is not None:
                    del target.forward_batch_generation
                cyc.marks.mark("verify1")
                if nvtx is not None and cyc.nvtx_open > 1:
                    nvtx.pop()
                    cyc.nvtx_open -= 1
            except Exception as exc:
                self._fault("verify", exc, cyc)

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

    def around_resolve(self, original, processor, result, *args, **kwargs):
        """``_resolve_spec_v2_tokens``: after the ``copy_done`` sync; hands the cycle to the sink."""
        out = original(processor, result, *args, **kwargs)
        state = getattr(result, "__dict__", None)
        cyc = state.pop(RESULT_ATTR, None) if state is not None else None
        if cyc is None:
            return out
        try:
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

def _target_forward_shim(prof: CycleProfiler, target):
    """Shadows ``target.forward_batch_generation`` during a timed verify: marks the target verify forward.

    Looks the method up on the class at each call (class-level hooks still run); calls other than
    ``is_verify=True`` pass through.
    """

    def forward_batch_generation(*args, **kwargs):
        fn = type(target).forward_batch_generation
        cyc = prof._active
        if cyc is None or cyc.broken or not (kwargs.get("is_verify") or (len(args) > 3 and args[3] is True)):
            return fn(target, *args, **kwargs)
        marks = cyc.marks
        try:
            marks.mark("fwd0")
        except Exception as exc:
            prof._fault("verify_fwd", exc, cyc)
        try:
            return fn(target, *args, **kwargs)
        finally:
            try:
                marks.mark("fwd1")
            except Exception as exc:
                prof._fault("verify_fwd", exc, cyc)

    return forward_batch_generation


def _draft_step_shim(prof: CycleProfiler, runner):
    """Shadows ``draft_runner.forward`` during an eager ``draft_forward``: marks each draft forward."""

    def forward(*args, **kwargs):
        fn = type(runner).forward
        cyc = prof._active
        if cyc is None or cyc.broken or cyc.n_steps >= MAX_DRAFT_STEPS:
            return fn(runner, *args, **kwargs)
        keys = STEP_KEYS[cyc.n_steps]
        marks = cyc.marks
        try:
            marks.mark(keys[0])
            cyc.n_steps += 1
        except Exception as exc:
            prof._fault("draft step", exc, cyc)
        try:
            return fn(runner, *args, **kwargs)
        finally:
            try:
                marks.mark(keys[1])
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
        HookSpec(f"{EW}.EAGLEWorkerV2.verify", EW, p.around_verify, "timing"),
        HookSpec(f"{BRP}.SchedulerBatchResultProcessor._resolve_spec_v2_tokens", BRP, p.around_resolve, "timing"),
    ]
