#!/usr/bin/env python3
"""Host time our timing hooks add to one EAGLE-3 decode cycle (record + read + format + sink).

The cycle is SGLang 0.5.23's real ``EAGLEWorkerV2`` decode branch, run on the CPU with zero-cost
stand-ins below the hooked methods (``test/cycle_harness.py``), in overlap order (launch N+1, then
resolve N with the real ``_resolve_spec_v2_tokens``). The same cycles run, in one process, with and
without the hooks (SGLang's own AROUND wrapper), in interleaved blocks:

* ``baseline``: no hooks (the server without the plugin);
* ``hooked, nothing wanted``: hooks installed, INFO off and no JSONL (the pass-through cost);
* ``hooked, records dropped``: every cycle timed and handed over, then dropped (the scheduler-side
  cost of timing alone);
* ``hooked, default sinks``: the INFO line to a ``FileHandler`` and the JSONL file, formatted and
  written by the sink thread (the default): the acceptance figure;
* ``hooked, inline sinks``: the same sinks on the scheduler thread (why there is a sink thread);
* with ``--adaptive``: ``timing + SGLang's policy`` and ``timing + CostAwarePolicy``, the default
  sinks with SGLang's ``AdaptiveController`` fed by the real result processing (``on_verify_complete_cpu``)
  and the worker's ``activate_step_by_batch``, around each policy (candidates 1-5; switches counted,
  not applied); our policy also gets the cycle records; reported as the paired difference;
* ``default sinks + metrics``: the default sinks plus the Prometheus export (SGLang's
  ``--enable-metrics``), observed on the sink thread into a multiprocess directory, as in a server
  (``PROMETHEUS_MULTIPROC_DIR`` is set before ``prometheus_client`` is imported); its cost is
  reported against ``hooked, default sinks`` in the same round (export on against export off),
  with a 95% interval for the median.

Statistic: per block, the scheduler thread's CPU time (``time.thread_time``) per cycle. Each round
runs every variant once (rotating order); ``added`` is the **median over rounds of the paired
difference** (variant - baseline), which cancels slow drifts caused by other processes on the
machine; ``added p10`` is the difference of the 10th-percentile blocks (the quietest moments).
CPU time rather than wall time because other processes share the machine; wall time is printed
alongside. The sink thread's CPU per cycle (process CPU minus scheduler-thread CPU, its backlog
flushed after each block) is reported separately, with its wake-ups and how many of them found
the scheduler running Python.

The rounds are split over ``--processes`` fresh processes run one after the other (default 3) and
pooled, as ``pyperf`` does: the figures of one process shift by several microseconds with its hash
seed, its memory layout and the VM's moment; the per-process figures are printed too.

On a GPU server the scheduler blocks in ``copy_done.synchronize()`` for most of each cycle, which
is when the sink thread writes; ``--gpu-wait-us`` simulates that wait (a spin with the GIL
released, like CUDA's default event sync; default 1 ms), excluded from the figures. With
``--gpu-wait-us 0`` (a scheduler that never waits) the sink thread writes only cycles overdue
by half a second, which a 100-cycle block never has: that mode measures the scheduler side alone.

Usage::

    python benchmarks/bench_hook_overhead.py              # about 2 minutes on 2 cores (3 processes)
    python benchmarks/bench_hook_overhead.py --rounds 100 --bs 8 --eager --gpu-wait-us 2000

Prints a table, then one JSON line:
``{"overhead_us_per_cycle": ..., "baseline_us_per_cycle": ..., ...}``.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import pkgutil
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import fields, replace
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
for extra in (ROOT / "python", ROOT / "test"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))


#: Hooks that serve only the device-span stamps (left out with them: the "no spans" variants).
SPAN_ONLY_HOOKS = ("device_timer_ctx", "resolve_seq_lens_cpu")


class Installed:
    """Our hook specs wrapped onto the upstream methods with SGLang's AROUND wrapper; removable."""

    def __init__(self, specs):
        from sglang.srt.plugins.hook_registry import HookType, _wrap_fn

        self._specs, self._wrap, self._around = specs, _wrap_fn, HookType.AROUND
        self._saved = []

    def __enter__(self):
        for spec in self._specs:
            owner_path, name = spec.target.rsplit(".", 1)
            owner = pkgutil.resolve_name(owner_path)
            original = owner.__dict__[name]
            setattr(owner, name, self._wrap(original, spec.hook, self._around))
            self._saved.append((owner, name, original))
        return self

    def __exit__(self, *exc):
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved.clear()


