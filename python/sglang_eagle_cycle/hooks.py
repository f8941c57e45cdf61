"""Install :class:`~sglang_eagle_cycle.patches.HookSpec` hooks through SGLang's ``HookRegistry``,
each one only when SGLang itself imports the module that defines its target.

Why not register every target at plugin load: ``HookRegistry.apply_hooks()`` resolves a dotted target
by importing it, so a hook on ``eagle_worker_v2`` would import the EAGLE worker (and torch kernels
behind it) into the tokenizer and detokenizer processes too, and a hook on each model family's
capture setter would import every model file. Instead a ``sys.meta_path`` finder waits for the
module; right after the module has executed, its specs are registered with ``HookRegistry`` and
applied, so SGLang's own wrapping (``functools.wraps``, ``__wrapped__``, re-binding of
``from X import f`` copies) is what runs. Modules already imported when the plugin loads are
hooked at once or, while SGLang's ``load_plugins()`` runs our entry point, left to the
``apply_hooks()`` at its end, so that a plugin loaded after ours gets its hooks on those targets
too (applied here, a target is in ``_patched`` and that call skipped theirs). Only this plugin's
targets are applied at an import, one by one through the registry's own per-target step (a
private SGLang API, as ``_patched`` is): the global ``apply_hooks()``, called inside an
``apply_hooks()`` of SGLang's that was importing the module for another plugin's target, had
wrapped that target twice. A target another plugin also hooks and whose hooks are not applied yet
is left to SGLang's pending ``apply_hooks()``, which wraps both in one. Not handled: another
plugin's class-level REPLACE of a class whose methods we hook, still pending when its module is
imported (our method hook then wraps the original class's method).

Every hook is wrapped so that a fault inside our code never reaches SGLang (see :func:`guard`).
"""

from __future__ import annotations

import importlib.abc
import logging
import sys
import threading
from typing import Callable, Iterable

from .patches import HookSpec

logger = logging.getLogger("sglang_eagle_cycle")

_lock = threading.RLock()
_pending: dict[str, list[HookSpec]] = {}  # module name -> specs waiting for its import
_status: dict[str, str] = {}  # target -> "applied" | "failed" | "waiting" | "shared" (left to apply_hooks())
_shared: dict[str, str] = {}  # "shared" target -> its module
_finder: "_PostImportFinder | None" = None


def status() -> dict[str, str]:
    """Target -> ``applied`` / ``failed`` / ``waiting`` (module not imported in this process, or a
    target shared with another plugin whose ``apply_hooks()`` has not run yet). A target left to
    SGLang's ``apply_hooks()`` whose module is imported and that it has not patched is ``failed``
    (read between our registration and that call, which nothing of ours does, it would be too)."""
    with _lock:
        out = dict(_status)
        modules = dict(_shared)
    if "shared" in out.values():
        from sglang.srt.plugins.hook_registry import HookRegistry

        for target, state in out.items():
            if state == "shared":
                out[target] = "applied" if target in HookRegistry._patched else \
                    "failed" if modules.get(target) in sys.modules else "waiting"
    return out


def install(specs: Iterable[HookSpec]) -> None:
    """Register ``specs`` now for modules already imported, on import for the others."""
    global _finder
    ready: list[str] = []
    with _lock:
        for spec in specs:
            if spec.target in _status:
                continue  # re-entrant: a second register() adds nothing
            _status[spec.target] = "waiting"
            _pending.setdefault(spec.module, []).append(spec)
            if spec.module in sys.modules and spec.module not in ready:
                ready.append(spec.module)
        if _finder is None and _pending:
            _finder = _PostImportFinder()
            sys.meta_path.insert(0, _finder)
    later = _in_load_plugins()
    for name in ready:
        _on_imported(name, later)


