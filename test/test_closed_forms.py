"""The two p-values computed in closed form instead of through ``scipy.stats`` (whose import is most
of a short advise call): advise's chi-square test of acceptance between batch sizes and the probe's
exact McNemar test. Both must agree with scipy, and advise must not import ``scipy.stats``."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from sglang_eagle_cycle.advise import chi2_sf

stats = pytest.importorskip("scipy.stats")


def test_chi2_sf_agrees_with_scipy_over_degrees_and_tails():
    worst = 0.0
    for k in range(1, 161):
        for x in np.concatenate([np.linspace(0.0, 6.0, 25), np.geomspace(1e-4, 3000.0, 80)]):
            ref = float(stats.chi2.sf(x, k))
            got = chi2_sf(float(x), k)
            assert 0.0 <= got <= 1.0
            if ref > 1e-290:
                worst = max(worst, abs(got - ref) / ref)
            else:
                assert got < 1e-280
    assert worst < 1e-9


def test_chi2_sf_edges():
    assert chi2_sf(0.0, 3) == 1.0 and chi2_sf(-1.0, 2) == 1.0
    assert chi2_sf(2.0, 2) == pytest.approx(np.exp(-1.0), rel=1e-14)     # k = 2: e^(-x/2)
    assert chi2_sf(float("inf"), 2) == 0.0 and chi2_sf(float("inf"), 3) == 0.0
    assert np.isnan(chi2_sf(float("nan"), 4))                 # never below a threshold: no split
    assert chi2_sf(1e300, 7) == 0.0
    with pytest.raises(ValueError, match="degrees of freedom"):
        chi2_sf(1.0, 0)


def test_mcnemar_p_agrees_with_scipys_binomial_test():
    torch = pytest.importorskip("torch")
    from sglang_eagle_cycle.wiring.probe import mcnemar_p

    worst = 0.0
    counts = list(range(0, 41)) + [99, 100, 501, 1000, 2500]
    for only_a in counts:
        for only_b in counts:
            # discordant pairs both ways, plus concordant ones, which the test ignores
            a = torch.tensor([True] * only_a + [False] * only_b + [True, True, False], dtype=torch.bool)
            b = torch.tensor([False] * only_a + [True] * only_b + [True, True, False], dtype=torch.bool)
            got = mcnemar_p(a, b)
            n = only_a + only_b
            ref = 1.0 if n == 0 else float(stats.binomtest(only_a, n, 0.5).pvalue)
            if ref > 1e-290:
                worst = max(worst, abs(got - ref) / ref)
            assert 0.0 <= got <= 1.0
    assert worst < 1e-9


def test_advise_and_its_batch_size_split_do_not_import_scipy_stats(repo_root):
    """An advise call on the seed document, and the chi-square test between two batch sizes whose
    per-position acceptance disagrees (0.8 against 0.7 over 3,300 and 9,600 request-cycles), run
    with ``scipy.stats`` unimported."""
    code = (
        "import json, sys\n"
        "from sglang_eagle_cycle.advise import Run, acceptance_by_bs\n"
        "from sglang_eagle_cycle.cli import main\n"
        "def run(bs, p, reached):\n"
        "    counts, n = [], reached\n"
        "    for _ in range(3):\n"
        "        counts.append((round(p * n), n))\n"
        "        n = round(p * n)\n"
        "    return Run(source=f'bs{bs}', bs=bs, steps=3, counts=counts, cycles=3300, accept_se=0.01)\n"
        "split, notes = acceptance_by_bs([run(1, 0.8, 3300), run(32, 0.7, 9600)])\n"
        "try:\n"
        "    main(['advise', sys.argv[1], '--json'])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "print(json.dumps({'split': sorted(split), 'notes': notes, 'stats': 'scipy.stats' in sys.modules}))\n")
    seed = repo_root / "data" / "benchmarks" / "seed_kimi_k25.json"
    proc = subprocess.run([sys.executable, "-c", code, str(seed)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["split"] == [1, 32] and "chi-square p" in out["notes"][0]
    assert out["stats"] is False
