"""How well does ``eagle-cycle advise`` predict a published EAGLE-3 table, against a naive model?

For every model, benchmark and draft of ``data/benchmarks/specbundle_subset.json`` (SpecForge's
SpecBundle numbers, SGLang, EAGLE-3 chain drafting):

* *interpolate*: fit on the ``(3,1,4)`` and ``(7,1,8)`` rows, predict ``(5,1,6)``;
  error = absolute percentage error of accept length and of output tok/s;
* *recommend*: fit on ``(3,1,4)`` and ``(5,1,6)``, choose among steps 0 (no speculation) / 3 /
  5 / 7; a choice is good when its measured tok/s is the best or within 3% of it;
* *intervals*: whether the advisor's ``tok_s_95`` at 5 steps (fit 3 and 7) and at 7 steps (fit 3
  and 5) holds the published figure, and the median width of those intervals (% of the
  prediction). The naive fit has no interval.

The naive model fits one constant acceptance rate ``p`` to both accept lengths by least squares
(Leviathan et al. 2023: ``E = (1 - p^(S+1)) / (1 - p)``) and a straight line through the two
cycle times (``T = 1000 bs accept_len / tok_s``) against steps. The advisor is the real
``eagle-cycle advise`` pipeline (``advise.runs_from_table`` + ``advise.advise``); no constant in it
was tuned to these rows.

Usage::

    python benchmarks/eval_specbundle.py [--table data/benchmarks/specbundle_subset.json] [--detail]

Prints a markdown table (advisor vs naive) and ends with one JSON line of the summary.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Optional

from sglang_eagle_cycle import advise as adv

DEFAULT_TABLE = Path(__file__).resolve().parents[1] / "data" / "benchmarks" / "specbundle_subset.json"
FIT_INTERP = [(3, 1, 4), (7, 1, 8)]
FIT_RECOMMEND = [(3, 1, 4), (5, 1, 6)]
RECOMMEND_AMONG = [0, 3, 5, 7]
MARGIN = 0.03


# --- naive reference ----------------------------------------------------------------------


def _geometric(p: float, steps: int) -> float:
    return steps + 1.0 if p >= 1.0 else (1.0 - p ** (steps + 1)) / (1.0 - p)


def naive_rate(points: list[tuple[int, float]]) -> float:
    """Constant rate minimising the squared accept-length error (fine grid, then ternary refine)."""
    def err(p):
        return sum((_geometric(p, s) - e) ** 2 for s, e in points)
    grid = [i / 2000 for i in range(2001)]
    best = min(grid, key=err)
    lo, hi = max(0.0, best - 1 / 2000), min(1.0, best + 1 / 2000)
    for _ in range(60):
        a, b = lo + (hi - lo) / 3, hi - (hi - lo) / 3
        lo, hi = (lo, b) if err(a) < err(b) else (a, hi)
    return (lo + hi) / 2


def naive_predict(rows: dict[int, tuple[float, float]], bs: int, fit_steps: list[int], steps: int) -> tuple[float, float]:
    """``(accept_len, tok/s)`` at ``steps`` from two fitted rows ``{steps: (tok_s, accept_len)}``."""
    p = naive_rate([(s, rows[s][1]) for s in fit_steps])
    (s1, s2) = fit_steps
    t1, t2 = (1000.0 * bs * rows[s][1] / rows[s][0] for s in (s1, s2))
    t = t1 + (t2 - t1) * (steps - s1) / (s2 - s1)
    e = _geometric(p, steps)
    return e, 1000.0 * bs * e / t


# --- evaluation ---------------------------------------------------------------------------


def _cases(table: dict):
    for model, benches in table.items():
        for bench, body in benches.items():
            names = {adv.normalise_name(m["Name"]): m["Name"] for r in body["results"] for m in r["metrics"]}
            for key, name in sorted(names.items()):
                if not adv._is_baseline_name(name):
                    yield model, bench, name


def evaluate(table: dict) -> list[dict]:
    """One record per model/benchmark/draft with both models' predictions and choices."""
    out = []
    for model, bench, draft in _cases(table):
        sel = adv.runs_from_table(table, model, bench, draft, FIT_INTERP)
        rows = {r.steps: (r.tok_s, r.accept_len) for r in sel.runs}
        bs = sel.runs[0].bs
        base = sel.baseline_tok_s[bs]
        a = adv.advise(sel.runs, sel.baseline_tok_s, steps=[5])
        c5 = next(c for c in a.primary.candidates if c.steps == 5)
        n_acc, n_tok = naive_predict(rows, bs, [3, 7], 5)
        sel2 = adv.runs_from_table(table, model, bench, draft, FIT_RECOMMEND)
        a2 = adv.advise(sel2.runs, sel2.baseline_tok_s, steps=RECOMMEND_AMONG)
        c7 = next(c for c in a2.primary.candidates if c.steps == 7)
        measured = {0: base, **{s: rows[s][0] for s in (3, 5, 7)}}
        naive_tok = {0: base, **{s: naive_predict(rows, bs, [3, 5], s)[1] for s in (3, 5, 7)}}
        naive_pick = max(naive_tok, key=lambda s: (naive_tok[s], -s))
        best = max(measured.values())
        out.append({
            "model": model, "benchmark": bench, "draft": draft, "bs": bs,
            "measured_5": {"accept_len": rows[5][1], "tok_s": rows[5][0]},
            "ours_5": {"accept_len": c5.accept_len, "tok_s": c5.tok_s},
            "ours_5_95": [c5.tok_s_low, c5.tok_s_high], "ours_7_95": [c7.tok_s_low, c7.tok_s_high],
            "ours_7": c7.tok_s, "measured_7": rows[7][0],
            "naive_5": {"accept_len": n_acc, "tok_s": n_tok},
            "measured": measured, "ours_pick": a2.primary.recommendation.steps, "naive_pick": naive_pick,
            "ours_good": measured[a2.primary.recommendation.steps] >= (1 - MARGIN) * best,
            "naive_good": measured[naive_pick] >= (1 - MARGIN) * best,
        })
    return out


