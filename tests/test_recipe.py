import pytest

from tnmt.errors import UserError
from tnmt.recipe import load_recipe


def test_shipped_recipes_load(repo_root):
    for path in sorted((repo_root / "configs").glob("*.toml")):
        recipe = load_recipe(str(path))
        assert recipe.model_config(vocab_size=100, pad_id=0, bos_id=1, eos_id=2).d_model > 0


def test_overrides_are_typed_and_applied(repo_root):
    recipe = load_recipe(
        str(repo_root / "configs" / "multi30k_en_de.toml"),
        ["--train.max_steps=7", "--train.out_dir=/tmp/x y", "--model.d_model=128", "--train.precision=fp32"],
    )
    assert recipe.train.max_steps == 7 and recipe.train.out_dir == "/tmp/x y" and recipe.train.precision == "fp32"
    assert recipe.model_config(vocab_size=50, pad_id=0, bos_id=1, eos_id=2).d_model == 128


@pytest.mark.parametrize(
    ("text", "overrides", "message"),
    [
        ("[train]\nmax_stpes = 3\n", [], r"\[train\]: unknown key 'max_stpes'; valid keys: \[.*'max_steps'"),
        ("[train]\nmax_steps = 'many'\n", [], r"\[train\] max_steps = 'many': expected int"),
        ("[trian]\n", [], r"unknown section\(s\) \['trian'\]"),
        ("[model]\nd_modle = 3\n", [], r"unknown key 'd_modle'; valid keys: \[.*'d_model'"),
        ("[model]\nd_model = 250\nn_heads = 4\npreset = 'base'\n", [], r"\[model\]: Architecture.d_model = 250"),
        ("[model]\npreset = 'tiny'\n", [], r"preset must be one of \['base', 'big', 'small'\], got 'tiny'"),
        ("[model]\nsrc_vocab_size = 3\n", [], "comes from the tokenizer"),
        ("", ["--train.warmup_steps=0"], r"TrainConfig.warmup_steps = 0"),
        ("", ["--train.best_metric=ter"], r"best_metric = 'ter': expected one of 'bleu', 'chrf'"),
        ("[decode]\nbeam_size = 0\n", [], r"\[decode\]: DecodeConfig.beam_size = 0: must be >= 1"),
        ("train = 3\n", [], r"train must be a table"),
        ("", ["train.max_steps"], "expected --section.key=value"),
        ("[data\n", [], "invalid TOML"),
        ("[train]\nbf16 = true\n", [], r'\[train\]: bf16 was replaced by precision = "bf16" \(or "fp32", "fp16"\)$'),
    ],
)
def test_errors_name_the_section_and_key(tmp_path, text, overrides, message):
    path = tmp_path / "r.toml"
    path.write_text(text)
    with pytest.raises(UserError, match=message):
        load_recipe(str(path), overrides)


def test_model_table_starts_from_its_preset_and_is_saved_resolved(repo_root):
    recipe = load_recipe(None, ["--model.preset=base", "--model.dropout=0.2"])
    assert (recipe.model.d_model, recipe.model.dropout, recipe.model.share_embeddings) == (512, 0.2, True)
    assert "preset" not in recipe.to_dict()["model"] and recipe.to_dict()["model"]["d_model"] == 512


def test_missing_file():
    with pytest.raises(UserError, match="no such recipe file"):
        load_recipe("/nonexistent/recipe.toml")
