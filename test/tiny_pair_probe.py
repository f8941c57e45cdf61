"""The wiring proof on trained tiny pairs, in SGLang's own model code; run in a fresh interpreter.

Usage: python tiny_pair_probe.py MODE PAIRS_JSON        (prints ONE JSON object on stdout)

MODE ``plugin``: ``SGLANG_PLUGINS=eagle_cycle`` and SGLang's own ``load_plugins()`` before any model
is built, so the capture setters are the plugin's wrappers; each pair is also run through the stock
setter the wrapper holds (``__wrapped__``: SGLang's own function), reported as ``stock``. MODE
``stock``: no plugin at all.
PAIRS_JSON: ``{NAME: PAIR_DIR, ...}`` (folders made by make-tiny-pair); the pair named ``llama`` is
also run with ``SGLANG_EAGLE_CYCLE_AUX_CONVENTION=input`` in plugin mode.

Per pair it loads SGLang's target and draft classes from the pair's files (every parameter NaN
first), publishes the draft path as a launch would (the plugin reads the draft's config.json from
there), calls the real ``set_eagle3_layers_to_capture`` with the draft's ids, runs one forward
per sequence, and compares:

- the captured aux states with the trainer's own residual stream (``tiny.load``) at every position;
- SGLang's draft forward on those captures with the trainer's head on the same captures (top-1);
- with ``convention_input`` (plugin mode, Llama): the same after
  ``SGLANG_EAGLE_CYCLE_AUX_CONVENTION=input``.

Eight held-out prompts, each followed by the target's 32 greedy tokens, one forward each.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _maxdiff(a, b) -> float:
    return float((a - b).abs().max())


def _per_position(aux, ref_states, k: int) -> list[dict]:
    """For each captured slice: the reference position it equals, and the diff there."""
    h = ref_states.shape[-1]
    out = []
    for i in range(k):
        piece = aux[:, i * h:(i + 1) * h]
        diffs = [_maxdiff(piece, ref_states[j]) for j in range(ref_states.shape[0])]
        best = min(range(len(diffs)), key=diffs.__getitem__)
        out.append({"nearest_position": best, "diff": diffs[best]})
    return out


def _prove(sc, pair: Path, *, convention_input: bool, prompts_used: int = 8) -> dict:
    import torch

    from sglang_eagle_cycle.tiny import agreement as ag
    from sglang_eagle_cycle.tiny.load import load_head, load_target

    summary = json.loads((pair / "pair.json").read_text())
    prompts = json.loads((pair / "eval_prompts.json").read_text())
    draft_cfg = json.loads((pair / "draft" / "config.json").read_text())
    ids = draft_cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"]

    ours = load_target(pair / "target")
    head = load_head(pair / "draft")
    held = torch.tensor(prompts["held_out_prompts"][:prompts_used])
    P = held.shape[1]
    with torch.no_grad():
        seqs = ag.greedy_generate(ours, held, prompts["gen_tokens"])
        refs = torch.stack(ours.states(seqs))                    # [N + 1, B, T, h]
        greedy = ours(seqs).argmax(-1)                            # [B, T]

    target, t_report = sc.load_target(str(pair / "target"))
    draft, d_report = sc.load_draft(str(pair / "draft"), target)
    sc.publish_spec(speculative_draft_model_path=str(pair / "draft"))

    def run(stock: bool = False) -> dict:
        aux_diff = ref_max = greedy_hits = top1_equal = hits = scored = tokens = 0
        captured = None
        positions = None
        with torch.no_grad():
            for b in range(seqs.shape[0]):
                seq, ref = seqs[b], refs[:, b]
                if stock:  # SGLang's own setter, below the plugin's wrapper
                    _unwrapped_setter(target)(target, list(ids))
                out = sc.target_forward(target, seq, list(ids), capture=not stock)
                aux, positions = out["aux"], out["layers_to_capture"]
                if captured is None:
                    captured = _per_position(aux, ref, len(ids))
                want = torch.cat([ref[p] for p in sorted(positions)], -1)
                aux_diff = max(aux_diff, _maxdiff(aux, want))
                ref_max = max(ref_max, float(want.abs().max()))
                greedy_hits += int((out["logits"].argmax(-1) == greedy[b]).sum())
                d = sc.draft_forward(draft, seq[1:], aux[:-1])
                mine = ag.draft_top1(head, ours.model.embed_tokens, seq[None], aux[None])[0]
                top1_equal += int((d["top1_target_ids"] == mine).sum())
                t = torch.arange(seq.numel() - 1)
                mask = (t + 2 >= P) & (t + 2 < seq.numel())
                hits += int(((d["top1_target_ids"] == greedy[b, 1:]) & mask).sum())
                scored += int(mask.sum())
                tokens += seq.numel()
        return {
            "layers_to_capture": positions,
            "captured": captured,
            "aux_max_abs_diff_at_set_positions": aux_diff,
            "ref_max_abs_at_set_positions": ref_max,
            "greedy_match": greedy_hits / tokens,
            "draft_top1_equal_trainer": top1_equal / (tokens - seqs.shape[0]),
            "sglang_draft_agreement": hits / scored,
            "scored_positions": scored,
            "draft_logits_finite": bool(torch.isfinite(d["logits"]).all()),
        }

    result = {
        "ids": ids, "trained_positions": summary["positions"],
        "target_load": {k: t_report[k] for k in ("params", "nan_left")},
        "draft_load": {k: d_report[k] for k in ("params", "nan_left", "embed_nan_before_share",
                                                  "embed_shared", "embed_nan_after_share",
                                                  "nan_left_after_share", "hot_token_id")},
        "default": run(),
    }
    if _unwrapped_setter(target) is not None:
        result["stock"] = run(stock=True)
    if convention_input:
        os.environ["SGLANG_EAGLE_CYCLE_AUX_CONVENTION"] = "input"
        try:
            result["convention_input"] = run()
        finally:
            del os.environ["SGLANG_EAGLE_CYCLE_AUX_CONVENTION"]
    return result


def _unwrapped_setter(model):
    """The stock ``set_eagle3_layers_to_capture`` under the plugin's wrapper (None: not wrapped)."""
    for cls in type(model).__mro__:
        raw = cls.__dict__.get("set_eagle3_layers_to_capture")
        if raw is not None:
            return getattr(raw, "__wrapped__", None)
    return None


def _wrapped(cls) -> bool:
    raw = cls.__dict__.get("set_eagle3_layers_to_capture")
    return hasattr(raw, "__wrapped__")


def main(argv) -> int:
    mode, pairs = argv[1], json.loads(argv[2])
    t0 = time.perf_counter()
    import sglang_cpu as sc

    if mode == "plugin":
        os.environ["SGLANG_PLUGINS"] = "eagle_cycle"
    sc.setup()
    if mode == "plugin":
        from sglang.srt.plugins import load_plugins

        load_plugins()
    from sglang.srt.models.deepseek_v2 import DeepseekV2ForCausalLM
    from sglang.srt.models.llama import LlamaForCausalLM

    out = {"mode": mode, "wrapped": {"LlamaForCausalLM": _wrapped(LlamaForCausalLM),
                                     "DeepseekV2ForCausalLM": _wrapped(DeepseekV2ForCausalLM)}}
    for name, d in pairs.items():
        out[name] = _prove(sc, Path(d), convention_input=(mode == "plugin" and name == "llama"))
    out["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
