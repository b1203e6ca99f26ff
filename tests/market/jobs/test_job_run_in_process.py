"""The whole job pipeline in this process (Celery eager mode): fan-out, fusion, evaluation, files, lineage.

The same code runs under a real worker in tests/workers/test_job_tasks.py; here it is fast to debug.
"""

import io
import json
import zipfile

import numpy as np
import onnxruntime
import pytest
from sklearn.ensemble import RandomForestClassifier

from market.feature_views import stored_features_in_view
from market.jobs.models import GlobalModel, Job, JobChunk
from market.storage import arrays_from_npz, artifact_read
from tests.conftest import api_client_for
from tests.fixtures.jobs import FAST_FEDKT
from tests.market.jobs.helpers import launch, succeeded
from workers.algorithms.auto_fusion import evaluation_halves
from workers.algorithms.semi_private import SEMI_PRIVATE_PRIVACY_NOTE
from workers.algorithms.transfer import child_seeds
from workers.views import ORDINAL_VIEW


def test_fedkt_l0_job_runs_to_a_global_model_with_metrics_lineage_and_files(
    eager_celery, operator, fedkt_submissions, django_capture_on_commit_callbacks
):
    federation = fedkt_submissions[0].federation
    body = launch(
        operator,
        federation,
        django_capture_on_commit_callbacks,
        kind="fedkt",
        privacy_level="L0",
        parameters=FAST_FEDKT,
        seed=7,
    )
    job = succeeded(body)
    assert JobChunk.objects.filter(job=job).count() == 2
    model = job.global_model
    assert model.model_family == "logistic_regression"
    assert set(model.metrics) == {
        "accuracy",
        "balanced_accuracy",
        "macro_f1",
        "roc_auc",
        "confusion_matrix",
        "reliability",
    }
    # every kind reports on the report half of the evaluation split, as do all its baselines (issue 39)
    split = arrays_from_npz(job.evaluation_split.data_file)
    fit_rows, report_rows = evaluation_halves(split["labels"], seed=7)
    assert sum(map(sum, model.metrics["confusion_matrix"])) == len(report_rows) == 250
    operator_only = model.baselines["operator_only"]
    assert (operator_only["fit_rows"], operator_only["report_rows"]) == (250, 250)
    # independently: the market's default forest on the fit half (the trees' ordinal view), scored on the report half
    ordinal = stored_features_in_view(split["features"], job.public_dataset, ORDINAL_VIEW)
    forest = RandomForestClassifier(
        n_estimators=100, max_depth=8, random_state=child_seeds(7, 1)[0]
    ).fit(ordinal[fit_rows], split["labels"][fit_rows])
    predicted = forest.predict(ordinal[report_rows])
    assert operator_only["accuracy"] == pytest.approx(
        float(np.mean(predicted == split["labels"][report_rows]))
    )
    # issue 39 item 2: each free baseline's paired comparison with the model, on the same report rows
    for name in ("operator_only", "majority_class", "best_single_silo"):
        comparison = model.baselines[name]["comparison"]
        for metric in ("accuracy", "balanced_accuracy"):
            measured = comparison[metric]
            assert measured["difference"] == pytest.approx(
                model.metrics[metric] - model.baselines[name][metric]
            ), (name, metric)
            assert measured["low"] <= measured["difference"] + 1e-9
            assert measured["high"] >= measured["difference"] - 1e-9
            assert measured["verdict"] == (
                "beats" if measured["low"] > 0 else "below" if measured["high"] < 0 else "level"
            )
    assert model.baselines["comparison_method"]["resamples"] == 1000
    assert set(model.submission_metrics) == {str(s.id) for s in fedkt_submissions}
    assert model.privacy_report == {"level": "L0", "data_independent": None, "data_dependent": None}
    assert abs(sum(model.contribution_weights.values()) - 1) < 1e-9
    assert set(model.contribution_weights) == {str(s.organisation_id) for s in fedkt_submissions}
    assert model.lineage["submissions"] == [s.id for s in fedkt_submissions]
    assert model.lineage["seed"] == 7
    assert model.lineage["verification"]["portable_vs_native_max_abs_difference"] < 1e-4
    files = {file.format: file for file in model.files.all()}
    assert set(files) == {"skops", "onnx"}
    session = onnxruntime.InferenceSession(artifact_read(files["onnx"].stored_name))
    probabilities = session.run(None, {"features": split["features"].astype(np.float32)})[1]
    assert probabilities.shape == (500, 2)
    predicted = probabilities[report_rows].argmax(axis=1)
    assert (
        abs((predicted == split["labels"][report_rows]).mean() - model.metrics["accuracy"]) < 1e-9
    )

    detail = api_client_for(operator).get(f"/api/jobs/{job.id}/").json()
    assert detail["progress"] == {"stage": "done", "done": 3, "total": 3, "percent": 100}
    assert detail["global_model"] == model.id
    assert any("Succeeded" in line["message"] for line in detail["log"])


