"""``benchmarks/bench_hook_overhead.py``: its interval for a median, and the paired pricing of the
device-span stamps on SGLang's own ``device_timer_ctx`` and AROUND wrapper (a few seconds)."""

from __future__ import annotations

import importlib.util
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks" / "bench_hook_overhead.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_hook_overhead", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _coverage(n: int, k: int) -> float:
    """P(x_(k) <= median <= x_(n+1-k)) for a continuous distribution: 1 - 2 P(Bin(n, 1/2) < k)."""
    return 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2 ** n


@pytest.mark.parametrize("n", [6, 7, 10, 20, 60, 300])
def test_median_interval_is_the_narrowest_sign_test_interval_with_95_percent(bench, n):
    xs = list(range(100, 100 + n))
    random.Random(n).shuffle(xs)
    med, lo, hi = bench.median_ci(xs)
    assert med == pytest.approx(100 + (n - 1) / 2)
    k = lo - 100 + 1  # 1-based rank of the lower end
    assert hi == 100 + n - k  # symmetric ranks
    assert _coverage(n, k) >= 0.95 and (k + 1 > n // 2 or _coverage(n, k + 1) < 0.95)
    if n == 10:
        assert (lo, hi) == (101, 108)  # x_(2), x_(9): the textbook 95% interval for n = 10


def test_median_interval_refuses_too_few_values(bench):
    with pytest.raises(ValueError, match="at least 6"):
        bench.median_ci([1.0, 2.0, 3.0, 4.0, 5.0])


def test_span_stamps_are_priced_against_the_same_hooks_without_them(bench):
    out = bench.price_span_stamps(rounds=8, block=400)
    lo, hi = out["ci95_us"]
    assert lo <= out["added_us"] <= hi
    # the stamps and SGLang's wrappers around two more targets cost something, and the wrappers
    # alone cost less than wrappers plus stamps
    assert out["added_us"] > 0.5 and 0 < out["wrappers_only_us"] < out["added_us"]
    assert out["verdict"] in ("within", "over", "undecided against") and out["budget_us"] == 3.0
    assert "device-span stamps: +" in out["text"]


@pytest.mark.parametrize("argv", [["--stamp-rounds", "3"], ["--load", "-1"], ["--stamp-block", "0"]])
def test_bad_arguments_exit_2_with_one_line(argv):
    proc = subprocess.run([sys.executable, str(BENCH), *argv], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "must be" in proc.stderr.strip().splitlines()[-1]
