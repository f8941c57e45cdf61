"""What stock SGLang 0.5.23 captures: one :class:`FamilyRule` per model file's
``set_eagle3_layers_to_capture`` (how it turns the draft's ids into capture positions, its default
ids, whether it can capture the last layer's output), keyed by module and by architecture.

Pure standard library; the rules are checked against SGLang's own setters in the test suite.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .config import _text_config


STOCK_VERSION = "0.5.23"


SHIFT_ALWAYS = "always"  # val + 1 (llama and most families)


SHIFT_IF_FIRST_IS_1 = "if_first_is_1"  # val + 1 only when ids[0] == 1 (deepseek_v2, glm4_moe_lite)


SHIFT_UNLESS_MAX_IS_N = "unless_max_is_n"  # as-is when max(ids) == N, else val + 1 (gpt_oss)


SHIFT_NONE = "none"  # as-is (inner setters handed already-shifted ids)


@dataclass(frozen=True)
class FamilyRule:
    """How one SGLang 0.5.23 model file's ``set_eagle3_layers_to_capture`` treats ids.

    Attributes:
        module: the model file whose rule applies (``stock_family`` in reports).
        shift: one of the ``SHIFT_*`` constants, for explicit ids.
        default_shift: added to the ``[2, N//2, N-3]`` default (1 for minimax_m3_vl).
        flags: ``"all"`` when the setter indexes ``layers[v]`` for every value
            (qwen2_moe-style inner setters: a value outside ``[-N, N-1]`` raises
            IndexError at start-up), ``"in_range"`` when it flags only
            ``0 <= v < N`` (minimax_m3), ``""`` when it keeps just the list.
        final_capture: the model's forward can capture position ``N``.
    """

    module: str
    shift: str = SHIFT_ALWAYS
    default_shift: int = 0
    flags: str = ""
    final_capture: bool = False

    def describe(self) -> str:
        words = {
            SHIFT_ALWAYS: "id + 1 always",
            SHIFT_IF_FIRST_IS_1: "id + 1 only if ids[0] == 1, else ids as-is",
            SHIFT_UNLESS_MAX_IS_N: "ids as-is if max(ids) == N, else id + 1",
            SHIFT_NONE: "ids as-is",
        }[self.shift]
        return f"{self.module} rule ({words})"

    def reads_as_positions(self, ids: list, num_layers: int) -> bool:
        """True when this rule keeps explicit ``ids`` as-is (no +1)."""
        if self.shift == SHIFT_NONE:
            return True
        if self.shift == SHIFT_IF_FIRST_IS_1:
            return not (ids and ids[0] == 1)
        if self.shift == SHIFT_UNLESS_MAX_IS_N:
            return bool(ids) and max(ids) == num_layers
        return False


def stock_layers_to_capture(rule: FamilyRule, ids, num_layers: int):
    """Emulate the stock 0.5.23 setter: the ``layers_to_capture`` it leaves, or None if it raises.

    ``ids`` is what SGLang passes (a list, or None when the draft's ``eagle_config``
    declares none).  The same Python operations as upstream are applied to the
    values as given, so strings or floats fail (or pass) exactly where upstream does.
    """
    n = num_layers
    try:
        if ids is None:
            out = [2 + rule.default_shift, n // 2 + rule.default_shift, n - 3 + rule.default_shift]
        elif rule.shift == SHIFT_ALWAYS:
            out = [v + 1 for v in ids]
        elif rule.shift == SHIFT_IF_FIRST_IS_1:
            out = [v + 1 for v in ids] if (ids and ids[0] == 1) else list(ids)
        elif rule.shift == SHIFT_UNLESS_MAX_IS_N:
            out = list(ids) if (ids and max(ids) == n) else [v + 1 for v in ids]
        else:
            out = list(ids)
        for v in out if rule.flags else ():  # layers[v] on a list of N layers
            if rule.flags == "in_range" and not 0 <= v < n:
                continue
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"list indices must be integers, not {type(v).__name__}")
            if not -n <= v < n:
                raise IndexError(v)
    except (TypeError, IndexError, KeyError, ValueError):
        return None
    return out


def stock_captured(rule: FamilyRule, layers: list, num_layers: int) -> list:
    """The values of a stock ``layers_to_capture`` that are actually captured: integer layer indices
    ``0..N-1``, and ``N`` in families that capture the final output.

    Where the setter flags ``layers[v]`` for every value (``flags == "all"``, qwen2_moe's inner
    setter) the forward captures the flagged layers, in layer order and each once: a negative
    ``v >= -N`` flags layer ``N + v`` as Python indexes a list, so it is captured there (helper 99:
    ``-1`` had been called never captured), and two values naming one layer capture it once."""
    top = num_layers if rule.final_capture else num_layers - 1
    ints = [v for v in layers if isinstance(v, int) and not isinstance(v, bool)]
    if rule.flags == "all":
        return sorted({num_layers + v if -num_layers <= v < 0 else v for v in ints} & set(range(top + 1)))
    return [v for v in ints if 0 <= v <= top]


def _stock_captures(rule: FamilyRule, layers: list, num_layers: int) -> bool:
    """True when every value of a stock ``layers_to_capture`` is actually captured."""
    return len(stock_captured(rule, layers, num_layers)) == len(layers)


_A = FamilyRule("llama")


_RULES_BY_MODULE: dict[str, FamilyRule] = {
    # rule A: id + 1 always
    **{m: FamilyRule(m) for m in (
        "apertus", "bailing_moe", "exaone_moe", "glm4_moe", "glm5_next", "llama", "longcat_flash",
        "minimax_m2", "qwen2", "qwen2_5_vl", "qwen3", "qwen3_vl",
    )},
    "gemma3_causal": FamilyRule("gemma3_causal", final_capture=True),
    "gemma4_causal": FamilyRule("gemma4_causal", final_capture=True),
    "gemma4_mm": FamilyRule("gemma4_mm", final_capture=True),  # its language model is gemma4_causal's
    "minimax_m3": FamilyRule("minimax_m3", flags="in_range", final_capture=True),
    "qwen2_moe": FamilyRule("qwen2_moe", flags="all"),
    "qwen3_moe": FamilyRule("qwen3_moe", flags="all"),  # -> qwen2_moe's inner setter
    "qwen3_next": FamilyRule("qwen3_next", flags="all"),
    "qwen3_5_text": FamilyRule("qwen3_5_text", flags="all"),  # -> qwen3_5's inner setter
    # rule B: id + 1 only if ids[0] == 1
    "deepseek_v2": FamilyRule("deepseek_v2", SHIFT_IF_FIRST_IS_1),
    "glm4_moe_lite": FamilyRule("glm4_moe_lite", SHIFT_IF_FIRST_IS_1),
    # other
    "gpt_oss": FamilyRule("gpt_oss", SHIFT_UNLESS_MAX_IS_N, final_capture=True),
    "minimax_m3_vl": FamilyRule("minimax_m3_vl", default_shift=1, flags="in_range", final_capture=True),
}


# modules whose setter delegates to another family's (stock_family names the one that applies)
_RULES_BY_MODULE.update({
    "kimi_k25": _RULES_BY_MODULE["deepseek_v2"],  # language_model is a DeepseekV3ForCausalLM
    "gemma3_mm": _RULES_BY_MODULE["gemma3_causal"],
    "mllama4": _RULES_BY_MODULE["llama"],
    # modules whose classes inherit another module's setter
    "deepseek_nextn": _RULES_BY_MODULE["deepseek_v2"],
    "mistral_large_3": _RULES_BY_MODULE["deepseek_v2"],
    "mistral_large_3_eagle": _RULES_BY_MODULE["deepseek_v2"],
    "glm5_next_nextn": _RULES_BY_MODULE["deepseek_v2"],
    "glm4_moe_lite_nextn": _RULES_BY_MODULE["glm4_moe_lite"],
    "glm4_moe_nextn": _RULES_BY_MODULE["glm4_moe"],
    "exaone_moe_mtp": _RULES_BY_MODULE["exaone_moe"],
    "gemma4_mtp": _RULES_BY_MODULE["gemma4_causal"],
    "gemma4_unified": _RULES_BY_MODULE["gemma4_mm"],
    "longcat_flash_nextn": _RULES_BY_MODULE["longcat_flash"],
    "sarvam_moe": _RULES_BY_MODULE["bailing_moe"],
    "mellum": _RULES_BY_MODULE["qwen3_moe"],
    "qwen3_moe_mtp": _RULES_BY_MODULE["qwen3_moe"],
    "qwen3_next_mtp": _RULES_BY_MODULE["qwen3_next"],
    "qwen2_eagle": _RULES_BY_MODULE["qwen2"],
    "cosmos3": _RULES_BY_MODULE["qwen3_vl"],
    # qwen3_vl's setter hands +1 ids to a language model that flags layers
    **{m: FamilyRule("qwen3_vl", flags="all") for m in (
        "qwen3_vl_moe", "qwen3_5", "qwen4_exp", "interns1pro", "interns2_mobius", "interns2preview",
    )},
    **{m: _A for m in (
        "llama4", "llama_eagle", "llama_eagle3", "ministral3", "mistral", "mistral_eagle", "teleflm",
    )},
})


RULES_BY_MODULE: Mapping[str, FamilyRule] = _RULES_BY_MODULE


#: target ``architectures[0]`` -> the stock rule of the setter SGLang 0.5.23 calls for it
RULES_BY_ARCHITECTURE: Mapping[str, FamilyRule] = {
    "ApertusForCausalLM": _RULES_BY_MODULE["apertus"],
    **dict.fromkeys(("BailingMoEForCausalLM", "BailingMoeForCausalLM", "BailingMoeV2ForCausalLM",
                     "SarvamMoEForCausalLM"), _RULES_BY_MODULE["bailing_moe"]),
    **dict.fromkeys(("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM",
                     "DeepseekV3ForCausalLMNextN", "MistralLarge3ForCausalLM", "MistralLarge3ForCausalLMEagle",
                     "GlmMoeDsaForCausalLM", "GlmMoeDsaForCausalLMNextN", "Glm5NextForConditionalGenerationNextN",
                     "KimiK25ForConditionalGeneration"), _RULES_BY_MODULE["deepseek_v2"]),
    **dict.fromkeys(("ExaoneMoEForCausalLM", "ExaoneMoeForCausalLM", "ExaoneMoEForCausalLMMTP"),
                    _RULES_BY_MODULE["exaone_moe"]),
    **dict.fromkeys(("Gemma3ForCausalLM", "EmbeddingGemmaModel", "Gemma3ForConditionalGeneration"),
                    _RULES_BY_MODULE["gemma3_causal"]),
    **dict.fromkeys(("Gemma4ForCausalLM", "Gemma4AssistantForCausalLM", "Gemma4UnifiedAssistantForCausalLM"),
                    _RULES_BY_MODULE["gemma4_causal"]),
    **dict.fromkeys(("Gemma4ForConditionalGeneration", "Gemma4UnifiedForConditionalGeneration"),
                    _RULES_BY_MODULE["gemma4_mm"]),
    **dict.fromkeys(("Glm4MoeForCausalLM", "Glm4MoeForCausalLMNextN"), _RULES_BY_MODULE["glm4_moe"]),
    **dict.fromkeys(("Glm4MoeLiteForCausalLM", "Glm4MoeLiteForCausalLMNextN"), _RULES_BY_MODULE["glm4_moe_lite"]),
    "Glm5NextForConditionalGeneration": _RULES_BY_MODULE["glm5_next"],
    "GptOssForCausalLM": _RULES_BY_MODULE["gpt_oss"],
    **dict.fromkeys(("LlamaForCausalLM", "MistralForCausalLM", "Phi3ForCausalLM", "InternLM3ForCausalLM",
                     "IQuestCoderForCausalLM", "Llama4ForCausalLM", "Llama4ForConditionalGeneration",
                     "Ministral3ForCausalLM", "TeleFLMForCausalLM", "LlamaForCausalLMEagle",
                     "LlamaForCausalLMEagle3", "MistralForCausalLMEagle"), _A),
    **dict.fromkeys(("LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN"), _RULES_BY_MODULE["longcat_flash"]),
    "MiniMaxM2ForCausalLM": _RULES_BY_MODULE["minimax_m2"],
    "MiniMaxM3SparseForCausalLM": _RULES_BY_MODULE["minimax_m3"],
    "MiniMaxM3SparseForConditionalGeneration": _RULES_BY_MODULE["minimax_m3_vl"],
    **dict.fromkeys(("Qwen2ForCausalLM", "Qwen2ForCausalLMEagle"), _RULES_BY_MODULE["qwen2"]),
    "Qwen2MoeForCausalLM": _RULES_BY_MODULE["qwen2_moe"],
    "Qwen2_5_VLForConditionalGeneration": _RULES_BY_MODULE["qwen2_5_vl"],
    "Qwen3ForCausalLM": _RULES_BY_MODULE["qwen3"],
    **dict.fromkeys(("Qwen3MoeForCausalLM", "Qwen3MoeForCausalLMMTP", "MellumForCausalLM"),
                    _RULES_BY_MODULE["qwen3_moe"]),
    **dict.fromkeys(("Qwen3NextForCausalLM", "Qwen3NextForCausalLMMTP"), _RULES_BY_MODULE["qwen3_next"]),
    **dict.fromkeys(("Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM"), _RULES_BY_MODULE["qwen3_5_text"]),
    **dict.fromkeys(("Qwen3VLForConditionalGeneration", "Cosmos3ForConditionalGeneration"),
                    _RULES_BY_MODULE["qwen3_vl"]),
    **dict.fromkeys(("Qwen3VLMoeForConditionalGeneration", "Qwen3_5ForConditionalGeneration",
                     "Qwen3_5MoeForConditionalGeneration", "Qwen4ExpForConditionalGeneration",
                     "InternS1ProForConditionalGeneration", "InternS2MobiusForConditionalGeneration",
                     "InternS2PreviewForConditionalGeneration"), _RULES_BY_MODULE["qwen3_5"]),
}


#: fallback when a config has no ``architectures``: its ``model_type``
_RULES_BY_MODEL_TYPE: dict[str, FamilyRule] = {
    "llama": _A, "mistral": _A, "phi3": _A, "qwen2": _RULES_BY_MODULE["qwen2"], "qwen3": _RULES_BY_MODULE["qwen3"],
    "qwen2_moe": _RULES_BY_MODULE["qwen2_moe"], "qwen3_moe": _RULES_BY_MODULE["qwen3_moe"],
    "deepseek_v2": _RULES_BY_MODULE["deepseek_v2"], "deepseek_v3": _RULES_BY_MODULE["deepseek_v2"],
    "kimi_k25": _RULES_BY_MODULE["deepseek_v2"], "gpt_oss": _RULES_BY_MODULE["gpt_oss"],
    "glm4_moe": _RULES_BY_MODULE["glm4_moe"], "glm4_moe_lite": _RULES_BY_MODULE["glm4_moe_lite"],
}


def family_rule(name: str) -> FamilyRule | None:
    """The stock rule for a target class name (``DeepseekV3ForCausalLM``) or SGLang module basename.

    Module basenames are those of ``sglang.srt.models`` (``deepseek_v2``, ``llama``,
    ``qwen3_moe``, ``kimi_k25``...); a class name is exact where one module holds
    classes with different setters (``glm4_moe`` holds rule-A ``Glm4MoeForCausalLM``
    and rule-B ``GlmMoeDsaForCausalLM``; the module name means the former).
    Returns None for an unknown name.
    """
    return RULES_BY_ARCHITECTURE.get(name) or RULES_BY_MODULE.get(name.rsplit(".", 1)[-1])


def target_rule(target_cfg: Mapping) -> FamilyRule | None:
    """The stock rule for a target HF config: its ``architectures[0]``, else its ``model_type``."""
    for cfg in (target_cfg, _text_config(target_cfg)):
        if not isinstance(cfg, Mapping):
            continue
        archs = cfg.get("architectures")
        if isinstance(archs, list) and archs and isinstance(archs[0], str) and archs[0] in RULES_BY_ARCHITECTURE:
            return RULES_BY_ARCHITECTURE[archs[0]]
    for cfg in (target_cfg, _text_config(target_cfg)):
        if isinstance(cfg, Mapping) and cfg.get("model_type") in _RULES_BY_MODEL_TYPE:
            return _RULES_BY_MODEL_TYPE[cfg["model_type"]]
    return None
