"""The ``[eagle-cycle]`` line and JSONL (DESIGN §3): round trips, aggregation, and a parser that never raises."""

from __future__ import annotations

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_eagle_cycle.cycle import (
    ACCEPTS_MAX_BS,
    PHASES,
    Aggregator,
    CycleRecord,
    aggregate,
    format_line,
    from_json,
    json_rejection,
    make_record,
    parse_line,
    to_dict,
    to_json,
)

# measured times: 0 (a phase too short for the timer) or at least a microsecond
ms = st.just(0.0) | st.floats(min_value=1e-3, max_value=5000.0, allow_nan=False, allow_infinity=False)
opt_ms = st.none() | ms


@st.composite
def cycle_records(draw, config=None) -> CycleRecord:
    """Per-cycle records as the profiler builds them: measured phases, accept lengths per request
    (each at most ``min(steps + 1, draft_tokens)``); ``config`` fixes ``(bs, steps, topk, draft_tokens)``."""
    if config is None:
        steps = draw(st.integers(0, 8))
        topk = draw(st.integers(1, 4))
        nd = steps + 1 if topk == 1 else draw(st.integers(1, 64))
        n_req = draw(st.integers(1, 100))
    else:
        n_req, steps, topk, nd = config
    accepts = draw(st.lists(st.integers(1, min(steps + 1, nd)), min_size=n_req, max_size=n_req))
    eager = draw(st.booleans()) and steps > 1
    # the target forward runs inside the verify (plausible: no more than it, to the printed precision)
    verify, fwd_share = draw(ms), draw(st.none() | st.floats(min_value=0.0, max_value=1.0))
    phases = {"draft_ms": draw(ms) if steps > 1 else None, "verify_ms": verify,
              "verify_fwd_ms": None if fwd_share is None else verify * fwd_share, "extend_ms": draw(opt_ms)}
    # the cycle holds its parts (other = the rest) and takes time: a line whose parts exceed its
    # total, or whose total is 0, is damaged (plausible)
    phases["total_ms"] = sum(phases[k] or 0.0 for k in ("draft_ms", "verify_ms", "extend_ms")) \
        + draw(st.floats(min_value=0.01, max_value=5000.0, allow_nan=False, allow_infinity=False))
    return make_record(
        cycle=draw(st.integers(0, 10**12)), config=(n_req, steps, topk, nd), phases_ms=phases, accepts=accepts,
        graph=draw(st.booleans()), draft_step_ms=draw(st.lists(ms, min_size=steps - 1, max_size=steps - 1))
        if eager else None, rank=draw(st.none() | st.from_regex(r"tp[0-9]{1,2}(\.pp[0-9]\.dp[0-9])?", fullmatch=True)),
    )


@st.composite
def aggregated_records(draw) -> CycleRecord:
    first = draw(cycle_records())
    rest = draw(st.lists(cycle_records(config=first.config), max_size=6))
    return aggregate([first] + rest)


any_record = cycle_records() | aggregated_records()


def _printed(rec: CycleRecord) -> dict:
    """The record at the precision the line prints (2 decimals for ms and accept_len, 1 for tok_s)."""
    def r(x, nd):
        return None if x is None else round(x, nd) + 0.0

    return {
        "ints": (rec.cycle, rec.bs, rec.steps, rec.topk, rec.draft_tokens, rec.n),
        "phases": tuple(r(getattr(rec, k), 2) for k in PHASES),
        "accept_len": r(rec.accept_len, 2), "tok_s": r(rec.tok_s, 1), "graph": rec.graph,
        "hist": rec.histogram(), "accepts": rec.accepts if rec.n is None else None,
        "steps_ms": None if not rec.draft_step_ms else [r(x, 2) for x in rec.draft_step_ms],
        "rank": rec.rank, "total_max_ms": r(rec.total_max_ms, 2),
    }


