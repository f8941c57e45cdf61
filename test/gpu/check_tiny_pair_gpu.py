#!/usr/bin/env python3
"""GPU check of a tiny pair's agreement figures (torch + safetensors only; SGLang is not imported).

``eagle-cycle make-tiny-pair OUT`` records, in ``OUT/pair.json``, the draft's top-1 agreement with
the target measured on the CPU where it trained. This script recomputes it from the files alone
(:func:`sglang_eagle_cycle.tiny.load.pair_agreement`) on the GPU and on the CPU of this machine, and
checks that the two agree: a GPU build whose kernels disagree with the CPU by more than a few
argmax flips would make any served accept length hard to read.

Usage (from the repository root)::

    python test/gpu/check_tiny_pair_gpu.py PAIR_DIR [--tolerance-points 0.5]
    python test/gpu/check_tiny_pair_gpu.py PAIR_DIR --smoke-cpu    # both runs on the CPU: logic only

Without a CUDA device (and without ``--smoke-cpu``) it prints ``skipped: no CUDA device`` and exits 0.
Otherwise it prints both figures, then one JSON line with everything. Exit codes: 0 the GPU and CPU
``draft_top1_agreement`` differ by at most ``--tolerance-points`` percentage points; 1 they differ
more (or a run failed); 2 something is missing (a Python package, a file of the pair: named).
The figure recorded in ``pair.json`` is compared too and reported, but it does not set the exit
code: it comes from the machine that trained the pair, whose CPU kernels may differ from this one's.
TF32 is switched off for the GPU run (fp32 throughout, as on the CPU).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "python") not in sys.path:
    sys.path.insert(0, str(ROOT / "python"))  # sglang_eagle_cycle from this checkout; no SGLang import

DEFAULT_TOLERANCE_POINTS = 0.5
#: Files ``pair_agreement`` reads.
PAIR_FILES = ("pair.json", "eval_prompts.json", "target/config.json", "target/model.safetensors",
              "draft/config.json", "draft/model.safetensors")
#: Python packages ``pair_agreement`` needs besides torch, with the install hint.
PACKAGES = {"safetensors": "pip install safetensors"}


def missing_inputs(pair: Path) -> list[str]:
    """What is missing to run the check, one readable item each (empty: nothing)."""
    out = [f"python package {name} ({hint})" for name, hint in PACKAGES.items()
           if importlib.util.find_spec(name) is None]
    out += [f"file {pair / rel}" for rel in PAIR_FILES if not (pair / rel).is_file()]
    return out


def points(x: Optional[float]) -> Optional[float]:
    """A fraction in [0, 1] as percentage points."""
    return None if x is None else 100.0 * x


def compare(gpu: dict, cpu: dict, recorded: dict, tolerance_points: float) -> dict:
    """The verdict from two ``pair_agreement`` results and ``pair.json``.

    Returns ``{"checks": [{"name", "ok", "detail", "affects_exit"}], "failed": [...], "diff_points": {...}}``;
    ``failed`` lists only checks that set the exit code.
    """
    def diff(a, b):
        return None if a is None or b is None else abs(points(a) - points(b))

    key = "draft_top1_agreement"
    d_gc = diff(gpu.get(key), cpu.get(key))
    d_rc = diff(recorded.get(key), cpu.get(key))
    d_rg = diff(recorded.get(key), gpu.get(key))
    checks = [{
        "name": "gpu_vs_cpu_agreement",
        "ok": d_gc is not None and d_gc <= tolerance_points,
        "detail": (f"draft top-1 agreement {gpu['device']} {points(gpu[key]):.2f}% vs {cpu['device']} "
                   f"{points(cpu[key]):.2f}%: {d_gc:.2f} points (allowed {tolerance_points:g})")
        if d_gc is not None else "an agreement figure is missing",
        "affects_exit": True,
    }]
    for name, d, other in (("recorded_vs_cpu", d_rc, cpu), ("recorded_vs_gpu", d_rg, gpu)):
        checks.append({
            "name": name,
            "ok": d is not None and d <= tolerance_points,
            "detail": (f"pair.json {points(recorded[key]):.2f}% vs {other['device']} {points(other[key]):.2f}%: "
                       f"{d:.2f} points") if d is not None else "pair.json has no draft_top1_agreement",
            "affects_exit": False,
        })
    wiring = {}
    for by in ("-1", "+1"):
        g = (gpu.get("agreement_by_wiring") or {}).get(by)
        c = (cpu.get("agreement_by_wiring") or {}).get(by)
        wiring[by] = diff(g, c)
    return {
        "checks": checks,
        "failed": [c["name"] for c in checks if c["affects_exit"] and not c["ok"]],
        "diff_points": {"draft_top1_agreement": d_gc, "aux_ablated_top1": diff(gpu.get("aux_ablated_top1"),
                                                                              cpu.get("aux_ablated_top1")),
                        "agreement_by_wiring": wiring, "recorded_vs_cpu": d_rc, "recorded_vs_gpu": d_rg},
    }


def _line(res: dict) -> str:
    w = res.get("agreement_by_wiring") or {}
    fmt = lambda x: "-" if x is None else f"{points(x):.2f}%"  # noqa: E731
    return (f"{res['device']:>5}: draft top-1 agreement {fmt(res.get('draft_top1_agreement'))}, aux zeroed "
            f"{fmt(res.get('aux_ablated_top1'))}, positions -1 {fmt(w.get('-1'))}, +1 {fmt(w.get('+1'))} "
            f"({res.get('scored_positions')} scored tokens, {res.get('seconds', 0):.1f} s)")


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="check_tiny_pair_gpu.py", description=__doc__.split("\n\n")[0])
    p.add_argument("pair", type=Path, metavar="PAIR_DIR", help="a folder written by eagle-cycle make-tiny-pair")
    p.add_argument("--tolerance-points", type=float, default=DEFAULT_TOLERANCE_POINTS,
                   help="allowed |GPU - CPU| draft_top1_agreement in percentage points (default 0.5)")
    p.add_argument("--smoke-cpu", action="store_true",
                   help="no CUDA needed: run both sides on the CPU (checks this script's logic only)")
    args = p.parse_args(argv)

    if importlib.util.find_spec("torch") is None:
        print("missing: python package torch (pip install torch)")
        return 2
    import torch

    if not args.smoke_cpu and not torch.cuda.is_available():
        print("skipped: no CUDA device")
        return 0
    missing = missing_inputs(args.pair)
    if missing:
        for item in missing:
            print(f"missing: {item}")
        return 2

    from sglang_eagle_cycle.tiny.load import pair_agreement

    t0 = time.monotonic()
    first = "cpu" if args.smoke_cpu else "cuda"
    device_name = "cpu (smoke)" if args.smoke_cpu else torch.cuda.get_device_name(0)
    if not args.smoke_cpu:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    try:
        recorded = json.loads((args.pair / "pair.json").read_text())
    except (OSError, ValueError) as exc:
        print(f"missing: a readable {args.pair / 'pair.json'} ({exc})")
        return 2
    results = {}
    errors = {}
    for side, device in (("gpu", first), ("cpu", "cpu")):
        t = time.monotonic()
        try:
            res = pair_agreement(args.pair, device)
        except Exception as exc:  # noqa: BLE001 - reported in the JSON line, exit 1
            errors[side] = f"{type(exc).__name__}: {exc}"
            print(f"{device:>5}: failed: {errors[side]}", flush=True)
            continue
        if args.smoke_cpu and side == "gpu":
            res["device"] = "cpu#1"
        res["seconds"] = round(time.monotonic() - t, 2)
        results[side] = res
        print(_line(res), flush=True)
    rec = {k: recorded.get(k) for k in ("draft_top1_agreement", "aux_ablated_top1", "agreement_by_wiring")}
    w = rec.get("agreement_by_wiring") or {}
    agree = rec["draft_top1_agreement"]
    print("recorded in pair.json: draft top-1 agreement "
          + ("-" if agree is None else f"{points(agree):.2f}%")
          + f", positions {recorded.get('positions')}, wiring -1/+1 {w.get('-1')}/{w.get('+1')}")
    if errors:
        verdict = {"checks": [], "failed": [f"{side}_run" for side in errors], "diff_points": {}}
    else:
        verdict = compare(results["gpu"], results["cpu"], rec, args.tolerance_points)
        for c in verdict["checks"]:
            tag = ("PASS" if c["ok"] else "FAIL") if c["affects_exit"] else ("INFO" if c["ok"] else "WARN")
            print(f"[{tag}] {c['name']}: {c['detail']}", flush=True)
    doc = {
        "schema": "eagle-cycle-tiny-pair-gpu/1", "pair": str(args.pair), "device": device_name,
        "torch": torch.__version__, "cuda": getattr(torch.version, "cuda", None),
        "tolerance_points": args.tolerance_points, "positions": recorded.get("positions"),
        "gpu": results.get("gpu"), "cpu": results.get("cpu"), "recorded": rec, "errors": errors,
        **verdict, "seconds": round(time.monotonic() - t0, 2),
    }
    print(json.dumps(doc))
    return 1 if doc["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
