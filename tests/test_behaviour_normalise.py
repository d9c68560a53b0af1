"""The log normalisation of benchmarks/behaviour.py (issue 32's no-change hashes): two runs of the
same training differ only in what it removes, and what it removes is only that."""

import importlib.util

from tests.corpora import REPO

_spec = importlib.util.spec_from_file_location("behaviour", REPO / "benchmarks" / "behaviour.py")
behaviour = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(behaviour)

RUN = """read 300 sentences, 3,316 tokens; 11 labels (0.01s, 1 thread)
development set: 60 sentences from /tmp/crftk-behaviour-x1/chain/test.txt
iter    1  objective 6.325464e+03  |g| 1.498e+03  active 20134  dev F1  43.64 acc  71.18  0.02s
round 1: 3448 tests scored (1.3 s); 12,000 tokens/s at 2026-11-22 10:15:03
saved x.model (0.1s in all) after 1:02
"""


def test_timings_rates_timestamps_and_paths_are_normalised_away():
    other = (RUN.replace("0.01s", "0.35s").replace("0.02s", "1.50s").replace("1.3 s", "12 s")
             .replace("12,000 tokens/s", "9,876.5 tokens/s").replace("10:15:03", "23:59:59")
             .replace("0.1s", "12.0s").replace("1:02", "11:40").replace("x1", "y2"))
    assert other != RUN
    a = behaviour.normalise_log(RUN, ["/tmp/crftk-behaviour-x1"])
    b = behaviour.normalise_log(other, ["/tmp/crftk-behaviour-y2"])
    assert a == b
    assert "from <path0>/chain/test.txt" in a and "(<seconds>, 1 thread)" in a


def test_numbers_that_are_results_are_kept():
    for changed in (RUN.replace("6.325464e+03", "6.325465e+03"), RUN.replace("43.64", "43.65"),
                    RUN.replace("300 sentences", "301 sentences"), RUN.replace("3448 tests", "3449 tests")):
        assert behaviour.normalise_log(changed) != behaviour.normalise_log(RUN)


def test_timing_fields_and_trace_seconds_are_dropped():
    info = {"training": {"seconds": 1.5, "seconds_in_all": 2.0, "objective": 3.0,
                         "history": [{"iteration": 1, "seconds": 0.1, "scoring_seconds": 0.2}]}}
    assert behaviour.without_timings(info) == {"training": {"objective": 3.0, "history": [{"iteration": 1}]}}
    trace = "evaluation\tpasses\tseconds\tobjective\n1\t1\t0.0017\t4057.2\n"
    assert behaviour.without_trace_seconds(trace) == "evaluation\tpasses\tobjective\n1\t1\t4057.2\n"
