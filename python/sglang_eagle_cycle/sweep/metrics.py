"""Statistics of one measurement window (pure functions of the per-request results).

Definitions (the record fields of ``eagle-cycle-bench/1``):

* ``output_tok_s``: completion tokens of all requests / window length (first send to last
  completion), tok/s;
* ``request_per_s``: completed requests / window length;
* ``ttft_ms`` / ``itl_ms``: p50 and p99 (linear interpolation between order statistics, as
  ``numpy.percentile``) of time to first token and per-token inter-token latency, ms;
* ``accept_len_mean``: mean over requests of ``completion_tokens / spec_verify_ct``, SGLang's
  per-request accept length (tokens per verify step, bonus token included; the first token, from
  prefill, is counted in ``completion_tokens`` as SGLang does); ``None`` without speculation;
* ``accept_hist``: ``{accept_length: verify steps}`` summed over requests from
  ``spec_correct_drafts_histogram``, whose index ``i`` counts steps with ``i`` accepted drafts,
  so accept length is ``i + 1``.
"""

from __future__ import annotations

from typing import Iterable, Optional

import numpy as np

from .client import RequestResult


def percentiles_ms(values_s: Iterable[float], qs: tuple[int, ...] = (50, 99)) -> Optional[dict]:
    """``{"p50": ms, "p99": ms}`` of samples given in seconds; ``None`` without samples."""
    arr = np.asarray(list(values_s), dtype=float)
    if arr.size == 0:
        return None
    return {f"p{q}": round(float(np.percentile(arr, q)) * 1000.0, 3) for q in qs}


def accept_lengths(results: Iterable[RequestResult]) -> list[float]:
    """Per-request accept length ``completion_tokens / spec_verify_ct`` (requests with a verify)."""
    return [r.completion_tokens / r.spec_verify_ct for r in results
            if r.spec_verify_ct and r.spec_verify_ct > 0]


def accept_histogram(results: Iterable[RequestResult]) -> Optional[dict[str, int]]:
    """Summed ``{str(accepted_drafts + 1): verify steps}``; ``None`` when no request reported one."""
    total: dict[int, int] = {}
    seen = False
    for r in results:
        if r.correct_drafts_hist is None:
            continue
        seen = True
        for accepted, count in enumerate(r.correct_drafts_hist):
            if count:
                total[accepted + 1] = total.get(accepted + 1, 0) + count
    if not seen:
        return None
    return {str(k): total[k] for k in sorted(total)}


def summarize(results: list[RequestResult], wall_s: float) -> dict:
    """Record fields for a window whose requests all succeeded.

    Returns:
        ``num_prompts``, ``output_tok_s``, ``request_per_s``, ``ttft_ms``, ``itl_ms``,
        ``accept_len_mean``, ``accept_hist`` (see the module docstring for units).

    Raises:
        ValueError: no results or a non-positive window.
    """
    if not results:
        raise ValueError("no requests completed")
    if wall_s <= 0:
        raise ValueError(f"window length must be positive, got {wall_s}")
    tokens = sum(r.completion_tokens for r in results)
    acc = accept_lengths(results)
    ttfts = [r.ttft_s for r in results if r.ttft_s is not None]
    itls = [x for r in results for x in r.itl_s]
    return {
        "num_prompts": len(results),
        "output_tok_s": round(tokens / wall_s, 3),
        "request_per_s": round(len(results) / wall_s, 4),
        "ttft_ms": percentiles_ms(ttfts),
        "itl_ms": percentiles_ms(itls),
        "accept_len_mean": round(float(np.mean(acc)), 4) if acc else None,
        "accept_hist": accept_histogram(results),
    }
