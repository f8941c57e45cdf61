"""The tiny pairs the suite proves things on: made once, cached (see sglang_eagle_cycle.tiny.cache).

A clean clone trains them inside the suite (about 3 minutes each on 2 idle cores, side by side); later runs reuse them
until the trainer's source changes. ``EAGLE_CYCLE_TINY_CACHE`` moves the cache.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from filelock import FileLock

from sglang_eagle_cycle.tiny.cache import cache_root, cached_pair, cached_summary, pair_dir_name
from sglang_eagle_cycle.tiny.pair import PairSpec

#: The trained pairs: make-tiny-pair's defaults per arch (ids 1,3,5), the acceptance runs of issue 11.
SPECS = {
    "llama": PairSpec(arch="llama", seed=11),
    "deepseek_v3": PairSpec(arch="deepseek_v3", seed=11),
}
#: Every pair the SGLang proofs load: the trained ones, and the DeepSeek-V3 pair with its draft's
#: config declaring ids 2,4,6 (``declared_ids``), the case where stock SGLang captures one layer early.
NAMES = ("llama", "deepseek_v3", "deepseek_v3_ids246")
DECLARED_IDS = [2, 4, 6]

_made: dict = {}


def _log(name):
    return lambda msg: print(f"[tiny {name}] {msg}", file=sys.stderr, flush=True)


def pair(name: str):
    """(folder, summary) of the suite's pair ``name`` (one of NAMES), trained on first use."""
    if name not in _made:
        _made[name] = declared_ids_pair() if name == "deepseek_v3_ids246" else cached_pair(SPECS[name], log=_log(name))
    return _made[name]


def declared_ids_pair():
    """The DeepSeek-V3 pair with its draft's ``eagle_config`` ids rewritten to 2,4,6.

    Only the declaration changes: the draft's weights are the ones trained on positions [2, 4, 6]
    (ids 1,3,5), so this folder proves where SGLang captures, not what the draft then agrees on
    (``summary["declared_only"]``). Rebuilt from the cached pair whenever that one changes.
    """
    src, summary = pair("deepseek_v3")
    dest = src.parent / (src.name + "-declared-ids246")
    with FileLock(str(src.parent / ".declared.lock")):     # pytest -n: one worker writes it
        _write_declared(src, summary, dest)
    return dest, json.loads((dest / "pair.json").read_text())


def _write_declared(src: Path, summary: dict, dest: Path) -> None:
    if not (dest / "pair.json").is_file() or json.loads((dest / "pair.json").read_text()).get("from") != str(src):
        tmp = dest.with_name(dest.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(src, tmp)
        cfg_path = tmp / "draft" / "config.json"
        cfg = json.loads(cfg_path.read_text())
        cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = DECLARED_IDS
        cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
        declared = dict(summary, aux_layer_ids=DECLARED_IDS, positions=[i + 1 for i in DECLARED_IDS],
                        declared_only=True, target=str(dest / "target"), draft=str(dest / "draft"))
        declared["from"] = str(src)
        (tmp / "pair.json").write_text(json.dumps(declared, indent=2, sort_keys=True) + "\n")
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)


def missing() -> list[str]:
    """The trained pairs (:data:`SPECS`) not in the cache for the current trainer."""
    out = []
    for name, spec in SPECS.items():
        try:
            ok = cached_summary(cache_root() / pair_dir_name(spec)) is not None
        except (OSError, ValueError):
            ok = False
        if not ok:
            out.append(name)
    return out


def start_background_training() -> list:
    """Train the missing pairs in child processes while the suite runs, one child per pair on one
    torch thread, at nice 10 (the suite's pairs are of two archs, which
    :func:`~sglang_eagle_cycle.tiny.cache.cached_pair` lets train at once); the ``Popen`` objects,
    an empty list when no pair is missing.

    The children's output goes to ``training.log`` in the cache folder, each line led by its pair.

    Tests that need a pair wait on the cache's lock (``cached_pair``), so a test reaching a pair
    a child is still training waits for it instead of training it twice. On 2 cores (2026-12-07), a
    clean clone's suite with both pairs trained by one two-thread child took 680 s, the Llama
    pair 5.5 min of it and the DeepSeek-V3 pair 4 more; the workers then sat idle waiting.
    """
    names = missing()
    if not names:
        return []
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS="1")
    cache_root().mkdir(parents=True, exist_ok=True)
    # niced: the tests run first and the trainers take what they leave (two trainers at the workers'
    # priority starved the sweep tests' stand-in server: a request served in 0.88 s against 0.44 s)
    code = "import os, sys, tiny_pairs\nos.nice(10)\ntiny_pairs.pair(sys.argv[1])\n"
    children = []
    with open(cache_root() / "training.log", "w") as log:   # the children share it, each with its own descriptor
        for name in names:
            children.append(subprocess.Popen([sys.executable, "-c", code, name], cwd=str(Path(__file__).parent),
                                             env=env, stdout=log, stderr=subprocess.STDOUT))
    return children
