"""The plan: every number the templates need, derived once from a validated spec.

`make_plan` is pure (spec in, frozen dataclasses out) so render stays logic-free and the same spec
always produces the same plan. Values that depend on the problem size M (grids, waves, whether all
blocks are co-resident) are methods taking `m`, because M is chosen at run time, not in the spec.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cusync_gen import dependency, plan_describe, run_modes  # noqa: I001 - dependency imports spec, as this module does
from cusync_gen.errors import SpecError
from cusync_gen.spec.archs import ARCHS, DEFAULT_ARCH, ArchFacts
from cusync_gen.spec.limits import MAX_M
from cusync_gen.spec.model import (
    Mode,
    Arch,
    BLayout,
    ChainSpec,
    Dtype,
    Epilogue,
    Op,
    Optimizations,
    Order,
    Policy,
    Schedule,
    StageSpec,
    config_spec,
    consumers_of,
    edge_policy,
    output_policy,
    resolve_defaults,
    spec_hash,
    stage_index,
)
from cusync_gen.spec.policies import POLICIES, one_post
from cusync_gen.spec.rules import check_rules, policy_problem, retarget, slab_problem, stream_weights_problem

#: Usable shared memory per SM in bytes; also the opt-in per-block limit on these parts.
SMEM_PER_SM: dict[str, int] = {"sm_80": 166912, "sm_86": 101376, "sm_89": 101376, "sm_90": 232448}
#: SM counts of the flagship part of each target (A100, A10/3090-class, L40/4090-class, H100/H200 SXM).
DEFAULT_SMS: dict[str, int] = {"sm_80": 108, "sm_86": 84, "sm_89": 128, "sm_90": 132}
MAX_THREADS_PER_SM = 2048
MAX_BLOCKS_PER_SM = 32
MAX_THREADS_PER_BLOCK = 1024
WARP_SIZE = 32
SWIGLU_THREADS = 512  # the elementwise kernel's block (cusync::SwiGluStage::kThreads, checked there)
ELEMENT_BYTES = 2  # fp16 and bf16
INT_MAX = 2**31 - 1  # the largest C++ int (int32_t): "any M" in the emitted tables


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class TilePlan:
    """Resolved tile shape and its cost; for swiglu warp/instruction/stages are zeros (unused)."""

    m: int
    n: int
    k: int
    warp: tuple[int, int, int]
    instruction: tuple[int, int, int]
    stages: int
    threads: int
    smem_bytes: int
    schedule: Schedule = Schedule.COOPERATIVE  # sm90 GEMMs: the kernel schedule (spec tile.schedule)


@dataclass(frozen=True)
class EdgePlan:
    """How a consumer waits on its producer: which semaphores and how many posts make them ready."""

    producer: int
    policy: Policy
    wait_value: int
    stride_tiles: int
    producer_tile_m: int
    producer_tile_n: int
    row_ok: bool = False   # RowSync lines up: the consumer's tile M divides the producer's
    tile_ok: bool = False  # TileSync lines up too: the consumer's tile K divides the producer's tile N
    operand: str = "a"     # which input of the consumer this edge feeds: "a", or "b" (second producer)
    row_wait_value: int = 0  # the wait value under a run-time RowSync override (set_policy): the producer's tiles per row


@dataclass(frozen=True)
class StagePlan:
    index: int
    name: str
    op: Op
    n: int
    k: int  # for swiglu the input width: 2 * n (one producer) or n (two producers)
    epilogue: Epilogue
    b_layout: BLayout
    order: Order
    tile: TilePlan
    input: EdgePlan | None
    out_policy: Policy | None
    posts_per_semaphore: int
    semaphores_per_row: int
    occupancy: int  # resident blocks per SM (threads, smem)
    input_b: EdgePlan | None = None  # a second producer (a swiglu with `b`): gate from input, up from input_b
    bias: bool = False  # a GEMM adds an [n] bias vector before its epilogue's activation

    @property
    def gated(self) -> bool:
        """A gated GEMM (epilogue swiglu): it computes gate and up, 2 x n columns, and writes n."""
        return self.op is Op.GEMM and self.epilogue is Epilogue.SWIGLU

    @property
    def gemm_n(self) -> int:
        """N of the GEMM the kernel computes: n, or gate and up (2n) for a gated GEMM."""
        return 2 * self.n if self.gated else self.n

    @property
    def weight_bytes(self) -> int:
        """Bytes of a GEMM's weights, k x gemm_n 16-bit elements (a gated GEMM's gate and up)."""
        return self.k * self.gemm_n * ELEMENT_BYTES

    def kernel_tile_n(self, tile: TilePlan) -> int:
        """The kernel's BLK_N for this stage's tile: a gated GEMM's output tile is half of it."""
        return 2 * tile.n if self.gated else tile.n

    def input_edges(self) -> tuple[EdgePlan, ...]:
        """The edges this stage waits on: none, `input`, or `input` and `input_b`."""
        return tuple(e for e in (self.input, self.input_b) if e is not None)

    def grid(self, m: int) -> tuple[int, int]:
        """(tiles_m, tiles_n) for a problem with m rows."""
        return (_ceil_div(m, self.tile.m), _ceil_div(self.n, self.tile.n))

    def num_tiles(self, m: int) -> int:
        tiles_m, tiles_n = self.grid(m)
        return tiles_m * tiles_n

    def num_semaphores(self, m: int) -> int:
        """One semaphore array entry per (tile row, semaphore in that row); 0 when nothing waits."""
        return self.grid(m)[0] * self.semaphores_per_row


