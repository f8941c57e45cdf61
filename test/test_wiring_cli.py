"""``eagle-cycle wiring``: every shared config case end to end, exit codes, unusable input, the demo."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_eagle_cycle import cli

REPO = Path(__file__).resolve().parents[1]


def _header_only(path: Path, shapes: dict[str, list[int]]) -> None:
    """A safetensors file with a header and no tensor bytes, written by the format's definition."""
    header = {name: {"dtype": "I64" if name in ("d2t", "t2d") else "BF16", "shape": shape, "data_offsets": [0, 0]}
              for name, shape in shapes.items()}
    blob = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(blob)) + blob)


def _materialise(case: Path, dest: Path) -> tuple[Path, Path]:
    """Copy a case's configs and turn fc_shape.json into a header-only model.safetensors."""
    target, draft = dest / "target", dest / "draft"
    target.mkdir(parents=True)
    draft.mkdir()
    shutil.copy(case / "target" / "config.json", target / "config.json")
    shutil.copy(case / "draft" / "config.json", draft / "config.json")
    _header_only(draft / "model.safetensors", json.loads((case / "draft" / "fc_shape.json").read_text()))
    return target, draft


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["wiring", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def run_subprocess(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sglang_eagle_cycle.cli", "wiring", *argv], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=120)


def test_every_shared_case_matches_its_ours_block(shared_data, tmp_path, capsys, monkeypatch):
    for var in ("SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS", "SGLANG_EAGLE_CYCLE_AUX_CONVENTION",
                "SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING"):
        monkeypatch.delenv(var, raising=False)
    from conftest import config_cases, config_index

    cases = config_cases()
    assert len(cases) >= 15 and [c.name for c in cases] == [e["case"] for e in config_index()]
    mismatches = []
    for case in cases:
        target, draft = _materialise(case, tmp_path / case.name)
        code, out, err = run_cli(capsys, str(target), str(draft), "--json")
        doc = json.loads(out)
        ours = json.loads((case / "expected.json").read_text())["ours"]
        got = {"reading": doc["reading"], "positions": doc["positions"], "stock_positions": doc["stock_positions"],
               "exit_code": code,
               "errors": sorted({p["code"] for p in doc["problems"] if p["level"] == "error"}),
               "warnings": sorted({p["code"] for p in doc["problems"] if p["level"] == "warning"})}
        want = {**ours, "errors": sorted(ours["errors"]), "warnings": sorted(ours["warnings"])}
        if got != want or err:
            mismatches.append((case.name, got, want, err))
        fc = json.loads((case / "draft" / "fc_shape.json").read_text())["fc.weight"]
        assert doc["fc_in_features"] == fc[1]
    assert mismatches == []


def test_kimi_json_is_the_issue_example(shared_data, tmp_path, capsys):
    target, draft = _materialise(shared_data / "configs" / "01-kimi-k25-ids-2-30-58-layer-output", tmp_path)
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    doc = json.loads(out)
    assert code == 0 and out.count("\n") == 1
    assert [(p["level"], p["code"]) for p in doc.pop("problems")] == [("warning", "stock_differs")]
    assert doc == {"num_layers": 61, "ids": [2, 30, 58], "ids_source": "eagle_config", "reading": "layer_output",
                   "positions": [3, 31, 59], "stock_positions": [2, 30, 58], "stock_family": "deepseek_v2",
                   "stock_ids_hint": [3, 31, 59], "fc_in_features": 21504, "stock_captured": [2, 30, 58]}


def test_json_says_what_stock_captures_of_what_it_is_handed(shared_data, tmp_path, capsys):
    # stock_positions is what stock SGLang 0.5.23 is handed, [-1, 2, 30, 58] for case 03; that it never
    # captures -1 was in the text alone. stock_captured, the last key, is each case's captured_hf_indices
    from conftest import config_cases

    for case in config_cases():
        target, draft = _materialise(case, tmp_path / case.name)
        doc = json.loads(run_cli(capsys, str(target), str(draft), "--json")[1])
        stock = json.loads((case / "expected.json").read_text())["sglang_0_5_23"]
        assert list(doc)[-2:] == ["problems", "stock_captured"], case.name
        assert doc["stock_captured"] == stock.get("captured_hf_indices"), case.name
    target, draft = _materialise(shared_data / "configs" / "03-kimi-k25-embedding-minus1-four-ids", tmp_path / "03")
    doc = json.loads(run_cli(capsys, str(target), str(draft), "--json")[1])
    assert (doc["stock_positions"], doc["stock_captured"]) == ([-1, 2, 30, 58], [2, 30, 58])
    target, draft = _materialise(shared_data / "configs" / "14-gpt-oss-20b-id-out-of-range", tmp_path / "14")
    doc = json.loads(run_cli(capsys, str(target), str(draft), "--json")[1])
    assert (doc["stock_positions"], doc["stock_captured"]) == ([2, 18, 34], [2, 18])


def test_human_output_ends_with_the_stock_fix(shared_data, tmp_path, capsys):
    target, draft = _materialise(shared_data / "configs" / "01-kimi-k25-ids-2-30-58-layer-output", tmp_path)
    code, out, _ = run_cli(capsys, str(target), str(draft))
    lines = out.strip().splitlines()
    assert code == 0
    assert ("EAGLE-3 aux wiring: ids [2, 30, 58] (layer outputs, draft eagle_config) -> capture positions "
            "[3, 31, 59] of 61; stock SGLang 0.5.23 would capture [2, 30, 58]") in lines
    assert lines[-1].startswith("Fix for stock SGLang 0.5.23") and '"eagle_aux_hidden_state_layer_ids": [3, 31, 59]' \
        in lines[-1]


def test_no_fix_exists_is_said(shared_data, tmp_path, capsys):
    target, draft = _materialise(shared_data / "configs" / "11-llama31-8b-four-ids-top-level-fc16384", tmp_path)
    code, out, _ = run_cli(capsys, str(target), str(draft))
    assert code == 1
    assert "none exists: stock llama never captures position 32" in out.strip().splitlines()[-1]


def test_an_error_pair_is_never_told_no_fix_is_needed(shared_data, tmp_path, capsys):
    # case 12's draft is a plain LlamaForCausalLM (not_eagle3_architecture): its ids are what stock
    # captures, and the last line said "Fix the errors above first. Fix for stock SGLang 0.5.23: none
    # needed, ..." beside the error
    target, draft = _materialise(shared_data / "configs" / "12-llama31-8b-arch-llamaforcausallm", tmp_path / "12")
    code, out, _ = run_cli(capsys, str(target), str(draft))
    assert code == 1 and "error    not_eagle3_architecture:" in out and "none needed" not in out
    assert out.strip().splitlines()[-1] == (
        "Fix the errors above first. Fix for stock SGLang 0.5.23: the aux ids need no change, it already captures "
        'positions [2, 16, 29]; to make that explicit, set "eagle_config": {"eagle_aux_hidden_state_layer_ids": '
        "[1, 15, 28]} in the draft's config.json.")
    # the same ids declared: the short form, without "none needed" too
    cfg = json.loads((draft / "config.json").read_text())
    cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": [1, 15, 28]}
    (draft / "config.json").write_text(json.dumps(cfg))
    code, out, _ = run_cli(capsys, str(target), str(draft))
    assert code == 1 and out.strip().splitlines()[-1] == (
        "Fix the errors above first. Fix for stock SGLang 0.5.23: the aux ids need no change; it already captures "
        "positions [2, 16, 29].")
    # an error-free pair keeps its line: case 05, the same target with a SpecForge draft
    target, draft = _materialise(shared_data / "configs" / "05-llama31-8b-specforge-no-ids", tmp_path / "05")
    code, out, _ = run_cli(capsys, str(target), str(draft))
    assert code == 0 and out.strip().splitlines()[-1] == (
        "Fix for stock SGLang 0.5.23: none needed, it already captures positions [2, 16, 29]; to make that explicit, "
        'set "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 15, 28]} in the draft\'s config.json.')


def test_env_overrides_apply(shared_data, tmp_path, capsys, monkeypatch):
    target, draft = _materialise(shared_data / "configs" / "01-kimi-k25-ids-2-30-58-layer-output", tmp_path)
    monkeypatch.setenv("SGLANG_EAGLE_CYCLE_AUX_CONVENTION", "input")
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    doc = json.loads(out)
    assert (code, doc["reading"], doc["positions"], doc["problems"]) == (0, "position", [2, 30, 58], [])
    monkeypatch.delenv("SGLANG_EAGLE_CYCLE_AUX_CONVENTION")
    monkeypatch.setenv("SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS", "1,29,57")
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    doc = json.loads(out)
    assert (code, doc["ids_source"], doc["positions"]) == (0, "env", [2, 30, 58])


def test_string_ids_are_non_integer_ids(tmp_path, capsys):
    (tmp_path / "t").mkdir()
    (tmp_path / "d").mkdir()
    (tmp_path / "t" / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"],
                                                            "num_hidden_layers": 32, "hidden_size": 4096}))
    (tmp_path / "d" / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 4096,
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": ["2", "16", "29"]}}))
    code, out, err = run_cli(capsys, str(tmp_path / "t"), str(tmp_path / "d"), "--json")
    doc = json.loads(out)
    assert code == 1 and err == ""
    assert [p["code"] for p in doc["problems"] if p["level"] == "error"] == ["non_integer_ids"]
    assert doc["positions"] is None and doc["ids"] == ["2", "16", "29"]


def test_repo_id_from_local_hf_cache(shared_data, tmp_path, capsys, monkeypatch):
    case = shared_data / "configs" / "02-kimi-k25-specforge-ids-1-29-57"
    snap = tmp_path / "hub" / "models--acme--kimi-eagle3" / "snapshots" / ("c" * 40)
    snap.mkdir(parents=True)
    (snap.parents[1] / "refs").mkdir()
    (snap.parents[1] / "refs" / "main").write_text("c" * 40)
    shutil.copy(case / "draft" / "config.json", snap / "config.json")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    code, out, _ = run_cli(capsys, str(case / "target"), "acme/kimi-eagle3", "--json")
    assert code == 0 and json.loads(out)["positions"] == [2, 30, 58]
    assert run_cli(capsys, str(case / "target"), "acme/not-cached", "--json")[0] == 2


@pytest.mark.parametrize("make", ["missing", "invalid_json", "wrapped_no_layers", "corrupt_header", "json_array"])
def test_unusable_input_one_line_exit_2(tmp_path, make):
    target, draft = tmp_path / "target", tmp_path / "draft"
    target.mkdir()
    draft.mkdir()
    (target / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 32,
                                                    "hidden_size": 4096}))
    (draft / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 4096}))
    if make == "missing":
        target = tmp_path / "no-such-model"
    elif make == "invalid_json":
        (draft / "config.json").write_text('{"architectures": ["LlamaForCausalLMEagle3"],')
    elif make == "wrapped_no_layers":
        (target / "config.json").write_text(json.dumps({
            "architectures": ["KimiK25ForConditionalGeneration"], "text_config": {"hidden_size": 7168},
            "vision_config": {"vt_num_hidden_layers": 27, "num_hidden_layers": 27}}))
    elif make == "corrupt_header":
        (draft / "model.safetensors").write_bytes(struct.pack("<Q", 1 << 20) + b"{")
    elif make == "json_array":
        (target / "config.json").write_text("[1, 2]")
    proc = run_subprocess(str(target), str(draft))
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("eagle-cycle wiring: error: ")


