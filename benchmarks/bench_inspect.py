#!/usr/bin/env python3
"""Lines per second of the whole ``eagle-cycle inspect LOG --json`` path on a million per-cycle lines.

A day of bs-1 serving logs millions of ``[eagle-cycle]`` lines, so ``inspect`` must read them at
hundreds of thousands per second. This generates a plain log of ``--lines`` per-cycle lines
(bs 1, 3 steps, random phase times and chain-model accept lengths, written by
``cycle.format_line`` behind an SGLang ``[DATE TIME TP0]`` prefix; device-span lines with
``draft_prep_ms`` and ``gap_ms`` by default, ``--layout older`` for lines without them), then
times the CLI entry point
``eagle-cycle inspect LOG --json`` in this process (reading, parsing, statistics, findings,
JSON printing to /dev/null).

Statistic: the best of ``--repeat`` runs, in wall-clock seconds, after one warm-up run. The
best run is the one least disturbed by other processes on the machine (timeit's reasoning);
the median and the CPU-time rate are printed too.

Usage::

    python benchmarks/bench_inspect.py                      # 1,000,000 lines, best of 3
    python benchmarks/bench_inspect.py --log big.log --keep # generate once, reuse later

Ends with one JSON line: ``{"lines_per_s": ..., ...}``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

try:
    from sglang_eagle_cycle import cli
    from sglang_eagle_cycle.cycle import format_line, make_record
except ImportError:  # running from a checkout without the package installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
    from sglang_eagle_cycle import cli
    from sglang_eagle_cycle.cycle import format_line, make_record

P_ACCEPT = (0.75, 0.6, 0.45)   # conditional per-position acceptance of the generated draft


def write_log(path: Path, lines: int, seed: int = 0, spans: bool = True) -> None:
    """``lines`` per-cycle lines at bs 1, steps 3 (times in ms with the line's 2 decimals);
    device-span lines (``draft_prep_ms``, ``gap_ms``) when ``spans``."""
    rng = random.Random(seed)
    prefix = "[2026-11-30 10:00:00 TP0] "
    with open(path, "w") as fh:
        buf = []
        for i in range(lines):
            length = 1
            while length <= len(P_ACCEPT) and rng.random() < P_ACCEPT[length - 1]:
                length += 1
            draft = round(0.8 + rng.random() * 0.2, 2)
            verify = round(20.0 + rng.random() * 3.0, 2)
            extend = round(0.45 + rng.random() * 0.1, 2)
            prep = round(0.05 + rng.random() * 0.05, 2) if spans else 0.0
            # the parts add up to the total (other_ms, at least 0.05 ms, is the rest), as the plugin writes them
            phases = {"draft_ms": draft, "verify_ms": verify, "verify_fwd_ms": round(verify - 0.4, 2),
                      "extend_ms": extend, "total_ms": round(draft + verify + extend + prep + 0.05 + rng.random() * 0.3, 2)}
            if spans:
                phases["draft_prep_ms"] = prep
                phases["gap_ms"] = round(0.02 + rng.random() * 0.03, 2) if i else None
            rec = make_record(cycle=i, config=(1, 3, 1, 4), accepts=[length], graph=True, phases_ms=phases)
            buf.append(prefix + format_line(rec) + "\n")
            if len(buf) >= 10_000:
                fh.writelines(buf)
                buf.clear()
        fh.writelines(buf)


def time_inspect(path: Path) -> tuple[float, float]:
    """(wall s, CPU s) of one ``eagle-cycle inspect PATH --json`` with stdout to /dev/null."""
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
        t0, c0 = time.perf_counter(), time.process_time()
        rc = cli.main(["inspect", str(path), "--json"])
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if rc != 0:
        raise SystemExit(f"bench_inspect.py: eagle-cycle inspect exited {rc}")
    return wall, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000, help="per-cycle lines to generate")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs after one warm-up (best is reported)")
    parser.add_argument("--log", type=Path, help="log to use; generated there when missing")
    parser.add_argument("--keep", action="store_true", help="keep the generated log")
    parser.add_argument("--layout", choices=("spans", "older"), default="spans",
                        help="generated lines: device-span lines (default) or older lines without "
                             "draft_prep_ms/gap_ms")
    args = parser.parse_args(argv)

    tmpdir = None
    path = args.log
    if path is None:
        tmpdir = tempfile.TemporaryDirectory(prefix="bench-inspect-")
        path = Path(tmpdir.name) / "cycles.log"
    if not path.exists():
        t0 = time.perf_counter()
        write_log(path, args.lines, spans=args.layout == "spans")
        print(f"generated {args.lines:,} lines ({path.stat().st_size / 1e6:.0f} MB) in "
              f"{time.perf_counter() - t0:.1f} s: {path}", file=sys.stderr)
    with open(path, "rb") as fh:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))

    try:
        time_inspect(path)   # warm-up: imports, page cache
        runs = [time_inspect(path) for _ in range(max(1, args.repeat))]
    finally:
        if tmpdir is not None and not args.keep:
            tmpdir.cleanup()

    print(f"{'run':>4}  {'wall s':>7}  {'cpu s':>7}  {'lines/s (wall)':>15}  {'lines/s (cpu)':>14}")
    for i, (wall, cpu) in enumerate(runs, 1):
        print(f"{i:>4}  {wall:7.2f}  {cpu:7.2f}  {lines / wall:15,.0f}  {lines / cpu:14,.0f}")
    best_wall = min(w for w, _ in runs)
    best_cpu = min(c for _, c in runs)
    record = {
        "lines_per_s": round(lines / best_wall),
        "statistic": f"best of {len(runs)} wall-clock runs of `eagle-cycle inspect LOG --json`",
        "lines": lines,
        "layout": args.layout,
        "best_s": round(best_wall, 3),
        "median_lines_per_s": round(lines / statistics.median(w for w, _ in runs)),
        "cpu_lines_per_s": round(lines / best_cpu),
        "cpus": os.cpu_count(),
    }
    print(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
