#!/usr/bin/env python3
"""GPU check of the decode-cycle timer (torch only; SGLang is not needed and not imported).

Four checks on one CUDA device, in about 2-3 minutes:

1. **Known work.** A chain of bf16 matmuls of known size is timed by our CUDA-event backend
   (``sglang_eagle_cycle.timing.CudaTimer``) and by a synchronised wall clock; then the same chain
   is captured in a CUDA graph and the replay is timed both ways. The two must agree (within 5%
   + 0.05 ms), and ``capturing()`` must be True inside the capture.
2. **Overlap loop, no sync, on a non-default forward stream.** A stand-in EAGLE worker with
   upstream's method names (draft, verify with a target verify forward, on_publish, draft-extend;
   the draft eager or a CUDA-graph replay, the verify eager), each launch bracketed by a
   ``device_timer_ctx`` segment as in SGLang's runners and the draft launch preceded by a
   deliberate host sleep (:data:`PREP_SLEEP_MS`, the stand-in for host prep), runs cycles in the
   overlap scheduler's order (launch N+1, then resolve N after its ``copy_done`` event) with our
   real hooks (``sglang_eagle_cycle.patches.cycle.CycleProfiler``) installed. The whole loop,
   hooks included, runs under ``torch.cuda.stream(forward_stream)`` as SGLang's scheduler runs the
   forward, so the timer records on that stream (checked). Between cycles the scheduler's own host
   work (:func:`loop_idle_ms`, longer than a cycle's device work) lets the device drain, so each
   cycle starts on an idle device. It runs under ``torch.cuda.set_sync_debug_mode("error")`` with
   ``torch.cuda.synchronize``, ``Stream.synchronize`` and ``Event.synchronize`` wrapped to count
   calls (event syncs escape the debug mode). Our code must make none: the only syncs are the
   loop's own ``copy_done`` waits, the same number with and without the hooks; the profiler must
   report no fault; every cycle yields one record whose five parts sum to ``total_ms``; each
   device span matches its work measured alone within 5% + 0.05 ms (``draft_ms`` = the draft's
   graph replay or eager forwards, ``verify_fwd_ms`` = the target forward, ``extend_ms`` = the
   draft-extend work; each about 2 ms of matmuls); ``draft_prep_ms`` holds the host sleep while
   ``draft_ms`` excludes it; ``gap_ms`` is recorded for every cycle after the first and
   ``total_ms`` of one cycle plus ``gap_ms`` of the next equals the host period between their
   starts (the device is idle at each start).
3. **Host cost.** Microseconds per cycle our hooks add to the scheduler thread with real CUDA
   events (median of paired block differences), and the cost of the event operations alone.
4. **Capture safety, with a negative control** (:func:`capture_child`, each case in its own
   process: a broken capture can leave the CUDA context unusable). A :class:`CycleSink` holds a
   record; the main thread opens a *global*-mode graph capture (as SGLang's captures are) and,
   inside it, kicks the sink and waits until its thread has made the named CUDA call (or, paused,
   has put its read off). Calls: ``query`` (``CudaTimer.done`` on an event kept incomplete behind
   ``torch.cuda._sleep`` on another stream), ``elapsed_time`` (``CudaTimer.elapsed_ms`` on two
   completed events) and ``set_device`` (``CudaTimer.bind_reader``: ``torch.cuda.set_device`` on
   the sink thread, its first CUDA use). Modes: ``unguarded`` (no thread-local mode, no pause: the
   capture must fail for ``query``, else this check proves nothing; for the other calls a capture
   that survives is reported as a finding), ``thread_local`` (the sink's own
   ``enter_thread_local_capture_mode``; skipped with its reason where ``cuda.bindings`` is not
   installed), ``paused`` (no thread-local mode, the capture inside ``sink.capture_pause()``: it
   must succeed with at least one read deferred) and ``thread_local_ctypes`` (a proposed fallback,
   :func:`ctypes_thread_local_capture`; reported, not counted). A capture that succeeds is replayed
   and its output compared with eager execution.

Usage (on a GPU machine, from the repository root)::

    python test/gpu/check_cuda_timing.py            # prints a summary, then one JSON line
    python test/gpu/check_cuda_timing.py --capture-only   # only the capture-safety children (4.)
    python test/gpu/check_cuda_timing.py --smoke-cpu  # the same loop on CPU with the host timer
                                                      # (logic check only; no CUDA needed)
    python test/gpu/check_cuda_timing.py --capture-child unguarded query   # one capture case:
                                                      # one JSON line (what the parent runs)

Exit status 0 when every check passed (and, without CUDA and without ``--smoke-cpu``, after one
line saying it skipped), 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))  # sglang_eagle_cycle from this checkout; no SGLang import

import torch  # noqa: E402

from sglang_eagle_cycle.cycle import from_json  # noqa: E402
from sglang_eagle_cycle.patches.cycle import CycleProfiler  # noqa: E402
from sglang_eagle_cycle import sinks  # noqa: E402
from sglang_eagle_cycle.sinks import CycleSink, SinkConfig  # noqa: E402
from sglang_eagle_cycle.timing import CpuTimer, CudaTimer  # noqa: E402

RESULTS: list = []

#: Host time (ms) the stand-in draft spends before its launch: it must land in draft_prep_ms.
PREP_SLEEP_MS = 2.0
#: Each device span of the overlap loop must match its work measured alone within this fraction + ms.
SPAN_REL, SPAN_ABS_MS = 0.05, 0.05


def within(measured: float, known: float) -> bool:
    """``measured`` within :data:`SPAN_REL` of ``known`` plus :data:`SPAN_ABS_MS`."""
    return abs(measured - known) <= SPAN_REL * known + SPAN_ABS_MS


def loop_idle_ms(device_work_ms: float) -> float:
    """The scheduler's host time between two cycles in the check's loop (ms): 1.5 x a cycle's device
    work + 1 ms, so the device has drained when the next cycle starts (its ``total0`` completes when
    recorded, so ``draft_prep_ms`` holds the whole host sleep and ``total + gap`` is the host period)."""
    return 1.5 * device_work_ms + 1.0


def forward_stream_ctx(device: str, stream=None):
    """SGLang's scheduler runs the forward under ``torch.cuda.stream(forward_stream)``, a non-default stream."""
    if device != "cuda":
        return contextlib.nullcontext()
    return torch.cuda.stream(stream if stream is not None else torch.cuda.Stream())


def device_timer_ctx(timer, category):
    """SGLang's segment bracket (``sglang.srt.utils.device_timer``), as the runners call it: a no-op
    context without a device timer. The check installs the profiler's hook on this module's name."""
    return contextlib.nullcontext()


_SELF = sys.modules[__name__]


def _segment(category):
    return _SELF.device_timer_ctx(None, category)


def check(name: str, ok: bool, detail: str) -> bool:
    RESULTS.append((name, bool(ok), detail))
    print(f"[{'PASS' if ok else 'FAIL'}] {name}: {detail}", flush=True)
    return bool(ok)


