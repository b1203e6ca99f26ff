"""`train` on a silo's own machine: FedKT's party side, L2 declarations, local models, FD logits, exports."""

import json

import numpy as np
import pandas as pd
import pytest

from tests.conftest import csv_bytes
from tests.fixtures.silo import SMALL_FORESTS
from workers.features import encode_features
from workers.modelio import ModelLimits, inspect_model
from workers.modelio.native import predict_probabilities
from workers.numbers import epsilon_text
from workers.privacy.accounting import party_noise_privacy_bound
from workers.privacy.mechanisms import LaplaceNoise


def test_train_writes_students_that_pass_the_markets_static_checks_and_a_metadata_file(
    run_cli, pulled, silo_csv
):
    code, out, err = run_cli(
        "train", "adult-income", "--data", silo_csv, "--pulled", pulled, *SMALL_FORESTS, "--json"
    )
    assert code == 0, err
    result = json.loads(out)
    folder = pulled / "students"
    assert result["output"] == str(folder)
    assert result["files"] == ["student-1.onnx", "student-2.onnx", "own-model.onnx"]
    assert (result["partitions"], result["teachers"], result["design_chosen_for_rows"]) == (
        2,
        5,
        True,
    )
    own = result["own_model"]
    assert (own["file"], own["model_family"], own["learner"]) == (
        "own-model.onnx",
        "random_forest",
        {"family": "random_forest", "n_estimators": 100, "max_depth": 12},
    )
    assert 0.7 < own["validation_score"] <= 1
    assert (result["n_local_examples"], result["n_validation_rows"]) == (400, 100)
    assert sum(result["label_distribution"]) == 400
    assert 0.7 < result["local_validation_score"] <= 1
    assert result["model_family"] == "random_forest"
    assert (result["privacy_level"], result["declared_epsilon"], result["privacy_parameters"]) == (
        "L0",
        None,
        {},
    )
    assert json.loads((folder / "metadata.json").read_text()) == {
        k: v for k, v in result.items() if k != "output"
    }
    assert (result["teacher"], result["feature_view"]) == (
        {"family": "decision_tree", "max_depth": 6},
        "ordinal",
    )
    spec = json.loads((pulled / "feature-spec.json").read_text())
    for name in result["files"]:  # tree students read the ordinal view: one feature per column
        info = inspect_model(
            (folder / name).read_bytes(),
            n_features=len(spec["columns"]),
            n_classes=2,
            limits=ModelLimits(),
        )
        assert info.classes == (0, 1)


@pytest.mark.parametrize(
    ("rows", "training_rows", "partitions", "teachers"),
    [(12, 9, 1, 1), (150, 120, 2, 5), (40, 32, 2, 3)],
)
def test_train_with_defaults_chooses_s_and_t_for_the_silos_rows_and_trains_every_silo_that_has_rows(
    run_cli, pulled, tmp_path, adult_frame, rows, training_rows, partitions, teachers
):
    path = tmp_path / "silo.csv"
    path.write_bytes(csv_bytes(adult_frame.iloc[1000 : 1000 + rows]))
    code, out, err = run_cli(
        "train", "adult-income", "--data", path, "--pulled", pulled, *SMALL_FORESTS, "--json"
    )
    assert code == 0, err
    result = json.loads(out)
    assert (result["n_local_examples"], result["partitions"], result["teachers"]) == (
        training_rows,
        partitions,
        teachers,
    )
    students = [f"student-{index}.onnx" for index in range(1, partitions + 1)]
    assert result["files"] == [*students, "own-model.onnx"]
    code, text, _ = run_cli(
        "train", "adult-income", "--data", path, "--pulled", pulled, *SMALL_FORESTS
    )
    assert (
        f"FedKT: s = {partitions} partition(s) × t = {teachers} teacher(s) (chosen for your rows)."
        in text
    )


