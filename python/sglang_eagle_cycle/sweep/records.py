"""The sweep's output: ``eagle-cycle-bench/1`` records, one JSON object per line, append-only.

One record per (configuration, concurrency), appended as soon as it is measured::

    {"schema": "eagle-cycle-bench/1", "model":.., "draft":.., "steps":.. (0 = baseline),
     "topk":.., "num_draft_tokens":.., "concurrency":.., "num_prompts":.., "max_new_tokens":..,
     "prompt_set_sha256":.., "settings": {"algorithm":.., "server_args": [..], "ignore_eos":..,
     "stream":..}, "status": "ok"|"failed", "error":.., "output_tok_s":..,
     "request_per_s":.., "ttft_ms": {"p50":..,"p99":..}, "itl_ms": {"p50":..,"p99":..},
     "accept_len_mean":.., "accept_hist": {..}, "cycle": <inspect group or null>,
     "speedup_vs_baseline":.., "server_log":.., "started_at":.., "duration_s":..}

``error`` is ``null`` for ``ok`` and ``{"reason": "...", "log_tail": [...]}`` for ``failed``.
``settings``: what else the sweep ran the configuration with (``--algorithm`` for a speculative
launch, else null; the server arguments after ``--``, empty in URL mode; ``--ignore-eos``; streaming,
not ``--no-stream``; ``workload``: ``--num-prompts`` or ``--duration``, ``--seed``,
``--warmup-requests``). A re-run skips configurations whose :data:`KEY_FIELDS` (settings included)
match an ``ok`` record; a record without settings (an earlier version's) matches none. The file is never
truncated or rewritten: lines are appended with one ``write`` while SIGINT/SIGTERM are held back,
and a partial last line left by a killed writer is closed with a newline first (it stays, and
readers skip it).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Iterator, Optional

from ..errors import UsageError
from ..logfiles import text_safe
from .signals import deferred_signals

SCHEMA = "eagle-cycle-bench/1"

#: Fields in record order (the issue's schema).
FIELDS = (
    "schema", "model", "draft", "steps", "topk", "num_draft_tokens", "concurrency", "num_prompts",
    "max_new_tokens", "prompt_set_sha256", "settings", "status", "error", "output_tok_s", "request_per_s",
    "ttft_ms", "itl_ms", "accept_len_mean", "accept_hist", "cycle", "speedup_vs_baseline",
    "server_log", "started_at", "duration_s",
)

#: A configuration is done when an ``ok`` record with these values exists.
KEY_FIELDS = ("model", "draft", "steps", "topk", "num_draft_tokens", "concurrency",
              "max_new_tokens", "prompt_set_sha256", "settings")

Key = tuple


def record_key(rec: dict) -> Key:
    """The resume key of a record (see :data:`KEY_FIELDS`; ``settings``, an object, as canonical
    JSON text, so that the key is hashable), its texts as :meth:`RecordLog.append` writes them (a
    model path whose bytes are no UTF-8 keys a record read back as the one measured)."""
    return tuple(json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v
                 for v in (text_safe(rec.get(k)) for k in KEY_FIELDS))


def new_record(**values: Any) -> dict:
    """A record with every field of :data:`FIELDS` (missing ones ``None``), in schema order.

    Raises:
        KeyError: a field that is not in the schema.
    """
    unknown = set(values) - set(FIELDS)
    if unknown:
        raise KeyError(f"not in {SCHEMA}: {sorted(unknown)}")
    rec = {k: values.get(k) for k in FIELDS}
    rec["schema"] = SCHEMA
    return rec


def _number(v) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v))


def _count(v, low: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= low


def _numbers(obj, keys) -> bool:
    """``obj`` is null, or an object whose ``keys`` (where present) are finite numbers or null."""
    return obj is None or (isinstance(obj, dict) and all(_number(obj.get(k)) for k in keys))


def well_formed(rec: dict) -> bool:
    """Whether an ``eagle-cycle-bench/1`` object has the field types the sweep reads back (resume
    keys, the table, the plot, the best-configuration line): texts, counts and finite numbers or
    null; an ``ok`` record with integer ``steps`` (>= 0) and ``concurrency`` (>= 1). A record edited
    by hand into other types (``"output_tok_s": "fast"``, ``"cycle": [1]``) is not: it is skipped as
    a damaged line is, where it had ended the sweep in a traceback at the summary."""
    if not all(rec.get(k) is None or isinstance(rec.get(k), str)
               for k in ("model", "draft", "prompt_set_sha256", "status", "server_log", "started_at")):
        return False
    if not all(rec.get(k) is None or _count(rec.get(k), 0)
               for k in ("steps", "topk", "num_draft_tokens", "concurrency", "num_prompts", "max_new_tokens")):
        return False
    if not all(_number(rec.get(k)) for k in ("output_tok_s", "request_per_s", "accept_len_mean",
                                             "speedup_vs_baseline", "duration_s")):
        return False
    if not all(rec.get(k) is None or isinstance(rec.get(k), dict) for k in ("settings", "error", "accept_hist")):
        return False
    if not (_numbers(rec.get("ttft_ms"), ("p50", "p99")) and _numbers(rec.get("itl_ms"), ("p50", "p99"))):
        return False
    cycle = rec.get("cycle")
    if cycle is not None:
        phases = cycle.get("phases") if isinstance(cycle, dict) else None
        if not isinstance(cycle, dict) or not (phases is None or isinstance(phases, dict)):
            return False
        if phases and not (_numbers(phases.get("total_ms"), ("mean",))
                           and _numbers(phases.get("verify_ms"), ("share",))):
            return False
    if rec.get("status") == "ok" and not (_count(rec.get("steps"), 0) and _count(rec.get("concurrency"), 1)):
        return False
    return True


class RecordLog:
    """Append-only access to one output JSONL file."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if self.path.exists() and not self.path.is_file():
            raise UsageError(f"--output is not a regular file: {self.path}")
        parent = self.path.parent
        if not parent.exists():
            raise UsageError(f"--output directory does not exist: {parent}")
        self.skipped_lines = 0

    def foreign_content(self) -> Optional[str]:
        """Why appending to this file would damage someone else's data, or ``None`` when it is
        missing, empty, or holds at least one ``eagle-cycle-bench/1`` record (other lines next to
        ours, e.g. one cut by a killed writer, are tolerated and skipped by :meth:`read`).

        Raises:
            UsageError: the file cannot be read.
        """
        try:
            with open(self.path, "rb") as f:
                head = f.read(4096)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise UsageError(f"cannot read --output {self.path}: {exc.strerror}") from None
        if head.startswith((b"\x1f\x8b", b"BZh", b"\xfd7zXZ", b"PK\x03\x04", b"\x28\xb5\x2f\xfd")) \
                or b"\x00" in head:
            return "is a binary or compressed file, not eagle-cycle-bench/1 JSONL"
        if not self.read() and self.skipped_lines:  # blank lines only: nothing to damage
            return "holds no eagle-cycle-bench/1 records"
        return None

    def check_writable(self) -> None:
        """Make sure records can be appended before anything is measured, leaving the file as it was
        (an existing one is opened for appending, a missing one created and removed again).

        Raises:
            UsageError: it cannot be opened for writing (permissions, a read-only file system...).
        """
        try:
            if self.path.exists():
                os.close(os.open(self.path, os.O_WRONLY | os.O_APPEND))
            elif not os.path.lexists(self.path):     # a dangling link is left to append's O_CREAT
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
                os.unlink(self.path)
        except OSError as exc:
            raise UsageError(f"cannot write --output {self.path}: {exc.strerror or exc}") from None

    def read(self) -> list[dict]:
        """Our records in file order; other or damaged lines (records not :func:`well_formed` among
        them) are counted in ``skipped_lines``."""
        return list(self._iter())

    def _iter(self) -> Iterator[dict]:
        self.skipped_lines = 0
        if not self.path.exists():
            return
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise UsageError(f"cannot read --output {self.path}: {exc.strerror}") from None
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                self.skipped_lines += 1
                continue
            if isinstance(obj, dict) and obj.get("schema") == SCHEMA and well_formed(obj):
                yield obj
            else:
                self.skipped_lines += 1

    def done_keys(self) -> set[Key]:
        """Keys of ``ok`` records already in the file."""
        return {record_key(r) for r in self.read() if r.get("status") == "ok"}

    def append(self, rec: dict) -> None:
        """Append one record as one line, durably (fsync), never touching earlier bytes. Texts are
        written as :func:`~sglang_eagle_cycle.logfiles.text_label` writes them: a path whose bytes
        are no UTF-8 (the model, the server log) with ``\\xff`` escapes, strict UTF-8 JSON."""
        line = (json.dumps(text_safe(rec), separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")
        with deferred_signals():
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    size = os.fstat(fd).st_size
                    if size > 0 and not _ends_with_newline(self.path, size):
                        line = b"\n" + line
                    view = memoryview(line)
                    while view:
                        n = os.write(fd, view)
                        view = view[n:]
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as exc:   # a full disk, a file made read-only meanwhile: one line, exit 2
                raise UsageError(f"cannot write --output {self.path}: {exc.strerror or exc}") from None


def _ends_with_newline(path: Path, size: int) -> bool:
    with open(path, "rb") as f:
        f.seek(size - 1)
        return f.read(1) == b"\n"
