"""The package's imports point only downward (docs/architecture.md): no cycle, no upward edge,
and importing one module loads only the modules below it."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "django_advisory_cron"
NAME = PACKAGE.name

#: Each top-level module's or subpackage's layer (docs/architecture.md). A module may import
#: from its own layer or below; ``models`` imports only ``core.statuses``, and anything may
#: import it.
LAYERS = {
    "conf": 0,
    "exceptions": 0,
    "exitcodes": 0,
    "signals": 0,
    "core": 0,  # what a job is and when it is due: no database
    "db": 1,  # the wire: connections, statements, deadlines, pooling
    "lock": 2,  # advisory locks and their heartbeat
    "run": 3,  # one run from claim to finish
    "delivery": 4,  # the seam to task queues, and the claim-then-send
    "jobs": 5,  # what a job is and where jobs come from: Job, definitions, the catalog
    "worker": 6,  # cronworker
    "ops": 7,  # what operators read and say: status, held locks, metrics, pause, run now
}
TOP = 8  # what users touch: admin, views, urls, checks, commands, contrib, testing


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Modules of the package that ``path`` imports, anywhere in it (functions included)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith(NAME)}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if not base.startswith(NAME):
                continue
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                is_module = (PACKAGE.parent / candidate.replace(".", "/")).with_suffix(".py")
                found.add(candidate if is_module.exists() else base)
    found.discard(name)
    return found


def layer(module: str) -> int:
    short = module.removeprefix(f"{NAME}.")
    if short == "core.statuses":
        return -2  # below the models, which store its values
    if short == "models":
        return -1
    return LAYERS.get(short.split(".")[0], TOP)


def graph() -> dict[str, set[str]]:
    modules = {
        module_name(path): path
        for path in PACKAGE.rglob("*.py")
        if ("migrations" not in path.parts and path.name != "__init__.py") or path.parent == PACKAGE
    }
    return {name: imports_of(path) for name, path in modules.items() if name != NAME}


def test_every_import_points_downward() -> None:
    upward = [
        f"{module} (layer {layer(module)}) imports {target} (layer {layer(target)})"
        for module, targets in graph().items()
        for target in targets
        if target != NAME and layer(target) > layer(module)
    ]
    assert upward == []


def test_the_lock_imports_nothing_of_the_run_the_jobs_the_worker_or_delivery() -> None:
    """A holder only knows where the lock lives: the run composes its statements."""
    users = ("run", "jobs", "worker", "delivery")
    above = {
        f"{module} imports {target}"
        for module, targets in graph().items()
        if module.startswith(f"{NAME}.lock.")
        for target in targets
        if target.startswith(tuple(f"{NAME}.{user}" for user in users))
    }
    assert above == set()


def test_models_import_only_the_statuses() -> None:
    """Like ``contrib.sessions``' models: nothing of the layers that use them."""
    assert imports_of(PACKAGE / "models.py") == {f"{NAME}.core.statuses"}


def test_the_import_graph_has_no_cycle() -> None:
    edges = {module: {t for t in targets if t != NAME} for module, targets in graph().items()}
    visiting: set[str] = set()
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in done:
            return
        assert module not in visiting, " -> ".join([*path, module])
        visiting.add(module)
        for target in edges.get(module, ()):
            visit(target, [*path, module])
        visiting.discard(module)
        done.add(module)

    for module in edges:
        visit(module, [])


@pytest.mark.parametrize(
    "module",
    ["conf", "core.schedule", "db.sql", "lock.advisory", "run.history", "delivery.handover"],
)
def test_importing_one_module_loads_only_the_modules_below_it(module: str) -> None:
    code = (
        f"import json, sys; import django_advisory_cron.{module}; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('django_advisory_cron.'))))"
    )
    loaded = json.loads(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
    )
    own = layer(f"{NAME}.{module}")
    above = [name for name in loaded if layer(name) > own]
    assert above == [], f"importing {module} loaded {above}"
    assert f"{NAME}.models" not in loaded


def test_every_module_lives_in_a_layer_folder() -> None:
    """The folder list is the architecture: only the package's entry points stay at the top."""
    top = sorted(path.stem for path in PACKAGE.glob("*.py") if path.stem != "__init__")
    assert top == [
        "apps",
        "conf",
        "exceptions",
        "exitcodes",
        "models",
        "signals",
        "urls",
        "views",
    ]


def _code_strings(path: Path) -> list[str]:
    """The string constants of ``path`` that are not docstrings."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def test_no_module_outside_a_target_and_the_seam_names_a_target() -> None:
    """A delivery target is its folder (``contrib/<target>/``) and the one line that lists it
    in the seam: no other module imports the folder, and a module that deals with delivery
    (it imports the seam) asks the target, never picks one by its scheme."""
    from django_advisory_cron.delivery import targets

    folders = {
        target.scheme: type(target.deliverer).__module__.rpartition(".")[0]
        for target in targets.registered()
    }
    assert set(folders) >= {"tasks", "celery"}
    named = []
    for module, imported in graph().items():
        path = PACKAGE.parent / (module.replace(".", "/") + ".py")
        delivers = any(target.startswith(f"{NAME}.delivery") for target in imported)
        for scheme, folder in folders.items():
            if module.startswith((folder, f"{NAME}.delivery")):
                continue
            named += [f"{module} imports {t}" for t in imported if t.startswith(folder)]
            if delivers:
                named += [
                    f"{module} names {text!r}"
                    for text in _code_strings(path)
                    if text == scheme or text.startswith(f"{scheme}:")
                ]
    assert named == []
