"""Edges a new user's review of the CLI found: outputs left behind by a refused run, a verdict lost
to a closed pipe, inputs that never end, and messages that named the wrong thing."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_eagle_cycle import cli

SEED = "data/benchmarks/seed_kimi_k25.json"
EMBEDDING_CASE = "data/configs/03-kimi-k25-embedding-minus1-four-ids"


def call(*argv):
    """``(rc, stdout, stderr)`` of ``eagle-cycle ARGV`` in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = cli.main([str(a) for a in argv])
        except SystemExit as exc:  # argparse's own errors
            rc = exc.code
    return rc, out.getvalue(), err.getvalue()


def test_a_refused_output_leaves_no_other_output_behind(tmp_path, repo_root):
    keep = tmp_path / "keep.json"
    keep.write_text("mine\n")
    new = tmp_path / "new.json"
    rc, _, err = call("advise", repo_root / SEED, "--baseline-tok-s", "88.8",
                      "--adaptive-config", new, "--adaptive-candidates", keep)
    assert rc == 2 and "--adaptive-candidates" in err and "file exists" in err
    assert not new.exists() and keep.read_text() == "mine\n"
    # with both paths free, both are written
    cand = tmp_path / "cand.json"
    rc, _, _ = call("advise", repo_root / SEED, "--baseline-tok-s", "88.8",
                    "--adaptive-config", new, "--adaptive-candidates", cand)
    assert rc == 0 and json.loads(new.read_text()) and json.loads(cand.read_text())
    # a second output in a missing folder, or the first one named another way, is refused before any write
    first = tmp_path / "first.json"
    for second, says in ((tmp_path / "nodir" / "c.json", "no directory"),
                         (tmp_path / "." / "first.json", "name the same file")):
        for force in ([], ["--force"]):
            rc, _, err = call("advise", repo_root / SEED, "--baseline-tok-s", "88.8", *force,
                              "--adaptive-config", first, "--adaptive-candidates", second)
            assert rc == 2 and says in err and not first.exists(), (second, force, err)


class _ClosedPipe(io.StringIO):
    """A stdout whose reader has gone (``| head -1`` after its line)."""

    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self):
        raise BrokenPipeError(32, "Broken pipe")


def test_wiring_keeps_its_verdict_when_the_reader_closes_the_pipe(repo_root, monkeypatch):
    case = repo_root / EMBEDDING_CASE
    monkeypatch.setattr("sys.stdout", _ClosedPipe())
    assert cli.main(["wiring", str(case / "target"), str(case / "draft")]) == 1     # id -1: an error
    monkeypatch.setattr("sys.stdout", _ClosedPipe())
    good = repo_root / "data/configs/01-kimi-k25-ids-2-30-58-layer-output"
    assert cli.main(["wiring", str(good / "target"), str(good / "draft")]) == 0


def test_wiring_json_is_strict_json_when_a_declared_id_is_nan(tmp_path, repo_root):
    case = repo_root / "data/configs/01-kimi-k25-ids-2-30-58-layer-output"
    draft = tmp_path / "draft"
    shutil.copytree(case / "draft", draft)
    cfg = json.loads((draft / "config.json").read_text())
    cfg["eagle_config"] = {**cfg.get("eagle_config", {}), "eagle_aux_hidden_state_layer_ids": [2, 30, float("nan")]}
    (draft / "config.json").write_text(json.dumps(cfg))          # Python writes NaN; its reader takes it back
    rc, out, _ = call("wiring", case / "target", draft, "--json")

    def no_constants(name):
        raise AssertionError(f"not strict JSON: {name}")

    doc = json.loads(out, parse_constant=no_constants)
    assert rc == 1 and doc["ids"] == [2, 30, "nan"]
    assert [p["code"] for p in doc["problems"] if p["level"] == "error"] == ["non_integer_ids"]
    for ids, shown in ((float("nan"), "nan"), ([[2, float("inf")], 30], [[2, "inf"], 30])):
        cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = ids
        (draft / "config.json").write_text(json.dumps(cfg))
        rc, out, _ = call("wiring", case / "target", draft, "--json")
        assert json.loads(out, parse_constant=no_constants)["ids"] == shown and rc in (1, 2)


