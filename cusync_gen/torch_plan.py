"""The PyTorch extension of a GEMM chain (`cusync-gen generate --torch`), planned: what its op takes and
returns, the run modes it accepts, and how the weights of a Hugging Face-style MLP map onto its GEMMs.

Pure functions of the chain's plan (the templates under templates/torch/ only spell what this holds);
docs/torch.md describes the generated op and module.
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass

from cusync_gen.backends import backend_of
from cusync_gen.errors import UsageError
from cusync_gen.plan import ChainPlan
from cusync_gen.spec.model import BLayout, Dtype, Epilogue, Mode, Op

#: The TORCH_LIBRARY namespace of every generated op: torch.ops.cusync.<chain name>.
NAMESPACE = "cusync"
#: The run modes every op accepts besides the backend's own (auto: what run() picks; sequential: the
#: same kernels back to back with synchronization off).
COMMON_MODES = ("auto", "overlap", "sequential")
#: The smallest chain the op initializes: M is rounded up to a power of two, at least this
#: (each chain holds semaphores for its max_m; see templates/torch/op.cpp.j2).
MIN_CACHED_M = 128

#: Names the generated Python module defines or imports at its top level: the op's function is named after
#: the chain and its class after the chain's CamelCase name, so neither may be one of these.
PYTHON_NAMES = frozenset({"annotations", "os", "torch", "nn", "path", "load", "loaded", "library_path", "sync_error",
                          "weight_from_layers"})

TORCH_DTYPE: dict[Dtype, str] = {Dtype.FP16: "torch.float16", Dtype.BF16: "torch.bfloat16"}  # Python spelling

#: Hugging Face attribute names of each weight role, tried in order (GPT-2 c_fc/c_proj are Conv1D
#: layers, weight [in, out]; the others nn.Linear, weight [out, in]).
ROLE_NAMES: dict[str, tuple[str, ...]] = {
    "fc1": ("c_fc", "fc1", "fc_in"),
    "fc2": ("c_proj", "fc2", "fc_out"),
    "gate": ("gate_proj",),
    "up": ("up_proj",),
    "down": ("down_proj",),
}


@dataclass(frozen=True)
class TorchWeight:
    """One GEMM's weight argument of the op."""

    stage: str
    arg: str                     # the op's argument and Arguments field: <stage>_weight
    k: int
    n: int
    layout: BLayout
    roles: tuple[str, ...]       # the HF layers (ROLE_NAMES keys) concatenated along n; () if none fits
    bias: str | None = None      # the op's bias argument and Arguments field (<stage>_bias, [n]) if the stage has one

    @property
    def shape(self) -> tuple[int, int]:
        """What the op takes: [k, n] for b_layout row, [n, k] (nn.Linear.weight) for col."""
        return (self.k, self.n) if self.layout is BLayout.ROW else (self.n, self.k)

    @property
    def layout_note(self) -> str:
        return "row layout: [k, n]" if self.layout is BLayout.ROW else "col layout: [n, k], as nn.Linear.weight"


@dataclass(frozen=True)
class TorchOutput:
    """One stage's output buffer: an intermediate the op allocates, or the tensor it returns."""

    stage: str
    field: str                   # the Arguments field: <stage>_out
    n: int


@dataclass(frozen=True)
class TorchPlan:
    chain: ChainPlan
    namespace: str
    op: str                      # torch.ops.<namespace>.<op>
    library: str                 # the CMake target and lib<library>.so
    input_width: int
    weights: tuple[TorchWeight, ...]
    outputs: tuple[TorchOutput, ...]   # every stage's, in stage order; the last is returned
    mlp: str | None              # "mlp" (fc1 -> act -> fc2), "gated" ([gate | up] -> swiglu -> down),
                                 # "gated_split" (gate, up -> swiglu -> down), or None
    activation: str              # the first GEMM's epilogue ("gelu": exact erf GELU)
    modes: tuple[str, ...]       # what the op's `mode` argument accepts
    backend_modes: tuple[tuple[str, Mode], ...]   # sm90: the modes run_mode() takes, by name
    min_cached_m: int
    role_names: tuple[tuple[str, tuple[str, ...]], ...]   # ROLE_NAMES, for the Python module
    torch_dtype: str             # the Python spelling (the C++ one: the aten_dtype filter of cpp.py)
    sources: tuple[str, ...]     # the chain library's units (project paths) that torch/setup.py compiles as they are
    gdc_units: tuple[tuple[str, str], ...]   # (torch/gdc/<unit>, src/<unit>): the units CMake compiles with
                                             # CUTLASS_ENABLE_GDC_FOR_SM90=1, wrapped by setup.py in a unit that defines it
    gencode: str                 # nvcc's -gencode of the spec's target (setup.py; $CUSYNC_CUDA_ARCH overrides)
    cublaslt: bool               # the library has run() mode cublaslt: setup.py links cuBLASLt
    arch_fixed: bool             # sm90: the kernels need exactly plan.cuda_arch (90a); setup.py refuses another

    @property
    def has_bias(self) -> bool:
        return any(w.bias for w in self.weights)

    @property
    def tensor_args(self) -> tuple[str, ...]:
        """The op's tensor arguments after x, in order: each GEMM's weight, then its bias if it has one."""
        return tuple(a for w in self.weights for a in (w.arg, w.bias) if a is not None)

    @property
    def returned(self) -> TorchOutput:
        return self.outputs[-1]

    @property
    def signature(self) -> str:
        """The op's TORCH_LIBRARY schema."""
        weights = "".join(f", Tensor {a}" for a in self.tensor_args)
        return f'{self.op}(Tensor x{weights}, str mode="auto") -> Tensor'


