"""Open a server log for streaming: a plain or gzip file, or ``-`` for stdin, as text chunks.

Logs are read in chunks of whole lines (never the whole file), decoded as UTF-8 with
undecodable bytes replaced, ANSI escape sequences (terminal colours) removed wherever they are in
a line, and gzip is recognised by its magic bytes (whatever the name); bz2, xz and zstd are
recognised the same way and refused with a one-line reason (decompress first). An input is refused as
binary only when most of its first :data:`SNIFF_WINDOW` bytes are not text: a damaged line (a NUL
from a crash mid-write) costs that line only. Anything that cannot be a text log raises
:class:`LogUnreadable` with a short reason, so the caller can skip it and go on with the other
inputs::

    try:
        for chunk in iter_chunks("server.log.gz"):
            ...                     # str of whole lines, at most ~chunk_chars + one line
    except LogUnreadable as exc:
        print(exc)                  # "server.log.gz: no such file"
"""

from __future__ import annotations

import codecs
import contextlib
import gzip
import io
import json
import os
import re
import stat
import sys
import zlib
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator, Optional, Union

PathLike = Union[str, "os.PathLike[str]"]

#: Bytes looked at to recognise gzip and a leading run of NULs.
SNIFF_BYTES = 8192
#: Bytes read (after a leading run of NULs) to decide whether an input is text: several read blocks.
SNIFF_WINDOW = 1 << 18
#: An input whose first :data:`SNIFF_WINDOW` bytes hold a smaller share of text bytes is binary.
MIN_TEXT_SHARE = 0.5
#: Characters that are not text: C0 controls other than tab, line feed, vertical tab, form feed,
#: carriage return and escape (colour codes), DEL, C1 controls, and U+FFFD (an undecodable byte).
_NOT_TEXT_RE = re.compile("[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f-\x9f\ufffd]+")
#: ANSI escape sequences: CSI (colours, ``ESC [ 0 m``), OSC (``ESC ] ... BEL``), two-byte escapes.
#: ``ESC ( B`` and the other designations (``tput sgr0`` writes one), and one-character escapes such
#: as ``ESC 7``, ``ESC =`` or ``ESC c``.
ANSI_RE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b\n]*(?:\x07|\x1b\\)?|[ -/]+[0-~]|[0-Z\\-~])")
#: appended to a file's last line when it has no line end and is one of ours (an ``[eagle-cycle]``
#: or ``Decode batch`` line): a server still writing it, or one that crashed mid-line, may have cut
#: it at a field boundary where it still parses (``gap_ms=0.2`` for ``gap_ms=0.24``); the text
#: makes the line damaged, and :func:`cut_reason` names why
CUT_MARK = " \u2026[no line end: cut while being written]"
#: the reason ``--show-rejected`` gives for such a line
CUT_REASON = "the input's last line, with no line end: cut while the server was writing it"
#: Characters per chunk handed to the parser (whole lines are completed after it).
CHUNK_CHARS = 1 << 22
#: A "line" longer than this (no newline in sight) is cut, so memory stays bounded.
MAX_LINE_CHARS = 1 << 26
#: Bytes per read: a truncated gzip loses at most this much decompressed text before the error.
READ_BYTES = 1 << 16
STDIN_LABEL = "<stdin>"


class LogUnreadable(Exception):
    """The input cannot be read as a text log (missing, a directory, empty, binary, bad gzip)."""

    def __init__(self, label: str, reason: str):
        super().__init__(f"{label}: {reason}")
        self.label = label
        self.reason = reason


class LogReadStopped(Exception):
    """Reading stopped part-way (truncated gzip, I/O error); what was read before stays valid."""

    def __init__(self, label: str, reason: str):
        super().__init__(f"{label}: reading stopped early: {reason}")
        self.label = label
        self.reason = reason


def label_of(path: PathLike) -> str:
    """The name a path is reported under: ``<stdin>`` for ``-``, else the path as given, as
    :func:`text_label` writes it (a name whose bytes are no UTF-8 with ``\\xff`` escapes)."""
    text = os.fsdecode(path)
    return STDIN_LABEL if text == "-" else text_label(text)


