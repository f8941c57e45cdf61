"""``eagle-cycle``: offline wiring check, log inspection and the depth advisor.

Usage::

    eagle-cycle wiring TARGET DRAFT [--json] [--probe [--prompts FILE] [--tokens N] ...]
    eagle-cycle inspect LOG [LOG ...] [--json | --csv FILE | --plot out.png | --trace out.json]
    eagle-cycle advise INPUT [INPUT ...] [--baseline-tok-s 88.8] [--json]
    eagle-cycle make-tiny-pair OUT [--arch llama|deepseek_v3] [--seed N] [--json]
    eagle-cycle probe TARGET DRAFT [--prompts FILE] [--tokens N] [--device cpu|cuda] [--json]
    eagle-cycle sweep (--launch ... | --url URL) [--steps 1 2 3] [--concurrency 1 8] [-- SERVER ARGS]

Exit codes: 0 success, 1 a check found an error-level problem, 2 unusable input
(one line on stderr, never a traceback), 130 interrupted, 143 stopped by SIGTERM (every command but
``sweep``, which stops its servers and exits 130, removes its temporary files on the way out).
"""

from __future__ import annotations

import argparse
import importlib
import re
import signal
import sys

from . import __version__
from .errors import UsageError, one_line
from .sigterm import exit_if_received, forget, terminate

# subcommand -> (module under sglang_eagle_cycle.commands, one-line help)
SUBCOMMANDS = {
    "wiring": ("wiring_cmd", "check a target/draft pair's EAGLE-3 aux hidden-state wiring"),
    "inspect": ("inspect_cmd", "timing report from server logs / JSONL: tables, plots, traces"),
    "advise": ("advise_cmd", "pick the speculation depth from measured acceptance and phase costs"),
    "make-tiny-pair": ("make_tiny_pair_cmd", "train a tiny target + EAGLE-3 draft pair that SGLang loads (CPU)"),
    "probe": ("probe_cmd", "ask an EAGLE-3 draft's weights which target layers it was trained on (transformers)"),
}


class _Parser(argparse.ArgumentParser):
    """argparse that exits 2 with one line instead of the usage block plus message."""

    def error(self, message: str):  # noqa: D401 - argparse API
        self.exit(2, f"{self.prog}: error: {one_line(message)}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="eagle-cycle", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"eagle-cycle {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    # the sweep keeps its own parser (arguments after a lone -- go to every launched server):
    # main() hands it the argv; listed here for --help
    sub.add_parser("sweep", help="speculation-depth sweep against the no-spec baseline "
                   "(= python benchmarks/bench_eagle_cycle.py)", add_help=False)
    for name, (module, help_text) in SUBCOMMANDS.items():
        mod = importlib.import_module(f"{__package__}.commands.{module}")
        p = sub.add_parser(name, help=help_text, description=(mod.__doc__ or help_text).strip(),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.add_cli_args(p)
        p.set_defaults(_main=mod.main)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    from .logfiles import names_escaped_in_output

    with names_escaped_in_output():
        return _main(argv)


def _main(argv: list[str]) -> int:
    if argv[:1] == ["sweep"]:
        from .sweep.options import main as sweep_main

        try:
            return sweep_main(argv[1:], prog="eagle-cycle sweep")
        except KeyboardInterrupt:  # outside the sweep loop (while loading or printing)
            print("eagle-cycle sweep: interrupted", file=sys.stderr)
            return 130
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        hint = ""
        if args.command == "inspect" and any(re.fullmatch(r"\d+:[\d.]+", a) for a in extra):
            # advise's --baseline-tok-s takes several values after one flag; inspect's --baseline, which
            # also takes a log path, is given once per value (helper 44)
            hint = f" (inspect takes --baseline once per value: --baseline {extra[0]} --baseline ...)"
        parser.error(f"unrecognized arguments: {' '.join(extra)}{hint}")
    previous = _exit_on_sigterm()
    try:
        rc = _run(args)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    exit_if_received()   # a SIGTERM whose exit was swallowed (sigterm's note) still ends as one
    return rc


def _run(args) -> int:
    """The subcommand's exit code, with its expected failures turned into a one-line error."""
    try:
        return int(args._main(args) or 0)
    except UsageError as exc:
        print(f"eagle-cycle {args.command}: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("eagle-cycle: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader stopped early (``| head``): keep a verdict already decided
        _silence_stdout()
        return int(getattr(args, "_rc_decided", 0))
    except RecursionError:
        print(f"eagle-cycle {args.command}: error: input nested too deeply to read", file=sys.stderr)
        return 2
    except OSError as exc:  # a full disk, a closed terminal: the output cannot be written
        _silence_stdout()
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"eagle-cycle {args.command}: error: cannot write output: {one_line(f'{where}{exc.strerror or exc}')}",
              file=sys.stderr)
        return 2


def _exit_on_sigterm():
    """Make SIGTERM (``timeout``, ``kill``) end the command as an exit, so that its temporary files
    (advise's stdin and pipe spool, probe's offload folder) are removed on the way out; returns the
    handler it replaced (None where none can be set: not the main thread). A signal noted by an
    earlier command in this process is forgotten."""
    try:
        previous = signal.signal(signal.SIGTERM, terminate)
    except (ValueError, OSError):
        return None
    forget()
    return previous


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not fail again."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
