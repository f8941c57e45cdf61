"""Lean torch models of the tiny pair: a Llama or DeepSeek-V3 target and an EAGLE-3 head.

Written for training speed on a CPU (fused batch math, ``scaled_dot_product_attention``), with
parameter names equal to the Hugging Face checkpoint layout that SGLang 0.5.23 loads, so
``state_dict()`` is the checkpoint. The tests check each forward against ``transformers`` and
against SGLang's own model classes (``test/test_tiny_pair_sglang.py``).

Residual-stream positions (README, "Aux-layer wiring"): ``states[j]`` is the residual stream *entering* decoder
layer ``j`` (position 0 = the embedding output) and ``states[N]`` the last layer's output before
the final norm. An EAGLE-3 layer id ``i`` in the layer-output convention is position ``i + 1``.

Shapes: ``input_ids`` LongTensor ``[B, L]``; hidden states ``[B, L, hidden]``; logits
``[B, L, vocab]``. All math in float32.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


# ----------------------------------------------------------------------------- shared pieces
class RMSNorm(nn.Module):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the last dimension (Zhang & Sennrich 2019)."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(length: int, dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables ``[length, dim]`` of rotary embeddings (Su et al. 2021), halves repeated."""
    inv = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    ang = torch.outer(torch.arange(length, dtype=torch.float32), inv)
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos(), ang.sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Neox-style rotation: the two halves of the last dim form the complex pairs."""
    half = x.shape[-1] // 2
    turned = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + turned * sin


def deinterleave(x: torch.Tensor) -> torch.Tensor:
    """Reorder ``(a0, b0, a1, b1, ...)`` into ``(a0, a1, ..., b0, b1, ...)`` on the last dim.

    DeepSeek-V3 stores its rotary dims interleaved (GPT-J style); after this reorder the neox
    rotation :func:`rotate` applies, and dot products of q and k are unchanged by the reorder.
    """
    return x.unflatten(-1, (-1, 2)).transpose(-1, -2).flatten(-2)


class GatedMLP(nn.Module):
    """SwiGLU feed-forward: ``down(silu(gate(x)) * up(x))``."""

    def __init__(self, hidden: int, inner: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inner, bias=False)
        self.up_proj = nn.Linear(hidden, inner, bias=False)
        self.down_proj = nn.Linear(inner, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def _causal_attention(q, k, v, scale: float) -> torch.Tensor:
    """q ``[B, H, L, D]``, k/v ``[B, H or Hkv, L, D]`` -> ``[B, L, H * Dv]`` (GQA by repetition)."""
    if k.shape[1] != q.shape[1]:
        rep = q.shape[1] // k.shape[1]
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
    return out.transpose(1, 2).flatten(2)


# ----------------------------------------------------------------------------- Llama target
@dataclass(frozen=True)
class LlamaShape:
    vocab: int = 1024
    hidden: int = 256
    inner: int = 256
    layers: int = 8
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 64
    eps: float = 1e-5
    theta: float = 10000.0
    max_pos: int = 512


class LlamaAttention(nn.Module):
    """GQA self-attention with RoPE; ``in_width`` (default ``s.hidden``) is the width of its input."""

    def __init__(self, s, in_width: int | None = None):
        super().__init__()
        self.s = s
        width = in_width or s.hidden
        self.q_proj = nn.Linear(width, s.heads * s.head_dim, bias=False)
        self.k_proj = nn.Linear(width, s.kv_heads * s.head_dim, bias=False)
        self.v_proj = nn.Linear(width, s.kv_heads * s.head_dim, bias=False)
        self.o_proj = nn.Linear(s.heads * s.head_dim, s.hidden, bias=False)

    def forward(self, x, cos, sin):
        b, L, _ = x.shape
        s = self.s
        q = self.q_proj(x).view(b, L, s.heads, s.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, L, s.kv_heads, s.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, L, s.kv_heads, s.head_dim).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        return self.o_proj(_causal_attention(q, k, v, s.head_dim ** -0.5))


class LlamaLayer(nn.Module):
    def __init__(self, s: LlamaShape):
        super().__init__()
        self.input_layernorm = RMSNorm(s.hidden, s.eps)
        self.self_attn = LlamaAttention(s)
        self.post_attention_layernorm = RMSNorm(s.hidden, s.eps)
        self.mlp = GatedMLP(s.hidden, s.inner)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class _Body(nn.Module):
    """``model.*`` of the checkpoint: embedding, decoder layers, final norm."""

    def __init__(self, vocab, hidden, layers, eps):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.layers = layers
        self.norm = RMSNorm(hidden, eps)


class TinyCausalLM(nn.Module):
    """Shared forward of both targets; subclasses build ``self.model`` and the rotary tables."""

    num_layers: int

    def states(self, input_ids: torch.Tensor) -> list[torch.Tensor]:
        """All residual-stream positions ``0..N``: a list of ``N + 1`` tensors ``[B, L, hidden]``."""
        x = self.model.embed_tokens(input_ids)
        cos, sin = self._rope(input_ids.shape[1])
        out = [x]
        for layer in self.model.layers:
            x = layer(x, cos, sin)
            out.append(x)
        return out

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Logits ``[B, L, vocab]``."""
        x = self.model.embed_tokens(input_ids)
        cos, sin = self._rope(input_ids.shape[1])
        for layer in self.model.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.model.norm(x))

    def logits_from_last(self, last_state: torch.Tensor) -> torch.Tensor:
        """Logits from position ``N`` (the pre-norm last-layer output)."""
        return self.lm_head(self.model.norm(last_state))


