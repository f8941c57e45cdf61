"""Client for SGLang's native ``/generate`` endpoint, and a closed-loop load generator.

Request body (SGLang 0.5.23 ``GenerateRequest``)::

    {"text": "...", "stream": true,
     "sampling_params": {"temperature": 0.0, "max_new_tokens": 256, "ignore_eos": false}}

Streaming responses are server-sent events: ``data: {json}`` blocks separated by blank lines,
ended by ``data: [DONE]``; an error arrives as ``data: {"error": {...}}``. Every event carries
``meta_info.completion_tokens`` (cumulative), so the tokens an event brings are the difference
to the previous one, whatever ``--incremental-streaming-output`` says about ``text``. The last
event's ``meta_info`` holds the speculative-decoding counters that SGLang adds only when a
request finishes: ``spec_verify_ct`` (verify steps) and ``spec_correct_drafts_histogram``
(verify steps by number of accepted drafts).

Timing conventions (all from ``time.perf_counter``):

* TTFT: request sent -> first event with ``completion_tokens > 0``;
* inter-token latency: an event bringing ``k`` tokens ``g`` seconds after the previous one adds
  ``k`` samples of ``g / k`` (speculative decoding commits several tokens per cycle; this keeps
  the mean ITL equal to decode time per token, as SGLang's own ``bench_serving`` does).

Without streaming, TTFT and ITL are not observable and stay empty.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import httpx


class ServerError(Exception):
    """The server did not answer a control request (``/server_info``) usably."""


@dataclass(frozen=True)
class GenerateSettings:
    """What every measured request asks for.

    Attributes:
        max_new_tokens: ``sampling_params.max_new_tokens`` (tokens).
        stream: use SSE streaming (needed for TTFT and ITL).
        ignore_eos: ``sampling_params.ignore_eos`` (every request then generates ``max_new_tokens``).
        request_timeout_s: read timeout per request, seconds.
    """

    max_new_tokens: int
    stream: bool = True
    ignore_eos: bool = False
    request_timeout_s: float = 600.0


@dataclass
class RequestResult:
    """Outcome of one ``/generate`` request.

    Attributes:
        ok: the request completed (``[DONE]`` seen when streaming, HTTP 200 with JSON otherwise).
        error: one-line reason when not ``ok``.
        sent_at, finished_at: ``time.perf_counter()`` seconds.
        ttft_s: time to first token, seconds (streaming only).
        itl_s: per-token inter-token latencies, seconds (streaming only).
        completion_tokens: tokens generated (``meta_info.completion_tokens``).
        spec_verify_ct: verify steps (``meta_info.spec_verify_ct``; ``None`` without speculation).
        correct_drafts_hist: ``meta_info.spec_correct_drafts_histogram``: index ``i`` counts
            verify steps that accepted ``i`` drafts (accept length ``i + 1``).
    """

    ok: bool
    error: Optional[str]
    sent_at: float
    finished_at: float
    ttft_s: Optional[float] = None
    itl_s: list[float] = field(default_factory=list)
    completion_tokens: int = 0
    spec_verify_ct: Optional[int] = None
    correct_drafts_hist: Optional[list[int]] = None


def generate_body(text: str, settings: GenerateSettings) -> dict:
    """The ``/generate`` JSON body: greedy (temperature 0), ``max_new_tokens``, ``stream``.

    No ``sampling_seed`` is sent: greedy decoding does not sample, and SGLang 0.5.23 asserts
    on a seed with the flashinfer sampling backend.
    """
    return {
        "text": text,
        "stream": settings.stream,
        "sampling_params": {
            "temperature": 0.0,
            "max_new_tokens": settings.max_new_tokens,
            "ignore_eos": settings.ignore_eos,
        },
    }


def _fill_from_meta(result: RequestResult, obj: dict) -> bool:
    """Read ``obj["meta_info"]`` into ``result``; True when it carried ``completion_tokens``.

    Raises:
        ValueError: ``meta_info`` is there but not a JSON object.
    """
    meta = obj.get("meta_info")
    if meta is None:
        return False
    if not isinstance(meta, dict):
        raise ValueError("meta_info is not a JSON object")
    ct = meta.get("completion_tokens")
    seen = isinstance(ct, int) and not isinstance(ct, bool)
    if seen:
        result.completion_tokens = ct
    vc = meta.get("spec_verify_ct")
    if isinstance(vc, int) and not isinstance(vc, bool):
        result.spec_verify_ct = vc
    hist = meta.get("spec_correct_drafts_histogram")
    if isinstance(hist, list) and all(isinstance(x, int) for x in hist):
        result.correct_drafts_hist = list(hist)
    return seen


def _error_text(obj: dict) -> str:
    err = obj.get("error")
    if isinstance(err, dict):
        return str(err.get("message") or err)
    return str(err)


#: A response that never says how many tokens it generated cannot be measured (it would count 0).
_NO_COUNT = "response without meta_info.completion_tokens (not an SGLang /generate answer?)"


async def _read_stream(resp: httpx.Response, result: RequestResult) -> None:
    prev_tokens = 0
    prev_t = result.sent_at
    counted = False
    async for line in resp.aiter_lines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            if result.error is None and not counted:
                result.error = _NO_COUNT
            result.ok = result.error is None
            return
        now = time.perf_counter()
        obj = json.loads(payload)
        if not isinstance(obj, dict):
            raise ValueError("stream event is not a JSON object")
        if "error" in obj:
            result.error = "server error: " + _error_text(obj)
            continue
        counted = _fill_from_meta(result, obj) or counted
        new = result.completion_tokens - prev_tokens
        if new <= 0:
            continue
        if result.ttft_s is None:
            result.ttft_s = now - result.sent_at
        else:
            result.itl_s.extend([(now - prev_t) / new] * new)
        prev_tokens, prev_t = result.completion_tokens, now
    if result.error is None:
        result.error = "stream ended before data: [DONE] (server closed the connection)"


async def generate(
    client: httpx.AsyncClient, base_url: str, text: str, settings: GenerateSettings
) -> RequestResult:
    """Send one request; never raises for server or network failures (``ok=False`` instead)."""
    result = RequestResult(ok=False, error=None, sent_at=time.perf_counter(), finished_at=0.0)
    body = generate_body(text, settings)
    try:
        if settings.stream:
            async with client.stream("POST", base_url + "/generate", json=body) as resp:
                if resp.status_code != 200:
                    detail = (await resp.aread())[:300].decode("utf-8", "replace")
                    result.error = f"HTTP {resp.status_code}: {detail}"
                else:
                    await _read_stream(resp, result)
        else:
            resp = await client.post(base_url + "/generate", json=body)
            if resp.status_code != 200:
                result.error = f"HTTP {resp.status_code}: {resp.text[:300]}"
            else:
                obj = resp.json()
                if not isinstance(obj, dict) or "error" in obj:
                    result.error = "server error: " + (_error_text(obj) if isinstance(obj, dict) else "not an object")
                elif not _fill_from_meta(result, obj):
                    result.error = _NO_COUNT
                else:
                    result.ok = True
    except (httpx.HTTPError, ValueError) as exc:  # network/protocol failure, malformed JSON
        result.ok = False
        result.error = f"{type(exc).__name__}: {exc}".strip().rstrip(":") or type(exc).__name__
    result.finished_at = time.perf_counter()
    if result.error is not None:
        result.ok = False
        result.error = " ".join(result.error.split())[:500]
    return result


@dataclass
class LoadResult:
    """All requests of one measurement window.

    Attributes:
        results: one entry per request, in completion order.
        started, finished: ``time.perf_counter()`` at the first send and the last completion.
    """

    results: list[RequestResult]
    started: float
    finished: float

    @property
    def wall_s(self) -> float:
        """Window length, seconds."""
        return max(0.0, self.finished - self.started)

    @property
    def failures(self) -> list[RequestResult]:
        return [r for r in self.results if not r.ok]


async def closed_loop(
    base_url: str,
    prompts: list[str],
    concurrency: int,
    settings: GenerateSettings,
    *,
    num_requests: Optional[int] = None,
    duration_s: Optional[float] = None,
    on_result: Optional[Callable[[RequestResult], None]] = None,
) -> LoadResult:
    """Keep ``concurrency`` requests in flight until ``num_requests`` were sent or ``duration_s``
    passed (requests already sent finish and count). Prompts are taken in order, cycling.

    After the first failed request no new request is sent (a failed measurement is not measured
    further; a crashed server fails the in-flight ones at once).

    Raises:
        ValueError: neither or both of ``num_requests`` and ``duration_s``; empty ``prompts``.
    """
    if (num_requests is None) == (duration_s is None):
        raise ValueError("give exactly one of num_requests and duration_s")
    if not prompts:
        raise ValueError("no prompts")
    limits = httpx.Limits(max_connections=concurrency + 2, max_keepalive_connections=concurrency + 2)
    timeout = httpx.Timeout(settings.request_timeout_s, connect=10.0)
    results: list[RequestResult] = []
    sent = 0
    failed = False
    started = time.perf_counter()
    deadline: Optional[float] = None

    def next_prompt() -> Optional[str]:
        nonlocal sent
        if failed:
            return None
        if num_requests is not None and sent >= num_requests:
            return None
        if deadline is not None and time.perf_counter() >= deadline:
            return None
        text = prompts[sent % len(prompts)]
        sent += 1
        return text

    async with httpx.AsyncClient(timeout=timeout, limits=limits, trust_env=False) as client:
        # open the keep-alive connections first, so TCP set-up does not stagger the first requests
        # (GET /model_info is a cheap read in SGLang; /health would run a generation when idle)
        await asyncio.gather(*(client.get(base_url + "/model_info") for _ in range(concurrency)),
                             return_exceptions=True)
        started = time.perf_counter()
        if duration_s is not None:
            deadline = started + duration_s

        async def worker() -> None:
            nonlocal failed
            while (text := next_prompt()) is not None:
                res = await generate(client, base_url, text, settings)
                results.append(res)
                failed = failed or not res.ok
                if on_result is not None:
                    on_result(res)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    # the window: first request sent -> last one completed (client set-up is not measured)
    first_sent = min((r.sent_at for r in results), default=started)
    finished = max((r.finished_at for r in results), default=time.perf_counter())
    return LoadResult(results=results, started=first_sent, finished=finished)


def run_load(base_url: str, prompts: list[str], concurrency: int, settings: GenerateSettings,
             **kwargs) -> LoadResult:
    """Synchronous wrapper of :func:`closed_loop` (one event loop per measurement)."""
    return asyncio.run(closed_loop(base_url, prompts, concurrency, settings, **kwargs))


def health_ok(base_url: str, timeout_s: float = 5.0) -> bool:
    """``GET /health`` answered 200 (SGLang answers 503 while starting)."""
    try:
        with httpx.Client(timeout=timeout_s, trust_env=False) as c:
            return c.get(base_url + "/health").status_code == 200
    except httpx.HTTPError:
        return False


def get_server_info(base_url: str, timeout_s: float = 30.0) -> dict:
    """``GET /server_info`` (``/get_server_info`` is deprecated in 0.5.23): the resolved server args.

    Raises:
        ServerError: no answer, a non-200 status, or a body that is not a JSON object.
    """
    try:
        with httpx.Client(timeout=timeout_s, trust_env=False) as c:
            resp = c.get(base_url + "/server_info")
    except httpx.HTTPError as exc:
        raise ServerError(f"/server_info: {type(exc).__name__}: {exc}") from None
    if resp.status_code != 200:
        raise ServerError(f"/server_info: HTTP {resp.status_code}")
    try:
        obj = resp.json()
    except ValueError:
        raise ServerError("/server_info: body is not JSON") from None
    if not isinstance(obj, dict):
        raise ServerError("/server_info: body is not a JSON object")
    return obj
