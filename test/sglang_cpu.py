"""Run SGLang 0.5.23's own model classes on the CPU, so tests can compare real tensors.

Why: the wiring hooks decide which residual-stream positions SGLang captures for EAGLE-3. A stub
``self`` can show what the setter writes into ``layers_to_capture``; only the real model's forward
shows which tensors come out. This module builds SGLang's ``LlamaForCausalLM``,
``DeepseekV3ForCausalLM``, ``Qwen3ForCausalLM``, ``Qwen3MoeForCausalLM`` and
``LlamaForCausalLMEagle3`` from a Hugging Face checkpoint folder,
loads the weights through SGLang's own loader sequence and runs ``model.model(...)`` for one
sequence in EXTEND mode. The only stand-ins are the attention backend (:class:`CausalSDPABackend`)
and the few ``ForwardBatch`` fields the forward reads; everything else (linear layers, RoPE,
RMSNorm, q/k norms, MLA projections, MoE routing and experts, the aux capture) is SGLang's code.

Importing this module does nothing heavy; :func:`setup` must run before anything imports SGLang
(it sets ``SGLANG_USE_CPU_ENGINE=1``, which SGLang reads at import time). SGLang's ``HookRegistry``
cannot un-patch, and the distributed / runtime-context state is process-wide, so use it in a fresh
interpreter (``test/tiny_pair_probe.py`` is that interpreter for the tests)::

    import sglang_cpu as sc
    sc.setup()                                   # before any `import sglang...`
    # optional: SGLANG_PLUGINS=eagle_cycle + sglang.srt.plugins.load_plugins() here
    target, report = sc.load_target("/ckpt/llama")        # report["nan_left"] == []
    draft, dreport = sc.load_draft("/ckpt/draft", target)
    out = sc.target_forward(target, torch.arange(12), [1, 3, 5])
    out["layers_to_capture"], out["aux"].shape            # [2, 4, 6], (12, 768)
    d = sc.draft_forward(draft, torch.arange(12), out["aux"])

What runs where on the CPU (SGLang 0.5.23, checked):

* Linear layers: ``UnquantizedLinearMethod.apply`` -> ``F.linear`` (the Intel AMX packed path needs
  the ``sgl_kernel`` CPU build; without it ``use_intel_amx_backend`` stays False and
  ``process_weights_after_loading`` is a no-op).
* DeepSeek MLA: ``dispatch_attn_forward_method`` reads the backend's
  ``prefill_attention_backend_str``. A CPU server stamps ``"intel_amx"`` there
  (``arg_groups/platform_hook.handle_cpu_backends``); DeepSeek's ``AttentionBackendRegistry`` has no
  handler of that name and falls back to the ``"triton"`` handler, which picks
  ``AttnForwardMethod.MHA`` for an EXTEND batch without cached prefix. That is
  ``forward_normal_prepare`` / ``forward_normal_core``: q ``[T, H, nope+rope]``, k ``[T, H, nope+rope]``
  (k_nope from ``kv_b_proj``, k_pe shared across heads), v ``[T, H, v_head_dim]`` go to
  ``attn_mha`` (``save_kv_cache=False``), scaling ``1/sqrt(qk_head_dim)`` (times mscale^2 with YaRN).
  Before that the latent cache ``[T, 1, kv_lora_rank + rope]`` is written through
  ``token_to_kv_pool.set_kv_buffer`` (the non-CUDA branch of ``_set_mla_kv_buffer``). The absorbed
  MLA path (``w_kc``/``w_vc``, decode / verify / draft-extend) is not run by this harness.
* DeepSeek MoE: ``FusedMoE`` -> ``UnquantizedFusedMoEMethod.forward_cpu`` -> (no AMX)
  ``sglang.srt.layers.moe.fused_moe_native.moe_forward_native``; routing
  ``TopK.forward_native`` -> ``select_experts`` -> ``biased_grouped_topk_impl`` (noaux_tc, sigmoid).
  Shared-expert fusion is off (``resolve_shared_experts_config``: SGLang allows it only for 256/384
  routed experts and on CUDA/HIP/MUSA), so the shared expert runs as its own MLP.
* Qwen3 / Qwen3-MoE attention: ``forward_prepare_native`` (per-head ``q_norm`` / ``k_norm`` through
  ``models.utils.apply_qk_norm``, then RoPE); the fused q/k-norm + RoPE kernels are aiter (HIP) or
  bf16/fp16-only, so fp32 on the CPU takes the unfused path. Qwen3-MoE experts: the same
  ``FusedMoE`` -> ``moe_forward_native`` path as DeepSeek, routing ``TopK.forward_cpu`` ->
  ``select_experts`` (softmax top-k, renormalised when ``norm_topk_prob``). Its capture is per layer: the inner setter
  (``Qwen2MoeModel.set_eagle3_layers_to_capture``) sets ``_is_layer_to_capture`` on the flagged
  layers and never clears one (``target_forward`` reports them as ``flagged_layers``).
* ``load_weights``: DeepSeek's loader calls ``post_load_weights`` itself at the end, which derives the
  absorbed ``w_kc`` / ``w_vc`` (plain attributes of each attention module, not parameters) from
  ``kv_b_proj``. The loader sequence used here is SGLang's
  ``DefaultModelLoader.load_weights_and_postprocess`` (``load_weights`` then every module's
  ``quant_method.process_weights_after_loading``), after building under
  ``get_model().override(shared_experts=...)`` like ``model_loader.loader._initialize_model``.
"""

