"""The cycle series in Prometheus: live from the server's hooks, and offline from a log.

Offline (``eagle-cycle inspect --prometheus``): generated logs (test/cyclegen.py) with known phase
times and accept lengths; the file is parsed with ``prometheus_client``'s own parser and compared
with ``inspect --json`` (counts exactly, sums to 1e-6 relative) and with the generator's values.

Live: ``metrics_live_probe.py`` drives SGLang's real decode cycle through our hooks in a fresh
interpreter with ``PROMETHEUS_MULTIPROC_DIR`` set as SGLang sets it, and reads the series back with
``prometheus_client``'s multiprocess collector; the counts are checked against the accept lengths
it drove and the harness's known phase times. The live and offline writers give the same series
for the same cycles.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import itertools
import os

import pytest

from cyclegen import generate, log_lines
from sglang_fork import run_python
from sglang_eagle_cycle import cli
from sglang_eagle_cycle.cycle import aggregate, format_line, parse_line
from sglang_eagle_cycle.metrics import (ACCEPT_LENGTH, AGGREGATED_PHASE_SECONDS, CYCLES, PHASE_BUCKETS_S,
                                        PHASE_LABELS, PHASE_SECONDS, POSITION_ACCEPTED, POSITION_REACHED,
                                        WIRING_INFO, LiveMetrics, parse_wiring_line, rank_labels,
                                        wiring_info_labels)
from sglang_eagle_cycle.wiring import check_pair

HERE = Path(__file__).resolve().parent
WIRING_LINE = ("[2026-11-30 09:59:00 TP0] EAGLE-3 aux wiring: ids [2, 30, 58] (layer outputs, draft eagle_config) "
               "-> capture positions [3, 31, 59] of 61; stock SGLang 0.5.23 would capture [2, 30, 58]")


def parse(text: str) -> dict[str, list]:
    """Samples by name; every family must have a declared type (no ``unknown``) and every histogram
    series must be valid (:func:`check_histograms`)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(text):
        assert fam.type in ("counter", "gauge", "histogram", "summary"), (fam.name, fam.type)
        for s in fam.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    check_histograms(text)
    return out


def check_histograms(text: str) -> int:
    """Assert the Prometheus histogram invariant on every histogram series of ``text`` (parsed with
    prometheus_client's parser): buckets in rising ``le`` order ending at ``+Inf``, counts never
    falling, ``_count`` equal to the ``+Inf`` bucket, a ``_sum``. Returns the series checked."""
    from prometheus_client.parser import text_string_to_metric_families

    checked = 0
    for fam in text_string_to_metric_families(text):
        if fam.type != "histogram":
            continue
        series: dict[tuple, dict] = {}
        for s in fam.samples:
            key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
            d = series.setdefault(key, {"buckets": []})
            if s.name == fam.name + "_bucket":
                d["buckets"].append((float(s.labels["le"]), s.value))
            else:
                d[s.name[len(fam.name) + 1:]] = s.value
        for key, d in series.items():
            bounds = [b for b, _ in d["buckets"]]
            counts = [c for _, c in d["buckets"]]
            assert bounds and bounds == sorted(bounds) and bounds[-1] == float("inf"), (fam.name, key, bounds)
            assert all(a <= b for a, b in zip(counts, counts[1:])), (fam.name, key, counts)
            assert "sum" in d and d["count"] == counts[-1], (fam.name, key, d.get("count"), counts[-1])
            checked += 1
    return checked


