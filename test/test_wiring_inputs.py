"""Inputs `eagle-cycle wiring`, `eagle-cycle probe` and the start-up check misread, each measured first.

1. A prompts line holding a lone surrogate (``{"prompt": "\\ud800"}``: valid JSON, no text) reached the
   target's tokenizer, which raises ``TypeError``: a traceback. Now one line naming the file and line, exit 2.
2. Nothing compared a prompt's length plus ``--tokens`` with the target's ``max_position_embeddings``:
   ``--tokens 99999999`` or a 200,000-token prompt on a 512-position target ran until killed. Now refused
   before the target loads. (A draft whose own ``max_position_embeddings`` is below the longest sequence
   failed on a shape mismatch: its RoPE is now computed on past it, with a note.)
3. A draft safetensors header the safetensors library refuses (a dtype it does not know, ``data_offsets``
   missing or reversed, ``__metadata__`` no object of strings; with data, a layout that does not add up)
   passed `wiring` with exit 0 while SGLang's loader fails on the file. Now unusable input, exit 2;
   header-only files (the project's fixtures) are still read.
4. A FIFO named ``config.json`` was reported as "directory has no config.json".
5. Both SGLang 0.5.23 EAGLE-3 heads load a ``d2t`` stored under any name ending in ``.d2t``
   (``module.d2t`` from a DistributedDataParallel save), ``LlamaForCausalLMEagle3`` any name containing
   ``d2t``; the reader saw only ``d2t`` / ``model.d2t`` and reported ``d2t_missing``, an error that stops
   a launch SGLang would have served.

The SGLang measurement runs this file as a script in a fresh interpreter (``python
test/test_wiring_inputs.py DIR``: SGLang must be imported after ``sglang_cpu.setup()``) and prints one
JSON line.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import struct
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
KIMI = HERE.parent / "examples" / "kimi-k25"
LLAMA, MLA = "LlamaForCausalLMEagle3", "Eagle3DeepseekV2ForCausalLM"
#: names a checkpoint may store d2t under, as handed to each head
D2T_NAMES = ("d2t", "model.d2t", "module.d2t", "_orig_mod.d2t", "module.model.d2t", "d2t_map")
#: headers the safetensors library refuses (each else a valid one-tensor file with its data)
FC_BYTES = 64 * 192 * 4


def _fc(**over) -> dict:
    return {"dtype": "F32", "shape": [64, 192], "data_offsets": [0, FC_BYTES], **over}


BAD_HEADERS = {
    "dtype ZZ": {"fc.weight": _fc(dtype="ZZ")},
    "dtype null": {"fc.weight": _fc(dtype=None)},
    "dtype 5": {"fc.weight": _fc(dtype=5)},
    "offsets reversed": {"fc.weight": _fc(data_offsets=[FC_BYTES, 0])},
    "offsets missing": {"fc.weight": {"dtype": "F32", "shape": [64, 192]}},
    "metadata a list": {"__metadata__": ["format", "pt"], "fc.weight": _fc()},
}


def _kimi_wide(header: dict) -> dict:
    """``header`` with its fc as wide as the bundled Kimi-K2.5 draft's ([7168, 21504]): every check of
    `eagle-cycle wiring` on that pair passed such a header with exit 0."""
    out = {}
    for name, entry in header.items():
        if isinstance(entry, dict) and entry.get("shape") == [64, 192]:
            scale = 7168 * 21504 * 4 // FC_BYTES
            entry = {**entry, "shape": [7168, 21504]}
            if isinstance(entry.get("data_offsets"), list):
                entry["data_offsets"] = [o * scale for o in entry["data_offsets"]]
        out[name] = entry
    return out


def _write_raw(path: Path, header: dict, data: bytes = b"") -> Path:
    """A safetensors file by the format's definition: 8-byte length, JSON header, ``data``."""
    blob = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + data)
    return path


# ---------------------------------------------------------------------------------------- the SGLang probe

