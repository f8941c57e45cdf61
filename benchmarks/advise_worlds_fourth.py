"""A fourth generator of hidden worlds for ``eagle-cycle advise`` (``sim_advise.py --fourth``).

Written on 2026-12-07 by a helper session from the issue's description of the simulator test and the
design's cycle-line contract alone: it did not read the advisor, the other generators or the docs,
and it formats its lines itself (no ``sglang_eagle_cycle`` import), as an outside team would. An
out-of-sample check like ``advise_worlds_blind.py`` and ``advise_worlds_third.py``.

Model (units: ms, tokens, tok/s; chain drafting, topk 1, verified width ``n = bs (S + 1)``):

* Kinds, by world index: ``dense``, ``moe``, ``comm``, ``graph``, ``large``, ``predictable``.
  Batch sizes: dense and predictable {1, 1, 2, 4, 8}, moe and comm {1, 1, 2, 4}, graph {1, 2, 4, 8,
  16}, large {24, 32, 48, 64, 96, 128}. Decode step 6-25 ms (large 18-45).
* Verify forward ``v(n) = decode (1 + m) + g(n) - g(bs)``, ``m ~ U(0.08, 0.7)`` the target-verify
  mode's overhead (MoE ``0.6 m``; comm adds 0-30% of ``2 layers`` all-reduce latencies): the decode
  step bounds the verify from below and is not on its curve. ``g``: dense ``a n + b max(0, n - knee)``
  (knee 32-256); MoE ``c E (1 - (1 - k/E)^n) + a n`` (E 128-384, k 4 or 8, the experts 25-55% of
  the decode step); comm a per-token all-reduce term over 32-80 layers; graph ``a pad(n)`` padded to
  the next captured size up to 16-128 tokens, past it eager (20-60% of the decode step more); large
  ``max(memory, per-token n)``.
* Verify = forward + 0.2-1.0 ms + a per-token part; draft ``(S - 1)`` forwards of 0.25-1.2 ms plus a
  per-request part (x1.6 for comm); draft-extend 0.3-1.2 ms + 0.002-0.03 ms a token; other 0.15-0.6
  ms + per step; a spike of 3-25 ms in up to 0.6% of the cycles (its mean is in the truth).
* Acceptance per position j: ``decay`` (p1 0.55-0.9, factor 0.8-0.97 a position), ``flat``
  (0.45-0.85), ``cliff`` (0.7-0.92, then 0.15-0.45 past position 1-4), ``mixture`` of 2-3 text types
  whose requests keep their type and switch with a chance of 0.2-5% a cycle; ``predictable`` 0.84-0.95.
* Noise: each phase times a mean-one log-normal (sd 2-8%), the first three cycles of a run at twice
  the cost (warm-up), a ``Decode batch.`` line every 200 cycles and two start-up lines mixed in.
  Runs of 400-2,000 cycles (per world).
* Truth: ``1000 bs E[L(S)] / E[cycle(S)]`` with ``E[L(S)] = 1 + sum_j prod_{i<=j} p_i`` averaged over
  the text types; depth 0 is ``1000 bs / decode``.

On seeds 1-4 (96 worlds; the helper's own driver and scoring, 2026-12-07): 95 picks within 2% of the
best, mean regret 0.13%, one world 3.46% below its best (a CUDA-graph size edge between two depths no
run measured), coverage 94.7%, median width 19.9% (26.0% on seed 3), 1.67 runs per world.
"""

from __future__ import annotations

import math
import random
from typing import Optional

#: World kinds; :func:`make_worlds` cycles over them by world index.
KINDS = ("dense", "moe", "comm", "graph", "large", "predictable")
#: Token counts a ``graph`` world's verify is padded to (up to its largest captured size).
BUCKETS = (1, 2, 4, 8, 12, 16, 20, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 256)
#: Draft positions every world defines.
POSITIONS = 8


def _pad(n: int, largest: int) -> tuple[int, bool]:
    """``(tokens run, eager)``: ``n`` padded to the next captured size, or ``n`` itself in eager mode
    past ``largest``."""
    for b in BUCKETS:
        if n <= b <= largest:
            return b, False
    return n, True