from __future__ import annotations

import os
import socket
import sys
from types import SimpleNamespace
from typing import Optional

_READY = False

#: Architectures ``load_target`` builds: config.json ``architectures[0]`` -> (module, class).
TARGETS = {
    "LlamaForCausalLM": ("sglang.srt.models.llama", "LlamaForCausalLM"),
    "DeepseekV3ForCausalLM": ("sglang.srt.models.deepseek_v2", "DeepseekV3ForCausalLM"),
    "Qwen3ForCausalLM": ("sglang.srt.models.qwen3", "Qwen3ForCausalLM"),
    "Qwen3MoeForCausalLM": ("sglang.srt.models.qwen3_moe", "Qwen3MoeForCausalLM"),
}
DRAFTS = {
    "LlamaForCausalLMEagle3": ("sglang.srt.models.llama_eagle3", "LlamaForCausalLMEagle3"),
}

#: ``CUDA_VISIBLE_DEVICES`` value that hides every GPU and still starts with a digit (see setup()).
HIDDEN_GPU_INDEX = "999"

#: The attention backend name an x86 CPU server resolves (SGLang's ``handle_cpu_backends``).
CPU_BACKEND_NAME = "intel_amx"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setup(port: Optional[int] = None, *, hide_gpu: bool = True) -> None:
    """Make this process able to build and run SGLang models on the CPU. Idempotent.

    1. ``SGLANG_USE_CPU_ENGINE=1`` (read by ``sglang.srt.utils.is_cpu`` and the platform probe at
       import time: refuses to go on if SGLang was already imported without it).
    2. ``hide_gpu``: ``CUDA_VISIBLE_DEVICES=999`` (an index no machine has, so CUDA lists no device)
       so that on a GPU machine SGLang still takes its CPU branches: many of them test ``is_cuda()``,
       not the tensors' device. Not the empty string: ``sglang.test.test_utils`` reads the first
       character of that variable as a digit at import time.
    3. ``sglang.test.test_utils.maybe_stub_sgl_kernel()``: SGLang's own stub for ``sgl_kernel``
       when the real one cannot load (no GPU driver).
    4. ``sglang.test.layer_ut_utils.init_single_process_dist(port)``: gloo world of size 1, the
       model-parallel groups, and a published runtime context (``ServerArgs(model_path="dummy")``),
       which also publishes ``get_spec()`` (the EAGLE-3 draft reads
       ``speculative_draft_window_size`` from it: ``None``). ``port`` (default: a free one, so probes
       can run side by side) is written to ``MASTER_PORT`` first: SGLang only sets it by default.
    """
    global _READY
    if _READY:
        return
    if os.environ.get("SGLANG_USE_CPU_ENGINE") != "1" and any(m == "sglang" or m.startswith("sglang.")
                                                               for m in sys.modules):
        raise RuntimeError("sglang_cpu.setup() must run before anything imports sglang "
                           "(SGLANG_USE_CPU_ENGINE is read at import time)")
    os.environ["SGLANG_USE_CPU_ENGINE"] = "1"
    if hide_gpu:
        os.environ["CUDA_VISIBLE_DEVICES"] = HIDDEN_GPU_INDEX
    from sglang.test.test_utils import maybe_stub_sgl_kernel

    maybe_stub_sgl_kernel()
    from sglang.test.layer_ut_utils import init_single_process_dist

    port = port if port is not None else _free_port()
    os.environ["MASTER_PORT"] = str(port)
    init_single_process_dist(port)
    import torch

    if hide_gpu and torch.cuda.is_available():  # CUDA was initialised earlier: SGLang would take GPU branches
        raise RuntimeError("CUDA is visible to torch; call sglang_cpu.setup() before torch touches CUDA")
    _READY = True


