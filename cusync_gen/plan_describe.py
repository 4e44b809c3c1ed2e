"""What `validate` says of a GEMM chain's plan: the text (`describe`) and the JSON (`json_header`,
`json_at`; keys in docs/validate-json.md), and the JSON pieces an attention plan shares (`json_identity`,
`tile_json`).

It reads the plan and derives nothing the plan does not hold: the numbers come from cusync_gen.plan, the
run() mode from ChainPlan.run_mode (cusync_gen.run_modes). ChainPlan.describe, json_header and json_at
call these functions. The plan's types are imported only for type checking, so plan imports this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cusync_gen.errors import UsageError
from cusync_gen.spec.model import STREAM_MAX_M, Op, Order, Policy, Schedule
from cusync_gen.spec.policies import POLICIES

if TYPE_CHECKING:
    from cusync_gen.plan import ChainPlan, EdgePlan, StagePlan, TilePlan

VALIDATE_JSON_SCHEMA = 1  # `validate --json`'s format version: bumped when a key changes (docs/validate-json.md)


def check_m(m: int) -> None:
    """M of `validate --m`: a positive number of rows."""
    if m <= 0:
        raise UsageError(f"M must be a positive integer, got {m}", "pass --m with a value like 2048")


def describe(plan: ChainPlan, m: int) -> str:
    """What `validate` prints: the derived numbers and why each choice is (not) legal at this M."""
    check_m(m)
    lines = [
        f"chain {plan.name} (class {plan.class_name}), spec hash {plan.spec_hash}",
        f"target {plan.target} (arch {plan.arch.value}, {plan.dtype.value}), {plan.sms} SMs, M = {m}",
    ]
    config = plan.config_for(m)
    if plan.dependencies:
        lines.append("tile dependencies (BM, BN, BK: the consumer's tile):")
        lines += list(plan.dependencies)
    if plan.auto_policies:
        lines.append("sync: auto resolved (first policy whose tiles line up): " + ", ".join(plan.auto_policies))
    if len(plan.configs) > 1:
        lines.append("tile configurations (picked by M at run time):")
        for c in plan.configs:
            when = f"M <= {c.m_max}" if c.m_max is not None else "otherwise"
            tiles = ", ".join(f"{s.name} {s.tile.m}x{s.tile.n}" for s in c.stages)
            mark = "  <- this M" if c is config else ""
            lines.append(f"  {c.index}: {when}: {tiles}{mark}")
    for s in config.stages:
        lines += _describe_stage(plan, s, m)
    lines += _describe_optimizations(plan, m)
    if plan.facts.run_modes:
        mode, why = plan.run_mode(m)
        lines.append(f"run() mode   {mode.value} on a GPU with {plan.sms} SMs: {why}")
    return "\n".join(lines) + "\n"


def json_header(plan: ChainPlan) -> dict[str, Any]:
    """The M-independent part of `validate --json` (docs/validate-json.md)."""
    return {
        **json_identity(plan, "chain"),
        "dependencies": [line.strip() for line in plan.dependencies],
        "auto_policies": list(plan.auto_policies),
        "tile_configs": [{"index": c.index, "m_max": c.m_max,
                          "threadblocks": {s.name: tile_json(s.tile, s.op is Op.GEMM)["threadblock"]
                                           for s in c.stages}}
                         for c in plan.configs],
    }


def json_at(plan: ChainPlan, m: int) -> dict[str, Any]:
    """What describe(m) says, as JSON values (one entry of `sizes` in `validate --json`)."""
    check_m(m)
    config = plan.config_for(m)
    mode = None
    if plan.facts.run_modes:
        mode_value, why = plan.run_mode(m)
        mode = {"mode": mode_value.value, "reason": why, "sms": plan.sms}
    return {
        "m": m,
        "tile_config": config.index,
        "stages": [_stage_json(plan, s, m) for s in config.stages],
        "optimizations": _optimizations(plan, m),
        "run_mode": mode,
        "warnings": plan.warnings(m),
    }


# ---------------------------------------------------------------------------------------------------
# describe() pieces


def _waves(plan: ChainPlan, s: StagePlan, m: int) -> tuple[int, int, int, float, float]:
    """(tiles_m, tiles_n, tiles, waves, percent of SM slots the last wave fills) on the plan's SMs."""
    tiles_m, tiles_n = s.grid(m)
    total = tiles_m * tiles_n
    slots = plan.sms * s.occupancy
    last = total % slots
    return tiles_m, tiles_n, total, total / slots, 100.0 * (last if last else slots) / slots


