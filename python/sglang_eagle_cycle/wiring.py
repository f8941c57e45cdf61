"""EAGLE-3 aux hidden-state wiring: read, resolve and validate a draft's aux layer ids.

Pure standard-library code (no torch, no SGLang import), shared by the server hook
and ``eagle-cycle wiring``.  the README section "Aux-layer wiring" is the contract:

* capture position ``j`` = the residual stream entering 0-based decoder layer ``j``
  (HF ``hidden_states[j]``): position 0 is the embedding output, position ``N`` the
  last layer's output before the final norm;
* a layer id ``i`` means the output of layer ``i``, i.e. position ``i + 1``, for
  every model family (reading ``layer_output``); ids whose maximum equals ``N``
  can only be positions (reading ``position``); no ids means the family's stock
  default (reading ``default``);
* stock SGLang 0.5.23 reads the same ids differently per model file; this module
  emulates each ``set_eagle3_layers_to_capture`` so the difference can be named.

Usage::

    from sglang_eagle_cycle.wiring import check_pair, load_config
    report = check_pair(load_config("target/config.json"), load_config("draft/config.json"))
    print(report.startup_line())
    # EAGLE-3 aux wiring: ids [2, 30, 58] (layer outputs, draft eagle_config) -> capture
    # positions [3, 31, 59] of 61; stock SGLang 0.5.23 would capture [2, 30, 58]

Environment (the server reads the same variables):

* ``SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS=2,30,58`` overrides the draft's ids;
* ``SGLANG_EAGLE_CYCLE_AUX_CONVENTION=input`` reads ids as positions,
  ``=stock`` keeps SGLang 0.5.23's per-family rule (default: layer outputs);
* ``SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING=1`` accepts position 0 (id -1);
* ``SGLANG_EAGLE_CYCLE_WIRING_STRICT=0`` (server only): wiring errors are logged instead of stopping
  the launch.

Besides the ids, the check covers the speculative algorithm (an EAGLE-3 head needs ``EAGLE3``;
``EAGLE``/``NEXTN`` capture nothing), ``eagle_config.use_aux_hidden_state: false``, misspelt id keys,
a draft trained on a shorter context than it will serve (an ``info`` note, never a warning) and the
EAGLE 3.1 / gpt-oss head flags (:func:`draft_variant`).
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .errors import UsageError

STOCK_VERSION = "0.5.23"

ENV_IDS = "SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS"
ENV_CONVENTION = "SGLANG_EAGLE_CYCLE_AUX_CONVENTION"
ENV_ALLOW_EMBEDDING = "SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING"
ENV_STRICT = "SGLANG_EAGLE_CYCLE_WIRING_STRICT"

IDS_KEY = "eagle_aux_hidden_state_layer_ids"

#: a target with more decoder layers than this is a corrupt config, not a model
MAX_NUM_LAYERS = 10000

#: draft architectures SGLang 0.5.23 can load as an EAGLE-3 head
EAGLE3_DRAFT_ARCHITECTURES = ("LlamaForCausalLMEagle3", "Eagle3DeepseekV2ForCausalLM")

#: ``--speculative-algorithm`` values the check knows; NEXTN is SGLang's alias of EAGLE
ALGORITHMS = ("EAGLE3", "EAGLE", "NEXTN")

ERROR, WARNING, INFO = "error", "warning", "info"
#: report order of the levels (errors first); ``info`` is shown but never counted as a warning
_LEVEL_ORDER = {ERROR: 0, WARNING: 1, INFO: 2}

#: code -> level, the README wiring section's level table (the CLI and the startup path share it)
CHECK_LEVELS: dict[str, str] = {
    "non_integer_ids": ERROR,
    "duplicate_ids": ERROR,
    "id_out_of_range": ERROR,
    "embedding_capture": ERROR,
    "final_layer_capture_unsupported": ERROR,
    "fc_width_mismatch": ERROR,
    "draft_fc_built_mismatch": ERROR,
    "not_eagle3_architecture": ERROR,
    "target_hidden_mismatch": ERROR,
    "vocab_mismatch": ERROR,
    "lm_head_shape_mismatch": ERROR,
    "d2t_missing": ERROR,
    "algorithm_not_eagle3": ERROR,
    "aux_capture_off_fc_mismatch": ERROR,
    "aux_capture_off": WARNING,
    "ids_key_misspelt": WARNING,
    "draft_flag_ignored": WARNING,
    "ids_missing_default_used": WARNING,
    "ids_top_level": WARNING,
    "ids_conflict": WARNING,
    "unsorted_ids": WARNING,
    "stock_differs": WARNING,
    "draft_context_shorter": INFO,
}


# --------------------------------------------------------------------------- stock rules

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


def _stock_captures(rule: FamilyRule, layers: list, num_layers: int) -> bool:
    """True when every value of a stock ``layers_to_capture`` is actually captured."""
    top = num_layers if rule.final_capture else num_layers - 1
    return all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= top for v in layers)


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


# --------------------------------------------------------------------------- config fields

#: where multimodal wrappers keep their language model's config (never ``vision_config``)
_TEXT_WRAPPERS = ("text_config", "language_config", "llm_config")


def _text_config(cfg: Mapping):
    for key in _TEXT_WRAPPERS:
        inner = cfg.get(key) if isinstance(cfg, Mapping) else None
        if isinstance(inner, Mapping):
            return inner
    thinker = cfg.get("thinker_config") if isinstance(cfg, Mapping) else None
    if isinstance(thinker, Mapping) and isinstance(thinker.get("text_config"), Mapping):
        return thinker["text_config"]
    return None


def field_values(cfg: Mapping, key: str) -> list[tuple[object, str]]:
    """Every value of a language-model field, whatever its type, as ``(value, json_path)``:
    top level first, then the text wrappers (``vision_config`` and others are never read)."""
    if not isinstance(cfg, Mapping):
        return []
    places: list[tuple[object, str]] = [(cfg, "")]
    places += [(cfg.get(w), f"{w}.") for w in _TEXT_WRAPPERS]
    thinker = cfg.get("thinker_config")
    places.append((thinker.get("text_config") if isinstance(thinker, Mapping) else None, "thinker_config.text_config."))
    return [(inner[key], f"{prefix}{key}") for inner, prefix in places
            if isinstance(inner, Mapping) and inner.get(key) is not None]


def find_field(cfg: Mapping, key: str) -> tuple[int, str] | None:
    """Find an integer language-model field, top level first, then a text wrapper.

    Returns ``(value, json_path)`` (e.g. ``(61, "text_config.num_hidden_layers")``)
    or None.  ``vision_config`` and other sub-configs are never read.
    """
    return next(((v, path) for v, path in field_values(cfg, key) if _is_int(v)), None)


def _require(cfg: Mapping, key: str, what: str) -> int:
    found = find_field(cfg, key)
    if found is None:
        raise UsageError(f"target config has no integer {key} (looked at {key}, "
                         f"{', '.join(w + '.' + key for w in _TEXT_WRAPPERS)}): cannot know the {what}")
    return found[0]


def find_num_layers(cfg: Mapping) -> int:
    """N, the target's decoder-layer count (``text_config.num_hidden_layers`` for wrappers).

    Raises:
        UsageError: no integer ``num_hidden_layers`` at the top level or in a text wrapper.
    """
    return _require(cfg, "num_hidden_layers", "layer count")


def find_hidden_size(cfg: Mapping) -> int:
    """The target's hidden size (width of one aux hidden state). Raises UsageError when absent."""
    return _require(cfg, "hidden_size", "hidden size")


