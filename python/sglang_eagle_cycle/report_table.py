"""Terminal table (rich) and CSV views of an inspect document (``report.inspect_paths``).

Usage::

    render_table(doc)                  # to the terminal
    write_csv(doc, open("g.csv", "w", newline=""))
"""

from __future__ import annotations

import csv
import os
from typing import Any, Optional, TextIO

from .cycle import ALL_PHASES, PHASES
from .logfiles import text_label
from .report import PERCENTILES, count_of

_PHASE_NAMES = {"draft_prep_ms": "draft prep", "draft_ms": "draft", "verify_ms": "verify",
                "verify_fwd_ms": "  target forward", "extend_ms": "draft-extend", "other_ms": "other",
                "total_ms": "cycle", "gap_ms": "gap to previous"}
#: Row order of a device-span group: the five parts of the cycle, the cycle, then the gap.
_SPAN_ROWS = ("draft_prep_ms", "draft_ms", "verify_ms", "verify_fwd_ms", "extend_ms", "other_ms", "total_ms",
              "gap_ms")


def _f(x: Optional[float], fmt: str = ".2f") -> str:
    return "-" if x is None else format(x, fmt)


def _config(g: dict[str, Any]) -> str:
    return f"bs={g['bs']} steps={g['steps']} topk={g['topk']} draft_tokens={g['draft_tokens']}"


def render_table(doc: dict[str, Any], console=None) -> None:
    """Print the report: one phase table per group (with a ``rank spread ms`` column, max - min of
    the per-rank mean times, when two ranks or more printed the group's cycles), Decode batch
    summary, findings."""
    from rich.markup import escape
    from rich.table import Table

    from .termout import PipeConsole

    con = console or PipeConsole(highlight=False)
    for g in doc["groups"]:
        # the configuration first: a long file name then wraps after it, never through it
        title = (f"{_config(g)}  {escape(text_label(str(g.get('file', ''))))}\n{count_of(g['cycles'], 'cycle')}, "
                 f"accept length {_f(g.get('accept_len_mean'))}, {_f(g.get('tok_s'), '.1f')} tok/s")
        if g.get("ranks"):
            title += f", ranks {escape(', '.join(g['ranks']))}"
            lines = g.get("cycle_lines")
            if lines and lines != g["cycles"]:
                title += f" ({lines} lines: acceptance once per cycle, times of every rank)"
        spread = g.get("rank_spread") or {}
        title += ("\ndevice spans of the launches; tok/s over total + gap" if g.get("device_spans") else
                  "\nolder lines: draft from the cycle's start, no gap (kept apart from device-span lines)")
        table = Table(title=title, title_justify="left")
        table.add_column("phase")
        for head in ("mean ms", *(k + " ms" for k, _ in PERCENTILES), "share"):
            table.add_column(head, justify="right")
        if spread:   # max - min of the per-rank mean times
            table.add_column("rank\nspread ms", justify="right")
        for name in _SPAN_ROWS if g.get("device_spans") else PHASES:
            ph = (g.get("phases") or {}).get(name) or {}
            share = ph.get("share")
            cells = [_PHASE_NAMES[name], _f(ph.get("mean")), *(_f(ph.get(k)) for k, _ in PERCENTILES),
                     "-" if share is None else f"{share:.1%}"]
            if spread:
                cells.append(_f((spread.get(name) or {}).get("spread")))
            table.add_row(*cells)
        con.print(table)
        hist = g.get("accept_hist") or {}
        if hist:
            requests = sum(hist.values())
            con.print("accept length: " + "  ".join(f"{k}: {v / requests:.1%}" for k, v in hist.items()))
        pos = g.get("per_position_acceptance") or []
        if pos:
            con.print("per-position acceptance: " + "  ".join(
                f"j={p['j']} {_f(p['p'])} ({p['accepted']}/{p['reached']})" for p in pos))
        con.print()

    db = doc.get("decode_batch")
    if db:
        # two-line headings keep the number columns narrow, so at 80 columns the file name gets the room
        rows = list(db.get("per_file", {}).items())
        short = [os.path.basename(name) for name, _ in rows]
        if len(set(short)) == len(short):   # file names alone when they tell the files apart
            rows = [(b, stats) for b, (_, stats) in zip(short, rows)]
        # named as the rows name them (two server.log of different folders are not both "server.log")
        pins = [(n, s.get("num_draft_tokens_inferred")) for n, s in rows]
        pins = [(n, v) for n, v in pins if v]
        pinned = None if not pins else (
            "num_draft_tokens from accept len and accept rate (SGLang 0.5.23 prints rate = (len - 1) / "
            "(num_draft_tokens - 1)): " + ", ".join(f"{v} in {escape(text_label(n))}" for n, v in pins)
            + " (chain drafting, topk 1: num_steps = num_draft_tokens - 1)")
        table = Table(title="Stock Decode batch lines (means unweighted over intervals)", title_justify="left",
                      caption=pinned, caption_justify="left", pad_edge=False)
        table.add_column("file", overflow="fold", ratio=1)
        for head in ("lines", "inter-\nvals", "with\naccept", "accept\nlen", "accept\nrate", "gen\ntok/s"):
            table.add_column(head, justify="right", no_wrap=True)
        if len(rows) > 1:
            rows.append(("all", db))
        for name, s in rows:
            table.add_row(escape(text_label(name)), str(s["decode_lines_seen"]), str(s["intervals"]), str(s["intervals_with_accept"]),
                          _f(s["accept_len_mean"]), _f(s["accept_rate_mean"]), _f(s["gen_tok_s_mean"], ".1f"))
        con.print(table)
        by_bs = db.get("by_bs") or []
        # whenever there are several batch sizes, or intervals left out as idle (the pooled mean
        # above counts them; these rows do not)
        if len({r["bs"] for r in by_bs}) > 1 or (by_bs and db.get("intervals_idle")):
            # the pooled means above mix the batch sizes a ramp or a drain passed through
            idle = db.get("intervals_idle") or 0
            caption = ("gen tok/s: speculative intervals over their time together, no-spec ones likewise "
                       "(tokens over seconds)"
                       + (f"; {count_of(idle, 'interval')} that held idle time (the first line after "
                          "a pause, or #running-req 0) left out" if idle else ""))
            table = Table(title="Stock Decode batch lines by batch size (#running-req)", title_justify="left",
                          caption=caption, caption_justify="left", pad_edge=False)
            for head in ("bs", "server", "inter-\nvals", "accept\nlen", "gen\ntok/s"):
                table.add_column(head, justify="right", no_wrap=True)
            for r in by_bs:
                table.add_row(str(r["bs"]), "spec" if r["speculative"] else "no spec", str(r["intervals"]),
                              _f(r["accept_len_mean"]), _f(r["gen_tok_s"], ".1f"))
            con.print(table)
    con.print(f"lines: {doc['unparsed_lines']} damaged, {doc['other_lines']} other")
    findings = doc.get("findings") or []
    if findings:
        con.print("findings:")
        for f in findings:
            con.print(f"  [bold]{f['code']}[/bold]: {escape(text_label(f['message']))}")
    else:
        con.print("findings: none")


