"""The one table from our enums to their C++ spellings (CUTLASS's DataTypeTag/LayoutTag habit).

Templates use these as Jinja filters, so no template ever spells a C++ type from a spec string.
"""

from __future__ import annotations

from typing import Callable

from cusync_gen.spec.model import BLayout, Dtype, Epilogue, Mode, Order, Policy, Schedule
from cusync_gen.spec.policies import POLICIES

CUTLASS_ELEMENT: dict[Dtype, str] = {Dtype.FP16: "cutlass::half_t", Dtype.BF16: "cutlass::bfloat16_t"}
CUDA_ELEMENT: dict[Dtype, str] = {Dtype.FP16: "__half", Dtype.BF16: "__nv_bfloat16"}
CUDA_HEADER: dict[Dtype, str] = {Dtype.FP16: "cuda_fp16.h", Dtype.BF16: "cuda_bf16.h"}
ATEN_DTYPE: dict[Dtype, str] = {Dtype.FP16: "at::kHalf", Dtype.BF16: "at::kBFloat16"}  # the --torch op (torch/)

EPILOGUE: dict[Epilogue, tuple[str, str]] = {  # functor template, header under cutlass/epilogue/thread/
    Epilogue.IDENTITY: ("cutlass::epilogue::thread::LinearCombination", "linear_combination.h"),
    Epilogue.RELU: ("cutlass::epilogue::thread::LinearCombinationRelu", "linear_combination_relu.h"),
    Epilogue.GELU: ("cutlass::epilogue::thread::LinearCombinationGELU", "linear_combination_gelu.h"),
    # CUTLASS has no LinearCombination alias for its tanh GELU (GELU_taylor): cusync/sm80/gemm.cuh defines it
    Epilogue.GELU_TANH: ("cusync::sm80::LinearCombinationGeluTanh", "linear_combination_generic.h"),
    Epilogue.SILU: ("cutlass::epilogue::thread::LinearCombinationSilu", "linear_combination_silu.h"),
}
ACTIVATION: dict[Epilogue, str] = {  # sm90: the activation of CUTLASS's LinCombEltAct fusion (EVT)
    Epilogue.IDENTITY: "cutlass::epilogue::thread::Identity",
    Epilogue.RELU: "cutlass::epilogue::thread::ReLu",
    Epilogue.GELU: "cutlass::epilogue::thread::GELU",
    Epilogue.GELU_TANH: "cutlass::epilogue::thread::GELU_taylor",  # tanh GELU (CUTLASS's name for it)
    Epilogue.SILU: "cutlass::epilogue::thread::SiLu",
    Epilogue.SWIGLU: "cutlass::epilogue::thread::SiLu",  # of the gate (GatedEpilogue: silu(gate) * up)
}
BENCH_ACTIVATION: dict[Epilogue, str] = {
    Epilogue.IDENTITY: "bench::Activation::kIdentity",
    Epilogue.RELU: "bench::Activation::kRelu",
    Epilogue.GELU: "bench::Activation::kGelu",
    Epilogue.SILU: "bench::Activation::kSilu",
    Epilogue.SWIGLU: "bench::Activation::kSwiglu",
    Epilogue.GELU_TANH: "bench::Activation::kGeluTanh",
}
#: run() mode stream's epilogue (cusync::sm90::StreamAct in cusync/sm90/stream_mode.h); -1: none it applies.
STREAM_ACT: dict[Epilogue, int] = {Epilogue.IDENTITY: 0, Epilogue.RELU: 1, Epilogue.GELU: 2, Epilogue.SWIGLU: 3,
                                   Epilogue.GELU_TANH: 4, Epilogue.SILU: 5}
LAYOUT_B: dict[BLayout, str] = {BLayout.ROW: "cutlass::layout::RowMajor", BLayout.COL: "cutlass::layout::ColumnMajor"}
#: From the policy table (spec.policies, where each policy has its one home); no input edge is kNone.
POLICY: dict[Policy | None, str] = {None: POLICIES[Policy.NONE].cpp, **{p: info.cpp for p, info in POLICIES.items()}}
ORDER: dict[Order, str] = {
    Order.ROW_MAJOR: "cusync::TileOrder::kRowMajor",
    Order.COLUMN_MAJOR: "cusync::TileOrder::kColumnMajor",
    Order.BANDED: "cusync::TileOrder::kBanded",
    Order.COLUMN_BANDED: "cusync::TileOrder::kColumnBanded",
}
SCHEDULE: dict[Schedule, str] = {  # sm90: the synced GEMM's configuration (include/cusync/sm90/gemm.cuh)
    Schedule.COOPERATIVE: "cusync::sm90::GemmConfig",
    Schedule.PINGPONG: "cusync::sm90::SyncedPingpongConfig",
}
MODE: dict[Mode, str] = {
    Mode.OVERLAP: "cusync::Mode::kOverlap",
    Mode.STOCK: "cusync::Mode::kStock",
    Mode.STREAMK: "cusync::Mode::kStreamK",
    Mode.CLUSTER: "cusync::Mode::kCluster",
    Mode.PINGPONG: "cusync::Mode::kPingpong",
    Mode.CUBLASLT: "cusync::Mode::kCublasLt",
    Mode.STREAM: "cusync::Mode::kStream",
}


def cpp_string(value: str) -> str:
    """`value` as a C++ string literal; control characters have no place in what this is for."""
    if has_control_character(value):
        raise ValueError(f"control character in {value!r}: not written into C++")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def cpp_bool(value: bool) -> str:
    return "true" if value else "false"


def has_control_character(value: str) -> bool:
    return any(ord(c) < 0x20 or ord(c) == 0x7F for c in value)


def cmake_string(value: str) -> str:
    """`value` as the inside of a quoted CMake argument ("..."): backslash, quote and `$` escaped, so it
    reads back as exactly `value` and can neither end the string nor reference a variable. Control
    characters (a newline) have no place in the paths and names this is for: ValueError."""
    if has_control_character(value):
        raise ValueError(f"control character in {value!r}: not written into CMakeLists.txt")
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")


FILTERS: dict[str, Callable[..., str]] = {
    "cpp_element": CUTLASS_ELEMENT.__getitem__,
    "cpp_stream_act": lambda e: STREAM_ACT.get(Epilogue(e), -1),
    "cuda_element": CUDA_ELEMENT.__getitem__,
    "cuda_header": CUDA_HEADER.__getitem__,
    "aten_dtype": ATEN_DTYPE.__getitem__,
    "cpp_epilogue": lambda e: EPILOGUE[e][0],
    "cpp_epilogue_header": lambda e: EPILOGUE[e][1],
    "cpp_activation": ACTIVATION.__getitem__,
    "bench_activation": BENCH_ACTIVATION.__getitem__,
    "cpp_layout_b": LAYOUT_B.__getitem__,
    "cpp_policy": POLICY.__getitem__,
    "cpp_order": ORDER.__getitem__,
    "cpp_bool": cpp_bool,
    "cmake_string": cmake_string,
    "cpp_mode": MODE.__getitem__,
    "cpp_schedule": SCHEDULE.__getitem__,
    "cpp_string": cpp_string,
}