def torch_problem(plan: object) -> UsageError | None:
    """Why `generate --torch` cannot emit an op for this plan, or None."""
    if getattr(plan, "backend", None) == "conv":
        return UsageError(
            f"--torch: `{plan.name}` is a conv chain (its stages are op: conv); the PyTorch op is generated for GEMM "
            "chains only", hint="generate it without --torch and call its C++ class (include/<name>.h)")
    if not isinstance(plan, ChainPlan):
        name = getattr(plan, "name", "this spec")
        return UsageError(
            f"--torch: `{name}` is an attention chain (its spec has an `attention:` block); the PyTorch op is "
            "generated for GEMM chains (a spec with `stages:`) only",
            hint="generate it without --torch and call its C++ class or C ABI (include/<name>.h, <name>_c.h), "
                 "or pass a GEMM chain spec such as gpt3_mlp_sm90 or llama_mlp_sm90")
    if keyword.iskeyword(plan.name) or keyword.issoftkeyword(plan.name) or plan.name in PYTHON_NAMES:
        return UsageError(
            f"--torch: the chain's name `{plan.name}` (spec field `name`) is a Python keyword or a name the "
            f"generated module {plan.name}_torch.py already uses, so its function {plan.name}() cannot be defined",
            hint=f"rename the chain (e.g. name: {plan.name}_mlp) and generate again")
    return None


def _mlp_kind(plan: ChainPlan) -> tuple[str | None, dict[str, tuple[str, ...]]]:
    """The Hugging Face MLP this chain computes, and each GEMM stage's weight roles."""
    s = plan.stages
    ops = [st.op for st in s]
    producers = [st.input.producer if st.input else None for st in s]
    gemm_tail = s[-1].op is Op.GEMM and s[-1].epilogue is Epilogue.IDENTITY
    if ops == [Op.GEMM, Op.GEMM] and producers == [None, 0] and gemm_tail and s[0].gated:
        return "gated", {s[0].name: ("gate", "up"), s[1].name: ("down",)}  # silu(gate) * up fused into gemm1
    if ops == [Op.GEMM, Op.GEMM] and producers == [None, 0] and gemm_tail:
        return "mlp", {s[0].name: ("fc1",), s[1].name: ("fc2",)}
    if (ops == [Op.GEMM, Op.SWIGLU, Op.GEMM] and producers == [None, 0, 1] and gemm_tail
            and s[0].epilogue is Epilogue.IDENTITY and s[1].input_b is None and s[0].n == 2 * s[1].n):
        return "gated", {s[0].name: ("gate", "up"), s[2].name: ("down",)}
    if (ops == [Op.GEMM, Op.GEMM, Op.SWIGLU, Op.GEMM] and producers == [None, None, 0, 2] and gemm_tail
            and s[2].input_b is not None and s[2].input_b.producer == 1
            and s[0].epilogue is Epilogue.IDENTITY and s[1].epilogue is Epilogue.IDENTITY):
        return "gated_split", {s[0].name: ("gate",), s[1].name: ("up",), s[3].name: ("down",)}
    return None, {}


def make_torch_plan(plan: ChainPlan) -> TorchPlan:
    """The op of a GEMM chain; a UsageError (field, fix) for anything else."""
    problem = torch_problem(plan)
    if problem is not None:
        raise problem
    kind, roles = _mlp_kind(plan)
    weights = tuple(
        TorchWeight(st.name, f"{st.name}_weight", st.k, st.gemm_n, st.b_layout, roles.get(st.name, ()),
                    f"{st.name}_bias" if st.bias else None)
        for st in plan.stages if st.op is Op.GEMM
    )
    units = [f.path for f in backend_of(plan).files(plan) if f.path.startswith("src/") and f.path.endswith((".cu", ".cpp"))]
    roles = backend_of(plan).TORCH
    gdc = tuple(u for u in units if roles.gdc_suffix is not None and u.endswith(roles.gdc_suffix))
    arch = plan.cuda_arch
    outputs = tuple(TorchOutput(st.name, f"{st.name}_out", st.n) for st in plan.stages)
    backend = tuple((m.value, m) for m in roles.modes)
    return TorchPlan(
        chain=plan,
        namespace=NAMESPACE,
        op=plan.name,
        library=f"{plan.name}_torch",
        input_width=plan.stages[0].k,
        weights=weights,
        outputs=outputs,
        mlp=kind,
        activation=plan.stages[0].epilogue.value,
        modes=COMMON_MODES + tuple(name for name, _ in backend),
        backend_modes=backend,
        min_cached_m=MIN_CACHED_M,
        role_names=tuple(ROLE_NAMES.items()),
        torch_dtype=TORCH_DTYPE[plan.dtype],
        sources=tuple(u for u in units if u not in gdc),
        gdc_units=tuple((f"torch/gdc/{u.rsplit('/', 1)[-1]}", u) for u in gdc),
        gencode=f"-gencode=arch=compute_{arch},code=sm_{arch}",
        cublaslt=roles.cublaslt,
        arch_fixed=roles.arch_fixed,
    )


#: The extension's files: (path in the project, template under templates/). Rendered with `plan` (the
#: chain), `torch` (the TorchPlan) and `path` (the file's own) by render.render_project when generate is
#: given torch=True.
def torch_files(tplan: TorchPlan) -> list[tuple[str, str]]:
    name = tplan.chain.name
    return [
        ("torch/CMakeLists.txt", "torch/CMakeLists.txt.j2"),
        ("torch/README.md", "torch/README.md.j2"),
        (f"torch/{name}_op.cpp", "torch/op.cpp.j2"),
        (f"torch/{name}_torch.py", "torch/module.py.j2"),
        ("torch/setup.py", "torch/setup.py.j2"),
        *((unit, "torch/gdc_unit.cu.j2") for unit, _source in tplan.gdc_units),
    ]
