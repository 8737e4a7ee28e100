"""Fixtures shared by the test files."""

import functools
import http.server
import os
import random
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
from hypothesis import settings
from num2words import num2words

from tnmt.recipe import Recipe, load_recipe

# Test tensors are tiny: one thread avoids oversubscription and makes timings steadier.
torch.set_num_threads(1)
# Property tests run a modest number of examples each; benchmarks/robustness/fuzz.py runs the large budgets.
settings.register_profile("tnmt", max_examples=50, deadline=None)
settings.load_profile("tnmt")


SHARED_MULTI30K = Path(__file__).resolve().parents[2] / "shared" / "data" / "multi30k"  # CI's, beside the clone
GET_MULTI30K = "`tnmt data multi30k --out DIR`, then set TNMT_DATA_DIR=DIR"
NO_MULTI30K = f"Multi30k not found: run `make demo` (it downloads en-de into ~/.cache/tnmt), or {GET_MULTI30K}"
NO_COMPLETE_MULTI30K = f"this test needs all of Multi30k (fr, cs, tokenised references): {GET_MULTI30K}"


def local_multi30k(*, complete: bool, shared: Path = SHARED_MULTI30K) -> Path:
    """The Multi30k copy the tests read, checked against tnmt's sha256 sums: `TNMT_DATA_DIR`, else the shared
    copy, else the cache `make demo` downloads into (`tnmt.data.multi30k.find_multi30k`'s). A bad file in
    either of the first two fails the test, since that copy was meant; with no copy, the test is skipped.

    Args:
        complete: The files `tnmt data multi30k` fetches (en, de, fr, cs, and tokenised references for all but
            cs); otherwise en and de's raw text, all the demo downloads.
    """
    from tnmt.data.multi30k import LANGS, TOKENISED_LANGS, copy_problem, multi30k_cache

    needed = [(LANGS, False), (TOKENISED_LANGS, True)] if complete else [(("en", "de"), False)]

    def problem(root: Path) -> str | None:
        for langs, tok in needed:
            if found := copy_problem(root, langs=langs, tok=tok):
                return found
        return None

    meant = None
    if local := os.environ.get("TNMT_DATA_DIR"):
        meant = Path(local)
    elif shared.is_dir():
        meant = shared
    if meant is not None:
        if found := problem(meant):
            pytest.fail(f"Multi30k copy {meant}: {found}", pytrace=False)
        return meant
    if problem(multi30k_cache()) is None:
        return multi30k_cache()
    pytest.skip(NO_COMPLETE_MULTI30K if complete else NO_MULTI30K)


@pytest.fixture(scope="session")
def multi30k_dir() -> Path:
    """A local copy of Multi30k's en and de raw text (`{split}.{lang}.gz`); see `local_multi30k`."""
    return local_multi30k(complete=False)


@pytest.fixture(scope="session")
def complete_multi30k_dir() -> Path:
    """A local copy of every Multi30k file (fr and cs too, and the tokenised references in `tok/`)."""
    return local_multi30k(complete=True)


