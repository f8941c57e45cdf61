#!/usr/bin/env python3
"""Adaptive speculation on simulated deployments whose acceptance shifts mid-run (no GPU).

Compares, on the same random numbers:

* ``cost``: :class:`sglang_eagle_cycle.adaptive.CostAwarePolicy` (cycle records delivered 2 cycles
  late, as the sink thread delivers them);
* ``ema``: SGLang 0.5.23's own ``AdaptiveSpeculativeParams`` (``round(ema accept len) + 1``);
* every static candidate depth, the per-phase oracle (the best static candidate of each phase)
  and the no-speculation reference.

Both adaptive policies run inside SGLang's real ``AdaptiveController`` with a stand-in worker
whose ``build_adaptive_runtime_state`` / ``apply_runtime_state`` record the switches.

World (a JSON object; :func:`world_from_json` reads one, :func:`make_worlds` draws them):

* ``bs``: requests per batch; ``candidates``: depths the engine may switch between (0-7);
* ``phases``: ``[{"cycles": N, "p": [p_1, ..., p_7]}, ...]``, the conditional acceptance of draft
  position j per phase (the shift happens between phases);
* ``costs``: the cost model of ``benchmarks/advise_worlds.py``'s ``World`` (``kind``,
  ``decode_ms``, ``verify_overhead``, ``fixed_ms``, ``slope_ms``, ``knee_tokens``,
  ``knee_slope_ms``, ``moe_experts``, ``moe_topk``, ``moe_ms_per_expert``, ``buckets``,
  ``extend_fixed_ms``, ``extend_slope_ms``, ``draft_step_ms``, ``draft_prep_ms``, ``other_ms``,
  ``gap_ms``, ``noise``): at depth S >= 1 a cycle costs ``draft_prep + (S-1) draft_step +
  verify(bs (S+1)) + extend(bs (S+1)) + other + gap``; at S = 0 (adaptive's "no draft") the draft
  phases drop and the verify and draft-extend run at width ``bs``; no-spec decodes in
  ``decode_ms``;
* ``switch_ms``: time added to each depth switch (default 0).

Printed per world: the whole-run ratio to the per-phase oracle (tokens over time, so the phases
weigh by their duration), for both policies; ``--json`` adds the ratio of each phase to that phase's
best static candidate (``cost_phase_ratio``, ``ema_phase_ratio``).

Every cycle's period is its mean times one log-normal factor (sigma ``noise``) per cycle, and
every request's accept length comes from uniforms per (cycle, request, position): the same for
every policy and every depth.

Bounds (refused with one line, exit 2, before anything is drawn): memory grows with a world's
request-cycles (``bs`` times its cycles over all phases: its draws peak at about 35 bytes each,
whatever the candidates) and the run's time with every world and every ``--switch-ms`` repeat
(about 55 us per simulated cycle, the policies stepping in Python, plus 0.5 us per request-cycle).
One world holds at most 1e8 request-cycles (about 4 GB: bs 1,024 for 97,656 cycles, bs 64 for
1,562,500; drawn worlds count at bs 64, so ``--cycles`` <= 781,250), and a run does at most 1e10
units of work (request-cycles plus 100 per cycle, about 1.5 hours on 2 cores; the default run is
4e7). A world of bs 4,096 and 10,000,000 cycles (1 TiB of draws) had ended in a MemoryError
traceback, or in swap where the memory was overcommitted.

Usage::

    python benchmarks/sim_adaptive.py                  # 12 worlds, 2 phases of 10,000 cycles
    python benchmarks/sim_adaptive.py --worlds 6 --cycles 3000 --json
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Optional

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
for extra in (ROOT / "python", ROOT / "benchmarks"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from advise_worlds import BATCH_SIZES, KINDS, World, draw_acceptance, draw_world  # noqa: E402
from sglang_eagle_cycle.argtypes import int_in, strict_float  # noqa: E402

POSITIONS = 7
CANDIDATES = tuple(range(0, 8))
#: Records reach the policy this many cycles late (the sink thread writes one or two cycles later).
RECORD_DELAY = 2
#: Request-cycles (batch size x cycles over all phases) one world may hold: its draws peak at about
#: 35 bytes each (float32 uniforms and their bools for 7 positions), about 4 GB. Batch 1,024 runs
#: up to 97,656 cycles, batch 4,096 up to 24,414.
MAX_WORLD_CELLS = 100_000_000
#: One simulated cycle (both adaptive policies stepped in Python) costs as much work as drawing this
#: many requests' accept lengths: about 55 us against 0.5 us on a 2-core VM.
CYCLE_CELLS = 100
#: Work of a whole run, in request-cycles plus ``CYCLE_CELLS`` per cycle, over every world and every
#: ``--switch-ms`` repeat: about 1.5 hours on a 2-core VM (the default run is 4e7).
MAX_RUN_WORK = 10_000_000_000
#: The largest batch a drawn world (``make_worlds``) has; the bounds count every drawn world at it.
DRAWN_MAX_BS = max(BATCH_SIZES)


@dataclass
class ShiftWorld:
    """A :class:`World`'s costs with a list of acceptance phases (see the module docstring)."""

    name: str
    costs: World
    phases: list            # [(cycles, p tuple)]
    candidates: tuple = CANDIDATES
    switch_ms: float = 0.0

    @property
    def bs(self) -> int:
        return self.costs.bs

    def period_ms(self, steps: int) -> float:
        """Mean cycle period at ``steps`` (ms, gap included)."""
        w = self.costs
        if steps == 0:
            return w.verify_ms(w.bs) + w.extend_ms(w.bs) + w.mean_other_ms() + w.gap_ms
        return w.cycle_ms(steps) + w.gap_ms

    def parts_ms(self, steps: int) -> tuple:
        """``(draft_prep, draft, verify, extend)`` means (ms)."""
        w = self.costs
        n = w.bs * (steps + 1)
        return w.prep_ms(steps), w.draft_ms(steps), w.verify_ms(n), w.extend_ms(n)

    def nospec_tok_s(self) -> float:
        return 1000.0 * self.bs / self.costs.decode_ms

    def to_json(self) -> dict:
        c = asdict(self.costs)
        c.pop("p", None)
        c.pop("bs", None)
        return {"name": self.name, "bs": self.bs, "candidates": list(self.candidates), "switch_ms": self.switch_ms,
                "phases": [{"cycles": n, "p": list(p)} for n, p in self.phases], "costs": c}


