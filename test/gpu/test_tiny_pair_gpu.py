"""Runs ``e2e_tiny_pair.sh`` on a CUDA machine: a tiny trained pair served by SGLang 0.5.23 with the plugin.

Skips without CUDA (the CPU side of the script and of its checks is in ``test/test_gpu_scripts.py``).
Takes about 5-8 minutes the first time (the pair trains on the CPU for about 3 of them; it is then
reused from ``$EAGLE_CYCLE_E2E_WORKDIR`` or pytest's temporary folder). Needs SGLang 0.5.23 and this
package installed in the running interpreter, and the port in ``$PORT`` (default 30123) free.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

SCRIPT = Path(__file__).with_name("e2e_tiny_pair.sh")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_tiny_pair_served_end_to_end(tmp_path_factory):
    work = Path(os.environ.get("EAGLE_CYCLE_E2E_WORKDIR") or tmp_path_factory.mktemp("e2e_tiny_pair"))
    env = dict(os.environ, PYTHON=sys.executable)
    proc = subprocess.run(["bash", str(SCRIPT), str(work)], capture_output=True, text=True, timeout=1800,
                          env=env)
    print(proc.stdout)  # the checks show with pytest -s or on failure
    assert proc.returncode == 0, proc.stdout[-8000:] + proc.stderr[-4000:]
    assert "e2e_tiny_pair: PASS" in proc.stdout
