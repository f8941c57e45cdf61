"""Contract test: our hooks on SGLang 0.5.23's real EAGLE-3 decode cycle (DESIGN §2, UPSTREAM §2, §9).

The hooked methods are upstream's own (``EAGLEWorkerV2.forward_batch_generation`` decode branch and
``verify``, ``EagleDraftWorker.draft_forward``, ``SchedulerBatchResultProcessor._resolve_spec_v2_tokens``),
wrapped by SGLang's own AROUND wrapper and put back after each test; inside them run upstream's real
``EagleDraftWorker.draft`` / ``_draft_extend_for_decode``, ``run_eagle_verify``, ``TpModelWorker.
forward_batch_generation`` and ``ModelRunner.forward``. Stand-ins sit below all of these (``cycle_harness.py``)
and advance a fake clock by known times, so every phase has an exact expected value. Batches run in overlap
order: N+1 launches before N resolves.
"""

from __future__ import annotations

import json
import logging
import os
import pkgutil
import sys
import threading
import types
from pathlib import Path
from types import SimpleNamespace

import pytest

from sglang_fork import run_python

pytest.importorskip("sglang")

sys.path.insert(0, str(Path(__file__).parent))

from cycle_harness import Costs, FakeClock, Harness  # noqa: E402

from sglang_eagle_cycle.cycle import format_line, from_json, parse_line  # noqa: E402
from sglang_eagle_cycle.patches.cycle import (  # noqa: E402
    RESULT_ATTR,
    CycleProfiler,
    hook_specs,
    unsupported_workers,
    worker_support,
)
from sglang_eagle_cycle.sinks import CycleSink, SinkConfig  # noqa: E402
from sglang_eagle_cycle.timing import CpuTimer, CudaTimer  # noqa: E402

LOG = "sglang_eagle_cycle.test_hooks"


@pytest.fixture
def install():
    """Wrap the upstream targets with SGLang's AROUND wrapper (as HookRegistry does); restore afterwards."""
    from sglang.srt.plugins.hook_registry import HookType, _wrap_fn

    saved = []

    def _install(profiler):
        for spec in hook_specs(profiler):
            owner_path, name = spec.target.rsplit(".", 1)
            owner = pkgutil.resolve_name(owner_path)
            original = owner.__dict__[name]
            assert not hasattr(original, "__wrapped__"), f"{spec.target} already wrapped"
            wrapped = _wrap_fn(original, spec.hook, HookType.AROUND)
            setattr(owner, name, wrapped)
            saved.append((owner, name, original))
            if isinstance(owner, types.ModuleType):  # and the `from X import f` copies, as HookRegistry does
                for mod in list(sys.modules.values()):
                    for attr, value in list(getattr(mod, "__dict__", {}).items()):
                        if value is original and mod is not owner:
                            setattr(mod, attr, wrapped)
                            saved.append((mod, attr, original))
        return profiler

    yield _install
    for owner, name, original in reversed(saved):
        setattr(owner, name, original)


@pytest.fixture
def log():
    lg = logging.getLogger(LOG)
    lg.setLevel(logging.INFO)
    return lg


def profiler(clock, tmp_path, log, *, timer=None, background=False, **kw):
    sink = CycleSink(SinkConfig(jsonl_path=str(tmp_path / "cycles.jsonl"), background=background), log=log)
    return CycleProfiler(timer=timer or CpuTimer(clock), sink=sink, log=log, **kw)


def records(tmp_path):
    path = tmp_path / "cycles.jsonl"
    return [from_json(x) for x in path.read_text().splitlines()] if path.exists() else []


def info_lines(caplog):
    return [r.getMessage() for r in caplog.records if r.name == LOG and r.levelno == logging.INFO
            and r.getMessage().startswith("[eagle-cycle]")]


BATCH_SIZES = [2, 3, 3, 1, 4]


@pytest.mark.parametrize("steps,eager", [(3, False), (3, True), (2, True), (5, False), (1, False), (0, False)])
def test_one_record_per_decode_cycle_with_known_phases(steps, eager, install, tmp_path, log, caplog):
    clock = FakeClock()
    prof = install(profiler(clock, tmp_path, log))
    with caplog.at_level(logging.INFO, logger=LOG), Harness(steps=steps, eager=eager, clock=clock) as h:
        seen_at_resolve = []
        h.run_overlap([h.new_batch(bs) for bs in BATCH_SIZES],
                      on_resolve=lambda b, r: seen_at_resolve.append(len(records(tmp_path))))
        accepted = list(h._pending_accepts)
    # batch N's record appears while N is resolved, after N+1 was launched, never earlier
    assert seen_at_resolve == list(range(len(BATCH_SIZES)))
    recs = records(tmp_path)
    assert [r.cycle for r in recs] == [1, 2, 3, 4, 5]
    exp = Costs().expected(steps, eager)
    for r, bs, acc in zip(recs, BATCH_SIZES, accepted):
        assert r.config == (bs, steps, 1, steps + 1)
        assert r.accepts == acc and r.accept_len == pytest.approx(sum(acc) / bs, abs=1e-4)
        for key in ("draft_prep_ms", "draft_ms", "verify_ms", "verify_fwd_ms", "extend_ms", "other_ms", "total_ms"):
            if exp[key] is None:
                assert getattr(r, key) is None, key
            else:
                assert getattr(r, key) == pytest.approx(exp[key], abs=1e-4), key  # JSONL keeps 4 decimals
        parts = [r.draft_prep_ms, r.draft_ms, r.verify_ms, r.extend_ms, r.other_ms]
        assert sum(x or 0.0 for x in parts) == pytest.approx(r.total_ms, abs=1e-3)  # the sum invariant
        assert r.other_ms >= 0
        assert r.draft_step_ms == (pytest.approx(exp["draft_step_ms"]) if exp["draft_step_ms"] else None)
        assert r.graph is (not eager)
        assert r.tok_s == pytest.approx(sum(acc) / exp["total_ms"] * 1000, abs=0.01)
    lines = info_lines(caplog)
    assert [parse_line(x).cycle for x in lines] == [1, 2, 3, 4, 5]
    assert prof.fault_count == 0


