"""Drive SGLang 0.5.23's real EAGLE-3 decode cycle on CPU, with stand-ins only *below* the hooked methods.

Used by ``test_cycle_hooks.py`` and ``benchmarks/bench_hook_overhead.py``. What is real and what is not:

* real upstream code: ``EAGLEWorkerV2.forward_batch_generation`` (decode branch), ``EAGLEWorkerV2.verify``,
  ``run_eagle_verify``, ``EagleDraftWorker.draft`` / ``draft_forward`` / ``_draft_extend_for_decode``,
  ``TpModelWorker.forward_batch_generation``, ``ModelRunner.forward`` (draft runner, eager mode),
  ``SchedulerBatchResultProcessor._resolve_spec_v2_tokens`` and ``advance_grammar_fsm``; the workers are
  made with ``object.__new__`` of the upstream classes;
* SGLang's ``device_timer_ctx`` segments: each stand-in below a runner (the draft and draft-extend
  graph runners' ``execute``, the target's and the draft's forward) first spends known *host* time
  (attention metadata, buffer loads), then enters ``device_timer_ctx`` through the binding of the
  upstream module that calls it there (``eagle_draft_cuda_graph_runner``, ``decode_cuda_graph_runner``,
  ``eagle_draft_extend_cuda_graph_runner``, ``eager_runner``) and spends the known device time inside;
* stand-ins: the module-level helpers those methods call (``prepare_for_draft``,
  ``build_eagle_verify_input``, ``eagle_prepare_for_verify``, ``eagle_sample``, ``fill_bonus_tokens_func``
  (a Triton kernel), ``prepare_for_draft_extend``), the graph runners, the target ``model_runner``, the
  draft runner's ``_forward_raw``, ``_build_trivial_verify_input`` (num_steps 0), the batch and requests. Each stand-in advances a :class:`FakeClock` by a known
  number of milliseconds, so every phase has a known duration.

Overlap order (``run_overlap``): launch batch N+1, then resolve batch N with the real
``_resolve_spec_v2_tokens``, as ``Scheduler.event_loop_overlap`` does.
"""

from __future__ import annotations

import contextlib
import pkgutil
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Callable, Optional

import torch

EW = "sglang.srt.speculative.eagle_worker_v2"
EWC = "sglang.srt.speculative.eagle_worker_common"


class _SeqLensBuf:
    """``FutureMap.new_seq_lens_buf`` stand-in: the gather ``resolve_seq_lens_cpu`` makes, where the
    real one waits for the previous cycle's published lengths (``Costs.seq_lens_wait``)."""

    def __init__(self, harness):
        self.h = harness

    def __getitem__(self, idx):
        h = self.h
        h.clock.advance(h.costs.seq_lens_wait)
        if h.during_seq_lens is not None:
            h.during_seq_lens()
        return torch.full((len(idx),), 10, dtype=torch.int64)


class FakeClock:
    """Nanosecond clock that moves only when a stand-in says so."""

    def __init__(self):
        self.ns = 1_000_000_000

    def __call__(self) -> int:
        return self.ns

    def advance(self, ms: float) -> None:
        self.ns += round(ms * 1e6)


