"""What inspect (and advise, where it shares the message) tells a new user: counts in the singular
where they are 1, a file given twice, a JSON file of another kind, and compressed inputs other than
gzip (helper 78). Every case checks the exact text and the exit code."""

from __future__ import annotations

import bz2
import contextlib
import io
import json
import lzma
import random
from pathlib import Path

import pytest

from cyclegen import generate, log_lines
from sglang_eagle_cycle import cli
from sglang_eagle_cycle.cycle import format_line, make_record

STOCK = ("[2026-11-12 09:14:02 TP0] Decode batch. #running-req: 1, #token: 108, token usage: 0.00, accept len: "
         "{len}, accept rate: {rate}, cuda graph: True, gen throughput (token/s): 50.39, #queue-req: 0, \n")


def call(*argv):
    """``(rc, stdout, stderr)`` of ``eagle-cycle ARGV`` in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = cli.main([str(a) for a in argv])
        except SystemExit as exc:
            rc = exc.code
    return rc, out.getvalue(), err.getvalue()


def cycles_log(path: Path, cycles: int = 40, bs: int = 1) -> Path:
    run = generate(random.Random(3), bs, 3, cycles, [0.7, 0.5])
    path.write_text("\n".join(log_lines(run.records)) + "\n")
    return path


def one_cycle(path: Path, *, bs: int, accept: int, rank=None, cycle: int = 0, append: bool = False) -> Path:
    rec = make_record(cycle=cycle, config=(bs, 3, 1, 4),
                      phases_ms={"draft_ms": 1.0, "verify_ms": 20.0, "verify_fwd_ms": 19.5, "extend_ms": 0.5,
                                 "other_ms": 0.5, "total_ms": 22.0},
                      accepts=[accept] * bs, graph=True, rank=rank)
    with path.open("a" if append else "w") as fh:
        fh.write(f"[2026-11-30 10:00:00 TP0] {format_line(rec)}\n")
    return path


def findings(out: str) -> dict:
    return {f["code"]: f["message"] for f in json.loads(out)["findings"]}


# --- 1. "1 cycles" --------------------------------------------------------------------------------


def test_one_cycle_is_singular_in_the_table_header(tmp_path):
    log = one_cycle(tmp_path / "one.log", bs=1, accept=2)
    rc, out, err = call("inspect", log)
    assert rc == 0 and err == ""
    assert "\n1 cycle, accept length 2.00, " in out and "1 cycles" not in out
    rc, out, _ = call("inspect", cycles_log(tmp_path / "two.log", cycles=2))
    assert rc == 0 and "\n2 cycles, accept length " in out


def test_one_cycle_is_singular_in_the_group_findings(tmp_path):
    stuck = one_cycle(tmp_path / "stuck.log", bs=12, accept=1)
    rc, out, _ = call("inspect", stuck, "--json")
    assert rc == 0
    assert findings(out)["accept_len_stuck_at_1"].startswith(
        f"{stuck} bs=12 steps=3 topk=1 draft_tokens=4: mean accept length 1.00 over 1 cycle (100% of requests")
    full = one_cycle(tmp_path / "full.log", bs=10, accept=4)
    rc, out, _ = call("inspect", full, "--json")
    assert rc == 0
    assert findings(out)["accept_len_equals_draft_tokens"].startswith(
        f"{full} bs=10 steps=3 topk=1 draft_tokens=4: every request of the one cycle accepted every draft token")


def test_one_interval_is_singular_in_the_stock_findings(tmp_path):
    stuck = tmp_path / "stuck.log"
    stuck.write_text(STOCK.format(len="1.00", rate="0.00"))
    rc, out, _ = call("inspect", stuck, "--json")
    assert rc == 0 and findings(out)["accept_len_stuck_at_1"].startswith(
        f"{stuck}: stock Decode batch lines report mean accept length 1.00 over 1 interval: the draft")
    full = tmp_path / "full.log"
    full.write_text(STOCK.format(len="4.00", rate="1.00"))
    rc, out, _ = call("inspect", full, "--json")
    assert rc == 0 and findings(out)["accept_len_equals_draft_tokens"].startswith(
        f"{full}: the one Decode batch interval reports accept rate 1.00 (all draft tokens accepted)")
    full.write_text(STOCK.format(len="4.00", rate="1.00") * 2)
    rc, out, _ = call("inspect", full, "--json")
    assert rc == 0 and findings(out)["accept_len_equals_draft_tokens"].startswith(
        f"{full}: every one of 2 Decode batch intervals reports accept rate 1.00")


def test_one_damaged_line_is_singular(tmp_path):
    bad = tmp_path / "bad.log"
    bad.write_text(one_cycle(tmp_path / "x.log", bs=1, accept=2).read_text().replace("total_ms=22.00", "total_ms=0"))
    rc, out, err = call("inspect", bad)
    assert rc == 2 and out == ""
    assert err == (f"eagle-cycle inspect: error: nothing to inspect: {bad}: no [eagle-cycle], JSONL or Decode batch "
                   f"line (0 other, 1 damaged line: `eagle-cycle inspect {bad} --show-rejected 5` says why)\n")
    # with --show-rejected the line and its reason were printed just above: no command to run again
    rc, out, err = call("inspect", bad, "--show-rejected", "3")
    assert rc == 2 and out == "" and err.count("rejected: ") == 1
    assert err.splitlines()[-1] == (f"eagle-cycle inspect: error: nothing to inspect: {bad}: no [eagle-cycle], JSONL "
                                    "or Decode batch line (0 other, 1 damaged line)")
    good = cycles_log(tmp_path / "good.log")
    rc, _, err = call("inspect", good, bad)
    assert rc == 0
    assert err == (f"eagle-cycle inspect: warning: {bad}: no [eagle-cycle], JSONL or Decode batch line "
                   "(0 other, 1 damaged line)\n")


def test_one_trace_record_left_out_is_singular(tmp_path):
    log = cycles_log(tmp_path / "two.log", cycles=2)
    trace = tmp_path / "t.json"
    rc, _, err = call("inspect", log, "--trace", trace, "--trace-max-cycles", 1)
    assert rc == 0
    assert err == (f"eagle-cycle inspect: warning: {trace}: 1 cycle record beyond --trace-max-cycles 1 per track "
                   "was left out\n")


@pytest.mark.parametrize("flags, words", [
    (["--trace-max-cycles", 5], "--trace-max-cycles applies to the --trace file: give --trace FILE.json too"),
    (["--model-name", "kimi"], "--model-name labels the --prometheus series: give --prometheus FILE too"),
])
def test_an_option_of_an_output_not_asked_for_is_refused(tmp_path, flags, words):
    # helper 81: both were dropped without a word
    log = cycles_log(tmp_path / "two.log", cycles=2)
    rc, out, err = call("inspect", log, *flags)
    assert rc == 2 and out == "" and err == f"eagle-cycle inspect: error: {words}\n"


def test_one_group_of_every_ranks_lines_is_singular(tmp_path):
    log = one_cycle(tmp_path / "ranks.log", bs=1, accept=2, rank="tp0")
    one_cycle(log, bs=1, accept=2, rank="tp1", append=True)
    prom = tmp_path / "m.prom"
    rc, _, err = call("inspect", log, "--prometheus", prom)
    assert rc == 0 and prom.is_file()
    assert err.startswith(f"eagle-cycle inspect: warning: {prom}: 1 group holds every rank's line of each cycle "
                          "(2 lines for 1 cycle): its phase histograms count each rank's times, its cycle and "
                          "acceptance counters each cycle once, so ")
    assert err.count("\n") == 1


# --- 2. the same file twice -----------------------------------------------------------------------


def test_a_file_given_twice_is_said_so(tmp_path):
    log = cycles_log(tmp_path / "server.log")
    rc, out, err = call("inspect", log, log, "--json")
    assert rc == 0 and json.loads(out)["files"] == [str(log)]
    assert err == f"eagle-cycle inspect: warning: {log}: given twice; read once\n"
    rc, _, err = call("inspect", log, log, log, "--json")
    assert rc == 0 and err == f"eagle-cycle inspect: warning: {log}: given 3 times; read once\n"
    # another name for the file still names the first
    alias = tmp_path / "alias.log"
    alias.symlink_to(log)
    rc, _, err = call("inspect", log, alias, "--json")
    assert rc == 0 and err == f"eagle-cycle inspect: warning: {alias}: same file as {log}; read once\n"


def test_advise_says_a_file_was_given_twice(tmp_path):
    log = cycles_log(tmp_path / "server.log")
    rc, _, err = call("advise", log, log, "--baseline-tok-s", "40", "--json")
    assert rc == 0 and err == f"eagle-cycle advise: warning: {log}: given twice; read once\n"
    rc, _, err = call("advise", log, log, log, "--baseline-tok-s", "40", "--json")
    assert rc == 0 and err == f"eagle-cycle advise: warning: {log}: given 3 times; read once\n"


# --- 3. a JSON file of another kind ---------------------------------------------------------------


def test_inspects_own_trace_is_named_as_such(tmp_path):
    log = cycles_log(tmp_path / "server.log")
    trace = tmp_path / "cycles.trace.json"
    assert call("inspect", log, "--trace", trace)[0] == 0
    rc, out, err = call("inspect", trace)
    assert rc == 2 and out == ""
    assert err == (f"eagle-cycle inspect: error: nothing to inspect: {trace}: a Chrome trace written by "
                   "`eagle-cycle inspect --trace` (open it in https://ui.perfetto.dev), not a server log\n")
    rc, _, err = call("inspect", trace, log)
    assert rc == 0
    assert err == (f"eagle-cycle inspect: warning: {trace}: skipped: a Chrome trace written by "
                   "`eagle-cycle inspect --trace` (open it in https://ui.perfetto.dev), not a server log\n")


def test_other_chrome_trace_and_json_documents_are_named(tmp_path):
    other = tmp_path / "profile.json"
    other.write_text(json.dumps({"traceEvents": [{"name": "x", "ph": "X", "ts": 0, "dur": 1, "pid": 1, "tid": 1}]}))
    rc, _, err = call("inspect", other)
    assert rc == 2 and err == (f"eagle-cycle inspect: error: nothing to inspect: {other}: a Chrome trace "
                               "(trace-event JSON), not a server log\n")
    log = cycles_log(tmp_path / "server.log")
    doc = tmp_path / "report.json"
    assert call("inspect", log, "--json")[0] == 0
    doc.write_text(call("inspect", log, "--json")[1])
    rc, _, err = call("inspect", doc)
    assert rc == 2 and err == (f"eagle-cycle inspect: error: nothing to inspect: {doc}: an `eagle-cycle inspect "
                               f"--json` document, not a server log: read it with `eagle-cycle advise {doc}`\n")
    plain = tmp_path / "config.json"
    plain.write_text(json.dumps({"a": 1, "b": [1, 2]}, indent=2))
    rc, _, err = call("inspect", plain)
    assert rc == 2 and err == (f"eagle-cycle inspect: error: nothing to inspect: {plain}: JSON of another kind, "
                               "not a server log (no [eagle-cycle] line, eagle-cycle JSONL record or Decode batch "
                               "line in it)\n")


def test_an_inspect_document_is_sent_to_advise_only_where_advise_can_use_it(tmp_path, shared_data):
    # a document of stock lines without their depth: inspect had said "read it with `eagle-cycle
    # advise insp.json`", and that advise failed (exit 2, "does not carry the depth")
    doc = tmp_path / "insp.json"
    rc, out, _ = call("inspect", shared_data / "logs" / "decode_batch_variants.log", "--json")
    assert rc == 0
    doc.write_text(out)
    rc, _, err = call("inspect", doc)
    assert rc == 2 and err == (
        f"eagle-cycle inspect: error: nothing to inspect: {doc}: an `eagle-cycle inspect --json` document, not a "
        "server log, made from stock Decode batch lines without the depth they ran at (a document does not carry "
        "the log's server_args= line, which names the server's --speculative-num-steps, and their accept len and "
        "accept rate pin none): `eagle-cycle advise` cannot use it either, and takes the depth from no flag: give "
        "advise the server log itself, with its start-up server_args= line\n")
    assert "eagle-cycle advise " + str(doc) not in err
    rc, _, err = call("advise", doc)
    assert rc == 2 and "does not carry the depth" in err
    # stock lines whose accept len and accept rate pin the depth (num_draft_tokens 4): advise reads it
    pinned = tmp_path / "pinned.log"
    pinned.write_text("".join(STOCK.format(len=f"{1 + 3 * r:.2f}", rate=f"{r:.2f}") for r in (0.4, 0.5, 0.6, 0.7)))
    doc.write_text(call("inspect", pinned, "--json")[1])
    rc, _, err = call("inspect", doc)
    assert rc == 2 and err.endswith(f"not a server log: read it with `eagle-cycle advise {doc}`\n")
    assert call("advise", doc)[0] == 0
    # stock lines without speculation: a baseline, read beside a run
    plain = tmp_path / "nospec.log"
    plain.write_text(STOCK.replace("accept len: {len}, accept rate: {rate}, ", "") * 4)
    doc.write_text(call("inspect", plain, "--json")[1])
    rc, _, err = call("inspect", doc)
    assert rc == 2 and err.endswith(
        f"not a server log: its Decode batch lines ran without speculation, a no-spec baseline: give it to "
        f"`eagle-cycle advise` beside a speculative run's log or document (`eagle-cycle advise RUN {doc}`)\n")
    # one cut short: no command that would fail on it
    doc.write_text(call("inspect", pinned, "--json")[1][:200])
    rc, _, err = call("inspect", doc)
    assert rc == 2 and err.endswith("not a server log, but not valid JSON (line 9, column 2: Unterminated string "
                                    "starting at)\n")


def test_the_show_rejected_hint_names_the_file_shell_quoted(tmp_path):
    # a document that quotes [eagle-cycle] lines and damaged ones (a README, notes): the hint had
    # said `eagle-cycle inspect LOG --show-rejected 5`, LOG for the user to replace
    good = log_lines(generate(random.Random(3), 1, 3, 2, [0.7, 0.5]).records)
    notes = tmp_path / "my notes's.md"
    notes.write_text("# What the server printed\n\n```\n" + good[0].replace(" bs=1 ", " bs=x ") + "\n"
                     + good[1].replace("total_ms=", "total_ms=-") + "\n```\n")
    for command, what in (("inspect", "inspect"), ("advise", "advise on")):
        rc, out, err = call(command, notes)
        assert rc == 2 and out == ""
        assert err == (f"eagle-cycle {command}: error: nothing to {what}: {notes}: no [eagle-cycle], JSONL or Decode "
                       "batch line (4 other, 2 damaged lines: `eagle-cycle inspect "
                       f"'{tmp_path}/my notes'\"'\"'s.md' --show-rejected 5` says why)\n")
    # the command as given works: it lists both lines
    rc, _, err = call("inspect", notes, "--show-rejected", "5")
    assert rc == 2 and [ln.split(": ")[2] for ln in err.splitlines()[:2]] == [f"{notes}:4", f"{notes}:5"]


def test_invalid_json_is_named_not_called_another_kind(tmp_path):
    # a lone "{" was "JSON of another kind"; it is no JSON at all
    brace = tmp_path / "cut.json"
    brace.write_text("{\n")
    rc, out, err = call("inspect", brace)
    assert rc == 2 and out == ""
    assert err == (f"eagle-cycle inspect: error: nothing to inspect: {brace}: not valid JSON (line 1, column 2: "
                   "Expecting property name enclosed in double quotes; the input ends there: cut short?), not a "
                   "server log\n")
    # a document broken in its middle; JSON lines whose second record is cut short
    broken = tmp_path / "broken.json"
    broken.write_text('{"a": 1,\n "b": [1, 2}\n')
    lines = tmp_path / "cut.jsonl"
    lines.write_text('{"a": 1}\n{"b": 2')
    rc, _, err = call("inspect", broken, lines)
    assert rc == 2 and err == (f"eagle-cycle inspect: error: nothing to inspect: {broken}: not valid JSON (line 2, "
                               f"column 12: Expecting ',' delimiter), not a server log; {lines}: not valid JSON "
                               f"(line 2, column 8: Expecting ',' delimiter; the input ends there: cut short?), "
                               f"not a server log\n")
    # whole JSON lines of another schema keep their words
    lines.write_text('{"a": 1}\n{"b": 2}\n')
    rc, _, err = call("inspect", lines)
    assert rc == 2 and err == (f"eagle-cycle inspect: error: nothing to inspect: {lines}: JSON of another kind, "
                               "not a server log (no [eagle-cycle] line, eagle-cycle JSONL record or Decode batch "
                               "line in it)\n")


def test_bench_jsonl_is_named_in_one_line(tmp_path):
    bench = tmp_path / "sweep.jsonl"
    rec = {"schema": "eagle-cycle-bench/1", "model": "m", "steps": 2, "topk": 1, "num_draft_tokens": 3,
           "concurrency": 1, "status": "ok", "output_tok_s": 88.0, "cycle": {"accept_hist": {"1": 2}}}
    bench.write_text(json.dumps(rec) + "\n")
    rc, out, err = call("inspect", bench)
    assert rc == 2 and out == ""
    assert err == (f"eagle-cycle inspect: error: nothing to inspect: {bench}: eagle-cycle bench JSONL (a sweep's "
                   f"records), not a server log: read it with `eagle-cycle advise {bench}`\n")
    log = cycles_log(tmp_path / "server.log")
    rc, _, err = call("inspect", bench, log)
    assert rc == 0
    assert err == (f"eagle-cycle inspect: warning: {bench}: skipped: eagle-cycle bench JSONL (a sweep's records), "
                   f"not a server log: read it with `eagle-cycle advise {bench}`\n")


def test_a_trace_as_baseline_log_is_named(tmp_path):
    log = cycles_log(tmp_path / "server.log")
    trace = tmp_path / "t.json"
    assert call("inspect", log, "--trace", trace)[0] == 0
    rc, _, err = call("inspect", log, "--baseline", trace)
    assert rc == 2 and err == (f"eagle-cycle inspect: error: baseline log {trace}: a Chrome trace written by "
                               "`eagle-cycle inspect --trace` (open it in https://ui.perfetto.dev), not a server log\n")


def test_our_jsonl_and_collector_json_are_still_read(tmp_path):
    """JSON that is a log stays a log: our cycle JSONL, a docker json-file log, all damaged JSONL."""
    from sglang_eagle_cycle.cycle import to_json

    run = generate(random.Random(3), 1, 3, 5, [0.7, 0.5])
    jsonl = tmp_path / "cycles.jsonl"
    jsonl.write_text("".join(to_json(r) + "\n" for r in run.records))
    rc, out, err = call("inspect", jsonl, "--json")
    assert rc == 0 and err == "" and json.loads(out)["groups"][0]["cycles"] == 5
    docker = tmp_path / "docker-json.log"
    docker.write_text("".join(json.dumps({"log": ln + "\n", "stream": "stderr", "time": "t"}) + "\n"
                              for ln in log_lines(run.records)))
    rc, out, err = call("inspect", docker, "--json")
    assert rc == 0 and err == "" and json.loads(out)["groups"][0]["cycles"] == 5
    broken = tmp_path / "broken.jsonl"
    broken.write_text(to_json(run.records[0]).replace('"total_ms":', '"total_ms":-') + "\n")
    rc, _, err = call("inspect", broken)
    assert rc == 2 and err == (f"eagle-cycle inspect: error: nothing to inspect: {broken}: no [eagle-cycle], JSONL "
                               f"or Decode batch line (0 other, 1 damaged line: `eagle-cycle inspect {broken} "
                               "--show-rejected 5` says why)\n")


# --- 4. bz2, xz, zstd -----------------------------------------------------------------------------


def _compressed(tmp_path: Path, kind: str, text: bytes) -> Path:
    path = tmp_path / f"server.log.{kind}"
    if kind == "bz2":
        path.write_bytes(bz2.compress(text))
    elif kind == "xz":
        path.write_bytes(lzma.compress(text))
    else:   # a zstd frame's magic number, then bytes (the standard library has no zstd before 3.14)
        path.write_bytes(b"\x28\xb5\x2f\xfd" + random.Random(0).randbytes(200))
    return path


def test_bz2_xz_zstd_are_named_not_called_binary(tmp_path):
    good = cycles_log(tmp_path / "good.log")
    for kind in ("bz2", "xz", "zstd"):
        path = _compressed(tmp_path, kind, good.read_bytes())
        rc, out, err = call("inspect", path)
        assert rc == 2 and out == ""
        assert err == (f"eagle-cycle inspect: error: nothing to inspect: {path}: compressed with {kind}: "
                       "decompress it first (gzip is read directly)\n"), kind
        rc, _, err = call("inspect", good, path)
        assert rc == 0
        assert err == (f"eagle-cycle inspect: warning: {path}: skipped: compressed with {kind}: decompress it "
                       "first (gzip is read directly)\n"), kind
        rc, _, err = call("advise", path, "--baseline-tok-s", "40")
        assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err
        assert f"{path}: compressed with {kind}: decompress it first (gzip is read directly)" in err, kind


def test_random_bytes_are_still_binary(tmp_path):
    path = tmp_path / "noise.log"
    path.write_bytes(random.Random(1).randbytes(1 << 16))
    rc, _, err = call("inspect", path)
    assert rc == 2 and f"{path}: binary data, not a text log" in err


def test_gzip_of_xz_is_named(tmp_path):
    import gzip

    good = cycles_log(tmp_path / "good.log")
    path = tmp_path / "twice.log.xz.gz"
    path.write_bytes(gzip.compress(lzma.compress(good.read_bytes())))
    rc, _, err = call("inspect", path)
    assert rc == 2 and err == (f"eagle-cycle inspect: error: nothing to inspect: {path}: gzip of xz-compressed data: "
                               "decompress the xz inside too (gzip alone is read directly)\n")
