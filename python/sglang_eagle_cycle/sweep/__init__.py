"""The speculation-depth sweep behind ``benchmarks/bench_eagle_cycle.py``.

Modules, each small and testable on its own:

* :mod:`.workload`  prompt sets (the bundled one or ``--prompts file.jsonl``) and their sha256;
* :mod:`.client`    the ``/generate`` client (streaming SSE and plain JSON), closed-loop load;
* :mod:`.metrics`   pure statistics: tok/s, TTFT/ITL percentiles, accept length and histogram;
* :mod:`.launcher`  one server process group: start, wait for ``/health``, stop, log tail;
* :mod:`.records`   the ``eagle-cycle-bench/1`` JSONL: append-only, resume keys;
* :mod:`.runner`    the grid, the per-(configuration, concurrency) measurement, failures;
* :mod:`.summary`   the table, the plot and the best-configuration JSON line;
* :mod:`.options`   the command line.
"""
