"""CTranslate2 export: the exported model decodes exactly like tnmt.

Tiny models with random weights (drawn so that outputs depend on the source) are exported in three
architectures: the paper's (interleaved sinusoids, post-norm, ReLU, tied embeddings), MarianMT's
([sin | cos], swish, logits bias) and a pre-norm one (learned positions, GELU, separate embeddings
and output). CTranslate2's float32 greedy search must return tnmt's ids on 50 Multi30k sentences,
with tnmt's per-sentence length limits; beam search with length_penalty 0 must too.
"""

import json
import sys

import pytest
import torch

from tnmt.checkpoint import load_checkpoint, read_model_json, save_checkpoint
from tnmt.cli import main
from tnmt.config import DecodeConfig, ModelConfig
from tnmt.data.corpus import read_lines
from tnmt.data.tokenizer import Tokenizer
from tnmt.decode import beam_search, greedy_hypotheses, greedy_search
from tnmt.decode.rules import banned_ids, output_limits
from tnmt.errors import UserError
from tnmt.interop.ctranslate2 import CTranslate2Translator, export_ctranslate2
from tnmt.model import Transformer

pytest.importorskip("ctranslate2")

ARCHITECTURES = {
    "paper": dict(share_embeddings=True, tie_output=True),
    "marian": dict(positional_layout="concat", activation="swish", final_logits_bias=True, share_embeddings=True),
    "pre-norm": dict(
        norm_first=True,
        positional="learned",
        activation="gelu",
        final_logits_bias=True,
        scale_embeddings=False,
        tie_output=False,
    ),
}


@pytest.fixture(scope="module")
def tokenizer(multi30k_dir) -> Tokenizer:
    texts = read_lines(multi30k_dir / "train.en.gz")[:2000] + read_lines(multi30k_dir / "train.de.gz")[:2000]
    return Tokenizer.train(texts, vocab_size=500)


@pytest.fixture(scope="module")
def sources(multi30k_dir, tokenizer) -> list[list[int]]:
    return [tokenizer.encode_source(text) for text in read_lines(multi30k_dir / "val.en.gz")[:50]]


def random_model(tokenizer: Tokenizer, **overrides) -> Transformer:
    """Random weights with peaked attention and strong sub-layers, so that the source matters."""
    config = ModelConfig(
        src_vocab_size=tokenizer.source_vocab_size,
        tgt_vocab_size=tokenizer.vocab_size,
        d_model=64,
        n_heads=4,
        n_encoder_layers=2,
        n_decoder_layers=1,
        d_ff=128,
        max_len=128,
        **tokenizer.special_ids,
        **{"tie_output": False, **overrides},
    )
    model = Transformer(config).eval()
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=generator)
            if p.dim() == 1:  # biases and LayerNorm parameters
                p.copy_(0.1 * noise + (1.0 if "norm.weight" in name else 0.0))
            elif "embed" in name or "learned" in name or name == "output.weight":
                p.copy_(noise)
            else:
                gain = 4.0 if "out_proj" in name or "linear2" in name else 1.0
                p.copy_(noise * gain / p.size(1) ** 0.5)
                if "in_proj" in name:
                    p[: 2 * p.size(1)] *= 2.0  # Q and K rows
        if model.logits_bias is not None:
            model.logits_bias[tokenizer.eos_id] = 10.0
    return model


@pytest.fixture(scope="module", params=list(ARCHITECTURES))
def exported(request, tokenizer, tmp_path_factory):
    """(tnmt model, checkpoint directory, CTranslate2 directory) of one architecture."""
    directory = tmp_path_factory.mktemp(request.param)
    model = random_model(tokenizer, **ARCHITECTURES[request.param])
    save_checkpoint(directory / "ckpt", model, tokenizer)
    assert main(["export", "ctranslate2", str(directory / "ckpt"), "--out", str(directory / "ct2")]) == 0
    return model, directory / "ckpt", directory / "ct2"


def batch(sources: list[list[int]], tokenizer: Tokenizer) -> torch.Tensor:
    width = max(map(len, sources)) + 1
    return torch.tensor([s + [tokenizer.eos_id] + [tokenizer.pad_id] * (width - len(s) - 1) for s in sources])


def test_greedy_ids_equal_tnmts(exported, sources, tokenizer):
    """With tnmt's default length limit (source length + 50), different for every sentence."""
    model, _, ct2_dir = exported
    ours = greedy_search(model, batch(sources, tokenizer), DecodeConfig(block_loops=False))  # CTranslate2 lets loops be
    theirs = CTranslate2Translator(ct2_dir, threads=1).translate_ids(sources, DecodeConfig(beam_size=1))
    assert theirs == ours
    assert len({tuple(ids) for ids in ours}) >= 30


