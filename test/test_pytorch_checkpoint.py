"""Drafts saved as ``pytorch_model.bin`` (or ``*.pt``): the wiring check reads their tensor shapes.

SGLang 0.5.23's default loader (``--load-format auto``) takes ``*.safetensors`` when a folder has
any, else every ``*.bin``, else every ``*.pt``, leaving out training-state files (its
``_prepare_weights`` and ``filter_files_not_needed_for_inference``). Many published EAGLE-3 drafts
ship only ``pytorch_model.bin``; before this reader the wiring check skipped every tensor check for
them ("no safetensors header found") and passed a draft whose fc cannot take the captured states.

The zip-format files here are written with ``meta`` tensors: a 7168 x 21504 fc is a file of about
1 KB, so reading its shape proves the reader parses the pickle without the tensor data.

The folders at the end are what users of published drafts meet (a nested ``{"state_dict": ...}``, a
dangling HF-cache link, a Git LFS pointer, a macOS ``._`` file, an index beside ``*.bin`` files); each
result was checked against what sglang 0.5.23's ``DefaultModelLoader._prepare_weights`` and
``pt_weights_iterator`` do with that folder.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from sglang_eagle_cycle import cli
from sglang_eagle_cycle.errors import UsageError
from sglang_eagle_cycle.safetensors_header import (CHECKPOINT_READ, FC_DTYPE, FC_SCALES, pytorch_files,
                                                   read_draft_shapes, write_header_only)

REPO = Path(__file__).resolve().parents[1]
KIMI = REPO / "examples" / "kimi-k25"
FC_OK = [7168, 3 * 7168]      # 3 aux states of the Kimi-K2.5 target's hidden 7168
FC_BAD = [7168, 2 * 7168]     # an fc trained on two aux states


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in ("SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS", "SGLANG_EAGLE_CYCLE_AUX_CONVENTION",
                "SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING"):
        monkeypatch.delenv(var, raising=False)


def _meta(shape, dtype=torch.bfloat16) -> torch.Tensor:
    return torch.empty(*shape, dtype=dtype, device="meta")


def _draft(tmp_path: Path, files: dict[str, dict]) -> Path:
    """The bundled Kimi-K2.5 draft config in a folder with ``files`` (file name -> state dict) saved by torch."""
    draft = tmp_path / "draft"
    draft.mkdir()
    shutil.copy(KIMI / "draft" / "config.json", draft / "config.json")
    for name, state in files.items():
        torch.save(state, draft / name)
    return draft


def _wiring(capsys, draft: Path, *extra: str) -> tuple[int, str, str]:
    code = cli.main(["wiring", str(KIMI / "target"), str(draft), *extra])
    out, err = capsys.readouterr()
    return code, out, err


def test_bin_draft_fc_width_is_checked(tmp_path, capsys):
    bad = _draft(tmp_path, {"pytorch_model.bin": {"fc.weight": _meta(FC_BAD), "d2t": _meta([32000], torch.int64)}})
    assert (bad / "pytorch_model.bin").stat().st_size < 4096   # no tensor data in the file
    code, out, err = _wiring(capsys, bad, "--json")
    doc = json.loads(out)
    assert code == 1 and err == ""
    assert [p["code"] for p in doc["problems"] if p["level"] == "error"] == ["fc_width_mismatch"]
    assert doc["fc_in_features"] == FC_BAD[1]
    shutil.rmtree(bad)
    good = _draft(tmp_path, {"pytorch_model.bin": {"fc.weight": _meta(FC_OK)}})
    code, out, _ = _wiring(capsys, good)
    assert code == 0 and "fc.weight [7168, 21504]" in out and "0 errors" in out


def test_the_files_sglang_loads(tmp_path):
    # safetensors win over *.bin; *.bin over *.pt; training state is never read as weights
    d = _draft(tmp_path, {"pytorch_model.bin": {"fc.weight": _meta(FC_BAD)}, "training_args.bin": {"lr": 1}})
    write_header_only(d / "model.safetensors", {"fc.weight": FC_OK})
    assert read_draft_shapes(d) == {"fc.weight": FC_OK}
    (d / "model.safetensors").unlink()
    assert [f.name for f in pytorch_files(d)] == ["pytorch_model.bin"]
    assert read_draft_shapes(d) == {"fc.weight": FC_BAD}
    torch.save({"fc.weight": _meta(FC_OK)}, d / "consolidated.pt")
    assert read_draft_shapes(d) == {"fc.weight": FC_BAD}          # a *.bin exists: the *.pt is not loaded
    (d / "pytorch_model.bin").unlink()
    # training_args.bin beside the *.pt: SGLang's *.bin pattern matched, then filtered to nothing, and it
    # stops ("Cannot find any model weights") without looking at the *.pt; this passed as 'no checkpoint'
    with pytest.raises(UsageError, match=r"training state .* never looks at the \*\.pt files \(consolidated.pt\)"):
        read_draft_shapes(d)
    (d / "consolidated.pt").rename(d / "consolidated.pt.keep")
    assert pytorch_files(d) == [] and read_draft_shapes(d) == {}    # training_args.bin alone: no checkpoint
    (d / "consolidated.pt.keep").rename(d / "consolidated.pt")
    (d / "training_args.bin").unlink()
    assert [f.name for f in pytorch_files(d)] == ["consolidated.pt"]
    assert read_draft_shapes(d) == {"fc.weight": FC_OK}


def test_sharded_bin_and_a_file_path(tmp_path):
    d = _draft(tmp_path, {"pytorch_model-00001-of-00002.bin": {"fc.weight": _meta(FC_OK)},
                          "pytorch_model-00002-of-00002.bin": {"lm_head.weight": _meta([32000, 7168]),
                                                               "d2t": _meta([32000], torch.int64)}})
    assert read_draft_shapes(d) == {"fc.weight": FC_OK, "lm_head.weight": [32000, 7168], "d2t": [32000]}
    assert read_draft_shapes(d / "pytorch_model-00002-of-00002.bin") == {"lm_head.weight": [32000, 7168],
                                                                          "d2t": [32000]}


def test_legacy_format_and_prefixed_names(tmp_path):
    d = tmp_path / "legacy"
    d.mkdir()
    torch.save({"model.fc.weight": torch.zeros(4, 12), "model.d2t": torch.zeros(5, dtype=torch.int64)},
               d / "pytorch_model.bin", _use_new_zipfile_serialization=False)
    got = read_draft_shapes(d)
    assert got["fc.weight"] == [4, 12] and got["model.fc.weight"] == [] and got["d2t"] == [5]


def test_fp8_fc_with_its_scale_in_a_bin(tmp_path, capsys):
    d = _draft(tmp_path, {"pytorch_model.bin": {"fc.weight": _meta(FC_OK, torch.float8_e4m3fn),
                                                "fc.weight_scale_inv": _meta([56, 168], torch.float32)}})
    got = read_draft_shapes(d)
    assert got[FC_DTYPE] == "F8_E4M3" and got[FC_SCALES] == ["fc.weight_scale_inv"]
    code, out, _ = _wiring(capsys, d, "--json")
    assert code == 1 and "fc_scale_dropped" in {p["code"] for p in json.loads(out)["problems"]}


def test_a_checkpoint_with_none_of_the_head_tensors(tmp_path, capsys):
    d = _draft(tmp_path, {"pytorch_model.bin": {"midlayer.mlp.up_proj.weight": _meta([12288, 7168])}})
    code, out, _ = _wiring(capsys, d)
    assert "checkpoint read: no fc, lm_head, d2t" in out


@pytest.mark.parametrize("content, words", [
    (b"\x00not a checkpoint", "unreadable PyTorch checkpoint"),
    (None, "no state dict"),
])
def test_unusable_bin_one_line_exit_2(tmp_path, capsys, content, words):
    d = _draft(tmp_path, {"pytorch_model.bin": [1, 2, 3]})
    if content is not None:
        (d / "pytorch_model.bin").write_bytes(content)
    code, out, err = _wiring(capsys, d)
    assert code == 2 and out == "" and err.count("\n") == 1 and words in err and "pytorch_model.bin" in err


def test_no_checkpoint_at_all_is_named(tmp_path, capsys):
    d = _draft(tmp_path, {})
    code, out, _ = _wiring(capsys, d)
    assert code == 0 and "no checkpoint found (no *.safetensors, *.bin nor *.pt file)" in out


def test_the_server_check_leaves_a_legacy_file_unread(tmp_path):
    # every TP rank's process runs the start-up check: a pre-1.6 pickle would be loaded whole there
    d = tmp_path / "legacy"
    d.mkdir()
    torch.save({"fc.weight": torch.zeros(4, 8)}, d / "pytorch_model.bin", _use_new_zipfile_serialization=False)
    with pytest.raises(UsageError, match="pre-1.6 format"):
        read_draft_shapes(d, load_legacy=False)
    assert read_draft_shapes(d) == {"fc.weight": [4, 8]}
    torch.save({"fc.weight": _meta([4, 8])}, d / "pytorch_model.bin")   # zip format: read either way
    assert read_draft_shapes(d, load_legacy=False) == {"fc.weight": [4, 8]}


# ---------------------------------------------------------------- what SGLang's loader does with odd folders
# (checked against sglang 0.5.23's DefaultModelLoader._prepare_weights and pt_weights_iterator)

def _one_line_exit_2(capsys, draft: Path, *words: str) -> str:
    code, out, err = _wiring(capsys, draft)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, (code, out, err)
    assert all(w in err for w in words), err
    return err


@pytest.mark.parametrize("key", ["state_dict", "model"])
def test_tensors_nested_in_a_dict_are_named(tmp_path, capsys, key):
    # pt_weights_iterator hands SGLang's head the top-level items: ("state_dict", {...}) matches no
    # parameter and is skipped, so the whole draft stays uninitialised; this passed as 'no checkpoint found'
    d = _draft(tmp_path, {"pytorch_model.bin": {key: {"fc.weight": _meta(FC_BAD)}, "epoch": 3}})
    # an error of the draft (exit 1, the whole report; the start-up check refuses it), not unusable input
    code, out, err = _wiring(capsys, d, "--json")
    doc = json.loads(out)
    assert code == 1 and err == ""
    assert [p["code"] for p in doc["problems"] if p["level"] == "error"] == ["checkpoint_nested"]
    assert f"pytorch_model.bin[{key!r}]" in doc["problems"][0]["message"]
    assert doc["problems"][0]["message"].endswith(f"torch.save(ckpt[{key!r}], 'pytorch_model.bin')")
    code, out, _ = _wiring(capsys, d)
    assert code == 1 and f"tensors nested in a dict in pytorch_model.bin[{key!r}]" in out
    # the probe, which needs the weights, names the file and the key in one line
    from sglang_eagle_cycle.wiring.probe import _read_draft_tensors
    with pytest.raises(UsageError, match=f"nested under {key!r}"):
        _read_draft_tensors(d)
    # tensors at the top level beside a nested copy (an EMA): SGLang loads the top-level ones
    torch.save({"fc.weight": _meta(FC_OK), "ema": {"fc.weight": _meta(FC_BAD)}}, d / "pytorch_model.bin")
    assert read_draft_shapes(d) == {"fc.weight": FC_OK}


def test_a_bin_without_tensors_is_a_checkpoint_read(tmp_path):
    # SGLang loads the file and finds nothing to load: not the 'no checkpoint' of a config-only folder
    d = _draft(tmp_path, {"pytorch_model.bin": {"step": 5, "note": "x"}})
    assert read_draft_shapes(d) == {CHECKPOINT_READ: []}


@pytest.mark.parametrize("case, words", [
    ("directory", "pytorch_model.bin: a directory, not a checkpoint file"),
    ("directory_beside_pt", "pytorch_model.bin: a directory, not a checkpoint file"),
    ("broken_symlink", "pytorch_model.bin: a broken symlink (its target"),
])
def test_entries_sglang_globs_but_cannot_load(tmp_path, capsys, case, words):
    # SGLang's glob takes any entry named *.bin (and then the *.pt is never looked at): it fails on a
    # directory (IsADirectoryError) or a dangling HF-cache link (FileNotFoundError); these passed as
    # 'no checkpoint found'
    d = _draft(tmp_path, {"model.pt": {"fc.weight": _meta(FC_BAD)}} if case == "directory_beside_pt" else {})
    if case == "broken_symlink":
        os.symlink("../blobs/0123abcd", d / "pytorch_model.bin")
    else:
        (d / "pytorch_model.bin").mkdir()
    _one_line_exit_2(capsys, d, words)


def test_a_safetensors_index_beside_bin_files_is_ignored(tmp_path, capsys):
    # a download of '*.json' and '*.bin' from a repo that has both formats: with no *.safetensors SGLang
    # loads the *.bin and never reads the index; this was an exit 2 'shard ... is missing'
    d = _draft(tmp_path, {"pytorch_model.bin": {"fc.weight": _meta(FC_BAD)}})
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"fc.weight": "model.safetensors"}}))
    code, out, _ = _wiring(capsys, d, "--json")
    assert code == 1 and "fc_width_mismatch" in out and json.loads(out)["fc_in_features"] == FC_BAD[1]


def test_hidden_files_are_not_globbed(tmp_path, capsys):
    # SGLang's glob.glob skips names starting with '.'; Path.glob does not: a macOS AppleDouble
    # ._model.safetensors beside the real file made the check exit 2 on a draft SGLang loads
    d = _draft(tmp_path, {})
    write_header_only(d / "model.safetensors", {"fc.weight": FC_BAD})
    (d / "._model.safetensors").write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        " + bytes(64))
    assert read_draft_shapes(d) == {"fc.weight": FC_BAD}
    (d / "model.safetensors").unlink()
    torch.save({"fc.weight": _meta(FC_BAD)}, d / ".pytorch_model.bin")   # SGLang finds no weights here
    assert pytorch_files(d) == [] and read_draft_shapes(d) == {}


def _zip_cut_short() -> bytes:
    buf = io.BytesIO()
    torch.save({"fc.weight": _meta(FC_OK)}, buf)
    return buf.getvalue()[:200]


@pytest.mark.parametrize("content, words", [
    (b"", "an empty file (0 bytes)"),
    (b"version https://git-lfs.github.com/spec/v1\noid sha256:4d7a2146\nsize 1676940290\n", "a Git LFS pointer"),
    (b"<!DOCTYPE html><html><body>Not Found</body></html>", "an HTML page"),
    (_zip_cut_short(), "a damaged zip archive"),
    (None, "it pickles an object of class argparse.Namespace"),
])
def test_files_that_are_no_weights_are_named(tmp_path, capsys, content, words):
    # these were 'EOFError', the weights_only advice paragraph ('... you have two options, \x1b[1mdo
    # those steps'), or 'Unsupported operand 118'
    d = _draft(tmp_path, {"pytorch_model.bin": {"fc.weight": _meta(FC_OK), "args": argparse.Namespace(lr=1)}})
    if content is not None:
        (d / "pytorch_model.bin").write_bytes(content)
    err = _one_line_exit_2(capsys, d, "pytorch_model.bin: ", words)
    assert "\x1b" not in err
    # the server's start-up check gets the same reason, not 'pre-1.6 format'
    with pytest.raises(UsageError, match=words.split(" (")[0].replace(".", r"\.")):
        read_draft_shapes(d, load_legacy=False)


def test_a_plain_pickle_gets_our_line_alone(tmp_path, capsys):
    # a .pt written by pickle.dump (protocol 4) drew PyTorch's UserWarning "Detected pickle protocol 4 in
    # the checkpoint ..." (two lines with its source line) ahead of our one line
    import pickle
    import warnings

    d = _draft(tmp_path, {})
    (d / "model.pt").write_bytes(pickle.dumps({"fc.weight": [[0.0] * 4] * 2}, protocol=4))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, out, err = _wiring(capsys, d)
    assert [str(w.message) for w in caught] == []
    assert (code, out) == (2, "")
    assert err == (f"eagle-cycle wiring: error: {d / 'model.pt'}: unreadable PyTorch checkpoint (not a pickle "
                   f"torch.save writes: Unsupported operand 149)\n")


def test_the_probe_names_a_bin_saved_without_data(tmp_path):
    # the probe loaded the meta tensors and died in its first matmul (a traceback)
    from sglang_eagle_cycle.wiring.probe import _read_draft_tensors

    d = _draft(tmp_path, {"pytorch_model.bin": {"fc.weight": _meta(FC_OK)}})
    with pytest.raises(UsageError, match="saved without their data"):
        _read_draft_tensors(d)
    torch.save({"state": {"fc.weight": torch.zeros(2, 2)}}, d / "pytorch_model.bin")
    with pytest.raises(UsageError, match="nested under 'state'"):
        _read_draft_tensors(d)


@pytest.mark.parametrize("content, words", [
    (b"", "an empty file (0 bytes)"),
    (b"version https://git-lfs.github.com/spec/v1\noid sha256:0123\nsize 308281344\n", "a Git LFS pointer"),
    (b"<!DOCTYPE html><html><body>404</body></html>", "an HTML page"),
])
def test_a_safetensors_file_that_holds_no_weights_is_named(tmp_path, capsys, content, words):
    # the commonest broken download: a git clone without git-lfs leaves pointer files of ~130 bytes
    d = _draft(tmp_path, {})
    (d / "model.safetensors").write_bytes(content)
    code, out, err = _wiring(capsys, d)
    assert code == 2 and out == "" and err.count("\n") == 1 and words in err and "model.safetensors" in err


def test_a_header_length_whose_low_byte_looks_like_text_still_reads(tmp_path):
    # a header of 316 bytes starts with 0x3C ('<'), of 118 with 'v': checked for an HTML page or an LFS
    # pointer, then read whole (the check had eaten 56 bytes of the header)
    for pad in range(0, 400, 7):
        f = tmp_path / f"h{pad}.safetensors"
        write_header_only(f, {"fc.weight": FC_OK, "x" * (pad + 1): [1]})
        assert read_draft_shapes(f)["fc.weight"] == FC_OK


@pytest.mark.parametrize("name", ["pytorch_model.bin", "model.pt", "model.safetensors", "model.safetensors.index.json"])
def test_a_weights_file_given_as_draft_or_target_names_its_folder(tmp_path, capsys, name):
    # 'eagle-cycle wiring TARGET draft/pytorch_model.bin' read the weights as a config.json: "cannot read
    # ('utf-8' codec can't decode byte 0x80 ...)" or "invalid JSON (line 1 column 1 ...)"; a shard index
    # (JSON) was taken for the draft's config: "(no architectures)", no ids, exit 1
    d = _draft(tmp_path, {} if ".safetensors" in name else {name: {"fc.weight": _meta(FC_OK)}})
    if ".safetensors" in name:
        write_header_only(d / "model.safetensors", {"fc.weight": FC_OK})
        (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"fc.weight": "model.safetensors"}}))
    _one_line_exit_2(capsys, d / name, f"{d / name}: a checkpoint file, not a model's config.json: give its folder {d}")
    code = cli.main(["wiring", str(d / name), str(d)])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "a checkpoint file" in err


def _hf_cache(tmp_path: Path) -> Path:
    """A Hugging Face hub cache holding org/eagle3-draft: blobs, a snapshot of links to them, refs/main."""
    repo = tmp_path / "hub" / "models--org--eagle3-draft"
    (repo / "blobs").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")
    snap = repo / "snapshots" / "0123abcd"
    snap.mkdir(parents=True)
    shutil.copy(KIMI / "draft" / "config.json", repo / "blobs" / "c0nf1g")
    torch.save({"fc.weight": _meta(FC_BAD)}, repo / "blobs" / "b1n")
    os.symlink("../../blobs/c0nf1g", snap / "config.json")
    os.symlink("../../blobs/b1n", snap / "pytorch_model.bin")
    return repo


def test_an_hf_cache_repo_folder_names_its_snapshot_and_repo_id(tmp_path, capsys, monkeypatch):
    # the repo folder of the cache (or its snapshots/) had only "directory has no config.json"
    repo = _hf_cache(tmp_path)
    snap = repo / "snapshots" / "0123abcd"
    for given in (repo, repo / "snapshots"):
        _one_line_exit_2(capsys, given, "directory has no config.json", f"snapshot folder {snap}",
                         "repo id org/eagle3-draft")
    code, out, _ = _wiring(capsys, snap, "--json")     # the snapshot itself: its .bin links are read
    assert code == 1 and json.loads(out)["fc_in_features"] == FC_BAD[1]
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    code, out, _ = _wiring(capsys, "org/eagle3-draft", "--json")
    assert code == 1 and json.loads(out)["fc_in_features"] == FC_BAD[1]


def test_a_broken_safetensors_link_in_a_snapshot_is_named(tmp_path, capsys):
    # an interrupted download leaves a snapshot link to a blob that never arrived: the *.bin reader named
    # it, the safetensors one said "cannot read (No such file or directory)"
    snap = _hf_cache(tmp_path) / "snapshots" / "0123abcd"
    os.symlink("../../blobs/5afe7e05", snap / "model.safetensors")
    _one_line_exit_2(capsys, snap, "model.safetensors: a broken symlink (its target ../../blobs/5afe7e05 is missing")


@pytest.mark.parametrize("prefix", ["module.", "_orig_mod.", "module._orig_mod."])
def test_a_ddp_or_compiled_save_is_named(tmp_path, capsys, prefix):
    # DistributedDataParallel saves module.X, a torch.compile'd model _orig_mod.X: SGLang strips neither,
    # matches no parameter and skips every tensor (the Llama head silently)
    d = _draft(tmp_path, {"pytorch_model.bin": {prefix + "fc.weight": _meta(FC_OK),
                                                prefix + "midlayer.mlp.up_proj.weight": _meta([12288, 7168])}})
    code, out, _ = _wiring(capsys, d, "--json")
    problems = json.loads(out)["problems"]
    assert code == 1
    named = [p["message"] for p in problems if p["code"] == "weight_not_loaded"]
    assert len(named) == 1 and f"under the prefix {prefix!r}" in named[0], problems
    # the same names beside their plain spellings: what SGLang loads is there, nothing to say
    torch.save({prefix + "fc.weight": _meta(FC_OK), "fc.weight": _meta(FC_OK)}, d / "pytorch_model.bin")
    code, out, _ = _wiring(capsys, d, "--json")
    assert code == 0 and "weight_not_loaded" not in out


def test_a_folder_with_only_training_state_says_so(tmp_path, capsys):
    d = _draft(tmp_path, {"training_args.bin": {"lr": 1e-4}, "optimizer.pt": {"step": 1}})
    code, out, _ = _wiring(capsys, d)
    assert code == 0 and "no weights found, only training state (training_args.bin, optimizer.pt)" in out


def test_no_false_refusal_beside_loadable_spellings():
    # a pre-fused attention name beside both shards: the shards fill the fused parameter; a wrapped fc beside
    # model.fc.weight (which the Llama head loads): SGLang has what it needs in both
    from sglang_eagle_cycle.safetensors_header import mla_a_proj_dropped, wrapper_prefixed

    attn = "layers.0.self_attn.{}.weight"
    both = [attn.format("q_a_proj"), attn.format("kv_a_proj_with_mqa")]
    assert mla_a_proj_dropped(both + [attn.format("fused_qkv_a_proj_with_mqa")]) == []
    assert mla_a_proj_dropped([both[0], attn.format("fused_qkv_a_proj_with_mqa")]) == sorted(
        [both[0], attn.format("fused_qkv_a_proj_with_mqa")])
    assert wrapper_prefixed(["module.fc.weight", "model.fc.weight"]) == []
    assert wrapper_prefixed(["module.fc.weight", "module.lm_head.weight"]) == ["module."]
    # a wrapped lm_head alone (a stray copy) says nothing of the fc
    assert wrapper_prefixed(["fc.weight", "module.lm_head.weight"]) == []
