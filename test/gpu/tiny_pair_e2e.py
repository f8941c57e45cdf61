#!/usr/bin/env python3
"""Helpers of ``test/gpu/e2e_tiny_pair.sh``: the prompt file and the server-log check.

Two subcommands (run from the repository root)::

    python test/gpu/tiny_pair_e2e.py prompts PAIR_DIR OUT.jsonl [--count 8]
    python test/gpu/tiny_pair_e2e.py check --log server.log --pair PAIR_DIR --sweep sweep.jsonl \\
        [--inspect inspect.json] [--tolerance 0.30]

``prompts`` writes the pair's held-out prompts (``eval_prompts.json``, decoded with the target's own
``tokenizer.json``; the eight fixed code prompts of :mod:`sglang_eagle_cycle.tiny.corpus` when the
``tokenizers`` package is missing) as ``{"prompt": ...}`` lines for ``bench_eagle_cycle.py --prompts``.
The tiny target knows Python source only, so the sweep's bundled chat prompts would measure nothing
useful.

``check`` verifies a served run of the tiny pair, each check printed with its measured values:

``wiring_line``
    the log holds the plugin's ``EAGLE-3 aux wiring: ids [...] (...) -> capture positions [...] of N`` line;
``wiring_positions``
    every such line names the pair's ``aux_layer_ids``, its ``positions`` (``pair.json``) and ``num_layers``;
``cycle_lines``
    at least one ``[eagle-cycle]`` cycle line parses (:func:`sglang_eagle_cycle.cycle.parse_line`);
``cycle_lines_valid``
    no ``[eagle-cycle] cycle=`` line is rejected by that parser (damaged or implausible values);
``accept_len_gt_1``
    the mean accept length of the cycle lines (weighted by cycles x requests) is above 1;
``other_ms_nonnegative``
    every cycle line that has ``other_ms`` has it >= 0 (read leniently, so a line the parser
    rejects for a negative value is still seen);
``verify_fwd_within_verify``
    every cycle line that has both has ``verify_fwd_ms <= verify_ms`` (``-`` fields are skipped and
    counted; the check fails when no line has both);
``sweep_record``
    the sweep appended an ``ok`` speculative record with an ITL;
``total_vs_itl``
    the mean ``total_ms`` is within ``--tolerance`` (30%) of the sweep's ITL p50 (``itl_ms.p50``,
    per-token inter-token latency) times the log's mean accept length: one decode cycle commits
    ``accept_len`` tokens, so the client sees about that many ITLs per cycle.

Ends with one JSON line (``schema`` ``eagle-cycle-e2e-check/1``). Exit codes: 0 every check passed,
1 a check failed, 2 unusable input (missing log or pair.json). :func:`check_log` is the pure part the
CPU tests run on synthetic logs.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Optional

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "python") not in sys.path:
    sys.path.insert(0, str(ROOT / "python"))  # this checkout's sglang_eagle_cycle (pure Python parts)

from sglang_eagle_cycle.cycle import PREFIX, parse_line  # noqa: E402

SCHEMA = "eagle-cycle-e2e-check/1"
DEFAULT_TOLERANCE = 0.30

#: The plugin's start-up line (``WiringReport.startup_line``), reading part before the ``;``.
WIRING_RE = re.compile(
    r"EAGLE-3 aux wiring: ids \[([^\]]*)\] \((.*?)\) -> capture positions \[([^\]]*)\] of (\d+)")
#: A cycle line (the prefix followed by its first key); anything else carrying the prefix is not one.
CYCLE_MARK = PREFIX + " cycle="
_KV_RE = re.compile(r"(\w+)=(\S*)")


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    values: dict = field(default_factory=dict)

    def line(self) -> str:
        return f"[{'PASS' if self.ok else 'FAIL'}] {self.name}: {self.detail}"


def _int_list(text: str) -> Optional[list[int]]:
    try:
        return [int(t) for t in text.replace(" ", "").split(",") if t != ""]
    except ValueError:
        return None


def _lenient_ms(line: str) -> dict:
    """``{key: float | None}`` of the ``*_ms`` fields of a cycle line (``-`` and garbage: None)."""
    out = {}
    for key, val in _KV_RE.findall(line[line.find(CYCLE_MARK):]):
        if key.endswith("_ms") and key not in out:
            try:
                out[key] = None if val == "-" else float(val)
            except ValueError:
                out[key] = None
    return out


def _fmt(x: Optional[float], nd: int = 3) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def check_log(lines: Iterable[str], *, expected_ids: list[int], expected_positions: list[int],
              num_layers: int, itl_ms: Optional[float], tolerance: float = DEFAULT_TOLERANCE,
              sweep_problem: Optional[str] = None) -> list[Check]:
    """Every log check (see the module docstring) over ``lines`` of one server log.

    ``itl_ms``: the sweep's per-token ITL p50 in ms (None: not measured). ``sweep_problem``: why no
    usable sweep record exists (None: there is one), reported as the ``sweep_record`` check.
    """
    wiring: list[tuple[list[int] | None, str, list[int] | None, int]] = []
    records = []
    rejected: list[str] = []
    other_bad: list[tuple[int, float]] = []
    fwd_bad: list[tuple[int, float, float]] = []
    other_seen = fwd_pairs = fwd_skipped = 0
    cycle_lines = 0
    for lineno, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        m = WIRING_RE.search(line)
        if m:
            wiring.append((_int_list(m.group(1)), m.group(2), _int_list(m.group(3)), int(m.group(4))))
            continue
        if CYCLE_MARK not in line:
            continue
        cycle_lines += 1
        rec = parse_line(line)
        if rec is None:
            rejected.append(f"line {lineno}")
        else:
            records.append(rec)
        ms = _lenient_ms(line)
        other = ms.get("other_ms")
        if other is not None:
            other_seen += 1
            if other < 0:
                other_bad.append((lineno, other))
        v, f = ms.get("verify_ms"), ms.get("verify_fwd_ms")
        if v is None or f is None:
            fwd_skipped += 1
        else:
            fwd_pairs += 1
            if f > v:
                fwd_bad.append((lineno, f, v))

    checks: list[Check] = []
    checks.append(Check("wiring_line", bool(wiring),
                        f"{len(wiring)} 'EAGLE-3 aux wiring:' line(s) in the log" if wiring else
                        "no 'EAGLE-3 aux wiring: ids [...] -> capture positions [...] of N' line "
                        "(is the plugin installed in the server's environment, log level info?)",
                        {"count": len(wiring)}))
    want = f"ids {expected_ids} -> capture positions {expected_positions} of {num_layers}"
    wrong = [w for w in wiring if (w[0], w[2], w[3]) != (list(expected_ids), list(expected_positions), num_layers)]
    seen = [f"ids {w[0]} ({w[1]}) -> capture positions {w[2]} of {w[3]}" for w in wiring]
    if not wiring:
        checks.append(Check("wiring_positions", False, f"expected {want}; no wiring line to compare",
                            {"expected": expected_positions}))
    else:
        checks.append(Check("wiring_positions", not wrong,
                            (f"expected {want}; logged " + "; ".join(dict.fromkeys(seen))),
                            {"expected": list(expected_positions), "logged": [w[2] for w in wiring]}))

    n_cycles = sum(r.weight for r in records)
    checks.append(Check("cycle_lines", bool(records),
                        f"{len(records)} [eagle-cycle] line(s) parsed ({n_cycles} cycles)"
                        + (f", {len(rejected)} rejected" if rejected else ""),
                        {"lines": len(records), "cycles": n_cycles}))
    checks.append(Check("cycle_lines_valid", cycle_lines > 0 and not rejected,
                        "no [eagle-cycle] cycle line" if cycle_lines == 0 else
                        (f"all {cycle_lines} cycle line(s) parse" if not rejected else
                         f"{len(rejected)} of {cycle_lines} cycle line(s) rejected by "
                         f"sglang_eagle_cycle.cycle.parse_line (damaged or implausible): "
                         + ", ".join(rejected[:5])),
                        {"rejected": len(rejected)}))

    acc_w = sum(r.weight * r.bs for r in records if r.accept_len is not None)
    acc = (sum(r.accept_len * r.weight * r.bs for r in records if r.accept_len is not None) / acc_w
           if acc_w else None)
    checks.append(Check("accept_len_gt_1", acc is not None and acc > 1.0,
                        f"mean accept length {_fmt(acc)} over {acc_w} request-cycles (needs > 1)"
                        if acc is not None else "no accept length (no parsed cycle line)",
                        {"accept_len_mean": acc}))

    checks.append(Check("other_ms_nonnegative", other_seen > 0 and not other_bad,
                        "no cycle line with other_ms" if other_seen == 0 else
                        f"other_ms >= 0 on all {other_seen} line(s)" if not other_bad else
                        f"{len(other_bad)} of {other_seen} line(s) with other_ms < 0: "
                        + ", ".join(f"line {n}: {x:.2f}" for n, x in other_bad[:5]),
                        {"lines": other_seen, "negative": len(other_bad),
                         "min_other_ms": min((x for _, x in other_bad), default=None)}))

    checks.append(Check("verify_fwd_within_verify", fwd_pairs > 0 and not fwd_bad,
                        ("no cycle line with both verify_ms and verify_fwd_ms" if fwd_pairs == 0 else
                         f"verify_fwd_ms <= verify_ms on all {fwd_pairs} line(s)" if not fwd_bad else
                         f"{len(fwd_bad)} line(s) with verify_fwd_ms > verify_ms: "
                         + ", ".join(f"line {n}: {f:.2f} > {v:.2f}" for n, f, v in fwd_bad[:5]))
                        + (f" ({fwd_skipped} line(s) without both: skipped)" if fwd_skipped else ""),
                        {"lines": fwd_pairs, "violations": len(fwd_bad), "skipped": fwd_skipped}))

    checks.append(Check("sweep_record", sweep_problem is None and itl_ms is not None,
                        sweep_problem or (f"ok record, ITL p50 {itl_ms:.3f} ms" if itl_ms is not None
                                          else "the ok record has no itl_ms.p50 (streaming off?)"),
                        {"itl_ms_p50": itl_ms}))

    w = sum(r.weight for r in records if r.total_ms is not None)
    total = sum(r.total_ms * r.weight for r in records if r.total_ms is not None) / w if w else None
    if total is None or acc is None or itl_ms is None or not itl_ms > 0:
        missing = [name for name, v in (("mean total_ms", total), ("mean accept length", acc),
                                        ("ITL p50", itl_ms)) if v is None]
        checks.append(Check("total_vs_itl", False,
                            f"cannot compare: no {', '.join(missing) or 'positive ITL'}",
                            {"total_ms_mean": total, "itl_ms_p50": itl_ms, "accept_len_mean": acc}))
    else:
        expected = itl_ms * acc
        rel = (total - expected) / expected
        checks.append(Check("total_vs_itl", math.isfinite(rel) and abs(rel) <= tolerance,
                            f"mean total_ms {total:.3f} vs ITL p50 {itl_ms:.3f} ms x accept length "
                            f"{acc:.3f} = {expected:.3f} ms: {100 * rel:+.1f}% (allowed +-{100 * tolerance:.0f}%)",
                            {"total_ms_mean": total, "itl_ms_p50": itl_ms, "accept_len_mean": acc,
                             "expected_total_ms": expected, "relative_diff": rel}))
    return checks



# ----------------------------------------------------------------------------- inputs
def read_pair(pair: Path) -> dict:
    """``pair.json`` of a tiny pair (ValueError with the reason when unusable)."""
    path = Path(pair) / "pair.json"
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: {getattr(exc, 'strerror', None) or exc}") from None
    missing = [k for k in ("aux_layer_ids", "positions", "num_layers") if k not in summary]
    if missing:
        raise ValueError(f"{path}: no {', '.join(missing)}")
    return summary


def sweep_itl(sweep: Optional[Path]) -> tuple[Optional[dict], Optional[str]]:
    """(the last ``ok`` speculative ``eagle-cycle-bench/1`` record, None) or (None, why there is none)."""
    if sweep is None:
        return None, "no --sweep file given"
    try:
        text = Path(sweep).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return None, f"sweep output {sweep} not readable ({exc.strerror})"
    recs = []
    for line in text.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("schema") == "eagle-cycle-bench/1":
            recs.append(obj)
    ok = [r for r in recs if r.get("status") == "ok" and (r.get("steps") or 0) > 0]
    if not ok:
        failed = [r for r in recs if r.get("status") == "failed"]
        why = (failed[-1].get("error") or {}).get("reason") if failed else None
        return None, f"no ok speculative record in {sweep}" + (f" (failed: {why})" if why else "")
    return ok[-1], None


def run_check(log: Path, pair: Path, sweep: Optional[Path], inspect: Optional[Path],
              tolerance: float) -> tuple[int, dict]:
    """(exit code, summary document); prints one line per check."""
    summary = read_pair(pair)
    rec, problem = sweep_itl(sweep)
    itl = ((rec or {}).get("itl_ms") or {}).get("p50")
    with open(log, encoding="utf-8", errors="replace") as f:
        checks = check_log(f, expected_ids=summary["aux_layer_ids"], expected_positions=summary["positions"],
                           num_layers=summary["num_layers"], itl_ms=itl, tolerance=tolerance,
                           sweep_problem=problem)
    for c in checks:
        print(c.line(), flush=True)
    doc = {"schema": SCHEMA, "log": str(log), "pair": str(pair),
           "expected_positions": summary["positions"], "tolerance": tolerance,
           "checks": [asdict(c) for c in checks], "failed": [c.name for c in checks if not c.ok]}
    if rec is not None:
        doc["sweep"] = {k: rec.get(k) for k in ("steps", "topk", "num_draft_tokens", "concurrency", "num_prompts",
                                                "max_new_tokens", "output_tok_s", "itl_ms", "ttft_ms",
                                                "accept_len_mean")}
        group = rec.get("cycle") or {}
        total = ((group.get("phases") or {}).get("total_ms") or {}).get("mean")
        doc["sweep"]["cycle_total_ms_mean_in_window"] = total
    if inspect is not None:
        try:
            rep = json.loads(Path(inspect).read_text())
            doc["inspect"] = {
                "groups": [{k: g.get(k) for k in ("bs", "steps", "topk", "draft_tokens", "cycles", "accept_len_mean")}
                           for g in rep.get("groups") or []],
                "findings": [f.get("code") for f in rep.get("findings") or []]}
        except (OSError, ValueError, AttributeError) as exc:
            doc["inspect"] = {"error": str(exc)}
    return (1 if doc["failed"] else 0), doc


# ----------------------------------------------------------------------------- prompts
def prompt_texts(pair: Path, count: int) -> tuple[list[str], str]:
    """(texts, source): the held-out prompts decoded by the target's tokenizer, else corpus.PROMPTS."""
    try:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(Path(pair) / "target" / "tokenizer.json"))
        ids = json.loads((Path(pair) / "eval_prompts.json").read_text())["held_out_prompts"]
        texts = [t for t in (tok.decode(list(p)) for p in ids) if t.strip()]
        if texts:
            return texts[:count], "eval_prompts.json (held out)"
    except Exception:  # noqa: BLE001 - no tokenizers package, or an unreadable file: the fixed prompts
        pass
    from sglang_eagle_cycle.tiny.corpus import PROMPTS

    return list(PROMPTS)[:count], "sglang_eagle_cycle.tiny.corpus.PROMPTS"


