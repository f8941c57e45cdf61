"""eagle-cycle probe on the suite's tiny pairs (CPU): states, verdicts, fixes and unusable input.

The pairs come from ``test/tiny_pairs.py`` (trained once per trainer version and cached, like
every other test on them), so these tests run, and can fail, on a clean machine too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import torch

import tiny_pairs
from sglang_eagle_cycle.commands import probe_cmd
from sglang_eagle_cycle.errors import UsageError


def cached(arch: str, declared: bool = False) -> Path:
    """The suite's pair folder: ``llama``, ``deepseek_v3``, or the DeepSeek-V3 copy declaring ids 2,4,6."""
    name = "deepseek_v3_ids246" if declared else arch
    return tiny_pairs.pair(name)[0]


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    """probe_cmd.main as the CLI calls it: UsageError -> one line, exit 2."""
    parser = argparse.ArgumentParser(prog="eagle-cycle probe")
    probe_cmd.add_cli_args(parser)
    args = parser.parse_args(argv)
    try:
        code = probe_cmd.main(args)
    except UsageError as exc:
        print(f"eagle-cycle probe: error: {exc}", file=sys.stderr)
        code = 2
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for k in list(os.environ):
        if k.startswith("SGLANG_EAGLE_CYCLE_"):
            monkeypatch.delenv(k)


#: per worker: a target folder's loaded model (by the files it holds), and the forwards and probe
#: results already read or computed
_TARGETS: dict = {}
_FORWARDS: dict = {}
_PROBES: dict = {}


@pytest.fixture(autouse=True)
def _each_target_forward_once(monkeypatch, tmp_path_factory):
    """The probe's target work (greedy continuation, forward with every layer's states) computed
    once per test session for the same target files and the same tokens, and the same probe of the
    same files run once; each test's own draft still runs on those states.

    Nine tests once probed the llama pair's target on its 1,024 prompts: 16 of each run's 34 s went
    to the same target computation, and three ran the same probe. They now probe copies holding
    the first 256 or 512 of them (:func:`copy_pair`), which share the full set's first batch. A copy
    of a pair links the target's files, so the target key is the files the folder's names resolve
    to; a probe's key is the content of the target, draft and prompt files. Under pytest-xdist the first
    worker to need a value writes it to the session's shared folder (:func:`conftest.tensors_once`,
    :func:`conftest.computed_once`), the others read it. Offloaded loads (``--max-memory``) are never
    shared. Values are handed out as copies, so a test that changed one could not change another's.
    """
    import copy
    import hashlib

    from conftest import computed_once, tensors_once
    from sglang_eagle_cycle.wiring import probe as mod

    real_load, real_greedy, real_forward, real_probe = mod.load_target, mod.greedy_continue, mod.target_forward, mod.probe

    def load_target(target_dir, device="cpu", dtype="float32", max_memory=None):
        if max_memory is not None:
            return real_load(target_dir, device, dtype, max_memory)
        files = tuple(sorted((f.name, str(f.resolve())) for f in Path(target_dir).iterdir()))
        key = (files, device, dtype)
        if key not in _TARGETS:
            _TARGETS[key] = real_load(target_dir, device, dtype, max_memory)
        return _TARGETS[key]

    def shared(model, kind, tokens, extra, compute):
        target = next((k for k, m in _TARGETS.items() if m is model), None)
        if target is None:
            return compute()
        blob = tokens.cpu().numpy().tobytes()
        key = (target, kind, tuple(tokens.shape), blob, extra)
        if key not in _FORWARDS:
            digest = hashlib.sha256(repr(key[:3] + key[4:]).encode() + blob).hexdigest()[:20]
            _FORWARDS[key] = tensors_once(tmp_path_factory, f"probe-target-{kind}-{digest}", compute)
        return _FORWARDS[key]

    def greedy_continue(model, prompts, n):
        return shared(model, "greedy", prompts, n, lambda: real_greedy(model, prompts, n)).clone()

    def target_forward(model, ids, keep=None):
        states, logits = shared(model, "forward", ids, None, lambda: real_forward(model, ids))
        rows = list(range(states.shape[0])) if keep is None else sorted(set(keep))
        return states[rows], logits.clone()

    def files(folder) -> tuple:
        # by content, so two tests' copies of one pair with the same draft config share one probe;
        # a config.json by what it says (copy_pair's edits rewrite it without the cache's indent)
        p = Path(folder)
        p = p.parent if p.is_file() else p
        out = []
        for f in sorted(p.iterdir()):
            if not f.is_file():
                continue
            data = f.read_bytes()
            if f.name == "config.json":
                try:
                    data = json.dumps(json.loads(data), sort_keys=True).encode()
                except ValueError:
                    pass
            out.append((f.name, hashlib.sha256(data).hexdigest()))
        return tuple(out)

    def probe(target, draft, prompts_file=None, tokens=None, device="cpu", dtype="float32", max_memory=None,
              env=None, progress=None):
        # the same probe of the same files (eagle-cycle probe, then wiring --probe) runs once; its result
        # is handed out as a copy. Folders that are not plain local ones (a cache's repo id) always run.
        if max_memory is not None or env is not None or not (Path(target).exists() and Path(draft).exists()):
            return real_probe(target, draft, prompts_file, tokens, device, dtype, max_memory, env, progress)
        plugin_env = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("SGLANG_")))
        prompts = Path(target).parent / "eval_prompts.json"   # where the probe finds a pair's prompts
        key = (files(target), files(draft), files(prompts) if prompts.is_file() else None, str(prompts_file),
               tokens, device, dtype, plugin_env)
        if key not in _PROBES:
            digest = hashlib.sha256(repr(key).encode()).hexdigest()[:20]
            _PROBES[key] = computed_once(tmp_path_factory, f"probe-result-{digest}", lambda: real_probe(
                target, draft, prompts_file, tokens, device, dtype, max_memory, env, progress))
        return copy.deepcopy(_PROBES[key])

    monkeypatch.setattr(mod, "probe", probe)
    monkeypatch.setattr(mod, "load_target", load_target)
    monkeypatch.setattr(mod, "greedy_continue", greedy_continue)
    monkeypatch.setattr(mod, "target_forward", target_forward)


#: probe prompts of :func:`copy_pair`'s reduced copies: the first of the pair's 1,024, which the probe
#: runs as one batch (``probe.BATCH``), so their target forwards are those of the full set's first
#: batch. 8,192 scored tokens (2026-12-07): the Llama draft's own [2, 4, 6] at 45.0%, the family
#: default [2, 4, 5] 6.7 points below (p = 1e-58), the rest 28 points or more; the DeepSeek-V3 draft
#: declaring ids 2,4,6 is 27.8 points below its own where the plugin reads it (p < 1e-300)
FEW_PROMPTS = 256