def _intervals(records: list[dict]) -> dict:
    """How many ``tok_s_95`` held the published tok/s, and their median width (% of the prediction)."""
    out = {}
    for s, meas, pred in ((5, lambda r: r["measured_5"]["tok_s"], lambda r: r["ours_5"]["tok_s"]),
                          (7, lambda r: r["measured_7"], lambda r: r["ours_7"])):
        ivs = [(r[f"ours_{s}_95"], meas(r), pred(r)) for r in records]
        widths = [100.0 * (hi - lo) / p for (lo, hi), _, p in ivs]
        out[f"steps_{s}"] = {"held": sum(lo <= m <= hi for (lo, hi), m, _ in ivs),
                             "median_width_pct": statistics.median(widths) if widths else None}
    return out


def summarise(records: list[dict]) -> dict:
    def mape(who: str, key: str) -> float:
        return 100.0 * sum(abs(r[who][key] - r["measured_5"][key]) / r["measured_5"][key] for r in records) / len(records)
    return {
        "cases": len(records),
        "ours": {"accept_len_mape_pct": mape("ours_5", "accept_len"), "tok_s_mape_pct": mape("ours_5", "tok_s"),
                 "good_recommendations": sum(r["ours_good"] for r in records)},
        "ours_intervals": _intervals(records),
        "naive": {"accept_len_mape_pct": mape("naive_5", "accept_len"), "tok_s_mape_pct": mape("naive_5", "tok_s"),
                  "good_recommendations": sum(r["naive_good"] for r in records)},
    }


def markdown(summary: dict, records: Optional[list[dict]] = None) -> str:
    o, n, k = summary["ours"], summary["naive"], summary["cases"]
    lines = [
        f"| {k} model/benchmark/draft cases | `eagle-cycle advise` | naive (constant p + linear cycle) |",
        "|---|---|---|",
        f"| accept-length MAPE, fit (3,1,4)+(7,1,8) -> predict (5,1,6) | {o['accept_len_mape_pct']:.2f}% | {n['accept_len_mape_pct']:.2f}% |",
        f"| tok/s MAPE, same | {o['tok_s_mape_pct']:.2f}% | {n['tok_s_mape_pct']:.2f}% |",
        f"| fit (3,1,4)+(5,1,6), choose among 0/3/5/7: measured best or within 3% | {o['good_recommendations']}/{k} | {n['good_recommendations']}/{k} |",
    ]
    for s, fit in ((5, "(3,1,4)+(7,1,8)"), (7, "(3,1,4)+(5,1,6)")):
        iv = summary["ours_intervals"][f"steps_{s}"]
        width = "-" if iv["median_width_pct"] is None else f"{iv['median_width_pct']:.1f}%"
        lines.append(f"| fit {fit}: {s}-step `tok_s_95` holds the published tok/s (median width) | "
                     f"{iv['held']}/{k} ({width}) | no interval |")
    if records:
        lines += ["", "| model | benchmark | draft | measured tok/s 0/3/5/7 | advisor picks | naive picks |", "|---|---|---|---|---|---|"]
        for r in records:
            m = r["measured"]
            lines.append(f"| {r['model']} | {r['benchmark']} | {r['draft']} | "
                         f"{' / '.join(f'{m[s]:.0f}' for s in RECOMMEND_AMONG)} | {r['ours_pick']}"
                         f"{'' if r['ours_good'] else ' (miss)'} | {r['naive_pick']}{'' if r['naive_good'] else ' (miss)'} |")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--table", type=Path, default=DEFAULT_TABLE)
    ap.add_argument("--detail", action="store_true", help="also print every case")
    args = ap.parse_args(argv)
    try:
        table = json.loads(args.table.read_text(encoding="utf-8"))
        records = evaluate(table)
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        reason = (exc.strerror if isinstance(exc, OSError) and exc.strerror else
                  f"not a SpecBundle-format table ({type(exc).__name__}: {exc})")
        print(f"eval_specbundle.py: error: --table {args.table}: {reason}", file=sys.stderr)
        return 2
    summary = summarise(records)
    print(markdown(summary, records if args.detail else None))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