@dataclass(frozen=True)
class ConfigPlan:
    """One tile configuration of the chain: the stages as planned for M up to m_max (None: any M)."""

    index: int
    m_max: int | None
    stages: tuple[StagePlan, ...]

    @property
    def m_max_bound(self) -> int:
        """m_max as the C++ kConfigMaxM holds it: the last configuration (any M) has INT_MAX."""
        return self.m_max if self.m_max is not None else INT_MAX


@dataclass(frozen=True)
class DispatchPlan:
    """A measured table of how run() computes the chain by M, valid on GPUs with `sms` multiprocessors."""

    gpu: str
    sms: int
    modes: tuple[tuple[int, Mode], ...]  # (m_max, mode), by growing m_max


@dataclass(frozen=True)
class ChainPlan:
    name: str
    class_name: str
    spec_hash: str
    dtype: Dtype
    arch: Arch
    target: str
    cuda_arch: str  # "90"
    sms: int
    optimizations: Optimizations
    stages: tuple[StagePlan, ...]
    # Run-time tile configurations by M (spec tile_configs), smallest m_max first; the last is `stages`.
    configs: tuple[ConfigPlan, ...] = ()
    auto_policies: tuple[str, ...] = ()  # what `sync: auto` resolved to, one line per edge
    dependencies: tuple[str, ...] = ()   # what each consumer tile reads of its producer, one line per edge
    max_m: int = MAX_M                   # the most rows a run may have (the spec's limit, checked by the library)
    dispatch: DispatchPlan | None = None  # sm90: run()'s mode by M, measured on one GPU (spec `dispatch:`)
    # Why run() mode `stream` cannot compute this chain (spec.rules.stream_weights_problem), or None: it can, and
    # optimizations.stream_weights turns it on.
    stream_problem: str | None = None
    # Why run() mode `stream`'s slab kernel (M <= SLAB_MAX_M) cannot compute this chain (spec.rules.slab_problem),
    # or None: the library has it, whatever the spec's optimizations.
    slab_problem: str | None = None

    @property
    def check_m(self) -> int:
        """The second M of the project's ctest check (the first is 1): one tile row of the first stage and a
        partial second row of 3, so the check covers a tile cut by the edge of M."""
        return self.stages[0].tile.m + 3

    def config_for(self, m: int) -> ConfigPlan:
        """The configuration the library runs at this M."""
        return next(c for c in self.configs if c.m_max is None or m <= c.m_max)

    @property
    def facts(self) -> ArchFacts:
        """What the plan's architecture is (spec.archs.ARCHS): the plan and its describe text ask this."""
        return ARCHS[self.arch]

    @property
    def backend(self) -> str:
        """The row of cusync_gen.backends.BACKENDS that emits this plan's project: the spec's arch."""
        return self.arch.value

    @property
    def has_unsynced_edge(self) -> bool:
        """Some stage reads a producer with sync: none, so run() must order it after the whole producer."""
        return any(e.policy is Policy.NONE for s in self.stages for e in s.input_edges())

    def edges(self) -> list[tuple[StagePlan, StagePlan]]:
        """(producer, consumer) pairs, in consumer order; a two-producer stage appears twice."""
        return [(self.stages[e.producer], s) for s in self.stages for e in s.input_edges()]

    def no_atomic_add_legal(self, m: int | None = None) -> tuple[bool, str]:
        """A release store is enough only where every semaphore receives exactly one post (in the tile
        configuration that runs at M; the policies, and so the verdict, are the same in every one)."""
        for s in (self.stages if m is None else self.config_for(m).stages):
            if not one_post(s.out_policy):
                return False, (
                    f"stage '{s.name}' semaphores get {s.posts_per_semaphore} posts each "
                    f"({s.out_policy.value} policy), which must be atomic"
                )
        return True, "every semaphore gets exactly one post (tile policy), so a release store replaces the atomic add"

    def coresident(self, m: int) -> tuple[bool, str]:
        """Whether, for every edge, all producer and consumer blocks fit on the GPU at once.

        A block of stage s takes 1/occupancy_s of an SM, so an edge fits when
        tiles_p / occ_p + tiles_c / occ_c <= sms (integer form below). Only then can the consumer
        launch without the wait kernel and still never hold every SM while producers are unscheduled.
        """
        edges = self.edges()
        if not edges:
            return True, "no stage waits on another"
        for prod, cons in edges:
            tp, tc = prod.num_tiles(m), cons.num_tiles(m)
            if tp * cons.occupancy + tc * prod.occupancy > self.sms * prod.occupancy * cons.occupancy:
                need = tp / prod.occupancy + tc / cons.occupancy
                return False, (
                    f"{prod.name} ({tp} blocks, {prod.occupancy}/SM) + {cons.name} ({tc} blocks, "
                    f"{cons.occupancy}/SM) need {need:.1f} SMs at once, the GPU has {self.sms}"
                )
        return True, f"producer and consumer blocks of every edge fit on {self.sms} SMs at once"

    def describe(self, m: int) -> str:
        """What `validate` prints at this M (plan_describe.describe)."""
        return plan_describe.describe(self, m)

    def warnings(self, m: int) -> list[str]:
        """What the plan flags at this M: a choice of the spec that does not do what it says (describe
        prints each as a WARNING line)."""
        opt = self.optimizations
        if self.facts.wait_kernel and opt.avoid_wait_kernel and not self.coresident(m)[0]:
            return [f"avoid_wait_kernel is on but not legal at M={m}: without the wait kernel consumer blocks "
                    "could fill the GPU while producer blocks wait for an SM, so run() checks the same condition and "
                    "keeps the wait kernel at this M (the optimization buys nothing here)"]
        return []

    def json_header(self) -> dict[str, Any]:
        """The M-independent part of `validate --json` (plan_describe.json_header)."""
        return plan_describe.json_header(self)

    def json_at(self, m: int) -> dict[str, Any]:
        """What describe(m) says, as JSON values (plan_describe.json_at)."""
        return plan_describe.json_at(self, m)

    def run_mode(self, m: int, sms: int | None = None) -> tuple[Mode, str]:
        """How the sm90 library's run() computes the chain at M on a GPU with `sms` SMs (default: the
        plan's), and why: the rule of cusync::Chain::mode() (run_modes.run_mode) on this plan's table and GEMMs."""
        gemms = [(s.name, s.gemm_n) for s in self.stages if s.op is Op.GEMM]
        return run_modes.run_mode(self.dispatch, gemms, m, sms or self.sms, slab_col=self.slab_col,
                                  slab_w2_col=self.slab_w2_col)

    @property
    def slab_col(self) -> bool:
        """Whether mode stream's slab kernel computes this chain over column-major first weights (its fast case,
        which run()'s default rule picks at M <= SLAB_DEFAULT_MAX_M)."""
        return self.slab_problem is None and self.stages[0].b_layout is BLayout.COL

    @property
    def slab_w2_col(self) -> bool:
        """Whether its second GEMM's weights are column-major too (no partials: run()'s default rule picks it at
        M <= SLAB_GATHER_DEFAULT_MAX_M where slab_col holds)."""
        return self.slab_problem is None and self.stages[-1].b_layout is BLayout.COL


