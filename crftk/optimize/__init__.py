"""Minimisers for training: L-BFGS / OWL-QN, conjugate gradient (plain, preconditioned,
mixed), GIS, QuickProp, and the online trainers (averaged perceptron, SGD).

Each sees the model only through the objective it is handed (value and gradient
over a batch, or, for GIS, expected and empirical counts), so a new optimizer or a
new objective never touches the other; all share the stopping rules, the progress
report (:class:`IterationInfo`) and the result (:class:`OptimizeResult`) of
:mod:`crftk.optimize.common`.
"""

from crftk.optimize.conjugate_gradient import cg
from crftk.optimize.common import IterationInfo, OptimizeResult
from crftk.optimize.iterative_scaling import gis
from crftk.optimize.quasi_newton import lbfgs
from crftk.optimize.gradient_steps import quickprop

__all__ = ["IterationInfo", "OptimizeResult", "cg", "gis", "lbfgs", "quickprop"]
