"""Sinks: the INFO line (every cycle or aggregated), JSONL (appended, flushed per line, per rank), rank rules."""

from __future__ import annotations

import json
import logging
import re
import threading
import time

import pytest

from sglang_eagle_cycle.cycle import format_line, from_json, make_record, parse_line
from sglang_eagle_cycle.runtime import Ranks, env_flag
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
            sink.submit(Pending(rec(i, total=18.0 + i)))   # parts 17.5 ms: a total below it is a damaged line
        sink.submit(Pending(rec(8, bs=4)))  # batch size changed: flush the pending aggregate early
        sink.close()
    agg = [parse_line(x) for x in lines(caplog)]
    assert [(a.n, a.cycle, a.bs) for a in agg] == [(3, 3, 2), (3, 6, 2), (1, 7, 2), (1, 8, 4)]
    assert agg[0].total_ms == pytest.approx(20.0) and agg[0].total_max_ms == pytest.approx(21.0)
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


def test_missing_jsonl_folders_are_created_with_one_info_line(tmp_path, caplog, log):
    # they were created without a word: an operator looking for the file had no trace of where it went
    path = tmp_path / "runs" / "day1" / "c.jsonl"
    with caplog.at_level(logging.INFO):
        sink = CycleSink(SinkConfig(jsonl_path=str(path), log_line=False, background=False), log=log)
        sink.submit(Pending(rec(1)))
        sink.close()
    assert lines(caplog) == [f"sglang-eagle-cycle: created the folder {tmp_path / 'runs' / 'day1'} (and the "
                             f"missing folders above it, from {tmp_path / 'runs'}) for the JSONL file {path}"]
    assert from_json(path.read_text()).cycle == 1
    # one missing folder is named alone; an existing one says nothing
    caplog.clear()
    with caplog.at_level(logging.INFO):
        CycleSink(SinkConfig(jsonl_path=str(tmp_path / "runs" / "day2" / "c.jsonl"), log_line=False,
                             background=False), log=log).close()
        CycleSink(SinkConfig(jsonl_path=str(path), log_line=False, background=False), log=log).close()
    assert lines(caplog) == [f"sglang-eagle-cycle: created the folder {tmp_path / 'runs' / 'day2'} for the "
                             f"JSONL file {tmp_path / 'runs' / 'day2' / 'c.jsonl'}"]


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
    # DP attention / DP replicas: one stats-logging rank per replica prints, labelled without ALL_RANKS
    for dp_rank in (0, 1):
        c = SinkConfig.from_env({}, Ranks(tp_rank=0, dp_rank=dp_rank, tp_size=4, dp_size=2), stats_rank=True)
        assert (c.log_line, c.rank_label) == (True, f"tp0.pp0.dp{dp_rank}")
    c = SinkConfig.from_env({}, Ranks(tp_rank=0, tp_size=4), stats_rank=True)
    assert (c.log_line, c.rank_label) == (True, None)
    with caplog.at_level(logging.WARNING):
        for bad in ("0", "x", "-3"):
            assert SinkConfig.from_env({"SGLANG_EAGLE_CYCLE_LOG_EVERY": bad}, Ranks()).log_every == 1
    assert sum("SGLANG_EAGLE_CYCLE_LOG_EVERY" in r.getMessage() for r in caplog.records) == 3


def test_env_flag_words_default_and_one_warning_per_value(caplog):
    name = "SGLANG_EAGLE_CYCLE_TEST_FLAG"
    for raw, want in (("1", True), (" On ", True), ("YES", True), ("true", True),
                      ("0", False), ("off", False), ("No", False), ("FALSE", False)):
        assert env_flag(name, not want, {name: raw}) is want, raw
    assert env_flag(name, True, {}) is True and env_flag(name, False, {name: " "}) is False
    with caplog.at_level(logging.WARNING, logger="sglang_eagle_cycle"):
        assert [env_flag(name, d, {name: "fasle"}) for d in (True, True, False)] == [True, True, False]
        assert env_flag(name, False, {name: "2"}) is False
    msgs = [r.getMessage() for r in caplog.records]
    assert msgs == [f"{name}='fasle' is not one of 1/true/yes/on or 0/false/no/off; using the default (on)",
                    f"{name}='2' is not one of 1/true/yes/on or 0/false/no/off; using the default (off)"]


