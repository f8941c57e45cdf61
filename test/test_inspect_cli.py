"""`eagle-cycle inspect`: outputs (table, --json, --csv, --plot, --trace), --baseline, overwrite and bad-input rules."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import random
import stat
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from cyclegen import generate, log_lines
from sglang_eagle_cycle import cli, cycle
from sglang_eagle_cycle.report import inspect_paths


def run_cli(capsys, *args) -> tuple[int, str, str]:
    rc = cli.main(["inspect", *map(str, args)])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def runs():
    rng = random.Random(42)
    return [generate(rng, bs=1, steps=3, cycles=40, p=[0.8, 0.6, 0.4], rank="tp0"),
            generate(rng, bs=1, steps=3, cycles=40, p=[0.8, 0.6, 0.4], rank="tp1"),
            generate(rng, bs=4, steps=2, cycles=30, p=[0.7, 0.5], verify_ms=30.0)]


@pytest.fixture()
def log(tmp_path, runs) -> Path:
    tp0, tp1, bs4 = runs
    lines = [ln for pair in zip(log_lines(tp0.records), log_lines(tp1.records, "[2026-11-30 10:00:00 TP1] "))
             for ln in pair]
    lines += log_lines(bs4.records)
    lines.append("[2026-11-30 10:00:09 TP0] Decode batch, #running-req: 4, #token: 999, token usage: 0.01, "
                 "accept len: 2.10, accept rate: 0.55, cuda graph: True, gen throughput (token/s): 150.00, #queue-req: 0")
    path = tmp_path / "server.log"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_json_is_the_api_document(capsys, log):
    rc, out, err = run_cli(capsys, log, "--json")
    assert rc == 0 and err == ""
    assert json.loads(out) == json.loads(json.dumps(inspect_paths([log])))


def test_default_table(capsys, log, runs):
    rc, out, _ = run_cli(capsys, log)
    assert rc == 0
    assert "bs=1 steps=3 topk=1 draft_tokens=4" in out and "bs=4 steps=2 topk=1 draft_tokens=3" in out
    # tp0 and tp1 print the same 40 cycle ids: 40 cycles (was 80), each rank's times kept, their spread shown
    assert f"{len(runs[0].records)} cycles" in out and "spread ms" in out
    for name in ("draft", "verify", "target forward", "draft-extend", "other", "per-position acceptance", "Decode batch"):
        assert name in out
    assert "findings:" in out


def test_table_keeps_the_configuration_whole_under_any_path(capsys, tmp_path, log):
    # the group title used to wrap through "bs=.. steps=.." when the log's path had some lengths
    text = log.read_bytes()
    for n in range(0, 100, 3):
        moved = tmp_path / f"{n:03d}" / ("server" + "-" * n + ".log")
        moved.parent.mkdir()
        moved.write_bytes(text)
        rc, out, _ = run_cli(capsys, moved)
        assert rc == 0
        assert "bs=1 steps=3 topk=1 draft_tokens=4" in out and "bs=4 steps=2 topk=1 draft_tokens=3" in out, n


def test_csv_file_and_stdout(capsys, log, tmp_path):
    doc = inspect_paths([log])
    out_csv = tmp_path / "groups.csv"
    rc, _, _ = run_cli(capsys, log, "--csv", out_csv)
    assert rc == 0
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == len(doc["groups"])
    for row, g in zip(rows, doc["groups"]):
        assert int(row["cycles"]) == g["cycles"]
        assert float(row["total_ms_p99"]) == pytest.approx(g["phases"]["total_ms"]["p99"])
        assert float(row["verify_ms_share"]) == pytest.approx(g["phases"]["verify_ms"]["share"])
        assert [float(x) for x in row["per_position_p"].split()] == pytest.approx(
            [p["p"] for p in g["per_position_acceptance"]])
    rc, out, _ = run_cli(capsys, log, "--csv", "-")
    assert rc == 0 and list(csv.DictReader(io.StringIO(out))) == rows


def test_plot_axes_titles_units_and_one_bar_per_group(capsys, log, tmp_path):
    from sglang_eagle_cycle.plots import render

    doc = inspect_paths([log])
    fig = render(doc)
    ax_phase, ax_hist, ax_pos = fig.axes
    assert len(fig.axes) == 3
    assert ax_phase.get_title().startswith("Cycle time by phase")
    assert ax_hist.get_title() == "Accept length"
    assert ax_pos.get_title() == "Per-position acceptance"
    assert "(ms)" in ax_phase.get_ylabel()
    assert "(tokens" in ax_hist.get_xlabel() and "(%)" in ax_hist.get_ylabel()
    assert "(token)" in ax_pos.get_xlabel() and "(0-1)" in ax_pos.get_ylabel()
    n = len(doc["groups"])
    assert len(ax_phase.get_xticklabels()) == n
    assert ax_phase.containers and all(len(c.patches) == n for c in ax_phase.containers)
    tops = [sum(c.patches[i].get_height() for c in ax_phase.containers) for i in range(n)]
    by_cycles = sorted(doc["groups"], key=lambda g: -g["cycles"])
    assert tops == pytest.approx([g["phases"]["total_ms"]["mean"] for g in by_cycles], abs=0.02)
    assert len(ax_pos.lines) == n
    assert list(ax_pos.lines[0].get_ydata()) == pytest.approx([p["p"] for p in by_cycles[0]["per_position_acceptance"]])

    png = tmp_path / "cycle.png"
    rc, _, err = run_cli(capsys, log, "--plot", png)
    assert rc == 0 and err == ""
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    height, width, _ = matplotlib.image.imread(png).shape
    assert width > 2 * height > 400


def _check_trace_events(doc) -> dict:
    """Trace-event format rules: X slices with µs ts/dur, int pid/tid, metadata names, proper nesting."""
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    names = {}
    slices = defaultdict(list)
    for ev in doc["traceEvents"]:
        assert isinstance(ev["name"], str) and ev["ph"] in ("X", "M")
        assert isinstance(ev["pid"], int) and isinstance(ev["tid"], int)
        if ev["ph"] == "M":
            assert ev["name"] in ("process_name", "thread_name") and isinstance(ev["args"]["name"], str)
            names[(ev["name"], ev["pid"], ev["tid"] if ev["name"] == "thread_name" else 0)] = ev["args"]["name"]
        else:
            assert isinstance(ev["ts"], (int, float)) and isinstance(ev["dur"], (int, float))
            assert ev["ts"] >= 0 and ev["dur"] >= 0
            slices[(ev["pid"], ev["tid"])].append(ev)
    for (pid, tid), evs in slices.items():
        assert ("process_name", pid, 0) in names and ("thread_name", pid, tid) in names
        open_cycle = None
        for ev in evs:
            if ev["name"] == "cycle" or ev["name"].endswith((" cycles (mean)", " cycle (mean)")):
                if open_cycle is not None:
                    assert ev["ts"] >= open_cycle["ts"] + open_cycle["dur"] - 1e-3   # cycles do not overlap
                open_cycle = ev
            else:
                assert open_cycle["ts"] - 1e-3 <= ev["ts"]
                assert ev["ts"] + ev["dur"] <= open_cycle["ts"] + open_cycle["dur"] + 1e-3
                assert ev["args"]["cycle"] == open_cycle["args"]["cycle"]
    return {"names": names, "slices": slices}


def test_trace_one_track_per_rank_one_slice_per_phase(capsys, log, tmp_path, runs):
    out = tmp_path / "cycles.trace.json"
    rc, _, err = run_cli(capsys, log, "--trace", out)
    assert rc == 0 and err == ""
    checked = _check_trace_events(json.loads(out.read_text()))
    threads = {v for (kind, _, _), v in checked["names"].items() if kind == "thread_name"}
    assert threads == {"tp0", "tp1", "stats-logging rank"}
    by_thread = {checked["names"][("thread_name", pid, tid)]: evs for (pid, tid), evs in checked["slices"].items()}
    tp0, _, bs4 = runs
    for label, run in (("tp0", tp0), ("stats-logging rank", bs4)):
        evs = by_thread[label]
        cycles = [e for e in evs if e["name"] == "cycle"]
        assert len(cycles) == len(run.records)
        parsed = [cycle.parse_line(ln) for ln in log_lines(run.records)]
        for ev, rec in zip(cycles, parsed):
            assert ev["dur"] == pytest.approx(rec.total_ms * 1000.0)          # microseconds
            assert ev["args"]["accept_len"] == rec.accept_len
            assert ev["args"]["accepts"] == rec.accepts
        phases = [e for e in evs if e["name"] != "cycle"]
        assert len(phases) == 5 * len(run.records)                          # draft verify verify_fwd extend other
        first = {e["name"]: e for e in phases[:5]}
        assert set(first) == {"draft", "verify", "verify_fwd", "extend", "other"}
        assert first["verify"]["dur"] == pytest.approx(parsed[0].verify_ms * 1000.0)
        assert first["verify"]["args"]["accept_len"] == parsed[0].accept_len


def test_trace_of_device_span_lines_opens_with_draft_prep_and_keeps_the_gap(capsys, tmp_path):
    # helper 40: the trace left draft_prep out (draft at the cycle's start, every phase 5 ms early, a
    # hole at the end) and laid the cycles end to end over their 7.86 ms gap: the host-bound time
    # inspect's own finding names was nowhere in it
    line = ("[2026-11-30 12:00:01 TP0] [eagle-cycle] cycle={c} bs=1 steps=2 topk=1 draft_tokens=3 draft_ms=0.52 "
            "verify_ms=21.40 verify_fwd_ms=20.85 extend_ms=0.41 other_ms=0.51 total_ms=27.84 accept_len=2.00 "
            "accepts=2 tok_s=71.8 graph=1 draft_prep_ms=5.00 gap_ms={g}")
    log = tmp_path / "hb.log"
    log.write_text(line.format(c=1, g="-") + "\n" + line.format(c=2, g="7.86") + "\n")
    out = tmp_path / "hb.trace.json"
    rc, _, err = run_cli(capsys, log, "--trace", out)
    assert rc == 0 and err == ""
    evs = [e for e in _check_trace_events(json.loads(out.read_text()))["slices"][(1, 1)]]
    cycles = [e for e in evs if e["name"] == "cycle"]
    assert [c["ts"] for c in cycles] == pytest.approx([0.0, 27840.0 + 7860.0])
    first = {e["name"]: e for e in evs if e["name"] != "cycle" and e["args"]["cycle"] == 1}
    assert list(first) == ["draft_prep", "draft", "verify", "verify_fwd", "extend", "other"]
    assert (first["draft_prep"]["ts"], first["draft_prep"]["dur"]) == pytest.approx((0.0, 5000.0))
    assert first["draft"]["ts"] == pytest.approx(5000.0) and first["verify"]["ts"] == pytest.approx(5520.0)
    assert first["other"]["ts"] + first["other"]["dur"] == pytest.approx(27840.0, abs=1.0)   # fills the cycle


def test_trace_max_cycles(capsys, log, tmp_path, runs):
    out = tmp_path / "t.json"
    rc, _, err = run_cli(capsys, log, "--trace", out, "--trace-max-cycles", "5")
    assert rc == 0
    n_tracks = 3
    total = sum(len(r.records) for r in runs)
    assert f"{total - 5 * n_tracks} cycle records" in err
    cycles = [e for e in json.loads(out.read_text())["traceEvents"] if e["name"] == "cycle"]
    assert len(cycles) == 5 * n_tracks


def test_outputs_never_overwritten_without_force(capsys, log, tmp_path):
    for flag, name in (("--plot", "p.png"), ("--trace", "t.json"), ("--csv", "c.csv")):
        target = tmp_path / name
        target.write_text("mine")
        rc, out, err = run_cli(capsys, log, flag, target)
        assert rc == 2 and out == ""
        assert err.count("\n") == 1 and "exists" in err and "--force" in err
        assert target.read_text() == "mine"
        rc, _, _ = run_cli(capsys, log, flag, target, "--force")
        assert rc == 0 and target.read_bytes() != b"mine"
    assert not list(tmp_path.glob(".eagle-cycle-*"))   # no temporary files left behind
    rc, _, err = run_cli(capsys, log, "--csv", log, "--force")
    assert rc == 2 and "input" in err
    rc, _, err = run_cli(capsys, log, "--json", "--csv", "-")
    assert rc == 2 and err.count("\n") == 1
    rc, _, err = run_cli(capsys, log, "--plot", tmp_path / "p.xyz")
    assert rc == 2 and "format" in err


def _bad_inputs(tmp_path) -> dict[str, Path]:
    garbage = tmp_path / "garbage.bin"
    rng = random.Random(3)   # (Random(3) per byte gave one byte 2048 times: a text file, not garbage)
    garbage.write_bytes(bytes(rng.randrange(256) for _ in range(2048)) + b"\x00\xff")
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    folder = tmp_path / "logs"
    folder.mkdir()
    return {"binary": garbage, "empty": empty, "no such file": tmp_path / "missing.log", "directory": folder}


def test_bad_inputs_one_line_exit_2(capsys, tmp_path, log):
    bad = _bad_inputs(tmp_path)
    for reason, path in bad.items():
        rc, out, err = run_cli(capsys, path)
        assert rc == 2 and out == "", reason
        assert err.count("\n") == 1 and reason in err and str(path) in err, err
    rc, out, err = run_cli(capsys, *bad.values(), log, "--json")
    assert rc == 0 and json.loads(out)["files"] == [str(log)]
    assert err.count("\n") == len(bad) and "Traceback" not in err


def test_bad_input_in_a_fresh_process_has_no_traceback(tmp_path):
    bad = _bad_inputs(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "sglang_eagle_cycle.cli", "inspect", *map(str, bad.values())],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("eagle-cycle inspect: error: nothing to inspect")
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_baseline_number_and_log(capsys, log, tmp_path):
    doc = inspect_paths([log])
    fast = max(g["tok_s"] for g in doc["groups"]) + 10
    # one number for a log at bs 1 and bs 4 is refused, as advise refuses it: which batch size is it for?
    rc, _, err = run_cli(capsys, log, "--json", "--baseline", f"{fast}")
    assert rc == 2 and "several batch sizes (1, 4)" in err and "BS:TOK_S" in err
    rc, out, _ = run_cli(capsys, log, "--json", "--baseline", f"1:{fast}", "--baseline", f"4:{fast}")
    codes = [f["code"] for f in json.loads(out)["findings"]]
    assert rc == 0 and codes.count("slower_than_baseline") == len(doc["groups"]) + 1   # + the Decode batch line
    rc, out, err = run_cli(capsys, log, "--json", "--baseline", f"4:{fast}")   # bs 1 has no baseline
    slow = [f for f in json.loads(out)["findings"] if f["code"] == "slower_than_baseline"]
    assert rc == 0 and {(f["config"] or {}).get("bs", f["evidence"].get("bs")) for f in slow} == {4}
    assert "warning" not in err
    # a batch size the log never ran at is said, not silently dropped (advise says it too)
    rc, out, err = run_cli(capsys, log, "--json", "--baseline", f"4:{fast}", "--baseline", "8:100")
    assert rc == 0 and "--baseline for bs 8: no cycles at that batch size" in err and err.count("\n") == 1
    for bad in (["--baseline", "0:50"], ["--baseline", "4:x"], ["--baseline", "4:50", "--baseline", "88"]):
        rc, _, err = run_cli(capsys, log, *bad)
        assert rc == 2 and "baseline" in err and err.count("\n") == 1
    nospec = tmp_path / "nospec.log"
    nospec.write_text("[2026-11-30 09:00:00 TP0] Decode batch, #running-req: 4, #token: 90, token usage: 0.00, "
                      f"cuda graph: True, gen throughput (token/s): {fast:.2f}, #queue-req: 0\n")
    rc, out, _ = run_cli(capsys, log, "--json", "--baseline", nospec)
    slow = [f for f in json.loads(out)["findings"] if f["code"] == "slower_than_baseline"]
    assert rc == 0 and {(f["config"] or {}).get("bs", f["evidence"].get("bs")) for f in slow} == {4}
    rc, _, err = run_cli(capsys, log, "--baseline", tmp_path / "none.log")
    assert rc == 2 and "baseline" in err


def test_stdin(capsys, log, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(log.read_bytes())))
    rc, out, _ = run_cli(capsys, "-", "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["files"] == ["<stdin>"]
    assert [g["cycles"] for g in doc["groups"]] == [g["cycles"] for g in inspect_paths([log])["groups"]]


def test_plot_bars_of_device_span_lines_hold_draft_prep(tmp_path):
    # helper 39: the stacked bars left draft_prep_ms out and stopped 0.20 ms short of the cycle
    from sglang_eagle_cycle.cycle import format_line, make_record
    from sglang_eagle_cycle.plots import render

    phases = {"draft_prep_ms": 0.40, "draft_ms": 1.10, "verify_ms": 21.0, "verify_fwd_ms": 20.5,
              "extend_ms": 0.45, "total_ms": 23.45, "gap_ms": 0.2}
    lines = [format_line(make_record(cycle=i, config=(2, 2, 1, 3), phases_ms=phases, accepts=[2, 3], graph=True))
             for i in range(1, 41)]
    log = tmp_path / "spans.log"
    log.write_text("\n".join(lines) + "\n")
    doc = inspect_paths([log])
    fig = render(doc)
    ax = fig.axes[0]
    top = sum(c.patches[0].get_height() for c in ax.containers)
    assert top == pytest.approx(doc["groups"][0]["phases"]["total_ms"]["mean"], abs=0.02)
    assert top == pytest.approx(23.45, abs=0.02)
    assert [c.get_label() for c in ax.containers][0] == "draft prep"
    assert [t.get_text() for t in ax.get_legend().get_texts()][-1] == "draft prep"


def test_plot_phase_legend_sits_beside_its_panel_and_names_measured_phases_only(tmp_path):
    # a new user's plot: the phase legend, three columns inside the one-bar panel, was wider than
    # the panel and covered its y-axis label "30", and it listed draft prep for lines without one
    from sglang_eagle_cycle.plots import render

    rng = random.Random(1)
    one = tmp_path / "one.log"
    one.write_text("\n".join(log_lines(generate(rng, bs=1, steps=3, cycles=200, p=[0.8, 0.6, 0.4],
                                                verify_ms=25.0).records)) + "\n")
    single = tmp_path / "single.log"   # one step: no draft forward either
    single.write_text("\n".join(log_lines(generate(rng, bs=4, steps=1, cycles=50, p=[0.6]).records)) + "\n")
    for log, phases in ((one, ["other", "draft-extend", "verify: rest", "verify: target forward", "draft"]),
                        (single, ["other", "draft-extend", "verify: rest", "verify: target forward"])):
        fig = render(inspect_paths([log]))
        fig.canvas.draw()
        ax = fig.axes[0]
        legend = ax.get_legend()
        assert [t.get_text() for t in legend.get_texts()] == phases   # top to bottom, as the bars stack
        assert [c.get_label() for c in ax.containers] == phases[::-1]
        box = legend.get_window_extent()
        for panel in fig.axes:
            assert not box.overlaps(panel.get_window_extent())
        top = ax.get_ylim()[1]
        labels = [t for t, y in zip(ax.get_yticklabels(), ax.get_yticks()) if y <= top]
        assert [t.get_text() for t in labels][-1] == ("30" if log == one else "20")
        assert not [t.get_text() for t in labels if box.overlaps(t.get_window_extent())]
        assert box.x1 <= fig.bbox.x1 and box.y1 <= fig.bbox.y1   # on the image


@pytest.mark.parametrize("p", [[0.1, 0.1, 0.05], [0.2, 0.15, 0.1], [0.9, 0.85, 0.8], [0.9, 0.5, 0.1]])
def test_per_position_legend_covers_no_point(tmp_path, p):
    # low acceptance (a miswired draft) used to sit under a legend pinned to the lower left
    from sglang_eagle_cycle.plots import render

    rng = random.Random(7)
    recs = [r for bs, steps in ((1, 3), (4, 2), (8, 3)) for r in generate(rng, bs=bs, steps=steps, cycles=300,
                                                                           p=p[:steps]).records]
    log = tmp_path / "low.log"
    log.write_text("\n".join(log_lines(recs)) + "\n")
    fig = render(inspect_paths([log]))
    fig.canvas.draw()
    ax_pos = fig.axes[2]
    assert ax_pos.get_legend() is None and fig.axes[1].get_legend() is None
    box = fig.legends[0].get_window_extent()
    points = [ax_pos.transData.transform(xy) for line in ax_pos.lines for xy in line.get_xydata()]
    assert len(points) == 8
    assert not [xy for xy in points if box.contains(*xy)]
    for ax in fig.axes:   # the group legend sits outside every panel
        assert not box.overlaps(ax.get_window_extent())
    lo, _ = ax_pos.get_ylim()
    assert lo < 0 <= min(y for line in ax_pos.lines for y in line.get_ydata())


def test_plot_and_trace_need_cycle_lines(capsys, shared_data, tmp_path):
    stock = shared_data / "logs" / "decode_batch_variants.log"
    rc, out, err = run_cli(capsys, stock, "--plot", tmp_path / "p.png", "--trace", tmp_path / "t.json")
    assert rc == 1
    assert "p.png not written" in err and "t.json not written" in err
    assert not (tmp_path / "p.png").exists() and not (tmp_path / "t.json").exists()
    assert "Decode batch" in out


def test_outputs_of_stock_lines_alone_exit_and_warn_alike(capsys, shared_data, tmp_path):
    # an image, a trace or a series that could not be made is a failed request (exit 1, a warning);
    # an empty table is an answer (exit 0), but it had come without a word, as if the write had failed
    stock = shared_data / "logs" / "decode_batch_variants.log"
    out_csv = tmp_path / "g.csv"
    rc, out, err = run_cli(capsys, stock, "--csv", out_csv)
    assert rc == 0
    assert err == (f"eagle-cycle inspect: warning: {out_csv}: header only, no rows: no [eagle-cycle] cycles in the "
                   "input (stock Decode batch lines give no cycle rows)\n")
    rows = list(csv.reader(out_csv.open()))
    assert len(rows) == 1 and rows[0][:6] == ["file", "bs", "steps", "topk", "draft_tokens", "cycles"]
    rc, out, err = run_cli(capsys, stock, "--csv", "-")
    assert rc == 0 and out.splitlines() == [",".join(rows[0])]
    assert err.startswith("eagle-cycle inspect: warning: --csv -: header only, no rows")
    # --json beside a plot that was not drawn: the document whole, exit 1 for the plot
    rc, out, err = run_cli(capsys, stock, "--json", "--plot", tmp_path / "x.png", "--csv", out_csv, "--force")
    assert rc == 1 and json.loads(out)["decode_batch"]["intervals"] == 14 and json.loads(out)["groups"] == []
    assert err.count("warning:") == 2 and "x.png not written" in err and "g.csv: header only" in err
    assert not (tmp_path / "x.png").exists()


def test_trace_of_aggregated_lines(capsys, tmp_path, runs):
    agg = cycle.Aggregator(every=8)
    recs = [a for r in runs[2].records for a in agg.add(r)] + agg.flush()
    log = tmp_path / "agg.log"
    log.write_text("\n".join(log_lines(recs)) + "\n")
    out = tmp_path / "agg.trace.json"
    rc, _, _ = run_cli(capsys, log, "--trace", out)
    checked = _check_trace_events(json.loads(out.read_text()))
    (evs,) = checked["slices"].values()
    slices = [e for e in evs if e["args"].get("n")]
    parsed = [cycle.parse_line(ln) for ln in log_lines(recs)]
    assert rc == 0 and [e["name"] for e in slices] == [f"{r.n} cycle{'' if r.n == 1 else 's'} (mean)" for r in parsed]
    assert [e["dur"] for e in slices] == pytest.approx([r.n * r.total_ms * 1000.0 for r in parsed])
    # a window of one cycle (the partial one a server flushes when it goes idle) is named in the singular
    one = cycle.Aggregator(every=8)
    log.write_text("\n".join(log_lines([a for a in one.add(runs[2].records[0])] + one.flush())) + "\n")
    rc, _, _ = run_cli(capsys, log, "--trace", out, "--force")
    names = [e["name"] for e in json.loads(out.read_text())["traceEvents"] if e.get("ph") == "X" and "mean" in e["name"]]
    assert rc == 0 and names == ["1 cycle (mean)"]


def test_plot_keeps_the_groups_with_most_cycles(tmp_path):
    from sglang_eagle_cycle.plots import MAX_GROUPS, render

    rng = random.Random(8)
    lines = []
    for bs in range(1, MAX_GROUPS + 4):
        lines += log_lines(generate(rng, bs=bs, steps=2, cycles=bs + 2, p=[0.6, 0.5]).records)
    log = tmp_path / "many.log"
    log.write_text("\n".join(lines) + "\n")
    fig = render(inspect_paths([log]))
    ax_phase = fig.axes[0]
    assert len(ax_phase.get_xticklabels()) == MAX_GROUPS
    assert f"{MAX_GROUPS} of {MAX_GROUPS + 3} groups" in ax_phase.get_title()
    assert "bs=1 " not in " ".join(t.get_text() for t in ax_phase.get_xticklabels())   # the fewest cycles


# --- defects 10-16 -------------------------------------------------------------------------------


def _one_error_line(rc, out, err, *words):
    assert rc == 2 and out == "", err
    assert err.count("\n") == 1 and err.startswith("eagle-cycle inspect: error: ") and "Traceback" not in err
    for w in words:
        assert w in err, err


def test_dangling_symlink_output_is_refused_and_kept(capsys, log, tmp_path):
    link = tmp_path / "out.csv"
    link.symlink_to(tmp_path / "elsewhere.csv")
    for extra in ((), ("--force",)):
        _one_error_line(*run_cli(capsys, log, "--csv", link, *extra), "dangling symlink", str(link))
        assert link.is_symlink() and not (tmp_path / "elsewhere.csv").exists()


def test_force_never_replaces_a_device_or_fifo_nor_drops_a_trailing_slash(capsys, log, tmp_path):
    # --force wrote a temporary file and renamed it over the path: `--csv /dev/null --force` as root
    # turned /dev/null into a regular file; a FIFO became one too; "x.csv/" wrote (or replaced) x.csv
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    _one_error_line(*run_cli(capsys, log, "--csv", fifo, "--force"), "not a regular file", str(fifo))
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    mine = tmp_path / "mine.csv"
    mine.write_text("mine")
    for given in (mine, tmp_path / "new.csv"):
        _one_error_line(*run_cli(capsys, log, "--trace", f"{given}/", "--force"), "ends with a slash")
    assert mine.read_text() == "mine" and not (tmp_path / "new.csv").exists()


def test_a_name_ending_with_slash_dot_is_refused_as_a_slash_is(capsys, log, tmp_path):
    # Path("x.csv/.") is Path("x.csv"): "--csv x.csv/." wrote x.csv, and with --force replaced it
    mine = tmp_path / "mine.csv"
    mine.write_text("mine")
    for given in (f"{mine}/.", f"{tmp_path / 'new.csv'}/.", f"{mine}/.."):
        _one_error_line(*run_cli(capsys, log, "--csv", given, "--force"), "a directory's name", given)
    assert mine.read_text() == "mine" and not (tmp_path / "new.csv").exists()
    from sglang_eagle_cycle.errors import UsageError
    from sglang_eagle_cycle.logfiles import check_output

    with pytest.raises(UsageError, match="ends with /."):   # advise's --adaptive-config goes through it too
        check_output(f"{mine}/.", "--adaptive-config", True)


def test_force_through_a_symlink_writes_its_target_and_keeps_the_link(capsys, log, tmp_path):
    target = tmp_path / "real.csv"
    target.write_text("mine")
    target.chmod(0o640)
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    _one_error_line(*run_cli(capsys, log, "--csv", link), "exists", "--force")
    assert target.read_text() == "mine"
    rc, _, err = run_cli(capsys, log, "--csv", link, "--force")
    assert rc == 0 and err == ""
    assert link.is_symlink() and os.readlink(link) == str(target)
    rows = list(csv.DictReader(target.open()))
    assert [int(r["cycles"]) for r in rows] == [g["cycles"] for g in inspect_paths([log])["groups"]]
    assert stat.S_IMODE(target.stat().st_mode) == 0o640   # the replaced file's mode is kept
    # a symlink to an input log is the input log
    alias = tmp_path / "alias.log"
    alias.symlink_to(log)
    _one_error_line(*run_cli(capsys, log, "--csv", alias, "--force"), "is one of the inputs")


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_new_output_files_follow_the_umask(capsys, log, tmp_path, umask):
    old = os.umask(umask)
    try:
        rc, _, _ = run_cli(capsys, log, "--csv", tmp_path / "g.csv", "--plot", tmp_path / "p.svg",
                           "--trace", tmp_path / "t.json")
    finally:
        os.umask(old)
    assert rc == 0
    for name in ("g.csv", "p.svg", "t.json"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o666 & ~umask, name


def test_same_file_twice_is_read_once_with_a_warning(capsys, log, tmp_path):
    alias = tmp_path / "alias.log"
    alias.symlink_to(log)
    once = inspect_paths([log])
    rc, out, err = run_cli(capsys, log, log, alias, "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["files"] == [str(log)]
    assert [g["cycles"] for g in doc["groups"]] == [g["cycles"] for g in once["groups"]]
    assert doc["decode_batch"]["decode_lines_seen"] == once["decode_batch"]["decode_lines_seen"] == 1
    assert err.splitlines() == [f"eagle-cycle inspect: warning: {log}: given twice; read once",
                                f"eagle-cycle inspect: warning: {alias}: same file as {log}; read once"]


def test_stdin_given_twice_is_refused(capsys, log, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(log.read_bytes())))
    _one_error_line(*run_cli(capsys, "-", "--baseline", "-"), "stdin", "baseline")
    _one_error_line(*run_cli(capsys, "-", log, "-"), "stdin", "more than once")
    assert sys.stdin.buffer.tell() == 0   # refused before anything was read


def test_truncated_gzip_with_nothing_decodable_says_truncated(capsys, log, tmp_path):
    data = gzip.compress(log.read_bytes())
    for cut in (12, 200):   # inside the header / inside the first block
        gz = tmp_path / f"cut{cut}.log.gz"
        gz.write_bytes(data[:cut])
        _one_error_line(*run_cli(capsys, gz), str(gz), "truncated gzip")
    part = tmp_path / "part.log.gz"
    part.write_bytes(data[: len(data) // 2])
    rc, out, err = run_cli(capsys, part, "--json")
    assert rc == 0 and 0 < sum(g["cycles"] for g in json.loads(out)["groups"]) < 110
    assert err.count("\n") == 1 and "truncated gzip" in err and "stopped early" in err


def test_baseline_empty_and_negative_numbers(capsys, log):
    _one_error_line(*run_cli(capsys, log, "--baseline", ""), "baseline is empty")
    _one_error_line(*run_cli(capsys, log, "--baseline", "  "), "baseline is empty")
    for value, shown in (("-inf", "-inf"), ("-5", "-5.0"), ("-1e3", "-1000.0"), ("nan", "nan"), ("1e400", "inf")):
        _one_error_line(*run_cli(capsys, log, "--baseline", value), "positive tok/s", f"got {shown}")
    _one_error_line(*run_cli(capsys, log, "--csv", ""), "--csv", "empty")


def test_decode_batch_table_keeps_the_file_name_whole_at_80_columns(shared_data):
    from rich.console import Console

    from sglang_eagle_cycle.report_table import render_table

    name = "decode_batch_variants.log"
    buf = io.StringIO()
    render_table(inspect_paths([shared_data / "logs" / name]), Console(file=buf, width=80, highlight=False))
    text = buf.getvalue()
    assert max(map(len, text.splitlines())) <= 80
    row = next(ln for ln in text.splitlines() if name in ln)   # on one line, not folded
    assert row.split("│")[2].strip() == "15"                    # decode lines seen, next column


def test_json_stays_strict_json_on_impossible_decode_values(capsys, tmp_path):
    good = ("[2026-11-30 10:00:0{i} TP0] Decode batch, #running-req: 1, #token: 99, token usage: 0.01, "
            "accept len: 2.10, accept rate: 0.55, cuda graph: True, gen throughput (token/s): 80.00, #queue-req: 0")
    bad = [good.replace("accept len: 2.10", "accept len: nan"), good.replace("80.00", "inf"),
           good.replace("80.00", "-5.00"), good.replace("accept rate: 0.55", "accept rate: -2.52"),
           good.replace("#running-req: 1", "#running-req: -1"),
           good.replace("80.00", "9" * 400)]
    log = tmp_path / "decode.log"
    log.write_text("\n".join([good.format(i=0)] + [b.format(i=i + 1) for i, b in enumerate(bad)]) + "\n")
    rc, out, _ = run_cli(capsys, log, "--json")

    def refuse(token):
        raise AssertionError(f"{token} in --json output")

    doc = json.loads(out, parse_constant=refuse)
    assert rc == 0 and doc["unparsed_lines"] == len(bad)
    db = doc["decode_batch"]
    assert (db["intervals"], db["accept_len_mean"], db["accept_rate_mean"], db["gen_tok_s_mean"]) == (1, 2.1, 0.55, 80.0)


def test_accept_rate_above_one_is_a_real_interval(capsys, tmp_path):
    # adaptive depth: SGLang 0.5.23 divides by the launch depth's draft tokens while a deeper one runs
    line = ("[2026-11-30 10:00:00 TP0] Decode batch, #running-req: 1, #token: 1834, token usage: 0.01, "
            "accept len: 6.60, accept rate: 1.12, cuda graph: True, gen throughput (token/s): 171.30, #queue-req: 0")
    log = tmp_path / "adaptive.log"
    log.write_text(line + "\n")
    rc, out, _ = run_cli(capsys, log, "--json")
    db = json.loads(out)["decode_batch"]
    assert (rc, db["intervals"], db["accept_rate_mean"], db["accept_len_mean"]) == (0, 1, 1.12, 6.6)


def test_cut_jsonl_record_counts_as_damaged_like_a_cut_line(capsys, tmp_path, runs):
    recs = runs[2].records[:5]
    full = [cycle.to_json(r) for r in recs]
    for cut in (12, len(full[-1]) // 2, len(full[-1]) - 1):      # before and after "total_ms"
        path = tmp_path / f"cut{cut}.jsonl"
        path.write_text("\n".join(full[:-1] + [full[-1][:cut]]) + "\n")
        rc, out, _ = run_cli(capsys, path, "--json")
        doc = json.loads(out)
        assert (rc, doc["unparsed_lines"], doc["other_lines"], doc["groups"][0]["cycles"]) == (0, 1, 0, 4), cut


def test_pgf_plot_is_refused_up_front(capsys, log, tmp_path):
    # matplotlib writes .pgf only through LaTeX: it was a RuntimeError traceback after the whole read
    rc, _, err = run_cli(capsys, log, "--plot", tmp_path / "p.pgf")
    assert rc == 2 and err.strip().splitlines() == [
        f"eagle-cycle inspect: error: --plot {tmp_path / 'p.pgf'}: .pgf needs a LaTeX install; use .png, .svg or .pdf"]
    assert not (tmp_path / "p.pgf").exists()


def test_log_after_copytruncate_nul_padding_is_read(capsys, tmp_path, runs):
    # logrotate copytruncate: the server writes on at its old offset, the hole reads as NULs; the whole
    # log was refused as "binary data"
    lines = log_lines(runs[2].records)
    for pad in (1, 5000, 300_000):
        path = tmp_path / f"pad{pad}.log"
        path.write_bytes(b"\x00" * pad + ("\n".join(lines) + "\n").encode())
        rc, out, err = run_cli(capsys, path, "--json")
        assert rc == 0, err
        assert json.loads(out)["groups"][0]["cycles"] == len(lines)
    only = tmp_path / "only-nul.log"
    only.write_bytes(b"\x00" * 20000)
    rc, _, err = run_cli(capsys, only)
    assert rc == 2 and "empty file" in err


def test_twelve_groups_get_twelve_colours(tmp_path):
    from matplotlib.colors import to_hex

    from sglang_eagle_cycle.plots import MAX_GROUPS, group_colours, render

    assert MAX_GROUPS >= 12
    for n in (1, 10, 12, 20, 25):
        assert len({to_hex(c) for c in group_colours(n)}) == n
    rng = random.Random(9)
    lines = []
    for bs in range(1, 13):
        lines += log_lines(generate(rng, bs=bs, steps=2, cycles=20, p=[0.6, 0.5]).records)
    log = tmp_path / "twelve.log"
    log.write_text("\n".join(lines) + "\n")
    fig = render(inspect_paths([log]))
    assert len({to_hex(line.get_color()) for line in fig.axes[2].lines}) == 12


def _stock_line(i: int, bs: int, tok_s: float, accept: float = None) -> str:
    spec = f"accept len: {accept:.2f}, accept rate: {(accept - 1) / 3:.2f}, " if accept else ""
    return (f"[2026-11-30 10:{i // 60 % 60:02d}:{i % 60:02d} TP0] Decode batch, #running-req: {bs}, #token: {900 * bs}, "
            f"token usage: 0.04, {spec}cuda graph: True, gen throughput (token/s): {tok_s:.2f}, #queue-req: 0")


def test_stock_lines_are_shown_per_batch_size_without_the_intervals_that_held_idle_time(capsys, tmp_path):
    """A serving log ramps through bs 1-24 (an interval each) before its plateau at 32; the pooled
    mean (1,374 tok/s here) is no batch size's. The first line after a pause counts the pause (a
    public report's 0.39 tok/s): taken in proportion to its time it had made a 100 tok/s bs-1 run
    read 2.6."""
    rng = random.Random(4)
    lines = [_stock_line(0, 1, 0.39, 2.2)] + [_stock_line(1 + k, 1, 100.0 * rng.uniform(0.98, 1.02), 2.2)
                                               for k in range(9)]
    lines += [_stock_line(10 + k, bs, 55.0 * bs, 2.3) for k, bs in enumerate((2, 4, 8, 16, 24))]
    lines += [_stock_line(15 + k, 32, 1400.0 * rng.uniform(0.98, 1.02), 2.5) for k in range(40)]
    lines += [_stock_line(55 + k, 32, 1100.0) for k in range(5)]        # a no-spec server, after a pause
    lines += [_stock_line(60, 32, 2.0)]
    log = tmp_path / "serving.log"
    log.write_text("\n".join(lines) + "\n")
    rc, out, _ = run_cli(capsys, log, "--json")
    db = json.loads(out)["decode_batch"]
    rows = {(r["bs"], r["speculative"]): r for r in db["by_bs"]}
    assert rc == 0 and sorted(rows) == [(1, True), (2, True), (4, True), (8, True), (16, True), (24, True),
                                        (32, False), (32, True)]
    assert rows[(1, True)]["intervals"] == 9 and rows[(1, True)]["gen_tok_s"] == pytest.approx(100.0, rel=0.01)
    assert rows[(32, True)]["intervals"] == 40 and rows[(32, True)]["gen_tok_s"] == pytest.approx(1400.0, rel=0.01)
    assert rows[(32, False)] == {"bs": 32, "speculative": False, "intervals": 5, "accept_len_mean": None,
                                 "gen_tok_s": 1100.0}
    assert db["intervals_idle"] == 2
    rc, out, _ = run_cli(capsys, log)
    flat = " ".join(out.split())
    assert "Stock Decode batch lines by batch size" in flat and "2 intervals that held idle time" in flat
    # one batch size: the rows still show where an idle interval was left out of them
    one = tmp_path / "one.log"
    one.write_text("\n".join(lines[:10]) + "\n")
    rc, out, _ = run_cli(capsys, one)
    assert rc == 0 and "1 interval that held idle time" in " ".join(out.split())


def test_the_baseline_finding_reads_the_throughput_the_table_shows(capsys, tmp_path):
    """``slower_than_baseline`` on stock lines compares the baseline with the by_bs row's figure (the
    intervals' throughput together, each weighed by its time), not a plain mean over the intervals:
    a run alternating 150 and 60 tok/s intervals (equal accept lengths) makes 85.7 tok/s over its
    time but 105 as a plain mean, so a 104 tok/s baseline is beaten (helper 36: the table said
    100.3 at bs 1 and the finding stayed silent, and it named 1291.0 at bs 8 beside a row of 1326.0)."""
    lines = [_stock_line(k, 1, 150.0 if k % 2 else 60.0, 2.2) for k in range(20)]
    lines += [_stock_line(20 + k, 8, 900.0 if k % 2 else 700.0, 2.4) for k in range(20)]
    log = tmp_path / "alternating.log"
    log.write_text("\n".join(lines) + "\n")
    rc, out, _ = run_cli(capsys, log, "--json", "--baseline", "1:104", "--baseline", "8:785")
    doc = json.loads(out)
    rows = {r["bs"]: r["gen_tok_s"] for r in doc["decode_batch"]["by_bs"]}
    assert rc == 0 and rows[1] == pytest.approx(1 / (0.5 / 150 + 0.5 / 60), rel=1e-4)     # 85.7 tok/s
    assert rows[8] == pytest.approx(1 / (0.5 / 900 + 0.5 / 700), rel=1e-4)                 # 787.5 tok/s
    slow = {f["evidence"]["bs"]: f["evidence"]["gen_tok_s_mean"] for f in doc["findings"]
            if f["code"] == "slower_than_baseline"}
    assert slow == {1: pytest.approx(rows[1])}     # bs 8's 787.5 beats 785 (its plain mean 800 too)
    rc, out, _ = run_cli(capsys, log, "--json", "--baseline", "1:104", "--baseline", "8:790")
    slow = {f["evidence"]["bs"]: f["evidence"]["gen_tok_s_mean"] for f in json.loads(out)["findings"]
            if f["code"] == "slower_than_baseline"}
    assert slow == {1: pytest.approx(rows[1]), 8: pytest.approx(rows[8])}   # 787.5 < 790, though the plain mean is 800


def test_a_wandering_stock_load_is_one_plateau_and_steady_or_rising_loads_are_not():
    """Stock lines name the batch size at their interval's last decode batch: a load wandering
    over 28-32 switches label line to line (one plateau, pooled at its mean); a sweep at 10 then 12
    requests, or a load rising slowly over 1-64, switches once per pair (each its own)."""
    from sglang_eagle_cycle.decode_batch import plateaus

    rng = random.Random(1)
    wander = [rng.randint(28, 32) for _ in range(100)]
    assert set(plateaus(wander, {b: wander.count(b) for b in set(wander)}).values()) == {30}
    assert plateaus([10] * 30 + [12] * 30, {10: 30, 12: 30}) == {10: 10, 12: 12}
    rise = [b for b in range(1, 65) for _ in range(5)]
    assert plateaus(rise, {b: 5 for b in range(1, 65)}) == {b: b for b in range(1, 65)}
    # two plateaus, morning and evening, each wandering
    day = [rng.choice([7, 8, 9]) for _ in range(60)] + [rng.choice([46, 48, 50]) for _ in range(60)]
    pooled = plateaus(day, {b: day.count(b) for b in set(day)})
    assert {pooled[7], pooled[8], pooled[9]} == {8} and {pooled[46], pooled[48], pooled[50]} == {48}
    # a plateau wandering 28/32 beside a steady 30 it seldom switched from: two runs, not one at 30
    # (each plateau is pooled as one of its own members; helper 33)
    assert plateaus([30] * 10 + [28, 32] * 10, {28: 10, 30: 10, 32: 10}) == {28: 28, 32: 28, 30: 30}
    # a load rising slowly from 8 to 48 with jitter switches between every pair of neighbours: the
    # plateaus stay a quarter wide at most (the chain had joined 8-37 as one, helper 34)
    slow = [max(8, min(48, 8 + i // 50 + rng.randint(-2, 2))) for i in range(2000)]
    pooled = plateaus(slow, {b: slow.count(b) for b in set(slow)})
    for t in set(pooled.values()):
        members = [b for b, g in pooled.items() if g == t]
        assert max(members) <= max(1.25 * min(members), min(members) + 2), members


def test_stock_intervals_at_zero_throughput_are_idle_however_many():
    """A throughput of 0 is all idle; where such intervals were half a batch size's or more, the
    median time was infinite and every interval passed (helper 33)."""
    import numpy as np

    from sglang_eagle_cycle.decode_batch import DecodeBatchStats, _busy, parse_decode_batch
    from sglang_eagle_cycle.report import decode_findings

    assert _busy(np.ones(10), np.array([0.0] * 6 + [100.0] * 4)).tolist() == [False] * 6 + [True] * 4
    stats = DecodeBatchStats()
    for line in [_stock_line(i, 4, 0.0 if i < 6 else 100.0) for i in range(10)]:
        stats.add(parse_decode_batch(line))
    assert stats.plain_by_bs() == {4: (100.0, 4)} and stats.plain_idle_intervals() == 6
    # the spread is the kept intervals' (helper 34: idle ones already left out had made a steady
    # baseline "read low"); with 4 kept, too few to judge
    assert [f for f in decode_findings("x.log", stats, None) if f["code"] == "stock_throughput_spread"] == []


def test_a_stock_throughput_that_swings_twofold_is_a_finding(capsys, tmp_path):
    """A client that pauses between requests leaves idle time in some intervals (helper 30: a
    bursty no-spec baseline read 210-239 tok/s against a true 1,434, with "findings: none"). A
    steady server's intervals at one batch size differ by a few percent."""
    rng = random.Random(3)
    steady = [_stock_line(i, 16, 1400.0 * rng.uniform(0.97, 1.03)) for i in range(40)]
    bursty = [_stock_line(i, 16, 1400.0 / rng.uniform(1.0, 4.0)) for i in range(40)]
    for name, lines, expect in (("steady", steady, []), ("bursty", bursty, ["stock_throughput_spread"])):
        log = tmp_path / f"{name}.log"
        log.write_text("\n".join(lines) + "\n")
        rc, out, _ = run_cli(capsys, log, "--json")
        found = [f for f in json.loads(out)["findings"] if f["code"] == "stock_throughput_spread"]
        assert rc == 0 and [f["code"] for f in found] == expect, found
    ev = found[0]["evidence"]
    assert ev["bs"] == 16 and ev["speculative"] is False and ev["intervals"] == 40
    assert ev["gen_tok_s_p90"] > 2.0 * ev["gen_tok_s_p10"]


