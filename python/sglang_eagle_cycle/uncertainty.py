"""What the advisor does not know: an ensemble of worlds that all fit the measurements.

Why: a throughput predicted for a depth that was never run rests on two guesses, how the phase
costs grow with the verified width between and beyond the measured widths, and how acceptance
continues beyond the deepest measured position. Sampling noise of the measured acceptance is
usually the smallest part. This module draws ``N`` joint hypotheses (acceptance per position and
a cost curve per phase), each consistent with every measurement, and evaluates every candidate
depth under each. Intervals are the 2.5th and 97.5th percentiles over the ensemble; the decision
state is the 95th percentile of the pick's regret (:func:`decide`).

Hypotheses (each a stated assumption; the ranges are module constants). Where a curve has a
central form and alternatives, a hypothesis leans to one side (half each way) by ``U(0,1)^2`` of
the way to that side's extreme (:func:`_toward`): most stay near the central form, the 2.5th and
97.5th percentiles reach 90% of the way to the extremes.

* **Measured positions**: ``p_j ~ Beta(a / phi + 1/2, (n - a) / phi + 1/2)`` from ``a`` accepted
  of ``n`` reached (Jeffreys posterior of a binomial proportion), ``phi`` the pooled
  :attr:`costmodel.AcceptanceModel.dispersion` (``advise``: batch means over each run's cycle
  sequence and the runs' disagreement, at least 1): request-cycles of requests that stay easy
  or hard are fewer independent samples than they look. From mean accept lengths only, each
  mean is drawn from its sampling distribution (``sd`` of the accept length implied by the
  rule over the request-cycles, fewer when batch means say so) and the decay rule ``p_j = p1 r^(j-1)`` refitted; with one
  depth the split between ``p1`` and ``r`` is unknown and ``r`` is drawn from
  :data:`DECAY_PRIOR`. With several depths the split of the shallowest one's accept length
  among its positions is still unknown (2.1 at 2 and at 5 steps fits ``p1 = 0.86, p2 = 0.27``
  as well as ``p1 = 0.7, p2 = 0.57`` with acceptance collapsing after position 2): for depths
  below it each hypothesis leans from the fitted rule's split towards :data:`DECAY_PRIOR`'s
  ends (:func:`_split_shallowest`), keeping every measured accept length.
* **Beyond the deepest measured position**: ``p_j = p_D r^(j-D)``, ``r`` the trend fitted to that
  hypothesis' measured positions (log-linear least squares, weights = reached), times a factor
  about 1 within :data:`DECAY_BEYOND` (a draft may fall off past the depth it was measured to),
  never above ``max(1, fitted r)``: a falling or flat trend never turns into a rise, and a rising
  one (a mix of easy and hard text: the requests that survive the first drafts are the easy ones)
  continues at most at its measured rate, each ``p_j`` capped at :data:`RISE_CAP` or the highest
  measured position, whichever is higher. One measured position: ``r`` from :data:`DECAY_PRIOR`.
* **Verify cost below the lowest measured width**: the no-spec decode step ``b`` bounds the
  verify forward at width ``bs`` from below but is a different forward (target-verify mode,
  sampling, bookkeeping). Central form: with one measured width, the chord to an anchor
  ``b (1 + f)`` at width ``bs``, ``f ~ U`` :data:`VERIFY_MODE_OVERHEAD`, never above the measured
  value; with two or more, the measured slope continued down, never below ``b (1 + f s)``, ``s``
  :data:`BELOW_FLOOR_OVERHEAD` (a verify costs at least its own value at ``bs``), except at
  widths up to :data:`KNEE_MIN_TOKENS` when that slope is steeper than every chord from the anchor:
  there the chord stays central (narrow verifies are memory-bound, so such a slope is a padding
  step between the measured widths, not a compute knee). Alternatives
  bounding the envelope: that chord; when the measured width exceeds :data:`KNEE_MIN_TOKENS`, a
  roofline ``max(b, y0 x / x0)`` (that floor with two measured widths; compute time proportional
  to the width) and a curve saturating
  from the anchor (``t^(1/BEND)``: distinct MoE experts, padding); a flat curve from the measured
  point (padding) within :data:`PAD_RATIO` of it. Narrower verifies are taken as memory-bound
  and close to linear in the width between the decode step and the measured point. With one
  measured width past :data:`KNEE_MIN_TOKENS`, :data:`KNEE_SHARE` of the hypotheses are a compute
  knee instead: ``max(b (1 + f), y0 (x / x0)^a)``, ``a ~ U`` :data:`KNEE_EXPONENT` (compute time
  proportional to the width, or a per-token cost that rises with it), the memory-bound decode
  step below; above the measured width such a hypothesis stays compute-bound on the same curve
  (one hypothesis is one curve: a knee below the run and a flat or chord-slope rise above it made
  deep depths look cheap in exactly the worlds where one step is best). At a large batch a knee
  between ``bs`` and the measured width makes one step far cheaper than the chord says; one
  measured width cannot tell the two apart. With two
  measured widths the curve keeps the bend they show against the anchor: a measured slope
  steeper than any chord from the anchor drops the saturating alternative (a knee), one flatter
  than any chord drops the roofline (saturation). With no decode step to bound the curve (the
  verify at a batch size given no baseline; the draft-extend and the other time measured at two
  widths or more; whole-cycle times without a baseline): from one measured width,
  ``y0 (x / x0)^beta``, ``beta`` from 0 to 1 (flat to proportional, each end a twelfth of the draws:
  :data:`BETA_END`); from two or more, the measured
  shape continued down as the central curve, clipped to ``[y0 sqrt(x / x0), y0]`` (a falling
  shape is a flat one; a steep one, measured where the forward is compute-bound, flattens at a
  memory floor somewhere below, where is unknown: the geometric mean of flat and proportional),
  leaning to flat and to proportional ``y0 x / x0``: an increasing convex curve lies between the
  continuation and flat, a concave one through the origin between proportional and flat.
* **A batch size whose width reaches the measured widths** (advice asked for a batch size wider
  than the runs'): its decode step is no anchor below the measured widths. The verify curve (or
  the whole cycle's, without a phase split) takes the widest baseline below them as its anchor
  (none: as without a decode step), and that batch size's decode step bounds it from below
  (:func:`_sample_from_decode_step`). Proportional growth from one measured point had put a 32-token verify
  at twice a 16-token one and advised speculation off there.
* **Between measured widths**: ``y0 + (y1 - y0) t^g``, ``t`` the position between them in the
  width, or (MoE target) in the expected distinct experts ``E (1 - (1 - k/E)^n)`` (each
  hypothesis takes one shape), ``log g ~ U(-log BEND, log BEND)``: saturating to steepening,
  drawn for each interval on its own (a bend seen between two widths says nothing of another
  interval's). In the interval ending at the highest measured width, a hypothesis whose last
  three nodes (the anchor counts as one) bend as a saturating curve takes ``t`` on that curve.
  Between the anchor and the first measured width, unbent.
* **Saturating curves**: ``y = A - B exp(-x / lam)`` through three nodes whose second secant is
  below the first (:func:`_saturation`; ``lam`` solved per hypothesis, so each anchor overhead
  ``f`` gives its own): the expected distinct experts ``E (1 - (1 - k/E)^n)`` of an MoE target
  are close to ``E (1 - exp(-n k / E))``, so an MoE verify bends this way without its config.
  Through the anchor for every hypothesis that bends when the measured secant is flatter than
  every chord from it (the decode step times ``1 + f`` for every ``f`` in
  :data:`VERIFY_MODE_OVERHEAD`); otherwise for :data:`SAT_SHARE` of them, the others straight: a
  large verify-mode overhead on a flat curve (a communication-bound target) alone makes the first
  segment steep, and is no bend, while an MoE verify's expert loads make the same bend. Used
  between and beyond the measured widths, never below the lowest: there the anchor's unknown
  overhead and the bend cannot be told apart (the Kimi-K2.5 seed's verify extrapolates to 1.53
  times the decode step at one token, past the 50% assumed).
* **Beyond the highest measured width**: with one measured width and no decode step below it, the
  power law it takes below, ``y0 (x / x0)^beta`` (flat to proportional, the same ``beta``; for an
  MoE shape, in distinct experts): its central curve had been proportional growth, the upper
  extreme, and a nearly flat verify's deeper depths fell outside their intervals (helper 35).
  Otherwise a straight line whose slope is ``u`` times the last secant, for a hypothesis in the
  MoE shape a line in distinct experts instead (the last secant per expert, carried along
  ``E (1 - (1 - k/E)^x)``: the expert loads saturate); central ``u = 1``, extremes
  :data:`BEYOND_SLOPE`: a flat curve from the nearest measured point (``u = 0``) to one that
  steepens by half or, for a curve with an anchor (the verify; the whole cycle from totals-only
  inputs) and two measured widths or more whose last secant is below
  :data:`FLAT_SECANT` of the chord from the decode-step anchor to the highest measured point, to
  that chord (two widths padded to one CUDA-graph size, or on one side of an all-reduce threshold,
  measure a flat last secant that says nothing of the next size; over ``benchmarks/sim_advise.py
  --blind --iid`` seeds 0-15 this took the mean regret from 0.69% to 0.65% and the worlds over 3%
  from 24 to 23 of 384, over our own worlds' seeds 0-15 coverage from 94.9% to 95.4%, picks
  unchanged). For a hypothesis whose last three nodes saturate, the saturating curve is the
  central form instead, leaning to the same two extremes.
* Draft-extend: the same, without an anchor; measured at one width, a fixed cost plus a
  per-token one, ``y0 (K + x) / (K + x0)``, ``K`` log-uniform in :data:`EXTEND_KNEE_TOKENS`
  (:func:`_extend_one_width`; proportional growth from the one point charged a narrow draft-extend
  per token where it is near flat: over ``benchmarks/sim_advise.py`` seeds 0-47 mean regret
  0.170% to 0.153%, ``--blind --iid`` seeds 0-31 0.703% to 0.663%). Draft step: measured per draft forward; unknown
  (only 1-step runs) drawn as :data:`UNKNOWN_STEP` times the draft-extend at width ``bs``.
  **Draft phase** ``c + (S - 1) t``: from two depths or more at ``bs``, ``c`` and ``t`` fitted
  (``c >= 0``; a slope below 0 is a flat draft; a draft time logged at one step, where no draft
  forward runs, is ``c`` itself); from one depth of lines without device spans, whose ``draft_ms`` may hold a
  fixed cost (the plugin's older lines time it from the cycle's start, preparation included),
  ``c`` up to :data:`DRAFT_FIXED_SHARE` of it, leaning to none (:func:`_draft_fixed`); a one-step
  cycle pays none to all of ``c``; at a batch size no run measured, ``c`` and ``t`` carried from
  the measured ones (:func:`_draft_fixed_at`). Device-span lines time the draft graph's replay alone: no
  fixed part from one depth. Over ``benchmarks/sim_advise.py --lines legacy`` seeds 0-47 this
  took coverage from 93.1% to 96.7% (``--blind --iid`` seeds 0-31: 81.0% to 88.7%).
  Other time (and host preparation and gaps): as measured, depth-independent, except that runs
  at one step (no draft forward, no draft preparation) and deeper runs, where both kinds were
  measured, keep curves over the batch size of their own (where no one-step run was, a one-step
  cycle leaves out none to all of the deeper runs' ``draft_prep_ms``, ``U(0, 1)`` of it), and that deeper runs at ``bs`` measured
  at two widths or more whose other times differ by more than :data:`OTHER_GROWTH_Z` standard
  errors make a curve over the width there, drawn as the draft-extend is (host work per verified
  token: sampling, bookkeeping; one-step cycles follow it too unless a one-step run was measured).
* **The settled test's own hypotheses**: where the lowest measured verify (at most
  :data:`KNEE_MIN_TOKENS` wide) lies so far above the decode step that :data:`SETTLE_EXCESS` of
  the excess passes the assumed 50%, :func:`decide` reads the pick's regret over the hypotheses
  and as many again whose ``f`` reaches that share (:func:`settle_overhead`,
  :attr:`Ensemble.doubt`): a shallower depth than the run may then cost more than any chord from
  ``b (1 + 0.5)`` says, and one run does not settle a pick below it. Picks, intervals and the
  next-run choice keep :data:`VERIFY_MODE_OVERHEAD`.
* **Whole-cycle times measured at one depth** (no phase split): at least one draft forward more per
  step beyond it and less below it, never below the decode step (:func:`_draft_step_floor`).
* **Measurement noise of the cycle times**: the measured mean cycle time at each width is off by
  its standard error (the larger of per-cycle sd / sqrt(cycles), from ``inspect``'s ``sd``, and
  the batch-means error of the period, ``batch_se``), carried to the other widths by
  :func:`measurement_noise`.
* **Kernels of an unmeasured width** (intervals only): at a width no run measured, the verify (the
  whole cycle without a phase split) times ``exp(WIDTH_JITTER z)``, ``z ~ N(0, 1)`` per width and
  hypothesis: the kernels picked for that many tokens (GEMM tiles, a graph captured at that size,
  an all-reduce algorithm chosen by message size) run off any smooth curve through their
  neighbours. :attr:`Ensemble.tok_s_band`; :func:`decide` does not see it (:data:`WIDTH_JITTER`).

These ranges are assumptions, not fits to any benchmark. A world outside them can fall outside
the intervals: a verify-mode overhead above 50% of the decode step with one measured width,
acceptance that rises beyond the measured positions faster than the measured ones did, a cost
that below a measured point grows faster than ``x^1.25`` (a per-token cost rising by more than
19% per doubling of the width), a staircase (padding the verified width to kernel tile sizes, or
to CUDA-graph sizes in an engine that pads tokens: SGLang 0.5.23 pads the batch to a captured
batch size and verifies ``padded_bs * num_draft_tokens`` tokens, so at one batch size its graph
padding adds no step between depths) whose steps fall between measured widths, a cost that more than steepens by half past the measured
widths, or runs whose acceptance or cycle time wander over spans longer than an eighth of the run
(batch means see only shorter ones) or whose request mix differs from the next run's. The advisor names the
source that dominates each interval, so the run that would check it is clear.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional, Sequence

import numpy as np

from . import costmodel as cm

#: hypotheses per prediction
N_SAMPLES = 2000
#: verify forward at width bs, as a fraction above the no-spec decode step (low, high)
VERIFY_MODE_OVERHEAD = (0.0, 0.5)
#: decay factor r of conditional acceptance per position when the data cannot tell (low, high)
DECAY_PRIOR = (0.6, 1.0)
#: the decay beyond the measured positions, as a multiple of the fitted one (capped at 1), extremes
#: (low, high) about a central 1: a draft may fall off past the depth it was trained or measured
#: to, and rarely improves. Central 1 because on the published SpecBundle table (5 models,
#: 7 benchmarks) the decay fitted at 3 and 5 steps carries on to 7 (mean accept length within 3%).
#: Low end 0.8: on that table the factor at positions 6-7 that gives the 7-step accept length reads
#: 0.90-1.19 on the 24 draft rows where those positions add at least 0.1 tokens (the others cannot
#: pin it). It was 0.55 until 2026-12-07; over ``benchmarks/sim_advise.py`` seeds 0-47 (1,152 worlds
#: per generator) 0.8 took the runs per world from 1.761 / 1.810 / 1.786 / 1.793 (ours, ``--third``,
#: ``--fourth``, ``--blind``) to 1.731 / 1.751 / 1.783 / 1.732 and the mean regret from 0.132 /
#: 0.247 / 0.299 / 0.613% to 0.137 / 0.277 / 0.336 / 0.685%: the wider tail had kept one-run
#: decisions several depths past the run unsettled, which is what a verify step past the run (an
#: all-reduce threshold, a capture size) needs and no smooth cost hypothesis holds
DECAY_BEYOND = (0.8, 1.1)
#: a rising acceptance trend continues up to this per position (:data:`costmodel.RISE_CAP`)
RISE_CAP = cm.RISE_CAP
#: one measured width and no decode step below it: ``y0 (x / x0)^beta``, ``beta`` uniform on
#: ``(-BETA_END, 1 + BETA_END)`` clipped to 0..1 (flat and proportional growth each a twelfth of the draws)
BETA_END = 0.1
#: slope beyond the highest measured width, as a multiple of the last secant (low, high)
BEYOND_SLOPE = (0.0, 1.5)
#: between two measured widths the curve is ``y0 + (y1 - y0) t^g`` (``t`` the position between
#: them), ``log g ~ U(-log BEND, log BEND)``: from saturating (MoE experts, CUDA-graph padding) to
#: steepening (past a compute knee)
BEND = 3.0
#: with two measured widths whose nodes bend through the decode-step anchor only for some verify-mode
#: overheads (the measured secant is not flatter than every chord from it), this share of the
#: hypotheses that bend takes the saturating curve through the anchor, the others a straight line:
#: one run past the decode step cannot tell expert loads that saturate (an MoE target without
#: its config) from a large verify-mode overhead on a straight verify (a communication-bound
#: target), and the two are taken as equally likely. Over ``benchmarks/sim_advise.py --blind``
#: seeds 0-63 mean regret 0.788% to 0.743% (``--blind --iid`` 0.688% to 0.648%), our own worlds'
#: seeds 0-95 0.162% to 0.158%, ``--wide`` 0-47 0.429% to 0.431%; at 1 (every such hypothesis
#: saturates) ``--wide`` went to 0.498%, a communication-bound world at bs 96 picking 8 steps 33%
#: below its best
SAT_SHARE = 0.5
#: no compute knee is hypothesised below this many verified tokens: narrower forwards are
#: memory-bound on current GPUs (ridge points of hundreds of FLOP per byte of 8-16-bit weights)
KNEE_MIN_TOKENS = 32
#: with one measured width past :data:`KNEE_MIN_TOKENS`, this share of the hypotheses has a compute
#: knee below it: ``max(b (1 + f), y0 (x / x0)^a)`` with ``a ~ U`` :data:`KNEE_EXPONENT` (module
#: docstring). A share under 5% cannot move a 95th percentile. Measured with
#: ``benchmarks/sim_advise.py`` seeds 0-47 (1,152 worlds): at 0.15, large-batch worlds picked more
#: than 3% below their best fell from 8 to 1 (seeds 48-95: 7 to 1) for +0.04 runs per world; at
#: 0.30 more worlds were over 3% (16 against 13; MoE worlds over 2%: 10 against 7)
KNEE_SHARE = 0.15
#: exponent ``a`` of the knee hypotheses (low, high): 1 is compute time proportional to the width
#: (a roofline); 1.25 lets the per-token cost rise by up to 19% per doubling of the width (wave and
#: tile quantisation, attention over a longer verified block)
KNEE_EXPONENT = (1.0, 1.25)
#: below the lowest of two or more measured widths, the measured slope continued down is floored at
#: the decode step ``b`` plus this share of the hypothesis' verify-mode overhead, ``b (1 + share f)``:
#: a verify at any width costs at least its own value at ``bs``, ``b (1 + f)``, which a straight
#: continuation reaches only where the verify is linear all the way down; a real GEMM's roofline bends
#: smoothly, so a steep measured slope flattens before the decode step, and continued straight it
#: makes a depth below the runs look cheap. 0 is the bare decode step (a sharp knee); 1 the
#: hypothesis' own verify at ``bs``. Two runs cannot tell a sharp knee from a smooth roofline, and
#: the share trades one for the other (``test_advise_sim.py`` keeps a world of each). Mean regret
#: (worlds more than 3% below their best) over ``benchmarks/sim_advise.py`` seeds 0-47 (``--blind``
#: 0-31), 2026-12-07, shares 0.5 / 0.25 / 0: ours 0.151 / 0.134 / 0.130% (12 / 9 / 8), ours with
#: ``--overhead-scale 0.3`` 0.199 / 0.139 / 0.129% (25 / 15 / 12; seeds meeting every target 28 / 33 /
#: 35), ``--blind`` 0.564 / 0.580 / 0.615% (42 / 43 / 46), ``--third`` 0.246 / 0.266 / 0.282% (20 / 23
#: / 26). 0.25: the 0.3 scale is the setting nearest the issue's own figures for the advisor it
#: replaced (docs/advise.md, "Worlds whose decode step lies on the verify curve"), whose large
#: batches at half the overhead read 1 step about 10% too dear and picked 2; the two generators
#: written without the model lose 0.016 and 0.020 points, within the hypotheses' own noise (about
#: 0.04 on ``--blind``). 0.5 had been chosen on seeds 0-7 against 0 and 1 alone
BELOW_FLOOR_OVERHEAD = 0.25
#: a measured slope counts as steeper than the chord from the decode step (a bend, not a straight
#: line through it) only past this relative margin: rounded log values of an exactly linear verify
#: differ from the chord by far less
CONVEX_TOL = 0.01
#: a flat curve from the lowest measured width (padding up to a CUDA-graph or GEMM tile size) is
#: hypothesised only for widths within this ratio of it (SGLang's graph sizes are <= 4/3 apart past 8)
PAD_RATIO = 4.0 / 3.0
#: beyond the highest measured verify width, the chord from the decode-step anchor to the highest
#: measured point joins the upper extreme when the last secant is below this share of it: so flat a
#: last secant is what two widths padded to one CUDA-graph size (or on one side of an all-reduce
#: threshold) show, and it says nothing of the next size. A saturating MoE verify measured at 64 and
#: 128 tokens (256 experts, top-8) has a last secant of 0.34-0.57 of that chord and keeps its envelope
FLAT_SECANT = 0.25
#: unknown draft-step cost as a multiple of the draft-extend at width bs (low, high)
UNKNOWN_STEP = (0.25, 1.5)
#: one draft forward as a share of the no-spec decode step (low, high), the least a whole cycle
#: (no phase split) grows per step beyond its measured depths (:func:`_draft_step_floor`): the Kimi
#: seed's is 2%; a very large target's launch-bound draft forward can be a fraction of a percent
DRAFT_STEP_SHARE = (0.005, 0.08)
#: outside the baselines, the steep extreme of the decode step's slope over the batch size is at
#: least this share of proportional growth from the nearest baseline (:func:`_decode_step_at`)
DECODE_PROPORTIONAL_SHARE = 0.25
#: with one baseline, the decode step's slope over the batch size (the verify curve's, which it is
#: carried along) leans by up to this share of it either way (:func:`_decode_step_at`): over more
#: requests a decode step reads the weights a verify over as many tokens reads (the distinct experts
#: of an MoE target among them) and, beside them, each request's KV cache, while a verify-mode overhead
#: in proportion to the forward drops out; half either way, not flat: a verify that grows with its
#: width says the forward does
ONE_BASELINE_SLOPE = 0.5
#: Range of ``K`` (tokens, log-uniform): the draft-extend's fixed cost in tokens of its per-token
#: cost, for a draft-extend measured at one width (:func:`_extend_one_width`).
EXTEND_KNEE_TOKENS = (16.0, 1024.0)
#: other time makes a curve over the width only where two measured widths differ by more than this
#: many standard errors (a stall in one run passes 1.96 one time in 20, and its secant, carried
#: past the runs, moves every deeper prediction; host growth a user would act on is far above it)
OTHER_GROWTH_Z = 3.0
#: with the draft phase measured at one depth only, the share of it that may be a fixed cost, not
#: ``num_steps - 1`` forwards (high; low 0): for lines without device spans, whose ``draft_ms``
#: runs from the cycle's start (draft preparation, attention metadata) or comes from a generator
#: with a fixed draft cost (one that counts ``num_steps`` forwards: a third at 3 steps). Device-span
#: lines time the draft graph's replay alone: 0. Measured with ``benchmarks/sim_advise.py --lines``
#: seeds 0-47: 0.5 took more second runs (1.78 per world against 1.75 at 0.3 and 1.74 at 0) for
#: about the same coverage
DRAFT_FIXED_SHARE = 0.3
#: a further run counts as useful when it is expected to cut the pick's 95th-percentile regret by at
#: least this share of it; otherwise the advice says no single run is expected to settle it (the best
#: depths lie within the measurements' noise of each other, or the doubt is one no run resolves)
MIN_CUT = 0.10
#: the next run is chosen (:func:`decide`) as if this share of the hypotheses were staircases over the
#: depths: each such hypothesis pads every depth up to the top depth of its cell (or to a measured
#: depth's time, where one is in the cell), neighbouring depths sharing a cell with a chance drawn per
#: hypothesis from :data:`STAIR_SAME`. The smooth curves never make a depth as cheap as a measured
#: neighbour, so a run next to the pick, the one that tells a padding step from a smooth rise, was
#: rarely worth its place; the pick, the intervals and the decision state stay the smooth ensemble's.
#: Over ``benchmarks/sim_advise.py`` (oracle table of every possible second run, seeds 0-7) 0.15
#: took mean regret from 0.115% to 0.089% (ours) and 0.711% to 0.631% (``--blind``), 0.3 to 0.090%
#: and 0.685%, 0.5 to 0.107% and 0.665%. At 0.2, out of sample: ours seeds 48-95 0.152% to 0.139%
#: (worlds over 3%: 16 to 15), ``--blind`` seeds 32-63 0.814% to 0.811% (62 to 53), ``--iid``
#: 32-63 0.705% to 0.746% (53 to 48), ``--wide`` 0-47 0.430% to 0.446% (44 to 47)
STAIR_SHARE = 0.2
#: chance (low, high) that two neighbouring depths are padded to one size, drawn per staircase
#: hypothesis: at one batch size a capture list whose sizes are 4/3 to 2 apart holds one to five
#: consecutive depths' widths (bs (S + 1) tokens)
STAIR_SAME = (0.3, 0.8)
#: standard deviation of the log of the verify time at a width no run measured, about every smooth
#: curve through the measured widths, independent from width to width: a forward over a new number
#: of tokens runs kernels of its own (GEMM tiles, the kernels a CUDA graph captured at that size, an
#: all-reduce algorithm chosen by message size), a few percent off any curve through its neighbours
#: (0.02: +-4% at 95%). It widens the intervals only (:attr:`Ensemble.tok_s_band`); the pick, the
#: regret, ``settled`` and the next run stay the smooth ensemble's, because no run at another depth
#: can narrow it and, counted there, it would leave every two depths within a few percent of each
#: other unsettled whatever was measured. Over ``benchmarks/sim_advise.py`` (seeds 0-31 or 0-47)
#: coverage of the unmeasured depths went from 87.2% to 91.0% (``--blind``, whose CUDA-graph worlds
#: give each captured size its own kernel speed), 88.9% to 92.0% (``--blind --iid``) and 97.0% to
#: 98.7% (ours); the median width from 11.9% to 13.6%, 10.4% to 12.4%, 13.9% to 15.7% and, on
#: ``--wide``, 18.5% to 20.0%. At 0.015 ``--blind`` held 89.8%, at 0.025 ``--wide`` was 20.7% wide.
#: Out of sample, on a generator written afterwards by another hand (``--third``, seeds 0-47): 90.1%
#: to 94.6%, median width 12.1% to 14.1%
WIDTH_JITTER = 0.02
#: the interval source named where that kernel time dominates
KERNEL_SOURCE = "kernel time at a width no run measured"
#: the interval source of a measured depth whose run has no noise estimate (nothing left to vary:
#: advise widens that interval to the 1% its poor-fit check allows, ``advise.UNKNOWN_NOISE_PCT``)
NO_NOISE_SOURCE = "none: its run has no noise estimate (taken as 1% wide)"
#: settled when the pick's 95th-percentile regret is at most this
SETTLED_REGRET = 0.02
#: the settled test's own verify-mode overheads (:func:`settle_overhead`): where the lowest measured
#: verify lies more than ``VERIFY_MODE_OVERHEAD[1] / SETTLE_EXCESS`` above the decode step, at a
#: width up to :data:`KNEE_MIN_TOKENS`, :func:`decide` also weighs hypotheses whose ``f`` reaches
#: this share of that excess (:attr:`Ensemble.doubt`)
SETTLE_EXCESS = 0.8
#: central interval
LEVELS = (2.5, 97.5)


@dataclass
class Ensemble:
    """Per-hypothesis predictions at one batch size.

    Attributes:
        bs: batch size (requests).
        steps: candidate depths, ascending; 0 = speculation off (exact, when a baseline is known).
        tok_s: ``(N, len(steps))`` output tok/s of the batch per hypothesis.
        accept_len: ``(N, len(steps))`` expected accept length (tokens per request per cycle).
        phases: ``{"draft_ms", "verify_ms", "extend_ms", "other_ms", "total_ms"}`` -> ``(N, len(steps))`` ms.
        depth: deepest measured acceptance position.
        sources: per depth, the source that dominates its interval (None for steps 0).
        run_se: per depth, the relative standard error of the tok/s a new run there would measure
            (cycle-time and accept-length sampling, as long as the measured runs); 0 when unknown.
        tok_s_shape: ``tok_s`` without the errors of the measured means (the shape hypotheses
            alone): what a new run can reveal (:func:`decide`).
        tok_s_band: ``tok_s`` with each width no run measured running its own kernels
            (:data:`WIDTH_JITTER`): the hypotheses the 95% intervals are read from.
        doubt: where the lowest run's verify lies far above the decode step
            (:func:`settle_overhead`), the same ensemble with the verify-mode overheads drawn over
            the wider range: :func:`decide` weighs its hypotheses beside these in the settled test
            alone (never in the pick, the intervals or the next-run choice); else None.
        doubt_overhead: the highest verify-mode overhead ``doubt`` draws (a fraction of the decode
            step), or None.
    """

    bs: int
    steps: list[int]
    tok_s: np.ndarray
    accept_len: np.ndarray
    phases: dict[str, np.ndarray]
    depth: int
    sources: list[Optional[str]]
    run_se: Optional[np.ndarray] = None
    tok_s_shape: Optional[np.ndarray] = None
    tok_s_band: Optional[np.ndarray] = None
    doubt: Optional["Ensemble"] = None
    doubt_overhead: Optional[float] = None


# ---------------------------------------------------------------------------------------------
# acceptance hypotheses
# ---------------------------------------------------------------------------------------------


def _beyond_rate(r: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Per hypothesis, the trend beyond the measured positions: the fitted ``r`` times
    :func:`_beyond_factor`, never above ``max(1, r)`` (no rise that was not measured, and a measured
    rise no faster than measured)."""
    return np.maximum(np.minimum(r * _beyond_factor(rng, len(r)), np.maximum(1.0, r)), 0.0)


