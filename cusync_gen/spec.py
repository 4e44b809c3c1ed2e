"""The spec: the only module that knows the YAML/JSON format (docs/spec-format.md).

Parsing happens in three steps so each error is reported once, where the user can fix it:
pydantic checks shapes and types, `resolve_defaults` makes omitted tile fields explicit (so the hash
and every later layer see one canonical spec), and `check_rules` applies the cross-field rules.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
import reprlib
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from cusync_gen.errors import SpecError, UsageError

# ---------------------------------------------------------------------------------------------------
# Enums and the small tables that go with them


class Dtype(str, Enum):
    FP16 = "fp16"
    BF16 = "bf16"


class Arch(str, Enum):
    SM80 = "sm80"
    SM90 = "sm90"


class Op(str, Enum):
    GEMM = "gemm"
    SWIGLU = "swiglu"


class Epilogue(str, Enum):
    IDENTITY = "identity"
    RELU = "relu"
    GELU = "gelu"
    SILU = "silu"


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


class Mode(str, Enum):
    """How the library computes an sm90 chain at a given M (templates/sm90/include/cusync/sm90/dispatch.h)."""

    OVERLAP = "overlap"    # tile-synced kernels (cuSync)
    STOCK = "stock"        # CUTLASS's persistent kernels, chained with PDL
    STREAMK = "streamk"    # CUTLASS's stream-K kernels, chained with PDL
    CLUSTER = "cluster"    # CUTLASS's persistent kernels in 2x1 clusters, chained with PDL
    PINGPONG = "pingpong"  # CUTLASS's ping-pong kernels in 128x128 tiles, chained with PDL


class BLayout(str, Enum):
    ROW = "row"
    COL = "col"


Target = Literal["sm_80", "sm_86", "sm_89", "sm_90"]
TARGETS: tuple[str, ...] = ("sm_80", "sm_86", "sm_89", "sm_90")

#: mma.sync shapes the sm80 backend instantiates for 16-bit inputs with fp32 accumulation.
SM80_INSTRUCTIONS: tuple[tuple[int, int, int], ...] = ((16, 8, 16),)
DEFAULT_INSTRUCTION: tuple[int, int, int] = (16, 8, 16)
DEFAULT_PIPELINE_STAGES = 3
MIN_PIPELINE_STAGES = 3  # cp.async multistage mainloops in CUTLASS 2.x need at least 3 on sm80
ALIGNMENT = 8  # 8 x 16-bit elements = one 16-byte vector access

#: sm90 (CUTLASS 3.x, warp-specialized cooperative): two math warp groups split BLK_M, so M is 128 or
#: 256; wgmma N is a multiple of 8 up to 256 (these are the widths CUTLASS's builder tiles well); BLK_K
#: of 64 fp16/bf16 elements is one 128-byte swizzle atom.
SM90_TILE_M: tuple[int, ...] = (128, 256)
SM90_TILE_N: tuple[int, ...] = (64, 128, 192, 256)
SM90_TILE_K: tuple[int, ...] = (64,)
SM90_SCHEDULES: tuple[str, ...] = ("cooperative",)

#: SwiGluStage (templates/runtime/include/cusync/swiglu.cuh): threads per block and elements per access.
SWIGLU_BLOCK_THREADS = 512
SWIGLU_VECTOR = 8
#: Swiglu tile widths that both fit its thread layout and allow rows <= MAX_TILE_DIM (cols 8 needs 512 rows).
SWIGLU_COLS: tuple[int, ...] = (16, 32, 64, 128, 256)

#: "input" names the external A tensor, so no stage may be called that.
RESERVED_NAMES = frozenset({"input"})
#: C++ keywords a name would collide with in the generated code (the ones plausible as names).
CPP_KEYWORDS = frozenset(
    "alignas alignof and asm auto bool break case catch char class const constexpr continue default "
    "delete do double else enum explicit export extern false float for friend goto if inline int long "
    "mutable namespace new noexcept not nullptr operator or private protected public register return "
    "short signed sizeof static struct switch template this throw true try typedef typename union "
    "unsigned using virtual void volatile while half".split()
)

#: ASCII only, matched with fullmatch (`$` would also match before a final newline).
_C_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SNAKE = re.compile(r"[a-z][a-z0-9_]*")

# ---------------------------------------------------------------------------------------------------
# Limits: the largest value of every number and name in a spec, and of a spec file itself. One table;
# docs/spec-format.md ("Limits") lists the same rows, and a test keeps the two in step.
#
# The C++ side holds dimensions and tile counts in `int` (32 bits) and element offsets in int64_t
# (swiglu.cuh, softmax.cuh, the sm80 prefetch, CUTLASS 2.x LongIndex, CuTe's int64 strides). With
# M <= 2^20 and n, k <= 2^17, a stage's grid has at most ceil(2^20 / 16) * ceil(2^17 / 8) = 2^30 blocks
# (sm80 tiles are at least 16 x 8, a swiglu tile at least 4096 elements): within int32 and CUDA's
# gridDim.x limit of 2^31 - 1. An [M, n] tensor has up to 2^37 elements: int64 offsets, not int32.

MAX_STAGES = 16          # kMaxStages in templates/runtime/include/cusync/stage.cuh
MAX_DIM = 1 << 17        # n, k, hidden, heads * head_dim: 131072
MAX_M = 1 << 20          # rows at run time (--m), tile_configs m_max: 1048576
MAX_HEAD_DIM = 256
MAX_TILE_DIM = 256       # every value of threadblock, warp, instruction, cluster, tile_configs tiles
MAX_PIPELINE_STAGES = 10
MAX_SMS = 1024
MAX_TILE_CONFIGS = 8
MAX_DISPATCH_ENTRIES = 64
MAX_GPU_NAME = 64         # dispatch.gpu: a device name as CUDA reports it
MAX_NAME_LENGTH = 64
MAX_SPEC_BYTES = 1 << 20  # a spec file: 1 MiB
MAX_SPEC_DEPTH = 32       # nested mappings and lists (a spec has at most 5)
MAX_SPEC_VALUES = 10_000  # mappings, lists and scalars, counting what each YAML alias repeats
MAX_SHOWN = 80            # characters of a user value quoted in an error message


class Limit(NamedTuple):
    what: str      # the spec keys (or option) it bounds, as docs/spec-format.md names them
    maximum: int
    why: str


LIMITS: tuple[Limit, ...] = (
    Limit("stages", MAX_STAGES, "the runtime's per-stage device counters are arrays of kMaxStages = 16 "
          "(templates/runtime/include/cusync/stage.cuh)"),
    Limit("n, k", MAX_DIM, "a C++ int dimension: with M up to 2^20 a stage's grid stays below 2^31 blocks"),
    Limit("attention.hidden", MAX_DIM, "as n and k"),
    Limit("attention.heads * attention.head_dim", MAX_DIM, "D, the width of Q, K, V and O, as n and k"),
    Limit("attention.head_dim", MAX_HEAD_DIM, "FlashAttention-2's limit too; current models use 64 to 256"),
    Limit("tile values", MAX_TILE_DIM, "the largest tile either backend instantiates"),
    Limit("tile.stages", MAX_PIPELINE_STAGES, "the deepest sm80 pipeline CUTLASS's own kernels use"),
    Limit("sms", MAX_SMS, "more than any GPU has (H200: 132, B200: 148)"),
    Limit("tile_configs", MAX_TILE_CONFIGS, "entries; the library tries them in order at every run"),
    Limit("tile_configs[i].m_max", MAX_M, "as --m"),
    Limit("dispatch.modes", MAX_DISPATCH_ENTRIES, "entries of a measured dispatch table (m_max as --m)"),
    Limit("dispatch.gpu", MAX_GPU_NAME, "characters of the GPU name the table was measured on"),
    Limit("split_k, reads", MAX_DIM, "a sanity bound (split_k must be 1; reads must match the op's)"),
    Limit("name, stage names", MAX_NAME_LENGTH, "characters; they name files, C++ classes and CMake targets"),
    Limit("--m, --batch, --cache", MAX_M, "rows at run time (batch x new tokens for attention): the largest M "
          "the generated library is built for"),
    Limit("spec file size", MAX_SPEC_BYTES, "bytes (1 MiB); a spec is a few KiB"),
    Limit("spec nesting", MAX_SPEC_DEPTH, "levels of mappings and lists; a spec has at most 5"),
    Limit("spec values", MAX_SPEC_VALUES, "mappings, lists and scalars, counting what each YAML alias repeats"),
)


PosInt = Annotated[int, Field(strict=True, gt=0, le=MAX_DIM)]
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
    cluster: Triple | None = None      # sm90 only: thread block cluster shape
    schedule: str | None = None        # sm90 only: kernel schedule (cooperative)


class Optimizations(BaseModel):
    """cuSync's optional optimizations; all off by default because each has a legality condition."""

    model_config = _FROZEN

    no_atomic_add: bool = Field(default=False, strict=True)
    avoid_wait_kernel: bool = Field(default=False, strict=True)
    avoid_custom_order: bool = Field(default=False, strict=True)
    reorder_tile_loads: bool = Field(default=False, strict=True)


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
    split_k: PosInt = 1
    sync: Policy | None = None
    b: str | None = None          # swiglu only: a second producer holding `up` (then `a` holds `gate`)
    sync_b: Policy | None = None  # policy of the edge from `b` (default: the same as `sync`)
    reads: ReadsSpec | None = None  # the tile dependency on the producer (default: derived from the op)

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