def make_plan(spec: ChainSpec, target: str | None = None) -> ChainPlan:
    """Derive the plan; `target` (from --target) overrides spec.target. Raises SpecError on violations."""
    spec = retarget(spec, target)
    spec = resolve_defaults(spec)
    check_rules(spec)
    edges = dependency.describe_edges(spec)  # also checks declared dependencies against the ops
    spec, auto = resolve_auto_policies(spec)
    check_rules(spec)
    stages = _stage_plans(spec)
    configs = [
        ConfigPlan(c, config.m_max, _stage_plans(config_spec(spec, config)))
        for c, config in enumerate(spec.tile_configs)
    ]
    configs.append(ConfigPlan(len(configs), None, stages))
    return ChainPlan(
        **plan_head(spec),
        sms=spec.sms if spec.sms is not None else DEFAULT_SMS[spec.target],
        optimizations=spec.optimizations,
        stages=stages,
        configs=tuple(configs),
        auto_policies=tuple(auto),
        dependencies=tuple(edges),
        dispatch=None if spec.dispatch is None else DispatchPlan(
            spec.dispatch.gpu, spec.dispatch.sms, tuple((e.m_max, e.mode) for e in spec.dispatch.modes)),
        stream_problem=None if (problem := stream_weights_problem(spec)) is None else str(problem),
        slab_problem=None if (problem := slab_problem(spec)) is None else str(problem),
    )


