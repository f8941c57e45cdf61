"""Hidden "worlds" for scoring ``eagle-cycle advise`` by an exact protocol (no GPU).

A :class:`World` is one serving situation the advisor cannot see: a batch size, per-position
acceptance and the cost of every phase of the EAGLE decode cycle as a function of the verified
width. It writes ``[eagle-cycle]`` logs of any depth, as the plugin prints them, and knows the
noise-free throughput of every depth, so the advisor's pick and its intervals can be scored
against the truth.

Model (units: ms, tokens, tok/s; chain drafting, topk 1, ``num_draft_tokens = steps + 1``):

* Acceptance: ``p_j`` (j = 1..12) is the probability that draft token j is accepted given that
  tokens 1..j-1 were. One request's accept length (bonus token included) is ``1 + `` the number
  of leading accepted drafts, so ``E[L(S)] = 1 + sum_{j=1..S} prod_{i<=j} p_i`` (Leviathan et al.,
  "Fast Inference from Transformers via Speculative Decoding", ICML 2023, eq. 1, with the
  constant rate generalised per position).
* Verified width: ``n = bs * (S + 1)`` tokens.
* Target forward shape ``shape(n)`` (ms, arbitrary scale)::

      shape(n) = fixed_ms + slope_ms * m + knee_slope_ms * max(0, m - knee_tokens)
                 + moe_ms_per_expert * E * (1 - (1 - k/E)^m)

  with ``m = n`` padded up to the next bucket when ``buckets`` is set (a staircase in the verified
  width: a stress case. SGLang 0.5.23's graph runners pad the *batch* to a captured batch size and
  verify ``padded_bs * num_draft_tokens`` tokens (``decode_cuda_graph_runner.py``, the draft and
  draft-extend runners alike), so at one batch size a real server's verify width grows linearly
  with the depth and graph padding adds no step between depths; a width staircase there comes
  from kernel tile sizes, smaller). The last term
  is the expected number of distinct experts touched by ``m`` tokens each routed to ``k`` of
  ``E`` experts (occupancy: each expert is missed by one token with probability ``1 - k/E``).
* ``decode_ms``: the no-speculation decode step at ``bs`` (the whole step, ms).
  ``verify_ms(n) = decode_ms * (1 + verify_overhead) * shape(n) / shape(bs)``: the verify runs in
  target-verify mode, not as a decode step, so even at ``n = bs`` it costs ``verify_overhead``
  (0-40%) more than the decode step.
* ``extend_ms(n) = extend_fixed_ms + extend_slope_ms * n``; ``draft_ms(S) = (S-1) * draft_step_ms``
  (no draft forward at S = 1); ``draft_prep_ms`` only when a draft forward runs (S >= 2);
  ``other_ms`` per cycle plus stalls: with probability ``outlier_rate`` a cycle's ``other`` is
  ``outlier_ms`` longer, so its mean is ``other_ms + outlier_rate * outlier_ms``; ``gap_ms``
  between cycles.
* Noise: every phase of a logged cycle is its mean times a mean-one log-normal factor
  (``sigma = noise``), then rounded to 0.01 ms as the line prints it.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import random
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Callable, Optional, Sequence

from sglang_eagle_cycle.cycle import format_line, make_record, parse_line

#: Positions with a conditional acceptance in every world (the deepest depth a world can log).
POSITIONS = 12
#: Depths scored (0 = speculation off).
DEPTHS = tuple(range(0, 9))
#: Verify-cost shapes; :func:`make_worlds` cycles over them.
KINDS = ("dense", "moe", "comm", "graph_buckets", "large_batch", "predictable")
#: Batch sizes worlds are drawn from.
BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)
#: Bucket sizes (tokens) the ``graph_buckets`` worlds pad the verified width to: the batch sizes SGLang
#: captures by default, used as token counts (a stress case; SGLang pads the batch, module docstring).
GRAPH_BUCKETS = (1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128,
                 144, 160, 176, 192, 208, 224, 240, 256, 288, 320, 352, 384, 416, 448, 480, 512,
                 576, 640, 704, 768, 832, 896, 960, 1024)
#: The log prefix's start time (the lines' timestamps advance with the simulated cycles).
LOG_START = datetime(2026, 12, 1, 10, 0, 0)


def accept_len(p, steps: int) -> float:
    """``E[L(S)] = 1 + sum_{j=1..S} prod_{i<=j} p_i`` (tokens per request per cycle, bonus included)."""
    total, run = 1.0, 1.0
    for pj in list(p)[:steps]:
        run *= pj
        total += run
    return total


def chain_accept(rng: random.Random, p, steps: int) -> int:
    """One request's accept length under chain drafting: 1 + leading accepted drafts among ``steps``."""
    length = 1
    for pj in list(p)[:steps]:
        if rng.random() >= pj:
            break
        length += 1
    return length