def _cycle_log(path: Path) -> Path:
    import random

    from cyclegen import generate, log_lines

    run = generate(random.Random(3), bs=1, steps=3, cycles=40, p=[0.8, 0.7, 0.6])
    path.write_text("\n".join(log_lines(run.records)) + "\n")
    return path


def test_inspect_reads_baselines_as_advise_does(tmp_path):
    log = _cycle_log(tmp_path / "server.log")
    rc, _, err = call("inspect", log, "--baseline", "1:80", "--baseline", "1:95")
    assert rc == 2 and err.strip() == "eagle-cycle inspect: error: --baseline given twice for bs 1 (80 and 95)"
    for value in ("1e308", "1:1e9", "0.001"):
        rc, _, err = call("inspect", log, "--baseline", value)
        assert rc == 2 and "is not a throughput" in err and len(err.strip().splitlines()) == 1
    assert call("inspect", log, "--baseline", "1:80")[0] == 0
    for value in ("1_0:80", "1:8_0", "\uff11:80", "8_0"):       # what int() and float() would have read
        rc, _, err = call("inspect", log, "--baseline", value)
        assert rc == 2 and len(err.strip().splitlines()) == 1, (value, err)
    # the BS:TOK_S forms advise takes or refuses, inspect takes or refuses in its words (it had read
    # "+1:88", "-1:88" and "1_0:100" as log paths: "no such file"; helper 37)
    for value, says in (("-1:88", "expected a batch size >= 1 before the colon, got '-1:88'"),
                        ("1_0:100", "expected TOK_S or BS:TOK_S, got '1_0:100'")):
        rc, _, err = call("inspect", log, "--baseline", value)
        assert rc == 2 and err.strip() == f"eagle-cycle inspect: error: --baseline: {says}"
    assert call("inspect", log, "--baseline", "+1:88")[0] == 0
    # a file that exists is a log whatever its name (helper 38: "1:nospec.log" was refused as a bad
    # BS:TOK_S), and it is an input: --force never writes an output over it ("ns:copy.log" was)
    nospec = tmp_path / "1:nospec.log"
    nospec.write_text("".join(f"[2026-11-30 09:00:0{i} TP0] Decode batch, #running-req: 1, #token: 90, token usage: "
                              f"0.00, cuda graph: True, gen throughput (token/s): 88.00, #queue-req: 0\n" for i in range(3)))
    assert call("inspect", log, "--baseline", str(nospec))[0] == 0
    before = nospec.read_bytes()
    rc, _, err = call("inspect", log, "--baseline", str(nospec), "--csv", str(nospec), "--force")
    assert rc == 2 and "is one of the inputs (--baseline)" in err and nospec.read_bytes() == before
    rc, _, err = call("advise", log, "--batch-sizes", "1_6")
    assert rc == 2 and "expected an integer in 1..65536, got '1_6'" in err


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
@pytest.mark.parametrize("argv", [["inspect", "/dev/zero"], ["advise", "/dev/zero"],
                                  ["advise", "--table", "/dev/zero", "--model", "m", "--benchmark", "b"]])
def test_a_device_is_refused_not_read_forever(argv):
    rc, _, err = call(*argv)
    assert rc == 2 and "/dev/zero: a device" in err and len(err.strip().splitlines()) == 1


