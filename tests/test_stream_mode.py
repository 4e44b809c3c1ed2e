"""Run() mode stream (optimizations.stream_weights, cusync/sm90/stream_mode.h): which chains the spec's rules let
ask for it, what validate says of it, run()'s rule with it (the Python mirror of Chain::mode()), and how tune
counts it and cuts a dispatch table around its 64-row limit. The generated library's side is
tests/host_api/stream_mode.cpp (test_host_api.py); its kernel compiles in test_compile.py."""
from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from conftest import REPO
from cusync_gen import tune
from cusync_gen.errors import SpecError
from cusync_gen.plan import make_plan
from cusync_gen.spec.loading import parse_spec
from cusync_gen.spec.model import STREAM_MAX_M, Mode

SPEC = REPO / "tests" / "data" / "decode_stream_sm90.yaml"


def data() -> dict[str, Any]:
    return yaml.safe_load(SPEC.read_text())


def field_of(spec: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as err:
        make_plan(parse_spec(spec))
    return err.value.field


def test_a_two_gemm_sm90_chain_takes_the_mode() -> None:
    plan = make_plan(parse_spec(data()))
    assert plan.stream_problem is None and plan.optimizations.stream_weights
    # Legal, but without a measured table run() does not take it (slower than cuBLASLt on the H200, NOTES d12).
    assert all(plan.run_mode(m)[0] is not Mode.STREAM for m in (1, STREAM_MAX_M, STREAM_MAX_M + 1))
    assert "stream_weights      on: legal: run() mode stream at M <= 64 where a measured table" in plan.describe(1)
    assert plan.json_at(1)["optimizations"]["stream_weights"]["legal"] is True


def test_without_the_key_the_mode_is_legal_but_off() -> None:
    spec = data()
    del spec["optimizations"]
    plan = make_plan(parse_spec(spec))
    assert plan.stream_problem is None and plan.run_mode(1)[0] is not Mode.STREAM
    assert "stream_weights      off: legal" in plan.describe(1)


@pytest.mark.parametrize(("change", "field"), [
    (lambda s: (s.update(arch="sm80", target="sm_80"), s["stages"][0].update(epilogue="gelu")),
     "optimizations.stream_weights"),
    (lambda s: s["stages"][1].update(b_layout="col"), "stages[1].b_layout"),
    (lambda s: s["stages"][1].update(n=1004), "stages[1].n"),
    (lambda s: s["stages"].append({**s["stages"][1], "name": "third"}),
     "optimizations.stream_weights"),
    (lambda s: s["stages"][1].update(a="input", k=1088, sync=None), "optimizations.stream_weights"),
])
def test_chains_the_kernel_cannot_take_are_refused_by_field(change: Any, field: str) -> None:
    spec = copy.deepcopy(data())
    change(spec)
    assert field_of(spec) == field


def test_a_dispatch_entry_of_mode_stream_needs_the_key_and_ends_by_64_rows() -> None:
    spec = data()
    spec["dispatch"] = {"gpu": "NVIDIA H200", "sms": 132, "modes": [{"m_max": 64, "mode": "stream"},
                                                                      {"m_max": 4096, "mode": "cublaslt"}]}
    plan = make_plan(parse_spec(spec))
    assert plan.run_mode(64, 132)[0] is Mode.STREAM and plan.run_mode(65, 132)[0] is Mode.CUBLASLT
    spec["dispatch"]["modes"][0]["m_max"] = 128
    assert field_of(spec) == "dispatch.modes[0].m_max"
    spec["dispatch"]["modes"][0]["m_max"] = 64
    del spec["optimizations"]
    assert field_of(spec) == "dispatch.modes[0].mode"


def test_the_shipped_sm90_mlp_chains_could_take_it() -> None:
    """The shipped sm90 MLP chains keep the mode off (it costs as much memory again as the weights), but the rules
    let each turn it on, the SwiGLU in a stage of its own included (fused into gemm1's epilogue); an sm80 chain
    cannot."""
    from cusync_gen.spec.loading import load_spec

    for name in ("gpt3_mlp_sm90", "llama_mlp_fused_sm90", "llama_mlp_sm90", "two_gemm_sm90"):
        assert make_plan(load_spec(REPO / "cusync_gen" / "examples" / f"{name}.yaml")).stream_problem is None
    split = make_plan(load_spec(REPO / "cusync_gen" / "examples" / "llama_mlp_split.yaml"))
    assert split.stream_problem is not None and "sm90" in split.stream_problem


def test_a_swiglu_stage_of_its_own_needs_a_plain_first_gemm() -> None:
    spec = yaml.safe_load((REPO / "cusync_gen" / "examples" / "llama_mlp_sm90.yaml").read_text())
    spec["optimizations"] = {"stream_weights": True}
    del spec["dispatch"]
    plan = make_plan(parse_spec(spec))
    assert plan.stream_problem is None and "swiglu stage in the first one's epilogue" in plan.describe(1)
    spec["stages"][0]["epilogue"] = "relu"
    assert field_of(spec) == "stages[0].epilogue"
    spec["stages"][0]["epilogue"] = "identity"
    spec["stages"][0]["bias"] = True
    assert field_of(spec) == "stages[0].bias"


def test_tune_counts_the_mode_when_checked_and_cuts_its_entry_at_64_rows() -> None:
    row = {"overlapped_us": 100.0, "stock_pdl_us": 99.0, "cublaslt_us": 60.0, "cublaslt_rel_diff": 1e-4,
           "stream_us": 50.0, "stream_rel_diff": 2e-4}
    assert tune.best_mode(row) == ("stream", 50.0)
    assert tune.best_mode({**row, "stream_rel_diff": 0.5}) == ("cublaslt", 60.0)
    assert tune.best_mode({**row, "stream_repeatable": False}) == ("cublaslt", 60.0)
    assert tune.best_mode({**row, "stream_sync_ok": False}) == ("cublaslt", 60.0)
    assert tune.best_mode({**row, "stream_us": -1.0}) == ("cublaslt", 60.0)  # not available at this M
    winners = {m: {"gpu": "NVIDIA H200", "sms": 132, "stock_pdl_us": 1.0, "mode": mode}
               for m, mode in ((16, "stream"), (64, "stream"), (128, "cublaslt"))}
    assert tune.dispatch_table(winners)["modes"] == [{"m_max": 64, "mode": "stream"},
                                                      {"m_max": 128, "mode": "cublaslt"}]