class TileConfigSpec(BaseModel):
    """Other tile shapes for M up to m_max: the library picks a configuration by M at run time."""

    model_config = _FROZEN

    m_max: Rows
    tiles: dict[str, Triple]  # stage name -> threadblock; stages not listed keep their own tile


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
    arch: Arch = Arch.SM80
    target: Target = "sm_80"
    dtype: Dtype = Dtype.FP16


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
    tiles: AttentionTiles


class AttentionSpec(_SpecHead):
    """A spec with an `attention:` block instead of `stages:` (docs/spec-format.md, "Attention")."""

    attention: AttentionBlock


#: The attention chain's GEMMs in chain order, and what each computes (for messages and docs).
ATTENTION_GEMMS: tuple[str, ...] = ("qkv", "scores", "pv", "proj")


# ---------------------------------------------------------------------------------------------------
# Public entry points


def parse_spec(data: Any, source: str = "<spec>") -> ChainSpec:
    """Validate raw data into a canonical ChainSpec; the first violation becomes one SpecError."""
    if not isinstance(data, dict):
        kind = "nothing (the file is empty)" if data is None else type(data).__name__
        raise _with_source(
            SpecError(
                "<root>",
                f"the top level of {source} must be a mapping, got {kind}",
                "start the file with 'name: ...', 'stages: ...' (see docs/spec-format.md)",
            ),
            source,
        )
    if "attention" in data:
        return _parse_attention(data, source)
    try:
        spec = ChainSpec.model_validate(data)
    except ValidationError as exc:
        raise _with_source(_from_validation_error(exc), source) from None
    spec = resolve_defaults(spec)
    try:
        check_rules(spec)
    except SpecError as exc:
        raise _with_source(exc, source) from None
    return spec


