"""Pytest plumbing for the fuzz properties (tests/test_fuzz_*.py).

Two Hypothesis profiles. "ci" (the default) gives the whole fuzz suite a small
budget of examples, drawn from a fixed seed (``derandomize``) without shrinking,
so that the default test run stays under a minute and is the same everywhere.
"fuzz" (``make fuzz``, ``--hypothesis-profile=fuzz``) gives it 100,000 examples
from random seeds, with shrinking. A property's share of the budget is its
``@pytest.mark.fuzz(weight=W)`` over the sum of the collected weights, at most
``cap`` examples where the marker gives one (``fuzz(weight=W, cap=N)``);
``CRFTK_FUZZ_EXAMPLES=N`` overrides the total. At the end of a run the cases
each property ran and the failing ones are printed (counted as they run, by
``fuzz_strategies.counted``).
"""

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings

import fuzz_strategies as fz

# Tests that run `python -m crftk.cli` in a subprocess must get this checkout's crftk, not
# whatever an editable install elsewhere on the machine points at.
REPO = Path(__file__).resolve().parents[1]
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))

_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture,
           HealthCheck.filter_too_much]
settings.register_profile("ci", deadline=None, max_examples=25, derandomize=True, database=None,
                          phases=[Phase.explicit, Phase.generate], suppress_health_check=_HEALTH,
                          print_blob=True)
settings.register_profile("fuzz", deadline=None, max_examples=1000, database=None,
                          suppress_health_check=_HEALTH, print_blob=True)
settings.load_profile("ci")     # --hypothesis-profile=fuzz loads the other one after this

#: The fuzz suite's examples in all, per profile.
BUDGET = {"ci": 800, "fuzz": 100_000}

_FUZZ_IDS = set()
_OUTCOMES = {}       # nodeid -> passed | failed | xfailed | xpassed | skipped
_REASONS = {}
_RUN = {}


def _total(profile):
    text = os.environ.get(fz.ENV_EXAMPLES)
    if text is None:
        return BUDGET.get(profile, BUDGET["ci"])
    try:
        total = int(text)
    except ValueError:
        raise pytest.UsageError(f"{fz.ENV_EXAMPLES} must be a number of examples, not {text!r}") from None
    if total < 1:
        raise pytest.UsageError(f"{fz.ENV_EXAMPLES} must be at least 1")
    return total


def pytest_configure(config):
    config.addinivalue_line("markers", "fuzz(weight, cap): a Hypothesis property of the fuzz suite; weight "
                                       "scales its share of the examples, cap (if given) bounds it")


def pytest_collection_modifyitems(session, config, items):
    """Give each fuzz property its share of the profile's examples (settings on the test function)."""
    fuzz = [item for item in items if item.get_closest_marker("fuzz")]
    _FUZZ_IDS.update(item.nodeid for item in fuzz)
    if not fuzz:
        return
    profile = settings.get_current_profile_name()
    total = _total(profile)
    weight = {item.nodeid: float(item.get_closest_marker("fuzz").kwargs.get("weight", 1.0)) for item in fuzz}
    per_weight = total / sum(weight.values())
    _RUN.update(profile=profile, total=total)
    done = set()
    for item in fuzz:
        fn = getattr(item.function, "__func__", item.function)
        if id(fn) in done:     # parametrized: one function object, one budget (same weight)
            continue
        done.add(id(fn))
        cases = max(1, round(per_weight * weight[item.nodeid]))
        cap = item.get_closest_marker("fuzz").kwargs.get("cap")     # slow properties (a Dask cluster a case)
        settings(settings.default, max_examples=min(cases, cap) if cap else cases)(fn)


@pytest.fixture(autouse=True)
def _fuzz_current_test(request):
    fz.CURRENT[0] = request.node.nodeid
    yield
    fz.CURRENT[0] = None


@pytest.fixture(scope="session")
def sandbox():
    """The worker process the properties send their crash-prone calls to."""
    import fuzz_sandbox
    box = fuzz_sandbox.Sandbox()
    yield box
    box.close()


@pytest.fixture(scope="session")
def fuzz_dir(tmp_path_factory):
    """A scratch directory for the whole session (properties make their own subdirectories)."""
    return tmp_path_factory.mktemp("fuzz")


