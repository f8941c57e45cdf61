"""Reading a pair's configuration: ``config.json`` files (local, or a Hugging Face cache snapshot,
no network), the fields the checks need (through ``text_config``-style wrappers), the draft's
declared aux layer ids, and the names of the environment variables the server reads.

Pure standard library.
"""

from __future__ import annotations

import errno
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

from ..errors import UsageError


ENV_IDS = "SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS"


ENV_CONVENTION = "SGLANG_EAGLE_CYCLE_AUX_CONVENTION"


ENV_ALLOW_EMBEDDING = "SGLANG_EAGLE_CYCLE_ALLOW_EMBEDDING"


ENV_STRICT = "SGLANG_EAGLE_CYCLE_WIRING_STRICT"


IDS_KEY = "eagle_aux_hidden_state_layer_ids"


#: a target with more decoder layers than this is a corrupt config, not a model
MAX_NUM_LAYERS = 10000


#: where multimodal wrappers keep their language model's config (never ``vision_config``), after
#: ``thinker_config``, in SGLang 0.5.23's priority (``get_hf_text_config``: thinker, llm, language, text)
_TEXT_WRAPPERS = ("llm_config", "language_config", "text_config")


def _wrappers(cfg: Mapping) -> list[tuple[str, object]]:
    """The text wrappers of ``cfg`` in SGLang 0.5.23's priority, as ``(json_path_prefix, holder)``:
    ``thinker_config.text_config`` (``thinker_config`` itself where it has none), then
    :data:`_TEXT_WRAPPERS`. Holders may be absent (None) or not objects."""
    thinker = cfg.get("thinker_config")
    if isinstance(thinker, Mapping) and "text_config" in thinker:
        first = ("thinker_config.text_config.", thinker.get("text_config"))
    else:
        first = ("thinker_config.", thinker)
    return [first] + [(f"{w}.", cfg.get(w)) for w in _TEXT_WRAPPERS]


def _text_config(cfg: Mapping):
    """The language model's config of a wrapper, the first object of :func:`_wrappers`; None for a
    config that has none."""
    if not isinstance(cfg, Mapping):
        return None
    return next((inner for _, inner in _wrappers(cfg) if isinstance(inner, Mapping)), None)


def _reads_top_level(cfg: Mapping) -> bool:
    """True for the configs whose language model SGLang 0.5.23 builds from the top level even beside
    a ``text_config``: ``architectures[0]`` ``Llava*ForCausalLM`` (its ``get_hf_text_config`` keeps
    the whole config for these non-HF LLaVA classes and leaves their default ``text_config`` unused)."""
    archs = cfg.get("architectures")
    first = archs[0] if isinstance(archs, list) and archs else None
    return isinstance(first, str) and first.startswith("Llava") and first.endswith("ForCausalLM")


def _language_holders(cfg: Mapping) -> list[tuple[str, object]]:
    """Where a language-model field is read, in order, as ``(json_path_prefix, holder)``: the text
    wrappers first, in SGLang 0.5.23's priority (:func:`_wrappers`: it builds the decoder, the one the
    aux hidden states come from, from the wrapper's config), then the top level; the top level first
    for :func:`_reads_top_level` configs."""
    wrappers = _wrappers(cfg)
    return [("", cfg)] + wrappers if _reads_top_level(cfg) else wrappers + [("", cfg)]


def field_values(cfg: Mapping, key: str) -> list[tuple[object, str]]:
    """Every value of a language-model field, whatever its type, as ``(value, json_path)``, in the
    order of :func:`_language_holders` (the text wrappers before the top level; ``vision_config`` and
    other sub-configs are never read)."""
    if not isinstance(cfg, Mapping):
        return []
    return [(inner[key], f"{prefix}{key}") for prefix, inner in _language_holders(cfg)
            if isinstance(inner, Mapping) and inner.get(key) is not None]


#: the keys SGLang 0.5.23 reads a model's context length from, first found wins
#: (``sglang.srt.utils.hf_transformers.common``)
CONTEXT_LENGTH_KEYS = ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length",
                       "max_position_embeddings")


