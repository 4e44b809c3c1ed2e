"""The spec's cross-field rules (docs/spec-format.md): what pydantic's per-field checks cannot see, such
as a stage reading a later one, a warp that does not divide its threadblock or a policy whose tiles do
not line up. Each raises the first violation as one SpecError that names the field to change.
"""

from __future__ import annotations

import re
from typing import Any

from cusync_gen.errors import SpecError, UsageError
from cusync_gen.spec.archs import ARCHS, ArchFacts
from cusync_gen.spec.limits import MAX_DIM
from cusync_gen.spec import names
from cusync_gen.spec.messages import show, show_key
from cusync_gen.spec.policies import POLICIES, one_post
from cusync_gen.spec.model import (
    ALIGNMENT,
    ATTENTION_GEMMS,
    DEFAULT_INSTRUCTION,
    DEFAULT_PIPELINE_STAGES,
    GATE_GROUP,
    MAX_GEMM_WARPS,
    MAX_WARP_MN,
    MIN_WARP_N,
    MIN_PIPELINE_STAGES,
    SM80_GEMM_TILE_K,
    SM80_INSTRUCTIONS,
    STREAM_MAX_M,
    STREAM_STEP,
    SWIGLU_BLOCK_THREADS,
    SWIGLU_COLS,
    SWIGLU_VECTOR,
    TARGETS,
    AttentionSpec,
    BLayout,
    ChainSpec,
    ConvChainSpec,
    ConvStageSpec,
    Epilogue,
    Mode,
    Op,
    Order,
    Policy,
    Schedule,
    StageSpec,
    TileSpec,
    consumers_of,
    default_warp,
    edge_policy,
    output_policy,
    producer_width,
    config_spec,
    conv_config_spec,
    conv_stage_shapes,
)

#: "input" names the external A tensor, so no stage may be called that.
RESERVED_NAMES = frozenset({"input"})
#: Kept for importers; the full lists, each with its source, are in cusync_gen/spec/names.py.
CPP_KEYWORDS = names.CPP_KEYWORDS



# ---------------------------------------------------------------------------------------------------
# Entry points


def check_rules(spec: ChainSpec) -> None:
    """Apply the cross-field rules of docs/spec-format.md in spec order; raise the first violation."""
    _check_chain_name(spec.name)
    _check_arch(spec)
    facts = ARCHS[spec.arch]
    seen: dict[str, int] = {}
    for i, stage in enumerate(spec.stages):
        _check_stage_name(i, stage, seen)
        seen[stage.name] = i
        producer = _check_source(spec, i, stage, seen)
        _check_sync_presence(i, stage, producer)
        _check_widths(spec, i, stage, producer)
        if stage.op is Op.GEMM and stage.epilogue is Epilogue.SWIGLU:
            _check_gated_gemm(spec, i, stage)
        if stage.op is Op.GEMM and facts.warp_specialized:
            _check_sm90_gemm_tile(i, stage, facts)
        elif stage.op is Op.GEMM:
            _check_gemm_tile(i, stage)
        else:
            _check_swiglu_stage(i, stage)
        if producer is not None and stage.sync not in (None, Policy.NONE, Policy.AUTO):
            _check_policy(spec, i, stage, producer, stage.sync, "sync")
        if stage.b is not None or stage.sync_b is not None:
            _check_second_producer(spec, i, stage, seen, producer)
        if stage.bias and stage.op is not Op.GEMM:
            raise SpecError(
                f"stages[{i}].bias",
                f"a {stage.op.value} stage has no bias; only a gemm stage adds one (before its epilogue)",
                "remove bias from this stage, or put it on the GEMM that produces its input",
            )
        if stage.order is Order.COLUMN_BANDED and not (facts.column_banded and stage.op is Op.GEMM):
            raise SpecError(
                f"stages[{i}].order",
                "order column_banded (CUTLASS's raster along M with swizzle 4) is measured for sm90 GEMM stages only",
                "use row_major, column_major or banded, or set arch: sm90",
            )
    _check_output_policies(spec)
    _check_no_atomic_add(spec)
    _check_stream_weights(spec)  # before the tile configurations: no tile changes what it needs
    _check_tile_configs(spec)
    _check_dispatch(spec)


def retarget(spec: ChainSpec | AttentionSpec | ConvChainSpec, target: str | None) -> Any:  # noqa: ANN401 (the spec's own type)
    """`spec` built for `target` (--target overrides the spec's `target:`), with the spec's rules run again:
    a backend builds for its own targets only, and tiles are checked against the target's limits."""
    if target is None:
        return spec
    if target not in TARGETS:
        raise UsageError(f"unknown target '{target}'", f"use one of: {', '.join(TARGETS)}")
    spec = spec.model_copy(update={"target": target})
    if isinstance(spec, ConvChainSpec):
        check_conv_rules(spec)
    elif isinstance(spec, AttentionSpec):
        check_attention_rules(spec)
    else:
        check_rules(spec)
    return spec


def _check_target(spec: ChainSpec | AttentionSpec | ConvChainSpec, kernels: str, sm80: str = "") -> None:
    """A backend builds for its own targets only (`kernels`: what it builds, with the verb; `sm80`: what the sm80
    alternative also needs)."""
    facts = ARCHS[spec.arch]
    if spec.target not in facts.targets:
        raise SpecError("target", f"the {facts.arch.value} {kernels} only for {', '.join(facts.targets)}, not "
                        f"{spec.target}", f"set target: {facts.targets[0]}, or arch: sm80{sm80} for {spec.target}")