def pad_to_bucket(n: int, buckets=GRAPH_BUCKETS) -> int:
    """The smallest bucket >= ``n`` tokens (``n`` itself past the largest bucket)."""
    for b in buckets:
        if b >= n:
            return b
    return n


@dataclass
class World:
    """One hidden serving situation (see the module docstring for the cost model).

    Attributes (ms unless stated):
        kind: verify-cost shape (one of :data:`KINDS`, or any label for a hand-made world).
        bs: requests in the batch.
        p: conditional acceptance per draft position j = 1..12 (probabilities).
        decode_ms: the no-speculation decode step at ``bs``.
        verify_overhead: fraction; ``verify_ms(bs) = decode_ms * (1 + verify_overhead)``.
        fixed_ms, slope_ms (ms/token), knee_tokens (tokens, 0 = no knee), knee_slope_ms (ms/token),
            moe_experts, moe_topk, moe_ms_per_expert, buckets: the forward shape ``shape(n)``.
        extend_fixed_ms, extend_slope_ms (ms/token): draft-extend cost over the verified width.
        draft_step_ms: one draft forward at this ``bs``.
        draft_prep_ms: host preparation before the draft launch (cycles with S >= 2).
        other_ms: the rest of the cycle (sampling, bookkeeping), stalls excluded.
        gap_ms: previous cycle's end to this cycle's start.
        noise: sigma of the per-phase mean-one log-normal factor.
        outlier_rate, outlier_ms: probability of a stalled cycle and the stall added to its ``other``.
        family: acceptance family the ``p`` were drawn from.
        name: label for tables and log file names.
    """

    kind: str
    bs: int
    p: tuple
    decode_ms: float
    verify_overhead: float = 0.0
    fixed_ms: float = 1.0
    slope_ms: float = 0.0
    knee_tokens: int = 0
    knee_slope_ms: float = 0.0
    moe_experts: int = 0
    moe_topk: int = 0
    moe_ms_per_expert: float = 0.0
    buckets: tuple = ()
    extend_fixed_ms: float = 0.5
    extend_slope_ms: float = 0.0
    draft_step_ms: float = 0.5
    draft_prep_ms: float = 0.1
    other_ms: float = 0.3
    gap_ms: float = 0.05
    noise: float = 0.03
    outlier_rate: float = 0.0
    outlier_ms: float = 0.0
    family: str = ""
    name: str = "world"

    # ---- costs (noise-free means) -------------------------------------------------------------

    def shape(self, n: int) -> float:
        """Forward cost shape at ``n`` tokens (ms up to the scale fixed by ``decode_ms``)."""
        m = pad_to_bucket(n, self.buckets) if self.buckets else n
        cost = self.fixed_ms + self.slope_ms * m
        if self.knee_tokens:
            cost += self.knee_slope_ms * max(0, m - self.knee_tokens)
        if self.moe_experts:
            e, k = self.moe_experts, self.moe_topk
            cost += self.moe_ms_per_expert * e * (1.0 - (1.0 - k / e) ** m)
        return cost

    def verify_ms(self, n: int) -> float:
        """Target verify of ``n`` tokens: ``decode_ms * (1 + verify_overhead) * shape(n) / shape(bs)``."""
        return self.decode_ms * (1.0 + self.verify_overhead) * self.shape(n) / self.shape(self.bs)

    def extend_ms(self, n: int) -> float:
        """Draft extend over ``n`` verified tokens: ``extend_fixed_ms + extend_slope_ms * n``."""
        return self.extend_fixed_ms + self.extend_slope_ms * n

    def draft_ms(self, steps: int) -> float:
        """``(steps - 1) * draft_step_ms``; 0 at ``steps <= 1`` (no draft forward runs)."""
        return max(0, steps - 1) * self.draft_step_ms

    def prep_ms(self, steps: int) -> float:
        """``draft_prep_ms`` when a draft forward runs (``steps >= 2``), else 0."""
        return self.draft_prep_ms if steps >= 2 else 0.0

    def mean_other_ms(self) -> float:
        """``other_ms + outlier_rate * outlier_ms``: the mean of ``other`` stalls included."""
        return self.other_ms + self.outlier_rate * self.outlier_ms

    def width(self, steps: int) -> int:
        """Verified tokens ``n = bs * (steps + 1)``."""
        return self.bs * (steps + 1)

    def cycle_ms(self, steps: int) -> float:
        """Mean cycle: ``draft_prep + draft + verify(n) + extend(n) + other`` (ms, gap excluded)."""
        n = self.width(steps)
        return (self.prep_ms(steps) + self.draft_ms(steps) + self.verify_ms(n) + self.extend_ms(n)
                + self.mean_other_ms())

    def accept_len(self, steps: int) -> float:
        """``E[L(S)] = 1 + sum_{j=1..S} prod_{i<=j} p_i`` (Leviathan et al. 2023 eq. 1, per position)."""
        return accept_len(self.p, steps)

    def true_tok_s(self, steps: int) -> float:
        """Noise-free throughput of the batch (tok/s).

        ``steps == 0``: ``1000 * bs / decode_ms``.
        ``steps >= 1``: ``1000 * bs * E[L(S)] / (cycle_ms(S) + gap_ms)`` with
        ``E[L(S)] = 1 + sum_{j=1..S} prod_{i<=j} p_i`` and
        ``cycle_ms = draft_prep + draft + verify + extend + other`` (means).
        """
        if steps == 0:
            return 1000.0 * self.bs / self.decode_ms
        return 1000.0 * self.bs * self.accept_len(steps) / (self.cycle_ms(steps) + self.gap_ms)

    def best_steps(self, depths=DEPTHS) -> int:
        """The depth in ``depths`` with the highest :meth:`true_tok_s` (the smallest on ties)."""
        return max(depths, key=lambda s: (self.true_tok_s(s), -s))

    # ---- logs ---------------------------------------------------------------------------------

    def cycles_per_run(self) -> int:
        """Cycles a simulated run logs: ``max(300, 3000 // bs)``."""
        return max(300, 3000 // self.bs)

    def records(self, steps: int, cycles: int, rng: random.Random, first_cycle: int = 0) -> list:
        """``cycles`` device-span :class:`CycleRecord` of a run at ``steps`` (>= 1)."""
        if steps < 1:
            raise ValueError("a speculative run needs steps >= 1")
        n = self.width(steps)
        sig = self.noise
        mu = -0.5 * sig * sig

        def noisy(x: float) -> float:
            return round(x * math.exp(rng.gauss(mu, sig)), 2)

        means = (self.draft_ms(steps), self.verify_ms(n), self.extend_ms(n), self.other_ms,
                 self.prep_ms(steps), self.gap_ms)
        out = []
        for i in range(cycles):
            m_draft, m_verify, m_extend, m_other, m_prep, m_gap = means
            draft = noisy(m_draft) if steps >= 2 else None
            prep = noisy(m_prep) if steps >= 2 else None
            verify = noisy(m_verify)
            fwd = round(verify * rng.uniform(0.93, 0.98), 2)
            extend = noisy(m_extend)
            other = m_other * math.exp(rng.gauss(mu, sig))
            if self.outlier_rate and rng.random() < self.outlier_rate:
                other += self.outlier_ms
            total = round((prep or 0.0) + (draft or 0.0) + verify + extend + round(other, 2), 2)
            phases = {"draft_ms": draft, "verify_ms": verify, "verify_fwd_ms": fwd, "extend_ms": extend,
                      "total_ms": total, "draft_prep_ms": prep, "gap_ms": noisy(m_gap) if i else None}
            accepts = [chain_accept(rng, self.p, steps) for _ in range(self.bs)]
            out.append(make_record(cycle=first_cycle + i, config=(self.bs, steps, 1, steps + 1),
                                   phases_ms=phases, accepts=accepts, graph=True))
        return out

    def log_lines(self, steps: int, cycles: Optional[int], rng: random.Random) -> list[str]:
        """Per-cycle ``[eagle-cycle]`` lines of a run at ``steps``, behind an SGLang log prefix.

        ``cycles=None`` uses :meth:`cycles_per_run`. The prefix's clock advances by each cycle's
        period (``total_ms + gap_ms``) from :data:`LOG_START`.
        """
        recs = self.records(steps, self.cycles_per_run() if cycles is None else cycles, rng)
        lines, clock_ms = [], 0.0
        for rec in recs:
            clock_ms += rec.period_ms or 0.0
            stamp = (LOG_START + timedelta(milliseconds=clock_ms)).strftime("%Y-%m-%d %H:%M:%S")
            lines.append(f"[{stamp} TP0] " + format_line(rec))
        return lines


# ---- drawing worlds ---------------------------------------------------------------------------


def _clip(x: float, lo: float = 0.02, hi: float = 0.97) -> float:
    return min(hi, max(lo, x))


def draw_acceptance(rng: random.Random, family: str) -> tuple:
    """``p_j``, j = 1..12, of one acceptance family.

    * ``geometric``: ``p1 * r^(j-1)``, p1 ~ U(0.6, 0.9), r ~ U(0.85, 1.0).
    * ``plateau``: a level ~ U(0.7, 0.92) for the first J ~ {2..6} positions, then a drop to
      level * U(0.3, 0.65) decaying by U(0.85, 1.0) per position.
    * ``high``: near-constant U(0.85, 0.95), a slight decline and +-0.015 jitter (predictable text).
    * ``low``: p1 ~ U(0.3, 0.5), r ~ U(0.5, 0.8) (speculation may not pay).
    """
    if family == "geometric":
        p1, r = rng.uniform(0.6, 0.9), rng.uniform(0.85, 1.0)
        p = [p1 * r ** j for j in range(POSITIONS)]
    elif family == "plateau":
        level, cut = rng.uniform(0.7, 0.92), rng.randint(2, 6)
        after, r = level * rng.uniform(0.3, 0.65), rng.uniform(0.85, 1.0)
        p = [level + rng.uniform(-0.02, 0.02) if j < cut else after * r ** (j - cut) for j in range(POSITIONS)]
    elif family == "high":
        base, decline = rng.uniform(0.85, 0.95), rng.uniform(0.0, 0.005)
        p = [base - decline * j + rng.uniform(-0.015, 0.015) for j in range(POSITIONS)]
    elif family == "low":
        p1, r = rng.uniform(0.3, 0.5), rng.uniform(0.5, 0.8)
        p = [p1 * r ** j for j in range(POSITIONS)]
    else:
        raise ValueError(f"unknown acceptance family {family!r}")
    return tuple(round(_clip(x), 4) for x in p)


def _family(rng: random.Random, kind: str) -> str:
    if kind == "predictable":
        return "high"
    return rng.choices(("geometric", "plateau", "low", "high"), weights=(0.4, 0.3, 0.2, 0.1))[0]


def draw_world(rng: random.Random, kind: str, name: str = "world", overhead_scale: float = 1.0) -> World:
    """One world of ``kind`` with parameters drawn from ranges around realistic figures.

    ``overhead_scale`` multiplies the drawn verify-mode overhead (0-40%, 25-40% communication-bound):
    0 puts the no-spec decode step on the verify curve, as the advisor before issue 13 assumed.

    Anchors: Llama-8B-class dense targets decode in ~6-8 ms at bs 1 with a verify nearly flat in
    ``n`` at small bs; Kimi-K2.5 (MoE, 384 experts, top-8) at TP8 bs 1 decodes in 11.3 ms and
    verifies 3 tokens in ~21 ms and 6 in ~28 ms. Decode steps land in about 5-40 ms.
    """
    large = kind == "large_batch"
    bs = rng.choice((16, 32, 64) if large else BATCH_SIZES)
    family = _family(rng, kind)
    p = draw_acceptance(rng, family)
    ovh = overhead_scale * (rng.uniform(0.25, 0.40) if kind == "comm" else rng.uniform(0.0, 0.40))
    # Shape parameters in units of the one-token forward, then scaled so shape(bs) = decode_ms.
    if kind in ("dense", "predictable"):
        decode = rng.uniform(5.0, 25.0)
        kw = dict(fixed_ms=1.0, slope_ms=rng.uniform(0.005, 0.04) / 7.0)
    elif kind == "moe":
        decode = rng.uniform(8.0, 40.0)
        e, k = rng.choice((64, 128, 256, 384)), rng.choice((6, 8))
        all_experts = rng.uniform(0.5, 4.0)                 # every expert's weights, vs the fixed part
        kw = dict(fixed_ms=1.0, slope_ms=rng.uniform(0.0005, 0.003),
                  moe_experts=e, moe_topk=k, moe_ms_per_expert=all_experts / e)
    elif kind == "comm":
        decode = rng.uniform(10.0, 40.0)
        kw = dict(fixed_ms=1.0, slope_ms=rng.uniform(0.0002, 0.0015))
    elif kind == "graph_buckets":
        decode = rng.uniform(5.0, 25.0)
        kw = dict(fixed_ms=1.0, slope_ms=rng.uniform(0.008, 0.04), buckets=GRAPH_BUCKETS)
    elif kind == "large_batch":
        decode = rng.uniform(6.0, 30.0)
        knee = rng.choice([t for t in (16, 32, 64, 128) if t <= 2 * bs])
        kw = dict(fixed_ms=1.0, slope_ms=rng.uniform(0.0005, 0.002), knee_tokens=knee,
                  knee_slope_ms=rng.uniform(0.8, 1.2) / knee)
    else:
        raise ValueError(f"unknown kind {kind!r}")
    scale = decode / World(kind=kind, bs=bs, p=p, decode_ms=1.0, **kw).shape(bs)
    for key in ("fixed_ms", "slope_ms", "knee_slope_ms", "moe_ms_per_expert"):
        if key in kw:
            kw[key] *= scale
    step_ms = rng.uniform(0.3, 1.5) * (1.0 + rng.uniform(0.0, 0.5) * (bs - 1) / 63)
    return World(
        kind=kind, bs=bs, p=p, decode_ms=round(decode, 4), verify_overhead=round(ovh, 4), **kw,
        extend_fixed_ms=rng.uniform(0.3, 1.5), extend_slope_ms=rng.uniform(0.0005, 0.004),
        draft_step_ms=step_ms, draft_prep_ms=rng.uniform(0.05, 0.4),
        other_ms=rng.uniform(0.2, 1.0) * (1.0 + 0.3 * bs / 64), gap_ms=rng.uniform(0.02, 0.3),
        noise=rng.uniform(0.02, 0.05), outlier_rate=rng.choice((0.0, 0.002, 0.005, 0.01)),
        outlier_ms=decode * rng.uniform(2.0, 6.0), family=family, name=name,
    )


#: Powers of two up to 2048: padding to kernel tile sizes or a power-of-two graph list (``--wide``).
POW2_BUCKETS = tuple(2 ** i for i in range(12))
#: The decode graph sizes SGLang 0.5.23 captures with speculative decoding, used as token sizes
#: (``--wide``): 1..8, 10..32 by 2, 40..64 by 4, 72..256 by 8, 272..2048 by 16.
SGLANG_0523_BUCKETS = tuple(list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4))
                            + list(range(72, 257, 8)) + list(range(272, 2049, 16)))


