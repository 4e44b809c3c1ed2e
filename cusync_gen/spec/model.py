"""The spec's schema: enums, the backends' tile tables, the pydantic models (GEMM chain and attention),
their defaults and the queries later layers ask of a parsed spec. Knows nothing of files or YAML
(`loading`), of the cross-field rules (`rules`) or of how errors read (`messages`).
"""

from __future__ import annotations

import hashlib
import json
import re
from enum import Enum
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cusync_gen.spec.archs import ARCHS, DEFAULT_ARCH, SM90, TARGETS, Arch, Schedule  # noqa: F401 (re-exported)
from cusync_gen.spec.limits import (
    MAX_BATCH,
    MAX_CHANNELS,
    MAX_DIM,
    MAX_FILTER,
    MAX_IMAGE,
    MAX_STRIDE,
    MAX_DISPATCH_ENTRIES,
    MAX_GPU_NAME,
    MAX_HEAD_DIM,
    MAX_ROTARY_BASE,
    MAX_M,
    MAX_PIPELINE_STAGES,
    MAX_SMS,
    MAX_STAGES,
    MAX_TILE_CONFIGS,
    MAX_TILE_DIM,
)

# ---------------------------------------------------------------------------------------------------
# Enums and the small tables that go with them


class Dtype(str, Enum):
    FP16 = "fp16"
    BF16 = "bf16"


class Op(str, Enum):
    GEMM = "gemm"
    SWIGLU = "swiglu"


class Epilogue(str, Enum):
    IDENTITY = "identity"
    RELU = "relu"
    GELU = "gelu"            # exact GELU, 0.5 x (1 + erf(x / sqrt 2)): nn.GELU(), Hugging Face "gelu"
    # the tanh approximation, 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))): GPT-2's "gelu_new",
    # nn.GELU(approximate="tanh"); the spec also takes the spelling `gelu_new` (EPILOGUE_ALIASES)
    GELU_TANH = "gelu_tanh"
    SILU = "silu"
    # sm90 GEMM only, the fused gated MLP: B holds [gate | up] (2n columns), the output is
    # silu(A x gate) * (A x up), [M, n] (templates/sm90/include/cusync/sm90/gated_epilogue.cuh).
    SWIGLU = "swiglu"


#: Other spellings of an epilogue the spec accepts (Hugging Face's activation names), read as the value.
EPILOGUE_ALIASES: dict[str, Epilogue] = {"gelu_new": Epilogue.GELU_TANH, "gelu_pytorch_tanh": Epilogue.GELU_TANH}


class Policy(str, Enum):
    TILE = "tile"
    ROW = "row"
    STRIDED = "strided"
    NONE = "none"
    AUTO = "auto"  # the plan picks the policy from the tiles (plan.resolve_auto_policies)


class Order(str, Enum):
    ROW_MAJOR = "row_major"
    COLUMN_MAJOR = "column_major"
    BANDED = "banded"  # bands of 4 tile rows, column-major inside a band
    COLUMN_BANDED = "column_banded"  # bands of 4 tile columns, row-major inside a band (CUTLASS's along M, swizzle 4)


class Mode(str, Enum):
    """How the library computes an sm90 chain at a given M (templates/sm90/include/cusync/sm90/dispatch.h)."""

    OVERLAP = "overlap"    # tile-synced kernels (cuSync)
    STOCK = "stock"        # CUTLASS's persistent kernels, chained with PDL
    STREAMK = "streamk"    # CUTLASS's stream-K kernels, chained with PDL
    CLUSTER = "cluster"    # CUTLASS's persistent kernels in 2x1 clusters, chained with PDL
    PINGPONG = "pingpong"  # CUTLASS's ping-pong kernels in 128x128 tiles, chained with PDL
    CUBLASLT = "cublaslt"  # cuBLASLt's GEMMs (the heuristic's first algorithm, or autotune's pick), activation apart
    STREAM = "stream"      # one persistent kernel streaming packed weights, M <= 64 (optimizations.stream_weights)


class BLayout(str, Enum):
    ROW = "row"
    COL = "col"


Target = Literal["sm_80", "sm_86", "sm_89", "sm_90"]

#: Two concepts, one spelling each: a *target* is the GPU a project is built for ("sm_90", spec `target:`,
#: CLI --target), a *backend* is the kernel family it is generated with ("sm90", spec `arch:`, CLI
#: --backend). Either is accepted in any of the usual spellings: sm90, sm_90, sm_90a, compute_90, 90, 9.0.
_CC_SPELLING = re.compile(r"(?:sm_?|compute_?)?(\d)\.?(\d)[af]?", re.IGNORECASE)


