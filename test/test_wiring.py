"""The pure wiring resolver (DESIGN §1), the safetensors header reader and config lookup."""

from __future__ import annotations

import copy
import json
import os
import struct
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from sglang_fork import run_python
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_eagle_cycle.errors import UsageError
from sglang_eagle_cycle.metrics import parse_wiring_line
from sglang_eagle_cycle.patches.wiring import _resolve_or_config_error
from sglang_eagle_cycle.safetensors_header import read_draft_shapes, read_header, write_header_only
from sglang_eagle_cycle.wiring import (
    CHECK_LEVELS,
    RULES_BY_MODULE,
    SHIFT_ALWAYS,
    SHIFT_IF_FIRST_IS_1,
    check_pair,
    family_rule,
    find_hidden_size,
    find_num_layers,
    find_vocab_size,
    locate_config,
    parse_env_ids,
    resolve_at_setter,
    stock_fix_text,
    stock_layers_to_capture,
)

HERE = Path(__file__).resolve().parent

LLAMA_8B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 32,
            "hidden_size": 4096, "vocab_size": 128256}
GPT_OSS = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "num_hidden_layers": 36,
           "hidden_size": 2880, "vocab_size": 201088}
DRAFT = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "num_hidden_layers": 1,
         "hidden_size": 4096, "vocab_size": 128256, "draft_vocab_size": 32000,
         "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 15, 28]}}
FC_OK = {"fc.weight": [4096, 12288]}


def codes(report) -> tuple[set[str], set[str]]:
    return {p.code for p in report.errors}, {p.code for p in report.warnings}


def run(target=LLAMA_8B, draft_over=None, draft_del=(), header=FC_OK, env=None, **kwargs):
    draft = copy.deepcopy(DRAFT)
    for key in draft_del:
        draft.pop(key, None)
    draft.update(draft_over or {})
    return check_pair(target, draft, header=header, env=env or {}, **kwargs)


def ids_cfg(ids):
    return {"eagle_config": {"eagle_aux_hidden_state_layer_ids": ids}}


