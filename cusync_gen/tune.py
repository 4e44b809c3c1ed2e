"""`cusync-gen tune`: measure tile-shape variants of a GEMM-chain spec on the GPU, keep the fastest
tiles, policy and tile order per M, and write them back as a spec (issue 4, part 3).

Tile shapes are compile-time: one project per variant, generated under `<out>/<name>-<spec hash>`, so an
unchanged variant is neither regenerated nor rebuilt, and several build side by side. Policies and tile
orders are run-time switches of one bench binary, so each variant's binary times all of them
interleaved. Variants are separate binaries, and on the H200 one configuration measured 2.6% and 8%
apart in two binaries run a minute apart (GPU clocks drift as it heats): so the variants run round robin
for several rounds (`rounds`) and each time is the median over the rounds, times within TIE of the best
count as a tie, and a tie goes to the simpler candidate (the spec's own tiles, then the variants in the
order listed; policy spec, row, tile; the spec's tile order first).

sm90 specs get per-M tiles back as `tile_configs` (the library picks them by M at run time); sm80
specs have one tile configuration, so they get the variant that is best over all M (geometric mean).
"""

from __future__ import annotations

import copy
import io
import itertools
import json
import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from cusync_gen import fsio
from cusync_gen.errors import CusyncError, SpecError, UsageError
from cusync_gen.backends import BACKENDS
from cusync_gen.plan import ChainPlan, make_plan
from cusync_gen.spec.loading import parse_spec
from cusync_gen.spec.model import STREAM_MAX_M, Arch, ChainSpec, Mode, Op, spec_data, spec_hash, with_tiles

#: Relative time difference within which two candidates tie (run-to-run drift between binaries).
TIE = 0.02
Triple = tuple[int, int, int]


def default_tiles(arch: Arch) -> tuple[Triple, ...]:
    """Default candidates: the backend's TUNE_TILES, each on every GEMM stage."""
    return BACKENDS[arch.value].TUNE_TILES


def orders(arch: Arch) -> tuple[str, ...]:
    """The tile orders the bench times (`--orders`): the backend's TUNE_ORDERS."""
    return BACKENDS[arch.value].TUNE_ORDERS


#: The most tile combinations `--tiles` may give (each is a project generated, built and timed).
MAX_VARIANTS = 64
POLICY_RANK = {"spec": 0, "row": 1, "tile": 2}
#: sm90 run() modes (cusync/sm90/dispatch.h) and the bench column that times each; "overlap" is the row's
#: own overlapped time (its policy and order). Ties go to the simpler mode: CUTLASS's kernels as they are
#: first, tile synchronization last.
MODE_COLUMNS: dict[str, str] = {"stock": "stock_pdl_us", "pingpong": "pingpong_us", "cluster": "cluster_us",
                                "streamk": "streamk_us", "cublaslt": "cublaslt_us", "stream": "stream_us",
                                "overlap": "overlapped_us"}
MODE_RANK = {mode: rank for rank, mode in enumerate(MODE_COLUMNS)}
#: Modes of one row were timed round robin in one binary: two timings of one graph there differ by under
#: 1% (benchmarks/NOTES.md h4), so a narrower tie than TIE, which covers drift between binaries.
MODE_TIE = 0.01


@dataclass(frozen=True)
class Variant:
    """One tile choice: `tiles` maps GEMM stages to threadblocks (empty: the spec as written); `data` is
    its spec's data form (spec.model.spec_data), what its spec file holds."""

    index: int
    label: str
    tiles: dict[str, Triple]
    data: dict[str, Any] = field(repr=False)
    spec: ChainSpec = field(repr=False)


def check_choices(spec: ChainSpec, choices: dict[str, list[Triple]]) -> None:
    """--tiles names GEMM stages of the spec and gives at most MAX_VARIANTS combinations (counted, not
    enumerated): a UsageError otherwise."""
    gemms = [s.name for s in spec.stages if s.op is Op.GEMM]
    for name in choices:
        if name not in gemms:
            raise UsageError(f"--tiles: '{name}' is not a GEMM stage of {spec.name}", f"GEMM stages: {', '.join(gemms)}")
    count = math.prod(len(shapes) for shapes in choices.values())
    if count > MAX_VARIANTS:
        raise UsageError(f"--tiles gives {count} combinations of tiles, more than the limit of {MAX_VARIANTS} "
                         "variants", "each variant is a project built and timed on the GPU: pass fewer tiles "
                         "(the variants are the product of the --tiles lists)")


