"""One rank of the 2-rank consistency check of ``CostAwarePolicy`` (run by ``test_adaptive.py``).

Usage: ``python adaptive_sync_probe.py RANK PORT OUT.json``. Both ranks see the same
verify results (as TP ranks do: the accept counts are identical everywhere) but different cycle
timings: rank 0 a cheap deep draft, rank 1 an expensive one, as if their local clocks disagreed.
First each rank decides alone (``nosync``), then the ranks run ``BroadcastSync`` over a gloo group
(as SGLang's TP CPU group) and must run the same depth at every cycle (``sync``).
"""

from __future__ import annotations

import json
import random
import sys
from types import SimpleNamespace

import torch.distributed as dist

from sglang_eagle_cycle.adaptive import BroadcastSync, CostAwarePolicy

rank, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
cfg = out + f".cfg{rank}.json"
with open(cfg, "w") as f:
    json.dump({"1": {"candidate_steps": [1, 2, 3, 4, 5]}}, f)
step_ms = 0.3 if rank == 0 else 4.0         # the ranks' local timings disagree


def run(sync) -> dict:
    policy = CostAwarePolicy(3, cfg, sync=sync)
    shared = random.Random(2026)            # the verify results: identical on both ranks
    steps_seq, modes, late = [], [], []
    for cycle in range(1000):
        steps = policy.get_steps_for_batch(4)
        steps_seq.append(steps)
        modes.append(policy.last_mode)   # the cycle line's adaptive= field
        accepts = []
        for _ in range(4):
            a = 0
            while a < steps and shared.random() < 0.8:
                a += 1
            accepts.append(a)
        late.append(SimpleNamespace(steps=steps, bs=4, total_ms=20.0 + steps * step_ms, gap_ms=0.1,
                                    draft_ms=(steps - 1) * step_ms, draft_prep_ms=0.1, verify_ms=18.0, extend_ms=1.0))
        if len(late) > 2:
            policy.on_cycle_record(late.pop(0))
        policy.on_verify_complete(accepts, 4)
    return {"steps": steps_seq, "modes": modes, "switches": len(policy.switches)}


def run_fault(sync) -> dict:
    """The leader's decision state goes bad at its 5th decision (a depth of None), behind SGLang's
    FallbackPolicy as in the server: every rank must keep running one depth, and none hang."""
    from sglang_eagle_cycle.patches.adaptive import FallbackPolicy

    class Theirs:   # SGLang's policy, as far as a rank handed to it would see
        candidate_steps = [1, 2, 3, 4, 5]

        def get_steps_for_batch(self, bs):
            return 3

        def on_verify_complete(self, accepts, bs):
            return None

    ours = CostAwarePolicy(3, cfg, sync=sync)
    if sync.leader:
        decide, calls = ours._decide, [0]

        def bad_decide(slot):
            calls[0] += 1
            out = decide(slot)
            if calls[0] == 5:
                slot.current = None
            return out

        ours._decide = bad_decide
    policy = FallbackPolicy(ours, Theirs())
    shared = random.Random(7)
    steps_seq = []
    for cycle in range(400):
        steps = policy.get_steps_for_batch(4)
        steps_seq.append(steps)
        accepts = [sum(1 for _ in range(steps) if shared.random() < 0.8) for _ in range(4)]
        if sync.leader:
            ours.on_cycle_record(SimpleNamespace(steps=steps, bs=4, total_ms=20.0 + steps * step_ms, gap_ms=0.1,
                                                 draft_ms=(steps - 1) * step_ms, draft_prep_ms=0.1, verify_ms=18.0,
                                                 extend_ms=1.0))
        policy.on_verify_complete(accepts, 4)
    return {"steps": steps_seq, "ours_active": policy.active is ours, "frozen": ours.frozen}


result = {"rank": rank, "nosync": run(None), "sync": run(BroadcastSync(dist.group.WORLD, 0, rank)),
          "fault": run_fault(BroadcastSync(dist.group.WORLD, 0, rank))}
with open(out, "w") as f:
    json.dump(result, f)
dist.destroy_process_group()