def _close(a: dict, b: dict, tol: float) -> bool:
    for key in a:
        x, y = a[key], b[key]
        if isinstance(x, tuple) and x and isinstance(x[0], (float, type(None))):
            if any((p is None) != (q is None) or (p is not None and not math.isclose(p, q, abs_tol=tol))
                   for p, q in zip(x, y)):
                return False
        elif isinstance(x, float) and isinstance(y, float):
            if not math.isclose(x, y, abs_tol=tol):
                return False
        elif isinstance(x, list) and x and isinstance(x[0], float):
            if len(x) != len(y) or any(not math.isclose(p, q, abs_tol=tol) for p, q in zip(x, y)):
                return False
        elif x != y:
            return False
    return True


@settings(max_examples=150, deadline=None)
@given(any_record)
def test_line_round_trip(rec):
    line = format_line(rec)
    back = parse_line(line)
    assert back is not None, line
    assert format_line(back) == line
    # equal to the printed precision: ms to 0.005 (half a printed unit), tok_s to 0.05
    assert _close(_printed(rec), _printed(back), tol=0.0051), (rec, back)
    assert back.tok_s is None or math.isclose(back.tok_s, rec.tok_s, abs_tol=0.051)


@settings(max_examples=150, deadline=None)
@given(any_record, st.sampled_from(["", "[2026-11-30 12:00:01 TP0] ", "2026-11-30 12:00:01 INFO 4242 [x.py:9] "]),
       st.sampled_from(["", "\n", "\r\n", "   "]))
def test_line_parses_behind_any_log_prefix(rec, prefix, end):
    assert format_line(parse_line(prefix + format_line(rec) + end)) == format_line(rec)


@settings(max_examples=150, deadline=None)
@given(any_record)
def test_jsonl_round_trip(rec):
    text = to_json(rec)
    obj = json.loads(text)
    assert set(obj) >= {"cycle", "bs", "steps", "topk", "draft_tokens", *PHASES, "accept_len", "tok_s", "graph"}
    back = from_json(text)
    assert back is not None
    assert to_json(back) == text
    assert from_json(obj) == back  # a decoded dict parses the same
    for k in PHASES:
        x, y = getattr(rec, k), getattr(back, k)
        assert (x is None) == (y is None) and (x is None or math.isclose(x, y, abs_tol=5.1e-5))
    assert back.histogram() == rec.histogram()
    assert (obj.get("accepts") is not None) == (rec.accepts is not None and rec.n is None)


@settings(max_examples=150, deadline=None)
@given(any_record)
def test_fast_json_writer_matches_json_dumps(rec):
    assert to_json(rec) == json.dumps(to_dict(rec), separators=(",", ":"))


def test_a_phase_that_did_not_run_is_a_dash_and_null():
    rec = make_record(cycle=7, config=(1, 1, 1, 2), accepts=[2], graph=True,
                      phases_ms={"draft_ms": None, "verify_ms": 21.4, "verify_fwd_ms": 20.85, "extend_ms": 0.61,
                                 "total_ms": 22.5})
    line = format_line(rec)
    assert " draft_ms=- " in line and " other_ms=0.49 " in line
    assert json.loads(to_json(rec))["draft_ms"] is None
    assert parse_line(line).draft_ms is None


def test_design_example_line_parses_to_its_values():
    line = ("[eagle-cycle] cycle=1234 bs=1 steps=2 topk=1 draft_tokens=3 draft_ms=0.92 verify_ms=21.40 "
            "verify_fwd_ms=20.85 extend_ms=0.61 other_ms=0.31 total_ms=23.24 accept_len=2.00 accepts=2 tok_s=86.1 graph=1")
    rec = parse_line(line)
    assert (rec.cycle, rec.config, rec.total_ms, rec.verify_fwd_ms, rec.accepts, rec.graph) == (
        1234, (1, 2, 1, 3), 23.24, 20.85, [2], True)
    assert format_line(rec) == line


def test_large_batches_write_a_histogram():
    accepts = [1] * 30 + [2] * 40 + [4] * 10
    rec = make_record(cycle=1, config=(80, 3, 1, 4), accepts=accepts, graph=False,
                      phases_ms={"draft_ms": 1.0, "verify_ms": 2.0, "verify_fwd_ms": 1.5, "extend_ms": 0.5,
                                 "total_ms": 4.0})
    assert len(accepts) > ACCEPTS_MAX_BS
    line = format_line(rec)
    assert "accept_hist=1:30,2:40,4:10" in line and "accepts=" not in line
    assert parse_line(line).accept_hist == {1: 30, 2: 40, 4: 10}
    assert json.loads(to_json(rec))["accept_hist"] == {"1": 30, "2": 40, "4": 10}


