import gzip
import itertools
import re
from pathlib import Path

import pytest

from tnmt.data.corpus import (
    ParallelCorpus,
    filter_pairs,
    iter_lines,
    iter_parallel,
    read_lines,
    read_parallel,
    read_tsv,
)
from tnmt.errors import UserError


def exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


@pytest.mark.parametrize("name", ["text.en", "text.en.gz"])
def test_read_lines_keeps_everything_but_the_line_terminator(tmp_path: Path, name: str) -> None:
    path = write(tmp_path / name, "  two  spaces \n\nline\u2028sep\r\nnäive\n".encode())
    assert read_lines(path) == ["  two  spaces ", "", "line\u2028sep", "näive"]


def test_read_lines_without_final_newline_and_with_bom(tmp_path: Path) -> None:
    path = write(tmp_path / "a.txt", "\ufeffa\nb".encode())
    assert read_lines(path) == ["a", "b"]
    assert read_lines(write(tmp_path / "b.txt", b"\n")) == [""]


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=exactly(f"{tmp_path / 'nope.de'}: no such file")):
        read_lines(tmp_path / "nope.de")


@pytest.mark.parametrize("name", ["empty.en", "empty.en.gz"])
def test_empty_file(tmp_path: Path, name: str) -> None:
    path = write(tmp_path / name, b"")
    with pytest.raises(UserError, match=exactly(f"{path}: empty file")):
        read_lines(path)


@pytest.mark.parametrize("name", ["bad.de", "bad.de.gz"])
def test_invalid_utf8_names_file_and_line(tmp_path: Path, name: str) -> None:
    path = write(tmp_path / name, "ok\nstill ok\nbad \xff byte\n".encode("latin-1"))
    with pytest.raises(UserError, match=exactly(f"{path}:3: invalid UTF-8")):
        read_lines(path)


def test_corrupt_gzip(tmp_path: Path) -> None:
    path = tmp_path / "broken.en.gz"
    path.write_bytes(gzip.compress(b"a sentence\n" * 100)[:-20])
    with pytest.raises(UserError, match=f"^{re.escape(str(path))}: not a valid gzip file"):
        read_lines(path)


def test_read_parallel(tmp_path: Path) -> None:
    src = write(tmp_path / "x.en", b"a  b\n c\n")
    tgt = write(tmp_path / "x.de.gz", "ä\t b\nc\n".encode())
    assert read_parallel(src, tgt) == ParallelCorpus(src=["a  b", " c"], tgt=["ä\t b", "c"])
    normalized = read_parallel(src, tgt, normalize_whitespace=True)
    assert normalized == ParallelCorpus(src=["a b", "c"], tgt=["ä b", "c"])
    assert len(normalized) == 2


def test_read_parallel_line_count_mismatch_names_both_files(tmp_path: Path) -> None:
    src = write(tmp_path / "x.en", b"a\nb\nc\n")
    tgt = write(tmp_path / "x.de", b"a\nb\n")
    with pytest.raises(UserError, match=f"^{re.escape(f'{src} has 3 lines but {tgt} has 2;')}"):
        read_parallel(src, tgt)


@pytest.mark.parametrize("name", ["big.en", "big.en.gz"])
def test_iter_lines_streams_one_line_at_a_time(tmp_path: Path, name: str) -> None:
    """The lines before a bad byte arrive before the error: nothing is read ahead of what is asked for."""
    path = write(tmp_path / name, b"first\r\n" + b"x\n" * 100_000 + b"\xff\n")
    lines = iter_lines(path)
    assert next(lines) == "first"
    assert sum(1 for _ in itertools.islice(lines, 100_000)) == 100_000
    with pytest.raises(UserError, match=exactly(f"{path}:100002: invalid UTF-8")):
        next(lines)


@pytest.mark.parametrize(("n_src", "n_tgt"), [(3, 2), (2, 3), (5, 1)])
def test_iter_parallel_yields_pairs_then_names_both_counts(tmp_path: Path, n_src: int, n_tgt: int) -> None:
    src = write(tmp_path / "x.en", "".join(f"s{i}\n" for i in range(n_src)).encode())
    tgt = write(tmp_path / "x.de.gz", "".join(f" t{i}  x \n" for i in range(n_tgt)).encode())
    pairs = iter_parallel(src, tgt, normalize_whitespace=True)
    assert [next(pairs) for _ in range(min(n_src, n_tgt))] == [(f"s{i}", f"t{i} x") for i in range(min(n_src, n_tgt))]
    with pytest.raises(
        UserError,
        match=exactly(
            f"{src} has {n_src} lines but {tgt} has {n_tgt}; a parallel corpus needs one line per sentence pair"
        ),
    ):
        next(pairs)


def test_iter_parallel_reports_an_empty_side(tmp_path: Path) -> None:
    src, tgt = write(tmp_path / "x.en", b"a\n"), write(tmp_path / "x.de", b"")
    with pytest.raises(UserError, match=exactly(f"{tgt}: empty file")):
        list(iter_parallel(src, tgt))
    with pytest.raises(UserError, match=exactly(f"{tgt}: empty file")):
        list(iter_parallel(tgt, src))


def test_read_tsv(tmp_path: Path) -> None:
    path = write(tmp_path / "pairs.tsv", b"Hello .\tHallo .\n\t\n x\ty \n")
    corpus = read_tsv(path)
    assert corpus == ParallelCorpus(src=["Hello .", "", " x"], tgt=["Hallo .", "", "y "])
    assert read_tsv(path, normalize_whitespace=True).src == ["Hello .", "", "x"]


@pytest.mark.parametrize(("line", "tabs"), [("no tab here", 0), ("a\tb\tc", 2)])
def test_read_tsv_rejects_lines_without_exactly_one_tab(tmp_path: Path, line: str, tabs: int) -> None:
    path = write(tmp_path / "pairs.tsv.gz", f"a\tb\n{line}\n".encode())
    expected = f"{path}:2: expected one tab between source and target, found {tabs}"
    with pytest.raises(UserError, match=exactly(expected)):
        read_tsv(path)


def test_parallel_corpus_requires_equal_sides() -> None:
    with pytest.raises(ValueError, match="2 source but 1 target"):
        ParallelCorpus(src=["a", "b"], tgt=["a"])


def test_filter_pairs_on_token_counts() -> None:
    src = [[5, 6], [], [5] * 4, [5], [5] * 3]
    tgt = [[7], [7], [7], [7] * 5, [7] * 3]
    assert filter_pairs(src, tgt, max_len=3) == [0, 4]
    assert filter_pairs(src, tgt, max_len=5, min_len=0) == [0, 1, 2, 3, 4]
    assert filter_pairs(src, tgt, max_len=5, min_len=3) == [4]
    with pytest.raises(ValueError):
        filter_pairs(src, tgt[:-1], max_len=3)


def test_reads_multi30k_train(multi30k_dir: Path) -> None:
    corpus = read_parallel(multi30k_dir / "train.en.gz", multi30k_dir / "train.de.gz")
    assert len(corpus) == 29000
    assert corpus.src[0].startswith("Two young, White males are outside")
    assert all(corpus.src) and all(corpus.tgt)


def test_chunked_cuts_a_stream_into_bounded_lists_in_order():
    from tnmt.data.corpus import chunked

    assert list(chunked(iter(range(7)), 3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(chunked([], 3)) == []