def test_non_overlap_mode_without_on_publish(install, tmp_path, log):
    # the scheduler's non-overlap path passes no on_publish: the draft-extend is still timed on its own
    clock = FakeClock()
    install(profiler(clock, tmp_path, log))
    with Harness(steps=3, clock=clock) as h:
        for bs in (2, 1):
            b = h.new_batch(bs)
            h.resolve(b, h.launch(b, overlap=False))
        assert h.published == []
    exp = Costs().expected(3, False)
    recs = records(tmp_path)
    assert [r.bs for r in recs] == [2, 1]
    for r in recs:
        assert r.extend_ms == pytest.approx(exp["extend_ms"], abs=1e-4)
        assert r.other_ms == pytest.approx(exp["other_ms"] - Costs().publish, abs=1e-4)
        assert r.total_ms == pytest.approx(exp["total_ms"] - Costs().publish, abs=1e-4)


def test_upstream_exception_in_on_publish_propagates(install, tmp_path, log):
    clock = FakeClock()
    prof = install(profiler(clock, tmp_path, log))
    boom = KeyError("future map slot")
    with Harness(steps=3, clock=clock) as h:
        def publish(new_seq_lens):
            raise boom

        b = h.new_batch(2)
        with pytest.raises(KeyError) as info:
            h.worker.forward_batch_generation(b, on_publish=publish)
        assert info.value is boom and prof._active is None
        h.run_overlap([h.new_batch(2)])
    assert [r.cycle for r in records(tmp_path)] == [2] and prof.fault_count == 0


def test_hooks_leave_upstream_results_unchanged(install, tmp_path, log):
    def run():
        with Harness(steps=3) as h:
            batches = [h.new_batch(bs) for bs in BATCH_SIZES]
            results = []
            tokens = h.run_overlap(batches, on_resolve=lambda b, r: results.append(r))
            return tokens, [p.tolist() for p in h.published], results

    plain_tokens, plain_pub, _ = run()
    install(profiler(FakeClock(), tmp_path, log))
    tokens, pub, results = run()
    assert (tokens, pub) == (plain_tokens, plain_pub)
    assert all(not hasattr(r, RESULT_ATTR) for r in results)  # handed over and detached at the read point
    assert len(records(tmp_path)) == len(BATCH_SIZES)


def test_prefill_mixed_and_idle_batches_yield_no_record(install, tmp_path, log):
    from sglang.srt.managers.utils import GenerationBatchResult

    clock = FakeClock()
    starts = []

    class CountingTimer(CpuTimer):
        def __init__(self, clock):
            super().__init__(clock)
            self.begin = lambda: starts.append(1) or clock()

    install(profiler(clock, tmp_path, log, timer=CountingTimer(clock)))
    with Harness(steps=3, clock=clock) as h:
        prefills = []
        h.worker._forward_prefill_batch = lambda batch, *a, **k: prefills.append(batch) or GenerationBatchResult()
        r = h.launch(h.new_batch(2, mode="extend"))
        mixed = h.new_batch(2)
        mixed.is_extend_in_batch = True  # DP: a decode batch with extend elsewhere goes the prefill way
        r2 = h.launch(mixed)
        idle = h.new_batch(0, mode="idle")
        r3 = h.launch(idle)  # upstream's real decode branch runs with an idle batch
        assert len(prefills) == 2 and r3.accept_lens.numel() == 0
        assert not any(hasattr(x, RESULT_ATTR) for x in (r, r2, r3))
        assert starts == [] and records(tmp_path) == []
        h.run_overlap([h.new_batch(2)])
    assert [x.cycle for x in records(tmp_path)] == [1] and starts == [1]


def test_nothing_is_recorded_while_a_graph_is_captured(install, tmp_path, log):
    clock = FakeClock()

    class Capturing(CpuTimer):
        may_capture = True

        def capturing(self):
            return True

    install(profiler(clock, tmp_path, log, timer=Capturing(clock)))
    with Harness(steps=3, clock=clock) as h:
        h.run_overlap([h.new_batch(2), h.new_batch(2)])
    assert records(tmp_path) == []


def test_standalone_is_profiled_and_a_worker_overriding_verify_is_not(install, tmp_path, log, caplog):
    from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2
    from sglang.srt.speculative.standalone_worker_v2 import StandaloneDraftWorker, StandaloneWorkerV2

    class OwnVerify(EAGLEWorkerV2):
        def verify(self, batch, **kw):
            return EAGLEWorkerV2.verify(self, batch, **kw)

    clock = FakeClock()
    install(profiler(clock, tmp_path, log))
    with Harness(steps=3, clock=clock) as h:
        h.worker.__class__, h.draft_worker.__class__ = StandaloneWorkerV2, StandaloneDraftWorker
        assert worker_support(h.worker)[0]
        h.run_overlap([h.new_batch(2)])
        assert [r.cycle for r in records(tmp_path)] == [1]
        h.worker.__class__ = OwnVerify
        ok, why = worker_support(h.worker)
        assert not ok and "OwnVerify overrides verify" in why
        with caplog.at_level(logging.INFO, logger=LOG):
            h.run_overlap([h.new_batch(2), h.new_batch(2)])
    assert len(records(tmp_path)) == 1
    assert sum("OwnVerify overrides verify" in r.getMessage() for r in caplog.records) == 1


class FakeGpu:
    """Events complete only when the scheduler's copy_done sync of their batch has happened."""

    def __init__(self, clock):
        self.clock, self.recorded, self.syncs = clock, [], 0
        self.reads_before_done = 0

    def reads(self) -> int:
        return sum(e.elapsed_calls for e in {id(e): e for e in self.recorded}.values())


