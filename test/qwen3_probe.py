"""The wiring proof on SGLang's own Qwen3 and Qwen3-MoE code; run in a fresh interpreter.

Usage: python qwen3_probe.py MODE WORKDIR        (prints ONE JSON object on stdout)

MODE ``plugin``: ``SGLANG_PLUGINS=eagle_cycle`` and SGLang's own ``load_plugins()`` before any model
is built, so ``set_eagle3_layers_to_capture`` is the plugin's wrapper; the dense Qwen3 is also run
with ``SGLANG_EAGLE_CYCLE_AUX_CONVENTION=input``. MODE ``stock``: no plugin at all.

In WORKDIR/MODE it writes, per arch, a tiny random checkpoint made by ``transformers`` (seeded, fp32,
safetensors; the same bytes in both modes, reported as ``sha256``) and an EAGLE-3 draft
``config.json`` declaring ``eagle_aux_hidden_state_layer_ids`` [1, 3, 5] (no draft weights: only
the target's capture is proved here). It then loads SGLang's target class from the checkpoint
(every parameter NaN first), publishes the draft path as a launch would (the plugin reads the
draft's ``config.json`` from there), calls the real setter with the draft's ids, runs one EXTEND
forward over a fixed 32-token sequence and compares the captures with ``transformers``'
``output_hidden_states`` of the same checkpoint. The tensors themselves go to
``WORKDIR/MODE/ARCH/tensors.safetensors`` (``aux`` [T, 3h] as SGLang captured it, ``hf_hidden_states``
[N + 1, T, h], and ``aux_convention_input`` where that run happened) for the test to compare.

If SGLang cannot be imported, the one JSON object is ``{"skip": REASON}``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

#: The draft's ids as its config declares them (layer outputs 1, 3, 5: hidden_states 2, 4, 6).
IDS = [1, 3, 5]
SEQ_LEN = 32
VOCAB = 256

#: Tiny Qwen3 shapes: 8 layers (so position 6 is not the final layer's output), hidden 64, GQA
#: 4 query heads on 2 KV heads of 32 (head_dim * heads != hidden, as in real Qwen3), q/k RMSNorm.
#: initializer_range 0.1 (HF default 0.02) so that each layer moves the residual stream visibly.
COMMON = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=8,
              num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=128,
              rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False, initializer_range=0.1)
#: Qwen3-MoE: every layer sparse, 8 experts of width 32, top 2, renormalised.
MOE = dict(moe_intermediate_size=32, num_experts=8, num_experts_per_tok=2, norm_topk_prob=True,
           decoder_sparse_step=1, mlp_only_layers=[])
ARCHS = ("qwen3", "qwen3_moe")


def make_checkpoint(arch: str, out: Path) -> Path:
    """A random ``Qwen3ForCausalLM`` / ``Qwen3MoeForCausalLM`` saved by ``save_pretrained``; seeded."""
    import torch
    import transformers

    if arch == "qwen3":
        cfg, cls = transformers.Qwen3Config(**COMMON), transformers.Qwen3ForCausalLM
    else:
        cfg, cls = transformers.Qwen3MoeConfig(**COMMON, **MOE), transformers.Qwen3MoeForCausalLM
    torch.manual_seed(0)
    model = cls(cfg).float()
    with torch.no_grad():  # HF initialises every RMSNorm weight to 1: make the norms do something
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
    model.save_pretrained(str(out), safe_serialization=True)
    return out


def write_draft_config(out: Path, target_cfg: dict) -> Path:
    """An EAGLE-3 head's ``config.json`` as a trainer writes it, declaring :data:`IDS`."""
    out.mkdir(parents=True, exist_ok=True)
    cfg = {
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": IDS, "use_aux_hidden_state": True},
        "hidden_size": target_cfg["hidden_size"], "target_hidden_size": target_cfg["hidden_size"],
        "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "hidden_act": "silu", "rms_norm_eps": 1e-6,
        "max_position_embeddings": 128, "rope_theta": 10000.0, "tie_word_embeddings": False,
        "vocab_size": target_cfg["vocab_size"], "draft_vocab_size": target_cfg["vocab_size"],
        "torch_dtype": "float32",
    }
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    return out


def hf_reference(target: Path, seq):
    """``transformers``' ``hidden_states`` (N + 1 of them, [T, h]) and logits for ``seq``."""
    import torch
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(str(target), dtype=torch.float32).eval()
    with torch.no_grad():
        out = hf(seq[None], output_hidden_states=True)
    return torch.stack([h[0] for h in out.hidden_states]), out.logits[0]


def _maxdiff(a, b) -> float:
    return float((a - b).abs().max())


