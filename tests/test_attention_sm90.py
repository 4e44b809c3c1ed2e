"""The sm90 attention layer (`attention:` with `arch: sm90`): spec rules, the plan, validate, the nvcc
build of one example, and its GPU check (docs/attention.md, "sm90"). Goldens: test_golden.py."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import EXAMPLES_ATTENTION_SM90, REPO, gpu_present
from cusync_gen.attention_plan import AttentionShape
from cusync_gen.attention_sm90_plan import AttentionSm90Plan, make_attention_sm90_plan
from cusync_gen.cli import main
from cusync_gen.errors import SpecError
from cusync_gen.render import plan_of_spec, render_project
from cusync_gen.spec import AttentionSpec, load_spec, parse_spec

EXAMPLE_DIR = REPO / "cusync_gen" / "examples"


def example_data(name: str = "llama_attention_sm90") -> dict[str, Any]:
    return yaml.safe_load((EXAMPLE_DIR / f"{name}.yaml").read_text())


def plan_of(name: str = "llama_attention_sm90") -> AttentionSm90Plan:
    spec = load_spec(EXAMPLE_DIR / f"{name}.yaml")
    assert isinstance(spec, AttentionSpec)
    return make_attention_sm90_plan(spec)


def rejected(data: dict[str, Any]) -> SpecError:
    with pytest.raises(SpecError) as info:
        parse_spec(data)
    return info.value


# --- spec -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", EXAMPLES_ATTENTION_SM90)
def test_examples_plan_on_the_sm90_backend(name: str) -> None:
    plan = plan_of_spec(load_spec(EXAMPLE_DIR / f"{name}.yaml"))
    assert isinstance(plan, AttentionSm90Plan) and plan.backend == "attention_sm90"


@pytest.mark.parametrize(("edit", "field", "words"), [
    (lambda d: d["attention"].update(tiles=example_data("gpt3_attention")["attention"]["tiles"]), "attention.tiles",
     "picks its own tiles"),
    (lambda d: d["attention"].update(head_dim=72), "attention.head_dim", "multiples of 16 from 32 to 128"),
    (lambda d: d["attention"].update(head_dim=144), "attention.head_dim", "multiples of 16 from 32 to 128"),
    (lambda d: d["attention"].update(kv_heads=3), "attention.kv_heads", "does not divide"),
    (lambda d: d["attention"].update(heads=32, kv_heads=1), "attention.kv_heads", "above 16"),
    (lambda d: d["attention"].update(rotary_base=0.5), "attention.rotary_base", "greater than 1"),
    (lambda d: d["attention"].update(rotary_base=1e9), "attention.rotary_base", "100000000"),
    (lambda d: d["attention"].update(rotary="yes"), "attention.rotary", "true or false"),
    (lambda d: d["attention"].update(rotary_base="500000"), "attention.rotary_base", "without quotes"),
    (lambda d: d["attention"].update(rotary_base=True), "attention.rotary_base", "expected a finite number"),
    (lambda d: d["attention"].update(rotary_base=float("nan")), "attention.rotary_base", "expected a finite number"),
    (lambda d: d["attention"].update(rotary_base=1), "attention.rotary_base", "above 1.0"),
    (lambda d: d["attention"].update(kv_heads=0), "attention.kv_heads", "greater than 0"),
    (lambda d: d["attention"].update(hidden=8190), "attention.hidden", "multiple of 8"),
    (lambda d: d["attention"].update(kv_head=1), "attention.kv_head", "did you mean 'kv_heads'"),
])
def test_bad_sm90_specs_name_the_field(edit: Any, field: str, words: str) -> None:
    data = example_data()
    edit(data)
    err = rejected(data)
    assert err.field == field, err
    assert words.lower() in f"{err} {err.hint}".lower(), (err, err.hint)


def test_the_target_follows_the_arch_and_only_sm_90_builds_it() -> None:
    # An omitted target was sm_80 (the sm80 default), and the project then failed at CMake configure.
    data = example_data()
    del data["target"]
    assert parse_spec(data).target == "sm_90"
    err = rejected({**data, "target": "sm_80"})
    assert err.field == "target" and "builds only for sm_90" in str(err), err
    spec = load_spec(EXAMPLE_DIR / "llama_attention_sm90.yaml")
    with pytest.raises(SpecError, match="builds only for sm_90"):  # --target overrides, and is checked too
        plan_of_spec(spec, "sm_80")


def test_gqa_and_mha_and_bf16_plan() -> None:
    llama, gpt3 = plan_of("llama_attention_sm90"), plan_of("gpt3_attention_sm90")
    assert (llama.group, llama.fmha_heads, llama.qkv_width) == (8, 1, (8 + 2) * 128)
    assert (gpt3.group, gpt3.fmha_heads, gpt3.qkv_width) == (1, 12, 3 * 12 * 128)
    assert llama.dtype.value == "bf16" and llama.rotary and not gpt3.rotary
    header = render_project(llama)["include/llama_attention_sm90.h"]
    assert "cutlass::bfloat16_t" in header and "kKvHeads = 1;" in header and "kRotary = true;" in header


def test_several_kv_heads_share_k_and_v_across_each_group() -> None:
    """1 < kv_heads < heads (llama3: 32 / 8): the FMHA runs every query head with (batch, head) = (KV head,
    query head of its group) and K/V shared through a static zero stride, one launch per sequence."""
    plan = plan_of("llama3_attention_sm90")
    assert (plan.group, plan.kv_heads, plan.packs_rows, plan.qkv_width) == (4, 8, False, (32 + 16) * 128)
    assert plan_of("llama_attention_sm90").packs_rows and plan_of("gpt3_attention_sm90").packs_rows
    prompt = plan.describe(AttentionShape(3, 1000, 0))
    assert "FMHA 3 launch(es) of 8 x 8 x 4 CTAs (1000 query rows, 1000 keys" in prompt
    assert "decode 2 x 8 x 2 CTAs (512 keys, 4 heads each)" in plan.describe(AttentionShape(2, 1, 1000))
    files = render_project(plan)
    kernels, layer = files["include/cusync/attention_sm90/kernels.cuh"], files["include/cusync/attention_sm90/layer.cuh"]
    assert "using StrideKVShared = cute::tuple<int, cute::_1, cute::tuple<int, cute::_0>>;" in kernels
    assert "kPackRows = kKvHeads == 1 || kGroup == 1" in layer and "kKvHeads = 8;" in files["include/llama3_attention_sm90.h"]
    # prompts whose sequences hold different caches: a host array, one FMHA launch per sequence
    assert "int const* cache_tokens_of = nullptr;" in layer and "keys = s.cache_of(seq) + t" in layer
    assert "p:3x200+0/511/4097" in files["bench/attention_sm90_bench.cuh"]
    # and different numbers of new tokens (varlen): rows one sequence after another, rope told where each starts
    assert "int const* new_tokens_of = nullptr;" in layer and "int const* seq_start = nullptr;" in layer
    assert "sequence_of_row(row, new_tokens, seq_start, batch)" in kernels
    assert "p:3x7/200/1000+0" in files["bench/attention_sm90_bench.cuh"]
    # the per-sequence launches run side by side: forked to the layer's streams, always joined back
    assert "kSequenceStreams = 4;" in layer and "cudaStreamWaitEvent(stream, joins_[i], 0)" in layer


@pytest.mark.parametrize(("head_dim", "tile"), [(32, 64), (48, 64), (64, 64), (80, 128), (96, 96), (112, 128), (128, 128)])
def test_head_widths_take_the_fmha_tile_that_covers_them(head_dim: int, tile: int) -> None:
    """Multiples of 16 from 32 to 128: a 64- or 128-wide FMHA tile, the head zero-filled past its width."""
    data = example_data("llama3_attention_sm90")
    data["attention"].update(head_dim=head_dim)
    plan = plan_of_spec(parse_spec(data))
    assert isinstance(plan, AttentionSm90Plan) and plan.fmha_tile == (128, 128, tile)
    files = render_project(plan)
    assert f"kHeadDim = {head_dim};" in files["include/llama3_attention_sm90.h"]
    assert "kTileDim = kHeadDim <= 64 ? 64 : kHeadDim % 32 == 0 ? kHeadDim : 128;" in files["include/cusync/attention_sm90/kernels.cuh"]
    assert "kSimtDecode = kDecodeThreads % kHeadDim == 0;" in files["include/cusync/attention_sm90/layer.cuh"]


def test_describe_picks_fmha_for_prompts_and_decode_for_steps() -> None:
    plan = plan_of()
    prompt = plan.describe(AttentionShape(1, 1000, 0))
    assert "FMHA 63 x 1 x 1 CTAs (8000 query rows, 1000 keys)" in prompt
    step = plan.describe(AttentionShape(32, 1, 4095))
    assert "decode 16 x 1 x 32 CTAs (256 keys" in step and "combine 8 x 32" in step


def test_decode_split_is_fixed_per_layer_and_fills_the_sms_at_batch_8() -> None:
    """The split (keys per decode CTA) comes from the layer alone, never from a run's batch (bitwise
    batch invariance), and is whole 64-key ring stages; llama (1 KV head) 256 keys, gpt3 (12) 512."""
    from cusync_gen.attention_sm90_plan import DECODE_CTAS_PER_SM, DECODE_STAGE_KEYS
    llama = plan_of()
    gpt3 = plan_of_spec(parse_spec(yaml.safe_load((EXAMPLE_DIR / "gpt3_attention_sm90.yaml").read_text())))
    assert (llama.decode_split, gpt3.decode_split) == (256, 512)
    for plan in (llama, gpt3):
        assert plan.decode_mma and plan.decode_split % DECODE_STAGE_KEYS == 0
        assert 8 * plan.kv_heads * (16384 // plan.decode_split) >= DECODE_CTAS_PER_SM * plan.sms
        for batch in (1, 8, 64):
            assert f"({plan.decode_split} keys" in plan.describe(AttentionShape(batch, 1, 4095))


def test_old_sm80_spec_keeps_its_hash() -> None:
    """The new keys at their defaults leave an sm80 spec's hash, and so its generated files, unchanged."""
    data = yaml.safe_load((EXAMPLE_DIR / "gpt3_attention.yaml").read_text())
    a = parse_spec(data)
    data["attention"].update(rotary=False, rotary_base=10000.0)
    b = parse_spec(data)
    assert plan_of_spec(a).spec_hash == plan_of_spec(b).spec_hash


