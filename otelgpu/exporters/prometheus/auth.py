"""TLS and HTTP basic auth for `/metrics`, the way Prometheus' exporter-toolkit does them.

Basic auth checks the password with bcrypt every time it has not seen this exact
(user, password) pair succeed before, and for an unknown user it still runs bcrypt, against a
hash of the same cost, so the answer takes as long whether or not the user exists. Successful
checks are remembered under an HMAC of the length-prefixed pair with a per-process random key:
the cache holds neither a password nor anything an attacker could precompute, and no crafted
username can collide with another pair's key (CVE-2022-46146 was such a collision). A pair
remembered is answered at once, without a bcrypt check or a place in line: a scraper that has
passed once is never held up by anyone else's checks.

Pairs that failed are remembered the same way (`FAILED_PAIRS` of them, least recently seen
forgotten first) and answered 401 at once, and a pair whose check is already running or waiting
joins that check instead of taking a place in line. A flood repeating a wrong password, from
any number of connections and addresses, so costs one bcrypt check per distinct pair and holds
no place in line, and a scraper's first check, from whatever address (the flood's own one
too), waits only for the check running when it came and the distinct new pairs ahead of it.
Answering a remembered failure at once tells a client only that this exact pair was already
tried and refused, nothing about the password. (A new hash or user starts with both memories
empty.)

The other checks run one at a time on one private thread, from a line of at most
`MAX_PENDING` checks, running or waiting, `PER_PEER` of them from one address. The line is
ordered by the requester's standing, not by arrival (`standing`): first whether its connection
is suspect (it was refused a place or failed a check, or was already open when its address was
first refused or failed, as a flood's keep-alive connections are), then what its address did
(nothing, refused a place, failed a check); among equals, the first to come. A check that finds
its address's places or the line full takes the place of the worst check waiting (of its
address, or of anyone) when that one stands worse, and is answered 429 (its address) or 503
(the line) at once otherwise; the one displaced gets that answer instead. All of it is decided
before any look at the credentials, so the time of an answer says nothing about the password.

So, during a flood guessing a new password each time: a scraper's first check from an address
with nothing against it waits for the check running when it came and for other such newcomers
that came before it (at most `MAX_PENDING - 1`), never for the flood's, however many addresses
the flood has. From the flood's own address (a NAT), its first check on a new connection waits
for the check running and for the non-suspect ones ahead of it: none from a flood on keep-alive
connections, but a flood opening a new connection for every guess stands as the scraper does,
and the scraper is then served in turn, or answered 429 / 503 at once while the line is full of
them (Retry-After: 1; Prometheus tries again at its next scrape). Once it has passed, it needs
no check at all. A flood from ever-new addresses stands as a newcomer does, too. The user name
is not part of the standing: a flood guesses the scraper's own user's password, and putting an
unknown user's checks last would tell by their timing which users exist. What is remembered of
addresses and connections is bounded (`FAILED_PEERS`, `FAILED_CONNECTIONS`, least recently
marked forgotten first); a check that passes clears its address's record.

A reload that keeps the user and the hash hands what was learnt to the new authenticator
(`take_over`), so it does not start a flood over with an empty memory.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import hashlib
import hmac
import itertools
import os
import ssl
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from otelgpu.exporters.prometheus.config import BasicAuthConfig, TLSServerConfig

_CACHE_LIMIT = 256  # distinct successful (user, password) pairs remembered
MAX_PENDING = 16  # checks running or waiting, all addresses together
PER_PEER = 2  # checks running or waiting for one client address (two scrapers may share one)
FAILED_PEERS = 4096  # client addresses remembered as having failed or been refused a place
FAILED_CONNECTIONS = 4096  # connections remembered as having failed or been refused
FAILED_PAIRS = 4096  # distinct refused (user, password) pairs remembered, as 32-byte digests

# What is remembered against an address, least first: nothing; a request refused a place in
# line (its address's places or the whole line were full); a check that failed.
CLEAN, REFUSED, FAILED = 0, 1, 2
# A request's standing: (whether its connection is suspect, what its address did), least
# first, so a new connection from an address that failed stands before any connection that
# was refused or failed, whatever its address. A connection is suspect once it was refused or
# failed, or when it was already open as its address was first refused or failed (the
# flood's). Standing is read from what is remembered when it is needed, so a check waiting
# moves back the moment its address or connection is refused or fails.
Standing = tuple[bool, int]


class AuthBusy(Exception):
    """The check was not run: no place in line, or its place went to a check of better
    standing. `status` is the HTTP answer (429: its address's places; 503: the line's)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


