#!/usr/bin/env python3
"""Fail on calls that deserialise untrusted bytes into code, run strings as code, or switch CSRF off.

Reads the Python source under the given folders (default: market workers frontend) with the ``ast``
module, so comments, strings and methods that merely share a name (``model.eval()``) never match,
and import aliases (``import pickle as p; p.loads``) still do. Forbidden:

- ``pickle.load`` / ``pickle.loads`` / ``pickle.Unpickler`` (also ``_pickle``, ``dill``, ``cloudpickle``),
  ``joblib.load``;
- ``torch.load`` without ``weights_only=True``;
- ``numpy.load`` with ``allow_pickle=True``;
- ``yaml.load`` without ``Loader=SafeLoader`` / ``CSafeLoader``, and ``yaml.unsafe_load``;
- the builtins ``eval`` and ``exec``;
- ``csrf_exempt``, anywhere it is named.

A reviewed exception carries ``# forbidden-ok: <reason>`` on the offending line. Exit status 1 lists
every finding as ``path:line: message``.
"""

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

DEFAULT_ROOTS = ("market", "workers", "frontend")
PICKLE_MODULES = ("pickle", "_pickle", "cPickle", "dill", "cloudpickle")
ALWAYS_FORBIDDEN = {
    **{
        f"{module}.{name}": f"{module}.{name} runs code from the bytes it reads"
        for module in PICKLE_MODULES
        for name in ("load", "loads", "Unpickler")
    },
    "joblib.load": "joblib.load unpickles; use a safe format (ONNX, XGBoost JSON, safetensors)",
    "yaml.unsafe_load": "yaml.unsafe_load builds arbitrary objects; use yaml.safe_load",
    "eval": "eval runs a string as code",
    "exec": "exec runs a string as code",
}
SAFE_YAML_LOADERS = {"SafeLoader", "CSafeLoader", "BaseLoader"}


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    message: str

    def __str__(self):
        return f"{self.path}:{self.line}: {self.message}"


def _import_aliases(tree: ast.AST) -> dict[str, str]:
    """Local name → the dotted name it stands for, from every import in the module."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    if isinstance(node, ast.Name):
        return aliases.get(node.id, node.id)
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value, aliases)
        return f"{base}.{node.attr}" if base else None
    return None


def _keyword_is(call: ast.Call, name: str, accepted) -> bool:
    for keyword in call.keywords:
        if keyword.arg == name:
            value = keyword.value
            if isinstance(value, ast.Constant):
                return value.value in accepted
            return (isinstance(value, ast.Attribute) and value.attr in accepted) or (
                isinstance(value, ast.Name) and value.id in accepted
            )
    return False


def _call_problem(call: ast.Call, aliases: dict[str, str]) -> str | None:
    name = _dotted(call.func, aliases)
    if name is None:
        return None
    name = name.replace("numpy.", "np.", 1) if name.startswith("numpy.") else name
    if name in ALWAYS_FORBIDDEN and (
        name not in ("eval", "exec") or isinstance(call.func, ast.Name)
    ):
        return ALWAYS_FORBIDDEN[name]
    if name == "torch.load" and not _keyword_is(call, "weights_only", {True}):
        return "torch.load without weights_only=True unpickles arbitrary objects"
    if name == "np.load" and _keyword_is(call, "allow_pickle", {True}):
        return "np.load(..., allow_pickle=True) unpickles object arrays"
    if name == "yaml.load" and not _keyword_is(call, "Loader", SAFE_YAML_LOADERS):
        return "yaml.load without a safe Loader builds arbitrary objects; use yaml.safe_load"
    return None


def _names_csrf_exempt(node: ast.AST) -> bool:
    """A use (name or attribute) or an import of ``csrf_exempt``."""
    return (
        (isinstance(node, ast.Name) and node.id == "csrf_exempt")
        or (isinstance(node, ast.Attribute) and node.attr == "csrf_exempt")
        or (isinstance(node, ast.alias) and node.name.split(".")[-1] == "csrf_exempt")
    )


def findings_in_source(source: str, path: str) -> list[Finding]:
    tree = ast.parse(source, filename=path)
    aliases = _import_aliases(tree)
    lines = source.splitlines()
    found = []
    for node in ast.walk(tree):
        message = None
        if isinstance(node, ast.Call):
            message = _call_problem(node, aliases)
        elif _names_csrf_exempt(node):
            message = "csrf_exempt switches off CSRF protection"
        if message and "# forbidden-ok:" not in lines[node.lineno - 1]:
            found.append(Finding(path, node.lineno, message))
    return sorted(set(found), key=lambda finding: (finding.path, finding.line, finding.message))


def findings_under(roots: list[Path], base: Path) -> list[Finding]:
    found = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if any(part in {".venv", "__pycache__", "node_modules"} for part in path.parts):
                continue
            shown = path.relative_to(base) if path.is_relative_to(base) else path
            found += findings_in_source(path.read_text(encoding="utf-8"), str(shown))
    return found


def main(arguments: list[str]) -> int:
    base = Path(__file__).resolve().parent.parent
    roots = [base / root for root in (arguments or DEFAULT_ROOTS)]
    found = findings_under(roots, base)
    for finding in found:
        print(finding)
    if found:
        print(
            f"{len(found)} forbidden pattern(s). Use a safe format or loader; a reviewed exception needs "
            "'# forbidden-ok: <reason>' on the line.",
            file=sys.stderr,
        )
        return 1
    print(f"No forbidden patterns in {', '.join(root.name for root in roots)}.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
