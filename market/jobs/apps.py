from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "market.jobs"
    label = "jobs"

    def ready(self):
        # How the budget ledger's pages name and link this app's spends (market.budgets.spending.SpenderKind).
        from market.budgets.spending import spender_kind_register
        from market.jobs.spending import JOB_SPENDER

        spender_kind_register(JOB_SPENDER)
