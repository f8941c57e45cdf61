"""Which checkpoint names SGLang's own EAGLE-3 heads load, and which they skip (test_mla_head_sglang.py).

Run in a fresh interpreter: ``python test/mla_fc_probe.py DIR``, ``DIR/config.json`` a tiny
``Eagle3DeepseekV2ForCausalLM`` config (the Kimi-K2.5 MLA head; ``fc_norm`` on, so that the per-state
norms exist). Builds SGLang 0.5.23's class on the CPU (test/sglang_cpu.py), and
``LlamaForCausalLMEagle3`` from the same config, and for every parameter of each class:

* derives the checkpoint name(s) a draft stores it under: the parameter name without the ``model.``
  SGLang adds (``model.midlayer.X`` -> ``layers.0.X``), plus one name per shard of a fused parameter
  (``q_a_proj`` / ``kv_a_proj_with_mqa`` of the MLA ``fused_qkv_a_proj_with_mqa``, ``q_proj`` /
  ``k_proj`` / ``v_proj`` of Llama's ``qkv_proj``, ``gate_proj`` / ``up_proj`` of ``gate_up_proj``);
* for each spelling of that name (as is, with ``model.`` in front, and for the decoder layer the legacy
  ``midlayer.`` with and without ``model.``) fills every floating parameter with NaN and every integer
  one with -5, hands ``load_weights`` that one tensor of ones (the MLA q_a / kv_a shards each with its
  partner stored plainly: the class fuses them only once both arrived), and records whether the
  parameter's rows for that name all read 1 afterwards (true: loaded).

Then the same for a quantised fc: each class built with an fp8 block-quantised config (``fc.weight``
in float8 plus ``fc.weight_scale_inv``) and with an AWQ config (``fc.qweight``, ``fc.qzeros``,
``fc.scales``), every fc tensor stored together under one spelling. Both configs leave ``self_attn``
unquantised: the MLA class's ``post_load_weights`` reads ``kv_b_proj.weight`` as a float matrix and
raises on a quantised one. And ``d2t`` / ``model.d2t``: loaded means ``hot_token_id`` is set.

Then the values an fp8 fc ends up with (:func:`probe_fp8_values`): each class built with no quantisation
config, with the block fp8 config above, with a per-tensor fp8 one (no ``weight_block_size``; the scale is
``fc.weight_scale`` [1]) and with ``Fp8Config()`` (what ``--quantization fp8`` gives a draft whose
config.json holds no ``quantization_config``: SGLang 0.5.23 ``get_quant_config`` finds no file for fp8 and
quantises online); ``fc.weight`` is loaded as float8_e4m3fn holding 2.0 and its scale as 0.5, so the
weight the checkpoint means is 1.0 everywhere.

Prints one JSON line: ``{"loaded": {"<class>[ fp8|awq]": {name: bool}}, "a_proj_pairs": {"<names stored>":
bool} (:func:`probe_a_proj_pairs`), "warned": {"<class>": [names
logged as "skipping unexpected weight"]}, "params": {"<class>": [parameter names]}, "fp8_values":
{"<class> <config> <stored>": {...}}}`` (:func:`probe_fp8_values` for the last).
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sglang_cpu  # noqa: E402

MLA = ("Eagle3DeepseekV2ForCausalLM", "sglang.srt.models.kimi_k25_eagle3")
LLAMA = ("LlamaForCausalLMEagle3", "sglang.srt.models.llama_eagle3")
#: quantisation configs (as a checkpoint's quantization_config) the fc is built with on the CPU
QUANT = {
    "fp8": {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [32, 32],
            "ignored_layers": ["self_attn"]},
    "awq": {"quant_method": "awq", "bits": 4, "group_size": 32, "zero_point": True,
            "modules_to_not_convert": ["self_attn"]},
}
_INT_SENTINEL = -5
#: the fp8 fc configs of :func:`probe_fp8_values`: name -> quantization_config (None: none; "online":
#: ``Fp8Config()``, as ``--quantization fp8`` builds it without a checkpoint config)
FP8_CONFIGS = {
    "none": None,
    "fp8": QUANT["fp8"],
    "fp8_tensor": {"quant_method": "fp8", "activation_scheme": "dynamic", "ignored_layers": ["self_attn"]},
    "online": "online",
}
#: stored fp8 value and scale: the weight the checkpoint means is their product, 1.0
FP8_STORED, FP8_SCALE = 2.0, 0.5


def checkpoint_name(param: str) -> str:
    """``model.midlayer.mlp.down_proj.weight`` -> ``layers.0.mlp.down_proj.weight``; ``lm_head.weight`` kept."""
    name = param[len("model."):] if param.startswith("model.") else param
    return "layers.0." + name[len("midlayer."):] if name.startswith("midlayer.") else name


def units(model, cfg) -> list[tuple[str, str, int, int, str | None]]:
    """``(checkpoint name, parameter, first row, end row, partner name or None)`` for every parameter:
    the parameter under its own (fused) name, then one entry per shard a checkpoint stores separately."""
    out = []
    for param, p in model.named_parameters():
        name = checkpoint_name(param)
        rows = p.shape[0]
        out.append((name, param, 0, rows, None))
        if ".fused_qkv_a_proj_with_mqa." in name:   # MLA: q_a rows first, then kv_a (+ rope)
            q = cfg.q_lora_rank
            q_name = name.replace("fused_qkv_a_proj_with_mqa", "q_a_proj")
            kv_name = name.replace("fused_qkv_a_proj_with_mqa", "kv_a_proj_with_mqa")
            out += [(q_name, param, 0, q, kv_name), (kv_name, param, q, rows, q_name)]
        elif ".qkv_proj." in name:   # Llama: q, k, v rows
            head_dim = cfg.hidden_size // cfg.num_attention_heads
            q, kv = cfg.num_attention_heads * head_dim, cfg.num_key_value_heads * head_dim
            for shard, lo, hi in (("q_proj", 0, q), ("k_proj", q, q + kv), ("v_proj", q + kv, q + 2 * kv)):
                out.append((name.replace("qkv_proj", shard), param, lo, hi, None))
        elif ".gate_up_proj." in name:
            half = rows // 2
            out += [(name.replace("gate_up_proj", "gate_proj"), param, 0, half, None),
                    (name.replace("gate_up_proj", "up_proj"), param, half, rows, None)]
    return out


def spellings(name: str) -> list[str]:
    """The names a checkpoint may store ``name`` under: as is, ``model.``-prefixed, and for the decoder
    layer the legacy ``midlayer.`` spelling, plain and prefixed."""
    out = [name, "model." + name]
    if name.startswith("layers.0."):
        legacy = "midlayer." + name[len("layers.0."):]
        out += [legacy, "model." + legacy]
    return out


def _fill(model) -> None:
    import torch

    with torch.no_grad():
        for p in model.parameters():
            p.fill_(float("nan") if p.is_floating_point() else _INT_SENTINEL)


def _ones(param):
    import torch

    return torch.ones(tuple(param.shape), dtype=torch.float32 if param.is_floating_point() else param.dtype)


def _all_ones(t) -> bool:
    return bool((t.float() == 1).all())


def probe_class(model, cfg) -> dict[str, bool]:
    params = dict(model.named_parameters())
    loaded = {}
    for name, param, lo, hi, partner in units(model, cfg):
        p = params[param]
        for stored in spellings(name):
            _fill(model)
            shard = _ones(p)[lo:hi]
            weights = [(stored, shard)]
            if partner is not None:   # its partner stored plainly, with the partner's rows
                weights.append((partner, _ones(p)[hi:] if lo == 0 else _ones(p)[:lo]))
            model.load_weights(weights)
            loaded[stored] = _all_ones(p[lo:hi])
    import torch

    for stored in ("d2t", "model.d2t"):
        model.hot_token_id = None
        model.load_weights([(stored, torch.zeros(int(cfg.draft_vocab_size), dtype=torch.int64))])
        loaded[stored] = model.hot_token_id is not None
    return loaded


def probe_a_proj_pairs(model, cfg) -> dict[str, bool]:
    """The MLA head's ``fused_qkv_a_proj_with_mqa`` from its two shards stored in one checkpoint under
    the names of each case (``;``-joined): whether its rows all read 1 afterwards (loaded). A shard
    whose partner is missing, and a pre-fused name, leave it unloaded; the two spellings of the decoder
    layer (``layers.0.`` and ``midlayer.``) pair with each other."""
    params = dict(model.named_parameters())
    fused = next(n for n in params if ".fused_qkv_a_proj_with_mqa." in n)
    p, q = params[fused], cfg.q_lora_rank
    attn = "self_attn.{}.weight"
    cases = {
        "q_a alone": [("layers.0." + attn.format("q_a_proj"), slice(0, q))],
        "kv_a alone": [("layers.0." + attn.format("kv_a_proj_with_mqa"), slice(q, None))],
        "both": [("layers.0." + attn.format("q_a_proj"), slice(0, q)),
                 ("layers.0." + attn.format("kv_a_proj_with_mqa"), slice(q, None))],
        "both, layers.0. and midlayer.": [("layers.0." + attn.format("q_a_proj"), slice(0, q)),
                                          ("midlayer." + attn.format("kv_a_proj_with_mqa"), slice(q, None))],
        "pre-fused": [("layers.0." + attn.format("fused_qkv_a_proj_with_mqa"), slice(None))],
    }
    out = {}
    for label, stored in cases.items():
        _fill(model)
        model.load_weights([(name, _ones(p)[rows]) for name, rows in stored])
        out["; ".join(name for name, _ in stored)] = _all_ones(p)
    return out


def probe_quantised_fc(model, tensors: dict) -> tuple[dict[str, bool], dict[str, bool]]:
    """Load the quantised fc ``tensors`` (checkpoint name -> tensor) all under one spelling, plain then
    ``model.``-prefixed. Returns ``(per stored name: it landed in a parameter of this class that reads
    1 after, per spelling "fc.*" / "model.fc.*": every fc parameter of the class reads 1)``."""
    params = {checkpoint_name(n): p for n, p in model.named_parameters()}
    fc = [p for n, p in model.named_parameters() if n.startswith("model.fc.")]
    loaded, whole = {}, {}
    for prefix in ("", "model."):
        _fill(model)
        model.load_weights([(prefix + name, t) for name, t in tensors.items()])
        loaded.update({prefix + name: name in params and _all_ones(params[name]) for name in tensors})
        whole[prefix + "fc.*"] = all(_all_ones(p) for p in fc)
    return loaded, whole


def _fc_effective(model, block: int | None) -> dict:
    """What the class holds for fc after loading: the weight parameter's dtype, whether a scale parameter
    exists, and the effective weight (weight as float times the scale, expanded over ``block`` x ``block``
    tiles, or broadcast when ``block`` is None) as its one value, or None when the values differ (NaN:
    a parameter left unloaded)."""
    import torch

    fc = dict(model.model.fc.named_parameters())
    weight = fc["weight"].detach().float()
    scale = fc.get("weight_scale_inv", fc.get("weight_scale"))
    effective = weight
    if scale is not None:
        s = scale.detach().float()
        if block is not None and s.dim() == 2:
            s = s.repeat_interleave(block, 0).repeat_interleave(block, 1)[:weight.shape[0], :weight.shape[1]]
        effective = weight * s
    values = torch.unique(effective)
    return {"weight_dtype": str(fc["weight"].dtype).replace("torch.", ""), "scale_param": scale is not None,
            "effective": None if values.numel() != 1 or torch.isnan(values).any() else float(values[0])}


def probe_fp8_values(configs: dict) -> dict[str, dict]:
    """For each class and each :data:`FP8_CONFIGS` entry: load ``fc.weight`` as float8_e4m3fn (every value
    :data:`FP8_STORED`) with its scale (:data:`FP8_SCALE`: ``fc.weight_scale_inv`` [out/32, in/32] for the
    block config, ``fc.weight_scale`` [1] for the per-tensor one, each of the two for the others), and,
    where the class builds fc as fp8, ``fc.weight`` as float32 ones without a scale. Each load starts from
    NaN parameters.

    Returns:
        ``"<class> <config> <stored>"`` (stored: ``fp8+weight_scale_inv``, ``fp8+weight_scale``,
        ``f32``) -> :func:`_fc_effective`'s dict.
    """
    import torch

    out = {}
    for arch in (MLA, LLAMA):
        cfg = configs[arch[0]]
        for name, quant in FP8_CONFIGS.items():
            model = _build(arch, cfg, quant)
            rows, cols = model.model.fc.weight.shape
            block = QUANT["fp8"]["weight_block_size"][0]
            scales = {"weight_scale_inv": torch.full((-(-rows // block), -(-cols // block)), FP8_SCALE),
                      "weight_scale": torch.full((1,), FP8_SCALE)}
            kept = {"fp8": ["weight_scale_inv"], "fp8_tensor": ["weight_scale"]}.get(name, list(scales))
            stored = {f"fp8+{leaf}": [("fc.weight", torch.full((rows, cols), FP8_STORED).to(torch.float8_e4m3fn)),
                                      (f"fc.{leaf}", scales[leaf])] for leaf in kept}
            if model.model.fc.weight.dtype == torch.float8_e4m3fn:
                stored["f32"] = [("fc.weight", torch.ones(rows, cols))]
            for label, weights in stored.items():
                _fill(model)
                model.load_weights(weights)
                out[f"{arch[0]} {name} {label}"] = _fc_effective(model, block if name == "fp8" else None)
    return out


def _build(arch_module, cfg, quant=None):
    import importlib

    import torch
    from sglang.srt.layers.quantization import get_quantization_config
    from sglang.srt.layers.quantization.fp8 import Fp8Config
    from sglang.srt.model_loader.utils import set_default_torch_dtype

    cls = getattr(importlib.import_module(arch_module[1]), arch_module[0])
    if quant is None:
        return sglang_cpu._build(cls, cfg)
    quant_config = Fp8Config() if quant == "online" else get_quantization_config(quant["quant_method"]).from_config(quant)
    with set_default_torch_dtype(torch.float32), torch.device("cpu"):
        return cls(config=cfg, quant_config=quant_config)


class _Skipped(logging.Handler):
    def __init__(self):
        super().__init__()
        self.names = set()

    def emit(self, record):
        if "skipping unexpected weight" in str(record.msg) and record.args:
            self.names.add(str(record.args[0]))


def main(model_dir: str) -> None:
    sglang_cpu.setup()
    configs = {MLA[0]: sglang_cpu.read_config(model_dir), LLAMA[0]: _llama_config(model_dir)}
    skipped = _Skipped()
    logging.getLogger(MLA[1]).addHandler(skipped)
    result = {"loaded": {}, "fc_loaded": {}, "warned": {}, "params": {}}
    for arch in (MLA, LLAMA):
        cfg = configs[arch[0]]
        model = _build(arch, cfg)
        result["params"][arch[0]] = [n for n, _ in model.named_parameters()]
        result["loaded"][arch[0]] = probe_class(model, cfg)
        if arch is MLA:
            result["a_proj_pairs"] = probe_a_proj_pairs(model, cfg)
    for method, quant in QUANT.items():
        # the names and shapes a quantised fc carries: the quantisable (MLA) class's fc parameters
        mla = _build(MLA, configs[MLA[0]], quant)
        tensors = {checkpoint_name(n): _ones(p) for n, p in mla.named_parameters() if n.startswith("model.fc.")}
        for arch in (MLA, LLAMA):
            model = mla if arch is MLA else _build(arch, configs[arch[0]], quant)
            key = f"{arch[0]} {method}"
            result["loaded"][key], result["fc_loaded"][key] = probe_quantised_fc(model, tensors)
    result["fp8_values"] = probe_fp8_values(configs)
    result["warned"][MLA[0]] = sorted(skipped.names)
    print(json.dumps(result))


def _llama_config(model_dir: str):
    """The config of ``model_dir`` read as a LlamaForCausalLMEagle3's (llama model_type), through a
    temporary folder removed once read (one per call had been left in the temp folder)."""
    import tempfile

    cfg = json.loads((Path(model_dir) / "config.json").read_text())
    with tempfile.TemporaryDirectory(prefix="llama-head-") as folder:
        (Path(folder) / "config.json").write_text(
            json.dumps({**cfg, "architectures": [LLAMA[0]], "model_type": "llama"}))
        return sglang_cpu.read_config(folder)


if __name__ == "__main__":
    main(sys.argv[1])
