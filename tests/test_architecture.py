"""The dependency rules of ``docs/architecture.md`` ("Dependency rules"), checked on the source.

Every module under ``actors/`` and ``storage/`` is parsed with ``ast``; every import counts:
at module level, inside functions, under ``if TYPE_CHECKING:``, and ``importlib.import_module``
with a literal name. A rule says which modules may not import which; ``transitive`` rules also
follow the module-level imports of our own modules (importing ``a.b`` runs ``a/__init__`` too),
since importing the core must not load fsspec through a helper it borrows.

To add a rule, append a ``Rule`` to ``RULES`` (and say it in the docs in the same words). An
import that breaks a rule today and is being removed goes into the rule's ``known`` with the
reason; the test fails when a new one appears, and when a known one is gone (delete it then).
"""

from __future__ import annotations

import ast
import enum
import os
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("actors", "storage")

# I/O, processes, threads and clocks: what the pure core leaves to the shell
IO_AND_CLOCK = ("thespian", "fsspec", "threading", "multiprocessing", "concurrent", "asyncio", "queue", "time",
                "datetime", "os", "subprocess", "socket", "select", "psutil")
# the packages that do I/O or run the experiment around the core
OUTER = ("actors._shell", "actors._driver", "actors._cluster", "actors._worker", "actors._cli", "actors._process",
         "actors.testing")


@dataclass(frozen=True)
class Rule:
    """Modules under ``covers`` (names; a package covers everything below it), except ``exempt``,
    import nothing under ``forbids``."""

    name: str
    covers: tuple[str, ...]
    forbids: tuple[str, ...]
    why: str
    exempt: tuple[str, ...] = ()
    type_only_ok: bool = False  # imports under `if TYPE_CHECKING:` allowed: they never run
    transitive: bool = False  # also what our own modules imported at module level import
    known: tuple[tuple[str, str, str], ...] = ()  # (importer, imported, why it is still there)


RULES: tuple[Rule, ...] = (
    Rule("storage-standalone", covers=("storage",), forbids=("actors",),
         why="storage is a library the engine uses; it works and is tested without it"),
    Rule("core-is-pure",
         covers=("actors._engine", "actors.messages", "actors.schedulers", "actors.search"),
         forbids=IO_AND_CLOCK + OUTER, transitive=True,
         why="the core, the messages and the scheduler and search math run unchanged in the actors, in "
             "the simulator and in unit tests: time comes in as `now`, effects go out as commands"),
    Rule("plugins-see-no-shell",
         covers=("actors.schedulers", "actors.search", "actors.stoppers"),
         forbids=(*OUTER, "thespian"),
         why="schedulers, searchers and stoppers see trials only through TrialSnapshot and the "
             "SchedulerController they are handed, wherever they run"),
    Rule("driver-enters-the-shell-once", covers=("actors._driver",), forbids=("actors._shell",),
         exempt=("actors._driver.controller_client",), type_only_ok=True,
         why="the public API starts the controller (actors._driver.controller_client) and otherwise talks "
             "to it in messages"),
    Rule("dashboard-reads-storage-only", covers=("actors._dashboard",),
         forbids=("thespian", "actors._shell", "actors._worker", "actors._engine.core", "actors._legacy", "pickle",
                  "cloudpickle", "actors.testing"),
         transitive=True,
         why="the dashboard reads what is in storage (JSON and text) and runs nothing: it never starts or talks "
             "to the engine's actors and never loads an unpickler, so serving a URL cannot run its pickles"),
)


# ---------------------------------------------------------------------------------- reading the source
class Where(enum.Enum):
    MODULE = "module level"
    FUNCTION = "inside a function"
    TYPE_CHECKING = "under TYPE_CHECKING"


@dataclass(frozen=True)
class Import:
    names: tuple[str, ...]  # `from a import b`: ("a", "a.b"), since b may be a module
    line: int
    where: Where


def _module_files() -> dict[str, str]:
    out = {}
    for pkg in PACKAGES:
        for d, dirs, files in os.walk(os.path.join(ROOT, pkg)):
            dirs[:] = [x for x in dirs if not x.startswith(("__pycache__", "."))]
            for f in files:
                if f.endswith(".py"):
                    parts = os.path.relpath(os.path.join(d, f), ROOT)[:-3].split(os.sep)
                    if parts[-1] == "__init__":
                        parts.pop()
                    out[".".join(parts)] = os.path.join(d, f)
    return out


