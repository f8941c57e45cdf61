"""Proof on SGLang's own EAGLE-3 head classes of which checkpoint names they load, and that the wiring
check stops exactly the drafts whose tensors they skip (README, "Aux-layer wiring": ``fc_width_mismatch``,
``lm_head_not_loaded``, ``weight_not_loaded``), and which fp8 fc they load with its scale
(``fc_scale_dropped``).

test/mla_fc_probe.py builds ``Eagle3DeepseekV2ForCausalLM`` (the Kimi-K2.5 MLA head) and
``LlamaForCausalLMEagle3`` on the CPU in a fresh interpreter (test/sglang_cpu.py), fills their
parameters with NaN (integers with -5) and loads each parameter's checkpoint name under each spelling
(``X``, ``model.X``, legacy ``midlayer.``): a parameter that does not read 1 afterwards was skipped.
The check then reads header-only checkpoints holding the same names, as the CLI and the server do.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import tiny_mla

import pytest

from sglang_fork import run_python

if importlib.util.find_spec("sglang") is None:
    pytest.skip("SGLang is not installed", allow_module_level=True)

from sglang_eagle_cycle.safetensors_header import read_draft_shapes, write_header_only  # noqa: E402
from sglang_eagle_cycle.wiring import check_pair  # noqa: E402

HERE = Path(__file__).resolve().parent
MLA, LLAMA = "Eagle3DeepseekV2ForCausalLM", "LlamaForCausalLMEagle3"
# a tiny MLA head: 3 aux states of a 64-wide target into a 64-wide draft (fc 192 -> 64)
DRAFT = dict(tiny_mla.CONFIG)
TARGET = {"architectures": ["DeepseekV3ForCausalLM"], "num_hidden_layers": 6, "hidden_size": 64, "vocab_size": 256}
# the same head where every module it builds is used: fc_norm on, and its own embedding (a 96-wide
# target: SGLang shares the target's embedding only when target_hidden_size equals hidden_size)
EVERY = {**DRAFT, "fc_norm": True, "target_hidden_size": 96}
TARGET_96 = {**TARGET, "hidden_size": 96}
# the error codes a skipped tensor gives
SKIP_CODES = {"fc_width_mismatch", "lm_head_not_loaded", "weight_not_loaded"}


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    d = tmp_path_factory.mktemp("mla_head")
    (d / "config.json").write_text(json.dumps({**DRAFT, "fc_norm": True}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_EAGLE_CYCLE", "SGLANG_PLUGINS"))}
    env.setdefault("OMP_NUM_THREADS", "1")
    proc = run_python([HERE / "mla_fc_probe.py", d], env=env, timeout=300, cpu_engine=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _prefixed(name: str) -> bool:
    return name.startswith("model.")


def test_which_names_sglang_loads(probe):
    from sglang_eagle_cycle.safetensors_header import module_of
    from sglang_eagle_cycle.wiring.checks import MLA_LAYER_MODULES

    mla, llama = probe["loaded"][MLA], probe["loaded"][LLAMA]
    # the MLA head loads every name without the model. prefix and none with it (model.d2t aside: it
    # matches d2t by suffix); it fuses q_a_proj with kv_a_proj_with_mqa itself and drops a pre-fused name
    assert mla == {n: (not _prefixed(n) or n == "model.d2t") and "fused_qkv_a" not in n for n in mla}
    assert len(mla) == 76 and mla["norm.weight"] and not mla["model.norm.weight"]
    assert mla["midlayer.hidden_norm.weight"] and not mla["model.layers.0.hidden_norm.weight"]
    assert mla["fc_norm.2.weight"] and not mla["model.fc_norm.2.weight"]
    assert mla["embed_tokens.weight"] and not mla["model.embed_tokens.weight"]
    # it logs most skips; a prefixed q_a_proj / kv_a_proj_with_mqa it caches for fusing and drops silently
    warned = set(probe["warned"][MLA])
    silent = {n for n in mla if _prefixed(n) and not mla[n] and ("_a_proj" in n or "fused_qkv_a" in n)}
    assert silent == {f"model.{layer}.self_attn.{m}.weight" for layer in ("layers.0", "midlayer")
                      for m in ("q_a_proj", "kv_a_proj_with_mqa", "fused_qkv_a_proj_with_mqa")}
    quantised = {n for m in ("fp8", "awq") for n in probe["loaded"][f"{MLA} {m}"] if _prefixed(n)}
    # and the fp8 fc's scale where its fc is unquantised (tests below): the cast fc.weight it does not log
    assert warned == ({n for n in mla if _prefixed(n) and not mla[n]} - silent) | quantised \
        | {"fc.weight_scale", "fc.weight_scale_inv"}
    # the Llama head loads every name either way but model.lm_head.weight
    assert llama == {n: n != "model.lm_head.weight" for n in llama} and len(llama) == 64
    # the check's list of decoder-layer modules is the one the MLA class loads
    assert {module_of(n) for n in mla if mla[n] and n.startswith("layers.0.")} == {f"layers.0.{m}" for m in MLA_LAYER_MODULES}
    # a quantised fc: the MLA head's is quantisable and loads it unprefixed only; the Llama head's fc is a
    # plain torch Linear: fp8 fc.weight lands in it (the scale is dropped), AWQ's qweight never does
    assert probe["loaded"][f"{MLA} fp8"] == {"fc.weight": True, "fc.weight_scale_inv": True,
                                             "model.fc.weight": False, "model.fc.weight_scale_inv": False}
    assert probe["loaded"][f"{MLA} awq"] == {"fc.qweight": True, "fc.qzeros": True, "fc.scales": True,
                                             "model.fc.qweight": False, "model.fc.qzeros": False,
                                             "model.fc.scales": False}
    assert not any(probe["loaded"][f"{LLAMA} awq"].values())
    assert probe["fc_loaded"] == {f"{MLA} fp8": {"fc.*": True, "model.fc.*": False},
                                  f"{MLA} awq": {"fc.*": True, "model.fc.*": False},
                                  f"{LLAMA} fp8": {"fc.*": True, "model.fc.*": True},
                                  f"{LLAMA} awq": {"fc.*": False, "model.fc.*": False}}
    assert quantised == {f"model.fc.{leaf}" for leaf in ("weight", "weight_scale_inv", "qweight", "qzeros", "scales")}


def _checkpoint(folder: Path, names, width: int = 96) -> dict:
    """Write a header-only checkpoint holding ``names`` (a head of a ``width``-wide target) and read it as
    the CLI and the server do."""
    folder.mkdir()
    known = {"fc.weight": [64, 3 * width], "lm_head.weight": [128, 64], "d2t": [128], "fc_norm.0.weight": [width]}
    shapes = {}
    for name in names:   # the shapes the check reads; any other
        shapes[name] = known.get(name[len("model."):] if _prefixed(name) else name, [8])
    write_header_only(folder / "model.safetensors", shapes)
    return read_draft_shapes(folder)


def _skip_errors(target, draft, header) -> set[str]:
    report = check_pair(target, draft, header=header, env={})
    return {p.code for p in report.errors}


def test_the_check_stops_what_sglang_skips_and_passes_what_it_loads(probe, tmp_path):
    """For each class, a checkpoint holding every name the class loads, with one of them (or, for a
    fused pair, its shard) under another spelling: the check reports an error exactly where SGLang
    leaves that parameter unloaded. The head uses every module (fc_norm on, its own embedding), so a
    skipped tensor always matters."""
    for arch in (MLA, LLAMA):
        loaded = probe["loaded"][arch]
        draft = {**EVERY, "architectures": [arch]}
        correct = [n for n in loaded if loaded[n] and not _prefixed(n) and not n.startswith("midlayer.")]
        header = _checkpoint(tmp_path / f"{arch}-correct", correct)
        assert check_pair(TARGET_96, draft, header=header, env={}).errors == [], arch  # no false refusal
        for name in correct:
            others = ["model." + name]
            if name.startswith("layers.0."):   # the legacy decoder-layer spelling, plain and prefixed
                legacy = "midlayer." + name[len("layers.0."):]
                others += [legacy, "model." + legacy]
            for other in others:
                folder = tmp_path / f"{arch}-{other}"
                header = _checkpoint(folder, [other if n == name else n for n in correct])
                errors = _skip_errors(TARGET_96, draft, header) & SKIP_CODES
                assert bool(errors) == (not loaded[other]), (arch, other, errors)


def test_a_quantised_fc_is_checked_as_each_class_loads_it(probe, tmp_path):
    """An fc stored quantised: the MLA head (quantisable fc) loads it unprefixed and skips it prefixed;
    the Llama head (a plain Linear) never loads AWQ's qweight, so its fc stays unloaded either way.
    fc_width_mismatch exactly where the class's fc stays unloaded."""
    rest = ["lm_head.weight", "d2t", "norm.weight"]
    for key, spelt in probe["fc_loaded"].items():
        arch, method = key.split()
        names = sorted({n.replace("model.", "", 1) for n in probe["loaded"][key]})
        for prefix, fc_loaded in (("", spelt["fc.*"]), ("model.", spelt["model.fc.*"])):
            header = _checkpoint(tmp_path / f"{key}-{prefix}", [prefix + n for n in names] + rest, width=64)
            errors = _skip_errors(TARGET, {**DRAFT, "architectures": [arch]}, header)
            assert ("fc_width_mismatch" in errors) == (not fc_loaded), (key, prefix, errors)
            assert errors <= {"fc_width_mismatch"}, (key, prefix, errors)


