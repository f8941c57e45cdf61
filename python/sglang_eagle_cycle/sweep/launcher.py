"""One SGLang server per configuration: start it in its own process group, wait for health,
stop the whole group (no orphans), keep its log.

SGLang's launcher forks scheduler, detokenizer and (with DP) controller processes; they stay in
the launcher's process group, so ``killpg`` reaches all of them. The server is started with
``start_new_session=True``: a terminal Ctrl-C goes to the benchmark only, which then stops the
server itself (SIGTERM to the group, SIGKILL to what is left after ``grace_s``).

Usage::

    argv = build_launch_argv(DEFAULT_SERVER_CMD, model="meta-llama/Llama-3.1-8B-Instruct",
                             draft="lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B",
                             algorithm="EAGLE3", steps=3, topk=1, draft_tokens=None,
                             host="127.0.0.1", port=free_port("127.0.0.1"), extra=["--tp", "1"])
    with ServerProcess(argv, log_path, "http://127.0.0.1:PORT") as server:
        server.wait_healthy(timeout_s=900)
        ...
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from pathlib import Path
from typing import Optional

from .client import health_ok
from .signals import deferred_signals, raise_if_interrupted

#: ``python -m sglang.launch_server`` with the running interpreter.
DEFAULT_SERVER_CMD = (sys.executable, "-m", "sglang.launch_server")


class ServerStartError(Exception):
    """The server exited or did not become healthy in time; ``str(exc)`` is the reason."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_taken(host: str, port: int) -> Optional[str]:
    """Why ``port`` on ``host`` cannot be served now (a listener holds it), or ``None`` when it is free.

    Binds with ``SO_REUSEADDR`` as servers do, so the TIME_WAIT connections a stopped server left
    on its port do not count; a listening socket does.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def build_launch_argv(
    server_cmd: list[str] | tuple[str, ...],
    *,
    model: str,
    draft: Optional[str],
    algorithm: str,
    steps: int,
    topk: Optional[int],
    draft_tokens: Optional[int],
    host: str,
    port: int,
    extra: list[str],
) -> list[str]:
    """The launch command for one configuration; ``steps == 0`` is the no-speculation baseline.

    ``draft_tokens=None`` leaves ``--speculative-num-draft-tokens`` to SGLang (with topk 1 it is
    forced to ``steps + 1`` anyway). ``extra`` (the user's arguments) goes last, unchanged.
    """
    argv = [*server_cmd, "--model-path", model, "--host", host, "--port", str(port)]
    if steps > 0:
        argv += ["--speculative-algorithm", algorithm]
        if draft is not None:
            argv += ["--speculative-draft-model-path", draft]
        argv += ["--speculative-num-steps", str(steps)]
        if topk is not None:
            argv += ["--speculative-eagle-topk", str(topk)]
        if draft_tokens is not None:
            argv += ["--speculative-num-draft-tokens", str(draft_tokens)]
    return argv + list(extra)


def unique_path(path: Path) -> Path:
    """``path``, or ``stem.1.suffix``, ``stem.2.suffix``... : the first that does not exist
    (a dangling symlink counts as existing: writing through it would create its target)."""
    if not os.path.lexists(path):
        return path
    i = 1
    while True:
        cand = path.with_name(f"{path.stem}.{i}{path.suffix}")
        if not os.path.lexists(cand):
            return cand
        i += 1


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group ``pgid``.

    Reads ``/proc`` where it exists (a zombie still counts for ``killpg(pgid, 0)``); elsewhere
    falls back to ``killpg(pgid, 0)``, returning ``[pgid]`` when the group exists.
    """
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return []
        except PermissionError:
            pass
        return [pgid]
    out = []
    for d in proc.iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        # comm may contain spaces and parentheses: fields start after the last ')'
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
            out.append(int(d.name))
    return out


class ServerProcess:
    """A server process group and its log file.

    Attributes:
        argv: the command line.
        log_path: stdout and stderr of the whole group (created exclusively: never overwritten).
        base_url: ``http://host:port``.
    """

    def __init__(self, argv: list[str], log_path: Path, base_url: str,
                 env: Optional[dict[str, str]] = None):
        self.argv = list(argv)
        self.log_path = Path(log_path)
        self.base_url = base_url
        self.env = env
        self.proc: Optional[subprocess.Popen] = None

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Start the command in a new session/process group, output to :attr:`log_path`.

        Raises:
            ServerStartError: the command cannot be executed (not found, not executable).
            FileExistsError: the log file exists (callers pick a fresh name with :func:`unique_path`).
        """
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "xb") as log:
            log.write(("# eagle-cycle bench launch: " + " ".join(self.argv) + "\n").encode())
            log.flush()
            try:
                self.proc = subprocess.Popen(
                    self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    start_new_session=True, env=self.env,
                )
            except OSError as exc:
                raise ServerStartError(f"cannot start {self.argv[0]!r}: {exc.strerror or exc}") from None

    @property
    def pid(self) -> Optional[int]:
        return None if self.proc is None else self.proc.pid

    def returncode(self) -> Optional[int]:
        """The leader's exit code, ``None`` while it runs (or before :meth:`start`)."""
        return None if self.proc is None else self.proc.poll()

    def wait_healthy(self, timeout_s: float, poll_max_s: float = 2.0) -> float:
        """Poll ``GET /health`` until 200; returns the seconds it took.

        Raises:
            ServerStartError: the process exited first, or ``timeout_s`` passed.
            KeyboardInterrupt: Ctrl-C or SIGTERM, including one whose own exception was lost.
        """
        t0 = time.monotonic()
        delay = 0.05
        while True:
            code = self.returncode()
            if code is not None:
                raise ServerStartError(f"server exited with code {code} before it became healthy")
            if health_ok(self.base_url, timeout_s=min(5.0, max(0.5, timeout_s))):
                return time.monotonic() - t0
            if time.monotonic() - t0 >= timeout_s:
                raise ServerStartError(f"server not healthy within {timeout_s:g} s (--startup-timeout)")
            raise_if_interrupted()
            time.sleep(delay)
            delay = min(poll_max_s, delay * 1.5)

    def stop(self, grace_s: float = 30.0) -> Optional[int]:
        """SIGTERM the whole group, SIGKILL what is left after ``grace_s``; reap the leader.

        SIGINT and SIGTERM are held until it is done, so a second Ctrl-C cannot leave orphans.
        Returns the leader's exit code (``None`` if never started).
        """
        if self.proc is None:
            return None
        pgid = self.proc.pid
        with deferred_signals():
            self._signal_group(pgid, signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline:
                self.proc.poll()
                if self.proc.returncode is not None and not group_members(pgid):
                    break
                time.sleep(0.05)
            else:
                self._signal_group(pgid, signal.SIGKILL)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # unkillable (D state): nothing more we can do
                pass
            # members that outlived the leader (re-parented) get the same treatment
            end = time.monotonic() + 2.0
            while group_members(pgid) and time.monotonic() < end:
                self._signal_group(pgid, signal.SIGKILL)
                time.sleep(0.05)
        return self.proc.returncode

    @staticmethod
    def _signal_group(pgid: int, sig: int) -> None:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def __enter__(self) -> "ServerProcess":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- log --------------------------------------------------------------------------------

    def log_size(self) -> int:
        """Current size of the log, bytes (0 if it is gone)."""
        return log_size(self.log_path)

    def log_tail(self, n: int = 30) -> list[str]:
        """The last ``n`` lines of the log."""
        return log_tail(self.log_path, n)


def log_size(path: Path) -> int:
    """Size of ``path`` in bytes, 0 when it does not exist."""
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def log_tail(path: Path, n: int = 30, max_bytes: int = 64 * 1024) -> list[str]:
    """The last ``n`` lines of ``path`` (reads at most ``max_bytes`` from the end)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read()
    except OSError:
        return []
    lines = data.decode("utf-8", "replace").splitlines()
    return [ln[:500] for ln in deque(lines, maxlen=n)]
