"""Scale-out on Dask (``dask.distributed``): batch tagging and data-parallel training.

cluster: the client of one run (``--scheduler ADDRESS`` or ``--workers N``) and the
engine's failures as crftk errors; pieces: files cut at sentence boundaries;
tagging: pieces as tasks, outputs written in input order; training: encoded shards
kept on the workers, the objective and gradient summed by a tree reduction, the
optimizer on the driver. Dask is optional (``pip install crftk[dask]``): nothing
here imports it until a cluster is asked for.
"""

from crftk.distributed.cluster import INSTALL, Cluster, require

__all__ = ["Cluster", "INSTALL", "require"]
