"""Runs ``check_cuda_timing.py`` (torch only) in a fresh interpreter: on CUDA the real check, on CPU its logic."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

SCRIPT = Path(__file__).with_name("check_cuda_timing.py")


def _run(*args: str, timeout: int) -> dict:
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout)
    print(proc.stdout)  # the summary shows with pytest -s or on failure
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_event_timing_on_the_gpu():
    out = _run(timeout=570)
    assert out["failed"] == [] and out["seconds"] < 400
    assert out["known_work"]["eager_event_ms"] > 0 and out["overlap"]["graph_median_ms"]["total_ms"] > 0
    # every capture case ran in its own process (thread_local may be skipped without cuda-python)
    assert len(out["capture"]["cases"]) == 12


def test_check_script_logic_on_cpu():
    # the same overlap loop, hooks and sync accounting with the host timer: keeps the GPU script honest
    out = _run("--smoke-cpu", "--cycles", "12", "--rounds", "4", timeout=120)
    assert out["failed"] == [] and out["device"] == "cpu"
    assert set(out["overlap"]) == {"eager_median_ms", "graph_median_ms"}
    for mode in ("eager_median_ms", "graph_median_ms"):   # the host sleep before the draft launch
        assert out["overlap"][mode]["draft_prep_ms"] >= 2.0 > out["overlap"][mode]["draft_ms"]


def test_check_script_skips_cleanly_without_cuda():
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: the real check runs instead")
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip().count("\n") == 0 and "skipped" in proc.stdout
