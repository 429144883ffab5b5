"""Where remote executors may be reached: the deployment's egress allowlist (DESIGN §6).

Every address a remote executor binding connects to is checked here, after its host name
was resolved and before a byte is sent:

- **always refused**, whatever the allowlist says: link-local addresses (``169.254.0.0/16``,
  ``fe80::/10``) and the cloud metadata endpoints (``169.254.169.254``, ``fd00:ec2::254``,
  ``100.100.100.200``, ``168.63.129.16``) — where a request carrying a credential must
  never go;
- **loopback** (``127.0.0.0/8``, ``::1``) and the unspecified address (``0.0.0.0``, ``::``)
  only when a declared network contains it;
- with an ``egress.allow`` list: only addresses inside a declared network, or addresses a
  declared host name resolved to; without one, any other address.

IPv4-mapped IPv6 addresses (``::ffff:169.254.169.254``) are judged as the IPv4 address.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

EGRESS_REFUSED = "EGRESS_REFUSED"
ALWAYS_REFUSED: tuple[Network, ...] = tuple(
    ipaddress.ip_network(n)
    for n in (
        "169.254.0.0/16",  # IPv4 link-local, AWS/GCP/Azure/OpenStack metadata 169.254.169.254
        "fe80::/10",  # IPv6 link-local
        "fd00:ec2::254/128",  # AWS metadata over IPv6
        "100.100.100.200/32",  # Alibaba Cloud metadata
        "168.63.129.16/32",  # Azure wire server
    )
)
_HOST = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?)*\.?$"
)


def _plain(address: Address) -> Address:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


@dataclass(frozen=True, slots=True)
class EgressPolicy:
    """The deployment's ``egress.allow``: networks and host names (``declared=False``: none
    given, so any address but the always-refused ones and undeclared loopback)."""

    networks: tuple[Network, ...] = ()
    hosts: frozenset[str] = frozenset()
    declared: bool = False

    @classmethod
    def parse(cls, entries: Iterable[str]) -> EgressPolicy:
        """From ``egress.allow`` entries; raises ``ValueError`` naming a bad entry's index."""
        networks: list[Network] = []
        hosts: set[str] = set()
        for index, entry in enumerate(entries):
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
            if not _HOST.match(entry):
                raise ValueError(
                    f"[{index}] is neither a network (CIDR or address) nor a host name"
                )
            hosts.add(entry.lower().rstrip("."))
        return cls(networks=tuple(networks), hosts=frozenset(hosts), declared=True)

    def refusal(self, host: str, address: str) -> str | None:
        """Why ``address`` (resolved from ``host``) may not be reached, or ``None``."""
        try:
            ip = _plain(ipaddress.ip_address(address.split("%", 1)[0]))
        except ValueError:
            return f"{address!r} is not an IP address"
        if ip.is_link_local or any(ip in n for n in ALWAYS_REFUSED if n.version == ip.version):
            return f"{ip} is a link-local or cloud metadata address, which is always refused"
        declared = any(ip in n for n in self.networks if n.version == ip.version)
        if ip.is_loopback or ip.is_unspecified:
            if declared:
                return None
            return f"{ip} is a loopback address, allowed only when egress.allow declares it"
        if not self.declared or declared or host.lower().rstrip(".") in self.hosts:
            return None
        return f"{ip} (from {host}) is not in egress.allow"

    def describe(self) -> list[str] | None:
        if not self.declared:
            return None
        return [str(n) for n in self.networks] + sorted(self.hosts)
