"""CRFsuite's training parameters (as python-crfsuite's Trainer names them) and their crftk options.

Each CRFsuite algorithm has its own parameter list with its own defaults; ``PARAMETERS`` holds
them (name -> (default, type, what it means here)). :func:`crftk_options` turns a selected
algorithm and its parameter values into the keyword options of :class:`crftk.CRF`, with the
warnings of the values crftk cannot honour (it says what it does instead; nothing is silently
different). What each maps to:

- ``lbfgs`` -> crftk's ``lbfgs`` (OWL-QN when c1 > 0); ``num_memories`` -> ``history``;
  ``delta``/``period`` -> ``epsilon``/``period`` (the same relative-improvement test);
  ``epsilon`` is CRFsuite's gradient test, |g| / max(1, |w|) < epsilon, which crftk's L-BFGS
  runs at 1e-5, CRFsuite's default; ``linesearch``: crftk has one line search for L-BFGS, a
  strong Wolfe search (bracketing and cubic zoom, Moré-Thuente's extrapolation bounds), which
  all three of CRFsuite's names get (a step that passes the strong Wolfe conditions passes the
  regular ones too); with c1 > 0 both use a backtracking search along the orthant, as CRFsuite
  does; ``max_linesearch``: crftk tries at most 20 steps, CRFsuite's default.
- ``l2sgd`` -> crftk's ``sgd`` (CRFsuite's l2sgd: the same rate schedule); ``delta``/``period``
  as above; calibration: crftk tries 10 rates, 0.4 down by halves, on 1,000 sentences,
  CRFsuite's defaults (eta 0.1, rate 2, 1,000 samples, 10 candidates, 20 trials) in effect.
- ``ap`` -> crftk's ``perceptron`` (averaged), stopping when no training sentence is
  mislabeled (CRFsuite's ``epsilon`` 0).
- ``pa``, ``arow`` -> crftk's ``pa``, ``arow`` with the same options.
- ``feature.minfreq`` -> ``min_freq`` (a feature is kept when its count, the sum of its values,
  reaches it), rounded up to a whole number, which crftk takes: the same for binary features
  and CRFsuite's default 0 (which keeps the features whose values are all 0: the model's
  weights for "not this label where the attribute fires"); a threshold between 0 and 1 is 1,
  ``feature.possible_states`` -> ``feature_set="complete"``, ``feature.possible_transitions``
  -> ``transitions="all"``.
"""

import math

from crftk.errors import CrftkError

#: CRFsuite's algorithm names (and python-crfsuite's aliases) -> crftk's.
ALGORITHMS = {"lbfgs": "lbfgs", "l2sgd": "sgd", "ap": "perceptron", "averaged-perceptron": "perceptron",
              "pa": "pa", "passive-aggressive": "pa", "arow": "arow"}
#: python-crfsuite's short names of the algorithms.
SHORT = {"averaged-perceptron": "ap", "passive-aggressive": "pa"}

#: The most iterations crftk runs (CRFsuite's L-BFGS default is INT_MAX, "until converged").
MAX_ITERATIONS = 1_000_000
LINESEARCHES = ("MoreThuente", "Backtracking", "StrongBacktracking")


def _flag(value):
    """CRFsuite's 0/1 parameters: bools, ints and their strings."""
    if isinstance(value, str):
        value = value.strip()
        if value not in ("0", "1"):
            raise ValueError(value)
        return value == "1"
    if isinstance(value, bool) or value in (0, 1):
        return bool(value)
    raise ValueError(value)


def _real(value):
    x = float(value)
    if not math.isfinite(x):
        raise ValueError(value)
    return x


def _integer(value):
    if isinstance(value, float) and not value.is_integer():
        raise ValueError(value)
    return int(float(value)) if isinstance(value, str) else int(value)


def _linesearch(value):
    if str(value) not in LINESEARCHES:
        raise ValueError(value)
    return str(value)


FEATURES = {
    "feature.minfreq": (0.0, _real, "Keep a feature when its count in the training data reaches this."),
    "feature.possible_states": (False, _flag, "1: a state feature for every attribute and every label."),
    "feature.possible_transitions": (False, _flag, "1: a transition feature for every pair of labels."),
}
_LOSS_STOP = (0.0, _real, "Stop when the training loss per sentence falls to this (0: only when no "
                          "sentence is mislabeled).")
