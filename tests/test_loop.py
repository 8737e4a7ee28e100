"""The training loop on a tiny generated corpus: it learns, logs, checkpoints and resumes exactly."""

import copy
import json
import math
import signal
import weakref
from contextlib import contextmanager, nullcontext
from pathlib import Path

import pytest
import torch
from conftest import GRADIENT_TOLERANCE, LOSS_TOLERANCE, assert_same_gradients, relative_difference
from safetensors.torch import load_file

from tnmt.checkpoint import load_checkpoint
from tnmt.data import alignment
from tnmt.data.batching import collate
from tnmt.data.corpus import read_lines
from tnmt.data.prepared import PreparedPairs
from tnmt.errors import UserError
from tnmt.model import Transformer
from tnmt.train import loop, start, update, validation
from tnmt.train.distill import added_pairs, write_diversified
from tnmt.train.loop import train
from tnmt.train.loss import GUIDED_HEAD, alignment_loss
from tnmt.train.stop import Stopped, StopRequest
from tnmt.translate.translation import Translation
from tnmt.translate.translator import Translator


def weights(path):
    return load_file(path / "model.safetensors")


DISTIL_EARLY = ["--train.distill_at_step=3", "--data.max_train_pairs=60"]  # short epochs: distils at update 3 or 4


@pytest.mark.parametrize(
    "options",
    [
        [],
        *([f"--{option}"] for option in ("train.ema_decay=0.9", "train.weight_decay=0.1", "train.rdrop_alpha=5")),
        ["--data.subword_samples=3", "--data.max_train_pairs=60"],  # short epochs: a resume mid-way through the third
        DISTIL_EARLY,  # distils before the stop at 8, resumes after it
        ["--train.distill_at_step=9", "--data.max_train_pairs=60"],  # distils after the resume
        # eflomal samples from a seed of its own: both runs read one prepared corpus, so the same alignments
        ["--train.guided_alignment=0.5", "--data.prepared_dir={tmp}/prepared"],
        # distilled translations have no links: guided alignment skips them
        ["--train.guided_alignment=0.5", "--data.prepared_dir={tmp}/prepared", *DISTIL_EARLY],
    ],
    ids=[
        "weights",
        "ema",
        "weight_decay",
        "rdrop",
        "subword_samples",
        "distilled_before_stop",
        "distilled_after",
        "guided_alignment",
        "guided_alignment_distilled",
    ],
)
def test_a_resumed_run_ends_with_the_same_weights(tiny_recipe, tmp_path, options):
    options = [option.format(tmp=tmp_path) for option in options]
    straight = train(tiny_recipe(tmp_path / "a", "--train.max_steps=12", *options), progress=False)
    train(tiny_recipe(tmp_path / "b", "--train.max_steps=8", *options), progress=False)
    assert load_checkpoint(tmp_path / "b" / "last").trainer_state["step"] == 8
    resumed = train(tiny_recipe(tmp_path / "b", "--train.max_steps=12", *options), resume=True, progress=False)
    for file in ("model.safetensors", "optimizer.safetensors"):  # with an EMA: the average, the training weights
        a, b = (load_file((run / "last").resolve() / file) for run in (straight, resumed))
        assert a.keys() == b.keys()
        for name in a:
            assert torch.equal(a[name], b[name]), name
    log_a = [json.loads(line) for line in (straight / "metrics.jsonl").read_text().splitlines()]
    log_b = [json.loads(line) for line in (resumed / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log_a] == [r["step"] for r in log_b]  # no duplicated lines after the resume
    assert [r.get("train_loss") for r in log_a] == [r.get("train_loss") for r in log_b]


def test_resuming_a_finished_run_adds_nothing(tiny_recipe, tmp_path):
    out = train(tiny_recipe(tmp_path / "done", "--train.max_steps=4"), progress=False)
    before = weights((out / "last").resolve())
    train(tiny_recipe(tmp_path / "done", "--train.max_steps=4"), resume=True, progress=False)
    assert (out / "last").resolve().name == "step_0000004" and len(list((out / "checkpoints").iterdir())) == 1
    after = weights((out / "last").resolve())
    assert all(torch.equal(before[name], after[name]) for name in before)


@pytest.mark.parametrize("stopping", [False, True], ids=["finished", "stopped"])
def test_the_model_is_let_go_before_the_process_group_is_left(tiny_recipe, tmp_path, monkeypatch, stopping):
    """Under torchrun the model (DDP) holds gloo's process group; freed after it, at interpreter exit, a rank
    aborted. Whether train ends or raises Stopped, nothing of the run may be alive when the group is left."""
    models, alive = [], []
    real_start, real_group = loop.start_run, loop.process_group

    def start_run(*args, **kwargs):
        run = real_start(*args, **kwargs)
        models.append(weakref.ref(run.model))
        return run

    @contextmanager
    def process_group(**kwargs):
        with real_group(**kwargs) as world:
            try:
                yield world
            finally:
                alive.append(models[0]() is not None)

    monkeypatch.setattr(loop, "start_run", start_run)
    monkeypatch.setattr(loop, "process_group", process_group)
    request = StopRequest()
    request.signum = signal.SIGTERM if stopping else None
    with pytest.raises(Stopped) if stopping else nullcontext() as raised:
        train(tiny_recipe(tmp_path / "run", "--train.max_steps=2"), progress=False, stop=request)
    assert alive == [False]
    if stopping:  # the exception still says where its checkpoint is
        assert raised.value.step == 1 and raised.value.checkpoint.name == "step_0000001"


def test_outputs_links_metrics_and_curves(tiny_recipe, tmp_path):
    out = train(tiny_recipe(tmp_path / "run", "--train.max_steps=12", "--train.keep_checkpoints=1"), progress=False)
    assert (out / "best").is_symlink() and (out / "last").is_symlink()
    assert (out / "curves.png").stat().st_size > 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in records if "val_bleu" in r]
    assert [r["step"] for r in evals] == [4, 8, 12]
    train_losses = [r["train_loss"] for r in records if "train_loss" in r]
    assert train_losses[-1] < train_losses[0]
    kept = {p.name for p in (out / "checkpoints").iterdir()}
    assert kept == {(out / "best").resolve().name, (out / "last").resolve().name}


