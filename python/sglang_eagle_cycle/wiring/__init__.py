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
* ``SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING=1`` accepts layer-output id -1 (position 0);
* ``SGLANG_EAGLE_CYCLE_WIRING_STRICT=0`` (server only): wiring errors are logged instead of stopping
  the launch.

Besides the ids, the check covers the speculative algorithm (an EAGLE-3 head needs ``EAGLE3``;
``EAGLE``/``NEXTN`` capture nothing), ``eagle_config.use_aux_hidden_state: false``, misspelt id keys,
a draft trained on a shorter context than it will serve (an ``info`` note, never a warning) and the
EAGLE 3.1 / gpt-oss head flags (:func:`draft_variant`).

Layout (one job per file):

* :mod:`.config`: reading ``config.json`` files, their fields and the declared ids; env names;
* :mod:`.stock`: what stock SGLang 0.5.23 captures, per model family;
* :mod:`.report`: :class:`Problem`, the level table, :class:`WiringReport`;
* :mod:`.checks`: the individual checks of a draft against its target and the server settings;
* :mod:`.resolve`: the resolution contract, :func:`check_pair` and :func:`resolve_at_setter`;
* :mod:`.render`: the text report of ``eagle-cycle wiring``;
* :mod:`.probe`: ``eagle-cycle probe``, which asks the draft's weights (torch and transformers;
  imported only when used, never by the server); :mod:`.target_layers` refuses a probe target whose
  checkpoint holds other decoder layers than its config declares.

Every name is re-exported here, so ``from sglang_eagle_cycle.wiring import check_pair`` keeps working.
"""

from __future__ import annotations

from .config import (  # noqa: F401
    ENV_ALLOW_EMBEDDING,
    ENV_CONVENTION,
    ENV_IDS,
    ENV_STRICT,
    IDS_KEY,
    MAX_NUM_LAYERS,
    _REPO_ID,
    _TEXT_WRAPPERS,
    _all_ints,
    _cached_config,
    _checked_target_field,
    _declared,
    _is_int,
    _nested_ids,
    _require,
    _short,
    _text_config,
    field_values,
    find_field,
    find_hidden_size,
    find_num_layers,
    find_vocab_size,
    hf_cache_dir,
    load_config,
    locate_config,
    refuse_malformed_ints,
    refuse_unusable_pair,
)
from .stock import (  # noqa: F401
    FamilyRule,
    RULES_BY_ARCHITECTURE,
    RULES_BY_MODULE,
    SHIFT_ALWAYS,
    SHIFT_IF_FIRST_IS_1,
    SHIFT_NONE,
    SHIFT_UNLESS_MAX_IS_N,
    STOCK_VERSION,
    _A,
    _RULES_BY_MODEL_TYPE,
    _RULES_BY_MODULE,
    _stock_captures,
    family_rule,
    stock_layers_to_capture,
    target_rule,
)
from .report import (  # noqa: F401
    CHECK_LEVELS,
    ERROR,
    INFO,
    Problem,
    WARNING,
    WiringReport,
    _JSON_KEYS,
    _LEVEL_ORDER,
    _SOURCE_WORDS,
    _fmt,
    _problem,
    _same_capture,
)
from .checks import (  # noqa: F401
    ALGORITHMS,
    EAGLE3_DRAFT_ARCHITECTURES,
    MISSPELT_CUTOFF,
    _CAPTURE_OFF_CODES,
    _ID_KEYS_MEANT,
    _Inputs,
    _LLAMA_HEAD,
    _MLA_HEAD,
    _built_fc_in,
    _close,
    _draft_checks,
    _draft_target_hidden,
    _eagle3_arch,
    _eagle_config,
    _header_checks,
    _norm_before_fc,
    _tensor_dropped,
    aux_capture_enabled,
    capture_problems,
    context_note,
    draft_variant,
    fc_scale_problems,
    is_eagle3_head,
    misspelt_key_problems,
    normalize_algorithm,
    variant_problems,
)
from .resolve import (  # noqa: F401
    _allow_embedding,
    _convention,
    _resolve,
    _stock_hint,
    check_pair,
    contract_positions,
    parse_env_ids,
    resolve_at_setter,
)
from .render import (  # noqa: F401
    render_report,
    stock_fix_text,
)