def test_same_inputs_and_seed_give_the_same_model(
    eager_celery, operator, fedkt_submissions, django_capture_on_commit_callbacks
):
    federation = fedkt_submissions[0].federation
    ids = [
        launch(
            operator,
            federation,
            django_capture_on_commit_callbacks,
            kind="fedkt",
            privacy_level="L0",
            parameters=FAST_FEDKT,
            seed=11,
        )["id"]
        for _ in range(2)
    ]
    models = [GlobalModel.objects.get(job_id=id) for id in ids]
    onnx = [artifact_read(m.files.get(format="onnx").stored_name) for m in models]
    assert onnx[0] == onnx[1]
    assert models[0].metrics == models[1].metrics


def test_fedkt_l1_job_records_both_privacy_analyses_and_stores_its_noisy_answers(
    eager_celery, operator, fedkt_submissions, django_capture_on_commit_callbacks
):
    federation = fedkt_submissions[0].federation
    body = launch(
        operator,
        federation,
        django_capture_on_commit_callbacks,
        kind="fedkt",
        privacy_level="L1",
        parameters={**FAST_FEDKT, "query": 20, "privacy": {"gamma": 0.02}},
        seed=3,
    )
    job = succeeded(body)
    report = job.global_model.privacy_report
    assert report["level"] == "L1"
    assert report["data_independent"]["data_dependent"] is False
    assert report["data_dependent"]["data_dependent"] is True
    assert report["data_independent"]["unit"] == "party-level"
    assert report["data_independent"]["n_queries"] == 20
    assert report["data_dependent"]["epsilon"] <= report["data_independent"]["epsilon"]
    assert job.noise_drawn_at is not None
    assert arrays_from_npz(job.noisy_answers_name)["noisy_counts"].shape == (20, 2)


def test_ensemble_job_saves_a_bundle_of_its_members(
    eager_celery, operator, fedkt_submissions, django_capture_on_commit_callbacks
):
    federation = fedkt_submissions[0].federation
    body = launch(
        operator,
        federation,
        django_capture_on_commit_callbacks,
        kind="ensemble",
        privacy_level="L0",
        parameters={},
        seed=1,
    )
    job = succeeded(body)
    model = job.global_model
    assert model.model_family == "ensemble"
    bundle = model.files.get()
    assert (bundle.role, bundle.format) == ("native", "bundle")
    with zipfile.ZipFile(io.BytesIO(artifact_read(bundle.stored_name))) as archive:
        manifest = json.loads(archive.read("manifest.json"))
        assert len(manifest["members"]) == 6
        assert abs(sum(member["weight"] for member in manifest["members"]) - 1) < 1e-9


def test_an_ensemble_scores_alike_however_its_members_are_chunked(
    eager_celery, settings, operator, fedkt_submissions, django_capture_on_commit_callbacks
):
    # the evaluation sums each chunk's weighted mean of its members' probabilities, times its share of the weight
    federation = fedkt_submissions[0].federation
    metrics = []
    for chunk_size in (1, len(fedkt_submissions)):
        settings.ONEFOLD_JOB_CHUNK_SIZE = chunk_size
        body = launch(
            operator,
            federation,
            django_capture_on_commit_callbacks,
            kind="ensemble",
            privacy_level="L0",
            parameters={},
            seed=1,
        )
        job = succeeded(body)
        metrics.append(job.global_model.metrics)
    chunked, whole = metrics
    assert chunked["confusion_matrix"] == whole["confusion_matrix"]
    for name in ("accuracy", "balanced_accuracy", "macro_f1", "roc_auc"):
        assert chunked[name] == pytest.approx(whole[name], abs=1e-12)


def test_distill_job_trains_one_student_on_the_ensembles_public_predictions(
    eager_celery, operator, fedkt_submissions, django_capture_on_commit_callbacks
):
    federation = fedkt_submissions[0].federation
    body = launch(
        operator,
        federation,
        django_capture_on_commit_callbacks,
        kind="distill",
        privacy_level="L0",
        parameters={
            "query": 300,
            "final_model": {"family": "logistic_regression"},
            "selection": {"strategy": "validation_score", "k": 2},
        },
        seed=2,
    )
    job = succeeded(body)
    model = job.global_model
    assert model.model_family == "logistic_regression"
    assert {file.format for file in model.files.all()} == {"skops", "onnx"}
    assert len(model.lineage["submissions"]) == 2
    assert 0 <= model.lineage["fusion"]["fidelity"] <= 1
    assert model.metrics["accuracy"] > 0.7


