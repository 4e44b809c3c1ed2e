"""`cusync-gen`: the command line. Thin: parse options, call spec/plan/render/build, print.

Errors are CusyncError subclasses raised anywhere below; `main()` turns each into one red
`error: ...` line (plus a dim `hint: ...`) and the exception's exit code. `--verbose` re-raises instead,
for a traceback.
"""

from __future__ import annotations

import contextlib
import errno
import json
import shutil
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape

from cusync_gen import __version__, paths
from cusync_gen.errors import CusyncError, NoGpuError, ToolError, UsageError

app = typer.Typer(
    name="cusync-gen",
    help="Generate CUDA/CUTLASS projects for chains of GEMMs that synchronize tile by tile (cuSync).",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
)

_state = {"verbose": False}

DEFAULT_RUN_MS = "1,256,1024"
DEFAULT_ATTENTION_MS = "512,1024,2048"  # prompt lengths (batch 1, no cache)
MAX_COUNT = 1 << 24  # --repeats, --warmup, --rounds: the largest integer the bench takes (cusync/bench/common.cuh, parse_int)
MAX_JOBS = 1024      # --jobs: parallel nvcc processes (each takes up to a few GB)
PICTURE_SUFFIXES = ("", ".png", ".svg", ".pdf")  # trace -o


def _out() -> Console:
    return Console(highlight=False, soft_wrap=True)


def _err() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


# --------------------------------------------------------------------------------------------------
# Option parsing shared by commands
# --------------------------------------------------------------------------------------------------

def _parse_size(item: str, option: str, minimum: int, hint: str, maximum: int | None = None,
                limit_hint: str | None = None) -> int:
    """One integer from minimum to `maximum` (default spec.MAX_M, the largest M the generated library is
    built for): ASCII digits only, spaces around it allowed; anything else is one UsageError."""
    from cusync_gen.spec.limits import MAX_M

    if maximum is None:
        maximum = MAX_M
        limit_hint = f"pass values of at most {MAX_M} (2^20, docs/spec-format.md, Limits)"
    item = item.strip()
    kind = "a positive integer" if minimum > 0 else "a non-negative integer"
    bad = UsageError(f"{option}: {item[:40]!r} is not {kind}", hint=hint)
    if not (item.isascii() and item.isdigit()):  # str.isdigit alone takes '²' and other Unicode digits
        raise bad
    digits = item.lstrip("0") or "0"
    if len(digits) > len(str(maximum)) or int(digits) > maximum:  # int() refuses more than 4300 digits
        shown = digits if len(digits) <= 20 else f"a {len(digits)}-digit number"
        raise UsageError(f"{option}: {shown} is above the limit of {maximum}", hint=limit_hint or hint)
    if int(digits) < minimum:
        raise bad
    return int(digits)


def parse_ms(text: str, option: str = "--m", minimum: int = 1) -> list[int]:
    """`--m 1,256,1024` -> [1, 256, 1024]; anything else, or a value above spec.MAX_M, is a UsageError
    (exit 2)."""
    hint = f"pass a comma-separated list of integers >= {minimum}, e.g. {option} 256,1024"
    return [_parse_size(item, option, minimum, hint) for item in text.split(",")]


def parse_count(text: str, option: str, minimum: int = 1, example: int = 1024) -> int:
    """The one value of --batch, --cache (validate) or trace's --m: parse_ms's rules and limit."""
    hint = f"pass one integer >= {minimum}, e.g. {option} {example}"
    if "," in text:
        raise UsageError(f"{option} takes one value, got {_shown(text)}", hint=hint)
    return _parse_size(text, option, minimum, hint)


