from hypothesis import given
from hypothesis import strategies as st

from market.commerce.revenue import market_fee_cents, revenue_shares


def test_market_fee_rounds_down_to_the_cent():
    assert market_fee_cents(price_cents=999, fee_percent=10) == 99
    assert market_fee_cents(price_cents=1000, fee_percent=0) == 0
    assert market_fee_cents(price_cents=1000, fee_percent=100) == 1000


def test_left_over_cents_go_to_the_largest_remainders():
    # 100 cents by thirds: exact shares 33.33 each; the one cent left goes to the lowest id on a tie.
    assert revenue_shares(amount_cents=100, weights={"3": 1 / 3, "1": 1 / 3, "2": 1 / 3}) == {
        "1": 34,
        "2": 33,
        "3": 33,
    }
    # 10 cents by 0.55 / 0.45: 5.5 and 4.5, a tie of remainders → the lower id gets the cent.
    assert revenue_shares(amount_cents=10, weights={"7": 0.45, "9": 0.55}) == {"7": 5, "9": 5}
    # 901 cents by 0.7 / 0.3: 630.7 and 270.3 → 631 and 270.
    assert revenue_shares(amount_cents=901, weights={"1": 0.7, "2": 0.3}) == {"1": 631, "2": 270}


def test_zero_weights_get_nothing_and_no_weights_share_nothing():
    assert revenue_shares(amount_cents=50, weights={"1": 1.0, "2": 0.0}) == {"1": 50}
    assert revenue_shares(amount_cents=50, weights={}) == {}


@given(
    amount=st.integers(min_value=0, max_value=10**10),
    weights=st.lists(st.floats(min_value=0, max_value=1, allow_nan=False), min_size=1, max_size=12),
)
def test_shares_add_up_to_the_cent_and_stay_within_one_cent_of_exact(amount, weights):
    keyed = {str(index + 1): weight for index, weight in enumerate(weights)}
    shares = revenue_shares(amount_cents=amount, weights=keyed)
    positive = {key: weight for key, weight in keyed.items() if weight > 0}
    if not positive or amount == 0:
        assert shares == {}
        return
    assert sum(shares.values()) == amount
    total = sum(positive.values())
    for key, share in shares.items():
        assert abs(share - amount * positive[key] / total) < 1 + 1e-6 * amount
