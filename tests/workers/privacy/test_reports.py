from dataclasses import replace

from workers.privacy.reports import JobPrivacyReport, PrivacyReport

BOUND = PrivacyReport(
    epsilon=2.5,
    delta=1e-5,
    unit="party-level",
    mechanism="laplace",
    gamma=0.04,
    sigma=None,
    n_queries=100,
    partitions=2,
    teachers=5,
    data_dependent=False,
    order=8.0,
    vote_shift=2,
)


def test_a_job_privacy_report_below_l1_stores_its_level_and_no_bounds():
    assert JobPrivacyReport(level="L0").as_dict() == {
        "level": "L0",
        "data_independent": None,
        "data_dependent": None,
    }


def test_an_l1_job_privacy_report_stores_both_bounds_under_their_own_names():
    dependent = replace(BOUND, epsilon=0.8, data_dependent=True)
    stored = JobPrivacyReport(
        level="L1", data_independent=BOUND, data_dependent=dependent
    ).as_dict()
    assert stored == {
        "level": "L1",
        "data_independent": BOUND.as_dict(),
        "data_dependent": dependent.as_dict(),
    }
    assert (stored["data_independent"]["epsilon"], stored["data_dependent"]["epsilon"]) == (
        2.5,
        0.8,
    )


def test_an_l2_job_privacy_report_adds_each_submissions_declared_report_and_no_bounds():
    declared = {"epsilon": 1.5, "delta": 1e-5}
    assert JobPrivacyReport(level="L2", submissions={"7": declared, "9": None}).as_dict() == {
        "level": "L2",
        "data_independent": None,
        "data_dependent": None,
        "submissions": {"7": declared, "9": None},
    }