def find_vocab_size(cfg: Mapping) -> int:
    """The target's vocabulary size. Raises UsageError when absent."""
    return _require(cfg, "vocab_size", "vocabulary size")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _short(value, limit: int = 40) -> str:
    """``repr`` of a user value for a one-line message, cut to ``limit`` characters."""
    if _is_int(value) and abs(value) >= 10 ** 30:
        digits = str(abs(value))
        return f"{'-' if value < 0 else ''}{digits[:8]}... ({len(digits)} digits)"
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _checked_target_field(cfg: Mapping, key: str, upper: int | None = None) -> int | None:
    """The target's ``key`` where :func:`find_field` looks, validated; None when absent (or null).

    Raises:
        UsageError: the first value found is not an integer in ``[1, upper]``
            (a string, a float, a boolean, zero or negative).
    """
    holders = [("", cfg)] + [(f"{w}.", cfg.get(w)) for w in _TEXT_WRAPPERS]
    thinker = cfg.get("thinker_config")
    if isinstance(thinker, Mapping):
        holders.append(("thinker_config.text_config.", thinker.get("text_config")))
    for prefix, holder in holders:
        if isinstance(holder, Mapping) and holder.get(key) is not None:
            value = holder[key]
            if not _is_int(value) or value < 1 or (upper is not None and value > upper):
                bound = f"in [1, {upper}]" if upper is not None else "a positive integer"
                raise UsageError(f"target config {prefix}{key} is {_short(value)}: expected {bound}")
            return value
    return None


# --------------------------------------------------------------------------- report

@dataclass(frozen=True)
class Problem:
    """One finding of the wiring check; ``level`` comes from :data:`CHECK_LEVELS`."""

    level: str
    code: str
    message: str

    def to_dict(self) -> dict:
        return {"level": self.level, "code": self.code, "message": self.message}


_JSON_KEYS = ("num_layers", "ids", "ids_source", "reading", "positions", "stock_positions", "stock_family",
              "stock_ids_hint", "fc_in_features", "problems")


@dataclass
class WiringReport:
    """The resolved wiring of one target/draft pair; ``to_dict()`` is the ``--json`` object.

    Attributes:
        num_layers: N, the target's decoder layers.
        ids: the ids used (as declared; None when none are declared).
        ids_source: ``env``, ``eagle_config``, ``top_level`` or ``none``.
        reading: ``layer_output``, ``position`` or ``default``.
        positions: capture positions (0 = embedding, N = last layer's output before
            the final norm); None when an id is not an int, out of range or repeated.
        stock_positions: the ``layers_to_capture`` stock SGLang 0.5.23 leaves; None
            when its setter would raise (or the family is unknown).
        stock_family: the SGLang model file whose stock rule applies.
        stock_ids_hint: ``eagle_config`` ids that make stock 0.5.23 capture
            ``positions``, or None (see :func:`stock_fix_text` for why).
        fc_in_features: ``fc.weight.shape[1]`` from the draft's safetensors header.
        problems: findings, errors first.
        convention: ``output`` (default), ``input`` or ``stock`` (not in the JSON).
        stock_ids_valid: False when stock SGLang would be handed ids that are not a
            list of integers; its capture is then not predicted and ``stock_positions``
            is None (not in the JSON).
        algorithm: the ``--speculative-algorithm`` checked (``EAGLE3``, ``EAGLE`` or
            ``NEXTN``; not in the JSON).
        variant: the draft class SGLang 0.5.23 builds and its optional norms, one
            line (:func:`draft_variant`); None without a draft config (not in the JSON).
    """

    num_layers: int
    ids: object
    ids_source: str
    reading: str
    positions: list[int] | None
    stock_positions: list | None
    stock_family: str | None
    stock_ids_hint: list[int] | None
    fc_in_features: int | None
    problems: list[Problem] = field(default_factory=list)
    convention: str = "output"
    stock_ids_valid: bool = True
    algorithm: str = "EAGLE3"
    variant: str | None = None

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.level == ERROR]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.level == WARNING]

    @property
    def infos(self) -> list[Problem]:
        """Notes (level ``info``): shown and logged, never counted as warnings, never a failure."""
        return [p for p in self.problems if p.level == INFO]

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in _JSON_KEYS}
        d["problems"] = [p.to_dict() for p in self.problems]
        return d

    def startup_line(self) -> str:
        """The one-line summary the server logs at start-up (README, "Aux-layer wiring"), e.g.

        ``EAGLE-3 aux wiring: ids [2, 30, 58] (layer outputs, draft eagle_config) ->
        capture positions [3, 31, 59] of 61; stock SGLang 0.5.23 would capture [2, 30, 58]``
        """
        n = self.num_layers
        if self.reading == "default" and self.positions is None:
            codes = ", ".join(sorted({p.code for p in self.errors}))
            head = (f"no ids declared ({_SOURCE_WORDS['none']}) -> no default capture positions of {n} "
                    f"(refused: {codes})")
        elif self.reading == "default":
            head = f"no ids declared ({_SOURCE_WORDS['none']}) -> default capture positions {self.positions} of {n}"
        else:
            head = f"ids {_fmt(self.ids)} ({self._reading_words()}, {_SOURCE_WORDS[self.ids_source]}) -> "
            if self.positions is None:
                codes = ", ".join(sorted({p.code for p in self.errors}))
                head += f"no capture positions of {n} (refused: {codes})"
            else:
                head += f"capture positions {self.positions} of {n}"
                if self.errors:
                    head += f" (errors: {', '.join(sorted({p.code for p in self.errors}))})"
        if self.stock_family is None:
            tail = f"stock SGLang {STOCK_VERSION}'s rule for this target is unknown"
        elif not self.stock_ids_valid:
            tail = f"stock SGLang {STOCK_VERSION}'s capture is unknown (it would be handed non-integer ids)"
        elif self.stock_positions is None:
            tail = f"stock SGLang {STOCK_VERSION} ({self.stock_family}) would fail at start-up (IndexError)"
        elif self.positions is not None and _same_capture(self.positions, self.stock_positions):
            tail = f"same as stock SGLang {STOCK_VERSION}"
        else:
            tail = f"stock SGLang {STOCK_VERSION} would capture {_fmt(self.stock_positions)}"
        return f"EAGLE-3 aux wiring: {head}; {tail}"

    def _reading_words(self) -> str:
        if self.reading == "position":
            if self.convention == "input":
                return f"positions, {ENV_CONVENTION}=input"
            if self.convention == "stock":
                return f"positions, {ENV_CONVENTION}=stock"
            return f"positions: max id == {self.num_layers} layers"
        if self.convention == "stock":
            return f"layer outputs, {ENV_CONVENTION}=stock"
        return "layer outputs"


