"""File names whose bytes are no UTF-8 (``b"run-\\xff.log"``; Python holds them as lone surrogates,
``run-\\udcff.log``) in every JSON the CLI writes: strict UTF-8 JSON naming the file as the text
output does, ``run-\\xff.log`` (the name's bytes decoded with ``backslashreplace``).

``json.dumps`` had written such a name as a ``\\udcff`` escape: valid-looking ASCII, but a lone
surrogate that jq replaces and strict readers (serde, Go's decoder in strict mode) refuse, and that
``json.loads`` hands back as a string no UTF-8 writer can write."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from cyclegen import generate, log_lines
from sglang_eagle_cycle import cli, logfiles

REPO = Path(__file__).resolve().parents[1]


def _strict(text: str):
    """``text`` parsed as strict UTF-8 JSON: the document, and every text in it (keys included)
    writable as UTF-8 (a lone surrogate, from a ``\\udcff`` escape, is not)."""
    doc = json.loads(text.encode("utf-8").decode("utf-8"))
    json.dumps(doc, ensure_ascii=False).encode("utf-8")   # raises on any lone surrogate
    return doc


def _texts(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _texts(v)
    elif isinstance(value, list):
        for v in value:
            yield from _texts(v)


@pytest.fixture(scope="module")
def log_text() -> str:
    run = generate(random.Random(7), bs=1, steps=2, cycles=30, p=[0.7, 0.5], verify_ms=30.0)
    return "\n".join(log_lines(run.records)) + "\n"


@pytest.fixture()
def bad_log(tmp_path, log_text) -> Path:
    path = tmp_path / os.fsdecode(b"run-\xff.log")   # a name Linux takes and UTF-8 does not
    path.write_text(log_text)
    assert os.fsencode(path).endswith(b"run-\xff.log")
    return path


def _cli(capsys, *args) -> tuple[int, str, str]:
    rc = cli.main([*map(str, args)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_text_label_writes_a_names_bytes_as_backslash_escapes():
    assert logfiles.text_label(os.fsdecode(b"run-\xff.log")) == "run-\\xff.log"
    assert logfiles.text_label(os.fsdecode(b"a\xc3(\xed\xa0\x80")) == b"a\xc3(\xed\xa0\x80".decode("utf-8", "backslashreplace")
    assert logfiles.text_label("caf\u00e9 \u2500.log") == "caf\u00e9 \u2500.log"          # UTF-8 names stay as they are
    assert logfiles.text_label("x\ud800y") == "x\\ud800y"                              # a surrogate no name decodes to
    assert logfiles.text_safe({os.fsdecode(b"k\xfe"): [os.fsdecode(b"v\xfd"), 1, None]}) == {"k\\xfe": ["v\\xfd", 1, None]}


def test_inspect_json_names_the_file_in_strict_utf8(capsys, bad_log, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")   # the table's header shows the whole path (a long tmp_path would wrap)
    rc, out, err = _cli(capsys, "inspect", bad_log, "--json")
    assert rc == 0 and err == "", err
    doc = _strict(out)
    shown = str(tmp_path / "run-\\xff.log")
    assert doc["files"] == [shown]
    assert [g["file"] for g in doc["groups"]] == [shown] and doc["groups"][0]["cycles"] == 30
    assert doc["findings"] and all(f["file"] == shown and f["message"].startswith(shown) for f in doc["findings"])
    assert not any("\\udc" in t for t in _texts(doc))
    # the table names it the same way
    rc, table, _ = _cli(capsys, "inspect", bad_log)
    assert rc == 0 and shown in table


def test_inspect_per_file_keys_wiring_and_warnings_name_it_the_same_way(capsys, tmp_path):
    stock = tmp_path / os.fsdecode(b"stock-\xfe.log")
    stock.write_text("[2026-11-30 10:00:00 TP0] EAGLE-3 aux wiring: ids [2, 30, 58] (layer outputs, draft "
                     "eagle_config) -> capture positions [3, 31, 59] of 61; stock SGLang 0.5.23 would capture "
                     "[2, 30, 58]\n"
                     "[2026-11-30 10:00:09 TP0] Decode batch, #running-req: 1, #token: 99, token usage: 0.01, "
                     "accept len: 2.10, accept rate: 0.55, cuda graph: True, gen throughput (token/s): 150.00, "
                     "#queue-req: 0\n")
    missing = tmp_path / os.fsdecode(b"gone-\xfd.log")
    rc, out, err = _cli(capsys, "inspect", stock, missing, "--json")
    assert rc == 0
    doc = _strict(out)
    shown = str(tmp_path / "stock-\\xfe.log")
    assert list(doc["decode_batch"]["per_file"]) == [shown]
    assert [w["file"] for w in doc["wiring"]] == [shown] and doc["wiring"][0]["positions"] == "3,31,59"
    # stderr as well: the escapes the JSON holds, not Python's \udcfd
    gone = str(tmp_path / "gone-\\xfd.log")
    assert f"{gone}: skipped: no such file" in err and "\\udc" not in err
    rc, _, err = _cli(capsys, "inspect", missing)
    assert rc == 2 and err == f"eagle-cycle inspect: error: nothing to inspect: {gone}: no such file\n"


def test_inspect_trace_and_a_jsonl_rank_are_strict_utf8(capsys, bad_log, tmp_path):
    # a JSONL record's rank is any text: a "\udcff" escape there read back as a lone surrogate
    jsonl = tmp_path / "cycles.jsonl"
    rec = {"cycle": 1, "bs": 1, "steps": 2, "topk": 1, "draft_tokens": 3, "draft_ms": 0.5, "verify_ms": 20.0,
           "verify_fwd_ms": 19.0, "extend_ms": 0.4, "other_ms": 0.6, "total_ms": 21.5, "accept_len": 2.0,
           "accepts": [2], "tok_s": 93.0, "graph": 1, "rank": "tp\udcff"}
    jsonl.write_text(json.dumps(rec) + "\n")
    trace = tmp_path / "t.json"
    rc, out, err = _cli(capsys, "inspect", bad_log, jsonl, "--json", "--trace", trace)
    assert rc == 0, err
    doc = _strict(out)
    assert doc["groups"][-1]["ranks"] == ["tp\\xff"]
    events = _strict(trace.read_text(encoding="utf-8"))["traceEvents"]
    names = [e["args"]["name"] for e in events if e["ph"] == "M"]
    assert str(tmp_path / "run-\\xff.log") in names and "tp\\xff" in names


def test_advise_json_names_the_inputs_in_strict_utf8(capsys, bad_log, tmp_path):
    rc, out, err = _cli(capsys, "inspect", bad_log, "--json")
    doc_path = tmp_path / os.fsdecode(b"doc-\xfe.json")
    doc_path.write_text(out)
    plan = tmp_path / os.fsdecode(b"plan-\xfa.json")
    rc, out, err = _cli(capsys, "advise", bad_log, doc_path, "--baseline-tok-s", "30", "--adaptive-config", plan,
                        "--json")
    assert rc == 0, err
    doc = _strict(out)
    texts = list(_texts(doc))
    assert not any("\\udc" in t for t in texts)
    assert doc["adaptive_config"]["path"] == str(tmp_path / "plan-\\xfa.json")
    assert any(t.startswith(str(tmp_path / "run-\\xff.log")) for t in texts)
    assert any(t.startswith(str(tmp_path / "doc-\\xfe.json")) for t in texts)
    # the text output (a note names both inputs) on a strict UTF-8 stdout: the same names, no traceback
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:strict", "PYTHONPATH": str(REPO / "python")}
    proc = subprocess.run([sys.executable, "-m", "sglang_eagle_cycle.cli", "advise", os.fsencode(bad_log),
                           os.fsencode(doc_path), "--baseline-tok-s", "30"], capture_output=True, env=env, timeout=120)
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr[-2000:]
    text = proc.stdout.decode("utf-8")
    assert "run-\\xff.log" in text and "doc-\\xfe.json" in text


def test_bench_records_are_strict_utf8_and_their_log_is_still_found(capsys, bad_log, tmp_path):
    """The sweep's records carry the model path and the server log's path: written with the escapes,
    read back under the same resume key, and advise still knows that log when it is given beside them."""
    from sglang_eagle_cycle.report import inspect_paths
    from sglang_eagle_cycle.sweep.records import RecordLog, new_record, record_key

    grp = inspect_paths([str(bad_log)])["groups"][0]
    model = os.fsdecode(b"/models/m\xe9")
    rec = new_record(model=model, draft="d", steps=2, topk=1, num_draft_tokens=3, concurrency=1, status="ok",
                     output_tok_s=grp["tok_s"], accept_hist=grp["accept_hist"], accept_len_mean=grp["accept_len_mean"],
                     cycle=None, server_log=str(bad_log), settings={"server_args": [os.fsdecode(b"--x=\xff")]})
    out = tmp_path / "sweep.jsonl"
    log = RecordLog(out)
    log.append(rec)
    line = out.read_bytes().decode("utf-8")
    back = _strict(line)
    assert back["model"] == "/models/m\\xe9" and back["server_log"] == str(tmp_path / "run-\\xff.log")
    assert back["settings"]["server_args"] == ["--x=\\xff"]
    assert record_key(back) == record_key(rec)   # a resumed sweep knows the run as measured
    assert logfiles.path_of_label(back["server_log"]) == str(bad_log) and logfiles.names_input(back["server_log"], str(bad_log))
    rc, text, err = _cli(capsys, "advise", out, bad_log, "--baseline-tok-s", "30", "--json")
    assert rc == 0, err
    doc = _strict(text)
    assert len(doc["inputs"]["runs"]) == 1 and "count twice" not in err
    assert any("its cycles stand for bench record" in n for n in doc["inputs"]["notes"])


def test_a_utf8_name_that_spells_an_escape_is_read_as_written(tmp_path):
    literal = tmp_path / "run-\\xff.log"    # valid UTF-8: backslash, x, f, f
    literal.write_text("x\n")
    raw = tmp_path / os.fsdecode(b"run-\xff.log")
    raw.write_text("y\n")
    assert logfiles.path_of_label(str(literal)) == str(literal)   # the name as written first
    literal.unlink()
    assert logfiles.path_of_label(str(literal)) == str(raw)
    assert logfiles.path_of_label(str(tmp_path / "none-\\xff.log")) == str(tmp_path / "none-\\xff.log")