def check_attention_rules(spec: AttentionSpec) -> None:
    """The attention chain's cross-field rules, each naming the field to change."""
    _check_chain_name(spec.name)
    facts = ARCHS[spec.arch]
    if facts.hosts_fused_attention:
        _check_fused_attention_rules(spec)
        return
    if not facts.hosts_attention:
        raise SpecError("arch", f"arch {spec.arch.value} has no attention layer", "set arch: sm80 or sm90")
    a = spec.attention
    for key, value, default in (("kv_heads", a.kv_heads, None), ("rotary", a.rotary, False),
                                ("rotary_base", a.rotary_base, 10000.0)):
        if value != default and not (key == "kv_heads" and value == a.heads):
            raise SpecError(f"attention.{key}", f"{key} needs the sm90 attention layer; the sm80 chain has "
                            "multi-head attention without rotary embeddings",
                            f"set arch: sm90 and target: sm_90 (and remove attention.tiles), or remove {key}")
    if a.tiles is None:
        raise SpecError("attention.tiles", "the sm80 attention chain needs the tiles of its four GEMMs "
                        "(qkv, scores, pv, proj)", "add attention.tiles (see cusync_gen/examples/llama_attention.yaml)")
    d = a.heads * a.head_dim
    if d > MAX_DIM:  # before the tile rules, which build a StageSpec with k = D
        raise SpecError("attention.heads", f"heads * head_dim = {a.heads} * {a.head_dim} = {d} is above the limit of "
                        f"{MAX_DIM} (D, the width of Q, K, V and O, is a C++ int dimension)",
                        f"use at most {MAX_DIM // a.head_dim} heads of {a.head_dim} (the heads on one GPU)")
    if a.head_dim % SM80_GEMM_TILE_K[0]:  # scores' K: before the tile rules, whose message would name k
        raise SpecError("attention.head_dim", f"head_dim={a.head_dim}: the sm80 attention chain's scores GEMM "
                        f"reduces over head_dim in K-blocks of {' or '.join(map(str, SM80_GEMM_TILE_K))}",
                        f"use a multiple of {SM80_GEMM_TILE_K[0]}, or arch: sm90 and target: sm_90 (head widths that "
                        "are multiples of 16 from 32 to 128; remove attention.tiles)")
    for key, value in (("hidden", a.hidden), ("head_dim", a.head_dim)):
        if value % ALIGNMENT:
            raise SpecError(f"attention.{key}", f"{key}={value} is not a multiple of {ALIGNMENT} (16-byte vector accesses)",
                            f"use a multiple of {ALIGNMENT}, e.g. {_round_up(value, ALIGNMENT)}")
    for name in ATTENTION_GEMMS:
        tile = getattr(a.tiles, name)
        base = f"attention.tiles.{name}"
        if tile.schedule is not None:
            raise SpecError(f"{base}.schedule", "schedule is a Hopper kernel setting; the attention chain uses sm80 "
                            "kernels", "remove schedule")
        k = {"qkv": a.hidden, "scores": a.head_dim, "pv": None, "proj": d}[name]
        stage = StageSpec(name=name, op=Op.GEMM, a="input", n=8, k=k, tile=tile)
        _check_gemm_tile(0, stage, base=base)
    t = a.tiles
    if (3 * d) % t.qkv.threadblock[1]:
        raise SpecError("attention.tiles.qkv.threadblock",
                        f"qkv's tile N ({t.qkv.threadblock[1]}) must divide 3 * heads * head_dim = {3 * d}",
                        "use a tile N that divides it, e.g. 128")
    if a.head_dim % t.pv.threadblock[1]:
        raise SpecError("attention.tiles.pv.threadblock",
                        f"pv's tile N ({t.pv.threadblock[1]}) must divide head_dim={a.head_dim}: a pv tile writes one head",
                        f"use threadblock N = {a.head_dim} (or a divisor of it)")
    rows = t.scores.threadblock[0]
    for name in ("pv", "proj"):
        if getattr(t, name).threadblock[0] != rows:
            raise SpecError(f"attention.tiles.{name}.threadblock",
                            f"{name}'s tile M ({getattr(t, name).threadblock[0]}) must equal scores' ({rows}): the softmax "
                            "rows, the pv tiles and the O row semaphores that proj waits on are one grid of rows",
                            f"set threadblock M = {rows}")


#: Head widths of the sm90 attention layer: multiples of 16 (the decode's m16n8k16 steps, rope's 8-element
#: vectors in each half) from 32 to 128 (CUTLASS's FMHA tile is 64 or 128 wide in head_dim, the head zero-
#: filled past its width by TMA; the decode keeps a 16-row x head_dim output fragment per warp in registers).
_FUSED_HEAD_DIM_STEP = 16
_FUSED_HEAD_DIM_MIN, _FUSED_HEAD_DIM_MAX = 32, 128
#: Query heads per KV head the decode kernel keeps in registers (attention_sm90_plan.MAX_GROUP).
_MAX_GROUP = 16


def _check_fused_attention_rules(spec: AttentionSpec) -> None:
    """The sm90 attention layer's rules (docs/attention.md, "sm90"), each naming the field to change."""
    a = spec.attention
    if a.tiles is not None:
        raise SpecError("attention.tiles", "the sm90 attention layer picks its own tiles (cuBLASLt for qkv and proj, "
                        "CUTLASS's 128 x 128 FMHA tile, 128-key decode splits)", "remove attention.tiles")
    _check_target(spec, "attention layer (TMA, wgmma) builds", " (with attention.tiles)")
    if (a.head_dim % _FUSED_HEAD_DIM_STEP or not _FUSED_HEAD_DIM_MIN <= a.head_dim <= _FUSED_HEAD_DIM_MAX):
        raise SpecError("attention.head_dim", f"head_dim={a.head_dim}: the sm90 attention layer takes head widths "
                        f"that are multiples of {_FUSED_HEAD_DIM_STEP} from {_FUSED_HEAD_DIM_MIN} to "
                        f"{_FUSED_HEAD_DIM_MAX}", "use head_dim: 64, 80, 96 or 128 (any multiple of 16 in that range)")
    if a.hidden % ALIGNMENT:
        raise SpecError("attention.hidden", f"hidden={a.hidden} is not a multiple of {ALIGNMENT} (16-byte TMA rows)",
                        f"use a multiple of {ALIGNMENT}, e.g. {_round_up(a.hidden, ALIGNMENT)}")
    kv = a.kv_heads if a.kv_heads is not None else a.heads
    if a.heads % kv:
        raise SpecError("attention.kv_heads", f"kv_heads={kv} does not divide heads={a.heads}: each KV head serves "
                        "the same number of query heads", f"use a divisor of {a.heads}, e.g. 1 or {a.heads}")
    group = a.heads // kv
    if group > _MAX_GROUP:
        raise SpecError("attention.kv_heads", f"{group} query heads per KV head is above {_MAX_GROUP} (the decode "
                        "kernel keeps one score per query head in registers)",
                        f"use at most {_MAX_GROUP} heads per KV head on one GPU")
    if (a.heads + 2 * kv) * a.head_dim > MAX_DIM:
        raise SpecError("attention.heads", f"(heads + 2 kv_heads) * head_dim = {(a.heads + 2 * kv) * a.head_dim} is "
                        f"above {MAX_DIM}", "use fewer heads on one GPU")


#: A thread block's shared memory on sm80 and sm90 (227 KiB): a conv tile's pipeline must fit in it.
_SMEM_LIMIT = 227 << 10
#: Most pixels of one conv tensor (n * h * w or n * p * q): the runtime's tile rows are int32.
_MAX_CONV_PIXELS = 1 << 30


