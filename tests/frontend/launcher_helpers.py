"""The job launcher's and the pre-flight estimate's addresses and forms, as the page tests send them."""

import json

from tests.fixtures.jobs import FAST_FEDKT
from tests.frontend.journey_helpers import form_key

LAUNCHER = "/federations/adult-income/jobs/new/"


ESTIMATE = "/federations/adult-income/jobs/estimate/"


#: So much Gaussian noise that the votes say nothing: the model this job makes cannot pass the publish gate.
# Votes drowned in noise, and no operator's rows to fall back on (semi-private students off): a model that fails.
DROWNED = {
    **FAST_FEDKT,
    "privacy": {"mechanism": "gaussian", "sigma": 10_000.0},
    "semi_private": "off",
}


def estimate_form(launcher: str, submissions, parameters=DROWNED) -> dict:
    return {
        "kind": "fedkt",
        "privacy_level": "L1",
        "parameters": json.dumps(parameters),
        "seed": "7",
        "submissions": [str(submission.id) for submission in submissions],
        "idempotency_key": form_key(launcher, 'id="job-form"'),
    }
