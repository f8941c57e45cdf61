"""What real logs break on (issue 14, "Logs"): damaged bytes, colour codes, per-rank lines, impossible values.

Each test here failed on the reader before the fix: a NUL in the first 8 KiB refused the whole log,
colour codes at a line's end made it damaged, tp0 and tp1 lines of one cycle counted twice, and
impossible lines (total_ms=0, parts above the total, accepts not one per request, bs beyond any
batch, a JSONL record without accepts) counted as cycles.
"""

from __future__ import annotations

import gzip
import json
import random
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from cyclegen import generate, log_lines
from sglang_eagle_cycle import bulkscan, cli, cycle
from sglang_eagle_cycle.argtypes import MAX_BS
from sglang_eagle_cycle.cycle import to_json
from sglang_eagle_cycle.report import inspect_paths, replica_of

P = [0.8, 0.6, 0.45]


def run_cli(capsys, *args) -> tuple[int, str, str]:
    rc = cli.main(["inspect", *map(str, args)])
    out, err = capsys.readouterr()
    return rc, out, err


def _slow(paths, **kw):
    """The per-line path: an on_record hook turns the bulk reader off."""
    return inspect_paths(paths, on_record=lambda label, rec: None, **kw)


def _without_files(doc: dict) -> dict:
    doc = json.loads(json.dumps(doc))
    doc.pop("files")
    for g in doc["groups"]:
        g.pop("file")
    for f in doc["findings"]:
        f["file"] = None
        f["message"] = re.sub(r"^\S+ ", "", f["message"])
    return doc


# --- 1. one bad line must not cost the whole log ---------------------------------------------------


def _corrupt(rng: random.Random, size: int = 300) -> bytes:
    """Random bytes with a NUL and a 0xFF in them, and no line break."""
    body = [b for b in (rng.randrange(256) for _ in range(size)) if b not in (10, 13)]
    body[rng.randrange(len(body))] = 0
    body[rng.randrange(len(body))] = 0xFF
    return bytes(body)


@pytest.fixture(scope="module")
def corrupt_log(tmp_path_factory):
    rng = random.Random(1401)
    run = generate(rng, bs=2, steps=3, cycles=10_000, p=P, spans=True)
    lines = [ln.encode() for ln in log_lines(run.records)]
    first_kib = next(i for i in range(len(lines)) if sum(len(x) + 1 for x in lines[:i + 1]) > 8192 - 400)
    at = sorted([0, rng.randrange(1, first_kib), rng.randrange(first_kib + 1, len(lines))])
    for offset, i in enumerate(at):
        lines.insert(i + offset, _corrupt(rng))   # line 1, one inside the first 8 KiB, one anywhere
    data = b"\n".join(lines) + b"\n"
    assert b"\x00" in data[:8192]
    folder = tmp_path_factory.mktemp("corrupt")
    plain = folder / "server.log"
    plain.write_bytes(data)
    packed = folder / "server.log.gz"
    packed.write_bytes(gzip.compress(data))
    return plain, packed


@pytest.mark.parametrize("which", ["plain", "gzip"])
def test_three_corrupt_lines_cost_three_lines(capsys, corrupt_log, which):
    path = corrupt_log[0] if which == "plain" else corrupt_log[1]
    rc, out, err = run_cli(capsys, path, "--json")
    assert rc == 0 and err == ""
    doc = json.loads(out)
    assert sum(g["cycles"] for g in doc["groups"]) == 10_000
    assert doc["unparsed_lines"] + doc["other_lines"] == 3


def test_corrupt_lines_same_report_both_paths(corrupt_log):
    plain, packed = corrupt_log
    fast = inspect_paths([plain])
    assert _without_files(fast) == _without_files(inspect_paths([packed]))
    assert _without_files(fast) == _without_files(_slow([plain]))


@pytest.mark.parametrize("size", [300, 5000, 400_000])
def test_random_bytes_still_refused(capsys, tmp_path, size):
    rng = random.Random(size)
    path = tmp_path / "noise.bin"
    path.write_bytes(bytes(rng.randrange(256) for _ in range(size)))
    rc, out, err = run_cli(capsys, path)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and "binary" in err and "% of the first" in err and "Traceback" not in err


