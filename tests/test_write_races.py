"""What the user (or their editor, build or a hostile neighbour) does around a running `generate` or
`init`: files written into the target while we write, links planted around it, hand edits. Nothing the
user owns may be lost, moved in from outside the target, or written through a link.

The races are made deterministic by pausing `generate` at each step of its write (after it listed the
folder, while it writes the staging folder, between the renames of the swap) and writing into the
target there; one stress test writes from a thread during real runs.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from conftest import REPO
from cusync_gen import fsio, render
from cusync_gen.errors import UsageError
from test_cli import cli_run, error_lines

TWO_GEMM = REPO / "cusync_gen" / "examples" / "two_gemm.yaml"
GPT3 = REPO / "cusync_gen" / "examples" / "gpt3_mlp.yaml"


def _project(root: Path) -> Path:
    proj = render.generate(TWO_GEMM, root / "proj")
    (proj / "notes.txt").write_text("my notes")
    return proj


def _leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name != "proj")


# ---------------------------------------------------------------------------------------------------
# Class 1: files created while generate runs are carried over

def _pause_at(monkeypatch: pytest.MonkeyPatch, step: str, action) -> None:  # type: ignore[no-untyped-def]
    """Run `action()` once, at `step` of generate's write: after listing the folder ("staging", when the
    staging folder is made), while writing it ("writing", after the first file), or at the swap ("aside":
    after the old tree moved aside; "before-swap": just before it)."""
    done = [False]

    def once() -> None:
        if not done[0]:
            done[0] = True
            action()

    if step == "staging":
        real_new = fsio.new_staging

        def new_staging(target: Path) -> Path:
            staging = real_new(target)
            once()
            return staging
        monkeypatch.setattr(fsio, "new_staging", new_staging)
    elif step == "writing":
        real_write = fsio.write_new

        def write_new(path: Path, data: bytes) -> None:
            real_write(path, data)
            once()
        monkeypatch.setattr(fsio, "write_new", write_new)
    else:
        real_rename = os.rename

        def rename(src, dst, **kwargs):  # type: ignore[no-untyped-def]
            aside = fsio.ASIDE_TAG in os.fsdecode(dst)
            if aside and step == "before-swap":
                once()
            real_rename(src, dst, **kwargs)
            if aside and step == "aside":
                once()
        monkeypatch.setattr(os, "rename", rename)


@pytest.mark.parametrize("step", ["staging", "writing", "before-swap"])
def test_a_file_written_while_generate_runs_survives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     step: str) -> None:
    proj = _project(tmp_path)

    def user_writes() -> None:
        (proj / "late.txt").write_text("written while generate ran")
        (proj / "src" / "mine.cu").write_text("// my kernel, in a folder of the project")
        (proj / "newdir").mkdir()
        (proj / "newdir" / "x.txt").write_text("x")
    _pause_at(monkeypatch, step, user_writes)
    render.generate(GPT3, proj)  # another spec: every generated file changes
    monkeypatch.undo()
    assert (proj / "late.txt").read_text() == "written while generate ran"
    assert (proj / "src" / "mine.cu").read_text().startswith("// my kernel")
    assert (proj / "newdir" / "x.txt").read_text() == "x"
    assert (proj / "notes.txt").read_text() == "my notes"
    render.generate(GPT3, proj, check=True)
    assert _leftovers(tmp_path) == []


def test_a_file_written_into_the_old_tree_after_the_swap_is_carried_over(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A process whose working folder is the old tree keeps writing there after the rename."""
    proj = _project(tmp_path)
    aside: list[Path] = []

    def writes_into_old_tree() -> None:
        old = next(p for p in tmp_path.iterdir() if fsio.ASIDE_TAG in p.name)
        (old / "from_old_cwd.txt").write_text("late")
        aside.append(old)
    _pause_at(monkeypatch, "aside", writes_into_old_tree)
    render.generate(GPT3, proj)
    monkeypatch.undo()
    assert aside and (proj / "from_old_cwd.txt").read_text() == "late"
    assert _leftovers(tmp_path) == []