class Server:
    """A static file server on 127.0.0.1 that records the paths it was asked for (and the Range headers).

    With `ranges`, a `Range: bytes=N-` request gets 206 and the file from byte N (416 past its end), as
    real download servers answer; without, the whole file with 200, as `http.server` alone does.
    """

    def __init__(self, root: Path, *, ranges: bool = True) -> None:
        requests: list[str] = []
        range_headers: list[str] = []
        self.requests, self.range_headers = requests, range_headers

        class Handler(http.server.SimpleHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                requests.append(self.path)
                path = Path(self.translate_path(self.path))
                if (header := self.headers.get("Range")) is None or not path.is_file():
                    return super().do_GET()
                range_headers.append(header)
                if not ranges:
                    return super().do_GET()
                data, start = path.read_bytes(), int(header.removeprefix("bytes=").removesuffix("-"))
                if start >= len(data):
                    self.send_response(416)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                self.wfile.write(data[start:])

            def log_message(self, *args: object) -> None:
                pass

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


@pytest.fixture(scope="session")
def http_server() -> Iterator[Callable[..., Server]]:
    """Start a `Server(root, ranges=...)` on a free loopback port; all are stopped at the end of the session."""
    servers: list[Server] = []

    def start(root: Path, *, ranges: bool = True) -> Server:
        servers.append(Server(root, ranges=ranges))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def numbers_corpus(tmp_path_factory) -> Path:
    """A tiny English -> Italian number-words corpus: train.{en,it} (300 lines), valid.{en,it} (30 lines)."""
    directory = tmp_path_factory.mktemp("numbers")
    rng = random.Random(0)
    numbers = [rng.randrange(1, 10_000) for _ in range(330)]
    for split, values in (("train", numbers[:300]), ("valid", numbers[300:])):
        (directory / f"{split}.en").write_text("".join(num2words(n) + "\n" for n in values))
        (directory / f"{split}.it").write_text("".join(num2words(n, lang="it") + "\n" for n in values))
    return directory


@pytest.fixture(scope="session")
def numbers_multiway(tmp_path_factory) -> Path:
    """The same numbers in words of five languages, line by line: train.{en,de,fr,cs,it} (300 lines) and
    valid.{...} (30 lines), a multi-way corpus as Multi30k's four languages are."""
    directory = tmp_path_factory.mktemp("numbers_multiway")
    rng = random.Random(1)
    numbers = [rng.randrange(1, 10_000) for _ in range(330)]
    for split, values in (("train", numbers[:300]), ("valid", numbers[300:])):
        for lang in ("en", "de", "fr", "cs", "it"):
            (directory / f"{split}.{lang}").write_text("".join(num2words(n, lang=lang) + "\n" for n in values))
    return directory


MULTI_TRAINED = (("en", "de"), ("de", "en"), ("en", "it"), ("it", "en"))  # not de <-> it: zero-shot pairs


@pytest.fixture(scope="session")
def multi_checkpoint(numbers_multiway, tmp_path_factory) -> Path:
    """A checkpoint of a random tiny multilingual model of en, de and it, trained (so it says) on `MULTI_TRAINED`."""
    from tnmt.checkpoint import save_checkpoint
    from tnmt.config import DecodeConfig
    from tnmt.data.tokenizer import Tokenizer

    lines = [
        line for lang in ("en", "de", "it") for line in (numbers_multiway / f"train.{lang}").read_text().split("\n")
    ]
    tokenizer = Tokenizer.train([line for line in lines if line], vocab_size=400, languages=("en", "de", "it"))
    path = tmp_path_factory.mktemp("multi_checkpoint") / "ckpt"
    decode = DecodeConfig(beam_size=2, max_len=6)
    return save_checkpoint(path, tiny_model(tokenizer), tokenizer, decode=decode, directions=MULTI_TRAINED)


@pytest.fixture(scope="session")
def tiny_training(numbers_corpus) -> list[str]:
    """Recipe overrides that train a tiny model on `numbers_corpus` in seconds."""
    files = [
        f"--data.{name}_{side}={numbers_corpus / f'{split}.{lang}'}"
        for name, split in (("train", "train"), ("valid", "valid"))
        for side, lang in (("src", "en"), ("tgt", "it"))
    ]
    model = ["--model.d_model=32", "--model.d_ff=64", "--model.n_heads=2", "--model.max_len=64"]
    layers = ["--model.n_encoder_layers=1", "--model.n_decoder_layers=1"]
    return [
        "--data.corpus=files",
        "--data.vocab_size=300",
        *files,
        *model,
        *layers,
        "--train.max_tokens=400",
        "--train.warmup_steps=10",
        "--train.threads=1",
    ]


@pytest.fixture(scope="session")
def tiny_recipe(tiny_training) -> Callable[..., Recipe]:
    """`tiny_recipe(out, *overrides)`: the tiny run's recipe writing to `out`, logging every 2 updates and
    validating every 4."""

    def make(out: Path, *overrides: str) -> Recipe:
        settings = [f"--train.out_dir={out}", "--train.log_every=2", "--train.eval_every=4", *overrides]
        return load_recipe(None, [*tiny_training, *settings])

    return make


@pytest.fixture(scope="session")
def tiny_run(tiny_recipe, tmp_path_factory) -> Path:
    """A tiny run of 8 updates: snapshots at 1, 2, 4 and 8, validation (and step checkpoints) at 4 and 8, step 4
    kept as `best` (tnmt replay's input)."""
    from tnmt.train.loop import train

    out = tmp_path_factory.mktemp("tiny_run") / "run"
    recipe = tiny_recipe(out, "--train.max_steps=8", "--train.snapshots_from=1", "--train.keep_checkpoints=1")
    return train(recipe, progress=False)


@pytest.fixture(scope="session")
def tiny_checkpoint(numbers_corpus, tmp_path_factory) -> Path:
    """A checkpoint of a random tiny model (max_len 16) with a real tokenizer and stored [decode] settings."""
    from tnmt.checkpoint import save_checkpoint
    from tnmt.config import DecodeConfig
    from tnmt.data.tokenizer import Tokenizer

    lines = (numbers_corpus / "train.en").read_text().splitlines() + (
        numbers_corpus / "train.it"
    ).read_text().splitlines()
    tokenizer = Tokenizer.train(lines, vocab_size=300)
    path = tmp_path_factory.mktemp("tiny_checkpoint") / "ckpt"
    decode = DecodeConfig(beam_size=2, max_len=5)
    return save_checkpoint(path, tiny_model(tokenizer), tokenizer, decode=decode, directions=[("en", "it")])


def tiny_model(tokenizer) -> torch.nn.Module:
    """A random model of 1+1 layers, d_model 16, max_len 16, for `tokenizer` (with its language tags, if any)."""
    from tnmt.config import ModelConfig
    from tnmt.model import Transformer

    torch.manual_seed(0)
    config = ModelConfig(
        src_vocab_size=tokenizer.vocab_size,
        tgt_vocab_size=tokenizer.vocab_size,
        d_model=16,
        n_heads=2,
        n_encoder_layers=1,
        n_decoder_layers=1,
        d_ff=32,
        max_len=16,
        language_ids=tokenizer.language_ids,
    )
    return Transformer(config)


@pytest.fixture(scope="session")
def tiny_translator(tiny_checkpoint):
    """A `Translator` over `tiny_checkpoint`, shared: translating changes nothing in it."""
    from tnmt.translate.translator import Translator

    return Translator.from_checkpoint(tiny_checkpoint)


# Two float32 computations that are equal in exact arithmetic but sum in another order (a doubled batch, other
# matrix shapes) differ by rounding, and by how much depends on the host's kernels (AVX-512, AVX2, ...). After
# an Adam step that difference is no longer small: Adam divides by the root of the second moment, so a gradient
# entry that is rounding noise (the keys' bias, whose true gradient is 0) or near 0 moves its weight by up to a
# whole learning rate, in the direction of the noise. Weights after Adam steps are therefore compared only
# between identical computations (a resume: bitwise); two different computations are compared on the loss and
# the gradients of their first update, from the same weights, where rounding stays rounding.
# A gradient entry is a sum over the batch's n ~ 400 target tokens: float32 rounding (u = 6e-8) leaves it
# ~sqrt(n) u = 1e-6 of the tensor's largest entry from the exact value (the worst measured: 1.0e-6, with the
# AVX-512, AVX2 and default ATen kernels) and n u = 2.4e-5 at worst: the tolerance is 1e-4 of the tensor's
# largest entry. The loss, a sum over the same tokens: n u rounded up, 1e-5 relative (measured: 1e-7).
GRADIENT_TOLERANCE = 1e-4  # of each tensor's largest gradient entry
LOSS_TOLERANCE = 1e-5  # relative


def relative_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| in units of a's largest entry (0 where a and b are both 0)."""
    return float((a - b).abs().max() / a.abs().max().clamp_min(torch.finfo(a.dtype).tiny))


def assert_same_gradients(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    """Two updates' gradients (by parameter name) equal to float32 rounding (`GRADIENT_TOLERANCE`)."""
    assert a.keys() == b.keys()
    for name, gradient in a.items():
        difference = relative_difference(gradient, b[name])
        assert difference <= GRADIENT_TOLERANCE, f"{name}: {difference:.1e} of its largest gradient entry"


@pytest.fixture
def gradient_log(monkeypatch) -> list[dict[str, torch.Tensor]]:
    """A list to which every training run of the test appends, per update, the gradients the optimizer steps
    with (by parameter name), recorded just before the step."""
    from tnmt.train import start

    updates, make_optimizer = [], start.make_optimizer

    def making(model, *args, **kwargs):
        optimizer, scaler = make_optimizer(model, *args, **kwargs)
        optimizer.register_step_pre_hook(
            lambda *_: updates.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
        )
        return optimizer, scaler

    monkeypatch.setattr(start, "make_optimizer", making)
    return updates