_SOURCE_WORDS = {
    "env": f"env {ENV_IDS}",
    "eagle_config": "draft eagle_config",
    "top_level": "draft top-level, ignored by stock SGLang",
    "none": "family default",
}


def _fmt(value) -> str:
    return json.dumps(value) if not isinstance(value, list) else "[" + ", ".join(
        str(v) if _is_int(v) else json.dumps(v) for v in value) + "]"


def _same_capture(a: list, b: list) -> bool:
    """Captures are concatenated in layer order, so compare as sorted lists."""
    try:
        return sorted(a) == sorted(b)
    except TypeError:
        return False


# --------------------------------------------------------------------------- resolution

def _convention(env: Mapping) -> str:
    raw = env.get(ENV_CONVENTION, "").strip().lower()
    if raw in ("", "output", "layer_output"):
        return "output"
    if raw in ("input", "stock"):
        return raw
    raise UsageError(f"{ENV_CONVENTION}={env.get(ENV_CONVENTION)!r}: expected 'input' or 'stock' (or unset)")


def _allow_embedding(env: Mapping) -> bool:
    """``SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING``: 1/true/yes/on, 0/false/no/off or unset; else UsageError."""
    raw = env.get(ENV_ALLOW_EMBEDDING, "").strip().lower()
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("", "0", "false", "no", "off"):
        return False
    raise UsageError(f"{ENV_ALLOW_EMBEDDING}={env.get(ENV_ALLOW_EMBEDDING)!r}: expected 1, true, yes or on, "
                     f"or 0, false, no or off (any case; or unset)")


def parse_env_ids(env: Mapping):
    """``SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS`` as a list of ints (``"2,30,58"`` or ``"[2, 30, 58]"``), or None if unset.

    Ids are separated by commas and/or ASCII whitespace; each is ASCII digits with an optional sign.

    Raises:
        UsageError: a token is not an ASCII integer (``"2,x,58"``, full-width ``"２,３"``), an item
            between commas is empty (``"2,,30"``, ``"2,30,"``), or no token is given (``"[]"``).
    """
    raw = env.get(ENV_IDS, "").strip()
    if not raw:
        return None
    body = raw.strip("[]() ")
    items = body.split(",") if body else []
    tokens = [t for item in items for t in re.findall(r"\S+", item, re.ASCII)]  # ASCII whitespace only
    bad = [t for t in tokens if not re.fullmatch(r"[+-]?[0-9]{1,6}", t)]
    empty = next((i for i, item in enumerate(items, start=1) if not item.strip()), None)
    if bad or empty or not tokens:
        why = (f" ({_short(bad[0])} is not a layer id)" if bad else
               f" (item {empty} of {len(items)} is empty)" if empty else "")
        raise UsageError(f"{ENV_IDS}={_short(env.get(ENV_IDS))}: expected comma-separated integer layer ids "
                         f"such as 2,30,58{why}")
    return [int(t) for t in tokens]


def _declared(value):
    """None for absent or empty ids; otherwise the value as declared."""
    if value is None or (isinstance(value, list) and not value):
        return None
    return value


def _nested_ids(draft_cfg: Mapping | None):
    """What stock SGLang passes to the setter: ``eagle_config["eagle_aux_hidden_state_layer_ids"]`` or None."""
    eagle_config = draft_cfg.get("eagle_config") if isinstance(draft_cfg, Mapping) else None
    if isinstance(eagle_config, Mapping):
        return eagle_config.get(IDS_KEY)
    return None


def _all_ints(ids) -> bool:
    return isinstance(ids, list) and all(_is_int(v) for v in ids)


@dataclass
class _Inputs:
    """Everything the checks need, from the CLI or from the server hook."""

    rule: FamilyRule | None
    num_layers: int
    stock_ids: object  # what stock SGLang passes to the setter
    nested: object
    top_level: object
    draft_cfg: Mapping | None
    target_hidden_size: int | None
    target_vocab_size: int | None
    header: Mapping | None
    env: Mapping
    algorithm: str = "EAGLE3"
    context_length: int | None = None  # the server's --context-length, when set
    target_max_positions: int | None = None  # the target's max_position_embeddings


