"""The Hopper backend's spec rules, plan numbers, run-time tile configurations and project layout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cusync_gen.cpp import SCHEDULE
from cusync_gen.errors import SpecError
from cusync_gen.plan import make_plan
from cusync_gen.render import output_files as project_files, render_project
from cusync_gen.spec import Arch, Schedule, load_spec, parse_spec

from conftest import REPO


def gemm(name: str, a: str, n: int, k: int, tb: list[int] | None = None, **extra: Any) -> dict[str, Any]:
    stage: dict[str, Any] = {"name": name, "op": "gemm", "a": a, "n": n, "k": k}
    stage["tile"] = {"threadblock": tb or [128, 256, 64]}
    stage.update(extra)
    return stage


def sm90(*stages: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"name": "h", "arch": "sm90", "target": "sm_90", "dtype": "fp16", **top, "stages": list(stages)}


def two(**top: Any) -> dict[str, Any]:
    return sm90(gemm("g1", "input", 1024, 1024), gemm("g2", "g1", 1024, 1024, sync="row"), **top)


def error(data: dict[str, Any]) -> SpecError:
    with pytest.raises(SpecError) as info:
        make_plan(parse_spec(data))
    return info.value


def test_sm90_defaults_and_plan_numbers() -> None:
    spec = parse_spec(two())
    assert spec.arch is Arch.SM90
    assert spec.stages[0].tile.schedule == "cooperative"
    plan = make_plan(spec)
    assert plan.cuda_arch == "90a"  # wgmma needs the architecture-specific target
    s = plan.stages[0]
    assert (s.tile.m, s.tile.n, s.tile.k, s.tile.threads, s.occupancy) == (128, 256, 64, 384, 1)
    assert s.grid(1000) == (8, 4)
    assert len(plan.configs) == 1 and plan.config_for(1).stages == plan.stages


@pytest.mark.parametrize(
    ("change", "field", "hint"),
    [
        (lambda d: d.update(target="sm_80"), "target", "target: sm_90"),
        (lambda d: d["stages"][0]["tile"].update(warp=[64, 64, 64]), "stages[0].tile.warp", "remove warp"),
        (lambda d: d["stages"][0]["tile"].update(stages=4), "stages[0].tile.stages", "remove stages"),
        (lambda d: d["stages"][0]["tile"].update(threadblock=[128, 96, 64]), "stages[0].tile.threadblock", "N in"),
        (lambda d: d["stages"][0]["tile"].update(threadblock=[64, 128, 64]), "stages[0].tile.threadblock", "M in"),
        (lambda d: d["stages"][0]["tile"].update(threadblock=[128, 128, 32]), "stages[0].tile.threadblock", "K in"),
        (lambda d: d["stages"][0]["tile"].update(cluster=[2, 1, 1]), "stages[0].tile.cluster", "remove cluster"),
        (lambda d: d["stages"][0]["tile"].update(schedule="interleaved"), "stages[0].tile.schedule", "pingpong"),
        # ping-pong: one math warp group holds a whole tile, so 128x256 (the default here) does not fit
        (lambda d: d["stages"][0]["tile"].update(schedule="pingpong"), "stages[0].tile.threadblock",
         "schedule: cooperative"),
        (lambda d: d["stages"][0]["tile"].update(schedule="pingpong", threadblock=[256, 128, 64]),
         "stages[0].tile.threadblock", "M in {128}"),
        # cooperative: two math warp groups hold at most 128 x 256 fp32 outputs (256x256 compiled to a 2 KB stack)
        (lambda d: d["stages"][0]["tile"].update(threadblock=[256, 256, 64]), "stages[0].tile.threadblock",
         "[128, 256, 64]"),
        (lambda d: d["stages"][1]["tile"].update(threadblock=[256, 192, 64]), "stages[1].tile.threadblock",
         "[128, 192, 64]"),
        (lambda d: d.update(optimizations={"avoid_wait_kernel": True}), "optimizations.avoid_wait_kernel", "remove"),
        (lambda d: d.update(optimizations={"reorder_tile_loads": True}), "optimizations.reorder_tile_loads", "remove"),
    ],
)
def test_sm90_rules_name_the_field(change: Any, field: str, hint: str) -> None:
    data = two()
    change(data)
    err = error(data)
    assert err.field == field
    assert hint in err.hint


def test_k_must_tile_on_sm90() -> None:
    err = error(sm90(gemm("g1", "input", 1024, 1000)))
    assert err.field == "stages[0].tile.threadblock" and "1024" in err.hint


def test_hints_for_a_missing_or_short_tile_show_a_hopper_tile() -> None:
    """A hint that suggests a tile suggests one the arch takes: the sm80 example's K of 32 is refused on sm90."""
    data = two()
    del data["stages"][0]["tile"]
    err = error(data)
    assert err.field == "stages[0].tile" and "[128, 256, 64]" in err.hint
    data["stages"][0]["tile"] = {"threadblock": [128, 256]}
    assert "[128, 256, 64]" in error(data).hint
    data = two(arch="sm80", target="sm_80")
    del data["stages"][0]["tile"]
    assert "[128, 128, 32]" in error(data).hint


