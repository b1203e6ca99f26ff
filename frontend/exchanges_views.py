"""Pages of federated distillation exchanges: a list (with the federations' augmentations), and one exchange's
rounds, participation and payload."""

from django.shortcuts import render
from django.views.decorators.http import require_GET

from frontend.decorators import page
from market.augmentations.selectors import augmentation_list
from market.exchanges.selectors import exchange_get, exchange_list, exchange_rounds
from workers.algorithms.fd import BITS_PER_NUMBER


@require_GET
@page
def exchange_list_page(request):
    return render(
        request,
        "frontend/exchanges/list.html",
        {
            "exchanges": exchange_list(user=request.user),
            "augmentations": augmentation_list(user=request.user),
        },
    )


@require_GET
@page
def exchange_detail_page(request, exchange_id):
    exchange = exchange_get(exchange_id=exchange_id, user=request.user)
    n_classes = exchange.federation.n_classes
    payload_bits = n_classes**2 * BITS_PER_NUMBER
    rounds = [
        {
            "round": item,
            "uploaded_bits": item.participants * payload_bits,
            "downloaded_bits": item.participants * payload_bits
            if item.status == "aggregated"
            else 0,
        }
        for item in exchange_rounds(exchange=exchange, user=request.user)
    ]
    return render(
        request,
        "frontend/exchanges/detail.html",
        {
            "exchange": exchange,
            "rounds": rounds,
            "payload_bits": payload_bits,
            "n_classes": n_classes,
            "total_bits": sum(item["uploaded_bits"] + item["downloaded_bits"] for item in rounds),
        },
    )