def _in_load_plugins() -> bool:
    """Whether SGLang's ``load_plugins()`` is running a plugin's entry point now: its
    ``HookRegistry.apply_hooks()`` then follows, after every other plugin has registered."""
    try:
        from sglang.srt.plugins.hook_registry import _current_plugin_source
    except ImportError:
        return False
    return _current_plugin_source.get() is not None


def _on_imported(module_name: str, later: bool = False) -> None:
    """Register the specs of ``module_name`` (just imported) and apply them; ``later``: leave them all
    to the ``apply_hooks()`` at the end of the running ``load_plugins()``."""
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    with _lock:
        specs = _pending.pop(module_name, [])
        if not specs:
            return
        for spec in specs:
            # Another plugin's hooks on this target, not applied yet: the apply_hooks() that applies them
            # (the one whose import of this module brought us here, or SGLang's next) takes ours along in
            # the same wrapper; applying the target here as well would wrap it twice.
            # In load_plugins(), a module already imported (the scheduler's own, in its process): a
            # target applied here is in _patched, so the apply_hooks() at its end skipped the hooks that
            # a plugin loaded after ours registered on it (never applied), and wrapped the class before a
            # class REPLACE of theirs; that apply_hooks() applies ours with theirs, in its order.
            shared = (later or bool(HookRegistry._hooks.get(spec.target))) and spec.target not in HookRegistry._patched
            HookRegistry.register(spec.target, spec.hook, HookType.AROUND)
            if shared:
                _status[spec.target] = "shared"
                _shared[spec.target] = spec.module
                continue
            # Only our own targets: HookRegistry.apply_hooks() would also apply (or retry) every other
            # plugin's pending target, in the middle of this import (a module half executed, a target an
            # apply_hooks() further up the stack is resolving right now and then wraps a second time).
            try:
                if spec.target in HookRegistry._patched:
                    raise RuntimeError("already patched before this plugin registered")
                HookRegistry._apply_target(spec.target, HookRegistry._hooks[spec.target])
                HookRegistry._patched.add(spec.target)
                _status[spec.target] = "applied"
            except Exception as exc:
                _status[spec.target] = "failed"
                logger.warning("sglang-eagle-cycle: could not hook %s (%s: %s); SGLang runs on without it",
                               spec.target, type(exc).__name__, exc)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for a module we wait for, it asks the other finders and wraps the loader."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in _pending:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _NotifyingLoader(spec.loader)
        return spec


class _NotifyingLoader(importlib.abc.Loader):
    """Runs the real loader, puts it back on the module, then installs the module's hooks."""

    def __init__(self, real):
        self._real = real

    def create_module(self, spec):
        return self._real.create_module(spec)

    def exec_module(self, module):
        # Tools that read source (inspect, linecache, Triton's JIT) look at __loader__: give them the real one.
        module.__loader__ = self._real
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._real
        self._real.exec_module(module)
        try:
            _on_imported(module.__name__)
        except Exception as exc:  # never break an SGLang import
            logger.warning("sglang-eagle-cycle: hooking %s failed (%s: %s); SGLang runs on unhooked",
                           module.__name__, type(exc).__name__, exc)

    def __getattr__(self, name):
        return getattr(self._real, name)


class Once:
    """Logs a message once per key (the "logged once" of the safety rules)."""

    def __init__(self):
        self._seen: set = set()

    def __call__(self, key, level: int, msg: str, *args) -> None:
        if key in self._seen:
            return
        self._seen.add(key)
        logger.log(level, msg, *args)


fault_log = Once()


def guard(name: str, ours: Callable, fallback: Callable):
    """Run ``ours()``; on an exception in our code log it once and return ``fallback()``.

    Use only around our own logic: an exception raised by SGLang must propagate unchanged,
    so the caller keeps upstream calls outside ``ours`` or re-raises them itself.
    """
    try:
        return ours()
    except Exception as exc:
        fault_log(name, logging.WARNING,
                  "sglang-eagle-cycle: internal error in %s (%s: %s); continuing on the upstream path",
                  name, type(exc).__name__, exc)
        return fallback()
