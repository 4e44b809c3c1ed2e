"""Conv chains (`op: conv`, docs/conv.md): the spec's rules, the plan's window, its proof (and that the
proof catches a window that misses rows), the goldens, an nvcc build and, on a GPU, the bench's checks."""

from __future__ import annotations

import copy
import itertools
import os
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import EXAMPLES_CONV, EXAMPLES_CONV_SM90, REPO
from cusync_gen.conv_plan import ConvStagePlan, make_conv_plan
from cusync_gen.errors import SpecError
from cusync_gen.render import generate
from cusync_gen.spec import ConvChainSpec, load_spec, parse_spec
from cusync_gen.verify import VerificationError
from cusync_gen.verify_conv import representative_batches, verify_conv

EXAMPLES_DIR = REPO / "cusync_gen" / "examples"
DATA = REPO / "tests" / "data"


def _data(name: str) -> dict:
    return yaml.safe_load((EXAMPLES_DIR / f"{name}.yaml").read_text())


def _small(**first: object) -> dict:
    """A two-stage chain small enough to prove at every batch quickly."""
    stage0 = {"name": "c1", "op": "conv", "a": "input", "n": 4, "h": 9, "w": 7, "c": 16, "k": 24, "padding": 1,
              "bias": True, "epilogue": "relu", "tile": {"threadblock": [64, 64, 32], "warp": [32, 32, 32]}}
    stage0.update(first)
    return {"name": "small", "arch": "sm80", "target": "sm_90", "stages": [
        stage0,
        {"name": "c2", "op": "conv", "a": "c1", "k": 24, "padding": 1, "residual": "c1", "epilogue": "relu",
         "tile": {"threadblock": [128, 32, 32], "warp": [64, 32, 32]}}]}


@pytest.mark.parametrize("name", EXAMPLES_CONV + EXAMPLES_CONV_SM90)
def test_examples_parse_and_prove(name: str) -> None:
    spec = load_spec(EXAMPLES_DIR / f"{name}.yaml")
    assert isinstance(spec, ConvChainSpec)
    plan = make_conv_plan(spec)
    assert plan.backend == ("conv_sm90" if name.endswith("_sm90") else "conv") and plan.max_batch == 32
    for batch in (1, 3, 8, 32):
        proof = verify_conv(plan, batch)
        assert set(proof.tiles_checked) == {s.name for s in plan.stages[1:]}