def _acceptance(rng: random.Random, kind: str) -> tuple[list, float, str]:
    """``([(weight, [p_1..p_8]), ...], switch chance per cycle, family)``."""
    if kind == "predictable":
        base, dec = rng.uniform(0.84, 0.95), rng.uniform(0.985, 1.0)
        return [(1.0, [min(0.97, base * dec ** j) for j in range(POSITIONS)])], rng.uniform(0.0, 0.05), "flat-high"
    family = rng.choice(["decay", "flat", "cliff", "mixture", "mixture"])
    if family == "decay":
        p1, d = rng.uniform(0.55, 0.9), rng.uniform(0.8, 0.97)
        prof = [(1.0, [p1 * d ** j for j in range(POSITIONS)])]
    elif family == "flat":
        prof = [(1.0, [rng.uniform(0.45, 0.85)] * POSITIONS)]
    elif family == "cliff":
        hi, lo, c = rng.uniform(0.7, 0.92), rng.uniform(0.15, 0.45), rng.randint(1, 4)
        prof = [(1.0, [hi if j < c else lo for j in range(POSITIONS)])]
    else:
        ws = [rng.random() + 0.2 for _ in range(rng.randint(2, 3))]
        prof = []
        for w in ws:
            p1, d = rng.uniform(0.35, 0.95), rng.uniform(0.75, 1.0)
            prof.append((w / sum(ws), [min(0.97, p1 * d ** j) for j in range(POSITIONS)]))
    return prof, rng.uniform(0.002, 0.05), family