# code -> (kwargs that trigger it, kwargs of a close variant that does not)
CODE_CASES = {
    "non_integer_ids": (dict(draft_over=ids_cfg(["1", "15", "28"])), dict(draft_over=ids_cfg([1, 15, 28]))),
    "duplicate_ids": (dict(draft_over=ids_cfg([1, 15, 15])), dict(draft_over=ids_cfg([1, 15, 16]))),
    "id_out_of_range": (dict(draft_over=ids_cfg([1, 15, 40])), dict(draft_over=ids_cfg([1, 15, 30]))),
    "embedding_capture": (dict(draft_over=ids_cfg([-1, 15, 28])),
                          dict(draft_over=ids_cfg([-1, 15, 28]), env={"SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING": "1"})),
    "final_layer_capture_unsupported": (dict(draft_over=ids_cfg([1, 15, 31])),
                                        dict(target=GPT_OSS, draft_over={**ids_cfg([1, 15, 35]), "hidden_size": 2880,
                                                                         "vocab_size": 201088},
                                             header={"fc.weight": [2880, 8640]})),
    "fc_width_mismatch": (dict(header={"fc.weight": [4096, 16384]}), dict(header={"fc.weight": [4096, 12288]})),
    "fc_out_mismatch": (dict(header={"fc.weight": [2048, 12288]}), dict(header={"fc.weight": [4096, 12288]})),
    "draft_fc_built_mismatch": (dict(env={"SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS": "1,8,15,28"}, header=None),
                                dict(env={"SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS": "1,8,15,28"}, header=None,
                                     draft_over={"num_aux_hidden_states": 4})),
    "not_eagle3_architecture": (dict(draft_over={"architectures": ["LlamaForCausalLM"]}),
                                dict(draft_over={"architectures": ["Eagle3DeepseekV2ForCausalLM"]})),
    "target_hidden_mismatch": (dict(draft_over={"target_hidden_size": 7168}),
                               dict(draft_over={"target_hidden_size": 4096})),
    "vocab_mismatch": (dict(draft_over={"vocab_size": 151936}), dict(draft_over={"vocab_size": 128256})),
    "lm_head_shape_mismatch": (dict(header={**FC_OK, "lm_head.weight": [32000, 2048], "d2t": [32000]}),
                               dict(header={**FC_OK, "lm_head.weight": [32000, 4096], "d2t": [32000]})),
    "lm_head_not_loaded": (dict(header={**FC_OK, "lm_head.weight": [32000, 4096], "model.lm_head.weight": [],
                                        "d2t": [32000]}),
                           dict(header={**FC_OK, "lm_head.weight": [32000, 4096], "model.lm_head.weight": [],
                                        "d2t": [32000]}, draft_over={"tie_word_embeddings": True})),
    "weight_not_loaded": (dict(header={**FC_OK, "model.norm.weight": []},
                               draft_over={"architectures": ["Eagle3DeepseekV2ForCausalLM"]}),
                          dict(header={**FC_OK, "model.norm.weight": []})),
    "fc_scale_dropped": (dict(header={**FC_OK, "fc.weight.dtype": "F8_E4M3", "fc.weight.scales": ["fc.weight_scale_inv"]}),
                         dict(header={**FC_OK, "fc.weight.dtype": "F8_E4M3"})),
    "checkpoint_nested": (dict(header={"checkpoint.nested": ["pytorch_model.bin['state_dict']"]}),
                          dict(header={**FC_OK})),
    "d2t_missing": (dict(header={**FC_OK, "lm_head.weight": [32000, 4096]}),
                    dict(header={**FC_OK, "lm_head.weight": [128256, 4096]}, draft_over={"draft_vocab_size": None})),
    "ids_missing_default_used": (dict(draft_del=("eagle_config",)), dict()),
    "ids_top_level": (dict(draft_del=("eagle_config",), draft_over={"eagle_aux_hidden_state_layer_ids": [1, 15, 28]}),
                      dict(draft_over={"eagle_aux_hidden_state_layer_ids": [1, 15, 28]})),
    "ids_conflict": (dict(draft_over={"eagle_aux_hidden_state_layer_ids": [2, 15, 28]}),
                     dict(draft_over={"eagle_aux_hidden_state_layer_ids": [1, 15, 28]})),
    "unsorted_ids": (dict(draft_over=ids_cfg([15, 1, 28])), dict(draft_over=ids_cfg([1, 15, 28]))),
    "algorithm_not_eagle3": (dict(algorithm="EAGLE"), dict(algorithm="EAGLE3")),
    "eagle_config_not_object": (dict(draft_over={"eagle_config": "[1, 15, 28]"}),
                                dict(draft_over={"eagle_config": ""})),
    "aux_capture_off_fc_mismatch": (
        dict(draft_over={"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 15, 28],
                                          "use_aux_hidden_state": False}}),
        dict(draft_over={"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 15, 28],
                                          "use_aux_hidden_state": True}})),
    "aux_capture_off": (
        dict(draft_over={"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 15, 28],
                                          "use_aux_hidden_state": False}}, header={"fc.weight": [4096, 4096]}),
        dict(draft_over={"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 15, 28]}},
             header={"fc.weight": [4096, 4096]})),
    "ids_key_misspelt": (dict(draft_over={"eagle_config": {"eagle_aux_hidden_states_layer_ids": [1, 15, 28]}}),
                         dict(draft_over={"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 15, 28]}})),
    "draft_flag_ignored": (dict(draft_over={"architectures": ["Eagle3DeepseekV2ForCausalLM"], "norm_before_fc": True}),
                           dict(draft_over={"architectures": ["LlamaForCausalLMEagle3"], "norm_before_fc": True})),
    "draft_context_shorter": (dict(target={**LLAMA_8B, "max_position_embeddings": 131072},
                                   draft_over={"max_position_embeddings": 2048}),
                              dict(target={**LLAMA_8B, "max_position_embeddings": 131072},
                                   draft_over={"max_position_embeddings": 131072})),
    "stock_differs": (dict(target={**LLAMA_8B, "architectures": ["DeepseekV3ForCausalLM"]},
                           draft_over=ids_cfg([2, 15, 28])),
                      dict(target={**LLAMA_8B, "architectures": ["DeepseekV3ForCausalLM"]},
                           draft_over=ids_cfg([1, 15, 28]))),
}


def test_code_table_covers_design():
    assert set(CODE_CASES) == set(CHECK_LEVELS)
    errors = {c for c, level in CHECK_LEVELS.items() if level == "error"}
    assert errors == {"non_integer_ids", "duplicate_ids", "id_out_of_range", "embedding_capture",
                      "final_layer_capture_unsupported", "fc_width_mismatch", "fc_out_mismatch",
                      "draft_fc_built_mismatch",
                      "not_eagle3_architecture", "target_hidden_mismatch", "vocab_mismatch",
                      "lm_head_shape_mismatch", "lm_head_not_loaded", "weight_not_loaded", "fc_scale_dropped",
                      "d2t_missing", "checkpoint_nested",
                      "algorithm_not_eagle3",
                      "aux_capture_off_fc_mismatch", "eagle_config_not_object"}
    assert {c for c, level in CHECK_LEVELS.items() if level == "info"} == {"draft_context_shorter"}


@pytest.mark.parametrize("code", sorted(CODE_CASES))
def test_each_code_triggered_and_not(code):
    trigger, clean = CODE_CASES[code]
    hit = run(**trigger)
    found = [p for p in hit.problems if p.code == code]
    assert found, f"{code} not raised: {hit.to_dict()}"
    assert found[0].level == CHECK_LEVELS[code] and found[0].message
    miss = run(**clean)
    assert code not in {p.code for p in miss.problems}, miss.to_dict()


def test_base_pair_is_clean():
    r = run()
    assert r.problems == []
    assert (r.reading, r.positions, r.stock_positions, r.ids_source) == ("layer_output", [2, 16, 29], [2, 16, 29],
                                                                          "eagle_config")
    assert r.fc_in_features == 12288 and r.stock_ids_hint == [1, 15, 28]


def test_bad_ids_leave_no_positions():
    for ids in (["1", "15", "28"], [1, 15, 15], [1, 15, 40], "1,15,28"):
        r = run(draft_over=ids_cfg(ids))
        assert r.positions is None and r.errors and r.stock_ids_hint is None
    assert run(draft_over=ids_cfg("1,15,28")).errors[0].code == "non_integer_ids"


def test_embedding_and_final_keep_positions():
    r = run(draft_over=ids_cfg([-1, 15, 31]))
    assert r.positions == [0, 16, 32]
    assert codes(r)[0] == {"embedding_capture", "final_layer_capture_unsupported"}


def test_position_reading_when_max_equals_layers():
    gpt = run(target=GPT_OSS, draft_over={**ids_cfg([24, 30, 36]), "hidden_size": 2880, "vocab_size": 201088},
              header={"fc.weight": [2880, 8640]})
    assert (gpt.reading, gpt.positions, gpt.stock_positions, gpt.problems) == ("position", [24, 30, 36],
                                                                               [24, 30, 36], [])
    # same ids on a llama target: position 32 == N is not capturable there
    llama = run(draft_over=ids_cfg([20, 26, 32]))
    assert llama.reading == "position" and llama.positions == [20, 26, 32]
    assert codes(llama)[0] == {"final_layer_capture_unsupported"}
    # a negative id under the position reading is out of range [1, N]
    assert codes(run(draft_over=ids_cfg([-1, 26, 32])))[0] == {"id_out_of_range"}


def test_position_zero_is_out_of_range_whatever_allows_the_embedding():
    # DESIGN section 1: positions outside [1, N] are id_out_of_range. Position 0 (the embedding) was
    # taken as embedding_capture, which SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING=1 turned off (helper 42)
    for env in ({}, {"SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING": "1"}, {"SGLANG_EAGLE_CYCLE_AUX_CONVENTION": "input"}):
        r = run(target=GPT_OSS, draft_over={**ids_cfg([0, 12, 36]), "hidden_size": 2880, "vocab_size": 201088},
                header={"fc.weight": [2880, 8640]}, env=env)
        assert (r.reading, r.positions, codes(r)[0]) == ("position", None, {"id_out_of_range"}), env
        assert "positions [0] outside [1, 36] (position 0 is the embedding output: declare it as layer-output " \
               "id -1)" in r.errors[0].message
    # the layer-output id -1 stays the one way to the embedding, and the flag allows it
    r = run(draft_over=ids_cfg([-1, 15, 28]), env={"SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING": "1"})
    assert (r.positions, r.errors) == ([0, 16, 29], [])


def test_fields_stock_builds_the_draft_from_must_be_well_formed():
    # stock LlamaForCausalLMEagle3 takes target_hidden_size as it is (None * 3 fails building fc) and calls
    # eagle_config.get (a string has none); both drafts were passed with exit 0 (helper 42)
    for value in (None, "4096", 4096.0):
        r = run(draft_over={"target_hidden_size": value})
        assert codes(r)[0] == {"target_hidden_mismatch"}, value
        assert "not an integer" in r.errors[0].message
    assert "target_hidden_size is null," in run(draft_over={"target_hidden_size": None}).errors[0].message
    # Eagle3DeepseekV2ForCausalLM reads a null one as hidden_size and eagle_config through getattr
    mla = {"architectures": ["Eagle3DeepseekV2ForCausalLM"]}
    assert codes(run(draft_over={**mla, "target_hidden_size": None}))[0] == set()
    assert codes(run(draft_over={**mla, "eagle_config": "[1, 15, 28]"}))[0] == set()
    for value in ("[1, 15, 28]", [1, 15, 28], 3):
        r = run(draft_over={"eagle_config": value})
        assert codes(r)[0] == {"eagle_config_not_object"}, value
    # falsy values are read as no eagle_config (stock's `or {}`)
    for value in ("", [], 0, None):
        assert codes(run(draft_over={"eagle_config": value}))[0] == set(), value


def test_an_fc_weight_that_is_no_matrix_is_an_error():
    r = run(header={"fc.weight": [12288]})
    assert codes(r)[0] == {"fc_width_mismatch"}
    assert r.errors[0].message == "fc.weight [12288] is not a matrix [out_features, in_features]: the draft's fc " \
                                  "cannot load it"


def test_resolution_order_env_nested_top():
    both = {"eagle_aux_hidden_state_layer_ids": [2, 15, 28], **ids_cfg([1, 15, 28])}
    r = run(draft_over=both, env={"SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS": "3, 15, 28"})
    assert (r.ids_source, r.ids, r.positions) == ("env", [3, 15, 28], [4, 16, 29])
    r = run(draft_over=both)
    assert (r.ids_source, r.ids) == ("eagle_config", [1, 15, 28])
    r = run(draft_del=("eagle_config",), draft_over={"eagle_aux_hidden_state_layer_ids": [2, 15, 28]})
    assert (r.ids_source, r.ids, r.positions, r.stock_positions) == ("top_level", [2, 15, 28], [3, 16, 29],
                                                                     [2, 16, 29])
    r = run(draft_del=("eagle_config",))
    assert (r.ids_source, r.ids, r.reading, r.positions) == ("none", None, "default", [2, 16, 29])


def test_env_ids_parsing():
    assert parse_env_ids({}) is None
    assert parse_env_ids({"SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS": " "}) is None
    assert parse_env_ids({"SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS": "[2, 30, 58]"}) == [2, 30, 58]
    assert parse_env_ids({"SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS": "-1,2 30"}) == [-1, 2, 30]
    for bad in ("2,x,28", "abc", "[]", "2.5,3"):  # unusable env input, not a draft problem
        with pytest.raises(UsageError, match="SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS"):
            parse_env_ids({"SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS": bad})


@pytest.mark.parametrize("value, why", [("2,,30", "(item 2 of 3 is empty)"), ("2,30,", "(item 3 of 3 is empty)"),
                                        (",2,30", "(item 1 of 3 is empty)"), ("[2, , 30]", "(item 2 of 3 is empty)"),
                                        ("２,３", "('２' is not a layer id)"), ("2,٣0", "('٣0' is not a layer id)"),
                                        ("2\u30003", "('2\\u30003' is not a layer id)")])
def test_env_ids_empty_or_non_ascii_item_is_refused(monkeypatch, value, why):
    env = {"SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS": value}
    with pytest.raises(UsageError) as exc:
        parse_env_ids(env)
    assert str(exc.value) == (f"SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS={value!r}: expected comma-separated integer "
                              f"layer ids such as 2,30,58 {why}")
    with pytest.raises(UsageError, match="SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS"):
        resolve_at_setter(family="llama", num_layers=32, passed_ids=[1, 15, 28], draft_cfg=None, env=env)
    # the server hook turns it into the wiring configuration error that stops the launch
    monkeypatch.setenv("SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS", value)
    model = SimpleNamespace(config=SimpleNamespace(num_hidden_layers=32, hidden_size=4096, vocab_size=128256))
    message = _resolve_or_config_error("llama", model, [1, 15, 28])
    assert isinstance(message, str) and message.startswith(
        f"EAGLE-3 aux wiring configuration error: SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS={value!r}: "), message
    monkeypatch.setenv("SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS", "1,15 28")  # the same hook with usable ids
    assert _resolve_or_config_error("llama", model, [1, 15, 28]).positions == [2, 16, 29]


def test_allow_embedding_message_lists_every_accepted_value():
    with pytest.raises(UsageError) as exc:
        resolve_at_setter(family="llama", num_layers=32, passed_ids=[-1, 2, 3], draft_cfg=None,
                          env={"SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING": "fasle"})
    assert str(exc.value) == ("SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING='fasle': expected 1, true, yes or on, "
                              "or 0, false, no or off (any case; or unset)")
    for flag, allowed in (("TRUE", True), ("yes", True), ("On", True), ("False", False), ("no", False),
                          ("OFF", False), ("0", False)):  # each word the message names is accepted
        r = resolve_at_setter(family="llama", num_layers=32, passed_ids=[-1, 2, 3], draft_cfg=None,
                              env={"SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING": flag})
        assert ("embedding_capture" in codes(r)[0]) is not allowed, flag


def test_default_positions_are_checked_on_small_targets():
    # [2, N//2, N-3]: out of range for N = 1, repeated for N = 4, distinct from N = 7 on
    r = resolve_at_setter(family="llama", num_layers=1, passed_ids=None, draft_cfg=None, env={})
    assert (r.reading, r.positions, r.stock_positions) == ("default", None, [2, 0, -2])
    assert codes(r)[0] == {"id_out_of_range"} and "of 1 (refused: id_out_of_range)" in r.startup_line()
    r = resolve_at_setter(family="llama", num_layers=4, passed_ids=None, draft_cfg=None, env={})
    assert (r.positions, codes(r)[0]) == (None, {"duplicate_ids"})
    r = resolve_at_setter(family="llama", num_layers=7, passed_ids=None, draft_cfg=None, env={})
    assert (r.positions, r.errors) == ([2, 3, 4], [])


def test_layer_count_and_env_flag_bounds():
    with pytest.raises(UsageError, match=r"\[1, 10000\]"):
        resolve_at_setter(family="llama", num_layers=10001, passed_ids=[1, 2, 3], draft_cfg=None, env={})
    assert resolve_at_setter(family="llama", num_layers=10000, passed_ids=[1, 2, 3], draft_cfg=None,
                             env={}).positions == [2, 3, 4]
    with pytest.raises(UsageError, match="SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING"):
        resolve_at_setter(family="llama", num_layers=32, passed_ids=[-1, 2, 3], draft_cfg=None,
                          env={"SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING": "bogus"})
    for flag, allowed in (("off", False), ("1", True)):
        r = resolve_at_setter(family="llama", num_layers=32, passed_ids=[-1, 2, 3], draft_cfg=None,
                              env={"SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING": flag})
        assert ("embedding_capture" in codes(r)[0]) is not allowed


KIMI_TARGET = {"architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25",
               "text_config": {"num_hidden_layers": 61, "hidden_size": 7168, "vocab_size": 163840},
               "vision_config": {"vt_num_hidden_layers": 27, "vt_hidden_size": 1152}}
KIMI_DRAFT = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 7168, "vocab_size": 163840,
              "num_hidden_layers": 1, **ids_cfg([2, 30, 58])}


@pytest.mark.parametrize("convention,reading,positions,warnings", [
    ("", "layer_output", [3, 31, 59], {"stock_differs"}),
    ("input", "position", [2, 30, 58], set()),
    ("stock", "position", [2, 30, 58], set()),
])
def test_conventions_on_kimi(convention, reading, positions, warnings):
    r = check_pair(KIMI_TARGET, KIMI_DRAFT, env={"SGLANG_EAGLE_CYCLE_AUX_CONVENTION": convention})
    assert (r.reading, r.positions, r.stock_positions, r.stock_family) == (reading, positions, [2, 30, 58],
                                                                           "deepseek_v2")
    assert codes(r) == (set(), warnings)


def test_an_id_stock_never_captures_is_said_to_fail_not_to_be_captured():
    # the seed team's patch: -1 (the embedding) before 2, 30, 58 on Kimi-K2.5. Stock's as-is branch is
    # handed [-1, 2, 30, 58], captures 3 of them and fails at the first forward (DESIGN; the case's
    # expected outcome "runtime_error"); the line said it "would capture [-1, 2, 30, 58]"
    r = check_pair(KIMI_TARGET, {**KIMI_DRAFT, **ids_cfg([-1, 2, 30, 58])}, env={})
    assert r.stock_positions == [-1, 2, 30, 58]
    tail = ("stock SGLang 0.5.23 would capture only [2, 30, 58] of [-1, 2, 30, 58] ([-1] never captured) and "
            "fail at the first target forward")
    assert r.startup_line().endswith(tail)
    assert tail.split("0.5.23 ", 1)[1] in next(p.message for p in r.problems if p.code == "stock_differs")
    assert parse_wiring_line(r.startup_line())["stock_positions"] == "-1,2,30,58"
    # the fix for stock writes the embedding position only for a draft trained on it
    assert "(position 0 is the embedding output: only if the draft was trained on it)" in stock_fix_text(r)


def test_a_negative_value_a_flagging_family_indexes_is_captured_from_the_last_layer():
    """qwen3_moe hands ``id + 1`` to qwen2_moe's inner setter, which flags ``self.layers[v]`` for every
    value; the forward captures the flagged layers in layer order. So ids [1, -2, 44] on a 48-layer
    target become [2, -1, 45], and ``layers[-1]`` flags layer 47: stock captures [2, 45, 47] and runs.
    It had been said to capture only [2, 45] and fail (helper 99; the shared configs' rule table)."""
    from sglang_eagle_cycle.wiring.stock import stock_captured

    rule = RULES_BY_MODULE["qwen3_moe"]
    assert stock_captured(rule, [2, -1, 45], 48) == [2, 45, 47]
    assert stock_captured(rule, [5, -43], 48) == [5]                  # one layer flagged twice: captured once
    assert stock_captured(RULES_BY_MODULE["llama"], [2, -1, 45], 48) == [2, 45]   # a list-keeping family
    target = {"architectures": ["Qwen3MoeForCausalLM"], "num_hidden_layers": 48, "hidden_size": 2048,
              "vocab_size": 151936}
    draft = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 2048, "vocab_size": 151936,
             **ids_cfg([1, -2, 44])}
    r = check_pair(target, draft, env={})
    assert "id_out_of_range" in {p.code for p in r.errors}
    assert r.startup_line().endswith("stock SGLang 0.5.23 would capture [2, 45, 47] (its [2, -1, 45] flags each "
                                     "layers[v], a negative v counting from the last layer)")