def test_train_keeps_the_s_and_t_a_silo_asks_for_and_a_single_teacher_trains_on_a_twelve_row_silo(
    run_cli, pulled, tmp_path, adult_frame
):
    path = tmp_path / "silo.csv"
    path.write_bytes(csv_bytes(adult_frame.iloc[1000:1012]))
    code, out, err = run_cli(
        "train", "adult-income", "--data", path, "--pulled", pulled, "--teachers", "1", "--json"
    )
    assert code == 0, err
    result = json.loads(out)
    assert (result["partitions"], result["teachers"]) == (
        1,
        1,
    )  # s follows the one teacher asked for
    code, out, err = run_cli(
        "train", "adult-income", "--data", path, "--pulled", pulled, "-s", "2", "-t", "1", "--json"
    )
    assert code == 0, err
    result = json.loads(out)
    assert (result["partitions"], result["teachers"], result["design_chosen_for_rows"]) == (
        2,
        1,
        False,
    )


def test_train_without_an_own_model_where_asked_or_where_the_federation_does_not_accept_one(
    run_cli, pulled, silo_csv
):
    code, out, err = run_cli(
        "train",
        "adult-income",
        "--data",
        silo_csv,
        "--pulled",
        pulled,
        *SMALL_FORESTS,
        "--no-own-model",
        "--json",
    )
    assert code == 0, err
    assert (json.loads(out)["files"], json.loads(out)["own_model"]) == (
        ["student-1.onnx", "student-2.onnx"],
        None,
    )
    federation = json.loads((pulled / "federation.json").read_text())
    (pulled / "federation.json").write_text(json.dumps({**federation, "accepts_own_models": False}))
    code, out, err = run_cli(
        "train", "adult-income", "--data", silo_csv, "--pulled", pulled, *SMALL_FORESTS, "--json"
    )
    assert code == 0, err
    assert json.loads(out)["own_model"] is None


def test_train_reports_missing_values_unknown_categories_and_ignored_columns(
    run_cli, pulled, tmp_path, adult_frame
):
    rows = adult_frame.iloc[2500:3000].copy()
    rows["workclass"] = rows["workclass"].astype(object)
    rows.loc[rows.index[:4], "workclass"] = "Space-agency"
    rows.loc[rows.index[4:6], "hours-per-week"] = np.nan
    rows.loc[rows.index[6], "income"] = np.nan
    rows["patient_id"] = range(len(rows))
    path = tmp_path / "messy.csv"
    path.write_bytes(csv_bytes(rows))
    code, out, err = run_cli(
        "train", "adult-income", "--data", path, "--pulled", pulled, *SMALL_FORESTS, "--json"
    )
    assert code == 0, err
    encoding = json.loads(out)["encoding"]
    assert encoding["unknown_categories"]["workclass"] == {"Space-agency": 4}
    assert encoding["missing_values"]["hours-per-week"] == 2
    assert (encoding["rows"], encoding["rows_without_label"], encoding["ignored_columns"]) == (
        500,
        1,
        ["patient_id"],
    )
    code, text, _ = run_cli(
        "train", "adult-income", "--data", path, "--pulled", pulled, *SMALL_FORESTS
    )
    assert (
        "Categories the public data lacks (encoded as no category): workclass: Space-agency" in text
    )
    assert "Dropped 1 rows without a label." in text
    assert "Ignored columns the federation does not use: patient_id." in text


def test_train_at_l2_declares_the_accountants_epsilon_and_prints_it(run_cli, pulled, silo_csv):
    code, out, err = run_cli(
        "train",
        "adult-income",
        "--data",
        silo_csv,
        "--pulled",
        pulled,
        *SMALL_FORESTS,
        "--privacy-level",
        "L2",
        "--gamma",
        "0.05",
        "--queries",
        "200",
        "--json",
    )
    assert code == 0, err
    result = json.loads(out)
    bound = party_noise_privacy_bound(
        mechanism=LaplaceNoise(gamma=0.05), n_queries=200, partitions=2, teachers=5, delta=1e-5
    )
    assert result["declared_epsilon"] == bound.epsilon
    assert result["privacy_parameters"] == {
        "gamma": 0.05,
        "delta": 1e-5,
        "partitions": 2,
        "teachers": 5,
        "queries": 200,
    }
    assert result["privacy_report"] == bound.as_dict()
    assert result["queried_public_rows"] == 200
    _, text, _ = run_cli(
        "train",
        "adult-income",
        "--data",
        silo_csv,
        "--pulled",
        pulled,
        *SMALL_FORESTS,
        "--privacy-level",
        "L2",
        "--gamma",
        "0.05",
        "--queries",
        "200",
    )
    assert (
        f"L2: uploading charges ε = {epsilon_text(bound.epsilon)} (example-level, data-independent, δ = 1e-05, "
        "400 noisy queries) to your privacy budget." in text
    )