def compute_capability(value: object) -> str | None:
    """"sm_90a", "sm90", "compute_90", "90", 90, "9.0" -> "90"; None for anything else."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    match = _CC_SPELLING.fullmatch(str(value).strip())
    return match.group(1) + match.group(2) if match else None


def canonical_target(value: object) -> object:
    """A target in any spelling as TARGETS spells it ("sm90" -> "sm_90"); other values unchanged (the
    caller reports them)."""
    cc = compute_capability(value)
    return f"sm_{cc}" if cc is not None else value


def canonical_backend(value: object) -> object:
    """A backend in any spelling as Arch spells it ("sm_90a" -> "sm90"); other values unchanged."""
    if isinstance(value, Arch):
        return value.value
    cc = compute_capability(value)
    return f"sm{cc}" if cc is not None else value


#: Which targets each backend's kernels run on (archs.ArchFacts.targets), by the backend's spelling.
BACKEND_TARGETS: dict[str, tuple[str, ...]] = {a.value: f.targets for a, f in ARCHS.items()}

#: mma.sync shapes the sm80 backend instantiates for 16-bit inputs with fp32 accumulation.
SM80_INSTRUCTIONS: tuple[tuple[int, int, int], ...] = ((16, 8, 16),)
DEFAULT_INSTRUCTION: tuple[int, int, int] = (16, 8, 16)
DEFAULT_PIPELINE_STAGES = 3
MIN_PIPELINE_STAGES = 3  # cp.async multistage mainloops in CUTLASS 2.x need at least 3 on sm80
ALIGNMENT = 8  # 8 x 16-bit elements = one 16-byte vector access

#: The sm90 tile tables (archs.SM90, where they are explained), under the names the spec package exports.
SM90_TILE_M: tuple[int, ...] = SM90.tile_m
SM90_TILE_N: tuple[int, ...] = SM90.tile_n
SM90_TILE_K: tuple[int, ...] = SM90.tile_k
SM90_SCHEDULES: tuple[str, ...] = SM90.schedules
SM90_PINGPONG_TILE_M: tuple[int, ...] = SM90.pingpong_tile_m
#: run() mode `stream` runs chains of at most this many rows (kStreamMaxM, cusync/sm90/stream_mode.h), and its
#: kernel takes N and K in steps of STREAM_STEP (8: its 16-byte loads and stores; a K tail of 8 is zero-padded).
STREAM_MAX_M = 64
#: Its slab kernel (every chain slab_problem accepts, no optimization needed) runs up to SLAB_MAX_M rows
#: (kSlabMaxM), and run()'s default rule picks it up to SLAB_DEFAULT_MAX_M where the first GEMM's weights are
#: column-major (kSlabDefaultMaxM, cusync/sm90/dispatch.h), up to SLAB_GATHER_DEFAULT_MAX_M where both GEMMs'
#: are (kSlabGatherDefaultMaxM: no partials).
SLAB_MAX_M = 4
SLAB_DEFAULT_MAX_M = 1
SLAB_GATHER_DEFAULT_MAX_M = 2
STREAM_STEP = 8
SM90_PINGPONG_TILE_N: tuple[int, ...] = SM90.pingpong_tile_n

#: Gate and up columns per interleaved group of a gated GEMM's weights (epilogue swiglu; kGateGroup of
#: templates/sm90/include/cusync/sm90/gated_epilogue.cuh): one 8-column step of the wgmma accumulator.
GATE_GROUP = 8

#: SwiGluStage (templates/runtime/include/cusync/swiglu.cuh): threads per block and elements per access.
SWIGLU_BLOCK_THREADS = 512
SWIGLU_VECTOR = 8
#: Swiglu tile widths that both fit its thread layout and allow rows <= MAX_TILE_DIM (cols 8 needs 512 rows).
SWIGLU_COLS: tuple[int, ...] = (16, 32, 64, 128, 256)


# ---------------------------------------------------------------------------------------------------
# Field types, bounded by the limits


PosInt = Annotated[int, Field(strict=True, gt=0, le=MAX_DIM)]
#: The rotary embedding's frequency base (LLaMA 1-2: 10000, LLaMA 3: 500000).
RotaryBase = Annotated[float, Field(strict=True, gt=1.0, le=MAX_ROTARY_BASE, allow_inf_nan=False)]
TileDim = Annotated[int, Field(strict=True, gt=0, le=MAX_TILE_DIM)]
Triple = tuple[TileDim, TileDim, TileDim]
PipelineStages = Annotated[int, Field(strict=True, gt=0, le=MAX_PIPELINE_STAGES)]
SmCount = Annotated[int, Field(strict=True, gt=0, le=MAX_SMS)]
Rows = Annotated[int, Field(strict=True, gt=0, le=MAX_M)]
HeadDim = Annotated[int, Field(strict=True, gt=0, le=MAX_HEAD_DIM)]

_FROZEN = ConfigDict(frozen=True, extra="forbid")

# ---------------------------------------------------------------------------------------------------
# Models


class TileSpec(BaseModel):
    """Tile shapes; warp/instruction/stages are optional so the common case stays one line."""

    model_config = _FROZEN

    threadblock: Triple
    warp: Triple | None = None
    instruction: Triple | None = None
    stages: PipelineStages | None = None
    # sm90 only: a Schedule's spelling (default cooperative). Read as text, so that spec/rules checks it after
    # the Hopper-only rule, with its message and the field path of the stage or tile configuration.
    schedule: str | None = None


class Optimizations(BaseModel):
    """cuSync's optional optimizations; all off by default because each has a legality condition."""

    model_config = _FROZEN

    no_atomic_add: bool = Field(default=False, strict=True)
    avoid_wait_kernel: bool = Field(default=False, strict=True)
    avoid_custom_order: bool = Field(default=False, strict=True)
    reorder_tile_loads: bool = Field(default=False, strict=True)
    # sm90, two GEMMs: run() mode `stream` at M <= 64 (cusync/sm90/stream_mode.h), one persistent kernel that
    # streams the weights from a packed copy the library keeps (as much memory again as the weights)
    stream_weights: bool = Field(default=False, strict=True)


