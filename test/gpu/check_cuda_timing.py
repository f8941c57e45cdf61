#!/usr/bin/env python3
"""GPU check of the decode-cycle timer (torch only; SGLang is not needed and not imported).

Three checks on one CUDA device, well under 3 minutes:

1. **Known work.** A chain of bf16 matmuls of known size is timed by our CUDA-event backend
   (``sglang_eagle_cycle.timing.CudaTimer``) and by a synchronised wall clock; then the same chain
   is captured in a CUDA graph and the replay is timed both ways. The two must agree (within 5%
   + 0.05 ms), and ``capturing()`` must be True inside the capture.
2. **Overlap loop, no sync.** A stand-in EAGLE worker with upstream's method names (draft, verify
   with a target verify forward, on_publish, draft-extend; eager or from a CUDA graph), each
   launch bracketed by a ``device_timer_ctx`` segment as in SGLang's runners and the draft launch
   preceded by a deliberate host sleep (:data:`PREP_SLEEP_MS`, the stand-in for host prep), runs
   cycles in the overlap scheduler's order (launch N+1, then resolve N after its ``copy_done``
   event) with our real hooks (``sglang_eagle_cycle.patches.cycle.CycleProfiler``) installed,
   under ``torch.cuda.set_sync_debug_mode("error")`` and with ``torch.cuda.synchronize``,
   ``Stream.synchronize`` and ``Event.synchronize`` wrapped to count calls (event syncs escape
   the debug mode). Our code must make none: the only syncs are the loop's own ``copy_done``
   waits, the same number with and without the hooks; the profiler must report no fault; every
   cycle yields one record whose ``verify_fwd_ms`` matches the target work's known time, whose
   ``draft_prep_ms`` holds the host sleep while ``draft_ms`` excludes it, and whose five parts
   sum to ``total_ms``.
3. **Host cost.** Microseconds per cycle our hooks add to the scheduler thread with real CUDA
   events (median of paired block differences), and the cost of the event operations alone.

Usage (on a GPU machine, from the repository root)::

    python test/gpu/check_cuda_timing.py            # prints a summary, then one JSON line
    python test/gpu/check_cuda_timing.py --smoke-cpu  # the same loop on CPU with the host timer
                                                      # (logic check only; no CUDA needed)

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
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))  # sglang_eagle_cycle from this checkout; no SGLang import

import torch  # noqa: E402

from sglang_eagle_cycle.cycle import from_json  # noqa: E402
from sglang_eagle_cycle.patches.cycle import CycleProfiler  # noqa: E402
from sglang_eagle_cycle.sinks import CycleSink, SinkConfig  # noqa: E402
from sglang_eagle_cycle.timing import CpuTimer, CudaTimer  # noqa: E402

RESULTS: list = []

#: Host time (ms) the stand-in draft spends before its launch: it must land in draft_prep_ms.
PREP_SLEEP_MS = 2.0


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
    def __init__(self, steps: int, device: str, dtype, graph: bool):
        n = 1024 if device == "cuda" else 16
        self.speculative_num_steps = steps
        self.prep_ms = PREP_SLEEP_MS
        self.draft_runner = SimRunner(matmul_chain(n, 1, device, dtype))
        self.extend_work = matmul_chain(n, 3, device, dtype)
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

    def __init__(self, steps: int, bs: int, device: str, dtype, graph: bool, target_n: int, target_k: int):
        self.speculative_num_steps, self.topk, self.speculative_num_draft_tokens = steps, 1, steps + 1
        self.device, self.bs = device, bs
        self._draft_worker = SimDraftWorker(steps, device, dtype, graph)
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


def run_overlap(worker, processor, cycles: int, device: str, block_times: list | None = None):
    """Launch N+1, then resolve N after its copy_done event (the scheduler's only sync)."""
    copy_stream = torch.cuda.Stream() if device == "cuda" else None
    last = None
    out = []
    for i in range(cycles + 1):
        cur = None
        t0 = time.perf_counter()
        if i < cycles:
            batch = SimpleNamespace(forward_mode=Mode(True), is_extend_in_batch=False, spec_info=None)
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


def _run_checked(worker, proc, cycles: int, device: str, label: str) -> SyncCounter:
    """One overlap run under sync debug mode "error", counting explicit syncs."""
    with SyncCounter() as counter:
        if device == "cuda":
            torch.cuda.set_sync_debug_mode("error")
        try:
            run_overlap(worker, proc, cycles, device)
        except RuntimeError as exc:  # an implicit sync outside our code (ours are caught and logged)
            check(f"{label}: sync debug mode", False, f"{type(exc).__name__}: {exc}")
        finally:
            if device == "cuda":
                torch.cuda.set_sync_debug_mode("default")
    return counter


def check_overlap(device: str, dtype, cycles: int, tmp: Path, log: logging.Logger) -> dict:
    summary = {}
    target_n, target_k = (4096, 8) if device == "cuda" else (16, 2)
    for graph in (False, True):
        label = "graph" if graph else "eager"
        jsonl = tmp / f"cycles-{label}.jsonl"
        timer = CudaTimer() if device == "cuda" else CpuTimer()
        prof = TestProfiler(timer=timer, sink=CycleSink(SinkConfig(jsonl_path=str(jsonl)), log=log), log=log)
        proc = SimProcessor()
        undo = install(prof)  # the draft graph is captured with our hooks installed (outside any cycle)
        try:
            worker = SimEagleWorker(steps=4, bs=8, device=device, dtype=dtype, graph=graph, target_n=target_n,
                                    target_k=target_k)
        finally:
            undo()
        if graph and device == "cuda":
            check("graph: captured with hooks installed", worker._draft_worker.graph is not None,
                  "draft_forward ran inside torch.cuda.graph capture through our hook")
        known = None
        if device == "cuda":  # the target verify forward's known time, measured alone
            known, _ = time_both(lambda: worker._target_worker.forward_batch_generation(is_verify=True),
                                 CudaTimer(), 20)
        run_overlap(worker, proc, 5, device)  # warm-up, unhooked
        plain = _run_checked(worker, proc, cycles, device, f"{label} without hooks")
        undo = install(prof)
        try:
            hooked = _run_checked(worker, proc, cycles, device, f"{label} with hooks")
        finally:
            undo()
        prof.sink.close()
        recs = [from_json(line) for line in jsonl.read_text().splitlines()]
        check(f"{label}: no sync from our code", hooked.ours == 0 and hooked.total == plain.total,
              f"explicit syncs with hooks {hooked.total} (ours {hooked.ours}), without hooks {plain.total}; "
              f"sync debug mode 'error' raised nothing")
        check(f"{label}: no internal fault", prof.fault_count == 0, f"fault_count={prof.fault_count}")
        check(f"{label}: one record per cycle", [r.cycle for r in recs] == list(range(1, cycles + 1)),
              f"{len(recs)} records for {cycles} cycles")
        replayed = worker._draft_worker.graph is not None
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
        check(f"{label}: host sleep in draft_prep_ms, not in draft_ms",
              med["draft_prep_ms"] >= 0.95 * PREP_SLEEP_MS and med["draft_ms"] < PREP_SLEEP_MS,
              f"slept {PREP_SLEEP_MS:.2f} ms before the draft launch: draft_prep {med['draft_prep_ms']:.3f} ms, "
              f"draft {med['draft_ms']:.3f} ms")
        if known is not None:
            check(f"{label}: verify_fwd = known target work", abs(med["verify_fwd_ms"] - known) <= 0.1 * known + 0.05,
                  f"verify_fwd {med['verify_fwd_ms']:.3f} ms vs the target chain alone {known:.3f} ms")
            summary[f"{label}_known_target_ms"] = round(known, 3)
        summary[f"{label}_median_ms"] = {k: round(v, 3) for k, v in med.items()}
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--smoke-cpu", action="store_true", help="run the overlap loop on CPU (logic check, no CUDA)")
    p.add_argument("--cycles", type=int, default=40, help="cycles per overlap run (default 40)")
    p.add_argument("--rounds", type=int, default=20, help="rounds of the host-cost measurement (default 20)")
    args = p.parse_args(argv)
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
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if device == "cuda":
            timer = CudaTimer()
            summary["known_work"] = check_known_work(timer, dtype)
        summary["overlap"] = check_overlap(device, dtype, args.cycles, tmp, log)
        summary["host_cost"] = host_cost(device, dtype, tmp, log, args.rounds)
    check("no warnings from the profiler", not faults, "; ".join(faults[:3]) or "none")
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