def draw_wide_world(rng: random.Random, kind: str, name: str = "world") -> World:
    """One world of ``kind`` from ranges wider than :func:`draw_world`'s, some outside what the
    advisor assumes (a stress test, not a calibration set).

    Differences: bs from 1 to 128 (3, 6, 12, 24, 48, 96 too); decode steps 3-80 ms; a verify-mode
    overhead up to 50% (60% communication-bound, past the advisor's 50%); per-cycle noise 2-12% and
    stalls in up to 2% of cycles; dense slopes up to twice as steep; MoE targets with 8-384 experts
    and top-2 to top-8 routing; CUDA-graph buckets from one of three lists (the old SGLang default
    :data:`GRAPH_BUCKETS`, powers of two, SGLang 0.5.23's sizes); large batches of 32-128 requests
    with a compute knee at 32-512 tokens, up to 4x bs (one run at 3 steps can sit at the knee);
    draft-extend, draft step and host costs over wider ranges.
    """
    large = kind == "large_batch"
    bs = rng.choice((32, 64, 128) if large else (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128))
    family = _family(rng, kind)
    p = draw_acceptance(rng, family)
    ovh = rng.uniform(0.2, 0.6) if kind == "comm" else rng.uniform(0.0, 0.5)
    if kind in ("dense", "predictable"):
        decode = rng.uniform(3.0, 60.0)
        kw = dict(fixed_ms=1.0, slope_ms=rng.uniform(0.001, 0.08) / 7.0)
    elif kind == "moe":
        decode = rng.uniform(8.0, 80.0)
        e, k = rng.choice((8, 64, 128, 256, 384)), rng.choice((2, 6, 8))
        kw = dict(fixed_ms=1.0, slope_ms=rng.uniform(0.0, 0.005), moe_experts=e, moe_topk=k,
                  moe_ms_per_expert=rng.uniform(0.3, 6.0) / e)
    elif kind == "comm":
        decode = rng.uniform(10.0, 80.0)
        kw = dict(fixed_ms=1.0, slope_ms=rng.uniform(0.0, 0.003))
    elif kind == "graph_buckets":
        decode = rng.uniform(5.0, 40.0)
        kw = dict(fixed_ms=1.0, slope_ms=rng.uniform(0.004, 0.05),
                  buckets=rng.choice((GRAPH_BUCKETS, POW2_BUCKETS, SGLANG_0523_BUCKETS)))
    elif kind == "large_batch":
        decode = rng.uniform(6.0, 50.0)
        knee = rng.choice([t for t in (32, 64, 128, 256, 512) if t <= 4 * bs])
        kw = dict(fixed_ms=1.0, slope_ms=rng.uniform(0.0005, 0.004), knee_tokens=knee,
                  knee_slope_ms=rng.uniform(0.6, 1.4) / knee)
    else:
        raise ValueError(f"unknown kind {kind!r}")
    scale = decode / World(kind=kind, bs=bs, p=p, decode_ms=1.0, **kw).shape(bs)
    for key in ("fixed_ms", "slope_ms", "knee_slope_ms", "moe_ms_per_expert"):
        if key in kw:
            kw[key] *= scale
    return World(
        kind=kind, bs=bs, p=p, decode_ms=round(decode, 4), verify_overhead=round(ovh, 4), **kw,
        extend_fixed_ms=rng.uniform(0.2, 3.0), extend_slope_ms=rng.uniform(0.0002, 0.008),
        draft_step_ms=rng.uniform(0.2, 3.0), draft_prep_ms=rng.uniform(0.02, 0.8),
        other_ms=rng.uniform(0.1, 2.0), gap_ms=rng.uniform(0.01, 0.5), noise=rng.uniform(0.02, 0.12),
        outlier_rate=rng.choice((0.0, 0.005, 0.02)), outlier_ms=decode * rng.uniform(2.0, 10.0),
        family=family, name=name,
    )


