"""python-crfsuite's API on crftk: ``import crftk.pycrfsuite as pycrfsuite``.

``Trainer`` (``append``, ``select``, ``set``/``get``/``set_params``/``get_params``/``params``/
``help``, ``train(model, holdout)``, ``logparser``), ``Tagger`` (``open``, ``open_inmemory``,
``tag``, ``probability``, ``marginal``, ``labels``, ``info``) and ``ItemSequence`` take what
python-crfsuite takes, with CRFsuite's parameter names and defaults
(:mod:`crftk.pycrfsuite.options` says what each becomes in crftk). The model files are crftk's:
``crftk tag``/``info``/``dump`` read them, CRFsuite's own tools do not, and this Tagger does
not read CRFsuite's files.
"""

from crftk.pycrfsuite.log import LabelScore, TrainLog
from crftk.pycrfsuite.tagger import InvalidModelError, ItemSequence, ParsedDump, Tagger
from crftk.pycrfsuite.trainer import BaseTrainer, CRFSuiteError, Trainer

__all__ = ["BaseTrainer", "CRFSuiteError", "InvalidModelError", "ItemSequence", "LabelScore", "ParsedDump", "Tagger",
           "TrainLog", "Trainer"]