def test_a_module_sglang_does_not_use_is_no_error_however_spelt(tmp_path):
    """No false refusal: the MLA head skips model.X, but these leave nothing the draft uses unloaded."""
    base = ["fc.weight", "lm_head.weight", "d2t", "norm.weight"]
    cases = {
        # SGLang shares the target's embedding (target_hidden_size == hidden_size)
        "model.embed_tokens.weight": DRAFT,
        # fc_norm off: the class builds no fc_norm (draft_flag_ignored warns about the tensor)
        "model.fc_norm.0.weight": DRAFT,
        # the unprefixed tensor of the same module is there too
        "model.norm.weight": DRAFT,
        # not a module the class builds
        "model.layers.0.self_attn.rotary_emb.inv_freq": EVERY,
        # d2t is matched by suffix
        "model.d2t": DRAFT,
    }
    for name, draft in cases.items():
        width = 96 if draft is EVERY else 64
        header = _checkpoint(tmp_path / name, base + [name], width)
        target = TARGET_96 if draft is EVERY else TARGET
        assert _skip_errors(target, draft, header) == set(), name
    # the first two do matter where the module is used
    for name in ("model.embed_tokens.weight", "model.fc_norm.0.weight"):
        header = _checkpoint(tmp_path / f"every-{name}", base + [name])
        assert _skip_errors(TARGET_96, EVERY, header) == {"weight_not_loaded"}, name


