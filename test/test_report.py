"""report.inspect_paths: counts, exact statistics, per-position acceptance and findings on real and generated logs."""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import math
import random
import re
import statistics
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from cyclegen import generate, log_lines
from sglang_eagle_cycle import bulkscan, cycle
from sglang_eagle_cycle.errors import UsageError
from sglang_eagle_cycle.report import (DRAFT_HEAVY_SHARE, VERIFY_BOUND_SHARE, exact_percentiles,
                                       inspect_paths)

PHASES = cycle.PHASES
OTHER_LINES = [
    "[2026-11-30 10:00:00 TP0] Prefill batch, #new-seq: 1, #new-token: 812, #cached-token: 0, token usage: 0.04, "
    "#running-req: 0, #queue-req: 0",
    '[2026-11-30 10:00:00] INFO:     127.0.0.1:50312 - "POST /generate HTTP/1.1" 200 OK',
    "",
]


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def _slow(doc_paths, **kw):
    """The per-line path (cycle.parse_line on every line): an on_record hook turns the bulk path off."""
    return inspect_paths(doc_paths, on_record=lambda label, rec: None, **kw)


def _group(doc, **config):
    found = [g for g in doc["groups"] if all(g[k] == v for k, v in config.items())]
    assert len(found) == 1, (config, [(g["bs"], g["steps"]) for g in doc["groups"]])
    return found[0]


# --- the shared stock-line sample --------------------------------------------------------------------


def test_decode_batch_variants_match_expected(shared_data):
    log = shared_data / "logs" / "decode_batch_variants.log"
    expected = json.loads((shared_data / "logs" / "expected.json").read_text())[log.name]
    doc = inspect_paths([log])
    db = doc["decode_batch"]
    for key in ("decode_lines_seen", "intervals", "intervals_with_accept"):
        assert db[key] == expected[key], key
    for key in ("accept_len_mean", "accept_rate_mean", "gen_tok_s_mean"):
        assert db[key] == pytest.approx(expected[key], abs=5e-5), key
    assert doc["unparsed_lines"] == expected["unparsed_lines"]
    assert doc["other_lines"] == expected["other_lines"]
    assert db["per_file"][str(log)]["intervals"] == expected["intervals"]
    assert doc["groups"] == []


def test_decode_batch_variants_gz_and_stdin_agree(shared_data, tmp_path, monkeypatch):
    log = shared_data / "logs" / "decode_batch_variants.log"
    gz = tmp_path / "variants.log.gz"
    gz.write_bytes(gzip.compress(log.read_bytes()))
    plain = inspect_paths([str(log)])["decode_batch"]["per_file"][str(log)]
    assert inspect_paths([gz])["decode_batch"]["per_file"][str(gz)] == plain
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(gzip.compress(log.read_bytes()))))
    doc = inspect_paths(["-"])
    assert doc["files"] == ["<stdin>"]
    assert doc["decode_batch"]["per_file"]["<stdin>"] == plain


# --- generated logs: every statistic from the generator's numbers -------------------------------------


P_TRUE = [0.8, 0.6, 0.45]


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    rng = random.Random(20261130)
    runs = [generate(rng, bs=1, steps=3, cycles=3000, p=P_TRUE),
            generate(rng, bs=4, steps=2, cycles=400, p=P_TRUE[:2], verify_ms=24.0),
            generate(rng, bs=80, steps=3, cycles=30, p=P_TRUE, verify_ms=40.0)]   # bs > 64: accept_hist lines
    lines = []
    for run in runs:
        lines += log_lines(run.records)
        lines += OTHER_LINES
    path = _write(tmp_path_factory.mktemp("gen") / "gen.log", lines)
    return runs, path


def _expected_positions(accepts: list[int], steps: int):
    """Per-position counts straight from the requests: L reached positions 1..min(L, steps), accepted 1..L-1."""
    out = []
    for j in range(1, steps + 1):
        reached = sum(1 for a in accepts if a >= j)
        accepted = sum(1 for a in accepts if a - 1 >= j)
        out.append((j, accepted, reached))
    return out


def test_generated_log_statistics_equal_generator(generated):
    runs, path = generated
    doc = inspect_paths([path])
    assert doc["schema"] == "eagle-cycle-inspect/1"
    assert doc["files"] == [str(path)]
    assert doc["unparsed_lines"] == 0
    assert doc["other_lines"] == len(OTHER_LINES) * len(runs)
    assert len(doc["groups"]) == len(runs)
    for run in runs:
        bs, steps, topk, dt = run.config
        g = _group(doc, bs=bs, steps=steps, topk=topk, draft_tokens=dt)
        assert g["file"] == str(path)
        assert g["cycles"] == len(run.records)
        total_mean = statistics.fmean(run.values("total_ms"))
        for phase in PHASES:
            vals = run.values(phase)
            q = statistics.quantiles(vals, n=100, method="inclusive")
            got = g["phases"][phase]
            assert got["mean"] == pytest.approx(statistics.fmean(vals), abs=1e-6), phase
            assert got["p50"] == pytest.approx(statistics.median(vals), abs=1e-6), phase
            assert got["p90"] == pytest.approx(q[89], abs=1e-6), phase
            assert got["p99"] == pytest.approx(q[98], abs=1e-6), phase
            assert got["share"] == pytest.approx(statistics.fmean(vals) / total_mean, abs=1e-6), phase
        accepts = run.accepts()
        assert g["accept_hist"] == {str(k): v for k, v in sorted(Counter(accepts).items())}
        assert g["accept_len_mean"] == pytest.approx(statistics.fmean(accepts), abs=1e-6)
        assert g["tok_s"] == pytest.approx(sum(accepts) / sum(run.values("total_ms")) * 1000, rel=1e-6)
        got_pos = [(p["j"], p["accepted"], p["reached"]) for p in g["per_position_acceptance"]]
        assert got_pos == _expected_positions(accepts, steps)
        for p, p_true in zip(g["per_position_acceptance"], run.p):
            sigma = math.sqrt(p_true * (1 - p_true) / p["reached"])
            assert abs(p["p"] - p_true) < 4 * sigma, (run.config, p, p_true)
            assert p["p"] == pytest.approx(p["accepted"] / p["reached"], abs=1e-6)


def test_bulk_and_per_line_paths_agree_on_generated_log(generated):
    _, path = generated
    fast = inspect_paths([path])
    assert fast == _slow([path])
    assert inspect_paths([path], chunk_chars=700) == fast   # chunk edges anywhere