def compare(out: dict, refs, logits, k: int) -> dict:
    """Each captured slice against every HF position; the diff at the contract's positions."""
    import torch

    h = refs.shape[-1]
    captured = []
    for i in range(k):
        piece = out["aux"][:, i * h:(i + 1) * h]
        diffs = [_maxdiff(piece, refs[j]) for j in range(refs.shape[0])]
        order = sorted(range(len(diffs)), key=diffs.__getitem__)
        captured.append({"nearest_position": order[0], "diff": diffs[order[0]],
                         "next_nearest_diff": diffs[order[1]]})
    contract = [i + 1 for i in IDS]              # README "Aux-layer wiring": id i -> hidden_states[i + 1]
    want = torch.cat([refs[p] for p in contract], -1)
    return {
        "layers_to_capture": out["layers_to_capture"],
        "flagged_layers": out["flagged_layers"],
        "aux_shape": list(out["aux"].shape),
        "captured": captured,
        "contract_positions": contract,
        "aux_max_abs_diff_at_contract_positions": _maxdiff(out["aux"], want),
        "ref_max_abs_at_contract_positions": float(want.abs().max()),
        "final_hidden_max_abs_diff": _maxdiff(out["hidden"], refs[-1]),   # both after the final norm
        "logits_max_abs_diff": _maxdiff(out["logits"], logits),
        "greedy_equal": bool((out["logits"].argmax(-1) == logits.argmax(-1)).all()),
        "attention_calls": out["backend"].calls,
    }


def _prove(sc, arch: str, work: Path, *, convention_input: bool) -> dict:
    import torch

    target = make_checkpoint(arch, work / arch / "target")
    target_cfg = json.loads((target / "config.json").read_text())
    draft = write_draft_config(work / arch / "draft", target_cfg)
    seq = torch.randint(0, VOCAB, (SEQ_LEN,), generator=torch.Generator().manual_seed(7))
    refs, logits = hf_reference(target, seq)

    model, report = sc.load_target(str(target))
    sc.publish_spec(speculative_draft_model_path=str(draft))
    # the ids SGLang hands the setter: the draft config's nested eagle_config ids
    ids = json.loads((draft / "config.json").read_text())["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
    out = sc.target_forward(model, seq, list(ids))
    tensors = {"aux": out["aux"].contiguous(), "hf_hidden_states": refs.contiguous()}
    result = {
        "class": type(model).__name__,
        "ids": ids,
        "sha256": hashlib.sha256((target / "model.safetensors").read_bytes()).hexdigest(),
        "target_load": {k: report[k] for k in ("params", "nan_left", "amx_modules")},
        "default": compare(out, refs, logits, len(ids)),
    }
    if convention_input:
        os.environ["SGLANG_EAGLE_CYCLE_AUX_CONVENTION"] = "input"
        try:
            moved = sc.target_forward(model, seq, list(ids))
        finally:
            del os.environ["SGLANG_EAGLE_CYCLE_AUX_CONVENTION"]
        result["convention_input"] = compare(moved, refs, logits, len(ids))
        tensors["aux_convention_input"] = moved["aux"].contiguous()
    from safetensors.torch import save_file

    path = work / arch / "tensors.safetensors"
    save_file(tensors, str(path))
    result["tensors"] = str(path)
    return result


def _wrapped(cls) -> bool:
    return hasattr(cls.__dict__.get("set_eagle3_layers_to_capture"), "__wrapped__")


def main(argv) -> int:
    mode = argv[1]
    work = Path(argv[2]) / mode   # each mode its own files: the two probes may run side by side
    t0 = time.perf_counter()
    import sglang_cpu as sc

    if mode == "plugin":
        os.environ["SGLANG_PLUGINS"] = "eagle_cycle"
    try:
        sc.setup()
        if mode == "plugin":  # before any model module is imported, as in a launch
            from sglang.srt.plugins import load_plugins

            load_plugins()
        from sglang.srt.models.qwen3 import Qwen3ForCausalLM
        from sglang.srt.models.qwen3_moe import Qwen3MoeForCausalLM
    except ImportError as exc:
        print(json.dumps({"skip": f"SGLang cannot be imported: {exc}"}))
        return 0

    out = {"mode": mode, "wrapped": {"Qwen3ForCausalLM": _wrapped(Qwen3ForCausalLM),
                                     "Qwen3MoeForCausalLM": _wrapped(Qwen3MoeForCausalLM)}}
    for arch in ARCHS:
        out[arch] = _prove(sc, arch, work, convention_input=(mode == "plugin" and arch == "qwen3"))
    out["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
