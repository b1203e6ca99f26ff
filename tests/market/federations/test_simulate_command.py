import pytest
from django.core.management.base import CommandError

from market.federations.management.commands.onefold_simulate import Command
from workers.algorithms import kind_choices


def test_the_simulator_offers_every_registered_job_kind_and_nothing_else():
    parser = Command().create_parser("manage.py", "onefold_simulate")
    for kind, _label in kind_choices():
        assert parser.parse_args(["--algorithm", kind]).algorithm == kind
    with pytest.raises(CommandError, match="invalid choice: 'fd'"):
        parser.parse_args(["--algorithm", "fd"])
