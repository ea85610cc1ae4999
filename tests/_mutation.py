"""A small mutation tester: does any test notice when one line of a module is broken on purpose?

    python -m tests._mutation actors/_engine/lifecycle.py tests/test_lifecycle.py tests/test_core_unit.py \\
        [--workers 2] [--xdist] [--only survivors.json] [--json out.json]

Each mutant changes one thing in the module's functions: a comparison flipped (``<`` and ``<=``, ``==`` and
``!=``, ``is`` and ``is not``, ``in`` and ``not in``), ``and`` and ``or`` swapped, a ``not`` dropped, a bool
constant negated, an int constant plus one, a statement (assignment or call) replaced by ``pass``, an ``if``'s
test made always true or always false. Each mutant runs the given tests (``pytest -x``) in a copy of this
checkout of its own (``PYTHONPATH`` puts the copy first); a mutant that passes them all *survived*: the tests
do not see that change. Prints each survivor with its line and writes them as JSON (``--only`` runs those
again, against other tests). Survivors are read by a person: some are equivalent (the change alters nothing
observable), the others name behaviour no test pins down (``docs/testing.md``).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import importlib.util
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

Site = tuple[str, int, int, int]  # (kind, line, column, operand index)

_FLIP: dict[type, type] = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
                           ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn,
                           ast.NotIn: ast.In}


def sites(tree: ast.AST) -> list[Site]:
    """Every place a mutant can be made, inside function bodies (not their defaults)."""
    out: list[Site] = []

    def visit(node: ast.AST, in_body: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for stmt in node.body:
                visit(stmt, True)
            return
        if in_body:
            at = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
            if isinstance(node, ast.Compare):
                out.extend(("cmp", *at, i) for i, op in enumerate(node.ops) if type(op) in _FLIP)
            elif isinstance(node, ast.BoolOp):
                out.append(("bool", *at, 0))
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
                out.append(("not", *at, 0))
            elif isinstance(node, ast.Constant) and type(node.value) in (bool, int):
                out.append(("const", *at, 0))
            elif isinstance(node, (ast.Assign, ast.AugAssign)) or (
                    isinstance(node, ast.Expr) and not isinstance(node.value, ast.Constant)):
                out.append(("pass", *at, 0))
            elif isinstance(node, ast.If):
                out.extend([("if_true", *at, 0), ("if_false", *at, 0)])
        for child in ast.iter_child_nodes(node):
            visit(child, in_body)

    visit(tree, False)
    return out


class _Mutate(ast.NodeTransformer):
    def __init__(self, site: Site) -> None:
        self.site, self.done = site, False

    def generic_visit(self, node: ast.AST) -> ast.AST:
        kind, line, col, i = self.site
        if self.done or (getattr(node, "lineno", None), getattr(node, "col_offset", None)) != (line, col):
            return super().generic_visit(node)
        new: ast.AST | None = None
        if kind == "cmp" and isinstance(node, ast.Compare):
            node.ops[i] = _FLIP[type(node.ops[i])]()
            new = node
        elif kind == "bool" and isinstance(node, ast.BoolOp):
            node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            new = node
        elif kind == "not" and isinstance(node, ast.UnaryOp):
            new = node.operand
        elif kind == "const" and isinstance(node, ast.Constant):
            value = node.value
            new = ast.Constant(not value if isinstance(value, bool) else value + 1 if isinstance(value, int) else value)
        elif kind == "pass" and isinstance(node, (ast.Assign, ast.AugAssign, ast.Expr)):
            new = ast.Pass()
        elif kind in ("if_true", "if_false") and isinstance(node, ast.If):
            node.test = ast.Constant(kind == "if_true")
            new = node
        if new is None:
            return super().generic_visit(node)
        self.done = True
        return new


def mutant(tree: ast.AST, site: Site) -> str:
    changed = _Mutate(site).visit(copy.deepcopy(tree))
    return ast.unparse(ast.fix_missing_locations(changed))


def _checkout_copy(root: str) -> str:
    """A copy of the checkout's tracked files (what the tests import from ``PYTHONPATH``)."""
    files = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout.split()
    dest = tempfile.mkdtemp(prefix="audition-mutant-")
    for rel in files:
        os.makedirs(os.path.dirname(os.path.join(dest, rel)) or dest, exist_ok=True)
        if os.path.isfile(os.path.join(root, rel)):
            shutil.copy2(os.path.join(root, rel), os.path.join(dest, rel))
    return dest


def _end(child: subprocess.Popen[bytes]) -> None:
    """Kill a mutant's test run and whatever it started (its own session)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)
    child.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("module", help="the module to mutate, relative to the checkout")
    parser.add_argument("tests", nargs="+", help="the test files (or node ids) that should notice")
    parser.add_argument("--workers", type=int, default=2, help="mutants run at once, each in its own copy")
    parser.add_argument("--xdist", action="store_true", help="run each mutant's tests with pytest -n 2")
    parser.add_argument("--only", help="a JSON of survivors (--json of an earlier run): run only those")
    parser.add_argument("--json", help="write the survivors here")
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    source = open(os.path.join(root, args.module)).read()
    tree = ast.parse(source)
    todo = sites(tree)
    if args.only:
        wanted = {tuple(entry["site"]) for entry in json.load(open(args.only))["survived"]}
        todo = [s for s in todo if s in wanted]
    lines = source.splitlines()
    copies: queue.Queue[str] = queue.Queue()
    made = [_checkout_copy(root) for _ in range(max(1, args.workers))]
    for d in made:
        copies.put(d)
    opts = ["-n", "2"] if args.xdist else ["-p", "no:xdist"]

    def run(site: Site) -> tuple[Site, bool]:
        d = copies.get()
        target = os.path.join(d, args.module)
        try:
            with open(target, "w") as f:
                f.write(mutant(tree, site))
            with contextlib.suppress(FileNotFoundError):  # (the last mutant's bytecode: same mtime and size?)
                os.remove(importlib.util.cache_from_source(target))
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            env["PYTHONPATH"] = d
            child = subprocess.Popen([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *opts,
                                      *args.tests], cwd=d, env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
            running.add(child)
            try:
                killed = child.wait(timeout=600) != 0
            except subprocess.TimeoutExpired:
                killed = True  # (a hang is noticed too)
                _end(child)
            running.discard(child)
            return site, killed
        finally:
            with open(target, "w") as f:
                f.write(source)
            copies.put(d)

    running: set[subprocess.Popen[bytes]] = set()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # (the copies and the tests it runs end too)
    started = time.time()
    survived = []
    pool = ThreadPoolExecutor(len(made))
    try:
        for site, killed in pool.map(run, todo):
            if not killed:
                survived.append({"site": list(site), "line": lines[site[1] - 1].strip()})
                print(f"survived {site[0]:8s} line {site[1]:4d}: {lines[site[1] - 1].strip()}", flush=True)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # (interrupted: no mutant starts after this)
        for child in list(running):
            _end(child)
        pool.shutdown(wait=True)
        for d in made:
            shutil.rmtree(d, ignore_errors=True)
    print(f"{args.module}: {len(todo)} mutants, {len(survived)} survived ({time.time() - started:.0f} s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"module": args.module, "mutants": len(todo), "survived": survived}, f, indent=1)


if __name__ == "__main__":
    main()