class World:
    """One hidden world (module docstring). ``name``, ``kind``, ``bs``, ``family``; ``true_tok_s(S)``
    (tok/s, S in 0..8), ``best_steps()`` and ``log_lines(S, cycles, rng)``, as
    ``advise_worlds.run_protocol`` uses them."""

    def __init__(self, seed: int, idx: int):
        rng = random.Random(seed * 1000 + idx)
        kind = KINDS[idx % len(KINDS)]
        bs, dec = {
            "dense": lambda: (rng.choice([1, 1, 2, 4, 8]), rng.uniform(6, 25)),
            "moe": lambda: (rng.choice([1, 1, 2, 4]), rng.uniform(9, 20)),
            "comm": lambda: (rng.choice([1, 1, 2, 4]), rng.uniform(8, 18)),
            "graph": lambda: (rng.choice([1, 2, 4, 8, 16]), rng.uniform(7, 20)),
            "large": lambda: (rng.choice([24, 32, 48, 64, 96, 128]), rng.uniform(18, 45)),
            "predictable": lambda: (rng.choice([1, 1, 2, 4, 8]), rng.uniform(6, 20)),
        }[kind]()
        m = rng.uniform(0.08, 0.7)
        vbase = dec * (1 + m)
        if kind in ("dense", "predictable"):
            a, knee, b = dec * rng.uniform(0.01, 0.06), rng.choice([32, 64, 128, 256]), dec * rng.uniform(0.02, 0.08)
            g = lambda n: a * n + b * max(0, n - knee)
        elif kind == "moe":
            E, k, frac = rng.choice([128, 256, 384]), rng.choice([4, 8]), rng.uniform(0.25, 0.55)
            vbase = dec * (1 + m * 0.6)
            ce = frac * dec / (E * (1 - (1 - k / E) ** bs))
            a = dec * rng.uniform(0.005, 0.03)
            g = lambda n: ce * E * (1 - (1 - k / E) ** n) + a * n
            self.moe_experts, self.moe_topk = E, k
        elif kind == "comm":
            layers, lat = rng.choice([32, 48, 61, 80]), rng.uniform(0.02, 0.05)
            bw = rng.uniform(0.0005, 0.003) * layers * 2
            a = dec * rng.uniform(0.005, 0.02)
            vbase += 2 * layers * lat * rng.uniform(0.0, 0.3)
            g = lambda n: (bw + a) * n
        elif kind == "graph":
            largest, a, eager = rng.choice([16, 32, 48, 64, 128]), dec * rng.uniform(0.01, 0.05), rng.uniform(0.2, 0.6) * dec

            def g(n: int) -> float:
                tokens, is_eager = _pad(n, largest)
                return a * tokens + (eager if is_eager else 0.0)
        else:
            per_token, memory = dec / bs * rng.uniform(0.3, 1.0), dec * rng.uniform(0.5, 0.95)
            g = lambda n: max(memory, per_token * n)
        g0 = g(bs)
        self._fwd = lambda n: vbase + g(n) - g0
        self._vextra, self._vextra_n = rng.uniform(0.2, 1.0), rng.uniform(0.0, 0.01)
        d0 = rng.uniform(0.25, 1.2) * (1.6 if kind == "comm" else 1.0)
        self._draft_fwd = d0 + rng.uniform(0.005, 0.04) * (dec / 10) * bs
        self._e0, self._e1 = rng.uniform(0.3, 1.2), rng.uniform(0.002, 0.03)
        self._o0, self._o1 = rng.uniform(0.15, 0.6), rng.uniform(0.0, 0.05)
        self._spike_p, self._spike_ms = rng.uniform(0.0, 0.006), rng.uniform(3, 25)
        self._sig = rng.uniform(0.02, 0.08)
        self._prof, self._switch, self.family = _acceptance(rng, kind)
        self._cycles = rng.choice([400, 600, 800, 1200, 2000])
        self.kind, self.bs, self.decode_ms, self.idx, self.seed = kind, bs, dec, idx, seed
        self.name = f"{kind}-{idx:03d}-bs{bs}-{self.family}-s{seed}"

    def phases(self, steps: int) -> dict:
        """Mean phase times (ms) of a cycle at ``steps``: draft, verify forward, verify extra, extend, other."""
        n = self.bs * (steps + 1)
        return {"draft": self._draft_fwd * (steps - 1), "vfwd": self._fwd(n),
                "vextra": self._vextra + self._vextra_n * n, "extend": self._e0 + self._e1 * n,
                "other": self._o0 + self._o1 * steps}

    def accept_len(self, steps: int) -> float:
        """``E[L(S)]`` over the text types (tokens per request per cycle, bonus included)."""
        total = 0.0
        for w, p in self._prof:
            e = run = 1.0
            for j in range(steps):
                run *= p[j]
                e += run
            total += w * e
        return total

    def true_tok_s(self, steps: int) -> float:
        if steps == 0:
            return 1000.0 * self.bs / self.decode_ms
        cycle = sum(self.phases(steps).values()) + self._spike_p * self._spike_ms
        return 1000.0 * self.bs * self.accept_len(steps) / cycle

    def best_steps(self) -> int:
        return max(range(POSITIONS + 1), key=self.true_tok_s)

    def log_lines(self, steps: int, cycles: Optional[int], rng: random.Random) -> list[str]:
        """The run's log at ``steps`` (1..8): two start-up lines, one ``[eagle-cycle]`` line per cycle
        (the world's own cycle count when ``cycles`` is None) and a ``Decode batch.`` line every 200
        cycles. Its draws come from ``rng`` (one 32-bit draw seeds them)."""
        r = random.Random(rng.getrandbits(32))
        bs, prof = self.bs, self._prof
        weights = [w for w, _ in prof]
        types = [r.choices(range(len(prof)), weights)[0] for _ in range(bs)]
        ph, sig = self.phases(steps), self._sig
        c0, t = r.randint(0, 5000), 0.0
        lines = ["[2026-12-01 10:00:00 TP0] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16",
                 f"[2026-12-01 10:00:01 TP0] speculative_algorithm=EAGLE3 speculative_num_steps={steps} "
                 f"speculative_eagle_topk=1 speculative_num_draft_tokens={steps + 1}"]
        for i in range(self._cycles if cycles is None else cycles):
            for q in range(bs):
                if r.random() < self._switch:
                    types[q] = r.choices(range(len(prof)), weights)[0]
            accs = []
            for q in range(bs):
                a = 1
                for pj in prof[types[q]][1][:steps]:
                    if r.random() >= pj:
                        break
                    a += 1
                accs.append(a)
            warm = 2.0 if i < 3 else 1.0

            def noisy(x: float) -> float:
                return x * math.exp(r.gauss(0, sig) - sig * sig / 2) * warm

            draft = round(noisy(ph["draft"]), 2) if steps > 1 else None
            vfwd = round(noisy(ph["vfwd"]), 2)
            verify = round(vfwd + noisy(ph["vextra"]), 2)
            extend = round(noisy(ph["extend"]), 2)
            other = noisy(ph["other"])
            if r.random() < self._spike_p:
                other += self._spike_ms * r.uniform(0.5, 1.5)
            other = round(max(0.01, other), 2)
            total = round((draft or 0.0) + verify + extend + other, 2)
            t += total / 1000
            ts = f"2026-12-01 10:{int(t // 60) % 60:02d}:{int(t % 60):02d}"
            s = sum(accs)
            lines.append(
                f"[{ts} TP0] [eagle-cycle] cycle={c0 + i} bs={bs} steps={steps} topk=1 draft_tokens={steps + 1} "
                f"draft_ms={'-' if draft is None else f'{draft:.2f}'} verify_ms={verify:.2f} verify_fwd_ms={vfwd:.2f} "
                f"extend_ms={extend:.2f} other_ms={other:.2f} total_ms={total:.2f} accept_len={s / bs:.2f} "
                f"accepts={','.join(map(str, accs))} tok_s={s / total * 1000:.1f} graph=1")
            if i % 200 == 199:
                lines.append(f"[{ts} TP0] Decode batch. #running-req: {bs}, #token: {bs * 900}, token usage: 0.05, "
                             f"gen throughput (token/s): {s / total * 1000:.2f}, #queue-req: 0")
        return lines


def make_worlds(n: int, seed: int) -> list[World]:
    """``n`` worlds of ``seed``, the kinds in turn by index."""
    return [World(seed, i) for i in range(n)]