def parse_tiles(values: list[str]) -> dict[str, list[tuple[int, int, int]]]:
    """`--tiles gemm1=128x128x32,128x256x32` (repeatable) -> {"gemm1": [(128, 128, 32), (128, 256, 32)]}.
    Each number parses as --m's do (parse_ms), up to spec.MAX_TILE_DIM; a list longer than tune.MAX_VARIANTS
    is refused before its numbers are read."""
    from cusync_gen.spec.limits import MAX_TILE_DIM
    from cusync_gen.tune import MAX_VARIANTS

    example = "e.g. --tiles gemm1=128x128x32,128x256x32"
    out: dict[str, list[tuple[int, int, int]]] = {}
    for value in values:
        name, sep, shapes = value.partition("=")
        name = name.strip()
        if not sep or not name:
            raise UsageError(f"--tiles {_shown(value)}: expected STAGE=MxNxK[,MxNxK...]", hint=example)
        count = shapes.count(",") + 1
        if count > MAX_VARIANTS:
            raise UsageError(f"--tiles {_shown(value)}: {count} tiles for {name}, more than the limit of "
                             f"{MAX_VARIANTS} variants", hint=f"pass at most {MAX_VARIANTS} tiles in all, {example}")
        for shape in shapes.split(","):
            parts = shape.lower().split("x")
            if len(parts) != 3:
                raise UsageError(f"--tiles {_shown(value)}: {_shown(shape)} is not MxNxK", hint=example)
            m, n, k = (_parse_size(p, "--tiles", 1, f"pass three positive integers per tile, {example}",
                                   MAX_TILE_DIM, f"a tile dimension is at most {MAX_TILE_DIM} "
                                   "(docs/spec-format.md, Limits)") for p in parts)
            out.setdefault(name, []).append((m, n, k))
    return out


def _shown(text: str) -> str:
    """A user string in an error line: quoted, escaped (a newline shows as \\n), cut short."""
    return repr(text) if len(text) <= 60 else repr(text[:57]) + "..."


def check_target(value: str | None, option: str) -> str | None:
    """--target (and --arch where a spec is generated for it): one of the targets a spec may name."""
    from cusync_gen.spec.model import TARGETS

    if value is not None and value not in TARGETS:
        raise UsageError(f"{option} {_shown(value)} is not a target cusync-gen generates for",
                         hint=f"use one of: {', '.join(TARGETS)}")
    return value


def check_output_file(path: Path | None, option: str, example: str) -> Path | None:
    """A file the command will write (init's -o, trace's -o, run's --out): not a folder, not under a file.
    Checked before any work, so a long run does not fail at its last step."""
    if path is None:
        return None
    if path.is_dir():
        raise UsageError(f"{option} {path} is a folder", hint=f"pass a file name for {option}, e.g. {option} "
                         f"{path / example}")
    for parent in path.parents:
        if parent.exists() and not parent.is_dir():
            raise UsageError(f"{option} {path}: {parent} is a file, not a folder",
                             hint=f"pass a path in a folder for {option}")
    return path


def _write_error(err: OSError, path: Path, option: str) -> ToolError:
    return ToolError(f"cannot write {option} {path}: {err.strerror or err}",
                     hint=f"check that {path.parent} is writable and the disk is not full")


def parse_policies(text: str | None) -> list[str] | None:
    """`--policies row,tile` -> ["row", "tile"]. Which names exist is the bench's call (it exits 2
    with its usage on an unknown one, which `run` reports as a usage error)."""
    if not text:
        return None
    policies = [item.strip() for item in text.split(",")]
    for item in policies:
        if not item.isidentifier():
            raise UsageError(f"--policies: {item!r} is not a policy name",
                             hint="pass a comma-separated list, e.g. --policies row,tile")
    return policies


def _print_json(document: dict[str, Any]) -> None:
    """A JSON document on stdout as is (no console markup or wrapping)."""
    sys.stdout.write(json.dumps(document, indent=2) + "\n")
    sys.stdout.flush()


def _example_summary(path: Path) -> str:
    """The first comment line of an example spec, without the `#`."""
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip()
        if line.strip():
            break
    return ""


def _unknown_example(name: str) -> UsageError:
    names = paths.example_names()
    return UsageError(f"unknown example {name!r}",
                      hint=f"examples: {', '.join(names)} (see `cusync-gen init --list`)")


