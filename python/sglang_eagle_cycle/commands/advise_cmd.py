"""Pick the speculation depth from measured acceptance and phase costs, not from a blind sweep.

Each extra draft step adds the probability that every draft so far is accepted, and costs a
draft forward plus a wider target verify and draft-extend. From one or two measured runs the
advisor ranks every depth (1..--max-steps, and speculation off), at every batch size asked for,
and says why the winner wins.

INPUT is any of:
  * an ``eagle-cycle inspect --json`` document (optional parts may be missing or null);
    a file wrapping one as ``{"inputs": {"inspect_json": {...}, "baseline_no_spec_tok_s": X}}``
    (the repository's ``data/benchmarks/seed_kimi_k25.json``) is unwrapped and its baseline used;
  * server logs or our JSONL (anything ``eagle-cycle inspect`` reads);
    a log of a server without speculation supplies the baseline;
  * ``bench_eagle_cycle.py`` output (``eagle-cycle-bench/1`` JSONL; steps 0 records are baselines).
``-`` reads one of them from stdin (copied to a temporary file first, a log too: advise reads it
more than once; removed at exit).
Or a published table: ``--table FILE --model NAME --benchmark NAME [--draft NAME] [--fit S,K,T ...]``
in the SpecBundle format (draft names match case- and punctuation-insensitively).

Examples::

    eagle-cycle advise server.log --baseline-tok-s 88.8 --target-config ./Kimi-K2.5
    eagle-cycle advise inspect.json --batch-sizes 1 8 32 --adaptive-config adaptive.json
    eagle-cycle advise inspect.json --batch-sizes 1 8 --adaptive-candidates cost.json   # SGLANG_EAGLE_CYCLE_ADAPTIVE=cost
    eagle-cycle advise --table specbundle.json --model Llama-3.1-8B-Instruct --benchmark gsm8k \\
        --draft specforge --fit 3,1,4 5,1,6 --steps-candidates 0 3 5 7 --json

Exit codes: 0 advice given, 2 unusable input (one line on stderr).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import itertools
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from ..sweep.records import SCHEMA as BENCH_SCHEMA

from ..argtypes import (MAX_BS, MAX_STEPS, MAX_TOK_S, MIN_STOCK_INTERVALS, MIN_TOK_S, StoreOnce, baseline_item,
                        int_in, negative_values_are_values, strict_int)

DEFAULT_MAX_STEPS = 10


def _fit_triple(text: str) -> tuple[int, int, int]:
    try:
        parts = tuple(strict_int(x) for x in text.split(","))
    except ValueError:
        parts = ()
    if len(parts) != 3 or min(parts) < 1:
        raise argparse.ArgumentTypeError(f"expected STEPS,TOPK,TOKENS (positive ints), got {text!r}")
    return parts  # type: ignore[return-value]


def add_cli_args(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    negative_values_are_values(parser)  # `--baseline-tok-s -1:88` reaches the value check
    parser.add_argument("inputs", nargs="*", metavar="INPUT",
                        help="inspect --json documents, logs/JSONL inspect reads, or bench JSONL")
    t = parser.add_argument_group("published table")
    t.add_argument("--table", metavar="FILE", help="SpecBundle-format table (instead of INPUT)")
    t.add_argument("--model", help="model in --table (also filters bench records)")
    t.add_argument("--benchmark", help="benchmark in --table")
    t.add_argument("--draft", help="draft in --table (required when there are several; also filters bench records)")
    t.add_argument("--fit", nargs="+", action="extend", type=_fit_triple, metavar="STEPS,TOPK,TOKENS",
                   help="table rows to learn from (default all topk-1 rows); the others are predicted")
    m = parser.add_argument_group("model")
    m.add_argument("--baseline-tok-s", nargs="+", action="extend", type=baseline_item, metavar="[BS:]TOK_S",
                   help="no-spec output tok/s at the measured batch size (BS:TOK_S for several)")
    m.add_argument("--target-config", metavar="PATH",
                   help="target config.json / model dir / cached HF id: MoE verify-cost shape")
    depth = m.add_mutually_exclusive_group()   # both given: one would be ignored without a word
    depth.add_argument("--max-steps", type=int_in(1, MAX_STEPS), default=None,
                       help=f"deepest candidate depth, 1..{MAX_STEPS} (default {DEFAULT_MAX_STEPS}, and every "
                            "measured depth; given, deeper measured depths still inform the model but are "
                            "not candidates)")
    depth.add_argument("--steps-candidates", nargs="+", action="extend", type=int_in(0, MAX_STEPS), metavar="STEPS",
                       help="candidate depths instead of 1..--max-steps (0 = speculation off, always "
                            "considered when a baseline is known)")
    m.add_argument("--batch-sizes", nargs="+", action="extend", type=int_in(1, MAX_BS), metavar="BS",
                   help="batch sizes to advise for (default: the measured ones; given twice, both lists)")
    o = parser.add_argument_group("output")
    o.add_argument("--json", action="store_true", help="print one JSON object")
    o.add_argument("--adaptive-config", metavar="OUT.json", action=StoreOnce,
                   help="write an SGLang --speculative-adaptive-config pinning the depth per batch-size bucket")
    o.add_argument("--adaptive-candidates", metavar="OUT.json", action=StoreOnce,
                   help="write a --speculative-adaptive-config for SGLANG_EAGLE_CYCLE_ADAPTIVE=cost: the depths "
                        "still in contention per batch-size bucket, and the no-spec tok/s")
    o.add_argument("--cuda-graph-bs", nargs="+", action="extend", type=int_in(1, MAX_BS), metavar="BS",
                   help="the server's CUDA-graph batch sizes, for the buckets of --adaptive-config / "
                        "--adaptive-candidates (default: SGLang 0.5.23's speculative list)")
    o.add_argument("--force", action="store_true",
                   help="overwrite an existing --adaptive-config / --adaptive-candidates file")


# ---------------------------------------------------------------------------------------------
# reading inputs
# ---------------------------------------------------------------------------------------------


def _open_text(path: Path):
    """``path`` as text, through gzip when its content is gzip (whatever its name)."""
    import gzip

    with path.open("rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def _sniff(path: Path, label: Optional[str] = None) -> str:
    """What an INPUT is, by its content, not its name: ``"json"`` (one JSON document: an inspect
    document, a seed file, a table), ``"bench"`` (eagle-cycle-bench/1 JSONL) or ``"log"`` (anything
    inspect reads, our cycle JSONL included). Unreadable files are ``"log"``: inspect says why.

    Raises:
        UsageError: a bench record of another schema version (named as ``label``, the INPUT as given)."""
    import gzip

    from ..logfiles import json_wrapper

    try:
        with _open_text(path) as fh:
            head = fh.read(1 << 16)
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile):
        return "log"
    body = head.lstrip("\ufeff \t\r\n")
    if not body.startswith(("{", "[")):
        return "log"
    first = body.split("\n", 1)[0]
    if "\n" not in body and len(head) == 1 << 16:
        # a first line longer than the head (a bench record holding a crashed server's log tail)
        try:
            with _open_text(path) as fh:
                first = ""
                while not first.strip("\ufeff \t\r\n"):
                    first = fh.readline(1 << 26)
                    if not first:
                        break
                first = first.lstrip("\ufeff \t\r")
        except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile):
            return "log"
    try:
        obj = json.loads(first)
    except RecursionError:
        return "json"
    except ValueError:
        # a document over several lines (indented); a line starting "[" is a log line's prefix
        # ("[2026-12-01 10:00:00 TP0] ...") unless it opens an array of arrays, objects or strings
        return "json" if body.startswith("{") or body[1:].lstrip()[:1] in ("", "[", "{", '"', "]") else "log"
    if isinstance(obj, dict) and obj.get("schema") == BENCH_SCHEMA:
        return "bench"
    if isinstance(obj, dict) and isinstance(obj.get("schema"), str) and obj["schema"].startswith(
            BENCH_SCHEMA.split("/")[0] + "/"):
        # another version's bench record: said so, not read as one document ("Extra data" at line 2)
        from ..errors import UsageError

        raise UsageError(f"{label or path}:1: bench record schema {obj['schema']!r} is not {BENCH_SCHEMA}, the one this "
                         "version reads (rerun benchmarks/bench_eagle_cycle.py with this version)")
    if isinstance(obj, dict) and "cycle" in obj and "bs" in obj and "groups" not in obj:
        return "log"           # one JSON object per line: our cycle JSONL, read by inspect
    if json_wrapper(first.encode("utf-8", "replace")) is not None:
        return "log"           # a log collector's JSON records (docker json-file, journalctl -o json)
    return "json"


def _read_json(path: Path, label: Optional[str] = None):
    """One JSON document from ``path``; errors name ``label`` (the INPUT as given: ``-`` for a
    spooled stdin) or the path."""
    from ..errors import UsageError
    from ..logfiles import is_device

    where = label or str(path)
    if is_device(path):
        raise UsageError(f"{where}: a device, not a file or pipe")
    try:
        with _open_text(path) as fh:
            text = fh.read()
    except FileNotFoundError:
        raise UsageError(f"{where}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{where}: is a directory") from None
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise UsageError(f"{where}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    return _loads(text, where)


def _loads(text: str, where: str):
    """``json.loads`` with every failure as a one-line UsageError (deep nesting, huge integers too)."""
    from ..errors import UsageError

    if text.startswith("\ufeff"):   # a byte-order mark some editors write: not part of the document
        text = text[1:]
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where}: invalid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise UsageError(f"{where}: invalid JSON (nested too deeply)") from None
    except ValueError as exc:  # e.g. an integer literal beyond Python's digit limit
        raise UsageError(f"{where}: invalid JSON ({str(exc).splitlines()[0]})") from None


#: the start of a bench record as the sweep writes it (its first key): a line that begins so and is not
#: valid JSON is a record cut short by a killed writer
_CUT_RECORD = re.compile(r'\s*\{\s*"schema"\s*:\s*"' + re.escape(BENCH_SCHEMA) + '"')


def _bench_records(path: Path):
    """The decoded records when ``path`` is bench JSONL, else None (it is a log for inspect)."""
    from ..errors import UsageError

    try:
        with _open_text(path) as fh:
            first = next((ln for ln in fh if ln.strip("\ufeff \t\r\n")), "").lstrip("\ufeff")
            try:
                head = json.loads(first)
            except RecursionError:
                raise UsageError(f"{path}:1: invalid JSON (nested too deeply)") from None
            except ValueError:  # not JSON: a log for inspect
                return None
            if not isinstance(head, dict) or head.get("schema") != BENCH_SCHEMA:
                return None
            fh.seek(0)
            out = []
            for i, ln in enumerate(fh, start=1):
                if i == 1:
                    ln = ln.lstrip("\ufeff")
                if not ln.strip():
                    continue
                try:
                    out.append(json.loads(ln))
                except RecursionError:
                    out.append(_loads(ln, f"{path}:{i}"))   # raises: nested too deeply
                except ValueError:
                    # a record of ours cut short by a killed sweep (which closes it with a newline and
                    # skips it when it resumes) is skipped the same way; any other bad line is an error
                    if not _CUT_RECORD.match(ln):
                        out.append(_loads(ln, f"{path}:{i}"))   # raises, naming the line
                    _warn(f"{path}:{i}: a record cut short (a sweep stopped while writing it): skipped")
            return out
    except UnicodeDecodeError:
        return None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _collect(args):
    """``(runs, baselines, notes, not_modelled, description)`` from INPUTs or --table."""
    from .. import advise as adv
    from ..errors import UsageError

    if args.table:
        if args.inputs:
            raise UsageError("give either INPUT files or --table, not both")
        if args.table == "-":
            raise UsageError("--table reads a file, not stdin: give the table's path")
        if not args.model or not args.benchmark:
            raise UsageError("--table needs --model and --benchmark")
        sel = adv.runs_from_table(_read_json(Path(args.table)), args.model, args.benchmark, args.draft,
                                  args.fit, source=str(args.table))
        return sel.runs, dict(sel.baseline_tok_s), [], sel.not_modelled, {
            "table": str(args.table), "model": sel.model, "benchmark": sel.benchmark, "draft": sel.draft,
            "fit": [list(f) for f in args.fit] if args.fit else "all topk-1 rows"}
    if not args.inputs:
        raise UsageError("no INPUT given (inspect --json documents, logs, bench JSONL) and no --table")
    if args.fit:
        raise UsageError("--fit applies to --table rows only")
    with _spool_dir() as spool:
        return _collect_inputs(args, _distinct_inputs(args.inputs), spool)


@contextlib.contextmanager
def _spool_dir():
    """A temporary folder for stdin and pipe copies, removed on the way out. A SIGTERM that lands
    while it is being made is acted on once its removal is armed (:func:`..sigterm.deferred`):
    raised in between, as under load right after the folder appeared, it left the folder behind."""
    from ..sigterm import deferred

    with deferred() as replay:
        tmp = tempfile.TemporaryDirectory(prefix="eagle-cycle-advise-")
    try:
        replay()
        yield Path(tmp.name)
    finally:
        tmp.cleanup()


def _distinct_inputs(names: list[str]) -> list[str]:
    """INPUTs with a file given twice read once (a warning); stdin twice is an error.

    Raises:
        UsageError: ``-`` given more than once.
    """
    from ..errors import UsageError
    from ..report import _file_identity, repeats_read_once

    if names.count("-") > 1:
        raise UsageError("stdin (-) can be read only once")

    def identity(name: str):
        # one file through links and other paths; a name that is not there stays apart (its error comes later)
        return _file_identity(name) if os.path.exists(name) else object()

    out: list[str] = []
    for msg in repeats_read_once(names, identity, str, out):   # "a.log: given twice; read once"
        _warn(msg)
    return out


def _readable_again(name: str, spool: Path) -> Path:
    """``name`` itself, or for a FIFO / process substitution (``<(cmd)``: read once) a copy in ``spool``."""
    import stat

    from ..errors import UsageError

    path = Path(name)
    if name != "-" and str(path) == "-":   # "./-", a file named "-": Path drops the "./", and "-" is stdin
        path = Path(os.path.abspath(name))
    try:
        if name == "-" or stat.S_ISREG(path.stat().st_mode):
            return path
        copy = spool / f"{len(list(spool.iterdir()))}-{path.name or 'input'}"
        with path.open("rb") as src, copy.open("wb") as dst:
            _copy_stream(src, dst)
    except OSError as exc:
        raise UsageError(f"{name}: cannot read ({exc.strerror or exc})") from None
    return copy


def _stdin_document(spool: Path) -> Optional[Path]:
    """A copy of stdin in ``spool`` when it holds a JSON document or JSONL (its first bytes, after a
    byte-order mark and blanks, open an object or an array), else None (a log: :func:`_stdin_copy`).
    Only what the stream has buffered is looked at."""
    buf = getattr(sys.stdin, "buffer", None)
    peek = getattr(buf, "peek", None)
    if peek is None:
        return None
    try:
        head = peek(1 << 16)
    except (OSError, ValueError):
        return None
    body = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    # "[2026-12-01 10:00:00 TP0] ..." is a log line's prefix, "[{" or "[[" an array (as _sniff reads it)
    if not (body.startswith(b"{") or (body.startswith(b"[") and body[1:].lstrip()[:1] in (b"[", b"{", b'"', b"]"))):
        return None
    return _stdin_copy(spool, "stdin.json")


def _stdin_copy(spool: Path, file_name: str) -> Path:
    """A copy of what is left on stdin, as ``spool / file_name`` (a log: advise reads it more than once)."""
    copy = spool / file_name
    with copy.open("wb") as dst:
        _copy_stream(getattr(sys.stdin, "buffer", sys.stdin), dst)
    return copy


def _copy_stream(src, dst) -> None:
    """Copy the binary stream ``src`` (a pipe, a FIFO, stdin) to ``dst`` until its end, handing each
    system read's bytes back to Python before the next read.

    ``shutil.copyfileobj`` asks a buffered reader for 64 KiB at a time, and the reader loops in C
    until that much has come. A SIGTERM that lands between two of those reads (not during one, which
    it would interrupt) is acted on only when the loop ends: from a slow pipe, under load, more than
    a minute after ``timeout`` sent it. ``read1`` makes one system read per call, and each call
    checks for a SIGTERM whose exit was swallowed on the way (:mod:`..sigterm`): an endless pipe
    would otherwise be copied until the disk is full.

    Raises:
        SystemExit: 143 once the CLI's SIGTERM handler has run.
    """
    from ..sigterm import exit_if_received

    read = getattr(src, "read1", src.read)
    while chunk := read(1 << 16):
        exit_if_received()
        dst.write(chunk)


_HF_SNAPSHOT = re.compile(r"(?:^|/)models--([^/]+?)--([^/]+)/snapshots/[^/]+/*$")


def model_key(model_path: str) -> str:
    """One spelling per target model for comparing ``server_args`` ``model_path`` values: a Hugging Face
    cache snapshot folder (``.../models--org--name/snapshots/<sha>``) as its repo id ``org/name``, a
    local path normalised (``/m/Kimi/`` and ``/m/./Kimi`` as ``/m/Kimi``); a repo id as written."""
    text = str(model_path).strip()
    hf = _HF_SNAPSHOT.search(text)
    if hf:
        return f"{hf.group(1)}/{hf.group(2)}"
    return os.path.normpath(text) if text else text


def _collect_inputs(args, names: list[str], spool: Path):
    from .. import advise as adv
    from ..errors import UsageError
    from ..logfiles import is_device, names_input

    runs, base, notes, logs, unfiltered = [], {}, [], [], []
    given: dict[int, list[tuple[float, str]]] = {}   # batch size -> (no-spec tok/s, input), every input's
    # target model (model_key) -> (model_path as spelt, the input whose stock lines name it)
    stock_models: dict[str, list[tuple[str, str]]] = {}
    baseline_models: list = []
    excluded_logs: list = []   # (log, record, model, flag) of records --model/--draft left out
    bench_copies: dict = {}    # every bench record read (its JSON) -> FILE:LINE: a copy counts once
    for name in names:
        if name != "-" and not Path(name).exists():
            raise UsageError(f"{name}: no such file")
        if name != "-" and Path(name).is_dir():
            raise UsageError(f"{name}: is a directory")
        if name != "-" and is_device(name):
            raise UsageError(f"{name}: a device, not a file or pipe")
        path = _readable_again(name, spool)
        if name == "-":
            path = _stdin_document(spool) or path
        kind = "log" if name == "-" and str(path) == "-" else _sniff(path, name)
        if kind == "log" and str(path) == "-":
            # a log on stdin is read more than once here (stock Decode batch lines need its start-up
            # server_args= line, and a second pass for their batch sizes): a copy in the spool
            path = _stdin_copy(spool, "stdin.log")
        if kind == "json":
            doc, seed_base = adv.unwrap_seed(_read_json(path, "<stdin>" if name == "-" else name), name)
            if isinstance(doc, dict) and "groups" in doc:
                r, b, n = adv.runs_from_inspect(doc, name)
                if seed_base:
                    b = {0: seed_base}
                    n.append(f"{name}: baseline {seed_base} tok/s from inputs.baseline_no_spec_tok_s")
            elif isinstance(doc, dict) and isinstance(doc.get("inputs"), dict) and "inspect_json" in doc["inputs"]:
                raise UsageError(f"{name}: inputs.inspect_json is not an eagle-cycle inspect --json document")
            elif written := adv.adaptive_written_by(doc):
                raise UsageError(f"{name}: {written}")
            elif isinstance(doc, dict) and all(isinstance(v, dict) for v in doc.values()) and doc:
                raise UsageError(f"{name}: looks like a published table: use --table {name} --model NAME --benchmark NAME")
            elif isinstance(doc, dict) and str(doc.get("schema", "")).startswith("eagle-cycle-inspect/"):
                # its schema says what it is; what it lacks is the cycle groups (helper 98: the hint
                # had been to run this very command)
                raise UsageError(f"{name}: an eagle-cycle inspect --json document without its \"groups\" list "
                                 "(cut short or edited?): no run to advise from")
            else:
                from ..logfiles import HEAD_CHARS, other_json

                with _open_text(path) as f:   # what it is, as inspect names it (a Chrome trace, ...)
                    what = other_json(f.read(HEAD_CHARS), name)
                raise UsageError(f"{name}: not an eagle-cycle inspect --json document"
                                 + (f": {what}" if what else ""))
        elif kind == "bench" and (records := _bench_records(path)) is not None:
            r, b, n = adv.runs_from_bench(records, name, args.model, args.draft, baseline_models, excluded_logs,
                                          copies=bench_copies)
            # across files, as within one (runs_from_bench): one model/draft pair, its own baselines
            adv.check_one_pair({adv.pair_key(*x.pair): x.pair for x in runs + r if x.pair is not None},
                               baseline_models, name)
            runs += r
            notes += n
            for k, v in b.items():
                given.setdefault(k, []).append((v, name))
            continue
        else:
            logs.append((name, path))
            unfiltered.append(name)
            continue
        unfiltered.append(name)
        runs += r
        notes += n
        for k, v in b.items():
            given.setdefault(k, []).append((v, name))
    # an inspect document of a record's own server log holds the record's cycle group once more
    records = [x for x in runs if x.pair is not None]
    if records:
        runs = [x for x in runs if x.pair is not None or not _counted_as_record(x, records, x.source, notes)]
        overlap = sorted({(x.source, x.bs, x.steps) for x in runs if x.pair is None and x.cycles
                          for y in records if _holds(y, x)})
        for src, b_, s_ in overlap:
            _warn(f"{src}: cycles at bs {b_}, {adv.cm.steps_text(s_)}, where bench records already hold a run: "
                  "if it is an inspect document of their server log, its cycles count twice; give the "
                  "records or the document")
    if args.benchmark:
        _warn("--benchmark applies to --table only: ignored")
    if (args.model or args.draft) and unfiltered:
        opts = "/".join(o for o, v in (("--model", args.model), ("--draft", args.draft)) if v)
        _warn(f"{opts} filter{'s' if '/' not in opts else ''} bench JSONL records only: ignored for "
              + ", ".join(unfiltered))
    for name, path in logs:
        def names_it(log: str, name: str = name) -> bool:   # the log a record names is this input
            return names_input(log, name)

        named = [x for x in runs if x.pair is not None and x.log_file and names_it(x.log_file)]
        other = next((x for x in excluded_logs if names_it(x[0])), None)
        if other is not None and not named:
            _warn(f"{name}: the server log of bench record {other[1]} (model {other[2]}), which {other[3]} "
                  "left out: not used")
            notes.append(f"{name}: the server log of bench record {other[1]}, left out by {other[3]}: not used")
            continue
        grouped = [x for x in named if x.cycles]     # their cycle group is a window of this log
        bare = [x for x in named if not x.cycles]    # no group: the log is their only cycle data
        try:
            r, b, n, m = _from_log(name, str(path))
        except UsageError as exc:
            if name == "-" and str(exc).startswith("nothing to inspect: -: "):   # stdin, as other errors name it
                exc = UsageError("nothing to inspect: <stdin>: " + str(exc)[len("nothing to inspect: -: "):])
            # among several inputs, a log with nothing in it (a sweep's no-spec stand-in log) is
            # skipped with a warning, as inspect does; alone it is the error
            if named:   # the records stand on their own figures
                why = str(exc).removeprefix("nothing to inspect: ")
                _warn(f"{why}: skipped (the server log of bench record{'s' if len(named) > 1 else ''} "
                      f"{', '.join(x.source for x in named)}, whose own figures are used)")
                notes.append(f"{why}: not used")
                continue
            if not str(exc).startswith("nothing to inspect: "):
                raise
            if len(names) == 1:     # the reader's words, said for the command the user ran
                raise UsageError("nothing to advise on: " + str(exc).removeprefix("nothing to inspect: ")) from None
            why = str(exc)[len("nothing to inspect: "):]
            _warn(f"{why}: skipped")
            notes.append(f"{why}: not used")
            continue
        if named:
            # a record's cycle group holds this log's cycles at the group's batch size and depth; what
            # the log holds elsewhere (another concurrency's run, a sweep stopped before that record
            # was written) no record has, and counts
            held = {(y.bs, y.steps, y.topk): y for y in grouped}
            for x in r:
                y = held.get((x.bs, x.steps, x.topk))
                if y is not None and x.cycles and y.cycles and x.cycles > y.cycles:
                    _warn(f"{name}: {x.cycles} cycles at bs {x.bs}, {adv.cm.steps_text(x.steps)}, where bench record "
                          f"{y.source}'s cycle group holds {y.cycles}: only the record's are used")
            r = [x for x in r if (x.bs, x.steps, x.topk) not in held]
            if grouped:
                notes.append(f"{name}: the server log bench record{'s' if len(grouped) > 1 else ''} "
                             f"{', '.join(f'{x.source} ({adv.cm.steps_text(x.steps)})' for x in grouped)} read "
                             f"{'their' if len(grouped) > 1 else 'its'} cycle group from: counted once, "
                             "as the records")
            # a record without a cycle group has the client's figures only: the log's runs of its depth
            # at batch sizes up to its concurrency are its run. Where they carry cycle data (phases,
            # per-position counts), they stand for it and the record's own figures are not used beside
            # them; stock Decode batch lines (a mean accept length) say less than the record's
            # histogram, and the record keeps its run
            def rich(x) -> bool:
                return bool(x.counts) or any(v for v in (x.phases or {}).values())

            def stands_for(x, y) -> bool:   # at the record's own concurrency, saying more than it does
                return _holds(y, x) and x.bs == (y.concurrency or y.bs) and (
                    rich(x) or (not y.counts and y.accept_len is None))

            stand = [y for y in bare if any(stands_for(x, y) for x in r)]
            poor = [x for x in r if not rich(x) and any(_holds(y, x) for y in bare if not any(y is z for z in stand))]
            r = [x for x in r if not any(x is z for z in poor)]
            if poor:
                notes.append(f"{name}: its Decode batch lines at "
                             f"{', '.join(f'bs {x.bs}, {adv.cm.steps_text(x.steps)}' for x in poor)} are the run of "
                             "a bench record whose own accept figures say as much or more: counted once, as the "
                             "record")
            if stand:
                runs = [y for y in runs if not any(y is z for z in stand)]
                notes.append(f"{name}: its cycles stand for bench record{'s' if len(stand) > 1 else ''} "
                             f"{', '.join(f'{y.source} ({adv.cm.steps_text(y.steps)})' for y in stand)}, which "
                             "carry no cycle group: the records' own figures are not used beside them")
            extra = [x for x in r if not any(stands_for(x, y) for y in stand)]
            if extra:
                notes.append(f"{name}: its cycles at "
                             f"{', '.join(f'bs {x.bs}, {adv.cm.steps_text(x.steps)}' for x in extra)}, "
                             "which no bench record holds, are used")
        records = [y for y in runs if y.pair is not None]
        kept = [x for x in r if not _counted_as_record(x, records, name, notes)]
        overlap = sorted({(x.bs, x.steps) for x in kept for y in records if _holds(y, x)})
        if overlap:
            _warn(f"{name}: cycles at {', '.join(f'bs {b_}, {adv.cm.steps_text(s_)}' for b_, s_ in overlap)}, where "
                  "bench records already hold a run: if it is a copy of their server log, its cycles count "
                  "twice; give the records or the logs")
        runs += kept
        notes += n
        for k, v in b.items():
            given.setdefault(k, []).append((v, name))
        for model in m:
            stock_models.setdefault(model_key(model), []).append((model, name))
    if len(stock_models) > 1:
        # bench records of two models are refused (check_one_pair); stock logs name theirs only in
        # their start-up line, and a no-spec log of another model had given every speedup without a word
        said = ("stock Decode batch lines from servers of " + str(len(stock_models)) + " target models ("
                + "; ".join("model_path " + " or ".join(dict.fromkeys(mp for mp, _ in seen)) + " in "
                            + ", ".join(dict.fromkeys(src for _, src in seen)) for seen in stock_models.values())
                + "): their runs and baselines compare only if these are one model")
        _warn(said)
        notes.append(said)
    # several inputs' baselines at one batch size: their mean, whatever the order (the first used to win)
    for k, vals in given.items():
        base[k] = sum(v for v, _ in vals) / len(vals)
        if len({round(v, 6) for v, _ in vals}) > 1:
            notes.append(f"{len(vals)} no-spec baselines at bs {k} ("
                         + ", ".join(f"{v:.1f} tok/s from {src}" for v, src in vals)
                         + f"): their mean {base[k]:.1f} is used")
    return runs, base, notes, [], {"files": list(names)}


def _holds(record, run) -> bool:
    """Whether a bench ``record``'s run may hold a log's or document's ``run``: the same depth and
    topk, at its cycle group's batch size, or (no group) at a batch size up to its concurrency."""
    if (record.steps, record.topk) != (run.steps, run.topk):
        return False
    return run.bs == record.bs if record.cycles else run.bs <= (record.concurrency or record.bs)


