"""`samespace status` as a person reads it (samespace/status_table.py): the table from a recorded status,
the admin API's three answers as its routes dump them (tests/support/fakes/admin_status.json, made from the models
`GET /admin/health`, `/providers` and `/budget` dump), and the tables it prints (admin_status.txt)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from samespace.status_table import NOTHING_STOPS, StatusAnswers, status_lines, table

RECORDED = Path(__file__).resolve().parents[2] / "support" / "fakes" / "admin_status.json"
PRINTED = RECORDED.with_suffix(".txt")  # the tables as `samespace status` prints them for it


def recorded() -> dict[str, Any]:
    answers: dict[str, Any] = json.loads(RECORDED.read_text(encoding="utf-8"))
    return answers


def test_the_recorded_status_prints_as_tables_with_what_stops_a_role_last() -> None:
    lines = status_lines(StatusAnswers.of(**recorded()))
    assert lines == PRINTED.read_text(encoding="utf-8").splitlines()


def test_a_problem_is_printed_whole_on_one_line_and_nothing_says_so_when_none() -> None:
    answers = recorded()
    (problem,) = answers["health"]["problems"]
    lines = status_lines(StatusAnswers.of(**answers))
    assert [line for line in lines if problem in line] == [f"  {problem}"]
    answers["health"]["problems"] = []
    assert status_lines(StatusAnswers.of(**answers))[-1] == NOTHING_STOPS


def test_a_role_without_providers_and_a_day_without_spend_still_print() -> None:
    answers = recorded()
    answers["providers"] = {"roles": answers["providers"]["roles"]}
    answers["budget"]["spend"]["roles"] = {}
    lines = status_lines(StatusAnswers.of(**answers))
    assert "no provider answered" in lines and "nothing spent today" in lines


def test_an_answer_of_another_shape_is_refused_by_the_models() -> None:
    answers = recorded()
    del answers["budget"]["spend"]
    with pytest.raises(ValidationError):
        StatusAnswers.of(**answers)


def test_columns_are_as_wide_as_their_widest_cell_and_numbers_align_right() -> None:
    assert table(["NAME", "N"], [["a", "1"], ["long-name", "100"]], right=frozenset({1})) == [
        "NAME         N",
        "a            1",
        "long-name  100",
    ]
