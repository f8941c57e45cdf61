"""A second world generator for ``eagle-cycle advise``, written from the issue's text alone.

Written without reading :mod:`advise_worlds` or the advisor's model (``uncertainty``,
``costmodel``, ``advise``), from the issue's description of the held-back worlds (one batch size,
per-position acceptance, a no-spec decode step, phase costs as functions of the verified width in
six shapes, noise) and the seed deployment's figures: an out-of-sample check of the advisor, whose
own worlds (:mod:`advise_worlds`) were drawn by the people who wrote the model. Scored by the same
protocol: ``python benchmarks/sim_advise.py --blind`` (``--iid`` for :func:`make_worlds`'s ``iid``).

A *world* is one batch size ``bs`` served by EAGLE-3 chain drafting (topk 1, draft_tokens =
steps + 1). It has a per-position conditional acceptance, a no-spec decode step, phase costs
as functions of the verified width ``W = bs * (steps + 1)``, and noise. Kinds (cycled over i):

* ``dense``       8B-70B dense target, TP 1-4 on NVLink; bs 1..16. Forward cost =
                  smoothmax(weight read 3.5-12 ms + bs * KV read, W * flop 0.01-0.06 ms/token)
                  + W * 0.002-0.02 ms; target-verify mode adds a fixed 0.3-3 ms over decode.
* ``moe``         MoE (E in 64/128/256/384 experts, top-2/6/8); bs 1..16. Expert cost grows with
                  the expected number of distinct experts touched, E*(1-(1-k/E)^W), so the verify
                  grows ~0.5-2.5 ms per extra token at small W and saturates; verify-mode extra
                  1-7 ms (Kimi-K2.5 at TP 8: decode 11.3 ms, verify ~21 ms @3 tok, ~28 ms @6).
* ``comm``        dense target bound by TP all-reduce: 2 * 32-80 layers all-reduces, latency
                  8-60 us each, stepping up 1.5-3x above a message-size threshold (4-64 tokens),
                  plus 0.2-3 us per token per all-reduce (PCIe-like); bs 1..16.
* ``cudagraph``   dense or MoE core; verify and draft-extend padded up to captured token counts
                  (powers of two, or SGLang-like 1,2,4,8,12,16,24,32,...), with per-bucket kernel
                  jitter; bs 1..32 (the decode step padded to captured batch sizes too).
* ``largebatch``  dense or MoE core at bs 24..64 with a low compute knee: verify turns
                  compute bound past a few hundred tokens.
* ``predictable`` very predictable text: per-position acceptance ~0.85-0.96 (flat, slowly
                  decaying, or an easy/hard mixture with mostly easy text); dense or MoE; bs 1..8.

Acceptance families (conditional p_k for draft position k, chain: a request's accept length is
1 + number of leading accepted drafts): ``geometric`` p1 0.5-0.85 decaying by 0.85-1.0 per
position; ``flat`` 0.45-0.85; ``plateau`` high for 2-5 positions then 0.6-0.85x lower;
``cliff`` high for 1-4 positions then 0.05-0.3; ``rising`` from 0.4-0.7 up to 0.75-0.92;
``mixture`` a per-request two-state Markov chain (easy 0.85-0.95 / hard 0.2-0.5, easy share
0.2-0.6, switching 2-20% per cycle). Non-mixture families carry per-request logit offsets
(sd 0-0.6), redrawn when a request is replaced (0.2-2% per cycle). Expected accept lengths
integrate over those (Gauss-Hermite), so ``true_tok_s`` is exact for the sampler.

Other phases: draft step 0.15-0.8 ms per forward (x(1 + 0.005-0.03 * bs), steps - 1 forwards),
draft_prep 0.08-0.4 ms, draft-extend 0.2-0.9 ms + 0.002-0.02 ms/token, verify host part
(verify - verify_fwd) 0.15-1.0 ms + per request and per token, other 0.2-1.2 ms + per request +
per token, gap 0.03-0.6 ms + per request. Noise: per-cycle shared lognormal (sd 0.005-0.04) times
a slow AR(1) drift (sd 0-0.03), per-phase lognormal (device 0.01-0.08, host 0.05-0.3), all with
mean 1; stalls with probability 0-2% per cycle, lognormal median 3-40 ms, landing in gap or other.
``true_tok_s`` uses mean phase costs, stall means included.
"""

from __future__ import annotations

import math
import random
import time
from typing import Optional

import numpy as np

from sglang_eagle_cycle.cycle import format_line, make_record

KINDS = ("dense", "moe", "comm", "cudagraph", "largebatch", "predictable")
FAMILIES = ("geometric", "flat", "plateau", "cliff", "rising", "mixture")
KMAX = 16  # acceptance positions modelled
_GH_X, _GH_W = np.polynomial.hermite_e.hermegauss(21)
_GH_W = _GH_W / _GH_W.sum()


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def _logit(p):
    p = np.clip(p, 1e-4, 1 - 1e-4)
    return np.log(p / (1 - p))


