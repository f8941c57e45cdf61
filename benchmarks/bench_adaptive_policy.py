#!/usr/bin/env python3
"""Scheduler-thread cost of the adaptive policies alone, by batch size (no GPU, no hooks).

``bench_hook_overhead.py --adaptive`` prices the cost-aware policy inside SGLang's real decode branch
at one batch size, with one depth run (the harness cannot switch). This script isolates the policy:
per cycle it calls what SGLang's ``AdaptiveController`` calls on the scheduler thread,
``get_steps_for_batch(bs)`` and ``on_verify_complete(accepts, bs)``, for

* ``sglang``: SGLang 0.5.23's ``AdaptiveSpeculativeParams``;
* ``cost``: :class:`sglang_eagle_cycle.adaptive.CostAwarePolicy`, every candidate depth's period
  already measured (handed over beforehand, as the sink thread does; not timed), so that every
  decision does its full work; during the run each cycle's record reaches it 2 cycles late, and
  the time of that call (the sink thread's, which also counts the verify results) is left out.

Accept counts are drawn once per batch size (conditional acceptance 0.7 per position, at the
depth the policy runs), the same for both. Each repetition times both policies on fresh objects,
in alternating order; the figure is the median over repetitions of the paired difference
(``cost - sglang``, us of thread CPU per cycle) with its 95% sign-test interval.

Bounds: batch sizes 1..65,536 (``argtypes.MAX_BS``, the largest any ``eagle-cycle`` command reads
or advises for). The accept counts of one batch size are drawn up front, ``bs x cycles x
candidates`` of them at about 8.6 bytes and 0.2 us each: at most 2e8 (under 2 GB, about 40 s of
drawing; bs 4,096 with the default 5,000 cycles and 8 candidates is 1.6e8). Beyond either, one
line and exit 2 (bs 65,536 at the defaults had asked for 2.6e9 counts, over 20 GB).

Usage::

    python benchmarks/bench_adaptive_policy.py                      # bs 1 8 32 64, 15 repetitions
    python benchmarks/bench_adaptive_policy.py --batch-sizes 1 --reps 31 --json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
for extra in (ROOT / "python", ROOT / "benchmarks"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from bench_hook_overhead import median_ci  # noqa: E402
from sglang_eagle_cycle.argtypes import MAX_BS, MAX_STEPS, int_in  # noqa: E402

#: Accept counts drawn up front for one batch size (``bs x cycles x candidates``), about 8.6 bytes each.
MAX_DRAWS = 200_000_000


def _accepts(rng: random.Random, bs: int, steps: int, p: float = 0.7) -> list[int]:
    out = []
    for _ in range(bs):
        a = 0
        while a < steps and rng.random() < p:
            a += 1
        out.append(a)
    return out


def _time(policy, bs: int, draws: dict, cycles: int) -> float:
    """Thread CPU per cycle (us) of the scheduler-thread calls of ``cycles`` cycles of ``policy``.
    A policy that takes cycle records gets each one 2 cycles late, untimed (the sink thread's work)."""
    feed = getattr(policy, "on_cycle_record", None)
    late: list = []
    clock = time.thread_time
    spent = 0.0
    for i in range(cycles):
        t = clock()
        steps = policy.get_steps_for_batch(bs)
        policy.on_verify_complete(draws[steps][i], bs)
        spent += clock() - t
        if feed is not None:
            late.append(SimpleNamespace(steps=steps, bs=bs, total_ms=20.0 + steps, gap_ms=0.1, draft_ms=0.5 * steps,
                                        draft_prep_ms=0.1, verify_ms=15.0, extend_ms=1.0))
            if len(late) > 2:
                feed(late.pop(0))
    return spent / cycles * 1e6


def run(batch_sizes, candidates, reps: int, cycles: int, seed: int = 0) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="bench-adaptive-policy-") as tmp:   # a run had left its folder behind
        cfg = Path(tmp) / "adaptive.json"
        cfg.write_text(json.dumps({"1": {"candidate_steps": list(candidates)}}))
        return _rows(cfg, batch_sizes, candidates, reps, cycles, seed)


