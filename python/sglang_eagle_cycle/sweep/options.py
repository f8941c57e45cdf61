"""Command line of ``benchmarks/bench_eagle_cycle.py`` and its ``main``.

Arguments after a lone ``--`` go to every launched server unchanged (``--tp 8``,
``--mem-fraction-static 0.85``...). ``--server-cmd`` replaces ``python -m sglang.launch_server``
(a wrapper script, a container entry point, or the test suite's stand-in server); the sweep
appends the same SGLang arguments to it.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import signal
import sys
from pathlib import Path
from typing import Optional

from ..argtypes import MAX_BS, StoreOnce, int_in
from ..errors import UsageError, one_line
from .signals import forget_interrupts, interrupt

PROG = "bench_eagle_cycle.py"

#: Image suffixes matplotlib's Agg canvas writes (``--plot``).
PLOT_SUFFIXES = (".png", ".svg", ".pdf", ".svgz", ".ps", ".eps", ".jpg", ".jpeg", ".tif", ".tiff",
                 ".webp")

#: ``--algorithm``: a name SGLang's ``SpeculativeAlgorithm.from_string`` could know (built-in or
#: plugin-registered), not one that turns speculation off.
_ALGORITHM = re.compile(r"[A-Za-z][A-Za-z0-9_]*")

DESCRIPTION = """\
Speculation-depth sweep against the no-speculation baseline (SGLang 0.5.23).

--launch starts one server per configuration (baseline, then every --steps x --topk x
--draft-tokens), waits for /health, warms up, measures every --concurrency, stops the server's
whole process group and keeps its log. --url measures one running server. Each (configuration,
concurrency) appends one eagle-cycle-bench/1 record to --output as soon as it is measured; a
re-run skips the ones already there with status ok. Ends with a table, a plot and one JSON line
naming the best configuration per concurrency. Arguments after a lone -- go to every launched
server unchanged (e.g. -- --tp 8 --mem-fraction-static 0.85)."""

EPILOG = """\
examples:
  %(prog)s --launch --model-path meta-llama/Llama-3.1-8B-Instruct \\
      --draft-model-path lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B \\
      --steps 1 2 3 4 5 --concurrency 1 8 --output sweep.jsonl -- --tp 1 --mem-fraction-static 0.8
  %(prog)s --url http://127.0.0.1:30000 --server-log server.log --concurrency 1 --output sweep.jsonl

exit codes: 0 something was measured (now or by an earlier run), 1 nothing was, 2 bad input,
130 interrupted before anything was measured."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # noqa: D401 - argparse API
        self.exit(2, f"{self.prog}: error: {one_line(message)}\n")


def _check_url(url: str) -> None:
    """A server base URL: ``http(s)://HOST[:PORT]``, port 1..65535, no path (``/`` at most).

    Raises:
        UsageError: anything else (no scheme, no host, a port that is not a number or out of range, a
            path, query or fragment).
    """
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        port = parts.port               # ValueError for ":abc" and ports above 65535
    except ValueError:
        parts, port = None, None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or port == 0:
        raise UsageError(f"--url {url!r}: expected http://HOST[:PORT] or https://HOST[:PORT] "
                         f"(e.g. http://127.0.0.1:30000)")
    if parts.path not in ("", "/") or "?" in url or "#" in url:
        # the sweep adds /health, /server_info and /generate itself: a path would 404 on each
        raise UsageError(f"--url {url!r}: expected the server's base URL, http://HOST[:PORT] without a path "
                         f"(the sweep adds /health and /generate itself)")


_positive_int = int_in(1)
#: ``--concurrency``: a batch size, bounded as inspect and advise bound one (helper 100: 10^8 was taken)
_concurrency = int_in(1, MAX_BS)
_port = int_in(1, 65535)


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number: {text}")
    return v


def _draft_tokens(text: str) -> Optional[int]:
    if text == "auto":
        return None
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'auto' or an integer >= 2: {text!r}") from None
    if v < 2:
        raise argparse.ArgumentTypeError(f"'auto' or an integer >= 2: {v}")
    return v


