"""Timing report from SGLang server logs: where each EAGLE-3 decode cycle goes, and whether it pays.

LOG is a server log (plain or .gz, or - for stdin) with our per-cycle or aggregated
[eagle-cycle] lines, our JSONL (SGLANG_EAGLE_CYCLE_JSONL), and/or stock "Decode batch" lines.
Cycles are grouped by file and (bs, steps, topk, draft_tokens); each group gets phase means,
exact p50/p90/p99 and shares, the accept-length histogram, per-position acceptance and
effective tok/s (committed tokens / summed cycle time). Findings flag broken drafts, NaN-like
all-accepted cycles, verify-bound and draft-heavy cycles, and runs slower than --baseline.

Examples:

    eagle-cycle inspect server.log
    eagle-cycle inspect steps5.log.gz steps2.log.gz --baseline 88.8 --plot cmp.png
    eagle-cycle inspect server.log --json > report.json
    eagle-cycle inspect cycles.jsonl --trace cycles.trace.json   # open in ui.perfetto.dev
    eagle-cycle inspect server.log --show-rejected 20             # why lines were counted as damaged
    eagle-cycle inspect bench.log --prometheus bench.prom --model-name kimi-k2.5   # textfile collector / Pushgateway

--prometheus FILE writes the cycle series (phase-time and accept-length histograms, per-position
reached/accepted counters, cycles by depth, the start-up wiring line as an info gauge) in the
Prometheus text format, the names a live
server exports (README, "Prometheus metrics"); node_exporter's textfile collector and a Pushgateway take it.

Exit codes: 0 report written (--csv included: with no [eagle-cycle] cycles in the input it holds
its header alone, and a warning says so); 1 a requested --plot, --trace or --prometheus file was not
written because the input holds no [eagle-cycle] cycles (stock Decode batch lines only): a warning
names it, and the table or --json and --csv are still written; 2 unusable input (nothing readable)
or an output refused (it exists without --force, is not a regular file, ...).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import sys


def add_cli_args(parser: argparse.ArgumentParser) -> None:
    from ..argtypes import StoreOnce, int_in, negative_values_are_values

    parser.formatter_class = argparse.RawDescriptionHelpFormatter   # keep the examples' lines
    parser.add_argument("logs", nargs="+", metavar="LOG", help="server log, .gz log, JSONL, or - for stdin")
    parser.add_argument("--json", action="store_true", help="print the eagle-cycle-inspect/1 JSON document")
    parser.add_argument("--csv", metavar="FILE", action=StoreOnce,
                        help="write one CSV row per group to FILE (- for stdout)")
    parser.add_argument("--plot", metavar="PNG", action=StoreOnce, help="write phase bars, accept-length histogram and "
                        "per-position acceptance to an image, its format by the suffix: .png, .svg, .pdf or another matplotlib "
                        "writes (.jpg, .eps, ...); no suffix: PNG")
    parser.add_argument("--trace", metavar="JSON", action=StoreOnce, help="write a Chrome/Perfetto trace-event file "
                        "(one track per rank, one slice per phase per cycle)")
    parser.add_argument("--trace-max-cycles", type=int, default=None, metavar="N",
                        help="cycles per track written to --trace (default 100000; 0: no limit)")
    parser.add_argument("--prometheus", metavar="FILE", action=StoreOnce,
                        help="write the cycle series in the Prometheus text "
                        "exposition format (- for stdout)")
    parser.add_argument("--model-name", default=None, metavar="NAME", type=_label_text,
                        help="model_name label of the --prometheus series (a log does not carry it; default empty)")
    parser.add_argument("--baseline", metavar="TOK_S|BS:TOK_S|LOG", action="append",
                        help="no-speculation throughput in tok/s (one batch size in the logs), BS:TOK_S "
                        "(repeat per batch size), or a no-speculation server log (its Decode batch gen "
                        "throughput per batch size)")
    parser.add_argument("--show-rejected", type=int_in(0), default=0, metavar="N",
                        help="print the first N damaged lines to stderr, with file, line number and why "
                        "each was rejected (default 0)")
    parser.add_argument("--force", action="store_true", help="overwrite existing output files (a symlink "
                        "is kept: its target is overwritten)")
    # `--baseline -inf` reaches the baseline check, which names the problem
    negative_values_are_values(parser)


def _warn(message: str) -> None:
    print(f"eagle-cycle inspect: warning: {message}", file=sys.stderr)


def _printable(text: str) -> str:
    """``text`` with control characters (NUL, escape, ...) written as escapes, on one line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _show_rejected(item: dict) -> None:
    print(f"eagle-cycle inspect: rejected: {item['file']}:{item['line']}: {item['reason']}: "
          f"{_printable(item['text'])}", file=sys.stderr)