def _counted_as_record(run, records, where: str, notes: list[str]) -> bool:
    """Whether a log's or document's ``run`` holds the cycles a bench record's group already carries
    (:func:`_same_cycles`); if so, a note naming ``where`` says it counts once, as the record."""
    from .. import advise as adv

    twin = next((y for y in records if _same_cycles(y, run)), None)
    if twin is not None:
        notes.append(f"{where}: its cycles at bs {run.bs}, {adv.cm.steps_text(run.steps)} are those of bench "
                     f"record {twin.source} (the same count, accept length and cycle time): counted once, as the record")
    return twin is not None


def _same_cycles(record, run) -> bool:
    """Whether a log's ``run`` holds the cycles a bench ``record`` already carries in its cycle group
    (whatever the log's name or place: a moved, copied or compressed server log): the same batch size,
    depth, topk and cycle count, the same mean cycle time and, where both have them, the same
    per-position counts (the group's own, not the client's histogram the record also carries). (The
    record's own ``accept_len_mean`` is the client's, not the group's.)"""
    if (record.bs, record.steps, record.topk, record.cycles) != (run.bs, run.steps, run.topk, run.cycles) \
            or not run.cycles:
        return False
    a, b = record.total_ms(), run.total_ms()
    if a is None or b is None or abs(a - b) > 1e-3 * max(1.0, abs(b)):
        return False
    mine = record.group_counts if record.group_counts is not None else record.counts
    return not (mine and run.counts) or list(mine) == list(run.counts)


