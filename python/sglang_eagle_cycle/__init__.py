"""sglang-eagle-cycle: EAGLE-3 aux-layer wiring and per-cycle timing for SGLang 0.5.23.

Nothing heavy is imported here: SGLang loads this package (through the
``sglang.srt.plugins`` entry point) in every process it starts.
"""

__version__ = "0.1.0"

#: The only SGLang release whose internals the hooks were written against.
SUPPORTED_SGLANG = "0.5.23"
