"""The application-grade API of every generated project (issue 12, item 2, in part).

- The public class is movable, not copyable; its moves are built on swap(), which lists every data member.
- Test hooks live in <name>_testing.h (testing::Access), not in the public class.
- No device-wide synchronization and no blocking copy or memset in library code: initialize(),
  check_sync_error() and clear_sync_error() work on a stream (default cudaStreamLegacy).
- A plain C ABI, <name>_c.h (C89/C99, extern "C" guarded) and src/<name>_c.cpp (compiled into the library).
Fast: rendered in memory; the compile checks need only host gcc/g++ and CUDA's headers (no nvcc, no GPU).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import EXAMPLES, EXAMPLES_ATTENTION, EXAMPLES_SM90, REPO
from cusync_gen.render import plan_of_spec, render_project
from cusync_gen.spec import load_spec

SPECS = REPO / "cusync_gen" / "examples"
C_FUNCTIONS = ("create", "destroy", "initialize", "update", "run", "run_sequential", "check_sync_error", "status_string")


@functools.lru_cache(maxsize=None)
def rendered(name: str) -> dict[str, str]:
    return render_project(plan_of_spec(load_spec(SPECS / f"{name}.yaml")))


def class_name(name: str) -> str:
    return plan_of_spec(load_spec(SPECS / f"{name}.yaml")).class_name


def class_body(header: str, cls: str) -> str:
    start = header.index(f"class {cls} {{")
    return header[start:header.index("\n};\n", start)]


def cuda_include() -> Path | None:
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(str(Path(nvcc).resolve().parent.parent))
    return next((Path(r) / "include" for r in roots if r and (Path(r) / "include" / "cuda_runtime_api.h").is_file()), None)


def write_include(name: str, into: Path) -> Path:
    """The project's include/ and src/ folders, written out."""
    for path, text in rendered(name).items():
        if path.startswith(("include/", "src/")):
            (into / path).parent.mkdir(parents=True, exist_ok=True)
            (into / path).write_text(text)
    return into


def compiler(*names: str) -> str:
    found = next((shutil.which(n) for n in names if shutil.which(n)), None)
    if found is None:
        pytest.skip(f"none of {names} found")
    return found


# --------------------------------------------------------------------------------------------------
# The C++ class


@pytest.mark.parametrize("name", EXAMPLES)
def test_class_is_movable_not_copyable(name: str) -> None:
    cls = class_name(name)
    body = class_body(rendered(name)[f"include/{name}.h"], cls)
    for line in (f"{cls}(const {cls}&) = delete;", f"{cls}& operator=(const {cls}&) = delete;",
                 f"{cls}({cls}&& other) noexcept;", f"{cls}& operator=({cls}&& other) noexcept;"):
        assert line in body, line
    source = rendered(name)[f"src/{name}.cu"]
    # the moves are the runtime class's (its move constructor swaps with a fresh object; tested below)
    assert f"{cls}::{cls}({cls}&& other) noexcept = default;" in source
    assert f"{cls}& {cls}::operator=({cls}&& other) noexcept = default;" in source


MEMBER = re.compile(r"^  (?:mutable )?[\w:<>* ]+?[ *](\w+_)(?:\[[^\]]*\])*(?: = [^;]*|\{[^;]*\})?;", re.MULTILINE)


def swapped(source: str, signature: str) -> list[str]:
    """The members a swap function's body exchanges: `swap(x_, other.x_);` or `x_.swap(other.x_);`."""
    body = source[source.index(signature):]
    first = body.splitlines()[0]
    body = first if first.rstrip().endswith("}") else body[:body.index("\n}\n")]
    pairs = re.findall(r"\bswap\((\w+_), other\.(\w+_)\);", body) + re.findall(r"\b(\w+_)\.swap\(other\.(\w+_)\);", body)
    assert all(a == b for a, b in pairs), pairs
    return sorted(a for a, _ in pairs)


def private_members(header: str, cls: str, after: str = "\n private:\n") -> list[str]:
    body = header[header.index(f"class {cls} "):]
    body = body[:body.index("\n};\n")]
    return sorted(MEMBER.findall(body.split(after, 1)[1]))


@pytest.mark.parametrize("name", EXAMPLES)
def test_swap_lists_every_data_member(name: str) -> None:
    """A member that swap() forgets would stay behind in a moved-from object (a double free)."""
    cls = class_name(name)
    files = rendered(name)
    members = private_members(files[f"include/{name}.h"], cls)
    assert members, "the class holds its state"
    assert swapped(files[f"src/{name}.cu"], f"void {cls}::swap({cls}& other) noexcept") == members


