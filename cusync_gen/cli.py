"""`cusync-gen`: the command line. Thin: parse options, call spec/plan/render/build, print.

Each command first builds its frozen options object (`cusync_gen.options`: every option parsed and
checked, nothing written), and only then generates, builds, runs or writes. Errors are CusyncError
subclasses raised anywhere below; `main()` turns each into one red `error: ...` line (plus a dim
`hint: ...`) and the exception's exit code; `--verbose` prints its traceback first (same exit code).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape

from cusync_gen import __version__, fsio, options, paths
from cusync_gen.errors import CusyncError, NoGpuError, ToolError, UsageError
from cusync_gen.options import (  # noqa: F401  (parse_* and the limits: this module's API, used by tests)
    DEFAULT_ATTENTION_MS,
    DEFAULT_RUN_MS,
    MAX_COUNT,
    MAX_JOBS,
    check_output_file,
    parse_count,
    parse_ms,
    parse_policies,
    parse_tiles,
    parse_target,
    resolve_spec,
)

app = typer.Typer(
    name="cusync-gen",
    help="Generate CUDA/CUTLASS projects for chains of GEMMs that synchronize tile by tile (cuSync).",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
)

_state = {"verbose": False}


def _width() -> int | None:
    """A terminal width of COLUMNS=0 (or 1..19) made rich print nothing at all: such a width becomes 80."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        return None
    return 80 if columns < 20 else None


def _out() -> Console:
    return Console(highlight=False, soft_wrap=True, width=_width())


def _err() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True, width=_width())


def _warn(message: str) -> None:
    _err().print(escape(message))


def _write_error(err: OSError, path: Path, option: str) -> ToolError:
    return ToolError(f"cannot write {option} {path}: {err.strerror or err}",
                     hint=f"check that {path.parent} is writable and the disk is not full")


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


# --------------------------------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------------------------------

def _print_version(value: bool) -> None:
    if value:
        _out().print(f"cusync-gen {__version__}", markup=False)
        raise typer.Exit()


def Flag(*names: str, help: str, **kwargs: Any) -> Any:  # noqa: N802, A002 (reads like typer.Option)
    """A plain on/off flag (`--json`, no value): no metavar in the help."""
    return typer.Option(*names, help=help, metavar="", **kwargs)


def Hidden(*names: str) -> Any:  # noqa: N802
    """An older spelling of an option, still accepted, not shown in the help."""
    return typer.Option(*names, hidden=True, show_default=False)


@app.callback()
def _root(verbose: Annotated[bool, Flag("--verbose", "-v", help="Show a traceback on errors.")] = False,
          version: Annotated[bool, Flag("--version", callback=_print_version, is_eager=True,
                                        help="Print the version and exit.")] = False,
          ) -> None:
    """cusync-gen: tile-synchronized GEMM chains for CUDA/CUTLASS."""
    _state["verbose"] = verbose


SpecArg = Annotated[str, typer.Argument(help="Spec file (YAML/JSON) or shipped example name.", show_default=False)]
TargetOpt = Annotated[Optional[str], typer.Option("--target", metavar="TARGET", help="Override the spec's target "
                                                  "GPU: sm_80, sm_86, sm_89 or sm_90 (also sm90, 90).")]
BuildTargetOpt = Annotated[Optional[str], typer.Option(
    "--target", metavar="TARGET", help="Build for this GPU: sm_80, sm_86, sm_89 or sm_90 (also sm90, 90) "
    "(default: the local GPU, else the spec's target).", show_default=False)]
ArchAlias = Annotated[Optional[str], Hidden("--arch")]  # older spelling of --target
JobsOpt = Annotated[Optional[int], typer.Option("--jobs", "-j", min=1, max=MAX_JOBS, help="Parallel compile jobs.")]
ForceOpt = Annotated[bool, Flag("--force", help="Generate into a non-empty folder that is not a cusync-gen "
                                "project (same-named files are replaced, others kept).")]
CutlassOpt = Annotated[Optional[Path], typer.Option("--cutlass-dir", help="CUTLASS root [$CUTLASS_DIR].")]
ProjectOpt = Annotated[Optional[Path], typer.Option(
    "--project", metavar="DIR", help="Project folder for a spec or example [./generated/NAME].")]


