"""Every pass over a user's text costs in proportion to its length: each is timed on 10^5 and 10^6 characters of
adversarial input (a short unit repeated: the run of letters an e-mail pattern re-reads, the "<!--" never closed,
the URL followed by brackets, the line of initials) and fails when the larger costs over 20 times the smaller
(linear growth is 10x; quadratic, 100x). A server holds its worker, and before this its event loop, for as long
as these take, so a quadratic one lets one in-limits request stall every client."""

import time
from collections.abc import Callable

import pytest

from tnmt.documents.markup import parse
from tnmt.documents.subtitles import reflow_markup
from tnmt.documents.units import unit as document_unit
from tnmt.translate.kept import find_kept, put_back, take_out
from tnmt.translate.segment import split_text

SMALL, LARGE = 10**5, 10**6


def _kept_round_trip(text: str) -> None:
    read, kept, words = take_out(text, find_kept(text, ("Acme",), readable=lambda ch: ch != "¤"))
    put_back(read, read, kept, None, words)


def _html(text: str) -> None:
    document = parse(text)
    document.render([(t, []) for t in document.texts])


PASSES: dict[str, tuple[Callable[[str], object], tuple[str, ...]]] = {
    "kept spans, taken out and put back": (
        _kept_round_trip,
        (
            "a",
            "a.",
            "a@",
            "a@b.",
            "x@a.",
            "<!--",
            "<a ",
            "&#1",
            "&a",
            "http://a)",
            "www.",
            "🐶 ",
            "1\ufe0f",
            "¤ a ",
            "Acme ",
            "a ",
        ),
    ),
    "lines, sentences and parts": (
        lambda text: split_text(text, "en", fits=lambda segment: len(segment) < 200),
        ("a", "A dog runs.\n", "A dog runs. ", "A. ", "- a\n", "a, ", " ", "\n", "1. "),
    ),
    "a document unit's placeholders": (document_unit, ("%0", "%(", "{{a", "${", "%")),
    "a subtitle's tags": (lambda text: reflow_markup(text, 2), ("<", "<i>a</i> ", "a ", ">")),
    "an HTML fragment": (_html, ("<b>a</b> ", "<b>", "</b>", "a ", "<!--", "&amp;", "<", "<p>a ", "<a href=x>y</a>. ")),
}


def _seconds(work: Callable[[str], object], text: str) -> float:
    start = time.perf_counter()
    work(text)
    return time.perf_counter() - start


@pytest.mark.parametrize("name", list(PASSES))
def test_each_pass_over_user_text_grows_linearly(name):
    work, units = PASSES[name]
    for unit in units:
        small = min(_seconds(work, unit * (SMALL // len(unit))) for _ in range(2))
        large = _seconds(work, unit * (LARGE // len(unit)))
        assert large < 20 * small + 0.05, f"{name} on {unit!r} repeated: {small:.4f} s -> {large:.4f} s for 10x"