def _warn(message: str) -> None:
    print(f"eagle-cycle advise: warning: {message}", file=sys.stderr)


def _from_log(name: str, path: str):
    """Runs from one log (``name`` for messages, read at ``path``) through ``report.inspect_paths``
    (``[eagle-cycle]`` lines) and :func:`_stock_runs` (stock ``Decode batch`` lines of server starts
    without them); a no-spec server start gives baselines."""
    from .. import advise as adv
    from ..report import inspect_paths

    from ..errors import UsageError

    # one path: an unusable file raises, so a warning is a truncated gzip or an unreadable tail,
    # said as inspect says it
    stopped: list[str] = []
    try:
        doc = inspect_paths([path], warn=lambda msg: stopped.append(msg.replace(path, name)))
    except UsageError as exc:  # name the file as the user gave it, not a spooled copy
        raise UsageError(str(exc).replace(path, name)) from None
    for msg in stopped:
        _warn(msg)
    runs, _, notes = adv.runs_from_inspect(doc, name, from_log=True)
    notes = stopped + notes
    base: dict[int, float] = {}
    models: set = set()
    if (doc.get("decode_batch") or {}).get("intervals"):
        more, base, said, models = _stock_runs(name, path)
        runs, notes = runs + more, notes + said
    elif not runs:
        notes.append(f"{name}: no [eagle-cycle] cycle lines and no Decode batch lines: not used")
    return runs, base, notes, models