def _gil_free_spin(us: float):
    """A callable that keeps this core busy for about ``us`` microseconds with the GIL released.

    CUDA's default ``cudaEventSynchronize`` spin-waits; ``hashlib.pbkdf2_hmac`` is a C loop that
    releases the GIL, so the sink thread can run meanwhile, as it does on a server.
    """
    import hashlib

    if us <= 0:
        return lambda: None
    n = 2000
    t0 = time.perf_counter()
    for _ in range(5):
        hashlib.pbkdf2_hmac("sha256", b"eagle", b"cycle", n)
    per_iter_us = (time.perf_counter() - t0) * 1e6 / (5 * n)
    iters = max(1, round(us / per_iter_us))
    return lambda: hashlib.pbkdf2_hmac("sha256", b"eagle", b"cycle", iters)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=120, help="rounds; each runs every variant once (default 120)")
    p.add_argument("--block", type=int, default=100, help="decode cycles per timed block (default 100)")
    p.add_argument("--gpu-wait-us", type=float, default=1000.0,
                   help="scheduler spin-waiting in copy_done.synchronize() per cycle, GIL released "
                        "(default 1000; 0 = CPU-bound worst case)")
    p.add_argument("--bs", type=int, default=1, help="requests per batch (default 1)")
    p.add_argument("--steps", type=int, default=3, help="--speculative-num-steps (default 3)")
    p.add_argument("--eager", action="store_true", help="eager draft (per-step marks), as --disable-cuda-graph")
    p.add_argument("--warmup", type=int, default=2, help="untimed rounds first, in each process (default 2)")
    p.add_argument("--processes", type=int, default=3,
                   help="run the rounds in this many fresh processes one after the other, and pool them "
                        "(default 3; each process has its own hash seed and memory layout)")
    p.add_argument("--load", type=int, default=0, metavar="N",
                   help="the sink thread's priority instead: run N busy-loop processes (nice 0) beside the "
                        "scheduler and compare the default sinks with the sink thread at nice 19 and at nice 0 "
                        "(per-cycle wall-clock p50/p99/max); 0 = the cost table (default)")
    p.add_argument("--export-only", action="store_true",
                   help="only baseline, default sinks, and default sinks + metrics: the Prometheus export's "
                        "price in more rounds for the same time")
    p.add_argument("--adaptive", action="store_true",
                   help="the adaptive policies instead: timing with SGLang's AdaptiveSpeculativeParams against "
                        "timing with CostAwarePolicy (candidates 1-5; switches are counted, not applied)")
    p.add_argument("--stamp-rounds", type=int, default=300,
                   help="rounds of the paired pricing of the device-span stamps (default 300; 0 = skip)")
    p.add_argument("--stamp-block", type=int, default=1000, help="cycles per block of that pricing (default 1000)")
    p.add_argument("--raw-out", help=argparse.SUPPRESS)  # a worker process: write its raw series here
    args = p.parse_args(argv)
    if min(args.rounds, args.block, args.bs, args.processes, args.stamp_block) < 1 or min(
            args.steps, args.gpu_wait_us, args.load) < 0 or args.stamp_rounds not in range(0, 10**6) or (
            0 < args.stamp_rounds < 6):
        p.error("--rounds, --block, --bs, --processes and --stamp-block must be >= 1, --steps, --gpu-wait-us and "
                "--load >= 0, --stamp-rounds 0 or >= 6")
    return args


def _paired(series: dict, name: str, base: str = "baseline") -> float:
    """Median over rounds of ``series[name] - series[base]`` (same round)."""
    return statistics.median([a - b for a, b in zip(series[name], series[base])])


def median_ci(values, confidence: float = 0.95) -> tuple[float, float, float]:
    """``(median, low, high)``: the median of ``values`` with its distribution-free interval.

    The interval is ``[x_(k), x_(n+1-k)]`` of the sorted values, with ``k`` the largest rank whose
    two-sided binomial tail ``2 P(Bin(n, 1/2) < k)`` stays within ``1 - confidence`` (the sign-test
    interval for a median, e.g. Hollander & Wolfe, *Nonparametric Statistical Methods*, 3.6).
    Needs no assumption about the distribution, only independent pairs. Raises ``ValueError``
    with fewer than 6 values (no 95% interval exists then).
    """
    import math

    xs = sorted(values)
    n = len(xs)
    if n < 6:
        raise ValueError(f"a 95% interval for a median needs at least 6 values, got {n}")
    alpha, tail, k = 1.0 - confidence, 0.0, 0
    while True:  # tail = P(Bin(n, 1/2) <= k - 1) for the next k
        nxt = tail + math.comb(n, k) / 2 ** n
        if 2 * nxt > alpha:
            break
        tail, k = nxt, k + 1
    k = max(k, 1)
    return statistics.median(xs), xs[k - 1], xs[n - k]