def _beyond_factor(rng: np.random.Generator, n: int) -> np.ndarray:
    """Per hypothesis, the decay beyond the measured positions as a multiple of the fitted one:
    central 1, leaning (:func:`_toward`) to the extremes of :data:`DECAY_BEYOND`."""
    up, mag = _toward(rng, n)
    lo, hi = DECAY_BEYOND
    return np.where(up, 1.0 + mag * (hi - 1.0), 1.0 - mag * (1.0 - lo))


def _decay_fit(p: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Per row of ``p`` ``(N, D)``: ``r`` of the weighted least-squares line ``log p_j = a + (j-1) log r``."""
    lp = np.log(np.clip(p, 1e-6, 1.0))
    x = np.arange(p.shape[1], dtype=float)
    sw = w / w.sum()
    xm = float((sw * x).sum())
    ym = (lp * sw).sum(axis=1)
    cov = ((x - xm) * sw * (lp - ym[:, None])).sum(axis=1)
    var = float((sw * (x - xm) ** 2).sum())
    return np.exp(cov / var)


def _solve_p1(mean: np.ndarray, r: np.ndarray, steps: int) -> np.ndarray:
    """``p1`` per hypothesis with ``E[L(steps)] = mean`` under ``p_j = min(1, p1 r^(j-1))`` (bisection)."""
    lo, hi = np.zeros_like(mean), np.ones_like(mean)
    j = np.arange(steps)
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        p = np.clip(mid[:, None] * r[:, None] ** j, 0.0, 1.0)
        e = 1.0 + np.cumprod(p, axis=1).sum(axis=1)
        up = e < mean
        lo, hi = np.where(up, mid, lo), np.where(up, hi, mid)
    return 0.5 * (lo + hi)


def _least_decay(mean: np.ndarray, steps: int) -> np.ndarray:
    """The least ``r`` per hypothesis at which ``p_j = r^(j-1)`` (``p1 = 1``) reaches ``E[L(steps)] =
    mean``: ``1 + sum_j r^(j(j-1)/2)`` rises with ``r`` (bisection on 0..1; 1 where even ``r = 1``
    falls short)."""
    lo, hi = np.zeros_like(mean), np.ones_like(mean)
    j = np.arange(1, steps + 1)
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        e = 1.0 + (mid[:, None] ** (j * (j - 1) / 2.0)).sum(axis=1)
        up = e < mean
        lo, hi = np.where(up, mid, lo), np.where(up, hi, mid)
    return hi


def _split_shallowest(p: np.ndarray, r: np.ndarray, d1: int, rng: np.random.Generator) -> None:
    """Re-split, in place, positions ``1..d1`` of the mean-only hypotheses ``p`` ``(N, depth)``.

    A mean accept length at the shallowest measured depth ``d1`` fixes ``E[L(d1)]`` but not how it
    divides among positions ``1..d1``; the decay rule fitted across depths (``r``, per hypothesis)
    is the central split. Each hypothesis leans (:func:`_toward`) from it towards the ends of
    ``[min(r, lo), max(r, hi)]``, ``(lo, hi)`` = :data:`DECAY_PRIOR`, solves ``p1`` so that
    ``E[L(d1)]`` is kept, and scales ``p_(d1+1)`` so that the probability of reaching each position
    past ``d1`` is kept too: every measured and deeper depth keeps its accept length, only depths
    below ``d1`` move. A split that would need ``p_(d1+1) > 1`` leans half as far (up to six times),
    then keeps the fitted split.
    """
    n = p.shape[0]
    keep = np.cumprod(p[:, :d1], axis=1)
    e_d1 = 1.0 + keep.sum(axis=1)
    up, mag = _toward(rng, n)
    lo, hi = np.minimum(r, DECAY_PRIOR[0]), np.maximum(r, DECAY_PRIOR[1])
    nxt = p[:, d1] if p.shape[1] > d1 else np.zeros(n)
    todo = np.ones(n, dtype=bool)
    for _ in range(7):
        r_in = np.where(up, r + mag * (hi - r), r - mag * (r - lo))
        p1 = _solve_p1(e_d1, r_in, d1)
        split = np.clip(p1[:, None] * r_in[:, None] ** np.arange(d1), 0.0, 1.0)
        reach = np.prod(split, axis=1)
        scaled = np.divide(nxt * keep[:, -1], reach, out=np.full(n, np.inf), where=reach > 0)
        ok = todo & (scaled <= 1.0)
        p[ok, :d1] = split[ok]
        if p.shape[1] > d1:
            p[ok, d1] = scaled[ok]
        todo &= ~ok
        if not todo.any():
            break
        mag = np.where(todo, 0.5 * mag, mag)


def sample_acceptance(acc: cm.AcceptanceModel, max_steps: int, n: int,
                      rng: np.random.Generator, shallowest: Optional[int] = None) -> tuple[np.ndarray, int]:
    """``(p, D)``: ``p`` of shape ``(n, max_steps)``, conditional acceptance per position per hypothesis.

    ``D`` is the deepest measured position (module docstring for the hypotheses). ``shallowest``:
    the shallowest candidate depth; from mean accept lengths at several depths, positions below
    the shallowest measured depth are re-split (:func:`_split_shallowest`) only when a candidate
    lies below it (no other depth's prediction moves).
    """
    d = acc.observed_depth
    depth = max(max_steps, d)
    if acc.points:  # mean accept lengths only
        pts = acc.points
        depths = sorted({pt.steps for pt in pts})
        means = []
        for pt in pts:
            m = np.full(n, float(pt.accept_len))
            if pt.samples:
                _, var = cm.accept_len_moments(acc.rule.probs(pt.steps))
                m = m + rng.normal(0.0, math.sqrt(var / pt.samples), n)
            means.append(np.clip(m, 1.0, pt.steps + 1.0))
        if len(depths) == 1:
            mean = np.average(np.stack(means), axis=0,
                              weights=[pt.samples or 1 for pt in pts])
            # r from DECAY_PRIOR, but no lower than a decay that can still reach the mean (p1 = 1):
            # capped at p1 = 1 a hypothesis fell short of its own measurement (3.17 predicted where
            # 3.3 was measured at 3 steps)
            lo_r = np.maximum(DECAY_PRIOR[0], _least_decay(mean, depths[0]))
            r = lo_r + rng.uniform(0.0, 1.0, n) * np.maximum(DECAY_PRIOR[1] - lo_r, 0.0)
            p1 = _solve_p1(mean, r, depths[0])
        else:
            p1g, rg = np.meshgrid(np.linspace(0.0, 1.0, 51), np.linspace(0.3, 1.2, 46), indexing="ij")
            e = cm._expected_grid(p1g.ravel(), rg.ravel(), max(depths))      # (G, Smax)
            w = np.array([float(pt.samples or 1) for pt in pts])
            cols = e[:, [pt.steps - 1 for pt in pts]]                         # (G, P)
            m = np.stack(means, axis=1)                                       # (n, P)
            # coarse: argmin_g sum_i w_i (E_gi - m_ki)^2 = argmin_g [sum_i w_i E_gi^2 - 2 sum_i w_i m_ki E_gi]
            best = ((cols ** 2) @ w - 2.0 * (m * w) @ cols.T).argmin(axis=1)
            p1, r = p1g.ravel()[best], rg.ravel()[best]
            # fine: a 9 x 9 grid of steps 0.005 around each hypothesis' coarse best
            step = np.linspace(-0.02, 0.02, 9)
            fp = np.clip(p1[:, None, None] + step[None, :, None], 0.0, 1.0) + 0.0 * step[None, None, :]
            fr = np.clip(r[:, None, None] + step[None, None, :], 0.3, 1.2) + 0.0 * step[None, :, None]
            ef = cm._expected_grid(fp.reshape(n, -1), fr.reshape(n, -1), max(depths))  # (n, 81, Smax)
            err = (((ef[:, :, [pt.steps - 1 for pt in pts]] - m[:, None, :]) ** 2) * w).sum(axis=2)
            k = err.argmin(axis=1)
            p1, r = fp.reshape(n, -1)[np.arange(n), k], fr.reshape(n, -1)[np.arange(n), k]
        j = np.arange(depth)
        p = np.clip(p1[:, None] * r[:, None] ** j, 0.0, 1.0)
        rb = _beyond_rate(r, rng)
        if len(depths) >= 2 and shallowest is not None and shallowest < depths[0]:
            _split_shallowest(p, r, depths[0], rng)
    else:
        pos = acc.measured
        a = np.array([q.accepted for q in pos], dtype=float)
        reached = np.array([q.reached for q in pos], dtype=float)
        phi = max(1.0, float(acc.dispersion))   # overdispersed counts weigh 1 / phi
        pm = rng.beta(a / phi + 0.5, (reached - a) / phi + 0.5, size=(n, len(pos)))
        if len(pos) >= 2:
            rb = _beyond_rate(_decay_fit(pm, reached), rng)
        else:
            rb = rng.uniform(*DECAY_PRIOR, n)
        p = np.empty((n, depth))
        p[:, :len(pos)] = pm
    cap = np.maximum(RISE_CAP, p[:, :d].max(axis=1)) if d else np.full(n, RISE_CAP)
    if acc.beyond and not acc.points:
        # runs without counts deeper than the counted positions: each hypothesis' decay past them
        # meets their mean accept lengths, each drawn within its own error (the chain's variance at
        # the central rates, over its request-cycles, times the counts' dispersion)
        central = [q.p for q in acc.positions(max(b.steps for b in acc.beyond))]
        means = np.stack([np.clip(b.accept_len + (rng.normal(0.0, math.sqrt(
            cm.accept_len_moments(central[:b.steps])[1] * acc.dispersion / b.samples), n) if b.samples
            else np.zeros(n)), 1.0, b.steps + 1.0) for b in acc.beyond], axis=1)
        rb = cm.beyond_decay(p[:, :d], p[:, d - 1], cap, [b.steps for b in acc.beyond], means,
                             [float(b.samples or 1) for b in acc.beyond])
    for j in range(d, depth):
        p[:, j] = np.clip(p[:, d - 1] * rb ** (j - d + 1), 0.0, np.maximum(cap, p[:, d - 1]))
    return p[:, :max(max_steps, 1)], d


# ---------------------------------------------------------------------------------------------
# cost hypotheses
# ---------------------------------------------------------------------------------------------


def _points(obs: Sequence[cm.CycleObservation], attr: str) -> list[tuple[float, float]]:
    curve = cm.MeasuredCurve.from_points([(o.verified_tokens, getattr(o, attr) or 0.0, o.weight) for o in obs])
    return list(curve.points) if curve else []


def settle_overhead(pts: Sequence[tuple[float, float]], anchor: Optional[tuple[float, float]]) -> Optional[float]:
    """The highest verify-mode overhead ``f`` the settled test weighs (a fraction of the decode step),
    or None where it is :data:`VERIFY_MODE_OVERHEAD`'s own.

    ``pts``: measured ``(width, ms)`` of the verify (whole-cycle times, which hold the draft, are not
    read so); ``anchor``: ``(bs, decode step ms)``. Where the lowest measured width is no wider than
    :data:`KNEE_MIN_TOKENS` (a memory-bound verify, whose cost is mostly its fixed part) and its
    verify lies ``e = y0 / b - 1`` above the decode step with ``SETTLE_EXCESS e`` past the assumed
    50%, that is the top: so much time over so few tokens says the overhead may be larger than
    assumed, and a shallower depth dearer than any chord from ``b (1 + 0.5)`` makes it. The
    picks and intervals keep :data:`VERIFY_MODE_OVERHEAD`: on the Kimi-K2.5 seed (an 11.3 ms
    decode step, 21 ms at 3 tokens) the wider range in every hypothesis took the 2-step prediction
    from 94.5 to 85.4 tok/s, 94 measured, and over ``benchmarks/sim_advise.py`` seeds 0-7 cost
    the outside generators' picks (``--blind`` 0.640% to 0.735% mean regret). In the settled test
    alone it unsettles the one-run decisions it would get wrong: over seeds 0-47 the worlds settled
    after one run that ended more than 2% below their best went from 21 to 3 on ``--fourth``, 12 to
    6 on ``--third`` and 16 to 13 on ``--blind`` (mean regret 0.381% to 0.299%, 0.266% to 0.247%,
    0.629% to 0.613%; ours 0.134% to 0.132%), for 0.01-0.06 more runs per world (docs/advise.md).
    """
    if anchor is None or not pts:
        return None
    x0, y0 = min(pts)
    if not anchor[0] < x0 <= KNEE_MIN_TOKENS or anchor[1] <= 0:
        return None
    top = SETTLE_EXCESS * (y0 / anchor[1] - 1.0)
    return top if top > VERIFY_MODE_OVERHEAD[1] else None


def sample_curve(pts: Sequence[tuple[float, float]], xq: Sequence[float], n: int, rng: np.random.Generator, *,
                 anchor: Optional[tuple[float, float]] = None,
                 shapes: Sequence = (cm.LINEAR,), settle: bool = False) -> np.ndarray:
    """``(n, len(xq))`` hypotheses of a cost curve ``y(x)`` (ms) through the measured ``pts``.

    Args:
        pts: measured ``(width, ms)``, ascending, at least one.
        xq: widths to evaluate (tokens).
        anchor: ``(width, ms)``: a lower bound below the lowest measured width (the no-spec decode
            step for the verify); the curve passes through ``ms (1 + f)``, ``f`` drawn from
            :data:`VERIFY_MODE_OVERHEAD`, capped at the lowest measured value.
        shapes: interpolation shapes between nodes; each hypothesis draws one.
        settle: ``f`` drawn up to :func:`settle_overhead` instead (the settled test's hypotheses;
            the same draws where it does not widen the range).
    """
    pts = sorted(pts)
    x0, y0 = pts[0]
    xs = np.array([x for x, _ in pts], dtype=float)
    ys = np.array([y for _, y in pts], dtype=float)
    use_anchor = anchor is not None and anchor[0] < x0
    if use_anchor:
        top_f = settle_overhead(pts, anchor) if settle else None
        f = rng.uniform(VERIFY_MODE_OVERHEAD[0], VERIFY_MODE_OVERHEAD[1] if top_f is None else top_f, n)
        ya = np.minimum(anchor[1] * (1.0 + f), y0)                     # (n,)
        nx = np.concatenate([[anchor[0]], xs])
        ny = np.concatenate([ya[:, None], np.broadcast_to(ys, (n, len(ys)))], axis=1)
    else:
        nx = xs
        ny = np.broadcast_to(ys, (n, len(ys))).copy()
    shape_idx = rng.integers(0, len(shapes), n)
    gamma = np.exp(rng.uniform(-math.log(BEND), math.log(BEND), n))
    # flat and proportional themselves are the likeliest ends (a verify at bs 1 is nearly flat), so
    # each holds a twelfth of the draws: U(0, 1) put both just outside the 95% interval (helper 37)
    beta = np.clip(rng.uniform(-BETA_END, 1.0 + BETA_END, n), 0.0, 1.0)
    up, umag = _toward(rng, n)
    if len(nx) >= 2:
        sec = np.maximum(0.0, (ny[:, -1] - ny[:, -2]) / (nx[-1] - nx[-2]))
    else:   # unused beyond one measured width (the power law below), kept so that the draws stay put
        sec = ny[:, -1] / nx[-1]
    # beyond the highest width: the last secant, leaning down to flat and up to that secant
    # steepened by half or, with an anchor and two measured widths or more whose last secant is
    # flatter than FLAT_SECANT of the chord from the anchor to the last node, up to that chord
    top = BEYOND_SLOPE[1] * sec
    if use_anchor and len(nx) >= 3:
        across = np.maximum(0.0, ny[:, -1] - ny[:, 0]) / (nx[-1] - nx[0])   # anchor to last node
        top = np.where(sec < FLAT_SECANT * across, np.maximum(top, across), top)
    bslope = np.where(up, sec + umag * (top - sec), (1.0 - umag * (1.0 - BEYOND_SLOPE[0])) * sec)
    # below the lowest measured width (with an anchor): each hypothesis leans from the central
    # curve towards the envelope of the curves that also fit (module docstring)
    side, mag = _toward(rng, n)
    meas = max(0.0, (ys[1] - ys[0]) / (xs[1] - xs[0])) if len(xs) >= 2 else None
    # With two measured widths, the curve's bend below them is taken to be the one they show
    # against the anchor: a measured slope steeper than the steepest chord from the anchor
    # (``b`` to ``y0``) is a compute knee (convex), one flatter than the flattest chord
    # (``b (1 + max f)`` to ``y0``) a saturating curve (concave). The curve is not assumed to
    # change its bend between the anchor and the measured widths.
    convex = concave = False
    if use_anchor and meas is not None:
        convex = meas > (y0 - anchor[1]) / (x0 - anchor[0]) * (1.0 + CONVEX_TOL)
        concave = meas < max(0.0, y0 - anchor[1] * (1.0 + VERIFY_MODE_OVERHEAD[1])) / (x0 - anchor[0])
    out = np.empty((n, len(xq)))
    # below the lowest measured width the continued slope and the roofline stop at the decode step,
    # or with two measured widths at the decode step plus a share of this hypothesis' verify-mode
    # overhead (BELOW_FLOOR_OVERHEAD)
    floor = None
    if use_anchor:
        floor = (np.minimum(anchor[1] * (1.0 + BELOW_FLOOR_OVERHEAD * (ya / anchor[1] - 1.0)), y0)
                 if meas is not None else min(anchor[1], y0))
    # one measured width past the knee threshold: a share of the hypotheses is a compute knee
    knee_a = None
    if use_anchor and meas is None and x0 > KNEE_MIN_TOKENS:
        knee_a = np.where(rng.uniform(0.0, 1.0, n) < KNEE_SHARE, rng.uniform(*KNEE_EXPONENT, n), np.nan)
    # each interval between measured widths bends on its own: a bend seen in one says nothing of
    # another's (padding steps, a knee), so measuring inside one interval informs only that one
    first_bent = 1 if use_anchor else 0
    gam = np.repeat(gamma[:, None], max(len(nx) - 1, 1), axis=1)
    for k in range(first_bent + 1, len(nx) - 1):
        gam[:, k] = np.exp(rng.uniform(-math.log(BEND), math.log(BEND), n))
    # per hypothesis, the saturating curve through the last three nodes, where they bend that way
    # (the anchor is a node: with two measured widths the curve runs from the decode step; unless
    # the measured secant is flatter than every chord from it, whatever the verify-mode overhead,
    # only SAT_SHARE of the bending hypotheses saturate: a large overhead alone makes the first
    # segment steep, and so do saturating expert loads)
    sat = None
    if len(nx) >= 3:
        sat = _saturation(nx[-3:], ny[:, -3:])
        if use_anchor and len(nx) == 3 and not concave:
            sat = (sat[0], sat[1] & (rng.uniform(0.0, 1.0, n) < SAT_SHARE))
    for qi, x in enumerate(xq):
        if use_anchor and x < x0:
            chord = _between(x, nx, ny, 0, shapes, shape_idx, None, n)
            alts = [chord]
            if meas is not None:
                # the measured slope continued down (floored, ``floor``): the central curve, but at
                # narrow widths only when it is no steeper than the chord from the decode step:
                # narrower verifies are memory-bound, so a steeper one there is a padding step
                # between the measured widths, not a compute knee, and the chord stays central
                cont = np.maximum(floor, y0 - meas * (x0 - x))
                if x0 > KNEE_MIN_TOKENS or not convex:
                    chord = cont
                alts.append(cont)
            lo, hi = chord.copy(), chord.copy()
            if x0 > KNEE_MIN_TOKENS:
                # roofline: max(memory-bound step, compute proportional to width); not when the
                # measured slope is below every chord to the anchor (the curve bends the other way)
                if not concave:
                    alts.append(np.maximum(floor, y0 * max(x, KNEE_MIN_TOKENS) / x0))
                # saturating from the anchor (distinct MoE experts, padding), as bent as between
                # points; not when the measured slope is above every chord to the anchor (a knee)
                if not convex:
                    t = (x - anchor[0]) / (x0 - anchor[0])
                    alts.append(ya + (y0 - ya) * t ** (1.0 / BEND))
            if x0 / x <= PAD_RATIO:
                alts.append(np.full(n, y0))
            for a in alts:
                lo, hi = np.minimum(lo, a), np.maximum(hi, a)
            out[:, qi] = np.where(side, chord + mag * (hi - chord), chord + mag * (lo - chord))
            if knee_a is not None:
                knee = np.maximum(ya, y0 * (x / x0) ** np.nan_to_num(knee_a, nan=1.0))
                out[:, qi] = np.where(np.isnan(knee_a), out[:, qi], knee)
        elif x > nx[-1] and len(nx) == 1:
            # one measured width and nothing below it: the power law it takes below too, each
            # hypothesis' own ``beta`` (flat to proportional; in distinct experts for an MoE shape)
            ratio = np.full(n, x / nx[0])
            for si, shape in enumerate(shapes):
                if shape.num_experts and shape(nx[0]) > 0:
                    ratio = np.where(shape_idx == si, shape(x) / shape(nx[0]), ratio)
            out[:, qi] = ny[:, 0] * ratio ** beta
        elif x > nx[-1]:
            out[:, qi] = ny[:, -1] + bslope * (x - nx[-1])
            if knee_a is not None:
                # a compute knee below the one measured width stays compute-bound above it, on the
                # same power law, not on the secant from the anchor that its memory-bound part flattens
                out[:, qi] = np.where(np.isnan(knee_a), out[:, qi], y0 * (x / x0) ** np.nan_to_num(knee_a, nan=1.0))
            # an MoE shape carries the last secant in distinct experts, not in tokens: the expert
            # loads saturate as the width grows (each hypothesis takes its own shape)
            for si, shape in enumerate(shapes):
                if shape.num_experts and shape.grows(nx[-2], nx[-1]):
                    span = (shape(nx[-1]) - shape(nx[-2])) / (nx[-1] - nx[-2])   # experts per token
                    along = (shape(x) - shape(nx[-1])) / span
                    out[:, qi] = np.where(shape_idx == si, ny[:, -1] + bslope * along, out[:, qi])
            if sat is not None:
                # the saturating curve is the central form; the extremes stay those of the straight
                # line: flat, and the last secant steepened by half (or the chord from the anchor)
                inc = np.maximum(_on_saturation(x, sat, nx[-3:], ny[:, -3:], 1) - ny[:, -1], 0.0)
                steep = top * (x - nx[-1])
                lean = np.where(up, inc + umag * np.maximum(steep - inc, 0.0),
                                inc * (1.0 - umag * (1.0 - BEYOND_SLOPE[0])))
                out[:, qi] = np.where(sat[1], ny[:, -1] + lean, out[:, qi])
        elif x < nx[0]:  # only without an anchor (the anchor is at width bs, the narrowest verify)
            prop = ny[:, 0] * (x / nx[0])
            if len(nx) >= 2:
                # the measured shape continued down: the central curve (a convex curve lies above
                # it, a concave one through the origin above proportional), never above flat (a
                # falling measured shape is a flat one) nor below the geometric mean of flat and
                # proportional (a forward reads its weights whatever the width: a steep measured
                # slope flattens somewhere below, where is unknown); leaning up to flat and down
                # to proportional
                cont = np.clip(_between(x, nx, ny, 0, shapes, shape_idx, None, n),
                               ny[:, 0] * math.sqrt(x / nx[0]), ny[:, 0])
                out[:, qi] = np.where(side, cont + mag * (ny[:, 0] - cont), cont - mag * (cont - prop))
            else:
                out[:, qi] = ny[:, 0] * (x / nx[0]) ** beta
        else:
            i = min(max(int(np.searchsorted(nx, x)) - 1, 0), len(nx) - 2)
            # between two measured widths: bent either way; between the anchor and the first: the shapes
            out[:, qi] = _between(x, nx, ny, i, shapes, shape_idx, None if (use_anchor and i == 0) else gam[:, i], n)
            if sat is not None and i == len(nx) - 2:
                t = (_on_saturation(x, sat, nx[-3:], ny[:, -3:], 1) - ny[:, i]) / np.where(
                    ny[:, i + 1] > ny[:, i], ny[:, i + 1] - ny[:, i], 1.0)
                t = np.clip(t, 0.0, 1.0) ** gam[:, i]
                out[:, qi] = np.where(sat[1], ny[:, i] + (ny[:, i + 1] - ny[:, i]) * t, out[:, qi])
    return np.maximum(out, 0.0)


def _saturation(nx3: np.ndarray, ny3: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(lam, ok)`` per hypothesis: the scale ``lam`` (tokens) of ``y = A - B exp(-x / lam)``
    through the three nodes ``nx3`` (ascending widths) with values ``ny3`` ``(N, 3)`` (ms), and
    ``ok``: whether they bend that way (both secants rising or the second flat, the second below
    the first). Solved by bisection on ``log lam``: the ratio of the second secant to the first
    rises from 0 (``lam -> 0``) to 1 (``lam -> inf``, a straight line)."""
    a, b = float(nx3[1] - nx3[0]), float(nx3[2] - nx3[0])
    s1 = (ny3[:, 1] - ny3[:, 0]) / a
    s2 = (ny3[:, 2] - ny3[:, 1]) / (b - a)
    ok = (s1 > 0) & (s2 >= 0) & (s2 < s1)
    r = np.where(ok, s2 / np.where(s1 > 0, s1, 1.0), 0.5)
    lo, hi = np.full(len(r), math.log(0.01 * a)), np.full(len(r), math.log(1000.0 * b))
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        lam = np.exp(mid)
        ratio = ((np.exp(-a / lam) - np.exp(-b / lam)) / (b - a)) / (-np.expm1(-a / lam) / a)
        up = ratio < r
        lo, hi = np.where(up, mid, lo), np.where(up, hi, mid)
    return np.exp(0.5 * (lo + hi)), ok


def _on_saturation(x: float, sat: tuple[np.ndarray, np.ndarray], nx3: np.ndarray, ny3: np.ndarray,
                   base: int) -> np.ndarray:
    """``y(x)`` (ms) per hypothesis on the saturating curve of :func:`_saturation` through the
    three nodes, measured from node ``base`` (0 or 1) with the curve's scale set by the segment
    from that node to the next."""
    lam = sat[0]
    x0 = float(nx3[0])
    e = lambda w: np.exp(-(w - x0) / lam)   # noqa: E731
    xa, xb = float(nx3[base]), float(nx3[base + 1])
    scale = (ny3[:, base + 1] - ny3[:, base]) / np.maximum(e(xa) - e(xb), 1e-300)
    return ny3[:, base] + scale * (e(xa) - e(x))


def _toward(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per hypothesis: a side (True: up) and how far towards that side's extreme, ``U(0,1)^2``.

    Half the hypotheses lean each way and most stay near the central curve, yet the 2.5th and
    97.5th percentiles reach 90% of the way to either extreme (``P(U^2 > 0.9) / 2 = 2.6%``).
    """
    return rng.uniform(0.0, 1.0, n) < 0.5, rng.uniform(0.0, 1.0, n) ** 2


def _between(x: float, nx: np.ndarray, ny: np.ndarray, i: int, shapes, shape_idx: np.ndarray,
             gamma: Optional[np.ndarray], n: int) -> np.ndarray:
    """Per hypothesis, ``y(x)`` between nodes ``i`` and ``i + 1`` in its shape, bent by ``t^gamma``."""
    col = np.empty(n)
    for si, shape in enumerate(shapes):
        g, g0, g1 = shape(x), shape(nx[i]), shape(nx[i + 1])
        if nx[i + 1] > nx[i] and not shape.grows(nx[i], nx[i + 1]):  # every expert loaded at both
            g, g0, g1 = x, nx[i], nx[i + 1]
        t = (g - g0) / (g1 - g0) if g1 != g0 else 0.0   # one node: the query is that node
        t = t if gamma is None else t ** gamma
        col = np.where(shape_idx == si, ny[:, i] + (ny[:, i + 1] - ny[:, i]) * t, col)
    return col


def measurement_noise(obs: Sequence[cm.CycleObservation], xq: Sequence[float], n: int,
                      rng: np.random.Generator) -> np.ndarray:
    """``(n, len(xq))`` errors of the measured mean cycle times, carried to the widths ``xq`` (ms).

    Each measured width ``x_i`` has a mean cycle time off the true one by ``z_i se_i``
    (``z_i ~ N(0, 1)``, ``se_i`` the standard error of that mean, runs at one width pooled by
    inverse variance). Every curve passes through the measured means, so a prediction between
    two measured widths inherits their errors in proportion to its position between them, and
    one outside them the error of the nearest. With heavy-tailed stalls in a run, this is the
    part of a prediction's uncertainty that no shape hypothesis covers.
    """
    var = _pooled_variance(obs)
    xs = np.array(sorted(var))
    se = np.array([math.sqrt(var[x]) for x in xs])
    err = rng.standard_normal((n, len(xs))) * se                      # (n, k)
    # row i: the weight of width i's error at each query width (linear between, nearest outside)
    weights = np.stack([np.interp(np.asarray(xq, dtype=float), xs, unit) for unit in np.eye(len(xs))])
    return err @ weights


def _pooled_variance(obs: Sequence[cm.CycleObservation]) -> dict[float, float]:
    """``{width: variance}`` (ms^2) of the mean cycle time at each verified width, its runs'
    ``total_se_ms`` pooled by inverse variance; 0 where a run there has no noise estimate (exact).

    Where two runs or more of one configuration (batch size and depth) measured that width, never
    below what their scatter gives the weighted mean their curve passes through:
    ``sum w (y - ybar)^2 / sum w / (k_eff - 1)``, ``w`` the runs' cycles, ``k_eff = (sum w)^2 /
    sum w^2`` (a random-effects floor: two bench records of 3 steps at 16.2 and 38.2 ms, neither with
    a noise estimate, had made their mean exact and its tok/s interval 1% wide)."""
    inv: dict[float, float] = {}
    groups: dict[tuple[int, int], list[cm.CycleObservation]] = {}
    for o in obs:
        x = float(o.verified_tokens)
        inv[x] = inv.get(x, 0.0) + (1.0 / o.total_se_ms ** 2 if o.total_se_ms else math.inf)
        groups.setdefault((o.bs, o.steps), []).append(o)
    out = {x: 1.0 / v for x, v in inv.items()}
    for runs in groups.values():
        if len(runs) < 2:
            continue
        w = np.array([max(float(o.weight), 1e-9) for o in runs])
        y = np.array([float(o.total_ms) for o in runs])
        k_eff = w.sum() ** 2 / float((w ** 2).sum())
        if k_eff <= 1.0 + 1e-9:
            continue
        ybar = float((w * y).sum() / w.sum())
        floor = float((w * (y - ybar) ** 2).sum() / w.sum()) / (k_eff - 1.0)
        x = float(runs[0].verified_tokens)
        out[x] = max(out[x], floor)
    return out


def _other_over_width(runs: Sequence[cm.CycleObservation]) -> Optional[list[tuple[float, float]]]:
    """``[(width, ms)]`` of the runs' other time (weighted means per verified width), or ``None``
    when fewer than two widths were measured or no two neighbouring widths differ by more than
    :data:`OTHER_GROWTH_Z` standard errors of the difference (each width's error: its runs' cycle-time errors,
    ``total_se_ms``, pooled by inverse variance; a run without one counts as exact). A difference
    within the noise is a stall or drift in one run, not host work that grows with the width:
    carried past the runs by the secant, it would move every deeper prediction."""
    pts = cm.MeasuredCurve.from_points([(ob.verified_tokens, cm.other_time(ob), ob.weight) for ob in runs])
    if pts is None or len(pts.points) < 2:
        return None
    var = _pooled_variance(runs)
    if not any(abs(yb - ya) > OTHER_GROWTH_Z * math.sqrt(var[xa] + var[xb])
               for (xa, ya), (xb, yb) in zip(pts.points, pts.points[1:])):
        return None
    return list(pts.points)


def _extend_one_width(pt: tuple[float, float], xq: Sequence[float], n: int,
                      rng: np.random.Generator) -> np.ndarray:
    """``(n, len(xq))`` draft-extend hypotheses (ms) from one measured ``(width, ms)``: a fixed
    cost plus a per-token one, ``y(x) = y0 (K + x) / (K + x0)``, the fixed cost worth ``K`` tokens
    of compute, ``K`` log-uniform over :data:`EXTEND_KNEE_TOKENS` (tokens).

    The draft is one decoder layer and an LM head: its weights are read once per forward whatever
    the width, and compute catches up with that read only at tens to hundreds of tokens (a
    roofline ridge of ~300 FLOP/byte on an H100 is ~300 tokens of bf16 weights at full
    efficiency, less at small widths). So a narrow draft-extend stays near flat and a wide one
    grows near proportionally to the width; the measured point does not say where its knee is.
    """
    x0, y0 = pt
    k = np.exp(rng.uniform(math.log(EXTEND_KNEE_TOKENS[0]), math.log(EXTEND_KNEE_TOKENS[1]), n))
    return y0 * (k[:, None] + np.asarray(xq, dtype=float)[None, :]) / (k[:, None] + x0)


def _one_step_keep(phased: Sequence[cm.CycleObservation], n: int, rng: np.random.Generator) -> np.ndarray:
    """Share of the draft's fixed part a one-step cycle pays, per hypothesis, where no one-step run
    logged a draft time: 0 when a one-step run was measured (the one-step runs' other time, a
    curve of its own, holds whatever that cycle pays), else ``U(0, 1)``."""
    return np.zeros(n) if any(o.steps <= 1 for o in phased) else rng.uniform(0.0, 1.0, n)


def _draft_fixed(phased: Sequence[cm.CycleObservation], bs: int, n: int, rng: np.random.Generator,
                 share: float, c_known: Optional[float] = None
                 ) -> Optional[tuple[np.ndarray, Optional[np.ndarray], np.ndarray]]:
    """Draft phase as ``c + (S - 1) t`` (ms) at ``bs`` from the runs there that logged a draft time.

    A draft time at one step (no draft forward runs there: preparation, or a generator that counts
    ``num_steps`` forwards) is ``c`` itself, the point ``S - 1 = 0``. Two such points or more:
    ``c`` and ``t`` by weighted least squares in ``S - 1``; a slope below 0 (noise about a flat
    draft) is a flat line, ``t = 0`` and ``c`` the weighted mean; an intercept below 0 is none,
    ``t`` through the origin. One depth ``S > 1``: ``c = f D``, ``f = share U(0, 1)^2`` (most
    hypotheses near no fixed part, the 97.5th percentile at 95% of ``share``),
    ``t = (D - c) / (S - 1)``; with ``c_known`` (the fixed part that batch sizes measured at two
    depths give here) that ``c`` instead, at most ``D``. Only one-step draft times: ``c`` as
    measured, ``t`` None (unknown).

    Returns ``(c, t, keep)``, arrays of ``n`` (``keep``: the share of ``c`` a one-step cycle pays:
    1 when a one-step run here logged a draft time, 0 when a one-step run (at any batch size: the
    one-step runs' other time is a curve of its own) logged none, its other time holding whatever
    that cycle pays, else ``U(0, 1)``), or None when no run at ``bs`` logged a
    draft time or, at one depth, ``share`` is 0 (the caller's per-forward cost stands).
    """
    pts = [(max(o.steps - 1.0, 0.0), o.draft_ms, o.weight) for o in phased
           if o.bs == bs and o.draft_ms is not None]
    if not pts:
        return None
    k = np.array([p[0] for p in pts])
    y = np.array([p[1] for p in pts])
    w = np.array([max(p[2], 1e-9) for p in pts])
    keep = np.ones(n) if (k == 0).any() else _one_step_keep(phased, n, rng)
    if len(set(k.tolist())) >= 2:
        km, ym = np.average(k, weights=w), np.average(y, weights=w)
        t = float(np.sum(w * (k - km) * (y - ym)) / np.sum(w * (k - km) ** 2))
        c = ym - t * km
        if t < 0:
            c, t = ym, 0.0
        elif c < 0:
            c, t = 0.0, float(np.sum(w * k * y) / np.sum(w * k * k))
        return np.full(n, c), np.full(n, t), keep
    if k[0] == 0:
        return np.full(n, float(np.average(y, weights=w))), None, keep
    d_mean = float(np.average(y, weights=w))
    if c_known is not None:
        c0 = min(max(c_known, 0.0), d_mean)
        return np.full(n, c0), np.full(n, (d_mean - c0) / k[0]), keep
    if share <= 0:
        return None
    c = d_mean * share * rng.uniform(0.0, 1.0, n) ** 2
    return c, (d_mean - c) / k[0], keep


def _draft_fixed_at(phased: Sequence[cm.CycleObservation], bs: int, n: int, seed: int,
                    share: float) -> Optional[tuple[np.ndarray, Optional[np.ndarray], np.ndarray]]:
    """:func:`_draft_fixed` at ``bs``, with what other batch sizes say of the fixed part.

    The batch sizes whose draft was measured at two depths or more fit ``c`` and ``t`` from the
    data alone; ``c`` between them is interpolated in the batch size and held beyond them
    (preparation barely grows with the batch). At a batch size measured at one depth that ``c``
    replaces the share drawn from :data:`DRAFT_FIXED_SHARE`. At a batch size where no run logged
    a draft time, ``t`` is carried along the batch size through every measured one's (each read
    with that ``c``; :class:`costmodel.MeasuredCurve`: piecewise linear, continued with the
    nearest secant, never falling), and ``keep`` is 0 where a one-step run was measured (its
    other time holds whatever that cycle pays), else ``U(0, 1)``. With no batch size
    measured at two depths the fixed part is unknown away from the runs: None there (the
    caller's per-forward curve stands).
    """
    def point_fit(b: int, c_known: Optional[float] = None) -> Optional[tuple[float, float]]:
        """``(c, t)`` at ``b`` from the data alone (no share drawn), or None."""
        fit = _draft_fixed(phased, b, 1, np.random.default_rng(0), 0.0, c_known)
        return None if fit is None or fit[1] is None else (float(fit[0][0]), float(fit[1][0]))

    sizes = sorted({o.bs for o in phased if o.draft_ms is not None})
    exact = {b: f for b, f in ((b, point_fit(b)) for b in sizes) if f is not None}
    xs = sorted(exact)

    def c_at(b: float) -> Optional[float]:
        return float(np.interp(b, xs, [exact[x][0] for x in xs])) if exact else None

    rng = np.random.default_rng([seed, 1])
    here = _draft_fixed(phased, bs, n, rng, share, None if bs in exact else c_at(bs))
    if here is not None or not exact:
        return here
    borrowed = {b: exact.get(b) or point_fit(b, c_at(b)) for b in sizes}
    curve = cm.MeasuredCurve.from_points([(b, f[1], 1.0) for b, f in borrowed.items() if f is not None])
    return np.full(n, c_at(bs)), np.full(n, curve(bs)[0]), _one_step_keep(phased, n, rng)


def _draft_step_floor(total: np.ndarray, pt: tuple[float, float], widths: Sequence[float], bs: int,
                      decode_ms: Optional[float], rng: np.random.Generator) -> np.ndarray:
    """Whole-cycle hypotheses ``total`` ``(n, len(widths))`` (ms) through one measured depth ``pt``
    ``(width, ms)`` at ``bs`` that grow by at least one draft forward per step past it and shrink by
    at least that much below it (never below the decode step ``decode_ms``, which a verify of more
    tokens costs at least).

    Whole-cycle times (stock lines, tables, bench records without phases) hold the draft forwards,
    ``num_steps - 1`` of them (DESIGN section 4), which the curve over the width does not see: with
    one measured depth whose cycle is barely above the decode step, every chord from the decode step
    is flat, and a flat curve made every deeper depth free (10 steps advised, "settled"). The draft
    forward is drawn per hypothesis log-uniform in :data:`DRAFT_STEP_SHARE` of the decode step (of the
    measured cycle without one), median 2%: an EAGLE-3 draft is one decoder layer and an LM head,
    launch-bound at small batches (the Kimi-K2.5 seed's: 0.24 ms a forward against an 11.3 ms decode
    step, 2%). Two
    measured depths measure the growth per step themselves (on the SpecBundle table some grow by
    less than 2% of the decode step a step), so this is for one."""
    x0, y0 = pt
    scale = decode_ms if decode_ms is not None else y0
    lo, hi = DRAFT_STEP_SHARE
    t = np.exp(rng.uniform(math.log(lo), math.log(hi), total.shape[0])) * scale   # log-uniform: median 2%
    out = total.copy()
    for i, w in enumerate(widths):
        if w > x0:
            out[:, i] = np.maximum(out[:, i], y0 + (w - x0) / bs * t)
        elif w < x0:
            low = y0 - (x0 - w) / bs * t
            if decode_ms is not None:
                low = np.maximum(low, decode_ms)
            out[:, i] = np.minimum(out[:, i], np.maximum(low, 1e-6))
    return out


def _decode_step_at(cost: cm.CycleCostModel, bs: int, central: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """``(n,)`` hypotheses of the no-spec decode step (ms) at a batch size with no baseline of its own
    (:meth:`costmodel.CycleCostModel.baseline_step_ms` gives ``central``), from baselines at two batch
    sizes or more: between two of them, bent as between measured widths (:func:`sample_curve`);
    beyond them, the nearest secant times ``u`` leaning from 1 to 0 (flat) and up to half again as
    steep; below the lowest, towards flat (fewer requests never cost more) and half again as steep,
    never below ``y0 sqrt(bs / x0)``. The steep extreme outside them is at least
    :data:`DECODE_PROPORTIONAL_SHARE` of proportional growth from the nearest baseline (flat baselines
    leave room to grow), not proportional growth itself: a first version took that, and where the
    secant was an eighth of it the mean over the hypotheses doubled the slope the table printed, so
    advise recommended 2 steps "at 0.94x the no-spec" tok/s. Never above a cycle period a run
    measured at ``bs`` (``step_ceiling``). With one baseline at ``b0``: the slope from it to
    ``central`` (that baseline scaled along the verify curve, :meth:`costmodel.CycleCostModel.baseline_step_ms`)
    leaning to half of it and to half again as steep (:data:`ONE_BASELINE_SLOPE`; where that slope
    is flat, whole-cycle inputs having no verify curve to scale by, from flat to
    :data:`DECODE_PROPORTIONAL_SHARE` of proportional growth): the verify
    curve's slope is a verify forward's over more tokens of the same requests, while a decode step
    over more requests also reads their KV caches, so the carried step is a guess whose range the
    decision must see (a carried step with no range had settled speculation off at a batch size no
    baseline measured, on a 3% margin, and named a run that could not test it)."""
    pts = sorted((float(b), float(ms)) for b, ms in cost.baseline_ms.items())
    if not pts or (len(pts) == 1 and math.isclose(pts[0][0], bs)):
        return np.full(n, central)
    ceiling = cost.step_ceiling.get(bs, math.inf)   # never above a cycle a run measured here
    up, mag = _toward(rng, n)
    if len(pts) >= 2 and pts[0][0] <= bs <= pts[-1][0]:
        return np.minimum(np.maximum(sample_curve(pts, [float(bs)], n, rng)[:, 0], 0.01 * central), ceiling)
    # outside the baselines: the nearest secant, leaning to flat and to a steeper extreme: half again
    # as steep, or a quarter of proportional growth where the secant is flatter than that (flat
    # baselines still leave room to grow); the two sides about as far apart, so that the mean over
    # the hypotheses stays near the central step the table prints. One baseline: the slope to the
    # central step, leaning to half of it and to half again as steep
    if len(pts) == 1:
        (b0, y0), = pts
        sec = abs(central - y0) / abs(bs - b0)
        if sec > 0:   # from half the verify curve's slope to half again as steep
            slope = sec * (1.0 + np.where(up, mag, -mag) * ONE_BASELINE_SLOPE)
        else:         # no slope to scale (whole-cycle inputs carry the baseline flat): flat to a quarter
            slope = mag * DECODE_PROPORTIONAL_SHARE * y0 / b0   # of proportional growth
        out = np.maximum(y0 - slope * (b0 - bs), y0 * math.sqrt(bs / b0)) if bs < b0 else y0 + slope * (bs - b0)
        return np.minimum(np.maximum(out, 0.01 * central), ceiling)
    (xa, ya), (xb, yb) = pts[:2] if bs < pts[0][0] else pts[-2:]
    near = (xa, ya) if bs < xa else (xb, yb)
    sec = max(0.0, (yb - ya) / (xb - xa))
    steep = max(BEYOND_SLOPE[1] * sec, DECODE_PROPORTIONAL_SHARE * near[1] / near[0])
    slope = np.where(up, sec + mag * (steep - sec), (1.0 - mag) * sec)
    if bs < xa:   # fewer requests: never more than the lowest baseline's step
        out = np.maximum(ya - slope * (xa - bs), ya * math.sqrt(bs / xa))
    else:
        out = yb + slope * (bs - xb)
    return np.minimum(np.maximum(out, 0.01 * central), ceiling)


def _below_runs(cost: cm.CycleCostModel, pts: Sequence[tuple[float, float]],
                anchor: Optional[tuple[float, float]]) -> tuple[Optional[tuple[float, float]], Optional[float]]:
    """``(anchor, floor)`` of :func:`_sample_from_decode_step`: the decode step ``anchor`` as it is
    where it lies below the lowest measured width, else the widest baseline below them (or None)
    and that step as a floor (ms)."""
    if anchor is not None and pts and anchor[0] >= pts[0][0]:
        below = [(float(b), float(ms)) for b, ms in cost.baseline_ms.items()
                 if b < pts[0][0] and b not in cost.unanchored]
        return (max(below) if below else None), anchor[1]
    return anchor, None


def _sample_from_decode_step(cost: cm.CycleCostModel, pts: Sequence[tuple[float, float]], xq: Sequence[float],
                             n: int, rng: np.random.Generator, anchor: Optional[tuple[float, float]],
                             shapes: Sequence = (cm.LINEAR,), settle: bool = False) -> np.ndarray:
    """:func:`sample_curve` through ``pts`` (ascending ``(width, ms)``) at a batch size whose decode
    step is ``anchor`` (``(bs, ms)``; None: unknown). When that step lies at or past the lowest
    measured width (advice for a batch size wider than the runs'), it is no anchor below them: the
    widest baseline below them is (none without one), and the step is a floor: a forward over at
    least ``bs`` tokens costs at least the decode step over ``bs``."""
    anchor, floor = _below_runs(cost, pts, anchor)
    out = sample_curve(pts, xq, n, rng, anchor=anchor, shapes=shapes, settle=settle)
    return out if floor is None else np.maximum(out, floor)


def build(acc: cm.AcceptanceModel, cost: cm.CycleCostModel, obs: Sequence[cm.CycleObservation], bs: int,
          steps: Sequence[int], n: int = N_SAMPLES, seed: int = 0,
          draft_fixed_share: float = DRAFT_FIXED_SHARE, settle: bool = False) -> Ensemble:
    """The ensemble at batch size ``bs`` for candidate depths ``steps`` (0 included when a baseline is known).

    ``draft_fixed_share``: the largest share of a draft phase measured at one depth that may be a
    fixed cost (:data:`DRAFT_FIXED_SHARE`; 0 for device-span lines, whose draft span holds the
    draft forwards alone). ``settle``: the verify-mode overheads drawn over :func:`settle_overhead`'s
    range (the :attr:`Ensemble.doubt` ensemble, which has none of its own); otherwise that ensemble
    is built and attached where the range is wider, the same draws but for those overheads.

    Raises:
        ValueError: a hypothesis predicts a cycle time that is not positive.
    """
    rng = np.random.default_rng(seed)
    steps = sorted(set(int(s) for s in steps))
    spec = [s for s in steps if s > 0]
    smax = max(spec) if spec else 1
    p, depth = sample_acceptance(acc, smax, n, rng, shallowest=min(spec) if spec else None)
    e_all = 1.0 + np.concatenate([np.zeros((n, 1)), np.cumsum(np.cumprod(p, axis=1), axis=1)], axis=1)  # E[L(S)], S=0..
    base = cost.baseline_step_ms(bs)
    widths = [bs * (s + 1) for s in spec]
    m = len(steps)
    ph = {k: np.zeros((n, m)) for k in ("draft_ms", "verify_ms", "extend_ms", "other_ms", "total_ms")}
    tok = np.zeros((n, m))
    acc_len = np.ones((n, m))
    anchor = None
    # a baseline slower than a cycle measured at its batch size bounds no verify (cost.unanchored);
    # carried from such baselines alone, neither
    carried_only_odd = bs not in cost.baseline_ms and set(cost.baseline_ms) <= cost.unanchored
    if base is not None and bs not in cost.unanchored and not carried_only_odd:
        anchor = (float(bs), base[0])
    phased = [o for o in obs if o.has_phases]
    cols = [steps.index(s) for s in spec]
    wider: Optional[float] = None
    if cost.mode == "phases" and phased:
        shapes = (cm.LINEAR, cost.shape) if cost.shape.num_experts else (cm.LINEAR,)
        # the phase-timed runs' verify points, and those whole-cycle runs beside them set
        # (:meth:`costmodel.CycleCostModel.fit`)
        vpts = list(cost.verify_runs.points) if cost.verify_runs is not None else _points(phased, "verify_ms")
        v = _sample_from_decode_step(cost, vpts, widths, n, rng, anchor, shapes, settle=settle)
        # the settled test's own hypotheses, where the lowest run's verify is far above the decode step
        wider = None if settle else settle_overhead(sorted(vpts), _below_runs(cost, sorted(vpts), anchor)[0])
        measured_w = {x for x, _ in vpts}
        xpts = _points(phased, "extend_ms")
        x = sample_curve(xpts, widths + [bs], n, rng)
        if len(xpts) == 1:  # drawn above all the same, so that the later hypotheses' draws stay put
            x = _extend_one_width(xpts[0], widths + [bs], n, np.random.default_rng([seed, 3]))
        x_bs = x[:, -1]
        x = x[:, :-1]
        step = cost.draft_step(bs)[0] if cost.draft_step else None
        step_s = np.full(n, step) if step is not None else x_bs * rng.uniform(*UNKNOWN_STEP, n)
        other = cost.other(bs)[0]
        sv = np.array(spec, dtype=float)
        # a one-step cycle runs no draft forward and prepares none: where runs at one step and
        # deeper ones were both measured, each class keeps its own other-time curve over bs
        one = [ob for ob in phased if ob.steps <= 1]
        deep = [ob for ob in phased if ob.steps > 1]
        if one and deep:
            curve = lambda group: cm.MeasuredCurve.from_points([(ob.bs, cm.other_time(ob), ob.weight)
                                                                for ob in group])(bs)[0]
            other = np.where(sv <= 1, curve(one), curve(deep))[None, :]
        d = np.maximum(sv - 1.0, 0.0)[None, :] * step_s[:, None]
        # its own generator: the other hypotheses' draws do not move with it
        fixed = _draft_fixed_at(phased, bs, n, seed, draft_fixed_share)
        o = np.broadcast_to(np.asarray(other, dtype=float), (n, len(spec))).copy()
        # host work that grows with the verified width (sampling, bookkeeping): where deeper runs
        # at this bs measured two widths or more whose other times differ beyond their noise,
        # their other time is a curve over the width through each of them (its own generator, as
        # the fixed part's); one-step cycles follow it too unless a one-step run was measured
        wcols = [i for i, s in enumerate(spec) if s > 1 or not one]
        opts = _other_over_width([ob for ob in deep if ob.bs == bs])
        if opts is not None and wcols:
            o[:, wcols] = sample_curve(opts, [widths[i] for i in wcols], n, np.random.default_rng([seed, 2]))
        if fixed is not None:
            c, t, keep = fixed
            t = step_s if t is None else t
            d = np.where(sv[None, :] > 1, c[:, None] + (sv[None, :] - 1.0) * t[:, None], 0.0)
            # at one step no draft forward runs: none to all of the fixed part, as other time
            o = o + np.where(sv[None, :] > 1, 0.0, (c * keep)[:, None])
        # a one-step cycle prepares no draft forward, or part of one: where no one-step run was
        # measured, none to all of the deeper runs' draft preparation (inside their other time) is
        # left out (its own generator, as the fixed part's)
        one_cols = [i for i, s in enumerate(spec) if s <= 1]
        if one_cols and not one:
            preps = [(ob.prep_ms, ob.weight) for ob in deep if ob.prep_ms is not None and ob.bs == bs] \
                or [(ob.prep_ms, ob.weight) for ob in deep if ob.prep_ms is not None]
            if preps:
                prep = sum(p_ * w for p_, w in preps) / sum(w for _, w in preps)
                u = np.random.default_rng([seed, 7]).uniform(0.0, 1.0, n)
                o[:, one_cols] -= (u * prep)[:, None]
        total = d + v + x + o
        ph["draft_ms"][:, cols], ph["verify_ms"][:, cols], ph["extend_ms"][:, cols] = d, v, x
        ph["other_ms"][:, cols] = o
    else:
        # whole-cycle times include the draft steps, which grow with the depth, not the width: a
        # cycle at another batch size and the same width is another depth's, so only this batch
        # size's runs make the curve (all of them where none ran here: carried over, never settled)
        here = [o for o in obs if o.bs == bs]
        tpts = _points(here or obs, "total_ms")
        measured_w = {x for x, _ in tpts}
        total = _sample_from_decode_step(cost, tpts, widths, n, rng, anchor)
        if here and len(tpts) == 1:   # its own generator, so that the other draws stay put
            total = _draft_step_floor(total, tpts[0], widths, bs, None if anchor is None else anchor[1],
                                      np.random.default_rng([seed, 5]))
    # the measured means' own errors: this batch size's runs, or where none ran here, those of the
    # runs the curves were carried over from
    # (a run without a noise estimate counts where another run of its configuration measured
    # it too: their scatter is its noise, :func:`_pooled_variance`)
    reps: dict[tuple[int, int], int] = {}
    for o in obs:
        reps[(o.bs, o.steps)] = reps.get((o.bs, o.steps), 0) + 1
    known = [o for o in obs if o.total_se_ms or reps[(o.bs, o.steps)] > 1]
    noisy = [o for o in known if o.bs == bs] or (known if not any(o.bs == bs for o in obs) else [])
    shape_total = total
    if noisy and spec:
        total = total + measurement_noise(noisy, widths, n, rng)
        # a draw of a wide error never takes a cycle below the no-spec decode step (a cycle verifies
        # at least as many tokens; not one slower than a measured cycle, cost.unanchored), nor,
        # without one, below a twentieth of its curve
        total = np.maximum(total, anchor[1] if anchor is not None else 0.05 * shape_total)
    if np.any(~np.isfinite(total)) or np.any(total <= 0):
        raise ValueError(f"a hypothesis predicts a cycle time that is not positive at bs {bs}: the measured "
                         "phase times cannot be extrapolated there")
    ph["total_ms"][:, cols] = total
    e = e_all[:, spec]
    acc_len[:, cols] = e
    tok[:, cols] = 1000.0 * bs * e / total
    if 0 in steps:
        if base is None:
            raise ValueError("steps 0 (speculation off) needs a baseline throughput")
        dec = np.full(n, base[0])
        if base[1]:   # no baseline at bs: its own generator, so that the other draws stay put
            dec = _decode_step_at(cost, bs, base[0], n, np.random.default_rng([seed, 4]))
        tok[:, steps.index(0)] = 1000.0 * bs / dec
        ph["total_ms"][:, steps.index(0)] = dec
    # each width no run measured runs its own kernels: the verify (the whole cycle, without a phase
    # split) scaled per hypothesis and width by exp(WIDTH_JITTER z), for the intervals alone (its
    # own generator, so that the other draws stay put). Measured: a width the curve passes through
    # (a phase-timed verify at any batch size; a whole cycle at this one, or, where no run is at
    # this batch size, at the one it is carried from) and every depth run at this batch size
    band = tok.copy()
    jit = np.zeros((n, len(spec)))
    if spec:
        # a depth run at this batch size is measured whatever its curve: a whole-cycle run beside
        # phase-timed ones holds its own width's kernels, and its poor-fit check stays as strict
        measured_w |= {float(o.verified_tokens) for o in obs if o.bs == bs}
        fresh = np.array([w not in measured_w for w in widths])
        f = np.where(fresh[None, :], np.exp(WIDTH_JITTER * np.random.default_rng([seed, 13]).standard_normal(
            (n, len(spec)))), 1.0)
        jit = (v if cost.mode == "phases" and phased else total) * (f - 1.0)
        band[:, cols] = 1000.0 * bs * e / np.maximum(total + jit, 1e-9)
    sources: list[Optional[str]] = [None] * m
    if spec:
        t_med = np.median(total, axis=0)
        e_med = np.median(e, axis=0)
        w_acc = np.ptp(np.percentile(e / t_med, LEVELS, axis=0), axis=0)
        w_cost = np.ptp(np.percentile(e_med / total, LEVELS, axis=0), axis=0)
        w_jit = np.ptp(np.percentile(e_med / (t_med + jit), LEVELS, axis=0), axis=0)
        for i, s in enumerate(spec):
            if max(w_jit[i], w_acc[i], w_cost[i]) <= 1e-9 * e_med[i] / t_med[i]:
                # nothing left to vary: a measured depth whose run has no noise estimate (a table
                # row, a bench record without its cycle group, a stock run of a few intervals)
                src = NO_NOISE_SOURCE
            elif w_jit[i] > max(w_acc[i], w_cost[i]):
                src = KERNEL_SOURCE
            elif w_acc[i] >= w_cost[i]:
                if s > depth:
                    src = f"acceptance beyond position {depth}"
                elif acc.points and s not in {pt.steps for pt in acc.points}:
                    src = "acceptance per position (mean accept lengths only)"
                else:
                    src = "acceptance sampling"
            elif cost.mode != "phases" or not phased:
                src = "cycle-time shape"
            else:
                spreads = {"verify shape": np.ptp(np.percentile(v[:, i], LEVELS)),
                           "draft-extend shape": np.ptp(np.percentile(x[:, i], LEVELS)),
                           "draft step cost": np.ptp(np.percentile(d[:, i], LEVELS))}
                src = max(spreads, key=spreads.get)
            if not any(o.bs == bs for o in obs):
                # no run here: the curves are carried over from other batch sizes, and how a cost
                # scales with the batch is not among the hypotheses (the interval is narrower than
                # the doubt)
                src += f"; carried over from bs {cm.span_text({o.bs for o in obs})}"
            sources[steps.index(s)] = src
    tok_shape = tok.copy()
    if spec:
        tok_shape[:, cols] = 1000.0 * bs * e / np.maximum(shape_total, 1e-9)
    doubt = None
    if wider is not None:   # the same draws but for the verify-mode overheads' wider range (settle_overhead)
        doubt = build(acc, cost, obs, bs, steps, n, seed, draft_fixed_share, settle=True)
    return Ensemble(bs, steps, tok, acc_len, ph, depth, sources, _run_se(obs, bs, steps, p, acc.dispersion), tok_shape,
                    band, doubt, wider)


def _run_se(obs: Sequence[cm.CycleObservation], bs: int, steps: Sequence[int], p: np.ndarray,
            dispersion: float = 1.0) -> np.ndarray:
    """Per depth in ``steps``: the relative standard error of a new run's tok/s, as long as the
    median measured run at ``bs`` (cycles): ``sqrt((se_T / T)^2 + (sd_L / sqrt(bs c) / E[L])^2)``,
    the cycle time's relative error taken from the measured runs (``total_se_ms / total_ms``,
    median) and the accept length's from the chain's variance (:func:`costmodel.accept_len_moments`,
    median hypothesis) times ``dispersion`` (:attr:`costmodel.AcceptanceModel.dispersion`). 0 for steps 0 and when no run at ``bs`` reports its noise."""
    noisy = [o for o in obs if o.bs == bs and o.total_se_ms and o.total_ms > 0]
    out = np.zeros(len(steps))
    if not noisy:
        return out
    rel_t = float(np.median([o.total_se_ms / o.total_ms for o in noisy]))
    cycles = float(np.median([o.weight for o in noisy]))
    pm = np.median(p, axis=0)
    for i, s in enumerate(steps):
        if s <= 0:
            continue
        mean, var = cm.accept_len_moments(pm[:s])
        rel_l = math.sqrt(dispersion * var / max(1.0, bs * cycles)) / mean
        out[i] = math.sqrt(rel_t ** 2 + rel_l ** 2)
    return out


# ---------------------------------------------------------------------------------------------
# the decision
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """The pick and whether the data settle it.

    Attributes:
        pick: the depth with the highest expected tok/s over the ensemble (0 = speculation off).
        regret_95: 95th percentile over hypotheses of ``1 - tok_s(pick) / max_s tok_s(s)`` (with
            :attr:`Ensemble.doubt`'s, where there are some).
        settled: ``regret_95 <= SETTLED_REGRET``.
        next_run: depth whose measurement most reduces that regret (None when settled or when
            every candidate depth was measured).
        regret_95_after: the 95th-percentile regret expected after measuring ``next_run``.
        no_run_at_bs: no run measured this batch size (:func:`unmeasured_batch`).
        useful: whether ``next_run`` is expected to cut the regret by at least :data:`MIN_CUT`
            of it; when not, no single run is expected to settle the decision (the best depths
            lie within the measurements' noise, or the doubt is one no run resolves).
        baseline_after: where speculation off is a candidate whose tok/s the hypotheses do not
            agree on (a no-spec decode step carried from another batch size's baseline), the
            95th-percentile regret expected after a no-spec run at this batch size; else None.
        regret_95_assumed: where the settled test weighed larger verify-mode overheads
            (:attr:`Ensemble.doubt`), the 95th-percentile regret without them; else None.
        doubt_overhead: the highest verify-mode overhead weighed then (fraction of the decode
            step), else None.
    """

    pick: int
    regret_95: float
    settled: bool
    next_run: Optional[int]
    regret_95_after: Optional[float]
    useful: bool = True
    no_run_at_bs: bool = False
    baseline_after: Optional[float] = None
    regret_95_assumed: Optional[float] = None
    doubt_overhead: Optional[float] = None


def unmeasured_batch(dec: Decision, best_speculative: int) -> Decision:
    """``dec`` at a batch size no run measured: never settled, since how the costs scale with the
    batch is not among the hypotheses (every figure there is carried over from other batch sizes);
    ``next_run`` is a run at that batch size, at the pick (``best_speculative`` when the pick is
    speculation off), with no regret forecast."""
    steps = dec.pick if dec.pick > 0 else best_speculative
    return Decision(dec.pick, dec.regret_95, False, steps, None, True, True)


def with_measurements(ens: Ensemble, measured: dict[int, tuple[float, float]]) -> Ensemble:
    """``ens`` with the tok/s at each depth of ``measured`` (``{steps: (tok/s, standard error)}``)
    replaced, in every hypothesis, by a draw of that measurement within its error: the decision's
    view where a measurement won over the model (:func:`decide` then weighs the measured figures,
    not the curves that missed them). The intervals (``tok_s_band``) are left as they are.
    Deterministic (a generator of its own)."""
    rng = np.random.default_rng([len(ens.tok_s), 17])
    tok = ens.tok_s.copy()
    shape = None if ens.tok_s_shape is None else ens.tok_s_shape.copy()
    for s, (mean, se) in sorted(measured.items()):
        if s not in ens.steps:
            continue
        i = ens.steps.index(s)
        draw = np.maximum(mean + se * rng.standard_normal(len(tok)), 1e-9)
        tok[:, i] = draw
        if shape is not None:
            shape[:, i] = draw
    return replace(ens, tok_s=tok, tok_s_shape=shape,
                   doubt=None if ens.doubt is None else with_measurements(ens.doubt, measured))


def _regret(tok: np.ndarray, pick_col: int) -> np.ndarray:
    return 1.0 - tok[:, pick_col] / tok.max(axis=1)


def _stairs(ens: Ensemble, tok: np.ndarray, measured: Sequence[int], seed: int) -> np.ndarray:
    """``tok`` ``(N, len(ens.steps))`` (tok/s) with :data:`STAIR_SHARE` of its hypotheses made staircases
    over the depths (the next-run choice of :func:`decide`).

    For a staircase hypothesis, depths ``>= 1`` fall into cells of neighbours (each neighbouring
    pair shares a cell with a chance ``U`` :data:`STAIR_SAME`); every depth in a cell runs the
    cycle time of the cell's top depth (padded up to it), or of the measured depth in the cell,
    where there is one (a measured cell stays as measured). Its own accept length is kept:
    ``tok_s = 1000 bs E[L] / T``. Speculation off is left as it is. Deterministic in ``seed``.
    """
    rng = np.random.default_rng([seed, 11])
    n = tok.shape[0]
    spec = [i for i, s in enumerate(ens.steps) if s > 0]
    if len(spec) < 2:
        return tok
    sel = rng.uniform(0.0, 1.0, n) < STAIR_SHARE
    same = rng.uniform(0.0, 1.0, (n, len(spec) - 1)) < rng.uniform(*STAIR_SAME, n)[:, None]
    e = ens.accept_len[:, spec]
    t = e / np.maximum(tok[:, spec], 1e-300)          # cycle time, up to the factor 1000 bs
    # top[:, k]: the index of the top depth of k's cell
    top = np.empty((n, len(spec)), dtype=int)
    top[:, -1] = len(spec) - 1
    for k in range(len(spec) - 2, -1, -1):
        top[:, k] = np.where(same[:, k], top[:, k + 1], k)
    rows = np.arange(n)[:, None]
    padded = t[rows, top]
    for k, i in enumerate(spec):
        if ens.steps[i] in measured:   # its cell runs the measured depth's time
            padded = np.where(top == top[:, k:k + 1], t[:, k:k + 1], padded)
    out = tok.copy()
    out[:, spec] = np.where(sel[:, None], e / padded, tok[:, spec])
    return out


def decide(ens: Ensemble, measured: Sequence[int] = (), bins: int = 10, pick: Optional[int] = None) -> Decision:
    """Pick, 95th-percentile regret, and the one run that would most reduce it.

    ``next_run``: for each unmeasured depth ``c >= 1``, the hypotheses are split into ``bins``
    equal-count groups by what a run at ``c`` would show: their tok/s at ``c`` from the shape
    hypotheses alone (a new run does not reveal the errors of the runs already made, which stay
    in every hypothesis' regret) times ``1 + se z``, the new run's own sampling error
    (:attr:`Ensemble.run_se`, ``z ~ N(0, 1)``); in each group the pick is redone and the regret
    recomputed (a preposterior analysis). The depth whose run leaves the lowest regret on average
    over the hypotheses wins (ties: nearest to the pick), the hypotheses for this choice alone
    including :data:`STAIR_SHARE` of staircases over the depths (:func:`_stairs`); the 95th
    percentile of that run's regret over the ensemble itself is the forecast ``regret_95_after``.
    Choosing by the 95th percentile itself follows the hypotheses' far tails, which one run rarely settles: over ``benchmarks/sim_advise.py`` seeds
    0-95 (2,304 worlds) it gave a mean regret of 0.19% and 67 worlds more than 2% below their
    best, the mean 0.17% and 61. Measured depths (``measured``) are not proposed; a run expected
    to cut the 95th-percentile regret by less than :data:`MIN_CUT` of it is still named, with
    ``useful`` False. ``pick``: a depth decided elsewhere (a measurement that wins over the
    model), else the highest mean tok/s.

    The 95th-percentile regret (``settled``) is read over the hypotheses and, where the ensemble
    carries them, its :attr:`Ensemble.doubt` ones too (larger verify-mode overheads,
    :func:`settle_overhead`), as many again; the pick and the next-run choice see the first alone.
    """
    tok = ens.tok_s
    mean = tok.mean(axis=0)
    order = sorted(range(len(ens.steps)), key=lambda i: (-mean[i], ens.steps[i]))
    pc = order[0] if pick is None else ens.steps.index(pick)
    # settled over the hypotheses and, where there are some, those with larger verify-mode overheads
    weighed = tok if ens.doubt is None else np.vstack([tok, ens.doubt.tok_s])
    r95 = float(np.percentile(_regret(weighed, pc), 95))
    doubt = {}
    if ens.doubt is not None:
        doubt = {"regret_95_assumed": float(np.percentile(_regret(tok, pc), 95)),
                 "doubt_overhead": ens.doubt_overhead}
    if r95 <= SETTLED_REGRET:
        return Decision(ens.steps[pc], r95, True, None, None, **doubt)
    # what a run at c would show: each hypothesis' tok/s there with that run's own sampling error
    z = np.random.default_rng(len(tok)).standard_normal(len(tok))
    shape = tok if ens.tok_s_shape is None else ens.tok_s_shape

    def after(t: np.ndarray, seen: np.ndarray, ci: int, se: Optional[float] = None) -> np.ndarray:
        """each hypothesis' regret once a run at column ci has shown it (``se``: that run's relative
        sampling error, default the ensemble's :attr:`Ensemble.run_se` there)"""
        if se is None:
            se = float(ens.run_se[ci]) if ens.run_se is not None else 0.0
        idx = np.argsort(seen[:, ci] * (1.0 + se * z), kind="stable")
        out = np.empty(len(idx))
        for grp in np.array_split(idx, bins):
            sub = t[grp]
            out[grp] = _regret(sub, int(np.argmax(sub.mean(axis=0))))
        return out

    # the run is chosen with staircase hypotheses mixed in (STAIR_SHARE), so a run beside the pick
    # counts for what it can show; the forecast is the smooth ensemble's, as the regret it cuts
    stair_tok = _stairs(ens, tok, measured, len(tok))
    stair_shape = _stairs(ens, shape, measured, len(tok))
    # a no-spec run here, where the decode step is carried from another batch size (its column
    # varies over the hypotheses): what it would leave, a baseline taken as exact
    base_after = None
    if 0 in ens.steps:
        i0 = ens.steps.index(0)
        if float(np.ptp(tok[:, i0])) > 1e-9 * float(np.abs(tok[:, i0]).max()):
            base_after = float(np.percentile(after(tok, shape, i0, se=0.0), 95))
    best = None
    for ci, c in enumerate(ens.steps):
        if c <= 0 or c in measured:
            continue
        # chosen by the regret expected after the run (its mean over the hypotheses)
        key = (round(float(after(stair_tok, stair_shape, ci).mean()), 5), abs(c - ens.steps[pc]), c)
        if best is None or key < best[0]:
            best = (key, c, ci)
    if best is None:
        return Decision(ens.steps[pc], r95, False, None, None, False, baseline_after=base_after, **doubt)
    forecast = float(np.percentile(after(tok, shape, best[2]), 95))
    return Decision(ens.steps[pc], r95, False, best[1], forecast, forecast <= (1.0 - MIN_CUT) * r95,
                    baseline_after=base_after, **doubt)
