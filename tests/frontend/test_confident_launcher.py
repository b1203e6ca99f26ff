"""Confident-GNMax in the launcher's L1 options (issue 25 item 2): the privacy keys are explained beside their
inputs, and an operator's pre-flight estimate simulates the consensus check and the answers, keeping T and σ₁ in
the form it gives back."""

import json

from market.jobs.models import Job, JobEstimate
from tests.fixtures.jobs import FAST_FEDKT
from tests.frontend.launcher_helpers import ESTIMATE, LAUNCHER, estimate_form

CONFIDENT = {
    **FAST_FEDKT,
    "query": 20,
    "privacy": {
        "mechanism": "confident_gnmax",
        "sigma": 40.0,
        "threshold": 4.0,
        "sigma_threshold": 30.0,
        "delta": 1e-5,
    },
}


def test_the_launcher_explains_confident_gnmax_and_estimates_it(
    client, operator, fedkt_submissions, eager_celery, django_capture_on_commit_callbacks
):
    client.force_login(operator)
    launcher = client.get(LAUNCHER).content.decode()
    help_texts = json.loads(
        launcher.split('id="job-parameter-help" type="application/json">')[1].split("</script>")[0]
    )
    assert help_texts["mechanism"].startswith(
        "L1 noise: gaussian (GNMax, the default) | laplace | confident_gnmax"
    )
    assert "confident_gnmax only: T, in votes" in help_texts["threshold"]
    assert "confident_gnmax only: σ₁, in votes" in help_texts["sigma_threshold"]
    assert "<code>threshold</code>" in launcher  # the advanced JSON's list names it too

    with django_capture_on_commit_callbacks(execute=True):
        sent = client.post(ESTIMATE, estimate_form(launcher, fedkt_submissions, CONFIDENT))

    estimate = JobEstimate.objects.get()
    assert estimate.status == "succeeded", estimate.failure_reason
    assert estimate.parameters["privacy"]["mechanism"] == "confident_gnmax"
    page = client.get(sent["Location"]).content.decode()
    assert 'id="estimate-private"' in page
    # the form gives back what was estimated, T and σ₁ included, so that launching launches it
    assert "&quot;threshold&quot;: 4.0" in page and "&quot;sigma_threshold&quot;: 30.0" in page
    assert not Job.objects.exists()