def make_worlds(n: int, seed: int, wide: bool = False, overhead_scale: float = 1.0) -> list[World]:
    """``n`` worlds cycling over :data:`KINDS`; world ``i`` depends only on ``(seed, i)``.

    ``wide``: drawn by :func:`draw_wide_world` (a separate random stream) instead of :func:`draw_world`.
    ``overhead_scale`` (:func:`draw_world` only): multiplies each world's verify-mode overhead; the
    worlds are otherwise the same draws.

    Raises:
        ValueError: ``overhead_scale`` negative, or not 1 with ``wide``.
    """
    if not overhead_scale >= 0:
        raise ValueError(f"overhead_scale must be >= 0, got {overhead_scale}")
    if wide and overhead_scale != 1.0:
        raise ValueError("overhead_scale applies to draw_world's worlds, not the wide ones")
    if wide:
        return [draw_wide_world(random.Random(f"advise-worlds-wide:{seed}:{i}"), KINDS[i % len(KINDS)],
                                name=f"w{i:02d}-{KINDS[i % len(KINDS)]}") for i in range(n)]
    return [draw_world(random.Random(f"advise-worlds:{seed}:{i}"), KINDS[i % len(KINDS)],
                       name=f"w{i:02d}-{KINDS[i % len(KINDS)]}", overhead_scale=overhead_scale)
            for i in range(n)]


