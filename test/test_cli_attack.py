"""Bad input from a hostile or careless user: each one a clear one-line error with exit code 2 and
nothing the user wrote lost, and valid input that had been refused (helper 75)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from cyclegen import generate
from test_cli_edges import call
from sglang_eagle_cycle.cycle import format_line


def one_error_line(err: str, *words: str) -> str:
    """The single line of ``err``, checked to be an error naming every one of ``words``."""
    lines = err.splitlines()
    assert len(lines) == 1 and err.endswith("\n"), err
    assert "error:" in lines[0] and "Traceback" not in err, err
    for w in words:
        assert w in lines[0], (w, err)
    return lines[0]


def cycle_log(path: Path, cycles: int = 40, edit=lambda line: line) -> Path:
    run = generate(random.Random(1), 1, 2, cycles, [0.7, 0.5], spans=True)
    path.write_text("".join(edit(f"[2026-11-30 12:00:01 TP0] {format_line(r)}") + "\n" for r in run.records))
    return path


def test_a_graph_value_longer_than_eight_bytes_is_a_damaged_line_not_a_traceback(tmp_path):
    """The bulk reader compared ``graph`` values past 8 bytes (kept as raw bytes) with digits: a
    TypeError ended ``inspect`` and ``advise`` in a traceback."""
    log = cycle_log(tmp_path / "g.log", edit=lambda ln: ln.replace(" graph=1 ", " graph=99999999999999999999 "))
    assert " graph=99999999999999999999 " in log.read_text()
    for command in ("inspect", "advise"):
        rc, out, err = call(command, log)
        assert rc == 2 and out == "", (command, err)
        one_error_line(err, "g.log", "0 other, 40 damaged lines")
    # one such line among good ones costs that line only
    good = cycle_log(tmp_path / "one.log", edit=lambda ln: ln.replace(" graph=1 ", " graph=123456789 ")
                     if " cycle=7 " in ln else ln)
    rc, out, err = call("inspect", good, "--json")
    doc = json.loads(out)
    assert rc == 0 and err == "" and doc["unparsed_lines"] == 1 and doc["groups"][0]["cycles"] == 39


def test_a_file_name_holding_a_line_feed_keeps_the_error_on_one_line(tmp_path, repo_root):
    """A quoted name with a line feed (or an escape sequence) had split the error over two lines."""
    rc, _, err = call("inspect", tmp_path / "no\nsuch.log")
    assert rc == 2
    one_error_line(err, "no\\nsuch.log: no such file")
    seed = repo_root / "data/benchmarks/seed_kimi_k25.json"
    rc, _, err = call("advise", seed, "--baseline-tok-s", "88.8", "--adaptive-config", tmp_path / "no\ndir" / "a.json")
    assert rc == 2
    one_error_line(err, "--adaptive-config", "no\\ndir", "no directory")
    rc, _, err = call("wiring", "no\x1b[31mt", "d")
    assert rc == 2
    one_error_line(err, "no\\x1b[31mt")
    rc, _, err = call("inspect", cycle_log(tmp_path / "ok.log"), "--x\ny")   # argparse's own message
    assert rc == 2
    one_error_line(err, "unrecognized arguments: --x\\ny")
    rc, _, err = call("sweep", "--url", "http://127.0.0.1:9", "--prompts", tmp_path / "no\np.jsonl",
                      "--output", tmp_path / "o.jsonl")
    assert rc == 2 and not (tmp_path / "o.jsonl").exists()
    one_error_line(err, "no\\np.jsonl")


@pytest.mark.parametrize("command, flag, ext", [
    ("inspect", "--csv", "csv"), ("inspect", "--trace", "json"), ("inspect", "--plot", "png"),
    ("inspect", "--prometheus", "prom"), ("advise", "--adaptive-config", "json"),
    ("advise", "--adaptive-candidates", "json"), ("sweep", "--output", "jsonl"), ("sweep", "--plot", "png"),
])
def test_an_output_option_given_twice_with_two_files_is_refused(tmp_path, repo_root, command, flag, ext):
    """argparse's last-one-wins had written the second file and silently not the first one asked for."""
    first, second = tmp_path / f"first.{ext}", tmp_path / f"second.{ext}"
    given = {"inspect": [cycle_log(tmp_path / "run.log")],
             "advise": [repo_root / "data/benchmarks/seed_kimi_k25.json", "--baseline-tok-s", "88.8"],
             "sweep": ["--url", "http://127.0.0.1:9"]}[command]
    rc, out, err = call(command, *given, flag, first, flag, second)
    assert rc == 2 and out == ""
    one_error_line(err, f"argument {flag}: given twice ({first} and {second})")
    assert not first.exists() and not second.exists()
    if command != "sweep":   # one file named twice is one output: written (the sweep would measure)
        rc, _, err = call(command, *given, flag, first, flag, first)
        assert rc == 0 and "error" not in err and first.stat().st_size > 0 and not second.exists()


