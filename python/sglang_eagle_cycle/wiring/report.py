"""The result of a wiring check: :class:`Problem` (a code, a level, a message), the level table
(:data:`CHECK_LEVELS`), and :class:`WiringReport` (what is captured, what stock would capture, the
problems, the startup log line and the ``--json`` object).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from .config import ENV_CONVENTION, ENV_IDS, _is_int
from .stock import RULES_BY_MODULE, STOCK_VERSION, stock_captured


ERROR, WARNING, INFO = "error", "warning", "info"


#: report order of the levels (errors first); ``info`` is shown but never counted as a warning
_LEVEL_ORDER = {ERROR: 0, WARNING: 1, INFO: 2}


#: code -> level, the README wiring section's level table (the CLI and the startup path share it)
CHECK_LEVELS: dict[str, str] = {
    "non_integer_ids": ERROR,
    "duplicate_ids": ERROR,
    "id_out_of_range": ERROR,
    "embedding_capture": ERROR,
    "final_layer_capture_unsupported": ERROR,
    "fc_width_mismatch": ERROR,
    "fc_out_mismatch": ERROR,
    "draft_fc_built_mismatch": ERROR,
    "not_eagle3_architecture": ERROR,
    "target_hidden_mismatch": ERROR,
    "vocab_mismatch": ERROR,
    "lm_head_shape_mismatch": ERROR,
    "lm_head_not_loaded": ERROR,
    "weight_not_loaded": ERROR,
    "checkpoint_nested": ERROR,
    "fc_scale_dropped": ERROR,
    "d2t_missing": ERROR,
    "algorithm_not_eagle3": ERROR,
    "aux_capture_off_fc_mismatch": ERROR,
    "eagle_config_not_object": ERROR,
    "aux_capture_off": WARNING,
    "ids_key_misspelt": WARNING,
    "draft_flag_ignored": WARNING,
    "ids_missing_default_used": WARNING,
    "ids_top_level": WARNING,
    "ids_conflict": WARNING,
    "unsorted_ids": WARNING,
    "stock_differs": WARNING,
    "draft_context_shorter": INFO,
}


@dataclass(frozen=True)
class Problem:
    """One finding of the wiring check; ``level`` comes from :data:`CHECK_LEVELS`."""

    level: str
    code: str
    message: str

    def to_dict(self) -> dict:
        return {"level": self.level, "code": self.code, "message": self.message}


def _json_safe(value):
    """``value`` with every non-finite float, at any depth of lists and objects, as its text (``"nan"``)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    return value


_JSON_KEYS = ("num_layers", "ids", "ids_source", "reading", "positions", "stock_positions", "stock_family",
              "stock_ids_hint", "fc_in_features", "problems", "stock_captured")


@dataclass
class WiringReport:
    """The resolved wiring of one target/draft pair; ``to_dict()`` is the ``--json`` object.

    Attributes:
        num_layers: N, the target's decoder layers.
        ids: the ids used (as declared; None when none are declared).
        ids_source: ``env``, ``eagle_config``, ``top_level`` or ``none``.
        reading: ``layer_output``, ``position`` or ``default``.
        positions: capture positions (0 = embedding, N = last layer's output before
            the final norm); None when an id is not an int, out of range or repeated.
        stock_positions: the ``layers_to_capture`` stock SGLang 0.5.23 leaves; None
            when its setter would raise (or the family is unknown).
        stock_captured: of ``stock_positions``, the positions stock actually captures (a
            property; last in the JSON): ``[2, 30, 58]`` of ``[-1, 2, 30, 58]``, whose -1 it
            never captures; None where ``stock_positions`` is.
        stock_family: the SGLang model file whose stock rule applies.
        stock_ids_hint: ``eagle_config`` ids that make stock 0.5.23 capture
            ``positions``, or None (see :func:`stock_fix_text` for why).
        fc_in_features: ``fc.weight.shape[1]`` from the draft's safetensors header.
        problems: findings, errors first.
        convention: ``output`` (default), ``input`` or ``stock`` (not in the JSON).
        stock_ids_valid: False when stock SGLang would be handed ids that are not a
            list of integers; its capture is then not predicted and ``stock_positions``
            is None (not in the JSON).
        algorithm: the ``--speculative-algorithm`` checked (``EAGLE3``, ``EAGLE`` or
            ``NEXTN``; not in the JSON).
        variant: the draft class SGLang 0.5.23 builds and its optional norms, one
            line (:func:`draft_variant`); None without a draft config (not in the JSON).
    """

    num_layers: int
    ids: object
    ids_source: str
    reading: str
    positions: list[int] | None
    stock_positions: list | None
    stock_family: str | None
    stock_ids_hint: list[int] | None
    fc_in_features: int | None
    problems: list[Problem] = field(default_factory=list)
    convention: str = "output"
    stock_ids_valid: bool = True
    algorithm: str = "EAGLE3"
    variant: str | None = None

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.level == ERROR]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.level == WARNING]

    @property
    def infos(self) -> list[Problem]:
        """Notes (level ``info``): shown and logged, never counted as warnings, never a failure."""
        return [p for p in self.problems if p.level == INFO]

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def stock_captured(self) -> list | None:
        """What stock SGLang 0.5.23 captures of ``stock_positions``: the ``kept`` of
        :func:`stock_capture_words`, which the start-up line and ``stock_differs`` quote."""
        if self.stock_family is None or not isinstance(self.stock_positions, list):
            return None
        # the module's function (a method body does not see the class's own names)
        return stock_captured(RULES_BY_MODULE[self.stock_family], self.stock_positions, self.num_layers)

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in _JSON_KEYS}
        # a declared id JSON cannot hold (NaN, Infinity: Python's reader accepts them) is shown as text
        d["ids"] = _json_safe(self.ids)
        d["problems"] = [p.to_dict() for p in self.problems]
        return d

    def startup_line(self) -> str:
        """The one-line summary the server logs at start-up (README, "Aux-layer wiring"), e.g.

        ``EAGLE-3 aux wiring: ids [2, 30, 58] (layer outputs, draft eagle_config) ->
        capture positions [3, 31, 59] of 61; stock SGLang 0.5.23 would capture [2, 30, 58]``
        """
        n = self.num_layers
        if self.reading == "default" and self.positions is None:
            codes = ", ".join(sorted({p.code for p in self.errors}))
            head = (f"no ids declared ({_SOURCE_WORDS['none']}) -> no default capture positions of {n} "
                    f"(refused: {codes})")
        elif self.reading == "default":
            head = f"no ids declared ({_SOURCE_WORDS['none']}) -> default capture positions {self.positions} of {n}"
        else:
            head = f"ids {_fmt(self.ids)} ({self._reading_words()}, {_SOURCE_WORDS[self.ids_source]}) -> "
            if self.positions is None:
                codes = ", ".join(sorted({p.code for p in self.errors}))
                head += f"no capture positions of {n} (refused: {codes})"
            else:
                head += f"capture positions {self.positions} of {n}"
                if self.errors:
                    head += f" (errors: {', '.join(sorted({p.code for p in self.errors}))})"
        if self.stock_family is None:
            tail = f"stock SGLang {STOCK_VERSION}'s rule for this target is unknown"
        elif not self.stock_ids_valid:
            tail = f"stock SGLang {STOCK_VERSION}'s capture is unknown (it would be handed non-integer ids)"
        elif self.stock_positions is None:
            tail = f"stock SGLang {STOCK_VERSION} ({self.stock_family}) would fail at start-up (IndexError)"
        elif self.positions is not None and _same_capture(self.positions, self.stock_positions) \
                and _same_capture(self.stock_captured or [], self.stock_positions):
            tail = f"same as stock SGLang {STOCK_VERSION}"
        else:
            tail = f"stock SGLang {STOCK_VERSION} {stock_capture_words(self.stock_family, self.stock_positions, n)}"
        return f"EAGLE-3 aux wiring: {head}; {tail}"

    def _reading_words(self) -> str:
        if self.reading == "position":
            if self.convention == "input":
                return f"positions, {ENV_CONVENTION}=input"
            if self.convention == "stock":
                return f"positions, {ENV_CONVENTION}=stock"
            return f"positions: max id == {self.num_layers} layers"
        if self.convention == "stock":
            return f"layer outputs, {ENV_CONVENTION}=stock"
        return "layer outputs"


