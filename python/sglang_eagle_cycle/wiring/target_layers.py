"""Refuse a probe target whose config and checkpoint disagree on how many decoder layers it has.

The probe builds the target from its ``config.json`` with ``transformers``, which makes exactly
``num_hidden_layers`` decoder layers and then fills them from the checkpoint. Layers the checkpoint
holds past that count are dropped (a table of UNEXPECTED keys on stderr, nothing more), and layers
it lacks keep random initial weights (MISSING). Either way the probe would score a model other than
the one in the checkpoint and say nothing. The layer indices are read from the names in the
checkpoint's safetensors headers (or its index), so nothing is loaded and a refusal comes before
the target does.

A layer past ``N`` that is a multi-token-prediction layer is allowed: DeepSeek-V3 and GLM-4.5 store
theirs there (``model.layers.61`` of DeepSeek-V3's 61), and ``transformers`` rightly leaves it out of
the causal LM. It is told by its own tensors (``eh_proj``, ``enorm``, ``hnorm``, ``shared_head``:
:data:`MTP_PARTS`), not by ``num_nextn_predict_layers``: a count alone had let an ordinary last
decoder layer past a config one layer short be dropped without a word.

    from sglang_eagle_cycle.wiring.target_layers import check_target_layers
    check_target_layers(Path("target"), target_cfg, Path("target/config.json"))   # UsageError on a mismatch

Pure standard library, but for a lone ``pytorch_model.bin`` (its names read by ``torch`` onto the
``meta`` device, no tensor data).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from ..errors import UsageError

#: a decoder layer's tensor as causal LMs and their multimodal wrappers name it: ``model.layers.7.``,
#: ``language_model.model.layers.7.``, ``model.language_model.layers.7.``, ``llm.model.layers.7.``,
#: ``thinker.model.layers.7.``. Anchored at the start, so a vision tower's ``...encoder.layers.7.``
#: never counts; a checkpoint with no such name (``transformer.h.7.``) is left unchecked.
LAYER_NAME = re.compile(r"((?:model\.(?:language_model\.)?|language_model\.(?:model\.)?|llm\.(?:model\.)?"
                        r"|thinker\.model\.)layers\.)(\d+)\.")

#: tensors only a multi-token-prediction layer has (DeepSeek-V3, GLM-4.5: ``model.layers.61.eh_proj.weight``)
MTP_PARTS = ("eh_proj", "enorm", "hnorm", "shared_head")
_MTP_NAME = re.compile(r"\.(?:" + "|".join(MTP_PARTS) + r")\.")

#: the checkpoint files ``transformers`` loads from a model folder, in the order it looks for them
SAFE_SINGLE, SAFE_INDEX = "model.safetensors", "model.safetensors.index.json"
PT_SINGLE, PT_INDEX = "pytorch_model.bin", "pytorch_model.bin.index.json"


def checkpoint_names(folder: Path) -> tuple[list[str], str] | None:
    """``(tensor names, file)`` of the checkpoint ``transformers`` loads from ``folder``: the first of
    ``model.safetensors`` (its header), ``model.safetensors.index.json`` (its ``weight_map`` and the
    headers of the listed shards that are there), ``pytorch_model.bin`` (its pickle read onto the
    ``meta`` device; a file in the pre-1.6 format, which cannot be read so, loaded on the CPU as
    ``transformers`` is about to load it anyway), ``pytorch_model.bin.index.json`` (its
    ``weight_map``). None where there is none of them.

    Raises:
        UsageError: a safetensors header, PyTorch checkpoint or index that cannot be read or parsed
            (one line naming the file, as :func:`~sglang_eagle_cycle.safetensors_header.read_header`
            and :func:`~sglang_eagle_cycle.safetensors_header.load_pytorch_file` say it).
    """
    from ..safetensors_header import load_pytorch_file, read_header

    folder = Path(folder)
    if (folder / SAFE_SINGLE).is_file():
        return list(read_header(folder / SAFE_SINGLE)), SAFE_SINGLE
    if (folder / SAFE_INDEX).is_file():
        names = _weight_map(folder / SAFE_INDEX)
        for shard in sorted(set(names.values())):
            if (folder / shard).is_file():   # a missing shard is for transformers to name
                names.update(dict.fromkeys(read_header(folder / shard), shard))
        return list(names), SAFE_INDEX
    if (folder / PT_SINGLE).is_file():
        return list(load_pytorch_file(folder / PT_SINGLE, meta=True, load_legacy=True)), PT_SINGLE
    if (folder / PT_INDEX).is_file():
        return list(_weight_map(folder / PT_INDEX)), PT_INDEX
    return None


def _weight_map(index: Path) -> dict[str, str]:
    """The ``weight_map`` of a checkpoint index, tensor name -> shard file name.

    Raises:
        UsageError: the index cannot be read, is no JSON, or has no ``weight_map`` object.
    """
    try:
        data = json.loads(index.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{index}: cannot read ({exc.strerror or exc})") from None
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"{index}: invalid JSON ({str(exc).splitlines()[0][:120]})") from None
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict):
        raise UsageError(f"{index}: no 'weight_map' object")
    for name, shard in weight_map.items():
        if not isinstance(shard, str):
            raise UsageError(f"{index}: weight_map[{json.dumps(name)}] is {json.dumps(shard)}, not a shard file name")
    return dict(weight_map)


def layer_indices(names) -> dict[int, str]:
    """Decoder-layer index -> the name prefix it was found under (``"model.layers."``) for every
    tensor name :data:`LAYER_NAME` matches."""
    out: dict[int, str] = {}
    for name in names:
        m = LAYER_NAME.match(name)
        if m:
            out.setdefault(int(m.group(2)), m.group(1))
    return out


def mtp_layers(names) -> set[int]:
    """Indices of the decoder-layer slots (:data:`LAYER_NAME`) that hold a multi-token-prediction
    layer: one of their tensors is named by :data:`MTP_PARTS`."""
    out = set()
    for name in names:
        m = LAYER_NAME.match(name)
        if m and _MTP_NAME.search(name, m.end() - 1):
            out.add(int(m.group(2)))
    return out


def _spans(indices) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``"0-2, 5, 7-8"``."""
    out, run = [], []
    for i in sorted(indices):
        if run and i != run[-1] + 1:
            out.append(run)
            run = []
        run.append(i)
    if run:
        out.append(run)
    return ", ".join(f"{r[0]}" if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in out)