def resolve_auto_policies(spec: ChainSpec) -> tuple[ChainSpec, list[str]]:
    """Replace every `sync: auto` (and `sync_b: auto`) by the first of the policies that can guard the
    edge's dependency (dependency.candidates) whose tiles line up with the producer's in every tile
    configuration; a producer already consumed with some policy keeps it.
    Returns the resolved spec and one line per choice for `validate`."""
    stages = list(spec.stages)
    chosen: dict[int, Policy] = {}  # producer -> its output policy, as fixed so far
    notes: list[str] = []
    index = stage_index(spec)
    for i, stage in enumerate(stages):
        for key in ("sync", "sync_b"):
            source = stage.a if key == "sync" else stage.b
            policy = getattr(stage, key)
            if source is None or source == "input":
                continue
            p = index[source]
            if policy is not Policy.AUTO:
                if policy is not None:
                    chosen.setdefault(p, policy)
                continue
            candidates = dependency.candidates(dependency.dependency_of(spec, i), spec.optimizations.no_atomic_add)
            inherited = p in chosen
            if inherited:
                candidates = (chosen[p],)
            problems = []
            where: set[int | None] = set()  # None: the spec's own tiles; c: tile_configs[c]
            for candidate in candidates:
                trial = spec.model_copy(update={"stages": [*stages[:i], stage.model_copy(update={key: candidate}),
                                                           *stages[i + 1:]]})
                configs = [(None, trial)] + [(c, config_spec(trial, t)) for c, t in enumerate(spec.tile_configs)]
                found = next(((c, e) for c, t in configs if (e := policy_problem(t, i, p, candidate, key))), None)
                problem = found[1] if found else None
                if found is not None:
                    where.add(found[0])
                if problem is None:
                    stage = stage.model_copy(update={key: candidate})
                    stages[i] = stage
                    chosen[p] = candidate
                    notes.append(f"{stage.name}.{key}: auto -> {candidate.value}"
                                 + (f" (as {source}'s other consumers)" if inherited else ""))
                    break
                text = problem.message if found[0] is None else \
                    f"in tile_configs[{found[0]}], {problem.message[len(problem.field) + 2:]}"
                problems.append(f"{candidate.value}: {text}")
            else:
                if None in where or not where:
                    raise SpecError(f"stages[{i}].{key}", "sync: auto found no policy whose tiles line up with "
                                    f"'{source}': " + "; ".join(problems),
                                    "change the tiles (validate says what each policy needs) or set the policy by hand")
                # the stage's own tiles line up; a tile configuration's do not: name the configuration
                c = min(w for w in where if w is not None)
                raise SpecError(f"tile_configs[{c}].tiles.{stage.name}",
                                f"stage {stage.name}'s {key}: auto found no policy whose tiles line up with '{source}' in "
                                f"this configuration (they do in the stage's own tiles): " + "; ".join(problems),
                                f"change tile_configs[{c}]'s tiles of {stage.name} or {source} (validate says what each "
                                f"policy needs) or set stages[{i}].{key} by hand")
    return spec.model_copy(update={"stages": stages}), notes