def check_conv_rules(spec: ConvChainSpec) -> None:
    """A conv chain's cross-field rules (docs/conv.md), each naming the field to change."""
    _check_chain_name(spec.name)
    facts = ARCHS[spec.arch]
    if not facts.hosts_conv:
        raise SpecError("arch", f"conv stages have no {facts.arch.value} kernels", "set arch: sm80 or sm90")
    _check_target(spec, "conv kernels (TMA im2col loads, wgmma) build")
    seen: dict[str, int] = {}
    shapes: dict[str, tuple[int, int, int]] = {}  # tensor name -> (h, w, channels)
    first = spec.stages[0]
    for key in ("n", "h", "w", "c"):
        if getattr(first, key) is None:
            raise SpecError(f"stages[0].{key}", f"the first conv stage reads the chain input and must give its {key}",
                            f"add {key}: ... to stages[0] ({'the largest batch' if key == 'n' else 'the input image'})")
    shapes["input"] = (first.h, first.w, first.c)
    batch = first.n
    walk = conv_stage_shapes(spec)
    for i, stage in enumerate(spec.stages):
        field = f"stages[{i}]"
        _check_name(f"{field}.name", stage.name, stage=True)
        if stage.name in seen or stage.name in RESERVED_NAMES:
            raise SpecError(f"{field}.name", f"{show(stage.name)} is already the name of "
                            + (f"stages[{seen[stage.name]}]" if stage.name in seen else "the chain input"),
                            "give every stage its own name")
        expected = "input" if i == 0 else spec.stages[i - 1].name
        if stage.a != expected:
            raise SpecError(f"{field}.a", f"a conv stage reads the output of the stage before it (a chain of layers); "
                            f"{show(stage.a)} is not {show(expected)}",
                            f"set a: {expected} (a skip connection is `residual:`)")
        h, w, c, p, q = walk[i]  # the input of the stage before (checked above) and this stage's output size
        if stage.n is not None and stage.n != batch:
            raise SpecError(f"{field}.n", f"n={stage.n} differs from stages[0].n={batch}: one batch runs through the chain",
                            "remove n from this stage")
        for key, value in (("h", h), ("w", w), ("c", c)):
            given = getattr(stage, key)
            if given is not None and given != value:
                raise SpecError(f"{field}.{key}", f"{key}={given}, but {stage.a}'s output has {key}={value}",
                                f"set {key}: {value} (or remove it: it is derived from {stage.a})")
        for key, value in (("c" if i == 0 else "k", c if i == 0 else stage.k), ("k", stage.k)):
            if value % ALIGNMENT:
                raise SpecError(f"{field}.{key}", f"{key}={value} is not a multiple of {ALIGNMENT} (16-byte NHWC vector "
                                "accesses of CUTLASS's optimized conv iterators)",
                                f"use a multiple of {ALIGNMENT}, e.g. {_round_up(value, ALIGNMENT)}")
        for key, filt in (("r", stage.r), ("s", stage.s)):
            if stage.padding > stage.dilation * (filt - 1):
                raise SpecError(f"{field}.padding", f"padding={stage.padding} is wider than the window's reach "
                                f"dilation * ({key} - 1) = {stage.dilation * (filt - 1)}: some output rows would read "
                                "only padding", f"use padding <= {stage.dilation * (filt - 1)}")
        if p < 1 or q < 1:
            raise SpecError(f"{field}.r" if p < 1 else f"{field}.s",
                            f"the window ({stage.r}x{stage.s}, dilation {stage.dilation}) does not fit the "
                            f"{h}x{w} input with padding {stage.padding}", "use a smaller filter or more padding")
        if batch * max(h * w, p * q) > _MAX_CONV_PIXELS:
            raise SpecError("stages[0].n", f"n * pixels = {batch} * {max(h * w, p * q)} is above 2^30 (the tile rows of "
                            "the runtime are 32-bit)", "use a smaller batch n")
        if stage.residual is not None:
            if stage.residual not in shapes:
                raise SpecError(f"{field}.residual", f"{show(stage.residual)} is neither input nor an earlier stage",
                                f"use one of: {', '.join(shapes)}")
            if shapes[stage.residual] != (p, q, stage.k):
                rh, rw, rc = shapes[stage.residual]
                raise SpecError(f"{field}.residual", f"{stage.residual} is {rh}x{rw}x{rc}, this stage's output is "
                                f"{p}x{q}x{stage.k}: a residual add needs the same shape",
                                "add from a tensor of the output's shape, or change k, stride or padding")
        if stage.epilogue not in (Epilogue.IDENTITY, Epilogue.RELU):
            raise SpecError(f"{field}.epilogue", f"epilogue {stage.epilogue.value} is not available on conv stages",
                            "use relu or identity")
        if stage.sync not in (None, Policy.AUTO):
            raise SpecError(f"{field}.sync", f"sync: {stage.sync.value} is not a conv policy: a conv stage waits for the "
                            "producer rows its window reads (Conv2D tile sync with halo), derived from r, stride, "
                            "padding and dilation", "write sync: auto (or omit it)")
        if stage.order is not Order.ROW_MAJOR:
            raise SpecError(f"{field}.order", "a conv stage's tiles run row-major over (n, p) then q, so the first "
                            "image rows complete first", "write order: row_major (or omit it)")
        if facts.warp_specialized:
            _check_sm90_conv_tile(field, stage.tile)
        else:
            _check_sm80_conv_tile(i, field, stage)
        seen[stage.name] = i
        shapes[stage.name] = (p, q, stage.k)
    _check_conv_tile_configs(spec)


def _has_tile_configs(spec: ChainSpec | ConvChainSpec, picked_by: str) -> bool:
    """Whether the spec lists tile_configs; refused where the arch has none (sm90 only)."""
    if not spec.tile_configs:
        return False
    if not ARCHS[spec.arch].tile_configs:
        raise SpecError("tile_configs", f"tile_configs (tiles picked by {picked_by} at run time) are an sm90 feature",
                        "remove tile_configs, or set arch: sm90")
    return True


def _check_conv_tile_configs(spec: ConvChainSpec) -> None:
    """Tiles by batch: sm90 only, entries by growing batch_max below stages[0].n, known stages, and each
    configuration a valid chain on its own (its tiles checked as the stages' own are)."""
    if not _has_tile_configs(spec, "the batch"):
        return
    names = [s.name for s in spec.stages]
    largest = spec.stages[0].n
    previous = 0
    for c, config in enumerate(spec.tile_configs):
        field = f"tile_configs[{c}]"
        if config.batch_max <= previous:
            raise SpecError(f"{field}.batch_max", f"batch_max={config.batch_max} must be larger than the previous "
                            f"entry's ({previous})", "list tile_configs by growing batch_max")
        if config.batch_max >= largest:
            raise SpecError(f"{field}.batch_max", f"batch_max={config.batch_max} covers every batch up to stages[0].n="
                            f"{largest}, so the stages' own tiles would never run", "put those tiles in the stages "
                            f"instead, or use a batch_max below {largest}")
        previous = config.batch_max
        for name in config.tiles:
            if name not in names:
                raise SpecError(f"{field}.tiles.{show_key(name)}", f"unknown stage {show(name)}",
                                f"use one of: {', '.join(names)}")
        try:
            check_conv_rules(conv_config_spec(spec, config))
        except SpecError as exc:
            raise SpecError(f"{field}: {exc.field}", exc.message[len(exc.field) + 2 :], exc.hint) from None


#: sm90 conv tiles (cusync/conv/conv_sm90.cuh): one consumer warp group computes the whole tile (wgmma M of
#: 64 per instruction, its fp32 accumulators in at most 128 registers a thread), K-blocks of 64 channels (one
#: 128-byte swizzle atom).
_SM90_CONV_TILE_M = (64, 128)
_SM90_CONV_TILE_N = (64, 128, 256)
_SM90_CONV_TILE_K = 64
_SM90_CONV_ACCUMULATORS = 128 * 128