def _layers(indices) -> str:
    """``"layer 7"`` or ``"layers 7-9"``."""
    return f"layer{'s' * (len(indices) != 1)} {_spans(indices)}"


def layer_mismatch(found: dict[int, str], n: int, key: str, mtp: set[int] | frozenset = frozenset(),
                   source: str = "the checkpoint") -> str | None:
    """What is wrong with ``source`` (a checkpoint) holding decoder layers ``found``
    (:func:`layer_indices`) for a config declaring ``n`` of them under ``key``: the message, or None
    where they agree (or ``found`` is empty: a layout :data:`LAYER_NAME` does not know). ``mtp``:
    indices holding multi-token-prediction layers (:func:`mtp_layers`); those at ``n`` or past it are
    no decoder layers (``transformers`` leaves them out, rightly).

    Extra decoder layers (past ``n - 1``) are named, every one of them, with the highest; absent ones
    below ``n`` by the first of them. The fix: where the extra layers follow the declared ones, the
    count that takes them all in; where only the top layers are absent and no MTP layer sits past
    them, the count of those present; else completing the checkpoint (an MTP layer at ``n`` says
    ``n`` is right)."""
    if not found:
        return None
    extra_mtp = {i for i in found if i >= n and i in mtp}
    decoder = {i: p for i, p in found.items() if i not in extra_mtp}
    if not decoder:
        return None
    top = max(decoder)
    mtp_text = f"; multi-token-prediction {_layers(sorted(extra_mtp))}" if extra_mtp else ""
    if top >= n:
        cut = sorted(i for i in decoder if i >= n)
        absent_above = [i for i in range(n, top + 1) if i not in decoder]
        fix = (f"set {key} to {top + 1} to probe the whole checkpoint" if not absent_above else
               f"complete the checkpoint ({_layers(absent_above)} absent between them)")
        return (f"{key} is {n}, but {source} holds decoder layers up to {decoder[top]}{top}{mtp_text}: transformers "
                f"would build {n} layers, drop {_layers(cut)}, and the probe would score that cut-down model; "
                f"{fix}, or save a checkpoint without {_layers(cut)} to probe the cut-down one")
    absent = [i for i in range(n) if i not in decoder]
    if not absent:
        return None
    if absent[0] > top and not extra_mtp:   # only the top is missing
        fix = f"set {key} to {absent[0]} if those are all its layers, or complete the checkpoint"
    elif absent[0] > top:   # an MTP layer at n says n is the count
        fix = f"complete the checkpoint (its {_layers(sorted(extra_mtp))} at {n} and past says {key} {n} is right)"
    else:
        fix = "complete the checkpoint (an interrupted download or save?)"
    more = f" nor {len(absent) - 1} more" if len(absent) > 1 else ""
    return (f"{key} is {n}, but {source} holds no {decoder[min(decoder)]}{absent[0]}{more} (its decoder "
            f"layers: {_spans(decoder)}{mtp_text}): transformers would give {_layers(absent)} random weights and "
            f"the probe would score them; {fix}")


def check_target_layers(folder: Path, cfg: Mapping, config_json: Path) -> None:
    """Refuse a target whose checkpoint holds other decoder layers than its config declares
    (:func:`layer_mismatch`), before ``transformers`` loads it.

    Raises:
        UsageError: one line naming ``config_json``, the config value, the checkpoint file and the
            highest layer index in it (or the first one missing), and how to fix it; or an
            unreadable safetensors header or index (:func:`checkpoint_names`).
    """
    from .config import find_field, find_num_layers

    read = checkpoint_names(folder)
    if read is None:
        return
    names, file = read
    n = find_num_layers(cfg)
    key = find_field(cfg, "num_hidden_layers")[1]
    why = layer_mismatch(layer_indices(names), n, key, mtp_layers(names), f"the checkpoint {Path(folder) / file}")
    if why:
        raise UsageError(f"{config_json}: {why}")