def inspect(argv, capsys) -> tuple[int, str, str]:
    code = cli.main(["inspect", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def one(samples, name, **labels):
    hits = [v for lab, v in samples.get(name, []) if all(lab.get(k) == v2 for k, v2 in labels.items())]
    assert len(hits) == 1, (name, labels, hits)
    return hits[0]


@pytest.fixture
def two_depths(tmp_path):
    rng = random.Random(1607)
    a = generate(rng, bs=4, steps=2, cycles=150, p=[0.8, 0.6], spans=True)
    b = generate(rng, bs=4, steps=4, cycles=90, p=[0.8, 0.7, 0.5, 0.4], spans=True, first_cycle=150)
    log = tmp_path / "server.log"
    log.write_text("\n".join(["some startup line", WIRING_LINE] + log_lines(a.records) + log_lines(b.records)) + "\n")
    return log, {2: a, 4: b}


def test_histograms_agree_with_inspect_json(two_depths, tmp_path, capsys):
    log, runs = two_depths
    prom = tmp_path / "cycles.prom"
    code, out, err = inspect([str(log), "--json", "--prometheus", str(prom), "--model-name", "m"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    s = parse(prom.read_text())
    assert len(doc["groups"]) == 2
    for g in doc["groups"]:
        steps = str(g["steps"])
        for field, entry in g["phases"].items():
            labels = dict(phase=PHASE_LABELS[field], steps=steps, model_name="m", engine_type="unified")
            if not entry["count"]:
                assert not [v for lab, v in s[f"{PHASE_SECONDS}_count"] if lab["phase"] == labels["phase"]
                            and lab["steps"] == steps]
                continue
            assert one(s, f"{PHASE_SECONDS}_count", **labels) == entry["count"]
            assert one(s, f"{PHASE_SECONDS}_sum", **labels) == pytest.approx(entry["sum_ms"] / 1000, rel=1e-6)
            assert one(s, f"{PHASE_SECONDS}_bucket", le="+Inf", **labels) == entry["count"]
        assert one(s, f"{ACCEPT_LENGTH}_count", steps=steps) == sum(g["accept_hist"].values())
        assert one(s, f"{ACCEPT_LENGTH}_sum", steps=steps) == sum(int(k) * v for k, v in g["accept_hist"].items())
        assert one(s, CYCLES, steps=steps) == g["cycles"]


def test_counts_and_buckets_from_the_generators_values(two_depths, tmp_path, capsys):
    log, runs = two_depths
    code, out, err = inspect([str(log), "--prometheus", "-"], capsys)
    assert code == 0, err
    s = parse(out)
    for steps, run in runs.items():
        verify = run.values("verify_ms")
        lab = dict(phase="verify", steps=str(steps))
        assert one(s, f"{PHASE_SECONDS}_count", **lab) == len(verify) == len(run.records)
        for bound in (0.02, 0.025):
            assert bound in PHASE_BUCKETS_S
            assert one(s, f"{PHASE_SECONDS}_bucket", le=repr(bound), **lab) == sum(v / 1000 <= bound for v in verify)
        gaps = run.values("gap_ms")   # no gap on a run's first cycle
        assert one(s, f"{PHASE_SECONDS}_count", phase="gap", steps=str(steps)) == len(gaps) == len(run.records) - 1
        accepts = run.accepts()
        for k in range(1, steps + 2):
            assert one(s, f"{ACCEPT_LENGTH}_bucket", steps=str(steps), le=f"{float(k)!r}") == sum(a <= k for a in accepts)
    # positions: both depths pooled (the counters have no steps label); a run reaches positions 1..steps
    for j in range(1, 5):
        reached = sum(sum(a >= j for a in run.accepts()) for steps, run in runs.items() if j <= steps)
        accepted = sum(sum(a >= j + 1 for a in run.accepts()) for steps, run in runs.items() if j <= steps)
        assert one(s, POSITION_REACHED, position=str(j)) == reached
        assert one(s, POSITION_ACCEPTED, position=str(j)) == accepted
    # every series carries the base labels
    for name, series in s.items():
        for labels, _ in series:
            assert {"model_name", "engine_type", "tp_rank", "pp_rank", "dp_rank"} <= set(labels), name
            assert (labels["tp_rank"], labels["pp_rank"], labels["dp_rank"]) == ("0", "0", "0")


def _accept_buckets(samples) -> dict[str, dict[str, float]]:
    """``{steps: {le: cumulative count}}`` of the accept-length histogram in parsed samples."""
    out: dict[str, dict[str, float]] = {}
    for labels, value in samples[f"{ACCEPT_LENGTH}_bucket"]:
        out.setdefault(labels["steps"], {})[labels["le"]] = value
    return out


def _depth_2_and_5_runs() -> dict:
    """Two servers' runs, bs 4 and 50 cycles each, at depths 2 and 5 (``{steps: run}``): the
    accept-length bucket-set tests sum their histograms."""
    return {2: generate(random.Random(2), bs=4, steps=2, cycles=50, p=[0.8, 0.6]),
            5: generate(random.Random(5), bs=4, steps=5, cycles=50, p=[0.8, 0.7, 0.6, 0.5, 0.4])}


def _offline_text(tmp_path, capsys, steps: int, run, *extra: str) -> str:
    """``run`` logged to ``d{steps}.log`` and exported by ``inspect --prometheus -`` (``extra``: more
    options); the exposition text, exit 0 asserted."""
    log = tmp_path / f"d{steps}.log"
    log.write_text("\n".join(log_lines(run.records)) + "\n")
    code, out, err = inspect([str(log), "--prometheus", "-", *extra], capsys)
    assert code == 0, err
    return out


def test_accept_length_histograms_of_different_depths_sum_bucket_by_bucket(tmp_path, capsys):
    """Two servers at depths 2 and 5, each exported offline (one ``inspect --prometheus`` file per
    log, as node_exporter's textfile folder holds them) and live (one LiveMetrics per server). The
    buckets had followed each file's or server's depth (le 1..3 and 1..6): ``sum by (le)`` then held
    le 4..6 from one of them only, its counts fell (328 at le 3, 162 at le 4) and
    ``histogram_quantile`` read a p90 of 6 where the pooled requests give 3.9. Now every output
    carries one le set, whatever the depth, and the sum is the pooled requests' histogram."""
    from prometheus_client import CollectorRegistry, generate_latest

    runs = _depth_2_and_5_runs()
    outputs = []
    for steps, run in runs.items():
        outputs.append(("offline", steps, parse(_offline_text(tmp_path, capsys, steps, run))))
        registry = CollectorRegistry()
        live = LiveMetrics({"model_name": "", "engine_type": "unified", "tp_rank": "0", "pp_rank": "0",
                            "dp_rank": "0"}, registry=registry)
        for rec in run.records:
            live.observe(rec)
        live.push()
        outputs.append(("live", steps, parse(generate_latest(registry).decode())))
    le_sets = set()
    for writer, steps, samples in outputs:
        (only,) = _accept_buckets(samples).items()
        assert only[0] == str(steps), writer
        le_sets.add(tuple(sorted(only[1], key=float)))   # "+Inf" last
    assert len(le_sets) == 1, le_sets           # one bucket set for every depth and both writers
    (les,) = le_sets
    # README: 1, 2, ..., 16, 20, 24, 32, 48, 65
    assert les == tuple(f"{float(k)!r}" for k in [*range(1, 17), 20, 24, 32, 48, 65]) + ("+Inf",)
    pooled = runs[2].accepts() + runs[5].accepts()
    for writer in ("offline", "live"):
        summed: dict[str, float] = {}         # sum by (le) over the two servers
        count = 0.0
        for w, steps, samples in outputs:
            if w == writer:
                for le, v in _accept_buckets(samples)[str(steps)].items():
                    summed[le] = summed.get(le, 0.0) + v
                count += one(samples, f"{ACCEPT_LENGTH}_count", steps=str(steps))
        counts = [summed[le] for le in les]
        assert all(a <= b for a, b in zip(counts, counts[1:])), (writer, counts)
        assert summed["+Inf"] == count == len(pooled), writer
        for le in les[:-1]:
            assert summed[le] == sum(a <= float(le) for a in pooled), (writer, le)


def test_aggregated_lines_go_to_their_own_summary_and_every_histogram_stays_valid(tmp_path, capsys):
    """A log of per-cycle and aggregated (LOG_EVERY) lines at depth 3, and only aggregated ones at
    depth 2. Aggregated cycles had counted in the histogram's _sum/_count but in no bucket, so _count
    exceeded the +Inf bucket, which Prometheus forbids."""
    rng = random.Random(7)
    run = generate(rng, bs=2, steps=3, cycles=45, p=[0.7, 0.6, 0.5])
    deep = generate(rng, bs=2, steps=2, cycles=20, p=[0.7, 0.6], first_cycle=45)
    per_cycle = run.records[:10] + run.records[40:]
    aggs = [aggregate(run.records[i:i + 10]) for i in (10, 20, 30)] + [aggregate(deep.records)]
    lines = log_lines(run.records[:10]) + log_lines(aggs[:3]) + log_lines(run.records[40:]) + log_lines(aggs[3:])
    log = tmp_path / "agg.log"
    log.write_text("\n".join(lines) + "\n")
    prom = tmp_path / "agg.prom"
    code, out, err = inspect([str(log), "--json", "--prometheus", str(prom)], capsys)
    assert code == 0, err
    doc, text = json.loads(out), prom.read_text()
    assert check_histograms(text) >= 8   # every phase at depth 3, the accept lengths at both depths
    s = parse(text)
    groups = {g["steps"]: g for g in doc["groups"]}
    # the histogram: the 15 per-cycle cycles, exactly
    totals = [r.total_ms for r in per_cycle]
    lab = dict(phase="total", steps="3")
    assert one(s, f"{PHASE_SECONDS}_count", **lab) == 15 == one(s, f"{PHASE_SECONDS}_bucket", le="+Inf", **lab)
    assert one(s, f"{PHASE_SECONDS}_sum", **lab) == pytest.approx(sum(totals) / 1000, rel=1e-9)
    for bound in PHASE_BUCKETS_S:
        assert one(s, f"{PHASE_SECONDS}_bucket", le=repr(bound), **lab) == sum(t / 1000 <= bound for t in totals)
    # the summary: the 30 + 20 aggregated cycles, their means times n as the lines print them
    agg_lines = [parse_line(ln) for ln in lines if " n=" in ln]
    assert one(s, f"{AGGREGATED_PHASE_SECONDS}_count", **lab) == 30
    assert one(s, f"{AGGREGATED_PHASE_SECONDS}_sum", **lab) == pytest.approx(
        sum(r.total_ms * r.n for r in agg_lines[:3]) / 1000, rel=1e-9)
    assert one(s, f"{AGGREGATED_PHASE_SECONDS}_count", phase="verify", steps="2") == 20
    assert one(s, f"{AGGREGATED_PHASE_SECONDS}_sum", phase="verify", steps="2") == pytest.approx(
        agg_lines[3].verify_ms * 20 / 1000, rel=1e-9)
    # depth 2 has no per-cycle time: no phase histogram series, not an empty one
    assert not [lab2 for lab2, _ in s[f"{PHASE_SECONDS}_count"] if lab2["steps"] == "2"]
    # the two together are inspect's totals, phase by phase
    def both(suffix, **lab):   # the histogram's and the summary's sample, 0 where a series is absent
        return sum(v for name in (PHASE_SECONDS, AGGREGATED_PHASE_SECONDS) for lab2, v in s.get(f"{name}_{suffix}", [])
                   if all(lab2[k] == x for k, x in lab.items()))

    for steps, g in groups.items():
        for field, entry in g["phases"].items():
            lab = dict(phase=PHASE_LABELS[field], steps=str(steps))
            assert both("count", **lab) == entry["count"], (steps, field)
            assert both("sum", **lab) == pytest.approx(entry["sum_ms"] / 1000, rel=1e-6), (steps, field)
    # cycles and accept lengths count every cycle (an aggregated line's accept_hist is exact)
    assert one(s, CYCLES, steps="3") == 45 and one(s, CYCLES, steps="2") == 20
    assert one(s, f"{ACCEPT_LENGTH}_count", steps="3") == 90 == sum(groups[3]["accept_hist"].values())
    assert one(s, f"{ACCEPT_LENGTH}_bucket", steps="2", le="+Inf") == 40
    assert text.splitlines()[0] == (f"# 50 aggregated cycles (SGLANG_EAGLE_CYCLE_LOG_EVERY lines: means only): their "
                                    f"phase times are in {AGGREGATED_PHASE_SECONDS} (sum, count), not in {PHASE_SECONDS}")


def test_rank_labels():
    assert rank_labels([]) == {"tp_rank": "0", "pp_rank": "0", "dp_rank": "0"}
    assert rank_labels(["tp3.pp1.dp2"]) == {"tp_rank": "3", "pp_rank": "1", "dp_rank": "2"}
    assert rank_labels(["tp4.adp1"]) == {"tp_rank": "4", "pp_rank": "0", "dp_rank": "1"}
    assert rank_labels(["tp0", "tp1"]) == {"tp_rank": "all", "pp_rank": "all", "dp_rank": "all"}


def test_stock_decode_batch_only_gives_no_series(tmp_path, capsys):
    log = tmp_path / "stock.log"
    log.write_text("[2026-11-30 10:00:00 TP0] Decode batch, #running-req: 1, #token: 100, token usage: 0.01, "
                   "accept len: 2.10, accept rate: 0.55, cuda graph: True, gen throughput (token/s): 94.00, "
                   "#queue-req: 0\n")
    prom = tmp_path / "x.prom"
    code, out, err = inspect([str(log), "--prometheus", str(prom)], capsys)
    assert code == 1 and not prom.exists() and "no [eagle-cycle] cycles" in err


def test_stdout_prometheus_is_named_as_the_option_in_warnings(tmp_path, capsys):
    """``--prometheus -`` is stdout: the warnings name it so, not as a file called ``-``."""
    log = tmp_path / "stock.log"
    log.write_text("[2026-11-30 10:00:00 TP0] Decode batch, #running-req: 1, #token: 100, token usage: 0.01, "
                   "accept len: 2.10, accept rate: 0.55, cuda graph: True, gen throughput (token/s): 94.00, "
                   "#queue-req: 0\n")
    code, out, err = inspect([str(log), "--prometheus", "-"], capsys)
    assert code == 1 and out == "" and err.startswith("eagle-cycle inspect: warning: --prometheus - not written: ")
    assert err.count("\n") == 1
    rng = random.Random(3)
    lines = [log_lines(generate(rng, bs=2, steps=2, cycles=5, p=[0.8, 0.6], rank=r).records) for r in ("tp0", "tp1")]
    log.write_text("\n".join(lines[0] + lines[1]) + "\n")
    code, out, err = inspect([str(log), "--prometheus", "-"], capsys)
    assert code == 0 and out.startswith("# HELP") and err.startswith("eagle-cycle inspect: warning: --prometheus -: 1 group")


def test_two_stdout_outputs_refused(two_depths, capsys):
    log, _ = two_depths
    code, out, err = inspect([str(log), "--json", "--prometheus", "-"], capsys)
    assert code == 2 and err.count("\n") == 1 and "both write to stdout" in err


def test_existing_file_kept_without_force(two_depths, tmp_path, capsys):
    log, _ = two_depths
    prom = tmp_path / "mine.prom"
    prom.write_text("keep me\n")
    code, out, err = inspect([str(log), "--prometheus", str(prom)], capsys)
    assert code == 2 and prom.read_text() == "keep me\n" and "--force" in err


# ----------------------------------------------------------------------------- the Grafana dashboard
DASHBOARD = Path(__file__).resolve().parents[1] / "dashboards" / "eagle-cycle.json"
METRIC = re.compile(r"sglang:eagle_cycle_[a-z_]+")


def _exprs():
    dash = json.loads(DASHBOARD.read_text())
    return dash, [t["expr"] for p in dash["panels"] if p["type"] != "row" for t in p["targets"]]


def test_dashboard_has_grafanas_keys_and_the_panels_asked_for():
    dash, exprs = _exprs()
    assert dash["title"] and dash["panels"] and isinstance(dash["schemaVersion"], int)
    for p in dash["panels"]:
        assert p["type"] and set(p["gridPos"]) == {"h", "w", "x", "y"}
        if p["type"] != "row":
            assert p["targets"] and all(t["expr"].strip() for t in p["targets"]), p["title"]
    titles = " | ".join(p["title"].lower() for p in dash["panels"])
    for words in ("phase shares", "p50 / p99", "accept length distribution", "per-position acceptance",
                  "baseline", "wiring"):
        assert words in titles, words
    live = [e for e in exprs if "rate(" in e]
    snapshot = [e for p in dash["panels"] if p["type"] != "row" and "snapshot" in p["title"] for e in
                (t["expr"] for t in p["targets"])]
    assert live and snapshot and not any("rate(" in e for e in snapshot)
    variables = {v["name"] for v in dash["templating"]["list"]}
    used = set(re.findall(r"\$(\w+)", " ".join(exprs))) - {"__rate_interval"}
    assert used <= variables, used - variables


def test_every_dashboard_metric_is_in_the_offline_export(two_depths, capsys):
    log, runs = two_depths
    # an aggregated (LOG_EVERY) line too: the snapshot row adds its phase times in
    more = generate(random.Random(11), bs=4, steps=2, cycles=10, p=[0.8, 0.6], spans=True, first_cycle=240)
    with log.open("a") as fh:
        fh.write("\n".join(log_lines([aggregate(more.records)])) + "\n")
    code, out, err = inspect([str(log), "--prometheus", "-"], capsys)
    assert code == 0, err
    exported = set(parse(out))
    _, exprs = _exprs()
    used = {m for e in exprs for m in METRIC.findall(e)}
    assert used and used <= exported, used - exported


def test_dashboard_queries_parse_as_promql(tmp_path):
    """promtool (Debian's prometheus package) checks every expression as a recording rule."""
    beside = Path(sys.executable).parent / "promtool"     # where `make test` puts it
    promtool = str(beside) if beside.is_file() else shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (apt install prometheus; make test fetches it when it can)")
    _, exprs = _exprs()
    rules = {"groups": [{"name": "eagle_cycle_dashboard", "rules": [
        {"record": f"eagle_cycle:dashboard_expr_{i}",
         "expr": e.replace("$__rate_interval", "5m").replace("$model", ".*").replace("$baseline", "0")}
        for i, e in enumerate(exprs)]}]}
    path = tmp_path / "rules.yml"
    path.write_text(json.dumps(rules))   # JSON is YAML
    proc = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr



def _promtool() -> Optional[str]:
    beside = Path(sys.executable).parent / "promtool"     # where `make test` puts it
    return str(beside) if beside.is_file() else shutil.which("promtool")


def _evaluate(promtool: str, text: str, expr: str, tmp_path: Path, more: tuple = ()) -> dict[str, float]:
    """``expr`` evaluated by promtool over the samples of ``text`` and of each exposition in ``more``
    (several files of one textfile folder; every sample a constant series): ``{labels as promtool
    prints them: value}``. promtool prints what an expression gives only when a test fails, so the
    test expects nothing."""
    from prometheus_client.parser import text_string_to_metric_families

    series = [{"series": s.name + "{" + ",".join(f"{k}={json.dumps(v)}" for k, v in s.labels.items()) + "}",
               "values": f"{s.value!r}x3"}
              for t in (text, *more) for fam in text_string_to_metric_families(t) for s in fam.samples]
    test = {"rule_files": [], "evaluation_interval": "1m", "tests": [{"interval": "1m", "input_series": series,
            "promql_expr_test": [{"expr": expr, "eval_time": "1m", "exp_samples": []}]}]}
    path = tmp_path / "eval.yml"
    path.write_text(json.dumps(test))   # JSON is YAML
    proc = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True)
    got = re.search(r"got:\s*(.*)", proc.stdout + proc.stderr)
    assert got, proc.stdout + proc.stderr
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"(\{[^}]*\}) ([^,\s]+)", got.group(1))}


def test_snapshot_panels_read_what_inspect_reports(tmp_path, capsys):
    """The snapshot row's expressions, evaluated by promtool over an ``inspect --prometheus`` file of
    one group, give inspect's own numbers. A third of the cycles carry no gap (after another batch
    or a pause), where inspect counts the group's mean gap: the effective tok/s had summed only the
    logged gaps and read 5% high on this host-bound run. Older lines (no gap series) too."""
    promtool = _promtool()
    if promtool is None:
        pytest.skip("promtool is not installed (apt install prometheus; make test fetches it when it can)")
    run = generate(random.Random(5), bs=4, steps=3, cycles=120, p=[0.8, 0.6, 0.5], spans=True, gap_ms=3.0,
                   verify_ms=8.0)
    for rec in run.records[::3]:
        rec.gap_ms = None
    log = tmp_path / "gaps.log"
    log.write_text("\n".join(log_lines(run.records[:90]) + log_lines([aggregate(run.records[90:])])) + "\n")
    code, out, err = inspect([str(log), "--json"], capsys)
    assert code == 0, err
    (g,) = json.loads(out)["groups"]
    code, text, err = inspect([str(log), "--prometheus", "-", "--model-name", "m"], capsys)
    assert code == 0, err
    dash, _ = _exprs()
    targets = {(p["title"], t["legendFormat"]): t["expr"].replace("$model", "m")
               for p in dash["panels"] if "snapshot" in p["title"] for t in p["targets"]}
    tok_s = _evaluate(promtool, text, targets[("Accept length and effective tok/s (snapshot)", "effective tok/s")],
                      tmp_path)
    assert tok_s["{}"] == pytest.approx(g["tok_s"], rel=1e-5)
    mean = _evaluate(promtool, text, targets[("Accept length and effective tok/s (snapshot)", "mean accept length")],
                     tmp_path)
    assert mean["{}"] == pytest.approx(g["accept_len_mean"], rel=1e-5)
    acc = _evaluate(promtool, text, targets[("Per-position acceptance (snapshot)", "position {{position}}")], tmp_path)
    assert acc == pytest.approx({f'{{position="{p["j"]}"}}': p["p"] for p in g["per_position_acceptance"]}, rel=1e-5)
    shares = _evaluate(promtool, text, targets[("Phase shares of the cycle (snapshot)", "{{phase}}")], tmp_path)
    assert shares == pytest.approx({f'{{phase="{PHASE_LABELS[f]}"}}': g["phases"][f]["share"] for f in
                                    ("draft_prep_ms", "draft_ms", "verify_ms", "extend_ms", "other_ms")}, abs=1e-5)
    old = generate(random.Random(6), bs=2, steps=2, cycles=40, p=[0.8, 0.6])   # no draft_prep_ms, no gap_ms
    log.write_text("\n".join(log_lines(old.records)) + "\n")
    code, out, err = inspect([str(log), "--json"], capsys)
    (g,) = json.loads(out)["groups"]
    code, text, err = inspect([str(log), "--prometheus", "-", "--model-name", "m"], capsys)
    assert code == 0 and 'phase="gap"' not in text, err
    tok_s = _evaluate(promtool, text, targets[("Accept length and effective tok/s (snapshot)", "effective tok/s")],
                      tmp_path)
    assert tok_s["{}"] == pytest.approx(g["tok_s"], rel=1e-5)


def test_dashboard_accept_length_over_files_of_different_depths(tmp_path, capsys):
    """promtool over two ``inspect --prometheus`` files of depths 2 and 5 (one textfile folder): the
    snapshot distribution panel gives the pooled requests' cumulative counts, bars that already hold
    every request left out and ``+Inf`` the total, and ``histogram_quantile`` over ``sum by (le)``
    reads the pooled p90. With buckets sized to each file's depth the sum had held le 4..6 of the
    depth-5 file only, falling counts, and a p90 of 6 where the pooled requests give 3.9."""
    promtool = _promtool()
    if promtool is None:
        pytest.skip("promtool is not installed (apt install prometheus; make test fetches it when it can)")
    runs = _depth_2_and_5_runs()
    texts = []
    for steps, run in runs.items():
        texts.append(_offline_text(tmp_path, capsys, steps, run, "--model-name", f"d{steps}"))
    pooled = runs[2].accepts() + runs[5].accepts()
    total = len(pooled)
    cumulative = {k: sum(a <= k for a in pooled) for k in range(1, 7)}
    dash, _ = _exprs()
    (expr,) = [t["expr"].replace("$model", "d2|d5") for p in dash["panels"]
               if p["title"] == "Accept length distribution (snapshot)" for t in p["targets"]]
    bars = _evaluate(promtool, texts[0], expr, tmp_path, more=texts[1:])
    want = {f'{{le="{float(k)!r}"}}': float(c) for k, c in cumulative.items() if c < total}
    assert bars == {**want, '{le="+Inf"}': float(total)}
    assert list(want) == [f'{{le="{float(k)!r}"}}' for k in range(1, 6)]   # le 6 holds everyone: left out
    # p90: rank 0.9 * total inside the first bucket that reaches it, linearly (Prometheus's rule)
    rank = 0.9 * total
    k = min(k for k, c in cumulative.items() if c >= rank)
    below = cumulative.get(k - 1, 0)
    p90 = (k - 1) + (rank - below) / (cumulative[k] - below)
    got = _evaluate(promtool, texts[0], f'histogram_quantile(0.9, sum by (le) ({ACCEPT_LENGTH}_bucket))', tmp_path,
                    more=texts[1:])
    assert got == {"{}": pytest.approx(p90, rel=1e-9)} and 3 < p90 < 4


# ----------------------------------------------------------------------------- the wiring info series
W_LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 32,
           "hidden_size": 4096, "vocab_size": 128256}
