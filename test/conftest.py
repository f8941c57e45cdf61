"""Shared fixtures: where the repo is, and the project's real input data (``../shared/data``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def _shared_data_dir() -> Path | None:
    env = os.environ.get("EAGLE_CYCLE_TEST_SHARED_DATA")
    candidates = [Path(env)] if env else []
    candidates.append(REPO_ROOT.parent / "shared" / "data")
    for c in candidates:
        if c.is_dir():
            return c
    return None


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` beside the checkout (CI lays it there); set EAGLE_CYCLE_TEST_SHARED_DATA elsewhere."""
    d = _shared_data_dir()
    if d is None:
        pytest.skip("shared/data not found beside the checkout (set EAGLE_CYCLE_TEST_SHARED_DATA)")
    return d


@pytest.fixture(autouse=True)
def _no_plugin_variables_from_the_caller(monkeypatch):
    """Tests start with no ``SGLANG_EAGLE_CYCLE*`` variable: the ones they need, they set."""
    for name in list(os.environ):
        if name.startswith("SGLANG_EAGLE_CYCLE"):
            monkeypatch.delenv(name)
