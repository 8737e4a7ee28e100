"""Chunked translation of large inputs (tnmt.decode.stream)."""

import logging

import pytest

from tnmt.decode.stream import translate_stream
from tnmt.decode.translator import Translator


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
    [warning] = [r.getMessage() for r in caplog.records if "exceed" in r.getMessage()]
    assert warning.startswith("line 4: ")  # the over-long line, numbered in the whole input
