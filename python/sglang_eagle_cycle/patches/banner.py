"""The startup banner: one line on scheduler rank 0 once SGLang has configured logging.

``run_scheduler_process`` loads plugins before it configures logging, so anything logged at
``register()`` time at INFO is lost. The banner is written right after ``Scheduler.__init__``
returns: logging is configured by then, the model and the draft worker exist, and every hook
whose module the scheduler imports has been applied (or has failed).

Before ``Scheduler.__init__`` runs (the runtime context is published, logging is configured, no
weights are loaded yet) the same hook runs the wiring area's capture-mode check
(:func:`sglang_eagle_cycle.patches.wiring.precheck_capture_mode`): an EAGLE-3 head under
``--speculative-algorithm EAGLE``/``NEXTN`` stops the launch there with
:class:`~sglang_eagle_cycle.patches.wiring.EagleWiringError`, unless
``SGLANG_EAGLE_CYCLE_WIRING_STRICT=0``.
"""

from __future__ import annotations

import logging

from . import HookSpec

SCHEDULER = "sglang.srt.managers.scheduler"

_done = False


def hook_specs() -> list[HookSpec]:
    return [HookSpec(f"{SCHEDULER}.Scheduler.__init__", SCHEDULER, _after_scheduler_init, "core")]


def _short(target: str) -> str:
    parts = target.split(".")
    return ".".join(parts[-2:])


def banner_lines(draft_worker=None) -> list[tuple[int, str]]:
    """``[(level, message), ...]``: the INFO banner, one WARNING per failed hook target and one per
    set ``SGLANG_EAGLE_CYCLE*`` variable that nothing reads."""
    from importlib.metadata import version

    from .. import __version__, hooks
    from ..runtime import unknown_env

    status = hooks.status()
    applied = sorted(_short(t) for t, s in status.items() if s == "applied" and not t.startswith(SCHEDULER))
    failed = sorted(t for t, s in status.items() if s == "failed")
    msg = (f"sglang-eagle-cycle {__version__} on SGLang {version('sglang')}: "
           f"hooks applied ({len(applied)}): {', '.join(applied) or 'none'}; failed ({len(failed)}): "
           f"{', '.join(_short(t) for t in failed) or 'none'}")
    if draft_worker is not None:
        msg += f"; timing: {_worker_note(draft_worker)}"
    out = [(logging.INFO, msg)]
    out += [(logging.WARNING, f"sglang-eagle-cycle: hook target {t} failed; the server runs on without it")
            for t in failed]
    out += [(logging.WARNING, f"sglang-eagle-cycle: {msg}") for msg in unknown_env()]
    return out


def _worker_note(worker) -> str:
    """What the timing area does with this scheduler's speculative worker."""
    from ..plugin import enabled_areas

    if "timing" not in enabled_areas():
        return "off (SGLANG_EAGLE_CYCLE_TIMING=0)"
    from .cycle import worker_support

    return worker_support(worker)[1]


def _precheck():
    """The wiring area's capture-mode message that stops the launch, or None (faults: logged once)."""
    from ..hooks import guard
    from ..plugin import enabled_areas

    def check():
        if "wiring" not in enabled_areas():
            return None
        from .wiring import precheck_capture_mode

        return precheck_capture_mode()

    return guard("wiring precheck", check, lambda: None)


def _after_scheduler_init(original, self, *args, **kwargs):
    message = _precheck()
    if message:
        from .wiring import EagleWiringError

        raise EagleWiringError(message)
    result = original(self, *args, **kwargs)
    global _done
    if not _done:
        _done = True
        from ..hooks import guard
        guard("startup banner", lambda: _log_banner(self), lambda: None)
    return result


def _log_banner(scheduler) -> None:
    from ..runtime import env_flag, ranks

    if not (ranks().is_first or env_flag("SGLANG_EAGLE_CYCLE_ALL_RANKS", False)):
        return
    log = logging.getLogger("sglang_eagle_cycle")
    for level, msg in banner_lines(getattr(scheduler, "draft_worker", None)):
        log.log(level, msg)
