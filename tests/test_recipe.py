from dataclasses import fields

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tnmt.errors import UserError
from tnmt.recipe import SECTIONS, load_recipe


def test_shipped_recipes_load(repo_root):
    for path in sorted((repo_root / "configs").glob("*.toml")):
        recipe = load_recipe(str(path))
        assert recipe.model_config(vocab_size=100, pad_id=0, bos_id=1, eos_id=2).d_model > 0


def test_overrides_are_typed_and_applied(repo_root):
    recipe = load_recipe(
        str(repo_root / "configs" / "multi30k_en_de.toml"),
        ["--train.max_steps=7", "--train.out_dir=/tmp/x y", "--model.d_model=128", "--train.bf16=false"],
    )
    assert recipe.train.max_steps == 7 and recipe.train.out_dir == "/tmp/x y" and recipe.train.bf16 is False
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


KEYS = sorted({f.name for cls in SECTIONS.values() for f in fields(cls)} | {"preset", "src_vocab_size", "nope"})
VALUES = [
    "1",
    "0",
    "-1",
    "1.5",
    "nan",
    "inf",
    "-inf",
    "true",
    '"x"',
    '""',
    '"multi30k"',
    '"big"',
    "[1, 2]",
    "[0.9]",
    "[]",
    "{}",
    "{a = 1}",
    "1e400",
    "99999999999999999999",
    "2024-01-01",
    '"\\u0000"',
    "[[1]]",
]


@st.composite
def toml_recipes(draw) -> str:
    """TOML that parses, with real and made-up sections, keys and values of every TOML type."""
    lines = []
    for section in draw(st.lists(st.sampled_from([*SECTIONS, "extra"]), max_size=4, unique=True)):
        lines.append(f"[{section}]")
        for key in draw(st.lists(st.sampled_from(KEYS), max_size=4, unique=True)):
            lines.append(f"{key} = {draw(st.sampled_from(VALUES))}")
    return "\n".join(lines) + "\n"


@given(st.one_of(toml_recipes(), st.text(), st.binary()))
def test_property_any_recipe_file_loads_or_is_a_user_error(tmp_path_factory, content):
    path = tmp_path_factory.mktemp("recipe") / "r.toml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass"))
    try:
        load_recipe(str(path))
    except UserError as e:
        assert "\n" not in str(e) and str(path) in str(e)


@given(
    st.lists(
        st.one_of(
            st.text(),
            st.builds(
                "--{}.{}={}".format, st.sampled_from(list(SECTIONS)), st.sampled_from(KEYS), st.sampled_from(VALUES)
            ),
        ),
        max_size=3,
    )
)
def test_property_any_overrides_load_or_are_a_user_error(overrides):
    try:
        load_recipe(None, overrides)
    except UserError as e:
        assert "\n" not in str(e)