def test_the_same_positions_as_stock_are_not_called_the_same_where_stock_fails():
    """An id equal to N read as a position on Kimi-K2.5 (deepseek_v2 never captures the last layer's
    output): ours refuses it, stock flags the same positions and fails at the first forward. The line
    had said "same as stock SGLang 0.5.23" (helper 99)."""
    r = check_pair(KIMI_TARGET, {**KIMI_DRAFT, **ids_cfg([2, 61, 58])}, env={})
    assert r.positions == [2, 61, 58] and r.stock_positions == [2, 61, 58] and r.stock_captured == [2, 58]
    assert "final_layer_capture_unsupported" in {p.code for p in r.errors}
    assert r.startup_line().endswith("stock SGLang 0.5.23 would capture only [2, 58] of [2, 61, 58] ([61] never "
                                     "captured) and fail at the first target forward")
    assert check_pair(KIMI_TARGET, {**KIMI_DRAFT, **ids_cfg([1, 29, 57])}, env={}).startup_line().endswith(
        "same as stock SGLang 0.5.23")


def test_a_draft_architectures_string_is_named_as_such():
    # "architectures": "LlamaForCausalLMEagle3" (a string, not a list): the error said the draft's
    # architectures [] name no EAGLE-3 class, which misstates what the file holds
    r = check_pair(KIMI_TARGET, {**KIMI_DRAFT, "architectures": "LlamaForCausalLMEagle3"}, env={})
    msg = next(p.message for p in r.errors if p.code == "not_eagle3_architecture")
    assert msg.startswith('draft architectures is "LlamaForCausalLMEagle3", not a list of class names')
    r = check_pair(KIMI_TARGET, {**KIMI_DRAFT, "architectures": ["LlamaForCausalLM"]}, env={})
    assert next(p.message for p in r.errors if p.code == "not_eagle3_architecture").startswith(
        'draft architectures ["LlamaForCausalLM"] name no EAGLE-3 class')


def test_stock_convention_follows_each_family_rule():
    env = {"SGLANG_EAGLE_CYCLE_AUX_CONVENTION": "stock"}
    r = check_pair(KIMI_TARGET, {**KIMI_DRAFT, **ids_cfg([1, 29, 57])}, env=env)
    assert (r.reading, r.positions) == ("layer_output", [2, 30, 58])
    r = run(draft_over=ids_cfg([2, 15, 28]), env=env)
    assert (r.reading, r.positions) == ("layer_output", [3, 16, 29])


def test_invalid_convention_is_usage_error():
    with pytest.raises(UsageError, match="SGLANG_EAGLE_CYCLE_AUX_CONVENTION"):
        run(env={"SGLANG_EAGLE_CYCLE_AUX_CONVENTION": "outputs-plus-one"})


def test_startup_line_design_example_and_other_shapes():
    r = check_pair(KIMI_TARGET, KIMI_DRAFT, env={})
    assert r.startup_line() == ("EAGLE-3 aux wiring: ids [2, 30, 58] (layer outputs, draft eagle_config) -> capture "
                                "positions [3, 31, 59] of 61; stock SGLang 0.5.23 would capture [2, 30, 58]")
    same = check_pair(KIMI_TARGET, {**KIMI_DRAFT, **ids_cfg([1, 29, 57])}, env={})
    assert same.startup_line().endswith("-> capture positions [2, 30, 58] of 61; same as stock SGLang 0.5.23")
    default = run(draft_del=("eagle_config",))
    assert default.startup_line() == ("EAGLE-3 aux wiring: no ids declared (family default) -> default capture "
                                      "positions [2, 16, 29] of 32; same as stock SGLang 0.5.23")
    refused = run(draft_over=ids_cfg([1, 15, 40]))
    assert "-> no capture positions of 32 (refused: id_out_of_range)" in refused.startup_line()
    env = check_pair(KIMI_TARGET, KIMI_DRAFT, env={"SGLANG_EAGLE_CYCLE_AUX_CONVENTION": "input"})
    assert "(positions, SGLANG_EAGLE_CYCLE_AUX_CONVENTION=input, draft eagle_config)" in env.startup_line()


def test_to_dict_has_exactly_the_issue_keys():
    d = check_pair(KIMI_TARGET, KIMI_DRAFT, header={"fc.weight": [7168, 21504]}, env={}).to_dict()
    assert list(d) == ["num_layers", "ids", "ids_source", "reading", "positions", "stock_positions",
                       "stock_family", "stock_ids_hint", "fc_in_features", "problems", "stock_captured"]
    assert d["stock_ids_hint"] == [3, 31, 59] and d["fc_in_features"] == 21504 and d["num_layers"] == 61
    assert d["problems"][0]["level"] == "warning" and d["problems"][0]["code"] == "stock_differs"
    json.dumps(d)


def test_find_fields_on_wrapped_configs():
    assert find_num_layers(KIMI_TARGET) == 61
    assert find_hidden_size(KIMI_TARGET) == 7168
    assert find_vocab_size(KIMI_TARGET) == 163840
    assert find_num_layers({"num_hidden_layers": 32, "text_config": {"num_hidden_layers": 99}}) == 99
    only_vision = {"architectures": ["KimiK25ForConditionalGeneration"],
                   "vision_config": {"num_hidden_layers": 27, "vt_num_hidden_layers": 27}}
    with pytest.raises(UsageError, match="num_hidden_layers"):
        find_num_layers(only_vision)
    with pytest.raises(UsageError):
        find_num_layers({"num_hidden_layers": True})
    with pytest.raises(UsageError, match="hidden_size"):
        find_hidden_size({"num_hidden_layers": 3})


def test_a_wrapper_text_config_wins_over_the_top_level():
    # the decoder the aux states come from is the wrapper's language model: SGLang 0.5.23 builds it from
    # get_hf_text_config(), i.e. text_config. A top-level num_hidden_layers 27 beside text_config's 61
    # was read first and refused the draft's ids [2, 30, 58] as id_out_of_range
    target = {**KIMI_TARGET, "num_hidden_layers": 27, "hidden_size": 1152, "vocab_size": 1000}
    assert find_num_layers(target) == 61 and find_hidden_size(target) == 7168 and find_vocab_size(target) == 163840
    r = check_pair(target, KIMI_DRAFT, header={"fc.weight": [7168, 21504]}, env={})
    assert (r.num_layers, r.positions, codes(r)) == (61, [3, 31, 59], (set(), {"stock_differs"}))
    # the same for language_config / llm_config / thinker_config.text_config wrappers
    for wrapper in ({"language_config": {"num_hidden_layers": 61}}, {"llm_config": {"num_hidden_layers": 61}},
                    {"thinker_config": {"text_config": {"num_hidden_layers": 61}}}):
        assert find_num_layers({"num_hidden_layers": 27, **wrapper}) == 61, wrapper
    # two wrappers: SGLang 0.5.23's priority (thinker, llm, language, text), not the order they are written in
    two = {"text_config": {"num_hidden_layers": 12}, "llm_config": {"num_hidden_layers": 61}}
    assert find_num_layers(two) == 61
    assert find_num_layers({**two, "thinker_config": {"text_config": {"num_hidden_layers": 28}}}) == 28
    assert find_num_layers({**two, "thinker_config": {"num_hidden_layers": 36}}) == 36   # no text_config in it
    assert find_num_layers({"language_config": {"num_hidden_layers": 30}, "text_config": {"num_hidden_layers": 12}}) == 30
    with pytest.raises(UsageError, match=r"looked at thinker_config\.num_hidden_layers, llm_config\.num_hidden_layers, "
                                         r"language_config\.num_hidden_layers, text_config\.num_hidden_layers, "
                                         r"num_hidden_layers\)"):
        find_num_layers({"hidden_size": 8})
    # SGLang's non-HF LLaVA classes (Llava*ForCausalLM) are built from the top level, text_config unused
    llava = {"architectures": ["LlavaQwenForCausalLM"], "num_hidden_layers": 28, "text_config": {"num_hidden_layers": 32}}
    assert find_num_layers(llava) == 28
    assert find_num_layers({**llava, "architectures": ["LlavaForConditionalGeneration"]}) == 32
    # the server hook reads the live config the same way
    from sglang_eagle_cycle.patches.wiring import num_layers_of
    live = SimpleNamespace(config=SimpleNamespace(num_hidden_layers=27, text_config=SimpleNamespace(num_hidden_layers=61)))
    assert num_layers_of(live) == 61
    assert num_layers_of(SimpleNamespace(config=SimpleNamespace(num_hidden_layers=27))) == 27
    live_two = SimpleNamespace(config=SimpleNamespace(num_hidden_layers=27, text_config=SimpleNamespace(num_hidden_layers=12),
                                                      llm_config=SimpleNamespace(num_hidden_layers=61)))
    assert num_layers_of(live_two) == 61
    live_llava = SimpleNamespace(config=SimpleNamespace(architectures=["LlavaQwenForCausalLM"], num_hidden_layers=28,
                                                        text_config=SimpleNamespace(num_hidden_layers=32)))
    assert num_layers_of(live_llava) == 28


