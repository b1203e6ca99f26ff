"""The demo simulator at a small size: a real live market, a real worker, every step over HTTP; a second run reuses."""

import re
from io import StringIO

import pytest
from django.core.management import call_command

from tests.conftest import scaled_timeout

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def market_url(live_server, celery_worker):
    return live_server.url


#: How long the live server's first answer may take on a quiet machine (its first page imports and compiles
#: templates; under load it took more than the simulator's 5 s per try): scaled like every wait of the suite.
MARKET_ANSWER_SECONDS = 60


def simulate(market_url, tmp_path) -> str:
    out = StringIO()
    call_command(
        "onefold_simulate",
        market_url=market_url,
        silos=3,
        beta=0.5,
        work_dir=tmp_path,
        wait_for_market=scaled_timeout(MARKET_ANSWER_SECONDS),
        stdout=out,
    )
    return out.getvalue()


def test_the_simulator_runs_a_federation_end_to_end_and_a_second_run_reuses_everything(
    market_url, tmp_path
):
    from market.accounts.models import Organisation, User
    from market.commerce.models import Purchase
    from market.federations.models import Federation
    from market.jobs.models import GlobalModel, Job
    from market.submissions.models import Submission

    output = simulate(market_url, tmp_path)
    # it tells what it is doing while it does it: each silo's turn before and after, each validation
    assert re.search(
        r"\[1/3\] silo-01: login, join, pull, train on \d+ rows .*upload\.\.\.", output
    )
    assert re.search(r"\[3/3\] silo-03 → submission #\d+", output)
    assert re.search(r"\[3/3\] submission #\d+ is valid", output)
    federation = Federation.objects.get()
    assert federation.slug == "adult-income-simulated-federation"
    assert Submission.objects.filter(federation=federation, status="valid").count() == 3
    job = Job.objects.get()
    assert (job.kind, job.privacy_level, job.status) == ("fedkt", "L0", "succeeded")
    assert job.submissions.count() == 3
    accuracy = GlobalModel.objects.get(job=job).metrics["accuracy"]
    # percentages with one decimal, the unit in the header, as the pages write them (workers.numbers)
    assert re.search(r"model\s+accuracy \(%\)\s+balanced \(%\)", output)
    assert re.search(rf"fedkt global model \(job #{job.id}\)\s+{100 * accuracy:.1f}\b", output)
    solo, centralised = (
        float(re.search(rf"{name}\s+(\d+\.\d)\b", output).group(1)) / 100
        for name in ("SOLO \\(mean of 3 silos\\)", "centralised \\(all silo data pooled\\)")
    )
    assert 0.5 < solo <= centralised <= 1
    purchase = Purchase.objects.get()
    assert purchase.buyer_organisation.name == "Demo Buyer"
    assert f"Market: {market_url}/" in output
    assert (
        "operator: operator / onefold-operator" in output
        and "silo-01 … silo-03 / onefold-silo" in output
    )

    counts = (
        User.objects.count(),
        Organisation.objects.count(),
        Submission.objects.count(),
        Job.objects.count(),
        Purchase.objects.count(),
    )
    again = simulate(market_url, tmp_path)
    assert (
        User.objects.count(),
        Organisation.objects.count(),
        Submission.objects.count(),
        Job.objects.count(),
        Purchase.objects.count(),
    ) == counts
    assert f"fedkt global model (job #{job.id})" in again


def test_the_simulator_fuses_local_models_into_an_ensemble(market_url, tmp_path):
    from market.jobs.models import GlobalModel, Job
    from market.submissions.models import Submission

    out = StringIO()
    # 3 silos: with 2, the Dirichlet(0.5) draw leaves one silo a single class and the ensemble, at 0.55 balanced
    # accuracy, is rightly refused by the publish gate
    call_command(
        "onefold_simulate",
        market_url=market_url,
        silos=3,
        algorithm="ensemble",
        work_dir=tmp_path,
        stdout=out,
    )
    job = Job.objects.get()
    assert (job.kind, job.status) == ("ensemble", "succeeded")
    assert [s.model_files.count() for s in Submission.objects.order_by("id")] == [
        1,
        1,
        1,
    ]  # one local model a silo
    accuracy = GlobalModel.objects.get(job=job).metrics["accuracy"]
    assert re.search(
        rf"ensemble global model \(job #{job.id}\)\s+{100 * accuracy:.1f}\b", out.getvalue()
    )
    assert re.search(r"\d\.\d [KM]iB of bundle\)", out.getvalue())
