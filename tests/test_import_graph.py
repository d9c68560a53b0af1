"""The layers of crftk (docs/architecture.md) import downwards only, without a cycle, and the CLI
starts without numpy."""

import ast
import re
import subprocess
import sys

import pytest

from corpora import REPO

#: The layers, lowest first (the order of docs/architecture.md's table). A module may import
#: its own layer or a lower one, at module level or inside a function alike. ``name.*`` places a
#: package and everything under it, ``crftk._*`` the compiled kernels, any other entry that one
#: module alone (so that a new module beside it must be placed here).
LAYERS = (
    ("kernels", ("crftk._*",)),
    ("errors, progress", ("crftk.errors", "crftk.progress", "crftk.registry")),
    ("I/O", ("crftk.io.*",)),
    ("evaluation", ("crftk.evaluation.*",)),
    ("features", ("crftk.features.*",)),
    ("params", ("crftk.params",)),
    ("structures", ("crftk.structures.*",)),
    ("objectives", ("crftk.objectives.*",)),
    ("optimizers", ("crftk.optimize.*",)),
    ("model", ("crftk.model",)),
    ("scale-out (below the commands)", ("crftk.distributed", "crftk.distributed.cluster",
                                      "crftk.distributed.pieces", "crftk.distributed.training",
                                      "crftk.distributed.encoding")),
    ("ensemble", ("crftk.ensemble.*",)),
    ("model kinds", ("crftk.kinds.*",)),
    ("training", ("crftk.training.*",)),
    ("commands", ("crftk.commands.*",)),
    ("scale-out (tagging)", ("crftk.distributed.tagging",)),
    ("front ends", ("crftk.cli", "crftk.api", "crftk", "crftk.__main__")),
    ("drop-ins", ("crftk.pycrfsuite.*", "crftk.sklearn_crfsuite.*")),
)

#: Imports that run up the layers, each with why it is there and what removes it; an entry must
#: go when its import does. Empty: the layering is whole.
UPWARD_IMPORTS_BEING_REMOVED = {}


def layer_of(module):
    """(index, name) of the layer that places ``module``, the most specific entry winning; None
    when no entry places it."""
    best = None
    for index, (name, entries) in enumerate(LAYERS):
        for entry in entries:
            if entry == "crftk._*":
                hit = module.startswith("crftk._") and not module.startswith("crftk.__")
                rank = 1
            elif entry.endswith(".*"):
                package = entry[:-2]
                hit = module == package or module.startswith(package + ".")
                rank = 1 + package.count(".")
            else:
                hit, rank = module == entry, 100
            if hit and (best is None or rank > best[0]):
                best = (rank, index, name)
    return None if best is None else best[1:]


def kernel_sources():
    """{compiled module: its .pyx source} as setup.py builds them."""
    text = (REPO / "setup.py").read_text()
    return {name: REPO / src for name, src in re.findall(r'"(crftk\._\w+)",\s*\[?"(csrc/\w+\.pyx)"', text)}


def python_modules():
    modules = {}
    for path in (REPO / "crftk").rglob("*.py"):
        name = ".".join(path.relative_to(REPO).with_suffix("").parts)
        modules[name.removesuffix(".__init__")] = path
    return modules


def _targets(tree, known):
    """The modules of ``known`` that a parsed module imports: ``from crftk import params`` imports
    crftk.params (the package itself only for a name that is not a module of it)."""
    targets = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                targets.add(sub if sub in known else node.module)
        elif isinstance(node, ast.Import):
            targets.update(a.name for a in node.names)
    return {t for t in targets if t in known}


#: a Python-level import in a .pyx file (``cimport`` lines are C declarations, not imports)
_PYX_IMPORT = re.compile(r"^\s*(?:from\s+(crftk[\w.]*)\s+import\s+([\w, ]+)|import\s+(crftk[\w.]*))", re.M)


