"""``audition migrate``: rewrite a Ray Tune script's imports to audition's, keeping everything else.

Pure text-to-text: the source is parsed with :mod:`ast` only to find *where* the
``ray`` imports, ``ray.init()``/``ray.shutdown()`` calls and ``ray.tune.X``
chains are; those spans are replaced and every other byte (formatting,
comments) is kept.  What has no audition counterpart is left as it was and
listed in :attr:`Migration.warnings` with its line, so a user knows exactly
what to port by hand.  Which names exist in audition is asked of an injected
``has_name`` (the CLI imports the target modules).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field

# Ray module -> audition module (Ray's public paths that Tune users import).
MODULES: dict[str, str] = {
    "ray.tune": "actors",
    "ray.train": "actors",
    "ray.air": "actors",
    "ray.air.config": "actors",
    "ray.tune.tuner": "actors",
    "ray.tune.tune_config": "actors",
    "ray.tune.result_grid": "actors",
    "ray.tune.trainable": "actors",
    "ray.tune.callback": "actors",
    "ray.tune.logger": "actors",
    "ray.tune.tune": "actors",  # run (the classic API)
    "ray.tune.analysis": "actors",  # ExperimentAnalysis
    "ray.tune.analysis.experiment_analysis": "actors",
    "ray.tune.schedulers": "actors.schedulers",
    "ray.tune.schedulers.async_hyperband": "actors.schedulers",
    "ray.tune.schedulers.hyperband": "actors.schedulers",
    "ray.tune.schedulers.median_stopping_rule": "actors.schedulers",
    "ray.tune.schedulers.pbt": "actors.schedulers",
    "ray.tune.schedulers.pb2": "actors.schedulers.pb2",
    "ray.tune.schedulers.hb_bohb": "actors.schedulers.hb_bohb",
    "ray.tune.schedulers.resource_changing_scheduler": "actors.schedulers.resource_changing_scheduler",
    "ray.tune.schedulers.trial_scheduler": "actors.schedulers",
    "ray.tune.search": "actors.search",
    "ray.tune.search.sample": "actors.search",
    "ray.tune.search.searcher": "actors.search",
    "ray.tune.search.concurrency_limiter": "actors.search",
    "ray.tune.search.repeater": "actors.search",
    "ray.tune.search.basic_variant": "actors.search.basic_variant",
    "ray.tune.search.optuna": "actors.search.optuna",
    "ray.tune.search.hyperopt": "actors.search.hyperopt",
    "ray.tune.search.bayesopt": "actors.search.bayesopt",
    "ray.tune.search.zoopt": "actors.search.zoopt",
    "ray.tune.search.nevergrad": "actors.search.nevergrad",
    "ray.tune.search.bohb": "actors.search.bohb",
    "ray.tune.stopper": "actors.stopper",
    "ray.tune.result": "actors.result",
    "ray.tune.experiment": "actors.experiment",  # Trial, in plugins
    "ray.tune.experiment.trial": "actors.experiment",
    "ray.tune.utils.mock_trainable": "actors.mock_trainable",
    "ray.tune.utils": "actors.utils",  # validate_save_restore, flatten_dict, ...
    "ray.tune.utils.util": "actors.utils",
    "ray.tune.execution.placement_groups": "actors",  # PlacementGroupFactory
    "ray.tune.integration.xgboost": "actors.integration.xgboost",
    "ray.tune.integration.lightgbm": "actors.integration.lightgbm",
    "ray.tune.integration.pytorch_lightning": "actors.integration.pytorch_lightning",
    "ray.tune.integration.keras": "actors.integration.keras",
    "ray.air.integrations.mlflow": "actors.integration.mlflow",
    "ray.air.integrations.wandb": "actors.integration.wandb",
    "ray.air.integrations.comet": "actors.integration.comet",
    "ray.air.session": "actors.session",  # (Ray 2.0-2.6 scripts: session.report)
    "ray.train.xgboost": "actors.integration.xgboost",  # RayTrainReportCallback (its trainers are Ray Train's)
    "ray.train.lightgbm": "actors.integration.lightgbm",
}

# ray.<fn>() statements that declare (or forget) this machine's resources for the runs that follow: audition's
# init()/shutdown() of the same names do that (Tuner.fit() starts and stops its own actors)
INIT_CALLS = ("init", "shutdown")

HasName = Callable[[str, str], bool]


@dataclass(frozen=True)
class MigrationWarning:
    """One ``ray`` name the rewrite could not map (left in the output unchanged)."""

    line: int
    name: str
    why: str


@dataclass
class Migration:
    """The rewritten text, what changed and what could not be mapped."""

    text: str
    changes: int
    warnings: list[MigrationWarning] = field(default_factory=list)


@dataclass(frozen=True)
class _Edit:
    start: int  # character offsets into the source
    end: int
    text: str


class _Source:
    """Character offsets for ast's (line, UTF-8 byte column) positions."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, line: int, col: int) -> int:
        raw = self.lines[line - 1].encode("utf-8")[:col] if line <= len(self.lines) else b""
        return self.starts[line - 1] + len(raw.decode("utf-8", errors="replace"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self.offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                self.offset(node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]

    def segment(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.text[start:end]

    def starts_line(self, node: ast.stmt) -> bool:
        return not self.lines[node.lineno - 1][: node.col_offset].strip()

    def indent(self, node: ast.stmt) -> str:
        line = self.lines[node.lineno - 1]
        return line[: len(line) - len(line.lstrip())]


def _name_of(chain: list[ast.AST]) -> str:
    root = chain[0]
    assert isinstance(root, ast.Name)
    return ".".join([root.id, *(n.attr for n in chain[1:] if isinstance(n, ast.Attribute))])


def _is_ray(module: str | None) -> bool:
    return module is not None and (module == "ray" or module.startswith("ray."))


class _Migrator:
    def __init__(self, source: str, has_name: HasName) -> None:
        self.src = _Source(source)
        self.tree = ast.parse(source)
        self.has_name = has_name
        self.edits: list[_Edit] = []
        self.warnings: list[MigrationWarning] = []
        self.parents: dict[ast.AST, ast.AST] = {}
        for parent in ast.walk(self.tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent
        self.ray_bound = False  # `import ray` or `import ray.tune` bound the name ray
        self.ray_left = False  # a ray.X use stays (unmapped), so `import ray` must stay too
        self.actors_names: dict[str, str] = {}  # local name -> audition module it now is (import actors as tune)
        self.needed: set[str] = set()  # audition modules that ray.tune.X chains now need imported

    def warn(self, node: ast.AST, name: str, why: str) -> None:
        self.warnings.append(MigrationWarning(getattr(node, "lineno", 0), name, why))

    def replace(self, node: ast.AST, text: str) -> None:
        start, end = self.src.span(node)
        self.edits.append(_Edit(start, end, text))

    def run(self) -> Migration:
        imports_of_ray: list[ast.Import] = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ImportFrom) and _is_ray(node.module) and node.level == 0:
                self.import_from(node)
            elif isinstance(node, ast.Import) and any(_is_ray(a.name) for a in node.names):
                imports_of_ray.append(node)
                for alias in node.names:
                    if _is_ray(alias.name) and alias.asname is None:
                        self.ray_bound = True
                    elif _is_ray(alias.name) and alias.name in MODULES:
                        self.actors_names[alias.asname or ""] = MODULES[alias.name]
        self.uses()
        for node in imports_of_ray:
            self.plain_import(node)
        self.warnings.sort(key=lambda w: w.line)
        text = self.src.text
        for edit in sorted(self.edits, key=lambda e: e.start, reverse=True):
            text = text[: edit.start] + edit.text + text[edit.end:]
        return Migration(text, len(self.edits), self.warnings)

    # ------------------------------------------------------------------ from ray... import ...
    def import_from(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        target = MODULES.get(module)
        pieces: list[str] = []  # statements replacing this one, if it must be rebuilt
        same: list[str] = []  # names that stay in `from <target> import ...`
        kept: list[str] = []  # names left importing from Ray (unmapped)
        for alias in node.names:
            spelled = alias.name + (f" as {alias.asname}" if alias.asname else "")
            submodule = MODULES.get(f"{module}.{alias.name}")
            if submodule is not None:
                pieces.append(f"import {submodule} as {alias.asname or alias.name}")
                self.actors_names[alias.asname or alias.name] = submodule
            elif target is not None and (alias.name == "*" or self.has_name(target, alias.name)):
                same.append(spelled)
            else:
                kept.append(spelled)
                where = f"{module}.{alias.name}"
                self.warn(node, where, f"no audition counterpart ({target or 'module not mapped'}); "
                          "see docs/coming-from-ray.md, or port this by hand")
        if not pieces and not kept and target is not None:
            match = re.match(r"from\s+([\w.\s\\]+?)\s+import\b", self.src.segment(node))
            if match is None:  # not reachable for code ast parsed; keep it rather than guess
                self.warn(node, module, "could not locate the module name in this import")
                return
            start = self.src.offset(node.lineno, node.col_offset) + match.start(1)
            self.edits.append(_Edit(start, start + len(match.group(1)), target))
            return
        if same and target is not None:
            pieces.append(f"from {target} import {', '.join(same)}")
        if kept:
            pieces.append(f"from {module} import {', '.join(kept)}")
        glue = "\n" + self.src.indent(node) if self.src.starts_line(node) else "; "
        self.replace(node, glue.join(pieces))

    # ------------------------------------------------------------------ uses of ray / tune names
    def uses(self) -> None:
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.Name):
                continue
            if node.id == "ray" and self.ray_bound:
                self.ray_use(node)
            elif node.id in self.actors_names and isinstance(self.parents.get(node), ast.Attribute):
                attr = self.parents[node]
                assert isinstance(attr, ast.Attribute)
                module = self.actors_names[node.id]
                if not self.has_name(module, attr.attr):
                    self.warn(node, f"{node.id}.{attr.attr}",
                              f"{module} has no {attr.attr!r}; see docs/coming-from-ray.md")

    def ray_use(self, name: ast.Name) -> None:
        chain: list[ast.AST] = [name]
        node: ast.AST = name
        while isinstance(self.parents.get(node), ast.Attribute):
            node = self.parents[node]
            chain.append(node)
        real = _name_of(chain).split(".")
        for size in range(len(real), 1, -1):
            target = MODULES.get(".".join(real[:size]))
            if target is None:
                continue
            if size < len(real) and not self.has_name(target, real[size]):
                self.ray_left = True
                self.warn(name, ".".join(real[: size + 1]), f"{target} has no {real[size]!r}; "
                          "see docs/coming-from-ray.md")
                return
            self.replace(chain[size - 1], target)  # the node that spells ray.<module>
            self.needed.add(target)
            return
        if len(real) == 2 and real[1] in INIT_CALLS and self.init_call(chain[1]):
            return
        if len(real) == 2 and real[1] == "is_initialized":
            self.replace(chain[1], "actors.is_initialized")
            self.needed.add("actors")
            return
        self.ray_left = True
        self.warn(name, ".".join(real[:2]), "no audition counterpart; see docs/coming-from-ray.md, "
                  "or port this by hand")

    def init_call(self, func: ast.AST) -> bool:
        """``ray.init(...)``/``ray.shutdown()`` as a statement: audition's of the same name, with the same
        arguments (``ray.init`` returns Ray's context, which audition has not: a use of it is left, named)."""
        call = self.parents.get(func)
        statement = self.parents.get(call) if isinstance(call, ast.Call) and call.func is func else None
        if not isinstance(statement, ast.Expr):
            return False
        assert isinstance(func, ast.Attribute)
        self.replace(func, f"actors.{func.attr}")
        self.needed.add("actors")
        return True

    # ------------------------------------------------------------------ import ray / import ray.tune as x
    def plain_import(self, node: ast.Import) -> None:
        pieces: list[str] = []
        original: list[str] = []
        for alias in node.names:
            spelled = alias.name + (f" as {alias.asname}" if alias.asname else "")
            original.append(f"import {spelled}")
            if not _is_ray(alias.name) or (alias.asname is None and self.ray_left):
                pieces.append(f"import {spelled}")
            elif alias.asname:
                target = MODULES.get(alias.name)
                if target is None:
                    self.warn(node, alias.name, "no audition counterpart; see docs/coming-from-ray.md")
                    pieces.append(f"import {spelled}")
                else:
                    pieces.append(f"import {target} as {alias.asname}")
            if alias.asname is None and _is_ray(alias.name) and self.needed:
                pieces.append("import " + ", ".join(sorted(self.needed)))  # ray.tune.X chains now read actors.X
                self.needed = set()
        if pieces == original:
            return  # nothing of Ray's to change here
        parent = self.parents.get(node)
        body: list[ast.stmt] = next((getattr(parent, f) for f in ("body", "orelse", "finalbody", "handlers")
                     if node in getattr(parent, f, [])), [])
        if not pieces:
            pieces = ["pass  # audition migrate: import ray removed"] if len(body) == 1 else []
        if pieces:
            glue = "\n" + self.src.indent(node) if self.src.starts_line(node) else "; "
            self.replace(node, glue.join(pieces))
        else:
            self.delete_statement(node)

    def delete_statement(self, node: ast.stmt) -> None:
        """Remove a statement, and its line if nothing else is on it."""
        start, end = self.src.span(node)
        line_start = self.src.starts[node.lineno - 1]
        line_end = self.src.starts[node.end_lineno or node.lineno]
        rest = self.src.text[end:line_end]
        if self.src.starts_line(node) and (not rest.strip() or rest.strip().startswith("#")):
            self.edits.append(_Edit(line_start, line_end, ""))
        else:
            self.edits.append(_Edit(start, end, "pass"))


def migrate(source: str, has_name: HasName) -> Migration:
    """Rewrite ``source``'s Ray imports to audition's; ``SyntaxError`` if it is not valid Python."""
    return _Migrator(source, has_name).run()