def _rec(i, bs=1, total=10.0, accepts=None):
    return make_record(cycle=i, config=(bs, 3, 1, 4), accepts=accepts or [2] * bs, graph=True,
                       phases_ms={"draft_ms": 1.0, "verify_ms": 6.0, "verify_fwd_ms": 5.5, "extend_ms": 1.0,
                                  "total_ms": total})


def test_aggregator_emits_means_every_n_and_flushes_on_config_change():
    agg = Aggregator(3)
    out = []
    for i, total in enumerate([10.0, 12.0, 14.0, 20.0], start=1):
        out += agg.add(_rec(i, total=total))
    assert len(out) == 1
    a = out[0]
    assert (a.n, a.cycle, a.total_ms, a.total_max_ms) == (3, 3, 12.0, 14.0)
    assert "n=3 total_max_ms=14.00" in format_line(a) and "accept_hist=2:3" in format_line(a)
    out = agg.add(_rec(5, bs=2, accepts=[1, 3]))  # bs changed: the pending cycle 4 goes out alone
    assert [(r.n, r.cycle, r.bs) for r in out] == [(1, 4, 1)]
    assert [(r.n, r.cycle, r.bs, r.accept_hist) for r in agg.flush()] == [(1, 5, 2, {1: 1, 3: 1})]
    assert agg.flush() == []


def test_aggregated_line_reads_back_with_its_weight():
    a = aggregate([_rec(1, total=10.0), _rec(2, total=11.0)])
    back = parse_line(format_line(a))
    assert (back.n, back.weight, back.total_ms, back.total_max_ms, back.accepts) == (2, 2, 10.5, 11.0, None)


def test_lines_that_are_not_ours_are_none(shared_data):
    lines = (shared_data / "logs" / "decode_batch_variants.log").read_text().splitlines()
    assert lines and all(parse_line(line) is None for line in lines)


def test_truncated_and_damaged_lines_are_none():
    line = format_line(_rec(3))
    assert parse_line(line[: line.index(" tok_s=")]) is None
    assert parse_line(line.replace("total_ms=10.00", "total_ms=1.0.0")) is None
    assert parse_line(line.replace("accepts=2", "accepts=2,,x")) is None
    assert parse_line(line.replace("graph=1", "graph=2")) is None
    assert parse_line(line + " n=abc") is None
    assert parse_line(line + " some_future_field=1").total_ms == 10.0  # appended fields are ignored


def test_a_device_span_line_cut_between_its_pair_is_refused_with_why():
    """format_line writes draft_prep_ms= and gap_ms= together ("-" where unknown): a line holding
    one alone was cut between them, and had been counted as a cycle (helper 100). A gap that is not
    known is still a line."""
    from sglang_eagle_cycle.cycle import line_rejection

    rec = make_record(cycle=3, config=(1, 2, 1, 3), accepts=[2], graph=True,
                      phases_ms={"draft_ms": 0.5, "verify_ms": 9.0, "verify_fwd_ms": 8.6, "extend_ms": 0.4,
                                 "total_ms": 10.3, "draft_prep_ms": 0.35, "gap_ms": 0.1})
    line = format_line(rec)
    assert line.endswith(" draft_prep_ms=0.35 gap_ms=0.10") and parse_line(line).gap_ms == 0.1
    cut = line[: line.index(" gap_ms=")]
    assert parse_line(cut) is None
    assert line_rejection(cut) == "draft_prep_ms without gap_ms: a device-span line cut short"
    alone = line.replace(" draft_prep_ms=0.35", "")
    assert parse_line(alone) is None and line_rejection(alone) == "gap_ms without draft_prep_ms: a device-span line cut short"
    unknown = format_line(make_record(cycle=0, config=(1, 2, 1, 3), accepts=[2], graph=True,
                                      phases_ms={"draft_ms": 0.5, "verify_ms": 9.0, "extend_ms": 0.4,
                                                 "total_ms": 10.3, "draft_prep_ms": 0.35, "gap_ms": None}))
    assert unknown.endswith(" gap_ms=-") and parse_line(unknown).gap_ms is None


