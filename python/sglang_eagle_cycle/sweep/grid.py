"""The configurations a sweep visits, and the server's effective values from ``/server_info``.

SGLang 0.5.23 resolves speculation arguments before serving: with ``topk == 1`` it forces
``num_draft_tokens = num_steps + 1`` (``speculative_hook.py``), and with no ``num_steps`` it
picks ``(steps, topk, draft_tokens)`` from the target architecture. Records therefore carry the
values ``/server_info`` reports, and the grid predicts them only where the rule makes them
certain (so a re-run can skip a finished configuration without restarting the server).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .client import ServerError


@dataclass(frozen=True)
class SpecConfig:
    """One requested server configuration.

    Attributes:
        steps: ``--speculative-num-steps``; 0 means the no-speculation baseline.
        topk: ``--speculative-eagle-topk`` (``None`` for the baseline).
        draft_tokens: ``--speculative-num-draft-tokens``; ``None`` = not passed ("auto").
    """

    steps: int
    topk: Optional[int] = None
    draft_tokens: Optional[int] = None

    @property
    def is_baseline(self) -> bool:
        return self.steps == 0

    @property
    def label(self) -> str:
        """Short name for logs and progress, e.g. ``baseline`` or ``steps3-topk1-dtauto``."""
        if self.is_baseline:
            return "baseline"
        dt = "auto" if self.draft_tokens is None else str(self.draft_tokens)
        return f"steps{self.steps}-topk{self.topk}-dt{dt}"

    def predicted(self) -> Optional[tuple[int, Optional[int], Optional[int]]]:
        """``(steps, topk, num_draft_tokens)`` the server will report, or ``None`` if unknown."""
        if self.is_baseline:
            return (0, None, None)
        if self.topk == 1:
            return (self.steps, 1, self.steps + 1)
        if self.draft_tokens is not None:
            return (self.steps, self.topk, self.draft_tokens)
        return None


def build_grid(steps: list[int], topks: list[int], draft_tokens: list[Optional[int]],
               baseline: bool) -> list[SpecConfig]:
    """Baseline first (speedups need it), then every (steps, topk, draft_tokens) in order.

    With ``topk == 1`` the draft-token values collapse into one configuration (SGLang forces
    ``steps + 1``), so no server is started twice for the same effective configuration.
    """
    grid: list[SpecConfig] = [SpecConfig(0)] if baseline else []
    for s in steps:
        for k in topks:
            for n in ([None] if k == 1 else draft_tokens):
                cfg = SpecConfig(s, k, n)
                if cfg not in grid:
                    grid.append(cfg)
    return grid


@dataclass(frozen=True)
class ServerConfig:
    """What a running server reports: model, draft and effective speculation values."""

    model: Optional[str]
    draft: Optional[str]
    steps: int
    topk: Optional[int]
    num_draft_tokens: Optional[int]


def _int_or_none(v) -> Optional[int]:
    if v is None or isinstance(v, bool):
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def server_config(info: dict) -> ServerConfig:
    """Read ``/server_info`` (flat resolved server args in 0.5.23).

    No ``speculative_algorithm`` means the baseline: ``steps 0`` and no topk / draft tokens / draft.

    Raises:
        ServerError: a speculative server without a ``speculative_num_steps`` >= 1 (steps 0 would
            record it as the no-speculation baseline, which every speedup is divided by).
    """
    model = info.get("model_path")
    if not info.get("speculative_algorithm"):
        return ServerConfig(model=model, draft=None, steps=0, topk=None, num_draft_tokens=None)
    steps = _int_or_none(info.get("speculative_num_steps"))
    if steps is None or steps < 1:
        raise ServerError(f"/server_info: speculative_algorithm {info.get('speculative_algorithm')!r} "
                          f"with speculative_num_steps {info.get('speculative_num_steps')!r}: no draft "
                          "depth to record (the sweep measures EAGLE-style num_steps)")
    return ServerConfig(
        model=model,
        draft=info.get("speculative_draft_model_path"),
        steps=steps,
        topk=_int_or_none(info.get("speculative_eagle_topk")),
        num_draft_tokens=_int_or_none(info.get("speculative_num_draft_tokens")),
    )