def _probe(workdir: str) -> dict:
    """Run in a fresh interpreter: SGLang 0.5.23's two EAGLE-3 heads on the CPU, fed through its own
    loader (``DefaultModelLoader``) from real safetensors folders."""
    sys.path.insert(0, str(HERE))
    import sglang_cpu

    sglang_cpu.setup()
    import torch

    import mla_fc_probe as heads
    import test_wiring_gaps as gaps
    from safetensors.torch import save_file
    from sglang.srt.configs.load_config import LoadConfig
    from sglang.srt.model_loader.loader import DefaultModelLoader

    work = Path(workdir)
    (work / "config.json").write_text(json.dumps(gaps.TINY))   # draft_vocab_size 128 < vocab_size 256
    configs = {MLA: sglang_cpu.read_config(str(work)), LLAMA: heads._llama_config(str(work))}
    models = {arch: heads._build((arch, module), configs[arch]) for arch, module in (heads.MLA, heads.LLAMA)}
    loader = DefaultModelLoader(LoadConfig())

    def load(model, folder: Path):
        model.load_weights(loader._get_weights_iterator(DefaultModelLoader.Source(str(folder), None)))

    result: dict = {"d2t": {}, "bad_header": {}}
    fc, lm_head = torch.ones(64, 192), torch.ones(128, 64)
    for name in D2T_NAMES:   # d2t = 3 everywhere: hot_token_id[5] reads 8 where it loaded
        folder = work / "d2t" / name
        folder.mkdir(parents=True)
        save_file({"fc.weight": fc, "lm_head.weight": lm_head, name: torch.full((128,), 3, dtype=torch.int64)},
                  str(folder / "model.safetensors"))
        for arch, model in models.items():
            model.hot_token_id = None
            load(model, folder)
            result["d2t"][f"{arch} {name}"] = None if model.hot_token_id is None else int(model.hot_token_id[5])
    for case, header in BAD_HEADERS.items():
        folder = work / "bad" / case.replace(" ", "_")
        folder.mkdir(parents=True)
        _write_raw(folder / "model.safetensors", header, b"\0" * FC_BYTES)
        try:
            load(models[LLAMA], folder)
            result["bad_header"][case] = None
        except Exception as exc:  # noqa: BLE001 - the failure is the measurement
            result["bad_header"][case] = f"{type(exc).__name__}: {exc}"
    return result


if __name__ == "__main__":
    print(json.dumps(_probe(sys.argv[1])))
    sys.exit(0)


# ------------------------------------------------------------------------------------------------ the tests

import pytest  # noqa: E402
import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402

from conftest import self_probe  # noqa: E402
from sglang_eagle_cycle import cli  # noqa: E402
from sglang_eagle_cycle.safetensors_header import read_draft_shapes, write_header_only  # noqa: E402
import test_wiring_gaps as gaps  # noqa: E402


@pytest.fixture(scope="module")
def sglang_probe(tmp_path_factory):
    if importlib.util.find_spec("sglang") is None:
        pytest.skip("SGLang is not installed")
    return self_probe(tmp_path_factory, Path(__file__), "inputs_probe")


@pytest.fixture(scope="module")
def random_pair(tmp_path_factory) -> Path:
    """A tiny Llama target (8 layers, 512 positions, a BPE tokenizer) and an EAGLE-3 draft on ids 1,3,5,
    both with random weights, in make-tiny-pair's layout: enough for the probe to run (2 s, no training)."""
    from sglang_eagle_cycle.tiny import corpus
    from sglang_eagle_cycle.tiny import pair as tiny
    from sglang_eagle_cycle.tiny.models import Eagle3Head, Eagle3Shape, LlamaShape, TinyLlama, init_weights

    out = tmp_path_factory.mktemp("random_pair")
    tok = corpus.train_tokenizer(corpus.module_text(tiny.HELD_OUT_MODULES), corpus.VOCAB)
    torch.manual_seed(0)
    target = TinyLlama(LlamaShape(vocab=corpus.VOCAB, layers=tiny.NUM_LAYERS))
    init_weights(target)
    tiny._write_target(out / "target", target, tok)
    head = Eagle3Head(Eagle3Shape(vocab=corpus.VOCAB, draft_vocab=512), torch.arange(512) * 2)
    init_weights(head)
    tiny._write_draft(out / "draft", head, tiny.PairSpec(arch="llama", seed=0))
    assert json.loads((out / "target" / "config.json").read_text())["max_position_embeddings"] == 512
    return out


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(err: str) -> str:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def _draft(tmp_path: Path, arch: str = LLAMA, **config) -> Path:
    """The bundled Kimi-K2.5 draft config (``arch``, ``config`` over it) in a folder of its own."""
    draft = tmp_path / "draft"
    draft.mkdir(parents=True)
    cfg = json.loads((KIMI / "draft" / "config.json").read_text())
    (draft / "config.json").write_text(json.dumps({**cfg, "architectures": [arch], **config}))
    return draft