class WorldError(ValueError):
    """A world file that cannot be simulated; the message names the field."""


def memory_error(bs: int, cycles: int) -> Optional[str]:
    """Why one world of ``bs`` requests and ``cycles`` cycles (all phases) holds too much, or None:
    its draws hold every (cycle, request) at once (see :data:`MAX_WORLD_CELLS`)."""
    cells = bs * cycles
    if cells <= MAX_WORLD_CELLS:
        return None
    return (f"bs {bs} x {cycles:,} cycles is {cells:.3g} request-cycles, above the {MAX_WORLD_CELLS:.0e} whose "
            "draws fit in about 4 GB")


def work_error(worlds: int, runs: int, bs: int, cycles: int) -> Optional[str]:
    """Why ``worlds`` worlds of batch size up to ``bs`` and ``cycles`` cycles each, simulated ``runs``
    times (1 + the number of ``--switch-ms`` values), is too much work, or None (:data:`MAX_RUN_WORK`)."""
    work = worlds * runs * cycles * (bs + CYCLE_CELLS)
    if work <= MAX_RUN_WORK:
        return None
    return (f"{worlds:,} world(s) x {runs} run(s) x {cycles:,} cycles at bs up to {bs} is {work:.3g} units of "
            f"work (request-cycles, plus {CYCLE_CELLS} per cycle), above the {MAX_RUN_WORK:.0e} of about 1.5 hours "
            "on 2 cores; give fewer worlds, cycles or --switch-ms values")


