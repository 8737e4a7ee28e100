"""Documents translated in their own format.

A format reads a file into units of text (units.py: each a piece to translate, with what must be kept as
written) or into inline-markup fragments (a paragraph whose formatted stretches are elements), and writes them
back translated; the units of a document are translated together, `units.CHUNK` at a time, as batches of sentences
(translate/segment.py splits them), so a 300-segment document costs what 300 sentences cost.

Formats (`files.py` picks one by the file's extension; `tnmt translate --file`):
- plain text, whole (its lines and blank lines kept by the segmentation);
- subtitles (`subtitles.py`): SubRip with `srt`, WebVTT with `webvtt-py`; timings, numbering and settings kept,
  each cue's lines re-flowed into as many lines, WebVTT's tags carried;
- gettext catalogues (`gettext.py`, `polib`): msgid -> msgstr, plural forms, placeholders kept, entries marked
  fuzzy;
- XLIFF 1.2 (`xliff.py`, parsed with `defusedxml`): targets filled, inline codes carried, state
  needs-review-translation;
- Word (`word.py`, `python-docx`), PowerPoint (`slides.py`, `python-pptx`) and OpenDocument text and presentations
  (`opendocument.py`, `odfpy`): each paragraph whole, its formatted runs, links and kept marks (bookmarks, fields,
  breaks) carried to the aligned words by tag transfer (`inline.py`, `units.marked`), the archive checked before it
  is opened (`archive.py`: zip bombs, paths outside it, entity declarations);
- Markdown (`markdown.py`, `markdown-it-py`): paragraphs, headings and table cells translated, emphasis and links
  carried, code, URLs and every other byte kept;
- HTML pages (the page whole: blocks' sentences, inline tags carried);
- EPUB books (`epub.py`): each XHTML page through the HTML path, the navigation and the titles; every other entry
  of the archive and every other byte of the package document kept;
- PDF files (`pdf.py`, PyMuPDF: the optional `pdf` extra, AGPL-3.0): each block of text replaced in place, in its
  size, colour and family, shrunk to fit; links and pictures kept.

Each translated document has a report per segment (`report.py`: confidence, warnings, glossary terms, splits).
Served by `/v1/translate_file` (serve/files.py; the report with `evidence=true`), LibreTranslate's
`/translate_file` with `/download_file` (serve/libretranslate/files.py, serve/file_store.py) and the page's Files
view; on the command line `tnmt translate --file DOC --out OUT [--report R.json]`.
"""