RUNTIME_SWAPS = [  # (header, class, the header holding swap's definition, swap's signature, private/protected marker)
    ("cusync/chain.h", "ChainBase", "cusync/chain.cuh", "inline void ChainBase::swap_base(ChainBase& other) noexcept",
     "\n protected:\n"),
    ("cusync/chain.h", "TwoStreams", "cusync/chain.cuh", "inline void TwoStreams::swap(TwoStreams& other) noexcept",
     "\n private:\n"),
    ("cusync/chain.h", "StagedChain", "cusync/chain.cuh",
     "inline void StagedChain::swap_staged(StagedChain& other) noexcept", "\n protected:\n"),
    ("cusync/sm80/chain.h", "Chain", "cusync/sm80/chain.cuh", "inline void Chain::swap(Chain& other) noexcept",
     "\n private:\n"),
    ("cusync/sm90/chain.h", "Chain", "cusync/sm90/chain.cuh", "inline void Chain::swap(Chain& other) noexcept",
     "\n private:\n"),
    ("cusync/attention_chain.h", "AttentionChain", "cusync/attention_chain.cuh",
     "inline void AttentionChain::swap(AttentionChain& other) noexcept", "\n private:\n"),
]


@pytest.mark.parametrize(("source", "cls"), [("sm80/include/cusync/sm80/chain.cuh", "Chain"),
                                             ("sm90/include/cusync/sm90/chain.cuh", "Chain"),
                                             ("runtime/include/cusync/attention_chain.cuh", "AttentionChain")])
def test_runtime_moves_are_built_on_swap(source: str, cls: str) -> None:
    """A moved-from chain is as if just constructed: the move constructor swaps with a fresh object, and
    assignment moves into a temporary that frees what the target held."""
    text = (REPO / "templates" / source).read_text()
    assert re.search(rf"inline {cls}::{cls}\({cls}&& other\) noexcept : [^{{]*\{{ swap\(other\); \}}", text)
    assert f"inline {cls}& {cls}::operator=({cls}&& other) noexcept {{ return move_assign(*this, other); }}" in text
    helper = (REPO / "templates" / "runtime" / "include" / "cusync" / "chain.h").read_text()
    assert "Chain taken(static_cast<Chain&&>(other));" in helper and "self.swap(taken);" in helper


@pytest.mark.parametrize(("header", "cls", "source", "signature", "marker"), RUNTIME_SWAPS)
def test_runtime_swaps_list_every_data_member(header: str, cls: str, source: str, signature: str, marker: str) -> None:
    """The runtime classes the generated ones hold: each swap lists its own class's members (and the
    derived classes call their base's swap)."""
    root = REPO / "templates"
    def find(rel: str) -> str:
        backend = rel.split("/")[1] if rel.count("/") == 2 else None
        return (root / (f"{backend}/include/{rel}" if backend else f"runtime/include/{rel}")).read_text()
    members = private_members(find(header), cls, marker)
    assert members
    assert swapped(find(source), signature) == members