# ---------------------------------------------------------------------------------------------
# 1. Known work
# ---------------------------------------------------------------------------------------------


def matmul_chain(n: int, k: int, device: str, dtype):
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=dtype, generator=g) / n ** 0.5
    bs = [torch.randn(n, n, device=device, dtype=dtype, generator=g) / n ** 0.5 for _ in range(k)]
    out = torch.empty_like(a)
    tmp = torch.empty_like(a)

    def run():
        x = a
        for i, b in enumerate(bs):
            dst = out if i % 2 == 0 else tmp
            torch.mm(x, b, out=dst)
            x = dst
        return x

    return run


def time_both(run, timer: CudaTimer, reps: int) -> tuple[float, float]:
    """(median event ms, median synchronised wall ms) of ``run``."""
    ev, wall = [], []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        a = timer.begin()
        run()
        b = timer.stamp()
        torch.cuda.synchronize()
        wall.append((time.perf_counter() - t0) * 1e3)
        assert timer.done(b)
        ev.append(timer.elapsed_ms(a, b))
        timer.release((a, b))
    return statistics.median(ev), statistics.median(wall)


def check_known_work(timer: CudaTimer, dtype) -> dict:
    n, k = 8192, 12
    run = matmul_chain(n, k, "cuda", dtype)
    for _ in range(3):
        run()
    ev, wall = time_both(run, timer, 10)
    tflops = 2 * n ** 3 * k / (ev / 1e3) / 1e12
    check("eager matmul chain", abs(ev - wall) <= 0.05 * wall + 0.05,
          f"{k} x mm {n}^2 {dtype}: events {ev:.3f} ms, synced wall {wall:.3f} ms ({tflops:.0f} TFLOP/s)")

    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        run()
    torch.cuda.current_stream().wait_stream(side)
    seen_capturing = []
    with torch.cuda.graph(graph):
        seen_capturing.append(timer.capturing())
        run()
    check("capture guard", seen_capturing == [True] and not timer.capturing(),
          f"capturing() inside torch.cuda.graph: {seen_capturing}, after: {timer.capturing()}")
    gev, gwall = time_both(graph.replay, timer, 10)
    check("CUDA-graph replay", abs(gev - gwall) <= 0.05 * gwall + 0.05,
          f"events {gev:.3f} ms, synced wall {gwall:.3f} ms (eager events {ev:.3f} ms)")
    return {"eager_event_ms": round(ev, 3), "eager_wall_ms": round(wall, 3), "graph_event_ms": round(gev, 3),
            "graph_wall_ms": round(gwall, 3), "tflops": round(tflops, 1)}


# ---------------------------------------------------------------------------------------------
# 2. A stand-in EAGLE worker driven in overlap order
# ---------------------------------------------------------------------------------------------


class Mode:
    def __init__(self, decode: bool):
        self.decode = decode

    def is_decode(self):
        return self.decode


class SimRunner:
    """Draft model runner: one small matmul per draft forward."""

    def __init__(self, work):
        self.work = work

    def forward(self, forward_batch):
        with _segment("decode"):   # the eager runner's bracket of one draft forward
            return self.work()


class SimDraftWorker:
    """Draft worker: ``steps - 1`` draft forwards of ``step_k`` matmuls (``n`` x ``n``), eager or
    replayed from one CUDA graph, and a draft-extend of ``extend_k`` matmuls (always eager here)."""

    def __init__(self, steps: int, device: str, dtype, graph: bool, n: int, step_k: int = 1, extend_k: int = 3):
        self.speculative_num_steps = steps
        self.prep_ms = PREP_SLEEP_MS
        self.draft_runner = SimRunner(matmul_chain(n, step_k, device, dtype))
        self.extend_work = matmul_chain(n, extend_k, device, dtype)
        self.graph = None
        if graph and device == "cuda":  # captured like upstream: draft_forward inside the capture, no cycle open
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                self.draft_forward(None)
            torch.cuda.current_stream().wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.draft_forward(None)

    def draft(self, batch):
        if batch is not None and self.prep_ms:
            time.sleep(self.prep_ms / 1e3)   # host prep before the launch: the device idles
        if self.graph is not None:
            with _segment("eagle_draft"):
                self.graph.replay()
        else:
            self.draft_forward(batch)
        return SimpleNamespace(is_verify_input=lambda: True)

    def draft_forward(self, forward_batch):
        for _ in range(self.speculative_num_steps - 1):
            self.draft_runner.forward(forward_batch)

    def _draft_extend_for_decode(self, batch, result, **kwargs):
        with _segment("eagle_draft_extend" if self.graph is not None else "extend"):
            self.extend_work()


class SimTargetWorker:
    def __init__(self, work):
        self.work = work

    def forward_batch_generation(self, batch=None, forward_batch=None, pp_proxy_tensors=None, is_verify=False):
        with _segment("target_verify"):
            return self.work()


class SimEagleWorker:
    """Upstream's decode branch in miniature: draft -> verify (target forward, sampling) -> on_publish -> extend."""

    def __init__(self, steps: int, bs: int, device: str, dtype, graph: bool, target_n: int, target_k: int,
                 draft_n: int | None = None, draft_k: int = 1, extend_k: int = 3):
        self.speculative_num_steps, self.topk, self.speculative_num_draft_tokens = steps, 1, steps + 1
        self.device, self.bs = device, bs
        draft_n = draft_n or (1024 if device == "cuda" else 16)
        self._draft_worker = SimDraftWorker(steps, device, dtype, graph, draft_n, draft_k, extend_k)
        self._target_worker = SimTargetWorker(matmul_chain(target_n, target_k, device, dtype))
        self.gen = torch.Generator(device=device).manual_seed(1)

    def forward_batch_generation(self, batch, on_publish=None, grammar_barrier=None, pp_proxy_tensors=None):
        self._draft_worker.draft(batch)
        result = self.verify(batch)
        if on_publish is not None:
            on_publish(result.new_seq_lens)
        self._draft_worker._draft_extend_for_decode(batch, result)
        return result

    def verify(self, batch, pp_proxy_tensors=None, grammar_barrier=None):
        self._target_worker.forward_batch_generation(batch=None, forward_batch=None, is_verify=True)
        accept = torch.randint(1, self.speculative_num_steps + 2, (self.bs,), device=self.device,
                               dtype=torch.int32, generator=self.gen)
        return SimpleNamespace(accept_lens=accept, new_seq_lens=accept + 10, can_run_cuda_graph=True,
                               num_correct_drafts_per_req_cpu=None, num_non_draft_tokens_per_req=1,
                               copy_done=None, host_accept=None)


class SimProcessor:
    def _resolve_spec_v2_tokens(self, result, batch):
        accepts = result.host_accept.tolist()  # already on the host: the copy_done sync happened
        result.num_correct_drafts_per_req_cpu = [a - 1 for a in accepts]
        return accepts


