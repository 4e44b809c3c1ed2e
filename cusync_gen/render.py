"""Render a plan into a standalone CMake project, with nothing but Jinja.

The plan lists every output file (`project_files`); nothing is discovered by walking folders. Files are
rendered in memory first, then written through a temporary folder, so a failure never leaves a
half-written project; `generate(check=True)` compares instead of writing (the golden-file test).
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import jinja2

from cusync_gen import __version__
from cusync_gen.cpp import FILTERS
from cusync_gen.errors import CusyncError
from cusync_gen.paths import default_cutlass_dir, templates_dir
from cusync_gen.attention_plan import AttentionPlan, make_attention_plan
from cusync_gen.plan import ChainPlan, make_plan
from cusync_gen.spec import Arch, AttentionSpec, ChainSpec, Op, load_spec
from cusync_gen.verify import representative_ms, verify
from cusync_gen.verify_attention import verify_attention_plan

# The CuSync runtime every project gets (include/cusync/).
RUNTIME_HEADERS = (
    "status.h", "ptx.cuh", "sync_error.h", "semaphore.cuh", "policy.h", "tile_order.h", "stage.cuh",
    "chain_kernels.cuh", "swiglu.cuh",
)
# The backend headers each project gets (include/cusync/<backend>/), by spec arch.
BACKEND_HEADERS: dict[Arch, tuple[str, ...]] = {
    Arch.SM80: ("waiting_iterator.cuh", "gemm.cuh"),
    Arch.SM90: ("ticket_scheduler.cuh", "waiting_mainloop.cuh", "posting_epilogue.cuh", "gemm.cuh"),
}
SWIGLU_TEMPLATE = "project/src/stage_swiglu.cu.j2"
# The attention chain (sm80 backend): the runtime above plus its tile mapping and softmax stage.
ATTENTION_RUNTIME_HEADERS = (*RUNTIME_HEADERS, "attention.cuh", "softmax.cuh")
ATTENTION_BACKEND_HEADERS = ("waiting_iterator.cuh", "gemm.cuh", "batched_gemm.cuh")


@dataclass(frozen=True)
class OutputFile:
    """One file of a generated project: rendered from a template or copied verbatim."""

    path: str
    source: str
    template: bool
    stage: int | None = None


class GeneratedDiffers(CusyncError):
    """`generate --check` found files on disk that differ from what the generator emits now."""

    exit_code = 1


def _stage_files(plan: ChainPlan) -> list[OutputFile]:
    """One translation unit per stage; on sm90 a GEMM also gets its stock CUTLASS twin (the baselines)."""
    backend = plan.arch.value
    files: list[OutputFile] = []
    for stage in plan.stages:
        if stage.op is Op.SWIGLU:
            files.append(OutputFile(f"src/stage_{stage.name}.cu", SWIGLU_TEMPLATE, True, stage.index))
            continue
        files.append(OutputFile(f"src/stage_{stage.name}.cu", f"{backend}/stage_gemm.cu.j2", True, stage.index))
        if plan.arch is Arch.SM90:
            files.append(
                OutputFile(f"src/stage_{stage.name}_stock.cu", "sm90/stage_gemm_stock.cu.j2", True, stage.index)
            )
    return files


def project_files(plan: ChainPlan) -> list[OutputFile]:
    """Every file of the project, in a fixed order."""
    name = plan.name
    backend = plan.arch.value
    files = [
        OutputFile("CMakeLists.txt", "project/CMakeLists.txt.j2", True),
        OutputFile("README.md", "project/README.md.j2", True),
        OutputFile(f"include/{name}.h", "project/include/chain.h.j2", True),
        *(OutputFile(f"include/cusync/{h}", f"runtime/include/cusync/{h}", False) for h in RUNTIME_HEADERS),
        *(
            OutputFile(f"include/cusync/{backend}/{h}", f"{backend}/include/cusync/{backend}/{h}", False)
            for h in BACKEND_HEADERS[plan.arch]
        ),
        OutputFile(f"src/{name}_stages.h", "project/src/stages.h.j2", True),
        OutputFile(f"src/{name}.cu", "project/src/chain.cu.j2", True),
        *_stage_files(plan),
        OutputFile(f"bench/{name}_bench.cu", "project/bench/bench.cu.j2", True),
        OutputFile("bench/reference.cuh", "project/bench/reference.cuh", False),
    ]
    if plan.arch is Arch.SM90:
        files.append(OutputFile("bench/baselines.cuh", "project/bench/baselines.cuh", False))
    return files


def attention_files(plan: AttentionPlan) -> list[OutputFile]:
    """Every file of an attention project, in a fixed order (stage = index into plan.gemms)."""
    name = plan.name
    return [
        OutputFile("CMakeLists.txt", "attention/CMakeLists.txt.j2", True),
        OutputFile("README.md", "attention/README.md.j2", True),
        OutputFile(f"include/{name}.h", "attention/include/attention.h.j2", True),
        *(OutputFile(f"include/cusync/{h}", f"runtime/include/cusync/{h}", False) for h in ATTENTION_RUNTIME_HEADERS),
        *(OutputFile(f"include/cusync/sm80/{h}", f"sm80/include/cusync/sm80/{h}", False) for h in ATTENTION_BACKEND_HEADERS),
        OutputFile(f"src/{name}_stages.h", "attention/src/stages.h.j2", True),
        OutputFile(f"src/{name}.cu", "attention/src/attention.cu.j2", True),
        *(OutputFile(f"src/stage_{g.name}.cu", "attention/src/stage_gemm.cu.j2", True, i) for i, g in enumerate(plan.gemms)),
        OutputFile("src/stage_softmax.cu", "attention/src/stage_softmax.cu.j2", True),
        OutputFile(f"bench/{name}_bench.cu", "attention/bench/bench.cu.j2", True),
        OutputFile("bench/reference.cuh", "project/bench/reference.cuh", False),
        OutputFile("bench/attention_reference.cuh", "attention/bench/attention_reference.cuh", False),
    ]


def output_files(plan: ChainPlan | AttentionPlan) -> list[OutputFile]:
    return attention_files(plan) if isinstance(plan, AttentionPlan) else project_files(plan)


def plan_of_spec(spec: ChainSpec | AttentionSpec, target: str | None = None) -> ChainPlan | AttentionPlan:
    """The plan of either kind of spec (a GEMM chain's `stages:` or an `attention:` block)."""
    return make_attention_plan(spec, target) if isinstance(spec, AttentionSpec) else make_plan(spec, target)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters.update(FILTERS)
    return env


def cutlass_dir_expression(out_dir: Path, cutlass_dir: Path | None) -> str:
    """The CUTLASS_DIR default written into CMakeLists.txt.

    Relative to the project when both live in one tree (so committed projects are byte-identical on
    every machine), absolute otherwise.
    """
    cutlass = (cutlass_dir or default_cutlass_dir()).resolve()
    out = out_dir.resolve()
    common = Path(os.path.commonpath([cutlass, out]))
    if common != Path(common.anchor) and (common / "pyproject.toml").exists():
        return "${CMAKE_CURRENT_SOURCE_DIR}/" + os.path.relpath(cutlass, out)
    return str(cutlass)


def manifest(plan: ChainPlan | AttentionPlan, files: list[OutputFile]) -> str:
    """What `build` and `run` read: names, target, stages, and the generated files."""
    if isinstance(plan, AttentionPlan):
        stages = [{"name": row.name, "op": "softmax" if row.name == "softmax" else "gemm"} for row in plan.table]
    else:
        stages = [
            {
                "name": s.name,
                "op": s.op.value,
                "n": s.n,
                "k": s.k,
                "policy": s.input.policy.value if s.input else None,
                "producer": plan.stages[s.input.producer].name if s.input else None,
                "producer_b": plan.stages[s.input_b.producer].name if s.input_b else None,
                "epilogue": s.epilogue.value,
                "b_layout": s.b_layout.value,
            }
            for s in plan.stages
        ]
    data = {
        "generator": f"cusync-gen {__version__}",
        "name": plan.name,
        "class_name": plan.class_name,
        "spec_hash": plan.spec_hash,
        "arch": plan.arch.value,
        "target": plan.target,
        "cuda_arch": plan.cuda_arch,
        "dtype": plan.dtype.value,
        "library": plan.name,
        "bench": f"{plan.name}_bench",
        **({"kind": "attention"} if isinstance(plan, AttentionPlan) else {}),
        "stages": stages,
        "files": [f.path for f in files] + ["manifest.json"],
    }
    return json.dumps(data, indent=2) + "\n"


def render_project(plan: ChainPlan | AttentionPlan, cutlass_dir_expr: str) -> dict[str, str]:
    """Relative path -> file text, for the whole project."""
    env = _environment()
    files = output_files(plan)
    root = templates_dir()
    out: dict[str, str] = {}
    for f in files:
        if f.template:
            context = {"plan": plan, "version": __version__, "cutlass_dir": cutlass_dir_expr}
            if isinstance(plan, AttentionPlan):
                context["gemm"] = plan.gemms[f.stage] if f.stage is not None else None
            else:
                context["stage"] = plan.stages[f.stage] if f.stage is not None else None
            out[f.path] = env.get_template(f.source).render(**context)
        else:
            out[f.path] = (root / f.source).read_text()
    out["manifest.json"] = manifest(plan, files)
    return out


def _diff(out_dir: Path, rendered: dict[str, str]) -> list[str]:
    lines: list[str] = []
    for rel, text in rendered.items():
        path = out_dir / rel
        old = path.read_text() if path.is_file() else ""
        if old != text:
            lines.append(f"differs: {rel}")
            diff = difflib.unified_diff(old.splitlines(), text.splitlines(), f"on disk/{rel}", f"generated/{rel}",
                                        lineterm="", n=1)
            lines.extend(list(diff)[:20])
    return lines


def _write(out_dir: Path, rendered: dict[str, str]) -> None:
    """Write through a temporary sibling folder, then move each file in; keeps build/ and foreign files,
    removes files an earlier generation wrote that this one no longer does."""
    out_dir.mkdir(parents=True, exist_ok=True)
    old_manifest = out_dir / "manifest.json"
    stale: set[str] = set()
    if old_manifest.is_file():
        try:
            stale = set(json.loads(old_manifest.read_text()).get("files", [])) - set(rendered)
        except (ValueError, AttributeError):
            stale = set()
    with tempfile.TemporaryDirectory(dir=out_dir.parent, prefix=f".{out_dir.name}.") as tmp:
        for rel, text in rendered.items():
            path = Path(tmp) / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        for rel in rendered:
            target = out_dir / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(Path(tmp) / rel, target)
    for rel in stale:
        (out_dir / rel).unlink(missing_ok=True)


def generate(spec_path: Path, out_dir: Path, target: str | None = None, check: bool = False,
             cutlass_dir: Path | None = None) -> Path:
    """Spec file -> project folder (or, with check, raise if the folder differs from what we emit)."""
    spec = load_spec(Path(spec_path))
    plan = plan_of_spec(spec, target)
    # No code for a plan whose synchronization is not proved sound.
    if isinstance(plan, AttentionPlan):
        verify_attention_plan(plan)
    else:
        for m in representative_ms(plan):
            verify(plan, m)
    out_dir = Path(out_dir)
    rendered = render_project(plan, cutlass_dir_expression(out_dir, cutlass_dir))
    if check:
        differences = _diff(out_dir, rendered)
        if differences:
            raise GeneratedDiffers(
                f"{out_dir} differs from what the generator emits now:\n" + "\n".join(differences),
                hint=f"regenerate: cusync-gen generate {spec_path} -o {out_dir}",
            )
        return out_dir
    _write(out_dir, rendered)
    return out_dir


def remove_project(out_dir: Path) -> None:
    """Delete a generated project folder (used by tests and `run` on a scratch folder)."""
    shutil.rmtree(out_dir, ignore_errors=True)
