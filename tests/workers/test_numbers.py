"""One rule for numbers people read (workers.numbers), the same on pages, notices and e-mails."""

from decimal import Decimal

from workers.numbers import (
    credits_text,
    epsilon_text,
    percent_text,
    plain_number,
    points_number,
    without_float_noise,
)


def test_epsilon_keeps_three_significant_figures():
    assert [
        epsilon_text(value)
        for value in (5.3256670288303765, Decimal("10.000000"), 0.000123456, 1234.5, None, 0)
    ] == ["5.33", "10", "0.000123", "1,230", "—", "0"]


def test_credits_are_never_cents():
    assert [credits_text(value) for value in (-1234, 0, 123456, None)] == [
        "−12.34",
        "0.00",
        "1,234.56",
        "—",
    ]


def test_metrics_are_percentages_with_one_decimal():
    assert [percent_text(value) for value in (0.7675000000000001, 0.559, 1, None)] == [
        "76.8 %",
        "55.9 %",
        "100.0 %",
        "—",
    ]


def test_differences_of_metrics_are_signed_percentage_points_with_one_decimal():
    """Contribution values (issue 43: they read "0.0150 ± 0.0016" where every other score is a percentage)."""
    assert [points_number(value) for value in (0.0612, -0.0137, 0.0, None)] == [
        "+6.1",
        "-1.4",
        "+0.0",
        "—",
    ]


def test_prefilled_values_carry_no_float_noise_nor_trailing_zeros():
    assert [
        plain_number(value) for value in (Decimal("10.000000"), 0.7675000000000001, 3, None)
    ] == [
        "10",
        "0.7675",
        "3",
        "",
    ]
    assert without_float_noise({"a": 0.7675000000000001, "b": [0.1 + 0.2, 2], "c": "x"}) == {
        "a": 0.7675,
        "b": [0.3, 2],
        "c": "x",
    }