def _target(target: str | None, arch: str | None) -> tuple[str | None, str]:
    """--target, or its older spelling --arch; and the name the user wrote (for messages)."""
    value = options.merge_alias("--target", target, {"--arch": arch})
    return value, "--arch" if arch is not None and target is None else "--target"


def _need_matplotlib(command: str) -> None:
    """`trace` and `tune` draw with matplotlib, an optional extra: say so before any build or run."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise ToolError(f"{command} draws its pictures with matplotlib, which is not installed",
                        hint="python3 -m pip install matplotlib (cusync-gen's optional extra `plot`)")


@app.command()
def init(
    name: Annotated[Optional[str], typer.Argument(help="Example to copy (see --list).", show_default=False)] = None,
    output: Annotated[Optional[str], typer.Option("-o", "--output", metavar="FILE",
                                                  help="Spec file to write [./NAME.yaml]; .json writes JSON; DIR/ "
                                                       "(with the slash) writes DIR/NAME.yaml.")] = None,
    list_: Annotated[bool, Flag("--list", help="List the shipped examples.")] = False,
    force: Annotated[bool, Flag("--force", help="Overwrite an existing file.")] = False,
) -> None:
    """Copy a shipped example spec to start from."""
    if list_:
        out = _out()
        for example in paths.example_names():
            out.print(f"{example:<12} {escape(_example_summary(paths.examples_dir() / f'{example}.yaml'))}")
        return
    opts = options.init_options(name, output, force)
    if opts.as_json:  # the example's data, read by the spec's own loader (the file's comments are lost)
        from cusync_gen.spec.loading import read_spec_data

        content = (json.dumps(read_spec_data(opts.source), indent=2) + "\n").encode()
    else:
        content = opts.source.read_bytes()
    try:
        fsio.write_file(opts.dest, content, "-o", overwrite=opts.force)
    except OSError as err:
        raise _write_error(err, opts.dest, "-o") from err
    _out().print(f"wrote {escape(str(opts.dest))}")


@app.command()
def validate(
    spec: SpecArg,
    m: Annotated[str, typer.Option("--m", help="Problem size(s) M to describe, comma-separated (attention: new "
                                   "tokens per sequence).")] = "1024",
    batch: Annotated[str, typer.Option("--batch", metavar="N", help="Attention: sequences; conv chains: images "
                                       "per run, comma-separated.")] = "1",
    cache: Annotated[str, typer.Option("--cache", metavar="N", help="Attention only: cached tokens per sequence.")] = "0",
    target: TargetOpt = None,
    as_json: Annotated[bool, Flag("--json", help="Print the plan and proofs as one JSON document "
                                  "(keys: `cusync-gen docs validate-json`) instead of text.")] = False,
) -> None:
    """Check a spec, print the plan (tiles, grids, semaphores, occupancy) and prove its sync sound per M."""
    from cusync_gen import report
    from cusync_gen.spec.loading import ignored_fields, parse_spec, read_spec_data, unused_fields
    from cusync_gen.spec.model import ConvChainSpec

    ms = parse_ms(m)
    path = resolve_spec(spec)
    data = read_spec_data(path)
    loaded = parse_spec(data, source=str(path))
    if (ignored := ignored_fields(data)) and not as_json:
        what = "a one-value setting, accepted and ignored; remove it" if len(ignored) == 1 else \
            "one-value settings, accepted and ignored; remove them"
        _out().print(f"note: {', '.join(ignored)}: {what}", markup=False)
    for note in unused_fields(data) if not as_json else ():
        _out().print(f"note: {note}", markup=False)
    if isinstance(loaded, ConvChainSpec):  # --batch: the batches to describe (conv chains have no M)
        target = parse_target(target, "--target")
        images = parse_ms(batch, "--batch")
        document = lambda: report.validate_conv_json(loaded, images, target)  # noqa: E731
        blocks = lambda: report.validate_conv_text(loaded, images, target)  # noqa: E731
    else:
        batches, cached = parse_count(batch, "--batch", example=4), parse_count(cache, "--cache", 0, example=1023)
        target = parse_target(target, "--target")
        document = lambda: report.validate_json(loaded, ms, batches, cached, target)  # noqa: E731
        blocks = lambda: report.validate_text(loaded, ms, batches, cached, target)  # noqa: E731
    if as_json:
        _print_json(document())  # nothing printed unless every size is proved
        return
    out = _out()
    for block in blocks():
        out.print(block, markup=False)
    out.print("[green]OK[/]")


@app.command()
def generate(
    spec: SpecArg,
    output: Annotated[Path, typer.Option("-o", "--output", metavar="DIR", help="Project folder to write.",
                                         show_default=False)],
    target: TargetOpt = None,
    check: Annotated[bool, Flag("--check", help="Write nothing; exit 1 if the folder is stale.")] = False,
    force: Annotated[bool, Flag("--force", help="Also write into a non-empty folder that is not a "
                                "cusync-gen project (same-named files are replaced, others kept).")] = False,
    torch: Annotated[bool, Flag("--torch", help="Also emit a PyTorch op and its CMake project in torch/ "
                                "(GEMM chains; `cusync-gen docs torch`).")] = False,
) -> None:
    """Generate a standalone CMake project from a spec (into a new folder, or replacing our earlier one)."""
    from cusync_gen.render import generate as render_generate

    opts = options.generate_options(spec, output, target, check, force, torch)
    # check: raises (exit 1) when stale
    project = render_generate(opts.spec, opts.output, opts.target, opts.check, force=opts.force, torch=opts.torch,
                              notify=_warn)
    _out().print(f"{escape(str(output))} is up to date" if check else f"generated {escape(str(project))}")


@app.command("build")
def build_cmd(
    project: Annotated[Path, typer.Argument(help="A generated project folder (has manifest.json).",
                                            show_default=False)],
    target: BuildTargetOpt = None,
    arch: ArchAlias = None,
    jobs: JobsOpt = None,
    cutlass_dir: CutlassOpt = None,
    build_type: Annotated[str, typer.Option("--build-type", help="CMAKE_BUILD_TYPE.")] = "Release",
) -> None:
    """Configure and compile a generated project (no GPU needed)."""
    from cusync_gen import build as builder

    value, option = _target(target, arch)
    opts = options.build_options(project, value, jobs, cutlass_dir, build_type, option)
    build_dir = builder.build(opts.project, target=opts.target, jobs=opts.jobs, build_type=opts.build_type,
                              cutlass_dir=opts.cutlass_dir, progress=sys.stderr.isatty())
    _out().print(f"built {escape(str(build_dir))}")


def _generated(subject: options.Subject, target: str | None, force: bool) -> Path:
    """The subject's project: as is, or its spec generated into it first."""
    if subject.spec is not None:
        from cusync_gen.render import generate as render_generate

        render_generate(subject.spec, subject.project, target, False, force=force, notify=_warn)
    return subject.project


