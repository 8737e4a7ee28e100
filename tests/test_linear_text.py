"""Every pass over a user's text costs in proportion to its length: each is timed on 10^5 and 10^6 characters of
adversarial input (a short unit repeated: the run of letters an e-mail pattern re-reads, the "<!--" never closed,
the URL followed by brackets, the line of initials) and fails when the larger costs over 20 times the smaller
(linear growth is 10x; quadratic, 100x). A server holds its worker, and before this its event loop, for as long
as these take, so a quadratic one lets one in-limits request stall every client."""

import gc
import time
from collections.abc import Callable

import pytest

from tnmt.documents.markup import parse
from tnmt.documents.subtitles import reflow_markup
from tnmt.documents.units import unit as document_unit
from tnmt.translate.kept import find_kept, put_back, take_out
from tnmt.translate.segment import split_text


def _kept_round_trip(text: str) -> None:
    read, kept, words = take_out(text, find_kept(text, ("Acme",), readable=lambda ch: ch != "¤"))
    put_back(read, read, kept, None, words)


def _html(text: str) -> None:
    document = parse(text)
    document.render([(t, []) for t in document.texts])


def _html_parsed(text: str) -> None:
    parse(text)


# each pass, the units that once made it (or could make it) quadratic, and the sizes it is timed at: the tag
# transfer's constant is large (tens of microseconds a word), so it is timed at a tenth of the others' sizes
PASSES: dict[str, tuple[Callable[[str], object], tuple[str, ...], tuple[int, int]]] = {
    "kept spans, taken out and put back": (
        _kept_round_trip,
        ("a", "a@", "a@b.", "<!--", "<a ", "http://a)", "🐶 ", "¤ a ", "Acme "),
        (10**5, 10**6),
    ),
    "lines, sentences and parts": (
        lambda text: split_text(text, "en", fits=lambda segment: len(segment) < 200),
        ("A dog runs.\n", "A dog runs. ", "A. ", "a, ", "\n"),
        (10**5, 10**6),
    ),
    "a document unit's placeholders": (document_unit, ("%0", "%(", "{{a", "${"), (10**5, 10**6)),
    "a subtitle's tags and lines": (lambda text: reflow_markup(text, 3), ("<", "<i>a</i> ", "a "), (10**5, 10**6)),
    "an HTML fragment parsed": (
        _html_parsed,
        ("<!--", "<a ", "<a b='", "<!---", "&#", "<", "<b>a</b> ", "<p>a "),
        (10**5, 10**6),
    ),
    "an HTML fragment's tags carried": (_html, ("<b>a</b> ", "<a href=x>y</a>. ", "a "), (10**4, 10**5)),
}


def _seconds(work: Callable[[str], object], text: str) -> float:
    """The time of `work(text)`, the garbage collector held off: its passes grow with every object alive, which
    is the process's cost, not the algorithm's."""
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        work(text)
        return time.perf_counter() - start
    finally:
        gc.enable()


@pytest.mark.parametrize("name", list(PASSES))
def test_each_pass_over_user_text_grows_linearly(name):
    work, units, (small_size, large_size) = PASSES[name]
    for unit in units:
        small = min(_seconds(work, unit * (small_size // len(unit))) for _ in range(2))
        large = _seconds(work, unit * (large_size // len(unit)))
        assert large < 20 * small + 0.05, f"{name} on {unit!r} repeated: {small:.4f} s -> {large:.4f} s for 10x"
