"""The structure a two-stage model's file names (crftk train --first-stage): two chain CRFs.

The second stage reads the first stage's labels, aggregated over documents and the corpus
(crftk.features.aggregates), so a two-stage model decodes whole documents stage by stage
(crftk.kinds.twostage), never one encoded corpus of one feature space.
"""

from crftk.errors import CrftkError
from crftk.structures.base import Structure
from crftk.structures.chain import ChainParts


class TwoStage(ChainParts, Structure):
    """A first-stage CRF and a second one that reads its labels (the link is in the record)."""

    name = "twostage"
    file_kinds = {"two-stage": ("a two-stage model", "crftk.TwoStage.load")}
    part_noun = "stage"

    @classmethod
    def check_file(cls, parts, info, path):
        """Two stages (kinds.twostage checks them against the record)."""
        super().check_file(parts, info, path)
        if len(parts) != 2:
            raise CrftkError(f"model file is inconsistent: a two-stage model has two stages, this one has "
                             f"{len(parts)}", path)

    def bind(self, corpus, n_threads=1):
        raise CrftkError("a two-stage model decodes through its stages: use crftk tag -m MODEL, or "
                         "crftk.TwoStage")