def test_jsonl_gives_the_same_groups_as_the_log(generated, tmp_path):
    runs, path = generated
    jsonl = _write(tmp_path / "gen.jsonl", [cycle.to_json(r) for run in runs for r in run.records])
    from_log, from_jsonl = inspect_paths([path]), inspect_paths([jsonl])
    for a, b in zip(from_log["groups"], from_jsonl["groups"]):
        assert {k: v for k, v in a.items() if k != "file"} == {k: v for k, v in b.items() if k != "file"}
    assert from_jsonl["other_lines"] == 0


def test_aggregated_lines_give_the_same_means(generated, tmp_path):
    runs, per_cycle_path = generated
    agg = cycle.Aggregator(every=7)
    lines = []
    for run in runs:
        for rec in run.records:
            lines += log_lines(agg.add(rec))
    lines += log_lines(agg.flush())
    assert any(" n=7 " in ln for ln in lines)
    agg_doc = inspect_paths([_write(tmp_path / "agg.log", lines)])
    assert agg_doc == _slow([tmp_path / "agg.log"])
    per_cycle = inspect_paths([per_cycle_path])
    for run in runs:
        bs, steps, topk, dt = run.config
        a = _group(agg_doc, bs=bs, steps=steps)
        c = _group(per_cycle, bs=bs, steps=steps)
        assert a["cycles"] == c["cycles"] == len(run.records)
        for phase in PHASES:
            # aggregated lines print each mean to 2 decimals: weighted means agree to half of that
            assert a["phases"][phase]["mean"] == pytest.approx(c["phases"][phase]["mean"], abs=0.005)
            assert a["phases"][phase]["p50"] is None   # per-cycle values are not in aggregated lines
        assert a["accept_hist"] == c["accept_hist"]
        assert a["accept_len_mean"] == c["accept_len_mean"]
        assert a["per_position_acceptance"] == c["per_position_acceptance"]
        assert a["tok_s"] == pytest.approx(c["tok_s"], rel=1e-3)


def test_ranks_are_one_cycle_with_separate_times(tmp_path):
    rng = random.Random(5)
    tp0 = generate(rng, bs=1, steps=2, cycles=50, p=[0.7, 0.5], rank="tp0")
    tp1 = generate(rng, bs=1, steps=2, cycles=50, p=[0.7, 0.5], rank="tp1")
    lines = [ln for pair in zip(log_lines(tp0.records), log_lines(tp1.records, "[x TP1] ")) for ln in pair]
    doc = inspect_paths([_write(tmp_path / "ranks.log", lines)])
    (g,) = doc["groups"]
    # the same 50 cycle ids on two tp ranks are 50 cycles (was 100, with doubled acceptance); the first
    # line of each cycle (tp0's here) gives its acceptance, every rank's line its times
    assert (g["cycles"], g["cycle_lines"]) == (50, 100)
    assert g["accept_hist"] == {str(k): v for k, v in sorted(Counter(tp0.accepts()).items())}
    assert g["ranks"] == ["tp0", "tp1"]
    both = tp0.values("total_ms") + tp1.values("total_ms")
    assert g["phases"]["total_ms"]["mean"] == pytest.approx(statistics.fmean(both), abs=1e-6)


def test_two_files_are_separate_groups(generated, tmp_path):
    runs, path = generated
    other = _write(tmp_path / "b.log", log_lines(runs[0].records[:100]))
    doc = inspect_paths([path, other])
    assert doc["files"] == [str(path), str(other)]
    assert [g["file"] for g in doc["groups"]].count(str(other)) == 1
    assert _group(doc, file=str(other))["cycles"] == 100


# --- the bulk reader never disagrees with cycle.parse_line --------------------------------------------


def _damage(rng: random.Random, line: str) -> str:
    kind = rng.randrange(9)
    if kind == 0:
        return line[: rng.randrange(len(line))]                      # truncated
    if kind == 1:
        i = rng.randrange(len(line))
        return line[:i] + rng.choice(["x", "  ", "\t", "=", ",", "-", "\u00a0", "[eagle-cycle]"]) + line[i:]
    if kind == 2:
        return line + rng.choice([" rank=tp3", " draft_step_ms=0.30,0.31", " n=4 total_max_ms=9.99", " junk"])
    if kind == 3:
        return line.replace("accepts=", "accepts=-,") if rng.random() < 0.5 else line.replace(" graph=1", " graph=2")
    if kind == 4:
        return "  " + line                                            # different prefix width
    if kind == 5:
        return line.replace("accepts=2", "accepts=-")
    if kind == 6:
        return line.replace("[2026-11-30 10:00:00 TP0]", "[2026-11-30 10:00:00 DP0 TP0]")
    if kind == 7:
        return OTHER_LINES[rng.randrange(2)]
    return line


def test_bulk_reader_matches_parse_line_on_damaged_lines(tmp_path):
    rng = random.Random(11)
    run = generate(rng, bs=2, steps=3, cycles=600, p=P_TRUE)
    lines = log_lines(run.records)
    for i in rng.sample(range(len(lines)), 200):
        lines[i] = _damage(rng, lines[i])
    path = _write(tmp_path / "damaged.log", lines)
    for chunk in (300, 4000, 1 << 20):
        fast = inspect_paths([path], chunk_chars=chunk)
        assert fast == _slow([path], chunk_chars=chunk), chunk
    assert fast["unparsed_lines"] > 0


