"""Multi30k task 1 (Elliott et al., 2016): image captions in en, de, fr and cs, 29k training pairs.

Small enough to train a Transformer on a laptop in an hour, which is why the quickstart uses it. The
files come from the authors' repository (or a local copy laid out like it) and are checked against
the sha256 sums below, so every run trains and evaluates on exactly the same bytes.

Layout of a local copy (what `fetch_multi30k` writes and `TNMT_DATA_DIR` points to)::

    {split}.{lang}.gz                      raw captions, e.g. train.de.gz
    tok/{split}.lc.norm.tok.{lang}.gz      lower-cased, normalised, Moses-tokenised references

Upstream serves the raw files gzipped but the tokenised ones uncompressed, so a tokenised file is
identified by the sha256 of its *decompressed* content: the same sum then checks a download and a
gzipped local copy.
"""

import gzip
import hashlib
import logging
import os
import tempfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tnmt.data.download import Checksum, download, is_url
from tnmt.errors import UserError
from tnmt.io import atomic_write_bytes, check_output_directory

UPSTREAM_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1"
LANGS = ("en", "de", "fr", "cs")
SPLITS = ("train", "val", "test_2016_flickr")
MB_PER_LANG = {"raw": 0.7, "tok": 2.3}  # download size of one language's three splits (tok: uncompressed)

# sha256 of the gzipped raw files, identical to upstream's `raw/` folder.
RAW_SHA256 = {
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.fr.gz": "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
    "train.cs.gz": "a65adb8b32e3bc664f21ecba7a6e7f6950fd1f405e135f7c312faabdb6255077",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.fr.gz": "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
    "val.cs.gz": "b63226e05c4bd5dd6a42897d74b86a1b9d2c31498252c572b1ea7f7996927fcc",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.fr.gz": "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90",
    "test_2016_flickr.cs.gz": "200a4a74cc9560f051924abb9803be008d1908d77f747e9141aeb86dfd2797f1",
}

# sha256 of the *uncompressed* tokenised references (upstream `tok/` folder). Computed from the
# decompressed shared local copy, whose content is that of upstream; no sums are known for cs.
TOK_SHA256 = {
    "train.lc.norm.tok.en": "08925f8e0572bcd5a006702fc5fe20e2d77c6917d4eebd576fc20de6693c2119",
    "train.lc.norm.tok.de": "cb5a23529b65ec2061f1dc446192a9c37382b63cc75f81a0be59d34894b3a505",
    "train.lc.norm.tok.fr": "8fa41bb718412bcb7c5dfa58603842810a01543eae86a51279f9886b901266e1",
    "val.lc.norm.tok.en": "46573ce391ae227f1c72f873392436a20ef18e0a6d518098cfbd70b77c8572ec",
    "val.lc.norm.tok.de": "97232bd273eceb7207f689527386a97e4be2616b18ada47576bdaf96c8ae1f00",
    "val.lc.norm.tok.fr": "b303e301aa21fe7822a846b2b3fb2d5a1121ec807cd5b1d006fb7b2b5507168a",
    "test_2016_flickr.lc.norm.tok.en": "5b7f32627cf99eced828311b955dae9800bb52bc8b91cf8b6526829e605b29d2",
    "test_2016_flickr.lc.norm.tok.de": "c6a33d39d48f9f510de147651316cd9d918e09ad0219df734a2f16b6baccacc4",
    "test_2016_flickr.lc.norm.tok.fr": "1463bd5960f9bfe098ec3cd752d3df0c49c84dc646fb518964a29232658cd836",
}

TOKENISED_LANGS = tuple(sorted({name.rsplit(".", 1)[1] for name in TOK_SHA256}))  # en, de, fr: not cs

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _File:
    """One file of the data set: where it lives locally and upstream, and its checksum."""

    local: str  # path relative to a local copy
    remote: str  # path relative to the upstream `data/task1` folder
    sha256: str
    of_content: bool  # the sum is of the decompressed content (a tokenised file), not of the .gz


def multi30k_paths(root: str | Path, split: str, src_lang: str, tgt_lang: str) -> tuple[Path, Path]:
    """The raw source and target files of `split` in a local copy, e.g. `(root/train.en.gz, ...)`."""
    _check_names(langs=(src_lang, tgt_lang), splits=(split,))
    root = Path(root)
    return root / f"{split}.{src_lang}.gz", root / f"{split}.{tgt_lang}.gz"


def fetch_multi30k(
    out_dir: str | Path,
    *,
    source: str | Path | None = None,
    langs: Sequence[str] = ("en", "de"),
    splits: Sequence[str] = SPLITS,
    tok: bool = True,
) -> Path:
    """Put a verified copy of the requested files in `out_dir`.

    Files already in `out_dir` with the right checksum are left alone, so a second call is free.

    Args:
        out_dir: Destination, created if needed.
        source: A local copy (a directory laid out like `out_dir`), or an http(s) URL laid out like
            upstream's `data/task1` (`{source}/raw/train.en.gz`, `{source}/tok/train.lc.norm.tok.en`).
            Defaults to upstream.
        langs: Languages among `LANGS`.
        splits: Splits among `SPLITS`.
        tok: Also fetch the tokenised references (not available for cs).

    Returns:
        `out_dir`.

    Raises:
        UserError: An unknown language or split, a source file that is missing or has the wrong
            checksum (naming it), a download that failed (naming the URL and the reason), or a file at
            `out_dir`.
    """
    out_dir = Path(out_dir)
    check_output_directory(out_dir)
    todo = [f for f in _files(langs, splits, tok=tok) if _problem(out_dir / f.local, f) is not None]
    source = UPSTREAM_URL if source is None else source
    remote = is_url(source, name="Multi30k")
    if remote and todo:  # never download silently: say what, from where, to where, how much
        size = sum(MB_PER_LANG["tok" if f.of_content else "raw"] / len(SPLITS) for f in todo)
        logger.info(f"downloading {len(todo)} Multi30k files (about {size:.0f} MB) from {source} into {out_dir}")
    for f in todo:
        dest = out_dir / f.local
        dest.parent.mkdir(parents=True, exist_ok=True)
        if remote:
            data = _download(f"{source.rstrip('/')}/{f.remote}", f)
        else:
            data = _copy(Path(source) / f.local, f)
        atomic_write_bytes(dest, data)
    return out_dir


