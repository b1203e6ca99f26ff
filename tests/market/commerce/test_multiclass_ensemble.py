"""A six-class ensemble whose members each saw only three to five classes, made by a real ensemble job (Celery eager
mode), bought and run by the buyer with onnxruntime and numpy alone — the package's raw-column ONNX (through the
model card's own snippet) and the bundle (through docs/market.md's recipe) — gives the prediction API's
probabilities, every class in the federation's order. So does an ensemble with an XGBoost JSON member (four
classes) and a torch MLP safetensors member, whose raw-column ONNX holds their ONNX twins."""

import io
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from market.commerce.purchases import purchase_create
from market.commerce.services import listing_create, listing_publish
from tests.conftest import api_client_for, csv_bytes
from tests.fixtures.commerce import download
from tests.market.jobs.helpers import launch, succeeded
from tests.market.submissions.helpers import submit
from workers.features import ONE_HOT_VIEW, ORDINAL_VIEW, encode_features

MARKET_DOC = Path(__file__).resolve().parents[3] / "docs" / "market.md"
LABELS = ["north", "south", "east", "west", "up", "down"]
# Per silo: the federation classes it holds, the learner and the view of the features it reads.
SILO_MEMBERS = (
    ([0, 1, 2], "logistic_regression", ONE_HOT_VIEW),
    ([1, 3, 4, 5], "logistic_regression", ONE_HOT_VIEW),
    ([0, 2, 3, 4, 5], "random_forest", ORDINAL_VIEW),
)


def compass_table(n_rows: int, seed: int) -> pd.DataFrame:
    """Two numerics and a categorical; the label is the largest of six linear scores."""
    generator = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "x": generator.normal(size=n_rows),
            "y": generator.normal(size=n_rows),
            "colour": generator.choice(["red", "green", "blue"], size=n_rows),
        }
    )
    colour = frame["colour"].map({"red": 0.0, "green": 1.0, "blue": -1.0}).to_numpy()
    angles = np.arange(6) * np.pi / 3
    scores = (
        frame["x"].to_numpy()[:, None] * np.cos(angles)
        + frame["y"].to_numpy()[:, None] * np.sin(angles)
        + 0.3 * colour[:, None] * (np.arange(6) % 2)
    )
    frame["direction"] = [LABELS[index] for index in scores.argmax(axis=1)]
    return frame


@pytest.fixture
def six_class_federation(operator):
    from market.federations.services import (
        evaluation_split_upload,
        federation_create,
        public_dataset_upload,
    )

    federation = federation_create(
        name="Compass",
        description="Which of six directions a point leans to.",
        class_labels=LABELS,
        label_column="direction",
        allowed_privacy_levels=["L0"],
        default_privacy_level="L0",
        default_parameters={},
        policies={"membership_policy": "open"},  # its silos join by themselves
        created_by=operator,
    )
    public_dataset_upload(
        federation=federation, data=csv_bytes(compass_table(600, seed=1)), uploaded_by=operator
    )
    evaluation_split_upload(
        federation=federation, data=csv_bytes(compass_table(400, seed=2)), uploaded_by=operator
    )
    return federation


def member_file(frame: pd.DataFrame, spec: dict, classes: list[int], family: str, view: str):
    """A model trained on the silo's rows of ``classes`` only, exported to ONNX with those class indices."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression

    from workers.modelio.export import export_sklearn_onnx
    from workers.silo.students import relabelled_onnx

    labels = frame["direction"].map(LABELS.index).to_numpy()
    rows = np.isin(labels, classes)
    features = encode_features(frame[rows], spec, view=view)
    local_labels = np.searchsorted(classes, labels[rows])  # 0 .. k-1, as the silo trains
    model = (
        LogisticRegression(max_iter=500)
        if family == "logistic_regression"
        else RandomForestClassifier(n_estimators=8, max_depth=5, random_state=0)
    ).fit(features, local_labels)
    return relabelled_onnx(export_sklearn_onnx(model, features.shape[1]), classes)


def xgboost_member_file(
    frame: pd.DataFrame, spec: dict, n_member_classes: int, num_parallel_tree: int = 1
) -> bytes:
    """XGBoost JSON trained on the silo's rows of classes 0 .. n_member_classes-1, on the ordinal view."""
    from xgboost import XGBClassifier

    from workers.modelio.export import export_xgboost_json

    labels = frame["direction"].map(LABELS.index).to_numpy()
    rows = labels < n_member_classes
    features = encode_features(frame[rows], spec, view=ORDINAL_VIEW)
    model = XGBClassifier(
        n_estimators=10, max_depth=3, num_parallel_tree=num_parallel_tree, random_state=0
    )
    return export_xgboost_json(model.fit(features, labels[rows]))