def test_unknown_variables_are_named_and_known_ones_match_the_readme(repo_root):
    from sglang_eagle_cycle.runtime import KNOWN_ENV, unknown_env

    env = {"SGLANG_EAGLE_CYCLE_WIRNG": "0", "SGLANG_EAGLE_CYCLE_XYZ": "1", "SGLANG_EAGLE_CYCLE_NVTX": "1",
           "SGLANG_PLUGINS": "eagle_cycle", "PATH": "/bin"}
    assert unknown_env(env) == [
        "SGLANG_EAGLE_CYCLE_WIRNG is set but nothing reads it; did you mean SGLANG_EAGLE_CYCLE_WIRING?",
        "SGLANG_EAGLE_CYCLE_XYZ is set but nothing reads it"]
    assert unknown_env({k: "1" for k in KNOWN_ENV}) == []
    documented = set(re.findall(r"SGLANG_EAGLE_CYCLE(?:_[A-Z]+)*", (repo_root / "README.md").read_text()))
    assert documented == set(KNOWN_ENV)


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
        assert sink.flush(30.0)  # the sink thread's first start may import torch (cold: seconds)
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


def _phases(waits_ms, host_ms, t0=100.0):
    """A HostPhases fed with stamps of cycles: host phase ``host_ms[i]``, then device wait ``waits_ms[i]``.

    Returns it and the time the last wait ended.
    """
    from sglang_eagle_cycle.sinks import HostPhases

    ph, closed, last_wait = HostPhases(), t0, -1.0
    for w, h in zip(waits_ms, host_ms):
        opened = closed + h / 1e3
        ph.observe(opened, closed, last_wait)  # seen while the scheduler waits: host phase, previous wait
        closed, last_wait = opened + w / 1e3, w / 1e3
    ph.observe(opened, closed, last_wait)  # seen while it runs Python: the last wait
    return ph, closed


def test_host_phases_predict_the_next_device_wait():
    from sglang_eagle_cycle.sinks import HostPhases

    ph, last_close = _phases([1.0, 1.2, 0.9, 1.1, 5.0], [0.3, 0.25, 0.35, 0.3, 0.3])
    assert [round(x * 1e3, 3) for x in ph.waits] == [1.0, 1.2, 0.9, 1.1, 5.0]
    assert ph.typical_wait() == pytest.approx(1.1e-3)  # median: the one 5 ms wait does not move it
    assert ph.host_phase() == pytest.approx(0.3e-3)
    assert ph.period() == pytest.approx(1.4e-3)
    # a wait that began at t ends, at the earliest seen, after the shortest recent wait
    assert ph.wait_end(200.0) == pytest.approx(200.0 + 0.9e-3)
    # running Python since last_close: the next wait begins one typical host phase later
    assert ph.next_open(last_close - 5e-3, last_close) == pytest.approx(last_close + 0.3e-3)
    # waiting since t: after the typical wait and the typical host phase
    assert ph.next_open(300.0, 299.0) == pytest.approx(300.0 + 1.1e-3 + 0.3e-3)
    # the same stamps seen twice are one sample; unstamped and idle-long phases are none
    ph.observe(300.0, 299.9995, -1.0)
    ph.observe(300.0, 299.9995, 0.5)
    ph.observe(0.0, -1.0, -1.0)
    ph.observe(400.0, 402.5, 2.5)  # a 2.5 s "wait": the scheduler was idle
    assert len(ph.host) == 6 and len(ph.waits) == 5
    # bounded memory: the last PHASE_SAMPLES of each
    ph, _ = _phases([1.0] * 20, [0.3] * 20)
    assert len(ph.waits) == len(ph.host) == 8
    assert HostPhases().next_open(1.0, 0.5) is None and HostPhases().wait_end(1.0) is None