# One damaged line among clean ones: the chunk would go through the bulk reader if it missed the damage.
DAMAGES = {
    "truncated mid-value": lambda ln: ln[: ln.index("verify_ms=") + 12],
    "truncated after graph=": lambda ln: ln[:-1],
    "double space": lambda ln: ln.replace(" bs=", "  bs="),
    "tab": lambda ln: ln.replace(" steps=", "\tsteps="),
    "no-break space": lambda ln: ln.replace(" topk=", "\u00a0topk="),
    "carriage return": lambda ln: ln.replace(" tok_s=", "\rtok_s="),
    "trailing spaces": lambda ln: ln + "   ",
    "leading spaces": lambda ln: "  " + ln,
    "extra word": lambda ln: ln + " junk",
    "rank tail": lambda ln: ln + " rank=tp3",
    "adaptive tail": lambda ln: ln + " adaptive=explore",
    "adaptive garbage": lambda ln: ln + " adaptive=maybe",
    "adaptive empty": lambda ln: ln + " adaptive=",
    "eager tail": lambda ln: ln + " draft_step_ms=0.30,0.31",
    "aggregate tail": lambda ln: ln + " n=4 total_max_ms=30.00",
    "accepts -": lambda ln: re.sub(r"accepts=\S+", "accepts=-", ln),
    "accepts garbage": lambda ln: re.sub(r"accepts=\S+", "accepts=2,x", ln),
    "accepts =": lambda ln: re.sub(r"accepts=\S+", "accepts=2=3", ln),
    "accepts signed": lambda ln: re.sub(r"accepts=\S+", "accepts=+1,3", ln),
    "accepts underscore": lambda ln: re.sub(r"accepts=\S+", "accepts=0_1,3", ln),
    "hist signed": lambda ln: re.sub(r"accepts=\S+", "accept_hist=+2:1", ln),
    "graph 2": lambda ln: ln.replace("graph=1", "graph=2"),
    "tok_s garbage": lambda ln: re.sub(r"tok_s=\S+", "tok_s=fast", ln),
    "cycle negative": lambda ln: re.sub(r"cycle=\d+", "cycle=-4", ln),
    "exponent": lambda ln: re.sub(r"draft_ms=\S+", "draft_ms=1e5", ln),
    "nan": lambda ln: re.sub(r"total_ms=\S+", "total_ms=nan", ln),
    "accept_len garbage": lambda ln: re.sub(r"accept_len=\S+", "accept_len=2.x", ln),
    "bs garbage": lambda ln: ln.replace(" bs=", " bs=b"),
    "accepts with a tab": lambda ln: re.sub(r"accepts=(\S+)", "accepts=\\1\t", ln),
    "wrong key": lambda ln: ln.replace(" topk=", " top_k="),
    "missing field": lambda ln: re.sub(r" extend_ms=\S+", "", ln),
    "swapped fields": lambda ln: re.sub(r"(extend_ms=\S+) (other_ms=\S+)", r"\2 \1", ln),
    "wider log prefix": lambda ln: ln.replace("10:00:00 TP0]", "10:00:00 DP0 TP0]"),
    "prefix twice": lambda ln: ln.replace("TP0]", "TP0 [eagle-cycle]]"),
    "prefix glued": lambda ln: ln.replace("TP0] ", "TP0]"),
    "prefix glued to the next word": lambda ln: ln.replace("[eagle-cycle] ", "[eagle-cycle]x "),
    "no log prefix": lambda ln: ln[ln.index(cycle.PREFIX):],
    "prefix inside log prefix": lambda ln: ln.replace("TP0]", "TP0[eagle-cycle]]"),
    "extra word, next line narrower": lambda ln: ln + " junk\n" + ln.replace(" TP0]", "]"),
    "NUL": lambda ln: ln + "\x00",
    "other config": lambda ln: ln.replace(" bs=2 ", " bs=3 "),
    "other line": lambda ln: OTHER_LINES[1],
    "blank line": lambda ln: "",
    # well formed, but values the profiler cannot write (bs=2 steps=3 topk=1 draft_tokens=4): IMPLAUSIBLE
    "negative phase": lambda ln: re.sub(r"draft_ms=\S+", "draft_ms=-1.00", ln),
    "negative total": lambda ln: re.sub(r"total_ms=\S+", "total_ms=-5.00", ln),
    "negative tok_s": lambda ln: re.sub(r"tok_s=\S+", "tok_s=-3.0", ln),
    "accept above steps + 1": lambda ln: re.sub(r"accepts=\S+", "accepts=2,5", ln),
    "accept 0": lambda ln: re.sub(r"accepts=\S+", "accepts=0,2", ln),
    "accept_len above steps + 1": lambda ln: re.sub(r"accept_len=\S+", "accept_len=99.00", ln),
    "accept_len below 1": lambda ln: re.sub(r"accept_len=\S+", "accept_len=0.50", ln),
    "huge hist key": lambda ln: re.sub(r"accepts=\S+", "accept_hist=2:1,999999999999:5", ln),
    "negative hist count": lambda ln: re.sub(r"accepts=\S+", "accept_hist=2:-3", ln),
    "bs 0": lambda ln: ln.replace(" bs=2 ", " bs=0 "),
    "steps beyond any draft": lambda ln: ln.replace(" steps=3 ", f" steps={cycle.MAX_LINE_STEPS + 1} "),
    "aggregate n=0": lambda ln: ln + " n=0 total_max_ms=30.00",
    "infinite phase": lambda ln: re.sub(r"verify_ms=\S+", "verify_ms=" + "9" * 400, ln),
    "infinite tok_s": lambda ln: re.sub(r"tok_s=\S+", "tok_s=" + "9" * 400 + ".0", ln),
    "phase above 1000 s": lambda ln: re.sub(r"total_ms=\S+", "total_ms=1000000.01", ln),
    "huge hist count": lambda ln: re.sub(r"accepts=\S+", "accept_hist=2:" + "9" * 30, ln),
    # a per-cycle histogram counts one accept length per request (helper 35: 150 requests at bs=100
    # were read, +50% tok/s), and a field of the line given again after it is not a newer one
    "hist counts more requests than bs": lambda ln: re.sub(r"accepts=\S+", "accept_hist=2:1,3:2", ln),
    "hist counts fewer requests than bs": lambda ln: re.sub(r"accepts=\S+", "accept_hist=2:1", ln),
    "bs again after graph": lambda ln: ln + " bs=8",
    "rank twice": lambda ln: ln + " rank=tp0 rank=tp1",
    "n twice": lambda ln: ln + " n=4 total_max_ms=30.00 n=5",
    "hist length twice": lambda ln: re.sub(r"accepts=\S+", "accept_hist=2:1,2:1", ln),   # summed, it had passed
}


@pytest.mark.parametrize("log_prefix", ["[2026-11-30 10:00:00 TP0] ", ""], ids=["log-prefix", "bare"])
@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_bulk_reader_matches_parse_line_on_one_damaged_line(tmp_path, damage, log_prefix):
    run = generate(random.Random(12), bs=2, steps=3, cycles=60, p=P_TRUE)
    lines = log_lines(run.records, log_prefix)
    assert bulkscan.scan_chunk("\n".join(lines)) is not None   # clean: the bulk path takes it
    lines[50] = DAMAGES[damage](lines[50])   # past the 8 KiB binary sniff, so a NUL is read as text
    path = tmp_path / "one.log"
    path.write_bytes(("\n".join(lines) + "\n").encode())
    assert inspect_paths([path]) == _slow([path])