@dataclass
class Costs:
    """Known milliseconds each stand-in takes (0 everywhere for the overhead benchmark)."""

    prepare_draft: float = 0.10
    draft_replay_prep: float = 0.07  # host work in the draft graph runner before its device segment
    draft_graph: float = 1.20        # one draft CUDA-graph replay (graph mode): the device segment
    draft_metadata: float = 0.05     # draft attention metadata (eager mode)
    forward_prep: float = 0.03       # host work in each eager forward before its device segment
    draft_forward: float = 0.40      # per eager draft forward (runner._forward_raw): the device segment
    build_verify: float = 0.05
    prepare_verify: float = 0.30
    verify_replay_prep: float = 0.08  # host work of the target verify before its device segment
    target_forward: float = 20.0     # the target verify forward: the device segment
    sample: float = 0.50
    publish: float = 0.25            # on_publish, between verify and draft-extend: "other"
    prepare_extend: float = 0.15
    extend_replay_prep: float = 0.04  # host work in the draft-extend runner before its device segment
    extend_graph: float = 0.60
    extend_forward: float = 0.70     # eager draft-extend forward
    trivial_verify: float = 0.02     # num_steps = 0: the 1-node verify input built instead of a draft
    between: float = 0.0             # scheduler time between two launches (gap_ms)
    seq_lens_wait: float = 0.0       # FutureMap.resolve_seq_lens_cpu before a launch (overlap mode)

    def expected(self, steps: int, eager: bool) -> dict:
        """Fields (ms) the profiler must report for one cycle with ``steps`` draft steps.

        ``draft_prep`` is the host time before the first draft segment, ``draft`` the draft
        segment(s) (eager: first forward's start to last forward's end), ``extend`` the
        draft-extend's segment; the host work after a segment (building the verify input, the
        publish, preparing the draft-extend) is ``other``. ``gap_ms`` is :attr:`between` (``None``
        for a cycle that follows no timed cycle).
        """
        fwd_prep = self.forward_prep if eager else 0.0
        if steps <= 1:
            prep = draft = None
        elif eager:
            prep = self.prepare_draft + self.draft_metadata + self.forward_prep
            draft = (steps - 1) * self.draft_forward + (steps - 2) * self.forward_prep
        else:
            prep = self.prepare_draft + self.draft_replay_prep
            draft = self.draft_graph
        verify = self.prepare_verify + (fwd_prep if eager else self.verify_replay_prep) + self.target_forward + self.sample
        extend = self.extend_forward if eager else self.extend_graph
        extend_host = self.prepare_extend + (fwd_prep if eager else self.extend_replay_prep)
        drafted = 0.0
        if steps == 1:  # draft() runs (no forward): its stand-ins land in "other"
            drafted = self.prepare_draft
        elif steps == 0:  # no draft at all: the trivial verify input is "other"
            drafted = self.trivial_verify
        build = self.build_verify if steps >= 1 else 0.0
        other = drafted + build + self.publish + extend_host
        total = (prep or 0.0) + (draft or 0.0) + verify + extend + other
        return {"draft_prep_ms": prep, "draft_ms": draft, "verify_ms": verify, "verify_fwd_ms": self.target_forward,
                "extend_ms": extend, "other_ms": other, "total_ms": total, "gap_ms": self.between,
                "draft_step_ms": [self.draft_forward] * (steps - 1) if eager and steps > 1 else None}


class _Mode:
    def __init__(self, name: str):
        self.name = name

    def is_decode(self):
        return self.name == "decode"

    def is_extend(self, include_draft_extend_v2: bool = False):
        return self.name == "extend"

    def is_idle(self):
        return self.name == "idle"

    def is_target_verify(self):
        return self.name == "target_verify"

    def is_cuda_graph(self):
        return self.name in ("decode", "target_verify", "idle")


class _Req:
    def __init__(self):
        self.is_retracted = False
        self.grammar = None
        self.kv = SimpleNamespace(kv_committed_len=0)
        self.spec_verify_ct = 0
        self.spec_num_correct_drafts = 0
        self.histogram: dict = {}

    def finished(self):
        return False

    def update_spec_correct_drafts_histogram(self, n):
        self.histogram[n] = self.histogram.get(n, 0) + 1


class _TargetHfConfig:
    """The target's HF config as far as verify's bookkeeping reads it (a dense Llama: no mamba state)."""

    architectures = ["LlamaForCausalLM"]
    model_type = "llama"
    dtype = None

    def get_text_config(self):
        return self


def _patch(stack: contextlib.ExitStack, obj, name: str, value) -> None:
    old = getattr(obj, name)
    setattr(obj, name, value)
    stack.callback(setattr, obj, name, old)