def test_cluster_and_schedule_are_hopper_only() -> None:
    data = two(arch="sm80", target="sm_80")
    for s in data["stages"]:
        s["tile"] = {"threadblock": [128, 128, 32]}
    data["stages"][1]["tile"]["cluster"] = [1, 1, 1]
    err = error(data)
    assert err.field == "stages[1].tile.cluster" and "arch: sm90" in err.hint


def test_tile_configs_pick_by_m() -> None:
    plan = make_plan(parse_spec(two(tile_configs=[{"m_max": 512, "tiles": {"g1": [128, 128, 64], "g2": [128, 128, 64]}}])))
    assert [c.m_max for c in plan.configs] == [512, None]
    assert plan.config_for(512).stages[0].tile.n == 128
    assert plan.config_for(513).stages[0].tile.n == 256
    assert "M <= 512" in plan.describe(100)


@pytest.mark.parametrize(
    ("configs", "field", "text"),
    [
        ([{"m_max": 512, "tiles": {"nope": [128, 128, 64]}}], "tile_configs[0].tiles.nope", "unknown stage"),
        ([{"m_max": 512, "tiles": {}}, {"m_max": 256, "tiles": {}}], "tile_configs[1].m_max", "larger"),
        ([{"m_max": 512, "tiles": {"g1": [128, 96, 64]}}], "tile_configs[0]: stages[0].tile.threadblock", "N=96"),
        ([{"m_max": 512, "tiles": {}, "schedules": {"g3": "pingpong"}}], "tile_configs[0].schedules.g3", "unknown stage"),
        ([{"m_max": 512, "tiles": {}, "schedules": {"g1": "pingpong"}}], "tile_configs[0]: stages[0].tile.threadblock",
         "ping-pong"),
        ([{"m_max": 512, "tiles": {"g1": [128, 128, 64]}, "schedules": {"g1": "fast"}}],
         "tile_configs[0]: stages[0].tile.schedule", "not an sm90 kernel schedule"),
    ],
)
def test_tile_config_errors(configs: list[dict[str, Any]], field: str, text: str) -> None:
    err = error(two(tile_configs=configs))
    assert err.field == field
    assert text in err.message