def write_prompts(pair: Path, out: Path, count: int) -> str:
    texts, source = prompt_texts(pair, count)
    Path(out).write_text("".join(json.dumps({"prompt": t}) + "\n" for t in texts))
    return f"{len(texts)} prompts from {source} -> {out}"


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="tiny_pair_e2e.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    pp = sub.add_parser("prompts", help="write the sweep's prompt file for a tiny pair")
    pp.add_argument("pair", type=Path)
    pp.add_argument("out", type=Path)
    pp.add_argument("--count", type=int, default=8)
    pc = sub.add_parser("check", help="check a served run's log against the pair and the sweep")
    pc.add_argument("--log", type=Path, required=True)
    pc.add_argument("--pair", type=Path, required=True)
    pc.add_argument("--sweep", type=Path, default=None)
    pc.add_argument("--inspect", type=Path, default=None)
    pc.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE,
                    help="allowed relative gap of mean total_ms to ITL p50 x accept length (default 0.30)")
    args = p.parse_args(argv)
    if args.cmd == "prompts":
        print(write_prompts(args.pair, args.out, args.count))
        return 0
    if not args.log.is_file():
        print(f"tiny_pair_e2e.py: error: server log not found: {args.log}", file=sys.stderr)
        return 2
    try:
        code, doc = run_check(args.log, args.pair, args.sweep, args.inspect, args.tolerance)
    except ValueError as exc:
        print(f"tiny_pair_e2e.py: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(doc, default=str))
    return code


if __name__ == "__main__":
    sys.exit(main())
