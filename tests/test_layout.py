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