def mlp_member_file(frame: pd.DataFrame, spec: dict) -> bytes:
    """A zoo MLP's safetensors (spec in the metadata) trained on the silo's rows, on the one-hot view."""
    import torch

    from workers.modelio.export import export_torch_safetensors
    from workers.zoo import build_module

    features = torch.from_numpy(encode_features(frame, spec))
    labels = torch.from_numpy(frame["direction"].map(LABELS.index).to_numpy())
    zoo_spec = {
        "architecture": "mlp",
        "n_features": features.shape[1],
        "hidden_sizes": [16],
        "n_classes": len(LABELS),
    }
    torch.manual_seed(0)
    module = build_module(zoo_spec)
    optimiser = torch.optim.Adam(module.parameters(), lr=0.05)
    for _ in range(150):
        optimiser.zero_grad()
        torch.nn.functional.cross_entropy(module(features), labels).backward()
        optimiser.step()
    return export_torch_safetensors(module, zoo_spec)


def run_fresh(script: str, cwd: Path) -> np.ndarray:
    """``script`` in a fresh interpreter with public libraries only; it leaves its answer in out.npy."""
    finished = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            f"import sys\n{script}\nnp.save('out.npy', probabilities)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('market', 'workers', 'django')))",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=cwd,
    )
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.strip().splitlines()[-1] == "[]"  # no Onefold or Django module
    return np.load(cwd / "out.npy")


def bought_and_predicted(global_model, operator, buyer_user, buyer_api, top_up):
    """The model listed, published and bought; 60 raw rows (a missing numeric and a missing category) and the
    prediction API's probabilities of them."""
    listing = listing_create(
        global_model=global_model,
        name="Compass ensemble",
        description="",
        licence_text="Any lawful use.",
        price_cents=100,
        actor=operator,
    )
    listing_publish(listing=listing, actor=operator, override_reason="A delivery test.")
    top_up(buyer_user.organisation, 100)
    purchase_create(listing=listing, user=buyer_user)

    rows = compass_table(60, seed=4).drop(columns=["direction"])
    rows.loc[0, "x"], rows.loc[1, "colour"] = (
        np.nan,
        None,
    )  # a missing numeric and a missing category
    answer = buyer_api.post(
        f"/api/global-models/{global_model.id}/predict/",
        {"rows": json.loads(rows.to_json(orient="records"))},
        format="json",
    ).json()
    platform = np.array(answer["probabilities"])
    assert answer["class_labels"] == LABELS and platform.shape == (60, 6)
    return rows, platform


def raw_column_package_probabilities(buyer_api, global_model, rows, spec, tmp_path) -> np.ndarray:
    """The package of the raw-column ONNX downloaded, and its model card's snippet run on ``rows`` in a fresh
    interpreter with onnxruntime and numpy alone."""
    link = buyer_api.post(
        f"/api/global-models/{global_model.id}/download-links/",
        {"format": "raw_onnx", "package": True},
        format="json",
    ).json()
    response = buyer_api.get(link["url"].replace("http://testserver", ""))
    assert response.status_code == 200, response.content[:300]
    with zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content))) as package:
        package.extractall(tmp_path)
        readme = package.read("README.md").decode()
    (tmp_path / "model.raw.onnx").write_bytes(
        (tmp_path / f"onefold-global-model-{global_model.id}.raw.onnx").read_bytes()
    )
    rows.to_csv(tmp_path / "rows.csv", index=False)
    snippet = re.search(r"```python\n(.*?)```", readme, re.DOTALL).group(1)
    assert json.loads((tmp_path / "feature-spec.json").read_text()) == spec
    return run_fresh(snippet, tmp_path)


def bundle_recipe_probabilities(bundle: bytes, rows, spec, tmp_path) -> np.ndarray:
    """docs/market.md's bundle recipe run on ``rows`` (encoded in both views) in a fresh interpreter."""
    (tmp_path / "model.bundle.zip").write_bytes(bundle)
    for view in (ONE_HOT_VIEW, ORDINAL_VIEW):
        np.save(tmp_path / f"features-{view}.npy", encode_features(rows, spec, view=view))
    recipe = next(
        block
        for block in re.findall(r"```python\n(.*?)```", MARKET_DOC.read_text(), re.DOTALL)
        if "manifest.json" in block
    )
    return run_fresh(recipe, tmp_path)