# ------------------------------------------------------------------------------------ 1. a lone surrogate

def test_a_lone_surrogate_prompt_is_one_line(random_pair, tmp_path, capsys):
    from transformers import AutoTokenizer

    # what the target's tokenizer does with it: a TypeError, which was the traceback
    with pytest.raises(TypeError):
        AutoTokenizer.from_pretrained(str(random_pair / "target"))("\ud800")
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "def f(x):"}\n\n{"prompt": "a \\ud800 b"}\n')
    for argv in (["probe"], ["wiring", "--probe"]):
        code, out, err = _run(capsys, *argv, str(random_pair / "target"), str(random_pair / "draft"),
                              "--prompts", str(prompts))
        assert code == 2, err
        assert f'{prompts}:3: "prompt" holds a lone surrogate (\\ud800 at character 2)' in _one_line(err)
    # a surrogate pair written as escapes is text: read, not refused
    from sglang_eagle_cycle.wiring.probe import read_prompt_lines

    prompts.write_text('{"prompt": "\\ud83d\\ude00"}\n')
    assert read_prompt_lines(prompts) == [(1, "\U0001F600")]


# ------------------------------------------------------------------------------ 2. the target's context

def test_prompts_past_the_target_context_are_refused_before_it_loads(random_pair, tmp_path, capsys):
    target, draft = str(random_pair / "target"), str(random_pair / "draft")
    short = tmp_path / "short.jsonl"
    short.write_text('{"prompt": "def f(x):"}\n')
    from transformers import AutoTokenizer

    n = len(AutoTokenizer.from_pretrained(target)("def f(x):")["input_ids"])
    config = random_pair / "target" / "config.json"
    # past the context by a little first: it ran (transformers extrapolates RoPE) and gave a verdict
    for tokens in (513 - n, 99999999):   # the second ran until killed
        code, _, err = _run(capsys, "probe", target, draft, "--prompts", str(short), "--tokens", str(tokens))
        assert code == 2
        assert _one_line(err).endswith(
            f"{short}:1: a prompt of {n} tokens plus {tokens} generated (--tokens) is {n + tokens} tokens, more "
            f"than the target's context of 512 ({config}: max_position_embeddings): use --tokens {512 - n} or "
            f"fewer, or a shorter prompt\n")
    long = tmp_path / "long.jsonl"
    long.write_text('{"prompt": "def f(x):"}\n' + json.dumps({"prompt": "x = 1\n" * 100_000}) + "\n")
    code, _, err = _run(capsys, "wiring", target, draft, "--probe", "--prompts", str(long))
    assert code == 2
    assert f"{long}:2: a prompt of " in _one_line(err) and "shorten it to 480 tokens or fewer" in err
    # exactly the context fits: the probe runs
    code, out, err = _run(capsys, "probe", target, draft, "--prompts", str(short), "--tokens", str(512 - n), "--json")
    assert code in (0, 1), err
    assert json.loads(out)["tokens"] == 512 - n


def test_a_draft_shorter_than_the_probe_gets_its_rope_computed_on(random_pair, tmp_path, capsys):
    # it failed on "The size of tensor a (36) must match the size of tensor b (16)", a traceback
    pair = tmp_path / "pair"
    shutil.copytree(random_pair, pair)
    cfg = json.loads((pair / "draft" / "config.json").read_text())
    (pair / "draft" / "config.json").write_text(json.dumps({**cfg, "max_position_embeddings": 16}))
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "def f(x):"}\n')
    code, out, err = _run(capsys, "probe", str(pair / "target"), str(pair / "draft"), "--prompts", str(prompts),
                          "--tokens", "32", "--json")
    assert code in (0, 1), err
    notes = json.loads(out)["notes"]
    assert any(n.startswith("the draft's max_position_embeddings 16 is below the probe's longest sequence")
               for n in notes), notes


# ------------------------------------------------------------------- 3. headers safetensors itself refuses