def test_validate_explains_the_layer(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["validate", str(EXAMPLE_DIR / "llama_attention_sm90.yaml"), "--m", "1", "--batch", "4", "--cache", "511"])
    assert info.value.code in (0, None)
    out = capsys.readouterr().out
    assert "generation step" in out and "back to back" in out


def test_layer_autotune_times_both_gemms_in_the_layer() -> None:
    """Layer::autotune picks qkv's and proj's cuBLASLt algorithms by timing the whole layer (the sm90
    runtime's time_modes, shipped with the project), through LtContext's select_stage: each GEMM is a stage
    of the context; the bench tunes by default under --time and checks the timed graph bitwise."""
    files = render_project(plan_of())
    assert "include/cusync/time_modes.h" in files
    layer = files["include/cusync/attention_sm90/layer.cuh"]
    assert '#include "cusync/time_modes.h"' in layer
    assert "Status autotune(Shape const& s, Buffers const& b, cudaStream_t stream" in layer
    assert "lt->stage = kLtStageQkv;" in layer and "lt->stage = kLtStageProj;" in layer
    assert "time_modes(run_candidate, candidates, n, rounds, stream" in layer
    assert "lt->select_stage = stage_id, lt->select_candidate = k;" in layer
    bench = files["bench/attention_sm90_bench.cuh"]
    assert '"--no-autotune"' in bench and "autotune = do_time ? 1 : 0;" in bench
    assert "layer.autotune(s, b, stream, autotune_rounds" in bench and "time_bitwise" in bench
    # every row count is tuned in a pass before the first shape is checked or timed
    assert bench.index("/*tune_only=*/true") < bench.index("failures += run_shape(layer, sa, w_qkv, w_o, stream, preheated);")
    lt = files["include/cusync/sm90/cublaslt.cuh"]
    assert "CUBLASLT_ALGO_CONFIG_SPLITK_NUM" in lt and "ctx->stage_splitk[ctx->stage]" in lt
    assert "stage_reduction" in files["include/cusync/sm90/cublaslt_context.h"]


