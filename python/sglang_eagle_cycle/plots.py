"""One figure from an inspect document: where the cycle goes, and how far drafts get accepted.

Three panels, one colour per group (file x configuration):

1. stacked bars of the mean cycle, one bar per group: draft prep (device-span lines), draft,
   verify (target forward), verify (rest: sampling, acceptance), draft-extend, other; ms (they
   sum to the mean ``total_ms``); a phase no group measured has no bar and no entry in the phase
   legend, which sits beside the panel;
2. accept-length histogram: share of requests (%) per accept length (tokens, bonus included);
3. per-position acceptance: P(draft token j accepted | 1..j-1 accepted) against j.

Rendered with matplotlib's Agg canvas (no display, no pyplot state). Usage::

    from sglang_eagle_cycle.plots import render
    fig = render(doc, "cycle.png")      # doc from report.inspect_paths
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any, Optional

from .logfiles import text_label

#: Groups drawn at most (those with the most cycles); the title says when some are left out.
MAX_GROUPS = 12

# (label, colour, function of the phases dict -> ms)
_STACK = (
    # device-span lines: cycle start to the draft launch (host preparation), part of total_ms
    ("draft prep", "#c4d3e8", lambda p: (p.get("draft_prep_ms") or {}).get("mean")),
    ("draft", "#4c72b0", lambda p: p["draft_ms"]["mean"]),
    ("verify: target forward", "#dd8452", lambda p: p["verify_fwd_ms"]["mean"]),
    ("verify: rest", "#f2c49b", lambda p: _minus(p["verify_ms"]["mean"], p["verify_fwd_ms"]["mean"])),
    ("draft-extend", "#55a868", lambda p: p["extend_ms"]["mean"]),
    ("other", "#8c8c8c", lambda p: p["other_ms"]["mean"]),
)


def _minus(a: Optional[float], b: Optional[float]) -> Optional[float]:
    if a is None:
        return None
    return max(a - (b or 0.0), 0.0)


def group_label(group: dict[str, Any], with_file, older: bool = False) -> str:
    """Short x-axis label of a group: its config, and the file name when several files are shown.

    ``with_file``: False, True (the file's base name), or the name to show (:func:`file_names`).
    ``older``: say ``older lines`` for a group of lines without device spans (when a group of the
    same file and config has them, the two bars would otherwise carry one label).
    The file name is drawn as written: a ``$`` is escaped (matplotlib reads text between two as
    math, and one such name, ``cost$x^$.log``, ended the plot in a parse error), and bytes that
    are no UTF-8 are shown as ``\\xff`` escapes (the font renderer refused them)."""
    text = f"bs={group['bs']} steps={group['steps']}\ntopk={group['topk']}\ndraft_tokens={group['draft_tokens']}"
    if older:
        text += "\nolder lines" if not group.get("device_spans") else "\ndevice spans"
    if with_file:
        name = with_file if isinstance(with_file, str) else os.path.basename(str(group.get("file") or ""))
        text = text_label(name).replace("$", r"\$") + "\n" + text
    return text


def file_names(files: list[str]) -> dict[str, str]:
    """The shortest ending of each path (its base name, else with as many parent folders as it
    takes) that tells the files apart: ``run1/server.log`` and ``run2/server.log``, not two
    ``server.log`` (their bars and legend entries had carried one label)."""
    parts = {f: [p for p in str(f).replace(os.sep, "/").split("/") if p] or [str(f)] for f in files}
    names = {}
    for f, segs in parts.items():
        for k in range(1, len(segs) + 1):
            tail = segs[-k:]
            if not any(o != f and parts[o][-k:] == tail for o in parts):
                names[f] = "/".join(tail)
                break
        else:
            names[f] = str(f)
    return names


def group_colours(n: int) -> list:
    """``n`` distinct colours: matplotlib's ``tab10`` up to 10 groups, ``tab20`` up to 20, else
    evenly spaced along ``turbo`` (no colour repeats, so no two groups look alike)."""
    from matplotlib import colormaps

    if n <= 10:
        return [colormaps["tab10"](i) for i in range(n)]
    if n <= 20:
        return [colormaps["tab20"](i) for i in range(n)]
    return [colormaps["turbo"](i / (n - 1)) for i in range(n)]


def render(doc: dict[str, Any], path=None, fmt: Optional[str] = None):
    """Draw the three panels for ``doc["groups"]`` and save to ``path`` (a file name or binary file).

    ``fmt`` is the image format (``png``, ``svg``, ``pdf``); by default the file name's suffix.

    Returns:
        The matplotlib ``Figure`` (axes: phases, accept-length histogram, per-position acceptance).

    Raises:
        ValueError: the document has no group of cycle lines to draw.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    groups = sorted(doc.get("groups") or [], key=lambda g: -(g.get("cycles") or 0))[:MAX_GROUPS]
    if not groups:
        raise ValueError("no [eagle-cycle] cycles to plot")
    total_groups = len(doc.get("groups") or [])
    files = list(dict.fromkeys(str(g.get("file") or "") for g in groups))
    names = file_names(files) if len(files) > 1 else {}
    def kind(g):   # a file's configuration: its older and device-span groups share one
        return g.get("file"), g["bs"], g["steps"], g["topk"], g["draft_tokens"]

    kinds = Counter(map(kind, groups))
    labels = [group_label(g, names.get(str(g.get("file") or ""), False), older=kinds[kind(g)] > 1) for g in groups]
    colours = group_colours(len(groups))

    fig = Figure(figsize=(max(15.0, 9.5 + 1.4 * len(groups)), 5.4), layout="constrained")
    FigureCanvasAgg(fig)
    ax_phase, ax_hist, ax_pos = fig.subplots(1, 3, width_ratios=[max(len(groups), 2), 3, 3])

    # 1. stacked phase bars; a phase no group measured (draft prep on older lines, the draft at one
    # step) has no bar and no legend entry
    x = list(range(len(groups)))
    bottom = [0.0] * len(groups)
    for name, colour, get in _STACK:
        values = [get(g["phases"]) for g in groups]
        if all(v is None for v in values):
            continue
        heights = [v or 0.0 for v in values]
        ax_phase.bar(x, heights, bottom=bottom, color=colour, label=name, width=0.6)
        bottom = [b + h for b, h in zip(bottom, heights)]
    for xi, top in zip(x, bottom):
        ax_phase.annotate(f"{top:.2f} ms", (xi, top), ha="center", va="bottom", fontsize=8,
                          xytext=(0, 2), textcoords="offset points")
    ax_phase.set_ylim(0, max(bottom + [1e-3]) * 1.12)
    ax_phase.set_xticks(x, labels, fontsize=8)
    ax_phase.set_ylabel("mean time per cycle (ms)")
    ax_phase.set_xlabel("group (batch size, draft steps, topk, verified tokens)")
    title = "Cycle time by phase"
    if total_groups > len(groups):
        title += f" ({len(groups)} of {total_groups} groups, most cycles)"
    ax_phase.set_title(title)
    # the phase legend beside the panel, top to bottom as the bars stack: inside it, three columns
    # had been wider than one bar's panel and covered its y-axis labels
    handles, names = ax_phase.get_legend_handles_labels()
    ax_phase.legend(handles[::-1], names[::-1], fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                    borderaxespad=0.0, title="phase", title_fontsize=8)

    # 2. accept-length histogram, grouped bars
    width = 0.8 / len(groups)
    max_len = 1
    max_pct = 0.0
    for i, g in enumerate(groups):
        hist = {int(k): v for k, v in (g.get("accept_hist") or {}).items()}
        requests = sum(hist.values())
        if not requests:
            continue
        lengths = sorted(hist)
        max_len = max(max_len, lengths[-1])
        max_pct = max(max_pct, 100.0 * max(hist.values()) / requests)
        ax_hist.bar([k - 0.4 + width * (i + 0.5) for k in lengths], [100.0 * hist[k] / requests for k in lengths],
                    width=width, color=colours[i], label=labels[i].replace("\n", " "))
    ax_hist.set_xticks(range(1, max_len + 1))
    ax_hist.set_xlabel("accept length (tokens, incl. bonus)")
    ax_hist.set_ylabel("requests (%)")
    ax_hist.set_title("Accept length")
    if ax_hist.patches:
        ax_hist.set_ylim(0, max_pct * 1.1)

    # 3. per-position acceptance
    for i, g in enumerate(groups):
        pos = g.get("per_position_acceptance") or []
        if pos:
            ax_pos.plot([p["j"] for p in pos], [p["p"] if p["p"] is not None else float("nan") for p in pos],
                        marker="o", color=colours[i], label=labels[i].replace("\n", " "))
    ax_pos.set_ylim(-0.03, 1.05)   # a point at 0 stays whole
    ax_pos.set_xlabel("draft position j (token)")
    ax_pos.set_ylabel("P(draft j accepted | 1..j-1 accepted) (0-1)")
    ax_pos.set_title("Per-position acceptance")
    if ax_pos.lines:
        ax_pos.xaxis.get_major_locator().set_params(integer=True)
    # one legend of the groups for both group panels, below the axes: it covers no bar and no curve
    handles = [Patch(color=colours[i], label=labels[i].replace("\n", " ")) for i in range(len(groups))]
    if ax_hist.patches or ax_pos.lines:
        fig.legend(handles=handles, loc="outside lower center", ncols=min(len(groups), 4), fontsize=7,
                   title="groups (histogram bars, acceptance curves)", title_fontsize=7)
    if path is not None:
        fig.savefig(path, dpi=110, format=fmt)
    return fig
