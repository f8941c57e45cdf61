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
* ``hooked, inline sinks``: the same sinks on the scheduler thread (why there is a sink thread).

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
import pkgutil
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import fields
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for extra in (ROOT / "python", ROOT / "test"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))


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
    p.add_argument("--raw-out", help=argparse.SUPPRESS)  # a worker process: write its raw series here
    args = p.parse_args(argv)
    if min(args.rounds, args.block, args.bs, args.processes) < 1 or args.steps < 0 or args.gpu_wait_us < 0:
        p.error("--rounds, --block, --bs and --processes must be >= 1, --steps and --gpu-wait-us >= 0")
    return args


def _paired(series: dict, name: str) -> float:
    """Median over rounds of ``series[name] - series["baseline"]`` (same round)."""
    return statistics.median([a - b for a, b in zip(series[name], series["baseline"])])


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
    from cycle_harness import Costs, Harness

    from sglang_eagle_cycle.patches.cycle import CycleProfiler, hook_specs
    from sglang_eagle_cycle.runtime import Ranks
    from sglang_eagle_cycle.sinks import CycleSink, SinkConfig
    from sglang_eagle_cycle.timing import CpuTimer

    tmp = Path(tempfile.mkdtemp(prefix="eagle-cycle-bench-"))
    log = logging.getLogger("sglang_eagle_cycle")
    handler = logging.FileHandler(tmp / "server.log")
    handler.setFormatter(logging.Formatter("[%(asctime)s TP0] %(message)s"))  # SGLang's format
    log.addHandler(handler)
    log.propagate = False

    def profiler(background: bool, jsonl: bool) -> CycleProfiler:
        env = {"SGLANG_EAGLE_CYCLE_JSONL": str(tmp / "cycles.jsonl")} if jsonl else {}
        cfg = SinkConfig.from_env(env, Ranks(), background=background)
        return CycleProfiler(timer=CpuTimer(), sink=CycleSink(cfg), log=log)

    class Dropped(CycleSink):
        """Takes every cycle and writes nothing: what the scheduler thread pays to time a cycle."""

        active = True

        def submit(self, item):
            self.written += 1

    dropped = CycleProfiler(timer=CpuTimer(), sink=Dropped(SinkConfig(log_line=False)), log=log)

    variants = {
        "baseline": None,
        "hooked, nothing wanted": (profiler(True, jsonl=False), logging.WARNING),
        "hooked, records dropped": (dropped, logging.WARNING),
        "hooked, default sinks": (profiler(True, jsonl=True), logging.INFO),
        "hooked, inline sinks": (profiler(False, jsonl=True), logging.INFO),
    }
    zero = Costs(**{f.name: 0.0 for f in fields(Costs)})
    cpu_us: dict = {name: [] for name in variants}
    wall_us: dict = {name: [] for name in variants}
    sink_cpu: dict = {name: [] for name in variants}
    kept_up: dict = {name: [] for name in variants}
    names = list(variants)

    with Harness(steps=args.steps, eager=args.eager, costs=zero) as h:
        spin = _gil_free_spin(args.gpu_wait_us)

        waited = [0.0, 0.0]  # scheduler-thread CPU and wall time spent in the simulated sync

        def copy_done_sync(batch, result):
            t, w = time.thread_time(), time.perf_counter()
            spin()  # the GPU finishing this batch: a spin-wait with the GIL released, like cudaEventSynchronize
            waited[0] += time.thread_time() - t
            waited[1] += time.perf_counter() - w

        def block(name):
            spec = variants[name]
            batches = [h.new_batch(args.bs) for _ in range(args.block)]
            ctx = Installed(hook_specs(spec[0])) if spec else None
            if spec:
                log.setLevel(spec[1])
                ctx.__enter__()
            waited[:] = [0.0, 0.0]
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
            sched_cpu = (t1 - t0) - waited[0]  # the scheduler's own work, without the GPU wait
            return sched_cpu / n * 1e6, ((w1 - w0) - waited[1]) / n * 1e6, ((p1 - p0) - (t1 - t0)) / n * 1e6

        gc.collect()
        gc.freeze()  # SGLang's import-time objects out of the collector's way, as a long-running server has them
        for _ in range(args.warmup):
            for name in names:
                block(name)
        for r in range(args.rounds):
            order = names[r % len(names):] + names[: r % len(names)]
            for name in order:
                cpu, wall, other = block(name)
                cpu_us[name].append(cpu)
                wall_us[name].append(wall)
                sink_cpu[name].append(other)
    sink = variants["hooked, default sinks"][0].sink
    wakes = {"wakeups": sink.wakeups, "wakeups_busy": sink.wakeups_busy, "overruns": sink.overruns,
             "kicks": sink.kicks}
    for spec in variants.values():
        if spec:
            spec[0].sink.close()
    lines = (tmp / "server.log").read_text().splitlines()
    jsonl = (tmp / "cycles.jsonl").read_text().splitlines()
    handler.close()
    log.removeHandler(handler)
    shutil.rmtree(tmp, ignore_errors=True)
    return {"cpu_us": cpu_us, "wall_us": wall_us, "sink_cpu": sink_cpu, "kept_up": kept_up,
            "lines": len(lines), "jsonl": len(jsonl), "wakes": wakes}


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
    print(f"{'variant':<24} {'cpu us/cycle':>12} {'added cpu':>10} {'added p10':>10} {'wall us/cycle':>14} "
          f"{'added wall':>11} {'sink thread cpu':>16}")
    for name, med, lowd, added, wall, wadded, scpu in rows:
        print(f"{name:<24} {med:>12.1f} {added:>10.1f} {lowd:>10.1f} {wall:>14.1f} {wadded:>11.1f} {scpu:>16.1f}")
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
    row = {name: r for name, *r in rows}
    print(json.dumps({
        "overhead_us_per_cycle": round(row["hooked, default sinks"][2], 2),
        "baseline_us_per_cycle": round(row["baseline"][0], 2),
        "overhead_p10_us_per_cycle": round(row["hooked, default sinks"][1], 2),
        "overhead_wall_us_per_cycle": round(row["hooked, default sinks"][4], 2),
        "sink_thread_cpu_us_per_cycle": round(row["hooked, default sinks"][5], 2),
        "sink_kept_up": round(statistics.median(kept_up["hooked, default sinks"]), 3),
        "inline_overhead_us_per_cycle": round(row["hooked, inline sinks"][2], 2),
        "passthrough_overhead_us_per_cycle": round(row["hooked, nothing wanted"][2], 2),
        "statistic": "scheduler-thread CPU per cycle, median over rounds of (variant - baseline)",
        "bs": args.bs, "steps": args.steps, "eager": args.eager, "gpu_wait_us": args.gpu_wait_us,
        "cycles_per_variant": cycles, "processes": args.processes,
        "overhead_per_process_us": [round(p["hooked, default sinks"], 2) for p in per_process] if per_process else None,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
