"""Hook specifications, one module per upstream area we hook (``wiring``, ``cycle``, ``banner``).

Each area module exposes ``hook_specs() -> list[HookSpec]``. ``plugin.register()`` installs a
post-import hook so that a spec is registered with SGLang's ``HookRegistry`` (and applied) only
once the module named by ``HookSpec.module`` is imported by SGLang itself: no process imports a
module it would not have imported anyway (the tokenizer never imports the EAGLE worker).
Nothing in this package imports SGLang or torch at module top.
"""

from __future__ import annotations

from typing import Callable, NamedTuple


class HookSpec(NamedTuple):
    """One AROUND hook: ``hook(original, *args, **kwargs)`` wraps the dotted ``target``.

    ``module`` is the module whose import makes the target resolvable (registration waits for it).
    ``area`` is the switch that controls it (``wiring``, ``timing`` or ``core``).
    """

    target: str
    module: str
    hook: Callable
    area: str
