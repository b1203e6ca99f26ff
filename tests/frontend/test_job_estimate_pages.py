"""Saying it before spending, and plainly: the launcher's pre-flight estimate (operators only, sent once, polled
while it runs, its publish-gate sentence beside the Launch button), what a previous job showed, the job page's
statements first, and the catalog's and the card's flag for a model no more accurate than the majority guess."""

import re
from datetime import timedelta

import numpy as np
import pytest

from market.commerce.models import Listing
from market.commerce.services import listing_create, listing_publish
from market.jobs.models import Job, JobEstimate
from tests.frontend.journey_helpers import form_key
from tests.frontend.launcher_helpers import ESTIMATE, LAUNCHER, estimate_form
from workers.metrics import classification_metrics

# 380 '<=50K' and 120 '>50K' evaluation rows, the contract's shape (tests/market/commerce/test_publish_gate.py).
LABELS = np.repeat([0, 1], [380, 120])


def test_the_launcher_estimates_an_l1_job_and_says_beside_launch_that_it_would_fail_the_gate(
    client, operator, fedkt_submissions, eager_celery, django_capture_on_commit_callbacks
):
    client.force_login(operator)
    launcher = client.get(LAUNCHER).content.decode()
    assert 'id="estimate-button"' in launcher and 'formaction="' + ESTIMATE in launcher

    with django_capture_on_commit_callbacks(execute=True):
        sent = client.post(ESTIMATE, estimate_form(launcher, fedkt_submissions))

    estimate = JobEstimate.objects.get()
    assert (sent.status_code, sent["Location"]) == (302, f"{LAUNCHER}?estimate={estimate.id}")
    assert estimate.status == "succeeded", estimate.failure_reason
    page = client.get(sent["Location"]).content.decode()
    for row in (
        "estimate-private",
        "estimate-reference",
        "estimate-majority",
        "estimate-simulated-votes",
    ):
        assert f'id="{row}"' in page
    assert 'id="estimate-best-silo"' not in page  # the silos' votes were not read (issue 38 item 3)
    gate = re.search(r'<p class="form-error" id="estimate-gate" role="alert">([^<]+)</p>', page)
    assert gate.group(1).startswith(
        "Launching is not advised: this job&#x27;s model would fail the publish gate. The expected "
        "private model does not beat the majority-class guess (always &#x27;&lt;=50K&#x27;)"
    )
    # beside the Launch button: nothing but the estimate's own end and the buttons between them
    between = page[gate.end() : page.index('id="launch-button"')]
    assert "<section" not in between and "<table" not in between
    assert 'hx-trigger="every 1s"' not in page  # it ended: no more polls
    # the form holds what was estimated, its seed too, so that launching launches it
    assert '<option value="L1" selected>' in page and 'value="7"' in page
    assert not Job.objects.exists()


def test_the_estimate_form_sent_again_starts_nothing_more(
    client, operator, fedkt_submissions, django_capture_on_commit_callbacks
):
    client.force_login(operator)
    form = estimate_form(client.get(LAUNCHER).content.decode(), fedkt_submissions)

    with django_capture_on_commit_callbacks(execute=True):
        first, again = client.post(ESTIMATE, form), client.post(ESTIMATE, form)
    # a new rendering of the launcher (a new key) with the same request reads the same estimate
    fresh = {
        **form,
        "idempotency_key": form_key(client.get(LAUNCHER).content.decode(), 'id="job-form"'),
    }
    with django_capture_on_commit_callbacks(execute=True):
        third = client.post(ESTIMATE, fresh)

    estimate = JobEstimate.objects.get()
    assert first["Location"] == again["Location"] == third["Location"]
    assert first["Location"].endswith(f"?estimate={estimate.id}")


def test_a_running_estimate_polls_until_it_ends(client, operator, fedkt_submissions):
    client.force_login(operator)
    sent = client.post(
        ESTIMATE, estimate_form(client.get(LAUNCHER).content.decode(), fedkt_submissions)
    )
    estimate = JobEstimate.objects.get()  # no worker here: it stays queued

    page = client.get(sent["Location"]).content.decode()
    partial = client.get(f"/job-estimates/{estimate.id}/").content.decode()

    for shown in (page, partial):
        assert f'hx-get="/job-estimates/{estimate.id}/" hx-trigger="every 1s"' in shown
        assert "Estimating: waiting for a worker" in shown
    created_at = estimate.created_at
    JobEstimate.objects.filter(id=estimate.id).update(created_at=created_at - timedelta(hours=1))
    lost = client.get(f"/job-estimates/{estimate.id}/").content.decode()
    assert "lost: no worker finished it in time; ask for the estimate again" in lost
    assert "hx-trigger" not in lost
    JobEstimate.objects.filter(id=estimate.id).update(created_at=created_at)
    JobEstimate.objects.filter(id=estimate.id).update(status="failed", failure_reason="A reason.")
    ended = client.get(f"/job-estimates/{estimate.id}/").content.decode()
    assert "The estimate failed: A reason." in ended and "hx-trigger" not in ended


def test_bad_input_is_shown_on_the_launcher_with_a_4xx_and_nothing_is_estimated(
    client, operator, fedkt_submissions
):
    client.force_login(operator)
    form = estimate_form(client.get(LAUNCHER).content.decode(), fedkt_submissions)

    level = client.post(ESTIMATE, {**form, "privacy_level": "L0"})
    unreadable = client.post(ESTIMATE, {**form, "parameters": "{not json"})

    assert level.status_code == 400
    assert "Pre-flight estimates are for L1 and L2 jobs" in level.content.decode()
    assert unreadable.status_code == 400
    assert "The parameters must be a JSON object" in unreadable.content.decode()
    assert not JobEstimate.objects.exists()


