"""A cost-aware depth policy for SGLang's adaptive speculative decoding (``--speculative-adaptive``).

SGLang 0.5.23's own policy (``AdaptiveStepSlot``) follows an EMA of accepted drafts and sets the
depth to ``round(ema) + 1``; it never looks at what a deeper draft costs. :class:`CostAwarePolicy`
implements the same ``AdaptiveSpecPolicy`` protocol (``candidate_steps``, ``set_cuda_graph_bs``,
``get_steps_for_batch``, ``on_verify_complete``, ``cuda_graph_bs_for_step``) and picks, per
batch-size bucket, the candidate depth with the best estimated throughput

    tok/s(S) = bs * E[L(S)] / period(S),    E[L(S)] = 1 + sum_{j<=S} prod_{i<=j} p_i

(accept length with the bonus token, Leviathan et al., "Fast Inference from Transformers via
Speculative Decoding", ICML 2023, eq. 1, with a conditional acceptance ``p_j`` per position), where

* ``p_j`` comes from the verify results SGLang hands every policy (``on_verify_complete``:
  accepted drafts per request, identical on all ranks). A request at depth ``S`` that accepted
  ``a`` drafts reached positions ``1..min(a + 1, S)`` and accepted ``1..a``; one that accepted all
  ``S`` is cut off at ``S``, not evidence beyond it. Counts are shared by all depths of a bucket
  and forgotten with a half-life of :func:`accept_half_life` cycles. A second set of counts forgets
  :data:`SHIFT_SPEED` times faster; when some position's recent acceptance is :data:`SHIFT_Z`
  standard errors from the long-run estimate (a shift: the workload changed), the counts restart
  from the last :data:`SHIFT_KEEP_BLOCKS` decisions' verifies and the probes restart as at a start;
* ``period(S)`` (ms, ``total + gap``) comes from the profiler's cycle records
  (:meth:`CostAwarePolicy.on_cycle_record`, one or more cycles late), folded into per-depth
  estimates (mean and variance of one cycle's period) on the sink thread itself; the scheduler
  thread only reads them when it decides (no lock; nothing blocks it); forgotten with a half-life
  of :data:`PERIOD_HALF_LIFE` cycles of that depth. The first cycle after a switch is kept out: its
  excess over the depth's period is the bucket's measured switch cost (:attr:`_Slot.switch_ms`).

A depth not run yet gets an interpolated period (linear between measured depths, else at least
one draft forward per extra step). Every depth has an optimistic bound: upper acceptance (never
rising with depth) over its measured period less 1.96 standard errors of the mean, or, unmeasured,
over a low period: that of the next shallower measured depth plus one draft forward per extra step
(the verify and draft-extend can only widen), or, below the shallowest measured depth ``b``,
``period(b)`` less its extra draft forwards and the verify and draft-extend shrunk in proportion to
the verified width.

Every :data:`DECIDE_EVERY` verifies of a bucket the policy decides:

* a depth better than the pick by its point estimate by more than :data:`HYSTERESIS` becomes the
  pick when *settled* (period measured, ``E[L]`` known to within :data:`ACCEPT_TOLERANCE`), else it
  is *probed* (an expected gain: free of the budget);
* a depth whose bound beats the pick by :data:`EXPLORE_MARGIN` is probed (an expected loss, the
  nearest to the pick first) while such probes, with their switches, have taken less than
  :data:`EXPLORE_BUDGET` of the bucket's cycle time (the first :data:`FREE_PROBES` always run);
* a probe runs :data:`DECIDE_EVERY` cycles when the acceptance up to its depth is settled (only its
  period is in question), else :func:`probe_cycles`; at its end the better of the probe and the
  depth it left wins (no hysteresis: that holds a pick against noise, not a probe).

Per cycle the scheduler thread only files the verify result in a deque. The sink thread counts
them as it hands over the cycle records (:meth:`CostAwarePolicy.on_cycle_record`; the scheduler
counts them itself at a decision only when no records arrive), so a decision reads counts one or
a few cycles old; the decision itself runs on the scheduler thread every :data:`DECIDE_EVERY`
verifies (amortised). ``benchmarks/bench_adaptive_policy.py`` prices it.
"""

from __future__ import annotations

import bisect
import json
import logging
import math
import threading
import time
from collections import deque
from itertools import chain
from typing import Any, Optional

logger = logging.getLogger("sglang_eagle_cycle")

#: Verifies of a bucket between two decisions.
DECIDE_EVERY = 16
#: A probed depth runs until about this many requests verified there (16 to 64 cycles).
PROBE_REQUESTS = 384
#: Largest share of a bucket's cycle time spent probing, once :data:`FREE_PROBES` probes ran.
EXPLORE_BUDGET = 0.04
#: Probes allowed whatever their time.
FREE_PROBES = 3
#: A depth's upper bound must beat the pick's estimate by this fraction to be probed.
EXPLORE_MARGIN = 0.02
#: A measured depth replaces the current one when its estimate is better by this fraction.
HYSTERESIS = 0.01
#: Half-life of the acceptance counts in requests verified, held within 100 to 400 cycles of the
#: bucket (:func:`accept_half_life`): 4,000 requests from bs 10 to 40, 400 at bs 1 (400 cycles) and
#: 100 cycles from bs 40 up.
ACCEPT_HALF_LIFE_REQUESTS = 4000.0


#: Half-life (cycles run at that depth) of a depth's period estimate; with a period weight below
#: :data:`MIN_PERIOD_WEIGHT` a depth counts as unmeasured.
PERIOD_HALF_LIFE = 4000.0
MIN_PERIOD_WEIGHT = 8.0
#: Pseudo-counts of a position's prior (the shallower position's acceptance).
PRIOR = 10.0
#: A depth is settled when ``E[L]``'s upper bound is within this fraction of its estimate.
ACCEPT_TOLERANCE = 0.05

