"""Outbound safety: only HTTPS to public addresses, checked at registration and again, after DNS, at delivery;
the delivery connects to the address it checked; no redirect is followed."""

import socket
import threading

import pytest
from rest_framework.test import APIClient

from market.webhooks.delivery import webhook_deliver
from market.webhooks.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint
from market.webhooks.outbound import address_refusal
from tests.conftest import api_client_for, scaled_timeout
from tests.fixtures.webhooks import PUBLIC, resolving_to

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("169.254.169.254", "link-local"),
        ("10.1.2.3", "private"),
        ("192.168.0.10", "private"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("0.0.0.0", "unspecified"),
        ("::ffff:127.0.0.1", "loopback"),
        ("100.64.0.1", "not a public"),
        ("fd00:ec2::254", "private"),
    ],
)
def test_addresses_inside_networks_are_refused(address, kind):
    assert kind in address_refusal(address)


def test_a_public_address_is_allowed():
    assert address_refusal(PUBLIC) == ""


# IPv6 forms that map or tunnel to a refused IPv4 range, or that Python's ipaddress does not call private (issue
# 38 item 8): each with the words the refusal must hold.
IPV6_FORMS_INTO_NETWORKS = [
    ("2002:7f00:1::", "6to4 form of 127.0.0.1) is a loopback address"),
    ("2002:a00:1::1", "6to4 form of 10.0.0.1) is a private address"),
    ("2002:a9fe:a9fe::", "6to4 form of 169.254.169.254) is a link-local address"),
    ("fec0::1", "is a site-local address"),
    ("::ffff:10.0.0.1", "IPv4-mapped form of 10.0.0.1) is a private address"),
    ("::127.0.0.1", "IPv4-compatible form of 127.0.0.1) is a loopback address"),
    ("::ffff:0:7f00:1", "IPv4-translated form of 127.0.0.1) is a loopback address"),
    ("64:ff9b::7f00:1", "NAT64 form of 127.0.0.1) is a loopback address"),
    ("64:ff9b::a9fe:a9fe", "NAT64 form of 169.254.169.254) is a link-local address"),
    ("64:ff9b:1::a00:1", "is a local-use NAT64 address"),
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "is a Teredo address"),
    ("2001:0:4136:e378:8000:63bf:a2a0:a1a1", "is a Teredo address"),
]


@pytest.mark.parametrize(("address", "words"), IPV6_FORMS_INTO_NETWORKS)
def test_ipv6_forms_that_map_or_tunnel_into_a_network_are_refused(address, words):
    assert words in address_refusal(address)


@pytest.mark.parametrize(
    "address", [PUBLIC, "2606:4700:4700::1111", "::ffff:93.184.215.14", "2002:5db8:d70e::1"]
)
def test_public_addresses_and_their_ipv6_forms_are_allowed(address):
    assert address_refusal(address) == ""


@pytest.mark.parametrize(("address", "words"), IPV6_FORMS_INTO_NETWORKS)
def test_registering_an_ipv6_form_into_a_network_is_a_400_that_names_it_and_creates_nothing(
    silo_user, address, words
):
    response = api_client_for(silo_user).post(
        "/api/webhook-endpoints/",
        {"url": f"https://[{address}]/hook", "events": ["job.succeeded"]},
        format="json",
    )
    assert response.status_code == 400
    assert address in response.json()["detail"] and words in response.json()["detail"]
    assert not WebhookEndpoint.objects.exists()


def test_registering_a_public_ipv6_address_is_accepted(silo_user):
    response = api_client_for(silo_user).post(
        "/api/webhook-endpoints/",
        {"url": "https://[2606:4700:4700::1111]/hook", "events": ["job.succeeded"]},
        format="json",
    )
    assert response.status_code == 201
    assert WebhookEndpoint.objects.get().url == "https://[2606:4700:4700::1111]/hook"


def test_registering_a_private_address_is_a_400_that_says_why_and_creates_nothing(silo_user):
    response = api_client_for(silo_user).post(
        "/api/webhook-endpoints/",
        {"url": "https://127.0.0.1/hook", "events": ["job.succeeded"]},
        format="json",
    )
    assert response.status_code == 400
    assert "127.0.0.1 is a loopback address" in response.json()["detail"]
    assert not WebhookEndpoint.objects.exists()