def csv_rows(doc: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """(header, rows): one row per group; phase stats as ``<phase>_<stat>`` columns (ms, share 0-1)."""
    header = ["file", "bs", "steps", "topk", "draft_tokens", "cycles"]
    stats = ["mean", *(k for k, _ in PERCENTILES), "share"]
    header += [f"{p}_{s}" for p in ALL_PHASES for s in stats]
    header += ["accept_len_mean", "tok_s", "accept_hist", "per_position_p", "device_spans"]
    rows = []
    for g in doc["groups"]:
        # a file name's bytes that are no UTF-8 as escapes: the UTF-8 file could not hold them
        row = [text_label(str(g.get("file") or "")), g["bs"], g["steps"], g["topk"], g["draft_tokens"], g["cycles"]]
        for p in ALL_PHASES:
            ph = (g.get("phases") or {}).get(p) or {}
            row += [ph.get(s) for s in stats]
        hist = g.get("accept_hist") or {}
        pos = g.get("per_position_acceptance") or []
        row += [g.get("accept_len_mean"), g.get("tok_s"),
                " ".join(f"{k}:{v}" for k, v in hist.items()),
                " ".join("-" if p["p"] is None else f"{p['p']:.6g}" for p in pos), int(bool(g.get("device_spans")))]
        rows.append(["" if v is None else v for v in row])
    return header, rows


def write_csv(doc: dict[str, Any], fh: TextIO) -> None:
    """Write :func:`csv_rows` to ``fh``."""
    header, rows = csv_rows(doc)
    out = csv.writer(fh)
    out.writerow(header)
    out.writerows(rows)
