"""Read tensor shapes from a draft checkpoint's safetensors *header* only (or, for a draft saved
as ``pytorch_model.bin``, from its pickle, without the tensor data: :func:`read_pytorch_shapes`).

A safetensors file starts with an 8-byte little-endian unsigned integer ``n``,
then ``n`` bytes of UTF-8 JSON mapping each tensor name to
``{"dtype": ..., "shape": [...], "data_offsets": [begin, end]}`` (plus an
optional ``"__metadata__"`` entry); the tensor bytes follow.  Reading the
first ``8 + n`` bytes is enough to know every shape, so header-only files
(as the tests write) and multi-gigabyte checkpoints cost the same, and no
weights are ever loaded.

The wiring check needs these EAGLE-3 draft tensors, found under their plain
names or with a ``model.`` prefix. SGLang 0.5.23 does not load every prefixed name: both EAGLE-3
heads skip ``model.lm_head.weight``; ``Eagle3DeepseekV2ForCausalLM`` skips every ``model.X`` but
``model.d2t`` (``LlamaForCausalLMEagle3`` loads them; test/test_mla_head_sglang.py). So a tensor found
only under its prefixed name is also reported as ``"model." + name`` with shape ``[]`` (:func:`stored_name`),
and so is every ``model.X`` of a head module with no unprefixed tensor (:func:`prefixed_only`):

- ``fc.weight``: ``[hidden_size, n_aux * target_hidden_size]``
- ``lm_head.weight``: ``[draft_vocab_size or vocab_size, hidden_size]``
- ``d2t``: ``[draft_vocab_size]`` (draft -> target token-id offsets)
- ``input_norm.weight``: ``[n_aux * target_hidden_size]``, present in heads trained with
  ``norm_before_fc`` (the gpt-oss head layout)
- ``fc_norm.0.weight``: ``[target_hidden_size]``, present in EAGLE 3.1 heads (``fc_norm``)

Shapes alone cannot show an fc stored quantised in a ``fc.weight`` of the right shape (fp8 with a
``fc.weight_scale_inv``): for that the reader also reports ``fc.weight``'s dtype (:data:`FC_DTYPE`)
and its scale tensors (:data:`FC_SCALES`), as header entries whose values are no shapes.

Usage::

    from sglang_eagle_cycle.safetensors_header import read_draft_shapes
    read_draft_shapes("path/to/draft")   # {"fc.weight": [7168, 21504]} or {} without a checkpoint
"""

from __future__ import annotations

import json
import os
import re
import struct
import warnings
from pathlib import Path

from .errors import UsageError

#: canonical name -> accepted spellings, first match wins
DRAFT_TENSORS: dict[str, tuple[str, ...]] = {
    "fc.weight": ("fc.weight", "model.fc.weight"),
    "lm_head.weight": ("lm_head.weight", "model.lm_head.weight"),
    "d2t": ("d2t", "model.d2t"),
    "input_norm.weight": ("input_norm.weight", "model.input_norm.weight"),
    "fc_norm.0.weight": ("fc_norm.0.weight", "model.fc_norm.0.weight"),
}

#: a header larger than this is not a real header: safetensors refuses it ("header too large")
MAX_HEADER_BYTES = 100_000_000

#: the dtypes the safetensors library (0.8) reads, with the bits one element takes; any other dtype
#: string makes it refuse the whole file (``unknown variant``), so SGLang loads none of it. A superset of
#: older releases' lists, so a file an older library reads is never refused here
SAFETENSORS_DTYPE_BITS = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8,
    "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64,
}
#: safetensors reads shapes and offsets as 64-bit unsigned integers
_U64 = 1 << 64

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"


def read_header(path: str | Path) -> dict[str, dict]:
    """Return the JSON header of one ``.safetensors`` file (without ``__metadata__``).

    Reads ``8 + n`` bytes, never the tensor data.

    Raises:
        UsageError: the file cannot be read, is a broken symlink (an HF-cache link to a blob never
            downloaded), is empty, a Git LFS pointer or an HTML page (a clone without git-lfs, a failed
            download: named as such), or its header is truncated, too
            large, not UTF-8 JSON, or not an object of tensor entries.
    """
    path = Path(path)
    try:
        if path.is_symlink() and not path.exists():   # an HF-cache link whose blob never arrived
            _regular_file(path)
        if path.exists() and not path.is_file():   # a FIFO or a device would block the read, or never end
            raise UsageError(f"{path}: not a regular file")
        with path.open("rb") as fh:
            prefix = fh.read(8)
            if prefix[:1] in (b"", b"v", b"<", b" ", b"\n"):   # an empty file, a Git LFS pointer, an HTML page
                why = _not_weights(path, prefix + fh.read(56))
                if why:
                    raise UsageError(why)
                fh.seek(len(prefix))   # a header length whose low byte reads so: back to the header
            if len(prefix) < 8:
                raise UsageError(f"{path}: not a safetensors file (shorter than its 8-byte header length)")
            (n,) = struct.unpack("<Q", prefix)
            if n == 0 or n > MAX_HEADER_BYTES:
                raise UsageError(f"{path}: corrupt safetensors header (declared length {n} bytes)")
            raw = fh.read(n)
            data_bytes = os.fstat(fh.fileno()).st_size - 8 - n
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(raw) < n:
        raise UsageError(f"{path}: corrupt safetensors header (declares {n} bytes, file has {len(raw)})")
    try:
        # parse_constant: NaN and Infinity are no JSON; safetensors' parser refuses them
        header = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except RecursionError:
        raise UsageError(f"{path}: corrupt safetensors header (JSON nested too deeply to read)") from None
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise UsageError(f"{path}: corrupt safetensors header ({str(exc).splitlines()[0][:120]})") from None
    if not isinstance(header, dict):
        raise UsageError(f"{path}: corrupt safetensors header (not a JSON object)")
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not (isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values())):
        what = (f"a {_json_type(metadata)}" if not isinstance(metadata, dict) else
                "an object whose values are not all strings")
        _refused(path, f"__metadata__ is {what}; the format wants an object of strings")
    for name, entry in header.items():
        if not isinstance(entry, dict) or not _is_shape(entry.get("shape")):
            raise UsageError(f"{path}: corrupt safetensors header (entry {_short_name(name)} has no integer shape)")
    _check_entries(path, header, data_bytes)
    return header


