"""Files: CoNLL column files (conll), model containers (container) and label schemes (schemes)."""