def ensemble_of(uploads, federation, operator, django_capture_on_commit_callbacks):
    """The global model of an L0 ensemble job over ``uploads`` ``(user, filename, data, family, view)``, each
    uploaded and validated as the user's submission."""
    from market.federations.membership import federation_join
    from market.submissions.models import Submission, SubmissionStatus
    from market.submissions.validation import submission_validate

    for user, filename, data, family, view in uploads:
        federation_join(federation=federation, user=user)
        response = submit(
            api_client_for(user),
            {filename: data},
            federation=federation.slug,
            model_family=family,
            n_local_examples=1000,
            privacy_level="L0",
            feature_view=view,
        )
        assert response.status_code == 202, response.json()
        submission_validate(submission_id=response.json()["id"])
    assert set(Submission.objects.values_list("status", flat=True)) == {SubmissionStatus.VALID}
    job = succeeded(
        launch(
            operator,
            federation,
            django_capture_on_commit_callbacks,
            kind="ensemble",
            privacy_level="L0",
            parameters={},
            seed=1,
        )
    )
    return job.global_model


def test_a_six_class_ensemble_of_partial_members_runs_from_its_package_like_the_prediction_api(
    eager_celery,
    operator,
    silo_user,
    other_silo_user,
    third_silo_user,  # noqa: F811
    six_class_federation,
    buyer_user,
    buyer_api,
    top_up,
    django_capture_on_commit_callbacks,
    tmp_path,
):
    federation = six_class_federation
    spec = federation.public_datasets.first().feature_spec
    silo_rows = compass_table(3000, seed=3)
    uploads = [
        (
            user,
            "member.onnx",
            member_file(
                silo_rows.iloc[index * 1000 : (index + 1) * 1000], spec, classes, family, view
            ),
            family,
            view,
        )
        for index, (user, (classes, family, view)) in enumerate(
            zip((silo_user, other_silo_user, third_silo_user), SILO_MEMBERS)
        )
    ]
    global_model = ensemble_of(uploads, federation, operator, django_capture_on_commit_callbacks)
    rows, platform = bought_and_predicted(global_model, operator, buyer_user, buyer_api, top_up)
    # The bundle: members of 3, 4 and 5 columns, each with the federation classes of its columns.
    bundle = download(buyer_api, global_model.id, "bundle")
    with zipfile.ZipFile(io.BytesIO(bundle)) as archive:
        manifest = json.loads(archive.read("manifest.json"))
    assert [member["classes"] for member in manifest["members"]] == [
        classes for classes, _, _ in SILO_MEMBERS
    ]
    from_bundle = bundle_recipe_probabilities(bundle, rows, spec, tmp_path)
    np.testing.assert_allclose(from_bundle, platform, atol=2e-6)

    # The package: the raw-column ONNX, run by the model card's own snippet on a CSV of raw rows.
    from_raw_onnx = raw_column_package_probabilities(buyer_api, global_model, rows, spec, tmp_path)
    np.testing.assert_allclose(from_raw_onnx, platform, atol=2e-6)


def test_an_ensemble_with_xgboost_and_torch_members_runs_from_its_package_like_the_prediction_api(
    eager_celery,
    operator,
    silo_user,
    other_silo_user,
    third_silo_user,  # noqa: F811
    six_class_federation,
    buyer_user,
    buyer_api,
    top_up,
    django_capture_on_commit_callbacks,
    tmp_path,
):
    import onnx

    federation = six_class_federation
    spec = federation.public_datasets.first().feature_spec
    silo_rows = compass_table(3000, seed=5)
    first, second, third = (silo_rows.iloc[index * 1000 : (index + 1) * 1000] for index in range(3))
    uploads = [
        # a booster that saw classes 0-3 only: four probability columns, widened to six
        (silo_user, "member.json", xgboost_member_file(first, spec, 4), "xgboost", ORDINAL_VIEW),
        (other_silo_user, "member.safetensors", mlp_member_file(second, spec), "mlp", ONE_HOT_VIEW),
        (
            third_silo_user,
            "member.onnx",
            member_file(third, spec, [2, 3, 4, 5], "logistic_regression", ONE_HOT_VIEW),
            "logistic_regression",
            ONE_HOT_VIEW,
        ),
    ]
    global_model = ensemble_of(uploads, federation, operator, django_capture_on_commit_callbacks)
    rows, platform = bought_and_predicted(global_model, operator, buyer_user, buyer_api, top_up)
    # The bundle: the booster and the network each with an ONNX twin, run by docs/market.md's recipe.
    bundle = download(buyer_api, global_model.id, "bundle")
    with zipfile.ZipFile(io.BytesIO(bundle)) as archive:
        manifest = json.loads(archive.read("manifest.json"))
    assert [
        (member["format"], member.get("classes"), member.get("onnx_file"))
        for member in manifest["members"]
    ] == [
        ("xgboost-json", [0, 1, 2, 3], "member-0000.onnx"),
        ("safetensors", [0, 1, 2, 3, 4, 5], "member-0001.onnx"),
        ("onnx", [2, 3, 4, 5], None),
    ]
    from_bundle = bundle_recipe_probabilities(bundle, rows, spec, tmp_path)
    np.testing.assert_allclose(from_bundle, platform, atol=2e-6)

    from_raw_onnx = raw_column_package_probabilities(buyer_api, global_model, rows, spec, tmp_path)
    np.testing.assert_allclose(from_raw_onnx, platform, atol=2e-6)
    # every member is in the graph: the booster's and the regression's classifiers, the network's layers
    operators = {node.op_type for node in onnx.load(tmp_path / "model.raw.onnx").graph.node}
    assert {"TreeEnsembleClassifier", "LinearClassifier", "Gemm", "Relu"} <= operators
    assert (
        platform[:, 4:].sum() > 0
        and from_raw_onnx.argmax(axis=1).tolist() == platform.argmax(axis=1).tolist()
    )


