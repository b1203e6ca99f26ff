"""The toolkit's default learners and the feature view they pick (issue 19, docs/results/defaults.md)."""

import pytest

from workers.learners import make_learner
from workers.silo.training import DEFAULT_STUDENT, DEFAULT_TEACHER, TrainingSettings
from workers.silo.training_command import learner_setting


def test_the_defaults_are_depth_6_tree_teachers_and_forest_students_on_the_ordinal_view():
    settings = TrainingSettings()
    assert settings.teacher == {"family": "decision_tree", "max_depth": 6}
    assert settings.student == {"family": "random_forest", "n_estimators": 25, "max_depth": 6}
    assert settings.feature_view() == settings.feature_view(local=True) == "ordinal"
    assert type(make_learner(DEFAULT_TEACHER)).__name__ == "DecisionTreeClassifier"


@pytest.mark.parametrize(
    "teacher, student, local, view",
    [
        ({"family": "mlp"}, DEFAULT_STUDENT, False, "one_hot"),
        (DEFAULT_TEACHER, {"family": "logistic_regression"}, False, "one_hot"),
        (
            {"family": "mlp"},
            DEFAULT_STUDENT,
            True,
            "ordinal",
        ),  # a --local model is the student alone
        ({"family": "xgboost"}, {"family": "xgboost"}, False, "ordinal"),
    ],
)
def test_the_view_is_ordinal_only_when_every_model_trained_is_a_tree_family(
    teacher, student, local, view
):
    assert TrainingSettings(teacher=teacher, student=student).feature_view(local=local) == view


def test_naming_no_family_or_the_defaults_family_keeps_its_hyperparameters_and_another_family_starts_bare():
    assert learner_setting(None, [], DEFAULT_TEACHER) == {"family": "decision_tree", "max_depth": 6}
    assert learner_setting("decision_tree", ["max_depth=4"], DEFAULT_TEACHER) == {
        "family": "decision_tree",
        "max_depth": 4,
    }
    assert learner_setting("random_forest", ["n_estimators=50"], DEFAULT_TEACHER) == {
        "family": "random_forest",
        "n_estimators": 50,
    }