def test_binary_needs_more_than_the_first_chunk(tmp_path):
    # 8 KiB of noise, then a long clean log: the first chunk alone looks binary, the file is mostly text
    rng = random.Random(7)
    run = generate(rng, bs=1, steps=2, cycles=3000, p=P[:2])
    noise = bytes(rng.randrange(256) for _ in range(8192)).replace(b"\n", b" ")
    path = tmp_path / "noisy.log"
    path.write_bytes(noise + b"\n" + ("\n".join(log_lines(run.records)) + "\n").encode())
    doc = inspect_paths([path])
    assert doc["groups"][0]["cycles"] == 3000


# --- 2. colour codes anywhere in a line ------------------------------------------------------------


def _coloured(line: str) -> str:
    line = line.replace("TP0]", "TP0]\x1b[0m \x1b[1;32mINFO\x1b[0m", 1)
    line = line.replace(" verify_ms=", " \x1b[33mverify_ms=", 1).replace(" extend_ms=", "\x1b[0m extend_ms=", 1)
    return "\x1b[32m" + line + "\x1b[0m"


def test_colour_codes_give_the_same_report(capsys, tmp_path):
    rng = random.Random(1402)
    runs = [generate(rng, bs=1, steps=3, cycles=300, p=P, spans=True),
            generate(rng, bs=4, steps=2, cycles=200, p=P[:2])]
    lines = [ln.replace("TP0]", "TP0] INFO", 1) for r in runs for ln in log_lines(r.records)]
    plain = tmp_path / "plain.log"
    plain.write_text("\n".join(lines) + "\n")
    colour = tmp_path / "colour.log"
    colour.write_text("\n".join(_coloured(ln.replace("TP0] INFO", "TP0]", 1)) for ln in lines) + "\n")
    docs = []
    for path in (plain, colour):
        rc, out, err = run_cli(capsys, path, "--json")
        assert rc == 0 and err == ""
        docs.append(_without_files(json.loads(out)))
    assert docs[0] == docs[1]
    assert docs[1]["unparsed_lines"] == 0 and sum(g["cycles"] for g in docs[1]["groups"]) == 500


def _tput(line: str) -> str:
    """``tput setaf 2`` / ``tput sgr0`` colours: sgr0 writes ``ESC ( B`` before ``ESC [ m``; a terminal
    reset (``ESC c``), cursor save / restore (``ESC 7`` / ``ESC 8``) and keypad modes (``ESC =``)."""
    return "\x1b7\x1b[32m" + line.replace(" verify_ms=", "\x1b(B\x1b[m verify_ms=", 1) + "\x1b(B\x1b[m\x1b8\x1b=\x1bc"


def test_designations_and_one_character_escapes_are_colour_codes_too(capsys, tmp_path):
    # tput sgr0's ESC ( B was left in: every line of such a log was damaged (helper 43)
    run = generate(random.Random(1404), bs=1, steps=3, cycles=200, p=P, spans=True)
    lines = log_lines(run.records)
    plain, coloured = tmp_path / "plain.log", tmp_path / "tput.log"
    plain.write_text("\n".join(lines) + "\n")
    coloured.write_text("\n".join(map(_tput, lines)) + "\n")
    docs = []
    for path in (plain, coloured):
        rc, out, err = run_cli(capsys, path, "--json")
        assert rc == 0 and err == ""
        docs.append(_without_files(json.loads(out)))
    assert docs[0] == docs[1] and docs[1]["groups"][0]["cycles"] == 200


