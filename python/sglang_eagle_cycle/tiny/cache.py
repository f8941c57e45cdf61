"""A cache of tiny pairs for the test suite and the GPU check.

A pair is stored under ``ROOT/<arch>-seed<seed>-ids<ids>-<convention>-<key>/`` where ``key``
hashes the spec and :func:`~.pair.trainer_digest` (the trainer's own source, torch and Python
versions): a changed trainer never validates files an older one made. ``ROOT`` is
``$EAGLE_CYCLE_TINY_CACHE``, else ``$XDG_CACHE_HOME/sglang-eagle-cycle/tiny-pairs``, else
``~/.cache/sglang-eagle-cycle/tiny-pairs``. Pairs that differ only in their draft (ids,
convention, draft steps) share one trained target.

Several processes may ask for the same pair at once (``pytest -n``): one trains it under its
arch's lock file ``ROOT/.train-<arch>.lock`` (``filelock``, a torch dependency); the others wait and
then read it. Pairs of two archs train at once.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Mapping

from filelock import FileLock

from .pair import PairSpec, make_pair, spec_dict, target_key, trainer_digest


def cache_root(env: Mapping[str, str] = os.environ) -> Path:
    if env.get("EAGLE_CYCLE_TINY_CACHE"):
        return Path(env["EAGLE_CYCLE_TINY_CACHE"])
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "sglang-eagle-cycle" / "tiny-pairs"


def pair_dir_name(spec: PairSpec) -> str:
    blob = json.dumps({"spec": spec_dict(spec), "trainer": trainer_digest()}, sort_keys=True)
    key = hashlib.sha256(blob.encode()).hexdigest()[:12]
    ids = "-".join(str(i) for i in spec.aux_layer_ids)
    return f"{spec.arch}-seed{spec.seed}-ids{ids}-{spec.convention}-{key}"


def _same_target(root: Path, spec: PairSpec) -> Path | None:
    """A cached pair whose target this spec can share (pairs differing only in their draft)."""
    key = target_key(spec)
    for summary_path in sorted(root.glob("*/pair.json")):
        try:
            if json.loads(summary_path.read_text()).get("target_key") == key:
                return summary_path.parent
        except (OSError, ValueError):
            continue
    return None


def cached_summary(d: Path) -> dict | None:
    """The summary of the pair in folder ``d`` when it was made by the current trainer, else None."""
    summary_path = d / "pair.json"
    if summary_path.is_file():
        summary = json.loads(summary_path.read_text())
        if summary.get("trainer") == trainer_digest():
            return summary
    return None


def cached_pair(spec: PairSpec, root: Path | None = None, log=None) -> tuple[Path, dict]:
    """(pair folder, summary): the cached pair for ``spec``, trained first when absent.

    Training holds ``ROOT/.train-<arch>.lock``: pairs of one arch train one at a time, so the
    second reuses the first's target; pairs of two archs share nothing and may train at once (on
    2 cores a tiny pair trains about 10% faster on two torch threads than on one, so two one-thread
    trainings side by side finish well before two two-thread ones in a row). A process that waited
    on the lock finds the pair made and reads it.
    """
    root = Path(root) if root is not None else cache_root()
    d = root / pair_dir_name(spec)
    summary = cached_summary(d)
    if summary is not None:
        return d, summary
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / f".train-{spec.arch}.lock")):
        summary = cached_summary(d)
        if summary is not None:
            return d, summary
        return _train_into(spec, root, d, log)


def _train_into(spec: PairSpec, root: Path, d: Path, log) -> tuple[Path, dict]:
    tmp = Path(tempfile.mkdtemp(prefix=".making-", dir=root))
    try:
        summary = make_pair(tmp / "pair", spec, log=log, target_from=_same_target(root, spec))
        # make_pair recorded the temporary folder; point the summary at the cached one before
        # the rename, so a reader never sees a pair.json naming a folder that is gone.
        summary["target"], summary["draft"] = str(d / "target"), str(d / "draft")
        (tmp / "pair" / "pair.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
        if d.exists():
            shutil.rmtree(d)
        os.replace(tmp / "pair", d)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return d, summary
