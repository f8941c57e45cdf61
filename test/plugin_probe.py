"""Run in a fresh interpreter by test_plugin.py: SGLang's own load_plugins(), then report as JSON.

Usage: python plugin_probe.py SCENARIO [ARGS_JSON]

Scenarios:
  targets   -> which of our hook targets are wrapped, before and after their modules are imported
  setters   -> call each family's real setter on stand-ins with the given ids; report the capture state
  all       -> every check that runs under the default environment, in one interpreter
  version   -> an SGLang version other than 0.5.23, then SGLANG_EAGLE_CYCLE_FORCE=1
"""

from __future__ import annotations

import json
import logging
import sys
from types import SimpleNamespace


def _wrapped(obj_path: str) -> bool:
    import pkgutil

    mod_path, attr = obj_path.rsplit(".", 1)
    obj = pkgutil.resolve_name(mod_path)
    raw = obj.__dict__.get(attr) if isinstance(obj, type) else getattr(obj, attr)
    raw = getattr(raw, "__func__", raw)
    return hasattr(raw, "__wrapped__")


def scenario_targets(_args):
    from sglang.srt.plugins import load_plugins

    before = set(sys.modules)
    load_plugins()
    imported_by_plugins = sorted(m for m in set(sys.modules) - before
                                 if m.startswith(("sglang.srt.models.", "sglang.srt.speculative.")))
    from sglang_eagle_cycle import hooks
    from sglang_eagle_cycle.plugin import all_specs

    specs = all_specs(["wiring", "timing"])
    status_before = hooks.status()
    import importlib

    for module in sorted({s.module for s in specs}):
        importlib.import_module(module)
    from sglang.srt.plugins.hook_registry import HookRegistry

    out = {
        "imported_by_load_plugins": imported_by_plugins,
        "status_before_import": status_before,
        "status": hooks.status(),
        "wrapped": {s.target: _wrapped(s.target) for s in specs},
        "patched_by_registry": sorted(t for t in HookRegistry._patched if t in {s.target for s in specs}),
    }
    print(json.dumps(out))


class _InnerFlags:
    """Stand-in for an inner model whose setter is borrowed from the real upstream class."""

    def __init__(self, setter, n):
        self._setter = setter
        self.layers = [SimpleNamespace() for _ in range(n)]

    def set_eagle3_layers_to_capture(self, positions):
        return self._setter(self, positions)


def _stand_in(family: str, n: int):
    """Object shaped like the family's model for its setter: pp_group, config, model/language_model."""
    import importlib

    layers = [SimpleNamespace() for _ in range(n)]
    model = SimpleNamespace(layers=layers)
    inner_setters = {
        "qwen2_moe": ("sglang.srt.models.qwen2_moe", "Qwen2MoeModel"),
        "qwen3_moe": ("sglang.srt.models.qwen2_moe", "Qwen2MoeModel"),
        "qwen3_next": ("sglang.srt.models.qwen3_next", "Qwen3NextModel"),
        "qwen3_5_text": ("sglang.srt.models.qwen3_5", "Qwen3_5ForCausalLM"),
    }
    if family in inner_setters:
        mod, cls = inner_setters[family]
        setter = getattr(importlib.import_module(mod), cls).set_eagle3_layers_to_capture
        model = _InnerFlags(setter, n)
    config = SimpleNamespace(num_hidden_layers=n, hidden_size=64, text_config=SimpleNamespace(num_hidden_layers=n))
    obj = SimpleNamespace(pp_group=SimpleNamespace(is_last_rank=True), config=config, model=model)
    if family == "gemma4_mm":
        obj.language_model = SimpleNamespace(layers=layers)
        del obj.model
    if family == "kimi_k25":  # Kimi-K2.5 forwards to its DeepSeek-V3 language model
        from sglang.srt.models.deepseek_v2 import DeepseekV3ForCausalLM

        lm = object.__new__(DeepseekV3ForCausalLM)
        for key, value in vars(_stand_in("deepseek_v2", n)).items():
            object.__setattr__(lm, key, value)
        obj = SimpleNamespace(language_model=lm)
    return obj


def _state(obj) -> dict:
    lm = getattr(obj, "language_model", None)
    if lm is not None and hasattr(lm, "model"):
        obj = lm
    holder = getattr(obj, "model", None) or getattr(obj, "language_model")
    flags = [i for i, layer in enumerate(holder.layers) if getattr(layer, "_is_layer_to_capture", False)]
    return {"layers_to_capture": list(getattr(holder, "layers_to_capture", []) or []), "flags": flags}


def call_setters(calls) -> list[dict]:
    """Call each ``[module, class, num_layers, ids]`` setter on a fresh stand-in; its capture state or error."""
    import importlib

    results = []
    for module, cls_name, n, ids in calls:
        cls = getattr(importlib.import_module(f"sglang.srt.models.{module}"), cls_name)
        obj = _stand_in(module, n)
        try:
            cls.set_eagle3_layers_to_capture(obj, ids)
            results.append({"module": module, "class": cls_name, **_state(obj)})
        except Exception as exc:
            results.append({"module": module, "class": cls_name, "error": type(exc).__name__, "message": str(exc)})
    return results


