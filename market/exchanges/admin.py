from django.contrib import admin

from market.exchanges.models import Exchange, ExchangeRound
from market.read_only_admin import ReadOnlyAdmin


@admin.register(Exchange)
class ExchangeAdmin(ReadOnlyAdmin):
    list_display = ("id", "name", "federation", "rounds", "min_silos", "status", "created_at")


@admin.register(ExchangeRound)
class ExchangeRoundAdmin(ReadOnlyAdmin):
    list_display = ("id", "exchange", "number", "status", "deadline", "closed_at")
