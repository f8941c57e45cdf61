#!/usr/bin/env bash
# End to end on one GPU: a tiny trained Llama target + EAGLE-3 draft served by SGLang 0.5.23 with this
# plugin, a short depth-sweep measurement against it, then checks of the server log.
#
#   bash test/gpu/e2e_tiny_pair.sh [WORKDIR]        # default WORKDIR: ${TMPDIR:-/tmp}/eagle_cycle_e2e_tiny_pair
#
# Steps: (1) WORKDIR/pair from `eagle-cycle make-tiny-pair WORKDIR/pair --seed 11 --json` (CPU, about
# 3 minutes; reused when WORKDIR/pair/pair.json exists); (2) `python -m sglang.launch_server` on it with
# EAGLE3, 2 steps, topk 1, 3 draft tokens, in its own process group, log in WORKDIR/server.log; (3) wait
# for /health; (4) benchmarks/bench_eagle_cycle.py --url: concurrency 1, a few of the pair's held-out
# prompts, short greedy generations; (5) stop the server's process group (also on any exit);
# (6) `eagle-cycle inspect WORKDIR/server.log --json`; (7) test/gpu/tiny_pair_e2e.py check: the wiring
# line names the pair's capture positions, [eagle-cycle] lines exist with accept length > 1,
# other_ms >= 0, verify_fwd_ms <= verify_ms, mean total_ms within 30% of ITL p50 x accept length;
# (8) test/gpu/check_tiny_pair_gpu.py WORKDIR/pair (agreement on the GPU against the CPU).
#
# Environment: PYTHON (default python; needs torch with CUDA, SGLang 0.5.23 and this package installed
# in it, so that SGLang loads the plugin), PORT (default 30123), HEALTH_TIMEOUT (seconds, default 600),
# E2E_SERVER_ARGS (extra launch_server arguments, split on whitespace), E2E_NUM_PROMPTS (8),
# E2E_MAX_NEW_TOKENS (64), E2E_TOTAL_ITL_TOLERANCE (0.30: the total_ms vs ITL x accept length bound).
# Without a CUDA device it prints one "skipped" line and exits 0.
# Exit codes: 0 every check passed, 1 a check or a step failed, 2 unusable set-up (named).
# Test knobs (the CPU tests drive this script with the stand-in server): E2E_SERVER_CMD replaces
# "$PYTHON -m sglang.launch_server" (split on whitespace), E2E_ASSUME_CUDA=1 skips the CUDA probe.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PYTHON="${PYTHON:-python}"
PORT="${PORT:-30123}"
HEALTH_TIMEOUT="${HEALTH_TIMEOUT:-600}"
STOP_TIMEOUT=30
WORKDIR="${1:-${TMPDIR:-/tmp}/eagle_cycle_e2e_tiny_pair}"

say() { echo "e2e_tiny_pair: $*"; }

if ! command -v "$PYTHON" >/dev/null 2>&1; then
    say "error: PYTHON=$PYTHON not found (set PYTHON to the interpreter that has torch and SGLang)" >&2
    exit 2
fi
if [[ -z "${E2E_ASSUME_CUDA:-}" ]] &&
    ! "$PYTHON" -c 'import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
    echo "skipped: no CUDA device (torch.cuda.is_available() is not true for PYTHON=$PYTHON)"
    exit 0
fi

cd "$ROOT"
export PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"   # this checkout's sglang_eagle_cycle
mkdir -p "$WORKDIR"
WORKDIR="$(cd "$WORKDIR" && pwd)"
PAIR="$WORKDIR/pair"
LOG="$WORKDIR/server.log"
URL="http://127.0.0.1:$PORT"
SERVER_PID=""

# ---------------------------------------------------------------------------------------- set-up
if [[ -z "${E2E_SERVER_CMD:-}" ]]; then
    "$PYTHON" - <<'EOF' || exit 2
import importlib.util, sys
from importlib.metadata import PackageNotFoundError, entry_points, version
missing = [m for m in ("sglang", "sglang_eagle_cycle", "safetensors", "tokenizers", "httpx", "numpy")
           if importlib.util.find_spec(m) is None]
if missing:
    print("e2e_tiny_pair: error: missing python package(s): " + ", ".join(missing), file=sys.stderr)
    sys.exit(2)
