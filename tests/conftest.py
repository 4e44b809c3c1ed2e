"""Test tiers: plain unit tests run everywhere; `nvcc` tests compile CUDA (slow, no GPU needed);
`gpu` tests build and run generated projects and are skipped where no CUDA device is visible."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES_SM80 = ("two_gemm", "gpt3_mlp", "llama_mlp", "llama_mlp_split")
EXAMPLES_SM90 = ("two_gemm_sm90", "gpt3_mlp_sm90", "llama_mlp_sm90", "llama_mlp_fused_sm90")
EXAMPLES_GEMM = EXAMPLES_SM80 + EXAMPLES_SM90
EXAMPLES_ATTENTION = ("gpt3_attention", "llama_attention")
EXAMPLES_ATTENTION_SM90 = ("gpt3_attention_sm90", "llama_attention_sm90", "llama3_attention_sm90")  # tests/test_attention_sm90.py
EXAMPLES = EXAMPLES_GEMM + EXAMPLES_ATTENTION
EXAMPLES_CONV = ("resnet_block", "vgg_block", "bottleneck_block")  # conv chains: tests/test_conv.py
EXAMPLES_CONV_SM90 = ("resnet_block_sm90", "vgg_block_sm90", "bottleneck_block_sm90")  # their sm90 kernels


def gpu_present() -> bool:
    """A CUDA device is visible to nvidia-smi."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if gpu_present():
        return
    skip = pytest.mark.skip(reason="no CUDA device (gpu tests run on the GPU machine: pytest -m gpu)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def cutlass_for_tests() -> Path | None:
    """The CUTLASS the tests build against, found as the CLI finds it (build.find_cutlass): $CUTLASS_DIR,
    else third_party/cutlass. None when neither is there; a $CUTLASS_DIR without CUTLASS's headers is an
    error (ToolError), as in the CLI, rather than a silent skip of every test that needs it."""
    from cusync_gen import build
    from cusync_gen.errors import ToolError

    if not os.environ.get("CUTLASS_DIR"):
        fetched = REPO / "third_party" / "cutlass"
        return fetched if (fetched / "include" / "cutlass" / "cutlass.h").is_file() else None
    try:
        return build.find_cutlass()
    except ToolError as err:
        pytest.fail(f"{err.message} ({err.hint})", pytrace=False)


@pytest.fixture(scope="session")
def cutlass_dir() -> Path:
    path = cutlass_for_tests()
    if path is None:
        pytest.skip("CUTLASS headers missing: run `cusync-gen fetch-cutlass` or set CUTLASS_DIR")
    return path


def library_link_flags(build_dir: Path) -> list[str]:
    """What a hand-written link of lib<name>.a needs besides it: -lcublasLt where the sm90 library was
    built with its cuBLASLt mode (a link-only dependency CMake adds for its own targets)."""
    for flags in [build_dir / "build.ninja", *build_dir.glob("CMakeFiles/*/flags.make")]:
        if flags.exists() and "CUSYNC_HAVE_CUBLASLT" in flags.read_text(errors="replace"):
            return ["-lcublasLt"]
    return []


def epoch_wrap_header(name: str, into: Path) -> Path:
    """chain_under_test.h for tests/runtime/epoch_wrap.cu and api_smoke.cu (a chain gemm1 -> gemm2): the
    chain's testing and C headers, namespace, class, widths and C prefix. Returns the folder to put on the
    include path."""
    from cusync_gen.plan import make_plan
    from cusync_gen.spec import load_spec

    plan = make_plan(load_spec(REPO / "cusync_gen" / "examples" / f"{name}.yaml"))
    gemm1, gemm2 = plan.stages
    into.mkdir(parents=True, exist_ok=True)
    (into / "chain_under_test.h").write_text(
        f'#include "{name}_testing.h"\n#include "{name}_c.h"\n#define CHAIN_NS {name}\n'
        f"#define CHAIN_CLASS {plan.class_name}\n#define INPUT_WIDTH {gemm1.k}\n#define GEMM1_N {gemm1.n}\n"
        f"#define GEMM2_N {gemm2.n}\n#define C_FN(x) {name}_##x\n#define GEMM1_WEIGHT_N {gemm1.gemm_n}\n"
        + ("#define CHAIN_SM90 1\n" if plan.arch.value == "sm90" else "")
        + ("#define CHAIN_BF16 1\n" if plan.dtype.value == "bf16" else "")
        + ("#define GEMM1_GATED 1\n" if gemm1.gated else ""))
    return into


def embed_header(name: str, into: Path, spec: Path | None = None) -> Path:
    """chain_under_test.h for tests/runtime/embed_api.cu (any GEMM chain): the chain's testing and C
    headers, namespace, class, C prefix, its buffers CHAIN_BUFFERS(X) as X(field, rows (0: M), cols, input),
    its GEMMs CHAIN_GEMMS(X) as X(stage, n, k) and its biases CHAIN_BIASES(X) as X(stage, n); CHAIN_LAST_BIAS
    names the last stage where it is an identity GEMM with a bias. `spec`: another spec than the example's
    (a bias variant, conftest.bias_spec). Returns the folder to put on the include path."""
    from cusync_gen.backends.gemm_chain import buffers, stage_operands
    from cusync_gen.plan import make_plan
    from cusync_gen.spec import load_spec

    plan = make_plan(load_spec(spec or REPO / "cusync_gen" / "examples" / f"{name}.yaml"))
    name = plan.name
    weights = {o.b.field: (plan.stages[i].k if plan.stages[i].b_layout.value == "row" else plan.stages[i].gemm_n)
               for i, o in enumerate(stage_operands(plan)) if o.gemm and o.b is not None}
    rows = " ".join(f"X({b.field}, {weights.get(b.field, 0)}, {b.cols}, {int(b.const)})" for b in buffers(plan))
    gemms = [(s.name, s.n, s.k) for s in plan.stages if s.op.value == "gemm"]
    into.mkdir(parents=True, exist_ok=True)
    (into / "chain_under_test.h").write_text(
        f'#include "{name}_testing.h"\n#include "{name}_c.h"\n#define CHAIN_NS {name}\n'
        f"#define CHAIN_CLASS {plan.class_name}\n#define C_FN(x) {name}_##x\n"
        f"#define CHAIN_BUFFERS(X) {rows}\n"
        f"#define CHAIN_GEMMS(X) {' '.join(f'X({n}, {nn}, {k})' for n, nn, k in gemms)}\n"
        f"#define FIRST_GEMM_N_FIELD {gemms[0][0]}_n\n#define FIRST_GEMM_N {gemms[0][1]}\n"
        f"#define CHAIN_BIASES(X) {' '.join(f'X({s.name}, {s.n})' for s in plan.stages if s.bias)}\n"
        + (f"#define CHAIN_LAST_BIAS 1\n#define CHAIN_LAST_BIAS_FIELD {last.name}_bias\n#define CHAIN_LAST_N {last.n}\n"
           if (last := plan.stages[-1]).bias and last.epilogue.value == "identity" else "")
        + ("#define CHAIN_SM90 1\n" if plan.arch.value == "sm90" else ""))
    return into


def bias_spec(name: str, into: Path) -> Path:
    """A shipped example with `bias: true` on every GEMM stage (issue 12 item 5), written into `into` as
    `<name>_bias.yaml` (the chain is renamed too). Returns the spec's path."""
    import yaml

    data = yaml.safe_load((REPO / "cusync_gen" / "examples" / f"{name}.yaml").read_text())
    data["name"] = f"{name}_bias"
    for stage in data["stages"]:
        if stage["op"] == "gemm":
            stage["bias"] = True
    into.mkdir(parents=True, exist_ok=True)
    path = into / f"{name}_bias.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def pingpong_spec(name: str, into: Path, mixed: bool = False) -> Path:
    """A shipped sm90 example on the synced ping-pong kernel (issue 10 part 2), written into `into` as
    `<name>_pp.yaml`. Every GEMM stage takes 128x128x64 ping-pong tiles and the example's own tile
    configurations are dropped; with `mixed`, the example's tiles stay (cooperative) for large M and one
    configuration switches every GEMM to ping-pong up to M = 1536, so one binary runs both schedules."""
    import yaml

    data = yaml.safe_load((REPO / "cusync_gen" / "examples" / f"{name}.yaml").read_text())
    data["name"] = f"{name}_pp"
    gemms = [stage["name"] for stage in data["stages"] if stage["op"] == "gemm"]
    data.pop("tile_configs", None)
    if mixed:
        data["tile_configs"] = [{"m_max": 1536, "tiles": {g: [128, 128, 64] for g in gemms},
                                 "schedules": {g: "pingpong" for g in gemms}}]
    else:
        for stage in data["stages"]:
            if stage["op"] == "gemm":
                stage["tile"] = {"threadblock": [128, 128, 64], "schedule": "pingpong"}
    into.mkdir(parents=True, exist_ok=True)
    path = into / f"{name}_pp.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