def make_variants(spec: ChainSpec, choices: dict[str, list[Triple]] | None = None,
                  ) -> tuple[list[Variant], list[str]]:
    """The spec itself, then one variant per tile combination; combinations the spec rules reject are
    returned as "label: reason" lines instead (e.g. a TileSync edge whose K no longer divides)."""
    gemms = [s.name for s in spec.stages if s.op is Op.GEMM]
    check_choices(spec, choices or {})
    if choices:
        names = list(choices)
        combos = [dict(zip(names, shapes)) for shapes in itertools.product(*(choices[n] for n in names))]
    else:
        combos = [{name: tile for name in gemms} for tile in default_tiles(spec.arch)]
    variants = [Variant(0, "spec", {}, spec_data(spec), spec)]
    seen = {spec_hash(spec)}
    skipped: list[str] = []
    for combo in combos:
        label = ",".join(f"{name}={'x'.join(map(str, tb))}" for name, tb in combo.items())
        candidate = spec_data(variant_spec(spec, combo))
        try:
            parsed = parse_spec(candidate, source=label)  # the rules, on the variant's data as it will be written
            make_plan(parsed)  # thread and shared-memory limits
        except SpecError as err:
            skipped.append(f"{label}: {err.message} ({err.field})")
            continue
        if spec_hash(parsed) in seen:
            continue
        seen.add(spec_hash(parsed))
        variants.append(Variant(len(variants), label, combo, candidate, parsed))
    return variants, skipped


def variant_spec(spec: ChainSpec, combo: dict[str, Triple]) -> ChainSpec:
    """The spec with the given GEMM threadblocks (spec.model.with_tiles: no tile_configs), their warp,
    pipeline, cluster and schedule back to their defaults (sm80: 4 pipeline stages for 128x128x32, the
    examples' choice, else 3), and each swiglu tile following its neighbours (cols = producer's N, rows =
    consumer's M). Not checked: parse its spec_data to check it."""
    tiles = {s.name: tuple(combo.get(s.name, s.tile.threadblock)) for s in spec.stages}
    moved = dict(combo)
    for stage in spec.stages:
        if stage.op is not Op.SWIGLU:
            continue
        consumer = next((s for s in spec.stages if s.a == stage.name and s.op is Op.GEMM), None)
        rows = tiles[consumer.name][0] if consumer is not None else stage.tile.threadblock[0]
        moved[stage.name] = (rows, tiles[stage.a][1], 1)
    spec = with_tiles(spec, moved)
    stages = []
    for stage in spec.stages:
        if stage.name in combo and stage.op is Op.GEMM:
            tb = combo[stage.name]
            pipeline = BACKENDS[spec.arch.value].tune_pipeline(tb)
            stage = stage.model_copy(update={"tile": stage.tile.model_copy(update={
                "warp": None, "instruction": None, "stages": pipeline, "schedule": None})})
        stages.append(stage)
    return spec.model_copy(update={"stages": stages})


def policies_for(plan: ChainPlan) -> list[str]:
    """The policies every GEMM edge of this plan allows (`spec` is always one)."""
    edges = [s.input for s in plan.stages if s.input is not None and s.op is Op.GEMM]
    policies = ["spec"]
    if edges and all(e.row_ok for e in edges) and not plan.optimizations.no_atomic_add:
        policies.append("row")
    if edges and all(e.tile_ok for e in edges):
        policies.append("tile")
    return policies


def generate_and_build(variants: list[Variant], out_dir: Path, jobs: int | None, cutlass_dir: Path | None,
                       target: str | None, bar: Any = None) -> list[Path]:
    """One project per variant (kept when its spec hash matches), built side by side."""
    from cusync_gen import build as builder
    from cusync_gen.render import generate

    projects: list[Path] = []
    for v in variants:
        project = out_dir / f"{v.spec.name}-{spec_hash(v.spec)}"
        if not (project / "manifest.json").is_file():
            spec_file = out_dir / f"{v.spec.name}-{spec_hash(v.spec)}.yaml"
            fsio.write_file(spec_file, yaml.safe_dump(v.data, sort_keys=False).encode(), "--work-dir", overwrite=True)
            generate(spec_file, project, cutlass_dir=cutlass_dir)
        projects.append(project)
    workers = max(1, min(len(projects), 4))
    per_build = max(1, (jobs or os.cpu_count() or 2) // workers)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(builder.build, p, target, per_build, "Release", cutlass_dir, False, bar, v.label)
                   for p, v in zip(projects, variants)]
        for f in futures:
            f.result()
    return projects