def _resolve(inp: _Inputs) -> WiringReport:
    n, rule, env = inp.num_layers, inp.rule, inp.env
    if not _is_int(n) or not 1 <= n <= MAX_NUM_LAYERS:
        raise UsageError(f"num_hidden_layers must be an integer in [1, {MAX_NUM_LAYERS}], got {_short(n)}")
    convention = _convention(env)
    allow_embedding = _allow_embedding(env)
    problems: list[Problem] = []

    def add(code: str, message: str) -> None:
        problems.append(Problem(CHECK_LEVELS[code], code, message))

    env_ids = parse_env_ids(env)
    nested, top = _declared(inp.nested), _declared(inp.top_level)
    if env_ids is not None:
        ids, source = env_ids, "env"
    elif nested is not None:
        ids, source = nested, "eagle_config"
    elif top is not None:
        ids, source = top, "top_level"
    else:
        ids, source = None, "none"

    # stock is emulated only for integer ids: other values would be read character by character
    # (strings), as 0/1 (booleans) or as keys (objects), which predicts nothing useful
    stock_ids_valid = inp.stock_ids is None or _all_ints(inp.stock_ids)
    stock = stock_layers_to_capture(rule, inp.stock_ids, n) if rule is not None and stock_ids_valid else None
    default_rule = rule or _A

    def check_positions(pos: list[int], as_positions: bool) -> None:
        """Embedding and final-layer checks of in-range, distinct capture positions."""
        if 0 in pos and not allow_embedding:
            what = "position 0" if as_positions else "id -1"
            add("embedding_capture", f"{what} captures the embedding output (position 0), not a decoder "
                                     f"layer; set {ENV_ALLOW_EMBEDDING}=1 if the draft was trained on it")
        if n in pos and not default_rule.final_capture:
            fam = rule.module if rule else "this target's family"
            add("final_layer_capture_unsupported",
                f"position {n} (the last layer's output before the final norm) cannot be captured by "
                f"SGLang {STOCK_VERSION} {fam}; only gpt_oss, gemma3_causal, gemma4_causal and minimax_m3 "
                f"(and models built on them) capture it")

    # reading and positions
    positions: list[int] | None
    if ids is None:
        reading = "default"
        positions = stock_layers_to_capture(default_rule, None, n)
        add("ids_missing_default_used",
            f"the draft declares no aux layer ids (eagle_config.{IDS_KEY}): using the family default "
            f"positions {positions}, which cannot be checked against how the draft was trained")
        bad = [p for p in positions if not 0 <= p <= n]
        dupes = sorted({p for p in positions if positions.count(p) > 1})
        if bad:
            add("id_out_of_range", f"default positions {_fmt(bad)} of {_fmt(positions)} (from [2, N//2, N-3]) "
                                   f"outside [0, {n}] for a {n}-layer target; declare the draft's ids")
        if dupes:
            add("duplicate_ids", f"default positions {_fmt(positions)} (from [2, N//2, N-3]) repeat {_fmt(dupes)} "
                                 f"for a {n}-layer target; declare the draft's ids")
        if bad or dupes:
            positions = None
        else:
            check_positions(positions, True)
    elif not _all_ints(ids):
        reading = "position" if convention == "input" else "layer_output"
        positions = None
        bad = ids if not isinstance(ids, list) else [v for v in ids if not _is_int(v)]
        add("non_integer_ids", f"aux layer ids must be a list of integers; got {_fmt(bad)} "
                               f"({_SOURCE_WORDS[source]})")
    else:
        if convention == "input":
            as_positions = True
        elif convention == "stock":
            as_positions = default_rule.reads_as_positions(ids, n)
        else:
            as_positions = max(ids) == n
        reading = "position" if as_positions else "layer_output"
        positions = list(ids) if as_positions else [i + 1 for i in ids]
        if as_positions:
            bad = [p for p in ids if not 0 <= p <= n]
            allowed = f"[0, {n}]"
        else:
            bad = [i for i in ids if not -1 <= i <= n - 1]
            allowed = f"[-1, {n - 1}]"
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if bad:
            words = "positions" if as_positions else "layer-output ids"
            add("id_out_of_range", f"{words} {_fmt(bad)} outside {allowed} for a {n}-layer target "
                                   f"(ids {_fmt(ids)}, {_SOURCE_WORDS[source]})")
        if dupes:
            add("duplicate_ids", f"ids {_fmt(dupes)} repeated in {_fmt(ids)}")
        if bad or dupes:
            positions = None
        else:
            check_positions(positions, as_positions)
        if positions is not None and ids != sorted(ids):
            add("unsorted_ids", f"ids {_fmt(ids)} are not ascending; captures are concatenated in layer order "
                                f"{sorted(positions)}, not list order")

    # where the ids came from
    if source == "top_level":
        add("ids_top_level", f"ids {_fmt(top)} are only at the draft's top level; stock SGLang {STOCK_VERSION} reads "
                             f"only eagle_config.{IDS_KEY} and would use its default; move them into eagle_config")
    if nested is not None and top is not None and nested != top:
        add("ids_conflict", f"eagle_config ids {_fmt(nested)} and top-level ids {_fmt(top)} differ; "
                            f"eagle_config wins")

    draft_cfg = inp.draft_cfg if isinstance(inp.draft_cfg, Mapping) else None
    # number of aux hidden states captured (None: not a list, non_integer_ids says so)
    n_aux = 3 if ids is None else (len(ids) if isinstance(ids, list) else None)
    capture = capture_problems(draft_cfg, inp.algorithm, inp.target_hidden_size, inp.header) \
        if draft_cfg is not None else []
    problems.extend(capture)
    capture_off = any(p.code in _CAPTURE_OFF_CODES for p in capture)
    if capture_off:  # nothing is captured: the ids-count fc checks compare against nothing
        n_aux = None
    if draft_cfg is not None:
        _draft_checks(draft_cfg, inp, n_aux, add)
    header = inp.header or {}
    fc_shape = header.get("fc.weight")
    fc_in = fc_shape[1] if isinstance(fc_shape, list) and len(fc_shape) == 2 else None
    width = inp.target_hidden_size or _draft_target_hidden(draft_cfg)
    if fc_in is not None and width and n_aux is not None and n_aux * width != fc_in:
        add("fc_width_mismatch", f"{n_aux} aux hidden states x {width} = {n_aux * width} != fc.weight "
                                 f"in_features {fc_in} (fc.weight {list(fc_shape)})")
    if draft_cfg is not None:
        _header_checks(draft_cfg, header, add)

    if draft_cfg is not None:
        problems.extend(misspelt_key_problems(draft_cfg))
        problems.extend(variant_problems(draft_cfg, header))
        note = context_note(draft_cfg, inp.context_length, inp.target_max_positions)
        if note is not None:
            problems.append(note)

    if positions is not None and rule is not None and not _same_capture(positions, stock or []) \
            and not capture_off:
        if not stock_ids_valid:
            stock_words = f"is handed non-integer ids {_fmt(inp.stock_ids)} (its capture is not predicted)"
        elif stock is None:
            stock_words = f"would fail at start-up (IndexError) with ids {_fmt(inp.stock_ids)}"
        else:
            stock_words = f"would capture {_fmt(stock)}"
        if convention == "output":
            advice = (f"If the draft was trained on layer inputs, set {ENV_CONVENTION}=input; to keep SGLang's "
                      f"per-family rule, set {ENV_CONVENTION}=stock")
        else:  # the user already chose a convention: say what it does, do not tell them to set it
            reads = "capture positions" if convention == "input" else f"{default_rule.module}'s stock rule"
            advice = (f"{ENV_CONVENTION}={env.get(ENV_CONVENTION, '').strip()} is set, so the ids are read as "
                      f"{reads}")
        add("stock_differs",
            f"stock SGLang {STOCK_VERSION}, {rule.describe()}, {stock_words}; this plugin captures {positions}. "
            + advice + ". Which reading the draft was trained on, its weights can tell: "
            "`eagle-cycle probe TARGET DRAFT`")

    hint = _stock_hint(rule, positions, n, ids) if positions is not None else None
    problems.sort(key=lambda p: _LEVEL_ORDER[p.level])
    return WiringReport(
        num_layers=n, ids=ids, ids_source=source, reading=reading, positions=positions,
        stock_positions=stock, stock_family=rule.module if rule else None, stock_ids_hint=hint,
        fc_in_features=fc_in, problems=problems, convention=convention, stock_ids_valid=stock_ids_valid,
        algorithm=inp.algorithm, variant=draft_variant(draft_cfg, header)[0] if draft_cfg is not None else None,
    )


def _draft_target_hidden(draft_cfg: Mapping | None) -> int | None:
    """Per-state fc input width the draft expects: ``target_hidden_size``, else its ``hidden_size``."""
    if draft_cfg is None:
        return None
    for key in ("target_hidden_size", "hidden_size"):
        if _is_int(draft_cfg.get(key)):
            return draft_cfg[key]
    return None