W_DSV3 = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "num_hidden_layers": 61,
          "hidden_size": 7168, "vocab_size": 129280}
W_GPT_OSS = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "num_hidden_layers": 36,
             "hidden_size": 2880, "vocab_size": 201088}
W_UNKNOWN = {"architectures": ["FooForCausalLM"], "model_type": "foo", "num_hidden_layers": 40,
             "hidden_size": 4096, "vocab_size": 128256}
W_IDS = [None, [1, 15, 28], [2, 30, 58], [0, 10, 20], ["1", 15, 28], "1,2", [1, 15, 32], [-1, 3, 9], [3, 3, 9]]
W_ENVS = [{}, {"SGLANG_EAGLE_CYCLE_AUX_CONVENTION": "input"}, {"SGLANG_EAGLE_CYCLE_AUX_CONVENTION": "stock"},
          {"SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS": "1,5,9"}]


def test_wiring_line_gives_the_labels_the_server_exports():
    """Offline (parse the start-up line) and live (from the report) give one label set, whatever the wiring."""
    readings, stocks, checked = set(), set(), 0
    for target, ids, env in itertools.product([W_LLAMA, W_DSV3, W_GPT_OSS, W_UNKNOWN], W_IDS, W_ENVS):
        draft = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "num_hidden_layers": 1,
                 "hidden_size": target["hidden_size"], "vocab_size": target["vocab_size"]}
        if ids is not None:
            draft["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": ids}
        report = check_pair(target, draft, env=env)
        line = "[2026-11-30 09:59:00 TP0] " + report.startup_line()
        labels = wiring_info_labels(report)
        assert parse_wiring_line(line) == labels, line
        readings.add(labels["reading"])
        stocks.add(labels["stock_positions"])
        checked += 1
    assert checked == 4 * len(W_IDS) * len(W_ENVS)
    assert {"layer_output", "position", "default", "position (input)", "layer_output (stock)"} <= readings
    assert "unknown" in stocks and "" not in stocks
    assert parse_wiring_line("[TP0] Decode batch, #running-req: 1") is None
    assert parse_wiring_line("EAGLE-3 aux wiring: garbled") is None