def test_translations_carry_log_probabilities_normalised_over_the_allowed_tokens(exported, multi30k_dir, tokenizer):
    """The engine answers with tnmt's `Translation`. Greedy, without length penalty, its tokens are tnmt's and
    its log-probability is theirs with one difference: CTranslate2 masks the banned tokens (pad, BOS) before
    the softmax, tnmt after it, so each step is normalised over the tokens that may be generated."""
    model, _, ct2_dir = exported
    settings = DecodeConfig(beam_size=1, length_penalty=0.0, block_loops=False)
    texts = read_lines(multi30k_dir / "val.en.gz")[:8]
    engine = CTranslate2Translator(ct2_dir, threads=1)
    theirs = engine.translations(["", *texts], settings)
    assert theirs[0].text == "" and engine.translate(texts, settings) == [t.text for t in theirs[1:]]
    ours = greedy_hypotheses(model, batch([tokenizer.encode_source(t) for t in texts], tokenizer), settings)
    for text, translation, hypothesis in zip(texts, theirs[1:], ours, strict=True):
        assert translation.text == tokenizer.decode_target(hypothesis.tokens)
        assert translation.tokens == hypothesis.tokens and translation.score == translation.log_prob  # alpha 0
        src = batch([tokenizer.encode_source(text)], tokenizer)
        limit = int(
            output_limits((src != tokenizer.pad_id).sum(1), model_max_len=model.config.max_len, decode=settings)
        )
        ended = len(hypothesis.tokens) < limit  # shorter than its limit: it generated EOS
        chosen = [*hypothesis.tokens, tokenizer.eos_id] if ended else hypothesis.tokens
        with torch.no_grad():
            logits = model(src, torch.tensor([[tokenizer.bos_id, *chosen[:-1]]]))[0]  # (T, V)
        logits[:, banned_ids(model.config)] = float("-inf")
        allowed = float(logits.log_softmax(-1).gather(1, torch.tensor(chosen)[:, None]).sum())
        assert translation.log_prob == pytest.approx(allowed, abs=2e-3)


def test_beam_ids_equal_tnmts_without_length_penalty(exported, sources, tokenizer):
    model, _, ct2_dir = exported
    limits = dict(max_len=30, max_len_a=0.0, max_len_b=30)
    ours = beam_search(
        model, batch(sources, tokenizer), DecodeConfig(beam_size=4, length_penalty=0.0, block_loops=False, **limits)
    )
    theirs = CTranslate2Translator(ct2_dir, threads=1).translate_ids(
        sources, DecodeConfig(beam_size=4, length_penalty=0.0, **limits)
    )
    assert theirs == ours


def test_export_writes_vocabularies_and_tokenizer(exported, tokenizer):
    _, _, ct2_dir = exported
    pieces = json.loads((ct2_dir / "shared_vocabulary.json").read_text(encoding="utf-8"))
    assert pieces == tokenizer.target_pieces(range(tokenizer.vocab_size))
    config = json.loads((ct2_dir / "config.json").read_text())
    assert config["decoder_start_token"] == "<s>" and config["eos_token"] == "</s>" and config["add_source_eos"]
    assert Tokenizer.load(ct2_dir).encode_source("A dog runs.") == tokenizer.encode_source("A dog runs.")


def test_separate_vocabularies_export_and_decode_alike(multi30k_dir, tmp_path):
    """One sentencepiece model per language: the export keeps a vocabulary per side, and greedy ids agree."""
    english, german = (read_lines(multi30k_dir / f"train.{lang}.gz")[:2000] for lang in ("en", "de"))
    separate = Tokenizer.train_separate(english, german, vocab_size=500)
    model = random_model(separate, share_embeddings=False)
    save_checkpoint(tmp_path / "ckpt", model, separate)
    export_ctranslate2(tmp_path / "ckpt", tmp_path / "ct2")
    sources = [separate.encode_source(text) for text in read_lines(multi30k_dir / "val.en.gz")[:50]]
    theirs = CTranslate2Translator(tmp_path / "ct2", threads=1).translate_ids(sources, DecodeConfig(beam_size=1))
    assert theirs == greedy_search(model, batch(sources, separate), DecodeConfig(block_loops=False))
    target = json.loads((tmp_path / "ct2" / "target_vocabulary.json").read_text(encoding="utf-8"))
    source = json.loads((tmp_path / "ct2" / "source_vocabulary.json").read_text(encoding="utf-8"))
    assert target == separate.target_pieces(range(separate.vocab_size)) and source != target
    assert source[separate.encode_source("dog")[0]] == separate.source_pieces("dog")[0]


