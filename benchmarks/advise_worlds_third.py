"""A third world generator for ``eagle-cycle advise``, written from the issue's text alone.

Written by another hand than :mod:`advise_worlds_blind`, also without reading :mod:`advise_worlds`
or the advisor's model (``uncertainty``, ``costmodel``, ``advise``): a second out-of-sample check,
whose physics differ from both other generators' (requests of a fixed length that finish and are
replaced, so hard requests fill more cycles; a forward built from weight, expert, KV, per-token
and all-reduce parts; a calibrated Kimi-K2.5-like world in every seed). Scored by the same
protocol: ``python benchmarks/sim_advise.py --third``.

A *world* is one batch size ``bs`` served by EAGLE-3 chain drafting (topk 1, draft_tokens =
steps + 1, depths 1..8 loggable). Units: ms, tokens, tok/s. ``W = b * (steps + 1)`` is the verified
width, ``b`` the batch size padded to a captured size (``graph`` worlds) or ``bs``.

Target forward over ``W`` tokens from ``b`` requests (``soft1(x) = (1 + x^4)^(1/4)``, a smooth
``max(1, x)``)::

    fwd(W) = weight_ms * soft1(W / knee_tokens)
             + expert_ms * D * soft1((W * k / D) / expert_knee_tokens)     D = E * (1 - (1 - k/E)^W)
             + token_ms * W + kv_ms * b * (1 + kv_query_frac * (W / b - 1))
             + tile_ms * ceil(W / tile_tokens)                              (graph worlds only)

``D`` is the expected number of distinct experts ``W`` tokens routed to ``k`` of ``E`` touch.
The no-spec decode step is ``fwd(b) + comm_decode_ms + comm_token_ms * b + decode_host_ms + gap_ms
+ stall mean``. A cycle at ``steps`` (S >= 1): ``verify_fwd = fwd(W) * (1 + verify_mult) +
verify_fixed_ms + comm_verify_ms + comm_token_ms * W``; ``verify = verify_fwd + verify_host_ms +
verify_host_token_ms * W``; ``extend = extend_ms + extend_token_ms * W (+ 0.1 * tile_ms * ceil(W /
tile_tokens))``; ``draft = (S - 1) * draft_step_ms`` and ``draft_prep = draft_prep_ms`` (S >= 2
only); ``other = other_ms + other_req_ms * bs (+ draft_prep_ms / 2 at S = 1)``; plus ``gap_ms``.
All-reduce cost at TP > 1: ``comm_decode_ms = 2 * layers * AR latency``, ``comm_verify_ms`` that
times ``1 + extra``.

Kinds (cycled over the world index ``i``, :data:`KINDS`):

* ``dense``       bs in {1, 1, 2, 4, 8, 16}. Dense target, TP in {1, 1, 2, 4, 8}: weight_ms
                  3.5-14, knee_tokens 48-256, token_ms 0-0.02, kv_ms 0.01-0.12, kv_query_frac
                  0.02-0.15; TP > 1: {32, 48, 64, 80} layers, AR latency 8-20 us, verify extra
                  0-0.3, comm_token_ms 0.002-0.01; verify_mult 0.02-0.25, verify_fixed_ms 0.2-2.5.
* ``moe``         bs in {1, 1, 2, 4, 8, 16}. MoE target from :data:`MOE_MODELS` (E/k 384/8,
                  256/8, 128/8 twice, 128/4, 8/2), TP 8 for E >= 128 (Qwen3-30B-A3B-like aside),
                  else TP in {1, 2, 4}; 35% H20-like (compute-poor). weight_ms 2.5-9; knee_tokens
                  4-16 (H20) / 64-220; all experts' weights 1-4x weight_ms (expert_ms = that / E);
                  expert_knee_tokens 1-4 (H20) / 8-48; token_ms 0.3-1.5 (H20) / 0-0.05; kv_ms
                  0.01-0.1, kv_query_frac 0.02-0.15; 61 layers, AR latency 10-25 us, verify extra
                  0-0.5, comm_token_ms 0.003-0.015 (TP > 1); verify_mult 0.02-0.3, verify_fixed_ms
                  0.3-4. World 1 (the first MoE world of every seed) is instead the Kimi-K2.5-like
                  seed deployment at TP 8 and bs 1: E/k 384/8, weight 6 ms, knee 4, expert 0.06 ms,
                  expert knee 2, p = 0.72, 0.70, then 0.40, tau 0.2, draft step 0.3 ms, calibrated
                  to a decode step of 11.3 ms and a verify forward of 21 ms at 3 tokens and ~28 ms
                  at 6 (best about 2 steps near 94 tok/s; its host parts are drawn as below).
* ``comm``        bs in {1, 1, 2, 4}, TP in {8, 16}; 40% MoE (first three models, knee 64-220,
                  expert knee 8-48, token_ms 0-0.05), else the dense target; then weight_ms
                  1.2-4.5 (weights sharded wide), MoE expert weights 1-3x that; {61, 80, 94, 126}
                  layers, AR latency 15-35 us (TP 8) / 40-80 us (TP 16), verify extra 0-0.4,
                  comm_token_ms 0.005-0.03; the draft step pays its own all-reduces
                  (layers / 61 * 2 * AR * 0.5-1 / 8 more).
* ``graph``       bs in {1, 2, 3, 4, 6, 8, 12}, padded to a captured batch size in {1, 2, 4, 8,
                  16, 24, 32}; 40% MoE, else dense target; a kernel-tile staircase in the
                  verified width: tile_tokens from {4, 8, 16, 32, 64} with 2b <= 4 * tile and
                  tile >= 1.5b (64 when none), tile_ms 0.05-0.25x weight_ms per tile.
* ``largebs``     bs in {32, 48, 64, 96, 128, 160, 256}; 35% MoE (knee 64-256, expert knee
                  8-48, token_ms 0-0.01), else dense with knee 64-256; kv_ms 0.01-0.08,
                  other_req_ms 0.005-0.02, draft step 0.25-0.6 + 0.004 * bs ms.
* ``predictable`` bs in {1, 1, 2, 4, 8}; dense, MoE, or dense at TP 8 over 80 layers (AR
                  15-30 us, verify extra 0-0.3, comm_token_ms 0.005-0.02), a third each; the
                  ``high`` acceptance family; tau 0-0.35.

Acceptance families (``p_j``: conditional acceptance of draft position j = 1..8 for a request of
average difficulty): ``logit-decay`` (all kinds but predictable): ``logit p_j = logit p1 - b * (j -
1) + N(0, 0.08)``, p1 0.55-0.86, b 0-0.35; ``high``: p1 0.85-0.95, then a random walk with steps
N(-0.006, 0.012) clipped to [0.85, 0.95]. Each request's logits are shifted by ``z ~ N(0, tau)``,
tau 0-0.5 (the Kimi-like world 0.2, predictable 0-0.35).

Requests: a stream of 20,000 requests (logit shift ``z``, length 150-1499 tokens), drawn from the
world alone, so every run of a world serves the same requests; the ``bs`` slots start part-way
through their first requests (remaining 10-100%, per run) and a request that finishes is replaced
by the next, after which the next cycle's gap is not logged and the clock loses 20 ms (prefill).
Because a request needs a fixed number of tokens, hard requests fill more cycles: the long-run
accept length is the harmonic mean ``1 / E_z[1 / L(z)]`` (Gauss-Hermite over ``z``), which
``true_tok_s`` uses.

Other phases (every world): draft_step_ms 0.18-0.5 + 0.003 * bs (+ 0.06 * TP / 8 at TP > 1),
draft_prep_ms 0.08-0.35, extend_ms 0.3-0.8 (+ 0.1 at TP > 1), extend_token_ms 0.001-0.006,
other_ms 0.15-1.0, other_req_ms 0-0.01, gap_ms 0.03-0.35, verify_host_ms 0.15-0.7,
verify_host_token_ms 0-0.004, decode_host_ms 0.1-0.6. Noise per cycle: a shared mean-one
lognormal (sd 0.005-0.04) times a per-phase one (sd 0.01-0.05); stalls with probability 0, 0.1%,
0.3% or 1% per cycle, exponential with mean 3-40 ms, 70% in ``other``, 30% in the verify forward.
``true_tok_s`` uses the mean phases, stall mean included.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from sglang_eagle_cycle.cycle import format_line, make_record

#: World kinds; :func:`make_worlds` cycles over them by world index.
KINDS = ("dense", "moe", "comm", "graph", "largebs", "predictable")
#: Acceptance families (``predictable`` worlds draw ``high``, the rest ``logit-decay``).
FAMILIES = ("logit-decay", "high")
#: Deepest depth a world can log (conditional acceptances modelled).
MAX_STEPS = 8
#: Cycles a run logs when :meth:`World.log_lines` is given ``cycles=None``.
CYCLES = 3000
#: Requests in a world's request stream (the stream wraps around past them).
REQUESTS = 20000
#: Routed MoE models: (label, experts E, experts per token k).
MOE_MODELS = (("Kimi-K2-like", 384, 8), ("DeepSeek-V3-like", 256, 8), ("Qwen3-235B-like", 128, 8),
              ("Qwen3-30B-A3B-like", 128, 8), ("gpt-oss-120b-like", 128, 4), ("Mixtral-8x7B-like", 8, 2))
#: Batch sizes ``graph`` worlds pad to (SGLang-like captured sizes).
CAPTURED_BS = (1, 2, 4, 8, 16, 24, 32)
#: The log prefix's clock at a run's first cycle (2025-11-30 12:00:00 UTC, seconds since the epoch).
LOG_START = 1764504000.0
#: World index of the calibrated Kimi-K2.5-like world (the first ``moe`` world of every seed).
KIMI_INDEX = KINDS.index("moe")

_GH_X, _GH_W = np.polynomial.hermite_e.hermegauss(40)  # probabilists' Gauss-Hermite
_GH_W = _GH_W / _GH_W.sum()


def _soft1(x, p: float = 4.0):
    """Smooth ``max(1, x)``: ``(1 + x^p)^(1/p)``."""
    return (1.0 + np.asarray(x, float) ** p) ** (1.0 / p)


def _logit(p: float) -> float:
    return math.log(p / (1 - p))


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


@dataclass
class World:
    """One hidden serving situation (the module docstring gives the cost model and the ranges).

    Attributes (ms unless stated):
        kind, family, name, desc: labels (:data:`KINDS`, :data:`FAMILIES`, a table label, the
            drawn target in words).
        bs: requests in the batch; bs_pad: captured batch size the forward pads to (0 = bs).
        p: conditional acceptance of draft positions 1..8 at logit shift 0 (probabilities).
        tau: sd of the per-request logit shift.
        weight_ms, knee_tokens (tokens): dense weight read and the width where it turns compute bound.
        moe_experts, moe_topk: routed experts E and experts per token k (0 = dense).
        expert_ms: one expert's weights over all layers; expert_knee_tokens (tokens per expert).
        token_ms: per verified token (ms/token); kv_ms: KV read per request; kv_query_frac: extra
            share of a request's KV cost per extra query token.
        comm_decode_ms, comm_verify_ms: all-reduce latency per decode / verify forward;
            comm_token_ms: all-reduce payload per token (ms/token).
        verify_mult (fraction), verify_fixed_ms: target-verify mode's extra over the forward.
        verify_host_ms, verify_host_token_ms (ms/token): verify's host part (verify - verify_fwd).
        tile_tokens (tokens, 0 = none), tile_ms: kernel-tile staircase, ms per tile.
        decode_host_ms: the no-spec decode step's host overhead.
        draft_step_ms, draft_prep_ms, extend_ms, extend_token_ms (ms/token), other_ms,
            other_req_ms (ms/request), gap_ms: the other phases.
        noise_common, noise_phase: sd of the per-cycle shared and per-phase mean-one lognormals.
        stall_rate (per cycle), stall_ms (mean of the exponential stall).
        request_seed: seed of the world's request stream (the same in every run).
    """

    kind: str = ""
    bs: int = 1
    p: list = field(default_factory=list)
    tau: float = 0.0
    weight_ms: float = 5.0
    knee_tokens: float = 100.0
    moe_experts: int = 0
    moe_topk: int = 0
    expert_ms: float = 0.0
    expert_knee_tokens: float = 1e9
    token_ms: float = 0.0
    kv_ms: float = 0.0
    kv_query_frac: float = 0.0
    comm_decode_ms: float = 0.0
    comm_verify_ms: float = 0.0
    comm_token_ms: float = 0.0
    verify_mult: float = 0.0
    verify_fixed_ms: float = 0.0
    verify_host_ms: float = 0.3
    verify_host_token_ms: float = 0.0
    tile_tokens: int = 0
    tile_ms: float = 0.0
    bs_pad: int = 0
    decode_host_ms: float = 0.3
    draft_step_ms: float = 0.3
    draft_prep_ms: float = 0.2
    extend_ms: float = 0.4
    extend_token_ms: float = 0.002
    other_ms: float = 0.3
    other_req_ms: float = 0.0
    gap_ms: float = 0.1
    noise_common: float = 0.02
    noise_phase: float = 0.03
    stall_rate: float = 0.002
    stall_ms: float = 10.0
    request_seed: int = 0
    family: str = "logit-decay"
    desc: str = ""
    name: str = "world"

    # ---- costs (noise-free means) -------------------------------------------------------------

    def padded_bs(self) -> int:
        """Requests the forward runs over: ``bs_pad`` or ``bs``."""
        return self.bs_pad or self.bs

    def forward_ms(self, width: int, requests: int) -> float:
        """Target forward over ``width`` tokens from ``requests`` requests (ms): weight, expert, per-token,
        KV and tile parts, without the mode overheads or all-reduces."""
        c = self.weight_ms * _soft1(width / self.knee_tokens)
        if self.moe_experts:
            distinct = self.moe_experts * (1 - (1 - self.moe_topk / self.moe_experts) ** width)
            per_expert = width * self.moe_topk / distinct
            c += self.expert_ms * distinct * _soft1(per_expert / self.expert_knee_tokens)
        c += self.token_ms * width
        c += self.kv_ms * requests * (1 + self.kv_query_frac * (width / requests - 1))
        if self.tile_tokens:
            c += self.tile_ms * math.ceil(width / self.tile_tokens)
        return float(c)

    def stall_mean_ms(self) -> float:
        """Mean stall per cycle: ``stall_rate * stall_ms`` (ms)."""
        return self.stall_rate * self.stall_ms

    def decode_ms(self) -> float:
        """The no-spec decode step's period (ms), gap and stall mean included."""
        b = self.padded_bs()
        return (self.forward_ms(b, b) + self.comm_decode_ms + self.comm_token_ms * b + self.decode_host_ms
                + self.gap_ms + self.stall_mean_ms())

    def mean_phases(self, steps: int) -> dict:
        """Mean phase costs (ms) of a cycle at ``steps >= 1``: the line's ``draft_prep_ms``, ``draft_ms``
        (``None`` at 1 step), ``verify_fwd_ms``, ``verify_ms``, ``extend_ms``, ``other_ms`` and ``gap_ms``,
        stalls excluded."""
        b = self.padded_bs()
        w = b * (steps + 1)
        fwd = (self.forward_ms(w, b) * (1 + self.verify_mult) + self.verify_fixed_ms + self.comm_verify_ms
               + self.comm_token_ms * w)
        extend = self.extend_ms + self.extend_token_ms * w
        if self.tile_tokens:
            extend += self.tile_ms * 0.1 * math.ceil(w / self.tile_tokens)
        return {
            "draft_prep_ms": self.draft_prep_ms if steps >= 2 else None,
            "draft_ms": (steps - 1) * self.draft_step_ms if steps >= 2 else None,
            "verify_fwd_ms": fwd,
            "verify_ms": fwd + self.verify_host_ms + self.verify_host_token_ms * w,
            "extend_ms": extend,
            "other_ms": self.other_ms + self.other_req_ms * self.bs + (self.draft_prep_ms * 0.5 if steps == 1 else 0.0),
            "gap_ms": self.gap_ms,
        }

    def period_ms(self, steps: int) -> float:
        """Mean cycle period at ``steps >= 1`` (ms): the phases, gap and stall mean."""
        ph = self.mean_phases(steps)
        keys = ("draft_prep_ms", "draft_ms", "verify_ms", "extend_ms", "other_ms", "gap_ms")
        return sum(ph[k] or 0.0 for k in keys) + self.stall_mean_ms()

    def accept_len(self, steps: int) -> float:
        """Long-run accept length per request per cycle (tokens, bonus included): ``1 / E_z[1 / L(z)]``
        with ``L(z) = 1 + sum_j prod_{i<=j} sig(logit p_i + z)``, ``z ~ N(0, tau)``; 1 at 0 steps."""
        if steps == 0:
            return 1.0
        lp = np.array([_logit(x) for x in self.p[:steps]])
        inv = 0.0
        for x, wt in zip(_GH_X, _GH_W):
            inv += wt / (1 + np.cumprod(_sig(lp + self.tau * x)).sum())
        return float(1.0 / inv)

    def true_tok_s(self, steps: int) -> float:
        """Noise-free throughput of the batch (tok/s): ``1000 * bs / decode_ms()`` at 0 steps, else
        ``1000 * bs * accept_len(steps) / period_ms(steps)``."""
        if steps == 0:
            return float(1000.0 * self.bs / self.decode_ms())
        return float(1000.0 * self.bs * self.accept_len(steps) / self.period_ms(steps))

    def best_steps(self) -> int:
        """The depth in 0..8 with the highest :meth:`true_tok_s` (the smallest on ties)."""
        return max(range(MAX_STEPS + 1), key=lambda s: (self.true_tok_s(s), -s))

    # ---- logs ---------------------------------------------------------------------------------

    def requests(self) -> tuple:
        """The world's request stream: per-request logit shifts and lengths (tokens), :data:`REQUESTS`
        of each, the same in every run."""
        g = np.random.default_rng(self.request_seed)
        z = g.normal(0, self.tau, REQUESTS) if self.tau > 0 else np.zeros(REQUESTS)
        length = g.integers(150, 1500, REQUESTS)
        return z, length

    def simulate(self, steps: int, cycles: int, g: np.random.Generator) -> list:
        """``[eagle-cycle]`` lines of a run at ``steps`` (1..8) of ``cycles`` cycles, the run's noise,
        acceptance draws and starting points drawn from ``g`` (the requests from the world)."""
        if not 1 <= steps <= MAX_STEPS:
            raise ValueError(f"steps {steps} outside 1..{MAX_STEPS}")
        z_all, len_all = self.requests()
        bs = self.bs
        nxt = bs
        slot_z = z_all[:bs].copy()
        slot_rem = len_all[:bs].astype(float).copy()
        slot_rem *= g.uniform(0.1, 1.0, bs)  # requests part-way through at the run's start
        lp = np.array([_logit(x) for x in self.p[:steps]])
        nom = self.mean_phases(steps)
        sc, sp = self.noise_common, self.noise_phase
        lines = []
        t = LOG_START
        gap_unknown = True
        for c in range(cycles):
            ok = g.random((bs, steps)) < _sig(lp[None, :] + slot_z[:, None])
            acc = 1 + np.cumprod(ok, axis=1).sum(axis=1)
            slot_rem -= acc
            prefill = False
            for k in np.nonzero(slot_rem <= 0)[0]:
                slot_z[k] = z_all[nxt % len(z_all)]
                slot_rem[k] = len_all[nxt % len(len_all)]
                nxt += 1
                prefill = True
            shared = math.exp(g.normal(-sc ** 2 / 2, sc))
            ph = {k: None if v is None else v * shared * math.exp(g.normal(-sp ** 2 / 2, sp)) for k, v in nom.items()}
            if self.stall_rate and g.random() < self.stall_rate:
                stall = g.exponential(self.stall_ms)
                ph["other_ms" if g.random() < 0.7 else "verify_fwd_ms"] += stall
            host = (nom["verify_ms"] - nom["verify_fwd_ms"]) * shared * math.exp(g.normal(-sp ** 2 / 2, sp))
            ph["verify_ms"] = ph["verify_fwd_ms"] + host
            total = sum(ph[k] or 0.0 for k in ("draft_prep_ms", "draft_ms", "verify_ms", "extend_ms", "other_ms"))
            phases = {"draft_prep_ms": ph["draft_prep_ms"], "draft_ms": ph["draft_ms"], "verify_ms": ph["verify_ms"],
                      "verify_fwd_ms": ph["verify_fwd_ms"], "extend_ms": ph["extend_ms"], "total_ms": total,
                      "gap_ms": None if gap_unknown else ph["gap_ms"]}
            rec = make_record(cycle=c + 1, config=(bs, steps, 1, steps + 1), phases_ms=phases,
                              accepts=[int(a) for a in acc], graph=True)
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))
            lines.append(f"[{stamp} TP0] " + format_line(rec))
            t += (total + (ph["gap_ms"] or 0)) / 1000.0
            gap_unknown = prefill  # the cycle after a prefill batch has no gap
            if prefill:
                t += 0.02 + 0.0001 * g.random()
        return lines

    def log_lines(self, steps: int, cycles: Optional[int], rng: random.Random) -> list:
        """Per-cycle ``[eagle-cycle]`` lines of a run at ``steps`` (1..8), behind an SGLang log prefix
        whose clock starts at :data:`LOG_START`. ``cycles=None`` logs :data:`CYCLES`. The run's draws
        come from ``rng`` (one 64-bit draw seeds them); the requests are the world's own."""
        return self.simulate(steps, CYCLES if cycles is None else cycles,
                             np.random.default_rng(rng.getrandbits(64)))


