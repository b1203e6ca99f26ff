from django.urls import path

from market.budgets import apis

urlpatterns = [
    path("federations/<slug:slug>/budgets/", apis.BudgetListApi.as_view(), name="api-budget-list"),
    path("budgets/<int:budget_id>/", apis.BudgetDetailApi.as_view(), name="api-budget-detail"),
    path(
        "federations/<slug:slug>/budget-ledger/",
        apis.BudgetLedgerApi.as_view(),
        name="api-budget-ledger",
    ),
    path(
        "federations/<slug:slug>/budget-refusals/",
        apis.BudgetRefusalListApi.as_view(),
        name="api-budget-refusals",
    ),
]
