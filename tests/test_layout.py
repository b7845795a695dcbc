"""The package is layered by pipeline stage (ARCHITECTURE.md): a module imports only from its own
stage or from stages below it, never from a later one."""

import ast
from pathlib import Path

import drkit

# Lowest first. A module's stage is its subpackage; top-level modules are named explicitly.
STAGES = ["errors", "util", "data", "index", "dense", "reason", "reader", "qa", "serve", "experiments", "cli"]
PACKAGE = Path(drkit.__file__).parent


def stage_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "drkit":
        return None
    if len(parts) == 1:
        return "root"
    return parts[1] if parts[1] in STAGES else ("cli" if parts[1] == "__main__" else None)


def imported_modules(path: Path, module: str) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the importing module's package
                base = module.split(".")[: -node.level] if not path.name == "__init__.py" else module.split(".")[: len(module.split(".")) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.append((node.lineno, name))
    return found


def test_every_module_belongs_to_a_stage():
    for path in PACKAGE.rglob("*.py"):
        module = "drkit." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        module = module.removesuffix(".__init__")
        assert stage_of(module) is not None, f"{path} is in no stage of ARCHITECTURE.md"


def test_imports_point_down_the_stages():
    bad = []
    for path in PACKAGE.rglob("*.py"):
        module = "drkit." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        module = module.removesuffix(".__init__")
        own = stage_of(module)
        if own == "root":
            continue  # drkit/__init__.py: version and the lazily imported front door
        for line, name in imported_modules(path, module):
            target = stage_of(name)
            if target in (None, "root"):
                continue
            if STAGES.index(target) > STAGES.index(own):
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {own} imports {name} ({target})")
    assert not bad, "imports that point up the stages:\n" + "\n".join(bad)


def test_the_rule_catches_an_upward_import(tmp_path):
    """The checker itself: an index module importing the model is flagged."""
    path = tmp_path / "sparse.py"
    path.write_text("from drkit.reason.model import MultiHopModel\nfrom ..data import kb\n")
    names = [n for _, n in imported_modules(path, "drkit.index.sparse")]
    assert names == ["drkit.reason.model", "drkit.data"]
    assert STAGES.index(stage_of(names[0])) > STAGES.index("index")


def test_no_private_name_is_imported_across_modules():
    """A name with a leading underscore is private to its module: no other module imports it."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("drkit")):
                offenders += [f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.module}.{a.name}"
                              for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    assert not offenders, offenders


def runtime_imports(path: Path, module: str) -> list[tuple[int, str]]:
    """`imported_modules` less those under ``if TYPE_CHECKING:`` (names for annotations, never imported)."""
    tree = ast.parse(path.read_text(), str(path))
    typing_only = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            typing_only |= {n.lineno for stmt in node.body for n in ast.walk(stmt)
                            if isinstance(n, (ast.Import, ast.ImportFrom))}
    return [(line, name) for line, name in imported_modules(path, module) if line not in typing_only]


def module_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """For every module of drkit, the other drkit modules of its own subpackage it imports, at the top or inside a
    function (a lazy import is still a dependency; one for annotations only is not)."""
    modules = {}
    for path in package.rglob("*.py"):
        module = "drkit." + ".".join(path.relative_to(package).with_suffix("").parts)
        modules[module.removesuffix(".__init__")] = path
    graph = {}
    for module, path in modules.items():
        sub = module.split(".")[:2]
        graph[module] = {name for _, name in runtime_imports(path, module)
                         if name in modules and name != module and name.split(".")[:2] == sub and len(sub) == 2}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected group of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_circle_of_imports_inside_a_package():
    """Inside a subpackage too, a module imports only from modules below it: the imports, lazy ones included,
    form no circle (e.g. the index's live view has one home, drkit.index.live, below both the loader and the
    updater)."""
    assert not cycles(module_graph()), cycles(module_graph())


def test_the_circle_check_catches_a_circle(tmp_path):
    pkg = tmp_path / "drkit"
    (pkg / "index").mkdir(parents=True)
    (pkg / "index" / "a.py").write_text("from drkit.index.b import x\n")
    (pkg / "index" / "b.py").write_text("def f():\n    from drkit.index.a import y\n")
    (pkg / "index" / "c.py").write_text("from typing import TYPE_CHECKING\nfrom drkit.index.a import x\n"
                                         "if TYPE_CHECKING:\n    from drkit.index.d import T\n")
    (pkg / "index" / "d.py").write_text("from drkit.index.c import x\n")  # c -> d is for annotations only
    assert cycles(module_graph(pkg)) == [["drkit.index.a", "drkit.index.b"]]