def _parse_attention(data: dict[str, Any], source: str) -> AttentionSpec:
    if "stages" in data:
        raise _with_source(SpecError("attention", "a spec has either stages: (a GEMM chain) or attention:, not both",
                                     "split it into two spec files"), source)
    try:
        spec = AttentionSpec.model_validate(data)
    except ValidationError as exc:
        raise _with_source(_from_validation_error(exc, AttentionSpec), source) from None
    tiles = {name: _default_sm80_tile(getattr(spec.attention.tiles, name)) for name in ATTENTION_GEMMS}
    spec = spec.model_copy(update={"attention": spec.attention.model_copy(
        update={"tiles": AttentionTiles(**tiles)})})
    try:
        check_attention_rules(spec)
    except SpecError as exc:
        raise _with_source(exc, source) from None
    return spec


def _default_sm80_tile(tile: TileSpec) -> TileSpec:
    if tile.warp is not None and tile.instruction is not None and tile.stages is not None:
        return tile
    return tile.model_copy(update={
        "warp": tile.warp if tile.warp is not None else default_warp(tile.threadblock),
        "instruction": tile.instruction if tile.instruction is not None else DEFAULT_INSTRUCTION,
        "stages": tile.stages if tile.stages is not None else DEFAULT_PIPELINE_STAGES,
    })


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


def check_attention_rules(spec: AttentionSpec) -> None:
    """The attention chain's cross-field rules, each naming the field to change."""
    _check_chain_name(spec.name)
    if spec.arch is not Arch.SM80:
        raise SpecError("arch", "the attention chain is built on the sm80 backend (CUTLASS 2.x kernels, which run "
                        "on Hopper too)", "set arch: sm80 (and target: sm_90 to build for H100/H200)")
    a = spec.attention
    d = a.heads * a.head_dim
    if d > MAX_DIM:  # before the tile rules, which build a StageSpec with k = D
        raise SpecError("attention.heads", f"heads * head_dim = {a.heads} * {a.head_dim} = {d} is above the limit of "
                        f"{MAX_DIM} (D, the width of Q, K, V and O, is a C++ int dimension)",
                        f"use at most {MAX_DIM // a.head_dim} heads of {a.head_dim} (the heads on one GPU)")
    for key, value in (("hidden", a.hidden), ("head_dim", a.head_dim)):
        if value % ALIGNMENT:
            raise SpecError(f"attention.{key}", f"{key}={value} is not a multiple of {ALIGNMENT} (16-byte vector accesses)",
                            f"use a multiple of {ALIGNMENT}, e.g. {_round_up(value, ALIGNMENT)}")
    for name in ATTENTION_GEMMS:
        tile = getattr(a.tiles, name)
        base = f"attention.tiles.{name}"
        for key in ("cluster", "schedule"):
            if getattr(tile, key) is not None:
                raise SpecError(f"{base}.{key}", f"{key} is a Hopper kernel setting; the attention chain uses sm80 kernels",
                                f"remove {key}")
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