class _Clock:
    def __init__(self, t):
        self.t = t

    def __call__(self):
        return self.t


class _Timed(Pending):
    """A cycle that takes ``cost`` seconds of the fake clock to write."""

    def __init__(self, r, clock, cost):
        super().__init__(r)
        self.clock, self.cost = clock, cost

    def build(self):
        self.clock.t += self.cost
        return super().build()


def test_drain_starts_no_cycle_it_cannot_finish_before_the_deadline(tmp_path, log, monkeypatch):
    import sglang_eagle_cycle.sinks as sinks

    clock = _Clock(10.0)
    monkeypatch.setattr(sinks, "_clock", clock)
    sink = CycleSink(SinkConfig(jsonl_path=str(tmp_path / "d.jsonl"), log_line=False), log=log)
    sink._item_s = 0.0001  # 100 us per cycle, as they cost
    for i in range(10):
        sink._waiting.append((_Timed(rec(i), clock, 0.0001), time.monotonic()))
    sink._drain(deadline=10.0)  # past already: one cycle all the same (progress)
    assert sink.written == 1
    sink._drain(deadline=clock.t + 0.00035)  # room for 3.5 cycles: 3 started, none past the deadline
    assert sink.written == 4 and clock.t <= 10.0001 + 0.00035
    assert sink._item_s == pytest.approx(0.0001)
    sink._item_s = 0.0  # the estimate follows the measured cost (a running mean, weight 0.2)
    sink._drain(deadline=clock.t + 1.0)
    assert sink.written == 10 and sink._item_s == pytest.approx(0.0001 * (1 - 0.8 ** 6))
    sink.close()
    assert [from_json(x).cycle for x in (tmp_path / "d.jsonl").read_text().splitlines()] == list(range(10))


def test_sink_thread_wakes_into_the_next_device_wait(tmp_path, log, monkeypatch):
    """The sleep the thread picks after each wake-up, from the scheduler's stamps (no thread, fake clock)."""
    import sglang_eagle_cycle.sinks as sinks

    clock = _Clock(0.0)
    monkeypatch.setattr(sinks, "_clock", clock)
    sink = CycleSink(SinkConfig(jsonl_path=str(tmp_path / "w.jsonl"), log_line=False), log=log)
    sink._item_s = 0.0001

    def submit(n, cost=0.0001):
        for i in range(n):
            sink._waiting.append((_Timed(rec(sink.written + i), clock, cost), time.monotonic()))

    # learning: stamped, no prediction yet -> a short slice, then a short sleep
    sink.opened_at, sink.closed_at, clock.t = 1.0000, 0.9997, 1.0001  # (no last_wait yet)
    submit(20)
    assert sink._write_in_window() == sinks.LEARN_SLEEP_S
    assert 1 <= sink.written <= int(sinks.SLICE_S / 0.0001) + 1
    # steady cycles: 1 ms device waits, 0.3 ms host phases
    sink._phases, t = _phases([1.0] * 8, [0.3] * 8, t0=2.0)
    # woken 0.15 ms into a wait that began at `opened`: writes until the shortest wait's end,
    # less GUARD_S and one cycle's write time
    opened = t + 0.0003
    sink.opened_at, sink.closed_at, clock.t = opened, t, opened + 0.00015
    w0 = sink.written
    sleep = sink._write_in_window()
    assert sink.written - w0 == 7  # 0.15 .. 0.85 ms
    assert clock.t <= opened + 0.001 - sinks.GUARD_S
    # ... then sleeps until WAKE_INTO of a wait after the next wait should begin
    assert clock.t + sleep == pytest.approx(opened + 0.001 + 0.0003 + sinks.WAKE_INTO * 0.001)
    # woken late, while the scheduler runs Python: writes nothing (not overdue), sleeps until the next wait
    closed = opened + 0.001
    sink.closed_at, sink.last_wait, clock.t = closed, 0.001, closed + 0.0001
    w0 = sink.written
    sleep = sink._write_in_window()
    assert sink.written == w0
    assert clock.t + sleep == pytest.approx(closed + 0.0003 + sinks.WAKE_INTO * 0.001)
    # a slow host phase (the predicted wait should have begun): looks again a host phase later
    clock.t = closed + 0.0005
    assert sink._write_in_window() == pytest.approx(0.0003)
    # no stamp for more than two cycles: the decode loop stopped; doze until the scheduler kicks
    clock.t = closed + 0.01
    assert sink._write_in_window() is None
    # a scheduler that hardly waits for the device (CPU-bound): no window worth waking for
    sink._phases, t = _phases([0.01] * 8, [0.3] * 8, t0=3.0)
    sink.opened_at, sink.closed_at, sink.last_wait, clock.t = t + 0.0003, t, 0.00001, t + 0.0003
    assert sink._write_in_window() == sinks.POLL_BUSY_S
    sink.close()