def test_registering_plain_http_is_a_400(silo_user, monkeypatch):
    resolving_to(monkeypatch, PUBLIC)
    response = api_client_for(silo_user).post(
        "/api/webhook-endpoints/",
        {"url": "http://hooks.example.org/", "events": ["job.succeeded"]},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["detail"] == "A webhook URL must start with https://."
    assert not WebhookEndpoint.objects.exists()


def test_an_unknown_event_type_is_a_400_that_names_the_choices(silo_user, monkeypatch):
    resolving_to(monkeypatch, PUBLIC)
    response = api_client_for(silo_user).post(
        "/api/webhook-endpoints/",
        {"url": "https://hooks.example.org/", "events": ["job.exploded"]},
        format="json",
    )
    assert response.status_code == 400
    assert "events" in response.json()
    assert not WebhookEndpoint.objects.exists()


def test_the_secret_is_shown_at_creation_and_rotation_only(silo_user, monkeypatch):
    resolving_to(monkeypatch, PUBLIC)
    client: APIClient = api_client_for(silo_user)
    created = client.post(
        "/api/webhook-endpoints/",
        {"url": "https://hooks.example.org/", "events": ["job.succeeded"]},
        format="json",
    ).json()
    assert created["secret"].startswith("whsec_")
    path = f"/api/webhook-endpoints/{created['id']}/"
    assert "secret" not in client.get(path).json()
    assert all(
        "secret" not in endpoint for endpoint in client.get("/api/webhook-endpoints/").json()
    )
    rotated = client.post(f"{path}rotate-secret/").json()
    assert rotated["secret"].startswith("whsec_") and rotated["secret"] != created["secret"]
    endpoint = WebhookEndpoint.objects.get()
    assert (endpoint.secret, endpoint.previous_secret) == (rotated["secret"], created["secret"])


@pytest.mark.parametrize(
    "rebound, refusal",
    [
        ("10.0.0.5", "10.0.0.5 is a private address"),
        ("2002:7f00:1::", "2002:7f00:1:: (the 6to4 form of 127.0.0.1) is a loopback address"),
    ],
    ids=["private", "6to4-of-loopback"],
)
def test_a_host_whose_dns_turns_private_after_registration_is_refused_at_delivery(
    silo_user, monkeypatch, rebound, refusal
):
    from market.webhooks.services import webhook_endpoint_ping

    resolving_to(monkeypatch, PUBLIC)
    created = api_client_for(silo_user).post(
        "/api/webhook-endpoints/",
        {"url": "https://hooks.example.org/", "events": ["job.succeeded"]},
        format="json",
    )
    assert created.status_code == 201
    delivery = webhook_endpoint_ping(user=silo_user, endpoint_id=created.json()["id"])
    resolving_to(monkeypatch, rebound)  # DNS rebinding: the name now points inside

    assert webhook_deliver(delivery_id=delivery.id) is False

    attempt = WebhookAttempt.objects.get()
    assert attempt.response_status is None
    assert attempt.error.startswith("Refused before connecting:")
    assert refusal in attempt.error
    assert WebhookDelivery.objects.get().status == "pending"


def test_the_delivery_connects_to_the_address_it_checked_and_sends_the_name_as_host(
    silo_user, monkeypatch, receiver, webhooks_reach_localhost
):
    resolving_to(monkeypatch, "127.0.0.1")  # a name only this test's DNS knows
    port = receiver.url.split(":")[2].split("/")[0]
    endpoint = WebhookEndpoint.objects.create(
        organisation=silo_user.organisation,
        url=f"http://hooks.invalid:{port}/onefold",
        events=["job.succeeded"],
        secret="whsec_test",
    )
    from market.webhooks.services import webhook_endpoint_ping

    delivery = webhook_endpoint_ping(user=silo_user, endpoint_id=endpoint.id)

    assert webhook_deliver(delivery_id=delivery.id) is True
    assert receiver.received[0].headers["Host"] == f"hooks.invalid:{port}"


def test_a_redirect_is_not_followed_and_counts_as_a_failure(
    silo_user, receiver, webhooks_reach_localhost
):
    from market.webhooks.services import webhook_endpoint_ping

    receiver.answers = [302]
    endpoint = WebhookEndpoint.objects.create(
        organisation=silo_user.organisation,
        url=receiver.url,
        events=["job.succeeded"],
        secret="whsec_test",
    )
    delivery = webhook_endpoint_ping(user=silo_user, endpoint_id=endpoint.id)

    assert webhook_deliver(delivery_id=delivery.id) is False
    assert len(receiver.received) == 1
    assert WebhookAttempt.objects.get().response_status == 302


def test_an_endpoint_that_keeps_failing_is_disabled_and_its_organisation_emailed(
    silo_user, receiver, webhooks_reach_localhost, mailoutbox, django_capture_on_commit_callbacks
):
    from market.webhooks.delivery import webhook_deliver as deliver
    from market.webhooks.services import webhook_endpoint_ping

    webhooks_reach_localhost.ONEFOLD_WEBHOOK_DISABLE_AFTER_FAILURES = 2
    silo_user.email = "ops@example.org"
    silo_user.save()
    receiver.answers = [500, 500]
    endpoint = WebhookEndpoint.objects.create(
        organisation=silo_user.organisation, url=receiver.url, events=["job.succeeded"], secret="s"
    )
    with django_capture_on_commit_callbacks(execute=True):
        deliveries = [webhook_endpoint_ping(user=silo_user, endpoint_id=endpoint.id) for _ in "ab"]
    with django_capture_on_commit_callbacks(execute=True):
        for delivery in deliveries:
            deliver(delivery_id=delivery.id)

    endpoint.refresh_from_db()
    assert endpoint.is_active is False
    assert endpoint.disabled_reason.startswith("Disabled by the market after 2 failed attempts")
    assert [mail.to for mail in mailoutbox] == [["ops@example.org"]]
    assert endpoint.url in mailoutbox[0].body


@pytest.mark.parametrize(
    "url", ["https://[::1/hook", "https://hooks.example.org:port/", "https://\x00/", "https:///x"]
)
def test_an_unreadable_url_is_a_400_that_says_so(silo_user, url):
    response = api_client_for(silo_user).post(
        "/api/webhook-endpoints/", {"url": url, "events": ["job.succeeded"]}, format="json"
    )
    assert response.status_code == 400
    assert not WebhookEndpoint.objects.exists()


@pytest.fixture
def trickling_receiver():
    """A receiver on 127.0.0.1 that reads the request, then sends its status line and headers one byte a second
    (issue 38 item 7): each read gets a byte well inside any per-read timeout, and the whole answer would take
    about 30 quiet-machine seconds."""
    server = socket.create_server(("127.0.0.1", 0))
    stop, finished = threading.Event(), threading.Event()
    answer = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * int(scaled_timeout(30)) + b"\r\n"
    answer += b"Content-Length: 2\r\n\r\nok"

    def serve():
        connection, _ = server.accept()
        with connection:
            connection.recv(65536)  # the request: headers and the small body arrive together
            for byte in answer:
                if stop.wait(1):
                    return
                try:
                    connection.sendall(bytes([byte]))
                except OSError:  # the market hung up
                    return
            finished.set()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/onefold", finished
    stop.set()
    thread.join(timeout=5)
    server.close()


def test_a_receiver_that_trickles_its_headers_is_cut_at_the_delivery_deadline_and_retried(
    silo_user, settings, webhooks_reach_localhost, trickling_receiver
):
    from market.webhooks.services import webhook_endpoint_ping

    url, finished = trickling_receiver
    settings.ONEFOLD_WEBHOOK_DELIVERY_SECONDS = 2
    endpoint = WebhookEndpoint.objects.create(
        organisation=silo_user.organisation, url=url, events=["job.succeeded"], secret="whsec_test"
    )
    delivery = webhook_endpoint_ping(user=silo_user, endpoint_id=endpoint.id)

    assert webhook_deliver(delivery_id=delivery.id) is False
    assert (
        not finished.is_set()
    )  # the market stopped waiting while the receiver was still sending headers
    attempt = WebhookAttempt.objects.get()
    assert attempt.response_status is None and attempt.succeeded is False
    assert attempt.error == (
        "The receiver did not answer within 2 s (connection, request and response together); "
        "the market stopped waiting."
    )
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("pending", 1)
    assert delivery.next_attempt_at > attempt.started_at  # retried after the backoff


class RebindingWorld:
    """DNS and the network, the world outside the machine, for one rebinding attack (issue 38 item 10): the name
    first resolves to a public address, which refuses connections, and from then on to 127.0.0.1, where the
    test's receiver listens. Every name looked up and every address connected to is recorded."""

    def __init__(self, monkeypatch, name: str) -> None:
        self.name, self.looked_up, self.connected = name, [], []
        real_connect = socket.socket.connect

        def getaddrinfo(host, port, *arguments, **keywords):
            if host == name:
                self.looked_up.append(host)
                host = PUBLIC if len(self.looked_up) == 1 else "127.0.0.1"
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (host, port))]

        def connect(sock, address):
            self.connected.append(address[0])
            if address[0] == PUBLIC:
                raise ConnectionRefusedError("the public address refused the connection")
            return real_connect(sock, address)

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
        monkeypatch.setattr(socket.socket, "connect", connect)


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_name_that_rebinds_to_loopback_after_the_check_is_never_connected_to(
    silo_user, receiver, webhooks_reach_localhost, monkeypatch, scheme
):
    """The check resolves the name to a public address; a delivery that resolved it again to connect (plain HTTP
    by host name was the planted defect) would reach the receiver on 127.0.0.1. It connects to the checked
    address only, and the receiver gets nothing."""
    from market.webhooks.services import webhook_endpoint_ping

    webhooks_reach_localhost.ONEFOLD_WEBHOOK_ALLOW_PRIVATE = (
        False  # loopback is refused when checked
    )
    port = receiver.url.split(":")[2].split("/")[0]
    endpoint = WebhookEndpoint.objects.create(
        organisation=silo_user.organisation,
        url=f"{scheme}://hooks.example.org:{port}/onefold",
        events=["job.succeeded"],
        secret="whsec_test",
    )
    delivery = webhook_endpoint_ping(user=silo_user, endpoint_id=endpoint.id)
    world = RebindingWorld(monkeypatch, "hooks.example.org")

    assert webhook_deliver(delivery_id=delivery.id) is False

    assert world.connected == [PUBLIC]
    assert world.looked_up == ["hooks.example.org"]  # once, by the check; never again to connect
    assert receiver.received == [] and not receiver.arrived.is_set()
    attempt = WebhookAttempt.objects.get()
    assert attempt.response_status is None
    # in plain words, not Python's ("NewConnectionError: HTTPConnection(...) [Errno 111] ...")
    assert attempt.error == (
        f"The receiver at hooks.example.org:{port} refused the connection: nothing listens on that port. "
        "Check that your server is running and that the address is right."
    )