# ---- drawing worlds ---------------------------------------------------------------------------


def _accept_profile(r: np.random.Generator, high: bool = False) -> list:
    if high:
        ps = [r.uniform(0.85, 0.95)]
        for _ in range(1, MAX_STEPS):
            ps.append(float(np.clip(ps[-1] + r.normal(-0.006, 0.012), 0.85, 0.95)))
        return ps
    p1 = r.uniform(0.55, 0.86)
    b = r.uniform(0.0, 0.35)
    return [float(_sig(_logit(p1) - b * j + r.normal(0, 0.08))) for j in range(MAX_STEPS)]


def _noise(r: np.random.Generator, w: World) -> None:
    w.noise_common = r.uniform(0.005, 0.04)
    w.noise_phase = r.uniform(0.01, 0.05)
    w.stall_rate = float(r.choice([0.0, 0.001, 0.003, 0.01]))
    w.stall_ms = r.uniform(3, 40)


def _host_parts(r: np.random.Generator, w: World, tp: int) -> None:
    w.draft_step_ms = r.uniform(0.18, 0.5) + 0.003 * w.bs + (0.06 * tp / 8 if tp > 1 else 0)
    w.draft_prep_ms = r.uniform(0.08, 0.35)
    w.extend_ms = r.uniform(0.3, 0.8) + (0.1 if tp > 1 else 0)
    w.extend_token_ms = r.uniform(0.001, 0.006)
    w.other_ms = r.uniform(0.15, 1.0)
    w.other_req_ms = r.uniform(0.0, 0.01)
    w.gap_ms = r.uniform(0.03, 0.35)
    w.verify_host_ms = r.uniform(0.15, 0.7)
    w.verify_host_token_ms = r.uniform(0.0, 0.004)
    w.decode_host_ms = r.uniform(0.1, 0.6)