def test_distill_job_with_the_default_kernel_student_saves_numpy_arrays_and_an_equal_onnx(
    eager_celery, operator, fedkt_submissions, django_capture_on_commit_callbacks
):
    federation = fedkt_submissions[0].federation
    body = launch(
        operator,
        federation,
        django_capture_on_commit_callbacks,
        kind="distill",
        privacy_level="L0",
        parameters={"proxy": 200},
        seed=3,
    )
    job = succeeded(body)
    assert job.parameters["student"] == {"family": "kernel"}
    files = {file.format: file for file in job.global_model.files.all()}
    assert set(files) == {"kernel_npz", "onnx"}
    kernel = np.load(io.BytesIO(artifact_read(files["kernel_npz"].stored_name)))
    assert kernel["support_vectors"].shape[0] == 200
    features = arrays_from_npz(job.evaluation_split.data_file)["features"][:50].astype(np.float32)
    distances = ((features[:, None, :] - kernel["support_vectors"][None]) ** 2).sum(axis=2)
    logits = np.exp(-kernel["gamma"] * distances) @ kernel["dual_coef"] / kernel["temperature"]
    session = onnxruntime.InferenceSession(artifact_read(files["onnx"].stored_name))
    (onnx_logits,) = session.run(None, {session.get_inputs()[0].name: features})
    assert np.allclose(onnx_logits, logits, atol=1e-3)


def test_cpfl_job_distils_cohort_models_weighted_by_their_label_distributions(
    eager_celery, operator, fedkt_submissions, django_capture_on_commit_callbacks
):
    from market.submissions.models import Submission

    for submission, distribution in zip(fedkt_submissions, ([500, 166], [400, 266], [600, 66])):
        Submission.objects.filter(id=submission.id).update(label_distribution=distribution)
    federation = fedkt_submissions[0].federation
    body = launch(
        operator,
        federation,
        django_capture_on_commit_callbacks,
        kind="cpfl",
        privacy_level="L0",
        parameters={"query": 300, "student": {"family": "mlp", "hidden_sizes": [16], "epochs": 5}},
        seed=4,
    )
    assert body["parameters"] == {
        "student": {"family": "mlp", "hidden_sizes": [16], "epochs": 5},
        "loss": "l1",
        "temperature": 1.0,
        "query_count": 300,
    }
    job = succeeded(body)
    model = job.global_model
    assert {file.format for file in model.files.all()} == {"safetensors", "onnx"}
    assert model.lineage["verification"]["portable_vs_native_max_abs_difference"] < 1e-4
    assert abs(sum(model.contribution_weights.values()) - 1) < 1e-9


def test_cpfl_job_without_label_distributions_is_refused_naming_them(operator, fedkt_submissions):
    federation = fedkt_submissions[0].federation
    response = api_client_for(operator).post(
        f"/api/federations/{federation.slug}/jobs/",
        {"kind": "cpfl", "privacy_level": "L0"},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["detail"].startswith(
        "These submissions cannot be fused this way: Cohort distillation "
        "needs each cohort's label distribution"
    )
    assert not Job.objects.exists()


def test_a_retried_l1_fusion_reuses_the_stored_noisy_answers(
    eager_celery, operator, fedkt_submissions, django_capture_on_commit_callbacks
):
    from workers.jobs.noise import replayable_noise
    from workers.runner.fusing import job_noise

    federation = fedkt_submissions[0].federation
    body = launch(
        operator,
        federation,
        django_capture_on_commit_callbacks,
        kind="fedkt",
        privacy_level="L1",
        parameters={**FAST_FEDKT, "query": 20, "privacy": {"gamma": 0.02}},
        seed=3,
    )
    job = Job.objects.get(id=body["id"])
    stored = arrays_from_npz(job.noisy_answers_name)["noisy_counts"]
    noise = job_noise(job)  # what the fusion's child process replays
    replayed = replayable_noise(
        noise.mechanism, stored=noise.stored, on_draw=noise.on_drawn
    ).noisy_counts(np.zeros((20, 2), dtype=np.int64))
    assert np.array_equal(replayed, stored)
    assert Job.objects.get(id=job.id).noise_drawn_at == job.noise_drawn_at


def test_l2_job_reports_each_submissions_own_guarantee_and_charges_no_budget(
    eager_celery, operator, fedkt_submissions, django_capture_on_commit_callbacks
):
    from market.budgets.models import BudgetEntry
    from market.submissions.models import Submission

    reports = {}
    for index, submission in enumerate(fedkt_submissions):
        reports[str(submission.id)] = {
            "epsilon": 1.5 + index,
            "delta": 1e-5,
            "unit": "example-level",
        }
        Submission.objects.filter(id=submission.id).update(
            privacy_level="L2",
            declared_epsilon=1.5 + index,
            privacy_report=reports[str(submission.id)],
        )
    federation = fedkt_submissions[0].federation
    body = launch(
        operator,
        federation,
        django_capture_on_commit_callbacks,
        kind="fedkt",
        privacy_level="L2",
        parameters=FAST_FEDKT,
        seed=5,
    )
    job = succeeded(body)
    # an L2 job fits semi-private students by default (issue 40): its report says why they cost no ε
    assert job.global_model.privacy_report == {
        "level": "L2",
        "data_independent": None,
        "data_dependent": None,
        "submissions": reports,
        "notes": [SEMI_PRIVATE_PRIVACY_NOTE],
    }
    assert not BudgetEntry.objects.filter(spender_kind="job", spender_id=job.id).exists()
