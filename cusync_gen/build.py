"""Build and run a generated project: cmake + nvcc, then the generated `<name>_bench`.

Everything here works from the project's `manifest.json` (written by `render.generate`); nothing is
discovered by walking folders. External tools are looked up once (`find_tool`) and every failure becomes
a `ToolError` that keeps the command and the end of its output.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from cusync_gen import userfile
from cusync_gen.errors import (
    CheckFailedError,
    CusyncError,
    NoGpuError,
    NotRunError,
    SyncTimeoutError,
    ToolError,
    UsageError,
)
from cusync_gen.paths import default_cutlass_dir, example_names
from cusync_gen.spec.archs import facts_named

TAIL_LINES = 40                       # lines of output kept in a ToolError
BUILD_DIR = "build"                   # <project>/build
EXIT_BAD_ARGS = 2                     # exit codes of the generated bench (see README "Exit codes")
EXIT_NO_GPU = 3
EXIT_SYNC_TIMEOUT = 4
EXIT_CHECK_FAILED = 5
MAX_BENCH_JSON_DEPTH = 8               # a row of the bench's JSON output is flat
CUDA_ROOTS: tuple[str, ...] = ("/usr/local/cuda",)   # where nvcc is looked for after PATH, $CUDA_HOME, $CUDA_PATH
GPU_DEVICE_NODE = Path("/dev/nvidia0")               # present when the NVIDIA driver has a device
BACKEND_CHOICES = ("auto", "sm80", "sm90")           # run --backend: which version of an example
SM90_SUFFIX = "_sm90"                                # example X's Hopper version is X_sm90

_TOOL_HINTS = {
    "nvcc": "install the CUDA toolkit (12.4 or newer) and put its bin/ on PATH, or set CUDA_HOME",
    "cmake": "install CMake 3.24 or newer: `python3 -m pip install cmake` or `apt-get install cmake`",
    "ninja": "install Ninja: `python3 -m pip install ninja` or `apt-get install ninja-build`",
}
_NINJA_STATUS = re.compile(r"^\[(\d+)/(\d+)\]\s*(.*)$")
_TARGET = re.compile(r"^(?:sm_?|compute_)?(\d{2,3}[af]?)$")


# --------------------------------------------------------------------------------------------------
# Locating things
# --------------------------------------------------------------------------------------------------

def _has_cutlass_header(root: Path) -> bool:
    return (root / "include" / "cutlass" / "cutlass.h").is_file()


def find_cutlass(explicit: Path | None = None) -> Path:
    """The CUTLASS root to build against: `explicit`, then $CUTLASS_DIR, then the fetched copy.

    Each must contain include/cutlass/cutlass.h. An explicit or environment path that does not is an
    error rather than a silent fallback, so a typo never builds against another CUTLASS.
    """
    fetch_hint = "run `cusync-gen fetch-cutlass` or pass --cutlass-dir"
    if explicit is not None:
        root = Path(explicit).expanduser()
        if not _has_cutlass_header(root):
            raise ToolError(f"--cutlass-dir {root} has no include/cutlass/cutlass.h",
                            hint="point it at a CUTLASS checkout root, or " + fetch_hint)
        return root.resolve()
    env = os.environ.get("CUTLASS_DIR")
    if env:
        root = Path(env).expanduser()
        if not _has_cutlass_header(root):
            raise ToolError(f"CUTLASS_DIR={env} has no include/cutlass/cutlass.h",
                            hint="point CUTLASS_DIR at a CUTLASS checkout root, unset it, or " + fetch_hint)
        return root.resolve()
    root = default_cutlass_dir()
    if not _has_cutlass_header(root):
        raise ToolError(f"CUTLASS not found (no CUTLASS_DIR and nothing in {root})", hint=fetch_hint)
    return root.resolve()


def find_tool(name: str) -> str:
    """Absolute path of an external tool on PATH; nvcc is also looked for in the CUDA install folders."""
    found = shutil.which(name)
    if found:
        return found
    if name == "nvcc":
        roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), *CUDA_ROOTS]
        for root in filter(None, roots):
            candidate = Path(root) / "bin" / "nvcc"
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    hint = _TOOL_HINTS.get(name, f"install {name} and put it on PATH")
    raise ToolError(f"{name} not found on PATH", hint=hint)


def cuda_arch(target: str) -> str:
    """CMAKE_CUDA_ARCHITECTURES value for a target: "sm_90" -> "90", "sm_90a" -> "90a"."""
    match = _TARGET.match(target.strip())
    if not match:
        raise UsageError(f"--arch {target!r} is not a CUDA target",
                         hint="use a compute capability like sm_80, sm_86, sm_89 or sm_90")
    return match.group(1)


def build_architectures(manifest: dict[str, Any], target: str | None) -> str | None:
    """CMAKE_CUDA_ARCHITECTURES for a build: `target` if given, else the manifest's `cuda_arch`.

    Always passing it keeps a reused build folder from silently keeping an earlier --arch. A feature
    suffix the project needs (sm90's "90a" for wgmma/TMA) is kept when `target` names the same chip.
    """
    generated = str(manifest.get("cuda_arch") or "")
    if not target:
        return generated or None
    arch = cuda_arch(target)
    if generated[:-1] == arch and generated[-1:].isalpha():
        return generated
    facts = facts_named(manifest.get("arch"))
    if facts is not None and not any(arch.startswith(t.removeprefix("sm_")) for t in facts.targets):
        raise UsageError(f"--arch {target} cannot build this project: it uses Hopper kernels (arch: sm90, TMA and wgmma)",
                         hint="build it with --arch sm_90 (H100/H200), or generate the spec with arch: sm80")
    return arch


def read_manifest(project: Path) -> dict[str, Any]:
    """The project's manifest.json (see docs/interfaces.md)."""
    path = Path(project) / "manifest.json"
    try:  # never blocks (a FIFO is refused), bounded in size and nesting
        manifest = userfile.read_json(path, "manifest", userfile.MAX_MANIFEST_BYTES, userfile.MAX_MANIFEST_DEPTH,
                                      hint="regenerate the project with `cusync-gen generate`")
    except userfile.UserFileError as err:
        if err.reason == "missing":
            raise UsageError(f"{project} is not a generated project (no manifest.json)",
                             hint="generate one with `cusync-gen generate SPEC -o DIR`") from None
        if err.reason == "bad_path":
            raise
        raise CusyncError(f"{err.message}", hint="regenerate the project with `cusync-gen generate`") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("name"), str):
        raise CusyncError(f"{path} has no project name",
                          hint="regenerate the project with `cusync-gen generate`")
    return manifest