def test_error_exit_code_in_a_real_process(shared_data, tmp_path):
    target, draft = _materialise(shared_data / "configs" / "15-qwen3-30b-a3b-ids-from-235b-indexerror", tmp_path)
    proc = run_subprocess(str(target), str(draft), "--json")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["positions"] is None and doc["stock_positions"] is None


def test_demo_shows_the_kimi_correction():
    # the offline part only: the CPU proof it adds is test_tiny_pair_sglang.py
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_EAGLE_CYCLE_")}
    env["EAGLE_CYCLE_DEMO_OFFLINE"] = "1"
    proc = subprocess.run([sys.executable, str(REPO / "examples" / "demo.py")], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert ("ids [2, 30, 58] (layer outputs, draft eagle_config) -> capture positions [3, 31, 59] of 61; "
            "stock SGLang 0.5.23 would capture [2, 30, 58]") in out
    assert "Serving needs a GPU" in out
    launch = out[out.index("python -m sglang.launch_server"):]
    for flag in ("--model-path moonshotai/Kimi-K2.5", "--speculative-algorithm EAGLE3",
                 "--speculative-draft-model-path", "--speculative-num-steps 2", "--speculative-eagle-topk 1",
                 "--speculative-num-draft-tokens 3"):
        assert flag in launch


# --------------------------------------------------------------------------- defects found by adversarial testing

LLAMA_TARGET = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 32, "hidden_size": 4096,
                "vocab_size": 128256}
LLAMA_DRAFT = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 4096, "vocab_size": 128256,
               "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 15, 28]}}


def _pair(tmp_path: Path, target: dict | None = None, draft: dict | None = None) -> tuple[Path, Path]:
    t, d = tmp_path / "target", tmp_path / "draft"
    t.mkdir(exist_ok=True)
    d.mkdir(exist_ok=True)
    (t / "config.json").write_text(json.dumps(LLAMA_TARGET if target is None else target))
    (d / "config.json").write_text(json.dumps(LLAMA_DRAFT if draft is None else draft))
    return t, d


def _one_error_line(code: int, out: str, err: str) -> str:
    assert code == 2 and out == "", err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("eagle-cycle wiring: error: ")
    return err


@pytest.mark.parametrize("where", ["target", "draft", "safetensors", "index"])
def test_deeply_nested_json_is_invalid_json(tmp_path, capsys, where):
    target, draft = _pair(tmp_path)
    deep = "[" * 100_000
    if where in ("target", "draft"):
        ((target if where == "target" else draft) / "config.json").write_text(deep)
    elif where == "safetensors":
        (draft / "model.safetensors").write_bytes(struct.pack("<Q", len(deep)) + deep.encode())
    else:
        (draft / "model.safetensors.index.json").write_text(deep)
    err = _one_error_line(*run_cli(capsys, str(target), str(draft)))
    assert "nested too deeply" in err and ("invalid JSON" in err or "corrupt safetensors header" in err)


