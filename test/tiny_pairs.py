"""The tiny pairs the suite proves things on: made once, cached (see sglang_eagle_cycle.tiny.cache).

A clean clone trains them inside the suite (about 2.5 minutes per target on 2 cores, under a
minute per extra draft); later runs reuse them until the trainer's source changes.
``EAGLE_CYCLE_TINY_CACHE`` moves the cache.
"""

from __future__ import annotations

import sys

from sglang_eagle_cycle.tiny.cache import cached_pair
from sglang_eagle_cycle.tiny.pair import PairSpec

#: The pairs the suite uses: make-tiny-pair's defaults per arch (ids 1,3,5, the acceptance runs of
#: issue 11), and a DeepSeek-V3 draft declaring ids 2,4,6 on the same target (the case where stock
#: SGLang captures one layer early).
SPECS = {
    "llama": PairSpec(arch="llama", seed=11),
    "deepseek_v3": PairSpec(arch="deepseek_v3", seed=11),
    "deepseek_v3_ids246": PairSpec(arch="deepseek_v3", seed=11, aux_layer_ids=(2, 4, 6)),
}

_made: dict = {}


def pair(name: str):
    """(folder, summary) of the suite's pair ``name`` (a key of SPECS), trained on first use."""
    if name not in _made:
        log = (lambda msg: print(f"[tiny {name}] {msg}", file=sys.stderr, flush=True))
        _made[name] = cached_pair(SPECS[name], log=log)
    return _made[name]
