"""Which fc spellings SGLang's own Kimi-K2.5 MLA EAGLE-3 head loads (test_mla_head_sglang.py).

Run in a fresh interpreter: ``python test/mla_fc_probe.py DIR``, ``DIR/config.json`` a tiny
``Eagle3DeepseekV2ForCausalLM`` config. Builds SGLang 0.5.23's class on the CPU
(test/sglang_cpu.py), and for each spelling of the fc tensor fills every parameter with NaN, hands
``load_weights`` that one tensor of ones, and reports whether ``model.fc.weight`` was loaded.
Prints one JSON line: ``{"fc.weight": true, "model.fc.weight": false}`` (true: loaded).
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
    print(json.dumps(loaded))


if __name__ == "__main__":
    main(sys.argv[1])