IMPLAUSIBLE = ["negative phase", "negative total", "negative tok_s", "accept above steps + 1", "accept 0",
               "accept_len above steps + 1", "accept_len below 1", "huge hist key", "negative hist count", "bs 0",
               "steps beyond any draft", "aggregate n=0", "infinite phase", "infinite tok_s",
               "phase above 1000 s", "huge hist count", "hist counts more requests than bs",
               "hist counts fewer requests than bs", "bs again after graph", "rank twice", "n twice",
               "hist length twice"]


@pytest.mark.parametrize("damage", IMPLAUSIBLE)
def test_implausible_line_is_one_damaged_line(tmp_path, damage):
    # these used to be counted (a -5 ms cycle, -428% shares) or, for a huge accept length, to exhaust memory
    run = generate(random.Random(12), bs=2, steps=3, cycles=60, p=P_TRUE)
    lines = log_lines(run.records)
    lines[50] = DAMAGES[damage](lines[50])
    assert cycle.parse_line(lines[50]) is None
    path = _write(tmp_path / "one.log", lines)
    doc = inspect_paths([path])
    (group,) = doc["groups"]
    assert (doc["unparsed_lines"], group["cycles"]) == (1, 59)
    assert group["phases"]["other_ms"]["p50"] >= 0 and max(int(k) for k in group["accept_hist"]) <= 4


def _doc_or_error(path, **kw):
    try:
        return inspect_paths([path], **kw)
    except UsageError as exc:
        return str(exc)


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_bulk_reader_matches_parse_line_when_every_line_is_damaged(tmp_path, damage):
    run = generate(random.Random(13), bs=2, steps=3, cycles=30, p=P_TRUE)
    path = tmp_path / "all.log"
    path.write_bytes(("\n".join(DAMAGES[damage](ln) for ln in log_lines(run.records)) + "\n").encode())
    assert _doc_or_error(path) == _doc_or_error(path, on_record=lambda label, rec: None)


def test_bulk_reader_layout_comes_from_format_line():
    assert bulkscan.KEYS[0] == "cycle"
    assert bulkscan.KEYS == tuple(t.partition("=")[0] for t in cycle.format_line(
        generate(random.Random(1), 1, 2, 1, [0.5, 0.5]).records[0]).split(" ")[1:])
    clean = "\n".join(log_lines(generate(random.Random(2), 3, 2, 40, [0.5, 0.5]).records))
    assert bulkscan.scan_chunk(clean) is not None
    assert bulkscan.scan_chunk(clean.replace("tok_s=", "tok_s=x", 1)) is None


def _assert_same_tallies(got, expected):
    """Equal tallies, every count in the same order (the report sums phase times in that order)."""
    assert got == expected
    for a, b in zip(got, expected):
        assert [list(d.items()) for d in a.phases.values()] == [list(d.items()) for d in b.phases.values()]
        assert list(a.hist.items()) == list(b.hist.items())
        # the per-line accept lengths and periods, in file order (batch means read them)
        for x, y in zip(a.series, b.series):
            np.testing.assert_allclose(x, y, rtol=0, atol=1e-9)


def _two_readers(text):
    n = text.count("\n")
    return bulkscan._scan_array(text, n), bulkscan._scan_tokens(text, n)


@pytest.mark.parametrize("spans", [False, True], ids=["older", "device-spans"])
@pytest.mark.parametrize("log_prefix", ["[2026-11-30 10:00:00 TP0] ", "", "[2026-11-30 10:00:00 h\u00f6st TP0] "],
                         ids=["log-prefix", "bare", "non-ascii-prefix"])
def test_array_reader_counts_like_the_token_reader(spans, log_prefix):
    rng = random.Random(21)
    records = []
    for bs, steps in ((1, 3), (2, 1), (8, 2), (80, 3), (64, 2), (1, 3)):   # bs 80 writes accept_hist
        records += generate(rng, bs=bs, steps=steps, cycles=150, p=P_TRUE[:steps], spans=spans,
                            first_cycle=len(records)).records
    rng.shuffle(records)   # configurations interleaved line by line
    records[3].cycle = 123456789012                    # values past one 8-byte word
    # 9 bytes; 7 bytes (no room for the index); the parts still add up to the total (else the line is damaged)
    records[5].total_ms, records[5].other_ms = round(records[5].total_ms + 123456.78, 2), round(records[5].other_ms + 123456.78, 2)
    records[6].total_ms = round(records[6].total_ms + 1234.56 - records[6].verify_ms, 2)
    records[6].verify_ms = 1234.56
    records[7].verify_fwd_ms = 999990.0
    # (the target forward runs inside the verify: a wide one needs a verify as wide, and a total)
    records[7].total_ms = round(records[7].total_ms + 999990.0 - records[7].verify_ms, 2)
    records[7].verify_ms = 999990.0
    text = "\n".join(log_lines(records, log_prefix)) + "\n"
    fast, tokens = _two_readers(text)
    assert fast is not None and len(fast) == 5
    _assert_same_tallies(fast, tokens)
    one = "\n".join(log_lines([r for r in records if r.config == records[0].config], log_prefix)) + "\n"
    fast, tokens = _two_readers(one)                   # one configuration: its own shortcut
    assert fast is not None and len(fast) == 1
    _assert_same_tallies(fast, tokens)


@pytest.mark.parametrize("edit", [lambda ln: ln.replace("10:00:00 ", "10:00:00\t"),
                                  lambda ln: ln.replace("TP0]", "TP\x000]"),
                                  lambda ln: re.sub(r"cycle=\d", "cycle=\u0663", ln)],
                         ids=["tab in the log prefix", "NUL in the log prefix", "non-ASCII digit"])
def test_array_reader_leaves_unusual_chunks_to_the_token_reader(edit):
    # parse_line reads all three (a log prefix is any words; \d takes any decimal digit): the token reader counts them
    text = "\n".join(edit(ln) for ln in log_lines(generate(random.Random(22), 2, 3, 50, P_TRUE).records)) + "\n"
    fast, tokens = _two_readers(text)
    assert fast is None and tokens is not None
    _assert_same_tallies(bulkscan.scan_chunk(text), tokens)


def test_distinct_keys_in_order_of_first_occurrence():
    np = pytest.importorskip("numpy")
    rng = random.Random(23)
    for high in (2 ** 8, 2 ** 40, 2 ** 63):   # the packed sort, and numpy.unique past 64 bits
        keys = [rng.randrange(high) for _ in range(300)]
        keys = [rng.choice(keys) for _ in range(5000)]
        first, count = bulkscan._distinct(np.array(keys, dtype=np.uint64))
        assert [(keys[f], c) for f, c in zip(first.tolist(), count.tolist())] == list(Counter(keys).items())
        assert first.tolist() == [keys.index(k) for k in Counter(keys)]


