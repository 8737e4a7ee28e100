"""Sentencepiece models as tnmt trains and reads them: trained in memory with the settings every tnmt tokenizer
shares (ids 0-3 for pad, BOS, EOS and unknown; identity normalisation; byte fallback), and a model file read with
a one-line error when it is not one. The `Tokenizer` (data/tokenizer.py) is what the rest of tnmt uses.
"""

import io
from collections.abc import Iterable, Sequence
from pathlib import Path

import sentencepiece as spm

from tnmt.errors import UserError, reading_file


def train_model(
    texts: Iterable[str],
    vocab_size: int,
    model_type: str,
    character_coverage: float,
    *,
    control_symbols: Sequence[str] = (),
) -> spm.SentencePieceProcessor:
    """A sentencepiece model of `texts` with tnmt's settings (see `Tokenizer.train`), in memory."""
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(texts),
            model_writer=model,
            vocab_size=vocab_size,
            model_type=model_type,
            character_coverage=character_coverage,
            pad_id=0,
            bos_id=1,
            eos_id=2,
            unk_id=3,
            normalization_rule_name="identity",
            byte_fallback=True,
            control_symbols=list(control_symbols),
            num_threads=1,
            minloglevel=2,
        )
    except RuntimeError as err:
        reason = str(err).rsplit("] ", 1)[-1]  # drop sentencepiece's "INTERNAL: file.cc(123) [check]"
        reason = reason.strip() or str(err).strip()  # the check itself when it has no text
        raise UserError(f"cannot train the tokenizer (vocab_size={vocab_size}): {reason}") from None
    return spm.SentencePieceProcessor(model_proto=model.getvalue())


def load_model(path: Path) -> spm.SentencePieceProcessor:
    """A sentencepiece model file, read and checked.

    Raises:
        UserError: no such file, or not a sentencepiece model.
    """
    with reading_file(path):
        data = path.read_bytes()
    if data:  # sentencepiece would accept b"" as a model without pieces
        try:
            return spm.SentencePieceProcessor(model_proto=data)
        except (RuntimeError, ValueError):  # ValueError: a damaged proto's string is not UTF-8
            pass
    raise UserError(f"{path}: not a sentencepiece model (corrupt or wrong file)")