def resolve_spec(arg: str) -> Path:
    """A spec argument: an existing file, else the name of a shipped example."""
    path = Path(arg)
    if path.exists():
        return path
    example = paths.example_path(arg)
    if example is not None:
        return example
    if path.suffix in (".yaml", ".yml", ".json") or "/" in arg:
        raise UsageError(f"spec file not found: {arg}", hint="check the path, or use a shipped example name")
    raise _unknown_example(arg)


# --------------------------------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------------------------------

def _print_version(value: bool) -> None:
    if value:
        _out().print(f"cusync-gen {__version__}", markup=False)
        raise typer.Exit()


@app.callback()
def _root(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show a traceback on errors.")] = False,
          version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                                help="Print the version and exit.")] = False,
          ) -> None:
    """cusync-gen: tile-synchronized GEMM chains for CUDA/CUTLASS."""
    _state["verbose"] = verbose


SpecArg = Annotated[str, typer.Argument(help="Spec file (YAML/JSON) or shipped example name.", show_default=False)]
TargetOpt = Annotated[Optional[str], typer.Option("--target", help="Override the spec's target, e.g. sm_90.")]
ArchOpt = Annotated[Optional[str], typer.Option("--arch", help="Build for this target instead, e.g. sm_90.")]
JobsOpt = Annotated[Optional[int], typer.Option("--jobs", "-j", min=1, max=MAX_JOBS, help="Parallel compile jobs.")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Generate into a non-empty folder that is not a cusync-gen "
                                        "project (same-named files are replaced, others kept).")]
CutlassOpt = Annotated[Optional[Path], typer.Option("--cutlass-dir", help="CUTLASS root [$CUTLASS_DIR].")]


@app.command()
def init(
    name: Annotated[Optional[str], typer.Argument(help="Example to copy (see --list).", show_default=False)] = None,
    output: Annotated[Optional[Path], typer.Option("-o", "--output", help="Where to write it [./NAME.yaml].")] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the shipped examples.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
) -> None:
    """Copy a shipped example spec to start from."""
    if list_:
        out = _out()
        for example in paths.example_names():
            out.print(f"{example:<12} {escape(_example_summary(paths.examples_dir() / f'{example}.yaml'))}")
        return
    if name is None:
        raise UsageError("init needs an example NAME", hint=f"examples: {', '.join(paths.example_names())}")
    source = paths.example_path(name)
    if source is None:
        raise _unknown_example(name)
    dest = check_output_file(output, "-o", f"{name}.yaml") or Path(f"{name}.yaml")
    if dest.exists() and not force:
        raise UsageError(f"{dest} already exists", hint="pass --force to overwrite it, or -o another file")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, dest)
    except OSError as err:
        raise _write_error(err, dest, "-o") from err
    _out().print(f"wrote {escape(str(dest))}")


@app.command()
def validate(
    spec: SpecArg,
    m: Annotated[str, typer.Option("--m", help="Problem size(s) M to describe, comma-separated (attention: new "
                                   "tokens per sequence).")] = "1024",
    batch: Annotated[str, typer.Option("--batch", metavar="N", help="Attention only: sequences.")] = "1",
    cache: Annotated[str, typer.Option("--cache", metavar="N", help="Attention only: cached tokens per sequence.")] = "0",
    target: TargetOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan and proofs as one JSON document "
                                          "(keys: docs/validate-json.md) instead of text.")] = False,
) -> None:
    """Check a spec, print the plan (tiles, grids, semaphores, occupancy) and prove its sync sound per M."""
    from cusync_gen.render import output_files
    from cusync_gen.spec.loading import load_spec
    from cusync_gen.spec.model import AttentionSpec

    ms = parse_ms(m)
    batches, cached = parse_count(batch, "--batch", example=4), parse_count(cache, "--cache", 0, example=1023)
    check_target(target, "--target")
    loaded = load_spec(resolve_spec(spec))
    out = _out()
    if isinstance(loaded, AttentionSpec):
        from cusync_gen.attention_plan import AttentionShape, make_attention_plan
        from cusync_gen.verify_attention import validate_attention_json, verify_attention

        attention = make_attention_plan(loaded, target)
        output_files(attention)  # raises when two generated files would share a path
        if as_json:
            _print_json(validate_attention_json(attention, [AttentionShape(batches, v, cached) for v in ms]))
            return
        for value in ms:
            shape = AttentionShape(batches, value, cached)
            out.print(attention.describe(shape), markup=False)
            out.print(verify_attention(attention, shape).describe() + "\n", markup=False)
        out.print("[green]OK[/]")
        return
    from cusync_gen.plan import make_plan
    from cusync_gen.verify import validate_json, verify

    plan = make_plan(loaded, target)
    output_files(plan)  # raises when two generated files would share a path
    if as_json:
        _print_json(validate_json(plan, ms))  # nothing printed unless every M is proved
        return
    for value in ms:
        out.print(plan.describe(value), markup=False)
        out.print(verify(plan, value).describe() + "\n", markup=False)  # raises on the first uncovered read
    out.print("[green]OK[/]")