def _tp_comm(tp: int, layers: int, ar_us: float, verify_extra: float) -> tuple:
    """All-reduce latency per decode and per verify forward (ms): two per layer."""
    if tp == 1:
        return 0.0, 0.0
    base = layers * 2 * ar_us / 1000.0
    return base, base * (1 + verify_extra)


def _dense_target(r: np.random.Generator, w: World) -> int:
    tp = int(r.choice([1, 1, 2, 4, 8]))
    w.weight_ms = r.uniform(3.5, 14)
    w.knee_tokens = r.uniform(48, 256)
    w.token_ms = r.uniform(0.0, 0.02)
    w.kv_ms = r.uniform(0.01, 0.12)
    w.kv_query_frac = r.uniform(0.02, 0.15)
    layers, ar_us, extra = int(r.choice([32, 48, 64, 80])), r.uniform(8, 20), r.uniform(0, 0.3)
    w.comm_decode_ms, w.comm_verify_ms = _tp_comm(tp, layers, ar_us, extra)
    w.comm_token_ms = 0.0 if tp == 1 else r.uniform(0.002, 0.01)
    w.verify_mult = r.uniform(0.02, 0.25)
    w.verify_fixed_ms = r.uniform(0.2, 2.5)
    return tp


def _moe_target(r: np.random.Generator, w: World, model: Optional[tuple] = None) -> tuple:
    name, experts, topk = MOE_MODELS[int(r.integers(len(MOE_MODELS)))] if model is None else model
    tp = 8 if experts >= 128 and name != "Qwen3-30B-A3B-like" else int(r.choice([1, 2, 4]))
    h20 = r.random() < 0.35
    w.moe_experts, w.moe_topk = experts, topk
    w.weight_ms = r.uniform(2.5, 9)
    w.knee_tokens = r.uniform(4, 16) if h20 else r.uniform(64, 220)
    w.expert_ms = r.uniform(1.0, 4.0) * w.weight_ms / experts
    w.expert_knee_tokens = r.uniform(1, 4) if h20 else r.uniform(8, 48)
    w.token_ms = r.uniform(0.3, 1.5) if h20 else r.uniform(0.0, 0.05)
    w.kv_ms = r.uniform(0.01, 0.1)
    w.kv_query_frac = r.uniform(0.02, 0.15)
    ar_us, extra = r.uniform(10, 25), r.uniform(0, 0.5)
    w.comm_decode_ms, w.comm_verify_ms = _tp_comm(tp, 61, ar_us, extra)
    w.comm_token_ms = 0.0 if tp == 1 else r.uniform(0.003, 0.015)
    w.verify_mult = r.uniform(0.02, 0.3)
    w.verify_fixed_ms = r.uniform(0.3, 4.0)
    return name, tp, h20