def install(profiler: CycleProfiler):
    """Our AROUND hooks on the stand-ins' methods (the wrapper HookRegistry builds); returns an undo."""
    pairs = [(SimEagleWorker, "forward_batch_generation", profiler.around_forward),
             (_SELF, "device_timer_ctx", profiler.around_device_timer_ctx),
             (SimProcessor, "_resolve_spec_v2_tokens", profiler.around_resolve)]
    saved = []
    for cls, name, hook in pairs:
        original = cls.__dict__[name]

        def wrapper(*args, _hook=hook, _original=original, **kwargs):
            return _hook(_original, *args, **kwargs)

        setattr(cls, name, wrapper)
        saved.append((cls, name, original))

    def undo():
        for cls, name, original in saved:
            setattr(cls, name, original)

    return undo


class TestProfiler(CycleProfiler):
    """The real profiler, told that the stand-in worker is supported and given its timer and sink."""

    def _supported(self, worker):  # the stand-in worker is not upstream's class
        return True

    def _setup(self, worker):  # timer and sink are given; reading SGLang's ranks would import SGLang
        self._set_up = True


class SyncCounter:
    """Wraps torch.cuda.synchronize, Stream.synchronize and Event.synchronize; counts calls by caller."""

    def __init__(self):
        self.total = 0
        self.ours = 0
        self._saved = []

    def __enter__(self):
        def wrap(owner, name):
            original = getattr(owner, name)

            def counted(*args, **kwargs):
                self.total += 1
                caller = sys._getframe(1).f_globals.get("__name__", "")
                if caller.startswith("sglang_eagle_cycle"):
                    self.ours += 1
                return original(*args, **kwargs)

            setattr(owner, name, counted)
            self._saved.append((owner, name, original))

        if torch.cuda.is_available():
            wrap(torch.cuda, "synchronize")
            wrap(torch.cuda.Stream, "synchronize")
            wrap(torch.cuda.Event, "synchronize")
        return self

    def __exit__(self, *exc):
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)


def run_overlap(worker, processor, cycles: int, device: str, block_times: list | None = None,
                idle_ms: float = 0.0, starts: list | None = None):
    """Launch N+1, then resolve N after its copy_done event (the scheduler's only sync).

    Runs on the current stream (the check puts a non-default forward stream there). ``idle_ms``: the
    scheduler's host work before each launch; ``starts``: gets the host time of each cycle's start.
    """
    copy_stream = torch.cuda.Stream() if device == "cuda" else None
    last = None
    out = []
    for i in range(cycles + 1):
        cur = None
        if idle_ms and i < cycles:
            time.sleep(idle_ms / 1e3)  # the scheduler's own host work: the device drains meanwhile
        t0 = time.perf_counter()
        if i < cycles:
            batch = SimpleNamespace(forward_mode=Mode(True), is_extend_in_batch=False, spec_info=None)
            if starts is not None:
                starts.append(time.perf_counter())
            result = worker.forward_batch_generation(batch, on_publish=lambda seq_lens: None)
            if device == "cuda":  # Scheduler._copy_result_to_cpu: a copy stream, pinned host, copy_done event
                copy_stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(copy_stream):
                    result.host_accept = torch.empty(result.accept_lens.shape, dtype=torch.int32, pin_memory=True)
                    result.host_accept.copy_(result.accept_lens, non_blocking=True)
                    result.copy_done = torch.cuda.Event()
                    result.copy_done.record()
            else:
                result.host_accept = result.accept_lens.clone()
            cur = (batch, result)
        t1 = time.perf_counter()
        if last is not None:
            if last[1].copy_done is not None:
                last[1].copy_done.synchronize()  # the scheduler's own sync (process_batch_result_decode)
            t2 = time.perf_counter()
            out.append(processor._resolve_spec_v2_tokens(last[1], last[0]))
            t3 = time.perf_counter()
            if block_times is not None:
                block_times.append((t1 - t0) + (t3 - t2))  # host time of launch + resolve, not the wait
        last = cur
    return out


def _run_checked(worker, proc, cycles: int, device: str, label: str, idle_ms: float = 0.0,
                 starts: list | None = None) -> SyncCounter:
    """One overlap run under sync debug mode "error", counting explicit syncs."""
    with SyncCounter() as counter:
        if device == "cuda":
            torch.cuda.set_sync_debug_mode("error")
        try:
            run_overlap(worker, proc, cycles, device, idle_ms=idle_ms, starts=starts)
        except RuntimeError as exc:  # an implicit sync outside our code (ours are caught and logged)
            check(f"{label}: sync debug mode", False, f"{type(exc).__name__}: {exc}")
        finally:
            if device == "cuda":
                torch.cuda.set_sync_debug_mode("default")
    return counter


def _gap_check(recs: list, starts: list) -> tuple[bool, str]:
    """``gap_ms`` on every cycle after the first; ``total(i-1) + gap(i)`` = host period between the starts."""
    missing = [r.cycle for r in recs[1:] if r.gap_ms is None]
    if not recs[1:] or missing:
        hint = ""
        if len(missing) == len(recs) - 1:
            # torch.cuda.current_stream() returns a new Stream object at each call
            hint = ("; every gap unlinked: does CycleProfiler.around_forward compare the previous "
                    "cycle's stream with `is`? torch.cuda.Stream objects are new per call (use ==)")
        return False, f"gap_ms missing on {len(missing)} of {len(recs) - 1} cycles{hint}"
    if len(starts) != len(recs):
        return False, f"{len(starts)} host starts for {len(recs)} records"
    errs, periods = [], []
    for i in range(1, len(recs)):
        period = (starts[i] - starts[i - 1]) * 1e3
        periods.append(period)
        errs.append(abs(recs[i - 1].total_ms + recs[i].gap_ms - period))
    med_err, med_period = statistics.median(errs), statistics.median(periods)
    gaps = statistics.median([r.gap_ms for r in recs[1:]])
    ok = med_err <= SPAN_REL * med_period + SPAN_ABS_MS
    return ok, (f"gap_ms on {len(recs) - 1} of {len(recs) - 1} cycles after the first (median {gaps:.3f} ms); "
                f"|total(i-1) + gap(i) - host period| median {med_err:.3f} ms of a {med_period:.3f} ms period")


