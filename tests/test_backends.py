"""Issue 11: backends as modules, one runtime, and one source of truth for derived numbers.

- Every backend is a module in cusync_gen/backends with its own template folder, chosen from one table;
  shared templates hold no branch on the architecture, and render.py none on the plan's type.
- The emitted wait value of every edge is EdgePlan.wait_value, the number verify.py proves, in every tile
  configuration; the C++ static_asserts it against the emitted tiles (a wrong table does not compile).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import EXAMPLES, EXAMPLES_ATTENTION_SM90, EXAMPLES_GEMM, REPO
from cusync_gen.backends import BACKENDS, backend_of
from cusync_gen.backends.protocol import Backend, Support
from cusync_gen.spec.archs import ARCHS, ArchFacts
from cusync_gen.render import output_files, plan_of_spec, render_project
from cusync_gen.spec import load_spec
from cusync_gen.verify import representative_ms, verify

SPECS = REPO / "cusync_gen" / "examples"
TEMPLATES = REPO / "templates"


def plan_of(name: str):  # noqa: ANN201
    return plan_of_spec(load_spec(SPECS / f"{name}.yaml"))


def test_each_backend_is_a_module_with_its_own_folder() -> None:
    for name, module in BACKENDS.items():
        assert isinstance(module, Backend), name
        assert module.NAME == name and (TEMPLATES / name).is_dir(), name
    for name in EXAMPLES + EXAMPLES_ATTENTION_SM90:
        plan = plan_of(name)
        assert backend_of(plan) is BACKENDS[plan.backend]


def test_every_backend_has_the_declared_members_with_their_signatures() -> None:
    """Each backend has every member of backends.protocol.Backend: data of the declared type, and functions
    whose parameters are the protocol's (without self)."""
    import inspect
    import typing

    hints = typing.get_type_hints(Backend)
    methods = {n for n, v in vars(Backend).items() if inspect.isfunction(v) and not n.startswith("_")}
    assert {"supports", "files", "context", "manifest_stages", "prove", "tune_pipeline"} <= methods
    for name, module in BACKENDS.items():
        for member in methods:
            want = list(inspect.signature(getattr(Backend, member)).parameters)[1:]
            assert list(inspect.signature(getattr(module, member)).parameters) == want, (name, member)
        for member in hints:
            assert hasattr(module, member), (name, member)
        assert isinstance(module.FACTS, ArchFacts) and module.FACTS in ARCHS.values()
        assert all(len(t) == 3 for t in module.TUNE_TILES)


def test_each_backend_says_which_specs_it_supports_and_why_not() -> None:
    for name in EXAMPLES + EXAMPLES_ATTENTION_SM90:
        spec = load_spec(SPECS / f"{name}.yaml")
        plan = plan_of(name)
        verdicts = {b: BACKENDS[b].supports(spec) for b in BACKENDS}
        assert all(isinstance(v, Support) and v.reason for v in verdicts.values())
        assert [b for b, v in verdicts.items() if v.ok] == [plan.backend], (name, verdicts)


def test_no_architecture_check_outside_the_facts_table_and_the_backends() -> None:
    """The enum and its facts table (spec/archs.py) are the only places that name an architecture member."""
    for path in sorted((REPO / "cusync_gen").rglob("*.py")):
        if "backends" in path.parts or path.name == "archs.py":
            continue
        assert "Arch.SM" not in path.read_text(), path.relative_to(REPO)


def test_shared_templates_and_render_do_not_branch_on_the_backend() -> None:
    for path in sorted([*(TEMPLATES / "project").rglob("*.j2"), *(TEMPLATES / "torch").rglob("*.j2")]):
        text = path.read_text()
        assert "plan.arch" not in text, path.relative_to(REPO)
    render = (REPO / "cusync_gen" / "render.py").read_text()
    assert "isinstance(plan" not in render and "Arch." not in render


def test_every_template_a_backend_includes_exists() -> None:
    for module in BACKENDS.values():
        for template in getattr(module, "PARTS", {}).values():
            assert (TEMPLATES / template).is_file(), template


