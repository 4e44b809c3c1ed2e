"""Tile traces: what each SM ran and when, back to back against overlapped.

The bench's `--trace FILE` (GEMM chains on sm80 and sm90, conv chains) appends one JSON line per tile of one run of
each mode, with the %globaltimer time the tile was taken (its ticket, or its block's start), the time its epilogue
stored it and the SM that ran it. A conv chain's lines carry the batch in "m" and say so ("size": "batch"), add
the chained mode (back to back with programmatic dependent launch), and the time the tile's waits ended and its
loads could begin ("ready_us"), which splits a tile's bar into its wait and its work.
This module turns those lines into a Gantt chart (PNG, one panel per mode, one row per SM) and a
Chrome/Perfetto trace (one process per mode, one thread per SM), which is how a user sees the producer's
last wave being filled by consumer tiles.
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cusync_gen import fsio, userfile
from cusync_gen.errors import ToolError, UsageError
from cusync_gen.spec.limits import MAX_M, MAX_NAME_LENGTH, MAX_STAGES

MODES = ("sequential", "chained", "overlapped")
SIZES = ("M", "batch")  # what "m" counts: a GEMM chain's rows (the default), a conv chain's images
#: What a trace may hold. The bench writes about 130 bytes per tile; GPT-3's MLP at M = 1024 on the H200 is
#: 1152 tiles per mode. Loading and drawing the largest trace allowed takes seconds, not minutes.
MAX_TRACE_BYTES = 32 << 20
MAX_TRACE_RECORDS = 200_000   # lines with a tile record, complete or not
MAX_TRACE_US = 1e9            # a time in the trace (us since the run's first ticket): 1000 s
MAX_TRACE_SM = 1 << 12        # SM ids are below this (an H200 has 132 SMs)
MAX_TRACE_TILE = (1 << 31) - 1
NOT_RECORDED = -1.0           # the bench's time of a tile that never took its ticket or stored its tile
_LINE_DEPTH = 4               # a record is one flat object: deeper is refused before json.loads
_HINT = "pass the file the bench wrote with --trace"


@dataclass(frozen=True)
class TileRecord:
    m: int
    mode: str
    stage: str
    tile_m: int
    tile_n: int
    sm: int
    taken_us: float
    stored_us: float
    size: str = "M"  # SIZES: what m counts
    ready_us: float | None = None  # its waits ended (conv chains): taken_us <= ready_us <= stored_us, or None

    @property
    def work_us(self) -> float:
        """The tile's time from the end of its waits (or from when it was taken) to its store."""
        return self.stored_us - (self.ready_us if self.ready_us is not None else self.taken_us)


def _shown(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, float) or math.isfinite(value) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _int(row: dict[str, Any], key: str, low: int, high: int, where: str) -> int:
    value = row[key]
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise UsageError(f"{where}: {key} is {_shown(value)}, not an integer from {low} to {high}", _HINT)
    return value


def _time(row: dict[str, Any], key: str, where: str) -> float | None:
    """A time in us, or None for the bench's NOT_RECORDED."""
    value = row[key]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value == NOT_RECORDED:
            return None
        if math.isfinite(value) and 0 <= value <= MAX_TRACE_US:
            return float(value)
    raise UsageError(f"{where}: {key} is {_shown(value)}, not a time in us from 0 to {MAX_TRACE_US:.0e} "
                     f"(or {NOT_RECORDED:g}: not recorded)", _HINT)


def _name(row: dict[str, Any], key: str, where: str) -> str:
    value = row[key]
    if not isinstance(value, str) or not value or len(value) > MAX_NAME_LENGTH or not value.isprintable():
        raise UsageError(f"{where}: {key} is {_shown(value)}, not a name of 1 to {MAX_NAME_LENGTH} printable "
                         "characters", _HINT)
    return value


_FIELDS = ("m", "mode", "stage", "tile_m", "tile_n", "sm", "taken_us", "stored_us")


def _record(row: Any, where: str) -> tuple[TileRecord, bool]:
    """One trace line's record, and whether it is complete (both times recorded, stored after taken)."""
    if not isinstance(row, dict):
        raise UsageError(f"{where}: not a tile record (a JSON object), but {_shown(row)}", _HINT)
    missing = [key for key in _FIELDS if key not in row]
    if missing:
        raise UsageError(f"{where}: not a tile record: no {', '.join(missing)}", _HINT)
    taken, stored = _time(row, "taken_us", where), _time(row, "stored_us", where)
    ready = _time(row, "ready_us", where) if "ready_us" in row else None
    if ready is not None and not (taken is not None and stored is not None and taken <= ready <= stored):
        ready = None  # a tile's waits end between its start and its store; anything else is not a ready time
    size = row.get("size", "M")
    if size not in SIZES:
        raise UsageError(f"{where}: size is {_shown(size)}, not one of {', '.join(map(repr, SIZES))}", _HINT)
    record = TileRecord(_int(row, "m", 1, MAX_M, where), _name(row, "mode", where), _name(row, "stage", where),
                        _int(row, "tile_m", 0, MAX_TRACE_TILE, where), _int(row, "tile_n", 0, MAX_TRACE_TILE, where),
                        _int(row, "sm", 0, MAX_TRACE_SM - 1, where),
                        taken if taken is not None else NOT_RECORDED, stored if stored is not None else NOT_RECORDED,
                        size, ready)
    return record, taken is not None and stored is not None and stored >= taken


