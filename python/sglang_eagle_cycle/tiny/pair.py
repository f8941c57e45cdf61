"""Make a tiny trained target/EAGLE-3 draft pair in the checkpoint layout SGLang 0.5.23 loads.

    from sglang_eagle_cycle.tiny.pair import PairSpec, make_pair
    summary = make_pair(Path("out"), PairSpec(arch="llama", seed=11))
    summary["draft_top1_agreement"], summary["aux_ablated_top1"]

``OUT/target`` holds ``config.json``, ``model.safetensors``, ``generation_config.json`` and a
byte-level BPE tokenizer; ``OUT/draft`` an EAGLE-3 head (``LlamaForCausalLMEagle3``) trained on the
target's residual stream at the positions its ``eagle_config.eagle_aux_hidden_state_layer_ids``
name under ``convention``: ``output`` (id ``i`` = output of decoder layer ``i`` = position ``i + 1``,
the plugin's contract) or ``input`` (id ``i`` = position ``i``). ``OUT/pair.json`` is the summary.

Everything is deterministic for a seed on one machine and torch build: ``config.json`` and
``model.safetensors`` are byte-identical between runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import UsageError

ARCHES = ("llama", "deepseek_v3")
CONVENTIONS = ("output", "input")
NUM_LAYERS = 8
DEFAULT_IDS = (1, 3, 5)

#: Modules the target is trained on (it learns them nearly by heart: a tiny model trained for
#: two minutes cannot generalise, but it can continue the code it knows without looping).
TRAIN_MODULES = ("textwrap.py",)
#: Modules the held-out prompts are drawn from (never trained on).
HELD_OUT_MODULES = ("bisect.py", "heapq.py")

GEN_TOKENS = 32           # greedy tokens per prompt (agreement and the degeneracy check)
MIN_DISTINCT = 8          # a continuation with fewer distinct tokens is degenerate
HELD_OUT_PROMPTS = 32
#: Prompts the probe scores by default (``probe_prompts`` in eval_prompts.json): 1,024 windows of
#: the held-out modules and more standard-library modules (neither the target nor the draft ever
#: trained on any of them; the tokenizer saw only the held-out ones), 32,768 scored tokens. A draft
#: fed its trained positions one layer late loses only 0.6-1.6 points of agreement on these pairs
#: (seeds 11-13): 1,024 scored tokens left half of such cases undecided; 32,768 decide them (p <= 1e-7).
PROBE_PROMPTS = 1024
PROBE_MODULES = HELD_OUT_MODULES + ("colorsys.py", "fnmatch.py", "shlex.py", "glob.py", "queue.py", "sched.py",
                                    "calendar.py", "difflib.py")
#: What a pair folder holds (an existing one is replaced only with ``force``).
OUTPUTS = ("target", "draft", "pair.json", "eval_prompts.json")
PROMPT_TOKENS = 16


def id_range(convention: str) -> tuple[int, int]:
    """Inclusive range of the ids a pair can be trained on under ``convention``.

    ``output``: ``[0, N-2]`` (positions 1..N-1): read as positions instead, they still name a
    decoder layer's input, and the highest position N stays out, since ids whose maximum is N can
    only be positions (the plugin's inference rule). ``input``: ``[1, N-1]``: read as layer outputs
    instead, they never ask for the embedding (id -1).
    """
    return (0, NUM_LAYERS - 2) if convention == "output" else (1, NUM_LAYERS - 1)


@dataclass(frozen=True)
class PairSpec:
    """What to make. ``target_steps``/``draft_steps`` None: the arch's defaults."""

    arch: str = "llama"
    seed: int = 11
    aux_layer_ids: tuple[int, ...] = DEFAULT_IDS
    convention: str = "output"
    target_steps: int | None = None
    draft_steps: int | None = None

    def __post_init__(self):
        if self.arch not in ARCHES:
            raise UsageError(f"--arch {self.arch!r}: choose one of {', '.join(ARCHES)}")
        if self.convention not in CONVENTIONS:
            raise UsageError(f"--convention {self.convention!r}: choose output or input")
        ids = list(self.aux_layer_ids)
        if not ids:
            raise UsageError("--aux-layer-ids: give at least one layer id")
        if ids != sorted(set(ids)):
            raise UsageError(f"--aux-layer-ids {_ids(ids)}: ids must be ascending and distinct")
        lo, hi = id_range(self.convention)
        bad = [i for i in ids if not lo <= i <= hi]
        if bad:
            raise UsageError(f"--aux-layer-ids {_ids(ids)}: with --convention {self.convention} each id must "
                             f"lie in [{lo}, {hi}] for the {NUM_LAYERS}-layer target, so that the ids read "
                             f"the other way still name a position a server can capture; {_ids(bad)} cannot")
        for name in ("target_steps", "draft_steps"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be at least 1")

    @property
    def positions(self) -> list[int]:
        """Residual-stream positions the draft was trained on."""
        shift = 1 if self.convention == "output" else 0
        return [i + shift for i in self.aux_layer_ids]


@dataclass(frozen=True)
class Budget:
    """Training sizes of one arch (steps x batch x sequence length)."""

    target_steps: int
    target_batch: int = 8
    target_seq: int = 64
    target_lr: float = 5e-3
    draft_steps: int = 400
    draft_batch: int = 16
    draft_lr: float = 3e-3
    draft_windows: int = 256
    # Weight of the wrong-wiring term in the draft's loss (train.train_draft's ``decoys``).
    decoy_weight: float = 0.3


BUDGETS = {
    # Learning rate 2e-3: at 5e-3 the target ended at 2.9-3.1 nats/token with its middle layers
    # nearly idle (neighbouring positions' centred states at cosine 0.97-0.99), so a draft fed its
    # positions one layer late lost nothing on some seeds (seed 13: +0.2 points). At 2e-3 it ends at
    # 0.7-1.6 and a one-layer-late reading costs 0.8-1.3 points on every seed tried (11-16, p <= 1e-7
    # over the probe's 32,768 tokens). 320 draft steps keep the pair near a minute on 2 cores.
    # That margin did not carry to another CPU (2026-12-06, AMD EPYC with AVX2, the same torch
    # 2.14.1): the same seed's draft did 1.1 points better one layer late (42.3% against 43.4%), and
    # the probe's tests failed. Hence the wrong-wiring term in the draft's loss (Budget.decoy_weight).
    "llama": Budget(target_steps=400, draft_steps=320, target_lr=2e-3),
    # This target learns its text about twice as fast per step as the Llama one (measured: loss
    # 1.2 at step 200 against 4.2), and each step costs more (routed experts, MLA).
    "deepseek_v3": Budget(target_steps=250),
}


def _ids(ids) -> str:
    return ",".join(str(i) for i in ids)


#: The modules whose source decides a pair's files and summary (cache.py, which only stores pairs, does not).
TRAINER_SOURCES = ("agreement.py", "corpus.py", "load.py", "models.py", "pair.py", "train.py")


def trainer_digest() -> str:
    """Hash of the trainer's own source (:data:`TRAINER_SOURCES`), torch and Python versions: a
    changed trainer never validates files an older one made."""
    import torch

    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for name in TRAINER_SOURCES:
        h.update(name.encode())
        h.update((here / name).read_bytes())
    h.update(torch.__version__.encode())
    h.update(sys.version.split()[0].encode())
    return h.hexdigest()[:16]


# ----------------------------------------------------------------------------- building
def _build_target(arch: str, vocab: int):
    from .models import DeepseekShape, LlamaShape, TinyDeepseekV3, TinyLlama

    if arch == "llama":
        return TinyLlama(LlamaShape(vocab=vocab, layers=NUM_LAYERS))
    return TinyDeepseekV3(DeepseekShape(vocab=vocab, layers=NUM_LAYERS))


def _text_and_tokens(log):
    import torch

    from . import corpus

    texts = [corpus.module_text(m) for m in (TRAIN_MODULES, HELD_OUT_MODULES)]
    tok = corpus.train_tokenizer("\n".join(texts), corpus.VOCAB)
    data, held = (torch.tensor(tok.encode(t).ids, dtype=torch.long) for t in texts)
    log(f"text: {data.numel()} training tokens ({', '.join(TRAIN_MODULES)}), "
        f"{held.numel()} held-out tokens ({', '.join(HELD_OUT_MODULES)}); vocab {corpus.VOCAB}")
    return tok, data, held


def _held_out_prompts(held, count: int = HELD_OUT_PROMPTS):
    """``[count, PROMPT_TOKENS]`` windows spread evenly over the 1-D token tensor ``held``."""
    import torch

    step = (held.numel() - PROMPT_TOKENS) // count
    starts = torch.arange(count) * step
    return held[starts.unsqueeze(1) + torch.arange(PROMPT_TOKENS)]


def _probe_prompts(tok) -> list[list[int]]:
    """:data:`PROBE_PROMPTS` windows of :data:`PROMPT_TOKENS` ids spread over :data:`PROBE_MODULES`."""
    import torch

    from . import corpus

    ids = torch.tensor(tok.encode(corpus.module_text(PROBE_MODULES)).ids, dtype=torch.long)
    return _held_out_prompts(ids, PROBE_PROMPTS).tolist()


def train_target_model(spec: PairSpec, log):
    """(model, tokenizer, training tokens, held-out tokens, target seconds)."""
    import torch

    from .models import init_weights
    from .train import Schedule, deterministic, train_target

    t0 = time.monotonic()
    tok, data, held = _text_and_tokens(log)
    budget = BUDGETS[spec.arch]
    steps = spec.target_steps or budget.target_steps
    with deterministic():
        torch.manual_seed(spec.seed)
        model = _build_target(spec.arch, tok.get_vocab_size())
        init_weights(model)
        gen = torch.Generator().manual_seed(spec.seed * 1000 + 1)
        sched = Schedule(steps, budget.target_batch, budget.target_seq, budget.target_lr)
        losses = train_target(model, data, sched, gen, log=log)
    return model, tok, (data, held), losses, time.monotonic() - t0


def target_key(spec: PairSpec) -> str:
    """What the target depends on: arch, seed, steps and the trainer (not the draft's ids)."""
    steps = spec.target_steps or BUDGETS[spec.arch].target_steps
    return f"{spec.arch}-seed{spec.seed}-steps{steps}-{trainer_digest()}"


def reuse_target(spec: PairSpec, pair: Path, log):
    """The target of an existing pair folder made for the same :func:`target_key` (no training).

    Raises UsageError when ``pair`` was made for another target key.
    """
    from .load import load_target

    try:
        made = json.loads((Path(pair) / "pair.json").read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"{pair}: no readable pair.json ({exc})") from None
    if made.get("target_key") != target_key(spec):
        raise UsageError(f"{pair}: its target was made for {made.get('target_key')}, "
                         f"not {target_key(spec)}")
    tok, data, held = _text_and_tokens(log)
    saved = (Path(pair) / "target" / "tokenizer.json").read_text()
    if saved != tok.to_str(pretty=False):
        raise UsageError(f"{pair}: its tokenizer differs from this machine's (another standard library?)")
    log(f"target reused from {pair}")
    return load_target(Path(pair) / "target"), tok, (data, held), [made["target_final_loss"]], 0.0


def train_draft_model(spec: PairSpec, model, data, log):
    """(head, embed, draft losses, draft vocab cover)."""
    import torch

    from .models import Eagle3Head, Eagle3Shape, init_weights
    from .train import Schedule, aux_input, deterministic, near_wirings, target_features, train_draft, windows

    budget = BUDGETS[spec.arch]
    steps = spec.draft_steps or budget.draft_steps
    with deterministic():
        gen = torch.Generator().manual_seed(spec.seed * 1000 + 2)
        length = budget.target_seq + 1
        starts = torch.randint(0, data.numel() - length, (budget.draft_windows,), generator=gen)
        tokens = windows(data, starts, length)
        states, greedy = target_features(model, tokens)
        aux = aux_input(states, spec.positions)
        decoys = [aux_input(states, wrong) for wrong in near_wirings(spec.positions, model.num_layers)]
        del states
        vocab = model.lm_head.out_features
        draft_vocab = vocab // 2
        # Draft vocabulary: the target's most frequent greedy tokens (ties: lower id first).
        counts = torch.bincount(greedy.flatten(), minlength=vocab)
        order = sorted(range(vocab), key=lambda i: (-int(counts[i]), i))[:draft_vocab]
        draft_to_target = torch.tensor(sorted(order), dtype=torch.long)
        target_to_draft = torch.full((vocab,), -1, dtype=torch.long)
        target_to_draft[draft_to_target] = torch.arange(draft_vocab)
        cover = counts[draft_to_target].sum().item() / counts.sum().item()
        hidden = model.lm_head.in_features
        shape = Eagle3Shape(vocab=vocab, draft_vocab=draft_vocab, hidden=hidden, target_hidden=hidden,
                            num_aux=len(spec.positions))
        torch.manual_seed(spec.seed * 1000 + 3)
        head = Eagle3Head(shape, draft_to_target)
        init_weights(head)
        embed = model.model.embed_tokens
        sched = Schedule(steps, budget.draft_batch, budget.target_seq, budget.draft_lr)
        losses = train_draft(head, embed, tokens, aux, greedy, target_to_draft, sched, gen, log=log,
                             decoys=decoys, decoy_weight=budget.decoy_weight)
    return head, embed, losses, cover


def evaluate(spec: PairSpec, model, head, embed, tok, held) -> dict:
    """Agreement, its baselines and the degeneracy check (see :mod:`.agreement`)."""
    import torch

    from . import agreement as ag
    from .corpus import PROMPTS
    from .train import deterministic

    with deterministic(), torch.no_grad():
        prompts = _held_out_prompts(held)
        sc = ag.score_features(model, prompts, GEN_TOKENS)
        pos = spec.positions
        by_wiring = {}
        for by in (-1, 1):
            moved = ag.shifted(pos, by, model.num_layers)
            by_wiring[f"{by:+d}"] = None if moved is None else round(ag.agreement(head, embed, sc, moved), 4)
        distinct = ag.distinct_counts(model, [tok.encode(p).ids for p in PROMPTS], GEN_TOKENS)
        return {
            "draft_top1_agreement": round(ag.agreement(head, embed, sc, pos), 4),
            "aux_ablated_top1": round(ag.agreement(head, embed, sc, None), 4),
            "majority_top1": round(ag.majority(sc), 4),
            "agreement_by_wiring": by_wiring,
            "scored_positions": int(sc.mask.sum().item()),
            "greedy_distinct_tokens": distinct,
            "nondegenerate": all(d >= MIN_DISTINCT for d in distinct),
            "_prompts": prompts.tolist(),
        }


# ----------------------------------------------------------------------------- writing
def _json_bytes(obj) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode()


def _save_tensors(path: Path, tensors: dict) -> None:
    from safetensors.torch import save_file

    save_file({k: v.detach().contiguous() for k, v in sorted(tensors.items())}, str(path),
              metadata={"format": "pt"})


def _write_target(d: Path, model, tok) -> None:
    from .corpus import EOS, tokenizer_files

    d.mkdir(parents=True)
    eos = tok.token_to_id(EOS)
    cfg = dict(model.hf_config(), bos_token_id=eos, eos_token_id=eos)
    (d / "config.json").write_bytes(_json_bytes(cfg))
    (d / "generation_config.json").write_bytes(_json_bytes(
        {"bos_token_id": eos, "eos_token_id": eos, "do_sample": False}))
    for name, text in tokenizer_files(tok, cfg["max_position_embeddings"]).items():
        (d / name).write_text(text)
    _save_tensors(d / "model.safetensors", model.state_dict())


def _write_draft(d: Path, head, spec: PairSpec) -> None:
    d.mkdir(parents=True)
    (d / "config.json").write_bytes(_json_bytes(head.hf_config(list(spec.aux_layer_ids))))
    _save_tensors(d / "model.safetensors", head.checkpoint())


def _prepare_out(out: Path, force: bool) -> None:
    for sub in OUTPUTS:
        p = out / sub
        if p.exists() or p.is_symlink():
            if not force:
                raise UsageError(f"{p} exists; choose another OUT or pass --force to replace "
                                 "target/, draft/, pair.json and eval_prompts.json there")
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} exists and is not a directory")


def make_pair(out: Path, spec: PairSpec, *, force: bool = False, log=None, target_from: Path | None = None) -> dict:
    """Train and write a pair under ``out``; return the summary (also written to ``pair.json``).

    ``target_from``: a pair folder whose target was made for the same arch, seed, target steps and
    trainer (:func:`target_key`); its target is reused (copied byte for byte) and only the draft
    is trained.

    Raises UsageError when ``out`` already holds a pair (unless ``force``) or cannot be written.
    Written through a temporary folder beside ``out`` and renamed into place, so a failed or
    interrupted run leaves no half-written pair.
    """
    log = log or (lambda msg: None)
    out = Path(out)
    _prepare_out(out, force)
    t0 = time.monotonic()
    if target_from is not None:
        model, tok, (data, held), t_losses, t_target = reuse_target(spec, target_from, log)
    else:
        model, tok, (data, held), t_losses, t_target = train_target_model(spec, log)
    head, embed, d_losses, cover = train_draft_model(spec, model, data, log)
    metrics = evaluate(spec, model, head, embed, tok, held)
    eval_prompts = {"held_out_prompts": metrics.pop("_prompts"), "gen_tokens": GEN_TOKENS,
                    "probe_prompts": _probe_prompts(tok)}
    summary = {
        "target": str((out / "target").resolve()), "draft": str((out / "draft").resolve()),
        "arch": spec.arch, "seed": spec.seed, "aux_layer_ids": list(spec.aux_layer_ids),
        "convention": spec.convention, "positions": spec.positions, "num_layers": NUM_LAYERS,
        "target_steps": spec.target_steps or BUDGETS[spec.arch].target_steps,
        "draft_steps": spec.draft_steps or BUDGETS[spec.arch].draft_steps,
        "target_final_loss": round(sum(t_losses[-10:]) / len(t_losses[-10:]), 4),
        "draft_final_loss": round(sum(d_losses[-10:]) / len(d_losses[-10:]), 4),
        "draft_vocab_cover": round(cover, 4),
        **metrics,
        "trainer": trainer_digest(),
        "target_key": target_key(spec),
        "target_seconds": round(t_target, 1),
    }
    try:
        out.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tiny-pair-", dir=out))
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc.strerror or exc}") from None
    try:
        if target_from is not None:
            shutil.copytree(Path(target_from) / "target", tmp / "target")
        else:
            _write_target(tmp / "target", model, tok)
        _write_draft(tmp / "draft", head, spec)
        summary["seconds"] = round(time.monotonic() - t0, 1)
        (tmp / "pair.json").write_bytes(_json_bytes(summary))
        (tmp / "eval_prompts.json").write_bytes(_json_bytes(eval_prompts))
        for sub in OUTPUTS:
            dest = out / sub
            if force and (dest.exists() or dest.is_symlink()):
                if dest.is_dir() and not dest.is_symlink():
                    shutil.rmtree(dest)
                else:
                    dest.unlink()
            os.replace(tmp / sub, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary


def spec_dict(spec: PairSpec) -> dict:
    return asdict(spec)
