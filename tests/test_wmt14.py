"""WMT14 fetching, against a local HTTP server serving tiny archives laid out like the real ones.

The checksum tables are replaced by the tiny archives' own sums (the real archives are 1.7 GB); everything
else (URLs relative to the base, member paths, SGM extraction, atomic outputs, resuming) is the real code.
"""

import dataclasses
import gzip
import hashlib
import io
import re
import tarfile
from pathlib import Path

import pytest
from conftest import Server

from tnmt.cli import main
from tnmt.data import wmt14
from tnmt.data.download import Checksum
from tnmt.data.wmt14 import fetch_wmt14
from tnmt.errors import UserError

CORPORA = {  # archive name -> (en, de) text; News Commentary's German side lacks its final newline
    "training-parallel-europarl-v7.tgz": (b"Resumption of the session\n\nThank you.\n", b"Wiederaufnahme\n\nDanke.\n"),
    "training-parallel-commoncrawl.tgz": (b"Hello world\n", b"Hallo Welt\n"),
    "training-parallel-nc-v9.tgz": (b"Gold at $10,000?\nNo.\n", b"Gold zu 10.000 $?\nNein."),
}
SGM = {  # member -> its <seg> texts
    "test/newstest2013-src.en.sgm": ["A  republican strategy", "to counter   Obama"],
    "test/newstest2013-src.de.sgm": ["Eine republikanische Strategie", "gegen Obama"],
    "test-full/newstest2014-deen-src.en.sgm": ["Gutach: Increased safety for pedestrians"],
    "test-full/newstest2014-deen-ref.de.sgm": ["Gutach: Noch mehr Sicherheit für Fußgänger"],
}