def test_stock_hints():
    # rule B needs the positions themselves; the plugin would read them one layer later
    r = check_pair(KIMI_TARGET, KIMI_DRAFT, env={})
    assert r.stock_ids_hint == [3, 31, 59]
    fix = stock_fix_text(r)
    assert fix.endswith("With sglang-eagle-cycle installed, do not make this edit: keep the ids [2, 30, 58]; "
                        "the plugin would read [3, 31, 59] as layer outputs and capture positions [4, 32, 60].")
    # rule B with position 1 first: only a list whose first id is not 1 keeps the ids as-is
    r = resolve_at_setter(family="deepseek_v2", num_layers=61, passed_ids=[1, 30, 58], draft_cfg=None,
                          env={"SGLANG_EAGLE_CYCLE_AUX_CONVENTION": "input"})
    assert r.positions == [1, 30, 58] and r.stock_ids_hint is not None and r.stock_ids_hint[0] != 1
    assert sorted(stock_layers_to_capture(RULES_BY_MODULE["deepseek_v2"], r.stock_ids_hint, 61)) == [1, 30, 58]
    # position N on llama: no ids exist
    r = run(draft_over=ids_cfg([1, 15, 31]))
    assert r.stock_ids_hint is None and "never captures position 32" in stock_fix_text(r)
    # already right: the declared ids
    assert "none needed" in stock_fix_text(run())


def test_resolve_at_setter_bare_call_deepseek_v3():
    r = resolve_at_setter(family="DeepseekV3ForCausalLM", num_layers=61, passed_ids=[2, 30, 58], draft_cfg=None,
                          env={})
    assert (r.positions, r.stock_positions, r.ids_source, r.stock_family) == ([3, 31, 59], [2, 30, 58],
                                                                              "eagle_config", "deepseek_v2")
    assert codes(r) == (set(), {"stock_differs"})
    assert r.startup_line().startswith("EAGLE-3 aux wiring: ids [2, 30, 58] (layer outputs, draft eagle_config)")


@pytest.mark.parametrize("family,num_layers,passed,positions,stock", [
    ("kimi_k25", 61, [2, 30, 58], [3, 31, 59], [2, 30, 58]),
    ("deepseek_v2", 61, [1, 29, 57], [2, 30, 58], [2, 30, 58]),
    ("glm4_moe_lite", 47, [2, 20, 40], [3, 21, 41], [2, 20, 40]),
    ("llama", 61, [2, 30, 58], [3, 31, 59], [3, 31, 59]),
    ("qwen3", 36, [1, 17, 32], [2, 18, 33], [2, 18, 33]),
    ("qwen3_moe", 48, [1, 23, 44], [2, 24, 45], [2, 24, 45]),
    ("gpt_oss", 36, [24, 30, 36], [24, 30, 36], [24, 30, 36]),
    ("gpt_oss", 36, [1, 17, 33], [2, 18, 34], [2, 18, 34]),
    ("minimax_m3_vl", 60, None, [3, 31, 58], [3, 31, 58]),
    ("llama", 32, None, [2, 16, 29], [2, 16, 29]),
])
def test_resolve_at_setter_families(family, num_layers, passed, positions, stock):
    r = resolve_at_setter(family=family, num_layers=num_layers, passed_ids=passed, draft_cfg=None, env={})
    assert (r.positions, r.stock_positions) == (positions, stock)
    assert ("stock_differs" in codes(r)[1]) == (sorted(positions) != sorted(stock))


def test_resolve_at_setter_reads_published_draft():
    draft = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 4096, "vocab_size": 128256,
             "eagle_aux_hidden_state_layer_ids": [1, 15, 28]}
    r = resolve_at_setter(family="llama", num_layers=32, passed_ids=None, draft_cfg=draft, env={},
                          target_hidden_size=4096, target_vocab_size=128256)
    assert (r.ids_source, r.positions, r.stock_positions) == ("top_level", [2, 16, 29], [2, 16, 29])
    assert codes(r) == (set(), {"ids_top_level"})
    r = resolve_at_setter(family="llama", num_layers=32, passed_ids=None, draft_cfg=draft, env={},
                          target_hidden_size=8192, target_vocab_size=32000)
    assert codes(r)[0] == {"target_hidden_mismatch", "vocab_mismatch"}


def test_unknown_family_has_no_stock_claims():
    r = resolve_at_setter(family="NoSuchForCausalLM", num_layers=32, passed_ids=[1, 15, 28], draft_cfg=None, env={})
    assert (r.positions, r.stock_positions, r.stock_family, r.stock_ids_hint) == ([2, 16, 29], None, None, None)
    assert "stock_differs" not in codes(r)[1]


@settings(max_examples=200, deadline=None)
@given(module=st.sampled_from(sorted(RULES_BY_MODULE)), n=st.integers(6, 128), data=st.data())
def test_layer_output_ids_always_have_a_stock_fix(module, n, data):
    ids = sorted(data.draw(st.sets(st.integers(0, n - 2), min_size=1, max_size=5)))
    r = resolve_at_setter(family=module, num_layers=n, passed_ids=ids, draft_cfg=None, env={})
    rule = RULES_BY_MODULE[module]
    assert r.positions == [i + 1 for i in ids] and r.errors == []
    hint = r.stock_ids_hint
    if rule.shift == SHIFT_IF_FIRST_IS_1 and r.positions == [1]:
        assert hint is None  # [1] keeps id 1 (+1 -> 2) and [0] stays 0: no list captures position 1 alone
        return
    assert hint is not None and sorted(stock_layers_to_capture(rule, hint, n)) == r.positions
    if rule.shift == SHIFT_ALWAYS:
        assert r.stock_positions == r.positions and r.warnings == []


# --------------------------------------------------------------------------- real data

def test_every_case_through_the_resolver():
    from conftest import config_cases, config_index

    index = config_index()
    cases = config_cases()
    assert len(cases) >= 15 and [c.name for c in cases] == sorted(e["case"] for e in index)
    mismatches = []
    for case in cases:
        ours = json.loads((case / "expected.json").read_text())["ours"]
        header = json.loads((case / "draft" / "fc_shape.json").read_text())
        r = check_pair(json.loads((case / "target" / "config.json").read_text()),
                       json.loads((case / "draft" / "config.json").read_text()), header=header, env={})
        errors, warnings = codes(r)
        got = {"reading": r.reading, "positions": r.positions, "stock_positions": r.stock_positions,
               "exit_code": 1 if r.errors else 0, "errors": errors, "warnings": warnings}
        want = {**ours, "errors": set(ours["errors"]), "warnings": set(ours["warnings"])}
        if got != want:
            mismatches.append((case.name, got, want))
    assert mismatches == []


# --------------------------------------------------------------------------- stock emulation vs SGLang

def _sglang_importable() -> bool:
    probe = subprocess.run([sys.executable, "-c", "import importlib.util as u; "
                            "print(u.find_spec('sglang') is not None)"], capture_output=True, text=True)
    return probe.stdout.strip() == "True"


@pytest.mark.skipif(not _sglang_importable(), reason="sglang is not installed")
def test_stock_emulation_equals_real_setters():
    """Real 0.5.23 setters on stand-ins, in a fresh interpreter with no plugin loaded."""
    env = {**os.environ, "SGLANG_PLUGINS": "none_such"}
    proc = run_python([HERE / "stock_setter_probe.py"], env=env, timeout=240)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("PROBE-JSON ")]
    assert proc.returncode == 0 and lines, proc.stderr[-2000:]
    probe = json.loads(lines[-1][len("PROBE-JSON "):])
    assert {"LlamaForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "DeepseekV3ForCausalLM",
            "KimiK25ForConditionalGeneration", "GptOssForCausalLM", "Glm4MoeLiteForCausalLM"} <= set(probe)
    diffs = []
    for name, entry in probe.items():
        # by class name always; by module name except glm4_moe, which also holds rule-B GlmMoeDsaForCausalLM
        lookups = (name,) if name == "GlmMoeDsaForCausalLM" else (name, entry["module"])
        for lookup in lookups:
            rule = family_rule(lookup)
            for ids, real in entry["results"]:
                ours = stock_layers_to_capture(rule, ids, entry["num_layers"])
                if ours != (None if real == "raise" else real):
                    diffs.append((name, lookup, ids, ours, real))
    assert diffs == []
    # where the real setter flags self.layers[v], the layers it flagged are what stock_captured says the
    # forward captures: a negative value flags a layer counted from the last (helper 99)
    from sglang_eagle_cycle.wiring.stock import stock_captured

    flag_diffs, negative = [], 0
    for name, entry in probe.items():
        rule, real = family_rule(name), dict((json.dumps(i), r) for i, r in entry["results"])
        for ids, layers in entry["flagged"]:
            if rule.flags == "all":
                got = real[json.dumps(ids)]
                negative += any(v < 0 for v in got)
                if stock_captured(rule, got, entry["num_layers"]) != layers:
                    flag_diffs.append((name, ids, got, layers))
    assert flag_diffs == [] and negative >= 1
    assert dict((json.dumps(i), f) for i, f in probe["Qwen3MoeForCausalLM"]["flagged"])["[-2, 3, 4]"] == [4, 5, 11]
    # the grid exercises every branch: +1, as-is, IndexError
    kimi = dict((json.dumps(i), r) for i, r in probe["KimiK25ForConditionalGeneration"]["results"])
    assert kimi["[2, 6, 9]"] == [2, 6, 9] and kimi["[1, 5, 9]"] == [2, 6, 10]
    assert dict((json.dumps(i), r) for i, r in probe["Qwen3MoeForCausalLM"]["results"])["[3, 7, 11]"] == "raise"