def test_exact_percentiles_equal_numpy():
    np = pytest.importorskip("numpy")
    rng = random.Random(3)
    for n in (1, 2, 7, 100, 1001):
        vals = [round(rng.gauss(20, 3), 2) for _ in range(n)]
        got = exact_percentiles(Counter(vals), [0.5, 0.9, 0.99])
        assert got == pytest.approx(list(np.percentile(vals, [50, 90, 99])), abs=1e-9)


# --- findings ---------------------------------------------------------------------------------------


def _codes(doc):
    return [f["code"] for f in doc["findings"]]


def test_healthy_run_has_no_findings(tmp_path):
    run = generate(random.Random(6), bs=2, steps=3, cycles=200, p=P_TRUE, verify_ms=5.0)
    doc = inspect_paths([_write(tmp_path / "ok.log", log_lines(run.records))], baseline=10.0)
    (g,) = doc["groups"]
    assert g["phases"]["verify_ms"]["share"] < VERIFY_BOUND_SHARE and g["tok_s"] > 10.0
    assert _codes(doc) == []


def test_accept_len_stuck_at_1(tmp_path):
    run = generate(random.Random(7), bs=1, steps=5, cycles=60, p=[0.05] * 5)
    doc = inspect_paths([_write(tmp_path / "broken.log", log_lines(run.records))])
    (f,) = doc["findings"]
    assert f["code"] == "accept_len_stuck_at_1"
    assert f["evidence"]["accept_len_mean"] == pytest.approx(statistics.fmean(run.accepts()), abs=1e-6)
    assert f["evidence"]["share_accept_len_1"] == pytest.approx(run.accepts().count(1) / 60, abs=1e-6)
    assert "eagle-cycle wiring" in f["message"]


def test_accept_len_equals_draft_tokens_every_cycle(tmp_path):
    run = generate(random.Random(8), bs=2, steps=3, cycles=20, p=[1.0] * 3)
    doc = inspect_paths([_write(tmp_path / "nan.log", log_lines(run.records))])
    assert "accept_len_equals_draft_tokens" in _codes(doc)
    # one cycle short of "every": no finding
    first = run.records[0]
    run.records[0] = cycle.make_record(cycle=0, config=run.config, accepts=[4, 3], graph=True,
                                       phases_ms={p: getattr(first, p) for p in PHASES})
    doc = inspect_paths([_write(tmp_path / "nan2.log", log_lines(run.records))])
    assert "accept_len_equals_draft_tokens" not in _codes(doc)


def test_verify_bound_and_draft_heavy(tmp_path):
    rng = random.Random(9)
    verify_heavy = generate(rng, bs=1, steps=2, cycles=50, p=[0.7, 0.5], verify_ms=60.0, step_ms=0.1)
    draft_heavy = generate(rng, bs=1, steps=6, cycles=50, p=[0.7] * 6, verify_ms=8.0, step_ms=2.0)
    doc = inspect_paths([_write(tmp_path / "shares.log", log_lines(verify_heavy.records + draft_heavy.records))])
    by_steps = {}
    for f in doc["findings"]:
        by_steps.setdefault(f["config"]["steps"], []).append(f)
    (vb,) = by_steps[2]
    assert vb["code"] == "verify_bound"
    share = statistics.fmean(verify_heavy.values("verify_ms")) / statistics.fmean(verify_heavy.values("total_ms"))
    assert share > VERIFY_BOUND_SHARE
    assert vb["evidence"]["verify_share"] == pytest.approx(share, abs=1e-6)
    (dh,) = by_steps[6]
    assert dh["code"] == "draft_heavy"
    share = statistics.fmean(draft_heavy.values("draft_ms")) / statistics.fmean(draft_heavy.values("total_ms"))
    assert share > DRAFT_HEAVY_SHARE
    assert dh["evidence"]["draft_share"] == pytest.approx(share, abs=1e-6)


def test_slower_than_baseline_number_and_log(generated, tmp_path, shared_data):
    runs, path = generated
    tok_s = {g["bs"]: g["tok_s"] for g in inspect_paths([path])["groups"]}
    assert len(tok_s) > 1
    with pytest.raises(UsageError, match="several batch sizes"):   # which batch size is one number for?
        inspect_paths([path], baseline=tok_s[1] + 1.0)
    doc = inspect_paths([path], baseline={bs: tok_s[1] + 1.0 for bs in tok_s})
    slow = [f for f in doc["findings"] if f["code"] == "slower_than_baseline"]
    assert {f["config"]["bs"] for f in slow} == {bs for bs, t in tok_s.items() if t < tok_s[1] + 1.0}
    assert slow[0]["evidence"]["baseline_tok_s"] == pytest.approx(tok_s[1] + 1.0)
    one = inspect_paths([path], baseline={1: tok_s[1] + 1.0})
    assert {f["config"]["bs"] for f in one["findings"] if f["code"] == "slower_than_baseline"} == {1}
    # a no-speculation log gives the baseline per batch size; only bs 1 has one here
    base_log = _write(tmp_path / "nospec.log", [
        f"[2026-11-30 09:00:0{i} TP0] Decode batch, #running-req: 1, #token: 90, token usage: 0.00, cuda graph: True, "
        f"gen throughput (token/s): {tok_s[1] * 2:.2f}, #queue-req: 0" for i in range(3)])
    doc = inspect_paths([path], baseline=base_log)
    slow = [f for f in doc["findings"] if f["code"] == "slower_than_baseline"]
    assert [f["config"]["bs"] for f in slow] == [1]
    assert slow[0]["evidence"]["baseline_tok_s"] == pytest.approx(tok_s[1] * 2, abs=0.01)
    with pytest.raises(UsageError, match="no-speculation"):
        inspect_paths([path], baseline=path)
    with pytest.raises(UsageError, match="positive"):
        inspect_paths([path], baseline=-3.0)


