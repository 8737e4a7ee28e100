"""WMT14 English-German, the paper's corpus (section 5.1): about 4.5M training pairs, newstest2013, newstest2014.

The standard files (those of the WMT14 news task, as in fairseq's `prepare-wmt14en2de.sh`): the Europarl v7,
Common Crawl and News Commentary v9 training archives, WMT13's test archive for newstest2013 (development)
and WMT14's *full* test archive for newstest2014 (3003 sentences; sacreBLEU's `wmt14` is the filtered
2737-sentence subset, `wmt14/full` is this one). `fetch_wmt14` downloads them (or takes a local copy),
checks them, and extracts the en-de pairs as the `files` corpus of `configs/wmt14_en_de_*.toml` reads them::

    train.en.gz, train.de.gz            Europarl + Common Crawl + News Commentary, concatenated, line-aligned
    newstest2013.en, newstest2013.de    development set (plain text from the SGM files)
    newstest2014.en, newstest2014.de    test set (the paper's BLEU is measured on it)
    downloads/*.tgz                     the archives, kept so that a rerun is free (about 1.7 GB)

Checksums are published ones, never computed here: the training archives' sha256 and sizes are those of
TensorFlow Datasets' `url_checksums/wmt14_translate.txt`, the test archives' md5 those of sacreBLEU's
dataset table (`wmt13`, `wmt14/full`); no sha256 is published for the two test archives.
Every output file is written atomically once all of its input is read and checked, so a file under its
final name is complete; an interrupted run resumes (archives already downloaded or half downloaded are
reused, outputs already written are kept).
"""

import gzip
import logging
import re
import tarfile
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from tnmt.data.download import CHUNK, Checksum, download, is_url
from tnmt.errors import UserError
from tnmt.io import atomic_open, check_output_directory

UPSTREAM_URL = "https://www.statmt.org"  # the archives' paths below are relative to it
LANGS = ("en", "de")


@dataclass(frozen=True)
class Archive:
    """One upstream tarball and the en/de members this data set takes from it."""

    remote: str  # path under UPSTREAM_URL; the local name is its last part
    checksum: Checksum
    members: dict[str, str]  # language -> member path inside the tarball

    @property
    def name(self) -> str:
        return self.remote.rsplit("/", 1)[1]


TRAIN = (
    Archive(
        "wmt13/training-parallel-europarl-v7.tgz",
        Checksum("sha256", "0224c7c710c8a063dfd893b0cc0830202d61f4c75c17eb8e31836103d27d96e7", 657_632_379),
        {"en": "training/europarl-v7.de-en.en", "de": "training/europarl-v7.de-en.de"},
    ),
    Archive(
        "wmt13/training-parallel-commoncrawl.tgz",
        Checksum("sha256", "c7a74e2ea01ac6c920123108627e35278d4ccb5701e15428ffa34de86fa3a9e5", 918_311_367),
        {"en": "commoncrawl.de-en.en", "de": "commoncrawl.de-en.de"},
    ),
    Archive(
        "wmt14/training-parallel-nc-v9.tgz",
        Checksum("sha256", "cb8953f292298e6877ae433c98912b927cb0766b303f4540512ddd286c748485", 80_418_416),
        {"en": "training/news-commentary-v9.de-en.en", "de": "training/news-commentary-v9.de-en.de"},
    ),
)
TEST_SETS = {
    "newstest2013": Archive(
        "wmt13/test.tgz",
        Checksum("md5", "48eca5d02f637af44e85186847141f67"),
        {"en": "test/newstest2013-src.en.sgm", "de": "test/newstest2013-src.de.sgm"},
    ),
    "newstest2014": Archive(
        "wmt14/test-full.tgz",
        Checksum("md5", "a8cd784e006feb32ac6f3d9ec7eb389a"),
        {"en": "test-full/newstest2014-deen-src.en.sgm", "de": "test-full/newstest2014-deen-ref.de.sgm"},
    ),
}

logger = logging.getLogger(__name__)