#: How `explain` names an sm90 schedule.
_SCHEDULE_TEXT = {Schedule.COOPERATIVE: "cooperative",
                  Schedule.PINGPONG: "ping-pong (math warp groups on alternate tiles)"}


def _describe_stage(plan: ChainPlan, s: StagePlan, m: int) -> list[str]:
    t = s.tile
    tiles_m, tiles_n, total, waves, fill = _waves(plan, s, m)
    if s.op is Op.GEMM and plan.facts.warp_specialized:
        head = f"stage {s.index}: {s.name} (gemm, epilogue {s.epilogue.value}, B {s.b_layout.value})"
        if s.gated:
            head = (f"stage {s.index}: {s.name} (gated gemm: out = silu(A x gate) * (A x up), B {s.b_layout.value} "
                    f"[gate | up], {s.gemm_n} columns, interleaved by the library)")
        tile = (
            f"threadblock {t.m}x{s.kernel_tile_n(t)}x{t.k}, cluster 1x1x1, warp-specialized {_SCHEDULE_TEXT[t.schedule]} (TMA + wgmma), "
            "persistent, pipeline stages sized by CUTLASS to fill shared memory"
            + (f"; writes {t.m}x{t.n} output tiles" if s.gated else "")
        )
    elif s.op is Op.GEMM:
        head = f"stage {s.index}: {s.name} (gemm, epilogue {s.epilogue.value}, B {s.b_layout.value})"
        tile = (
            f"threadblock {t.m}x{t.n}x{t.k}, warp {'x'.join(map(str, t.warp))}, "
            f"instruction {'x'.join(map(str, t.instruction))}, {t.stages} pipeline stages"
        )
    elif s.input_b is not None:
        gate, up = plan.stages[s.input.producer].name, plan.stages[s.input_b.producer].name
        head = f"stage {s.index}: {s.name} (swiglu: out = silu({gate}) * {up}, two producers)"
        tile = f"{t.m} rows x {t.n} cols"
    else:
        head = f"stage {s.index}: {s.name} (swiglu: out[:, j] = silu(in[:, j]) * in[:, j + {s.n}])"
        tile = f"{t.m} rows x {t.n} cols"
    lines = [
        head,
        f"  problem    {m} x {s.n} x {s.k} (M x N x K)",
        f"  tile       {tile}",
        f"  threads    {t.threads} per block, smem {t.smem_bytes} B per block, occupancy {s.occupancy} blocks/SM",
        f"  grid       {tiles_m} x {tiles_n} = {total} tiles, {waves:.2f} waves on {plan.sms} SMs x {s.occupancy} "
        f"(last wave {fill:.1f}% full)",
        f"  input      {_describe_edge(plan, s, s.input)}",
        *([f"  input b    {_describe_edge(plan, s, s.input_b)}"] if s.input_b is not None else []),
        f"  output     {_describe_output(s, m)}",
        f"  order      {_describe_order(plan, s)}",
    ]
    return lines


def _describe_edge(plan: ChainPlan, s: StagePlan, e: EdgePlan | None) -> str:
    if e is None:
        return f"external input [M, {s.k}], no wait"
    prod = plan.stages[e.producer]
    head = f"from {prod.name} (stage {e.producer}), sync {e.policy.value}, wait value {e.wait_value}: "
    what = POLICIES[e.policy].describe_wait(e.wait_value, e.producer_tile_m, e.producer_tile_n, e.stride_tiles,
                                            k_chunks=s.op is Op.GEMM)
    return head + what


