"""The stacked fusion through the whole job pipeline (Celery eager mode, issue 31): it is fitted on one half of the
evaluation split and reports every metric (and the silos' baselines) on the other; its global model is a normal
model whose raw-column ONNX runs, so its listing publishes; it is refused at L1 with a sentence, and a job whose
stack cannot beat a constant model fails with the fusion's sentence."""

import numpy as np

from market.jobs.models import Job, JobStatus
from market.storage import arrays_from_npz, arrays_to_npz, artifact_save
from tests.conftest import api_client_for
from tests.market.jobs.helpers import launch, publish_model, succeeded
from workers.algorithms.auto_fusion import evaluation_halves

FAST_STACK = {"query_fraction": 0.25, "final_model": {"family": "logistic_regression"}}


def test_a_stack_job_reports_on_the_half_it_did_not_fit_and_its_model_is_published(
    eager_celery, operator, fedkt_submissions, django_capture_on_commit_callbacks
):  # noqa: F811
    federation = fedkt_submissions[0].federation
    body = launch(
        operator,
        federation,
        django_capture_on_commit_callbacks,
        kind="stack",
        privacy_level="L0",
        parameters=FAST_STACK,
        seed=9,
    )
    assert body["parameters"]["aggregator"] == "auto"  # stored explicitly
    job = succeeded(body)
    model = job.global_model
    stack = model.lineage["fusion"]["stack"]
    labels = arrays_from_npz(job.evaluation_split.data_file)["labels"]
    fit, report = evaluation_halves(labels, seed=9)
    assert (stack["fit_rows"], stack["report_rows"]) == (len(fit), len(report))
    assert sum(map(sum, model.metrics["confusion_matrix"])) == len(report)
    for metrics in model.submission_metrics.values():  # the baselines read the same rows
        assert sum(map(sum, metrics["confusion_matrix"])) == len(report)
    # issue 28: the silos' values of the stack's average, on the same report rows
    assert model.contribution_values["rule"] == "average"
    assert model.contribution_values["rows"] == len(report)
    assert set(model.contribution_values["silos"]) == {
        str(s.organisation_id) for s in fedkt_submissions
    }
    assert stack["aggregator"] in ("logistic", "weights")
    assert (
        model.metrics["balanced_accuracy"] > model.baselines["majority_class"]["balanced_accuracy"]
    )
    assert any("Stacked by" in line.message for line in job.log_entries.all())
    from django.test import Client

    browser = Client()
    browser.force_login(operator)
    page = browser.get(f"/jobs/{job.id}/").content.decode()
    assert (
        f"Stacked by <strong>{stack['aggregator']}</strong>, fitted on {stack['fit_rows']} evaluation rows"
    ) in page
    assert (
        f"the metrics below are on the other {len(report)} rows, which the fit did not read" in page
    )
    assert 'id="job-contribution-values"' in page  # the operator sees every silo's value
    values_table = page[page.index('id="job-contribution-values"') :]
    values_table = values_table[: values_table.index("</table>")]
    # the header and one row per silo
    assert values_table.count("<tr>") == 1 + len(fedkt_submissions)
    assert model.model_family == "logistic_regression"
    listing = publish_model(model, name="Stacked income", actor=operator)  # runs from its package
    assert listing.status == "published"


def test_a_stack_job_is_refused_at_l1_with_a_sentence(operator, fedkt_submissions):
    federation = fedkt_submissions[0].federation
    refused = api_client_for(operator).post(
        f"/api/federations/{federation.slug}/jobs/",
        {"kind": "stack", "privacy_level": "L1", "seed": 1, "parameters": FAST_STACK},
        format="json",
    )
    assert refused.status_code == 400
    assert "A stacked fusion cannot run at L1" in refused.json()["detail"]
    assert not Job.objects.exists()


def test_a_stack_job_that_cannot_beat_a_constant_model_fails_with_the_reason(
    eager_celery, operator, fedkt_submissions, django_capture_on_commit_callbacks
):  # noqa: F811
    """Every evaluation row made the same row: every member predicts it alike, so nothing the stack learns from
    them beats always answering the majority class."""
    federation = fedkt_submissions[0].federation
    split = federation.evaluation_splits.get()
    arrays = arrays_from_npz(split.data_file)
    features = np.repeat(arrays["features"][:1], len(arrays["features"]), axis=0)
    split.data_file = artifact_save(
        name="evaluation/same-row.npz",
        data=arrays_to_npz(**{**arrays, "features": features}),
        stored_names=[],
    )
    split.save(update_fields=["data_file"])
    body = launch(
        operator,
        federation,
        django_capture_on_commit_callbacks,
        kind="stack",
        privacy_level="L0",
        parameters=FAST_STACK,
        seed=2,
    )
    job = Job.objects.get(id=body["id"])
    assert job.status == JobStatus.FAILED
    assert "The stacked fusion cannot beat a constant model" in job.failure_reason


def test_an_l0_fedkt_job_that_names_no_vote_chooses_with_auto_across_kinds_and_publishes(
    eager_celery, operator, fedkt_submissions, django_capture_on_commit_callbacks
):  # noqa: F811
    from workers.algorithms.auto_fusion import AUTO_CANDIDATES

    federation = fedkt_submissions[0].federation
    body = launch(
        operator,
        federation,
        django_capture_on_commit_callbacks,
        kind="fedkt",
        privacy_level="L0",
        parameters={
            "partitions": 2,
            "query": 0.25,
            "final_model": {"family": "logistic_regression"},
        },
        seed=4,
    )
    assert (body["parameters"]["vote"], body["parameters"]["vote_weight_max"]) == ("auto", 4)
    job = succeeded(body)
    model = job.global_model
    chosen = model.lineage["fusion"]["auto"]
    assert set(chosen["candidates"]) == set(AUTO_CANDIDATES)  # the stacked fusion among them
    assert sum(map(sum, model.metrics["confusion_matrix"])) == chosen["report_rows"]
    page = api_client_for(operator).get(f"/api/global-models/{model.id}/").json()
    assert page["fusion_choice"]["candidates"]["stacked"] == chosen["candidates"]["stacked"]
    from django.test import Client

    browser = Client()
    browser.force_login(operator)
    html = browser.get(f"/jobs/{job.id}/").content.decode()
    stacked = chosen["candidates"]["stacked"]
    assert 'id="job-fusion-candidates"' in html
    assert (
        f"<td>{100 * stacked['accuracy']:.1f} %</td><td>{100 * stacked['balanced_accuracy']:.1f} %</td>"
        in html
    )
    listing = publish_model(model, name="Auto income", actor=operator)  # runs from its package
    assert listing.status == "published"
