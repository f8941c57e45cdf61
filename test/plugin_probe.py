"""Run in a fresh interpreter by test_plugin.py: SGLang's own load_plugins(), then report as JSON.

Usage: python plugin_probe.py SCENARIO [ARGS_JSON]

Scenarios:
  targets   -> which of our hook targets are wrapped, before and after their modules are imported
  setters   -> call each family's real setter on stand-ins with the given ids; report the capture state
  banner    -> construct nothing; print the banner lines the scheduler hook would log
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


def scenario_setters(args):
    """args: {"draft_config": {...} | null, "calls": [[family_module, class, n, ids], ...]}"""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s %(message)s", stream=sys.stderr)
    from sglang.srt.plugins import load_plugins

    load_plugins()
    if args.get("draft_dir"):
        import sglang.srt.runtime_context as rc

        rc.get_spec = lambda: SimpleNamespace(speculative_draft_model_path=args["draft_dir"],
                                              speculative_draft_model_revision=None)
    import importlib

    results = []
    for module, cls_name, n, ids in args["calls"]:
        cls = getattr(importlib.import_module(f"sglang.srt.models.{module}"), cls_name)
        obj = _stand_in(module, n)
        try:
            cls.set_eagle3_layers_to_capture(obj, ids)
            results.append({"module": module, "class": cls_name, **_state(obj)})
        except Exception as exc:
            results.append({"module": module, "class": cls_name, "error": type(exc).__name__, "message": str(exc)})
    print(json.dumps(results))


if __name__ == "__main__":
    scenario = sys.argv[1]
    arg = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    {"targets": scenario_targets, "setters": scenario_setters}[scenario](arg)