def _percentile(xs, q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


class _Load:
    """``n`` busy-loop processes at nice 0 (the CPU load beside the scheduler) while the block runs."""

    def __init__(self, n: int):
        self.n, self.procs = n, []

    def __enter__(self):
        import subprocess

        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(self.n)]
        return self

    def __exit__(self, *exc):
        for proc in self.procs:
            proc.kill()
            proc.wait()


def _in_processes(args, argv) -> dict:
    """Run the rounds in ``args.processes`` child processes, one after the other; pool their raw series."""
    import subprocess

    argv = list(sys.argv[1:] if argv is None else argv)
    per = -(-args.rounds // args.processes)
    pooled: dict = {}
    with tempfile.TemporaryDirectory(prefix="eagle-cycle-bench-") as tmp:
        for i in range(args.processes):
            out = Path(tmp) / f"raw{i}.json"
            cmd = [sys.executable, str(Path(__file__).resolve()), *argv,
                   "--processes", "1", "--rounds", str(per), "--raw-out", str(out)]
            code = subprocess.run(cmd).returncode
            if code != 0:
                raise SystemExit(f"bench_hook_overhead: worker process {i + 1} of {args.processes} failed "
                                 f"(exit code {code}); its output is above")
            raw = json.loads(out.read_text())
            cpu = raw["cpu_us"]
            pooled.setdefault("per_process", []).append(
                {name: _paired(cpu, name) if name != "baseline" else statistics.median(cpu[name]) for name in cpu})
            pooled.setdefault("per_process_wakes", []).append(raw.pop("wakes"))
            for key, series in raw.items():
                if isinstance(series, dict):
                    for name, values in series.items():
                        pooled.setdefault(key, {}).setdefault(name, []).extend(values)
                else:
                    pooled.setdefault(key, []).append(series)
    return pooled


def measure(args) -> dict:
    """Run the rounds in this process; returns the raw per-block series of every variant."""
    import warnings

    warnings.filterwarnings("ignore")
    logging.getLogger("sglang").setLevel(logging.ERROR)
    tmp = Path(tempfile.mkdtemp(prefix="eagle-cycle-bench-"))
    export = "prometheus_client" not in sys.modules  # else it would not write to the multiprocess directory
    if export:
        (tmp / "prometheus").mkdir()
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(tmp / "prometheus")
    from cycle_harness import Costs, Harness

    from sglang_eagle_cycle.patches.cycle import CycleProfiler, hook_specs
    from sglang_eagle_cycle.runtime import Ranks
    from sglang_eagle_cycle.sinks import CycleSink, SinkConfig
    from sglang_eagle_cycle.timing import CpuTimer

    log = logging.getLogger("sglang_eagle_cycle")
    handler = logging.FileHandler(tmp / "server.log")
    handler.setFormatter(logging.Formatter("[%(asctime)s TP0] %(message)s"))  # SGLang's format
    log.addHandler(handler)
    log.propagate = False

    def profiler(background: bool, jsonl: bool, spans: bool = True, nice: Optional[int] = None,
                 metrics: bool = False) -> CycleProfiler:
        env = {"SGLANG_EAGLE_CYCLE_JSONL": str(tmp / f"cycles{len(made)}.jsonl")} if jsonl else {}
        made.append(env)
        cfg = SinkConfig.from_env(env, Ranks(), background=background)
        if metrics:  # what SinkConfig.from_env gives under SGLang's --enable-metrics
            cfg = replace(cfg, metrics_labels=(("model_name", "bench"), ("engine_type", "unified"), ("tp_rank", "0"),
                                               ("pp_rank", "0"), ("moe_ep_rank", "0")))
        sink = CycleSink(cfg)
        if metrics and sink.metrics is None:
            raise SystemExit("bench_hook_overhead: the Prometheus export could not start (is prometheus_client "
                             "installed?)")
        if nice is not None:
            sink.nice = nice
        return CycleProfiler(timer=CpuTimer(), sink=sink, log=log, device_spans=spans)

    made: list = []

    class Dropped(CycleSink):
        """Takes every cycle and writes nothing: what the scheduler thread pays to time a cycle."""

        active = True

        def submit(self, item):
            self.written += 1

    def dropped(spans: bool) -> CycleProfiler:
        return CycleProfiler(timer=CpuTimer(), sink=Dropped(SinkConfig(log_line=False)), log=log, device_spans=spans)

    def specs(prof) -> list:
        """The hooks; without the device-span stamps also without the hooks that only serve them."""
        out = hook_specs(prof)
        if not prof._spans:
            out = [x for x in out if x.target.rsplit(".", 1)[-1] not in SPAN_ONLY_HOOKS]
        return out

    if args.load:  # the sink thread's priority, under CPU load
        variants = {
            "baseline": None,
            "default sinks, nice 19": (profiler(True, jsonl=True, nice=19), logging.INFO),
            "default sinks, nice 0": (profiler(True, jsonl=True, nice=0), logging.INFO),
        }
    else:
        variants = {
            "baseline": None,
            "hooked, nothing wanted": (profiler(True, jsonl=False), logging.WARNING),
            "hooked, records dropped": (dropped(True), logging.WARNING),
            "hooked, default sinks": (profiler(True, jsonl=True), logging.INFO),
            "hooked, inline sinks": (profiler(False, jsonl=True), logging.INFO),
        }
        if export:
            variants[METRICS_VARIANT] = (profiler(True, jsonl=True, metrics=True), logging.INFO)
        if args.adaptive:
            variants = {"baseline": None, "hooked, default sinks": variants["hooked, default sinks"],
                        SGLANG_POLICY: (profiler(True, jsonl=True), logging.INFO),
                        COST_POLICY: (profiler(True, jsonl=True), logging.INFO)}
        if args.export_only:
            if not export:
                raise SystemExit("bench_hook_overhead: --export-only needs prometheus_client not imported before "
                                 "the benchmark starts")
            variants = {k: v for k, v in variants.items()
                        if k in ("baseline", "hooked, default sinks", METRICS_VARIANT)}
    zero = Costs(**{f.name: 0.0 for f in fields(Costs)})
    cpu_us: dict = {name: [] for name in variants}
    wall_us: dict = {name: [] for name in variants}
    cycle_wall_us: dict = {name: [] for name in variants}  # each cycle's scheduler wall time (--load)
    sink_cpu: dict = {name: [] for name in variants}
    kept_up: dict = {name: [] for name in variants}
    names = list(variants)

    with Harness(steps=args.steps, eager=args.eager, costs=zero) as h:
        spin = _gil_free_spin(args.gpu_wait_us)
        controllers = _controllers(args, tmp) if args.adaptive else {}

        waited = [0.0, 0.0]  # scheduler-thread CPU and wall time spent in the simulated sync
        per_cycle: list = []  # (wall at the read point, wall spent in the sync) per cycle

        def copy_done_sync(batch, result):
            t, w = time.thread_time(), time.perf_counter()
            spin()  # the GPU finishing this batch: a spin-wait with the GIL released, like cudaEventSynchronize
            w1 = time.perf_counter()
            waited[0] += time.thread_time() - t
            waited[1] += w1 - w
            per_cycle.append((w1, w1 - w))

        def block(name):
            spec = variants[name]
            batches = [h.new_batch(args.bs) for _ in range(args.block)]
            ctx = Installed(specs(spec[0])) if spec else None
            if spec:
                log.setLevel(spec[1])
                ctx.__enter__()
            if args.adaptive:
                from sglang_eagle_cycle.sinks import RECORD_CONSUMERS

                ctl = controllers.get(name)
                h.worker.adaptive_controller = ctl
                RECORD_CONSUMERS[:] = [ctl.params] if name == COST_POLICY else []
            waited[:] = [0.0, 0.0]
            per_cycle.clear()
            written0 = spec[0].sink.written if spec else 0
            p0, t0, w0 = time.process_time(), time.thread_time(), time.perf_counter()
            h.run_overlap(batches, on_resolve=copy_done_sync)
            w1, t1 = time.perf_counter(), time.thread_time()
            n = args.block
            if spec:
                in_time = (spec[0].sink.written - written0) / n  # written while the block ran
                ctx.__exit__()
                spec[0].sink.flush(30.0)
                kept_up[name].append(in_time)
            p1 = time.process_time()
            # each cycle's wall time from one read point to the next, less its simulated GPU wait
            cycle_wall_us[name].extend((b[0] - a[0] - b[1]) * 1e6 for a, b in zip(per_cycle, per_cycle[1:]))
            sched_cpu = (t1 - t0) - waited[0]  # the scheduler's own work, without the GPU wait
            return sched_cpu / n * 1e6, ((w1 - w0) - waited[1]) / n * 1e6, ((p1 - p0) - (t1 - t0)) / n * 1e6

        gc.collect()
        gc.freeze()  # SGLang's import-time objects out of the collector's way, as a long-running server has them
        with _Load(args.load):
            for _ in range(args.warmup):
                for name in names:
                    block(name)
            for name in names:
                cycle_wall_us[name].clear()
            for r in range(args.rounds):
                order = names[r % len(names):] + names[: r % len(names)]
                for name in order:
                    cpu, wall, other = block(name)
                    cpu_us[name].append(cpu)
                    wall_us[name].append(wall)
                    sink_cpu[name].append(other)
    sink = variants["default sinks, nice 19" if args.load else "hooked, default sinks"][0].sink
    wakes = {"wakeups": sink.wakeups, "wakeups_busy": sink.wakeups_busy, "overruns": sink.overruns,
             "kicks": sink.kicks}
    for spec in variants.values():
        if spec:
            spec[0].sink.close()
    lines = (tmp / "server.log").read_text().splitlines()
    jsonl = [x for f in tmp.glob("cycles*.jsonl") for x in f.read_text().splitlines()]
    handler.close()
    log.removeHandler(handler)
    shutil.rmtree(tmp, ignore_errors=True)
    if args.adaptive:
        from sglang_eagle_cycle.sinks import RECORD_CONSUMERS

        RECORD_CONSUMERS.clear()
        h.worker.adaptive_controller = None
    observed = variants[METRICS_VARIANT][0].sink.metrics.observed if METRICS_VARIANT in variants else 0
    return {"cpu_us": cpu_us, "wall_us": wall_us, "sink_cpu": sink_cpu, "kept_up": kept_up,
            "cycle_wall_us": cycle_wall_us, "lines": len(lines), "jsonl": len(jsonl), "wakes": wakes,
            "observed": observed}


#: Scheduler-thread budget for the device-span stamps per cycle (us; issue 12).
SPAN_STAMPS_BUDGET_US = 3.0
#: The variant with the Prometheus export on, and its scheduler-thread budget per cycle against the
#: same sinks without it (us; issue 16).
METRICS_VARIANT = "default sinks + metrics"
METRICS_BUDGET_US = 2.0


SGLANG_POLICY = "timing + SGLang's policy"
COST_POLICY = "timing + CostAwarePolicy"


def _controllers(args, tmp: Path) -> dict:
    """SGLang's ``AdaptiveController`` around each policy, candidates 1-5 for every batch size; a
    switch is counted, not applied (the harness runs one depth)."""
    from sglang.srt.speculative.adaptive_runtime_state import AdaptiveController
    from sglang.srt.speculative.adaptive_spec_params import AdaptiveSpeculativeParams

    from types import SimpleNamespace

    from sglang_eagle_cycle.adaptive import CostAwarePolicy

    cfg = tmp / "adaptive.json"
    cfg.write_text(json.dumps({"1": {"candidate_steps": [1, 2, 3, 4, 5]}}))

    class Counting(AdaptiveController):
        switches = 0

        def _activate(self, speculative_num_steps: int) -> None:
            self.switches += 1

    worker = SimpleNamespace(speculative_num_steps=args.steps)   # the depth the harness runs
    return {SGLANG_POLICY: Counting(worker, AdaptiveSpeculativeParams(args.steps, str(cfg))),
            COST_POLICY: Counting(worker, CostAwarePolicy(args.steps, str(cfg)))}


def metrics_verdict(on_minus_off: list) -> dict:
    """Export on against export off: the median of the per-round paired differences (us per cycle)
    with its 95% interval (:func:`median_ci`), and whether it is within :data:`METRICS_BUDGET_US`.

    ``verdict``: ``within`` (the interval's upper end is within the budget), ``over`` (its lower end
    is above it), else ``undecided`` (more rounds would decide).
    """
    med, lo, hi = median_ci(on_minus_off)
    verdict = "within" if hi <= METRICS_BUDGET_US else "over" if lo > METRICS_BUDGET_US else "undecided"
    return {"added_us": round(med, 2), "ci95_us": [round(lo, 2), round(hi, 2)], "rounds": len(on_minus_off),
            "budget_us": METRICS_BUDGET_US, "verdict": verdict}


def price_span_stamps(rounds: int, block: int) -> dict:
    """Scheduler-thread CPU the device-span stamps add to one decode cycle, with its 95% interval.

    The decode loop of SGLang's real cycle is too noisy on this VM (its torch ops vary by tens of
    microseconds per cycle) to resolve a few microseconds, so this prices the stamps on a cycle of
    the same shape with nothing inside: a worker whose ``forward_batch_generation`` brackets a draft
    segment, calls ``verify`` (one target segment inside) and brackets a draft-extend segment,
    launched after a ``resolve_seq_lens_cpu`` and read at a ``_resolve_spec_v2_tokens`` in overlap
    order. Upstream's own ``device_timer_ctx`` and SGLang's AROUND wrapper (``_wrap_fn``) are used,
    so the calls our hooks make are the ones a server makes. Three variants run in each round, in
    rotating order, in this process: no hooks; every hook with the device-span stamps; the same
    without them (``device_spans=False`` and no ``device_timer_ctx`` / ``resolve_seq_lens_cpu``
    hooks: only the cycle, ``verify`` and the read point, i.e. ``total_ms`` and ``verify_ms``).
    Records are dropped at the hand-over (the scheduler's side alone). The figure is the median
    over rounds of the paired difference of the last two (``time.thread_time`` per cycle, us),
    with the sign-test interval of :func:`median_ci`. Host-clock stamps: on a GPU each stamp is a
    CUDA event record instead (``test/gpu/check_cuda_timing.py`` prices those).
    """
    from types import SimpleNamespace

    import sglang.srt.utils.device_timer as dt_mod
    from sglang.srt.plugins.hook_registry import HookType, _wrap_fn

    from sglang_eagle_cycle.patches.cycle import CycleProfiler
    from sglang_eagle_cycle.sinks import CycleSink, SinkConfig
    from sglang_eagle_cycle.timing import CpuTimer

    class Profiler(CycleProfiler):
        def _supported(self, worker):  # the stand-in worker is not upstream's class
            return True

    class Dropped(CycleSink):
        active = True

        def submit(self, item):
            self.written += 1

    class Worker:
        speculative_num_steps, topk, speculative_num_draft_tokens = 3, 1, 4
        dtc = None

        def forward_batch_generation(self, batch, on_publish=None):
            with self.dtc(None, "eagle_draft"):
                pass
            self.verify(batch)
            on_publish()
            with self.dtc(None, "eagle_draft_extend"):
                pass
            return SimpleNamespace(can_run_cuda_graph=True, num_correct_drafts_per_req_cpu=[2],
                                   num_non_draft_tokens_per_req=1)

        def verify(self, batch):
            with self.dtc(None, "target_verify"):
                pass

    def resolve_seq_lens_cpu(future_map, batch):
        return None

    def resolve(processor, result, batch):
        return None

    mode = SimpleNamespace(is_decode=lambda: True)
    log = logging.getLogger("sglang_eagle_cycle.bench")
    log.propagate = False
    variants = {}
    def passthrough(original, *args, **kwargs):
        return original(*args, **kwargs)

    for name, spans in (("no hooks", None), ("with span stamps", True), ("without them", False),
                        ("without them, wrappers only", "wrappers")):
        w = Worker()
        if spans == "wrappers":  # SGLang's AROUND wrappers on the two extra targets, doing nothing
            w.dtc = _wrap_fn(dt_mod.device_timer_ctx, passthrough, HookType.AROUND)
            fwd, seq, res = variants["without them"][1], _wrap_fn(resolve_seq_lens_cpu, passthrough,
                                                                   HookType.AROUND), variants["without them"][3]
        elif spans is None:
            w.dtc, fwd, seq, res = dt_mod.device_timer_ctx, Worker.forward_batch_generation, resolve_seq_lens_cpu, resolve
        else:
            prof = Profiler(timer=CpuTimer(), sink=Dropped(SinkConfig(log_line=False)), log=log, device_spans=spans)
            prof._set_up = True
            fwd = _wrap_fn(Worker.forward_batch_generation, prof.around_forward, HookType.AROUND)
            res = _wrap_fn(resolve, prof.around_resolve, HookType.AROUND)
            w.dtc = (_wrap_fn(dt_mod.device_timer_ctx, prof.around_device_timer_ctx, HookType.AROUND)
                     if spans else dt_mod.device_timer_ctx)
            seq = _wrap_fn(resolve_seq_lens_cpu, prof.around_seq_lens, HookType.AROUND) if spans else resolve_seq_lens_cpu
        variants[name] = (w, fwd, seq, res)

    def run(name: str) -> float:
        w, fwd, seq, res = variants[name]
        batch = SimpleNamespace(forward_mode=mode, is_extend_in_batch=False)
        publish = int  # a no-op callable
        last = None
        t0 = time.thread_time()
        for _ in range(block):
            seq(None, batch)
            out = fwd(w, batch, on_publish=publish)
            if last is not None:
                res(None, last, batch)
            last = out
        res(None, last, batch)
        return (time.thread_time() - t0) / block * 1e6

    names = list(variants)
    for _ in range(3):  # warm-up
        for name in names:
            run(name)
    series: dict = {name: [] for name in names}
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            series[name].append(run(name))
    diffs = [a - b for a, b in zip(series["with span stamps"], series["without them"])]
    med, lo, hi = median_ci(diffs)
    hooks_med = _paired(series, "without them", "no hooks")
    wrappers = median_ci([a - b for a, b in zip(series["without them, wrappers only"], series["without them"])])
    verdict = ("within" if hi <= SPAN_STAMPS_BUDGET_US else
               "over" if lo > SPAN_STAMPS_BUDGET_US else "undecided against")
    text = (f"device-span stamps: +{med:.2f} us per cycle on the scheduler thread (95% interval {lo:.2f} .. "
            f"{hi:.2f}; median over {rounds} paired rounds x {block} cycles of 'with span stamps' minus "
            f"'without them', a cycle of SGLang's shape with nothing inside; the hooks without the stamps "
            f"cost {hooks_med:.2f} us over no hooks there, the empty cycle "
            f"{statistics.median(series['no hooks']):.2f} us): {verdict} the {SPAN_STAMPS_BUDGET_US:.0f} us budget.\n"
            f"  of which SGLang's AROUND wrappers alone, on device_timer_ctx (3 calls a cycle in graph mode) and "
            f"resolve_seq_lens_cpu, passing straight through: +{wrappers[0]:.2f} us ({wrappers[1]:.2f} .. "
            f"{wrappers[2]:.2f}); the stamps and their bookkeeping the rest")
    return {"added_us": round(med, 2), "ci95_us": [round(lo, 2), round(hi, 2)], "rounds": rounds, "block": block,
            "hooks_without_stamps_us": round(hooks_med, 2), "wrappers_only_us": round(wrappers[0], 2),
            "wrappers_only_ci95_us": [round(wrappers[1], 2), round(wrappers[2], 2)], "budget_us": SPAN_STAMPS_BUDGET_US, "verdict": verdict,
            "text": text}


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.processes > 1:
        raw = _in_processes(args, argv)
        lines_written, jsonl_written = sum(raw["lines"]), sum(raw["jsonl"])
    else:
        raw = measure(args)
        if args.raw_out:
            Path(args.raw_out).write_text(json.dumps(raw))
            return 0
        lines_written, jsonl_written = raw["lines"], raw["jsonl"]
    if args.load:
        return _report_load(args, raw)
    cpu_us, wall_us, sink_cpu, kept_up = raw["cpu_us"], raw["wall_us"], raw["sink_cpu"], raw["kept_up"]
    names = list(cpu_us)
    rounds = len(cpu_us["baseline"])
    per_process = raw.get("per_process")

    def low(series, name):  # difference of the 10th percentiles: the quietest blocks of each variant
        def p10(xs):
            return sorted(xs)[len(xs) // 10]
        return p10(series[name]) - p10(series["baseline"])

    rows = [(name, statistics.median(cpu_us[name]), low(cpu_us, name), _paired(cpu_us, name),
             statistics.median(wall_us[name]), _paired(wall_us, name), statistics.median(sink_cpu[name]))
            for name in names]
    cycles = args.block * rounds
    print(f"EAGLE-3 decode cycle, SGLang 0.5.23 upstream code on CPU with zero-cost stand-ins: bs={args.bs} "
          f"steps={args.steps} {'eager' if args.eager else 'graph'}, simulated GPU wait {args.gpu_wait_us:.0f} us; "
          f"{rounds} rounds x {args.block} cycles per variant in {args.processes} process(es)")
    print(f"{'variant':<26} {'cpu us/cycle':>12} {'added cpu':>10} {'added p10':>10} {'wall us/cycle':>14} "
          f"{'added wall':>11} {'sink thread cpu':>16}")
    for name, med, lowd, added, wall, wadded, scpu in rows:
        print(f"{name:<26} {med:>12.1f} {added:>10.1f} {lowd:>10.1f} {wall:>14.1f} {wadded:>11.1f} {scpu:>16.1f}")
    print("(us per decode cycle, medians over rounds; 'added' = median over rounds of (variant - baseline) in the "
          "same round; 'added p10' = difference of the 10th-percentile blocks, the quietest moments)")
    print(f"written: {lines_written} log lines, {jsonl_written} JSONL records; the sink thread "
          f"wrote {100 * statistics.median(kept_up['hooked, default sinks']):.0f}% of a block's cycles before the "
          f"block ended (median; the rest in the flush after it)")
    if per_process:
        print("per process (baseline cpu us/cycle, then added cpu): "
              + "; ".join(", ".join(f"{x:.1f}" for x in p.values()) for p in per_process))
    for w in raw.get("per_process_wakes") or [raw["wakes"]]:
        print(f"sink thread: {w['wakeups']} wake-ups, {w['wakeups_busy']} of them while the scheduler ran Python, "
              f"{w['overruns']} device waits outlasted, woken by the scheduler {w['kicks']} times")
    policy = None
    if COST_POLICY in cpu_us and len(cpu_us[COST_POLICY]) >= 6:
        policy = metrics_verdict([a - b for a, b in zip(cpu_us[COST_POLICY], cpu_us[SGLANG_POLICY])])
        print(f"CostAwarePolicy against SGLang's AdaptiveSpeculativeParams (both with timing and the default sinks, "
              f"same round): {policy['added_us']:+.2f} us per cycle on the scheduler thread (95% CI "
              f"{policy['ci95_us'][0]:+.2f} to {policy['ci95_us'][1]:+.2f}, {policy['rounds']} paired rounds; "
              f"budget {METRICS_BUDGET_US:g} us: {policy['verdict']})")
    export = None
    if METRICS_VARIANT in cpu_us and len(cpu_us[METRICS_VARIANT]) >= 6:
        export = metrics_verdict([a - b for a, b in zip(cpu_us[METRICS_VARIANT], cpu_us["hooked, default sinks"])])
        observed = sum(raw["observed"]) if isinstance(raw["observed"], list) else raw["observed"]
        print(f"Prometheus export (default sinks + metrics against default sinks, same round): "
              f"{export['added_us']:+.2f} us per cycle on the scheduler thread (95% CI {export['ci95_us'][0]:+.2f} "
              f"to {export['ci95_us'][1]:+.2f}, {export['rounds']} paired rounds; budget {METRICS_BUDGET_US:g} us: "
              f"{export['verdict']}); {observed} cycles observed on the sink thread")
    spans = raw.get("stamps") or (price_span_stamps(args.stamp_rounds, args.stamp_block)
                                  if args.stamp_rounds else None)
    if spans:
        print(spans["text"])
    row = {name: r for name, *r in rows}
    print(json.dumps({
        "overhead_us_per_cycle": round(row["hooked, default sinks"][2], 2),
        "baseline_us_per_cycle": round(row["baseline"][0], 2),
        "overhead_p10_us_per_cycle": round(row["hooked, default sinks"][1], 2),
        "overhead_wall_us_per_cycle": round(row["hooked, default sinks"][4], 2),
        "sink_thread_cpu_us_per_cycle": round(row["hooked, default sinks"][5], 2),
        "sink_kept_up": round(statistics.median(kept_up["hooked, default sinks"]), 3),
        "inline_overhead_us_per_cycle": round(row["hooked, inline sinks"][2], 2) if "hooked, inline sinks" in row
        else None,
        "passthrough_overhead_us_per_cycle": round(row["hooked, nothing wanted"][2], 2)
        if "hooked, nothing wanted" in row else None,
        "span_stamps": {k: v for k, v in spans.items() if k != "text"} if spans else None,
        "metrics_export": export,
        "adaptive_policy": policy,
        "statistic": "scheduler-thread CPU per cycle, median over rounds of (variant - baseline)",
        "bs": args.bs, "steps": args.steps, "eager": args.eager, "gpu_wait_us": args.gpu_wait_us,
        "cycles_per_variant": cycles, "processes": args.processes,
        "overhead_per_process_us": [round(p["hooked, default sinks"], 2) for p in per_process] if per_process else None,
    }))
    return 0


def _report_load(args, raw) -> int:
    """The sink thread's priority under CPU load: per-cycle wall-clock of the scheduler, nice 19 vs nice 0."""
    walls, cpu_us = raw["cycle_wall_us"], raw["cpu_us"]
    rounds = len(cpu_us["baseline"])
    print(f"sink thread priority under load: {args.load} busy-loop process(es) at nice 0 beside the scheduler "
          f"({os.cpu_count()} CPUs); bs={args.bs} steps={args.steps} {'eager' if args.eager else 'graph'}, "
          f"simulated GPU wait {args.gpu_wait_us:.0f} us; {rounds} rounds x {args.block} cycles per variant in "
          f"{args.processes} process(es)")
    print(f"{'variant':<24} {'cycles':>7} {'p50 us':>8} {'p99 us':>8} {'p99.9 us':>9} {'max us':>9} "
          f"{'>20 ms':>7} {'added cpu us':>13}")
    out = {}
    for name, xs in walls.items():
        p50, p99, p999, mx = _percentile(xs, 0.5), _percentile(xs, 0.99), _percentile(xs, 0.999), max(xs)
        stalls = sum(x > 20000 for x in xs)
        added = _paired(cpu_us, name) if name != "baseline" else 0.0
        print(f"{name:<24} {len(xs):>7} {p50:>8.1f} {p99:>8.1f} {p999:>9.1f} {mx:>9.1f} {stalls:>7} {added:>13.1f}")
        out[name] = {"cycles": len(xs), "p50_us": round(p50, 1), "p99_us": round(p99, 1), "p999_us": round(p999, 1),
                     "max_us": round(mx, 1), "over_20ms": stalls, "added_cpu_us": round(added, 2)}
    print("(each cycle's scheduler wall time from one read point to the next, less its simulated GPU wait; "
          "the sink thread writes the INFO line and the JSONL file)")
    print(json.dumps({"load_processes": args.load, "cpus": os.cpu_count(), "gpu_wait_us": args.gpu_wait_us,
                      "rounds": rounds, "block": args.block, "variants": out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
