"""train.compile: the compiled training path trains the same model as the eager one, and a compilation that
fails runs eagerly. Here torch.compile's inductor (C++ code generation: ~30 s a layer on this 2-core host) is
replaced by backends that trace the same graphs without generating code; benchmarks/gpu/gpu_speed.py compiles with
inductor on a GPU."""

import json
from functools import partial

import pytest
import torch

from tnmt.data.batching import collate
from tnmt.train import start
from tnmt.train.compiled import PAD_MULTIPLE, compile_layers, compile_wanted, pad_multiple
from tnmt.train.loop import train


@pytest.fixture(autouse=True)
def fresh_dynamo():
    """Each test compiles from scratch."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_auto_compiles_on_cuda_only():
    cpu, cuda = torch.device("cpu"), torch.device("cuda", 0)
    assert [compile_wanted(setting, cpu) for setting in ("off", "auto", "on")] == [False, False, True]
    assert [compile_wanted(setting, cuda) for setting in ("off", "auto", "on")] == [False, True, True]


def test_a_compiled_run_pads_batch_lengths_to_the_multiple():
    batch = collate([([5, 6, 7], [8, 9])], pad_id=0, bos_id=1, eos_id=2, pad_multiple=pad_multiple(True))
    assert batch.src.shape == batch.tgt_in.shape == (1, PAD_MULTIPLE) and batch.n_tgt_tokens == 3
    assert collate([([5, 6, 7], [8, 9])], pad_id=0, bos_id=1, eos_id=2, pad_multiple=pad_multiple(False)).src.shape == (
        1,
        4,
    )


# Padded batches (a multiple of 8) give the compiled path other matrix shapes, so its gradients differ from
# the eager ones by float32 rounding, by an amount that depends on the host's kernels (AVX-512, AVX2, ...).
# Adam turns such differences into up to a whole learning rate where a gradient entry is (near) 0 (it divides
# by the root of the second moment; the keys' bias has a true gradient of 0), so the weights after Adam steps
# are not compared. The first update's gradients, from the same weights, are: a gradient entry is a sum over
# the batch's n ~ 400 target tokens, which float32 (u = 6e-8) rounds ~sqrt(n) u = 1e-6 of the tensor's largest
# entry from the exact sum (measured: 4e-7, with the AVX-512 and AVX2 kernels) and n u = 2.4e-5 at worst:
# the tolerance is 1e-4 of the tensor's largest entry.
GRADIENT_TOLERANCE = 1e-4


def run(tiny_recipe, out, *flags):
    """A 4-update tiny run without dropout (so both paths draw no random masks): its logged losses and the
    gradients (by parameter name) its first update hands the optimizer."""
    updates, make_optimizer = [], start.make_optimizer

    def making(model, *args, **kwargs):
        optimizer, scaler = make_optimizer(model, *args, **kwargs)
        optimizer.register_step_pre_hook(
            lambda *_: updates.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
        )
        return optimizer, scaler

    recipe = tiny_recipe(out, "--train.max_steps=4", "--model.dropout=0", *flags)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(start, "make_optimizer", making)
        done = train(recipe, progress=False)
    log = [json.loads(line) for line in (done / "metrics.jsonl").read_text().splitlines()]
    assert len(updates) == 4
    return [r["train_loss"] for r in log if "train_loss" in r], updates[0]


def assert_same_training(a, b):
    (losses_a, gradients_a), (losses_b, gradients_b) = a, b
    assert len(losses_a) == 2
    # Updates 1-2 and 3-4: the losses follow the weights through the steps (an update changes the loss by 3% to
    # 27%, so a compiled graph that kept stale weights shows here), yet a loss barely moves where Adam amplified
    # rounding: there the gradient is ~0 (measured: within 1e-7 relative).
    torch.testing.assert_close(losses_b, losses_a, rtol=1e-5, atol=1e-6)
    assert gradients_a.keys() == gradients_b.keys()
    for name, a in gradients_a.items():
        difference = float((a - gradients_b[name]).abs().max() / a.abs().max().clamp_min(torch.finfo(a.dtype).tiny))
        assert difference <= GRADIENT_TOLERANCE, f"{name}: {difference:.1e} of its largest gradient entry"


@pytest.mark.parametrize("backend", ["aot_eager", "failing"])
def test_the_compiled_path_trains_the_same_model_as_the_eager_one(tiny_recipe, tmp_path, monkeypatch, caplog, backend):
    """Compiled layers (traced forward and backward graphs, batches padded to 8), or a compilation that fails
    and falls back to eager layers: the same losses, and the same first update, as the eager run, to fp32
    rounding."""
    compiled_graphs = []

    def failing(graph, example_inputs):
        compiled_graphs.append(graph)
        raise RuntimeError("no compiler here")

    chosen = failing if backend == "failing" else backend
    monkeypatch.setattr(start, "compile_layers", partial(compile_layers, backend=chosen))
    eager = run(tiny_recipe, tmp_path / "eager")
    compiled = run(tiny_recipe, tmp_path / "compiled", "--train.compile=on")
    assert_same_training(eager, compiled)
    failures = [r.message for r in caplog.records if "compiling a layer failed" in r.message]
    if backend == "failing":  # it was tried once, failed, was said once, and the run went on
        assert len(compiled_graphs) == 1 and len(failures) == 1 and "no compiler here" in failures[0]
    else:
        assert not failures