def test_stdin_errors_name_stdin_not_the_spool_file(repo_root):
    text = (repo_root / SEED).read_text()[:500]
    proc = subprocess.run([sys.executable, "-m", "sglang_eagle_cycle.cli", "advise", "-"], input=text,
                          capture_output=True, text=True, cwd=repo_root, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("eagle-cycle advise: error: <stdin>: invalid JSON")
    assert len(proc.stderr.strip().splitlines()) == 1
    # an empty stdin, or one without a line advise reads, is <stdin> too (it had been "-: empty file")
    for text in ("", "garbage\n"):
        proc = subprocess.run([sys.executable, "-m", "sglang_eagle_cycle.cli", "advise", "-", "--baseline-tok-s", "80"],
                              input=text, capture_output=True, text=True, cwd=repo_root, timeout=120)
        assert proc.returncode == 2 and proc.stderr.startswith("eagle-cycle advise: error: nothing to advise on: "
                                                               "<stdin>: "), proc.stderr


def test_tree_drafting_runs_alone_are_named_whatever_the_baseline(tmp_path):
    bench = tmp_path / "bench.jsonl"
    bench.write_text(json.dumps({"schema": "eagle-cycle-bench/1", "model": "m", "draft": "d", "steps": 3, "topk": 2,
                                 "num_draft_tokens": 8, "concurrency": 1, "status": "ok", "output_tok_s": 95.0,
                                 "accept_len_mean": 2.4, "cycle": None}) + "\n")
    for extra in ([], ["--baseline-tok-s", "88.8"]):
        rc, _, err = call("advise", bench, *extra)
        assert rc == 2 and "no chain-drafting (topk 1) run" in err, err


def test_a_negative_expert_count_is_refused(tmp_path, repo_root):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"num_hidden_layers": 61, "hidden_size": 7168, "n_routed_experts": -5,
                               "num_experts_per_tok": 8}))
    rc, _, err = call("advise", repo_root / SEED, "--baseline-tok-s", "88.8", "--target-config", cfg)
    assert rc == 2 and err.strip() == "eagle-cycle advise: error: target config: n_routed_experts=-5 is negative"


@pytest.mark.parametrize("argv, says", [
    (["--baseline-tok-s", "-inf"], "expected a positive finite throughput, got '-inf'"),
    (["--baseline-tok-s", "-1:88"], "expected a batch size >= 1 before the colon, got '-1:88'"),
    (["--fit", "-3,1,4"], "expected STEPS,TOPK,TOKENS (positive ints), got '-3,1,4'"),
    (["--steps-candidates", "-1"], "expected an integer in 0..64, got -1"),
])
def test_a_negative_value_reaches_its_check(repo_root, argv, says):
    """argparse took ``-1:88`` for an option and said "expected at least one argument"."""
    rc, _, err = call("advise", repo_root / SEED, *argv)
    assert rc == 2 and err.strip().endswith(says) and len(err.strip().splitlines()) == 1