#: ``--speculative-algorithm`` values whose stock lines are taken as chain drafting runs (NGRAM
#: drafts from the prompt's n-grams, with no draft forward: not what the cost model describes)
DRAFTING_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")


def _depth_problem(spec: Optional[dict]) -> Optional[str]:
    """Why a server start's settings give no chain-drafting depth, else None."""
    if spec is None:
        return ("no server_args= line before them names the depth (keep the server's start-up lines in the log)")
    algo = spec.get("algorithm")
    if algo is not None and algo.upper() not in DRAFTING_ALGORITHMS:
        return f"its server_args= line names speculative_algorithm {algo}, not a drafting one ({', '.join(DRAFTING_ALGORITHMS)})"
    if spec.get("adaptive"):
        return ("its server_args= line names speculative_adaptive=True: the depth changes without a restart and "
                "stock lines do not say which one each interval ran at (the plugin's [eagle-cycle] lines do)")
    steps = spec.get("num_steps")
    if steps is None:
        return ("its server_args= line names no speculative_num_steps (None: SGLang chose one from the target's "
                "architecture; launch with --speculative-num-steps to know it)")
    if not 1 <= steps <= MAX_STEPS:
        return f"its server_args= line names speculative_num_steps {steps}, outside 1-{MAX_STEPS}"
    return None