def _is_shape(value) -> bool:
    return isinstance(value, list) and all(_is_u64(d) for d in value)


def _is_u64(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _U64


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _json_type(value) -> str:
    return {list: "list", str: "string", bool: "boolean", int: "number", float: "number"}.get(type(value), "value")


def _short_name(name: str, limit: int = 60) -> str:
    """A tensor name for a one-line message: quoted, control characters escaped, cut to ``limit``."""
    text = repr(str(name))
    return text if len(text) <= limit else text[:limit - 4] + "...'"


def _refused(path: Path, why: str) -> None:
    raise UsageError(f"{path}: a safetensors header the safetensors library refuses ({why}): SGLang "
                     f"{_SGLANG}'s loader fails on this file; save the checkpoint again with safetensors")


def _dtype_of(entry: dict) -> str | None:
    """The dtype name of a header entry as safetensors reads it: a known name, or the one-key object
    ``{"F32": null}`` it also accepts; None for anything it refuses."""
    dtype = entry.get("dtype")
    if isinstance(dtype, dict) and len(dtype) == 1 and next(iter(dtype.values())) is None:
        dtype = next(iter(dtype))
    return dtype if isinstance(dtype, str) and dtype in SAFETENSORS_DTYPE_BITS else None


def _check_entries(path: Path, header: dict, data_bytes: int) -> None:
    """Refuse (a one-line :class:`UsageError` naming the file and the tensor) a header the safetensors
    library refuses to open, so that SGLang could load nothing from it: a dtype it does not know (``"ZZ"``,
    ``null``, ``5``; :data:`SAFETENSORS_DTYPE_BITS`), ``data_offsets`` missing or not two unsigned integers,
    or ending before they begin. Where the file holds tensor data (``data_bytes`` > 0), also what it checks
    of the layout: each tensor starting where the previous one ends (ordered by offsets), its byte size
    that of its shape and dtype, and the last ending at the end of the file (a truncated download).

    A header-only file (``data_bytes`` 0: nothing after the header) has its layout left unchecked: such
    files describe shapes for ``eagle-cycle wiring`` (the project's fixtures, ``write_header_only``) and
    no loader is meant to read them."""
    spans = []
    for name, entry in header.items():
        dtype = _dtype_of(entry)
        if dtype is None:
            given = entry.get("dtype")
            shown = ("missing" if "dtype" not in entry else
                     _short_name(given) if isinstance(given, str) else json.dumps(given)[:40])
            _refused(path, f"tensor {_short_name(name)} has dtype {shown}, not one safetensors knows")
        offsets = entry.get("data_offsets")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_u64(o) for o in offsets)):
            shown = "missing" if "data_offsets" not in entry else json.dumps(offsets)[:40]
            _refused(path, f"tensor {_short_name(name)} has data_offsets {shown}, not two unsigned integers")
        begin, end = offsets
        if end < begin:
            _refused(path, f"tensor {_short_name(name)} has data_offsets [{begin}, {end}], ending before they begin")
        spans.append((begin, end, name, dtype, entry["shape"]))
    if data_bytes <= 0:
        return
    at = 0
    for begin, end, name, dtype, shape in sorted(spans, key=lambda s: s[:2]):
        if begin != at:
            _refused(path, f"tensor {_short_name(name)} has data_offsets [{begin}, {end}], but the previous "
                           f"tensor's data ends at byte {at}")
        count = 1
        for d in shape:
            count *= d
        bits = count * SAFETENSORS_DTYPE_BITS[dtype]
        if count >= _U64 or bits >= _U64 or bits % 8 or end - begin != bits // 8:
            _refused(path, f"tensor {_short_name(name)}: {dtype} {list(shape)} takes "
                           f"{bits / 8:g} bytes, its data_offsets [{begin}, {end}] hold {end - begin}")
        at = end
    if at != data_bytes:
        why = "a truncated download?" if data_bytes < at else "bytes after the last tensor"
        _refused(path, f"the file holds {data_bytes} bytes of tensor data, its header describes {at}: {why}")


#: an fc stored quantised (no plain fc.weight): a quantisable fc (SGLang's Kimi-K2.5 EAGLE-3 head)
#: loads from these, so the missing-fc.weight check cannot tell for that head (LlamaForCausalLMEagle3's
#: plain fc loads none of them); :func:`_pick` reports it as ``"fc.quantized"`` (shape ``[]``)
FC_QUANTIZED = re.compile(r"(?:model\.)?fc\.(?:qweight|qzeros|scales|g_idx|weight_packed|weight_scale(?:_inv)?)")


#: the safetensors dtypes a plain float ``fc`` holds as they are (SGLang copies them into its float
#: parameter); any other dtype of ``fc.weight`` (``F8_E4M3``, ``F8_E5M2``, ``I8``, ...) is a quantised value
FLOAT_DTYPES = ("F16", "BF16", "F32", "F64")

#: the scale tensors of a quantised ``fc.weight`` (fp8 per block: ``weight_scale_inv``; per tensor or
#: channel: ``weight_scale``), either spelling
FC_SCALE = re.compile(r"(?:model\.)?fc\.weight_scale(?:_inv)?")

#: marker: the dtype string (``"F8_E4M3"``) of the ``fc.weight`` read (the plain spelling, else
#: ``model.fc.weight``), present only when it is not one of :data:`FLOAT_DTYPES`
FC_DTYPE = "fc.weight.dtype"

#: marker: the sorted names of the :data:`FC_SCALE` tensors stored (``["fc.weight_scale_inv"]``), present
#: only beside :data:`FC_DTYPE` and only when there is one
FC_SCALES = "fc.weight.scales"


#: marker (shape ``[]``): the draft folder holds this ModelOpt quantisation file, which SGLang 0.5.23 reads
#: as the draft's quantisation config where config.json declares none
QUANT_CONFIG_FILE = "hf_quant_config.json"
#: marker (shape ``[]``): a checkpoint was read whose tensors include none of :data:`DRAFT_TENSORS`
#: (a head that stores only its decoder layer and norm: no fc, the target's lm_head), so the result
#: is not the ``{}`` that means "no checkpoint"
CHECKPOINT_READ = "checkpoint.read"
#: marker (a list of ``"FILE['key']"`` strings, not a shape): PyTorch checkpoint files whose tensors sit
#: in a nested dict (``{"state_dict": {...}}``); SGLang 0.5.23 loads top-level entries only, so none of
#: them load (the wiring error ``checkpoint_nested``)
CHECKPOINT_NESTED = "checkpoint.nested"


