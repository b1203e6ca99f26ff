"""A member silo finds the toolkit where it looks: the federation page's commands, the upload page's links to
them and to the silo guide; other viewers get no commands."""

import pytest

from market.toolkit.wheel import toolkit_wheel

pytestmark = pytest.mark.django_db


def test_the_upload_page_links_the_commands_and_the_silo_guide_which_the_market_serves(
    client, silo_user, federation_with_data
):
    client.force_login(silo_user)
    upload = client.get("/federations/adult-income/upload/").content.decode()
    assert 'href="/federations/adult-income/#train-at-home"' in upload
    assert 'href="/toolkit/silo-guide.md"' in upload
    guide = client.get("/toolkit/silo-guide.md")
    assert guide.status_code == 200 and guide["Content-Type"] == "text/plain; charset=utf-8"
    assert guide.content.decode().startswith("# Silo guide")
    page = client.get("/federations/adult-income/").content.decode()
    assert 'id="train-at-home"' in page
    assert f"/toolkit/{toolkit_wheel().filename}" in page
    assert 'download="onefold-adult-income.zip"' in page and 'download="features.npz"' in page


def test_an_operator_and_a_silo_that_is_not_a_member_see_no_commands(
    client, operator, other_silo_user, federation_with_data
):
    for viewer in (operator, other_silo_user):
        client.force_login(viewer)
        page = client.get("/federations/adult-income/").content.decode()
        assert 'id="toolkit-commands"' not in page
