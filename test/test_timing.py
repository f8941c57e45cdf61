"""Timer backends: host clock with an injected clock, CUDA-event logic with counting fake events, no sync."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sglang_eagle_cycle import timing
from sglang_eagle_cycle.timing import CpuTimer, CudaTimer, make_timer


class Clock:
    def __init__(self):
        self.ns = 5_000_000

    def __call__(self):
        return self.ns


class FakeEvent:
    """Counts every call; completes only when the fake GPU says so; refuses reads before that."""

    created = 0

    def __init__(self, gpu):
        FakeEvent.created += 1
        self.gpu, self.t, self.done = gpu, None, False
        self.calls = {"record": 0, "query": 0, "elapsed_time": 0, "synchronize": 0}

    def record(self, stream):
        assert stream == "forward-stream"
        self.calls["record"] += 1
        self.t, self.done = self.gpu.now, False
        self.gpu.recorded.append(self)

    def query(self):
        self.calls["query"] += 1
        return self.done

    def elapsed_time(self, other):
        self.calls["elapsed_time"] += 1
        assert self.done and other.done, "elapsed_time on an event that has not completed"
        return (other.t - self.t) / 1e6

    def synchronize(self):  # never allowed
        self.calls["synchronize"] += 1
        raise AssertionError("synchronize() called")


class FakeGpu:
    def __init__(self):
        self.now, self.recorded = 0, []

    def complete_all(self):
        for ev in self.recorded:
            ev.done = True


@pytest.fixture
def gpu():
    return FakeGpu()


def _cuda(gpu, **kw):
    return CudaTimer(event_factory=lambda: FakeEvent(gpu), current_stream=lambda: "forward-stream",
                     is_capturing=lambda: False, **kw)


def test_cpu_stamps_measure_the_injected_clock():
    clock = Clock()
    timer = CpuTimer(clock)
    a = timer.begin()
    clock.ns += 2_500_000
    b = timer.stamp()
    clock.ns += 1_000
    c = timer.stamp()
    assert timer.done(c)
    assert timer.elapsed_ms(a, b) == 2.5
    assert timer.elapsed_ms(a, c) == pytest.approx(2.501)
    assert timer.elapsed_ms(a, None) is None and timer.elapsed_ms(None, b) is None
    timer.release([a, b, c])  # nothing to give back; must not fail


def test_cpu_timer_default_clock_is_monotonic_ns():
    timer = CpuTimer()
    a = timer.begin()
    b = timer.stamp()
    assert isinstance(a, int) and 0.0 <= timer.elapsed_ms(a, b) < 100.0


def test_cuda_stamps_read_only_after_completion_and_never_sync(gpu):
    timer = _cuda(gpu)
    t0 = timer.begin()
    gpu.now += 3_000_000
    t1 = timer.stamp()
    assert not timer.done(t1)  # the fake GPU has not run them yet
    gpu.complete_all()
    assert timer.done(t1)
    assert timer.elapsed_ms(t0, t1) == 3.0
    calls = [ev.calls for ev in gpu.recorded]
    assert sum(c["synchronize"] for c in calls) == 0
    assert sum(c["query"] for c in calls) == 2  # done() asks the one event it is given, twice
    assert [c["record"] for c in calls] == [1, 1]


def test_cuda_events_come_from_a_pool(gpu):
    FakeEvent.created = 0
    timer = _cuda(gpu)
    for _ in range(50):
        in_flight = []  # overlap: two cycles in flight, each with its own events
        for _ in range(2):
            in_flight.append([timer.begin(), timer.stamp(), timer.stamp()])
        gpu.complete_all()
        for stamps in in_flight:
            assert timer.done(stamps[-1])
            timer.release(stamps)
    assert FakeEvent.created == 6  # 2 sets x 3 events, then reused
    assert timer.pooled == 6


def test_cuda_pool_is_bounded(gpu):
    timer = _cuda(gpu, pool_limit=4)
    sets = [[timer.begin(), timer.stamp()] for _ in range(3)]
    for stamps in sets:
        timer.release(stamps + [None])  # a stamp never taken is skipped
    assert timer.pooled == 4


def test_cuda_stamps_go_to_the_stream_current_at_begin(gpu):
    streams = iter(["forward-stream", "other-stream"])
    seen = []

    class StreamEvent(FakeEvent):
        def record(self, stream):
            seen.append(stream)

    timer = CudaTimer(event_factory=lambda: StreamEvent(gpu), current_stream=lambda: next(streams),
                      is_capturing=lambda: False)
    timer.begin()
    timer.stamp()
    timer.begin()
    timer.stamp()
    assert seen == ["forward-stream", "forward-stream", "other-stream", "other-stream"]


def test_prewarm_creates_events_ahead(gpu):
    FakeEvent.created = 0
    timer = _cuda(gpu)
    timer.prewarm(8)
    timer.begin()
    assert FakeEvent.created == 8 and timer.pooled == 7


def test_capture_guard_without_cuda_answers_false():
    # torch.cuda.is_current_stream_capturing() raises on a machine without CUDA; ours must not.
    assert timing.is_capturing() is False or timing.cuda_usable()
    assert CpuTimer().capturing() is timing.is_capturing()


def test_make_timer_choices():
    assert isinstance(make_timer(device="cpu"), CpuTimer)
    assert make_timer("cpu", clock=Clock()).begin() == 5_000_000
    with pytest.raises(ValueError, match="only CUDA and CPU"):
        make_timer(device="npu:0")
    with pytest.raises(ValueError, match="unknown timer kind"):
        make_timer("tpu")
    if not timing.cuda_usable():
        assert isinstance(make_timer(), CpuTimer)
        with pytest.raises(RuntimeError, match="CUDA"):
            make_timer("cuda")
        with pytest.raises(RuntimeError):
            CudaTimer()


def test_importable_without_torch_and_sglang(repo_root):
    code = """
import json, sys
sys.modules['torch'] = None          # `import torch` now fails
sys.modules['sglang'] = None
sys.path.insert(0, sys.argv[1])
from sglang_eagle_cycle import timing, sinks, cycle
t = timing.make_timer()
a = t.begin(); b = t.stamp()
print(json.dumps({"kind": t.kind, "capturing": timing.is_capturing(), "ms": t.elapsed_ms(a, b) >= 0}))
"""
    out = subprocess.run([sys.executable, "-c", code, str(repo_root / "python")], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"kind": "cpu", "capturing": False, "ms": True}
