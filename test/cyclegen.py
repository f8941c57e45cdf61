"""Generated ``[eagle-cycle]`` logs with known phase times and per-request accept lengths.

Used by ``test_report.py`` and ``test_inspect_cli.py``: every number the report should give can be
computed straight from :class:`GenRun` (the generator's own values), without the code under test.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from sglang_eagle_cycle.cycle import format_line, make_record


def chain_accept_len(rng: random.Random, p: list[float]) -> int:
    """Accept length of one request under chain drafting with conditional acceptance ``p[j-1]``."""
    length = 1
    for pj in p:
        if rng.random() >= pj:
            break
        length += 1
    return length


@dataclass
class GenRun:
    """Cycles of one configuration as generated: phase times (ms, 2 decimals) and accept lengths."""

    bs: int
    steps: int
    topk: int
    p: list[float]
    records: list = field(default_factory=list)

    @property
    def config(self):
        return (self.bs, self.steps, self.topk, self.steps + 1 if self.topk == 1 else 2 * self.steps)

    def values(self, phase: str) -> list[float]:
        """Per-cycle values of ``phase`` as the line prints them (2 decimals), cycles where it ran."""
        return [float(f"{getattr(r, phase):.2f}") for r in self.records if getattr(r, phase) is not None]

    def accepts(self) -> list[int]:
        return [a for r in self.records for a in (r.accepts if r.accepts is not None else
                                                  [k for k, c in r.accept_hist.items() for _ in range(c)])]


def generate(rng: random.Random, bs: int, steps: int, cycles: int, p: list[float], *, topk: int = 1,
             verify_ms: float = 20.0, step_ms: float = 0.4, rank: str | None = None, first_cycle: int = 0,
             spans: bool = False, prep_ms: float = 0.08, gap_ms: float = 0.03) -> GenRun:
    """``cycles`` records with random phase times (2 decimals) and chain-model accept lengths.

    ``spans``: device-span records (``draft_prep_ms`` about ``prep_ms``, ``gap_ms`` about ``gap_ms``
    from the second cycle on), whose five parts sum to ``total_ms``.
    """
    run = GenRun(bs, steps, topk, p)
    for i in range(cycles):
        draft = round(step_ms * (steps - 1) + rng.uniform(0, 0.2), 2) if steps > 1 else None
        verify = round(verify_ms + rng.uniform(0, 3), 2)
        fwd = round(verify - rng.uniform(0.2, 0.6), 2)
        extend = round(0.3 + 0.05 * steps + rng.uniform(0, 0.1), 2)
        prep = round(prep_ms * rng.uniform(0.8, 1.2), 2) if spans and steps > 1 else None
        total = round((prep or 0) + (draft or 0) + verify + extend + rng.uniform(0.1, 0.5), 2)
        accepts = [chain_accept_len(rng, p) for _ in range(bs)]
        phases = {"draft_ms": draft, "verify_ms": verify, "verify_fwd_ms": fwd, "extend_ms": extend, "total_ms": total}
        if spans:
            phases["draft_prep_ms"] = prep
            phases["gap_ms"] = round(gap_ms * rng.uniform(0.8, 1.2), 2) if i else None
        run.records.append(make_record(cycle=first_cycle + i, config=run.config, phases_ms=phases,
                                       accepts=accepts, graph=True, rank=rank))
    return run


def log_lines(records, prefix: str = "[2026-11-30 10:00:00 TP0] ") -> list[str]:
    return [prefix + format_line(r) for r in records]