def _draft_checks(draft: Mapping, inp: _Inputs, n_aux: int | None, add) -> None:
    archs = draft.get("architectures")
    archs = archs if isinstance(archs, list) else []
    if inp.algorithm == "EAGLE3" and not any(a in EAGLE3_DRAFT_ARCHITECTURES for a in archs):
        add("not_eagle3_architecture",
            f"draft architectures {_fmt(archs)} name no EAGLE-3 class; SGLang {STOCK_VERSION} loads "
            f"{' or '.join(EAGLE3_DRAFT_ARCHITECTURES)}")
    # how many aux states stock SGLang builds the draft's fc for
    nested = _nested_ids(draft)
    if "Eagle3DeepseekV2ForCausalLM" in archs:
        ids_for_fc = nested if nested is not None else draft.get(IDS_KEY)
        built = len(ids_for_fc) if isinstance(ids_for_fc, (list, str)) else 3
        how = "eagle_config ids, else top-level ids, else 3"
    elif _is_int(draft.get("num_aux_hidden_states")):
        built, how = draft["num_aux_hidden_states"], "num_aux_hidden_states"
    else:
        built = len(nested) if isinstance(nested, (list, str)) and nested else 3
        how = "eagle_config ids, else 3"
    if n_aux is not None and built != n_aux:
        add("draft_fc_built_mismatch",
            f"{n_aux} aux hidden states resolved, but stock SGLang {STOCK_VERSION} builds the draft fc for "
            f"{built} ({how}); the fc weights will not load")
    if inp.target_hidden_size is not None:
        th = _draft_target_hidden(draft)
        if th is not None and th != inp.target_hidden_size:
            key = "target_hidden_size" if _is_int(draft.get("target_hidden_size")) else "hidden_size (no target_hidden_size)"
            add("target_hidden_mismatch", f"draft {key} {th} != target hidden_size {inp.target_hidden_size}")
    vocab = draft.get("vocab_size")
    if inp.target_vocab_size is not None and _is_int(vocab) and vocab != inp.target_vocab_size:
        add("vocab_mismatch", f"draft vocab_size {vocab} != target vocab_size {inp.target_vocab_size}: "
                              f"the draft was trained for another tokenizer")


def _header_checks(draft: Mapping, header: Mapping, add) -> None:
    lm_head = header.get("lm_head.weight")
    if not isinstance(lm_head, list):
        return
    vocab, dvocab, hidden = draft.get("vocab_size"), draft.get("draft_vocab_size"), draft.get("hidden_size")
    rows = dvocab if _is_int(dvocab) else vocab
    if _is_int(rows) and _is_int(hidden) and list(lm_head) != [rows, hidden]:
        add("lm_head_shape_mismatch", f"lm_head.weight {list(lm_head)} != [{rows}, {hidden}] "
                                      f"([draft_vocab_size or vocab_size, hidden_size])")
    if _is_int(dvocab) and _is_int(vocab) and dvocab < vocab and "d2t" not in header:
        add("d2t_missing", f"draft_vocab_size {dvocab} < vocab_size {vocab} but the checkpoint has no d2t "
                           f"tensor to map draft tokens to target tokens")


def _problem(code: str, message: str) -> Problem:
    return Problem(CHECK_LEVELS[code], code, message)


def normalize_algorithm(value) -> str:
    """``--speculative-algorithm`` as one of :data:`ALGORITHMS` (any case); None or ``""`` means ``EAGLE3``.

    Raises:
        UsageError: any other value (one line naming the accepted ones).
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return "EAGLE3"
    name = value.strip().upper() if isinstance(value, str) else None
    if name not in ALGORITHMS:
        raise UsageError(f"speculative algorithm {_short(value)}: expected one of {', '.join(ALGORITHMS)}")
    return name


def is_eagle3_head(draft_cfg: Mapping | None) -> bool:
    """True when the draft's ``architectures`` name an EAGLE-3 class (``*Eagle3*``, any case)."""
    archs = draft_cfg.get("architectures") if isinstance(draft_cfg, Mapping) else None
    return isinstance(archs, list) and any(isinstance(a, str) and "eagle3" in a.lower() for a in archs)


def _eagle3_arch(draft_cfg: Mapping) -> str:
    archs = draft_cfg.get("architectures") or []
    return next((a for a in archs if isinstance(a, str) and "eagle3" in a.lower()), "?")


def _eagle_config(draft_cfg: Mapping) -> Mapping:
    ec = draft_cfg.get("eagle_config")
    return ec if isinstance(ec, Mapping) else {}


def aux_capture_enabled(draft_cfg: Mapping) -> bool:
    """What SGLang 0.5.23 makes of ``eagle_config.use_aux_hidden_state`` under EAGLE3.

    It reads ``eagle_config.get("use_aux_hidden_state", True)`` when ``eagle_config`` is an object
    and keeps True otherwise; a false value (``false``, ``0``, ``null``) turns capture off.
    """
    ec = draft_cfg.get("eagle_config")
    return bool(ec.get("use_aux_hidden_state", True)) if isinstance(ec, Mapping) else True


def _built_fc_in(draft_cfg: Mapping) -> int | None:
    """``fc`` in-width SGLang builds for the draft: per-state width x number of aux states."""
    width = _draft_target_hidden(draft_cfg)
    if width is None:
        return None
    if "Eagle3DeepseekV2ForCausalLM" not in (draft_cfg.get("architectures") or []) \
            and _is_int(draft_cfg.get("num_aux_hidden_states")):
        return width * draft_cfg["num_aux_hidden_states"]
    ids = _nested_ids(draft_cfg)
    if ids is None and "Eagle3DeepseekV2ForCausalLM" in (draft_cfg.get("architectures") or []):
        ids = draft_cfg.get(IDS_KEY)
    return width * (len(ids) if isinstance(ids, list) and ids else 3)


_CAPTURE_OFF_CODES = ("algorithm_not_eagle3", "aux_capture_off", "aux_capture_off_fc_mismatch")