def test_train_local_writes_one_model_and_fd_logits_per_label(run_cli, pulled, silo_csv):
    code, out, err = run_cli(
        "train",
        "adult-income",
        "--data",
        silo_csv,
        "--pulled",
        pulled,
        "--local",
        "--student",
        "logistic_regression",
        "--fd-logits",
        "--json",
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["files"] == ["local-model.onnx"]
    assert (result["algorithm"], result["model_family"]) == ("local", "logistic_regression")
    logits = json.loads((pulled / "local-model" / "fd-logits.json").read_text())
    assert (logits["class_labels"], logits["present"]) == (["<=50K", ">50K"], [True, True])
    matrix = np.array(logits["per_label_logits"])
    assert matrix.shape == (2, 2)
    spec = json.loads((pulled / "feature-spec.json").read_text())
    rows = pd.read_csv(silo_csv, na_values=["?"], skipinitialspace=True)
    probabilities = predict_probabilities(
        (pulled / "local-model" / "local-model.onnx").read_bytes(),
        "onnx",
        encode_features(rows, spec),
        n_classes=2,
    )
    labels = (rows["income"] == ">50K").to_numpy()
    expected = [
        np.log(np.clip(probabilities[labels == label], 1e-12, None)).mean(axis=0)
        for label in (False, True)
    ]
    assert np.allclose(matrix, expected, atol=1e-3)
    assert (
        matrix[0, 0] > matrix[0, 1] and matrix[1, 1] > matrix[1, 0]
    )  # each label's rows lean to their class


def test_a_student_that_saw_one_class_exports_as_a_graph_that_predicts_it():
    from workers.learners import fit_aligned
    from workers.silo.students import export_student

    features = np.random.default_rng(0).normal(size=(30, 4)).astype(np.float32)
    student = fit_aligned("random_forest", features, np.full(30, 1), n_classes=3, seed=0)
    exported = export_student(student, n_features=4, n_classes=3)
    assert (exported.suffix, exported.model_family) == (".onnx", "random_forest")
    assert inspect_model(
        exported.data, n_features=4, n_classes=3, limits=ModelLimits()
    ).classes == (0, 1, 2)
    probabilities = predict_probabilities(exported.data, "onnx", features, n_classes=3)
    assert np.array_equal(probabilities.argmax(axis=1), np.full(30, 1))


@pytest.mark.parametrize("family", ["random_forest", "xgboost", "logistic_regression", "mlp"])
def test_a_student_missing_a_class_exports_in_the_federations_class_indices(family):
    from workers.learners import fit_aligned
    from workers.silo.students import export_student

    rng = np.random.default_rng(0)
    features = rng.normal(size=(200, 5)).astype(np.float32)
    labels = np.where(features[:, 0] > 0, 3, 1)  # classes 1 and 3 of 0..3
    learner = {"family": family, "epochs": 30} if family == "mlp" else family
    student = fit_aligned(learner, features, labels, n_classes=4, seed=0)
    exported = export_student(student, n_features=5, n_classes=4)
    model_format = "safetensors" if family == "mlp" else "onnx"
    assert exported.suffix == f".{model_format}"
    probabilities = predict_probabilities(exported.data, model_format, features, n_classes=4)
    assert np.mean(probabilities.argmax(axis=1) == student.predict(features)) > 0.97
    assert probabilities[:, [0, 2]].max() < 1e-6


def test_labels_written_with_a_trailing_full_stop_map_to_the_federations_classes(
    pulled, adult_frame
):
    from workers.silo.table import encode_silo_table

    rows = adult_frame.iloc[2500:2510].copy()
    rows["income"] = rows["income"].astype(str) + "."
    spec = json.loads((pulled / "feature-spec.json").read_text())
    encoded = encode_silo_table(rows, spec, label_column="income", class_labels=["<=50K", ">50K"])
    assert (
        encoded.labels.tolist()
        == (adult_frame.iloc[2500:2510]["income"] == ">50K").astype(int).tolist()
    )


def test_numeric_labels_read_as_floats_match_text_classes(pulled, adult_frame):
    from workers.silo.table import encode_silo_table

    rows = adult_frame.iloc[2500:2504].copy()
    rows["income"] = pd.Series([1.0, 0.0, 1.0, np.nan], index=rows.index)
    spec = json.loads((pulled / "feature-spec.json").read_text())
    encoded = encode_silo_table(rows, spec, label_column="income", class_labels=["0", "1"])
    assert encoded.labels.tolist() == [1, 0, 1]
    assert encoded.report["rows_without_label"] == 1


def test_train_reads_parquet_as_well_as_csv(run_cli, pulled, tmp_path, adult_frame):
    path = tmp_path / "silo.data"  # the format is read from the content, not the name
    adult_frame.iloc[2500:3000].to_parquet(path)
    code, out, err = run_cli(
        "train", "adult-income", "--data", path, "--pulled", pulled, *SMALL_FORESTS, "--json"
    )
    assert code == 0, err
    assert (json.loads(out)["n_local_examples"], json.loads(out)["encoding"]["rows"]) == (400, 500)


def test_silo_train_in_process_trains_exactly_what_the_train_command_does(
    run_cli, pulled, silo_csv
):
    from workers.silo.table import load_table
    from workers.silo.training import silo_train

    code, out, err = run_cli(
        "train", "adult-income", "--data", silo_csv, "--pulled", pulled, "--json"
    )
    assert code == 0, err
    command = json.loads(out)
    with np.load(pulled / "features.npz") as arrays:
        public = arrays["features"]
    result, data = silo_train(
        load_table(silo_csv),
        json.loads((pulled / "feature-spec.json").read_text()),
        public,
        label_column="income",
        class_labels=["<=50K", ">50K"],
    )
    assert len(result.models) == 3 and len(data.labels) == 500
    same = (
        "local_validation_score",
        "student_validation_scores",
        "own_model",
        "partitions",
        "teachers",
    )
    assert {name: result.metadata[name] for name in same if name != "own_model"} == {
        name: command[name] for name in same if name != "own_model"
    }
    assert (
        result.metadata["own_model"]["validation_score"] == command["own_model"]["validation_score"]
    )


def test_a_small_silo_at_l2_declares_the_epsilon_of_the_s_and_t_it_trained_with(
    run_cli, pulled, tmp_path, adult_frame
):
    path = tmp_path / "small.csv"
    path.write_bytes(csv_bytes(adult_frame.iloc[1000:1012]))  # 9 training rows: s = t = 1
    code, out, err = run_cli(
        "train",
        "adult-income",
        "--data",
        path,
        "--pulled",
        pulled,
        *SMALL_FORESTS,
        "--privacy-level",
        "L2",
        "--gamma",
        "0.05",
        "--queries",
        "50",
        "--json",
    )
    assert code == 0, err
    result = json.loads(out)
    assert (result["partitions"], result["teachers"], result["own_model"]) == (1, 1, None)
    assert result["files"] == ["student-1.onnx"]  # no own model at L2: it has no noise
    parameters = result["privacy_parameters"]
    assert (parameters["partitions"], parameters["teachers"]) == (1, 1)
    one = party_noise_privacy_bound(
        mechanism=LaplaceNoise(gamma=0.05), n_queries=50, partitions=1, teachers=1, delta=1e-5
    )
    two = party_noise_privacy_bound(
        mechanism=LaplaceNoise(gamma=0.05), n_queries=50, partitions=2, teachers=5, delta=1e-5
    )
    assert result["declared_epsilon"] == one.epsilon < two.epsilon
    # by hand: one example moves one vote (L1 distance 2) in one partition per query, Laplace of scale 1/γ
    assert result["declared_epsilon"] <= 50 * 2 * 0.05
