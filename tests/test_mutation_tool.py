"""The mutation tester (``tests/_mutation.py``) makes the mutants it says it makes, one change each."""

from __future__ import annotations

import ast

from tests._mutation import mutant, sites

SOURCE = '''
def f(a, b=3):
    """doc"""
    x = a < 1 and not b
    if x:
        g(a)
    return a in (1, 2)
'''


def test_each_site_is_one_change_inside_a_function_body() -> None:
    tree = ast.parse(SOURCE)
    found = sites(tree)
    kinds = sorted({s[0] for s in found})
    assert kinds == ["bool", "cmp", "const", "if_false", "if_true", "not", "pass"]
    assert not any(s[1] == 2 for s in found)  # (not the default b=3, nor the docstring)
    mutants = {mutant(tree, s) for s in found}
    assert len(mutants) == len(found)  # each a different program
    assert "x = a <= 1 and (not b)" in "\n".join(mutants)
    assert "x = a < 1 or not b" in "\n".join(mutants)
    assert "return a not in (1, 2)" in "\n".join(mutants)
    assert "if True:" in "\n".join(mutants) and "if False:" in "\n".join(mutants)
    assert any("g(a)" not in m and "pass" in m for m in mutants)