PARAMETERS = {
    "lbfgs": {
        **FEATURES,
        "c1": (0.0, _real, "L1 coefficient (OWL-QN when > 0)."),
        "c2": (1.0, _real, "L2 coefficient: the objective adds c2 * |w|^2."),
        "max_iterations": (2147483647, _integer, "Most iterations (crftk runs at most 1,000,000)."),
        "num_memories": (6, _integer, "L-BFGS correction pairs (crftk's history)."),
        "epsilon": (1e-5, _real, "Converged when |g| / max(1, |w|) is below this (crftk: 1e-5)."),
        "period": (10, _integer, "Iterations over which delta measures the improvement."),
        "delta": (1e-5, _real, "Stop when the objective improved by less than this fraction over the "
                               "last period iterations (crftk's epsilon)."),
        "linesearch": ("MoreThuente", _linesearch, "MoreThuente, Backtracking or StrongBacktracking: "
                                                   "crftk runs its strong Wolfe search for each."),
        "max_linesearch": (20, _integer, "Most trials of a line search (crftk: 20)."),
    },
    "l2sgd": {
        **FEATURES,
        "c2": (1.0, _real, "L2 coefficient: the objective adds c2 * |w|^2."),
        "max_iterations": (1000, _integer, "Most epochs."),
        "period": (10, _integer, "Epochs over which delta measures the improvement."),
        "delta": (1e-6, _real, "Stop when the objective improved by less than this fraction over the "
                               "last period epochs."),
        "calibration.eta": (0.1, _real, "Initial rate of the calibration (crftk tries 0.4 down by halves)."),
        "calibration.rate": (2.0, _real, "Factor between calibration rates (crftk: 2)."),
        "calibration.samples": (1000.0, _real, "Sentences the calibration runs on (crftk: 1,000)."),
        "calibration.candidates": (10, _integer, "Rates the calibration keeps trying (crftk: 10)."),
        "calibration.max_trials": (20, _integer, "Most rates the calibration tries (crftk: 10)."),
    },
    "averaged-perceptron": {
        **FEATURES,
        "max_iterations": (100, _integer, "Most epochs."),
        "epsilon": _LOSS_STOP,
    },
    "passive-aggressive": {
        **FEATURES,
        "type": (1, _integer, "0: PA, 1: PA-I, 2: PA-II."),
        "c": (1.0, _real, "Aggressiveness (PA-I and PA-II)."),
        "error_sensitive": (True, _flag, "1: the loss counts the mislabeled tokens (its square root)."),
        "averaging": (True, _flag, "1: the weights averaged over all updates."),
        "max_iterations": (100, _integer, "Most epochs."),
        "epsilon": _LOSS_STOP,
    },
    "arow": {
        **FEATURES,
        "variance": (1.0, _real, "Initial variance of every weight."),
        "gamma": (1.0, _real, "Trade-off between the loss and the change of the weights."),
        "max_iterations": (100, _integer, "Most epochs."),
        "epsilon": _LOSS_STOP,
    },
}

#: crftk's names of the PA and AROW options (crftk.params).
ONLINE = {"type": "pa_type", "c": "pa_c", "error_sensitive": "error_sensitive", "averaging": "averaging",
          "variance": "arow_variance", "gamma": "arow_gamma"}

#: Values crftk runs at whatever is asked: (algorithm, parameter) -> what it does instead.
FIXED = {
    ("lbfgs", "epsilon"): "its L-BFGS stops when |g| / max(1, |w|) < 1e-5",
    ("lbfgs", "max_linesearch"): "its line search tries at most 20 steps",
    **{("l2sgd", name): "its calibration tries 10 rates, 0.4 down by halves, on 1,000 sentences"
       for name in ("calibration.eta", "calibration.rate", "calibration.samples", "calibration.candidates",
                    "calibration.max_trials")},
    **{(name, "epsilon"): "it trains max_iterations epochs, or until no sentence is mislabeled"
       for name in ("averaged-perceptron", "passive-aggressive", "arow")},
}


def canonical(algorithm):
    """CRFsuite's full name of an algorithm (lbfgs, l2sgd, averaged-perceptron, ...); ValueError
    for a name it does not have."""
    name = str(algorithm).lower()
    name = {"ap": "averaged-perceptron", "pa": "passive-aggressive"}.get(name, name)
    if name not in PARAMETERS:
        raise ValueError(f"unknown training algorithm {algorithm!r}: CRFsuite's are lbfgs, l2sgd, ap, pa, arow")
    return name


def cast(algorithm, name, value):
    """The value of a parameter of the algorithm as its type; CrftkError naming it when it is not."""
    declared = PARAMETERS[algorithm].get(name)
    if declared is None:
        raise CrftkError(f"parameter not found: {name} (the parameters of {algorithm}: "
                         f"{', '.join(PARAMETERS[algorithm])})")
    try:
        return declared[1](value)
    except (TypeError, ValueError):
        raise CrftkError(f"{name} cannot be {value!r}") from None


def crftk_options(algorithm, values, threads=0):
    """(options of crftk.CRF, warnings) for CRFsuite's algorithm and parameter values (its
    defaults for those not given)."""
    algorithm = canonical(algorithm)
    given = {name: cast(algorithm, name, value) for name, value in values.items()}
    p = {name: declared[0] for name, declared in PARAMETERS[algorithm].items()}
    p.update(given)
    warnings = []
    for name, value in given.items():
        what = FIXED.get((algorithm, name))
        if what is not None and value != PARAMETERS[algorithm][name][0]:
            warnings.append(f"{name}={value!r} has no counterpart in crftk, which ignores it: {what}")
    options = {
        "algorithm": ALGORITHMS[algorithm],
        "max_iter": max(1, min(p["max_iterations"], MAX_ITERATIONS)),
        # crftk's min_freq is a whole number: the same threshold for counts of binary features
        "min_freq": max(0, math.ceil(p["feature.minfreq"])),
        "feature_count": "values",
        "feature_set": "complete" if p["feature.possible_states"] else "supported",
        "transitions": "all" if p["feature.possible_transitions"] else "seen",
        "threads": threads,
    }
    if algorithm == "lbfgs":
        options.update(c1=p["c1"], c2=p["c2"], history=p["num_memories"], epsilon=p["delta"],
                       period=p["period"])
    elif algorithm == "l2sgd":
        options.update(c2=p["c2"], epsilon=p["delta"], period=p["period"])
    else:
        # CRFsuite's online methods run every epoch until none mislabels a sentence: no
        # relative-improvement test (crftk's epsilon 0)
        options["epsilon"] = 0.0
        options.update({ONLINE[name]: p[name] for name in PARAMETERS[algorithm] if name in ONLINE})
    return options, warnings
