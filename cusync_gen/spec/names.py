"""Which names a spec may give its chain (`name:`) and its stages (`stages[i].name:`), in one place.

A name goes into C++ and CUDA (namespace NAME, class CamelName, launch_STAGE, STAGE_weight), the C ABI
header (NAME_create, NAME_UPPER_SUCCESS), CMake (targets NAME, NAME_bench, NAME_torch), file names
(include/NAME.h, src/stage_STAGE.cu) and, with --torch, Python (def NAME, class CamelName). Each list
below says where it comes from; `name_problem` and `stage_pair_problem` return the first language or
tool that would reject a name, and a fix, or None. tests/test_names.py compiles, configures and imports
the names this module accepts with the real g++, cmake and Python.
"""

from __future__ import annotations

import re

from cusync_gen.spec.limits import MAX_NAME_LENGTH
from cusync_gen.spec.system_names import GLOBALS, HEADERS

# ---------------------------------------------------------------------------------------------------
# The languages' own lists

#: ISO C++20 [lex.key] table 5 (keywords) and [lex.digraph] table 6 (alternative tokens: `xor` is `^`).
CPP_KEYWORDS = frozenset("""
alignas alignof asm auto bool break case catch char char8_t char16_t char32_t class concept const consteval
constexpr constinit const_cast continue co_await co_return co_yield decltype default delete do double
dynamic_cast else enum explicit export extern false float for friend goto if inline int long mutable namespace
new noexcept nullptr operator private protected public register reinterpret_cast requires return short signed
sizeof static static_assert static_cast struct switch template this thread_local throw true try typedef typeid
typename union unsigned using virtual void volatile wchar_t while
and and_eq bitand bitor compl not not_eq or or_eq xor xor_eq
""".split())
#: C++20 identifiers with a special meaning ([lex.name] table 4), and C keywords that C++ lacks (C99's
#: restrict, C23's typeof): the C ABI header include/NAME_c.h is C.
CPP_SPECIAL = frozenset("final override import module restrict typeof typeof_unqual".split())
#: CUDA C++ Programming Guide, "Built-in Variables" (every __keyword__ is caught by the double underscore rule).
CUDA_BUILTINS = frozenset("gridDim blockIdx blockDim threadIdx warpSize".split())
#: Macros GCC predefines in the gnu++ modes that CMake selects by default (CMAKE_CXX_EXTENSIONS=ON), on
#: every target (linux, unix) or on 32-bit x86 (i386); `namespace linux` is `namespace 1` there.
GCC_MACROS = frozenset("linux unix i386".split())
#: Namespaces the generated code opens or names: the runtime, CUTLASS/CuTe, the bench, the CUDA, CUB and
#: Thrust libraries, and PyTorch's (the --torch op); a chain's namespace must not merge with them.
NAMESPACES = frozenset("std nv cuda cub thrust nvcuda cooperative_groups cutlass cute cusync bench "
                       "at c10 torch caffe2 pybind11".split())
#: What the generated header declares beside the class inside namespace NAME (templates/*/include/*.h.j2):
#: the class, CamelName, must not be one of them.
CPP_CHAIN_MEMBERS = frozenset("Element Arguments testing detail".split())

#: Python 3.10 to 3.13: keyword.kwlist and keyword.softkwlist (fixed here, not read from the running
#: Python, so that validation does not depend on its version).
PYTHON_KEYWORDS = frozenset("""
False None True and as assert async await break class continue def del elif else except finally for from
global if import in is lambda nonlocal not or pass raise return try while with yield match case type _
""".split())
#: Every name templates/torch/module.py.j2 uses unqualified (imports, globals, builtins, parameters and
#: locals; tests/test_names.py parses a rendered module to keep this complete). The module defines
#: `def NAME` and `class CamelName`, which must not shadow any of them; `name` is also an attribute of
#: torch.ops.cusync (torch/_ops.py, _OpNamespace.name), which an op of that name would be hidden by.
PYTHON_MODULE_NAMES = frozenset("""
annotations os Path torch nn NAME DTYPE INPUT_WIDTH OUTPUT_WIDTH MLP ACTIVATION MODES WEIGHTS ROLE_NAMES LIBRARY
LIBRARY_ENV library_path loaded load sync_error weight_from_layers Module
getattr isinstance type tuple bool next iter str list int len super classmethod object
FileNotFoundError ValueError TypeError AttributeError RuntimeError
x y mode env library path device index module mlp expected attr found role name layer layers weight weights
bias arg args k n w layout names cls first roles self max_m
""".split())