def capture_problems(draft_cfg: Mapping, algorithm: str = "EAGLE3", target_hidden_size: int | None = None,
                     header: Mapping | None = None) -> list[Problem]:
    """Problems that leave an EAGLE-3 head without aux hidden states (no ids involved).

    * ``algorithm_not_eagle3`` (error): an EAGLE-3 head under ``EAGLE`` or ``NEXTN`` (SGLang rewrites
      NEXTN to EAGLE): nothing is captured, the draft's ``fc`` is skipped, the target's ``lm_head``
      replaces the draft's, ``d2t`` is ignored; accept length stays 1.0 without any error.
    * ``aux_capture_off_fc_mismatch`` (error) / ``aux_capture_off`` (warning): under EAGLE3 with
      ``eagle_config.use_aux_hidden_state`` false, when ``fc``'s input width (from ``header``'s
      ``fc.weight`` [out, in], else as SGLang builds it) is / is not different from the target's
      hidden size (``target_hidden_size``, else the draft's ``target_hidden_size``/``hidden_size``).

    Args:
        draft_cfg: the draft's ``config.json``.
        algorithm: one of :data:`ALGORITHMS` (normalised by the caller).
        target_hidden_size: the target's hidden size in elements, or None when unknown.
        header: tensor name -> shape from the draft's safetensors header, or None.

    Returns:
        Zero or one :class:`Problem`.
    """
    if not isinstance(draft_cfg, Mapping) or not is_eagle3_head(draft_cfg):
        return []
    arch = _eagle3_arch(draft_cfg)
    if algorithm in ("EAGLE", "NEXTN"):
        alias = " (SGLang rewrites NEXTN to EAGLE)" if algorithm == "NEXTN" else ""
        return [_problem("algorithm_not_eagle3",
                         f"the draft is an EAGLE-3 head ({arch}) but the algorithm is {algorithm}{alias}: SGLang "
                         f"{STOCK_VERSION} then captures no aux hidden states, skips the draft's fc, uses the "
                         f"target's lm_head instead of the draft's and ignores d2t, so every cycle accepts only "
                         f"the bonus token (accept length 1.0, no error; SGLang PR #21272). Fix: launch with "
                         f"--speculative-algorithm EAGLE3")]
    if algorithm != "EAGLE3" or aux_capture_enabled(draft_cfg):
        return []
    fc_shape = (header or {}).get("fc.weight")
    if isinstance(fc_shape, list) and len(fc_shape) == 2:
        fc_in, where = fc_shape[1], f"fc.weight {list(fc_shape)}"
    else:
        fc_in, where = _built_fc_in(draft_cfg), "as SGLang builds fc"
    width = target_hidden_size or _draft_target_hidden(draft_cfg)
    head = (f"eagle_config.use_aux_hidden_state is {json.dumps(_eagle_config(draft_cfg).get('use_aux_hidden_state'))}: "
            f"SGLang {STOCK_VERSION} captures no aux hidden states and hands the draft the target's last hidden "
            f"state")
    if fc_in is not None and width is not None and fc_in != width:
        return [_problem("aux_capture_off_fc_mismatch",
                         f"{head} ({width} wide), but the draft's fc takes {fc_in} inputs ({where}): the draft was "
                         f"trained on {fc_in // width if fc_in % width == 0 else 'several'} concatenated states it "
                         f"will never see and its fc is skipped. Fix: remove use_aux_hidden_state from eagle_config "
                         f"(or set it to true)")]
    return [_problem("aux_capture_off",
                     f"{head}; the draft's fc is skipped. Remove use_aux_hidden_state from eagle_config (or set it "
                     f"to true) unless the draft was trained on the last hidden state alone")]


#: keys SGLang 0.5.23 reads for the layer ids: (where, key); top-level only by Eagle3DeepseekV2ForCausalLM
_ID_KEYS_MEANT = f"eagle_config.{IDS_KEY}"
#: how close (difflib ratio, lower case) a key must be to count as a misspelling
MISSPELT_CUTOFF = 0.85


def _close(key: str, meant: str) -> bool:
    return key != meant and difflib.SequenceMatcher(None, key.lower(), meant.lower()).ratio() >= MISSPELT_CUTOFF


def misspelt_key_problems(draft_cfg: Mapping) -> list[Problem]:
    """``ids_key_misspelt`` warnings: draft keys close to the layer-ids key (or to ``eagle_config``).

    Looks at the top level and inside ``eagle_config``; a key counts when its lower-case difflib
    ratio to ``eagle_aux_hidden_state_layer_ids`` (or ``eagle_config``, for an object value) is at
    least :data:`MISSPELT_CUTOFF` and it is not the exact key. SGLang reads only the exact key, so the
    ids under a misspelt one are ignored and the family default is used.
    """
    found: list[tuple[str, str, object]] = []
    for key, value in draft_cfg.items():
        if not isinstance(key, str):
            continue
        if _close(key, IDS_KEY):
            found.append((key, _ID_KEYS_MEANT, value))
        elif isinstance(value, Mapping) and _close(key, "eagle_config"):
            found.append((key, "eagle_config", value))
    for key, value in _eagle_config(draft_cfg).items():
        if isinstance(key, str) and _close(key, IDS_KEY):
            found.append((f"eagle_config.{key}", _ID_KEYS_MEANT, value))
    out = []
    for key, meant, value in found:
        what = f"ids {_fmt(value)}" if isinstance(value, list) else "its contents"
        out.append(_problem("ids_key_misspelt",
                            f"draft key {key!r} is not one SGLang {STOCK_VERSION} reads: did you mean {meant!r}? "
                            f"{what.capitalize()} are ignored (the family default is used unless ids are "
                            f"declared elsewhere)"))
    return out


#: the draft classes whose flags are known, and what each reads (SGLang 0.5.23)
_LLAMA_HEAD, _MLA_HEAD = "LlamaForCausalLMEagle3", "Eagle3DeepseekV2ForCausalLM"


def _norm_before_fc(draft_cfg: Mapping) -> bool:
    """``norm_before_fc`` as LlamaForCausalLMEagle3 reads it: eagle_config first, then top level."""
    ec = _eagle_config(draft_cfg)
    return bool(ec.get("norm_before_fc", draft_cfg.get("norm_before_fc", False)))


def _tensor_dropped(tensor: str, why: str, arch: str, module: str, flag: str) -> "Problem":
    """``draft_flag_ignored``: the checkpoint holds ``tensor`` but the config does not turn on the
    module that would load it, so SGLang drops the tensor silently."""
    return _problem("draft_flag_ignored",
                    f"the checkpoint has {tensor} but {why}: SGLang {STOCK_VERSION}'s {arch} builds no {module} "
                    f"and drops the tensor; set \"{flag}\": true")


def draft_variant(draft_cfg: Mapping | None, header: Mapping | None = None) -> tuple[str | None, list[Problem]]:
    """The EAGLE-3 head variant SGLang 0.5.23 builds, and the flags its class ignores.

    Flags, read where each class reads them: ``fc_norm`` / ``use_aux_norm`` (per-state RMSNorm before
    ``fc``, EAGLE 3.1) and ``norm_output`` (post-norm hidden states out) at top level, by both classes;
    ``norm_before_fc`` (one RMSNorm over the concatenated states, ``input_norm``: the gpt-oss head
    layout) in ``eagle_config`` first, then top level, by ``LlamaForCausalLMEagle3`` only. Tensors
    ``input_norm.weight`` and ``fc_norm.0.weight`` in ``header`` show what the checkpoint was trained with.

    Returns:
        ``(line, problems)``: one line such as ``"LlamaForCausalLMEagle3 (EAGLE 3.1: fc_norm,
        norm_output)"`` (None when the draft names no EAGLE-3 class) and ``draft_flag_ignored``
        warnings for a flag or tensor the chosen class drops.
    """
    if not isinstance(draft_cfg, Mapping) or not is_eagle3_head(draft_cfg):
        return None, []
    header = header or {}
    arch = _eagle3_arch(draft_cfg)
    fc_norm = bool(draft_cfg.get("fc_norm") or draft_cfg.get("use_aux_norm", False))
    norm_output = bool(draft_cfg.get("norm_output", False))
    before_fc = _norm_before_fc(draft_cfg)
    problems: list[Problem] = []
    parts: list[str] = []
    if arch == _MLA_HEAD:
        if before_fc or "input_norm.weight" in header:
            why = ("norm_before_fc is set" if before_fc else "") + \
                  (" and " if before_fc and "input_norm.weight" in header else "") + \
                  ("the checkpoint has input_norm.weight" if "input_norm.weight" in header else "")
            problems.append(_problem("draft_flag_ignored",
                                     f"{why}, but SGLang {STOCK_VERSION}'s {arch} has no input_norm: it ignores "
                                     f"norm_before_fc and drops the tensor, so the draft runs without the norm "
                                     f"before fc it was trained with"))
    elif arch == _LLAMA_HEAD:
        if before_fc:
            parts.append("norm_before_fc: input_norm over the concatenated states before fc, gpt-oss head layout")
        elif "input_norm.weight" in header:
            problems.append(_tensor_dropped("input_norm.weight", "norm_before_fc is not set (looked at eagle_config, "
                                            "then top level)", arch, "input_norm", "norm_before_fc"))
    if arch in (_LLAMA_HEAD, _MLA_HEAD):
        if fc_norm:
            parts.append("fc_norm: per-state RMSNorm before fc, EAGLE 3.1")
        elif "fc_norm.0.weight" in header:
            problems.append(_tensor_dropped("fc_norm.0.weight", "neither fc_norm nor use_aux_norm is true at top "
                                            "level", arch, "fc_norm", "fc_norm"))
        if norm_output:
            parts.append("norm_output: post-norm hidden states out, EAGLE 3.1")
        line = f"{arch} ({'; '.join(parts)})" if parts else f"{arch} (plain EAGLE-3: no optional norms)"
    else:
        line = f"{arch} (not a class SGLang {STOCK_VERSION} builds as an EAGLE-3 head; flags not checked)"
    return line, problems


