import os
from pathlib import Path

import pytest

from tnmt import io
from tnmt.errors import UserError


def test_atomic_write_creates_and_replaces(tmp_path: Path) -> None:
    path = tmp_path / "model.bin"
    io.atomic_write_bytes(path, b"first")
    io.atomic_write_bytes(path, b"second")
    io.atomic_write_text(tmp_path / "notes.txt", "ä\n")
    assert path.read_bytes() == b"second"
    assert (tmp_path / "notes.txt").read_bytes() == "ä\n".encode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.bin", "notes.txt"]


def test_permissions_follow_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        io.atomic_write_bytes(tmp_path / "f", b"x")
    finally:
        os.umask(old)
    assert (tmp_path / "f").stat().st_mode & 0o777 == 0o644


def test_failed_write_keeps_old_content_and_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "checkpoint.pt"
    io.atomic_write_bytes(path, b"good")

    def crash(src: object, dst: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        io.atomic_write_bytes(path, b"half")
    assert path.read_bytes() == b"good"
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]


def test_a_failed_write_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk reports ENOSPC at write or fsync without a file name: the error gets the path."""

    def no_space(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(OSError, match="No space left on device") as error:
        io.atomic_write_bytes(tmp_path / "model.safetensors", b"weights")
    assert error.value.filename == str(tmp_path / "model.safetensors")
    with pytest.raises(OSError) as error:
        io.append_line(tmp_path / "missing" / "metrics.jsonl", "{}")
    assert error.value.filename == str(tmp_path / "missing" / "metrics.jsonl")
    assert list(tmp_path.iterdir()) == []


def test_append_line_adds_one_line(tmp_path: Path) -> None:
    io.append_line(tmp_path / "log.jsonl", '{"step": 1}')
    io.append_line(tmp_path / "log.jsonl", '{"step": 2}')
    assert (tmp_path / "log.jsonl").read_text() == '{"step": 1}\n{"step": 2}\n'


def is_mine(path: Path) -> bool:
    return (path / "MINE").is_file()


def fill(directory: Path, text: str) -> None:
    """What a writer puts in its directory: a marker of its kind, and plain (not atomic) files in a subdirectory."""
    (directory / "MINE").write_text("")
    (directory / "sub").mkdir()
    (directory / "sub" / "data.txt").write_text(text)


def test_atomic_directory_appears_whole_and_replaces_its_own_kind(tmp_path: Path) -> None:
    out = tmp_path / "parent" / "out"
    with io.atomic_directory(out, is_own=is_mine, what="mine") as tmp:
        assert tmp.parent == out.parent and tmp.name.startswith(".out.tmp-") and not out.exists()
        fill(tmp, "first")
    with io.atomic_directory(out, is_own=is_mine, what="mine") as tmp:
        fill(tmp, "second")
    assert (out / "sub" / "data.txt").read_text() == "second"
    assert [p.name for p in out.parent.iterdir()] == ["out"]  # no temporary or old directory left
    (tmp_path / "empty").mkdir()
    with io.atomic_directory(tmp_path / "empty", is_own=is_mine, what="mine") as tmp:  # an empty one is free
        fill(tmp, "third")
    assert (tmp_path / "empty" / "sub" / "data.txt").read_text() == "third"


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="names the flushed files through Linux's /proc")
def test_atomic_directory_flushes_every_file_and_directory_before_the_rename(tmp_path: Path, monkeypatch) -> None:
    """Plainly written files too: a rename must not publish data that is still only in the page cache."""
    flushed, fsync = [], os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: flushed.append(os.readlink(f"/proc/self/fd/{fd}")) or fsync(fd))
    with io.atomic_directory(tmp_path / "out", is_own=is_mine, what="mine") as tmp:
        fill(tmp, "data")
    t = tmp.name  # the deepest first, the hidden directory itself last, then the parent, after the rename
    expected = [f"{t}/sub/data.txt", f"{t}/sub", f"{t}/MINE", t, "."]
    assert [str(Path(p).relative_to(tmp_path)) for p in flushed] == expected


@pytest.mark.parametrize("failure", [KeyboardInterrupt(), OSError(28, "No space left on device")])
def test_a_failed_build_leaves_the_old_directory_and_no_temporary(tmp_path: Path, failure) -> None:
    out = tmp_path / "out"
    with io.atomic_directory(out, is_own=is_mine, what="mine") as tmp:
        fill(tmp, "good")
    with pytest.raises(type(failure)), io.atomic_directory(out, is_own=is_mine, what="mine") as tmp:
        fill(tmp, "half")
        raise failure
    assert (out / "sub" / "data.txt").read_text() == "good"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


@pytest.mark.parametrize(
    ("make", "there"),
    [
        (lambda p: (p.mkdir(), (p / "notes.txt").write_text("mine")), "a directory with 1 entry"),
        (lambda p: (p.mkdir(), (p / "a").write_text(""), (p / "b").mkdir()), "a directory with 2 entries"),
        (lambda p: p.write_text("mine"), "a file"),
        (lambda p: p.symlink_to("nowhere"), "neither a file nor a directory"),
    ],
)
def test_what_is_not_the_writers_own_is_refused_before_anything_is_written(tmp_path: Path, make, there) -> None:
    out = tmp_path / "out"
    make(out)
    before = sorted((p.name, p.is_dir()) for p in tmp_path.rglob("*"))
    message = f"{out}: exists and is not mine ({there}); choose another path"
    with pytest.raises(UserError) as refused, io.atomic_directory(out, is_own=is_mine, what="mine"):
        pytest.fail("the block ran")
    assert str(refused.value) == message
    assert sorted((p.name, p.is_dir()) for p in tmp_path.rglob("*")) == before
    with pytest.raises(UserError, match="exists and is not mine"):
        io.check_destination(out, is_own=is_mine, what="mine")


def test_leftovers_have_one_name_form_and_only_they_are_removed(tmp_path: Path) -> None:
    kept = {"out", ".hidden", "notes.tmp", ".notes.tmp"}  # a user's files, hidden or not, stay
    for name in kept:
        (tmp_path / name).write_text("")
    io.hidden_sibling(tmp_path / "out", "tmp").mkdir()  # a directory being built
    (io.hidden_sibling(tmp_path / "out", "old") / "x").mkdir(parents=True)  # one moved aside, not yet deleted
    io.hidden_sibling(tmp_path / "model.bin", "tmp").write_text("")  # an atomic file write cut short
    io.hidden_sibling(tmp_path / "last", "tmp").symlink_to("out")  # a link swap cut short
    io.remove_leftovers(tmp_path)
    assert {p.name for p in tmp_path.iterdir()} == kept
