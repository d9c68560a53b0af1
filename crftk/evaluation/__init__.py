"""Scoring labelings: conlleval (chunk F1 by conlleval's rules, McNemar's test, reading the
label columns of tagged files)."""
