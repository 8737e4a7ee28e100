"""Multi30k fetching, against a local HTTP server (conftest's `http_server`) laid out like upstream's `data/task1`,
and how the tests themselves find a copy (conftest's `local_multi30k`)."""

import gzip
import hashlib
import logging
import re
import shutil
import socket
from pathlib import Path

import pytest
from conftest import NO_COMPLETE_MULTI30K, NO_MULTI30K, Server, local_multi30k

from tnmt.data import download, multi30k
from tnmt.data.corpus import read_lines
from tnmt.data.multi30k import fetch_multi30k, find_multi30k, multi30k_paths
from tnmt.errors import UserError

SPLITS = ("train", "val", "test_2016_flickr")


@pytest.fixture(scope="module")
def server(complete_multi30k_dir: Path, tmp_path_factory: pytest.TempPathFactory, http_server) -> Server:
    """Serves `good/` (en, de and upstream's layout: raw gz, tok uncompressed) and `bad/` (corrupt)."""
    root = tmp_path_factory.mktemp("upstream")
    (root / "good" / "raw").mkdir(parents=True)
    (root / "good" / "tok").mkdir()
    for split in SPLITS:
        for lang in ("en", "de"):
            shutil.copy(complete_multi30k_dir / f"{split}.{lang}.gz", root / "good" / "raw")
            tok = gzip.decompress((complete_multi30k_dir / "tok" / f"{split}.lc.norm.tok.{lang}.gz").read_bytes())
            (root / "good" / "tok" / f"{split}.lc.norm.tok.{lang}").write_bytes(tok)
    (root / "bad" / "raw").mkdir(parents=True)
    (root / "bad" / "raw" / "val.en.gz").write_bytes(gzip.compress(b"not the captions\n"))
    return http_server(root)


@pytest.fixture(autouse=True)
def isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test may see the user's data or cache settings, or go through a proxy to 127.0.0.1."""
    monkeypatch.delenv("TNMT_DATA_DIR", raising=False)
    monkeypatch.setenv("TNMT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_download_checks_gzips_tok_and_is_idempotent(
    server: Server, complete_multi30k_dir: Path, tmp_path: Path
) -> None:
    server.requests.clear()
    out = fetch_multi30k(tmp_path / "m30k", source=f"{server.url}/good")
    assert sorted(server.requests) == sorted(
        [f"/good/raw/{s}.{lang}.gz" for s in SPLITS for lang in ("en", "de")]
        + [f"/good/tok/{s}.lc.norm.tok.{lang}" for s in SPLITS for lang in ("en", "de")]
    )
    for split in SPLITS:
        for lang in ("en", "de"):
            raw = f"{split}.{lang}.gz"
            assert (out / raw).read_bytes() == (complete_multi30k_dir / raw).read_bytes()
            tok = f"tok/{split}.lc.norm.tok.{lang}.gz"
            assert read_lines(out / tok) == read_lines(complete_multi30k_dir / tok)
    assert not list(out.rglob(".*")), "temporary files left behind"

    server.requests.clear()
    assert fetch_multi30k(out, source=f"{server.url}/good") == out
    assert server.requests == []


def test_download_replaces_a_corrupt_local_file(server: Server, multi30k_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "val.en.gz").write_bytes(b"truncated")
    server.requests.clear()
    fetch_multi30k(tmp_path, source=f"{server.url}/good", langs=("en",), splits=("val",), tok=False)
    assert server.requests == ["/good/raw/val.en.gz"]
    assert (tmp_path / "val.en.gz").read_bytes() == (multi30k_dir / "val.en.gz").read_bytes()


def test_a_download_is_announced_first_with_its_source_and_size(server: Server, tmp_path: Path, caplog) -> None:
    caplog.set_level("INFO", logger="tnmt")
    fetch_multi30k(tmp_path, source=f"{server.url}/good", langs=("en", "de"))
    [record] = caplog.records
    assert record.getMessage() == f"downloading 12 Multi30k files (about 6 MB) from {server.url}/good into {tmp_path}"
    caplog.clear()
    fetch_multi30k(tmp_path, source=f"{server.url}/good", langs=("en", "de"))  # all present: nothing to say
    assert not caplog.records