def check_overlap(device: str, dtype, cycles: int, tmp: Path, log: logging.Logger) -> dict:
    summary = {}
    cuda = device == "cuda"
    # sizes: on CUDA each device span is about 2 ms of 4096^2 matmuls (draft 3 steps x 4, target 12, extend 12)
    n, draft_k, target_k, extend_k = (4096, 4, 12, 12) if cuda else (16, 1, 2, 3)
    fwd_stream = torch.cuda.Stream() if cuda else None
    if cuda:
        fwd_stream.wait_stream(torch.cuda.current_stream())
    for graph in (False, True):
        label = "graph" if graph else "eager"
        jsonl = tmp / f"cycles-{label}.jsonl"
        timer = CudaTimer() if cuda else CpuTimer()
        prof = TestProfiler(timer=timer, sink=CycleSink(SinkConfig(jsonl_path=str(jsonl)), log=log), log=log)
        proc = SimProcessor()
        with forward_stream_ctx(device, fwd_stream):  # everything below on the non-default forward stream
            undo = install(prof)  # the draft graph is captured with our hooks installed (outside any cycle)
            try:
                worker = SimEagleWorker(steps=4, bs=8, device=device, dtype=dtype, graph=graph, target_n=n,
                                        target_k=target_k, draft_n=n, draft_k=draft_k, extend_k=extend_k)
            finally:
                undo()
            if graph and cuda:
                check("graph: captured with hooks installed", worker._draft_worker.graph is not None,
                      "draft_forward ran inside torch.cuda.graph capture through our hook")
            dw = worker._draft_worker
            known = {}
            run_overlap(worker, proc, 5, device)  # warm-up, unhooked
            if cuda:  # each span's work measured alone, as the known-work check does, on the forward stream
                draft_run = dw.graph.replay if dw.graph is not None else (lambda: dw.draft_forward(None))
                known = {
                    "draft_ms": time_both(draft_run, CudaTimer(), 20)[0],
                    "verify_fwd_ms": time_both(lambda: worker._target_worker.forward_batch_generation(is_verify=True),
                                               CudaTimer(), 20)[0],
                    "extend_ms": time_both(lambda: dw._draft_extend_for_decode(None, None), CudaTimer(), 20)[0],
                }
            idle = loop_idle_ms(sum(known.values())) if cuda else 1.0
            plain = _run_checked(worker, proc, cycles, device, f"{label} without hooks", idle_ms=idle)
            starts: list = []
            undo = install(prof)
            try:
                hooked = _run_checked(worker, proc, cycles, device, f"{label} with hooks", idle_ms=idle,
                                      starts=starts)
            finally:
                undo()
            if cuda:
                fwd = torch.cuda.current_stream()
                check(f"{label}: timed on the forward stream",
                      fwd == fwd_stream and fwd != torch.cuda.default_stream() and timer.stream == fwd_stream,
                      f"loop ran under torch.cuda.stream({fwd_stream}); the timer's cycle stream {timer.stream}")
        if cuda:
            torch.cuda.current_stream().wait_stream(fwd_stream)
        prof.sink.close()
        recs = [from_json(line) for line in jsonl.read_text().splitlines()]
        check(f"{label}: no sync from our code", hooked.ours == 0 and hooked.total == plain.total,
              f"explicit syncs with hooks {hooked.total} (ours {hooked.ours}), without hooks {plain.total}; "
              f"sync debug mode 'error' raised nothing")
        check(f"{label}: no internal fault", prof.fault_count == 0, f"fault_count={prof.fault_count}")
        check(f"{label}: one record per cycle", [r.cycle for r in recs] == list(range(1, cycles + 1)),
              f"{len(recs)} records for {cycles} cycles")
        replayed = dw.graph is not None
        steps_ok = all((r.draft_step_ms is None) == replayed and (replayed or len(r.draft_step_ms) == 3)
                       for r in recs)
        check(f"{label}: draft_step_ms", steps_ok, "3 per cycle in eager mode (num_steps 4), none from the graph")
        if not recs:
            continue
        med = {k: statistics.median([getattr(r, k) for r in recs])
               for k in ("draft_prep_ms", "draft_ms", "verify_ms", "verify_fwd_ms", "extend_ms", "other_ms",
                         "total_ms")}
        sums = all(r.other_ms >= 0 and r.verify_fwd_ms <= r.verify_ms + 1e-3
                   and abs(r.draft_prep_ms + r.draft_ms + r.verify_ms + r.extend_ms + r.other_ms - r.total_ms) <= 1e-3
                   for r in recs)
        check(f"{label}: phases add up", sums, "medians " + "  ".join(f"{k}={v:.3f}" for k, v in med.items()))
        # draft_ms excludes the sleep: below the sleep on CPU (tiny work), below its work alone + half the sleep on CUDA
        draft_bound = known["draft_ms"] + 0.5 * PREP_SLEEP_MS if known else PREP_SLEEP_MS
        check(f"{label}: host sleep in draft_prep_ms, not in draft_ms",
              med["draft_prep_ms"] >= 0.95 * PREP_SLEEP_MS and med["draft_ms"] < draft_bound,
              f"slept {PREP_SLEEP_MS:.2f} ms before the draft launch: draft_prep {med['draft_prep_ms']:.3f} ms, "
              f"draft {med['draft_ms']:.3f} ms" + (f" (its work alone {known['draft_ms']:.3f} ms)" if known else ""))
        ok, detail = _gap_check(recs, starts)
        check(f"{label}: gap_ms links the cycles", ok, detail)
        what = {"draft_ms": "the draft graph replay" if replayed else "the eager draft forwards",
                "verify_fwd_ms": "the target verify forward", "extend_ms": "the draft-extend work"}
        for key, ms in known.items():
            check(f"{label}: {key} = known work", within(med[key], ms),
                  f"{key} {med[key]:.3f} ms vs {what[key]} alone {ms:.3f} ms "
                  f"(tolerance {SPAN_REL:.0%} + {SPAN_ABS_MS} ms)")
        if known:
            summary[f"{label}_known_ms"] = {k: round(v, 3) for k, v in known.items()}
            summary[f"{label}_loop_idle_ms"] = round(idle, 3)
        summary[f"{label}_median_ms"] = {k: round(v, 3) for k, v in med.items()}
        if recs[1:] and all(r.gap_ms is not None for r in recs[1:]):
            summary[f"{label}_median_ms"]["gap_ms"] = round(statistics.median([r.gap_ms for r in recs[1:]]), 3)
    return summary


# ---------------------------------------------------------------------------------------------
# 3. Host cost with real events
# ---------------------------------------------------------------------------------------------