def test_pingpong_schedule_plans_and_renders() -> None:
    """`schedule: pingpong` (issue 10 part 2): the plan carries it, explain names it, and the stage unit
    instantiates the synced ping-pong kernel; a tile configuration can switch the schedule per M."""
    pp = {"threadblock": [128, 128, 64], "schedule": "pingpong"}
    data = sm90(gemm("g1", "input", 1024, 1024), gemm("g2", "g1", 1024, 1024, sync="row"))
    data["stages"][0]["tile"] = dict(pp)
    plan = make_plan(parse_spec(data))
    assert [s.tile.schedule for s in plan.stages] == ["pingpong", "cooperative"]
    assert (plan.stages[0].tile.m, plan.stages[0].tile.n, plan.stages[0].tile.threads) == (128, 128, 384)
    assert "warp-specialized ping-pong" in plan.describe(1024)
    assert [s["tile"]["schedule"] for s in plan.json_at(1024)["stages"]] == ["pingpong", "cooperative"]  # validate --json
    files = render_project(plan)
    assert "SyncedPingpongConfig<" in files["src/stage_g1.cu"] and "GemmConfig<" not in files["src/stage_g1.cu"]
    assert "GemmConfig<" in files["src/stage_g2.cu"] and "SyncedPingpongConfig" not in files["src/stage_g2.cu"]
    # per M: ping-pong 128x128 up to M = 512, the spec's cooperative 128x256 above
    mixed = make_plan(parse_spec(two(tile_configs=[{"m_max": 512, "tiles": {"g1": [128, 128, 64]},
                                                    "schedules": {"g1": "pingpong"}}])))
    assert mixed.config_for(512).stages[0].tile.schedule == "pingpong"
    assert mixed.config_for(513).stages[0].tile.schedule == "cooperative"
    stage = render_project(mixed)["src/stage_g1.cu"]
    assert stage.index("Gemm0 = cusync::sm90::SyncedGemm<cusync::sm90::SyncedPingpongConfig<") < stage.index(
        "Gemm1 = cusync::sm90::SyncedGemm<cusync::sm90::GemmConfig<")
    # the spellings the stage unit uses are cpp.SCHEDULE's (the template spells them by the same test)
    assert (f"SyncedGemm<{SCHEDULE[Schedule.PINGPONG]}<" in files["src/stage_g1.cu"]
            and f"SyncedGemm<{SCHEDULE[Schedule.COOPERATIVE]}<" in files["src/stage_g2.cu"])
    # a schedule only where a kernel has one
    glu = load_spec(REPO / "cusync_gen" / "examples" / "llama_mlp_sm90.yaml").model_dump(mode="json")
    glu["tile_configs"] = [{"m_max": 512, "tiles": {}, "schedules": {"glu": "pingpong"}}]
    err = error(glu)
    assert err.field == "tile_configs[0].schedules.glu" and "remove glu" in err.hint


def test_tile_configs_are_sm90_only() -> None:
    data = two(arch="sm80", target="sm_80", tile_configs=[{"m_max": 64, "tiles": {}}])
    for s in data["stages"]:
        s["tile"] = {"threadblock": [128, 128, 32]}
    assert error(data).field == "tile_configs"


def test_a_config_is_checked_as_a_whole_chain() -> None:
    # glu's columns must equal gemm1's tile N for strided sync: a config changing only gemm1 breaks that
    data = load_spec(REPO / "cusync_gen" / "examples" / "llama_mlp_sm90.yaml").model_dump(mode="json")
    data["tile_configs"] = [{"m_max": 512, "tiles": {"gemm1": [128, 128, 64]}}]
    err = error(data)
    assert err.field.startswith("tile_configs[0]: stages[1]")


def test_sm90_project_layout() -> None:
    plan = make_plan(load_spec(REPO / "cusync_gen" / "examples" / "gpt3_mlp_sm90.yaml"))
    paths = [f.path for f in project_files(plan)]
    assert "include/cusync/sm90/ticket_scheduler.cuh" in paths and "bench/baselines.cuh" in paths
    assert "src/stage_gemm1_stock.cu" in paths and "src/stage_gemm2_stock.cu" in paths
    assert not any("/sm80/" in p for p in paths)
    files = render_project(plan)
    cmake = files["CMakeLists.txt"]
    assert "CUTLASS_ENABLE_GDC_FOR_SM90=1" in cmake and "set(CMAKE_CUDA_ARCHITECTURES 90a)" in cmake
    assert "CUDA::cublas" in cmake
    # both tile configurations are instantiated in every GEMM unit and dispatched on M
    stage = files["src/stage_gemm1.cu"]
    assert "Gemm0" in stage and "Gemm1" in stage and "case 1:" in stage
    assert "kConfigMaxM[kNumConfigs] = { 768, 2147483647 }" in files["src/gpt3_mlp_sm90_stages.h"]
    # the synced units must not enable CUTLASS's own grid dependency waits
    assert "CUTLASS_ENABLE_GDC_FOR_SM90" not in stage.replace("Compiled without CUTLASS_ENABLE_GDC_FOR_SM90", "")


