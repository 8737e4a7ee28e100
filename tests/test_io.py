import os
from pathlib import Path

import pytest

from tnmt import io


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
