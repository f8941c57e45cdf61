"""``SGLANG_EAGLE_CYCLE_ADAPTIVE=cost``: :class:`~sglang_eagle_cycle.adaptive.CostAwarePolicy` in
place of SGLang's own adaptive policy (README, "Adaptive speculation").

One AROUND hook on ``EAGLEWorkerV2.__init__``: after SGLang has built its ``AdaptiveController``
(with ``AdaptiveSpeculativeParams``) and before any CUDA graph is captured, the controller's
``params`` becomes a :class:`FallbackPolicy` around a ``CostAwarePolicy`` reading the same
``--speculative-adaptive-config``; the policy is handed the profiler's cycle records
(:data:`sglang_eagle_cycle.sinks.RECORD_CONSUMERS`, which also turns the timing on).

Refusals, each one WARNING at start-up, SGLang's own policy kept:

* no ``--speculative-adaptive`` (no controller to give a policy to), naming the flag;
* pipeline or data parallelism (and attention DP, which SGLang refuses for adaptive anyway). With
  tensor parallelism TP rank 0, the rank with cycle timings, decides and its choice reaches every TP
  rank through a non-blocking broadcast on SGLang's TP CPU group
  (:class:`~sglang_eagle_cycle.adaptive.BroadcastSync`), so all run the same depth;
* ``SGLANG_EAGLE_CYCLE_TIMING=0``: the policy would have no cycle times.

A fault inside the policy falls back to SGLang's policy for good, logged once.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping, Optional

from . import HookSpec

logger = logging.getLogger("sglang_eagle_cycle")

MODULE = "sglang.srt.speculative.eagle_worker_v2"
TARGET = f"{MODULE}.EAGLEWorkerV2.__init__"
ENV = "SGLANG_EAGLE_CYCLE_ADAPTIVE"
_warned: set = set()


def wanted(env: Optional[Mapping[str, str]] = None) -> bool:
    """Whether ``SGLANG_EAGLE_CYCLE_ADAPTIVE`` asks for our policy: ``cost`` yes; unset, empty,
    ``0``, ``off`` or ``sglang`` no; anything else no, with one WARNING naming the value."""
    import os

    raw = (os.environ if env is None else env).get(ENV, "")
    word = raw.strip().lower()
    if word == "cost":
        return True
    if word not in ("", "0", "off", "sglang", "false", "no") and raw not in _warned:
        _warned.add(raw)
        logger.warning("%s=%r is not one of cost or sglang (0/off); SGLang's own adaptive policy is kept", ENV, raw)
    return False


def hook_specs() -> list[HookSpec]:
    return [HookSpec(TARGET, MODULE, _init_hook, "adaptive")] if wanted() else []


def _init_hook(original, self, *args, **kwargs):
    result = original(self, *args, **kwargs)   # SGLang's own construction; its exceptions propagate
    from ..hooks import guard

    guard("adaptive policy", lambda: install_policy(self), lambda: None)
    return result


def _warn_once(key: str, message: str, *args) -> None:
    if key not in _warned:
        _warned.add(key)
        logger.warning(message, *args)


def install_policy(worker: Any) -> Optional[Any]:
    """Give ``worker.adaptive_controller`` a :class:`FallbackPolicy` around a ``CostAwarePolicy``.

    Returns the ``CostAwarePolicy``, or None when refused (module docstring; one WARNING each).
    """
    from ..runtime import env_flag, ranks

    ctl = getattr(worker, "adaptive_controller", None)
    if ctl is None:
        if getattr(worker, "_hosts_draft", True):
            _warn_once("no-adaptive", "sglang-eagle-cycle: %s=cost needs --speculative-adaptive; without it SGLang "
                       "serves the fixed --speculative-num-steps and there is no depth to choose", ENV)
        return None
    r = ranks()
    if r.pp_size > 1 or r.dp_size > 1 or r.attn_dp_size > 1:
        _warn_once("parallel", "sglang-eagle-cycle: %s=cost keeps SGLang's adaptive policy: with pipeline or data "
                   "parallelism (pp %d, dp %d, attention dp %d) the ranks' decisions are not kept in step",
                   ENV, r.pp_size, r.dp_size, r.attn_dp_size)
        return None
    if not env_flag("SGLANG_EAGLE_CYCLE_TIMING", True):
        _warn_once("timing", "sglang-eagle-cycle: %s=cost keeps SGLang's adaptive policy: it needs the cycle "
                   "timing, which SGLANG_EAGLE_CYCLE_TIMING=0 turns off", ENV)
        return None
    from sglang.srt.runtime_context import get_spec

    from ..adaptive import BroadcastSync, CostAwarePolicy
    from ..sinks import RECORD_CONSUMERS

    sync = None
    if r.tp_size > 1:   # TP rank 0 (the stats rank, the one with timings) decides; its choice is broadcast
        from sglang.srt.distributed import get_tp_group

        tp = get_tp_group()
        sync = BroadcastSync(tp.cpu_group, tp.ranks[0], tp.rank)
    try:
        policy = CostAwarePolicy(int(worker.speculative_num_steps),
                                 getattr(get_spec(), "speculative_adaptive_config", None), sync=sync)
    except ValueError as exc:   # the user's config file, not a fault of ours: said as such
        _warn_once("config", "sglang-eagle-cycle: %s=cost keeps SGLang's adaptive policy: %s", ENV, exc)
        return None
    if policy.candidate_steps != list(ctl.params.candidate_steps):
        raise ValueError(f"candidate steps {policy.candidate_steps} differ from SGLang's "
                         f"{list(ctl.params.candidate_steps)}")
    ctl.params = FallbackPolicy(policy, ctl.params)
    if sync is None or sync.leader:
        RECORD_CONSUMERS.append(policy)
    logger.info("sglang-eagle-cycle: adaptive depth chosen by CostAwarePolicy (candidates %s)", policy.candidate_steps)
    return policy


class FallbackPolicy:
    """An ``AdaptiveSpecPolicy`` that asks ``ours`` and, after any exception from it, ``theirs``
    (SGLang's policy) for good, with one WARNING. ``set_cuda_graph_bs`` goes to both, so the
    fallback routes batches as ours did.

    With several TP ranks, what the leader alone holds (the cycle records, its decisions) faults
    inside ``ours``, which then holds the depth on every rank (``CostAwarePolicy.frozen``); what
    reaches here is code every rank runs alike on the same verify results, so the ranks hand over
    to SGLang's policy at the same verify."""

    def __init__(self, ours: Any, theirs: Any):
        self.ours, self.theirs = ours, theirs
        self.active = ours

    def _fail(self, what: str, exc: BaseException) -> None:
        if self.active is self.ours:
            self.active = self.theirs
            logger.warning("sglang-eagle-cycle: internal error in the adaptive policy's %s (%s: %s); SGLang's own "
                           "adaptive policy takes over", what, type(exc).__name__, exc)
            from ..sinks import RECORD_CONSUMERS

            if self.ours in RECORD_CONSUMERS:
                RECORD_CONSUMERS.remove(self.ours)

    def _call(self, name: str, *args):
        if self.active is self.ours:
            try:
                return getattr(self.ours, name)(*args)
            except Exception as exc:
                self._fail(name, exc)
        return getattr(self.theirs, name)(*args)

    @property
    def candidate_steps(self) -> list[int]:
        return self.theirs.candidate_steps

    @property
    def last_mode(self) -> Optional[str]:
        """Our policy's state for the batch last routed (``explore``/``exploit``); None once SGLang's
        policy took over (the cycle lines then carry no ``adaptive=`` field)."""
        return self.ours.last_mode if self.active is self.ours else None

    def set_cuda_graph_bs(self, cuda_graph_bs) -> None:
        self.theirs.set_cuda_graph_bs(cuda_graph_bs)
        if self.active is self.ours:
            try:
                self.ours.set_cuda_graph_bs(cuda_graph_bs)
            except Exception as exc:
                self._fail("set_cuda_graph_bs", exc)

    def get_steps_for_batch(self, batch_size: int) -> int:
        return self._call("get_steps_for_batch", batch_size)

    def on_verify_complete(self, num_correct_drafts_per_req, batch_size: int):
        return self._call("on_verify_complete", num_correct_drafts_per_req, batch_size)

    def cuda_graph_bs_for_step(self, step: int):
        return self._call("cuda_graph_bs_for_step", step)
