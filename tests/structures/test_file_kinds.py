"""What a structure says about its model files (Structure.file_kinds and the hooks crftk.model
calls), and the rule that keeps crftk/model.py free of per-structure branches: it asks the
structure a file names, never compares that name, or the file's kind, with a string."""

import ast
import os
import subprocess
import sys

import pytest

from corpora import REPO
from crftk.model import CHAIN_STRUCTURES, KINDS, chain_record
from crftk.structures import STRUCTURES
from crftk.structures.base import Structure

NAMES = set(STRUCTURES) | set(KINDS)


def _strings(node):
    """The string literals a comparison operand or dict key is made of."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*map(_strings, node.elts)) if node.elts else set()
    return set()


def _names_a_structure_or_kind(node):
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return name == "name" or "structure" in name or "kind" in name


def name_branches(source):
    """Lines of ``source`` that compare a structure's name or a file's kind with a string
    literal naming one, or that key a dict literal by such names (a branch in a table)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            named = set().union(*map(_strings, operands)) & NAMES
            if named and any(map(_names_a_structure_or_kind, operands)):
                found.append(node.lineno)
        elif isinstance(node, ast.Dict):
            if set().union(*(_strings(k) for k in node.keys if k is not None)) & NAMES:
                found.append(node.lineno)
    return found


def test_model_py_does_not_branch_on_a_structure_name_or_a_kind():
    source = (REPO / "crftk" / "model.py").read_text()
    lines = source.splitlines()
    assert name_branches(source) == [], "\n".join(lines[i - 1] for i in name_branches(source))


@pytest.mark.parametrize("snippet", [
    'if self.structure_name == "factorial":\n    pass',
    'x = self.kind != "bag"',
    'if structure == "pairs" and labels:\n    pass',
    'ok = model.structure_name in ("chain", "pairs")',
    'noun = {"pairs": "a second-order CRF"}.get(self.structure_name, "a CRF")',
    'if "composed" == name:\n    pass',
])
def test_the_rule_finds_a_branch(snippet):
    assert name_branches(snippet) == [1]


def test_the_rule_leaves_other_strings_alone():
    assert name_branches('if model_type not in ("crf", "memm"):\n    pass\nd = {"kind": 1}') == []


def test_every_structure_declares_its_model_files():
    for name, structure in STRUCTURES.items():
        assert structure.name == name and structure.file_kinds, name
        for hook in ("summary", "dump"):
            assert getattr(structure, hook).__func__ is not getattr(Structure, hook).__func__, (name, hook)
    # a kind two structures declare is the same kind
    for structure in STRUCTURES.values():
        for kind, said in structure.file_kinds.items():
            assert KINDS[kind] == said
    assert list(KINDS) == ["crf", "bag", "pipeline", "factorial", "two-stage", "semimarkov"]
    assert KINDS["bag"] == ("a feature bag", "crftk.Bag.load")


def test_the_chain_family():
    assert CHAIN_STRUCTURES == ("chain", "pairs", "memm")
    assert [chain_record(s) for s in CHAIN_STRUCTURES] == [
        {"order": 1, "model_type": "crf"}, {"order": 2, "model_type": "crf"}, {"order": 1, "model_type": "memm"}]
    bag = {"bag": {"members": ["a", "b"]}}
    assert [STRUCTURES[s].file_kind({}) for s in CHAIN_STRUCTURES] == ["crf"] * 3
    assert [STRUCTURES[s].file_kind(bag) for s in CHAIN_STRUCTURES] == ["bag"] * 3
    assert [STRUCTURES[s].describe([None], {}) for s in CHAIN_STRUCTURES] == [
        "a CRF", "a second-order CRF", "an MEMM"]
    assert STRUCTURES["chain"].describe([None] * 4, bag) == "a feature bag (4 members)"
    assert STRUCTURES["composed"].describe([None] * 3, {}) == "a pipeline (3 stages)"
    assert STRUCTURES["composed"].file_kind(bag) == "pipeline"


def test_the_chain_structures_named_are_the_label_chains():
    # CHAIN_STRUCTURES is spelled out so that the registry imports no other structure; it must say
    # what the classes say
    from crftk.structures.chain import LabelChain
    assert set(CHAIN_STRUCTURES) == {name for name, s in STRUCTURES.items() if issubclass(s, LabelChain)}


def test_the_registry_answers_membership_without_a_class():
    # in a fresh interpreter: asking what is registered imports no structure's module
    code = ("import sys\nfrom crftk.structures import STRUCTURES\n"
            "assert 'factorial' in STRUCTURES and 'nonesuch' not in STRUCTURES\n"
            "assert STRUCTURES.get('nonesuch') is None and len(STRUCTURES) == 7\n"
            "assert 'semimarkov' in list(STRUCTURES)\n"
            "print(sorted(m for m in sys.modules if m.startswith('crftk.structures.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=str(REPO),
                         env=dict(os.environ, PYTHONPATH=str(REPO))).stdout
    assert out.strip() == "[]"
    assert STRUCTURES["factorial"].name == "factorial"      # and asking for one imports it