def test_the_spread_finding_judges_kept_intervals_by_their_step_rate(capsys, tmp_path):
    """A steady server at bs 1 whose requests accept 1.2-3.3 tokens a cycle swings 2.6x in gen
    throughput, and idle intervals already left out swing it more: neither is a client that pauses
    (helper 34). The rate of decode steps over the kept intervals is what a pause lowers."""
    rng = random.Random(8)
    accepts = [rng.uniform(1.2, 3.3) for _ in range(40)]
    mixed = [_stock_line(i, 1, 80.0 * a, a) for i, a in enumerate(accepts)]      # 80 steps/s throughout
    idle = [_stock_line(i, 8, 0.0 if i % 10 == 0 else (75.0 if i % 10 == 5 else 750.0)) for i in range(40)]
    paused = [_stock_line(i, 8, 750.0 / rng.uniform(1.0, 4.0)) for i in range(40)]
    for name, lines, fires in (("mixed", mixed, False), ("idle", idle, False), ("paused", paused, True)):
        log = tmp_path / f"{name}.log"
        log.write_text("\n".join(lines) + "\n")
        rc, out, _ = run_cli(capsys, log, "--json")
        doc = json.loads(out)
        codes = [f["code"] for f in doc["findings"]]
        assert rc == 0 and ("stock_throughput_spread" in codes) is fires, (name, codes)
    # zero-throughput speculative intervals are idle ones, counted as such (not "outside 0.01-1e8")
    zero = tmp_path / "zero.log"
    zero.write_text("\n".join(_stock_line(i, 4, 0.0 if i < 3 else 400.0, 2.2) for i in range(12)) + "\n")
    rc, out, _ = run_cli(capsys, zero, "--json")
    assert json.loads(out)["decode_batch"]["intervals_idle"] == 3