def scenario_setters(args):
    """args: {"calls": [[family_module, class, n, ids], ...]}"""
    from sglang.srt.plugins import load_plugins

    load_plugins()
    print(json.dumps(call_setters(args["calls"])))


def scenario_all(args):
    """Everything that runs under the default environment, in one interpreter (SGLang imports are slow).

    args: {"calls": [...], "draft_dir": str}. Env toggles that our code reads at call time
    (STRICT, AUX_CONVENTION) are flipped inside this process.
    """
    import importlib
    import io
    import os

    log = io.StringIO()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s %(message)s", stream=log)
    from sglang.srt.plugins import load_plugins
    from sglang.srt.plugins.hook_registry import HookRegistry

    before = set(sys.modules)
    load_plugins()
    out = {"imported_by_load_plugins": sorted(m for m in set(sys.modules) - before
                                              if m.startswith(("sglang.srt.models.", "sglang.srt.speculative.")))}
    from sglang_eagle_cycle import hooks, plugin
    from sglang_eagle_cycle.patches import HookSpec
    from sglang_eagle_cycle.patches.banner import banner_lines

    specs = plugin.all_specs(["wiring", "timing"])
    out["status_before_import"] = hooks.status()
    for module in sorted({s.module for s in specs}):
        importlib.import_module(module)
    out["status"] = hooks.status()
    out["wrapped"] = {s.target: _wrapped(s.target) for s in specs}
    out["patched_by_registry"] = sorted(t for t in HookRegistry._patched if t in {s.target for s in specs})

    # re-entrant: a second register() adds no hook
    plugin.register()
    plugin.register()
    llama_t = "sglang.srt.models.llama.LlamaForCausalLM.set_eagle3_layers_to_capture"
    f = importlib.import_module("sglang.srt.models.llama").LlamaForCausalLM.set_eagle3_layers_to_capture
    out["reentrant"] = {"hooks": len(HookRegistry._hooks[llama_t]), "double_wrapped": hasattr(f.__wrapped__, "__wrapped__")}

    def run_calls(calls):
        mark = log.tell()
        return call_setters(calls), log.getvalue()[mark:]

    out["setters"], out["setters_log"] = run_calls(args["calls"])
    emb = [["deepseek_v2", "DeepseekV3ForCausalLM", 61, [-1, 2, 30, 58]]]
    out["strict"], out["strict_log"] = run_calls(emb)
    os.environ["SGLANG_EAGLE_CYCLE_WIRING_STRICT"] = "0"
    out["not_strict"], out["not_strict_log"] = run_calls(emb)
    os.environ["SGLANG_EAGLE_CYCLE_WIRING_STRICT"] = "fasle"   # a typo keeps the default, visibly
    out["strict_typo"], out["strict_typo_log"] = run_calls(emb + emb)
    del os.environ["SGLANG_EAGLE_CYCLE_WIRING_STRICT"]
    os.environ["SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS"] = "2,x,58"
    out["bad_env"], _ = run_calls([["deepseek_v2", "DeepseekV3ForCausalLM", 61, [2, 30, 58]]])
    del os.environ["SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS"]
    os.environ["SGLANG_EAGLE_CYCLE_AUX_CONVENTION"] = "input"
    out["convention_input"], _ = run_calls([["deepseek_v2", "DeepseekV3ForCausalLM", 61, [2, 30, 58]]])
    del os.environ["SGLANG_EAGLE_CYCLE_AUX_CONVENTION"]

    # ids read from the published draft's config.json (top-level ids: stock SGLang passes None)
    import sglang.srt.runtime_context as rc

    real_get_spec = rc.get_spec
    rc.get_spec = lambda: SimpleNamespace(speculative_draft_model_path=args["draft_dir"],
                                          speculative_draft_model_revision=None)
    out["draft_config"], out["draft_config_log"] = run_calls([["deepseek_v2", "DeepseekV3ForCausalLM", 61, None]])
    rc.get_spec = real_get_spec

    # a target that cannot be hooked: WARNING in the banner, the rest still applies
    hooks.install([HookSpec("sglang.srt.models.qwen2.NoSuchClass.forward", "sglang.srt.models.qwen2",
                            lambda orig, *a, **k: orig(*a, **k), "wiring")])
    out["failed_status"] = hooks.status()
    os.environ["SGLANG_EAGLE_CYCLE_TIMNG"] = "0"     # a misspelt switch: named in the banner
    out["banner"] = [[lvl, msg] for lvl, msg in banner_lines()]
    del os.environ["SGLANG_EAGLE_CYCLE_TIMNG"]
    from sglang.srt.speculative.eagle_worker_v2 import EagleDraftWorker, EAGLEWorkerV2

    worker = object.__new__(EAGLEWorkerV2)
    worker._draft_worker = object.__new__(EagleDraftWorker)
    out["banner_worker"] = banner_lines(worker)[0][1]

    # an internal fault in our wiring code: logged once, the stock path runs
    import sglang_eagle_cycle.wiring as w

    def boom(**kw):
        raise KeyError("injected")

    w.resolve_at_setter = boom
    out["fault"], out["fault_log"] = run_calls([["deepseek_v2", "DeepseekV3ForCausalLM", 61, [2, 30, 58]]] * 2)
    print(json.dumps(out))