def test_best_follows_the_chosen_validation_metric(tiny_recipe, tmp_path):
    out = train(tiny_recipe(tmp_path / "chrf", "--train.max_steps=12", "--train.best_metric=chrf"), progress=False)
    evals = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if "val_chrf" in line]
    best = max(evals, key=lambda r: r["val_chrf"])  # the first of equals: only a strictly better score moves best
    assert load_checkpoint(out / "best").trainer_state["step"] == best["step"]
    assert load_checkpoint(out / "best").trainer_state["best_score"] == best["val_chrf"]


def test_activation_checkpointing_trains_the_same_model(tiny_recipe, tmp_path):
    runs = [
        train(tiny_recipe(tmp_path / name, "--train.max_steps=3", "--model.dropout=0", *flag), progress=False)
        for name, flag in (("plain", []), ("checkpointed", ["--train.activation_checkpointing=true"]))
    ]
    plain, checkpointed = (weights((run / "last").resolve()) for run in runs)
    for name in plain:
        torch.testing.assert_close(checkpointed[name], plain[name], atol=1e-6, rtol=1e-5, msg=name)


def test_rdrop_without_dropout_is_the_plain_update_and_with_dropout_is_not(tiny_recipe, tmp_path, gradient_log):
    """Without dropout both passes agree, the consistency term is 0 and the update is the one-pass update;
    with dropout the passes differ and the term moves the weights. Compared on the first update (the loss and
    the gradients the optimizer gets, from the same initial weights): conftest.py's GRADIENT_TOLERANCE says why
    not on the weights after Adam steps."""
    gradients, first = gradient_log, {}
    for dropout in (0, 0.3):
        for alpha in (0, 5):
            options = [f"--model.dropout={dropout}", f"--train.rdrop_alpha={alpha}", "--train.log_every=1"]
            out = train(tiny_recipe(tmp_path / f"{dropout}_{alpha}", "--train.max_steps=1", *options), progress=False)
            [record] = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()[:1]]
            assert record["step"] == 1 and len(gradients) == 1
            first[dropout, alpha] = record["train_loss"], gradients.pop()  # the first update's loss per token
    (plain_loss, plain), (twice_loss, twice) = first[0, 0], first[0, 5]
    assert twice_loss == pytest.approx(plain_loss, rel=LOSS_TOLERANCE, abs=0)
    assert_same_gradients(plain, twice)
    with_dropout = (first[0.3, 0][1], first[0.3, 5][1])
    # with dropout the two updates differ by the order of the gradients themselves (measured: 1.4 of the largest
    # entry of some tensor), not by rounding
    assert max(relative_difference(with_dropout[0][n], with_dropout[1][n]) for n in plain) > 100 * GRADIENT_TOLERANCE


