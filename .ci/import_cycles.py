#!/usr/bin/env python3
"""Fail when the project's own modules import each other in a cycle (imports inside functions count too).

import-linter's contracts (.importlinter) forbid arrows between parts; this finds any cycle among the
modules of market, workers and frontend, wherever it runs, and prints each one (a strongly connected
component of the import graph that grimp, import-linter's engine, builds).
"""

import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("market", "workers", "frontend")


def import_cycles(graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, lowlink, stack, on_stack, components = {}, {}, [], set(), []
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = lowlink[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            module, successors = work[-1]
            successor = next((name for name in successors if name in graph.modules), None)
            if successor is None:
                work.pop()
                if work:
                    lowlink[work[-1][0]] = min(lowlink[work[-1][0]], lowlink[module])
                if lowlink[module] == index[module]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == module:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
            elif successor not in index:
                index[successor] = lowlink[successor] = len(index)
                stack.append(successor)
                on_stack.add(successor)
                work.append(
                    (successor, iter(sorted(graph.find_modules_directly_imported_by(successor))))
                )
            elif successor in on_stack:
                lowlink[module] = min(lowlink[module], index[successor])
    return components


def main() -> int:
    sys.path.insert(0, str(ROOT))
    cycles = import_cycles(grimp.build_graph(*PACKAGES))
    for cycle in cycles:
        print("import cycle: " + " <-> ".join(cycle))
    if cycles:
        print(
            f"{len(cycles)} import cycle(s) among the project's modules; give each concept one home.",
            file=sys.stderr,
        )
        return 1
    print("No import cycles among the modules of " + ", ".join(PACKAGES) + ".")
    return 0


if __name__ == "__main__":
    sys.exit(main())
