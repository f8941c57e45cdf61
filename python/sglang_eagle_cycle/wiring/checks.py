"""The individual checks of a draft against its target and the server's settings: the EAGLE-3
architecture and algorithm, ``use_aux_hidden_state``, ``fc`` / ``lm_head`` / ``d2t`` shapes from the
safetensors header, misspelt id keys, head-variant flags SGLang drops, and the context-length note.
Each returns or adds :class:`~.report.Problem` objects; :mod:`.resolve` runs them.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..safetensors_header import (CHECKPOINT_MISSING_SHARDS, CHECKPOINT_NESTED_TENSORS, D2T_LLAMA_ONLY, FC_DTYPE,
                                  FC_QUANTIZED, FC_SCALES, MLA_A_PROJ_DROPPED, PREFIXED, PT_INDEX_FILE,
                                  QUANT_CONFIG_FILE, WRAPPER_PREFIXED, WRAPPER_PREFIXES, module_of, short_list,
                                  stored_name)
from .config import IDS_KEY, _is_int, _nested_ids, _short, find_field
from .report import Problem, _fmt, _problem
from .stock import FamilyRule, STOCK_VERSION


#: draft architectures SGLang 0.5.23 can load as an EAGLE-3 head
EAGLE3_DRAFT_ARCHITECTURES = ("LlamaForCausalLMEagle3", "Eagle3DeepseekV2ForCausalLM")


#: ``--speculative-algorithm`` values the check knows; NEXTN is SGLang's alias of EAGLE
ALGORITHMS = ("EAGLE3", "EAGLE", "NEXTN")


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


def _draft_target_hidden(draft_cfg: Mapping | None) -> int | None:
    """Per-state fc input width the draft expects: ``target_hidden_size``, else its ``hidden_size``."""
    if draft_cfg is None:
        return None
    for key in ("target_hidden_size", "hidden_size"):
        if _is_int(draft_cfg.get(key)):
            return draft_cfg[key]
    return None


def _draft_checks(draft: Mapping, inp: _Inputs, n_aux: int | None, add) -> None:
    raw = draft.get("architectures")
    archs = raw if isinstance(raw, list) else []
    if inp.algorithm == "EAGLE3" and not any(a in EAGLE3_DRAFT_ARCHITECTURES for a in archs):
        what = (f"draft architectures {_fmt(archs)} name no EAGLE-3 class" if isinstance(raw, list) or raw is None
                else f"draft architectures is {_fmt(raw)}, not a list of class names (SGLang reads architectures[0])")
        add("not_eagle3_architecture",
            f"{what}; SGLang {STOCK_VERSION} loads {' or '.join(EAGLE3_DRAFT_ARCHITECTURES)}")
    # how many aux states stock SGLang builds the draft's fc for
    nested = _nested_ids(draft)
    if "Eagle3DeepseekV2ForCausalLM" in archs:
        built, how = _mla_aux_states(draft), "eagle_config ids, else top-level ids, else 3"
    elif _is_int(draft.get("num_aux_hidden_states")):
        built, how = draft["num_aux_hidden_states"], "num_aux_hidden_states"
    else:
        built = len(nested) if isinstance(nested, (list, str)) and nested else 3
        how = "eagle_config ids, else 3"
    if n_aux is not None and built != n_aux:
        add("draft_fc_built_mismatch",
            f"{n_aux} aux hidden states resolved, but stock SGLang {STOCK_VERSION} builds the draft fc for "
            f"{built} ({how}); the fc weights will not load")
    # fields stock's LlamaForCausalLMEagle3 uses as they are: a malformed one fails the draft's build
    # (Eagle3DeepseekV2ForCausalLM reads both defensively, a null target_hidden_size as hidden_size)
    deepseek_head = "Eagle3DeepseekV2ForCausalLM" in archs
    ec = draft.get("eagle_config")
    if ec and not isinstance(ec, Mapping) and not deepseek_head:
        add("eagle_config_not_object",
            f"eagle_config is {_short(ec)}, not an object: stock SGLang {STOCK_VERSION} LlamaForCausalLMEagle3 "
            f"calls eagle_config.get() and fails to build the draft")
    raw_th = draft.get("target_hidden_size", 0)
    if "target_hidden_size" in draft and not _is_int(raw_th) and not (deepseek_head and raw_th is None):
        shown = "null" if raw_th is None else _short(raw_th)
        add("target_hidden_mismatch", f"draft target_hidden_size is {shown}, not an integer: stock SGLang "
                                      f"{STOCK_VERSION} builds the draft fc from it and fails")
    if inp.target_hidden_size is not None:
        th = _draft_target_hidden(draft)
        if th is not None and th != inp.target_hidden_size:
            key = "target_hidden_size" if _is_int(draft.get("target_hidden_size")) else "hidden_size (no target_hidden_size)"
            add("target_hidden_mismatch", f"draft {key} {th} != target hidden_size {inp.target_hidden_size}")
    vocab = draft.get("vocab_size")
    if inp.target_vocab_size is not None and _is_int(vocab) and vocab != inp.target_vocab_size:
        add("vocab_mismatch", f"draft vocab_size {vocab} != target vocab_size {inp.target_vocab_size}: "
                              f"the draft was trained for another tokenizer")


def _mla_aux_states(draft: Mapping) -> int:
    """How many aux states ``Eagle3DeepseekV2ForCausalLM`` builds its fc (and fc norms) for: the count of
    its eagle_config ids, else of its top-level ids, else 3."""
    nested = _nested_ids(draft)
    ids = nested if nested is not None else draft.get(IDS_KEY)
    return len(ids) if isinstance(ids, (list, str)) else 3


#: the decoder-layer modules SGLang 0.5.23's Eagle3DeepseekV2ForCausalLM loads, as a checkpoint names
#: them after ``layers.0.`` (or ``midlayer.``): q_a_proj and kv_a_proj_with_mqa fill one fused parameter,
#: gate_proj and up_proj (or gate_up_proj) one stacked one. test/test_mla_head_sglang.py checks the
#: list against the names the class loads
MLA_LAYER_MODULES = (
    "self_attn.q_a_proj", "self_attn.kv_a_proj_with_mqa", "self_attn.q_a_layernorm", "self_attn.q_b_proj",
    "self_attn.kv_a_layernorm", "self_attn.kv_b_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj",
    "mlp.gate_up_proj", "mlp.down_proj", "input_layernorm", "hidden_norm", "post_attention_layernorm",
)


#: at most this many stored names in a ``weight_not_loaded`` message (then "and N more")
#: a list of names in a message: the first three and how many more
_names = short_list


def _mla_own_embedding(draft: Mapping) -> bool:
    """Whether Eagle3DeepseekV2ForCausalLM serves its own ``embed_tokens`` (from the checkpoint) rather than
    the target's: SGLang 0.5.23 shares the target's unless ``target_hidden_size`` is set and differs from
    ``hidden_size``, and always when the head takes embedding and lm_head from the target (untied, no
    ``draft_vocab_size``)."""
    th = draft.get("target_hidden_size")
    from_target = not draft.get("tie_word_embeddings") and draft.get("draft_vocab_size") is None
    return _is_int(th) and th != draft.get("hidden_size") and not from_target


def mla_prefixed_problems(draft: Mapping, header: Mapping, fc_used: bool) -> list[Problem]:
    """Errors for the tensors SGLang 0.5.23's ``Eagle3DeepseekV2ForCausalLM`` skips because the checkpoint
    stores them only under ``model.`` (the ``"model.X": []`` markers of
    :func:`~sglang_eagle_cycle.safetensors_header.prefixed_only` in ``header``). The class adds ``model.``
    to every name itself, finds no ``model.model.X`` parameter and skips the tensor, so the module stays
    as built: uninitialised memory on a GPU.

    * ``fc_width_mismatch``: the draft's fc stored quantised and only as ``model.fc.*`` (``model.fc.qweight``,
      ``model.fc.weight_scale_inv``, ...), where SGLang applies fc (``fc_used``). A plain ``model.fc.weight``
      is reported by the caller.
    * ``weight_not_loaded`` (one problem naming the tensors): ``norm``, the decoder layer's modules
      (:data:`MLA_LAYER_MODULES`), ``fc_norm.N`` (built with ``fc_norm`` / ``use_aux_norm``, one per aux
      state, applied with fc) and ``embed_tokens`` where the draft serves its own (:func:`_mla_own_embedding`).
    * ``weight_not_loaded`` (another problem): the attention's ``q_a_proj`` / ``kv_a_proj_with_mqa``
      shard stored without its partner, or a pre-fused ``fused_qkv_a_proj_with_mqa``, which the class
      drops silently (the :data:`~sglang_eagle_cycle.safetensors_header.MLA_A_PROJ_DROPPED` marker).

    Not here: ``model.lm_head.weight`` (``lm_head_not_loaded``, both heads), ``model.d2t`` (loaded),
    tensors of modules the class does not build (skipped however spelt).

    Returns:
        Zero to three :class:`Problem`; none for another head class.
    """
    if not _is_mla_head(draft):
        return []
    marked = sorted(n for n, shape in header.items() if n.startswith(PREFIXED) and shape == [])
    layer = {"layers.0." + m for m in MLA_LAYER_MODULES}
    fc_norms = {f"fc_norm.{i}" for i in range(_mla_aux_states(draft))} \
        if fc_used and (draft.get("fc_norm") or draft.get("use_aux_norm")) else set()
    used = layer | fc_norms | {"norm"} | ({"embed_tokens"} if _mla_own_embedding(draft) else set())
    problems = []
    fc = [n for n in marked if module_of(n[len(PREFIXED):]) == "fc"]
    if fc_used and fc and "fc.weight" not in header and "fc.quantized" in header:
        problems.append(_problem(
            "fc_width_mismatch",
            f"the draft checkpoint stores its fc quantised and only under the model. prefix ({_names(fc)}), "
            f"which SGLang {STOCK_VERSION}'s {_MLA_HEAD} skips (it adds model. itself and finds no "
            f"model.model.fc): its fc stays unloaded (uninitialised); save the draft's tensors without "
            f"the model. prefix"))
    dropped = header.get(MLA_A_PROJ_DROPPED) or []
    if dropped:
        problems.append(_problem(
            "weight_not_loaded",
            f"the draft checkpoint stores {_names(dropped)}: SGLang {STOCK_VERSION}'s {_MLA_HEAD} fuses the "
            f"decoder layer's self_attn.q_a_proj and self_attn.kv_a_proj_with_mqa into its "
            f"fused_qkv_a_proj_with_mqa only when both are stored (the same leaf), and drops a shard without "
            f"its partner or a pre-fused name without a log line: the attention's fused_qkv_a_proj_with_mqa "
            f"stays unloaded (uninitialised), so the draft's proposals are noise; store q_a_proj and "
            f"kv_a_proj_with_mqa, each whole"))
    skipped = [n for n in marked if module_of(n[len(PREFIXED):]) in used]
    if skipped:
        modules = sorted({module_of(n[len(PREFIXED):]) for n in skipped})
        problems.append(_problem(
            "weight_not_loaded",
            f"the draft checkpoint stores {_names(skipped)} only under the model. prefix, which SGLang "
            f"{STOCK_VERSION}'s {_MLA_HEAD} skips (it adds model. itself and finds no model.model.* "
            f"parameter): {len(modules)} module{'s' * (len(modules) != 1)} ({_names(modules)}) stay"
            f"{'s' * (len(modules) == 1)} unloaded (uninitialised), so the draft's proposals are noise; "
            f"save the draft's tensors without the model. prefix"))
    return problems


def _declares_quantisation(draft: Mapping, header: Mapping) -> str | None:
    """Where the draft checkpoint declares its quantisation, as SGLang 0.5.23 looks for it (config.json
    ``quantization_config``, ``text_config.quantization_config``, ``compression_config``, then a
    ``hf_quant_config.json`` beside it); None when nowhere. Server flags do not count: ``--quantization
    fp8`` alone (``Fp8Config()``) builds a float fc and quantises it online (test/test_mla_head_sglang.py)."""
    text = draft.get("text_config")
    for where, value in (("quantization_config", draft.get("quantization_config")),
                         ("text_config.quantization_config", text.get("quantization_config")
                          if isinstance(text, Mapping) else None),
                         ("compression_config", draft.get("compression_config"))):
        if value is not None:
            return where
    return QUANT_CONFIG_FILE if QUANT_CONFIG_FILE in header else None


def fc_scale_problems(draft: Mapping, header: Mapping, fc_used: bool) -> list[Problem]:
    """``fc_scale_dropped``: the draft's ``fc.weight`` is stored quantised (a safetensors dtype such as
    ``F8_E4M3``, header marker :data:`~sglang_eagle_cycle.safetensors_header.FC_DTYPE`) beside its scale
    (``fc.weight_scale_inv`` / ``fc.weight_scale``, marker ``FC_SCALES``), in a head that builds fc as a
    plain float layer: SGLang copies the stored values into the float weight (cast, not dequantised) and
    finds no parameter for the scale, so fc computes with weights off by the scale's factor, silently.

    * ``LlamaForCausalLMEagle3``: always (its fc is a ``torch.nn.Linear``, whatever the quantisation
      config), either spelling of fc.weight.
    * ``Eagle3DeepseekV2ForCausalLM``: where the checkpoint declares no quantisation
      (:func:`_declares_quantisation`), for fc.weight stored unprefixed (``model.fc.weight`` is not loaded
      at all: ``fc_width_mismatch``). With one declared its fc may be quantised and load both tensors
      (an fp8 config does), so it is not checked.

    Not raised where SGLang applies no fc (``fc_used`` False), for a float dtype, nor for a quantised
    dtype without a scale (the stored values are then the weights, and a float fc holds them exactly).

    Returns:
        Zero or one :class:`Problem`, its message one line naming the tensor, its dtype and the scale.
    """
    dtype, scales = header.get(FC_DTYPE), header.get(FC_SCALES)
    if not fc_used or not isinstance(dtype, str) or not scales or not isinstance(draft.get("architectures"), list):
        return []
    arch, name = _eagle3_arch(draft), stored_name(header, "fc.weight")
    if arch == _LLAMA_HEAD:
        why = "builds fc as a plain float torch.nn.Linear whatever the quantisation config"
    elif arch == _MLA_HEAD and name == "fc.weight" and _declares_quantisation(draft, header) is None:
        why = ("builds fc unquantised: the draft declares no quantisation (no quantization_config, "
               "compression_config or hf_quant_config.json; --quantization fp8 alone quantises online and "
               "drops the scale too)")
    else:
        return []
    scale_words = _names(list(scales))
    return [_problem("fc_scale_dropped",
                     f"the draft checkpoint stores {name} as {dtype} with its scale {scale_words}: SGLang "
                     f"{STOCK_VERSION}'s {arch} {why}, so it casts the {dtype} values into fc as they are and "
                     f"drops {scale_words}: fc runs without its scale, silently wrong; store fc dequantised "
                     f"(fc.weight in bf16)" + (", or declare the checkpoint's quantization_config in the "
                                                "draft config" if arch == _MLA_HEAD else ""))]


def _header_checks(draft: Mapping, header: Mapping, add, explained: frozenset = frozenset(),
                   width_reported: bool = False) -> None:
    """``lm_head_shape_mismatch``, ``d2t_missing``, ``lm_head_not_loaded`` from the checkpoint's tensors.

    ``explained``: head tensors (:func:`_head_tensor` names) whose absence an error already reported
    accounts for (a nested dict, a missing shard): ``d2t`` there is no ``d2t_missing``.
    ``width_reported``: ``fc_out_mismatch`` was raised; where lm_head is as wide as fc's rows, it already
    says the checkpoint's width differs from the config's ``hidden_size``: lm_head's columns are not
    reported again."""
    lm_head = header.get("lm_head.weight")
    if not isinstance(lm_head, list):
        return
    vocab, dvocab, hidden = draft.get("vocab_size"), draft.get("draft_vocab_size"), draft.get("hidden_size")
    rows = dvocab if _is_int(dvocab) else vocab
    fc = header.get("fc.weight")
    same_width = width_reported and len(lm_head) == 2 and isinstance(fc, list) and fc[:1] == lm_head[1:]
    want = [rows, lm_head[1] if same_width else hidden]
    if _is_int(rows) and _is_int(hidden) and list(lm_head) != want:
        add("lm_head_shape_mismatch", f"lm_head.weight {list(lm_head)} != [{rows}, {hidden}] "
                                      f"([draft_vocab_size or vocab_size, hidden_size])")
    # a d2t stored as module.d2t and the like is "d2t" here (both heads load it); one stored under a name
    # only LlamaForCausalLMEagle3 loads as d2t (any name containing "d2t") counts but for the MLA head
    llama_d2t = bool(header.get(D2T_LLAMA_ONLY)) and _eagle3_arch(draft) != _MLA_HEAD
    if _is_int(dvocab) and _is_int(vocab) and dvocab < vocab and "d2t" not in header and "d2t" not in explained \
            and not llama_d2t:
        add("d2t_missing", f"draft_vocab_size {dvocab} < vocab_size {vocab} but the checkpoint has no d2t "
                           f"tensor to map draft tokens to target tokens")
    # both 0.5.23 heads load lm_head.weight only: model.lm_head.weight becomes model.model.lm_head.weight,
    # which they skip (test/test_mla_head_sglang.py). Harmless where the head takes the target's lm_head
    # (no draft_vocab_size) or ties it to its embeddings
    if stored_name(header, "lm_head.weight") != "lm_head.weight" and is_eagle3_head(draft) and _is_int(dvocab) \
            and not draft.get("tie_word_embeddings"):   # SGLang ties on any truthy value
        add("lm_head_not_loaded", f"the draft checkpoint stores its lm_head only as model.lm_head.weight, a name "
                                  f"SGLang {STOCK_VERSION}'s EAGLE-3 heads skip (they load lm_head.weight): with "
                                  f"draft_vocab_size {dvocab} and untied embeddings its lm_head stays unloaded "
                                  f"(uninitialised); save it as lm_head.weight")


def fc_out_problems(draft: Mapping, header: Mapping, fc_used: bool) -> list[Problem]:
    """``fc_out_mismatch``: ``fc.weight``'s rows (its out_features) differ from the draft config's
    ``hidden_size``, the width SGLang 0.5.23 builds fc to project to.

    * ``LlamaForCausalLMEagle3``: fc is a ``torch.nn.Linear`` loaded by SGLang's default weight loader,
      which asserts the shapes match: the launch fails at load ("Attempted to load weight ... into
      parameter ..."), whether or not fc is applied. ``model.fc.weight`` loads the same way.
    * ``Eagle3DeepseekV2ForCausalLM``: fc is a ``ColumnParallelLinear`` whose loader narrows the stored
      rows to its own: with more rows it keeps the first ``hidden_size`` of them without a word (an
      error where fc is applied, ``fc_used``); with fewer the GPU load fails (``narrow``: "start (0) +
      length exceeds dimension size"; SGLang's CPU branch zero-fills the missing rows instead). Not for
      ``model.fc.weight``, which this head skips (``fc_width_mismatch``).

    Where ``lm_head.weight`` is stored as wide as fc's rows, the message says the checkpoint was trained
    at that width (the config's ``hidden_size`` is what is wrong). test/test_wiring_gaps.py loads such an
    fc into both classes on the CPU.

    Returns:
        Zero or one :class:`Problem`.
    """
    fc, hidden = header.get("fc.weight"), draft.get("hidden_size")
    if not (isinstance(fc, list) and len(fc) == 2 and _is_int(hidden) and fc[0] != hidden):
        return []
    arch, name, rows = _eagle3_arch(draft), stored_name(header, "fc.weight"), fc[0]
    if arch == _LLAMA_HEAD:
        what = (f"its loader asserts the shapes match and the launch fails at load (\"Attempted to load weight "
                f"(torch.Size([{rows}, {fc[1]}])) into parameter (torch.Size([{hidden}, {fc[1]}]))\")")
    elif arch == _MLA_HEAD and name == "fc.weight" and (rows < hidden or fc_used):
        what = (f"its loader narrows the stored rows to {hidden}: " +
                (f"it keeps the first {hidden} of the {rows} rows without a word, so fc projects the aux states "
                 f"onto the wrong features and the draft's proposals are noise" if rows > hidden else
                 f"with only {rows} rows the load fails on the GPU (\"start (0) + length ({hidden}) exceeds "
                 f"dimension size ({rows})\")"))
    else:
        return []
    lm_head = header.get("lm_head.weight")
    if isinstance(lm_head, list) and len(lm_head) == 2 and lm_head[1] == rows:
        fix = (f"lm_head.weight {list(lm_head)} is {rows} wide too, so the checkpoint was trained at hidden_size "
               f"{rows}: set \"hidden_size\": {rows} in the draft's config.json")
    else:
        fix = (f"set \"hidden_size\": {rows} in the draft's config.json if the rest of the checkpoint is {rows} "
               f"wide, else store the fc this draft was trained with ([{hidden}, {fc[1]}])")
    return [_problem("fc_out_mismatch",
                     f"{name} {list(fc)} has {rows} rows (fc's out_features) but the draft's hidden_size is "
                     f"{hidden}: SGLang {STOCK_VERSION}'s {arch} builds fc to project to {hidden} features and "
                     f"{what}. Fix: {fix}")]


def _head_tensor(name: str) -> str | None:
    """The head tensor a checkpoint name stands for, with or without its ``model.`` prefix: ``fc``
    (``fc.weight``, a quantised fc's tensors), ``d2t``, ``lm_head``; None for any other."""
    if name == "d2t" or name.endswith(".d2t"):   # model.d2t, module.d2t: both heads load these as d2t
        return "d2t"
    name = name[len(PREFIXED):] if name.startswith(PREFIXED) else name
    if name == "fc.weight" or FC_QUANTIZED.fullmatch(name):
        return "fc"
    return "lm_head" if name == "lm_head.weight" else None


def explained_absences(header: Mapping, draft: Mapping | None, fc_used: bool) -> frozenset:
    """The head tensors (:func:`_head_tensor` names) an error about the checkpoint already accounts for
    not being loaded: the fc of a wrapped save (``weight_not_loaded``: the wrapper is read off the fc),
    and, of those the head would load (:func:`_used_by_head`), the ones a nested dict holds
    (``checkpoint_nested``; a wrapper prefix inside it aside) and the ones a missing shard holds
    (``weight_not_loaded``). A check that finds one of these missing reports nothing more: one cause,
    one error. A tensor the head would skip however it was stored (``model.fc.weight`` in the MLA head)
    is not accounted for: its own error stands."""
    def unwrapped(name: str) -> str:
        while name.startswith(WRAPPER_PREFIXES):
            name = name[len(next(p for p in WRAPPER_PREFIXES if name.startswith(p))):]
        return name

    names = [unwrapped(n) for n in header.get(CHECKPOINT_NESTED_TENSORS) or []]
    for missed in (header.get(CHECKPOINT_MISSING_SHARDS) or {}).values():
        names += missed
    if isinstance(draft, Mapping):
        names = [n for n in names if _used_by_head(draft, n, fc_used)]
    found = {_head_tensor(n) for n in names} - {None}
    if header.get(WRAPPER_PREFIXED):
        found.add("fc")
    return frozenset(found)


_LEGACY_NAMES = (("midlayer.", "layers.0."), ("aux_norm_low.", "fc_norm.0."), ("aux_norm_mid.", "fc_norm.1."),
                 ("aux_norm_high.", "fc_norm.2."))


def _used_by_head(draft: Mapping, name: str, fc_used: bool) -> bool:
    """Whether SGLang 0.5.23's head loads the checkpoint tensor ``name`` into a parameter it uses, so
    that not loading it leaves the draft wrong: fc (where applied), its per-state norms (``fc_norm`` on)
    and ``input_norm`` (``norm_before_fc``, Llama head), the final norm, the decoder layer, lm_head (a
    draft vocabulary of its own, untied), d2t (a draft vocabulary smaller than the target's) and the
    embedding (where the head keeps its own). A name the head skips anyway (``model.X`` in the MLA head,
    a wrapper-prefixed one, ``t2d``, a rotary buffer) is not used."""
    arch = _eagle3_arch(draft)
    vocab, dvocab = draft.get("vocab_size"), draft.get("draft_vocab_size")
    if name == "d2t" or name.endswith(".d2t"):   # both heads load any name ending so, module.d2t included
        return _is_int(dvocab) and _is_int(vocab) and dvocab != vocab
    if name.startswith(WRAPPER_PREFIXES):
        return False
    if name.startswith(PREFIXED):
        if arch == _MLA_HEAD:
            return False   # it adds model. itself and skips model.X (model.d2t aside, above)
        name = name[len(PREFIXED):]
    for legacy, new in _LEGACY_NAMES:
        if name.startswith(legacy):
            name = new + name[len(legacy):]
    module = name.rsplit(".", 1)[0]
    if module == "fc":
        return fc_used
    if module.startswith("fc_norm."):
        return fc_used and bool(draft.get("fc_norm") or draft.get("use_aux_norm"))
    if module == "input_norm":
        return fc_used and arch == _LLAMA_HEAD and _norm_before_fc(draft)
    if module == "norm":
        return True
    if module == "embed_tokens":
        return _mla_own_embedding(draft)
    if module == "lm_head":
        return _is_int(dvocab) and not draft.get("tie_word_embeddings")
    if name.startswith("layers.0."):
        if arch == _MLA_HEAD:
            return module in {"layers.0." + m for m in MLA_LAYER_MODULES}
        return not name.endswith("inv_freq")
    return False


def missing_shard_problems(draft: Mapping, header: Mapping, fc_used: bool) -> list[Problem]:
    """``weight_not_loaded``: the shards ``pytorch_model.bin.index.json`` lists that are not in the draft
    folder (the :data:`~sglang_eagle_cycle.safetensors_header.CHECKPOINT_MISSING_SHARDS` marker) hold
    tensors the head uses (:func:`_used_by_head`). SGLang 0.5.23 never reads that index: it loads the
    ``*.bin`` files there are and leaves these parameters as built (uninitialised on a GPU), silently.
    A missing shard holding only tensors the head does not use (``t2d``; the embedding it takes from the
    target) is not reported.

    Returns:
        Zero or one :class:`Problem` naming the shards and the tensors.
    """
    missing = header.get(CHECKPOINT_MISSING_SHARDS) or {}
    if not is_eagle3_head(draft) or not isinstance(draft.get("architectures"), list):
        return []
    used = {shard: [n for n in names if _used_by_head(draft, n, fc_used)] for shard, names in missing.items()}
    used = {shard: names for shard, names in used.items() if names}
    if not used:
        return []
    shards = sorted(used)
    names = [n for shard in shards for n in used[shard]]
    one = len(shards) == 1
    return [_problem("weight_not_loaded",
                     f"the draft's {PT_INDEX_FILE} places {_names(names)} in {_names(shards)}, which "
                     f"{'is' if one else 'are'} not in the draft folder (an incomplete download?): SGLang "
                     f"{STOCK_VERSION} never reads that index, loads the *.bin files there are and leaves "
                     f"these tensors unloaded (uninitialised) without an error, so the draft's proposals are "
                     f"noise; download the missing shard{'' if one else 's'}")]


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


def refuse_swapped(target_arg: str, draft_arg: str, target_cfg: Mapping, draft_cfg: Mapping, command: str,
                   target_path: Path | None = None, draft_path: Path | None = None) -> None:
    """No target is an EAGLE-3 head: TARGET and DRAFT given the other way round (or the draft twice),
    and DRAFT is not TARGET's config: the same file (``target_path`` and ``draft_path``, the
    ``config.json`` files found, where given) or the same content.

    Raises:
        UsageError: one line naming the head given as TARGET, and saying "swap the two" when DRAFT
            is no head (``command``: ``wiring`` or ``probe``, for the usage line); or one saying DRAFT
            is the same config as TARGET and which folder to give instead.
    """
    same_file = target_path is not None and draft_path is not None and _same_file(target_path, draft_path)
    same = ""   # how DRAFT is TARGET's config, where it is
    if same_file:
        same = f"({Path(os.path.realpath(target_path))})"
    elif target_cfg == draft_cfg:
        files = f": {draft_path} and {target_path} hold the same JSON" if target_path and draft_path else ""
        same = f"(identical content{files})"
    if is_eagle3_head(target_cfg):
        if same:
            tail = f", and DRAFT {draft_arg} is the same config {same}: give the target model's folder as TARGET"
        elif not is_eagle3_head(draft_cfg):
            tail = f", and DRAFT {draft_arg} is not one: swap the two"
        else:
            tail = ""
        arch = ", ".join(map(str, target_cfg["architectures"]))
        raise UsageError(f"TARGET {target_arg} is an EAGLE-3 draft head ({arch}){tail} "
                         f"(usage: eagle-cycle {command} TARGET DRAFT)")
    marks = _draft_marks(target_cfg)
    if marks and not same and not _draft_marks(draft_cfg) and not is_eagle3_head(draft_cfg) \
            and _layers(draft_cfg) > _layers(target_cfg):
        # a head whose architectures name the target's class (case 12 of the shared configs: the
        # swapped pair had been checked with the 1-layer head as the target, exit 1, "declare the
        # draft's ids"; helper 99)
        arch = ", ".join(map(str, target_cfg.get("architectures") or ["?"]))
        raise UsageError(f"TARGET {target_arg} looks like a draft head ({', '.join(marks)}; its architectures say "
                         f"{arch}), and DRAFT {draft_arg} like a target ({_layers(draft_cfg)} layers): swap the two "
                         f"(usage: eagle-cycle {command} TARGET DRAFT)")
    if same:
        # the report would check the target against itself and tell the user to edit "the draft's
        # config.json", the target's own
        shown = same if same_file else f"{target_arg} {same}"
        raise UsageError(f"DRAFT {draft_arg} is the same config as TARGET {shown}: give the draft head's folder "
                         f"(usage: eagle-cycle {command} TARGET DRAFT)")


def _layers(cfg: Mapping) -> int:
    """``num_hidden_layers`` of a config as :func:`config.find_field` finds it (text wrappers first), 0
    where there is no integer one."""
    found = find_field(cfg, "num_hidden_layers")
    return found[0] if found else 0


def _draft_marks(cfg: Mapping) -> list[str]:
    """What marks ``cfg`` as an EAGLE-3 draft head whatever its ``architectures`` say: a
    ``draft_vocab_size`` or an ``eagle_config``, which no target config carries, with one decoder
    layer or two."""
    if not isinstance(cfg, Mapping) or not 1 <= _layers(cfg) <= 2:
        return []
    marks = [k for k in ("draft_vocab_size", "eagle_config") if k in cfg]
    return marks + [f"{_layers(cfg)} layer{'s' if _layers(cfg) > 1 else ''}"] if marks else []


def _same_file(a: Path, b: Path) -> bool:
    """True when ``a`` and ``b`` are one file (by resolved path, or by device and inode: a hard link)."""
    try:
        return os.path.realpath(a) == os.path.realpath(b) or os.path.samefile(a, b)
    except OSError:
        return False


def _eagle3_arch(draft_cfg: Mapping) -> str:
    archs = draft_cfg.get("architectures") or []
    return next((a for a in archs if isinstance(a, str) and "eagle3" in a.lower()), "?")


def _is_mla_head(draft_cfg: Mapping | None) -> bool:
    """True when the EAGLE-3 class the draft's ``architectures`` list first is :data:`_MLA_HEAD`."""
    archs = draft_cfg.get("architectures") if isinstance(draft_cfg, Mapping) else None
    return isinstance(archs, list) and _eagle3_arch(draft_cfg) == _MLA_HEAD


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
      hidden size (``target_hidden_size``, else the draft's ``target_hidden_size``/``hidden_size``). A
      checkpoint read without any fc tensor (no ``fc.weight``, nor a quantised one) gives the warning
      where that width equals the draft's ``hidden_size``: SGLang then never applies its fc.

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
    width = target_hidden_size or _draft_target_hidden(draft_cfg)
    if isinstance(fc_shape, list) and len(fc_shape) == 2:
        fc_in, where = fc_shape[1], f"fc.weight {list(fc_shape)}"
    elif header and "fc.quantized" not in header and width is not None and width == draft_cfg.get("hidden_size"):
        # the checkpoint was read and stores no fc at all (ModelOpt builds none for such a head): nothing
        # says the draft was trained on aux states, and SGLang never applies the fc it builds (the
        # target's last hidden state is as wide as the draft's embeddings), so it loads and runs
        fc_in, where = None, "no fc stored"
    else:
        fc_in, where = _built_fc_in(draft_cfg), "as SGLang builds fc"
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


#: the SGLang variable that lets a draft serve a context longer than its own
ENV_LONGER_CONTEXT = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"


def context_note(draft_cfg: Mapping, context_length: int | None, target_context: int | None,
                 env: Mapping | None = None) -> Problem | None:
    """``draft_context_shorter`` (level info) when the draft's context (tokens, as SGLang 0.5.23
    derives it: :func:`~.config.derived_context_length`) is below the context it will serve:
    ``context_length`` (the server's ``--context-length``) when given, else ``target_context`` (the
    target's derived context). SGLang hands the draft that context and, unless ``env`` sets
    ``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN``, refuses to start (a ``ValueError`` building the
    draft's model config); with it set, it serves past the draft's positions and acceptance may
    fall there (SGLang issue #6783). The message says which. None otherwise, or when either number
    is unknown. The level stays info: SGLang's own refusal names the variable."""
    from .config import derived_context_length

    derived = derived_context_length(draft_cfg)
    if context_length is not None:
        serve, where = context_length, "--context-length"
    else:
        serve, where = target_context, "the target's context"
    if derived is None or not _is_int(serve) or derived[0] >= serve:
        return None
    draft_ctx, how = derived
    head = (f"the draft's context is {draft_ctx} tokens ({how}) but it will serve contexts up to {serve} "
            f"tokens ({where}): ")
    raw = str((env or {}).get(ENV_LONGER_CONTEXT, "")).strip().lower()
    if raw in ("1", "true", "yes", "on"):
        tail = (f"{ENV_LONGER_CONTEXT} is set, so SGLang {STOCK_VERSION} serves it; past {draft_ctx} tokens "
                f"its acceptance may fall (SGLang issue #6783)")
    else:
        tail = (f"stock SGLang {STOCK_VERSION} refuses to start the pair (ValueError: the target's "
                f"context_length {serve} is greater than the draft's derived {draft_ctx}) unless "
                f"{ENV_LONGER_CONTEXT}=1 is set or --context-length is at most {draft_ctx}; with the "
                f"variable set, past {draft_ctx} tokens its acceptance may fall (SGLang issue #6783)")
    return _problem("draft_context_shorter", head + tail)
