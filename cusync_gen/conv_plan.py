"""A conv chain's plan: every number its templates need, derived once from a ConvChainSpec (docs/conv.md).

Each stage is an implicit-GEMM convolution: GEMM M = n*p*q output pixels (flattened NHWC rows, n major, then
p, then q), N = k output channels, K = r*s*c. A tile is `tile.m` consecutive output pixels by `tile.n`
channels, so its pixels need not be whole image rows: the dependency is computed per pixel range. A tile
of pixels [m0, m1) spans output rows p0 (of image n0) .. p1 (of image n1); the R x S windows of those rows
read producer rows first_row(p0) .. last_row(p1) (the halo: r - 1 dilated rows, less the padding, clamped
at the image border), all their columns and all channels. Those producer pixels are one contiguous range,
so the tile waits for the producer's tile rows that hold it (RowSync semaphores: one per tile row of
pixels, posted by each of its channel tiles). `sync: auto` picks exactly this; the runtime computes the same
range (templates/conv/include/cusync/conv/window.cuh, ConvWindow), and cusync_gen/verify_conv.py proves it
covers every pixel each window reads.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from cusync_gen.errors import UsageError
from cusync_gen.plan import DEFAULT_SMS, SMEM_PER_SM, TilePlan, occupancy, plan_head, tile_plan
from cusync_gen.spec.archs import ARCHS, DEPENDENT_LAUNCH_TARGETS, ConvKernels, ConvOverlapRule
from cusync_gen.spec.rules import retarget
from cusync_gen.spec.model import (
    Arch,
    ConvChainSpec,
    Dtype,
    Epilogue,
    Op,
    StageSpec,
    conv_config_spec,
    conv_stage_shapes,
)

INPUT = -1  # producer / residual index of the chain input
#: The overlap's persistent sm90 consumer kernel in clusters of 1 x 2 CTAs along the channels
#: (ConvStageInfo::cluster_n): a cluster's two CTAs walk the channel tiles (m, 2j) and (m, 2j + 1) together, share
#: the activations' loads (TMA multicast) and are placed side by side, where the consumer's CTAs, launched while the
#: producer runs, otherwise land apart and their tiles ran 1.35x slower (H100). Clusters of 4 left SMs idle.
OVERLAP_CLUSTER_N = 2

def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class ConvStagePlan:
    index: int
    name: str
    producer: int           # INPUT or the previous stage
    residual: int | None    # None, INPUT or an earlier stage
    h: int
    w: int
    c: int
    k: int
    r: int
    s: int
    p: int
    q: int
    pad: int
    stride: int
    dilation: int
    bias: bool
    epilogue: Epilogue
    tile: TilePlan
    #: Blocks one SM holds at once, from threads and shared memory (the library asks CUDA's occupancy
    #: calculator, which also counts registers: ConvChain::initialize).
    blocks_per_sm: int = 1
    #: K-blocks never span filter taps (sm90: each TMA im2col load takes tile.k channels of one tap, the
    #: last block of a tap zero-filled past c); sm80's iterators walk r * s * c as one K.
    per_tap_k: bool = False

    @property
    def act_cpp(self) -> str:
        return "cutlass::epilogue::thread::ReLu" if self.epilogue is Epilogue.RELU else "cutlass::epilogue::thread::Identity"

    @property
    def gemm_k(self) -> int:
        return self.r * self.s * self.c

    @property
    def k_steps(self) -> int:
        """Main-loop iterations of one tile: GEMM K over the tile's K step (ConvStageInfo::k_steps)."""
        if self.per_tap_k:
            return self.r * self.s * _ceil_div(self.c, self.tile.k)
        return _ceil_div(self.gemm_k, self.tile.k)

    def pixels(self, batch: int) -> int:
        return batch * self.p * self.q

    def tiles_m(self, batch: int) -> int:
        return _ceil_div(self.pixels(batch), self.tile.m)

    @property
    def tiles_n(self) -> int:
        return _ceil_div(self.k, self.tile.n)

    # The window, as ConvWindow computes it on the device.
    def first_row(self, out_row: int) -> int:
        return max(0, out_row * self.stride - self.pad)

    def last_row(self, out_row: int) -> int:
        return min(self.h - 1, out_row * self.stride - self.pad + (self.r - 1) * self.dilation)

    def window_pixels(self, m0: int, m1: int) -> tuple[int, int]:
        """Producer pixels [first, last] that output pixels [m0, m1) read."""
        pq = self.p * self.q
        n0, p0 = m0 // pq, (m0 % pq) // self.q
        n1, p1 = (m1 - 1) // pq, ((m1 - 1) % pq) // self.q
        return (n0 * self.h + self.first_row(p0)) * self.w, (n1 * self.h + self.last_row(p1)) * self.w + self.w - 1

    def tile_pixels(self, tm: int, batch: int) -> tuple[int, int]:
        m0 = tm * self.tile.m
        return m0, min(m0 + self.tile.m, self.pixels(batch))

    def waited_rows(self, tm: int, producer: ConvStagePlan, batch: int) -> range:
        """The producer tile rows consumer tile row `tm` waits for (what ConvWaits::wait does): those holding
        its window's pixels, widened up to the next tile row's first one (the first and last tile rows: to
        the producer's first and last), so that every producer tile row is waited for by some consumer even
        where a stride skips rows. The run's close (the epoch bump) relies on that: every post is seen."""
        m0, m1 = self.tile_pixels(tm, batch)
        ptm, ptiles = producer.tile.m, producer.tiles_m(batch)
        first = 0 if tm == 0 else self.window_pixels(m0, m1)[0] // ptm
        last = self.window_pixels(m0, m1)[1] // ptm
        if tm + 1 < self.tiles_m(batch):
            last = max(last, self.window_pixels(m1, m1 + 1)[0] // ptm - 1)
        else:
            last = ptiles - 1
        return range(first, min(last, ptiles - 1) + 1)

    def residual_rows(self, tm: int, source: ConvStagePlan, batch: int) -> range:
        m0, m1 = self.tile_pixels(tm, batch)
        return range(m0 // source.tile.m, min((m1 - 1) // source.tile.m, source.tiles_m(batch) - 1) + 1)

    @property
    def window_rows(self) -> int:
        """Input rows a filter window spans beyond its first one: (r - 1) * dilation."""
        return (self.r - 1) * self.dilation

    @property
    def halo_rows(self) -> tuple[int, int]:
        """Input rows a window reaches above (at most pad) and below its output row's first input row."""
        return self.pad, self.window_rows - self.pad


@dataclass(frozen=True)
class ConvTileConfig:
    """Other tiles for batches up to batch_max (the spec's tile_configs[i]): the stages as they plan with them."""

    batch_max: int
    stages: tuple[ConvStagePlan, ...]

    @property
    def suffix(self) -> str:
        """What the configuration's kernels, launch functions and stage table are named after."""
        return f"_b{self.batch_max}"


@dataclass(frozen=True)
class ConvTable:
    """One configuration as the project's tables hold it: its stages, what its names end in ("" for the
    stages' own tiles) and the largest batch it runs (None: every batch above the other configurations')."""

    suffix: str
    stages: tuple[ConvStagePlan, ...]
    batch_max: int | None
    #: The configuration's units also hold persistent kernels (ConvTables::persistent; ConvPlan.persistent_kernels).
    persistent: bool = False


@dataclass(frozen=True)
class ConvPlan:
    name: str
    class_name: str
    spec_hash: str
    arch: Arch
    target: str
    cuda_arch: str
    dtype: Dtype
    max_batch: int
    stages: tuple[ConvStagePlan, ...]   # the stages' own tiles: every batch above the configurations'
    sms: int
    configs: tuple[ConvTileConfig, ...] = ()  # by growing batch_max (tile_configs)
    #: The largest batch these stages run (at(): the configuration's batch_max); None: max_batch.
    stages_batch_max: int | None = None

    def at(self, batch: int) -> ConvPlan:
        """The plan that runs `batch`: the first configuration whose batch_max holds it, else the stages' own tiles."""
        for config in self.configs:
            if batch <= config.batch_max:
                return replace(self, stages=config.stages, configs=(), stages_batch_max=config.batch_max)
        return replace(self, configs=()) if self.configs else self

    def _more_than_a_wave(self, st: ConvStagePlan, batch: int) -> bool:
        return st.tiles_m(batch) * st.tiles_n > self.sms * max(st.blocks_per_sm, 1)

    def _holds_persistent(self, stages: tuple[ConvStagePlan, ...], batch_max: int) -> bool:
        return self.conv_kernels.persistent and any(self._more_than_a_wave(st, batch_max) for st in stages)

    @property
    def persistent_kernels(self) -> bool:
        """These stages' units also hold persistent kernels (the arch has them, sm90): where some stage has more
        tiles than one wave at the largest batch they run (ConvTables::persistent)."""
        return self._holds_persistent(self.stages, self.stages_batch_max or self.max_batch)

    def stage_persistent(self, st: ConvStagePlan, batch: int) -> bool:
        """Stage `st` runs its persistent kernel at `batch` (ConvChain::persistent): one is built and the stage has
        more tiles than one wave; else one block per tile (measured faster within a wave on the H200)."""
        return self.persistent_kernels and self._more_than_a_wave(st, batch)

    def config_text(self, batch: int) -> str:
        """Which tiles run `batch`, as `validate` says it."""
        for i, config in enumerate(self.configs):
            if batch <= config.batch_max:
                return f"tile_configs[{i}] (batches up to {config.batch_max})"
        return "the stages' own tiles" + (f" (batches above {self.configs[-1].batch_max})" if self.configs else "")

    @property
    def tables(self) -> tuple[ConvTable, ...]:
        """Every configuration, the smallest batches first and the stages' own tiles last (the project's tables)."""
        return (*(ConvTable(c.suffix, c.stages, c.batch_max, self._holds_persistent(c.stages, c.batch_max))
                  for c in self.configs),
                ConvTable("", self.stages, None, self._holds_persistent(self.stages, self.max_batch)))

    @property
    def persistent_suffixes(self) -> frozenset[str]:
        """The configurations (by suffix) whose stage units also hold persistent kernels."""
        return frozenset(t.suffix for t in self.tables if t.persistent)

    def overlap_cluster_n(self, suffix: str, st: ConvStagePlan) -> int:
        """CTAs along N of the thread block clusters the overlap runs stage `st`'s persistent kernel in, in
        configuration `suffix` (ConvStageInfo::cluster_n): OVERLAP_CLUSTER_N where the configuration holds persistent
        kernels, the stage waits for a producer (its CTAs launch while the producer runs) and its channel tiles pair
        up; else 1 (no cluster kernel)."""
        if suffix in self.persistent_suffixes and st.producer != INPUT and st.tiles_n % OVERLAP_CLUSTER_N == 0:
            return OVERLAP_CLUSTER_N
        return 1

    def stage_tiles(self, index: int) -> tuple[tuple[str, ConvStagePlan], ...]:
        """(suffix, the stage as that configuration plans it) for every configuration: the kernels one stage unit holds."""
        return tuple((t.suffix, t.stages[index]) for t in self.tables)

    @property
    def conv_kernels(self) -> ConvKernels:
        kernels = ARCHS[self.arch].conv
        assert kernels is not None  # the spec rules refuse conv stages on an arch without conv kernels
        return kernels

    @property
    def backend(self) -> str:
        return self.conv_kernels.backend

    @property
    def overlap_rule(self) -> ConvOverlapRule:
        """When run()'s rule takes the overlap (ConvTables::overlap_rule)."""
        return self.conv_kernels.overlap_rule

    @property
    def overlap_rule_cpp(self) -> str:
        return self.overlap_rule.cpp

    @property
    def overlap_rule_text(self) -> str:
        rule = self.overlap_rule
        idle = (f" and the widest producer's last wave leaves at least {rule.min_idle_percent}% of its SM time idle"
                if rule.min_idle_percent else "")
        return f"where tiles take at least {rule.min_k_steps} iterations{idle}"

    @property
    def kernel_text(self) -> str:
        """What each conv is, as the project's README says it."""
        return self.conv_kernels.readme

    @property
    def element(self) -> str:
        return "cutlass::half_t" if self.dtype is Dtype.FP16 else "cutlass::bfloat16_t"

    @property
    def input_shape(self) -> tuple[int, int, int]:
        s = self.stages[0]
        return s.h, s.w, s.c

    @property
    def programmatic(self) -> bool:
        """Built for a target whose kernels trigger a programmatic dependent launch: the overlap runs on one
        stream on such devices (ConvTables::programmatic), else on two streams with the wait kernels."""
        return self.target in DEPENDENT_LAUNCH_TARGETS

    def run_mode(self, batch: int, sms: int | None = None) -> tuple[str, str]:
        """run()'s rule at `batch` on `sms` SMs (ConvChain::mode without set_mode or autotune,
        cusync::conv::default_conv_mode), and why: the overlap where the producer stage with the most waves (its
        tiles over its blocks on the GPU at once) runs more than one, its last wave leaves at least
        overlap_rule.min_idle_percent of its SM time idle, and every stage's tiles take at least
        overlap_rule.min_k_steps main-loop iterations; else back to back: where every producer fits in one wave
        its tiles all run at once and end together (no consumer tile can start early, and the overlap only adds
        its fixed cost), a nearly full last wave leaves little to fill, and short tiles pay that cost in every
        wave. Chained with programmatic dependent launch where the kernels have it (`back-to-back+PDL`, on
        sm_90). With tile_configs, the rule of the configuration that runs `batch`."""
        if self.configs:
            return self.at(batch).run_mode(batch, sms)
        sms = sms or self.sms
        producers = [(st.tiles_m(batch) * st.tiles_n, sms * st.blocks_per_sm, st.name)
                     for st in self.stages if self.has_consumer(st.index)]
        if not producers:
            return "back-to-back", "one stage: back-to-back"
        tiles, slots, name = producers[0]
        for t, s, n in producers[1:]:  # the most waves, the first of equals (as the C++ compares them)
            if t * slots > tiles * s:
                tiles, slots, name = t, s, n
        apart = "back-to-back+PDL" if self.programmatic else "back-to-back"
        slots = slots if slots > 0 else 1
        if tiles <= slots:
            return apart, f"rule: every producer fits in one wave ({name}: {tiles} tiles, {slots} blocks at once): {apart}"
        rule = self.overlap_rule
        up = max(_ceil_div(tiles, slots), 1) * slots  # its waves, rounded up
        idle = (up - tiles) * 100 // up
        head = f"rule: {name} has {tiles} tiles, more than one wave ({slots} blocks at once), "
        if idle < rule.min_idle_percent:
            return apart, head + (f"but its last wave leaves {idle}% of its SM time idle (the overlap fills at most that; "
                                  f"these kernels take it from {rule.min_idle_percent}%): {apart}")
        steps = min(st.k_steps for st in self.stages)
        if steps >= rule.min_k_steps:
            return "overlap", head + f"and every stage's tiles take at least {steps} main-loop steps: overlap"
        return apart, head + (f"but some stage's tiles take {steps} main-loop steps (short tiles: the overlap's "
                              f"per-tile cost outweighs it): {apart}")

    def _tile_text(self, t: TilePlan) -> str:
        if self.conv_kernels.threads is not None:
            return "a producer and a consumer warp group, the pipeline filling shared memory: one block per SM"
        return f"{t.threads // 32} warps, {t.stages} stages, {t.smem_bytes} B smem"

    def has_consumer(self, index: int) -> bool:
        return any(s.producer == index or s.residual == index for s in self.stages)

    def tensor_name(self, index: int | None) -> str:
        return "input" if index == INPUT else "none" if index is None else self.stages[index].name

    def check_batch(self, batch: int, option: str = "--batch") -> None:
        if not 1 <= batch <= self.max_batch:
            raise UsageError(f"{option}: batch {batch} is outside 1 .. {self.max_batch} (stages[0].n, the largest batch "
                             "the library is built for)", f"use a batch of at most {self.max_batch}, or raise n")

    def describe(self, batch: int) -> str:
        """The plan at one batch, as `validate` prints it: shapes, tiles, grids, and each wait explained."""
        self.check_batch(batch)
        if self.configs:
            head, _, rest = self.at(batch).describe(batch).partition("\n")
            return f"{head}\n  tiles at batch {batch}: {self.config_text(batch)}\n{rest}"
        h, w, c = self.input_shape
        lines = [f"{self.name}: {len(self.stages)} conv stages, {self.conv_kernels.kernels} for {self.target}, "
                 f"{self.dtype.value}, batch {batch} (at most {self.max_batch}); input [{batch}, {h}, {w}, {c}] NHWC"]
        for st in self.stages:
            t = st.tile
            extra = ", bias" if st.bias else ""
            extra += f", + {self.tensor_name(st.residual)}" if st.residual is not None else ""
            lines.append(f"  {st.name}: {self.tensor_name(st.producer)} [{batch}, {st.h}, {st.w}, {st.c}] -> "
                         f"[{batch}, {st.p}, {st.q}, {st.k}], {st.r}x{st.s} stride {st.stride} padding {st.pad} "
                         f"dilation {st.dilation}{extra}, {st.epilogue.value}")
            lines.append(f"    implicit GEMM M = {batch}*{st.p}*{st.q} = {st.pixels(batch)}, N = {st.k}, "
                         f"K = {st.r}*{st.s}*{st.c} = {st.gemm_k}; tile {t.m}x{t.n}x{t.k} ({self._tile_text(t)}): "
                         f"grid {st.tiles_m(batch)} x {st.tiles_n}, "
                         "row-major (tile rows are runs of output pixels: the first image rows complete first)")
            if self.persistent_kernels:
                lines.append("    kernel: " + (
                    f"persistent ({self.sms * max(st.blocks_per_sm, 1)} CTAs walk the tiles from a queue, two math "
                    "warp groups on alternate tiles: more tiles than one wave)" if self.stage_persistent(st, batch)
                    else "one block per tile (the tiles fit in one wave)")
                    + (f"; in the overlap in clusters of 1 x {OVERLAP_CLUSTER_N} CTAs that walk neighbouring channel "
                       "tiles together and share the activations' loads"
                       if self.stage_persistent(st, batch) and st.producer != INPUT
                       and st.tiles_n % OVERLAP_CLUSTER_N == 0 else ""))
            if self.has_consumer(st.index):
                lines.append(f"    posts: one semaphore per tile row of output pixels ({st.tiles_m(batch)}), "
                             f"{st.tiles_n} post(s) each (one per channel tile)")
            if st.producer != INPUT:
                pr = self.stages[st.producer]
                above, below = st.halo_rows
                lines.append(f"    waits on {pr.name} (sync auto: Conv2D tile sync): a tile of output pixels spans "
                             f"output rows p0..p1; their {st.r}x{st.s} windows read {pr.name} rows "
                             f"p0*{st.stride}-{above} .. p1*{st.stride}+{below}, clamped to the image (0 .. {st.h - 1}), "
                             f"all {st.w} columns and all {st.c} channels: that pixel range's tile rows of {pr.name}")
                tiles = st.tiles_m(batch)
                for tm in sorted({0, 1, tiles // 2, tiles - 1}):
                    if 0 <= tm < tiles:
                        m0, m1 = st.tile_pixels(tm, batch)
                        rows = st.waited_rows(tm, pr, batch)
                        lines.append(f"      tile row {tm} (pixels {m0}..{m1 - 1}) waits for {pr.name} tile rows "
                                     f"{rows.start}..{rows.stop - 1} of {pr.tiles_m(batch)}")
            if st.residual is not None and st.residual != INPUT:
                lines.append(f"    waits on {self.tensor_name(st.residual)} (residual): the tile rows holding its own "
                             "output pixels")
            elif st.residual == INPUT:
                lines.append("    residual: the chain input (ready before the chain starts: no wait)")
        mode, why = self.run_mode(batch)
        launch = ("one stream, each stage a programmatic dependent launch of the one before (on sm_90 devices)"
                  if self.programmatic else "two streams with the wait kernels")
        lines.append(f"  run() at batch {batch} on {self.sms} SMs: {mode} ({why}); the overlap runs on {launch}")
        return "\n".join(lines)


def make_conv_plan(spec: ConvChainSpec, target: str | None = None) -> ConvPlan:
    spec = retarget(spec, target)
    names = {"input": INPUT}
    kernels = ARCHS[spec.arch].conv
    assert kernels is not None  # the spec rules refuse conv stages on an arch without conv kernels
    stages = []
    for i, (st, (h, w, c, p, q)) in enumerate(zip(spec.stages, conv_stage_shapes(spec))):
        producer = names[st.a]
        if kernels.threads is not None:
            tb = st.tile.threadblock
            tile = TilePlan(tb[0], tb[1], tb[2], (0, 0, 0), (0, 0, 0), 0, kernels.threads, SMEM_PER_SM[spec.target])
        else:
            tile = tile_plan(i, StageSpec(name=st.name, op=Op.GEMM, a="input", n=8, tile=st.tile), spec.target,
                             base=f"stages[{i}].tile")
        stages.append(ConvStagePlan(
            index=i, name=st.name, producer=producer,
            residual=None if st.residual is None else names[st.residual],
            h=h, w=w, c=c, k=st.k, r=st.r, s=st.s, p=p, q=q, pad=st.padding, stride=st.stride, dilation=st.dilation,
            bias=st.bias, epilogue=st.epilogue, tile=tile, blocks_per_sm=occupancy(tile, spec.target),
            per_tap_k=kernels.per_tap_k))
        names[st.name] = i
    configs = tuple(ConvTileConfig(c.batch_max, make_conv_plan(conv_config_spec(spec, c)).stages)
                    for c in spec.tile_configs)
    return ConvPlan(
        **plan_head(spec),
        max_batch=spec.stages[0].n or 1,
        stages=tuple(stages),
        sms=DEFAULT_SMS[spec.target],
        configs=configs,
    )


def conv_json_stages(plan: ConvPlan, batch: int) -> list[dict[str, Any]]:
    plan = plan.at(batch)
    return [{"name": s.name, "op": "conv", "input": plan.tensor_name(s.producer), "residual": plan.tensor_name(s.residual)
             if s.residual is not None else None, "nhwc_in": [batch, s.h, s.w, s.c], "nhwc_out": [batch, s.p, s.q, s.k],
             "filter": [s.k, s.r, s.s, s.c], "stride": s.stride, "padding": s.pad, "dilation": s.dilation,
             "bias": s.bias, "epilogue": s.epilogue.value, "tile": [s.tile.m, s.tile.n, s.tile.k],
             "grid": [s.tiles_m(batch), s.tiles_n], "blocks_per_sm": s.blocks_per_sm} for s in plan.stages]