def tgz(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def sgm(segments: list[str]) -> bytes:
    lines = ['<srcset setid="newstest" srclang="any">', '<doc docid="1" genre="news" origlang="en">', "<p>"]
    lines += [f'<seg id="{i}"> {text} </seg>' for i, text in enumerate(segments, start=1)]
    return ("\n".join([*lines, "</p>", "</doc>", "</srcset>"]) + "\n").encode()


def archive_bytes(archive: wmt14.Archive) -> bytes:
    """A tiny tarball with `archive`'s layout (its en/de members, plus a member the fetcher must skip)."""
    if archive.name in CORPORA:
        en, de = CORPORA[archive.name]
        return tgz({archive.members["en"]: en, "training/README": b"other languages\n", archive.members["de"]: de})
    return tgz({member: sgm(SGM[member]) for member in archive.members.values()})


@pytest.fixture
def upstream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """upstream/{wmt13,wmt14}/*.tgz, and the module's checksum tables set to these files' sums."""
    root = tmp_path / "upstream"

    def publish(archive: wmt14.Archive) -> wmt14.Archive:
        data = archive_bytes(archive)
        (root / archive.remote).parent.mkdir(parents=True, exist_ok=True)
        (root / archive.remote).write_bytes(data)
        algorithm, size = archive.checksum.algorithm, archive.checksum.size and len(data)  # sizes as published
        checksum = Checksum(algorithm, hashlib.new(algorithm, data).hexdigest(), size)
        return dataclasses.replace(archive, checksum=checksum)

    monkeypatch.setattr(wmt14, "TRAIN", tuple(publish(a) for a in wmt14.TRAIN))
    monkeypatch.setattr(wmt14, "TEST_SETS", {name: publish(a) for name, a in wmt14.TEST_SETS.items()})
    return root


@pytest.fixture
def local_copy(upstream: Path, tmp_path: Path) -> Path:
    """The archives in one flat directory, as `--from DIR` takes them."""
    source = tmp_path / "local"
    source.mkdir()
    for archive in (*wmt14.TRAIN, *wmt14.TEST_SETS.values()):
        (source / archive.name).write_bytes((upstream / archive.remote).read_bytes())
    return source


def replace_europarl(monkeypatch: pytest.MonkeyPatch, source: Path, members: dict[str, bytes]) -> Path:
    """Put a Europarl archive holding `members` in `source`, and its sum in the table."""
    data = tgz(members)
    europarl = dataclasses.replace(wmt14.TRAIN[0], checksum=Checksum("md5", hashlib.md5(data).hexdigest()))
    monkeypatch.setattr(wmt14, "TRAIN", (europarl, *wmt14.TRAIN[1:]))
    (source / europarl.name).write_bytes(data)
    return source / europarl.name


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


def expected_outputs() -> dict[str, bytes]:
    en = b"".join(text[0] if text[0].endswith(b"\n") else text[0] + b"\n" for text in CORPORA.values())
    de = b"".join(text[1] if text[1].endswith(b"\n") else text[1] + b"\n" for text in CORPORA.values())
    return {
        "train.en.gz": en,
        "train.de.gz": de,
        "newstest2013.en": b"A republican strategy\nto counter Obama\n",
        "newstest2013.de": b"Eine republikanische Strategie\ngegen Obama\n",
        "newstest2014.en": b"Gutach: Increased safety for pedestrians\n",
        "newstest2014.de": "Gutach: Noch mehr Sicherheit für Fußgänger\n".encode(),
    }


def outputs(out: Path) -> dict[str, bytes]:
    """Every file in `out` but the downloads, decompressed."""
    files = [p for p in out.iterdir() if p.is_file()]
    return {p.name: gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes() for p in files}


ALL_REMOTES = sorted(f"/{a.remote}" for a in (*wmt14.TRAIN, *wmt14.TEST_SETS.values()))


def test_download_extracts_aligned_text_and_a_rerun_is_free(upstream, http_server, tmp_path, caplog) -> None:
    server: Server = http_server(upstream)
    caplog.set_level("INFO", logger="tnmt")
    out = fetch_wmt14(tmp_path / "wmt14", source=server.url)
    assert outputs(out) == expected_outputs()
    assert sorted(server.requests) == ALL_REMOTES
    assert sorted(p.name for p in (out / "downloads").iterdir()) == sorted(r.rsplit("/", 1)[1] for r in ALL_REMOTES)
    assert not list(out.rglob(".*")) and not list(out.rglob("*.part")), "temporary files left behind"
    size = sum(a.checksum.size for a in wmt14.TRAIN) / 1e6
    assert caplog.records[0].getMessage() == (
        f"downloading 5 WMT14 archives ({size:.0f} MB, plus the test archives) from {server.url} "
        f"into {out / 'downloads'}"
    )
    assert "training-parallel-nc-v9.tgz: 2 sentence pairs" in caplog.text

    server.requests.clear()
    stamps = {p: p.stat().st_mtime_ns for p in out.iterdir()}
    assert fetch_wmt14(out, source=server.url) == out
    assert server.requests == [] and stamps == {p: p.stat().st_mtime_ns for p in out.iterdir()}


@pytest.mark.parametrize("ranges", [True, False], ids=["server-resumes", "server-ignores-range"])
def test_an_interrupted_download_resumes(upstream, http_server, tmp_path, ranges) -> None:
    server: Server = http_server(upstream, ranges=ranges)
    downloads = tmp_path / "wmt14" / "downloads"
    downloads.mkdir(parents=True)
    whole = (upstream / "wmt13" / "training-parallel-commoncrawl.tgz").read_bytes()
    (downloads / "training-parallel-commoncrawl.tgz.part").write_bytes(whole[:100])
    out = fetch_wmt14(tmp_path / "wmt14", source=server.url)
    assert server.range_headers == ["bytes=100-"]
    assert (downloads / "training-parallel-commoncrawl.tgz").read_bytes() == whole
    assert outputs(out) == expected_outputs()


def test_a_checksum_mismatch_is_one_line_and_leaves_nothing_half_written(upstream, http_server, tmp_path) -> None:
    server: Server = http_server(upstream)
    nc = upstream / "wmt14" / "training-parallel-nc-v9.tgz"
    nc.write_bytes(tgz({member: b"x\n" for member in wmt14.TRAIN[2].members.values()}))
    url = f"{server.url}/wmt14/training-parallel-nc-v9.tgz"
    out = tmp_path / "wmt14"
    with pytest.raises(UserError, match=f"^{re.escape(url)}: .*not the WMT14 file, or corrupted on the way$") as err:
        fetch_wmt14(out, source=server.url)
    assert "\n" not in str(err.value)
    assert sorted(p.name for p in out.rglob("*")) == [  # only the two verified archives
        "downloads",
        "training-parallel-commoncrawl.tgz",
        "training-parallel-europarl-v7.tgz",
    ]


def test_misaligned_corpus_or_missing_member_writes_nothing(local_copy, tmp_path, monkeypatch) -> None:
    source = local_copy
    en, de = wmt14.TRAIN[0].members["en"], wmt14.TRAIN[0].members["de"]
    path = replace_europarl(monkeypatch, source, {en: b"one\ntwo\n", de: b"eins\n"})
    message = f"{path}: training/europarl-v7.de-en.en has 2 lines but training/europarl-v7.de-en.de has 1; "
    with pytest.raises(UserError, match=f"^{re.escape(message)}the corpus is not line-aligned$"):
        fetch_wmt14(tmp_path / "out", source=source)
    assert list((tmp_path / "out").iterdir()) == []

    path = replace_europarl(monkeypatch, source, {en: b"one\n"})
    message = f"{path}: no member training/europarl-v7.de-en.de; not the WMT14 archive {path.name}"
    with pytest.raises(UserError, match=f"^{re.escape(message)}$"):
        fetch_wmt14(tmp_path / "out", source=source)
    assert list((tmp_path / "out").iterdir()) == []


def test_local_copy_is_verified_and_used_in_place(local_copy, tmp_path) -> None:
    source = local_copy
    out = fetch_wmt14(tmp_path / "out", source=source)
    assert outputs(out) == expected_outputs() and not (out / "downloads").exists()

    (out / "newstest2014.de").unlink()  # only that test set is redone, from a copy that is now corrupt
    test_full = source / "test-full.tgz"
    test_full.write_bytes(b"truncated")
    with pytest.raises(UserError, match=f"^{re.escape(str(test_full))}: md5 mismatch \\(expected [0-9a-f]{{32}}, got "):
        fetch_wmt14(out, source=source)
    with pytest.raises(UserError, match="only http"):
        fetch_wmt14(out, source="ftp://example.org/wmt")


def test_published_checksums_are_well_formed() -> None:
    archives = (*wmt14.TRAIN, *wmt14.TEST_SETS.values())
    lengths = {"sha256": 64, "md5": 32}
    assert all(re.fullmatch(f"[0-9a-f]{{{lengths[a.checksum.algorithm]}}}", a.checksum.digest) for a in archives)
    assert all(a.checksum.size for a in wmt14.TRAIN) and len({a.name for a in archives}) == 5


def test_cli(local_copy, tmp_path, capsys) -> None:
    source = local_copy
    out = tmp_path / "out"
    assert main(["data", "wmt14", "--out", str(out), "--from", str(source)]) == 0
    assert outputs(out) == expected_outputs()
    assert capsys.readouterr().out == (
        f"WMT14 en-de in {out}: train.{{en,de}}.gz, newstest2013.{{en,de}} (dev), newstest2014.{{en,de}} (test)\n"
    )
    assert main(["data", "wmt14", "--out", str(out), "--langs", "en"]) == 2
    assert capsys.readouterr().err == "tnmt data: error: --langs is for multi30k; wmt14 is English-German\n"