def test_subword_samples_change_what_each_epoch_reads(tiny_recipe, tmp_path, monkeypatch):
    read = []
    for_epoch = PreparedPairs.for_epoch
    monkeypatch.setattr(PreparedPairs, "for_epoch", lambda self, epoch: read.append(epoch) or for_epoch(self, epoch))
    short_epochs = ["--train.max_steps=20", "--data.max_train_pairs=60"]
    runs = [
        train(tiny_recipe(tmp_path / name, *short_epochs, *flag), progress=False)
        for name, flag in (("plain", []), ("sampled", ["--data.subword_samples=2"]))
    ]
    assert read[-4:] == [0, 1, 2, 3]  # once per epoch
    plain, sampled = (weights((run / "last").resolve()) for run in runs)
    assert any(not torch.equal(plain[name], sampled[name]) for name in plain)


def test_self_distillation_adds_the_models_own_translations(tiny_recipe, tmp_path):
    options = [
        "--train.max_steps=12",
        "--data.max_train_pairs=60",
        "--train.eval_every=1",
        "--train.keep_checkpoints=12",
    ]
    distilling = tiny_recipe(tmp_path / "kd", *options, "--train.distill_at_step=4", "--train.ema_decay=0.9")
    run = train(distilling, progress=False)
    states = {int(c.name[5:]): load_checkpoint(c).trainer_state for c in (run / "checkpoints").iterdir()}
    first = min(step for step, state in states.items() if state["distilled_pairs"] >= 0)
    assert first >= 5 and states[first - 1]["distilled_pairs"] == -1
    assert states[first]["epoch"] == states[first - 1]["epoch"] + 1  # between two epochs
    teacher = load_checkpoint(run / "checkpoints" / f"step_{first - 1:07d}")  # its model: the EMA weights
    sources = Path(distilling.data.train_src).read_text().splitlines()[:60]
    translations = Translator(teacher.model, teacher.tokenizer, distilling.decode).translate(sources)
    kept = [(s, t) for s, t in zip(sources, translations, strict=True) if t.strip()]
    assert states[first]["distilled_pairs"] == len(kept) > 0
    written = (read_lines(run / "distilled" / f"train.{lang}") for lang in ("en", "de"))  # the recipe's languages
    assert list(zip(*written, strict=True)) == kept
    assert 0 < len(PreparedPairs(run / "distilled" / "prepared")) <= 60
    plain = train(tiny_recipe(tmp_path / "plain", *options), progress=False)
    a, b = (weights((r / "last").resolve()) for r in (run, plain))
    assert any(not torch.equal(a[name], b[name]) for name in a)


def test_self_distillation_without_a_translated_word_goes_on_over_the_original_pairs(
    tiny_recipe, tmp_path, monkeypatch
):
    blank = Translation(" ", [], 0.0, 0.0)
    monkeypatch.setattr(Translator, "translations", lambda self, texts, *args, **options: [blank] * len(texts))
    options = ["--data.max_train_pairs=60", "--train.distill_at_step=1"]
    straight = train(tiny_recipe(tmp_path / "a", "--train.max_steps=12", *options), progress=False)
    assert load_checkpoint(straight / "last").trainer_state["distilled_pairs"] == 0
    assert not (straight / "distilled").exists()
    train(tiny_recipe(tmp_path / "b", "--train.max_steps=8", *options), progress=False)
    resumed = train(tiny_recipe(tmp_path / "b", "--train.max_steps=12", *options), resume=True, progress=False)
    a, b = (weights((run / "last").resolve()) for run in (straight, resumed))
    assert all(torch.equal(a[name], b[name]) for name in a)


def test_fp16_on_the_cpu_is_refused_before_training(tiny_recipe, tmp_path):
    with pytest.raises(UserError, match="train.precision = 'fp16' needs a CUDA device"):
        train(
            tiny_recipe(tmp_path / "fp16", "--train.max_steps=2", "--train.device=cpu", "--train.precision=fp16"),
            progress=False,
        )


