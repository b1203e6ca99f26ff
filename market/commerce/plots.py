"""Model-card images, rendered on the server from a global model's platform-measured metrics (PNG bytes)."""

import io

import numpy as np


def _figure():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import (
        Figure,  # a Figure without pyplot keeps no global state between requests
    )

    return Figure(figsize=(4.2, 3.6), dpi=100)


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight")
    return buffer.getvalue()


def confusion_matrix_png(matrix: list[list[int]], class_labels: list[str]) -> bytes:
    """Counts of (true class, predicted class) on the evaluation split, as a labelled heat map."""
    counts = np.asarray(matrix, dtype=np.int64)
    figure = _figure()
    axes = figure.add_subplot()
    axes.imshow(counts, cmap="Blues")
    ticks = np.arange(len(class_labels))
    axes.set_xticks(ticks, labels=class_labels, rotation=45 if len(class_labels) > 4 else 0)
    axes.set_yticks(ticks, labels=class_labels)
    axes.set_xlabel("Predicted class")
    axes.set_ylabel("True class")
    threshold = counts.max() / 2 if counts.size else 0
    if len(class_labels) <= 12:
        for (row, column), count in np.ndenumerate(counts):
            axes.text(
                column,
                row,
                str(count),
                ha="center",
                va="center",
                color="white" if count > threshold else "black",
            )
    axes.set_title("Confusion matrix (evaluation split)")
    return _png(figure)


def reliability_png(reliability: dict) -> bytes:
    """Accuracy against mean confidence per confidence bin; a calibrated model lies on the diagonal."""
    figure = _figure()
    axes = figure.add_subplot()
    edges = np.asarray(reliability.get("bin_edges", [0.0, 1.0]), dtype=float)
    accuracy = np.asarray(reliability.get("accuracy", []), dtype=float)
    confidence = np.asarray(reliability.get("confidence", []), dtype=float)
    counts = np.asarray(reliability.get("count", []), dtype=float)
    filled = counts > 0 if counts.size else np.ones_like(accuracy, dtype=bool)
    widths = np.diff(edges)[: len(accuracy)]
    axes.bar(
        edges[:-1][: len(accuracy)][filled],
        accuracy[filled],
        width=widths[filled],
        align="edge",
        edgecolor="#1f4e79",
        color="#9dc3e6",
        label="Accuracy",
    )
    axes.plot(confidence[filled], accuracy[filled], "o", color="#1f4e79", label="Mean confidence")
    axes.plot([0, 1], [0, 1], "--", color="grey", label="Perfect calibration")
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1)
    axes.set_xlabel("Predicted probability of the chosen class")
    axes.set_ylabel("Fraction correct")
    axes.set_title("Reliability (evaluation split)")
    axes.legend(loc="upper left", fontsize="small")
    return _png(figure)
