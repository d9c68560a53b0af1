"""Ensembles of chain CRFs over the same labels: feature bagging (Sutton, Sindelar & McCallum 2006).

combine: the members' tables and marginals on a batch, and the four combinations;
bag: a bag as one model file, and inference with one of its combinations;
weights: choosing the weights (grid, EM, weight files); merge: seq-poe as one model.
"""