_TLS_VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}


def server_ssl_context(config: TLSServerConfig) -> ssl.SSLContext:
    """A server context: TLS ≥ `min_version` (never below 1.2), optional client verification."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = _TLS_VERSIONS[config.min_version]
    context.load_cert_chain(config.cert_file, config.key_file)
    if config.client_ca_file:
        context.load_verify_locations(cafile=config.client_ca_file)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


class BasicAuthenticator:
    """Checks `Authorization: Basic ...` headers against one user and bcrypt hash. Its checks
    run on the loop of the server that owns it (the listener's)."""

    def __init__(self, config: BasicAuthConfig) -> None:
        self._user = config.username.encode()
        self._hash = config.password_hash.get_secret_value().encode()
        self._fake_hash = b""
        self._key = b""
        self._ok: set[bytes] = set()
        self._refused: OrderedDict[bytes, None] = OrderedDict()  # least recently seen first
        self._checking: dict[bytes, asyncio.Future[bool]] = {}  # pairs being checked now
        # address -> (when it was first refused or failed, the loop's clock; CLEAN, REFUSED or
        # FAILED), least recently marked first
        self._marked: OrderedDict[str, tuple[float, int]] = OrderedDict()
        self._suspect: OrderedDict[tuple[str, float], None] = OrderedDict()  # (peer, opened)
        self._line = _Line(self.standing)
        # One private thread: checks run one at a time (a flood of wrong passwords costs one
        # core) and never queue behind other components' work in the default executor.
        self._executor: ThreadPoolExecutor | None = None

    async def prepare(self) -> None:
        """Builds the fake hash (same cost as the real one) and the cache key; call in start()."""
        import bcrypt  # loaded only where basic auth is configured (0.4 MiB resident)

        self._executor = ThreadPoolExecutor(1, thread_name_prefix="otelgpu basic auth")
        salt = bcrypt.gensalt(rounds=int(self._hash.split(b"$")[2]))
        loop = asyncio.get_running_loop()
        self._fake_hash = await loop.run_in_executor(
            self._executor, bcrypt.hashpw, os.urandom(16), salt
        )
        self._key = os.urandom(32)

    def take_over(self, previous: BasicAuthenticator) -> None:
        """Keeps what `previous` learnt, the pairs that passed and failed and the standing of
        addresses and connections, when it checked the same user against the same hash;
        otherwise starts afresh."""
        if hmac.compare_digest(previous._user, self._user) and hmac.compare_digest(
            previous._hash, self._hash
        ):
            self._key, self._ok = previous._key, set(previous._ok)
            self._refused = OrderedDict(previous._refused)
            self._marked = OrderedDict(previous._marked)
            self._suspect = OrderedDict(previous._suspect)

    def close(self) -> None:
        """Stops the bcrypt thread, waiting for a check in progress; idempotent. Blocks: call
        it from a worker thread."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)

    @property
    def pending(self) -> int:
        """Checks running or waiting."""
        return self._line.held

    def remembers(self, header: str | None) -> bool:
        """Whether this header's pair has passed before: it is allowed with no check."""
        return self._cache_key(*_parse(header)) in self._ok

    def failed_before(self, peer: str) -> bool:
        """Whether a check from this address failed since its last one passed (as far as is
        remembered)."""
        return self._marked.get(peer, (0.0, CLEAN))[1] == FAILED

    def standing(self, peer: str, opened: float = 0.0) -> Standing:
        """Where a check from `peer`, on a connection accepted at `opened` (the loop's clock;
        0 when unknown: as old as any), stands now: (suspect connection, address's record)."""
        since, record = self._marked.get(peer, (0.0, CLEAN))
        suspect = (peer, opened) in self._suspect or (record != CLEAN and opened <= since)
        return suspect, record

    async def check(self, header: str | None, peer: str = "", opened: float = 0.0) -> bool:
        """Whether the header carries the right user and password, from `peer` on a connection
        accepted at `opened`. Raises AuthBusy, without looking at the credentials, when the
        check finds no place in line or loses its place to one of better standing."""
        user, password = _parse(header)
        cache_key = self._cache_key(user, password)
        if cache_key in self._ok:
            return True
        if cache_key in self._refused:
            self._refused.move_to_end(cache_key)
            self._remember_failed(peer, opened)
            return False
        checking = self._checking.get(cache_key)
        if checking is not None:  # the same pair is in line already: its answer is this one
            passed = await asyncio.shield(checking)
        else:
            passed = await self._check_new(user, password, cache_key, peer, opened)
        if passed:
            self._marked.pop(peer, None)
        else:
            self._remember_failed(peer, opened)
        return passed

    async def _check_new(
        self, user: bytes, password: bytes, cache_key: bytes, peer: str, opened: float
    ) -> bool:
        """A pair not seen before: a place in line, then bcrypt. Checks of the same pair that
        come meanwhile share this one's answer (or its AuthBusy)."""
        shared: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._checking[cache_key] = shared
        passed: bool | None = None
        busy = AuthBusy(503, "the check was called off, try again")
        try:
            try:
                await self._line.take(peer, opened)
            except AuthBusy as refused:
                busy = refused
                self._remember(peer, opened, REFUSED)
                raise
            try:
                passed = await self._bcrypt(user, password)
            finally:
                self._line.give_back(peer)
        finally:
            del self._checking[cache_key]
            if passed is None:  # refused, displaced, or called off (its connection closed)
                shared.set_exception(busy)
                shared.exception()  # retrieved: no "never retrieved" warning if none joined
            else:
                shared.set_result(passed)
        if passed:
            if len(self._ok) >= _CACHE_LIMIT:
                self._ok.clear()
            self._ok.add(cache_key)
        else:
            self._refused[cache_key] = None
            if len(self._refused) > FAILED_PAIRS:
                self._refused.popitem(last=False)
        return passed

    def _remember_failed(self, peer: str, opened: float) -> None:
        self._remember(peer, opened, FAILED)

    def _remember(self, peer: str, opened: float, record: int) -> None:
        """Marks the address (keeping when it was first marked, and the worse record) and
        the connection."""
        since, before = self._marked.pop(peer, (asyncio.get_running_loop().time(), CLEAN))
        self._marked[peer] = (since, max(before, record))
        if len(self._marked) > FAILED_PEERS:
            self._marked.popitem(last=False)
        self._suspect[(peer, opened)] = None
        self._suspect.move_to_end((peer, opened))
        if len(self._suspect) > FAILED_CONNECTIONS:
            self._suspect.popitem(last=False)

    async def _bcrypt(self, user: bytes, password: bytes) -> bool:
        executor = self._executor
        if executor is None:
            raise AuthBusy(503, "authentication is being reconfigured")
        user_ok = hmac.compare_digest(user, self._user)
        against = self._hash if user_ok else self._fake_hash
        loop = asyncio.get_running_loop()
        try:
            password_ok = await loop.run_in_executor(executor, _checkpw, password, against)
        except RuntimeError as closed:  # close() came between the two lines above
            raise AuthBusy(503, "authentication is being reconfigured") from closed
        return user_ok and password_ok

    def _cache_key(self, user: bytes, password: bytes) -> bytes:
        message = len(user).to_bytes(8, "big") + user + len(password).to_bytes(8, "big") + password
        return hmac.new(self._key, message, hashlib.sha256).digest()


@dataclasses.dataclass(eq=False)
class _Place:
    """A check waiting for its turn: whose it is, and when it came."""

    peer: str
    opened: float
    arrival: int
    turn: asyncio.Future[None]


class _Line:
    """Whose bcrypt check runs next: one at a time, the best standing first and, among equals,
    the first to come. At most `MAX_PENDING` checks running or waiting, `PER_PEER` for one
    address; a check that finds no place takes the place of the worst one waiting (of its
    address, when its address holds all its places) if that one stands worse, and is refused
    otherwise. The one displaced is answered as the newcomer would have been."""

    def __init__(self, standing: Callable[[str, float], Standing]) -> None:
        self._standing = standing
        self._running = False
        self._waiting: list[_Place] = []
        self._held_by_peer: dict[str, int] = {}
        self._arrivals = itertools.count()

    @property
    def held(self) -> int:
        """Checks running or waiting."""
        return self._running + len(self._waiting)

    async def take(self, peer: str, opened: float) -> None:
        """Returns once it is this check's turn (`give_back` must follow); raises AuthBusy when
        it finds no place, or loses its place while it waits."""
        self._drop_called_off()
        standing = self._standing(peer, opened)
        if self._held_by_peer.get(peer, 0) >= PER_PEER:
            busy = AuthBusy(429, "too many concurrent authentication attempts from this client")
            self._displace(self._worst(peer), standing, busy)
        elif self.held >= MAX_PENDING:
            busy = AuthBusy(503, "too many authentication attempts in progress")
            self._displace(self._worst(None), standing, busy)
        self._held_by_peer[peer] = self._held_by_peer.get(peer, 0) + 1
        if not self._running:
            self._running = True
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        place = _Place(peer, opened, next(self._arrivals), turn)
        self._waiting.append(place)
        try:
            await place.turn
        except asyncio.CancelledError:
            if place in self._waiting:  # called off while it waited
                self._waiting.remove(place)
                self._release(peer)
            elif not place.turn.cancelled() and place.turn.exception() is None:
                self.give_back(peer)  # the turn came just as it was called off: pass it on
            raise

    def give_back(self, peer: str) -> None:
        """The check of `peer` that had the turn is done: the best one waiting runs next."""
        self._release(peer)
        self._drop_called_off()
        if not self._waiting:
            self._running = False
            return
        best = min(self._waiting, key=self._rank)
        self._waiting.remove(best)
        best.turn.set_result(None)

    def _displace(self, worst: _Place | None, standing: Standing, busy: AuthBusy) -> None:
        if worst is None or self._standing(worst.peer, worst.opened) <= standing:
            raise busy
        self._waiting.remove(worst)
        self._release(worst.peer)
        worst.turn.set_exception(AuthBusy(busy.status, f"{busy}; a client of better standing came"))

    def _worst(self, peer: str | None) -> _Place | None:
        candidates = [p for p in self._waiting if peer is None or p.peer == peer]
        return max(candidates, key=self._rank) if candidates else None

    def _rank(self, place: _Place) -> tuple[Standing, int]:
        return self._standing(place.peer, place.opened), place.arrival

    def _drop_called_off(self) -> None:
        """Places whose check was called off and has not yet woken to leave."""
        for place in [p for p in self._waiting if p.turn.done()]:
            self._waiting.remove(place)
            self._release(place.peer)

    def _release(self, peer: str) -> None:
        left = self._held_by_peer.pop(peer) - 1
        if left:
            self._held_by_peer[peer] = left


def _checkpw(password: bytes, hashed: bytes) -> bool:
    import bcrypt  # (loaded by `prepare`, which comes first)

    try:
        return bcrypt.checkpw(password, hashed)
    except ValueError:
        return False


def _parse(header: str | None) -> tuple[bytes, bytes]:
    """(user, password) from a Basic header (RFC 7617: `Basic base64(user:password)`, UTF-8);
    empty on anything malformed (still checked, so a malformed header takes as long as a wrong
    password)."""
    scheme, _, credentials = (header or "").strip().partition(" ")
    if scheme.lower() != "basic":
        return b"", b""
    try:
        decoded = base64.b64decode(credentials.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return b"", b""
    user, colon, password = decoded.partition(":")
    if not colon:
        return b"", b""
    return user.encode(), password.encode()