@app.command()
def generate(
    spec: SpecArg,
    output: Annotated[Path, typer.Option("-o", "--output", help="Project folder to write.", show_default=False)],
    target: TargetOpt = None,
    check: Annotated[bool, typer.Option("--check", help="Write nothing; exit 1 if the folder is stale.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Also write into a non-empty folder that is not a "
                                        "cusync-gen project (same-named files are replaced, others kept).")] = False,
    torch: Annotated[bool, typer.Option("--torch", help="Also emit a PyTorch op and its CMake project in torch/ "
                                        "(GEMM chains; docs/torch.md).")] = False,
) -> None:
    """Generate a standalone CMake project from a spec (into a new folder, or replacing our earlier one)."""
    from cusync_gen.render import generate as render_generate

    # check: raises (exit 1) when stale
    project = render_generate(resolve_spec(spec), output, check_target(target, "--target"), check, force=force,
                              torch=torch)
    _out().print(f"{escape(str(output))} is up to date" if check else f"generated {escape(str(project))}")


@app.command("build")
def build_cmd(
    project: Annotated[Path, typer.Argument(help="A generated project folder (has manifest.json).",
                                            show_default=False)],
    arch: ArchOpt = None,
    jobs: JobsOpt = None,
    cutlass_dir: CutlassOpt = None,
    build_type: Annotated[str, typer.Option("--build-type", help="CMAKE_BUILD_TYPE.")] = "Release",
) -> None:
    """Configure and compile a generated project (no GPU needed)."""
    from cusync_gen import build as builder

    build_dir = builder.build(project, target=arch, jobs=jobs, build_type=build_type, cutlass_dir=cutlass_dir,
                              progress=sys.stderr.isatty())
    _out().print(f"built {escape(str(build_dir))}")


def _project_of(target: str, output: Path | None, arch: str | None, force: bool = False) -> Path:
    """A generated project folder as is; a spec file or example name is first generated into `output`
    (default ./generated/<name>; `force`: also into a folder that is not a project of ours)."""
    project = Path(target)
    if (project / "manifest.json").is_file():
        return project
    spec_path = resolve_spec(target)
    from cusync_gen.render import generate as render_generate
    from cusync_gen.spec.loading import load_spec

    project = output or Path("generated") / load_spec(spec_path).name
    render_generate(spec_path, project, check_target(arch, "--arch"), False, force=force)
    return project