def _check_sm90_conv_tile(field: str, tile: TileSpec) -> None:
    for key in ("warp", "instruction", "stages", "schedule"):
        if getattr(tile, key) is not None:
            raise SpecError(f"{field}.tile.{key}", f"{key} is an sm80 or GEMM setting; an sm90 conv tile is its "
                            "threadblock alone (CUTLASS sizes the pipeline to fill shared memory)", f"remove {key}")
    bm, bn, bk = tile.threadblock
    if bm not in _SM90_CONV_TILE_M:
        raise SpecError(f"{field}.tile.threadblock", f"threadblock M={bm}: an sm90 conv tile holds 64 or 128 output "
                        "pixels (one warp group of wgmma)", f"use [128, {bn}, 64] or [64, {bn}, 64]")
    if bn not in _SM90_CONV_TILE_N or bm * bn > _SM90_CONV_ACCUMULATORS:
        raise SpecError(f"{field}.tile.threadblock", f"threadblock {_fmt(tile.threadblock)}: an sm90 conv tile is "
                        "64 or 128 pixels by 64, 128 or 256 channels, at most 128x128 (or 64x256: one warp "
                        "group's fp32 accumulators)", f"use [{bm}, {min(bn, _SM90_CONV_ACCUMULATORS // bm, 128)}, 64]")
    if bk != _SM90_CONV_TILE_K:
        raise SpecError(f"{field}.tile.threadblock", f"threadblock K={bk}: the sm90 conv mainloop takes 64 channels "
                        "per K-block", f"use [{bm}, {bn}, 64]")