def host_cost(device: str, dtype, tmp: Path, log: logging.Logger, rounds: int) -> dict:
    """Host us per cycle our hooks add to launch + resolve (median of paired blocks), and the event ops alone."""
    worker = SimEagleWorker(steps=4, bs=8, device=device, dtype=dtype, graph=device == "cuda",
                            target_n=1024 if device == "cuda" else 16, target_k=1)
    worker._draft_worker.prep_ms = 0.0   # the cost of our hooks, not of a sleep
    proc = SimProcessor()
    timer = CudaTimer() if device == "cuda" else CpuTimer()
    prof = TestProfiler(timer=timer, sink=CycleSink(SinkConfig(jsonl_path=str(tmp / "cost.jsonl")), log=log),
                        log=log)
    base, hooked = [], []
    for r in range(rounds + 2):
        for variant in (("base", "hooked") if r % 2 == 0 else ("hooked", "base")):
            times: list = []
            undo = install(prof) if variant == "hooked" else None
            try:
                run_overlap(worker, proc, 50, device, times)
            finally:
                if undo:
                    undo()
            if r >= 2:  # two warm-up rounds
                (base if variant == "base" else hooked).append(statistics.median(times) * 1e6)
    prof.sink.close()
    added = statistics.median([h - b for h, b in zip(hooked, base)])
    # the event operations of one cycle alone: begin + 9 stamps (graph mode), then done + 6 reads + release
    pairs = ((0, 7), (7, 8), (1, 4), (2, 3), (5, 9), (0, 6))  # draft_prep, draft, verify, verify_fwd, extend, total
    n, rec_s, read_s = 2000, 0.0, 0.0
    for _ in range(n):
        t0 = time.perf_counter()
        st = [timer.begin()]
        for _ in range(9):
            st.append(timer.stamp())
        rec_s += time.perf_counter() - t0
        if device == "cuda":
            torch.cuda.current_stream().synchronize()  # this microbenchmark's own wait, not our code's
        t0 = time.perf_counter()
        timer.done(st[-1])
        for a, b in pairs:
            timer.elapsed_ms(st[a], st[b])
        timer.release(st)
        read_s += time.perf_counter() - t0
    rec_us, read_us = rec_s / n * 1e6, read_s / n * 1e6
    print(f"[INFO] host cost: the hooks add {added:.1f} us per cycle to the scheduler thread's launch + resolve "
          f"(median of paired blocks, {rounds} rounds x 50 cycles; without hooks {statistics.median(base):.1f} us); "
          f"{timer.kind} event ops of one cycle: record {rec_us:.1f} us, read {read_us:.1f} us (sink thread)",
          flush=True)
    return {"host_added_us_per_cycle": round(added, 2), "host_base_us_per_cycle": round(statistics.median(base), 2),
            "event_record_us_per_cycle": round(rec_us, 2), "event_read_us_per_cycle": round(read_us, 2)}


# ---------------------------------------------------------------------------------------------
# 4. Capture safety: the sink thread's CUDA calls during another thread's global-mode capture
# ---------------------------------------------------------------------------------------------

#: How the sink thread stands towards the capture (module docstring, check 4).
CAPTURE_MODES = ("unguarded", "thread_local", "paused", "thread_local_ctypes")
#: The CUDA calls the sink thread makes: ``Event.query`` (``CudaTimer.done``), ``Event.elapsed_time``
#: (``CudaTimer.elapsed_ms``) and the device binding (``CudaTimer.bind_reader``: ``torch.cuda.set_device``).
CAPTURE_CALLS = ("query", "elapsed_time", "set_device")
#: Calls whose unguarded use must break a global capture: the negative control. An unguarded call
#: of the others that leaves the capture intact is reported as a finding.
MUST_BREAK = ("query",)
#: How long the event the ``query`` case polls stays incomplete (ms of ``torch.cuda._sleep`` on another stream).
INCOMPLETE_MS = 2000.0
#: Seconds one capture child may take (torch import, CUDA start, the case itself: about 10 s); with 4
#: at a time, three hung waves still end within 5 minutes.
CHILD_TIMEOUT_S = 90
#: What :func:`ctypes_thread_local_capture` did last (return code, previous mode, or why not).
_CTYPES_INFO: dict = {}


def ctypes_thread_local_capture() -> bool:
    """Proposed fallback of ``sinks.enter_thread_local_capture_mode`` where ``cuda-python`` is missing:
    the driver's ``cuThreadExchangeStreamCaptureMode`` through ctypes (``libcuda.so.1`` is loaded in
    every process that uses CUDA; the mode is per thread). Tried by the ``thread_local_ctypes`` case."""
    _CTYPES_INFO.clear()
    try:
        import ctypes

        from sglang_eagle_cycle.timing import cuda_usable

        if not cuda_usable() or getattr(torch.version, "hip", None):
            _CTYPES_INFO["why"] = "no CUDA device (or ROCm)"
            return False
        fn = ctypes.CDLL("libcuda.so.1").cuThreadExchangeStreamCaptureMode
        fn.argtypes = [ctypes.POINTER(ctypes.c_int)]
        fn.restype = ctypes.c_int
        mode = ctypes.c_int(1)  # CU_STREAM_CAPTURE_MODE_THREAD_LOCAL (0 global, 2 relaxed); in: new, out: previous
        rc = fn(ctypes.byref(mode))
        _CTYPES_INFO.update(rc=rc, previous_mode=mode.value)
        return rc == 0  # CUDA_SUCCESS
    except Exception as exc:
        _CTYPES_INFO["why"] = f"{type(exc).__name__}: {exc}"
        return False


def _err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".replace("\n", " ")[:400]


class _Probe:
    """A record for the sink (:class:`sinks.Pending`) whose ``ready()``, run by the sink thread under its
    read lock, makes the named CUDA call once :attr:`armed` (and the warm-up call once :attr:`warm`).
    It never becomes ready until :attr:`finished`, so the sink polls it again at every wake-up."""

    def __init__(self, call_fn, warm_fn=None):
        self.call_fn, self.warm_fn = call_fn, warm_fn
        self.warm, self.warmed = threading.Event(), threading.Event()
        self.armed, self.polled = threading.Event(), threading.Event()
        self.capturing = False  # set by the main thread while its capture is open
        self.finished = False
        self.polls = 0
        self.outcomes: list = []  # [capture open at the call, "returned" | "raised", text], the first few
        self.warm_error = None

    def ready(self) -> bool:
        if self.finished:
            return True
        if self.armed.is_set():
            during = self.capturing
            try:
                got = ["returned", repr(self.call_fn())]
            except Exception as exc:
                got = ["raised", _err(exc)]
            self.polls += 1
            if len(self.outcomes) < 6:
                self.outcomes.append([during] + got)
            self.polled.set()
        elif self.warm.is_set() and not self.warmed.is_set():
            try:
                if self.warm_fn is not None:
                    self.warm_fn()
            except Exception as exc:
                self.warm_error = _err(exc)
            self.warmed.set()
        return False

    def build(self):
        return None  # finished: nothing to write