#: marker (a list of tensor names, not a shape): the tensors inside the nested dicts of
#: :data:`CHECKPOINT_NESTED`, as named within them (``fc.weight`` for ``{"state_dict": {"fc.weight": ...}}``):
#: SGLang loads none of them, so a check that misses one of these names is seeing the same cause
CHECKPOINT_NESTED_TENSORS = "checkpoint.nested.tensors"
#: the shard index of a sharded PyTorch checkpoint; SGLang 0.5.23 never reads it (it globs ``*.bin``)
PT_INDEX_FILE = "pytorch_model.bin.index.json"
#: marker (an object, not a shape): shard -> the tensor names :data:`PT_INDEX_FILE` places in it, for each
#: listed shard missing from the draft folder whose names no file SGLang 0.5.23 loads holds: it loads the
#: rest without a word and leaves these unloaded (:func:`unloaded_index_shards`)
CHECKPOINT_MISSING_SHARDS = "checkpoint.missing_shards"


#: marker (a string, not a shape): the name ``d2t`` was read from where it is stored neither as ``d2t``
#: nor as ``model.d2t`` but under another name ending in ``.d2t`` (``module.d2t`` from a DistributedDataParallel
#: save): both SGLang 0.5.23 heads load any such name as d2t (:func:`d2t_names`)
D2T_STORED = "d2t.stored_as"
#: marker (a list of names, not a shape): names holding ``d2t`` that only ``LlamaForCausalLMEagle3`` loads
#: as d2t (it takes every name containing ``d2t``; ``Eagle3DeepseekV2ForCausalLM`` only ``d2t`` and names
#: ending in ``.d2t``), where no name both load is stored
D2T_LLAMA_ONLY = "d2t.llama_head_only"


def d2t_names(names) -> tuple[list[str], list[str]]:
    """``(both, llama_only)``: the checkpoint names (sorted) SGLang 0.5.23 loads as the draft's d2t in both
    EAGLE-3 heads (``d2t`` and any name ending in ``.d2t``: ``model.d2t``, ``module.d2t``), and the further
    names only ``LlamaForCausalLMEagle3`` loads so (any name containing ``d2t``, ``d2t_map``); measured with
    both classes on the CPU (test/test_wiring_inputs.py)."""
    names = sorted({str(n) for n in names if "d2t" in str(n)})
    both = [n for n in names if n == "d2t" or n.endswith(".d2t")]
    return both, [n for n in names if n not in both]


#: marker (a list of stored names, not a shape): the decoder layer's MLA attention shards that
#: SGLang 0.5.23's ``Eagle3DeepseekV2ForCausalLM`` drops silently (:func:`mla_a_proj_dropped`)
MLA_A_PROJ_DROPPED = "mla.a_proj.dropped"
_A_PROJ = re.compile(r"(layers\.0|midlayer)\.self_attn\.(q_a_proj|kv_a_proj_with_mqa|fused_qkv_a_proj_with_mqa)\.(.+)")


def mla_a_proj_dropped(names) -> list[str]:
    """The stored names (sorted) of the decoder layer's ``q_a_proj`` / ``kv_a_proj_with_mqa`` shards an MLA
    EAGLE-3 head cannot load: SGLang 0.5.23's ``Eagle3DeepseekV2ForCausalLM`` fuses the two into its
    ``fused_qkv_a_proj_with_mqa`` only once both have arrived (the same leaf, e.g. ``.weight``; the
    ``layers.0.`` and legacy ``midlayer.`` spellings pair with each other), drops a shard whose partner
    never comes, and drops a pre-fused ``fused_qkv_a_proj_with_mqa`` name, all without a log line
    (test/test_mla_head_sglang.py). ``model.``-prefixed names are left to :func:`prefixed_only`."""
    stored: dict[tuple[str, str], list[str]] = {}   # (shard, leaf) -> its stored spellings
    for name in {str(n) for n in names}:
        m = _A_PROJ.fullmatch(name)
        if m:
            stored.setdefault((m.group(2), m.group(3)), []).append(name)
    partners = {"q_a_proj": "kv_a_proj_with_mqa", "kv_a_proj_with_mqa": "q_a_proj"}
    dropped = []
    for (kind, leaf), spelt in stored.items():
        partner = partners.get(kind)
        if partner is None:
            # a pre-fused name is dropped, but matters only where the two shards do not fill the parameter
            if not {("q_a_proj", leaf), ("kv_a_proj_with_mqa", leaf)} <= stored.keys():
                dropped += spelt
        elif (partner, leaf) not in stored:
            dropped += spelt
    return sorted(dropped)


#: marker (a list of prefixes, not a shape): the checkpoint stores the draft's fc only under a training
#: wrapper's prefix (:data:`WRAPPER_PREFIXES`), which SGLang 0.5.23 does not strip (:func:`wrapper_prefixed`)
WRAPPER_PREFIXED = "checkpoint.wrapper_prefix"
#: prefixes training wrappers put before every parameter name: DistributedDataParallel / DataParallel
#: (``module.``) and ``torch.compile`` (``_orig_mod.``); either may wrap the other
WRAPPER_PREFIXES = ("module.", "_orig_mod.")


def wrapper_prefixed(names) -> list[str]:
    """The wrapper prefixes (sorted, e.g. ``["module."]``) under which ``names`` store the draft's fc
    (``fc.weight`` or ``model.fc.weight``, or a quantised fc's ``fc.qweight`` and the like,
    :data:`FC_QUANTIZED`) where neither plain spelling is stored as it is: ``module.fc.weight``
    from a DDP save, ``_orig_mod.fc.weight`` from a compiled model's. SGLang's heads match no parameter
    to such names and skip them, the Llama head silently; the fc, which no head takes from the target,
    tells a wrapped save from a stray copy of one tensor."""
    names = {str(n) for n in names}
    fc = set(DRAFT_TENSORS["fc.weight"])
    if fc & names:
        return []
    found = set()
    for name in names:
        prefix, rest = "", name
        while rest.startswith(WRAPPER_PREFIXES):
            cut = next(p for p in WRAPPER_PREFIXES if rest.startswith(p))
            prefix, rest = prefix + cut, rest[len(cut):]
        if prefix and (rest in fc or FC_QUANTIZED.fullmatch(rest)):
            found.add(prefix)
    return sorted(found)


