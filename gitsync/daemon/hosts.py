"""The ``Host`` names the drift page answers to: DNS rebinding is refused.

The page needs no credentials, so any web page open in a browser that can reach the
daemon (through a ``kubectl port-forward`` on 127.0.0.1, or inside the cluster's
network) could read it by pointing a name of its own at the daemon's address: the
browser then counts the daemon as that name's origin, and sends that name as ``Host``.
So the page answers only a ``Host`` that is the daemon's own: a loopback name, the
address the connection arrived at (the Pod IP, as a browser inside the cluster
network or a scraper gives it), or a name given with ``--ui-allowed-hosts`` (the
Service's DNS name, an Ingress host). Any port: a port-forward picks its own.

Pure: a header and an address in, a yes or no out.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from typing import Final

from gitsync.errors import ConfigError, quote

LOOPBACK: Final = frozenset({"localhost", "127.0.0.1", "::1"})
_PORT: Final = re.compile(r":[0-9]{1,5}")
# a DNS name or an IPv4 address, as RFC 3986 reg-name allows it without escapes
_NAME: Final = re.compile(r"[a-z0-9]([a-z0-9_.-]{0,251}[a-z0-9])?")


def host_name(header: str) -> str | None:
    """The name in a ``Host`` value, lower case, without its port, the brackets of an
    IPv6 address or a final dot; None when it is none of these."""
    text = header.strip().lower()
    if text.startswith("["):
        end = text.find("]")
        name, rest = (text[1:end], text[end + 1 :]) if end > 0 else ("", "")
        if not _ip(name):
            return None
    else:
        name, sep, port = text.partition(":")
        rest = sep + port
        name = name.rstrip(".") if name != "." else ""
        if not _NAME.fullmatch(name):
            return None
    if rest and not _PORT.fullmatch(rest):
        return None
    return name


def _ip(text: str) -> str:
    """``text`` as the canonical text of an IP address ("" if it is none); an IPv4
    address mapped into IPv6 (a dual-stack socket's view of one) as the IPv4 address."""
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return ""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


class AllowedHosts:
    def __init__(self, extra: Iterable[str] = ()) -> None:
        names = set(LOOPBACK)
        for value in extra:
            name = host_name(value)
            if name is None:
                raise ConfigError(
                    f"--ui-allowed-hosts: {quote(value)} is not a host name or IP address"
                )
            names.add(_ip(name) or name)
        self.names = frozenset(names)

    def allows(self, headers: Mapping[str, str], local: str) -> bool:
        """Whether the request's one ``Host`` header names the daemon."""
        values = [v for k, v in headers.items() if k.lower() == "host"]
        if len(values) != 1:
            return False  # none (HTTP/1.0: no browser sends that), or two: ambiguous
        name = host_name(values[0])
        if name is None:
            return False
        canonical = _ip(name) or name
        return canonical in self.names or (bool(local) and canonical == _ip(local))