def _stock_runs(name: str, path: str):
    """``(runs, baselines, notes)`` from the stock ``Decode batch`` lines of ``path``, per server start
    (:func:`report.server_starts`): a start with ``[eagle-cycle]`` lines is left to them (its stock lines
    are the same cycles); a start with accept lengths is one run per batch size at the depth its
    ``server_args=`` line names (:func:`decode_batch.spec_run_by_bs`, no phase split); a start
    without them is a no-spec server, whose gen throughput per batch size (tokens over seconds) is a
    baseline (the starts' intervals pooled), unless its ``server_args=`` line names a speculative
    algorithm (then it is neither, with a note). The fourth item is the set of target ``model_path``
    values the used starts' ``server_args=`` lines name (a start with ``[eagle-cycle]`` lines included:
    they are its runs)."""
    from .. import advise as adv
    from ..decode_batch import (IDLE_REASON, DecodeBatchStats, plateaus, spec_run_by_bs, steady_batch_sizes,
                                steady_spec_runs)
    from ..report import server_starts

    segs = [(spec, res) for spec, res in server_starts(path) if res.decode.intervals or res.cycles]
    runs, notes = [], []
    models: set = set()      # target model_path of each start whose stock lines are used
    plain_models: set = set()
    plain = DecodeBatchStats()
    for k, (spec, res) in enumerate(segs, start=1):
        st = res.decode
        where = name if len(segs) == 1 else f"{name} (part {k} of {len(segs)})"
        if res.cycles:
            if st.speculative_intervals and len(segs) > 1:
                notes.append(f"{where}: its [eagle-cycle] lines are the run; its stock Decode batch lines not used")
            if spec is not None and spec.get("model_path"):   # its cycle lines are runs of that target
                models.add(spec["model_path"])
            continue
        if not st.speculative_intervals:
            if spec is not None and spec.get("algorithm"):
                # a speculative server whose lines print no accept length: its throughput is no
                # baseline (it had been taken as one) and, without accept lengths, no run either
                notes.append(f"{where}: {st.intervals} stock Decode batch intervals without accept lengths, but its "
                             f"server_args= line names speculative_algorithm {spec['algorithm']}: neither a no-spec "
                             "baseline nor a run: not used")
                continue
            plain.merge(st)
            if spec is not None and spec.get("model_path"):
                plain_models.add(spec["model_path"])
            continue
        inferred = None
        if spec is None:
            # no start-up line: the depth from the lines themselves, where one value alone fits them
            inferred = st.inferred_draft_tokens(MAX_STEPS)
            if inferred is not None:
                spec = {"num_steps": inferred - 1, "eagle_topk": 1, "num_draft_tokens": inferred}
        problem = _depth_problem(spec)
        if problem is not None:
            if spec is None:
                problem += ("; nor do their accept len and accept rate pin one (SGLang 0.5.23 prints accept rate = "
                            f"(accept len - 1) / (num_draft_tokens - 1)): {st.draft_tokens_unknown(MAX_STEPS)}")
            notes.append(f"{where}: {st.speculative_intervals} stock Decode batch intervals with accept lengths: "
                         f"{problem}: not used")
            continue
        steps, topk = spec["num_steps"], spec.get("eagle_topk") or 1
        ndt = spec.get("num_draft_tokens")
        by_bs, dropped, few, pooled = steady_spec_runs(st, steps + 1 if topk == 1 else ndt)
        if any(b != t for b, t in pooled.items()):
            # the pooled intervals filtered again (idle against the plateau's median): their counts
            # stand, beside the first pass's at the batch sizes no plateau holds (ramp, out of range)
            by_bs, dropped = spec_run_by_bs(st.relabelled(pooled), steps + 1 if topk == 1 else ndt)
            rest = {b: b for b in st.gen_tok_s_by_bs_spec if b not in pooled}
            for why, n in spec_run_by_bs(st.relabelled(rest), steps + 1 if topk == 1 else ndt)[1].items():
                dropped[why] = dropped.get(why, 0) + n
            notes.append(f"{where}: {_plateau_text(pooled)}")
        if few:
            dropped[FEW_REASON] = few
        label = name if len(segs) == 1 else f"{name}, part {k}"
        for bs, (tok, acc, se, n) in by_bs.items():
            runs.append(adv.Run(source=f"{label} (Decode batch, bs {bs}, {n} intervals)", bs=bs, steps=steps,
                                topk=topk, num_draft_tokens=ndt, accept_len=acc, tok_s=tok, tok_s_se=se,
                                intervals=n))
        used = sum(v[3] for v in by_bs.values())
        left = "; ".join(f"{n} with {why}" for why, n in dropped.items())
        if used and spec.get("model_path"):
            models.add(spec["model_path"])
        if not used:
            notes.append(f"{where}: stock Decode batch lines at {adv.cm.steps_text(steps)}, every interval left out "
                         f"({left}): not used")
            continue
        origin = "from its server_args line" if inferred is None else (
            f"inferred, no server_args= line naming it: of 1-{MAX_STEPS} steps, only num_draft_tokens {inferred} fits "
            f"every one of its {st.ndt_intervals} intervals' accept len and accept rate (SGLang 0.5.23 prints accept "
            "rate = (accept len - 1) / (num_draft_tokens - 1)); chain drafting (topk 1) assumed, a tree's depth is "
            "not num_draft_tokens - 1: keep the start-up lines to know it")
        notes.append(f"{where}: stock Decode batch lines at {adv.cm.steps_text(steps)} ({origin}): "
                     f"{used} intervals, throughput and mean accept length per batch size (intervals weighted by their "
                     "time; no phase split: whole-cycle times)" + (f"; left out: {left}" if left else ""))
        notes += _spread_notes(where, st)
    plain_by_bs, few = steady_batch_sizes(
        {bs: (tok, n) for bs, (tok, n) in plain.plain_by_bs().items()
         if 1 <= bs <= MAX_BS and tok is not None and MIN_TOK_S <= tok <= MAX_TOK_S}, lambda v: v[1])
    pooled = plateaus(plain.labels_plain, {bs: n for bs, (_tok, n) in plain_by_bs.items()})
    plateau_note = None
    idle = plain.plain_idle_intervals()
    if any(b != t for b, t in pooled.items()):
        # the pooled intervals filtered again (idle against the plateau's median): their counts stand
        kept = {bs for bs in plain_by_bs}
        plain_by_bs = plain.relabelled(pooled).plain_by_bs()
        idle = sum(plain.gen_tok_s_by_bs_plain[b].count for b in kept) - sum(n for _t, n in plain_by_bs.values())
        plateau_note = _plateau_text(pooled)
    base = {bs: tok for bs, (tok, _n) in plain_by_bs.items() if tok is not None}
    if base:
        left = [f"{n} with {why}" for n, why in ((idle, IDLE_REASON), (few, FEW_REASON)) if n]
        notes.append(f"{name}: no-spec server" + (" start" if len(segs) > 1 else " log") + ": baseline tok/s by batch size "
                     + ", ".join(f"{k}: {v:.1f}" for k, v in base.items())
                     + (f" (intervals left out: {'; '.join(left)})" if left else "")
                     + (f"; {plateau_note}" if plateau_note else ""))
        notes += _spread_notes(name, plain)
        models |= plain_models
    return runs, base, notes, models


def _spread_notes(where: str, stats) -> list[str]:
    """A warning per batch size whose stock throughput swings over twofold
    (:meth:`decode_batch.DecodeBatchStats.spread`, inspect's ``stock_throughput_spread``): low
    where its slow tail is the wider (idle time, other work), high where its fast one is (intervals
    faster than the server's steady rate: garbled lines, a clock step, a drain's interval labelled
    with its last batch size), since an interval counts by its time."""
    out = []
    for bs, spec, p10, p90, n, p50 in stats.spread():
        run = "run" if spec else "baseline"
        if p90 / max(p50, 1e-12) > p50 / max(p10, 1e-12):
            why = (f"intervals far faster than their median {p50:.1f} (garbled lines, a clock step, a drain's interval "
                   f"labelled with its last batch size): its {run} reads high")
        else:
            why = f"idle time between requests or other work beyond what the 5x-median rule leaves out: its {run} reads low"
        out.append(f"{where}: warning: stock " + ("gen throughput over accept length" if spec else "gen throughput")
                   + f" at bs {bs} ({'speculative' if spec else 'no-spec'}) spans {p10:.1f}-{p90:.1f} over the {n} "
                   f"intervals kept (10th-90th percentile): {why}")
    return out


def _plateau_text(pooled: dict[int, int]) -> str:
    """``"stock batch sizes pooled by plateau, 28-32 as bs 30 (...)"`` for :func:`decode_batch.plateaus`' groups."""
    from ..costmodel import span_text

    groups: dict[int, list[int]] = {}
    for b, t in sorted(pooled.items()):
        groups.setdefault(t, []).append(b)
    # each group by its members (plateaus may interleave: a batch size the load seldom switched
    # from stays its own)
    named = "; ".join(f"{span_text(g)} as bs {t}" for t, g in groups.items() if len(g) > 1)
    return (f"stock batch sizes pooled by plateau, {named} (a line's throughput is over the batch sizes "
            "its interval passed, its #running-req the last one's)")


FEW_REASON = (f"too few at their batch size (under {MIN_STOCK_INTERVALS} where another has more: a ramp or "
              "drain, whose interval's throughput spans the batch sizes it passed and whose #running-req is the last)")