#: Added to the depth a leader broadcasts while that depth is a probe (the followers' cycle lines
#: then say ``adaptive=explore`` too).
EXPLORE_FLAG = 1 << 16

#: SGLang 0.5.23's default adaptive config's candidates per bucket (``DEFAULT_ADAPTIVE_CONFIG``),
#: used when neither a file nor SGLang is available.
DEFAULT_CANDIDATES = {1: [1, 3, 5, 7], 8: [0, 1, 3], 32: [0, 1], 64: [0]}


def expected_accept_len(p, steps: int) -> float:
    """``E[L(S)] = 1 + sum_{j<=S} prod_{i<=j} p_i`` over the first ``steps`` positions of ``p``
    (:func:`sglang_eagle_cycle.costmodel.expected_accept_len`; Leviathan et al. 2023, eq. 1)."""
    from .costmodel import expected_accept_len as over_all

    return over_all(list(p)[:steps])


#: Weight of each switch's measured cost in the running mean of :attr:`_Slot.switch_ms`.
SWITCH_ALPHA = 0.2

#: The recent counts (those that detect a shift) forget this many times faster than the others.
SHIFT_SPEED = 8.0
#: A position's recent acceptance this many standard errors from the long-run estimate is a shift:
#: the long-run counts are replaced by the recent ones.
SHIFT_Z = 4.0
#: The sink thread counts the verify results once this many wait (with each cycle record).
FOLD_EVERY = 4
#: At a decision the scheduler thread counts them itself when this many wait (no records arrive).
FOLD_BEHIND = 2 * DECIDE_EVERY
#: At a shift the counts restart from the verifies of this many last decisions (16 verifies each).
SHIFT_KEEP_BLOCKS = 2
#: Recent reaches a position needs before its test counts.
SHIFT_MIN_REACHED = 24.0
#: The live mean batch size over ``nospec_bs`` within which the bucket's ``nospec_tok_s`` is
#: compared with the measured depths (the "speculation should be off" line): no-spec throughput
#: grows about in proportion to the batch, so another batch size's figure would mislead.
NOSPEC_BS_MATCH = (0.8, 1.25)
#: Verifies of a bucket after which, with not one cycle record received *by that bucket* over them,
#: the policy gives up: the cycle timing does not reach it (not profiling this worker, turned off by a
#: fault, before or after the bucket's first record, or never timing this bucket's batches while
#: other buckets' arrive), so its depths cannot be measured, or would keep their old periods for good.
#: The fault hands the decisions to SGLang's own policy (the leader of several ranks freezes the depth
#: instead); records normally arrive one or two cycles late. Checked at each decision, per bucket:
#: :meth:`CostAwarePolicy._check_records`.
NO_RECORDS_AFTER = 1024
#: Seconds (monotonic clock) a bucket must also have gone without a new record before
#: :data:`NO_RECORDS_AFTER` trips it, once any record has reached the policy: a sink thread that
#: lags (it waits up to ``sinks.STALE_AFTER_S``, 5 s, for a cycle's events, and a busy scheduler
#: starves it) delays records by many short cycles without their timing having stopped, and a
#: hand-over is for good.
NO_RECORDS_QUIET_S = 15.0


def accept_lens(p) -> list[float]:
    """``[E[L(0)], E[L(1)], ..., E[L(len(p))]]``: :func:`expected_accept_len` at every depth in one
    pass (the running product and sum of Leviathan et al. 2023, eq. 1)."""
    out, run, total = [1.0], 1.0, 1.0
    for q in p:
        run *= q
        total += run
        out.append(total)
    return out


def accept_half_life(bs: float) -> float:
    """Half-life of the acceptance counts (cycles): ``4000 / bs`` within [100, 400]."""
    return min(400.0, max(100.0, ACCEPT_HALF_LIFE_REQUESTS / max(bs, 1.0)))


def probe_cycles(bs: float) -> int:
    """Cycles of one probe: about :data:`PROBE_REQUESTS` requests, 16 to 64 cycles."""
    return int(min(64, max(16, math.ceil(PROBE_REQUESTS / max(bs, 1.0)))))