def test_a_terminated_advise_leaves_no_spool_behind(tmp_path, repo_root):
    """``timeout 30 eagle-cycle advise <(endless)`` used to leave its spool (the pipe's copy, which
    had grown to 11 GB on /dev/zero) in the temp folder: SIGTERM now ends the command as an exit."""
    import signal
    import threading
    import time

    fifo = tmp_path / "endless.log"
    os.mkfifo(fifo)
    spool_root = tmp_path / "tmp"
    spool_root.mkdir()
    stop = threading.Event()

    def writer():
        try:
            with open(fifo, "w") as fh:
                while not stop.is_set():
                    fh.write("[2026-12-04 10:00:00] an unrelated log line\n")
                    fh.flush()
                    time.sleep(0.01)
        except OSError:   # the reader is gone
            pass

    proc = subprocess.Popen([sys.executable, "-m", "sglang_eagle_cycle.cli", "advise", str(fifo)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=repo_root,
                            env={**os.environ, "TMPDIR": str(spool_root)})
    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not list(spool_root.glob("eagle-cycle-advise-*")) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert list(spool_root.glob("eagle-cycle-advise-*")), "advise never started its spool"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        stop.set()
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    assert proc.returncode == 128 + signal.SIGTERM
    assert list(spool_root.iterdir()) == []


def test_a_pipe_copy_hands_each_read_back_before_the_next():
    """The spool copy of a pipe returns to Python after every system read, which is where a SIGTERM
    is acted on. With ``shutil.copyfileobj`` the buffered reader waited in C for 64 KiB: 10 bytes on
    a pipe that stays open never reached the copy, and a SIGTERM that landed between two reads
    waited as long (the test above timed out after 60 s under load)."""
    import io
    import threading

    from sglang_eagle_cycle.commands.advise_cmd import _copy_stream

    class Seen(io.BytesIO):
        def __init__(self):
            super().__init__()
            self.first = threading.Event()

        def write(self, b):
            n = super().write(b)
            self.first.set()
            return n

    r, w = os.pipe()
    src, dst = open(r, "rb"), Seen()
    copier = threading.Thread(target=_copy_stream, args=(src, dst), daemon=True)
    copier.start()
    try:
        os.write(w, b"0123456789")
        assert dst.first.wait(10), "10 bytes read from the pipe never reached the copy"
        assert dst.getvalue() == b"0123456789"
        os.write(w, b"more")
    finally:
        os.close(w)
    copier.join(10)
    assert not copier.is_alive() and dst.getvalue() == b"0123456789more"


def test_table_from_stdin_and_a_seed_wrapper_without_a_document_say_what_they_are(tmp_path):
    # --table is a file: '-' used to be looked up as a file named '-' ("-: no such file")
    rc, _, err = call("advise", "--table", "-", "--model", "m", "--benchmark", "b")
    assert rc == 2 and "--table reads a file, not stdin" in err
    # a seed wrapper whose inspect_json is not a document used to be called a published table
    wrapped = tmp_path / "wrapped.json"
    for inner in ([], {}, "x"):
        wrapped.write_text(json.dumps({"inputs": {"inspect_json": inner, "baseline_no_spec_tok_s": 88.8}}))
        rc, _, err = call("advise", wrapped, "--baseline-tok-s", "88.8")
        assert rc == 2 and "not an eagle-cycle inspect --json document" in err, (inner, err)
        assert "published table" not in err and (inner == {} or "inputs.inspect_json" in err)


@pytest.mark.parametrize("case", ["input", "directory", "exists", "no_parent", "dangling"])
def test_inspect_and_advise_refuse_an_output_in_the_same_words(tmp_path, repo_root, case):
    """One check (``logfiles.check_output``) for every output file of both commands: the refusal reads
    ``FLAG PATH: why`` in each, and nothing is written."""
    log = tmp_path / "run.log"
    log.write_text((repo_root / "data" / "logs" / sorted(os.listdir(repo_root / "data" / "logs"))[0]).read_text())
    out = {"input": log, "directory": tmp_path, "exists": tmp_path / "old.json",
           "no_parent": tmp_path / "nodir" / "x.json", "dangling": tmp_path / "link.json"}[case]
    if case == "exists":
        out.write_text("mine\n")
    if case == "dangling":
        out.symlink_to(tmp_path / "elsewhere" / "x.json")
    why = {"input": "is one of the inputs", "directory": "is a directory",
           "exists": "file exists, not overwritten (use --force)", "no_parent": "no directory",
           "dangling": "a dangling symlink"}[case]
    seed = tmp_path / "seed.json"
    seed.write_text((repo_root / SEED).read_text())
    for argv, flag, target in ((["inspect", log, "--trace"], "--trace", out),
                               (["advise", seed, "--baseline-tok-s", "88.8", "--adaptive-config"], "--adaptive-config",
                                seed if case == "input" else out)):
        rc, stdout, err = call(*argv, target)
        assert rc == 2 and err.count("\n") == 1 and f"error: {flag} {target}: {why}" in err, (argv, err)
    if case == "exists":
        assert out.read_text() == "mine\n"
    assert not (tmp_path / "nodir").exists() and not (tmp_path / "elsewhere").exists()


def test_inspect_names_a_sweeps_bench_jsonl_and_the_command_that_reads_it(tmp_path, repo_root):
    bench = tmp_path / "sweep.jsonl"
    bench.write_text(json.dumps({"schema": "eagle-cycle-bench/1", "model": "m", "steps": 0, "concurrency": 1,
                                 "status": "ok", "output_tok_s": 88.0}) + "\n")
    rc, out, err = call("inspect", bench)
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert err == (f"eagle-cycle inspect: error: nothing to inspect: {bench}: eagle-cycle bench JSONL (a sweep's "
                   f"records), not a server log: read it with `eagle-cycle advise {bench}`\n")
    log = repo_root / "data" / "logs" / "decode_batch_variants.log"
    rc, out, err = call("inspect", bench, log)
    assert rc in (0, 1) and f"{bench}: skipped: eagle-cycle bench JSONL" in err and "read it with `eagle-cycle advise" in err
    # an ordinary log with nothing in it gets no such hint
    plain = tmp_path / "plain.log"
    plain.write_text("nothing here\n")
    rc, _, err = call("inspect", plain)
    assert rc == 2 and "bench JSONL" not in err


@pytest.mark.parametrize("flag", ["--plot", "--trace"])
def test_inspect_refuses_stdout_for_a_plot_or_a_trace(tmp_path, repo_root, flag):
    """`--csv -` and `--prometheus -` write to stdout; `--plot -` and `--trace -` used to write a file
    named '-' in the current directory."""
    log = repo_root / "data" / "logs" / "decode_batch_variants.log"
    rc, out, err = call("inspect", log, flag, "-")
    assert rc == 2 and out == "" and f"{flag} -: writes a file, not stdout" in err and err.count("\n") == 1
    assert not os.path.exists("-")


def test_an_input_on_standard_input_is_never_written_over(tmp_path, repo_root):
    """``advise - ... --adaptive-config FILE --force < FILE`` replaced the bench file with the config,
    and ``inspect - --trace FILE --force < FILE`` the log with the trace: the output check compared
    the outputs with the named inputs only, never with the file behind standard input."""
    seed = tmp_path / "seed.json"
    seed.write_text((repo_root / SEED).read_text())
    log = tmp_path / "run.log"
    log.write_text((repo_root / "data" / "logs" / sorted(os.listdir(repo_root / "data" / "logs"))[0]).read_text())
    cases = ((["advise", "-", "--baseline-tok-s", "88.8", "--adaptive-config"], "--adaptive-config", seed),
             (["inspect", "-", "--trace"], "--trace", log))
    for argv, flag, victim in cases:
        before = victim.read_bytes()
        for target in (victim, Path("/dev/stdin")):
            with victim.open("rb") as stdin:
                proc = subprocess.run([sys.executable, "-m", "sglang_eagle_cycle.cli", *argv, str(target), "--force"],
                                      stdin=stdin, capture_output=True, text=True, cwd=repo_root)
            assert proc.returncode == 2 and proc.stdout == "", (argv, proc.stderr)
            assert f"{flag} {target}: is the file on standard input, one of the inputs" in proc.stderr
            assert proc.stderr.count("\n") == 1 and victim.read_bytes() == before
    # another file as the output, standard input from a file: written as asked
    out = tmp_path / "adaptive.json"
    with seed.open("rb") as stdin:
        proc = subprocess.run([sys.executable, "-m", "sglang_eagle_cycle.cli", "advise", "-", "--baseline-tok-s", "88.8",
                               "--adaptive-config", str(out)], stdin=stdin, capture_output=True, text=True, cwd=repo_root)
    assert proc.returncode == 0 and out.exists() and seed.read_text() == (repo_root / SEED).read_text(), proc.stderr


def test_an_output_that_is_the_file_on_standard_output_is_refused(tmp_path, repo_root):
    """``advise ... --adaptive-config /dev/stdout --force >> FILE`` emptied FILE: the output was
    reopened with truncation."""
    seed = tmp_path / "seed.json"
    seed.write_text((repo_root / SEED).read_text())
    kept = tmp_path / "kept.txt"
    kept.write_text("mine\n")
    with kept.open("a") as out:
        proc = subprocess.run([sys.executable, "-m", "sglang_eagle_cycle.cli", "advise", str(seed), "--baseline-tok-s",
                               "88.8", "--adaptive-config", "/dev/stdout", "--force"], stdout=out,
                              stderr=subprocess.PIPE, text=True, cwd=repo_root)
    assert proc.returncode == 2 and "--adaptive-config /dev/stdout: is the file on standard output" in proc.stderr
    assert kept.read_text() == "mine\n"
    # on a pipe the JSON was mixed into the advice, exit 0 (helper 48)
    proc = subprocess.run([sys.executable, "-m", "sglang_eagle_cycle.cli", "advise", str(seed), "--baseline-tok-s",
                           "88.8", "--adaptive-config", "/dev/stdout", "--force"], capture_output=True, text=True,
                          cwd=repo_root)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == ("eagle-cycle advise: error: --adaptive-config /dev/stdout: is standard output, which "
                           "carries the command's own output; give a file\n")


def test_a_model_name_that_is_no_utf8_is_refused(tmp_path, repo_root):
    """A shell's ``$'bad\\xff'`` reached the exposition raw: invalid UTF-8 on stdout, exit 0, or a
    UnicodeEncodeError writing the file (helper 48)."""
    log = tmp_path / "x.log"
    log.write_text("[2026-11-30 10:00:00 TP0] Decode batch, #running-req: 1, #token: 9, token usage: 0.00, "
                   "gen throughput (token/s): 80.00, #queue-req: 0\n")
    proc = subprocess.run([sys.executable, "-m", "sglang_eagle_cycle.cli", "inspect", str(log), "--prometheus",
                           str(tmp_path / "m.prom"), "--model-name", b"bad\xff".decode("utf-8", "surrogateescape")],
                          capture_output=True, text=True, cwd=repo_root)
    assert proc.returncode == 2 and proc.stderr == ("eagle-cycle inspect: error: argument --model-name: not UTF-8 "
                                                    "text\n")
    assert not (tmp_path / "m.prom").exists()


def test_a_sigterm_right_after_the_spool_appears_leaves_no_spool_behind(tmp_path, monkeypatch):
    """Under load the test above once sent its SIGTERM while advise was still between making the
    spool folder and arming its removal, and the folder stayed. The signal now waits for that."""
    import signal
    import tempfile

    from sglang_eagle_cycle.cli import main

    real_mkdtemp = tempfile.mkdtemp

    def mkdtemp_then_sigterm(*args, **kwargs):
        path = real_mkdtemp(*args, **kwargs)
        if "eagle-cycle-advise-" in str(args) + str(kwargs):
            os.kill(os.getpid(), signal.SIGTERM)   # delivered at the next bytecode
        return path

    spool_root = tmp_path / "tmp"
    spool_root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spool_root))
    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp_then_sigterm)
    log = tmp_path / "server.log"
    log.write_text("[2026-12-04 10:00:00] an unrelated log line\n")
    previous = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(SystemExit) as exc:
            main(["advise", str(log)])
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert exc.value.code == 128 + signal.SIGTERM
    assert list(spool_root.iterdir()) == []


