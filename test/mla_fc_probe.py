"""Which fc spellings SGLang's own Kimi-K2.5 MLA EAGLE-3 head loads (test_mla_head_sglang.py).

Run in a fresh interpreter: ``python test/mla_fc_probe.py DIR``, ``DIR/config.json`` a tiny
``Eagle3DeepseekV2ForCausalLM`` config. Builds SGLang 0.5.23's class on the CPU
(test/sglang_cpu.py), and for each spelling of the fc tensor fills every parameter with NaN, hands
``load_weights`` that one tensor of ones, and reports whether ``model.fc.weight`` was loaded.
Then the same for ``lm_head`` in it and in ``LlamaForCausalLMEagle3``. Prints one JSON line:
``{"fc.weight": true, "model.fc.weight": false, "<class> lm_head.weight": true, ...}`` (true: loaded).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sglang_cpu  # noqa: E402


def main(model_dir: str) -> None:
    import importlib

    import torch

    sglang_cpu.setup()
    cfg = sglang_cpu.read_config(model_dir)
    cls = getattr(importlib.import_module("sglang.srt.models.kimi_k25_eagle3"), "Eagle3DeepseekV2ForCausalLM")
    model = sglang_cpu._build(cls, cfg)
    loaded = {}
    for name in ("fc.weight", "model.fc.weight"):
        sglang_cpu._fill_nan(model)
        model.load_weights([(name, torch.ones(tuple(model.model.fc.weight.shape)))])
        loaded[name] = not bool(torch.isnan(model.model.fc.weight).any())
    # lm_head in both heads (draft_vocab_size set, embeddings untied: the draft's own)
    for arch, module in (("Eagle3DeepseekV2ForCausalLM", "sglang.srt.models.kimi_k25_eagle3"),
                         ("LlamaForCausalLMEagle3", "sglang.srt.models.llama_eagle3")):
        head = model if arch == "Eagle3DeepseekV2ForCausalLM" else _llama(model_dir)
        for name in ("lm_head.weight", "model.lm_head.weight"):
            sglang_cpu._fill_nan(head)
            head.load_weights([(name, torch.ones(tuple(head.lm_head.weight.shape)))])
            loaded[f"{arch} {name}"] = not bool(torch.isnan(head.lm_head.weight).any())
    print(json.dumps(loaded))


def _llama(model_dir: str):
    """SGLang's LlamaForCausalLMEagle3 built from the same config (its own folder, llama model_type)."""
    import importlib
    import tempfile

    cfg = json.loads((Path(model_dir) / "config.json").read_text())
    folder = Path(tempfile.mkdtemp(prefix="llama-head-"))
    (folder / "config.json").write_text(json.dumps({**cfg, "architectures": ["LlamaForCausalLMEagle3"],
                                                    "model_type": "llama"}))
    cls = getattr(importlib.import_module("sglang.srt.models.llama_eagle3"), "LlamaForCausalLMEagle3")
    return sglang_cpu._build(cls, sglang_cpu.read_config(str(folder)))


if __name__ == "__main__":
    main(sys.argv[1])
