"""The structure a two-stage model's file names (crftk train --first-stage): two chain CRFs.

The second stage reads the first stage's labels, aggregated over documents and the corpus
(crftk.features.aggregates), so a two-stage model decodes whole documents stage by stage
(crftk.kinds.twostage), never one encoded corpus of one feature space.
"""

from crftk.structures.composed import Stages


class TwoStage(Stages):
    """A first-stage CRF and a second one that reads its labels (the link is in the record)."""

    name = "twostage"
    file_kinds = {"two-stage": ("a two-stage model", "crftk.TwoStage.load")}
    decoded_by = "a two-stage model decodes through its stages: use crftk tag -m MODEL, or crftk.TwoStage"

    @classmethod
    def stage_count_error(cls, n):
        """Two stages (kinds.twostage checks them against the record)."""
        return None if n == 2 else f"a two-stage model has two stages, this one has {n}"
