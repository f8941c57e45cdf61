"""Ask an EAGLE-3 draft's own weights which target residual-stream positions it was trained on.

The target runs under Hugging Face ``transformers`` over a few prompts: its greedy continuation
and its residual stream at every position (README, "Aux-layer wiring": position ``j < N`` is the
input of decoder layer ``j``, i.e. ``hidden_states[j]``; position ``N`` is the last decoder layer's
output *before* the final norm, taken with a forward hook as SGLang captures it). The draft
(:class:`~.tiny.models.Eagle3Head`) is then teacher-forced with each candidate set of positions,
with agreement defined as in :mod:`.tiny.agreement`, and the candidates are compared pairwise on
the same scored tokens (exact McNemar test).

    from sglang_eagle_cycle.wiring.probe import probe
    result = probe("pair/target", "pair/draft")     # dict, as ``eagle-cycle probe --json`` prints

Raises :class:`~.errors.UsageError` for unusable input (missing files, an unreadable checkpoint,
a draft without ``fc``, shapes that cannot be fed, a head with more than one decoder layer, a target
checkpoint holding more or fewer decoder layers than its config declares).
The head variants SGLang 0.5.23 reads (``norm_before_fc``, ``fc_norm``/``use_aux_norm``,
``norm_output``, ``d2t``) are honoured as it honours them (:class:`HeadVariant`).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import tempfile
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError

#: significance level of every comparison the verdict rests on
ALPHA = 0.05
#: least gain in top-1 agreement over the draft with its aux states zeroed that counts as "trained
#: on this target" (besides p <= ALPHA): a draft trained on another target picks up a little from
#: any states (measured: a tiny DeepSeek-V3 draft on the tiny Llama target, +0.6 points at p = 0.01
#: over 8,192 tokens), while drafts fed the states they were trained on gain 21-31 points
MIN_AUX_GAIN = 0.02
DEFAULT_TOKENS = 32
#: most prompts (of one length) run through the target at once
BATCH = 256
#: ... and at most this many bytes of float32 hidden states per batch (all N + 1 positions, which
#: ``output_hidden_states`` returns): 12 prompts of 48 tokens for a 61-layer, 7168-wide target
BATCH_STATE_BYTES = 1 << 30
BUNDLED_PROMPTS = Path(__file__).resolve().parent.parent / "data" / "prompts.jsonl"   # the package's data/
ENV_CONVENTION = "SGLANG_EAGLE_CYCLE_AUX_CONVENTION"
ENV_ALLOW_EMBEDDING = "SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING"
ENV_IDS = "SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS"


# ----------------------------------------------------------------------------- prompts
@dataclass
class Prompts:
    """Prompt token ids (one list per prompt), the continuation length and where they came from."""

    ids: list[list[int]]
    tokens: int
    source: str
    #: where each prompt came from, for messages: ``FILE:LINE`` or ``FILE probe_prompts[i]``
    where: list[str] = field(default_factory=list)

    def place(self, i: int) -> str:
        return self.where[i] if i < len(self.where) else self.source


def _tokenizer(target_dir: Path):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(target_dir))
    except Exception as exc:  # noqa: BLE001 - any loader failure is unusable input
        msg = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"{target_dir}: cannot load the target's tokenizer ({msg})") from None


def read_prompt_texts(path: Path) -> list[str]:
    """The ``prompt`` strings of a JSONL file, one ``{"prompt": ...}`` object a line."""
    return [text for _, text in read_prompt_lines(path)]


def read_prompt_lines(path: Path) -> list[tuple[int, str]]:
    """``(line number, prompt)`` for each ``{"prompt": ...}`` line of a JSONL file (blank lines skipped).

    Raises:
        UsageError: one line naming the file (and line): unreadable, not UTF-8, invalid JSON, no
            non-empty string ``prompt``, a prompt that is no text (a lone surrogate such as ``\\ud800``,
            which JSON's escapes can write but no tokenizer takes), or no prompt at all.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such prompts file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    texts = []
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise UsageError(f"{path}:{no}: invalid JSON ({str(exc).splitlines()[0][:100]})") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("prompt"), str) or not obj["prompt"]:
            raise UsageError(f'{path}:{no}: expected an object with a non-empty string "prompt"')
        text = obj["prompt"]
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:   # a \ud800 escape: valid JSON, no text
            bad = text[exc.start]
            raise UsageError(f'{path}:{no}: "prompt" holds a lone surrogate (\\u{ord(bad):04x} at character '
                             f"{exc.start}), which is no text and no tokenizer takes; write the character itself "
                             "or its surrogate pair") from None
        texts.append((no, text))
    if not texts:
        raise UsageError(f"{path}: no prompts")
    return texts


def _whole(value, what: str) -> int:
    """``value`` when it is a JSON integer (not a bool, not a float such as 2.5); else ValueError."""
    from .config import _is_int

    if not _is_int(value):
        raise ValueError(f"{what} {value!r} is not an integer")
    return value