@app.command("run")
def run_cmd(
    target: Annotated[str, typer.Argument(help="Generated project folder, spec file, or shipped example name.",
                                          show_default=False)],
    m: Annotated[Optional[str], typer.Option(
        "--m", help=f"Problem sizes M, comma-separated [{DEFAULT_RUN_MS}; attention: new tokens per sequence, "
                    f"{DEFAULT_ATTENTION_MS}].", show_default=False)] = None,
    policies: Annotated[Optional[str], typer.Option(
        "--policies", help="What the overlapped run uses: spec (default), row, tile.")] = None,
    batch: Annotated[Optional[str], typer.Option(
        "--batch", help="Attention only: sequences, comma-separated (generation: with --m 1).")] = None,
    cache: Annotated[Optional[str], typer.Option(
        "--cache", help="Attention only: cached tokens per sequence, comma-separated.")] = None,
    repeats: Annotated[int, typer.Option("--repeats", min=1, max=MAX_COUNT,
                                         help="Timed repetitions (median reported).")] = 50,
    warmup: Annotated[int, typer.Option("--warmup", min=1, max=MAX_COUNT, help="Untimed warm-up repetitions.")] = 10,
    arch: ArchOpt = None,
    output: Annotated[Optional[Path], typer.Option(
        "-o", "--output", help="Project folder for a spec or example [./generated/NAME].")] = None,
    force: ForceOpt = False,
    jobs: JobsOpt = None,
    cutlass_dir: CutlassOpt = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="Also write the result rows as JSON here.")] = None,
    backend: Annotated[str, typer.Option(
        "--backend", metavar="auto|sm80|sm90", help="For an example name: which version to run (auto: X_sm90 "
        "for example X on a Hopper GPU or --arch sm_90, X elsewhere). A spec file is never rewritten.")] = "auto",
    autotune: Annotated[int, typer.Option(
        "--autotune", min=0, max=200, metavar="ROUNDS", help="sm90 GEMM chains: before timing, the library times "
        "its modes at every --m on this GPU (ROUNDS rounds) and run() picks from that (0: the spec's table or "
        "the rule).")] = 0,
) -> None:
    """Generate (if needed), build and run the bench; print sequential vs overlapped times.
    Without a GPU it stops after the build (exit 6)."""
    from cusync_gen import build as builder

    policy_list = parse_policies(policies)
    check_output_file(out, "--out", "results.json")
    builder.check_backend(backend)
    gpu = builder.gpu_arch()
    if paths.example_path(target) is not None and not Path(target).exists():  # a name, not a path
        target, why = builder.pick_example(target, backend, gpu, check_target(arch, "--arch"))
        _out().print(escape(why))
    elif backend != "auto" and Path(target).exists():
        raise UsageError(f"--backend picks among the shipped examples; {_shown(target)} is a path",
                         hint="a spec's backend is its `arch:`; drop --backend, or pass an example name")
    project = _project_of(target, output, arch, force)
    manifest = builder.read_manifest(project)
    attention = manifest.get("kind") == "attention"
    if autotune and (attention or manifest.get("arch") != "sm90"):
        raise UsageError("--autotune applies to sm90 GEMM chains only (it picks among run()'s modes)",
                         hint="remove --autotune, or run an sm90 chain (e.g. gpt3_mlp_sm90)")
    ms = parse_ms(m or (DEFAULT_ATTENTION_MS if attention else DEFAULT_RUN_MS))
    extra: list[str] = []
    for flag, value in (("--batch", batch), ("--cache", cache)):
        if value is None:
            continue
        if not attention:
            raise UsageError(f"{flag} applies to attention chains only", hint=f"remove {flag}")
        parse_ms(value, flag, minimum=0 if flag == "--cache" else 1)
        extra += [flag, value]
    if autotune:
        extra += ["--autotune", str(autotune)]
    # Build for the GPU we are about to run on unless --arch says otherwise (the generated files keep
    # the spec's target, so committed projects stay as generated); without a GPU, for the spec's target.
    builder.build(project, target=arch or gpu, jobs=jobs, cutlass_dir=cutlass_dir, progress=sys.stderr.isatty())
    try:  # without a GPU: NotRunError (exit 6), the project is built
        rows = builder.run(project, ms, policy_list, repeats=repeats, warmup=warmup, extra_args=extra)
    except CusyncError as err:
        _report_rows(getattr(err, "rows", None), out)  # a failed check still shows its table
        raise
    _report_rows(rows, out)