def _resolve_baselines(runs, found: dict, given, batch_sizes=None) -> tuple[dict[int, float], list[str]]:
    """Baselines by batch size, and notes: --baseline-tok-s over the inputs' own.

    A bare ``--baseline-tok-s X`` (key 0) is the baseline at ``--batch-sizes N`` when one size is
    given, else at the runs' batch size, which must then be unique; a note says where it went when
    ``--batch-sizes`` names another batch size than the runs'. A baseline an INPUT carries
    without a batch size (a seed file's, a no-spec log's) belongs to the runs' batch size; with
    runs at several sizes it is used only if the command line does not already give each of them
    one (then it is dropped with a note). A batch size given twice on the command line is refused;
    a command-line value replacing an input's is noted; a baseline at a batch size with neither a
    run nor a prediction is dropped with a note, unless some advised batch size has no baseline of
    its own (its decode step is read off the baselines' line: then it is kept, with a note).

    Raises:
        UsageError: a bare value (command line or INPUT) whose batch size cannot be told, or a
            batch size given two values on the command line.
    """
    from ..errors import UsageError

    explicit: dict[int, float] = {}
    for bs, tok in given or []:
        if bs in explicit:
            what = "without a batch size" if bs == 0 else f"for bs {bs}"
            raise UsageError(f"--baseline-tok-s given twice {what} ({explicit[bs]:g} and {tok:g})")
        explicit[bs] = tok
    bare = explicit.pop(0, None)
    found_bare = found.get(0)
    inputs = {k: v for k, v in found.items() if k}
    sizes = sorted({r.bs for r in runs if r.fitted and r.topk == 1})
    notes: list[str] = []
    if bare is not None:
        target = sorted(set(batch_sizes)) if batch_sizes and len(set(batch_sizes)) == 1 else sizes
        if len(target) > 1:  # none: no chain-drafting run at all, which advise names itself
            raise UsageError(f"runs at several batch sizes ({', '.join(map(str, sizes))}): a bare --baseline-tok-s "
                             f"{bare:g} does not say which it is for: give BS:TOK_S per batch size, or one value "
                             "with --batch-sizes N")
        if target and target[0] in explicit:
            raise UsageError(f"--baseline-tok-s given twice for bs {target[0]}: {bare:g} and "
                             f"{target[0]}:{explicit[target[0]]:g}")
        if target:
            explicit[target[0]] = bare
            if sizes and target != sizes:   # said, since the same value could be meant for the runs'
                notes.append(f"--baseline-tok-s {bare:g} without a batch size is taken at bs {target[0]}, the one "
                             f"--batch-sizes names, not at the runs' bs {', '.join(map(str, sizes))} (give BS:TOK_S "
                             "to place it)")
            elif batch_sizes and set(batch_sizes) != set(sizes):
                notes.append(f"--baseline-tok-s {bare:g} without a batch size is taken at the runs' bs {target[0]}, "
                             "not at the other --batch-sizes (give BS:TOK_S for those)")
    if found_bare is not None:
        if len(sizes) == 1 and sizes[0] in inputs and abs(inputs[sizes[0]] - found_bare) > 1e-9:
            # the same batch size's baseline given with and without its batch size: both count
            mean = (inputs[sizes[0]] + found_bare) / 2.0
            notes.append(f"an INPUT's baseline without a batch size ({found_bare:g} tok/s) and the inputs' at bs "
                         f"{sizes[0]} ({inputs[sizes[0]]:g}): their mean {mean:.1f} is used")
            inputs[sizes[0]] = mean
        elif len(sizes) == 1:
            inputs.setdefault(sizes[0], found_bare)
        elif all(s in explicit or s in inputs for s in sizes):
            notes.append(f"an INPUT's baseline without a batch size ({found_bare:g} tok/s) not used: the runs are "
                         "at several batch sizes and each has its own")
        else:
            raise UsageError(f"runs at several batch sizes ({', '.join(map(str, sizes))}) and an INPUT's baseline "
                             f"({found_bare:g} tok/s) without one: give --baseline-tok-s BS:TOK_S for each of them")
    notes += [f"--baseline-tok-s {v:g} tok/s at bs {k} replaces the inputs' {inputs[k]:g}"
              for k, v in sorted(explicit.items()) if k in inputs and inputs[k] != v]
    out = {**inputs, **explicit}
    wanted = set(sizes) | set(batch_sizes or ())
    # a batch size advised without a baseline of its own reads its decode step off the others' line
    # (costmodel.CycleCostModel.baseline_step_ms): then every baseline counts
    needed = any(b not in out for b in wanted)
    for k in sorted(set(out) - wanted):
        where = "--baseline-tok-s" if k in explicit else "the inputs' baseline"
        if needed:
            notes.append(f"{where} at bs {k} ({out[k]:g} tok/s), where no run is and none is advised, is used for "
                         "the decode step at the batch sizes without a baseline")
        else:
            notes.append(f"{where} at bs {k} ({out.pop(k):g} tok/s) not used: no run and no --batch-sizes at bs {k}")
    return out, notes


#: config keys only an EAGLE draft head has
_DRAFT_KEYS = ("eagle_config", "draft_vocab_size", "eagle_aux_hidden_state_layer_ids")
#: more decoder layers than any released model by far: a corrupt config
_MAX_LAYERS = 10000


