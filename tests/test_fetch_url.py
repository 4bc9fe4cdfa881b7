"""What a crawl may ask for (fetch/url.py) and which addresses it may reach (fetch/net.py)."""

from __future__ import annotations

import ipaddress

import pytest

from kb_mcp.errors import InvalidInput
from kb_mcp.ingest.fetch import url as urls
from kb_mcp.ingest.fetch.net import Blocked, NetworkPolicy, checked_address


@pytest.mark.parametrize(
    ("given", "normal"),
    [
        ("HTTP://Docs.Example.ORG:80/a/./b/../c.html#part", "http://docs.example.org/a/c.html"),
        ("https://docs.example.org", "https://docs.example.org/"),
        ("https://docs.example.org:443//guide//", "https://docs.example.org/guide/"),
        ("https://docs.example.org:8443/x?b=1&a=2", "https://docs.example.org:8443/x?b=1&a=2"),
        ("http://[::1]:8080/a/", "http://[::1]:8080/a/"),
        ("https://h.example/caf\u00e9.html", "https://h.example/caf%C3%A9.html"),
        ("https://h.example/a%20b.html", "https://h.example/a%20b.html"),
        ("https://h.example/../../etc/passwd", "https://h.example/etc/passwd"),
    ],
)
def test_a_page_has_one_form(given: str, normal: str) -> None:
    assert urls.normalize(given) == normal


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        ("ftp://h.example/file", "only http and https"),
        ("file:///etc/passwd", "only http and https"),
        ("javascript:alert(1)", "only http and https"),
        ("https://user:secret@h.example/", "credentials"),
        ("https://token@h.example/", "credentials"),
        ("https:///no-host", "no host"),
        ("https://h.example/a b", "spaces or control"),
        ("https://h.example/\x00", "spaces or control"),
        ("https://h.example:99999/", "not a valid URL"),
        ("https://h.example/" + "a" * 3000, "characters"),
    ],
)
def test_a_url_a_crawl_may_not_ask_for_is_refused_with_why(given: str, reason: str) -> None:
    with pytest.raises(InvalidInput, match=reason):
        urls.check(given)


def test_a_refused_credential_is_not_repeated_in_the_message() -> None:
    with pytest.raises(InvalidInput) as caught:
        urls.check("https://admin:hunter2-secret@h.example/")
    assert "hunter2" not in caught.value.render()


def test_links_resolve_against_the_page_and_other_schemes_are_dropped() -> None:
    page = "https://h.example/docs/guide/intro.html"
    assert urls.resolve(page, "../api.html#x") == "https://h.example/docs/api.html"
    assert urls.resolve(page, "  setup.html ") == "https://h.example/docs/guide/setup.html"
    for link in ("mailto:a@b.example", "javascript:void(0)", "data:text/html,x", "ftp://h/"):
        assert urls.resolve(page, link) is None
    assert urls.resolve(page, "http://u:p@h.example/") is None


def test_the_default_prefix_is_the_urls_own_path() -> None:
    assert urls.default_prefix("https://h.example/docs/") == "/docs/"
    assert urls.default_prefix("https://h.example/rfc/rfc9309.html") == "/rfc/rfc9309.html"
    assert urls.default_prefix("https://h.example") == "/"


def test_a_scope_holds_its_origin_and_prefix_and_honours_globs() -> None:
    scope = urls.Scope("https://h.example", "/docs/", ("*.html",), ("*/v1/*",))
    assert scope.holds("https://h.example/docs/guide.html")
    assert not scope.holds("https://h.example/docs/v1/guide.html")  # excluded
    assert not scope.holds("https://h.example/docs/manual.pdf")  # not included
    assert not scope.holds("https://h.example/blog/post.html")  # off prefix
    assert not scope.holds("http://h.example/docs/guide.html")  # another origin
    assert not scope.holds("https://h.example:8443/docs/guide.html")


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.0.0.2",
        "::1",
        "10.1.2.3",
        "172.16.0.9",
        "192.168.1.1",
        "169.254.169.254",  # cloud metadata
        "100.64.0.1",  # shared address space
        "0.0.0.0",
        "::ffff:127.0.0.1",  # IPv4-mapped loopback
        "fe80::1",
        "fc00::1",
        "224.0.0.1",
    ],
)
def test_non_public_addresses_are_refused_unless_allowed(address: str) -> None:
    ip = ipaddress.ip_address(address)
    assert not NetworkPolicy().allows(ip)
    assert NetworkPolicy(allow_private=True).allows(ip)


def test_public_addresses_are_allowed() -> None:
    for address in ("93.184.215.14", "2606:4700::6810:84e5"):
        assert NetworkPolicy().allows(ipaddress.ip_address(address))


def test_an_allowed_network_opens_that_network_only() -> None:
    policy = NetworkPolicy.from_flag(["127.0.0.1/32", "10.1.0.0/16"])
    assert policy.allows(ipaddress.ip_address("127.0.0.1"))
    assert policy.allows(ipaddress.ip_address("10.1.200.3"))
    assert not policy.allows(ipaddress.ip_address("127.0.0.2"))
    assert not policy.allows(ipaddress.ip_address("10.2.0.1"))
    with pytest.raises(InvalidInput, match="--allow-network"):
        NetworkPolicy.from_flag(["not-a-network"])


def test_a_name_is_checked_after_dns_and_every_address_it_has_counts() -> None:
    """A name with one public and one private address could be served from either."""

    def two_answers(host: str, port: int) -> list[str]:
        return ["93.184.215.14", "10.0.0.5"]

    with pytest.raises(Blocked, match=r"10\.0\.0\.5, a private address"):
        checked_address("docs.example.org", 443, NetworkPolicy(), two_answers)
    assert checked_address("localhost", 80, NetworkPolicy(allow_private=True), two_answers) == (
        "93.184.215.14"
    )


def test_localhost_is_refused_after_real_dns() -> None:
    with pytest.raises(Blocked, match="loopback"):
        from kb_mcp.ingest.fetch.net import system_resolver

        checked_address("localhost", 80, NetworkPolicy(), system_resolver)


def test_stored_links_are_made_absolute_outside_code_only() -> None:
    """A ```` fence showing ``` lines stays open across them: its links are code."""
    from kb_mcp.ingest.fetch.extract import absolute_links

    markdown = "[a](x.html) [b](#top) [c](https://e.org/)\n````md\n```\n[keep](rel.html)\n```\n````"
    assert absolute_links(markdown, "https://h.example/docs/p.html") == (
        "[a](https://h.example/docs/x.html) [b](https://h.example/docs/p.html#top) "
        "[c](https://e.org/)\n````md\n```\n[keep](rel.html)\n```\n````"
    )
