"""The fused gated MLP (a GEMM with `epilogue: swiglu`, sm90): spec rules, plan numbers in output tiles,
the generated kernels and tables, the PyTorch op's weight roles. Correctness on the GPU: test_gpu.py
(llama_mlp_fused_sm90 in every mode and policy, and the interleaved weights following update() and
refresh_weights() in api_smoke.cu)."""

from __future__ import annotations

from typing import Any

import pytest

from cusync_gen.errors import SpecError
from cusync_gen.plan import make_plan
from cusync_gen.render import render_project
from cusync_gen.spec import load_spec, parse_spec
from cusync_gen.torch_plan import make_torch_plan
from cusync_gen.verify import verify

from conftest import REPO

FUSED = REPO / "cusync_gen" / "examples" / "llama_mlp_fused_sm90.yaml"


def fused(**change: Any) -> dict[str, Any]:
    data = load_spec(FUSED).model_dump(mode="json")
    data.update(change)
    return data


def test_sm80_refuses_the_gated_epilogue_and_says_how_to_write_it() -> None:
    data = load_spec(REPO / "cusync_gen" / "examples" / "two_gemm.yaml").model_dump(mode="json")
    data["stages"][0]["epilogue"] = "swiglu"
    with pytest.raises(SpecError) as info:
        make_plan(parse_spec(data))
    assert info.value.field == "stages[0].epilogue"
    assert "arch: sm90" in info.value.hint and "op: swiglu" in info.value.hint


def test_plan_counts_output_tiles() -> None:
    plan = make_plan(load_spec(FUSED))
    gemm1, gemm2 = plan.stages
    assert gemm1.gated and not gemm2.gated
    assert (gemm1.n, gemm1.gemm_n, gemm1.k) == (2816, 5632, 8192)
    for config, (tile_n, waits) in zip(plan.configs, ((64, 44), (128, 22))):
        g1, g2 = config.stages
        assert g1.tile.n == tile_n and g1.kernel_tile_n(g1.tile) == 2 * tile_n
        # gemm2 waits for every gemm1 tile of its rows: 2816 output columns in tiles of tile_n
        assert g2.input.wait_value == waits == 2816 // tile_n
        assert g1.grid(1024) == (8, waits)
    for m in (1, 200, 1000, 1536, 1537, 3000, 8192):  # every consumer read covered by a wait, in both configurations
        verify(plan, m)


def test_ping_pong_rule_counts_the_gemm_columns() -> None:
    plan = make_plan(load_spec(FUSED))
    mode, reason = plan.run_mode(1024, 132)
    assert "gemm1: 352" in reason  # 8 tile rows x 5632 / 128, not 2816 / 128


def test_generated_kernels_and_tables() -> None:
    files = render_project(make_plan(load_spec(FUSED)))
    synced = files["src/stage_gemm1.cu"]
    assert "cute::Shape<cute::_128, cute::_128, cute::_64>" in synced and "/*kGated=*/true" in synced
    assert "GemmProblem const problem{launch.m, 5632, 8192," in synced
    assert "interleave_gate_up(weights, ld, interleaved, 8192, 2816, false, stream)" in synced
    stock = files["src/stage_gemm1_stock.cu"]
    assert stock.count("/*kGated=*/true") == 5  # 2 configurations x (plain, clusters), ping-pong
    assert "combine_gated<cutlass::bfloat16_t, cutlass::epilogue::thread::SiLu>" in stock
    assert "kGated" not in files["src/stage_gemm2.cu"]
    chain = files["src/llama_mlp_fused_sm90.cu"]
    assert "kGemmGated[kNumStages] = { true, false }" in chain
    assert "kInterleave[kNumStages] = { &interleave_gemm1, nullptr }" in chain
    assert "Element const* gemm1_weight = nullptr;" in files["include/llama_mlp_fused_sm90.h"]
    assert "[8192, 5632] row-major, [gate | up]" in files["include/llama_mlp_fused_sm90.h"]
    assert "refresh_weights" in files["include/llama_mlp_fused_sm90_c.h"]


def test_torch_op_takes_gate_and_up_in_one_weight() -> None:
    tplan = make_torch_plan(make_plan(load_spec(FUSED)))
    assert tplan.mlp == "gated"
    w1, w2 = tplan.weights
    assert w1.roles == ("gate", "up") and w1.shape == (8192, 5632)
    assert w2.roles == ("down",) and w2.shape == (2816, 8192)


def test_a_gated_gemm_takes_no_bias() -> None:
    data = load_spec(FUSED).model_dump(mode="json")
    data["stages"][0]["bias"] = True
    with pytest.raises(SpecError) as info:
        make_plan(parse_spec(data))
    assert info.value.field == "stages[0].bias" and "op: swiglu" in info.value.hint


def test_gated_weights_are_2n_wide_for_the_leading_dimension_checks() -> None:
    files = render_project(make_plan(load_spec(FUSED)))
    chain = files["src/llama_mlp_fused_sm90.cu"]
    assert "p.b_cols[0] = 5632;" in chain and "p.d_cols[0] = 2816;" in chain