@app.command("tune")
def tune_cmd(
    spec: SpecArg,
    m: Annotated[str, typer.Option("--m", help="Problem sizes M to tune for, comma-separated.")] = "256,1024,4096",
    tiles: Annotated[Optional[list[str]], typer.Option(
        "--tiles", help="Candidate threadblocks of one GEMM stage, STAGE=MxNxK[,MxNxK...]; repeat per stage "
                        "(the variants are their product). Default: a few common tiles, the same for every GEMM.")] = None,
    orders: Annotated[Optional[str], typer.Option(
        "--orders", help="Tile orders to time too (sm80: spec,ticket,hw; sm90: spec,row_major,column_major,banded,column_banded).")] = None,
    repeats: Annotated[int, typer.Option("--repeats", min=1, max=MAX_COUNT, help="Timed repetitions (median).")] = 20,
    warmup: Annotated[int, typer.Option("--warmup", min=1, max=MAX_COUNT, help="Untimed warm-up repetitions.")] = 5,
    rounds: Annotated[int, typer.Option("--rounds", min=1, max=MAX_COUNT, help="Times every variant runs, round robin "
                                        "(the median counts: GPU clocks drift between binaries).")] = 3,
    out_dir: Annotated[Path, typer.Option("-o", "--out-dir", help="Variant projects and results (kept: "
                                          "unchanged variants are not rebuilt).")] = Path("build/tune"),
    write: Annotated[Optional[Path], typer.Option(
        "--write", help="Where to write the tuned spec [SPEC.tuned.yaml next to a spec file, ./NAME.tuned.yaml "
                        "for an example].", show_default=False)] = None,
    arch: ArchOpt = None,
    jobs: JobsOpt = None,
    cutlass_dir: CutlassOpt = None,
) -> None:
    """Build tile variants of a GEMM-chain spec, time them with every policy on the GPU, keep the fastest per M."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from cusync_gen import build as builder
    from cusync_gen import tune
    from cusync_gen.spec.loading import parse_spec, read_spec_data
    from cusync_gen.spec.model import AttentionSpec

    ms = parse_ms(m)
    choices = parse_tiles(tiles or [])
    spec_path = resolve_spec(spec)
    data = read_spec_data(spec_path)  # read once: what is tuned is what was checked
    loaded = parse_spec(data, source=str(spec_path))
    if isinstance(loaded, AttentionSpec):
        raise UsageError("tune works on GEMM chains (stages:) for now", "for attention, compare tiles by hand "
                         "(benchmarks/NOTES.md a3 shows how)")
    order_list = [o.strip() for o in orders.split(",")] if orders else None
    for o in order_list or []:
        if o not in tune.ORDERS[loaded.arch]:
            raise UsageError(f"--orders: {o!r} is not an order of arch {loaded.arch.value}",
                             f"use some of: {','.join(tune.ORDERS[loaded.arch])}")
    tune.check_choices(loaded, choices)  # stage names and the number of combinations, before any work
    if not builder.has_gpu():  # before the variants: each is a spec parsed and planned
        raise NoGpuError("no CUDA device found", hint="tune builds and times variants on an NVIDIA GPU")
    variants, skipped = tune.make_variants(data, loaded, choices)
    console = _err()
    for line in skipped:
        console.print(f"skipped {escape(line)}", style="dim")
    target = arch or builder.gpu_arch()
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as bar:
        projects = tune.generate_and_build(variants, out_dir, jobs, cutlass_dir, target, bar)
        task = bar.add_task("running variants", total=len(variants) * rounds)
        failures: list[str] = []

        def done(v: tune.Variant, failure: str | None) -> None:
            bar.advance(task)
            if failure:
                failures.append(f"{v.label}: {failure}")

        raw = tune.run_variants(variants, projects, ms, repeats, warmup, order_list, rounds, done)
    for line in failures:
        console.print(f"[yellow]variant failed[/] {escape(line)}")
    tune.save_rows(raw, out_dir / f"tune-{loaded.name}.jsonl")
    rows = tune.medians(raw)
    winners = tune.choose(rows)
    _out().print(tune.winners_table(loaded.name, rows, winners))
    gpu = rows[0].get("gpu", "GPU") if rows else "GPU"
    png = tune.write_plot(rows, out_dir / f"tune-{loaded.name}.png", f"{loaded.name} on {gpu}")
    tuned, notes = tune.tuned_spec(variants, rows, winners)
    dest = write or (spec_path.with_name(spec_path.stem + ".tuned.yaml") if Path(spec).exists()
                     else Path(f"{loaded.name}.tuned.yaml"))
    header = tune.header_lines(gpu, m, winners) + notes
    tune.write_spec(dest, tuned, header)
    for note in notes:
        console.print(f"note: {escape(note)}", style="dim")
    _out().print(f"wrote {escape(str(dest))}, {escape(str(png))} and {escape(str(out_dir / f'tune-{loaded.name}.jsonl'))}")


@app.command("trace")
def trace_cmd(
    target: Annotated[str, typer.Argument(help="Generated project, spec file, example name, or a trace "
                                          ".jsonl the bench wrote.", show_default=False)],
    m: Annotated[str, typer.Option("--m", metavar="M", help="Problem size M to trace.")] = "1024",
    png: Annotated[Path, typer.Option("-o", "--png", help="Gantt chart to write (the Chrome trace goes "
                                      "beside it, .json).")] = Path("trace.png"),
    arch: ArchOpt = None,
    output: Annotated[Optional[Path], typer.Option(
        "--project", help="Project folder for a spec or example [./generated/NAME].")] = None,
    force: ForceOpt = False,
    jobs: JobsOpt = None,
    cutlass_dir: CutlassOpt = None,
) -> None:
    """Run one traced back-to-back and one overlapped run, then draw the tiles per SM."""
    from cusync_gen import build as builder
    from cusync_gen import trace

    rows = parse_count(m, "--m")
    check_output_file(png, "-o", "trace.png")
    if png.suffix.lower() not in PICTURE_SUFFIXES:  # matplotlib picks the format by the suffix
        raise UsageError(f"-o {png}: {_shown(png.suffix)} is not a picture format trace writes",
                         hint=f"use one of {', '.join(PICTURE_SUFFIXES[1:])} (none: .png), e.g. -o trace.png")
    for path in (png.with_suffix(".json"), png.with_suffix(".jsonl")):  # written beside it
        check_output_file(path, "-o", "trace.png")
    if target.endswith(".jsonl"):  # render a trace recorded earlier (load_trace refuses a FIFO, a folder, ...)
        records = trace.load_trace(Path(target))
    else:
        if not builder.has_gpu():
            raise NoGpuError("no CUDA device found", hint="trace a run on a machine with an NVIDIA GPU, "
                             "or pass a .jsonl the bench wrote with --trace")
        project = _project_of(target, output, arch, force)
        if builder.read_manifest(project).get("kind") == "attention":
            raise UsageError("tile traces are recorded by GEMM chains (stages:), not yet by the attention chain",
                             "trace a GEMM chain spec, e.g. gpt3_mlp or gpt3_mlp_sm90")
        builder.build(project, target=arch or builder.gpu_arch(), jobs=jobs, cutlass_dir=cutlass_dir,
                      progress=sys.stderr.isatty())
        jsonl = Path(png).with_suffix(".jsonl").resolve()
        jsonl.unlink(missing_ok=True)
        builder.run(project, [rows], None, repeats=1, warmup=1, extra_args=["--no-baselines", "--trace", str(jsonl)])
        records = trace.load_trace(jsonl)
    try:
        picture, chrome = trace.write_outputs(records, png, rows)
    except OSError as err:
        raise _write_error(err, png, "-o") from err
    _out().print(f"wrote {escape(str(picture))} and {escape(str(chrome))} (open it in chrome://tracing or Perfetto)")


def _report_rows(rows: list[dict[str, Any]] | None, out: Path | None) -> None:
    if not rows:
        return
    from cusync_gen.build import format_table

    _out().print(format_table(rows))
    if out is not None:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(rows, indent=2) + "\n")
        except OSError as err:
            raise _write_error(err, out, "--out") from err
        _out().print(f"wrote {escape(str(out))}")


@app.command("fetch-cutlass")
def fetch_cutlass_cmd(
    wheel: Annotated[Optional[Path], typer.Option("--wheel", help="Use this downloaded nvidia-cutlass wheel.")] = None,
    dest: Annotated[Optional[Path], typer.Option("--dest", help="Where to put it [third_party/cutlass].")] = None,
    force: Annotated[bool, typer.Option("--force", help="Fetch again even if present; replace a --dest folder "
                                        "that fetch-cutlass did not fill (never a file).")] = False,
) -> None:
    """Fetch CUTLASS's headers from the pinned nvidia-cutlass wheel into third_party/cutlass."""
    from cusync_gen.cutlass_fetch import CUTLASS_PIN, fetch_cutlass, is_fetched

    target = (dest or paths.default_cutlass_dir()).resolve()
    already = False
    with contextlib.suppress(OSError):  # an unusable --dest: fetch_cutlass says why
        already = not force and is_fetched(target)
    root = fetch_cutlass(target, wheel=wheel, force=force)
    _out().print(f"{CUTLASS_PIN} {'already there' if already else 'fetched'}: {escape(str(root))}")


