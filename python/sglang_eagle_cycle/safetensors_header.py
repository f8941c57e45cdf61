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
import re
import struct
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

#: a header larger than this is not a real header (safetensors itself caps it at 100 MB)
MAX_HEADER_BYTES = 100 * 1024 * 1024

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"


def read_header(path: str | Path) -> dict[str, dict]:
    """Return the JSON header of one ``.safetensors`` file (without ``__metadata__``).

    Reads ``8 + n`` bytes, never the tensor data.

    Raises:
        UsageError: the file cannot be read, or its header is truncated, too
            large, not UTF-8 JSON, or not an object of tensor entries.
    """
    path = Path(path)
    try:
        if path.exists() and not path.is_file():   # a FIFO or a device would block the read, or never end
            raise UsageError(f"{path}: not a regular file")
        with path.open("rb") as fh:
            prefix = fh.read(8)
            if len(prefix) < 8:
                raise UsageError(f"{path}: not a safetensors file (shorter than its 8-byte header length)")
            (n,) = struct.unpack("<Q", prefix)
            if n == 0 or n > MAX_HEADER_BYTES:
                raise UsageError(f"{path}: corrupt safetensors header (declared length {n} bytes)")
            raw = fh.read(n)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(raw) < n:
        raise UsageError(f"{path}: corrupt safetensors header (declares {n} bytes, file has {len(raw)})")
    try:
        header = json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise UsageError(f"{path}: corrupt safetensors header (JSON nested too deeply to read)") from None
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise UsageError(f"{path}: corrupt safetensors header ({str(exc).splitlines()[0][:120]})") from None
    if not isinstance(header, dict):
        raise UsageError(f"{path}: corrupt safetensors header (not a JSON object)")
    header.pop("__metadata__", None)
    for name, entry in header.items():
        if not isinstance(entry, dict) or not _is_shape(entry.get("shape")):
            raise UsageError(f"{path}: corrupt safetensors header (entry {name!r} has no integer shape)")
    return header


def _is_shape(value) -> bool:
    return isinstance(value, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value)


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
    for spellings in DRAFT_TENSORS.values():
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
    for name in weight_map:   # an fc stored quantised, named by the index
        if FC_QUANTIZED.fullmatch(str(name)):
            shapes[str(name)] = []
    listed = set(map(str, weight_map.values()))
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


def pytorch_files(folder: str | Path) -> list[Path]:
    """The PyTorch checkpoint files SGLang 0.5.23's default loader (``--load-format auto``) reads from
    a model folder that holds no ``*.safetensors``: every ``*.bin`` (no index is consulted), or, where
    there is none, every ``*.pt``; the pattern is chosen before the training-state files
    (:data:`PT_SKIPPED`) are left out, as SGLang does. Sorted; ``[]`` when there are none."""
    folder = Path(folder)
    for pattern in ("*.bin", "*.pt"):
        files = sorted(f for f in folder.glob(pattern))
        if files:
            return [f for f in files if f.is_file() and not f.name.endswith(PT_SKIPPED)]
    return []