@pytest.mark.parametrize("cut", ["gap_ms=0.2", "graph=1", "rank=t"])
def test_an_unterminated_last_line_is_damaged_wherever_it_was_cut(capsys, tmp_path, cut):
    """A server still writing its last line, or one that crashed mid-line, can leave it cut at a field
    boundary where it still parses (helper 43: ``gap_ms=0.2`` for 0.24 was taken, a cut after ``graph=1``
    made a one-cycle group of older lines and advise refused the log, ``rank=t`` added a rank ``t``)."""
    rng = random.Random(1405)
    run = generate(rng, bs=1, steps=3, cycles=100, p=P, spans=True, rank="tp0")
    lines = [re.sub(r" gap_ms=\S+", " gap_ms=0.24", ln) for ln in log_lines(run.records)]
    key = cut.split("=")[0]
    last = lines[-1]
    lines[-1] = last[: last.index(f" {key}=") + 1 + len(cut)]
    assert lines[-1].endswith(cut)
    log = tmp_path / "writing.log"
    log.write_text("\n".join(lines))                      # no line end after the last line
    rc, out, err = run_cli(capsys, log, "--json", "--show-rejected", "5")
    doc = json.loads(out)
    assert rc == 0 and doc["unparsed_lines"] == 1 and [g["cycles"] for g in doc["groups"]] == [99]
    assert err.splitlines() == [f"eagle-cycle inspect: rejected: {log}:100: the input's last line, with no line "
                                f"end: cut while the server was writing it: {lines[-1]}"]
    # the same line with its line end is whole: it counts
    log.write_text("\n".join(lines[:-1] + [last]) + "\n")
    rc, out, _ = run_cli(capsys, log, "--json")
    assert json.loads(out)["unparsed_lines"] == 0
    # a JSONL record is no JSON when cut, so a whole one without its line end still counts
    jsonl = tmp_path / "cycles.jsonl"
    jsonl.write_text("\n".join(to_json(r) for r in run.records))
    rc, out, _ = run_cli(capsys, jsonl, "--json")
    assert json.loads(out)["groups"][0]["cycles"] == 100


def test_stock_lines_run_together_cr_only_line_ends_and_a_bom(capsys, tmp_path):
    """Two stock records on one line (interleaved writes) were one valid interval, later fields over
    the earlier; a log with CR-only line ends was one interval; a BOM before a JSONL file's first
    record dropped it (helper 43)."""
    stock = [f"[2026-11-30 10:00:{i:02d} TP0] Decode batch, #running-req: 1, #token: {90 + i}, token usage: 0.00, "
             f"accept len: {2.0 + i / 100:.2f}, accept rate: 0.33, cuda graph: True, gen throughput (token/s): "
             f"{100 + i:.2f}, #queue-req: 0" for i in range(20)]
    glued = stock[:5] + [stock[5] + stock[6]] + stock[7:]
    for name, text, intervals, damaged in (("glued.log", "\n".join(glued) + "\n", 18, 1),
                                           ("cr.log", "\r".join(stock) + "\r", 20, 0)):
        log = tmp_path / name
        log.write_text(text, newline="")
        rc, out, _ = run_cli(capsys, log, "--json")
        doc = json.loads(out)
        assert (rc, doc["decode_batch"]["intervals"], doc["unparsed_lines"]) == (0, intervals, damaged), name
    run = generate(random.Random(1406), bs=1, steps=3, cycles=50, p=P)
    jsonl = tmp_path / "bom.jsonl"
    jsonl.write_text("\ufeff" + "\n".join(to_json(r) for r in run.records) + "\n", encoding="utf-8")
    rc, out, _ = run_cli(capsys, jsonl, "--json")
    doc = json.loads(out)
    assert (doc["groups"][0]["cycles"], doc["unparsed_lines"], doc["other_lines"]) == (50, 0, 0)