def test_prompt_attention_offers_three_schedules() -> None:
    files = render_project(plan_of("gpt3_attention_sm90"))
    kernels = files["include/cusync/attention_sm90/kernels.cuh"]
    assert "enum class FmhaSchedule { kCooperative, kHeaviestFirst, kPingpong };" in kernels
    assert "KernelTmaWarpSpecializedPingpong" in kernels and "gridDim.x - 1u - launch / heads_batches" in kernels
    layer = files["include/cusync/attention_sm90/layer.cuh"]
    assert "prompt_on<PromptPingpong>" in layer and "hw.sm_count = sm_count_;" in layer
    assert "prompt_on<PromptHeaviestFirst>" in layer and "bool fmha_heaviest_first = true;" in layer
    bench = files["bench/attention_sm90_bench.cuh"]
    assert '"--fmha-heaviest-first"' in bench


def test_results_page_ends_with_geomean_and_min(tmp_path: Path) -> None:
    """scripts/attention_sm90_results.py: the algorithm and ping-pong columns, and the two last lines."""
    import importlib.util
    import json
    spec = importlib.util.spec_from_file_location("results", REPO / "scripts" / "attention_sm90_results.py")
    assert spec is not None and spec.loader is not None
    results = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(results)
    base = {"mode": "prompt", "batch": 1, "tokens": 4096, "cache": 0, "qkv_us": 600.0, "rope_us": 20.0,
            "attention_us": 150.0, "proj_us": 240.0}
    ours = [dict(base, shape="p:1x4096+0", layer_us=1000.0, qkv_algo=[3, 1, 0], proj_algo=[0, 2, 1]),
            dict(base, shape="g:8+512", mode="generation", batch=8, tokens=1, cache=512, layer_us=50.0,
                 qkv_algo=[1, 1, 0], proj_algo=[0, 1, 0])]
    (tmp_path / "time-gpt3.jsonl").write_text("".join(json.dumps(d) + "\n" for d in ours))
    (tmp_path / "torch-gpt3.jsonl").write_text(json.dumps({"shape": "p:1x4096+0", "torch_us": 950.0}) + "\n" +
                                               json.dumps({"shape": "g:8+512", "torch_us": 60.0}) + "\n")
    (tmp_path / "time-pingpong-gpt3.jsonl").write_text(json.dumps(dict(ours[0], attention_us=140.0)) + "\n")
    import sys
    argv, sys.argv = sys.argv, ["attention_sm90_results.py", str(tmp_path)]
    try:
        import contextlib
        import io
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            results.main()
    finally:
        sys.argv = argv
    page = buf.getvalue().strip().splitlines()
    assert "| p:1x4096+0 |" in "\n".join(page) and "| 140.0 | 3/0s |" in "\n".join(page)
    assert "| 1/0 |" in "\n".join(page)
    assert page[-2:] == ["attention geomean over PyTorch: 1.07x", "attention min over PyTorch: 0.95x"]


