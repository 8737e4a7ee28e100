import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tnmt import ModelConfig, Transformer
from tnmt.config import DecodeConfig
from tnmt.decode import Translation, Translator, beam_search
from tnmt.errors import UserError
from tnmt.translate.translation import EMPTY

VOCAB = 24


class WordTokenizer:
    """A stand-in for the sentencepiece tokenizer: one id per whitespace-separated word."""

    pad_id, bos_id, eos_id, unk_id = 0, 1, 2, -1  # every word has an id: none is unknown
    languages: tuple[str, ...] = ()  # one language pair
    term_markers = None  # trained without inline terms

    def encode_source_pieces(self, text: str) -> tuple[list[int], list[str]]:
        return [3 + sum(map(ord, word)) % (VOCAB - 3) for word in text.split()], text.split()

    def decode_target(self, ids) -> str:
        return " ".join(f"t{i}" for i in ids if i > 2)

    def target_pieces(self, ids) -> list[str]:
        return [{1: "<s>", 2: "</s>"}.get(i, f"t{i}") for i in ids]


@pytest.fixture(scope="module")
def model() -> Transformer:
    torch.manual_seed(4)
    config = ModelConfig(
        src_vocab_size=VOCAB,
        tgt_vocab_size=VOCAB,
        d_model=16,
        n_heads=2,
        n_encoder_layers=1,
        n_decoder_layers=2,
        d_ff=32,
        dropout=0.0,
        max_len=16,
        tie_output=False,
    )
    model = Transformer(config).eval()
    with torch.no_grad():
        model.output.weight.mul_(3.0)  # peakier distributions: outputs end at various lengths
    return model


@pytest.fixture(scope="module")
def translator(model) -> Translator:
    return Translator(model, WordTokenizer())


TEXTS = ["a dog runs", "", "two men play ball on the grass", "  ", "hello", "a cat sleeps on a mat"]


def test_translate_keeps_order_and_line_alignment(translator, model):
    out = translator.translate(TEXTS, DecodeConfig(beam_size=3, batch_size=2))
    assert len(out) == len(TEXTS) and out[1] == "" and out[3] == "  "  # a blank text comes back as it was
    tokenizer = translator.tokenizer
    for text, translation in zip(TEXTS, out, strict=True):
        if text.strip():
            src = torch.tensor([tokenizer.encode_source_pieces(text)[0] + [tokenizer.eos_id]])
            assert translation == tokenizer.decode_target(beam_search(model, src, DecodeConfig(beam_size=3))[0])
    assert len(set(out)) > 2


def test_empty_lines_do_not_run_the_model(translator, monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("the model ran")

    monkeypatch.setattr(translator.model, "encode", fail)
    assert translator.translate(["", " ", "\t"]) == ["", " ", "\t"]  # blank texts come back as they were
    assert translator.translate([]) == []
    assert translator.translations([""], n_best=2) == [EMPTY]


def test_overlong_input_is_truncated_with_a_warning_when_not_segmented(translator, caplog):
    words = [f"w{i}" for i in range(30)]  # 30 tokens + EOS > max_len = 16 positions
    as_given = DecodeConfig(beam_size=2, segment=False)
    long = translator.translate([" ".join(words)], as_given)
    assert any("exceed the model's max_len" in r.getMessage() for r in caplog.records)
    assert long == translator.translate([" ".join(words[:15])], as_given)


def test_an_overlong_sentence_is_translated_whole_in_parts(translator, caplog):
    words = [f"w{i}" for i in range(30)]  # 30 tokens: parts of at most the model's 15 positions
    [long] = translator.translations([" ".join(words)], DecodeConfig(beam_size=2), evidence=True)
    assert not any("exceed" in r.getMessage() for r in caplog.records)
    [sentence] = long.sentences
    text = " ".join(words)
    assert sentence.cuts and all(text[cut - 1] == " " for cut in sentence.cuts)  # cut at spaces
    bounds = [0, *sentence.cuts, len(text) + 1]
    parts = [text[a : b - 1] for a, b in zip(bounds, bounds[1:], strict=False)]
    assert all(len(part.split()) <= 15 for part in parts) and " ".join(parts) == text  # each fits, nothing lost
    assert long.text == " ".join(translator.translate(parts, DecodeConfig(beam_size=2)))
    assert "sentence_split" in long.evidence.warnings


def test_nbest_lists_are_sorted_and_consistent(translator):
    nbest = [t.nbest for t in translator.translations(TEXTS, DecodeConfig(beam_size=3, segment=False), n_best=3)]
    assert nbest[1] == [EMPTY]
    for results in nbest:
        assert 1 <= len(results) <= 3
        assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)
        for r in results:
            assert isinstance(r, Translation) and r.text == translator.tokenizer.decode_target(r.tokens)
    assert [r[0].text for r in nbest] == translator.translate(TEXTS, DecodeConfig(beam_size=3, segment=False))