def test_json_records_of_a_log_collector_are_read_as_their_lines(capsys, tmp_path):
    """Docker's json-file driver and ``journalctl -o json`` wrap each line in a JSON record: inspect
    counted every line damaged and advise called the file invalid JSON (helper 43). Docker splits a
    line over 16 KiB into records without a line end: here one line is split in three."""
    run = generate(random.Random(1407), bs=1, steps=3, cycles=120, p=P, spans=True)
    lines = log_lines(run.records) + ["[2026-11-30 10:00:09 TP0] Prefill batch, #new-seq: 1"]
    plain = tmp_path / "plain.log"
    plain.write_text("\n".join(lines) + "\n")
    docker, journal = [], []
    for i, ln in enumerate(lines):
        parts = [ln[:40], ln[40:90], ln[90:] + "\n"] if i == 7 else [ln + "\n"]
        docker += [json.dumps({"log": part, "stream": "stderr", "time": f"2026-11-30T10:00:{i % 60:02d}.1Z"})
                   for part in parts]
        journal.append(json.dumps({"__REALTIME_TIMESTAMP": str(1796000000000000 + i), "_PID": "42", "MESSAGE": ln}))
    wrapped = {"docker.log": "\n".join(docker) + "\n", "journal.json": "\n".join(journal) + "\n"}
    rc, out, _ = run_cli(capsys, plain, "--json")
    want = _without_files(json.loads(out))
    assert want["groups"][0]["cycles"] == 120 and want["unparsed_lines"] == 0
    for name, text in wrapped.items():
        path = tmp_path / name
        path.write_text(text)
        rc, out, err = run_cli(capsys, path, "--json")
        assert rc == 0 and err == "" and _without_files(json.loads(out)) == want, name
        assert cli.main(["advise", str(path), "--baseline-tok-s", "40", "--json"]) == 0, name
        assert json.loads(capsys.readouterr().out)["recommended"]["steps"] >= 0


def test_collector_records_cut_short_or_holding_bytes(capsys, tmp_path):
    """What helper 45 found: a ``tail -c`` cut or a plain first line hid the JSON records after it
    (every line damaged); journald writes a message with control characters as an array of byte
    values (those lines were dropped without a word, and as the first record made advise call the
    file invalid JSON); a record cut short at the end was read in part (``gap_ms=0.2`` of 0.24)."""
    run = generate(random.Random(1408), bs=1, steps=3, cycles=60, p=P, spans=True)
    lines = [re.sub(r" gap_ms=\S+", " gap_ms=0.24", ln) for ln in log_lines(run.records)]

    def record(i, ln):
        msg = list(("\x1b[32m" + ln + "\x1b[0m").encode()) if i % 4 == 0 else ln
        return json.dumps({"__REALTIME_TIMESTAMP": str(1796000000000000 + i), "_PID": "42", "MESSAGE": msg})

    records = [record(i, ln) for i, ln in enumerate(lines)]
    cases = {"bytes.json": "\n".join(records) + "\n",
             "tail_c.json": records[0][25:] + "\n" + "\n".join(records[1:]) + "\n",
             "plain_first.json": "Starting the server\n" + "\n".join(records) + "\n",
             "cut_last.json": "\n".join(records) + "\n" + record(61, lines[-1]).rsplit("gap_ms=", 1)[0]
             + "gap_ms=0.2"}
    want = {"bytes.json": (60, 0), "tail_c.json": (59, 0), "plain_first.json": (60, 0), "cut_last.json": (60, 1)}
    for name, text in cases.items():
        path = tmp_path / name
        path.write_text(text)
        rc, out, err = run_cli(capsys, path, "--json", "--show-rejected", "3")
        doc = json.loads(out)
        assert rc == 0 and (sum(g["cycles"] for g in doc["groups"]), doc["unparsed_lines"]) == want[name], name
        if name == "cut_last.json":
            assert "a log collector's JSON record cut short" in err
    assert cli.main(["advise", str(tmp_path / "bytes.json"), "--baseline-tok-s", "40", "--json"]) == 0


def test_show_rejected_names_file_line_and_reason(capsys, tmp_path):
    run = generate(random.Random(1403), bs=2, steps=3, cycles=40, p=P)
    lines = log_lines(run.records)
    lines[4] = re.sub(r"total_ms=\S+", "total_ms=0.00", lines[4])
    lines[9] = lines[9][:60]
    lines[20] = re.sub(r"accepts=\S+", "accepts=2", lines[20])
    path = tmp_path / "s.log"
    path.write_text("\n".join(lines) + "\n")
    rc, out, err = run_cli(capsys, path, "--json", "--show-rejected", "2")
    assert rc == 0 and json.loads(out)["unparsed_lines"] == 3
    shown = err.splitlines()
    assert len(shown) == 2
    assert shown[0].startswith(f"eagle-cycle inspect: rejected: {path}:5: total_ms=0")
    assert shown[1].startswith(f"eagle-cycle inspect: rejected: {path}:10: not the [eagle-cycle] layout")
    rc, _, err = run_cli(capsys, path, "--show-rejected", "5")
    assert rc == 0 and "s.log:21: accepts lists 1 requests for bs=2" in err
    with pytest.raises(SystemExit) as exc:   # argparse's own exit
        run_cli(capsys, path, "--show-rejected", "-1")
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--show-rejected: expected an integer >= 0, got -1" in err