@pytest.mark.parametrize("wrap", [
    lambda i, line: f"2026-11-30T10:00:{i % 60:02d}.123456789Z {line}",                 # docker/kubectl --timestamps
    lambda i, line: f"[pod/sglang-7d9f8c6b5-x2kq9/sglang] {line}",                        # kubectl --prefix
    lambda i, line: f"Nov 30 10:00:{i % 60:02d} gpu-node-3 python[4242]: {line}",         # journald / syslog
    lambda i, line: f"2026-11-30T10:00:{i % 60:02d}.123Z stdout F {line}",                 # containerd (CRI)
])
def test_stock_lines_of_every_tp_rank_count_once_behind_a_collector_prefix(capsys, tmp_path, wrap):
    """Each TP rank prints the same interval; the rank is read from SGLang's own ``[date TPn]`` prefix
    wherever it sits in the line. Behind a collector's prefix the repeats had counted as intervals
    (helper 43: a TP-8 log read 640 intervals for 80, and a kubectl log's accept length moved)."""
    rng = random.Random(8)
    lines = []
    for i in range(30):
        line = _stock_line(i, 1, 100.0 * rng.uniform(0.9, 1.1), rng.uniform(1.8, 2.6))
        lines += [line.replace(" TP0]", f" TP{r}]") for r in range(4)]
    plain, wrapped = tmp_path / "plain.log", tmp_path / "wrapped.log"
    plain.write_text("\n".join(lines) + "\n")
    wrapped.write_text("\n".join(wrap(i, line) for i, line in enumerate(lines)) + "\n")
    docs = []
    for log in (plain, wrapped):
        rc, out, _ = run_cli(capsys, log, "--json")
        assert rc == 0
        docs.append(json.loads(out)["decode_batch"])
    assert [r["intervals"] for r in docs[0]["by_bs"]] == [30]
    assert docs[1]["by_bs"] == docs[0]["by_bs"]


