"""Global models to sell, built here as the jobs side would: real models trained on the encoded Adult rows,
measured on the federation's evaluation split, their files written to default storage in the contract's formats
(scikit-learn: skops + onnx; XGBoost: xgboost-json + onnx; zoo network: safetensors + onnx; ensemble: bundle)."""

import itertools

import numpy as np
import pytest
from sklearn.metrics import (
    accuracy_score,
    balanced_accuracy_score,
    confusion_matrix,
    f1_score,
    roc_auc_score,
)

from tests.conftest import ADULT_LABELS
from workers.features import encode_features, encode_labels
from workers.modelio.base import ModelFormat
from workers.modelio.bundle import BundleMember, bundle_write

BUYER_PASSWORD = "buyer-password"


def evaluation_metrics(probabilities: np.ndarray, labels: np.ndarray) -> dict:
    """The metrics shape of GlobalModel.metrics, computed on the evaluation split."""
    predicted = probabilities.argmax(axis=1)
    confidence = probabilities.max(axis=1)
    edges = np.linspace(0.5, 1.0, 6)
    bins = np.clip(np.digitize(confidence, edges[1:-1]), 0, len(edges) - 2)
    correct = predicted == labels
    reliability = {
        "bin_edges": edges.tolist(),
        "confidence": [
            float(confidence[bins == b].mean()) if (bins == b).any() else 0.0
            for b in range(len(edges) - 1)
        ],
        "accuracy": [
            float(correct[bins == b].mean()) if (bins == b).any() else 0.0
            for b in range(len(edges) - 1)
        ],
        "count": [int((bins == b).sum()) for b in range(len(edges) - 1)],
    }
    return {
        "accuracy": float(accuracy_score(labels, predicted)),
        "balanced_accuracy": float(balanced_accuracy_score(labels, predicted)),
        "macro_f1": float(f1_score(labels, predicted, average="macro")),
        "roc_auc": float(roc_auc_score(labels, probabilities[:, 1])),
        "confusion_matrix": confusion_matrix(labels, predicted, labels=[0, 1]).tolist(),
        "reliability": reliability,
    }


@pytest.fixture(scope="session")
def adult_evaluation(adult_frame, adult_public_csv):
    """Raw and encoded evaluation rows (2,000–2,500 of the sample, as the federation's evaluation split)."""
    from workers.features import infer_feature_spec, read_table

    spec = infer_feature_spec(read_table(adult_public_csv), label_column="income")
    raw = adult_frame.iloc[2000:2500].reset_index(drop=True)
    return raw, encode_features(raw, spec), encode_labels(raw["income"], ADULT_LABELS)


@pytest.fixture(scope="session")
def global_model_artifacts(adult_models, adult_training, adult_evaluation):
    """Per model family: its files {format: bytes} and the platform's probabilities on the evaluation rows."""
    import skops.io
    import torch

    from workers.modelio.export import (
        export_sklearn_onnx,
        export_torch_onnx,
        export_torch_safetensors,
        export_xgboost_json,
        export_xgboost_onnx,
    )

    n_features = adult_training[0].shape[1]
    _, features, _ = adult_evaluation
    forest, boosted, network = (
        adult_models["forest"],
        adult_models["boosted"],
        adult_models["network"],
    )
    with torch.no_grad():
        network_probabilities = torch.softmax(network(torch.from_numpy(features)), dim=1).numpy()
    forest_onnx, boosted_json = (
        export_sklearn_onnx(forest, n_features),
        export_xgboost_json(boosted),
    )
    forest_probabilities, boosted_probabilities = (
        forest.predict_proba(features),
        boosted.predict_proba(features),
    )
    return {
        "random_forest": (
            {"skops": skops.io.dumps(forest), "onnx": forest_onnx},
            forest_probabilities,
        ),
        "xgboost": (
            {"xgboost-json": boosted_json, "onnx": export_xgboost_onnx(boosted, n_features)},
            boosted_probabilities,
        ),
        "mlp": (
            {
                "safetensors": export_torch_safetensors(network, adult_models["network_spec"]),
                "onnx": export_torch_onnx(network, n_features),
            },
            network_probabilities,
        ),
        "ensemble": (
            {
                "bundle": bundle_write(
                    [
                        BundleMember(ModelFormat.ONNX, forest_onnx, 0.25),
                        BundleMember(ModelFormat.XGBOOST_JSON, boosted_json, 0.75),
                    ],
                    n_classes=2,
                    n_features=n_features,
                )
            },
            0.25 * forest_probabilities + 0.75 * boosted_probabilities,
        ),
    }


@pytest.fixture
def buyer_user(db):
    from market.accounts.services import organisation_create, user_create

    buyer = organisation_create(name="Fabrikam Insurance", is_silo=False, is_buyer=True)
    return user_create(username="fay-fabrikam", password=BUYER_PASSWORD, organisation=buyer)


