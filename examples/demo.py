"""``make demo``: the EAGLE-3 aux-layer wiring, shown offline, proven on the CPU, served on a GPU.

On a machine with a CUDA device and SGLang installed it runs ``test/gpu/e2e_tiny_pair.sh``: a tiny
trained Llama target + EAGLE-3 draft served by SGLang 0.5.23 with this plugin, a short depth-sweep
measurement, and checks of the server log (wiring line, per-cycle timing, accept length); its exit
code is the demo's.

Elsewhere (no GPU, no weights, no network):

1. the wiring check on the Kimi-K2.5 pair shipped under ``examples/kimi-k25/``: the aux-layer
   correction this plugin applies, and the launch command a GPU user runs;
2. the CPU proof: a tiny Llama target and its EAGLE-3 draft (trained once on the CPU, about 3
   minutes, then cached; ``sglang_eagle_cycle.tiny.cache``), then SGLang's own Llama model code,
   with the plugin loaded through SGLang's ``load_plugins()``, run on the CPU
   (``examples/cpu_proof.py``): the states it captures are the ones the draft was trained on;
3. ``eagle-cycle probe`` on a tiny DeepSeek-V3 pair whose draft was trained on the outputs of
   decoder layers 2, 4, 6 (``make-tiny-pair --arch deepseek_v3 --aux-layer-ids 2,4,6``, trained
   once, about 3 minutes, then cached), where stock SGLang 0.5.23 (positions ``[2, 4, 6]``) and
   this plugin (``[3, 5, 7]``) disagree: the draft's agreement under each reading, and under the
   embedding-fed wiring of the seed team's serving patch.

Usage::

    python examples/demo.py            # what `make demo` runs
    EAGLE_CYCLE_DEMO_OFFLINE=1 python examples/demo.py   # step 1 only: no training, no serving

``EAGLE_CYCLE_DEMO_OFFLINE``: ``1`` runs step 1 only (the test suite's demo test does), unset or
``0`` everything. ``SGLANG_EAGLE_CYCLE_*`` overrides in the environment are left out of steps 1 to 3
(named in a note): the demo shows the plugin's default reading.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
E2E = ROOT / "test" / "gpu" / "e2e_tiny_pair.sh"
CPU_PROOF = HERE / "cpu_proof.py"
TARGET = HERE / "kimi-k25" / "target"
DRAFT = HERE / "kimi-k25" / "draft"

LAUNCH = """\
python -m sglang.launch_server \\
    --model-path moonshotai/Kimi-K2.5 --trust-remote-code --tp 8 \\
    --speculative-algorithm EAGLE3 \\
    --speculative-draft-model-path /path/to/kimi-k2.5-eagle3-draft \\
    --speculative-num-steps 2 --speculative-eagle-topk 1 --speculative-num-draft-tokens 3 \\
    --log-level info"""


def cuda_serving_possible() -> bool:
    """A CUDA device visible to torch, and SGLang importable: then the demo serves for real."""
    if importlib.util.find_spec("sglang") is None or importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


def gpu_demo() -> int:
    print("sglang-eagle-cycle demo: CUDA device found; serving a tiny trained Llama target + EAGLE-3 draft "
          "with SGLang and this plugin")
    print(f"$ PYTHON={sys.executable} bash {E2E.relative_to(ROOT)}\n", flush=True)
    return subprocess.run(["bash", str(E2E)], cwd=ROOT, env=dict(os.environ, PYTHON=sys.executable)).returncode


def offline_only() -> bool:
    """Step 1 only: ``EAGLE_CYCLE_DEMO_OFFLINE=1`` (or true/yes/on)."""
    return os.environ.get("EAGLE_CYCLE_DEMO_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def main() -> int:
    offline = offline_only()
    if not offline and cuda_serving_possible():
        return gpu_demo()
    code = wiring_demo()
    if code == 2:
        return code
    if offline:
        print("\n(offline demo only: the CPU proof on a trained tiny pair and GPU serving are left out; "
              "EAGLE_CYCLE_DEMO_OFFLINE=0 runs them)")
        return code
    proof = cpu_proof()
    probed = probe_demo()
    return code or proof or probed


def wiring_demo() -> int:
    from sglang_eagle_cycle.commands import wiring_cmd
    from sglang_eagle_cycle.errors import UsageError
    from sglang_eagle_cycle.safetensors_header import read_draft_shapes
    from sglang_eagle_cycle.wiring import check_pair, load_config, locate_config

    rel = lambda p: p.relative_to(HERE.parent)  # noqa: E731
    print("sglang-eagle-cycle demo: EAGLE-3 aux hidden-state wiring of a Kimi-K2.5 target/draft pair\n")
    # the plugin's default reading, as steps 2 and 3 run: an override in this shell
    # (SGLANG_EAGLE_CYCLE_AUX_CONVENTION=input) had the text below call [2, 30, 58] the plugin's capture
    ours = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("SGLANG_EAGLE_CYCLE")}
    if ours:
        print("(left out here, so that the demo shows the plugin's default reading: "
              + ", ".join(f"{k}={v}" for k, v in sorted(ours.items()))
              + "; `eagle-cycle wiring` and a server read them)\n")
    print(f"$ eagle-cycle wiring {rel(TARGET)} {rel(DRAFT)}")
    try:
        code = wiring_cmd.main(argparse.Namespace(
            target=str(TARGET), draft=str(DRAFT), json=False, target_revision=None, draft_revision=None))
        report = check_pair(load_config(locate_config(str(TARGET))), load_config(locate_config(str(DRAFT))),
                            header=read_draft_shapes(DRAFT) or None, env=os.environ)
    except UsageError as exc:
        print(f"demo: error: {exc}", file=sys.stderr)
        return 2
    finally:
        os.environ.update(ours)

    print("\nThe correction (draft ids mean the outputs of decoder layers 2, 30, 58):")
    print(f"  draft eagle_config ids          {report.ids}")
    print(f"  stock SGLang 0.5.23 captures    {report.stock_positions}  "
          f"({report.stock_family} rule: every state one layer early)")
    print(f"  with sglang-eagle-cycle         {report.positions}  (position j = input of layer j = output of layer j-1)")

    gpu = shutil.which("nvidia-smi") is not None
    print("\nServing needs a GPU: SGLang cannot start a server on a CPU-only machine"
          + ("" if gpu else " (no NVIDIA GPU found on this machine)")
          + "; the CPU proof below runs SGLang's model code without a server.")
    print("On a GPU machine (Kimi-K2.5 at TP 8: 8 x H200 or similar) with SGLang 0.5.23 and this package installed "
          "in the same environment, run (the plugin loads through SGLang's plugin entry point; nothing to add):\n")
    print(LAUNCH)
    print("\nThe scheduler log then shows the wiring line:")
    print(f"  {report.startup_line()}")
    return code


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _progress(msg: str) -> None:
    print(f"  training: {msg}", file=sys.stderr, flush=True)


def cpu_proof() -> int:
    """Train (or reuse) the tiny pair, then run SGLang's Llama with the plugin on the CPU against it."""
    print("\n--- CPU proof: SGLang's own model code captures what the draft was trained on ---\n")
    if importlib.util.find_spec("sglang") is None:
        print("skipped: SGLang is not installed in this environment (make demo installs it into .venv/)")
        return 0
    from sglang_eagle_cycle.errors import UsageError
    from sglang_eagle_cycle.tiny.cache import cache_root, cached_pair, pair_dir_name
    from sglang_eagle_cycle.tiny.pair import PairSpec

    spec = PairSpec(arch="llama", seed=11)
    where = cache_root() / pair_dir_name(spec)
    ids = ", ".join(str(i) for i in spec.aux_layer_ids)
    print(f"A tiny Llama target (8 decoder layers) and an EAGLE-3 draft trained on the outputs of its decoder "
          f"layers {ids} (`eagle-cycle make-tiny-pair`, seed {spec.seed}).")
    if (where / "pair.json").is_file():
        print(f"Using the cached pair in {where}.", flush=True)
    else:
        print(f"It trains once on the CPU, in about 3 minutes, and is cached in {where} for later runs.",
              flush=True)
    try:
        pair, summary = cached_pair(spec, log=_progress)
    except UsageError as exc:
        print(f"demo: error: {exc}", file=sys.stderr)
        return 2
    wiring = summary.get("agreement_by_wiring") or {}
    pos = summary["positions"]
    print(f"\nDraft top-1 agreement with the target's greedy tokens ({summary.get('scored_positions')} held-out "
          "tokens):")
    rows = [(f"fed positions {pos} (its training)", summary.get("draft_top1_agreement")),
            (f"fed positions {[p - 1 for p in pos]} (one layer early)", wiring.get("-1")),
            (f"fed positions {[p + 1 for p in pos]} (one layer late)", wiring.get("+1")),
            ("aux states zeroed", summary.get("aux_ablated_top1"))]
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"  {label:<{width}}  {_pct(value):>6}")

    print(f"\n$ SGLANG_PLUGINS=eagle_cycle python {CPU_PROOF.relative_to(ROOT)} {pair}", flush=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_EAGLE_CYCLE")}
    env["SGLANG_PLUGINS"] = "eagle_cycle"
    try:
        proc = subprocess.run([sys.executable, str(CPU_PROOF), str(pair)], capture_output=True, text=True,
                              env=env, cwd=ROOT, timeout=1800)
    except subprocess.TimeoutExpired:
        print("demo: error: the CPU proof did not finish within 30 minutes", file=sys.stderr)
        return 1
    try:
        out = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        print(f"demo: error: the CPU proof failed (exit {proc.returncode}); its last output:", file=sys.stderr)
        print("\n".join(proc.stderr.strip().splitlines()[-30:]), file=sys.stderr)
        return 1
    layers = out["layers_to_capture"]
    outputs = ", ".join(str(p - 1) for p in layers)
    diff = out["aux_max_abs_diff"]
    for line in out.get("wiring_lines") or []:
        print(f"plugin: {line}")
    if out["ok"]:
        print(f"\nSGLang's own Llama code captured layers {layers} (outputs of decoder layers {outputs}): "
              "the outputs the draft was trained on")
    else:
        print(f"\nCPU proof FAILED: SGLang captured layers {layers} (nearest reference positions "
              f"{out['nearest_positions']}), the draft was trained on positions {out['positions']}")
    print(f"  max |SGLang capture - the pair's reference states at {out['positions']}| = "
          + ("-" if diff is None else f"{diff:.2e}")
          + f" over {out['tokens']} held-out tokens (allowed {out['tolerance']:g}); "
          f"logits max |diff| {out['logits_max_abs_diff']:.2e}")
    print(f"  ({out['timings'].get('total_s', 0):.0f} s in a fresh interpreter: SGLang's import, its model loader, "
          "one forward)")
    return 0 if out["ok"] else 1


def probe_demo() -> int:
    """Step 3: ask a tiny DeepSeek-V3 draft's weights which reading of its ids it was trained on."""
    from sglang_eagle_cycle.commands.probe_cmd import render
    from sglang_eagle_cycle.errors import UsageError
    from sglang_eagle_cycle.tiny.cache import cache_root, cached_pair, pair_dir_name
    from sglang_eagle_cycle.tiny.pair import PairSpec
    from sglang_eagle_cycle.wiring.probe import probe

    print("\n--- The draft's own weights: eagle-cycle probe on a pair where stock SGLang and the plugin disagree ---\n")
    spec = PairSpec(arch="deepseek_v3", seed=11, aux_layer_ids=(2, 4, 6))
    where = cache_root() / pair_dir_name(spec)
    print("A tiny DeepSeek-V3 target and an EAGLE-3 draft trained on the outputs of its decoder layers 2, 4, 6; "
          "the draft's config declares ids [2, 4, 6]. Stock SGLang 0.5.23 adds 1 to DeepSeek ids only when the "
          "first is 1, so it would feed positions [2, 4, 6], each one layer early; the plugin feeds [3, 5, 7].")
    if not (where / "pair.json").is_file():
        print(f"It trains once on the CPU, in about 3 minutes, and is cached in {where}.", flush=True)
    try:
        pair, _ = cached_pair(spec, log=_progress)
        print(f"\n$ eagle-cycle probe {pair}/target {pair}/draft", flush=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_EAGLE_CYCLE")}
        result = probe(pair / "target", pair / "draft", env=env, progress=False)
    except UsageError as exc:
        print(f"demo: error: {exc}", file=sys.stderr)
        return 2
    print(render(result))
    by = {tuple(c["positions"]): c for c in result["candidates"]}
    fed = next((c["positions"] for c in result["candidates"] if "embedding for deepest" in c["names"]), None)
    rows = [("this plugin", result["plugin_positions"]), ("stock SGLang 0.5.23", result["stock_positions"]),
            ("embedding fed (the seed team's patch)", fed)]
    print("\nDraft top-1 agreement under each reading:")
    for label, pos in rows:
        c = by.get(tuple(pos or ()))
        if c is not None:
            vs = "best" if c["positions"] == result["best"]["positions"] else \
                f"{100 * c['margin_vs_best']:+.1f} points vs best, McNemar p={c['p_vs_best']:.2g}"
            print(f"  {label:<40} {str(c['positions']):<10} {_pct(c['agreement']):>6}  ({vs})")
    stock = by.get(tuple(result["stock_positions"] or ()))
    emb = by.get(tuple(fed or ()))
    if stock is not None and stock["positions"] != result["best"]["positions"]:
        told = "significantly" if stock["p_vs_best"] <= 0.05 else "but not significantly"
        print(f"Stock's one-layer-early reading costs this draft {-100 * stock['margin_vs_best']:.1f} points of "
              f"agreement, {told} over {result['scored_tokens']} scored tokens (neighbouring layers of a tiny "
              "model carry similar states)" + ("" if emb is None else
              f"; the embedding in place of the deepest state costs it {-100 * emb['margin_vs_best']:.1f}") + ".")
    return 0


if __name__ == "__main__":
    sys.exit(main())
