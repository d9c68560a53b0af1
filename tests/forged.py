"""Forged model files: a model file's header rewritten and its checksums recomputed, as a program
other than crftk could write it, for the checks a model file passes at load."""

import json

from crftk.io.container import dumps, read_container


def forge(source, target, edit):
    """Write to ``target`` the model file ``source`` with its header's meta changed by
    ``edit(meta)`` (in place: the file's own fields, "info", and each part's "space"); the arrays
    are kept and the checksums recomputed, so the file is consistent as a container."""
    meta, arrays = read_container(source)
    meta = json.loads(json.dumps(meta))
    edit(meta)
    with open(target, "wb") as fh:
        fh.write(dumps(meta, dict(arrays)))
    return target