@pytest.fixture(scope="session")
def models(fuzz_dir):
    """Tiny models trained once (files and bytes): a rich first-order CRF, an order-2 CRF, an
    MEMM, and one of each newer kind: a pipeline (a POS stage feeding a chunk stage, which are
    "pos_stage" and "chunk_stage" alone), a bag (two members), a factorial CRF (POS and chunk
    chains) and a semi-Markov CRF (chunks)."""
    import crftk
    from crftk.io.conll import Sentence
    from crftk.features.templates import read_template
    from crftk.commands.train import fit
    from crftk.model import Model

    fz.write(fuzz_dir / "city.lex", fz.CITY_LEXICON)
    rich = read_template(fz.write(fuzz_dir / "rich.tmpl", fz.RICH_TEMPLATE))
    plain = read_template(fz.write(fuzz_dir / "plain.tmpl", fz.PLAIN_TEMPLATE))
    sentences = [Sentence([list(r) for r in s], d, 1, "<train>") for d, s in enumerate(fz.TRAIN)]
    quiet = dict(log=lambda msg: None, max_iter=30, threads=1)
    out = {}
    for name, template, options in (("crf", rich, {}), ("order2", plain, {"order": 2}),
                                    ("memm", plain, {"model_type": "memm"})):
        model = fit(sentences, template, **quiet, **options)
        path = fuzz_dir / f"{name}.model"
        model.save(path)
        out[name] = fz.TrainedModel(name, model, path, model.to_bytes())
    words = [[[r[0]] for r in s] for s in fz.TRAIN]
    with_tags = [[list(r[:2]) for r in s] for s in fz.TRAIN]
    tags = [[r[1] for r in s] for s in fz.TRAIN]
    chunks = [[r[2] for r in s] for s in fz.TRAIN]
    fast = dict(max_iter=10, threads=1)
    pos = crftk.CRF(fz.POS_TEMPLATE, **fast).fit(words, tags)
    chunk = crftk.CRF(fz.CHUNK_TEMPLATE, **fast).fit(with_tags, chunks)
    estimators = {
        "pipeline": crftk.Pipeline.compose([pos, chunk], 1),
        "bag": crftk.Bag([fz.CHUNK_TEMPLATE, fz.POS_TEMPLATE], **fast).fit(with_tags, chunks, with_tags[:2],
                                                                           chunks[:2]),
        "factorial": crftk.FactorialCRF(fz.POS_TEMPLATE, **fast).fit(words, [tags, chunks]),
        "semimarkov": crftk.CRF(fz.CHUNK_TEMPLATE + "S0:%len\nS1:%first[1]\n", model_type="semimarkov",
                                **fast).fit(with_tags, chunks),
    }
    for name, model in (("pos_stage", pos), ("chunk_stage", chunk)):     # the pipeline's stages, alone
        model.save(fuzz_dir / f"{name}.model")
        out[name] = fz.TrainedModel(name, model, fuzz_dir / f"{name}.model", None)
    for name, estimator in estimators.items():
        path = fuzz_dir / f"{name}.model"
        estimator.save(path)
        model = Model.load(path)
        out[name] = fz.TrainedModel(name, model, path, path.read_bytes())
    return out


def pytest_runtest_logreport(report):
    if report.nodeid not in _FUZZ_IDS:
        return
    if report.when == "call" or (report.when == "setup" and not report.passed):
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
            _REASONS[report.nodeid] = report.wasxfail
        else:
            outcome = report.outcome
        _OUTCOMES[report.nodeid] = outcome


def pytest_terminal_summary(terminalreporter):
    if not _OUTCOMES:
        return
    tr = terminalreporter
    cases = sum(fz.COUNTS[n] for n in _OUTCOMES)
    failing = sum(fz.FAILURES[n] for n in _OUTCOMES)
    failed = sorted(n for n, o in _OUTCOMES.items() if o in ("failed", "xpassed"))
    known = sorted(n for n, o in _OUTCOMES.items() if o == "xfailed")
    tr.section(f"crftk fuzz: profile {_RUN.get('profile')}, {_RUN.get('total', 0):,} examples "
               f"asked for over {len(_OUTCOMES)} properties")
    width = max(len(n) for n in _OUTCOMES)
    tr.write_line(f"{'property':{width}s} {'cases':>9s} {'failing':>8s}  outcome")
    for nodeid in sorted(_OUTCOMES):
        tr.write_line(f"{nodeid:{width}s} {fz.COUNTS[nodeid]:>9,} {fz.FAILURES[nodeid]:>8,}  {_OUTCOMES[nodeid]}")
    tr.write_line(f"{'total':{width}s} {cases:>9,} {failing:>8,}  {len(failed)} properties failed, "
                  f"{len(known)} known failures")
    tr.write_line(f"crftk fuzz: {cases:,} cases, {failing:,} failing cases, {len(failed)} failed properties")
    for nodeid in failed:
        tr.write_line(f"  failed: {nodeid} ({_OUTCOMES[nodeid]})")
    for nodeid in known:
        tr.write_line(f"  known failure: {nodeid}: {_REASONS.get(nodeid, '')}")
