"""The resolution contract (README, "Aux-layer wiring"): from the draft's ids, the environment
overrides and the target's layer count to the capture positions this plugin uses, with every check
run and stock SGLang's reading beside it. Entry points: :func:`check_pair` (the CLI, the probe) and
:func:`resolve_at_setter` (the server hook, at ``set_eagle3_layers_to_capture``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import replace

from ..errors import UsageError
from ..safetensors_header import CHECKPOINT_NESTED, CHECKPOINT_NESTED_TENSORS, WRAPPER_PREFIXED, stored_name
from .checks import _CAPTURE_OFF_CODES, _LLAMA_HEAD, _MLA_HEAD, _Inputs, _eagle3_arch, _is_mla_head, _draft_checks, _draft_target_hidden, _header_checks, capture_problems, context_note, draft_variant, explained_absences, fc_out_problems, fc_scale_problems, is_eagle3_head, misspelt_key_problems, missing_shard_problems, mla_prefixed_problems, normalize_algorithm, variant_problems
from .config import ENV_ALLOW_EMBEDDING, ENV_CONVENTION, ENV_IDS, IDS_KEY, MAX_NUM_LAYERS, _all_ints, _checked_target_field, _declared, _is_int, _nested_ids, _short, derived_context_length, find_field, find_num_layers
from .report import CHECK_LEVELS, Problem, WiringReport, _LEVEL_ORDER, _SOURCE_WORDS, _fmt, _same_capture, stock_capture_words
from .stock import FamilyRule, STOCK_VERSION, _A, _stock_captures, family_rule, stock_layers_to_capture, target_rule


def _repeated(values: list) -> list:
    """The values that occur more than once in ``values``, sorted (one pass: a list of 30,000 ids
    took 7.4 s with ``list.count``)."""
    seen, twice = set(), set()
    for v in values:
        (twice if v in seen else seen).add(v)
    return sorted(twice)


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


def _resave_hint(entry: str) -> str:
    """``ckpt = torch.load("F"); torch.save(ckpt['key'], "F")`` for a ``"F['key']"`` marker entry."""
    file, _, key = entry.partition("[")
    return f"ckpt = torch.load({file!r}); torch.save(ckpt[{key.rstrip(']')}], {file!r})"


def _resolve(inp: _Inputs) -> WiringReport:
    n, rule, env = inp.num_layers, inp.rule, inp.env
    if not _is_int(n) or not 1 <= n <= MAX_NUM_LAYERS:
        raise UsageError(f"num_hidden_layers must be an integer in [1, {MAX_NUM_LAYERS}], got {_short(n)}")
    convention = _convention(env)
    allow_embedding = _allow_embedding(env)
    problems: list[Problem] = []

    def add(code: str, message: str) -> None:
        problems.append(Problem(CHECK_LEVELS[code], code, message))

    wrapped = (inp.header or {}).get(WRAPPER_PREFIXED)
    if wrapped:
        add("weight_not_loaded", f"the draft checkpoint stores the head's tensors under the prefix "
                                 f"{' / '.join(map(repr, wrapped))} (a DistributedDataParallel or torch.compile "
                                 f"save: {wrapped[0]}fc.weight and the like): SGLang {STOCK_VERSION} strips no "
                                 f"such prefix, matches no parameter to these names and skips them, so the draft's "
                                 f"weights, its fc among them, stay unloaded (uninitialised); save the unwrapped "
                                 f"model's state_dict, or the tensors with the prefix removed")
    as_read = inp.header   # with every marker, for the absences these errors account for
    nested_files = (inp.header or {}).get(CHECKPOINT_NESTED)
    if nested_files:
        add("checkpoint_nested", f"the draft checkpoint keeps its tensors in a nested dict ({', '.join(nested_files)}): "
                                 f"SGLang {STOCK_VERSION} loads top-level name -> tensor entries only, skips these "
                                 f"and leaves the draft's weights unloaded (uninitialised), so the draft cannot "
                                 f"work; save the inner dict: {_resave_hint(nested_files[0])}")
        # what else the reader found is not what SGLang loads from these files: the checks that read
        # tensors look at the rest only as far as a draft without a readable checkpoint
        rest = {k: v for k, v in inp.header.items() if k not in (CHECKPOINT_NESTED, CHECKPOINT_NESTED_TENSORS)}
        inp = replace(inp, header=rest or None)

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

    def check_positions(pos: list[int]) -> None:
        """Embedding and final-layer checks of in-range, distinct capture positions."""
        if 0 in pos and not allow_embedding:   # only id -1 of the layer-output reading gets here
            add("embedding_capture", f"id -1 captures the embedding output (position 0), not a decoder "
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
        bad = [p for p in positions if not 1 <= p <= n]
        dupes = _repeated(positions)
        if bad:
            add("id_out_of_range", f"default positions {_fmt(bad)} of {_fmt(positions)} (from [2, N//2, N-3]) "
                                   f"outside [1, {n}] for a {n}-layer target; declare the draft's ids")
        if dupes:
            add("duplicate_ids", f"default positions {_fmt(positions)} (from [2, N//2, N-3]) repeat {_fmt(dupes)} "
                                 f"for a {n}-layer target; declare the draft's ids")
        if bad or dupes:
            positions = None
        else:
            check_positions(positions)
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
            # DESIGN section 1: positions lie in [1, N]; position 0 (the embedding output) is reachable only
            # as layer-output id -1, the one form SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING accepts
            bad = [p for p in ids if not 1 <= p <= n]
            allowed = f"[1, {n}]" + (" (position 0 is the embedding output: declare it as layer-output id -1)"
                                     if 0 in bad else "")
        else:
            bad = [i for i in ids if not -1 <= i <= n - 1]
            allowed = f"[-1, {n - 1}]"
        dupes = _repeated(ids)
        if bad:
            words = "positions" if as_positions else "layer-output ids"
            add("id_out_of_range", f"{words} {_fmt(bad)} outside {allowed} for a {n}-layer target "
                                   f"(ids {_fmt(ids)}, {_SOURCE_WORDS[source]})")
        if dupes:
            add("duplicate_ids", f"ids {_fmt(dupes)} repeated in {_fmt(ids)}")
        if bad or dupes:
            positions = None
        else:
            check_positions(positions)
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
    if isinstance(fc_shape, list) and len(fc_shape) != 2:
        add("fc_width_mismatch", f"fc.weight {list(fc_shape)} is not a matrix [out_features, in_features]: "
                                 f"the draft's fc cannot load it")
    width = inp.target_hidden_size or _draft_target_hidden(draft_cfg)
    # aux states are captured and go through the draft's fc (SGLang skips fc when they are already as
    # wide as the draft's embeddings)
    fc_used = n_aux is not None and not (width and draft_cfg is not None
                                         and n_aux * width == draft_cfg.get("hidden_size"))
    # head tensors whose absence an error above or below already accounts for (a wrapper, a nested dict,
    # a missing shard): one cause, one error
    explained = explained_absences(as_read or {}, draft_cfg, fc_used)
    # an fc stored quantised ("fc.quantized": fc.qweight, fc.weight_scale, ...) may load in the head whose
    # fc is quantisable (the Kimi-K2.5 one, given a quantisation config): not checked there, so that it
    # never stops a launch that would work. LlamaForCausalLMEagle3's fc is a plain torch Linear that loads
    # fc.weight / model.fc.weight alone (test/test_mla_head_sglang.py)
    if inp.header and fc_shape is None and fc_used and is_eagle3_head(draft_cfg) and "fc" not in explained:
        if "fc.quantized" not in header:
            # the checkpoint was read (other draft tensors, or the checkpoint.read marker), but SGLang's draft
            # loads its fc from fc.weight / model.fc.weight only: without one, fc stays as built
            # (uninitialised), silently
            add("fc_width_mismatch", "the draft checkpoint has no fc.weight (nor model.fc.weight): SGLang builds "
                                     "the draft's fc and leaves it unloaded (uninitialised), so the draft cannot "
                                     "use its aux states")
        elif _eagle3_arch(draft_cfg) == _LLAMA_HEAD:
            add("fc_width_mismatch", f"the draft checkpoint stores its fc only quantised (fc.qweight, "
                                     f"fc.weight_scale or the like, no fc.weight): SGLang {STOCK_VERSION}'s "
                                     f"{_LLAMA_HEAD} builds fc as a plain linear layer that loads fc.weight (or "
                                     f"model.fc.weight) alone, skips these and leaves fc unloaded "
                                     f"(uninitialised); store fc unquantised as fc.weight")
    if fc_shape is not None and stored_name(header, "fc.weight") != "fc.weight" and fc_used and _is_mla_head(draft_cfg):
        # Eagle3DeepseekV2ForCausalLM maps each checkpoint name X to model.X, so model.fc.weight becomes
        # model.model.fc.weight, which it skips with a warning; LlamaForCausalLMEagle3 takes both spellings
        add("fc_width_mismatch", f"the draft checkpoint stores its fc as model.fc.weight, which SGLang "
                                 f"{STOCK_VERSION}'s {_MLA_HEAD} skips (it loads fc.weight, adding the model. "
                                 f"prefix itself): its fc stays unloaded (uninitialised); save the draft's "
                                 f"tensors without the model. prefix")
    width_reported = False
    if draft_cfg is not None:
        # shards a pytorch_model.bin.index.json lists that are not there: SGLang never reads the index
        problems.extend(missing_shard_problems(draft_cfg, header, fc_used=fc_used))
        # fc's rows against the draft's hidden_size
        out = fc_out_problems(draft_cfg, header, fc_used=fc_used)
        problems.extend(out)
        width_reported = bool(out)
        # the MLA head's other model.-prefixed tensors (a quantised fc, norms, layer)
        problems.extend(mla_prefixed_problems(draft_cfg, header, fc_used=fc_used))
        # an fc.weight stored quantised (fp8) with its scale, where SGLang's fc is a plain float layer
        problems.extend(fc_scale_problems(draft_cfg, header, fc_used=fc_used))
    if fc_in is not None and width and n_aux is not None and n_aux * width != fc_in:
        add("fc_width_mismatch", f"{n_aux} aux hidden states x {width} = {n_aux * width} != fc.weight "
                                 f"in_features {fc_in} (fc.weight {list(fc_shape)})")
    if draft_cfg is not None:
        _header_checks(draft_cfg, header, add, explained, width_reported)

    if draft_cfg is not None:
        problems.extend(misspelt_key_problems(draft_cfg))
        problems.extend(variant_problems(draft_cfg, header))
        note = context_note(draft_cfg, inp.context_length, inp.target_max_positions, inp.env)
        if note is not None:
            problems.append(note)

    if positions is not None and rule is not None and not _same_capture(positions, stock or []) \
            and not capture_off:
        if not stock_ids_valid:
            stock_words = f"is handed non-integer ids {_fmt(inp.stock_ids)} (its capture is not predicted)"
        elif stock is None:
            stock_words = f"would fail at start-up (IndexError) with ids {_fmt(inp.stock_ids)}"
        else:
            stock_words = stock_capture_words(rule.module, stock, n)
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
    max_pos = derived_context_length(target_cfg)
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
