"""The market on a global model made by a real FedKT job (the jobs pipeline, Celery eager mode): listed, bought,
downloaded and loaded with public libraries, and called through the prediction API — the contract between the
jobs side and the market, end to end."""

import json
import subprocess
import sys

import numpy as np

from market.commerce.purchases import purchase_create
from market.commerce.services import listing_create, listing_publish
from tests.conftest import scaled_timeout
from tests.fixtures.commerce import BUYER_LOADER, download, raw_rows
from tests.fixtures.jobs import FAST_FEDKT
from tests.market.jobs.helpers import launch, succeeded


def test_a_job_made_model_is_sold_downloaded_and_predicted_like_the_platform(
    eager_celery,
    operator,
    fedkt_submissions,
    django_capture_on_commit_callbacks,
    buyer_user,
    buyer_api,
    top_up,
    adult_evaluation,
    tmp_path,
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
    global_model = job.global_model
    # The evaluation step stored the baselines: the split's majority class and each silo's best submission.
    class_counts = [sum(row) for row in global_model.metrics["confusion_matrix"]]
    baselines = global_model.baselines
    assert baselines["majority_class"]["class"] == int(np.argmax(class_counts))
    assert baselines["majority_class"]["accuracy"] == max(class_counts) / sum(class_counts)
    assert baselines["n_silos"] == len(
        {submission.organisation_id for submission in fedkt_submissions}
    )
    assert baselines["best_single_silo"]["balanced_accuracy"] == max(
        metrics["balanced_accuracy"] for metrics in global_model.submission_metrics.values()
    )
    assert (
        global_model.metrics["balanced_accuracy"]
        >= baselines["majority_class"]["balanced_accuracy"] + 0.05
    )
    listing = listing_publish(
        listing=listing_create(
            global_model=global_model,
            name="FedKT income",
            description="",
            licence_text="Any lawful use.",
            price_cents=1000,
            actor=operator,
        ),
        actor=operator,
    )
    top_up(buyer_user.organisation, 1000)
    purchase = purchase_create(listing=listing, user=buyer_user).purchase

    # The silos' shares follow the job's contribution weights and add up with the fee to the price.
    shares = {
        entry.wallet.organisation_id: entry.amount_cents
        for entry in purchase.entries.filter(kind="revenue_credit")
    }
    assert set(map(str, shares)) <= set(global_model.contribution_weights)
    assert sum(shares.values()) + purchase.fee_cents == 1000

    card = buyer_api.get(f"/api/listings/{listing.id}/").json()["card"]
    assert card["contributing_silos"] == len(fedkt_submissions)
    assert card["metrics"]["global"]["accuracy"] == global_model.metrics["accuracy"]
    assert "submissions" not in card["reproducibility"]["lineage"]
    raw, features, _ = adult_evaluation
    platform = buyer_api.post(
        f"/api/global-models/{global_model.id}/predict/",
        {"rows": raw_rows(raw.iloc[:100])},
        format="json",
    )
    assert platform.status_code == 200, platform.json()
    np.save(tmp_path / "features.npy", features[:100])
    for model_format in sorted(file.format for file in global_model.files.all()):
        model_path = tmp_path / f"model.{model_format}"
        model_path.write_bytes(download(buyer_api, global_model.id, model_format))
        finished = subprocess.run(
            [
                sys.executable,
                "-I",
                "-c",
                BUYER_LOADER,
                model_format,
                str(model_path),
                str(tmp_path / "features.npy"),
                str(tmp_path / "out.npy"),
            ],
            capture_output=True,
            text=True,
            timeout=scaled_timeout(180),
            cwd=tmp_path,
        )
        assert finished.returncode == 0, finished.stderr
        np.testing.assert_allclose(
            np.load(tmp_path / "out.npy"),
            np.asarray(platform.json()["probabilities"]),
            atol=1e-5,
            err_msg=model_format,
        )
    assert json.loads(json.dumps(platform.json()["class_labels"])) == federation.class_labels