def load_spec(path: Path) -> ChainSpec:
    """Read a .yaml/.yml/.json file; problems with the file itself are UsageErrors, not SpecErrors.

    No file can make this hang or crash: its size, nesting and number of values (YAML aliases
    included) are capped before the spec model sees the data (LIMITS)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".yaml", ".yml", ".json"):
        raise UsageError(
            f"{path}: unknown spec file type '{suffix or '(none)'}'",
            "name the spec file *.yaml, *.yml or *.json",
        )
    text = _read_spec_text(path)
    if suffix == ".json":
        data = _load_json(path, text)
    else:
        try:
            loader = _StrictLoader(text, path)  # refuses characters YAML does not allow (NUL, ...) right here
        except yaml.reader.ReaderError as exc:
            raise UsageError(_reader_error_message(path, text, exc), "remove it (YAML takes a control character only as "
                             "an escape in a double-quoted string, e.g. \"\\t\")") from None
        try:
            data = loader.get_single_data()
        except yaml.YAMLError as exc:
            raise UsageError(_yaml_error_message(path, exc), "fix the YAML syntax at that line") from None
        finally:
            loader.dispose()
    _check_size(data, path)
    return parse_spec(data, source=str(path))


def _read_spec_text(path: Path) -> str:
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_SPEC_BYTES + 1)
    except FileNotFoundError:
        raise UsageError(f"spec file {path} not found", "check the path (relative to the current directory)") from None
    except IsADirectoryError:
        raise UsageError(f"{path} is a directory, not a spec file", "pass the path of a .yaml or .json file") from None
    except OSError as exc:
        raise UsageError(f"cannot read spec file {path}: {exc}", "check the file's permissions") from None
    if len(raw) > MAX_SPEC_BYTES:
        raise UsageError(f"{path} is larger than 1 MiB, the limit for a spec file",
                         "a spec is a few KiB: check that this is the spec (docs/spec-format.md, Limits)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"cannot read spec file {path}: {exc}", "save the file as UTF-8") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")  # universal newlines, as text mode reads them


def _load_json(path: Path, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{path}:{exc.lineno}: invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
            "fix the JSON syntax at that line",
        ) from None
    except RecursionError:
        raise _too_deep(path) from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise UsageError(f"{path}: invalid JSON: {_clip(str(exc))}", _NUMBER_HINT) from None


_NUMBER_HINT = f"no number in a spec is above {MAX_M} (docs/spec-format.md, Limits)"


def _too_deep(path: Path, line: int | None = None) -> UsageError:
    where = f"{path}:{line}" if line is not None else str(path)
    return UsageError(f"{where}: the spec nests mappings and lists deeper than {MAX_SPEC_DEPTH} levels",
                      "a spec needs at most 5 levels: check the brackets (and that no YAML alias contains itself)")


def _too_many(path: Path, line: int | None = None) -> UsageError:
    where = f"{path}:{line}" if line is not None else str(path)
    return UsageError(f"{where}: the spec holds more than {MAX_SPEC_VALUES} values (counting what each YAML alias "
                      "repeats)", "a spec needs a few hundred: remove the extra data or the repeated aliases "
                      "(docs/spec-format.md, Limits)")


def _check_size(data: Any, path: Path) -> None:
    """At most MAX_SPEC_DEPTH levels and MAX_SPEC_VALUES values, counting each YAML alias as what it
    repeats (an alias is the same Python object, so each is counted once and reused: linear time)."""
    done: dict[int, tuple[int, int]] = {}  # id -> (values, levels) of a finished mapping or list

    def walk(node: Any, level: int) -> tuple[int, int]:
        if not isinstance(node, (dict, list, tuple)):  # tuples: YAML's !!pairs and !!omap
            return 1, 0
        if id(node) in done:
            values, levels = done[id(node)]
        else:
            if level > MAX_SPEC_DEPTH:  # also ends a self-containing alias (&a [*a])
                raise _too_deep(path)
            values, levels = 1, 1
            children = [v for pair in node.items() for v in pair] if isinstance(node, dict) else node
            for child in children:
                child_values, child_levels = walk(child, level + 1)
                values += child_values
                levels = max(levels, child_levels + 1)
                if values > MAX_SPEC_VALUES:
                    break
            done[id(node)] = (values, levels)
        if level + levels - 1 > MAX_SPEC_DEPTH:
            raise _too_deep(path)
        if values > MAX_SPEC_VALUES:
            raise _too_many(path)
        return values, levels

    walk(data, 1)


def spec_hash(spec: ChainSpec) -> str:
    """Short content hash: names generated output so regeneration is deterministic and traceable."""
    data = spec.model_dump(mode="json")
    for stage in data.get("stages", []):  # an absent `reads` leaves the hash (and generated files) as before
        if stage.get("reads") is None:
            stage.pop("reads", None)
    if data.get("dispatch", 0) is None:  # likewise an absent dispatch table
        data.pop("dispatch")
    canonical = json.dumps(data, sort_keys=True)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:12]


#: Largest sm80 warp tile in M and N. Measured on the H200 (`cusync-gen tune`, benchmarks/NOTES.md t2):
#: a 64x128 warp tile (the old default for a 128x256 threadblock) computed wrong results and a 128x64
#: one ran 40x slower (register spills); 64x64 is CUTLASS's own choice for its large sm80 tiles.
MAX_WARP_MN = 64


def default_warp(threadblock: tuple[int, int, int]) -> tuple[int, int, int]:
    """Half the threadblock in M and N, at most 64 (4 warps up to 128x128, 8 for 128x256)."""
    m, n, k = threadblock
    return (max(min(m // 2, MAX_WARP_MN), 1), max(min(n // 2, MAX_WARP_MN), 1), k)


def resolve_defaults(spec: ChainSpec) -> ChainSpec:
    """Fill omitted gemm tile fields so the hash and the plan see the same explicit values."""
    stages: list[StageSpec] = []
    changed = False
    for stage in spec.stages:
        tile = stage.tile
        if stage.op is Op.GEMM and spec.arch is Arch.SM90:
            if tile.cluster is None or tile.schedule is None:
                tile = tile.model_copy(
                    update={
                        "cluster": tile.cluster if tile.cluster is not None else (1, 1, 1),
                        "schedule": tile.schedule if tile.schedule is not None else SM90_SCHEDULES[0],
                    }
                )
                stage = stage.model_copy(update={"tile": tile})
                changed = True
        elif stage.op is Op.GEMM and (tile.warp is None or tile.instruction is None or tile.stages is None):
            tile = tile.model_copy(
                update={
                    "warp": tile.warp if tile.warp is not None else default_warp(tile.threadblock),
                    "instruction": tile.instruction if tile.instruction is not None else DEFAULT_INSTRUCTION,
                    "stages": tile.stages if tile.stages is not None else DEFAULT_PIPELINE_STAGES,
                }
            )
            stage = stage.model_copy(update={"tile": tile})
            changed = True
        stages.append(stage)
    return spec.model_copy(update={"stages": stages}) if changed else spec


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


def check_rules(spec: ChainSpec) -> None:
    """Apply the cross-field rules of docs/spec-format.md in spec order; raise the first violation."""
    _check_chain_name(spec.name)
    _check_arch(spec)
    seen: dict[str, int] = {}
    for i, stage in enumerate(spec.stages):
        _check_stage_name(i, stage, seen)
        seen[stage.name] = i
        producer = _check_source(spec, i, stage, seen)
        _check_sync_presence(i, stage, producer)
        _check_widths(spec, i, stage, producer)
        if stage.op is Op.GEMM and spec.arch is Arch.SM90:
            _check_sm90_gemm_tile(i, stage)
        elif stage.op is Op.GEMM:
            _check_gemm_tile(i, stage)
        else:
            _check_swiglu_stage(i, stage)
        if producer is not None and stage.sync not in (None, Policy.NONE, Policy.AUTO):
            _check_policy(spec, i, stage, producer, stage.sync, "sync")
        if stage.b is not None or stage.sync_b is not None:
            _check_second_producer(spec, i, stage, seen, producer)
        if stage.split_k != 1:
            raise SpecError(
                f"stages[{i}].split_k",
                f"split_k={stage.split_k} is not supported; only 1 is supported for now",
                "remove split_k (or set split_k: 1)",
            )
    _check_output_policies(spec)
    _check_no_atomic_add(spec)
    _check_tile_configs(spec)
    _check_dispatch(spec)


def with_tiles(spec: ChainSpec, tiles: dict[str, tuple[int, int, int]]) -> ChainSpec:
    """The spec with some stages' threadblocks replaced (a tile configuration), and no other configs."""
    stages = [
        s.model_copy(update={"tile": s.tile.model_copy(update={"threadblock": tuple(tiles[s.name])})})
        if s.name in tiles
        else s
        for s in spec.stages
    ]
    return spec.model_copy(update={"stages": stages, "tile_configs": []})


