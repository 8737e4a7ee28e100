"""The exponential moving average of the weights: its arithmetic, the swap, and training with it."""

import torch
from safetensors.torch import load_file
from torch import nn

from tnmt.checkpoint import load_checkpoint
from tnmt.recipe import load_recipe
from tnmt.train.ema import WeightAverage
from tnmt.train.loop import train


def test_the_average_follows_the_formula_with_its_warm_up():
    model = nn.Linear(3, 2)
    ema = WeightAverage(model, decay=0.99)
    expected = [p.detach().clone() for p in model.parameters()]
    for step in range(1, 6):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))
        ema.update(step)
        decay = min(0.99, (1 + step) / (10 + step))  # 0.18, 0.25, ...: early weights fade fast
        expected = [decay * e + (1 - decay) * p.detach() for e, p in zip(expected, model.parameters(), strict=True)]
    for shadow, value in zip(ema.shadow, expected, strict=True):
        torch.testing.assert_close(shadow, value)


def test_tied_weights_are_averaged_once():
    model = nn.Sequential(nn.Embedding(5, 4), nn.Linear(4, 5, bias=False))
    model[1].weight = model[0].weight
    assert len(WeightAverage(model, decay=0.9).shadow) == 1


def test_the_swap_lends_the_average_and_gives_the_weights_back():
    model = nn.Linear(3, 2)
    ema = WeightAverage(model, decay=0.5)
    ema.shadow = [torch.zeros_like(s) for s in ema.shadow]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    taken = model.state_dict()  # tensors taken before the swap keep the training weights
    with ema.swapped_in():
        assert all(torch.equal(p, torch.zeros_like(p)) for p in model.parameters())
        assert all(torch.equal(taken[k], before[k]) for k in before)
    assert all(torch.equal(model.state_dict()[k], before[k]) for k in before)


def test_checkpoints_hold_the_average_and_the_weights_training_continues_from(tiny_training, tmp_path):
    overrides = [*tiny_training, f"--train.out_dir={tmp_path}", "--train.max_steps=6", "--train.eval_every=3"]
    out = train(load_recipe(None, [*overrides, "--train.ema_decay=0.9"]), progress=False)
    checkpoint = load_checkpoint(out / "last")
    average, training = checkpoint.model.state_dict(), checkpoint.training_weights
    assert training is not None and training.keys() <= average.keys()
    assert not all(torch.equal(average[k], training[k]) for k in training)  # two different sets of weights
    stored = load_file((out / "last").resolve() / "model.safetensors")
    assert all(torch.equal(stored[k], average[k]) for k in stored)  # what `tnmt translate` loads: the average