@pytest.fixture
def buyer_api(buyer_user):
    from tests.conftest import api_client_for

    return api_client_for(buyer_user)


@pytest.fixture
def make_global_model(
    federation_with_data, operator, global_model_artifacts, adult_evaluation, adult_training
):
    """``make_global_model(family="random_forest", weights={org_id: w}, ...)`` → a GlobalModel with its files."""
    from market.jobs.models import GlobalModel, GlobalModelFile, Job, JobStatus
    from market.storage import artifact_save, sha256_of

    stored = {}  # one stored copy of each file, shared by the models of a test

    def make(
        *,
        family: str = "random_forest",
        weights: dict | None = None,
        privacy_level: str = "L1",
        privacy_report: dict | None = None,
        submission_metrics: dict | None = None,
        metrics: dict | None = None,
        baselines: dict | None = None,
    ):
        files, probabilities = global_model_artifacts[family]
        _, _, labels = adult_evaluation
        federation = federation_with_data
        job = Job.objects.create(
            federation=federation,
            kind="ensemble" if family == "ensemble" else "fedkt",
            privacy_level=privacy_level,
            parameters={"partitions": 2, "learner": family},
            seed=7,
            public_dataset=federation.public_datasets.first(),
            evaluation_split=federation.evaluation_splits.first(),
            requested_by=operator,
            status=JobStatus.SUCCEEDED,
        )
        metrics = metrics if metrics is not None else evaluation_metrics(probabilities, labels)
        global_model = GlobalModel.objects.create(
            job=job,
            federation=federation,
            model_family=family,
            n_features=adult_training[0].shape[1],
            n_classes=2,
            metrics=metrics,
            submission_metrics=submission_metrics
            if submission_metrics is not None
            else {
                "11": {**metrics, "accuracy": metrics["accuracy"] - 0.02, "macro_f1": 0.70},
                "12": {**metrics, "accuracy": metrics["accuracy"] - 0.06, "macro_f1": 0.60},
            },
            privacy_report=privacy_report
            if privacy_report is not None
            else {
                "level": privacy_level,
                "data_independent": {
                    "epsilon": 2.5,
                    "delta": 1e-5,
                    "unit": "party-level",
                    "mechanism": "laplace",
                    "gamma": 0.04,
                    "n_queries": 20,
                },
                "data_dependent": {
                    "epsilon": 0.8,
                    "delta": 1e-5,
                    "unit": "party-level",
                    "mechanism": "laplace",
                    "gamma": 0.04,
                    "n_queries": 20,
                },
            },
            lineage={
                "job": job.id,
                "public_dataset": {"content_sha256": job.public_dataset.content_sha256},
                "seed": 7,
                "code_version": "test",
                "submissions": [11, 12],
                "fusion": {"weights": {"11": 0.7, "12": 0.3}},
            },
            contribution_weights=weights or {},
            contribution_rule="votes agreeing with the consensus",
            baselines=baselines,
        )
        for model_format, data in files.items():
            if model_format not in stored:
                stored[model_format] = artifact_save(
                    name=f"global-models/{family}.{model_format}", data=data, stored_names=[]
                )
            GlobalModelFile.objects.create(
                global_model=global_model,
                role="portable" if model_format == "onnx" else "native",
                format=model_format,
                stored_name=stored[model_format],
                sha256=sha256_of(data),
                size_bytes=len(data),
            )
        return global_model

    return make


@pytest.fixture
def published_listing(make_global_model, operator, silo_user, other_silo_user):
    """``published_listing(price_cents=..., family=..., weights=...)``: a global model listed and published."""
    from market.commerce.services import listing_create, listing_publish

    def publish(
        *,
        price_cents: int = 10_000,
        family: str = "random_forest",
        weights: dict | None = None,
        name: str | None = None,
        description: str = "Income above 50K from census features.",
        listing_terms: dict | None = None,
        **model,
    ):
        weights = (
            weights
            if weights is not None
            else {str(silo_user.organisation_id): 0.7, str(other_silo_user.organisation_id): 0.3}
        )
        global_model = make_global_model(family=family, weights=weights, **model)
        listing = listing_create(
            global_model=global_model,
            name=name or f"Adult income {family}",
            description=description,
            licence_text="Use for any lawful purpose.",
            price_cents=price_cents,
            actor=operator,
            **(listing_terms or {}),
        )
        return listing_publish(listing=listing, actor=operator)

    return publish


@pytest.fixture
def top_up(operator):
    from market.commerce.wallets import wallet_top_up

    numbers = itertools.count(1)

    def credit(organisation, amount_cents: int, reference: str | None = None):
        entry, _ = wallet_top_up(
            organisation=organisation,
            amount_cents=amount_cents,
            actor=operator,
            reference=reference or f"test-payment-{next(numbers)}",
        )
        return entry

    return credit