def load_prompts(target_dir: Path, prompts_file: Path | None, tokens: int | None) -> Prompts:
    """``--prompts FILE``; else the tiny pair's held-out prompts (``eval_prompts.json`` beside the
    target folder: its ``probe_prompts``, 1,024 of them, or in a pair made before those existed its 32
    ``held_out_prompts``); else the bundled ``data/prompts.jsonl``. ``tokens`` None: the pair's
    ``gen_tokens``, else :data:`DEFAULT_TOKENS`."""
    eval_file = Path(target_dir).parent / "eval_prompts.json"
    if prompts_file is None and eval_file.is_file():
        try:
            data = json.loads(eval_file.read_text())
            key = "probe_prompts" if "probe_prompts" in data else "held_out_prompts"
            ids = [[_whole(t, "a token id") for t in p] for p in data[key]]
            # the file's own count: --tokens, when given, replaces it and is checked by argparse
            gen = _whole(data.get("gen_tokens", DEFAULT_TOKENS), "gen_tokens") if tokens is None else tokens
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"{eval_file}: not a tiny pair's prompt file ({exc})") from None
        if tokens is None and gen < 1:
            raise UsageError(f"{eval_file}: not a tiny pair's prompt file (gen_tokens {gen} is not >= 1)")
        if not ids or not all(ids):
            raise UsageError(f"{eval_file}: no prompts")
        return Prompts(ids, gen, str(eval_file),
                       [f"{eval_file} {key}[{i}]" for i in range(len(ids))])
    path = Path(prompts_file) if prompts_file is not None else BUNDLED_PROMPTS
    lines = read_prompt_lines(path)
    tok = _tokenizer(target_dir)
    ids = []
    for no, text in lines:
        try:
            # verbose=False: no "longer than the maximum" warning line; check_context says it in one
            ids.append(list(tok(text, verbose=False)["input_ids"]))
        except Exception as exc:  # noqa: BLE001 - a prompt the tokenizer refuses is unusable input
            raise UsageError(f"{path}:{no}: the target's tokenizer refuses this prompt ({_short_exc(exc)})") from None
        if not ids[-1]:
            raise UsageError(f"{path}:{no}: the prompt tokenizes to no tokens")
    return Prompts(ids, DEFAULT_TOKENS if tokens is None else tokens, str(path), [f"{path}:{no}" for no, _ in lines])


def check_context(prompts: Prompts, target_cfg: dict, target_json: Path | None = None) -> None:
    """Refuse prompts that cannot fit the target's context: the longest prompt plus ``prompts.tokens``
    generated tokens must not exceed its ``max_position_embeddings`` (read where :func:`find_field`
    looks; nothing is checked without one). ``transformers`` would run on past it, extrapolating RoPE
    (or running out of memory: attention over a 200k-token prompt), for minutes or until killed.

    Raises:
        UsageError: one line naming the prompt (``FILE:LINE``), its length, ``--tokens`` and the limit.
    """
    from . import find_field

    found = find_field(target_cfg, "max_position_embeddings")
    if found is None or found[0] < 1:
        return
    limit, key = found
    i = max(range(len(prompts.ids)), key=lambda k: len(prompts.ids[k]))
    n = len(prompts.ids[i])
    if n + prompts.tokens <= limit:
        return
    where = f"{target_json}: {key}" if target_json is not None else f"the target's {key}"
    if n < limit:
        fix = f"use --tokens {limit - n} or fewer, or a shorter prompt"
    elif prompts.tokens < limit:
        fix = f"shorten it to {limit - prompts.tokens} tokens or fewer"
    else:
        fix = "shorten it and lower --tokens"
    raise UsageError(f"{prompts.place(i)}: a prompt of {n} tokens plus {prompts.tokens} generated (--tokens) is "
                     f"{n + prompts.tokens} tokens, more than the target's context of {limit} ({where}): {fix}")


# ----------------------------------------------------------------------------- target
def _short_exc(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0][:200] if text else type(exc).__name__)


def load_target(target_dir: Path, device: str = "cpu", dtype: str = "float32", max_memory: str | None = None):
    """``AutoModelForCausalLM`` from ``target_dir``, eval mode: one copy, on ``device``, or with
    accelerate's CPU/disk offloading when ``max_memory`` is given (CPU only)."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # the probe's own bar is the one on stderr
    torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]
    kwargs: dict = {"dtype": torch_dtype}
    offload = None
    replay = lambda: None  # noqa: E731 - nothing held off unless an offload folder is made
    if max_memory is not None:
        if device != "cpu":
            raise UsageError("--max-memory offloads to CPU memory and disk: use it with --device cpu")
        try:
            import accelerate  # noqa: F401
        except ImportError:
            raise UsageError("--max-memory needs the 'accelerate' package (pip install accelerate)") from None
        from ..sigterm import deferred

        with deferred() as replay:   # a SIGTERM right after the mkdir waits for the try below
            offload = tempfile.mkdtemp(prefix="eagle-cycle-probe-offload-")
            kwargs.update(device_map="auto", max_memory={"cpu": max_memory}, offload_folder=offload)
    try:
        replay()
        model = AutoModelForCausalLM.from_pretrained(str(target_dir), **kwargs)
        if offload is not None:
            # the offloaded weights (as large as the part of the target that did not fit) go with
            # the model, or at the latest when the process exits
            weakref.finalize(model, shutil.rmtree, offload, ignore_errors=True)
    except BaseException as exc:  # noqa: BLE001 - any loader failure is unusable input
        if offload is not None:  # a failed or interrupted (SIGTERM, Ctrl-C) load leaves no folder
            shutil.rmtree(offload, ignore_errors=True)
        if not isinstance(exc, Exception):
            raise
        raise UsageError(f"{target_dir}: cannot load the target with transformers ({_short_exc(exc)})") from None
    if max_memory is None:
        model = model.to(device)
    return model.eval()


def decoder_layers(model):
    """The target's decoder layer list (``model.model.layers`` for the usual layout)."""
    for getter in (lambda m: m.get_decoder().layers, lambda m: m.model.layers):
        try:
            layers = getter(model)
        except AttributeError:
            continue
        if len(layers):
            return layers
    raise UsageError(f"{type(model).__name__}: cannot find the decoder layers")


def _dev(model):
    """Where the target's inputs go: the embedding's device (CPU under offloading)."""
    dev = model.get_input_embeddings().weight.device
    return "cpu" if dev.type == "meta" else dev


