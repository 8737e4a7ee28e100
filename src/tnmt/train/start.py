"""How a training run starts: a fresh model, `train.init_from`'s weights, or the run's own `last` checkpoint.

`start_run` gathers what the loop (loop.py) works on into a `Run`: model, tokenizer, optimizer, the data,
and the `TrainState` that every checkpoint stores, so that a resumed run continues exactly where it stopped.
A checkpoint fixes the model's shape; the recipe gives the dropout rates and the optimizer's settings.
"""

import json
import logging
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel

from tnmt.aligning_head import alignment_layer_index
from tnmt.checkpoint import Checkpoint, load_checkpoint
from tnmt.config import DROPOUT_RATES, Architecture, TrainConfig
from tnmt.data.alignment import eflomal_installed
from tnmt.data.corpus import ParallelCorpus
from tnmt.data.dataset import EncodedPairs, TrainingPairs, encode, fit_pairs, read_split
from tnmt.data.multiway import MultiwayPairs, prepare_multiway, read_multiway_split
from tnmt.data.prepare import prepare
from tnmt.data.prepared import PreparedPairs
from tnmt.data.shortlist import Shortlist
from tnmt.data.tokenizer import Tokenizer
from tnmt.device import MixedPrecision
from tnmt.errors import UserError
from tnmt.io import atomic_write_text, check_output_directory
from tnmt.model import Transformer
from tnmt.recipe import Recipe
from tnmt.train.compiled import compile_layers, compile_wanted
from tnmt.train.distill import prepare_distilled
from tnmt.train.distributed import World
from tnmt.train.ema import WeightAverage
from tnmt.train.loss import GUIDED_HEAD
from tnmt.train.progress import MetricsLog, Progress
from tnmt.train.run_dir import RunDir
from tnmt.translate.evidence import length_ratio_bounds

# The most directions a model was measured to learn without guided alignment: a bidirectional pair did (39.6 val
# BLEU at 4,400 updates); twelve Multi30k directions did not (val BLEU under 3 at 1,250 updates on a CPU and at
# 7,000 on a GPU, against 11 at 1,000 with it): a run that cannot align their words stops instead of training on.
UNGUIDED_DIRECTIONS = 2

log = logging.getLogger("tnmt")


@dataclass
class TrainState:
    """Where training is: saved in every checkpoint's trainer_state.json."""

    step: int = 0  # optimizer updates done
    epoch: int = 0
    batch_index: int = 0  # next batch of `epoch`
    best_score: float = -1.0  # of TrainConfig.best_metric
    best_step: int = 0
    bad_evals: int = 0  # validations since the best score (early stopping)
    elapsed: float = 0.0  # training seconds (rank 0's clock), carried over resumes for max_minutes
    # Pairs the model's translations added (train.distill_at_step or train.diversify, distill.py): -1 not yet, 0 none
    distilled_pairs: int = -1
    # The epoch from which only the first direction trains (data.first_direction_from): -1 not yet
    first_direction_epoch: int = -1
    grad_scaler: dict[str, Any] = field(default_factory=dict)  # fp16 loss scale (GradScaler.state_dict())


@dataclass
class Run:
    """What one training run works on, handed to the helpers of `loop.train`."""

    recipe: Recipe
    out: Path
    model: Transformer
    tokenizer: Tokenizer
    optimizer: torch.optim.Optimizer
    state: TrainState
    train_data: TrainingPairs  # lengths() and pairs(indices): on disk or in memory
    translated: PreparedPairs | None  # the model's own translations once it made them (distill.py), else None
    valid_data: EncodedPairs
    valid_text: ParallelCorpus
    log: MetricsLog
    bar: Progress
    world: World
    net: torch.nn.Module  # the model, wrapped in DistributedDataParallel when there are several ranks
    precision: MixedPrecision
    scaler: torch.amp.GradScaler  # loss scaling for fp16; a pass-through otherwise
    ema: WeightAverage | None  # what validation, checkpoints and translation use when train.ema_decay is set
    shortlist: Shortlist | None = None  # learned from the training pairs, carried by every checkpoint (rank 0's)


