"""The pure parts of benchmarks/speed_change.py (issue 32's before/after speed): medians, ratios,
the verdict, the order of the sides and the sentence cut. No subprocess."""

import importlib.util
import sys

import pytest

from tests.corpora import REPO

_spec = importlib.util.spec_from_file_location("speed_change", REPO / "benchmarks" / "speed_change.py")
speed_change = importlib.util.module_from_spec(_spec)
_path = list(sys.path)
_spec.loader.exec_module(speed_change)     # puts benchmarks/ first on sys.path for its own imports
sys.path[:] = _path


def test_per_iteration_is_the_median_without_the_first_iteration():
    history = [{"seconds": 9.0}, {"seconds": 1.0}, {"seconds": 3.0}, {"seconds": 2.0}]
    assert speed_change.per_iteration(history) == 2.0
    assert speed_change.per_iteration([{"seconds": 4.0}]) == 4.0          # only one: it counts
    assert speed_change.per_iteration([]) is None


def test_ratio_is_head_over_base_and_none_without_both():
    assert speed_change.ratio(2.0, 3.0) == pytest.approx(1.5)
    assert speed_change.ratio(None, 3.0) is None
    assert speed_change.ratio(2.0, None) is None
    assert speed_change.ratio(0.0, 1.0) is None


def test_summarise_takes_each_sides_median_and_compares_the_hashes():
    runs = [{"side": "base", "s": 1.0, "sha256": "a"}, {"side": "head", "s": 1.2, "sha256": "a"},
            {"side": "head", "s": 1.0, "sha256": "a"}, {"side": "base", "s": 3.0, "sha256": "a"},
            {"side": "base", "s": 2.0, "sha256": "a"}, {"side": "head", "s": 1.1, "sha256": "a"}]
    figures, hashes, identical = speed_change.summarise(runs, ["s"])
    assert figures["s"] == {"base": 2.0, "head": 1.1, "ratio": pytest.approx(0.55)}
    assert hashes == {"base": ["a"], "head": ["a"]} and identical is True
    runs[1]["sha256"] = "b"
    assert speed_change.summarise(runs, ["s"])[2] is False
    assert speed_change.summarise([{"side": "base", "s": 1.0}, {"side": "head", "s": 1.0}], ["s"])[2] is None


def test_verdict_fails_ratios_beyond_the_tolerance_and_differing_outputs():
    rows = [{"name": "chain", "measure": "s_per_iter", "ratio": 1.029, "identical": True},
            {"name": "chain", "measure": "process_s", "ratio": 0.9, "identical": True},
            {"name": "tag", "measure": "process_s", "ratio": None, "identical": None}]
    assert speed_change.verdict(rows, 0.03) == []
    rows[0]["ratio"] = 1.031
    rows[2]["identical"] = False
    failures = speed_change.verdict(rows, 0.03)
    assert len(failures) == 2
    assert failures[0].startswith("chain, s_per_iter") and failures[1].startswith("tag: the outputs differ")
    assert speed_change.verdict(rows[:1], 0.05) == []


def test_the_side_going_first_swaps_each_repeat():
    order = [side for rep in range(3) for side in speed_change.sides_in_order(rep)]
    assert order == ["base", "head", "head", "base", "base", "head"]


def test_first_sentences_cuts_after_n_sentences(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("a x B\nb y I\n\nc z O\n\n\nd w O\ne v B\n\n")
    assert (speed_change.first_sentences(src, 2, tmp_path / "2.txt")).read_text() == "a x B\nb y I\n\nc z O\n\n\n"
    assert (speed_change.first_sentences(src, None, tmp_path / "all.txt")).read_text() == src.read_text()
