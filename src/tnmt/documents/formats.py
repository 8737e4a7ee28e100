"""A file translated in its own format, the format chosen by the file's extension (or given): each format one
record (`Format`), which the CLI, both APIs and the page read."""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePath

from tnmt.config import DecodeConfig
from tnmt.documents.archive import keep_untouched
from tnmt.documents.epub import read_epub
from tnmt.documents.gettext import read_po, write_po
from tnmt.documents.markdown import read_markdown
from tnmt.documents.opendocument import read_opendocument
from tnmt.documents.pdf import read_pdf
from tnmt.documents.slides import read_pptx, write_pptx
from tnmt.documents.subtitles import read_srt, read_vtt, write_srt, write_vtt
from tnmt.documents.units import Pending, marked, unit, unmarked
from tnmt.documents.word import read_docx, write_docx
from tnmt.documents.xliff import read_xliff, write_xliff
from tnmt.errors import UserError
from tnmt.translate.steering import Steering
from tnmt.translate.translator import Translator


@dataclass(frozen=True)
class Format:
    """A file format tnmt translates: its name (`--format`, `format=`), the extensions that name it, its media
    type, and how a file of it is read (`read(data, name)`: a document waiting for its units' translations,
    which writes the file back in this format)."""

    name: str
    extensions: tuple[str, ...]
    media_type: str
    read: Callable[[bytes, str], Pending]


def _text(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise UserError(f"{name}: not UTF-8 text (byte {error.start})") from None


def _read_txt(data: bytes, name: str) -> Pending:
    return unmarked([unit(_text(data, name))], lambda translated: translated[0].encode())


def _read_html(data: bytes, name: str) -> Pending:  # the page whole: its blocks' sentences, inline tags carried
    return marked([_text(data, name)], lambda translated: translated[0].encode())


def _read_markdown(data: bytes, name: str) -> Pending:
    return read_markdown(_text(data, name), where=name)


def _read_odt(data: bytes, name: str) -> Pending:
    return read_opendocument(data, where=name, fmt="odt")


def _read_odp(data: bytes, name: str) -> Pending:  # a presentation: its slides' and notes pages' frames
    return read_opendocument(data, where=name, fmt="odp")


def _read_epub(data: bytes, name: str) -> Pending:  # its XHTML pages, navigation and titles; the rest kept
    return read_epub(data, where=name)


def _read_pdf(data: bytes, name: str) -> Pending:  # each text block replaced in place (the `pdf` extra)
    return read_pdf(data, where=name)


def _read_vtt(data: bytes, name: str) -> Pending:
    captions, fragments = read_vtt(_text(data, name), where=name)
    return marked(fragments, lambda translated: write_vtt(captions, translated).encode())


def _read_srt(data: bytes, name: str) -> Pending:
    cues, units = read_srt(_text(data, name), where=name)
    return unmarked(units, lambda translated: write_srt(cues, translated).encode())


def _read_po(data: bytes, name: str) -> Pending:
    catalogue, places, units = read_po(_text(data, name), where=name)
    return unmarked(units, lambda translated: write_po(catalogue, places, translated).encode())


def _read_xliff(data: bytes, name: str) -> Pending:
    tree, units, fragments, codes = read_xliff(data, where=name)
    return marked(fragments, lambda translated: write_xliff(tree, units, translated, codes))


def _read_docx(data: bytes, name: str) -> Pending:  # paragraphs of formatted runs, links, fields, marks
    document, fragments = read_docx(data, where=name)
    return marked(fragments, lambda found: keep_untouched(data, write_docx(document, found)), left=document.left)


def _read_pptx(data: bytes, name: str) -> Pending:
    presentation, paragraphs, fragments = read_pptx(data, where=name)
    return marked(fragments, lambda found: keep_untouched(data, write_pptx(presentation, paragraphs, found)))


_OFFICE = "application/vnd.openxmlformats-officedocument"
FORMATS = (
    Format("txt", (".txt",), "text/plain; charset=utf-8", _read_txt),
    Format("html", (".html", ".htm"), "text/html; charset=utf-8", _read_html),
    Format("markdown", (".md", ".markdown"), "text/markdown; charset=utf-8", _read_markdown),
    Format("srt", (".srt",), "application/x-subrip; charset=utf-8", _read_srt),
    Format("vtt", (".vtt",), "text/vtt; charset=utf-8", _read_vtt),
    Format("po", (".po",), "text/x-gettext-translation; charset=utf-8", _read_po),
    Format("docx", (".docx",), f"{_OFFICE}.wordprocessingml.document", _read_docx),
    Format("odt", (".odt",), "application/vnd.oasis.opendocument.text", _read_odt),
    Format("odp", (".odp",), "application/vnd.oasis.opendocument.presentation", _read_odp),
    Format("pptx", (".pptx",), f"{_OFFICE}.presentationml.presentation", _read_pptx),
    Format("epub", (".epub",), "application/epub+zip", _read_epub),
    Format("pdf", (".pdf",), "application/pdf", _read_pdf),
    Format("xliff", (".xlf", ".xliff"), "application/xliff+xml", _read_xliff),
)
BY_NAME = {f.name: f for f in FORMATS}
BY_EXTENSION = {extension: f for f in FORMATS for extension in f.extensions}
EXTENSIONS = sorted(BY_EXTENSION)  # what the APIs and the page list


def file_format(name: str, given: str | None = None) -> Format:
    """The format of a file named `name`: the one named `given`, else its extension's.

    Raises:
        UserError: a format tnmt does not translate, naming the ones it does.
    """
    known = ", ".join(sorted(BY_NAME))
    if given is not None:
        if given not in BY_NAME:
            raise UserError(f"format {given!r}: not a format tnmt translates (one of: {known})")
        return BY_NAME[given]
    chosen = BY_EXTENSION.get(PurePath(name).suffix.lower())
    if chosen is None:
        raise UserError(f"{name}: cannot tell its format from its name (formats: {known})")
    return chosen


def read_file(data: bytes, name: str, *, fmt: str | None = None) -> Pending:
    """File `name` (its bytes `data`) read in its format (`file_format`), waiting for its units' translations.

    Raises:
        UserError: an unknown format, a text file that is not UTF-8, or a file its format's library refuses.
    """
    return file_format(name, fmt).read(data, name)


def translate_file(
    translator: Translator,
    data: bytes,
    name: str,
    *,
    fmt: str | None = None,
    settings: DecodeConfig | None = None,
    steering: Steering | None = None,
) -> bytes:
    """The translation of file `name` (its bytes `data`), in its own format, by `translator` in one call.

    Raises:
        UserError: as `read_file`.
    """
    return read_file(data, name, fmt=fmt).translate(translator, settings, steering=steering)
