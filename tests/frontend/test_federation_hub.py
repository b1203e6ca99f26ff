"""The federation page is a hub: a tab per thing the federation holds, each showing what the viewer may see."""

import re

from django.test import Client

from tests.fixtures.budgets import job_row


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def tab_labels(html: str) -> list[str]:
    tabs = re.search(r'<nav class="tabs".*?</nav>', html, re.S).group(0)
    return re.findall(r">([^<>]+)</a>", tabs)


def test_an_operator_sees_every_tab_and_the_federations_jobs_data_and_members(
    operator, federation_with_data
):
    job = job_row(federation_with_data, [], operator)
    client = signed_in(operator)

    overview = client.get("/federations/adult-income/").content.decode()
    jobs = client.get("/federations/adult-income/?tab=jobs").content.decode()
    data = client.get("/federations/adult-income/?tab=data").content.decode()
    members = client.get("/federations/adult-income/?tab=members").content.decode()

    assert tab_labels(overview) == [
        "Overview",
        "Data",
        "Submissions",
        "Jobs",
        "Budgets",
        "Models",
        "Exchanges",
        "Members",
    ]
    assert 'href="?tab=overview" aria-current="page"' in overview and "Launch a job" in overview
    assert f'<a href="/jobs/{job.id}/">Job #{job.id}</a>' in jobs
    assert "Evaluation split" in data and "Download onefold-adult-income.zip" in data
    assert "Northwind Hospital" in members


def test_a_silo_has_no_members_tab_and_sees_only_its_own_budget(
    silo_user, other_silo_user, federation_with_data
):
    from market.federations.membership import federation_join

    federation_join(federation=federation_with_data, user=other_silo_user)
    client = signed_in(silo_user)

    overview = client.get("/federations/adult-income/").content.decode()
    budgets = client.get("/federations/adult-income/?tab=budgets").content.decode()
    unknown = client.get("/federations/adult-income/?tab=members")

    assert "Members" not in tab_labels(overview)
    assert "Northwind Hospital" in budgets and "Contoso Bank" not in budgets
    assert (
        'href="?tab=overview" aria-current="page"' in unknown.content.decode()
    )  # falls back to the overview