def load_trace(path: Path) -> list[TileRecord]:
    """The bench's trace lines; tiles that never recorded an end (a timed-out run) are left out.

    Any file: a FIFO or device is refused without blocking, at most MAX_TRACE_BYTES and MAX_TRACE_RECORDS,
    every value checked (types, ranges, finite times), and modes other than MODES named; each problem is
    one UsageError naming the file and line."""
    path = Path(path)
    try:
        text = userfile.read_text(path, "trace", MAX_TRACE_BYTES)
    except userfile.UserFileError as err:
        if err.reason == "too_large":
            raise UsageError(err.message, "trace a smaller --m (or cut the file to the M you want to see)") from None
        raise
    records: list[TileRecord] = []
    count = 0
    first_line: dict[str, int] = {}  # mode -> first line
    stages: set[str] = set()
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        count += 1
        if count > MAX_TRACE_RECORDS:
            raise UsageError(f"{path} holds more than {MAX_TRACE_RECORDS} tile records, the limit for a trace",
                             "trace a smaller --m (or cut the file to the M you want to see)")
        where = f"{path}:{number}"
        record, complete = _record(userfile.parse_json(line, where, _LINE_DEPTH, _HINT), where)
        first_line.setdefault(record.mode, number)
        if record.stage not in stages:
            stages.add(record.stage)
            if len(stages) > MAX_STAGES:
                raise UsageError(f"{where}: more than {MAX_STAGES} stages in one trace (a chain has at most "
                                 f"{MAX_STAGES})", _HINT)
        if complete:
            records.append(record)
    unknown = [mode for mode in first_line if mode not in MODES]
    if unknown:
        present = ", ".join(repr(mode) for mode in sorted(first_line)[:8])
        raise UsageError(f"{path}:{first_line[unknown[0]]}: unknown mode {unknown[0]!r}: trace draws the modes "
                         f"{', '.join(MODES)}", f"modes in this trace: {present}; {_HINT}")
    if not records:
        raise UsageError(f"{path} holds no complete tile records", "run the bench with --trace on a GPU first")
    return records


def chrome_trace(records: list[TileRecord]) -> dict[str, Any]:
    """Chrome/Perfetto trace-event JSON: a process per (M, mode), a thread per SM, a slice per tile."""
    events: list[dict[str, Any]] = []
    processes: dict[tuple[int, str], int] = {}
    for r in records:
        pid = processes.setdefault((r.m, r.mode), len(processes) + 1)
        name = f"{r.stage} ({r.tile_m}, {r.tile_n})"
        start = r.taken_us
        if r.ready_us is not None and r.ready_us > r.taken_us:
            events.append({"name": f"{name} wait", "cat": "wait", "ph": "X", "pid": pid, "tid": r.sm,
                           "ts": r.taken_us, "dur": r.ready_us - r.taken_us})
            start = r.ready_us
        events.append({"name": name, "cat": r.stage, "ph": "X", "pid": pid, "tid": r.sm, "ts": start,
                       "dur": r.stored_us - start})
    sizes = {r.m: r.size for r in records}
    for (m, mode), pid in processes.items():
        events.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": f"{sizes[m]}={m} {mode}"}})
    return {"traceEvents": events, "displayTimeUnit": "ns"}


