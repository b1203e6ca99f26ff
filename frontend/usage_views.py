"""The buyer's page of metered use: each predictions-only purchase's rows and charges this month, with the trial
and the monthly cap left. It reads the selector the usage API reads (market.commerce.usage)."""

from django.shortcuts import render
from django.views.decorators.http import require_GET

from frontend.decorators import page
from market.commerce.usage import usage_summaries


@require_GET
@page
def usage_page(request):
    return render(
        request,
        "frontend/commerce/usage.html",
        {"section": "purchases", "usage": usage_summaries(user=request.user)},
    )