def _swallowed_sigterm():
    """Run the CLI's SIGTERM handler where the interpreter ran it when the test above hung under load:
    inside a weak-reference callback (importlib's module-lock one), whose SystemExit is reported as
    "ignored" and lost."""
    import signal
    import weakref

    from sglang_eagle_cycle.sigterm import terminate

    class Referent:
        pass

    obj = Referent()
    ref = weakref.ref(obj, lambda r: terminate(signal.SIGTERM, None))
    del obj   # the callback runs here; its SystemExit goes to sys.unraisablehook
    assert ref() is None


def test_a_pipe_copy_stops_on_a_sigterm_whose_exit_was_swallowed(monkeypatch):
    """The hang behind ``test_a_terminated_advise_leaves_no_spool_behind`` (2 of 4 suite runs under
    load): the SIGTERM's exit was raised inside importlib's weak-reference callback while advise
    imported ``logging``, lost there, and the copy of the endless pipe went on. The copy now checks
    for a SIGTERM the handler has seen, whatever became of the exit it raised."""
    import signal

    from sglang_eagle_cycle import sigterm
    from sglang_eagle_cycle.commands.advise_cmd import _copy_stream

    lost = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: lost.append(u.exc_type))
    sigterm.forget()
    try:
        _swallowed_sigterm()
        assert lost == [SystemExit] and sigterm.received() == signal.SIGTERM
        r, w = os.pipe()
        os.write(w, b"a line\n" * 10)
        copied = io.BytesIO()
        with os.fdopen(r, "rb") as src, os.fdopen(w, "wb"):   # the write end stays open: endless
            with pytest.raises(SystemExit) as exc:
                _copy_stream(src, copied)
        assert exc.value.code == 128 + signal.SIGTERM
        assert copied.getvalue() == b""   # stopped at its first read, not after the pipe's end
    finally:
        sigterm.forget()