def copy_pair(src: Path, dest: Path, draft_cfg_edit=None, prompts: int | None = None) -> Path:
    """A pair folder copy (target files linked, draft copied), optionally editing the draft config;
    with ``prompts``, only the first that many of the pair's probe prompts (the probe's cost grows
    with them: 13-20 s of a test on 1,024 where the target's forwards are shared)."""
    dest.mkdir()
    (dest / "target").mkdir()
    for f in (src / "target").iterdir():
        (dest / "target" / f.name).symlink_to(f)
    if prompts is None:
        shutil.copy(src / "eval_prompts.json", dest / "eval_prompts.json")
    else:
        data = json.loads((src / "eval_prompts.json").read_text())
        data["probe_prompts"] = data["probe_prompts"][:prompts]
        (dest / "eval_prompts.json").write_text(json.dumps(data))
    shutil.copytree(src / "draft", dest / "draft")
    if draft_cfg_edit is not None:
        p = dest / "draft" / "config.json"
        cfg = json.loads(p.read_text())
        draft_cfg_edit(cfg)
        p.write_text(json.dumps(cfg))
    return dest


def set_ids(ids):
    def edit(cfg):
        cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = ids
    return edit


# ----------------------------------------------------------------------------- target states
@pytest.mark.parametrize("arch", ["llama", "deepseek_v3"])
def test_states_equal_tiny_model(arch):
    from sglang_eagle_cycle.wiring.probe import greedy_continue, load_target, target_forward
    from sglang_eagle_cycle.tiny.agreement import greedy_generate
    from sglang_eagle_cycle.tiny.load import load_target as tiny_target

    d = cached(arch)
    prompts = torch.tensor(json.loads((d / "eval_prompts.json").read_text())["held_out_prompts"][:4])
    hf, tiny = load_target(d / "target"), tiny_target(d / "target")
    seqs = greedy_continue(hf, prompts, 16)
    assert torch.equal(seqs, greedy_generate(tiny, prompts, 16))
    states, logits = target_forward(hf, seqs)
    ref = torch.stack(tiny.states(seqs))
    assert states.shape == ref.shape == (9, 4, 32, 256)
    assert (states - ref).abs().max().item() < 1e-4
    # position N is before the final norm: HF's hidden_states[-1] (after the norm) would differ
    assert (tiny.model.norm(ref[-1]) - ref[-1]).abs().max().item() > 0.1
    assert torch.allclose(logits, tiny.logits_from_last(ref[-1]), atol=1e-3)


# ----------------------------------------------------------------------------- verdicts
def test_llama_pair_plugin_best(tmp_path, capsys):
    from sglang_eagle_cycle.wiring.probe import BATCH, load_prompts

    # the pair's own prompts, as the probe takes them without --prompts: its 1,024 probe_prompts,
    # gen_tokens 32 each
    default = load_prompts(cached("llama") / "target", None, None)
    assert (len(default.ids), default.tokens) == (1024, 32)
    # probed on two batches of them (the hits of each batch are joined)
    d = copy_pair(cached("llama"), tmp_path / "p", prompts=2 * BATCH)
    code, out, err = run([str(d / "target"), str(d / "draft"), "--json"], capsys)
    assert code == 0, err
    r = json.loads(out)
    assert r["verdict"] == "plugin_best" and r["fix"] is None
    assert r["best"]["positions"] == [2, 4, 6] == r["plugin_positions"] == r["stock_positions"]
    assert set(r["best"]["names"]) >= {"plugin", "stock"}
    assert r["scored_tokens"] == 2 * BATCH * 32 and r["prompts"] == 2 * BATCH
    runner_up = r["candidates"][1]
    assert runner_up["positions"] != [2, 4, 6]
    assert runner_up["margin_vs_best"] < 0 and runner_up["p_vs_best"] <= 0.05
    assert all(c["p_vs_best"] <= 0.05 for c in r["candidates"][1:])
    assert r["aux_ablated_agreement"] < r["best"]["ci"][0]
    lo, hi = r["best"]["ci"]
    assert lo < r["best"]["agreement"] < hi


def test_llama_declared_as_positions_other_best_and_fix(tmp_path, capsys):
    """Draft trained on positions [2, 4, 6], config declaring ids 2,4,6: the plugin reads [3, 5, 7]."""
    src = cached("llama")
    bad = copy_pair(src, tmp_path / "bad", set_ids([2, 4, 6]), prompts=FEW_PROMPTS)
    code, out, err = run([str(bad / "target"), str(bad / "draft"), "--json"], capsys)
    r = json.loads(out)
    assert (code, r["verdict"]) == (1, "other_best"), err
    assert r["plugin_positions"] == [3, 5, 7] and r["best"]["positions"] == [2, 4, 6]
    assert r["fix"]["eagle_aux_hidden_state_layer_ids"] == [1, 3, 5]
    assert r["fix"]["aux_convention"] == "input"
    plugin = next(c for c in r["candidates"] if "plugin" in c["names"])
    assert plugin["p_vs_best"] <= 0.05
    fixed = copy_pair(src, tmp_path / "fixed", set_ids(r["fix"]["eagle_aux_hidden_state_layer_ids"]),
                      prompts=FEW_PROMPTS)
    code, out, err = run([str(fixed / "target"), str(fixed / "draft")], capsys)
    assert code == 0, out + err
    assert "verdict: plugin_best" in out and "fix: none needed" in out


def test_deepseek_declared_ids246_positions(tmp_path, capsys):
    """A draft trained on positions [2, 4, 6] declaring ids 2,4,6: stock captures [2, 4, 6], the plugin
    [3, 5, 7], one layer late. The tiny drafts are trained against their neighbouring wirings
    (``tiny.train.train_draft``'s decoys), so reading one layer late costs this one most of its
    agreement and the McNemar test says so: other_best, with the fix that names what stock captures."""
    d = copy_pair(cached("deepseek_v3", declared=True), tmp_path / "ids246", prompts=FEW_PROMPTS)
    code, out, err = run([str(d / "target"), str(d / "draft"), "--json"], capsys)
    r = json.loads(out)
    assert r["plugin_positions"] == [3, 5, 7] and r["stock_positions"] == [2, 4, 6]
    assert r["best"]["positions"] == [2, 4, 6]
    plugin = next(c for c in r["candidates"] if "plugin" in c["names"])
    assert plugin["margin_vs_best"] < -0.05 and plugin["p_vs_best"] <= 0.05
    assert (code, r["verdict"]) == (1, "other_best"), err
    assert r["fix"]["eagle_aux_hidden_state_layer_ids"] == [1, 3, 5]


