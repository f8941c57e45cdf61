"""Proof on SGLang's own ``Eagle3DeepseekV2ForCausalLM`` (the Kimi-K2.5 MLA EAGLE-3 head): it loads
the draft's fc from ``fc.weight`` and skips ``model.fc.weight`` (leaving fc as built, uninitialised),
and the wiring check says so for that head while ``LlamaForCausalLMEagle3``, which loads both
spellings, passes (README, "Aux-layer wiring", ``fc_width_mismatch``).

test/mla_fc_probe.py builds the class on the CPU in a fresh interpreter (test/sglang_cpu.py), fills
its parameters with NaN and loads one fc tensor of ones under each name: NaN left in fc means the
name was skipped.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

if importlib.util.find_spec("sglang") is None:
    pytest.skip("SGLang is not installed", allow_module_level=True)

from sglang_eagle_cycle.safetensors_header import read_draft_shapes, write_header_only  # noqa: E402
from sglang_eagle_cycle.wiring import check_pair  # noqa: E402

HERE = Path(__file__).resolve().parent
# a tiny MLA head: 3 aux states of a 64-wide target into a 64-wide draft (fc 192 -> 64)
DRAFT = {"architectures": ["Eagle3DeepseekV2ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 64,
         "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 1,
         "vocab_size": 256, "draft_vocab_size": 128, "q_lora_rank": 32, "kv_lora_rank": 32,
         "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "rms_norm_eps": 1e-6,
         "max_position_embeddings": 256, "rope_theta": 10000.0, "tie_word_embeddings": False,
         "target_hidden_size": 64, "hidden_act": "silu", "torch_dtype": "float32",
         "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3]}}
TARGET = {"architectures": ["DeepseekV3ForCausalLM"], "num_hidden_layers": 6, "hidden_size": 64, "vocab_size": 256}


def test_mla_head_skips_a_prefixed_fc_and_the_check_says_so(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(DRAFT))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_EAGLE_CYCLE", "SGLANG_PLUGINS"))}
    env.setdefault("OMP_NUM_THREADS", "1")
    proc = subprocess.run([sys.executable, str(HERE / "mla_fc_probe.py"), str(tmp_path)], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert loaded == {"fc.weight": True, "model.fc.weight": False,
                      "Eagle3DeepseekV2ForCausalLM lm_head.weight": True,
                      "Eagle3DeepseekV2ForCausalLM model.lm_head.weight": False,
                      "LlamaForCausalLMEagle3 lm_head.weight": True, "LlamaForCausalLMEagle3 model.lm_head.weight": False}
    fc = {k: v for k, v in loaded.items() if "lm_head" not in k}
    shape = [64, 3 * 64]
    headers = {}
    for name, ok in fc.items():   # the check reads the checkpoint's header as the CLI and the server do
        folder = tmp_path / name
        folder.mkdir()
        write_header_only(folder / "model.safetensors", {name: shape, "lm_head.weight": [128, 64], "d2t": [128]})
        headers[name] = read_draft_shapes(folder)
        report = check_pair(TARGET, DRAFT, header=headers[name], env={})
        fc_errors = [p for p in report.errors if p.code == "fc_width_mismatch"]
        assert (not fc_errors) == ok, (name, report.problems)
    # the Llama head loads model.fc.weight: no error there
    llama = {**DRAFT, "architectures": ["LlamaForCausalLMEagle3"]}
    report = check_pair(TARGET, llama, header=headers["model.fc.weight"], env={})
    assert not [p for p in report.errors if p.code == "fc_width_mismatch"]
    # lm_head stored only prefixed: neither head loads it; the draft has its own (draft_vocab_size 128,
    # untied), so it would serve uninitialised: lm_head_not_loaded for both, none with lm_head.weight
    for arch in ("Eagle3DeepseekV2ForCausalLM", "LlamaForCausalLMEagle3"):
        draft = {**DRAFT, "architectures": [arch]}
        for name in ("lm_head.weight", "model.lm_head.weight"):
            folder = tmp_path / f"{arch}-{name}"
            folder.mkdir()
            write_header_only(folder / "model.safetensors", {"fc.weight": shape, name: [128, 64], "d2t": [128]})
            report = check_pair(TARGET, draft, header=read_draft_shapes(folder), env={})
            codes = {p.code for p in report.errors}
            assert ("lm_head_not_loaded" not in codes) == loaded[f"{arch} {name}"], (arch, name, report.problems)