def gantt_png(records: list[TileRecord], path: Path, m: int | None = None) -> Path:
    """One panel per mode (sequential above overlapped), SMs on the y axis, tiles as bars by stage (a tile's
    wait, where the trace has it, in the stage's colour, faded)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        raise ToolError("matplotlib is not installed", hint="python3 -m pip install matplotlib") from None
    import numpy as np
    from matplotlib.collections import PolyCollection

    m = m if m is not None else records[0].m
    size = records[0].size
    at_m = [r for r in records if r.m == m]
    if not at_m:
        ms = sorted({r.m for r in records})
        shown = ", ".join(map(str, ms[:10])) + (f", ... ({len(ms)} values)" if len(ms) > 10 else "")
        flag = "--batch" if size == "batch" else "--m"
        raise UsageError(f"the trace has no tiles at {size} = {m}", f"pass {flag} with one of: {shown}")
    panels = [mode for mode in MODES if any(r.mode == mode for r in at_m)]
    stages = list(dict.fromkeys(r.stage for r in at_m))
    colors = {s: plt.get_cmap("tab10")(i % 10) for i, s in enumerate(stages)}
    end = max(max(r.stored_us for r in at_m), 1.0)
    top = max(r.sm for r in at_m)
    fig, axes = plt.subplots(len(panels), 1, figsize=(12, 3.2 * len(panels)), sharex=True, squeeze=False)
    for ax, mode in zip(axes[:, 0], panels):
        tiles = [r for r in at_m if r.mode == mode]
        for stage in stages:  # one collection of rectangles per stage, not a call per tile
            own = [r for r in tiles if r.stage == stage]
            if not own:
                continue
            waits = [(r.taken_us, r.ready_us, r.sm) for r in own if r.ready_us is not None and r.ready_us > r.taken_us]
            work = [(r.stored_us - r.work_us, r.stored_us, r.sm) for r in own]
            for spans, alpha in ((waits, 0.3), (work, 1.0)):
                if not spans:
                    continue
                bars = np.array(spans, dtype=float)
                x0, x1, y = bars[:, 0], bars[:, 1], bars[:, 2]
                corners = np.stack([np.column_stack((x0, y - 0.4)), np.column_stack((x0, y + 0.4)),
                                    np.column_stack((x1, y + 0.4)), np.column_stack((x1, y - 0.4))], axis=1)
                ax.add_collection(PolyCollection(corners, facecolors=colors[stage], alpha=alpha, linewidths=0))
        last = max(r.stored_us for r in tiles)
        ax.set_title(f"{mode}: {len(tiles)} tiles, last stored at {last:.0f} us")
        ax.set_ylabel("SM")
        ax.set_xlim(0, end * 1.02)
        ax.set_ylim(-1, top + 1)
    axes[-1, 0].set_xlabel("us since the first tile was taken")
    fig.legend(handles=[Patch(color=colors[s], label=s) for s in stages], loc="upper right")
    waited = any(r.ready_us is not None for r in at_m)
    fig.suptitle(f"tiles per SM at {size} = {m} (bar: tile taken -> tile stored"
                 + ("; faded: its waits)" if waited else ")"))
    fig.tight_layout()
    path = Path(path)
    if not path.suffix:  # as matplotlib names a file given without one
        path = path.with_name(path.name + ".png")
    picture = io.BytesIO()
    fig.savefig(picture, dpi=110, format=path.suffix.lstrip(".").lower())
    plt.close(fig)
    fsio.write_file(path, picture.getvalue(), "-o", overwrite=True)  # replaces a link, never writes through it
    return path


def summary(records: list[TileRecord], m: int | None = None) -> list[str]:
    """The trace in a few lines: per mode when its last tile was stored, and per stage its tiles, the SMs they
    ran on, when the first was taken and the last stored, and a tile's median time (taken -> stored; where the
    trace has when the waits ended, the median wait and the median work after it)."""
    m = m if m is not None else records[0].m
    at_m = [r for r in records if r.m == m]
    lines: list[str] = []
    for mode in MODES:
        tiles = [r for r in at_m if r.mode == mode]
        if not tiles:
            continue
        lines.append(f"{mode}: {len(tiles)} tiles, the last stored at {max(r.stored_us for r in tiles):.1f} us")
        for stage in dict.fromkeys(r.stage for r in tiles):
            own = [r for r in tiles if r.stage == stage]
            spans = sorted(r.stored_us - r.taken_us for r in own)
            lines.append(f"  {stage}: {len(own)} tiles on {len({r.sm for r in own})} SMs, taken "
                         f"{min(r.taken_us for r in own):.1f}-{max(r.taken_us for r in own):.1f} us, stored "
                         f"{min(r.stored_us for r in own):.1f}-{max(r.stored_us for r in own):.1f} us, "
                         f"a tile {spans[len(spans) // 2]:.1f} us (median)" + _wait_and_work(own))
    return lines


def _wait_and_work(tiles: list[TileRecord]) -> str:
    """', waits W us, then X us of work (medians)' over the tiles that recorded the end of their waits."""
    ready = [r for r in tiles if r.ready_us is not None]
    if not ready:
        return ""
    waits = sorted(r.ready_us - r.taken_us for r in ready)  # type: ignore[operator]
    work = sorted(r.work_us for r in ready)
    return f": waits {waits[len(waits) // 2]:.1f} us, then {work[len(work) // 2]:.1f} us of work (medians)"


def write_outputs(records: list[TileRecord], png: Path, m: int | None = None) -> tuple[Path, Path]:
    """The Gantt PNG and, beside it, the Chrome trace JSON (same name, .json)."""
    picture = gantt_png(records, png, m)
    chrome = Path(png).with_suffix(".json")
    fsio.write_file(chrome, json.dumps(chrome_trace([r for r in records if m is None or r.m == m])).encode(), "-o",
                    overwrite=True)
    return picture, chrome