def _closed_port() -> int:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        return unused.getsockname()[1]


@pytest.fixture
def hanging_up_receiver():
    """A receiver that accepts the connection and closes it without a word."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()

    def serve():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except OSError:
                continue
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/onefold"
    stop.set()
    thread.join(timeout=5)
    server.close()


def test_delivery_errors_read_as_plain_sentences_not_python_exceptions(
    silo_user, webhooks_reach_localhost, hanging_up_receiver
):
    """Issue 43 item 7: the endpoint's owner reads what the receiver did, never
    "NewConnectionError: HTTPConnection(...) [Errno 111] Connection refused"."""
    from market.webhooks.services import webhook_endpoint_ping

    port = _closed_port()
    errors = []
    for url in (f"http://127.0.0.1:{port}/onefold", hanging_up_receiver):
        endpoint = WebhookEndpoint.objects.create(
            organisation=silo_user.organisation, url=url, events=["job.succeeded"], secret="whsec_x"
        )
        delivery = webhook_endpoint_ping(user=silo_user, endpoint_id=endpoint.id)
        assert webhook_deliver(delivery_id=delivery.id) is False
        errors.append(WebhookAttempt.objects.get(delivery=delivery).error)

    hung_up_port = hanging_up_receiver.split(":")[2].split("/")[0]
    assert errors == [
        f"The receiver at 127.0.0.1:{port} refused the connection: nothing listens on that port. Check that "
        "your server is running and that the address is right.",
        f"The receiver at 127.0.0.1:{hung_up_port} closed the connection before it answered.",
    ]
