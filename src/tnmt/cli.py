"""The `tnmt` command: thin wrappers over the library, one function per subcommand.

Bad input (a missing file, a malformed corpus line, an unknown config key) prints one line on
stderr and exits with status 2; no traceback, nothing half-written. A failing file system (full,
read-only, no permission) prints one line naming the path and exits with status 1. Warnings and notes
are one line each on stderr too. Only argparse and the config dataclasses are imported up front: `tnmt --help` and
argument errors answer without loading torch, and each subcommand imports what it needs.
"""

import argparse
import gc
import logging
import math
import os
import signal
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, BinaryIO, Literal, NoReturn, TypeVar, get_args, get_origin

from tnmt.config import MAX_THREADS, DecodeConfig, ServeConfig
from tnmt.errors import UserError, reading_file

C = TypeVar("C")
SWITCH_INTERVAL_S = 0.0005  # `tnmt serve`: how often a thread holding the GIL hands it over (see _serve)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command not in ("train", "prepare"):
        print(f"tnmt {args.command}: error: unrecognized arguments: {' '.join(extra)}", file=sys.stderr)
        return 2
    log, level = logging.getLogger("tnmt"), logging.getLogger("tnmt").level
    handler = logging.StreamHandler()  # sys.stderr as it is now
    handler.setFormatter(logging.Formatter(f"tnmt {args.command}: %(levelname)s: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)  # notes such as "downloading ..." too
    try:
        return args.run(args, extra) or 0
    except UserError as e:
        print(f"tnmt {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"tnmt {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader stopped early (`tnmt translate ... | head`): not our error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit-time flush stays quiet
        return 0
    except OSError as e:  # the environment failed us (a full disk, a read-only place): one line naming the path
        where = f"{e.filename}: " if e.filename else ""
        print(f"tnmt {args.command}: error: {where}{e.strerror or e}", file=sys.stderr)
        return 1
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


class _Parser(argparse.ArgumentParser):
    """Argument errors are one line like every other error (`tnmt CMD: error: ...`, exit 2), not a usage dump."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The `tnmt` command's whole argument parser, every subcommand with its options.

    Public for code that reads the command's surface rather than running it: the tests that parse a
    documented command line and the robustness campaign (`benchmarks/robustness/cli_campaign.py`) that
    generates its cases from each subcommand's options, so a new option is tried the day it is added.
    """
    parser = _Parser(prog="tnmt", description="Transformer neural machine translation")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_training_commands(sub)
    _add_decoding_commands(sub)
    _add_explain_command(sub)
    _add_serving_commands(sub)
    _add_conversion_commands(sub)
    return parser


def _add_training_commands(sub: argparse._SubParsersAction) -> None:
    """train, prepare, data, quickstart, average."""
    p = sub.add_parser(
        "train",
        help="train a model from a TOML recipe",
        description="Train from a recipe; override any key with --section.key=value.",
    )
    p.add_argument("config", type=_path_text, help="TOML recipe, e.g. configs/multi30k_en_de.toml")
    p.add_argument("--resume", action="store_true", help="continue from OUT_DIR/last exactly where it stopped")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (logs still go to metrics.jsonl)")
    p.set_defaults(run=_train)

    p = sub.add_parser(
        "prepare",
        help="encode a recipe's training corpus for training (tnmt train does it when needed)",
        description="Train the tokenizer and encode the training corpus into <train.out_dir>/prepared (or "
        "data.prepared_dir), and with train.guided_alignment > 0 align its words (eflomal); nothing is done if it "
        "is up to date. Override any key with --section.key=value.",
    )
    p.add_argument("config", type=_path_text, help="TOML recipe, e.g. configs/multi30k_en_de.toml")
    p.set_defaults(run=_prepare)

    p = sub.add_parser("data", help="fetch a data set (checksum-verified; a rerun reuses what is there)")
    p.add_argument("dataset", choices=["multi30k", "wmt14"], help="wmt14: the paper's en-de corpus, about 1.7 GB")
    p.add_argument("--out", required=True, type=_path, help="directory for the files")
    p.add_argument("--from", dest="source", type=_path_text, help="local copy (directory) or base URL to fetch from")
    p.add_argument("--langs", nargs="+", help="Multi30k's languages (default: en de fr cs)")
    p.set_defaults(run=_data)

    p = sub.add_parser("quickstart", help="train, evaluate and translate end to end (Multi30k, or offline)")
    p.add_argument("--out", type=_path, default=Path("outputs/quickstart"))
    p.add_argument("--minutes", type=float, default=10.0, help="training budget on Multi30k")
    p.add_argument("--offline", action="store_true", help="use the built-in number-words task")
    p.add_argument("--steps", type=int, default=0, help="cap training at this many updates (smoke tests)")
    p.set_defaults(run=_quickstart)

    p = sub.add_parser(
        "shortlist",
        help="learn a checkpoint's vocabulary shortlist from its prepared corpus (tnmt train does it)",
        description="Count which target pieces each source piece leads to in the prepared training pairs and "
        "write CHECKPOINT/shortlist.safetensors (data/shortlist.py); a search then projects onto the pieces "
        "its sources can lead to (--no-shortlist: onto all).",
    )
    p.add_argument("checkpoint", type=_path, help="a checkpoint directory (or a best/last link)")
    p.add_argument("--prepared", required=True, type=_path, help="the prepared corpus it was trained on")
    p.set_defaults(run=_shortlist)

    p = sub.add_parser("average", help="average the weights of checkpoints (section 6.1)")
    p.add_argument("checkpoints", nargs="+", type=_path)
    p.add_argument("--out", required=True, type=_path)
    p.set_defaults(run=_average)


def _add_decoding_commands(sub: argparse._SubParsersAction) -> None:
    """translate, evaluate, attention: each takes --checkpoint and the decoding flags."""
    p = sub.add_parser("translate", help="translate stdin (or -i FILE) line by line")
    _decode_options(p)
    p.add_argument("-i", "--input", type=_path_text, help="input file (default: stdin)")
    p.add_argument("-o", "--output", "--out", type=_path_text, help="output file (default: stdout)")
    p.add_argument(
        "--file",
        type=_path_text,
        help="a document translated in its own format (txt html md srt vtt po docx odt pptx xliff), into -o",
    )
    p.add_argument(
        "--format",
        help="--file's format when its extension does not say it (txt html markdown srt vtt po docx odt pptx xliff)",
    )
    p.add_argument(
        "--report",
        type=_path_text,
        help="with --file: a JSON report per segment (confidence, warnings, glossary terms met, sentences split)",
    )
    p.add_argument(
        "--engine",
        choices=["tnmt", "ctranslate2"],
        default="tnmt",
        help="ctranslate2: --checkpoint is a directory written by `tnmt export ctranslate2`",
    )
    evidence = p.add_argument_group("evidence: tab-separated columns after each translation, in this order")
    evidence.add_argument("--alignment", action="store_true", help="word alignment as Pharaoh i-j pairs")
    evidence.add_argument(
        "--scores", action="store_true", help="sentence confidence, then each word's probability (space-separated)"
    )
    evidence.add_argument("--warnings", action="store_true", help="warning codes (comma-separated; empty when clean)")
    steer = p.add_argument_group("steering (translate/steering.py): applied to every line")
    steer.add_argument(
        "--glossary", type=_path_text, help="TSV of source term<TAB>target term (forms separated by ' | ')"
    )
    steer.add_argument("--do-not-translate", type=_path_text, help="terms kept as written, one per line")
    p.set_defaults(run=_translate)

    p = sub.add_parser("evaluate", help="translate a source file and score it with sacreBLEU")
    _decode_options(p)
    p.add_argument("--src", type=_path_text, help="source sentences, one per line (plain or .gz)")
    p.add_argument("--ref", type=_path_text, help="reference translations, aligned with --src")
    p.add_argument("--hyp-out", type=_path_text, help="also write the translations to this file")
    every = p.add_argument_group("every direction of a multilingual checkpoint, on Multi30k (instead of --src/--ref)")
    every.add_argument("--all-directions", action="store_true", help="score each trained direction: a table")
    every.add_argument("--split", help="Multi30k split (test_2016_flickr)")
    every.add_argument("--table", type=_path_text, help="also write the table as JSON to this file")
    p.set_defaults(run=_evaluate)

    p = sub.add_parser("attention", help="draw attention heat maps for one sentence")
    _decode_options(p)
    p.add_argument("sentence")
    p.add_argument("--out", type=_path, default=Path("outputs/attention"))
    p.set_defaults(run=_attention)


def _add_explain_command(sub: argparse._SubParsersAction) -> None:
    """explain: the search for one sentence, step by step; inspect: the forward pass over it, stage by stage."""
    p = sub.add_parser("explain", help="show how the search translates one sentence, step by step")
    _decode_options(p)
    p.add_argument("sentence")
    p.add_argument("--top-k", type=int, default=5, help="likeliest next tokens shown per hypothesis (5)")
    p.add_argument("--json", action="store_true", help="print the JSON of POST /v1/explain instead of tables")
    p.set_defaults(run=_explain)

    p = sub.add_parser("inspect", help="show every stage of the model's forward pass over one sentence")
    _decode_options(p)
    p.add_argument("sentence")
    p.add_argument("--translation", help="feed this translation to the decoder instead of the model's own")
    p.add_argument("--top-k", type=int, default=5, help="likeliest next pieces listed per position (5)")
    p.add_argument("--json", action="store_true", help="print the JSON of POST /v1/inspect instead of a summary")
    p.set_defaults(run=_inspect)

    p = sub.add_parser("replay", help="one sentence through a training run, model by model kept (how it learned)")
    p.add_argument("--run", dest="run_dir", required=True, type=_path, help="the run's directory (its --train.out_dir)")
    p.add_argument("sentence")
    p.add_argument("--reference", help="a translation whose probability each model is asked for")
    p.add_argument("--source", metavar="CODE", help="the sentence's language (a multilingual run)")
    p.add_argument("--target", metavar="CODE", help="the language to write (a multilingual run)")
    p.add_argument("--threads", type=int, default=0, help="CPU threads; 0 = PyTorch's default (0)")
    p.add_argument("--json", action="store_true", help="print the JSON of POST /v1/replay instead of text")
    p.set_defaults(run=_replay)


def _add_serving_commands(sub: argparse._SubParsersAction) -> None:
    """serve: one flag per `ServeConfig` field."""
    p = sub.add_parser("serve", help="serve translations over HTTP (API, LibreTranslate API, web page)")
    p.add_argument("--checkpoint", required=True, type=_path, action="append", help="repeat for more language pairs")
    p.add_argument(
        "--run",
        dest="run_dir",
        type=_path,
        help="the checkpoint's training run, for /v1/replay (default: the run it sits in, if any)",
    )
    _device_option(p)
    _config_flags(p.add_argument_group("server"), ServeConfig)
    p.set_defaults(run=_serve)


def _add_conversion_commands(sub: argparse._SubParsersAction) -> None:
    """import, export: other toolkits' models in and out."""
    p = sub.add_parser("import", help="convert another toolkit's model into a tnmt checkpoint")
    p.add_argument("format", choices=["marian"], help="marian: a Hugging Face MarianMT (OPUS-MT) directory")
    p.add_argument("directory", type=_path, help="the model directory (config.json, weights, *.spm, vocab.json)")
    p.add_argument("--out", required=True, type=_path, help="checkpoint directory to write")
    for side in ("source", "target"):
        p.add_argument(
            f"--{side}",
            metavar="CODE",
            help=f"{side} language, e.g. {'en' if side == 'source' else 'de'} (default: the one the model names)",
        )
    p.set_defaults(run=_import)

    p = sub.add_parser("export", help="convert a tnmt checkpoint for another inference engine")
    p.add_argument("format", choices=["ctranslate2"])
    p.add_argument("checkpoint", type=_path, help="checkpoint directory (or a best/last link)")
    p.add_argument("--out", required=True, type=_path, help="directory to write (an earlier export there is replaced)")
    p.add_argument(
        "--quantization",
        choices=["int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16", "bfloat16", "float32"],
        default=None,
        help="weight type of the exported model (default: float32)",
    )
    p.set_defaults(run=_export)


def _decode_options(p: argparse.ArgumentParser) -> None:
    """--checkpoint, how to load it, and one flag per `DecodeConfig` field (unset: the checkpoint's value)."""
    p.add_argument("--checkpoint", required=True, type=_path, help="checkpoint directory (or a best/last link)")
    _device_option(p)
    p.add_argument(
        "--threads",
        type=int,
        default=0,
        help="CPU threads that decode; 0 = the engine's default: OMP_NUM_THREADS if set, else PyTorch's one per"
        " physical core or CTranslate2's min(4, CPUs) (0)",
    )
    p.add_argument(
        "--quantize",
        choices=["none", "int8"],
        default="none",
        help="int8: dynamic int8 Linear layers on the CPU, applied when loading (none)",
    )
    pair = p.add_argument_group("language pair: required by a multilingual checkpoint (tnmt/directions.py)")
    pair.add_argument("--source", metavar="CODE", help="the text's language, e.g. fr")
    pair.add_argument("--target", metavar="CODE", help="the language to write, e.g. cs")
    pair.add_argument("--zero-shot", action="store_true", help="allow a pair of its languages it was not trained on")
    group = p.add_argument_group("decoding (default: the checkpoint's [decode] settings, else the value shown)")
    _config_flags(group, DecodeConfig, unset=argparse.SUPPRESS)


def _path_text(text: str) -> str:
    """A path argument. "" is refused: it is what an unset shell variable gives, and it would quietly mean the
    working directory (--out), stdin (-i) or a download (--from)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path")
    return text


def _path(text: str) -> Path:
    return Path(_path_text(text))


def _device_option(p: argparse.ArgumentParser) -> None:
    """--device, where a command that loads a checkpoint runs it (translate, evaluate, attention, serve)."""
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="cpu", help="auto: CUDA when there is a GPU")


def _config_flags(group: argparse._ArgumentGroup, cls: type, *, unset: Any = None) -> None:
    """One `--field-name` flag per field of the config dataclass `cls`, its help from the field's metadata.

    `unset=argparse.SUPPRESS` leaves a flag that was not given out of the namespace; by default a flag
    that was not given holds the field's default.
    """
    for f in fields(cls):
        if f.type is bool:
            options: dict[str, Any] = {"action": argparse.BooleanOptionalAction}
        elif get_origin(f.type) is Literal:
            options = {"choices": get_args(f.type)}
        else:
            options = {"type": f.type, "metavar": f.name.upper()}
        default = f.default if unset is None else unset
        group.add_argument(
            f"--{f.name.replace('_', '-')}", default=default, help=f"{f.metadata['help']} ({f.default})", **options
        )


def _config(args: argparse.Namespace, cls: type[C]) -> C:
    """The config dataclass `cls` made of its flags in `args`; a bad value is a one-line error."""
    try:
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls)})
    except ValueError as e:
        raise UserError(str(e)) from None


def _decode_settings(args: argparse.Namespace, stored: DecodeConfig) -> DecodeConfig:
    """`stored` (a checkpoint's or an export's settings) with the decoding flags given; a bad value is one line.

    The one override of both engines; called once with `DecodeConfig()` before loading, so a bad flag fails fast.
    """
    try:
        return replace(stored, **{f.name: getattr(args, f.name) for f in fields(DecodeConfig) if hasattr(args, f.name)})
    except ValueError as e:
        raise UserError(str(e)) from None


def _translator(args: argparse.Namespace) -> tuple[Any, DecodeConfig]:
    """The engine `args` ask for, loaded, decoding on `--threads` threads, and the settings to decode with."""
    _decode_settings(args, DecodeConfig())
    if not 0 <= args.threads <= MAX_THREADS:
        raise UserError(f"--threads must be from 0 to {MAX_THREADS} (0: the engine's default), got {args.threads}")
    chosen = args.source is not None or args.target is not None
    if chosen and (args.source is None or args.target is None):
        raise UserError("name the language pair with both --source and --target")
    if args.zero_shot and not chosen:
        raise UserError("--zero-shot needs the pair: --source and --target")
    if getattr(args, "engine", "tnmt") == "ctranslate2":
        from tnmt.interop.ctranslate2 import CTranslate2Translator

        if chosen:
            raise UserError("--source and --target choose a direction of a tnmt checkpoint; an export has one pair")
        if args.device != "cpu":
            raise UserError("--device is for --engine tnmt; the CTranslate2 engine runs on the CPU")
        if args.quantize != "none":
            raise UserError("--quantize is for --engine tnmt; for CTranslate2 export with --quantization int8")
        translator = CTranslate2Translator(args.checkpoint, threads=args.threads)
    else:
        import torch

        from tnmt.device import resolve_device
        from tnmt.translate.translator import Translator

        device = resolve_device(args.device)
        if args.threads:  # this thread decodes (serve's batcher sets them in its worker thread instead)
            torch.set_num_threads(args.threads)
        translator = Translator.from_checkpoint(args.checkpoint, device=str(device), quantize=args.quantize)
        if chosen:
            translator = translator.for_pair(args.source, args.target, zero_shot=args.zero_shot)
    return translator, _decode_settings(args, translator.decode)


def _serve(args: argparse.Namespace, _: list[str]) -> int:
    config = _config(args, ServeConfig)
    listening = _listen(config.host, config.port)  # before loading: an address that cannot be used says so now
    import torch
    import uvicorn

    from tnmt.device import resolve_device
    from tnmt.serve.allocator import fix_mmap_threshold
    from tnmt.serve.app import create_app
    from tnmt.serve.models import load_models

    device = resolve_device(args.device)  # no GPU: the one-line error translate gives, before any loading
    if config.mmap_threshold_mb:  # before the model's tensors are allocated
        fix_mmap_threshold(config.mmap_threshold_mb * 2**20)
    threads = config.threads or torch.get_num_threads()  # explicit, and said below
    config = replace(config, threads=threads)
    torch.set_num_threads(1)  # this thread only loads: the batchers' threads decode (see Batcher._run)
    # A text worker reading a long text holds the GIL for up to the switch interval each time the batcher's
    # thread wants it back after a torch operation: at the default 5 ms, a sentence's decoding (hundreds of
    # operations) waited seconds beside a large document. Handing the GIL over every 0.5 ms bounds that wait.
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    models = load_models(args.checkpoint, config, device=str(device), zero_shot=config.zero_shot, run=args.run_dir)
    app = create_app(models, config)
    pairs = ", ".join(model.id for model in models)
    port = listening.getsockname()[1]  # the one chosen when --port is 0
    logging.getLogger("tnmt").info(f"serving {pairs} on http://{config.host}:{port} ({threads} torch threads)")
    # One process, no workers and no reload: nothing forks after the model is loaded. On SIGTERM uvicorn
    # stops accepting, finishes the requests in flight, and the batchers finish what they accepted. It then
    # re-raises the signal to the handler that was there before it started: ours, so the exit status is 0.
    signal.signal(signal.SIGTERM, lambda *_: None)
    # What loading left (modules, the model's objects) is never garbage: frozen, the collector's full passes,
    # which hold the GIL and so every thread, no longer walk it beside each request's text work
    gc.freeze()
    uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=60)).run(sockets=[listening])
    logging.getLogger("tnmt").info("stopped")
    return 0


def _listen(host: str, port: int) -> socket.socket:
    """The server's socket, bound: an unknown host, a port in use or one that needs root is an OSError naming
    the address (one line, exit 1), before the models load rather than in uvicorn's log after.

    It says it is TCP (`proto`), and has TCP_NODELAY, which its connections inherit: asyncio turns Nagle's
    algorithm off on a connection only when its socket's `proto` is TCP, and `socket.create_server` leaves it 0.
    With Nagle on, uvicorn's answer (headers, then the body: two writes) waited for the client's delayed ACK:
    40 ms more on every request of a keep-alive client (44 ms for GET /v1/models, under 1 ms without it).
    """
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]  # IPv4 or IPv6 (`--host ::1`)
        bound = socket.create_server((host, port), family=family)
        listening = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, fileno=bound.detach())
        listening.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return listening
    except OSError as e:
        raise OSError(e.errno, e.strerror, f"{host}:{port}") from None
    except UnicodeError as e:  # not even a name: a label over 63 characters, say
        raise UserError(f"--host {host[:80]!r}: not a host name ({e})") from None


def _train(args: argparse.Namespace, overrides: list[str]) -> int:
    from tnmt.recipe import load_recipe
    from tnmt.train.distributed import PeerLost, env_world
    from tnmt.train.loop import train
    from tnmt.train.stop import Stopped, stop_on_signals

    with stop_on_signals() as stop:
        try:
            out = train(
                load_recipe(args.config, overrides), resume=args.resume, progress=not args.no_progress, stop=stop
            )
        except Stopped as stopped:
            if env_world().is_main:  # every rank stops at the same update; rank 0 saved and says where
                print(f"tnmt train: {stopped}", file=sys.stderr)
            return stopped.exit_status
        except PeerLost as e:  # under torchrun: another rank died or hung; say so in one line, not a backtrace
            print(f"tnmt train: error: {e}", file=sys.stderr)
            return 1
    if env_world().is_main:
        print(f"checkpoints in {out}: best -> {(out / 'best').resolve().name}, last -> {(out / 'last').resolve().name}")
    return 0


def _prepare(args: argparse.Namespace, overrides: list[str]) -> int:
    from tnmt.recipe import load_recipe
    from tnmt.train.start import prepare_training_corpus

    recipe = load_recipe(args.config, overrides)
    checkpoint = None
    if recipe.train.init_from:  # fine-tuning encodes with the checkpoint's tokenizer, as `tnmt train` will
        from tnmt.checkpoint import load_checkpoint

        checkpoint = load_checkpoint(recipe.train.init_from)
    data = prepare_training_corpus(recipe, checkpoint)
    print(f"{len(data)} training pairs prepared in {data.directory}")
    return 0


def _translate(args: argparse.Namespace, _: list[str]) -> int:
    from tnmt.data.corpus import iter_lines, iter_stream
    from tnmt.translate.stream import AnnotatedLines, translate_stream

    annotate = {"alignment": args.alignment, "scores": args.scores, "warnings": args.warnings}
    if any(annotate.values()) and args.engine != "tnmt":
        raise UserError("--alignment, --scores and --warnings are for --engine tnmt (they read its attention)")
    steering = _steering(args)
    if steering is not None and args.engine != "tnmt":
        raise UserError("--glossary and --do-not-translate are for --engine tnmt (its search meets them)")
    if args.file is not None:
        return _translate_file(args, steering)
    if args.format is not None or args.report is not None:
        raise UserError("--format and --report are for --file (a document)")
    translator, settings = _translator(args)
    if any(annotate.values()) or steering is not None:
        translator = AnnotatedLines(translator, steering=steering, **annotate)
    _check_output(args.output)
    lines = iter_lines(args.input) if args.input else iter_stream(sys.stdin.buffer, name="<stdin>")
    with _output(args.output) as out, _progress_bar() as bar:
        for chunk in translate_stream(translator, lines, settings):
            out.write("".join(line + "\n" for line in chunk).encode("utf-8"))
            out.flush()
            bar.update(len(chunk))
    return 0


def _translate_file(args: argparse.Namespace, steering: Any) -> int:
    """`tnmt translate --file`: one document in its own format (tnmt/documents), written whole or not at all, and
    with `--report` its report per segment (documents/report.py) as JSON."""
    import json

    from tnmt.documents.formats import file_format, read_file
    from tnmt.documents.report import segment_report

    if args.input is not None or args.engine != "tnmt" or args.alignment or args.scores or args.warnings:
        raise UserError("--file translates one document with --engine tnmt: not with -i or the evidence columns")
    file_format(args.file, args.format)  # before the model loads
    _check_output(args.output)
    _check_output(args.report)
    with reading_file(args.file):
        data = Path(args.file).read_bytes()
    pending = read_file(data, args.file, fmt=args.format)
    translator, settings = _translator(args)
    with _progress_bar(total=len(pending.units), unit=" segments") as bar:
        found = pending.translations(translator, settings, steering=steering, progress=lambda n: bar.update(n - bar.n))
    translated = pending.write(found)
    with _output(args.output) as out:
        out.write(translated)
    if args.report:
        report = json.dumps(segment_report(pending.units, found, pending.left), ensure_ascii=False, indent=1)
        with _output(args.report) as out:
            out.write((report + "\n").encode("utf-8"))
    return 0


def _steering(args: argparse.Namespace) -> Any:
    """The `Steering` of `--glossary` and `--do-not-translate`, read (and checked) before the model loads."""
    if not (args.glossary or args.do_not_translate):
        return None
    from tnmt.translate.glossary import load_glossary
    from tnmt.translate.kept import load_terms
    from tnmt.translate.steering import Steering

    glossary = tuple(load_glossary(args.glossary)) if args.glossary else ()
    keep = tuple(load_terms(args.do_not_translate)) if args.do_not_translate else ()
    return Steering(glossary=glossary, do_not_translate=keep)


def _evaluate(args: argparse.Namespace, _: list[str]) -> int:
    from tnmt.data.corpus import iter_lines, read_lines
    from tnmt.evaluate import score
    from tnmt.translate.stream import translate_stream

    if args.all_directions:
        return _evaluate_directions(args)
    if args.split is not None or args.table is not None:
        raise UserError("--split and --table are for --all-directions (every direction on Multi30k)")
    for flag in ("src", "ref"):
        if getattr(args, flag) is None:
            raise UserError(f"evaluate needs --{flag} (or --all-directions for every direction on Multi30k)")
    _check_output(args.hyp_out)
    references = read_lines(args.ref)
    if (n_sources := sum(1 for _ in iter_lines(args.src))) != len(references):  # checked before decoding
        raise UserError(f"{args.src} has {n_sources} lines but {args.ref} has {len(references)}")
    hypotheses: list[str] = []
    translator, settings = _translator(args)
    with _progress_bar(total=n_sources) as bar:
        for chunk in translate_stream(translator, iter_lines(args.src), settings):
            hypotheses += chunk
            bar.update(len(chunk))
    if args.hyp_out:
        with _output(args.hyp_out) as out:
            out.write("".join(h + "\n" for h in hypotheses).encode("utf-8"))
    print(score(hypotheses, references).format())
    return 0


def _evaluate_directions(args: argparse.Namespace) -> int:
    """`evaluate --all-directions`: every direction the checkpoint was trained on, scored on a Multi30k split."""
    import json

    from tnmt.evaluate import evaluate_directions, format_table

    if args.src or args.ref or args.hyp_out or args.source or args.target:
        raise UserError("--all-directions scores every direction on Multi30k: give no --src, --ref, --hyp-out or pair")
    _check_output(args.table)
    translator, settings = _translator(args)
    split = args.split or "test_2016_flickr"
    rows = evaluate_directions(translator, settings, split=split)
    print(format_table(rows))
    if args.table:
        with _output(args.table) as out:
            out.write((json.dumps({"split": split, "directions": rows}, indent=2) + "\n").encode("utf-8"))
    return 0


def _check_output(path: str | None) -> None:
    """Refuse an output file that cannot be written before spending time on the translation."""
    if path is None or _is_stream(path):
        return
    parent = Path(path).parent
    if Path(path).is_dir():
        raise UserError(f"{path}: is a directory, expected a file name")
    if not parent.is_dir():
        raise UserError(f"{path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise UserError(f"{path}: directory {parent} is not writable")


def _is_stream(path: str) -> bool:
    """A device or pipe such as /dev/stdout: written in place (renaming a file over it would replace it)."""
    path = Path(path)
    return path.is_char_device() or path.is_fifo()


@contextmanager
def _output(path: str | None) -> Iterator[BinaryIO]:
    """Where translations go, as a binary stream: stdout by default; a regular file appears atomically, with
    every line or not at all (see `tnmt.io.atomic_open`); a device or pipe is written in place."""
    from tnmt.io import atomic_open

    if path is None:
        yield sys.stdout.buffer
    elif _is_stream(path):
        with open(path, "wb") as f:
            yield f
    else:
        with atomic_open(path) as f:
            yield f


def _progress_bar(total: int | None = None, unit: str = " sentences") -> Any:
    """Sentences (segments) translated and their rate on stderr, only when stderr is a terminal (never in a pipe or
    a log)."""
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, file=sys.stderr, disable=not sys.stderr.isatty(), dynamic_ncols=True)


def _average(args: argparse.Namespace, _: list[str]) -> int:
    from tnmt.checkpoint import average_checkpoints

    out = average_checkpoints(args.checkpoints, args.out)
    print(f"averaged {len(args.checkpoints)} checkpoints into {out}")
    return 0


def _shortlist(args: argparse.Namespace, _: list[str]) -> int:
    from tnmt.checkpoint import load_checkpoint
    from tnmt.data.prepared import PreparedPairs
    from tnmt.data.shortlist import Shortlist

    checkpoint = load_checkpoint(args.checkpoint, training=False)
    if not (args.prepared / "manifest.json").is_file():
        raise UserError(f"{args.prepared}: not a prepared corpus (no manifest.json)")
    prepared = PreparedPairs(args.prepared)
    if prepared.tokenizer().fingerprint() != checkpoint.tokenizer.fingerprint():
        raise UserError(f"{args.prepared}: encoded with another tokenizer than {args.checkpoint}'s")
    config = checkpoint.model.config
    shortlist = Shortlist.learn_from(
        prepared, source_vocab_size=config.src_vocab_size, target_vocab_size=config.tgt_vocab_size
    )
    shortlist.save(checkpoint.path.resolve())
    print(f"learned a shortlist from {len(prepared)} pairs into {checkpoint.path / 'shortlist.safetensors'}")
    return 0


def _import(args: argparse.Namespace, _: list[str]) -> int:
    from tnmt.interop.marian import import_marian

    out = import_marian(args.directory, args.out, source=args.source, target=args.target)
    print(f"imported {args.directory} into {out}, served as {_model_name(out)['model']}")
    return 0


def _export(args: argparse.Namespace, _: list[str]) -> int:
    from tnmt.interop.ctranslate2 import export_ctranslate2

    out = export_ctranslate2(args.checkpoint, args.out, quantization=args.quantization)
    print(f"exported {args.checkpoint} to {out} (CTranslate2)")
    return 0


def _data(args: argparse.Namespace, _: list[str]) -> int:
    if args.dataset == "wmt14":
        return _data_wmt14(args)
    from tnmt.data.multi30k import LANGS, TOKENISED_LANGS, fetch_multi30k

    source, langs = args.source or os.environ.get("TNMT_DATA_DIR"), args.langs or list(LANGS)
    fetch_multi30k(args.out, source=source, langs=langs, tok=False)
    if tokenised := [lang for lang in langs if lang in TOKENISED_LANGS]:  # references exist for these only
        fetch_multi30k(args.out, source=source, langs=tokenised)
    print(f"Multi30k ({', '.join(langs)}) in {args.out}; train on it with TNMT_DATA_DIR={args.out}")
    return 0


def _data_wmt14(args: argparse.Namespace) -> int:
    from tnmt.data.wmt14 import fetch_wmt14

    if args.langs:
        raise UserError("--langs is for multi30k; wmt14 is English-German")
    out = fetch_wmt14(args.out, source=args.source)
    print(f"WMT14 en-de in {out}: train.{{en,de}}.gz, newstest2013.{{en,de}} (dev), newstest2014.{{en,de}} (test)")
    return 0


def _quickstart(args: argparse.Namespace, _: list[str]) -> int:
    from tnmt.quickstart import quickstart

    if not 0 < args.minutes < math.inf:  # NaN too
        raise UserError(f"--minutes must be a positive number, got {args.minutes}")
    if args.steps < 0:
        raise UserError(f"--steps must be >= 0 (0: the task's own budget), got {args.steps}")
    quickstart(args.out, minutes=args.minutes, offline=args.offline, max_steps=args.steps)
    return 0


def _attention(args: argparse.Namespace, _: list[str]) -> int:
    from tnmt.views.heatmaps import plot_attention

    if not args.sentence.strip():
        raise UserError("the sentence is empty: no attention to draw")
    translator, settings = _translator(args)
    src_pieces, tgt_pieces, maps = translator.attention(args.sentence, settings)
    paths = plot_attention(maps, src_pieces, tgt_pieces, args.out)
    print(f"{' '.join(tgt_pieces)}\nwrote {len(paths)} pictures to {args.out}")
    return 0


def _explain(args: argparse.Namespace, _: list[str]) -> int:
    import json

    from tnmt.views.trace import explanation, format_trace

    if args.top_k < 1:
        raise UserError(f"--top-k must be >= 1, got {args.top_k}")
    if not args.sentence.strip():
        raise UserError("the sentence is empty: nothing to explain")
    translator, settings = _translator(args)
    trace = translator.trace(args.sentence, settings, top_k=args.top_k)
    if not args.json:
        print(format_trace(trace, translator.tokenizer))
        return 0
    answer = explanation(trace, translator.tokenizer, settings, args.top_k)
    print(json.dumps({**_model_name(args.checkpoint), **answer}, ensure_ascii=False))
    return 0


def _inspect(args: argparse.Namespace, _: list[str]) -> int:
    import json

    from tnmt.views.inside import inside
    from tnmt.views.inside_view import format_inside, inside_dict

    if not args.sentence.strip():
        raise UserError("the sentence is empty: nothing to look inside")
    translator, settings = _translator(args)
    found = inside(translator, args.sentence, settings, translation=args.translation, top_k=args.top_k)
    piece = translator.tokenizer.target_pieces
    if not args.json:
        print(format_inside(found, lambda i: piece([i])[0]))
        return 0
    answer = inside_dict(found, lambda i: piece([i])[0], config=translator.model.config, top_k=args.top_k)
    print(json.dumps({**_model_name(args.checkpoint), **answer}, ensure_ascii=False))
    return 0


def _replay(args: argparse.Namespace, _: list[str]) -> int:
    import json

    import torch

    from tnmt.views.replay import format_replay, replay, replay_dict

    if not 0 <= args.threads <= MAX_THREADS:
        raise UserError(f"--threads must be from 0 to {MAX_THREADS} (0: PyTorch's default), got {args.threads}")
    if args.threads:
        torch.set_num_threads(args.threads)
    with _progress_bar(unit=" models") as bar:
        found = replay(
            args.run_dir,
            args.sentence,
            reference=args.reference,
            source=args.source,
            target=args.target,
            progress=lambda done, total: (setattr(bar, "total", total), bar.update(done - bar.n)),
        )
    print(json.dumps(replay_dict(found), ensure_ascii=False) if args.json else format_replay(found))
    return 0


def _model_name(checkpoint: Path) -> dict[str, str]:
    """{"model": "en-de"} as the server names a one-pair checkpoint, or {} when it does not name one pair."""
    from tnmt.checkpoint import CONFIG_FILE, read_model_json

    directions = read_model_json(checkpoint / CONFIG_FILE)[2]
    return {"model": "-".join(directions[0])} if len(directions) == 1 else {}


if __name__ == "__main__":
    sys.exit(main())
