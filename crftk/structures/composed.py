"""The structure a pipeline's model file names (crftk compose): one part per stage.

A pipeline decodes whole sentences stage by stage or jointly
(crftk.kinds.pipeline.Pipeline, crftk.structures.joint), never one encoded
corpus of one feature space, so it cannot be bound like the other structures.
"""

from crftk.errors import CrftkError
from crftk.structures.base import Structure
from crftk.structures.chain import ChainParts


class Composed(ChainParts, Structure):
    """A cascade of separately trained models; the links between them are in the model's record."""

    name = "composed"
    file_kinds = {"pipeline": ("a pipeline", "crftk.Pipeline.load")}
    part_noun = "stage"

    @classmethod
    def check_file(cls, parts, info, path):
        """Two or more stages (kinds.pipeline checks the stages against the record)."""
        super().check_file(parts, info, path)
        if len(parts) < 2:
            raise CrftkError(f"model file is inconsistent: a pipeline has at least two stages, this one has "
                             f"{len(parts)}", path)

    def bind(self, corpus, n_threads=1):
        raise CrftkError("a composed model (crftk compose) decodes through its stages: "
                         "use crftk tag -m PIPELINE --decode cascade|joint, or crftk.Pipeline")