# --- 3. per-rank lines are one cycle ---------------------------------------------------------------


def _rank_log(tmp_path: Path, ranks: list[str], cycles: int = 30, name: str = "ranks.log"):
    rng = random.Random(1404)
    base = generate(rng, bs=2, steps=3, cycles=cycles, p=P, spans=True)
    lines = []
    for rec in base.records:
        for k, rank in enumerate(ranks):
            other = replace(rec, rank=rank)
            if k:   # another rank: the same cycle, a little slower
                other = replace(other, verify_ms=round(rec.verify_ms + 0.5 * k, 2),
                                      total_ms=round(rec.total_ms + 0.5 * k, 2))
            lines.append(f"[2026-11-30 10:00:00 TP{k}] " + cycle.format_line(other))
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    single = tmp_path / ("one-" + name)
    single.write_text("\n".join(log_lines(base.records)) + "\n")
    return base, path, single


def test_tp_ranks_of_one_cycle_count_once(capsys, tmp_path):
    base, path, single = _rank_log(tmp_path, ["tp0", "tp1"])
    rc, out, err = run_cli(capsys, path, "--json")
    assert rc == 0 and err == ""
    (g,) = json.loads(out)["groups"]
    (one,) = inspect_paths([single])["groups"]
    assert (g["cycles"], g["cycle_lines"]) == (30, 60)
    assert g["accept_hist"] == one["accept_hist"] and g["accept_len_mean"] == one["accept_len_mean"]
    assert g["per_position_acceptance"] == one["per_position_acceptance"]
    spread = g["rank_spread"]
    assert spread["total_ms"]["spread"] == pytest.approx(0.5, abs=1e-6)
    assert spread["verify_ms"]["by_rank"]["tp1"] - spread["verify_ms"]["by_rank"]["tp0"] == pytest.approx(0.5)
    assert spread["draft_ms"]["spread"] == pytest.approx(0.0, abs=1e-9)
    # tok/s: committed tokens once, over one period per cycle (the ranks' mean period)
    mean_period = g["phases"]["total_ms"]["mean"] + g["phases"]["gap_ms"]["mean"]
    tokens = sum(int(k) * v for k, v in g["accept_hist"].items())
    assert g["tok_s"] == pytest.approx(tokens / (mean_period * 30) * 1000.0, rel=1e-6)
    rc, out, _ = run_cli(capsys, path)
    assert rc == 0 and "30 cycles" in out and "spread ms" in out


def test_attention_dp_replicas_are_separate_cycles(tmp_path):
    _, path, single = _rank_log(tmp_path, ["tp0.adp0", "tp1.adp0", "tp2.adp1", "tp3.adp1"])
    (g,) = inspect_paths([path])["groups"]
    (one,) = inspect_paths([single])["groups"]
    assert (g["cycles"], g["cycle_lines"]) == (60, 120)   # two replicas, each 30 cycles
    assert g["accept_hist"] == {k: 2 * v for k, v in one["accept_hist"].items()}
    assert replica_of("tp0.pp0.dp1") == ("dp1", "tp0.pp0") and replica_of("tp3") == ("", "tp3")


def test_restarted_rank_counts_its_cycles_again(tmp_path):
    base, path, _ = _rank_log(tmp_path, ["tp0", "tp1"])
    text = path.read_text()
    path.write_text(text + text)   # the server restarted: the same cycle ids again
    (g,) = inspect_paths([path])["groups"]
    assert g["cycles"] == 60