def _two_waits(sink, seq_ms, copy_ms, launch_ms=0.2, host_ms=0.1, t0=10.0, cycles=8):
    """Stamp ``cycles`` overlap-scheduler cycles on ``sink``'s two waits (seq_lens, launch, copy_done,
    host), as the sink thread would have observed them; returns the start of the last cycle."""
    seq, copy = sink.seq_lens_wait, sink.copy_wait
    t = t0
    for _ in range(cycles):
        seq.opened = t
        seq.observe()  # seen inside the seq_lens wait: its host phase, its previous wait
        seq.closed, seq.last = t + seq_ms / 1e3, seq_ms / 1e3
        copy.opened = seq.closed + launch_ms / 1e3
        copy.observe()
        copy.closed, copy.last = copy.opened + copy_ms / 1e3, copy_ms / 1e3
        last_start, t = t, copy.closed + host_ms / 1e3
    seq.observe()
    copy.observe()
    return last_start


@pytest.mark.parametrize("seq_ms, copy_ms, target", [(5.0, 0.3, "seq_lens"), (0.01, 2.0, "copy_done")])
def test_sink_thread_writes_in_the_longest_of_the_two_waits(seq_ms, copy_ms, target, tmp_path, log, monkeypatch):
    """Two waits per cycle, each with its own samples: the thread sleeps until the longer one
    (seq_lens with FlashInfer-like host sequence lengths, copy_done without) and writes inside it."""
    import sglang_eagle_cycle.sinks as sinks

    clock = _Clock(0.0)
    monkeypatch.setattr(sinks, "_clock", clock)
    sink = CycleSink(SinkConfig(jsonl_path=str(tmp_path / "two.jsonl"), log_line=False), log=log)
    sink._item_s = 0.0001
    start = _two_waits(sink, seq_ms, copy_ms)
    seq, copy = sink.seq_lens_wait, sink.copy_wait
    assert seq.phases.typical_wait() == pytest.approx(seq_ms / 1e3)
    assert copy.phases.typical_wait() == pytest.approx(copy_ms / 1e3)
    period = (seq_ms + 0.2 + copy_ms + 0.1) / 1e3
    assert seq.phases.period() == pytest.approx(period) and copy.phases.period() == pytest.approx(period)
    # the scheduler just left its copy_done wait and runs Python: nothing is written, the thread
    # sleeps until WAKE_INTO of the longer wait after that wait's next start
    clock.t = copy.closed + 0.00005
    for i in range(100):
        sink._waiting.append((_Timed(rec(i), clock, 0.0001), time.monotonic()))
    assert sink.host_busy
    sleep = sink._write_in_window()
    assert sink.written == 0
    w = seq if target == "seq_lens" else copy
    nxt = start + period + ((seq_ms + 0.2) / 1e3 if target == "copy_done" else 0.0)
    wait = (seq_ms if target == "seq_lens" else copy_ms) / 1e3
    assert clock.t + sleep == pytest.approx(nxt + max(sinks.GUARD_S, sinks.WAKE_INTO * wait))
    # woken there: the scheduler is inside that wait; writing stops before its shortest end
    w.opened = nxt
    if target == "copy_done":
        seq.opened, seq.closed = start + period, start + period + seq_ms / 1e3
    clock.t = nxt + sinks.WAKE_INTO * wait
    assert not sink.host_busy
    sink._write_in_window()
    assert sink.written == int((wait * (1 - sinks.WAKE_INTO) - sinks.GUARD_S) / 0.0001 + 1e-9)
    assert clock.t <= nxt + wait - sinks.GUARD_S
    sink.close()