def run_variants(variants: list[Variant], projects: list[Path], ms: list[int], repeats: int, warmup: int,
                 orders: list[str] | None, rounds: int = 3,
                 on_done: Callable[[Variant, str | None], None] | None = None) -> list[dict[str, Any]]:
    """Every variant's bench over every M, all its policies and the asked orders, `rounds` times round
    robin; rows get `variant` and `round`. A variant whose bench fails (a check, a timeout) keeps the
    rows it printed, which then do not count (`_usable`), and `on_done` hears why."""
    from cusync_gen import build as builder

    rows: list[dict[str, Any]] = []
    for round_ in range(rounds):
        for v, project in zip(variants, projects):
            extra = ["--orders", ",".join(orders)] if orders else []
            failure: str | None = None
            try:
                printed = builder.run(project, ms, policies_for(make_plan(v.spec)), repeats, warmup, extra)
            except CusyncError as err:
                printed = [dict(r, bitwise_equal=False) for r in getattr(err, "rows", None) or []]
                failure = str(getattr(err, "message", err))
            rows += [{**r, "variant": v.label, "variant_index": v.index, "round": round_} for r in printed if "m" in r]
            if on_done is not None:
                on_done(v, failure)
    return rows


def medians(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (variant, M, policy, order): median times over the rounds; correct only if every
    round was."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["variant_index"], r["m"], r.get("policy"), r.get("order", "spec")), []).append(r)
    out = []
    for group in groups.values():
        merged = dict(group[0])
        for key in ("overlapped_us", "sequential_us", *(c for c in MODE_COLUMNS.values() if c in merged)):
            values = sorted(float(r.get(key, 0.0)) for r in group)
            merged[key] = values[len(values) // 2] if len(values) % 2 else 0.5 * (values[len(values) // 2 - 1]
                                                                                 + values[len(values) // 2])
        merged["bitwise_equal"] = all(r.get("bitwise_equal") for r in group)
        merged["sync_error"] = next((r["sync_error"] for r in group if r.get("sync_error")), None)
        merged["rounds"] = len(group)
        merged.pop("round", None)
        out.append(merged)
    return out


def _usable(row: dict[str, Any]) -> bool:
    return bool(row.get("bitwise_equal")) and row.get("sync_error") is None and row.get("overlapped_us", 0) > 0


def mode_times(row: dict[str, Any]) -> dict[str, float]:
    """What each run() mode took in this row (sm90 benches time them all; sm80 rows only overlap). A
    mode whose check failed does not count: stock and clusters must be bitwise equal to the back-to-back
    run, stream-K within the bench's tolerance of it."""
    ok = {"stock": row.get("stock_bitwise", True), "cluster": row.get("cluster_bitwise", True),
          "streamk": row.get("streamk_rel_diff", 0.0) < 1e-2, "pingpong": row.get("pingpong_rel_diff", 0.0) < 1e-2,
          "cublaslt": row.get("cublaslt_rel_diff", 0.0) < 1e-2,
          "stream": (row.get("stream_rel_diff", 0.0) < 1e-2 and row.get("stream_repeatable", True)
                     and row.get("stream_sync_ok", True)),
          "overlap": True}
    return {mode: float(row[column]) for mode, column in MODE_COLUMNS.items()
            if ok[mode] and float(row.get(column, 0.0) or 0.0) > 0.0}


def best_mode(row: dict[str, Any]) -> tuple[str, float]:
    """The fastest mode of a row; modes within TIE of it tie and the simpler (MODE_RANK) wins."""
    times = mode_times(row)
    fastest = min(times.values())
    mode = min((m for m, t in times.items() if t <= fastest * (1 + MODE_TIE)), key=MODE_RANK.__getitem__)
    return mode, times[mode]


def best_us(row: dict[str, Any]) -> float:
    return best_mode(row)[1]

def _rank(row: dict[str, Any]) -> tuple[int, int, int]:
    order = str(row.get("order", "spec"))
    return (int(row["variant_index"]), POLICY_RANK.get(str(row.get("policy")), 9), 0 if order == "spec" else 1)


def choose(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Per M, the fastest correct row; rows within TIE of it tie, and the simplest of those wins."""
    best: dict[int, dict[str, Any]] = {}
    for m in sorted({int(r["m"]) for r in rows}):
        candidates = [r for r in rows if r["m"] == m and _usable(r)]
        if not candidates:
            raise CusyncError(f"no variant ran correctly at M = {m}", hint="see the rows above; run `cusync-gen run` on the spec")
        fastest = min(best_us(r) for r in candidates)
        tied = [r for r in candidates if best_us(r) <= fastest * (1 + TIE)]
        winner = dict(min(tied, key=_rank))
        winner["mode"], winner["best_us"] = best_mode(winner)
        best[m] = winner
    return best


def dispatch_table(winners: dict[int, dict[str, Any]]) -> dict[str, Any] | None:
    """sm90: the spec's `dispatch:` from the winners' modes. Between two measured M the cut is their
    geometric mean; the last entry ends at the largest M measured (above it the library's rule decides); an
    entry of mode stream ends at STREAM_MAX_M at most. None when the rows carry no GPU (sm80 benches time only
    overlap)."""
    ms = sorted(winners)
    first = winners[ms[0]]
    if "sms" not in first or "stock_pdl_us" not in first:
        return None
    entries: list[dict[str, Any]] = []
    for i, m in enumerate(ms):
        cut = m if i + 1 == len(ms) else int(math.sqrt(m * ms[i + 1]))
        mode = winners[m]["mode"]
        cut = min(cut, STREAM_MAX_M) if mode == Mode.STREAM.value else cut
        if entries and entries[-1]["mode"] == mode:
            entries[-1]["m_max"] = cut
        else:
            entries.append({"m_max": cut, "mode": mode})
    return {"gpu": str(first["gpu"]), "sms": int(first["sms"]), "modes": entries}


def baseline(rows: list[dict[str, Any]], m: int) -> dict[str, Any] | None:
    """The spec as written at M: its own tiles, policy and order."""
    return next((r for r in rows if r["m"] == m and r["variant_index"] == 0 and r.get("policy") == "spec"
                 and r.get("order", "spec") == "spec"), None)


def tuned_spec(variants: list[Variant], rows: list[dict[str, Any]], winners: dict[int, dict[str, Any]],
               ) -> tuple[dict[str, Any], list[str]]:
    """The spec to write back, and notes on what could not be expressed in it."""
    spec = variants[0].spec
    notes: list[str] = []
    if BACKENDS[spec.arch.value].FACTS.tile_configs:  # per-M tiles as tile_configs
        data = _per_m_tiles(variants, winners)
        table = dispatch_table(winners)
        if table is not None:
            data["dispatch"] = table
        chosen = list(winners.values())
    else:
        # One tile configuration: the variant whose best time per M has the best geometric mean.
        def score(v: Variant) -> float:
            times = [min((best_us(r) for r in rows if r["variant"] == v.label and r["m"] == m and _usable(r)),
                         default=math.inf) for m in winners]
            return math.exp(sum(math.log(t) for t in times) / len(times)) if all(math.isfinite(t) for t in times) else math.inf
        best = min(variants, key=lambda v: (score(v), v.index))
        if len({w["variant"] for w in winners.values()}) > 1:
            notes.append("sm80 specs have one tile configuration: the per-M winners differ, so the variant with the "
                         f"best geometric mean over all M was kept ({best.label})")
        data = copy.deepcopy(best.data)
        chosen = list(choose([r for r in rows if r["variant"] == best.label]).values())
    # Policy and order: the ones that win at the most M (ties: the simpler); the spec has one of each.
    policy = min({str(w.get("policy", "spec")) for w in chosen},
                 key=lambda p: (-sum(w.get("policy") == p for w in chosen), POLICY_RANK.get(p, 9)))
    order = min({str(w.get("order", "spec")) for w in chosen},
                key=lambda o: (-sum(str(w.get("order", "spec")) == o for w in chosen), o != "spec"))
    candidate = copy.deepcopy(data)
    for stage in candidate["stages"]:
        if policy != "spec" and stage.get("op") == Op.GEMM.value and stage.get("sync") not in (None, "none"):
            stage["sync"] = policy
        if order not in ("spec", "ticket", "hw"):
            stage["order"] = order
    if order == "hw":
        candidate.setdefault("optimizations", {})["avoid_custom_order"] = True
    try:
        parse_spec(candidate, source="tuned spec")
        data = candidate
    except SpecError as err:
        notes.append(f"kept the spec's policy and order: policy {policy} / order {order} do not fit ({err.message})")
    return data, notes


def _per_m_tiles(variants: list[Variant], winners: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """sm90: the winner's tiles at each tuned M, cut into tile_configs at the largest M of each run of
    equal tiles; the largest M's tiles become the stages' own."""
    by_label = {v.label: v for v in variants}

    def tiles_at(m: int) -> dict[str, Triple]:
        v = by_label[winners[m]["variant"]]
        config = make_plan(v.spec).config_for(m)
        return {s.name: (s.tile.m, s.tile.n, s.tile.k) for s in config.stages}

    ms = sorted(winners)
    runs: list[tuple[int, dict[str, Triple]]] = []
    for m in ms:
        tiles = tiles_at(m)
        if runs and runs[-1][1] == tiles:
            runs[-1] = (m, tiles)
        else:
            runs.append((m, tiles))
    data = spec_data(variant_spec(variants[0].spec, runs[-1][1]))
    if len(runs) > 1:
        data["tile_configs"] = [{"m_max": m, "tiles": {name: list(tb) for name, tb in tiles.items()}}
                                for m, tiles in runs[:-1]]
    return data


def winners_table(name: str, rows: list[dict[str, Any]], winners: dict[int, dict[str, Any]]) -> Any:
    """The table `tune` prints: per M the winner against the spec as written."""
    from rich.table import Table

    table = Table(title=f"tune {name}: fastest per M (ties within {TIE:.0%} go to the simpler)")
    for column in ("M", "tiles", "policy", "order", "mode", "us", "spec as written us", "gain"):
        table.add_column(column, justify="left" if column in ("tiles", "policy", "order", "mode") else "right")
    for m, w in winners.items():
        base = baseline(rows, m)
        base_us = base["overlapped_us"] if base else math.nan
        table.add_row(str(m), w["variant"], str(w.get("policy")), str(w.get("order", "spec")), w["mode"],
                      f"{w['best_us']:.1f}", f"{base_us:.1f}", f"{base_us / w['best_us']:.2f}x")
    return table


def header_lines(gpu: str, ms: str, winners: dict[int, dict[str, Any]]) -> list[str]:
    """The comment block of a tuned spec: where and when it was measured, and the winner per M."""
    import datetime

    return [f"tuned by cusync-gen tune on {gpu}, {datetime.date.today().isoformat()}, M = {ms}",
            "fastest per M: " + "; ".join(f"{m}: {w['variant']} {w.get('policy')}/{w.get('order', 'spec')} "
                                          f"{w['mode']} {w['best_us']:.1f} us" for m, w in winners.items())]


def write_spec(path: Path, data: dict[str, Any], header: list[str]) -> None:
    text = "".join(f"# {line}\n" for line in header) + yaml.safe_dump(data, sort_keys=False)
    parse_spec(yaml.safe_load(text), source=str(path))  # never write a spec we would reject
    fsio.write_file(path, text.encode(), "--write", overwrite=True)


def write_plot(rows: list[dict[str, Any]], png: Path, title: str) -> Path:
    """Time of each variant's best policy/order vs M, and its speedup over the spec as written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ms = sorted({int(r["m"]) for r in rows})
    labels = list(dict.fromkeys(r["variant"] for r in rows))
    fig, (ax_t, ax_s) = plt.subplots(1, 2, figsize=(13, 4.8))
    for label in labels:
        times = [min((r["overlapped_us"] for r in rows if r["variant"] == label and r["m"] == m and _usable(r)),
                     default=math.nan) for m in ms]
        base = [(baseline(rows, m) or {}).get("overlapped_us", math.nan) for m in ms]
        ax_t.plot(ms, times, marker="o", label=label)
        ax_s.plot(ms, [b / t if t and not math.isnan(t) else math.nan for b, t in zip(base, times)], marker="o",
                  label=label)
    for ax in (ax_t, ax_s):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("M")
        ax.grid(True, alpha=0.3)
    ax_t.set_ylabel("overlapped time, us (best policy and order)")
    ax_s.set_ylabel("speedup over the spec as written")
    ax_s.axhline(1.0, color="gray", lw=0.8)
    ax_s.legend(fontsize=7, loc="best")
    fig.suptitle(title)
    fig.tight_layout()
    picture = io.BytesIO()
    fig.savefig(picture, dpi=110, format="png")
    plt.close(fig)
    fsio.write_file(png, picture.getvalue(), "--work-dir", overwrite=True)
    return png


def save_rows(rows: list[dict[str, Any]], path: Path) -> None:
    fsio.write_file(path, "".join(json.dumps(r) + "\n" for r in rows).encode(), "--work-dir", overwrite=True)