def bench_name(manifest: dict[str, Any]) -> str:
    """File name of the bench executable: manifest["bench"], else "<name>_bench"."""
    bench = manifest.get("bench")
    if isinstance(bench, dict):
        bench = bench.get("executable") or bench.get("name")
    return str(bench) if bench else f"{manifest['name']}_bench"


def bench_path(project: Path, manifest: dict[str, Any] | None = None) -> Path:
    """Where the built bench executable lives (it may not exist yet)."""
    project = Path(project)
    manifest = manifest if manifest is not None else read_manifest(project)
    name = bench_name(manifest)
    build_dir = project / BUILD_DIR
    for candidate in (build_dir / name, build_dir / "bin" / name):
        if candidate.is_file():
            return candidate
    return build_dir / name


# --------------------------------------------------------------------------------------------------
# Building
# --------------------------------------------------------------------------------------------------

def _stream(command: Sequence[str], on_line: Callable[[str], None], env: dict[str, str] | None = None,
            ) -> tuple[int, list[str]]:
    """Run `command` with stderr merged into stdout, handing each line to `on_line`.

    Returns the exit code and the last TAIL_LINES lines.
    """
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    try:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace", bufsize=1, env=env)
    except OSError as err:
        raise ToolError(f"cannot run {command[0]}: {err}", command=list(command)) from err
    assert proc.stdout is not None  # stdout=PIPE
    with proc:
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            tail.append(line)
            on_line(line)
    return proc.returncode, list(tail)