def test_object_ids_are_non_integer_ids(tmp_path, capsys):
    draft = {**LLAMA_DRAFT, "architectures": ["Eagle3DeepseekV2ForCausalLM"],
             "eagle_config": {"eagle_aux_hidden_state_layer_ids": {"a": 1}}}
    target = {**LLAMA_TARGET, "architectures": ["DeepseekV3ForCausalLM"]}  # rule B reads ids[0]
    code, out, err = run_cli(capsys, *map(str, _pair(tmp_path, target, draft)), "--json")
    doc = json.loads(out)
    assert (code, err) == (1, "")
    assert [p["code"] for p in doc["problems"] if p["level"] == "error"] == ["non_integer_ids"]
    assert doc["positions"] is None and doc["stock_positions"] is None


@pytest.mark.parametrize("ids", ["1,2,3", [True, False, True], [2.0, 16.0, 29.0]])
def test_refused_ids_claim_no_stock_capture(tmp_path, capsys, ids):
    draft = {**LLAMA_DRAFT, "eagle_config": {"eagle_aux_hidden_state_layer_ids": ids}}
    target, draft = _pair(tmp_path, draft=draft)
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    assert code == 1 and json.loads(out)["stock_positions"] is None
    code, out, _ = run_cli(capsys, str(target), str(draft))
    line = next(ln for ln in out.splitlines() if ln.startswith("EAGLE-3 aux wiring:"))
    assert code == 1 and line.endswith("stock SGLang 0.5.23's capture is unknown (it would be handed non-integer ids)")


@pytest.mark.parametrize("n, error", [(1, "id_out_of_range"), (2, "id_out_of_range"), (4, "duplicate_ids"),
                                      (6, "duplicate_ids"), (7, None)])
def test_default_positions_on_tiny_targets(tmp_path, capsys, n, error):
    draft = {k: v for k, v in LLAMA_DRAFT.items() if k != "eagle_config"}
    target, draft = _pair(tmp_path, {**LLAMA_TARGET, "num_hidden_layers": n}, draft)
    code, out, err = run_cli(capsys, str(target), str(draft), "--json")
    doc = json.loads(out)
    errors = [p["code"] for p in doc["problems"] if p["level"] == "error"]
    assert err == "" and doc["reading"] == "default"
    if error is None:
        assert (code, errors, doc["positions"]) == (0, [], [2, 3, 4])
    else:
        assert (code, errors, doc["positions"]) == (1, [error], None)


@pytest.mark.parametrize("key, value", [("num_hidden_layers", 10 ** 30), ("num_hidden_layers", 10_001),
                                        ("num_hidden_layers", 1e30), ("num_hidden_layers", "32"),
                                        ("hidden_size", -1), ("hidden_size", 0), ("hidden_size", "4096"),
                                        ("vocab_size", True)])
def test_unusable_target_sizes_exit_2(tmp_path, capsys, key, value):
    target, draft = _pair(tmp_path, {**LLAMA_TARGET, key: value})
    err = _one_error_line(*run_cli(capsys, str(target), str(draft)))
    assert f"target config {key} is " in err


@pytest.mark.parametrize("role, key, value, words", [
    ("draft", "hidden_size", "x", '"x": expected a positive integer'),
    ("draft", "vocab_size", None, "null: expected a positive integer"),
    ("draft", "num_hidden_layers", 1.0, "1.0: expected a positive integer"),
    ("draft", "draft_vocab_size", True, "true: expected a positive integer or null"),
    ("draft", "num_aux_hidden_states", -3, "-3: expected a positive integer or null"),
    ("draft", "target_hidden_size", "4096", '"4096": expected a positive integer or null'),
    ("target", "vocab_size", None, "null: expected a positive integer"),
    ("target", "hidden_size", 4096.0, "4096.0: expected a positive integer"),
    ("target", "num_hidden_layers", None, "null: expected an integer in [1, 10000]"),
])
def test_malformed_integer_fields_name_file_and_field_exit_2(tmp_path, capsys, role, key, value, words):
    # a draft hidden_size "x" passed with exit 0, a target vocab_size null was read as "vocab unknown"
    over = {key: value}
    target, draft = _pair(tmp_path, {**LLAMA_TARGET, **over} if role == "target" else None,
                          {**LLAMA_DRAFT, **over} if role == "draft" else None)
    path = (target if role == "target" else draft) / "config.json"
    err = _one_error_line(*run_cli(capsys, str(target), str(draft)))
    assert err == f"eagle-cycle wiring: error: {path}: {role} config {key} is {words}\n"


def test_malformed_integer_fields_where_they_are_read(tmp_path, capsys):
    # a wrapped target's field is named by its path in the wrapper
    kimi = {"architectures": ["KimiK25ForConditionalGeneration"],
            "text_config": {"num_hidden_layers": 61, "hidden_size": 4096, "vocab_size": None}}
    target, draft = _pair(tmp_path, kimi, {**LLAMA_DRAFT, "vocab_size": None})
    err = _one_error_line(*run_cli(capsys, str(target), str(draft)))
    assert err == (f"eagle-cycle wiring: error: {target / 'config.json'}: target config text_config.vocab_size is "
                   f"null: expected a positive integer\n")
    # absent fields stay unknown; a null draft_vocab_size is SGLang's "the target's vocabulary and lm_head"
    draft_cfg = {k: v for k, v in LLAMA_DRAFT.items() if k != "vocab_size"}
    target, draft = _pair(tmp_path, {k: v for k, v in LLAMA_TARGET.items() if k != "vocab_size"},
                          {**draft_cfg, "draft_vocab_size": None, "num_aux_hidden_states": None})
    code, out, err = run_cli(capsys, str(target), str(draft))
    assert (code, err) == (0, "") and "vocab unknown" in out


def test_a_json_of_no_model_is_refused_naming_its_file(tmp_path, capsys):
    # a pair's expected.json given as DRAFT was reported as a draft of no EAGLE-3 class (exit 1)
    target, draft = _pair(tmp_path)
    other = tmp_path / "expected.json"
    other.write_text(json.dumps({"ours": {"positions": [3, 31, 59]}, "stock": {"positions": [2, 30, 58]}}))
    err = _one_error_line(*run_cli(capsys, str(target), str(other)))
    assert err == (f"eagle-cycle wiring: error: {other}: no model's config (none of architectures, model_type, "
                   "hidden_size in it): DRAFT is the draft head's folder or its config.json\n")
    # a target without a layer count is named by its file too
    bare = tmp_path / "seed.json"
    bare.write_text(json.dumps({"about": "a benchmark record", "inputs": {}}))
    err = _one_error_line(*run_cli(capsys, str(bare), str(draft)))
    assert err.startswith(f"eagle-cycle wiring: error: {bare}: target config has no integer num_hidden_layers (")