_SOURCE_WORDS = {
    "env": f"env {ENV_IDS}",
    "eagle_config": "draft eagle_config",
    "top_level": "draft top-level, ignored by stock SGLang",
    "none": "family default",
}


#: a list in a message shows at most this many values (the first ones and the last two), a value at
#: most FMT_MAX_CHARS characters: a draft config with 100,000 ids had made a 1.4 MB "one-line" error
FMT_MAX_ITEMS = 12
FMT_MAX_CHARS = 80


def _fmt(value) -> str:
    """``value`` as the messages quote it: a list as ``[2, 30, 58]``, anything else as JSON, cut to
    :data:`FMT_MAX_ITEMS` values and :data:`FMT_MAX_CHARS` characters a value, saying how many."""
    def one(v) -> str:
        text = str(v) if _is_int(v) else json.dumps(v)
        return text if len(text) <= FMT_MAX_CHARS else f"{text[:FMT_MAX_CHARS - 3]}... ({len(text)} chars)"

    if not isinstance(value, list):
        return one(value)
    if len(value) <= FMT_MAX_ITEMS:
        return "[" + ", ".join(one(v) for v in value) + "]"
    head = ", ".join(one(v) for v in value[:FMT_MAX_ITEMS - 2])
    return f"[{head}, ..., {one(value[-2])}, {one(value[-1])}] ({len(value)} values)"


def stock_capture_words(family: str, layers: list, num_layers: int) -> str:
    """What stock SGLang does with its ``layers_to_capture`` ``layers`` (integers) for the target
    family module ``family``, in words: "would capture [2, 30, 58]", or, where some value is never a
    captured position (``-1``: the capture loop tests layer indices ``0..N-1``, and ``N`` only in
    families that capture the final output), "would capture only [2, 30, 58] of [-1, 2, 30, 58]
    ([-1] never captured) and fail at the first target forward" (the draft, built for every id,
    gets fewer states than it reads)."""
    kept = stock_captured(RULES_BY_MODULE[family], layers, num_layers)
    if len(kept) == len(layers):
        if _same_capture(kept, layers):
            return f"would capture {_fmt(layers)}"
        # a flags-every-value family: a negative value flags a layer counted from the last
        return (f"would capture {_fmt(kept)} (its {_fmt(layers)} flags each layers[v], a negative v counting "
                "from the last layer)")
    lost = [v for v in layers if v not in kept]
    return (f"would capture only {_fmt(kept)} of {_fmt(layers)} ({_fmt(lost)} never captured) and fail at "
            "the first target forward")


def _same_capture(a: list, b: list) -> bool:
    """Captures are concatenated in layer order, so compare as sorted lists."""
    try:
        return sorted(a) == sorted(b)
    except TypeError:
        return False


def _problem(code: str, message: str) -> Problem:
    return Problem(CHECK_LEVELS[code], code, message)
