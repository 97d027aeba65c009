"""Every server imgpipe starts binds the address it is given, refuses a port that is none or
taken with one line, and warns when other machines can reach it."""

import socket

import pytest

from pipeline.cli.listening import ListenError, is_loopback, listen, reachability_warning


@pytest.mark.parametrize(
    "host, loopback",
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("192.168.1.5", False),
        ("::", False),
        ("example.org", False),
    ],
)
def test_only_loopback_addresses_count_as_local(host, loopback):
    assert is_loopback(host) is loopback


def test_a_taken_port_or_no_port_is_a_listen_error():
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(ListenError, match=f"cannot listen on 127.0.0.1:{port}: "):
            listen("127.0.0.1", port)
    with pytest.raises(ListenError, match="--port 70000 is not a port"):
        listen("127.0.0.1", 70000)


def test_only_a_reachable_address_is_warned_about():
    assert reachability_warning("serve", "127.0.0.1", "x") is None
    warning = reachability_warning("serve", "0.0.0.0", "anyone can query the model")
    assert warning == (
        "imgpipe serve: warning: listening on 0.0.0.0, reachable from other machines; "
        "anyone can query the model"
    )