def publish_spec(**fields) -> None:
    """Override published config leaves, e.g. ``speculative_draft_model_path=DIR``.

    Uses SGLang's ``RuntimeContext.override`` (post-publish overrides of resolved leaves), so
    ``get_spec().speculative_draft_model_path`` answers ``DIR`` afterwards; the plugin's setter hook
    then reads the draft's ``config.json`` from there, as in a real launch.
    """
    from sglang.srt.runtime_context import get_context

    get_context().override("sglang_cpu.publish_spec", **fields)


def read_config(model_dir: str):
    """The checkpoint's config as SGLang reads it (``utils.hf_transformers.config.get_config``)."""
    from sglang.srt.utils.hf_transformers.config import get_config

    return get_config(str(model_dir), trust_remote_code=False)


def _class_for(table: dict, hf_config):
    import importlib

    arch = (getattr(hf_config, "architectures", None) or [None])[0]
    if arch not in table:
        raise ValueError(f"architecture {arch!r} is not one of {sorted(table)}")
    module, name = table[arch]
    return getattr(importlib.import_module(module), name)


def _build(cls, hf_config):
    """Construct ``cls`` in fp32 on the CPU the way ``model_loader.loader._initialize_model`` does."""
    import torch
    from sglang.srt.layers.moe.utils import resolve_shared_experts_config
    from sglang.srt.model_loader.utils import set_default_torch_dtype
    from sglang.srt.runtime_context import get_model

    shared = resolve_shared_experts_config(cls, hf_config, None)
    with set_default_torch_dtype(torch.float32), torch.device("cpu"), \
            get_model().override(shared_experts=shared):
        model = cls(config=hf_config, quant_config=None)
    model.shared_experts_config = shared
    return model


def _fill_nan(model) -> int:
    """Every floating parameter := NaN (``load_weights`` skips names it does not know, silently)."""
    import torch

    n = 0
    with torch.no_grad():
        for p in model.parameters():
            n += 1
            if p.is_floating_point():
                p.fill_(float("nan"))
    return n


def _nan_params(model, skip=()) -> list[str]:
    import torch

    return [name for name, p in model.named_parameters()
            if name not in skip and p.is_floating_point() and bool(torch.isnan(p).any())]


def _derived(model) -> dict:
    """Tensors that post-load processing derives and stores as plain attributes (MLA ``w_kc``/``w_vc``)."""
    import torch

    found = {}
    for name, module in model.named_modules():
        for attr in ("w_kc", "w_vc"):
            t = module.__dict__.get(attr)
            if isinstance(t, torch.Tensor):
                found[f"{name}.{attr}"] = t
    return found


def _summarise(derived: dict) -> dict:
    """``{"w_kc": {"count": 8, "shapes": [[4, 32, 64]]}, ...}`` from per-module names."""
    out: dict = {}
    for name, t in derived.items():
        entry = out.setdefault(name.rsplit(".", 1)[1], {"count": 0, "shapes": []})
        entry["count"] += 1
        if list(t.shape) not in entry["shapes"]:
            entry["shapes"].append(list(t.shape))
    return out


def _load(model, model_dir: str) -> None:
    """SGLang's loader sequence over ``model.safetensors``: load_weights, then quant post-processing."""
    import torch
    from safetensors.torch import load_file
    from sglang.srt.model_loader.loader import DefaultModelLoader

    state = load_file(os.path.join(str(model_dir), "model.safetensors"))
    DefaultModelLoader.load_weights_and_postprocess(model, list(state.items()), torch.device("cpu"))
    model.eval()


def _report(model, n_params: int, skip=()) -> dict:
    import torch
    from sglang.srt.utils import use_intel_amx_backend

    derived = _derived(model)
    return {
        "params": n_params,
        "nan_left": _nan_params(model, skip),
        "derived": _summarise(derived),
        "derived_nan": sorted(k for k, v in derived.items() if bool(torch.isnan(v).any())),
        "amx_modules": sum(1 for m in model.modules() if use_intel_amx_backend(m)),
        "shared_experts_fusion_disabled": model.shared_experts_config.fusion_disabled,
    }


