"""How `run` talks to each kind of generated bench: the command line, the result lines, what a failing
exit means, and the table `cusync-gen run` prints. One class per kind of project (the manifest's `kind`),
so a bench's protocol has one home: `build.run` starts the process and streams its output, and asks the
project's `BenchProtocol` for everything that differs between kinds.

Kinds: GEMM chains and the sm80 attention chain (`GemmBench`: --m x --policies, JSON rows, the common exit
codes), the sm90 attention layer (`LayerBench`: shapes, JSON rows, exit 1 when a shape's check failed), and
conv chains (`ConvBench`: --batch, `RESULT {json}` lines among text lines, its checks and timeouts in text).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from cusync_gen import userfile
from cusync_gen.errors import CheckFailedError, CusyncError, NoGpuError, SyncTimeoutError, ToolError, UsageError

EXIT_BAD_ARGS = 2                     # exit codes of the generated bench (see README "Exit codes")
EXIT_NO_GPU = 3
EXIT_SYNC_TIMEOUT = 4
EXIT_CHECK_FAILED = 5
MAX_BENCH_JSON_DEPTH = 8               # a row of the bench's JSON output is flat
#: An sm90 attention layer shape: p:BxS+L or g:B+L, S and L one value or B values joined by '/'.
_LAYER_SHAPE = re.compile(r"(p:\d+x\d+(?:/\d+)*|g:\d+)\+\d+(?:/\d+)*")


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
    (`p:BxS+L` prompts, `g:B+L` generation steps, S and L one value or one per sequence joined by '/';
    options.layer_shapes and options.layer_shape_list)."""
    if not shapes or any(not _LAYER_SHAPE.fullmatch(str(s)) for s in shapes):
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


# --------------------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------------------

def _num(value: Any, fmt: str) -> str:
    return format(value, fmt) if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"


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


#: The sm90 run() modes whose kernels wait per tile: the overlap, and mode stream (its second GEMM's K ranges wait
#: on the first GEMM's tiles inside one kernel).
TILE_SYNCED_MODES = ("overlap", "stream")


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
            if mode not in TILE_SYNCED_MODES:
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


# --------------------------------------------------------------------------------------------------
# The protocols
# --------------------------------------------------------------------------------------------------

class BenchProtocol:
    """A GEMM chain's bench (and the sm80 attention chain's): --m and --policies in, one JSON row per
    (M, policy) out; exit codes 2-5 as the README says."""

    kind = "chain"

    def command(self, bench: Path, ms: Sequence[int], policies: Iterable[Any] | None, repeats: int, warmup: int,
                extra_args: Sequence[str]) -> list[str]:
        return bench_command(bench, ms, policies, repeats, warmup, extra_args)

    def row(self, line: str) -> dict[str, Any] | None:
        """One line of the bench's stdout as a result row, or None for any other line."""
        return parse_bench_line(line)

    def failure(self, code: int, rows: list[dict[str, Any]], text: Sequence[str], stderr: Sequence[str],
                command: list[str], bench_name: str) -> CusyncError:
        """What a failing exit means: `text` the stdout lines that were no rows, `stderr` the end of stderr
        (its last `error:` line says why). Exit 2: the bench rejected its arguments; 3: no device; 4: a
        spin-wait timed out (the row or line names the tile); 5: a check failed; a signal; anything else."""
        tail = "\n".join(stderr)
        last_err = next((line for line in reversed(stderr) if line.startswith("error:")), stderr[-1] if stderr else "")
        if code == EXIT_BAD_ARGS:
            reason = last_err.removeprefix("error:").strip() or "see its usage above"
            return UsageError(f"{bench_name} rejected its arguments: {reason}", hint=f"command: {' '.join(command)}")
        if code == EXIT_NO_GPU:
            return NoGpuError(f"{bench_name}: {last_err.removeprefix('error:').strip() or 'no CUDA device found'}",
                              hint="check the NVIDIA driver (nvidia-smi) and CUDA_VISIBLE_DEVICES",
                              command=command, stderr_tail=tail)
        if code == EXIT_SYNC_TIMEOUT:
            reasons = [str(r["sync_error"]) for r in rows if r.get("sync_error")]
            message = reasons[0] if reasons else (last_err or "a spin-wait timed out")
            return SyncTimeoutError(f"sync timeout: {message}", hint=_SYNC_TIMEOUT_HINT)
        if code == EXIT_CHECK_FAILED:
            detail = _describe_failures(rows) or last_err
            return CheckFailedError("results differ" + (f": {detail}" if detail else ""),
                                    hint="the overlapped chain does not match the sequential chain or the reference")
        if code < 0:
            return ToolError(f"{bench_name} was killed by signal {-code}", command=command, stderr_tail=tail)
        return ToolError(f"{bench_name} failed (exit {code})", command=command, stderr_tail=tail,
                         hint="the lines above are the end of its output")

    def owns(self, rows: Sequence[dict[str, Any]]) -> bool:
        """Whether recorded rows (a --results file) are this kind's: they have M."""
        return any("m" in row for row in rows)

    def table(self, rows: Sequence[dict[str, Any]]) -> Table:
        """The `cusync-gen run` table: one line per (M, policy).

        sm90 benches time what the library's `run()` does at each M (its mode, chosen by the measured table
        or the default rule) against the cuBLAS chain in the same binary, and the tile-synced overlap against
        the same kernels run sequentially: those rows lead with run() and cuBLAS, say which mode ran and why
        (the caption), and say plainly at which M run() does not run the tile-synced kernels. Rows without an
        "m" are run-level records (the sm90 bench's `floor_tflops`): shown in the caption.
        """
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