def batch_size(num_layers: int, hidden: int, length: int) -> int:
    """Prompts per target batch for sequences of ``length`` tokens: 1 to :data:`BATCH`, keeping the
    float32 states of every position under :data:`BATCH_STATE_BYTES`."""
    per_prompt = (num_layers + 1) * length * hidden * 4
    return max(1, min(BATCH, BATCH_STATE_BYTES // max(1, per_prompt)))


def target_forward(model, ids, keep: list[int] | None = None):
    """One forward over ``ids`` ``[B, L]``: ``(states, logits)``.

    ``states`` is float32 on the CPU, ``[N + 1, B, L, h]``, or with ``keep`` only those positions,
    ascending: ``[len(set(keep)), B, L, h]``. Position ``j < N`` is ``hidden_states[j]``, position
    ``N`` the last decoder layer's output before the final norm (forward hook). ``logits``
    ``[B, L, vocab]`` float32.
    """
    import torch

    layers = decoder_layers(model)
    n = len(layers)
    caught = {}

    def hook(_module, _inputs, output):
        caught["last"] = output[0] if isinstance(output, (tuple, list)) else output

    handle = layers[-1].register_forward_hook(hook)
    try:
        with torch.no_grad():
            out = model(input_ids=ids.to(_dev(model)), output_hidden_states=True, use_cache=False)
    finally:
        handle.remove()
    hs = out.hidden_states
    if hs is None or len(hs) != n + 1 or "last" not in caught:
        raise UsageError(f"{type(model).__name__}: returned {None if hs is None else len(hs)} hidden states "
                         f"for {n} decoder layers (expected {n + 1})")
    rows = range(n + 1) if keep is None else sorted(set(keep))
    states = torch.stack([(caught["last"] if j == n else hs[j]).detach().float().cpu() for j in rows])
    return states, out.logits.detach().float().cpu()


def greedy_continue(model, prompts, n: int):
    """``[B, P]`` prompts + ``n`` greedy tokens each -> ``[B, P + n]`` on the CPU (KV cache;
    end-of-sequence tokens do not stop it)."""
    import torch

    dev = _dev(model)
    seq = prompts.cpu()
    with torch.no_grad():
        out = model(input_ids=seq.to(dev), use_cache=True)
        for k in range(n):
            nxt = out.logits[:, -1].argmax(-1, keepdim=True).cpu()
            seq = torch.cat([seq, nxt], dim=1)
            if k + 1 < n:
                out = model(input_ids=nxt.to(dev), past_key_values=out.past_key_values, use_cache=True)
    return seq


# ----------------------------------------------------------------------------- draft
#: legacy checkpoint names SGLang 0.5.23's ``LlamaForCausalLMEagle3.load_weights`` renames
#: (substring replacement, in this order)
_LEGACY_NAMES = (("midlayer", "layers.0"), ("aux_norm_low", "fc_norm.0"), ("aux_norm_mid", "fc_norm.1"),
                 ("aux_norm_high", "fc_norm.2"))


def _header_only(path: Path) -> bool:
    """True when ``path`` holds a readable safetensors header and nothing after it (a file
    ``safetensors_header.write_header_only`` makes, as the bundled example drafts are)."""
    from ..safetensors_header import read_header

    try:
        header = read_header(path)
        with open(path, "rb") as fh:
            n = int.from_bytes(fh.read(8), "little")
        return bool(header) and path.stat().st_size == 8 + n
    except (UsageError, OSError, ValueError):
        return False


def _read_pytorch_tensors(draft_dir: Path) -> dict:
    """Every tensor of the PyTorch files SGLang's loader falls back to without safetensors
    (:func:`~sglang_eagle_cycle.safetensors_header.pytorch_files`), loaded on the CPU with
    ``weights_only=True`` (:func:`~sglang_eagle_cycle.safetensors_header.load_pytorch_file`). Raises
    :class:`UsageError` where there are none, one is unusable, or one holds tensors saved without their
    data (``meta`` tensors: shapes enough for ``eagle-cycle wiring``, no weights to probe)."""
    from ..safetensors_header import load_pytorch_file, pytorch_files

    files = pytorch_files(draft_dir)
    if not files:
        raise UsageError(f"{draft_dir}: no checkpoint (no *.safetensors, *.bin nor *.pt file)")
    tensors = {}
    for f in files:
        part = load_pytorch_file(f, meta=False)
        if any(t.is_meta for t in part.values()):
            raise UsageError(f"{f}: tensors saved without their data (on the meta device; enough for `eagle-cycle "
                             "wiring`, not for the probe, which needs the draft's weights)")
        tensors.update(part)
    return tensors


def _read_draft_tensors(draft_dir: Path) -> dict:
    from safetensors.torch import load_file

    from ..safetensors_header import matching

    files = matching(draft_dir, "*.safetensors")   # as SGLang's glob finds them (no ._ AppleDouble file)
    tensors = {}
    if not files:
        tensors = _read_pytorch_tensors(draft_dir)
    for f in files:
        try:
            part = load_file(str(f))
        except Exception as exc:  # noqa: BLE001 - a damaged file is unusable input
            if _header_only(f):
                raise UsageError(f"{f}: a safetensors header without tensor data (enough for `eagle-cycle "
                                 "wiring`, not for the probe, which needs the draft's weights)") from None
            raise UsageError(f"{f}: unreadable safetensors ({_short_exc(exc)})") from None
        tensors.update(part)
    out = {}
    for name, t in tensors.items():
        for old, new in _LEGACY_NAMES:
            name = name.replace(old, new)
        # as LlamaForCausalLMEagle3.load_weights: any name containing d2t is the d2t (module.d2t of a
        # DistributedDataParallel save too), any containing t2d is skipped
        if "d2t" in name:
            name = "d2t"
        elif "t2d" in name:
            continue
        if name.startswith("model."):
            name = name[len("model."):]
        out[name] = t
    return out


@dataclass(frozen=True)
class HeadVariant:
    """The head options SGLang 0.5.23's ``LlamaForCausalLMEagle3`` reads from the draft's config.

    Attributes:
        norm_before_fc: one RMSNorm over the concatenated aux states ``[num_aux * target_hidden]``
            before ``fc`` (weight ``input_norm.weight``); read from ``eagle_config.norm_before_fc``,
            else the top-level ``norm_before_fc``.
        fc_norm: one RMSNorm per aux state ``[target_hidden]`` before ``fc`` (weights
            ``fc_norm.{i}.weight``, legacy names ``aux_norm_low/mid/high``), applied after
            ``norm_before_fc`` when both are set; read from the top-level ``fc_norm`` or the legacy
            ``use_aux_norm`` (SGLang does not look in ``eagle_config`` for it).
        norm_output: the state handed to the *next* draft step is the normed one; it does not change
            the first draft token's logits, which are all the probe scores.
    """

    norm_before_fc: bool = False
    fc_norm: bool = False
    norm_output: bool = False

    @classmethod
    def from_config(cls, cfg: dict) -> "HeadVariant":
        nested = cfg.get("eagle_config") if isinstance(cfg.get("eagle_config"), dict) else {}
        return cls(norm_before_fc=bool(nested.get("norm_before_fc", cfg.get("norm_before_fc", False))),
                   fc_norm=bool(cfg.get("fc_norm") or cfg.get("use_aux_norm", False)),
                   norm_output=bool(cfg.get("norm_output", False)))

    def names(self) -> list[str]:
        return [k for k in ("norm_before_fc", "fc_norm", "norm_output") if getattr(self, k)]


class AuxNorms:
    """The pre-``fc`` normalisation of a :class:`HeadVariant` (identity for a plain head).

    ``__call__(aux)``: ``aux`` ``[..., num_aux * target_hidden]`` (float) -> same shape, RMS-normed
    as a whole (``norm_before_fc``) and then per aux state (``fc_norm``), each with
    :class:`~sglang_eagle_cycle.tiny.models.RMSNorm` (``x / sqrt(mean(x^2) + eps) * weight``, the
    float32 arithmetic of SGLang's ``RMSNorm`` on CPU).
    """

    def __init__(self, eps: float, num_aux: int, whole=None, per_aux=None):
        from ..tiny.models import RMSNorm

        def norm(weight):
            n = RMSNorm(weight.numel(), eps)
            n.weight.data.copy_(weight)
            return n.requires_grad_(False)

        self.num_aux = num_aux
        self.whole = None if whole is None else norm(whole)
        self.per_aux = None if per_aux is None else [norm(w) for w in per_aux]

    def __call__(self, aux):
        import torch

        if self.whole is not None:
            aux = self.whole.to(aux.device)(aux)
        if self.per_aux is not None:
            chunks = aux.chunk(self.num_aux, dim=-1)
            aux = torch.cat([n.to(aux.device)(c) for c, n in zip(chunks, self.per_aux)], dim=-1)
        return aux

    @property
    def identity(self) -> bool:
        return self.whole is None and self.per_aux is None


def _variant_norms(draft_dir: Path, variant: HeadVariant, tensors: dict, num_aux: int, th: int, eps: float,
                   notes: list[str]) -> AuxNorms:
    """Pops the pre-``fc`` norm weights from ``tensors``; a weight SGLang would not read is dropped
    with a note, a weight it would read but the checkpoint lacks stays at SGLang's initial ones."""
    import torch

    whole = tensors.pop("input_norm.weight", None)
    per = {k: tensors.pop(k) for k in sorted(tensors) if k.startswith("fc_norm.")}
    if whole is not None and not variant.norm_before_fc:
        notes.append("input_norm.weight ignored: norm_before_fc is not set (SGLang 0.5.23 does not load it)")
        whole = None
    elif variant.norm_before_fc:
        if whole is None:
            notes.append("norm_before_fc set but the checkpoint has no input_norm.weight: ones, as SGLang leaves it")
            whole = torch.ones(num_aux * th)
        if tuple(whole.shape) != (num_aux * th,):
            raise UsageError(f"{draft_dir}: input_norm.weight has shape {list(whole.shape)}, expected "
                             f"[{num_aux * th}] (num_aux {num_aux} x target hidden {th})")
    per_aux = None
    if per and not variant.fc_norm:
        notes.append(f"{', '.join(per)} ignored: fc_norm / use_aux_norm is not set (SGLang 0.5.23 does not load them)")
    elif variant.fc_norm:
        per_aux = []
        for i in range(num_aux):
            w = per.pop(f"fc_norm.{i}.weight", None)
            if w is None:
                notes.append(f"fc_norm set but the checkpoint has no fc_norm.{i}.weight: ones, as SGLang leaves it")
                w = torch.ones(th)
            if tuple(w.shape) != (th,):
                raise UsageError(f"{draft_dir}: fc_norm.{i}.weight has shape {list(w.shape)}, expected [{th}]")
            per_aux.append(w.float())
        if per:
            raise UsageError(f"{draft_dir}: unexpected {', '.join(per)} for a draft with {num_aux} aux states")
    if variant.norm_output:
        notes.append("norm_output changes only the state handed to the next draft step, not the first "
                     "draft token scored here")
    return AuxNorms(eps, num_aux, None if whole is None else whole.float(), per_aux)


@dataclass
class Draft:
    head: object            # Eagle3Head
    embed: object | None    # nn.Embedding from the draft checkpoint, or None (use the target's)
    num_aux: int
    notes: list[str] = field(default_factory=list)
    norms: AuxNorms | None = None
    variant: HeadVariant = field(default_factory=HeadVariant)

    def logits(self, embeds, aux):
        """Draft logits ``[B, L, draft_vocab]`` from token embeddings ``[B, L, hidden]`` and aux states
        ``[B, L, num_aux * target_hidden]`` (row ``t``: the embedding of token ``t + 1`` and the states
        at ``t``), through the variant's pre-``fc`` norms, as SGLang's draft forward computes them."""
        if self.norms is not None and not self.norms.identity:
            aux = self.norms(aux)
        return self.head(embeds, aux)


def load_draft(draft_dir: Path, draft_cfg: dict, target_hidden: int, target_vocab: int) -> Draft:
    """The draft as an :class:`~.tiny.models.Eagle3Head` (float32, CPU), shapes read from its files."""
    import torch

    from ..tiny.models import Eagle3Head, Eagle3Shape
    from . import is_eagle3_head

    if not is_eagle3_head(draft_cfg):
        raise UsageError(f"{draft_dir}: not an EAGLE-3 head (architectures {draft_cfg.get('architectures')})")
    tensors = _read_draft_tensors(draft_dir)
    variant = HeadVariant.from_config(draft_cfg)
    for name in ("fc.weight", "lm_head.weight"):
        if name not in tensors:
            raise UsageError(f"{draft_dir}: the checkpoint has no {name}")
    fc, lm = tensors["fc.weight"], tensors["lm_head.weight"]
    if fc.dim() != 2 or lm.dim() != 2:
        raise UsageError(f"{draft_dir}: fc.weight {list(fc.shape)} / lm_head.weight {list(lm.shape)} are not matrices")

    def num(key, default=None):
        v = draft_cfg.get(key, default)
        # NaN and infinity are numbers to json (and pass ``v <= 0``): NaN eps makes every logit NaN
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise UsageError(f"{draft_dir}/config.json: {key} must be a positive number, got {v!r}")
        return v

    layers = draft_cfg.get("num_hidden_layers", 1)
    if isinstance(layers, bool) or not isinstance(layers, int) or layers != 1:
        # SGLang 0.5.23's EAGLE-3 heads build config.num_hidden_layers decoder layers; the probe's head
        # has one: with 2 it would score a model SGLang does not run (helper 83)
        raise UsageError(f"{draft_dir}/config.json: num_hidden_layers {layers!r}: the probe runs one-layer EAGLE-3 "
                         "heads (SGLang 0.5.23 builds as many decoder layers as this field says)")
    hidden = int(num("hidden_size", lm.shape[1]))
    heads = int(num("num_attention_heads"))
    head_dim = int(num("head_dim")) if draft_cfg.get("head_dim") is not None else \
        (hidden // heads if hidden % heads == 0 else 0)
    if not head_dim:
        raise UsageError(f"{draft_dir}/config.json: hidden_size {hidden} is not a multiple of "
                         f"num_attention_heads {heads} and head_dim is not given")
    kv_heads = int(num("num_key_value_heads", heads))
    th = int(num("target_hidden_size")) if draft_cfg.get("target_hidden_size") is not None else target_hidden
    if th != target_hidden:
        raise UsageError(f"{draft_dir}: target_hidden_size {th} differs from the target's hidden size "
                         f"{target_hidden}: its states cannot be fed to this draft")
    if fc.shape[1] % th or fc.shape[1] == 0:
        raise UsageError(f"{draft_dir}: fc.weight input width {fc.shape[1]} is not a multiple of the target's "
                         f"hidden size {th}: its states cannot be fed to this draft")
    if fc.shape[0] != hidden or lm.shape[1] != hidden:
        raise UsageError(f"{draft_dir}: fc.weight {list(fc.shape)} / lm_head.weight {list(lm.shape)} do not match "
                         f"hidden_size {hidden}")
    num_aux = fc.shape[1] // th
    draft_vocab = lm.shape[0]
    if "d2t" in tensors:
        d2t = tensors.pop("d2t").long()
        if d2t.shape != (draft_vocab,):
            raise UsageError(f"{draft_dir}: d2t {list(d2t.shape)} does not match lm_head rows {draft_vocab}")
        ids = d2t + torch.arange(draft_vocab)
    elif draft_vocab == target_vocab:
        ids = torch.arange(draft_vocab)
    else:
        raise UsageError(f"{draft_dir}: no d2t and lm_head has {draft_vocab} rows, not the target's "
                         f"{target_vocab}")
    if ids.min() < 0 or ids.max() >= target_vocab:
        raise UsageError(f"{draft_dir}: d2t maps draft ids outside the target's vocabulary of {target_vocab}")
    tensors.pop("t2d", None)
    embed_w = tensors.pop("embed_tokens.weight", None)
    rope = draft_cfg.get("rope_parameters") if isinstance(draft_cfg.get("rope_parameters"), dict) else {}
    theta = num("rope_theta", rope.get("rope_theta", 10000.0))
    notes = []
    norms = _variant_norms(draft_dir, variant, tensors, num_aux, th, float(num("rms_norm_eps", 1e-6)), notes)
    scaling = draft_cfg.get("rope_scaling")
    if isinstance(scaling, dict) and scaling.get("rope_type", scaling.get("type")) not in (None, "default"):
        notes.append(f"rope_scaling {scaling.get('rope_type', scaling.get('type'))!r} ignored (plain RoPE used)")
    shape = Eagle3Shape(vocab=target_vocab, draft_vocab=draft_vocab, hidden=hidden, target_hidden=th,
                        inner=int(num("intermediate_size")), heads=heads, kv_heads=kv_heads, head_dim=head_dim,
                        num_aux=num_aux, eps=float(num("rms_norm_eps", 1e-6)), theta=float(theta),
                        max_pos=int(num("max_position_embeddings", 4096)))
    head = Eagle3Head(shape, ids)
    head_keys = set(head.state_dict())
    extra = sorted(set(tensors) - head_keys)
    missing = sorted(head_keys - set(tensors))
    if missing or extra:
        what = (f"missing {', '.join(missing[:4])}" if missing else "") + \
               ("; " if missing and extra else "") + (f"unexpected {', '.join(extra[:4])}" if extra else "")
        raise UsageError(f"{draft_dir}: not a plain EAGLE-3 head checkpoint ({what})")
    for k, v in head.state_dict().items():
        if tensors[k].shape != v.shape:
            raise UsageError(f"{draft_dir}: {k} has shape {list(tensors[k].shape)}, expected {list(v.shape)} "
                             f"from config.json")
    head.load_state_dict({k: v.float() for k, v in tensors.items()}, strict=True)
    embed = None
    if embed_w is not None:
        if embed_w.dim() != 2 or embed_w.shape[1] != hidden or embed_w.shape[0] < target_vocab:
            raise UsageError(f"{draft_dir}: embed_tokens.weight {list(embed_w.shape)} cannot embed the target's "
                             f"{target_vocab} tokens at width {hidden}")
        embed = torch.nn.Embedding.from_pretrained(embed_w.float(), freeze=True)
    return Draft(head.eval(), embed, num_aux, notes, norms, variant)


# ----------------------------------------------------------------------------- candidates, statistics
def candidate_sets(ids: list[int], plugin: list[int] | None, stock: list | None, n: int,
                   num_aux: int) -> list[tuple[list[str], list[int]]]:
    """Distinct valid position sets with all their names, in a fixed order."""
    out1 = [i + 1 for i in ids]
    named = [
        ("plugin", plugin),
        ("stock", stock if isinstance(stock, list) and all(isinstance(p, int) for p in stock) else None),
        ("ids+1 (layer outputs)", out1),
        ("ids (positions)", list(ids)),
        ("ids+2", [i + 2 for i in ids]),
        ("ids-1", [i - 1 for i in ids]),
        ("embedding for deepest", [0] + sorted(out1)[:-1] if out1 else None),
        ("family default", [2, n // 2, n - 3]),
    ]
    found: dict[tuple, list[str]] = {}
    for name, pos in named:
        if not pos or len(pos) != num_aux or len(set(pos)) != len(pos) or not all(0 <= p <= n for p in pos):
            continue
        found.setdefault(tuple(sorted(pos)), []).append(name)
    return [(names, list(key)) for key, names in found.items()]


def mcnemar_p(a, b) -> float:
    """Exact two-sided McNemar p-value of paired hit vectors ``a`` and ``b`` (bool tensors): the
    binomial test of the ``only_a`` discordant pairs out of ``n`` at rate 1/2,
    ``min(1, 2 P(X <= min(only_a, only_b)))``, ``X ~ Binomial(n, 1/2)`` (McNemar, Psychometrika 12
    (1947) 153; what ``scipy.stats.binomtest(only_a, n, 0.5).pvalue`` gives, the distribution being
    symmetric). Summed in logarithms, so p-values down to about 1e-308 keep their digits; lower ones
    are 0.0. Plain ``math``: ``scipy.stats`` costs a probe about 1.5 s to import."""
    only_a = int((a & ~b).sum())
    only_b = int((~a & b).sum())
    n = only_a + only_b
    if n == 0:
        return 1.0
    low = min(only_a, only_b)
    if 2 * low + 1 >= n:   # the tails meet: every outcome is as likely as the observed one or less
        return 1.0
    base = math.lgamma(n + 1) - n * math.log(2.0)
    logs = [base - math.lgamma(i + 1) - math.lgamma(n - i + 1) for i in range(low + 1)]
    top = max(logs)
    return min(1.0, 2.0 * math.exp(top) * math.fsum(math.exp(v - top) for v in logs))


# ----------------------------------------------------------------------------- the probe
def _fix(best: list[int], plugin: list[int] | None, target_cfg, draft_cfg, header, env) -> dict | None:
    """Settings that make the plugin capture ``best``: eagle_config ids and/or the convention env value.

    Both are computed with ``SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS`` and ``SGLANG_EAGLE_CYCLE_AUX_CONVENTION``
    unset; those of them set in ``env`` are listed under ``"unset"`` (a set ids override wins over
    any config.json, so the fix holds only once it is gone), and ``"unset_only"`` is True where
    unsetting them is fix enough (the draft's config.json already declares the ids). None: no fix."""
    from . import check_pair

    ids = [p - 1 for p in best]
    fixed_cfg = json.loads(json.dumps(draft_cfg))
    fixed_cfg.setdefault("eagle_config", {})
    if not isinstance(fixed_cfg["eagle_config"], dict):
        fixed_cfg["eagle_config"] = {}
    fixed_cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = ids
    clean_env = {k: v for k, v in env.items() if k not in (ENV_IDS, ENV_CONVENTION)}
    if 0 in best:
        clean_env[ENV_ALLOW_EMBEDDING] = "1"
    out: dict = {"eagle_aux_hidden_state_layer_ids": None, "aux_convention": None,
                 "allow_embedding": 0 in best, "unset_only": False,
                 "unset": [k for k in (ENV_IDS, ENV_CONVENTION) if str(env.get(k) or "").strip()]}
    if out["unset"]:
        try:
            rep = check_pair(target_cfg, draft_cfg, header=header, env=clean_env)
            out["unset_only"] = rep.positions is not None and sorted(rep.positions) == best
        except UsageError:
            pass
    try:
        rep = check_pair(target_cfg, fixed_cfg, header=header, env=clean_env)
        if rep.positions is not None and sorted(rep.positions) == best:
            out["eagle_aux_hidden_state_layer_ids"] = ids
    except UsageError:
        pass
    for value in ("input", "stock"):
        try:
            rep = check_pair(target_cfg, draft_cfg, header=header, env={**clean_env, ENV_CONVENTION: value})
        except UsageError:
            continue
        if rep.positions is not None and sorted(rep.positions) == best:
            out["aux_convention"] = value
            break
    if out["eagle_aux_hidden_state_layer_ids"] is None and out["aux_convention"] is None and not out["unset_only"]:
        return None
    return out


def probe(target: str | Path, draft: str | Path, prompts_file: str | Path | None = None, tokens: int | None = None,
          device: str = "cpu", dtype: str = "float32", max_memory: str | None = None,
          env=None, progress: bool | None = None) -> dict:
    """Run the probe; the ``--json`` object (see module docstring and README).

    Raises:
        UsageError: unusable input, as the module docstring lists it; among it a target whose
            checkpoint holds more or fewer decoder layers than its config's ``num_hidden_layers``
            (:mod:`.target_layers`), refused before the target loads.
    """
    import torch

    from ..costmodel import wilson_interval
    from ..safetensors_header import read_draft_shapes
    from . import check_pair, find_hidden_size, find_num_layers, find_vocab_size, load_config, refuse_unusable_pair
    from .checks import refuse_swapped
    from .target_layers import check_target_layers

    t0 = time.perf_counter()
    env = dict(os.environ if env is None else env)
    (target_dir, target_json), (draft_dir, draft_json) = _model_folder(target, "target"), _model_folder(draft, "draft")
    target_cfg, draft_cfg = load_config(target_json), load_config(draft_json)
    refuse_swapped(str(target), str(draft), target_cfg, draft_cfg, "probe")
    refuse_unusable_pair(target_cfg, draft_cfg, target_json, draft_json)
    if device not in ("cpu", "cuda"):
        raise UsageError(f"--device {device!r}: expected cpu or cuda")
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: no CUDA device available")
    if prompts_file is not None and not str(prompts_file).strip():   # `--prompts "$UNSET"`: not the default prompts
        raise UsageError("--prompts: empty path: give a JSONL prompts file, or leave the option out for the default "
                         "prompts")
    try:
        header = read_draft_shapes(draft_dir) or None
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise UsageError(f"{draft_dir}: unreadable checkpoint ({_short_exc(exc)})") from None
    report = check_pair(target_cfg, draft_cfg, header=header, env=env)
    n = find_num_layers(target_cfg)
    # transformers builds n layers whatever the checkpoint holds: refuse a cut-down or half-random target
    check_target_layers(target_dir, target_cfg, target_json)
    hidden, vocab = find_hidden_size(target_cfg), find_vocab_size(target_cfg)
    dr = load_draft(draft_dir, draft_cfg, hidden, vocab)
    if isinstance(report.ids, list) and report.ids and all(isinstance(i, int) and not isinstance(i, bool)
                                                          for i in report.ids):
        ids = list(report.ids)
    elif report.positions is not None:
        ids = [p - 1 for p in report.positions]
    else:
        ids = []
    cands = candidate_sets(ids, report.positions, report.stock_positions, n, dr.num_aux)
    if not cands:
        raise UsageError(f"no candidate position set has the draft's {dr.num_aux} aux states "
                         f"(fc.weight input width {dr.head.fc.in_features}) within 0..{n}")
    keep = sorted({p for _, pos in cands for p in pos})
    prompts = load_prompts(target_dir, Path(prompts_file) if prompts_file is not None else None, tokens)
    if prompts.tokens < 1:
        raise UsageError(f"--tokens {prompts.tokens}: expected at least 1")
    check_context(prompts, target_cfg, target_json)
    _stretch_draft_rope(dr, max(len(p) for p in prompts.ids) + prompts.tokens - 1)
    bad = next((t for p in prompts.ids for t in p if not 0 <= t < vocab), None)
    if bad is not None:   # the target's embedding would raise IndexError mid-run
        raise UsageError(f"{prompts.source}: prompt token id {bad} outside the target's vocabulary of {vocab}")

    model = load_target(target_dir, device, dtype, max_memory)
    if len(decoder_layers(model)) != n:
        raise UsageError(f"{target_dir}: {len(decoder_layers(model))} decoder layers loaded, config says {n}")
    embed = dr.embed if dr.embed is not None else model.get_input_embeddings()
    head_dev = torch.device(device if max_memory is None else "cpu")
    from tqdm import tqdm

    from ..tiny.agreement import scored_mask

    head = dr.head.to(head_dev)
    row_of = {p: i for i, p in enumerate(keep)}
    groups: dict[int, list[list[int]]] = {}
    for p in prompts.ids:  # prompts of one length run as one batch
        groups.setdefault(len(p), []).append(p)
    batches = [g[i:i + size] for length, g in groups.items()
               for size in [batch_size(n, hidden, length + prompts.tokens)] for i in range(0, len(g), size)]
    quiet = None if progress is None else not progress  # None: tqdm shows the bar on a terminal only
    bar = tqdm(total=len(prompts.ids), desc="probe", unit="prompt", file=sys.stderr, disable=quiet, leave=False)
    hits: dict = {tuple(pos): [] for _, pos in cands}
    hits[None] = []                                     # aux states zeroed
    for batch in batches:
        seq = greedy_continue(model, torch.tensor(batch), prompts.tokens)
        states, logits = target_forward(model, seq, keep)
        labels = logits.argmax(-1)[:, 1:]              # the target's greedy token t + 2 for draft row t
        L = seq.shape[1]
        mask = scored_mask(len(batch), L, len(batch[0]))
        with torch.no_grad():
            # teacher-forced with SGLang's shift as tiny.agreement.draft_top1: row t reads
            # embed(token t + 1) and the aux states at t
            emb = embed(seq[:, 1:].to(_emb_device(embed))).detach().float().to(head_dev)
            for key in hits:
                if key is None:
                    aux = torch.zeros(len(batch), L - 1, head.fc.in_features)
                else:
                    aux = torch.cat([states[row_of[p]][:, :-1] for p in sorted(key)], dim=-1)
                top = head.draft_to_target[dr.logits(emb, aux.to(head_dev)).argmax(-1)].cpu()
                hits[key].append((top == labels)[mask])
        del states, logits
        bar.update(len(batch))
    bar.close()
    del model
    hits = {k: torch.cat(v) for k, v in hits.items()}
    ablated = hits.pop(None)
    scored = int(ablated.numel())
    if scored == 0:
        raise UsageError("no scored tokens (nothing generated)")

    rows = []
    for names, pos in cands:
        h = hits[tuple(pos)]
        k = int(h.sum())
        lo, hi = wilson_interval(k, scored)
        rows.append({"names": names, "positions": pos, "agreement": k / scored, "ci": [lo, hi],
                     "_hits": h})
    plugin_key = tuple(sorted(report.positions)) if report.positions is not None else None
    best = max(rows, key=lambda r: (r["agreement"], tuple(r["positions"]) == plugin_key))
    for r in rows:
        r["margin_vs_best"] = r["agreement"] - best["agreement"]
        r["p_vs_best"] = 1.0 if r is best else mcnemar_p(best["_hits"], r["_hits"])
        r["margin_vs_ablated"] = r["agreement"] - int(ablated.sum()) / scored
        r["p_vs_ablated"] = mcnemar_p(r["_hits"], ablated)
    rows.sort(key=lambda r: -r["agreement"])
    plugin_row = next((r for r in rows if tuple(r["positions"]) == plugin_key), None)
    verdict = decide(rows, best, plugin_row)
    fix = _fix(best["positions"], report.positions, target_cfg, draft_cfg, header, env) \
        if verdict == "other_best" else None
    for r in rows:
        del r["_hits"]
    best_out = {k: v for k, v in best.items() if k != "_hits"}
    return {
        "target": str(target_dir), "draft": str(draft_dir),
        "num_layers": n, "ids": report.ids, "ids_source": report.ids_source,
        "candidates": rows, "best": best_out,
        "aux_ablated_agreement": int(ablated.sum()) / scored,
        "plugin_positions": report.positions, "stock_positions": report.stock_positions,
        "wiring_errors": [p.code for p in report.errors],
        "verdict": verdict, "fix": fix, "scored_tokens": scored,
        "prompts": len(prompts.ids), "tokens": prompts.tokens, "prompts_source": prompts.source,
        "notes": dr.notes, "seconds": round(time.perf_counter() - t0, 2),
    }


def _stretch_draft_rope(dr: "Draft", rows: int) -> None:
    """Give the draft head RoPE tables for ``rows`` positions (the longest teacher-forced sequence) where
    its ``max_position_embeddings`` is shorter, with a note: the head's tables end there and a longer
    sequence failed on a shape mismatch. SGLang 0.5.23 serves such a draft only by overriding its
    ``max_position_embeddings`` with the served context (``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1``),
    which computes the same rotary angles on past it."""
    from ..tiny.models import rope_tables

    head = dr.head
    have = int(head._cos.shape[0])
    if rows <= have:
        return
    head._cos, head._sin = rope_tables(rows, head.s.head_dim, head.s.theta)
    dr.notes.append(f"the draft's max_position_embeddings {have} is below the probe's longest sequence "
                    f"({rows} draft positions): its RoPE is computed on past it, as SGLang does where it "
                    "overrides the draft's max_position_embeddings (SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1)")


def _model_folder(arg, what: str) -> tuple[Path, Path]:
    """``(folder, config.json)`` of TARGET or DRAFT as ``eagle-cycle wiring`` takes them: a model
    folder, its ``config.json``, or a repo id in the local Hugging Face cache (its snapshot folder)."""
    from .config import _REPO_ID, locate_config

    path = Path(arg).expanduser()
    if str(arg) and not path.exists() and not path.is_symlink() and not _REPO_ID.match(str(arg)):
        raise UsageError(f"{arg}: no such {what} folder")
    config = locate_config(str(arg))   # an empty argument, a broken link, a FIFO: one line naming it
    return (path if path.is_dir() else config.parent), config


def decide(rows: list[dict], best: dict, plugin_row: dict | None) -> str:
    """The verdict from the candidate rows (``margin_vs_ablated``, ``p_vs_ablated``, ``p_vs_best``).

    ``not_trained_on_target`` unless some candidate beats the zeroed aux states by at least
    :data:`MIN_AUX_GAIN` at p <= :data:`ALPHA`; then ``plugin_best`` when the plugin's row is the
    best or not significantly worse (p > ALPHA), else ``other_best``.
    """
    if not any(r["margin_vs_ablated"] >= MIN_AUX_GAIN and r["p_vs_ablated"] <= ALPHA for r in rows):
        return "not_trained_on_target"
    if plugin_row is not None and (plugin_row is best or plugin_row["p_vs_best"] > ALPHA):
        return "plugin_best"
    return "other_best"


def _emb_device(embed):
    w = getattr(embed, "weight", None)
    if w is None or str(w.device) == "meta":
        return "cpu"
    return w.device


def exit_code(result: dict) -> int:
    """0: plugin_best and no error-level wiring problem; 1 otherwise."""
    return 0 if result["verdict"] == "plugin_best" and not result["wiring_errors"] else 1


def fix_text(result: dict) -> str:
    fix = result["fix"]
    v = result["verdict"]
    if v == "plugin_best":
        plugin = next((c for c in result["candidates"] if "plugin" in c["names"]), None)
        # with wiring errors the pair needs a fix whatever the positions: only the positions need none
        none = ("the positions need no change (the wiring errors above do)" if result.get("wiring_errors")
                else "none needed")
        if plugin is None or plugin["positions"] == result["best"]["positions"]:
            return f"fix: {none}: the plugin captures the positions the draft agrees best on"
        return (f"fix: {none}: the plugin's positions {plugin['positions']} are not significantly worse "
                f"than the best {result['best']['positions']} (McNemar p={plugin['p_vs_best']:.2g} > {ALPHA})")
    if v == "not_trained_on_target":
        # a margin past the bar that is not significant is no finding either way: too few tokens
        wide = [c for c in result["candidates"]
                if c.get("margin_vs_ablated", 0.0) >= MIN_AUX_GAIN and c.get("p_vs_ablated", 1.0) > ALPHA]
        if wide:
            top = max(wide, key=lambda c: c["margin_vs_ablated"])
            return (f"fix: undecided: {top['positions']} beat the draft with its aux states zeroed by "
                    f"{100 * top['margin_vs_ablated']:.1f} points of agreement, but at p={top['p_vs_ablated']:.2g} "
                    f"> {ALPHA} over {result['scored_tokens']} scored tokens: not significant; more prompts "
                    "(--prompts) or longer continuations (--tokens) would decide whether the draft was trained "
                    "on this target")
        return (f"fix: none: no candidate beats the draft with its aux states zeroed by {100 * MIN_AUX_GAIN:.0f} "
                f"points of agreement at p <= {ALPHA}; the draft was not trained on this target's states "
                "(or not at any of these positions)")
    if fix is None:
        return f"fix: no setting makes the plugin capture {result['best']['positions']}"
    parts = []
    unset = fix.get("unset") or []   # overrides set in the probe's environment: the fixes hold without them
    if fix.get("unset_only"):
        parts.append(f"unset {' and '.join(unset)} (the draft's config.json already declares the ids)")
    elif fix["eagle_aux_hidden_state_layer_ids"] is not None:
        parts.append('set "eagle_config": {"eagle_aux_hidden_state_layer_ids": '
                     f'{fix["eagle_aux_hidden_state_layer_ids"]}}} in the draft\'s config.json'
                     + (f" and unset {' and '.join(unset)}" if unset else ""))
    if fix["aux_convention"] is not None:
        parts.append(f"{ENV_CONVENTION}={fix['aux_convention']}"
                     + (f" with {ENV_IDS} unset" if ENV_IDS in unset else ""))
    extra = f" (with {ENV_ALLOW_EMBEDDING}=1)" if fix.get("allow_embedding") else ""
    return f"fix: {' or '.join(parts)}{extra}: the plugin then captures {result['best']['positions']}"
