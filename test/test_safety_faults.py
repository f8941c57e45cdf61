"""The safety rule (README, "Safety"), where an audit of every hook found it broken.

A fault inside our code is logged once and SGLang's own path goes on with its own result; only a
draft wired so that it cannot work (or an unreadable layer override) stops a launch. Each test below
injects a fault into one of our internal functions and drives the hook against SGLang 0.5.23's real
classes on the CPU, next to the same call without the plugin.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

pytest.importorskip("sglang")

sys.path.insert(0, str(Path(__file__).parent))

from plugin_probe import _stand_in, _state  # noqa: E402

import sglang_eagle_cycle.patches.wiring as pw  # noqa: E402
from sglang_eagle_cycle import hooks  # noqa: E402

LOG = "sglang_eagle_cycle"


@pytest.fixture
def clean(monkeypatch):
    """No SGLANG_EAGLE_CYCLE_* in the environment; the once-only fault log starts empty."""
    import os

    for name in [k for k in os.environ if k.startswith("SGLANG_EAGLE_CYCLE")]:
        monkeypatch.delenv(name)
    monkeypatch.setattr(hooks.fault_log, "_seen", set())


def _warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.name == LOG and r.levelno >= logging.WARNING]


def _setter(module: str, cls: str):
    import importlib

    return getattr(importlib.import_module(f"sglang.srt.models.{module}"), cls).set_eagle3_layers_to_capture


# A fault in the last step (making the capture state equal our positions), after SGLang's setter ran on
# its default path: the model was left with the default's positions (and, for a family that keeps
# per-layer flags, with no flag at all: nothing captured), not the wiring stock SGLang gives the ids.
@pytest.mark.parametrize("module,cls,n,where", [
    ("llama", "LlamaForCausalLM", 32, "_holder"),                # before anything is changed
    ("qwen3_moe", "Qwen3MoeForCausalLM", 48, "_is_hooked_class"),  # after the flags were cleared
])
def test_a_fault_applying_the_positions_leaves_stock_wiring_of_the_passed_ids(clean, monkeypatch, caplog,
                                                                              module, cls, n, where):
    setter = _setter(module, cls)
    ids = [3, 10, 20]   # not the family's default: stock captures [4, 11, 21]
    plain = _stand_in(module, n)
    stock_result = setter(plain, ids)

    def boom(*a, **k):
        raise RuntimeError("injected apply fault")

    monkeypatch.setattr(pw, where, boom)
    hook = pw._make_hook(module)
    with caplog.at_level(logging.INFO, logger=LOG):
        states = []
        for _ in range(3):   # every call faults; the warning comes once
            model = _stand_in(module, n)
            assert hook(setter, model, ids) is stock_result
            states.append(_state(model))
    assert states == [_state(plain)] * 3
    assert _state(plain)["layers_to_capture"] == [4, 11, 21]
    warnings = _warnings(caplog)
    assert len(warnings) == 1 and "RuntimeError: injected apply fault" in warnings[0], warnings


def _zero_layers(monkeypatch):
    monkeypatch.setattr(pw, "num_layers_of", lambda model: 0)   # our reading of the target gone wrong


def _usage_error_in_resolve(monkeypatch):
    import sglang_eagle_cycle.wiring as w
    from sglang_eagle_cycle.errors import UsageError

    def boom(**kw):
        raise UsageError("injected fault of ours")

    monkeypatch.setattr(w, "resolve_at_setter", boom)


# UsageError is our "unusable input" type: the hook read any one of them as an unusable
# SGLANG_EAGLE_CYCLE_* override and stopped the launch (EagleWiringError, "Fix or unset the
# SGLANG_EAGLE_CYCLE_* variable") though no variable was set.
@pytest.mark.parametrize("inject", [_zero_layers, _usage_error_in_resolve])
def test_a_usage_error_of_ours_does_not_stop_the_launch_in_the_overrides_name(clean, monkeypatch, caplog, inject):
    setter = _setter("deepseek_v2", "DeepseekV3ForCausalLM")
    ids = [2, 30, 58]
    plain = _stand_in("deepseek_v2", 61)
    stock_result = setter(plain, ids)
    inject(monkeypatch)
    hook = pw._make_hook("deepseek_v2")
    with caplog.at_level(logging.INFO, logger=LOG):
        for _ in range(3):
            model = _stand_in("deepseek_v2", 61)
            assert hook(setter, model, ids) is stock_result   # no EagleWiringError
            assert _state(model) == _state(plain)
    warnings = _warnings(caplog)
    assert len(warnings) == 1 and "internal error in wiring (deepseek_v2) (UsageError" in warnings[0], warnings
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_an_unreadable_override_still_stops_the_launch(clean, monkeypatch):
    """The deliberate stop the narrowing above keeps (README, "Safety")."""
    monkeypatch.setenv("SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS", "2,,30")
    with pytest.raises(pw.EagleWiringError, match="SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS"):
        pw._make_hook("deepseek_v2")(_setter("deepseek_v2", "DeepseekV3ForCausalLM"), _stand_in("deepseek_v2", 61),
                                     [2, 30, 58])
    monkeypatch.setenv("SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS", "2,30,58")
    monkeypatch.setenv("SGLANG_EAGLE_CYCLE_AUX_CONVENTION", "bogus")
    with pytest.raises(pw.EagleWiringError, match="SGLANG_EAGLE_CYCLE_AUX_CONVENTION"):
        pw._make_hook("deepseek_v2")(_setter("deepseek_v2", "DeepseekV3ForCausalLM"), _stand_in("deepseek_v2", 61),
                                     [2, 30, 58])


# The CUDA-graph capture guard (ModelRunner.init_cuda_graphs and the recapture methods): a fault of
# ours leaving the sink's pause ran in the hook's `finally`, unguarded; SGLang's capture call raised it
# in place of its own result (the server's start-up stopped there), or in place of its own exception.
def test_a_fault_ending_the_capture_pause_keeps_upstreams_result_and_exception(caplog):
    from sglang.srt.model_executor.model_runner import ModelRunner
    from sglang.srt.plugins.hook_registry import HookType, _wrap_fn

    from sglang_eagle_cycle.patches.cycle import CycleProfiler
    from sglang_eagle_cycle.sinks import CycleSink, SinkConfig

    class BrokenPause:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            raise OSError("injected fault leaving the pause")

    sink = CycleSink(SinkConfig(background=False), log=logging.getLogger(LOG))
    sink.capture_pause = BrokenPause
    prof = CycleProfiler(sink=sink, log=logging.getLogger(LOG))
    runner = object.__new__(ModelRunner)
    graphs = object()
    upstream_error = RuntimeError("upstream capture failed")

    def init_cuda_graphs(self):   # stands for SGLang's body, wrapped by SGLang's own AROUND wrapper
        if getattr(self, "fail", False):
            raise upstream_error
        return graphs

    hooked = _wrap_fn(init_cuda_graphs, prof.around_capture, HookType.AROUND)
    with caplog.at_level(logging.INFO, logger=LOG):
        assert [hooked(runner) for _ in range(3)] == [graphs] * 3
        runner.fail = True
        with pytest.raises(RuntimeError) as info:
            hooked(runner)
        assert info.value is upstream_error
    warnings = _warnings(caplog)
    assert len(warnings) == 1 and "OSError: injected fault leaving the pause" in warnings[0], warnings