def test_a_baseline_log_must_be_a_no_spec_server_at_the_input_s_batch_size(generated, tmp_path):
    """``--baseline LOG`` (helper 35): a no-spec log at batch sizes the input never ran at is named in a
    warning, as a ``BS:TOK_S`` for such a batch size is, instead of silently doing nothing; a log whose
    server_args= line names a speculative algorithm is refused even when its lines print no accept
    length (they had been taken as a no-spec server's)."""
    runs, path = generated
    sizes = {g["bs"] for g in inspect_paths([path])["groups"]}
    far = max(sizes) + 7
    lines = [f"[2026-11-30 09:00:0{i} TP0] Decode batch, #running-req: {far}, #token: 90, token usage: 0.00, "
             f"cuda graph: True, gen throughput (token/s): 500.00, #queue-req: 0" for i in range(3)]
    other = _write(tmp_path / "other-bs.log", lines)
    said = []
    doc = inspect_paths([path], baseline=other, warn=said.append)
    assert not [f for f in doc["findings"] if f["code"] == "slower_than_baseline"]
    assert said == [f"baseline log {other}: no-spec throughput at bs {far}, none of the input's "
                    f"({', '.join(map(str, sorted(sizes)))}); not used"]
    spec = _write(tmp_path / "spec.log", ["[2026-11-30 08:59:59] server_args=ServerArgs(model_path='m', "
                                          "speculative_algorithm='EAGLE3', speculative_num_steps=3)"] + lines)
    with pytest.raises(UsageError, match="names speculative_algorithm EAGLE3: not a no-speculation server"):
        inspect_paths([path], baseline=spec)
    nospec = _write(tmp_path / "nospec.log", ["[2026-11-30 08:59:59] server_args=ServerArgs(model_path='m', "
                                              "speculative_algorithm=None, speculative_num_steps=None)"] + lines)
    assert inspect_paths([path], baseline=nospec, warn=said.append)["groups"]
    # a log appended across restarts is read one start at a time: the no-spec start's throughput is the
    # baseline whichever comes first (the speculative start's had been mixed in, or the log refused)
    b0 = min(sizes)
    at_b0 = [ln.replace(f"#running-req: {far}", f"#running-req: {b0}") for ln in lines]
    head_ns = "[2026-11-30 08:59:59] server_args=ServerArgs(model_path='m', speculative_algorithm=None)"
    head_sp = "[2026-11-30 09:30:00] server_args=ServerArgs(model_path='m', speculative_algorithm='EAGLE3')"
    ns = [head_ns] + [ln.replace("500.00", "900000.00") for ln in at_b0]
    for order in ((ns, [head_sp] + at_b0), ([head_sp] + at_b0, ns)):
        both = _write(tmp_path / "appended.log", order[0] + order[1])
        slow = [f for f in inspect_paths([path], baseline=both)["findings"] if f["code"] == "slower_than_baseline"]
        assert {f["evidence"]["baseline_tok_s"] for f in slow} == {900000.0}


def test_stock_lines_stuck_at_1(tmp_path):
    lines = [f"[2026-11-30 10:0{i}:00 TP0] Decode batch, #running-req: 1, #token: 10{i}, token usage: 0.00, "
             f"accept len: 1.0{i}, accept rate: 0.0{i}, cuda graph: False, gen throughput (token/s): 50.0, "
             f"#queue-req: 0" for i in range(4)]
    doc = inspect_paths([_write(tmp_path / "stock.log", lines)])
    (f,) = doc["findings"]
    assert f["code"] == "accept_len_stuck_at_1"
    assert f["evidence"]["accept_len_mean"] == pytest.approx(statistics.fmean([1.00, 1.01, 1.02, 1.03]))


# --- inputs -----------------------------------------------------------------------------------------


def test_bad_inputs_raise_usage_error_only_when_nothing_readable(tmp_path, generated):
    _, good = generated
    garbage = tmp_path / "garbage.bin"
    rng = random.Random(1)   # (Random(1) per byte gave 4096 x "D" and a NUL: a text file with one bad byte)
    garbage.write_bytes(bytes(rng.randrange(256) for _ in range(4096)) + b"\x00")
    empty = tmp_path / "empty.log"
    empty.write_text("")
    bad_gz = tmp_path / "bad.log.gz"
    bad_gz.write_bytes(b"\x1f\x8b" + b"not gzip at all")
    chatter = _write(tmp_path / "chatter.log", OTHER_LINES[:2])
    cases = {garbage: "binary", empty: "empty", tmp_path / "missing.log": "no such file", tmp_path: "directory",
             bad_gz: "gzip", chatter: "no \\[eagle-cycle\\]"}
    for path, reason in cases.items():
        with pytest.raises(UsageError, match=reason):
            inspect_paths([path])
    warnings = []
    doc = inspect_paths([*cases, good], warn=warnings.append)
    assert doc["files"] == [str(chatter), str(good)]
    assert len(warnings) == len(cases)
    assert all(re.search(reason, w) for w, reason in zip(warnings, cases.values()))
    assert len(doc["groups"]) == 3


def test_truncated_gzip_keeps_what_was_read(tmp_path, generated):
    _, good = generated
    data = gzip.compress(good.read_bytes())
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(data[: len(data) // 2])
    warnings = []
    doc = inspect_paths([cut], warn=warnings.append)
    assert len(warnings) == 1 and "stopped early" in warnings[0]
    assert 0 < sum(g["cycles"] for g in doc["groups"]) < 3430


def test_same_file_twice_is_counted_once(tmp_path, generated):
    _, good = generated
    once = inspect_paths([good])
    warnings = []
    twice = inspect_paths([good, str(good), Path(str(good)).parent / "." / good.name], warn=warnings.append)
    assert twice == once
    # Path drops the "/.": all three name the file as given first
    assert warnings == [f"{good}: given 3 times; read once"]
    warnings = []
    assert inspect_paths([good, Path(str(good)).parent / ".." / good.parent.name / good.name],
                         warn=warnings.append) == once
    assert warnings == [f"{Path(str(good)).parent / '..' / good.parent.name / good.name}: same file as {good}; read once"]


def test_stdin_twice_is_a_usage_error_before_reading(generated, monkeypatch):
    _, good = generated
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(good.read_bytes())))
    with pytest.raises(UsageError, match="stdin"):
        inspect_paths(["-", "-"])
    with pytest.raises(UsageError, match="baseline"):
        inspect_paths(["-"], baseline="-")
    assert sys.stdin.buffer.tell() == 0
    with pytest.raises(UsageError, match="empty"):
        inspect_paths([good], baseline="")


def test_truncated_gzip_with_nothing_decoded_says_truncated(tmp_path, generated):
    _, good = generated
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(gzip.compress(good.read_bytes())[:200])
    with pytest.raises(UsageError, match=r"cut\.log\.gz: .*truncated gzip"):
        inspect_paths([cut])