def _shape(args):
    """``(verify-cost shape, note, the config.json read)``; the path is None without --target-config.

    Raises:
        UsageError: the config cannot be found or read, is a draft model's, or has no usable layer count.
    """
    from .. import costmodel as cm
    from ..advise import shape_from_config
    from ..errors import UsageError
    from ..wiring import find_field, load_config, locate_config
    from ..wiring.config import CHECKPOINT_SUFFIXES

    if not args.target_config:
        return cm.LINEAR, "no --target-config: verify cost interpolated linearly in verified tokens", None
    what = f"--target-config {args.target_config}"

    def draft_why(cfg) -> Optional[str]:
        """why ``cfg`` is an EAGLE draft head's config, or None"""
        archs = cfg.get("architectures") if isinstance(cfg, dict) else None
        archs = [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []
        eagle = [a for a in archs if "eagle" in a.lower()]
        keys = [k for k in _DRAFT_KEYS if isinstance(cfg, dict) and k in cfg]
        return f"architecture {eagle[0]}" if eagle else (f"it has {keys[0]}" if keys else None)

    given = Path(args.target_config).expanduser()
    if given.is_file() and given.name.endswith(CHECKPOINT_SUFFIXES) and (given.parent / "config.json").is_file():
        # a checkpoint file: its folder is the model; a draft's folder is said to be one at once (the
        # checkpoint message had sent the user to the folder, which was then refused as a draft)
        try:
            why = draft_why(load_config(given.parent / "config.json"))
        except (UsageError, ValueError, RecursionError):
            why = None
        if why is not None:
            raise UsageError(f"{what}: a draft model's checkpoint (its folder's config.json: {why}): give the "
                             "target model's config")
    path = locate_config(args.target_config)
    try:
        cfg = load_config(path)
    except RecursionError:
        raise UsageError(f"{path}: invalid JSON (nested too deeply)") from None
    except ValueError as exc:  # e.g. an integer literal beyond Python's digit limit
        raise UsageError(f"{path}: invalid JSON ({str(exc).splitlines()[0]})") from None
    why = draft_why(cfg)
    if why is not None:
        raise UsageError(f"{what}: a draft model's config ({why}): give the target model's config")
    layers = find_field(cfg, "num_hidden_layers")
    if layers is None or not 1 <= layers[0] <= _MAX_LAYERS:
        got = "none" if layers is None else f"{layers[1]}={layers[0]}"
        raise UsageError(f"{what}: not a usable target config (num_hidden_layers: {got}; "
                         f"expected an integer in 1..{_MAX_LAYERS})")
    return (*shape_from_config(cfg), path)


# ---------------------------------------------------------------------------------------------
# output
# ---------------------------------------------------------------------------------------------


def _fmt(x, nd=2, sign=False):
    if x is None:
        return "-"
    return f"{x:+.{nd}f}" if sign else f"{x:.{nd}f}"


def _print_unsettled(b, console, measured: int = 1) -> None:
    """The 'not settled' line of batch advice ``b``: the one run to do next, as launch flags;
    ``measured``: how many depths were measured at that batch size (the wording of what to pass)."""
    from .. import costmodel as cm

    dec = b.decision
    if dec is None or dec.settled:
        return
    from ..advise import baseline_run_first
    if baseline_run_first(dec) and not dec.no_run_at_bs:
        # the doubt is the no-spec figure, carried here from another batch size's baseline
        console.print(f"[bold yellow]not settled[/] at bs {b.bs} (95th-percentile regret {100 * dec.regret_95:.1f}%): "
                      f"its no-spec tok/s is carried from another batch size's baseline; run the server without "
                      f"--speculative-algorithm at bs {b.bs} once and pass --baseline-tok-s {b.bs}:TOK_S (expected "
                      f"95th-percentile regret after it: {100 * dec.baseline_after:.1f}%"
                      + (f"; a run at {cm.steps_text(dec.next_run)}: {100 * dec.regret_95_after:.1f}%)"
                         if dec.next_run is not None and dec.regret_95_after is not None else ")"),
                      soft_wrap=True)
        return
    if dec.next_run is None:
        console.print(f"[bold yellow]not settled[/] at bs {b.bs}, and no single further run is expected to settle it: "
                      "the best depths differ by less than the measurements can tell")
        return
    # the depths in contention: the pick and the one predicted next fastest (speculation off
    # included); the run named is the one that tells the doubt apart best, which may be a third
    rivals = [c for c in getattr(b, "candidates", []) if c.steps != dec.pick and c.tok_s is not None]
    rival = max(rivals, key=lambda c: c.tok_s).steps if rivals else dec.next_run
    lo, hi = sorted((dec.pick, rival))
    flags = (f"--speculative-num-steps {dec.next_run} --speculative-eagle-topk 1 "
             f"--speculative-num-draft-tokens {dec.next_run + 1}")
    where = (f"at {cm.steps_text(lo)} (predicted, not measured)" if lo == hi else
             ("between speculation off and " + cm.steps_text(hi) if lo == 0 else f"between {lo} and {hi} steps"))
    if dec.next_run not in (dec.pick, rival):
        where += f" (a run at {cm.steps_text(dec.next_run)} tells them apart best)"
    what = "pass both logs" if measured <= 1 else "pass its log with the others"
    if dec.no_run_at_bs:
        console.print(f"[bold yellow]not settled[/] at bs {b.bs}: no run at this batch size (its figures are carried "
                      f"over from the others); run `{flags}` at bs {b.bs} and pass its log with the others",
                      soft_wrap=True)
        return
    if not dec.useful:
        console.print(f"[bold yellow]not settled[/] at bs {b.bs} (95th-percentile regret {100 * dec.regret_95:.1f}%), "
                      f"and no single run is expected to settle it: the most useful one, `{flags}`, would "
                      + (f"leave {100 * dec.regret_95_after:.1f}%" if dec.regret_95_after < dec.regret_95 else
                         f"not lower it ({100 * dec.regret_95_after:.1f}% expected after it)")
                      + ". The remaining doubt lies in the runs' own "
                      "noise or across several depths at once; longer runs at the contending depths narrow it", soft_wrap=True)
        return
    console.print(f"[bold yellow]not settled[/] {where} at bs {b.bs}: run `{flags}` once and {what} "
                  f"(expected 95th-percentile regret after it: {100 * dec.regret_95_after:.1f}%)", soft_wrap=True)


def _measured(advice, bs: int) -> int:
    """Distinct chain-drafting depths measured at batch size ``bs``."""
    return len({s for (b, s), r in advice.measured.items() if b == bs and r.topk == 1})


#: without --batch-sizes, a per-depth table is printed for every advised batch size up to this many;
#: past it (a serving log's ramp and drain: 1,446 lines for 32 batch sizes), for the top-level one
#: alone, the others summarised a row each (``--json`` holds every table)
FULL_TABLES_UP_TO = 8


def shell_word(path) -> str:
    """``path`` as one word a POSIX shell reads back as that path, for a launch line to copy: as it
    is where it needs no quoting, in single quotes where it holds spaces or shell syntax, and in
    bash's ``$'...'`` form, control characters as ``\\n`` or ``\\xHH``, where it holds any (a single-
    quoted line feed would break the line). A name's undecodable bytes are written as ``\\xff`` escapes
    (:func:`logfiles.text_label`), which the ``$'...'`` form reads back as those bytes."""
    import shlex

    from ..logfiles import text_label

    raw = os.fsdecode(path)
    text = text_label(raw)
    if text == raw and not re.search("[\x00-\x1f\x7f-\x9f]", text):
        return shlex.quote(text)
    out = []
    for ch in raw:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:                      # an undecodable byte of the name
            out.append(f"\\x{code - 0xDC00:02x}")
        elif ch in "\\'":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif code < 0x20 or 0x7F <= code <= 0x9F:         # C1 controls as their UTF-8 bytes
            out.append("".join(f"\\x{b:02x}" for b in ch.encode("utf-8")))
        else:
            out.append(ch)
    return "$'" + "".join(out) + "'"


def _render(advice, plan, plan_path, desc, shape_note, console, full: bool = True) -> None:
    """The human output. ``full``: a per-depth table for every batch size, else for the top-level
    one alone and a summary row for each other (:data:`FULL_TABLES_UP_TO`)."""
    from rich.markup import escape

    from .. import costmodel as cm
    from .. import uncertainty as unc
    from ..tables import figure_table

    acc = advice.acceptance
    own = [(b.bs, b.acceptance) for b in advice.per_bs if b.acceptance is not None]
    # the deepest draft position a request reached, not the deepest run: a sweep to 5 steps whose
    # requests never accepted past 2 drafts counts positions 1-3 (helper 44 read "measured to depth 2")
    # from mean accept lengths alone nothing says how deep a request got: the deepest run's depth; counts
    # with deeper runs' means beside them (``beyond``): counted to one position, the means past it
    depth, reached = acc.observed_depth, ""
    if acc.beyond:
        depth = max(b.steps for b in acc.beyond)
        reached = f" (per request to position {acc.observed_depth}, the deepest any request of those runs reached)"
    elif acc.points:
        reached = " (the deepest run's depth)"
    elif acc.samples:
        reached = " (the deepest any request reached)"
    console.print(f"[bold]acceptance[/]: {escape(acc.source)}; to draft position {depth}{reached}"
                  + (f", {acc.samples} request-cycles" if acc.samples else "")
                  + ("; per batch size (a note says why): " + ", ".join(
                      f"bs {bs} to position {a.observed_depth}" for bs, a in own) if own else ""))
    console.print(f"[bold]cycle time[/]: {advice.cost.mode} mode; verify shape: {advice.cost.shape.label}; {shape_note}")
    for note in list(advice.cost.notes) + advice.notes:
        console.print(f"  note: {escape(note)}")
    if not full:
        rows = []
        for b in advice.per_bs:
            if b is advice.primary:
                continue
            rec, dec = b.recommendation, b.decision
            c = next(c for c in b.candidates if c.steps == rec.steps)
            band = "-" if c.tok_s_low is None else f"{c.tok_s_low:.1f}-{c.tok_s_high:.1f}"
            state = ("settled" if dec is None or dec.settled else
                     "not settled" + (f"; next run {cm.steps_text(dec.next_run)}" if dec.next_run is not None else ""))
            rows.append((str(b.bs), "off" if rec.speculation_off else str(rec.steps), _fmt(c.tok_s, 1), band,
                         _fmt(c.speedup(), 2), "-" if dec is None else f"{100 * dec.regret_95:.1f}%", state))
        console.print(figure_table(
            f"the other {len(rows)} batch sizes (a row each; `--json`, or `--batch-sizes` naming them, gives their "
            "per-depth tables)",
            [(h, "right") for h in ("bs", "steps", "tok/s", "tok/s\n95%", "speed\nup", "regret\n95th")]
            + [("state", "left")], rows))
    for b in advice.per_bs:
        if not full and b is not advice.primary:
            continue
        rows = []
        for c in b.candidates:
            d = advice.candidate_dict(c)
            flags = []
            if c.steps == b.recommendation.steps:
                flags.append("<- recommended")
            if c.steps == 0:
                flags.append("speculation off")
            if c.interval_source and c.steps != 0:
                flags.append(c.interval_source)
            if c.extrapolated:
                flags.append("extrapolated: " + ", ".join(c.extrapolated))
            if d.get("fitted") is False:
                flags.append("held out")
            exact = c.steps == 0 and "baseline" not in c.extrapolated   # a measured baseline
            band = "-" if exact or c.tok_s_low is None else f"{c.tok_s_low:.1f}-{c.tok_s_high:.1f}"
            # the measured figure rounded once, from the run itself (the JSON's 2 decimals rounded again
            # had printed 442.5452 as 442.6 and a baseline's 190.45 as 190.4 beside 190.5; helper 101)
            run = advice.measured.get((c.bs, c.steps))
            meas = c.baseline_tok_s if exact else (run.tok_s if run is not None else None)
            rows.append((
                str(c.steps), str(c.bs * (c.steps + 1)) if c.steps else str(c.bs),
                _fmt(c.accept_len, 2), _fmt(c.cycle.total_ms, 2), _fmt(c.tok_s, 1), band,
                _fmt(c.speedup(), 2), _fmt(c.gain_tokens, 2, sign=True), _fmt(c.cost_ms, 2, sign=True),
                _fmt(meas, 1), "; ".join(flags)))
        tab = figure_table(
            f"bs {b.bs}: predicted per depth (tok/s: mean over {unc.N_SAMPLES} hypotheses that fit the "
            "measurements; 95%: their 2.5th-97.5th percentiles, each width no run measured running kernels of "
            "its own; +accept, +cycle ms: what the depth adds over one step fewer, '-' where that depth is not "
            "listed; notes: what dominates each)",
            [(h, "right") for h in ("steps", "verify\ntok", "accept\nlen", "cycle\nms", "tok/s", "tok/s\n95%",
                                    "speed\nup", "+accept", "+cycle\nms", "meas-\nured")] + [("notes", "left")],
            rows)
        console.print(tab)
        rec = b.recommendation
        what = ("turn speculation OFF" if rec.speculation_off else
                f"{cm.steps_text(rec.steps)} (topk 1, {rec.steps + 1} draft tokens)")
        console.print(f"[bold green]recommended at bs {b.bs}[/]: {what}")
        console.print(f"  why: {escape(rec.reason)}")
        if b is not advice.primary:
            _print_unsettled(b, console, _measured(advice, b.bs))
    for item in advice.not_modelled:
        console.print(f"  not modelled: steps {item['steps']} topk {item['topk']}: {escape(item['reason'])}")
    p = advice.primary.recommendation
    picks = {b.bs: b.recommendation.steps for b in advice.per_bs}
    # where the best depth differs by batch size the launch line names the adaptive config that switches
    # by it (issue 13: the launch line names the batch size it is for, and an adaptive config then)
    # neighbouring batch sizes with one pick as a range: "bs 2-8: 3"
    spans = [(sizes[0], sizes[-1], v) for v, grp in itertools.groupby(picks.items(), key=lambda kv: kv[1])
             for sizes in [[k for k, _ in grp]]]
    adaptive = ("; the best depth differs by batch size (" + ", ".join(
        f"bs {lo}: {v}" if lo == hi else f"bs {lo}-{hi}: {v}" for lo, hi, v in spans)
        + "): add --adaptive-config FILE to this advise command for an SGLang adaptive config that "
        "switches by batch size") if len(spans) > 1 else ""
    if plan is None:
        if p.speculation_off:
            console.print("launch: without --speculative-algorithm (speculation does not pay here; "
                          f"bs {advice.primary.bs}{adaptive})", soft_wrap=True)
        else:
            console.print(f"launch: --speculative-num-steps {p.steps} --speculative-eagle-topk 1 "
                          f"--speculative-num-draft-tokens {p.steps + 1} (bs {advice.primary.bs}{adaptive})",
                          soft_wrap=True)
        _print_unsettled(advice.primary, console, _measured(advice, advice.primary.bs))
        return
    console.print(f"wrote {escape(shell_word(plan_path))}: buckets " + ", ".join(f"bs>={k}: {v} steps" for k, v in plan.buckets.items()))
    for msg in plan.merged:
        console.print(f"  note: {escape(msg)}")
    for k in plan.off_buckets:
        console.print(f"  [yellow]warning[/]: bucket bs>={k}: speculation is predicted slower than none; "
                      f"it pins its fastest depth {plan.buckets[k]} (steps 0 would still run draft-extend): "
                      "disable speculation for that load instead")
    console.print(f"launch with: --speculative-adaptive --speculative-adaptive-config {escape(shell_word(plan_path))} "
                  f"--speculative-num-steps {plan.launch_steps} --speculative-eagle-topk 1", soft_wrap=True)
    _print_unsettled(advice.primary, console, _measured(advice, advice.primary.bs))


def _input_files(args, target_config: Path | None) -> list[tuple[str, str]]:
    """Every file advise read, as ``(path, how it was given)``: INPUTs, --table, --target-config's config.json."""
    files = [(name, "") for name in args.inputs]   # "-": the file behind standard input, if any
    if args.table:
        files.append((args.table, " (--table)"))
    if target_config is not None:
        files.append((str(target_config), f" (--target-config {args.target_config})"))
    return files


#: tries, 0.1 s apart, to find a process reading a FIFO given as an output before refusing it
FIFO_READER_WAIT_TRIES = 20


def _write_adaptive(path: Path, plan, force: bool, flag: str = "--adaptive-config") -> Path:
    """Write the adaptive config to ``path`` (checked by :func:`logfiles.check_output`). An existing
    FIFO (``--force``; ``>(cat)`` is one) is written only where a process reads it: opened for
    writing, one with no reader would wait for one forever (helper 98).

    Raises:
        UsageError: the file appeared since it was checked (without ``force``), it is a FIFO no
            process reads, or it cannot be written.
    """
    import stat

    from ..errors import UsageError

    try:
        if force and stat.S_ISFIFO(os.stat(path).st_mode):
            fd = None
            for _ in range(FIFO_READER_WAIT_TRIES):   # a reader starting beside this command: a while
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
                    break
                except OSError as exc:
                    if exc.errno != errno.ENXIO:
                        raise
                    time.sleep(0.1)
            if fd is None:
                raise UsageError(f"{flag} {path}: a FIFO no process reads; not written (it would wait "
                                 "for a reader)")
            os.set_blocking(fd, True)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(plan.config, fh, indent=2)
                fh.write("\n")
            return path
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot write ({exc.strerror or exc})") from None
    try:
        mode = "w" if force else "x"
        with path.open(mode, encoding="utf-8") as fh:
            json.dump(plan.config, fh, indent=2)
            fh.write("\n")
    except FileExistsError:
        raise UsageError(f"{flag} {path}: file exists, not overwritten (use --force)") from None
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot write ({exc.strerror or exc})") from None
    return path


def main(args: argparse.Namespace) -> int:
    from .. import advise as adv
    from ..errors import UsageError
    from ..logfiles import check_output, text_safe

    for flag, value in (("--adaptive-config", args.adaptive_config),
                        ("--adaptive-candidates", args.adaptive_candidates)):
        if value == "-":
            raise UsageError(f"{flag} -: stdout carries the advice; give a file name")
    if args.adaptive_config and args.adaptive_candidates and (
            os.path.realpath(args.adaptive_config) == os.path.realpath(args.adaptive_candidates)):
        raise UsageError("--adaptive-config and --adaptive-candidates name the same file")
    if args.cuda_graph_bs and not (args.adaptive_config or args.adaptive_candidates):
        # it sets the buckets of those files alone: without one it would be dropped without a word
        raise UsageError("--cuda-graph-bs applies to --adaptive-config / --adaptive-candidates only")
    for flag, value in (("--adaptive-config", args.adaptive_config), ("--adaptive-candidates", args.adaptive_candidates),
                        ("--target-config", args.target_config),
                        ("--table", args.table), *(("INPUT", name) for name in args.inputs)):
        if value is not None and not value.strip():
            raise UsageError(f"{flag}: the file name is empty")
    runs, found_base, notes, not_modelled, desc = _collect(args)
    if not runs:
        why = [n for n in notes if n.endswith("not used") or "whose status is not ok left out" in n]
        raise UsageError("no speculative run found in the inputs" + (f" ({why[0]})" if why else ""))
    baselines, more = _resolve_baselines(runs, found_base, args.baseline_tok_s, args.batch_sizes)
    notes += more
    notes += adv.broken_draft_notes(runs)
    shape, shape_note, target_config = _shape(args)
    # a bench record's server log is the user's too, given as an input or not (helper 101: --force had
    # written an adaptive config over one)
    protected = _input_files(args, target_config) + [
        (x.log_file, f" (the server log of bench record {x.source})") for x in runs
        if x.pair is not None and isinstance(x.log_file, str) and x.log_file]
    outputs = {flag: check_output(value, flag, args.force, protected, in_place=True)
               for flag, value in (("--adaptive-config", args.adaptive_config),
                                   ("--adaptive-candidates", args.adaptive_candidates)) if value}
    if args.steps_candidates:
        steps = sorted(set(args.steps_candidates))
    elif args.max_steps is not None:
        # the user's limit holds: a deeper measured depth informs acceptance and costs, and is no candidate
        steps = list(range(0, args.max_steps + 1))
        deeper = sorted({r.steps for r in runs if r.topk == 1 and r.steps > args.max_steps})
        if deeper:
            from .. import costmodel as cm
            notes.append(f"measured at {', '.join(cm.steps_text(s) for s in deeper)}, beyond --max-steps "
                         f"{args.max_steps}: used for the model, not a candidate")
    else:
        measured = {r.steps for r in runs if r.topk == 1 and r.steps <= adv.MAX_STEPS}
        steps = sorted(set(range(0, DEFAULT_MAX_STEPS + 1)) | measured)
    advice = adv.advise(runs, baselines, steps=steps, batch_sizes=args.batch_sizes, shape=shape,
                        notes=notes, not_modelled=not_modelled)
    if not baselines:
        advice.notes.append("no baseline (--baseline-tok-s): no speedups, speculation off never considered")
    graph_bs = sorted(set(args.cuda_graph_bs)) if args.cuda_graph_bs else None   # given twice: both lists, once each
    plan = adv.adaptive_config(advice, graph_bs) if args.adaptive_config else None
    cand_plan = adv.adaptive_candidates(advice, graph_bs) if args.adaptive_candidates else None
    plan_path = cand_path = None
    if plan is not None:
        plan_path = _write_adaptive(outputs["--adaptive-config"], plan, args.force)
    if cand_plan is not None:
        cand_path = _write_adaptive(outputs["--adaptive-candidates"], cand_plan, args.force, "--adaptive-candidates")
    if args.json:
        out = advice.to_dict()
        out["inputs"].update({"source": desc, "baseline_tok_s": {str(k): v for k, v in baselines.items()},
                              "target_shape": shape_note})
        if plan is not None:
            out["adaptive_config"] = {"path": str(plan_path), "speculative_num_steps": plan.launch_steps,
                                      "buckets": {str(k): v for k, v in plan.buckets.items()},
                                      "speculation_off_buckets": plan.off_buckets, "notes": plan.merged}
            # where batch sizes share a bucket, the depth it pins (the text output's note) is what runs
            for entry in out["per_batch_size"]:
                entry["adaptive_steps"] = plan.steps_by_bs.get(entry["bs"], entry["adaptive_steps"])
        if cand_plan is not None:
            out["adaptive_candidates"] = {"path": str(cand_path), "speculative_num_steps": cand_plan.launch_steps,
                                          "buckets": {str(k): v for k, v in cand_plan.buckets.items()},
                                          "speculation_off_buckets": cand_plan.off_buckets,
                                          "notes": cand_plan.merged}
        print(json.dumps(text_safe(out), indent=1))   # the inputs' names as the text output writes them
    else:
        from rich.markup import escape

        from ..termout import PipeConsole

        console = PipeConsole(file=sys.stdout, width=None if sys.stdout.isatty() else 100)
        _render(advice, plan, plan_path, desc, shape_note, console,
                full=bool(args.batch_sizes) or len(advice.per_bs) <= FULL_TABLES_UP_TO)
        if cand_plan is not None:
            console.print(f"wrote {escape(shell_word(cand_path))}: candidates " + ", ".join(
                f"bs>={k}: {v}" for k, v in cand_plan.buckets.items()))
            for msg in cand_plan.merged:
                console.print(f"  note: {escape(msg)}")
            console.print(f"launch with: SGLANG_EAGLE_CYCLE_ADAPTIVE=cost ... --speculative-adaptive "
                          f"--speculative-adaptive-config {escape(shell_word(cand_path))} "
                          f"--speculative-num-steps {cand_plan.launch_steps} "
                          "--speculative-eagle-topk 1", soft_wrap=True)
    return 0