def start_run(
    recipe: Recipe, *, resume: bool, progress: bool, world: World, device: torch.device, precision: MixedPrecision
) -> Run:
    """Model, tokenizer, optimizer and state (fresh, from `init_from`, or from `out/last` when resuming),
    and the data: the training corpus prepared on disk (`data.prepare`, reused when current; rank 0 builds
    it while the other ranks wait) and encoded with the checkpoint's tokenizer if there is one; the small
    validation set in memory.

    Every rank builds the same model from the same seed (DDP also copies rank 0's weights to the others).
    RNG: a checkpoint holds rank 0's CPU torch RNG state (dropout masks); rank 0 restores it on resume, so a
    one-process run resumes bit for bit; other ranks reseed from (seed, rank, step) in `loop.train`, and the
    CUDA RNG is not stored: with dropout > 0 a resumed multi-process or GPU run is equivalent, not identical.
    """
    cfg, out = recipe.train, Path(recipe.train.out_dir)
    check_output_directory(out)  # a run writes beside what is there, into a directory
    torch.manual_seed(cfg.seed)
    valid_text, valid_targets = _validation_text(recipe)
    state, checkpoint = _starting_point(recipe, resume=resume)
    train_data = _prepared(recipe, world, checkpoint)
    if recipe.train.guided_alignment and not train_data.aligned:  # eflomal missing: `prepare_recipe` said so
        recipe = replace(recipe, train=replace(recipe.train, guided_alignment=0.0))
    recipe = _with_length_ratio(recipe, train_data)
    if checkpoint is not None:
        model, recipe = _checkpoint_model(checkpoint, recipe, resume=resume)
        tokenizer = checkpoint.tokenizer
    else:
        tokenizer = train_data.tokenizer()
        model = Transformer(recipe.model_config(tokenizer))
    recipe = _guided_decode(recipe, model.config.n_decoder_layers)
    vocabularies = {"source_vocab_size": model.config.src_vocab_size, "target_vocab_size": model.config.tgt_vocab_size}
    shortlist = Shortlist.learn_from(train_data, **vocabularies) if world.is_main else None  # what checkpoints carry
    translated = None  # resuming after self-distillation or diversification: the translations written then
    if state.distilled_pairs > 0:
        translated = prepare_distilled(recipe, tokenizer, model.config.max_len)
    model.to(device).activation_checkpointing = cfg.activation_checkpointing
    if compile_wanted(cfg.compile, device):
        compile_layers(model)
    # A checkpoint saved with an EMA holds the average as its model and the training weights beside it.
    ema = WeightAverage(model, cfg.ema_decay) if cfg.ema_decay else None
    if resume and checkpoint.training_weights:
        model.load_state_dict(checkpoint.training_weights, strict=False)  # tied copies are stored once
    optimizer, scaler = make_optimizer(model, cfg, device, precision, state, checkpoint if resume else None)
    if resume:
        torch.set_rng_state(checkpoint.trainer_state["rng.torch"])
    if world.is_main:  # the only rank that writes
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / "recipe.json", json.dumps(recipe.to_dict(), indent=2) + "\n")
    # DDP all-reduces the gradients in backward (one rank: the model itself)
    gpu = [device.index] if device.type == "cuda" else None
    net = model if world.size == 1 else DistributedDataParallel(model, device_ids=gpu)
    return Run(
        recipe=recipe,
        out=out,
        model=model,
        tokenizer=tokenizer,
        optimizer=optimizer,
        state=state,
        train_data=train_data,
        translated=translated,
        valid_data=_validation_pairs(valid_text, valid_targets, tokenizer, model.config.max_len, world),
        valid_text=valid_text,
        log=MetricsLog(RunDir(out).metrics, after_step=state.step, enabled=world.is_main),
        bar=Progress(cfg, step=state.step, elapsed=state.elapsed, enabled=progress and world.is_main),
        world=world,
        net=net,
        precision=precision,
        scaler=scaler,
        ema=ema,
        shortlist=shortlist,
    )


def _with_length_ratio(recipe: Recipe, train_data: PreparedPairs | EncodedPairs) -> Recipe:
    """The recipe with the bounds of the training pairs' length ratios in its [decode] table (what the checkpoints
    carry, to flag translations far outside them: translate/evidence.py), unless the recipe sets either."""
    decode = recipe.decode
    if decode.length_ratio_min or decode.length_ratio_max:
        return recipe
    low, high = length_ratio_bounds(*train_data.side_lengths())
    return replace(recipe, decode=replace(decode, length_ratio_min=low, length_ratio_max=high))


def _validation_text(recipe: Recipe) -> tuple[ParallelCorpus, list[str] | None]:
    """The validation pairs (the first `data.max_valid_pairs` of each direction when that is set), and for a
    multilingual recipe each pair's target language."""
    if recipe.data.multilingual:
        data = recipe.data
        if data.first_direction_from:  # bidirectional training: the direction that matters picks `best`
            data = replace(data, directions=data.directions[:1], first_direction_from=0.0)
        return read_multiway_split(data, "val", limit=data.max_valid_pairs)
    return read_split(recipe.data, "val", limit=recipe.data.max_valid_pairs), None


