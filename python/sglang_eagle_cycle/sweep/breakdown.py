"""The cycle breakdown of one measurement, from the part of the server log it wrote.

Before a measurement the runner remembers the log's size; afterwards the bytes between that
offset and the new end hold exactly the lines written meanwhile (``[eagle-cycle]`` lines from
the plugin, stock ``Decode batch`` lines). They go through :func:`sglang_eagle_cycle.report.inspect_paths`
(the ``eagle-cycle inspect --json`` reader: one parser for the whole project), and the record
keeps one group of its ``groups``: the one with the server's ``(steps, topk, draft_tokens)``
and the most cycles, preferring ``bs == concurrency`` on a tie.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable, Optional

from ..errors import UsageError
from .grid import ServerConfig

#: Bytes of one measurement's log slice we read at most (a day at bs 1 is far below this).
MAX_SLICE_BYTES = 1 << 30


def read_slice(path: Path, start: int, end: int) -> bytes:
    """Bytes ``[start, end)`` of ``path`` (fewer if the file is shorter)."""
    end = min(end, start + MAX_SLICE_BYTES)
    if end <= start:
        return b""
    with open(path, "rb") as f:
        f.seek(start)
        return f.read(end - start)


def pick_group(groups: list[dict], server: ServerConfig, concurrency: int) -> Optional[dict]:
    """The group matching the server's configuration with the most cycles (``bs == concurrency`` wins ties)."""
    matching = [
        g for g in groups
        if g.get("steps") == server.steps
        and (server.topk is None or g.get("topk") == server.topk)
        and (server.num_draft_tokens is None or g.get("draft_tokens") == server.num_draft_tokens)
    ]
    if not matching:
        return None
    return max(matching, key=lambda g: (g.get("cycles") or 0, g.get("bs") == concurrency))


def cycle_breakdown(
    log_path: Optional[Path],
    start: int,
    end: int,
    server: ServerConfig,
    concurrency: int,
    warn: Callable[[str], None],
) -> Optional[dict]:
    """One ``inspect --json`` group for the log bytes ``[start, end)``, or ``None``.

    ``None`` when there is no log, for the baseline (no cycles), when the slice holds no
    ``[eagle-cycle]`` line (plugin not loaded, or its timing disabled), or when the report
    module is unavailable; every case but the first two is reported through ``warn``.
    The group's ``file`` is set to the server log's path (the slice is a temporary file).
    """
    if log_path is None or server.steps == 0:
        return None
    data = read_slice(log_path, start, end)
    if b"[eagle-cycle]" not in data:
        warn(f"no [eagle-cycle] lines in {log_path} during this measurement: cycle left null "
             "(is the sglang-eagle-cycle plugin installed in the server's environment?)")
        return None
    try:
        from ..report import inspect_paths
    except ImportError as exc:
        warn(f"sglang_eagle_cycle.report.inspect_paths unavailable ({exc}): cycle left null")
        return None
    fd, tmp = tempfile.mkstemp(prefix="eagle-cycle-slice-", suffix=".log")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        doc = inspect_paths([tmp], warn=warn)
    except UsageError as exc:
        warn(f"cannot inspect the log slice of {log_path}: {exc}: cycle left null")
        return None
    finally:
        os.unlink(tmp)
    group = pick_group(list(doc.get("groups") or []), server, concurrency)
    if group is None:
        warn(f"no cycle group for steps={server.steps} topk={server.topk} "
             f"draft_tokens={server.num_draft_tokens} in {log_path}: cycle left null")
        return None
    group = dict(group)
    if "file" in group:
        group["file"] = str(log_path)
    return group