def test_random_draft_not_trained_on_target(tmp_path, capsys):
    """fc, the decoder layer and lm_head re-initialised (seeded): no candidate beats aux zeroed."""
    from safetensors.torch import load_file, save_file

    src = cached("llama")
    d = copy_pair(src, tmp_path / "rand", prompts=FEW_PROMPTS)
    w = load_file(str(d / "draft" / "model.safetensors"))
    g = torch.Generator().manual_seed(0)
    for k, v in w.items():
        if (k in ("fc.weight", "lm_head.weight") or k.startswith("layers.")) and v.dim() == 2:
            w[k] = torch.randn(v.shape, generator=g) * 0.02
    save_file(w, str(d / "draft" / "model.safetensors"))
    code, out, err = run([str(d / "target"), str(d / "draft"), "--json"], capsys)
    r = json.loads(out)
    assert (code, r["verdict"], r["fix"]) == (1, "not_trained_on_target", None), r


def test_plugin_best_with_wiring_error_exits_1(tmp_path, capsys):
    """use_aux_hidden_state false with fc 3 x hidden wide: a static wiring error, so exit 1."""
    def edit(cfg):
        cfg["eagle_config"]["use_aux_hidden_state"] = False
    d = copy_pair(cached("llama"), tmp_path / "p", edit, prompts=FEW_PROMPTS)
    code, out, err = run([str(d / "target"), str(d / "draft")], capsys)
    assert code == 1, err
    assert "verdict: plugin_best" in out and "wiring errors: aux_capture_off_fc_mismatch" in out
    # never "none needed" beside a wiring error: the positions need none, the pair does
    assert "fix: none needed" not in out and "fix: the positions need no change (the wiring errors above do)" in out


def test_offloaded_target_states(tmp_path, monkeypatch):
    """--max-memory: accelerate offloads most of the target to disk; the states do not change, and
    the offload folder is removed with the model (it was left in the temp folder; with ``.bin``
    weights it holds the part of the target that did not fit)."""
    import gc
    import tempfile

    from sglang_eagle_cycle.wiring.probe import greedy_continue, load_target, target_forward
    from sglang_eagle_cycle.tiny.load import load_target as tiny_target

    d = cached("llama")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    hf = load_target(d / "target", max_memory="4MB")
    assert "disk" in {str(v) for v in hf.hf_device_map.values()}
    (offload,) = tmp_path.glob("eagle-cycle-probe-offload-*")   # empty here: safetensors are read in place
    prompts = torch.tensor(json.loads((d / "eval_prompts.json").read_text())["held_out_prompts"][:2])
    seqs = greedy_continue(hf, prompts, 4)
    states, _ = target_forward(hf, seqs)
    assert (states - torch.stack(tiny_target(d / "target").states(seqs))).abs().max().item() < 1e-4
    del hf
    gc.collect()
    assert not offload.exists()


def test_an_interrupted_offloaded_load_leaves_no_folder(tmp_path, monkeypatch):
    """SIGTERM (SystemExit 143 in the CLI) or Ctrl-C while the target loads: the offload folder goes,
    the interruption passes through; a loader error is unusable input, and leaves no folder either."""
    import tempfile

    from transformers import AutoModelForCausalLM

    from sglang_eagle_cycle.errors import UsageError
    from sglang_eagle_cycle.wiring.probe import load_target

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for raised, expected in ((SystemExit(143), SystemExit), (KeyboardInterrupt(), KeyboardInterrupt),
                             (OSError("disk full"), UsageError)):
        def stopped(*a, **k):
            raise raised
        monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", stopped)
        with pytest.raises(expected):
            load_target(tmp_path, max_memory="4MB")
        assert not list(tmp_path.glob("eagle-cycle-probe-offload-*")), raised


# ----------------------------------------------------------------------------- unusable input
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
def test_cuda_unavailable(capsys):
    d = cached("llama")
    code, out, err = run([str(d / "target"), str(d / "draft"), "--device", "cuda"], capsys)
    assert code == 2 and err == "eagle-cycle probe: error: --device cuda: no CUDA device available\n"


def test_bad_convention_env(monkeypatch, capsys):
    monkeypatch.setenv("SGLANG_EAGLE_CYCLE_AUX_CONVENTION", "sideways")
    d = cached("llama")
    code, out, err = run([str(d / "target"), str(d / "draft")], capsys)
    assert code == 2 and err.count("\n") == 1 and "SGLANG_EAGLE_CYCLE_AUX_CONVENTION" in err


def _write_bytes(p: Path, data: bytes):
    p.unlink()
    p.write_bytes(data)


def _add_tensor(name, shape):
    def edit(d: Path):
        from safetensors.torch import load_file, save_file
        w = load_file(str(d / "model.safetensors"))
        w[name] = torch.ones(shape)
        save_file(w, str(d / "model.safetensors"))
    return edit


def _drop_tensor(name):
    def edit(d: Path):
        from safetensors.torch import load_file, save_file
        w = load_file(str(d / "model.safetensors"))
        del w[name]
        save_file(w, str(d / "model.safetensors"))
    return edit


