"""Sequence-level knowledge distillation from the model itself (Kim & Rush, 2016), once, during a run.

From `train.distill_at_step` on (at the next epoch start), the model being trained translates every
training source with the recipe's [decode] settings, using the weights validation measures (the EMA
when there is one), and training goes on over the original pairs plus (source, translation) pairs.
Why it can help a model that has stopped improving (the usual reading of Kim & Rush's results): a human
reference is one of many valid translations, and a small model spends capacity on their variety; its
own beam output is one consistent mode per source, an easier target that sharpens what it already
knows, while the original pairs keep it tied to the references. On Multi30k en->de, continued from the
two-hour plateau, validation BLEU rose ~0.3 over a run without it (benchmarks/NOTEBOOK.md).

The sources and their translations are written to `<out>/distilled/train.<src|tgt>` (atomically) and
prepared beside them with the run's tokenizer, so a resumed run reads the same pairs. Translating the
corpus is one beam search over it, shared by the ranks of a torchrun launch (Multi30k's 29k sentences: ~3
minutes on 2 CPU cores), inside the run's time budget; at WMT scale translate offline (`tnmt translate`)
and train on a "files" corpus instead.

Data diversification (Nguyen et al., 2020; `train.diversify`) is the same pass made both ways by a bidirectional
run (data.first_direction_from): when the run narrows to its first direction, the model, trained on both, writes
forward translations of that direction's sources (as above) and backward translations of its targets (synthetic
sources for real targets, as back-translation makes), and the first direction trains on the union. The paper
trains separate forward and backward models, several of each; inside one CPU budget there is room for none of them,
while the bidirectional run already holds both in one set of weights, at the cost of two translation passes.
"""

import logging
import time
from dataclasses import replace
from pathlib import Path

from tnmt.config import DataConfig
from tnmt.data.dataset import training_pairs
from tnmt.data.multiway import direction_data
from tnmt.data.prepare import prepare
from tnmt.data.prepared import PreparedPairs
from tnmt.data.tokenizer import Tokenizer
from tnmt.io import atomic_write_text
from tnmt.model import Transformer
from tnmt.recipe import Recipe
from tnmt.train.distributed import World, translate_across
from tnmt.translate.translator import Translator

log = logging.getLogger("tnmt")


def distilled_files(recipe: Recipe) -> tuple[Path, Path]:
    """Where a run keeps the pairs its model's translations make, named by the languages of its (first) direction."""
    source, target = recipe.data.trained_directions[0]
    directory = Path(recipe.train.out_dir) / "distilled"
    return directory / f"train.{source}", directory / f"train.{target}"


def write_translations(model: Transformer, tokenizer: Tokenizer, recipe: Recipe, *, world: World) -> int:
    """Translate the training sources (the first `data.max_train_pairs` if set; the ranks share the work)
    and write the pairs whose translation has text to `distilled_files` (rank 0 writes); return how many
    (0: none, and no file is written)."""
    sources = [source for source, _ in training_pairs(recipe.data)]
    if world.is_main:
        log.info(f"self-distillation: translating {len(sources)} training sources (beam {recipe.decode.beam_size})")
    started = time.monotonic()
    translations = translate_across(world, Translator(model, tokenizer, recipe.decode), sources)
    kept = [(source, target) for source, target in zip(sources, translations, strict=True) if target.strip()]
    return _write(recipe, kept, world=world, what="self-distillation", started=started)


def write_diversified(model: Transformer, tokenizer: Tokenizer, recipe: Recipe, *, world: World) -> int:
    """Data diversification with one bidirectional model: translate the first direction's training sources into
    its target language and its targets back into its source language (the ranks share the work), and write the
    pairs that adds to the corpus (`added_pairs`) to `distilled_files` (rank 0 writes); return how many."""
    source, target = recipe.data.trained_directions[0]
    originals = list(training_pairs(_pair_data(recipe)))  # the first `data.max_train_pairs` if set
    if world.is_main:
        log.info(
            f"data diversification: translating {len(originals)} training pairs {source}->{target} and "
            f"{target}->{source} (beam {recipe.decode.beam_size})"
        )
    started = time.monotonic()
    translator = Translator(model, tokenizer, recipe.decode)
    forward = translate_across(world, translator.for_pair(source, target), [pair[0] for pair in originals])
    backward = translate_across(world, translator.for_pair(target, source), [pair[1] for pair in originals])
    added = added_pairs(originals, forward, backward)
    if world.is_main:
        log.info(
            f"data diversification: {len(originals)} pairs + {len(originals)} forward and {len(originals)} backward "
            f"translations = {len(originals) + len(added)} distinct pairs ({2 * len(originals) - len(added)} of the "
            "translations were empty or repeated a pair)"
        )
    return _write(recipe, added, world=world, what="data diversification", started=started)


def added_pairs(originals: list[tuple[str, str]], forward: list[str], backward: list[str]) -> list[tuple[str, str]]:
    """What the union of the corpus and its translations adds to `originals`: (source, forward translation) pairs,
    then (backward translation, target) pairs, in corpus order, without an empty side, without the pairs the
    corpus already has (a translation that equals its reference teaches nothing new) and each pair once."""
    sources, targets = [pair[0] for pair in originals], [pair[1] for pair in originals]
    seen, added = set(originals), []
    for pair in [*zip(sources, forward, strict=True), *zip(backward, targets, strict=True)]:
        if pair[0].strip() and pair[1].strip() and pair not in seen:
            seen.add(pair)
            added.append(pair)
    return added


def _write(recipe: Recipe, pairs: list[tuple[str, str]], *, world: World, what: str, started: float) -> int:
    """Write `pairs` to `distilled_files` (rank 0, atomically) unless there are none; return how many."""
    if not pairs:  # e.g. a model distilled before it has learnt anything
        if world.is_main:
            log.warning(f"{what}: no translation has text; training goes on over the original pairs only")
        return 0
    if world.is_main:
        source_file, target_file = distilled_files(recipe)
        source_file.parent.mkdir(parents=True, exist_ok=True)
        for path, lines in zip((source_file, target_file), zip(*pairs, strict=True), strict=True):
            atomic_write_text(path, "".join(f"{line}\n" for line in lines))
        log.info(f"{what}: {len(pairs)} pairs in {target_file}, {time.monotonic() - started:.0f} s")
    return len(pairs)


def prepare_distilled(recipe: Recipe, tokenizer: Tokenizer, model_max_len: int) -> PreparedPairs:
    """The translated pairs, prepared like the training corpus (same length filter, tokenizer)."""
    source_file, target_file = distilled_files(recipe)
    data = replace(
        _pair_data(recipe),
        corpus="files",
        train_src=str(source_file),
        train_tgt=str(target_file),
        valid_src=str(source_file),  # a "files" corpus names a validation pair; preparing the training pairs ignores it
        valid_tgt=str(target_file),
        subword_samples=0,  # the translations are one segmentation's: sampling would undo what distillation chose
        max_train_pairs=0,  # the limit chose the pairs translated; diversification writes more than it allows
    )
    directory = source_file.parent / "prepared"
    return prepare(data, directory, max_len=recipe.longest_side(model_max_len), tokenizer=tokenizer)


def _pair_data(recipe: Recipe) -> DataConfig:
    """The data config of the pair the translations are made for: the recipe's, or its first direction's."""
    data = recipe.data
    return direction_data(data, data.trained_directions[0]) if data.multilingual else data