def test_an_fp8_fc_as_each_class_holds_it(probe):
    """fc.weight stored float8_e4m3fn holding 2.0 with its scale 0.5 (the weight meant: 1.0). The Llama head's
    fc is a float torch.nn.Linear under every config: it holds 2.0, the scale nowhere. The MLA head's fc is
    fp8 under an fp8 quantization_config (block or per-tensor) and holds both (1.0); without a config, and
    with Fp8Config() (--quantization fp8 without a checkpoint config: online), it is float and holds 2.0."""
    lost = {"weight_dtype": "float32", "scale_param": False, "effective": 2.0}
    kept = {"weight_dtype": "float8_e4m3fn", "scale_param": True, "effective": 1.0}
    unscaled = {"weight_dtype": "float8_e4m3fn", "scale_param": True, "effective": None}
    both = ("fp8+weight_scale_inv", "fp8+weight_scale")
    expected = {}
    for arch in (MLA, LLAMA):
        for config, stored in (("none", both), ("fp8", ("fp8+weight_scale_inv",)),
                               ("fp8_tensor", ("fp8+weight_scale",)), ("online", both)):
            for label in stored:
                expected[f"{arch} {config} {label}"] = kept if arch == MLA and config.startswith("fp8") else lost
    # a float fc.weight where the MLA head's fc is fp8: its scale stays NaN (the check does not look at this)
    expected[f"{MLA} fp8 f32"] = expected[f"{MLA} fp8_tensor f32"] = unscaled
    assert probe["fp8_values"] == expected


