"""Hooks on each model family's ``set_eagle3_layers_to_capture``: one wiring contract for all.

SGLang 0.5.23 calls the target's setter once at start-up (``init_all_attention_backends`` ->
``configure_aux_hidden_state_capture``) with the draft's nested ``eagle_aux_hidden_state_layer_ids``
(or ``None``), and each family reads those ids its own way (README, "Aux-layer wiring"). The hook

1. resolves the ids with :func:`sglang_eagle_cycle.wiring.resolve_at_setter` from the draft's own
   ``config.json`` (``get_spec().speculative_draft_model_path``; the ids SGLang passed when no draft
   path is published or the file cannot be read);
2. stops the launch on an error-level problem (:class:`EagleWiringError`), unless
   ``SGLANG_EAGLE_CYCLE_WIRING_STRICT=0`` turns errors into warnings;
3. runs the family's own setter on its default path (so every flag upstream sets is set) and then
   leaves the capture state equal to our positions: the holder's ``layers_to_capture`` and the
   per-layer ``_is_layer_to_capture`` flags where the family keeps them (through the inner setter
   for families that have one); a fault of ours there leaves stock SGLang's wiring of the ids it
   passed (every capture flag cleared, then its setter run again on them);
4. logs the startup wiring line on tensor-parallel rank 0.

Only setters that decide the positions themselves are hooked. Delegating setters (Kimi-K2.5,
Gemma-3 / Llama-4 multimodal, MindSpore) reach a hooked one through their language model; inner
setters (``Qwen2MoeModel`` and friends) receive already-shifted positions.

SGLang calls the setter only under ``--speculative-algorithm EAGLE3`` with
``eagle_config.use_aux_hidden_state`` true (``spec_aux_hidden_state.py``). The other two ways an
EAGLE-3 head runs without aux states (``EAGLE``/``NEXTN``, or ``use_aux_hidden_state: false``) are
checked by :func:`precheck_capture_mode`, which the ``Scheduler.__init__`` hook
(:mod:`.banner`) runs before SGLang loads any weights.
"""

from __future__ import annotations

import json
import logging
import os

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
    """A draft wired so that it cannot work: the launch stops (README, "Safety"), unless STRICT=0."""


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
        if guard(f"wiring apply ({family})", lambda: _apply_positions(self, report.positions) or True,
                 lambda: False):
            return result
        # our apply failed part way (flags cleared, positions of the None default): stock's own wiring
        # of the ids SGLang passed, as without the plugin (its setters set flags, never clear them);
        # a fault clearing them is the same fault, under the same once-only key
        guard(f"wiring apply ({family})", lambda: _clear_flags(self), lambda: None)
        return original(self, layer_ids)

    set_eagle3_layers_to_capture_hook.family = family
    return set_eagle3_layers_to_capture_hook


def _strict() -> bool:
    from ..runtime import env_flag

    return env_flag("SGLANG_EAGLE_CYCLE_WIRING_STRICT", True)


def num_layers_of(model) -> int:
    """Decoder layers of the target from its config, else its layer list. A wrapper's language
    model first, in SGLang 0.5.23's priority (``get_hf_text_config``: ``thinker_config``'s
    ``text_config``, ``llm_config``, ``language_config``, ``text_config``), then the top level; the
    top level first for ``Llava*ForCausalLM``, which SGLang builds from it (as
    :func:`..wiring.config._language_holders` reads a config file). Sub-configs kept as plain dicts
    are read as well as config objects."""
    from collections.abc import Mapping

    from ..wiring.config import _TEXT_WRAPPERS, _reads_top_level

    def sub(obj, key):   # a config object's field, or a plain dict's (sub-configs some models keep as dicts)
        return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)

    cfg = getattr(model, "config", None)
    thinker = sub(cfg, "thinker_config")
    inner = sub(thinker, "text_config")
    wrappers = [thinker if inner is None else inner] + [sub(cfg, w) for w in _TEXT_WRAPPERS]
    top_first = _reads_top_level({"architectures": sub(cfg, "architectures")})
    for holder in ((cfg, *wrappers) if top_first else (*wrappers, cfg)):
        n = sub(holder, "num_hidden_layers")
        if isinstance(n, int) and not isinstance(n, bool):
            return n
    return len(model.model.layers)


#: reasons already logged for a draft checkpoint whose shapes could not be read
_CHECKPOINT_WARNED: set = set()