def test_largest_layer_count_is_accepted(tmp_path, capsys):
    target, draft = _pair(tmp_path, {**LLAMA_TARGET, "num_hidden_layers": 10_000})
    code, out, err = run_cli(capsys, str(target), str(draft), "--json")
    assert (code, err, json.loads(out)["positions"]) == (0, "", [2, 16, 29])


@pytest.mark.parametrize("var, value", [("SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING", "bogus"),
                                        ("SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS", "abc"),
                                        ("SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS", "2,x,28"),
                                        ("SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS", "1,,28"),
                                        ("SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS", "1,15,28,"),
                                        ("SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS", "１,１５,２８"),
                                        ("SGLANG_EAGLE_CYCLE_AUX_CONVENTION", "bogus")])
def test_bad_env_values_exit_2(tmp_path, capsys, monkeypatch, var, value):
    target, draft = _pair(tmp_path)
    monkeypatch.setenv(var, value)
    err = _one_error_line(*run_cli(capsys, str(target), str(draft)))
    assert f"{var}={value!r}" in err


@pytest.mark.parametrize("value, why", [("1,,28", "item 2 of 3 is empty"), ("１,１５,２８", "'１' is not a layer id")])
def test_unusable_env_ids_are_not_read_as_other_ids(tmp_path, capsys, monkeypatch, value, why):
    # 1,,28 was read as [1, 28] and １,１５,２８ as [1, 15, 28]: ids nobody wrote, reported with exit 0 or 1
    target, draft = _pair(tmp_path)
    monkeypatch.setenv("SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS", value)
    err = _one_error_line(*run_cli(capsys, str(target), str(draft), "--json"))
    assert err == (f"eagle-cycle wiring: error: SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS={value!r}: expected "
                   f"comma-separated integer layer ids such as 2,30,58 ({why})\n")


def test_allow_embedding_typo_names_the_accepted_values(tmp_path, capsys, monkeypatch):
    target, draft = _pair(tmp_path)
    monkeypatch.setenv("SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING", "fasle")
    err = _one_error_line(*run_cli(capsys, str(target), str(draft)))
    assert "expected 1 or 0" not in err
    assert err.endswith("SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING='fasle': expected 1, true, yes or on, "
                        "or 0, false, no or off (any case; or unset)\n")
    monkeypatch.setenv("SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING", "false")  # what was meant is accepted
    code, out, err = run_cli(capsys, str(target), str(draft), "--json")
    assert (code, err, json.loads(out)["positions"]) == (0, "", [2, 16, 29])


@pytest.mark.parametrize("arg, words", [("/dev/null", "not a regular file or directory"),
                                        ("-", "not read from stdin"), ("", "empty path"),
                                        ("dangling", "broken symbolic link"),
                                        ("loop1", "loop1: symbolic link loop"),
                                        ("x" * 300, "x: cannot read (File name too long)")])
def test_path_messages_say_what_is_wrong(tmp_path, capsys, monkeypatch, arg, words):
    # a loop was called a broken link whose target did not exist; a name too long was 'cannot write
    # output', the label of a full disk (helper 42)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    _, draft = _pair(tmp_path)
    err = _one_error_line(*run_cli(capsys, arg, str(draft)))
    assert words in err and "no such file" not in err and "not in the" not in err and "has no config.json" not in err
    assert "cannot write output" not in err and ("does not exist" not in err or arg == "dangling")


def test_a_file_named_as_weights_is_a_checkpoint_by_its_bytes_only(shared_data, tmp_path, capsys, monkeypatch):
    # `wiring TARGET rand.bin`, random bytes in the working directory, said "rand.bin: a checkpoint file,
    # not a model's config.json: its folder . has no config.json either": a checkpoint by its name, a
    # folder named "."
    import torch

    target, _ = _materialise(shared_data / "configs" / "05-llama31-8b-specforge-no-ids", tmp_path / "pair")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (work / "rand.bin").write_bytes(bytes(range(7, 256)) * 16)
    err = _one_error_line(*run_cli(capsys, str(target), "rand.bin"))
    assert err == (f"eagle-cycle wiring: error: rand.bin: a file, not a model's config.json: its folder {work} has "
                   "no config.json either\n")
    torch.save({"fc.weight": torch.zeros(2, 6)}, work / "pytorch_model.bin")   # a real one stays a checkpoint
    err = _one_error_line(*run_cli(capsys, str(target), "pytorch_model.bin"))
    assert err == (f"eagle-cycle wiring: error: pytorch_model.bin: a checkpoint file, not a model's config.json: "
                   f"its folder {work} has no config.json either\n")


def test_a_fifo_in_the_draft_folder_is_refused_not_waited_on(tmp_path):
    # a FIFO named model.safetensors blocked the header read for ever (helper 42)
    target, draft = _pair(tmp_path)
    (draft / "model.safetensors").unlink(missing_ok=True)
    os.mkfifo(draft / "model.safetensors")
    proc = run_subprocess(str(target), str(draft))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == f"eagle-cycle wiring: error: {draft / 'model.safetensors'}: not a regular file\n"


def test_a_fifo_index_or_shard_is_named(tmp_path):
    # a FIFO shard was called missing, a FIFO index passed over without a word (helper 45)
    target, draft = _pair(tmp_path)
    (draft / "model.safetensors").unlink(missing_ok=True)
    (draft / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"fc.weight": "s1.safetensors"}}))
    os.mkfifo(draft / "s1.safetensors")
    proc = run_subprocess(str(target), str(draft))
    assert proc.returncode == 2 and proc.stderr.strip().endswith("shard s1.safetensors (holding fc.weight) is not a "
                                                                 "regular file")
    (draft / "model.safetensors.index.json").unlink()
    os.mkfifo(draft / "model.safetensors.index.json")
    proc = run_subprocess(str(target), str(draft))
    assert proc.returncode == 2 and proc.stderr.strip().endswith("model.safetensors.index.json: not a regular file")


def test_swapped_target_and_draft_are_named(tmp_path, capsys):
    # an EAGLE-3 head given as TARGET was checked as a 1-layer llama target ('declare the draft's ids')
    target, draft = _pair(tmp_path)
    err = _one_error_line(*run_cli(capsys, str(draft), str(target)))
    assert err.strip() == (f"eagle-cycle wiring: error: TARGET {draft} is an EAGLE-3 draft head (LlamaForCausalLMEagle3), "
                           f"and DRAFT {target} is not one: swap the two (usage: eagle-cycle wiring TARGET DRAFT)")


def test_a_swapped_head_whose_architectures_name_the_targets_class_is_named(tmp_path, capsys):
    """The draft head of shared case 12 says LlamaForCausalLM (no Eagle3 class) but carries
    draft_vocab_size and one layer. Given as TARGET, it had been checked as a 1-layer target (exit 1,
    "declare the draft's ids"; helper 99). In the right order it is still checked (exit 1)."""
    head = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
            "num_hidden_layers": 1, "vocab_size": 128256, "draft_vocab_size": 32000}
    target, draft = _pair(tmp_path, draft=head)
    err = _one_error_line(*run_cli(capsys, str(draft), str(target)))
    assert err.strip() == (f"eagle-cycle wiring: error: TARGET {draft} looks like a draft head (draft_vocab_size, 1 "
                           f"layer; its architectures say LlamaForCausalLM), and DRAFT {target} like a target (32 "
                           f"layers): swap the two (usage: eagle-cycle wiring TARGET DRAFT)")
    code, _, _ = run_cli(capsys, str(target), str(draft))
    assert code == 1
    # a small target without draft marks is no head: checked as given
    small = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2, "hidden_size": 4096, "vocab_size": 128256}
    (tmp_path / "small").mkdir()
    target, draft = _pair(tmp_path / "small", target=small)
    code, _, err = run_cli(capsys, str(target), str(draft))
    assert code != 2 or "swap" not in err