def test_average_last_averages_the_last_step_checkpoints(tiny_recipe, tmp_path):
    out = train(
        tiny_recipe(
            tmp_path / "avg",
            "--train.max_steps=16",
            "--train.keep_checkpoints=3",
            "--train.average_last=2",
        ),
        progress=False,
    )
    steps = sorted((out / "checkpoints").glob("step_*"))[-2:]
    assert [p.name for p in steps] == ["step_0000012", "step_0000016"]
    averaged, parts = weights(out / "averaged"), [weights(p) for p in steps]
    for name in averaged:
        assert torch.allclose(averaged[name], (parts[0][name].double() + parts[1][name].double()).div(2).float()), name
    assert load_checkpoint(out / "averaged").decode == load_checkpoint(out / "last").decode


def test_average_last_needs_the_checkpoints_kept(tiny_recipe, tmp_path):
    with pytest.raises(UserError, match=r"average_last = 6: must be <= keep_checkpoints"):
        tiny_recipe(tmp_path / "x", "--train.keep_checkpoints=5", "--train.average_last=6")


def test_a_validation_pair_longer_than_max_len_is_fitted_not_a_crash(numbers_corpus, tiny_recipe, tmp_path, caplog):
    """A new user's case: one 200-word validation line, max_len 64, validation at step 3. Validation
    measures every pair on its first max_len - 1 tokens (as decoding truncates) and says so once."""
    valid = tmp_path / "valid"
    valid.mkdir()
    long_line = " ".join(["seven hundred and forty-two"] * 50)  # 200 words
    for lang in ("en", "it"):
        lines = (numbers_corpus / f"valid.{lang}").read_text().splitlines()[:20]
        (valid / lang).write_text("\n".join([long_line, *lines]) + "\n")
    files = [f"--data.valid_src={valid / 'en'}", f"--data.valid_tgt={valid / 'it'}"]
    with caplog.at_level("WARNING", logger="tnmt"):
        out = train(
            tiny_recipe(tmp_path / "run", *files, "--train.max_steps=3", "--train.eval_every=3"), progress=False
        )
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("val_loss" in m and math.isfinite(m["val_loss"]) for m in metrics)
    warnings = [r.getMessage() for r in caplog.records if r.getMessage().startswith("validation:")]
    assert warnings == [
        "validation: 1 of 21 pairs have a side over the model's max_len (64 positions, EOS included);"
        " validating on their first 63 tokens"
    ]


def head_alignment_loss(checkpoint: Path, prepared: PreparedPairs, layer: int) -> float:
    """The alignment loss per aligned token of head 0 of decoder layer `layer` of `checkpoint`, over a corpus."""
    loaded, indices = load_checkpoint(checkpoint), range(min(len(prepared), 200))
    batch = collate(prepared.pairs(indices), **loaded.tokenizer.special_ids, links=prepared.links(indices))
    with torch.no_grad():
        _, attention = loaded.model(batch.src, batch.tgt_in, features_only=True, cross_attention_of=layer)
    loss, aligned = alignment_loss(attention[:, GUIDED_HEAD], batch.alignment)
    return loss.item() / aligned.item()


def first_word_links(src: list[str], tgt: list[str], *, workdir: Path):
    """Word links without eflomal's sampling (it draws from a seed of its own, and on the tiny corpus a draw now
    and then gave links the head could hardly learn in 24 updates): target word j to source word j, the last one
    past the source's end: one sharp link per target word, the same on every run."""
    for source, target in zip(src, tgt, strict=True):
        n, m = len(source.split()), len(target.split())
        yield {(min(j, n - 1), j) for j in range(m)} if n else set()