def test_make_tiny_pair_force_never_deletes_a_folder_that_holds_no_tiny_pair(tmp_path, monkeypatch):
    """``--force`` replaced OUT/target and OUT/draft whatever they held: a model folder of the user's
    named ``target`` was deleted whole once the training was done."""
    from sglang_eagle_cycle.tiny import pair as tiny_pair

    made = []

    def fake_make_pair(out, spec, *, force=False, log=None, target_from=None):
        made.append(out)   # the real one trains for minutes, then replaces OUT/target and OUT/draft
        return {"arch": spec.arch, "seed": spec.seed}

    monkeypatch.setattr(tiny_pair, "make_pair", fake_make_pair)
    out = tmp_path / "models"
    (out / "target").mkdir(parents=True)
    (out / "target" / "model.safetensors").write_bytes(b"\x00weights of mine")
    rc, stdout, err = call("make-tiny-pair", out, "--force", "--json")
    assert rc == 2 and stdout == "" and made == []
    one_error_line(err, f"{out}: --force would replace target there", "choose another OUT")
    assert (out / "target" / "model.safetensors").read_bytes() == b"\x00weights of mine"
    # a pair.json that is not make-tiny-pair's does not make it a pair either
    (out / "pair.json").write_text('{"name": "my run"}\n')
    rc, _, err = call("make-tiny-pair", out, "--force", "--json")
    assert rc == 2 and made == []
    one_error_line(err, "target, pair.json")
    assert (out / "pair.json").read_text() == '{"name": "my run"}\n'
    # a tiny pair is replaced with --force, as before
    (out / "pair.json").write_text(json.dumps({"arch": "llama", "aux_layer_ids": [1, 3, 5],
                                               "draft_top1_agreement": 0.5}))
    rc, stdout, err = call("make-tiny-pair", out, "--force", "--json")
    assert rc == 0 and made == [out] and json.loads(stdout) == {"arch": "llama", "seed": 11}


def test_a_no_spec_bench_record_without_its_throughput_is_one_line_exit_2(tmp_path):
    """A status-ok baseline record with ``output_tok_s: null`` ended advise in a TypeError."""
    base = {"schema": "eagle-cycle-bench/1", "model": "m", "draft": "d", "topk": 1, "concurrency": 1,
            "status": "ok"}
    recs = [{**base, "steps": 0, "num_draft_tokens": 0, "output_tok_s": None},
            {**base, "steps": 2, "num_draft_tokens": 3, "output_tok_s": 85.1, "accept_len_mean": 1.95,
             "accept_hist": {"1": 14, "2": 14, "3": 12}}]
    bench = tmp_path / "bench.jsonl"
    bench.write_text("".join(json.dumps(r) + "\n" for r in recs))
    rc, out, err = call("advise", bench)
    assert rc == 2 and out == ""
    one_error_line(err, f"{bench}:1.output_tok_s", "no throughput (null)")


def test_advise_reads_a_file_named_dash_given_as_dot_slash_dash(tmp_path, repo_root):
    """``./-`` names a file; advise had read standard input for it (``Path`` drops the ``./``)."""
    cycle_log(tmp_path / "-")
    env_path = str(repo_root / "python")
    proc = subprocess.run([sys.executable, "-m", "sglang_eagle_cycle.cli", "advise", "./-", "--json"],
                          cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": env_path})
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [(r["source"], r["steps"], r["bs"], r["cycles"]) for r in doc["inputs"]["runs"]] == [("./-#0", 2, 1, 40)]


def test_a_log_whose_lines_are_all_damaged_says_how_to_see_why(tmp_path):
    """Fields out of order (a hand-edited or foreign log): "no [eagle-cycle] line" alone, for a file
    full of them, read as the wrong file given; the error now names the option that shows why."""
    def swapped(line: str) -> str:
        head, _, rest = line.partition(" cycle=")
        fields = ("cycle=" + rest).split(" ")
        fields[1], fields[2] = fields[2], fields[1]   # bs and steps
        return f"{head} {' '.join(fields)}"

    log = cycle_log(tmp_path / "swapped.log", edit=swapped)
    assert " steps=2 bs=1 " in log.read_text()
    for command in ("inspect", "advise"):
        rc, _, err = call(command, log)
        assert rc == 2
        one_error_line(err, "swapped.log: no [eagle-cycle], JSONL or Decode batch line (0 other, 40 damaged lines: "
                            f"`eagle-cycle inspect {log} --show-rejected 5` says why)")
    rc, _, err = call("inspect", log, "--show-rejected", "1")
    assert rc == 2 and err.count("\n") == 2
    assert err.startswith(f"eagle-cycle inspect: rejected: {log}:1: not the [eagle-cycle] layout")
