"""The pure core (everything in workers/ but the worker entry point — the Celery app, its tasks and the Django app
that loads them — and the runner and worker sides they call) never imports the market."""

import ast
from pathlib import Path

WORKERS = Path(__file__).resolve().parents[2] / "workers"
ENTRY_POINTS = {WORKERS / "apps.py", WORKERS / "celery_app.py", WORKERS / "tasks.py"}
# the worker sides of the other background work, beside the runner: they call market services too
WORKER_SIDES = {
    WORKERS / "submission_validation.py",
    WORKERS / "augmentation_training.py",
    WORKERS / "exchange_aggregation.py",
}
RUNNER = (
    WORKERS / "runner"
)  # the worker side's orchestration: it calls market services (docs/architecture.md)
FORBIDDEN = ("django", "rest_framework", "celery", "kombu", "market", "frontend")


def imported_top_level_names(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


CORE_MODULES = sorted(
    path
    for path in WORKERS.rglob("*.py")
    if path not in ENTRY_POINTS | WORKER_SIDES and RUNNER not in path.parents
)


def test_no_core_module_imports_anything_from_the_market():
    offenders = {
        str(path.relative_to(WORKERS)): sorted(imported_top_level_names(path) & set(FORBIDDEN))
        for path in CORE_MODULES
    }
    assert {path: names for path, names in offenders.items() if names} == {}
    assert len(CORE_MODULES) > 50  # the rule read the whole core
