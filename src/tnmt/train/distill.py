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
"""

import logging
import time
from dataclasses import replace
from pathlib import Path

from tnmt.data.dataset import training_pairs
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
    """Where a run keeps its training sources and the model's translations of them."""
    directory = Path(recipe.train.out_dir) / "distilled"
    return directory / f"train.{recipe.data.src_lang}", directory / f"train.{recipe.data.tgt_lang}"


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
    if not kept:  # e.g. a model distilled before it has learnt anything
        if world.is_main:
            log.warning("self-distillation: no translation has text; training goes on over the original pairs only")
        return 0
    if world.is_main:
        source_file, target_file = distilled_files(recipe)
        source_file.parent.mkdir(parents=True, exist_ok=True)
        for path, lines in zip((source_file, target_file), zip(*kept, strict=True), strict=True):
            atomic_write_text(path, "".join(f"{line}\n" for line in lines))
        log.info(f"self-distillation: {len(kept)} pairs in {target_file}, {time.monotonic() - started:.0f} s")
    return len(kept)


def prepare_distilled(recipe: Recipe, tokenizer: Tokenizer, model_max_len: int) -> PreparedPairs:
    """The (source, translation) pairs, prepared like the training corpus (same length filter, tokenizer)."""
    source_file, target_file = distilled_files(recipe)
    data = replace(
        recipe.data,
        corpus="files",
        train_src=str(source_file),
        train_tgt=str(target_file),
        valid_src=str(source_file),  # a "files" corpus names a validation pair; preparing the training pairs ignores it
        valid_tgt=str(target_file),
        subword_samples=0,  # the translations are one segmentation's: sampling would undo what distillation chose
    )
    directory = source_file.parent / "prepared"
    return prepare(data, directory, max_len=recipe.longest_side(model_max_len), tokenizer=tokenizer)