@pytest.mark.parametrize("name", EXAMPLES)
def test_test_hooks_are_out_of_the_public_class(name: str) -> None:
    files = rendered(name)
    public = files[f"include/{name}.h"]
    testing = files[f"include/{name}_testing.h"]
    hooks = ["inject_missing_posts"] + (["scores", "probs", "heads_out"] if name in EXAMPLES_ATTENTION else ["set_epoch_for_testing"])
    for hook in hooks:
        assert not re.search(rf"\b{hook}\(", public), hook
        assert re.search(rf"static .*\b{hook}\(", testing), hook
    assert "friend struct testing::Access;" in public
    assert f'#include "{name}.h"' in testing
    assert f'#include "{name}_testing.h"' in files[f"bench/{name}_bench.cu"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_no_device_wide_synchronization_in_the_library(name: str) -> None:
    """Library code (src/, and the runtime's host helpers) synchronizes streams, never the device, and copies
    and clears with the stream-ordered calls."""
    library = {p: t for p, t in rendered(name).items() if p.startswith(("src/", "include/")) and not p.endswith(".md")}
    for path, text in library.items():
        for call in ("cudaDeviceSynchronize", "cudaMemcpy(", "cudaMemset(", "cudaMemcpyToSymbol("):
            assert call not in text, (path, call)
    header = rendered(name)[f"include/{name}.h"]
    assert "cusync::Status check_sync_error(cusync::SyncErrorInfo* info = nullptr, cudaStream_t stream = cudaStreamLegacy);" in header
    assert "cusync::Status clear_sync_error(cudaStream_t stream = cudaStreamLegacy);" in header
    assert re.search(r"cusync::Status initialize\(Arguments const& args, .*cudaStream_t stream = cudaStreamLegacy\);", header)
    source = rendered(name)[f"src/{name}.cu"] + rendered(name).get("include/cusync/chain.cuh", "")
    assert "cudaMemcpyAsync(&error" in source and "cudaStreamSynchronize(stream)" in source


# --------------------------------------------------------------------------------------------------
# The C ABI


@pytest.mark.parametrize("name", EXAMPLES)
def test_c_abi_is_rendered_built_and_installed(name: str) -> None:
    files = rendered(name)
    header = files[f"include/{name}_c.h"]
    assert "//" not in re.sub(r'"[^"\n]*"', "", header.replace("://", "")), "C89: no // comments"
    guard = name.upper() + "_C_H_"
    assert f"#ifndef {guard}\n#define {guard}\n" in header
    assert '#ifdef __cplusplus\nextern "C" {\n#endif' in header
    code = re.sub(r"/\*.*?\*/", "", header, flags=re.DOTALL).replace('extern "C"', "")
    assert not re.search(r"\bclass\b|\bnamespace\b|::|&|\btemplate\b|\bnullptr\b", code), "C++ in the C header"
    assert f"typedef struct {name}_chain {name}_chain;" in header
    functions = C_FUNCTIONS + (("set_mode", "mode") if name in EXAMPLES_SM90 else ())
    declared = set(re.findall(rf"^(?:int|const char\*) {name}_(\w+)\(", header, re.MULTILINE))
    assert set(functions) <= declared, declared
    assert (name in EXAMPLES_SM90) == ("set_mode" in declared)
    assert re.search(rf"^int {name}_run\({name}_chain\* chain, cudaStream_t stream\);$", header, re.MULTILINE)
    source = files[f"src/{name}_c.cpp"]
    assert "catch (...)" in source and not re.search(r"\bthrow\b", source)
    for function in declared:
        assert re.search(rf"^(?:int|const char\*) {name}_{function}\(", source, re.MULTILINE), function
    cmake = files["CMakeLists.txt"]
    assert f"  src/{name}_c.cpp\n" in cmake
    assert f"install(FILES include/{name}.h include/{name}_c.h DESTINATION" in cmake
    assert f"{name}_testing.h" not in cmake.split("install(FILES", 1)[1].split(")", 1)[0]


@pytest.mark.parametrize("name", ["two_gemm", "two_gemm_sm90", "llama_mlp_split", "gpt3_attention"])
def test_headers_and_c_abi_compile_on_the_host(name: str, tmp_path: Path) -> None:
    """gcc compiles <name>_c.h as C89 and C99 (pedantic; CUDA's headers as system headers); g++ compiles the
    public and testing headers and the C ABI's source (it sees only the public header)."""
    cuda = cuda_include()
    if cuda is None:
        pytest.skip("CUDA headers not found")
    cc, cxx = compiler("gcc", "cc"), compiler("g++", "c++")
    root = write_include(name, tmp_path)
    main_c = tmp_path / "main.c"
    main_c.write_text(f'#include "{name}_c.h"\n#include "{name}_c.h"\nint main(void) {{ return 0; }}\n')
    for std in ("c89", "c99"):
        out = subprocess.run([cc, f"-std={std}", "-Wall", "-Wextra", "-Werror", "-pedantic", "-fsyntax-only",
                              f"-I{root / 'include'}", "-isystem", str(cuda), str(main_c)], capture_output=True, text=True)
        assert out.returncode == 0, (std, out.stderr[-3000:])
    main_cpp = tmp_path / "main.cpp"
    main_cpp.write_text(f'#include "{name}_testing.h"\n#include "{name}_c.h"\n#include <utility>\n'
                        f"int main() {{ {name}::{class_name(name)} a; {name}::{class_name(name)} b(std::move(a)); "
                        f"a = std::move(b); return 0; }}\n")
    for source in (main_cpp, root / "src" / f"{name}_c.cpp"):
        out = subprocess.run([cxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", f"-I{root / 'include'}",
                              f"-I{cuda}", str(source)], capture_output=True, text=True)
        assert out.returncode == 0, (source.name, out.stderr[-3000:])
