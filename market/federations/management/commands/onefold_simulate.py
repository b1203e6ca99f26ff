"""Simulate a whole federation through a running market's HTTP API: silos train and upload with the
toolkit, a job fuses their students, a buyer purchases the result; prints FedKT vs SOLO vs centralised.
The simulation is a client of the market (workers.simulation); this command makes its accounts in the
database, which has no sign-up API, and runs it.

Idempotent: a second run reuses the accounts, federation, submissions, job, listing and purchase.
"""

import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import OperationalError

from market.accounts.models import Organisation, User
from market.accounts.services import organisation_create, user_create
from market.federations.management.commands.onefold_demo import DEMO_DATA
from market.transient import RETRY_AFTER_SECONDS, database_is_busy
from workers.algorithms import kind_choices
from workers.numbers import size_text
from workers.silo.errors import OnefoldError
from workers.simulation import (
    BUYER,
    DATASETS,
    OPERATOR,
    SILO_PASSWORD,
    SimulationError,
    SimulationSettings,
    market_wait,
    simulation_run,
    summary_table,
)


def query(text: str) -> int | float:
    return float(text) if "." in text else int(text)


def accounts_ensure(silos: int) -> dict:
    """The operator, one user per silo organisation and a buyer, made in the database (the market has no
    sign-up API); existing ones are reused."""

    def user(username, password, *, organisation=None, is_operator=False):
        return User.objects.filter(username=username).first() or user_create(
            username=username, password=password, organisation=organisation, is_operator=is_operator
        )

    def organisation(name, *, is_silo, is_buyer):
        return Organisation.objects.filter(name=name).first() or organisation_create(
            name=name, is_silo=is_silo, is_buyer=is_buyer
        )

    user(*OPERATOR, is_operator=True)
    user(BUYER[0], BUYER[1], organisation=organisation(BUYER[2], is_silo=False, is_buyer=True))
    usernames = [f"silo-{index:02d}" for index in range(1, silos + 1)]
    for index, username in enumerate(usernames, start=1):
        user(
            username,
            SILO_PASSWORD,
            organisation=organisation(f"Simulated Silo {index:02d}", is_silo=True, is_buyer=False),
        )
    return {
        "operator": OPERATOR,
        "buyer": BUYER[:2],
        "silos": [(username, SILO_PASSWORD) for username in usernames],
    }


ACCOUNTS_ATTEMPTS = 6


def accounts_ensure_retrying(silos: int, *, say=print) -> dict:
    """accounts_ensure, tried again while SQLite says "database is locked" (the running market's requests and
    worker write to the same file); it is idempotent, so a retry reuses what an earlier attempt made."""
    for attempt in range(ACCOUNTS_ATTEMPTS - 1):
        try:
            return accounts_ensure(silos)
        except OperationalError as error:
            if not database_is_busy(error):
                raise
            wait = RETRY_AFTER_SECONDS * 2**attempt
            say(f"The market's database is busy; making the accounts again in {wait} s.")
            time.sleep(wait)
    return accounts_ensure(silos)


class Command(BaseCommand):
    help = (
        "Simulate a federation end to end through the market's HTTP API (accounts, federation, silos training "
        "and uploading with the toolkit, a job, a listing, a purchase); idempotent."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--market-url", default="http://127.0.0.1:8000", help="the running market's address"
        )
        parser.add_argument("--dataset", choices=sorted(DATASETS), default="adult")
        parser.add_argument(
            "--silos", type=int, default=20, help="number of silo organisations (default 20)"
        )
        parser.add_argument(
            "--beta", type=float, default=0.5, help="Dirichlet concentration of the label skew"
        )
        parser.add_argument(
            "--algorithm",
            choices=[kind for kind, _label in kind_choices()],
            default=kind_choices()[0][0],
            help=f"the job kind, one the engine registry runs (default {kind_choices()[0][0]}, its first)",
        )
        parser.add_argument("--privacy-level", choices=["L0", "L1", "L2"], default="L0")
        parser.add_argument(
            "--partitions",
            type=int,
            default=None,
            help="FedKT's s (default: each silo's toolkit chooses)",
        )
        parser.add_argument(
            "--teachers",
            type=int,
            default=None,
            help="FedKT's t (default: each silo's toolkit chooses)",
        )
        parser.add_argument(
            "--gamma",
            type=float,
            default=0.05,
            help="noise γ of the silos at L2 (an L1 job takes the market's default noise, GNMax)",
        )
        parser.add_argument(
            "--queries",
            type=int,
            default=300,
            help="L2: public rows each silo labels per partition",
        )
        parser.add_argument(
            "--job-query",
            type=query,
            help="public rows the server queries (count, or fraction "
            "with a decimal point; default: all, and at L1 the market's default: "
            "the rows that fit the silos' budgets)",
        )
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--work-dir", type=Path, help="folder for the silos' temporary files")
        parser.add_argument(
            "--wait-for-market",
            type=float,
            default=0,
            metavar="SECONDS",
            help="wait this long for the market to answer before starting (it may be starting up)",
        )

    def handle(self, *args, **options):
        if options["silos"] < 2:
            raise CommandError("A federation needs at least 2 silos; pass --silos 2 or more.")
        settings = SimulationSettings(
            market_url=options["market_url"],
            data_folder=DEMO_DATA,
            dataset=options["dataset"],
            silos=options["silos"],
            beta=options["beta"],
            algorithm=options["algorithm"],
            privacy_level=options["privacy_level"],
            partitions=options["partitions"],
            teachers=options["teachers"],
            gamma=options["gamma"],
            queries=options["queries"],
            seed=options["seed"],
            job_query=options["job_query"] or (None if options["privacy_level"] == "L1" else 1.0),
            work_dir=options["work_dir"],
            say=self.stdout.write,
        )
        try:
            market_wait(
                settings.market_url,
                timeout_seconds=options["wait_for_market"],
                say=self.stdout.write,
            )
            report = simulation_run(
                settings, accounts=accounts_ensure_retrying(settings.silos, say=self.stderr.write)
            )
        except (OnefoldError, SimulationError, ValueError) as error:
            raise CommandError(f"The simulation stopped: {error}") from error
        market = settings.market_url.rstrip("/")
        self.stdout.write("")
        self.stdout.write(summary_table(report, settings))
        self.stdout.write("")
        self.stdout.write(
            self.style.SUCCESS(
                f"Market: {market}/  (federation {market}/federations/{report.federation}/, job #{report.job['id']}, "
                f"global model #{report.global_model['id']}, listing #{report.listing['id']}, purchase "
                f"#{report.purchase['id']}, downloaded {size_text(report.download_bytes)} of {report.download_format})\n"
                f"  operator: {OPERATOR[0]} / {OPERATOR[1]}\n"
                f"  buyer:    {BUYER[0]} / {BUYER[1]} ({BUYER[2]})\n"
                f"  silos:    silo-01 … silo-{settings.silos:02d} / {SILO_PASSWORD}"
            )
        )
