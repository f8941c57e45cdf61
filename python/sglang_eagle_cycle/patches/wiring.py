"""Hooks on each model family's ``set_eagle3_layers_to_capture``: one wiring contract for all.

SGLang 0.5.23 calls the target's setter once at start-up (``init_all_attention_backends`` ->
``configure_aux_hidden_state_capture``) with the draft's nested ``eagle_aux_hidden_state_layer_ids``
(or ``None``), and each family reads those ids its own way (DESIGN §1). The hook

1. resolves the ids with :func:`sglang_eagle_cycle.wiring.resolve_at_setter` from the draft's own
   ``config.json`` (``get_spec().speculative_draft_model_path``; the ids SGLang passed when no draft
   path is published or the file cannot be read);
2. stops the launch on an error-level problem (:class:`EagleWiringError`), unless
   ``SGLANG_EAGLE_CYCLE_WIRING_STRICT=0`` turns errors into warnings;
3. runs the family's own setter on its default path (so every flag upstream sets is set) and then
   leaves the capture state equal to our positions: the holder's ``layers_to_capture`` and the
   per-layer ``_is_layer_to_capture`` flags where the family keeps them (through the inner setter
   for families that have one);
4. logs the startup wiring line on tensor-parallel rank 0.

Only setters that decide the positions themselves are hooked. Delegating setters (Kimi-K2.5,
Gemma-3 / Llama-4 multimodal, MindSpore) reach a hooked one through their language model; inner
setters (``Qwen2MoeModel`` and friends) receive already-shifted positions.
"""

from __future__ import annotations

import json
import logging

from . import HookSpec

logger = logging.getLogger("sglang_eagle_cycle")

MODELS = "sglang.srt.models"

#: (module under sglang.srt.models, class) whose setter decides capture positions in 0.5.23.
SETTERS: tuple[tuple[str, str], ...] = (
    ("apertus", "ApertusForCausalLM"),
    ("bailing_moe", "BailingMoEForCausalLM"),
    ("deepseek_v2", "DeepseekV2ForCausalLM"),
    ("exaone_moe", "ExaoneMoEForCausalLM"),
    ("gemma3_causal", "Gemma3ForCausalLM"),
    ("gemma4_causal", "Gemma4ForCausalLM"),
    ("gemma4_mm", "Gemma4ForConditionalGeneration"),
    ("glm4_moe", "Glm4MoeForCausalLM"),
    ("glm4_moe_lite", "Glm4MoeLiteForCausalLM"),
    ("glm5_next", "Glm5NextForConditionalGeneration"),
    ("gpt_oss", "GptOssForCausalLM"),
    ("llama", "LlamaForCausalLM"),
    ("longcat_flash", "LongcatFlashForCausalLM"),
    ("minimax_m2", "MiniMaxM2ForCausalLM"),
    ("minimax_m3", "MiniMaxM3SparseForCausalLM"),
    ("minimax_m3_vl", "MiniMaxM3SparseForConditionalGeneration"),
    ("qwen2", "Qwen2ForCausalLM"),
    ("qwen2_5_vl", "Qwen2_5_VLForConditionalGeneration"),
    ("qwen2_moe", "Qwen2MoeForCausalLM"),
    ("qwen3", "Qwen3ForCausalLM"),
    ("qwen3_5_text", "Qwen3_5ForCausalLM"),
    ("qwen3_moe", "Qwen3MoeForCausalLM"),
    ("qwen3_next", "Qwen3NextForCausalLM"),
    ("qwen3_vl", "Qwen3VLForConditionalGeneration"),
)

#: Setters that only forward to their language model's setter (not hooked: the inner one is).
DELEGATING = (
    ("gemma3_mm", "Gemma3ForConditionalGeneration"),
    ("kimi_k25", "KimiK25ForConditionalGeneration"),
    ("mindspore", "MindSporeForCausalLM"),
    ("mllama4", "Llama4ForConditionalGeneration"),
)



def _is_hooked_class(cls) -> bool:
    """True when ``cls`` inherits one of the hooked (position-deciding) setters."""
    hooked = {(f"{MODELS}.{mod}", name) for mod, name in SETTERS}
    return any((c.__module__, c.__name__) in hooked for c in cls.__mro__)


class EagleWiringError(RuntimeError):
    """A draft wired so that it cannot work: the launch stops (DESIGN §0), unless STRICT=0."""


def hook_specs() -> list[HookSpec]:
    return [HookSpec(f"{MODELS}.{mod}.{cls}.set_eagle3_layers_to_capture", f"{MODELS}.{mod}", _make_hook(mod), "wiring")
            for mod, cls in SETTERS]


def _make_hook(family: str):
    def set_eagle3_layers_to_capture_hook(original, self, layer_ids=None, *args, **kwargs):
        if args or kwargs:  # a signature we do not know: stay out of the way
            return original(self, layer_ids, *args, **kwargs)
        pp_group = getattr(self, "pp_group", None)
        if pp_group is not None and not getattr(pp_group, "is_last_rank", True):
            return original(self, layer_ids)  # only the last pipeline stage captures

        from ..hooks import guard

        report = guard(f"wiring ({family})", lambda: _resolve_or_config_error(family, self, layer_ids),
                       lambda: None)
        if isinstance(report, str):  # a bad SGLANG_EAGLE_CYCLE_* value: a wiring error of the user's making
            if _strict():
                logger.error(report)
                raise EagleWiringError(report)
            logger.warning("%s (serving with stock SGLang wiring, SGLANG_EAGLE_CYCLE_WIRING_STRICT=0)", report)
            return original(self, layer_ids)
        if report is None:
            return original(self, layer_ids)
        guard(f"wiring log ({family})", lambda: _log_report(report), lambda: None)
        message = guard(f"wiring check ({family})", lambda: _error_message(report) if report.errors and _strict()
                        else None, lambda: None)
        if message:
            raise EagleWiringError(message)
        if report.positions is None:  # not strict and nothing valid to capture: keep stock behaviour
            return original(self, layer_ids)
        result = original(self, None)  # upstream's own default path; its exceptions propagate
        guard(f"wiring apply ({family})", lambda: _apply_positions(self, report.positions), lambda: None)
        return result

    set_eagle3_layers_to_capture_hook.family = family
    return set_eagle3_layers_to_capture_hook