def _stage_plans(spec: ChainSpec) -> tuple[StagePlan, ...]:
    """Every stage of one tile configuration of the spec."""
    tiles = [tile_plan(i, s, spec.target, spec.arch) for i, s in enumerate(spec.stages)]
    edges = [_edge_plan(spec, i, tiles) for i in range(len(spec.stages))]
    edges_b = [_edge_plan(spec, i, tiles, "b") for i in range(len(spec.stages))]
    stages = []
    for i, s in enumerate(spec.stages):
        out_policy = output_policy(spec, i)
        users = consumers_of(spec, i)
        out_edge = None
        if users:
            u = users[0]
            out_edge = edges_b[u] if edges_b[u] is not None and edges_b[u].producer == i else edges[u]
        stages.append(
            StagePlan(
                index=i,
                name=s.name,
                op=s.op,
                n=s.n,
                k=s.k if s.op is Op.GEMM and s.k is not None else (s.n if s.b is not None else 2 * s.n),
                epilogue=s.epilogue,
                b_layout=s.b_layout,
                order=s.order,
                tile=tiles[i],
                input=edges[i],
                input_b=edges_b[i],
                out_policy=out_policy,
                posts_per_semaphore=out_edge.wait_value if out_edge is not None else 0,
                semaphores_per_row=_semaphores_per_row(s, tiles[i], out_policy, out_edge),
                occupancy=occupancy(tiles[i], spec.target),
                bias=s.bias,
            )
        )
    return tuple(stages)


# ---------------------------------------------------------------------------------------------------
# Derivations


def plan_head(spec: Any) -> dict[str, Any]:  # noqa: ANN401 (any parsed spec: chain, attention, conv)
    """The fields every kind of plan starts with: the chain's names, its spec hash, dtype and target."""
    return {
        "name": spec.name,
        "class_name": "".join(part[:1].upper() + part[1:] for part in spec.name.split("_") if part),
        "spec_hash": spec_hash(spec),
        "dtype": spec.dtype,
        "arch": spec.arch,
        "target": spec.target,
        "cuda_arch": ARCHS[spec.arch].cuda_arch(spec.target),
    }