def test_the_check_stops_an_fp8_fc_exactly_where_its_scale_is_dropped(probe, tmp_path):
    """For every class and config the probe measured, a header-only checkpoint storing fc.weight as
    F8_E4M3 with that scale, and the draft config declaring the same quantization_config (Fp8Config()
    online is a server flag the draft config does not show): fc_scale_dropped exactly where the class's
    fc does not hold the weight meant (1.0). The same checkpoint with fc.weight in BF16, F16 or F32
    passes for both classes."""
    from conftest import write_safetensors_header

    sys.path.insert(0, str(HERE))
    from mla_fc_probe import FP8_CONFIGS

    for key, held in probe["fp8_values"].items():
        arch, config, stored = key.split()
        if not stored.startswith("fp8+"):
            continue
        scale = "fc." + stored[len("fp8+"):]
        quant = FP8_CONFIGS[config]
        draft = {**DRAFT, "architectures": [arch], **({"quantization_config": quant} if isinstance(quant, dict) else {})}
        for dtype in ("F8_E4M3", "BF16", "F16", "F32"):
            folder = tmp_path / f"{key}-{dtype}".replace(" ", "_")
            folder.mkdir()
            shapes = {"fc.weight": [64, 192], scale: [2, 6] if scale.endswith("_inv") else [1],
                      "lm_head.weight": [128, 64], "d2t": [128], "norm.weight": [64]}
            write_safetensors_header(folder / "model.safetensors", shapes, {"fc.weight": dtype, scale: "F32"})
            errors = _skip_errors(TARGET, draft, read_draft_shapes(folder))
            wrong = dtype == "F8_E4M3" and held["effective"] != 1.0
            # the checkpoint holds the head's other tensors, so fc is the only thing that can be at fault
            assert errors == ({"fc_scale_dropped"} if wrong else set()), (key, dtype, errors)


def test_an_attention_shard_without_its_partner_is_stopped_as_sglang_drops_it(probe, tmp_path):
    """SGLang's MLA head fuses layers.0.self_attn.q_a_proj with kv_a_proj_with_mqa into its
    fused_qkv_a_proj_with_mqa only once both arrived (the two spellings of the decoder layer pair with
    each other), and drops a lone shard or a pre-fused name silently (no log line): the check gives
    weight_not_loaded exactly where the class's fused parameter stays unloaded."""
    pairs = probe["a_proj_pairs"]
    q, kv, fused = ("layers.0.self_attn.q_a_proj.weight", "layers.0.self_attn.kv_a_proj_with_mqa.weight",
                    "layers.0.self_attn.fused_qkv_a_proj_with_mqa.weight")
    assert pairs == {q: False, kv: False, f"{q}; {kv}": True,
                     f"{q}; midlayer.self_attn.kv_a_proj_with_mqa.weight": True, fused: False}
    loaded = probe["loaded"][MLA]
    correct = [n for n in loaded if loaded[n] and not _prefixed(n) and not n.startswith("midlayer.")]
    assert q in correct and kv in correct
    rest = [n for n in correct if n not in (q, kv)]
    for i, stored in enumerate(pairs):
        header = _checkpoint(tmp_path / f"pair{i}", rest + stored.split("; "))
        report = check_pair(TARGET_96, EVERY, header=header, env={})
        errors = {p.code for p in report.errors}
        assert ("weight_not_loaded" in errors) == (not pairs[stored]), (stored, errors)
        assert errors <= {"weight_not_loaded"}, (stored, errors)
        if not pairs[stored]:
            message = next(p.message for p in report.errors)
            assert message.startswith(f"the draft checkpoint stores {stored.split('; ')[0]}: SGLang 0.5.23's "
                                      f"{MLA} fuses"), message
    # the Llama head builds no MLA attention: such names are no error there
    header = _checkpoint(tmp_path / "llama", rest + [q])
    assert _skip_errors(TARGET_96, {**EVERY, "architectures": [LLAMA]}, header) & {"weight_not_loaded"} == set()