def test_offline_export_carries_the_logs_wiring(two_depths, capsys):
    log, _ = two_depths
    code, out, err = inspect([str(log), "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["wiring"] == [{"file": str(log), "ids": "2,30,58", "positions": "3,31,59",
                                          "reading": "layer_output", "stock_positions": "2,30,58"}]
    code, out, err = inspect([str(log), "--prometheus", "-", "--model-name", "kimi"], capsys)
    assert code == 0, err
    s = parse(out)
    assert one(s, WIRING_INFO, ids="2,30,58", positions="3,31,59", reading="layer_output",
               stock_positions="2,30,58", model_name="kimi", tp_rank="0") == 1


# ----------------------------------------------------------------------------- the live export
def test_live_export_through_sglangs_multiprocess_directory(tmp_path):
    """The real hooks, PROMETHEUS_MULTIPROC_DIR set before prometheus_client is imported (as SGLang's
    launcher does), SGLang's runtime context with --enable-metrics; read as /metrics reads it."""
    mp = tmp_path / "prometheus"
    mp.mkdir()
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(mp), "SGLANG_PLUGINS": "none"}
    env.pop("SGLANG_EAGLE_CYCLE_METRICS", None)
    proc = run_python([str(HERE / "metrics_live_probe.py")], env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rep = json.loads(proc.stdout.strip().splitlines()[-1])
    base = {"model_name": "tiny-llama", "engine_type": "unified", "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}
    assert rep["labels"] == base            # SGLang's scheduler labels (no dp_rank: SGLang sets none here)
    assert rep["labels_dp"] == {"model_name": "m", "engine_type": "unified", "tp_rank": "0", "pp_rank": "0",
                                "moe_ep_rank": "0", "dp_rank": "1", "cluster": "a"}
    assert rep["off_by_env"] is None and rep["not_printing_rank"] is None and rep["sglang_metrics_off"] is None
    assert rep["active_without_line_or_jsonl"] is True and rep["faults"] == 0
    assert rep["observed_on"] == ["eagle-cycle-sink"] != [rep["main_thread"]]   # never the scheduler thread
    samples = {}
    for name, labels, value in rep["samples"]:
        samples.setdefault(name, []).append((labels, value))
    for name, series in samples.items():
        for labels, _ in series:
            assert {k: labels[k] for k in base} == base, name
    from cycle_harness import Costs

    accepts = {int(k): v for k, v in rep["accepts"].items()}
    for steps, per_cycle in accepts.items():
        exp = Costs().expected(steps, False)
        n = len(per_cycle)
        lab = dict(phase="verify", steps=str(steps))
        assert one(samples, f"{PHASE_SECONDS}_count", **lab) == n       # one per timed cycle
        assert one(samples, f"{PHASE_SECONDS}_sum", **lab) == pytest.approx(n * exp["verify_ms"] / 1000, rel=1e-6)
        assert one(samples, f"{PHASE_SECONDS}_sum", phase="verify_fwd", steps=str(steps)) == pytest.approx(
            n * exp["verify_fwd_ms"] / 1000, rel=1e-6)
        assert one(samples, f"{PHASE_SECONDS}_count", phase="total", steps=str(steps)) == n
        assert one(samples, CYCLES, steps=str(steps)) == n
        flat = [a for cyc in per_cycle for a in cyc]
        for k in range(1, steps + 2):
            assert one(samples, f"{ACCEPT_LENGTH}_bucket", steps=str(steps), le=f"{float(k)!r}") == sum(
                a <= k for a in flat)
        assert one(samples, f"{ACCEPT_LENGTH}_sum", steps=str(steps)) == sum(flat)
    # per position j (both depths pooled, the counters have no steps label): reached = requests with
    # accept length >= j, accepted = those with >= j + 1, over the depths that reach j
    for j in range(1, max(accepts) + 1):
        flat = [a for steps, per_cycle in accepts.items() if j <= steps for cyc in per_cycle for a in cyc]
        assert one(samples, POSITION_REACHED, position=str(j)) == sum(a >= j for a in flat)
        assert one(samples, POSITION_ACCEPTED, position=str(j)) == sum(a >= j + 1 for a in flat)
    assert one(samples, WIRING_INFO, ids="1,15,28", positions="2,16,29", reading="layer_output",
               stock_positions="2,16,29") == 1


def test_live_and_offline_series_agree(tmp_path, capsys):
    """The same cycles through LiveMetrics (in-process registry) and through inspect --prometheus."""
    from prometheus_client import CollectorRegistry, generate_latest

    rng = random.Random(31)
    run = generate(rng, bs=3, steps=3, cycles=60, p=[0.8, 0.6, 0.4], spans=True)
    lines = log_lines(run.records)
    log = tmp_path / "run.log"
    log.write_text("\n".join(lines) + "\n")
    registry = CollectorRegistry()
    now = [100.0]
    live = LiveMetrics({"model_name": "m", "engine_type": "unified", "tp_rank": "0", "pp_rank": "0",
                        "dp_rank": "0"}, registry=registry, clock=lambda: now[0])
    for ln in lines:
        live.observe(parse_line(ln))
    with pytest.raises(ValueError):
        live.observe(aggregate(run.records[:5]))
    assert live.observed == 60 and live.pending and not live.due
    assert not [x for x in parse(generate_latest(registry).decode()).get(f"{CYCLES}", []) if x[1]]  # not pushed yet
    now[0] += 1.0
    assert live.due and not live.overdue
    now[0] += 4.0
    assert live.overdue
    live.push()
    assert not live.pending and not live.due and live.pushes == 1
    live_s = parse(generate_latest(registry).decode())
    code, out, err = inspect([str(log), "--prometheus", "-", "--model-name", "m"], capsys)
    assert code == 0, err
    off_s = parse(out)
    compared = 0
    for name, series in off_s.items():
        for labels, value in series:
            assert one(live_s, name, **labels) == pytest.approx(value, rel=1e-9, abs=1e-12), (name, labels)
            compared += 1
    assert compared > 100


def test_a_failing_export_leaves_the_line_and_jsonl(tmp_path, caplog):
    import logging

    from sglang_eagle_cycle.sinks import CycleSink, SinkConfig

    class Broken:
        def observe(self, rec):
            raise RuntimeError("mmap gone")

    log = logging.getLogger("sglang_eagle_cycle.test_metrics")
    log.setLevel(logging.INFO)
    sink = CycleSink(SinkConfig(jsonl_path=str(tmp_path / "c.jsonl"), background=False), log=log)
    sink.metrics = Broken()
    recs = generate(random.Random(3), bs=2, steps=2, cycles=4, p=[0.5, 0.5]).records
    with caplog.at_level(logging.INFO, logger=log.name):
        for r in recs:
            sink.submit(r)
        sink.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "mmap gone" in warnings[0] and "export off" in warnings[0]
    assert sink.metrics is None and len((tmp_path / "c.jsonl").read_text().splitlines()) == 4
    assert sum("[eagle-cycle]" in r.getMessage() for r in caplog.records) == 4


def test_a_tree_shallower_than_its_steps_has_no_deeper_position(tmp_path, capsys):
    # steps 3, topk 4, draft_tokens 3: at most 2 drafts accepted. Both writers had counted a
    # position 3 (reached by every request of accept length 3, accepted by none: acceptance 0 on
    # the dashboard) that inspect --json does not have
    from prometheus_client import CollectorRegistry, generate_latest

    from sglang_eagle_cycle.cycle import make_record

    rng = random.Random(5)
    recs = [make_record(cycle=i, config=(4, 3, 4, 3), accepts=[rng.randint(1, 3) for _ in range(4)], graph=True,
                        phases_ms={"draft_ms": 0.8, "verify_ms": 20.0, "verify_fwd_ms": 19.5, "extend_ms": 0.4,
                                   "total_ms": 21.5})
            for i in range(40)]
    log = tmp_path / "tree.log"
    log.write_text("\n".join(log_lines(recs)) + "\n")
    code, out, err = inspect([str(log), "--json"], capsys)
    assert code == 0, err
    pos = json.loads(out)["groups"][0]["per_position_acceptance"]
    assert [p["j"] for p in pos] == [1, 2]
    code, out, err = inspect([str(log), "--prometheus", "-"], capsys)
    assert code == 0, err
    offline = parse(out)
    registry = CollectorRegistry()
    live = LiveMetrics({"model_name": "", "engine_type": "unified", "tp_rank": "0", "pp_rank": "0", "dp_rank": "0"},
                       registry=registry)
    for rec in recs:
        live.observe(rec)
    live.push()
    live_s = parse(generate_latest(registry).decode())
    for s in (offline, live_s):
        assert sorted(int(lab["position"]) for lab, _ in s[POSITION_REACHED]) == [1, 2]
        for p in pos:
            assert one(s, POSITION_REACHED, position=str(p["j"])) == p["reached"]
            assert one(s, POSITION_ACCEPTED, position=str(p["j"])) == p["accepted"]


# ----------------------------------------------------------------------------- --extra-metric-labels
SGLANG_LABELS = {"model_name": "m", "engine_type": "unified", "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0",
                 "cluster": "a", "steps": "prod", "position": "eu-1", "reading": "r", "le": "x"}
KEPT = {k: v for k, v in SGLANG_LABELS.items() if k not in ("steps", "position", "reading", "le")}


def test_extra_metric_labels_named_like_ours_are_left_off_our_series(caplog):
    """--extra-metric-labels keys named as our labels: prometheus_client had refused ``le`` (the export
    was off) and, for the others, kept one of the two values under one name, silently (``steps="prod"``
    on the position counters). Now they are left off our series, with one WARNING naming them."""
    import logging

    from prometheus_client import CollectorRegistry, generate_latest

    from sglang_eagle_cycle import metrics

    getattr(metrics, "_collisions_warned", set()).clear()   # once per process: forget earlier tests
    run = generate(random.Random(41), bs=3, steps=3, cycles=30, p=[0.8, 0.6, 0.4])
    registry = CollectorRegistry()
    with caplog.at_level(logging.WARNING, logger="sglang_eagle_cycle"):
        live = LiveMetrics(SGLANG_LABELS, registry=registry)
        for rec in run.records:
            live.observe(rec)
        live.push()
    s = parse(generate_latest(registry).decode())
    for name, series in s.items():
        for labels, _ in series:
            assert {k: labels.get(k) for k in KEPT} == KEPT, name          # the user's other keys stay
            assert "prod" not in labels.values() and "eu-1" not in labels.values(), (name, labels)
    # our labels keep their meaning, with the right counts
    assert one(s, CYCLES, steps="3") == 30
    assert one(s, f"{PHASE_SECONDS}_count", phase="verify", steps="3") == 30
    accepts = run.accepts()
    for j in (1, 2, 3):
        assert one(s, POSITION_REACHED, position=str(j)) == sum(a >= j for a in accepts)
        assert one(s, POSITION_ACCEPTED, position=str(j)) == sum(a >= j + 1 for a in accepts)
    for k in (1, 2, 3, 4):
        assert one(s, f"{ACCEPT_LENGTH}_bucket", steps="3", le=f"{float(k)!r}") == sum(a <= k for a in accepts)
    assert live.labels == KEPT and live.dropped_labels == {"steps": "prod", "position": "eu-1", "reading": "r",
                                                           "le": "x"}
    # the start-up wiring gauge, same labels: ours ("reading") win there too
    draft = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "num_hidden_layers": 1,
             "hidden_size": 4096, "vocab_size": 128256, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 15, 28]}}
    report = check_pair(W_LLAMA, draft, env={})
    wiring_registry = CollectorRegistry()
    with caplog.at_level(logging.WARNING, logger="sglang_eagle_cycle"):
        metrics.set_wiring_info(SGLANG_LABELS, report, registry=wiring_registry)
        LiveMetrics(SGLANG_LABELS, registry=CollectorRegistry())  # another sink of this process
    w = parse(generate_latest(wiring_registry).decode())
    assert w[WIRING_INFO] == [({**KEPT, **wiring_info_labels(report)}, 1.0)]
    assert wiring_info_labels(report)["reading"] == "layer_output"
    # one WARNING in the process, naming each key and value
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "steps='prod', position='eu-1', reading='r', le='x'" in warnings[0] and "cluster" not in warnings[0]
    # no collision, no warning: SGLang's labels pass unchanged
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="sglang_eagle_cycle"):
        assert metrics.series_base_labels(KEPT) == (KEPT, {})
    assert not caplog.records


