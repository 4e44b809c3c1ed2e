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

from cusync_gen import userfile
from cusync_gen.bench_protocol import protocol_of
from cusync_gen.errors import (
    CusyncError,
    NotRunError,
    ToolError,
    UsageError,
)
from cusync_gen.paths import check_build_path, default_cutlass_dir, example_names
from cusync_gen.spec.archs import facts_named

TAIL_LINES = 40                       # lines of output kept in a ToolError
BUILD_DIR = "build"                   # <project>/build
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


_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,127}")
_CUDA_ARCH = re.compile(r"[0-9]{2,3}[a-z]?")


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
    # What reaches CMake or is executed: a plain file name, a plain architecture (a `;`, a space or a
    # path there would pass other options to CMake or run a program outside the project).
    checks = (("name", manifest["name"], _PLAIN_NAME), ("bench", _bench_field(manifest), _PLAIN_NAME),
              ("cuda_arch", manifest.get("cuda_arch"), _CUDA_ARCH))
    for key, value, pattern in checks:
        if value not in (None, "") and not (isinstance(value, str) and pattern.fullmatch(value)):
            raise CusyncError(f"{path}: {key} {value!r} is not a plain {'architecture' if key == 'cuda_arch' else 'file name'}",
                              hint="regenerate the project with `cusync-gen generate`")
    return manifest


def _bench_field(manifest: dict[str, Any]) -> Any:
    """manifest["bench"] as written: a name, or an object with its "executable" (or "name")."""
    bench = manifest.get("bench")
    return bench.get("executable") or bench.get("name") if isinstance(bench, dict) else bench


def bench_name(manifest: dict[str, Any]) -> str:
    """File name of the bench executable: manifest["bench"], else "<name>_bench"."""
    bench = _bench_field(manifest)
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


MAX_CMAKE_CACHE_BYTES = 4 << 20  # a CMakeCache.txt is some 50 KB; a larger one is left to CMake


def _cache_entries(cache: Path) -> dict[str, str]:
    """`KEY:TYPE=VALUE` lines of a CMakeCache.txt, as {KEY: VALUE}; {} for one that cannot be read."""
    try:  # never blocks on a FIFO, bounded in size
        text = userfile.read_bytes(cache, "CMake cache", MAX_CMAKE_CACHE_BYTES).decode("utf-8", "replace")
    except (userfile.UserFileError, OSError):
        return {}
    entries = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.startswith(("#", "//")):
            entries[key.partition(":")[0]] = value
    return entries


def _same_dir(recorded: str, current: Path) -> bool:
    """A folder a CMake cache recorded is `current` (as CMake checks: the same file, so a link to it counts)."""
    try:
        return os.path.samefile(recorded, current)
    except OSError:  # gone: the project was moved
        return False


def moved_cache(build_dir: Path, source_dir: Path) -> str | None:
    """The folder `build_dir`'s CMake cache was made in, when it is not `build_dir` configured from
    `source_dir` (the project was moved or copied, build folder included; CMake refuses such a cache); else None."""
    cache = build_dir / "CMakeCache.txt"
    if not cache.is_file():
        return None
    entries = _cache_entries(cache)
    for key, current in (("CMAKE_CACHEFILE_DIR", build_dir), ("CMAKE_HOME_DIRECTORY", source_dir)):
        recorded = entries.get(key)
        if recorded and not _same_dir(recorded, current):
            return recorded
    return None


def reset_moved_cache(build_dir: Path, source_dir: Path) -> str | None:
    """Remove a moved project's CMake cache (CMakeCache.txt and CMakeFiles/, which hold the old absolute
    paths) so the next configure starts clean; nothing else in `build_dir` is touched, nothing outside it.
    Returns the folder the cache was made in, or None when it is this build's own (nothing removed)."""
    old = moved_cache(build_dir, source_dir)
    if old is None:
        return None
    try:
        (build_dir / "CMakeCache.txt").unlink()
        files = build_dir / "CMakeFiles"
        if files.is_symlink() or (files.exists() and not files.is_dir()):
            files.unlink()  # a link itself, never what it points to
        elif files.is_dir():
            shutil.rmtree(files)
    except OSError as err:
        raise ToolError(f"cannot remove the CMake cache {build_dir} kept from {old}: {err.strerror or err}",
                        hint=f"delete {build_dir} and build again") from err
    return old


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
    check_build_path(project, "the project folder")
    check_build_path(cutlass, "the CUTLASS folder")
    cmake = find_tool("cmake")
    nvcc = find_tool("nvcc")
    build_dir = project / BUILD_DIR
    # <project>/build is ours: a cache left from where the project was before it moved is removed, since
    # CMake only refuses it ("CMakeCache.txt directory ... is different")
    old = reset_moved_cache(build_dir, project)
    if old is not None:
        note = f"{build_dir}: its CMake cache was made in {old} (the project moved); configuring it afresh"
        if bar is not None:
            bar.console.print(note, markup=False, highlight=False)
        else:
            print(note, file=sys.stderr, flush=True)

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
    protocol = protocol_of(manifest)  # what differs between kinds of bench (cusync_gen/bench_protocol.py)
    command = protocol.command(bench, ms, policies, repeats, warmup, extra_args)
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
                row = protocol.row(line)
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
    err = protocol.failure(code, rows, list(text_tail), list(stderr_tail), command, bench.name)
    err.rows = rows  # type: ignore[attr-defined]
    raise err


