"""A read-only name -> module (or module attribute) mapping whose entries are imported on first
access: ``crftk.kinds.KINDS`` and ``crftk.structures.STRUCTURES``, so that a process training one
kind of model loads no other kind's modules and kernels."""

from collections.abc import Mapping
from importlib import import_module


class LazyRegistry(Mapping):
    """``where``: name -> "package.module" (the entry is the module) or "package.module:Name" (an
    attribute of it). ``in`` and iteration import nothing."""

    def __init__(self, where):
        self._where = dict(where)

    def __getitem__(self, name):
        module, _, attribute = self._where[name].partition(":")
        loaded = import_module(module)
        return getattr(loaded, attribute) if attribute else loaded

    def __contains__(self, name):
        return name in self._where

    def __iter__(self):
        return iter(self._where)

    def __len__(self):
        return len(self._where)
