"""``eagle-cycle probe`` on trained tiny pairs: does it name the wiring each draft was trained on?

The cases of issue 15's acceptance list, on pairs made by ``make-tiny-pair`` (about 3 minutes for a
new target on 2 CPU cores, then about 20 s for each further draft on it; cached like the test
suite's pairs), all of one ``--seed`` (default 11) unless said:

* ``two wirings``: Llama drafts trained on layer-output ids ``1,3,5``, ``0,4,6`` and ``1,4,6``: each
  should be ``plugin_best`` with its trained positions best, ``p <= 0.05`` against the runner-up set;
* ``config as positions``: the ``1,3,5`` draft with its config rewritten to the positions ``2,4,6``:
  ``other_best``, and its ``fix`` applied gives exit 0;
* ``trained as positions``: a draft trained with ``--convention input`` on ids ``1,4,6`` (positions
  ``[1, 4, 6]``), config as written (read as layer outputs): ``other_best``, fix applied gives exit 0;
* ``another pair's draft``: the Llama target with the draft of the Llama pair of the next seed
  (another target), and with the DeepSeek-V3 pair's draft: ``not_trained_on_target``;
* ``deepseek ids 2,4,6``: a DeepSeek-V3 draft trained on layer-output ids ``2,4,6``: the plugin's
  ``[3, 5, 7]`` best and stock's ``[2, 4, 6]`` significantly worse.

Usage::

    python benchmarks/probe_pairs.py [--seed N] [--draft-steps N] [--tokens N] [--training-text] [--json]

The probe scores the pairs' own ``probe_prompts`` (1,024 prompts x 32 tokens) unless
``--training-text`` probes on 64 lines of the text the tiny targets were trained on (``textwrap.py``).

Prints one row per case (what was expected, what the probe said, the runner-up's margin and
McNemar p, seconds) and ends with one JSON line. A benchmark, not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from sglang_eagle_cycle.wiring.probe import exit_code, probe
from sglang_eagle_cycle.tiny.cache import cached_pair
from sglang_eagle_cycle.tiny.pair import PairSpec


def _log(msg: str) -> None:
    print(f"  training: {msg}", file=sys.stderr, flush=True)


def _copy(src: Path, dest: Path, ids=None) -> Path:
    """The pair with its target linked and its draft copied; ``ids`` rewrites the draft's config."""
    dest.mkdir(parents=True)
    (dest / "target").symlink_to((src / "target").resolve(), target_is_directory=True)
    if (src / "eval_prompts.json").is_file():
        shutil.copy(src / "eval_prompts.json", dest / "eval_prompts.json")
    shutil.copytree(src / "draft", dest / "draft")
    if ids is not None:
        p = dest / "draft" / "config.json"
        cfg = json.loads(p.read_text())
        cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = list(ids)
        p.write_text(json.dumps(cfg, indent=2))
    return dest