# --------------------------------------------------------------------------- safetensors header

def _raw_safetensors(path: Path, header: dict | bytes) -> Path:
    blob = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(blob)) + blob)
    return path


def test_header_read_by_the_format(tmp_path):
    entry = lambda shape: {"dtype": "BF16", "shape": shape, "data_offsets": [0, 0]}  # noqa: E731
    _raw_safetensors(tmp_path / "model.safetensors", {"__metadata__": {"format": "pt"},
                                                      "model.fc.weight": entry([7168, 21504]),
                                                      "lm_head.weight": entry([32000, 7168]),
                                                      "d2t": entry([32000]), "t2d": entry([163840])})
    # found only as model.fc.weight: marked so as well (shape []), for the head that skips that name
    assert read_draft_shapes(tmp_path) == {"fc.weight": [7168, 21504], "model.fc.weight": [],
                                           "lm_head.weight": [32000, 7168], "d2t": [32000]}
    assert read_draft_shapes(tmp_path / "config.json") == read_draft_shapes(tmp_path)  # a file means its folder


def test_header_writer_round_trip_and_padding(tmp_path):
    path = write_header_only(tmp_path / "x.safetensors", {"fc.weight": [4096, 12288], "d2t": [32000]})
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    assert len(raw) == 8 + n and n % 8 == 0
    header = read_header(path)
    assert header["fc.weight"]["data_offsets"] == [0, 4096 * 12288 * 2]
    assert header["d2t"]["dtype"] == "I64"
    assert read_draft_shapes(tmp_path) == {"fc.weight": [4096, 12288], "d2t": [32000]}  # any *.safetensors


def test_sharded_checkpoint_reads_only_the_needed_shards(tmp_path):
    write_header_only(tmp_path / "model-00001-of-00002.safetensors", {"lm_head.weight": [32000, 4096]})
    write_header_only(tmp_path / "model-00002-of-00002.safetensors", {"fc.weight": [4096, 16384]})
    (tmp_path / "model-00003-of-00002.safetensors").write_bytes(b"not a header at all")  # never opened
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "lm_head.weight": "model-00001-of-00002.safetensors", "fc.weight": "model-00002-of-00002.safetensors",
        "norm.weight": "model-00003-of-00002.safetensors"}}))
    assert read_draft_shapes(tmp_path) == {"fc.weight": [4096, 16384], "lm_head.weight": [32000, 4096]}
    (tmp_path / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(UsageError, match="missing"):
        read_draft_shapes(tmp_path)


def test_header_read_from_the_files_sglang_loads(tmp_path):
    """SGLang 0.5.23 loads every *.safetensors of a draft without an index, and every tensor of each
    shard an index lists; reading model.safetensors alone, or only the weight_map's names, missed an fc
    SGLang loads and the wiring check stopped the launch (no fc.weight)."""
    beside = tmp_path / "beside"
    beside.mkdir()
    write_header_only(beside / "model.safetensors", {"lm_head.weight": [32000, 4096], "d2t": [32000]})
    write_header_only(beside / "fc.safetensors", {"fc.weight": [4096, 12288]})
    assert read_draft_shapes(beside) == {"fc.weight": [4096, 12288], "lm_head.weight": [32000, 4096], "d2t": [32000]}
    (beside / "fc.safetensors").rename(beside / "consolidated.safetensors")  # Mistral's pair: SGLang skips it
    assert "fc.weight" not in read_draft_shapes(beside)
    indexed = tmp_path / "indexed"
    indexed.mkdir()
    write_header_only(indexed / "model.safetensors", {"lm_head.weight": [1, 1]})  # not listed: SGLang skips it
    write_header_only(indexed / "a.safetensors", {"lm_head.weight": [32000, 4096]})
    write_header_only(indexed / "b.safetensors", {"model.fc.weight": [4096, 12288], "norm.weight": [4096]})
    (indexed / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "lm_head.weight": "a.safetensors", "norm.weight": "b.safetensors"}}))  # fc left out of the map
    assert read_draft_shapes(indexed) == {"fc.weight": [4096, 12288], "model.fc.weight": [],
                                          "lm_head.weight": [32000, 4096]}


@pytest.mark.parametrize("raw", [
    b"\x01\x02",  # shorter than the length prefix
    struct.pack("<Q", 10_000) + b"{}",  # declares more than the file holds
    struct.pack("<Q", 2 ** 40) + b"{}",  # absurd length
    struct.pack("<Q", 5) + b"{oops",  # not JSON
    struct.pack("<Q", 2) + b"[]",  # not an object
    struct.pack("<Q", 26) + b'{"fc.weight": {"shape": 1}}',  # no integer shape
])
def test_corrupt_header_is_usage_error(tmp_path, raw):
    (tmp_path / "model.safetensors").write_bytes(raw)
    with pytest.raises(UsageError, match="model.safetensors"):
        read_draft_shapes(tmp_path)


def test_no_checkpoint_means_no_header(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    assert read_draft_shapes(tmp_path) == {}


# --------------------------------------------------------------------------- locate_config

def test_locate_config_paths(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    assert locate_config(str(tmp_path / "m")) == tmp_path / "m" / "config.json"
    assert locate_config(str(tmp_path / "m" / "config.json")) == tmp_path / "m" / "config.json"
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no config.json"):
        locate_config(str(tmp_path / "empty"))
    with pytest.raises(UsageError, match="no such file"):
        locate_config(str(tmp_path / "nope"))


def _fake_hf_cache(root: Path, repo: str, refs: dict[str, str]) -> None:
    base = root / ("models--" + repo.replace("/", "--"))
    for ref, commit in refs.items():
        (base / "refs").mkdir(parents=True, exist_ok=True)
        (base / "refs" / ref).write_text(commit)
        snap = base / "snapshots" / commit
        snap.mkdir(parents=True, exist_ok=True)
        (snap / "config.json").write_text(json.dumps({"num_hidden_layers": len(commit)}))


def test_locate_config_in_hf_cache_without_network(tmp_path):
    _fake_hf_cache(tmp_path / "hub", "org/draft-eagle3", {"main": "a" * 40, "v2": "b" * 12})
    env = {"HF_HUB_CACHE": str(tmp_path / "hub")}
    found = locate_config("org/draft-eagle3", env=env)
    assert found.parent.name == "a" * 40 and found.name == "config.json"
    assert locate_config("org/draft-eagle3", revision="v2", env=env).parent.name == "b" * 12
    assert locate_config("org/draft-eagle3", revision="a" * 40, env=env).parent.name == "a" * 40
    assert locate_config("org/draft-eagle3", env={"HF_HOME": str(tmp_path)}) == found
    with pytest.raises(UsageError, match="local cache"):
        locate_config("org/not-downloaded", env=env)


# --------------------------------------------------------------------------- issue 14, items 5-9

KIMI_MLA_DRAFT = {"architectures": ["Eagle3DeepseekV2ForCausalLM"], "hidden_size": 7168, "vocab_size": 163840,
                  "num_hidden_layers": 1, **ids_cfg([2, 30, 58])}


@pytest.mark.parametrize("algorithm", ["EAGLE", "NEXTN", "nextn"])
def test_eagle3_head_under_eagle_or_nextn_is_an_error(algorithm):
    r = check_pair(KIMI_TARGET, KIMI_DRAFT, header={"fc.weight": [7168, 21504]}, env={}, algorithm=algorithm)
    errors, warnings = codes(r)
    assert errors == {"algorithm_not_eagle3"} and not r.ok
    assert "stock_differs" not in warnings  # nothing is captured, by stock or by us
    msg = r.errors[0].message
    assert "--speculative-algorithm EAGLE3" in msg and "accept length 1.0" in msg and "#21272" in msg
    assert ("rewrites NEXTN to EAGLE" in msg) == (algorithm.upper() == "NEXTN")
    for arch in ("Eagle3DeepseekV2ForCausalLM", "MyEagle3Head"):  # any *Eagle3* class
        other = check_pair(KIMI_TARGET, {**KIMI_DRAFT, "architectures": [arch]}, env={}, algorithm=algorithm)
        assert "algorithm_not_eagle3" in codes(other)[0]


def test_eagle_head_under_eagle_is_fine_and_bad_algorithm_is_usage_error():
    eagle2 = run(algorithm="EAGLE", draft_over={"architectures": ["LlamaForCausalLMEagle"]})
    assert codes(eagle2)[0] == set()  # an EAGLE(-2) head under EAGLE: not this check's business
    assert codes(run(algorithm="EAGLE3"))[0] == set()
    with pytest.raises(UsageError, match="EAGLE3, EAGLE, NEXTN"):
        run(algorithm="MEDUSA")


def test_use_aux_hidden_state_false_with_no_fc_stored_is_a_warning():
    """A head trained on the target's last hidden state alone (ModelOpt builds no fc for
    use_aux_hidden_state false, as in NVIDIA's gpt-oss-120b short-context head) stores no fc: SGLang
    0.5.23 builds one but never applies it (the target's state is as wide as the draft's embeddings),
    so the draft loads and runs; not an error. Still one where SGLang would apply its unloaded fc."""
    off = {"eagle_config": {"use_aux_hidden_state": False}}
    stored = {"lm_head.weight": [32000, 4096], "d2t": [32000]}   # the checkpoint was read: no fc in it
    assert codes(run(draft_over=off, header=stored)) == (set(), {"aux_capture_off", "ids_missing_default_used"})
    ids_off = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [], "use_aux_hidden_state": False}}
    assert codes(run(draft_over=ids_off, header=stored))[0] == set()
    # an fc stored quantised is an fc: as before; so is a draft narrower than the target (fc applied)
    assert codes(run(draft_over=off, header={**stored, "fc.quantized": []}))[0] == {"aux_capture_off_fc_mismatch"}
    narrow = {**off, "hidden_size": 2048, "target_hidden_size": 4096}
    assert codes(run(draft_over=narrow, header={**stored, "lm_head.weight": [32000, 2048]}))[0] \
        == {"aux_capture_off_fc_mismatch"}
    # no checkpoint read (no header, or an empty one): fc as SGLang builds it, as before
    assert codes(run(draft_over=off, header=None))[0] == {"aux_capture_off_fc_mismatch"}


