"""Failed logins slow down where they come from, never the account's owner elsewhere.

Two counts of failures: per client address, and per (address, name). Past ``free_failures`` a count
makes its source wait before the next try, ``first_wait`` seconds, doubling with each further
failure up to ``max_wait``; a success from the pair clears the pair's count. A name is never locked:
its owner logs in from any address a stranger's failures have not come from. And an address with a
successful login for a name within ``remember_success`` seconds ignores the address's count for that
name, so the owner's usual place (a shared campus network, say) stays open to them whatever others
there try; only the pair's own failures slow them.

The client address is what the hub's proxy saw (``client_address``): the rightmost
``X-Forwarded-For`` entry that is not one of ``JupyterHub.trusted_downstream_ips``, believed only
from a peer that is the proxy. ``X-Real-Ip`` and the left part of ``X-Forwarded-For`` are the
client's to write and are ignored.
"""

from __future__ import annotations

import ipaddress
import os
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

MAX_RECORDS = 100_000  # records kept per count: an attacker with many addresses bounds its own history


@dataclass
class _Record:
    failures: int = 0
    wait_until: float = 0.0


class LoginThrottle:
    def __init__(self, free_failures: int, first_wait: float, max_wait: float, *, address_free_failures: int,
                 remember_success: float = 90 * 86400, clock: Callable[[], float] = time.monotonic):
        self.free_failures, self.address_free_failures = free_failures, address_free_failures
        self.first_wait, self.max_wait, self.remember_success = first_wait, max_wait, remember_success
        self.clock = clock
        self.by_address: OrderedDict[str, _Record] = OrderedDict()
        self.by_pair: OrderedDict[tuple[str, str], _Record] = OrderedDict()
        self.successes: OrderedDict[tuple[str, str], float] = OrderedDict()

    def wait(self, address: str, name: str) -> float:
        """Seconds before ``address`` may try ``name`` again; 0 when it may now."""
        now = self.clock()
        waits = [self.by_pair.get((address, name), _Record()).wait_until - now]
        if now - self.successes.get((address, name), -self.remember_success - 1) > self.remember_success:
            waits.append(self.by_address.get(address, _Record()).wait_until - now)
        return max(0.0, *waits)

    def failed(self, address: str, name: str) -> None:
        self._count(self.by_pair, (address, name), self.free_failures)
        self._count(self.by_address, address, self.address_free_failures)

    def succeeded(self, address: str, name: str) -> None:
        self.by_pair.pop((address, name), None)
        self._keep(self.successes, (address, name), self.clock())

    def _count(self, records: OrderedDict, key, free: int) -> None:
        record = records.pop(key, None) or _Record()
        record.failures += 1
        beyond = record.failures - free + 1  # the free_failures-th failure starts the wait
        if beyond > 0:
            record.wait_until = self.clock() + min(self.max_wait, self.first_wait * 2 ** min(beyond - 1, 64))
        self._keep(records, key, record)

    @staticmethod
    def _keep(records: OrderedDict, key, value) -> None:
        records[key] = value
        records.move_to_end(key)
        while len(records) > MAX_RECORDS:
            records.popitem(last=False)


def client_address(peer: str, forwarded_for: str, trusted_downstream: list[str], *,
                   peer_is_proxy: Callable[[], bool]) -> str:
    """The address a login counts against: the proxy's view of the client.

    ``peer`` is the TCP peer of the hub's server. Only when it is the proxy (``peer_is_proxy``) is
    ``X-Forwarded-For`` read, from the right: the proxy appends its own peer there; entries within
    ``trusted_downstream`` (addresses or networks of reverse proxies in front: JupyterHub's
    trusted_downstream_ips, the authenticator's trusted_proxy_networks) are skipped. Anything
    malformed yields the peer."""
    if not forwarded_for or not peer_is_proxy():
        return peer
    networks = [ipaddress.ip_network(item, strict=False) for item in trusted_downstream]
    for entry in reversed(forwarded_for.split(",")):
        try:
            address = ipaddress.ip_address(entry.strip())
        except ValueError:
            return peer
        if not any(address.version == network.version and address in network for network in networks):
            return str(address)
    return peer


def loopback_peer_is_ours(peer: str, peer_port: int) -> bool:
    """Whether a connection from a loopback ``peer``:``peer_port`` belongs to a process of this process's
    user (natively the hub's proxy is the hub's child; a student's process on the same machine is not).
    A non-loopback peer is a proxy in front of the hub (Docker, Kubernetes) and counts as one."""
    try:
        address = ipaddress.ip_address(peer)
    except ValueError:
        return False
    if not address.is_loopback and not (address.version == 6 and address.ipv4_mapped
                                        and address.ipv4_mapped.is_loopback):
        return True
    return _socket_uid(address, peer_port) == os.geteuid()


def _socket_uid(address, port: int, tables: tuple[str, ...] = ("/proc/net/tcp", "/proc/net/tcp6")) -> int | None:
    """The owner of the live local TCP socket bound to ``address``:``port`` (``tables``: /proc/net/tcp,
    tcp6). A socket no process holds (inode 0: a closed connection waiting out TIME_WAIT, listed as
    root's) is no one's; two live sockets of different owners on the port are no one's either."""
    ipv4 = address.ipv4_mapped if address.version == 6 and address.ipv4_mapped else None
    v4_table, v6_table = tables
    wanted = [(v4_table, _proc_hex(ipv4 or address, port))] if address.version == 4 or ipv4 else []
    wanted.append((v6_table, _proc_hex(address if address.version == 6 else
                                       ipaddress.ip_address(f"::ffff:{address}"), port)))
    owners = set()
    for table, local in wanted:
        try:
            with open(table) as lines:
                next(lines)
                for line in lines:
                    fields = line.split()
                    if len(fields) > 9 and fields[1].upper() == local and fields[9] != "0":
                        owners.add(int(fields[7]))
        except (OSError, StopIteration):
            continue
    return owners.pop() if len(owners) == 1 else None


def _proc_hex(address, port: int) -> str:
    """``address``:``port`` as /proc/net/tcp writes a local address (each 32-bit word in host order)."""
    packed = address.packed
    words = "".join(packed[i:i + 4][::-1].hex() for i in range(0, len(packed), 4)) if sys.byteorder == "little" \
        else packed.hex()
    return f"{words.upper()}:{port:04X}"
