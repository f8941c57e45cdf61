"""Check a target/draft pair's EAGLE-3 aux hidden-state wiring, offline (no GPU, no weights).

TARGET and DRAFT are each a model directory (with config.json), a config.json
path, or a Hugging Face repo id already in the local cache (no network); a
weights file (.safetensors, .bin, .pt, a shard index) is refused, its folder named.  The
draft's checkpoint, when present, gives fc.weight / lm_head.weight / d2t /
input_norm.weight / fc_norm.0.weight shapes and the head tensors stored only under model.:
its safetensors headers, or without safetensors its pytorch_model.bin / *.pt pickles read
without their tensor data (a file whose tensors are nested in a dict is the error
checkpoint_nested).  The server's env overrides apply
(SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS, SGLANG_EAGLE_CYCLE_AUX_CONVENTION,
SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING).

Example::

    eagle-cycle wiring moonshotai/Kimi-K2.5 ./kimi-k25-eagle3 --json

--target-revision / --draft-revision apply to cached repo ids only; given with a
local path they are ignored with a one-line warning on stderr.

--algorithm EAGLE|EAGLE3|NEXTN (any case; default EAGLE3) is the server's
--speculative-algorithm: an EAGLE-3 head under EAGLE or NEXTN is the error
algorithm_not_eagle3.  --context-length TOKENS is the server's --context-length
(default: the target's context as SGLang derives it: max_sequence_length, seq_length,
max_seq_len, model_max_length or max_position_embeddings, times rope_scaling.factor
unless llama3's or with original_max_position_embeddings); a draft trained on a shorter
context gets the note draft_context_shorter (level info: shown, never counted as
a warning, never a reason for a non-zero exit).

Exit codes: 0 no error-level problem, 1 an error-level problem, 2 unusable input
(including a malformed SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS, _AUX_CONVENTION or
_ALLOW_EMBEDDING, the variables the check reads, and an integer field present
but no positive integer, named with its file: the target's num_hidden_layers,
hidden_size, vocab_size; the draft's hidden_size, vocab_size, num_hidden_layers,
draft_vocab_size, num_aux_hidden_states, target_hidden_size. A string, a float,
a boolean, zero or a negative number is refused, and null except in the draft's
last three, which SGLang reads null in; an absent field stays unknown).

--probe then runs `eagle-cycle probe` on the two folders (it loads the weights:
see that command's help for --prompts, --tokens, --device, --dtype,
--max-memory); --json then prints the wiring object with the probe's result
under "probe".  Exit codes with --probe are the probe's table: 0 plugin_best and
no static error, 1 other_best, not_trained_on_target or a static error, 2
unusable input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ..argtypes import int_in
from ..logfiles import text_safe


def add_cli_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="TARGET", help="target model directory, config.json, or cached HF repo id")
    parser.add_argument("draft", metavar="DRAFT", help="EAGLE-3 draft model directory, config.json, or cached HF repo id")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    parser.add_argument("--target-revision", default=None, help="HF cache revision (branch, tag, commit) of TARGET")
    parser.add_argument("--draft-revision", default=None, help="HF cache revision (branch, tag, commit) of DRAFT")
    parser.add_argument("--algorithm", default="EAGLE3", type=_algorithm, metavar="{EAGLE3,EAGLE,NEXTN}",
                        help="the server's --speculative-algorithm (default EAGLE3; NEXTN is SGLang's alias of EAGLE)")
    parser.add_argument("--context-length", default=None, type=int_in(1), metavar="TOKENS",
                        help="the server's --context-length (default: the target's context as SGLang "
                             "derives it, rope_scaling.factor included)")
    parser.add_argument("--probe", action="store_true",
                        help="after the static checks, run `eagle-cycle probe` on the two folders (loads the "
                             "weights; the options below steer it)")
    from .probe_cmd import add_probe_options

    add_probe_options(parser.add_argument_group("probe options (with --probe)"))


def main(args: argparse.Namespace) -> int:
    from ..runtime import _FLAG_OFF, unknown_env
    from ..safetensors_header import read_draft_shapes
    from ..wiring import check_pair, load_config, locate_config, refuse_unusable_pair, render_report
    from ..wiring.checks import refuse_swapped

    from ..errors import UsageError

    if not getattr(args, "probe", False):
        # probe options away from their defaults without --probe would be dropped without a word
        # (helper 83: `wiring T D --device cuda` exited 0 on a machine without CUDA)
        given = [flag for flag, attr, default in (("--prompts", "prompts", None), ("--tokens", "tokens", None),
                                                  ("--device", "device", "cpu"), ("--dtype", "dtype", "float32"),
                                                  ("--max-memory", "max_memory", None))
                 if getattr(args, attr, default) != default]
        if given:
            raise UsageError(f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} to the probe: "
                             "add --probe")
    target_path = locate_config(args.target, args.target_revision)
    draft_path = locate_config(args.draft, args.draft_revision)
    for flag, arg, revision in (("--target-revision", args.target, args.target_revision),
                                ("--draft-revision", args.draft, args.draft_revision)):
        if revision is not None and _is_local(arg):
            print(f"eagle-cycle wiring: warning: {flag} {revision} ignored: {arg} is a local path "
                  f"(revisions select a snapshot of a cached Hugging Face repo id)", file=sys.stderr)
    for msg in unknown_env():
        print(f"eagle-cycle wiring: warning: {msg}", file=sys.stderr)
    for off in ("SGLANG_EAGLE_CYCLE", "SGLANG_EAGLE_CYCLE_WIRING"):
        if os.environ.get(off, "").strip().lower() in _FLAG_OFF:   # the words the plugin's switches take
            # the report is the plugin's wiring; a server launched with this environment keeps stock's
            print(f"eagle-cycle wiring: warning: {off}={os.environ[off]} is set: a server launched with it captures "
                  "the stock SGLang 0.5.23 positions this report names, not the plugin's", file=sys.stderr)
            break
    target_cfg = load_config(target_path)
    draft_cfg = load_config(draft_path)
    refuse_swapped(args.target, args.draft, target_cfg, draft_cfg, "wiring", target_path, draft_path)
    refuse_unusable_pair(target_cfg, draft_cfg, target_path, draft_path)
    header = read_draft_shapes(draft_path.parent) or None
    # callers that build their own Namespace (examples/demo.py) may leave the newer options out
    report = check_pair(target_cfg, draft_cfg, header=header, env=os.environ,
                        algorithm=getattr(args, "algorithm", "EAGLE3"),
                        context_length=getattr(args, "context_length", None))

    text = None if args.json else render_report(report, target_path, target_cfg, draft_path, draft_cfg, header)
    # the verdict stands even when the reader closes the pipe early (``| head -1``): cli.main returns it
    args._rc_decided = 1 if report.errors else 0
    if not getattr(args, "probe", False):
        print(json.dumps(text_safe(report.to_dict())) if args.json else text, flush=True)
        return args._rc_decided

    from ..wiring.probe import exit_code
    from .probe_cmd import render as render_probe
    from .probe_cmd import run_probe

    if text is not None:  # the static report first: it stands even when the probe cannot run
        print(text, end="\n\n", flush=True)
    result = run_probe(args, target_path.parent, draft_path.parent)
    # the probe checks the pair as a default launch would; this report's options (--algorithm,
    # --context-length) may find errors of their own, which its fix line must not call "none needed"
    extra = [p.code for p in report.errors if p.code not in result["wiring_errors"]]
    result["wiring_errors"] = list(result["wiring_errors"]) + extra
    args._rc_decided = 1 if report.errors else exit_code(result)
    if args.json:
        print(json.dumps(text_safe({**report.to_dict(), "probe": result})))
    else:
        print(render_probe(result))
    sys.stdout.flush()
    return args._rc_decided


def _algorithm(text: str) -> str:
    """``--algorithm`` in any case, as SGLang's upper-case name; an unknown one is refused as typed
    (``choices`` after ``type=str.upper`` had echoed ``bogus`` as 'BOGUS')."""
    from ..wiring.checks import ALGORITHMS

    if text.upper() in ALGORITHMS:
        return text.upper()
    raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {', '.join(map(repr, ALGORITHMS))}; "
                                     "any case)")


def _is_local(arg: str) -> bool:
    """True when ``arg`` names an existing local path (so it is not read as a repo id)."""
    path = Path(arg).expanduser()
    return path.is_dir() or path.is_file()