def derived_context_length(cfg: Mapping) -> tuple[int, str] | None:
    """The context length SGLang 0.5.23 derives from a config (tokens), as ``(tokens, how)``.

    Read from the language-model config (a text wrapper's when there is one): the first of
    :data:`CONTEXT_LENGTH_KEYS` present, times ``rope_scaling.factor`` unless the scaling names
    ``original_max_position_embeddings`` or is ``llama3``'s. ``how`` names the key (and the factor).
    None where no key holds a positive integer (SGLang then takes 2048; the check stays silent)."""
    text = _text_config(cfg) if isinstance(cfg, Mapping) else None
    text = text if isinstance(text, Mapping) else cfg
    if not isinstance(text, Mapping):
        return None
    rope = text.get("rope_scaling")
    factor = 1
    if isinstance(rope, Mapping) and rope:
        factor = rope.get("factor", 1)
        if "original_max_position_embeddings" in rope or rope.get("rope_type") == "llama3":
            factor = 1
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not factor > 0:
            factor = 1
    for key in CONTEXT_LENGTH_KEYS:
        val = text.get(key)
        if val is None:
            continue
        if not _is_int(val) or val < 1:
            return None
        tokens = int(factor * val)
        return tokens, key if factor == 1 else f"{key} {val} x rope_scaling.factor {factor:g}"
    return None


def find_field(cfg: Mapping, key: str) -> tuple[int, str] | None:
    """Find an integer language-model field, a text wrapper first, then the top level
    (:func:`_language_holders`).

    Returns ``(value, json_path)`` (e.g. ``(61, "text_config.num_hidden_layers")``)
    or None.  ``vision_config`` and other sub-configs are never read.
    """
    return next(((v, path) for v, path in field_values(cfg, key) if _is_int(v)), None)


def _require(cfg: Mapping, key: str, what: str) -> int:
    found = find_field(cfg, key)
    if found is None:
        places = [f"{prefix}{key}" for prefix, _ in _language_holders(cfg)]
        raise UsageError(f"target config has no integer {key} (looked at {', '.join(places)}): cannot know the {what}")
    return found[0]


def find_num_layers(cfg: Mapping) -> int:
    """N, the target's decoder-layer count (``text_config.num_hidden_layers`` for wrappers).

    Raises:
        UsageError: no integer ``num_hidden_layers`` at the top level or in a text wrapper.
    """
    return _require(cfg, "num_hidden_layers", "layer count")


def find_hidden_size(cfg: Mapping) -> int:
    """The target's hidden size (width of one aux hidden state). Raises UsageError when absent."""
    return _require(cfg, "hidden_size", "hidden size")


def find_vocab_size(cfg: Mapping) -> int:
    """The target's vocabulary size. Raises UsageError when absent."""
    return _require(cfg, "vocab_size", "vocabulary size")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _short(value, limit: int = 40) -> str:
    """``repr`` of a user value for a one-line message, cut to ``limit`` characters."""
    if _is_int(value) and abs(value) >= 10 ** 30:
        digits = str(abs(value))
        return f"{'-' if value < 0 else ''}{digits[:8]}... ({len(digits)} digits)"
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _checked_target_field(cfg: Mapping, key: str, upper: int | None = None) -> int | None:
    """The target's ``key`` where :func:`find_field` looks, validated; None when absent (or null).

    Raises:
        UsageError: the first value found is not an integer in ``[1, upper]``
            (a string, a float, a boolean, zero or negative).
    """
    for prefix, holder in _language_holders(cfg):
        if isinstance(holder, Mapping) and holder.get(key) is not None:
            value = holder[key]
            if not _is_int(value) or value < 1 or (upper is not None and value > upper):
                bound = f"in [1, {upper}]" if upper is not None else "a positive integer"
                raise UsageError(f"target config {prefix}{key} is {_short(value)}: expected {bound}")
            return value
    return None


#: the target's integer fields the wiring check reads, where :func:`find_field` reads them, with their
#: upper bound (None: any positive integer)
TARGET_INT_FIELDS = (("num_hidden_layers", MAX_NUM_LAYERS), ("hidden_size", None), ("vocab_size", None))