def _file_path(text: str) -> Path:
    """A file name for ``--output`` / ``--plot``: one ending in a path separator names a folder, and
    ``Path`` drops the separator (``adir/`` had written the records to a file named ``adir``).

    Raises:
        argparse.ArgumentTypeError: the text ends in a separator.
    """
    if text.endswith(("/", os.sep)):
        raise argparse.ArgumentTypeError(f"{text!r} names a folder (it ends in {text[-1]!r}): give a file name, "
                                         f"e.g. {text}eagle_cycle_bench.jsonl")
    return Path(text)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description=DESCRIPTION, epilog=EPILOG,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--url", help="measure the server already running at URL (e.g. http://127.0.0.1:30000)")
    mode.add_argument("--launch", action="store_true", help="start one server per configuration")

    g = p.add_argument_group("URL mode")
    g.add_argument("--server-log", type=Path, metavar="PATH",
                   help="the running server's log file, for the per-phase cycle breakdown")

    g = p.add_argument_group("launch mode")
    g.add_argument("--model-path", "--model", dest="model",
                   help="target model (passed as --model-path)")
    g.add_argument("--draft-model-path", "--draft", dest="draft",
                   help="EAGLE-3 draft (passed as --speculative-draft-model-path)")
    g.add_argument("--algorithm", default=None,
                   help="--speculative-algorithm for the speculative configurations (default EAGLE3)")
    g.add_argument("--steps", type=_positive_int, nargs="+", action="extend", metavar="N",
                   help="--speculative-num-steps values (default: 1 2 3 5; given twice, both lists)")
    g.add_argument("--topk", type=_positive_int, nargs="+", action="extend", metavar="K",
                   help="--speculative-eagle-topk values (default: 1)")
    g.add_argument("--draft-tokens", type=_draft_tokens, nargs="+", action="extend", metavar="auto|N",
                   help="--speculative-num-draft-tokens values for topk > 1 (default: auto = not "
                        "passed); with topk 1 SGLang forces steps + 1")
    g.add_argument("--no-baseline", action="store_true",
                   help="skip the no-speculation baseline server")
    g.add_argument("--startup-timeout", type=_positive_float, default=900.0, metavar="S",
                   help="seconds a server may take to answer /health with 200 (default 900; with --url, "
                        "at most 60: that server is already up)")
    g.add_argument("--stop-timeout", type=_positive_float, default=None, metavar="S",
                   help="seconds between SIGTERM and SIGKILL of the server's process group (default 30)")
    g.add_argument("--server-cmd", default=None, metavar="CMD",
                   help="command that replaces 'python -m sglang.launch_server' (shell-quoted)")
    g.add_argument("--host", default=None, help="--host of launched servers (default 127.0.0.1)")
    g.add_argument("--port", type=_port, default=None,
                   help="--port of launched servers (default: a free port per launch)")
    g.add_argument("--log-dir", type=Path, default=None,
                   help="where server logs are kept (default: OUTPUT_STEM_server_logs/ beside --output)")

    g = p.add_argument_group("workload")
    g.add_argument("--concurrency", type=_concurrency, nargs="+", action="extend", metavar="C",
                   help="requests kept in flight (batch size), one measurement each (default: 1; given "
                        "twice, both lists)")
    g.add_argument("--max-new-tokens", type=_positive_int, default=256, metavar="N",
                   help="max_new_tokens per request (default 256); sampling is greedy (temperature 0)")
    n = g.add_mutually_exclusive_group()
    n.add_argument("--num-prompts", type=_positive_int, default=None, metavar="N",
                   help="requests per measurement")
    n.add_argument("--duration", type=_positive_float, default=None, metavar="S",
                   help="seconds of sending per measurement (default 60; sent requests finish)")
    g.add_argument("--prompts", type=Path, default=None, metavar="FILE.jsonl",
                   help="prompt file, one {\"prompt\": ...} per line (default: the bundled 80 prompts)")
    g.add_argument("--seed", type=int, default=0, help="seed of the request order (default 0)")
    g.add_argument("--warmup-requests", type=int, default=4, metavar="N",
                   help="unmeasured requests after each start (default 4)")
    g.add_argument("--request-timeout", type=_positive_float, default=600.0, metavar="S",
                   help="read timeout per request (default 600)")
    g.add_argument("--no-stream", action="store_true",
                   help="non-streaming requests (no TTFT / ITL)")
    g.add_argument("--ignore-eos", action="store_true",
                   help="every request generates exactly --max-new-tokens")

    g = p.add_argument_group("output")
    g.add_argument("--output", type=_file_path, action=StoreOnce, default=Path("eagle_cycle_bench.jsonl"),
                   help="JSONL file records are appended to (default eagle_cycle_bench.jsonl); an "
                        "existing file that holds no eagle-cycle-bench/1 records is refused")
    g.add_argument("--force", action="store_true",
                   help="append to an existing --output even if it holds no eagle-cycle-bench/1 records")
    g.add_argument("--plot", type=_file_path, action=StoreOnce, default=None,
                   help="plot path, .png/.svg/.pdf/... (default: OUTPUT_STEM.png; an existing file "
                        "is never replaced: STEM.1.png... is used instead)")
    g.add_argument("--no-plot", action="store_true", help="no plot")
    g.add_argument("--no-progress", action="store_true", help="no tqdm progress bar")
    return p


def parse(argv: list[str]) -> argparse.Namespace:
    """Parse ``argv``; everything after the first lone ``--`` becomes ``args.server_args``.

    Raises:
        UsageError: combinations argparse cannot check (mode-specific options).
    """
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    args = build_parser().parse_args(argv)
    args.server_args = extra
    args.concurrency = args.concurrency or [1]   # no default list: "extend" would add to it
    launch_only = {"--model-path": args.model, "--draft-model-path": args.draft,
                   "--steps": args.steps, "--topk": args.topk, "--draft-tokens": args.draft_tokens,
                   "--server-cmd": args.server_cmd, "--port": args.port, "--host": args.host,
                   "--algorithm": args.algorithm, "--stop-timeout": args.stop_timeout, "--log-dir": args.log_dir,
                   "--no-baseline": args.no_baseline or None,
                   "arguments after --": extra or None}
    if args.url is not None:
        used = [k for k, v in launch_only.items() if v is not None]
        if used:
            raise UsageError(f"{', '.join(used)}: launch mode only (drop --url or use --launch)")
        _check_url(args.url)
    # the launch options' defaults, set here so that one given with --url is said, not ignored
    args.algorithm = "EAGLE3" if args.algorithm is None else args.algorithm
    args.host = "127.0.0.1" if args.host is None else args.host
    args.stop_timeout = 30.0 if args.stop_timeout is None else args.stop_timeout
    if args.url is None:
        if args.server_log is not None:
            raise UsageError("--server-log: URL mode only (launched servers' logs are kept in --log-dir)")
        if not args.model:
            raise UsageError("--launch needs --model-path")
        args.steps = args.steps or [1, 2, 3, 5]
        args.topk = args.topk or [1]
        args.draft_tokens = args.draft_tokens or [None]
        if not _ALGORITHM.fullmatch(args.algorithm) or args.algorithm.upper() == "NONE":
            raise UsageError(f"--algorithm must name a speculative algorithm (e.g. EAGLE3): "
                             f"{args.algorithm!r}")
        if args.algorithm.upper() in ("EAGLE", "EAGLE3", "STANDALONE") and not args.draft:
            raise UsageError(f"--algorithm {args.algorithm} needs --draft-model-path")
        if args.server_cmd is not None:
            try:
                args.server_cmd = shlex.split(args.server_cmd)
            except ValueError as exc:
                raise UsageError(f"--server-cmd: {exc}") from None
            if not args.server_cmd:
                raise UsageError("--server-cmd is empty")
    if args.plot is not None and args.no_plot:
        raise UsageError("--plot and --no-plot contradict each other")
    if args.warmup_requests < 0:
        raise UsageError(f"--warmup-requests must be >= 0: {args.warmup_requests}")
    if args.num_prompts is None and args.duration is None:
        args.duration = 60.0
    return args


def main(argv: Optional[list[str]] = None, prog: str = PROG) -> int:
    """Run the benchmark; returns the exit code (see the epilog).

    ``prog`` names the command in usage and messages (``eagle-cycle sweep`` from the CLI).
    """
    global PROG
    PROG = prog
    argv = sys.argv[1:] if argv is None else list(argv)
    from ..logfiles import names_escaped_in_output

    with names_escaped_in_output():   # a model or log path whose bytes are no UTF-8, as the records write it
        try:
            return _run(parse(argv))
        except UsageError as exc:
            print(f"{PROG}: error: {one_line(str(exc))}", file=sys.stderr)
            return 2


def check_plot_path(path: Path, given: bool = True) -> None:
    """Refuse a plot path that could only fail after the sweep.

    ``given``: the user named ``path`` with ``--plot`` (else it is the default beside ``--output``,
    and a refusal says so and how to choose another).

    Raises:
        UsageError: unsupported image suffix, a directory, or a missing / unwritable parent directory.
    """
    if path.is_dir():
        if not given:
            raise UsageError(f"the default plot path {path} (beside --output) is a directory: "
                             "name another with --plot, or give --no-plot")
        raise UsageError(f"--plot is a directory: {path}")
    if path.suffix.lower() not in PLOT_SUFFIXES:
        raise UsageError(f"--plot needs an image suffix ({', '.join(PLOT_SUFFIXES[:3])}, ...): {path}")
    parent = path.parent
    if not parent.is_dir():
        raise UsageError(f"--plot directory does not exist: {parent}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"--plot directory is not writable: {parent}")


def _raise_interrupt(signum, frame):
    """SIGINT and SIGTERM: raise KeyboardInterrupt wherever the sweep is (the server is then stopped
    and the records kept), noted first so that one raised where the interpreter loses it still stops
    the sweep at its next wait or record (:func:`.signals.interrupt`). Being a handler of our own, it
    also keeps ``asyncio.run`` from installing its SIGINT handler, which only cancels the running
    task, a cancellation that HTTP client code may absorb (then the Ctrl-C would be lost)."""
    interrupt(signum, frame)


def _run(args: argparse.Namespace) -> int:
    from .client import GenerateSettings
    from .grid import build_grid
    from ..logfiles import same_file
    from .launcher import DEFAULT_SERVER_CMD, free_port, unique_path
    from .records import RecordLog
    from .runner import Sweep, SweepError, SweepSettings
    from . import summary
    from .workload import load_prompt_set

    inputs = [(f, flag) for f, flag in ((args.prompts, "--prompts"), (args.server_log, "--server-log")) if f]
    for out_path, out_flag in ((args.output, "--output"), (None if args.no_plot else args.plot, "--plot")):
        for in_path, in_flag in inputs:
            if out_path is not None and same_file(in_path, out_path):
                raise UsageError(f"{out_flag} {out_path}: is the {in_flag} input; inputs are never written")
    prompt_set = load_prompt_set(args.prompts)
    log = RecordLog(args.output)
    foreign = log.foreign_content()
    if foreign and not args.force:
        raise UsageError(f"--output {args.output} {foreign}; not appending to it (pick another file, "
                         "or --force)")
    log.check_writable()
    plot_path = None if args.no_plot else (args.plot or args.output.with_suffix(".png"))
    if plot_path is not None:
        check_plot_path(plot_path, given=args.plot is not None)
    if args.server_log is not None:
        if not args.server_log.is_file():
            raise UsageError(f"--server-log not found or not a file: {args.server_log}")
        args.server_log = args.server_log.resolve()
    out = args.output
    settings = SweepSettings(
        concurrencies=list(dict.fromkeys(args.concurrency)),
        generate=GenerateSettings(max_new_tokens=args.max_new_tokens, stream=not args.no_stream,
                                  ignore_eos=args.ignore_eos, request_timeout_s=args.request_timeout),
        num_prompts=args.num_prompts, duration_s=args.duration,
        warmup_requests=args.warmup_requests, seed=args.seed,
        startup_timeout_s=args.startup_timeout, stop_timeout_s=args.stop_timeout,
        model=args.model, draft=args.draft, algorithm=args.algorithm,
        server_cmd=tuple(args.server_cmd or DEFAULT_SERVER_CMD), extra_args=args.server_args,
        host=args.host, port=args.port,
        log_dir=(args.log_dir or out.parent / f"{out.stem}_server_logs").resolve(),
        progress=not args.no_progress and sys.stderr.isatty(),  # a bar in a log file is noise
    )
    if args.launch:
        try:
            free_port(args.host)    # every launch listens there: a name or address this machine has
        except OSError as exc:
            raise UsageError(f"--host {args.host}: cannot listen there on this machine "
                             f"({exc.strerror or exc}); give one of its IPv4 addresses or names") from None
        if settings.log_dir.exists() and not settings.log_dir.is_dir():
            raise UsageError(f"--log-dir {settings.log_dir}: a file, not a folder; give a folder for the "
                             "server logs")
        try:
            settings.log_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot create --log-dir {settings.log_dir}: {exc.strerror}") from None
    sweep = Sweep(settings, prompt_set, log)
    if log.skipped_lines:
        sweep.warn(f"{log.skipped_lines} line(s) of {out} are not {'eagle-cycle-bench/1'} records; "
                   "left as they are")
    forget_interrupts()
    previous = {sig: signal.signal(sig, _raise_interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        if args.launch:
            grid = build_grid(args.steps, args.topk, args.draft_tokens, baseline=not args.no_baseline)
            outcome = sweep.run_launch(grid)
            model = args.model
        else:
            try:
                outcome = sweep.run_url(args.url, args.server_log)
            except SweepError as exc:
                print(f"{PROG}: {exc}", file=sys.stderr)
                return 1
            model = None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    from .runner import run_settings

    rows = summary.select(log.read(), prompt_set_sha256=prompt_set.sha256,
                          max_new_tokens=args.max_new_tokens, model=model,
                          settings=lambda steps: run_settings(settings, steps))
    if model is None and rows:  # URL mode: the measured server's model
        measured = [r for r in rows if r.get("started_at")]
        model = max(measured, key=lambda r: r["started_at"])["model"] if measured else None
        rows = [r for r in rows if r.get("model") == model]
    title = (f"EAGLE speculation sweep: {model or '?'}, max_new_tokens {args.max_new_tokens}, "
             f"prompts {prompt_set.source} ({prompt_set.sha256[:12]})")
    try:
        _print_summary(rows, title, plot_path, out, outcome)
    except BrokenPipeError:   # the reader stopped early (| head): the records are written, the exit code stands
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
    return outcome.exit_code


def _print_summary(rows: list, title: str, plot_path, out, outcome) -> None:
    """The table, the plot, the records line and the best-depth JSON line."""
    from . import summary
    from .launcher import unique_path
    if rows:
        summary.render_table(rows, sys.stdout, title)
        if plot_path is not None:
            path = unique_path(plot_path)
            try:
                if summary.plot(rows, path, title) is not None:
                    print(f"plot: {path}", file=sys.stderr)
            except (OSError, ValueError, RuntimeError) as exc:  # the records are safe; say so in one line
                reason = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
                print(f"{PROG}: warning: cannot write plot {path}: {reason}", file=sys.stderr)
    print(f"records: {out} ({outcome.ok} ok, {outcome.failed} failed, {outcome.skipped} already measured)",
          file=sys.stderr)
    print(summary.best_json(rows), flush=True)
