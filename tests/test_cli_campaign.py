"""The CLI campaign in CI (benchmarks/robustness/cli_campaign.py, issue 44): two cases of every option of every
subcommand and of every recipe key, drawn with a fixed seed from the cases the parsers generate. Each must answer with
one line (exit 2, or exit 1 naming the path), or as the campaign's ACCEPTED list says. The whole campaign:
`python -m benchmarks.robustness.cli_campaign` (benchmarks/results/cli_campaign.json)."""

import argparse

import pytest

from benchmarks.robustness import cli_campaign as campaign
from tnmt.cli import build_parser

CASES = campaign.sample(campaign.all_cases(), per_field=2)


@pytest.fixture(scope="module")
def fixtures(tiny_checkpoint, tmp_path_factory):
    return campaign.make_fixtures(tmp_path_factory.mktemp("campaign"), checkpoint=tiny_checkpoint)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_a_generated_case_answers_in_one_line_or_as_accepted(case, fixtures, tmp_path):
    outcome = campaign.run_case(case, fixtures, tmp_path / "case")
    assert campaign.judge(case, outcome) is None, outcome


def test_every_option_of_every_subcommand_is_tried():
    """The cases come from the parsers: a new subcommand or option is in the campaign the day it is added."""
    (subparsers,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    options = {(name, a.dest) for name, p in subparsers.choices.items() for a in p._actions if a.nargs != 0}
    tried = {(case.command, case.field.split(".", 1)[1]) for case in campaign.cli_cases()}
    assert tried == options


def test_every_accepted_behaviour_is_reached_by_a_case():
    """An entry of the allow-list that no case reaches would hide nothing today and something tomorrow."""
    reached = {(case.field, case.kind) for case in campaign.all_cases()}
    assert [entry for entry in campaign.ACCEPTED if entry not in reached] == []


def test_the_judge_catches_what_the_campaign_is_for():
    case = campaign.Case("translate", "decode.beam_size", "negative", "-1", ("translate",))
    Outcome = campaign.Outcome
    assert campaign.judge(case, Outcome(2, "tnmt translate: error: DecodeConfig.beam_size = -1: ...\n")) is None
    assert campaign.judge(case, Outcome("traceback", "Traceback (most recent call last):\nValueError: x\n"))
    assert campaign.judge(case, Outcome(2, "tnmt translate: error: one\nand another line\n"))
    assert campaign.judge(case, Outcome(3, "ERROR: [Errno 98] address in use\n"))
    assert campaign.judge(case, Outcome(0, "")), "taken without a word, and not on the ACCEPTED list"
    assert campaign.judge(case, Outcome(1, "tnmt translate: error: Permission denied\n", value="/x/y"))
    assert campaign.judge(case, Outcome(1, "tnmt translate: error: /x: Permission denied\n", value="/x/y")) is None
