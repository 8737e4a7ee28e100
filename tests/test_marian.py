"""MarianMT import, checked against Hugging Face itself, with no download.

A randomly initialised MarianMTModel with sentencepiece models trained here on Multi30k is saved with
`save_pretrained`, imported with `tnmt import marian`, and must give Hugging Face's logits and exactly
its greedy and beam-4 outputs on 50 sentences. Random weights are drawn large enough (peaked
attention, strong sub-layers, an EOS bias) that the outputs differ between sentences and in length.
The whole OPUS-MT path runs too: import, translate, serve, export to CTranslate2, with the language pair
read from the model or given with --source / --target.
"""

import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
import sentencepiece as spm
import torch
from safetensors.torch import load_file

from tnmt.blocks.positional import sinusoidal_table
from tnmt.checkpoint import load_checkpoint, read_model_json
from tnmt.cli import main
from tnmt.config import DROPOUT_RATES, DecodeConfig
from tnmt.data.corpus import read_lines
from tnmt.decode import beam_search, greedy_search
from tnmt.errors import UserError
from tnmt.interop.marian import load_marian, opus_mt_languages
from tnmt.interop.marian_config import CONFIG_FIELDS, marian_model_config
from tnmt.recipe import load_recipe
from tnmt.train.loop import train
from tnmt.translate.translator import Translator

transformers = pytest.importorskip("transformers")

D_MODEL, MAX_LEN, OUTPUT_CAP = 64, 128, 30


@pytest.fixture(scope="module")
def marian_tokenizer_dir(multi30k_dir, tmp_path_factory) -> Path:
    """source.spm (en), target.spm (de) and vocab.json as Marian builds it: </s> = 0, <unk> = 1, the pieces
    of both models, <pad> last (MarianTokenizer requires <unk>; Hugging Face added <pad> for decoding)."""
    directory = tmp_path_factory.mktemp("marian_spm")
    models = []
    for lang, name in (("en", "source.spm"), ("de", "target.spm")):
        proto = io.BytesIO()
        lines = read_lines(multi30k_dir / f"train.{lang}.gz")[:2000]
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines), model_writer=proto, vocab_size=300, num_threads=1, minloglevel=2
        )
        (directory / name).write_bytes(proto.getvalue())
        models.append(spm.SentencePieceProcessor(model_proto=proto.getvalue()))
    pieces = ["</s>", "<unk>"]
    for model in models:
        for i in range(model.get_piece_size()):
            if not (model.is_control(i) or model.is_unknown(i)) and model.id_to_piece(i) not in pieces:
                pieces.append(model.id_to_piece(i))
    pieces.append("<pad>")
    (directory / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(pieces)}), encoding="utf-8")
    return directory