def _check_tile_configs(spec: ChainSpec) -> None:
    """Each configuration must be a valid chain on its own; configurations are listed by growing m_max."""
    if not spec.tile_configs:
        return
    if spec.arch is not Arch.SM90:
        raise SpecError("tile_configs", "tile_configs (tiles picked by M at run time) are an sm90 feature",
                        "remove tile_configs, or set arch: sm90")
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
                raise SpecError(f"{field}.tiles.{_key(name)}", f"unknown stage {_show(name)}",
                                f"use one of: {', '.join(names)}")
            stage = next(s for s in spec.stages if s.name == name)
            if stage.op is Op.SWIGLU and tb[2] != 1:
                raise SpecError(f"{field}.tiles.{name}", "a swiglu tile is [rows, cols, 1]", f"write [{tb[0]}, {tb[1]}, 1]")
        try:
            check_rules(with_tiles(spec, dict(config.tiles)))
        except SpecError as exc:
            raise SpecError(f"{field}: {exc.field}", exc.message[len(exc.field) + 2 :], exc.hint) from None


_GPU_NAME = re.compile(r"[A-Za-z0-9 ._()-]+")


def _check_dispatch(spec: ChainSpec) -> None:
    """A measured table: sm90 only, rows by growing m_max, a GPU name that is safe to print and embed."""
    table = spec.dispatch
    if table is None:
        return
    if spec.arch is not Arch.SM90:
        raise SpecError("dispatch", "dispatch (how run() computes the chain, by M) is an sm90 feature",
                        "remove dispatch, or set arch: sm90")
    if not _GPU_NAME.fullmatch(table.gpu):
        raise SpecError("dispatch.gpu", f"{_show(table.gpu)} is not a GPU name of letters, digits, spaces and ._()-",
                        "write the name CUDA reports, e.g. gpu: NVIDIA H200")
    previous = 0
    for e, entry in enumerate(table.modes):
        if entry.m_max <= previous:
            raise SpecError(f"dispatch.modes[{e}].m_max", f"m_max={entry.m_max} must be larger than the previous "
                            f"entry's ({previous})", "list the modes by growing m_max")
        previous = entry.m_max


def output_policy(spec: ChainSpec, index: int) -> Policy | None:
    """The policy stage `index` posts with: that of its consumers (check_rules makes them agree)."""
    users = consumers_of(spec, index)
    if not users:
        return None
    return edge_policy(spec.stages[users[0]], spec.stages[index].name)


# ---------------------------------------------------------------------------------------------------
# Cross-field rules


def _check_name(field: str, name: str, pattern: re.Pattern[str], what: str, hint: str) -> None:
    """Names become file names, C++ identifiers and CMake targets: ASCII identifiers of bounded length."""
    if not name.isascii():
        raise SpecError(field, f"{_show(name)} is not an ASCII {what}", hint)
    if not pattern.fullmatch(name):
        raise SpecError(field, f"{_show(name)} is not a {what}", hint)
    if len(name) > MAX_NAME_LENGTH:
        raise SpecError(field, f"{_show(name)} is {len(name)} characters long, above the limit of {MAX_NAME_LENGTH}",
                        f"use a name of at most {MAX_NAME_LENGTH} characters")


def _check_chain_name(name: str) -> None:
    _check_name("name", name, _SNAKE, "lower snake case C identifier",
                "use lower case letters, digits and underscores, starting with a letter (e.g. gpt3_mlp)")
    if name in CPP_KEYWORDS:
        raise SpecError("name", f"'{name}' is a C++ keyword", "pick another name, e.g. my_" + name)


def _check_arch(spec: ChainSpec) -> None:
    """sm90 kernels use wgmma and TMA: Hopper only, and the sm80-only optimizations do not apply."""
    if spec.arch is Arch.SM90:
        if spec.target != "sm_90":
            raise SpecError(
                "target",
                f"arch: sm90 builds Hopper kernels (TMA, wgmma), which need target sm_90, not {spec.target}",
                "set target: sm_90, or use arch: sm80 for other GPUs",
            )
        opt = spec.optimizations
        for key, why in (
            ("avoid_wait_kernel", "sm90 launches each consumer with programmatic dependent launch, not a wait kernel"),
            ("avoid_custom_order", "sm90 kernels are persistent and always take tiles from the ordered ticket queue"),
            ("reorder_tile_loads", "the sm90 load warp already runs ahead of the math by the whole pipeline"),
        ):
            if getattr(opt, key):
                raise SpecError(f"optimizations.{key}", f"{key} does not apply to arch: sm90: {why}", f"remove {key}")
        return
    for i, stage in enumerate(spec.stages):
        for key in ("cluster", "schedule"):
            if getattr(stage.tile, key) is not None:
                raise SpecError(
                    f"stages[{i}].tile.{key}",
                    f"{key} is a Hopper kernel setting and does not apply to arch: {spec.arch.value}",
                    f"remove {key}, or set arch: sm90",
                )


