"""``make demo``: the EAGLE-3 wiring check on the Kimi-K2.5 pair shipped under ``examples/kimi-k25/``.

Runs on any machine (no GPU, no weights, no network): it shows the aux-layer
correction this plugin applies, then prints the launch command a GPU user runs.

Usage::

    python examples/demo.py            # what `make demo` runs
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET = HERE / "kimi-k25" / "target"
DRAFT = HERE / "kimi-k25" / "draft"

LAUNCH = """\
python -m sglang.launch_server \\
    --model-path moonshotai/Kimi-K2.5 --trust-remote-code --tp 8 \\
    --speculative-algorithm EAGLE3 \\
    --speculative-draft-model-path /path/to/kimi-k2.5-eagle3-draft \\
    --speculative-num-steps 2 --speculative-eagle-topk 1 --speculative-num-draft-tokens 3 \\
    --log-level info"""


def main() -> int:
    from sglang_eagle_cycle.commands import wiring_cmd
    from sglang_eagle_cycle.errors import UsageError
    from sglang_eagle_cycle.safetensors_header import read_draft_shapes
    from sglang_eagle_cycle.wiring import check_pair, load_config, locate_config

    rel = lambda p: p.relative_to(HERE.parent)  # noqa: E731
    print("sglang-eagle-cycle demo: EAGLE-3 aux hidden-state wiring of a Kimi-K2.5 target/draft pair\n")
    print(f"$ eagle-cycle wiring {rel(TARGET)} {rel(DRAFT)}")
    try:
        code = wiring_cmd.main(argparse.Namespace(
            target=str(TARGET), draft=str(DRAFT), json=False, target_revision=None, draft_revision=None))
        report = check_pair(load_config(locate_config(str(TARGET))), load_config(locate_config(str(DRAFT))),
                            header=read_draft_shapes(DRAFT) or None, env=os.environ)
    except UsageError as exc:
        print(f"demo: error: {exc}", file=sys.stderr)
        return 2

    print("\nThe correction (draft ids mean the outputs of decoder layers 2, 30, 58):")
    print(f"  draft eagle_config ids          {report.ids}")
    print(f"  stock SGLang 0.5.23 captures    {report.stock_positions}  "
          f"({report.stock_family} rule: every state one layer early)")
    print(f"  with sglang-eagle-cycle         {report.positions}  (position j = input of layer j = output of layer j-1)")

    gpu = shutil.which("nvidia-smi") is not None
    print("\nServing needs a GPU: SGLang cannot start a server on a CPU-only machine, so this demo stops here"
          + ("." if gpu else " (no NVIDIA GPU found on this machine)."))
    print("On a GPU machine (Kimi-K2.5 at TP 8: 8 x H200 or similar) with SGLang 0.5.23 and this package installed "
          "in the same environment, run (the plugin loads through SGLang's plugin entry point; nothing to add):\n")
    print(LAUNCH)
    print("\nThe scheduler log then shows the wiring line:")
    print(f"  {report.startup_line()}")
    return code


if __name__ == "__main__":
    sys.exit(main())
