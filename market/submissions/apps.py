from django.apps import AppConfig


class SubmissionsConfig(AppConfig):
    name = "market.submissions"
    label = "submissions"

    def ready(self):
        # How the budget ledger's pages name and link this app's spends (market.budgets.spending.SpenderKind).
        from market.budgets.spending import spender_kind_register
        from market.submissions.spending import SUBMISSION_SPENDER

        spender_kind_register(SUBMISSION_SPENDER)