UNUSABLE = {
    "missing_target": (lambda d: shutil.rmtree(d / "target"), "no such target folder"),
    "missing_draft_weights": (lambda d: (d / "draft" / "model.safetensors").unlink(), "no *.safetensors"),
    "unreadable_safetensors": (lambda d: _write_bytes(d / "draft" / "model.safetensors", b"\x00garbage"),
                               "safetensors"),
    "unreadable_pytorch_bin": (lambda d: ((d / "draft" / "model.safetensors").unlink(),
                                          (d / "draft" / "pytorch_model.bin").write_bytes(b"\x00garbage")),
                               "unreadable PyTorch checkpoint"),
    "draft_without_fc": (lambda d: _drop_tensor("fc.weight")(d / "draft"), "fc.weight"),
    "target_hidden_mismatch": (lambda d: _edit_cfg(d, target_hidden_size=128), "cannot be fed"),
    "norm_before_fc_weight_shape": (lambda d: (_edit_cfg(d, norm_before_fc=True),
                                               _add_tensor("input_norm.weight", (5,))(d / "draft")),
                                    "input_norm.weight has shape [5]"),
    "fc_norm_weight_shape": (lambda d: (_edit_cfg(d, fc_norm=True), _add_tensor("fc_norm.1.weight", (7,))(d / "draft")),
                             "fc_norm.1.weight has shape [7]"),
    "two_decoder_layers": (lambda d: _add_tensor("layers.1.mlp.down_proj.weight", (4, 4))(d / "draft"),
                           "not a plain EAGLE-3 head"),
    "not_eagle3": (lambda d: _edit_cfg(d, architectures=["LlamaForCausalLM"]), "not an EAGLE-3 head"),
    # a one-layer checkpoint under a config SGLang would build two layers from (helper 83: probed anyway)
    "config_two_decoder_layers": (lambda d: _edit_cfg(d, num_hidden_layers=2), "num_hidden_layers 2"),
    "config_layers_text": (lambda d: _edit_cfg(d, num_hidden_layers="1"), 'num_hidden_layers is "1": expected a positive integer'),
    "bad_eval_prompts": (lambda d: (d / "eval_prompts.json").write_text("{"), "prompt file"),
    # token ids the target cannot embed: an IndexError traceback mid-run before helper 56
    "eval_prompt_id_past_vocab": (lambda d: (d / "eval_prompts.json").write_text(
        '{"probe_prompts": [[1, 2, 5000]], "gen_tokens": 2}'), "token id 5000 outside"),
    "eval_prompt_id_negative": (lambda d: (d / "eval_prompts.json").write_text(
        '{"probe_prompts": [[1, -2, 3]], "gen_tokens": 2}'), "token id -2 outside"),
    # values json reads but the head cannot be built from: a traceback (exit 1) before helper 56;
    # a NaN rms_norm_eps ran the probe on NaN logits (0% agreement everywhere)
    "target_hidden_size_text": (lambda d: _edit_cfg(d, target_hidden_size="256x"), "target_hidden_size"),
    "target_hidden_size_list": (lambda d: _edit_cfg(d, target_hidden_size=[256]), "target_hidden_size"),
    "rope_theta_text": (lambda d: _edit_cfg(d, rope_theta="abc"), "rope_theta"),
    "rope_theta_null": (lambda d: _edit_cfg(d, rope_theta=None), "rope_theta"),
    "max_positions_nan": (lambda d: _edit_cfg(d, max_position_embeddings=float("nan")), "max_position_embeddings"),
    "hidden_size_inf": (lambda d: _edit_cfg(d, hidden_size=float("inf")), "hidden_size"),
    "rms_norm_eps_nan": (lambda d: _edit_cfg(d, rms_norm_eps=float("nan")), "rms_norm_eps"),
}


def _edit_cfg(d: Path, **kv):
    p = d / "draft" / "config.json"
    cfg = json.loads(p.read_text())
    cfg.update(kv)
    p.write_text(json.dumps(cfg))


@pytest.mark.parametrize("case", sorted(UNUSABLE))
def test_unusable_input_one_line_exit_2(case, tmp_path, capsys):
    d = copy_pair(cached("llama"), tmp_path / "p")
    edit, words = UNUSABLE[case]
    edit(d)
    code, out, err = run([str(d / "target"), str(d / "draft")], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("eagle-cycle probe: error: ") and words in err, err


def test_prompts_file_problems(tmp_path, capsys):
    d = cached("llama")
    missing = tmp_path / "none.jsonl"
    code, _, err = run([str(d / "target"), str(d / "draft"), "--prompts", str(missing)], capsys)
    assert code == 2 and "no such prompts file" in err and err.count("\n") == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "x"}\n')
    code, _, err = run([str(d / "target"), str(d / "draft"), "--prompts", str(bad)], capsys)
    assert code == 2 and '"prompt"' in err and err.count("\n") == 1


def test_header_only_draft_is_named_as_such(tmp_path, capsys):
    """The bundled example drafts carry a safetensors header without data: say so, exit 2."""
    from sglang_eagle_cycle.safetensors_header import write_header_only

    d = copy_pair(cached("llama"), tmp_path / "p")
    write_header_only(d / "draft" / "model.safetensors", {"fc.weight": [256, 768], "lm_head.weight": [512, 256]})
    code, out, err = run([str(d / "target"), str(d / "draft")], capsys)
    assert code == 2 and err.count("\n") == 1 and "header without tensor data" in err, err


@pytest.mark.parametrize("gain, p, plugin_p, verdict", [
    (0.015, 1e-9, 1.0, "not_trained_on_target"),   # significant, but under the 2-point bar
    (0.25, 0.2, 1.0, "not_trained_on_target"),     # large, but not significant
    (0.02, 0.04, 1.0, "plugin_best"),
    (0.25, 1e-9, 0.06, "plugin_best"),             # the plugin's set not significantly worse
    (0.25, 1e-9, 0.04, "other_best"),
])
def test_verdict_rule(gain, p, plugin_p, verdict):
    from sglang_eagle_cycle.wiring.probe import decide

    best = {"positions": [2, 4, 6], "margin_vs_ablated": gain, "p_vs_ablated": p, "p_vs_best": 1.0}
    plugin = {"positions": [3, 5, 7], "margin_vs_ablated": gain - 0.01, "p_vs_ablated": p, "p_vs_best": plugin_p}
    assert decide([best, plugin], best, plugin) == verdict
    trained = verdict != "not_trained_on_target"
    # the plugin's own set best: plugin_best whenever the draft counts as trained
    assert decide([best, plugin], best, best) == ("plugin_best" if trained else verdict)
    # the plugin captures none of the candidate sets: another set is the answer
    assert decide([best, plugin], best, None) == ("other_best" if trained else verdict)


def test_other_pairs_draft_not_trained_on_target(tmp_path, capsys):
    """The llama target with the DeepSeek-V3 pair's draft (same widths, so it can be fed)."""
    from sglang_eagle_cycle.wiring.probe import MIN_AUX_GAIN

    d = copy_pair(cached("llama"), tmp_path / "p", prompts=FEW_PROMPTS)
    code, out, err = run([str(d / "target"), str(cached("deepseek_v3") / "draft"), "--json"], capsys)
    r = json.loads(out)
    assert (code, r["verdict"]) == (1, "not_trained_on_target"), err
    assert r["fix"] is None
    # whatever small gain over the zeroed aux states a foreign draft shows stays under the bar
    assert max(c["agreement"] for c in r["candidates"]) - r["aux_ablated_agreement"] < MIN_AUX_GAIN


def test_other_pairs_draft_width_mismatch(tmp_path, capsys):
    """The llama target with the DeepSeek-V3 pair's draft, its fc made for another width: exit 2."""
    from safetensors.torch import load_file, save_file

    ds = cached("deepseek_v3")
    draft = tmp_path / "draft"
    shutil.copytree(ds / "draft", draft)
    w = load_file(str(draft / "model.safetensors"))
    w["fc.weight"] = w["fc.weight"][:, :700].contiguous()
    save_file(w, str(draft / "model.safetensors"))
    code, out, err = run([str(cached("llama") / "target"), str(draft)], capsys)
    assert code == 2 and err.count("\n") == 1 and "cannot be fed" in err, err