def read_pytorch_shapes(path: str | Path, load_legacy: bool = True) -> tuple[dict[str, list[int]], dict[str, str]]:
    """Tensor shapes and dtypes of one PyTorch checkpoint file (``pytorch_model.bin``, ``*.pt``).

    A zip-format file (``torch.save`` since PyTorch 1.6) is read onto the ``meta`` device: its
    pickle is parsed, no tensor data is read (milliseconds for a checkpoint of any size). A file in
    the legacy format cannot be read that way and is loaded on the CPU, as SGLang itself loads it,
    when ``load_legacy`` (the CLI); the server's start-up check, run in every TP rank's process before
    SGLang loads the draft, passes False and leaves such a file unread. Both with ``weights_only=True``
    (no code in the pickle runs).

    Returns:
        ``(shapes, dtypes)``: tensor name -> shape (list of ints), and name -> safetensors dtype
        string (``"BF16"``, ``"F8_E4M3"``; a dtype without one keeps torch's name). Entries whose
        value is no tensor are left out.

    Raises:
        UsageError: the file is unreadable, not a PyTorch checkpoint, holds no name -> tensor mapping,
            or is in the legacy format and ``load_legacy`` is False.
    """
    import zipfile

    import torch

    path = Path(path)
    try:
        zipped = zipfile.is_zipfile(path)
        if not zipped and not load_legacy:
            raise UsageError(f"{path}: a PyTorch checkpoint in the pre-1.6 format, whose shapes cannot be read "
                             "without loading it")
        state = torch.load(path, map_location="meta" if zipped else "cpu", weights_only=True)
    except UsageError:
        raise
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except Exception as exc:  # noqa: BLE001 - a damaged or foreign file is unusable input
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        raise UsageError(f"{path}: unreadable PyTorch checkpoint ({first})") from None
    if not isinstance(state, dict):
        raise UsageError(f"{path}: a PyTorch checkpoint that is no state dict (it holds a "
                         f"{type(state).__name__}, SGLang loads name -> tensor mappings)")
    shapes, dtypes = {}, {}
    for name, value in state.items():
        if isinstance(name, str) and isinstance(value, torch.Tensor):
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
    ``consolidated.safetensors``); with no safetensors at all, the PyTorch files SGLang's default
    loader falls back to (:func:`pytorch_files`: ``pytorch_model.bin`` and its shards, shapes read
    without the tensor data, :func:`read_pytorch_shapes`; ``load_legacy`` False leaves a file in
    PyTorch's pre-1.6 format unread, a UsageError).

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
        tensors are stored (with an index: those the weight_map names).

    Raises:
        UsageError: a corrupt header or index, a shard the index names is missing, or an unreadable
            PyTorch checkpoint file.
    """
    path = Path(location)
    if path.is_file() and path.suffix in (".bin", ".pt"):
        shapes, dtypes = read_pytorch_shapes(path, load_legacy)
        return _mark_read(_with_markers(shapes, dtypes), bool(shapes))
    if path.is_file() and path.suffix == ".safetensors":
        header = read_header(path)
        return _mark_read(_with_markers({k: v["shape"] for k, v in header.items()},
                                   {k: v.get("dtype") for k, v in header.items()}), bool(header))
    folder = path if path.is_dir() else path.parent
    if not folder.is_dir():
        return {}
    index = folder / INDEX_FILE
    if index.exists() and not index.is_file():   # a FIFO would block the read
        raise UsageError(f"{index}: not a regular file")
    if index.is_file():   # SGLang loads the files its index lists (a model.safetensors beside them only if listed)
        return _with_quant_file(_mark_read(_from_index(index), True), folder)
    files = sorted(folder.glob("*.safetensors"))
    if [f.name for f in files] == ["consolidated.safetensors", SINGLE_FILE]:
        files = files[1:]   # SGLang skips a Mistral consolidated file beside model.safetensors
    # without an index SGLang loads every *.safetensors, model.safetensors and whatever lies beside it
    shapes: dict[str, list[int]] = {}
    dtypes: dict[str, object] = {}
    for file in files:
        header = read_header(file)
        shapes.update({k: v["shape"] for k, v in header.items()})
        dtypes.update({k: v.get("dtype") for k, v in header.items()})
    if not files:
        # no safetensors: SGLang's default loader falls back to the PyTorch files (pytorch_model.bin)
        files = pytorch_files(folder)
        for file in files:
            part_shapes, part_dtypes = read_pytorch_shapes(file, load_legacy)
            shapes.update(part_shapes)
            dtypes.update(part_dtypes)
    return _with_quant_file(_mark_read(_with_markers(shapes, dtypes), bool(shapes)), folder) if files else {}


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
    """``found`` with the :func:`prefixed_only` markers of ``names`` (tensor names) it lacks."""
    for name, shape in prefixed_only(names).items():
        found.setdefault(name, shape)
    return found


def write_header_only(path: str | Path, shapes: dict[str, list[int]], dtype: str = "BF16") -> Path:
    """Write a safetensors file holding only a header for ``shapes`` (no tensor bytes).

    For tests and examples: the result is readable by :func:`read_header`, not
    loadable as weights.  Offsets are laid out as if the data followed.
    """
    itemsize = {"BF16": 2, "F16": 2, "F32": 4, "I64": 8, "I32": 4}.get(dtype, 2)
    header, offset = {}, 0
    for name, shape in shapes.items():
        count = 1
        for d in shape:
            count *= d
        kind = "I64" if name in ("d2t", "t2d") else dtype
        size = count * (8 if kind == "I64" else itemsize)
        header[name] = {"dtype": kind, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    blob = json.dumps(header, separators=(",", ":")).encode("utf-8")
    blob += b" " * (-len(blob) % 8)  # the format pads the header to 8 bytes
    path = Path(path)
    path.write_bytes(struct.pack("<Q", len(blob)) + blob)
    return path
