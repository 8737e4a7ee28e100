"""tnmt/directions.py: directions, their checks and how often an epoch trains each."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tnmt.directions import (
    all_directions,
    check_direction,
    direction_name,
    directions_of,
    epoch_counts,
    epoch_indices,
    language_tag,
    parse_direction,
)


def test_a_direction_is_two_different_codes_joined_by_a_dash():
    assert parse_direction("en-de") == ("en", "de")
    assert direction_name(("pt_BR", "en")) == "pt_BR-en"
    for bad in ("en", "en-", "-de", "en-de-fr", "en-en", " -de"):
        with pytest.raises(ValueError, match="is not a direction such as 'en-de'"):
            parse_direction(bad)
    assert language_tag("cs") == "<2cs>"


def test_four_languages_give_twelve_directions_and_a_list_chooses_some():
    found = all_directions(["en", "de", "fr", "cs"])
    assert len(found) == 12 == len(set(found))
    assert all(a != b for a, b in found) and found[:3] == [("en", "de"), ("en", "fr"), ("en", "cs")]
    assert directions_of(["en", "de", "fr"], ["fr-en", "en-de"]) == [("fr", "en"), ("en", "de")]
    assert directions_of(["en", "de"], []) == [("en", "de"), ("de", "en")]


def test_an_untrained_pair_is_refused_in_one_line_unless_zero_shot_is_asked_for():
    trained, languages = [("en", "de"), ("de", "en"), ("en", "cs")], ["en", "de", "cs"]
    check_direction("en", "de", languages=languages, trained=trained)
    with pytest.raises(ValueError, match=r"^de-cs was not trained \(trained: en-de, de-en, en-cs\); ask for zero-shot"):
        check_direction("de", "cs", languages=languages, trained=trained)
    check_direction("de", "cs", languages=languages, trained=trained, zero_shot=True)
    with pytest.raises(ValueError, match=r"^en-it: this model knows en, de, cs, not 'it'$"):
        check_direction("en", "it", languages=languages, trained=trained, zero_shot=True)
    with pytest.raises(ValueError, match="source and target are the same language"):
        check_direction("de", "de", languages=languages, trained=trained, zero_shot=True)


def test_temperature_one_keeps_each_directions_size_and_a_high_one_evens_them_out():
    assert epoch_counts([100, 10], 1.0) == [100, 10]
    assert epoch_counts([100, 10], 1000.0) == [55, 55]  # ~equal shares of the same 110 pairs
    five = epoch_counts([100, 10], 5.0)  # 100^0.2 : 10^0.2 = 2.51 : 1.58
    assert sum(five) == 110 and five == [67, 43]
    assert epoch_counts([7, 7, 7], 3.0) == [7, 7, 7]  # equal directions: every temperature alike


@given(st.lists(st.integers(0, 60), min_size=1, max_size=5), st.floats(0.2, 20.0), st.integers(0, 3))
def test_an_epochs_pairs_follow_the_counts_and_are_a_pure_function_of_the_epoch(sizes, temperature, epoch):
    counts = epoch_counts(sizes, temperature)
    index = epoch_indices(sizes, temperature, seed=0, epoch=epoch)
    assert sum(counts) == sum(sizes) == len(index)
    starts = np.cumsum([0, *sizes])
    for d, (size, count) in enumerate(zip(sizes, counts, strict=True)):
        mine = index[(index >= starts[d]) & (index < starts[d] + size)]
        assert len(mine) == count
        if count >= size:  # every pair, and the rest a sample without repeats beyond one more copy
            assert set(mine.tolist()) == set(range(starts[d], starts[d] + size))
        assert np.bincount(mine - starts[d], minlength=max(size, 1)).max(initial=0) <= -(-count // max(size, 1))
    assert np.array_equal(index, epoch_indices(sizes, temperature, seed=0, epoch=epoch))


def test_temperature_one_trains_every_pair_once_in_order_and_samples_differ_between_epochs():
    assert np.array_equal(epoch_indices([5, 3], 1.0, seed=0, epoch=4), np.arange(8))
    first, second = (epoch_indices([1000, 10], 4.0, seed=0, epoch=e) for e in (0, 1))
    assert not np.array_equal(first, second)