def test_download_with_wrong_checksum(server: Server, tmp_path: Path) -> None:
    url = f"{server.url}/bad/raw/val.en.gz"
    with pytest.raises(UserError, match=f"^{re.escape(url)}: sha256 mismatch") as err:
        fetch_multi30k(tmp_path, source=f"{server.url}/bad", langs=("en",), splits=("val",), tok=False)
    assert "\n" not in str(err.value)
    assert not list(tmp_path.iterdir()), "a file failing its checksum must not be kept"


def test_download_missing_file_is_one_line_error(server: Server, tmp_path: Path) -> None:
    url = f"{server.url}/bad/raw/val.de.gz"
    with pytest.raises(UserError, match=f"^cannot download Multi30k from {re.escape(url)}: HTTP 404"):
        fetch_multi30k(tmp_path, source=f"{server.url}/bad", langs=("de",), splits=("val",), tok=False)


def test_unreachable_server_fails_with_one_line(tmp_path: Path) -> None:
    base = closed_port_url()
    with pytest.raises(UserError) as err:
        fetch_multi30k(tmp_path, source=base)
    message = str(err.value)
    assert message.startswith(f"cannot download Multi30k from {base}/raw/train.en.gz: ")
    # "refused", not "no connection within 10 s": the closed port is reported at once, not after the timeout
    assert message.endswith("Connection refused; set TNMT_DATA_DIR to a local copy or pass --from DIR")
    assert "\n" not in message


def test_silent_server_times_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(download, "TIMEOUT", (1, 0.5))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()  # the kernel completes the connection, nobody ever answers
        with pytest.raises(UserError, match="val.en.gz: the server sent nothing for 0.5 s; set TNMT_"):
            fetch_multi30k(tmp_path, source=f"http://127.0.0.1:{sock.getsockname()[1]}", langs=("en",), splits=("val",))


def test_copy_from_local_directory_is_verified_and_idempotent(complete_multi30k_dir: Path, tmp_path: Path) -> None:
    out = fetch_multi30k(tmp_path / "m30k", source=complete_multi30k_dir, langs=("en", "fr"))
    copied = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.gz"))
    assert copied == sorted(
        [f"{s}.{lang}.gz" for s in SPLITS for lang in ("en", "fr")]
        + [f"tok/{s}.lc.norm.tok.{lang}.gz" for s in SPLITS for lang in ("en", "fr")]
    )
    assert all((out / name).read_bytes() == (complete_multi30k_dir / name).read_bytes() for name in copied)
    stamps = {name: (out / name).stat().st_mtime_ns for name in copied}
    fetch_multi30k(out, source=complete_multi30k_dir, langs=("en", "fr"))
    assert stamps == {name: (out / name).stat().st_mtime_ns for name in copied}


def test_copy_with_wrong_checksum_names_the_file(multi30k_dir: Path, tmp_path: Path) -> None:
    source = tmp_path / "copy"
    (source / "tok").mkdir(parents=True)
    shutil.copy(multi30k_dir / "val.en.gz", source)
    (source / "tok" / "val.lc.norm.tok.en.gz").write_bytes(gzip.compress(b"a different text\n"))
    bad = source / "tok" / "val.lc.norm.tok.en.gz"
    with pytest.raises(UserError, match=f"^{re.escape(str(bad))}: sha256 mismatch"):
        fetch_multi30k(tmp_path / "out", source=source, langs=("en",), splits=("val",))
    with pytest.raises(UserError, match=f"^{re.escape(str(source / 'val.de.gz'))}: no such file$"):
        fetch_multi30k(tmp_path / "out", source=source, langs=("de",), splits=("val",), tok=False)