class TinyLlama(TinyCausalLM):
    """A Llama-architecture causal LM whose ``state_dict`` is a ``LlamaForCausalLM`` checkpoint."""

    def __init__(self, s: LlamaShape):
        super().__init__()
        self.s = s
        self.num_layers = s.layers
        self.model = _Body(s.vocab, s.hidden, nn.ModuleList(LlamaLayer(s) for _ in range(s.layers)), s.eps)
        self.lm_head = nn.Linear(s.hidden, s.vocab, bias=False)
        cos, sin = rope_tables(s.max_pos, s.head_dim, s.theta)
        self.register_buffer("_cos", cos, persistent=False)
        self.register_buffer("_sin", sin, persistent=False)

    def _rope(self, length):
        return self._cos[:length], self._sin[:length]

    def hf_config(self) -> dict:
        s = self.s
        return {
            "architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "vocab_size": s.vocab, "hidden_size": s.hidden, "intermediate_size": s.inner,
            "num_hidden_layers": s.layers, "num_attention_heads": s.heads,
            "num_key_value_heads": s.kv_heads, "head_dim": s.head_dim, "hidden_act": "silu",
            "rms_norm_eps": s.eps, "rope_theta": s.theta, "max_position_embeddings": s.max_pos,
            "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": False,
            "initializer_range": 0.02, "torch_dtype": "float32",
        }


# ----------------------------------------------------------------------------- DeepSeek-V3 target
@dataclass(frozen=True)
class DeepseekShape:
    vocab: int = 1024
    hidden: int = 256           # not twice moe_inner: a transposed expert weight cannot fit
    inner: int = 256            # dense layers (the first ``first_dense``)
    moe_inner: int = 96
    layers: int = 8
    first_dense: int = 1
    experts: int = 4
    experts_per_tok: int = 2
    shared_experts: int = 1
    heads: int = 4
    q_lora: int = 96
    kv_lora: int = 64
    qk_nope: int = 32
    qk_rope: int = 16
    v_head: int = 32
    routed_scale: float = 1.0
    eps: float = 1e-6
    theta: float = 10000.0
    max_pos: int = 512


class MLAttention(nn.Module):
    """Multi-head latent attention (DeepSeek-V2, Liu et al. 2024, §2.1), unabsorbed form."""

    def __init__(self, s: DeepseekShape):
        super().__init__()
        self.s = s
        qk = s.qk_nope + s.qk_rope
        self.q_a_proj = nn.Linear(s.hidden, s.q_lora, bias=False)
        self.q_a_layernorm = RMSNorm(s.q_lora, s.eps)
        self.q_b_proj = nn.Linear(s.q_lora, s.heads * qk, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(s.hidden, s.kv_lora + s.qk_rope, bias=False)
        self.kv_a_layernorm = RMSNorm(s.kv_lora, s.eps)
        self.kv_b_proj = nn.Linear(s.kv_lora, s.heads * (s.qk_nope + s.v_head), bias=False)
        self.o_proj = nn.Linear(s.heads * s.v_head, s.hidden, bias=False)

    def forward(self, x, cos, sin):
        b, L, _ = x.shape
        s = self.s
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x))).view(b, L, s.heads, -1).transpose(1, 2)
        q_nope, q_pe = q.split([s.qk_nope, s.qk_rope], dim=-1)
        latent, k_pe = self.kv_a_proj_with_mqa(x).split([s.kv_lora, s.qk_rope], dim=-1)
        kv = self.kv_b_proj(self.kv_a_layernorm(latent)).view(b, L, s.heads, -1).transpose(1, 2)
        k_nope, v = kv.split([s.qk_nope, s.v_head], dim=-1)
        q_pe = rotate(deinterleave(q_pe), cos, sin)
        k_pe = rotate(deinterleave(k_pe.unsqueeze(1)), cos, sin).expand(b, s.heads, L, s.qk_rope)
        q = torch.cat([q_nope, q_pe], dim=-1)
        k = torch.cat([k_nope, k_pe], dim=-1)
        return self.o_proj(_causal_attention(q, k, v, (s.qk_nope + s.qk_rope) ** -0.5))