def _kimi(r: np.random.Generator, w: World) -> None:
    """The Kimi-K2.5-like seed deployment: TP 8, bs 1, decode 11.3 ms, verify forward 21 ms at 3 tokens
    and ~28 ms at 6; host parts drawn."""
    w.bs = 1
    w.moe_experts, w.moe_topk = 384, 8
    w.weight_ms, w.knee_tokens, w.expert_ms, w.expert_knee_tokens, w.token_ms = 6.0, 4.0, 0.06, 2.0, 0.5
    w.kv_ms, w.kv_query_frac = 0.05, 0.1
    w.comm_decode_ms, w.comm_verify_ms, w.comm_token_ms = 2.4, 3.4, 0.01
    w.verify_mult, w.verify_fixed_ms = 0.1, 0.0
    w.p = [0.72, 0.70, 0.40, 0.40, 0.40, 0.40, 0.40, 0.40]
    _host_parts(r, w, 8)
    w.draft_step_ms = 0.3
    w.tau = 0.2
    # the verify forward's slope from 3 to 6 tokens to ~7 ms (through the per-token part), then its
    # level at 3 tokens to 21 ms, then the decode step to 11.3 ms (the per-token part is in it too)
    v3, v6 = w.mean_phases(2)["verify_fwd_ms"], w.mean_phases(5)["verify_fwd_ms"]
    w.token_ms += (7 - (v6 - v3)) / 3
    w.verify_fixed_ms += 21 - w.mean_phases(2)["verify_fwd_ms"]
    w.decode_host_ms += 11.3 - w.decode_ms()
    w.desc = "Kimi-K2.5-like seed deployment TP8 (calibrated)"


