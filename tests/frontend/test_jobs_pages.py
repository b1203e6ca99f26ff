"""The job launcher's privacy price: operators see every silo's remainder, anyone else only their own."""

import json

from tests.market.jobs.conftest import fedkt_student_files, fedkt_submissions, third_silo_user  # noqa: F401

L1_FEDKT = {"partitions": 2, "query": 100, "privacy": {"mechanism": "laplace", "gamma": 0.04, "delta": 1e-5}}


def price_page(client, user):
    client.force_login(user)
    return client.get("/federations/adult-income/jobs/price/",
                      {"kind": "fedkt", "privacy_level": "L1", "parameters": json.dumps(L1_FEDKT)}).content.decode()


def test_the_operator_sees_every_silos_remaining_budget(client, operator, fedkt_submissions):
    page = price_page(client, operator)
    assert all(name in page for name in ("Northwind Hospital", "Contoso Bank", "Fabrikam Clinic"))


def test_a_silo_sees_only_its_own_remaining_budget_in_the_price(client, silo_user, fedkt_submissions):
    page = price_page(client, silo_user)
    assert "Northwind Hospital" in page
    assert "Contoso Bank" not in page and "Fabrikam Clinic" not in page