class _Slot:
    """One batch-size bucket: its candidates, acceptance counts, period estimates and state."""

    def __init__(self, bs_key: int, candidates: list[int], initial_steps: int, nospec_tok_s: Optional[float],
                 nospec_bs: Optional[int] = None):
        self.bs_key = bs_key
        self.candidates = sorted(set(candidates))
        self.current = initial_steps if initial_steps in self.candidates else self.candidates[len(self.candidates) // 2]
        self.nospec_tok_s = nospec_tok_s
        #: the batch size ``nospec_tok_s`` was measured at (the bucket's own key where the file says none;
        #: bs 1 for SGLang's key "0", the bucket below the next key: never 0, a divisor)
        self.nospec_bs = nospec_bs or max(bs_key, 1)
        depth = max(self.candidates)
        #: (reached, accepted) per position, forgotten with the acceptance half-life: one tuple, replaced
        #: whole by the thread that counts, so a decision reads a consistent pair
        self.counts = ([0.0] * depth, [0.0] * depth)
        self.recent = ([0.0] * depth, [0.0] * depth)   # the same, forgotten SHIFT_SPEED times faster
        self.lock = threading.Lock()   # one counter at a time (taken without blocking)
        self.shifts = 0                        # acceptance shifts detected
        self.blocks: deque = deque(maxlen=4 * SHIFT_KEEP_BLOCKS)   # (verifies, reached, accepted) of the last chunks counted
        self.period = {s: 0.0 for s in self.candidates}        # ms, decayed mean
        self.weight = {s: 0.0 for s in self.candidates}        # decayed sample weight
        self.period_var = {s: 0.0 for s in self.candidates}    # ms^2, decayed variance of one cycle's period
        self.draft_fwd = {s: 0.0 for s in self.candidates}     # ms of the draft forwards, decayed mean
        self.prep = {s: 0.0 for s in self.candidates}          # ms of draft_prep, decayed mean
        self.verify_part = {s: 0.0 for s in self.candidates}   # ms of verify + extend, decayed mean
        self.pending: deque = deque()   # verify results (depth, accepted drafts per request) not yet counted
        self.since = 0                  # verifies since the last decision
        self.bs_sum = 0
        self.verifies = 0
        self.cycles = 0
        self.probe: Optional[int] = None
        self.probe_left = 0
        self.home = self.current       # the last depth chosen on evidence (probes return to it)
        self.applied = self.current    # the depth that runs (lags ``current`` by one boundary with a sync)
        self.charged: Optional[int] = None   # the probe's depth when it counts against the budget
        self.last_steps: Optional[int] = None   # depth of the last record (sink thread)
        self.records = 0               # cycle records routed to this bucket (sink thread)
        self.records_seen = 0          # ``records`` at the last decision that found new ones (scheduler thread)
        self.quiet_since = 0           # ``verifies`` at that decision: none has arrived since
        self.quiet_t: Optional[float] = None   # the policy's clock then (None until the first decision)
        self.switch_ms = 0.0           # ms a switch adds to the first cycle at the new depth, decayed mean
        self.probe_ms = 0.0            # cycle time spent in probes charged to the budget (from records)
        self.total_ms = 0.0            # cycle time of the bucket (from records)
        self.probes = 0
        self.mode = "exploit"          # the leader's state: "explore" while ``current`` is a probe
        self.applied_mode = "exploit"  # the state of ``applied`` (what the cycle lines say)
        self.off_logged = False
        self.done: list = []           # measured depths, step and mean bs: fixed per decision (snapshot)
        self.step = 0.0
        self.bs = float(bs_key)

    # -- estimates --------------------------------------------------------------------------------

    @property
    def reached(self) -> list:
        return self.counts[0]

    @property
    def accepted(self) -> list:
        return self.counts[1]

    def p(self, counts: Optional[tuple] = None) -> list[float]:
        """Posterior mean of ``p_j``: ``(accepted + PRIOR * prior) / (reached + PRIOR)``, the prior
        being position ``j - 1``'s estimate (0.5 at position 1): an unreached position takes the
        shallower one's acceptance, and a few reaches move it only part of the way."""
        out, prior = [], 0.5
        reached, accepted = self.counts if counts is None else counts
        for r, a in zip(reached, accepted):
            q = (a + PRIOR * prior) / (r + PRIOR)
            out.append(q)
            prior = q
        return out

    def p_upper(self, p: Optional[list] = None, reached: Optional[list] = None) -> list[float]:
        """Optimistic ``p_j``: the posterior mean (``p``, else :meth:`p`) plus 1.96 standard errors
        over ``reached + PRIOR`` (forgotten counts), never above a shallower position's bound
        (conditional acceptance does not rise with depth)."""
        out, cap = [], 1.0
        for q, r in zip(self.p() if p is None else p, self.counts[0] if reached is None else reached):
            up = min(1.0, q + 1.96 * math.sqrt(max(q * (1 - q), 0.0025) / (r + PRIOR)))
            cap = min(cap, up)
            out.append(cap)
        return out

    def settled(self, s: int, el, el_up) -> bool:
        """Depth ``s`` has evidence: its period measured, and ``E[L(s)]``'s upper bound within
        :data:`ACCEPT_TOLERANCE` of its estimate (positions rarely reached weigh little in it).
        ``el``, ``el_up``: :func:`accept_lens` of :meth:`p` and :meth:`p_upper`."""
        return self.measured(s) and self.accept_settled(s, el, el_up)

    @staticmethod
    def accept_settled(s: int, el, el_up) -> bool:
        """``E[L(s)]``'s upper bound is within :data:`ACCEPT_TOLERANCE` of its estimate."""
        return el_up[s] <= el[s] * (1 + ACCEPT_TOLERANCE)

    def probe_length(self, s: int, el, el_up) -> int:
        """Cycles a probe of depth ``s`` runs: :data:`DECIDE_EVERY` (enough for its period) when the
        acceptance up to ``s`` is already settled, else :func:`probe_cycles` (acceptance evidence)."""
        if self.accept_settled(s, el, el_up):
            return DECIDE_EVERY
        return probe_cycles(self.mean_bs())

    def start_probe(self, s: int, el, el_up, charged: bool) -> None:
        """Run depth ``s`` as a probe for :meth:`probe_length` cycles; ``charged``: it counts against
        the explore budget (a bound-driven probe, an expected loss)."""
        self.probe, self.probe_left, self.mode = s, self.probe_length(s, el, el_up), "explore"
        if charged:
            self.probes += 1
            self.charged = s

    def measured(self, s: int) -> bool:
        return self.weight.get(s, 0.0) >= MIN_PERIOD_WEIGHT

    def snapshot(self) -> None:
        """Fix, for one decision, which depths count as measured (:attr:`done`), one draft forward
        (:attr:`step`, ms: the smallest per-step draft time among measured depths >= 2, 0 when none
        ran) and the mean batch size (:attr:`bs`); the sink thread may update the estimates meanwhile.
        :meth:`period_point`, :meth:`period_lower`, :meth:`estimate` and :meth:`upper` read them."""
        self.done = [d for d in self.candidates if self.measured(d)]
        steps = [self.draft_fwd[d] / (d - 1) for d in self.done if d >= 2]
        self.step = min(steps) if steps else 0.0
        self.bs = self.mean_bs()

    def mean_bs(self) -> float:
        return self.bs_sum / self.verifies if self.verifies else float(self.bs_key)

    def period_point(self, s: int) -> Optional[float]:
        """Period of depth ``s`` (ms): measured, else interpolated linearly between the measured
        depths around it, else extrapolated from the nearest two (slope at least one draft forward
        per step, never below :meth:`period_lower`); None with nothing measured."""
        if self.measured(s):
            return self.period[s]
        done = self.done
        if not done:
            return None
        below = [d for d in done if d < s]
        above = [d for d in done if d > s]
        if below and above:
            a, b = max(below), min(above)
            return self.period[a] + (self.period[b] - self.period[a]) * (s - a) / (b - a)
        step = self.step
        side = below if below else above
        side = sorted(side, key=lambda d: abs(d - s))[:2]
        if len(side) == 2:
            d1, d2 = side
            slope = max((self.period[d1] - self.period[d2]) / (d1 - d2), step)
        else:
            d1, slope = side[0], step
        guess = self.period[d1] + (s - d1) * slope
        low = self.period_lower(s)
        return max(guess, low) if low is not None else guess

    def estimate(self, s: int, el) -> Optional[float]:
        """Point estimate of depth ``s``'s tok/s (:meth:`period_point`; ``el``: :func:`accept_lens`
        of :meth:`p`); None with nothing measured."""
        period = self.period_point(s)
        if period is None or period <= 0:
            return None
        return 1000.0 * self.bs * el[s] / period

    def period_lower(self, s: int) -> Optional[float]:
        """An optimistic (low) period for an unmeasured depth (ms); None with nothing measured.

        Deeper than a measured depth ``a``: ``period(a)`` plus one draft forward per extra step (the
        verify and draft-extend can only widen). Shallower than every measured depth, from the
        shallowest ``b``: ``period(b)`` less its extra draft forwards (and its draft preparation
        when ``s <= 1``), the verify and draft-extend shrunk in proportion to the verified width.
        """
        done = self.done
        if not done:
            return None
        step = self.step
        below = [d for d in done if d < s]
        if below:
            a = max(below)
            return self.period[a] + (s - max(a, 1)) * step if s > 1 else self.period[a]
        b = min(done)
        shrink = (s + 1) / (b + 1)
        drop = self.draft_fwd[b] * (b - max(s, 1)) / max(b - 1, 1) + (self.prep[b] if s <= 1 else 0.0)
        return max(1e-3, self.period[b] - drop - self.verify_part[b] * (1.0 - shrink))

    def upper(self, s: int, el_up) -> Optional[float]:
        """Optimistic tok/s: upper acceptance (``el_up``: :func:`accept_lens` of :meth:`p_upper`) over
        the measured period less 1.96 standard errors of its mean, or over :meth:`period_lower`."""
        if self.measured(s) and self.period[s] > 0:
            low = max(0.5 * self.period[s], self.period[s] - 1.96 * math.sqrt(self.period_var[s] / self.weight[s]))
        else:
            low = self.period_lower(s)
        if low is None:
            return None
        return 1000.0 * self.bs * el_up[s] / low


class CostAwarePolicy:
    """An ``AdaptiveSpecPolicy`` that picks the depth with the best measured tok/s (module docstring).

    Args:
        initial_steps: ``--speculative-num-steps``, the depth to start on (as SGLang's
            ``AdaptiveSpeculativeParams``; a depth not among a bucket's candidates starts on the
            middle candidate).
        cfg_path: SGLang's adaptive config (``--speculative-adaptive-config``): integer-string
            batch-size keys, each with ``candidate_steps``; our optional ``nospec_tok_s`` per key
            (written by ``eagle-cycle advise``) is the no-speculation throughput (tok/s) at the batch
            size ``nospec_bs`` (requests; the key where absent). None: SGLang's default config.
        log: logger for switches and advice (default ``sglang_eagle_cycle``).

    Raises:
        ValueError: a file that is not JSON, a config without integer-string keys, or with
            candidates that are not non-negative integers, a ``nospec_tok_s`` that is no positive
            finite number or a ``nospec_bs`` that is no positive integer. OSError: an unreadable file. An
            ``initial_steps`` not among a bucket's candidates starts that bucket on its middle
            candidate, as SGLang's policy does.
    """

    def __init__(self, initial_steps: int, cfg_path: Optional[str] = None, *, log: Optional[logging.Logger] = None,
                 sync: Any = None, clock: Any = time.monotonic):
        self._log = log or logger
        self._clock = clock   # monotonic seconds, read at decisions only (NO_RECORDS_QUIET_S)
        #: :class:`BroadcastSync` (or any object with ``leader`` and ``exchange(bucket, value) -> value | None``,
        #: the value a depth plus :data:`EXPLORE_FLAG` for a probe) when several ranks must run one
        #: depth; None for a single rank.
        self.sync = sync
        #: With a sync: set after a fault of the leader's decision; the depths then stay as they are.
        self.frozen = False
        entries = _load_config(cfg_path)
        self._bs_list = sorted(entries)
        self._slots = {bs: _Slot(bs, entry["candidate_steps"], initial_steps, entry.get("nospec_tok_s"),
                                 entry.get("nospec_bs")) for bs, entry in entries.items()}
        self._cuda_graph_bs: Optional[list[int]] = None
        self._routes: dict = {}   # batch size -> slot (cleared when the CUDA-graph sizes change)
        self._per_decay = 0.5 ** (1.0 / PERIOD_HALF_LIFE)
        self.switches: list[tuple] = []   # (verify index, bucket, old, new, why)
        self.records = 0   # cycle records handed over (sink thread); none at all: see NO_RECORDS_AFTER
        #: ``explore`` or ``exploit``: the state of the bucket of the last batch routed by
        #: :meth:`get_steps_for_batch` (SGLang calls it at every decode batch before the draft), i.e.
        #: whether the depth that batch runs is a probe; the cycle line's ``adaptive=`` field.
        self.last_mode: str = "exploit"

    # -- the AdaptiveSpecPolicy protocol -------------------------------------------------------------

    @property
    def candidate_steps(self) -> list[int]:
        """Union of every bucket's candidates (sizes SGLang's runtime states)."""
        return sorted({s for slot in self._slots.values() for s in slot.candidates})

    def set_cuda_graph_bs(self, cuda_graph_bs: Optional[list[int]]) -> None:
        self._cuda_graph_bs = sorted(cuda_graph_bs) if cuda_graph_bs else None
        self._routes = {}

    def get_steps_for_batch(self, batch_size: int) -> int:
        slot = self._route(batch_size)
        self.last_mode = slot.applied_mode
        return slot.applied

    def cuda_graph_bs_for_step(self, step: int) -> Optional[list[int]]:
        """CUDA-graph batch sizes whose bucket has ``step`` among its candidates (None without graphs)."""
        if self._cuda_graph_bs is None:
            return None
        return [v for v in self._cuda_graph_bs if step in self._slots[self._closest(v)].candidates]

    def on_verify_complete(self, num_correct_drafts_per_req: list[int], batch_size: int) -> Optional[int]:
        """Take one verify's accepted drafts per request; every :data:`DECIDE_EVERY` verifies of the
        bucket, decide. Returns the new depth when it changes, else None (as SGLang's policy)."""
        if not num_correct_drafts_per_req:
            return None
        slot = self._route(batch_size)
        slot.pending.append((slot.applied, num_correct_drafts_per_req))
        slot.bs_sum += batch_size
        slot.verifies += 1
        slot.since += 1
        if slot.since < DECIDE_EVERY:
            return None
        slot.since = 0
        slot.cycles += DECIDE_EVERY
        if self.sync is None:
            new = self._decide(slot)
            slot.applied, slot.applied_mode = slot.current, slot.mode
            return new
        # several ranks: the leader decides; every rank applies, at the next boundary of this bucket,
        # the value the leader broadcast at this one (the broadcast runs in the background meanwhile)
        if self.sync.leader and not self.frozen:
            try:
                self._decide(slot)
            except Exception as exc:   # keep taking part in the broadcasts: the other ranks wait for them
                self._freeze(exc, slot.current)
        else:
            slot.pending.clear()   # a follower: the leader's decisions only
        sent = -1
        if self.sync.leader:
            # the leader alone reads its decision state here: a fault in it must not reach
            # FallbackPolicy, which would hand this rank alone to SGLang's policy and leave the other
            # ranks waiting for this broadcast; the depth every rank runs is broadcast instead
            try:
                sent = int(slot.current) + (EXPLORE_FLAG if slot.mode == "explore" else 0)
                if slot.current not in slot.candidates:
                    raise ValueError(f"depth {slot.current!r} is not among the candidates {slot.candidates}")
            except Exception as exc:
                sent = slot.applied   # held, and no longer a probe
                self._freeze(exc, slot.applied)
                slot.current, slot.mode = slot.applied, "exploit"
        agreed = self.sync.exchange(slot.bs_key, sent)
        if agreed is None or agreed < 0:
            return None
        agreed, mode = agreed % EXPLORE_FLAG, "explore" if agreed >= EXPLORE_FLAG else "exploit"
        if agreed not in slot.candidates:
            return None
        slot.applied_mode = mode
        if agreed == slot.applied:
            return None
        slot.applied = agreed
        if not self.sync.leader:
            slot.current = agreed
        return agreed

    def _freeze(self, exc: BaseException, depth: Any) -> None:
        """Several ranks, a fault of ours on the leader: no decision from now on, the depth held on every
        rank (SGLang's policy taking over on one rank alone would split them), said once."""
        if not self.frozen:
            self.frozen = True
            self._log.warning("sglang-eagle-cycle: internal error in the adaptive policy (%s: %s); the depth "
                              "stays %s on every rank (with several ranks SGLang's own policy cannot take over "
                              "on one alone)", type(exc).__name__, exc, depth)

    def on_cycle_record(self, record: Any) -> None:
        """Take one profiler cycle record: its ``steps``, ``bs`` and ``total_ms`` + ``gap_ms`` (and
        phase parts) update the period estimate of that depth, here, on the sink thread, so the
        scheduler thread only reads the estimates when it decides (each a float read under the GIL;
        no lock, nothing blocks). With :data:`FOLD_EVERY` verify results waiting in the record's
        bucket, they are counted here too. Measured: folding the records in on the scheduler thread
        at decision time cost it about 7 us per record; counting the verify results there, 3.7 to
        5.1 us per cycle at bs 8-64 (``benchmarks/bench_adaptive_policy.py``)."""
        total = getattr(record, "total_ms", None)
        steps = getattr(record, "steps", None)
        if total is None or steps is None:
            return
        self.records += 1
        slot = self._route(int(getattr(record, "bs", 1) or 1))
        slot.records += 1
        if len(slot.pending) >= FOLD_EVERY:
            self._fold(slot)   # the verify results' counting, here rather than on the scheduler thread
        if steps not in slot.period:
            return
        gap = getattr(record, "gap_ms", None)
        period = total + (gap if gap is not None else 0.0)
        draft = getattr(record, "draft_ms", None) or 0.0
        prep = getattr(record, "draft_prep_ms", None) or 0.0
        verify = (getattr(record, "verify_ms", None) or 0.0) + (getattr(record, "extend_ms", None) or 0.0)
        slot.total_ms += period
        if slot.charged == steps:
            slot.probe_ms += period
        first, slot.last_steps = slot.last_steps is not None and steps != slot.last_steps, steps
        if first and slot.measured(steps):
            # the first cycle after a switch carries the switch's cost (new runners, a cold draft):
            # measured apart, kept out of the depth's period
            slot.switch_ms += (max(0.0, period - slot.period[steps]) - slot.switch_ms) * SWITCH_ALPHA
            if slot.charged == steps:
                slot.probe_ms += slot.switch_ms   # and the switch back
            return
        w = slot.weight[steps] * self._per_decay
        k = 1.0 / (w + 1.0)
        delta = period - slot.period[steps]
        slot.period[steps] += delta * k
        slot.period_var[steps] = (1.0 - k) * (slot.period_var[steps] + k * delta * delta)
        slot.draft_fwd[steps] += (draft - slot.draft_fwd[steps]) * k
        slot.prep[steps] += (prep - slot.prep[steps]) * k
        slot.verify_part[steps] += (verify - slot.verify_part[steps]) * k
        slot.weight[steps] = w + 1.0   # last: a depth counts as measured once its estimate is in place

    # -- deciding (scheduler thread) -----------------------------------------------------------------

    def _fold(self, slot: _Slot) -> None:
        """Count the verify results filed so far (on the sink thread, as records arrive; on the
        scheduler thread at a decision only when nobody else did). Never blocks: a thread that finds
        the other counting leaves it to it."""
        if not slot.lock.acquire(False):
            return
        try:
            items, pop = [], slot.pending.popleft
            try:
                while True:
                    items.append(pop())
            except IndexError:
                pass
            if items:
                self._count(slot, items)
        finally:
            slot.lock.release()

    def _count(self, slot: _Slot, pending: list) -> None:
        """Fold verify results ``[(depth, accepted drafts per request), ...]`` into the acceptance
        counts; a shift (:meth:`_shifted`) restarts them (:meth:`_restart`)."""
        n = len(pending)
        depth = len(slot.reached)
        b_reached, b_accepted = [0] * depth, [0] * depth   # this block alone
        by_depth: dict = {}
        for steps, accepts in pending:
            lists = by_depth.get(steps)
            if lists is None:
                by_depth[steps] = [accepts]
            else:
                lists.append(accepts)
        for steps, lists in by_depth.items():
            if steps <= 0:
                continue
            # requests per accepted-draft count: as bytes, each count is one C-level pass (measured: a
            # third of a Counter's time at bs 32)
            try:
                flat = b"".join(map(bytes, lists))
                per = [flat.count(a) for a in range(steps + 1)]
            except (TypeError, ValueError):   # not small non-negative ints (never from SGLang)
                flat, per = b"", []
            if sum(per) != len(flat) or not per:   # a count outside 0..steps: clipped, slowly
                per = [0] * (steps + 1)
                for a in chain.from_iterable(lists):
                    per[min(max(int(a), 0), steps)] += 1
            ge = [0] * (steps + 2)   # ge[k]: requests that accepted at least k drafts
            for k in range(steps, -1, -1):
                ge[k] = ge[k + 1] + per[k]
            for j in range(1, steps + 1):   # position j: reached when a >= j - 1, accepted when a >= j
                b_reached[j - 1] += ge[j - 1]
                b_accepted[j - 1] += ge[j]
        half = accept_half_life(slot.mean_bs())
        decay, fast = 0.5 ** (n / half), 0.5 ** (n * SHIFT_SPEED / half)
        reached, accepted = slot.counts
        slot.counts = ([r * decay + b for r, b in zip(reached, b_reached)],
                       [a * decay + b for a, b in zip(accepted, b_accepted)])
        reached, accepted = slot.recent
        slot.recent = ([r * fast + b for r, b in zip(reached, b_reached)],
                       [a * fast + b for a, b in zip(accepted, b_accepted)])
        slot.blocks.append((n, b_reached, b_accepted))
        if self._shifted(slot, slot.p()):
            self._restart(slot)

    @staticmethod
    def _shifted(slot: _Slot, p: list) -> bool:
        """Whether the recent acceptance of some position is :data:`SHIFT_Z` standard errors away
        from the long-run estimate ``p`` (:meth:`_Slot.p`; positions with at least
        :data:`SHIFT_MIN_REACHED` recent reaches)."""
        for q, r, a in zip(p, *slot.recent):
            if r >= SHIFT_MIN_REACHED and abs(a / r - q) > SHIFT_Z * math.sqrt(max(q * (1.0 - q), 0.0025) / r):
                return True
        return False

    @staticmethod
    def _restart(slot: _Slot) -> None:
        """After a shift: the counts restart from the last :data:`SHIFT_KEEP_BLOCKS` decisions'
        verifies, and the probes as at a start (old evidence is void)."""
        last, kept = [], 0
        for block in reversed(slot.blocks):   # the latest chunks, SHIFT_KEEP_BLOCKS decisions' worth
            if kept >= SHIFT_KEEP_BLOCKS * DECIDE_EVERY:
                break
            last.append(block)
            kept += block[0]
        reached = [float(sum(col)) for col in zip(*(b[1] for b in last))]
        accepted = [float(sum(col)) for col in zip(*(b[2] for b in last))]
        slot.counts, slot.recent = (reached, accepted), (list(reached), list(accepted))
        slot.shifts += 1
        slot.probes, slot.probe_ms, slot.total_ms = 0, 0.0, 0.0

    def _check_records(self, slot: _Slot) -> None:
        """Raise (a fault: :meth:`_decide`'s caller hands over or freezes, with one WARNING) when not
        one cycle record reached ``slot`` over its last :data:`NO_RECORDS_AFTER` verifies. Per bucket,
        so that a bucket whose batches are never timed while others' are, or a timing that stopped
        after the bucket's first records, is said as the policy without any record is, not left on
        its launch depth or its old periods. Once any record has reached the policy, the bucket must
        also have gone :data:`NO_RECORDS_QUIET_S` seconds without one (a lagging sink thread is not a
        stopped timing). O(1), at decisions only (integers compared, the clock read once)."""
        seen, now = slot.records, self._clock()
        if slot.quiet_t is None:
            slot.quiet_t = now
        if seen != slot.records_seen:
            slot.records_seen, slot.quiet_since, slot.quiet_t = seen, slot.verifies, now
            return
        silent = slot.verifies - slot.quiet_since
        if silent < NO_RECORDS_AFTER:
            return
        if self.records and now - slot.quiet_t < NO_RECORDS_QUIET_S:
            return   # records flow elsewhere or did here: a lagging sink thread, not yet a stopped timing
        if not self.records:
            why = (f"no cycle record after {slot.verifies} verifies at bs {slot.bs_key}: the cycle timing does not "
                   "reach the policy (this worker is not profiled, or the timing turned off), so no depth can be "
                   "measured")
        elif not seen:
            why = (f"no cycle record after {slot.verifies} verifies at bs {slot.bs_key}, while other buckets received "
                   f"{self.records}: the cycle timing does not reach this bucket, so none of its depths can be "
                   "measured")
        else:
            why = (f"no cycle record in the last {silent} verifies at bs {slot.bs_key} ({seen} received before): the "
                   "cycle timing stopped reaching the policy, so this bucket's periods would stay as last measured")
        raise RuntimeError(why)

    def _decide(self, slot: _Slot) -> Optional[int]:
        n = DECIDE_EVERY
        self._check_records(slot)
        if len(slot.pending) >= FOLD_BEHIND:   # no records are counting them (none arrive): count here
            self._fold(slot)
        probed = slot.probe
        if probed is not None:
            slot.probe_left -= n
            if slot.probe_left > 0:
                return None
            slot.probe = slot.charged = None
        counts = slot.counts
        p = slot.p(counts)
        el, el_up = accept_lens(p), accept_lens(slot.p_upper(p, counts[0]))
        slot.snapshot()
        est = {s: slot.estimate(s, el) for s in slot.candidates}
        known = {s: v for s, v in est.items() if v is not None}
        old = slot.current
        if not known:
            return None
        best = max(known, key=lambda s: (known[s], -s))
        # after a probe the comparison is with the depth it left: the probe must beat it to stay
        base = slot.home if probed is not None and slot.home in known else old
        cur = known.get(base)
        target, why = base, None
        if base != old:
            why = f"back: est. {known[base]:.1f} vs {known[old]:.1f} tok/s" if old in known else "back"
        budget_ok = slot.probes < FREE_PROBES or slot.probe_ms <= EXPLORE_BUDGET * slot.total_ms
        slot.mode = "exploit"
        # (at a probe's end the better estimate wins: the hysteresis holds a pick against noise, not a probe)
        if cur is None or (best != base and known[best] > cur * (1.0 + (0.0 if probed is not None else HYSTERESIS))):
            why = f"est. {known[best]:.1f} vs {cur:.1f} tok/s" if cur is not None else f"est. {known[best]:.1f} tok/s"
            if slot.settled(best, el, el_up) or cur is None or (best == slot.home and slot.measured(best)):
                target = best
            else:   # better by its point estimate, on thin evidence: a probe (an expected gain: not charged)
                target, why = best, "probe: " + why + (", period interpolated" if not slot.measured(best) else
                                                       ", acceptance not settled")
                slot.start_probe(target, el, el_up, charged=False)
                budget_ok = False
        if slot.mode == "exploit":
            slot.home = target
        # probe a depth whose optimistic bound beats the pick, within the budget (an expected loss: charged)
        if budget_ok:
            bar = known[best] * (1.0 + EXPLORE_MARGIN)
            ups = {s: slot.upper(s, el_up) for s in slot.candidates if s != target and s != probed}
            ups = {s: u for s, u in ups.items() if u is not None and u > bar}
            if ups:   # the nearest to the pick first (throughput is usually unimodal in depth)
                target = min(ups, key=lambda s: (abs(s - best), -ups[s]))
                why = f"probe: bound {ups[target]:.1f} vs est. {known[best]:.1f} tok/s"
                slot.start_probe(target, el, el_up, charged=True)
        # the no-spec figure at the batch size running, at its lowest: no-spec throughput grows with the
        # batch, at most in proportion to it, so a smaller live batch runs at least its share and a larger
        # one at least the figure (the totals of bs 4 and bs 5 compared had said "off" where speculation
        # was the faster per request)
        ratio = slot.bs / slot.nospec_bs
        nospec_here = slot.nospec_tok_s * min(1.0, ratio) if slot.nospec_tok_s else None
        # only like for like: a no-spec figure of another batch size says nothing here (the bucket of
        # key 1 may hold an advised bs 4's baseline while bs 1 runs)
        if nospec_here and not slot.off_logged and known[best] < nospec_here \
                and NOSPEC_BS_MATCH[0] <= ratio <= NOSPEC_BS_MATCH[1]:
            slot.off_logged = True
            self._log.info("adaptive: at bucket bs %d (running %.1f requests on average) every measured depth is "
                           "below the no-spec %.1f tok/s measured at bs %d (at least %.1f tok/s at %.1f requests; "
                           "best %d steps, est. %.1f tok/s): speculation should be off for this batch size",
                           slot.bs_key, slot.bs, slot.nospec_tok_s, slot.nospec_bs, nospec_here, slot.bs, best,
                           known[best])
        if target == old:
            return None
        slot.current = target
        self.switches.append((slot.cycles, slot.bs_key, old, target, why))
        self._log.info("adaptive: steps %d -> %d at bs %d (%s)", old, target, slot.bs_key, why)
        return target

    # -- routing (as SGLang's AdaptiveSpeculativeParams) ----------------------------------------------

    def _route(self, batch_size: int) -> _Slot:
        slot = self._routes.get(batch_size)
        if slot is None:
            slot = self._routes[batch_size] = self._route_uncached(batch_size)
        return slot

    def _route_uncached(self, batch_size: int) -> _Slot:
        bs = batch_size
        if self._cuda_graph_bs is not None:
            i = bisect.bisect_left(self._cuda_graph_bs, batch_size)
            bs = self._cuda_graph_bs[i] if i < len(self._cuda_graph_bs) else batch_size
        return self._slots[self._closest(bs)]

    def _closest(self, bs: int) -> int:
        i = bisect.bisect_right(self._bs_list, bs) - 1
        return self._bs_list[max(0, i)]

    def mode(self, batch_size: int) -> str:
        """``explore`` while the bucket of ``batch_size`` probes a depth, else ``exploit``."""
        return self._route(batch_size).mode


class BroadcastSync:
    """One depth on every rank: the leader's decision of each boundary, broadcast without blocking.

    Args:
        group: a ``torch.distributed`` process group on CPU (gloo: SGLang's TP ``cpu_group``).
        src: the global rank of the leader (the one with cycle timings, TP rank 0).
        rank: this process's global rank.

    :meth:`exchange` is called by every rank at the same boundaries of a bucket (its every
    :data:`DECIDE_EVERY`-th verify, identical on all ranks since their verify results are): it
    starts this boundary's broadcast (``async_op=True``) and returns the previous boundary's value,
    whose broadcast has long finished (it waits for it, normally without blocking); None at the first.
    Every rank thus switches at the same verify to the same depth, one boundary after the leader chose it.
    """

    def __init__(self, group: Any, src: int, rank: int):
        self.group, self.src = group, src
        self.leader = rank == src
        self._pending: dict = {}   # bucket -> (work handle, tensor) of its last boundary

    def exchange(self, bucket: int, value: int) -> Optional[int]:
        """Start ``bucket``'s broadcast of ``value`` (the leader's; others pass anything) and return
        the value of that bucket's previous boundary (None at its first)."""
        import torch
        import torch.distributed as dist

        prev = None
        last = self._pending.pop(bucket, None)
        if last is not None:
            last[0].wait()
            prev = int(last[1].item())
        tensor = torch.tensor([value if self.leader else -1], dtype=torch.int64)
        self._pending[bucket] = (dist.broadcast(tensor, self.src, group=self.group, async_op=True), tensor)
        return prev


def _load_config(cfg_path: Optional[str]) -> dict[int, dict]:
    """``{bucket bs: entry}`` from SGLang's adaptive config file, or its default."""
    if cfg_path is None:
        try:
            from sglang.srt.speculative.adaptive_spec_params import DEFAULT_ADAPTIVE_CONFIG as cfg
        except Exception:
            cfg = {str(k): {"candidate_steps": v} for k, v in DEFAULT_CANDIDATES.items()}
    else:
        with open(cfg_path, encoding="utf-8") as f:
            try:
                cfg = json.load(f)
            except json.JSONDecodeError as exc:
                raise ValueError(f"adaptive config {cfg_path}: not JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(cfg, dict):
        raise ValueError("adaptive config: expected a JSON object with integer-string batch-size keys")
    out = {}
    for key, entry in cfg.items():
        if not str(key).isdigit():
            continue
        steps = entry.get("candidate_steps") if isinstance(entry, dict) else None
        if not isinstance(steps, list) or not steps or not all(
                isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in steps):
            raise ValueError(f"adaptive config: bs {key}: candidate_steps must be a list of non-negative "
                             f"integers, got {steps!r}")
        nospec_bs = entry.get("nospec_bs")
        if nospec_bs is not None and not (isinstance(nospec_bs, int) and not isinstance(nospec_bs, bool)
                                          and nospec_bs >= 1):
            raise ValueError(f"adaptive config: bs {key}: nospec_bs must be a positive integer, got {nospec_bs!r}")
        nospec = entry.get("nospec_tok_s")
        if nospec is not None and not (isinstance(nospec, (int, float)) and not isinstance(nospec, bool)
                                       and math.isfinite(nospec) and nospec > 0):
            raise ValueError(f"adaptive config: bs {key}: nospec_tok_s must be a positive number, got {nospec!r}")
        out[int(key)] = entry
    if not out:
        raise ValueError("adaptive config: no integer-string batch-size key (e.g. {\"1\": {\"candidate_steps\": "
                         "[1, 3, 5]}})")
    return out