def test_the_target_given_as_draft_too_is_named(shared_data, tmp_path, capsys):
    # `wiring T T` checked Llama-3.1-8B against itself (not_eagle3_architecture, exit 1) and told the
    # user to set the ids "in the draft's config.json", the target's own
    target, draft = _materialise(shared_data / "configs" / "05-llama31-8b-specforge-no-ids", tmp_path)
    why = "give the draft head's folder (usage: eagle-cycle wiring TARGET DRAFT)"
    for same in (str(target), str(target / "config.json"), str(target) + "/./"):
        err = _one_error_line(*run_cli(capsys, str(target), same))
        assert err.strip() == (f"eagle-cycle wiring: error: DRAFT {same} is the same config as TARGET "
                               f"({target / 'config.json'}): {why}")
    # another file of the same content: named by both files
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(target / "config.json", copy / "config.json")
    err = _one_error_line(*run_cli(capsys, str(target), str(copy)))
    assert err.strip() == (f"eagle-cycle wiring: error: DRAFT {copy} is the same config as TARGET {target} "
                           f"(identical content: {copy / 'config.json'} and {target / 'config.json'} hold the same "
                           f"JSON): {why}")
    # the draft head twice: the target is what is missing
    err = _one_error_line(*run_cli(capsys, str(draft), str(draft)))
    assert err.strip() == (f"eagle-cycle wiring: error: TARGET {draft} is an EAGLE-3 draft head "
                           f"(LlamaForCausalLMEagle3), and DRAFT {draft} is the same config ({draft / 'config.json'}): "
                           "give the target model's folder as TARGET (usage: eagle-cycle wiring TARGET DRAFT)")
    assert run_cli(capsys, str(target), str(draft))[0] == 0   # the pair itself is fine


def test_revision_with_a_local_path_is_warned_about(tmp_path, capsys):
    target, draft = _pair(tmp_path)
    code, out, err = run_cli(capsys, str(target), str(draft), "--target-revision", "v2", "--json")
    assert code == 0 and json.loads(out)["positions"] == [2, 16, 29]
    assert err.strip().splitlines() == [f"eagle-cycle wiring: warning: --target-revision v2 ignored: {target} is a "
                                        f"local path (revisions select a snapshot of a cached Hugging Face repo id)"]


def test_misspelt_variable_is_named_and_the_check_runs(tmp_path, capsys, monkeypatch):
    # a typo in a variable name used to be ignored without a word: the check ran on the draft's ids
    target, draft = _pair(tmp_path)
    monkeypatch.setenv("SGLANG_EAGLE_CYCLE_AUX_LAYERS_IDS", "2,14,27")
    code, out, err = run_cli(capsys, str(target), str(draft), "--json")
    assert code == 0 and json.loads(out)["positions"] == [2, 16, 29]
    assert err == ("eagle-cycle wiring: warning: SGLANG_EAGLE_CYCLE_AUX_LAYERS_IDS is set but nothing reads it; "
                   "did you mean SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS?\n")


# --------------------------------------------------------------------------- issue 14, items 5-9

KIMI_CASE = "01-kimi-k25-ids-2-30-58-layer-output"


@pytest.mark.parametrize("algorithm", ["EAGLE", "NEXTN", "eagle"])
def test_eagle3_head_under_algorithm_eagle_exits_1(shared_data, tmp_path, capsys, algorithm):
    target, draft = _materialise(shared_data / "configs" / KIMI_CASE, tmp_path)
    code, out, err = run_cli(capsys, str(target), str(draft), "--algorithm", algorithm, "--json")
    doc = json.loads(out)
    assert code == 1 and err == ""
    assert [(p["level"], p["code"]) for p in doc["problems"]] == [("error", "algorithm_not_eagle3")]
    code, out, _ = run_cli(capsys, str(target), str(draft), "--algorithm", algorithm)
    assert code == 1 and "error    algorithm_not_eagle3:" in out and "--speculative-algorithm EAGLE3" in out
    assert f"algorithm: {algorithm.upper()}" in out
    # the default is EAGLE3: the issue example is unchanged
    assert run_cli(capsys, str(target), str(draft), "--algorithm", "EAGLE3", "--json")[0] == 0


@pytest.mark.parametrize("argv,words", [
    (("--algorithm", "MEDUSA"), "invalid choice"),
    # echoed as typed: 'BOGUS' had been the upper-cased value
    (("--algorithm", "bogus"),
     "--algorithm: invalid choice: 'bogus' (choose from 'EAGLE3', 'EAGLE', 'NEXTN'; any case)"),
    (("--context-length", "0"), "expected an integer >= 1"),
    (("--context-length", "lots"), "expected an integer >= 1"),
])
def test_bad_algorithm_or_context_length_is_one_line_exit_2(tmp_path, argv, words):
    target, draft = _pair(tmp_path)
    proc = run_subprocess(str(target), str(draft), *argv)
    assert proc.returncode == 2 and proc.stdout == "" and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and words in proc.stderr


def test_use_aux_hidden_state_false_through_the_cli(tmp_path, capsys):
    draft = {**LLAMA_DRAFT, "eagle_config": {**LLAMA_DRAFT["eagle_config"], "use_aux_hidden_state": False}}
    target, d = _pair(tmp_path, draft=draft)
    _header_only(d / "model.safetensors", {"fc.weight": [4096, 12288]})
    code, out, _ = run_cli(capsys, str(target), str(d), "--json")
    assert code == 1 and [p["code"] for p in json.loads(out)["problems"]] == ["aux_capture_off_fc_mismatch"]


def test_misspelt_ids_key_through_the_cli(tmp_path, capsys):
    draft = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 4096, "vocab_size": 128256,
             "eagle_aux_hidden_states_layer_ids": [1, 15, 28]}
    target, d = _pair(tmp_path, draft=draft)
    code, out, _ = run_cli(capsys, str(target), str(d), "--json")
    problems = {p["code"]: p for p in json.loads(out)["problems"]}
    assert code == 0 and problems["ids_key_misspelt"]["level"] == "warning"
    assert "'eagle_aux_hidden_states_layer_ids'" in problems["ids_key_misspelt"]["message"]
    assert "'eagle_config.eagle_aux_hidden_state_layer_ids'" in problems["ids_key_misspelt"]["message"]