def test_the_backends_import_nothing_above_them() -> None:
    for path in sorted((REPO / "cusync_gen" / "backends").glob("*.py")):
        text = path.read_text()
        for upper in ("cusync_gen.render", "cusync_gen.cli", "cusync_gen.build", "cusync_gen.tune"):
            assert upper not in text, (path.name, upper)


@pytest.mark.parametrize("name", EXAMPLES)
def test_projects_carry_only_headers_they_include(name: str) -> None:
    """No dead output: every copied header is included by some file of the project."""
    files = render_project(plan_of(name))
    included = set()
    for text in files.values():
        included |= set(re.findall(r'#include "([^"]+)"', text))
    for path in files:
        for root in ("include/", "bench/"):
            if path.startswith(root) and path.endswith((".h", ".cuh")):
                rel = path[len(root):]
                assert rel in included or path.startswith(f"include/{name}"), path


ROW = re.compile(r'^\s*\{"(\w+)", (.*)\},$', re.MULTILINE)


def emitted_tables(stages_h: str) -> list[list[list[str]]]:
    """kStages as emitted: per configuration, per stage, the fields after the name."""
    body = stages_h[stages_h.index("constexpr StageInfo kStages"):]
    body = body[:body.index("\n};\n")]
    configs = body.split("// configuration ")[1:]
    return [[m.group(2).split(", ") for m in ROW.finditer(c)] for c in configs]


@pytest.mark.parametrize("name", EXAMPLES_GEMM)
def test_the_emitted_wait_values_are_the_proved_ones(name: str) -> None:
    """StageInfo.wait_value / wait_value_b (fields 14 and 15) are EdgePlan.wait_value of the input edges,
    config by config; verify() proves exactly those numbers at every representative M."""
    plan = plan_of(name)
    tables = emitted_tables(render_project(plan)[f"src/{name}_stages.h"])
    assert len(tables) == len(plan.configs)
    for config, rows in zip(plan.configs, tables, strict=True):
        for stage, row in zip(config.stages, rows, strict=True):
            assert int(row[13]) == (stage.input.wait_value if stage.input else 0), (stage.name, row)
            assert int(row[14]) == (stage.input_b.wait_value if stage.input_b else 0), (stage.name, row)
            assert int(row[15]) == (stage.input.row_wait_value if stage.input else 0), (stage.name, row)
    for m in representative_ms(plan):
        proof = verify(plan, m)
        assert proof is not None