def save_marian(directory: Path, tokenizer_dir: Path, **overrides) -> Path:
    """A MarianMTModel with 2 encoder and 1 decoder layers and random weights, plus its MarianTokenizer naming
    the languages (en -> de) as OPUS-MT's do."""
    vocab = json.loads((tokenizer_dir / "vocab.json").read_text())
    pad = vocab["<pad>"]
    settings = dict(
        vocab_size=len(vocab),
        d_model=D_MODEL,
        encoder_layers=2,
        decoder_layers=1,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        max_position_embeddings=MAX_LEN,
        scale_embedding=True,
        pad_token_id=pad,
        decoder_start_token_id=pad,
        eos_token_id=vocab["</s>"],
        forced_eos_token_id=vocab["</s>"],
        bad_words_ids=[[pad]],
        dropout=0.1,
        attention_dropout=0.05,
        activation_dropout=0.02,
    )
    config = transformers.MarianConfig(**{**settings, **overrides})
    torch.manual_seed(0)
    model = transformers.MarianMTModel(config)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embed_positions" in name:  # the sinusoids are part of the architecture, not weights
                continue
            noise = torch.randn(p.shape, generator=generator)
            if p.dim() == 1:  # biases and LayerNorm parameters
                p.copy_(0.1 * noise + (1.0 if "layer_norm.weight" in name else 0.0))
            elif "shared" in name or "embed_tokens" in name or "lm_head" in name:
                p.copy_(0.25 * noise)  # x sqrt(d_model) = 2: tokens outweigh positions; logits spread ~2
            else:  # peaked attention and strong sub-layers, so that the source matters
                gain = 2.0 if "q_proj" in name or "k_proj" in name else 1.0
                gain = 4.0 if "out_proj" in name or "fc2" in name else gain
                p.copy_(noise * gain / p.size(1) ** 0.5)
        model.final_logits_bias.copy_(torch.randn(model.final_logits_bias.shape, generator=generator))
        model.final_logits_bias[0, config.eos_token_id] = 8.0  # some outputs end early, others at the cap
    model.save_pretrained(directory)
    files = [str(tokenizer_dir / name) for name in ("source.spm", "target.spm", "vocab.json")]
    tokenizer = transformers.MarianTokenizer(*files, source_lang="en", target_lang="de")
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module", params=["swish", "gelu"])
def hf_dir(request, marian_tokenizer_dir, tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp(f"marian_{request.param}")
    return save_marian(directory, marian_tokenizer_dir, activation_function=request.param)


@pytest.fixture(scope="module")
def imported(hf_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("imported") / "ckpt"
    assert main(["import", "marian", str(hf_dir), "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def sources(multi30k_dir) -> list[str]:
    return read_lines(multi30k_dir / "val.en.gz")[:50]


def padded(rows: list[list[int]], pad: int) -> torch.Tensor:
    width = max(map(len, rows))
    return torch.tensor([row + [pad] * (width - len(row)) for row in rows])


def source_batch(checkpoint, texts: list[str]) -> torch.Tensor:
    tokenizer = checkpoint.tokenizer
    return padded([tokenizer.encode_source(t) + [tokenizer.eos_id] for t in texts], tokenizer.pad_id)


def hf_generate(hf_dir: Path, src: torch.Tensor, *, num_beams: int) -> list[list[int]]:
    """Hugging Face generate, set up as tnmt searches: no length penalty, HF's default stopping rule
    (which tnmt's beam search implements), pad banned, no forced EOS at the cap."""
    model = transformers.MarianMTModel.from_pretrained(hf_dir).eval()
    c = model.config
    options = dict(length_penalty=0.0, early_stopping=False) if num_beams > 1 else {}
    with torch.no_grad():
        sequences = model.generate(
            input_ids=src,
            attention_mask=src != c.pad_token_id,
            num_beams=num_beams,
            do_sample=False,
            max_new_tokens=OUTPUT_CAP,
            no_repeat_ngram_size=0,
            bad_words_ids=[[c.pad_token_id]],
            forced_eos_token_id=None,
            **options,
        )
    outputs = []
    for row in sequences.tolist():  # decoder start, tokens, EOS, then pad filling
        row = row[1:]
        row = row[: row.index(c.eos_token_id)] if c.eos_token_id in row else row
        while row and row[-1] == c.pad_token_id:
            row.pop()
        assert c.pad_token_id not in row
        outputs.append(row)
    return outputs


def test_positions_are_marians_sinusoids():
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    marian = MarianSinusoidalPositionalEmbedding(MAX_LEN, D_MODEL).create_weight()
    torch.testing.assert_close(sinusoidal_table(MAX_LEN, D_MODEL, layout="concat"), marian, atol=1e-6, rtol=0)


def test_every_config_value_is_mapped(hf_dir, imported):
    marian = json.loads((hf_dir / "config.json").read_text())
    c = load_checkpoint(imported).model.config
    vocab_size = len(json.loads((hf_dir / "vocab.json").read_text()))
    assert (c.src_vocab_size, c.tgt_vocab_size, c.d_model, c.n_heads, c.d_ff) == (vocab_size, vocab_size, 64, 4, 128)
    assert (c.n_encoder_layers, c.n_decoder_layers, c.max_len) == (2, 1, MAX_LEN)
    assert (c.dropout, c.attention_dropout, c.activation_dropout) == (0.1, 0.05, 0.02)
    assert c.activation == {"swish": "swish", "gelu": "gelu"}[marian["activation_function"]]
    assert c.pad_id == c.bos_id == vocab_size - 1 and c.eos_id == 0
    assert (c.positional, c.positional_layout, c.norm_first, c.layer_norm_eps) == ("sinusoidal", "concat", False, 1e-5)
    assert c.scale_embeddings and c.share_embeddings and c.tie_output and c.final_logits_bias


def test_tokenizer_gives_marian_tokenizers_ids(hf_dir, imported, sources, multi30k_dir):
    ours = load_checkpoint(imported).tokenizer
    theirs = transformers.MarianTokenizer.from_pretrained(hf_dir)
    targets = read_lines(multi30k_dir / "val.de.gz")[:50]
    expected = theirs(sources, text_target=targets)
    assert [ours.encode_source(t) + [ours.eos_id] for t in sources] == expected["input_ids"]
    assert [ours.encode_target(t) + [ours.eos_id] for t in targets] == expected["labels"]


def test_logits_match(hf_dir, imported, sources, multi30k_dir):
    checkpoint = load_checkpoint(imported)
    tokenizer, pad = checkpoint.tokenizer, checkpoint.tokenizer.pad_id
    src = source_batch(checkpoint, sources)
    targets = read_lines(multi30k_dir / "val.de.gz")[:50]
    tgt = padded([[pad, *tokenizer.encode_target(t)] for t in targets], pad)  # decoder start = pad
    keep = tgt != pad
    keep[:, 0] = True
    hf = transformers.MarianMTModel.from_pretrained(hf_dir).eval()
    with torch.no_grad():
        expected = hf(input_ids=src, attention_mask=src != pad, decoder_input_ids=tgt, decoder_attention_mask=keep)
        logits = checkpoint.model(src, tgt)
    torch.testing.assert_close(logits[keep], expected.logits[keep], atol=1e-4, rtol=0)


@pytest.mark.parametrize("num_beams", [1, 4])
def test_search_matches_generate(hf_dir, imported, sources, num_beams):
    checkpoint = load_checkpoint(imported)
    src = source_batch(checkpoint, sources)
    limits = dict(max_len=OUTPUT_CAP, max_len_a=0.0, max_len_b=OUTPUT_CAP)
    if num_beams == 1:
        ours = greedy_search(checkpoint.model, src, DecodeConfig(block_loops=False, **limits))  # generate loops
    else:
        settings = DecodeConfig(beam_size=num_beams, length_penalty=0.0, block_loops=False, **limits)
        ours = beam_search(checkpoint.model, src, settings)
    assert ours == hf_generate(hf_dir, src, num_beams=num_beams)
    lengths = [len(ids) for ids in ours]
    assert len({tuple(ids) for ids in ours}) >= 20  # the source matters
    assert sum(3 <= n < OUTPUT_CAP for n in lengths) >= 3 and lengths.count(OUTPUT_CAP) >= 5  # EOS and the cap


def test_cli_translates_with_the_imported_checkpoint(hf_dir, imported, sources, tmp_path):
    (tmp_path / "in.en").write_text("".join(s + "\n" for s in sources), encoding="utf-8")
    options = ["--beam-size", "4", "--length-penalty", "0", "--max-len-a", "0", "--max-len-b", str(OUTPUT_CAP)]
    args = ["translate", "--checkpoint", str(imported), "-i", str(tmp_path / "in.en"), "-o", str(tmp_path / "out")]
    args.append("--no-block-loops")  # as Hugging Face's generate
    assert main(args + options) == 0
    checkpoint = load_checkpoint(imported)
    expected = hf_generate(hf_dir, source_batch(checkpoint, sources), num_beams=4)
    lines = (tmp_path / "out").read_text(encoding="utf-8").split("\n")[:-1]
    assert lines == [checkpoint.tokenizer.decode_target(ids) for ids in expected]


def test_an_imported_model_translates_a_paragraph_sentence_by_sentence(imported, sources):
    """Segmentation (translate/segment.py) is the translator's, whatever trained the model: an OPUS-MT model too."""
    translator = Translator.from_checkpoint(imported)
    first, second = (s.rstrip(".") + "." for s in sources[:2])
    [paragraph] = translator.translate([f"{first} {second}\n\n  - {first}"])
    one, two = translator.translate([first, second])
    assert paragraph == f"{one} {two}\n\n  - {one}"


@pytest.mark.parametrize(("share", "tie"), [(False, True), (False, False), (True, False)])
def test_separate_embeddings_and_output(marian_tokenizer_dir, tmp_path, sources, share, tie):
    """Without tie_word_embeddings Hugging Face ties nothing, so neither does the import."""
    hf_dir = save_marian(
        tmp_path / "hf", marian_tokenizer_dir, share_encoder_decoder_embeddings=share, tie_word_embeddings=tie
    )
    assert main(["import", "marian", str(hf_dir), "--out", str(tmp_path / "ckpt")]) == 0
    checkpoint = load_checkpoint(tmp_path / "ckpt")
    c = checkpoint.model.config
    assert (c.share_embeddings, c.tie_output) == (share and tie, tie)
    src = source_batch(checkpoint, sources[:8])
    assert greedy_search(
        checkpoint.model, src, DecodeConfig(max_len=OUTPUT_CAP, max_len_a=0.0, block_loops=False)
    ) == hf_generate(hf_dir, src, num_beams=1)


def test_pytorch_model_bin_is_read_as_plain_tensors(hf_dir, tmp_path):
    copy = shutil.copytree(hf_dir, tmp_path / "bin")
    torch.save(load_file(copy / "model.safetensors"), copy / "pytorch_model.bin")
    (copy / "model.safetensors").unlink()
    assert main(["import", "marian", str(copy), "--out", str(tmp_path / "a")]) == 0
    assert main(["import", "marian", str(hf_dir), "--out", str(tmp_path / "b")]) == 0
    a, b = load_checkpoint(tmp_path / "a").model.state_dict(), load_checkpoint(tmp_path / "b").model.state_dict()
    assert all(torch.equal(a[name], b[name]) for name in b)
    torch.save({"weights": load_file(hf_dir / "model.safetensors"), "code": print}, copy / "pytorch_model.bin")
    with pytest.raises(UserError, match="pytorch_model.bin: cannot be read as plain tensors"):
        load_marian(copy)


def base_config(hf_dir: Path) -> dict:
    return json.loads((hf_dir / "config.json").read_text())


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"normalize_before": True}, "normalize_before"),
        ({"activation_function": "gelu_new"}, "activation_function"),
        ({"decoder_attention_heads": 2}, "decoder_attention_heads"),
        ({"decoder_ffn_dim": 64}, "decoder_ffn_dim"),
        ({"decoder_vocab_size": 7}, "decoder_vocab_size"),
        ({"encoder_layerdrop": 0.1}, "encoder_layerdrop"),
        ({"static_position_embeddings": False}, "static_position_embeddings"),
        ({"model_type": "bart"}, "model_type"),
        ({"bad_words_ids": [[5]]}, "bad_words_ids"),
        ({"d_model": 66}, "d_model"),
        ({"pad_token_id": 10**6, "bad_words_ids": None}, "pad_token_id"),
    ],
)
def test_unsupported_config_values_name_the_field(hf_dir, change, field):
    with pytest.raises(UserError, match=rf"config.json: {field} "):
        marian_model_config({**base_config(hf_dir), **change}, where="config.json")