def test_use_aux_hidden_state_false_error_or_warning():
    off = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 15, 28], "use_aux_hidden_state": False}}
    r = run(draft_over=off)  # fc.weight [4096, 12288]: trained on three 4096-wide states
    assert codes(r)[0] == {"aux_capture_off_fc_mismatch"}
    assert "12288" in r.errors[0].message and "4096" in r.errors[0].message
    assert codes(run(draft_over=off, header=None))[0] == {"aux_capture_off_fc_mismatch"}  # fc as SGLang builds it
    warn = run(draft_over=off, header={"fc.weight": [4096, 4096]})
    assert codes(warn) == (set(), {"aux_capture_off"})
    # under EAGLE the algorithm error says it all; a true or absent flag is the normal path
    assert codes(run(draft_over=off, algorithm="EAGLE"))[0] == {"algorithm_not_eagle3"}
    on = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 15, 28], "use_aux_hidden_state": True}}
    assert run(draft_over=on).problems == []


@pytest.mark.parametrize("where,key", [
    ("top", "eagle_aux_hidden_states_layer_ids"),
    ("nested", "eagle_aux_hidden_states_layer_ids"),
    ("nested", "eagle_aux_hidden_state_layers_ids"),
    ("nested", "Eagle_Aux_Hidden_State_Layer_Ids"),
    ("top", "eagle_configs"),
])
def test_misspelt_ids_key_is_named(where, key):
    value = {"eagle_aux_hidden_state_layer_ids": [1, 15, 28]} if key == "eagle_configs" else [1, 15, 28]
    draft = {k: v for k, v in DRAFT.items() if k != "eagle_config"}
    draft.update({key: value} if where == "top" else {"eagle_config": {key: value}})
    r = check_pair(LLAMA_8B, draft, header=FC_OK, env={})
    errors, warnings = codes(r)
    assert "ids_key_misspelt" in warnings and "ids_missing_default_used" in warnings and not errors
    (msg,) = [p.message for p in r.problems if p.code == "ids_key_misspelt"]
    found = key if where == "top" else f"eagle_config.{key}"
    meant = "eagle_config" if key == "eagle_configs" else "eagle_config.eagle_aux_hidden_state_layer_ids"
    assert f"'{found}'" in msg and f"did you mean '{meant}'" in msg


def test_keys_that_are_not_misspellings_are_quiet():
    draft = {**DRAFT, "num_aux_hidden_states": 3, "target_hidden_size": 4096, "eagle_aux_hidden_state_layer_ids":
             [1, 15, 28], "dflash_target_layer_ids": [1, 2], "eagle_config": {
                 "eagle_aux_hidden_state_layer_ids": [1, 15, 28], "use_aux_hidden_state": True,
                 "norm_before_fc": False}}
    assert "ids_key_misspelt" not in {p.code for p in check_pair(LLAMA_8B, draft, header=FC_OK, env={}).problems}


def test_draft_context_shorter_reads_the_context_as_sglang_derives_it():
    """SGLang 0.5.23 hands the draft the target's context and refuses to start where the draft's own,
    derived as SGLang derives it (the first of max_sequence_length, seq_length, max_seq_len,
    model_max_length, max_position_embeddings, times rope_scaling.factor unless llama3's or with
    original_max_position_embeddings), is shorter, unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is
    set (model_config.py, _derive_context_length). The note says which of the two happens."""
    target = {**LLAMA_8B, "max_position_embeddings": 131072}
    msg = run(target=target, draft_over={"max_position_embeddings": 2048}).infos[0].message
    assert "refuses to start" in msg and "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" in msg
    assert "--context-length is at most 2048" in msg
    served = run(target=target, draft_over={"max_position_embeddings": 2048},
                 env={"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"}).infos[0].message
    assert "is set, so SGLang" in served and "refuses" not in served and "#6783" in served
    # a draft whose rope scaling stretches 2048 positions to 131072: SGLang starts it, no note
    stretched = {"max_position_embeddings": 2048, "rope_scaling": {"type": "linear", "factor": 64.0}}
    assert run(target=target, draft_over=stretched).problems == []
    # llama3 scaling and original_max_position_embeddings do not multiply
    for rope in ({"rope_type": "llama3", "factor": 8.0}, {"factor": 8.0, "original_max_position_embeddings": 2048}):
        note = run(target=target, draft_over={"max_position_embeddings": 2048, "rope_scaling": rope}).infos
        assert "2048 tokens" in note[0].message
    # seq_length comes before max_position_embeddings, for the target as for the draft
    assert run(target={**LLAMA_8B, "max_position_embeddings": 131072, "seq_length": 4096},
               draft_over={"max_position_embeddings": 4096}).problems == []
    note = run(target=target, draft_over={"max_position_embeddings": 131072, "seq_length": 8192}).infos[0].message
    assert "8192 tokens (seq_length)" in note


def test_draft_context_shorter_is_an_info_note():
    target = {**LLAMA_8B, "max_position_embeddings": 131072}
    r = run(target=target, draft_over={"max_position_embeddings": 2048})
    assert [(p.level, p.code) for p in r.problems] == [("info", "draft_context_shorter")]
    assert r.ok and r.warnings == [] and r.errors == []
    msg = r.infos[0].message
    assert "2048" in msg and "131072" in msg and "max_position_embeddings" in msg
    assert r.to_dict()["problems"] == [{"level": "info", "code": "draft_context_shorter", "message": msg}]
    for draft_max in (131072, 262144):
        assert run(target=target, draft_over={"max_position_embeddings": draft_max}).problems == []
    # the server's --context-length, when set, is the context served
    assert run(target=target, draft_over={"max_position_embeddings": 2048}, context_length=2048).problems == []
    short = run(target=target, draft_over={"max_position_embeddings": 4096}, context_length=8192)
    assert "8192" in short.infos[0].message and "--context-length" in short.infos[0].message
    # a wrapped target's text_config is read; an unknown number says nothing
    assert codes(check_pair(KIMI_TARGET | {"text_config": {**KIMI_TARGET["text_config"],
                                                            "max_position_embeddings": 262144}},
                            {**KIMI_DRAFT, "max_position_embeddings": 2048}, env={}))[1] == {"stock_differs"}
    assert run(draft_over={"max_position_embeddings": 2048}).problems == []
    with pytest.raises(UsageError, match="positive integer"):
        run(context_length=0)


def test_eagle31_head_keeps_the_verdict_and_names_the_variant():
    header = {"fc.weight": [7168, 21504]}
    for base in (KIMI_DRAFT, KIMI_MLA_DRAFT):
        plain = check_pair(KIMI_TARGET, base, header=header, env={})
        v31 = check_pair(KIMI_TARGET, {**base, "fc_norm": True, "norm_output": True},
                         header={**header, "fc_norm.0.weight": [7168]}, env={})
        assert v31.to_dict() == plain.to_dict()
        assert "fc_norm" not in plain.variant and "EAGLE 3.1" in v31.variant and "norm_output" in v31.variant
        assert v31.variant.startswith(base["architectures"][0])
        legacy = check_pair(KIMI_TARGET, {**base, "use_aux_norm": True}, header=header, env={})
        assert "fc_norm" in legacy.variant and legacy.to_dict() == plain.to_dict()


def test_flags_the_chosen_class_ignores_are_warnings():
    ids = [1, 15, 28]
    # LlamaForCausalLMEagle3 reads norm_before_fc in eagle_config first, then at top level
    nested = run(draft_over={"eagle_config": {"eagle_aux_hidden_state_layer_ids": ids, "norm_before_fc": True}},
                 header={**FC_OK, "input_norm.weight": [12288]})
    assert nested.problems == [] and "norm_before_fc" in nested.variant
    top = run(draft_over={"norm_before_fc": True})  # a header without input_norm.weight is no problem
    assert top.problems == [] and "input_norm" in top.variant
    overridden = run(draft_over={"norm_before_fc": True, "eagle_config": {"eagle_aux_hidden_state_layer_ids": ids,
                                                                          "norm_before_fc": False}},
                     header={**FC_OK, "input_norm.weight": [12288]})
    assert codes(overridden) == (set(), {"draft_flag_ignored"})
    assert "input_norm.weight" in overridden.warnings[0].message
    no_flag = run(header={**FC_OK, "fc_norm.0.weight": [4096]})
    assert codes(no_flag) == (set(), {"draft_flag_ignored"}) and "fc_norm" in no_flag.warnings[0].message
    # 0.5.23's Kimi MLA head has no input_norm: norm_before_fc (either place) or the tensor is dropped
    mla = {"architectures": ["Eagle3DeepseekV2ForCausalLM"]}
    for over, header in (({"norm_before_fc": True}, FC_OK),
                         ({"eagle_config": {"eagle_aux_hidden_state_layer_ids": ids, "norm_before_fc": True}}, FC_OK),
                         ({}, {**FC_OK, "input_norm.weight": [12288]})):
        r = run(draft_over={**mla, **over}, header=header)
        assert codes(r) == (set(), {"draft_flag_ignored"}), over
        assert "Eagle3DeepseekV2ForCausalLM" in r.warnings[0].message
    assert run(draft_over={**mla, "fc_norm": True, "norm_output": True}).problems == []


def test_stock_differs_does_not_ask_for_a_convention_already_set():
    draft = ids_cfg([2, 16, 29])  # llama: stock captures [3, 17, 30]
    plain = run(target={**LLAMA_8B, "architectures": ["DeepseekV3ForCausalLM"]}, draft_over=draft)
    (msg,) = [p.message for p in plain.problems if p.code == "stock_differs"]
    assert "set SGLANG_EAGLE_CYCLE_AUX_CONVENTION=input" in msg
    as_input = run(draft_over=draft, env={"SGLANG_EAGLE_CYCLE_AUX_CONVENTION": "input"})
    (msg,) = [p.message for p in as_input.problems if p.code == "stock_differs"]
    assert "set SGLANG_EAGLE_CYCLE_AUX_CONVENTION=" not in msg
    assert "SGLANG_EAGLE_CYCLE_AUX_CONVENTION=input is set" in msg


