"""SGLang's own plugin loader applies our hooks to the real upstream classes (run in fresh interpreters).

HookRegistry cannot un-patch, so every scenario runs ``test/plugin_probe.py`` in a fresh interpreter (test/sglang_fork.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sglang_fork import run_python

pytest.importorskip("sglang")

PROBE = Path(__file__).with_name("plugin_probe.py")

WIRING_SETTERS = {
    "apertus.ApertusForCausalLM", "bailing_moe.BailingMoEForCausalLM", "deepseek_v2.DeepseekV2ForCausalLM",
    "exaone_moe.ExaoneMoEForCausalLM", "gemma3_causal.Gemma3ForCausalLM", "gemma4_causal.Gemma4ForCausalLM",
    "gemma4_mm.Gemma4ForConditionalGeneration", "glm4_moe.Glm4MoeForCausalLM",
    "glm4_moe_lite.Glm4MoeLiteForCausalLM", "glm5_next.Glm5NextForConditionalGeneration",
    "gpt_oss.GptOssForCausalLM", "llama.LlamaForCausalLM", "longcat_flash.LongcatFlashForCausalLM",
    "minimax_m2.MiniMaxM2ForCausalLM", "minimax_m3.MiniMaxM3SparseForCausalLM",
    "minimax_m3_vl.MiniMaxM3SparseForConditionalGeneration", "qwen2.Qwen2ForCausalLM",
    "qwen2_5_vl.Qwen2_5_VLForConditionalGeneration", "qwen2_moe.Qwen2MoeForCausalLM", "qwen3.Qwen3ForCausalLM",
    "qwen3_5_text.Qwen3_5ForCausalLM", "qwen3_moe.Qwen3MoeForCausalLM", "qwen3_next.Qwen3NextForCausalLM",
    "qwen3_vl.Qwen3VLForConditionalGeneration",
}
EXPECTED_WIRING = {f"sglang.srt.models.{s}.set_eagle3_layers_to_capture" for s in WIRING_SETTERS}
BANNER = "sglang.srt.managers.scheduler.Scheduler.__init__"


def probe(scenario: str, args: dict | None = None, **env) -> dict | list:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_EAGLE_CYCLE")}
    full_env.update({"SGLANG_PLUGINS": "eagle_cycle"}, **env)
    proc = run_python([PROBE, scenario, json.dumps(args or {})], env=full_env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


# (module, class, num_layers, ids, stock positions, our positions), DESIGN §1.
FAMILY_CASES = [
    ("deepseek_v2", "DeepseekV3ForCausalLM", 61, [2, 30, 58], [2, 30, 58], [3, 31, 59]),
    ("deepseek_v2", "DeepseekV3ForCausalLM", 61, [1, 29, 57], [2, 30, 58], [2, 30, 58]),
    ("deepseek_v2", "DeepseekV2ForCausalLM", 61, None, [2, 30, 58], [2, 30, 58]),
    ("kimi_k25", "KimiK25ForConditionalGeneration", 61, [2, 30, 58], [2, 30, 58], [3, 31, 59]),
    ("glm4_moe_lite", "Glm4MoeLiteForCausalLM", 47, [2, 23, 43], [2, 23, 43], [3, 24, 44]),
    ("llama", "LlamaForCausalLM", 32, [1, 15, 28], [2, 16, 29], [2, 16, 29]),
    ("llama", "LlamaForCausalLM", 32, None, [2, 16, 29], [2, 16, 29]),
    ("qwen3", "Qwen3ForCausalLM", 36, [1, 17, 32], [2, 18, 33], [2, 18, 33]),
    ("qwen3_moe", "Qwen3MoeForCausalLM", 48, [1, 23, 44], [2, 24, 45], [2, 24, 45]),
    ("gpt_oss", "GptOssForCausalLM", 36, [24, 30, 36], [24, 30, 36], [24, 30, 36]),
    ("gpt_oss", "GptOssForCausalLM", 36, [1, 17, 33], [2, 18, 34], [2, 18, 34]),
]


def _calls():
    return [[m, c, n, ids] for m, c, n, ids, _, _ in FAMILY_CASES]


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """One interpreter under the default environment: load_plugins(), then every check of plugin_probe 'all'."""
    draft = tmp_path_factory.mktemp("draft")
    # Stock SGLang passes only nested ids; this draft declares its ids at top level.
    (draft / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLMEagle3"], "eagle_aux_hidden_state_layer_ids": [2, 30, 58],
        "hidden_size": 64, "num_hidden_layers": 1}))
    return probe("all", {"calls": _calls(), "draft_dir": str(draft)})[0]


def test_load_plugins_imports_no_worker_or_model_module(loaded):
    # The tokenizer/detokenizer run load_plugins() too: it must not pull in model files or the EAGLE worker.
    assert loaded["imported_by_load_plugins"] == []
    assert all(s == "waiting" for t, s in loaded["status_before_import"].items() if t != BANNER)


def test_every_target_is_wrapped_by_name(loaded):
    from sglang_eagle_cycle.patches import cycle as cycle_patches

    timing = {s.target for s in cycle_patches.hook_specs()}
    expected = EXPECTED_WIRING | timing | {BANNER}
    assert set(loaded["wrapped"]) == expected
    assert {t for t, ok in loaded["wrapped"].items() if ok} == expected
    assert set(loaded["patched_by_registry"]) == expected
    assert set(loaded["status"].values()) == {"applied"}


@pytest.mark.parametrize("env", [{"SGLANG_EAGLE_CYCLE": "0"}, {"SGLANG_PLUGINS": "other"}])
def test_switches_leave_upstream_untouched(env):
    out = probe("targets", **env)[0]
    assert not any(out["wrapped"].values())
    assert out["patched_by_registry"] == []


def test_wiring_switch_leaves_setters_untouched():
    out = probe("targets", SGLANG_EAGLE_CYCLE_WIRING="0")[0]
    wiring = {t: ok for t, ok in out["wrapped"].items() if t in EXPECTED_WIRING}
    assert wiring and not any(wiring.values())
    assert any(ok for t, ok in out["wrapped"].items() if t not in EXPECTED_WIRING)


def test_family_setters_stock_without_plugin():
    out, _ = probe("setters", {"calls": _calls()}, SGLANG_PLUGINS="none_such")
    for case, got in zip(FAMILY_CASES, out):
        assert got["layers_to_capture"] == case[4], (case, got)


def test_family_setters_follow_design_with_plugin(loaded):
    for case, got in zip(FAMILY_CASES, loaded["setters"]):
        assert got.get("layers_to_capture") == case[5], (case, got)
        if case[0] in ("qwen3_moe",):  # per-layer flags follow the positions too
            assert got["flags"] == case[5]
    log = loaded["setters_log"]
    assert ("EAGLE-3 aux wiring: ids [2, 30, 58] (layer outputs" in log
            and "-> capture positions [3, 31, 59] of 61; stock SGLang 0.5.23 would capture [2, 30, 58]" in log)


def test_embedding_capture_stops_the_launch_unless_not_strict(loaded):
    (strict,) = loaded["strict"]
    assert strict["error"] == "EagleWiringError"
    assert "embedding_capture" in strict["message"] and "SGLANG_EAGLE_CYCLE_WIRING_STRICT=0" in strict["message"]
    assert loaded["not_strict"][0]["layers_to_capture"] == [0, 3, 31, 59]
    assert "embedding_capture" in loaded["not_strict_log"]
    # an unrecognised value keeps the default (strict), with one WARNING naming it
    assert [r["error"] for r in loaded["strict_typo"]] == ["EagleWiringError"] * 2
    assert loaded["strict_typo_log"].count("SGLANG_EAGLE_CYCLE_WIRING_STRICT='fasle' is not one of") == 1
    assert "using the default (on)" in loaded["strict_typo_log"]


def test_ids_come_from_the_published_draft_config(loaded):
    assert loaded["draft_config"][0]["layers_to_capture"] == [3, 31, 59]
    assert "ids_top_level" in loaded["draft_config_log"]


def test_unusable_env_override_stops_the_launch(loaded):
    (bad,) = loaded["bad_env"]
    assert bad["error"] == "EagleWiringError"
    assert bad["message"].startswith("EAGLE-3 aux wiring configuration error:") and "SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS" in bad["message"]


def test_env_convention_input_reads_ids_as_positions(loaded):
    assert loaded["convention_input"][0]["layers_to_capture"] == [2, 30, 58]


def test_register_is_reentrant_and_registers_each_target_once(loaded):
    assert loaded["reentrant"] == {"hooks": 1, "double_wrapped": False}


def test_other_sglang_version_registers_nothing_with_one_warning():
    out, err = probe("version")
    assert out["status"] == {}
    assert err.count("SGLang 0.5.99 is not the supported 0.5.23") == 1
    assert out["forced_status"]["sglang.srt.models.llama.LlamaForCausalLM.set_eagle3_layers_to_capture"] == "waiting"


def test_failed_target_is_a_warning_and_the_rest_still_applies(loaded):
    status = loaded["failed_status"]
    assert status["sglang.srt.models.qwen2.NoSuchClass.forward"] == "failed"
    assert status["sglang.srt.models.qwen2.Qwen2ForCausalLM.set_eagle3_layers_to_capture"] == "applied"
    info, *warnings = loaded["banner"]
    assert info[0] == 20 and "sglang-eagle-cycle 0.1.0 on SGLang 0.5.23" in info[1]
    assert "Qwen2ForCausalLM.set_eagle3_layers_to_capture" in info[1] and "failed (1): NoSuchClass.forward" in info[1]
    assert warnings == [[30, "sglang-eagle-cycle: hook target sglang.srt.models.qwen2.NoSuchClass.forward failed; "
                               "the server runs on without it"],
                        [30, "sglang-eagle-cycle: SGLANG_EAGLE_CYCLE_TIMNG is set but nothing reads it; "
                             "did you mean SGLANG_EAGLE_CYCLE_TIMING?"]]
    assert loaded["banner_worker"].endswith("; timing: profiling EAGLEWorkerV2")


def test_internal_fault_in_wiring_hook_is_logged_once_and_stock_path_runs(loaded):
    assert [r["layers_to_capture"] for r in loaded["fault"]] == [[2, 30, 58], [2, 30, 58]]  # stock, twice
    assert loaded["fault_log"].count("internal error in wiring (deepseek_v2) (KeyError") == 1


def test_another_plugins_hooks_on_the_worker_are_applied_once():
    """Our post-import hook runs inside SGLang's apply_hooks() (which imports the EAGLE worker to resolve
    another plugin's target): it applies only our targets, so the other plugin's hooks are not applied
    a second time (twice per call) nor tried on the half-imported module (SGLang's tracebacks)."""
    out, _ = probe("other_plugin")
    assert out["calls"] == {"verify": 1, "forward_batch_generation": 1}
    assert out["failed_to_apply"] == 0
    assert out["status"] == "applied"


def test_a_plugin_loaded_after_ours_keeps_its_hooks_on_a_target_already_imported():
    """In load_plugins(), a target whose module was already imported was applied at once and put in
    HookRegistry._patched: the apply_hooks() at load_plugins()' end then skipped it, so another plugin
    loaded after ours never had its hooks on that target applied (the scheduler's process has imported
    scheduler.py, the model runner and device_timer by then)."""
    out, _ = probe("later_plugin")
    assert out["calls"] == {"around": 1, "before": 1, "after": 1}
    assert out["ours_in_chain"] == 1 and out["status"] == "applied"


def test_a_force_typo_is_warned_of_on_the_supported_release_too(monkeypatch, caplog):
    """SGLANG_EAGLE_CYCLE_FORCE=yess was read only off 0.5.23, so no warning named it there (helper 83)."""
    import logging

    from sglang_eagle_cycle import plugin, runtime

    monkeypatch.setattr(runtime, "_flags_warned", set())
    monkeypatch.setenv("SGLANG_EAGLE_CYCLE_FORCE", "yess")
    with caplog.at_level(logging.WARNING, logger="sglang_eagle_cycle"):
        ok, installed = plugin.version_ok()
    assert ok is (installed == __import__("sglang_eagle_cycle").SUPPORTED_SGLANG)
    assert any("SGLANG_EAGLE_CYCLE_FORCE='yess'" in r.getMessage() for r in caplog.records)