# --- nvcc and GPU ---------------------------------------------------------------------------------

def _build(name: str, tmp_path: Path, cutlass_dir: Path) -> Path:
    cmake, nvcc = shutil.which("cmake"), shutil.which("nvcc")
    if cmake is None or nvcc is None:
        pytest.skip("cmake or nvcc not found")
    build = tmp_path / "build"
    configure = [cmake, "-S", str(REPO / "generated" / name), "-B", str(build), f"-DCUTLASS_DIR={cutlass_dir}",
                 "-DCMAKE_CUDA_ARCHITECTURES=90a", f"-DCMAKE_CUDA_COMPILER={nvcc}"]
    out = subprocess.run(configure, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    out = subprocess.run([cmake, "--build", str(build), "-j", str(os.cpu_count() or 2)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    return build / f"{name}_bench"


@pytest.mark.nvcc
def test_llama_attention_sm90_compiles(tmp_path: Path, cutlass_dir: Path) -> None:
    """One translation unit (FMHA, decode kernels, cuBLASLt GEMMs, bench): about 3 minutes on 2 cores.
    gpt3_attention_sm90 is the same code with other constants (G = 1, fp16, no rotary)."""
    assert _build("llama_attention_sm90", tmp_path, cutlass_dir).is_file()


@pytest.mark.nvcc
def test_llama3_attention_sm90_compiles(tmp_path: Path, cutlass_dir: Path) -> None:
    """The FMHA with K and V shared across each group's query heads (several KV heads): about 3 minutes."""
    assert _build("llama3_attention_sm90", tmp_path, cutlass_dir).is_file()


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_present(), reason="no GPU")
def test_llama3_attention_sm90_checks_on_the_gpu(tmp_path: Path, cutlass_dir: Path) -> None:
    """Several KV heads, and prompts and steps whose sequences hold different caches."""
    bench = _build("llama3_attention_sm90", tmp_path, cutlass_dir)
    shapes = ["p:1x7+1", "p:3x200+0/511/4097", "p:2x7+1/0", "g:3+0/511/4097"]
    out = subprocess.run([str(bench), "--check", *shapes], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert out.stdout.count('"ok": true') == len(shapes), out.stdout


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_present(), reason="no GPU")
def test_llama_attention_sm90_checks_on_the_gpu(tmp_path: Path, cutlass_dir: Path) -> None:
    bench = _build("llama_attention_sm90", tmp_path, cutlass_dir)
    out = subprocess.run([str(bench), "--check", "p:1x7+1", "p:1x200+511", "g:3+129", "g:2+4097"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert out.stdout.count('"ok": true') == 4, out.stdout