def test_header_reader_finds_the_norm_tensors(tmp_path):
    write_header_only(tmp_path / "model.safetensors", {"fc.weight": [2880, 8640], "model.input_norm.weight": [8640],
                                                       "fc_norm.0.weight": [2880], "layers.0.x": [1]})
    assert read_draft_shapes(tmp_path) == {"fc.weight": [2880, 8640], "input_norm.weight": [8640],
                                           "model.input_norm.weight": [], "fc_norm.0.weight": [2880]}


def test_wiring_cases_come_from_the_repository_and_an_extra_data_directory(tmp_path, monkeypatch):
    """A clone without ../shared has every case; an extra data directory adds its own cases, never replaces."""
    import shutil

    from conftest import REPO_DATA, config_cases, config_index

    monkeypatch.setenv("EAGLE_CYCLE_TEST_SHARED_DATA", str(tmp_path / "none"))
    monkeypatch.setattr("conftest.REPO_ROOT", tmp_path / "clone")   # no ../shared beside this "clone"
    own = [c.name for c in config_cases()]
    assert len(own) == len(json.loads((REPO_DATA / "configs" / "index.json").read_text())) >= 15
    assert all(c.parent == REPO_DATA / "configs" for c in config_cases())
    extra = tmp_path / "extra"
    case = extra / "configs" / "99-held-back"
    shutil.copytree(REPO_DATA / "configs" / own[0], case)
    shutil.copytree(REPO_DATA / "configs" / own[1], extra / "configs" / own[1])   # same name: the repo's wins
    entry = dict(json.loads((case / "expected.json").read_text()), case="99-held-back")
    (extra / "configs" / "index.json").write_text(json.dumps([entry]))
    monkeypatch.setenv("EAGLE_CYCLE_TEST_SHARED_DATA", str(extra))
    names = [c.name for c in config_cases()]
    assert names == sorted(own + ["99-held-back"])
    assert next(c for c in config_cases() if c.name == own[1]).parent == REPO_DATA / "configs"
    assert [e["case"] for e in config_index()] == names


def test_a_huge_id_list_gives_short_messages_quickly():
    """100,000 ids (duplicates and out of range among them) and a 100,000-character string id: every
    message stays one short line and the check takes well under a second (helper 52: the duplicate
    check was quadratic, 7.4 s for 30,000 ids, and the error line 1.4 MB)."""
    import time

    ids = list(range(100_000)) + [5]
    t0 = time.perf_counter()
    r = run(draft_over=ids_cfg(ids))
    took = time.perf_counter() - t0
    assert codes(r)[0] >= {"id_out_of_range", "duplicate_ids"}
    assert took < 2.0 and all(len(p.message) < 600 for p in r.errors)
    dup = next(p.message for p in r.errors if p.code == "duplicate_ids")
    assert dup.startswith("ids [5] repeated in [0, 1, 2,") and "(100001 values)" in dup
    r = run(draft_over=ids_cfg([1, 15, "x" * 100_000]))
    msg = next(p.message for p in r.errors if p.code == "non_integer_ids")
    assert len(msg) < 300 and "(100002 chars)" in msg


def test_an_unprefixed_fc_a_listed_shard_holds_is_read_beside_the_prefixed_one_the_index_names(tmp_path):
    """The index names model.fc.weight; its shard (or another listed one) also holds fc.weight, which the
    weight_map leaves out. SGLang 0.5.23 loads every tensor of each listed shard, so the MLA head loads
    fc.weight (and skips model.fc.weight): its fc is loaded. Only the weight_map's spelling had been read,
    the draft marked as storing its fc only as model.fc.weight, and wiring's error stopped the launch."""
    for other in (False, True):
        d = tmp_path / f"d{int(other)}"
        d.mkdir()
        write_header_only(d / "a.safetensors", {"model.fc.weight": [4096, 12288], "lm_head.weight": [32000, 4096],
                                                **({} if other else {"fc.weight": [4096, 12288]})})
        write_header_only(d / "b.safetensors", {"norm.weight": [4096], **({"fc.weight": [4096, 12288]} if other else {})})
        (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
            "model.fc.weight": "a.safetensors", "lm_head.weight": "a.safetensors", "norm.weight": "b.safetensors"}}))
        assert read_draft_shapes(d) == {"fc.weight": [4096, 12288], "lm_head.weight": [32000, 4096]}, other


def test_head_modules_stored_only_prefixed_are_marked(tmp_path):
    """A tensor model.X of a head module (fc, fc_norm.N, norm, embed_tokens, layers.0 / midlayer) whose
    module has no unprefixed tensor is marked "model.X": [] (SGLang 0.5.23's MLA head skips it and leaves
    the module unloaded); one beside an unprefixed tensor of its module is not (the module loads)."""
    write_header_only(tmp_path / "model.safetensors", {
        "fc.weight": [4096, 12288], "model.fc.weight_scale": [1],   # fc has an unprefixed tensor: loads
        "model.norm.weight": [4096], "model.layers.0.hidden_norm.weight": [4096],
        "midlayer.input_layernorm.weight": [4096], "model.layers.0.input_layernorm.weight": [4096],
        "model.lm_head.weight": [32000, 4096], "model.rotary.inv_freq": [64]})
    assert read_draft_shapes(tmp_path) == {
        "fc.weight": [4096, 12288], "lm_head.weight": [32000, 4096], "model.lm_head.weight": [],
        "model.layers.0.hidden_norm.weight": [], "model.norm.weight": []}
    # sharded: the weight_map names model.norm.weight only, a listed shard also holds norm.weight
    sharded = tmp_path / "sharded"
    sharded.mkdir()
    write_header_only(sharded / "a.safetensors", {"fc.weight": [4096, 12288], "model.norm.weight": [4096],
                                                  "model.layers.0.mlp.down_proj.weight": [4096, 8]})
    write_header_only(sharded / "b.safetensors", {"norm.weight": [4096]})
    (sharded / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "fc.weight": "a.safetensors", "model.norm.weight": "a.safetensors",
        "model.layers.0.mlp.down_proj.weight": "a.safetensors", "other": "b.safetensors"}}))
    assert read_draft_shapes(sharded) == {"fc.weight": [4096, 12288], "model.layers.0.mlp.down_proj.weight": []}


MLA_OWN_EMBED = {"architectures": ["Eagle3DeepseekV2ForCausalLM"], "target_hidden_size": 4096, "hidden_size": 2048,
                 "vocab_size": 128256, "draft_vocab_size": 32000}


@pytest.mark.parametrize("over, flagged", [
    ({}, True),                                                  # its own embedding: loaded from the checkpoint
    ({"hidden_size": 4096}, False),                              # the target's is shared in its place
    ({"target_hidden_size": None}, False),                       # read as hidden_size: shared
    ({"draft_vocab_size": None}, False),                         # embedding and lm_head taken from the target
    ({"draft_vocab_size": None, "tie_word_embeddings": True}, True),   # tied: set_embed, widths differ
    ({"architectures": ["LlamaForCausalLMEagle3"]}, False),      # loads model.embed_tokens.weight
])
def test_a_prefixed_embedding_matters_only_where_the_mla_head_keeps_its_own(over, flagged):
    """SGLang 0.5.23's MLA head replaces its embedding with the target's unless target_hidden_size is set
    and differs from hidden_size, and always when it takes lm_head from the target (untied, no
    draft_vocab_size): only then does a skipped model.embed_tokens.weight leave it uninitialised."""
    draft = {**MLA_OWN_EMBED, **over}
    header = {"fc.weight": [draft["hidden_size"], 3 * 4096], "model.embed_tokens.weight": []}
    report = run(draft_over=draft, header=header)
    assert ("weight_not_loaded" in {p.code for p in report.errors}) == flagged, report.problems
    if flagged:
        (msg,) = [p.message for p in report.errors if p.code == "weight_not_loaded"]
        assert "model.embed_tokens.weight" in msg and "1 module (embed_tokens) stays unloaded" in msg


def test_weight_not_loaded_names_a_few_tensors_and_counts_the_rest():
    """A checkpoint saved whole with the model. prefix: one error naming three tensors and the count of
    the rest, one line; fc_norm counted per aux state SGLang builds (here 3)."""
    layer = [f"model.layers.0.{m}.weight" for m in ("input_layernorm", "hidden_norm", "post_attention_layernorm",
                                                    "self_attn.o_proj", "mlp.down_proj")]
    header = {"fc.weight": [4096, 12288], "model.fc.weight": [], "model.norm.weight": [],
              **{f"model.fc_norm.{i}.weight": [] for i in range(4)}, **dict.fromkeys(layer, [])}
    draft = {"architectures": ["Eagle3DeepseekV2ForCausalLM"], "fc_norm": True}
    report = run(draft_over=draft, header=header)
    (msg,) = [p.message for p in report.errors if p.code == "weight_not_loaded"]
    assert "\n" not in msg and " and 6 more only under the model. prefix" in msg   # 9 of the 10 marked: no fc_norm.3
    assert "9 modules (fc_norm.0, fc_norm.1, fc_norm.2 and 6 more) stay unloaded" in msg
    assert [p.code for p in report.errors] == ["fc_width_mismatch", "weight_not_loaded"]   # model.fc.weight: its own


@pytest.mark.parametrize("tie, flagged", [(True, False), (1, False), (False, True), (0, True), (None, True)])
def test_lm_head_not_loaded_reads_tie_word_embeddings_as_sglang_does(tie, flagged):
    """SGLang 0.5.23's heads tie lm_head to the embeddings on ``if config.tie_word_embeddings``: a truthy
    1 ties it as True does, and the prefixed lm_head then loads nothing that matters. The check had
    compared ``is not True`` and raised the error (which stops a launch) for such a working draft."""
    header = {**FC_OK, "lm_head.weight": [32000, 4096], "model.lm_head.weight": [], "d2t": [32000]}
    over = {} if tie is None else {"tie_word_embeddings": tie}
    codes = {p.code for p in run(header=header, draft_over=over).errors}
    assert ("lm_head_not_loaded" in codes) == flagged