def _check_outputs(args: argparse.Namespace) -> None:
    """Refuse, before anything is read or written, outputs that cannot be written as asked
    (:func:`logfiles.check_output` for each named file)."""
    from ..errors import UsageError
    from ..logfiles import check_output

    stdout = [flag for flag, on in (("--json", args.json), ("--csv -", args.csv == "-"),
                                    ("--prometheus -", args.prometheus == "-")) if on]
    if len(stdout) > 1:
        raise UsageError(f"{' and '.join(stdout)} {'both' if len(stdout) == 2 else 'all'} write to stdout; "
                         "give the others a file name")
    # an option of an output that was not asked for would be dropped without a word
    if args.trace_max_cycles is not None and args.trace is None:
        raise UsageError("--trace-max-cycles applies to the --trace file: give --trace FILE.json too")
    if args.model_name is not None and args.prometheus is None:
        raise UsageError("--model-name labels the --prometheus series: give --prometheus FILE too")
    if args.trace_max_cycles is None:
        args.trace_max_cycles = 100_000
    if args.model_name is None:
        args.model_name = ""
    if args.trace_max_cycles < 0:
        raise UsageError("--trace-max-cycles must be >= 0")
    if args.plot:
        _load_matplotlib()
        from matplotlib.backend_bases import FigureCanvasBase

        fmt = _plot_format(args.plot)
        if fmt == "pgf":   # matplotlib writes it only through a LaTeX install
            raise UsageError(f"--plot {args.plot}: .pgf needs a LaTeX install; use .png, .svg or .pdf")
        if fmt not in FigureCanvasBase.get_supported_filetypes():
            known = ", ".join(f".{k}" for k in sorted(FigureCanvasBase.get_supported_filetypes()) if k != "pgf")
            raise UsageError(f"--plot {args.plot}: unknown image format (use .png, .svg or .pdf; matplotlib also "
                             f"writes {known})")
    named = [(flag, value) for flag, value in (("--csv", args.csv), ("--plot", args.plot), ("--trace", args.trace),
                                               ("--prometheus", args.prometheus))
             if value is not None and not (value == "-" and flag in ("--csv", "--prometheus"))]   # those two: stdout
    for flag, value in named:
        if not value.strip():
            raise UsageError(f"{flag}: the file name is empty")
        if value == "-":   # --csv - and --prometheus - are stdout; an image or a trace is not
            raise UsageError(f"{flag} -: writes a file, not stdout; give a file name")
    if len({os.path.realpath(value) for _, value in named}) < len(named):
        raise UsageError("the same file is given for two outputs")
    inputs = [(p, "") for p in args.logs]   # "-": the file behind standard input, if any
    # a --baseline that names a file is an input, colon or not (BS:TOK_S only where no such file is)
    inputs += [(value, " (--baseline)") for value in args.baseline or [] if value not in ("", "-") and
               (":" not in value or os.path.exists(value))]
    for flag, value in named:
        check_output(value, flag, args.force, inputs)


def _load_matplotlib() -> None:
    """Import matplotlib for ``--plot``. The plot draws on matplotlib's Agg canvas and uses no
    backend, so ``MPLBACKEND`` is left out of the import: one that matplotlib refuses
    (``MPLBACKEND=nonsense``) made the import raise and had ended the command in a traceback.

    Raises:
        UsageError: matplotlib cannot be imported.
    """
    from ..errors import UsageError

    if "matplotlib" not in sys.modules:
        os.environ.pop("MPLBACKEND", None)
    try:
        import matplotlib  # noqa: F401
    except (ImportError, ValueError) as exc:
        raise UsageError(f"--plot: matplotlib cannot be loaded: {str(exc).strip()}") from None


