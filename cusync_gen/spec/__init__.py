"""The spec: the only package that knows the YAML/JSON format (docs/spec-format.md).

Parsing happens in three steps so each error is reported once, where the user can fix it:
pydantic checks shapes and types, `resolve_defaults` makes omitted tile fields explicit (so the hash
and every later layer see one canonical spec), and `check_rules` applies the cross-field rules.

Its modules, each importing only those above it (tests/test_layering.py keeps it so):
- `limits`: the largest value of every number and name in a spec (`LIMITS`);
- `model`: enums, the backends' tile tables, the pydantic models, their defaults, and queries on a spec;
- `messages`: user values quoted in errors, and pydantic's errors turned into one SpecError;
- `rules`: the cross-field rules (`check_rules`, `check_attention_rules`, `policy_problem`);
- `loading`: files to data to a spec (`load_spec`, `parse_spec`), within the limits.

This module re-exports their public names: `from cusync_gen.spec import ...` is the way in.
"""

from cusync_gen.spec.limits import (
    LIMITS,
    MAX_DIM,
    MAX_DISPATCH_ENTRIES,
    MAX_GPU_NAME,
    MAX_HEAD_DIM,
    MAX_M,
    MAX_NAME_LENGTH,
    MAX_PIPELINE_STAGES,
    MAX_SHOWN,
    MAX_SMS,
    MAX_SPEC_BYTES,
    MAX_SPEC_DEPTH,
    MAX_SPEC_VALUES,
    MAX_STAGES,
    MAX_TILE_CONFIGS,
    MAX_TILE_DIM,
    Limit,
)
from cusync_gen.spec.loading import load_spec, parse_spec
from cusync_gen.spec.model import (
    ALIGNMENT,
    ATTENTION_GEMMS,
    DEFAULT_INSTRUCTION,
    DEFAULT_PIPELINE_STAGES,
    MAX_WARP_MN,
    MIN_PIPELINE_STAGES,
    SM80_INSTRUCTIONS,
    SM90_PINGPONG_TILE_M,
    SM90_PINGPONG_TILE_N,
    SM90_SCHEDULES,
    SM90_TILE_K,
    SM90_TILE_M,
    SM90_TILE_N,
    SWIGLU_BLOCK_THREADS,
    SWIGLU_COLS,
    SWIGLU_VECTOR,
    TARGETS,
    Arch,
    AttentionBlock,
    AttentionSpec,
    AttentionTiles,
    BLayout,
    ChainSpec,
    ConvChainSpec,
    ConvStageSpec,
    DispatchEntrySpec,
    DispatchSpec,
    Dtype,
    Epilogue,
    HeadDim,
    Mode,
    Op,
    Optimizations,
    Order,
    PipelineStages,
    Policy,
    PosInt,
    ReadsSpec,
    Schedule,
    Rows,
    SmCount,
    StageSpec,
    StridedCols,
    Target,
    TileConfigSpec,
    TileDim,
    TileSpec,
    Triple,
    attention_gemm_shape,
    consumers_of,
    conv_output_size,
    default_warp,
    edge_policy,
    output_policy,
    producer_width,
    resolve_defaults,
    spec_data,
    spec_hash,
    stage_index,
    config_spec,
    with_tiles,
)
from cusync_gen.spec.rules import (
    CPP_KEYWORDS,
    RESERVED_NAMES,
    check_attention_rules,
    check_conv_rules,
    check_rules,
    policy_problem,
    retarget,
)

__all__ = [
    "ALIGNMENT", "ATTENTION_GEMMS", "CPP_KEYWORDS", "DEFAULT_INSTRUCTION", "DEFAULT_PIPELINE_STAGES", "LIMITS",
    "MAX_DIM", "MAX_DISPATCH_ENTRIES", "MAX_GPU_NAME", "MAX_HEAD_DIM", "MAX_M", "MAX_NAME_LENGTH",
    "MAX_PIPELINE_STAGES", "MAX_SHOWN", "MAX_SMS", "MAX_SPEC_BYTES", "MAX_SPEC_DEPTH", "MAX_SPEC_VALUES",
    "MAX_STAGES", "MAX_TILE_CONFIGS", "MAX_TILE_DIM", "MAX_WARP_MN", "MIN_PIPELINE_STAGES", "RESERVED_NAMES",
    "SM80_INSTRUCTIONS", "SM90_PINGPONG_TILE_M", "SM90_PINGPONG_TILE_N", "SM90_SCHEDULES", "SM90_TILE_K", "SM90_TILE_M", "SM90_TILE_N", "SWIGLU_BLOCK_THREADS",
    "SWIGLU_COLS", "SWIGLU_VECTOR", "TARGETS",
    "Arch", "AttentionBlock", "AttentionSpec", "AttentionTiles", "BLayout", "ChainSpec", "ConvChainSpec", "ConvStageSpec", "DispatchEntrySpec",
    "DispatchSpec", "Dtype", "Epilogue", "HeadDim", "Limit", "Mode", "Op", "Optimizations", "Order",
    "PipelineStages", "Policy", "PosInt", "ReadsSpec", "Rows", "Schedule", "SmCount", "StageSpec", "StridedCols", "Target",
    "TileConfigSpec", "TileDim", "TileSpec", "Triple",
    "attention_gemm_shape", "check_attention_rules", "check_conv_rules", "check_rules", "conv_output_size", "consumers_of", "default_warp", "edge_policy",
    "load_spec", "output_policy", "parse_spec", "policy_problem", "producer_width", "resolve_defaults", "retarget", "spec_data",
    "config_spec", "spec_hash", "stage_index", "with_tiles",
]
