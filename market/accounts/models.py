from django.contrib.auth.models import AbstractUser
from django.db import models


class Organisation(models.Model):
    """A company or institution; a silo sells knowledge, a buyer buys models, some do both."""

    name = models.CharField(max_length=200, unique=True)
    is_silo = models.BooleanField(default=True)
    is_buyer = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return self.name


class User(AbstractUser):
    """A person; belongs to one organisation. Staff users are the market's operators."""

    organisation = models.ForeignKey(Organisation, null=True, blank=True, on_delete=models.PROTECT,
                                     related_name="members")

    @property
    def is_operator(self) -> bool:
        return self.is_staff
