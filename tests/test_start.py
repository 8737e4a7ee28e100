"""How a training run starts: from scratch, from `train.init_from`, or resumed, with the recipe's optimizer
settings and dropout rates and the checkpoint's shape."""

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from tnmt.checkpoint import load_checkpoint
from tnmt.config import ModelConfig, TrainConfig
from tnmt.data.prepared import PreparedPairs
from tnmt.device import MixedPrecision
from tnmt.errors import UserError
from tnmt.model import Transformer
from tnmt.train.loop import train
from tnmt.train.start import TrainState, make_optimizer
from tnmt.translate.translator import Translator


def test_weight_decay_shrinks_matrices_and_spares_vectors():
    """With zero gradients Adam's own step is 0, so all that moves a weight is the decoupled decay."""
    cfg = TrainConfig(weight_decay=0.5)
    model = Transformer(ModelConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=16, d_ff=32, n_heads=2))
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    fp32 = MixedPrecision(None, scaled=False)
    optimizer, _ = make_optimizer(model, cfg, torch.device("cpu"), fp32, TrainState(), None)
    for group in optimizer.param_groups:
        group["lr"] = 0.1
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()
    for name, p in model.named_parameters():
        expected = before[name] * (1 - 0.1 * 0.5) if p.dim() >= 2 else before[name]
        torch.testing.assert_close(p.detach(), expected, msg=name)


def test_a_resumed_run_takes_the_recipes_optimizer_settings(tiny_recipe, tmp_path):
    train(tiny_recipe(tmp_path / "r", "--train.max_steps=4", "--train.weight_decay=0.1"), progress=False)
    again = tiny_recipe(tmp_path / "r", "--train.max_steps=6", "--train.weight_decay=0.2")
    out = train(again, resume=True, progress=False)
    groups = load_checkpoint(out / "last").optimizer_state["param_groups"]
    assert [g["weight_decay"] for g in groups] == [0.2, 0.0]
    with pytest.raises(UserError, match=r"saved with weight decay; resume with train.weight_decay > 0 as it was"):
        train(tiny_recipe(tmp_path / "r", "--train.max_steps=8"), resume=True, progress=False)


def test_a_resumed_run_takes_the_recipes_dropout_rates(tiny_recipe, tmp_path):
    # the two copies resume the same checkpoint: equal weights after would mean the new rate was ignored
    train(tiny_recipe(tmp_path / "a", "--train.max_steps=4", "--model.dropout=0.3"), progress=False)
    shutil.copytree(tmp_path / "a", tmp_path / "b", symlinks=True)
    for run, rate in (("a", "0.3"), ("b", "0.0")):
        again = tiny_recipe(tmp_path / run, "--train.max_steps=6", f"--model.dropout={rate}")
        train(again, resume=True, progress=False)
    same, lower = (load_checkpoint(tmp_path / run / "last") for run in ("a", "b"))
    assert (same.model.config.dropout, lower.model.config.dropout) == (0.3, 0.0)
    assert json.loads((tmp_path / "b" / "recipe.json").read_text())["model"]["dropout"] == 0.0
    assert any(not torch.equal(p, q) for p, q in zip(same.model.parameters(), lower.model.parameters(), strict=True))


def test_a_resumed_run_keeps_its_shape(tiny_recipe, tmp_path):
    train(tiny_recipe(tmp_path / "r", "--train.max_steps=2"), progress=False)
    wider = tiny_recipe(tmp_path / "r", "--train.max_steps=4", "--model.d_ff=128")
    with pytest.raises(UserError, match=r"trained with model.d_ff = 64, the recipe asks for 128; a resumed run keeps"):
        train(wider, resume=True, progress=False)


def test_a_run_with_separate_vocabularies_embeds_each_side_by_its_own_ids(tiny_recipe, tmp_path):
    sides = ("--data.joint_vocabulary=false", "--model.share_embeddings=false", "--train.max_steps=4")
    run = train(tiny_recipe(tmp_path / "sep", *sides), progress=False)
    checkpoint = load_checkpoint(run / "last")
    tokenizer, model = checkpoint.tokenizer, checkpoint.model
    assert tokenizer.encode_source("tremila") != tokenizer.encode_target("tremila")  # English pieces, Italian pieces
    assert model.config.src_vocab_size == tokenizer.source_vocab_size
    assert model.config.tgt_vocab_size == tokenizer.vocab_size
    assert model.src_embed is not model.tgt_embed and model.output.weight is model.tgt_embed.weight
    (translation,) = Translator(model, tokenizer).translate(["three thousand"])
    assert isinstance(translation, str)


def test_resume_without_a_checkpoint_is_a_clear_error(tiny_recipe, tmp_path):
    with pytest.raises(UserError, match="nothing to resume"):
        train(tiny_recipe(tmp_path / "none", "--train.max_steps=2"), resume=True, progress=False)