def _read_draft():
    """``(config, safetensors header shapes)`` of the published draft; ``(None, None)`` when unknown.

    No draft path published (a bare call) gives ``(None, None)``; an unreadable config is warned
    about and treated the same, so the contract applies to the ids SGLang passed. A missing
    checkpoint only skips the header checks; an unreadable one (a damaged file, a ``.bin`` whose
    tensors sit in a nested dict, a pre-1.6 pickle not loaded here) skips them with one WARNING
    naming the reason.
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

        # every TP rank runs this before SGLang loads the draft: no checkpoint is loaded whole here
        header = read_draft_shapes(config_path.parent, load_legacy=False) or None
    except Exception as exc:
        header = None
        from ..errors import UsageError

        why = str(exc) if isinstance(exc, UsageError) else f"{type(exc).__name__}: {exc}"
        if why not in _CHECKPOINT_WARNED:   # once per reason: the setter hooks may ask again
            _CHECKPOINT_WARNED.add(why)
            logger.warning("sglang-eagle-cycle: the draft checkpoint's tensor shapes were not read (%s); the "
                           "wiring checks that need them (fc width, lm_head, d2t, norms) are skipped", why)
    return cfg, header


_ENV_WARNED: set = set()


def _server_env() -> dict:
    """The environment the server's wiring reads: ``os.environ`` less an unparsable
    ``SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING``, warned once and read as its default (off). It only
    permits id -1; refused there, a draft that declares -1 still stops the launch as
    ``embedding_capture``, and one that does not is wired as it would be anyway: a typo in it is no
    reason to stop a server (helper 83). The overrides that choose the layers
    (``SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS``, ``SGLANG_EAGLE_CYCLE_AUX_CONVENTION``) stay refused when
    unusable: the wiring the operator asked for is then unknown."""
    from ..errors import UsageError
    from ..wiring.config import ENV_ALLOW_EMBEDDING
    from ..wiring.resolve import _allow_embedding

    env = dict(os.environ)
    try:
        _allow_embedding(env)
    except UsageError as exc:
        env.pop(ENV_ALLOW_EMBEDDING, None)
        if ENV_ALLOW_EMBEDDING not in _ENV_WARNED:
            _ENV_WARNED.add(ENV_ALLOW_EMBEDDING)
            logger.warning("sglang-eagle-cycle: %s; read as unset (id -1 not accepted)", exc)
    return env


def _resolve_or_config_error(family: str, model, layer_ids):
    """The wiring report, or a message string when an environment override is unusable.

    Only the overrides that choose the layers are read for that message; a UsageError from anything
    else (our own reading of the target, say) is a fault of ours, left to the caller's guard: it must
    not stop a launch in the overrides' name."""
    from ..errors import UsageError
    from ..wiring.resolve import _convention, parse_env_ids

    env = _server_env()
    try:
        parse_env_ids(env)
        _convention(env)
    except UsageError as exc:
        return (f"EAGLE-3 aux wiring configuration error: {exc}. Fix or unset the SGLANG_EAGLE_CYCLE_* "
                f"variable, or set SGLANG_EAGLE_CYCLE_WIRING_STRICT=0 to serve with stock SGLang wiring.")
    return _resolve(family, model, layer_ids, env)


def _resolve(family: str, model, layer_ids, env=None):
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
                             draft_cfg=draft_cfg, header=header, env=_server_env() if env is None else env,
                             target_hidden_size=field("hidden_size"),
                             target_vocab_size=field("vocab_size"), context_length=_published_context_length(),
                             target_max_positions=field("max_position_embeddings"))


def _published_context_length():
    """The server's ``--context-length`` from SGLang's runtime context (``get_model()``), or None."""
    try:
        from sglang.srt.runtime_context import get_model

        value = get_model().context_length
    except Exception:
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _published_algorithm():
    """``get_spec().speculative_algorithm`` (a string such as ``EAGLE3``), or None when unpublished."""
    try:
        from sglang.srt.runtime_context import get_spec

        value = get_spec().speculative_algorithm
    except Exception:
        return None
    return str(value).upper() if value else None


def _published_target_hidden():
    """The target's ``hidden_size`` read from its config (``get_model().model_path``), or None."""
    try:
        from sglang.srt.runtime_context import get_model

        from ..wiring import find_field, load_config, locate_config

        bag = get_model()
        cfg = load_config(locate_config(str(bag.model_path), getattr(bag, "revision", None) or None))
        found = find_field(cfg, "hidden_size")
        return found[0] if found else None
    except Exception:  # a repo id not yet downloaded, a dummy path: the draft's own width is used
        return None