def _row(case: str, expect: str, trained, r: dict, fixed_code=None, extra: str = "") -> dict:
    cands = r["candidates"]
    best = r["best"]["positions"]
    runner = next((c for c in cands if c["positions"] != best), None)
    stock = next((c for c in cands if "stock" in c["names"]), None)
    ok = r["verdict"] == expect and (trained is None or best == trained)
    if case.startswith("two wirings"):  # the trained set best, significantly, against the runner-up
        ok = ok and runner is not None and runner["p_vs_best"] <= 0.05
    if fixed_code is not None:
        ok = ok and fixed_code == 0
    if case.startswith("deepseek"):  # the plugin's reading best, stock's significantly worse
        ok = ok and stock is not None and stock["positions"] != best and stock["p_vs_best"] <= 0.05
    return {"case": case, "expected": expect, "trained_positions": trained, "verdict": r["verdict"],
            "best": best, "best_agreement": round(r["best"]["agreement"], 4),
            "runner_up": runner and runner["positions"],
            "runner_up_margin": runner and round(runner["margin_vs_best"], 4),
            "runner_up_p": runner and runner["p_vs_best"],
            "stock_positions": r["stock_positions"], "stock_margin": stock and round(stock["margin_vs_best"], 4),
            "stock_p": stock and stock["p_vs_best"], "fixed_exit": fixed_code,
            "aux_ablated": round(r["aux_ablated_agreement"], 4), "seconds": r["seconds"], "meets": ok,
            "note": extra}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=11, metavar="N", help="the pairs' seed (default 11)")
    ap.add_argument("--draft-steps", type=int, default=None, metavar="N",
                    help="draft training steps of the extra drafts (default: make-tiny-pair's per arch)")
    ap.add_argument("--tokens", type=int, default=None, metavar="N",
                    help="probe --tokens (default: the pairs' own gen_tokens, 32)")
    ap.add_argument("--training-text", action="store_true",
                    help="probe on lines of the tiny targets' training text instead of their held-out prompts")
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    args = ap.parse_args(argv)
    steps = args.draft_steps

    def pair(arch, ids, convention="output", own_steps=True, seed=args.seed):
        spec = PairSpec(arch=arch, seed=seed, aux_layer_ids=tuple(ids), convention=convention,
                        draft_steps=steps if own_steps else None)
        t0 = time.monotonic()
        d, _ = cached_pair(spec, log=_log)
        return d, time.monotonic() - t0

    prompts = None
    holder = tempfile.TemporaryDirectory()
    if args.training_text:
        from sglang_eagle_cycle.tiny.corpus import module_text
        from sglang_eagle_cycle.tiny.pair import TRAIN_MODULES

        lines = [ln[:60] for ln in module_text(TRAIN_MODULES).splitlines() if len(ln.strip()) > 20]
        prompts = Path(holder.name) / "training_text.jsonl"
        step = max(1, len(lines) // 64)
        prompts.write_text("".join(json.dumps({"prompt": ln}) + "\n" for ln in lines[::step][:64]))

    def run(target, draft):
        r = probe(target, draft, prompts_file=prompts, tokens=args.tokens, env={}, progress=False)
        return r, exit_code(r)

    def fixed_exit(src, r, dest):
        """The probe's exit code on ``src`` with the fix's ids written into its config (None: no such fix)."""
        ids = (r["fix"] or {}).get("eagle_aux_hidden_state_layer_ids")
        if ids is None:
            return None
        f = _copy(src, dest, ids=ids)
        return run(f / "target", f / "draft")[1]

    rows = []
    base, _ = pair("llama", (1, 3, 5), own_steps=False)
    ds_base, _ = pair("deepseek_v3", (1, 3, 5), own_steps=False)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        r, _ = run(base / "target", base / "draft")
        rows.append(_row("two wirings: llama ids 1,3,5", "plugin_best", [2, 4, 6], r))
        for ids in ((0, 4, 6), (1, 4, 6)):
            d, _ = pair("llama", ids)
            r, _ = run(d / "target", d / "draft")
            rows.append(_row(f"two wirings: llama ids {','.join(map(str, ids))}", "plugin_best",
                             [i + 1 for i in ids], r))

        bad = _copy(base, tmp / "as-positions", ids=[2, 4, 6])
        r, _ = run(bad / "target", bad / "draft")
        fixed = fixed_exit(base, r, tmp / "as-positions-fixed")
        rows.append(_row("config as positions: llama 1,3,5 declared 2,4,6", "other_best", [2, 4, 6], r, fixed))

        d, _ = pair("llama", (1, 4, 6), convention="input")
        r, _ = run(d / "target", d / "draft")
        fixed = fixed_exit(d, r, tmp / "input-fixed")
        rows.append(_row("trained as positions: llama --convention input 1,4,6", "other_best", [1, 4, 6], r, fixed))

        other, _ = pair("llama", (1, 3, 5), own_steps=False, seed=args.seed + 1)
        r, _ = run(base / "target", other / "draft")
        rows.append(_row(f"another pair's draft: llama target, seed {args.seed + 1} llama draft",
                         "not_trained_on_target", None, r))
        r, _ = run(base / "target", ds_base / "draft")
        rows.append(_row("another pair's draft: llama target, deepseek_v3 draft", "not_trained_on_target", None, r))

        d, _ = pair("deepseek_v3", (2, 4, 6))
        r, _ = run(d / "target", d / "draft")
        rows.append(_row("deepseek ids 2,4,6 (stock reads [2,4,6])", "plugin_best", [3, 5, 7], r))

    holder.cleanup()
    summary = {"seed": args.seed, "draft_steps": steps, "tokens": args.tokens, "prompts": "training text" if prompts else "held out",
               "cases": len(rows),
               "met": sum(r["meets"] for r in rows), "rows": rows}
    if not args.json:
        pct = lambda x: "-" if x is None else f"{100 * x:+.1f}"  # noqa: E731
        print(f"{'case':<56} {'verdict':<22} {'best':<10} {'runner-up':<10} {'margin':>7} {'p':>8} "
              f"{'stock':>7} {'stock p':>8} {'s':>5}  met")
        for r in rows:
            p = "-" if r["runner_up_p"] is None else f"{r['runner_up_p']:.2g}"
            sp = "-" if r["stock_p"] is None else f"{r['stock_p']:.2g}"
            print(f"{r['case']:<56} {r['verdict']:<22} {str(r['best']):<10} {str(r['runner_up']):<10} "
                  f"{pct(r['runner_up_margin']):>7} {p:>8} {pct(r['stock_margin']):>7} {sp:>8} {r['seconds']:>5.0f}  "
                  f"{'yes' if r['meets'] else 'NO'}")
        print(f"{summary['met']} of {len(rows)} cases as the issue expects "
              f"(seed {args.seed}, draft steps {steps or 'default'}, {summary['prompts']} prompts; margins in points "
              "of top-1 agreement)")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