def test_an_unstamped_wait_is_neither_open_nor_a_target(tmp_path, log, monkeypatch):
    """A scheduler that never calls resolve_seq_lens_cpu (no overlap): only copy_done counts."""
    import sglang_eagle_cycle.sinks as sinks

    clock = _Clock(0.0)
    monkeypatch.setattr(sinks, "_clock", clock)
    sink = CycleSink(SinkConfig(jsonl_path=str(tmp_path / "one.jsonl"), log_line=False), log=log)
    assert not sink.host_busy  # nothing stamped: a sink without a scheduler writes whenever it wakes
    sink._phases, t = _phases([1.0] * 8, [0.3] * 8, t0=2.0)
    sink.closed_at, clock.t = t, t + 0.0001
    assert sink.host_busy and sink.seq_lens_wait.opened == 0.0
    sleep = sink._write_in_window()
    assert clock.t + sleep == pytest.approx(t + 0.0003 + sinks.WAKE_INTO * 0.001)
    # a seq_lens wait that stopped being stamped (more than two of its periods ago) is not a target
    _two_waits(sink, 5.0, 1.0, t0=1.0, cycles=8)
    sink._phases, t = _phases([1.0] * 8, [0.3] * 8, t0=2.0)
    sink.closed_at, clock.t = t, t + 0.0001
    sleep = sink._write_in_window()
    assert clock.t + sleep == pytest.approx(t + 0.0003 + sinks.WAKE_INTO * 0.001)
    sink.close()


def test_a_dozing_sink_thread_is_woken_by_the_next_launch_and_keeps_up(tmp_path, log):
    """Real thread, real clock: a scheduler-like loop (Python, then a GIL-free device wait) stamps the sink."""
    sink = CycleSink(SinkConfig(jsonl_path=str(tmp_path / "k.jsonl"), log_line=False), log=log)
    sink.submit(Pending(rec(0)))  # starts the thread, which dozes until kicked
    assert _wait_until(lambda: sink.dozing)
    kicks = 0
    for i in range(1, 200):
        sink.closed_at = time.perf_counter()
        sink.last_wait = sink.closed_at - sink.opened_at
        end = time.perf_counter() + 0.0002
        while time.perf_counter() < end:  # host phase: Python
            pass
        sink.submit(Pending(rec(i)))
        sink.opened_at = time.perf_counter()
        if sink.dozing:
            sink.kick()
            kicks += 1
        time.sleep(0.001)  # the device wait, GIL released
    assert kicks >= 1
    assert sink.written >= 100  # written during the loop, not only at the flush
    assert 0.0009 <= sink._phases.typical_wait() < 0.02
    assert sink.flush(5.0) and sink.written == 200
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


@pytest.mark.parametrize("nice", [0, 7])
def test_sink_thread_runs_at_the_configured_priority(nice, tmp_path, log):
    """SINK_NICE is 0 (measured: nice 19 let the thread stall the scheduler while holding the GIL)."""
    import os

    import sglang_eagle_cycle.sinks as sinks

    assert sinks.SINK_NICE == 0
    base = os.getpriority(os.PRIO_PROCESS, 0)
    sink = CycleSink(SinkConfig(jsonl_path=str(tmp_path / "n.jsonl"), log_line=False), log=log)
    assert sink.nice == sinks.SINK_NICE
    sink.nice = nice
    sink.submit(Pending(rec(1)))
    assert _wait_until(lambda: sink._thread is not None and sink._thread.native_id is not None)
    # (raising a thread's priority above the process's needs privileges: then it stays at the process's)
    want = {base} if nice == 0 else {nice} if base <= nice else {base, nice}
    assert _wait_until(lambda: os.getpriority(os.PRIO_PROCESS, sink._thread.native_id) in want)
    assert sink.flush(5.0)
    sink.close()