def test_beam_size_one_runs_greedy_with_the_same_result(translator):
    greedy = translator.translations(TEXTS, DecodeConfig(beam_size=1))
    assert translator.translate(TEXTS, DecodeConfig(beam_size=1)) == [t.text for t in greedy]
    with pytest.raises(ValueError, match="n_best"):
        translator.translations(TEXTS, DecodeConfig(beam_size=1), n_best=2)


def test_attention_labels_match_the_maps(translator, model):
    src_pieces, tgt_pieces, maps = translator.attention("a dog runs", DecodeConfig(beam_size=1))
    assert src_pieces == ["a", "dog", "runs", "</s>"] and tgt_pieces[0] == "<s>"
    assert maps.encoder[0].shape == (1, 2, 4, 4)
    assert maps.cross[-1].shape == (1, 2, len(tgt_pieces), 4)
    assert tgt_pieces[1:] == translator.tokenizer.target_pieces(
        beam_search(
            model,
            torch.tensor([[*translator.tokenizer.encode_source_pieces("a dog runs")[0], 2]]),
            DecodeConfig(beam_size=1),
        )[0]
    )
    with pytest.raises(ValueError, match="empty"):
        translator.attention(" ")


def test_translations_with_attention_explain_the_best_of_a_batched_search(translator):
    settings = DecodeConfig(beam_size=2, batch_size=2)
    plain = translator.translations(TEXTS, settings, n_best=2)
    explained = translator.translations(TEXTS, settings, n_best=2, attention=True)
    assert explained == plain  # the same search; attention is extra data
    assert explained[1].attention is None  # an empty text has nothing to explain
    for text, translation in zip(TEXTS, explained, strict=True):
        if text.strip():
            alone = translator.attention(text, settings)
            assert translation.attention[:2] == alone[:2]
            assert translation.attention.target_pieces[1:] == translator.tokenizer.target_pieces(translation.tokens)
            for a, b in zip(translation.attention.maps.cross, alone.maps.cross, strict=True):
                torch.testing.assert_close(a, b, atol=1e-5, rtol=0)  # cut from a batched pass: float rounding


