"""Shared fixtures: where the repo is, and the project's real input data (the repository's ``data/``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Several workers share the cores: torch's default (one OpenMP thread per core, spinning while
    # idle) makes two workers slow each other tenfold. One thread each, and idle threads sleep.
    # The tiny-pair trainer sets its own two threads (byte-identical pairs), so it is unaffected.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

REPO_ROOT = Path(__file__).resolve().parents[1]
#: the public facts the tests use, kept in the repository (``data/README.md``)
REPO_DATA = REPO_ROOT / "data"


def external_data_dir() -> Path | None:
    """An extra data directory of the same layout, when there is one: ``$EAGLE_CYCLE_TEST_SHARED_DATA``
    or ``../shared/data`` beside the checkout. Never the only source: its cases add to the repo's."""
    env = os.environ.get("EAGLE_CYCLE_TEST_SHARED_DATA")
    candidates = [Path(env)] if env else []
    candidates.append(REPO_ROOT.parent / "shared" / "data")
    for c in candidates:
        if c.is_dir() and c.resolve() != REPO_DATA.resolve():
            return c
    return None


def config_cases() -> list[Path]:
    """Every wiring case folder (with an ``expected.json``): the repo's, plus those only the extra
    data directory has (by folder name), sorted by name."""
    found = {p.name: p for p in (REPO_DATA / "configs").iterdir() if (p / "expected.json").is_file()}
    ext = external_data_dir()
    if ext is not None and (ext / "configs").is_dir():
        for p in (ext / "configs").iterdir():
            if (p / "expected.json").is_file():
                found.setdefault(p.name, p)
    return [found[k] for k in sorted(found)]


def config_index() -> list[dict]:
    """``configs/index.json`` entries of the repo's data and of the extra data (by case name)."""
    entries = {e["case"]: e for e in json.loads((REPO_DATA / "configs" / "index.json").read_text())}
    ext = external_data_dir()
    if ext is not None and (ext / "configs" / "index.json").is_file():
        for e in json.loads((ext / "configs" / "index.json").read_text()):
            entries.setdefault(e["case"], e)
    return [entries[k] for k in sorted(entries)]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The project's data directory: the repository's ``data/`` (configs, logs, benchmarks)."""
    return REPO_DATA


@pytest.fixture(autouse=True)
def _no_plugin_variables_from_the_caller(monkeypatch):
    """Tests start with no ``SGLANG_EAGLE_CYCLE*`` variable: the ones they need, they set."""
    for name in list(os.environ):
        if name.startswith("SGLANG_EAGLE_CYCLE"):
            monkeypatch.delenv(name)


@pytest.fixture(scope="session", autouse=True)
def _temp_folder_of_the_run(tmp_path_factory):
    """Every temporary file of the run, the test processes' and their children's (ours, SGLang's,
    torch's), goes under pytest's own base folder, which pytest prunes: a child ended by a signal or
    a library that never removes its folder had left empty ``tmp*`` folders in the user's temp
    folder, a few a run. The background trainers started at collection keep the caller's."""
    import tempfile

    folder = tmp_path_factory.mktemp("tmp")
    saved = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"] = str(folder)
    tempfile.tempdir = str(folder)
    yield
    if saved[0] is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = saved[0]
    tempfile.tempdir = saved[1]


#: Modules that need the trained tiny pairs (``tiny_pairs.pair``). They run last; on a clean
#: clone a child process starts training the pairs at collection, so the training overlaps the
#: rest of the suite (under ``pytest -n`` the first worker starts it).
TINY_PAIR_MODULES = ("test_probe.py", "test_probe_sglang.py", "test_tiny_pair.py", "test_tiny_pair_sglang.py",
                     "test_tiny_pair_gpu.py")
_trainers: list = []


def pytest_collection_modifyitems(config, items):
    global _trainers
    items.sort(key=lambda it: it.path.name in TINY_PAIR_MODULES)   # stable: tiny-pair modules last
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker in (None, "gw0") and any(it.path.name in TINY_PAIR_MODULES for it in items):
        import tiny_pairs

        _trainers = tiny_pairs.start_background_training()


def pytest_unconfigure(config):
    """Stop the background trainers if the suite ends first (they keep nothing half-written)."""
    import signal

    running = [t for t in _trainers if t.poll() is None]
    for trainer in running:
        trainer.send_signal(signal.SIGINT)
    for trainer in running:
        try:
            trainer.wait(30)
        except Exception:
            trainer.kill()


def computed_once(tmp_path_factory, name: str, compute):
    """``compute()`` (a JSON-able value) run once per test session, whichever workers ask.

    Under pytest-xdist a module-scoped fixture runs once in every worker that receives one of the
    module's tests; for the fixtures that start SGLang in a fresh interpreter (20-45 s each) that
    repeats the same work. The first worker to ask computes under a file lock in the session's
    shared temporary folder and writes the result there; the others read it. Without xdist it
    just computes.
    """
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return compute()
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp().parent
    path = shared / f"{name}.json"
    with FileLock(str(path) + ".lock"):
        if path.is_file():
            return json.loads(path.read_text())
        value = compute()
        path.write_text(json.dumps(value))
        return value


def tensors_once(tmp_path_factory, name: str, compute):
    """:func:`computed_once` for a value of tensors (a tensor, or tuples, lists and dicts of them):
    shared between workers as a ``torch.save`` file (read back with ``weights_only``)."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return compute()
    import torch
    from filelock import FileLock

    path = tmp_path_factory.getbasetemp().parent / f"{name}.pt"
    with FileLock(str(path) + ".lock"):
        if path.is_file():
            return torch.load(path, weights_only=True)
        value = compute()
        torch.save(value, path)
        return value


def self_probe(tmp_path_factory, script: Path, name: str, timeout: float = 300):
    """The last stdout line, as JSON, of ``python SCRIPT WORK`` (``WORK`` a fresh temporary folder) in a
    fresh interpreter whose environment holds none of the plugin's nor SGLang's plugin variables
    (``OMP_NUM_THREADS`` 1 unless set): a test file that runs itself as a probe of SGLang's own classes
    on the CPU, forked from the CPU-engine server of ``sglang_fork`` (SGLang imported once). Once per
    test session (:func:`computed_once`); the run must exit 0."""
    from sglang_fork import run_python

    def compute():
        work = tmp_path_factory.mktemp(name)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_EAGLE_CYCLE", "SGLANG_PLUGINS"))}
        env.setdefault("OMP_NUM_THREADS", "1")
        proc = run_python([script, work], env=env, timeout=timeout, cpu_engine=True)
        assert proc.returncode == 0, proc.stderr[-4000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    return computed_once(tmp_path_factory, name, compute)


def write_safetensors_header(path: Path, tensors: dict[str, list[int]], dtypes: dict[str, str] | None = None) -> Path:
    """A safetensors file with a header and no tensor bytes, written by the format's definition (an 8-byte
    little-endian length, then the JSON header), independent of the package's own writer: each tensor
    ``name -> shape`` is ``dtypes[name]`` if given, else BF16 (``d2t`` / ``t2d``: I64)."""
    import struct

    header = {name: {"dtype": (dtypes or {}).get(name, "I64" if name in ("d2t", "t2d") else "BF16"),
                     "shape": list(shape), "data_offsets": [0, 0]} for name, shape in tensors.items()}
    blob = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(blob)) + blob)
    return path