def test_a_late_file_in_the_way_of_a_generated_one_is_kept_not_deleted(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The user writes a file where the new project writes one, after generate checked the folder: it
    cannot be placed, so it is kept in a visible sibling folder that a warning names; nothing is lost."""
    proj = _project(tmp_path)
    _pause_at(monkeypatch, "before-swap", lambda: (proj / "src" / "gpt3_mlp.cu").write_text("// mine"))
    code, out, err = cli_run(capsys, "generate", str(GPT3), "-o", str(proj))
    monkeypatch.undo()
    assert code == 0, err
    kept = [p for p in tmp_path.iterdir() if fsio.KEPT_TAG in p.name]
    assert len(kept) == 1 and (kept[0] / "src" / "gpt3_mlp.cu").read_text() == "// mine"
    assert "nothing was deleted" in err and kept[0].name in err
    render.generate(GPT3, proj, check=True)


def test_a_file_edited_after_the_check_is_not_deleted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An old generated file that the new project no longer writes, edited after generate decided to
    drop it, stays (as the user's file)."""
    proj = _project(tmp_path)
    stale = proj / "src" / "two_gemm.cu"
    assert stale.is_file()
    _pause_at(monkeypatch, "before-swap", lambda: stale.write_text("// edited at the last moment"))
    render.generate(GPT3, proj)
    monkeypatch.undo()
    assert stale.read_text() == "// edited at the last moment"


def test_hand_edited_generated_files_are_refused_without_force(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    proj = _project(tmp_path)
    edited = proj / "src" / "two_gemm.cu"
    edited.write_text("// my changes")
    code, _, err = cli_run(capsys, "generate", str(TWO_GEMM), "-o", str(proj))
    assert code == 2 and len(error_lines(err)) == 1 and "src/two_gemm.cu" in err and "--force" in err
    assert edited.read_text() == "// my changes"
    code, _, err = cli_run(capsys, "generate", str(TWO_GEMM), "-o", str(proj), "--force")
    assert code == 0, err
    render.generate(TWO_GEMM, proj, check=True)
    assert (proj / "notes.txt").read_text() == "my notes"


def test_stress_a_writer_during_real_generates_loses_nothing(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    written: list[str] = []
    stop = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.is_set():
            name = f"user_{i}.txt"
            try:
                (proj / name).write_text(name)
                written.append(name)
            except OSError:
                pass  # the folder is being swapped at this instant: the write failed, nothing was lost
            i += 1
            stop.wait(0.001)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for spec in (GPT3, TWO_GEMM, GPT3, TWO_GEMM, GPT3, TWO_GEMM):
            render.generate(spec, proj)
    finally:
        stop.set()
        thread.join()
    assert len(written) > 20
    places = [proj, *(p for p in tmp_path.iterdir() if fsio.KEPT_TAG in p.name)]
    lost = [name for name in written if not any((place / name).is_file() for place in places)]
    assert lost == []
    render.generate(TWO_GEMM, proj, check=True)


# ---------------------------------------------------------------------------------------------------
# Class 2: links planted around the target

def test_a_planted_staging_folder_moves_nothing_from_outside(tmp_path: Path) -> None:
    """A leftover staging folder with a kept list and a link to a folder outside: recovery never follows
    the link, and the file outside stays where it is."""
    proj = _project(tmp_path)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "secret.txt").write_text("secret")
    planted = tmp_path / f".proj{fsio.STAGING_TAG}deadbeef"
    planted.mkdir()
    (planted / fsio.JOURNAL).write_text('["sub/secret.txt", "../victim/secret.txt"]')
    (planted / "sub").symlink_to(victim)
    render.generate(TWO_GEMM, proj)
    assert (victim / "secret.txt").read_text() == "secret"
    assert not (proj / "secret.txt").exists()
    assert not (proj / "sub").exists() or (proj / "sub").is_symlink()  # moved as a link at most, never followed
    assert not (proj / "sub" / "secret.txt").is_file() or os.path.realpath(proj / "sub") == str(victim)


@pytest.mark.skipif(os.geteuid() != 0, reason="planting another user's folder needs root")
def test_a_leftover_of_another_user_is_not_trusted(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    planted = tmp_path / f".proj{fsio.ASIDE_TAG}deadbeef"
    planted.mkdir()
    (planted / "injected.txt").write_text("from someone else")
    os.chown(planted, 65534, 65534)
    render.generate(TWO_GEMM, proj)
    assert not (proj / "injected.txt").exists()
    assert (planted / "injected.txt").read_text() == "from someone else"  # not ours: not touched either


def test_a_symlinked_lock_file_creates_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    elsewhere = tmp_path / "elsewhere" / "created-through-the-link"
    elsewhere.parent.mkdir()
    (tmp_path / ".proj.lock").symlink_to(elsewhere)
    code, _, err = cli_run(capsys, "generate", str(TWO_GEMM), "-o", str(tmp_path / "proj"))
    assert code == 2 and len(error_lines(err)) == 1 and ".proj.lock" in err
    assert not elsewhere.exists() and not (tmp_path / "proj").exists()


def test_the_lock_refuses_a_fifo(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / ".proj.lock")
    with pytest.raises(UsageError, match="lock file"):
        with fsio.lock(tmp_path / "proj", wait_s=0.1):
            pass


def test_init_never_writes_through_a_dangling_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "outside.yaml"
    link = tmp_path / "spec.yaml"
    link.symlink_to(target)
    code, _, err = cli_run(capsys, "init", "two_gemm", "-o", str(link))
    assert code == 2 and len(error_lines(err)) == 1 and "--force" in err
    assert not target.exists() and link.is_symlink()
    code, _, err = cli_run(capsys, "init", "two_gemm", "-o", str(link), "--force")
    assert code == 0, err
    assert not target.exists() and not link.is_symlink() and link.read_bytes() == TWO_GEMM.read_bytes()


def test_init_into_a_new_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli_run(capsys, "init", "two_gemm", "-o", str(tmp_path / "newdir") + "/")
    assert code == 0, err
    assert (tmp_path / "newdir" / "two_gemm.yaml").read_bytes() == TWO_GEMM.read_bytes()
    code, _, err = cli_run(capsys, "init", "two_gemm", "-o", str(tmp_path / "newdir") + "/")
    assert code == 2 and "already exists" in err and "--force" in err
    code, _, err = cli_run(capsys, "init", "two_gemm", "-o", str(tmp_path / "newdir"))
    assert code == 2 and "is a folder" in err  # a folder without the slash is not a file name
    assert not (tmp_path / "newdir.yaml").exists() and sorted(os.listdir(tmp_path / "newdir")) == ["two_gemm.yaml"]


def test_init_refuses_a_fifo_even_with_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    os.mkfifo(tmp_path / "spec.yaml")
    code, _, err = cli_run(capsys, "init", "two_gemm", "-o", str(tmp_path / "spec.yaml"), "--force")
    assert code == 2 and "not a regular file" in err


def test_staging_files_are_never_written_through_a_link(tmp_path: Path) -> None:
    staging = tmp_path / "staging"
    staging.mkdir()
    (staging / "a.txt").symlink_to(tmp_path / "outside.txt")
    with pytest.raises(FileExistsError):
        fsio.write_new(staging / "a.txt", b"x")
    assert not (tmp_path / "outside.txt").exists()


def test_single_file_outputs_replace_a_link_instead_of_writing_through_it(tmp_path: Path) -> None:
    """run --results, trace -o and tune's outputs go through fsio.write_file: a link planted at the
    output path is replaced by the file, and what it pointed at stays untouched."""
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    link = tmp_path / "results.json"
    link.symlink_to(outside)
    fsio.write_file(link, b"[]\n", "--results", overwrite=True)
    assert outside.read_text() == "keep me"
    assert not link.is_symlink() and link.read_bytes() == b"[]\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outside.txt", "results.json"]  # no temporary left


def test_a_rolled_back_swap_never_deletes_a_user_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C mid-swap rolls back; a kept entry that cannot go back (something took its place meanwhile)
    is kept in a visible sibling folder instead of being deleted with the staging folder."""
    proj = _project(tmp_path)
    real_rename = os.rename
    calls = [0]

    def rename(src, dst, **kwargs):  # type: ignore[no-untyped-def]
        calls[0] += 1
        real_rename(src, dst, **kwargs)
        if calls[0] == 1:  # notes.txt moved into staging: the user writes a new notes.txt, then Ctrl-C
            (proj / "notes.txt").write_text("new notes")
            raise KeyboardInterrupt
    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(fsio.Interrupted):
        render.generate(GPT3, proj)
    monkeypatch.undo()
    assert (proj / "notes.txt").read_text() == "new notes"
    kept = [p for p in tmp_path.iterdir() if fsio.KEPT_TAG in p.name]
    assert len(kept) == 1 and (kept[0] / "notes.txt").read_text() == "my notes"