def _run_step(step: str, command: list[str], hint: str, progress: Progress | None,
              env: dict[str, str]) -> None:
    """One cmake invocation; with a progress bar, ninja's "[i/n]" lines drive it."""
    task = progress.add_task(step, total=None) if progress is not None else None

    def on_line(line: str) -> None:
        if progress is None or task is None:
            print(line, flush=True)
            return
        status = _NINJA_STATUS.match(line)
        if status:
            done, total, what = int(status.group(1)), int(status.group(2)), status.group(3)
            progress.update(task, completed=done, total=total, description=f"{step}: {_short(what)}")
        elif "warning" in line.lower() or "error" in line.lower():
            progress.console.print(line, markup=False, highlight=False)

    code, tail = _stream(command, on_line, env=env)
    if progress is not None and task is not None:
        total = progress.tasks[task].total or 1
        progress.update(task, description=step, total=total, completed=total if code == 0 else None)
        progress.stop_task(task)
    if code != 0:
        raise ToolError(f"{step} failed (exit {code})", hint=hint, command=command,
                        stderr_tail="\n".join(tail))


def _short(what: str, width: int = 50) -> str:
    """`Building CUDA object CMakeFiles/x.dir/src/stage_gemm1.cu.o` -> `Building CUDA object stage_gemm1.cu.o`."""
    words = what.strip().split(" ")
    if words and "/" in words[-1]:
        words[-1] = words[-1].rsplit("/", 1)[1]
    text = " ".join(words)
    return text if len(text) <= width else "..." + text[-(width - 3):]


def build(project: Path, target: str | None = None, jobs: int | None = None, build_type: str = "Release",
          cutlass_dir: Path | None = None, progress: bool = True, bar: Progress | None = None,
          label: str = "") -> Path:
    """Configure and build a generated project in `<project>/build`; returns the build folder.

    `target` ("sm_90") overrides the architecture the project was generated for. With `progress`, a
    rich progress bar follows ninja; without it, cmake's output is echoed line by line (for CI logs).
    `bar`: draw into this progress display instead (`tune` builds several projects side by side, each
    a pair of tasks named after `label`).
    """
    project = Path(project).resolve()
    manifest = read_manifest(project)
    cutlass = find_cutlass(cutlass_dir)
    cmake = find_tool("cmake")
    nvcc = find_tool("nvcc")
    build_dir = project / BUILD_DIR

    configure = [cmake, "-S", str(project), "-B", str(build_dir)]
    if shutil.which("ninja") and not (build_dir / "CMakeCache.txt").exists():
        configure += ["-G", "Ninja"]  # an existing build folder keeps the generator it was made with
    configure += [
        f"-DCMAKE_BUILD_TYPE={build_type}",
        f"-DCUTLASS_DIR={cutlass}",
        f"-DCMAKE_CUDA_COMPILER={nvcc}",
    ]
    architectures = build_architectures(manifest, target)
    if architectures:
        configure.append(f"-DCMAKE_CUDA_ARCHITECTURES={architectures}")
    compile_cmd = [cmake, "--build", str(build_dir)]
    if jobs:
        compile_cmd += ["-j", str(jobs)]

    env = dict(os.environ, NINJA_STATUS="[%f/%t] ")
    configure_hint = ("cmake could not configure the project: check the CUDA toolkit and CUTLASS_DIR "
                      f"({cutlass}); the lines above are the end of its output")
    build_hint = ("the compiler failed; the lines above are the end of its output "
                  "(rebuild with `--jobs 1` to see one error at a time)")
    if bar is not None:
        prefix = f"{label}: " if label else ""
        _run_step(f"{prefix}configure", configure, configure_hint, bar, env)
        _run_step(f"{prefix}build", compile_cmd, build_hint, bar, env)
        return build_dir
    if not progress:
        _run_step("configure", configure, configure_hint, None, env)
        _run_step("build", compile_cmd, build_hint, None, env)
        return build_dir
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True)) as bar:
        _run_step("configure", configure, configure_hint, bar, env)
        _run_step("build", compile_cmd, build_hint, bar, env)
    return build_dir


# --------------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------------

