"""One module per ``eagle-cycle`` subcommand; each exposes ``add_cli_args(parser)`` and ``main(args) -> int``.

Modules here import only argparse-level things at top; the logic they call is imported inside ``main``.
"""