def test_trace_keeps_one_track_per_rank(capsys, tmp_path):
    _, path, _ = _rank_log(tmp_path, ["tp0", "tp1"])
    out = tmp_path / "t.json"
    rc, _, err = run_cli(capsys, path, "--trace", out)
    assert rc == 0 and err == ""
    events = json.loads(out.read_text())["traceEvents"]
    threads = {e["args"]["name"]: e["tid"] for e in events if e["name"] == "thread_name"}
    assert set(threads) == {"tp0", "tp1"}
    per_track = Counter(e["tid"] for e in events if e["name"] == "cycle")
    assert per_track == {threads["tp0"]: 30, threads["tp1"]: 30}


def test_rank_lines_in_jsonl_count_once(tmp_path):
    base = generate(random.Random(1405), bs=1, steps=2, cycles=25, p=P[:2], spans=True)
    path = tmp_path / "c.jsonl"
    path.write_text("".join(to_json(replace(r, rank=rank)) + "\n" for r in base.records for rank in ("tp0", "tp1")))
    (g,) = inspect_paths([path])["groups"]
    assert (g["cycles"], g["cycle_lines"]) == (25, 50)


# --- 4. impossible lines are damaged, not data -----------------------------------------------------


def _parts_over(ln: str) -> str:
    return re.sub(r"verify_ms=(\S+)", lambda m: f"verify_ms={float(m.group(1)) + 0.05:.2f}", ln)


def _parts_under(ln: str) -> str:
    return re.sub(r"total_ms=(\S+)", lambda m: f"total_ms={float(m.group(1)) + 0.05:.2f}", ln)


IMPOSSIBLE = {
    "total 0": lambda ln: re.sub(r"total_ms=\S+", "total_ms=0.00", ln),
    "total 0, no parts": lambda ln: re.sub(r"(draft_prep|draft|verify|extend|other|total)_ms=[^ ]+",
                                           r"\1_ms=0.00", ln),
    "parts above the total": _parts_over,
    "parts below the total (device spans)": _parts_under,
    "accepts fewer than bs": lambda ln: re.sub(r"accepts=\S+", "accepts=2", ln),
    "accepts more than bs": lambda ln: re.sub(r"accepts=\S+", "accepts=2,2,1", ln),
    "accepts empty": lambda ln: re.sub(r"accepts=\S+", "accepts=-", ln),
    "bs beyond any batch": lambda ln: re.sub(r"accepts=\S+", f"accept_hist=2:{MAX_BS + 1}",
                                             ln.replace(" bs=2 ", f" bs={MAX_BS + 1} ")),
}


@pytest.mark.parametrize("spans", [True, False], ids=["device-spans", "older"])
@pytest.mark.parametrize("kind", sorted(IMPOSSIBLE))
def test_impossible_line_is_damaged(tmp_path, kind, spans):
    run = generate(random.Random(1406), bs=2, steps=3, cycles=60, p=P, spans=spans)
    lines = log_lines(run.records)
    assert bulkscan.scan_chunk("\n".join(lines)) is not None
    lines[50] = IMPOSSIBLE[kind](lines[50])
    if kind.endswith("(device spans)") and not spans:
        assert cycle.parse_line(lines[50]) is not None   # older lines: the parts may fall short of the total
        return
    assert cycle.parse_line(lines[50]) is None and cycle.line_rejection(lines[50])
    text = "\n".join(lines) + "\n"
    n = text.count("\n")
    assert bulkscan._scan_array(text, n) is None and bulkscan._scan_tokens(text, n) is None
    path = tmp_path / "one.log"
    path.write_text(text)
    doc = inspect_paths([path])
    assert doc == _slow([path])
    (g,) = doc["groups"]
    assert (doc["unparsed_lines"], g["cycles"]) == (1, 59)


def test_rounding_of_the_parts_is_not_damage():
    run = generate(random.Random(1407), bs=1, steps=3, cycles=5, p=P, spans=True)
    line = log_lines(run.records)[2]
    for delta in (0.03, -0.03):   # six 2-decimal numbers: off by up to 0.03 ms
        edited = re.sub(r"total_ms=(\S+)", lambda m: f"total_ms={float(m.group(1)) + delta:.2f}", line)
        assert cycle.parse_line(edited) is not None, delta
        text = edited + "\n"
        assert bulkscan._scan_array(text, 1) is not None and bulkscan._scan_tokens(text, 1) is not None