def _check_sm90_gemm_tile(i: int, stage: StageSpec) -> None:
    tile = stage.tile
    base = f"stages[{i}].tile"
    for key, why in (
        ("warp", "the math warp groups are laid out by CUTLASS's CollectiveBuilder"),
        ("instruction", "wgmma shapes follow from the tile"),
        ("stages", "the pipeline is sized by CUTLASS to fill shared memory"),
    ):
        if getattr(tile, key) is not None:
            raise SpecError(f"{base}.{key}", f"{key} is an sm80 setting; on sm90 {why}", f"remove {key}")
    m, n, k = tile.threadblock
    for value, allowed, dim in ((m, SM90_TILE_M, "M"), (n, SM90_TILE_N, "N"), (k, SM90_TILE_K, "K")):
        if value not in allowed:
            raise SpecError(
                f"{base}.threadblock",
                f"threadblock {dim}={value} is not supported by the sm90 backend",
                f"use {dim} in {{{', '.join(map(str, allowed))}}}, e.g. threadblock: [128, 256, 64]",
            )
    if tile.cluster is not None and tuple(tile.cluster) != (1, 1, 1):
        raise SpecError(
            f"{base}.cluster",
            f"cluster {_fmt(tile.cluster)} is not supported: synced kernels take one tile per CTA from the ticket queue",
            "set cluster: [1, 1, 1] (or omit it)",
        )
    if tile.schedule is not None and tile.schedule not in SM90_SCHEDULES:
        raise SpecError(
            f"{base}.schedule",
            f"schedule {_show(tile.schedule)} is not supported: in a ping-pong kernel the two math warp groups work on "
            "different tiles, which the ticket queue does not hand out",
            "set schedule: cooperative (or omit it)",
        )
    if stage.k is not None and stage.k % k:
        raise SpecError(
            f"{base}.threadblock",
            f"k={stage.k} is not a multiple of threadblock K={k}",
            f"pad k to a multiple of {k}, e.g. {_round_up(stage.k, k)}",
        )


def _check_stage_name(i: int, stage: StageSpec, seen: dict[str, int]) -> None:
    field = f"stages[{i}].name"
    _check_name(field, stage.name, _C_IDENT, "C identifier",
                "use letters, digits and underscores, not starting with a digit (e.g. gemm1)")
    if stage.name in RESERVED_NAMES:
        raise SpecError(
            field, f"'{stage.name}' is reserved for the external input tensor", "rename the stage, e.g. gemm_in"
        )
    if stage.name in CPP_KEYWORDS:
        raise SpecError(field, f"'{stage.name}' is a C++ keyword", f"rename the stage, e.g. {stage.name}_stage")
    if stage.name in seen:
        raise SpecError(
            field,
            f"'{stage.name}' is already the name of stages[{seen[stage.name]}]",
            "give every stage a unique name",
        )


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
            field, f"unknown stage {_show(stage.a)}; the first stage must read the external input", "set a: input"
        )
    names = ", ".join(s.name for s in spec.stages[:i])
    raise SpecError(field, f"unknown stage {_show(stage.a)}", f"use 'input' or one of: {names}")


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
        if producer is not None and stage.b is None:  # with b, _check_second_producer checks both widths
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
    if stage.k is not None and stage.k % tb[2]:
        raise SpecError(
            f"{base}.threadblock",
            f"k={stage.k} is not a multiple of threadblock K={tb[2]}",
            f"use a threadblock K that divides {stage.k} (e.g. {math.gcd(stage.k, 32)}), or pad k",
        )


def _check_swiglu_stage(i: int, stage: StageSpec) -> None:
    base = f"stages[{i}]"
    tile = stage.tile
    if tile.threadblock[2] != 1:
        raise SpecError(
            f"{base}.tile.threadblock",
            f"a swiglu tile is [rows, cols]; the third value must be 1, got {tile.threadblock[2]}",
            f"write threadblock: [{tile.threadblock[0]}, {tile.threadblock[1]}] (or [..., ..., 1])",
        )
    for key in ("warp", "instruction", "stages", "cluster", "schedule"):
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
    """Each policy maps a consumer tile onto producer tiles; these are the shapes where it can."""
    prod = spec.stages[producer]
    ptb, ctb = prod.tile.threadblock, stage.tile.threadblock
    if policy is Policy.STRIDED and (stage.op is not Op.SWIGLU or stage.b is not None):
        raise SpecError(
            f"stages[{i}].{key}",
            "sync: strided is only for swiglu stages reading the gate and up halves of one producer",
            "use sync: row or tile",
        )
    if policy is Policy.TILE and stage.op is Op.SWIGLU:
        if ptb[1] % ctb[1]:
            raise SpecError(
                f"stages[{i}].tile.threadblock",
                f"sync: tile needs the swiglu tile cols ({ctb[1]}) to divide producer '{prod.name}' threadblock N "
                f"({ptb[1]}), so each tile waits on one producer tile",
                f"set threadblock: [{ctb[0]}, {ptb[1]}]",
            )
        if stage.b is None and stage.n % ptb[1]:
            raise SpecError(
                f"stages[{i}].n",
                f"sync: tile needs n={stage.n} to be a multiple of producer '{prod.name}' threadblock N ({ptb[1]}), "
                "so the up columns j + n line up with producer tiles",
                "use sync: strided or row",
            )
    if ptb[0] % ctb[0]:
        raise SpecError(
            f"stages[{i}].tile.threadblock",
            f"sync: {policy.value} needs the threadblock M ({ctb[0]}) to divide producer '{prod.name}' threadblock M "
            f"({ptb[0]}), so each tile waits on one producer row of tiles",
            f"use a threadblock M that divides {ptb[0]} (e.g. {ptb[0]})",
        )
    if policy is Policy.TILE and stage.op is Op.GEMM and ptb[1] % ctb[2]:
        raise SpecError(
            f"stages[{i}].tile.threadblock",
            f"sync: tile needs the threadblock K ({ctb[2]}) to divide producer '{prod.name}' threadblock N ({ptb[1]})",
            f"use a threadblock K that divides {ptb[1]} (e.g. 32), or use sync: row",
        )
    if policy is Policy.STRIDED:
        if ctb[1] != ptb[1]:
            raise SpecError(
                f"stages[{i}].tile.threadblock",
                f"sync: strided needs tile cols ({ctb[1]}) equal to producer '{prod.name}' threadblock N ({ptb[1]})",
                f"set threadblock: [{ctb[0]}, {ptb[1]}, 1]",
            )
        if stage.n % ptb[1]:
            raise SpecError(
                f"stages[{i}].n",
                f"sync: strided needs n={stage.n} to be a multiple of producer '{prod.name}' threadblock N ({ptb[1]}), "
                "so gate tile j and up tile j + n/N line up",
                f"use a producer threadblock N that divides {stage.n}, or use sync: row",
            )


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
        raise SpecError(f"{base}.b", f"unknown or later stage {_show(stage.b)}", f"use one of: {names}")
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
        if policy in (None, Policy.NONE, Policy.TILE, Policy.AUTO):
            continue
        raise SpecError(
            "optimizations.no_atomic_add",
            f"stage '{prod.name}' posts with sync: {policy.value}, where several tiles post to one semaphore, "
            "so the posts must be atomic",
            "set no_atomic_add: false, or use sync: tile on every edge",
        )