# ----------------------------------------------------------------------------- eagle-cycle wiring --probe
def wiring_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    from sglang_eagle_cycle import cli

    code = cli.main(["wiring", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_wiring_probe_runs_the_probe_after_the_static_report(tmp_path, capsys):
    d = copy_pair(cached("llama"), tmp_path / "p", prompts=FEW_PROMPTS)
    code, out, err = wiring_cli([str(d / "target"), str(d / "draft"), "--probe"], capsys)
    assert code == 0, err
    assert "captures" in out and "8192 scored tokens" in out and "verdict: plugin_best" in out
    assert out.index("8192 scored tokens") > out.index("captures")  # the static report comes first
    assert "fix: none needed" in out


def test_wiring_probe_json_other_best_exits_1(tmp_path, capsys):
    bad = copy_pair(cached("llama"), tmp_path / "bad", set_ids([2, 4, 6]), prompts=FEW_PROMPTS)
    code, out, err = wiring_cli([str(bad / "target"), str(bad / "draft"), "--probe", "--json"], capsys)
    doc = json.loads(out)
    assert code == 1, err
    assert doc["positions"] == [3, 5, 7]                      # the static object, unchanged
    assert doc["probe"]["verdict"] == "other_best"
    assert doc["probe"]["best"]["positions"] == [2, 4, 6]
    assert doc["probe"]["fix"]["eagle_aux_hidden_state_layer_ids"] == [1, 3, 5]


def test_wiring_probe_static_error_exits_1_even_when_the_probe_agrees(tmp_path, capsys):
    d = copy_pair(cached("llama"), tmp_path / "p", prompts=FEW_PROMPTS)
    code, out, err = wiring_cli([str(d / "target"), str(d / "draft"), "--probe", "--algorithm", "EAGLE"], capsys)
    assert code == 1, err
    assert "algorithm_not_eagle3" in out and "verdict: plugin_best" in out
    assert "fix: none needed" not in out and "fix: the positions need no change" in out


def test_wiring_probe_unusable_draft_one_line_exit_2(tmp_path, capsys):
    d = copy_pair(cached("llama"), tmp_path / "p")
    (d / "draft" / "model.safetensors").unlink()
    code, out, err = wiring_cli([str(d / "target"), str(d / "draft"), "--probe"], capsys)
    assert code == 2 and err.count("\n") == 1 and "no *.safetensors" in err, err


def test_wiring_without_probe_loads_no_weights(tmp_path, capsys):
    """Without --probe the check stays static: a draft folder without weights is still checked."""
    d = copy_pair(cached("llama"), tmp_path / "p")
    (d / "draft" / "model.safetensors").unlink()
    code, out, err = wiring_cli([str(d / "target"), str(d / "draft"), "--json"], capsys)
    assert code == 0 and "probe" not in json.loads(out), err


def test_an_undecided_not_trained_verdict_asks_for_more_tokens():
    # helper 40: 64 scored tokens of a correctly trained pair gave "the draft was not trained on this
    # target's states": a large margin that is not significant decides nothing
    from sglang_eagle_cycle.wiring.probe import fix_text

    def result(margin, p):
        rows = [{"names": ["plugin"], "positions": [3, 5, 7], "margin_vs_ablated": margin, "p_vs_ablated": p}]
        return {"verdict": "not_trained_on_target", "fix": None, "candidates": rows, "best": rows[0],
                "scored_tokens": 64}

    small = fix_text(result(0.09, 0.18))
    assert small.startswith("fix: undecided:") and "9.0 points" in small and "64 scored tokens" in small
    assert "--prompts" in small and "--tokens" in small and "not trained on this target's states" not in small
    for margin, p in ((0.015, 1e-9), (0.001, 0.9)):   # under the bar: significant or not, no margin to settle
        assert fix_text(result(margin, p)).startswith("fix: none: no candidate beats")


def test_bundled_prompts_are_found_for_a_pair_without_eval_prompts(tmp_path):
    """A real pair has no eval_prompts.json beside its target: the probe falls back on the bundled
    prompts, which the move of probe.py into wiring/ left pointing at a missing wiring/data/ (every
    probe without --prompts then stopped with "no such prompts file"; helper 56)."""
    from sglang_eagle_cycle.wiring.probe import BUNDLED_PROMPTS, load_prompts

    d = copy_pair(cached("llama"), tmp_path / "p")
    (d / "eval_prompts.json").unlink()
    prompts = load_prompts(d / "target", None, None)
    assert Path(prompts.source) == BUNDLED_PROMPTS and BUNDLED_PROMPTS.is_file()
    assert len(prompts.ids) == 80 and all(prompts.ids) and prompts.tokens == 32


def _hf_snapshot(hub: Path, repo: str, src: Path) -> None:
    """``src``'s files as a Hugging Face cache snapshot of ``repo``: blobs, symlinks, refs/main."""
    root = hub / ("models--" + repo.replace("/", "--"))
    (root / "blobs").mkdir(parents=True)
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text("c0ffee")
    snap = root / "snapshots" / "c0ffee"
    snap.mkdir(parents=True)
    for i, f in enumerate(sorted(src.iterdir())):
        shutil.copy(f, root / "blobs" / f"blob{i}")
        (snap / f.name).symlink_to(Path("..") / ".." / "blobs" / f"blob{i}")


def test_cached_repo_ids_and_config_paths_as_wiring_takes_them(tmp_path, monkeypatch, capsys):
    """stock_differs tells a user of `eagle-cycle wiring org/target ./draft` to run `eagle-cycle probe
    TARGET DRAFT`: the probe takes the same arguments (before helper 56: 'no such target folder')."""
    src = cached("llama")
    hub = tmp_path / "hub"
    _hf_snapshot(hub, "org/tiny-target", src / "target")
    _hf_snapshot(hub, "org/tiny-draft", src / "draft")
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "def wrap(text, width):"}\n')
    opts = ["--prompts", str(prompts), "--tokens", "2", "--json"]
    code, out, err = run(["org/tiny-target", "org/tiny-draft", *opts], capsys)
    assert code in (0, 1) and err == "", err
    result = json.loads(out)
    assert result["target"].endswith("snapshots/c0ffee") and result["plugin_positions"] == [2, 4, 6]
    code, out, err = run([str(src / "target" / "config.json"), str(src / "draft" / "config.json"), *opts], capsys)
    assert code in (0, 1) and json.loads(out)["target"] == str(src / "target")
    code, out, err = run(["org/not-cached", "org/tiny-draft", *opts], capsys)
    assert code == 2 and err.count("\n") == 1 and "org/not-cached" in err and "cache" in err
    code, out, err = run(["", "org/tiny-draft", *opts], capsys)
    assert code == 2 and err.count("\n") == 1 and "empty path" in err


def test_target_and_draft_the_other_way_round(capsys):
    """As eagle-cycle wiring says it; before helper 56 the probe blamed the target for not being a
    head ('not an EAGLE-3 head'), or, given the draft twice, found 'no candidate position set'."""
    d = cached("llama")
    code, out, err = run([str(d / "draft"), str(d / "target")], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and "swap the two" in err
    code, out, err = run([str(d / "draft"), str(d / "draft")], capsys)
    assert code == 2 and err.count("\n") == 1 and "is an EAGLE-3 draft head" in err


def test_a_draft_saved_as_pytorch_model_bin_probes_as_its_safetensors(tmp_path, capsys):
    # many published EAGLE-3 drafts ship only pytorch_model.bin, which SGLang's default loader reads
    from safetensors.torch import load_file

    # (4 generated tokens a prompt: the same agreements either way is the point, not a verdict)
    d = copy_pair(cached("llama"), tmp_path / "s", prompts=FEW_PROMPTS)
    code, out, err = run([str(d / "target"), str(d / "draft"), "--json", "--tokens", "4"], capsys)
    assert code in (0, 1), err
    want = json.loads(out)
    assert want["scored_tokens"] > 0
    p = copy_pair(d, tmp_path / "p")
    torch.save(load_file(str(p / "draft" / "model.safetensors")), p / "draft" / "pytorch_model.bin")
    (p / "draft" / "model.safetensors").unlink()
    code_bin, out, err = run([str(p / "target"), str(p / "draft"), "--json", "--tokens", "4"], capsys)
    assert code_bin == code, err
    got = json.loads(out)
    assert got["verdict"] == want["verdict"] and got["scored_tokens"] == want["scored_tokens"]
    assert [(c["positions"], c["agreement"]) for c in got["candidates"]] == \
        [(c["positions"], c["agreement"]) for c in want["candidates"]]


@pytest.mark.parametrize("text, value", [("20GiB", "20GiB"), ("20gib", "20GiB"), ("500MB", "500MB"),
                                         ("1.5GB", "1.5GB"), ("1073741824", 1073741824)])
def test_max_memory_takes_the_sizes_accelerate_reads(text, value):
    from accelerate.utils.modeling import convert_file_size_to_int

    from sglang_eagle_cycle.argtypes import memory_size

    assert memory_size(text) == value and convert_file_size_to_int(value) > 0


@pytest.mark.parametrize("bad", ["abc", "1TB", "0GB", "-1GB", "1.5"])
def test_a_bad_max_memory_is_refused_before_any_model_is_read(tmp_path, capsys, bad):
    # helper 81: --max-memory abc had reported the draft's missing weights first, then failed in accelerate
    from sglang_eagle_cycle import cli

    missing = tmp_path / "nowhere"
    with pytest.raises(SystemExit) as exc:
        cli.main(["probe", str(missing), str(missing), f"--max-memory={bad}"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "argument --max-memory: expected a memory size" in err and "nowhere" not in err


@pytest.mark.parametrize("env, says", [
    ({"SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS": "0,2,4"},
     "fix: unset SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS (the draft's config.json already declares the ids) or "
     "SGLANG_EAGLE_CYCLE_AUX_CONVENTION=stock with SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS unset"),
    ({"SGLANG_EAGLE_CYCLE_AUX_CONVENTION": "input"},
     "fix: unset SGLANG_EAGLE_CYCLE_AUX_CONVENTION (the draft's config.json already declares the ids) or "
     "SGLANG_EAGLE_CYCLE_AUX_CONVENTION=stock:"),
])
def test_fix_names_the_overrides_it_was_computed_without(env, says):
    """helper 89: with SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS=0,2,4 set (the plugin captures [1, 3, 5]) the
    probe's fix said 'set ... [1, 3, 5] in the draft's config.json', which the config already held and
    the set override wins over: following it changed nothing. The fix is computed without the overrides;
    it now says to unset those that are set."""
    from sglang_eagle_cycle.wiring.probe import _fix, fix_text

    d = cached("llama")
    target_cfg, draft_cfg = (json.loads((d / sub / "config.json").read_text()) for sub in ("target", "draft"))
    fix = _fix([2, 4, 6], None, target_cfg, draft_cfg, None, env)
    assert fix["unset_only"] and fix["unset"] == list(env)
    text = fix_text({"verdict": "other_best", "fix": fix, "best": {"positions": [2, 4, 6]}})
    assert text.startswith(says) and text.endswith("the plugin then captures [2, 4, 6]"), text
    # a fix that also needs the config changed names the overrides to unset beside it
    fix = _fix([3, 5, 7], None, target_cfg, draft_cfg, None, env)
    assert not fix["unset_only"] and fix["eagle_aux_hidden_state_layer_ids"] == [2, 4, 6]
    assert f"[2, 4, 6]}} in the draft's config.json and unset {next(iter(env))}" in fix_text(
        {"verdict": "other_best", "fix": fix, "best": {"positions": [3, 5, 7]}})
    # without overrides, the fix is as before
    fix = _fix([2, 4, 6], None, target_cfg, draft_cfg, None, {})
    assert fix["unset"] == [] and not fix["unset_only"]
    assert fix_text({"verdict": "other_best", "fix": fix, "best": {"positions": [2, 4, 6]}}) == (
        'fix: set "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 5]} in the draft\'s config.json '
        "or SGLANG_EAGLE_CYCLE_AUX_CONVENTION=stock: the plugin then captures [2, 4, 6]")


def test_empty_prompts_path_is_refused_not_read_as_the_default(tmp_path, capsys):
    """helper 89: `--prompts ""` (a `--prompts "$FILE"` with FILE unset) silently probed the pair's own
    prompts instead: the file the user named was never read and nothing said so."""
    d = copy_pair(cached("llama"), tmp_path / "p", prompts=8)
    for empty in ("", " "):
        code, out, err = run([str(d / "target"), str(d / "draft"), "--prompts", empty, "--tokens", "4"], capsys)
        assert (code, out) == (2, ""), out
        assert err == "eagle-cycle probe: error: --prompts: empty path: give a JSONL prompts file, or leave the " \
                      "option out for the default prompts\n", err


@pytest.mark.parametrize("edit, says", [
    ({"gen_tokens": -3}, "(gen_tokens -3 is not >= 1)"),
    ({"gen_tokens": True}, "(gen_tokens True is not an integer)"),
    ({"gen_tokens": 2.5}, "(gen_tokens 2.5 is not an integer)"),
    ({"probe_prompts": [[1, 2.5, 3]]}, "(a token id 2.5 is not an integer)"),
    ({"probe_prompts": [[1, True, 3]]}, "(a token id True is not an integer)"),
])
def test_a_damaged_eval_prompts_file_is_refused_by_name(tmp_path, edit, says):
    """helper 89: a pair's eval_prompts.json with gen_tokens -3 stopped with "--tokens -3: expected at
    least 1" (no --tokens was given), and gen_tokens true (read as 1 token), 2.5 or a token id 2.5
    (read as 2) were probed as if the file were sound."""
    from sglang_eagle_cycle.wiring.probe import load_prompts

    d = copy_pair(cached("llama"), tmp_path / "p", prompts=8)
    data = json.loads((d / "eval_prompts.json").read_text())
    (d / "eval_prompts.json").write_text(json.dumps({**data, **edit}))
    with pytest.raises(UsageError) as exc:
        load_prompts(d / "target", None, None)
    assert str(exc.value) == f"{d / 'eval_prompts.json'}: not a tiny pair's prompt file {says}"
    if "gen_tokens" in edit:   # --tokens replaces the file's count, so its count is not read
        assert load_prompts(d / "target", None, 4).tokens == 4


# ----------------------------------------------------------------------------- the target's layer count
def _own_target_config(d: Path, **kv) -> Path:
    """A pair copy's target config.json (a link into the cache) replaced by an edited file of its own."""
    p = d / "target" / "config.json"
    cfg = json.loads(p.read_text())
    p.unlink()
    p.write_text(json.dumps({**cfg, **kv}))
    return p


def _layer_refusal(cfg: Path, ckpt: Path, layers: int) -> str:
    """The one line a tiny Llama target (8 layers in ``ckpt``) gets under a config declaring ``layers``."""
    if layers < 8:
        cut = f"layer {layers}" if layers == 7 else f"layers {layers}-7"
        return (f"{cfg}: num_hidden_layers is {layers}, but the checkpoint {ckpt} holds decoder layers up to "
                f"model.layers.7: transformers would build {layers} layers, drop {cut}, and the probe would score "
                f"that cut-down model; set num_hidden_layers to 8 to probe the whole checkpoint, or save a "
                f"checkpoint without {cut} to probe the cut-down one")
    more = f" nor {layers - 9} more" if layers > 9 else ""
    added = "layer 8" if layers == 9 else f"layers 8-{layers - 1}"
    return (f"{cfg}: num_hidden_layers is {layers}, but the checkpoint {ckpt} holds no model.layers.8{more} (its "
            f"decoder layers: 0-7): transformers would give {added} random weights and the probe would score "
            "them; set num_hidden_layers to 8 if those are all its layers, or complete the checkpoint")


@pytest.mark.parametrize("layers", [7, 5, 9, 10])
def test_a_target_config_declaring_other_layers_than_its_checkpoint_is_refused(layers, tmp_path, capsys):
    """helper 93: transformers builds num_hidden_layers decoder layers whatever the checkpoint holds.
    With 7 for the tiny Llama target's 8 it dropped layer 7 (a table of UNEXPECTED keys on stderr) and
    the probe scored that cut-down model; with 9 it gave layer 8 random weights (MISSING) and the probe
    scored them (on 16 of the pair's prompts, 8 tokens each: plugin_best, exit 0). Now one line before
    the target loads, exit 2, files untouched."""
    d = copy_pair(cached("llama"), tmp_path / "p", prompts=8)
    cfg = _own_target_config(d, num_hidden_layers=layers)
    files = {f: f.read_bytes() for f in (d / "target").iterdir()}
    want = _layer_refusal(cfg, d / "target" / "model.safetensors", layers)
    argv = [str(d / "target"), str(d / "draft"), "--tokens", "2"]
    code, out, err = run(argv, capsys)
    assert (code, out) == (2, ""), err
    assert err == f"eagle-cycle probe: error: {want}\n"
    code, out, err = wiring_cli([*argv, "--probe"], capsys)   # the static report, then the probe's refusal
    assert code == 2 and f"layers {layers} (num_hidden_layers)" in out
    assert err == f"eagle-cycle wiring: error: {want}\n"
    assert {f: f.read_bytes() for f in (d / "target").iterdir()} == files


def test_a_sharded_target_is_read_from_its_index_and_shards(tmp_path, capsys):
    """The same for a target saved in shards with model.safetensors.index.json (a real target's
    layout): the names come from the index and the shards' headers."""
    from safetensors.torch import load_file, save_file

    d = copy_pair(cached("llama"), tmp_path / "p", prompts=8)
    cfg = _own_target_config(d, num_hidden_layers=7)
    tensors = load_file(str(d / "target" / "model.safetensors"))
    (d / "target" / "model.safetensors").unlink()
    shards = {"model-00001-of-00002.safetensors": {}, "model-00002-of-00002.safetensors": {}}
    for name, t in tensors.items():   # layers 0-3 in the first shard, the rest in the second
        first = name.startswith("model.embed") or any(name.startswith(f"model.layers.{i}.") for i in range(4))
        shards[sorted(shards)[0 if first else 1]][name] = t
    weight_map = {}
    for shard, part in shards.items():
        save_file(part, str(d / "target" / shard))
        weight_map.update(dict.fromkeys(part, shard))
    index = d / "target" / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    code, out, err = run([str(d / "target"), str(d / "draft"), "--tokens", "2"], capsys)
    assert (code, out) == (2, ""), err
    assert err == f"eagle-cycle probe: error: {_layer_refusal(cfg, index, 7)}\n"


def test_layer_names_of_wrapped_targets_mtp_layers_and_gaps():
    """The rule on names alone: a multimodal wrapper's language-model layers count and its vision
    tower's do not; DeepSeek-V3's MTP layer 61 is allowed by its own tensors, an ordinary layer there is
    not; a gap is named."""
    from sglang_eagle_cycle.wiring.target_layers import layer_indices, layer_mismatch

    names = [f"language_model.model.layers.{i}.mlp.weight" for i in range(4)] + \
        [f"vision_tower.encoder.layers.{i}.mlp.weight" for i in range(30)] + ["language_model.lm_head.weight"]
    assert layer_indices(names) == dict.fromkeys(range(4), "language_model.model.layers.")
    assert layer_mismatch(layer_indices(names), 4, "text_config.num_hidden_layers") is None
    assert layer_indices([f"model.language_model.layers.{i}.w" for i in range(2)]) == \
        dict.fromkeys(range(2), "model.language_model.layers.")
    assert layer_indices(["transformer.h.0.attn.weight", "model.layers.x.w", "model.layers.3"]) == {}

    from sglang_eagle_cycle.wiring.target_layers import mtp_layers

    # DeepSeek-V3: 61 decoder layers, then its MTP layer 61 (eh_proj, enorm, hnorm, shared_head)
    names = [f"model.layers.{i}.mlp.weight" for i in range(62)] + \
        [f"model.layers.61.{part}.weight" for part in ("eh_proj", "enorm", "hnorm", "shared_head.head")]
    deepseek, mtp = layer_indices(names), mtp_layers(names)
    assert mtp == {61}
    assert layer_mismatch(deepseek, 61, "num_hidden_layers", mtp) is None
    # a checkpoint without its MTP layer (many re-uploads leave it out) is the 61 decoder layers
    assert layer_mismatch(layer_indices(f"model.layers.{i}.w" for i in range(61)), 61, "num_hidden_layers") is None
    # helper 95: a count alone (num_nextn_predict_layers 1) had let an ordinary layer 61 past a config
    # of 61 be dropped without a word; without MTP tensors it is a decoder layer
    assert layer_mismatch(layer_indices(names[:62]), 61, "num_hidden_layers", mtp_layers(names[:62])) == (
        "num_hidden_layers is 61, but the checkpoint holds decoder layers up to model.layers.61: transformers "
        "would build 61 layers, drop layer 61, and the probe would score that cut-down model; set "
        "num_hidden_layers to 62 to probe the whole checkpoint, or save a checkpoint without layer 61 to probe "
        "the cut-down one")
    # every dropped layer is named (8 and 9, not 8 alone), the MTP layer past them too
    more = layer_indices(f"model.layers.{i}.w" for i in range(10))
    assert layer_mismatch(more, 8, "num_hidden_layers", {10}) == (
        "num_hidden_layers is 8, but the checkpoint holds decoder layers up to model.layers.9: transformers "
        "would build 8 layers, drop layers 8-9, and the probe would score that cut-down model; set "
        "num_hidden_layers to 10 to probe the whole checkpoint, or save a checkpoint without layers 8-9 to probe "
        "the cut-down one")
    # layer 7 absent below an MTP layer 8: the count 8 is right, the checkpoint is not (the advice had
    # been to set 7, which then named a layer 7 that is not there and sent the user back to 8)
    holed = {**layer_indices(f"model.layers.{i}.w" for i in range(7)), 8: "model.layers."}
    assert layer_mismatch(holed, 8, "num_hidden_layers", {8}) == (
        "num_hidden_layers is 8, but the checkpoint holds no model.layers.7 (its decoder layers: 0-6; "
        "multi-token-prediction layer 8): transformers would give layer 7 random weights and the probe would "
        "score them; complete the checkpoint (its layer 8 at 8 and past says num_hidden_layers 8 is right)")

    gap = layer_indices(f"model.layers.{i}.w" for i in (0, 1, 2, 3, 4, 6, 7))
    assert layer_mismatch(gap, 8, "num_hidden_layers") == (
        "num_hidden_layers is 8, but the checkpoint holds no model.layers.5 (its decoder layers: 0-4, 6-7): "
        "transformers would give layer 5 random weights and the probe would score them; complete the "
        "checkpoint (an interrupted download or save?)")


def test_a_wrapped_target_config_and_a_pytorch_target_name_their_fields_and_files(tmp_path):
    """A text_config wrapper's count is named by its JSON path; a target saved as pytorch_model.bin is
    read (names only, on the meta device); a folder without a checkpoint file is left to transformers."""
    from sglang_eagle_cycle.safetensors_header import write_header_only
    from sglang_eagle_cycle.wiring.target_layers import check_target_layers

    wrapped = tmp_path / "wrapped"
    wrapped.mkdir()
    cfg = {"architectures": ["LlavaForConditionalGeneration"], "text_config": {"num_hidden_layers": 2},
           "vision_config": {"num_hidden_layers": 24}}
    write_header_only(wrapped / "model.safetensors",
                      {**{f"language_model.model.layers.{i}.w": [2] for i in range(3)},
                       **{f"vision_tower.vision_model.encoder.layers.{i}.w": [2] for i in range(24)}})
    with pytest.raises(UsageError) as exc:
        check_target_layers(wrapped, cfg, wrapped / "config.json")
    assert str(exc.value).startswith(
        f"{wrapped / 'config.json'}: text_config.num_hidden_layers is 2, but the checkpoint "
        f"{wrapped / 'model.safetensors'} holds decoder layers up to language_model.model.layers.2: ")
    check_target_layers(wrapped, {**cfg, "text_config": {"num_hidden_layers": 3}}, wrapped / "config.json")

    pt = tmp_path / "pt"
    pt.mkdir()
    torch.save({f"model.layers.{i}.w": torch.ones(2) for i in range(2)}, pt / "pytorch_model.bin")
    with pytest.raises(UsageError, match=r"num_hidden_layers is 3, but the checkpoint .*pytorch_model\.bin holds "
                                         r"no model\.layers\.2 \(its decoder layers: 0-1\)"):
        check_target_layers(pt, {"num_hidden_layers": 3}, pt / "config.json")
    check_target_layers(tmp_path, {"num_hidden_layers": 1}, tmp_path / "config.json")   # no checkpoint file here

    # helper 95: a pre-1.6 (legacy pickle) pytorch_model.bin had been left unread, so a config one
    # layer short scored the cut-down model; it is loaded on the CPU for its names
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    torch.save({f"model.layers.{i}.w": torch.ones(2) for i in range(3)}, legacy / "pytorch_model.bin",
               _use_new_zipfile_serialization=False)
    with pytest.raises(UsageError, match=r"num_hidden_layers is 2, but the checkpoint .*pytorch_model\.bin holds "
                                         r"decoder layers up to model\.layers\.2: "):
        check_target_layers(legacy, {"num_hidden_layers": 2}, legacy / "config.json")
    check_target_layers(legacy, {"num_hidden_layers": 3}, legacy / "config.json")
    # an index whose weight_map names no file is a damaged index, not a checkpoint without layers
    index = tmp_path / "ix"
    index.mkdir()
    (index / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"model.layers.0.x": 5}}))
    with pytest.raises(UsageError, match=r'model\.safetensors\.index\.json: weight_map\["model\.layers\.0\.x"\] is 5, '
                                         r"not a shard file name"):
        check_target_layers(index, {"num_hidden_layers": 7}, index / "config.json")
