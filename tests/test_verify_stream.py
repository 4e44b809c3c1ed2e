"""run() mode stream's proof (cusync_gen/verify_stream.py): the shipped MLP chains with stream_weights, a
brute-force walk of the kernel's loops against the closed forms, and the gaps it must report."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import REPO
from cusync_gen import verify_stream as vs
from cusync_gen.plan import make_plan
from cusync_gen.spec.loading import load_spec, parse_spec, read_spec_data
from cusync_gen.verify import verify

EXAMPLE_DIR = REPO / "cusync_gen" / "examples"
STREAM_CHAINS = ("gpt3_mlp_sm90", "llama_mlp_fused_sm90", "llama_mlp_sm90")


def stream_plan(name: str, **stage_k: int) -> Any:  # noqa: ANN401 (ChainPlan)
    data = read_spec_data(EXAMPLE_DIR / f"{name}.yaml")
    data.setdefault("optimizations", {})["stream_weights"] = True
    data.pop("dispatch", None)
    for i, k in stage_k.items():
        data["stages"][int(i[1:])]["k"] = k
    return make_plan(parse_spec(data))


@pytest.fixture(autouse=True)
def _fresh_proofs() -> None:
    vs._prove.cache_clear()


@pytest.mark.parametrize("name", STREAM_CHAINS)
def test_the_shipped_chains_with_stream_weights_are_proved(name: str) -> None:
    plan = stream_plan(name)
    proof = verify(plan, 1)
    assert proof.stream is not None and proof.stream.grids == (1, 160)
    g1, g2 = vs.stream_gemms(plan)
    assert proof.stream.tile_cols == (32 if g1.swiglu else 64) and proof.stream.producer_tiles == g1.tiles
    assert proof.stream.max_waits <= vs.CHUNK_K // proof.stream.tile_cols
    assert "mode stream" in proof.describe() and proof.as_json()["stream"]["policy"] == "k_range"
    assert verify(plan, 65).stream is None  # above STREAM_MAX_M run() never takes mode stream


def test_no_stream_proof_without_the_key() -> None:
    plan = make_plan(load_spec(EXAMPLE_DIR / "llama_mlp_sm90.yaml"))
    assert verify(plan, 1).stream is None and verify(plan, 1).as_json()["stream"] is None


def test_the_test_spec_is_proved() -> None:
    plan = make_plan(load_spec(REPO / "tests" / "data" / "decode_stream_sm90.yaml"))
    assert verify(plan, 64).stream is not None


def _brute_force(g: vs.StreamGemm, grid: int) -> int:
    """The kernel's loops, CTA by CTA: range_of, the consumers finishing every tile their range touches in order,
    slot_of for each partial, the last arriver reading the tile's slots; returns the tiles summed through the
    workspace, and asserts what the kernel relies on."""
    q = g.tiles * g.chunks
    used = min(grid, q)
    seen = [0] * q
    arrivals = [0] * g.tiles
    holders: dict[int, list[int]] = {}
    slots: dict[int, tuple[int, int]] = {}
    for c in range(grid):
        lo, hi = (c * q // used, (c + 1) * q // used) if c < used else (0, 0)
        for x in range(lo, hi):
            seen[x] += 1
        if lo >= hi:
            continue
        for t in range(lo // g.chunks, (hi - 1) // g.chunks + 1):
            arrivals[t] += 1
            holders.setdefault(t, []).append(c)
    assert seen == [1] * q
    shared = 0
    for t, cs in holders.items():
        owner = [((x + 1) * used - 1) // q for x in (t * g.chunks, (t + 1) * g.chunks - 1)]
        assert cs == list(range(owner[0], owner[1] + 1)) and arrivals[t] == len(cs)
        if len(cs) > 1:
            shared += 1
            for c in cs:
                slot = 2 * c + (0 if (c * q // used) // g.chunks == t else 1)
                assert slot not in slots and slot < 2 * grid, (t, c, slot, slots.get(slot))
                slots[slot] = (t, c)
    return shared


@pytest.mark.parametrize(("k", "n"), [(8, 8), (136, 72), (1352, 200), (4104, 1000), (12288, 704)])
def test_the_closed_forms_match_a_walk_of_the_kernel(k: int, n: int) -> None:
    g = vs.StreamGemm("g", k, n, False)
    for grid in (*range(1, 40), 113, 114, 132, 160):
        assert vs._reduction(g, grid) == _brute_force(g, grid), grid


def test_a_missing_wait_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    real = vs._waits
    monkeypatch.setattr(vs, "_waits", lambda k0, kend, w: real(k0, kend, w) - {(kend - 1) // w} or {0})
    with pytest.raises(vs.StreamVerificationError, match=r"chunk 0 reads column \d+ of H, written by gemm1 tile \d+, without waiting"):
        verify(stream_plan("llama_mlp_fused_sm90"), 1)


def test_a_shared_workspace_slot_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vs, "_slot_of", lambda c, t, lo, chunks: 2 * c)
    with pytest.raises(vs.StreamVerificationError, match="workspace slot"):
        verify(stream_plan("gpt3_mlp_sm90"), 1)


def test_reads_past_the_producers_output_are_reported() -> None:
    g1 = vs.StreamGemm("up", 4096, 1024, True)   # 512 columns of H
    g2 = vs.StreamGemm("down", 640, 4096, False)
    with pytest.raises(vs.StreamVerificationError, match="never written") as error:
        vs._coverage(g1, g2)
    assert error.value.field == "optimizations.stream_weights" and error.value.hint == "set down's k to 512"
