from django.apps import AppConfig


class AugmentationsConfig(AppConfig):
    name = "market.augmentations"
    label = "augmentations"