@pytest.mark.nvcc
def test_a_wrong_wait_value_does_not_compile(tmp_path: Path) -> None:
    """The static_assert of <name>_stages.h (cusync::wait_values_consistent) refuses a table whose wait
    value disagrees with its tiles and policies."""
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not Path(nvcc).exists():
        pytest.skip("nvcc not found")
    name = "gpt3_mlp"
    files = render_project(plan_of(name))
    for path, text in files.items():
        if path.startswith(("include/", "src/")):
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / path).write_text(text)
    main = tmp_path / "main.cu"
    main.write_text(f'#include "{name}_stages.h"\nint main() {{ return 0; }}\n')
    command = [nvcc, "-std=c++17", "-arch=sm_80", "--expt-relaxed-constexpr", "-I", str(tmp_path / "include"), "-I",
               str(tmp_path / "src"), "-c", str(main), "-o", str(tmp_path / "main.o")]
    ok = subprocess.run(command, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr[-2000:]
    stages = tmp_path / "src" / f"{name}_stages.h"
    text = stages.read_text()
    row = next(m for m in ROW.finditer(text) if m.group(2).split(", ")[3] != "-1")  # a stage with an input edge
    fields = row.group(2).split(", ")
    fields[13] = str(int(fields[13]) + 1)  # one more post than the producer sends
    stages.write_text(text.replace(row.group(0), f'    {{"{row.group(1)}", {", ".join(fields)}}},'))
    bad = subprocess.run(command, capture_output=True, text=True)
    assert bad.returncode != 0 and "wait value disagrees" in bad.stderr, bad.stderr[-2000:]


def test_output_files_come_from_the_backend() -> None:
    for name in EXAMPLES:
        plan = plan_of(name)
        assert output_files(plan) == backend_of(plan).files(plan)


def test_stage_operands_name_the_arguments_fields_and_their_dense_widths() -> None:
    """What pointers() emits for the run-time shape and leading-dimension checks (gemm_chain.stage_operands):
    llama_mlp_sm90 is gemm1 [8192 -> 5632] -> glu (one producer: gate | up) -> gemm2 [2816 -> 8192]."""
    from cusync_gen.backends.gemm_chain import buffers, stage_operands

    plan = plan_of("llama_mlp_sm90")
    gemm1, glu, gemm2 = stage_operands(plan)
    assert (gemm1.a.field, gemm1.a.cols, gemm1.b.field, gemm1.b.cols, gemm1.d.cols) == ("input", 8192, "gemm1_weight", 5632, 5632)
    assert (glu.a.field, glu.a.cols, glu.b, glu.d.cols, glu.gemm) == ("gemm1_out", 5632, None, 2816, False)
    assert (gemm2.a.field, gemm2.a.cols, gemm2.d.field) == ("glu_out", 2816, "gemm2_out")
    assert [b.field for b in buffers(plan)] == ["input", "gemm1_weight", "gemm1_out", "glu_out", "gemm2_weight", "gemm2_out"]
    split = stage_operands(plan_of("llama_mlp_split"))
    two_producer = next(o for o in split if not o.gemm)
    assert two_producer.b is not None and two_producer.b.cols == two_producer.d.cols  # up: the second producer's output


@pytest.mark.parametrize("name", ["two_gemm", "two_gemm_sm90", "llama_mlp_sm90"])
def test_a_bias_is_an_argument_of_the_gemm_that_asks_for_it(name: str, tmp_path: Path) -> None:
    """`bias: true` on every GEMM (issue 12 item 5): each gets `<stage>_bias` in the C++ and C arguments,
    passed to the runtime with its field name (refused when null), the manifest records it, and the kernels
    take it (sm90: the bias fusion in every kernel kind; sm80: the launch passes it)."""
    from conftest import bias_spec

    plan = plan_of_spec(load_spec(bias_spec(name, tmp_path)))
    files = render_project(plan)
    header, c_header, chain = (files[f"include/{plan.name}.h"], files[f"include/{plan.name}_c.h"],
                               files[f"src/{plan.name}.cu"])
    for stage in (s for s in plan.stages if s.op.value == "gemm"):
        assert f"Element const* {stage.name}_bias = nullptr;" in header
        assert f"const void* {stage.name}_bias;" in c_header
        assert f'bias_field[{stage.index}] = "{stage.name}_bias";' in chain
        if plan.arch.value == "sm90":
            assert "/*kBias=*/true" in files[f"src/stage_{stage.name}.cu"]
            # per configuration the stock, stream-K and cluster kernels (one Config each), and the ping-pong one
            assert files[f"src/stage_{stage.name}_stock.cu"].count("/*kBias=*/true") == 2 * len(plan.configs) + 1
    assert all(s.get("bias") for s in json.loads(files["manifest.json"])["stages"] if s["op"] == "gemm")
    plain = render_project(plan_of("two_gemm"))
    assert "_bias" not in plain["include/two_gemm.h"] and "bias" not in plain["manifest.json"]


def test_templates_print_values_and_derive_none() -> None:
    """Templates compute nothing: every number they print is a plan field or property (docs/architecture.md).
    The one arithmetic allowed is the column padding of generated comments and declarations (`" " * (w - len)`)."""
    arithmetic = re.compile(r"\{\{[^}]*?(\w|\)|\]) (\*|\+|-|//|%) [^}]*\}\}")
    for path in sorted(TEMPLATES.rglob("*.j2")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for match in arithmetic.finditer(line):
                assert '" " *' in match.group(0), (str(path.relative_to(REPO)), number, match.group(0))
        assert "2147483647" not in path.read_text(), path.relative_to(REPO)
