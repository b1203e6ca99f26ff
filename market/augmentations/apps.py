from django.apps import AppConfig


class AugmentationsConfig(AppConfig):
    name = "market.augmentations"
    label = "augmentations"

    def ready(self):
        # How the budget ledger's pages name and link this app's spends (market.budgets.spending.SpenderKind).
        from market.augmentations.spending import AUGMENTATION_SPENDER
        from market.budgets.spending import spender_kind_register

        spender_kind_register(AUGMENTATION_SPENDER)