class StridedCols(BaseModel):
    """`cols: {strided: S, count: C}`: a tile reads C column blocks S apart (gate | up halves: C = 2)."""

    model_config = _FROZEN

    strided: PosInt
    count: PosInt = 2


class ReadsSpec(BaseModel):
    """What each tile of a stage reads of its producer (cusync_gen/dependency.py). Optional: the plan
    derives it from the op, and checks a declared one against it."""

    model_config = _FROZEN

    cols: Literal["k_range", "same"] | StridedCols
    halo: int = Field(default=0, strict=True, ge=0, le=MAX_DIM)


class StageSpec(BaseModel):
    """One GEMM or SwiGLU stage; `a` names where its input comes from, `sync` how it waits for it."""

    model_config = _FROZEN

    name: str
    op: Op
    a: str
    n: PosInt
    k: PosInt | None = None
    b_layout: BLayout = BLayout.ROW
    epilogue: Epilogue = Epilogue.IDENTITY
    order: Order = Order.ROW_MAJOR
    tile: TileSpec
    sync: Policy | None = None
    b: str | None = None          # swiglu only: a second producer holding `up` (then `a` holds `gate`)
    sync_b: Policy | None = None  # policy of the edge from `b` (default: the same as `sync`)
    reads: ReadsSpec | None = None  # the tile dependency on the producer (default: derived from the op)
    bias: bool = False            # gemm only: D = epilogue(A x B + bias), bias an [n] vector (Arguments <name>_bias)

    @model_validator(mode="before")
    @classmethod
    def _swiglu_two_dim_threadblock(cls, data: Any) -> Any:
        """A swiglu tile is [rows, cols]; accept that spelling by filling the unused K with 1."""
        if not isinstance(data, dict) or data.get("op") != Op.SWIGLU.value:
            return data
        tile = data.get("tile")
        if not isinstance(tile, dict):
            return data
        tb = tile.get("threadblock")
        if isinstance(tb, (list, tuple)) and len(tb) == 2:
            return {**data, "tile": {**tile, "threadblock": [*tb, 1]}}
        return data

    @field_validator("epilogue", mode="before")
    @classmethod
    def _epilogue_alias(cls, value: Any) -> Any:
        """`gelu_new` (GPT-2's name) and `gelu_pytorch_tanh` are the tanh GELU, `gelu_tanh`."""
        return EPILOGUE_ALIASES[value].value if isinstance(value, str) and value in EPILOGUE_ALIASES else value


class TileConfigSpec(BaseModel):
    """Other tile shapes for M up to m_max: the library picks a configuration by M at run time."""

    model_config = _FROZEN

    m_max: Rows
    tiles: dict[str, Triple]  # stage name -> threadblock; stages not listed keep their own tile
    schedules: dict[str, str] = Field(default_factory=dict)  # stage name -> sm90 schedule in this configuration


