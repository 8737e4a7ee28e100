"""translate/prepared.py: a text prepared once is what the search reads: its kept spans out, its ids cut."""

import pytest

from tnmt.errors import UserError
from tnmt.translate.prepared import Prepared, Source, given_ids, length_batches
from tnmt.translate.steering import Steering


def test_the_source_is_the_text_the_model_reads(tiny_translator):
    [p] = tiny_translator.prepare(["three https://example.com/x hundred 🐶"])
    assert p.read == "three hundred" and p.plan.kept  # the URL and the emoji are kept as written
    assert p.source.ids == tiny_translator.tokenizer.encode_source_pieces("three hundred")[0]
    assert p.source.start == tiny_translator.tokenizer.bos_id


def test_an_empty_or_all_kept_text_has_no_source_and_a_feature_that_reads_the_model_refuses_it(tiny_translator):
    empty, kept, read = tiny_translator.prepare(["  ", "🐶🐶", "four"])
    assert empty.source is None and kept.source is None and kept.plan.kept
    with pytest.raises(UserError, match="^nothing of this text is translated: it is all kept as written$"):
        kept.searched()
    assert read.searched() is read.source


def test_a_long_text_is_cut_to_the_models_positions(tiny_translator):
    [p] = tiny_translator.prepare([" ".join(["seven"] * 40)])
    assert len(p.source.ids) == tiny_translator.model.config.max_len - 1 and len(p.source.pieces) > len(p.source.ids)


def test_a_forced_prefix_keeps_the_rest_of_the_steering(tiny_translator):
    [p] = tiny_translator.prepare(["four"], [Steering(avoid=("cento",))])
    forced = p.with_prefix((7, 8))
    assert forced.plan.constraints.prefix == (7, 8)
    assert forced.plan.constraints.avoided == p.plan.constraints.avoided and forced.source is p.source


def test_ids_given_alone_are_read_as_they_are():
    prepared = given_ids(["a b", " "], [[5, 6], [7]], [1, 1])
    assert prepared[0] == Prepared("a b", None, Source([5, 6], None, 1)) and prepared[1].source is None
    assert not prepared[0].steers and prepared[0].read == "a b"


def test_batches_go_longest_first_stable_and_skip_texts_without_a_source():
    prepared = given_ids(["a", "b", " ", "c", "d"], [[5], [5, 6, 7], [], [5, 6], [5, 6]], [1] * 5)
    assert length_batches(prepared, 2) == [[1, 3], [4, 0]]
