"""Terminal tables whose figures are never cut.

rich shrinks a table that does not fit the terminal by cutting cells (``136…``). These tables
give every figure column exactly the width of its widest cell, without wrapping, and let only
the label columns (notes, status, paths) wrap or be cut; light borders (one space between
columns) keep a dozen columns inside 100 terminal columns.
"""

from __future__ import annotations

from typing import Optional, Sequence

#: a column: (header, "right" for a figure or "left" for a label); a header may hold a "\n"
Column = tuple[str, str]


def _cell_len(cell: str) -> int:
    from rich.text import Text

    return Text.from_markup(cell).cell_len


def figure_table(title: Optional[str], columns: Sequence[Column], rows: Sequence[Sequence[str]],
                 caption: Optional[str] = None):
    """A ``rich.table.Table``: right-justified columns are figures (never cut), left ones labels.

    Args:
        title: printed above, left-justified (wraps).
        columns: ``(header, justify)`` pairs; ``justify == "left"`` marks a label column.
        rows: cells as rich markup strings, one per column.
        caption: printed below, left-justified.

    Raises:
        ValueError: a row with a different number of cells than ``columns``.
    """
    from rich import box
    from rich.table import Table

    tab = Table(title=title, title_justify="left", caption=caption, caption_justify="left",
                box=box.SIMPLE_HEAD, padding=(0, 0), pad_edge=False)
    for i, (head, justify) in enumerate(columns):
        if justify == "left":
            tab.add_column(head, justify="left", ratio=1, min_width=8, overflow="fold")
        else:
            width = max([_cell_len(r[i]) for r in rows] + [len(part) for part in head.split("\n")])
            tab.add_column(head, justify="right", no_wrap=True, min_width=width)
    for r in rows:
        if len(r) != len(columns):
            raise ValueError(f"row of {len(r)} cells for {len(columns)} columns")
        tab.add_row(*r)
    return tab