def has_gpu() -> bool:
    """True when a CUDA device is visible: `nvidia-smi -L` lists a GPU, or /dev/nvidia0 exists."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            proc = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            proc = None
        if proc is not None and proc.returncode == 0 and any(
                line.startswith("GPU ") for line in proc.stdout.splitlines()):
            return True
    return GPU_DEVICE_NODE.exists()


def gpu_arch() -> str | None:
    """The first GPU's architecture as a target name ("sm_90"), or None when nvidia-smi cannot say.

    `run` builds for the GPU it runs on, so that an example generated for sm_80 runs native SASS on a
    Hopper card instead of JIT-compiled PTX.
    """
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    try:
        proc = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    first = proc.stdout.split()[0] if proc.returncode == 0 and proc.stdout.split() else ""
    major, _, minor = first.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        return None
    return f"sm_{major}{minor}"


def is_hopper(target: str | None) -> bool:
    """Whether a target ("sm_90", "sm_90a", "90") is a Hopper part (compute capability 9.x)."""
    match = _TARGET.match(target.strip()) if target else None
    return match is not None and match.group(1).rstrip("af")[:-1] == "9"


def check_backend(backend: str) -> str:
    """run --backend: one of BACKEND_CHOICES."""
    if backend not in BACKEND_CHOICES:
        raise UsageError(f"--backend {backend[:40]!r} is not a backend", hint=f"use one of: {', '.join(BACKEND_CHOICES)}")
    return backend


def pick_example(name: str, backend: str = "auto", gpu: str | None = None, arch: str | None = None,
                 ) -> tuple[str, str]:
    """The shipped example `run NAME` uses, and why, in one line.

    An example X has a Hopper version X_sm90 (arch: sm90) beside it for some X (gpt3_mlp, llama_mlp,
    two_gemm). `backend` "sm80" or "sm90" takes that version (a UsageError when there is none); "auto"
    takes X_sm90 for X when the build is for Hopper (`arch`, the --arch option, else `gpu`, the local
    GPU's target from gpu_arch()) and keeps a name as given otherwise. Only example names come here: a
    spec path or a project is never rewritten.
    """
    check_backend(backend)
    # The sm90 attention layer (X_attention_sm90) is no version of the sm80 chain that run drives: its own bench runs it.
    examples = [e for e in example_names() if not (e.endswith("_attention" + SM90_SUFFIX) and e != name)]
    base = name.removesuffix(SM90_SUFFIX)
    versions = {"sm80": base, "sm90": base + SM90_SUFFIX}
    if backend != "auto":
        chosen = versions[backend]
        if chosen not in examples:
            others = [e for e in examples if e.endswith(SM90_SUFFIX) == (backend == "sm90")]
            raise UsageError(f"--backend {backend}: example {name!r} has no {backend} version",
                             hint=f"{backend} examples: {', '.join(others)}; or --backend auto")
        return chosen, f"example {chosen} ({backend} backend): --backend {backend}"
    if name.endswith(SM90_SUFFIX):
        return name, f"example {name} (sm90 backend): named so"
    sm90 = versions["sm90"]
    if sm90 not in examples:
        return name, f"example {name} (sm80 backend): it has no sm90 version"
    target = arch or gpu
    why = f"--arch {arch}" if arch else f"the local GPU is {gpu}"
    if is_hopper(target):
        return sm90, f"example {sm90} (sm90 backend) for {name}: {why} (Hopper); --backend sm80 keeps {name}"
    why = f"{why}, not Hopper" if target else "nvidia-smi found no GPU"
    return name, f"example {name} (sm80 backend): {why}; its Hopper version is {sm90} (--backend sm90)"


def _value(item: Any) -> str:
    """Enum members and plain strings alike: Policy.ROW -> "row"."""
    return str(getattr(item, "value", item))


def bench_command(bench: Path, ms: Sequence[int], policies: Iterable[Any] | None = None, repeats: int = 50,
                  warmup: int = 10, extra_args: Sequence[str] = ()) -> list[str]:
    """The command line `run` executes."""
    if not ms or any(not isinstance(m, int) or m <= 0 for m in ms):
        raise UsageError(f"M values must be positive integers, got {list(ms)}", hint="e.g. --m 256,1024")
    if repeats <= 0 or warmup < 0:
        raise UsageError(f"--repeats must be positive and --warmup non-negative (got {repeats}, {warmup})")
    command = [str(bench), "--m", ",".join(str(m) for m in ms), "--repeats", str(repeats),
               "--warmup", str(warmup)]
    policy_list = [_value(p) for p in policies] if policies else []
    if policy_list:
        command += ["--policies", ",".join(policy_list)]
    return command + [str(a) for a in extra_args]


_SYNC_TIMEOUT_HINT = ("a consumer tile waited for a producer tile that was never posted; this is a bug in the "
                      "generated synchronization: please report it with the spec")
CONV_RESULT_PREFIX = "RESULT "  # the conv bench's result lines: RESULT {json}; its other lines are text


def layer_bench_command(bench: Path, shapes: Sequence[str], repeats: int = 50) -> list[str]:
    """The command line `run` executes for the sm90 attention layer: check and time every shape
    (`p:BxS+L` prompts, `g:B+L` generation steps; options.layer_shapes)."""
    if not shapes or any(not re.fullmatch(r"(p:\d+x\d+|g:\d+)\+\d+", str(s)) for s in shapes):
        raise UsageError(f"attention layer shapes must be p:BxS+L or g:B+L, got {list(shapes)[:4]}",
                         hint="e.g. --m 1,512 --batch 1 --cache 0")
    if repeats <= 0:
        raise UsageError(f"--repeats must be positive (got {repeats})")
    return [str(bench), "--check", "--time", "--repeats", str(repeats), *[str(s) for s in shapes]]


def _describe_layer_failures(rows: list[dict[str, Any]]) -> str:
    parts = []
    for row in rows:
        if row.get("error"):
            parts.append(f"{row.get('shape')}: {row.get('error')}")
        elif row.get("ok") is False:
            parts.append(f"{row.get('shape')}: bitwise={row.get('bitwise')}, graph={row.get('graph')}, "
                         f"unwritten={row.get('unwritten')}, attention err={_num(row.get('attn_err'), '.2e')}, "
                         f"layer err={_num(row.get('layer_err'), '.2e')}")
    return "; ".join(parts)


def parse_bench_line(line: str) -> dict[str, Any] | None:
    """One line of bench stdout: a dict for a JSON object line, None for anything else."""
    text = line.strip()
    if not text.startswith("{"):
        return None
    try:
        obj = userfile.parse_json(text, "the bench's output", MAX_BENCH_JSON_DEPTH)
    except userfile.UserFileError:
        raise ToolError(f"the bench printed a malformed JSON line: {text[:200]}",
                        hint="the generated bench and this cusync-gen are out of step: regenerate the project",
                        ) from None
    if not isinstance(obj, dict):
        raise ToolError(f"the bench printed JSON that is not an object: {text[:200]}")
    return obj


def _describe_failures(rows: list[dict[str, Any]]) -> str:
    parts = []
    for row in rows:
        if row.get("bitwise_equal") is False or row.get("graph_ok") is False:
            err = row.get("ref_rel_err")
            err_text = f"{err:.2e}" if isinstance(err, (int, float)) else "-"
            parts.append(f"m={row.get('m')} {row.get('policy')}: bitwise_equal={row.get('bitwise_equal')}, "
                         f"graph_ok={row.get('graph_ok')}, ref_rel_err={err_text}")
    return "; ".join(parts)


def run(project: Path, ms: Sequence[int], policies: Iterable[Any] | None = None, repeats: int = 50,
        warmup: int = 10, extra_args: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Run the built bench of `project` for each M; returns its JSON rows (keys: see README).

    Without a GPU it stops before the bench: NotRunError (exit 6, the project is built).
    Bench exit codes: 0 ok; 2 it rejected its arguments (UsageError); 3 it found no device (NoGpuError);
    4 a spin-wait timed out (SyncTimeoutError); 5 the overlapped result differs from the sequential one or
    from the reference (CheckFailedError); anything else is a ToolError. The rows parsed before a failure
    are attached to the error as `err.rows`.
    """
    shown, project = project, Path(project).resolve()
    manifest = read_manifest(project)
    bench = bench_path(project, manifest)
    if not bench.is_file():
        raise ToolError(f"{bench} is not built", hint=f"run `cusync-gen build {project}` first")
    kind = manifest.get("kind")
    layer = kind == "attention_sm90"  # the sm90 attention layer: its shapes are extra_args
    conv = kind == "conv"             # a conv chain: --batch (and --preheat) are extra_args, no M
    if layer:
        command = layer_bench_command(bench, extra_args, repeats)
    elif conv:
        command = [str(bench), "--repeats", str(repeats), "--warmup", str(warmup), *[str(a) for a in extra_args]]
    else:
        command = bench_command(bench, ms, policies, repeats, warmup, extra_args)
    if not has_gpu():
        raise NotRunError(f"{shown} is built; running it needs a CUDA GPU, and none was found",
                          hint=f"run `cusync-gen run {shown}` on a machine with an NVIDIA GPU "
                               "(exit 6: built, not run)")

    stderr_tail: deque[str] = deque(maxlen=TAIL_LINES)
    try:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                errors="replace", bufsize=1, cwd=project)
    except OSError as err:
        raise ToolError(f"cannot run {bench.name}: {err}", command=command) from err

    def pump_stderr() -> None:
        assert proc.stderr is not None  # stderr=PIPE
        for raw in proc.stderr:
            line = raw.rstrip("\n")
            stderr_tail.append(line)
            print(line, file=sys.stderr, flush=True)

    reader = threading.Thread(target=pump_stderr, daemon=True)
    reader.start()
    rows: list[dict[str, Any]] = []
    text_tail: deque[str] = deque(maxlen=TAIL_LINES)  # the bench's stdout lines that are no rows
    bad_line: ToolError | None = None
    assert proc.stdout is not None  # stdout=PIPE
    with proc:
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            try:
                row = parse_bench_line(line.removeprefix(CONV_RESULT_PREFIX) if conv else line)
            except ToolError as err:
                bad_line = bad_line or err
                continue
            if row is None:
                print(line, file=sys.stderr, flush=True)
                if line.strip():
                    text_tail.append(line.strip())
            else:
                rows.append(row)
        # Inside the `with`: leaving it closes the pipes, and stdout can end before stderr does (the
        # reader may still be draining it, with the bench's `error:` line last).
        reader.join()
    code = proc.returncode
    tail = "\n".join(stderr_tail)

    if code == 0:
        if bad_line is not None:
            raise bad_line
        if not rows:
            raise ToolError(f"{bench.name} printed no result rows", command=command, stderr_tail=tail,
                            hint="the generated bench and this cusync-gen are out of step: regenerate")
        return rows
    last_err = next((line for line in reversed(stderr_tail) if line.startswith("error:")),
                    stderr_tail[-1] if stderr_tail else "")
    failures = _describe_layer_failures(rows) if layer else ""
    if layer and code == 1 and failures:  # the layer bench: exit 1 when a shape's check failed
        err: CusyncError = CheckFailedError(
            f"results differ: {failures}",
            hint="the layer's output is not reproducible or not within tolerance of the fp32 reference")
    elif layer:
        err = ToolError(f"{bench.name} failed (exit {code})", command=command, stderr_tail=tail,
                        hint="the lines above are the end of its output")
    elif conv and code == EXIT_CHECK_FAILED:  # the conv bench says on stdout which batch and stage differ
        detail = "; ".join(line for line in text_tail if "differ" in line) or "see the lines above"
        err = CheckFailedError(f"results differ: {detail}",
                               hint="the tile-synced or chained run does not match back to back, or a stage is "
                                    "not within tolerance of the reference convolution")
    elif conv and any("sync timeout" in line for line in text_tail):
        err = SyncTimeoutError(next(line for line in text_tail if "sync timeout" in line),
                               hint=_SYNC_TIMEOUT_HINT)
    elif code == EXIT_BAD_ARGS:
        reason = last_err.removeprefix("error:").strip() or "see its usage above"
        err = UsageError(f"{bench.name} rejected its arguments: {reason}", hint=f"command: {' '.join(command)}")
    elif code == EXIT_NO_GPU:
        err = NoGpuError(f"{bench.name}: {last_err.removeprefix('error:').strip() or 'no CUDA device found'}",
                         hint="check the NVIDIA driver (nvidia-smi) and CUDA_VISIBLE_DEVICES",
                         command=command, stderr_tail=tail)
    elif code == EXIT_SYNC_TIMEOUT:
        reasons = [str(r["sync_error"]) for r in rows if r.get("sync_error")]
        message = reasons[0] if reasons else (last_err or "a spin-wait timed out")
        err = SyncTimeoutError(
            f"sync timeout: {message}",
            hint=_SYNC_TIMEOUT_HINT)
    elif code == EXIT_CHECK_FAILED:
        detail = _describe_failures(rows) or last_err
        err = CheckFailedError(
            "results differ" + (f": {detail}" if detail else ""),
            hint="the overlapped chain does not match the sequential chain or the reference")
    elif code < 0:
        err = ToolError(f"{bench.name} was killed by signal {-code}", command=command, stderr_tail=tail)
    else:
        err = ToolError(f"{bench.name} failed (exit {code})", command=command, stderr_tail=tail,
                        hint="the lines above are the end of its output")
    err.rows = rows  # type: ignore[attr-defined]
    raise err