def draw_world(r: np.random.Generator, kind: str, kimi: bool = False) -> World:
    """One world of ``kind`` (:data:`KINDS`) from ``r``; ``kimi`` (a ``moe`` world only): the calibrated
    Kimi-K2.5-like world instead of a drawn MoE target. Labels (``name``, ``request_seed``) are the
    caller's."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}")
    w = World(kind=kind)
    _noise(r, w)
    w.tau = r.uniform(0.0, 0.5)
    if kind == "dense":
        w.bs = int(r.choice([1, 1, 2, 4, 8, 16]))
        tp = _dense_target(r, w)
        w.p = _accept_profile(r)
        _host_parts(r, w, tp)
        w.desc = f"dense TP{tp} weight={w.weight_ms:.1f}ms knee={w.knee_tokens:.0f}"
    elif kind == "moe":
        w.bs = int(r.choice([1, 1, 2, 4, 8, 16]))
        if kimi:
            _kimi(r, w)
        else:
            name, tp, h20 = _moe_target(r, w)
            w.p = _accept_profile(r)
            _host_parts(r, w, tp)
            w.desc = (f"{name} TP{tp} {'H20-like' if h20 else 'H100-like'} weight={w.weight_ms:.1f}ms "
                      f"expert={w.expert_ms:.3f}ms")
    elif kind == "comm":
        w.bs = int(r.choice([1, 1, 2, 4]))
        tp = int(r.choice([8, 16]))
        if r.random() < 0.4:
            name, _, _ = _moe_target(r, w, MOE_MODELS[int(r.integers(3))])
            w.knee_tokens, w.expert_knee_tokens, w.token_ms = r.uniform(64, 220), r.uniform(8, 48), r.uniform(0, 0.05)
        else:
            _dense_target(r, w)
            name = "dense"
        w.weight_ms = r.uniform(1.2, 4.5)
        if w.moe_experts:
            w.expert_ms = r.uniform(1.0, 3.0) * w.weight_ms / w.moe_experts
        layers = int(r.choice([61, 80, 94, 126]))
        ar_us = r.uniform(15, 35) if tp == 8 else r.uniform(40, 80)
        w.comm_decode_ms, w.comm_verify_ms = _tp_comm(tp, layers, ar_us, r.uniform(0, 0.4))
        w.comm_token_ms = r.uniform(0.005, 0.03)
        w.p = _accept_profile(r)
        _host_parts(r, w, tp)
        w.draft_step_ms += layers / 61 * 2 * ar_us / 1000 * r.uniform(0.5, 1.0) / 8  # the draft's own all-reduces
        w.desc = (f"comm-bound {name} TP{tp} layers={layers} AR={ar_us:.0f}us comm={w.comm_decode_ms:.1f}ms "
                  f"weight={w.weight_ms:.1f}ms")
    elif kind == "graph":
        w.bs = int(r.choice([1, 2, 3, 4, 6, 8, 12]))
        if r.random() < 0.4:
            name, tp, _ = _moe_target(r, w)
        else:
            tp, name = _dense_target(r, w), "dense"
        w.bs_pad = b = min(c for c in CAPTURED_BS if c >= w.bs)
        w.tile_tokens = int(r.choice([t for t in (4, 8, 16, 32, 64) if b * 2 <= t * 4 and t >= b * 1.5] or [64]))
        w.tile_ms = r.uniform(0.05, 0.25) * w.weight_ms
        w.p = _accept_profile(r)
        _host_parts(r, w, tp)
        w.desc = (f"graph-buckets {name} TP{tp} bs_pad={b} tile={w.tile_tokens} step={w.tile_ms:.2f}ms "
                  f"weight={w.weight_ms:.1f}ms")
    elif kind == "largebs":
        w.bs = int(r.choice([32, 48, 64, 96, 128, 160, 256]))
        if r.random() < 0.35:
            name, tp, _ = _moe_target(r, w)
            w.knee_tokens, w.expert_knee_tokens, w.token_ms = r.uniform(64, 256), r.uniform(8, 48), r.uniform(0, 0.01)
        else:
            tp, name = _dense_target(r, w), "dense"
            w.knee_tokens = r.uniform(64, 256)
        w.kv_ms = r.uniform(0.01, 0.08)
        w.p = _accept_profile(r)
        _host_parts(r, w, tp)
        w.other_req_ms = r.uniform(0.005, 0.02)
        w.draft_step_ms = r.uniform(0.25, 0.6) + 0.004 * w.bs
        w.desc = f"large-bs {name} TP{tp} knee={w.knee_tokens:.0f} weight={w.weight_ms:.1f}ms kv={w.kv_ms:.3f}ms"
    else:  # predictable
        w.bs = int(r.choice([1, 1, 2, 4, 8]))
        core = int(r.integers(3))
        if core == 0:
            tp, name = _dense_target(r, w), "dense"
        elif core == 1:
            name, tp, _ = _moe_target(r, w)
        else:
            tp, name = 8, "dense-comm"
            _dense_target(r, w)
            ar_us, extra = r.uniform(15, 30), r.uniform(0, 0.3)
            w.comm_decode_ms, w.comm_verify_ms = _tp_comm(8, 80, ar_us, extra)
            w.comm_token_ms = r.uniform(0.005, 0.02)
        w.p = _accept_profile(r, high=True)
        w.family = "high"
        w.tau = r.uniform(0.0, 0.35)
        _host_parts(r, w, tp)
        w.desc = f"predictable {name} TP{tp} weight={w.weight_ms:.1f}ms"
    return w


def make_worlds(n: int, seed: int) -> list:
    """``n`` worlds cycling over :data:`KINDS`; world ``i`` depends only on ``(seed, i)``, its request
    stream too. World :data:`KIMI_INDEX` (the first ``moe`` world) is the calibrated Kimi-K2.5-like one."""
    out = []
    for i in range(n):
        kind = KINDS[i % len(KINDS)]
        r = np.random.default_rng(random.Random(f"advise-worlds-third:{seed}:{i}").getrandbits(128))
        w = draw_world(r, kind, kimi=i == KIMI_INDEX)
        w.request_seed = random.Random(f"advise-worlds-third-requests:{seed}:{i}").getrandbits(64)
        w.name = f"{kind}-{i:03d}-bs{w.bs}-{'kimi' if i == KIMI_INDEX else w.family}-s{seed}"
        out.append(w)
    return out


if __name__ == "__main__":
    for w in make_worlds(12, 0):
        tps = " ".join(f"{w.true_tok_s(s):7.1f}" for s in range(MAX_STEPS + 1))
        print(f"{w.kind:11s} bs={w.bs:<3d} {w.family:11s} best={w.best_steps()} | {tps} | {w.desc}")