def _num(value, what: str, low: float = 0.0, high: float = math.inf, low_open: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < low or value > high or (low_open and value == low):
        bound = f"> {low:g}" if low_open else f">= {low:g}"
        raise WorldError(f"{what}: expected a number {bound}" + (f" and <= {high:g}" if high != math.inf else "")
                         + f", got {value!r}")
    return float(value)


def _int(value, what: str, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise WorldError(f"{what}: expected an integer in [{low}, {high}], got {value!r}")
    return value


def world_from_json(doc) -> ShiftWorld:
    """A :class:`ShiftWorld` from its JSON object (module docstring).

    Raises:
        WorldError: a missing or malformed field (named in the message).
    """
    if not isinstance(doc, dict):
        raise WorldError("a world is a JSON object")
    for key in ("bs", "phases", "costs"):
        if key not in doc:
            raise WorldError(f"missing key {key!r}")
    bs = _int(doc["bs"], "bs", 1, 4096)
    cands = doc.get("candidates", list(CANDIDATES))
    if not isinstance(cands, list) or not cands:
        raise WorldError(f"candidates: expected a non-empty list of depths 0..{POSITIONS}, got {cands!r}")
    cands = tuple(sorted({_int(c, "candidates", 0, POSITIONS) for c in cands}))
    phases = doc["phases"]
    if not isinstance(phases, list) or not phases:
        raise WorldError("phases: expected a non-empty list of {\"cycles\": N, \"p\": [...]}")
    parsed = []
    for i, ph in enumerate(phases):
        if not isinstance(ph, dict) or "cycles" not in ph or "p" not in ph:
            raise WorldError(f"phases[{i}]: expected an object with cycles and p")
        n = _int(ph["cycles"], f"phases[{i}].cycles", 1, 10_000_000)
        p = ph["p"]
        if not isinstance(p, list) or len(p) < POSITIONS:
            raise WorldError(f"phases[{i}].p: expected {POSITIONS} or more acceptance probabilities")
        parsed.append((n, tuple(_num(x, f"phases[{i}].p", 0.0, 1.0) for x in p)))
    problem = memory_error(bs, sum(n for n, _ in parsed))
    if problem:
        raise WorldError(f"phases: {problem}; give fewer cycles or a smaller bs")
    costs = doc["costs"]
    if not isinstance(costs, dict):
        raise WorldError("costs: expected an object")
    known = {f.name for f in fields(World)} - {"bs", "p"}
    unknown = sorted(set(costs) - known)
    if unknown:
        raise WorldError(f"costs: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})")
    if not isinstance(costs.get("kind"), str):
        raise WorldError("costs.kind: expected a label such as \"dense\"")
    kw = dict(costs)
    for key, value in costs.items():
        if key in ("kind", "family", "name"):
            continue
        if key == "buckets":
            if not isinstance(value, (list, tuple)):
                raise WorldError("costs.buckets: expected a list of token counts")
            kw[key] = tuple(_int(b, "costs.buckets", 1, 1 << 20) for b in value)
        elif key in ("knee_tokens", "moe_experts", "moe_topk"):
            kw[key] = _int(value, f"costs.{key}", 0, 1 << 20)
        elif key == "outlier_rate":
            kw[key] = _num(value, "costs.outlier_rate", 0.0, 1.0)
        elif key == "noise":   # a per-cycle log-normal sigma; 1e6 overflowed every period
            kw[key] = _num(value, "costs.noise", 0.0, 2.0)
        elif key == "decode_ms":   # the no-spec tok/s is bs / decode_ms: 1e-320 ms made it inf (a traceback)
            kw[key] = _num(value, "costs.decode_ms", 1e-3, 1e6)
        else:   # ms, or ms per token or expert: past 1e6 ms the sums overflow to no meaning
            kw[key] = _num(value, f"costs.{key}", 0.0, 1e6, low_open=key == "fixed_ms")
    if "decode_ms" not in kw:
        raise WorldError("costs.decode_ms: missing (the no-spec decode step, ms)")
    if kw.get("moe_experts") and not 0 < kw.get("moe_topk", 0) <= kw["moe_experts"]:
        raise WorldError("costs.moe_topk: expected 1..moe_experts")
    w = World(bs=bs, p=parsed[0][1], **kw)
    return ShiftWorld(str(doc.get("name", "world")), w, parsed, cands,
                      _num(doc.get("switch_ms", 0.0), "switch_ms", 0.0, 1e6))


def make_worlds(n: int, seed: int, cycles: int) -> list[ShiftWorld]:
    """``n`` worlds cycling over the advisor's kinds (dense, MoE, communication-bound, CUDA-graph
    buckets, large batch, predictable); each draws a second acceptance family for its second phase."""
    out = []
    for i in range(n):
        kind = KINDS[i % len(KINDS)]
        rng = random.Random(f"adaptive-worlds:{seed}:{i}")
        w = draw_world(rng, kind, name=f"a{i:02d}-{kind}")
        fam2 = rng.choice(("geometric", "plateau", "low", "high"))
        p2 = draw_acceptance(rng, fam2)
        out.append(ShiftWorld(w.name + f"-{w.family}>{fam2}", w, [(cycles, w.p), (cycles, p2)]))
    return out


# ---- the shared random numbers ------------------------------------------------------------------


class Draws:
    """Accept lengths of every (cycle, request) at every depth, and one period factor per cycle."""

    def __init__(self, world: ShiftWorld, seed: int):
        rng = np.random.default_rng(seed)
        total = sum(n for n, _ in world.phases)
        bs = world.bs
        problem = memory_error(bs, total)
        if problem:
            raise WorldError(problem)
        u = rng.random((total, bs, POSITIONS), dtype=np.float32)
        p = np.concatenate([np.broadcast_to(np.asarray(ph[:POSITIONS], dtype=np.float32), (n, POSITIONS))
                            for n, ph in world.phases])
        ok = u < p[:, None, :]
        del u, p
        # leading accepted drafts, kept as bools in place (cumprod had made an int64 copy: 56 bytes
        # per request-cycle, and the sum another 8; the lengths are the same)
        run = np.logical_and.accumulate(ok, axis=2, out=ok)
        self.lengths = {}                            # depth -> (cycles, bs) accept lengths
        for s in world.candidates:
            self.lengths[s] = 1 + run[:, :, :s].sum(axis=2, dtype=np.int16) if s else np.ones((total, bs), np.int16)
        del run, ok
        sig = world.costs.noise
        self.factor = np.exp(rng.normal(-0.5 * sig * sig, sig, size=total))
        self.phase_of = np.concatenate([np.full(n, k) for k, (n, _) in enumerate(world.phases)])
        self.total = total


# ---- runs ---------------------------------------------------------------------------------------


class _Record:
    __slots__ = ("steps", "bs", "total_ms", "gap_ms", "draft_ms", "draft_prep_ms", "verify_ms", "extend_ms")

    def __init__(self, steps, bs, total_ms, gap_ms, prep_ms, draft_ms, verify_ms, extend_ms):
        self.steps, self.bs, self.total_ms, self.gap_ms = steps, bs, total_ms, gap_ms
        self.draft_ms, self.draft_prep_ms, self.verify_ms, self.extend_ms = draft_ms, prep_ms, verify_ms, extend_ms


class _Worker:
    """Stand-in for ``EAGLEWorkerV2`` under ``AdaptiveController``: states are just depths."""

    def __init__(self, steps: int):
        self.speculative_num_steps = steps
        self.applied: list = []

    def build_adaptive_runtime_state(self, speculative_num_steps, speculative_num_draft_tokens, cuda_graph_bs=None):
        from sglang.srt.speculative.adaptive_runtime_state import SpecRuntimeState

        return SpecRuntimeState(speculative_num_steps, speculative_num_draft_tokens, None, None, None, None, None, None)

    def apply_runtime_state(self, state) -> None:
        self.speculative_num_steps = state.speculative_num_steps
        self.applied.append(state.speculative_num_steps)


@dataclass
class RunResult:
    name: str
    tokens: list                 # per phase
    ms: list                     # per phase
    switches: int = 0
    steps_trace: list = field(default_factory=list)   # (cycle, steps) at each switch

    @property
    def tok_s(self) -> float:
        return 1000.0 * sum(self.tokens) / sum(self.ms)

    def phase_tok_s(self, k: int) -> float:
        return 1000.0 * self.tokens[k] / self.ms[k]


def run_static(world: ShiftWorld, draws: Draws, steps: int) -> RunResult:
    per = world.period_ms(steps)
    tokens, ms = [], []
    start = 0
    for n, _ in world.phases:   # phases are consecutive cycles: a slice (a mask per phase had cost phases x cycles)
        rows = slice(start, start + n)
        start += n
        tokens.append(int(draws.lengths[steps][rows].sum()))
        ms.append(float(per * draws.factor[rows].sum()))
    return RunResult(f"static {steps}", tokens, ms)


def run_adaptive(world: ShiftWorld, draws: Draws, policy, name: str, initial: int) -> RunResult:
    """One run of ``policy`` inside SGLang's real ``AdaptiveController``."""
    from sglang.srt.speculative.adaptive_runtime_state import AdaptiveController

    worker = _Worker(initial)
    ctl = AdaptiveController(worker, policy)
    ctl.init_states(None)
    feed = getattr(policy, "on_cycle_record", None)
    bs = world.bs
    nph = len(world.phases)
    tokens, ms = [0] * nph, [0.0] * nph
    periods = {s: world.period_ms(s) for s in world.candidates}
    parts = {s: world.parts_ms(s) for s in world.candidates}
    gap = world.costs.gap_ms
    pending: list = []
    trace, last = [], worker.speculative_num_steps
    lengths, factor, phase_of = draws.lengths, draws.factor, draws.phase_of
    for i in range(draws.total):
        ctl.activate_step_by_batch(bs)
        s = worker.speculative_num_steps
        lens = lengths[s][i]
        f = float(factor[i])
        period = periods[s] * f + (world.switch_ms if s != last else 0.0)
        if s != last:
            trace.append((i, s))
            last = s
        k = int(phase_of[i])
        tokens[k] += int(lens.sum())
        ms[k] += period
        ctl.on_verify_complete((lens - 1).tolist(), bs)
        if feed is not None:
            pp, d, v, e = parts[s]
            pending.append(_Record(s, bs, period - gap * f, gap * f, pp * f, d * f, v * f, e * f))
            if len(pending) > RECORD_DELAY:
                feed(pending.pop(0))
    return RunResult(name, tokens, ms, switches=len(trace), steps_trace=trace)


def _config(world: ShiftWorld, tmp: Path) -> str:
    # a fixed name in the run's own folder: a world's name is any JSON text ("x/y", "../z")
    path = tmp / "adaptive.json"
    path.write_text(json.dumps({"1": {"candidate_steps": list(world.candidates),
                                      "nospec_tok_s": round(world.nospec_tok_s(), 3), "nospec_bs": world.bs}}))
    return str(path)


def evaluate(world: ShiftWorld, seed: int = 0, initial: Optional[int] = None,
             log: Optional[logging.Logger] = None) -> dict:
    """Every policy on ``world`` with the same draws; ratios to the per-phase oracle. ``initial``: the
    launch depth (``--speculative-num-steps``), one of the candidates as SGLang requires: 3 where it
    is one, else the middle candidate (a world of candidates ``[5]`` or ``[2, 4]`` had failed)."""
    from sglang.srt.speculative.adaptive_spec_params import AdaptiveSpeculativeParams

    from sglang_eagle_cycle.adaptive import CostAwarePolicy

    if initial is None:
        cands = sorted(world.candidates)
        initial = 3 if 3 in cands else cands[len(cands) // 2]

    draws = Draws(world, seed)
    statics = {s: run_static(world, draws, s) for s in world.candidates}
    nph = len(world.phases)
    best = [max(world.candidates, key=lambda s: (statics[s].phase_tok_s(k), -s)) for k in range(nph)]
    oracle = RunResult("oracle", [statics[best[k]].tokens[k] for k in range(nph)],
                       [statics[best[k]].ms[k] for k in range(nph)])
    log = log or logging.getLogger(f"sim_adaptive.{world.name}")
    notes: list = []

    class _Keep(logging.Handler):
        def emit(self, record):
            notes.append(record.getMessage())

    keep = _Keep(logging.INFO)
    log.addHandler(keep)
    log.setLevel(logging.INFO)
    log.propagate = False
    with tempfile.TemporaryDirectory() as tmp:
        cfg = _config(world, Path(tmp))
        cost_policy = CostAwarePolicy(initial, cfg, log=log)
        cost = run_adaptive(world, draws, cost_policy, "cost", initial)
        ema = run_adaptive(world, draws, AdaptiveSpeculativeParams(initial, cfg), "ema", initial)
    log.removeHandler(keep)
    nospec = world.nospec_tok_s()
    all_below = all(statics[s].tok_s < nospec for s in world.candidates)
    phase_below = [all(statics[s].phase_tok_s(k) < nospec for s in world.candidates) for k in range(nph)]
    phase_margin = [max(statics[s].phase_tok_s(k) for s in world.candidates) / nospec for k in range(nph)]
    return {
        "world": world.name, "bs": world.bs, "oracle_steps": best,
        "oracle_tok_s": oracle.tok_s, "cost_tok_s": cost.tok_s, "ema_tok_s": ema.tok_s, "nospec_tok_s": nospec,
        "cost_ratio": cost.tok_s / oracle.tok_s, "ema_ratio": ema.tok_s / oracle.tok_s,
        "cost_vs_ema": cost.tok_s / ema.tok_s,
        # per phase: tok/s over that phase's best static candidate (the whole-run ratio weighs phases by time)
        "cost_phase_ratio": [cost.phase_tok_s(k) / statics[best[k]].phase_tok_s(k) for k in range(nph)],
        "ema_phase_ratio": [ema.phase_tok_s(k) / statics[best[k]].phase_tok_s(k) for k in range(nph)],
        "cost_switches": cost.switches, "ema_switches": ema.switches,
        "static_tok_s": {s: r.tok_s for s, r in statics.items()},
        "all_below_nospec": all_below, "phase_below_nospec": phase_below,
        "phase_best_over_nospec": phase_margin,
        "cost_final_steps": cost.steps_trace[-1][1] if cost.steps_trace else initial,
        "cost_logged_off": any("speculation should be off" in m for m in notes),
        "cost_final_mode": cost_policy.mode(world.bs),
        "_policy": cost_policy,
    }


def summary(rows: list) -> dict:
    ratios = [r["cost_ratio"] for r in rows]
    return {"worlds": len(rows), "at_least_0_98": sum(x >= 0.98 for x in ratios), "min_ratio": min(ratios),
            "min_cost_vs_ema": min(r["cost_vs_ema"] for r in rows),
            "ema_at_least_0_98": sum(r["ema_ratio"] >= 0.98 for r in rows)}


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        print(f"sim_adaptive.py: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def _switch_ms(text: str) -> float:
    value = strict_float(text)
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a finite time >= 0 ms, got {text!r}")
    return value


def main(argv=None) -> int:
    ap = _Parser(description=__doc__.split("\n\n")[0])
    drawn_cycles = MAX_WORLD_CELLS // (2 * DRAWN_MAX_BS)
    ap.add_argument("--worlds", type=int_in(1), default=None,
                    help=f"simulated worlds (default 12; not with --world); worlds x runs (1 + switch costs) x "
                         f"2 phases' cycles x (bs + {CYCLE_CELLS}) at most {MAX_RUN_WORK:.0e}, about 1.5 h on 2 "
                         "cores (drawn worlds count at bs 64)")
    ap.add_argument("--cycles", type=int_in(100), default=None,
                    help=f"cycles per phase (default 10000, >= 100, <= {drawn_cycles:,}: 2 phases at bs up to "
                         f"{DRAWN_MAX_BS} within the {MAX_WORLD_CELLS:.0e} request-cycles whose draws fit in about "
                         "4 GB; not with --world, whose phases give theirs)")
    ap.add_argument("--seed", type=int_in(0), default=0, help="world and draw seed (default 0)")
    ap.add_argument("--world", metavar="FILE", help="a JSON world (module docstring) instead of drawn ones")
    ap.add_argument("--switch-ms", type=_switch_ms, nargs="*", default=None,
                    help="also sweep these switch costs (ms, finite, >= 0) for both adaptive policies")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    args = ap.parse_args(argv)
    if args.world and (args.worlds is not None or args.cycles is not None):   # had been ignored without a word
        ap.error(f"{'--worlds' if args.worlds is not None else '--cycles'}: not with --world (the world file "
                 "gives its phases' cycles)")
    args.worlds = 12 if args.worlds is None else args.worlds
    args.cycles = 10000 if args.cycles is None else args.cycles
    runs = 1 + len(args.switch_ms or [])   # each --switch-ms value simulates every world again
    if not args.world:   # checked before drawing: make_worlds holds every drawn world at once
        problem = memory_error(DRAWN_MAX_BS, 2 * args.cycles)
        if problem:
            ap.error(f"--cycles {args.cycles}: {problem} (drawn worlds run 2 phases at bs up to {DRAWN_MAX_BS}); "
                     f"give at most {drawn_cycles:,}")
        problem = work_error(args.worlds, runs, DRAWN_MAX_BS, 2 * args.cycles)
        if problem:
            ap.error(problem)
    logging.getLogger("sglang").setLevel(logging.WARNING)
    if args.world:
        try:
            worlds = [world_from_json(json.loads(Path(args.world).read_text(encoding="utf-8")))]
        except OSError as exc:
            print(f"sim_adaptive: {args.world}: cannot read ({exc.strerror or exc})", file=sys.stderr)
            return 2
        except json.JSONDecodeError as exc:
            print(f"sim_adaptive: {args.world}: not JSON ({exc.msg}, line {exc.lineno})", file=sys.stderr)
            return 2
        except UnicodeDecodeError:
            print(f"sim_adaptive: {args.world}: not UTF-8 text", file=sys.stderr)
            return 2
        except WorldError as exc:
            print(f"sim_adaptive: {args.world}: {exc}", file=sys.stderr)
            return 2
        problem = work_error(1, runs, worlds[0].bs, sum(n for n, _ in worlds[0].phases))
        if problem:
            ap.error(problem)
    else:
        worlds = make_worlds(args.worlds, args.seed, args.cycles)
    t0 = time.time()
    rows = []
    for i, w in enumerate(worlds):
        r = evaluate(w, seed=args.seed * 1000 + i)
        pol = r.pop("_policy")
        r["cost_switch_log"] = [list(x) for x in pol.switches[:12]]
        rows.append(r)
    summ = summary(rows)
    sweep = {}
    for ms in args.switch_ms or []:
        vals = []
        for i, w in enumerate(worlds):
            w2 = ShiftWorld(w.name, w.costs, w.phases, w.candidates, ms)
            r = evaluate(w2, seed=args.seed * 1000 + i)
            r.pop("_policy")
            vals.append((r["cost_ratio"], r["ema_ratio"]))
        sweep[ms] = {"cost_min": min(v[0] for v in vals), "ema_min": min(v[1] for v in vals),
                     "cost_mean": sum(v[0] for v in vals) / len(vals), "ema_mean": sum(v[1] for v in vals) / len(vals)}
    if args.json:
        print(json.dumps({"rows": rows, "summary": summ, "switch_sweep": sweep}, default=str))
        return 0
    lengths = sorted({n for w in worlds for n, _ in w.phases})
    print(f"{len(worlds)} worlds, {len(worlds[0].phases)} phases of {'/'.join(map(str, lengths))} cycles, records "
          f"{RECORD_DELAY} cycles late; ratio = whole-run tok/s / per-phase oracle ({time.time() - t0:.0f} s)")
    print(f"{'world':<40} {'bs':>3} {'oracle':>7} {'cost':>6} {'ema':>6} {'cost/ema':>8} {'sw cost':>7} "
          f"{'sw ema':>6} {'nospec':>11}")
    for r in rows:
        print(f"{r['world']:<40} {r['bs']:>3} {str(r['oracle_steps']):>7} {r['cost_ratio']:>6.3f} "
              f"{r['ema_ratio']:>6.3f} {r['cost_vs_ema']:>8.3f} {r['cost_switches']:>7} {r['ema_switches']:>6} "
              f"{('off, logged' if r['cost_logged_off'] else 'off') if r['all_below_nospec'] else '':>11}")
    print(f"cost policy: >= 0.98x oracle in {summ['at_least_0_98']} of {summ['worlds']} (EMA: "
          f"{summ['ema_at_least_0_98']}); lowest {summ['min_ratio']:.3f}; lowest cost/EMA {summ['min_cost_vs_ema']:.3f}")
    for ms, v in sweep.items():
        print(f"switch cost {ms:g} ms: cost min {v['cost_min']:.3f} mean {v['cost_mean']:.3f}; "
              f"EMA min {v['ema_min']:.3f} mean {v['ema_mean']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