# --------------------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------------------

def _num(value: Any, fmt: str) -> str:
    return format(value, fmt) if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"


def format_table(rows: Sequence[dict[str, Any]]) -> Table:
    """The `cusync-gen run` table: one line per (M, policy).

    sm90 benches time what the library's `run()` does at each M (its mode, chosen by the measured table
    or the default rule) against the cuBLAS chain in the same binary, and the tile-synced overlap against
    the same kernels run sequentially: those rows lead with run() and cuBLAS, say which mode ran and why
    (the caption), and say plainly at which M run() does not run the tile-synced kernels. Rows without an
    "m" are run-level records (the sm90 bench's `floor_tflops`): shown in the caption.
    """
    if any("shape" in row and ("layer_us" in row or "layer_err" in row) for row in rows):
        return _format_layer_table(rows)
    if any("batch" in row and "overlap_us" in row for row in rows):
        return _format_conv_table(rows)
    results = [row for row in rows if "m" in row]
    if any("run_us" in row for row in results):
        return _format_sm90_table(rows, results)
    table = Table(title="cuSync chain: sequential vs overlapped (median times)")
    for name in ["M", "policy", "sequential us", "overlapped us", "speedup", "bitwise", "ref err"]:
        table.add_column(name, justify="left" if name == "policy" else "right")
    notes: list[str] = []
    for row in results:
        table.add_row(str(row.get("m", "-")), _policy_cell(row, notes), _num(row.get("sequential_us"), ".1f"),
                      _num(row.get("overlapped_us"), ".1f"), _ratio(row.get("speedup")), _bitwise(row),
                      _num(row.get("ref_rel_err"), ".1e"))
    if notes:
        table.caption = "\n".join(notes)
    return table