def test_short_context_draft_is_a_note_not_a_warning(tmp_path, capsys):
    target, draft = _pair(tmp_path, target={**LLAMA_TARGET, "max_position_embeddings": 131072},
                          draft={**LLAMA_DRAFT, "max_position_embeddings": 2048})
    code, out, err = run_cli(capsys, str(target), str(draft), "--json")
    assert code == 0 and err == ""
    (note,) = json.loads(out)["problems"]
    assert (note["level"], note["code"]) == ("info", "draft_context_shorter")
    assert "2048" in note["message"] and "131072" in note["message"]
    code, out, _ = run_cli(capsys, str(target), str(draft))
    assert code == 0 and "  info     draft_context_shorter: " in out and "0 errors, 0 warnings, 1 note" in out
    # the server's --context-length decides when given
    assert json.loads(run_cli(capsys, str(target), str(draft), "--context-length", "2048", "--json")[1])[
        "problems"] == []
    code, out, _ = run_cli(capsys, str(target), str(draft), "--context-length", "1000000", "--json")
    assert "1000000" in json.loads(out)["problems"][0]["message"]
    # a draft with at least the target's context: nothing
    _pair(tmp_path, target={**LLAMA_TARGET, "max_position_embeddings": 131072},
          draft={**LLAMA_DRAFT, "max_position_embeddings": 131072})
    code, out, _ = run_cli(capsys, str(target), str(draft))
    assert code == 0 and "draft_context_shorter" not in out and out.count("0 errors, 0 warnings\n") == 1


def test_eagle31_head_for_kimi_same_verdict_plus_variant(shared_data, tmp_path, capsys):
    target, draft = _materialise(shared_data / "configs" / KIMI_CASE, tmp_path)
    plain_code, plain_json, _ = run_cli(capsys, str(target), str(draft), "--json")
    _, plain_text, _ = run_cli(capsys, str(target), str(draft))
    cfg = json.loads((draft / "config.json").read_text())
    (draft / "config.json").write_text(json.dumps({**cfg, "fc_norm": True, "norm_output": True}))
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    assert (code, json.loads(out)) == (plain_code, json.loads(plain_json))
    _, text, _ = run_cli(capsys, str(target), str(draft))
    variant = [line for line in text.splitlines() if line.strip().startswith("variant:")]
    assert variant == ["        variant: LlamaForCausalLMEagle3 (fc_norm: per-state RMSNorm before fc, EAGLE 3.1; "
                       "norm_output: post-norm hidden states out, EAGLE 3.1)"]
    assert [line for line in text.splitlines() if "variant:" not in line] == \
        [line for line in plain_text.splitlines() if "variant:" not in line]


def test_convention_set_is_not_asked_for_again(tmp_path, capsys, monkeypatch):
    target, draft = _pair(tmp_path, draft={**LLAMA_DRAFT, "eagle_config": {
        "eagle_aux_hidden_state_layer_ids": [2, 16, 29]}})
    monkeypatch.setenv("SGLANG_EAGLE_CYCLE_AUX_CONVENTION", "input")
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    (msg,) = [p["message"] for p in json.loads(out)["problems"] if p["code"] == "stock_differs"]
    assert "SGLANG_EAGLE_CYCLE_AUX_CONVENTION=input is set" in msg and "set SGLANG_EAGLE_CYCLE_AUX_CONVENTION" not in msg


def test_a_checkpoint_without_fc_weight_is_an_error(tmp_path, capsys):
    """SGLang loads the draft's fc from fc.weight / model.fc.weight only; a checkpoint without it
    leaves fc uninitialised and the draft serves noise. Before helper 56 the check passed (exit 0)."""
    target, draft = _pair(tmp_path)
    _header_only(draft / "model.safetensors", {"lm_head.weight": [128256, 4096], "d2t": [128256]})
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    errors = [p for p in json.loads(out)["problems"] if p["level"] == "error"]
    assert code == 1 and [p["code"] for p in errors] == ["fc_width_mismatch"]
    assert "no fc.weight" in errors[0]["message"]
    # with the model. prefix SGLang loads it: no problem
    _header_only(draft / "model.safetensors", {"model.fc.weight": [4096, 3 * 4096], "lm_head.weight": [128256, 4096]})
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    assert code == 0 and json.loads(out)["problems"] == []
    # aux capture off: SGLang skips fc when the state is as wide as the draft (nothing to load)
    off = dict(LLAMA_DRAFT, eagle_config={"use_aux_hidden_state": False})
    target, draft = _pair(tmp_path, draft=off)
    _header_only(draft / "model.safetensors", {"lm_head.weight": [128256, 4096]})
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    assert "no fc.weight" not in out
    # a draft that is no EAGLE-3 head (a one-layer Llama; the target's own config is refused as such)
    # has not_eagle3_architecture, nothing more
    target, draft = _pair(tmp_path, draft=dict(LLAMA_TARGET, num_hidden_layers=1))
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    assert code == 1 and "no fc.weight" not in out and "not_eagle3_architecture" in out


def test_a_head_storing_only_its_layer_and_norm_is_read_as_a_checkpoint(tmp_path, capsys):
    """A head trained on the target's last hidden state (use_aux_hidden_state false; ModelOpt builds no
    fc for it) that takes lm_head from the target stores only its decoder layer and norm, none of the
    tensors the header reader tracks. The reader returned {} as for no checkpoint, so the check took fc
    as SGLang builds it (3 states) and stopped the launch with aux_capture_off_fc_mismatch, though
    SGLang 0.5.23 never applies that fc: the draft loads and runs. Now the reader marks the checkpoint
    read, the problem is the aux_capture_off warning (exit 0), and the report says what it found."""
    layer = {"midlayer.self_attn.q_proj.weight": [4096, 8192], "midlayer.mlp.down_proj.weight": [4096, 14336],
             "norm.weight": [4096]}
    off = dict(LLAMA_DRAFT, eagle_config={"use_aux_hidden_state": False})
    target, draft = _pair(tmp_path, draft=off)
    _header_only(draft / "model.safetensors", layer)
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    levels = {p["code"]: p["level"] for p in json.loads(out)["problems"]}
    assert code == 0 and levels.get("aux_capture_off") == "warning" and "error" not in levels.values(), levels
    code, out, _ = run_cli(capsys, str(target), str(draft))
    assert "checkpoint read: no fc, lm_head, d2t" in out and "no safetensors header found" not in out
    # the same checkpoint where SGLang applies fc (aux capture on): fc stays unloaded, an error
    (tmp_path / "on").mkdir()
    target, draft = _pair(tmp_path / "on", draft=LLAMA_DRAFT)
    _header_only(draft / "model.safetensors", layer)
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    assert code == 1 and [p["code"] for p in json.loads(out)["problems"] if p["level"] == "error"] \
        == ["fc_width_mismatch"] and "no fc.weight" in out


def test_no_fc_weight_is_fine_where_sglang_skips_fc(tmp_path, capsys):
    """SGLang 0.5.23 applies the draft's fc only when the captured states differ in width from its
    embeddings: one aux state as wide as the draft's hidden size never goes through fc, so a checkpoint
    without fc.weight serves as trained. The missing-fc.weight error stopped that launch."""
    one = dict(LLAMA_DRAFT, eagle_config={"eagle_aux_hidden_state_layer_ids": [15]})
    target, draft = _pair(tmp_path, draft=one)
    _header_only(draft / "model.safetensors", {"lm_head.weight": [128256, 4096], "d2t": [128256]})
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    assert code == 0 and "no fc.weight" not in out