MODULES = _module_files()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class _Collector(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool) -> None:
        self.package = module if is_package else module.rpartition(".")[0]
        self.where = Where.MODULE
        self.found: list[Import] = []

    def _inside(self, where: Where, nodes: list[ast.stmt]) -> None:
        outer, self.where = self.where, where if self.where is Where.MODULE else self.where
        for n in nodes:
            self.visit(n)
        self.where = outer

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for d in node.decorator_list:
            self.visit(d)
        self._inside(Where.FUNCTION, node.body)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            self._inside(Where.TYPE_CHECKING, node.body)
            for n in node.orelse:
                self.visit(n)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.found.append(Import((a.name,), node.lineno, self.where))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            parts = self.package.split(".")
            up = parts[:len(parts) - node.level + 1]
            base = ".".join(up + ([node.module] if node.module else []))
        for a in node.names:
            self.found.append(Import((base, f"{base}.{a.name}"), node.lineno, self.where))

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        if (isinstance(f, ast.Attribute) and f.attr == "import_module" and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            self.found.append(Import((node.args[0].value,), node.lineno, self.where))
        self.generic_visit(node)


@cache
def imports_of(module: str) -> tuple[Import, ...]:
    path = MODULES[module]
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    c = _Collector(module, path.endswith("__init__.py"))
    c.visit(tree)
    return tuple(c.found)


def under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _ours(name: str) -> Iterator[str]:
    """Our modules that importing ``name`` runs: it (or the module it is an attribute of) and its
    parent packages."""
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        m = ".".join(parts[:i])
        if m in MODULES:
            yield m


@cache
def loaded_by(module: str) -> dict[str, tuple[str, ...]]:
    """What importing ``module`` loads through our modules' module-level imports (not what it imports
    itself) -> the chain that leads there: the import in ``module``, then our modules in between."""
    chains: dict[str, tuple[str, ...]] = {}
    todo = deque([(module, ())])
    seen = {module}
    while todo:
        m, chain = todo.popleft()
        for imp in imports_of(m):
            if imp.where is not Where.MODULE:
                continue
            link = chain or (imp.names[-1] if imp.names[-1] in MODULES else imp.names[0],)
            for name in imp.names:
                if m != module:
                    chains.setdefault(name, link)
                for own in _ours(name):
                    if own not in seen:
                        seen.add(own)
                        todo.append((own, link if own == link[-1] else (*link, own)))
    return chains


# ---------------------------------------------------------------------------------- checking
def violations(rule: Rule) -> dict[tuple[str, str], str]:
    """(importer, imported) -> where, for every import that breaks ``rule``."""
    out: dict[tuple[str, str], str] = {}
    for module in sorted(MODULES):
        if not any(under(module, c) for c in rule.covers) or any(under(module, e) for e in rule.exempt):
            continue
        for imp in imports_of(module):
            if imp.where is Where.TYPE_CHECKING and rule.type_only_ok:
                continue
            bad = [n for n in imp.names if any(under(n, f) for f in rule.forbids)]
            if bad:
                out.setdefault((module, bad[0]), f"{os.path.relpath(MODULES[module], ROOT)}:{imp.line} "
                                                 f"({imp.where.value})")
        if rule.transitive:
            for name, chain in loaded_by(module).items():
                if any(under(name, f) for f in rule.forbids):
                    out.setdefault((module, chain[0]), f"loads {name}: {' -> '.join((module, *chain))}")
    return out


def _known(rule: Rule, importer: str, imported: str) -> bool:
    return any(importer == k and under(imported, i) for k, i, _ in rule.known)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_dependency_rule(rule):
    found = violations(rule)
    new = {k: v for k, v in found.items() if not _known(rule, *k)}
    assert not new, f"rule {rule.name!r} ({rule.why}) is broken:\n" + "\n".join(
        f"  {a} imports {b}: {where}" for (a, b), where in sorted(new.items()))
    stale = [(k, i) for k, i, _ in rule.known if not any(a == k and under(b, i) for a, b in found)]
    assert not stale, f"rule {rule.name!r}: these known exceptions are gone, delete them from RULES: {stale}"


def test_rules_name_real_modules():
    """A rule whose module names are misspelt (or moved away) would pass vacuously."""
    for rule in RULES:
        for name in rule.covers + rule.exempt + tuple(k for k, _, _ in rule.known):
            assert any(under(m, name) for m in MODULES), (rule.name, name)


def test_the_checker_sees_every_kind_of_import(tmp_path, monkeypatch):
    """Module level, in a function, under TYPE_CHECKING, relative, importlib, transitive."""
    src = {
        "actors._engine.fake_a": "import os\n"
                                 "from typing import TYPE_CHECKING\n"
                                 "if TYPE_CHECKING:\n    from actors._shell import controller\n"
                                 "def f():\n    from . import fake_b\n    import importlib\n"
                                 "    importlib.import_module('thespian.actors')\n",
        "actors._engine.fake_b": "from actors._engine import fake_c\n",
        "actors._engine.fake_c": "import fsspec\n",
    }
    for name, text in src.items():
        p = tmp_path / f"{name.rsplit('.', 1)[1]}.py"
        p.write_text(text)
        monkeypatch.setitem(MODULES, name, str(p))
    imports_of.cache_clear()
    loaded_by.cache_clear()
    try:
        got = {(imp.names[-1], imp.where) for imp in imports_of("actors._engine.fake_a")}
        assert ("os", Where.MODULE) in got
        assert ("actors._shell.controller", Where.TYPE_CHECKING) in got
        assert ("actors._engine.fake_b", Where.FUNCTION) in got
        assert ("thespian.actors", Where.FUNCTION) in got
        rule = Rule("t", covers=("actors._engine.fake_a", "actors._engine.fake_b"), forbids=IO_AND_CLOCK + OUTER,
                    why="", transitive=True)
        found = violations(rule)
        assert {("actors._engine.fake_a", "os"), ("actors._engine.fake_a", "actors._shell"),
                ("actors._engine.fake_a", "thespian.actors"), ("actors._engine.fake_b", "actors._engine.fake_c")
                } <= set(found), found
        assert ("actors._engine.fake_a", "actors._shell") not in violations(
            Rule("t", covers=("actors._engine.fake_a",), forbids=("actors._shell",), why="", type_only_ok=True))
    finally:
        imports_of.cache_clear()
        loaded_by.cache_clear()


def test_docs_state_the_same_rules():
    """docs/architecture.md's "Dependency rules" names each rule of RULES (and no other)."""
    import re

    with open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("## Dependency rules", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^\d+\. \*\*([a-z-]+)\*\*", section, re.M) == [r.name for r in RULES]