@pytest.mark.parametrize("edit", [
    lambda d: {**d, "accepts": []},
    lambda d: {**d, "total_ms": 0.0},
    lambda d: {**d, "verify_ms": d["verify_ms"] + 5.0},
    lambda d: {**d, "bs": MAX_BS + 1},
    lambda d: {**d, "rank": ["TP0"]},
    lambda d: {**d, "rank": 5},
    lambda d: {**d, "graph": "yes"},
    lambda d: {**d, "cycle": -1},
    lambda d: {**d, "cycle": 10 ** 30},
    lambda d: {**d, "accepts": [1, 1], "accept_len": 2.0},
], ids=["empty accepts", "total 0", "parts above the total", "bs beyond any batch", "rank a list",
        "rank a number", "graph a word", "cycle negative", "cycle beyond any counter",
        "accept_len not the mean of accepts"])
def test_impossible_jsonl_record_is_damaged(tmp_path, edit):
    run = generate(random.Random(1408), bs=2, steps=3, cycles=20, p=P, spans=True)
    records = [json.loads(to_json(r)) for r in run.records]
    records[7] = edit(records[7])
    assert cycle.from_json(records[7]) is None and cycle.json_rejection(records[7])
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    doc = inspect_paths([path])
    assert (doc["unparsed_lines"], doc["groups"][0]["cycles"]) == (1, 19)


def test_verify_share_of_a_zero_total_never_reported(tmp_path):
    # total_ms=0 gave "verify is 173% of the cycle"
    run = generate(random.Random(1409), bs=1, steps=2, cycles=3, p=P[:2])
    lines = [re.sub(r"total_ms=\S+", "total_ms=0.00", ln) for ln in log_lines(run.records)]
    lines += log_lines(generate(random.Random(1410), bs=1, steps=2, cycles=3, p=P[:2]).records)
    path = tmp_path / "z.log"
    path.write_text("\n".join(lines) + "\n")
    doc = inspect_paths([path])
    assert doc["unparsed_lines"] == 3
    assert all(ph["share"] is None or ph["share"] <= 1.0 for ph in doc["groups"][0]["phases"].values())


def _fwd_over(line: str) -> str:
    """The line with its target forward 5 ms longer than its verify (the parts still add up)."""
    verify = float(re.search(r" verify_ms=(\S+)", line).group(1))
    return re.sub(r"verify_fwd_ms=\S+", f"verify_fwd_ms={verify + 5.0:.2f}", line)


def _every_7th_damaged(fault, spans: bool, seed: int) -> list[str]:
    """Lines of two configurations, shuffled, every 7th (200 of 1,400) made damaged by ``fault``."""
    rng = random.Random(seed)
    records = []
    for bs, steps in ((1, 3), (4, 2)):
        records += generate(rng, bs=bs, steps=steps, cycles=700, p=P[:steps], spans=spans).records
    rng.shuffle(records)
    return [(fault(ln) if i % 7 == 3 else ln) for i, ln in enumerate(log_lines(records))]


@pytest.mark.parametrize("spans", [True, False], ids=["device-spans", "older"])
@pytest.mark.parametrize("fault, seed", [(_parts_over, 1411), (_fwd_over, 1412)],
                         ids=["parts-over-total", "forward-over-verify"])
def test_bulk_reader_leaves_out_damaged_lines_as_the_line_path_does(tmp_path, spans, fault, seed):
    # every 7th line's parts exceed its total, or (helper 39: verify_fwd_ms=99.00 beside
    # verify_ms=22.10 had been read silently) its target forward outlasts its verify, which holds it
    # (DESIGN): the array reader counts the others and those as damaged, as the per-line path does,
    # instead of refusing the chunk
    lines = _every_7th_damaged(fault, spans, seed)
    assert cycle.parse_line(lines[3]) is None and cycle.parse_line(lines[4]) is not None
    text = "\n".join(lines) + "\n"
    tallies, dropped = bulkscan.scan_chunk_dropping(text)
    assert dropped == 200 and sum(t.cycles for t in tallies) == 1200
    assert bulkscan.scan_chunk(text) is None
    path = tmp_path / "damaged.log"
    path.write_text(text)
    doc = inspect_paths([path])
    assert doc == _slow([path])
    assert doc["unparsed_lines"] == 200 and sum(g["cycles"] for g in doc["groups"]) == 1200


