"""The shape check every binary decision tree must pass, whatever format it came in."""

from __future__ import annotations

import numpy as np

from workers.modelio.base import refuse

LEAF = -1


def check_binary_tree(
    left: np.ndarray,
    right: np.ndarray,
    *,
    where: str,
    max_depth: int,
    parents: np.ndarray | None = None,
    root_parent: int | None = None,
) -> int:
    """Depth of the tree rooted at node 0, refused unless it is a proper tree.

    ``left[i]`` and ``right[i]`` are node indices, or -1 for both when node ``i`` is a leaf.
    Every node must be reachable from the root exactly once (no cycle, no node with two parents,
    no detached node), and, where ``parents`` is given, ``parents[i]`` must name the node whose
    child ``i`` is (``root_parent`` for the root).
    """
    n_nodes = len(left)
    is_leaf = left == LEAF
    if np.any(is_leaf != (right == LEAF)):
        node = int(np.flatnonzero(is_leaf != (right == LEAF))[0])
        raise refuse(f"{where}: node {node} has one child; a node has two children or none.")
    children = np.concatenate([left[~is_leaf], right[~is_leaf]])
    if children.size and (children.min() < 0 or children.max() >= n_nodes):
        bad = int(children[(children < 0) | (children >= n_nodes)][0])
        raise refuse(
            f"{where}: a node points to child {bad}, but the tree has only {n_nodes} nodes."
        )
    depth = _walk(left, right, is_leaf, where=where, max_depth=max_depth)
    if parents is not None:
        _check_parents(left, right, is_leaf, parents, root_parent, where=where)
    return depth


def _walk(
    left: np.ndarray, right: np.ndarray, is_leaf: np.ndarray, *, where: str, max_depth: int
) -> int:
    n_nodes = len(left)
    visited = np.zeros(n_nodes, dtype=bool)
    on_path = np.zeros(n_nodes, dtype=bool)
    stack = [(0, 0, False)]
    deepest = 0
    while stack:
        node, depth, leaving = stack.pop()
        if leaving:
            on_path[node] = False
            continue
        if on_path[node]:
            raise refuse(f"{where}: node {node} is its own ancestor; the tree has a cycle.")
        if visited[node]:
            raise refuse(f"{where}: node {node} has two parents; every node must have exactly one.")
        if depth > max_depth:
            raise refuse(f"{where} is deeper than {max_depth} levels; the limit is {max_depth}.")
        visited[node] = True
        deepest = max(deepest, depth)
        if not is_leaf[node]:
            on_path[node] = True
            stack += [
                (node, depth, True),
                (int(right[node]), depth + 1, False),
                (int(left[node]), depth + 1, False),
            ]
    if not visited.all():
        node = int(np.flatnonzero(~visited)[0])
        raise refuse(f"{where}: node {node} cannot be reached from the root; the tree is damaged.")
    return deepest


def _check_parents(left, right, is_leaf, parents, root_parent, *, where: str) -> None:
    expected = np.full(len(left), root_parent, dtype=np.int64)
    internal = np.flatnonzero(~is_leaf)
    expected[left[internal]] = internal
    expected[right[internal]] = internal
    mismatch = np.flatnonzero(expected != parents)
    if mismatch.size:
        node = int(mismatch[0])
        raise refuse(
            f"{where}: node {node} names node {int(parents[node])} as its parent, but its parent is "
            f"node {int(expected[node])}."
        )