def _smax(a, b, p):
    return (a ** p + b ** p) ** (1.0 / p)


def _chain_mean(p: np.ndarray, steps: int) -> float:
    """E[accept length] for conditional acceptances p[0..steps-1] (bonus included)."""
    return 1.0 + float(np.cumprod(p[:steps]).sum()) if steps else 1.0


class World:
    def __init__(self, seed: int, i: int):
        g = np.random.default_rng([seed, i, 7919])
        u = lambda a, b: float(g.uniform(a, b))
        self.kind = kind = KINDS[i % len(KINDS)]
        # ---- batch size
        if kind == "largebatch":
            bs = int(g.choice([24, 32, 40, 48, 64]))
        elif kind == "cudagraph":
            bs = int(g.choice([1, 2, 3, 4, 6, 8, 12, 16, 24, 32]))
        elif kind == "predictable":
            bs = int(g.choice([1, 1, 2, 4, 8]))
        else:
            bs = int(g.choice([1, 1, 2, 3, 4, 8, 12, 16]))
        self.bs = bs
        # ---- target core cost
        moe = kind == "moe" or (kind in ("cudagraph", "largebatch", "predictable") and g.random() < 0.4)
        self.moe = moe
        self.smooth_p = u(2.0, 6.0)
        self.kv = u(0.005, 0.15)  # per-request KV read, ms
        self.lin = u(0.002, 0.02)  # per-token attention/misc compute, ms
        if moe:
            self.E = int(g.choice([64, 128, 256, 384]))
            self.topk = int(g.choice([2, 6, 8])) if self.E <= 128 else 8
            self.exp_unit = u(0.5, 2.5)  # ms per "k experts" of distinct expert load
            self.m0 = u(4.0, 9.0)  # non-expert part (attention, shared expert, all-reduce)
            self.flop = u(0.004, 0.02)
            self.vextra = u(1.0, 7.0)
        else:
            self.m0 = u(3.5, 12.0)
            self.flop = u(0.01, 0.06)
            self.vextra = u(0.3, 3.0)
        if kind == "largebatch":
            self.flop *= u(1.2, 2.5)  # lower knee: compute bound sooner
        self.comm = kind == "comm"
        if self.comm:
            self.n_ar = 2 * int(g.integers(32, 81))
            self.ar_lat = u(0.008, 0.06)
            self.ar_thr = int(g.choice([4, 8, 16, 32, 64]))
            self.ar_jump = u(1.5, 3.0)
            self.ar_beta = u(0.0002, 0.003)
            self.m0 *= u(0.5, 0.9)  # weights sharded wider
        self.buckets = None
        if kind == "cudagraph":
            if g.random() < 0.5:
                self.buckets = [2 ** j for j in range(12)]
            else:
                self.buckets = [1, 2, 4, 8, 12, 16, 24] + list(range(32, 257, 16)) + list(range(288, 4097, 32))
            self.bucket_jit = {b: u(0.97, 1.06) for b in self.buckets}
            self.lin *= u(1.5, 4.0)
        # ---- other phases
        self.d0, self.dg, self.dfix = u(0.15, 0.8), u(0.005, 0.03), u(0.02, 0.1)
        self.prep0, self.prep_r = u(0.08, 0.4), u(0.0, 0.004)
        self.e0, self.e1 = u(0.2, 0.9), u(0.002, 0.02)
        self.vh0, self.vh_r, self.vh_w = u(0.15, 1.0), u(0.002, 0.02), u(0.0003, 0.003)
        self.o0, self.o_r, self.o_w = u(0.2, 1.2), u(0.002, 0.02), u(0.0005, 0.005)
        self.g0, self.g_r = u(0.03, 0.6), u(0.0, 0.01)
        self.dec_host = (self.o0 + self.g0) * u(0.6, 1.2) + bs * self.o_r
        # ---- noise and stalls
        self.sd_c, self.sd_drift, self.rho = u(0.005, 0.04), u(0.0, 0.03), u(0.9, 0.995)
        self.sd_dev, self.sd_host = u(0.01, 0.08), u(0.05, 0.3)
        self.p_stall = u(0.0, 0.02) if g.random() < 0.7 else 0.0
        self.stall_mu, self.stall_sd = math.log(u(3.0, 40.0)), u(0.3, 1.0)
        self.stall_mean = self.p_stall * math.exp(self.stall_mu + self.stall_sd ** 2 / 2)
        self.stall_in_gap = bool(g.random() < 0.6)
        # ---- acceptance
        k = np.arange(KMAX)
        self.tau, self.q_replace, self.mix = u(0.0, 0.6), u(0.002, 0.02), None
        if kind == "predictable":
            fam = str(g.choice(["flat", "geometric", "mixture"]))
            self.family = "high-" + fam
            if fam == "flat":
                p = np.full(KMAX, u(0.86, 0.95))
            elif fam == "geometric":
                p = u(0.9, 0.96) * u(0.975, 1.0) ** k
            else:
                pe = np.full(KMAX, u(0.92, 0.97))
                ph = u(0.5, 0.75) * u(0.9, 1.0) ** k
                self.mix = (pe, ph, u(0.7, 0.9), u(0.02, 0.2))
                p = None
            self.tau *= 0.5
        else:
            fam = str(g.choice(FAMILIES))
            self.family = fam
            if fam == "geometric":
                p = u(0.5, 0.85) * u(0.85, 1.0) ** k
            elif fam == "flat":
                p = np.full(KMAX, u(0.45, 0.85))
            elif fam in ("plateau", "cliff"):
                hi, m = u(0.65, 0.92), int(g.integers(2, 6) if fam == "plateau" else g.integers(1, 5))
                lo = hi * u(0.6, 0.85) if fam == "plateau" else u(0.05, 0.3)
                p = np.where(k < m, hi, lo)
            elif fam == "rising":
                p1, pinf, r = u(0.4, 0.7), u(0.75, 0.92), u(0.4, 0.85)
                p = pinf - (pinf - p1) * r ** k
            else:
                pe = u(0.85, 0.95) * u(0.97, 1.0) ** k
                ph = u(0.2, 0.5) * u(0.8, 1.0) ** k
                self.mix = (pe, ph, u(0.2, 0.6), u(0.02, 0.2))
                p = None
        if self.mix is not None:
            self.tau = 0.0
        self.p = p
        self.name = f"{kind}-{i:03d}-bs{bs}-{self.family}-s{seed}"

    # ------------------------------------------------------------------ cost model
    def _pad(self, w: int) -> int:
        if self.buckets is None:
            return w
        return next((b for b in self.buckets if b >= w), w)

    def _core(self, w: int, bs: int) -> float:
        """Target forward (ms) over w tokens from bs requests, decode and verify shared part."""
        wp = self._pad(w)
        mem = self.m0 + bs * self.kv
        if self.moe:
            mem += self.exp_unit * self.E * (1 - (1 - self.topk / self.E) ** wp) / self.topk
        t = _smax(mem, wp * self.flop, self.smooth_p) + wp * self.lin
        if self.comm:
            lat = self.ar_lat * (self.ar_jump if wp > self.ar_thr else 1.0)
            t += self.n_ar * (lat + wp * self.ar_beta)
        if self.buckets is not None:
            t *= self.bucket_jit.get(wp, 1.0)
        return t

    def decode_ms(self) -> float:
        return self._core(self.bs, self.bs) + self.dec_host + self.stall_mean

    def _draft_step(self) -> float:
        t = self.d0 * (1 + self.dg * self.bs)
        return t + (2 * self.ar_lat if self.comm else 0.0)

    def mean_phases(self, steps: int) -> dict:
        bs, w = self.bs, self.bs * (steps + 1)
        fwd = self.vextra + self._core(w, bs)
        ph = {
            "draft_prep_ms": None if steps == 1 else self.prep0 + self.prep_r * bs,
            "draft_ms": None if steps == 1 else self.dfix + (steps - 1) * self._draft_step(),
            "verify_fwd_ms": fwd,
            "verify_ms": fwd + self.vh0 + self.vh_r * bs + self.vh_w * w,
            "extend_ms": self.e0 + self.e1 * self._pad(w),
            "other_ms": self.o0 + self.o_r * bs + self.o_w * w
            + (0.5 * (self.prep0 + self.prep_r * bs) if steps == 1 else 0.0),
            "gap_ms": self.g0 + self.g_r * bs,
        }
        return ph

    def period_ms(self, steps: int) -> float:
        ph = self.mean_phases(steps)
        keys = ("draft_prep_ms", "draft_ms", "verify_ms", "extend_ms", "other_ms", "gap_ms")
        return sum(ph[k] or 0.0 for k in keys) + self.stall_mean

    # ------------------------------------------------------------------ acceptance
    def mean_accept(self, steps: int) -> float:
        if steps == 0:
            return 1.0
        if self.mix is not None:
            pe, ph, w, _ = self.mix
            return w * _chain_mean(pe, steps) + (1 - w) * _chain_mean(ph, steps)
        lp = _logit(self.p)
        return float(sum(wt * _chain_mean(_sig(lp + self.tau * x), steps) for x, wt in zip(_GH_X, _GH_W)))

    def true_tok_s(self, steps: int) -> float:
        if steps == 0:
            return 1000.0 * self.bs / self.decode_ms()
        return 1000.0 * self.bs * self.mean_accept(steps) / self.period_ms(steps)

    def best_steps(self) -> int:
        return max(range(9), key=self.true_tok_s)

    # ------------------------------------------------------------------ logs
    def log_lines(self, steps: int, cycles: Optional[int], rng: random.Random) -> list:
        assert 1 <= steps <= KMAX
        g = np.random.default_rng(rng.getrandbits(64))
        bs = self.bs
        mean = self.mean_phases(steps)
        if cycles is None:
            cycles = int(min(3000, max(300, 30000.0 / self.period_ms(steps))))
        # per-request state: logit offsets (or easy/hard state)
        if self.mix is not None:
            p_easy, p_hard, w_easy, sw = self.mix
            easy = g.random(bs) < w_easy
        else:
            lp = _logit(self.p)
            z = g.standard_normal(bs)
        drift = g.standard_normal() * self.sd_drift
        t = 1_790_000_000.0 + rng.random() * 3.0e7
        cyc0 = int(g.integers(100, 100000))
        ln = lambda sd: math.exp(g.normal(-sd * sd / 2, sd))
        out = []
        for c in range(cycles):
            # acceptance
            if self.mix is not None:
                flip = g.random(bs) < sw
                # two-state chain keeping the easy share stationary at w_easy
                to_easy = g.random(bs) < w_easy
                easy = np.where(flip, to_easy, easy)
                probs = np.where(easy[:, None], p_easy[None, :steps], p_hard[None, :steps])
            else:
                rep = g.random(bs) < self.q_replace
                z = np.where(rep, g.standard_normal(bs), z)
                probs = _sig(lp[None, :steps] + self.tau * z[:, None])
            ok = g.random((bs, steps)) < probs
            acc = 1 + np.cumprod(ok, axis=1).sum(axis=1)
            # costs
            drift = self.rho * drift + math.sqrt(1 - self.rho ** 2) * self.sd_drift * g.standard_normal()
            shared = ln(self.sd_c) * math.exp(drift - self.sd_drift ** 2 / 2)
            dev = lambda x: None if x is None else x * shared * ln(self.sd_dev)
            host = lambda x: None if x is None else x * ln(self.sd_host)
            fwd = dev(mean["verify_fwd_ms"])
            vh = (mean["verify_ms"] - mean["verify_fwd_ms"]) * ln(self.sd_host)
            ph = {
                "draft_prep_ms": host(mean["draft_prep_ms"]),
                "draft_ms": dev(mean["draft_ms"]),
                "verify_fwd_ms": fwd,
                "verify_ms": fwd + vh,
                "extend_ms": dev(mean["extend_ms"]),
            }
            other = host(mean["other_ms"])
            gap = host(mean["gap_ms"])
            if self.p_stall and g.random() < self.p_stall:
                s = min(900.0, math.exp(g.normal(self.stall_mu, self.stall_sd)))
                if self.stall_in_gap:
                    gap += s
                else:
                    other += s
            ph = {k: (None if v is None else round(v, 2)) for k, v in ph.items()}
            ph["verify_fwd_ms"] = min(ph["verify_fwd_ms"], ph["verify_ms"])
            spent = sum(ph[k] or 0.0 for k in ("draft_prep_ms", "draft_ms", "verify_ms", "extend_ms"))
            ph["total_ms"] = round(spent + other, 2)
            ph["gap_ms"] = None if c == 0 else round(gap, 2)
            t += (ph["total_ms"] + (ph["gap_ms"] or 0.0)) / 1000.0
            rec = make_record(cycle=cyc0 + c, config=(bs, steps, 1, steps + 1), phases_ms=ph,
                              accepts=[int(a) for a in acc], graph=True)
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))
            out.append(f"[{stamp} TP0] " + format_line(rec))
        return out


def make_worlds(n: int, seed: int, iid: bool = False) -> list:
    """``n`` worlds cycling over :data:`KINDS`; world ``i`` depends only on ``(seed, i)``.

    ``iid``: the same worlds without what makes one run's acceptance or timing unlike another's
    beyond per-cycle noise: no per-request difficulty offsets (``tau`` 0), no slow drift, and
    easy/hard text redrawn every cycle instead of persisting. Separates the advisor's shape
    assumptions from its treatment of every cycle as an independent sample.
    """
    ws = [World(seed, i) for i in range(n)]
    if iid:
        for w in ws:
            w.tau, w.sd_drift = 0.0, 0.0
            if w.mix is not None:
                w.mix = (*w.mix[:3], 1.0)
    return ws


if __name__ == "__main__":
    for w in make_worlds(12, 0):
        tps = " ".join(f"{w.true_tok_s(s):7.1f}" for s in range(9))
        print(f"{w.kind:11s} bs={w.bs:<3d} {w.family:15s} best={w.best_steps()} | {tps}")
