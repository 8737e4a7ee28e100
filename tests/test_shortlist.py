"""data/shortlist.py: the vocabulary shortlist learned from the training pairs, stored with a checkpoint, and the
search that projects onto a batch's candidates (translate/door.py, translate/frozen.py's ShortlistProjection)."""

import subprocess
import sys
from dataclasses import replace

import pytest
import torch

from tnmt.checkpoint import load_checkpoint, save_checkpoint
from tnmt.config import DecodeConfig
from tnmt.data.shortlist import SHORTLIST_FILE, Shortlist
from tnmt.errors import UserError
from tnmt.translate.frozen import ShortlistProjection
from tnmt.translate.prepared import Source
from tnmt.translate.translator import Translator

# source piece 5 is always translated by 7, 6 by 8; 9 occurs everywhere (a function word); 3 and 4 are rare
PAIRS = [([5, 9], [7, 9]), ([5, 9, 3], [7, 9, 4]), ([6, 9], [8, 9]), ([6, 5], [8, 7]), ([9], [9])]


def learned(**kwargs) -> Shortlist:
    return Shortlist.learn(iter(PAIRS), source_vocab_size=12, target_vocab_size=12, **kwargs)


def test_each_source_piece_keeps_its_most_associated_target_pieces_first():
    shortlist = learned(translations=2, frequent=1)
    assert shortlist.translations[5].tolist() == [7, 9]  # Dice 1 for 7, 2*2/(3+4) for 9, 2*1/(3+2) for 8
    assert shortlist.translations[6].tolist() == [8, 7]  # Dice 1 for 8, 2*1/(2+3) for 7 before 2*1/(2+4) for 9
    assert shortlist.translations[3].tolist() == [4, 7]  # its one pair: 4 (Dice 1), then 7 (2/4) before 9 (2/5)
    assert shortlist.translations[11].tolist() == [-1, -1]  # never seen
    assert shortlist.frequent.tolist() == [9]  # the most common target piece


def test_a_batchs_candidates_are_its_sources_translations_the_frequent_pieces_and_the_named_ids():
    shortlist = learned(translations=1, frequent=1)
    assert shortlist.candidates(torch.tensor([[5, 11]]), {2}).tolist() == [2, 7, 9]  # 11: no translation yet
    assert shortlist.candidates(torch.tensor([6, 5, 6]), ()).tolist() == [7, 8, 9]  # sorted, each once
    wide = learned(translations=3, frequent=4)  # most of a 12-piece vocabulary: the batch is projected in full
    assert wide.candidates(torch.tensor([5, 6, 3]), {0, 1, 2}) is None


def test_a_shortlist_round_trips_through_a_checkpoint_and_a_wrong_one_is_refused(tiny_checkpoint, tmp_path):
    checkpoint = load_checkpoint(tiny_checkpoint, training=False)
    vocab = checkpoint.model.config.tgt_vocab_size
    shortlist = Shortlist(torch.full((vocab, 3), -1).index_fill_(1, torch.tensor([0]), 7), torch.tensor([2, 3]),
                          target_vocab_size=vocab)  # fmt: skip
    out = save_checkpoint(tmp_path / "ck", checkpoint.model, checkpoint.tokenizer, shortlist=shortlist)
    loaded = load_checkpoint(out).shortlist
    assert torch.equal(loaded.translations, shortlist.translations) and torch.equal(loaded.frequent, shortlist.frequent)
    assert load_checkpoint(tiny_checkpoint).shortlist is None  # a checkpoint without one
    Shortlist(torch.zeros(5, 1, dtype=torch.long), torch.tensor([1]), target_vocab_size=vocab).save(out)
    with pytest.raises(UserError, match=rf"{SHORTLIST_FILE}: rows for 5 source pieces, not {vocab}"):
        load_checkpoint(out)
    (out / SHORTLIST_FILE).write_bytes(b"not safetensors")
    with pytest.raises(UserError, match=f"{SHORTLIST_FILE}: not a shortlist of this model"):
        load_checkpoint(out)
    with pytest.raises(ValueError, match="target ids below"):
        Shortlist(torch.tensor([[vocab]]), torch.tensor([1]), target_vocab_size=vocab)


