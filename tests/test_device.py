"""Device and precision decisions, tested for GPU capabilities this machine does not have."""

import json

import numpy as np
import pytest
import torch

from tnmt.data.batching import collate
from tnmt.device import MixedPrecision, cpu_bf16_speedup, mixed_precision, resolve_device, to_device
from tnmt.errors import UserError

CPU, GPU = torch.device("cpu"), torch.device("cuda", 0)


@pytest.mark.parametrize(
    ("kind", "available", "local_rank", "expected"),
    [
        ("auto", False, 0, CPU),
        ("auto", True, 0, GPU),
        ("auto", True, 3, torch.device("cuda", 3)),  # under torchrun: the machine's process index
        ("cpu", True, 3, CPU),
        ("cuda", True, 1, torch.device("cuda", 1)),
    ],
)
def test_device_choice(kind, available, local_rank, expected):
    assert resolve_device(kind, local_rank=local_rank, cuda_available=available) == expected


def test_cuda_without_a_gpu_is_a_one_line_error():
    with pytest.raises(UserError, match=r"^device = 'cuda' but PyTorch sees no CUDA device"):
        resolve_device("cuda", cuda_available=False)


@pytest.mark.parametrize(
    ("precision", "device", "bf16_supported", "expected"),
    [
        ("fp32", GPU, True, MixedPrecision(dtype=None, scaled=False)),
        ("fp32", CPU, False, MixedPrecision(dtype=None, scaled=False)),
        ("bf16", CPU, False, MixedPrecision(dtype=torch.bfloat16, scaled=False)),  # CPU autocast, as before
        ("bf16", GPU, True, MixedPrecision(dtype=torch.bfloat16, scaled=False)),  # Ampere and later
        ("bf16", GPU, False, MixedPrecision(dtype=torch.float16, scaled=True)),  # older GPUs: fp16 + loss scaling
        ("fp16", GPU, True, MixedPrecision(dtype=torch.float16, scaled=True)),
    ],
)
def test_precision_choice(precision, device, bf16_supported, expected):
    assert mixed_precision(precision, device, bf16_supported=bf16_supported) == expected


@pytest.mark.parametrize(
    ("device", "amx", "speedup", "bf16_supported", "expected"),
    [
        (CPU, True, 0.0, False, MixedPrecision(dtype=torch.bfloat16, scaled=False)),  # AMX: bf16 ~1.3x fp32
        (CPU, False, 2.2, False, MixedPrecision(dtype=torch.bfloat16, scaled=False)),  # AMD EPYC, AVX-512 bf16
        (CPU, False, 1.2, False, MixedPrecision(dtype=torch.bfloat16, scaled=False)),  # the threshold itself
        (CPU, False, 1.19, False, MixedPrecision(dtype=None, scaled=False)),
        (CPU, False, 0.56, False, MixedPrecision(dtype=None, scaled=False)),  # Xeon hiding AMX: slower than fp32
        (CPU, False, 0.0, False, MixedPrecision(dtype=None, scaled=False)),  # no bf16 instructions (AVX2)
        (GPU, False, 0.0, True, MixedPrecision(dtype=torch.bfloat16, scaled=False)),
        (GPU, False, 0.0, False, MixedPrecision(dtype=torch.float16, scaled=True)),
    ],
)
def test_auto_precision_is_mixed_only_where_it_is_faster(device, amx, speedup, bf16_supported, expected):
    got = mixed_precision("auto", device, bf16_supported=bf16_supported, amx=amx, bf16_speedup=speedup)
    assert got == expected


def test_auto_precision_logs_why(caplog):
    with caplog.at_level("INFO", logger="tnmt"):
        mixed_precision("auto", CPU, amx=False, bf16_speedup=1.74)
    assert "bf16 on a CPU whose bf16 products run 1.74x its fp32 ones (bf16 from 1.2x)" in caplog.text


def test_amx_detection_reads_torch_capabilities(monkeypatch):
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {"amx_bf16": True, "avx512_bf16": True})
    assert mixed_precision("auto", CPU, bf16_speedup=0.5) == MixedPrecision(dtype=torch.bfloat16, scaled=False)
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {"amx_bf16": False, "avx512_bf16": True})
    assert mixed_precision("auto", CPU, bf16_speedup=0.5) == MixedPrecision(dtype=None, scaled=False)


