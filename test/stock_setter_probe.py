"""Call SGLang 0.5.23's real ``set_eagle3_layers_to_capture`` on stand-ins; print what each leaves.

Run in a fresh interpreter without our plugin (``SGLANG_PLUGINS=none_such``): the
plugin wraps these setters.  ``test_wiring.py`` compares the output with the pure
emulation in ``sglang_eagle_cycle.wiring``.

Output: one line ``PROBE-JSON {...}`` mapping class name -> {"module": the class's
module, "setter_module": the module defining the setter it runs, "num_layers": N,
"results": [[ids, layers_to_capture or "raise"], ...], "flagged": [[ids, indices], ...]}: "flagged", for
the setters that flag ``self.layers[v]``, the indices of the stand-in layers they flagged (what the
model's forward captures).
"""

from __future__ import annotations

import importlib
import json
import sys
import warnings
from types import MethodType, SimpleNamespace

N = 12
ID_GRID = [
    None, [], [1, 5, 9], [2, 6, 9], [0, 5, 10], [-1, 2, 5], [3, 7, 12], [3, 7, 11], [1, 6, 13],
    [5, 2, 8], [-2, 3, 4], [1, 11], [12, 1, 4], [-13, 2, 3], ["2", "5", "9"], [2.0, 5.0],
]

# class name -> (module, kind, inner "module.Class" or None)
#   plain: self.model holds layers_to_capture
#   inner: self.model has the real inner setter bound (flags self.layers[v])
#   lm:    self.language_model is a stand-in with the inner class's real setter bound
#   text:  N read from config.text_config (gemma4_mm, minimax_m3_vl)
CLASSES = {
    "LlamaForCausalLM": ("llama", "plain", None),
    "MistralForCausalLM": ("mistral", "plain", None),
    "Qwen2ForCausalLM": ("qwen2", "plain", None),
    "Qwen3ForCausalLM": ("qwen3", "plain", None),
    "ApertusForCausalLM": ("apertus", "plain", None),
    "BailingMoEForCausalLM": ("bailing_moe", "plain", None),
    "ExaoneMoEForCausalLM": ("exaone_moe", "plain", None),
    "Gemma3ForCausalLM": ("gemma3_causal", "plain", None),
    "Gemma4ForCausalLM": ("gemma4_causal", "plain", None),
    "Glm4MoeForCausalLM": ("glm4_moe", "plain", None),
    "Glm5NextForConditionalGeneration": ("glm5_next", "plain", None),
    "LongcatFlashForCausalLM": ("longcat_flash", "plain", None),
    "MiniMaxM2ForCausalLM": ("minimax_m2", "plain", None),
    "MiniMaxM3SparseForCausalLM": ("minimax_m3", "plain", None),
    "Qwen2_5_VLForConditionalGeneration": ("qwen2_5_vl", "plain", None),
    "Qwen3VLForConditionalGeneration": ("qwen3_vl", "plain", None),
    "DeepseekV2ForCausalLM": ("deepseek_v2", "plain", None),
    "DeepseekV3ForCausalLM": ("deepseek_v2", "plain", None),
    "GlmMoeDsaForCausalLM": ("glm4_moe", "plain", None),
    "Glm4MoeLiteForCausalLM": ("glm4_moe_lite", "plain", None),
    "GptOssForCausalLM": ("gpt_oss", "plain", None),
    "Qwen2MoeForCausalLM": ("qwen2_moe", "inner", "qwen2_moe.Qwen2MoeModel"),
    "Qwen3MoeForCausalLM": ("qwen3_moe", "inner", "qwen3_moe.Qwen3MoeModel"),
    "Qwen3NextForCausalLM": ("qwen3_next", "inner", "qwen3_next.Qwen3NextModel"),
    "Qwen3_5ForCausalLM": ("qwen3_5_text", "inner", "qwen3_5.Qwen3_5ForCausalLM"),
    "Qwen3VLMoeForConditionalGeneration": ("qwen3_vl_moe", "inner", "qwen3_moe.Qwen3MoeModel"),
    "Qwen3_5ForConditionalGeneration": ("qwen3_5", "inner", "qwen3_5.Qwen3_5ForCausalLM"),
    "KimiK25ForConditionalGeneration": ("kimi_k25", "lm", "deepseek_v2.DeepseekV3ForCausalLM"),
    "Gemma3ForConditionalGeneration": ("gemma3_mm", "lm", "gemma3_causal.Gemma3ForCausalLM"),
    "Llama4ForConditionalGeneration": ("mllama4", "lm", "llama4.Llama4ForCausalLM"),
    "Gemma4ForConditionalGeneration": ("gemma4_mm", "text", None),
    "MiniMaxM3SparseForConditionalGeneration": ("minimax_m3_vl", "text", None),
}


def _cls(dotted: str):
    module, name = dotted.rsplit(".", 1)
    return getattr(importlib.import_module(f"sglang.srt.models.{module}"), name)


def _model(inner: str | None):
    model = SimpleNamespace(layers=[SimpleNamespace() for _ in range(N)], layers_to_capture=[])
    if inner is not None:
        model.set_eagle3_layers_to_capture = MethodType(_cls(inner).set_eagle3_layers_to_capture, model)
    return model


def _stand_in(kind: str, inner: str | None):
    """A stand-in ``self`` and a getter for the ``layers_to_capture`` the setter leaves."""
    pp = SimpleNamespace(is_last_rank=True)
    if kind == "lm":
        lm = SimpleNamespace(pp_group=pp, config=SimpleNamespace(num_hidden_layers=N), model=_model(None))
        lm.set_eagle3_layers_to_capture = MethodType(_cls(inner).set_eagle3_layers_to_capture, lm)
        return SimpleNamespace(pp_group=pp, language_model=lm), lambda s: s.language_model.model.layers_to_capture
    if kind == "text":  # gemma4_mm writes language_model.layers_to_capture, minimax_m3_vl model.layers_to_capture
        cfg = SimpleNamespace(text_config=SimpleNamespace(num_hidden_layers=N))
        s = SimpleNamespace(pp_group=pp, config=cfg, model=_model(None),
                            language_model=SimpleNamespace(layers_to_capture=None))
        return s, lambda s: s.language_model.layers_to_capture or s.model.layers_to_capture
    s = SimpleNamespace(pp_group=pp, config=SimpleNamespace(num_hidden_layers=N), model=_model(inner))
    return s, lambda s: s.model.layers_to_capture


def main() -> None:
    warnings.filterwarnings("ignore")
    last_rank = SimpleNamespace(pp_group=SimpleNamespace(is_last_rank=True))
    out = {}
    for name, (module, kind, inner) in CLASSES.items():
        mod = importlib.import_module(f"sglang.srt.models.{module}")
        if hasattr(mod, "get_parallel"):  # exaone_moe / minimax_m2 ask the runtime context for pp_group
            mod.get_parallel = lambda: last_rank
        setter = getattr(mod, name).set_eagle3_layers_to_capture
        results, flagged = [], []
        for ids in ID_GRID:
            self, getter = _stand_in(kind, inner)
            try:
                setter(self, None if ids is None else list(ids))
                results.append([ids, list(getter(self))])
                if kind == "inner":
                    flagged.append([ids, [i for i, layer in enumerate(self.model.layers)
                                          if getattr(layer, "_is_layer_to_capture", False)]])
            except (IndexError, TypeError, ValueError):
                results.append([ids, "raise"])
        out[name] = {"module": module, "setter_module": setter.__module__.rsplit(".", 1)[1],
                     "num_layers": N, "results": results, "flagged": flagged}
    sys.stdout.write("PROBE-JSON " + json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
