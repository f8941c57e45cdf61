"""The human-readable wiring report of ``eagle-cycle wiring`` and the advice for a stock SGLang
user (:func:`stock_fix_text`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..safetensors_header import (CHECKPOINT_MISSING_SHARDS, CHECKPOINT_NESTED, CHECKPOINT_NESTED_TENSORS,
                                  CHECKPOINT_READ, D2T_LLAMA_ONLY, D2T_STORED, FC_DTYPE, FC_SCALES,
                                  MLA_A_PROJ_DROPPED, PREFIXED, QUANT_CONFIG_FILE, WRAPPER_PREFIXED, stored_name)
from .config import IDS_KEY, find_field
from .report import WiringReport, _fmt, _same_capture
from .resolve import contract_positions
from .stock import RULES_BY_MODULE, STOCK_VERSION


def stock_fix_text(report: WiringReport) -> str:
    """What a stock SGLang 0.5.23 user should write, or why nothing works (one or two sentences)."""
    n, pos, hint = report.num_layers, report.positions, report.stock_ids_hint
    if pos is None:
        return "Fix for stock SGLang: none to write until the errors above are fixed."
    if report.stock_family is None:
        return "Fix for stock SGLang: unknown for this target family (no stock rule known)."
    rule = RULES_BY_MODULE[report.stock_family]
    first = "Fix the errors above first. " if report.errors else ""
    if hint is None:
        if n in pos and not rule.final_capture:
            why = f"stock {report.stock_family} never captures position {n} (the last layer's output)"
        else:
            why = f"no id list makes stock {report.stock_family} capture exactly {pos}"
        return f"{first}Fix for stock SGLang {STOCK_VERSION}: none exists: {why}."
    setting = f'"eagle_config": {{"{IDS_KEY}": {_fmt(hint)}}}'
    stock_same = report.stock_positions is not None and _same_capture(pos, report.stock_positions)
    # with an error the pair needs a fix whatever the ids: only the ids need none (case 12's
    # LlamaForCausalLM draft was told "none needed" under its not_eagle3_architecture error)
    none = "the aux ids need no change" if report.errors else "none needed"
    if stock_same and report.ids_source == "eagle_config" and report.ids == hint:
        return f"{first}Fix for stock SGLang {STOCK_VERSION}: {none}; it already captures positions {pos}."
    if stock_same:
        msg = (f"{first}Fix for stock SGLang {STOCK_VERSION}: {none}, it already captures positions {pos}; "
               f"to make that explicit, set {setting} in the draft's config.json.")
    else:
        msg = (f"{first}Fix for stock SGLang {STOCK_VERSION} (without this plugin): set {setting} in the draft's "
               f"config.json; stock then captures positions {pos}"
               + (" (position 0 is the embedding output: only if the draft was trained on it)." if 0 in pos else "."))
    if sorted(contract_positions(hint, n)) != sorted(pos):
        keep = "the draft's config as it is" if report.ids is None else f"the ids {_fmt(report.ids)}"
        source = " (from SGLANG_EAGLE_CYCLE_AUX_LAYER_IDS)" if report.ids_source == "env" else ""
        msg += (f" With sglang-eagle-cycle installed, do not make this edit: keep {keep}{source}; "
                f"the plugin would read {_fmt(hint)} as layer outputs and capture positions "
                f"{contract_positions(hint, n)}.")
    return msg


def _arch(cfg: Mapping) -> str:
    archs = cfg.get("architectures")
    if isinstance(archs, list) and archs and isinstance(archs[0], str):
        return archs[0]
    return "(no architectures)" if archs in (None, []) else f"(architectures {_fmt(archs)}: not a list of class names)"


def _no_checkpoint(draft_path: Path) -> str:
    """What the draft folder of ``draft_path`` (its config.json) holds instead of weights SGLang loads."""
    from ..safetensors_header import PT_SKIPPED, matching

    folder = draft_path.parent if draft_path.suffix == ".json" else draft_path
    state = [f.name for f in matching(folder, "*.bin") + matching(folder, "*.pt") if f.name.endswith(PT_SKIPPED)]
    if state:
        return (f"no weights found, only training state ({', '.join(state)}), which SGLang leaves out: tensor "
                f"shapes unchecked, and SGLang would find no weights to load")
    return "no checkpoint found (no *.safetensors, *.bin nor *.pt file): tensor shapes unchecked"


def render_report(report: WiringReport, target_path: Path, target_cfg: Mapping, draft_path: Path,
                  draft_cfg: Mapping, header: Mapping | None) -> str:
    """``eagle-cycle wiring``'s text report: the two configs in a line each, the startup line, one
    line per problem, the counts and :func:`stock_fix_text`."""
    def field(key: str) -> str:
        found = find_field(target_cfg, key)
        return f"{found[0]} ({found[1]})" if found else "unknown"

    lines = [f"target  {target_path}",
             f"        {_arch(target_cfg)}: layers {field('num_hidden_layers')}, hidden {field('hidden_size')}, "
             f"vocab {field('vocab_size')}"]
    if report.stock_family:
        lines.append(f"        stock SGLang: {RULES_BY_MODULE[report.stock_family].describe()}")
    else:
        lines.append("        stock SGLang: no known rule for this architecture")
    lines.append(f"draft   {draft_path}")
    # no tensors: fc.weight's dtype is shown beside it
    markers = (FC_DTYPE, FC_SCALES, QUANT_CONFIG_FILE, CHECKPOINT_READ, CHECKPOINT_NESTED, CHECKPOINT_NESTED_TENSORS,
               CHECKPOINT_MISSING_SHARDS, MLA_A_PROJ_DROPPED, WRAPPER_PREFIXED, D2T_STORED, D2T_LLAMA_ONLY)
    shown = {k: v for k, v in (header or {}).items() if not (v == [] and k.startswith(PREFIXED)) and k not in markers}

    def tensor(k, v) -> str:
        dtype = f" {header[FC_DTYPE]}" if k == "fc.weight" and FC_DTYPE in header else ""
        return f"{stored_name(header, k)} {v}{dtype}"

    parts = [tensor(k, v) for k, v in shown.items()]
    if header and header.get(CHECKPOINT_NESTED):
        parts.append(f"tensors nested in a dict in {', '.join(header[CHECKPOINT_NESTED])}")
    if header and header.get(CHECKPOINT_MISSING_SHARDS):
        parts.append(f"shards the index lists but the folder lacks: {', '.join(header[CHECKPOINT_MISSING_SHARDS])}")
    tensors = ", ".join(parts) or (
        "checkpoint read: no fc, lm_head, d2t, input_norm nor fc_norm tensor in it" if header else
        _no_checkpoint(draft_path))
    lines.append(f"        {_arch(draft_cfg)}; {tensors}")
    if report.variant:
        lines.append(f"        variant: {report.variant}")
    if report.algorithm != "EAGLE3":
        lines.append(f"        algorithm: {report.algorithm}")
    lines += ["", report.startup_line(), ""]
    for p in report.problems:
        lines.append(f"  {p.level:<7}  {p.code}: {p.message}")
    if report.problems:
        lines.append("")
    n_err, n_warn, n_info = len(report.errors), len(report.warnings), len(report.infos)
    notes = f", {n_info} note{'s' * (n_info != 1)}" if n_info else ""
    lines.append(f"{n_err} error{'s' * (n_err != 1)}, {n_warn} warning{'s' * (n_warn != 1)}{notes}")
    lines.append(stock_fix_text(report))
    return "\n".join(lines)