class NestedCheckpoint(UsageError):
    """A PyTorch checkpoint file whose tensors sit only in nested dicts: ``path`` and the top-level
    ``keys`` that hold them, and ``names``, the tensors' names inside those dicts (``fc.weight``; a dict
    nested deeper joins its keys with ``.``). A :class:`~sglang_eagle_cycle.errors.UsageError` (one line) where the
    caller needs the weights (the probe); :func:`read_draft_shapes` reports it as the
    :data:`CHECKPOINT_NESTED` marker instead."""

    def __init__(self, message: str, path: Path, keys: list[str], names: list[str] | None = None):
        super().__init__(message)
        self.path, self.keys, self.names = path, keys, list(names or [])


#: a tensor found only under its ``model.``-prefixed spelling is also reported as ``PREFIXED + canonical``
#: with shape ``[]`` (``"model.fc.weight": []``): SGLang 0.5.23's classes load some names only unprefixed
#: (:func:`stored_name`)
PREFIXED = "model."


#: the modules of an EAGLE-3 head a checkpoint names below ``model.`` (after the prefix): fc, each
#: per-state fc norm, the final norm, the embedding, the one decoder layer (``layers.0.``, or the
#: legacy ``midlayer.``); :func:`prefixed_only` looks at these
_HEAD_MODULE_ROOT = re.compile(r"(?:fc|fc_norm\.\d+|norm|embed_tokens|layers\.0|midlayer)\.")


def module_of(name: str) -> str:
    """The module a checkpoint tensor belongs to, decoder layer spelt ``layers.0.``:
    ``midlayer.mlp.down_proj.weight`` -> ``layers.0.mlp.down_proj``, ``norm.weight`` -> ``norm``."""
    module = name.rsplit(".", 1)[0]
    return "layers.0." + module[len("midlayer."):] if module.startswith("midlayer.") else module


def prefixed_only(names) -> dict[str, list[int]]:
    """Markers ``{"model.X": []}`` for the tensors ``model.X`` (X under a head module: fc, fc_norm.N,
    norm, embed_tokens, layers.0 / midlayer) whose module has no tensor stored without the prefix.

    ``Eagle3DeepseekV2ForCausalLM`` (SGLang 0.5.23) adds ``model.`` to every name it loads, so it skips
    every such tensor and leaves that module unloaded; ``LlamaForCausalLMEagle3`` loads them. A module
    with any unprefixed tensor is left out (``fc.weight`` beside a stray ``model.fc.weight``: loaded).

    Args:
        names: every tensor name of the checkpoint files SGLang loads.
    """
    names = list(names)
    plain = {module_of(n) for n in names if not n.startswith(PREFIXED)}
    found = {}
    for name in sorted(names):
        inner = name[len(PREFIXED):]
        if name.startswith(PREFIXED) and _HEAD_MODULE_ROOT.match(inner) and module_of(inner) not in plain:
            found[name] = []
    return found


def stored_name(header, canonical: str) -> str:
    """The name ``canonical`` (a :data:`DRAFT_TENSORS` key) is stored under in the checkpoint
    :func:`read_draft_shapes` read: ``"model.fc.weight"`` where only the prefixed spelling is there."""
    if canonical == "d2t" and isinstance((header or {}).get(D2T_STORED), str):
        return header[D2T_STORED]
    return PREFIXED + canonical if (PREFIXED + canonical) in (header or {}) else canonical


def _pick(shapes_by_name: dict[str, list[int]], dtypes: dict[str, object] | None = None) -> dict:
    """The :data:`DRAFT_TENSORS` found in ``shapes_by_name`` (name -> shape), with the markers:
    ``"model." + canonical`` (only the prefixed spelling stored), ``"fc.quantized"`` (an fc stored
    quantised and no ``fc.weight``), and :data:`FC_DTYPE` / :data:`FC_SCALES` from ``dtypes`` (name ->
    safetensors dtype string; names it lacks have an unknown dtype, which adds neither)."""
    found: dict = {}
    for canonical, spellings in DRAFT_TENSORS.items():
        for name in spellings:
            if name in shapes_by_name:
                found[canonical] = list(shapes_by_name[name])
                if name == PREFIXED + canonical:
                    found[name] = []
                dtype = (dtypes or {}).get(name)
                if canonical == "fc.weight" and isinstance(dtype, str) and dtype not in FLOAT_DTYPES:
                    found[FC_DTYPE] = dtype
                    scales = sorted(n for n in shapes_by_name if FC_SCALE.fullmatch(n))
                    if scales:
                        found[FC_SCALES] = scales
                break
    if "fc.weight" not in found and any(FC_QUANTIZED.fullmatch(n) for n in shapes_by_name):
        found["fc.quantized"] = []
    if "d2t" not in found:
        both, llama_only = d2t_names(shapes_by_name)
        if both:   # module.d2t and the like: loaded by both heads
            found["d2t"] = list(shapes_by_name[both[0]])
            found[D2T_STORED] = both[0]
        elif llama_only:
            found[D2T_LLAMA_ONLY] = llama_only
    return found