def test_stock_intervals_with_no_running_request_are_idle_and_in_no_mean(capsys, tmp_path):
    """An idle data-parallel rank (or a server between requests) prints intervals with
    ``#running-req: 0``: they had pulled the headline accept length from 2.38 to 1.69 and the
    throughput from 109.7 to 54.9 tok/s, and a log of them alone was called a broken draft (helper 43)."""
    rng = random.Random(12)
    busy = [_stock_line(i, 1, 110.0 * rng.uniform(0.95, 1.05), rng.uniform(2.2, 2.6)) for i in range(30)]
    idle = [f"[2026-11-30 10:00:{i:02d} DP1 TP1] Decode batch, #running-req: 0, #token: 0, token usage: 0.00, "
            "accept len: 1.00, accept rate: 0.00, cuda graph: True, gen throughput (token/s): 0.00, #queue-req: 0"
            for i in range(30)]
    docs = []
    for name, lines in (("busy.log", busy), ("both.log", [x for pair in zip(busy, idle) for x in pair])):
        log = tmp_path / name
        log.write_text("\n".join(lines) + "\n")
        rc, out, _ = run_cli(capsys, log, "--json")
        docs.append(json.loads(out)["decode_batch"])
    keys = ("accept_len_mean", "gen_tok_s_mean", "by_bs")
    assert [docs[1][k] for k in keys] == [docs[0][k] for k in keys]
    assert (docs[1]["intervals"], docs[1]["intervals_idle"] - docs[0]["intervals_idle"]) == (60, 30)
    only = tmp_path / "idle.log"
    only.write_text("\n".join(idle[:4]) + "\n")
    rc, out, _ = run_cli(capsys, only, "--json")
    assert rc == 0 and not [f for f in json.loads(out)["findings"] if f["code"] == "accept_len_stuck_at_1"]