def test_an_fc_stored_quantised_is_not_called_missing(tmp_path, capsys):
    """A draft whose fc is stored quantised (fc.qweight with its scales) loads in SGLang's Kimi-K2.5 MLA
    head, whose fc is quantisable: the missing-fc.weight error, which stops a launch, is not raised on
    it (helper 59), in one file or named by an index; a checkpoint with no fc at all still is."""
    mla = dict(LLAMA_DRAFT, architectures=["Eagle3DeepseekV2ForCausalLM"])
    target, draft = _pair(tmp_path, draft=mla)
    quant = {"fc.qweight": [4096, 1536], "fc.scales": [96, 4096], "lm_head.weight": [128256, 4096],
             "d2t": [128256]}
    _header_only(draft / "model.safetensors", quant)
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    assert code == 0 and "no fc.weight" not in out
    (draft / "model.safetensors").unlink()
    _header_only(draft / "a.safetensors", {"lm_head.weight": [128256, 4096], "d2t": [128256]})
    _header_only(draft / "b.safetensors", {"fc.weight_packed": [4096, 1536]})
    (draft / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "lm_head.weight": "a.safetensors", "d2t": "a.safetensors", "fc.weight_packed": "b.safetensors"}}))
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    assert code == 0 and "no fc.weight" not in out
    (draft / "b.safetensors").unlink()
    (draft / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "lm_head.weight": "a.safetensors", "d2t": "a.safetensors"}}))
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    assert code == 1 and "no fc.weight" in out


def test_an_fc_stored_quantised_is_an_error_for_the_llama_head(tmp_path, capsys):
    """LlamaForCausalLMEagle3 builds fc as a plain torch Linear: it loads fc.weight / model.fc.weight and
    nothing else, so an fc stored only quantised (AWQ's fc.qweight, prefixed or not) leaves it unloaded
    (test/test_mla_head_sglang.py shows it on the class). The check passed such a draft (exit 0), since
    helper 59, for a quantisable head it is not."""
    target, draft = _pair(tmp_path)
    for prefix in ("", "model."):
        _header_only(draft / "model.safetensors", {f"{prefix}fc.qweight": [4096, 1536],
                                                   f"{prefix}fc.scales": [96, 4096],
                                                   "lm_head.weight": [128256, 4096], "d2t": [128256]})
        code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
        errors = [p for p in json.loads(out)["problems"] if p["level"] == "error"]
        assert code == 1 and [p["code"] for p in errors] == ["fc_width_mismatch"], prefix
        assert errors[0]["message"].startswith("the draft checkpoint stores its fc only quantised (fc.qweight")
        assert "LlamaForCausalLMEagle3 builds fc as a plain linear layer" in errors[0]["message"]
    # a BF16 fc.weight (here beside a stray scale) is a weight the Llama head loads as it is: no error
    # (stored fp8 it is fc_scale_dropped: test_an_fp8_fc_with_its_scale_stops_the_llama_head)
    _header_only(draft / "model.safetensors", {"fc.weight": [4096, 3 * 4096], "fc.weight_scale_inv": [32, 96],
                                               "lm_head.weight": [128256, 4096], "d2t": [128256]})
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    assert code == 0, out


def test_an_fp8_fc_with_its_scale_stops_the_llama_head(tmp_path, capsys):
    """fc.weight stored F8_E4M3 with fc.weight_scale_inv: SGLang 0.5.23's LlamaForCausalLMEagle3 casts the fp8
    values into its float fc and drops the scale (test/test_mla_head_sglang.py). The CLI read only shapes and
    passed it (exit 0). Now exit 1 with fc_scale_dropped, in one file and sharded; the MLA head passes
    with the checkpoint's fp8 quantization_config (its fc is fp8 then) and fails without."""
    from conftest import write_safetensors_header as write_header_only

    target, draft = _pair(tmp_path)
    rest = {"lm_head.weight": [128256, 4096], "d2t": [128256]}
    fp8 = {"fc.weight": "F8_E4M3", "fc.weight_scale_inv": "F32"}
    write_header_only(draft / "model.safetensors", {"fc.weight": [4096, 3 * 4096], "fc.weight_scale_inv": [32, 96],
                                                    **rest}, dtypes=fp8)
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    errors = [p for p in json.loads(out)["problems"] if p["level"] == "error"]
    assert code == 1 and [p["code"] for p in errors] == ["fc_scale_dropped"]
    assert errors[0]["message"].startswith("the draft checkpoint stores fc.weight as F8_E4M3 with its scale "
                                           "fc.weight_scale_inv: SGLang 0.5.23's LlamaForCausalLMEagle3 builds fc")
    code, text, _ = run_cli(capsys, str(target), str(draft))
    assert code == 1 and "fc.weight [4096, 12288] F8_E4M3, lm_head.weight" in text
    assert text.count("error    fc_scale_dropped: ") == 1 and "fc.weight.scales" not in text
    # sharded: the scale in its own shard, named by the weight_map
    (draft / "model.safetensors").unlink()
    write_header_only(draft / "a.safetensors", {"fc.weight": [4096, 3 * 4096], **rest}, dtypes=fp8)
    write_header_only(draft / "b.safetensors", {"fc.weight_scale_inv": [32, 96]}, {"fc.weight_scale_inv": "F32"})
    (draft / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "fc.weight": "a.safetensors", "lm_head.weight": "a.safetensors", "d2t": "a.safetensors",
        "fc.weight_scale_inv": "b.safetensors"}}))
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    assert code == 1 and [p["code"] for p in json.loads(out)["problems"] if p["level"] == "error"] == ["fc_scale_dropped"]
    # the MLA head: with the checkpoint's fp8 quantization_config its fc is fp8 and loads both; without, not
    quant = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
    for config, want in (({"quantization_config": quant}, 0), ({}, 1)):
        (draft / "config.json").write_text(json.dumps({**LLAMA_DRAFT, "architectures": ["Eagle3DeepseekV2ForCausalLM"],
                                                       **config}))
        code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
        assert code == want, (config, out)
    # a ModelOpt hf_quant_config.json beside the checkpoint is the MLA head's quantisation config too
    (draft / "hf_quant_config.json").write_text(json.dumps({"quantization": {"quant_algo": "FP8"}}))
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    assert code == 0, out