def test_resnet_block_shapes_and_waits() -> None:
    plan = make_conv_plan(load_spec(EXAMPLES_DIR / "resnet_block.yaml"))
    conv1, conv2 = plan.stages
    assert (conv2.h, conv2.w, conv2.c, conv2.p, conv2.q, conv2.k) == (56, 56, 64, 56, 56, 64)
    assert conv2.residual == -1 and conv2.gemm_k == 576
    assert conv1.tiles_m(8) == 196 and conv1.tiles_n == 1
    # Tile row 0 (pixels 0..127: image rows 0..2) reads rows 0..3 of conv1: pixels 0..223, tile rows 0..1.
    assert conv2.waited_rows(0, conv1, 8) == range(0, 2)
    # A middle tile waits for the rows one above and one below its own.
    m0, m1 = conv2.tile_pixels(100, 8)
    first, last = conv2.window_pixels(m0, m1)
    assert first == (m0 // 56 - 1) * 56 and last == ((m1 - 1) // 56 + 2) * 56 - 1


def test_validate_explains_the_window() -> None:
    out = subprocess.run(["python3", "-m", "cusync_gen.cli", "validate", str(EXAMPLES_DIR / "resnet_block.yaml"),
                          "--batch", "1,8"], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "Conv2D tile sync" in text and "clamped to the image" in text
    assert "tile row 0 (pixels 0..127) waits for conv1 tile rows 0..1 of 25" in text
    assert "proof at batch 8" in text and text.rstrip().endswith("OK")


def test_validate_json() -> None:
    out = subprocess.run(["python3", "-m", "cusync_gen.cli", "validate", str(EXAMPLES_DIR / "vgg_block.yaml"),
                          "--batch", "2", "--json"], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
    import json

    doc = json.loads(out.stdout)
    assert doc["kind"] == "conv" and doc["runs"][0]["stages"][2]["grid"] == [49, 2]


def test_run_mode_rule_back_to_back_where_every_producer_fits_one_wave() -> None:
    """run()'s rule (ConvChain::mode without set_mode or autotune): back to back where every producer stage's
    tiles fit in one wave, the overlap where some producer runs more; the reason names the stage."""
    plan = make_conv_plan(load_spec(EXAMPLES_DIR / "resnet_block.yaml"))
    conv1 = plan.stages[0]
    assert conv1.blocks_per_sm >= 1
    slots = plan.sms * conv1.blocks_per_sm
    one_wave = max(b for b in range(1, 33) if conv1.tiles_m(b) * conv1.tiles_n <= slots)
    mode, why = plan.run_mode(one_wave)  # sm_90: chained with programmatic dependent launch
    assert mode == "back-to-back+PDL" and "every producer fits in one wave" in why and "conv1" in why
    assert make_conv_plan(load_spec(EXAMPLES_DIR / "resnet_block.yaml"), target="sm_80").run_mode(1)[0] == "back-to-back"
    mode, why = plan.run_mode(one_wave + 1)  # more than one wave, but 3x3 x 64 channels: 9 main-loop steps
    assert mode == "back-to-back+PDL" and "more than one wave" in why and "conv1" in why
    assert "some stage's tiles take 9 main-loop steps" in why
    assert plan.run_mode(1, sms=1)[0] == "back-to-back+PDL"  # 25 tiles on one SM, but short ones
    vgg = make_conv_plan(load_spec(EXAMPLES_DIR / "vgg_block.yaml"))  # 3x3 x 256 channels: 36 steps
    mode, why = vgg.run_mode(32)
    assert mode == "overlap" and "every stage's tiles take at least 36 main-loop steps" in why
    assert vgg.run_mode(1)[0] == "back-to-back+PDL"
    # The sink stage's tiles do not count: nothing waits on them.
    bottleneck = make_conv_plan(load_spec(EXAMPLES_DIR / "bottleneck_block.yaml"))
    assert "conv3" not in bottleneck.run_mode(32)[1]


def test_programmatic_launch_follows_the_target(tmp_path: Path) -> None:
    """Kernels built for sm_90 trigger the next stage's programmatic launch (one-stream overlap on sm_90
    devices); built for sm_80 they cannot, and the library keeps the two-stream path with the wait kernels."""
    spec = load_spec(EXAMPLES_DIR / "resnet_block.yaml")
    assert make_conv_plan(spec).programmatic and not make_conv_plan(spec, target="sm_80").programmatic
    unit = (REPO / "generated" / "resnet_block" / "src" / "resnet_block.cu").read_text()
    assert "/*programmatic=*/true" in unit
    conv = (REPO / "generated" / "resnet_block" / "include" / "cusync" / "conv" / "conv.cuh").read_text()
    window = (REPO / "generated" / "resnet_block" / "include" / "cusync" / "conv" / "window.cuh").read_text()
    assert "launch_stage_kernel(" in conv and "__all_sync" in window
    # Only the chained back to back (not synced) waits for the whole previous kernel before its work; the
    # synced stages wait for it at exit (end_tile_lean: only the grid's last block with kHookOneExitWait).
    assert conv.count("asm volatile(\"griddepcontrol.wait;\"") == 2
    assert "if (params.waits.wait_primary_first) asm volatile(\"griddepcontrol.wait;\"" in conv
    assert "(hooks & kHookOneExitWait) == 0u || blockIdx.x + 1 == gridDim.x" in conv
    data = yaml.safe_load((EXAMPLES_DIR / "resnet_block.yaml").read_text())
    data["target"] = "sm_80"
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    generate(tmp_path / "s.yaml", tmp_path / "p")
    assert "/*programmatic=*/false" in (tmp_path / "p" / "src" / "resnet_block.cu").read_text()


def test_validate_says_what_run_does() -> None:
    out = subprocess.run(["python3", "-m", "cusync_gen.cli", "validate", str(EXAMPLES_DIR / "bottleneck_block.yaml"),
                          "--batch", "1,32"], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
    assert "run() at batch 1 on 132 SMs: back-to-back+PDL (rule: every producer fits in one wave" in out.stdout
    assert "run() at batch 32 on 132 SMs: back-to-back+PDL (rule: conv1 has" in out.stdout
    assert "but some stage's tiles take 1 main-loop steps" in out.stdout
    assert "programmatic dependent launch" in out.stdout


def test_bottleneck_block_shapes() -> None:
    """ResNet-50 conv2_x bottleneck: 1x1 256->64, 3x3 64->64, 1x1 64->256 + the block input."""
    plan = make_conv_plan(load_spec(EXAMPLES_DIR / "bottleneck_block.yaml"))
    c1, c2, c3 = plan.stages
    assert (c1.r, c1.c, c1.k, c2.r, c2.pad, c2.k, c3.r, c3.k) == (1, 256, 64, 3, 1, 64, 1, 256)
    assert c3.residual == -1 and (c3.p, c3.q) == (56, 56)
    # conv3's 1x1 windows read only their own image rows: tile row 12 (pixels 1536..1663, rows 27..29)
    # waits for conv2 rows 27..29, conv2 tile rows 11..13 (widened up to the next tile's first row).
    assert c3.waited_rows(12, c2, 1) == range(11, 14)


@pytest.mark.parametrize("name", ("conv_mix", "conv_mix_bf16"))
def test_correctness_specs_prove(name: str) -> None:
    plan = make_conv_plan(load_spec(DATA / f"{name}.yaml"))
    for batch in (1, 2, 3):
        verify_conv(plan, batch)


def test_random_windows_prove() -> None:
    """The plan's window covers every read for random sizes, strides, paddings, dilations and tiles."""
    rng = random.Random(7)
    for _ in range(60):
        r, s, dil = rng.choice((1, 3, 5)), rng.choice((1, 3)), rng.choice((1, 2))
        pad = rng.randint(0, min(r - 1, s - 1) * dil)
        stride = rng.choice((1, 2, 3))
        h, w = rng.randint(max(r, s) * dil, 23), rng.randint(max(r, s) * dil, 19)
        tm0, tm1 = rng.choice((64, 128)), rng.choice((64, 128))
        data = _small(h=h, w=w, tile={"threadblock": [tm0, 64, 32], "warp": [32, 32, 32]})
        data["stages"][1].update({"r": r, "s": s, "stride": stride, "padding": pad, "dilation": dil, "residual": None,
                                  "tile": {"threadblock": [tm1, 32, 32], "warp": [32, 32, 32]}})
        plan = make_conv_plan(parse_spec(data))
        for batch in (1, 2, 3, 4):
            verify_conv(plan, batch)


def test_the_proof_catches_a_window_without_its_halo(monkeypatch: pytest.MonkeyPatch) -> None:
    plan = make_conv_plan(load_spec(EXAMPLES_DIR / "resnet_block.yaml"))
    monkeypatch.setattr(ConvStagePlan, "first_row", lambda self, p: p * self.stride)  # forgets the row above
    with pytest.raises(VerificationError) as err:
        verify_conv(plan, 1)
    assert err.value.field == "stages[1].sync" and "tile row" in err.value.message


def test_the_proof_catches_a_missing_bottom_row(monkeypatch: pytest.MonkeyPatch) -> None:
    plan = make_conv_plan(load_spec(EXAMPLES_DIR / "resnet_block.yaml"))
    monkeypatch.setattr(ConvStagePlan, "last_row", lambda self, p: min(self.h - 1, p * self.stride))
    with pytest.raises(VerificationError) as err:
        verify_conv(plan, 1)
    assert "conv1 pixels" in err.value.message


def test_the_proof_catches_a_missing_residual_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    plan = make_conv_plan(parse_spec(_small()))
    monkeypatch.setattr(ConvStagePlan, "residual_rows", lambda self, tm, src, b: range(0, 0))
    with pytest.raises(VerificationError) as err:
        verify_conv(plan, 1)
    assert err.value.field == "stages[1].residual"


def test_generate_proves_these_batches() -> None:
    plan = make_conv_plan(load_spec(EXAMPLES_DIR / "resnet_block.yaml"))
    assert representative_batches(plan) == [1, 2, 3, 32]


BAD = [
    (lambda d: d["stages"][0].pop("h"), "stages[0].h", "must give its h"),
    (lambda d: d["stages"][0].update(c=60), "stages[0].c", "multiple of 8"),
    (lambda d: d["stages"][1].update(k=20), "stages[1].k", "multiple of 8"),
    (lambda d: d["stages"][1].update(a="input"), "stages[1].a", "set a: c1"),
    (lambda d: d["stages"][1].update(residual="input"), "stages[1].residual", "same shape"),
    (lambda d: d["stages"][1].update(residual="c9"), "stages[1].residual", "neither input nor an earlier stage"),
    (lambda d: d["stages"][0].update(padding=3), "stages[0].padding", "padding <= 2"),
    (lambda d: d["stages"][1].update(sync="row"), "stages[1].sync", "sync: auto"),
    (lambda d: d["stages"][0].update(epilogue="gelu"), "stages[0].epilogue", "relu or identity"),
    (lambda d: d["stages"][0].update(n=5000), "stages[0].n", "limit of 4096"),
    (lambda d: d["stages"][0].update(stride=0), "stages[0].stride", "greater than 0"),
    (lambda d: d["stages"][0].update(padding=-1), "stages[0].padding", "at least 0"),
    (lambda d: d["stages"][0].update(r=16), "stages[0].r", "limit of 15"),
    (lambda d: d["stages"][1].update(h=8), "stages[1].h", "set h: 9"),
    (lambda d: d["stages"][1].update(n=2), "stages[1].n", "one batch"),
    (lambda d: d.update(arch="sm90", target="sm_80"), "target", "set target: sm_90"),
    (lambda d: d["stages"][1].update(op="gemm", n=8), "stages[0].op", "cannot be mixed with 'gemm'"),
    (lambda d: d["stages"][0].update(r=11, padding=0, dilation=1), "stages[0].r", "does not fit"),
    (lambda d: d["stages"][0].update(n=4096, h=8192, w=8192), "stages[0].n", "2^30"),
    (lambda d: d["stages"][1].update(tile={"threadblock": [128, 32, 16], "warp": [64, 32, 16]}),
     "stages[1].tile.threadblock", "32 or 64"),
    (lambda d: d["stages"][1].update(tile={"threadblock": [128, 32, 32], "warp": [64, 32, 32], "schedule": "pingpong"}),
     "stages[1].tile.schedule", "remove schedule"),
    (lambda d: d["stages"][1].update(name="c1"), "stages[1].name", "already the name"),
    (lambda d: d["stages"][1].update(order="banded"), "stages[1].order", "row_major"),
    (lambda d: d["stages"][0].update(unknown=1), "stages[0].unknown", "unknown key"),
]


def _sm90(tile0: list | None = None, **extra: object) -> dict:
    """The small chain on the sm90 kernels (tiles are their threadblock alone)."""
    data = _small()
    data["arch"] = "sm90"
    data["stages"][0]["tile"] = {"threadblock": tile0 or [64, 64, 64], **extra}
    data["stages"][1]["tile"] = {"threadblock": [128, 64, 64]}
    return data


BAD_SM90 = [
    (lambda: _sm90([256, 64, 64]), "stages[0].tile.threadblock", "64 or 128 output pixels"),
    (lambda: _sm90([128, 256, 64]), "stages[0].tile.threadblock", "[128, 128, 64]"),
    (lambda: _sm90([64, 192, 64]), "stages[0].tile.threadblock", "64, 128 or 256 channels"),
    (lambda: _sm90([64, 64, 32]), "stages[0].tile.threadblock", "64 channels per K-block"),
    (lambda: _sm90(warp=[32, 32, 64]), "stages[0].tile.warp", "remove warp"),
    (lambda: _sm90(stages=4), "stages[0].tile.stages", "remove stages"),
    (lambda: _sm90(schedule="pingpong"), "stages[0].tile.schedule", "remove schedule"),
    (lambda: _sm90(instruction=[16, 8, 16]), "stages[0].tile.instruction", "remove instruction"),
    (lambda: _sm90(cluster=[2, 1, 1]), "stages[0].tile.cluster", "remove cluster"),
    (lambda: {**_sm90(), "target": "sm_86"}, "target", "set target: sm_90"),
]


@pytest.mark.parametrize(("make", "field", "text"), BAD_SM90)
def test_sm90_spec_errors_name_the_field_and_the_fix(make, field: str, text: str) -> None:  # noqa: ANN001
    with pytest.raises(SpecError) as err:
        parse_spec(make())
    assert err.value.field == field, err.value.message
    assert text in err.value.message + " " + err.value.hint
    assert err.value.hint


def test_sm90_plan_counts_k_blocks_per_filter_tap_and_one_block_per_sm() -> None:
    plan = make_conv_plan(parse_spec(_sm90()))
    assert plan.backend == "conv_sm90" and plan.programmatic
    c1, c2 = plan.stages
    assert (c1.tile.m, c1.tile.n, c1.tile.k, c1.blocks_per_sm) == (64, 64, 64, 1)
    assert c1.k_steps == 3 * 3 * 1 and c2.k_steps == 3 * 3 * 1  # c = 16 and 24: one K-block of 64 per tap
    for batch in (1, 2, 4):
        verify_conv(plan, batch)
    assert "sm90 implicit-GEMM kernels" in plan.describe(1)


@pytest.mark.parametrize(("mutate", "field", "text"), BAD)
def test_spec_errors_name_the_field_and_the_fix(mutate, field: str, text: str) -> None:  # noqa: ANN001
    data = copy.deepcopy(_small())
    mutate(data)
    with pytest.raises(SpecError) as err:
        parse_spec(data)
    assert err.value.field == field, err.value.message
    assert text in err.value.message + " " + err.value.hint
    assert err.value.hint


def test_defaults() -> None:
    data = _small()
    for key in ("padding", "bias", "epilogue", "tile"):
        data["stages"][0].pop(key)
    data["stages"][0]["padding"] = 0
    spec = parse_spec(data)
    st = spec.stages[0]
    assert (st.r, st.s, st.stride, st.dilation, st.bias, st.epilogue.value) == (3, 3, 1, 1, False, "identity")
    assert st.tile.threadblock == (128, 64, 32) and st.tile.warp == (64, 32, 32) and st.tile.stages == 3


def test_sm90_defaults_are_sm90_tiles() -> None:
    """An sm90 stage without a tile gets one the sm90 kernels take (not sm80's 32-channel K-blocks, which the
    sm90 rules would then refuse in a field the user never wrote): the default tile where its grid is large
    (here a 56 x 56 image at every batch from 4 on), the small one below (default_sm90_conv_tile_configs)."""
    data = _sm90()
    data["stages"][0].update(n=32, h=56, w=56)
    data["stages"][1]["k"] = 128
    data["stages"][1].pop("residual")
    for stage in data["stages"]:
        stage.pop("tile")
    spec = parse_spec(data)
    assert [s.tile.threadblock for s in spec.stages] == [(128, 64, 64), (128, 128, 64)]
    assert all(s.tile.warp is None and s.tile.stages is None for s in spec.stages)
    # 3136 pixels an image: 49 tiles of 64 x 64 for 24 channels, 98 for 128; one wave of 132 up to batch 2 and 1;
    # c2 on 128 x 64 (49 tiles an image) at batch 2.
    assert [(c.batch_max, c.tiles) for c in spec.tile_configs] == [(1, {"c1": (64, 64, 64), "c2": (64, 64, 64)}),
                                                                  (2, {"c1": (64, 64, 64), "c2": (128, 64, 64)})]
    make_conv_plan(spec)


def _deep(hw: int, channels: list[int], n: int = 8, **extra: object) -> dict:
    """An sm90 chain of 3 x 3 convs (no tiles given) on an hw x hw image, stage i with channels[i] outputs."""
    stages = [{"name": f"conv{i + 1}", "op": "conv", "a": "input" if i == 0 else f"conv{i}", "k": k, "padding": 1,
               "bias": True, "epilogue": "relu"} for i, k in enumerate(channels)]
    stages[0].update(n=n, h=hw, w=hw, c=channels[0])
    return {"name": "deep", "arch": "sm90", "target": "sm_90", "stages": stages, **extra}


@pytest.mark.parametrize(("hw", "channels", "own", "configs"), [
    # ResNet's 14 x 14 x 256 at batch <= 8: 4-8 tiles of 128 x 128, 16-100 of 64 x 64: small at every batch.
    (14, [256, 256], [(64, 64, 64)] * 2, []),
    # VGG's 28 x 28 x 512: 104 small tiles at batch 1, 200 at 2 (past one wave): small at batch 1 only.
    (28, [512, 512], [(128, 128, 64)] * 2, [(1, {"conv1": (64, 64, 64), "conv2": (64, 64, 64)})]),
    # A wide last stage leaves one wave sooner than the narrow ones: each stage switches at its own batch.
    (7, [512, 2048], [(64, 64, 64), (128, 128, 64)], [(5, {"conv2": (64, 64, 64)})]),
    # VGG's 224 x 224 x 64: hundreds of tiles at batch 1, nothing to derive.
    (224, [64, 64], [(128, 64, 64)] * 2, []),
])
def test_sm90_small_grids_take_small_tiles(hw: int, channels: list[int], own: list, configs: list) -> None:
    """Measured on an H100 (benchmarks/NOTES.md c13): ResNet / VGG layers of 7 x 7 to 28 x 28 at batch 1-8 ran
    1.3-1.8x faster on 64 x 64 tiles wherever that grid fits in one wave, and 7-15% slower past it."""
    spec = parse_spec(_deep(hw, channels))
    assert [s.tile.threadblock for s in spec.stages] == own
    assert [(c.batch_max, c.tiles) for c in spec.tile_configs] == configs
    plan = make_conv_plan(spec)
    for batch in representative_batches(plan):
        verify_conv(plan, batch)
    again = parse_spec(spec.model_dump(mode="json", exclude_none=True))  # the derived spec as written: the same
    assert again.stages == spec.stages and again.tile_configs == spec.tile_configs


@pytest.mark.parametrize(("hw", "channels", "n", "configs"), [
    # ResNet's 14 x 14 x 256 (36 iterations a tile): 64 x 64 up to batch 10, 128 x 64 up to 21 (measured 1.33x
    # faster than 128 x 128 at 16 and 20).
    (14, [256, 256], 32, [(10, {"conv1": (64, 64, 64), "conv2": (64, 64, 64)}),
                          (21, {"conv1": (128, 64, 64), "conv2": (128, 64, 64)})]),
    # ResNet's 7 x 7 x 512 (72 iterations): 128 x 64 only within two thirds of a wave, up to 88 tiles at batch 28
    # (measured 1.16x at 24 with 80 tiles, level at 32 with 104).
    (7, [512, 512], 32, [(20, {"conv1": (64, 64, 64), "conv2": (64, 64, 64)}),
                         (28, {"conv1": (128, 64, 64), "conv2": (128, 64, 64)})]),
    # VGG's 14 x 14 x 512 (72 iterations): up to 80 tiles at batch 7 (at 8, 104 tiles, measured 0.95x: not taken).
    (14, [512, 512], 32, [(5, {"conv1": (64, 64, 64), "conv2": (64, 64, 64)}),
                          (7, {"conv1": (128, 64, 64), "conv2": (128, 64, 64)})]),
    # VGG's 56 x 56 x 256 at batch 1 (36 iterations; 64 x 64 would be 196 tiles): 128 x 64, measured 1.30x.
    (56, [256, 256], 2, [(1, {"conv1": (128, 64, 64), "conv2": (128, 64, 64)})]),
])
def test_sm90_half_width_tiles_between_small_and_default(hw: int, channels: list[int], n: int, configs: list) -> None:
    """Past the batches where 64 x 64 fits in one wave, a stage whose default is 128 x 128 takes 128 x 64 while that
    grid fits (benchmarks/NOTES.md c16), long tiles only within two thirds of a wave; every derived spec proves."""
    spec = parse_spec(_deep(hw, channels, n=n))
    assert [s.tile.threadblock for s in spec.stages] == [(128, 128, 64)] * 2
    assert [(c.batch_max, c.tiles) for c in spec.tile_configs] == configs
    plan = make_conv_plan(spec)
    for batch in representative_batches(plan):
        verify_conv(plan, batch)


@pytest.mark.parametrize(("hw", "channels", "n", "batch", "mode"), [
    # 1.48 waves of 128 x 128 tiles, 72 (VGG 28 x 28 x 512, 14 x 14 x 512) or 36 (56 x 56 x 256) iterations a tile:
    # measured 1.15x, 1.15x and 1.03x over back to back with the overlap.
    (28, [512, 512], 8, 8, "overlap"), (14, [512, 512], 32, 32, "overlap"), (56, [256, 256], 8, 4, "overlap"),
    # one wave (VGG 28 x 28 x 512 at batch 4: 0.84x), a nearly full last wave (56 x 56 x 256 at 8, 2.97 waves: 0.96x),
    # short tiles at 1.48 waves (VGG 112 x 112 x 128 at 2 and ResNet 28 x 28 x 128 at 32, 18 iterations: 0.93x,
    # 0.90x; ResNet 56 x 56 x 64 at 8, 9 iterations: 0.81x).
    (28, [512, 512], 8, 4, "back-to-back+PDL"), (56, [256, 256], 8, 8, "back-to-back+PDL"),
    (112, [128, 128], 2, 2, "back-to-back+PDL"), (28, [128, 128], 32, 32, "back-to-back+PDL"),
    (56, [64, 64], 8, 8, "back-to-back+PDL"),
    # c15, away from 1.48 waves: 1.12 waves (44% idle) 1.09x, 2.23 waves (25%) 1.05-1.06x; 1.86-1.88 waves (6% idle)
    # 0.92-0.95x, one wave (VGG 14 x 14 x 512 at 20) 0.81x.
    (56, [256, 256], 24, 3, "overlap"), (56, [256, 256], 24, 6, "overlap"), (28, [512, 512], 24, 6, "overlap"),
    (28, [512, 512], 24, 12, "overlap"), (14, [512, 512], 24, 24, "overlap"),
    (56, [256, 256], 24, 5, "back-to-back+PDL"), (28, [512, 512], 24, 10, "back-to-back+PDL"),
    (14, [512, 512], 24, 20, "back-to-back+PDL"),
])
def test_sm90_rule_takes_the_overlap_where_it_was_measured_faster(hw: int, channels: list[int], n: int, batch: int,
                                                                    mode: str) -> None:
    """run()'s rule on the sm90 kernels (kOverlapRuleSm90) at the points of benchmarks/NOTES.md c14 (H100): the
    overlap only where the widest producer's last wave leaves a fifth of its SM time idle and the tiles are long;
    and at the points of c15, away from 1.48 waves."""
    plan = make_conv_plan(parse_spec(_deep(hw, channels, n=n)))
    assert plan.run_mode(batch)[0] == mode, plan.run_mode(batch)


def test_sm90_given_tiles_are_kept() -> None:
    """A stage with its own tile, and any spec with tile_configs, keep what the user wrote; only the stages
    without a tile take the derived small tile."""
    data = _deep(14, [256, 256])
    data["stages"][1]["tile"] = {"threadblock": [128, 128, 64]}
    spec = parse_spec(data)
    assert [s.tile.threadblock for s in spec.stages] == [(64, 64, 64), (128, 128, 64)] and spec.tile_configs == []
    data = _deep(14, [256, 256], tile_configs=[{"batch_max": 1, "tiles": {"conv1": [64, 128, 64]}}])
    spec = parse_spec(data)
    assert [s.tile.threadblock for s in spec.stages] == [(128, 128, 64)] * 2
    assert [(c.batch_max, c.tiles) for c in spec.tile_configs] == [(1, {"conv1": (64, 128, 64)})]


@pytest.mark.parametrize("name", EXAMPLES_CONV + EXAMPLES_CONV_SM90)
def test_goldens_match_the_generator(name: str) -> None:
    generate(EXAMPLES_DIR / f"{name}.yaml", REPO / "generated" / name, check=True)


def test_generated_files_and_stage_units(tmp_path: Path) -> None:
    generate(EXAMPLES_DIR / "resnet_block.yaml", tmp_path / "p")
    files = {str(p.relative_to(tmp_path / "p")) for p in (tmp_path / "p").rglob("*") if p.is_file()}
    assert {"src/stage_conv1.cu", "src/stage_conv2.cu", "include/resnet_block.h", "bench/resnet_block_bench.cu",
            "include/cusync/conv/conv.cuh", "bench/conv_reference.cuh", "bench/conv_bench.cuh"} <= files
    unit = (tmp_path / "p" / "src" / "stage_conv2.cu").read_text()
    assert "cutlass::epilogue::thread::ReLu, /*kResidual=*/true" in unit
    assert "cutlass::gemm::GemmShape<128, 64, 64>" in unit
    header = (tmp_path / "p" / "include" / "resnet_block.h").read_text()
    assert '{"conv2", 0, -1, 56, 56, 64, 64, 3, 3, 56, 56, 1, 1, 1, 128, 64, true, 9, 1}' in header


@pytest.mark.nvcc
def test_resnet_block_compiles(tmp_path: Path, cutlass_dir: Path) -> None:
    cmake, nvcc = shutil.which("cmake"), shutil.which("nvcc")
    if cmake is None or nvcc is None:
        pytest.skip("cmake or nvcc not found")
    build = tmp_path / "build"
    configure = [cmake, "-S", str(REPO / "generated" / "resnet_block"), "-B", str(build), f"-DCUTLASS_DIR={cutlass_dir}",
                 "-DCMAKE_CUDA_ARCHITECTURES=90a", f"-DCMAKE_CUDA_COMPILER={nvcc}", "-DRESNET_BLOCK_WERROR=ON"]
    if shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    out = subprocess.run(configure, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    out = subprocess.run([cmake, "--build", str(build), "-j", str(os.cpu_count() or 2)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert (build / "resnet_block_bench").is_file()


@pytest.fixture(scope="module")
def conv_benches(cutlass_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("conv-gpu")
    benches = {}
    for name, spec in (("resnet_block", EXAMPLES_DIR / "resnet_block.yaml"), ("conv_mix", DATA / "conv_mix.yaml"),
                       ("conv_mix_bf16", DATA / "conv_mix_bf16.yaml")):
        generate(spec, root / name)
        build = root / name / "build"
        subprocess.run(["cmake", "-S", str(root / name), "-B", str(build), f"-DCUTLASS_DIR={cutlass_dir}",
                        "-DCMAKE_CUDA_ARCHITECTURES=90a"], check=True, capture_output=True)
        out = subprocess.run(["cmake", "--build", str(build), "-j", str(os.cpu_count() or 2)], capture_output=True, text=True)
        assert out.returncode == 0, out.stdout[-4000:]
        benches[name] = build / f"{name}_bench"
    return benches


@pytest.mark.gpu
@pytest.mark.parametrize("name", ("resnet_block", "conv_mix", "conv_mix_bf16"))
def test_gpu_tile_synced_equals_back_to_back_and_the_reference(conv_benches: dict[str, Path], name: str) -> None:
    out = subprocess.run([str(conv_benches[name]), "--batch", "1,3", "--check-only"], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("bitwise yes") == 2 and "all checks passed" in out.stdout


@pytest.mark.gpu
@pytest.mark.parametrize("launch", ([], ["--two-streams"]))
def test_gpu_missing_post_times_out_naming_the_tile(conv_benches: dict[str, Path], launch: list[str]) -> None:
    out = subprocess.run([str(conv_benches["conv_mix"]), "--batch", "3", "--missing-post", "s2", *launch],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert re.search(r"stage s3, tile \(m \d+, n \d+\), timed out waiting for s2 tile row \d+", out.stdout), out.stdout


@pytest.mark.gpu
def test_gpu_two_stream_overlap_equals_back_to_back(conv_benches: dict[str, Path]) -> None:
    out = subprocess.run([str(conv_benches["conv_mix"]), "--batch", "1,3", "--check-only", "--two-streams"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("bitwise yes") == 2 and "two streams" in out.stdout


def test_all_tile_rows_have_reads() -> None:
    """Every consumer tile reads something of its producer (padding never swallows a whole window)."""
    plan = make_conv_plan(load_spec(DATA / "conv_mix.yaml"))
    for st, batch in itertools.product(plan.stages[1:], (1, 3)):
        for tm in range(st.tiles_m(batch)):
            assert len(st.waited_rows(tm, plan.stages[st.producer], batch)) >= 1


def test_producer_rows_no_window_reads_are_still_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 1x1 stride-2 conv reads no odd row: those producer tile rows are waited for anyway (widened waits),
    else the run could close (bump the epoch) while a producer tile is still to post."""
    data = _small(h=16, w=64, tile={"threadblock": [64, 64, 32], "warp": [32, 32, 32]})
    data["stages"][1].update({"r": 1, "s": 1, "stride": 2, "padding": 0, "residual": None})
    plan = make_conv_plan(parse_spec(data))
    for batch in (1, 2, 3, 4):
        verify_conv(plan, batch)
    raw = ConvStagePlan.waited_rows

    def window_only(self: ConvStagePlan, tm: int, producer: ConvStagePlan, batch: int) -> range:
        first, last = self.window_pixels(*self.tile_pixels(tm, batch))
        return range(first // producer.tile.m, last // producer.tile.m + 1)

    assert raw is not window_only
    monkeypatch.setattr(ConvStagePlan, "waited_rows", window_only)
    with pytest.raises(VerificationError) as err:
        verify_conv(plan, 1)
    assert "no c2 tile waits for c1 tile row" in err.value.message


@pytest.mark.parametrize("args", (["run", "resnet_block", "--m", "1"], ["tune", "resnet_block"],
                                  ["generate", "resnet_block", "--torch", "-o", "unused"]))
def test_gemm_only_commands_refuse_a_conv_chain(args: list[str], tmp_path: Path) -> None:
    out = subprocess.run(["python3", "-m", "cusync_gen.cli", *args], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 2, out.stdout + out.stderr
    assert "conv chain" in out.stderr or "GEMM chains" in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "unused").exists()


@pytest.mark.nvcc
def test_the_device_window_is_the_planned_one(tmp_path: Path, cutlass_dir: Path) -> None:
    """ConvWindow (templates/conv/include/cusync/conv/conv.cuh), compiled for the host, gives the producer pixel
    range that ConvStagePlan.window_pixels gives (and so the proof's premise) for random convolutions."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found")
    rng = random.Random(11)
    cases = []
    for _ in range(300):
        r, dil, stride = rng.choice((1, 3, 5, 7)), rng.choice((1, 2, 3)), rng.choice((1, 2, 3, 4))
        pad = rng.randint(0, (r - 1) * dil)
        h, w = rng.randint(r * dil, 40), rng.randint(1, 40)
        p = (h + 2 * pad - dil * (r - 1) - 1) // stride + 1
        q = rng.randint(1, 40)
        n = rng.randint(1, 5)
        m0 = rng.randrange(n * p * q)
        m1 = rng.randint(m0 + 1, n * p * q)
        cases.append((h, w, p, q, r, stride, pad, dil, m0, m1))
    for _ in range(40):  # batches that take pixel indices close to the 2^30 bound (32-bit index arithmetic)
        r, dil, stride, pad = 3, 1, rng.choice((1, 2)), 1
        h, w = rng.randint(3, 224), rng.randint(1, 224)
        p = (h + 2 * pad - dil * (r - 1) - 1) // stride + 1
        q = (w + 2 * pad - dil * (r - 1) - 1) // stride + 1
        n = (1 << 30) // (h * w) - 1
        m1 = rng.randint(n * p * q - 5 * p * q, n * p * q)
        cases.append((h, w, p, q, r, stride, pad, dil, rng.randrange(m1), m1))
    src = tmp_path / "window.cu"
    rows = ",\n".join("{%s}" % ", ".join(map(str, c)) for c in cases)
    src.write_text('#include <cstdio>\n#include "cusync/conv/conv.cuh"\n'
                   f"long long cases[][10] = {{{rows}}};\n"
                   "int main() {\n  for (auto& c : cases) {\n"
                   "    cusync::conv::ConvWindow win{int(c[0]), int(c[1]), int(c[2]), int(c[3]), int(c[4]), int(c[5]), "
                   "int(c[6]), int(c[7])};\n"
                   '    std::printf("%lld %lld\\n", (long long)win.first_pixel(c[8]), (long long)win.last_pixel(c[9]));\n'
                   "  }\n}\n")
    exe = tmp_path / "window"
    out = subprocess.run([nvcc, "-std=c++17", "--expt-relaxed-constexpr", "-I", str(REPO / "templates" / "runtime" / "include"),
                          "-I", str(REPO / "templates" / "conv" / "include"), "-isystem", str(cutlass_dir / "include"),
                          str(src), "-o", str(exe)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    got = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split("\n")
    for case, line in zip(cases, got):
        h, w, p, q, r, stride, pad, dil, m0, m1 = case
        st = ConvStagePlan(index=1, name="x", producer=0, residual=None, h=h, w=w, c=8, k=8, r=r, s=1, p=p, q=q,
                           pad=pad, stride=stride, dilation=dil, bias=False, epilogue=None, tile=None)  # type: ignore[arg-type]
        assert tuple(map(int, line.split())) == st.window_pixels(m0, m1), case


@pytest.mark.nvcc
def test_the_library_rule_is_the_planned_one(tmp_path: Path) -> None:
    """cusync::conv::default_conv_mode (templates/conv/include/cusync/conv/chain.h, what ConvChain::mode uses
    without set_mode or autotune), compiled for the host, picks what ConvPlan.run_mode says, reason included,
    for the examples and the correctness specs at many batches and SM counts, built for sm_90 and sm_80."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found")
    cases, expected = [], []
    specs = [EXAMPLES_DIR / f"{n}.yaml" for n in EXAMPLES_CONV + EXAMPLES_CONV_SM90] + [DATA / "conv_mix.yaml",
                                                                                        DATA / "conv_mix_sm90.yaml"]
    for path, target in itertools.product(specs, ("sm_90", "sm_80")):
        if target == "sm_80" and "sm90" in path.name:
            continue  # the sm90 kernels build for sm_90 only
        plan = make_conv_plan(load_spec(path), target=target)
        for batch, sms in itertools.product(sorted({1, 2, 3, 5, 8, 17, 32, plan.max_batch}), (1, 8, 132)):
            if batch > plan.max_batch:
                continue
            at = plan.at(batch)  # the tile configuration that runs this batch
            producers = [(st.tiles_m(batch) * st.tiles_n, sms * st.blocks_per_sm, st.name)
                         for st in at.stages if at.has_consumer(st.index)]
            cases.append((producers, min(st.k_steps for st in at.stages), plan.overlap_rule.cpp, plan.programmatic))
            expected.append("%s|%s" % plan.run_mode(batch, sms))
    lines = []
    for producers, steps, overlap_rule, programmatic in cases:
        tiles = ", ".join(str(t) for t, _, _ in producers) or "0"
        slots = ", ".join(str(s) for _, s, _ in producers) or "0"
        names = ", ".join(f'"{n}"' for _, _, n in producers) or '""'
        lines.append(f"  {{ long long t[] = {{{tiles}}}; long long s[] = {{{slots}}}; char const* n[] = {{{names}}};\n"
                     f"    int64_t t64[16], s64[16]; for (int i = 0; i < {len(producers)}; ++i) {{ t64[i] = t[i]; s64[i] = s[i]; }}\n"
                     f"    cusync::conv::ConvMode const m = cusync::conv::default_conv_mode({len(producers)}, t64, s64, n, {steps}, {overlap_rule}, "
                     f"{'true' if programmatic else 'false'}, reason, sizeof(reason));\n"
                     '    std::printf("%s|%s\\n", cusync::conv::to_string(m), reason); }')
    src = tmp_path / "rule.cu"
    src.write_text('#include <cstdio>\n#include "cusync/conv/chain.h"\nint main() {\n  char reason[256];\n'
                   + "\n".join(lines) + "\n}\n")
    exe = tmp_path / "rule"
    out = subprocess.run([nvcc, "-std=c++17", "-I", str(REPO / "templates" / "runtime" / "include"),
                          "-I", str(REPO / "templates" / "conv" / "include"), str(src), "-o", str(exe)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    got = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
    assert got == expected


def test_the_overlap_hooks_and_the_bounded_kernels_are_generated(tmp_path: Path) -> None:
    """The per-tile hooks (ConvHooks, lean by default, each bit a knob the bench times against the first ones) and
    the second kernel per stage, built with __launch_bounds__ for the blocks per SM the tile's shared memory
    allows (run() takes it where the occupancy calculator says it holds more blocks)."""
    generate(EXAMPLES_DIR / "resnet_block.yaml", tmp_path / "p")
    conv = (tmp_path / "p" / "include" / "cusync" / "conv" / "conv.cuh").read_text()
    chain_h = (tmp_path / "p" / "include" / "cusync" / "conv" / "chain.h").read_text()
    chain = (tmp_path / "p" / "include" / "cusync" / "conv" / "chain.cuh").read_text()
    unit = (tmp_path / "p" / "src" / "stage_conv2.cu").read_text()
    main = (tmp_path / "p" / "bench" / "resnet_block_bench.cu").read_text()
    assert '#include "conv_bench.cuh"' in main and "using Chain = resnet_block::ResnetBlock;" in main
    bench = (tmp_path / "p" / "bench" / "conv_bench.cuh").read_text()  # the driver the project's main() runs
    bits = {name: int(value.rstrip("u")) for name, value in
            re.findall(r"(kHook\w+|kHooks\w+) = (\d+u)", chain_h)}
    assert bits["kHooksLean"] == (bits["kHookEpochOnce"] | bits["kHookEarlyFinish"] | bits["kHookOneExitWait"]
                                  | bits["kHookBlockOrder"] | bits["kHookPollAhead"] | bits["kHookFinishOnce"])
    assert bits["kHooksLegacy"] == 0 and bits["kHookAssumePosted"] & bits["kHooksLean"] == 0
    assert "unsigned hooks_ = kHooksLean;" in chain_h
    assert "__launch_bounds__(Kernel::kThreadCount, kMinBlocks)" in conv
    assert "int occupancy_conv2(bool bounded) { return Conv::occupancy(bounded); }" in unit
    assert "occupancy_[c][s][1] = configs_[c]->occupancy[s](true);" in chain  # every tile configuration's kernels
    # the bounded kernel only for one-iteration tiles past a wave of the plain kernel; the largest carve-out
    # only for it (the plain kernel keeps the driver's, and more L1)
    assert "at(batch).stages[stage].k_steps <= 1" in chain_h and "> int64_t(sms_) * blocks[0]" in chain_h
    assert "prepare_kernel(kernel<false>(), false)" in conv and "prepare_kernel(kernel<true>(), true)" in conv
    # early finish only with the epoch read once (else end_tile would count the block a second time)
    assert "if (lean && (hooks & kHookEarlyFinish) != 0u && params.sync.counts_finish" in conv
    for flag in ("--hooks", "--plain-kernels", "--profile-hooks"):
        assert flag in bench
    assert '"legacy_overlap_us' in bench.replace('\\"', '"') and '"rule' in bench.replace('\\"', '"')


def test_the_bounded_kernel_blocks_follow_shared_memory() -> None:
    """SyncedConv::kMinBlocks: the blocks of an sm_90 SM's 228 KB (1 KB reserved per block) at most 3, at least 1;
    mirrored here for the examples' tiles (fp16, 3 stages: the mainloop's A and B tiles per stage)."""
    def min_blocks(m: int, n: int, k: int, stages: int) -> int:
        smem = stages * (m * k + n * k) * 2
        return max(1, min(3, (228 << 10) // (smem + 1024)))
    assert min_blocks(128, 64, 64, 3) == 3    # resnet, bottleneck: 72 KB, registers hold the plain kernel to 2
    assert min_blocks(128, 128, 64, 3) == 2   # vgg: 96 KB, shared memory holds it to 2 (no bounded kernel gain)
    conv = (REPO / "templates" / "conv" / "include" / "cusync" / "conv" / "conv.cuh").read_text()
    assert "kSmemBlocks = (228 << 10) / (kSmemBytes + (1 << 10));" in conv
    assert "kMinBlocks = kSmemBlocks < 1 ? 1 : kSmemBlocks > 3 ? 3 : kSmemBlocks;" in conv


def _ptxas_report(example: str, tmp_path: Path, cutlass_dir: Path) -> str:
    """ptxas's report (-Xptxas -v, stderr) for the example's conv2 unit, built for sm_90a as its project does."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found")
    generate(EXAMPLES_DIR / f"{example}.yaml", tmp_path / "p")
    out = subprocess.run([nvcc, "-std=c++17", "-arch=sm_90a", "--expt-relaxed-constexpr", "-DNDEBUG", "-O3",
                          "-I", str(tmp_path / "p" / "include"), "-I", str(tmp_path / "p" / "src"),
                          "-I", str(cutlass_dir / "include"), "-I", str(cutlass_dir / "tools" / "util" / "include"),
                          "-Xptxas", "-v", "-c", "-o", str(tmp_path / "u.o"), str(tmp_path / "p" / "src" / "stage_conv2.cu")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stderr


@pytest.mark.nvcc
def test_the_bounded_kernel_fits_three_blocks(tmp_path: Path, cutlass_dir: Path) -> None:
    """ptxas's report for resnet_block's conv2 unit: the bounded kernel uses at most 168 registers (3 blocks of 128
    threads in 64K registers), the plain one more (2 blocks)."""
    stderr = _ptxas_report("resnet_block", tmp_path, cutlass_dir)
    regs = [int(r) for r in re.findall(r"Used (\d+) registers", stderr)]
    kernels = [r for r in regs if r > 64]  # the two conv kernels (the helpers use few)
    assert len(kernels) == 2 and min(kernels) <= 168 < max(kernels), regs


def test_k_steps_in_the_stage_table() -> None:
    """ConvStageInfo::k_steps (what ConvChain::bounded reads): the tile's main-loop iterations, GEMM K over the
    tile's K step; only the bottleneck's conv3 (1x1, 64 channels in) is one iteration among the examples."""
    for name in EXAMPLES_CONV:
        header = (REPO / "generated" / name / "include" / f"{name}.h").read_text()
        plan = make_conv_plan(load_spec(EXAMPLES_DIR / f"{name}.yaml"))
        for st in plan.stages:
            steps = -(-st.gemm_k // st.tile.k)
            assert st.k_steps == steps
            row = re.search(r'\{"%s", [^}]*\}' % st.name, header).group(0)
            assert row.endswith(f", {steps}, {plan.overlap_cluster_n('', st)}}}"), row
            assert (steps == 1) == ((name, st.name) in {("bottleneck_block", "conv3")})


@pytest.mark.nvcc
def test_the_sm90_conv_unit_compiles_without_calls_or_spills(tmp_path: Path, cutlass_dir: Path) -> None:
    """resnet_block_sm90's conv2 unit (the residual's TMA loads, the window waits in the load warp, the posting
    epilogue) builds for sm_90a; ptxas reports no stack frame and no spills: the waits are inlined (a call in a
    warp-specialized kernel costs its math warps registers) and the accumulators fit one warp group."""
    stderr = _ptxas_report("resnet_block_sm90", tmp_path, cutlass_dir)
    kernels = list(re.finditer(r"Compiling entry function '(\w*synced_conv_sm90_kernel\w*ConvUniversal\w*)'.*?Used (\d+) registers",
                               stderr, re.S))
    assert len(kernels) == 2, stderr[-3000:]  # the stage's own 128 x 64 tiles and tile_configs' 64 x 64 (batch 1)
    for kernel in kernels:
        report = stderr[kernel.start():kernel.end()]
        assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in report, report
    # The persistent kernel of the stage's own tiles (more than one wave): CUTLASS's ping-pong GEMM kernel over the
    # conv mainloop. Its 40-register producer warps hold the window waits (in the load warp, and in the poll warp,
    # the kernel's auxiliary producer warp) and the ticket code: no spills either since the window's index
    # arithmetic is 32-bit (with 64-bit divisions ptxas spilled there; NOTES c10).
    persistent = list(re.finditer(r"Compiling entry function '(\w*synced_conv_sm90_kernel\w*GemmUniversal\w*)'.*?Used (\d+) registers",
                                  stderr, re.S))
    assert len(persistent) == 1, stderr[-3000:]
    report = stderr[persistent[0].start():persistent[0].end()]
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in report, report
    assert "wgmma.mma_async instructions are serialized" not in stderr


@pytest.mark.nvcc
def test_the_sm90_cluster_kernel_compiles_without_spills(tmp_path: Path, cutlass_dir: Path) -> None:
    """vgg_block_sm90's conv2 unit holds the persistent kernel twice: unclustered (the other modes, and the overlap
    with tickets) and in 1 x 2 clusters (the overlap's static order, TMA multicast of the activations); both build
    for sm_90a with no stack frame and no spills, and the wgmma instructions are not serialized."""
    stderr = _ptxas_report("vgg_block_sm90", tmp_path, cutlass_dir)
    persistent = list(re.finditer(r"Compiling entry function '(\w*synced_conv_sm90_kernel\w*GemmUniversal\w*)'.*?Used (\d+) registers",
                                  stderr, re.S))
    assert len(persistent) == 2, stderr[-3000:]
    assert persistent[0].group(1) != persistent[1].group(1)  # two kernels: cluster shapes 1 x 1 and 1 x 2
    for kernel in persistent:
        report = stderr[kernel.start():kernel.end()]
        assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in report, report
    assert "wgmma.mma_async instructions are serialized" not in stderr


def test_sm90_persistent_kernels_run_beyond_one_wave() -> None:
    """A configuration's units hold the persistent kernel where some stage has more tiles than one wave at the
    largest batch it runs; a stage takes it at a batch where its own tiles are more than one wave (ConvChain::
    persistent mirrors ConvPlan.stage_persistent), and validate says which kernel each stage runs."""
    plan = make_conv_plan(load_spec(EXAMPLES_DIR / "resnet_block_sm90.yaml"))
    assert [(t.suffix, t.persistent) for t in plan.tables] == [("_b1", False), ("", True)]
    assert plan.persistent_suffixes == frozenset({""})
    for batch, expected in ((1, False), (3, False), (5, False), (6, True), (32, True)):
        at = plan.at(batch)  # 128 x 64 tiles above batch 1: 3136 / 128 = 24.5 tile rows per image, one channel tile
        assert [at.stage_persistent(st, batch) for st in at.stages] == [expected] * 2, batch
    assert "kernel: persistent (132 CTAs" in plan.describe(32) and "kernel: one block per tile" in plan.describe(3)
    assert "kernel:" not in make_conv_plan(load_spec(EXAMPLES_DIR / "resnet_block.yaml")).describe(32)  # sm80
    mix = make_conv_plan(load_spec(DATA / "conv_mix_sm90.yaml"))
    assert not any(t.persistent for t in mix.tables)  # 15 x 13 images: every stage fits one wave at batch 3
    waves = make_conv_plan(load_spec(DATA / "conv_mix_sm90_waves.yaml"))
    assert [waves.stage_persistent(st, 24) for st in waves.stages] == [True, False, True, False, True]
    assert [waves.stage_persistent(st, 8) for st in waves.stages] == [True, False, False, False, False]
    assert not any(waves.stage_persistent(st, 3) for st in waves.stages)


def test_sm90_persistent_kernels_are_generated_where_planned(tmp_path: Path) -> None:
    generate(EXAMPLES_DIR / "resnet_block_sm90.yaml", tmp_path / "p")
    unit = (tmp_path / "p" / "src" / "stage_conv2.cu").read_text()
    chain = (tmp_path / "p" / "src" / "resnet_block_sm90.cu").read_text()
    assert "using PersistentConv = cusync::conv::PersistentConvSm90<cutlass::half_t, 128, 64, 64," in unit
    assert "PersistentConv_b1" not in unit and "PersistentConv::prepare()" in unit
    assert "if (launch.persistent) {\n    return cusync::conv::launch_conv<PersistentConv, cutlass::half_t>(kStages[1]" in unit
    tables = re.findall(r"constexpr cusync::conv::ConvTables (kTables\w*)\{.*?\};", chain, re.S)
    assert tables == ["kTables_b1", "kTables"]
    base = re.search(r"constexpr cusync::conv::ConvTables kTables\{.*?\};", chain, re.S).group(0)
    small = re.search(r"constexpr cusync::conv::ConvTables kTables_b1\{.*?\};", chain, re.S).group(0)
    assert "/*persistent=*/true" in base and "persistent" not in small
    header = (tmp_path / "p" / "include" / "cusync" / "sm90" / "ticket_scheduler.cuh")
    assert header.is_file()  # the persistent kernel's tile queue, shared with the sm90 GEMMs


def test_sm90_overlap_cluster_kernels_where_the_overlap_can_pay(tmp_path: Path) -> None:
    """Beyond one wave the overlap runs a consumer stage's persistent kernel in 1 x 2 clusters (two CTAs walking
    neighbouring channel tiles together, sharing the activations' loads) where the configuration holds persistent
    kernels, the stage waits for a producer and its channel tiles pair up; the stage table says so
    (ConvStageInfo::cluster_n), the unit holds it beside the persistent kernel, and only the overlap launches it."""
    vgg = make_conv_plan(load_spec(EXAMPLES_DIR / "vgg_block_sm90.yaml"))
    assert vgg.persistent_suffixes == frozenset({""})
    cluster = {t.suffix: [vgg.overlap_cluster_n(t.suffix, st) for st in t.stages] for t in vgg.tables}
    # 256 channels in 128-wide tiles: two channel tiles; conv1 reads the chain input (no producer to overlap)
    assert cluster == {"_b1": [1, 1, 1], "": [1, 2, 2]}
    resnet = make_conv_plan(load_spec(EXAMPLES_DIR / "resnet_block_sm90.yaml"))  # 64 channels: one channel tile
    assert all(resnet.overlap_cluster_n(t.suffix, st) == 1 for t in resnet.tables for st in t.stages)
    text = vgg.describe(32)
    assert text.count("in the overlap in clusters of 1 x 2 CTAs") == 2
    assert "in clusters of" not in vgg.describe(1) and "in clusters of" not in resnet.describe(32)
    generate(EXAMPLES_DIR / "vgg_block_sm90.yaml", tmp_path / "p")
    unit = (tmp_path / "p" / "src" / "stage_conv2.cu").read_text()
    assert "using ClusterConv = cusync::conv::PersistentConvSm90<cutlass::half_t, 128, 128, 64," in unit
    assert "/*kClusterN=*/2>;" in unit and "ClusterConv_b1" not in unit
    assert ("if (launch.persistent && launch.cluster) {\n    return cusync::conv::launch_conv<ClusterConv, "
            "cutlass::half_t>(kStages[1]") in unit
    assert "ClusterConv" not in (tmp_path / "p" / "src" / "stage_conv1.cu").read_text()
    header = (tmp_path / "p" / "include" / "vgg_block_sm90.h").read_text()
    assert ", true, 36, 2}," in header and ", true, 36, 1}," in header
    chain = (tmp_path / "p" / "include" / "cusync" / "conv" / "chain.cuh").read_text()
    assert "l.cluster = synced && !sync.dynamic_order && overlap_cluster(s, a.batch);" in chain
    assert "--no-clusters" in (tmp_path / "p" / "bench" / "conv_bench.cuh").read_text()


# ---------------------------------------------------------------------------------------------------
# Tiles by batch (tile_configs of sm90 conv chains)


def _vgg_sm90(**configs: object) -> dict:
    data = yaml.safe_load((EXAMPLES_DIR / "vgg_block_sm90.yaml").read_text())
    data["tile_configs"] = configs["tile_configs"] if "tile_configs" in configs else data.get("tile_configs", [])
    return data


@pytest.mark.parametrize(("configs", "field", "text"), [
    ([{"batch_max": 4, "tiles": {}}, {"batch_max": 4, "tiles": {}}], "tile_configs[1].batch_max", "growing batch_max"),
    ([{"batch_max": 32, "tiles": {}}], "tile_configs[0].batch_max", "below 32"),
    ([{"batch_max": 0, "tiles": {}}], "tile_configs[0].batch_max", "greater than 0"),
    ([{"batch_max": 1, "tiles": {"conv9": [64, 128, 64]}}], "tile_configs[0].tiles.conv9", "use one of: conv1, conv2, conv3"),
    ([{"batch_max": 1, "tiles": {"conv2": [32, 128, 64]}}], "tile_configs[0]: stages[1].tile.threadblock", "64 or 128"),
    ([{"batch_max": 1, "tiles": {"conv2": [64, 128]}}], "tile_configs[0].tiles.conv2", "three integers"),
    ([{"batch_max": 1, "tiles": {}, "m_max": 4}], "tile_configs[0].m_max", "batch_max"),
])
def test_conv_tile_configs_errors_name_the_field(configs: list, field: str, text: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec(_vgg_sm90(tile_configs=configs))
    assert err.value.field == field, err.value.message
    assert text in err.value.message + " " + err.value.hint
    assert err.value.hint


def test_conv_tile_configs_are_an_sm90_feature() -> None:
    data = yaml.safe_load((EXAMPLES_DIR / "vgg_block.yaml").read_text())
    data["tile_configs"] = [{"batch_max": 1, "tiles": {}}]
    with pytest.raises(SpecError) as err:
        parse_spec(data)
    assert err.value.field == "tile_configs" and "arch: sm90" in err.value.hint


def test_conv_tile_configs_plan_every_batch_on_its_tiles() -> None:
    """vgg_block_sm90 runs batch 1 on tile_configs[0]'s 64 x 128 tiles and larger batches on its stages' 128 x 128:
    the plan, its proof (the configuration's last batch and the one above it), `validate`'s text and run()'s rule
    all take the tiles of the batch they describe."""
    plan = make_conv_plan(load_spec(EXAMPLES_DIR / "vgg_block_sm90.yaml"))
    assert [c.batch_max for c in plan.configs] == [1]
    assert [(t.suffix, t.batch_max) for t in plan.tables] == [("_b1", 1), ("", None)]
    assert [(s.tile.m, s.tile.n) for s in plan.at(1).stages] == [(64, 128)] * 3
    assert [(s.tile.m, s.tile.n) for s in plan.at(2).stages] == [(128, 128)] * 3
    assert plan.at(1).stages[0].tiles_m(1) == 49 and plan.at(32).stages[0].tiles_m(32) == 784
    assert {1, 2, 32} <= set(representative_batches(plan))
    assert "tiles at batch 1: tile_configs[0] (batches up to 1)" in plan.describe(1)
    assert "tile 64x128x64" in plan.describe(1) and "tile 128x128x64" in plan.describe(2)
    assert "(conv1: 98 tiles, 132 blocks at once)" in plan.run_mode(1)[1]
    assert "conv1 has 392 tiles" in plan.run_mode(8)[1]  # 128 x 128 tiles from batch 2 on
    assert verify_conv(plan, 1).tiles_checked["conv2"] == 49


def test_conv_tile_configs_are_generated_per_stage_and_chained_by_batch(tmp_path: Path) -> None:
    generate(EXAMPLES_DIR / "vgg_block_sm90.yaml", tmp_path / "p")
    header = (tmp_path / "p" / "include" / "vgg_block_sm90.h").read_text()
    unit = (tmp_path / "p" / "src" / "stage_conv2.cu").read_text()
    chain = (tmp_path / "p" / "src" / "vgg_block_sm90.cu").read_text()
    assert "inline constexpr cusync::conv::ConvStageInfo kStages_b1[kNumStages] = {" in header
    assert '{"conv2", 0, -2, 56, 56, 256, 256, 3, 3, 56, 56, 1, 1, 1, 64, 128, true, 36, 1},' in header
    assert "using Conv_b1 = cusync::conv::SyncedConvSm90<cutlass::half_t, 64, 128, 64," in unit
    assert "launch_conv<Conv_b1, cutlass::half_t>(kStages_b1[1], launch, stream)" in unit
    assert "Conv_b1::prepare()" in unit and "Conv::prepare()" in unit
    assert "/*smaller=*/&kTables_b1, /*smaller_batch_max=*/1,\n" in chain


@pytest.mark.nvcc
def test_conv_chain_picks_the_tables_of_the_batch(tmp_path: Path) -> None:
    """ConvChain::config / at / tiles_m / tiles_n walk ConvTables::smaller by batch (host code, no GPU)."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found")
    src = tmp_path / "pick.cu"
    src.write_text(r'''#include <cstdio>
#include "cusync/conv/chain.cuh"
using namespace cusync::conv;
constexpr ConvStageInfo kSmall[1] = {{"c", -1, -2, 8, 8, 64, 64, 3, 3, 8, 8, 1, 1, 1, 64, 64, false, 9}};
constexpr ConvStageInfo kMid[1] = {{"c", -1, -2, 8, 8, 64, 64, 3, 3, 8, 8, 1, 1, 1, 64, 128, false, 9}};
constexpr ConvStageInfo kBase[1] = {{"c", -1, -2, 8, 8, 64, 64, 3, 3, 8, 8, 1, 1, 1, 128, 64, false, 9}};
constexpr ConvTables kT1{1, kSmall, nullptr, nullptr, nullptr, 2, true, kOverlapRuleSm90};
constexpr ConvTables kT4{1, kMid, nullptr, nullptr, nullptr, 2, true, kOverlapRuleSm90, &kT1, 1};
constexpr ConvTables kT{1, kBase, nullptr, nullptr, nullptr, 2, true, kOverlapRuleSm90, &kT4, 4};
int main() {
  ConvChain c(kT);
  for (int b : {1, 2, 4, 5, 32}) std::printf("%d:%d:%d:%d:%d ", b, c.config(b), c.at(b).stages[0].tile_m, c.tiles_m(0, b), c.tiles_n(0, b));
  std::printf("%d\n", c.num_configs());
}
''')
    exe = tmp_path / "pick"
    out = subprocess.run([nvcc, "-std=c++17", "-I", str(REPO / "templates" / "runtime" / "include"),
                          "-I", str(REPO / "templates" / "conv" / "include"), str(src), "-o", str(exe)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    got = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    # batch: configuration, tile_m, tiles_m (8x8 pixels per image), tiles_n (64 channels)
    assert got == ["1:2:64:1:1", "2:1:64:2:1", "4:1:64:4:1", "5:0:128:3:1", "32:0:128:16:1", "3"]