def _wait_until(pred, sink: CycleSink, timeout: float) -> bool:
    """Kick the sink thread until ``pred()`` (pure Python: no CUDA call on this, the capturing, thread)."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            return False
        sink.kick()
        time.sleep(0.005)
    return True


def _sleep_cycles(ms: float) -> int:
    """``torch.cuda._sleep`` cycles for about ``ms`` milliseconds on this device (calibrated, with a sync)."""
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    n = 10_000_000
    torch.cuda._sleep(1000)
    a.record()
    torch.cuda._sleep(n)
    b.record()
    b.synchronize()
    return int(n / max(a.elapsed_time(b), 1e-3) * ms)


class _CudaCapture:
    """A global-mode CUDA graph capture on its own stream, with a little captured work before and after
    the sink thread's poll; :meth:`replay_ok` compares a replay with eager execution.

    ``torch.cuda.graph(g, capture_error_mode="global")`` would first synchronize the device, completing
    the event the ``query`` case keeps incomplete; ``capture_begin``/``capture_end`` make the same
    global-mode capture without that sync.
    """

    def __init__(self):
        self.stream = torch.cuda.Stream()
        self.x = torch.randn(256, 256, device="cuda") / 16
        torch.cuda.synchronize()
        with torch.cuda.stream(self.stream):  # run once before (cuBLAS handle and workspace of this stream)
            self.ref = (self.x @ self.x) @ self.x
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        self._ctx = None
        self.y = self.out = None

    def begin(self):
        self._ctx = torch.cuda.stream(self.stream)
        self._ctx.__enter__()
        try:
            self.graph.capture_begin(capture_error_mode="global")
        except BaseException:
            self._ctx.__exit__(None, None, None)
            raise

    def before(self):
        self.y = self.x @ self.x

    def after(self):
        self.out = self.y @ self.x

    def end(self):
        try:
            self.graph.capture_end()
        finally:
            self._ctx.__exit__(None, None, None)

    def replay_ok(self) -> bool:
        with torch.cuda.stream(self.stream):
            self.graph.replay()
        self.stream.synchronize()
        return bool(torch.allclose(self.out, self.ref, rtol=1e-3, atol=1e-3))


def run_case(mode: str, probe: _Probe, capture, log: logging.Logger, enter_thread_local=None,
             late_incomplete=None, progress=None) -> dict:
    """One capture case: a sink holding ``probe``, its thread in ``mode``; ``capture`` (begin, before,
    after, end, replay_ok) opened on this thread while the sink thread polls. Returns what happened.

    Args:
        enter_thread_local: what the sink thread calls at its start in the ``thread_local*`` modes
            (default: the sink's own); the other modes get a function that returns False, no CUDA call.
        late_incomplete: ``() -> bool``, whether the polled event is still incomplete (``query`` case).
        progress: ``(stage, dict)``, told what is known after the poll (``"polled"``, capture still open)
            and after the capture's end (``"ended"``), so that a process dying at the capture's end
            leaves a trace.
    """
    out: dict = {}
    saved = sinks._thread_local_capture
    if mode.startswith("thread_local"):
        sinks._thread_local_capture = enter_thread_local or saved
    else:  # the sink thread stays in the default, global, mode
        sinks._thread_local_capture = lambda: False
    sink = CycleSink(SinkConfig(log_line=False), log=log)
    try:
        sink.submit(probe)  # starts the sink thread: _thread_local_capture() first, as in the scheduler
        probe.warm.set()
        if not _wait_until(probe.warmed.is_set, sink, 10.0):
            out["error"] = "the sink thread never polled before the capture"
            return out
        out["thread_local_capture"] = sink.thread_local_capture
        if probe.warm_error:
            out["warm_error"] = probe.warm_error
        body_err = end_err = waited = None
        pause = sink.capture_pause() if mode == "paused" else contextlib.nullcontext()
        with pause:
            d0 = sink.deferred
            try:
                capture.begin()
            except Exception as exc:
                body_err = f"capture_begin: {_err(exc)}"
            else:
                probe.capturing = True
                try:
                    capture.before()  # captured before the sink thread's poll
                    probe.armed.set()
                    if mode == "paused":
                        waited = _wait_until(lambda: sink.deferred > d0, sink, 5.0)
                    else:
                        waited = _wait_until(probe.polled.is_set, sink, 10.0)
                    if progress is not None:
                        progress("polled", {"thread_local_capture": sink.thread_local_capture, "waited": waited,
                                            "polled_during_capture": any(o[0] for o in probe.outcomes),
                                            "outcomes": probe.outcomes[:4]})
                    capture.after()  # and after it
                except Exception as exc:
                    body_err = _err(exc)
                finally:
                    probe.capturing = False
                    try:
                        capture.end()
                    except Exception as exc:
                        end_err = _err(exc)
            out["deferred"] = sink.deferred - d0
        out["waited"] = waited
        out["capture_ok"] = body_err is None and end_err is None
        out["capture_error"] = body_err or end_err
        if body_err and end_err:
            out["capture_end_error"] = end_err
        out["polled_during_capture"] = any(o[0] for o in probe.outcomes)
        if progress is not None:
            progress("ended", dict(out, outcomes=probe.outcomes[:4]))
        if late_incomplete is not None:
            try:
                out["event_incomplete_after_capture"] = bool(late_incomplete())
            except Exception as exc:
                out["event_incomplete_after_capture"] = _err(exc)
        if mode == "paused":
            out["resumed_after"] = _wait_until(probe.polled.is_set, sink, 5.0)
        out["outcomes"] = probe.outcomes[:4]
        out["polls"] = probe.polls
        if out["capture_ok"]:
            try:
                out["replay_ok"] = bool(capture.replay_ok())
            except Exception as exc:
                out["replay_ok"] = False
                out["replay_error"] = _err(exc)
        return out
    finally:
        probe.finished = True
        sink.close(2.0)
        sinks._thread_local_capture = saved


def capture_child(mode: str, call: str) -> dict:
    """One capture case on CUDA, in its own process: the sink thread makes ``call`` while the main
    thread holds a global-mode capture open (:func:`run_case`); returns what happened (one JSON object)."""
    out: dict = {"mode": mode, "call": call}
    t0 = time.perf_counter()
    if not torch.cuda.is_available():
        out["skipped"] = "no CUDA device"
        return out
    if getattr(torch.version, "hip", None):
        out["skipped"] = "ROCm ignores the capture mode"
        return out
    enter = None
    if mode == "thread_local":  # the sink's own enter_thread_local_capture_mode
        try:
            from cuda.bindings import runtime  # noqa: F401  (what enter_thread_local_capture_mode uses)
        except Exception as exc:
            out["skipped"] = (f"cuda.bindings (cuda-python) is not installed ({_err(exc)}); the sink falls back "
                              "to capture_pause")
            return out
        enter = sinks.enter_thread_local_capture_mode
    elif mode == "thread_local_ctypes":
        enter = ctypes_thread_local_capture
    warnings: list = []
    log = logging.getLogger(f"check_cuda_timing.capture.{mode}.{call}")
    log.setLevel(logging.INFO)
    log.propagate = False
    log.addHandler(type("H", (logging.Handler,), {"emit": lambda self, r: warnings.append(r.getMessage())
                                                   if r.levelno >= logging.WARNING else None})())
    timer = CudaTimer()
    capture = _CudaCapture()
    work, side = torch.cuda.Stream(), torch.cuda.Stream()
    with torch.cuda.stream(work):  # two completed events for elapsed_time (begin() also fixes the timer's device)
        e0 = timer.begin()
        torch.mm(capture.x, capture.x)
        e1 = timer.stamp()
    torch.cuda.synchronize()
    late = None
    if call == "query":  # an event that stays incomplete for INCOMPLETE_MS: the sink keeps polling it
        cycles = _sleep_cycles(INCOMPLETE_MS)
        with torch.cuda.stream(side):
            torch.cuda._sleep(cycles)
            late = timer.begin()
    calls = {"query": lambda: timer.done(late),
             "elapsed_time": lambda: timer.elapsed_ms(e0, e1),
             "set_device": lambda: (timer.bind_reader(), getattr(timer._readers, "device", None))[1]}
    # query and elapsed_time: the sink thread binds its device before the capture, so the named call is
    # all it makes during it; set_device: the binding is the sink thread's first CUDA use, during the capture
    probe = _Probe(calls[call], warm_fn=None if call == "set_device" else timer.bind_reader)

    def progress(stage: str, known: dict):  # a trace in case the process dies at the capture's end
        print(json.dumps({"mode": mode, "call": call, "partial": stage, **known}), flush=True)

    out.update(run_case(mode, probe, capture, log, enter_thread_local=enter, progress=progress,
                        late_incomplete=(lambda: not late.query()) if late is not None else None))
    if mode == "thread_local_ctypes":
        out["ctypes"] = dict(_CTYPES_INFO)
    if warnings:
        out["sink_warnings"] = warnings[:3]
    out["seconds"] = round(time.perf_counter() - t0, 2)
    return out


def parse_child_output(mode: str, call: str, rc, stdout: str, stderr: str, timed_out: float | None = None) -> dict:
    """The child's result: its last JSON line naming ``mode`` and ``call``, else an ``error`` saying why not.

    A last line that is a progress trace (``partial``) means the child died before its result line:
    the trace is returned with an ``error``.
    """
    for line in reversed((stdout or "").splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict) and doc.get("mode") == mode and doc.get("call") == call:
            if doc.get("partial"):
                doc["error"] = (f"the child died after its {doc['partial']!r} stage ({_why(rc, timed_out)}); "
                                f"stderr: {_tail(stderr)}")
            elif timed_out is not None:
                doc["note"] = f"killed after {timed_out} s, after its result line"
            return doc
    return {"mode": mode, "call": call, "error": f"no result line ({_why(rc, timed_out)}); stderr: {_tail(stderr)}"}


def _why(rc, timed_out) -> str:
    return f"timed out after {timed_out} s" if timed_out is not None else f"exit status {rc}"


def _tail(stderr: str) -> str:
    return " | ".join([ln for ln in (stderr or "").strip().splitlines() if ln.strip()][-3:]) or "-"


def _text(data) -> str:
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else (data or "")


def run_capture_children(specs, jobs: int, timeout: float = CHILD_TIMEOUT_S) -> dict:
    """Run ``--capture-child MODE CALL`` for each ``(mode, call)``, ``jobs`` at a time; ``{(mode, call): result}``."""
    script = str(Path(__file__).resolve())

    def one(spec):
        mode, call = spec
        cmd = [sys.executable, script, "--capture-child", mode, call]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=str(ROOT))
            return spec, parse_child_output(mode, call, proc.returncode, proc.stdout, proc.stderr)
        except subprocess.TimeoutExpired as exc:
            return spec, parse_child_output(mode, call, None, _text(exc.stdout), _text(exc.stderr), timed_out=timeout)
        except OSError as exc:
            return spec, {"mode": mode, "call": call, "error": f"could not start: {_err(exc)}"}

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        return dict(pool.map(one, list(specs)))


def _first_outcome(r: dict, during: bool):
    return next((o for o in r.get("outcomes") or [] if bool(o[0]) == during), None)


def _guarded_verdict(r: dict, call: str) -> tuple[bool, str]:
    """A thread-local sink thread: its call during the capture succeeds and the capture survives."""
    o = _first_outcome(r, True)
    problems = []
    if r.get("thread_local_capture") is not True:
        problems.append(f"the sink thread is not in thread-local mode (thread_local_capture="
                        f"{r.get('thread_local_capture')}{', ' + str(r['ctypes']) if 'ctypes' in r else ''})")
    if o is None:
        problems.append(f"the sink thread made no {call} call while the capture was open")
    elif o[1] != "returned":
        problems.append(f"its {call} call during the capture raised {o[2]}")
    if not r.get("capture_ok"):
        problems.append(f"the capture failed: {r.get('capture_error')}")
    elif r.get("replay_ok") is not True:
        problems.append(f"the graph's replay differs from eager execution ({r.get('replay_error', 'values')})")
    if call == "query" and o is not None and o[1] == "returned" and o[2] != "False":
        problems.append(f"the polled event was already complete during the capture (query() {o[2]})")
    if call == "query" and r.get("event_incomplete_after_capture") is not True:
        problems.append("the polled event completed before the capture ended: the sleep was too short")
    if problems:
        return False, "; ".join(problems)
    return True, (f"{call} on the sink thread during the global capture returned {o[2]}; "
                  f"capture and replay fine ({r.get('polls')} polls)")


def _paused_verdict(r: dict, call: str) -> tuple[bool, str]:
    """capture_pause: the sink thread reads nothing while the capture is open, and resumes after it."""
    problems = []
    if r.get("thread_local_capture") is not False:
        problems.append(f"thread_local_capture={r.get('thread_local_capture')} "
                        "(expected False: the pause is then a no-op)")
    if not r.get("capture_ok"):
        problems.append(f"the capture failed: {r.get('capture_error')}")
    elif r.get("replay_ok") is not True:
        problems.append(f"the graph's replay differs from eager execution ({r.get('replay_error', 'values')})")
    if not (r.get("deferred") or 0) >= 1:
        problems.append(f"no read deferred during the capture (deferred={r.get('deferred')})")
    if r.get("polled_during_capture"):
        problems.append(f"the sink thread made its {call} call while the capture was open")
    if r.get("resumed_after") is not True:
        problems.append("the sink thread did not read again after the pause")
    if problems:
        return False, "; ".join(problems)
    return True, (f"{r['deferred']} read(s) deferred during the capture, none made; capture and replay fine; "
                  f"reads resumed after it")


def _unguarded_verdict(r: dict, call: str) -> tuple[str, str]:
    """``("broke" | "harmless" | "invalid", detail)`` for a sink thread in global mode, without a pause."""
    o = _first_outcome(r, True)
    if r.get("thread_local_capture") is not False:
        return "invalid", f"thread_local_capture={r.get('thread_local_capture')} (expected False)"
    if o is None:
        return "invalid", (f"the sink thread made no {call} call while the capture was open "
                           f"(waited={r.get('waited')}): this case proves nothing")
    said = f"the sink thread's {call} {'raised ' + o[2] if o[1] == 'raised' else 'returned ' + o[2]}"
    if not r.get("capture_ok"):
        return "broke", f"{said}; the capture failed: {r.get('capture_error')}"
    return "harmless", f"{said}; the global capture survived it (replay_ok={r.get('replay_ok')})"


def judge_capture(results: dict, calls=CAPTURE_CALLS) -> tuple[list, list, dict]:
    """Verdicts on the capture children's results ``{(mode, call): dict}`` for each of ``calls`` in every mode
    (a case without a result is a failure).

    Returns ``(checks, info, summary)``: checks are ``(name, ok, detail)``; info lines are findings
    (an unguarded call that leaves the capture intact), skips (``thread_local`` without cuda-python)
    and the ctypes proposal, none of which fail the run.
    """
    checks, info = [], []
    summary: dict = {"cases": {}, "harmless_unguarded": [], "skipped": {}, "proposal_ctypes": {}}
    keep = ("skipped", "error", "capture_ok", "capture_error", "polled_during_capture", "deferred",
            "thread_local_capture", "replay_ok", "resumed_after", "event_incomplete_after_capture", "ctypes",
            "seconds")
    for call in calls:
        for mode in CAPTURE_MODES:
            r = results.get((mode, call)) or {"mode": mode, "call": call, "error": "not run"}
            case = {k: r[k] for k in keep if k in r}
            o = _first_outcome(r, True)
            if o is not None:
                case["call_during_capture"] = o[1:]
            summary["cases"][f"{mode}/{call}"] = case
            if r.get("skipped") and mode in ("thread_local", "thread_local_ctypes"):
                info.append(f"capture {mode}/{call}: skipped: {r['skipped']}")
                (summary["skipped"] if mode == "thread_local" else summary["proposal_ctypes"])[call] = \
                    f"skipped: {r['skipped']}"
                continue
            bad = r.get("error") or (f"skipped: {r['skipped']}" if r.get("skipped") else None)
            if mode == "unguarded":
                name = f"capture unguarded/{call}: breaks a global capture (negative control)"
                if r.get("partial") == "polled" and r.get("polled_during_capture"):
                    # its call was made during the capture, then the process died before the capture ended
                    o = _first_outcome(r, True)
                    checks.append((name, True, f"the sink thread's {call} {o[1]} {o[2]}; then {r['error']}"))
                    continue
                if r.get("partial") == "ended":  # the capture's outcome is known; the process died after it
                    bad = None
                if bad:
                    checks.append((name, False, bad))
                    continue
                status, detail = _unguarded_verdict(r, call)
                if status == "harmless" and call not in MUST_BREAK:
                    summary["harmless_unguarded"].append(call)
                    info.append(f"capture unguarded/{call}: finding: {detail}")
                elif status == "harmless":
                    checks.append((name, False, f"{detail}: the negative control did not fail, so the "
                                                f"capture checks prove nothing"))
                else:
                    checks.append((name, status == "broke", detail))
            elif mode == "paused":
                name = f"capture paused/{call}: capture_pause defers the read"
                checks.append((name, False, bad) if bad else (name, *_paused_verdict(r, call)))
            elif mode == "thread_local":
                name = f"capture thread_local/{call}: the sink thread's call leaves the capture intact"
                checks.append((name, False, bad) if bad else (name, *_guarded_verdict(r, call)))
            else:  # the ctypes proposal: reported, not counted
                ok, detail = (False, bad) if bad else _guarded_verdict(r, call)
                summary["proposal_ctypes"][call] = ("works: " if ok else "fails: ") + detail
                info.append(f"capture {mode}/{call} (proposed fallback, not counted): "
                            f"{'works' if ok else 'FAILS'}: {detail}")
    return checks, info, summary


def check_capture(jobs: int) -> dict:
    """Run every capture case in its own process and record the verdicts."""
    t0 = time.perf_counter()
    specs = [(m, c) for c in CAPTURE_CALLS for m in CAPTURE_MODES]
    print(f"[INFO] capture safety: {len(specs)} child processes, {jobs} at a time", flush=True)
    checks, info, summary = judge_capture(run_capture_children(specs, jobs))
    for line in info:
        print(f"[INFO] {line}", flush=True)
    for name, ok, detail in checks:
        check(name, ok, detail)
    summary["seconds"] = round(time.perf_counter() - t0, 1)
    return summary


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--smoke-cpu", action="store_true", help="run the overlap loop on CPU (logic check, no CUDA)")
    p.add_argument("--cycles", type=int, default=40, help="cycles per overlap run (default 40)")
    p.add_argument("--rounds", type=int, default=20, help="rounds of the host-cost measurement (default 20)")
    p.add_argument("--capture-only", action="store_true", help="only the capture-safety children (check 4)")
    p.add_argument("--no-capture", action="store_true", help="skip the capture-safety children (check 4)")
    p.add_argument("--capture-jobs", type=int, default=4, help="capture children run at a time (default 4)")
    p.add_argument("--capture-child", nargs=2, metavar=("MODE", "CALL"),
                   help=f"run one capture case and print one JSON line: MODE in {', '.join(CAPTURE_MODES)}; "
                        f"CALL in {', '.join(CAPTURE_CALLS)}")
    args = p.parse_args(argv)
    if args.capture_child:
        mode, call = args.capture_child
        if mode not in CAPTURE_MODES or call not in CAPTURE_CALLS:
            p.error(f"--capture-child MODE CALL: MODE one of {', '.join(CAPTURE_MODES)}, "
                    f"CALL one of {', '.join(CAPTURE_CALLS)}")
        try:
            res = capture_child(mode, call)
        except Exception as exc:
            res = {"mode": mode, "call": call, "error": f"the child raised {_err(exc)}"}
        print(json.dumps(res), flush=True)
        if res.get("skipped") == "no CUDA device":
            return 0
        sys.stderr.flush()
        os._exit(0)  # no interpreter teardown: a broken capture can make CUDA's hang or abort
    t_start = time.perf_counter()
    log = logging.getLogger("sglang_eagle_cycle.gpu_check")
    log.setLevel(logging.INFO)
    log.propagate = False
    faults = []
    log.addHandler(type("H", (logging.Handler,), {"emit": lambda self, r: faults.append(r.getMessage())
                                                   if r.levelno >= logging.WARNING else None})())
    device = "cpu" if args.smoke_cpu else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("check_cuda_timing: skipped: no CUDA device (use --smoke-cpu for the logic check)")
        return 0
    dtype = torch.float32 if device == "cpu" else (torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16)
    info = {"torch": torch.__version__, "device": torch.cuda.get_device_name() if device == "cuda" else "cpu"}
    print(f"check_cuda_timing: torch {info['torch']} on {info['device']}", flush=True)
    summary = dict(info)
    if not args.capture_only:
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            if device == "cuda":
                timer = CudaTimer()
                summary["known_work"] = check_known_work(timer, dtype)
            summary["overlap"] = check_overlap(device, dtype, args.cycles, tmp, log)
            with forward_stream_ctx(device):
                summary["host_cost"] = host_cost(device, dtype, tmp, log, args.rounds)
        check("no warnings from the profiler", not faults, "; ".join(faults[:3]) or "none")
    if device == "cuda" and not args.no_capture:
        summary["capture"] = check_capture(args.capture_jobs)
    elif device == "cpu":
        print("[INFO] capture safety: needs CUDA (each case in a child process); not run with --smoke-cpu")
    failed = [name for name, ok, _ in RESULTS if not ok]
    summary["failed"] = failed
    summary["seconds"] = round(time.perf_counter() - t_start, 1)
    print(f"\n{len(RESULTS) - len(failed)}/{len(RESULTS)} checks passed in {summary['seconds']} s"
          + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    print(json.dumps(summary))
    return 0 if not failed else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
