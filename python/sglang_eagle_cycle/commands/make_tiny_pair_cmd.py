"""Make a tiny trained target + EAGLE-3 draft pair that SGLang 0.5.23 loads (CPU, about 2-3 min).

OUT/target is a small causal LM (Llama, or DeepSeek-V3 with MLA and routed experts) trained on
Python standard-library source, with its tokenizer; OUT/draft an EAGLE-3 head
(LlamaForCausalLMEagle3) trained on the target's hidden states at the declared aux layer ids.
OUT/pair.json holds the summary printed by --json.

Examples::

    eagle-cycle make-tiny-pair /tmp/tiny --seed 11 --json
    eagle-cycle make-tiny-pair /tmp/tiny-ds --arch deepseek_v3 --aux-layer-ids 2,4,6
    eagle-cycle wiring /tmp/tiny/target /tmp/tiny/draft

--convention output (default) trains the draft on the outputs of decoder layers i (capture
position i + 1, the plugin's contract); input trains it on position i (the layer's input).
Agreement: the target generates 32 greedy tokens after each held-out prompt, the draft is
teacher-forced with SGLang's shift, and only generated positions are scored. Baselines: aux states
zeroed, the most frequent token, and the same draft fed the positions shifted by -1 and +1.

Deterministic for a seed on one machine and torch build (byte-identical config.json and
model.safetensors). Existing OUT/target, OUT/draft or OUT/pair.json are kept unless --force, and
--force replaces them only where OUT/pair.json is one make-tiny-pair wrote (a tiny pair).
Exit codes: 0 made, 2 unusable input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ..argtypes import int_in, negative_values_are_values
from ..errors import UsageError


def _ids(text: str) -> tuple[int, ...]:
    items = [t.strip() for t in text.replace(" ", ",").split(",")]
    if not items or any(not t.isascii() or not t.lstrip("-").isdigit() for t in items if t) or "" in items:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, e.g. 2,4,6; got {text!r}")
    return tuple(int(t) for t in items)


def add_cli_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out", metavar="OUT", help="folder to write target/, draft/ and pair.json into")
    parser.add_argument("--arch", choices=("llama", "deepseek_v3"), default="llama", help="target architecture")
    parser.add_argument("--seed", type=int_in(0, 2**31 - 1), default=11, help="seed of every random draw (default 11)")
    parser.add_argument("--aux-layer-ids", type=_ids, default=None, metavar="IDS",
                        help="draft eagle_aux_hidden_state_layer_ids, ascending (default 1,3,5); each in 0..6 with "
                             "--convention output, 1..7 with input")
    parser.add_argument("--convention", choices=("output", "input"), default="output",
                        help="what an id means to the draft's training: output of layer i (position i+1) "
                             "or input of layer i (position i)")
    parser.add_argument("--target-steps", type=int_in(1, 100000), default=None,
                        help="target optimiser steps (default: the arch's; fewer for a quick check)")
    parser.add_argument("--draft-steps", type=int_in(1, 100000), default=None,
                        help="draft optimiser steps (default: the arch's)")
    parser.add_argument("--force", action="store_true", help="replace an existing pair in OUT")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    negative_values_are_values(parser)  # `--aux-layer-ids -1,3,5` reaches the range check


def main(args: argparse.Namespace) -> int:
    from ..tiny.pair import DEFAULT_IDS, PairSpec, make_pair

    spec = PairSpec(arch=args.arch, seed=args.seed, aux_layer_ids=args.aux_layer_ids or DEFAULT_IDS,
                    convention=args.convention, target_steps=args.target_steps, draft_steps=args.draft_steps)
    out = Path(args.out)
    if str(args.out).strip() == "":
        raise UsageError("OUT is empty")
    _check_writable(out)
    if args.force:
        _check_replaceable(out)
    log = (lambda msg: print(f"make-tiny-pair: {msg}", file=sys.stderr, flush=True))
    summary = make_pair(out, spec, force=args.force, log=log)
    if args.json:
        from ..logfiles import text_safe

        print(json.dumps(text_safe(summary), sort_keys=True))
    else:
        _print(summary)
    return 0


def _check_writable(out: Path) -> None:
    """Refuse, before the minute of training and not after it, an OUT whose nearest existing folder
    is a file (or a link to nothing) or cannot be written. (Here, not in tiny/pair.py: that file's
    hash keys the cached pairs.)"""
    if out.exists() and not out.is_dir():
        return   # make_pair says "exists and is not a directory"
    base = out.absolute()
    while not base.exists() and not base.is_symlink() and base != base.parent:
        base = base.parent
    if not base.is_dir():
        raise UsageError(f"cannot write {out}: {base} is not a directory")
    if not os.access(base, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write {out}: {base} is not writable")
    # os.access says yes to root wherever the mode bits do (/proc, /sys, a read-only mount): a folder
    # made and removed now tells (helper 83: make-tiny-pair /proc/x trained first)
    try:
        import tempfile

        os.rmdir(tempfile.mkdtemp(prefix=".make-tiny-pair-", dir=base))
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {base}: {exc.strerror or exc}") from None


#: keys every pair.json written by make-tiny-pair holds: a folder whose pair.json lacks one holds no pair
_PAIR_KEYS = ("arch", "aux_layer_ids", "draft_top1_agreement")


def _check_replaceable(out: Path) -> None:
    """With --force, refuse, before the training, to replace what is not a tiny pair: an OUT whose
    target/, draft/, pair.json or eval_prompts.json exists while its pair.json is no summary of
    make-tiny-pair (a model folder of the user's named ``target`` would be deleted whole)."""
    from ..tiny.pair import OUTPUTS

    present = [sub for sub in OUTPUTS if os.path.lexists(out / sub)]
    if not present:
        return
    summary = None
    try:
        summary = json.loads((out / "pair.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        pass
    if isinstance(summary, dict) and all(k in summary for k in _PAIR_KEYS):
        return
    raise UsageError(f"{out}: --force would replace {', '.join(present)} there, but no pair.json written by "
                     "make-tiny-pair says it is a tiny pair; nothing replaced: choose another OUT")


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _print(s: dict) -> None:
    wiring = s["agreement_by_wiring"]
    print(f"tiny {s['arch']} pair (seed {s['seed']}) in {s['seconds']:.0f} s")
    print(f"  target  {s['target']}  ({s['num_layers']} layers, final loss {s['target_final_loss']:.2f})")
    print(f"  draft   {s['draft']}  ids {s['aux_layer_ids']} ({s['convention']} convention) "
          f"-> trained on positions {s['positions']}")
    print(f"  greedy continuations: distinct tokens {s['greedy_distinct_tokens']} "
          f"({'not degenerate' if s['nondegenerate'] else 'DEGENERATE'}: each needs >= 8 of 32)")
    print(f"  draft top-1 agreement  {_pct(s['draft_top1_agreement'])}  over {s['scored_positions']} generated tokens")
    print(f"    aux states zeroed    {_pct(s['aux_ablated_top1'])}")
    print(f"    most frequent token  {_pct(s['majority_top1'])}")
    print(f"    positions -1 layer   {_pct(wiring.get('-1'))}")
    print(f"    positions +1 layer   {_pct(wiring.get('+1'))}")
    print(f"  check: eagle-cycle wiring {s['target']} {s['draft']}")