def test_of_two_stock_intervals_the_idle_one_is_told_by_the_other(capsys, tmp_path):
    """A log's first two lines, 0.39 tok/s (the pause before the first request) and 178.86: the
    median of two is their mean, so 5 times it held both, and advise read a 0.74 tok/s run (helper
    43); against the low median the idle one is left out."""
    log = tmp_path / "short.log"
    log.write_text("\n".join([_stock_line(0, 1, 0.39, 2.2), _stock_line(1, 1, 178.86, 2.3)]) + "\n")
    rc, out, _ = run_cli(capsys, log, "--json")
    db = json.loads(out)["decode_batch"]
    assert db["by_bs"] == [{"bs": 1, "speculative": True, "intervals": 1, "accept_len_mean": 2.3,
                            "gen_tok_s": 178.86}] and db["intervals_idle"] == 1


def test_several_baselines_after_one_flag_get_a_hint(capsys, tmp_path):
    """advise takes `--baseline-tok-s 1:125 8:1000`; inspect's --baseline (which also takes a log)
    is given once per value, and the same form had failed with a bare "unrecognized arguments"
    (helper 44)."""
    log = tmp_path / "x.log"
    log.write_text(_stock_line(0, 1, 100.0, 2.2) + "\n")
    with pytest.raises(SystemExit) as exc:
        cli.main(["inspect", str(log), "--baseline", "1:125", "8:1000"])
    assert exc.value.code == 2
    assert capsys.readouterr().err == ("eagle-cycle: error: unrecognized arguments: 8:1000 (inspect takes --baseline "
                                       "once per value: --baseline 8:1000 --baseline ...)\n")