def first_steps(i: int) -> int:
    """Depth of world ``i``'s first run: 3 for worlds 0-5, 5 for 6-11, 3 for 12-17, and so on.

    :func:`make_worlds` cycles over the six kinds, so every kind is started at both depths (a
    plain even/odd split would start each kind at one depth only).
    """
    return 3 if (i // len(KINDS)) % 2 == 0 else 5


# ---- the protocol -----------------------------------------------------------------------------


class AdviseFailed(Exception):
    """``advise`` exited non-zero (``rc``) or crashed; ``line`` is the last stderr line or the error."""

    def __init__(self, rc, line: str):
        super().__init__(f"rc={rc}: {line}")
        self.rc, self.line = rc, line


def advise_in_process(args: list[str]) -> dict:
    """``eagle-cycle advise ARGS`` in this process (``cli.main``), stdout parsed as JSON.

    Raises :class:`AdviseFailed` on an exit code other than 0, a crash or output that is not JSON.
    """
    from sglang_eagle_cycle import cli

    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli.main(["advise", *args])
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 2
    except Exception as exc:  # a crash is a failure of that world, not of the simulator
        raise AdviseFailed(None, f"{type(exc).__name__}: {exc}") from exc
    if rc != 0:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        raise AdviseFailed(rc, lines[-1] if lines else "(no stderr)")
    try:
        return json.loads(out.getvalue())
    except ValueError as exc:
        raise AdviseFailed(rc, f"stdout is not JSON: {exc}") from exc


@dataclass
class ProtocolResult:
    """One world's outcome. ``regret = 1 - true(pick) / max_{S in 0..8} true(S)``.

    ``unmeasured``: for each depth 1..8 no run measured, ``{"steps", "true_tok_s",
    "predicted_tok_s", "tok_s_95", "covered", "width"}`` with ``width = (high - low) /
    predicted_tok_s`` (``covered`` False and ``width`` None when the candidate or its interval
    is missing).
    """

    name: str
    kind: str
    bs: int
    family: str
    first_steps: int
    best: int
    best_tok_s: float
    pick: Optional[int] = None
    pick_tok_s: Optional[float] = None
    regret: Optional[float] = None
    runs: int = 0
    measured: list = field(default_factory=list)
    unmeasured: list = field(default_factory=list)
    failure: Optional[str] = None
    forecast_after: Optional[float] = None
    settled_final: Optional[bool] = None
    regret_95_final: Optional[float] = None

    @property
    def coverage(self) -> Optional[float]:
        if not self.unmeasured:
            return None
        return sum(u["covered"] for u in self.unmeasured) / len(self.unmeasured)


def _pick(doc: dict) -> int:
    rec = doc.get("recommended") or {}
    if rec.get("speculation") == "off" or rec.get("steps") in (None, 0):
        return 0
    return int(rec["steps"])


#: Cycle-line forms :func:`run_protocol` can log a world in (see :func:`design_lines`).
LINE_FORMS = ("spans", "design", "legacy")


def design_lines(lines: list[str], form: str = "design") -> list[str]:
    """``lines`` rewritten without device spans (``draft_prep_ms``, ``gap_ms``), ``total_ms`` being
    the cycle's whole period so that ``tok_s`` is unchanged.

    ``form``: ``"spans"`` returns ``lines`` as they are; ``"design"`` is the line of DESIGN section 3
    as a generator written from that contract would log the same world: ``draft_ms`` holds the
    ``num_steps - 1`` draft forwards only, and the preparation and the gap join ``other_ms``;
    ``"legacy"`` is the plugin's line before device spans: ``draft_ms`` measured from the cycle's
    start, so the preparation is in it (a cost that does not grow with the depth inside a phase
    that does), the gap in ``other_ms``. Lines that do not parse are kept as they are.

    Raises:
        ValueError: ``form`` is not one of :data:`LINE_FORMS`.
    """
    if form not in LINE_FORMS:
        raise ValueError(f"line form {form!r} is not one of {LINE_FORMS}")
    if form == "spans":
        return list(lines)
    out = []
    for line in lines:
        rec = parse_line(line)
        if rec is None or not rec.device_spans:
            out.append(line)
            continue
        prep, gap = rec.draft_prep_ms or 0.0, rec.gap_ms or 0.0
        in_draft = form == "legacy" and rec.draft_ms is not None
        draft = None if rec.draft_ms is None else round(rec.draft_ms + (prep if in_draft else 0.0), 2)
        other = (rec.other_ms or 0.0) + gap + (0.0 if in_draft else prep)
        total = round((draft or 0.0) + rec.verify_ms + rec.extend_ms + other, 2)
        accepts = list(rec.accepts) if rec.accepts is not None else \
            [a for a, k in sorted(rec.histogram().items()) for _ in range(k)]
        new = make_record(cycle=rec.cycle, config=(rec.bs, rec.steps, rec.topk, rec.draft_tokens),
                          phases_ms={"draft_ms": draft, "verify_ms": rec.verify_ms,
                                     "verify_fwd_ms": rec.verify_fwd_ms, "extend_ms": rec.extend_ms,
                                     "total_ms": total},
                          accepts=accepts, graph=rec.graph)
        out.append(line[:line.index("[eagle-cycle]")] + format_line(new))
    return out


def run_protocol(world: World, advise: Callable[[list[str]], dict] = advise_in_process,
                 first_steps: int = 3, rng: Optional[random.Random] = None,
                 workdir: Optional[Path] = None, lines: str = "spans",
                 extra_args: Sequence[str] = ()) -> ProtocolResult:
    """Score ``advise`` on ``world`` by the fixed protocol.

    1. Log a run at ``first_steps`` and call ``advise([log, "--baseline-tok-s", X, "--json",
       "--steps-candidates", "0".."8"])`` with ``X = world.true_tok_s(0)``.
    2. If the JSON's top-level ``settled`` is false (absent counts as settled), log the run its
       top-level ``next_run["steps"]`` names and call advise again with both logs.
    3. The last call's ``recommended.steps`` is the pick (speculation off = 0).

    ``advise`` takes the argument list after ``advise`` and returns the parsed JSON, raising
    :class:`AdviseFailed` (recorded in ``failure``) when the command fails. ``extra_args`` go to
    every call after the protocol's own (``--target-config PATH``: outside the issue's protocol).
    """
    import tempfile

    rng = rng or random.Random(0)
    best = world.best_steps()
    res = ProtocolResult(name=world.name, kind=world.kind, bs=world.bs, family=world.family,
                         first_steps=first_steps, best=best, best_tok_s=world.true_tok_s(best))
    own_tmp = None
    if workdir is None:
        own_tmp = tempfile.TemporaryDirectory(prefix="advise-worlds-")
        workdir = Path(own_tmp.name)
    workdir = Path(workdir)
    tail = ["--baseline-tok-s", repr(world.true_tok_s(0)), "--json",
            "--steps-candidates", *[str(s) for s in DEPTHS], *extra_args]
    logs: list[str] = []

    def log_run(steps: int) -> None:
        path = workdir / f"{world.name}-bs{world.bs}-steps{steps}-run{len(logs) + 1}.log"
        text = design_lines(world.log_lines(steps, None, rng), lines)
        path.write_text("\n".join(text) + "\n")
        logs.append(str(path))
        res.measured.append(steps)
        res.runs += 1

    try:
        log_run(first_steps)
        doc = advise([*logs, *tail])
        if doc.get("settled", True) is False:
            nxt = (doc.get("next_run") or {}).get("steps")
            if not isinstance(nxt, int) or not 1 <= nxt <= POSITIONS:
                raise AdviseFailed(0, f"settled is false but next_run.steps is {nxt!r} (worlds log 1..{POSITIONS})")
            after = (doc.get("next_run") or {}).get("regret_95_after")
            res.forecast_after = float(after) if isinstance(after, (int, float)) else None
            log_run(nxt)
            doc = advise([*logs, *tail])
        res.pick = _pick(doc)
        res.settled_final = doc.get("settled")
        r95 = doc.get("regret_95")
        res.regret_95_final = float(r95) if isinstance(r95, (int, float)) else None
    except AdviseFailed as exc:
        res.failure = f"rc={exc.rc}: {exc.line}"
        return res
    except (KeyError, TypeError, ValueError) as exc:
        res.failure = f"unreadable advise JSON: {type(exc).__name__}: {exc}"
        return res
    finally:
        if own_tmp is not None:
            own_tmp.cleanup()
    res.pick_tok_s = world.true_tok_s(res.pick)
    top = max(world.true_tok_s(s) for s in DEPTHS)
    res.regret = max(0.0, 1.0 - res.pick_tok_s / top)
    cands = {c.get("steps"): c for c in doc.get("candidates") or [] if isinstance(c, dict)}
    for s in range(1, 9):
        if s in res.measured:
            continue
        true = world.true_tok_s(s)
        c = cands.get(s) or {}
        band, pred = c.get("tok_s_95"), c.get("predicted_tok_s")
        entry = {"steps": s, "true_tok_s": true, "predicted_tok_s": pred, "tok_s_95": band,
                 "covered": False, "width": None}
        if isinstance(band, (list, tuple)) and len(band) == 2 and all(isinstance(x, (int, float)) for x in band):
            lo, hi = band
            entry["covered"] = bool(lo <= true <= hi)
            if isinstance(pred, (int, float)) and pred > 0:
                entry["width"] = (hi - lo) / pred
        res.unmeasured.append(entry)
    return res


def score(results: list[ProtocolResult]) -> dict:
    """Summary figures over worlds.

    ``within_2pct``: worlds whose pick has regret <= 2%; ``mean_regret``/``max_regret`` over the
    worlds that did not fail; ``coverage``: share of unmeasured depths 1..8 whose ``tok_s_95``
    holds the true tok/s; ``median_width``: median ``(high - low) / predicted`` over those;
    ``mean_runs``: runs per world; ``failures``: worlds where advise failed. ``forecasts``: over
    the worlds with a second run whose first call forecast a 95th-percentile regret after it of at
    most 2% (``next_run.regret_95_after``), how many there were and how many second calls settled
    (the forecast checked against what the second run showed).
    """
    ok = [r for r in results if r.failure is None]
    regrets = [r.regret for r in ok]
    unm = [u for r in ok for u in r.unmeasured]
    widths = [u["width"] for u in unm if u["width"] is not None]
    return {
        "worlds": len(results),
        "within_2pct": sum(1 for x in regrets if x <= 0.02),
        "mean_regret": statistics.fmean(regrets) if regrets else None,
        "max_regret": max(regrets) if regrets else None,
        "coverage": sum(u["covered"] for u in unm) / len(unm) if unm else None,
        "intervals": len(unm),
        "median_width": statistics.median(widths) if widths else None,
        "mean_runs": statistics.fmean(r.runs for r in results) if results else None,
        "failures": len(results) - len(ok),
        "forecasts": {"settle_forecast": len(fc := [r for r in ok if r.forecast_after is not None
                                                    and r.forecast_after <= 0.02]),
                      "settled": sum(1 for r in fc if r.settled_final)},
        "failure_lines": sorted({r.failure for r in results if r.failure}),
    }