class DispatchEntrySpec(BaseModel):
    """Up to m_max rows, run() computes the chain this way."""

    model_config = _FROZEN

    m_max: Rows
    mode: Mode


class DispatchSpec(BaseModel):
    """A dispatch table measured by `cusync-gen tune`: the mode per M on one GPU (used on GPUs with `sms`)."""

    model_config = _FROZEN

    gpu: str = Field(max_length=MAX_GPU_NAME)
    sms: SmCount
    modes: list[DispatchEntrySpec] = Field(min_length=1, max_length=MAX_DISPATCH_ENTRIES)


class _SpecHead(BaseModel):
    """The keys every spec starts with, GEMM chain or attention."""

    model_config = _FROZEN

    name: str
    arch: Arch = DEFAULT_ARCH
    target: Target = "sm_80"
    dtype: Dtype = Dtype.FP16

    @model_validator(mode="before")
    @classmethod
    def _target_of_arch(cls, data: Any) -> Any:  # noqa: ANN401 (the document as parsed)
        """An omitted target is the arch's first: sm_80 for sm80, sm_90 for sm90 (whose kernels build only there)."""
        if isinstance(data, dict) and "target" not in data:
            targets = BACKEND_TARGETS.get(str(canonical_backend(data.get("arch", DEFAULT_ARCH.value))))
            if targets:
                data = {**data, "target": targets[0]}
        return data

    @field_validator("arch", mode="before")
    @classmethod
    def _arch_spelling(cls, value: object) -> object:
        return canonical_backend(value) if isinstance(value, (str, int)) else value

    @field_validator("target", mode="before")
    @classmethod
    def _target_spelling(cls, value: object) -> object:
        return canonical_target(value) if isinstance(value, (str, int)) else value


class ChainSpec(_SpecHead):
    """A whole chain: the producers come first, every later stage reads `input` or an earlier stage."""

    sms: SmCount | None = None
    optimizations: Optimizations = Optimizations()
    stages: list[StageSpec] = Field(min_length=1, max_length=MAX_STAGES)
    tile_configs: list[TileConfigSpec] = Field(default_factory=list, max_length=MAX_TILE_CONFIGS)
    dispatch: DispatchSpec | None = None


class AttentionTiles(BaseModel):
    """Tile shapes of the attention chain's four GEMMs (the softmax stage takes scores' tile rows)."""

    model_config = _FROZEN

    qkv: TileSpec
    scores: TileSpec
    pv: TileSpec
    proj: TileSpec


class AttentionBlock(BaseModel):
    """One layer's attention on one GPU: X W_qkv -> Q K^T -> softmax -> P V -> O W_o."""

    model_config = _FROZEN

    hidden: PosInt            # model width: X and Y are [tokens, hidden]
    heads: PosInt             # heads on this GPU
    head_dim: HeadDim
    causal: bool = Field(default=True, strict=True)
    tiles: AttentionTiles | None = None   # the sm80 chain's four GEMM tiles (required there; sm90 picks its own)
    # arch: sm90 only (the rules say so for sm80):
    kv_heads: PosInt | None = None        # grouped-query attention: KV heads on this GPU (default: heads)
    rotary: bool = Field(default=False, strict=True)  # LLaMA's rotary embedding on Q and K (half-split pairs)
    rotary_base: RotaryBase = 10000.0


class AttentionSpec(_SpecHead):
    """A spec with an `attention:` block instead of `stages:` (docs/spec-format.md, "Attention")."""

    attention: AttentionBlock


class ConvStageSpec(BaseModel):
    """One 2D convolution (NHWC activations, KRSC filters) computed as an implicit GEMM: GEMM M = n*p*q output
    pixels, N = k output channels, K = r*s*c (docs/conv.md). `a` names the tensor its window reads."""

    model_config = _FROZEN

    name: str
    op: Literal["conv"]
    a: str
    n: Annotated[int, Field(strict=True, gt=0, le=MAX_BATCH)] | None = None      # the largest batch (stages[0])
    h: Annotated[int, Field(strict=True, gt=0, le=MAX_IMAGE)] | None = None      # input height (stages[0])
    w: Annotated[int, Field(strict=True, gt=0, le=MAX_IMAGE)] | None = None      # input width (stages[0])
    c: Annotated[int, Field(strict=True, gt=0, le=MAX_CHANNELS)] | None = None   # input channels (stages[0])
    k: Annotated[int, Field(strict=True, gt=0, le=MAX_CHANNELS)]                 # output channels
    r: Annotated[int, Field(strict=True, gt=0, le=MAX_FILTER)] = 3               # filter height
    s: Annotated[int, Field(strict=True, gt=0, le=MAX_FILTER)] = 3               # filter width
    stride: Annotated[int, Field(strict=True, gt=0, le=MAX_STRIDE)] = 1
    padding: Annotated[int, Field(strict=True, ge=0, le=MAX_FILTER)] = 0
    dilation: Annotated[int, Field(strict=True, gt=0, le=MAX_STRIDE)] = 1
    bias: bool = Field(default=False, strict=True)   # a per-channel [k] bias (batch norm folded in)
    residual: str | None = None                      # `input` or an earlier stage, added before the activation
    epilogue: Epilogue = Epilogue.IDENTITY           # identity or relu
    sync: Policy | None = None                       # auto (the default with a producer) or none
    order: Order = Order.ROW_MAJOR
    tile: TileSpec = TileSpec(threadblock=(128, 64, 32))  # sm80's; an omitted sm90 tile: default_sm90_conv_tile


