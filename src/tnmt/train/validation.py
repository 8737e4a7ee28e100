"""Validation (section 6): the loss per token on the validation set, teacher-forced and unsmoothed, and sacreBLEU
and chrF of its sources decoded as the checkpoint will translate them, the ranks sharing the batches.
"""

import math
from dataclasses import replace

import torch

from tnmt.data.batching import TokenBatchSampler, collate
from tnmt.data.dataset import EncodedPairs
from tnmt.data.tokenizer import Tokenizer
from tnmt.device import to_device
from tnmt.evaluate import score
from tnmt.model import Transformer
from tnmt.recipe import Recipe
from tnmt.train.distributed import World, translate_across
from tnmt.train.loss import model_loss
from tnmt.translate.translator import Translator


@torch.no_grad()
def validate(
    model: Transformer,
    tokenizer: Tokenizer,
    data: EncodedPairs,
    sources: list[str],
    references: list[str],
    *,
    recipe: Recipe,
    world: World,
) -> dict[str, float]:
    """Validation loss (per token, teacher-forced, no smoothing), sacreBLEU and chrF of decoded sources.

    `data` holds the `sources` and references as ids, fitted to the model's positions (`fit_pairs`): the loss
    reads them, and the decoding of the sources reads the same ids, so nothing is tokenised twice.
    Decoding follows the recipe's [decode] table (what the checkpoint will translate with), with
    `train.eval_beam_size` as the beam size when it is set. The ranks share the batches of both passes
    and every rank returns the metrics of the whole set.
    """
    model.eval()
    ids, device = tokenizer.special_ids, next(model.parameters()).device
    sampler = TokenBatchSampler(data.lengths(), max_tokens=recipe.train.max_tokens, seed=0, shuffle=False)
    total_nll, total_tokens = 0.0, 0
    for indices in sampler.batches(0)[world.rank :: world.size]:
        batch = to_device(collate(data.pairs(indices), **ids, starts=data.starts(indices)), device)
        features = model(batch.src, batch.tgt_in, features_only=True)  # (B, T, D)
        _, nll = model_loss(model, features, batch.tgt_out, epsilon=0.0)
        total_nll, total_tokens = total_nll + nll.item(), total_tokens + batch.n_tgt_tokens
    decode = replace(recipe.decode, beam_size=recipe.train.eval_beam_size or recipe.decode.beam_size)
    hypotheses = translate_across(world, Translator(model, tokenizer, decode), sources, data.src, starts=data.start_ids)
    total_nll, total_tokens = world.sum(total_nll, total_tokens)
    val_loss = total_nll / max(total_tokens, 1)
    scores = score(hypotheses, references)
    return {
        "val_loss": val_loss,
        "val_ppl": math.exp(min(val_loss, 50)),
        "val_bleu": scores.bleu,
        "val_chrf": scores.chrf,
    }
