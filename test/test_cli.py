"""The ``eagle-cycle`` dispatcher: exit codes and one-line errors common to every subcommand."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_eagle_cycle import __version__, cli

KIMI = ["examples/kimi-k25/target", "examples/kimi-k25/draft"]


def run(args, repo_root, **kw):
    return subprocess.run([sys.executable, "-m", "sglang_eagle_cycle.cli", *args], capture_output=True, text=True,
                          cwd=repo_root, timeout=120, **kw)


def test_version_and_subcommands(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"eagle-cycle {__version__}"
    assert set(cli.SUBCOMMANDS) == {"wiring", "inspect", "advise", "make-tiny-pair", "probe"}


@pytest.mark.parametrize("argv", [[], ["nosuch"], ["wiring"], ["inspect", "--no-such-flag", "x"]])
def test_usage_errors_are_one_line_exit_2(argv, repo_root):
    proc = run(argv, repo_root)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_unwritable_stdout_is_one_line_exit_2(repo_root):
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "sglang_eagle_cycle.cli", "wiring", *KIMI, "--json"],
                              stdout=full, stderr=subprocess.PIPE, text=True, cwd=repo_root, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["eagle-cycle wiring: error: cannot write output: No space left on device"]


def test_deeply_nested_json_is_one_line_exit_2(tmp_path, repo_root):
    deep = tmp_path / "config.json"
    deep.write_text("[" * 100000)
    proc = run(["wiring", str(deep), KIMI[1]], repo_root)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


@pytest.mark.parametrize("option", ["--trace", "--csv", "--plot"])
def test_write_error_names_the_output_not_its_temporary_file(tmp_path, repo_root, option):
    import random
    import resource
    import signal

    from cyclegen import generate, log_lines

    log = tmp_path / "server.log"
    log.write_text("\n".join(log_lines(generate(random.Random(3), bs=1, steps=3, cycles=400,
                                                p=[0.8, 0.6, 0.4]).records)) + "\n")
    out = tmp_path / {"--trace": "t.json", "--csv": "g.csv", "--plot": "p.png"}[option]

    def small_files():  # writes beyond 600 bytes fail with EFBIG instead of killing the process
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (600, 600))

    # matplotlib's font cache is written on first use: build it in a private directory before the limit.
    # No bytecode either: CPython's importlib does not check a short write of a .pyc, so under the limit
    # it installs the first 600 bytes of every module it compiles, and every later import of that
    # module in the suite fails with "EOFError: marshal data too short" (seen where
    # PYTHONDONTWRITEBYTECODE is not set: 18 failures after this test compiled plots.py)
    env = dict(os.environ, MPLCONFIGDIR=str(tmp_path / "mpl"), PYTHONDONTWRITEBYTECODE="1")
    subprocess.run([sys.executable, "-c", "import matplotlib.font_manager"], env=env, check=True, timeout=120)
    proc = run(["inspect", str(log), option, str(out)], repo_root, preexec_fn=small_files, env=env)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"eagle-cycle inspect: error: cannot write output: {out}: File too large"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mpl", "server.log"]   # no partial file, no temporary one


def test_sweep_is_a_subcommand_with_the_benchmark_options(capsys, repo_root):
    """`eagle-cycle sweep` is `benchmarks/bench_eagle_cycle.py` under the CLI (and so in the Docker image)."""
    assert cli.main(["sweep", "--url", "notaurl"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("eagle-cycle sweep: error: --url 'notaurl'") and err.count("\n") == 1
    with pytest.raises(SystemExit) as exc:
        cli.main(["sweep", "--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0 and out.startswith("usage: eagle-cycle sweep") and "--concurrency" in out
    assert "sweep" in run(["--help"], repo_root).stdout
    proc = subprocess.run([sys.executable, "benchmarks/bench_eagle_cycle.py", "--url", "notaurl"], cwd=repo_root,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("bench_eagle_cycle.py: error: --url 'notaurl'")


def test_eval_specbundle_reads_the_repository_copy_and_refuses_a_bad_table(tmp_path, repo_root):
    bad = tmp_path / "bad.json"
    bad.write_text('{"a": 1}')
    for table in (bad, tmp_path / "missing.json"):
        proc = subprocess.run([sys.executable, "benchmarks/eval_specbundle.py", "--table", str(table)], cwd=repo_root,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    import importlib.util

    spec = importlib.util.spec_from_file_location("eval_specbundle", repo_root / "benchmarks" / "eval_specbundle.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.DEFAULT_TABLE == repo_root / "data" / "benchmarks" / "specbundle_subset.json"
    assert mod.DEFAULT_TABLE.is_file()


def test_wiring_names_a_switch_that_keeps_stock_wiring_and_a_lower_case_typo(tmp_path):
    """helper 83: with SGLANG_EAGLE_CYCLE_WIRING=0 (or SGLANG_EAGLE_CYCLE=0) set, `wiring` reported
    the plugin's positions without a word, though a server so launched captures stock SGLang's; a
    lower-case SGLANG_EAGLE_CYCLE_aux_layer_ids got no 'did you mean'."""
    import os

    from sglang_eagle_cycle.runtime import unknown_env

    repo = Path(__file__).resolve().parents[1]
    pair = [str(repo / "examples" / "kimi-k25" / "target"), str(repo / "examples" / "kimi-k25" / "draft")]
    for name in ("SGLANG_EAGLE_CYCLE_WIRING", "SGLANG_EAGLE_CYCLE"):
        env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_EAGLE_CYCLE")}
        proc = subprocess.run([sys.executable, "-m", "sglang_eagle_cycle.cli", "wiring", *pair],
                              capture_output=True, text=True, timeout=120, env={**env, name: "0"})
        assert proc.returncode == 0 and proc.stderr.splitlines() == [
            f"eagle-cycle wiring: warning: {name}=0 is set: a server launched with it captures the stock SGLang "
            "0.5.23 positions this report names, not the plugin's"], proc.stderr
    assert unknown_env({"SGLANG_EAGLE_CYCLE_aux_layer_ids": "2"}) == [
        "SGLANG_EAGLE_CYCLE_aux_layer_ids is set but nothing reads it; did you mean SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS?"]


@pytest.mark.parametrize("flags, words", [(["--device", "cuda"], "--device applies to the probe: add --probe"),
                                          (["--tokens", "4", "--dtype", "bfloat16"],
                                           "--tokens, --dtype apply to the probe: add --probe")])
def test_wiring_refuses_probe_options_without_probe(flags, words):
    # helper 83: `wiring T D --device cuda` exited 0 on a machine without CUDA, the option dropped
    repo = Path(__file__).resolve().parents[1]
    pair = [str(repo / "examples" / "kimi-k25" / "target"), str(repo / "examples" / "kimi-k25" / "draft")]
    proc = subprocess.run([sys.executable, "-m", "sglang_eagle_cycle.cli", "wiring", *pair, *flags],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == "" and proc.stderr == f"eagle-cycle wiring: error: {words}\n"