def _describe_output(s: StagePlan, m: int) -> str:
    if s.out_policy is None:
        return "final output, no semaphores"
    if s.out_policy is Policy.NONE:
        return "consumed with sync none, no semaphores"
    return (
        f"{s.out_policy.value} policy: {s.num_semaphores(m)} semaphores ({s.semaphores_per_row} per tile row), "
        f"{s.posts_per_semaphore} posts each"
    )


def _describe_order(plan: ChainPlan, s: StagePlan) -> str:
    how = (
        "hardware block order (avoid_custom_order)"
        if plan.optimizations.avoid_custom_order
        else "handed out by an atomic tile counter"
    )
    if plan.facts.warp_specialized and s.op is Op.GEMM:
        how = "persistent CTAs take tiles from an atomic ticket queue in this order"
    if s.order is Order.ROW_MAJOR:
        return f"row_major: all N tiles of a tile row first, so producer rows complete early; {how}"
    if s.order is Order.BANDED:
        return f"banded: 4 tile rows at a time, column by column, so each weight tile is read once per band; {how}"
    if s.order is Order.COLUMN_BANDED:
        return (f"column_banded: 4 tile columns at a time, row by row, so the band's weight columns stay in L2 "
                f"while the rows stream; {how}")
    return f"column_major: all M tiles of a tile column first; {how}"


def _describe_optimizations(plan: ChainPlan, m: int) -> list[str]:
    opts = _optimizations(plan, m)

    def line(name: str, verdict: str) -> str:
        return f"  {name:<19} {'on' if opts[name]['on'] else 'off'}: {verdict}{opts[name]['reason']}"

    def legal(name: str, where: str = "") -> str:
        return ("legal" if opts[name]["legal"] else "not legal") + where + ": "

    facts = plan.facts
    if facts.dependent_launch:
        return [
            "launch",
            "  one stream; each consumer is a programmatic dependent launch of the stage before it, triggered when "
            "every CTA of that stage has started, so consumer CTAs only take SMs that producer CTAs left",
            "optimizations",
            line("no_atomic_add", legal("no_atomic_add")),
            line("stream_weights", legal("stream_weights")),
            f"  {', '.join(key for key, _ in facts.inapplicable_optimizations)}: do not apply to {facts.arch.value}",
        ]
    gemm_consumers = any(s.input is not None and s.op is Op.GEMM for s in plan.stages)
    return [
        "optimizations",
        line("no_atomic_add", legal("no_atomic_add")),
        line("avoid_wait_kernel", legal("avoid_wait_kernel", f" at M={m}")),
        line("avoid_custom_order", "always legal: "),
        line("reorder_tile_loads", "legal: " if gemm_consumers else ""),
        *[f"WARNING: {warning}" for warning in plan.warnings(m)],
    ]


def _optimizations(plan: ChainPlan, m: int) -> dict[str, dict[str, Any]]:
    """Each optimization: whether it is on, legal (None where it does not apply) and why."""
    opt = plan.optimizations
    atomic_ok, atomic_why = plan.no_atomic_add_legal(m)
    result: dict[str, dict[str, Any]] = {"no_atomic_add": {"on": opt.no_atomic_add, "legal": atomic_ok,
                                                           "reason": atomic_why}}
    if plan.facts.dependent_launch:
        result["stream_weights"] = _stream_weights(plan)
        for name, _ in plan.facts.inapplicable_optimizations:
            result[name] = {"on": getattr(opt, name), "legal": None, "reason": f"does not apply to {plan.arch.value}"}
        return result
    resident_ok, resident_why = plan.coresident(m)
    gemm_consumers = [s.name for s in plan.stages if s.input is not None and s.op is Op.GEMM]
    result["avoid_wait_kernel"] = {"on": opt.avoid_wait_kernel, "legal": resident_ok, "reason": resident_why}
    result["avoid_custom_order"] = {"on": opt.avoid_custom_order, "legal": True,
                                    "reason": "the tile order only changes how soon inputs are ready, not correctness"}
    result["reorder_tile_loads"] = {
        "on": opt.reorder_tile_loads, "legal": True,
        "reason": f"B of {', '.join(gemm_consumers)} does not depend on the producer, so its first K-blocks are "
                  "prefetched into L2 before the wait for A" if gemm_consumers
        else "no effect: no gemm stage waits on a producer"}
    return result