def load_target(target_dir: str):
    """Build SGLang's class for ``target_dir`` (one of :data:`TARGETS`), NaN-fill, load; ``(model, report)``.

    report: ``params`` (number of parameters), ``nan_left`` (parameters still holding NaN after
    loading: the checkpoint missed them), ``derived`` / ``derived_nan`` (MLA ``w_kc``/``w_vc``,
    derived from ``kv_b_proj`` by DeepSeek's ``post_load_weights`` inside ``load_weights``; NaN there
    means the derivation ran before the weights arrived), ``amx_modules`` (modules on the Intel AMX
    packed path: 0 without the ``sgl_kernel`` CPU build), ``shared_experts_fusion_disabled``.
    """
    setup()
    cfg = read_config(target_dir)
    model = _build(_class_for(TARGETS, cfg), cfg)
    n = _fill_nan(model)
    _load(model, target_dir)
    return model, _report(model, n)


def load_draft(draft_dir: str, target_model):
    """Build SGLang's ``LlamaForCausalLMEagle3``, NaN-fill, load, then share the target's embedding.

    The embedding step mirrors ``EagleDraftWorker.init_lm_head`` (``eagle_worker_v2.py``):
    ``pp_draft_embedding.resolve_target_embed_and_head(target, draft_model=draft)`` gives the
    target's ``(embed, head)``; a draft with ``load_lm_head_from_target`` (``draft_vocab_size: null``)
    gets both through ``set_embed_and_head``, otherwise ``set_embed(embed)`` (which keeps the draft's
    own embedding when ``target_hidden_size != hidden_size``).

    report: as :func:`load_target`, with the draft's ``model.embed_tokens.weight`` left out of
    ``nan_left`` and reported as ``embed_nan_before_share`` / ``embed_nan_after_share``;
    ``embed_shared`` (the draft's embedding IS the target's tensor), ``hot_token_id`` (present:
    ``d2t + arange``), ``draft_vocab_size``. ``target_model`` None: no sharing (a checkpoint that
    holds its own ``embed_tokens.weight``); the report then stops at ``nan_left_after_share``.
    """
    import torch
    from sglang.srt.speculative.pp_draft_embedding import resolve_target_embed_and_head

    setup()
    cfg = read_config(draft_dir)
    model = _build(_class_for(DRAFTS, cfg), cfg)
    n = _fill_nan(model)
    _load(model, draft_dir)
    embed_name = "model.embed_tokens.weight"
    report = _report(model, n, skip=(embed_name,))
    report["embed_nan_before_share"] = bool(torch.isnan(model.model.embed_tokens.weight).any())
    if target_model is None:  # a draft checkpoint with its own embedding: nothing to share
        report["nan_left_after_share"] = _nan_params(model)
        return model, report
    embed, head = resolve_target_embed_and_head(target_model, draft_model=model)
    if getattr(model, "load_lm_head_from_target", False):
        model.set_embed_and_head(embed, head)
    else:
        model.set_embed(embed)
    report["embed_shared"] = model.model.embed_tokens.weight is embed
    report["embed_nan_after_share"] = bool(torch.isnan(model.model.embed_tokens.weight).any())
    report["nan_left_after_share"] = _nan_params(model)
    report["hot_token_id"] = model.hot_token_id is not None
    report["draft_vocab_size"] = getattr(cfg, "draft_vocab_size", None)
    return model, report


class NullKVPool:
    """Stand-in for ``token_to_kv_pool``: accepts KV writes and keeps only their shapes.

    Why it exists: DeepSeek's MHA prefill path writes the MLA latent cache
    (``[T, 1, kv_lora_rank + qk_rope_head_dim]``) through ``get_token_to_kv_pool().set_kv_buffer``
    before attending; nothing reads it back within one EXTEND forward over one sequence (only the
    absorbed MLA path of later decode/verify steps would). ``writes`` lists
    ``(layer_id, shape)`` so a test can see the write happened.
    """

    def __init__(self):
        self.writes: list[tuple[int, tuple]] = []

    def set_kv_buffer(self, layer, loc, cache_k, cache_v, *args, **kwargs):
        self.writes.append((int(layer.layer_id), tuple(cache_k.shape)))