#: the draft's integer fields the wiring check (and its probe) reads, at the draft config's top level
DRAFT_INT_FIELDS = ("hidden_size", "vocab_size", "num_hidden_layers", "draft_vocab_size", "num_aux_hidden_states",
                    "target_hidden_size")


#: draft fields SGLang 0.5.23 reads null in as a value of its own: ``draft_vocab_size`` (the target's
#: vocabulary and lm_head), ``num_aux_hidden_states`` (the ids' count), ``target_hidden_size`` (the
#: head-dependent check ``target_hidden_mismatch``)
_NULL_READ = ("draft_vocab_size", "num_aux_hidden_states", "target_hidden_size")


def _json_short(value, limit: int = 40) -> str:
    """A config value as JSON spells it (``null``, ``true``, ``"x"``, ``4096.0``), cut to ``limit``
    characters for a one-line message."""
    if _is_int(value):
        return _short(value, limit)
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def refuse_malformed_ints(cfg: Mapping, role: str, path: str | Path) -> None:
    """Refuse a config whose integer field the wiring check reads is present but no usable integer:
    a string, a float, a boolean, zero, a negative number, or null (except in the draft fields of
    :data:`_NULL_READ`, which SGLang 0.5.23 reads null in). An absent field stays unknown.

    ``role`` ``"target"`` checks :data:`TARGET_INT_FIELDS` where :func:`find_field` reads them (a
    text wrapper first), ``"draft"`` :data:`DRAFT_INT_FIELDS`; ``path`` is the file, for the message.

    Raises:
        UsageError: one line naming the file and the field, e.g. ``d/config.json: draft config
            hidden_size is "x": expected a positive integer``.
    """
    if role == "target":
        fields, holders = TARGET_INT_FIELDS, _language_holders(cfg)
    else:
        fields, holders = [(key, None) for key in DRAFT_INT_FIELDS], [("", cfg)]
    for key, upper in fields:
        found = next(((prefix, holder[key]) for prefix, holder in holders
                      if isinstance(holder, Mapping) and key in holder), None)
        if found is None:
            continue
        prefix, value = found
        null_read = role == "draft" and key in _NULL_READ
        if (value is None and null_read) or (_is_int(value) and 1 <= value <= (upper or value)):
            continue
        bound = f"an integer in [1, {upper}]" if upper is not None else "a positive integer"
        raise UsageError(f"{path}: {role} config {prefix}{key} is {_json_short(value)}: expected {bound}"
                         + (" or null" if null_read else ""))


#: a draft config holds at least one of these at its top level; a JSON with none is no model's config
_MODEL_KEYS = ("architectures", "model_type", "hidden_size")


def refuse_unusable_pair(target_cfg: Mapping, draft_cfg: Mapping, target_path: str | Path,
                         draft_path: str | Path) -> None:
    """Refuse a pair the wiring check cannot read, in one line naming the file: an integer field
    present but unusable (:func:`refuse_malformed_ints`), a target without a layer count, or a draft
    "config" that names no model (none of ``architectures``, ``model_type``, ``hidden_size``: a
    results file or another tool's JSON given as DRAFT, which would otherwise be reported as a draft
    of no EAGLE-3 class).

    Raises:
        UsageError: e.g. ``t/config.json: target config has no integer num_hidden_layers (...)`` or
            ``d/expected.json: no model's config (none of architectures, model_type, hidden_size in it)``.
    """
    refuse_malformed_ints(target_cfg, "target", target_path)
    refuse_malformed_ints(draft_cfg, "draft", draft_path)
    try:
        find_num_layers(target_cfg)
    except UsageError as exc:
        raise UsageError(f"{target_path}: {exc}") from None
    if isinstance(draft_cfg, Mapping) and not any(k in draft_cfg for k in _MODEL_KEYS):
        raise UsageError(f"{draft_path}: no model's config (none of {', '.join(_MODEL_KEYS)} in it): DRAFT is "
                         "the draft head's folder or its config.json")


def _declared(value):
    """None for absent or empty ids; otherwise the value as declared."""
    if value is None or (isinstance(value, list) and not value):
        return None
    return value