def _check_sm80_conv_tile(i: int, field: str, stage: ConvStageSpec) -> None:
    tile = stage.tile
    if tile.schedule is not None:  # (a cluster never reaches here: loading refuses it on sm80 tiles)
        raise SpecError(f"{field}.tile.schedule", "schedule is a Hopper kernel setting; the sm80 conv stages "
                        "do not have one", "remove schedule (or set arch: sm90)")
    _check_gemm_tile(i, StageSpec(name=stage.name, op=Op.GEMM, a="input", n=ALIGNMENT, tile=tile))
    bm, bn, bk = tile.threadblock  # bk is 32 or 64: _check_gemm_tile's sm80 shape rules
    warps = (bm // tile.warp[0]) * (bn // tile.warp[1])
    if warps not in (2, 4, 8):
        raise SpecError(f"{field}.tile.warp", f"{warps} warps per thread block; CUTLASS's conv tiles use 2, 4 or 8",
                        "pick a warp shape that splits the threadblock into 4 warps, e.g. half of it in M and N")
    smem = tile.stages * (bm * bk + bk * bn) * 2
    if smem > _SMEM_LIMIT:
        raise SpecError(f"{field}.tile.stages", f"{tile.stages} stages of a {bm}x{bn}x{bk} tile need {smem} bytes of "
                        f"shared memory, above {_SMEM_LIMIT}", "use fewer stages or a smaller tile")


# ---------------------------------------------------------------------------------------------------
# Cross-field rules


def _check_tile_configs(spec: ChainSpec) -> None:
    """Each configuration must be a valid chain on its own; configurations are listed by growing m_max."""
    if not _has_tile_configs(spec, "M"):
        return
    names = [s.name for s in spec.stages]
    previous = 0
    for c, config in enumerate(spec.tile_configs):
        field = f"tile_configs[{c}]"
        if config.m_max <= previous:
            raise SpecError(f"{field}.m_max", f"m_max={config.m_max} must be larger than the previous entry's ({previous})",
                            "list tile_configs by growing m_max")
        previous = config.m_max
        for name, tb in config.tiles.items():
            if name not in names:
                raise SpecError(f"{field}.tiles.{show_key(name)}", f"unknown stage {show(name)}",
                                f"use one of: {', '.join(names)}")
            stage = next(s for s in spec.stages if s.name == name)
            if stage.op is Op.SWIGLU and tb[2] != 1:
                raise SpecError(f"{field}.tiles.{name}", "a swiglu tile is [rows, cols, 1]", f"write [{tb[0]}, {tb[1]}, 1]")
        for name in config.schedules:
            if name not in names:
                raise SpecError(f"{field}.schedules.{show_key(name)}", f"unknown stage {show(name)}",
                                f"use one of: {', '.join(names)}")
            if next(s for s in spec.stages if s.name == name).op is not Op.GEMM:
                raise SpecError(f"{field}.schedules.{name}", "only a gemm stage has a kernel schedule",
                                f"remove {name} from schedules")
        try:  # the configuration's own chain; `dispatch:` is the whole spec's, checked once by _check_dispatch
            check_rules(config_spec(spec, config).model_copy(update={"dispatch": None}))
        except SpecError as exc:
            raise SpecError(f"{field}: {exc.field}", exc.message[len(exc.field) + 2 :], exc.hint) from None


_GPU_NAME = re.compile(r"[A-Za-z0-9 ._()-]+")


def _check_dispatch(spec: ChainSpec) -> None:
    """A measured table: sm90 only, rows by growing m_max, a GPU name that is safe to print and embed."""
    table = spec.dispatch
    if table is None:
        return
    if not ARCHS[spec.arch].dispatch:
        raise SpecError("dispatch", "dispatch (how run() computes the chain, by M) is an sm90 feature",
                        "remove dispatch, or set arch: sm90")
    if not _GPU_NAME.fullmatch(table.gpu):
        raise SpecError("dispatch.gpu", f"{show(table.gpu)} is not a GPU name of letters, digits, spaces and ._()-",
                        "write the name CUDA reports, e.g. gpu: NVIDIA H200")
    previous = 0
    for e, entry in enumerate(table.modes):
        if entry.m_max <= previous:
            raise SpecError(f"dispatch.modes[{e}].m_max", f"m_max={entry.m_max} must be larger than the previous "
                            f"entry's ({previous})", "list the modes by growing m_max")
        previous = entry.m_max


#: The epilogues run() mode `stream` applies (cusync::sm90::StreamAct).
STREAM_EPILOGUES = (Epilogue.IDENTITY, Epilogue.RELU, Epilogue.GELU, Epilogue.GELU_TANH, Epilogue.SILU, Epilogue.SWIGLU)


def _check_stream_weights(spec: ChainSpec) -> None:
    """optimizations.stream_weights (run() mode `stream`, cusync/sm90/stream_mode.h): see stream_weights_problem.
    A dispatch entry of mode stream needs it, and ends at STREAM_MAX_M rows at most."""
    if spec.optimizations.stream_weights:
        problem = stream_weights_problem(spec)
        if problem is not None:
            raise problem
    for e, entry in enumerate(spec.dispatch.modes if spec.dispatch is not None else ()):
        if entry.mode is not Mode.STREAM:
            continue
        if not spec.optimizations.stream_weights:
            raise SpecError(f"dispatch.modes[{e}].mode", "mode stream needs the packed weights the library keeps only "
                            "with optimizations: {stream_weights: true}",
                            "add stream_weights: true under optimizations, or pick another mode")
        if entry.m_max > STREAM_MAX_M:
            raise SpecError(f"dispatch.modes[{e}].m_max", f"mode stream runs at most {STREAM_MAX_M} rows "
                            f"(m_max={entry.m_max})", f"end the stream entry at m_max: {STREAM_MAX_M} and add another "
                            "mode above it")


def stream_weights_problem(spec: ChainSpec) -> SpecError | None:
    """Why run() mode `stream` cannot compute this chain (the error optimizations.stream_weights: true raises), or
    None: it needs sm90, two GEMM stages with the second reading the first's output (or gemm -> swiglu -> gemm,
    the swiglu fused into the first GEMM's epilogue), row-major weights, an epilogue its kernel applies
    (STREAM_EPILOGUES), and N and K in steps of STREAM_STEP."""
    return _two_gemm_problem(spec, "optimizations.stream_weights", "mode stream", "remove optimizations.stream_weights",
                             col_ok=False)


def slab_problem(spec: ChainSpec) -> SpecError | None:
    """Why run() mode `stream`'s slab kernel (M <= SLAB_MAX_M, templates/sm90/include/cusync/sm90/slab_chain.cuh)
    cannot compute this chain, or None: the shapes of stream_weights_problem, except that either GEMM's weights
    may also be column-major (its fast case). Nothing in the spec turns it on: every chain it can compute has it."""
    return _two_gemm_problem(spec, "stages", "the slab kernel", "mode stream then runs only with "
                             "optimizations.stream_weights", col_ok=True)


def _two_gemm_problem(spec: ChainSpec, field: str, who: str, fix: str, col_ok: bool) -> SpecError | None:
    """The shape rules mode stream's kernels share (stream_weights_problem, slab_problem), as errors of `field`."""
    if not ARCHS[spec.arch].dispatch:
        return SpecError(field, f"{who} is an sm90 feature", f"set arch: sm90, or {fix}")
    stages = spec.stages
    fused = len(stages) == 2 and all(s.op is Op.GEMM for s in stages) and stages[1].a == stages[0].name
    split = (len(stages) == 3 and [s.op for s in stages] == [Op.GEMM, Op.SWIGLU, Op.GEMM]
             and stages[1].a == stages[0].name and stages[1].b is None and stages[2].a == stages[1].name)
    if not (fused or split):
        return SpecError(field, f"{who} computes two gemm stages, the second reading the first's output, "
                         "or gemm -> swiglu -> gemm with the swiglu reading gate | up from the first "
                         f"(this chain: {', '.join(f'{s.name} ({s.op.value})' for s in stages)})",
                         f"write the chain as gemm1 -> gemm2 (a gated MLP as one gemm with epilogue: swiglu, or "
                         f"gemm -> swiglu -> gemm), or {fix}")
    if split and (stages[0].epilogue is not Epilogue.IDENTITY or stages[0].bias):
        return SpecError("stages[0].epilogue" if stages[0].epilogue is not Epilogue.IDENTITY else "stages[0].bias",
                         f"{who} fuses the swiglu stage into the first gemm, which then must be a plain product "
                         f"(epilogue identity, no bias)", f"use epilogue: identity without bias on the first gemm, "
                         f"or {fix}")
    for i, stage in ((i, s) for i, s in enumerate(stages) if s.op is Op.GEMM):
        if stage.b_layout is not BLayout.ROW and not col_ok:
            return SpecError(f"stages[{i}].b_layout", f"{who} reads row-major weights (K x N) only",
                             f"use b_layout: row, or {fix}")
        if stage.epilogue not in STREAM_EPILOGUES:
            return SpecError(f"stages[{i}].epilogue", f"{who} has no epilogue {stage.epilogue.value}",
                             f"use one of {', '.join(e.value for e in STREAM_EPILOGUES)}, or {fix}")
        k = stage.k if stage.k is not None else stages[i - 1].n if i else None
        for key, value in (("n", stage.n), ("k", k)):
            if value is not None and value % STREAM_STEP:
                return SpecError(f"stages[{i}].{key}", f"{key}={value}: {who} takes N and K in steps of "
                                 f"{STREAM_STEP}", f"pad it to {-(-value // STREAM_STEP) * STREAM_STEP}, or {fix}")
    return None


def _check_name(field: str, name: str, stage: bool = False) -> None:
    """Names become C++ and Python identifiers, C ABI names, CMake targets and file names: names.py says which
    language or tool rejects a name, and how to fix it."""
    problem = names.name_problem(name, field, stage=stage)
    if problem is not None:
        why, hint = problem
        raise SpecError(field, f"{show(name)} {why}", hint)


def _check_chain_name(name: str) -> None:
    _check_name("name", name)


def _check_arch(spec: ChainSpec) -> None:
    """sm90 kernels use wgmma and TMA: Hopper only, and the sm80-only optimizations do not apply."""
    facts = ARCHS[spec.arch]
    if facts.warp_specialized:
        _check_target(spec, "GEMM kernels (TMA, wgmma) build")
        opt = spec.optimizations
        for key, why in facts.inapplicable_optimizations:
            if getattr(opt, key):
                raise SpecError(f"optimizations.{key}", f"{key} does not apply to arch: sm90: {why}", f"remove {key}")
        return
    for i, stage in enumerate(spec.stages):
        if stage.tile.schedule is not None:
            raise SpecError(
                f"stages[{i}].tile.schedule",
                f"schedule is a Hopper kernel setting and does not apply to arch: {spec.arch.value}",
                "remove schedule, or set arch: sm90",
            )


def _check_gated_gemm(spec: ChainSpec, i: int, stage: StageSpec) -> None:
    """epilogue: swiglu, the fused gated MLP: an sm90 GEMM whose tiles hold whole gate | up groups of 8."""
    field = f"stages[{i}].epilogue"
    if not ARCHS[spec.arch].gated_epilogue:
        raise SpecError(
            field,
            f"epilogue swiglu (silu(gate) * up fused into the GEMM) is an sm90 kernel; arch is {spec.arch.value}",
            "set arch: sm90, or compute gate | up with epilogue: identity (n: 2 x the width) and add an op: swiglu stage",
        )
    if stage.bias:
        raise SpecError(
            f"stages[{i}].bias",
            "a gated GEMM (epilogue swiglu) takes no bias: its epilogue computes silu(gate) * up from the sums alone",
            "remove bias, or compute gate | up with epilogue: identity and bias: true, then an op: swiglu stage",
        )
    tile_n = stage.tile.threadblock[1]
    if tile_n % (2 * GATE_GROUP):
        raise SpecError(
            f"stages[{i}].tile.threadblock",
            f"a gated GEMM's tile N={tile_n} must hold whole gate and up groups of {GATE_GROUP} columns",
            f"use a tile N that is a multiple of {2 * GATE_GROUP}, e.g. 128",
        )


def _check_sm90_gemm_tile(i: int, stage: StageSpec, facts: ArchFacts) -> None:
    """A warp-specialized GEMM's tile: CUTLASS's builder sets the warps and the pipeline; the arch's
    tables (archs.ArchFacts) list the threadblocks and schedules."""
    tile = stage.tile
    base = f"stages[{i}].tile"
    for key, why in (
        ("warp", "the math warp groups are laid out by CUTLASS's CollectiveBuilder"),
        ("instruction", "wgmma shapes follow from the tile"),
        ("stages", "the pipeline is sized by CUTLASS to fill shared memory"),
    ):
        if getattr(tile, key) is not None:
            raise SpecError(f"{base}.{key}", f"{key} is an sm80 setting; on sm90 {why}", f"remove {key}")
    if tile.schedule is not None and tile.schedule not in facts.schedules:
        raise SpecError(
            f"{base}.schedule",
            f"schedule {show(tile.schedule)} is not an sm90 kernel schedule",
            f"use one of: {', '.join(facts.schedules)} (or omit it: {facts.schedules[0]})",
        )
    m, n, k = tile.threadblock
    if tile.schedule == Schedule.PINGPONG:
        for value, allowed, dim in ((m, facts.pingpong_tile_m, "M"), (n, facts.pingpong_tile_n, "N")):
            if value not in allowed:
                raise SpecError(
                    f"{base}.threadblock",
                    f"threadblock {dim}={value} does not suit the ping-pong schedule: one math warp group holds the "
                    "whole tile's accumulators",
                    f"use {dim} in {{{', '.join(map(str, allowed))}}} (e.g. threadblock: [128, 128, 64]), or schedule: "
                    "cooperative",
                )
    for value, allowed, dim in ((m, facts.tile_m, "M"), (n, facts.tile_n, "N"), (k, facts.tile_k, "K")):
        if value not in allowed:
            raise SpecError(
                f"{base}.threadblock",
                f"threadblock {dim}={value} is not supported by the sm90 backend",
                f"use {dim} in {{{', '.join(map(str, allowed))}}}, e.g. threadblock: [128, 256, 64]",
            )
    if tile.schedule != Schedule.PINGPONG and facts.cooperative_tile_mn and m * n > facts.cooperative_tile_mn:
        per_thread = m * n // (2 * 128)
        raise SpecError(
            f"{base}.threadblock",
            f"threadblock {m}x{n} is too large for the cooperative schedule: its two math warp groups would hold "
            f"{per_thread} fp32 accumulators a thread, more than the 128 that fit in registers beside the rest "
            "(they would spill to local memory)",
            f"use at most {facts.cooperative_tile_mn} outputs a tile, e.g. threadblock: [128, {n}, 64] "
            f"or [256, 128, 64]",
        )
    if stage.k is not None and stage.k % k:
        raise SpecError(
            f"{base}.threadblock",
            f"k={stage.k} is not a multiple of threadblock K={k}",
            f"pad k to a multiple of {k}, e.g. {_round_up(stage.k, k)}",
        )


def _check_stage_name(i: int, stage: StageSpec, seen: dict[str, int]) -> None:
    field = f"stages[{i}].name"
    _check_name(field, stage.name, stage=True)
    if stage.name in seen:
        raise SpecError(
            field,
            f"'{stage.name}' is already the name of stages[{seen[stage.name]}]",
            "give every stage a unique name",
        )
    for other, j in seen.items():
        problem = names.stage_pair_problem(stage.name, other, j)
        if problem is not None:
            raise SpecError(field, f"{show(stage.name)} {problem[0]}", problem[1])


def _check_source(spec: ChainSpec, i: int, stage: StageSpec, earlier: dict[str, int]) -> int | None:
    """Resolve `a` to an earlier stage index (None for input); later names are an order error."""
    field = f"stages[{i}].a"
    if stage.a == "input":
        return None
    if stage.a == stage.name:
        raise SpecError(
            field,
            f"stage '{stage.name}' reads its own output (a cycle)",
            "set a: input or the name of an earlier stage",
        )
    if stage.a in earlier:
        return earlier[stage.a]
    later = [s.name for s in spec.stages[i + 1 :]]
    if stage.a in later:
        raise SpecError(
            field,
            f"'{stage.a}' is listed after '{stage.name}'; stages must be listed producers first "
            "(this also rules out dependency cycles)",
            f"move stage '{stage.a}' before '{stage.name}'",
        )
    if i == 0:
        raise SpecError(
            field, f"unknown stage {show(stage.a)}; the first stage must read the external input", "set a: input"
        )
    names = ", ".join(s.name for s in spec.stages[:i])
    raise SpecError(field, f"unknown stage {show(stage.a)}", f"use 'input' or one of: {names}")


def _check_sync_presence(i: int, stage: StageSpec, producer: int | None) -> None:
    field = f"stages[{i}].sync"
    if producer is not None and stage.sync is None:
        raise SpecError(
            field,
            f"stage '{stage.name}' reads stage '{stage.a}' but has no sync policy",
            "add sync: row (or tile; strided for a swiglu; none to wait for the whole producer kernel)",
        )
    if producer is None and stage.sync not in (None, Policy.NONE):
        raise SpecError(
            field,
            f"stage '{stage.name}' reads 'input', which no stage produces, "
            f"so sync: {stage.sync.value} has nothing to wait for",
            "remove sync (or set sync: none)",
        )


def _check_widths(spec: ChainSpec, i: int, stage: StageSpec, producer: int | None) -> None:
    if stage.n % ALIGNMENT:
        raise SpecError(
            f"stages[{i}].n",
            f"n={stage.n} is not a multiple of {ALIGNMENT} (16-byte vector accesses)",
            f"round n to a multiple of {ALIGNMENT}, e.g. {_round_up(stage.n, ALIGNMENT)}",
        )
    if stage.op is Op.SWIGLU:
        if stage.k is not None:
            raise SpecError(f"stages[{i}].k", "swiglu takes no k: its input width is always 2*n", "remove k")
        if producer is None:
            raise SpecError(f"stages[{i}].a", "a swiglu stage reads the gate | up output of an earlier gemm stage, "
                            "not the chain input", "put the gemm that computes gate | up (n: 2 x this stage's n) "
                            "before it and set a: to its name, or on sm90 use epilogue: swiglu on that gemm")
        if stage.b is None:  # with b, _check_second_producer checks both widths
            pn = producer_width(spec, producer)
            if pn != 2 * stage.n:
                fix = f"set n: {pn // 2}" if pn % 2 == 0 else f"make producer '{stage.a}' n even"
                raise SpecError(
                    f"stages[{i}].n",
                    f"swiglu n={stage.n} needs a producer of width 2*n={2 * stage.n}, but '{stage.a}' has n={pn}",
                    f"{fix} (half the producer's n), or set the producer's n to {2 * stage.n}",
                )
        return
    field = f"stages[{i}].k"
    if stage.k is None:
        fix = "set k to the width of the input tensor"
        if producer is not None:
            fix = f"set k: {producer_width(spec, producer)}"
        raise SpecError(field, "gemm stages need k (the reduction width)", fix)
    if producer is not None and stage.k != producer_width(spec, producer):
        pn = producer_width(spec, producer)
        raise SpecError(
            field,
            f"{stage.k} does not match the output width of producer '{stage.a}' (n={pn})",
            f"set k: {pn}",
        )
    if stage.k % ALIGNMENT:
        raise SpecError(
            field,
            f"k={stage.k} is not a multiple of {ALIGNMENT} (16-byte vector accesses)",
            f"pad k to a multiple of {ALIGNMENT}, e.g. {_round_up(stage.k, ALIGNMENT)}",
        )


def _check_gemm_tile(i: int, stage: StageSpec, base: str | None = None) -> None:
    tile = stage.tile
    base = base or f"stages[{i}].tile"
    tb = tile.threadblock
    warp = tile.warp if tile.warp is not None else default_warp(tb)
    inst = tile.instruction if tile.instruction is not None else DEFAULT_INSTRUCTION
    pipe = tile.stages if tile.stages is not None else DEFAULT_PIPELINE_STAGES
    if inst not in SM80_INSTRUCTIONS:
        allowed = " or ".join(_fmt(s) for s in SM80_INSTRUCTIONS)
        raise SpecError(
            f"{base}.instruction",
            f"instruction {_fmt(inst)} is not supported for 16-bit inputs on sm80",
            f"use instruction: {allowed} (or omit it)",
        )
    for d, dim in enumerate("MNK"):
        if tb[d] % warp[d]:
            example = _divisor_hint(tb[d], default_warp(tb)[d], inst[d])
            raise SpecError(
                f"{base}.warp",
                f"threadblock {_fmt(tb)} is not a multiple of warp {_fmt(warp)} in {dim}",
                f"use a warp {dim} that divides {tb[d]} (e.g. {example})",
            )
    for d, dim in enumerate("MN"):
        if warp[d] > MAX_WARP_MN:
            raise SpecError(
                f"{base}.warp",
                f"warp {_fmt(warp)} is larger than {MAX_WARP_MN} in {dim}: on the H200 a 64x128 warp tile computed "
                "wrong results and a 128x64 one spilled registers (40x slower)",
                f"use a warp of at most {MAX_WARP_MN} in M and N, e.g. warp: [64, 64, {warp[2]}]",
            )
    for d, dim in enumerate("MNK"):
        if warp[d] % inst[d]:
            raise SpecError(
                f"{base}.warp",
                f"warp {_fmt(warp)} is not a multiple of instruction {_fmt(inst)} in {dim}",
                f"use a warp {dim} that is a multiple of {inst[d]}",
            )
    if pipe < MIN_PIPELINE_STAGES:
        raise SpecError(
            f"{base}.stages",
            f"stages={pipe} is below the minimum of {MIN_PIPELINE_STAGES} for sm80 multistage pipelines",
            f"set stages: {MIN_PIPELINE_STAGES} (or omit it)",
        )
    _check_sm80_gemm_shape(base, tb, warp)
    if stage.k is not None and stage.k % tb[2]:
        fits = [bk for bk in SM80_GEMM_TILE_K if stage.k % bk == 0]
        raise SpecError(
            f"{base}.threadblock",
            f"k={stage.k} is not a multiple of threadblock K={tb[2]}",
            f"use threadblock K {fits[-1]}" if fits else
            f"pad k to a multiple of {SM80_GEMM_TILE_K[0]} (e.g. {_round_up(stage.k, SM80_GEMM_TILE_K[0])}): the sm80 "
            f"GEMM's K-blocks are {' or '.join(map(str, SM80_GEMM_TILE_K))} deep",
        )


def _check_sm80_gemm_shape(base: str, tb: tuple[int, int, int], warp: tuple[int, int, int]) -> None:
    """What CUTLASS 2.x's sm80 GEMM instantiates for 16-bit operands (model.MIN_WARP_N and its neighbours say
    how this was found); a tile outside it passes the divisibility rules and then fails to compile."""
    if tb[2] not in SM80_GEMM_TILE_K:
        raise SpecError(f"{base}.threadblock", f"threadblock K={tb[2]}: the sm80 GEMM takes K-blocks of "
                        f"{' or '.join(map(str, SM80_GEMM_TILE_K))} (each warp needs two or more 16-deep MMA steps a "
                        "block, and CUTLASS's shared-memory layouts for 16-bit operands are at most 64 wide)",
                        f"use threadblock K {' or '.join(map(str, SM80_GEMM_TILE_K))}")
    if warp[2] != tb[2]:
        raise SpecError(f"{base}.warp", f"warp K={warp[2]} differs from threadblock K={tb[2]}: the sm80 backend "
                        "splits a tile over warps in M and N only", f"set warp K to {tb[2]}")
    if warp[1] < MIN_WARP_N:
        raise SpecError(f"{base}.warp", f"warp {_fmt(warp)} is {warp[1]} wide in N: CUTLASS's sm80 epilogue and "
                        f"B operand tiles need at least {MIN_WARP_N} columns a warp",
                        f"use warp N {MIN_WARP_N} or {MAX_WARP_MN} (and a threadblock N of at least {MIN_WARP_N})")
    warps = (tb[0] // warp[0]) * (tb[1] // warp[1])
    if warps > MAX_GEMM_WARPS:
        widest = warp[0] == MAX_WARP_MN and warp[1] == MAX_WARP_MN  # then only the threadblock can change
        raise SpecError(f"{base}.threadblock" if widest else f"{base}.warp",
                        f"threadblock {_fmt(tb)} over warp {_fmt(warp)} is {warps} warps; at most {MAX_GEMM_WARPS} "
                        "(more are more accumulators than an SM's registers hold)",
                        f"use a smaller threadblock, e.g. [{min(tb[0], 128)}, {min(tb[1], 256) if tb[0] > 128 else 128}, "
                        f"{tb[2]}]" if widest else
                        f"use a larger warp tile (up to [{MAX_WARP_MN}, {MAX_WARP_MN}, {tb[2]}]) or a smaller threadblock")
    threads = 32 * warps
    for operand, dim, rows in (("A", "M", tb[0]), ("B", "N", tb[1])):
        vectors = rows * tb[2] // ALIGNMENT  # ALIGNMENT: the 16-bit elements of one 16-byte vector
        if vectors < threads:
            raise SpecError(f"{base}.threadblock", f"{operand}'s tile ({rows} x {tb[2]}) is {vectors} 16-byte vectors, "
                            f"fewer than the {threads} threads ({warps} warps) that load it",
                            f"use fewer warps (a larger warp tile) or a larger threadblock {dim}")


def _check_swiglu_stage(i: int, stage: StageSpec) -> None:
    base = f"stages[{i}]"
    tile = stage.tile
    if tile.threadblock[2] != 1:
        raise SpecError(
            f"{base}.tile.threadblock",
            f"a swiglu tile is [rows, cols]; the third value must be 1, got {tile.threadblock[2]}",
            f"write threadblock: [{tile.threadblock[0]}, {tile.threadblock[1]}] (or [..., ..., 1])",
        )
    for key in ("warp", "instruction", "stages", "schedule"):
        if getattr(tile, key) is not None:
            raise SpecError(f"{base}.tile.{key}", f"swiglu is elementwise and does not use {key}", f"remove {key}")
    _check_swiglu_tile(f"{base}.tile.threadblock", tile.threadblock)
    if stage.epilogue is not Epilogue.IDENTITY:
        raise SpecError(f"{base}.epilogue", "swiglu applies silu itself and takes no epilogue", "remove epilogue")
    if stage.b_layout is not BLayout.ROW:
        raise SpecError(f"{base}.b_layout", "swiglu has no B operand", "remove b_layout")


def _check_swiglu_tile(field: str, threadblock: tuple[int, int, int]) -> None:
    """The static_asserts of SwiGluStage (templates/runtime/include/cusync/swiglu.cuh), as spec errors:
    each of its SWIGLU_BLOCK_THREADS threads moves one 16-byte vector per row pass."""
    rows, cols = threadblock[0], threadblock[1]
    fits = ", ".join(str(c) for c in SWIGLU_COLS)
    if cols % SWIGLU_VECTOR:
        raise SpecError(field, f"swiglu tile cols={cols} is not a multiple of {SWIGLU_VECTOR} (16-byte vector "
                        "accesses)", f"use cols in {{{fits}}}")
    per_row = cols // SWIGLU_VECTOR
    if SWIGLU_BLOCK_THREADS % per_row:
        raise SpecError(field, f"swiglu tile cols={cols} needs {per_row} threads per row, which do not divide the "
                        f"kernel's {SWIGLU_BLOCK_THREADS} threads (cols must divide "
                        f"{SWIGLU_BLOCK_THREADS * SWIGLU_VECTOR})", f"use cols in {{{fits}}}")
    per_pass = SWIGLU_BLOCK_THREADS // per_row
    if rows % per_pass:
        raise SpecError(field, f"swiglu tile rows={rows} is not a multiple of {per_pass}: the kernel's "
                        f"{SWIGLU_BLOCK_THREADS} threads cover {per_pass} rows of {cols} columns per pass",
                        f"use rows = a multiple of {per_pass}, e.g. {_round_up(rows, per_pass)}, or wider cols")


def policy_problem(spec: ChainSpec, i: int, producer: int, policy: Policy, key: str = "sync") -> SpecError | None:
    """Why `policy` cannot guard stage i's edge from `producer` (its tiles do not line up), or None."""
    try:
        _check_policy(spec, i, spec.stages[i], producer, policy, key)
    except SpecError as err:
        return err
    return None


def _check_policy(spec: ChainSpec, i: int, stage: StageSpec, producer: int, policy: Policy, key: str) -> None:
    """Each policy maps a consumer tile onto producer tiles; these are the shapes where it can: whole
    producer rows for every policy, and what each needs of the columns (spec.policies)."""
    prod = spec.stages[producer]
    ptb, ctb = prod.tile.threadblock, stage.tile.threadblock
    info = POLICIES[policy]
    info.check_shape(i, stage, prod, key)  # what this policy needs beyond whole producer rows
    if ptb[0] % ctb[0]:
        raise SpecError(
            f"stages[{i}].tile.threadblock",
            f"sync: {policy.value} needs the threadblock M ({ctb[0]}) to divide producer '{prod.name}' threadblock M "
            f"({ptb[0]}), so each tile waits on one producer row of tiles",
            f"use a threadblock M that divides {ptb[0]} (e.g. {ptb[0]})",
        )
    info.check_columns(i, stage, prod)


def _check_second_producer(spec: ChainSpec, i: int, stage: StageSpec, seen: dict[str, int],
                           producer: int | None) -> None:
    """`b`: a swiglu whose gate and up come from two different producers (a consumer of several)."""
    base = f"stages[{i}]"
    if stage.b is None:
        raise SpecError(f"{base}.sync_b", "sync_b is the policy of the edge from b, but there is no b", "remove sync_b")
    if stage.op is not Op.SWIGLU:
        raise SpecError(f"{base}.b", "only swiglu stages take a second producer", "remove b (B of a gemm is a weight)")
    if producer is None:
        raise SpecError(f"{base}.a", "a two-producer swiglu reads gate from a stage, not from 'input'",
                        "set a to the stage that computes gate")
    if stage.b not in seen or stage.b == stage.name:
        names = ", ".join(s.name for s in spec.stages[:i])
        raise SpecError(f"{base}.b", f"unknown or later stage {show(stage.b)}", f"use one of: {names}")
    if stage.b == stage.a:
        raise SpecError(f"{base}.b", "b names the same stage as a", "remove b to read gate | up halves of one producer")
    up = seen[stage.b]
    for key, index in (("a", producer), ("b", up)):
        width = producer_width(spec, index)
        if width != stage.n:
            raise SpecError(
                f"{base}.n",
                f"a two-producer swiglu with n={stage.n} needs [M, n] inputs, but {key}: '{spec.stages[index].name}' "
                f"has n={width}",
                f"set n: {width}, or the producer's n to {stage.n}",
            )
    policy = stage.sync_b or stage.sync or Policy.NONE
    if policy not in (Policy.NONE, Policy.AUTO):
        _check_policy(spec, i, stage, up, policy, "sync_b" if stage.sync_b is not None else "sync")


def _check_output_policies(spec: ChainSpec) -> None:
    """A producer posts in one way only, so all its consumers must wait in that way."""
    for p in range(len(spec.stages)):
        users = consumers_of(spec, p)
        if len(users) < 2:
            continue
        name = spec.stages[p].name
        first = spec.stages[users[0]]
        for u in users[1:]:
            stage = spec.stages[u]
            if Policy.AUTO in (edge_policy(stage, name), edge_policy(first, name)):
                continue  # decided by the plan, which picks one policy per producer
            if edge_policy(stage, name) != edge_policy(first, name):
                want = edge_policy(first, name).value
                raise SpecError(
                    f"stages[{u}].sync",
                    f"'{spec.stages[p].name}' is already consumed with sync: {want} by '{first.name}'; "
                    "all consumers of one stage must use the same policy",
                    f"set sync: {want}",
                )


def _check_no_atomic_add(spec: ChainSpec) -> None:
    """A release store can replace the atomic only where every semaphore gets exactly one post."""
    if not spec.optimizations.no_atomic_add:
        return
    for p, prod in enumerate(spec.stages):
        policy = output_policy(spec, p)
        if one_post(policy):
            continue
        raise SpecError(
            "optimizations.no_atomic_add",
            f"stage '{prod.name}' posts with sync: {policy.value}, where several tiles post to one semaphore, "
            "so the posts must be atomic",
            "set no_atomic_add: false, or use sync: tile on every edge",
        )


# ---------------------------------------------------------------------------------------------------
# Small helpers


def _fmt(values: tuple[int, ...]) -> str:
    return "[" + ",".join(str(v) for v in values) + "]"


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _divisor_hint(total: int, preferred: int, multiple_of: int) -> int:
    """Suggest the default warp size if it fits, else the largest fitting divisor."""
    if preferred > 0 and total % preferred == 0 and preferred % multiple_of == 0:
        return preferred
    fits = [d for d in range(multiple_of, total + 1, multiple_of) if total % d == 0]
    return fits[-1] if fits else total