def find_multi30k(*, download: bool = True, langs: Sequence[str] = ("en", "de"), tok: bool = False) -> Path | None:
    """Where a command finds Multi30k, without the user having to say.

    In order: the local copy named by `TNMT_DATA_DIR` (verified, used in place), the cache
    (`$TNMT_CACHE_DIR/multi30k`, default `~/.cache/tnmt/multi30k`) if it holds every file, else a
    download into the cache. A failed download is logged and gives None rather than an error, so
    that the quickstart can fall back to a task generated offline. Training needs only the raw text;
    `tok` also requires the tokenised references (which Multi30k lacks for cs).

    Raises:
        UserError: `TNMT_DATA_DIR` is set but a file there is missing or corrupt: the user asked
            for that copy, so silently using another would hide the problem.
    """
    if local := os.environ.get("TNMT_DATA_DIR"):
        if problem := copy_problem(local, langs=langs, tok=tok):
            raise UserError(f"{problem} (TNMT_DATA_DIR={local})")
        return Path(local)
    cache = multi30k_cache()
    if copy_problem(cache, langs=langs, tok=tok) is None:
        return cache
    if not download:
        return None
    try:
        return fetch_multi30k(cache, langs=langs, tok=tok)
    except UserError as err:
        logger.warning("%s", err)
        return None


def multi30k_cache() -> Path:
    """Where `find_multi30k` downloads Multi30k: `$TNMT_CACHE_DIR/multi30k`, default `~/.cache/tnmt/multi30k`."""
    return Path(os.environ.get("TNMT_CACHE_DIR") or Path.home() / ".cache" / "tnmt") / "multi30k"


def copy_problem(root: str | Path, *, langs: Sequence[str] = ("en", "de"), tok: bool = False) -> str | None:
    """Why `root` is not a verified local copy of the files of `langs` (every split), as "PATH: reason" for the
    first bad file (missing, or failing its sha256 sum), or None if it is one. `tok`: the tokenised references too.
    """
    for f in _files(langs, SPLITS, tok=tok):
        if problem := _problem(Path(root) / f.local, f):
            return f"{Path(root) / f.local}: {problem}"
    return None


def _files(langs: Sequence[str], splits: Sequence[str], *, tok: bool) -> list[_File]:
    _check_names(langs=langs, splits=splits)
    files = [
        _File(f"{s}.{lang}.gz", f"raw/{s}.{lang}.gz", RAW_SHA256[f"{s}.{lang}.gz"], of_content=False)
        for s in splits
        for lang in langs
    ]
    if tok:
        if missing := sorted({lang for lang in langs if f"train.lc.norm.tok.{lang}" not in TOK_SHA256}):
            raise UserError(f"Multi30k has no tokenised references for {', '.join(missing)}; pass tok=False")
        for s in splits:
            for lang in langs:
                name = f"{s}.lc.norm.tok.{lang}"
                files.append(_File(f"tok/{name}.gz", f"tok/{name}", TOK_SHA256[name], of_content=True))
    return files


def _check_names(*, langs: Sequence[str], splits: Sequence[str]) -> None:
    for lang in langs:
        if lang not in LANGS:
            raise UserError(f"Multi30k has no language {lang!r}; choose from {', '.join(LANGS)}")
    for split in splits:
        if split not in SPLITS:
            raise UserError(f"Multi30k has no split {split!r}; choose from {', '.join(SPLITS)}")


def _problem(path: Path, f: _File) -> str | None:
    """Why `path` is not a good local copy of `f`, or None if it is."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return "no such file"
    if f.of_content:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as err:
            return f"not a valid gzip file ({err})"
    digest = hashlib.sha256(data).hexdigest()
    if digest != f.sha256:
        return f"sha256 mismatch (expected {f.sha256}, got {digest}): not the Multi30k file or corrupt"
    return None


def _copy(path: Path, f: _File) -> bytes:
    """The verified bytes of a local source file."""
    if problem := _problem(path, f):
        raise UserError(f"{path}: {problem}")
    return path.read_bytes()


def _download(url: str, f: _File) -> bytes:
    """Download `url`, checking its sha256, and return it in local form (tokenised files gzipped)."""
    with tempfile.TemporaryDirectory(prefix="tnmt-multi30k-") as tmp:
        hint = "set TNMT_DATA_DIR to a local copy or pass --from DIR"
        path = download(url, Path(tmp) / Path(f.remote).name, Checksum("sha256", f.sha256), name="Multi30k", hint=hint)
        data = path.read_bytes()
    return gzip.compress(data, mtime=0) if f.of_content else data
