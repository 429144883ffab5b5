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
:func:`allowed_address` resolves a URL's host (through a :data:`Resolver`, the seam tests
replace) and picks the first allowed address; :func:`pinned_client` sends requests to that
address while the name stays in ``Host`` and the TLS server name. :func:`connect_failure`
says why a connection failed — for a certificate that did not verify, what TLS said.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

import anyio
import httpx2

from charter.errors import PermissionDenied, TransientExternal

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

EGRESS_REFUSED = "EGRESS_REFUSED"
EXECUTOR_UNREACHABLE = "EXECUTOR_UNREACHABLE"
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


Resolver = Callable[[str, int], Awaitable[list[str]]]
"""Resolves ``(host, port)`` to addresses, best first (the seam tests replace)."""


async def system_resolver(host: str, port: int) -> list[str]:
    """The system's resolver (``getaddrinfo``), addresses in its order, duplicates dropped."""
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


async def allowed_address(url: str, policy: EgressPolicy, resolver: Resolver) -> str:
    """The first address ``url``'s host resolves to that ``policy`` allows.

    Raises ``transient_external`` / ``EXECUTOR_UNREACHABLE`` when the name does not resolve,
    ``permission_denied`` / ``EGRESS_REFUSED`` (naming each address and why) when no address
    is allowed — nothing has been sent to any of them.
    """
    parsed = httpx2.URL(url)
    host = parsed.host
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        ipaddress.ip_address(host)
        addresses = [host]
    except ValueError:
        try:
            addresses = await resolver(host, port)
        except OSError as exc:
            raise TransientExternal(
                f"the host {host} cannot be resolved ({type(exc).__name__})",
                reason=EXECUTOR_UNREACHABLE,
            ) from None
    refusals = []
    for address in addresses:
        why = policy.refusal(host, address)
        if why is None:
            return address
        refusals.append(why)
    raise PermissionDenied(
        f"{url} may not be reached: "
        + ("; ".join(refusals) if refusals else f"{host} resolved to no address"),
        reason=EGRESS_REFUSED,
        details={"host": host, "addresses": addresses[:8]},
    )


class _ServerName(httpx2.AsyncBaseTransport):
    """Sends every request on to ``inner`` with the TLS server name set to ``name``."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, name: str) -> None:
        self._inner = inner
        self._name = name

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.extensions = {**request.extensions, "sni_hostname": self._name}
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def pinned_client(
    url: str,
    address: str,
    *,
    headers: dict[str, str] | None = None,
    verify: ssl.SSLContext | bool = True,
) -> tuple[httpx2.AsyncClient, str]:
    """An HTTP client and the URL to give it so requests for ``url`` go to ``address``: the
    host name stays in ``Host`` and, for https, is the TLS server name (the certificate is
    checked against it, with ``verify``). Nothing from the environment (no proxy, no
    ``SSL_CERT_FILE``), redirects not followed."""
    parsed = httpx2.URL(url)
    # trust_env=False: neither a proxy nor SSL_CERT_FILE / SSL_CERT_DIR from the environment
    transport: httpx2.AsyncBaseTransport = httpx2.AsyncHTTPTransport(verify=verify, trust_env=False)
    if parsed.scheme == "https":
        transport = _ServerName(transport, parsed.host)
    client = httpx2.AsyncClient(
        headers={**(headers or {}), "Host": parsed.netloc.decode("ascii")},
        transport=transport,
        trust_env=False,
        follow_redirects=False,
    )
    return client, str(parsed.copy_with(host=address))


def connect_failure(
    exc: BaseException, *, hint: str = "an executor behind a private CA needs the binding's `ca`"
) -> str:
    """Why a connection failed, for a message: the exception's type name, or — when the
    server's certificate did not verify — what TLS said and where a private CA is given
    (``hint``). Causes, contexts and exception groups are searched (a few levels)."""
    pending: list[BaseException] = [exc]
    for _ in range(32):  # the chains are short; never follow a cycle
        if not pending:
            break
        seen = pending.pop(0)
        if isinstance(seen, ssl.SSLCertVerificationError):
            return (
                f"TLS certificate verification failed: {seen.verify_message or seen.reason}"
                f" ({hint})"
            )
        if isinstance(seen, BaseExceptionGroup):
            pending.extend(seen.exceptions)
        pending.extend(e for e in (seen.__cause__, seen.__context__) if e is not None)
    leaf = exc  # a task group's ExceptionGroup names nothing: name what failed inside it
    for _ in range(32):
        if not isinstance(leaf, BaseExceptionGroup) or not leaf.exceptions:
            break
        leaf = leaf.exceptions[0]
    return type(leaf).__name__
