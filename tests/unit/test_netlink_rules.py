"""The network host link's pure rules: who may forward, what may listen, credentials."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperhive.config import HiveConfig
from hyperhive.errors import InvalidName
from hyperhive.netlink.authz import forward_refusal
from hyperhive.netlink.config import HostLinkConfig, split_address
from hyperhive.netlink.credentials import (
    hash_secret,
    new_secret,
    validate_host_name,
    verify_secret,
)

names = st.sampled_from(["h1", "h2", "h3"])


@given(
    host=names,
    holder=st.none() | names,
    incarnation=st.integers(0, 3),
    current=st.none() | st.integers(0, 3),
)
def test_only_the_holder_at_the_current_incarnation_may_forward(
    host: str, holder: str | None, incarnation: int, current: int | None
) -> None:
    refusal = forward_refusal(host, "alice", incarnation, holder, current)
    allowed = holder == host and current == incarnation
    assert (refusal is None) == allowed
    if holder is not None and holder != host:
        assert refusal is not None and "another host" in refusal


@pytest.mark.parametrize(
    ("listen", "tls", "refused"),
    [
        ("127.0.0.1:7443", False, False),
        ("[::1]:7443", False, False),
        ("localhost:0", False, False),
        ("0.0.0.0:7443", False, True),
        ("10.0.0.5:7443", False, True),
        ("0.0.0.0:7443", True, False),
    ],
)
def test_plain_tcp_is_refused_off_loopback(listen: str, tls: bool, refused: bool) -> None:
    extra = {"tls_cert": "c.pem", "tls_key": "k.pem"} if tls else {}
    problem = HostLinkConfig.model_validate({"listen": listen, **extra}).problem()
    assert (problem is not None) == refused
    if refused:
        assert problem is not None and "tls_cert and tls_key" in problem


def test_half_a_tls_pair_and_bad_addresses_are_refused() -> None:
    problem = HostLinkConfig.model_validate({"listen": "0.0.0.0:1", "tls_cert": "c.pem"}).problem()
    assert problem is not None and "both tls_cert and tls_key" in problem
    for bad in ("7443", "host:", "host:99999", ":80"):
        with pytest.raises(ValueError, match="HOST:PORT"):
            split_address(bad)
    config = HiveConfig.model_validate({"hostlink": {"listen": "127.0.0.1:0"}})
    assert config.hostlink is not None and split_address(config.hostlink.listen) == ("127.0.0.1", 0)


def test_credentials_are_random_hashed_and_checked() -> None:
    a, b = new_secret(), new_secret()
    assert a != b and len(a) > 40 and a.startswith("hhc1_")
    assert hash_secret(a) != a and verify_secret(a, hash_secret(a))
    assert not verify_secret(b, hash_secret(a))
    assert validate_host_name("rack2-node7") == "rack2-node7"
    for bad in ("", "-x", "Upper", "a" * 64, "a/b"):
        with pytest.raises(InvalidName):
            validate_host_name(bad)
