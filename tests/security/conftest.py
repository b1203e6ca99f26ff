# The commerce tests' builders of sellable global models (real files in the contract's formats), reused here.
from tests.market.commerce.conftest import (adult_evaluation, global_model_artifacts, make_global_model,  # noqa: F401
                                            published_listing, top_up)
# Debian's Chromium for Playwright, as the page tests use it.
from tests.frontend.conftest import browser_type_launch_args  # noqa: E402,F401