def test_cli_translates_with_ctranslate2(exported, multi30k_dir, tmp_path):
    _, checkpoint, ct2_dir = exported
    lines = read_lines(multi30k_dir / "val.en.gz")[:20] + ["", "A dog runs. Two men sit.  - A cat."]  # split alike
    (tmp_path / "in.en").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    outputs = {}
    for engine, path in (("tnmt", checkpoint), ("ctranslate2", ct2_dir)):
        out = tmp_path / f"{engine}.de"
        args = ["translate", "--engine", engine, "--checkpoint", str(path), "-i", str(tmp_path / "in.en")]
        assert main([*args, "-o", str(out), "--beam-size", "1", "--no-block-loops"]) == 0
        outputs[engine] = out.read_text(encoding="utf-8")
    assert outputs["ctranslate2"] == outputs["tnmt"]
    # the empty line stays empty (bytes: a random model's "\r" is not a line break of the file)
    assert (tmp_path / "tnmt.de").read_bytes().split(b"\n")[20] == b""


def test_cli_threads_are_ctranslate2s_intra_threads(tiny_checkpoint, tmp_path, monkeypatch):
    """--threads N: one batch at a time (inter_threads 1) on N OpenMP threads (intra_threads N; 0: its default)."""
    import ctranslate2

    made, real = [], ctranslate2.Translator

    def recording(*args, **options):
        made.append(options)
        return real(*args, **options)

    monkeypatch.setattr(ctranslate2, "Translator", recording)
    export_ctranslate2(tiny_checkpoint, tmp_path / "ct2")
    (tmp_path / "in.en").write_text("forty-two\n", encoding="utf-8")
    for threads in ("3", "0"):
        args = ["translate", "--engine", "ctranslate2", "--checkpoint", str(tmp_path / "ct2"), "--threads", threads]
        assert main([*args, "-i", str(tmp_path / "in.en"), "-o", str(tmp_path / "out.it")]) == 0
    assert [(options["inter_threads"], options["intra_threads"]) for options in made] == [(1, 3), (1, 0)]


def test_int8_export_translates(tokenizer, sources, tmp_path):
    model = random_model(tokenizer)
    save_checkpoint(tmp_path / "ckpt", model, tokenizer)
    export_ctranslate2(tmp_path / "ckpt", tmp_path / "f32")
    export_ctranslate2(tmp_path / "ckpt", tmp_path / "int8", quantization="int8")
    assert (tmp_path / "int8" / "model.bin").stat().st_size < (tmp_path / "f32" / "model.bin").stat().st_size / 2
    outputs = CTranslate2Translator(tmp_path / "int8", threads=1).translate_ids(sources[:10], DecodeConfig(beam_size=1))
    assert len(outputs) == 10 and any(outputs)


def test_export_refuses_a_users_directory_or_file(exported, tmp_path, capsys):
    _, checkpoint, _ = exported
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    (tmp_path / "notes.txt").write_text("mine")
    for out, there in (("mine", "a directory with 1 entry"), ("notes.txt", "a file")):
        assert main(["export", "ctranslate2", str(checkpoint), "--out", str(tmp_path / out)]) == 2
        refusal = f"{tmp_path / out}: exists and is not a CTranslate2 export of tnmt ({there}); choose another path"
        assert capsys.readouterr().err == f"tnmt export: error: {refusal}\n"
    assert (tmp_path / "notes.txt").read_text() == (tmp_path / "mine" / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "notes.txt"]
    with pytest.raises(UserError, match="not a CTranslate2 export"):
        CTranslate2Translator(checkpoint)


def test_an_export_replaces_an_earlier_one_atomically(tiny_checkpoint, tmp_path, monkeypatch):
    """It carries the checkpoint's description (languages too); a failed export leaves the earlier one whole."""
    out = export_ctranslate2(tiny_checkpoint, tmp_path / "ct2")
    described = read_model_json(out / "tnmt_model.json")
    loaded = load_checkpoint(tiny_checkpoint)
    assert described == (loaded.model.config, loaded.decode, (("en", "it"),))
    export_ctranslate2(tiny_checkpoint, out, quantization="int8")  # over its own output
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Tokenizer, "save", full_disk)
    with pytest.raises(OSError, match="No space left"):
        export_ctranslate2(tiny_checkpoint, out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["ct2"]  # no hidden directory left behind
    assert CTranslate2Translator(out, threads=1).translate(["forty-two"])[0] is not None


def test_missing_ctranslate2_is_explained(exported, monkeypatch, tmp_path):
    _, checkpoint, _ = exported
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # makes `import ctranslate2` fail
    with pytest.raises(UserError, match=r"needs the 'ctranslate2' package: pip install 'tnmt\[interop\]'"):
        export_ctranslate2(checkpoint, tmp_path / "out")


def test_a_multilingual_checkpoint_is_not_exported_and_nothing_is_written(multi_checkpoint, tmp_path):
    with pytest.raises(UserError, match=r"a multilingual checkpoint \(4 directions\) is not exported"):
        export_ctranslate2(multi_checkpoint, tmp_path / "ct2")
    assert not (tmp_path / "ct2").exists()