# --------------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------------

def _one_line(text: str) -> str:
    """Control characters (a newline in a user's value) escaped, so an error stays one line."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def _print_error(err: CusyncError) -> None:
    console = _err()
    if isinstance(err, ToolError):
        command = getattr(err, "command", None)
        tail = getattr(err, "stderr_tail", "")
        if tail:
            console.print(escape(tail.rstrip()), style="dim")
        if command:
            console.print(escape("command: " + " ".join(str(c) for c in command)), style="dim")
    message = getattr(err, "message", None) or str(err)
    # one line each, whatever a path or value in them holds (a newline in a file name, say), except a
    # report of one line per item (generate --check)
    message = str(message) if getattr(err, "multiline", False) else _one_line(str(message))
    console.print(f"[bold red]error:[/] [red]{escape(message)}[/]")
    hint = getattr(err, "hint", "")
    if hint:
        console.print(escape(f"hint: {_one_line(str(hint))}"), style="dim")


# click's error classes, as typer exposes them (its own copy of click, or click itself, by version)
_CLICK_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


def _click_error(err: Exception) -> UsageError:
    """A command-line parsing error of click (unknown option, missing argument, bad value) as ours."""
    ctx = getattr(err, "ctx", None)
    command = getattr(ctx, "command_path", "") or "cusync-gen"
    usage = UsageError(_one_line(err.format_message()), hint=f"see `{_one_line(command)} --help`")  # type: ignore[attr-defined]
    usage.exit_code = getattr(err, "exit_code", 2)
    return usage


def _os_error(err: OSError) -> CusyncError:
    """An OSError no command turned into an error of ours (a path argument too long for the file system,
    a folder it cannot read), as one line naming the path."""
    path = str(err.filename) if err.filename is not None else ""
    where = (path if len(path) <= 100 else f"{path[:60]}...{path[-37:]}") + ": " if path else ""
    if err.errno == errno.ENAMETOOLONG:
        return UsageError(f"{where}file name too long for the file system", hint="use a shorter path")
    return ToolError(f"{where}{err.strerror or err}", hint="check the path and its permissions")


def main(argv: list[str] | None = None) -> None:
    """Console script `cusync-gen`."""
    _state["verbose"] = False
    try:
        code = app(args=argv, prog_name="cusync-gen", standalone_mode=False)
    except _CLICK_ERROR as err:
        if type(err).__name__ == "NoArgsIsHelpError":  # no arguments: the help (already printed by typer)
            err.show()
            sys.exit(err.exit_code)
        _print_error(_click_error(err))
        sys.exit(getattr(err, "exit_code", 2))
    except (CusyncError, OSError) as err:
        if _state["verbose"]:
            raise
        error = _os_error(err) if isinstance(err, OSError) else err
        _print_error(error)
        sys.exit(getattr(error, "exit_code", 1))
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