def import_graph():
    """{module: modules of crftk it imports}, at module level and inside functions alike; the
    compiled kernels are read from their .pyx sources."""
    modules = python_modules()
    kernels = kernel_sources()
    known = set(modules) | set(kernels)
    graph = {}
    for name, path in modules.items():
        graph[name] = _targets(ast.parse(path.read_text()), known) - {name}
    for name, path in kernels.items():
        targets = set()
        for module, names, plain in _PYX_IMPORT.findall(path.read_text()):
            if plain:
                targets.add(plain)
            for n in filter(None, (n.strip() for n in names.split(","))):
                targets.add(f"{module}.{n}" if f"{module}.{n}" in known else module)
        graph[name] = {t for t in targets if t in known} - {name}
    return graph


def upward_imports(graph):
    """(importer, its layer, imported, its layer) of every import of a higher layer."""
    out = []
    for importer in sorted(graph):
        low = layer_of(importer)
        for imported in sorted(graph[importer]):
            high = layer_of(imported)
            if low is not None and high is not None and high[0] > low[0]:
                out.append((importer, low[1], imported, high[1]))
    return out


def find_cycle(graph):
    state = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt, path + [nxt])
                if found:
                    return found
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [node])
            if found:
                return found
    return None


def test_the_import_graph_has_no_cycle():
    graph = import_graph()
    assert len(graph) > 30 and "crftk.structures.chain" in graph["crftk.objectives.likelihood"]
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_the_cycle_finder_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_every_module_is_placed_in_a_layer():
    graph = import_graph()
    assert {"crftk._lattice", "crftk.cli", "crftk"} <= set(graph)
    unplaced = sorted(m for m in graph if layer_of(m) is None)
    assert not unplaced, f"place these modules in LAYERS (and in docs/architecture.md's table): {unplaced}"


def test_no_module_imports_a_higher_layer():
    found = upward_imports(import_graph())
    unexpected = [f"{a} ({la}) imports {b} ({lb})" for a, la, b, lb in found
                  if (a, b) not in UPWARD_IMPORTS_BEING_REMOVED]
    assert not unexpected, "imports that run up the layers:\n" + "\n".join(unexpected)
    stale = set(UPWARD_IMPORTS_BEING_REMOVED) - {(a, b) for a, _, b, _ in found}
    assert not stale, f"removed: take them off UPWARD_IMPORTS_BEING_REMOVED: {sorted(stale)}"


@pytest.mark.parametrize("module, layer", [
    ("crftk._lattice", "kernels"), ("crftk.io.conll", "I/O"), ("crftk.distributed", "scale-out (below the commands)"),
    ("crftk.distributed.tagging", "scale-out (tagging)"), ("crftk", "front ends"),
    ("crftk.__main__", "front ends"), ("crftk.kinds.chain", "model kinds"), ("crftk.training.driver", "training"), ("crftk.training.bagging", "training"),
])
def test_the_layer_table_places_modules(module, layer):
    assert layer_of(module)[1] == layer


def test_an_upward_import_is_found_in_a_function_too():
    tree = ast.parse("def f():\n    from crftk.commands.tag import Tagger\n    from crftk import params\n")
    graph = {"crftk.features.space": _targets(tree, {"crftk.commands.tag", "crftk.params", "crftk"})}
    assert sorted(upward_imports(graph)) == [("crftk.features.space", "features", "crftk.commands.tag", "commands"),
                                             ("crftk.features.space", "features", "crftk.params", "params")]
    assert not layer_of("crftk.distributed.newcomer") and not layer_of("crftk.somewhere")


def test_docs_architecture_lists_the_same_layers_in_the_same_order():
    text = (REPO / "docs" / "architecture.md").read_text()
    rows = [line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| ")]
    assert rows[0] == "layer"
    assert rows[1:] == [name for name, _ in LAYERS]


def test_the_command_line_starts_without_numpy():
    code = "import sys, crftk.cli; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "False"
