"""Run in a fresh interpreter by ``test_adaptive.py``: ``SGLANG_EAGLE_CYCLE_ADAPTIVE=cost`` on SGLang's
real ``EAGLEWorkerV2.__init__`` (the draft worker a stand-in, the pipeline group stated through the
runtime context), hooked through the plugin's own registration and SGLang's HookRegistry.

Prints one JSON object: what the controller's policy became in each case, and the warnings.
"""

from __future__ import annotations

import json
import logging
import types
from unittest import mock

warnings: list = []


class _Keep(logging.Handler):
    def emit(self, record):
        if record.levelno >= logging.WARNING:
            warnings.append(record.getMessage())


logging.getLogger("sglang_eagle_cycle").addHandler(_Keep())

from sglang_eagle_cycle import plugin  # noqa: E402

plugin.register()   # the areas the environment asks for, hooked when SGLang imports their modules

from sglang.srt.runtime_context import get_parallel  # noqa: E402
from sglang.test.test_utils import published_topology  # noqa: E402

import sglang.srt.speculative.eagle_worker_v2 as ew  # noqa: E402  (the hook is applied on this import)
from sglang_eagle_cycle.sinks import RECORD_CONSUMERS  # noqa: E402

SPEC = dict(speculative_algorithm="EAGLE3", speculative_num_steps=3, speculative_eagle_topk=1,
            speculative_num_draft_tokens=4, speculative_draft_model_path="draft")


class _Draft:
    def __init__(self, *args, **kwargs):
        pass


def build(adaptive: bool, **par):
    with published_topology(speculative_adaptive=adaptive, **SPEC) as server_args, \
            get_parallel().override(pp_group=types.SimpleNamespace(is_last_rank=True), **par), \
            mock.patch.object(ew, "EagleDraftWorker", _Draft):
        return ew.EAGLEWorkerV2(server_args, 0, 0, types.SimpleNamespace())


out = {"hooked": hasattr(ew.EAGLEWorkerV2.__init__, "__wrapped__")}
w = build(True)
params = w.adaptive_controller.params
out["policy"] = type(params).__name__
out["inner"] = type(getattr(params, "ours", None)).__name__
out["candidates"] = list(params.candidate_steps)
out["consumer_registered"] = getattr(params, "ours", None) in RECORD_CONSUMERS
out["steps_for_bs1"] = params.get_steps_for_batch(1)
out["warnings_before_fault"] = list(warnings)

# a fault inside our policy: SGLang's policy takes over, one warning, nothing raised to the controller
def broken(*args, **kwargs):
    raise RuntimeError("policy bug")


if hasattr(params, "ours"):
    params.ours.on_verify_complete = broken
    w.adaptive_controller.on_verify_complete([1, 2], 2)
    w.adaptive_controller.on_verify_complete([1, 2], 2)
    out["active_after_fault"] = type(params.active).__name__
    out["fault_warnings"] = [m for m in warnings if "policy bug" in m]
    out["consumer_after_fault"] = params.ours in RECORD_CONSUMERS

warnings.clear()
w2 = build(False)
out["no_adaptive_controller"] = w2.adaptive_controller is None
out["no_adaptive_warnings"] = list(warnings)

warnings.clear()
import sglang.srt.distributed as sd  # noqa: E402

tp_group = types.SimpleNamespace(cpu_group=None, ranks=[0, 1], rank=1)   # this process: TP rank 1 of 2
with mock.patch.object(sd, "get_tp_group", lambda: tp_group):
    w3 = build(True, tp_size=2, attn_tp_size=2, moe_tp_size=2)
p3 = w3.adaptive_controller.params
out["tp2_policy"] = type(p3).__name__
out["tp2_synced_follower"] = bool(getattr(getattr(p3, "ours", None), "sync", None)) and not p3.ours.sync.leader
out["tp2_consumer"] = getattr(p3, "ours", None) in RECORD_CONSUMERS
out["tp2_warnings"] = list(warnings)
print(json.dumps(out))
