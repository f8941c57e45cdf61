"""Three gaps of the wiring check, each first measured on SGLang 0.5.23's own code on the CPU.

1. ``fc.weight``'s rows (the draft hidden size fc projects to) were never compared with the draft
   config's ``hidden_size``. ``LlamaForCausalLMEagle3`` builds fc as a ``torch.nn.Linear`` that SGLang's
   ``default_weight_loader`` fills after an ``assert`` on the shape: the launch fails at load.
   ``Eagle3DeepseekV2ForCausalLM`` builds a ``ColumnParallelLinear`` whose ``weight_loader`` narrows the
   stored rows to its own: more rows are cut to the first ``hidden_size`` without a word, fewer fail the
   GPU load (``narrow``); its CPU branch zero-fills them. Now the error ``fc_out_mismatch``.
2. One cause read as two errors: a wrapped save (``module.`` / ``_orig_mod.``) was ``weight_not_loaded``
   and ``fc_width_mismatch`` ("no fc.weight"); a ``.bin`` shard nesting its tensors (the fc among them)
   beside top-level shards was ``checkpoint_nested`` and ``fc_width_mismatch``. Now one error each, unless
   the fc is missing for a second reason.
3. A shard ``pytorch_model.bin.index.json`` names but the folder lacks passed. SGLang globs ``*.bin`` and
   never reads that index (``DefaultModelLoader._prepare_weights``): it loads the shards there are and
   leaves the missing ones' tensors unloaded, silently. Now ``weight_not_loaded`` where the head uses such a
   tensor, exit 2 where no weights are left at all (SGLang: "Cannot find any model weights"), and, for a
   safetensors index, exit 2 for any missing shard (SGLang checks them all first and refuses to load).

The SGLang measurements run this file as a script in a fresh interpreter (``python
test/test_wiring_gaps.py DIR``: SGLang must be imported after ``sglang_cpu.setup()``), which prints one JSON
line.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import tiny_mla

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
KIMI = REPO / "examples" / "kimi-k25"
LLAMA, MLA = "LlamaForCausalLMEagle3", "Eagle3DeepseekV2ForCausalLM"
#: a tiny MLA head: 3 aux states of a 64-wide target into a 64-wide draft (fc [64, 192])
TINY = dict(tiny_mla.CONFIG)
#: fc.weight row counts loaded into the tiny heads' [64, 192] fc
FC_ROWS = (48, 80)
#: the two shards of a sharded PyTorch checkpoint
A, B = "pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin"


# ---------------------------------------------------------------------------------------- the SGLang probe

def _probe(workdir: str) -> dict:
    """Run in a fresh interpreter: SGLang 0.5.23's heads and loader on the CPU (see the module docstring)."""
    sys.path.insert(0, str(HERE))
    import sglang_cpu

    sglang_cpu.setup()
    import torch

    import mla_fc_probe as heads
    import sglang.srt.layers.linear as linear
    from safetensors.torch import save_file
    from sglang.srt.configs.load_config import LoadConfig
    from sglang.srt.model_loader.loader import DefaultModelLoader

    work = Path(workdir)
    (work / "config.json").write_text(json.dumps(TINY))
    configs = {MLA: sglang_cpu.read_config(str(work)), LLAMA: heads._llama_config(str(work))}
    models = {arch: heads._build((arch, module), configs[arch]) for arch, module in (heads.MLA, heads.LLAMA)}

    def column(values) -> list:   # fc's first column, NaN as None
        return [None if v != v else int(v) for v in values.tolist()]

    result: dict = {"fc_rows": {}, "loader": {}, "params": {
        arch: sorted(heads.checkpoint_name(n) for n, p in model.named_parameters() if p.is_floating_point())
        for arch, model in models.items()}}
    # 1. fc.weight with another number of rows, on SGLang's CPU branch and on the branch a GPU takes
    for arch, model in models.items():
        fc = model.model.fc.weight
        for branch in ("cpu", "gpu"):
            linear._is_cpu = branch == "cpu"
            for rows in FC_ROWS:
                heads._fill(model)
                stored = torch.arange(rows, dtype=torch.float32)[:, None].expand(rows, fc.shape[1]).contiguous()
                try:
                    model.load_weights([("fc.weight", stored)])
                    got = {"column": column(fc.detach()[:, 0])}
                except Exception as exc:  # noqa: BLE001 - the failure is the measurement
                    got = {"error": f"{type(exc).__name__}: {exc}"}
                result["fc_rows"][f"{arch} {branch} {rows}"] = got
    linear._is_cpu = True

    # 2./3. real checkpoint folders through SGLang's DefaultModelLoader into each head
    def state_of(model) -> dict:
        out = {}
        for param, p in model.named_parameters():
            name = heads.checkpoint_name(param)
            if ".fused_qkv_a_proj_with_mqa." in name:   # stored as its two shards (the head fuses them)
                q = configs[MLA].q_lora_rank
                out[name.replace("fused_qkv_a_proj_with_mqa", "q_a_proj")] = torch.ones(q, p.shape[1])
                out[name.replace("fused_qkv_a_proj_with_mqa", "kv_a_proj_with_mqa")] = torch.ones(p.shape[0] - q,
                                                                                                 p.shape[1])
            else:
                out[name] = torch.ones(tuple(p.shape))
        return out

    loader = DefaultModelLoader(LoadConfig())

    def load(model, folder: Path) -> dict:
        try:
            files = [Path(f).name for f in loader._prepare_weights(str(folder), None, True)[1]]
        except Exception as exc:  # noqa: BLE001
            return {"error": f"{type(exc).__name__}: {exc}"}
        heads._fill(model)
        model.load_weights(loader._get_weights_iterator(DefaultModelLoader.Source(str(folder), None)))
        nan = sorted(heads.checkpoint_name(n) for n, p in model.named_parameters()
                     if p.is_floating_point() and bool(torch.isnan(p).any()))
        return {"files": sorted(files), "unloaded": nan}

    for arch, model in models.items():
        state = state_of(model)
        layer = {k: v for k, v in state.items() if k.startswith("layers.0.")}
        rest = {k: v for k, v in state.items() if k not in layer}
        shards = {A: rest, B: layer}
        index = {"weight_map": {n: shard for shard, part in shards.items() for n in part}}
        cases = {}
        for case in ("whole", "shard_missing", "wrapped", "nested_fc"):
            folder = work / arch / case
            folder.mkdir(parents=True)
            if case == "wrapped":
                torch.save({"module." + k: v for k, v in state.items()}, folder / "pytorch_model.bin")
            else:
                for shard, part in shards.items():
                    if case == "nested_fc" and shard == A:
                        part = {**{k: v for k, v in part.items() if k != "fc.weight"},
                                "state_dict": {"fc.weight": part["fc.weight"]}}
                    torch.save(part, folder / shard)
                (folder / "pytorch_model.bin.index.json").write_text(json.dumps(index))
                if case == "shard_missing":
                    (folder / B).unlink()
            cases[case] = load(model, folder)
        result["loader"][arch] = cases
    # a safetensors index naming a shard that is not there; a .bin index whose every shard is missing
    folder = work / "safetensors_missing"
    folder.mkdir()
    part = state_of(models[LLAMA])
    save_file({k: v for k, v in part.items() if not k.startswith("layers.0.")}, str(folder / "model-00001.safetensors"))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        k: "model-00001.safetensors" if not k.startswith("layers.0.") else "model-00002.safetensors" for k in part}}))
    result["loader"]["safetensors_missing"] = load(models[LLAMA], folder)
    folder = work / "bin_none"
    folder.mkdir()
    (folder / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": {"fc.weight": "pytorch_model.bin"}}))
    result["loader"]["bin_none"] = load(models[LLAMA], folder)
    return result


if __name__ == "__main__":
    print(json.dumps(_probe(sys.argv[1])))
    sys.exit(0)


# ------------------------------------------------------------------------------------------------ the tests

import pytest  # noqa: E402
import torch  # noqa: E402

from conftest import self_probe  # noqa: E402
from sglang_eagle_cycle import cli  # noqa: E402
from sglang_eagle_cycle.safetensors_header import read_draft_shapes, write_header_only  # noqa: E402
from sglang_eagle_cycle.wiring import resolve_at_setter  # noqa: E402

FC_OK = [7168, 3 * 7168]   # 3 aux states of the Kimi-K2.5 target's hidden 7168 into a 7168-wide draft
LM_HEAD = [163840, 7168]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in list(os.environ):
        if var.startswith("SGLANG_EAGLE_CYCLE_"):
            monkeypatch.delenv(var)


@pytest.fixture(scope="module")
def sglang_probe(tmp_path_factory):
    if importlib.util.find_spec("sglang") is None:
        pytest.skip("SGLang is not installed")
    return self_probe(tmp_path_factory, Path(__file__), "gaps_probe")


def _meta(shape, dtype=torch.bfloat16) -> torch.Tensor:
    return torch.empty(*shape, dtype=dtype, device="meta")


def _draft(tmp_path: Path, files: dict | None = None, arch: str = LLAMA, **config) -> Path:
    """The bundled Kimi-K2.5 draft config (``arch``, ``config`` over it) in a folder with ``files`` (name ->
    state dict, saved by torch; a value of shapes, name -> shape, is written as a safetensors header)."""
    draft = tmp_path / "draft"
    draft.mkdir(parents=True)
    cfg = json.loads((KIMI / "draft" / "config.json").read_text())
    (draft / "config.json").write_text(json.dumps({**cfg, "architectures": [arch], **config}))
    for name, state in (files or {}).items():
        if name.endswith(".safetensors"):
            write_header_only(draft / name, state)
        else:
            torch.save(state, draft / name)
    return draft


def _wiring(capsys, draft: Path) -> tuple[int, list[dict], str]:
    """``eagle-cycle wiring`` of the Kimi-K2.5 target and ``draft``, ``--json``: exit code, the error-level
    problems, stderr."""
    code = cli.main(["wiring", str(KIMI / "target"), str(draft), "--json"])
    out, err = capsys.readouterr()
    errors = [p for p in json.loads(out)["problems"] if p["level"] == "error"] if out else []
    return code, errors, err


def _codes(errors: list[dict]) -> list[str]:
    return [p["code"] for p in errors]


def _server_codes(draft: Path) -> list[str]:
    """The error codes of the server's start-up check (a Kimi-K2.5 target, the draft's ids as SGLang
    passes them), reading the checkpoint as the server does (no pre-1.6 pickle loaded)."""
    cfg = json.loads((draft / "config.json").read_text())
    report = resolve_at_setter(family="KimiK25ForConditionalGeneration", num_layers=61,
                               passed_ids=cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"], draft_cfg=cfg,
                               env={}, target_hidden_size=7168, target_vocab_size=163840,
                               header=read_draft_shapes(draft, load_legacy=False) or None)
    return [p.code for p in report.errors]


# ------------------------------------------------------------------------------- 1. fc's rows vs hidden_size

def test_sglang_fails_or_cuts_an_fc_with_other_rows(sglang_probe):
    rows = sglang_probe["fc_rows"]
    for branch in ("cpu", "gpu"):
        for n in FC_ROWS:   # the Llama head's torch Linear: SGLang's default_weight_loader asserts the shape
            assert rows[f"{LLAMA} {branch} {n}"] == {
                "error": f"AssertionError: Attempted to load weight (torch.Size([{n}, 192])) into parameter "
                         f"(torch.Size([64, 192]))"}
        # the MLA head's ColumnParallelLinear keeps the first 64 of 80 rows, silently
        assert rows[f"{MLA} {branch} 80"] == {"column": list(range(64))}
    # with 48 rows: narrow fails on the GPU branch; the CPU branch zero-fills the 16 rows it lacks
    assert rows[f"{MLA} gpu 48"] == {"error": "RuntimeError: start (0) + length (64) exceeds dimension size (48)."}
    assert rows[f"{MLA} cpu 48"] == {"column": list(range(48)) + [0] * 16}


def test_fc_rows_other_than_hidden_size_are_one_error(tmp_path, capsys):
    # the Llama head: a launch that fails at load, whether or not lm_head says which width is right
    d = _draft(tmp_path, {"model.safetensors": {"fc.weight": [4096, FC_OK[1]]}})
    code, errors, _ = _wiring(capsys, d)
    assert code == 1 and _codes(errors) == ["fc_out_mismatch"]
    msg = errors[0]["message"]
    assert msg.startswith("fc.weight [4096, 21504] has 4096 rows (fc's out_features) but the draft's hidden_size "
                          "is 7168: SGLang 0.5.23's LlamaForCausalLMEagle3 builds fc to project to 7168 features")
    assert ("Attempted to load weight (torch.Size([4096, 21504])) into parameter (torch.Size([7168, 21504]))" in msg
            and 'set "hidden_size": 4096 in the draft\'s config.json if the rest of the checkpoint is 4096 wide' in msg)
    # lm_head as wide as fc's rows: the config's hidden_size is what is wrong, said once (it was also an
    # lm_head_shape_mismatch); an lm_head of another vocabulary still is one
    write_header_only(d / "model.safetensors", {"fc.weight": [4096, FC_OK[1]], "lm_head.weight": [163840, 4096]})
    code, errors, _ = _wiring(capsys, d)
    assert code == 1 and _codes(errors) == ["fc_out_mismatch"]
    assert ("lm_head.weight [163840, 4096] is 4096 wide too, so the checkpoint was trained at hidden_size 4096: "
            'set "hidden_size": 4096' in errors[0]["message"])
    write_header_only(d / "model.safetensors", {"fc.weight": [4096, FC_OK[1]], "lm_head.weight": [32000, 4096]})
    code, errors, _ = _wiring(capsys, d)
    assert code == 1 and _codes(errors) == ["fc_out_mismatch", "lm_head_shape_mismatch"]
    # model.fc.weight is loaded by the Llama head: checked the same way; and by the server
    write_header_only(d / "model.safetensors", {"model.fc.weight": [4096, FC_OK[1]]})
    code, errors, _ = _wiring(capsys, d)
    assert code == 1 and _codes(errors) == ["fc_out_mismatch"] and errors[0]["message"].startswith("model.fc.weight")
    assert _server_codes(d) == ["fc_out_mismatch"]
    write_header_only(d / "model.safetensors", {"fc.weight": FC_OK, "lm_head.weight": LM_HEAD})
    assert _wiring(capsys, d)[:2] == (0, [])


def test_fc_rows_in_the_mla_head(tmp_path, capsys):
    mla = _draft(tmp_path, {"model.safetensors": {"fc.weight": [8192, FC_OK[1]]}}, arch=MLA)
    code, errors, _ = _wiring(capsys, mla)
    assert code == 1 and _codes(errors) == ["fc_out_mismatch"]
    assert "it keeps the first 7168 of the 8192 rows without a word" in errors[0]["message"]
    write_header_only(mla / "model.safetensors", {"fc.weight": [4096, FC_OK[1]]})
    code, errors, _ = _wiring(capsys, mla)
    assert code == 1 and _codes(errors) == ["fc_out_mismatch"]
    assert ('the load fails on the GPU ("start (0) + length (7168) exceeds dimension size (4096)")'
            in errors[0]["message"])
    # a prefixed fc the MLA head skips: the one error says so, not its rows
    write_header_only(mla / "model.safetensors", {"model.fc.weight": [8192, FC_OK[1]]})
    code, errors, _ = _wiring(capsys, mla)
    assert code == 1 and _codes(errors) == ["fc_width_mismatch"]


def test_fc_rows_where_the_mla_head_never_applies_fc(tmp_path, capsys):
    # one aux state as wide as the draft: SGLang skips fc. More rows are cut unseen (no error); fewer still
    # fail the load. The Llama head's load fails either way
    one = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [30]}}
    for arch, rows, want in ((MLA, 8192, []), (MLA, 4096, ["fc_out_mismatch"]), (LLAMA, 8192, ["fc_out_mismatch"])):
        d = _draft(tmp_path / f"{arch}{rows}", {"model.safetensors": {"fc.weight": [rows, 7168]}}, arch=arch, **one)
        code, errors, _ = _wiring(capsys, d)
        assert (code, _codes(errors)) == (int(bool(want)), want), (arch, rows, errors)


