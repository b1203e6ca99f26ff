"""The contribution values' bar chart, drawn by the server as SVG (no script, readable at 390 px): one bar per silo
from zero to its value, and where the estimator sampled, a whisker of ± two standard errors (about 95 %)."""

ROW_HEIGHT = 24
LABEL_WIDTH = 170
PLOT_WIDTH = 300
MARGIN = 70  # room for the value printed right of the largest whisker


def contribution_value_bars(rows: list[dict]) -> dict:
    """The chart's geometry for :func:`market.jobs.visibility.named_contribution_values`'s rows (in SVG units)."""
    values = [row["balanced_accuracy"] or 0.0 for row in rows]
    whiskers = [2 * (row.get("standard_error") or 0.0) for row in rows]
    low = min([0.0] + [value - whisker for value, whisker in zip(values, whiskers)])
    high = max([0.0] + [value + whisker for value, whisker in zip(values, whiskers)])
    span = (high - low) or 1.0

    def x(value: float) -> float:
        return round(LABEL_WIDTH + (value - low) / span * PLOT_WIDTH, 2)

    bars = [
        {
            "organisation": row["organisation"],
            "value": value,
            "y": index * ROW_HEIGHT,
            "x": min(x(0.0), x(value)),
            "width": abs(x(value) - x(0.0)),
            "negative": value < 0,
            "whisker": (x(value - whisker), x(value + whisker)) if whisker else None,
            "label_x": max(x(value + whisker), x(0.0)) + 4,
        }
        for index, (row, value, whisker) in enumerate(zip(rows, values, whiskers))
    ]
    return {
        "bars": bars,
        "zero": x(0.0),
        "width": LABEL_WIDTH + PLOT_WIDTH + MARGIN,
        "height": len(rows) * ROW_HEIGHT + 4,
        "label_width": LABEL_WIDTH,
    }