class Router(nn.Module):
    """DeepSeek-V3's gate: sigmoid affinities, top-k by affinity + bias, weights normalised."""

    def __init__(self, s: DeepseekShape):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(s.experts, s.hidden))
        nn.init.normal_(self.weight, std=0.02)
        # Load-balancing bias of DeepSeek-V3 (aux-loss-free balancing); kept at zero here.
        self.register_buffer("e_score_correction_bias", torch.zeros(s.experts))


class Experts(nn.Module):
    """Routed experts as ``experts.{j}.{gate,up,down}_proj`` (the checkpoint's per-expert names)."""

    def __init__(self, s: DeepseekShape):
        super().__init__()
        self.s = s
        self.gate = Router(s)
        self.experts = nn.ModuleList(GatedMLP(s.hidden, s.moe_inner) for _ in range(s.experts))
        self.shared_experts = GatedMLP(s.hidden, s.moe_inner * s.shared_experts)

    def forward(self, x):
        s = self.s
        flat = x.reshape(-1, s.hidden)
        scores = torch.sigmoid(flat @ self.gate.weight.t())
        chosen = (scores + self.gate.e_score_correction_bias).topk(s.experts_per_tok, dim=-1).indices
        weights = scores.gather(-1, chosen)
        weights = weights / (weights.sum(-1, keepdim=True) + 1e-20) * s.routed_scale
        out = self.shared_experts(flat)
        for j, expert in enumerate(self.experts):
            rows, slot = (chosen == j).nonzero(as_tuple=True)
            if rows.numel():
                out = out.index_add(0, rows, expert(flat[rows]) * weights[rows, slot].unsqueeze(-1))
        return out.view_as(x)


class DeepseekLayer(nn.Module):
    def __init__(self, s: DeepseekShape, index: int):
        super().__init__()
        self.input_layernorm = RMSNorm(s.hidden, s.eps)
        self.self_attn = MLAttention(s)
        self.post_attention_layernorm = RMSNorm(s.hidden, s.eps)
        self.mlp = GatedMLP(s.hidden, s.inner) if index < s.first_dense else Experts(s)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class TinyDeepseekV3(TinyCausalLM):
    """A DeepSeek-V3-architecture causal LM (MLA, sigmoid-routed MoE, shared expert)."""

    def __init__(self, s: DeepseekShape):
        super().__init__()
        self.s = s
        self.num_layers = s.layers
        layers = nn.ModuleList(DeepseekLayer(s, i) for i in range(s.layers))
        self.model = _Body(s.vocab, s.hidden, layers, s.eps)
        self.lm_head = nn.Linear(s.hidden, s.vocab, bias=False)
        cos, sin = rope_tables(s.max_pos, s.qk_rope, s.theta)
        self.register_buffer("_cos", cos, persistent=False)
        self.register_buffer("_sin", sin, persistent=False)

    def _rope(self, length):
        return self._cos[:length], self._sin[:length]

    def hf_config(self) -> dict:
        s = self.s
        return {
            "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
            "vocab_size": s.vocab, "hidden_size": s.hidden, "intermediate_size": s.inner,
            "moe_intermediate_size": s.moe_inner, "num_hidden_layers": s.layers,
            "first_k_dense_replace": s.first_dense, "moe_layer_freq": 1,
            "n_routed_experts": s.experts, "num_experts_per_tok": s.experts_per_tok,
            "n_shared_experts": s.shared_experts, "n_group": 1, "topk_group": 1,
            "routed_scaling_factor": s.routed_scale, "scoring_func": "sigmoid",
            "topk_method": "noaux_tc", "norm_topk_prob": True, "ep_size": 1,
            "num_attention_heads": s.heads, "num_key_value_heads": s.heads,
            "q_lora_rank": s.q_lora, "kv_lora_rank": s.kv_lora, "qk_nope_head_dim": s.qk_nope,
            "qk_rope_head_dim": s.qk_rope, "v_head_dim": s.v_head, "hidden_act": "silu",
            "rms_norm_eps": s.eps, "rope_theta": s.theta, "rope_scaling": None,
            "rope_interleave": True, "max_position_embeddings": s.max_pos,
            "attention_bias": False, "tie_word_embeddings": False, "num_nextn_predict_layers": 0,
            "initializer_range": 0.02, "torch_dtype": "float32",
        }


