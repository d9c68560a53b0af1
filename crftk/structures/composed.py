"""The structure a pipeline's model file names (crftk compose): one part per stage.

A pipeline decodes whole sentences stage by stage or jointly
(crftk.kinds.pipeline.Pipeline, crftk.structures.joint), never one encoded
corpus of one feature space, so it cannot be bound like the other structures.
"""

from crftk.errors import CrftkError
from crftk.structures.base import Structure
from crftk.structures.chain import ChainParts


class Stages(ChainParts, Structure):
    """A file of chain CRFs that decode stage by stage, never bound as one structure."""

    part_noun = "stage"
    #: why bind refuses, and what to use instead
    decoded_by = ""

    @classmethod
    def stage_count_error(cls, n):
        """What is wrong with a file of ``n`` stages (None: nothing)."""
        return None

    @classmethod
    def check_file(cls, parts, info, path):
        super().check_file(parts, info, path)
        what = cls.stage_count_error(len(parts))
        if what:
            raise CrftkError(f"model file is inconsistent: {what}", path)

    def bind(self, corpus, n_threads=1):
        raise CrftkError(self.decoded_by)


class Composed(Stages):
    """A cascade of separately trained models; the links between them are in the model's record."""

    name = "composed"
    file_kinds = {"pipeline": ("a pipeline", "crftk.Pipeline.load")}
    decoded_by = ("a composed model (crftk compose) decodes through its stages: "
                  "use crftk tag -m PIPELINE --decode cascade|joint, or crftk.Pipeline")

    @classmethod
    def stage_count_error(cls, n):
        """Two or more stages (kinds.pipeline checks the stages against the record)."""
        return None if n >= 2 else f"a pipeline has at least two stages, this one has {n}"