def variant_problems(draft_cfg: Mapping, header: Mapping | None) -> list[Problem]:
    """The ``draft_flag_ignored`` warnings of :func:`draft_variant`."""
    return draft_variant(draft_cfg, header)[1]


def context_note(draft_cfg: Mapping, context_length: int | None, target_max_positions: int | None) -> Problem | None:
    """``draft_context_shorter`` (level info) when the draft's ``max_position_embeddings`` (tokens)
    is below the context it will serve: ``context_length`` (the server's ``--context-length``) when
    given, else ``target_max_positions`` (the target's ``max_position_embeddings``). None otherwise,
    or when either number is unknown."""
    draft_max = draft_cfg.get("max_position_embeddings")
    if context_length is not None:
        serve, where = context_length, "--context-length"
    else:
        serve, where = target_max_positions, "the target's max_position_embeddings"
    if not _is_int(draft_max) or not _is_int(serve) or draft_max >= serve:
        return None
    return _problem("draft_context_shorter",
                    f"the draft's max_position_embeddings is {draft_max} but it will serve contexts up to {serve} "
                    f"tokens ({where}): past {draft_max} tokens its acceptance may fall (SGLang issue #6783)")


def _stock_hint(rule: FamilyRule | None, positions: list[int], n: int, ids) -> list[int] | None:
    """eagle_config ids that make stock 0.5.23 capture exactly ``positions``, or None.

    Tries the ids in use (when stock reads them right), then ``positions - 1``,
    then ``positions`` as-is, each also rotated (rule B looks at ``ids[0]`` only).
    """
    if rule is None:
        return None
    want = sorted(positions)
    candidates = [list(ids)] if _all_ints(ids) else []
    outputs, as_is = [p - 1 for p in positions], list(positions)
    for base in (outputs, as_is):
        candidates += [base[k:] + base[:k] for k in range(len(base))]
    for cand in candidates:
        got = stock_layers_to_capture(rule, cand, n)
        if got is not None and sorted(got) == want and _stock_captures(rule, got, n):
            return cand
    return None


def contract_positions(ids: list[int], num_layers: int) -> list[int]:
    """Positions this plugin captures for integer ``ids`` under the default convention."""
    return list(ids) if ids and max(ids) == num_layers else [i + 1 for i in ids]


def stock_fix_text(report: WiringReport) -> str:
    """What a stock SGLang 0.5.23 user should write, or why nothing works (one or two sentences)."""
    n, pos, hint = report.num_layers, report.positions, report.stock_ids_hint
    if pos is None:
        return "Fix for stock SGLang: none to write until the errors above are fixed."
    if report.stock_family is None:
        return "Fix for stock SGLang: unknown for this target family (no stock rule known)."
    rule = RULES_BY_MODULE[report.stock_family]
    first = "Fix the errors above first. " if report.errors else ""
    if hint is None:
        if n in pos and not rule.final_capture:
            why = f"stock {report.stock_family} never captures position {n} (the last layer's output)"
        else:
            why = f"no id list makes stock {report.stock_family} capture exactly {pos}"
        return f"{first}Fix for stock SGLang {STOCK_VERSION}: none exists: {why}."
    setting = f'"eagle_config": {{"{IDS_KEY}": {_fmt(hint)}}}'
    stock_same = report.stock_positions is not None and _same_capture(pos, report.stock_positions)
    if stock_same and report.ids_source == "eagle_config" and report.ids == hint:
        return f"{first}Fix for stock SGLang {STOCK_VERSION}: none needed; it already captures positions {pos}."
    if stock_same:
        msg = (f"{first}Fix for stock SGLang {STOCK_VERSION}: none needed, it already captures positions {pos}; "
               f"to make that explicit, set {setting} in the draft's config.json.")
    else:
        msg = (f"{first}Fix for stock SGLang {STOCK_VERSION} (without this plugin): set {setting} in the draft's "
               f"config.json; stock then captures positions {pos}.")
    if sorted(contract_positions(hint, n)) != sorted(pos):
        keep = "the draft's config as it is" if report.ids is None else f"the ids {_fmt(report.ids)}"
        source = " (from SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS)" if report.ids_source == "env" else ""
        msg += (f" With sglang-eagle-cycle installed, do not make this edit: keep {keep}{source}; "
                f"the plugin would read {_fmt(hint)} as layer outputs and capture positions "
                f"{contract_positions(hint, n)}.")
    return msg


# --------------------------------------------------------------------------- entry points