def test_log_every_keeps_running_sums_not_the_cycles():
    """SGLANG_EAGLE_CYCLE_LOG_EVERY=10**9 prints no line for ages: the window must not hold every cycle
    in the scheduler's memory meanwhile, and its line is still the mean of all of them."""
    import tracemalloc

    from sglang_eagle_cycle.cycle import Aggregator

    agg = Aggregator(10 ** 9)
    for i in range(1, 51):
        assert agg.add(rec(i, total=18.0 + i % 7)) == []
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(51, 5051):
            agg.add(rec(i, total=18.0 + i % 7))
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 100_000, f"{grown} bytes kept for 5,000 cycles"   # about 3.5 MB when each is kept
    (a,) = agg.flush()
    ids = range(1, 5051)
    assert (a.n, a.cycle) == (5050, 5050)
    assert a.total_ms == pytest.approx(sum(18.0 + i % 7 for i in ids) / 5050)
    assert a.total_max_ms == 24.0
    assert a.accept_hist == {k: 2 * sum(1 + i % 4 == k for i in ids) for k in (1, 2, 3, 4)}
    assert a.accept_len == pytest.approx(sum(1 + i % 4 for i in ids) / 5050)
    assert agg.flush() == []


def test_partial_log_every_window_printed_once_traffic_stops(caplog, log, monkeypatch):
    """SGLang ends its schedulers with SIGKILL (close() never runs): a partial window of LOG_EVERY
    cycles is printed once no cycle has come for AGG_IDLE_S, not held until a shutdown that never
    prints it."""
    from sglang_eagle_cycle import sinks

    monkeypatch.setattr(sinks, "AGG_IDLE_S", 0.2, raising=False)
    sink = CycleSink(SinkConfig(log_every=100), log=log)
    with caplog.at_level(logging.INFO):
        for i in range(1, 6):
            sink.submit(Pending(rec(i, total=18.0 + i)))
        assert sink.flush(30.0)
        deadline = time.monotonic() + 3.0
        while not lines(caplog) and time.monotonic() < deadline:
            time.sleep(0.05)
        first = [parse_line(x) for x in lines(caplog)]
        assert [(a.n, a.cycle) for a in first] == [(5, 5)]
        assert first[0].total_ms == pytest.approx(21.0) and first[0].total_max_ms == pytest.approx(23.0)
        for i in range(6, 9):          # traffic resumes: a new window
            sink.submit(Pending(rec(i)))
        sink.close()
    assert [(a.n, a.cycle) for a in map(parse_line, lines(caplog))] == [(5, 5), (3, 8)]


def test_jsonl_switch_words_are_no_file_names(caplog, tmp_path, monkeypatch):
    """SGLANG_EAGLE_CYCLE_JSONL=0 (meaning off) or =1 (meaning on) wrote a file named 0 or 1 (with TP,
    1.tp0.pp0.dp0 ...) in the server's working directory, silently."""
    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.WARNING, logger="sglang_eagle_cycle"):
        for off in ("0", " OFF ", "false", "No"):
            assert SinkConfig.from_env({"SGLANG_EAGLE_CYCLE_JSONL": off}, Ranks()).jsonl_path is None
        assert not [r for r in caplog.records if "JSONL" in r.getMessage()]
        for on in ("1", "TRUE"):
            assert SinkConfig.from_env({"SGLANG_EAGLE_CYCLE_JSONL": on}, Ranks(tp_size=2)).jsonl_path is None
    warned = [r.getMessage() for r in caplog.records if "SGLANG_EAGLE_CYCLE_JSONL" in r.getMessage()]
    assert len(warned) == 2 and "'TRUE'" in warned[1] and "path" in warned[1]
    assert SinkConfig.from_env({"SGLANG_EAGLE_CYCLE_JSONL": "./1"}, Ranks()).jsonl_path == "./1"   # a path
    assert list(tmp_path.iterdir()) == []