def _escape_surrogate(ch: str) -> str:
    """One lone surrogate as text: ``\\xff`` for a byte that is no UTF-8 (Python reads a file name's
    byte 0xff as U+DCFF, ``surrogateescape``), ``\\ud800`` for any other."""
    code = ord(ch)
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def text_label(label: str) -> str:
    """``label`` as text every writer takes: the bytes of a file name that are no UTF-8 (which Python
    holds as lone surrogates, ``bad\\udcffname.log``) written as ``\\xff`` escapes (``bad\\xffname.log``,
    what ``bytes.decode("utf-8", "backslashreplace")`` gives for the name's bytes), so that a UTF-8
    file, a strict JSON reader, a strict terminal or a font renderer does not fail on them. Text that
    is UTF-8 is returned as it is, so a name that is valid UTF-8 and holds ``\\xff`` itself reads the
    same (:func:`path_of_label` tries the name as written first). The CLI's standard output and error
    write such characters the same way (:func:`name_escapes`)."""
    try:
        label.encode("utf-8")
        return label
    except UnicodeEncodeError:
        pass
    return "".join(_escape_surrogate(c) if "\ud800" <= c <= "\udfff" else c for c in label)


def text_safe(value):
    """``value`` (a JSON document: objects, lists, text, numbers) with every text, object keys
    included, as :func:`text_label` writes it: what ``json.dumps`` then writes is strict UTF-8 JSON
    whatever file names or log text it holds (``json.dumps`` writes a lone surrogate as a ``\\udcff``
    escape, which strict readers such as jq or serde refuse or replace)."""
    if isinstance(value, str):
        return text_label(value)
    if isinstance(value, dict):
        return {text_label(k) if isinstance(k, str) else k: text_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [text_safe(v) for v in value]
    return value


_BYTE_ESCAPE = re.compile(r"\\x([89a-f][0-9a-f])")


def path_of_label(label: str) -> str:
    """The path a :func:`text_label` name was written for: ``label`` itself when that file exists,
    else ``label`` with its ``\\x80``-``\\xff`` escapes read back as the bytes they stand for (a bench
    record's ``server_log`` whose name is no UTF-8); ``label`` when neither exists."""
    if "\\x" not in label or os.path.lexists(label):
        return label
    raw = _BYTE_ESCAPE.sub(lambda m: chr(0xDC00 + int(m.group(1), 16)), label)
    return raw if os.path.lexists(raw) else label


def name_escapes(exc: UnicodeError):
    """A ``codecs`` error handler (registered as ``eagle_cycle_names``) that writes what a stream's
    encoding cannot hold as :func:`text_label` does: a file name's undecodable byte as ``\\xff``,
    any other character as its ``\\u`` escape."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    bad = exc.object[exc.start:exc.end]
    return "".join(_escape_surrogate(c) if "\ud800" <= c <= "\udfff" else c.encode("ascii", "backslashreplace").decode()
                   for c in bad), exc.end


@contextlib.contextmanager
def names_escaped_in_output():
    """Within the block, standard output and error write a file name whose bytes are no UTF-8 as
    the JSON documents and the tables do (:func:`text_label`: ``run-\\xff.log``), where they would
    have failed (a strict UTF-8 terminal: a traceback) or written it otherwise (stderr's ``\\udcff``,
    the raw byte under the C locale). Each stream's error handler is restored on the way out."""
    try:
        codecs.lookup_error("eagle_cycle_names")
    except LookupError:
        codecs.register_error("eagle_cycle_names", name_escapes)
    changed = []
    for stream in (sys.stdout, sys.stderr):
        errors = getattr(stream, "errors", None)
        try:
            if errors is not None:
                stream.reconfigure(errors="eagle_cycle_names")
                changed.append((stream, errors))
        except (AttributeError, ValueError, OSError):
            pass
    try:
        yield
    finally:
        for stream, errors in changed:
            try:
                stream.reconfigure(errors=errors)
            except (AttributeError, ValueError, OSError):
                pass


def is_device(path: PathLike) -> bool:
    """Whether ``path`` (links followed) is a character or block device (``/dev/zero``, a disk):
    a stream that may never end, or not a log at all. Pipes and FIFOs are not devices."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISBLK(mode)


def _open_binary(path: PathLike, label: str) -> tuple[BinaryIO, bool]:
    """(stream, close_it) for a path or stdin; raises LogUnreadable."""
    if os.fspath(path) == "-":
        return sys.stdin.buffer, False
    p = Path(path)
    if p.is_dir():
        raise LogUnreadable(label, "is a directory, not a log file")
    if is_device(p):
        raise LogUnreadable(label, "a device, not a log file or pipe")
    try:
        return open(p, "rb", buffering=1 << 16), True
    except FileNotFoundError:
        raise LogUnreadable(label, "no such file") from None
    except PermissionError:
        raise LogUnreadable(label, "permission denied") from None
    except OSError as exc:
        raise LogUnreadable(label, exc.strerror or str(exc)) from None


def _read_error(exc: BaseException) -> str:
    """Why a read failed, in words: a truncated gzip says so (zlib/gzip's own text is cryptic)."""
    if isinstance(exc, EOFError):
        return "truncated gzip: the data ends before its end-of-stream marker"
    if isinstance(exc, (zlib.error, gzip.BadGzipFile)):
        return f"corrupt gzip data ({exc})"
    return str(exc) or type(exc).__name__


#: other compressors, by the magic bytes their files start with: refused by name, not as binary data
#: (bz2: ``BZh``, the block size, and a block's or the empty stream's marker)
_COMPRESSED = (("bz2", re.compile(rb"\ABZh[1-9](?:\x31\x41\x59\x26\x53\x59|\x17\x72\x45\x38\x50\x90)")),
               ("xz", re.compile(rb"\A\xfd7zXZ\x00")),
               ("zstd", re.compile(rb"\A\x28\xb5\x2f\xfd")))


def compressed_with(head: bytes) -> Optional[str]:
    """``"bz2"``, ``"xz"`` or ``"zstd"`` when ``head`` (an input's first bytes) opens such a stream;
    None otherwise."""
    return next((name for name, magic in _COMPRESSED if magic.match(head)), None)


def _peek(stream, n: int) -> bytes:
    if hasattr(stream, "peek"):
        return stream.peek(n)[:n]
    return b""


def text_share(data: bytes) -> float:
    """Share (0..1) of the characters of ``data`` (decoded as UTF-8) that are text: neither an
    undecodable byte nor a control character (C0 other than whitespace and escape, DEL, C1).
    1.0 for no data; random bytes give about 0.45."""
    if not data:
        return 1.0
    text = data.decode("utf-8", errors="replace")
    return len(_NOT_TEXT_RE.sub("", text)) / len(text)


def _sniffed(raw: BinaryIO, label: str) -> tuple[BinaryIO, bytes, Optional[BaseException]]:
    """``(stream, head, error)``: ``raw``, wrapped in gzip when it starts with the gzip magic, with
    a leading run of NULs skipped (a log truncated by ``copytruncate``); ``head``, its first
    :data:`SNIFF_WINDOW` bytes, already read; ``error``, what stopped that read part-way (None
    when it did not).

    Raises:
        LogUnreadable: empty; bz2, xz or zstd data (:func:`compressed_with`; inside gzip too);
            binary (less than :data:`MIN_TEXT_SHARE` of ``head`` is text, the share given in the
            reason); a gzip that yields nothing.
    """
    if not hasattr(raw, "peek"):
        raw = io.BufferedReader(raw)  # pragma: no cover - stdin is buffered in CPython
    try:
        head = _peek(raw, SNIFF_BYTES)
        stream: BinaryIO = raw
        if head[:2] == b"\x1f\x8b":
            stream = gzip.GzipFile(fileobj=raw, mode="rb")
            head = _peek(stream, SNIFF_BYTES)
    except (OSError, EOFError, zlib.error) as exc:
        reason = _read_error(exc)
        if isinstance(exc, EOFError):
            reason = "truncated gzip: the data ends before anything could be decoded"
        raise LogUnreadable(label, reason) from None
    packed = compressed_with(head)
    if packed is not None:   # not "binary data": say what it is and what to do
        raise LogUnreadable(label, f"compressed with {packed}: decompress it first (gzip is read directly)"
                            if stream is raw else f"gzip of {packed}-compressed data: decompress the {packed} "
                            "inside too (gzip alone is read directly)")
    if head[:1] == b"\x00":
        _skip_nul_run(stream, label)
    blocks: list[bytes] = []
    got = 0
    error: Optional[BaseException] = None
    while got < SNIFF_WINDOW:
        try:
            block = _read_block(stream, min(READ_BYTES, SNIFF_WINDOW - got))
        except (OSError, EOFError, zlib.error) as exc:
            if not got:
                reason = _read_error(exc)
                if isinstance(exc, EOFError):
                    reason = "truncated gzip: the data ends before anything could be decoded"
                raise LogUnreadable(label, reason) from None
            error = exc
            break
        if not block:
            break
        blocks.append(block)
        got += len(block)
    head = b"".join(blocks)
    if not head:
        raise LogUnreadable(label, "empty file")
    share = text_share(head)
    if share < MIN_TEXT_SHARE:
        raise LogUnreadable(label, f"binary data, not a text log (only {share:.0%} of the first "
                                   f"{len(head):,} bytes is text)")
    return stream, head, error


def _skip_nul_run(stream: BinaryIO, label: str) -> bytes:
    """Read past a leading run of NUL bytes; the next :data:`SNIFF_BYTES` bytes (peeked).

    logrotate's ``copytruncate`` leaves one: the server keeps writing at its old offset into the
    truncated file, and the hole reads as NULs.
    """
    try:
        while True:
            block = _peek(stream, SNIFF_BYTES)
            run = len(block) - len(block.lstrip(b"\x00"))
            if not block or run == 0:
                return block
            stream.read(run)
    except (OSError, EOFError, zlib.error) as exc:
        raise LogUnreadable(label, _read_error(exc)) from None


def _crlf(text: str) -> str:
    """``\r\n`` line ends as ``\n``, a lone ``\r`` too (a progress bar's redraws, or a file of
    CR-only line ends: each record its own line), ANSI escape sequences removed."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return ANSI_RE.sub("", text) if "\x1b" in text else text


def _last(text: str) -> str:
    """The end of a file's text: its last line marked with :data:`CUT_MARK` when it has no line end
    and is an ``[eagle-cycle]`` or ``Decode batch`` line (JSONL records are left: a cut one is no JSON)."""
    text = _crlf(text)
    if text.endswith("\n"):
        return text
    line = text[text.rfind("\n") + 1:]
    if ("[eagle-cycle]" in line or "Decode batch" in line) and not line.lstrip().startswith("{"):
        return text + CUT_MARK
    return text


def cut_reason(line: str) -> Optional[str]:
    """Why :func:`iter_chunks` marked ``line`` damaged (its file's unterminated last line, or a
    collector's JSON record cut short), None when it did not."""
    line = line.rstrip("\n")
    if line.endswith(CUT_MARK):
        return CUT_REASON
    if line.endswith(CUT_RECORD_MARK):
        return "a log collector's JSON record cut short (not a whole record)"
    return None


def unmarked(line: str) -> str:
    """``line`` as the input holds it, without the mark :func:`iter_chunks` put on a cut one."""
    return line.rstrip("\n").removesuffix(CUT_MARK).removesuffix(CUT_RECORD_MARK)


def _read_block(stream: BinaryIO, size: int) -> bytes:
    read1 = getattr(stream, "read1", None)
    return read1(size) if read1 is not None else stream.read(size)


#: the text field of a log collector's JSON record per line: Docker's json-file driver
#: (``{"log": "...\\n", "stream": "stderr", "time": "..."}``), ``journalctl -o json`` (``MESSAGE``)
JSON_WRAPPERS = (("log", ("stream", "time")), ("MESSAGE", ("__REALTIME_TIMESTAMP", "_PID", "PRIORITY")))


#: appended to a line of a collector-wrapped log that is no whole JSON record but holds one of ours
#: (a record cut short: ``tail -c``, a crash mid-write), so that it is damaged, not read in part
CUT_RECORD_MARK = " \u2026[not a whole JSON record of the log collector]"
#: lines looked at to tell a collector-wrapped log (:func:`json_wrapper`)
WRAPPER_SNIFF_LINES = 64


def _wrapped_text(rec, key: str) -> Optional[str]:
    """The text a collector's record holds in ``key``: a string, or journald's array of byte values
    (a message with control characters or invalid UTF-8); None otherwise."""
    value = rec.get(key) if isinstance(rec, dict) else None
    if isinstance(value, list) and value and all(isinstance(b, int) and 0 <= b < 256 for b in value):
        return bytes(value).decode("utf-8", errors="replace")
    return value if isinstance(value, str) else None


def json_wrapper(head: bytes) -> Optional[str]:
    """The text field when the first JSON object among ``head``'s first lines is a log collector's
    record (:data:`JSON_WRAPPERS`), else None (plain text, or JSONL of our own or of a benchmark).
    Lines that are no JSON object (a record cut by ``tail -c``, a plain line) are passed over."""
    for raw in head.lstrip(b"\xef\xbb\xbf\x00").split(b"\n")[:WRAPPER_SNIFF_LINES]:
        line = raw.strip()
        if not line.startswith(b"{"):
            continue
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(rec, dict):
            return None
        for key, beside in JSON_WRAPPERS:
            if _wrapped_text(rec, key) is not None and any(k in rec for k in beside):
                return key
        return None
    return None


#: characters of an input's first text kept to say what it is when nothing in it could be read
HEAD_CHARS = 1 << 14
_TRACE_START = re.compile(r'\A\s*\{\s*"traceEvents"\s*:')
_SCHEMA_START = re.compile(r'\A\s*\{\s*"schema"\s*:\s*"([^"\\\n]{1,100})"')
#: the start of a JSON document or record: an object, or an array of arrays, objects or strings (a
#: line that starts "[" is more often a log line's prefix: "[2026-12-01 10:00:00 TP0] ...")
_JSON_START = re.compile(r'\A\s*(?:\{|\[\s*(?:[\[{"\]]|\Z))')


def command_arg(name: str) -> str:
    """``name`` as a shell argument in a suggested command (``-`` for stdin)."""
    import shlex

    return "-" if name == STDIN_LABEL else shlex.quote(name)


def _json_error(text: str) -> Optional[str]:
    """Why ``text``, a whole input that opens like JSON, is neither one JSON document nor JSON lines
    (one value a line), as ``"line L, column C: MESSAGE"``; None when it is either. A document is
    assumed where its first line alone is no JSON value, JSON lines where it is one."""
    text = text.rstrip()   # a cut-off document's error then points at its last character, not past it
    lines = text.split("\n")
    first = next((ln for ln in lines if ln.strip()), "")
    try:
        json.loads(first)
        as_lines = len(lines) > 1
    except ValueError:
        as_lines = False
    except RecursionError:
        as_lines = True
    pieces = [(i, ln) for i, ln in enumerate(lines) if ln.strip()] if as_lines else [(0, text)]
    for i, piece in pieces:
        try:
            json.loads(piece)
        except json.JSONDecodeError as exc:
            at_end = i + exc.lineno - 1 == len(lines) - 1 and exc.pos >= len(piece.rstrip())
            return (f"line {i + exc.lineno}, column {exc.colno}: {exc.msg}"
                    + ("; the input ends there: cut short?" if at_end else ""))
        except (ValueError, RecursionError):   # a number over Python's digit limit, deep nesting: JSON still
            continue
    return None


def _advise_hint(head: str, name: str, whole: bool) -> str:
    """What ``eagle-cycle advise`` makes of an inspect ``--json`` document (``head``; ``whole``: all
    of it), as the end of :func:`other_json`'s words: the command that reads it where advise takes
    a run or a no-speculation baseline from it (:func:`advise.runs_from_inspect`, what advise calls
    on such a document), else what the document lacks. A document of stock Decode batch lines alone
    does not carry the depth they ran at (``speculative_num_steps``, on the log's ``server_args=``
    line), and advise has had to refuse it (exit 2) after inspect had sent the user there. A
    document longer than :data:`HEAD_CHARS` is not read here: it gets the command."""
    command = f": read it with `eagle-cycle advise {command_arg(name)}`"
    if not whole:
        return command
    error = _json_error(head)
    if error is not None:
        return f", but not valid JSON ({error})"
    from .advise import runs_from_inspect
    from .errors import UsageError

    try:
        doc = json.loads(head)
        runs, baselines, _ = runs_from_inspect(doc, name)
    except (ValueError, RecursionError):   # a number over Python's digit limit, deep nesting
        return command
    except UsageError as exc:
        return f"; `eagle-cycle advise` refuses it too ({exc})"
    if runs:
        return command
    if baselines:
        return (": its Decode batch lines ran without speculation, a no-spec baseline: give it to `eagle-cycle "
                f"advise` beside a speculative run's log or document (`eagle-cycle advise RUN {command_arg(name)}`)")
    db = doc.get("decode_batch")
    if isinstance(db, dict) and db.get("accept_len_mean") is not None:
        return (", made from stock Decode batch lines without the depth they ran at (a document does not carry the "
                "log's server_args= line, which names the server's --speculative-num-steps, and their accept len "
                "and accept rate pin none): `eagle-cycle advise` cannot use it either, and takes the depth from no "
                "flag: give advise the server log itself, with its start-up server_args= line")
    return ": it holds no cycle group and no Decode batch line `eagle-cycle advise` can use either"


def other_json(head: str, name: str, damaged: bool = False, whole: bool = False) -> Optional[str]:
    """What an input is when it gave nothing to inspect and its text (``head``: its first
    characters as read) is JSON of another kind than ours, in words for ``"NAME: ..."``; None
    otherwise. Known kinds: a Chrome trace (inspect's ``--trace`` or another tool's), an inspect
    ``--json`` document, a sweep's bench JSONL and other ``eagle-cycle-*`` schemas; any other JSON
    only when none of its lines was a damaged line of ours (``damaged``: those keep their own hint).
    Where ``head`` is the ``whole`` input and opens like JSON but is none (``{`` alone, a document
    cut short), it is named as invalid JSON with the place of the first error (:func:`_json_error`).
    An inspect document is sent to ``eagle-cycle advise`` only where advise can use it
    (:func:`_advise_hint`). ``name``: the input's label, for the command that reads it instead."""
    if _TRACE_START.match(head):
        if '"accept_len":' in head and '"draft_tokens":' in head:
            return ("a Chrome trace written by `eagle-cycle inspect --trace` (open it in https://ui.perfetto.dev), "
                    "not a server log")
        return "a Chrome trace (trace-event JSON), not a server log"
    schema = _SCHEMA_START.match(head)
    kind = schema.group(1) if schema else None
    if kind == "eagle-cycle-inspect/1":
        return "an `eagle-cycle inspect --json` document, not a server log" + _advise_hint(head, name, whole)
    if kind == "eagle-cycle-bench/1":
        return f"eagle-cycle bench JSONL (a sweep's records), not a server log: read it with `eagle-cycle advise " \
               f"{command_arg(name)}`"
    if kind is not None and kind.startswith("eagle-cycle-"):
        return f"a {kind} document, not a server log"
    if not damaged and _JSON_START.match(head):
        error = _json_error(head) if whole else None
        if error is not None:
            return f"not valid JSON ({error}), not a server log"
        return ("JSON of another kind, not a server log (no [eagle-cycle] line, eagle-cycle JSONL record or "
                "Decode batch line in it)")
    return None


def _unwrapped(text: str, key: str, carry: list[str]) -> str:
    """``text`` (whole JSON lines) as the log lines their ``key`` fields hold. Docker splits a line
    over 16 KiB into records whose text has no line end: those join the next (``carry`` holds an
    unfinished one between chunks). A line that is not such a record is kept as it is, marked
    damaged (:data:`CUT_RECORD_MARK`) where it opens like one and holds a line of ours."""
    out = []
    # split at line feeds only: a record may hold U+2028 and other separators unescaped
    for line in (ln + "\n" for ln in text.split("\n")):
        if line == "\n":
            continue
        try:
            value = _wrapped_text(json.loads(line), key)
        except (ValueError, RecursionError):
            value = None
        if value is None:
            if line.lstrip().startswith("{") and ("[eagle-cycle]" in line or "Decode batch" in line):
                line = line.rstrip("\r\n") + CUT_RECORD_MARK + "\n"
            out.append("".join(carry) + line)
            carry.clear()
            continue
        if key == "log" and not value.endswith("\n"):
            carry.append(value)
            continue
        out.append("".join(carry) + value.rstrip("\n") + "\n")
        carry.clear()
    return "".join(out)


def iter_chunks(path: PathLike, chunk_chars: int = CHUNK_CHARS) -> Iterator[str]:
    """Yield the log as text chunks of whole lines (the last may lack its newline).

    ``\r\n`` line ends become ``\n``; undecodable bytes become U+FFFD; ANSI escape sequences
    (terminal colours, anywhere in a line) are removed. A log a collector wrapped in JSON, a record
    per line (Docker's json-file driver, ``journalctl -o json``), yields the lines its records hold.

    Args:
        path: a file path (plain or gzip), or ``-`` for stdin (plain or gzip).
        chunk_chars: about how many characters a chunk holds (more when one line is longer).

    Raises:
        LogUnreadable: before the first chunk, when the input cannot be read as a text log
            (missing, a directory, empty, a bad gzip, or binary: less than :data:`MIN_TEXT_SHARE`
            of the first :data:`SNIFF_WINDOW` bytes is text).
        LogReadStopped: after the last good chunk, when reading fails part-way (e.g. a truncated
            gzip); everything decoded before the failure has been yielded.
    """
    label = label_of(path)
    raw, close_it = _open_binary(path, label)
    try:
        stream, head, error = _sniffed(raw, label)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pending = ""
        first = True
        wrapper, carry = json_wrapper(head), []

        def text_of(t: str) -> str:
            return _unwrapped(t, wrapper, carry) if wrapper is not None else t
        while True:
            try:
                if head:
                    data, head = head, b""
                elif error is not None:
                    raise error
                else:
                    data = _read_block(stream, READ_BYTES)
            except (OSError, EOFError, zlib.error) as exc:
                if pending:
                    yield _last(text_of(pending) + "".join(carry))
                raise LogReadStopped(label, _read_error(exc)) from None
            if not data:
                pending += decoder.decode(b"", final=True)
                if pending or carry:
                    yield _last(text_of(pending) + "".join(carry))
                return
            pending += decoder.decode(data)
            if first:   # a byte-order mark (an editor's, a Windows tool's) is no part of the first line
                first = False
                pending = pending.removeprefix("\ufeff")
            if len(pending) < chunk_chars:
                continue
            cut = pending.rfind("\n")
            if cut < 0:   # a file of CR-only line ends
                cut = pending.rfind("\r")
            if cut < 0 and len(pending) < MAX_LINE_CHARS:
                continue
            if cut < 0:   # no line end for MAX_LINE_CHARS: hand it over as a line of its own
                cut = len(pending) - 1
            text, pending = pending[: cut + 1], pending[cut + 1:]
            yield _crlf(text_of(text))
    finally:
        if close_it:
            raw.close()


def check_output(path_text: str, flag: str, force: bool, inputs: Iterable[tuple[str, str]] = (),
                 in_place: bool = False) -> Path:
    """The output path ``path_text`` given as ``flag``, once it is known that it may be written.

    Commands check every output before they write any, so a refused one leaves no other behind.
    ``inputs``: ``(path, label)`` for every file the command reads (``label`` is appended to the
    message, e.g. ``" (--baseline)"``); ``"-"`` stands for standard input, which is compared by the
    file behind it when that is a regular file (``< FILE``; ``/dev/stdin`` as the output too).
    ``in_place``: the command opens the path and writes into it (advise) instead of renaming a new
    file over it (inspect): then, with ``force``, an existing FIFO or device is written to, not
    replaced, and is allowed (``--adaptive-config >(cat)``).

    Raises:
        UsageError: one line, ``"FLAG PATH: why"``: the name is empty; the path is the regular file
            on standard output or error (``--force`` would truncate it); the path is one of the
            inputs, a dangling symlink (writing through it would create its target), a directory, a
            name ending with a slash, ``/.`` or ``/..``, or an existing file that is not a regular one
            (a device, FIFO or socket: ``force`` would replace it with a regular file; unless
            ``in_place``) (even with ``force``); it exists without ``force``; its directory does not
            exist.
    """
    from .errors import UsageError

    if not path_text.strip():
        raise UsageError(f"{flag}: the file name is empty")
    path = Path(path_text)
    for fd, what in ((1, "standard output"), (2, "standard error")):
        if _is_fd_file(path, fd):   # reopened with truncation, it would empty what was written there
            raise UsageError(f"{flag} {path}: is the file on {what}; give a file of its own")
        if _is_fd(path, fd):        # /dev/stdout on a pipe or terminal: mixed into what is printed there
            raise UsageError(f"{flag} {path}: is {what}, which carries the command's own output; give a file")
    for name, label in inputs:
        if _is_fd_file(path, 0) if name == "-" else same_file(name, path):
            where = "the file on standard input, one of the inputs" if name == "-" else "one of the inputs"
            raise UsageError(f"{flag} {path}: is {where}{label}; not written over it")
    if path.is_symlink() and not path.exists():
        raise UsageError(f"{flag} {path}: a dangling symlink (to {os.readlink(path)}); not written through it")
    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a directory")
    if path_text.endswith(("/", os.sep)):   # Path drops the slash: "out/" would write the file "out"
        raise UsageError(f"{flag} {path_text}: ends with a slash, a directory's name; give a file name")
    if os.path.basename(path_text) in (".", ".."):   # Path drops "/." too: "out/." would write "out"
        raise UsageError(f"{flag} {path_text}: ends with /{os.path.basename(path_text)}, a directory's name; "
                         "give a file name")
    if path.exists() and not path.is_file() and not in_place:
        # a rename over it (the atomic writers) would make a device or FIFO a regular file
        raise UsageError(f"{flag} {path}: not a regular file (a device, FIFO or socket); not replaced by one")
    if os.path.lexists(path) and not force:
        raise UsageError(f"{flag} {path}: file exists, not overwritten (use --force)")
    parent = path.resolve().parent
    if not parent.is_dir():
        raise UsageError(f"{flag} {path}: no directory {parent}")
    return path


def _is_fd(path: PathLike, fd: int) -> bool:
    """Whether ``path`` opens what this process has as ``fd``, whatever it is (``/dev/stdout`` on a
    pipe or a terminal). Never raises."""
    try:
        st_fd = os.fstat(fd)
        st = os.stat(path)
        return (st.st_dev, st.st_ino) == (st_fd.st_dev, st_fd.st_ino)
    except (OSError, ValueError):
        return False


def _is_fd_file(path: PathLike, fd: int = 0) -> bool:
    """Whether ``path`` is the regular file open as this process's ``fd`` (0: standard input).
    Never raises."""
    import stat

    try:
        st_in = os.fstat(fd)
        if not stat.S_ISREG(st_in.st_mode) or not os.path.exists(path):
            return False
        st = os.stat(path)
        return (st.st_dev, st.st_ino) == (st_in.st_dev, st_in.st_ino)
    except (OSError, ValueError):
        return False


def names_input(path: PathLike, name: str) -> bool:
    """Whether the file ``path`` (a log a bench record names) is the input given as ``name``
    (``"-"``: the regular file behind standard input). Never raises."""
    try:
        if isinstance(path, str):
            path = path_of_label(path)   # a record's name of a file whose name is no UTF-8
        if name == "-":
            return _is_fd_file(path, 0)
        return os.path.exists(path) and same_file(path, name)
    except (OSError, ValueError):
        return False


def same_file(a: PathLike, b: PathLike) -> bool:
    """True when ``a`` and ``b`` name one file: through symbolic links, hard links and relative paths.

    Used to refuse an output path that is one of the inputs (never overwritten, even with --force).
    """
    if os.path.exists(a) and os.path.exists(b):
        return os.path.samefile(a, b)
    return os.path.realpath(a) == os.path.realpath(b)
