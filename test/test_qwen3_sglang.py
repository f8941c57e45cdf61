"""Proof on SGLang's own Qwen3 and Qwen3-MoE code: the plugin captures the layers the draft names.

SGLang 0.5.23's ``Qwen3ForCausalLM`` and ``Qwen3MoeForCausalLM`` load tiny random checkpoints made
by ``transformers`` through their own loader (test/sglang_cpu.py); the draft's config declares ids
[1, 3, 5], which the contract (README, "Aux-layer wiring") reads as the outputs of decoder layers
1, 3, 5: ``output_hidden_states`` indices 2, 4, 6. test/qwen3_probe.py runs in two fresh
interpreters side by side (HookRegistry cannot un-patch): one with the plugin loaded by SGLang's own
``load_plugins()``, one stock; both read these ids as id + 1, so both must capture the same states.

Tolerance: the captures are compared with ``torch.allclose(rtol=1e-5, atol=1e-5)`` in fp32. SGLang
and ``transformers`` compute the same functions; where their kernels group the arithmetic
differently (fused QKV / gate-up GEMMs, SGLang's expert-sorted MoE) rounding may differ at about
1e-7 of the value per operation, a few times 1e-6 over 8 layers of states up to ~7. Measured on
this machine the difference is exactly 0 for both models. A capture one layer off differs by more
than 1 (``next_nearest_diff``, asserted), five orders of magnitude above the tolerance.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from conftest import computed_once
from sglang_fork import run_python

if importlib.util.find_spec("sglang") is None:   # cheap; `import sglang` itself takes ~7 s here
    pytest.skip("SGLang is not installed", allow_module_level=True)

HERE = Path(__file__).resolve().parent
ARCHS = ("qwen3", "qwen3_moe")
CLASSES = {"qwen3": "Qwen3ForCausalLM", "qwen3_moe": "Qwen3MoeForCausalLM"}
IDS = [1, 3, 5]
POSITIONS = [2, 4, 6]          # output_hidden_states indices: id i -> i + 1
RTOL = ATOL = 1e-5


def _probes(work: Path) -> dict:
    """Both modes, each in its own interpreter (forked from the CPU-engine server, SGLang imported
    once): ``{"plugin": {...}, "stock": {...}}``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_EAGLE_CYCLE", "SGLANG_PLUGINS"))}
    env.setdefault("OMP_NUM_THREADS", "1")
    out = {}
    for mode in ("plugin", "stock"):
        proc = run_python([HERE / "qwen3_probe.py", mode, work], env=env, timeout=300, cpu_engine=True)
        assert proc.returncode == 0, f"{mode} probe failed:\n{proc.stderr[-4000:]}"
        out[mode] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


@pytest.fixture(scope="module")
def probes(tmp_path_factory):
    result = computed_once(tmp_path_factory, "qwen3_probe",
                           lambda: _probes(tmp_path_factory.mktemp("qwen3_probe")))
    for r in result.values():
        if "skip" in r:
            pytest.skip(r["skip"])
    return result


def _tensors(run: dict, arch: str) -> dict:
    from safetensors.torch import load_file

    return load_file(run[arch]["tensors"])


def _want(t: dict, positions):
    import torch

    return torch.cat([t["hf_hidden_states"][p] for p in positions], dim=-1)


def test_the_plugin_wraps_qwen3_setters_and_stock_does_not(probes):
    assert probes["plugin"]["wrapped"] == {"Qwen3ForCausalLM": True, "Qwen3MoeForCausalLM": True}
    assert probes["stock"]["wrapped"] == {"Qwen3ForCausalLM": False, "Qwen3MoeForCausalLM": False}


@pytest.mark.parametrize("mode", ["plugin", "stock"])
@pytest.mark.parametrize("arch", ARCHS)
def test_every_parameter_is_loaded_by_sglangs_own_loader(probes, mode, arch):
    r = probes[mode][arch]
    assert r["class"] == CLASSES[arch]
    assert r["target_load"]["params"] > 50 and r["target_load"]["nan_left"] == []
    assert r["sha256"] == probes["plugin"][arch]["sha256"]   # both interpreters built the same checkpoint


@pytest.mark.parametrize("mode", ["plugin", "stock"])
@pytest.mark.parametrize("arch", ARCHS)
def test_draft_ids_135_capture_hf_hidden_states_246(probes, mode, arch):
    import torch

    r = probes[mode][arch]
    run = r["default"]
    assert r["ids"] == IDS                                 # as the draft's eagle_config gives them
    assert run["layers_to_capture"] == POSITIONS
    if arch == "qwen3_moe":   # its forward reads per-layer flags, not the list
        assert run["flagged_layers"] == POSITIONS
    t = _tensors(probes[mode], arch)
    aux, want = t["aux"], _want(t, POSITIONS)
    assert aux.shape == want.shape == (32, 3 * 64)
    assert torch.allclose(aux, want, rtol=RTOL, atol=ATOL), float((aux - want).abs().max())
    # each slice is nearest its own position, and every other position is far off
    assert [c["nearest_position"] for c in run["captured"]] == POSITIONS
    assert min(c["next_nearest_diff"] for c in run["captured"]) > 1.0
    # the whole model matches too: final normed hidden, logits, greedy tokens
    assert run["final_hidden_max_abs_diff"] <= ATOL and run["greedy_equal"] is True


@pytest.mark.parametrize("arch", ARCHS)
def test_stock_and_plugin_capture_the_same_tensors(probes, arch):
    import torch

    plugin, stock = _tensors(probes["plugin"], arch), _tensors(probes["stock"], arch)
    assert torch.equal(plugin["hf_hidden_states"], stock["hf_hidden_states"])
    assert torch.allclose(plugin["aux"], stock["aux"], rtol=RTOL, atol=ATOL)


def test_qwen3_input_convention_moves_the_capture_one_layer(probes):
    import torch

    moved = probes["plugin"]["qwen3"]["convention_input"]
    assert moved["layers_to_capture"] == [1, 3, 5]
    t = _tensors(probes["plugin"], "qwen3")
    assert torch.allclose(t["aux_convention_input"], _want(t, [1, 3, 5]), rtol=RTOL, atol=ATOL)
    assert not torch.allclose(t["aux_convention_input"], _want(t, POSITIONS), rtol=RTOL, atol=ATOL)
