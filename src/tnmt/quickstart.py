"""`tnmt quickstart`: the whole pipeline in one command, on real data when it can.

With Multi30k available (TNMT_DATA_DIR, the cache, or a download) it trains a time-boxed version of
configs/multi30k_en_de.toml, reports sacreBLEU on test_2016_flickr, translates a few sentences and
draws attention maps and training curves. Offline it says so and runs the same pipeline on a task it
generates itself: English number words -> Italian number words ("three hundred and twelve" ->
"trecentododici"), small enough to learn in a couple of minutes on two cores.
"""

import random
from importlib.resources import files
from pathlib import Path

from num2words import num2words

from tnmt.config import DataConfig
from tnmt.data.corpus import read_parallel
from tnmt.data.dataset import corpus_files
from tnmt.data.multi30k import find_multi30k
from tnmt.decode.translator import Translator
from tnmt.evaluate import score
from tnmt.io import atomic_write_text
from tnmt.recipe import load_recipe
from tnmt.train.loop import train
from tnmt.visualize import plot_attention

EXAMPLES = {
    "multi30k": [
        "A man in an orange hat starring at something.",
        "Two dogs are playing in the snow.",
        "A little girl is climbing into a wooden playhouse.",
    ],
    "numbers": ["three hundred and twelve", "forty-two", "nineteen thousand, eight hundred and one"],
}


def quickstart(out: Path, *, minutes: float = 10.0, offline: bool = False, max_steps: int = 0) -> float:
    """Train, evaluate on held-out data, translate examples, draw pictures; returns test BLEU.

    `max_steps` caps training further (smoke tests); 0 keeps the recipe's budget.
    """
    root = None if offline else find_multi30k()
    if root is None:
        print(
            "Multi30k is not available (no TNMT_DATA_DIR, no cache, no network): "
            "running the offline number-words task instead."
        )
        task, test_src, test_ref, overrides = "numbers", *write_numbers_task(out / "data")
    else:
        task = "multi30k"
        test_src, test_ref = corpus_files(DataConfig(), "test_2016_flickr")
        overrides = [f"--train.max_minutes={minutes}", "--train.max_steps=0"]
    recipe_path = files("tnmt") / "configs" / ("multi30k_en_de.toml" if task == "multi30k" else "numbers_en_it.toml")
    if max_steps:
        overrides.append(f"--train.max_steps={max_steps}")
    recipe = load_recipe(str(recipe_path), [*overrides, f"--train.out_dir={out / 'run'}"])
    print(
        f"training on {task} for up to {recipe.train.max_minutes or '-'} minutes / {recipe.train.max_steps} steps;"
        f" checkpoints and metrics in {recipe.train.out_dir}"
    )
    run = train(recipe)
    translator = Translator.from_checkpoint(run / "best")
    test = read_parallel(test_src, test_ref, normalize_whitespace=True)
    hypotheses = translator.translate(test.src, beam_size=recipe.decode.beam_size)
    scores = score(hypotheses, test.tgt)
    print(f"\ntest set ({len(test)} sentences, beam {recipe.decode.beam_size}):\n{scores.format()}\n")
    if task == "numbers":
        exact = sum(h == r for h, r in zip(hypotheses, test.tgt, strict=True)) / len(test)
        print(f"exact matches: {exact:.1%} (an Italian number is one word, so BLEU has no 4-grams to match)\n")
    for source, target in zip(EXAMPLES[task], translator.translate(EXAMPLES[task]), strict=True):
        print(f"  {source}\n  -> {target}")
    src_pieces, tgt_pieces, maps = translator.attention(EXAMPLES[task][0])
    pictures = plot_attention(maps, src_pieces, tgt_pieces, out / "attention")
    print(f"\nattention maps: {len(pictures)} PNGs in {out / 'attention'}; training curves: {run / 'curves.png'}")
    return scores.bleu


def write_numbers_task(directory: Path, *, seed: int = 0) -> tuple[Path, Path, list[str]]:
    """Write train/valid/test files of number words (en -> it); return test paths and recipe overrides."""
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
    overrides = [
        f"--data.{key}_{side}={paths[split, lang]}"
        for key, split in (("train", "train"), ("valid", "valid"))
        for side, lang in (("src", "en"), ("tgt", "it"))
    ]
    return paths["test", "en"], paths["test", "it"], overrides