# ---------------------------------------------------------------------------------------------------
# Pydantic errors -> one SpecError


_NESTED: dict[type[BaseModel], dict[str, type[BaseModel]]] = {
    ChainSpec: {"stages": StageSpec, "optimizations": Optimizations, "tile_configs": TileConfigSpec,
                "dispatch": DispatchSpec},
    DispatchSpec: {"modes": DispatchEntrySpec},
    StageSpec: {"tile": TileSpec, "reads": ReadsSpec},
    ReadsSpec: {"cols": StridedCols},
    AttentionSpec: {"attention": AttentionBlock},
    AttentionBlock: {"tiles": AttentionTiles},
    AttentionTiles: {name: TileSpec for name in ("qkv", "scores", "pv", "proj")},
}

_MISSING_HINTS = {
    "name": "add name: gpt3_mlp (a lower snake case C identifier)",
    "op": "add op: gemm (or swiglu)",
    "a": "add a: input (or the name of an earlier stage)",
    "n": "add n: <output width>",
    "tile": "add tile: {threadblock: [128, 128, 32]}",
    "threadblock": "add threadblock: [128, 128, 32]",
    "stages": "add stages: with at least one stage",
}

_TRIPLE_EXAMPLES = {
    "threadblock": "[128, 128, 32]",
    "warp": "[64, 64, 32]",
    "instruction": "[16, 8, 16]",
}