def check_pair(target_cfg: Mapping, draft_cfg: Mapping, header: Mapping | None = None,
               env: Mapping = os.environ, algorithm: str | None = "EAGLE3",
               context_length: int | None = None) -> WiringReport:
    """Check a target/draft config pair as ``eagle-cycle wiring`` does.

    Args:
        target_cfg: the target's HF ``config.json`` (wrapped configs are fine).
        draft_cfg: the draft's ``config.json``.
        header: tensor name -> shape from the draft's safetensors header
            (:func:`sglang_eagle_cycle.safetensors_header.read_draft_shapes`), or None.
        env: environment overrides (``SGLANG_EAGLE_CYCLE_AUX_*``).
        algorithm: the server's ``--speculative-algorithm``: ``EAGLE3`` (default), ``EAGLE``
            or ``NEXTN``, any case.
        context_length: the server's ``--context-length`` in tokens, or None to use the
            target's ``max_position_embeddings`` (for ``draft_context_shorter``).

    Raises:
        UsageError: the target has no layer count; its ``num_hidden_layers`` is not
            an integer in [1, 10000], or its ``hidden_size`` / ``vocab_size`` is present
            but not a positive integer; an env value is malformed; an unknown
            ``algorithm``; a ``context_length`` that is not a positive integer.
    """
    if not isinstance(target_cfg, Mapping) or not isinstance(draft_cfg, Mapping):
        raise UsageError("target and draft configs must be JSON objects")
    algorithm = normalize_algorithm(algorithm)
    if context_length is not None and (not _is_int(context_length) or context_length < 1):
        raise UsageError(f"context length {_short(context_length)}: expected a positive integer (tokens)")
    max_pos = find_field(target_cfg, "max_position_embeddings")
    if _checked_target_field(target_cfg, "num_hidden_layers", MAX_NUM_LAYERS) is None:
        find_num_layers(target_cfg)  # raises its "no integer num_hidden_layers" message
    return _resolve(_Inputs(
        rule=target_rule(target_cfg), num_layers=find_num_layers(target_cfg),
        stock_ids=_nested_ids(draft_cfg), nested=_nested_ids(draft_cfg), top_level=draft_cfg.get(IDS_KEY),
        draft_cfg=draft_cfg, target_hidden_size=_checked_target_field(target_cfg, "hidden_size"),
        target_vocab_size=_checked_target_field(target_cfg, "vocab_size"), header=header, env=env,
        algorithm=algorithm, context_length=context_length, target_max_positions=max_pos[0] if max_pos else None,
    ))


def resolve_at_setter(*, family: str, num_layers: int, passed_ids, draft_cfg: Mapping | None,
                      env: Mapping = os.environ, target_hidden_size: int | None = None,
                      target_vocab_size: int | None = None, header: Mapping | None = None,
                      context_length: int | None = None, target_max_positions: int | None = None,
                      algorithm: str | None = "EAGLE3") -> WiringReport:
    """Resolve the wiring inside a target's ``set_eagle3_layers_to_capture`` (server hook).

    Args:
        family: the target class name (``type(self).__name__``, preferred) or the
            SGLang module basename of the setter (``deepseek_v2``, ``kimi_k25``...).
        num_layers: N (``self.config.num_hidden_layers`` of the language model).
        passed_ids: the ids SGLang passed (nested ids, or None).
        draft_cfg: the draft's ``config.json`` read from the published draft path,
            or None when no draft path is published: then the contract is applied
            to ``passed_ids`` as if they were the draft's eagle_config ids.
        target_hidden_size, target_vocab_size, header: enable the width, vocab and
            safetensors checks when known.
        context_length, target_max_positions: the server's ``--context-length`` and the
            target's ``max_position_embeddings`` (tokens), for ``draft_context_shorter``.
        algorithm: the speculative algorithm (``EAGLE3`` when the setter runs).

    Returns the report; ``positions`` is what the family's capture state must
    equal (None when an error-level problem leaves no valid positions).

    Raises:
        UsageError: malformed env values or a non-positive ``num_layers``.
    """
    rule = family_rule(family)
    if draft_cfg is None:
        nested, top = passed_ids, None
    else:
        nested, top = _nested_ids(draft_cfg), draft_cfg.get(IDS_KEY)
    return _resolve(_Inputs(
        rule=rule, num_layers=num_layers, stock_ids=passed_ids, nested=nested, top_level=top,
        draft_cfg=draft_cfg, target_hidden_size=target_hidden_size, target_vocab_size=target_vocab_size,
        header=header, env=env, algorithm=normalize_algorithm(algorithm),
        context_length=context_length if _is_int(context_length) and context_length > 0 else None,
        target_max_positions=target_max_positions if _is_int(target_max_positions) else None,
    ))


# --------------------------------------------------------------------------- files

def load_config(path: str | Path) -> dict:
    """Read a ``config.json`` as a dict.

    Raises:
        UsageError: missing or unreadable file, invalid JSON, or not a JSON object.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: invalid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise UsageError(f"{path}: invalid JSON (nested too deeply to read)") from None
    except ValueError as exc:  # e.g. an integer literal over Python's digit limit
        raise UsageError(f"{path}: invalid JSON ({str(exc).splitlines()[0][:120]})") from None
    if not isinstance(cfg, dict):
        raise UsageError(f"{path}: expected a JSON object, got {type(cfg).__name__}")
    return cfg


_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")


def hf_cache_dir(env: Mapping = os.environ) -> Path:
    """The Hugging Face hub cache: ``HF_HUB_CACHE``, else ``HF_HOME/hub``, else ``~/.cache/huggingface/hub``."""
    for key in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(key):
            return Path(env[key]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "hub"
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def _cached_config(repo_id: str, revision: str | None, cache: Path) -> Path | None:
    try:  # the library knows refs and snapshot layout best; it does no network here
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        try_to_load_from_cache = None
    if try_to_load_from_cache is not None:
        found = try_to_load_from_cache(repo_id, "config.json", cache_dir=str(cache), revision=revision)
        return Path(found) if isinstance(found, str) else None
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    ref = repo / "refs" / (revision or "main")
    commit = ref.read_text().strip() if ref.is_file() else (revision or "")
    candidate = repo / "snapshots" / commit / "config.json"
    return candidate if commit and candidate.is_file() else None


def locate_config(arg: str, revision: str | None = None, env: Mapping = os.environ) -> Path:
    """Find a model's ``config.json``: a model directory, a ``config.json`` path, or a cached HF repo id.

    Repo ids are looked up in the local Hugging Face cache only (no network),
    honouring ``HF_HUB_CACHE`` / ``HF_HOME`` and ``revision`` (a branch, tag or commit).

    Raises:
        UsageError: (one line) when nothing is found: an empty argument, ``-``
            (stdin is not read), a broken symbolic link, something that is neither
            a file nor a directory (``/dev/null``), or an unknown path / repo id.
    """
    if not arg:
        raise UsageError("empty path: expected a model directory, a config.json or a cached Hugging Face repo id")
    if arg == "-":
        raise UsageError("'-': configs are not read from stdin; give a model directory, a config.json "
                         "or a cached Hugging Face repo id")
    path = Path(arg).expanduser()
    if path.is_symlink() and not path.exists():
        raise UsageError(f"{arg}: broken symbolic link (its target {os.readlink(path)} does not exist)")
    if path.exists() and not (path.is_dir() or path.is_file()):
        raise UsageError(f"{arg}: not a regular file or directory")
    if path.is_dir():
        config = path / "config.json"
        if not config.is_file():
            raise UsageError(f"{arg}: directory has no config.json")
        return config
    if path.is_file():
        return path
    if _REPO_ID.match(arg) and not arg.startswith((".", "/")):
        found = _cached_config(arg, revision, hf_cache_dir(env))
        if found is not None:
            return found
        rev = f" at revision {revision}" if revision else ""
        raise UsageError(f"{arg}: no such path, and no config.json for this Hugging Face repo{rev} in the local "
                         f"cache {hf_cache_dir(env)} (no network is used; download it first)")
    raise UsageError(f"{arg}: no such file or directory")
