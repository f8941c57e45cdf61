"""Fresh SGLang interpreters for the tests, without paying SGLang's import each time.

HookRegistry cannot un-patch, so every test that loads plugins runs in its own interpreter. A cold
``import sglang.srt.plugins`` plus the layer modules costs about 15 s on a 2-core VM, and the suite
starts about ten such interpreters. This module starts one *fork server* per test session: a
Python process that imports torch and SGLang's heavy, hook-free modules once, then forks a child
per request. The child is a fresh interpreter as far as the plugin can tell:

* no module the plugin hooks is imported before the child runs (:data:`HOOKED_PREFIXES` is
  checked after the warm-up; ``sglang.srt.plugins`` has not loaded any plugin, and
  ``sglang_eagle_cycle`` is not imported);
* the child's ``os.environ`` is exactly the requested environment (SGLang reads ``SGLANG_PLUGINS``
  and the plugin reads its switches at call time, not at import);
* ``sys.argv`` and ``sys.path[0]`` are set as ``python script.py args`` would set them.

Usage (a drop-in for ``subprocess.run([sys.executable, ...], capture_output=True, text=True)``)::

    from sglang_fork import run_python
    proc = run_python([str(script), "arg"], env=env, timeout=300)   # or ["-c", code, "arg"]
    proc.returncode, proc.stdout, proc.stderr

``run_python(..., cpu_engine=True)`` asks a second server, for scripts that run SGLang's model code
on the CPU (``sglang_cpu.setup()`` first): it imports SGLang with ``SGLANG_USE_CPU_ENGINE=1``, no
visible GPU and SGLang's ``sgl_kernel`` stub (``sglang_cpu.setup`` steps 1-3, which must precede the
import), then the CPU-engine modules of :data:`WARM_MODULES_CPU`. The child's environment carries
the same two variables; ``sglang_cpu.setup()`` in the child does the rest (the process group).

Set ``EAGLE_CYCLE_TEST_NO_FORK=1`` to run plain subprocesses instead (the slow, obvious path).
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

from sglang_cpu import HIDDEN_GPU_INDEX  # a constant: importing sglang_cpu loads nothing heavy

HERE = Path(__file__).resolve().parent

#: Imported once by the server: the slow, hook-free part of SGLang.
WARM_MODULES = (
    "torch", "sglang.srt.plugins", "sglang.srt.layers.linear", "sglang.srt.layers.layernorm",
    "sglang.srt.layers.logits_processor", "sglang.srt.layers.vocab_parallel_embedding",
    "sglang.srt.layers.radix_attention", "sglang.srt.model_executor.forward_batch_info",
)
#: Imported once by the CPU-engine server: the same, and what the CPU model probes load besides.
WARM_MODULES_CPU = WARM_MODULES + (
    "sglang.srt.layers.quantization", "sglang.srt.layers.moe.fused_moe_native", "sglang.srt.layers.rotary_embedding",
    "sglang.test.layer_ut_utils", "transformers", "safetensors.torch",
)
#: What a CPU-engine server and its children run under (sglang_cpu.setup, steps 1 and 2).
CPU_ENGINE_ENV = {"SGLANG_USE_CPU_ENGINE": "1", "CUDA_VISIBLE_DEVICES": HIDDEN_GPU_INDEX}
#: Modules the plugin hooks (or that hold hooked classes): never imported by the server itself.
HOOKED_PREFIXES = ("sglang.srt.models.", "sglang.srt.speculative.eagle_worker_v2", "sglang.srt.managers.scheduler",
                   "sglang_eagle_cycle")

_lock = threading.Lock()
_servers: dict = {}   # cpu_engine (bool) -> the server process


def _server_main(cpu_engine: bool = False) -> None:  # runs in the server process
    import importlib
    import runpy
    import signal
    import tempfile
    import time
    import traceback
    import warnings

    warnings.simplefilter("ignore")
    if cpu_engine:   # before SGLang's import, as sglang_cpu.setup does it
        from sglang.test.test_utils import maybe_stub_sgl_kernel

        maybe_stub_sgl_kernel()
    for name in WARM_MODULES_CPU if cpu_engine else WARM_MODULES:
        importlib.import_module(name)
    warnings.resetwarnings()
    leaked = sorted(m for m in sys.modules if m.startswith(HOOKED_PREFIXES))
    out = os.fdopen(os.dup(1), "w")
    out.write(json.dumps({"ready": True, "leaked": leaked}) + "\n")
    out.flush()
    for line in sys.stdin:
        req = json.loads(line)
        with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
            pid = os.fork()
            if pid == 0:  # the child: a fresh interpreter in effect
                code = 1
                try:
                    os.dup2(fo.fileno(), 1)
                    os.dup2(fe.fileno(), 2)
                    os.environ.clear()
                    os.environ.update(req["env"])
                    argv = req["argv"]
                    if argv[0] == "-c":
                        sys.argv = ["-c", *argv[2:]]
                        sys.path[0] = ""
                        exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})
                    else:
                        sys.argv = list(argv)
                        sys.path[0] = str(Path(argv[0]).resolve().parent)
                        runpy.run_path(argv[0], run_name="__main__")
                    code = 0
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                    if not isinstance(exc.code, (int, type(None))):
                        print(exc.code, file=sys.stderr)
                except BaseException:
                    traceback.print_exc()
                finally:
                    try:
                        sys.stdout.flush()
                        sys.stderr.flush()
                    finally:
                        os._exit(code)
            deadline = time.monotonic() + float(req["timeout"])
            status, timed_out = None, False
            while status is None:
                done, st = os.waitpid(pid, os.WNOHANG)
                if done:
                    status = st
                elif time.monotonic() > deadline:
                    os.kill(pid, signal.SIGKILL)
                    status = os.waitpid(pid, 0)[1]
                    timed_out = True
                else:
                    time.sleep(0.02)
            rc = os.waitstatus_to_exitcode(status)
            fo.seek(0)
            fe.seek(0)
            out.write(json.dumps({"rc": rc, "timed_out": timed_out,
                                  "stdout": fo.read().decode("utf-8", "replace"),
                                  "stderr": fe.read().decode("utf-8", "replace")}) + "\n")
            out.flush()


def _base_env() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_EAGLE_CYCLE", "SGLANG_PLUGINS"))}


def _start(cpu_engine: bool) -> subprocess.Popen:
    env = _base_env()
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), *filter(None, [env.get("PYTHONPATH")])])
    if cpu_engine:
        env.update(CPU_ENGINE_ENV)
    proc = subprocess.Popen([sys.executable, "-c", f"import sglang_fork; sglang_fork._server_main({cpu_engine})"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, env=env, cwd=str(HERE))
    hello = json.loads(proc.stdout.readline() or "{}")
    if not hello.get("ready"):
        raise RuntimeError("the SGLang fork server did not start")
    if hello["leaked"]:
        proc.kill()
        raise RuntimeError(f"the fork server's warm-up imported hooked modules: {hello['leaked']}")
    atexit.register(proc.kill)
    return proc


def run_python(argv: list, *, env: dict, timeout: float = 300, cpu_engine: bool = False):
    """Run ``python *argv`` (a script path or ``-c code``) in a fresh-enough interpreter; with
    ``cpu_engine``, one forked from the CPU-engine server (the script calls ``sglang_cpu.setup()``
    before anything else of SGLang's; ``env`` gets :data:`CPU_ENGINE_ENV`).

    Returns an object with ``returncode``, ``stdout`` and ``stderr`` (text), like
    ``subprocess.run(..., capture_output=True, text=True)``.

    Raises:
        subprocess.TimeoutExpired: the run took longer than ``timeout`` seconds (it was killed).
    """
    argv = [str(a) for a in argv]
    env = {**env, **CPU_ENGINE_ENV} if cpu_engine else dict(env)
    if os.environ.get("EAGLE_CYCLE_TEST_NO_FORK") == "1":
        return subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, timeout=timeout)
    with _lock:
        server = _servers.get(cpu_engine)
        if server is None or server.poll() is not None:
            server = _servers[cpu_engine] = _start(cpu_engine)
        server.stdin.write(json.dumps({"argv": argv, "env": env, "timeout": timeout}) + "\n")
        server.stdin.flush()
        reply = json.loads(server.stdout.readline() or "{}")
    if not reply:
        raise RuntimeError("the SGLang fork server stopped")
    if reply["timed_out"]:
        raise subprocess.TimeoutExpired([sys.executable, *argv], timeout, reply["stdout"], reply["stderr"])
    return SimpleNamespace(returncode=reply["rc"], stdout=reply["stdout"], stderr=reply["stderr"])
