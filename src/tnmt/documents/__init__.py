"""Documents translated in their own format (issue 66; in progress on this branch).

A format reads a file into `Unit`s (units.py: each a piece of text to translate, with what must be kept as written)
and writes them back translated; `translate_units` translates all the units of a document as one batch of
sentences (translate/segment.py splits them), so a 300-segment document costs what 300 sentences cost.

Formats so far: plain text, subtitles (`subtitles.py`: SubRip with `srt`, WebVTT with `webvtt-py`; timings,
numbering and settings kept, each cue's lines re-flowed into as many lines, WebVTT's tags carried), gettext catalogues (`gettext.py`, `polib`:
msgid -> msgstr, plural forms, placeholders kept, the fuzzy flag set), Word (`word.py`, `python-docx`: each
paragraph whole, its formatted runs carried to the aligned words by tag transfer: `runs.py`,
`units.translate_markup`) and PowerPoint (`slides.py`, `python-pptx`, the same way); `files.py` picks the format
by the file's extension (`tnmt translate --file`).

Still to come (issue 66): html/md/odt/xliff, LibreTranslate's `/translate_file` and `/v1/translate_file`, the
page's Files tab, the safety limits (zip bombs, entity expansion with defusedxml, path traversal, size), the
per-segment report and the benchmarks.
"""