def test_prometheus_of_every_ranks_lines_warns_that_its_phase_sums_count_each_rank(capsys, log, tmp_path):
    """tp0 and tp1 print the same 40 cycles: the phase histograms hold 80 lines' times and the cycle
    counter 40, so a dashboard's rate over the phase sums reads half (helper 48: 8x low at TP 8)."""
    out = tmp_path / "m.prom"
    rc, _, err = run_cli(capsys, log, "--prometheus", str(out))
    assert rc == 0 and out.exists()
    assert ("1 group holds every rank's line of each cycle (80 lines for 40 cycles): its phase histograms count "
            "each rank's times") in " ".join(err.split())
    one = tmp_path / "one.log"     # one rank's lines: no warning
    one.write_text("\n".join(ln for ln in log.read_text().splitlines() if "TP1]" not in ln) + "\n")
    rc, _, err = run_cli(capsys, one, "--prometheus", str(tmp_path / "one.prom"))
    assert rc == 0 and "every rank's line" not in err


def _nospec_line(bs: int, tok_s: float, second: int) -> str:
    return (f"[2026-11-30 10:00:{second:02d} TP0] Decode batch, #running-req: {bs}, #token: 999, token usage: 0.01, "
            f"cuda graph: True, gen throughput (token/s): {tok_s:.2f}, #queue-req: 0")


