"""One optimizer update (section 5.3): this rank's share of a group of batches, forward and backward on each
with gradients accumulated, clipped, the learning rate of Eq. 3 set, one Adam step, the EMA followed.

The losses it returns stay on the device (unread tensors): training reads them back once per log line.
"""

from contextlib import nullcontext

import numpy as np
import torch
from torch import Tensor

from tnmt.aligning_head import alignment_layer_index
from tnmt.data.batching import Batch, collate
from tnmt.data.dataset import TrainingPairs
from tnmt.device import to_device
from tnmt.train.compiled import pad_multiple
from tnmt.train.distributed import collective
from tnmt.train.loss import GUIDED_HEAD, alignment_loss, model_loss
from tnmt.train.schedule import inverse_sqrt_lr
from tnmt.train.start import Run


def update_on(run: Run, data: TrainingPairs, group: list[np.ndarray]) -> tuple[Tensor, Tensor, int, Tensor, Tensor]:
    """One update on a group of global batches (indices into `data`): the j-th goes to rank j mod N."""
    world, ids, device = run.world, run.tokenizer.special_ids, next(run.model.parameters()).device
    mine = group[world.rank :: world.size]
    guided = bool(run.recipe.train.guided_alignment)
    multiple = pad_multiple(run.model.compiled_layer is not None)
    batches = [
        to_device(
            collate(
                data.pairs(indices),
                **ids,
                links=data.links(indices) if guided else None,
                pad_multiple=multiple,
                starts=data.starts(indices),
            ),
            device,
        )
        for indices in mine or group[:1]
    ]
    with collective(world):
        return _update(run, batches, real=len(mine), steps=-(-len(group) // world.size))


def _update(run: Run, batches: list[Batch], *, real: int, steps: int) -> tuple[Tensor, Tensor, int, Tensor, Tensor]:
    """One optimizer update over this rank's `real` batches (of `batches`), accumulated; returns this rank's
    summed label-smoothed loss, NLL, alignment loss and aligned target tokens (tensors on the device, unread),
    and the target tokens of all ranks.

    Every rank runs `steps` forward/backward passes so DDP's collectives stay in step: a rank short of data
    at the end of an epoch repeats its first batch with weight 0 (fairseq's dummy batch). The loss is divided
    by the target tokens of all ranks, times world.size because DDP averages gradients over ranks: the
    update equals one process accumulating every rank's batches. Gradients are all-reduced once, in the
    backward pass of the last micro-batch (`no_sync` before it). The alignment loss, weighted, joins the
    label-smoothed one before that division, as in Marian: summed over aligned tokens, divided by all tokens.
    """
    cfg, world, net, model, scaler = run.recipe.train, run.world, run.net, run.model, run.scaler
    (n_tokens,) = world.sum(sum(b.n_tgt_tokens for b in batches[:real]))
    total_loss, total_nll, total_align, n_aligned = torch.zeros(4, device=batches[0].src.device)
    for i in range(steps):
        batch, weight = (batches[i], world.size) if i < real else (batches[0], 0)
        last = i == steps - 1
        with nullcontext() if last or world.size == 1 else net.no_sync():
            loss, nll, align, aligned = _batch_losses(run, batch)
            objective = loss if align is None else loss + cfg.guided_alignment * align
            scaler.scale(objective * weight / n_tokens).backward()  # every token of the update weighs the same
        if i < real:
            total_loss, total_nll = total_loss + loss.detach(), total_nll + nll
            if align is not None:
                total_align, n_aligned = total_align + align.detach(), n_aligned + aligned
    scaler.unscale_(run.optimizer)
    if cfg.clip_norm:
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_norm)
    step = run.state.step + 1
    lr = inverse_sqrt_lr(step, d_model=model.config.d_model, warmup_steps=cfg.warmup_steps, factor=cfg.lr_factor)
    for group in run.optimizer.param_groups:
        group["lr"] = lr
    scaler.step(run.optimizer)
    scaler.update()
    if run.ema:
        run.ema.update(step)
    run.optimizer.zero_grad(set_to_none=True)
    return total_loss, total_nll, int(n_tokens), total_align, n_aligned


def _batch_losses(run: Run, batch: Batch) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
    """One batch's summed label-smoothed loss and NLL (`model_loss`), and with guided alignment its summed
    alignment loss and aligned target tokens (`alignment_loss`, from the same forward pass), else None twice."""
    cfg, model, dtype = run.recipe.train, run.model, run.precision.dtype
    src, tgt_in, alignment = batch.src, batch.tgt_in, batch.alignment
    passes = 2 if cfg.rdrop_alpha else 1
    if cfg.rdrop_alpha:  # R-Drop: the batch twice in one pass, each copy with its own dropout masks
        src, tgt_in = src.repeat(2, 1), tgt_in.repeat(2, 1)
        alignment = None if alignment is None else alignment.repeat(2, 1, 1)
    # features (B, T, D), (2B, T, D) with R-Drop; guided: also the guided layer's cross-attention (B, H, T, S)
    with torch.autocast(src.device.type, dtype=dtype, enabled=dtype is not None):
        if cfg.guided_alignment:
            layer = alignment_layer_index(run.recipe.decode.alignment_layer, model.config.n_decoder_layers)
            features, attention = run.net(src, tgt_in, features_only=True, cross_attention_of=layer)
        else:
            features, attention = run.net(src, tgt_in, features_only=True), None
    loss, nll = model_loss(
        model,
        features,
        batch.tgt_out,
        epsilon=cfg.label_smoothing,
        dtype=dtype,
        rdrop_alpha=cfg.rdrop_alpha,
        n_tokens=batch.n_tgt_tokens,
    )
    if attention is None:
        return loss, nll, None, None
    align, aligned = alignment_loss(attention[:, GUIDED_HEAD], alignment)  # R-Drop: the passes' mean, as `loss`
    return loss, nll, align / passes, aligned // passes