def test_the_sink_keeps_its_export_on_with_a_colliding_extra_label(caplog):
    """The server's path: SinkConfig's labels as SGLang's runtime gives them (``le`` had ended the export
    at start with a metrics-init fault)."""
    import logging

    from sglang_eagle_cycle import metrics
    from sglang_eagle_cycle.sinks import CycleSink, SinkConfig

    getattr(metrics, "_collisions_warned", set()).clear()   # once per process: forget earlier tests
    log = logging.getLogger("sglang_eagle_cycle.test_metrics")
    recs = generate(random.Random(43), bs=2, steps=2, cycles=12, p=[0.6, 0.5]).records
    with caplog.at_level(logging.INFO):
        sink = CycleSink(SinkConfig(background=False, metrics_labels=tuple(SGLANG_LABELS.items())),
                         log=log)
        for r in recs:
            sink.submit(r)
        sink.close()
    assert sink.metrics is not None and sink.metrics.observed == 12 and sink.metrics.pushes >= 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "le='x'" in warnings[0] and "export off" not in warnings[0]
    cycles = [s for fam in sink.metrics._cycles.collect() for s in fam.samples if s.name == CYCLES]
    assert [(s.labels, s.value) for s in cycles] == [({**KEPT, "steps": "2"}, 12.0)]