def test_stock_by_bs_caption_says_no_spec_rates_pool_as_tokens_over_seconds(tmp_path, capsys):
    """The caption of the stock by-batch-size table: no-spec intervals are pooled as tokens over
    seconds (the harmonic mean of the rates), as speculative ones; it had said "their mean" (helper 55)."""
    # no-spec intervals at two batch sizes (the by-bs table shows with several); bs 1 at 100 and 300
    rates = [100.0, 300.0, 100.0, 300.0]
    lines = [_nospec_line(1, r, i) for i, r in enumerate(rates)] + [_nospec_line(2, 200.0, 10), _nospec_line(2, 200.0, 11)]
    log = tmp_path / "nospec.log"
    log.write_text("\n".join(lines) + "\n")
    rc = cli.main(["inspect", str(log)])
    out = " ".join(capsys.readouterr().out.split())
    assert rc == 0
    harmonic = len(rates) / sum(1 / r for r in rates)   # 150.0, not the plain mean 200.0
    assert f"{harmonic:.1f}" in out
    assert "no-spec ones their mean" not in out
    assert "no-spec ones likewise" in out


# --- helper 61: outputs under hostile file names -------------------------------------------------


def test_plot_draws_file_names_with_dollar_signs_as_written(capsys, tmp_path, runs):
    # matplotlib reads the text between two "$" as math: "cost$x^$.log" ended --plot in a traceback
    # (a mathtext parse error), and a name that did parse was drawn as a formula
    from sglang_eagle_cycle.plots import render

    text = "\n".join(log_lines(runs[2].records)) + "\n"
    logs = [tmp_path / "cost$x^$.log", tmp_path / "b_$\\frac{$.log"]
    for p in logs:
        p.write_text(text)
    png = tmp_path / "cmp.png"
    rc, _, err = run_cli(capsys, *logs, "--plot", png)
    assert rc == 0 and "Traceback" not in err, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fig = render(inspect_paths(logs))
    fig.canvas.draw()
    shown = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert [s.splitlines()[0] for s in shown] == ["cost\\$x^\\$.log", "b_\\$\\frac{\\$.log"]