# ---------------------------------------------------------------------------------- 2. one cause, one error

def test_sglang_loads_nothing_wrapped_and_nothing_nested(sglang_probe):
    for arch in (LLAMA, MLA):
        cases, params = sglang_probe["loader"][arch], sglang_probe["params"][arch]
        assert "fc.weight" in params and len(params) >= 11
        # the checkpoint as saved: every parameter loads from the two shards
        assert cases["whole"] == {"files": [A, B], "unloaded": []}
        # the same tensors under module.: none loads, without an error
        assert cases["wrapped"] == {"files": ["pytorch_model.bin"], "unloaded": params}
        # the fc nested in one shard, the rest at the top level of both: only the fc stays unloaded
        assert cases["nested_fc"] == {"files": [A, B], "unloaded": ["fc.weight"]}


@pytest.mark.parametrize("prefix", ["module.", "_orig_mod.", "module._orig_mod."])
@pytest.mark.parametrize("fmt", ["bin", "safetensors"])
def test_a_wrapped_save_is_one_error(tmp_path, capsys, prefix, fmt):
    # it was weight_not_loaded and fc_width_mismatch ("no fc.weight") for the same wrapper
    names = {"fc.weight": FC_OK, "midlayer.mlp.up_proj.weight": [12288, 7168], "lm_head.weight": LM_HEAD}
    files = ({"pytorch_model.bin": {prefix + k: _meta(v) for k, v in names.items()}} if fmt == "bin" else
             {"model.safetensors": {prefix + k: v for k, v in names.items()}})
    for arch in (LLAMA, MLA):
        d = _draft(tmp_path / arch, files, arch=arch)
        code, errors, _ = _wiring(capsys, d)
        assert code == 1 and _codes(errors) == ["weight_not_loaded"], (arch, errors)
        assert f"under the prefix {prefix!r}" in errors[0]["message"]
        assert "so the draft's weights, its fc among them, stay unloaded" in errors[0]["message"]
        assert _server_codes(d) == ["weight_not_loaded"]