@pytest.fixture
def buyers_may_launch(fedkt_submissions):
    federation = fedkt_submissions[0].federation
    federation.buyers_may_launch_jobs = True
    federation.save(update_fields=["buyers_may_launch_jobs"])
    return federation


def test_a_buyer_who_may_launch_is_offered_no_estimate_and_sees_none(
    client, operator, buyer_user, buyers_may_launch, fedkt_submissions
):
    client.force_login(operator)
    client.post(ESTIMATE, estimate_form(client.get(LAUNCHER).content.decode(), fedkt_submissions))
    estimate = JobEstimate.objects.get()
    client.force_login(buyer_user)

    launcher = client.get(f"{LAUNCHER}?estimate={estimate.id}").content.decode()
    refused = client.post(ESTIMATE, estimate_form(launcher, fedkt_submissions))

    assert "The pre-flight estimate of a job's quality is for operators only" in launcher
    assert 'id="estimate-button"' not in launcher and 'id="job-estimate"' not in launcher
    assert refused.status_code == 403
    assert client.get(f"/job-estimates/{estimate.id}/").status_code == 404
    assert JobEstimate.objects.count() == 1


def metrics_of(predicted: np.ndarray) -> dict:
    return classification_metrics(np.eye(2)[predicted], LABELS, n_classes=2)


BELOW_THE_BEST_SILO = {
    "majority_class": {
        "accuracy": 0.76,
        "balanced_accuracy": 0.5,
        "macro_f1": 0.43,
        "roc_auc": 0.5,
        "class": 0,
    },
    "best_single_silo": {
        "accuracy": 0.9,
        "balanced_accuracy": 0.85,
        "macro_f1": 0.8,
        "roc_auc": 0.9,
        "silo": "1",
    },
    "average_silo": {"accuracy": 0.8, "balanced_accuracy": 0.7, "macro_f1": 0.7, "roc_auc": 0.8},
    "n_silos": 4,
}


def test_the_job_page_and_the_next_launch_say_first_that_the_model_is_below_the_best_silo(
    client, operator, make_global_model
):
    predicted = np.zeros(500, dtype=int)
    predicted[380:440] = 1  # half the positives found: accuracy 0.88, balanced accuracy 0.75
    model = make_global_model(metrics=metrics_of(predicted), baselines=BELOW_THE_BEST_SILO)
    client.force_login(operator)

    job_page = client.get(f"/jobs/{model.job_id}/").content.decode()
    launcher = client.get(LAUNCHER, {"kind": "fedkt", "privacy_level": "L1"}).content.decode()

    sentence = (
        "This model is below the best single silo: its accuracy is 88.0 % against 90.0 % (2.0 points lower) "
        "and its balanced accuracy 75.0 % against 85.0 % (10.0 points lower), for the best single silo on "
        "the same evaluation rows."
    )
    assert sentence in job_page
    assert job_page.index('id="job-quality"') < job_page.index('id="job-status"')
    assert job_page.index(sentence) < job_page.index("List in market")
    assert f"job #{model.job_id}</a>" in launcher and sentence in launcher


def test_a_model_no_more_accurate_than_the_majority_guess_is_refused_and_once_overridden_flagged_in_the_catalog(
    client, operator, buyer_user, make_global_model
):
    predicted = np.zeros(500, dtype=int)
    predicted[180:] = (
        1  # every positive found, 200 negatives called positive: accuracy 0.6, balanced 0.737
    )
    listing = listing_create(
        global_model=make_global_model(metrics=metrics_of(predicted)),
        name="Accurate on the few",
        description="",
        price_cents=100,
        licence_text="Any lawful use.",
        actor=operator,
    )
    accuracy_sentence = (
        f"Global model #{listing.global_model_id} is not more accurate than the majority-class guess (always "
        "'<=50K'): its accuracy is 60.0 % and the guess's 76.0 %, 16.0 points below it."
    )
    with pytest.raises(Exception) as refused:
        listing_publish(listing=listing, actor=operator)
    assert str(refused.value) == (
        f"{accuracy_sentence} Publishing is refused; an operator may publish it anyway with a written override "
        "reason, which buyers will see."
    )
    listing_publish(listing=listing, actor=operator, override_reason="A buyer wants its recall.")
    client.force_login(buyer_user)

    catalog = client.get("/market/").content.decode()
    card = client.get(f"/market/listings/{listing.id}/").content.decode()

    assert (
        '<p class="badge badge-rejected accuracy-flag">Accuracy 60.0 %: not above always guessing '
        "&#x27;&lt;=50K&#x27; (76.0 %)</p>"
    ) in catalog
    assert "is not more accurate than the majority-class guess" in card
    assert Listing.objects.get(pk=listing.pk).status == "published"


def test_the_launcher_refuses_an_estimate_past_the_hourly_rate_with_429_and_the_sentence_beside_the_form(
    client, operator, fedkt_submissions, django_capture_on_commit_callbacks, settings
):
    """Issue 38 item 9, on the page: no worker here, so the first estimate stays queued and only the rate decides."""
    settings.ONEFOLD_ESTIMATES_PER_HOUR = 1
    client.force_login(operator)
    first = client.post(
        ESTIMATE, estimate_form(client.get(LAUNCHER).content.decode(), fedkt_submissions)
    )
    second_form = {
        **estimate_form(client.get(LAUNCHER).content.decode(), fedkt_submissions),
        "seed": "8",
    }

    refused = client.post(ESTIMATE, second_form)

    assert (first.status_code, refused.status_code) == (302, 429)
    assert 1 <= int(refused["Retry-After"]) <= 3600
    assert "Too many pre-flight estimates: at most 1 an hour per operator in a federation" in (
        refused.content.decode()
    )
    assert JobEstimate.objects.count() == 1
