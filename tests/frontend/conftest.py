"""Fixtures for the web pages: Debian's Chromium for Playwright, real student models, submissions."""

import pytest

from tests.conftest import scaled_milliseconds

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-gpu",
]


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    # Browsers cannot be downloaded here: drive the distribution's Chromium instead of Playwright's own build.
    return {
        **browser_type_launch_args,
        "executable_path": "/usr/bin/chromium",
        "args": CHROMIUM_ARGS,
    }


# Waits of a page (clicks, navigations, wait_for) on a loaded 2-core machine: a live server and a worker share
# the cores with the browser, so Playwright's 30 s default can pass on a slow run while nothing is wrong.
PATIENT_WAIT_MS = 120_000


@pytest.fixture
def context(context):
    context.set_default_timeout(scaled_milliseconds(PATIENT_WAIT_MS))
    context.set_default_navigation_timeout(scaled_milliseconds(PATIENT_WAIT_MS))
    return context


@pytest.fixture(scope="session")
def student_model_files(adult_training) -> list[bytes]:
    """Two XGBoost JSON students, each trained on one half of 2,000 encoded Adult rows (as FedKT's partitions)."""
    from xgboost import XGBClassifier

    from workers.modelio.export import export_xgboost_json

    features, labels = adult_training
    halves = [slice(0, 1000), slice(1000, 2000)]
    return [
        export_xgboost_json(
            XGBClassifier(n_estimators=10, max_depth=3, random_state=0).fit(
                features[half], labels[half]
            )
        )
        for half in halves
    ]


@pytest.fixture
def submit(federation_with_data, student_model_files):
    """Create a submission through the service, as the API would; its validation is queued on commit only."""
    from market.submissions.services import submission_create
    from market.submissions.uploads import SubmissionUpload, UploadedModel

    def submit_as(user, *, model_index: int = 0):
        return submission_create(
            federation=federation_with_data,
            user=user,
            upload=SubmissionUpload(
                models=[
                    UploadedModel(
                        name=f"student-{model_index}.json", data=student_model_files[model_index]
                    )
                ],
                model_family="xgboost",
                n_local_examples=1000,
                local_validation_score=0.84,
                label_distribution=None,
                privacy_level="L1",
                privacy_parameters={},
                declared_epsilon=None,
            ),
        )

    return submit_as