def test_fine_tuning_starts_from_a_checkpoint(tiny_recipe, tmp_path):
    first = train(tiny_recipe(tmp_path / "pre", "--train.max_steps=4"), progress=False)
    tuned = train(
        tiny_recipe(tmp_path / "ft", "--train.max_steps=4", f"--train.init_from={first / 'last'}"),
        progress=False,
    )
    before, after = load_checkpoint(first / "last"), load_checkpoint(tuned / "last")
    assert after.model.config == before.model.config
    assert after.tokenizer.vocab_size == before.tokenizer.vocab_size
    # the shape comes from the checkpoint whatever the recipe's [model] says, the dropout rate from the recipe
    other = ["--train.max_steps=2", f"--train.init_from={first / 'last'}", "--model.d_ff=128", "--model.dropout=0.2"]
    tuned = train(tiny_recipe(tmp_path / "ft2", *other), progress=False)
    assert load_checkpoint(tuned / "last").model.config == replace(before.model.config, dropout=0.2)
    recorded = json.loads((tuned / "recipe.json").read_text())["model"]
    assert (recorded["d_ff"], recorded["dropout"]) == (before.model.config.d_ff, 0.2)


@pytest.fixture
def long_pairs(numbers_corpus, tmp_path) -> list[str]:
    """Overrides training on the numbers corpus plus pairs of 1 to 40 repeated words ("seven seven ..." ->
    "sette sette ..."), one token each: sides under, at and past any max_len the tests below use."""
    for lang, word in (("en", "seven"), ("it", "sette")):
        repeated = "".join(f"{' '.join([word] * k)}\n" for k in range(1, 41))
        (tmp_path / f"train.{lang}").write_text((numbers_corpus / f"train.{lang}").read_text() + repeated)
    return [f"--data.train_src={tmp_path / 'train.en'}", f"--data.train_tgt={tmp_path / 'train.it'}"]


def kept_sides(prepared: PreparedPairs) -> list[int]:
    """The longer side of every prepared pair, in tokens (without BOS/EOS)."""
    return [max(len(src), len(tgt)) for src, tgt in prepared.pairs(range(len(prepared)))]


def expected_kept(prepared: PreparedPairs, corpus: list[str], longest: int) -> int:
    """How many training pairs have both sides of 1 to `longest` tokens under the prepared corpus's tokenizer."""
    tokenizer = prepared.tokenizer()
    lines = [(Path(path).read_text().splitlines()) for path in corpus]
    src, tgt = tokenizer.encode_source_batch(lines[0]), tokenizer.encode_target_batch(lines[1])
    return sum(1 <= len(s) <= longest and 1 <= len(t) <= longest for s, t in zip(src, tgt, strict=True))


@pytest.mark.parametrize(
    "options",
    [[], ["--data.subword_samples=2"], ["--train.distill_at_step=2", "--decode.beam_size=1"], ["init_from"]],
    ids=["fresh", "subword_samples", "self_distillation", "init_from_a_smaller_model"],
)
def test_no_training_pair_outgrows_the_models_positions(tiny_recipe, long_pairs, tmp_path, options):
    """`data.max_tokens_per_sentence` is 100, the model has 16 positions (12 for the checkpoint fine-tuning starts
    from, whatever the recipe asks): every kept side fits them with its BOS or EOS (15 or 11 tokens, the
    longest kept), every pair that fits is kept, and training on the rest, sampled segmentations and the model's
    own translations included, never meets a sequence over max_len."""
    max_len, model = 16, ["--model.max_len=16"]
    if options == ["init_from"]:
        max_len, pre = 12, tiny_recipe(tmp_path / "pre", *long_pairs, "--model.max_len=12", "--train.max_steps=2")
        options, model = [f"--train.init_from={train(pre, progress=False) / 'last'}"], ["--model.max_len=64"]
    recipe = tiny_recipe(tmp_path / "run", *long_pairs, *model, *options, "--train.max_steps=6", "--train.eval_every=6")
    out = train(recipe, progress=False)  # a longer pair would stop it: "sequence of N positions exceeds max_len"
    prepared = PreparedPairs(out / "prepared")
    assert max(kept_sides(prepared)) == max_len - 1
    assert len(prepared) == expected_kept(prepared, [recipe.data.train_src, recipe.data.train_tgt], max_len - 1)
    for sample in range(1, 1 + recipe.data.subword_samples):
        assert max(kept_sides(PreparedPairs(out / "prepared", segmentation=sample))) <= max_len - 1
    if recipe.train.distill_at_step:
        assert max(kept_sides(PreparedPairs(out / "distilled" / "prepared"))) <= max_len - 1


def test_a_run_stores_the_training_pairs_length_ratio_bounds_unless_the_recipe_sets_them(tiny_recipe, tmp_path):
    from tnmt.checkpoint import load_checkpoint
    from tnmt.data.prepared import PreparedPairs
    from tnmt.translate.evidence import length_ratio_bounds

    out = train(tiny_recipe(tmp_path / "r", "--train.max_steps=2"), progress=False)
    stored = load_checkpoint(out / "last").decode
    expected = length_ratio_bounds(*PreparedPairs(tmp_path / "r" / "prepared").side_lengths())
    assert (stored.length_ratio_min, stored.length_ratio_max) == expected
    assert 0 < expected[0] < 1 < expected[1]
    own = train(tiny_recipe(tmp_path / "o", "--train.max_steps=2", "--decode.length_ratio_max=3.5"), progress=False)
    assert (
        load_checkpoint(own / "last").decode.length_ratio_min,
        load_checkpoint(own / "last").decode.length_ratio_max,
    ) == (0.0, 3.5)