def test_unknown_names_and_missing_tok_sums(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no language 'es'; choose from en, de, fr, cs"):
        fetch_multi30k(tmp_path, langs=("es",))
    with pytest.raises(UserError, match="no split 'test_2017'"):
        multi30k_paths(tmp_path, "test_2017", "en", "de")
    with pytest.raises(UserError, match="no tokenised references for cs; pass tok=False"):
        fetch_multi30k(tmp_path, langs=("en", "cs"))
    with pytest.raises(UserError, match="only http"):
        fetch_multi30k(tmp_path, source="ftp://example.org/task1")


def test_multi30k_paths(tmp_path: Path) -> None:
    assert multi30k_paths(tmp_path, "val", "de", "en") == (tmp_path / "val.de.gz", tmp_path / "val.en.gz")


def test_find_prefers_tnmt_data_dir(
    complete_multi30k_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TNMT_DATA_DIR", str(complete_multi30k_dir))
    assert find_multi30k(download=False) == complete_multi30k_dir
    assert find_multi30k(download=False, langs=("en", "cs")) == complete_multi30k_dir  # no tokenised Czech: not needed
    broken = tmp_path / "broken"
    broken.mkdir()
    monkeypatch.setenv("TNMT_DATA_DIR", str(broken))
    with pytest.raises(UserError, match=f"^{re.escape(str(broken / 'train.en.gz'))}: no such file"):
        find_multi30k()


def test_find_uses_complete_cache_else_downloads_into_it(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache" / "multi30k"
    assert find_multi30k(download=False) is None
    monkeypatch.setattr(multi30k, "UPSTREAM_URL", f"{server.url}/good")
    server.requests.clear()
    assert find_multi30k() == cache
    assert len(server.requests) == 6  # the raw text of 3 splits x 2 languages: training needs no tokenised files
    server.requests.clear()
    assert find_multi30k(download=False) == cache
    assert find_multi30k() == cache
    assert server.requests == []


def test_find_returns_none_when_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(multi30k, "UPSTREAM_URL", closed_port_url())
    with caplog.at_level(logging.WARNING, logger="tnmt.data.multi30k"):
        assert find_multi30k() is None
    assert "cannot download Multi30k from" in caplog.text


def test_the_tests_find_the_copy_the_demo_downloaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """TNMT_DATA_DIR, else the shared copy, else ~/.cache/tnmt/multi30k as `make demo` leaves it (en-de's raw
    text), verified by the sums; else one line on how to get one. Fake files, their sums patched in: no download."""
    fake = {
        f"{s}.{lang}.gz": gzip.compress(f"{s} {lang}\n".encode(), mtime=0) for s in SPLITS for lang in multi30k.LANGS
    }
    monkeypatch.setattr(multi30k, "RAW_SHA256", {name: hashlib.sha256(data).hexdigest() for name, data in fake.items()})
    monkeypatch.delenv("TNMT_CACHE_DIR")  # the default cache, in a home of the test's own
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    cache, shared, no_shared = tmp_path / "home" / ".cache" / "tnmt" / "multi30k", tmp_path / "shared", tmp_path / "no"

    def skipped(*, complete: bool) -> str:
        with pytest.raises(pytest.skip.Exception) as skip:
            local_multi30k(complete=complete, shared=no_shared)
        return skip.value.msg

    assert skipped(complete=False) == NO_MULTI30K and "\n" not in NO_MULTI30K
    cache.mkdir(parents=True)
    for name in [f"{s}.{lang}.gz" for s in SPLITS for lang in ("en", "de")]:  # what the demo downloads
        (cache / name).write_bytes(fake[name])
    assert local_multi30k(complete=False, shared=no_shared) == cache
    assert skipped(complete=True) == NO_COMPLETE_MULTI30K  # no fr, cs or tokenised references in it
    (cache / "val.de.gz").write_bytes(fake["val.en.gz"])  # corrupt: not used
    assert skipped(complete=False) == NO_MULTI30K
    (cache / "val.de.gz").write_bytes(fake["val.de.gz"])
    shared.mkdir()  # a shared copy comes first, and must be whole: it was meant
    with pytest.raises(
        pytest.fail.Exception, match=f"^Multi30k copy {shared}: {shared / 'train.en.gz'}: no such file$"
    ):
        local_multi30k(complete=False, shared=shared)
    shutil.copytree(cache, shared, dirs_exist_ok=True)
    assert local_multi30k(complete=False, shared=shared) == shared
    monkeypatch.setenv("TNMT_DATA_DIR", str(cache))  # before both
    assert local_multi30k(complete=False, shared=shared) == cache
