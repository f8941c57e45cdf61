"""SGLang general plugin entry point (``[sglang.srt.plugins] eagle_cycle``).

SGLang's ``load_plugins()`` calls :func:`register` in every process it starts (main/tokenizer,
each scheduler rank, detokenizer, DP controller). Glue only: read the switches, check the SGLang
version, hand the hook specs of each area to :mod:`sglang_eagle_cycle.hooks`.

Switches (README, "Safety"):

* ``SGLANG_EAGLE_CYCLE=0``: register nothing.
* ``SGLANG_EAGLE_CYCLE_WIRING=0`` / ``SGLANG_EAGLE_CYCLE_TIMING=0``: leave one half out.
* ``SGLANG_EAGLE_CYCLE_ADAPTIVE=cost``: the cost-aware policy for ``--speculative-adaptive``.
* ``SGLANG_EAGLE_CYCLE_FORCE=1``: register on an SGLang other than 0.5.23 (otherwise one WARNING).
* SGLang's own ``SGLANG_PLUGINS`` allow-list decides whether this is called at all.

:func:`register` is re-entrant, never raises and imports neither SGLang nor torch at module top.
"""

from __future__ import annotations

import logging

logger = logging.getLogger("sglang_eagle_cycle")

_registered = False


def register() -> None:
    """Entry point called by ``sglang.srt.plugins.load_plugins()``. Never raises."""
    global _registered
    if _registered:
        return
    _registered = True
    try:
        _register()
    except Exception as exc:  # the plugin must never take SGLang down
        logger.warning("sglang-eagle-cycle: not enabled, registration failed (%s: %s)", type(exc).__name__, exc)


def enabled_areas() -> list[str]:
    """The hook areas the environment switches leave on (``wiring``, ``timing``, ``adaptive``); empty when off."""
    from .runtime import env_flag

    if not env_flag("SGLANG_EAGLE_CYCLE", True):
        return []
    areas = []
    if env_flag("SGLANG_EAGLE_CYCLE_WIRING", True):
        areas.append("wiring")
    if env_flag("SGLANG_EAGLE_CYCLE_TIMING", True):
        areas.append("timing")
    from .patches.adaptive import wanted

    if wanted():
        areas.append("adaptive")
    return areas


def version_ok() -> tuple[bool, str]:
    """``(ok, installed_sglang_version)``: ok when it is the supported release or FORCE is set."""
    from importlib.metadata import PackageNotFoundError, version

    from . import SUPPORTED_SGLANG
    from .runtime import env_flag

    try:
        installed = version("sglang")
    except PackageNotFoundError:
        installed = "not installed"
    # read whatever the version, so that a typo (FORCE=yess) is warned of on 0.5.23 too (helper 83)
    force = env_flag("SGLANG_EAGLE_CYCLE_FORCE", False)
    return installed == SUPPORTED_SGLANG or force, installed


AREA_MODULES = {"core": "banner", "wiring": "wiring", "timing": "cycle", "adaptive": "adaptive"}


def all_specs(areas: list[str]):
    """Hook specs of the enabled areas plus the startup banner (``core``).

    An area whose patch module fails to import is left out with one WARNING; the others still register.
    """
    import importlib

    specs = []
    for area in ["core", *areas]:
        try:
            module = importlib.import_module(f"{__package__}.patches.{AREA_MODULES[area]}")
            specs += module.hook_specs()
        except Exception as exc:
            logger.warning("sglang-eagle-cycle: %s hooks not registered (%s: %s)", area, type(exc).__name__, exc)
    return specs


def _register() -> None:
    from . import SUPPORTED_SGLANG, hooks

    areas = enabled_areas()
    if not areas:
        return
    ok, installed = version_ok()
    if not ok:
        logger.warning(
            "sglang-eagle-cycle: SGLang %s is not the supported %s; no hooks registered "
            "(set SGLANG_EAGLE_CYCLE_FORCE=1 to try anyway)", installed, SUPPORTED_SGLANG)
        return
    hooks.install(all_specs(areas))