def test_guided_alignment_trains_head_1_toward_the_links_and_checkpoints_name_it(tiny_recipe, tmp_path, monkeypatch):
    monkeypatch.setattr(alignment, "align_words", first_word_links)  # the same links on every run
    monkeypatch.setattr(start, "eflomal_installed", lambda: True)
    options = ["--train.max_steps=24", "--model.n_decoder_layers=2", "--decode.alignment_layer=-5", "--train.seed=3"]
    guided = train(tiny_recipe(tmp_path / "guided", *options, "--train.guided_alignment=1.0"), progress=False)
    plain = train(tiny_recipe(tmp_path / "plain", *options), progress=False)
    decode = load_checkpoint(guided / "last").decode
    # layer -5 (5 from the top) of a 2-layer decoder is its layer 1: translate/evidence.py reads what was trained
    assert (decode.alignment_layer, decode.alignment_head, decode.alignment_shift) == (1, 1, False)
    assert load_checkpoint(plain / "last").decode.alignment_head == 0  # untouched without guided alignment
    records = [json.loads(line) for line in (guided / "metrics.jsonl").read_text().splitlines()]
    align = [r["train_align_loss"] for r in records if "train_loss" in r]
    # logged at every window; the decisive check is the trained head against the same head of a run without it
    assert len(align) == 12 and all(math.isfinite(value) for value in align)
    assert not any("train_align_loss" in line for line in (plain / "metrics.jsonl").read_text().splitlines())
    prepared = PreparedPairs(guided / "prepared")
    first_layer = 0
    trained, untrained = (head_alignment_loss(run / "last", prepared, first_layer) for run in (guided, plain))
    assert trained < 0.9 * untrained


def test_without_guided_alignment_no_batch_carries_an_alignment_and_no_attention_is_returned(
    tiny_recipe, tmp_path, monkeypatch
):
    batches, calls, forward = [], [], Transformer.forward

    def collating(*args, **kwargs):
        batches.append(collate(*args, **kwargs))
        return batches[-1]

    def forwarding(self, *args, **kwargs):
        calls.append(kwargs)
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(update, "collate", collating)  # training's batches
    monkeypatch.setattr(validation, "collate", collating)  # and validation's
    monkeypatch.setattr(Transformer, "forward", forwarding)
    out = train(tiny_recipe(tmp_path / "off", "--train.max_steps=2", "--train.eval_every=100"), progress=False)
    assert len(batches) > 2 and all(batch.alignment is None for batch in batches)  # training and validation
    assert calls and all(k.get("cross_attention_of") is None for k in calls)
    assert "alignments" not in PreparedPairs(out / "prepared").manifest


def test_without_eflomal_a_guided_recipe_says_so_in_one_line_and_trains_without_the_alignment_head(
    tiny_recipe, tmp_path, monkeypatch, caplog
):
    monkeypatch.setattr(start, "eflomal_installed", lambda: False)
    out = train(tiny_recipe(tmp_path / "run", "--train.max_steps=2", "--train.guided_alignment=0.5"), progress=False)
    [said] = [r.getMessage() for r in caplog.records if "eflomal" in r.getMessage()]
    assert said == (
        "train.guided_alignment: eflomal is not installed (pip install 'tnmt[align]'), so the words are not "
        "aligned and the run trains without guided alignment"
    )
    assert "alignments" not in PreparedPairs(out / "prepared").manifest
    assert json.loads((out / "recipe.json").read_text())["train"]["guided_alignment"] == 0.0
    assert load_checkpoint(out / "last").decode.alignment_head == 0  # read from the heads' mean


def test_without_eflomal_a_corpus_aligned_before_still_trains_guided(tiny_recipe, tmp_path, monkeypatch, caplog):
    shared = f"--data.prepared_dir={tmp_path / 'prepared'}"
    guided = ["--train.max_steps=2", "--train.guided_alignment=0.5", shared]
    train(tiny_recipe(tmp_path / "first", *guided), progress=False)  # aligns with eflomal
    monkeypatch.setattr(start, "eflomal_installed", lambda: False)
    out = train(tiny_recipe(tmp_path / "second", *guided), progress=False)
    assert not [r for r in caplog.records if "eflomal" in r.getMessage()]  # nothing to say: it is aligned
    assert json.loads((out / "recipe.json").read_text())["train"]["guided_alignment"] == 0.5


