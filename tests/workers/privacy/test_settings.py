"""An L1 job's server noise is one type, resolved once from the request, stored in the shape it always had and read
back by the price, the runner and the estimate."""

import pytest

from workers.privacy.mechanisms import ConfidentGaussianNoise, GaussianNoise, LaplaceNoise
from workers.privacy.reports import PrivacyReport
from workers.privacy.settings import (
    DEFAULT_GAMMA,
    PRIVACY_HELP,
    PrivacySettings,
)

NO_DEFAULTS: dict = {}


def resolved(given, *, defaults=NO_DEFAULTS, sigma=None, most_votes=10):
    return PrivacySettings.resolved(
        given,
        defaults=defaults,
        default_delta=1e-5,
        n_queries=40,
        sigma=sigma,
        most_votes=most_votes,
    )


def test_a_request_naming_nothing_gets_gnmax_at_the_calibrated_sigma_in_the_stored_shape():
    assert resolved(None, sigma=7.0).as_dict() == {
        "mechanism": "gaussian",
        "gamma": None,
        "sigma": 7.0,
        "delta": 1e-5,
        "n_queries": 40,
    }


def test_gamma_means_laplace_from_the_request_or_else_the_federations_defaults():
    assert resolved({"gamma": 0.1}) == PrivacySettings(
        mechanism="laplace", delta=1e-5, n_queries=40, gamma=0.1
    )
    assert resolved({}, defaults={"gamma": 0.02}).gamma == 0.02
    assert resolved({"mechanism": "laplace"}).gamma == DEFAULT_GAMMA
    # a request's σ wins over the federation's γ
    assert resolved({"sigma": 3}, defaults={"gamma": 0.02}).mechanism == "gaussian"


def test_confident_gnmax_takes_the_default_shares_of_the_most_votes_and_stores_its_threshold_keys():
    settings = resolved({"mechanism": "confident_gnmax", "sigma": 4}, most_votes=10)
    assert settings.as_dict() == {
        "mechanism": "confident_gnmax",
        "gamma": None,
        "sigma": 4.0,
        "delta": 1e-5,
        "n_queries": 40,
        "threshold": 5.0,
        "sigma_threshold": 6.0,
    }
    assert isinstance(settings.noise(), ConfidentGaussianNoise)


@pytest.mark.parametrize(
    "given, sentence",
    [
        ([1], "'privacy' must be a JSON object, not [1]."),
        ({"mechanism": "pate"}, "The noise mechanism must be one of 'laplace', 'gaussian'"),
        (
            {"sigma": 2, "threshold": 3},
            '\'privacy.threshold\' applies to "mechanism": "confident_gnmax"',
        ),
        ({"sigma": "1.0"}, "'privacy.sigma' must be a positive number, not '1.0'."),
        ({"gamma": True}, "'privacy.gamma' must be a positive number, not True."),
        ({"sigma": 2, "delta": 1}, "'privacy.delta' must be below 1, not 1."),
        (
            {"mechanism": "confident_gnmax", "sigma": 2, "threshold": 11},
            "'privacy.threshold' is 11 votes, above the 10 votes a query of this job can hold",
        ),
        (
            {"mechanism": "confident_gnmax", "sigma": 2, "sigma_threshold": -1},
            "'privacy.sigma_threshold' must be a positive number of votes, not -1.",
        ),
    ],
)
def test_what_cannot_be_noise_is_refused_with_a_sentence_and_nothing_is_built(given, sentence):
    with pytest.raises(ValueError) as refused:
        resolved(given, sigma=7.0)
    assert str(refused.value).startswith(sentence)


def test_the_help_of_a_non_object_names_every_mechanism():
    with pytest.raises(ValueError, match="confident_gnmax") as refused:
        resolved("gaussian")
    assert str(refused.value).endswith(PRIVACY_HELP)


def test_stored_settings_and_reports_of_the_noise_read_back_as_the_same_settings():
    settings = resolved({"gamma": 0.04})
    assert PrivacySettings.of(settings.as_dict()) == settings
    report = PrivacyReport(
        epsilon=1.5,
        delta=1e-5,
        unit="party-level",
        mechanism="laplace",
        gamma=0.04,
        sigma=None,
        n_queries=40,
        partitions=2,
        teachers=5,
        data_dependent=False,
        order=8.0,
    )
    assert PrivacySettings.of(report.as_dict()) == settings
    assert PrivacySettings.of(settings, n_queries=3).n_queries == 3
    with pytest.raises(ValueError, match="The privacy parameters lack delta, n_queries."):
        PrivacySettings.of({"mechanism": "laplace", "gamma": 0.04})


def test_the_noise_of_each_mechanism_and_what_a_request_gives_back():
    assert isinstance(resolved({"gamma": 0.04}).noise(), LaplaceNoise)
    gaussian = resolved({}, sigma=7.0)
    assert isinstance(gaussian.noise(), GaussianNoise)
    # n_queries follows from the job's query: a request never gives it
    assert gaussian.given() == {"mechanism": "gaussian", "sigma": 7.0, "delta": 1e-5}
    with pytest.raises(ValueError, match="Laplace noise takes 'gamma'"):
        PrivacySettings(mechanism="laplace", delta=1e-5, n_queries=1, sigma=2.0).noise()
