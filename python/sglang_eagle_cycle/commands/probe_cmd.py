"""Ask an EAGLE-3 draft's own weights which target layers it was trained on.

Runs the target with Hugging Face transformers over a few prompts (its residual
stream at every position and its greedy continuation), then teacher-forces the
draft with each candidate set of capture positions: the plugin's, stock SGLang's,
the declared ids read as layer outputs / as positions / shifted by +1 / -1, the
embedding in place of the deepest state, the family default [2, N//2, N-3].
Agreement is the draft's top-1 (through d2t) against the target's greedy token
on the generated positions; candidates are compared on the same tokens with an
exact McNemar test, and against the draft with its aux states zeroed.

TARGET and DRAFT are taken as `eagle-cycle wiring` takes them: a model directory, its
config.json, or a Hugging Face repo id already in the local cache (its snapshot; no network).

Prompts: --prompts FILE (one {"prompt": ...} per line, tokenized with the
target's tokenizer); default the tiny pair's eval_prompts.json beside TARGET,
else the bundled prompts.  --max-memory SIZE (e.g. 20GiB) loads the target with
accelerate's offloading on the CPU.

Example::

    eagle-cycle probe ./tiny/target ./tiny/draft --json

Exit codes: 0 plugin_best and no error-level wiring problem; 1 other_best,
not_trained_on_target or a wiring error; 2 unusable input (missing files,
unreadable safetensors, a draft without fc, shapes that cannot be fed, a head
with more than one decoder layer, a target checkpoint holding more or fewer
decoder layers than its config's num_hidden_layers).  Head variants are read as SGLang 0.5.23
reads them: norm_before_fc, fc_norm / use_aux_norm, norm_output, d2t.

`eagle-cycle wiring TARGET DRAFT --probe` runs the same probe after the static
checks, with the same options and exit codes.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..argtypes import int_in, memory_size


def add_cli_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="TARGET", help="target model directory (Hugging Face layout), its "
                                                         "config.json, or a cached HF repo id")
    parser.add_argument("draft", metavar="DRAFT", help="EAGLE-3 draft directory (config.json + safetensors), its "
                                                       "config.json, or a cached HF repo id")
    add_probe_options(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")


def add_probe_options(parser: argparse.ArgumentParser) -> None:
    """The options that steer a probe run (shared with ``eagle-cycle wiring --probe``)."""
    parser.add_argument("--prompts", default=None, metavar="FILE",
                        help='JSONL prompts, one {"prompt": ...} a line (default: the pair\'s held-out prompts '
                             "or the bundled ones)")
    parser.add_argument("--tokens", default=None, type=int_in(1), metavar="N",
                        help="greedy tokens generated per prompt (default 32, or the tiny pair's gen_tokens)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="where the target runs")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"), help="target weights dtype")
    parser.add_argument("--max-memory", default=None, metavar="SIZE", type=memory_size,
                        help="CPU memory cap for the target (e.g. 20GiB): accelerate offloads the rest to disk")


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def render(result: dict) -> str:
    from io import StringIO

    from rich.console import Console
    from rich.table import Table

    from ..wiring.probe import fix_text

    table = Table(title=f"{result['scored_tokens']} scored tokens, {result['prompts']} prompts x "
                        f"{result['tokens']} tokens, {result['num_layers']} layers")
    for col in ("positions", "names", "agreement", "95% CI", "vs best", "p"):
        table.add_column(col, justify="right" if col in ("agreement", "vs best", "p") else "left")
    for r in result["candidates"]:
        is_best = r["positions"] == result["best"]["positions"]
        table.add_row(str(r["positions"]), ", ".join(r["names"]), _pct(r["agreement"]),
                      f"{_pct(r['ci'][0])}-{_pct(r['ci'][1])}",
                      "best" if is_best else f"{100 * r['margin_vs_best']:+.1f}",
                      "" if is_best else f"{r['p_vs_best']:.2g}")
    table.add_row("aux zeroed", "ablated", _pct(result["aux_ablated_agreement"]), "", "", "")
    buf = StringIO()
    Console(file=buf, width=110, force_terminal=False, color_system=None).print(table)
    lines = [buf.getvalue().rstrip()]
    lines.append(f"plugin captures {result['plugin_positions']}; stock SGLang would capture "
                 f"{result['stock_positions']}")
    for note in result.get("notes") or []:
        lines.append(f"note: {note}")
    if result["wiring_errors"]:
        lines.append(f"wiring errors: {', '.join(result['wiring_errors'])} (see eagle-cycle wiring)")
    lines.append(f"verdict: {result['verdict']} (best {result['best']['positions']}, "
                 f"{_pct(result['best']['agreement'])})")
    lines.append(fix_text(result))
    lines.append(f"{result['seconds']:.1f} s")
    return "\n".join(lines)


def run_probe(args: argparse.Namespace, target=None, draft=None) -> dict:
    """The probe's result dict for the parsed options (``target``/``draft`` override the positionals)."""
    from ..wiring.probe import probe

    return probe(target or args.target, draft or args.draft, prompts_file=args.prompts, tokens=args.tokens,
                 device=args.device, dtype=args.dtype, max_memory=args.max_memory)


def main(args: argparse.Namespace) -> int:
    from ..wiring.probe import exit_code

    from ..logfiles import text_safe

    result = run_probe(args)
    if args.json:
        print(json.dumps(text_safe(result)))
    else:
        print(render(result))
    sys.stdout.flush()
    return exit_code(result)
