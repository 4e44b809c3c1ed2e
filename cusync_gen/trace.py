"""Tile traces: what each SM ran and when, back to back against overlapped (issue 4, part 4).

The bench's `--trace FILE` (sm80 and sm90 GEMM chains) appends one JSON line per tile of one run of each mode, with the
%globaltimer time the tile was taken (ticket), the time its epilogue stored it and the SM that ran it.
This module turns those lines into a Gantt chart (PNG, one panel per mode, one row per SM) and a
Chrome/Perfetto trace (one process per mode, one thread per SM), which is how a user sees the producer's
last wave being filled by consumer tiles.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cusync_gen.errors import ToolError, UsageError

MODES = ("sequential", "overlapped")


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


def load_trace(path: Path) -> list[TileRecord]:
    """The bench's trace lines; tiles that never recorded an end (a timed-out run) are left out."""
    records = []
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as err:
        raise UsageError(f"cannot read trace {path}: {err}", "pass the file the bench wrote with --trace") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row: dict[str, Any] = json.loads(line)
            record = TileRecord(int(row["m"]), str(row["mode"]), str(row["stage"]), int(row["tile_m"]),
                                int(row["tile_n"]), int(row["sm"]), float(row["taken_us"]), float(row["stored_us"]))
        except (ValueError, KeyError, TypeError, OverflowError) as err:  # OverflowError: int(Infinity)
            raise UsageError(f"{path}:{number}: not a tile trace line ({err})",
                             "pass the file the bench wrote with --trace") from None
        if record.taken_us >= 0 and record.stored_us >= record.taken_us:
            records.append(record)
    if not records:
        raise UsageError(f"{path} holds no complete tile records", "run the bench with --trace on a GPU first")
    return records


def chrome_trace(records: list[TileRecord]) -> dict[str, Any]:
    """Chrome/Perfetto trace-event JSON: a process per (M, mode), a thread per SM, a slice per tile."""
    events: list[dict[str, Any]] = []
    processes: dict[tuple[int, str], int] = {}
    for r in records:
        pid = processes.setdefault((r.m, r.mode), len(processes) + 1)
        events.append({"name": f"{r.stage} ({r.tile_m}, {r.tile_n})", "cat": r.stage, "ph": "X", "pid": pid,
                       "tid": r.sm, "ts": r.taken_us, "dur": r.stored_us - r.taken_us})
    for (m, mode), pid in processes.items():
        events.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": f"M={m} {mode}"}})
    return {"traceEvents": events, "displayTimeUnit": "ns"}


def gantt_png(records: list[TileRecord], path: Path, m: int | None = None) -> Path:
    """One panel per mode (sequential above overlapped), SMs on the y axis, tiles as bars by stage."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        raise ToolError("matplotlib is not installed", hint="python3 -m pip install matplotlib") from None
    m = m if m is not None else records[0].m
    panels = [mode for mode in MODES if any(r.mode == mode and r.m == m for r in records)]
    if not panels:
        raise UsageError(f"the trace has no tiles at M = {m}", f"use one of: {sorted({r.m for r in records})}")
    stages = list(dict.fromkeys(r.stage for r in records if r.m == m))
    colors = {s: plt.get_cmap("tab10")(i % 10) for i, s in enumerate(stages)}
    end = max(r.stored_us for r in records if r.m == m)
    fig, axes = plt.subplots(len(panels), 1, figsize=(12, 3.2 * len(panels)), sharex=True, squeeze=False)
    for ax, mode in zip(axes[:, 0], panels):
        tiles = [r for r in records if r.m == m and r.mode == mode]
        for stage in stages:
            bars = [(r.sm, r.taken_us, r.stored_us - r.taken_us) for r in tiles if r.stage == stage]
            for sm, start, width in bars:
                ax.broken_barh([(start, width)], (sm - 0.4, 0.8), facecolors=colors[stage], linewidth=0)
        last = max(r.stored_us for r in tiles)
        ax.set_title(f"{mode}: {len(tiles)} tiles, last stored at {last:.0f} us")
        ax.set_ylabel("SM")
        ax.set_xlim(0, end * 1.02)
    axes[-1, 0].set_xlabel("us since the first tile was taken")
    fig.legend(handles=[Patch(color=colors[s], label=s) for s in stages], loc="upper right")
    fig.suptitle(f"tiles per SM at M = {m} (bar: ticket taken -> tile stored)")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_outputs(records: list[TileRecord], png: Path, m: int | None = None) -> tuple[Path, Path]:
    """The Gantt PNG and, beside it, the Chrome trace JSON (same name, .json)."""
    gantt_png(records, png, m)
    chrome = Path(png).with_suffix(".json")
    chrome.write_text(json.dumps(chrome_trace([r for r in records if m is None or r.m == m])))
    return Path(png), chrome