def test_a_wrapped_quantised_fc_is_named_as_wrapped(tmp_path, capsys):
    # module.fc.qweight was read as no fc at all ("no fc.weight"), with no word of the wrapper
    d = _draft(tmp_path, {"model.safetensors": {"module.fc.qweight": [7168, 2688], "module.fc.scales": [168, 7168],
                                                "module.lm_head.weight": LM_HEAD}}, arch=MLA)
    code, errors, _ = _wiring(capsys, d)
    assert code == 1 and _codes(errors) == ["weight_not_loaded"] and "'module.'" in errors[0]["message"]


def test_a_nested_shard_holding_the_fc_is_one_error(tmp_path, capsys):
    # it was checkpoint_nested and fc_width_mismatch ("no fc.weight") for the one nested shard
    d = _draft(tmp_path, {"pytorch_model-00001-of-00002.bin": {"state_dict": {"fc.weight": _meta(FC_OK)}},
                          "pytorch_model-00002-of-00002.bin": {"lm_head.weight": _meta(LM_HEAD)}})
    code, errors, _ = _wiring(capsys, d)
    assert code == 1 and _codes(errors) == ["checkpoint_nested"]
    assert "pytorch_model-00001-of-00002.bin['state_dict']" in errors[0]["message"]
    assert _server_codes(d) == ["checkpoint_nested"]
    # the d2t a draft vocabulary needs, nested beside a top-level lm_head: not also d2t_missing
    torch.save({"state_dict": {"fc.weight": _meta(FC_OK), "d2t": _meta([32000], torch.int64)}},
               d / "pytorch_model-00001-of-00002.bin")
    torch.save({"lm_head.weight": _meta([32000, 7168])}, d / "pytorch_model-00002-of-00002.bin")
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, "draft_vocab_size": 32000}))
    code, errors, _ = _wiring(capsys, d)
    assert code == 1 and _codes(errors) == ["checkpoint_nested"]