def tile_plan(i: int, stage: StageSpec, target: str, arch: Arch = DEFAULT_ARCH, base: str | None = None) -> TilePlan:
    """A stage's tile with its thread count and shared memory; errors name `base` (default stages[i].tile)."""
    base = base or f"stages[{i}].tile"
    tb = stage.tile.threadblock
    if stage.op is Op.SWIGLU:
        return TilePlan(tb[0], tb[1], 1, (0, 0, 0), (0, 0, 0), 0, SWIGLU_THREADS, 0)
    facts = ARCHS[arch]
    if facts.warp_specialized:
        # One load warp group and two math warp groups; CUTLASS sizes the pipeline to fill shared memory
        # (stages 0 = "auto"), so one CTA takes a whole SM. A gated GEMM's tile (epilogue swiglu) is planned
        # as the output tile it writes: half the kernel's BLK_N (StagePlan.kernel_tile_n), so that grids,
        # semaphores and waits all count output tiles.
        n = tb[1] // 2 if stage.op is Op.GEMM and stage.epilogue is Epilogue.SWIGLU else tb[1]
        return TilePlan(tb[0], n, tb[2], (0, 0, 0), (0, 0, 0), 0, facts.gemm_threads, SMEM_PER_SM[target],
                        Schedule(stage.tile.schedule or Schedule.COOPERATIVE))
    warp, inst, pipe = stage.tile.warp, stage.tile.instruction, stage.tile.stages
    if warp is None or inst is None or pipe is None:  # resolve_defaults ran; keeps the type checker honest
        raise SpecError(base, "tile defaults were not resolved", "report this as a cusync-gen bug")
    warps = (tb[0] // warp[0]) * (tb[1] // warp[1]) * (tb[2] // warp[2])
    threads = WARP_SIZE * warps
    if threads > MAX_THREADS_PER_BLOCK:
        raise SpecError(
            f"{base}.warp",
            f"threadblock {list(tb)} / warp {list(warp)} gives {warps} warps = {threads} threads per block, "
            f"above the CUDA limit of {MAX_THREADS_PER_BLOCK}",
            "use larger warp tiles, e.g. half the threadblock in M and N",
        )
    per_stage = (tb[0] * tb[2] + tb[2] * tb[1]) * ELEMENT_BYTES
    smem = pipe * per_stage
    limit = SMEM_PER_SM[target]
    if smem > limit:
        fit = limit // per_stage
        hint = f"use stages: {fit} or fewer" if fit >= 3 else "use a smaller threadblock (3 stages of it do not fit)"
        raise SpecError(
            f"{base}.stages",
            f"{pipe} stages of threadblock {list(tb)} need {smem} bytes of shared memory per block, "
            f"above the {limit}-byte limit of {target}",
            hint,
        )
    return TilePlan(tb[0], tb[1], tb[2], warp, inst, pipe, threads, smem)


def _edge_plan(spec: ChainSpec, i: int, tiles: list[TilePlan], operand: str = "a") -> EdgePlan | None:
    stage = spec.stages[i]
    source = stage.a if operand == "a" else stage.b
    if source is None or source == "input":
        return None
    p = stage_index(spec)[source]
    ptile = tiles[p]
    policy = edge_policy(stage, source)
    wait_value = POLICIES[policy].wait_value(spec.stages[p].n, ptile.n)
    stride = POLICIES[policy].stride_tiles(stage.n, ptile.n)
    tile = tiles[i]
    # Which policies a GEMM consumer may switch to at run time (set_policy): both need the consumer's
    # rows inside one producer tile row; TileSync also needs each K-block inside one producer tile.
    gemm = stage.op is Op.GEMM
    row_ok = gemm and ptile.m % tile.m == 0
    tile_ok = row_ok and ptile.n % tile.k == 0
    return EdgePlan(p, policy, wait_value, stride, ptile.m, ptile.n, row_ok, tile_ok, operand,
                    _ceil_div(spec.stages[p].n, ptile.n))


def _semaphores_per_row(stage: StageSpec, tile: TilePlan, policy: Policy | None, edge: EdgePlan | None) -> int:
    if policy is None or edge is None:
        return 0
    return POLICIES[policy].semaphores_per_row(stage.n, tile.n, edge.stride_tiles)


def occupancy(tile: TilePlan, target: str) -> int:
    """Resident blocks per SM from threads and shared memory (registers are not modelled)."""
    limits = [MAX_THREADS_PER_SM // tile.threads, MAX_BLOCKS_PER_SM]
    if tile.smem_bytes > 0:
        limits.append(SMEM_PER_SM[target] // tile.smem_bytes)
    return max(1, min(limits))
