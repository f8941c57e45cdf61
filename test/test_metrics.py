"""``eagle-cycle inspect --prometheus``: the cycle series of a log in the Prometheus text format.

Generated logs (test/cyclegen.py) with known phase times and accept lengths; the file is parsed with
``prometheus_client``'s own parser and compared with ``inspect --json`` (counts exactly, sums to
1e-6 relative) and with the generator's values.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cyclegen import generate, log_lines
from sglang_eagle_cycle import cli
from sglang_eagle_cycle.cycle import aggregate, format_line
from sglang_eagle_cycle.metrics import (ACCEPT_LENGTH, CYCLES, PHASE_BUCKETS_S, PHASE_LABELS, PHASE_SECONDS,
                                        POSITION_ACCEPTED, POSITION_REACHED, rank_labels)


def parse(text: str) -> dict[str, list]:
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


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
    log.write_text("\n".join(["some startup line"] + log_lines(a.records) + log_lines(b.records)) + "\n")
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


def test_aggregated_lines_count_in_sum_and_count_not_in_buckets(tmp_path, capsys):
    rng = random.Random(7)
    run = generate(rng, bs=2, steps=3, cycles=40, p=[0.7, 0.6, 0.5])
    per_cycle, agg = run.records[:10], aggregate(run.records[10:])
    log = tmp_path / "agg.log"
    log.write_text("\n".join(log_lines(per_cycle) + ["[2026-11-30 10:00:01 TP0] " + format_line(agg)]) + "\n")
    prom = tmp_path / "agg.prom"
    code, out, err = inspect([str(log), "--json", "--prometheus", str(prom)], capsys)
    assert code == 0, err
    doc, text = json.loads(out), prom.read_text()
    s = parse(text)
    lab = dict(phase="total", steps="3")
    assert one(s, f"{PHASE_SECONDS}_count", **lab) == 40 == doc["groups"][0]["phases"]["total_ms"]["count"]
    assert one(s, f"{PHASE_SECONDS}_bucket", le="+Inf", **lab) == 10
    assert one(s, f"{PHASE_SECONDS}_sum", **lab) == pytest.approx(
        doc["groups"][0]["phases"]["total_ms"]["sum_ms"] / 1000, rel=1e-6)
    assert "aggregated cycles" in text.splitlines()[0] and text.startswith("# ")


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
                  "baseline"):
        assert words in titles, words
    live = [e for e in exprs if "rate(" in e]
    snapshot = [e for p in dash["panels"] if p["type"] != "row" and "snapshot" in p["title"] for e in
                (t["expr"] for t in p["targets"])]
    assert live and snapshot and not any("rate(" in e for e in snapshot)
    variables = {v["name"] for v in dash["templating"]["list"]}
    used = set(re.findall(r"\$(\w+)", " ".join(exprs))) - {"__rate_interval"}
    assert used <= variables, used - variables


def test_every_dashboard_metric_is_in_the_offline_export(two_depths, capsys):
    log, _ = two_depths
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
