"""The limits of a spec: the largest value of every number and name in it, and of a spec file itself.

One table; docs/spec-format.md ("Limits") lists the same rows, and a test keeps the two in step. The
model bounds its fields with these (`model.PosInt`, ...), the rules and the loader check the rest.
"""

from __future__ import annotations

from typing import NamedTuple

# The C++ side holds dimensions and tile counts in `int` (32 bits) and element offsets in int64_t
# (swiglu.cuh, softmax.cuh, the sm80 prefetch, CUTLASS 2.x LongIndex, CuTe's int64 strides). With
# M <= 2^20 and n, k <= 2^17, a stage's grid has at most ceil(2^20 / 16) * ceil(2^17 / 8) = 2^30 blocks
# (sm80 tiles are at least 16 x 8, a swiglu tile at least 4096 elements): within int32 and CUDA's
# gridDim.x limit of 2^31 - 1. An [M, n] tensor has up to 2^37 elements: int64 offsets, not int32.

MAX_STAGES = 16          # kMaxStages in templates/runtime/include/cusync/stage.cuh
MAX_DIM = 1 << 17        # n, k, hidden, heads * head_dim: 131072
MAX_M = 1 << 20          # rows at run time (--m), tile_configs m_max: 1048576
MAX_HEAD_DIM = 256
MAX_ROTARY_BASE = 100_000_000    # attention.rotary_base: LLaMA 3 uses 500000
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
MAX_BATCH = 4096          # conv chains: images per run (n)
MAX_IMAGE = 8192          # conv chains: image height and width (h, w)
MAX_CHANNELS = 8192       # conv chains: channels (c, k)
MAX_FILTER = 15           # conv chains: filter size (r, s), and padding
MAX_STRIDE = 8            # conv chains: stride and dilation


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
    Limit("attention.rotary_base", MAX_ROTARY_BASE, "the rotary frequency base (LLaMA 3: 500000); above 1"),
    Limit("tile values", MAX_TILE_DIM, "the largest tile either backend instantiates"),
    Limit("tile.stages", MAX_PIPELINE_STAGES, "the deepest sm80 pipeline CUTLASS's own kernels use"),
    Limit("sms", MAX_SMS, "more than any GPU has (H200: 132, B200: 148)"),
    Limit("tile_configs", MAX_TILE_CONFIGS, "entries; the library tries them in order at every run"),
    Limit("tile_configs[i].m_max", MAX_M, "as --m"),
    Limit("dispatch.modes", MAX_DISPATCH_ENTRIES, "entries of a measured dispatch table (m_max as --m)"),
    Limit("dispatch.gpu", MAX_GPU_NAME, "characters of the GPU name the table was measured on"),
    Limit("reads", MAX_DIM, "a sanity bound (reads must match the op's)"),
    Limit("name, stage names", MAX_NAME_LENGTH, "characters; they name files, C++ classes and CMake targets"),
    Limit("--m, --batch, --cache", MAX_M, "rows at run time (batch x new tokens for attention): the largest M "
          "the generated library is built for"),
    Limit("conv n", MAX_BATCH, "images per run (the largest batch the library is built for)"),
    Limit("conv h, w", MAX_IMAGE, "pixels per image side"),
    Limit("conv c, k", MAX_CHANNELS, "channels; the widest CNN layers use 2048 to 4096"),
    Limit("conv r, s, padding", MAX_FILTER, "filter taps per side (3x3 and 7x7 are the common ones)"),
    Limit("conv stride, dilation", MAX_STRIDE, "CNNs use 1 and 2"),
    Limit("spec file size", MAX_SPEC_BYTES, "bytes (1 MiB); a spec is a few KiB"),
    Limit("spec nesting", MAX_SPEC_DEPTH, "levels of mappings and lists; a spec has at most 5"),
    Limit("spec values", MAX_SPEC_VALUES, "mappings, lists and scalars, counting what each YAML alias repeats"),
)