class ConvTileConfigSpec(BaseModel):
    """Other tile shapes for batches up to batch_max: the library picks a configuration by the batch at run time."""

    model_config = _FROZEN

    batch_max: Annotated[int, Field(strict=True, gt=0, le=MAX_BATCH)]
    tiles: dict[str, Triple]  # stage name -> threadblock; stages not listed keep their own tile


class ConvChainSpec(_SpecHead):
    """A spec whose stages are convolutions (`op: conv`): a chain of conv layers, e.g. a ResNet or VGG block."""

    stages: list[ConvStageSpec] = Field(min_length=1, max_length=MAX_STAGES)
    tile_configs: list[ConvTileConfigSpec] = Field(default_factory=list, max_length=MAX_TILE_CONFIGS)


#: The attention chain's GEMMs in chain order, and what each computes (for messages and docs).
ATTENTION_GEMMS: tuple[str, ...] = ("qkv", "scores", "pv", "proj")


# ---------------------------------------------------------------------------------------------------
# Defaults: what an omitted tile field means (parse_spec makes them explicit: one canonical spec)


#: Largest sm80 warp tile in M and N. Measured on the H200 (`cusync-gen tune`, benchmarks/NOTES.md t2):
#: a 64x128 warp tile (the old default for a 128x256 threadblock) computed wrong results and a 128x64
#: one ran 40x slower (register spills); 64x64 is CUTLASS's own choice for its large sm80 tiles.
MAX_WARP_MN = 64
#: Narrowest sm80 GEMM warp tile in N, deepest threadblock K, and most warps a threadblock: what CUTLASS
#: 2.x's sm80 GEMM (DefaultGemmUniversal, 16-bit tensor-op operands) instantiates. Found by compiling the
#: backend's kernel over a sweep of tiles: narrower warps break its epilogue's and B operand's thread maps,
#: K above 64 its A/B shared-memory layouts (their crosswise width), and more than 8 warps of 64x64 are more
#: accumulators than an SM's registers hold (MAX_WARP_MN above).
MIN_WARP_N = 32
SM80_GEMM_TILE_K: tuple[int, ...] = (32, 64)
MAX_GEMM_WARPS = 8


