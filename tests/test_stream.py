"""Chunked translation of large inputs (tnmt.translate.stream)."""

import logging
from dataclasses import replace

import pytest

from tnmt.translate.evidence import Evidence
from tnmt.translate.stream import AnnotatedLines, translate_stream
from tnmt.translate.translation import EMPTY, Translation
from tnmt.translate.translator import Translator


class Recorder:
    """A translator that upper-cases and remembers each call's chunk and first line number."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], int]] = []

    def translate(self, texts, settings=None, *, first_line=1):
        self.calls.append((list(texts), first_line))
        return [text.upper() for text in texts]


def test_chunks_keep_input_order_and_number_their_lines():
    recorder = Recorder()
    lines = (f"line {i}" for i in range(1, 8))  # a generator: read lazily, never as a whole
    chunks = list(translate_stream(recorder, lines, chunk_lines=3))
    assert chunks == [["LINE 1", "LINE 2", "LINE 3"], ["LINE 4", "LINE 5", "LINE 6"], ["LINE 7"]]
    assert [first for _, first in recorder.calls] == [1, 4, 7]


def test_chunks_are_read_only_when_needed():
    """The next chunk is read after the previous one is yielded: memory is one chunk, output starts early."""
    read = []

    def lines():
        for i in range(6):
            read.append(i)
            yield str(i)

    stream = translate_stream(Recorder(), lines(), chunk_lines=2)
    assert next(stream) == ["0", "1"] and read == [0, 1]
    assert list(stream) == [["2", "3"], ["4", "5"]]


def test_empty_input_gives_nothing_and_bad_chunk_size_is_refused():
    assert list(translate_stream(Recorder(), [])) == []
    with pytest.raises(ValueError, match="chunk_lines must be positive"):
        list(translate_stream(Recorder(), ["a"], chunk_lines=0))


def test_chunked_translation_equals_translating_everything_at_once(tiny_checkpoint, caplog):
    translator = Translator.from_checkpoint(tiny_checkpoint)
    lines = ["one two", "", "three hundred and four", "forty-two " * 30, "seven", "eleven thousand"]
    whole = translator.translate(lines)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tnmt"):
        chunked = [t for chunk in translate_stream(translator, lines, chunk_lines=4) for t in chunk]
    assert chunked == whole
    as_given = replace(translator.decode, segment=False)  # else the over-long line is translated in parts
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tnmt"):
        assert [t for chunk in translate_stream(translator, lines, as_given, chunk_lines=4) for t in chunk]
    [warning] = [r.getMessage() for r in caplog.records if "exceed" in r.getMessage()]
    assert warning.startswith("line 4: ")  # the over-long line, numbered in the whole input


class Evidenced:
    """A translator whose translations carry a fixed evidence, remembering what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[list[str], bool, int]] = []

    def translations(self, texts, settings=None, *, evidence=False, first_line=1):
        self.asked.append((list(texts), evidence, first_line))
        proof = Evidence([(0, 1), (2, 0)], [0.5, 0.25], 0.125, ["repetition", "copy"])
        return [Translation(text.upper(), [1], 0.0, 0.0, evidence=proof) if text else EMPTY for text in texts]


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        ({"alignment": True}, "A B\t0-1 2-0"),
        ({"scores": True}, "A B\t0.1250\t0.5000 0.2500"),
        ({"warnings": True}, "A B\trepetition,copy"),
        ({"alignment": True, "scores": True, "warnings": True}, "A B\t0-1 2-0\t0.1250\t0.5000 0.2500\trepetition,copy"),
    ],
)
def test_annotated_lines_append_the_columns_asked_for_in_a_fixed_order(flags, line):
    translator = Evidenced()
    options = {"alignment": False, "scores": False, "warnings": False, **flags}
    chunks = list(translate_stream(AnnotatedLines(translator, **options), ["a b", ""], chunk_lines=5))
    empty = "\t".join(["", *([""] if flags.get("alignment") else []), *(["1.0000", ""] if flags.get("scores") else [])])
    empty += "\t" if flags.get("warnings") else ""
    assert chunks == [[line, empty]]
    assert translator.asked == [(["a b", ""], True, 1)]
