import getpass
import os
import sys

from django.core.management.base import BaseCommand, CommandError

from market.accounts.services import operator_first_create
from market.errors import DomainError

PASSWORD_VARIABLE = "ONEFOLD_OPERATOR_PASSWORD"


class Command(BaseCommand):
    help = (
        "Create the market's first operator on an empty market (the first-run step of a real deployment), then "
        f"say what to do next. The password is asked for, or read from ${PASSWORD_VARIABLE} when no one types."
    )

    def add_arguments(self, parser):
        parser.add_argument("--username", required=True, help="the operator's username")
        parser.add_argument(
            "--organisation",
            default="Market operator",
            help="the operator's organisation, neither a silo nor a buyer (default: 'Market operator')",
        )

    def handle(self, *args, username, organisation, **options):
        password = os.environ.get(PASSWORD_VARIABLE)
        if password is None:
            if not sys.stdin.isatty():
                raise CommandError(
                    f"Set {PASSWORD_VARIABLE} to the operator's password, or run this in a terminal to type it."
                )
            password = getpass.getpass("Password for the first operator: ")
        try:
            operator = operator_first_create(
                username=username, password=password, organisation_name=organisation
            )
        except DomainError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(
            "\n".join(
                [
                    f"Created the operator {operator.username} ({organisation}).",
                    "Next: start the market (web and a worker: README, 'Settings and scale-out'), sign in at "
                    "/sign-in/ as this operator, then:",
                    "  1. Federations → New federation: the learning task, its public data and evaluation split;",
                    "  2. People: invite each silo and buyer by link;",
                    "  3. once silos have uploaded, the federation's Jobs tab launches a job; list its model in "
                    "the market.",
                ]
            )
        )