def default_warp(threadblock: tuple[int, int, int]) -> tuple[int, int, int]:
    """Half the threadblock in M and N, at most 64 (4 warps up to 128x128, 8 for 128x256), and at least
    MIN_WARP_N columns where the threadblock has them (the sm80 GEMM's narrowest warp tile)."""
    m, n, k = threadblock
    return (max(min(m // 2, MAX_WARP_MN), 1), max(min(n // 2, MAX_WARP_MN), min(n, MIN_WARP_N), 1), k)


def default_sm80_tile(tile: TileSpec) -> TileSpec:
    """An sm80 GEMM tile with its omitted warp, instruction and stages filled in."""
    if tile.warp is not None and tile.instruction is not None and tile.stages is not None:
        return tile
    return tile.model_copy(update={
        "warp": tile.warp if tile.warp is not None else default_warp(tile.threadblock),
        "instruction": tile.instruction if tile.instruction is not None else DEFAULT_INSTRUCTION,
        "stages": tile.stages if tile.stages is not None else DEFAULT_PIPELINE_STAGES,
    })


def default_sm90_conv_tile(k: int) -> TileSpec:
    """An sm90 conv stage's tile where the spec gives none: 128 output pixels by 128 channels from 128 output
    channels up (half the passes over the image of 64), by 64 below; K-blocks of 64 channels (the only sm90 one)."""
    return TileSpec(threadblock=(128, 128 if k >= 128 else 64, 64))


#: The tile an sm90 conv stage without a tile of its own takes at the batches where that tile's grid still fits in
#: one wave (default_sm90_conv_tile_configs), and the SM count that rule plans for (H100 SXM and H200).
SM90_CONV_SMALL_TILE: tuple[int, int, int] = (64, 64, 64)
SM90_CONV_PLAN_SMS = 132
#: The tile an sm90 conv stage whose default is 128 x 128 takes where the small tile's grid no longer fits in one
#: wave but this one's does (default_sm90_conv_tile_configs). Measured on an H100 (benchmarks/NOTES.md c16): stages
#: of 18-36 main-loop iterations 1.1-1.35x faster than on 128 x 128; 72-iteration stages 1.2x at 80 tiles but level
#: at 104, where the grid's L2 traffic (the activations read once per 64 output channels instead of per 128), not
#: the tile's latency, bounds the stage. So tiles longer than SM90_CONV_MEDIUM_LONG_K_STEPS iterations take it only
#: while its grid fills at most two thirds of a wave.
SM90_CONV_MEDIUM_TILE: tuple[int, int, int] = (128, 64, 64)
SM90_CONV_MEDIUM_LONG_K_STEPS = 36


class ConvStageShape(NamedTuple):
    """One conv stage's input image (h, w, c: the tensor its `a` names) and output size (p, q)."""
    h: int
    w: int
    c: int
    p: int
    q: int


def conv_stage_shapes(spec: ConvChainSpec) -> list[ConvStageShape]:
    """Every stage's shapes, in stage order: the one walk of the chain's image sizes, for the rules, the plan and
    the tile derivation. A stage reads the tensor its `a` names (the chain input where that names nothing
    earlier: the rules refuse it); p and q as conv_output_size computes them (< 1 where the window does not fit:
    the rules refuse that too)."""
    first = spec.stages[0]
    inputs: dict[str, tuple[int, int, int]] = {"input": (first.h or 1, first.w or 1, first.c or 1)}
    shapes = []
    for st in spec.stages:
        h, w, c = inputs.get(st.a, inputs["input"])
        p = conv_output_size(h, st.r, st.stride, st.padding, st.dilation)
        q = conv_output_size(w, st.s, st.stride, st.padding, st.dilation)
        shapes.append(ConvStageShape(h, w, c, p, q))
        inputs[st.name] = (max(p, 1), max(q, 1), st.k)
    return shapes


def conv_stage_pixels(spec: ConvChainSpec) -> dict[str, int]:
    """Output pixels per image (p x q) of every stage, by name."""
    return {st.name: max(s.p, 1) * max(s.q, 1) for st, s in zip(spec.stages, conv_stage_shapes(spec))}


def default_sm90_conv_tile_configs(spec: ConvChainSpec, omitted: set[str]) -> ConvChainSpec:
    """An sm90 conv spec without `tile_configs`, whose stages `omitted` gave no tile (they have their default,
    default_sm90_conv_tile): at each batch each of them runs the first tile whose grid still fits in one wave of
    SM90_CONV_PLAN_SMS blocks: SM90_CONV_SMALL_TILE, then (for a stage whose default is 128 x 128)
    SM90_CONV_MEDIUM_TILE (within two thirds of a wave for tiles longer than SM90_CONV_MEDIUM_LONG_K_STEPS
    iterations), else its default. A stage's default tile there leaves most SMs idle while each block walks the
    whole filter (ResNet's 14 x 14 x 256 layer at batch 1: 4 blocks of 128 x 128), and more blocks with less work
    each finish sooner; past one wave the larger tile wins again. A stage's tile only grows with the batch, so it changes at one or two batches; each
    batch where some stage's tile changes ends one tile configuration (its batch_max), which lists the stages
    not on their own tile up to there. A stage that takes one tile at every batch up to stages[0].n has it as
    its own. The spec unchanged where no stage changes."""
    if spec.tile_configs:
        return spec
    n = spec.stages[0].n or 1
    shapes = dict(zip((st.name for st in spec.stages), conv_stage_shapes(spec)))
    pixels = conv_stage_pixels(spec)
    # Per stage: (the last batch, the tile) for each smaller tile it takes, smallest first. A tile's grid at batch
    # b is ceil(b * pixels / bm) rows of ceil(k / bn) tiles; it fits in `blocks` up to (blocks // ceil(k / bn))
    # rows, i.e. up to b = rows * bm // pixels (0: not even one image).
    steps: dict[str, list[tuple[int, tuple[int, int, int]]]] = {}
    for st in spec.stages:
        own, shape = st.tile.threadblock, shapes[st.name]
        k_steps = st.r * st.s * -(-shape.c // own[2])
        candidates = []  # (tile, the blocks its grid may take)
        if st.name in omitted and own != SM90_CONV_SMALL_TILE:
            candidates.append((SM90_CONV_SMALL_TILE, SM90_CONV_PLAN_SMS))
            if own[:2] == (128, 128):
                long_tiles = k_steps > SM90_CONV_MEDIUM_LONG_K_STEPS
                blocks = SM90_CONV_PLAN_SMS * 2 // 3 if long_tiles else SM90_CONV_PLAN_SMS
                candidates.append((SM90_CONV_MEDIUM_TILE, blocks))
        taken: list[tuple[int, tuple[int, int, int]]] = []
        for tile, blocks in candidates:
            bm, bn, _ = tile
            last = min(n, blocks // -(-st.k // bn) * bm // pixels[st.name])
            if last > (taken[-1][0] if taken else 0):
                taken.append((last, tile))
        if taken:
            steps[st.name] = taken

    def tile_at(name: str, batch: int) -> tuple[int, int, int] | None:
        return next((tile for last, tile in steps[name] if batch <= last), None)

    default = {st.name: st.tile.threadblock for st in spec.stages}
    own = {name: tile_at(name, n) or default[name] for name in steps}  # tiles only grow: T(n) is the largest
    stages = [st.model_copy(update={"tile": TileSpec(threadblock=own[st.name])})
              if st.name in own and own[st.name] != default[st.name] else st for st in spec.stages]
    configs = []
    for batch_max in sorted({last for taken in steps.values() for last, _ in taken if last < n}):
        tiles = {name: tile for name in sorted(steps)
                 if (tile := tile_at(name, batch_max) or default[name]) != own[name]}
        configs.append(ConvTileConfigSpec(batch_max=batch_max, tiles=tiles))
    if len(configs) > MAX_TILE_CONFIGS:  # more switch points than a spec may list: the defaults alone
        return spec
    return spec.model_copy(update={"stages": stages, "tile_configs": configs})


def resolve_defaults(spec: ChainSpec) -> ChainSpec:
    """Fill omitted gemm tile fields so the hash and the plan see the same explicit values."""
    stages: list[StageSpec] = []
    changed = False
    for stage in spec.stages:
        tile = stage.tile
        if stage.op is Op.GEMM and ARCHS[spec.arch].warp_specialized:
            if tile.schedule is None:
                stage = stage.model_copy(update={"tile": tile.model_copy(update={"schedule": SM90_SCHEDULES[0]})})
                changed = True
        elif stage.op is Op.GEMM and (tile.warp is None or tile.instruction is None or tile.stages is None):
            stage = stage.model_copy(update={"tile": default_sm80_tile(tile)})
            changed = True
        stages.append(stage)
    return spec.model_copy(update={"stages": stages}) if changed else spec


# ---------------------------------------------------------------------------------------------------
# Queries on a parsed spec


#: Settings that take one value only (`split_k: 1`, `cluster: [1, 1, 1]`) and are no fields of the model:
#: the loader accepts and drops them (spec.loading.drop_one_value_fields), and the hash counts them with
#: their one value, so a spec hashes, and generates, the same with or without them.
ONE_VALUE_FIELDS: dict[str, Any] = {"split_k": 1, "cluster": [1, 1, 1]}


def spec_hash(spec: ChainSpec | AttentionSpec) -> str:
    """Short content hash: names generated output so regeneration is deterministic and traceable."""
    data = spec.model_dump(mode="json")
    hopper = ARCHS[spec.arch].warp_specialized
    for stage in data.get("stages", []):  # the one-value fields, as resolve_defaults used to fill them
        stage["split_k"] = ONE_VALUE_FIELDS["split_k"]
        stage["tile"]["cluster"] = ONE_VALUE_FIELDS["cluster"] if hopper and stage["op"] == Op.GEMM.value else None
    attention = data.get("attention", {})
    for tile in (attention.get("tiles") or {}).values():
        tile["cluster"] = None
    # The sm90 layer's keys at their defaults leave the hash (and an sm80 chain's files) as before them.
    for key, default in (("kv_heads", None), ("rotary", False), ("rotary_base", 10000.0), ("tiles", None)):
        if key in attention and attention[key] == default:
            attention.pop(key)
    for stage in data.get("stages", []):  # an absent `reads` leaves the hash (and generated files) as before
        if stage.get("reads") is None:
            stage.pop("reads", None)
        if stage.get("bias") is False:  # and no bias
            stage.pop("bias", None)
    if data.get("dispatch", 0) is None:  # likewise an absent dispatch table
        data.pop("dispatch")
    canonical = json.dumps(data, sort_keys=True)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:12]


def producer_width(spec: ChainSpec, index: int) -> int:
    """Width of stage `index`'s output tensor (both ops write [M, n])."""
    return spec.stages[index].n


def stage_index(spec: ChainSpec) -> dict[str, int]:
    return {stage.name: i for i, stage in enumerate(spec.stages)}


def consumers_of(spec: ChainSpec, index: int) -> list[int]:
    """Indices of the stages that read stage `index`'s output (through `a` or `b`)."""
    name = spec.stages[index].name
    return [i for i, s in enumerate(spec.stages) if name in (s.a, s.b)]


def edge_policy(stage: StageSpec, producer: str) -> Policy:
    """The policy with which `stage` waits for `producer` (its `a` edge, or its `b` edge)."""
    if stage.b is not None and stage.b == producer and stage.a != producer:
        return stage.sync_b or stage.sync or Policy.NONE
    return stage.sync or Policy.NONE


def output_policy(spec: ChainSpec, index: int) -> Policy | None:
    """The policy stage `index` posts with: that of its consumers (check_rules makes them agree)."""
    users = consumers_of(spec, index)
    if not users:
        return None
    return edge_policy(spec.stages[users[0]], spec.stages[index].name)


def with_tiles(spec: ChainSpec, tiles: dict[str, tuple[int, int, int]],
               schedules: dict[str, str] | None = None) -> ChainSpec:
    """The spec with some stages' threadblocks (and sm90 schedules) replaced (a tile configuration), and no
    other configs."""
    schedules = schedules or {}
    stages = []
    for s in spec.stages:
        update: dict[str, Any] = {}
        if s.name in tiles:
            update["threadblock"] = tuple(tiles[s.name])
        if s.name in schedules:
            update["schedule"] = schedules[s.name]
        stages.append(s.model_copy(update={"tile": s.tile.model_copy(update=update)}) if update else s)
    return spec.model_copy(update={"stages": stages, "tile_configs": []})


def spec_data(spec: ChainSpec) -> dict[str, Any]:
    """The spec as the data of a spec file (what `tune` writes): values left at their defaults are left out,
    name, arch, target and dtype always kept, a swiglu tile spelled [rows, cols]. Parsing it gives the spec
    back (with its defaults resolved)."""
    data = spec.model_dump(mode="json", exclude_defaults=True)
    head = {key: getattr(spec, key) for key in ("name", "arch", "target", "dtype")}
    data = {**{k: v.value if isinstance(v, Enum) else v for k, v in head.items()}, **data}
    for stage in data["stages"]:
        if stage["op"] == Op.SWIGLU.value:
            stage["tile"]["threadblock"] = stage["tile"]["threadblock"][:2]
    return data


def config_spec(spec: ChainSpec, config: TileConfigSpec) -> ChainSpec:
    """The chain a tile configuration runs: the spec with that configuration's tiles and schedules."""
    return with_tiles(spec, dict(config.tiles), dict(config.schedules))


def conv_config_spec(spec: ConvChainSpec, config: ConvTileConfigSpec) -> ConvChainSpec:
    """The conv chain a tile configuration runs: the spec with that configuration's tiles and no configurations."""
    stages = [st.model_copy(update={"tile": TileSpec(threadblock=config.tiles[st.name])}) if st.name in config.tiles else st
              for st in spec.stages]
    return spec.model_copy(update={"stages": stages, "tile_configs": []})


def conv_output_size(size: int, filt: int, stride: int, padding: int, dilation: int) -> int:
    """Output rows (or columns) of a convolution, as PyTorch computes them (may be < 1: the rules refuse it)."""
    return (size + 2 * padding - dilation * (filt - 1) - 1) // stride + 1


def attention_gemm_shape(spec: AttentionSpec, name: str) -> tuple[str, str, str]:
    """(M, N, K) of one attention GEMM, as text: s is new tokens, keys = cached + new, z = (sequence, head)."""
    a = spec.attention
    d = a.heads * a.head_dim
    return {
        "qkv": ("batch*s", str(3 * d), str(a.hidden)),
        "scores": ("s", "keys", str(a.head_dim)),
        "pv": ("s", str(a.head_dim), "keys"),
        "proj": ("batch*s", str(a.hidden), str(d)),
    }[name]