def _plot_format(path: str) -> str:
    return os.path.splitext(path)[1].lstrip(".").lower() or "png"


def _baseline(values: list[str] | None):
    """``--baseline`` values: a number, a log path, or ``BS:TOK_S`` pairs (-> ``{bs: tok_s}``).

    Raises:
        UsageError: a log path or bare number given with other values, or a bad ``BS:TOK_S``.
    """
    from ..argtypes import baseline_item, strict_float
    from ..errors import UsageError

    if not values:
        return None
    pairs = {}
    for value in values:
        bs, sep, tok = value.partition(":")
        if sep and not os.path.exists(value):
            # BS:TOK_S as advise reads --baseline-tok-s (a file that exists is a log, whatever its name)
            try:
                key, tok_s = baseline_item(value)
            except argparse.ArgumentTypeError as exc:
                raise UsageError(f"--baseline: {exc}") from None
            if key in pairs:  # as advise reads --baseline-tok-s
                raise UsageError(f"--baseline given twice for bs {key} ({pairs[key]:g} and {tok_s:g})")
            pairs[key] = tok_s
            continue
        if len(values) > 1:
            raise UsageError(f"--baseline {value}: with several --baseline values each must be BS:TOK_S")
        try:
            return strict_float(value)
        except ValueError:
            return value  # a log path; report.load_baseline checks it
    return pairs


def _new_file_mode(path: str) -> int:
    """Permission bits for ``path``: those of the file it replaces, else 0666 less the umask."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


class _AtomicOutput:
    """A temporary file beside ``path`` that replaces it only on :meth:`commit`.

    A symlink is kept: the file it points to is the one replaced. The new file gets the replaced
    file's permission bits, or 0666 less the umask (as ``open`` would), not mkstemp's 0600.

    Raises:
        OSError: creating, writing (through :meth:`guard`) or committing failed; its ``filename``
            is the path the user gave, never the temporary file's.
    """

    def __init__(self, path: str, mode: str = "w"):
        import tempfile

        self.given = path
        self.tmp = None
        with self.guard():
            path = os.path.realpath(path)
            directory = os.path.dirname(path)
            fd, self.tmp = tempfile.mkstemp(prefix=".eagle-cycle-", suffix=os.path.splitext(path)[1], dir=directory)
            os.fchmod(fd, _new_file_mode(path))
            self.path = path
            self.fh = os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8",
                                newline="" if "b" not in mode else None)

    @contextlib.contextmanager
    def guard(self):
        """Re-raise an ``OSError`` inside the block as one about the user's path."""
        try:
            yield
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror or str(exc), self.given) from None

    def commit(self) -> None:
        with self.guard():
            self.fh.close()
            os.replace(self.tmp, self.path)

    def discard(self) -> None:
        fh = getattr(self, "fh", None)
        if fh is not None and not fh.closed:
            try:
                fh.close()
            except OSError:
                pass        # a full disk fails the final flush too; the file goes anyway
        if self.tmp is not None and os.path.exists(self.tmp):
            os.unlink(self.tmp)


def _guarded(add, out: _AtomicOutput):
    """``add`` whose write errors name ``out``'s path (the trace is written while logs are read)."""

    def guarded(label, rec):
        with out.guard():
            add(label, rec)

    return guarded


def _write_file(path: str, write, mode: str = "w") -> None:
    """``write(fh)`` into a temporary file beside ``path`` that replaces it only when done
    (:class:`_AtomicOutput`); on any failure ``path`` is left as it was."""
    out = _AtomicOutput(path, mode)
    try:
        with out.guard():
            write(out.fh)
        out.commit()
    finally:
        out.discard()