def test_a_member_whose_onnx_twin_predicts_otherwise_is_shipped_without_one_and_the_model_is_not_sold(
    eager_celery,
    operator,
    silo_user,
    other_silo_user,
    six_class_federation,
    operator_api,
    django_capture_on_commit_callbacks,
):
    from market.commerce.models import ListingStatus
    from market.errors import Conflict
    from market.jobs.models import JobLogEntry

    federation = six_class_federation
    spec = federation.public_datasets.first().feature_spec
    silo_rows = compass_table(2000, seed=6)
    first, second = silo_rows.iloc[:1000], silo_rows.iloc[1000:]
    uploads = [
        # a multi-class random-forest booster: onnxmltools gives its trees to the wrong classes
        (
            silo_user,
            "member.json",
            xgboost_member_file(first, spec, 4, num_parallel_tree=3),
            "xgboost",
            ORDINAL_VIEW,
        ),
        (
            other_silo_user,
            "member.onnx",
            member_file(second, spec, [0, 1, 2, 3, 4, 5], "logistic_regression", ONE_HOT_VIEW),
            "logistic_regression",
            ONE_HOT_VIEW,
        ),
    ]
    global_model = ensemble_of(uploads, federation, operator, django_capture_on_commit_callbacks)
    listing = listing_create(
        global_model=global_model,
        name="Compass ensemble",
        description="",
        licence_text="Any lawful use.",
        price_cents=100,
        actor=operator,
    )
    with pytest.raises(Conflict) as refusal:
        listing_publish(listing=listing, actor=operator, override_reason="A delivery test.")
    assert str(refusal.value).startswith(
        f"Global model #{global_model.id} has no raw-column ONNX: member 1 (xgboost-json) could not be "
        "converted to ONNX: "
    )
    assert str(refusal.value).endswith(
        "A buyer must be able to run what it buys with onnxruntime and numpy alone, so this model cannot be "
        "sold; launch the ensemble without that member."
    )
    listing.refresh_from_db()
    assert listing.status == ListingStatus.DRAFT
    rows = compass_table(20, seed=4).drop(columns=["direction"])
    answer = operator_api.post(
        f"/api/global-models/{global_model.id}/predict/",
        {"rows": json.loads(rows.to_json(orient="records"))},
        format="json",
    ).json()
    assert np.allclose(
        np.array(answer["probabilities"]).sum(axis=1), 1.0
    )  # the platform still predicts with the booster itself
    (warning,) = JobLogEntry.objects.filter(job=global_model.job, level="warning")
    assert warning.message.startswith(
        "Bundle member 1 (xgboost-json) has no ONNX twin: The model's ONNX conversion predicts "
        "probabilities up to "
    )
    with zipfile.ZipFile(io.BytesIO(download(operator_api, global_model.id, "bundle"))) as archive:
        manifest = json.loads(archive.read("manifest.json"))
        assert sorted(archive.namelist()) == [
            "manifest.json",
            "member-0000.json",
            "member-0001.onnx",
        ]
    assert [member.get("onnx_file") for member in manifest["members"]] == [None, None]

    link = operator_api.post(
        f"/api/global-models/{global_model.id}/download-links/",
        {"format": "raw_onnx"},
        format="json",
    ).json()
    response = operator_api.get(link["url"].replace("http://testserver", ""))
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert detail.startswith(
        f"Global model #{global_model.id} has no raw-column ONNX: member 1 (xgboost-json) could not be "
        "converted to ONNX: The model's ONNX conversion predicts probabilities up to "
    )
    assert detail.endswith(
        "(at most 1e-05 is accepted), so it cannot be run with onnxruntime alone. Use the prediction API, "
        "or the bundle with the feature specification."
    )