class CountingEvent:
    def __init__(self, gpu):
        self.gpu, self.t, self.done = gpu, None, False
        self.elapsed_calls = 0

    def record(self, stream):
        self.t, self.done = self.gpu.clock(), False
        self.gpu.recorded.append(self)

    def query(self):
        return self.done

    def elapsed_time(self, other):
        self.elapsed_calls += 1
        if not (self.done and other.done):
            self.gpu.reads_before_done += 1
        return (other.t - self.t) / 1e6

    def synchronize(self):
        self.gpu.syncs += 1


class FakeStream:
    """Like ``torch.cuda.current_stream()``: a new object at each call, equal when the stream is."""

    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return isinstance(other, FakeStream) and other.name == self.name

    __hash__ = None


@pytest.mark.parametrize("background", [False, True])
def test_cuda_events_are_read_only_after_the_resolution_point(background, install, tmp_path, log):
    clock = FakeClock()
    gpu = FakeGpu(clock)
    timer = CudaTimer(event_factory=lambda: CountingEvent(gpu), current_stream=lambda: FakeStream("fwd"),
                      is_capturing=lambda: False)
    prof = install(profiler(clock, tmp_path, log, timer=timer, background=background))
    launched_upto = {}

    with Harness(steps=3, eager=True, clock=clock) as h:
        def resolve_point(batch, result):
            # the copy_done sync of this batch: everything recorded up to its launch end is done
            assert gpu.reads() == reads_so_far[0]  # nothing read since the previous resolution point
            for ev in gpu.recorded[: launched_upto[id(result)]]:
                ev.done = True

        reads_so_far = [0]
        real_launch = h.launch

        def launch(batch):
            result = real_launch(batch)
            launched_upto[id(result)] = len(gpu.recorded)
            return result

        h.launch = launch
        batches = [h.new_batch(bs) for bs in BATCH_SIZES]
        last = None
        for b in batches + [None]:
            cur = (b, h.launch(b)) if b is not None else None
            if last is not None:
                resolve_point(*last)
                h.resolve(*last)
                if background:
                    assert prof.sink.flush(5.0)
                reads_so_far[0] = gpu.reads()
            last = cur
    prof.sink.close()
    assert gpu.syncs == 0 and gpu.reads_before_done == 0
    recs = records(tmp_path)
    exp = Costs().expected(3, True)
    assert [r.cycle for r in recs] == [1, 2, 3, 4, 5]
    assert all(r.verify_fwd_ms == pytest.approx(exp["verify_fwd_ms"]) and r.total_ms == pytest.approx(exp["total_ms"])
               and r.draft_step_ms == pytest.approx(exp["draft_step_ms"]) for r in recs)
    # events are pooled: two cycles in flight at most, 12 marks each (total, verify, verify_fwd, extend: 2 each;
    # 2 eager draft forwards: 2 each, the first and last also bounding draft_ms), and one total1 kept for
    # the next cycle's gap_ms
    assert len(set(map(id, gpu.recorded))) == 2 * 12 + 1
    assert [r.gap_ms for r in recs] == [None] + [pytest.approx(0.0)] * 4
    assert all(r.draft_prep_ms == pytest.approx(exp["draft_prep_ms"]) for r in recs)


def test_upstream_exception_in_verify_propagates_and_the_next_cycle_is_clean(install, tmp_path, log, caplog):
    clock = FakeClock()
    prof = install(profiler(clock, tmp_path, log))
    boom = RuntimeError("CUDA error: an illegal memory access")
    with caplog.at_level(logging.INFO, logger=LOG), Harness(steps=3, clock=clock) as h:
        h.verify_error = boom
        with pytest.raises(RuntimeError) as info:
            h.launch(h.new_batch(2))
        assert info.value is boom
        assert prof._active is None
        h.run_overlap([h.new_batch(2), h.new_batch(3)])
    recs = records(tmp_path)
    exp = Costs().expected(3, False)
    assert [r.bs for r in recs] == [2, 3]
    assert all(r.total_ms == pytest.approx(exp["total_ms"]) and r.verify_ms == pytest.approx(exp["verify_ms"])
               for r in recs)
    assert prof.fault_count == 0
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name == LOG]


