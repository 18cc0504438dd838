"""Opening books for matches (kosumi.engine.openings).

Oracles: the rules (an illegal opening is refused, naming it), a hand-written book file, and
properties of generated books (distinct, balanced by the net that made them, reproducible).
"""

from __future__ import annotations

import pytest

from kosumi.engine.openings import (
    balanced_openings,
    check_openings,
    format_openings,
    read_openings,
    write_openings,
)
from kosumi.errors import KosumiError
from kosumi.go.coords import PASS, vertex_to_point
from kosumi.runtime.evaluator import UniformEvaluator


def test_a_book_file_round_trips_and_skips_comments(tmp_path):
    path = tmp_path / "book.txt"
    path.write_text("# two openings\n\nE5 C3 G7\nD4 pass F6\n")
    book = read_openings(path, 9)
    assert book == [(vertex_to_point("E5", 9), vertex_to_point("C3", 9), vertex_to_point("G7", 9)),
                    (vertex_to_point("D4", 9), PASS, vertex_to_point("F6", 9))]
    write_openings(tmp_path / "again.txt", book, 9, "header")
    assert read_openings(tmp_path / "again.txt", 9) == book
    assert format_openings(book, 9) == "E5 C3 G7\nD4 pass F6\n"


@pytest.mark.parametrize("text,needle", [
    ("E5 Z9\n", r"book\.txt:1: 'Z9' is not a vertex"),
    ("# nothing\n", "no openings"),
    ("E5 resign\n", r"book\.txt:1: 'resign' is not a move"),
])
def test_a_bad_book_is_one_line_naming_the_line(tmp_path, text, needle):
    path = tmp_path / "book.txt"
    path.write_text(text)
    with pytest.raises(KosumiError, match=needle):
        read_openings(path, 9)


def test_illegal_openings_are_refused_naming_the_move():
    e5 = vertex_to_point("E5", 9)
    with pytest.raises(KosumiError, match="opening 2, move 2"):
        check_openings([(e5,), (e5, e5)], 9, 7.0)
    with pytest.raises(KosumiError, match="two passes"):
        check_openings([(PASS, PASS)], 9, 7.0)


def test_balanced_openings_are_distinct_balanced_and_reproducible():
    ev = UniformEvaluator()  # value: logistic(area lead / 2); one stone each, komi 0.5: 0.44
    book = balanced_openings(ev, 9, 0.5, 6, 2, seed=3, max_gap=0.1)
    assert len(book) == 6 and len(set(book)) == 6 and all(len(o) == 2 for o in book)
    assert book == balanced_openings(ev, 9, 0.5, 6, 2, seed=3, max_gap=0.1)
    check_openings(book, 9, 0.5)  # legal
    with pytest.raises(KosumiError, match="balanced openings"):  # komi 7: Black far behind
        balanced_openings(ev, 9, 7.0, 3, 2, seed=3, max_gap=0.1, max_tries=2)