class CausalSDPABackend:
    """The narrow attention backend: causal ``scaled_dot_product_attention`` over ONE sequence.

    It is installed with ``set_forward_context(ForwardContext(attn_backend=...))`` and receives
    what ``RadixAttention.forward`` hands ``get_attn_backend().forward``. Only what SGLang's
    forward reads exists here, so anything else fails loudly with AttributeError:

    * ``forward(q, k, v, layer, forward_batch, save_kv_cache=True, **kw)``: q ``[T, Hq*Dqk]`` or
      ``[T, Hq, Dqk]``, k ``[T, Hk, Dqk]``, v ``[T, Hv, Dv]``; heads and sizes come from the
      ``RadixAttention`` layer (``tp_q_head_num``, ``tp_k_head_num``, ``tp_v_head_num``,
      ``qk_head_dim``, ``v_head_dim``, ``scaling``); GQA through ``enable_gqa``. Returns
      ``[T, Hq*Dv]``. Positions are 0..T-1 of a single request, no cached prefix; the KV cache is not
      written (nothing reads it in one EXTEND forward). Keyword arguments (``k_rope``, ``cos_sin``...
      of the absorbed MLA path) are refused: this backend only serves the MHA-style path.
    * ``prefill_attention_backend_str`` / ``decode_attention_backend_str``: DeepSeek's
      ``dispatch_attn_forward_method`` reads them (a real runner stamps its resolved backend
      names there). ``"intel_amx"`` is what a CPU server stamps; DeepSeek's handler registry falls
      back to the ``"triton"`` handler for it, which chooses ``AttnForwardMethod.MHA`` for EXTEND
      without prefix.
    * ``token_to_kv_pool``: a :class:`NullKVPool` for the MLA latent-cache write (see there).

    The ``hasattr`` probes DeepSeek's MHA path makes (``prepare_prefill_qkv``, ``full_attn_backend``,
    ``prefill_backend``) answer False here, which selects its plain (non-FP8, non-hybrid) path.
    """

    prefill_attention_backend_str = CPU_BACKEND_NAME
    decode_attention_backend_str = CPU_BACKEND_NAME

    def __init__(self):
        self.token_to_kv_pool = NullKVPool()
        self.calls = 0

    def forward(self, q, k, v, layer, forward_batch, save_kv_cache=True, **kwargs):
        import torch.nn.functional as F

        if kwargs:
            raise NotImplementedError(f"CausalSDPABackend serves the MHA-style path only; got {sorted(kwargs)}")
        if not forward_batch.forward_mode.is_extend():
            raise NotImplementedError(f"CausalSDPABackend serves EXTEND only, not {forward_batch.forward_mode}")
        self.calls += 1
        t = q.shape[0]
        q = q.reshape(t, layer.tp_q_head_num, layer.qk_head_dim).transpose(0, 1)
        k = k.reshape(t, layer.tp_k_head_num, layer.qk_head_dim).transpose(0, 1)
        v = v.reshape(t, layer.tp_v_head_num, layer.v_head_dim).transpose(0, 1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=layer.scaling,
                                             enable_gqa=layer.tp_q_head_num != layer.tp_k_head_num)
        return out.transpose(0, 1).reshape(t, layer.tp_q_head_num * layer.v_head_dim)


def extend_batch(num_tokens: int, hidden_states=None):
    """A ``ForwardBatch`` made with ``object.__new__`` holding only what the forward reads.

    ``forward_mode = EXTEND``; ``extend_prefix_lens_cpu = [0]`` (DeepSeek's dispatch: no cached
    prefix, so the MHA path); ``out_cache_loc = arange(T)`` (``KVWriteLoc.for_batch`` for the MLA
    latent write); ``spec_info.hidden_states`` for the EAGLE-3 draft (its forward reads only that
    field of the spec info). Every other field keeps the dataclass default.
    """
    import torch
    from sglang.srt.model_executor.forward_batch_info import ForwardBatch, ForwardMode

    fb = object.__new__(ForwardBatch)
    fb.forward_mode = ForwardMode.EXTEND
    fb.extend_prefix_lens_cpu = [0]
    fb.out_cache_loc = torch.arange(num_tokens, dtype=torch.int64)
    if hidden_states is not None:
        fb.spec_info = SimpleNamespace(hidden_states=hidden_states)
    return fb


def run_inner(model, input_ids, forward_batch, backend=None):
    """``model.model(input_ids, positions=arange(T), forward_batch)`` under the stand-in backend."""
    import torch
    from sglang.srt.model_executor.forward_context import ForwardContext, forward_context

    backend = backend or CausalSDPABackend()
    positions = torch.arange(input_ids.shape[0], dtype=torch.int64)
    with torch.no_grad(), forward_context(ForwardContext(attn_backend=backend)):
        return model.model(input_ids, positions, forward_batch)