def _render_loc(loc: tuple[int | str, ...]) -> str:
    """('stages', 1, 'tile', 'warp') -> 'stages[1].tile.warp'; drops pydantic's internal union tags."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.isidentifier():
            out += f".{_key(part)}" if out else _key(part)
    return out or "<root>"


#: Which row of LIMITS a pydantic `le` bound comes from, by the key it bounds (the elements of a
#: threadblock, warp, instruction, cluster or tile_configs tile are "tile values").
_LIMIT_OF_KEY = {"n": "n, k", "k": "n, k", "hidden": "attention.hidden",
                 "heads": "attention.heads * attention.head_dim", "head_dim": "attention.head_dim",
                 "stages": "tile.stages", "sms": "sms", "m_max": "tile_configs[i].m_max",
                 "split_k": "split_k, reads", "strided": "split_k, reads", "count": "split_k, reads",
                 "halo": "split_k, reads"}


def _above_limit(loc: tuple[int | str, ...], key: str, value: Any, maximum: Any) -> SpecError:
    what = "tile values" if loc and isinstance(loc[-1], int) else _LIMIT_OF_KEY.get(key, "")
    limit = next((row for row in LIMITS if row.what == what), None)
    why = f" ({limit.why})" if limit is not None else ""
    if what == "tile values":  # name the list, not its element
        return SpecError(_render_loc(loc[:-1]), f"{_show(value)} is above the limit of {maximum} for a tile value{why}",
                         f"use values of at most {maximum} (docs/spec-format.md, Limits)")
    return SpecError(_render_loc(loc), f"{_show(value)} is above the limit of {maximum}{why}",
                     f"use at most {maximum} (docs/spec-format.md, Limits)")


def _model_at(loc: tuple[int | str, ...], root: type[BaseModel] = ChainSpec) -> type[BaseModel]:
    model: type[BaseModel] = root
    for part in loc:
        if isinstance(part, str) and part in _NESTED.get(model, {}):
            model = _NESTED[model][part]
    return model


def _from_validation_error(exc: ValidationError, root: type[BaseModel] = ChainSpec) -> SpecError:
    err = exc.errors(include_url=False)[0]
    loc: tuple[int | str, ...] = tuple(err["loc"])
    field = _render_loc(loc)
    kind = err["type"]
    value = err.get("input")
    ctx = err.get("ctx") or {}
    key = next((p for p in reversed(loc) if isinstance(p, str) and p.isidentifier()), "")
    if kind == "extra_forbidden":
        allowed = list(_model_at(loc[:-1], root).model_fields)
        close = difflib.get_close_matches(str(loc[-1])[: MAX_NAME_LENGTH + 1], allowed, n=1)
        guess = f" (did you mean '{close[0]}'?)" if close else ""
        return SpecError(field, f"unknown key {_show(loc[-1])}",
                         f"remove it{guess}; allowed keys are {', '.join(allowed)}")
    if kind == "missing" and loc and isinstance(loc[-1], int):
        # a short [M, N, K] list is reported per missing element; name the list instead
        field, kind = _render_loc(loc[:-1]), "too_short"
    if kind == "missing":
        return SpecError(field, f"required key '{key}' is missing", _MISSING_HINTS.get(key, f"add {key}: ..."))
    if kind in ("enum", "literal_error"):
        return SpecError(field, f"{_show(value)} is not a valid {key}", f"use one of: {ctx.get('expected', '')}")
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return SpecError(field, f"expected an integer, got {_show(value)}",
                         "write a whole number without quotes, e.g. 128")
    if kind == "greater_than":
        return SpecError(field, f"must be greater than {ctx.get('gt')}, got {_show(value)}", "use a positive number")
    if kind == "less_than_equal":
        return _above_limit(loc, key, value, ctx.get("le"))
    if kind in ("bool_type", "bool_parsing"):
        return SpecError(field, f"expected true or false, got {_show(value)}", f"write {key}: true or {key}: false")
    if kind == "string_type":
        return SpecError(field, f"expected a string, got {_show(value)}", "quote the value")
    if kind == "too_long" and key == "stages" and loc == ("stages",):
        return SpecError(field, f"{ctx.get('actual_length')} stages; a chain has at most {MAX_STAGES} (kMaxStages "
                         "sizes the runtime's per-stage counters)",
                         f"split the chain into specs of at most {MAX_STAGES} stages")
    if kind == "too_long" and loc == ("tile_configs",):
        return SpecError(field, f"{ctx.get('actual_length')} entries; at most {MAX_TILE_CONFIGS} (the library tries "
                         "them in order at every run)", f"merge neighbouring entries into at most {MAX_TILE_CONFIGS}")
    if kind in ("tuple_type", "list_type", "too_short", "too_long"):
        if key in _TRIPLE_EXAMPLES:
            return SpecError(
                field,
                f"expected a list of three integers [M, N, K], got {_show(value)}",
                f"write {key}: {_TRIPLE_EXAMPLES[key]}",
            )
        if key == "stages":
            msg = ("needs at least one stage" if kind == "too_short"
                   else f"expected a list of stages, got {_show(value)}")
            return SpecError(field, msg, "write stages as a list of mappings, each starting with '- name: ...'")
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return SpecError(field, f"expected a mapping, got {_show(value)}", "write it as 'key: value' lines")
    return SpecError(field, _clip(str(err.get("msg", "invalid value"))),
                     "see docs/spec-format.md for the allowed values")


# ---------------------------------------------------------------------------------------------------
# Small helpers


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader for spec files: rejects duplicate keys (which plain YAML resolves to the last one),
    keys that are not strings, integers too long for int(), and nesting deeper than MAX_SPEC_DEPTH
    (the composer recurses once per level, so 100k brackets were a RecursionError)."""

    def __init__(self, stream: str, path: Path) -> None:
        super().__init__(stream)
        self.path = path
        self.depth = 0
        self.nodes = 0  # composed so far: stop early (1 MiB of YAML takes PyYAML half a minute to compose)

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self.depth += 1
        self.nodes += 1
        try:
            if self.depth > MAX_SPEC_DEPTH + 1:  # + 1: the scalars inside the deepest mapping or list
                raise _too_deep(self.path, self.peek_event().start_mark.line + 1)
            if self.nodes > MAX_SPEC_VALUES:  # _check_size counts aliases too, after construction
                raise _too_many(self.path, self.peek_event().start_mark.line + 1)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        """PyYAML's constructors for an explicit tag raise ValueError, KeyError or AttributeError on a value
        they cannot read (`!!float abc`, `!!bool maybe`, `!!timestamp tomorrow`): a UsageError instead."""
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError):
            value = _show(node.value) if isinstance(node, yaml.ScalarNode) else "this value"
            tag = node.tag.replace("tag:yaml.org,2002:", "!!")
            raise self.fail(node, f"cannot read {value} as {_show(tag)}",
                            "remove the tag (the !!... before the value): a spec needs none") from None

    def fail(self, node: yaml.Node, message: str, hint: str) -> UsageError:
        line = node.start_mark.line + 1
        return UsageError(f"{self.path}:{line}: {message} (line {line}, column {node.start_mark.column + 1})", hint)


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[str] = set()
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            kind = "list" if isinstance(key_node, yaml.SequenceNode) else "mapping"
            raise loader.fail(key_node, f"a {kind} is used as a mapping key", _KEY_HINT)
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, str):
            raise loader.fail(key_node, f"the mapping key {_show(key)} is not a string", _KEY_HINT)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark, f"found duplicate key {_show(key)}",
                key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_KEY_HINT = "keys are names such as n or stages; quote a key that YAML reads as a number, null or true"


def _construct_int(loader: _StrictLoader, node: yaml.ScalarNode) -> int:
    try:
        return loader.construct_yaml_int(node)
    except ValueError:
        if not node.value.lstrip("+-").replace("_", "").isdigit():
            raise  # `!!int abc`: construct_object says it cannot read it
        raise loader.fail(node, f"the number {_show(node.value)} has too many digits", _NUMBER_HINT) from None


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_StrictLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def _yaml_error_message(path: Path, exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = _clip(getattr(exc, "problem", None) or str(exc))  # may quote a tag or token of the file
    if mark is not None:
        return f"{path}:{mark.line + 1}: invalid YAML: {problem} (line {mark.line + 1}, column {mark.column + 1})"
    return f"{path}: invalid YAML: {problem}"


def _reader_error_message(path: Path, text: str, exc: yaml.reader.ReaderError) -> str:
    """A character YAML does not allow, by line and column (its str() is two lines and counts characters)."""
    position = exc.position if isinstance(exc.position, int) else 0
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    character = f"U+{exc.character:04X}" if isinstance(exc.character, int) else _show(exc.character)
    return f"{path}:{line}: invalid YAML: the character {character} is not allowed (line {line}, column {column})"


def _with_source(err: SpecError, source: str) -> SpecError:
    """Remember which file the error came from without changing the message the CLI prints."""
    err.source = source
    return err


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 3, MAX_SHOWN, MAX_SHOWN, 40
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 8


def _show(value: Any) -> str:
    """A user value quoted in an error message: its repr (so a newline shows as \\n), at most MAX_SHOWN
    characters; reprlib stops early, so a huge (or alias-expanded) value costs nothing to show."""
    return _clip(_REPR.repr(value))


def _clip(text: str, limit: int = MAX_SHOWN) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _key(name: str) -> str:
    """A user key in a field path, cut short like _show but without quotes."""
    return _clip(name, MAX_NAME_LENGTH + 3)


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