def test_the_projection_is_the_full_one_on_the_candidates_and_minus_infinity_elsewhere():
    torch.manual_seed(0)
    weight, bias, features = torch.randn(20, 8), torch.randn(20), torch.randn(3, 8)
    candidates = torch.tensor([1, 4, 5, 19])
    logits = ShortlistProjection(weight, bias, candidates)(features)
    full = features @ weight.T + bias
    torch.testing.assert_close(logits[:, candidates], full[:, candidates])
    outside = torch.ones(20, dtype=torch.bool).index_fill_(0, candidates, False)
    assert bool((logits[:, outside] == float("-inf")).all())
    assert ShortlistProjection(weight, None, candidates)(features)[:, candidates].allclose(
        features @ weight[candidates].T
    )


SOURCES = [Source([5, 6, 7, 8], None, 1), Source([9, 10], None, 1)]


def test_a_search_on_a_shortlist_writes_only_candidates_and_with_every_piece_it_wants_translates_the_same(
    tiny_checkpoint,
):
    translator = Translator.from_checkpoint(tiny_checkpoint)
    door, vocab = translator.door, translator.model.config.tgt_vocab_size
    for beam in (1, 2):
        settings = DecodeConfig(beam_size=beam, max_len=6, block_loops=False)
        full = [h[0].tokens for h in door.search(SOURCES, settings)[1]]
        wanted = sorted({t for tokens in full for t in tokens} | {2})
        door.shortlist = Shortlist(torch.full((vocab, 1), -1), torch.tensor(wanted), target_vocab_size=vocab)
        on = replace(settings, shortlist=True)
        assert [h[0].tokens for h in door.search(SOURCES, on)[1]] == full  # every piece the full search wrote
        without_first = [t for t in wanted if t != full[0][0]]
        door.shortlist = Shortlist(torch.full((vocab, 1), -1), torch.tensor(without_first), target_vocab_size=vocab)
        narrowed = [h[0].tokens for h in door.search(SOURCES, on)[1]]
        assert narrowed[0][:1] != full[0][:1] and all(t in without_first for tokens in narrowed for t in tokens)
        assert [h[0].tokens for h in door.search(SOURCES, settings)[1]] == full  # off: the whole vocabulary
        door.shortlist = None


def test_a_forced_prefix_is_always_among_the_candidates(tiny_checkpoint):
    from tnmt.decode.constraints import Constraints

    translator = Translator.from_checkpoint(tiny_checkpoint)
    door, vocab = translator.door, translator.model.config.tgt_vocab_size
    door.shortlist = Shortlist(torch.full((vocab, 1), -1), torch.tensor([3, 4]), target_vocab_size=vocab)
    settings = DecodeConfig(beam_size=1, max_len=4, shortlist=True)
    found = door.search(SOURCES[:1], settings, constraints=[Constraints(prefix=(20, 21))])[1]
    assert found[0][0].tokens[:2] == [20, 21]


def test_training_writes_the_shortlist_into_its_checkpoints_and_tnmt_shortlist_relearns_it(tiny_run, tmp_path):
    best = tiny_run / "best"
    learned_in_training = load_checkpoint(best).shortlist
    assert learned_in_training is not None
    command = [sys.executable, "-m", "tnmt", "shortlist", str(best), "--prepared", str(tmp_path)]
    refused = subprocess.run(command, capture_output=True, text=True)
    assert refused.returncode == 2 and f"{tmp_path}: not a prepared corpus" in refused.stderr
    prepared = next(p.parent for p in tiny_run.rglob("manifest.json") if (p.parent / "src.ids").is_file())
    command[-1] = str(prepared)
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    assert "learned a shortlist from" in done.stdout
    relearned = load_checkpoint(best).shortlist
    assert torch.equal(relearned.translations, learned_in_training.translations)
