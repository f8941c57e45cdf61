"""What a sweep prints at the end: a table with speedups, a plot of tok/s against steps with the
baseline, and one JSON line naming the best configuration per concurrency.

Speedups here are recomputed from the records (output tok/s over the baseline's at the same
model and concurrency), so a baseline measured after a configuration (URL mode, two servers)
still gives it a speedup; the stored ``speedup_vs_baseline`` is what was known when the record
was written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional, TextIO

from .records import record_key

BEST_SCHEMA = "eagle-cycle-bench-best/1"


def select(records: list[dict], *, prompt_set_sha256: str, max_new_tokens: int,
           model: Optional[str], settings=None) -> list[dict]:
    """Records of this workload (and model, when given), one per key: the last ``ok`` one,
    else the last ``failed`` one; sorted by (concurrency, steps, topk, num_draft_tokens).
    ``settings``: a function of a record's ``steps`` giving the ``settings`` this run used
    (:func:`.runner.run_settings`): records run with others are left out (None: kept)."""
    chosen: dict[tuple, dict] = {}
    for r in records:
        if r.get("prompt_set_sha256") != prompt_set_sha256 or r.get("max_new_tokens") != max_new_tokens:
            continue
        if model is not None and r.get("model") != model:
            continue
        if settings is not None and r.get("settings") != settings(r.get("steps") or 0):
            continue
        k = record_key(r)
        if r.get("status") == "ok" or chosen.get(k, {}).get("status") != "ok":
            chosen[k] = r
    return sorted(chosen.values(), key=lambda r: (
        r.get("concurrency") or 0, r.get("steps") or 0, r.get("topk") or 0, r.get("num_draft_tokens") or 0))


def speedups(rows: list[dict]) -> dict[int, Optional[float]]:
    """``id(row) -> output tok/s / baseline tok/s`` at the same model and concurrency."""
    base = {(r["model"], r["concurrency"]): r["output_tok_s"] for r in rows
            if r.get("status") == "ok" and r.get("steps") == 0 and r.get("output_tok_s")}
    out = {}
    for r in rows:
        b = base.get((r.get("model"), r.get("concurrency")))
        ok = r.get("status") == "ok" and r.get("output_tok_s") is not None
        out[id(r)] = round(r["output_tok_s"] / b, 4) if ok and b else None
    return out


def _f(x, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def render_table(rows: list[dict], file: TextIO, title: str) -> None:
    """The summary table (rich) on ``file``."""
    from ..tables import figure_table
    from ..termout import PipeConsole as Console   # a closed pipe raises BrokenPipeError, not exit 1

    sp = speedups(rows)
    cols = [("steps", "right"), ("topk", "right"), ("draft\ntok", "right"), ("conc", "right"),
            ("status", "left"), ("tok/s", "right"), ("speedup", "right"), ("accept\nlen", "right"),
            ("TTFT\np50", "right"), ("ITL\np50", "right"), ("ITL\np99", "right"), ("cycle\nms", "right"),
            ("verify\n%", "right")]
    cells = []
    for r in rows:
        cyc = r.get("cycle") or {}
        phases = cyc.get("phases") or {}
        total = (phases.get("total_ms") or {}).get("mean")
        vshare = (phases.get("verify_ms") or {}).get("share")
        status = r.get("status", "?")
        s = sp.get(id(r))
        cells.append((
            "baseline" if r.get("steps") == 0 else str(r.get("steps")),
            _f(r.get("topk"), "d"), _f(r.get("num_draft_tokens"), "d"), str(r.get("concurrency")),
            status if status == "ok" else f"[red]{status}[/red]",
            _f(r.get("output_tok_s"), ".1f"),
            "-" if s is None else (f"[green]{s:.3f}x[/green]" if s > 1 else f"{s:.3f}x"),
            _f(r.get("accept_len_mean"), ".2f"),
            _f((r.get("ttft_ms") or {}).get("p50"), ".1f"),
            _f((r.get("itl_ms") or {}).get("p50"), ".2f"),
            _f((r.get("itl_ms") or {}).get("p99"), ".2f"),
            _f(total, ".2f"), "-" if vshare is None else f"{100 * vshare:.0f}",
        ))
    table = figure_table(title, cols, cells,
                         caption="tok/s: output tokens per second; TTFT / ITL in ms; accept len: "
                                 "completion_tokens / spec_verify_ct per request, mean; cycle ms and "
                                 "verify %: server log \\[eagle-cycle] lines")
    probe = Console(file=file)
    console = Console(file=file, width=None if probe.is_terminal else 100, highlight=False)
    console.print(table)
    for r in rows:
        if r.get("status") != "ok" and isinstance(r.get("error"), dict):
            console.print(f"[red]failed[/red] steps={r.get('steps')} c={r.get('concurrency')}: "
                          f"{r['error'].get('reason')}", markup=True, highlight=False)


def make_figure(rows: list[dict], title: str):
    """One panel per concurrency: output tok/s against num_steps, one line per topk (the best
    draft-token value at each depth), and the baseline (no speculation) as a dashed horizontal
    line. Panels have their own y scale (concurrency 8 is several times concurrency 1).
    Returns a matplotlib ``Figure``, or ``None`` when no ``ok`` record exists."""
    ok = [r for r in rows if r.get("status") == "ok" and r.get("output_tok_s") is not None]
    if not ok:
        return None
    import textwrap

    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    concs = sorted({r["concurrency"] for r in ok})
    ncols = min(len(concs), 3)
    nrows = -(-len(concs) // ncols)
    fig = Figure(figsize=(4.2 * ncols + 0.8, 3.6 * nrows + 0.6))
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, c in zip(axes, concs):
        base = [r for r in ok if r["concurrency"] == c and r["steps"] == 0]
        if base:
            ax.axhline(base[-1]["output_tok_s"], color="0.3", linestyle="--", linewidth=1.2,
                       label="baseline (no speculation)")
        spec = [r for r in ok if r["concurrency"] == c and r["steps"] > 0]
        steps_seen: set[int] = set()
        for i, topk in enumerate(sorted({r["topk"] for r in spec}, key=lambda k: (k is None, k))):
            best: dict[int, float] = {}
            for r in spec:
                if r["topk"] == topk:
                    best[r["steps"]] = max(r["output_tok_s"], best.get(r["steps"], 0.0))
            xs = sorted(best)
            steps_seen.update(xs)
            ax.plot(xs, [best[x] for x in xs], marker="o", color=colors[i % len(colors)],
                    label=f"EAGLE, topk {topk}")
        if steps_seen:
            ax.set_xticks(sorted(steps_seen))
        ax.set_title(f"concurrency {c}", fontsize=10)
        ax.set_xlabel("speculative num_steps (draft depth)")
        ax.set_ylabel("output throughput (tok/s)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    for ax in axes[len(concs):]:
        ax.set_visible(False)
    fig.suptitle("\n".join(textwrap.wrap(title, 70 * ncols)), fontsize=9)
    fig.tight_layout()
    return fig


def plot(rows: list[dict], path: Path, title: str) -> Optional[Path]:
    """Save :func:`make_figure` at ``path`` in the format its suffix names (``.png``, ``.svg``...);
    ``None`` (nothing written) without ``ok`` records. The file is created exclusively: an existing
    file or link is never replaced, and a half-written file is removed.

    Raises:
        FileExistsError: ``path`` exists. OSError: it cannot be written. ValueError: unknown format.
    """
    fig = make_figure(rows, title)
    if fig is None:
        return None
    fmt = path.suffix.lower().lstrip(".") or "png"
    with open(path, "xb") as f:
        try:
            fig.savefig(f, format=fmt, dpi=120)
        except BaseException:
            f.close()
            path.unlink(missing_ok=True)
            raise
    return path


def best_line(rows: list[dict]) -> dict:
    """``{"schema": .., "metric": "output_tok_s", "best": [per concurrency: the configuration with the
    highest output tok/s, the baseline included]}``; an empty list when nothing was measured."""
    sp = speedups(rows)
    best = []
    for c in sorted({r["concurrency"] for r in rows if r.get("status") == "ok"}):
        cands = [r for r in rows if r.get("status") == "ok" and r["concurrency"] == c
                 and r.get("output_tok_s") is not None]
        top = max(cands, key=lambda r: r["output_tok_s"])
        best.append({
            "concurrency": c, "steps": top["steps"], "topk": top["topk"],
            "num_draft_tokens": top["num_draft_tokens"], "output_tok_s": top["output_tok_s"],
            "speedup_vs_baseline": sp.get(id(top)), "accept_len_mean": top.get("accept_len_mean"),
            "speculation_pays": None if sp.get(id(top)) is None else top["steps"] > 0,
        })
    return {"schema": BEST_SCHEMA, "metric": "output_tok_s", "best": best}


def best_json(rows: list[dict]) -> str:
    """:func:`best_line` as one JSON line."""
    return json.dumps(best_line(rows), separators=(", ", ": "))
