"""An FD exchange round's aggregation, the worker's side (``onefold.exchange_round_aggregate``): each silo's global
per-label logits, the average of the other silos' uploads (workers.algorithms.fd.fd_server_aggregate). The round
is read through market.exchanges.selectors and ended through market.exchanges.services (aggregated, or
``missed_quorum``; then the next round opens); this module only computes (the contract
``worker-side-reads-no-market-models``). Closing rounds past their deadline is the market's
(``exchange_reap``)."""

from market.exchanges.selectors import exchange_round_closing
from market.exchanges.services import exchange_round_end
from workers.algorithms.fd import fd_server_aggregate


def exchange_round_aggregate(*, exchange_round_id: int) -> None:
    """Global logits for every participant of a closing round (none below its quorum), recorded by the market."""
    closing = exchange_round_closing(exchange_round_id=exchange_round_id)
    if closing is None:
        return  # already done by another delivery
    global_logits = None
    if closing.quorum_met:
        logits, available = fd_server_aggregate(
            closing.local_logits, closing.present, min_contributors=closing.min_contributors
        )
        global_logits = [
            (row_logits.tolist(), row_available.tolist())
            for row_logits, row_available in zip(logits, available)
        ]
    exchange_round_end(exchange_round_id=exchange_round_id, global_logits=global_logits)
