"""One home per sync policy (cusync_gen/spec/policies.py): the Python table agrees with the runtime's
policy.h (its PolicyKind names and values, the factories, semaphore_of and the posts each factory sets),
and the generator's modules read the table rather than spelling a policy's meaning again."""

from __future__ import annotations

import math
import re

from conftest import REPO
from cusync_gen import cpp, dependency
from cusync_gen.spec.model import Policy
from cusync_gen.spec.policies import CPP_ONLY_KINDS, POLICIES, one_post

HEADER = (REPO / "templates" / "runtime" / "include" / "cusync" / "policy.h").read_text()


def _cpp_kinds() -> dict[str, int]:
    body = HEADER[HEADER.index("enum class PolicyKind"):]
    body = body[:body.index("};")]
    return {name: int(value) for name, value in re.findall(r"\b(k\w+) = (\d+)", body)}


def _semaphore_of_cases() -> dict[str, str]:
    """PolicyKind member -> the expression SyncPolicy::semaphore_of returns for it."""
    body = HEADER[HEADER.index("semaphore_of(int32_t pm, int32_t pn)"):]
    body = body[body.index("switch"):body.index("default:")]
    cases: dict[str, str] = {}
    pending: list[str] = []
    for kind, expr in re.findall(r"case PolicyKind::(\w+):(?:\s*return ([^;]+);)?", body):
        pending.append(kind)
        if expr:
            cases.update({k: expr for k in pending})
            pending = []
    return cases


def _factories() -> dict[str, tuple[list[str], list[str]]]:
    """Factory name -> (its parameter names, the SyncPolicy{...} initializer's fields)."""
    found = {}
    for name, params, init in re.findall(r"inline SyncPolicy (\w+)\(([^)]*)\) \{\s*return SyncPolicy\{([^}]*)\};",
                                         HEADER):
        names = [p.split()[-1] for p in params.split(",") if p.strip()]
        found[name] = (names, [f.strip() for f in init.split(",") if f.strip()])
    return found


def test_policy_kinds_match_the_header() -> None:
    kinds = _cpp_kinds()
    table = {info.cpp_kind: info.cpp_value for info in POLICIES.values()}
    assert {k: v for k, v in kinds.items() if k not in CPP_ONLY_KINDS} == table
    assert set(CPP_ONLY_KINDS) <= set(kinds), "a kind listed as C++-only is gone from policy.h: drop it"
    assert set(POLICIES) == set(Policy) - {Policy.AUTO}
    assert all(cpp.POLICY[p] == f"cusync::PolicyKind::{POLICIES[p].cpp_kind}" for p in POLICIES)


def test_each_factory_builds_its_kind_with_the_table_s_layout() -> None:
    """SyncPolicy{kind, tile_m, tile_n, sems_per_row, posts, stride_tiles}: evaluated for a producer of
    n = 512 columns in tiles of 64 (8 per row) and a strided group of stride 4, the semaphores per row and
    the posts are the table's semaphores_per_row and wait_value."""
    factories = _factories()
    n, tile_n, stride = 512, 64, 4
    args = {"tile_m": 128, "tile_n": tile_n, "tiles_n": n // tile_n, "stride_tiles": stride, "group_size": 2}
    for policy, info in POLICIES.items():
        assert info.cpp_factory in factories, info.cpp_factory
        params, fields = factories[info.cpp_factory]
        if policy is Policy.NONE:
            assert fields == [], "NoSync() is the empty SyncPolicy"
            continue
        assert fields[0] == f"PolicyKind::{info.cpp_kind}", (info.cpp_factory, fields)
        values = [eval(f, {}, {p: args[p] for p in params}) for f in fields[1:]]  # noqa: S307 - our own header
        sems_per_row, posts = values[2], values[3]
        assert sems_per_row == info.semaphores_per_row(n, tile_n, stride), policy
        assert posts == info.wait_value(n, tile_n), policy


def test_semaphore_of_matches_the_header() -> None:
    cases = _semaphore_of_cases()
    assert set(cases) == {i.cpp_kind for i in POLICIES.values() if i.policy is not Policy.NONE} | set(CPP_ONLY_KINDS)
    n, tile_n, stride = 384, 64, 3
    tiles_n = math.ceil(n / tile_n)
    for policy, info in POLICIES.items():
        if policy is Policy.NONE:
            continue
        sems = info.semaphores_per_row(n, tile_n, stride)
        for pm in range(4):
            for pn in range(tiles_n):
                ours = info.semaphore_of(pm, pn, tiles_n, stride)
                theirs = eval(cases[info.cpp_kind], {}, {"pm": pm, "pn": pn, "sems_per_row": sems,  # noqa: S307
                                                          "stride_tiles": stride})
                assert ours == theirs, (policy, pm, pn)
                assert 0 <= ours < info.semaphores_posted(4, tiles_n, stride) or policy is Policy.STRIDED
            row = {info.semaphore_of(pm, pn, tiles_n, stride) for pn in range(tiles_n)}
            assert info.whole_row == (row == {pm}), policy


def test_posts_add_up_to_one_per_tile() -> None:
    for policy, info in POLICIES.items():
        if policy is Policy.NONE:
            continue
        for tiles_m, tiles_n, stride in ((3, 8, 4), (2, 6, 3)):
            total = sum(info.posts_to(s, tiles_m, tiles_n, stride) for s in range(tiles_m * tiles_n * 2))
            assert total == tiles_m * tiles_n, (policy, tiles_m, tiles_n)
            assert info.one_post == all(info.posts_to(s, tiles_m, tiles_n, stride) <= 1
                                        for s in range(tiles_m * tiles_n))


def test_candidates_and_no_atomic_add_come_from_the_table() -> None:
    for cols in ("k_range", "same"):
        assert dependency.candidates(dependency.Dependency(cols)) == tuple(
            sorted((p for p in POLICIES if POLICIES[p].rank(cols) is not None), key=lambda p: POLICIES[p].rank(cols)))
    assert dependency.candidates(dependency.Dependency("strided", 8, 2), no_atomic_add=True) == (Policy.TILE,)
    assert one_post(None) and one_post(Policy.TILE) and not one_post(Policy.ROW)


def test_no_other_module_spells_a_policy_s_layout() -> None:
    """The modules that used to branch on the policy for its layout read the table now."""
    for name in ("dependency.py", "cpp.py"):
        text = (REPO / "cusync_gen" / name).read_text()
        assert "Policy.ROW" not in text and "Policy.STRIDED" not in text and "PolicyKind::k" not in text, name