def precheck_capture_mode():
    """Check, before SGLang builds any model, that an EAGLE-3 draft will get aux hidden states.

    Reads ``get_spec().speculative_algorithm`` and the published draft's ``config.json`` and
    safetensors header; for an EAGLE-3 head under ``EAGLE``/``NEXTN``, or under ``EAGLE3`` with
    ``eagle_config.use_aux_hidden_state`` false, logs the problems (scheduler rank 0) and returns
    the message that stops the launch (None when nothing stops it: no problem, only warnings, or
    ``SGLANG_EAGLE_CYCLE_WIRING_STRICT=0``). Any other algorithm, or no draft path, is left alone.
    Faults in this function are the caller's to guard.
    """
    from ..wiring import ALGORITHMS, ERROR, capture_problems

    algorithm = _published_algorithm()
    if algorithm not in ALGORITHMS:
        return None
    draft_cfg, header = _read_draft()
    if draft_cfg is None:
        return None
    problems = capture_problems(draft_cfg, algorithm, _published_target_hidden(), header)
    if not problems:
        return None
    _log_problems(problems)
    if any(p.level == ERROR for p in problems) and _strict():
        return _error_message(problems)
    return None


def _logging_rank() -> bool:
    from ..runtime import env_flag, ranks

    r = ranks()
    return (r.tp_rank == 0 and r.dp_rank == 0) or env_flag("SGLANG_EAGLE_CYCLE_ALL_RANKS", False)


def _log_report(report) -> None:
    if not _logging_rank():
        return
    logger.info(report.startup_line())
    if report.variant:
        logger.info("EAGLE-3 draft variant: %s", report.variant)
    _log_problems(report.problems, check_rank=False)
    from ..hooks import guard

    guard("wiring metric", lambda: _export_wiring(report), lambda: None)


def _export_wiring(report) -> None:
    """``sglang:eagle_cycle_aux_wiring_info`` when the Prometheus export runs (SGLang's metrics on)."""
    from ..metrics import export_wanted, set_wiring_info

    labels = export_wanted()
    if labels is not None:
        set_wiring_info(labels, report)


def _log_problems(problems, check_rank: bool = True) -> None:
    """One log record per problem: WARNING, INFO for notes, ERROR for errors when not strict."""
    if check_rank and not _logging_rank():
        return
    for p in problems:
        if p.level == "warning":
            logger.warning("EAGLE-3 aux wiring warning [%s]: %s", p.code, p.message)
        elif p.level == "info":
            logger.info("EAGLE-3 aux wiring note [%s]: %s", p.code, p.message)
        elif not _strict():
            logger.error("EAGLE-3 aux wiring error [%s] (serving anyway, SGLANG_EAGLE_CYCLE_WIRING_STRICT=0): %s",
                         p.code, p.message)


def _error_message(report_or_problems) -> str:
    problems = getattr(report_or_problems, "problems", report_or_problems)
    errs = "; ".join(f"[{p.code}] {p.message}" for p in problems if p.level == "error")
    ids_only = not any(p.code in ("algorithm_not_eagle3", "aux_capture_off_fc_mismatch") for p in problems)
    fix = ("fix the draft's eagle_config.eagle_aux_hidden_state_layer_ids" if ids_only
           else "apply the fix named above")
    msg = (f"EAGLE-3 aux wiring error: {errs}. The draft cannot work with this target as declared: {fix} "
           f"(check offline with `eagle-cycle wiring TARGET DRAFT`), or set SGLANG_EAGLE_CYCLE_WIRING_STRICT=0 "
           f"to serve anyway.")
    logger.error(msg)
    return msg


def _holder(model):
    """The object whose ``layers_to_capture`` the family's forward reads."""
    for name in ("model", "language_model"):
        obj = getattr(model, name, None)
        if obj is not None and hasattr(obj, "layers_to_capture"):
            return obj
    raise AttributeError(f"{type(model).__name__} keeps no layers_to_capture after its setter ran")


def _clear_flags(model) -> bool:
    """Clear every per-layer ``_is_layer_to_capture`` flag of the capture holder; whether any was set."""
    layers = getattr(_holder(model), "layers", None)
    flagged = False
    for layer in layers if layers is not None else ():
        if getattr(layer, "_is_layer_to_capture", False):
            layer._is_layer_to_capture = False
            flagged = True
    return flagged


def _apply_positions(model, positions: list[int]) -> None:
    """Make the family's capture state equal ``positions`` (capture positions, HF hidden_states index)."""
    holder = _holder(model)
    layers = getattr(holder, "layers", None)
    flagged = _clear_flags(model)
    inner = getattr(type(holder), "set_eagle3_layers_to_capture", None)
    if inner is not None and not _is_hooked_class(type(holder)):
        holder.set_eagle3_layers_to_capture(list(positions))  # inner setters take positions as-is
        return
    holder.layers_to_capture = list(positions)
    if flagged:
        for p in positions:
            if 0 <= p < len(layers):
                layers[p]._is_layer_to_capture = True