if not any(e.name == "eagle_cycle" for e in entry_points(group="sglang.srt.plugins")):
    print("e2e_tiny_pair: error: the eagle_cycle plugin entry point is not installed in this environment "
          "(pip install -e . from the repository root), so SGLang would serve without the plugin",
          file=sys.stderr)
    sys.exit(2)
import torch
try:
    sg = version("sglang")
except PackageNotFoundError:
    sg = "?"
print(f"e2e_tiny_pair: torch {torch.__version__} (CUDA {torch.version.cuda}), {torch.cuda.get_device_name(0)}, "
      f"sglang {sg}")
if sg != "0.5.23":
    print(f"e2e_tiny_pair: warning: SGLang {sg}: the plugin registers on 0.5.23 only", file=sys.stderr)
EOF
fi
if ! "$PYTHON" -c 'import socket,sys; s=socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1])))' \
    "$PORT" 2>/dev/null; then
    say "error: port $PORT on 127.0.0.1 is in use (set PORT to a free one)" >&2
    exit 2
fi

if [[ -f "$PAIR/pair.json" ]]; then
    say "reusing the pair in $PAIR"
else
    say "making the tiny pair in $PAIR (CPU, about 3 minutes)"
    "$PYTHON" -m sglang_eagle_cycle.cli make-tiny-pair "$PAIR" --seed 11 --json --force \
        >"$WORKDIR/make_tiny_pair.json"
fi
"$PYTHON" - "$PAIR/pair.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
def pct(x):
    return "-" if x is None else f"{100 * x:.1f}%"
w = s.get("agreement_by_wiring") or {}
print(f"e2e_tiny_pair: pair {s.get('arch')} seed {s.get('seed')}: ids {s.get('aux_layer_ids')} -> positions "
      f"{s.get('positions')} of {s.get('num_layers')}; draft top-1 agreement {pct(s.get('draft_top1_agreement'))} "
      f"(aux zeroed {pct(s.get('aux_ablated_top1'))}, positions -1 {pct(w.get('-1'))}, +1 {pct(w.get('+1'))})")
EOF
"$PYTHON" "$HERE/tiny_pair_e2e.py" prompts "$PAIR" "$WORKDIR/prompts.jsonl" | sed 's/^/e2e_tiny_pair: /'

# ---------------------------------------------------------------------------------------- server
proc_state() {  # one-letter state of PID (empty when gone); Z = exited, not yet reaped
    local s
    s="$(cat "/proc/$1/stat" 2>/dev/null)" || return 0
    s="${s##*) }"
    echo "${s:0:1}"
}

stop_server() {
    [[ -n "$SERVER_PID" ]] || return 0
    local pg="$SERVER_PID" deadline=$((SECONDS + STOP_TIMEOUT)) state
    SERVER_PID=""
    kill -TERM -- "-$pg" 2>/dev/null || true
    while kill -0 -- "-$pg" 2>/dev/null; do
        state="$(proc_state "$pg")"
        if [[ -z "$state" || "$state" == Z ]]; then
            wait "$pg" 2>/dev/null || true           # reap the leader; the rest of the group may remain
        fi
        if ((SECONDS >= deadline)); then
            say "server group $pg still alive ${STOP_TIMEOUT}s after SIGTERM: SIGKILL"
            kill -KILL -- "-$pg" 2>/dev/null || true
            break
        fi
        sleep 0.2
    done
    wait "$pg" 2>/dev/null || true
    say "server stopped (process group $pg)"
}
trap stop_server EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

SERVER_CMD=("$PYTHON" -m sglang.launch_server)
if [[ -n "${E2E_SERVER_CMD:-}" ]]; then read -r -a SERVER_CMD <<<"$E2E_SERVER_CMD"; fi
EXTRA=()
if [[ -n "${E2E_SERVER_ARGS:-}" ]]; then read -r -a EXTRA <<<"$E2E_SERVER_ARGS"; fi
# Small footprint for an 8-layer model: 30% of the GPU's memory for weights + KV pool, decode CUDA
# graphs up to batch 8 (SGLang 0.5.23 spells it --cuda-graph-max-bs-decode), at most 8 requests.
SERVER_ARGS=(--model-path "$PAIR/target" --speculative-algorithm EAGLE3
    --speculative-draft-model-path "$PAIR/draft" --speculative-num-steps 2 --speculative-eagle-topk 1
    --speculative-num-draft-tokens 3 --log-level info --host 127.0.0.1 --port "$PORT"
    --mem-fraction-static 0.3 --cuda-graph-max-bs-decode 8 --max-running-requests 8)