@pytest.mark.parametrize("options", [[], ["--train.guided_alignment=0.5"]], ids=["plain", "guided_alignment"])
def test_a_multilingual_run_trains_its_directions_and_resumes_exactly(tiny_recipe, numbers_multiway, tmp_path, options):
    multi = [
        "--data.languages=['en', 'de', 'it']",
        "--data.directions=['en-de', 'de-en', 'en-it']",
        f"--data.train_src={numbers_multiway}/train.{{lang}}",
        f"--data.valid_src={numbers_multiway}/valid.{{lang}}",
        "--data.train_tgt=''",
        "--data.valid_tgt=''",
        "--data.max_valid_pairs=8",
        f"--data.prepared_dir={tmp_path}/prepared",  # one corpus (and one tokenizer) for both runs
        *options,
    ]
    straight = train(tiny_recipe(tmp_path / "a", "--train.max_steps=12", *multi), progress=False)
    train(tiny_recipe(tmp_path / "b", "--train.max_steps=8", *multi), progress=False)
    resumed = train(tiny_recipe(tmp_path / "b", "--train.max_steps=12", *multi), resume=True, progress=False)
    a, b = (weights((run / "last").resolve()) for run in (straight, resumed))
    assert all(torch.equal(a[name], b[name]) for name in a)
    checkpoint = load_checkpoint(straight / "last")
    assert checkpoint.directions == (("en", "de"), ("de", "en"), ("en", "it"))
    assert checkpoint.model.config.language_ids == checkpoint.tokenizer.language_ids == (4, 5, 6)
    validated = [json.loads(line) for line in (straight / "metrics.jsonl").read_text().splitlines()]
    assert any("val_bleu" in record for record in validated)
    translator = Translator.from_checkpoint(straight / "last")
    assert isinstance(translator.for_pair("en", "it").translate(["seven"])[0], str)


def bidirectional(corpus, tmp_path):
    """en-de and de-en on the numbers corpus, en-de alone from the start of epoch 1 (past update 4 of 40, 3 of 30)."""
    return [
        "--data.languages=['en', 'de']",
        "--data.directions=['en-de', 'de-en']",
        "--data.first_direction_from=0.1",
        f"--data.train_src={corpus}/train.{{lang}}",
        f"--data.valid_src={corpus}/valid.{{lang}}",
        "--data.train_tgt=''",
        "--data.valid_tgt=''",
        "--data.max_valid_pairs=8",
        f"--data.prepared_dir={tmp_path}/prepared",
        "--train.eval_every=10",
        "--train.max_tokens=2000",  # epochs of ~10 updates
    ]


def test_bidirectional_training_narrows_to_the_first_direction_and_resumes_exactly(
    tiny_recipe, numbers_multiway, tmp_path, monkeypatch
):
    """data.first_direction_from: both directions until the first epoch start past the share of the budget, the
    first alone after it, the epoch kept in the state (a resumed run narrows where the straight one did), and
    validation on the first direction only."""
    both = bidirectional(numbers_multiway, tmp_path)
    seen = []
    epoch_pairs = loop._epoch_pairs

    def recording(run):
        pairs = epoch_pairs(run)
        seen.append((run.state.epoch, tuple(pairs.directions), len(pairs)))
        return pairs

    monkeypatch.setattr(loop, "_epoch_pairs", recording)
    straight = train(tiny_recipe(tmp_path / "a", "--train.max_steps=40", *both), progress=False)
    state = json.loads(((straight / "last").resolve() / "trainer_state.json").read_text())
    first = state["first_direction_epoch"]
    assert first >= 1 and [d for e, d, _ in seen if e < first] == [(("en", "de"), ("de", "en"))] * first
    assert {d for e, d, _ in seen if e >= first} == {(("en", "de"),)}
    assert all(n == 300 for e, _, n in seen if e >= first) and all(n == 600 for e, _, n in seen if e < first)
    train(tiny_recipe(tmp_path / "b", "--train.max_steps=30", *both), progress=False)
    resumed = train(tiny_recipe(tmp_path / "b", "--train.max_steps=40", *both), resume=True, progress=False)
    a, b = (weights((run / "last").resolve()) for run in (straight, resumed))
    assert all(torch.equal(a[name], b[name]) for name in a)
    corpus, targets = start._validation_text(tiny_recipe(tmp_path / "c", *both))
    assert targets == ["de"] * 8 and corpus.tgt == (numbers_multiway / "valid.de").read_text().splitlines()[:8]