def _format_conv_table(rows: Sequence[dict[str, Any]]) -> Table:
    """A conv chain per batch: back to back, back to back chained with PDL, the tile-synced overlap, and
    run() (its mode after autotune()), with the checks (bitwise against back to back, reference error)."""
    table = Table(title="conv chain: run() and its modes (median CUDA-graph times, same binary)")
    for name in ["batch", "run() us", "run() mode", "back to back us", "chained us", "tile-synced us",
                 "overlap speedup", "stages alone us", "bitwise", "ref err"]:
        table.add_column(name, justify="left" if name == "run() mode" else "right")
    for row in rows:
        if "batch" not in row:
            continue
        chained = row.get("chained_us")
        stages = row.get("stages_us") if isinstance(row.get("stages_us"), list) else []
        seq, over = row.get("sequential_us"), row.get("overlap_us")
        speedup = seq / over if isinstance(seq, (int, float)) and isinstance(over, (int, float)) and over > 0 else None
        table.add_row(str(row["batch"]), _num(row.get("run_us"), ".1f"), str(row.get("run_mode", "-")),
                      _num(seq, ".1f"), _num(chained, ".1f") if isinstance(chained, (int, float)) and chained >= 0 else "-",
                      _num(over, ".1f"), _ratio(speedup), " + ".join(_num(v, ".1f") for v in stages) or "-",
                      _bitwise(row, "bitwise"), _num(row.get("ref_err"), ".1e"))
    table.caption = ("back to back: one launch per stage; chained: programmatic dependent launch between stages; "
                     "tile-synced: each block waits for the producer rows its window reads")
    return table