def test_a_command_whose_sigterm_exit_was_swallowed_still_exits_143(tmp_path, monkeypatch):
    """A SIGTERM lost the same way in a command with no loop to check it: the command finishes, its
    temporary folder is removed as usual, and the CLI returns the signal's exit, not 0."""
    import signal
    import tempfile

    from sglang_eagle_cycle import sigterm
    from sglang_eagle_cycle.commands import advise_cmd

    monkeypatch.setattr(sys, "unraisablehook", lambda u: None)
    real = advise_cmd._distinct_inputs

    def distinct_then_sigterm(names):
        _swallowed_sigterm()
        return real(names)

    monkeypatch.setattr(advise_cmd, "_distinct_inputs", distinct_then_sigterm)
    spool_root = tmp_path / "tmp"
    spool_root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spool_root))
    log = tmp_path / "server.log"
    log.write_text("[2026-12-04 10:00:00] an unrelated log line\n")
    previous = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(SystemExit) as exc:
            cli.main(["advise", str(log)])
        assert exc.value.code == 128 + signal.SIGTERM
        assert list(spool_root.iterdir()) == []
        monkeypatch.setattr(advise_cmd, "_distinct_inputs", real)
        # the next command in the same process starts with nothing noted: its own error, not 143
        rc, _, err = call("advise", log)
    finally:
        signal.signal(signal.SIGTERM, previous)
        sigterm.forget()
    assert rc == 2 and "nothing to advise on" in err, err