@app.command("run")
def run_cmd(
    target: Annotated[str, typer.Argument(help="Generated project folder, spec file, or shipped example name.",
                                          show_default=False)],
    m: Annotated[Optional[str], typer.Option(
        "--m", help=f"Problem sizes M, comma-separated [{DEFAULT_RUN_MS}; attention: new tokens per sequence, "
                    f"{DEFAULT_ATTENTION_MS}].", show_default=False)] = None,
    policies: Annotated[Optional[str], typer.Option(
        "--policies", help="What the overlapped run uses: spec (default), row, tile (attention: spec, row).")] = None,
    batch: Annotated[Optional[str], typer.Option(
        "--batch", help="Attention: sequences, comma-separated (generation: with --m 1); conv chains: images.")] = None,
    cache: Annotated[Optional[str], typer.Option(
        "--cache", help="Attention only: cached tokens per sequence, comma-separated.")] = None,
    shapes: Annotated[Optional[str], typer.Option(
        "--shapes", metavar="SHAPES", help="sm90 attention layer, instead of --m/--batch/--cache: shapes, "
        "comma-separated: p:BxT+L (prompt: B sequences, T new tokens, L cached), g:B+L (generation step); T and L "
        "one value or one per sequence joined by '/', e.g. p:3x7/200/1000+0/511/4097.")] = None,
    repeats: Annotated[int, typer.Option("--repeats", min=1, max=MAX_COUNT,
                                         help="Timed repetitions (median reported).")] = 50,
    warmup: Annotated[int, typer.Option("--warmup", min=1, max=MAX_COUNT, help="Untimed warm-up repetitions.")] = 10,
    build_target: BuildTargetOpt = None,
    arch: ArchAlias = None,
    project: ProjectOpt = None,
    project_alias: Annotated[Optional[Path], Hidden("-o", "--output")] = None,  # older spelling of --project
    force: ForceOpt = False,
    jobs: JobsOpt = None,
    cutlass_dir: CutlassOpt = None,
    results: Annotated[Optional[Path], typer.Option("--results", metavar="FILE",
                                                    help="Also write the result rows as JSON here.")] = None,
    results_alias: Annotated[Optional[Path], Hidden("--out")] = None,  # older spelling of --results
    backend: Annotated[str, typer.Option(
        "--backend", metavar="auto|sm80|sm90", help="For an example name: which version to run (auto: X_sm90 "
        "for example X on a Hopper GPU or --target sm_90, X elsewhere). A spec file is never rewritten.")] = "auto",
    autotune: Annotated[int, typer.Option(
        "--autotune", min=0, max=options.MAX_AUTOTUNE, metavar="ROUNDS", help="sm90 GEMM chains: before timing, "
        "the library times its modes at every --m on this GPU (ROUNDS rounds) and run() picks from that (0: the "
        "spec's table or the rule).")] = 0,
) -> None:
    """Generate (if needed), build and run the bench; print sequential vs overlapped times (GEMM chains),
    run() and its modes per batch (conv chains), or each stage and the layer per shape (sm90 attention).
    Without a GPU it stops after the build (exit 6)."""
    from cusync_gen import build as builder

    value, option = _target(build_target, arch)
    project = options.merge_alias("--project", project, {"-o/--output": project_alias})
    results = options.merge_alias("--results", results, {"--out": results_alias})
    opts = options.run_options(target, m, policies, batch, cache, repeats, warmup, value, project, force, jobs,
                               cutlass_dir, results, backend, autotune, builder.gpu_arch(), option, shapes=shapes)
    # -- every option is checked: from here on, work --
    if opts.subject.why:
        _out().print(escape(opts.subject.why))
    folder = _generated(opts.subject, opts.generate_target, opts.force)
    # Build for the GPU we are about to run on unless --target says otherwise (the generated files keep
    # the spec's target, so committed projects stay as generated); without a GPU, for the spec's target.
    builder.build(folder, target=opts.target, jobs=opts.jobs, cutlass_dir=opts.cutlass_dir,
                  progress=sys.stderr.isatty())
    try:  # without a GPU: NotRunError (exit 6), the project is built
        rows = builder.run(folder, list(opts.ms), opts.policies, repeats=opts.repeats, warmup=opts.warmup,
                           extra_args=list(opts.extra))
    except CusyncError as err:
        _report_rows(getattr(err, "rows", None), opts.results)  # a failed check still shows its table
        raise
    _report_rows(rows, opts.results)


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
    work_dir: Annotated[Optional[Path], typer.Option("--work-dir", metavar="DIR", help="Variant projects and "
                                                     "results (kept: unchanged variants are not rebuilt) "
                                                     "[build/tune].", show_default=False)] = None,
    work_alias: Annotated[Optional[Path], Hidden("-o", "--out-dir")] = None,  # older spelling of --work-dir
    write: Annotated[Optional[Path], typer.Option(
        "--write", metavar="FILE", help="Where to write the tuned spec [SPEC.tuned.yaml next to a spec file, "
        "./NAME.tuned.yaml for an example].", show_default=False)] = None,
    build_target: BuildTargetOpt = None,
    arch: ArchAlias = None,
    jobs: JobsOpt = None,
    cutlass_dir: CutlassOpt = None,
) -> None:
    """Build tile variants of a GEMM-chain spec, time them with every policy on the GPU, keep the fastest per M."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from cusync_gen import build as builder
    from cusync_gen import tune

    _need_matplotlib("tune")
    value, option = _target(build_target, arch)
    out_dir = options.merge_alias("--work-dir", work_dir, {"-o/--out-dir": work_alias}) or Path("build/tune")
    opts = options.tune_options(spec, m, tiles, orders, repeats, warmup, rounds, out_dir, write, value, jobs,
                                cutlass_dir, option)
    if not builder.has_gpu():  # before the variants: each is a spec parsed and planned
        raise NoGpuError("no CUDA device found", hint="tune builds and times variants on an NVIDIA GPU")
    loaded = opts.loaded
    variants, skipped = tune.make_variants(loaded, opts.choices)
    console = _err()
    for line in skipped:
        console.print(f"skipped {escape(line)}", style="dim")
    target = opts.target or builder.gpu_arch()
    order_list = list(opts.orders) if opts.orders else None
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as bar:
        projects = tune.generate_and_build(variants, out_dir, opts.jobs, opts.cutlass_dir, target, bar)
        task = bar.add_task("running variants", total=len(variants) * opts.rounds)
        failures: list[str] = []

        def done(v: tune.Variant, failure: str | None) -> None:
            bar.advance(task)
            if failure:
                failures.append(f"{v.label}: {failure}")

        raw = tune.run_variants(variants, projects, list(opts.ms), opts.repeats, opts.warmup, order_list,
                                opts.rounds, done)
    for line in failures:
        console.print(f"[yellow]variant failed[/] {escape(line)}")
    tune.save_rows(raw, out_dir / f"tune-{loaded.name}.jsonl")
    rows = tune.medians(raw)
    winners = tune.choose(rows)
    if not winners:  # nothing to choose from, nothing to write
        no_device = bool(failures) and all("no CUDA device" in line for line in failures)
        error = NoGpuError if no_device else ToolError
        raise error("no variant produced a usable time at any M", hint="see the failures above"
                    + ("; tune needs a CUDA device it can run on (check CUDA_VISIBLE_DEVICES and the driver)"
                       if no_device else ""))
    _out().print(tune.winners_table(loaded.name, rows, winners))
    gpu = rows[0].get("gpu", "GPU") if rows else "GPU"
    png = tune.write_plot(rows, out_dir / f"tune-{loaded.name}.png", f"{loaded.name} on {gpu}")
    tuned, notes = tune.tuned_spec(variants, rows, winners)
    header = tune.header_lines(gpu, opts.m_text, winners) + notes
    tune.write_spec(opts.write, tuned, header)
    for note in notes:
        console.print(f"note: {escape(note)}", style="dim")
    _out().print(f"wrote {escape(str(opts.write))}, {escape(str(png))} and "
                 f"{escape(str(out_dir / f'tune-{loaded.name}.jsonl'))}")


@app.command("trace")
def trace_cmd(
    target: Annotated[str, typer.Argument(help="Generated project, spec file, example name, or a trace "
                                          ".jsonl the bench wrote.", show_default=False)],
    m: Annotated[Optional[str], typer.Option("--m", metavar="M", help="GEMM chains: the rows M to trace "
                                             "[1024].", show_default=False)] = None,
    batch: Annotated[Optional[str], typer.Option("--batch", metavar="N", help="Conv chains: the images to trace "
                                                 "[8].", show_default=False)] = None,
    picture: Annotated[Optional[Path], typer.Option("-o", "--output", metavar="FILE", help="Gantt chart to write "
                                                    "(the Chrome trace goes beside it, .json) [trace.png].",
                                                    show_default=False)] = None,
    png_alias: Annotated[Optional[Path], Hidden("--png")] = None,  # older spelling of -o/--output
    build_target: BuildTargetOpt = None,
    arch: ArchAlias = None,
    project: ProjectOpt = None,
    force: ForceOpt = False,
    jobs: JobsOpt = None,
    cutlass_dir: CutlassOpt = None,
) -> None:
    """Trace one run of each mode (GEMM and conv chains) and draw the tiles per SM."""
    from cusync_gen import build as builder
    from cusync_gen import trace

    _need_matplotlib("trace")
    value, option = _target(build_target, arch)
    png = options.merge_alias("-o/--output", picture, {"--png": png_alias}) or Path("trace.png")
    gpu = builder.gpu_arch() if not (target.endswith(".jsonl") and Path(target).is_file()) else None
    opts = options.trace_options(target, m, png, value, project, force, jobs, cutlass_dir, gpu, option, batch)
    if opts.record is not None:  # render a trace recorded earlier
        records = trace.load_trace(opts.record)
    else:
        assert opts.subject is not None  # trace_options: a record or a subject
        if not builder.has_gpu():
            raise NoGpuError("no CUDA device found", hint="trace a run on a machine with an NVIDIA GPU, "
                             "or pass a .jsonl the bench wrote with --trace")
        folder = _generated(opts.subject, opts.generate_target, opts.force)
        builder.build(folder, target=opts.target, jobs=opts.jobs, cutlass_dir=opts.cutlass_dir,
                      progress=sys.stderr.isatty())
        jsonl = Path(png).with_suffix(".jsonl").resolve()
        jsonl.unlink(missing_ok=True)
        if opts.subject.kind == "conv":  # the bench's checks, then one traced run of each mode; no timing
            builder.run(folder, [], None, repeats=1, warmup=1,
                        extra_args=["--batch", str(opts.m), "--check-only", "--trace", str(jsonl)])
        else:
            builder.run(folder, [opts.m], None, repeats=1, warmup=1,
                        extra_args=["--no-baselines", "--trace", str(jsonl)])
        records = trace.load_trace(jsonl)
    try:
        picture_path, chrome = trace.write_outputs(records, png, opts.m)
    except OSError as err:
        raise _write_error(err, png, "-o") from err
    for line in trace.summary(records, opts.m):
        _out().print(escape(line))
    _out().print(f"wrote {escape(str(picture_path))} and {escape(str(chrome))} (open it in chrome://tracing or Perfetto)")


def _report_rows(rows: list[dict[str, Any]] | None, out: Path | None) -> None:
    if not rows:
        return
    from cusync_gen.bench_protocol import format_table

    console = _out()
    if not console.is_terminal:  # a log or a pipe: the table's full width rather than 80 columns of cut headers
        console = Console(highlight=False, soft_wrap=True, width=200)
    console.print(format_table(rows))
    if out is not None:
        try:
            fsio.write_file(out, (json.dumps(rows, indent=2) + "\n").encode(), "--results", overwrite=True)
        except OSError as err:
            raise _write_error(err, out, "--results") from err
        _out().print(f"wrote {escape(str(out))}")


@app.command("fetch-cutlass")
def fetch_cutlass_cmd(
    wheel: Annotated[Optional[Path], typer.Option("--wheel", help="Use this downloaded nvidia-cutlass wheel.")] = None,
    dest: Annotated[Optional[Path], typer.Option("--dest", help="Where to put it (default: third_party/cutlass "
                                             "in a checkout, else ~/.cache/cusync-gen/cutlass).")] = None,
    force: Annotated[bool, Flag("--force", help="Fetch again even if present; replace a --dest folder "
                                "that fetch-cutlass did not fill (never a file).")] = False,
) -> None:
    """Fetch CUTLASS's headers from the pinned nvidia-cutlass wheel.

    Installed from a wheel, cusync-gen puts them in the user cache, $XDG_CACHE_HOME/cusync-gen/cutlass (by default ~/.cache/cusync-gen/cutlass), where generated projects look for CUTLASS too; run from a checkout or an editable install, in its third_party/cutlass.
    """
    from cusync_gen.cutlass_fetch import CUTLASS_PIN, fetch_cutlass, is_fetched

    opts = options.fetch_options(wheel, dest, force)
    target = opts.dest.resolve()
    already = False
    with contextlib.suppress(OSError):  # an unusable --dest: fetch_cutlass says why
        already = not opts.force and is_fetched(target)
    root = fetch_cutlass(target, wheel=opts.wheel, force=opts.force)
    _out().print(f"{CUTLASS_PIN} {'already there' if already else 'fetched'}: {escape(str(root))}")


@app.command("docs")
def docs_cmd(
    name: Annotated[Optional[str], typer.Argument(help="The doc to print, e.g. spec-format; without it, the list.",
                                                  show_default=False)] = None,
) -> None:
    """List the documentation that comes with cusync-gen, or print one doc (Markdown)."""
    if name is None:
        for doc in paths.doc_names():
            print(f"{doc:<16} {paths.docs_dir() / f'{doc}.md'}")
        return
    path = paths.doc_path(name.removesuffix(".md"))
    if path is None:
        raise UsageError(f"no doc named {name[:40]!r}", hint=f"docs: {', '.join(paths.doc_names())}")
    try:
        sys.stdout.write(path.read_text())
    except OSError as err:
        raise UsageError(f"cannot read {path}: {err.strerror or err}") from err


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
        if _state["verbose"]:  # the traceback, then the same error line and exit code as without -v
            traceback.print_exception(err, file=sys.stderr)
            sys.stderr.flush()
        error = _os_error(err) if isinstance(err, OSError) else err
        _print_error(error)
        sys.exit(getattr(error, "exit_code", 1))
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