def _nested_ids(draft_cfg: Mapping | None):
    """What stock SGLang passes to the setter: ``eagle_config["eagle_aux_hidden_state_layer_ids"]`` or None."""
    eagle_config = draft_cfg.get("eagle_config") if isinstance(draft_cfg, Mapping) else None
    if isinstance(eagle_config, Mapping):
        return eagle_config.get(IDS_KEY)
    return None


def _all_ints(ids) -> bool:
    return isinstance(ids, list) and all(_is_int(v) for v in ids)


def load_config(path: str | Path) -> dict:
    """Read a ``config.json`` as a dict.

    Raises:
        UsageError: missing or unreadable file, invalid JSON, or not a JSON object.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: invalid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise UsageError(f"{path}: invalid JSON (nested too deeply to read)") from None
    except ValueError as exc:  # e.g. an integer literal over Python's digit limit
        raise UsageError(f"{path}: invalid JSON ({str(exc).splitlines()[0][:120]})") from None
    if not isinstance(cfg, dict):
        raise UsageError(f"{path}: expected a JSON object, got {type(cfg).__name__}")
    return cfg


_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")


def hf_cache_dir(env: Mapping = os.environ) -> Path:
    """The Hugging Face hub cache: ``HF_HUB_CACHE``, else ``HF_HOME/hub``, else ``~/.cache/huggingface/hub``."""
    for key in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(key):
            return Path(env[key]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "hub"
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "huggingface" / "hub"


#: weight files (and their shard indexes, JSON but no config) a user may pass where a model folder or
#: its config.json is expected
CHECKPOINT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".safetensors.index.json", ".bin.index.json")


def _starts_as_weights(path: Path) -> bool:
    """True when the first bytes of ``path`` (a regular file named as a weights file) are its format's:
    a safetensors header length then ``{``, a zip (``torch.save`` since PyTorch 1.6) or a pickle (the
    older format) for ``.bin`` / ``.pt`` / ``.pth``, ``GGUF``, and ``{`` for a shard index. Random bytes,
    a text file, an empty one are not: a name alone does not make a checkpoint."""
    try:
        with path.open("rb") as fh:
            head = fh.read(16)
        size = path.stat().st_size
    except OSError:
        return False
    name = path.name
    if name.endswith(".json"):
        return head.lstrip().startswith(b"{")
    if name.endswith(".safetensors"):
        return len(head) > 8 and head[8:9] == b"{" and int.from_bytes(head[:8], "little") <= size - 8
    if name.endswith(".gguf"):
        return head.startswith(b"GGUF")
    return head.startswith(b"PK\x03\x04") or (len(head) > 1 and head[0] == 0x80 and 2 <= head[1] <= 5)


def _hf_cache_hint(folder: Path) -> str:
    """For a Hugging Face cache folder that holds no config.json itself (the repo folder
    ``models--ORG--NAME`` or its ``snapshots``), what to give instead: the snapshot folders and the repo id."""
    repo_dir = folder.parent if folder.name == "snapshots" else folder
    snapshots = repo_dir / "snapshots"
    if not repo_dir.name.startswith("models--") or not snapshots.is_dir():
        return ""
    found = sorted(p for p in snapshots.iterdir() if p.is_dir())
    parts = repo_dir.name.split("--")[1:]
    repo_id = "/".join(parts) if len(parts) == 2 else None
    named = ", ".join(str(p) for p in found[:2]) + (f" (and {len(found) - 2} more)" if len(found) > 2 else "")
    snap = f"its snapshot folder {named}" if found else "one of its snapshot folders (none downloaded yet)"
    rid = f", or the repo id {repo_id}" if repo_id else ""
    return f" (a Hugging Face cache folder: give {snap}{rid})"


def _cached_config(repo_id: str, revision: str | None, cache: Path) -> Path | None:
    try:  # the library knows refs and snapshot layout best; it does no network here
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        try_to_load_from_cache = None
    if try_to_load_from_cache is not None:
        found = try_to_load_from_cache(repo_id, "config.json", cache_dir=str(cache), revision=revision)
        return Path(found) if isinstance(found, str) else None
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    ref = repo / "refs" / (revision or "main")
    commit = ref.read_text().strip() if ref.is_file() else (revision or "")
    candidate = repo / "snapshots" / commit / "config.json"
    return candidate if commit and candidate.is_file() else None


def locate_config(arg: str, revision: str | None = None, env: Mapping = os.environ) -> Path:
    """Find a model's ``config.json`` (:func:`_locate_config`); a path that cannot be looked at (a
    folder without permission, a name too long) is a :class:`UsageError` naming it."""
    try:
        return _locate_config(arg, revision, env)
    except OSError as exc:
        raise UsageError(f"{arg}: cannot read ({exc.strerror or exc})") from None


def _refuse_dangling_link(path: Path, shown: str) -> None:
    """Raise a one-line UsageError where ``path`` is a symbolic link that leads nowhere: a loop, or a
    target that does not exist (``shown`` is the name the message gives). Return otherwise."""
    if not (path.is_symlink() and not path.exists()):
        return
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UsageError(f"{shown}: symbolic link loop (it resolves to itself)") from None
    raise UsageError(f"{shown}: broken symbolic link (its target {os.readlink(path)} does not exist)")


def _not_a_config_file(config: Path) -> None:
    """Raise a one-line UsageError naming what ``config`` (a folder's ``config.json`` that is no regular
    file) is, where something is there: a FIFO or a device (whose read would block or never end), a
    directory, a broken or looping symbolic link. Return where nothing is."""
    _refuse_dangling_link(config, str(config))
    if config.is_dir():
        raise UsageError(f"{config}: a directory, not a config file")
    if config.exists():
        raise UsageError(f"{config}: not a regular file (a FIFO, socket or device); expected the model's "
                         "config.json")


def _locate_config(arg: str, revision: str | None, env: Mapping) -> Path:
    """Find a model's ``config.json``: a model directory, a ``config.json`` path, or a cached HF repo id.

    Repo ids are looked up in the local Hugging Face cache only (no network),
    honouring ``HF_HUB_CACHE`` / ``HF_HOME`` and ``revision`` (a branch, tag or commit).

    Raises:
        UsageError: (one line) when nothing is found: an empty argument, ``-``
            (stdin is not read), a broken symbolic link, something that is neither
            a file nor a directory (``/dev/null``), or an unknown path / repo id.
    """
    if not arg:
        raise UsageError("empty path: expected a model directory, a config.json or a cached Hugging Face repo id")
    if arg == "-":
        raise UsageError("'-': configs are not read from stdin; give a model directory, a config.json "
                         "or a cached Hugging Face repo id")
    path = Path(arg).expanduser()
    _refuse_dangling_link(path, arg)
    if path.exists() and not (path.is_dir() or path.is_file()):
        raise UsageError(f"{arg}: not a regular file or directory")
    if path.is_dir():
        config = path / "config.json"
        if not config.is_file():
            _not_a_config_file(config)
            raise UsageError(f"{arg}: directory has no config.json{_hf_cache_hint(path)}")
        return config
    if path.is_file():
        if path.name.endswith(CHECKPOINT_SUFFIXES):   # read as JSON it gave 'invalid JSON' or a codec error
            # the folder in full: `rand.bin` in the working directory had "its folder . has no config.json"
            folder = Path(os.path.abspath(path.parent))
            where = (f"give its folder {folder} instead" if (folder / "config.json").is_file() else
                     f"its folder {folder} has no config.json either")
            what = "a checkpoint file" if _starts_as_weights(path) else "a file"
            raise UsageError(f"{arg}: {what}, not a model's config.json: {where}")
        return path
    if _REPO_ID.match(arg) and not arg.startswith((".", "/")):
        found = _cached_config(arg, revision, hf_cache_dir(env))
        if found is not None:
            return found
        rev = f" at revision {revision}" if revision else ""
        raise UsageError(f"{arg}: no such path, and no config.json for this Hugging Face repo{rev} in the local "
                         f"cache {hf_cache_dir(env)} (no network is used; download it first)")
    raise UsageError(f"{arg}: no such file or directory")