#: CMake's reserved target names (policy CMP0037, cmGlobalGenerator::IsReservedTarget, and the
#: generators' own: Makefiles' depend/preinstall/list_install_components, Ninja's, Visual Studio's
#: and Xcode's ALL_BUILD/ZERO_CHECK/RUN_TESTS/INSTALL/PACKAGE), compared case-insensitively: those IDEs
#: write one project file per target, and their file systems fold case.
CMAKE_RESERVED_TARGETS = frozenset(n.casefold() for n in """
all ALL_BUILD help install INSTALL preinstall clean depend edit_cache rebuild_cache ZERO_CHECK test RUN_TESTS
package PACKAGE package_source list_install_components NATIVE_BUILD
""".split())
#: Targets that torch's CMake package imports (TorchConfig.cmake, Caffe2Targets.cmake): under --torch,
#: torch/CMakeLists.txt adds the chain's library target NAME beside them.
TORCH_TARGETS = frozenset("torch torch_library torch_cpu torch_cuda torch_cpu_library torch_cuda_library "
                          "torch_global_deps c10 c10_cuda kineto".split())
#: Windows device names: no file may be called CON.h (or con.anything), whatever the case.
WINDOWS_DEVICES = frozenset(["con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10))])

# ---------------------------------------------------------------------------------------------------
# What the generator makes of a name (the templates' affixes)

#: Global C and C++ names after the chain name's `NAME_` (templates/*/include/*_c.h.j2, torch/op.cpp.j2).
C_ABI_SUFFIXES = ("arguments", "chain", "layout", "create", "destroy", "initialize", "initialize_layout",
                  "initialize_workspace", "workspace_size", "update", "update_layout", "run", "run_sequential",
                  "last_error", "status_string", "check_sync_error", "set_mode", "mode", "refresh_weights",
                  "autotune", "torch")
#: The C ABI's macros after the upper case chain name's `NAME_`.
C_MACRO_SUFFIXES = ("SUCCESS", "INVALID_ARGUMENT", "CUDA_ERROR", "CUTLASS_ERROR", "SYNC_TIMEOUT", "NOT_INITIALIZED",
                    "LIBRARY_ERROR", "INTERNAL_ERROR", "MODE_AUTO", "MODE_OVERLAP", "MODE_STOCK", "MODE_STREAMK",
                    "MODE_CLUSTER", "MODE_PINGPONG", "MODE_CUBLASLT", "C_H_")
#: The project's headers named after the chain (include/, src/), found by #include "NAME.h" and <NAME.h>.
HEADER_SUFFIXES = ("", "_c", "_testing", "_stages")
#: The CMake targets named after the chain (project/CMakeLists.txt.j2, torch/CMakeLists.txt.j2).
TARGET_SUFFIXES = ("", "_bench", "_torch")
#: An sm90 stage S also has launch_S_stock, ... and src/stage_S_stock.cu (templates/sm90/src/stages_extra.h.j2).
STAGE_SUFFIXES = ("_stock", "_cluster", "_pingpong", "_cublaslt", "_streamk")

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # ASCII only, matched with fullmatch
_SNAKE = re.compile(r"[a-z][a-z0-9_]*")


def class_name(name: str) -> str:
    """The chain's C++ and Python class: gpt3_mlp -> Gpt3Mlp (as plan.make_plan spells it)."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part)


def _language_problem(name: str) -> str | None:
    """Why C++, CUDA, C or Python reject `name` anywhere an identifier goes, or None."""
    if "__" in name or name.startswith("_") or name.endswith("_"):
        return ("C++ reserves identifiers with a double underscore or a leading underscore, and the generated code "
                "joins names with '_' (launch_NAME, NAME_weight)")
    if name in CPP_KEYWORDS:
        return "a C++ keyword" + (" (an alternative token)" if name in ("and", "and_eq", "bitand", "bitor", "compl",
                                                                       "not", "not_eq", "or", "or_eq", "xor", "xor_eq")
                                  else "")
    if name in CPP_SPECIAL:
        return "an identifier with a special meaning in C++20, or a C keyword (the C ABI header is C)"
    if name in CUDA_BUILTINS:
        return "a CUDA built-in variable"
    if name in GCC_MACROS:
        return "a macro GCC predefines in the gnu++ modes CMake uses (it expands to 1)"
    if name in PYTHON_KEYWORDS:
        return "a Python keyword (the --torch module)"
    return None


def name_problem(name: str, field: str = "name", stage: bool = False) -> tuple[str, str] | None:
    """(why, hint) if the chain name (or, with `stage`, a stage name) cannot go everywhere it goes."""
    shape = _IDENT if stage else _SNAKE
    what = "C identifier" if stage else "lower snake case C identifier"
    if not name.isascii() or not shape.fullmatch(name):
        hint = ("use letters, digits and underscores, not starting with a digit (e.g. gemm1)" if stage
                else "use lower case letters, digits and underscores, starting with a letter (e.g. gpt3_mlp)")
        return f"is not {'an ASCII' if not name.isascii() else 'a'} {what}", hint
    if len(name) > MAX_NAME_LENGTH:
        return (f"is {len(name)} characters long, above the limit of {MAX_NAME_LENGTH}",
                f"use a name of at most {MAX_NAME_LENGTH} characters")
    why = _language_problem(name) or (_stage_problem(name) if stage else _chain_problem(name))
    if why is None:
        return None
    return f"is {why}", f"rename it, e.g. {_suggest(name, stage)!r}"


def _stage_problem(name: str) -> str | None:
    if name == "input":
        return "reserved for the external input tensor"
    return None


def _chain_problem(name: str) -> str | None:
    """The chain name is a global C++ namespace, a CMake target, a file name and a Python function."""
    camel = class_name(name)
    if name in NAMESPACES:
        return f"a C++ namespace the generated code already uses ({name}::)"
    for suffix in C_ABI_SUFFIXES:
        glob = f"{name}_{suffix}"
        if glob in GLOBALS:
            return f"the start of {glob}, a C ABI name of the project that the system or CUDA headers already declare"
    if name in GLOBALS:
        return "a global name of the C, C++ or CUDA headers the project includes (namespace NAME would clash with it)"
    for suffix in C_MACRO_SUFFIXES:
        macro = f"{name.upper()}_{suffix}"
        if macro in GLOBALS:
            return f"the start of the C ABI macro {macro}, a name the CUDA or system headers already declare"
    if camel in CPP_CHAIN_MEMBERS:
        return f"spelled {camel} as the class, a name the generated header already declares beside it"
    for suffix in HEADER_SUFFIXES:
        if f"{name}{suffix}" in HEADERS:
            return (f"the name of the system or CUDA header <{name}{suffix}.h>, which the generated "
                    f"include/{name}{suffix}.h would shadow")
    if name in WINDOWS_DEVICES:
        return f"a Windows device name: no file may be called {name}.h there"
    for suffix in TARGET_SUFFIXES:
        target = f"{name}{suffix}"
        if target.casefold() in CMAKE_RESERVED_TARGETS:
            return f"a target name CMake reserves ({target}, compared case-insensitively)"
    if name in TORCH_TARGETS:
        return "a target name torch's CMake package imports (the --torch build adds the chain's target beside it)"
    if name in PYTHON_MODULE_NAMES or camel in PYTHON_MODULE_NAMES:
        shown = name if name in PYTHON_MODULE_NAMES else f"{camel} (the class)"
        return f"a name the generated Python module uses ({shown}; the --torch module defines def {name} and class {camel})"
    return None


def stage_pair_problem(name: str, other: str, other_index: int) -> tuple[str, str] | None:
    """(why, hint) if stage `name` clashes with an earlier stage `other`: file names that differ only in
    case, or one stage name that is the other's plus an sm90 file suffix (launch_S_stock, stage_S_stock.cu)."""
    if name.casefold() == other.casefold():
        return (f"differs from stages[{other_index}].name '{other}' only in case (their files, src/stage_NAME.cu, "
                "would be one on case-insensitive file systems)", "rename it: stage names must differ ignoring case")
    for longer, shorter in ((name, other), (other, name)):
        for suffix in STAGE_SUFFIXES:
            if longer == shorter + suffix:
                return (f"'{shorter}' plus {suffix}, the suffix of a name the generator derives from stage "
                        f"'{shorter}' (launch_{shorter}{suffix}, src/stage_{shorter}{suffix}.cu)",
                        f"rename stages '{longer}' or '{shorter}' (e.g. drop {suffix})")
    return None


def _suggest(name: str, stage: bool) -> str:
    """A close name that passes every rule (the hint's example)."""
    base = re.sub("_+", "_", name).strip("_") or "chain"
    if not stage:
        base = base.lower() if base[0].isalpha() else f"c{base}".lower()
    for candidate in (f"{base}_stage" if stage else f"{base}_mlp", f"my_{base}", f"{base}_chain", f"{base}1"):
        if len(candidate) <= MAX_NAME_LENGTH and name_problem(candidate, stage=stage) is None:
            return candidate
    return "gemm1" if stage else "my_chain"