def _strict() -> bool:
    from ..runtime import env_flag

    return env_flag("SGLANG_EAGLE_CYCLE_WIRING_STRICT", True)


def num_layers_of(model) -> int:
    """Decoder layers of the target from its config (``text_config`` for wrappers), else its layer list."""
    cfg = getattr(model, "config", None)
    for holder in (cfg, getattr(cfg, "text_config", None)):
        n = getattr(holder, "num_hidden_layers", None)
        if isinstance(n, int) and not isinstance(n, bool):
            return n
    return len(model.model.layers)


def _read_draft():
    """``(config, safetensors header shapes)`` of the published draft; ``(None, None)`` when unknown.

    No draft path published (a bare call) gives ``(None, None)``; an unreadable config is warned
    about and treated the same, so the contract applies to the ids SGLang passed. A missing or
    unreadable safetensors header only skips the header checks.
    """
    from ..runtime import draft_model_path
    from ..wiring import locate_config

    path, revision = draft_model_path()
    if not path:
        return None, None
    try:
        config_path = locate_config(path, revision)
        with open(config_path, encoding="utf-8") as f:
            cfg = json.load(f)
        if not isinstance(cfg, dict):
            raise ValueError("config.json is not a JSON object")
    except Exception as exc:
        logger.warning("sglang-eagle-cycle: cannot read the draft config of %s (%s); "
                       "applying the wiring contract to the ids SGLang passed", path, exc)
        return None, None
    try:
        from ..safetensors_header import read_draft_shapes

        header = read_draft_shapes(config_path.parent) or None
    except Exception:
        header = None
    return cfg, header


def _resolve_or_config_error(family: str, model, layer_ids):
    """The wiring report, or a message string when an environment override is unusable."""
    from ..errors import UsageError

    try:
        return _resolve(family, model, layer_ids)
    except UsageError as exc:
        return (f"EAGLE-3 aux wiring configuration error: {exc}. Fix or unset the SGLANG_EAGLE_CYCLE_* "
                f"variable, or set SGLANG_EAGLE_CYCLE_WIRING_STRICT=0 to serve with stock SGLang wiring.")


def _resolve(family: str, model, layer_ids):
    from ..wiring import RULES_BY_ARCHITECTURE, resolve_at_setter

    if type(model).__name__ in RULES_BY_ARCHITECTURE:  # exact where one module holds several rules (qwen3_vl)
        family = type(model).__name__

    cfg = getattr(model, "config", None)
    text = getattr(cfg, "text_config", None)

    def field(name):
        value = getattr(cfg, name, None) or getattr(text, name, None)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    draft_cfg, header = _read_draft()
    return resolve_at_setter(family=family, num_layers=num_layers_of(model), passed_ids=layer_ids,
                             draft_cfg=draft_cfg, header=header, target_hidden_size=field("hidden_size"),
                             target_vocab_size=field("vocab_size"))


def _log_report(report) -> None:
    from ..runtime import env_flag, ranks

    r = ranks()
    if not (r.tp_rank == 0 and r.dp_rank == 0) and not env_flag("SGLANG_EAGLE_CYCLE_ALL_RANKS", False):
        return
    logger.info(report.startup_line())
    for p in report.problems:
        if p.level == "warning":
            logger.warning("EAGLE-3 aux wiring warning [%s]: %s", p.code, p.message)
        elif not _strict():
            logger.error("EAGLE-3 aux wiring error [%s] (serving anyway, SGLANG_EAGLE_CYCLE_WIRING_STRICT=0): %s",
                         p.code, p.message)


def _error_message(report) -> str:
    errs = "; ".join(f"[{p.code}] {p.message}" for p in report.problems if p.level == "error")
    msg = (f"EAGLE-3 aux wiring error: {errs}. The draft cannot work with this target as declared: fix the "
           f"draft's eagle_config.eagle_aux_hidden_state_layer_ids (check offline with `eagle-cycle wiring "
           f"TARGET DRAFT`), or set SGLANG_EAGLE_CYCLE_WIRING_STRICT=0 to serve anyway.")
    logger.error(msg)
    return msg


def _holder(model):
    """The object whose ``layers_to_capture`` the family's forward reads."""
    for name in ("model", "language_model"):
        obj = getattr(model, name, None)
        if obj is not None and hasattr(obj, "layers_to_capture"):
            return obj
    raise AttributeError(f"{type(model).__name__} keeps no layers_to_capture after its setter ran")


def _apply_positions(model, positions: list[int]) -> None:
    """Make the family's capture state equal ``positions`` (capture positions, HF hidden_states index)."""
    holder = _holder(model)
    layers = getattr(holder, "layers", None)
    flagged = False
    if layers is not None:
        for layer in layers:
            if getattr(layer, "_is_layer_to_capture", False):
                layer._is_layer_to_capture = False
                flagged = True
    inner = getattr(type(holder), "set_eagle3_layers_to_capture", None)
    if inner is not None and not _is_hooked_class(type(holder)):
        holder.set_eagle3_layers_to_capture(list(positions))  # inner setters take positions as-is
        return
    holder.layers_to_capture = list(positions)
    if flagged:
        for p in positions:
            if 0 <= p < len(layers):
                layers[p]._is_layer_to_capture = True
