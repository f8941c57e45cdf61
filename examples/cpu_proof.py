"""The CPU proof of ``make demo``: SGLang's own Llama code, with the plugin loaded, captures the states
a tiny pair's EAGLE-3 draft was trained on.

Usage::

    python examples/cpu_proof.py PAIR_DIR        # prints ONE JSON object on stdout

PAIR_DIR is a folder written by ``eagle-cycle make-tiny-pair`` (``target/``, ``draft/``, ``pair.json``,
``eval_prompts.json``). In a fresh interpreter (SGLang's ``HookRegistry`` cannot un-patch) it:

1. prepares SGLang 0.5.23 to build models on the CPU (``test/sglang_cpu.py``: ``setup``), sets
   ``SGLANG_PLUGINS=eagle_cycle`` and calls SGLang's own ``load_plugins()``, so this package's hooks are
   applied exactly as in a server process;
2. publishes the draft path (``speculative_draft_model_path``), as a launch does, and builds SGLang's
   ``LlamaForCausalLM`` from ``PAIR_DIR/target`` with SGLang's loader;
3. calls ``set_eagle3_layers_to_capture`` with the draft's ``eagle_aux_hidden_state_layer_ids`` (what
   SGLang's model runner passes) and runs one EXTEND forward over held-out prompt tokens;
4. compares each captured slice with the pair's own reference residual stream
   (``sglang_eagle_cycle.tiny.load.load_target(...).states(ids)``) at ``pair.json``'s ``positions``,
   and finds, for each slice, the reference position it is closest to.

Output keys: ``aux_layer_ids``, ``positions`` (from pair.json), ``layers_to_capture`` (as SGLang set
them), ``nearest_positions``, ``aux_max_abs_diff_per_slot``, ``aux_max_abs_diff``,
``logits_max_abs_diff`` (SGLang's logits against the reference model's), ``tokens``, ``wiring_lines``
(the plugin's start-up line, as the server would log it), ``nan_left``, ``ok`` and ``timings``.
Exit code 0 when the captured positions are the pair's and every slice matches within 1e-3.
"""

from __future__ import annotations

import io
import json
import logging
import os
import sys
import time
from pathlib import Path

_T0 = time.perf_counter()
# Tiny models: one intra-op thread (a busy 2-core machine spin-waits with more). Before torch loads.
os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "test"))   # sglang_cpu: SGLang models on the CPU

#: Largest |SGLang - reference| accepted for a captured state (fp32; measured differences are ~1e-6).
TOLERANCE = 1e-3
#: Held-out prompts run through the target (16 tokens each).
PROMPTS = 4


def run(pair: Path) -> dict:
    import torch

    import sglang_cpu as sc

    timings: dict = {}
    summary = json.loads((pair / "pair.json").read_text())
    prompts = json.loads((pair / "eval_prompts.json").read_text())["held_out_prompts"]
    draft_cfg = json.loads((pair / "draft" / "config.json").read_text())
    ids = draft_cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
    positions = list(summary["positions"])
    tokens = torch.tensor([t for p in prompts[:PROMPTS] for t in p], dtype=torch.long)

    t = time.perf_counter()
    sc.setup()
    log = io.StringIO()
    handler = logging.StreamHandler(log)
    handler.setFormatter(logging.Formatter("%(message)s"))
    plugin_logger = logging.getLogger("sglang_eagle_cycle")
    plugin_logger.addHandler(handler)
    plugin_logger.setLevel(logging.INFO)
    os.environ["SGLANG_PLUGINS"] = "eagle_cycle"
    from sglang.srt.plugins import load_plugins

    load_plugins()
    sc.publish_spec(speculative_draft_model_path=str(pair / "draft"))
    timings["setup_s"] = round(time.perf_counter() - t, 3)

    t = time.perf_counter()
    model, report = sc.load_target(str(pair / "target"))
    out = sc.target_forward(model, tokens, ids)
    timings["sglang_s"] = round(time.perf_counter() - t, 3)

    from sglang_eagle_cycle.tiny.load import load_target

    t = time.perf_counter()
    ref_model = load_target(pair / "target")
    with torch.no_grad():
        states = [s[0] for s in ref_model.states(tokens[None])]
        ref_logits = ref_model(tokens[None])[0]
    timings["reference_s"] = round(time.perf_counter() - t, 3)

    aux = out["aux"]
    hidden = states[0].shape[-1]
    slices = aux.split(hidden, dim=-1) if aux is not None else []
    nearest, per_slot = [], []
    for i, s in enumerate(slices):
        by_pos = [float((s - st).abs().max()) for st in states]
        nearest.append(min(range(len(by_pos)), key=by_pos.__getitem__))
        per_slot.append(by_pos[positions[i]] if i < len(positions) else None)
    captured = out["layers_to_capture"]
    diff = max((d for d in per_slot if d is not None), default=None)
    ok = (captured == positions and nearest == positions and len(slices) == len(positions)
          and diff is not None and diff <= TOLERANCE and not report["nan_left"])
    timings["total_s"] = round(time.perf_counter() - _T0, 3)
    return {
        "aux_layer_ids": ids, "positions": positions, "layers_to_capture": captured,
        "nearest_positions": nearest, "aux_max_abs_diff_per_slot": per_slot, "aux_max_abs_diff": diff,
        "logits_max_abs_diff": float((out["logits"] - ref_logits).abs().max()),
        "tokens": int(tokens.numel()), "num_layers": len(states) - 1,
        "wiring_lines": [ln for ln in log.getvalue().splitlines() if "aux wiring" in ln],
        "nan_left": report["nan_left"], "tolerance": TOLERANCE, "ok": bool(ok), "timings": timings,
    }


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    # Libraries print to stdout (also from C); keep fd 1 for the one JSON object.
    real_stdout = os.dup(1)
    os.dup2(2, 1)
    try:
        out = run(Path(argv[1]))
    finally:
        sys.stdout.flush()
        os.dup2(real_stdout, 1)
    print(json.dumps(out), flush=True)
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