def _validation_pairs(
    corpus: ParallelCorpus, targets: list[str] | None, tokenizer: Tokenizer, model_max_len: int, world: World
) -> EncodedPairs:
    """The validation set as ids, each pair fitted to the model's positions (as decoding fits a long source),
    said once in the log: one long line must not stop training at its first validation. With `targets`, each
    pair starts its decoder from its target language's tag."""
    pairs, cut = fit_pairs(encode(corpus, tokenizer), model_max_len)
    if targets is not None:
        pairs = replace(pairs, start_ids=[tokenizer.language_id(target) for target in targets])
    if cut and world.is_main:
        log.warning(
            f"validation: {cut} of {len(pairs)} pairs have a side over the model's max_len ({model_max_len} positions,"
            f" EOS included); validating on their first {model_max_len - 1} tokens"
        )
    return pairs


def _guided_decode(recipe: Recipe, n_decoder_layers: int) -> Recipe:
    """With guided alignment, the [decode] table every checkpoint stores names the head trained to align, so
    alignments are read from it (translate/evidence.py): the recipe's layer, by its number in this decoder, the head
    `GUIDED_HEAD` indexes, and the step that writes a word (not shifted: that is the step the loss trains)."""
    if not recipe.train.guided_alignment:
        return recipe
    layer = alignment_layer_index(recipe.decode.alignment_layer, n_decoder_layers) + 1
    decode = replace(recipe.decode, alignment_layer=layer, alignment_head=GUIDED_HEAD + 1, alignment_shift=False)
    return replace(recipe, decode=decode)


def _starting_point(recipe: Recipe, *, resume: bool) -> tuple[TrainState, Checkpoint | None]:
    """Where training starts: `out/last` and its trainer state when resuming, else `init_from`'s weights
    (a fresh state) or nothing (a fresh model)."""
    out = Path(recipe.train.out_dir)
    if not resume:
        return TrainState(), load_checkpoint(recipe.train.init_from) if recipe.train.init_from else None
    if not RunDir(out).last.exists():
        raise UserError(f"{RunDir(out).last}: nothing to resume (no checkpoint was saved in {out})")
    checkpoint = load_checkpoint(RunDir(out).last)
    saved = checkpoint.trainer_state
    return TrainState(**{k: v for k, v in saved.items() if k in TrainState.__dataclass_fields__}), checkpoint


def _checkpoint_model(checkpoint: Checkpoint, recipe: Recipe, *, resume: bool) -> tuple[Transformer, Recipe]:
    """The checkpoint's model with the recipe's dropout rates, and the recipe with the [model] trained.

    The weights fix the shape (layers, widths, vocabulary): `init_from` takes it from the checkpoint, and a
    resumed run of a recipe that does not start from one must ask for the shape it was trained with. The
    dropout rates are training settings a recipe may change (less dropout to fine-tune, a probe on a
    plateau); the checkpoints saved from then on record the rates trained with, as does recipe.json.
    """
    saved = checkpoint.model.config
    trained = Architecture(**{f.name: getattr(saved, f.name) for f in fields(Architecture)})
    shape = [f.name for f in fields(Architecture) if f.name not in DROPOUT_RATES]
    changed = [name for name in shape if getattr(recipe.model, name) != getattr(trained, name)]
    if resume and not recipe.train.init_from and changed:
        name = changed[0]
        raise UserError(
            f"{checkpoint.path}: trained with model.{name} = {getattr(trained, name)!r}, the recipe asks for "
            f"{getattr(recipe.model, name)!r}; a resumed run keeps its shape (only the dropout rates may change)"
        )
    rates = {name: getattr(recipe.model, name) for name in DROPOUT_RATES}
    model = checkpoint.model
    if any(getattr(saved, name) != rate for name, rate in rates.items()):
        model = Transformer(replace(saved, **rates))
        model.load_state_dict(checkpoint.model.state_dict())
    return model, replace(recipe, model=replace(trained, **rates))