def test_document_is_strict_json_and_optional_parts_are_null(tmp_path):
    run = generate(random.Random(4), bs=1, steps=1, cycles=5, p=[0.5])   # steps 1: no draft forward
    doc = inspect_paths([_write(tmp_path / "s1.log", log_lines(run.records))])
    json.dumps(doc, allow_nan=False)
    assert set(doc) == {"schema", "files", "unparsed_lines", "other_lines", "groups", "decode_batch", "findings",
                        "wiring"}
    assert doc["wiring"] == []   # no start-up wiring line in this log
    (g,) = doc["groups"]
    assert g["phases"]["draft_ms"] == {"mean": None, "p50": None, "p90": None, "p99": None, "sd": None, "share": None,
                                      "sum_ms": 0.0, "count": 0}
    assert doc["decode_batch"] is None


def test_crlf_line_ends_and_one_path_argument(generated, tmp_path):
    _, path = generated
    crlf = tmp_path / "crlf.log"
    crlf.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    a, b = inspect_paths([path]), inspect_paths(crlf)   # a lone path is one input, not its characters
    assert b["files"] == [str(crlf)]
    assert [{k: v for k, v in g.items() if k != "file"} for g in a["groups"]] == \
        [{k: v for k, v in g.items() if k != "file"} for g in b["groups"]]


def test_tree_per_position_acceptance_stops_at_draft_tokens_minus_one(tmp_path):
    # steps 5, topk 4, 4 draft tokens: at most 3 drafts can be accepted; positions 4 and 5 were
    # reported as reached and rejected (p = 0.00)
    recs = [cycle.make_record(cycle=i, config=(3, 5, 4, 4), phases_ms={"draft_ms": 1.0, "verify_ms": 10.0,
                              "verify_fwd_ms": 9.0, "extend_ms": 1.0, "total_ms": 13.0}, accepts=acc, graph=True)
            for i, acc in enumerate([[4, 1, 2], [4, 4, 3], [2, 1, 1]])]
    path = _write(tmp_path / "tree.log", [cycle.format_line(r) for r in recs])
    (g,) = inspect_paths([path])["groups"]
    assert [(p["j"], p["accepted"], p["reached"]) for p in g["per_position_acceptance"]] == [(1, 6, 9), (2, 4, 6),
                                                                                         (3, 3, 4)]


# --- device-span lines (draft_prep_ms, gap_ms) ---------------------------------------------------------

def test_device_span_lines_bulk_and_per_line_agree(tmp_path):
    rng = random.Random(21)
    run = generate(rng, bs=2, steps=3, cycles=400, p=P_TRUE, spans=True)
    lines = log_lines(run.records)
    path = _write(tmp_path / "spans.log", lines)
    fast = inspect_paths([path])
    assert fast == _slow([path])
    (g,) = fast["groups"]
    assert g["device_spans"] is True
    assert g["phases"]["draft_prep_ms"]["mean"] == pytest.approx(statistics.fmean(run.values("draft_prep_ms")), abs=1e-6)
    assert g["phases"]["gap_ms"]["mean"] == pytest.approx(statistics.fmean(run.values("gap_ms")[1:]), abs=1e-6)
    # tok/s over the periods: total + the mean gap per cycle
    period = sum(run.values("total_ms")) + statistics.fmean(run.values("gap_ms")[1:]) * len(run.records)
    assert g["tok_s"] == pytest.approx(sum(run.accepts()) / period * 1000, rel=1e-6)
    for i in rng.sample(range(len(lines)), 60):
        lines[i] = _damage(rng, lines[i])
    path = _write(tmp_path / "spans-damaged.log", lines)
    for chunk in (300, 4000, 1 << 20):
        assert inspect_paths([path], chunk_chars=chunk) == _slow([path], chunk_chars=chunk), chunk


def test_older_and_device_span_lines_are_grouped_apart(tmp_path):
    rng = random.Random(22)
    old = generate(rng, bs=1, steps=3, cycles=50, p=P_TRUE)
    new = generate(rng, bs=1, steps=3, cycles=70, p=P_TRUE, spans=True, first_cycle=50)
    doc = inspect_paths([_write(tmp_path / "upgrade.log", log_lines(old.records + new.records))])
    by_kind = {g["device_spans"]: g for g in doc["groups"]}
    assert set(by_kind) == {False, True}
    assert by_kind[False]["cycles"] == 50 and by_kind[True]["cycles"] == 70
    assert "draft_prep_ms" not in by_kind[False]["phases"]
    assert by_kind[False]["phases"]["draft_ms"]["mean"] == pytest.approx(statistics.fmean(old.values("draft_ms")))


def test_host_bound_only_when_prep_and_gap_are_a_real_share(tmp_path):
    rng = random.Random(23)
    from sglang_eagle_cycle.report import HOST_BOUND_FLOOR_MS, HOST_BOUND_SHARE

    slow_host = generate(rng, bs=1, steps=3, cycles=60, p=P_TRUE, spans=True, prep_ms=3.0, gap_ms=1.0)
    prep_kernels = generate(rng, bs=2, steps=3, cycles=60, p=P_TRUE, spans=True, prep_ms=0.08, gap_ms=0.03)
    short_cycle = generate(rng, bs=4, steps=2, cycles=60, p=P_TRUE, spans=True, prep_ms=0.32, gap_ms=0.12,
                           verify_ms=0.8, step_ms=0.2)   # about 12% of a ~3.8 ms period, but under the floor
    doc = inspect_paths([_write(tmp_path / "host.log", log_lines(
        slow_host.records + prep_kernels.records + short_cycle.records))])
    found = [f for f in doc["findings"] if f["code"] == "host_bound"]
    assert [f["config"]["bs"] for f in found] == [1]
    ev = found[0]["evidence"]
    assert ev["host_share"] > HOST_BOUND_SHARE and ev["draft_prep_ms_mean"] + ev["gap_ms_mean"] > HOST_BOUND_FLOOR_MS
    assert "resolve_seq_lens_cpu" in found[0]["message"] and "--disable-overlap-schedule" in found[0]["message"]
    g = _group(doc, bs=4)
    share = (g["phases"]["draft_prep_ms"]["mean"] + g["phases"]["gap_ms"]["mean"]) / (
        g["phases"]["total_ms"]["mean"] + g["phases"]["gap_ms"]["mean"])
    assert share > HOST_BOUND_SHARE   # the floor, not the share, keeps it quiet


