"""Sinks: the INFO line (every cycle or aggregated), JSONL (appended, flushed per line, per rank), rank rules."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest

from sglang_eagle_cycle.cycle import format_line, from_json, make_record, parse_line
from sglang_eagle_cycle.runtime import Ranks
from sglang_eagle_cycle.sinks import CycleSink, SinkConfig, jsonl_path_for, load_nvtx


def rec(i: int, bs: int = 2, total: float = 20.0, accepts=None):
    return make_record(cycle=i, config=(bs, 3, 1, 4), accepts=accepts or [1 + (i % 4)] * bs, graph=True,
                       phases_ms={"draft_ms": 1.0, "verify_ms": 15.0, "verify_fwd_ms": 14.0, "extend_ms": 1.5,
                                  "total_ms": total})


class Pending:
    """A measured cycle whose events complete when the test says so."""

    def __init__(self, r, done=True):
        self.r, self.done, self.built = r, done, 0

    def ready(self):
        return self.done

    def build(self):
        self.built += 1
        return self.r


@pytest.fixture
def log():
    lg = logging.getLogger("sglang_eagle_cycle.test_sinks")
    lg.setLevel(logging.INFO)
    lg.propagate = True
    return lg


def lines(caplog, name="sglang_eagle_cycle.test_sinks"):
    return [r.getMessage() for r in caplog.records if r.name == name and r.levelno == logging.INFO]


def test_every_cycle_one_info_line(caplog, log):
    sink = CycleSink(SinkConfig(background=False), log=log)
    with caplog.at_level(logging.INFO):
        for i in range(1, 4):
            sink.submit(Pending(rec(i)))
    got = lines(caplog)
    assert got == [format_line(rec(i)) for i in range(1, 4)]
    assert [parse_line(x).cycle for x in got] == [1, 2, 3]


def test_line_follows_the_log_level(caplog, log):
    log.setLevel(logging.WARNING)  # SGLang --log-level warning
    sink = CycleSink(SinkConfig(background=False), log=log)
    assert not sink.active  # no JSONL either: the profiler does not even time the cycle
    sink.submit(Pending(rec(1)))
    assert lines(caplog) == []


def test_log_every_aggregates_lines_but_jsonl_stays_per_cycle(tmp_path, caplog, log):
    path = tmp_path / "cycles.jsonl"
    sink = CycleSink(SinkConfig(log_every=3, jsonl_path=str(path), background=False), log=log)
    with caplog.at_level(logging.INFO):
        for i in range(1, 8):
            sink.submit(Pending(rec(i, total=10.0 + i)))
        sink.submit(Pending(rec(8, bs=4)))  # batch size changed: flush the pending aggregate early
        sink.close()
    agg = [parse_line(x) for x in lines(caplog)]
    assert [(a.n, a.cycle, a.bs) for a in agg] == [(3, 3, 2), (3, 6, 2), (1, 7, 2), (1, 8, 4)]
    assert agg[0].total_ms == pytest.approx(12.0) and agg[0].total_max_ms == pytest.approx(13.0)
    assert agg[0].accept_hist == {2: 2, 3: 2, 4: 2}
    recs = [from_json(x) for x in path.read_text().splitlines()]
    assert [r.cycle for r in recs] == list(range(1, 9)) and all(r.n is None for r in recs)


def test_jsonl_appends_and_flushes_each_line(tmp_path, log):
    path = tmp_path / "c.jsonl"
    path.write_text('{"user": "kept"}\n')
    sink = CycleSink(SinkConfig(jsonl_path=str(path), background=False), log=log)
    sink.submit(Pending(rec(1)))
    # read while the file is still open: the line is already on disk
    assert path.read_text().splitlines()[0] == '{"user": "kept"}'
    assert from_json(path.read_text().splitlines()[1]).cycle == 1
    sink.submit(Pending(rec(2)))
    assert len(path.read_text().splitlines()) == 3
    sink.close()
    sink.submit(Pending(rec(3)))  # after close: ignored, nothing written, no error
    assert len(path.read_text().splitlines()) == 3


def test_jsonl_record_keys(tmp_path, log):
    path = tmp_path / "c.jsonl"
    sink = CycleSink(SinkConfig(jsonl_path=str(path), background=False, rank_label="tp1"), log=log)
    sink.submit(Pending(rec(5)))
    obj = json.loads(path.read_text())
    assert obj["accepts"] == [2, 2] and obj["rank"] == "tp1" and obj["verify_fwd_ms"] == 14.0


def test_rank_suffix_only_when_more_than_one_rank():
    assert jsonl_path_for("/x/c.jsonl", Ranks()) == "/x/c.jsonl"
    assert jsonl_path_for("/x/c.jsonl", Ranks(tp_rank=3, tp_size=8)) == "/x/c.tp3.pp0.dp0.jsonl"
    assert jsonl_path_for("/x/c", Ranks(dp_rank=1, dp_size=2)) == "/x/c.tp0.pp0.dp1"
    assert jsonl_path_for("run.d/c.log.jsonl", Ranks(pp_rank=1, pp_size=2)) == "run.d/c.log.tp0.pp1.dp0.jsonl"


def test_config_from_env_defaults_and_ranks(caplog):
    c = SinkConfig.from_env({}, Ranks())
    assert (c.log_every, c.log_line, c.rank_label, c.jsonl_path, c.nvtx) == (1, True, None, None, False)
    tp1 = Ranks(tp_rank=1, tp_size=2)
    env = {"SGLANG_EAGLE_CYCLE_JSONL": "/tmp/e.jsonl", "SGLANG_EAGLE_CYCLE_LOG_EVERY": "40",
           "SGLANG_EAGLE_CYCLE_NVTX": "1"}
    c = SinkConfig.from_env(env, tp1, stats_rank=False)
    assert (c.log_every, c.log_line, c.rank_label, c.jsonl_path, c.nvtx) == (40, False, None,
                                                                             "/tmp/e.tp1.pp0.dp0.jsonl", True)
    c = SinkConfig.from_env({**env, "SGLANG_EAGLE_CYCLE_ALL_RANKS": "1"}, tp1, stats_rank=False)
    assert (c.log_line, c.rank_label) == (True, "tp1")
    with caplog.at_level(logging.WARNING):
        for bad in ("0", "x", "-3"):
            assert SinkConfig.from_env({"SGLANG_EAGLE_CYCLE_LOG_EVERY": bad}, Ranks()).log_every == 1
    assert sum("SGLANG_EAGLE_CYCLE_LOG_EVERY" in r.getMessage() for r in caplog.records) == 3


def test_all_ranks_label_is_on_the_line(caplog, log):
    sink = CycleSink(SinkConfig(background=False, rank_label="tp0"), log=log)
    with caplog.at_level(logging.INFO):
        sink.submit(Pending(rec(1)))
    assert lines(caplog)[0].endswith(" rank=tp0") and parse_line(lines(caplog)[0]).rank == "tp0"


def test_unfinished_events_wait_without_blocking(caplog, log):
    sink = CycleSink(SinkConfig(background=False), log=log)
    late, next_one = Pending(rec(1), done=False), Pending(rec(2))
    with caplog.at_level(logging.INFO):
        sink.submit(late)
        sink.submit(next_one)  # keeps order: waits behind cycle 1
        assert lines(caplog) == [] and late.built == 0
        late.done = True
        sink.submit(Pending(rec(3)))
    assert [parse_line(x).cycle for x in lines(caplog)] == [1, 2, 3]


def test_stale_cycle_is_dropped_with_one_warning(caplog, log, monkeypatch):
    import sglang_eagle_cycle.sinks as sinks

    monkeypatch.setattr(sinks, "STALE_AFTER_S", 0.0)
    sink = CycleSink(SinkConfig(background=False), log=log)
    with caplog.at_level(logging.INFO):
        sink.submit(Pending(rec(1), done=False))
        time.sleep(0.01)
        sink.submit(Pending(rec(2)))
        sink.submit(Pending(rec(3), done=False))
        time.sleep(0.01)
        sink.submit(Pending(rec(4)))
    assert [parse_line(x).cycle for x in lines(caplog)] == [2, 4]
    assert sink.dropped == 2
    assert sum("events not complete" in r.getMessage() for r in caplog.records) == 1


def test_faults_are_logged_once_and_writing_goes_on(caplog, log, tmp_path):
    class Broken(Pending):
        def build(self):
            raise KeyError("boom")

    sink = CycleSink(SinkConfig(background=False, jsonl_path=str(tmp_path / "c.jsonl")), log=log)
    with caplog.at_level(logging.INFO):
        sink.submit(Broken(rec(1)))
        sink.submit(Broken(rec(2)))
        sink.submit(Pending(rec(3)))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "KeyError" in warnings[0] and "boom" in warnings[0]
    assert [parse_line(x).cycle for x in lines(caplog)] == [3]


def test_unwritable_jsonl_is_one_warning_and_the_line_still_prints(caplog, log, tmp_path):
    with caplog.at_level(logging.INFO):
        sink = CycleSink(SinkConfig(background=False, jsonl_path=str(tmp_path)), log=log)  # a directory
        sink.submit(Pending(rec(1)))
    assert any("JSONL disabled" in r.getMessage() for r in caplog.records)
    assert len(lines(caplog)) == 1


def test_background_thread_writes_in_order_and_flushes(tmp_path, caplog, log):
    path = tmp_path / "bg.jsonl"
    sink = CycleSink(SinkConfig(jsonl_path=str(path), log_every=4), log=log)
    main = threading.get_ident()
    seen_threads = set()

    class Where(Pending):
        def build(self):
            seen_threads.add(threading.get_ident())
            return super().build()

    with caplog.at_level(logging.INFO):
        for i in range(1, 11):
            sink.submit(Where(rec(i)))
        assert sink.flush(5.0)
        assert [from_json(x).cycle for x in path.read_text().splitlines()] == list(range(1, 11))
        sink.close()
    assert main not in seen_threads and len(seen_threads) == 1  # built on the sink thread
    assert [parse_line(x).n for x in lines(caplog)] == [4, 4, 2]  # close() writes the last aggregate


def test_background_submit_is_cheap(log):
    sink = CycleSink(SinkConfig(), log=log)
    log.setLevel(logging.WARNING)
    items = [Pending(rec(i)) for i in range(2000)]
    t0 = time.perf_counter()
    for it in items:
        sink.submit(it)
    per = (time.perf_counter() - t0) / len(items)
    sink.close()
    assert per < 50e-6  # a queue put; the formatting happens on the sink thread


def test_nvtx_without_package_or_cuda_is_one_warning(caplog, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "nvtx", None)
    from sglang_eagle_cycle import timing

    if timing.cuda_usable():
        pytest.skip("CUDA present: torch.cuda.nvtx would be used")
    with caplog.at_level(logging.WARNING):
        assert load_nvtx() is None
    assert sum("SGLANG_EAGLE_CYCLE_NVTX=1" in r.getMessage() for r in caplog.records) == 1


def test_queue_is_bounded_when_the_sink_thread_cannot_run(caplog, log, monkeypatch):
    import sglang_eagle_cycle.sinks as sinks

    monkeypatch.setattr(sinks, "MAX_INBOX", 5)
    sink = CycleSink(SinkConfig(), log=log)
    monkeypatch.setattr(sink, "_start", lambda: None)  # a scheduler that never lets the thread run
    sink._thread = "not started"
    with caplog.at_level(logging.WARNING):
        for i in range(8):
            sink.submit(Pending(rec(i)))
    assert len(sink.inbox) == 5 and sink.dropped == 3
    assert sum("cycles waiting for the sink thread" in r.getMessage() for r in caplog.records) == 1


def _wait_until(cond, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.002)
    return False


def test_sink_thread_keeps_off_while_the_scheduler_is_busy(tmp_path, log, monkeypatch):
    """host_busy True (the scheduler runs Python): kicks and timer wake-ups write nothing; False: it writes."""
    import sglang_eagle_cycle.sinks as sinks

    monkeypatch.setattr(sinks, "POLL_BUSY_S", 0.005)
    path = tmp_path / "gate.jsonl"
    sink = CycleSink(SinkConfig(jsonl_path=str(path), log_line=False), log=log)
    sink.host_busy = True
    for i in range(1, 4):
        sink.submit(Pending(rec(i)))
    sink.kick()
    time.sleep(0.1)  # 20 timer wake-ups and a kick, all while busy
    assert sink.written == 0 and not path.read_text()
    sink.host_busy = False  # the scheduler blocks on the device
    sink.kick()
    assert _wait_until(lambda: sink.written == 3)
    assert [from_json(x).cycle for x in path.read_text().splitlines()] == [1, 2, 3]
    sink.close()


def test_overdue_cycles_are_written_even_while_busy(tmp_path, log, monkeypatch):
    """A scheduler that never waits must not make the sink fall behind forever."""
    import sglang_eagle_cycle.sinks as sinks

    monkeypatch.setattr(sinks, "POLL_BUSY_S", 0.005)
    monkeypatch.setattr(sinks, "OVERDUE_S", 0.05)
    sink = CycleSink(SinkConfig(jsonl_path=str(tmp_path / "late.jsonl"), log_line=False), log=log)
    sink.host_busy = True
    sink.submit(Pending(rec(1)))
    assert _wait_until(lambda: sink.written == 1, timeout=2.0)
    sink.close()


def test_flush_writes_regardless_of_the_gate(tmp_path, log):
    sink = CycleSink(SinkConfig(jsonl_path=str(tmp_path / "f.jsonl"), log_line=False), log=log)
    sink.host_busy = True
    for i in range(5):
        sink.submit(Pending(rec(i)))
    assert sink.flush(5.0) and sink.written == 5
    sink.close()


def test_a_slice_stops_after_its_budget(tmp_path, log, monkeypatch):
    """A wake-up writes in slices of about SLICE_S (at most MAX_SLICES), pausing between them; the rest waits."""
    import sglang_eagle_cycle.sinks as sinks

    class Slow(Pending):
        def build(self):
            time.sleep(0.004)
            return super().build()

    monkeypatch.setattr(sinks, "SLICE_S", 0.001)
    monkeypatch.setattr(sinks, "MAX_SLICES", 2)
    monkeypatch.setattr(sinks, "POLL_BUSY_S", 0.2)
    sink = CycleSink(SinkConfig(jsonl_path=str(tmp_path / "s.jsonl"), log_line=False), log=log)
    for i in range(6):
        sink.submit(Slow(rec(i)))
    sink.kick()
    assert _wait_until(lambda: sink.written >= 2)
    time.sleep(0.05)
    assert sink.written == 2  # one item past each slice's budget, two slices, then asleep until woken
    sink.kick()
    assert _wait_until(lambda: sink.written == 4)
    assert sink.flush(5.0) and sink.written == 6
    sink.close()


def test_slices_stop_when_the_scheduler_turns_busy(tmp_path, log, monkeypatch):
    import sglang_eagle_cycle.sinks as sinks

    class Busy(Pending):
        def build(self):
            sink.host_busy = True  # the scheduler's device wait ended while this cycle was written
            return super().build()

    monkeypatch.setattr(sinks, "POLL_BUSY_S", 0.2)
    sink = CycleSink(SinkConfig(jsonl_path=str(tmp_path / "b.jsonl"), log_line=False), log=log)
    for i in range(5):
        sink.submit(Busy(rec(i)))
    sink.kick()
    assert _wait_until(lambda: sink.written >= 1)
    time.sleep(0.05)
    assert sink.written == 1
    sink.close()
    assert sink.written == 5  # close() writes the rest