def make_optimizer(
    model: Transformer,
    cfg: TrainConfig,
    device: torch.device,
    precision: MixedPrecision,
    state: TrainState,
    resumed: Checkpoint | None,
) -> tuple[torch.optim.Adam, torch.amp.GradScaler]:
    """Adam and the fp16 gradient scaler (a no-op in other precisions), restored from `resumed` if given.

    With `train.weight_decay` the update is AdamW's: weights shrink by lr * decay each step, independently of
    the gradient moments. The optimizer's settings always come from the recipe; a checkpoint gives its state
    (moments, step counts) only, so a resumed run can change them (`torch` would restore the saved ones)."""
    # fused: one kernel over all parameters instead of a Python loop per tensor (~14% of a small-model step)
    optimizer = torch.optim.Adam(
        _parameter_groups(model, cfg.weight_decay),
        lr=0.0,
        betas=cfg.adam_betas,
        eps=cfg.adam_eps,
        decoupled_weight_decay=True,
        fused=True,
    )
    if resumed is not None:
        settings = [{k: v for k, v in group.items() if k != "params"} for group in optimizer.param_groups]
        if len(resumed.optimizer_state["param_groups"]) != len(settings):
            raise UserError(
                f"{resumed.path}: saved {'without' if cfg.weight_decay else 'with'} weight decay; resume with "
                f"train.weight_decay {'= 0' if cfg.weight_decay else '> 0'} as it was (the parameter groups differ)"
            )
        optimizer.load_state_dict(resumed.optimizer_state)
        for group, wanted in zip(optimizer.param_groups, settings, strict=True):
            group.update(wanted)
    scaler = torch.amp.GradScaler(device.type, enabled=precision.scaled)
    if state.grad_scaler:
        scaler.load_state_dict(state.grad_scaler)
    return optimizer, scaler


def _parameter_groups(model: Transformer, weight_decay: float) -> list[dict[str, Any]]:
    """One group without decay; with it, the matrices (linear layers, embeddings) decay and the vectors
    (biases, LayerNorm gains and shifts) do not: shrinking a gain toward 0 rescales a layer's output
    instead of simplifying it (BERT's and GPT-2's practice)."""
    params = list(model.parameters())  # a tied embedding appears once
    if not weight_decay:
        return [{"params": params}]
    return [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]


def prepare_training_corpus(recipe: Recipe, checkpoint: Checkpoint | None) -> PreparedPairs | MultiwayPairs:
    """The corpus `train` reads: encoded with the checkpoint's tokenizer and fitted to its model's positions
    when there is one (resuming, `train.init_from`), else with a tokenizer trained for the recipe."""
    if checkpoint is None:
        return prepare_recipe(recipe, tokenizer=None, model_max_len=recipe.model.max_len)
    return prepare_recipe(recipe, tokenizer=checkpoint.tokenizer, model_max_len=checkpoint.model.config.max_len)


def prepare_recipe(recipe: Recipe, *, tokenizer: Tokenizer | None, model_max_len: int) -> PreparedPairs | MultiwayPairs:
    """`prepare` for a training run: in `data.prepared_dir`, else `<train.out_dir>/prepared`, keeping pairs
    whose sides fit both `data.max_tokens_per_sentence` and the model's positions (EOS/BOS included), with
    their word alignments when the run trains with guided alignment; every direction of a multilingual recipe
    (data/multiway.py)."""
    directory = Path(recipe.data.prepared_dir or Path(recipe.train.out_dir) / "prepared")
    max_len, guided = recipe.longest_side(model_max_len), recipe.train.guided_alignment > 0
    alignments = guided and eflomal_installed()  # a corpus aligned before is reused all the same
    alignments = alignments or recipe.data.term_annotations > 0  # annotations are built from them: eflomal or an error
    build = prepare_multiway if recipe.data.multilingual else prepare
    prepared = build(recipe.data, directory, max_len=max_len, tokenizer=tokenizer, alignments=alignments)
    if guided and not prepared.aligned:  # the run trains on, without the alignment head (`start_run`), or stops
        missing = "train.guided_alignment: eflomal is not installed (pip install 'tnmt[align]')"
        if (directions := len(recipe.data.trained_directions)) > UNGUIDED_DIRECTIONS:
            raise UserError(
                f"{missing}, and a model of {directions} directions was measured not to learn without the "
                "alignment head (benchmarks/NOTEBOOK.md, issue 68): install it, or set train.guided_alignment = 0 "
                "to train without"
            )
        log.warning(f"{missing}, so the words are not aligned and the run trains without guided alignment")
    return prepared


def _prepared(recipe: Recipe, world: World, checkpoint: Checkpoint | None) -> PreparedPairs | MultiwayPairs:
    """The prepared training corpus: rank 0 builds it (or finds it current) while the other ranks wait at a
    barrier; then each opens the same files and reads them (never writes)."""
    if world.is_main:
        prepared = prepare_training_corpus(recipe, checkpoint)
    world.barrier()
    if not world.is_main:
        prepared = prepare_training_corpus(recipe, checkpoint)
    return prepared
