"""Training: the one driver every kind of model trains through (``driver``), and the methods
built on it: feature induction (``induction``) and feature bagging (``bagging``)."""

from crftk.training.driver import (TRAIN_PARAMS, Outcome, Trace, _stderr_log, check_cluster,  # noqa: F401
                                   check_options, fit, objective_for, optimize, run_algorithm, trainer_for)