def test_a_deferred_sigterm_is_replayed_through_the_handler_it_held_off():
    """``sigterm.deferred``: a SIGTERM inside the block runs no handler there; ``replay()`` acts on
    it through the handler in place before (the CLI's exit), and that handler is back afterwards."""
    import signal

    from sglang_eagle_cycle.sigterm import deferred, forget, terminate

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        with deferred() as replay:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):   # bytecodes enough for the interpreter to run a pending handler
                pass
        assert signal.getsignal(signal.SIGTERM) is terminate
        with pytest.raises(SystemExit) as exc:
            replay()
        assert exc.value.code == 128 + signal.SIGTERM
        with deferred() as quiet:
            pass
        quiet()                      # nothing noted: nothing happens
    finally:
        signal.signal(signal.SIGTERM, previous)
        forget()                     # terminate noted the replayed signal


def test_a_list_option_given_twice_keeps_both_lists(tmp_path):
    # `--batch-sizes 1 --batch-sizes 4` kept only 4, and a bare --baseline-tok-s meant for the runs'
    # bs 1 then went to bs 4 with no word; --baseline-tok-s itself already took every repetition
    log = _cycle_log(tmp_path / "server.log")
    rc, out, err = call("advise", log, "--baseline-tok-s", "60", "--batch-sizes", "1", "--batch-sizes", "4",
                        "--steps-candidates", "1", "2", "--steps-candidates", "3", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert [b["bs"] for b in doc["per_batch_size"]] == [1, 4]
    assert doc["inputs"]["cycle_model"]["baseline_step_ms"] == {"1": pytest.approx(1000 / 60, abs=1e-3)}
    assert sorted(c["steps"] for c in doc["candidates"]) == [0, 1, 2, 3]
    out = tmp_path / "adaptive.json"
    rc, _, err = call("advise", log, "--baseline-tok-s", "60", "--cuda-graph-bs", "8", "16", "--cuda-graph-bs", "16",
                      "32", "32", "--adaptive-config", out)
    assert rc == 0, err
    assert json.loads(out.read_text())["_eagle_cycle"]["cuda_graph_bs_assumed"] == [8, 16, 32]


@pytest.mark.parametrize("content", [b"", bytes(range(256)) * 400])
def test_advise_on_an_unreadable_log_says_advise_not_inspect(tmp_path, content):
    """``eagle-cycle advise empty.log`` said "error: nothing to inspect: empty.log: empty file": the
    reader's message shows through, naming another command than the one the user ran."""
    log = tmp_path / "server.log"
    log.write_bytes(content)
    rc, out, err = call("advise", log, "--baseline-tok-s", 88.8)
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith(f"eagle-cycle advise: error: nothing to advise on: {log}: ")
    assert "inspect" not in err