def test_defaults_are_hugging_faces():
    defaults = transformers.MarianConfig().to_dict()
    checked = [f for f in CONFIG_FIELDS if f.default is not None and f.key in defaults]
    assert len(checked) >= 20
    for f in checked:
        assert f.default == defaults[f.key], f.key


def test_cli_reports_a_bad_checkpoint_in_one_line(hf_dir, tmp_path, capsys):
    copy = shutil.copytree(hf_dir, tmp_path / "bad")
    (copy / "config.json").write_text(json.dumps({**base_config(hf_dir), "normalize_before": True}))
    assert main(["import", "marian", str(copy), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "normalize_before = true is not supported" in err
    assert not (tmp_path / "out").exists()
    (copy / "vocab.json").unlink()
    (copy / "config.json").write_text(json.dumps(base_config(hf_dir)))
    assert main(["import", "marian", str(copy), "--out", str(tmp_path / "out")]) == 2
    assert "vocab.json: no such file" in capsys.readouterr().err


def test_an_imported_model_fine_tunes(imported, multi30k_dir, tmp_path):
    for split, name, n in (("train", "train", 64), ("valid", "val", 8)):
        for lang in ("en", "de"):
            lines = read_lines(multi30k_dir / f"{name}.{lang}.gz")[:n]
            (tmp_path / f"{split}.{lang}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    data = [
        f"--data.{s}_{side}={tmp_path / f'{s}.{lang}'}"
        for s in ("train", "valid")
        for side, lang in (("src", "en"), ("tgt", "de"))
    ]
    recipe = load_recipe(
        None,
        [
            "--data.corpus=files",
            *data,
            f"--train.init_from={imported}",
            f"--train.out_dir={tmp_path / 'run'}",
            "--train.max_steps=2",
            "--train.max_tokens=600",
            "--train.warmup_steps=2",
            "--train.eval_every=2",
            "--train.threads=1",
        ],
    )
    out = train(recipe, progress=False)
    before, after = load_checkpoint(imported), load_checkpoint(out / "last")
    assert after.trainer_state["step"] == 2
    rates = {name: getattr(recipe.model, name) for name in DROPOUT_RATES}  # the recipe's, not Marian's
    assert after.model.config == replace(before.model.config, **rates)
    assert after.tokenizer.encode_source("A dog runs.") == before.tokenizer.encode_source("A dog runs.")
    changed = [n for n, p in after.model.state_dict().items() if not torch.equal(p, before.model.state_dict()[n])]
    assert "src_embed.weight" in changed and "logits_bias" in changed


def test_the_imported_model_runs_in_ctranslate2(hf_dir, imported, sources, tmp_path):
    """Hugging Face -> tnmt -> CTranslate2: decoding starts from <pad>, which is never generated."""
    pytest.importorskip("ctranslate2")
    from tnmt.interop.ctranslate2 import CTranslate2Translator, export_ctranslate2

    export_ctranslate2(imported, tmp_path / "ct2")
    checkpoint = load_checkpoint(imported)
    ids = [checkpoint.tokenizer.encode_source(text) for text in sources]
    translator = CTranslate2Translator(tmp_path / "ct2", threads=1)
    outputs = translator.translate_ids(ids, replace(translator.decode, beam_size=1, max_len=OUTPUT_CAP, max_len_a=0.0))
    assert outputs == hf_generate(hf_dir, source_batch(checkpoint, sources), num_beams=1)


def test_tokenizer_files_are_checked(hf_dir, tmp_path):
    copy = shutil.copytree(hf_dir, tmp_path / "copy")
    vocab = json.loads((hf_dir / "vocab.json").read_text())
    (copy / "target_vocab.json").write_text(json.dumps(vocab))
    with pytest.raises(UserError, match="separate source/target vocabularies"):
        load_marian(copy)
    (copy / "target_vocab.json").unlink()
    del vocab["<pad>"]
    (copy / "vocab.json").write_text(json.dumps(vocab))
    with pytest.raises(UserError, match=r"vocab.json: \d+ pieces, but config.json has vocab_size = \d+"):
        load_marian(copy)


@pytest.fixture(scope="module")
def opus_mt_dir(marian_tokenizer_dir, tmp_path_factory) -> Path:
    """A directory as OPUS-MT's are: swish, and the languages in tokenizer_config.json."""
    directory = tmp_path_factory.mktemp("hub") / "opus-mt-en-de"
    return save_marian(directory, marian_tokenizer_dir, activation_function="swish")


@contextmanager
def serving(checkpoint: Path, log: Path) -> Iterator[str]:
    """`tnmt serve` on a free port in a subprocess, until /ready; stopped with SIGTERM, which must exit 0."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-m", "tnmt", "serve", "--checkpoint", str(checkpoint), "--port", str(port)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).resolve().parent.parent / "src")}
    with log.open("w") as output:
        server = subprocess.Popen([*command, "--threads", "1"], stdout=output, stderr=output, env=env)
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 120
    try:
        while True:
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            try:
                if httpx.get(f"{url}/ready", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        yield url
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(60)
    assert server.returncode == 0, log.read_text()


def test_from_opus_mt_to_a_served_page(opus_mt_dir, sources, tmp_path, capsys):
    """The README's OPUS-MT path: import (the languages read from the model), translate, serve, export to
    CTranslate2. The server translates as `tnmt translate` does; greedy, CTranslate2 as tnmt and Hugging Face."""
    ckpt, texts = tmp_path / "ckpt", sources[:20]
    assert main(["import", "marian", str(opus_mt_dir), "--out", str(ckpt)]) == 0
    assert capsys.readouterr().out == f"imported {opus_mt_dir} into {ckpt}, served as en-de\n"
    (tmp_path / "in.en").write_text("".join(text + "\n" for text in texts), encoding="utf-8")

    def translate(*flags: str) -> list[str]:
        assert main(["translate", "-i", str(tmp_path / "in.en"), "-o", str(tmp_path / "out.de"), *flags]) == 0
        return (tmp_path / "out.de").read_text(encoding="utf-8").split("\n")[:-1]

    translations = translate("--checkpoint", str(ckpt))  # the checkpoint's decoding settings, as the server's
    with serving(ckpt, tmp_path / "serve.log") as url:
        assert httpx.get(url).headers["content-type"].startswith("text/html")  # the page
        assert [m["id"] for m in httpx.get(f"{url}/v1/models").json()["models"]] == ["en-de"]
        reply = httpx.post(f"{url}/v1/translate", json={"text": texts, "source": "en", "target": "de"}, timeout=60)
    assert reply.json()["model"] == "en-de" and [t["text"] for t in reply.json()["translations"]] == translations
    assert len(set(translations)) >= 5  # not all alike: the source matters

    pytest.importorskip("ctranslate2")
    assert main(["export", "ctranslate2", str(ckpt), "--out", str(tmp_path / "ct2")]) == 0
    greedy = ["--beam-size", "1", "--no-block-loops", "--max-len-a", "0", "--max-len-b", str(OUTPUT_CAP)]
    ours = translate("--checkpoint", str(ckpt), *greedy)
    assert translate("--engine", "ctranslate2", "--checkpoint", str(tmp_path / "ct2"), *greedy) == ours
    checkpoint = load_checkpoint(ckpt)
    expected = hf_generate(opus_mt_dir, source_batch(checkpoint, texts), num_beams=1)
    assert ours == [checkpoint.tokenizer.decode_target(ids) for ids in expected]


def test_languages_come_from_the_flags_else_the_model(opus_mt_dir, tmp_path, capsys):
    """tokenizer_config.json's source_lang/target_lang, else an opus-mt-SRC-TGT _name_or_path, else the flags;
    a flag that disagrees with the model wins, with a warning. Nothing is written when a language is missing."""
    copy, out = shutil.copytree(opus_mt_dir, tmp_path / "copy"), tmp_path / "ckpt"

    def edit(name: str, **changes) -> None:
        (copy / name).write_text(json.dumps({**json.loads((copy / name).read_text()), **changes}))

    def imported(*flags: str) -> tuple[tuple[str, str] | None, str]:
        """The languages the checkpoint names (None: refused, exit 2), and stderr."""
        status = main(["import", "marian", str(copy), "--out", str(out), *flags])
        assert status in (0, 2)
        named = read_model_json(out / "config.json")[2] if status == 0 else None
        return (named[0] if named else None), capsys.readouterr().err  # its one direction

    assert imported() == (("en", "de"), "")
    edit("tokenizer_config.json", source_lang=None, target_lang=None)  # MarianTokenizer's defaults
    shutil.rmtree(out)
    named_by = (
        "(tokenizer_config.json's source_lang/target_lang, or an opus-mt-SRC-TGT name in config.json's _name_or_path)"
    )
    error = f"tnmt import: error: {copy}: the model names no "
    assert imported() == (None, f"{error}source or target language {named_by}; pass --source CODE --target CODE\n")
    assert imported("--source", "en") == (None, f"{error}target language {named_by}; pass --target CODE\n")
    assert not out.exists()
    assert imported("--source", "en", "--target", "fr") == (("en", "fr"), "")
    edit("config.json", _name_or_path="/tmp/Helsinki-NLP/opus-mt-tc-big-en-it")
    assert imported() == (("en", "it"), "")
    edit("tokenizer_config.json", target_lang="de")  # the tokenizer's setting before the name
    assert imported() == (("en", "de"), "")
    warning = "tnmt import: WARNING: target language 'fr' replaces the model's 'de' (tokenizer_config.json target_lang)"
    assert imported("--target", "fr") == (("en", "fr"), warning + "\n")
    expected = "tnmt import: error: source language ' ': must be a language code such as 'en'\n"
    assert imported("--source", " ") == (None, expected)


@pytest.mark.parametrize(
    ("name", "pair"),
    [
        ("Helsinki-NLP/opus-mt-en-de", ("en", "de")),
        ("/tmp/Helsinki-NLP/opus-mt-de-en/", ("de", "en")),
        ("Helsinki-NLP/opus-mt-tc-big-en-fr", ("en", "fr")),
        ("Helsinki-NLP/opus-mt-fi-sv", ("fi", "sv")),
        ("Helsinki-NLP/opus-mt-en-ROMANCE", None),  # a group of languages, chosen per sentence with >>fra<<
        ("someone/opus-mt-en-de-finetuned", None),
        ("t5-small", None),
        ("", None),
    ],
)
def test_opus_mt_names(name, pair):
    assert opus_mt_languages(name) == pair