def _from_index(index_path: Path) -> dict:
    try:
        index = json.loads(index_path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{index_path}: cannot read ({exc.strerror or exc})") from None
    except RecursionError:
        raise UsageError(f"{index_path}: invalid JSON (nested too deeply to read)") from None
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise UsageError(f"{index_path}: invalid JSON ({str(exc).splitlines()[0][:120]})") from None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict):
        raise UsageError(f"{index_path}: no 'weight_map' object")
    shards: dict[str, list[str]] = {}
    for canonical, spellings in DRAFT_TENSORS.items():
        if canonical == "d2t" and not any(n in weight_map for n in spellings):
            # module.d2t and the like, which both heads load as d2t (d2t_names)
            spellings = tuple(d2t_names(weight_map)[0][:1])
        for name in spellings:
            if name in weight_map:
                shards.setdefault(str(weight_map[name]), []).append(name)
                break
    shapes: dict[str, list[int]] = {}
    dtypes: dict[str, object] = {}
    headers: dict[str, dict] = {}

    def header_of(shard: str) -> dict:   # each shard's header read once
        if shard not in headers:
            headers[shard] = read_header(index_path.parent / shard)
        return headers[shard]

    def scan(listed, keep) -> None:
        """The tensors ``keep`` takes from every listed shard there is, named by the weight_map or not."""
        for shard in sorted(listed):
            if (index_path.parent / shard).is_file():
                header = header_of(shard)
                shapes.update({n: header[n]["shape"] for n in header if keep(n)})
                dtypes.update({n: header[n].get("dtype") for n in header if keep(n)})

    for shard, names in shards.items():
        shard_path = index_path.parent / shard
        if not shard_path.is_file():
            what = "is not a regular file" if shard_path.exists() else "is missing"
            raise UsageError(f"{index_path}: shard {shard} (holding {', '.join(names)}) {what}")
        header = header_of(shard)
        for name in names:
            if name not in header:
                raise UsageError(f"{shard_path}: index says it holds {name}, its header does not list it")
            shapes[name] = header[name]["shape"]
            dtypes[name] = header[name].get("dtype")
    listed = set(map(str, weight_map.values()))
    absent = sorted(shard for shard in listed if not (index_path.parent / shard).is_file())
    if absent:
        # SGLang 0.5.23 checks every shard the index lists before loading any (filter_duplicate_safetensors_files)
        raise UsageError(f"{index_path}: lists {len(absent)} shard{'s' * (len(absent) != 1)} missing here "
                         f"({short_list(absent)}; an incomplete download?): SGLang {_SGLANG} refuses to load "
                         f"the draft (\"references {len(absent)} shard file(s) missing\"); download "
                         f"{'it' if len(absent) == 1 else 'them'}")
    for name in weight_map:   # an fc stored quantised, named by the index
        if FC_QUANTIZED.fullmatch(str(name)):
            shapes[str(name)] = []
    if not {"fc.weight", "fc.quantized"} & _pick(shapes, dtypes).keys():
        # SGLang loads every tensor of each shard the index lists, not only the names its weight_map
        # spells out: an fc an incomplete weight_map leaves out still loads, so look for it there
        scan(listed - set(shards), lambda n: n in DRAFT_TENSORS["fc.weight"] or FC_QUANTIZED.fullmatch(n))
    picked = _pick(shapes, dtypes)
    only_prefixed = [c for c in DRAFT_TENSORS if PREFIXED + c in picked]
    if only_prefixed:
        # a tensor the weight_map names only as model.X: SGLang also loads an X any listed shard holds
        # unnamed, and X is what the head that skips model.X takes (wiring's prefixed-fc error)
        scan(listed, lambda n: n in only_prefixed)
        picked = _pick(shapes, dtypes)
    names = set(map(str, weight_map))
    if "d2t" not in picked and (llama_only := d2t_names(names)[1]):
        picked[D2T_LLAMA_ONLY] = llama_only
    if prefixed_only(names):
        # the same for any head module named only as model.X: read every listed shard's names, so that
        # an unprefixed tensor of that module the weight_map leaves out still counts
        names.update(n for shard in sorted(listed) if (index_path.parent / shard).is_file() for n in header_of(shard))
    return _add_prefixed(picked, names)


#: PyTorch checkpoint files SGLang 0.5.23's loader leaves out (training state, not weights)
PT_SKIPPED = ("training_args.bin", "optimizer.bin", "optimizer.pt", "scheduler.pt", "scaler.pt")

#: torch dtype -> the safetensors dtype string the header reader reports
_TORCH_DTYPES = {"float16": "F16", "bfloat16": "BF16", "float32": "F32", "float64": "F64",
                 "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2", "int8": "I8", "uint8": "U8",
                 "int16": "I16", "int32": "I32", "int64": "I64", "bool": "BOOL"}


#: the SGLang version whose loader these readers follow
_SGLANG = "0.5.23"

#: how a file that is no checkpoint starts: a Git LFS pointer (a clone without git-lfs), an HTML page
_LFS_POINTER = b"version https://git-lfs.github.com/spec/"
_HTML = (b"<!doctype html", b"<html")


def matching(folder: str | Path, pattern: str) -> list[Path]:
    """The entries of ``folder`` that SGLang 0.5.23's ``glob.glob(os.path.join(folder, pattern))`` finds,
    sorted: a name starting with ``.`` is left out (glob's rule; ``Path.glob`` keeps it: a macOS
    ``._model.safetensors`` beside the real file), and any kind of entry is kept (a directory named
    ``pytorch_model.bin``, a broken symlink), as SGLang then tries to load it."""
    return sorted(p for p in Path(folder).glob(pattern) if not p.name.startswith("."))


def pytorch_files(folder: str | Path) -> list[Path]:
    """The PyTorch checkpoint files SGLang 0.5.23's default loader (``--load-format auto``) reads from
    a model folder that holds no ``*.safetensors``: every ``*.bin`` (no index is consulted, not even
    ``pytorch_model.bin.index.json``), or, where there is none, every ``*.pt``; the pattern is chosen
    before the training-state files (:data:`PT_SKIPPED`) are left out, as SGLang does. Sorted
    (:func:`matching`: entries that are no regular file are kept, their readers name them); ``[]``
    when there are none.

    Raises:
        UsageError: the only ``*.bin`` files are training state while ``*.pt`` files are there: SGLang
            takes the ``*.bin`` pattern, is left with no file and stops ("Cannot find any model weights").
    """
    folder = Path(folder)
    bins, pts = matching(folder, "*.bin"), matching(folder, "*.pt")
    if not bins:
        return [f for f in pts if not f.name.endswith(PT_SKIPPED)]
    kept = [f for f in bins if not f.name.endswith(PT_SKIPPED)]
    pts = [f for f in pts if not f.name.endswith(PT_SKIPPED)]
    if not kept and pts:
        raise UsageError(f"{folder}: SGLang {_SGLANG} finds no weights here: it takes the *.bin files when "
                         f"there are any, these ({', '.join(f.name for f in bins)}) are training state it leaves "
                         f"out, and it never looks at the *.pt files ({', '.join(f.name for f in pts)}); move "
                         f"those *.bin files out")
    return kept