def test_the_reader_reports_a_quantised_fc_weight_dtype_and_its_scales(tmp_path):
    """fc.weight's shape cannot show it stored fp8: the reader reports its header dtype when it is no float
    one ("fc.weight.dtype") and the scale tensors stored with it ("fc.weight.scales"), in one file, with an
    index (the shard's header for the dtype, the weight_map for the scales), spelt model.fc.weight, and
    the draft folder's hf_quant_config.json. A float fc.weight gets neither marker."""
    from conftest import write_safetensors_header as write_header_only
    rest = {"lm_head.weight": [32000, 4096], "d2t": [32000]}
    cases = {   # fc.weight dtype, scales stored -> the markers read
        ("F8_E4M3", ("fc.weight_scale_inv",)): {"fc.weight.dtype": "F8_E4M3", "fc.weight.scales": ["fc.weight_scale_inv"]},
        ("F8_E5M2", ("fc.weight_scale",)): {"fc.weight.dtype": "F8_E5M2", "fc.weight.scales": ["fc.weight_scale"]},
        ("I8", ("fc.weight_scale", "model.fc.weight_scale_inv")): {
            "fc.weight.dtype": "I8", "fc.weight.scales": ["fc.weight_scale", "model.fc.weight_scale_inv"]},
        ("F8_E4M3", ()): {"fc.weight.dtype": "F8_E4M3"},
        ("BF16", ("fc.weight_scale_inv",)): {},
        ("F16", ()): {},
        ("F32", ()): {},
    }
    for i, ((dtype, scales), markers) in enumerate(cases.items()):
        d = tmp_path / f"one{i}"
        d.mkdir()
        write_header_only(d / "model.safetensors", {"fc.weight": [4096, 12288], **{s: [32, 96] for s in scales}, **rest},
                          dtypes={"fc.weight": dtype, **{s: "F32" for s in scales}})
        assert read_draft_shapes(d) == {"fc.weight": [4096, 12288], **rest, **markers}, (dtype, scales)
    # sharded: fc.weight's dtype from its shard, its scale named by the weight_map in another shard
    d = tmp_path / "sharded"
    d.mkdir()
    write_header_only(d / "a.safetensors", {"fc.weight": [4096, 12288], **rest}, dtypes={"fc.weight": "F8_E4M3"})
    write_header_only(d / "b.safetensors", {"fc.weight_scale_inv": [32, 96]}, {"fc.weight_scale_inv": "F32"})
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "fc.weight": "a.safetensors", "lm_head.weight": "a.safetensors", "d2t": "a.safetensors",
        "fc.weight_scale_inv": "b.safetensors"}}))
    assert read_draft_shapes(d) == {"fc.weight": [4096, 12288], **rest, "fc.weight.dtype": "F8_E4M3",
                                    "fc.weight.scales": ["fc.weight_scale_inv"]}
    (d / "hf_quant_config.json").write_text("{}")
    assert read_draft_shapes(d)["hf_quant_config.json"] == []
    # spelt model.fc.weight (both heads' readers see it; the MLA head skips it)
    d = tmp_path / "prefixed"
    d.mkdir()
    write_header_only(d / "model.safetensors", {"model.fc.weight": [4096, 12288], "model.fc.weight_scale_inv": [32, 96]},
                      dtypes={"model.fc.weight": "F8_E4M3", "model.fc.weight_scale_inv": "F32"})
    assert read_draft_shapes(d) == {"fc.weight": [4096, 12288], "model.fc.weight": [], "model.fc.weight_scale_inv": [],
                                    "fc.weight.dtype": "F8_E4M3", "fc.weight.scales": ["model.fc.weight_scale_inv"]}


FP8_FC = {**FC_OK, "fc.weight.dtype": "F8_E4M3", "fc.weight.scales": ["fc.weight_scale_inv"]}
MLA_HEAD = {"architectures": ["Eagle3DeepseekV2ForCausalLM"]}
FP8_CONFIG = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}


def test_an_fp8_fc_with_its_scale_is_an_error_where_sglang_builds_a_float_fc():
    """fc_scale_dropped where SGLang 0.5.23 casts the stored fp8 values into a float fc and drops the
    scale (test/test_mla_head_sglang.py measures it on both classes): LlamaForCausalLMEagle3 always,
    Eagle3DeepseekV2ForCausalLM when the checkpoint declares no quantisation. Passes where it loads both."""
    def errors(header, **over):
        return codes(run(header=header, draft_over=over))[0]

    # the Llama head: whatever the draft's quantization_config, either spelling of fc.weight
    assert errors(FP8_FC) == {"fc_scale_dropped"}
    assert errors(FP8_FC, quantization_config=FP8_CONFIG) == {"fc_scale_dropped"}
    assert errors({**FP8_FC, "model.fc.weight": [], "fc.weight.scales": ["model.fc.weight_scale_inv"]}) \
        == {"fc_scale_dropped"}
    report = run(header={**FP8_FC, "fc.weight.dtype": "F8_E5M2", "fc.weight.scales": ["fc.weight_scale"]})
    assert [p.message for p in report.errors] == [
        "the draft checkpoint stores fc.weight as F8_E5M2 with its scale fc.weight_scale: SGLang 0.5.23's "
        "LlamaForCausalLMEagle3 builds fc as a plain float torch.nn.Linear whatever the quantisation config, so "
        "it casts the F8_E5M2 values into fc as they are and drops fc.weight_scale: fc runs without its scale, "
        "silently wrong; store fc dequantised (fc.weight in bf16)"]
    # the MLA head: an error without a declared quantisation, none with one (its fc is then fp8 and loads
    # both tensors) wherever SGLang reads it
    assert errors(FP8_FC, **MLA_HEAD) == {"fc_scale_dropped"}
    assert "or declare the checkpoint's quantization_config in the draft config" in run(
        header=FP8_FC, draft_over=MLA_HEAD).errors[0].message
    for declared in ({"quantization_config": FP8_CONFIG}, {"compression_config": {"format": "float-quantized"}},
                     {"text_config": {"quantization_config": FP8_CONFIG}}):
        assert errors(FP8_FC, **MLA_HEAD, **declared) == set(), declared
    assert errors({**FP8_FC, "hf_quant_config.json": []}, **MLA_HEAD) == set()
    # model.fc.weight in the MLA head: not loaded at all, fc_width_mismatch alone
    assert errors({**FP8_FC, "model.fc.weight": []}, **MLA_HEAD) == {"fc_width_mismatch"}
    # no false refusal: a float fc.weight, a quantised one without a scale (its values are the weights),
    # an fc SGLang does not apply (the aux states as wide as the draft), capture off
    for head in ({}, MLA_HEAD):
        assert errors(FC_OK, **head) == set()
        assert errors({**FC_OK, "fc.weight.dtype": "F8_E4M3"}, **head) == set()
        assert errors({**FP8_FC, "fc.weight": [12288, 12288]}, **head, hidden_size=12288, target_hidden_size=4096) \
            == set()
    off = run(header=FP8_FC, draft_over={"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 15, 28],
                                                          "use_aux_hidden_state": False}})
    assert "fc_scale_dropped" not in {p.code for p in off.problems}


def test_the_server_reads_an_unparsable_allow_embedding_as_unset(monkeypatch, caplog):
    """A typo in SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING had stopped the launch of a correctly wired draft
    ("configuration error"; helper 83). The server now warns once and reads it as unset: a draft
    without id -1 is wired as it would be anyway, and one declaring -1 still meets embedding_capture."""
    import logging

    from sglang_eagle_cycle.patches import wiring as pw

    monkeypatch.setattr(pw, "_ENV_WARNED", set())
    monkeypatch.setenv("SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING", "fasle")
    model = SimpleNamespace(config=SimpleNamespace(num_hidden_layers=32, hidden_size=4096, vocab_size=128256))
    with caplog.at_level(logging.WARNING):
        report = _resolve_or_config_error("llama", model, [1, 15, 28])
        again = _resolve_or_config_error("llama", model, [1, 15, 28])
    assert not isinstance(report, str) and report.positions == [2, 16, 29] and again.positions == [2, 16, 29]
    warned = [r for r in caplog.records if "SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING='fasle'" in r.getMessage()]
    assert len(warned) == 1 and "read as unset" in warned[0].getMessage()
    # id -1 with the typo: refused as a wiring error (embedding_capture), as with the variable unset
    assert any("embedding_capture" in c for c in codes(_resolve_or_config_error("llama", model, [-1, 15, 28])))
    # the CLI and resolve_at_setter itself still refuse the value (exit 2 there)
    with pytest.raises(UsageError):
        resolve_at_setter(family="llama", num_layers=32, passed_ids=[1, 15, 28], draft_cfg=None,
                          env={"SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING": "fasle"})


@pytest.mark.parametrize("cfg", [
    {"architectures": ["X"], "num_hidden_layers": 27, "text_config": {"num_hidden_layers": 12, "num_attention_heads": 4},
     "llm_config": {"num_hidden_layers": 61, "num_attention_heads": 4}},
    {"architectures": ["X"], "language_config": {"num_hidden_layers": 30},
     "text_config": {"num_hidden_layers": 12, "num_attention_heads": 4}},
    {"architectures": ["X"], "thinker_config": {"text_config": {"num_hidden_layers": 28}},
     "llm_config": {"num_hidden_layers": 61, "num_attention_heads": 4}},
    {"architectures": ["X"], "thinker_config": {"num_hidden_layers": 36},
     "text_config": {"num_hidden_layers": 12, "num_attention_heads": 4}},
    {"architectures": ["LlavaQwenForCausalLM"], "num_hidden_layers": 28,
     "text_config": {"num_hidden_layers": 32, "num_attention_heads": 4}},
    {"architectures": ["KimiK25ForConditionalGeneration"], "num_hidden_layers": 27,
     "text_config": {"num_hidden_layers": 61, "num_attention_heads": 4}},
])
def test_layer_count_is_the_one_sglang_get_hf_text_config_picks(cfg):
    """The config file reader and the server hook take the layer count from the sub-config SGLang
    0.5.23's own get_hf_text_config returns (its priority: thinker, llm, language, text; Llava*ForCausalLM
    the top level), proven on SGLang's function, not on our reading of it."""
    common = pytest.importorskip("sglang.srt.utils.hf_transformers.common")
    from transformers import PretrainedConfig

    from sglang_eagle_cycle.patches.wiring import num_layers_of

    def live(c):   # nested configs as a model's config class builds them (SGLang converts one level of dicts)
        c = dict(c)
        if isinstance(c.get("thinker_config"), dict):
            c["thinker_config"] = PretrainedConfig(**{k: PretrainedConfig(**v) if isinstance(v, dict) else v
                                                      for k, v in c["thinker_config"].items()})
        return PretrainedConfig(**c)

    sglang_says = common.get_hf_text_config(live(cfg)).num_hidden_layers
    assert find_num_layers(cfg) == sglang_says
    assert num_layers_of(SimpleNamespace(config=live(cfg))) == sglang_says