say "launching: ${SERVER_CMD[*]} ${SERVER_ARGS[*]} ${EXTRA[*]+${EXTRA[*]}} (log: $LOG)"
# setsid + exec: the server leads its own process group (pgid = its pid), so the whole group
# (scheduler and detokenizer processes included) can be stopped at once.
"$PYTHON" -c 'import os, sys; os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])' \
    "${SERVER_CMD[@]}" "${SERVER_ARGS[@]}" ${EXTRA[@]+"${EXTRA[@]}"} >"$LOG" 2>&1 </dev/null &
SERVER_PID=$!

health_rc=0
"$PYTHON" - "$URL" "$SERVER_PID" "$HEALTH_TIMEOUT" <<'EOF' || health_rc=$?
import os, sys, time, urllib.request
url, pid, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy
t0 = time.monotonic()

def running() -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
            return True
        except OSError:
            return False

while True:
    try:
        with opener.open(url + "/health", timeout=5) as r:
            if r.status == 200:
                print(f"e2e_tiny_pair: healthy after {time.monotonic() - t0:.0f} s")
                sys.exit(0)
    except Exception:
        pass
    if not running():
        sys.exit(3)
    if time.monotonic() - t0 > timeout:
        sys.exit(4)
    time.sleep(1.0)
EOF
if ((health_rc != 0)); then
    if ((health_rc == 3)); then
        code=0
        wait "$SERVER_PID" || code=$?
        SERVER_PID=""
        say "error: the server exited (code $code) before /health answered; last lines of $LOG:" >&2
    else
        say "error: no healthy server at $URL within ${HEALTH_TIMEOUT}s; last lines of $LOG:" >&2
    fi
    tail -n 60 "$LOG" >&2 || true
    exit 1
fi

# ---------------------------------------------------------------------------------------- sweep
rm -f "$WORKDIR/sweep.jsonl"
sweep_rc=0
"$PYTHON" "$ROOT/benchmarks/bench_eagle_cycle.py" --url "$URL" --server-log "$LOG" --concurrency 1 \
    --num-prompts "${E2E_NUM_PROMPTS:-8}" --max-new-tokens "${E2E_MAX_NEW_TOKENS:-64}" --ignore-eos \
    --warmup-requests 2 --prompts "$WORKDIR/prompts.jsonl" --output "$WORKDIR/sweep.jsonl" \
    --no-plot --no-progress 2>&1 | tee "$WORKDIR/sweep.out" || sweep_rc=$?
((sweep_rc == 0)) || say "the sweep exited with code $sweep_rc (see $WORKDIR/sweep.out)"

stop_server

# ---------------------------------------------------------------------------------------- checks
inspect_rc=0
"$PYTHON" -m sglang_eagle_cycle.cli inspect "$LOG" --json >"$WORKDIR/inspect.json" || inspect_rc=$?
((inspect_rc == 0)) || say "eagle-cycle inspect exited with code $inspect_rc"
"$PYTHON" -m sglang_eagle_cycle.cli inspect "$LOG" 2>/dev/null | head -n 40 || true

check_rc=0
say "log checks"
"$PYTHON" "$HERE/tiny_pair_e2e.py" check --log "$LOG" --pair "$PAIR" --sweep "$WORKDIR/sweep.jsonl" \
    --inspect "$WORKDIR/inspect.json" --tolerance "${E2E_TOTAL_ITL_TOLERANCE:-0.30}" |
    tee "$WORKDIR/log_check.out" || check_rc=$?
gpu_rc=0
say "agreement on the GPU against the CPU"
"$PYTHON" "$HERE/check_tiny_pair_gpu.py" "$PAIR" | tee "$WORKDIR/agreement_check.out" || gpu_rc=$?

if ((check_rc == 0 && gpu_rc == 0 && sweep_rc == 0 && inspect_rc == 0)); then
    say "PASS (log checks, agreement check, sweep, inspect; files in $WORKDIR)"
    exit 0
fi
say "FAIL: log checks exit $check_rc, agreement check exit $gpu_rc, sweep exit $sweep_rc, inspect exit $inspect_rc (files in $WORKDIR)"
exit 1