@pytest.mark.parametrize("case", list(BAD_HEADERS))
def test_a_header_safetensors_refuses_is_unusable_input(tmp_path, capsys, case):
    header = _kimi_wide(BAD_HEADERS[case])
    draft = _draft(tmp_path)
    path = _write_raw(draft / "model.safetensors", header)   # header-only, as the fixtures are
    # the library refuses the header itself, not only the missing data
    with pytest.raises(Exception) as refused:
        safe_open(str(path), framework="pt")
    assert "incomplete metadata" not in str(refused.value)
    code, out, err = _run(capsys, "wiring", str(KIMI / "target"), str(draft), "--json")
    assert (code, out) == (2, ""), out   # it was exit 0
    assert f"{path}: a safetensors header the safetensors library refuses (" in _one_line(err)
    assert ("'fc.weight'" in err) == (case != "metadata a list")
    assert "SGLang 0.5.23's loader fails on this file" in err


def test_sglang_loader_fails_on_those_headers(sglang_probe):
    for case, error in sglang_probe["bad_header"].items():
        assert error is not None and error.startswith("SafetensorError: Error while deserializing header"), case


def test_a_layout_safetensors_refuses_is_unusable_input_where_the_data_is_there(tmp_path, capsys):
    draft = _draft(tmp_path)
    path = draft / "model.safetensors"
    cases = {   # header, data: what safetensors says
        "truncated": ({"fc.weight": _fc()}, FC_BYTES // 2, "incomplete metadata"),
        "size": ({"fc.weight": _fc(data_offsets=[0, FC_BYTES - 4])}, FC_BYTES - 4, "invalid shape, data type"),
        "gap": ({"fc.weight": _fc(data_offsets=[8, FC_BYTES + 8])}, FC_BYTES + 8, "invalid offset"),
    }
    for case, (header, size, says) in cases.items():
        _write_raw(path, header, b"\0" * size)
        with pytest.raises(Exception, match=says):
            safe_open(str(path), framework="pt")
        code, _, err = _run(capsys, "wiring", str(KIMI / "target"), str(draft))
        assert code == 2 and f"{path}: a safetensors header the safetensors library refuses" in _one_line(err), case
    # what it reads is read: the dtype as a one-key object, __metadata__ null; header-only files laid out or not
    _write_raw(path, {"__metadata__": None, "fc.weight": _fc(dtype={"F32": None})}, b"\0" * FC_BYTES)
    with safe_open(str(path), framework="pt") as f:
        assert list(f.keys()) == ["fc.weight"]
    assert read_draft_shapes(draft) == {"fc.weight": [64, 192]}
    write_header_only(path, {"fc.weight": [7168, 21504], "lm_head.weight": [163840, 7168]})
    assert _run(capsys, "wiring", str(KIMI / "target"), str(draft))[0] == 0
    _write_raw(path, {n: {"dtype": "BF16", "shape": s, "data_offsets": [0, 0]}
                      for n, s in (("fc.weight", [7168, 21504]), ("lm_head.weight", [163840, 7168]))})
    assert _run(capsys, "wiring", str(KIMI / "target"), str(draft))[0] == 0


def test_the_server_logs_a_refused_header_once_and_goes_on(tmp_path, monkeypatch, caplog):
    from sglang_eagle_cycle import runtime
    from sglang_eagle_cycle.patches import wiring as server

    draft = _draft(tmp_path)
    _write_raw(draft / "model.safetensors", BAD_HEADERS["dtype ZZ"])
    monkeypatch.setattr(runtime, "draft_model_path", lambda: (str(draft), None))
    monkeypatch.setattr(server, "_CHECKPOINT_WARNED", set())
    with caplog.at_level("WARNING", logger="sglang_eagle_cycle"):
        for _ in range(2):
            cfg, header = server._read_draft()
            assert cfg["architectures"] == [LLAMA] and header is None
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and "dtype 'ZZ', not one safetensors knows" in warned[0]


# --------------------------------------------------------------------------------- 4. a FIFO config.json

def test_a_config_json_that_is_no_regular_file_is_named(tmp_path, capsys):
    target = str(KIMI / "target")
    fifo, folder, link = tmp_path / "fifo", tmp_path / "dir", tmp_path / "link"
    for d in (fifo, folder, link):
        d.mkdir()
    os.mkfifo(fifo / "config.json")
    (folder / "config.json").mkdir()
    (link / "config.json").symlink_to(tmp_path / "nowhere.json")
    want = {fifo: "not a regular file (a FIFO, socket or device); expected the model's config.json",
            folder: "a directory, not a config file",
            link: f"broken symbolic link (its target {tmp_path / 'nowhere.json'} does not exist)"}
    for d, words in want.items():
        for argv in (["wiring", target, str(d)], ["probe", target, str(d)]):
            code, _, err = _run(capsys, *argv)
            assert code == 2 and _one_line(err).endswith(f"{d / 'config.json'}: {words}\n"), err
    # an empty folder is still one with no config.json
    (tmp_path / "empty").mkdir()
    assert "directory has no config.json" in _run(capsys, "wiring", target, str(tmp_path / "empty"))[2]


# ------------------------------------------------------------------------------------ 5. d2t, however named

def test_sglang_loads_d2t_under_any_name_ending_so(sglang_probe):
    loaded = sglang_probe["d2t"]
    for name in D2T_NAMES[:-1]:   # both heads: hot_token_id = d2t + arange, so [5] is 3 + 5
        assert loaded[f"{LLAMA} {name}"] == loaded[f"{MLA} {name}"] == 8, name
    # a name merely containing d2t: the Llama head only
    assert (loaded[f"{LLAMA} d2t_map"], loaded[f"{MLA} d2t_map"]) == (8, None)


def _errors(capsys, draft: Path) -> tuple[int, list[str]]:
    code, out, err = _run(capsys, "wiring", str(KIMI / "target"), str(draft), "--json")
    assert out, err
    return code, [p["code"] for p in json.loads(out)["problems"] if p["level"] == "error"]


#: the server's start-up check's error codes for a draft folder (a Kimi-K2.5 target)
_server_codes = gaps._server_codes


@pytest.mark.parametrize("arch", [LLAMA, MLA])
def test_a_d2t_under_a_wrapper_name_is_no_d2t_missing(tmp_path, capsys, arch):
    base = {"fc.weight": [7168, 21504], "lm_head.weight": [32000, 7168]}
    for name in ("module.d2t", "_orig_mod.d2t", "d2t_map", "d2t"):
        draft = _draft(tmp_path / name, arch, draft_vocab_size=32000)
        write_header_only(draft / "model.safetensors", {**base, name: [32000]})
        want = ["d2t_missing"] if (arch, name) == (MLA, "d2t_map") else []
        assert _errors(capsys, draft) == (int(bool(want)), want), name   # module.d2t was d2t_missing
        assert _server_codes(draft) == want, name
    # the text report names the tensor as stored
    out = _run(capsys, "wiring", str(KIMI / "target"), str(tmp_path / "module.d2t" / "draft"))[1]
    assert "lm_head.weight [32000, 7168], module.d2t [32000]" in out
    # no d2t at all is still the error
    draft = _draft(tmp_path / "none", arch, draft_vocab_size=32000)
    write_header_only(draft / "model.safetensors", base)
    assert _errors(capsys, draft) == (1, ["d2t_missing"])
    # sharded: the index names it module.d2t in another shard
    draft = _draft(tmp_path / "sharded", arch, draft_vocab_size=32000)
    write_header_only(draft / "a.safetensors", base)
    write_header_only(draft / "b.safetensors", {"module.d2t": [32000]})
    (draft / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "fc.weight": "a.safetensors", "lm_head.weight": "a.safetensors", "module.d2t": "b.safetensors"}}))
    assert _errors(capsys, draft) == (0, [])
    assert read_draft_shapes(draft)["d2t"] == [32000]


def test_the_probe_reads_a_wrapped_d2t_as_sglang_does(random_pair, tmp_path, capsys):
    # "not a plain EAGLE-3 head checkpoint (unexpected module.d2t)" before; now the same agreements
    from safetensors.torch import load_file, save_file

    pair = tmp_path / "pair"
    shutil.copytree(random_pair, pair)
    tensors = load_file(str(pair / "draft" / "model.safetensors"))
    tensors["module.d2t"] = tensors.pop("d2t")
    save_file(tensors, str(pair / "draft" / "model.safetensors"))
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "def f(x):"}\n{"prompt": "import os"}\n')
    runs = []
    for root in (random_pair, pair):
        code, out, err = _run(capsys, "probe", str(root / "target"), str(root / "draft"), "--prompts", str(prompts),
                              "--tokens", "8", "--json")
        assert code in (0, 1), err
        runs.append({tuple(c["positions"]): c["agreement"] for c in json.loads(out)["candidates"]})
    assert runs[0] == runs[1] and len(runs[0]) >= 3