def _stream_weights(plan: ChainPlan) -> dict[str, Any]:
    """optimizations.stream_weights: run() mode `stream` at M <= STREAM_MAX_M, and what it costs."""
    if plan.stream_problem is not None:
        return {"on": plan.optimizations.stream_weights, "legal": False, "reason": plan.stream_problem}
    packed = sum(s.weight_bytes for s in plan.stages if s.op is Op.GEMM)
    fused = " (the swiglu stage in the first one's epilogue)" if len(plan.stages) == 3 else ""
    what = (f"run() mode stream at M <= {STREAM_MAX_M} where a measured table (tune, autotune) or set_mode picks "
            f"it: one persistent kernel for both GEMMs{fused} streams the weights from a packed copy the library "
            f"keeps ({packed / 1e6:.1f} MB more device memory)")
    return {"on": plan.optimizations.stream_weights, "legal": True, "reason": what}


# ---------------------------------------------------------------------------------------------------
# json_at() pieces: the describe() values as JSON (keys in docs/validate-json.md)


def json_identity(plan: Any, kind: str) -> dict[str, Any]:
    """The keys every `validate --json` document starts with, of a ChainPlan or an AttentionPlan."""
    return {"schema": VALIDATE_JSON_SCHEMA, "kind": kind, "name": plan.name, "class_name": plan.class_name,
            "spec_hash": plan.spec_hash, "arch": plan.arch.value, "target": plan.target, "dtype": plan.dtype.value,
            "sms": plan.sms}


def tile_json(t: TilePlan, gemm: bool = True) -> dict[str, Any]:
    """A stage's tile in `validate --json`: threadblock [M, N, K] of a GEMM, [rows, cols] of a swiglu."""
    warp_level = gemm and t.stages > 0  # sm80 GEMMs: sm90 and swiglu tiles have no warp tiling
    return {
        "threadblock": [t.m, t.n, t.k] if gemm else [t.m, t.n],
        "warp": list(t.warp) if warp_level else None,
        "instruction": list(t.instruction) if warp_level else None,
        "pipeline_stages": t.stages if warp_level else None,
        "threads": t.threads,
        "smem_bytes": t.smem_bytes,
        "schedule": t.schedule.value if gemm and not warp_level else None,  # sm90 GEMMs: cooperative or pingpong
    }


def _edge_json(plan: ChainPlan, e: EdgePlan | None, operand: str) -> dict[str, Any]:
    if e is None:
        return {"operand": operand, "producer": None, "policy": None, "wait_value": 0, "stride_tiles": 0,
                "row_ok": None, "tile_ok": None}
    return {"operand": e.operand, "producer": plan.stages[e.producer].name, "policy": e.policy.value,
            "wait_value": e.wait_value, "stride_tiles": e.stride_tiles, "row_ok": e.row_ok, "tile_ok": e.tile_ok}


def _stage_json(plan: ChainPlan, s: StagePlan, m: int) -> dict[str, Any]:
    tiles_m, tiles_n, total, waves, fill = _waves(plan, s, m)
    edges = [_edge_json(plan, s.input, "a")] + ([_edge_json(plan, s.input_b, "b")] if s.input_b is not None else [])
    return {
        "index": s.index,
        "name": s.name,
        "op": s.op.value,
        "epilogue": s.epilogue.value if s.op is Op.GEMM else None,
        "b_layout": s.b_layout.value if s.op is Op.GEMM else None,
        "order": s.order.value,
        "problem": {"m": m, "n": s.n, "k": s.k},
        "tile": tile_json(s.tile, s.op is Op.GEMM),
        "occupancy": s.occupancy,
        "grid": {"tiles_m": tiles_m, "tiles_n": tiles_n, "tiles": total, "waves": round(waves, 4),
                 "last_wave_percent": round(fill, 2)},
        "inputs": edges,
        "output": {"policy": s.out_policy.value if s.out_policy is not None else None,
                   "semaphores": s.num_semaphores(m),
                   "semaphores_per_row": s.semaphores_per_row, "posts_per_semaphore": s.posts_per_semaphore},
    }