def test_a_target_forward_within_rounding_of_its_verify_is_no_fault():
    lines = log_lines(generate(random.Random(1413), bs=2, steps=2, cycles=3, p=P[:2]).records)
    verify = float(re.search(r" verify_ms=(\S+)", lines[1]).group(1))

    def fwd(ms: float) -> str:
        return re.sub(r"verify_fwd_ms=\S+", f"verify_fwd_ms={ms:.2f}", lines[1])

    # within the two values' rounding (0.01 ms) it is no fault; past it, the line is damaged
    assert cycle.parse_line(fwd(verify)) is not None and cycle.parse_line(fwd(verify + 0.01)) is not None
    assert cycle.parse_line(fwd(verify + 0.02)) is None


def test_jsonl_field_kinds_are_named_in_the_rejection():
    run = generate(random.Random(1409), bs=2, steps=3, cycles=3, p=P, spans=True)
    rec = json.loads(to_json(run.records[1]))
    assert cycle.json_rejection(rec) is None and cycle.from_json({**rec, "rank": "TP3"}).rank == "TP3"
    assert cycle.json_rejection({**rec, "rank": {"a": 1}}) == "rank is not text"
    assert cycle.json_rejection({**rec, "rank": 0}) == "rank is not text"
    assert cycle.from_json({**rec, "rank": ""}).rank is None
    assert cycle.json_rejection({**rec, "graph": 2}) == "graph is not 0 or 1"
    assert cycle.from_json({**rec, "graph": True}).graph is True
    assert cycle.json_rejection({**rec, "cycle": -1}) == "cycle=-1 is not a cycle counter"
    assert cycle.json_rejection({**rec, "accepts": [1, 1], "accept_len": 2.0}) == "accept_len is not the mean of accepts"
    # a record converted from a line keeps the line's 2-decimal accept_len: not damage
    assert cycle.json_rejection({**rec, "accepts": [1, 2, 2], "bs": 3, "accept_len": 1.67}) != \
        "accept_len is not the mean of accepts"


def test_advise_names_the_damaged_lines_it_left_out(capsys, tmp_path):
    # lines whose accept length is impossible at their depth are damaged: inspect counts them, and
    # advise, which reads logs through the same reader, says how many it left out (before, nothing)
    rng = random.Random(1402)
    lines = log_lines(generate(rng, bs=1, steps=3, cycles=400, p=P, spans=True).records)
    bad = sorted(rng.sample(range(len(lines)), 37))
    for i in bad:
        lines[i] = re.sub(r"accepts=\d+", "accepts=7", re.sub(r"accept_len=[\d.]+", "accept_len=7.00", lines[i]))
    log = tmp_path / "server.log"
    log.write_text("\n".join(lines) + "\n")
    rc, out, _ = run_cli(capsys, log, "--json")
    assert rc == 0 and json.loads(out)["unparsed_lines"] == 37
    (tmp_path / "inspect.json").write_text(out)
    for src in (log, tmp_path / "inspect.json"):
        rc = cli.main(["advise", str(src), "--baseline-tok-s", "40", "--json"])
        out, err = capsys.readouterr()
        assert rc == 0, err
        doc = json.loads(out)
        assert doc["inputs"]["runs"][0]["cycles"] == 400 - 37
        notes = [n for n in doc["inputs"]["notes"] if "damaged" in n]
        # the log itself is named in the command; a document, made elsewhere, only as the LOG it was made from
        name = str(log) if src == log else "LOG"
        assert notes == [f"{src}: 37 damaged lines left out (`eagle-cycle inspect {name} --show-rejected 20` names "
                         "them and why): each run is what its other lines measured"], doc["inputs"]["notes"]