def test_bf16_speedup_is_not_timed_without_bf16_instructions(monkeypatch):
    """Emulated bf16 is far slower than fp32: such a CPU is answered 0 without a timing."""
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {"amx_bf16": False, "avx512_bf16": False})
    cpu_bf16_speedup.cache_clear()
    monkeypatch.setattr(torch.nn.functional, "linear", lambda *a: pytest.fail("timed a product"))
    try:
        assert cpu_bf16_speedup() == 0.0
        assert mixed_precision("auto", CPU, amx=False) == MixedPrecision(dtype=None, scaled=False)
    finally:
        cpu_bf16_speedup.cache_clear()


def test_bf16_speedup_times_this_cpu():
    """A positive ratio where the CPU has bf16 instructions, timed once per process."""
    capabilities = torch.cpu.get_capabilities()
    speedup = cpu_bf16_speedup()
    if capabilities.get("amx_bf16") or capabilities.get("avx512_bf16"):
        assert speedup > 0 and cpu_bf16_speedup() == speedup
    else:
        assert speedup == 0.0


def test_fp16_on_the_cpu_is_refused():
    with pytest.raises(UserError, match=r"^train.precision = 'fp16' needs a CUDA device; on the CPU use 'bf16'"):
        mixed_precision("fp16", CPU)


def test_a_cpu_batch_is_not_copied():
    batch = collate([([3, 4], [5])], pad_id=0, bos_id=1, eos_id=2)
    assert to_device(batch, CPU) is batch


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_batch_reaches_the_gpu_intact():
    batch = collate([([3, 4], [5]), ([6], [7, 8])], pad_id=0, bos_id=1, eos_id=2)
    moved = to_device(batch, GPU)
    assert moved.src.device.type == "cuda" and moved.n_tgt_tokens == batch.n_tgt_tokens
    assert torch.equal(moved.tgt_out.cpu(), batch.tgt_out) and moved.alignment is None
    links = [np.array([[0, 0], [1, 0]]), np.array([[0, 1]])]
    aligned = collate([([3, 4], [5]), ([6], [7, 8])], pad_id=0, bos_id=1, eos_id=2, links=links)
    moved = to_device(aligned, GPU)
    assert moved.alignment.device.type == "cuda" and torch.equal(moved.alignment.cpu(), aligned.alignment)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_guided_alignment_on_the_gpu(tiny_training, tmp_path, precision):
    from tnmt.checkpoint import load_checkpoint
    from tnmt.recipe import load_recipe
    from tnmt.train.loop import train

    overrides = [*tiny_training, f"--train.out_dir={tmp_path}", "--train.max_steps=6", "--train.log_every=1"]
    guided = ["--train.guided_alignment=1.0", "--train.device=cuda", f"--train.precision={precision}"]
    out = train(load_recipe(None, [*overrides, *guided]))
    align = [json.loads(line).get("train_align_loss") for line in (out / "metrics.jsonl").read_text().splitlines()]
    align = [value for value in align if value is not None]
    assert len(align) == 6 and all(0 < value < 20 for value in align) and align[-1] < align[0]
    assert load_checkpoint(out / "last").decode.alignment_head == 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_training_and_decoding_on_the_gpu(tiny_training, tmp_path, precision):
    from tnmt.config import DecodeConfig
    from tnmt.recipe import load_recipe
    from tnmt.train.loop import train
    from tnmt.translate.translator import Translator

    overrides = [*tiny_training, f"--train.out_dir={tmp_path}", "--train.max_steps=4", "--train.eval_every=2"]
    out = train(load_recipe(None, [*overrides, "--train.device=cuda", f"--train.precision={precision}"]))
    state = json.loads((out / "last" / "trainer_state.json").read_text())
    assert state["step"] == 4 and bool(state["grad_scaler"]) == (precision == "fp16")  # the loss scale is resumed
    greedy = DecodeConfig(beam_size=1)
    on_gpu = Translator.from_checkpoint(out / "last", device="cuda").translate(["forty-two", "seven"], greedy)
    on_cpu = Translator.from_checkpoint(out / "last", device="cpu").translate(["forty-two", "seven"], greedy)
    assert on_gpu == on_cpu