def test_data_diversification_trains_the_first_direction_on_the_union_and_resumes_exactly(
    tiny_recipe, numbers_multiway, tmp_path, monkeypatch
):
    """train.diversify: when the bidirectional run narrows, the model (as it is then) translates the en-de pairs
    forward and backward once; the epochs after train on the corpus's en-de pairs, then the new pairs, whose decoder
    starts from the German tag; a run stopped before it and after it ends with the straight run's weights."""
    both = [*bidirectional(numbers_multiway, tmp_path), "--train.diversify=true"]
    teachers, seen = [], []
    epoch_pairs = loop._epoch_pairs

    def teaching(model, tokenizer, recipe, *, world):
        teachers.append((copy.deepcopy(model), tokenizer, recipe.decode))
        return write_diversified(model, tokenizer, recipe, world=world)

    def recording(run):
        pairs = epoch_pairs(run)
        seen.append((run.state.epoch, len(pairs), pairs.starts(range(len(pairs)))))
        return pairs

    monkeypatch.setattr(loop, "write_diversified", teaching)
    monkeypatch.setattr(loop, "_epoch_pairs", recording)
    straight = train(tiny_recipe(tmp_path / "a", "--train.max_steps=40", *both), progress=False)
    [(teacher, tokenizer, decode)] = teachers
    english, german = (read_lines(numbers_multiway / f"train.{lang}") for lang in ("en", "de"))
    translator = Translator(teacher, tokenizer, decode)
    forward = translator.for_pair("en", "de").translate(english)
    backward = translator.for_pair("de", "en").translate(german)
    added = added_pairs(list(zip(english, german, strict=True)), forward, backward)
    written = (read_lines(straight / "distilled" / f"train.{lang}") for lang in ("en", "de"))
    assert list(zip(*written, strict=True)) == added and added
    state = json.loads(((straight / "last").resolve() / "trainer_state.json").read_text())
    first, kept = state["first_direction_epoch"], len(PreparedPairs(straight / "distilled" / "prepared"))
    assert first >= 1 and state["distilled_pairs"] == len(added) and 0 < kept <= len(added)
    german_tag = tokenizer.language_id("de")
    assert all(n == 600 for e, n, _ in seen if e < first)
    assert all(n == 300 + kept and starts == [german_tag] * n for e, n, starts in seen if e >= first)

    teachers.clear()
    train(tiny_recipe(tmp_path / "b", "--train.max_steps=8", *both), progress=False)  # stops before it
    train(tiny_recipe(tmp_path / "b", "--train.max_steps=30", *both), resume=True, progress=False)  # after it
    resumed = train(tiny_recipe(tmp_path / "b", "--train.max_steps=40", *both), resume=True, progress=False)
    assert len(teachers) == 1
    a, b = (weights((run / "last").resolve()) for run in (straight, resumed))
    assert all(torch.equal(a[name], b[name]) for name in a)


def test_without_eflomal_a_guided_recipe_of_more_than_two_directions_stops_in_one_line(
    tiny_recipe, numbers_multiway, tmp_path, monkeypatch
):
    """Twelve Multi30k directions did not learn without the alignment head (start.UNGUIDED_DIRECTIONS): the run stops
    before training instead of dropping it, and says how to go on; a bidirectional pair still trains without."""
    monkeypatch.setattr(start, "eflomal_installed", lambda: False)
    three = [*bidirectional(numbers_multiway, tmp_path), "--data.languages=['en', 'de', 'it']", "--data.directions=[]"]
    three.remove("--data.first_direction_from=0.1")
    three.append("--train.max_steps=2")
    with pytest.raises(UserError) as error:
        train(tiny_recipe(tmp_path / "six", *three, "--train.guided_alignment=0.5"), progress=False)
    assert str(error.value) == (
        "train.guided_alignment: eflomal is not installed (pip install 'tnmt[align]'), and a model of 6 directions was "
        "measured not to learn without the alignment head (benchmarks/NOTEBOOK.md, issue 68): install it, or set "
        "train.guided_alignment = 0 to train without"
    )
    assert not (tmp_path / "six" / "last").exists()
    unguided = train(tiny_recipe(tmp_path / "off", *three, "--train.guided_alignment=0"), progress=False)
    assert (unguided / "last").exists()  # asked for without: trains
    pair = [*bidirectional(numbers_multiway, tmp_path / "pair"), "--train.max_steps=2", "--train.guided_alignment=0.5"]
    out = train(tiny_recipe(tmp_path / "two", *pair), progress=False)
    assert json.loads((out / "recipe.json").read_text())["train"]["guided_alignment"] == 0.0
