"""Decode cycles as a Chrome/Perfetto trace (trace-event JSON), streamed to a file.

One track per rank: process = input file, thread = rank (``rank=`` of our lines; lines without
it come from the stats-logging rank). Per cycle one ``cycle`` slice and, inside it, one slice
per phase in decode order: ``draft_prep`` (device-span lines: the cycle's start to the draft
launch), ``draft``, ``verify`` (holding ``verify_fwd``, the target forward, at its start),
``extend`` (draft-extend), ``other``. Every slice carries the cycle id and accept length as
arguments. Times are microseconds, as the format requires.

The log gives durations, not start times, so cycles of a track are laid end to end, apart by
their ``gap_ms`` where a device-span line gives one (empty time: the device waiting on the host;
older lines have no gap), and phase positions inside a cycle follow the phase order.
An aggregated line (``n=``) becomes one slice of ``n`` x its mean duration, named
``N cycles (mean)`` (``1 cycle (mean)``). Open the file at https://ui.perfetto.dev or chrome://tracing.

Usage::

    with open("cycles.json", "w") as fh:
        tw = TraceWriter(fh, max_cycles_per_track=100_000)
        for label, rec in records:
            tw.add(label, rec)
        tw.close()
"""

from __future__ import annotations

import json
from typing import Any, Optional, TextIO

from .cycle import CycleRecord
from .logfiles import text_label
from .report import count_of

STATS_RANK = "stats-logging rank"


class TraceWriter:
    """Streams trace events for cycle records; memory is one cursor per track.

    Args:
        fh: text file to write the JSON object to.
        max_cycles_per_track: records beyond this many per track are counted, not written
            (None: no limit).
    """

    def __init__(self, fh: TextIO, max_cycles_per_track: Optional[int] = None):
        self.fh = fh
        self.max_cycles = max_cycles_per_track
        self._pids: dict[str, int] = {}
        self._tids: dict[tuple[str, Optional[str]], int] = {}
        self._cursor_us: dict[tuple[str, Optional[str]], float] = {}
        self._written: dict[tuple[str, Optional[str]], int] = {}
        self.records_written = 0
        self.records_dropped = 0
        self._first = True
        fh.write('{"traceEvents":[\n')

    def _emit(self, event: dict[str, Any]) -> None:
        if not self._first:
            self.fh.write(",\n")
        self._first = False
        self.fh.write(json.dumps(event, separators=(",", ":")))

    def _track(self, label: str, rank: Optional[str]) -> tuple[int, int]:
        pid = self._pids.get(label)
        if pid is None:
            pid = self._pids[label] = len(self._pids) + 1
            self._emit({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": text_label(label)}})
        key = (label, rank)
        tid = self._tids.get(key)
        if tid is None:
            tid = self._tids[key] = sum(1 for k in self._tids if k[0] == label) + 1
            self._emit({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                        "args": {"name": text_label(rank or STATS_RANK)}})
            self._cursor_us[key] = 0.0
            self._written[key] = 0
        return pid, tid

    def add(self, label: str, rec: CycleRecord) -> None:
        """Add one record of input ``label`` (records of a track must come in log order)."""
        key = (label, rec.rank)
        pid, tid = self._track(label, rec.rank)
        if self.max_cycles is not None and self._written[key] >= self.max_cycles:
            self.records_dropped += 1
            return
        n = rec.weight
        phases = {"draft": rec.draft_ms, "verify": rec.verify_ms, "extend": rec.extend_ms, "other": rec.other_ms}
        if rec.device_spans:   # the host preparation opens a device-span cycle (cycle.CycleRecord)
            phases = {"draft_prep": rec.draft_prep_ms, **phases}
        total_ms = rec.total_ms if rec.total_ms is not None else sum(v for v in phases.values() if v)
        if not total_ms or total_ms <= 0:
            self.records_dropped += 1
            return
        # a device-span line's gap (the previous cycle's end to this one's start) is left empty
        gap_us = (rec.gap_ms or 0.0) * 1000.0 * n if rec.device_spans and self._written[key] else 0.0
        start = self._cursor_us[key] + gap_us
        end = start + total_ms * 1000.0 * n
        args: dict[str, Any] = {"cycle": rec.cycle, "accept_len": rec.accept_len, "bs": rec.bs,
                                "steps": rec.steps, "topk": rec.topk, "draft_tokens": rec.draft_tokens}
        name = "cycle"
        if rec.n is not None:
            args["n"] = rec.n
            name = f"{count_of(rec.n, 'cycle')} (mean)"   # "1 cycle (mean)", "8 cycles (mean)"
        elif rec.accepts is not None:
            args["accepts"] = rec.accepts
        base = {"ph": "X", "pid": pid, "tid": tid}
        self._emit({"name": name, **base, "ts": round(start, 3), "dur": round(end - start, 3),
                    "args": {**args, "total_ms": rec.total_ms, "graph": rec.graph}})
        short = {"cycle": rec.cycle, "accept_len": rec.accept_len}
        pos = start
        for phase, ms in phases.items():
            if ms is None:
                continue
            dur = min(ms * 1000.0 * n, end - pos)   # the line rounds each phase: stay inside the cycle
            self._emit({"name": phase, **base, "ts": round(pos, 3), "dur": round(max(dur, 0.0), 3),
                        "args": {**short, "ms": ms}})
            if phase == "verify" and rec.verify_fwd_ms is not None:
                fwd = min(rec.verify_fwd_ms * 1000.0 * n, max(dur, 0.0))
                self._emit({"name": "verify_fwd", **base, "ts": round(pos, 3), "dur": round(fwd, 3),
                            "args": {**short, "ms": rec.verify_fwd_ms}})
            pos += max(dur, 0.0)
        self._cursor_us[key] = end
        self._written[key] += 1
        self.records_written += 1

    @property
    def tracks(self) -> int:
        return len(self._tids)

    def close(self) -> None:
        """Finish the JSON object (does not close ``fh``)."""
        self.fh.write('\n],"displayTimeUnit":"ms","otherData":{"producer":"eagle-cycle inspect",'
                      '"layout":"cycles end to end per track, apart by their gap_ms; durations from the log"}}\n')
