"""train.compile: the compiled training path trains the same model as the eager one, and a compilation that
fails runs eagerly. Here torch.compile's inductor (C++ code generation: ~30 s a layer on this 2-core host) is
replaced by backends that trace the same graphs without generating code; benchmarks/gpu/gpu_speed.py compiles with
inductor on a GPU."""

import json
from functools import partial

import pytest
import torch
from conftest import assert_same_gradients

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


# Padded batches (a multiple of 8) give the compiled path other matrix shapes, so its gradients differ from the
# eager ones by float32 rounding: compared on the first update (conftest.py's GRADIENT_TOLERANCE says why not on
# the weights after Adam steps).


def run(tiny_recipe, out, gradients, *flags):
    """A 4-update tiny run without dropout (so both paths draw no random masks): its logged losses and the
    gradients (by parameter name) its first update hands the optimizer (`gradients`: conftest's `gradient_log`)."""
    first = len(gradients)
    done = train(tiny_recipe(out, "--train.max_steps=4", "--model.dropout=0", *flags), progress=False)
    log = [json.loads(line) for line in (done / "metrics.jsonl").read_text().splitlines()]
    assert len(gradients) == first + 4
    return [r["train_loss"] for r in log if "train_loss" in r], gradients[first]


def assert_same_training(a, b):
    (losses_a, gradients_a), (losses_b, gradients_b) = a, b
    assert len(losses_a) == 2
    # Updates 1-2 and 3-4: the losses follow the weights through the steps (an update changes the loss by 3% to
    # 27%, so a compiled graph that kept stale weights shows here), yet a loss barely moves where Adam amplified
    # rounding: there the gradient is ~0 (measured: within 1e-7 relative).
    torch.testing.assert_close(losses_b, losses_a, rtol=1e-5, atol=1e-6)
    assert_same_gradients(gradients_a, gradients_b)


@pytest.mark.parametrize("backend", ["aot_eager", "failing"])
def test_the_compiled_path_trains_the_same_model_as_the_eager_one(
    tiny_recipe, tmp_path, monkeypatch, caplog, backend, gradient_log
):
    """Compiled layers (traced forward and backward graphs, batches padded to 8), or a compilation that fails
    and falls back to eager layers: the same losses, and the same first update, as the eager run, to fp32
    rounding."""
    compiled_graphs = []

    def failing(graph, example_inputs):
        compiled_graphs.append(graph)
        raise RuntimeError("no compiler here")

    chosen = failing if backend == "failing" else backend
    monkeypatch.setattr(start, "compile_layers", partial(compile_layers, backend=chosen))
    eager = run(tiny_recipe, tmp_path / "eager", gradient_log)
    compiled = run(tiny_recipe, tmp_path / "compiled", gradient_log, "--train.compile=on")
    assert_same_training(eager, compiled)
    failures = [r.message for r in caplog.records if "compiling a layer failed" in r.message]
    if backend == "failing":  # it was tried once, failed, was said once, and the run went on
        assert len(compiled_graphs) == 1 and len(failures) == 1 and "no compiler here" in failures[0]
    else:
        assert not failures
