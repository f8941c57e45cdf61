"""Run in a fresh interpreter by ``test_metrics.py``: the live Prometheus export through the real hooks.

As in an SGLang server started with ``--enable-metrics``: ``PROMETHEUS_MULTIPROC_DIR`` is set
before ``prometheus_client`` is first imported (checked), SGLang's runtime context is published
with its metrics on, and the sink's configuration comes from ``SinkConfig.from_env``. Cycles run
through SGLang 0.5.23's real EAGLE-3 decode branch (``cycle_harness.Harness``, hooks registered
with SGLang's own HookRegistry) at two depths; the series are then read back with
``prometheus_client``'s multiprocess collector, as SGLang's ``/metrics`` reads them.

Usage: ``python metrics_live_probe.py``; prints one JSON object.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from pathlib import Path

assert "prometheus_client" not in sys.modules, "prometheus_client imported before PROMETHEUS_MULTIPROC_DIR was set"
MP = os.environ["PROMETHEUS_MULTIPROC_DIR"]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cycle_harness import FakeClock, Harness  # noqa: E402
from sglang.srt.plugins.hook_registry import HookRegistry, HookType  # noqa: E402
from sglang.test.test_utils import published_topology  # noqa: E402

from sglang_eagle_cycle.patches import wiring as wiring_hook  # noqa: E402
from sglang_eagle_cycle.patches.cycle import CycleProfiler, hook_specs  # noqa: E402
from sglang_eagle_cycle.runtime import ranks  # noqa: E402
from sglang_eagle_cycle.sinks import CycleSink, SinkConfig  # noqa: E402
from sglang_eagle_cycle.timing import CpuTimer  # noqa: E402
from sglang_eagle_cycle.wiring import check_pair  # noqa: E402

TARGET = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 32,
          "hidden_size": 4096, "vocab_size": 128256}
DRAFT = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "num_hidden_layers": 1,
         "hidden_size": 4096, "vocab_size": 128256, "draft_vocab_size": 32000,
         "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 15, 28]}}
report = {}
with published_topology(enable_metrics=True, served_model_name="tiny-llama"):
    r = ranks()
    cfg = SinkConfig.from_env(dict(os.environ), r, stats_rank=True)  # no JSONL; the line is off below
    report["labels"] = dict(cfg.metrics_labels) if cfg.metrics_labels else None
    report["off_by_env"] = SinkConfig.from_env({**os.environ, "SGLANG_EAGLE_CYCLE_METRICS": "0"}, r,
                                               stats_rank=True).metrics_labels
    report["not_printing_rank"] = SinkConfig.from_env(dict(os.environ), r, stats_rank=False).metrics_labels
    wiring = check_pair(TARGET, DRAFT, header={"fc.weight": [4096, 12288]}, env={})
    wiring_hook._log_report(wiring)   # the start-up line and the info gauge, as the setter hook does
with published_topology(enable_metrics=True, served_model_name="m", extra_metric_labels={"cluster": "a"},
                        ranks={"dp_rank": 1}, dp_size=2):
    report["labels_dp"] = dict(SinkConfig.from_env(dict(os.environ), ranks(), stats_rank=True).metrics_labels)
with published_topology():            # SGLang's metrics off
    report["sglang_metrics_off"] = SinkConfig.from_env(dict(os.environ), ranks(), stats_rank=True).metrics_labels

logging.getLogger("sglang_eagle_cycle").setLevel(logging.WARNING)   # --log-level warning: no cycle line
sink = CycleSink(cfg)                 # the sink thread, as in a server
report["active_without_line_or_jsonl"] = sink.active and sink._jsonl is None
observed_on = set()
observe = sink.metrics.observe


def observe_and_note(rec):
    observed_on.add(threading.current_thread().name)
    observe(rec)


sink.metrics.observe = observe_and_note
clock = FakeClock()
prof = CycleProfiler(timer=CpuTimer(clock), sink=sink)
for spec in hook_specs(prof):
    HookRegistry.register(spec.target, spec.hook, HookType.AROUND)
HookRegistry.apply_hooks()
accepts = {}
for steps, sizes in ((3, [2, 3, 1, 4, 2, 5]), (2, [3, 1, 2])):
    with Harness(steps=steps, clock=clock) as h:
        h.run_overlap([h.new_batch(bs) for bs in sizes])
        accepts[steps] = [list(a) for a in h._pending_accepts]
assert sink.flush(30.0)
report["observed_on"] = sorted(observed_on)
report["main_thread"] = threading.current_thread().name
report["accepts"] = accepts
report["faults"] = prof.fault_count

from prometheus_client import CollectorRegistry  # noqa: E402
from prometheus_client.multiprocess import MultiProcessCollector  # noqa: E402

registry = CollectorRegistry()
MultiProcessCollector(registry, path=MP)
report["samples"] = [[s.name, s.labels, s.value] for fam in registry.collect() for s in fam.samples]
report["files"] = sorted(os.listdir(MP))
print(json.dumps(report))
