"""make-tiny-pair: trained pairs that are real models, deterministic files, honest baselines.

The two suite pairs (Llama and DeepSeek-V3, seed 11) are trained once and cached
(test/tiny_pairs.py); the determinism check trains two reduced-step pairs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tiny_pairs import pair

torch = pytest.importorskip("torch")

ARCHES = ("llama", "deepseek_v3")


@pytest.fixture(scope="module", params=ARCHES)
def made(request):
    d, summary = pair(request.param)
    return request.param, d, summary


def test_wiring_check_of_the_ids246_pair_warns_that_stock_differs():
    """The DeepSeek-V3 draft config declaring [2, 4, 6]: no error, one stock_differs warning."""
    d, s = pair("deepseek_v3_ids246")
    assert s["positions"] == [3, 5, 7]
    proc = subprocess.run([sys.executable, "-m", "sglang_eagle_cycle.cli", "wiring", str(d / "target"),
                           str(d / "draft"), "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["positions"] == [3, 5, 7] and report["stock_positions"] == [2, 4, 6]
    assert [p["code"] for p in report["problems"]] == ["stock_differs"]


# ----------------------------------------------------------------------------- the acceptance figures
def test_draft_uses_the_captured_states(made):
    arch, _, s = made
    agree, ablated = s["draft_top1_agreement"], s["aux_ablated_top1"]
    assert agree >= ablated + 0.10, (arch, agree, ablated)
    assert agree > s["majority_top1"] + 0.10
    for shift, value in s["agreement_by_wiring"].items():
        assert value is not None and agree > value, (arch, shift, agree, value)
    assert s["scored_positions"] == 32 * 32


def test_greedy_continuations_are_not_degenerate(made):
    arch, _, s = made
    assert len(s["greedy_distinct_tokens"]) == 8
    assert min(s["greedy_distinct_tokens"]) >= 8, (arch, s["greedy_distinct_tokens"])
    assert s["nondegenerate"] is True


def test_summary_names_the_wiring(made):
    arch, d, s = made
    assert s["arch"] == arch and s["aux_layer_ids"] == [1, 3, 5] and s["convention"] == "output"
    assert s["positions"] == [2, 4, 6]
    cfg = json.loads((d / "draft" / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"]
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 3, 5]
    tcfg = json.loads((d / "target" / "config.json").read_text())
    assert cfg["max_position_embeddings"] == tcfg["max_position_embeddings"]
    assert cfg["target_hidden_size"] == tcfg["hidden_size"]
    assert cfg["vocab_size"] == tcfg["vocab_size"] > cfg["draft_vocab_size"]


def test_wiring_check_finds_no_problem(made):
    _, d, _ = made
    proc = subprocess.run([sys.executable, "-m", "sglang_eagle_cycle.cli", "wiring", str(d / "target"),
                           str(d / "draft"), "--json"], capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if not k.startswith("SGLANG_EAGLE_CYCLE")})
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["problems"] == [], report["problems"]
    assert report["positions"] == [2, 4, 6]
    assert report["fc_in_features"] == 3 * 256


def test_deepseek_expert_width_is_not_half_the_hidden_size():
    d, _ = pair("deepseek_v3")
    cfg = json.loads((d / "target" / "config.json").read_text())
    assert cfg["hidden_size"] != 2 * cfg["moe_intermediate_size"]
    assert cfg["n_routed_experts"] >= 4 and cfg["kv_lora_rank"] and cfg["q_lora_rank"]


# ----------------------------------------------------------------------------- our models are the HF models
@pytest.mark.parametrize("arch", ARCHES)
def test_lean_models_equal_transformers(arch):
    """The trainer's residual stream and logits equal transformers' on the written checkpoint."""
    import transformers

    from sglang_eagle_cycle.tiny.load import load_target

    d, _ = pair(arch)
    ours = load_target(d / "target")
    cls = {"llama": transformers.LlamaForCausalLM, "deepseek_v3": transformers.DeepseekV3ForCausalLM}[arch]
    hf = cls.from_pretrained(str(d / "target"), dtype=torch.float32).eval()
    ids = torch.tensor([[5, 17, 300, 2, 999, 64, 8, 8, 120, 77, 3, 510]])
    captured = []
    hooks = [layer.register_forward_pre_hook(lambda m, a: captured.append(a[0])) for layer in hf.model.layers]
    hooks.append(hf.model.layers[-1].register_forward_hook(lambda m, a, o: captured.append(o[0] if isinstance(o, tuple) else o)))
    with torch.no_grad():
        hf_logits = hf(input_ids=ids).logits
        states = ours.states(ids)
        our_logits = ours(ids)
    for h in hooks:
        h.remove()
    assert len(captured) == len(states) == 9
    for j, (a, b) in enumerate(zip(captured, states)):
        assert (a - b).abs().max().item() < 1e-4, j
    assert (hf_logits - our_logits).abs().max().item() < 1e-4


def test_tokenizer_loads_offline_in_transformers():
    import transformers

    d, _ = pair("llama")
    tok = transformers.AutoTokenizer.from_pretrained(str(d / "target"))
    ids = tok("def wrap(text, width=70):")["input_ids"]
    assert tok.decode(ids) == "def wrap(text, width=70):"
    assert max(ids) < 1024


# ----------------------------------------------------------------------------- determinism, cache, CLI
def _run_cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "sglang_eagle_cycle.cli", "make-tiny-pair", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_reduced_step_runs_are_byte_identical(tmp_path):
    """Two reduced-step trainings (the CLI, then the library's training steps in this process) write
    the same bytes. The second skips make_pair's evaluation, which writes no model file."""
    from sglang_eagle_cycle.tiny.pair import PairSpec, _write_draft, _write_target, train_draft_model, train_target_model

    a, b = tmp_path / "a", tmp_path / "b"
    proc = _run_cli(str(a), "--seed", "5", "--target-steps", "4", "--draft-steps", "4", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["target_steps"] == 4
    spec = PairSpec(arch="llama", seed=5, target_steps=4, draft_steps=4)
    model, tok, (data, _), _, _ = train_target_model(spec, log=lambda msg: None)
    head, _, _, _ = train_draft_model(spec, model, data, log=lambda msg: None)
    _write_target(b / "target", model, tok)
    _write_draft(b / "draft", head, spec)
    for rel in ("target/config.json", "target/model.safetensors", "draft/config.json",
                "draft/model.safetensors", "target/tokenizer.json"):
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    summary = json.loads((a / "pair.json").read_text())
    assert summary["seed"] == 5 and summary["draft_steps"] == 4


def test_existing_pair_is_kept_without_force(tmp_path):
    out = tmp_path / "p"
    (out / "target").mkdir(parents=True)
    (out / "target" / "mine.txt").write_text("keep me")
    proc = _run_cli(str(out), "--target-steps", "2", "--draft-steps", "2")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "--force" in proc.stderr and "Traceback" not in proc.stderr
    assert (out / "target" / "mine.txt").read_text() == "keep me"


@pytest.mark.parametrize("args, words", [
    (["--aux-layer-ids", "0,3,5", "--convention", "input"], "[1, 7]"),
    (["--aux-layer-ids", "2,7"], "[0, 6]"),
    (["--aux-layer-ids", "1,8", "--convention", "input"], "[1, 7]"),
    (["--aux-layer-ids", "4,2"], "ascending"),
    (["--aux-layer-ids", "2,,4"], "integers"),
    (["--aux-layer-ids", "-1,3,5"], "[0, 6]"),   # helper 89: was "expected one argument"
    (["--arch", "mistral"], "invalid choice"),
    (["--convention", "middle"], "invalid choice"),
    (["--seed", "-1"], "expected"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, words):
    proc = _run_cli(str(tmp_path / "x"), *args, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert words in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "x").exists()


def test_cache_key_follows_the_trainer_source(monkeypatch):
    from sglang_eagle_cycle.tiny import cache
    from sglang_eagle_cycle.tiny.pair import PairSpec

    spec = PairSpec(arch="llama", seed=11)
    before = cache.pair_dir_name(spec)
    monkeypatch.setattr(cache, "trainer_digest", lambda: "0" * 16)
    after = cache.pair_dir_name(spec)
    assert before != after and before.startswith("llama-seed11-ids1-3-5-output-")
    assert cache.pair_dir_name(PairSpec(arch="llama", seed=11, convention="input")) != after


def test_cached_pair_is_not_reused_by_another_trainer(tmp_path, monkeypatch):
    """A pair.json written by another trainer digest is retrained, not trusted; a current one is reused."""
    from sglang_eagle_cycle.tiny import cache
    from sglang_eagle_cycle.tiny.pair import PairSpec

    made = []

    def fake_make_pair(out, spec, log=None, target_from=None):
        made.append(spec)
        (out / "target").mkdir(parents=True)
        summary = {"trainer": cache.trainer_digest(), "target_key": "k", "seed": spec.seed}
        (out / "pair.json").write_text(json.dumps(summary))
        return summary

    monkeypatch.setattr(cache, "make_pair", fake_make_pair)
    spec = PairSpec(arch="llama", seed=3)
    d, first = cache.cached_pair(spec, root=tmp_path)
    assert len(made) == 1 and first["target"] == str(d / "target")
    assert cache.cached_pair(spec, root=tmp_path)[0] == d and len(made) == 1      # reused
    stamp = json.loads((d / "pair.json").read_text())
    stamp["trainer"] = "stale"
    (d / "pair.json").write_text(json.dumps(stamp))
    d2, again = cache.cached_pair(spec, root=tmp_path)
    assert d2 == d and len(made) == 2 and again["trainer"] == cache.trainer_digest()
    assert not list(tmp_path.glob(".making-*"))


def _train_once_in_child(root: str, marks: str) -> None:
    """Child of the lock test: a slow fake trainer that leaves one line per training in ``marks``."""
    import time

    from sglang_eagle_cycle.tiny import cache
    from sglang_eagle_cycle.tiny.pair import PairSpec

    def slow_make_pair(out, spec, log=None, target_from=None):
        with open(marks, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        time.sleep(0.5)
        (out / "target").mkdir(parents=True)
        summary = {"trainer": cache.trainer_digest(), "target_key": "k", "seed": spec.seed}
        (out / "pair.json").write_text(json.dumps(summary))
        return summary

    cache.make_pair = slow_make_pair
    d, summary = cache.cached_pair(PairSpec(arch="llama", seed=4), root=Path(root))
    assert summary["target"] == str(d / "target")


def test_processes_asking_at_once_train_the_pair_once(tmp_path):
    """Two processes (``pytest -n``) asking for one missing pair: one trains, the other waits and reads."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    marks = tmp_path / "marks"
    procs = [ctx.Process(target=_train_once_in_child, args=(str(tmp_path / "cache"), str(marks)))
             for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    assert len(marks.read_text().splitlines()) == 1
    (pair_dir,) = [d for d in (tmp_path / "cache").iterdir() if d.is_dir()]
    assert json.loads((pair_dir / "pair.json").read_text())["target"] == str(pair_dir / "target")


def test_an_out_that_cannot_be_made_is_refused_before_training(tmp_path):
    """OUT below a file: before helper 56 the pair was trained (a minute at the default steps) and
    only the final mkdir failed."""
    (tmp_path / "notes.txt").write_text("mine")
    proc = _run_cli(str(tmp_path / "notes.txt" / "pair"), "--target-steps", "1", "--draft-steps", "1", timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "notes.txt is not a directory" in proc.stderr, proc.stderr
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_the_draft_is_trained_against_the_wrong_wirings_next_to_its_own():
    """The decoys of the draft's loss: every whole shift by one or two layers, every single
    position moved by one, the embedding for the deepest; never the draft's own wiring."""
    from sglang_eagle_cycle.tiny.train import near_wirings

    got = near_wirings([2, 4, 6], 8)
    assert sorted(map(tuple, got)) == sorted([
        (0, 2, 4), (1, 3, 5), (3, 5, 7), (4, 6, 8),            # whole shifts (-2 is also embedding-for-deepest)
        (1, 4, 6), (3, 4, 6), (2, 3, 6), (2, 5, 6), (2, 4, 5), (2, 4, 7)])
    assert [2, 4, 6] not in got and len(got) == len({tuple(g) for g in got})
    # out of range and colliding moves are left out: [0, 1, 8] in a model of 8 layers
    assert sorted(map(tuple, near_wirings([0, 1, 8], 8))) == [(0, 1, 7), (0, 2, 8)]


def test_an_out_where_no_folder_can_be_made_is_refused_before_training(tmp_path):
    """Under /proc os.access says root may write, yet no folder can be made there: make-tiny-pair
    trained first (helper 83). A folder made and removed beforehand tells."""
    if not Path("/proc").is_dir():
        pytest.skip("no /proc")
    proc = _run_cli("/proc/eagle-cycle-pair", "--target-steps", "1", "--draft-steps", "1", timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "step" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "cannot write /proc/eagle-cycle-pair: /proc" in proc.stderr