def test_a_nested_wrapped_fc_is_one_error(tmp_path, capsys):
    # {"state_dict": ddp_model.state_dict()}: the nesting is what SGLang meets first
    d = _draft(tmp_path, {A: {"state_dict": {"module.fc.weight": _meta(FC_OK)}}, B: {"lm_head.weight": _meta(LM_HEAD)}})
    code, errors, _ = _wiring(capsys, d)
    assert code == 1 and _codes(errors) == ["checkpoint_nested"]


def test_a_nested_shard_without_the_fc_keeps_the_second_cause(tmp_path, capsys):
    # the fc is in no file at all: the nested dict does not account for it, both errors stand
    d = _draft(tmp_path, {"pytorch_model-00001-of-00002.bin": {"state_dict": {"norm.weight": _meta([7168])}},
                          "pytorch_model-00002-of-00002.bin": {"lm_head.weight": _meta(LM_HEAD)}})
    code, errors, _ = _wiring(capsys, d)
    assert code == 1 and _codes(errors) == ["checkpoint_nested", "fc_width_mismatch"]
    assert "no fc.weight" in errors[1]["message"]


# ------------------------------------------------------------------ 3. shards a .bin index lists, not there

def test_sglang_never_reads_a_bin_index(sglang_probe):
    for arch in (LLAMA, MLA):
        # shard 2 (the decoder layer) deleted: SGLang loads shard 1 without an error and leaves every
        # decoder-layer parameter as built
        layer = [n for n in sglang_probe["params"][arch] if n.startswith("layers.0.")]
        assert len(layer) >= 7
        assert sglang_probe["loader"][arch]["shard_missing"] == {"files": [A], "unloaded": layer}
    # a safetensors index is checked first; no weights at all stop the launch
    assert sglang_probe["loader"]["safetensors_missing"]["error"].startswith(
        "RuntimeError: model.safetensors.index.json references 1 shard file(s) missing from")
    assert sglang_probe["loader"]["bin_none"]["error"].startswith("RuntimeError: Cannot find any model weights")


