"""`tnmt quickstart`: the whole pipeline in one command, on real data when it can.

With Multi30k available (TNMT_DATA_DIR, the cache, or a download) it trains a time-boxed version of
configs/multi30k_en_de.toml, reports sacreBLEU on test_2016_flickr, translates a few sentences and
draws attention maps and training curves. Offline it says so and runs the same pipeline on a task it
generates itself: English number words -> Italian number words ("three hundred and twelve" ->
"trecentododici"), small enough to learn in a couple of minutes on two cores. Each example is shown with its
reference and whether the model got it right, and the first it got wrong is replayed through the models the run
kept (views/replay.py): where the run was heading.
"""

import random
import shlex
from dataclasses import replace
from importlib.resources import files
from pathlib import Path

import sacrebleu
from num2words import num2words

from tnmt.config import PRESETS, DataConfig, DecodeConfig, TrainConfig
from tnmt.data.corpus import read_parallel
from tnmt.data.dataset import corpus_files
from tnmt.data.multi30k import find_multi30k
from tnmt.evaluate import score
from tnmt.io import atomic_write_text, check_output_directory
from tnmt.recipe import Recipe, load_recipe
from tnmt.train.loop import train
from tnmt.translate.translator import Translator
from tnmt.views.heatmaps import plot_attention
from tnmt.views.replay import format_trajectory, replay

NUMBER_EXAMPLES = (312, 42, 19_801)  # the offline task's examples; Multi30k's are the test set's first three


def quickstart(out: Path, *, minutes: float = 10.0, offline: bool = False, max_steps: int = 0) -> float:
    """Train, evaluate on held-out data, translate examples, draw pictures; returns test chrF.

    `max_steps` caps training further (smoke tests); 0 keeps the task's budget.
    """
    check_output_directory(out)
    root = None if offline else find_multi30k()
    if root is None:
        print(
            "Multi30k is not available (no TNMT_DATA_DIR, no cache, no network): "
            "running the offline number-words task instead."
        )
        task, (recipe, test_src, test_ref) = "numbers", numbers_task(out / "data")
    else:
        task, recipe = "multi30k", load_recipe(str(files("tnmt") / "configs" / "multi30k_en_de.toml"))
        test_src, test_ref = corpus_files(recipe.data, "test_2016_flickr")
        recipe = replace(recipe, train=replace(recipe.train, max_minutes=minutes, max_steps=0))
    train_config = replace(recipe.train, out_dir=str(out / "run"), max_steps=max_steps or recipe.train.max_steps)
    recipe = replace(recipe, train=train_config)
    print(f"training on {task} for {budget(recipe.train)}; checkpoints and metrics in {recipe.train.out_dir}")
    run = train(recipe)
    translator = Translator.from_checkpoint(run / "best")
    test = read_parallel(test_src, test_ref, normalize_whitespace=True)
    hypotheses = translator.translate(test.src)
    scores = score(hypotheses, test.tgt)
    print(f"\ntest set ({len(test)} sentences, beam {translator.decode.beam_size}):")
    if task == "numbers":
        exact = sum(h == r for h, r in zip(hypotheses, test.tgt, strict=True)) / len(test)
        print(f"exact matches: {exact:.1%}\nchrF = {scores.chrf:.2f}  ({scores.chrf_signature})")
        print(f"(BLEU = {scores.bleu:.2f} means little here: an Italian number is one word, so no 4-grams match)\n")
    else:
        print(f"{scores.format()}\n")
    examples = example_pairs(task, test.src, test.tgt)
    sources = [source for source, _ in examples]
    wrong = show_examples(examples, translator.translate(sources))
    src_pieces, tgt_pieces, maps = translator.attention(sources[0])
    pictures = plot_attention(maps, src_pieces, tgt_pieces, out / "attention")
    print(f"\nattention maps: {len(pictures)} PNGs in {out / 'attention'}; training curves: {run / 'curves.png'}")
    source, reference = examples[wrong[0] if wrong else 0]
    replayed = replay(run, source, reference=reference)
    print(f"\nwhere the run was heading on {source!r} (reference: {reference!r}), model by model it kept:")
    print(format_trajectory(replayed))
    print(next_steps(run, source, reference))
    return scores.chrf


def example_pairs(task: str, test_src: list[str], test_ref: list[str]) -> list[tuple[str, str]]:
    """The examples the demo translates, each with its reference."""
    if task == "numbers":
        return [(num2words(n), num2words(n, lang="it")) for n in NUMBER_EXAMPLES]
    return list(zip(test_src[:3], test_ref[:3], strict=True))