class LayerBench(BenchProtocol):
    """The sm90 attention layer's bench: shapes in (extra_args), `--check --time`; one JSON row per shape;
    exit 1 when a shape's check failed, any other failure its own."""

    kind = "attention_sm90"

    def command(self, bench: Path, ms: Sequence[int], policies: Iterable[Any] | None, repeats: int, warmup: int,
                extra_args: Sequence[str]) -> list[str]:
        return layer_bench_command(bench, extra_args, repeats)

    def failure(self, code: int, rows: list[dict[str, Any]], text: Sequence[str], stderr: Sequence[str],
                command: list[str], bench_name: str) -> CusyncError:
        failures = _describe_layer_failures(rows)
        if code == 1 and failures:
            return CheckFailedError(
                f"results differ: {failures}",
                hint="the layer's output is not reproducible or not within tolerance of the fp32 reference")
        return ToolError(f"{bench_name} failed (exit {code})", command=command, stderr_tail="\n".join(stderr),
                         hint="the lines above are the end of its output")

    def owns(self, rows: Sequence[dict[str, Any]]) -> bool:
        return any("shape" in row and ("layer_us" in row or "layer_err" in row) for row in rows)

    def table(self, rows: Sequence[dict[str, Any]]) -> Table:
        return _format_layer_table(rows)


class ConvBench(BenchProtocol):
    """A conv chain's bench: --batch (and --preheat) in (extra_args), no M; `RESULT {json}` lines among
    text lines; a failed check or a sync timeout is told in text (which batch, stage or tile)."""

    kind = "conv"

    def command(self, bench: Path, ms: Sequence[int], policies: Iterable[Any] | None, repeats: int, warmup: int,
                extra_args: Sequence[str]) -> list[str]:
        return [str(bench), "--repeats", str(repeats), "--warmup", str(warmup), *[str(a) for a in extra_args]]

    def row(self, line: str) -> dict[str, Any] | None:
        return parse_bench_line(line.removeprefix(CONV_RESULT_PREFIX))

    def failure(self, code: int, rows: list[dict[str, Any]], text: Sequence[str], stderr: Sequence[str],
                command: list[str], bench_name: str) -> CusyncError:
        if code == EXIT_CHECK_FAILED:  # stdout says which batch and stage differ
            detail = "; ".join(line for line in text if "differ" in line) or "see the lines above"
            return CheckFailedError(f"results differ: {detail}",
                                    hint="the tile-synced or chained run does not match back to back, or a stage "
                                         "is not within tolerance of the reference convolution")
        timeout = next((line for line in text if "sync timeout" in line), None)
        if timeout is not None:
            return SyncTimeoutError(timeout, hint=_SYNC_TIMEOUT_HINT)
        return super().failure(code, rows, text, stderr, command, bench_name)

    def owns(self, rows: Sequence[dict[str, Any]]) -> bool:
        return any("batch" in row and "overlap_us" in row for row in rows)

    def table(self, rows: Sequence[dict[str, Any]]) -> Table:
        return _format_conv_table(rows)


GEMM_BENCH, LAYER_BENCH, CONV_BENCH = BenchProtocol(), LayerBench(), ConvBench()
#: The protocol of each manifest `kind` (a GEMM chain's manifest has none).
PROTOCOLS: dict[str, BenchProtocol] = {"chain": GEMM_BENCH, "attention": GEMM_BENCH,
                                       "attention_sm90": LAYER_BENCH, "conv": CONV_BENCH}


def protocol_of(manifest: dict[str, Any]) -> BenchProtocol:
    """The bench protocol of a generated project, from its manifest."""
    kind = manifest.get("kind") or "chain"
    protocol = PROTOCOLS.get(str(kind))
    if protocol is None:
        raise ToolError(f"manifest.json names kind {str(kind)[:40]!r}, which this cusync-gen does not run",
                        hint="the project and this cusync-gen are out of step: regenerate the project")
    return protocol


def format_table(rows: Sequence[dict[str, Any]]) -> Table:
    """The `cusync-gen run` table of result rows (from a run or a --results file): the protocol whose rows
    they are draws it."""
    for protocol in (LAYER_BENCH, CONV_BENCH):
        if protocol.owns(rows):
            return protocol.table(rows)
    return GEMM_BENCH.table(rows)
