from django.contrib import admin

from market.augmentations.models import Augmentation
from market.read_only_admin import ReadOnlyAdmin


@admin.register(Augmentation)
class AugmentationAdmin(ReadOnlyAdmin):
    list_display = ("id", "name", "federation", "private", "status", "created_at")