# ----------------------------------------------------------------------------- SGLang's scheduler labels
def _both_label_sets(fields: dict, ranks: Optional[dict] = None) -> tuple[Optional[dict], Optional[dict]]:
    """``(ours, sglang's)`` on a real ``ServerArgs`` published as SGLang publishes it: ours from
    ``sglang_metric_labels``; SGLang's from its own ``SchedulerMetricsCollector.init_new``, called
    as the scheduler calls it (the ``get_schedule()`` priority flag), its collector class swapped
    for one that only keeps the labels (``stat_loggers``, SGLang's own hook for that), and each
    value written through a real ``prometheus_client`` gauge, so it is what ``/metrics`` shows."""
    from prometheus_client import CollectorRegistry, Gauge
    from sglang.srt.observability.metrics_collector import SchedulerMetricsCollector
    from sglang.srt.runtime_context import get_schedule
    from sglang.test.test_utils import published_topology

    from sglang_eagle_cycle.runtime import sglang_metric_labels

    class KeepLabels(SchedulerMetricsCollector):
        def __init__(self, labels, **_):
            self.labels = labels

    with published_topology(ranks=ranks, stat_loggers={"scheduler": KeepLabels}, **fields):
        ours = sglang_metric_labels()
        collector = SchedulerMetricsCollector.init_new(
            server_args=None, enable_priority_scheduling=get_schedule().enable_priority_scheduling,
            enable_lora=False, enable_hierarchical_cache=False).collector
    if collector is None:
        return ours, None
    registry = CollectorRegistry()
    Gauge("probe", "probe", labelnames=list(collector.labels), registry=registry).labels(**collector.labels).set(1)
    [sample] = [s for fam in registry.collect() for s in fam.samples]
    return ours, {k: sample.labels[k] for k in collector.labels}


