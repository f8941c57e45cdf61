"""What people read (issue 14, items 10 and 11): tables that fit 100 columns without cutting a
figure, input kinds told by content, no write through a dangling symlink, implausible figures
refused with one line."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import re
from pathlib import Path

import pytest

from sglang_eagle_cycle.cli import main

SEED_5 = {"bs": 1, "steps": 5, "topk": 1, "draft_tokens": 6, "cycles": 1000, "accept_len_mean": 2.1,
          "accept_hist": None, "per_position_acceptance": None, "tok_s": 71.3,
          "phases": {k: {"mean": v} for k, v in {"draft_ms": 0.95, "verify_ms": 28.1, "verify_fwd_ms": 28.0,
                                                  "extend_ms": 0.25, "other_ms": 0.15, "total_ms": 29.45}.items()}}
DOC = {"schema": "eagle-cycle-inspect/1", "files": ["seed.log"], "groups": [SEED_5], "findings": []}


def advise(*args, width=None):
    out, err = io.StringIO(), io.StringIO()
    env = dict(os.environ)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["advise", *map(str, args)])
    return rc, out.getvalue(), err.getvalue()


def test_advise_table_fits_100_columns_and_keeps_every_figure(tmp_path):
    doc = tmp_path / "seed.json"
    doc.write_text(json.dumps(DOC))
    rc, out, _ = advise(doc, "--baseline-tok-s", 88.8)   # not a terminal: 100 columns
    assert rc == 0
    table = out[out.index("steps"):out.index("recommended at")]
    assert max(len(ln.rstrip()) for ln in table.splitlines()) <= 100
    assert "…" not in table and "notes" in table
    rc, js, _ = advise(doc, "--baseline-tok-s", 88.8, "--json")
    for c in json.loads(js)["candidates"]:
        row = next(ln for ln in table.splitlines() if re.match(rf"\s*{c['steps']}\s", ln))
        cells = row.split()
        assert float(cells[4]) == pytest.approx(c["predicted_tok_s"], abs=0.06)   # whole, not cut
        if c["steps"]:
            lo, hi = (float(x) for x in cells[5].split("-"))
            assert (lo, hi) == pytest.approx(tuple(c["tok_s_95"]), abs=0.06)


def test_sweep_table_fits_100_columns_and_keeps_every_figure():
    from sglang_eagle_cycle.sweep.summary import render_table

    rows = [{"model": "m", "steps": 0, "topk": None, "num_draft_tokens": None, "concurrency": 64, "status": "ok",
             "output_tok_s": 13612.34, "itl_ms": {"p50": 12.34, "p99": 123.45}, "ttft_ms": {"p50": 1234.5}},
            {"model": "m", "steps": 3, "topk": 1, "num_draft_tokens": 4, "concurrency": 64,
             "status": "failed: the server exited during start-up", "output_tok_s": None},
            {"model": "m", "steps": 5, "topk": 1, "num_draft_tokens": 6, "concurrency": 64, "status": "ok",
             "output_tok_s": 14612.34, "accept_len_mean": 3.21, "itl_ms": {"p50": 10.34, "p99": 99.45},
             "ttft_ms": {"p50": 1134.5}, "cycle": {"phases": {"total_ms": {"mean": 22.5}, "verify_ms": {"share": 0.9}}}}]
    buf = io.StringIO()
    render_table(rows, buf, "sweep")
    text = buf.getvalue()
    assert max(len(ln.rstrip()) for ln in text.splitlines()) <= 100 and "…" not in text
    for figure in ("13612.3", "14612.3", "1.073x", "1234.5", "123.45", "99.45", "22.50", "3.21"):
        assert figure in text


@pytest.mark.parametrize("name", ["seed.txt", "seed.JSON", "seed.json.gz", "seed"])
def test_inspect_document_told_by_content(tmp_path, name):
    path = tmp_path / name
    data = json.dumps(DOC, indent=1).encode()
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    rc, out, err = advise(path, "--baseline-tok-s", 88.8, "--json")
    assert rc == 0, err
    assert json.loads(out)["inputs"]["runs"][0]["steps"] == 5


def test_bench_jsonl_named_json_is_read_as_bench(tmp_path):
    recs = [{"schema": "eagle-cycle-bench/1", "model": "m", "draft": "d", "steps": s, "topk": 1,
             "num_draft_tokens": s + 1 if s else 0, "concurrency": 1, "status": "ok", "output_tok_s": tok,
             **({"accept_len_mean": acc, "cycle": dict(SEED_5, steps=s, draft_tokens=s + 1, tok_s=tok,
                                                      accept_len_mean=acc)} if s else {})}
            for s, tok, acc in ((0, 88.8, None), (5, 71.3, 2.1))]
    path = tmp_path / "bench.json"
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    rc, out, err = advise(path, "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["inputs"]["baseline_tok_s"] == {"1": 88.8} and doc["inputs"]["runs"][0]["steps"] == 5


def test_a_log_named_json_is_read_as_a_log(tmp_path):
    path = tmp_path / "server.json"   # a log line starts with "[" too
    path.write_text("[2026-12-01 10:00:00 TP0] Decode batch, #running-req: 1, #token: 9, token usage: 0.00, "
                    "cuda graph: True, gen throughput (token/s): 88.80, #queue-req: 0\n")
    rc, _, err = advise(path)
    assert rc == 2 and "no speculative run found" in err


def test_adaptive_config_never_written_through_a_dangling_symlink(tmp_path):
    doc = tmp_path / "seed.json"
    doc.write_text(json.dumps(DOC))
    link = tmp_path / "adaptive.json"
    target = tmp_path / "elsewhere" / "x.json"
    link.symlink_to(target)
    (tmp_path / "elsewhere").mkdir()
    for extra in ([], ["--force"]):
        rc, _, err = advise(doc, "--baseline-tok-s", 88.8, "--adaptive-config", link, *extra)
        assert rc == 2 and "dangling symlink" in err and "not written through it" in err and err.count("\n") == 1
        assert not target.exists() and link.is_symlink()


@pytest.mark.parametrize("phase, value, words", [("total_ms", 1e-300, "at least"), ("verify_ms", 1e308, "at most"),
                                                 ("total_ms", 1e308, "at most"), ("total_ms", 5.0, "exceeds total_ms")])
def test_implausible_phase_means_refused_with_one_short_line(tmp_path, phase, value, words):
    group = json.loads(json.dumps(SEED_5))
    group["phases"][phase]["mean"] = value
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(dict(DOC, groups=[group])))
    rc, out, err = advise(path, "--baseline-tok-s", 88.8)
    assert rc == 2 and out == "" and err.count("\n") == 1 and words in err and len(err) < 300


@pytest.mark.parametrize("value", ["1e300", "1:1e12"])
def test_implausible_baseline_refused(value, tmp_path):
    doc = tmp_path / "seed.json"
    doc.write_text(json.dumps(DOC))
    with pytest.raises(SystemExit) as exc, contextlib.redirect_stderr(io.StringIO()) as err:
        main(["advise", str(doc), "--baseline-tok-s", value])
    assert exc.value.code == 2 and "not a throughput" in err.getvalue() and len(err.getvalue()) < 300


def test_one_step_is_singular(tmp_path):
    doc = tmp_path / "seed.json"
    doc.write_text(json.dumps(DOC))
    rc, out, _ = advise(doc, "--baseline-tok-s", 88.8, "--json")
    why = json.loads(out)["next_run"]["why"]
    assert "a run at 1 step " in why or "steps" in why.split(" is expected")[0]
    assert " 1 steps" not in out