def scenario_version(_args):
    """Another SGLang version: nothing registered, one WARNING; FORCE=1 registers anyway."""
    import importlib.metadata as md
    import os

    real = md.version
    md.version = lambda name: "0.5.99" if name == "sglang" else real(name)
    from sglang.srt.plugins import load_plugins

    load_plugins()
    from sglang_eagle_cycle import hooks, plugin

    out = {"status": hooks.status()}
    os.environ["SGLANG_EAGLE_CYCLE_FORCE"] = "1"
    plugin._registered = False  # a second process start, in effect
    plugin.register()
    out["forced_status"] = hooks.status()
    print(json.dumps(out))


def scenario_other_plugin(_args):
    """Another general plugin, loaded before ours, hooks two methods of the lazily imported EAGLE worker:
    ``verify`` (which we do not hook) and ``forward_batch_generation`` (which we hook too). Then SGLang's
    load_plugins() applies the hooks, importing the worker module (our post-import hook runs inside)."""
    import io

    log = io.StringIO()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s %(message)s", stream=log)
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    ew = "sglang.srt.speculative.eagle_worker_v2"
    calls = {"verify": 0, "forward_batch_generation": 0}

    def counting(name):
        def hook(original, *args, **kwargs):
            calls[name] += 1
            return original(*args, **kwargs)
        return hook

    assert ew not in sys.modules
    for name in calls:
        HookRegistry.register(f"{ew}.EAGLEWorkerV2.{name}", counting(name), HookType.AROUND)
    from sglang_eagle_cycle import hooks, plugin

    plugin.register()
    HookRegistry.apply_hooks()   # the end of load_plugins()
    import importlib

    cls = importlib.import_module(ew).EAGLEWorkerV2
    worker = object.__new__(cls)
    prefill = SimpleNamespace(forward_mode=SimpleNamespace(is_decode=lambda: False, is_extend=lambda: True),
                              is_extend_in_batch=False)
    for name, args in (("verify", (None,)), ("forward_batch_generation", (prefill,))):
        try:
            getattr(cls, name)(worker, *args)
        except Exception:
            pass  # upstream's own method, on a bare worker: only the hooks' calls are counted
    print(json.dumps({"calls": calls, "failed_to_apply": log.getvalue().count("Failed to apply hooks"),
                      "status": hooks.status()[f"{ew}.EAGLEWorkerV2.forward_batch_generation"]}))


def scenario_later_plugin(_args):
    """SGLang's load_plugins() runs our entry point, then another plugin's, in a process that has already
    imported the module of one of our targets (the scheduler's process has imported scheduler.py, model
    runner, device_timer...): the other plugin hooks that target too (AROUND, BEFORE, AFTER), then
    load_plugins() ends with HookRegistry.apply_hooks(). Reports which hooks run when it is called."""
    import importlib
    import sglang.srt.plugins as plugins
    from sglang.srt.plugins.hook_registry import HookType

    dt = "sglang.srt.utils.device_timer"
    importlib.import_module(dt)
    target = f"{dt}.device_timer_ctx"
    calls = {"around": 0, "before": 0, "after": 0}

    def around(original, *args, **kwargs):
        calls["around"] += 1
        return original(*args, **kwargs)

    def before(*args, **kwargs):
        calls["before"] += 1

    def after(result, *args, **kwargs):
        calls["after"] += 1

    def other():
        from sglang.srt.plugins.hook_registry import HookRegistry

        for hook, kind in ((around, HookType.AROUND), (before, HookType.BEFORE), (after, HookType.AFTER)):
            HookRegistry.register(target, hook, kind)

    from sglang_eagle_cycle import hooks, plugin

    plugins.load_plugins_by_group = lambda *a, **k: {"eagle_cycle": (plugin.register, "sglang-eagle-cycle"),
                                                     "other": (other, "other-dist")}
    plugins.load_plugins()
    fn = getattr(importlib.import_module(dt), "device_timer_ctx")
    ours = 0
    f = fn
    while f is not None:   # our hook in the chain: its closure holds the profiler's bound method
        ours += any("around_device_timer_ctx" in getattr(c.cell_contents, "__qualname__", "")
                    for c in (f.__closure__ or ()))
        f = getattr(f, "__wrapped__", None)
    try:
        fn(None, None)   # upstream's own function on nonsense: only the other plugin's hooks are counted
    except Exception:
        pass
    print(json.dumps({"calls": calls, "ours_in_chain": ours, "status": hooks.status()[target]}))


SCENARIOS = {"targets": scenario_targets, "setters": scenario_setters, "all": scenario_all,
             "version": scenario_version, "other_plugin": scenario_other_plugin,
             "later_plugin": scenario_later_plugin}


if __name__ == "__main__":
    SCENARIOS[sys.argv[1]](json.loads(sys.argv[2]) if len(sys.argv) > 2 else {})