def test_from_checkpoint_round_trip(tmp_path):
    from tnmt.checkpoint import save_checkpoint
    from tnmt.data.tokenizer import Tokenizer

    phrases = ["a dog runs in the park", "two men play ball on grass", "ein hund läuft", "zwei männer spielen"]
    words = " ".join(phrases).split()
    texts = [" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(3 + i % 5)) for i in range(200)]
    tokenizer = Tokenizer.train(texts, vocab_size=300)
    torch.manual_seed(0)
    config = ModelConfig(
        src_vocab_size=300, tgt_vocab_size=300, d_model=16, n_heads=2, d_ff=32, max_len=32, tie_output=False
    )
    config = config.replace(n_encoder_layers=1, n_decoder_layers=1)
    model = Transformer(config).eval()
    stored = DecodeConfig(beam_size=3, length_penalty=1.0, max_len=7)
    save_checkpoint(tmp_path / "ckpt", model, tokenizer, decode=stored)
    loaded = Translator.from_checkpoint(tmp_path / "ckpt")
    assert loaded.decode == stored  # translation uses what validation measured
    sentences = ["a dog runs in the park", "", "zwei männer"]
    assert loaded.translate(sentences) == Translator(model, tokenizer, stored).translate(sentences)
    greedy = DecodeConfig(beam_size=1, length_penalty=1.0, max_len=7)
    assert loaded.translate(sentences, greedy) == Translator(model, tokenizer).translate(sentences, greedy)


def test_from_checkpoint_rejects_unknown_quantization_before_loading(tmp_path):
    with pytest.raises(ValueError, match="quantize must be one of"):
        Translator.from_checkpoint(tmp_path / "missing", quantize="int4")


def test_quantize_is_a_property_of_the_loaded_model_not_of_the_settings(model):
    quantized = Translator(model, WordTokenizer(), quantize="int8")
    assert quantized.quantize == "int8" and quantized.model is not model
    assert "quantize" not in DecodeConfig.__dataclass_fields__


UNUSUAL = st.sampled_from(["", " ", "\n", "\r", "\x00", "\x0c", "\u2028", "\u2581", "\ufeff", "\ud800", "one two " * 9])


@given(
    texts=st.lists(st.lists(st.one_of(st.characters(), UNUSUAL), max_size=12).map("".join), max_size=6),
    beam_size=st.integers(1, 3),
    batch_size=st.integers(1, 4),
)
def test_property_any_strings_give_one_translation_each_and_never_raise(tiny_translator, texts, beam_size, batch_size):
    outputs = tiny_translator.translate(texts, DecodeConfig(beam_size=beam_size, batch_size=batch_size))
    assert len(outputs) == len(texts) and all(isinstance(output, str) for output in outputs)
    assert all(output == text for output, text in zip(outputs, texts, strict=True) if not text.strip())
    assert all(output.count("\n") == text.count("\n") for output, text in zip(outputs, texts, strict=True))


def test_a_batch_that_mixes_directions_equals_its_sentences_one_at_a_time(multi_checkpoint):
    from tnmt.config import DecodeConfig

    base = Translator.from_checkpoint(multi_checkpoint)
    texts = ["one hundred", "seven", "two thousand and five", "forty-two"]
    pairs = [("en", "de"), ("en", "it"), ("de", "en"), ("it", "en")]
    translators = [base.for_pair(*pair) for pair in pairs]
    prepared = [t.prepare([text])[0] for t, text in zip(translators, texts, strict=True)]
    assert len({p.source.start for p in prepared}) == 3  # de, it and en tags
    for settings in (DecodeConfig(beam_size=1, max_len=6), DecodeConfig(beam_size=3, max_len=6)):
        mixed = base.translations(texts, settings, prepared=prepared, evidence=True, attention=True)
        alone = [
            t.translations([text], settings, evidence=True, attention=True)[0]
            for t, text in zip(translators, texts, strict=True)
        ]
        assert [m.tokens for m in mixed] == [a.tokens for a in alone]
        assert [m.score for m in mixed] == pytest.approx([a.score for a in alone], abs=1e-5)
        assert [m.evidence.alignment for m in mixed] == [a.evidence.alignment for a in alone]
        assert [m.attention.target_pieces[0] for m in mixed] == ["<2de>", "<2it>", "<2en>", "<2en>"]
    tags = set(base.model.config.language_ids)
    assert not any(tags & set(m.tokens) for m in mixed)  # a tag starts the decoder and is never an output


def test_a_multilingual_model_translates_a_chosen_pair_and_refuses_an_untrained_one(multi_checkpoint):
    base = Translator.from_checkpoint(multi_checkpoint)
    assert base.multilingual and len(base.directions) == 4
    with pytest.raises(UserError, match=r"translates several directions \(en-de, de-en, en-it, it-en\): choose one"):
        base.translate(["one"])
    with pytest.raises(UserError, match=r"^de-it was not trained \(trained: en-de, de-en, en-it, it-en\)"):
        base.for_pair("de", "it")
    with pytest.raises(UserError, match="this model knows en, de, it, not 'fr'"):
        base.for_pair("en", "fr", zero_shot=True)
    zero_shot = base.for_pair("de", "it", zero_shot=True)
    assert zero_shot.target == "it" and zero_shot.start_id == base.tokenizer.language_id("it")
    assert zero_shot.model is base.model and zero_shot.door is base.door  # one model, shared
    assert base.start_id is None  # choosing a pair leaves the base untouched


def test_a_one_pair_model_translates_its_own_pair_only(tiny_checkpoint):
    translator = Translator.from_checkpoint(tiny_checkpoint)
    assert translator.for_pair("en", "it") is translator and not translator.multilingual
    with pytest.raises(UserError, match="^en-de: this model translates en-it only$"):
        translator.for_pair("en", "de")


def test_a_segments_fit_is_measured_on_what_the_model_reads(tiny_translator):
    """A do-not-translate term is taken out before the fit, as it is before the search: a few words around one
    long kept term are one segment; without the term kept, its pieces do not fit and the sentence is cut."""
    from tnmt.translate.steering import Steering

    term = "Acme" + "q" * 60
    text = f"two hundred {term} seven"
    assert tiny_translator.layout(text, Steering(do_not_translate=(term,))).segments == [text]
    assert len(tiny_translator.layout(text).segments) > 1
    [found] = tiny_translator.translations([text], steering=[Steering(do_not_translate=(term,))])
    assert term in found.text.split()


def test_prepared_texts_that_are_not_the_texts_given_are_an_error(tiny_translator):
    prepared = tiny_translator.prepare(["two hundred"])
    assert tiny_translator.translations(["two hundred"], prepared=prepared)[0].text  # theirs: translated
    with pytest.raises(ValueError, match="prepared= holds other texts than texts"):
        tiny_translator.translations(["seven"], prepared=prepared)
