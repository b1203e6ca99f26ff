"""What each viewer may see of a global model (market.jobs.visibility), through the global-model API and the card.

The world: a buyer launched a job over two silos' submissions; its global model has a data-dependent ε of 0.8
(data-independent 2.5), the silos' weights are 0.7 and 0.3 and their submissions scored 0.6173 and 0.5419.
"""

import pytest

from tests.fixtures.jobs import read_as


def test_the_launching_buyer_sees_no_data_dependent_epsilon_no_contributions_and_no_silo_metrics(
    launched_model, buyer_user
):  # noqa: F811
    body = read_as(buyer_user, launched_model)
    assert body["privacy_report"]["data_dependent"] is None
    assert body["privacy_report"]["data_independent"]["epsilon"] == 2.5
    assert (body["submission_metrics"], body["contribution_weights"]) == ({}, {})
    assert "submissions" not in body["lineage"] and "fusion" not in body["lineage"]
    assert body["metrics"]["accuracy"] == launched_model.metrics["accuracy"]


def test_a_participating_silo_sees_its_own_metrics_only_and_at_l1_not_its_share(
    launched_model, silo_user
):
    body = read_as(silo_user, launched_model)
    own = launched_model.submissions["silo_a"]
    assert body["privacy_report"]["data_dependent"] is None
    assert body["submission_metrics"] == {
        str(own.id): {
            "accuracy": 0.6173,
            "balanced_accuracy": 0.6173,
            "macro_f1": 0.6173,
            "roc_auc": 0.6173,
        }
    }
    # an L1 share is normalised over every silo's un-noised votes (market.jobs.visibility.silo_share_visible)
    assert body["contribution_weights"] == {}
    assert "submissions" not in body["lineage"]


def test_the_operator_sees_everything(launched_model, operator):
    body = read_as(operator, launched_model)
    assert body["privacy_report"]["data_dependent"]["epsilon"] == 0.8
    assert sorted(metrics["accuracy"] for metrics in body["submission_metrics"].values()) == [
        0.5419,
        0.6173,
    ]
    assert sorted(body["contribution_weights"].values()) == [0.3, 0.7]
    assert body["lineage"]["submissions"] == [11, 12] and body["lineage"]["fusion"] == {
        "weights": {"11": 0.7, "12": 0.3}
    }


def test_what_the_federation_publishes_every_viewer_sees(
    launched_model, buyer_user, federation_with_data
):  # noqa: F811
    federation_with_data.publish_data_dependent_epsilon = True
    federation_with_data.publish_contributions = True
    federation_with_data.save()
    body = read_as(buyer_user, launched_model)
    assert body["privacy_report"]["data_dependent"]["epsilon"] == 0.8
    assert sorted(metrics["accuracy"] for metrics in body["submission_metrics"].values()) == [
        0.5419,
        0.6173,
    ]
    assert sorted(body["contribution_weights"].values()) == [0.3, 0.7]
    assert body["lineage"]["submissions"] == [11, 12]


def test_data_dependent_epsilon_alone_can_be_published(
    launched_model, other_silo_user, federation_with_data
):
    federation_with_data.publish_data_dependent_epsilon = True
    federation_with_data.save()
    body = read_as(other_silo_user, launched_model)
    assert body["privacy_report"]["data_dependent"]["epsilon"] == 0.8
    assert body["contribution_weights"] == {}  # an L1 share: not without publish_contributions
    assert [metrics["accuracy"] for metrics in body["submission_metrics"].values()] == [0.5419]


L2_REPORT = {
    "level": "L2",
    "submissions": {
        "11": {
            "epsilon": 1.5,
            "delta": 1e-5,
            "unit": "example-level",
            "mechanism": "gaussian",
            "sigma": 4.0,
        },
        "12": {
            "epsilon": 3.25,
            "delta": 1e-5,
            "unit": "example-level",
            "mechanism": "gaussian",
            "sigma": 2.0,
        },
    },
}


def test_an_l2_model_shows_the_weakest_silo_guarantee_to_everyone_and_each_silo_guarantee_to_the_operator(
    make_global_model, buyer_user, operator
):  # noqa: F811
    from market.jobs.visibility import global_model_view

    global_model = make_global_model(privacy_level="L2", privacy_report=L2_REPORT)
    for viewer in (buyer_user, None):
        report = global_model_view(global_model=global_model, user=viewer).privacy_report
        assert report["submissions"] == {} and report["weakest_silo_guarantee"]["epsilon"] == 3.25
    assert (
        global_model_view(global_model=global_model, user=operator).privacy_report["submissions"]
        == L2_REPORT["submissions"]
    )


def test_the_l2_card_states_the_weakest_silo_guarantee_without_naming_it(
    published_listing, buyer_user
):
    from market.commerce.cards import model_card

    card = model_card(published_listing(privacy_level="L2", privacy_report=L2_REPORT))
    assert (card["privacy"]["epsilon"], card["privacy"]["sigma"]) == (3.25, 2.0)
    assert card["privacy"]["bound"] == "largest ε among the contributing silos' own guarantees"
    assert "11" not in str(card["privacy"]) and "12" not in str(card["privacy"])


@pytest.mark.parametrize("level", ["L0", "L2"])
def test_at_l0_and_l2_a_silo_sees_its_own_share_and_no_other(launched_model, silo_user, level):
    launched_model.lineage = {**(launched_model.lineage or {}), "privacy_level": level}
    launched_model.save(update_fields=["lineage"])
    body = read_as(silo_user, launched_model)
    assert body["contribution_weights"] == {str(silo_user.organisation_id): 0.7}