def test_fault_in_our_timer_is_logged_once_and_upstream_results_are_unchanged(install, tmp_path, log, caplog):
    with Harness(steps=3) as h:
        plain = h.run_overlap([h.new_batch(bs) for bs in BATCH_SIZES])

    clock = FakeClock()

    class FaultyTimer(CpuTimer):
        """Its second time point of each cycle (verify0) raises."""

        def __init__(self, clock):
            super().__init__(clock)
            self.n = 0
            self.begin = self._begin
            self.stamp = self._stamp

        def _begin(self):
            self.n = 0
            return clock()

        def _stamp(self):
            self.n += 1
            if self.n == 1:
                raise ZeroDivisionError("injected fault in the timer")
            return clock()

    prof = install(profiler(clock, tmp_path, log, timer=FaultyTimer(clock)))
    with caplog.at_level(logging.INFO, logger=LOG), Harness(steps=3, clock=clock) as h:
        hooked = h.run_overlap([h.new_batch(bs) for bs in BATCH_SIZES])
    assert hooked == plain
    warnings = [r.getMessage() for r in caplog.records if r.name == LOG and r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "ZeroDivisionError" in warnings[0] and "injected fault in the timer" in warnings[0]
    assert prof.fault_count == len(BATCH_SIZES)
    assert records(tmp_path) == []  # a cycle we could not time is not reported half-timed


def _two_cycles_warnings(clock, caplog):
    """Run two decode cycles in overlap order; assert upstream's tokens; return our WARNING messages."""
    with caplog.at_level(logging.INFO, logger=LOG), Harness(steps=3, clock=clock) as h:
        tokens = h.run_overlap([h.new_batch(2), h.new_batch(2)])
    assert tokens == [[[0], [4, 5]], [[0, 1], [4, 5, 6]]]
    return [r.getMessage() for r in caplog.records if r.name == LOG and r.levelno == logging.WARNING]


def test_fault_at_the_read_point_keeps_the_result(install, tmp_path, log, caplog):
    clock = FakeClock()
    prof = install(profiler(clock, tmp_path, log))

    def broken_submit(item):
        raise OSError("disk full")

    prof.sink.submit = broken_submit
    warnings = _two_cycles_warnings(clock, caplog)
    assert len(warnings) == 1 and "OSError: disk full" in warnings[0]


def test_fault_stamping_the_sink_keeps_the_upstream_result(install, tmp_path, log, caplog):
    """The read point's stamps are ours: a sink that cannot take them costs one warning, nothing else."""
    clock = FakeClock()
    prof = install(profiler(clock, tmp_path, log))

    class Unstampable:
        def __setattr__(self, name, value):
            raise RuntimeError("no stamps here")

        opened = closed = last = 0.0

    prof.sink.copy_wait = prof.sink.seq_lens_wait = Unstampable()
    warnings = _two_cycles_warnings(clock, caplog)
    assert len(warnings) == 3 and all("RuntimeError: no stamps here" in w for w in warnings)
    assert {w.split(" in timing ")[1].split(" (")[0] for w in warnings} == {"read", "cycle end", "seq_lens wait"}


def test_nvtx_ranges_per_phase_stay_balanced(install, tmp_path, log):
    events = []
    nv = type("Nv", (), {"push": staticmethod(lambda n: events.append("+" + n)),
                         "pop": staticmethod(lambda: events.append("-"))})()
    clock = FakeClock()
    install(profiler(clock, tmp_path, log, nvtx=nv))
    with Harness(steps=3, clock=clock) as h:
        h.run_overlap([h.new_batch(2)])
        h.verify_error = ValueError("upstream")
        with pytest.raises(ValueError):
            h.launch(h.new_batch(2))
    assert events[:8] == ["+eagle_cycle.cycle", "+eagle_cycle.draft", "-", "+eagle_cycle.verify", "-",
                          "+eagle_cycle.extend", "-", "-"]
    assert events[8:10] == ["+eagle_cycle.cycle", "+eagle_cycle.draft"]  # the cycle whose verify raised
    depth = 0
    for e in events:
        depth += 1 if e.startswith("+") else -1
        assert depth >= 0
    assert depth == 0


def test_specs_name_real_upstream_methods():
    specs = hook_specs(CycleProfiler())
    assert {s.area for s in specs} == {"timing"}
    for s in specs:
        assert s.target.startswith(s.module + ".")
        owner, name = s.target.rsplit(".", 1)
        assert callable(pkgutil.resolve_name(owner).__dict__[name])
    assert any("MultiLayerEagleWorkerV2" in u for u in unsupported_workers())
    assert any("pp-size" in u for u in unsupported_workers())


def test_configured_from_the_environment_at_the_first_cycle(install, tmp_path, caplog):
    path = tmp_path / "env.jsonl"
    env = {"SGLANG_EAGLE_CYCLE_JSONL": str(path), "SGLANG_EAGLE_CYCLE_LOG_EVERY": "2"}
    prof = install(CycleProfiler(env=env))  # timer, sink and ranks chosen at the first decode cycle
    logging.getLogger("sglang_eagle_cycle").setLevel(logging.INFO)
    with caplog.at_level(logging.INFO, logger="sglang_eagle_cycle"), Harness(steps=3) as h:
        h.run_overlap([h.new_batch(2) for _ in range(4)])
        assert prof.sink.flush(5.0)
    assert prof._timer.kind == "cpu"  # the worker's device is "cpu"
    recs = [from_json(x) for x in path.read_text().splitlines()]
    assert [r.cycle for r in recs] == [1, 2, 3, 4] and all(r.total_ms > 0 for r in recs)
    lines = [parse_line(r.getMessage()) for r in caplog.records if r.getMessage().startswith("[eagle-cycle]")]
    assert [(x.n, x.cycle) for x in lines] == [(2, 2), (2, 4)]
    prof.sink.close()


def test_a_device_we_cannot_time_turns_timing_off_once(install, tmp_path, caplog, monkeypatch):
    import sglang_eagle_cycle.patches.cycle as patches_cycle
    from sglang_eagle_cycle.timing import make_timer

    # as on an NPU worker: host timing of an asynchronous accelerator would be wrong, make_timer refuses
    monkeypatch.setattr(patches_cycle, "make_timer", lambda device=None: make_timer(device="npu:0"))
    prof = install(CycleProfiler(env={"SGLANG_EAGLE_CYCLE_JSONL": str(tmp_path / "x.jsonl")}))
    with caplog.at_level(logging.INFO, logger="sglang_eagle_cycle"), Harness(steps=3) as h:
        tokens = h.run_overlap([h.new_batch(2) for _ in range(3)])
    assert tokens == [[[0], [4, 5]], [[0, 1], [4, 5, 6]], [[0, 1, 2], [4, 5, 6, 7]]]
    assert prof._disabled and not (tmp_path / "x.jsonl").exists()
    assert sum("timing off" in r.getMessage() and "npu" in r.getMessage() for r in caplog.records) == 1


def test_default_specs_share_one_process_profiler():
    # plugin.register() may ask for the specs more than once: every copy must drive the same state
    a, b = hook_specs(), hook_specs()
    assert {s.hook.__self__ for s in a + b} == {a[0].hook.__self__}


def test_sglang_hook_registry_applies_the_specs(tmp_path):
    """Through SGLang's own HookRegistry (which cannot un-patch: a fresh interpreter)."""
    code = f"""
import json, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from cycle_harness import FakeClock, Harness
from sglang.srt.plugins.hook_registry import HookRegistry, HookType
from sglang_eagle_cycle.patches.cycle import CycleProfiler, hook_specs
from sglang_eagle_cycle.sinks import CycleSink, SinkConfig
from sglang_eagle_cycle.timing import CpuTimer
clock = FakeClock()
prof = CycleProfiler(timer=CpuTimer(clock), sink=CycleSink(SinkConfig(jsonl_path=sys.argv[1], background=False)))
for s in hook_specs(prof):
    HookRegistry.register(s.target, s.hook, HookType.AROUND)
HookRegistry.apply_hooks()
with Harness(steps=2, eager=True, clock=clock) as h:
    h.run_overlap([h.new_batch(1), h.new_batch(2)])
print(json.dumps(sorted(HookRegistry._patched)))
"""
    out = run_python(["-c", code, tmp_path / "cycles.jsonl"], timeout=300, env={**os.environ, "SGLANG_PLUGINS": "none"})
    assert out.returncode == 0, out.stderr[-3000:]
    assert set(json.loads(out.stdout.strip().splitlines()[-1])) == {s.target for s in hook_specs(CycleProfiler())}
    recs = records(tmp_path)
    exp = Costs().expected(2, True)
    assert [(r.cycle, r.bs) for r in recs] == [(1, 1), (2, 2)]
    assert all(r.total_ms == pytest.approx(exp["total_ms"]) and r.draft_step_ms == pytest.approx([0.4])
               for r in recs)


def test_segments_outside_a_cycle_are_upstreams_own_and_no_target_shim(install, tmp_path, log):
    """The device_timer_ctx hook hands back SGLang's own context manager outside a timed cycle, and
    nothing is shadowed on the target worker (the verify forward is found through its segment)."""
    ctx_mod = pkgutil.resolve_name("sglang.srt.model_executor.runner.decode_cuda_graph_runner")
    clock = FakeClock()
    install(profiler(clock, tmp_path, log))
    assert hasattr(ctx_mod.device_timer_ctx, "__wrapped__")  # the runner module's binding is the hook
    with Harness(steps=3, clock=clock) as h:
        h.run_overlap([h.new_batch(2), h.new_batch(2)])
        assert "forward_batch_generation" not in h.target_worker.__dict__
        outside = ctx_mod.device_timer_ctx(None, "decode")  # e.g. a prefill: upstream's nullcontext
        assert type(outside).__name__ == "nullcontext"
    assert [r.verify_fwd_ms for r in records(tmp_path)] == [pytest.approx(Costs().target_forward)] * 2


@pytest.mark.parametrize("eager", [False, True])
def test_fields_sum_to_total_and_device_spans_exclude_host_prep(eager, install, tmp_path, log):
    """Host time spent before each launch lands in draft_prep/verify/other, never in a device span."""
    clock = FakeClock()
    costs = Costs(draft_replay_prep=0.9, verify_replay_prep=1.1, extend_replay_prep=0.7, forward_prep=0.6,
                  between=0.35)
    install(profiler(clock, tmp_path, log))
    with Harness(steps=3, eager=eager, clock=clock, costs=costs) as h:
        h.run_overlap([h.new_batch(bs) for bs in BATCH_SIZES])
    exp = costs.expected(3, eager)
    recs = records(tmp_path)
    assert len(recs) == len(BATCH_SIZES)
    for r in recs:
        assert r.device_spans
        parts = r.draft_prep_ms + r.draft_ms + r.verify_ms + r.extend_ms + r.other_ms
        assert parts == pytest.approx(r.total_ms, abs=1e-3)
        assert r.draft_ms == pytest.approx(exp["draft_ms"], abs=1e-4)          # the segments only
        assert r.verify_fwd_ms == pytest.approx(costs.target_forward, abs=1e-4)
        assert r.extend_ms == pytest.approx(exp["extend_ms"], abs=1e-4)
        assert r.draft_prep_ms == pytest.approx(exp["draft_prep_ms"], abs=1e-4)  # the host prep
        assert r.other_ms == pytest.approx(exp["other_ms"], abs=1e-4)
    assert [r.gap_ms for r in recs] == [None] + [pytest.approx(0.35, abs=1e-4)] * (len(recs) - 1)
    # tok_s: committed tokens over the period total + gap
    assert recs[1].tok_s == pytest.approx(sum(recs[1].accepts) / (recs[1].total_ms + 0.35) * 1000, rel=1e-3)
    # the line carries the same, and its five parts sum to total to the line's rounding
    line = format_line(recs[1])
    back = parse_line(line)
    assert back.device_spans and back.gap_ms == pytest.approx(0.35)
    assert (back.draft_prep_ms + back.draft_ms + back.verify_ms + back.extend_ms + back.other_ms
            == pytest.approx(back.total_ms, abs=0.026))


def test_stamps_survive_an_adaptive_switch_and_a_recapture(install, tmp_path, log):
    """apply_runtime_state and a recapture put new runner objects on the workers: the segments are
    still bounded (the hook is on the module-level function, not on a runner instance)."""
    clock = FakeClock()
    install(profiler(clock, tmp_path, log))
    with Harness(steps=3, clock=clock) as h:
        h.run_overlap([h.new_batch(2)])
        dw = h.draft_worker
        old_draft, old_extend = dw.cuda_graph_runner, dw.cuda_graph_runner_for_draft_extend
        # new runner objects, as a recapture or a switch of adaptive state makes them
        dw.cuda_graph_runner = SimpleNamespace(execute=old_draft.execute)
        dw.cuda_graph_runner_for_draft_extend = SimpleNamespace(can_run_graph=old_extend.can_run_graph,
                                                                execute=old_extend.execute)
        tm = h.target_worker._model_runner
        h.target_worker._model_runner = SimpleNamespace(**vars(tm))
        h.run_overlap([h.new_batch(3)])
    exp = Costs().expected(3, False)
    recs = records(tmp_path)
    assert len(recs) == 2
    for r in recs:
        for key in ("draft_prep_ms", "draft_ms", "verify_fwd_ms", "extend_ms", "total_ms"):
            assert getattr(r, key) == pytest.approx(exp[key], abs=1e-4), key


def test_another_batch_between_cycles_unlinks_the_gap(install, tmp_path, log):
    """A prefill (or any untimed batch) between two decode cycles: no gap_ms across it, and the kept
    total1 stamp is let go (not pooled: the cycle before may not be read yet)."""
    clock = FakeClock()
    prof = install(profiler(clock, tmp_path, log, timer=CpuTimer(clock)))
    with Harness(steps=3, clock=clock, costs=Costs(between=0.2)) as h:
        h.run_overlap([h.new_batch(2), h.new_batch(2)])
        assert prof._prev_end is not None
        seen = []
        # the worker's prefill branch, as the hook sees it (upstream's branch itself is not run here)
        prof.around_forward(lambda w, b, *a, **k: seen.append(b), h.worker, h.new_batch(2, mode="extend"))
        assert len(seen) == 1 and prof._prev_end is None
        h.run_overlap([h.new_batch(2), h.new_batch(2)])
    assert [r.gap_ms for r in records(tmp_path)] == [None, pytest.approx(0.2, abs=1e-4), None,
                                                      pytest.approx(0.2, abs=1e-4)]


def test_a_cycle_not_recorded_unlinks_the_gap(install, tmp_path, log):
    """A cycle timed for NVTX only (nothing recorded) between two recorded ones: no gap_ms spans it."""
    clock = FakeClock()
    prof = install(profiler(clock, tmp_path, log, timer=CpuTimer(clock)))
    with Harness(steps=3, clock=clock, costs=Costs(between=0.2)) as h:
        h.run_overlap([h.new_batch(2), h.new_batch(2)])
        prof._until_check = 10 ** 6   # keep the switches below for the next cycles
        prof._recording, prof._nvtx = False, SimpleNamespace(push=lambda name: None, pop=lambda: None)
        h.run_overlap([h.new_batch(2)])
        assert prof._prev_end is None
        prof._recording, prof._nvtx = True, None
        h.run_overlap([h.new_batch(2), h.new_batch(2)])
    assert [r.gap_ms for r in records(tmp_path)] == [None, pytest.approx(0.2, abs=1e-4), None,
                                                      pytest.approx(0.2, abs=1e-4)]


def test_profiler_tells_the_sink_when_the_scheduler_waits(install, tmp_path, log):
    """Stamps: opened_at at the end of each launch (the scheduler then blocks on the device), closed_at
    at each read point; host_busy between them. The sink thread is kicked only while it dozes."""
    clock = FakeClock()
    prof = install(profiler(clock, tmp_path, log, background=True))
    kicks, seen = [], []
    stamps = []

    def kick():
        kicks.append(len(stamps))
        prof.sink.dozing = False  # the thread woke

    prof.sink.kick = kick
    prof.sink._start = lambda: None  # no thread: dozing changes only here
    prof.sink.dozing = True  # asleep after an idle spell

    def on_resolve(batch, result):
        stamps.append((prof.sink.opened_at, prof.sink.closed_at))
        seen.append(prof.sink.host_busy)

    with Harness(steps=3, clock=clock) as h:
        h.run_overlap([h.new_batch(1) for _ in range(6)], on_resolve=on_resolve)
    # waiting after each launch; the last batch resolves with no launch before it: still busy
    assert seen == [False] * 5 + [True] and prof.sink.host_busy is True
    opened = [o for o, _ in stamps]
    closed = [c for _, c in stamps]
    # launches 2..6 stamp before resolves 1..5; resolve 6 has no launch before it
    assert opened == sorted(opened) and len(set(opened)) == 5 and opened[4] == opened[5]
    assert closed[0] == -1.0 and closed[1:] == sorted(closed[1:])  # no read point before the first
    assert all(c < o for o, c in stamps[1:5])  # each wait opened after the previous read point
    assert kicks == [0]  # once, at the first launch, while the thread dozed
    assert prof.sink.flush(5.0) and len(records(tmp_path)) == 6
    prof.sink.close()


def test_profiler_stamps_the_two_scheduler_waits_apart(install, tmp_path, log):
    """Overlap order per cycle: the seq_lens wait (upstream's FutureMap.resolve_seq_lens_cpu) before
    the launch of N+1, then the copy_done wait from that launch's end to N's read point. Each wait
    is open exactly while the scheduler is inside it, and each has its own stamps."""
    clock = FakeClock()
    prof = install(profiler(clock, tmp_path, log, background=True))
    prof.sink._start = lambda: None  # no thread: the stamps are read here
    sink = prof.sink
    events = []

    def snap(where):
        cur = sink.current_wait()
        events.append((where, cur.name if cur else None, sink.host_busy, sink.seq_lens_wait.opened,
                       sink.copy_wait.opened))

    with Harness(steps=3, clock=clock) as h:
        h.during_seq_lens = lambda: snap("seq_lens")
        h.run_overlap([h.new_batch(2) for _ in range(4)], on_resolve=lambda b, r: snap("resolve"))
    where = [e[0] for e in events]
    # the first seq_lens wait comes before the first timed cycle: nothing recorded yet, not stamped
    assert where == ["seq_lens", "seq_lens", "resolve", "seq_lens", "resolve", "seq_lens", "resolve", "resolve"]
    assert events[0][1:4] == (None, False, 0.0)
    # inside each wait the sink sees that wait (the first launch's copy_done, which no read point
    # closed before the next seq_lens wait, is older and does not count)
    # (the last read point has no launch before it: the scheduler runs Python there)
    assert [(e[1], e[2]) for e in events[1:]] == [
        ("seq_lens" if e[0] == "seq_lens" else "copy_done", False) for e in events[1:-1]] + [(None, True)]
    # stamps move forward: each seq_lens wait opens after the previous launch's copy_done stamp
    seq_opens = [e[3] for e in events[1:] if e[0] == "seq_lens"]
    copy_opens = [e[4] for e in events[1:] if e[0] == "seq_lens"]
    assert seq_opens == sorted(seq_opens) and all(c < s for c, s in zip(copy_opens, seq_opens))
    w = sink.seq_lens_wait
    assert 0 < w.opened <= w.closed and w.last == pytest.approx(w.closed - w.opened) and not w.waiting
    assert sink.host_busy  # after the last read point: Python
    assert sink.flush(5.0) and len(records(tmp_path)) == 4
    sink.close()


def test_no_seq_lens_stamps_while_nothing_is_recorded(install, tmp_path, log):
    clock = FakeClock()
    sink = CycleSink(SinkConfig(jsonl_path=None, log_line=False), log=log)
    install(CycleProfiler(timer=CpuTimer(clock), sink=sink, log=log))
    with Harness(steps=3, clock=clock) as h:
        h.run_overlap([h.new_batch(2) for _ in range(3)])
    assert (sink.seq_lens_wait.opened, sink.copy_wait.opened) == (0.0, 0.0)


def test_without_device_spans_only_total_and_verify_are_measured(install, tmp_path, log):
    """device_spans=False (the benchmark's variant without the new stamps): the same cycles, with
    total_ms and verify_ms as before and no device span, gap or seq_lens stamp."""
    clock = FakeClock()
    prof = install(profiler(clock, tmp_path, log, device_spans=False))
    with Harness(steps=3, clock=clock) as h:
        h.run_overlap([h.new_batch(2) for _ in range(3)])
    recs = records(tmp_path)
    exp = Costs().expected(3, eager=False)
    assert len(recs) == 3 and prof.fault_count == 0
    for r in recs:
        assert r.total_ms == pytest.approx(exp["total_ms"], abs=1e-6)
        assert r.verify_ms == pytest.approx(exp["verify_ms"], abs=1e-6)
        assert (r.draft_ms, r.verify_fwd_ms, r.extend_ms, r.draft_prep_ms, r.gap_ms) == (None,) * 5
    assert prof.sink.seq_lens_wait.opened == 0.0 and prof._prev_end is None


def test_dp_attention_ranks_print_distinct_labels(caplog):
    """--enable-dp-attention --dp-size 2 at TP 8: SGLang publishes attn_dp_size 2 with dp_size 1; the
    two stats-logging ranks (attention-TP rank 0 of each replica) print lines labelled apart."""
    from sglang.test.test_utils import published_topology

    from sglang_eagle_cycle.cycle import make_record
    from sglang_eagle_cycle.patches.cycle import _stats_logging_rank
    from sglang_eagle_cycle.runtime import ranks

    lines, printing = [], []
    for world_rank in range(8):
        with published_topology(ranks={"world_rank": world_rank}, tp_size=8, dp_size=2, enable_dp_attention=True):
            r = ranks()
            assert (r.dp_size, r.attn_dp_size) == (1, 2)
            cfg = SinkConfig.from_env({}, r, stats_rank=_stats_logging_rank(r), background=False)
            if not cfg.log_line:
                continue
            printing.append(world_rank)
            lg = logging.getLogger(f"{LOG}.adp{world_rank}")
            lg.setLevel(logging.INFO)
            sink = CycleSink(cfg, log=lg)
            with caplog.at_level(logging.INFO, logger=lg.name):
                sink.submit(make_record(cycle=7, config=(1, 2, 1, 3), accepts=[2], graph=True,
                                        phases_ms={"total_ms": 20.0, "verify_ms": 19.0, "draft_prep_ms": None}))
                sink.close()
            lines += [rec.getMessage() for rec in caplog.records if rec.name == lg.name]
    assert printing == [0, 4]
    labels = [parse_line(x).rank for x in lines]
    assert labels == ["tp0.adp0", "tp4.adp1"]


class _WatchedTimer:
    """A timer backend that notes which thread reads it and whether a CUDA-graph capture is open."""

    kind = "cuda"
    stream = "s"

    def __init__(self, watch):
        self.watch = watch

    def _note(self, what):
        self.watch["calls"].append((threading.current_thread().name, self.watch["open"], what))

    def done(self, stamp):
        self._note("query")
        return self.watch["complete"]

    def elapsed_ms(self, a, b):
        self._note("elapsed_time")
        return 1.0

    def release(self, stamps):
        pass


class _PendingOn:
    def __init__(self, timer, i):
        self.timer, self.i = timer, i

    def ready(self):
        return self.timer.done(None)

    def build(self):
        from sglang_eagle_cycle.cycle import make_record

        ms = self.timer.elapsed_ms(None, None)
        return make_record(cycle=self.i, config=(1, 2, 1, 3), accepts=[2], graph=True,
                           phases_ms={"total_ms": ms, "draft_prep_ms": None})


@pytest.mark.parametrize("thread_local", [False, True])
def test_sink_reads_no_event_inside_a_capture(thread_local, monkeypatch, tmp_path, log):
    """Each capture path SGLang runs while serving, with the sink holding cycles whose events are not
    complete and polling hard: without thread-local capture mode, no sink-thread read happens while
    the capture is open (the reads are deferred); with it, the sink thread set the mode itself."""
    import time as _time

    from sglang_eagle_cycle import sinks
    from sglang_eagle_cycle.patches.cycle import CAPTURE_METHODS

    watch = {"open": False, "complete": False, "calls": [], "mode_set_by": []}

    def set_mode():
        watch["mode_set_by"].append(threading.current_thread().name)
        return thread_local

    monkeypatch.setattr(sinks, "_thread_local_capture", set_mode)
    timer = _WatchedTimer(watch)
    sink = CycleSink(SinkConfig(jsonl_path=str(tmp_path / "cycles.jsonl"), background=True), log=log)
    prof = CycleProfiler(timer=timer, sink=sink, log=log)
    for i in range(3):
        sink.submit(_PendingOn(timer, i + 1))
    deadline = _time.monotonic() + 5
    while not any(c[0] == "eagle-cycle-sink" for c in watch["calls"]) and _time.monotonic() < deadline:
        sink.kick()
        _time.sleep(0.002)
    for name in CAPTURE_METHODS:
        def capture(runner, *, _name=name):
            watch["open"] = True
            for _ in range(25):   # the sink is woken again and again while the capture is open
                sink.kick()
                _time.sleep(0.002)
            watch["open"] = False
            return _name

        assert prof.around_capture(capture, object()) == name
    watch["complete"] = True
    assert sink.flush(5.0)
    sink.close()
    assert [r.cycle for r in records(tmp_path)] == [1, 2, 3]
    on_sink = [c for c in watch["calls"] if c[0] == "eagle-cycle-sink"]
    assert {c[2] for c in on_sink} == {"query", "elapsed_time"}
    assert watch["mode_set_by"] == ["eagle-cycle-sink"]
    if thread_local:
        assert sink.thread_local_capture is True
        assert any(open_ for _, open_, _ in on_sink)   # allowed: the mode keeps them out of the capture
    else:
        assert sink.thread_local_capture is False
        assert not any(open_ for _, open_, _ in on_sink)
        assert sink.deferred >= len(CAPTURE_METHODS)


def test_cycle_lines_carry_the_cost_aware_policys_state(install, tmp_path, log, caplog):
    """With our adaptive policy inside SGLang's AdaptiveController, each cycle's record ends with
    adaptive=explore|exploit as the policy routed that batch (SGLang asks it at the start of the decode
    branch); SGLang's own policy, or ours after a fault, gives no field."""
    import json as _json

    from sglang.srt.speculative.adaptive_runtime_state import AdaptiveController
    from sglang.srt.speculative.adaptive_spec_params import AdaptiveSpeculativeParams

    from sglang_eagle_cycle.adaptive import CostAwarePolicy
    from sglang_eagle_cycle.patches.adaptive import FallbackPolicy

    class Counting(AdaptiveController):   # the harness runs one depth: a switch is not applied
        def _activate(self, speculative_num_steps):
            pass

    cfg = tmp_path / "adaptive.json"
    cfg.write_text(_json.dumps({"1": {"candidate_steps": [1, 2, 3]}}))
    clock = FakeClock()
    install(profiler(clock, tmp_path, log))
    caplog.set_level(logging.INFO, logger=LOG)
    ours = CostAwarePolicy(3, str(cfg))
    with Harness(steps=3, clock=clock) as h:
        h.worker.adaptive_controller = Counting(h.worker, AdaptiveSpeculativeParams(3, str(cfg)))
        h.run_overlap([h.new_batch(2)])       # SGLang's policy: no field
        fallback = FallbackPolicy(ours, h.worker.adaptive_controller.params)
        h.worker.adaptive_controller.params = fallback
        h.run_overlap([h.new_batch(2), h.new_batch(2)])
        ours._slots[1].applied_mode = "explore"   # a probe: its state as the policy sets it at a boundary
        h.run_overlap([h.new_batch(2)])
        fallback._fail("test", RuntimeError("boom"))   # SGLang's policy takes over: no field again
        h.run_overlap([h.new_batch(2)])
        h.worker.adaptive_controller = None
    assert [r.adaptive for r in records(tmp_path)] == [None, "exploit", "exploit", "explore", None]
    lines = info_lines(caplog)
    assert [ln.rsplit(" ", 1)[-1] for ln in lines][1:4] == ["adaptive=exploit"] * 2 + ["adaptive=explore"]
    assert "adaptive=" not in lines[0] and "adaptive=" not in lines[4]


@pytest.mark.parametrize("between", ["prefill", "upstream_error"])
def test_a_kept_total1_is_not_pooled_before_its_own_cycle_is_read(between, install, tmp_path, log):
    """Cycle N hands its ``total1`` event to the next cycle for ``gap_ms``; in overlap mode N is read
    only after the next batch launched. When that batch is a prefill (the link is cut) or a decode
    cycle upstream fails, the event must not go back to the pool: the next decode cycle would record
    it again before N is read, and N's total_ms would run to that later launch."""
    clock = FakeClock()
    gpu = FakeGpu(clock)
    timer = CudaTimer(event_factory=lambda: CountingEvent(gpu), current_stream=lambda: FakeStream("fwd"),
                      is_capturing=lambda: False)
    prof = install(profiler(clock, tmp_path, log, timer=timer))
    with Harness(steps=3, clock=clock) as h:
        b1 = h.new_batch(2)
        r1 = h.launch(b1)
        if between == "prefill":   # the worker's prefill branch, as the hook sees it
            prof.around_forward(lambda w, b, *a, **k: clock.advance(50.0), h.worker, h.new_batch(2, mode="extend"))
        else:
            h.verify_error = RuntimeError("upstream")
            with pytest.raises(RuntimeError):
                h.launch(h.new_batch(2))
            clock.advance(50.0)
        h.resolve(b1, r1)   # N is handed to the sink; its events have not completed yet
        b2 = h.new_batch(2)
        r2 = h.launch(b2)
        for ev in gpu.recorded:
            ev.done = True
        h.resolve(b2, r2)
    prof.sink.close()
    exp = Costs().expected(3, False)
    recs = records(tmp_path)
    assert len(recs) == 2
    assert all(r.total_ms == pytest.approx(exp["total_ms"]) for r in recs), [r.total_ms for r in recs]
