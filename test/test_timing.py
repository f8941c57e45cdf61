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


def test_cpu_marks_measure_the_injected_clock():
    clock = Clock()
    marks = CpuTimer(clock).start()
    marks.mark("a")
    clock.ns += 2_500_000
    marks.mark("b")
    clock.ns += 1_000
    marks.mark("c")
    assert marks.ready()
    assert marks.elapsed_ms("a", "b") == 2.5
    assert marks.elapsed_ms("a", "c") == pytest.approx(2.501)
    assert marks.elapsed_ms("a", "missing") is None and not marks.has("missing") and marks.has("b")


def test_cpu_timer_default_clock_is_monotonic_ns():
    marks = CpuTimer().start()
    marks.mark("a")
    marks.mark("b")
    assert 0.0 <= marks.elapsed_ms("a", "b") < 100.0


def test_cuda_marks_read_only_after_completion_and_never_sync(gpu):
    timer = _cuda(gpu)
    marks = timer.start()
    marks.mark("t0")
    gpu.now += 3_000_000
    marks.mark("t1")
    assert not marks.ready()  # the fake GPU has not run them yet
    gpu.complete_all()
    assert marks.ready()
    assert marks.elapsed_ms("t0", "t1") == 3.0
    calls = [ev.calls for ev in gpu.recorded]
    assert sum(c["synchronize"] for c in calls) == 0
    assert sum(c["query"] for c in calls) == 2  # ready() asks the last event only, twice


def test_cuda_events_come_from_a_pool(gpu):
    FakeEvent.created = 0
    timer = _cuda(gpu)
    for _ in range(50):
        in_flight = [timer.start() for _ in range(2)]  # overlap: two cycles in flight
        for m in in_flight:
            for key in ("a", "b", "c"):
                m.mark(key)
        gpu.complete_all()
        for m in in_flight:
            assert m.ready()
            m.release()
    assert FakeEvent.created == 6  # 2 sets x 3 events, then reused
    assert timer.pooled == 6


def test_cuda_pool_is_bounded(gpu):
    timer = _cuda(gpu, pool_limit=4)
    sets = [timer.start() for _ in range(3)]
    for m in sets:
        m.mark("a")
        m.mark("b")
    for m in sets:
        m.release()
    assert timer.pooled == 4


def test_cuda_remark_recycles_the_old_event(gpu):
    timer = _cuda(gpu)
    m = timer.start()
    m.mark("a")
    m.mark("a")
    assert timer.pooled == 1


def test_prewarm_creates_events_ahead(gpu):
    FakeEvent.created = 0
    timer = _cuda(gpu)
    timer.prewarm(8)
    m = timer.start()
    m.mark("x")
    assert FakeEvent.created == 8 and timer.pooled == 7


def test_capture_guard_without_cuda_answers_false():
    # torch.cuda.is_current_stream_capturing() raises on a machine without CUDA; ours must not.
    assert timing.is_capturing() is False or timing.cuda_usable()
    assert CpuTimer().capturing() is timing.is_capturing()


def test_make_timer_choices():
    assert isinstance(make_timer(device="cpu"), CpuTimer)
    assert make_timer("cpu", clock=Clock()).start() is not None
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
m = t.start(); m.mark('a'); m.mark('b')
print(json.dumps({"kind": t.kind, "capturing": timing.is_capturing(), "ms": m.elapsed_ms('a', 'b') >= 0}))
"""
    out = subprocess.run([sys.executable, "-c", code, str(repo_root / "python")], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"kind": "cpu", "capturing": False, "ms": True}
