"""What this process is, read from SGLang's published runtime context, with safe fallbacks.

Every function here tolerates a process where SGLang published nothing (a test, the CLI): it then
answers rank 0 of a world of size 1 and no draft path. Nothing is imported at module top beyond
the standard library.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Mapping, Optional


@dataclass(frozen=True)
class Ranks:
    """Ranks and sizes of this process (tensor, pipeline and data parallel, and DP attention).

    ``attn_dp_size``/``attn_dp_rank``: SGLang 0.5.23 turns ``--enable-dp-attention --dp-size N``
    into ``attn_dp_size = N`` with ``dp_size = 1``; each attention-DP replica has its own
    stats-logging rank (attention-TP rank 0), so several ranks print.
    """

    tp_rank: int = 0
    pp_rank: int = 0
    dp_rank: int = 0
    tp_size: int = 1
    pp_size: int = 1
    dp_size: int = 1
    attn_dp_rank: int = 0
    attn_dp_size: int = 1

    @property
    def is_first(self) -> bool:
        """Rank 0 of every dimension: the rank that prints by default."""
        return self.tp_rank == 0 and self.pp_rank == 0 and self.dp_rank == 0

    @property
    def world(self) -> int:
        return self.tp_size * self.pp_size * self.dp_size

    def label(self) -> str:
        """``tp0`` for TP only, ``tp1.pp0.dp0`` when PP or DP are used; ``.adp{R}`` added with DP
        attention (``tp4.adp1``, or ``tp4.pp0.dp0.adp1``)."""
        base = f"tp{self.tp_rank}" if self.pp_size == 1 and self.dp_size == 1 else \
            f"tp{self.tp_rank}.pp{self.pp_rank}.dp{self.dp_rank}"
        return base + (f".adp{self.attn_dp_rank}" if self.attn_dp_size > 1 else "")


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
    for field in ("tp_rank", "pp_rank", "dp_rank", "tp_size", "pp_size", "dp_size", "attn_dp_rank", "attn_dp_size"):
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


def sglang_metric_labels() -> Optional[dict[str, str]]:
    """The labels SGLang 0.5.23 puts on its scheduler metrics in this process, or None when its
    metrics are off (no ``--enable-metrics``) or nothing was published.

    Mirrors ``SchedulerMetricsCollector.init_new``, in its order: ``model_name``
    (``served_model_name``), ``engine_type`` (``dynamic`` with the PD role switch, else SGLang's name
    of the disaggregation mode: ``unified``, ``prefill``, ``decode``), ``tp_rank``, ``pp_rank``,
    ``moe_ep_rank``, ``priority`` (value ``""``) only with ``--enable-priority-scheduling``,
    ``dp_rank`` only when SGLang sets one, then ``--extra-metric-labels`` (which may replace any of
    them). Each value is ``str(value)``, as ``prometheus_client`` writes SGLang's: a JSON ``null``
    in ``--extra-metric-labels`` (the flag's parser keeps it) is ``"None"`` on SGLang's series, so
    it is here too; ``""`` would be no label at all to Prometheus, and the series would not pair.
    """
    try:
        from sglang.srt.runtime_context import (get_disagg, get_observability, get_parallel, get_schedule,
                                                 get_serving)

        obs = get_observability()
        if not getattr(obs, "enable_metrics", False):
            return None
        par = get_parallel()
        disagg = get_disagg()
        if getattr(disagg, "enable_pd_role_switch", False):
            engine_type = "dynamic"
        else:
            from sglang.srt.disaggregation.utils import DisaggregationMode

            engine_type = DisaggregationMode.to_engine_type(disagg.disaggregation_mode)
        labels = {"model_name": get_serving().served_model_name, "engine_type": engine_type,
                  "tp_rank": par.tp_rank, "pp_rank": par.pp_rank, "moe_ep_rank": par.moe_ep_rank}
        # the scheduler passes its get_schedule() flag to init_new; the key goes before dp_rank there
        if getattr(get_schedule(), "enable_priority_scheduling", False):
            labels["priority"] = ""
        if getattr(par, "dp_rank", None) is not None:
            labels["dp_rank"] = par.dp_rank
        labels.update(getattr(obs, "extra_metric_labels", None) or {})
    except Exception:
        return None
    return {str(k): str(v) for k, v in labels.items()}


#: Every ``SGLANG_EAGLE_CYCLE*`` variable the plugin or the CLI reads (README, "Switches" and the tables).
KNOWN_ENV = frozenset({
    "SGLANG_EAGLE_CYCLE", "SGLANG_EAGLE_CYCLE_WIRING", "SGLANG_EAGLE_CYCLE_TIMING", "SGLANG_EAGLE_CYCLE_FORCE",
    "SGLANG_EAGLE_CYCLE_WIRING_STRICT", "SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS", "SGLANG_EAGLE_CYCLE_AUX_CONVENTION",
    "SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING", "SGLANG_EAGLE_CYCLE_LOG_EVERY", "SGLANG_EAGLE_CYCLE_JSONL",
    "SGLANG_EAGLE_CYCLE_ALL_RANKS", "SGLANG_EAGLE_CYCLE_NVTX", "SGLANG_EAGLE_CYCLE_METRICS",
    "SGLANG_EAGLE_CYCLE_ADAPTIVE",
})


def unknown_env(env: Optional[Mapping[str, str]] = None) -> list[str]:
    """One message per set ``SGLANG_EAGLE_CYCLE*`` variable that nothing reads (a typo, usually).

    Returns:
        Sorted by name: ``"NAME is set but nothing reads it; did you mean KNOWN?"`` (the suggestion
        only when a known name is close); ``[]`` when all are known.
    """
    import difflib

    head = "SGLANG_EAGLE_CYCLE_"
    suffixes = [k[len(head):] for k in KNOWN_ENV if k.startswith(head)]
    out = []
    for name in sorted(os.environ if env is None else env):
        if name.startswith("SGLANG_EAGLE_CYCLE") and name not in KNOWN_ENV:
            # any case: SGLANG_EAGLE_CYCLE_aux_layer_ids is the known name in lower case
            close = difflib.get_close_matches(name[len(head):].upper(), suffixes, n=1, cutoff=0.75)
            out.append(f"{name} is set but nothing reads it" + (f"; did you mean {head}{close[0]}?" if close else ""))
    return out


_FLAG_OFF = ("0", "false", "no", "off")
_FLAG_ON = ("1", "true", "yes", "on")
_flags_warned: set = set()


def env_flag(name: str, default: bool, env: Optional[Mapping[str, str]] = None) -> bool:
    """Boolean environment switch: ``0/false/no/off`` is False, ``1/true/yes/on`` True (any case).

    Unset or empty gives ``default``. Any other value also gives ``default``, with one WARNING per
    (name, value) on logger ``sglang_eagle_cycle`` naming the value and the default it fell back
    to: a typo such as ``=fasle`` is visible, and never stops a server.

    Args:
        name: the variable, e.g. ``SGLANG_EAGLE_CYCLE_WIRING_STRICT``.
        default: the value when unset, empty or unrecognised.
        env: the environment to read (default ``os.environ``).
    """
    raw = (os.environ if env is None else env).get(name)
    if raw is None or raw.strip() == "":
        return default
    word = raw.strip().lower()
    if word in _FLAG_OFF:
        return False
    if word in _FLAG_ON:
        return True
    if (name, raw) not in _flags_warned:
        _flags_warned.add((name, raw))
        logging.getLogger("sglang_eagle_cycle").warning(
            "%s=%r is not one of 1/true/yes/on or 0/false/no/off; using the default (%s)",
            name, raw, "on" if default else "off")
    return default
