"""Documents translated in their own format (issue 66; in progress on this branch).

A format reads a file into units of text (units.py: each a piece to translate, with what must be kept as
written) or into inline-markup fragments (a paragraph whose formatted stretches are elements), and writes them
back translated; all the units of a document are translated as one batch of sentences (translate/segment.py
splits them), so a 300-segment document costs what 300 sentences cost.

Formats so far (`files.py` picks one by the file's extension; `tnmt translate --file`):
- plain text, whole (its lines and blank lines kept by the segmentation);
- subtitles (`subtitles.py`): SubRip with `srt`, WebVTT with `webvtt-py`; timings, numbering and settings kept,
  each cue's lines re-flowed into as many lines, WebVTT's tags carried;
- gettext catalogues (`gettext.py`, `polib`): msgid -> msgstr, plural forms, placeholders kept, entries marked
  fuzzy;
- XLIFF 1.2 (`xliff.py`, parsed with `defusedxml`): targets filled, inline codes carried, state
  needs-review-translation;
- Word (`word.py`, `python-docx`) and PowerPoint (`slides.py`, `python-pptx`): each paragraph whole, its
  formatted runs carried to the aligned words by tag transfer (`runs.py`, `units.marked`), the archive
  checked before it is opened (`archive.py`: zip bombs, paths outside it);
- HTML pages (the page whole: blocks' sentences, inline tags carried).

Served by `/v1/translate_file` (serve/files.py) and LibreTranslate's `/translate_file` with `/download_file`
(serve/libretranslate/files.py, serve/file_store.py).

Still to come (issue 66): md, odt; the page's Files tab; the evidence report of `/v1/translate_file`; a size limit
per request and the file section of the bad-input campaign; the per-segment report; the benchmarks.
"""