@dataclass
class Harness:
    """One EAGLE-3 worker pair made from the upstream classes, with stand-ins below the hooked methods."""

    steps: int = 3
    topk: int = 1
    eager: bool = False
    costs: Costs = field(default_factory=Costs)
    clock: FakeClock = field(default_factory=FakeClock)
    verify_error: Optional[BaseException] = None   # raised by the eagle_sample stand-in once
    accept_plan: Callable[[int, int], list] = None  # (cycle index, bs) -> accept lengths
    cycles_launched: int = 0

    def __post_init__(self):
        self.stack = contextlib.ExitStack()
        if self.accept_plan is None:
            self.accept_plan = lambda i, bs: [1 + (i + r) % (self.steps + 1) for r in range(bs)]
        self._pending_accepts: list = []

    # -- construction ----------------------------------------------------------------------------

    def __enter__(self) -> "Harness":
        from sglang.test.test_utils import published_topology

        self.stack.enter_context(published_topology())
        ew = pkgutil.resolve_name(EW)
        ewc = pkgutil.resolve_name(EWC)
        from sglang.srt.managers.scheduler_components.batch_result_processor import (
            SchedulerBatchResultProcessor,
        )
        from sglang.srt.managers.tp_worker import TpModelWorker
        from sglang.srt.model_executor.model_runner import ModelRunner, ModelRunnerOutput
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        c, clk = self.costs, self.clock
        nd = self.steps + 1 if self.topk == 1 else self.steps * self.topk + 1
        # the device_timer_ctx each runner module calls (the plugin's hook, when installed, is what they hold)
        seg = {m: pkgutil.resolve_name(f"sglang.srt.{m}") for m in (
            "speculative.eagle_draft_cuda_graph_runner", "speculative.eagle_draft_extend_cuda_graph_runner",
            "model_executor.runner.decode_cuda_graph_runner", "model_executor.runner.eager_runner")}

        def segment(module: str, category: str, host_ms: float, device_ms: float) -> None:
            clk.advance(host_ms)
            with seg[module].device_timer_ctx(None, category):
                clk.advance(device_ms)

        # -- module-level helpers the hooked methods call ------------------------------------------
        def prepare_for_draft(draft_input, req_to_token_pool, batch, cuda_graph_runner, draft_runner, topk,
                              num_steps, **kw):
            clk.advance(c.prepare_draft)
            bs = len(batch.reqs)
            fb = SimpleNamespace(
                forward_mode=batch.forward_mode, batch_size=bs, spec_info=draft_input,
                out_cache_loc=torch.zeros(bs * max(num_steps, 1), dtype=torch.int64),
                positions=torch.zeros(bs, dtype=torch.int64), sampling_info=batch.sampling_info,
                input_ids=None, mrope_positions=None, moe_num_token_non_padded=None,
                mark_forward_metadata_ready=lambda: None,
                apply_deprecated_skip_attn_backend_init=lambda flag: None,
            )
            return fb, not self.eager and self.steps > 1, None  # no draft graph when num_steps <= 1

        def build_eagle_verify_input(batch, draft_input, parent_list, top_scores_index, draft_tokens, draft_probs,
                                     **kw):
            clk.advance(c.build_verify)
            bs = len(batch.reqs)
            return SimpleNamespace(is_verify_input=lambda: True, kv_loc_plan=None, draft_token=torch.zeros(bs * nd),
                                   retrieve_next_token=None, retrieve_next_sibling=None)

        def eagle_prepare_for_verify(verify_input, req_to_token_pool, batch, target_worker):
            clk.advance(c.prepare_verify)
            if not batch.forward_mode.is_idle():
                batch.forward_mode = _Mode("target_verify")  # upstream mutates it too
            fb = SimpleNamespace(forward_mode=batch.forward_mode, mark_forward_metadata_ready=lambda: None,
                                 apply_deprecated_skip_attn_backend_init=lambda flag: None)
            return fb, not self.eager

        def eagle_sample(verify_input, batch, logits_output, grammar_mask, **kw):
            clk.advance(c.sample)
            if self.verify_error is not None:
                err, self.verify_error = self.verify_error, None
                raise err
            bs = len(batch.reqs)
            accepts = self.accept_plan(self.cycles_launched - 1, bs)
            self._pending_accepts.append(accepts)
            accept_lens = torch.tensor(accepts, dtype=torch.int32)
            predict = torch.arange(bs * nd, dtype=torch.int64)
            accept_index = torch.full((bs, self.steps + 1), -1, dtype=torch.int64)
            for r in range(bs):
                accept_index[r] = torch.arange(r * nd, r * nd + self.steps + 1)
            for r, a in enumerate(accepts):
                accept_index[r, a:] = -1
            return predict, accept_lens, accept_index.to(torch.int32)

        def prepare_for_draft_extend(draft_extend_input, batch, next_token_ids, num_draft_tokens, draft_runner,
                                     cuda_graph_runner, **kw):
            clk.advance(c.prepare_extend)
            bs = len(batch.reqs)
            return SimpleNamespace(forward_mode=_Mode("draft_extend"), batch_size=bs, spec_info=SimpleNamespace(),
                                   input_ids=torch.zeros(bs * num_draft_tokens, dtype=torch.int64),
                                   apply_deprecated_skip_attn_backend_init=lambda flag: None)

        def fill_bonus_tokens_func(accept_tokens, accept_lens, bonus_tokens, accept_stride, batch_size):
            rows = accept_tokens.reshape(batch_size, accept_stride)
            for r in range(batch_size):
                bonus_tokens[r] = rows[r, int(accept_lens[r]) - 1]

        for name, fn in [("prepare_for_draft", prepare_for_draft),
                         ("build_eagle_verify_input", build_eagle_verify_input),
                         ("prepare_for_draft_extend", prepare_for_draft_extend)]:
            _patch(self.stack, ew, name, fn)
        _patch(self.stack, ewc, "eagle_prepare_for_verify", eagle_prepare_for_verify)
        _patch(self.stack, ewc, "eagle_sample", eagle_sample)
        _patch(self.stack, ewc, "fill_bonus_tokens_func", fill_bonus_tokens_func)  # a Triton kernel upstream

        # -- draft worker: upstream EagleDraftWorker, eager draft runner is an upstream ModelRunner -----
        vocab, hidden = 32, 8
        draft_runner = object.__new__(ModelRunner)

        def draft_forward_raw(forward_batch, pp_proxy_tensors, reinit_attn_backend, split_forward_count):
            bs = forward_batch.batch_size
            draft_extend = isinstance(forward_batch.forward_mode, _Mode) and forward_batch.forward_mode.name == "draft_extend"
            segment("model_executor.runner.eager_runner", "extend" if draft_extend else "decode",
                    c.forward_prep, c.extend_forward if draft_extend else c.draft_forward)
            rows = forward_batch.input_ids.shape[0] if draft_extend else bs
            logits = torch.zeros(rows, vocab)
            logits[:, 3] = 1.0
            out = SimpleNamespace(next_token_logits=logits, hidden_states=torch.zeros(rows, hidden))
            return ModelRunnerOutput(logits_output=out, can_run_graph=False)

        for k, v in dict(forward_pass_id=0, msprobe_debugger=None, is_draft_worker=True, canary_manager=None,
                         enable_elastic_ep=False, eplb_manager=None, _forward_raw=draft_forward_raw,
                         spec_algorithm=SpeculativeAlgorithm.EAGLE3,
                         model_config=SimpleNamespace(hf_config=SimpleNamespace(architectures=["LlamaForCausalLMEagle3"]),
                                                      model_is_mrope=False, spec_hidden_size=hidden,
                                                      dtype=torch.float32)).items():
            setattr(draft_runner, k, v)

        dw = object.__new__(ew.EagleDraftWorker)
        dw.topk, dw.speculative_num_steps, dw.speculative_num_draft_tokens = self.topk, self.steps, nd
        dw.device = "cpu"
        dw.draft_runner = draft_runner
        dw.req_to_token_pool = None
        dw.target_worker = None  # set below
        dw.seed_dsa_topk_from_draft_extend = False
        dw.index_share_for_mtp_iteration = False
        dw.hot_token_id = None
        dw.tree_mask_mode = None
        dw.plan_stream, dw.plan_stream_ctx = None, contextlib.nullcontext()
        dw.parallel_layout = SimpleNamespace(tp_group=None)
        dw.draft_attn_backend = SimpleNamespace(
            init_forward_metadata=lambda fb: clk.advance(c.draft_metadata),
            attn_backends=[None] * max(self.steps, 1))
        dw._topk1_parents_prealloc = torch.zeros(64, 1, dtype=torch.int64)
        dw._topk1_score_indices_prealloc = torch.zeros(64, self.steps + 1, dtype=torch.int64)

        def draft_graph_execute(forward_batch):
            segment("speculative.eagle_draft_cuda_graph_runner", "eagle_draft", c.draft_replay_prep, c.draft_graph)
            bs = forward_batch.batch_size
            return (torch.zeros(bs, 1), torch.zeros(bs, self.steps), torch.zeros(bs, self.steps), None)

        dw.cuda_graph_runner = None if self.eager or self.steps <= 1 else SimpleNamespace(execute=draft_graph_execute)

        def extend_graph_execute(forward_batch, select_index):
            segment("speculative.eagle_draft_extend_cuda_graph_runner", "eagle_draft_extend",
                    c.extend_replay_prep, c.extend_graph)
            bs = forward_batch.batch_size
            logits = torch.zeros(bs, vocab)
            logits[:, 5] = 1.0
            return SimpleNamespace(next_token_logits=logits, hidden_states=torch.zeros(bs, hidden))

        dw.cuda_graph_runner_for_draft_extend = None if self.eager else SimpleNamespace(
            can_run_graph=lambda fb: True, execute=extend_graph_execute)

        # -- target worker: upstream TpModelWorker with a stand-in model_runner ------------------------
        tw = object.__new__(TpModelWorker)

        def target_forward(forward_batch, pp_proxy_tensors=None, **kw):
            if self.eager:
                segment("model_executor.runner.eager_runner", "target_verify", c.forward_prep, c.target_forward)
            else:
                segment("model_executor.runner.decode_cuda_graph_runner", "target_verify", c.verify_replay_prep,
                        c.target_forward)
            out = SimpleNamespace(next_token_logits=torch.zeros(1, vocab), hidden_states=torch.zeros(1, hidden))
            return SimpleNamespace(logits_output=out, can_run_graph=not self.eager, expert_distribution_metrics=None,
                                   routed_experts_output=None, indexer_topk_output=None)

        tw._model_runner = SimpleNamespace(
            forward=target_forward, kv_index_translator=None, watermark_state=None,
            attn_backend=SimpleNamespace(verify_mask=None), model_config=SimpleNamespace(vocab_size=vocab, hf_config=_TargetHfConfig(), is_draft_model=False,
                                      linear_attn_registry_result=None))
        tw.dllm_algorithm = None
        tw.model_config = SimpleNamespace(vocab_size=vocab)
        tw.pp_group = SimpleNamespace(is_last_rank=True)
        tw.enable_overlap, tw.enable_spec = True, True
        dw.target_worker = tw

        # -- the EAGLE-3 worker -----------------------------------------------------------------------
        w = object.__new__(ew.EAGLEWorkerV2)
        w._draft_worker, w._target_worker = dw, tw
        w.adaptive_controller = None
        w.enable_dp_spec_prefill_coordination = False
        w.speculative_num_steps, w.speculative_num_draft_tokens, w.topk = self.steps, nd, self.topk
        w.speculative_algorithm = SpeculativeAlgorithm.EAGLE3
        w.device = "cpu"
        w.req_to_token_pool = None
        w.token_to_kv_pool_allocator = SimpleNamespace(get_kvcache=lambda: SimpleNamespace())
        w.plan_stream, w.plan_stream_ctx = None, contextlib.nullcontext()
        if self.steps == 0:  # adaptive mode's "no draft" (an unhooked method of the worker)
            def trivial_verify_input(batch):
                clk.advance(c.trivial_verify)
                return SimpleNamespace(is_verify_input=lambda: True, kv_loc_plan=None,
                                       draft_token=torch.zeros(len(batch.reqs) * nd))

            w._build_trivial_verify_input = trivial_verify_input
        self.worker, self.draft_worker, self.target_worker = w, dw, tw

        # -- the result processor ------------------------------------------------------------------
        proc = object.__new__(SchedulerBatchResultProcessor)
        object.__setattr__(proc, "metrics_reporter", SimpleNamespace(snapshot_spec_decode_metrics=lambda b, r: None))
        object.__setattr__(proc, "model_worker", w)
        self.processor = proc
        self.published = []
        # the scheduler's future map: upstream's class and method, on its CPU path (no private D2H
        # stream); the gather it makes from the published lengths is the stand-in for the wait
        from sglang.srt.managers.overlap_utils import FutureMap

        fm = object.__new__(FutureMap)
        fm.publish_ready, fm.fwd_prepare_d2h_stream, fm.needs_cpu_seq_lens = None, None, True
        fm.new_seq_lens_buf = _SeqLensBuf(self)
        self.future_map = fm
        #: Called inside each resolve_seq_lens_cpu wait (a test's probe), or None.
        self.during_seq_lens: Optional[Callable[[], None]] = None
        return self

    def __exit__(self, *exc):
        self.stack.close()

    # -- one cycle --------------------------------------------------------------------------------

    def new_batch(self, bs: int = 2, mode: str = "decode"):
        from sglang.srt.speculative.eagle_info import EagleDraftInput

        hidden = 8
        spec = None
        if mode == "decode":
            spec = EagleDraftInput(topk_p=torch.ones(bs, 1), topk_index=torch.full((bs, 1), 3, dtype=torch.int64),
                                   hidden_states=torch.zeros(bs, hidden))
        return SimpleNamespace(
            forward_mode=_Mode(mode), is_extend_in_batch=False, spec_info=spec,
            seq_lens=torch.full((bs,), 10, dtype=torch.int64), reqs=[_Req() for _ in range(bs)],
            sampling_info=SimpleNamespace(is_all_greedy=True), has_grammar=False, return_logprob=False,
            hisparse_coordinator=None, mamba_track_indices=None, req_pool_indices=torch.arange(bs),
            input_ids=None, out_cache_loc=None,
        )

    def launch(self, batch, overlap: bool = True):
        """``Scheduler.run_batch`` for one batch: the worker's forward (overlap mode first resolves the
        batch's host sequence lengths with the real ``FutureMap.resolve_seq_lens_cpu``, then passes
        ``on_publish``)."""
        self.cycles_launched += 1
        self.clock.advance(self.costs.between)
        if overlap:
            if batch.spec_info is not None and batch.spec_info.future_indices is None:
                batch.spec_info.future_indices = batch.req_pool_indices
            type(self.future_map).resolve_seq_lens_cpu(self.future_map, batch)
            return self.worker.forward_batch_generation(batch, on_publish=self._publish)
        return self.worker.forward_batch_generation(batch)  # non-overlap mode: no future-map publish

    def _publish(self, new_seq_lens):
        self.clock.advance(self.costs.publish)
        self.published.append(new_seq_lens)

    def resolve(self, batch, result):
        """The scheduler's result processing for a decode batch, from the ``copy_done`` sync on."""
        return self.processor._resolve_spec_v2_tokens(result, batch)

    def run_overlap(self, batches, on_resolve=None):
        """Launch batch N+1, then resolve batch N (``event_loop_overlap``); returns the resolved token lists."""
        out, last = [], None
        for b in list(batches) + [None]:
            cur = (b, self.launch(b)) if b is not None else None
            if last is not None:
                if on_resolve is not None:
                    on_resolve(last[0], last[1])
                out.append(self.resolve(*last))
            last = cur
        return out
