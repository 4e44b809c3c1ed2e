"""The committed projects under generated/ are exactly what the generator emits from the shipped specs.

On a mismatch: `python3 -m cusync_gen.cli generate cusync_gen/examples/NAME.yaml -o generated/NAME`
regenerates (or `cusync-gen generate ...`); the failure shows a unified diff of what changed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import EXAMPLES, EXAMPLES_ATTENTION_SM90, REPO
from cusync_gen.render import GeneratedDiffers, generate, output_files, plan_of_spec
from cusync_gen.spec import load_spec


@pytest.mark.parametrize("name", EXAMPLES + EXAMPLES_ATTENTION_SM90)
def test_generated_matches_generator(name: str) -> None:
    try:
        generate(REPO / "cusync_gen" / "examples" / f"{name}.yaml", REPO / "generated" / name, check=True)
    except GeneratedDiffers as err:
        pytest.fail(f"{err.message}\n{err.hint}")


@pytest.mark.parametrize("name", EXAMPLES + EXAMPLES_ATTENTION_SM90)
def test_no_stray_files_in_generated(name: str) -> None:
    plan = plan_of_spec(load_spec(REPO / "cusync_gen" / "examples" / f"{name}.yaml"))
    expected = {f.path for f in output_files(plan)} | {"manifest.json"}
    root = REPO / "generated" / name
    on_disk = {
        str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "build" not in p.relative_to(root).parts
    }
    assert on_disk == expected


def test_check_reports_a_changed_file(tmp_path: Path) -> None:
    spec = REPO / "cusync_gen" / "examples" / "two_gemm.yaml"
    out = generate(spec, tmp_path / "two_gemm")
    (out / "src" / "two_gemm.cu").write_text("// edited by hand\n")
    with pytest.raises(GeneratedDiffers) as info:
        generate(spec, out, check=True)
    assert "src/two_gemm.cu" in info.value.message


def test_generation_is_deterministic_and_keeps_build_dir(tmp_path: Path) -> None:
    spec = REPO / "cusync_gen" / "examples" / "llama_mlp.yaml"
    out = generate(spec, tmp_path / "p")
    (out / "build").mkdir()
    (out / "build" / "keep.txt").write_text("x")
    first = {p: p.read_bytes() for p in out.rglob("*.cu")}
    generate(spec, out)
    assert {p: p.read_bytes() for p in out.rglob("*.cu")} == first
    assert (out / "build" / "keep.txt").is_file()