def _format_layer_table(rows: Sequence[dict[str, Any]]) -> Table:
    """The sm90 attention layer: per shape, each stage's time in its own CUDA graph, the whole layer's, and
    the checks (bitwise run to run and from a graph replay, error against the fp32 reference)."""
    table = Table(title="sm90 attention layer: stages and the layer (median CUDA-graph times)")
    for name in ["shape", "mode", "qkv us", "rope us", "attention us", "proj us", "layer us", "attention err",
                 "layer err", "bitwise", "graph"]:
        table.add_column(name, justify="left" if name in ("shape", "mode") else "right")
    for row in rows:
        if "shape" not in row:
            continue
        mode = str(row.get("error") or row.get("mode", "-"))
        table.add_row(str(row["shape"]), mode, *(_num(row.get(f"{k}_us"), ".1f") for k in
                                                 ("qkv", "rope", "attention", "proj", "layer")),
                      _num(row.get("attn_err"), ".1e"), _num(row.get("layer_err"), ".1e"),
                      _bitwise(row, "bitwise"), _bitwise(row, "graph"))
    table.caption = ("p:BxS+L: B sequences of S new tokens after L cached ones (a prompt); g:B+L: one new token "
                     "per sequence (a generation step, split-KV decode)")
    return table


def _format_sm90_table(rows: Sequence[dict[str, Any]], results: list[dict[str, Any]]) -> Table:
    table = Table(title="run() against the cuBLAS chain, and the tile-synced overlap (median times, same binary)")
    for name in ["M", "run() us", "run() mode", "cuBLAS chain us", "run() vs cuBLAS", "policy", "tile-synced us",
                 "sequential us", "overlap speedup", "bitwise", "ref err"]:
        table.add_column(name, justify="left" if name in ("run() mode", "policy") else "right")
    notes = [f"floor: cuBLAS 8192^3 at {row['floor_tflops']:.0f} TFLOP/s" for row in rows if "floor_tflops" in row]
    reasons: dict[int, str] = {}
    not_synced: list[str] = []
    for row in results:
        run_us, cublas_us = _valid(row.get("run_us")), _valid(row.get("cublas_us"))
        mode = str(row.get("mode", "-"))
        m = row.get("m")
        if isinstance(m, int) and m not in reasons:
            reasons[m] = str(row.get("mode_reason", ""))
            if mode != "overlap":
                not_synced.append(str(m))
        vs = cublas_us / run_us if run_us and cublas_us else None
        table.add_row(str(m if m is not None else "-"), _num(run_us, ".1f"), mode if mode != "-" or run_us else "-",
                      _num(cublas_us, ".1f"), _ratio(vs), _policy_cell(row, notes), _num(row.get("overlapped_us"), ".1f"),
                      _num(row.get("sequential_us"), ".1f"), _ratio(row.get("speedup")), _bitwise(row),
                      _num(row.get("ref_rel_err"), ".1e"))
    notes += [f"M = {m}: run() took {reason}" for m, reason in reasons.items() if reason]
    if not_synced:
        notes.append(f"At M = {', '.join(not_synced)} run() does not run the tile-synced kernels: the mode named "
                     "above was faster there (the tile-synced columns time them anyway).")
    if notes:
        table.caption = "\n".join(notes)
    return table


def _valid(value: Any) -> float | None:
    """A time the bench measured (it reports -1 for a baseline it could not run)."""
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def _ratio(value: Any) -> str:
    return f"{value:.2f}x" if isinstance(value, (int, float)) else "-"


def _bitwise(row: dict[str, Any], key: str = "bitwise_equal") -> str:
    return {True: "[green]yes[/]", False: "[bold red]NO[/]"}.get(row.get(key), "-")


def _policy_cell(row: dict[str, Any], notes: list[str]) -> str:
    """The row's policy (red on a sync error) and its notes."""
    policy = str(row.get("policy", "-"))
    if row.get("sync_error"):
        policy = f"[red]{policy}[/]"
        notes.append(f"m={row.get('m')} {row.get('policy')}: {row['sync_error']}")
    if row.get("graph_ok") is False:
        notes.append(f"m={row.get('m')} {row.get('policy')}: CUDA graph capture failed")
    return policy