"""Create a demo market: an operator, a silo, and the "Adult income" federation with public data.

Running it again changes nothing. For local demos only: the passwords are printed and well known.
"""

import gzip
from pathlib import Path

from django.core.management.base import BaseCommand
from django.db import transaction

from market.accounts.models import Organisation, User
from market.accounts.services import organisation_create, user_create
from market.federations.membership import membership_add
from market.federations.models import Federation
from market.federations.services import (
    evaluation_split_upload,
    federation_create,
    public_dataset_upload,
)
from workers.algorithms.schema import query_of

DEMO_DATA = Path(__file__).resolve().parents[2] / "demo_data"
OPERATOR = ("operator", "onefold-operator")
SILO = ("silo", "onefold-silo")


class Command(BaseCommand):
    help = "Create a demo operator, silo and federation with Adult public data (idempotent)."

    @transaction.atomic
    def handle(self, *args, **options):
        operator = User.objects.filter(username=OPERATOR[0]).first() or user_create(
            username=OPERATOR[0], password=OPERATOR[1], is_operator=True
        )
        hospital = Organisation.objects.filter(name="Demo Hospital").first() or organisation_create(
            name="Demo Hospital"
        )
        silo = User.objects.filter(username=SILO[0]).first() or user_create(
            username=SILO[0], password=SILO[1], organisation=hospital
        )
        if not Federation.objects.filter(slug="adult-income").exists():
            federation = federation_create(
                name="Adult income",
                description="Predict whether a person's income exceeds 50K a year (UCI Adult).",
                class_labels=["<=50K", ">50K"],
                label_column="income",
                allowed_privacy_levels=["L0", "L1", "L2"],
                default_privacy_level="L1",
                # L1 jobs query 1 % of the public rows by default (the engine writes the query's key)
                default_parameters={"gamma": 0.04, **query_of(0.01), "delta": 1e-5},
                created_by=operator,
            )
            public_dataset_upload(
                federation=federation,
                uploaded_by=operator,
                data=gzip.decompress((DEMO_DATA / "adult-public.csv.gz").read_bytes()),
            )
            evaluation_split_upload(
                federation=federation,
                uploaded_by=operator,
                data=gzip.decompress((DEMO_DATA / "adult-evaluation.csv.gz").read_bytes()),
            )
            # The federation admits by request (the default); the demo's operator admits its silo up front.
            membership_add(
                federation=federation,
                organisation=silo.organisation,
                actor=operator,
                via="demo set-up",
            )
        self.stdout.write(
            self.style.SUCCESS(
                "Demo market ready at http://127.0.0.1:8000/\n"
                f"  operator: {OPERATOR[0]} / {OPERATOR[1]} (also the admin at /admin/)\n"
                f"  silo:     {SILO[0]} / {SILO[1]} (member of 'Adult income')"
            )
        )