def test_base_labels_carry_priority_as_sglang_does_under_priority_scheduling():
    """--enable-priority-scheduling: SGLang's scheduler metrics carry ``priority=""`` (after
    ``moe_ep_rank``, before ``dp_rank``; an --extra-metric-labels ``priority`` replaces the value).
    Ours had no ``priority`` key there, so the two label sets differed."""
    base = {"model_name": "m", "engine_type": "unified", "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}
    cases = [
        (dict(enable_priority_scheduling=True, default_priority_value=0), None, {**base, "priority": ""}),
        (dict(enable_priority_scheduling=True, disaggregation_mode="decode", tp_size=2, dp_size=2,
              enable_dp_attention=True, extra_metric_labels={"cluster": "a"}), {"world_rank": 1, "dp_rank": 1},
         {**base, "engine_type": "decode", "tp_rank": "1", "priority": "", "dp_rank": "1", "cluster": "a"}),
        (dict(enable_priority_scheduling=True, enable_pd_role_switch=True, disaggregation_mode="prefill",
              pp_size=2, extra_metric_labels={"cluster": "a", "priority": "gold"}), {"world_rank": 1},
         {**base, "engine_type": "dynamic", "pp_rank": "1", "priority": "gold", "cluster": "a"}),
        (dict(tp_size=2, ep_size=2), {"world_rank": 1}, {**base, "tp_rank": "1", "moe_ep_rank": "1"}),
    ]
    for fields, ranks, want in cases:
        ours, sglangs = _both_label_sets({"enable_metrics": True, "served_model_name": "m", **fields}, ranks)
        assert list(ours.items()) == list(want.items()), fields
        assert list(sglangs.items()) == list(want.items()), fields
    assert _both_label_sets({"enable_priority_scheduling": True}) == (None, None)     # no --enable-metrics


def test_base_label_values_are_written_as_prometheus_client_writes_sglangs():
    """--extra-metric-labels '{"team": null, "shard": 3, "canary": true}' (the flag's JSON parser keeps
    each type): SGLang's series carry team="None", shard="3", canary="True". Ours had team="", which
    Prometheus reads as no label, so one-to-one matching between the two no longer paired them."""
    from prometheus_client import CollectorRegistry, generate_latest
    from sglang.srt.server_args import prepare_server_args

    extra = prepare_server_args(["--model-path", "dummy", "--extra-metric-labels",
                                 '{"team": null, "shard": 3, "canary": true}']).extra_metric_labels
    assert extra == {"team": None, "shard": 3, "canary": True}
    ours, sglangs = _both_label_sets({"enable_metrics": True, "served_model_name": "m", "extra_metric_labels": extra})
    want = {"model_name": "m", "engine_type": "unified", "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0",
            "team": "None", "shard": "3", "canary": "True"}
    assert ours == sglangs == want
    registry = CollectorRegistry()        # and on our series, as /metrics shows them
    live = LiveMetrics(ours, registry=registry)
    for rec in generate(random.Random(47), bs=2, steps=2, cycles=5, p=[0.6, 0.5]).records:
        live.observe(rec)
    live.push()
    assert [lab for lab, _ in parse(generate_latest(registry).decode())[CYCLES]] == [{**want, "steps": "2"}]