@pytest.mark.parametrize("shape", ["no log prefix", "aggregated", "jsonl", "one line"])
def test_device_span_lines_in_every_shape_read_alike(tmp_path, shape):
    """Lines without a log prefix (the first word of each line is the prefix itself), aggregated lines,
    JSONL records and a file of one line: the same device-span group, bulk and per-line paths agree."""
    run = generate(random.Random(24), bs=3, steps=4, cycles=1 if shape == "one line" else 90, p=P_TRUE,
                   spans=True)
    if shape == "no log prefix":
        lines = log_lines(run.records, prefix="")
    elif shape == "aggregated":
        agg = cycle.Aggregator(every=10)
        lines = log_lines([out for rec in run.records for out in agg.add(rec)] + agg.flush())
        assert all(" n=10 " in ln and "draft_prep_ms=" in ln for ln in lines)
    elif shape == "jsonl":
        lines = [cycle.to_json(rec) for rec in run.records]
    else:
        lines = log_lines(run.records)
    path = _write(tmp_path / "spans.txt", lines)
    doc = inspect_paths([path])
    assert doc == _slow([path]) and doc["unparsed_lines"] == 0
    (g,) = doc["groups"]
    assert g["device_spans"] is True and g["cycles"] == len(run.records)
    exact = 0.005 if shape == "aggregated" else 1e-6   # aggregated lines print each mean to 2 decimals
    assert g["phases"]["draft_prep_ms"]["mean"] == pytest.approx(statistics.fmean(run.values("draft_prep_ms")),
                                                                 abs=exact)
    gaps = [x for x in run.values("gap_ms") if x is not None]
    assert g["phases"]["gap_ms"]["mean"] == (pytest.approx(statistics.fmean(gaps), abs=exact) if gaps else None)


def test_phase_sd_is_the_spread_over_cycles_and_null_when_aggregated():
    """``sd`` (the advisor's measurement noise) equals numpy's population std of the per-cycle times."""
    import numpy as np

    from sglang_eagle_cycle.report import PhaseDist

    values = [20.5, 21.0, 21.0, 22.75, 35.0, 20.25]
    d = PhaseDist()
    for v in values:
        d.add(v)
    assert abs(d.sd - float(np.std(values))) < 1e-12
    d.add_mean(21.0, 10)                      # an aggregated line hides its cycles' spread
    assert d.sd is None
    assert PhaseDist().sd is None


# --- the cost-aware adaptive policy's adaptive= field ------------------------------------------------

def _adaptive_lines(seed, cycles=300, bs=2):
    """Device-span lines whose adaptive= state runs in spells (probes are spells of 16-64 cycles)."""
    rng = random.Random(seed)
    run = generate(rng, bs=bs, steps=3, cycles=cycles, p=P_TRUE, spans=True)
    modes, mode = [], "exploit"
    for _ in run.records:
        if rng.random() < 0.05:
            mode = "explore" if mode == "exploit" else "exploit"
        modes.append(mode)
    recs = [dataclasses.replace(r, adaptive=m) for r, m in zip(run.records, modes)]
    return recs, Counter(modes)


def test_adaptive_field_round_trips_and_is_last():
    recs, _ = _adaptive_lines(31, cycles=5)
    for rec in recs:
        line = cycle.format_line(rec)
        assert line.endswith(f" adaptive={rec.adaptive}")
        parsed = cycle.parse_line(line)
        assert parsed.adaptive == rec.adaptive and cycle.format_line(parsed) == line
        assert cycle.from_json(cycle.to_json(rec)).adaptive == rec.adaptive
        assert json.loads(cycle.to_json(rec))["adaptive"] == rec.adaptive
    bad = cycle.format_line(recs[0]).replace("adaptive=", "adaptive=x")
    assert cycle.parse_line(bad) is None
    assert "adaptive" in cycle.json_rejection(cycle.to_json(recs[0]).replace('"explore"', '"x"').replace(
        '"exploit"', '"x"'))
    assert bulkscan.KEYS_ADAPTIVE == bulkscan.KEYS_SPANS + ("adaptive",)


def test_adaptive_lines_bulk_and_per_line_agree(tmp_path):
    recs, modes = _adaptive_lines(32)
    lines = log_lines(recs)
    # the fast readers take the layout (both of them), and count the states per configuration
    text = "\n".join(lines) + "\n"
    by_array, by_tokens = _two_readers(text)
    assert by_array is not None and by_tokens is not None
    _assert_same_tallies(by_array, by_tokens)
    (tally,) = by_array
    assert tally.adaptive == dict(modes)
    path = _write(tmp_path / "adaptive.log", lines)
    fast = inspect_paths([path])
    assert fast == _slow([path])
    (g,) = fast["groups"]
    assert g["adaptive_cycles"] == {m: modes[m] for m in cycle.ADAPTIVE_MODES}
    assert g["cycles"] == len(recs)
    # several configurations in one chunk (a probe runs another depth), and damaged lines among them
    other, other_modes = _adaptive_lines(33, cycles=120, bs=4)
    mixed = lines + log_lines(other)
    random.Random(34).shuffle(mixed)
    text = "\n".join(mixed) + "\n"
    by_array, by_tokens = _two_readers(text)
    assert by_array is not None
    _assert_same_tallies(by_array, by_tokens)
    assert {t.config[0]: t.adaptive for t in by_array} == {2: dict(modes), 4: dict(other_modes)}
    rng = random.Random(35)
    for i in rng.sample(range(len(mixed)), 40):
        mixed[i] = _damage(rng, mixed[i])
    mixed[7] = re.sub(r"adaptive=\S+", "adaptive=maybe", mixed[7])
    path = _write(tmp_path / "adaptive-damaged.log", mixed)
    for chunk in (300, 4000, 1 << 20):
        assert inspect_paths([path], chunk_chars=chunk) == _slow([path], chunk_chars=chunk), chunk
    # JSONL records give the same groups
    jsonl = _write(tmp_path / "adaptive.jsonl", [cycle.to_json(r) for r in recs])
    (gj,) = inspect_paths([jsonl])["groups"]
    assert {k: v for k, v in gj.items() if k != "file"} == {k: v for k, v in g.items() if k != "file"}


def test_aggregates_never_mix_adaptive_states():
    recs, modes = _adaptive_lines(36, cycles=200)
    agg = cycle.Aggregator(every=10)
    out = [a for r in recs for a in agg.add(r)] + agg.flush()
    assert sum(a.n for a in out) == len(recs)
    by_mode = Counter()
    for a in out:
        by_mode[a.adaptive] += a.n
        assert cycle.format_line(a).endswith(f" adaptive={a.adaptive}")
    assert by_mode == modes
    with pytest.raises(ValueError):
        cycle.aggregate([recs[0], dataclasses.replace(recs[1], adaptive="explore" if recs[1].adaptive == "exploit"
                                                      else "exploit")])
