from dataclasses import fields

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tnmt.errors import UserError
from tnmt.recipe import SECTIONS, load_recipe


def test_shipped_recipes_load(repo_root):
    for path in sorted((repo_root / "configs").glob("*.toml")):
        recipe = load_recipe(str(path))
        assert recipe.model_config(FakeTokenizer(100)).d_model > 0


def test_overrides_are_typed_and_applied(repo_root):
    recipe = load_recipe(
        str(repo_root / "configs" / "multi30k_en_de.toml"),
        ["--train.max_steps=7", "--train.out_dir=/tmp/x y", "--model.d_model=128", "--train.precision=fp32"],
    )
    assert recipe.train.max_steps == 7 and recipe.train.out_dir == "/tmp/x y" and recipe.train.precision == "fp32"
    assert recipe.model_config(FakeTokenizer(50)).d_model == 128


def test_separate_vocabularies_size_each_embedding_and_cannot_share_one(tmp_path):
    sides = ["--data.joint_vocabulary=false", "--model.share_embeddings=false"]
    config = load_recipe(None, sides).model_config(FakeTokenizer(70, source=50))
    assert (config.src_vocab_size, config.tgt_vocab_size, config.share_embeddings) == (50, 70, False)
    message = r"^command line: \[model\] share_embeddings = true needs \[data\] joint_vocabulary = true: separate"
    with pytest.raises(UserError, match=message):
        load_recipe(None, ["--data.joint_vocabulary=false"])  # the preset shares its embeddings
    recipe = tmp_path / "r.toml"
    recipe.write_text("[data]\njoint_vocabulary = false\n[model]\nshare_embeddings = true\n")
    with pytest.raises(UserError, match=f"^{recipe}: \\[model\\] share_embeddings"):
        load_recipe(str(recipe))


class FakeTokenizer:
    """What `Recipe.model_config` reads of a tokenizer: sizes and special ids."""

    def __init__(self, size: int, *, source: int = 0) -> None:
        self.vocab_size, self.source_vocab_size = size, source or size
        self.special_ids = {"pad_id": 0, "bos_id": 1, "eos_id": 2}
        self.language_ids = ()


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


def test_a_recipe_extends_another_key_by_key(repo_root, tmp_path):
    base = tmp_path / "base.toml"
    base.write_text("[model]\nd_model = 128\nn_heads = 4\n\n[train]\nmax_steps = 9\nlr_factor = 0.5\n")
    (tmp_path / "sub").mkdir()
    child = tmp_path / "sub" / "child.toml"
    child.write_text('extends = "../base.toml"\n\n[train]\nmax_steps = 3\n')
    recipe = load_recipe(str(child), ["--train.seed=7"])
    assert (recipe.model.d_model, recipe.train.max_steps, recipe.train.lr_factor, recipe.train.seed) == (128, 3, 0.5, 7)
    de_en = load_recipe(str(repo_root / "configs" / "multi30k_de_en.toml"))
    en_de = load_recipe(str(repo_root / "configs" / "multi30k_en_de.toml"))
    assert (de_en.data.src_lang, de_en.data.tgt_lang) == ("de", "en") and de_en.model == en_de.model


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('extends = "missing.toml"\n', r"missing.toml: no such recipe file"),
        ('extends = "r.toml"\n', r"r.toml: extends 'r.toml', which extends it back \(a cycle\)"),
        ("extends = 3\n", r"r.toml: extends must be the path of another recipe file, got 3"),
    ],
)
def test_extends_errors(tmp_path, text, message):
    path = tmp_path / "r.toml"
    path.write_text(text)
    with pytest.raises(UserError, match=message):
        load_recipe(str(path))


def test_model_table_starts_from_its_preset_and_is_saved_resolved(repo_root):
    recipe = load_recipe(None, ["--model.preset=base", "--model.dropout=0.2"])
    assert (recipe.model.d_model, recipe.model.dropout, recipe.model.share_embeddings) == (512, 0.2, True)
    assert "preset" not in recipe.to_dict()["model"] and recipe.to_dict()["model"]["d_model"] == 512


def test_missing_file():
    with pytest.raises(UserError, match="no such recipe file"):
        load_recipe("/nonexistent/recipe.toml")


@pytest.mark.parametrize(
    ("name", "shape", "dropout", "steps", "averaged"),
    [("wmt14_en_de_base", (512, 2048, 8), 0.1, 100_000, 5), ("wmt14_en_de_big", (1024, 4096, 16), 0.3, 300_000, 20)],
)
def test_the_papers_recipes_hold_table_3(repo_root, name, shape, dropout, steps, averaged):
    recipe = load_recipe(str(repo_root / "configs" / f"{name}.toml"))  # strict: an unknown key would fail here
    data, model, train, decode = recipe.data, recipe.model, recipe.train, recipe.decode
    assert (data.corpus, data.src_lang, data.tgt_lang) == ("files", "en", "de")
    assert (data.train_src, data.train_tgt) == ("data/wmt14/train.en.gz", "data/wmt14/train.de.gz")  # `tnmt data wmt14`
    assert (data.valid_src, data.valid_tgt) == ("data/wmt14/newstest2013.en", "data/wmt14/newstest2013.de")
    assert (data.tokenizer_model, data.vocab_size) == ("bpe", 37_000)
    assert (model.d_model, model.d_ff, model.n_heads, model.n_encoder_layers, model.n_decoder_layers) == (*shape, 6, 6)
    assert (model.dropout, model.share_embeddings, model.tie_output, model.norm_first) == (dropout, True, True, False)
    assert (model.attention_dropout, model.activation_dropout) == (0.0, 0.0)  # P_drop on sub-layer outputs only
    world_size = 1  # as written; with N processes the TOML says to divide accum_steps by N
    assert train.max_tokens * train.accum_steps * world_size == 25_000
    assert train.max_tokens * 1 * 8 == 25_000  # the paper's 8 GPUs, with --train.accum_steps=1
    assert (train.max_steps, train.warmup_steps, train.lr_factor, train.label_smoothing) == (steps, 4000, 1.0, 0.1)
    assert (train.adam_betas, train.adam_eps, train.clip_norm) == ((0.9, 0.98), 1e-9, 0.0)
    assert train.average_last == train.keep_checkpoints == averaged
    assert (decode.beam_size, decode.length_penalty, decode.max_len_a, decode.max_len_b) == (4, 0.6, 1.0, 50)


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