def _cat_aux(aux):
    import torch

    if aux is None:
        return None
    if isinstance(aux, torch.Tensor):  # DeepSeek packs captures into one [T, k*hidden] buffer
        return aux
    aux = list(aux)
    return torch.cat(aux, dim=-1) if aux else None


def _flagged(inner) -> Optional[list[int]]:
    """Layers flagged ``_is_layer_to_capture`` (Qwen2/Qwen3-MoE inner setters); None if none ever was."""
    layers = list(getattr(inner, "layers", []) or [])
    if not any(hasattr(layer, "_is_layer_to_capture") for layer in layers):
        return None
    return [i for i, layer in enumerate(layers) if getattr(layer, "_is_layer_to_capture", False)]


def target_forward(model, input_ids, capture_ids, *, capture: bool = True) -> dict:
    """One EXTEND forward of SGLang's target over ``input_ids`` (one sequence, positions 0..T-1).

    1. ``model.set_eagle3_layers_to_capture(capture_ids)`` (skipped with ``capture=False``): the
       real method, wrapped by the plugin's hook when plugins were loaded; ``None`` means what it
       means to SGLang (the family default, or the plugin's resolution).
    2. ``model.model(input_ids, positions, forward_batch)`` under :class:`CausalSDPABackend`.
       For every family in :data:`TARGETS` the inner model applies the final RMSNorm itself
       (``residual_batch.final_norm`` / ``self.norm``), so ``hidden`` is the NORMED last hidden
       state, and it returns ``(hidden, aux)`` once anything was captured.
    3. ``logits = hidden @ model.lm_head.weight.T`` for every position: what SGLang's
       ``LogitsProcessor`` computes from the same normed hidden (it keeps only the last position of
       an extend and applies no scaling or soft-capping for these configs).

    Returns ``hidden`` [T, H], ``aux`` [T, k*H] (captures concatenated in layer order) or None,
    ``logits`` [T, vocab], ``layers_to_capture`` (as SGLang set it), ``flagged_layers`` (indices of
    the layers carrying ``_is_layer_to_capture``, what Qwen2/Qwen3-MoE's forward reads instead of
    the list; None for families that keep only the list), ``backend`` (the stand-in, for
    ``calls`` / ``token_to_kv_pool.writes``).
    """
    if capture:
        model.set_eagle3_layers_to_capture(capture_ids)
    backend = CausalSDPABackend()
    out = run_inner(model, input_ids, extend_batch(input_ids.shape[0]), backend)
    hidden, aux = out if isinstance(out, tuple) else (out, None)
    return {
        "hidden": hidden,
        "aux": _cat_aux(aux),
        "logits": hidden @ model.lm_head.weight.T,
        "layers_to_capture": list(getattr(model.model, "layers_to_capture", []) or []),
        "flagged_layers": _flagged(model.model),
        "backend": backend,
    }


def draft_forward(draft, input_ids, aux) -> dict:
    """SGLang's EAGLE-3 draft ``model.model`` over ``input_ids`` with ``spec_info.hidden_states = aux``.

    Causal attention over the T positions 0..T-1 (one sequence). The caller aligns inputs the
    EAGLE-3 way (row t: the token at t+1 with the target's aux state at t), this function does not
    shift. ``fc`` runs inside the draft when ``aux`` is wider than the embedding.

    Returns ``logits`` [T, draft_vocab] (``hidden @ draft.lm_head.weight.T`` on the normed hidden the
    draft returns), ``top1_draft_ids``, ``top1_target_ids`` (``hot_token_id[top1]`` when the draft
    has a reduced vocabulary, else the same ids), ``hidden`` (normed) and ``aux_out`` (the draft's
    own pre-norm output, what the next draft step gets).
    """
    out = run_inner(draft, input_ids, extend_batch(input_ids.shape[0], hidden_states=aux))
    hidden, aux_out = out
    logits = hidden @ draft.lm_head.weight.T
    top1 = logits.argmax(dim=-1)
    hot = getattr(draft, "hot_token_id", None)
    return {
        "logits": logits,
        "top1_draft_ids": top1,
        "top1_target_ids": hot.to(top1.device)[top1] if hot is not None else top1,
        "hidden": hidden,
        "aux_out": aux_out[0] if isinstance(aux_out, (list, tuple)) else aux_out,
    }
