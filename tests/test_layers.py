"""The package's shape: folders are layers, each importing only from the layers below it.

Checked statically over every module of ``src/localpriv``: no import of a localpriv module inside a
function or class body, no import upward or sideways between layers, and no import cycle.
"""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "localpriv"

#: layer of each top-level folder or module; a module may import from lower layers and from its own
#: folder. ``__init__`` of the package is the facade (it loads the public names on first use).
LAYERS = {
    "utils": 0,
    "domains": 1,
    "likelihood": 2,
    "mechanisms": 3,
    "data": 4,
    "estimators": 5,
    "inference": 6,
    "testing": 7, "analysis": 7, "multiattr": 7, "heavy_hitters": 7,
    "advice": 8,
    "service": 9,
    "cli": 10,
    "extras": 11,
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _target(module: str, node: ast.ImportFrom | ast.Import) -> list[str]:
    """The localpriv modules an import statement loads (a name imported from a package counts as
    its submodule when there is one)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "localpriv"]
    if node.level:
        base = module.split(".")
        if not str(MODULES[module]).endswith("__init__.py"):
            base = base[:-1]
        base = base[:len(base) - node.level + 1]
        mod = ".".join(base + ([node.module] if node.module else []))
    else:
        mod = node.module or ""
    if mod.split(".")[0] != "localpriv":
        return []
    return [f"{mod}.{a.name}" if f"{mod}.{a.name}" in MODULES else mod for a in node.names]


def _imports():
    """(module, imported module, line, at top level?) for every import of a localpriv module."""
    rows = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))

        def visit(node, nested, module=module):
            for child in ast.iter_child_nodes(node):
                inner = nested or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    for target in _target(module, child):
                        rows.append((module, target, child.lineno, not nested))
                visit(child, inner)

        visit(tree, False)
    return rows


IMPORTS = _imports()


def _layer(module: str) -> tuple[str, int] | None:
    parts = module.split(".")
    if len(parts) < 2:
        return None  # the facade
    top = parts[1]
    if top not in LAYERS:
        raise AssertionError(f"{module}: folder {top!r} has no layer; add it to LAYERS")
    return top, LAYERS[top]


def test_every_module_has_a_layer():
    for module in MODULES:
        _layer(module)


def test_no_import_of_our_modules_inside_functions():
    nested = [f"{m}:{line} imports {t}" for m, t, line, top in IMPORTS
              if not top and m != "localpriv"]
    assert not nested, "\n".join(nested)


def test_imports_go_down_the_layers():
    bad = []
    for module, target, line, _ in IMPORTS:
        src, dst = _layer(module), _layer(target)
        if src is None or dst is None:
            if dst is None and src is not None:
                bad.append(f"{module}:{line} imports the package facade ({target})")
            continue
        if src[0] != dst[0] and src[1] <= dst[1]:
            bad.append(f"{module}:{line} ({src[0]}) imports {target} ({dst[0]})")
    assert not bad, "\n".join(bad)


def test_no_import_cycle():
    graph = defaultdict(set)
    for module, target, _, top in IMPORTS:
        if module != target and top:
            graph[module].add(target)
    state: dict[str, int] = {}
    cycles = []

    def dfs(node, stack):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                dfs(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            dfs(node, [])
    assert not cycles, "\n".join(cycles[:20])


def test_no_private_names_imported_from_other_modules():
    """What another module uses is public: ``from localpriv.x import _name`` is refused (private
    modules, such as compiled kernels, may be imported by their own folder)."""
    bad = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and _target(module, node):
                folder = module if MODULES[module].name == "__init__.py" else module.rsplit(".", 1)[0]
                for alias in node.names:
                    sub = f"{_target(module, node)[0].rsplit('.', 1)[0]}.{alias.name}"
                    if (alias.name.startswith("_") and not alias.name.startswith("__")
                            and not (sub in MODULES and sub.rsplit(".", 1)[0] == folder)):
                        bad.append(f"{module}:{node.lineno} imports {alias.name}")
    for module, target, line, _ in IMPORTS:
        leaf = target.rsplit(".", 1)[-1]
        if leaf.startswith("_") and leaf != "__init__" and target.rsplit(".", 1)[0] != module.rsplit(".", 1)[0]:
            bad.append(f"{module}:{line} imports the private module {target}")
    assert not bad, "\n".join(bad)
