"""The probe's draft forward against SGLang 0.5.23's ``LlamaForCausalLMEagle3`` on random weights.

Usage: python draft_forward_equality.py OUT_DIR [PAIR_DRAFT_DIR ...]   (prints ONE JSON object)

For every head variant SGLang reads (:data:`VARIANTS`) a seeded random EAGLE-3 checkpoint is
written under OUT_DIR: every weight random, norm weights included (drawn around 1, so a norm that
is skipped or applied twice shows), a reduced draft vocabulary with ``d2t`` unless the variant says
otherwise, and the draft's own ``embed_tokens.weight`` so that no target is needed. SGLang builds
its class from that folder (every parameter NaN first, then its own ``load_weights``) and runs one
EXTEND forward over a random sequence with random aux states; the probe loads the same folder
(:func:`sglang_eagle_cycle.wiring.probe.load_draft`) and computes :meth:`Draft.logits` on the same inputs.
Trained tiny-pair drafts given as further arguments are compared the same way, with the target's
embedding from the pair's ``target`` folder.

Reported per case: ``max_abs_diff`` of the logits ``[T, draft_vocab]`` (fp32), ``top1_equal``,
``logit_scale`` (max |logit|), ``nan_left`` (SGLang parameters the checkpoint did not fill), the
probe's ``variant`` and ``notes``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

VOCAB, HIDDEN, T = 320, 64, 24

#: name -> (config changes, how the norm tensors are named, target hidden, draft vocab, num_aux); the
#: vocabularies are multiples of 64, the row padding of SGLang's ParallelLMHead
VARIANTS = {
    "plain": ({}, None, HIDDEN, 192, 3),
    "norm_before_fc_in_eagle_config": ({"eagle_config": {"norm_before_fc": True}}, None, HIDDEN, 192, 3),
    "norm_before_fc_top_level": ({"norm_before_fc": True}, None, HIDDEN, 192, 3),
    "fc_norm": ({"fc_norm": True}, "fc_norm", HIDDEN, 192, 3),
    "use_aux_norm_legacy_names": ({"use_aux_norm": True}, "aux_norm", HIDDEN, 192, 3),
    "norm_before_fc_and_fc_norm": ({"norm_before_fc": True, "fc_norm": True}, "fc_norm", HIDDEN, 192, 3),
    "norm_output": ({"norm_output": True}, None, HIDDEN, 192, 3),
    "wider_target_fc_norm": ({"fc_norm": True}, "fc_norm", 96, 192, 3),
    "two_aux_states": ({"fc_norm": True}, "fc_norm", HIDDEN, 192, 2),
    "full_vocab_no_d2t": ({}, None, HIDDEN, VOCAB, 3),
}
AUX_NORM_NAMES = ("aux_norm_low", "aux_norm_mid", "aux_norm_high")


def write_random_head(d: Path, name: str, seed: int) -> None:
    """A random EAGLE-3 checkpoint of variant ``name`` in ``d`` (config.json, model.safetensors)."""
    import torch
    from safetensors.torch import save_file

    from sglang_eagle_cycle.tiny.models import Eagle3Head, Eagle3Shape

    edits, norm_names, th, draft_vocab, num_aux = VARIANTS[name]
    g = torch.Generator().manual_seed(seed)
    ids = torch.randperm(VOCAB, generator=g)[:draft_vocab].sort().values
    shape = Eagle3Shape(vocab=VOCAB, draft_vocab=draft_vocab, hidden=HIDDEN, target_hidden=th, inner=128,
                        heads=4, kv_heads=2, head_dim=16, num_aux=num_aux, max_pos=64)
    head = Eagle3Head(shape, ids)
    with torch.no_grad():
        for pname, p in head.named_parameters():
            if pname.endswith("norm.weight"):
                p.copy_(0.5 + torch.rand(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) * (1.0 / p.shape[-1] ** 0.5))
    w = head.checkpoint()
    if draft_vocab == VOCAB:
        del w["d2t"], w["t2d"]
    w["embed_tokens.weight"] = torch.randn(VOCAB, HIDDEN, generator=g)
    cfg = head.hf_config([1, 3, 5][:num_aux])
    for k, v in edits.items():
        if isinstance(v, dict):
            cfg[k] = {**cfg.get(k, {}), **v}
        else:
            cfg[k] = v
    if cfg.get("norm_before_fc") or cfg["eagle_config"].get("norm_before_fc"):
        w["input_norm.weight"] = 0.5 + torch.rand(num_aux * th, generator=g)
    if norm_names == "fc_norm":
        for i in range(num_aux):
            w[f"fc_norm.{i}.weight"] = 0.5 + torch.rand(th, generator=g)
    elif norm_names == "aux_norm":
        for i in range(num_aux):
            w[f"{AUX_NORM_NAMES[i]}.weight"] = 0.5 + torch.rand(th, generator=g)
        # SpecForge-era name for the one decoder layer
        w = {(k.replace("layers.0.", "midlayer.", 1) if k.startswith("layers.0.") else k): v for k, v in w.items()}
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps(cfg, indent=2))
    save_file({k: v.contiguous() for k, v in w.items()}, str(d / "model.safetensors"))


def compare(sc, draft_dir: Path, target_hidden: int, vocab: int, embed=None, seed: int = 0) -> dict:
    """SGLang's logits and the probe's on one random sequence of ``T`` tokens."""
    import torch

    from sglang_eagle_cycle.wiring import probe

    model, _ = sc.load_draft(str(draft_dir), None)
    if embed is not None:  # a trained pair's draft shares the target's embedding, as SGLang does
        model.model.embed_tokens.weight.data.copy_(embed)
    nan_left = sc._nan_params(model)
    cfg = json.loads((draft_dir / "config.json").read_text())
    dr = probe.load_draft(draft_dir, cfg, target_hidden, vocab)
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (T,), generator=g)
    aux = torch.randn(T, dr.num_aux * target_hidden, generator=g) * 3.0
    ours_embed = dr.embed if dr.embed is not None else torch.nn.Embedding.from_pretrained(embed)
    with torch.no_grad():
        mine = dr.logits(ours_embed(ids)[None], aux[None])[0]
    theirs = sc.draft_forward(model, ids, aux)
    top_mine = dr.head.draft_to_target[mine.argmax(-1)]
    return {
        "max_abs_diff": float((mine - theirs["logits"]).abs().max()),
        "top1_equal": float((top_mine == theirs["top1_target_ids"]).float().mean()),
        "logit_scale": float(theirs["logits"].abs().max()),
        "nan_left": nan_left,
        "variant": dr.variant.names(),
        "notes": dr.notes,
    }


def main(argv) -> int:
    out_dir = Path(argv[1])
    import sglang_cpu as sc

    sc.setup()
    result = {"random": {}, "pairs": {}}
    for k, name in enumerate(VARIANTS):
        d = out_dir / name
        write_random_head(d, name, seed=100 + k)
        th = VARIANTS[name][2]
        result["random"][name] = compare(sc, d, th, VOCAB, seed=k)
    for draft in argv[2:]:
        from safetensors.torch import load_file

        draft = Path(draft)
        tcfg = json.loads((draft.parent / "target" / "config.json").read_text())
        tw = load_file(str(draft.parent / "target" / "model.safetensors"))
        embed = tw["model.embed_tokens.weight"].float()
        result["pairs"][str(draft)] = compare(sc, draft, tcfg["hidden_size"], tcfg["vocab_size"], embed=embed)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