def test_sm80_projects_do_not_get_sm90_files(tmp_path: Path) -> None:
    plan = make_plan(load_spec(REPO / "cusync_gen" / "examples" / "gpt3_mlp.yaml"))
    paths = [f.path for f in project_files(plan)]
    assert not any("sm90" in p or "stock" in p or "baselines" in p for p in paths)


TABLE = {"gpu": "NVIDIA H200", "sms": 132, "modes": [{"m_max": 384, "mode": "streamk"}, {"m_max": 4096, "mode": "overlap"}]}


def test_dispatch_table_is_emitted_and_keeps_hashes_of_specs_without_one() -> None:
    plan = make_plan(parse_spec(two(dispatch=TABLE)))
    assert plan.dispatch is not None and plan.dispatch.modes[0][0] == 384
    stages = render_project(plan)["src/h_stages.h"]
    assert "constexpr int kDispatchSms = 132;" in stages and 'kDispatchGpu = "NVIDIA H200";' in stages
    assert "{384, cusync::Mode::kStreamK}," in stages and "{4096, cusync::Mode::kOverlap}," in stages
    every = {**TABLE, "modes": [{"m_max": 128 * (i + 1), "mode": m} for i, m in
                                enumerate(["overlap", "stock", "streamk", "cluster", "pingpong", "cublaslt"])]}
    emitted = render_project(make_plan(parse_spec(two(dispatch=every))))["src/h_stages.h"]
    for mode in ("kOverlap", "kStock", "kStreamK", "kCluster", "kPingpong", "kCublasLt"):  # every mode renders
        assert f"cusync::Mode::{mode}}}," in emitted
    without = render_project(make_plan(parse_spec(two())))["src/h_stages.h"]
    assert "constexpr int kNumDispatch = 0;" in without
    # an absent table does not change the spec hash (every committed project keeps its name and banner)
    assert make_plan(parse_spec(two())).spec_hash != plan.spec_hash
    assert "dispatch" not in load_spec(REPO / "cusync_gen" / "examples" / "two_gemm_sm90.yaml").model_dump(
        exclude_none=True)


@pytest.mark.parametrize(
    ("table", "field", "text"),
    [
        ({**TABLE, "modes": [{"m_max": 512, "mode": "stock"}, {"m_max": 256, "mode": "overlap"}]},
         "dispatch.modes[1].m_max", "larger"),
        ({**TABLE, "modes": [{"m_max": 512, "mode": "fastest"}]}, "dispatch.modes[0].mode", "not a valid"),
        ({**TABLE, "gpu": 'H200"); system("x'}, "dispatch.gpu", "GPU name"),
        ({**TABLE, "gpu": "H200\n"}, "dispatch.gpu", "GPU name"),
        ({**TABLE, "sms": 0}, "dispatch.sms", "greater than"),
        ({**TABLE, "modes": []}, "dispatch.modes", ""),
    ],
)
def test_dispatch_table_errors_name_the_field(table: dict[str, Any], field: str, text: str) -> None:
    err = error(two(dispatch=table))
    assert err.field == field and text in err.message


def test_dispatch_is_sm90_only() -> None:
    data = two(arch="sm80", target="sm_80", dispatch=TABLE)
    for s in data["stages"]:
        s["tile"] = {"threadblock": [128, 128, 32]}
    assert error(data).field == "dispatch"
