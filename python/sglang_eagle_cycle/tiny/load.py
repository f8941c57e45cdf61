"""Load a tiny pair written by :func:`~.pair.make_pair` back into the lean torch models.

    target = load_target(Path("out/target"), device="cuda")
    head = load_head(Path("out/draft"), device="cuda")

Needs torch and safetensors only (no SGLang, no transformers), so it runs on a bare GPU box.
Raises UsageError when a folder lacks ``config.json``/``model.safetensors`` or holds another
architecture, and RuntimeError (from ``load_state_dict``) when a tensor is missing or misshapen.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import UsageError


def _read(d: Path) -> tuple[dict, dict]:
    from safetensors.torch import load_file

    cfg_path, weights = Path(d) / "config.json", Path(d) / "model.safetensors"
    for p in (cfg_path, weights):
        if not p.is_file():
            raise UsageError(f"{p} not found: not a tiny pair folder")
    return json.loads(cfg_path.read_text()), load_file(str(weights))


def load_target(d: Path, device: str = "cpu"):
    """The target model (``TinyLlama`` or ``TinyDeepseekV3``), eval mode, on ``device``."""
    from .models import DeepseekShape, LlamaShape, TinyDeepseekV3, TinyLlama

    cfg, tensors = _read(d)
    arch = (cfg.get("architectures") or [None])[0]
    if arch == "LlamaForCausalLM":
        model = TinyLlama(LlamaShape(
            vocab=cfg["vocab_size"], hidden=cfg["hidden_size"], inner=cfg["intermediate_size"],
            layers=cfg["num_hidden_layers"], heads=cfg["num_attention_heads"],
            kv_heads=cfg["num_key_value_heads"], head_dim=cfg["head_dim"], eps=cfg["rms_norm_eps"],
            theta=cfg["rope_theta"], max_pos=cfg["max_position_embeddings"]))
    elif arch == "DeepseekV3ForCausalLM":
        model = TinyDeepseekV3(DeepseekShape(
            vocab=cfg["vocab_size"], hidden=cfg["hidden_size"], inner=cfg["intermediate_size"],
            moe_inner=cfg["moe_intermediate_size"], layers=cfg["num_hidden_layers"],
            first_dense=cfg["first_k_dense_replace"], experts=cfg["n_routed_experts"],
            experts_per_tok=cfg["num_experts_per_tok"], shared_experts=cfg["n_shared_experts"],
            heads=cfg["num_attention_heads"], q_lora=cfg["q_lora_rank"], kv_lora=cfg["kv_lora_rank"],
            qk_nope=cfg["qk_nope_head_dim"], qk_rope=cfg["qk_rope_head_dim"], v_head=cfg["v_head_dim"],
            routed_scale=cfg["routed_scaling_factor"], eps=cfg["rms_norm_eps"], theta=cfg["rope_theta"],
            max_pos=cfg["max_position_embeddings"]))
    else:
        raise UsageError(f"{d}: architecture {arch!r} is not a tiny-pair target")
    model.load_state_dict(tensors, strict=True)
    return model.to(device).eval()


def load_head(d: Path, device: str = "cpu"):
    """The EAGLE-3 head (:class:`~.models.Eagle3Head`), eval mode, on ``device``."""
    import torch

    from .models import Eagle3Head, Eagle3Shape

    cfg, tensors = _read(d)
    if (cfg.get("architectures") or [None])[0] != "LlamaForCausalLMEagle3":
        raise UsageError(f"{d}: not an EAGLE-3 head (architectures {cfg.get('architectures')})")
    ids = cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
    d2t = tensors.pop("d2t")
    tensors.pop("t2d", None)
    shape = Eagle3Shape(
        vocab=cfg["vocab_size"], draft_vocab=cfg["draft_vocab_size"], hidden=cfg["hidden_size"],
        target_hidden=cfg["target_hidden_size"], inner=cfg["intermediate_size"],
        heads=cfg["num_attention_heads"], kv_heads=cfg["num_key_value_heads"], head_dim=cfg["head_dim"],
        num_aux=len(ids), eps=cfg["rms_norm_eps"], theta=cfg["rope_theta"],
        max_pos=cfg["max_position_embeddings"])
    head = Eagle3Head(shape, d2t + torch.arange(d2t.numel()))
    head.load_state_dict(tensors, strict=True)
    return head.to(device).eval()


def pair_agreement(pair: Path, device: str = "cpu") -> dict:
    """Recompute a pair's agreement figures on ``device`` from its files alone.

    Reads ``pair.json`` (positions), ``eval_prompts.json`` (the held-out prompt token ids) and
    both checkpoints; returns ``{"draft_top1_agreement", "aux_ablated_top1", "agreement_by_wiring",
    "scored_positions", "device"}`` with the definitions of :mod:`.agreement`.
    """
    import torch

    from . import agreement as ag

    pair = Path(pair)
    try:
        summary = json.loads((pair / "pair.json").read_text())
        prompts = json.loads((pair / "eval_prompts.json").read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"{pair}: not a tiny pair folder ({exc})") from None
    target = load_target(pair / "target", device)
    head = load_head(pair / "draft", device)
    embed = target.model.embed_tokens
    with torch.no_grad():
        ids = torch.tensor(prompts["held_out_prompts"], dtype=torch.long, device=device)
        sc = ag.score_features(target, ids, int(prompts["gen_tokens"]))
        pos = summary["positions"]
        wiring = {}
        for by in (-1, 1):
            moved = ag.shifted(pos, by, target.num_layers)
            wiring[f"{by:+d}"] = None if moved is None else round(ag.agreement(head, embed, sc, moved), 4)
        return {
            "draft_top1_agreement": round(ag.agreement(head, embed, sc, pos), 4),
            "aux_ablated_top1": round(ag.agreement(head, embed, sc, None), 4),
            "agreement_by_wiring": wiring,
            "scored_positions": int(sc.mask.sum().item()),
            "device": str(device),
        }