def main(args: argparse.Namespace) -> int:
    import json

    from ..report import count_of, inspect_paths
    from ..trace import TraceWriter
    from ..report_table import render_table, write_csv

    _check_outputs(args)
    rc = 0
    trace_out = writer = None
    if args.trace:
        trace_out = _AtomicOutput(args.trace)
        writer = TraceWriter(trace_out.fh, max_cycles_per_track=args.trace_max_cycles or None)
    try:
        groups: list = []
        base = _baseline(args.baseline)
        # an input that is JSON of another kind (a sweep's bench JSONL, a trace, an inspect document)
        # is named as such in its warning or in the error, with the command that reads it
        doc = inspect_paths(args.logs, baseline=base, warn=_warn,
                            on_record=_guarded(writer.add, trace_out) if writer else None,
                            on_rejected=_show_rejected, max_rejected=args.show_rejected, groups_out=groups)
        if isinstance(base, dict) and doc["groups"]:
            unused = sorted(set(base) - {g["bs"] for g in doc["groups"]})
            if unused:
                _warn(f"--baseline for bs {', '.join(map(str, unused))}: no cycles at that batch size in the "
                      "input; not used")
        if writer is not None:
            with trace_out.guard():
                writer.close()
            if writer.records_written:
                trace_out.commit()
                if writer.records_dropped:
                    dropped = writer.records_dropped
                    _warn(f"{args.trace}: {count_of(dropped, 'cycle record')} beyond --trace-max-cycles "
                          f"{args.trace_max_cycles} per track {'was' if dropped == 1 else 'were'} left out")
            else:
                _warn(f"{args.trace} not written: no [eagle-cycle] cycles in the input")
                rc = 1
    finally:
        if trace_out is not None:
            trace_out.discard()

    if args.plot:
        from ..plots import render

        if doc["groups"]:
            _write_file(args.plot, lambda fh: render(doc, fh, fmt=_plot_format(args.plot)), "wb")
        else:
            _warn(f"{args.plot} not written: no [eagle-cycle] cycles in the input (stock Decode batch lines only)")
            rc = 1

    if args.csv:
        if args.csv == "-":
            write_csv(doc, sys.stdout)
        else:
            _write_file(args.csv, lambda fh: write_csv(doc, fh))
        if not doc["groups"]:
            # a table of no rows is still an answer (exit 0), but one that looks like a failed write
            _warn(f"{'--csv -' if args.csv == '-' else args.csv}: header only, no rows: no [eagle-cycle] cycles in "
                  "the input (stock Decode batch lines give no cycle rows)")

    if args.prometheus:
        from ..metrics import exposition

        shown = "--prometheus -" if args.prometheus == "-" else args.prometheus   # "-" alone names nothing
        if not groups:
            _warn(f"{shown} not written: no [eagle-cycle] cycles in the input (stock Decode batch "
                  "lines give no cycle series)")
            rc = 1
        else:
            many = [g for g in groups if g.lines > g.cycles]
            if many:
                # every rank's line of a cycle is in the phase histograms, each cycle once in the
                # counters: a rate over the phase sums reads the ranks-per-cycle factor low (helper 48)
                one = len(many) == 1
                _warn(f"{shown}: {count_of(len(many), 'group')} {'holds' if one else 'hold'} every rank's "
                      f"line of each cycle ({count_of(sum(g.lines for g in many), 'line')} for "
                      f"{count_of(sum(g.cycles for g in many), 'cycle')}): {'its' if one else 'their'} phase "
                      f"histograms count each rank's times, {'its' if one else 'their'} cycle and acceptance counters "
                      "each cycle once, so a rate over the phase sums reads low by the ranks per cycle; export one "
                      "rank's lines (the default, without SGLANG_EAGLE_CYCLE_ALL_RANKS)")
            text = exposition(groups, model_name=args.model_name, wiring=doc["wiring"])
            if args.prometheus == "-":
                sys.stdout.write(text)
            else:
                _write_file(args.prometheus, lambda fh: fh.write(text))

    if args.json:
        print(json.dumps(doc, indent=1))
    elif args.csv != "-" and args.prometheus != "-":
        render_table(doc)
    return rc


def _label_text(value: str) -> str:
    """A label value as text: bytes that are no UTF-8 (a shell's ``$'\\xff'``) are refused (the
    exposition is UTF-8; one had been written raw to stdout and crashed a file's write)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError("not UTF-8 text") from None
    return value
