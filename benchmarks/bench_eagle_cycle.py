#!/usr/bin/env python3
"""Speculation-depth sweep against the no-speculation baseline (SGLang 0.5.23, EAGLE-3).

Choosing ``--speculative-num-steps`` is easy to get wrong: on Kimi-K2.5 a 5-step configuration
ran 20% below the no-speculation baseline while 2 steps ran 6% above it. This sweep restarts the
server once per configuration, measures output tok/s, latency and accept length at each
concurrency, and appends one ``eagle-cycle-bench/1`` JSONL record per (configuration,
concurrency); a re-run resumes where it stopped.

Usage (GPU machine)::

    python benchmarks/bench_eagle_cycle.py --launch \\
        --model-path meta-llama/Llama-3.1-8B-Instruct \\
        --draft-model-path lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B \\
        --steps 1 2 3 4 5 --concurrency 1 8 --output sweep.jsonl -- --mem-fraction-static 0.8

    python benchmarks/bench_eagle_cycle.py --url http://127.0.0.1:30000 --server-log server.log

The logic lives in :mod:`sglang_eagle_cycle.sweep`; ``--help`` lists every option.
"""

import sys
from pathlib import Path

try:
    from sglang_eagle_cycle.sweep.options import main
except ImportError:  # running from a checkout without the package installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
    from sglang_eagle_cycle.sweep.options import main

if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C outside the sweep loop (while loading or printing)
        print("bench_eagle_cycle.py: interrupted", file=sys.stderr)
        sys.exit(130)
