"""What this process is, read from SGLang's published runtime context, with safe fallbacks.

Every function here tolerates a process where SGLang published nothing (a test, the CLI): it then
answers rank 0 of a world of size 1 and no draft path. Nothing is imported at module top beyond
the standard library.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Ranks:
    """Ranks and sizes of this process (tensor, pipeline and data parallel)."""

    tp_rank: int = 0
    pp_rank: int = 0
    dp_rank: int = 0
    tp_size: int = 1
    pp_size: int = 1
    dp_size: int = 1

    @property
    def is_first(self) -> bool:
        """Rank 0 of every dimension: the rank that prints by default."""
        return self.tp_rank == 0 and self.pp_rank == 0 and self.dp_rank == 0

    @property
    def world(self) -> int:
        return self.tp_size * self.pp_size * self.dp_size

    def label(self) -> str:
        """``tp0`` for TP only, ``tp1.pp0.dp0`` when PP or DP are used."""
        if self.pp_size == 1 and self.dp_size == 1:
            return f"tp{self.tp_rank}"
        return f"tp{self.tp_rank}.pp{self.pp_rank}.dp{self.dp_rank}"


def _read(obj, name: str) -> Optional[int]:
    try:
        value = getattr(obj, name)
    except Exception:  # unpublished context raises ValueError/RuntimeError/AttributeError
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def ranks() -> Ranks:
    """This process's ranks from ``sglang.srt.runtime_context.get_parallel()``; zeros when unpublished."""
    try:
        from sglang.srt.runtime_context import get_parallel

        par = get_parallel()
    except Exception:
        return Ranks()
    vals = {}
    for field in ("tp_rank", "pp_rank", "dp_rank", "tp_size", "pp_size", "dp_size"):
        v = _read(par, field)
        if v is not None:
            vals[field] = v
    return Ranks(**vals)


def draft_model_path() -> tuple[Optional[str], Optional[str]]:
    """``(speculative_draft_model_path, speculative_draft_model_revision)`` or ``(None, None)``."""
    try:
        from sglang.srt.runtime_context import get_spec

        spec = get_spec()
    except Exception:
        return None, None
    path = getattr(spec, "speculative_draft_model_path", None)
    revision = getattr(spec, "speculative_draft_model_revision", None)
    return (str(path) if path else None), (str(revision) if revision else None)


def env_flag(name: str, default: bool) -> bool:
    """Boolean environment switch: ``0/false/no/off`` is False, ``1/true/yes/on`` True, else ``default``."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    raw = raw.strip().lower()
    if raw in ("0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    return default
