from django.core.management import call_command

from market.federations.models import Federation


def test_onefold_demo_creates_a_ready_federation_and_is_idempotent(db):
    call_command("onefold_demo")
    call_command("onefold_demo")
    federation = Federation.objects.get(slug="adult-income")
    assert federation.public_datasets.get().n_rows == 3000
    assert federation.evaluation_splits.get().n_rows == 1000
    assert [organisation.name for organisation in federation.members.all()] == ["Demo Hospital"]
