"""A file translated in its own format, the format chosen by the file's extension (or given)."""

from pathlib import PurePath

from tnmt.config import DecodeConfig
from tnmt.documents.gettext import read_po, write_po
from tnmt.documents.markdown import read_markdown
from tnmt.documents.opendocument import read_odt
from tnmt.documents.slides import read_pptx, write_pptx
from tnmt.documents.subtitles import read_srt, read_vtt, write_srt, write_vtt
from tnmt.documents.units import Pending, marked, plain, unit
from tnmt.documents.word import read_docx, write_docx
from tnmt.documents.xliff import read_xliff, write_xliff
from tnmt.errors import UserError
from tnmt.translate.steering import Steering
from tnmt.translate.translator import Translator

FORMATS = {
    ".txt": "txt",
    ".html": "html",
    ".htm": "html",
    ".md": "markdown",
    ".markdown": "markdown",
    ".srt": "srt",
    ".vtt": "vtt",
    ".po": "po",
    ".docx": "docx",
    ".odt": "odt",
    ".pptx": "pptx",
    ".xlf": "xliff",
    ".xliff": "xliff",
}


def file_format(name: str, given: str | None = None) -> str:
    """The format of a file named `name`: `given`, else its extension's.

    Raises:
        UserError: a format tnmt does not translate, naming the ones it does.
    """
    known = ", ".join(sorted(set(FORMATS.values())))
    if given is not None:
        if given not in FORMATS.values():
            raise UserError(f"format {given!r}: not a format tnmt translates (one of: {known})")
        return given
    chosen = FORMATS.get(PurePath(name).suffix.lower())
    if chosen is None:
        raise UserError(f"{name}: cannot tell its format from its name (formats: {known})")
    return chosen


def read_file(data: bytes, name: str, *, fmt: str | None = None) -> Pending:
    """File `name` (its bytes `data`) read in its format (`file_format`), waiting for its units' translations.

    Raises:
        UserError: an unknown format, a text file that is not UTF-8, or a file its format's library refuses.
    """
    chosen = file_format(name, fmt)
    if chosen == "xliff":
        tree, units, fragments, codes = read_xliff(data, where=name)
        return marked(fragments, lambda translated: write_xliff(tree, units, translated, codes))
    if chosen == "odt":
        return read_odt(data, where=name)
    if chosen in ("docx", "pptx"):  # paragraphs of formatted runs
        read, write = (read_docx, write_docx) if chosen == "docx" else (read_pptx, write_pptx)
        document, paragraphs, fragments = read(data, where=name)
        return marked(fragments, lambda translated: write(document, paragraphs, translated))
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise UserError(f"{name}: not UTF-8 text (byte {error.start})") from None
    if chosen == "txt":
        return plain([unit(text)], lambda translated: translated[0].encode())
    if chosen == "html":  # the page whole: its blocks' sentences, inline tags carried (serve/libretranslate/markup.py)
        return marked([text], lambda translated: translated[0].encode())
    if chosen == "markdown":
        return read_markdown(text, where=name)
    if chosen == "vtt":
        captions, fragments = read_vtt(text, where=name)
        return marked(fragments, lambda translated: write_vtt(captions, translated).encode())
    if chosen == "srt":
        cues, units = read_srt(text, where=name)
        return plain(units, lambda translated: write_srt(cues, translated).encode())
    catalogue, places, units = read_po(text, where=name)
    return plain(units, lambda translated: write_po(catalogue, places, translated).encode())


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