def test_a_file_name_that_is_no_utf8_is_written_as_escapes(capsys, tmp_path, runs):
    # such a name (bytes a shell or an old tool left) ended --csv FILE and --plot in a traceback
    # (UnicodeEncodeError; the font renderer's TypeError)
    text = "\n".join(log_lines(runs[2].records)) + "\n"
    bad = tmp_path / os.fsdecode(b"bad\xffname.log")
    bad.write_text(text)
    other = tmp_path / "other.log"
    other.write_text(text)
    out_csv, png = tmp_path / "g.csv", tmp_path / "g.png"
    rc, _, err = run_cli(capsys, bad, other, "--csv", out_csv, "--plot", png)
    assert rc == 0 and "Traceback" not in err, err
    rows = list(csv.DictReader(out_csv.open(encoding="utf-8")))
    assert rows[0]["file"].endswith("bad\\xffname.log") and rows[1]["file"].endswith("other.log")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rc, out, err = run_cli(capsys, bad)   # the table, on a terminal whose encoding is strict UTF-8
    assert rc == 0 and "bad\\xffname.log" in out, err


@pytest.mark.parametrize("backend", ["nonsense", "TkAgg"])
def test_plot_needs_no_display_and_no_valid_mplbackend(tmp_path, runs, backend):
    # the plot draws on the Agg canvas: an MPLBACKEND matplotlib refuses had ended --plot in a
    # traceback (ValueError at matplotlib's import), in a fresh process as a user runs it
    log = tmp_path / "server.log"
    log.write_text("\n".join(log_lines(runs[2].records)) + "\n")
    png = tmp_path / "out.png"
    env = {k: v for k, v in os.environ.items() if k != "DISPLAY"}
    env.update(MPLBACKEND=backend, PYTHONPATH=str(Path(cli.__file__).resolve().parents[1]))
    proc = subprocess.run([sys.executable, "-m", "sglang_eagle_cycle.cli", "inspect", str(log), "--plot", str(png)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_tells_apart_runs_of_one_file_name_and_the_two_timing_kinds(tmp_path):
    # two runs' logs are often both server.log, in folders of their own; and one log may hold a
    # configuration's older and device-span lines (two groups). Each pair of bars and legend
    # entries had carried one label
    from sglang_eagle_cycle.plots import render

    rng = random.Random(12)
    logs = []
    for run in ("run1", "run2"):
        (tmp_path / run).mkdir()
        logs.append(tmp_path / run / "server.log")
        logs[-1].write_text("\n".join(log_lines(generate(rng, bs=2, steps=2, cycles=20, p=[0.7, 0.5]).records)) + "\n")
    mixed = tmp_path / "mixed.log"
    mixed.write_text("\n".join(log_lines(generate(rng, bs=2, steps=2, cycles=20, p=[0.7, 0.5], spans=True).records)
                               + log_lines(generate(rng, bs=2, steps=2, cycles=10, p=[0.7, 0.5]).records)) + "\n")
    for inputs, heads in ((logs, {"run1/server.log", "run2/server.log"}), ([mixed], None)):
        fig = render(inspect_paths(inputs))
        shown = [t.get_text() for t in fig.axes[0].get_xticklabels()]
        assert len(set(shown)) == len(shown) == 2, shown
        legend = [t.get_text() for t in fig.legends[0].get_texts()]
        assert len(set(legend)) == 2, legend
        if heads:
            assert {s.splitlines()[0] for s in shown} == heads
        else:
            assert sorted(s.splitlines()[-1] for s in shown) == ["device spans", "older lines"]


def test_the_draft_tokens_stock_lines_pin_are_shown(capsys, tmp_path):
    """SGLang 0.5.23 prints accept rate = (accept len - 1) / (num_draft_tokens - 1): where one value
    alone fits every interval, inspect gives it per file (JSON ``num_draft_tokens_inferred``, and a
    caption under the stock table), as advise uses it for a log without its start-up line."""
    rng = random.Random(5)
    lines = []
    for i in range(20):
        r = rng.uniform(0.15, 0.45)
        acc = 1 + 4 * r   # 4 steps, chain: num_draft_tokens 5
        lines.append(f"[2026-12-06 10:00:{i:02d} TP0] Decode batch, #running-req: 2, #token: {500 + 20 * i}, "
                     f"token usage: 0.01, accept len: {acc:.2f}, accept rate: {r:.2f}, cuda graph: True, "
                     f"gen throughput (token/s): {150 * acc:.2f}, #queue-req: 0")
    four = tmp_path / "four.log"
    four.write_text("\n".join(lines) + "\n")
    mixed = tmp_path / "mixed.log"   # another server's intervals at 2 steps appended: no one value
    mixed.write_text(four.read_text() + "\n".join(
        ln.replace(f"accept len: {1 + 4 * r:.2f}", f"accept len: {1 + 2 * r:.2f}")
        for ln, r in zip(lines, [float(ln.split("accept rate: ")[1].split(",")[0]) for ln in lines])) + "\n")
    code, out, _ = run_cli(capsys, "inspect", str(four), str(mixed), "--json")
    per_file = json.loads(out)["decode_batch"]["per_file"]
    assert code == 0 and per_file[str(four)]["num_draft_tokens_inferred"] == 5
    assert per_file[str(mixed)]["num_draft_tokens_inferred"] is None
    code, out, _ = run_cli(capsys, "inspect", str(four))
    assert "num_draft_tokens from accept len and accept rate" in " ".join(out.split())
    assert "5 in four.log" in " ".join(out.split())


def test_a_range_reaching_past_64_draft_steps_pins_no_num_draft_tokens(tmp_path):
    """Lines of a tree of num_draft_tokens 66 whose ranges meet at 63.96-69.6 (num_draft_tokens - 1):
    of 1-64 only 64 fits, and num_draft_tokens 65 had been inferred; 65-69 fit as well, so none is."""
    from sglang_eagle_cycle.decode_batch import DecodeBatchStats, parse_decode_batch

    st = DecodeBatchStats()
    for i, (acc, rate) in enumerate([(1.64, 0.64 / 65), (2.30, 1.3 / 65), (5.16, 4.16 / 65), (9.0, 8 / 65)]):
        st.add(parse_decode_batch(f"[2026-12-06 10:00:0{i} TP0] Decode batch, #running-req: 1, #token: 10, "
                                  f"token usage: 0.01, accept len: {acc:.2f}, accept rate: {rate:.2f}, "
                                  f"cuda graph: True, gen throughput (token/s): 90.00, #queue-req: 0"))
    assert st.inferred_draft_tokens(64) is None
    assert st.inferred_draft_tokens(70) is None       # 65-69 fit


def test_the_draft_tokens_caption_names_files_as_the_rows_do(capsys, tmp_path):
    """Two logs of one base name (run1/server.log at 4 steps, run2/server.log at 2): the rows name them by
    their paths, and the caption under the table had said "5 in server.log, 3 in server.log"."""
    rng = random.Random(7)
    for run, steps in (("run1", 4), ("run2", 2)):
        (tmp_path / run).mkdir()
        lines = []
        for i in range(20):
            r = rng.uniform(0.15, 0.45)
            acc = 1 + steps * r
            lines.append(f"[2026-12-06 10:00:{i:02d} TP0] Decode batch, #running-req: 2, #token: {500 + 20 * i}, "
                         f"token usage: 0.01, accept len: {acc:.2f}, accept rate: {r:.2f}, cuda graph: True, "
                         f"gen throughput (token/s): {150 * acc:.2f}, #queue-req: 0")
        (tmp_path / run / "server.log").write_text("\n".join(lines) + "\n")
    one, two = tmp_path / "run1" / "server.log", tmp_path / "run2" / "server.log"
    code, out, _ = run_cli(capsys, "inspect", str(one), str(two))
    flat = "".join(out.split())
    assert code == 0 and f"5in{one}" in flat and f"3in{two}" in flat, out