def show_examples(examples: list[tuple[str, str]], outputs: list[str]) -> list[int]:
    """Print each example's translation beside its reference, saying whether it is right (exactly the reference;
    else its chrF against it); the indices of the wrong ones."""
    wrong = []
    for k, ((source, reference), output) in enumerate(zip(examples, outputs, strict=True)):
        right = output == reference
        verdict = "right" if right else f"wrong (chrF {sacrebleu.sentence_chrf(output, [reference]).score:.0f})"
        print(f"  {source}\n  -> {output}   {verdict}" + ("" if right else f"\n     reference: {reference}"))
        if not right:
            wrong.append(k)
    return wrong


def next_steps(run: Path, sentence: str, reference: str) -> str:
    """The commands to run next on the run the demo left, each with what it shows.

    Shell-quoted, so that a path or a sentence with spaces pastes as one argument.
    """
    checkpoint = run / "best"
    commands = [
        (["replay", "--run", str(run), sentence, "--reference", reference], "how the run learned it, model by model"),
        (["explain", "--checkpoint", str(checkpoint), sentence], "the search, step by step"),
        (["inspect", "--checkpoint", str(checkpoint), sentence], "every stage of the forward pass, layer by layer"),
        (
            ["serve", "--checkpoint", str(checkpoint)],
            'a page at http://127.0.0.1:8000 with the "Step through the search", "Inside the model" and "Watch it'
            ' learn" views',
        ),
    ]
    lines = [f"  {shlex.join(['tnmt', *argv])}\n      {what}" for argv, what in commands]
    return "\nnext, with the run it left:\n" + "\n".join(lines)


def budget(config: TrainConfig) -> str:
    """The training budget in words, e.g. "up to 600 updates" or "10 minutes or 600 updates"."""
    parts = [f"{config.max_minutes:g} minutes"] if config.max_minutes else []
    parts += [f"{config.max_steps} updates"] if config.max_steps else []
    parts += [f"{config.max_epochs} epochs"] if config.max_epochs else []
    return "up to " + " or ".join(parts)


def numbers_task(directory: Path, *, seed: int = 0) -> tuple[Recipe, Path, Path]:
    """Write the number-words files; return the task's recipe and the test source/reference paths.

    The model is small enough to learn number words in a couple of minutes on two cores.
    """
    paths = write_numbers_task(directory, seed=seed)
    corpus = {
        f"{key}_{side}": str(paths[split, lang])
        for key, split in (("train", "train"), ("valid", "valid"))
        for side, lang in (("src", "en"), ("tgt", "it"))
    }
    recipe = Recipe(
        data=DataConfig(corpus="files", src_lang="en", tgt_lang="it", vocab_size=1000, max_valid_pairs=300, **corpus),
        model=replace(PRESETS["small"], d_model=128, d_ff=512, n_encoder_layers=2, n_decoder_layers=2),
        train=TrainConfig(
            max_steps=600,
            max_tokens=3000,
            warmup_steps=200,
            clip_norm=1.0,
            eval_every=300,
            eval_beam_size=1,  # greedy validation, as before DecodeConfig moved: picks the same checkpoints
            precision="auto",
            best_metric="chrf",  # an Italian number is one word: BLEU's 4-grams are all but empty
        ),
        decode=DecodeConfig(beam_size=4),
    )
    return recipe, paths["test", "en"], paths["test", "it"]


def write_numbers_task(directory: Path, *, seed: int = 0) -> dict[tuple[str, str], Path]:
    """Write train/valid/test files of number words (en -> it); return their paths by (split, language)."""
    rng = random.Random(seed)
    # Every number below 1000 (the parts larger ones are built from) plus random larger ones, each once,
    # so the validation and test numbers never occur in training.
    numbers = sorted(set(range(1, 1000)) | set(rng.sample(range(1000, 1_000_000), 18_000)))
    rng.shuffle(numbers)
    splits = {"train": numbers[2000:], "valid": numbers[:1000], "test": numbers[1000:2000]}
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for split, values in splits.items():
        for lang in ("en", "it"):
            paths[split, lang] = directory / f"{split}.{lang}"
            atomic_write_text(paths[split, lang], "".join(num2words(n, lang=lang) + "\n" for n in values))
    return paths
