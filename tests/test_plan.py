"""Plan math on hand-computed numbers: tiles, occupancy, grids, waves, semaphores, wait values."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from conftest import REPO
from cusync_gen.errors import SpecError, UsageError
from cusync_gen.plan import ChainPlan, make_plan
from cusync_gen.spec import Op, Policy, parse_spec, spec_hash


def gemm(name: str, a: str, n: int, k: int, tb: list[int] | None = None, **extra: Any) -> dict[str, Any]:
    stage: dict[str, Any] = {"name": name, "op": "gemm", "a": a, "n": n, "k": k}
    stage["tile"] = {"threadblock": tb or [128, 128, 32]}
    stage.update(extra)
    return stage


def chain(*stages: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"name": top.pop("name", "test_chain"), "dtype": "fp16", **top, "stages": list(stages)}


def gpt3_plan(**top: Any) -> ChainPlan:
    data = chain(
        gemm("gemm1", "input", 6144, 12288, epilogue="gelu"),
        gemm("gemm2", "gemm1", 12288, 6144, sync="row"),
        name="gpt3_mlp",
        **top,
    )
    return make_plan(parse_spec(data))


def llama_plan(**top: Any) -> ChainPlan:
    data = chain(
        gemm("gemm1", "input", 5632, 8192),
        {
            "name": "glu",
            "op": "swiglu",
            "a": "gemm1",
            "n": 2816,
            "sync": "strided",
            "tile": {"threadblock": [64, 128, 1]},
        },
        gemm("gemm2", "glu", 8192, 2816, tb=[64, 128, 32], sync="row"),
        name="llama_mlp",
        target="sm_90",
        **top,
    )
    return make_plan(parse_spec(data))


# --------------------------------------------------------------------------------------------------
# chain-level fields


def test_chain_fields() -> None:
    plan = gpt3_plan()
    assert plan.name == "gpt3_mlp" and plan.class_name == "Gpt3Mlp"
    assert plan.target == "sm_80" and plan.cuda_arch == "80" and plan.sms == 108
    assert plan.spec_hash == spec_hash(parse_spec(chain(
        gemm("gemm1", "input", 6144, 12288, epilogue="gelu"),
        gemm("gemm2", "gemm1", 12288, 6144, sync="row"),
        name="gpt3_mlp",
    )))
    assert [s.index for s in plan.stages] == [0, 1]


def test_class_name_camel_case() -> None:
    plan = make_plan(parse_spec(chain(gemm("g", "input", 64, 64), name="my_big_mlp2")))
    assert plan.class_name == "MyBigMlp2"


@pytest.mark.parametrize(("target", "sms"), [("sm_80", 108), ("sm_86", 84), ("sm_89", 128), ("sm_90", 132)])
def test_default_sms_by_target(target: str, sms: int) -> None:
    plan = gpt3_plan(target=target)
    assert plan.sms == sms and plan.cuda_arch == target[3:]


def test_sms_override() -> None:
    assert gpt3_plan(target="sm_90", sms=114).sms == 114


def test_target_override_wins_and_changes_hash() -> None:
    spec = parse_spec(chain(gemm("g", "input", 1024, 1024), target="sm_80"))
    plan = make_plan(spec, target="sm_90")
    assert plan.target == "sm_90" and plan.cuda_arch == "90" and plan.sms == 132
    assert plan.stages[0].occupancy == 4  # 232448 // 49152
    assert plan.spec_hash != make_plan(spec).spec_hash
    assert make_plan(spec).spec_hash == spec_hash(spec)


def test_unknown_target_override_is_a_usage_error() -> None:
    with pytest.raises(UsageError) as info:
        make_plan(parse_spec(chain(gemm("g", "input", 64, 64))), target="sm_75")
    assert "sm_75" in info.value.message and "sm_90" in info.value.hint


def test_plan_is_frozen() -> None:
    plan = gpt3_plan()
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.sms = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.stages[0].tile.threads = 1  # type: ignore[misc]


def test_make_plan_is_deterministic() -> None:
    assert gpt3_plan() == gpt3_plan()
    assert gpt3_plan().describe(2048) == gpt3_plan().describe(2048)


# --------------------------------------------------------------------------------------------------
# tiles and occupancy


def test_gpt3_tiles() -> None:
    g1, g2 = gpt3_plan().stages
    for s in (g1, g2):
        t = s.tile
        assert (t.m, t.n, t.k) == (128, 128, 32)
        assert t.warp == (64, 64, 32) and t.instruction == (16, 8, 16) and t.stages == 3
        assert t.threads == 128  # 32 * 2 * 2 * 1
        assert t.smem_bytes == 49152  # 3 * (128*32 + 32*128) * 2
        assert s.occupancy == 3  # min(2048 // 128 = 16, 166912 // 49152 = 3, 32)
    assert (g1.n, g1.k, g2.n, g2.k) == (6144, 12288, 12288, 6144)
    assert g1.epilogue.value == "gelu"


@pytest.mark.parametrize(
    ("tile", "target", "threads", "smem", "occupancy"),
    [
        ({"threadblock": [128, 128, 32]}, "sm_86", 128, 49152, 2),  # 101376 // 49152
        ({"threadblock": [128, 128, 32]}, "sm_90", 128, 49152, 4),  # 232448 // 49152
        ({"threadblock": [256, 128, 32], "warp": [64, 64, 32]}, "sm_80", 256, 73728, 2),
        ({"threadblock": [128, 256, 32], "stages": 4}, "sm_80", 256, 98304, 1),  # 8 warps of 64x64; 4 * (4096 + 8192) * 2
        ({"threadblock": [16, 32, 32], "warp": [16, 32, 32]}, "sm_80", 32, 9216, 18),  # the smallest tile: one warp
        ({"threadblock": [64, 64, 32], "warp": [32, 32, 32]}, "sm_80", 128, 24576, 6),
    ],
)
def test_occupancy(tile: dict[str, Any], target: str, threads: int, smem: int, occupancy: int) -> None:
    stage = {"name": "g", "op": "gemm", "a": "input", "n": 1024, "k": 1024, "tile": tile}
    plan = make_plan(parse_spec(chain(stage, target=target)))
    s = plan.stages[0]
    assert (s.tile.threads, s.tile.smem_bytes, s.occupancy) == (threads, smem, occupancy)


def test_shared_memory_over_the_block_limit() -> None:
    # 4 * (128*64 + 64*128) * 2 = 131072 B: fits sm_80 (166912) but not sm_86 (101376)
    data = chain(gemm("g", "input", 1024, 1024, tb=[128, 128, 64]))
    data["stages"][0]["tile"]["stages"] = 4
    spec = parse_spec(data)
    assert make_plan(spec).stages[0].tile.smem_bytes == 131072
    with pytest.raises(SpecError) as info:
        make_plan(spec, target="sm_86")
    assert info.value.field == "stages[0].tile.stages"
    assert "131072" in info.value.message and "101376" in info.value.message
    assert info.value.hint == "use stages: 3 or fewer"


def test_shared_memory_too_big_even_for_three_stages() -> None:
    data = chain(gemm("g", "input", 1024, 1024, tb=[256, 128, 64]))  # 3 x 48 KiB
    with pytest.raises(SpecError) as info:
        make_plan(parse_spec(data), target="sm_86")
    assert info.value.field == "stages[0].tile.stages" and "smaller threadblock" in info.value.hint


def test_too_many_threads_per_block() -> None:
    data = chain(gemm("g", "input", 1024, 1024, tb=[256, 256, 32]))
    data["stages"][0]["tile"]["warp"] = [32, 32, 32]
    with pytest.raises(SpecError) as info:
        make_plan(parse_spec(data))
    assert info.value.field == "stages[0].tile.warp" and "64 warps; at most 8" in info.value.message and info.value.hint


def test_swiglu_tile() -> None:
    glu = llama_plan().stages[1]
    assert glu.op is Op.SWIGLU
    assert (glu.tile.m, glu.tile.n, glu.tile.k) == (64, 128, 1)
    assert glu.tile.threads == 512 and glu.tile.smem_bytes == 0  # cusync::SwiGluStage::kThreads
    assert glu.occupancy == 4  # 2048 // 512
    assert glu.n == 2816 and glu.k == 5632


# --------------------------------------------------------------------------------------------------
# grids, edges and semaphores


def test_gpt3_grid_and_row_semaphores() -> None:
    g1, g2 = gpt3_plan().stages
    assert g1.grid(2048) == (16, 48) and g2.grid(2048) == (16, 96)
    assert g1.grid(1) == (1, 48) and g1.grid(2000) == (16, 48) and g1.grid(2049) == (17, 48)
    assert g1.input is None
    assert g1.out_policy is Policy.ROW
    assert g1.semaphores_per_row == 1 and g1.posts_per_semaphore == 48
    assert g1.num_semaphores(2048) == 16 and g1.num_semaphores(1) == 1
    assert g2.out_policy is None and g2.semaphores_per_row == 0 and g2.num_semaphores(2048) == 0
    e = g2.input
    assert e is not None
    assert (e.producer, e.policy, e.wait_value, e.stride_tiles) == (0, Policy.ROW, 48, 0)
    assert (e.producer_tile_m, e.producer_tile_n) == (128, 128)


def test_llama_strided_and_row_edges() -> None:
    g1, glu, g2 = llama_plan().stages
    assert g1.out_policy is Policy.STRIDED
    assert g1.semaphores_per_row == 22 and g1.posts_per_semaphore == 2
    assert g1.num_semaphores(4096) == 32 * 22
    e = glu.input
    assert e is not None and (e.producer, e.policy, e.wait_value, e.stride_tiles) == (0, Policy.STRIDED, 2, 22)
    assert glu.grid(4096) == (64, 22)
    assert glu.out_policy is Policy.ROW and glu.semaphores_per_row == 1 and glu.posts_per_semaphore == 22
    assert glu.num_semaphores(4096) == 64
    e2 = g2.input
    assert e2 is not None and (e2.producer, e2.policy, e2.wait_value, e2.stride_tiles) == (1, Policy.ROW, 22, 0)
    assert (e2.producer_tile_m, e2.producer_tile_n) == (64, 128)
    assert g2.grid(4096) == (64, 64)


def test_tile_policy_semaphores() -> None:
    plan = make_plan(parse_spec(chain(gemm("g1", "input", 1024, 512), gemm("g2", "g1", 256, 1024, sync="tile"))))
    g1, g2 = plan.stages
    assert g1.out_policy is Policy.TILE
    assert g1.semaphores_per_row == 8 and g1.posts_per_semaphore == 1
    assert g1.num_semaphores(256) == 16
    assert g2.input is not None and g2.input.wait_value == 1 and g2.input.stride_tiles == 0


def test_row_wait_value_rounds_up_ragged_producer() -> None:
    # producer n = 1056 = 8 full 128-wide tiles + one 32-wide tile
    data = chain(
        gemm("g1", "input", 1056, 512),
        gemm("g2", "g1", 256, 1056, tb=[128, 128, 32], sync="row"),
    )
    g1, g2 = make_plan(parse_spec(data)).stages
    assert g1.grid(128) == (1, 9)
    assert g2.input is not None and g2.input.wait_value == 9 and g1.posts_per_semaphore == 9


def test_none_policy_edge() -> None:
    plan = make_plan(parse_spec(chain(gemm("g1", "input", 1024, 512), gemm("g2", "g1", 256, 1024, sync="none"))))
    g1, g2 = plan.stages
    assert g1.out_policy is Policy.NONE and g1.semaphores_per_row == 0 and g1.posts_per_semaphore == 0
    assert g1.num_semaphores(4096) == 0
    assert g2.input is not None and g2.input.policy is Policy.NONE and g2.input.wait_value == 0


def test_two_consumers_share_the_producer_policy() -> None:
    data = chain(
        gemm("g1", "input", 1024, 512),
        gemm("g2", "g1", 256, 1024, sync="row"),
        gemm("g3", "g1", 512, 1024, sync="row"),
    )
    g1 = make_plan(parse_spec(data)).stages[0]
    assert g1.out_policy is Policy.ROW and g1.posts_per_semaphore == 8


def test_make_plan_rechecks_rules_on_directly_built_specs() -> None:
    from cusync_gen.spec import ChainSpec

    bad = ChainSpec.model_validate(
        chain(
            gemm("g1", "input", 1024, 512),
            gemm("g2", "g1", 256, 1024, sync="row"),
            optimizations={"no_atomic_add": True},
        )
    )
    with pytest.raises(SpecError) as info:
        make_plan(bad)
    assert info.value.field == "optimizations.no_atomic_add"

    mixed = ChainSpec.model_validate(
        chain(
            gemm("g1", "input", 1024, 512),
            gemm("g2", "g1", 256, 1024, sync="row"),
            gemm("g3", "g1", 256, 1024, sync="tile"),
        )
    )
    with pytest.raises(SpecError) as info:
        make_plan(mixed)
    assert info.value.field == "stages[2].sync" and info.value.hint

    # omitted tile fields get the same defaults as through parse_spec
    ok = ChainSpec.model_validate(chain(gemm("g1", "input", 1024, 512)))
    assert make_plan(ok).stages[0].tile.warp == (64, 64, 32)


# --------------------------------------------------------------------------------------------------
# describe(): waves, co-residency, optimizations


def test_describe_gpt3_numbers() -> None:
    text = gpt3_plan().describe(2048)
    assert "gpt3_mlp" in text and gpt3_plan().spec_hash in text and "sm_80" in text and "108 SMs" in text
    # gemm1: 16 x 48 = 768 tiles on 108 * 3 = 324 slots -> 2.37 waves, last wave 120/324
    assert "16 x 48 = 768 tiles, 2.37 waves" in text and "(last wave 37.0% full)" in text
    # gemm2: 16 x 96 = 1536 tiles -> 4.74 waves, last wave 240/324
    assert "16 x 96 = 1536 tiles, 4.74 waves" in text and "(last wave 74.1% full)" in text
    assert "2048 x 6144 x 12288" in text and "2048 x 12288 x 6144" in text
    assert "sync row, wait value 48" in text
    assert "16 semaphores" in text and "48 posts each" in text
    assert "occupancy 3 blocks/SM" in text and "smem 49152 B" in text and "128 per block" in text
    assert "row_major" in text
    for name in ("no_atomic_add", "avoid_wait_kernel", "avoid_custom_order", "reorder_tile_loads"):
        assert name in text
    assert "WARNING" not in text


def test_describe_full_last_wave() -> None:
    # 324 slots, m=27*128 -> 27 x 48 = 1296 tiles = exactly 4 waves
    text = gpt3_plan().describe(27 * 128)
    assert "1296 tiles, 4.00 waves" in text and "(last wave 100.0% full)" in text


def test_describe_llama_edges() -> None:
    text = llama_plan().describe(4096)
    assert "wait value 2" in text and "gate tile j and up tile j + 22" in text
    assert "704 semaphores" in text and "2 posts each" in text
    assert "sync row, wait value 22" in text
    assert "64 rows x 128 cols" in text


def test_describe_rejects_bad_m() -> None:
    with pytest.raises(UsageError) as info:
        gpt3_plan().describe(0)
    assert info.value.hint


def test_coresidency_and_avoid_wait_kernel_warning() -> None:
    # 108 SMs x 3 blocks: at m=128 the 48 + 96 blocks fit (144 <= 324), at m=384 144 + 288 do not
    plan = gpt3_plan(optimizations={"avoid_wait_kernel": True})
    assert plan.coresident(128)[0]
    assert not plan.coresident(384)[0]
    assert plan.coresident(256)[0]  # 96 + 192 = 288 <= 324
    assert "WARNING" not in plan.describe(128)
    warn = plan.describe(384)
    assert "WARNING: avoid_wait_kernel is on but not legal at M=384" in warn
    assert "WARNING" not in gpt3_plan().describe(384)  # off: no warning, but still says why not legal
    assert "avoid_wait_kernel   off: not legal at M=384" in gpt3_plan().describe(384)


def test_coresidency_weights_blocks_by_occupancy() -> None:
    # sm_90, 132 SMs; occupancy gemm1 4, glu 4 (512 threads), gemm2 6; glu and gemm2 have 64-row tiles.
    # At m=512: 176/4 + 176/4 = 88 SMs and 176/4 + 512/6 = 129.3 SMs both fit; at m=768 the second edge
    # needs 264/4 + 768/6 = 194 SMs
    plan = llama_plan()
    assert [s.occupancy for s in plan.stages] == [4, 4, 6]
    assert plan.coresident(512)[0]
    ok, why = plan.coresident(768)
    assert not ok and "194.0 SMs" in why


def test_single_stage_is_trivially_coresident() -> None:
    plan = make_plan(parse_spec(chain(gemm("g", "input", 1024, 1024), optimizations={"avoid_wait_kernel": True})))
    assert plan.coresident(1 << 20)[0]
    assert "WARNING" not in plan.describe(1 << 20)


def test_no_atomic_add_legality_lines() -> None:
    tile_chain = chain(
        gemm("g1", "input", 1024, 512),
        gemm("g2", "g1", 256, 1024, sync="tile"),
        optimizations={"no_atomic_add": True},
    )
    plan = make_plan(parse_spec(tile_chain))
    assert plan.no_atomic_add_legal()[0]
    assert "no_atomic_add       on: legal" in plan.describe(256)
    ok, why = gpt3_plan().no_atomic_add_legal()
    assert not ok and "48 posts" in why


def test_describe_custom_order_and_reorder_lines() -> None:
    plan = gpt3_plan(optimizations={"avoid_custom_order": True, "reorder_tile_loads": True})
    text = plan.describe(2048)
    assert "hardware block order" in text
    assert "avoid_custom_order  on" in text and "reorder_tile_loads  on: legal: B of gemm2" in text
    single = make_plan(parse_spec(chain(gemm("g", "input", 64, 64)))).describe(64)
    assert "no effect" in single and "atomic tile counter" in single


def test_two_producer_stage_lists_both_edges() -> None:
    """A swiglu with `b` waits on two producers: both edges count for legality checks."""
    from cusync_gen.spec import parse_spec

    tile = {"threadblock": [128, 128, 32], "warp": [64, 64, 32], "stages": 3}
    plan = make_plan(parse_spec({
        "name": "split",
        "stages": [
            {"name": "gate", "op": "gemm", "a": "input", "n": 256, "k": 256, "tile": tile},
            {"name": "up", "op": "gemm", "a": "input", "n": 256, "k": 256, "tile": tile},
            {"name": "glu", "op": "swiglu", "a": "gate", "b": "up", "n": 256, "sync": "tile",
             "tile": {"threadblock": [128, 128]}},
        ],
    }))
    assert [(p.name, c.name) for p, c in plan.edges()] == [("gate", "glu"), ("up", "glu")]
    assert [e.operand for e in plan.stages[2].input_edges()] == ["a", "b"]
    assert not plan.has_unsynced_edge


def test_no_atomic_add_verdict_counts_posts_in_the_configuration_of_m() -> None:
    """validate --m 512 describes the 128x128 configuration that runs there (48 posts per row semaphore),
    not the default 128x256 one (24)."""
    from cusync_gen.spec import load_spec as _load

    plan = make_plan(_load(REPO / "cusync_gen" / "examples" / "gpt3_mlp_sm90.yaml"))
    assert "48 posts" in plan.no_atomic_add_legal(512)[1]
    assert "24 posts" in plan.no_atomic_add_legal(4096)[1]