def _sharded(tmp_path: Path, present: dict, index: dict, **config) -> Path:
    d = _draft(tmp_path, {shard: {k: _meta(v) for k, v in part.items()} for shard, part in present.items()}, **config)
    (d / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": index}))
    return d



def test_a_missing_bin_shard_holding_the_layer_is_an_error(tmp_path, capsys):
    layer = {"layers.0.mlp.down_proj.weight": [7168, 12288], "layers.0.hidden_norm.weight": [7168]}
    d = _sharded(tmp_path, {A: {"fc.weight": FC_OK, "norm.weight": [7168]}},
                 {"fc.weight": A, "norm.weight": A, **{k: B for k in layer}})
    code, errors, _ = _wiring(capsys, d)   # it passed (exit 0)
    assert code == 1 and _codes(errors) == ["weight_not_loaded"]
    assert errors[0]["message"] == (
        "the draft's pytorch_model.bin.index.json places layers.0.hidden_norm.weight, layers.0.mlp.down_proj.weight "
        "in pytorch_model-00002-of-00002.bin, which is not in the draft folder (an incomplete download?): SGLang "
        "0.5.23 never reads that index, loads the *.bin files there are and leaves these tensors unloaded "
        "(uninitialised) without an error, so the draft's proposals are noise; download the missing shard")
    assert _server_codes(d) == ["weight_not_loaded"]
    # the text report names the shard beside the tensors read
    assert cli.main(["wiring", str(KIMI / "target"), str(d)]) == 1
    assert "shards the index lists but the folder lacks: pytorch_model-00002-of-00002.bin" in capsys.readouterr()[0]


def test_a_missing_bin_shard_holding_the_fc_is_one_error(tmp_path, capsys):
    d = _sharded(tmp_path, {B: {"layers.0.mlp.down_proj.weight": [7168, 12288]}},
                 {"fc.weight": A, "layers.0.mlp.down_proj.weight": B})
    code, errors, _ = _wiring(capsys, d)   # it was fc_width_mismatch, "no fc.weight", naming no shard
    assert code == 1 and _codes(errors) == ["weight_not_loaded"]
    assert "places fc.weight in pytorch_model-00001-of-00002.bin" in errors[0]["message"]


def test_a_missing_shard_does_not_hide_an_fc_the_head_skips_anyway(tmp_path, capsys):
    # the MLA head skips model.fc.weight wherever it is stored: the missing shard is not why fc stays
    # unloaded, so the fc error stands, and the shard (holding nothing else this head loads) is not named
    d = _sharded(tmp_path, {A: {"norm.weight": [7168], "lm_head.weight": LM_HEAD}},
                 {"norm.weight": A, "lm_head.weight": A, "model.fc.weight": B}, arch=MLA)
    code, errors, _ = _wiring(capsys, d)
    assert code == 1 and _codes(errors) == ["fc_width_mismatch"] and "no fc.weight" in errors[0]["message"]


@pytest.mark.parametrize("index, present", [
    # a missing shard holding only what the head does not use: t2d, the embedding it takes from the target
    ({"fc.weight": A, "t2d": B, "embed_tokens.weight": B}, {A: {"fc.weight": FC_OK}}),
    # the shards merged into one file, the index left stale: SGLang loads everything from pytorch_model.bin
    ({"fc.weight": A, "norm.weight": B}, {"pytorch_model.bin": {"fc.weight": FC_OK, "norm.weight": [7168]}}),
])
def test_what_a_missing_bin_shard_does_not_cost_is_not_flagged(tmp_path, capsys, index, present):
    d = _sharded(tmp_path, present, index)
    assert _wiring(capsys, d)[:2] == (0, [])


def test_a_damaged_bin_index_changes_nothing(tmp_path, capsys):
    # SGLang never opens it
    d = _draft(tmp_path, {"pytorch_model.bin": {"fc.weight": _meta(FC_OK)}})
    for text in ("{not json", "[]", json.dumps({"weight_map": [1]})):
        (d / "pytorch_model.bin.index.json").write_text(text)
        assert _wiring(capsys, d)[:2] == (0, [])


def test_a_bin_index_without_any_shard_is_unusable_input(tmp_path, capsys):
    d = _sharded(tmp_path, {}, {"fc.weight": A, "norm.weight": B})
    code, errors, err = _wiring(capsys, d)   # it was "no checkpoint found", exit 0
    assert code == 2 and errors == [] and err.count("\n") == 1
    assert ("pytorch_model.bin.index.json: lists 2 shards (pytorch_model-00001-of-00002.bin, "
            "pytorch_model-00002-of-00002.bin) and none is here (an incomplete download?): SGLang 0.5.23 finds "
            'no weights to load ("Cannot find any model weights"); download them') in err


def test_a_missing_safetensors_shard_is_unusable_input(tmp_path, capsys):
    # only shards holding fc, lm_head or d2t were checked: a missing layer shard passed, SGLang refuses it
    d = _draft(tmp_path, {"a.safetensors": {"fc.weight": FC_OK, "lm_head.weight": LM_HEAD}})
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "fc.weight": "a.safetensors", "lm_head.weight": "a.safetensors", "norm.weight": "b.safetensors"}}))
    code, errors, err = _wiring(capsys, d)
    assert code == 2 and errors == [] and err.count("\n") == 1
    assert ('model.safetensors.index.json: lists 1 shard missing here (b.safetensors; an incomplete download?): '
            'SGLang 0.5.23 refuses to load the draft ("references 1 shard file(s) missing"); download it') in err
    write_header_only(d / "b.safetensors", {"norm.weight": [7168]})
    assert _wiring(capsys, d)[:2] == (0, [])