def _rows(cfg: Path, batch_sizes, candidates, reps: int, cycles: int, seed: int) -> list[dict]:
    from sglang.srt.speculative.adaptive_spec_params import AdaptiveSpeculativeParams

    from sglang_eagle_cycle.adaptive import CostAwarePolicy

    initial = sorted(candidates)[len(candidates) // 2]
    rows = []
    for bs in batch_sizes:
        rng = random.Random(seed * 1000 + bs)
        draws = {s: [_accepts(rng, bs, s) for _ in range(cycles)] for s in candidates}

        def cost_policy():
            pol = CostAwarePolicy(initial, str(cfg))
            for s in candidates:   # every depth measured (the sink thread's work; not timed)
                for i in range(20):
                    pol.on_cycle_record(SimpleNamespace(
                        steps=s, bs=bs, total_ms=20.0 + s + (i % 3), gap_ms=0.1, draft_ms=0.5 * s,
                        draft_prep_ms=0.1, verify_ms=15.0, extend_ms=1.0))
            return pol

        makers = {"sglang": lambda: AdaptiveSpeculativeParams(initial, str(cfg)), "cost": cost_policy}
        per = {name: [] for name in makers}
        for r in range(reps):
            order = list(makers) if r % 2 == 0 else list(makers)[::-1]
            for name in order:
                per[name].append(_time(makers[name](), bs, draws, cycles))
        diff = [c - s for c, s in zip(per["cost"], per["sglang"])]
        med, lo, hi = median_ci(diff)
        rows.append({"bs": bs, "sglang_us": statistics.median(per["sglang"]),
                     "cost_us": statistics.median(per["cost"]), "added_us": med, "ci95_us": [lo, hi],
                     "reps": reps, "cycles": cycles})
    return rows


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        print(f"bench_adaptive_policy.py: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def main(argv=None) -> int:
    ap = _Parser(description=__doc__.split("\n\n")[0])
    # 1..MAX_BS, the range eagle-cycle's own commands take (65537 and up had been accepted)
    ap.add_argument("--batch-sizes", type=int_in(1, MAX_BS), nargs="+", default=[1, 8, 32, 64], metavar="BS",
                    help=f"batch sizes, 1..{MAX_BS} (default 1 8 32 64); bs x cycles x candidates at most "
                         f"{MAX_DRAWS:.0e}, the accept counts drawn up front (under 2 GB)")
    # at most MAX_STEPS: the policy keeps counts per draft position, and 100000000 had hung the script
    ap.add_argument("--candidates", type=int_in(0, MAX_STEPS), nargs="+", default=list(range(8)), metavar="STEPS",
                    help=f"candidate depths, 0..{MAX_STEPS} (default 0-7, all measured)")
    ap.add_argument("--reps", type=int_in(6), default=15, help="paired repetitions per batch size (default 15, >= 6)")
    ap.add_argument("--cycles", type=int_in(100), default=5000, help="cycles per repetition (default 5000, >= 100)")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    args = ap.parse_args(argv)
    bs, cands = max(args.batch_sizes), len(set(args.candidates))
    if bs * args.cycles * cands > MAX_DRAWS:
        ap.error(f"--batch-sizes {bs}: {bs} x {args.cycles:,} cycles x {cands} candidates is "
                 f"{bs * args.cycles * cands:.3g} accept counts drawn up front, above the {MAX_DRAWS:.0e} that fit "
                 "in under 2 GB; give fewer --cycles or --candidates, or a smaller batch")
    rows = run(args.batch_sizes, sorted(set(args.candidates)), args.reps, args.cycles)
    if args.json:
        print(json.dumps({"rows": rows}))
        return 0
    print(f"adaptive policies alone, candidates {sorted(set(args.candidates))}, {args.reps} paired repetitions "
          f"of {args.cycles} cycles; us of scheduler-thread CPU per cycle")
    print(f"{'bs':>4} {'sglang':>8} {'cost':>8} {'added':>8}  95% interval")
    for r in rows:
        print(f"{r['bs']:>4} {r['sglang_us']:>8.2f} {r['cost_us']:>8.2f} {r['added_us']:>+8.2f}  "
              f"{r['ci95_us'][0]:+.2f} to {r['ci95_us'][1]:+.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