def _not_weights(path: Path, head: bytes) -> str | None:
    """Why a checkpoint file whose first bytes are ``head`` holds no weights at all, or None: empty, a
    Git LFS pointer, an HTML page (a download that fetched an error page)."""
    if not head:
        return f"{path}: an empty file (0 bytes), not a checkpoint: download it again"
    if head.startswith(_LFS_POINTER):
        return (f"{path}: a Git LFS pointer, not the weights (a git clone without git-lfs): fetch them with "
                f"`git lfs pull` or `huggingface-cli download`")
    if head.lstrip().lower().startswith(_HTML):
        return f"{path}: an HTML page, not a checkpoint (a failed download?): download it again"
    return None


def _regular_file(path: Path) -> None:
    """Raise a one-line UsageError unless ``path`` is a regular file (reading a FIFO would block)."""
    if path.is_file():
        return
    if path.is_dir():
        what = "a directory, not a checkpoint file"
    elif path.is_symlink() and not path.exists():
        what = f"a broken symlink (its target {os.readlink(path)} is missing: an incomplete download?)"
    elif not path.exists():
        what = "no such file"
    else:
        what = "not a regular file"
    raise UsageError(f"{path}: {what}; SGLang {_SGLANG}'s loader would fail on it")


def _torch_load_error(exc: BaseException) -> str:
    """The one useful line of a ``torch.load`` failure: the refused class or pickle opcode of a
    ``weights_only`` load (whose message opens with advice lines), else the first line."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip()
    refused = re.search(r"Unsupported global: GLOBAL ([\w.]+)", text)
    if refused:
        return (f"it pickles an object of class {refused.group(1)}, which torch.load(weights_only=True) "
                f"refuses, as SGLang {_SGLANG}'s loader does: save the name -> tensor dict alone")
    detail = text.split("WeightsUnpickler error:", 1)
    if len(detail) == 2 and detail[1].strip():
        return f"not a pickle torch.save writes: {detail[1].strip().splitlines()[0][:120]}"
    return (text.splitlines() or [type(exc).__name__])[0][:160]


def _nested_names(value, depth: int = 3, prefix: str = "") -> list[str]:
    """The names of the tensors in the dict ``value``, a dict inside it joining its key with ``.``."""
    import torch

    names = []
    for key, item in value.items():
        if isinstance(item, torch.Tensor):
            names.append(prefix + str(key))
        elif depth > 0 and isinstance(item, dict):
            names += _nested_names(item, depth - 1, f"{prefix}{key}.")
    return names


def _nests_tensors(value, depth: int = 3) -> bool:
    import torch

    if isinstance(value, torch.Tensor):
        return True
    return depth > 0 and isinstance(value, dict) and any(_nests_tensors(v, depth - 1) for v in value.values())


def load_pytorch_file(path: str | Path, meta: bool = True, load_legacy: bool = True) -> dict:
    """The name -> tensor entries SGLang 0.5.23 takes from one PyTorch checkpoint file: it loads the file
    with ``torch.load(weights_only=True)`` and hands every top-level item of the dict to the model, whose
    ``load_weights`` skips names it has no parameter for (so non-tensor entries are left out here).

    A zip-format file (``torch.save`` since PyTorch 1.6) is read onto the ``meta`` device when ``meta``:
    its pickle is parsed, no tensor data is read (milliseconds for a checkpoint of any size). A file in
    the legacy format cannot be read that way and is loaded on the CPU, as SGLang itself loads it, when
    ``load_legacy``; False leaves such a file unread (a UsageError). ``meta`` False loads every tensor on
    the CPU (a tensor saved on the meta device stays there). No code in the pickle runs.

    Raises:
        UsageError: one line: the path is no regular file (a directory, a broken symlink), the file is
            empty, a Git LFS pointer, an HTML page, a damaged zip, unreadable, not a PyTorch checkpoint,
            holds no name -> tensor mapping, keeps its tensors only in a nested dict (``{"state_dict":
            {...}}``: SGLang would load none of them and leave the draft uninitialised, silently), or is
            in the legacy format and ``load_legacy`` is False.
    """
    import zipfile

    import torch

    path = Path(path)
    _regular_file(path)
    try:
        with path.open("rb") as fh:
            head = fh.read(64)
        why = _not_weights(path, head)
        if why:
            raise UsageError(why)
        zipped = zipfile.is_zipfile(path)
        if not zipped and head.startswith(b"PK\x03\x04"):
            raise UsageError(f"{path}: a damaged zip archive (no central directory: a truncated download?): "
                             "download it again")
        if not zipped and not load_legacy:
            raise UsageError(f"{path}: a PyTorch checkpoint in the pre-1.6 format, whose shapes cannot be read "
                             "without loading it")
        # a plain pickle draws PyTorch UserWarnings (its pickle protocol) ahead of the one line that says
        # what is wrong with the file: the user sees that line alone
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            state = torch.load(path, map_location="meta" if zipped and meta else "cpu", weights_only=True)
    except UsageError:
        raise
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except Exception as exc:  # noqa: BLE001 - a damaged or foreign file is unusable input
        raise UsageError(f"{path}: unreadable PyTorch checkpoint ({_torch_load_error(exc)})") from None
    if not isinstance(state, dict):
        raise UsageError(f"{path}: a PyTorch checkpoint that is no state dict (it holds a "
                         f"{type(state).__name__}, SGLang loads name -> tensor mappings)")
    tensors = {k: v for k, v in state.items() if isinstance(k, str) and isinstance(v, torch.Tensor)}
    inner = {str(k): v for k, v in state.items() if isinstance(v, dict) and _nests_tensors(v)}
    nested = list(inner)
    if not tensors and nested:
        raise NestedCheckpoint(f"{path}: its tensors are nested under {', '.join(map(repr, nested[:3]))}, not at "
                               f"the top level: SGLang {_SGLANG} loads top-level name -> tensor entries only, so it "
                               f"would load none and leave the draft uninitialised; save the inner dict: "
                               f"torch.save(ckpt[{nested[0]!r}], path)", path, nested,
                               [n for v in inner.values() for n in _nested_names(v)])
    return tensors


def read_pytorch_shapes(path: str | Path, load_legacy: bool = True) -> tuple[dict[str, list[int]], dict[str, str]]:
    """Tensor shapes and dtypes of one PyTorch checkpoint file (``pytorch_model.bin``, ``*.pt``), read
    by :func:`load_pytorch_file` (onto the ``meta`` device: no tensor data read; a pre-1.6 file on the
    CPU when ``load_legacy``: the CLI; the server's start-up check, run in every TP rank's process
    before SGLang loads the draft, passes False and leaves such a file unread).

    Returns:
        ``(shapes, dtypes)``: tensor name -> shape (list of ints), and name -> safetensors dtype
        string (``"BF16"``, ``"F8_E4M3"``; a dtype without one keeps torch's name). Entries whose
        value is no tensor are left out.

    Raises:
        UsageError: as :func:`load_pytorch_file`.
    """
    shapes, dtypes = {}, {}
    for name, value in load_pytorch_file(path, meta=True, load_legacy=load_legacy).items():
        shapes[name] = list(value.shape)
        short = str(value.dtype).removeprefix("torch.")
        dtypes[name] = _TORCH_DTYPES.get(short, short)
    return shapes, dtypes


def read_draft_shapes(location: str | Path, load_legacy: bool = True) -> dict:
    """Shapes of the :data:`DRAFT_TENSORS` (``fc.weight``, ``lm_head.weight``, ``d2t``, ``input_norm.weight``,
    ``fc_norm.0.weight``) in a draft checkpoint.

    ``location`` is the draft's model directory (a ``config.json`` path means its
    folder, a ``.safetensors``, ``.bin`` or ``.pt`` path means that file).  Reads the files SGLang
    loads: with ``model.safetensors.index.json``, the shards that hold the wanted
    tensors (every listed shard when its weight_map names no fc); without one,
    every ``*.safetensors`` file (``model.safetensors`` alone beside a Mistral
    ``consolidated.safetensors``; names starting with ``.`` left out, :func:`matching`); with no
    ``*.safetensors`` at all, the PyTorch files SGLang's default loader falls back to, any index
    beside them ignored as SGLang ignores it (:func:`pytorch_files`: ``pytorch_model.bin`` and its
    shards, shapes read without the tensor data, :func:`read_pytorch_shapes`; ``load_legacy`` False
    leaves a file in PyTorch's pre-1.6 format unread, a UsageError).

    Returns:
        canonical name -> shape (a list of ints); only the tensors found, ``{}``
        when the directory holds no checkpoint SGLang would load. Five kinds of marker, shape ``[]``:
        :data:`CHECKPOINT_READ` (a checkpoint whose tensors include none of these: the result is then
        that marker alone, never ``{}``),
        ``"fc.quantized"`` (an fc stored quantised, no plain ``fc.weight``), ``"model." +
        canonical`` (the tensor found only under its ``model.``-prefixed name; :func:`stored_name`),
        ``"model.X"`` for a head module's tensor whose module has no unprefixed tensor
        (:func:`prefixed_only`; with an index, every listed shard's names are read when the weight_map
        names one, so that an unprefixed tensor it leaves out counts), and :data:`QUANT_CONFIG_FILE` where
        the folder holds that file beside a checkpoint. Two markers hold no shape:
        :data:`FC_DTYPE` (a dtype string such as ``"F8_E4M3"``) where ``fc.weight`` is stored in a dtype
        outside :data:`FLOAT_DTYPES`, and beside it :data:`FC_SCALES` (a list of names) where its scale
        tensors are stored (with an index: those the weight_map names). For PyTorch files:
        :data:`CHECKPOINT_NESTED` and :data:`CHECKPOINT_NESTED_TENSORS` (tensors in a nested dict), and
        :data:`CHECKPOINT_MISSING_SHARDS` (shards a ``pytorch_model.bin.index.json`` lists that are not
        there; SGLang never reads that index, :func:`unloaded_index_shards`).

    Raises:
        UsageError: a corrupt header or index, a shard a ``model.safetensors.index.json`` lists is missing
            (SGLang checks them all before loading), an unusable PyTorch checkpoint file
            (:func:`load_pytorch_file`), ``*.bin`` files that are all training state beside ``*.pt`` files
            (:func:`pytorch_files`), or a ``pytorch_model.bin.index.json`` whose shards are all missing with
            no other weights (SGLang finds none).
    """
    path = Path(location)
    if path.is_file() and path.suffix in (".bin", ".pt"):
        return _read_pytorch([path], load_legacy)
    if path.is_file() and path.suffix == ".safetensors":
        header = read_header(path)
        return _mark_read(_with_markers({k: v["shape"] for k, v in header.items()},
                                   {k: v.get("dtype") for k, v in header.items()}), bool(header))
    folder = path if path.is_dir() else path.parent
    if not folder.is_dir():
        return {}
    files = matching(folder, "*.safetensors")
    if not files:
        # no safetensors: SGLang's default loader falls back to the PyTorch files (pytorch_model.bin) and
        # consults no index, not even a model.safetensors.index.json left beside them
        pt_files = pytorch_files(folder)
        if pt_files:
            return _with_quant_file(_read_pytorch(pt_files, load_legacy, folder), folder)
        listed = sorted(set((_bin_index_map(folder) or {}).values()))
        if listed and not (folder / INDEX_FILE).exists():
            # the shards of a sharded .bin checkpoint, none of them here: SGLang finds no weights at all
            raise UsageError(f"{folder / PT_INDEX_FILE}: lists {len(listed)} shard{'s' * (len(listed) != 1)} "
                             f"({short_list(listed)}) and none is here (an incomplete download?): SGLang "
                             f"{_SGLANG} finds no weights to load (\"Cannot find any model weights\"); download "
                             f"{'it' if len(listed) == 1 else 'them'}")
    index = folder / INDEX_FILE
    if index.exists() and not index.is_file():   # a FIFO would block the read
        raise UsageError(f"{index}: not a regular file")
    if index.is_file():   # SGLang loads the files its index lists (a model.safetensors beside them only if listed)
        return _with_quant_file(_mark_read(_from_index(index), True), folder)
    if [f.name for f in files] == ["consolidated.safetensors", SINGLE_FILE]:
        files = files[1:]   # SGLang skips a Mistral consolidated file beside model.safetensors
    # without an index SGLang loads every *.safetensors, model.safetensors and whatever lies beside it
    shapes: dict[str, list[int]] = {}
    dtypes: dict[str, object] = {}
    for file in files:
        header = read_header(file)
        shapes.update({k: v["shape"] for k, v in header.items()})
        dtypes.update({k: v.get("dtype") for k, v in header.items()})
    return _with_quant_file(_mark_read(_with_markers(shapes, dtypes), bool(shapes)), folder) if files else {}


def _read_pytorch(files: list[Path], load_legacy: bool, folder: Path | None = None) -> dict:
    """:func:`read_draft_shapes` of the PyTorch checkpoint ``files`` SGLang loads: their tensors' markers,
    with :data:`CHECKPOINT_NESTED` naming the files whose tensors sit in a nested dict (and
    :data:`CHECKPOINT_NESTED_TENSORS` the names inside); files SGLang loads were read, so without a
    tensor in them the draft loads none (:data:`CHECKPOINT_READ`). With ``folder`` (the draft folder
    ``files`` were found in), :data:`CHECKPOINT_MISSING_SHARDS` for the shards its
    :data:`PT_INDEX_FILE` lists that SGLang does not load (:func:`unloaded_index_shards`)."""
    shapes: dict[str, list[int]] = {}
    dtypes: dict[str, object] = {}
    nested: list[str] = []
    nested_names: list[str] = []
    for file in files:
        try:
            part_shapes, part_dtypes = read_pytorch_shapes(file, load_legacy)
        except NestedCheckpoint as exc:
            nested += [f"{file.name}[{key!r}]" for key in exc.keys]
            nested_names += exc.names
            continue
        shapes.update(part_shapes)
        dtypes.update(part_dtypes)
    found = _mark_read(_with_markers(shapes, dtypes), True)
    if nested:
        found.pop(CHECKPOINT_READ, None)
        found[CHECKPOINT_NESTED] = nested
        found[CHECKPOINT_NESTED_TENSORS] = sorted(set(nested_names))
    missed = unloaded_index_shards(folder, files, shapes) if folder is not None else {}
    if missed:
        found[CHECKPOINT_MISSING_SHARDS] = missed
    return found


def _bin_index_map(folder: Path) -> dict[str, str] | None:
    """The weight_map (tensor name -> shard file name) of ``folder``'s :data:`PT_INDEX_FILE`, or None where
    there is none, or it cannot be read or is no such map: SGLang never reads this file, so a damaged
    one changes nothing it does."""
    index = folder / PT_INDEX_FILE
    if not index.is_file():
        return None
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map")
    except (OSError, ValueError, RecursionError, AttributeError):
        return None
    if not isinstance(weight_map, dict):
        return None
    return {str(name): shard for name, shard in weight_map.items() if isinstance(shard, str)}


def unloaded_index_shards(folder: Path, loaded: list[Path], names_read) -> dict[str, list[str]]:
    """Shard -> tensor names (sorted) for each shard ``folder``'s :data:`PT_INDEX_FILE` lists that is not in
    ``folder`` (nor one of the ``loaded`` files), keeping the names that no loaded file holds (``names_read``).

    SGLang 0.5.23 loads a PyTorch checkpoint by globbing ``*.bin`` (else ``*.pt``) and never reads this
    index (``DefaultModelLoader._prepare_weights``), so a shard it lists that is missing (an interrupted
    download) is not noticed: the tensors the index places there are simply never loaded. A name a loaded
    file holds anyway (the shards merged into one file, the index left stale) loads, and is left out.
    ``{}`` where there is no usable index."""
    weight_map = _bin_index_map(folder)
    if not weight_map:
        return {}
    loaded_names = {f.name for f in loaded}
    read = set(names_read)
    missed: dict[str, list[str]] = {}
    for name, shard in weight_map.items():
        if shard not in loaded_names and name not in read and not os.path.lexists(folder / shard):
            missed.setdefault(shard, []).append(name)
    return {shard: sorted(names) for shard, names in sorted(missed.items())}


def short_list(names: list[str], shown: int = 3) -> str:
    """``names`` joined for a one-line message, the first ``shown`` of them and how many more."""
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


def _mark_read(found: dict, any_tensor: bool) -> dict:
    """``found`` with the :data:`CHECKPOINT_READ` marker where it is empty though the checkpoint held tensors."""
    if not found and any_tensor:
        found[CHECKPOINT_READ] = []
    return found


def _with_quant_file(found: dict, folder: Path) -> dict:
    """``found`` with the :data:`QUANT_CONFIG_FILE` marker where ``folder`` holds that file."""
    if (folder / QUANT_CONFIG_FILE).is_file():
        found[QUANT_CONFIG_FILE] = []
    return found


def _with_markers(shapes_by_name: dict[str, list[int]], dtypes: dict[str, object]) -> dict:
    """:func:`_pick` of every tensor, plus the :func:`prefixed_only` markers."""
    return _add_prefixed(_pick(shapes_by_name, dtypes), shapes_by_name)


def _add_prefixed(found: dict, names) -> dict:
    """``found`` with the :func:`prefixed_only` markers of ``names`` (tensor names) it lacks, and the
    :data:`MLA_A_PROJ_DROPPED` marker where :func:`mla_a_proj_dropped` names any."""
    names = list(names)
    for name, shape in prefixed_only(names).items():
        found.setdefault(name, shape)
    dropped = mla_a_proj_dropped(names)
    if dropped:
        found[MLA_A_PROJ_DROPPED] = dropped
    wrapped = wrapper_prefixed(names)
    if wrapped:
        found[WRAPPER_PREFIXED] = wrapped
    return found


def write_header_only(path: str | Path, shapes: dict[str, list[int]], dtype: str = "BF16") -> Path:
    """Write a safetensors file holding only a header for ``shapes`` (no tensor bytes).

    For tests and examples: the result is readable by :func:`read_header`, not
    loadable as weights.  Offsets are laid out as if the data followed.
    """
    header, offset = {}, 0
    for name, shape in shapes.items():
        count = 1
        for d in shape:
            count *= d
        kind = "I64" if name in ("d2t", "t2d") else dtype
        size = (count * SAFETENSORS_DTYPE_BITS.get(kind, 16) + 7) // 8
        header[name] = {"dtype": kind, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    blob = json.dumps(header, separators=(",", ":")).encode("utf-8")
    blob += b" " * (-len(blob) % 8)  # the format pads the header to 8 bytes
    path = Path(path)
    path.write_bytes(struct.pack("<Q", len(blob)) + blob)
    return path
