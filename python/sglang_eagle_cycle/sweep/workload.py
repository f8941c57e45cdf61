"""Prompt sets for the sweep: the bundled one written for this project, or a user's JSONL.

A prompt file has one JSON object per line with a ``prompt`` string (``text`` is accepted
too) and optionally ``id`` and ``category``; blank lines are skipped. The set's identity,
``prompt_set_sha256``, is the sha256 of the prompt texts in file order (JSON-encoded list,
UTF-8), so renaming ids or re-wrapping the file does not change it but editing a prompt does.

Usage::

    ps = load_prompt_set(None)           # bundled: 80 prompts, chat / code / math
    order = ps.request_order(seed=0)     # the same request sequence for every configuration
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Optional

from ..errors import UsageError


@dataclass(frozen=True)
class Prompt:
    """One request's input text, with an id and a category (``chat``, ``code``, ``math``...)."""

    id: str
    category: str
    text: str


@dataclass(frozen=True)
class PromptSet:
    """An ordered prompt set, where it came from, and its sha256 (see the module docstring)."""

    prompts: tuple[Prompt, ...]
    source: str
    sha256: str

    def request_order(self, seed: int) -> list[Prompt]:
        """The prompts shuffled with ``random.Random(seed)``; requests cycle through this list."""
        order = list(self.prompts)
        random.Random(seed).shuffle(order)
        return order

    def categories(self) -> dict[str, int]:
        """Prompt count per category."""
        out: dict[str, int] = {}
        for p in self.prompts:
            out[p.category] = out.get(p.category, 0) + 1
        return out


def bundled_prompts_path() -> Path:
    """Path of the bundled ``sglang_eagle_cycle/data/prompts.jsonl``."""
    return Path(str(resources.files("sglang_eagle_cycle").joinpath("data", "prompts.jsonl")))


def prompt_set_sha256(texts: list[str]) -> str:
    """sha256 hex of ``json.dumps(texts)`` (UTF-8, no ASCII escaping): the prompt set's identity."""
    blob = json.dumps(list(texts), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()


def load_prompt_set(path: Optional[str | Path]) -> PromptSet:
    """Read a prompt JSONL file (``None``: the bundled set).

    Raises:
        UsageError: the file is missing, not a regular file, not UTF-8, has a line that is
            not a JSON object with a non-empty ``prompt`` (or ``text``) string, or holds no prompt.
    """
    p = bundled_prompts_path() if path is None else Path(path)
    if not p.exists():
        raise UsageError(f"prompt file not found: {p}")
    if not p.is_file():
        raise UsageError(f"prompt file is not a regular file: {p}")
    try:
        raw = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"prompt file is not UTF-8 text: {p}") from None
    except OSError as exc:
        raise UsageError(f"cannot read prompt file {p}: {exc.strerror}") from None
    prompts: list[Prompt] = []
    for lineno, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            raise UsageError(f"{p}:{lineno}: not a JSON object") from None
        if not isinstance(obj, dict):
            raise UsageError(f"{p}:{lineno}: not a JSON object")
        text = obj.get("prompt", obj.get("text"))
        if not isinstance(text, str) or not text.strip():
            raise UsageError(f"{p}:{lineno}: needs a non-empty \"prompt\" string")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:   # a lone surrogate (\ud800): no text a server can be sent
            raise UsageError(f"{p}:{lineno}: the prompt holds {text[exc.start]!r}, a lone surrogate that is no "
                             "text (UTF-8 cannot encode it)") from None
        prompts.append(Prompt(
            id=str(obj.get("id", f"line-{lineno}")),
            category=str(obj.get("category", "unspecified")),
            text=text,
        ))
    if not prompts:
        raise UsageError(f"prompt file holds no prompt: {p}")
    return PromptSet(
        prompts=tuple(prompts),
        source="bundled" if path is None else str(p),
        sha256=prompt_set_sha256([q.text for q in prompts]),
    )