def test_a_line_with_a_huge_tail_costs_no_more_memory_than_its_text():
    """A damaged line of 100,000 appended ``k=v`` tokens (0.4 MB) once took 106 MB inside the regex
    (backtracking state per token; a 20 MB line took 5 GB): now about the size of its tokens."""
    import tracemalloc

    from sglang_eagle_cycle.cycle import line_rejection

    line = format_line(_rec(3)) + " y=1" * 100_000
    tracemalloc.start()
    try:
        assert parse_line(line) is None
        assert line_rejection(line) == "y given twice"
        assert parse_line(format_line(_rec(3)) + "".join(f" k{i}=1" for i in range(100_000))).total_ms == 10.0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 30e6, f"{peak / 1e6:.0f} MB for a {len(line) / 1e6:.1f} MB line"


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=400))
def test_parsers_survive_random_bytes(data):
    for text in (data.decode("utf-8", "replace"), data.decode("latin-1"), "[eagle-cycle] " + data.decode("latin-1")):
        out = parse_line(text)
        assert out is None or isinstance(out, CycleRecord)
    assert from_json(data) is None or isinstance(from_json(data), CycleRecord)


@settings(max_examples=150, deadline=None)
@given(any_record, st.data())
def test_parsers_survive_mutated_lines(rec, data):
    line = format_line(rec)
    cut = data.draw(st.integers(0, len(line)))
    junk = data.draw(st.text(max_size=8))
    for text in (line[:cut], line[:cut] + junk + line[cut:], line.replace("=", junk, 1)):
        out = parse_line(text)
        assert out is None or isinstance(out, CycleRecord)
    obj = json.loads(to_json(rec))
    key = data.draw(st.sampled_from(sorted(obj)))
    obj[key] = data.draw(st.none() | st.text(max_size=4) | st.lists(st.integers()) | st.floats() | st.booleans())
    out = from_json(obj)
    assert out is None or isinstance(out, CycleRecord)


def test_jsonl_records_the_profiler_cannot_write_are_dropped():
    good = make_record(cycle=7, config=(2, 3, 1, 4), phases_ms={"draft_ms": 1.0, "verify_ms": 20.0,
                                                                  "verify_fwd_ms": 19.0, "extend_ms": 0.5,
                                                                  "total_ms": 22.0}, accepts=[2, 4], graph=True)
    obj = json.loads(to_json(good))
    assert format_line(from_json(obj)) == format_line(good)
    for key, value in [("accepts", [100000000, 2]), ("accepts", [-4, 2]), ("accepts", [0, 2]),
                       ("accept_hist", {"100000000": 1}), ("total_ms", -3.0), ("draft_ms", -0.5),
                       ("accept_len", 4.5), ("tok_s", -1.0), ("bs", 0), ("n", 0), ("steps", 5000),
                       ("draft_step_ms", [0.3, -0.1])]:
        bad = {k: v for k, v in obj.items() if not (key == "accept_hist" and k == "accepts")}
        bad[key] = value
        assert from_json(bad) is None, (key, value)
        if key not in ("accept_hist", "n", "draft_step_ms", "steps", "bs"):
            assert from_json(json.dumps(bad)) is None
    # a key given twice is damaged, as a field repeated on a line is: json.loads kept the last one, so
    # a record ending in its own "steps" again was read at that depth (helper 37)
    text = to_json(good)
    twice = text[:-1] + ', "steps": 5, "draft_tokens": 6}'
    assert from_json(twice) is None and json_rejection(twice) == "steps given twice"
    assert from_json(text) is not None
    # topk > 1: the longest accept is min(steps + 1, draft_tokens) = 3 here, not draft_tokens = 8
    tree = dict(obj, topk=4, draft_tokens=8, steps=2, accepts=[3, 1], accept_len=2.0)
    assert from_json(tree) is not None and from_json(dict(tree, accepts=[4, 1])) is None
