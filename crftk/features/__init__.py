"""From token rows to feature ids: templates (CRF++ syntax and crftk's macros), observations
(the predicates macros compute), extract (templates applied to sentences), lexicon (gazetteer
features), space (the attribute and feature dictionaries, and encoding a corpus for the kernels).

Modules are imported by name (crftk.features.space ...): the CLI imports templates without numpy.
"""