def test_other_prefixed_tensors_are_an_error_for_the_mla_head_only(tmp_path, capsys):
    """SGLang 0.5.23's Eagle3DeepseekV2ForCausalLM skips every model.X, not only model.fc.weight: a draft
    storing its final norm and decoder layer (or its quantised fc) that way serves with them uninitialised
    (test/test_mla_head_sglang.py shows it on the class). The check passed both (exit 0) before helper 66;
    LlamaForCausalLMEagle3 loads them, and passes."""
    mla = dict(LLAMA_DRAFT, architectures=["Eagle3DeepseekV2ForCausalLM"])
    target, draft = _pair(tmp_path, draft=mla)
    tensors = {"lm_head.weight": [128256, 4096], "d2t": [128256]}
    layer = {"model.norm.weight": [4096], "model.layers.0.hidden_norm.weight": [4096],
             "model.layers.0.self_attn.o_proj.weight": [4096, 4096]}
    _header_only(draft / "model.safetensors", {"fc.weight": [4096, 3 * 4096], **layer, **tensors})
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    errors = [p for p in json.loads(out)["problems"] if p["level"] == "error"]
    assert code == 1 and [p["code"] for p in errors] == ["weight_not_loaded"]
    assert errors[0]["message"].startswith(
        "the draft checkpoint stores model.layers.0.hidden_norm.weight, model.layers.0.self_attn.o_proj.weight, "
        "model.norm.weight only under the model. prefix, which SGLang 0.5.23's Eagle3DeepseekV2ForCausalLM skips")
    code, text, _ = run_cli(capsys, str(target), str(draft))
    assert code == 1 and "error    weight_not_loaded: the draft checkpoint stores model.layers.0.hidden_norm" in text
    assert "model.norm.weight []" not in text
    # a quantised fc stored prefixed, sharded: the MLA head skips it
    (draft / "model.safetensors").unlink()
    _header_only(draft / "a.safetensors", {"norm.weight": [4096], **tensors})
    _header_only(draft / "b.safetensors", {"model.fc.qweight": [4096, 1536], "model.fc.scales": [96, 4096]})
    (draft / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "norm.weight": "a.safetensors", "lm_head.weight": "a.safetensors", "d2t": "a.safetensors",
        "model.fc.qweight": "b.safetensors", "model.fc.scales": "b.safetensors"}}))
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    errors = [p for p in json.loads(out)["problems"] if p["level"] == "error"]
    assert code == 1 and [p["code"] for p in errors] == ["fc_width_mismatch"]
    assert "(model.fc.qweight, model.fc.scales)" in errors[0]["message"]
    # unprefixed, the same quantised fc may load (a quantisable fc): no error
    _header_only(draft / "b.safetensors", {"fc.qweight": [4096, 1536], "fc.scales": [96, 4096]})
    (draft / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "norm.weight": "a.safetensors", "lm_head.weight": "a.safetensors", "d2t": "a.safetensors",
        "fc.qweight": "b.safetensors", "fc.scales": "b.safetensors"}}))
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    assert code == 0 and json.loads(out)["problems"] == []
    # the Llama head loads the prefixed norm and layer
    for f in ("a.safetensors", "b.safetensors", "model.safetensors.index.json"):
        (draft / f).unlink()
    target, draft = _pair(tmp_path, draft=LLAMA_DRAFT)
    _header_only(draft / "model.safetensors", {"fc.weight": [4096, 3 * 4096], **layer, **tensors})
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    assert code == 0 and json.loads(out)["problems"] == []


def test_a_prefixed_fc_is_an_error_for_the_mla_head_only(tmp_path, capsys):
    """SGLang 0.5.23's Eagle3DeepseekV2ForCausalLM (the Kimi-K2.5 MLA head) loads a checkpoint name X as
    model.X: a draft storing model.fc.weight has it skipped ("skipping unexpected weight") and serves
    with fc uninitialised. LlamaForCausalLMEagle3 loads either spelling. Before, both passed (exit 0)."""
    mla = dict(LLAMA_DRAFT, architectures=["Eagle3DeepseekV2ForCausalLM"])
    target, draft = _pair(tmp_path, draft=mla)
    tensors = {"lm_head.weight": [128256, 4096], "d2t": [128256]}
    _header_only(draft / "model.safetensors", {"model.fc.weight": [4096, 3 * 4096], **tensors})
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    errors = [p for p in json.loads(out)["problems"] if p["level"] == "error"]
    assert code == 1 and [p["code"] for p in errors] == ["fc_width_mismatch"]
    assert "model.fc.weight" in errors[0]["message"] and "Eagle3DeepseekV2ForCausalLM" in errors[0]["message"]
    code, text, _ = run_cli(capsys, str(target), str(draft))
    assert "model.fc.weight [4096, 12288]" in text and "model.fc.weight []" not in text
    # the same tensor unprefixed: loaded, no error
    _header_only(draft / "model.safetensors", {"fc.weight": [4096, 3 * 4096], **tensors})
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    assert code == 0 and "fc_width_mismatch" not in out
    # the Llama head takes the prefixed name
    target, draft = _pair(tmp_path, draft=LLAMA_DRAFT)
    _header_only(draft / "model.safetensors", {"model.fc.weight": [4096, 3 * 4096], **tensors})
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    assert code == 0 and "fc_width_mismatch" not in out


@pytest.mark.parametrize("override", ["SGLANG_EAGLE_CYCLE_AUX_CONVENTION=input", "SGLANG_EAGLE_CYCLE_AUX_CONVENTION=stock",
                                      "SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS=1,2,3"])
def test_demo_shows_the_default_reading_whatever_the_shell_overrides(override):
    # with an override in the shell the demo's correction had read "stock SGLang captures [2, 30, 58]
    # (every state one layer early) / with sglang-eagle-cycle [2, 30, 58]": itself contradicted
    key, value = override.split("=")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_EAGLE_CYCLE_")}
    env.update({"EAGLE_CYCLE_DEMO_OFFLINE": "1", key: value})
    proc = subprocess.run([sys.executable, str(REPO / "examples" / "demo.py")], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "with sglang-eagle-cycle         [3, 31, 59]" in out
    assert ("ids [2, 30, 58] (layer outputs, draft eagle_config) -> capture positions [3, 31, 59] of 61; "
            "stock SGLang 0.5.23 would capture [2, 30, 58]") in out
    assert f"left out here, so that the demo shows the plugin's default reading: {override}" in out


def test_a_prefixed_fc_is_no_error_where_sglang_builds_the_llama_head(tmp_path, capsys):
    """architectures ["LlamaForCausalLMEagle3", "Eagle3DeepseekV2ForCausalLM"]: SGLang 0.5.23 builds the
    first class it has (ModelRegistry.resolve_model_cls), the Llama head, which loads model.fc.weight;
    the report's variant line says so too. The prefixed-fc error had been raised because the MLA head
    is named anywhere in the list, and would have stopped a launch that loads its fc."""
    both = dict(LLAMA_DRAFT, architectures=["LlamaForCausalLMEagle3", "Eagle3DeepseekV2ForCausalLM"])
    target, draft = _pair(tmp_path, draft=both)
    tensors = {"lm_head.weight": [128256, 4096], "d2t": [128256]}
    _header_only(draft / "model.safetensors", {"model.fc.weight": [4096, 3 * 4096], **tensors})
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    assert code == 0 and "fc_width_mismatch" not in out, out
    # listed first, the MLA head is the class built: still the error
    target, draft = _pair(tmp_path, draft=dict(both, architectures=both["architectures"][::-1]))
    _header_only(draft / "model.safetensors", {"model.fc.weight": [4096, 3 * 4096], **tensors})
    code, out, _ = run_cli(capsys, str(target), str(draft), "--json")
    assert code == 1 and "fc_width_mismatch" in out