def fetch_wmt14(out_dir: str | Path, *, source: str | Path | None = None) -> Path:
    """Put the WMT14 en-de training, development and test text in `out_dir` (layout in the module docstring).

    Args:
        out_dir: Destination, created if needed. Outputs already there are kept (they are only ever
            written whole), so a second call does nothing.
        source: A directory holding the tarballs under their upstream names (used in place, checked),
            or a base URL laid out like upstream (`{source}/wmt13/test.tgz` ...). Defaults to upstream.

    Returns:
        `out_dir`.

    Raises:
        UserError: One line: a download that failed, an archive with the wrong checksum or without an
            expected member, a corpus whose en and de sides have different line counts, or a file at `out_dir`.
    """
    out_dir = Path(out_dir)
    check_output_directory(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    source = UPSTREAM_URL if source is None else source
    remote = is_url(source, name="WMT14")
    todo = {"train": TRAIN, **{name: (archive,) for name, archive in TEST_SETS.items()}}
    todo = {name: archives for name, archives in todo.items() if not _outputs_exist(out_dir, name)}
    needed = [archive for archives in todo.values() for archive in archives]
    if remote:
        _announce([a for a in needed if not (out_dir / "downloads" / a.name).exists()], source, out_dir)

    def tarball(archive: Archive) -> Path:
        if remote:
            return _downloaded(archive, source, out_dir / "downloads")
        path = Path(source) / archive.name
        if problem := archive.checksum.problem(path):
            raise UserError(f"{path}: {problem}")
        return path

    for name, archives in todo.items():
        if name == "train":
            _extract_training([(archive, tarball(archive)) for archive in archives], out_dir)
        else:
            _extract_test_set(name, archives[0], tarball(archives[0]), out_dir)
    return out_dir


def _outputs_exist(out_dir: Path, name: str) -> bool:
    suffix = ".gz" if name == "train" else ""
    return all((out_dir / f"{name}.{lang}{suffix}").is_file() for lang in LANGS)


def _announce(archives: list[Archive], source: str, out_dir: Path) -> None:
    """Never download silently: say what, from where, to where, and how much where that is published."""
    if not archives:
        return
    known = sum(a.checksum.size or 0 for a in archives)
    size = f" ({known / 1e6:.0f} MB, plus the test archives)" if known else ""
    logger.info(f"downloading {len(archives)} WMT14 archives{size} from {source} into {out_dir / 'downloads'}")


def _downloaded(archive: Archive, base: str, directory: Path) -> Path:
    """The verified tarball in `directory`, downloaded (or its download resumed) unless already there."""
    path = directory / archive.name
    if path.exists() and archive.checksum.problem(path) is None:
        return path
    url = f"{base.rstrip('/')}/{archive.remote}"
    return download(url, path, archive.checksum, name="WMT14", hint="pass --from DIR with the archives")


def _extract_training(archives: list[tuple[Archive, Path]], out_dir: Path) -> None:
    """train.{en,de}.gz: each archive's two members appended in turn, their line counts checked to match."""
    with ExitStack() as stack:  # an error anywhere removes both half-written files
        outputs = {}
        for lang in LANGS:
            file = stack.enter_context(atomic_open(out_dir / f"train.{lang}.gz"))
            # Level 1: written once, read by `tnmt prepare`; 3x faster than the default for ~20% more bytes.
            outputs[lang] = stack.enter_context(gzip.GzipFile(fileobj=file, mode="wb", compresslevel=1, mtime=0))
        for archive, path in archives:
            lines = {}
            for lang, stream in _members(archive, path):
                lines[lang] = _copy_lines(stream, outputs[lang])
            if lines["en"] != lines["de"]:
                raise UserError(
                    f"{path}: {archive.members['en']} has {lines['en']} lines but {archive.members['de']} has "
                    f"{lines['de']}; the corpus is not line-aligned"
                )
            logger.info(f"{archive.name}: {lines['en']} sentence pairs")


def _extract_test_set(name: str, archive: Archive, path: Path, out_dir: Path) -> None:
    """{name}.{en,de}: the <seg> lines of the SGM files, as sacreBLEU reads them (whitespace collapsed)."""
    texts = {lang: _segments(stream.read().decode("utf-8")) for lang, stream in _members(archive, path)}
    if len(texts["en"]) != len(texts["de"]):
        raise UserError(f"{path}: {len(texts['en'])} English but {len(texts['de'])} German segments in {name}")
    with ExitStack() as stack:
        for lang in LANGS:
            stack.enter_context(atomic_open(out_dir / f"{name}.{lang}")).write("".join(texts[lang]).encode("utf-8"))
    logger.info(f"{name}: {len(texts['en'])} sentence pairs")


def _members(archive: Archive, path: Path) -> Iterator[tuple[str, BinaryIO]]:
    """(language, stream) for each member of `archive` this data set needs, in one pass over the tarball."""
    wanted = {member: lang for lang, member in archive.members.items()}
    try:
        with tarfile.open(path, "r:gz") as tar:
            for info in tar:
                if info.name in wanted and info.isfile():
                    yield wanted.pop(info.name), tar.extractfile(info)
    except (tarfile.TarError, EOFError, OSError) as err:
        raise UserError(f"{path}: not a readable .tgz archive ({err})") from None
    if wanted:
        raise UserError(f"{path}: no member {sorted(wanted)[0]}; not the WMT14 archive {archive.name}")


def _copy_lines(stream: BinaryIO, out: BinaryIO) -> int:
    """Copy `stream` to `out` ending it with a newline; return its number of lines."""
    lines, last = 0, b"\n"
    while chunk := stream.read(CHUNK):
        out.write(chunk)
        lines += chunk.count(b"\n")
        last = chunk[-1:]
    if last != b"\n":
        out.write(b"\n")
        lines += 1
    return lines


def _segments(sgm: str) -> list[str]:
    """The text of each `<seg ...>text</seg>` line, whitespace collapsed, newline-terminated (sacreBLEU's rule)."""
    return [
        " ".join(re.sub(r"<seg.*?>(.*)</seg>.*?", r"\1", line).split()) + "\n"
        for line in sgm.split("\n")
        if line.startswith("<seg ")
    ]