# ----------------------------------------------------------------------------- EAGLE-3 head
@dataclass(frozen=True)
class Eagle3Shape:
    vocab: int = 1024
    draft_vocab: int = 512
    hidden: int = 256
    target_hidden: int = 256
    inner: int = 256
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 64
    num_aux: int = 3
    eps: float = 1e-5
    theta: float = 10000.0
    max_pos: int = 512


class Eagle3Layer(nn.Module):
    """The head's one decoder layer: attention over ``[norm(embed) ; norm(fc(aux))]`` (width 2h)."""

    def __init__(self, s: Eagle3Shape):
        super().__init__()
        self.s = s
        self.input_layernorm = RMSNorm(s.hidden, s.eps)
        self.hidden_norm = RMSNorm(s.hidden, s.eps)
        self.post_attention_layernorm = RMSNorm(s.hidden, s.eps)
        self.self_attn = LlamaAttention(s, in_width=2 * s.hidden)
        self.mlp = GatedMLP(s.hidden, s.inner)

    def forward(self, embeds, fused, cos, sin):
        x = torch.cat([self.input_layernorm(embeds), self.hidden_norm(fused)], dim=-1)
        residual = fused + self.self_attn(x, cos, sin)
        return residual + self.mlp(self.post_attention_layernorm(residual))


class Eagle3Head(nn.Module):
    """EAGLE-3 draft head (Li et al. 2025) in the layout SGLang's ``LlamaForCausalLMEagle3`` loads.

    At position ``t`` it reads the target's token embedding of token ``t + 1`` and the
    concatenated aux states ``[B, L, num_aux * target_hidden]`` at ``t``, and returns logits
    ``[B, L, draft_vocab]`` for the token at ``t + 2``. Its token embedding is the target's
    (SGLang shares it at load time), so it is not a parameter here and not in the checkpoint.
    ``d2t`` (int64 ``[draft_vocab]``) maps a draft id ``d`` to target id ``d + d2t[d]``.
    """

    def __init__(self, s: Eagle3Shape, draft_to_target: torch.Tensor):
        super().__init__()
        self.s = s
        self.fc = nn.Linear(s.num_aux * s.target_hidden, s.hidden, bias=False)
        self.layers = nn.ModuleList([Eagle3Layer(s)])
        self.norm = RMSNorm(s.hidden, s.eps)
        self.lm_head = nn.Linear(s.hidden, s.draft_vocab, bias=False)
        self.register_buffer("draft_to_target", draft_to_target.long(), persistent=False)
        cos, sin = rope_tables(s.max_pos, s.head_dim, s.theta)
        self.register_buffer("_cos", cos, persistent=False)
        self.register_buffer("_sin", sin, persistent=False)

    def forward(self, embeds: torch.Tensor, aux: torch.Tensor) -> torch.Tensor:
        L = embeds.shape[1]
        x = self.layers[0](embeds, self.fc(aux), self._cos[:L], self._sin[:L])
        return self.lm_head(self.norm(x))

    def checkpoint(self) -> dict[str, torch.Tensor]:
        """Tensors of the draft checkpoint: weights, ``d2t`` offsets and the ``t2d`` mask."""
        out = {k: v.detach().clone().contiguous() for k, v in self.state_dict().items()}
        ids = self.draft_to_target
        out["d2t"] = (ids - torch.arange(ids.numel())).contiguous()
        t2d = torch.zeros(self.s.vocab, dtype=torch.bool)
        t2d[ids] = True
        out["t2d"] = t2d
        return out

    def hf_config(self, layer_ids: list[int]) -> dict:
        s = self.s
        return {
            "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
            "vocab_size": s.vocab, "draft_vocab_size": s.draft_vocab, "hidden_size": s.hidden,
            "target_hidden_size": s.target_hidden, "intermediate_size": s.inner,
            "num_hidden_layers": 1, "num_attention_heads": s.heads, "num_key_value_heads": s.kv_heads,
            "head_dim": s.head_dim, "hidden_act": "silu", "rms_norm_eps": s.eps,
            "rope_theta": s.theta, "max_position_embeddings": s.max_pos,
            "tie_word_embeddings": False, "torch_dtype": "float32",
            "eagle_config": {"eagle_aux_hidden_state_layer_ids": list(layer_ids),
                             "use_aux_hidden_state": True},
        }


def init_weights(model: nn.Module, std: float = 0.02) -> None:
    """Normal(0, std) linears and embeddings, output projections scaled by 1/sqrt(2 * depth)."""
    depth = max(1, getattr(model, "num_layers", 1))
    for name, p in model.named_parameters():
        if name.endswith("norm.weight") or p.dim() < 2:
            continue
        scale = std / math.sqrt(2 * depth) if name.endswith(("o_proj.weight", "down_proj.weight")) else std
        nn.init.normal_(p, std=scale)
