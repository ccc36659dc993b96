"""When the client chooses its REST API version again (syncer/slurm/version_follow.py): which answers owe a
negotiation, that one replacement costs one negotiation however many calls meet it, and how negotiations are
spaced. The rules alone, then the client against a local server that answers as slurmrestd does (its
OpenAPI document, its JSON answers with `meta.slurm.release`, its plain-text 404 for a path it does not
serve: bytes as measured on 24.11.5 and 26.05.5), restarted serving other versions."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from syncer.slurm.auth import StaticToken
from syncer.slurm.client import SlurmClient
from syncer.slurm.errors import SlurmConnectionError, SlurmNotFound, SlurmPathNotServed
from syncer.slurm.version_follow import Outcome, VersionFollow, unserved

UNSERVED_26_05 = (
    b"Unable to find requested URL endpoint. Please query the '/openapi/v3' endpoint or visit "
    b"'https://slurm.schedmd.com/rest_api.html' for the OpenAPI specification"
)
UNSERVED_24_11 = b"Unable find requested URL. Please view /openapi/v3 for API reference."


class Clock:
    """Moves when a test moves it, or by `step` at every read (a real clock moves between two reads)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.step = 0.0

    def __call__(self) -> float:
        now, self.now = self.now, self.now + self.step
        return now


# -- the rules ------------------------------------------------------------------------------------------
def test_unserved_is_slurmrestds_plain_404_not_a_slurm_answer() -> None:
    assert unserved(404, UNSERVED_26_05) and unserved(404, UNSERVED_24_11)
    job_not_found = b'{"jobs": [], "errors": [{"description": "Invalid job id specified"}]}'
    assert not unserved(404, job_not_found)
    assert not unserved(200, UNSERVED_26_05)
    assert not unserved(500, UNSERVED_24_11)


def test_an_event_owes_one_negotiation_and_what_was_sent_before_it_began_owes_none() -> None:
    clock = Clock()
    follow = VersionFollow(clock=clock)
    assert not follow.due()
    follow.owe("slurmrestd could not be reached", sent_at=99.0)
    assert follow.due()
    follow.begin()
    clock.now += 0.5  # the OpenAPI document read
    follow.end("chosen", "26.05.5")
    assert not follow.due() and follow.release == "26.05.5"
    # calls sent before it ended met the old slurmrestd (cut, its old path not served, its release): nothing
    # more is owed
    follow.owe("slurmrestd's answer was cut", sent_at=99.5)
    follow.owe("/slurm/v0.0.42/ answered as not served", sent_at=100.2)
    follow.answered_by("24.11.5", sent_at=100.4)
    clock.now += 3600
    assert not follow.due()
    follow.owe("slurmrestd could not be reached", sent_at=clock.now)
    assert follow.due()


def test_tries_that_do_not_reach_slurmrestd_are_spaced_retry_s_and_cost_nothing() -> None:
    clock = Clock()
    follow = VersionFollow(burst=1, refill_s=60.0, retry_s=1.0, clock=clock)
    follow.owe("slurmrestd could not be reached", sent_at=clock.now)
    for _ in range(5):
        follow.begin()
        follow.end("unreachable")
        assert not follow.due() and follow.wait_s() == 1.0, "still away: not tried again at once"
        clock.now += 1.0
        assert follow.due(), "tried again a second later: slurmrestd is not there to pay for it"
    follow.begin()
    follow.end("chosen")
    assert not follow.why


def test_negotiations_that_reach_slurmrestd_come_in_a_burst_then_one_per_refill_s() -> None:
    clock = Clock()
    follow = VersionFollow(burst=3, refill_s=60.0, clock=clock)
    for _ in range(3):  # e.g. the start, slurmctld restarted, slurmrestd replaced: each at once
        follow.owe("slurmctld started anew", sent_at=clock.now)
        assert follow.due()
        follow.begin()
        follow.end("chosen")
        clock.now += 1.0
    follow.owe("slurmrestd's release changed from 25.05.1 to 26.05.5", sent_at=clock.now)
    assert not follow.due() and 56.9 < follow.wait_s() < 57.1, "the burst spent: one a minute"
    clock.now += 57.1
    assert follow.due()
    follow.begin()
    follow.end("refused")  # answered, no usable version: owed still, at the same pace
    assert follow.why and not follow.due()
    clock.now += 59.9
    assert not follow.due()
    clock.now += 0.2
    assert follow.due()


def test_another_release_answering_owes_the_same_does_not() -> None:
    clock = Clock()
    follow = VersionFollow(clock=clock)
    follow.begin()
    follow.end("chosen", "")  # an OpenAPI document naming no release: the first answer tells it
    follow.answered_by("24.11.5", sent_at=clock.now)
    assert not follow.due() and follow.release == "24.11.5"
    follow.answered_by("24.11.5", sent_at=clock.now)
    assert not follow.due()
    clock.now += 60
    follow.answered_by("26.05.5", sent_at=clock.now)
    assert follow.due() and "24.11.5 to 26.05.5" in follow.why


def test_unserved_skips_blanks_before_slurmrestds_words() -> None:
    assert unserved(404, b"\r\n  " + UNSERVED_26_05) and unserved(404, b"\n" + UNSERVED_24_11)


def test_unserved_looks_for_the_words_in_the_first_64_bytes_only() -> None:
    """A bounded look at the head of an answer, never a scan of a large 404 body."""
    assert unserved(404, b" " * 39 + UNSERVED_24_11), "its words end at byte 64"
    assert not unserved(404, b" " * 40 + UNSERVED_24_11), "they end at byte 65"


def test_every_negotiation_begun_is_counted_checks_and_tries_that_did_not_reach_slurmrestd_included() -> None:
    clock = Clock()
    follow = VersionFollow(clock=clock)
    assert follow.negotiations == 0
    outcomes: tuple[Outcome, ...] = ("unreachable", "refused", "chosen")
    for outcome in outcomes:
        follow.begin()
        follow.end(outcome)
    assert follow.negotiations == 3


def test_until_a_release_is_known_the_first_answer_names_it_and_owes_nothing() -> None:
    clock = Clock()
    follow = VersionFollow(clock=clock)
    follow.answered_by("26.05.5", sent_at=clock.now)  # before any negotiation ended
    assert follow.release == "26.05.5" and not follow.why
    follow.begin()
    follow.end("chosen")  # an OpenAPI document naming no release: the release is not known again
    clock.now += 1.0
    follow.answered_by("24.11.5", sent_at=clock.now)
    assert follow.release == "24.11.5" and not follow.why


def test_an_answer_sent_before_the_last_negotiation_ended_neither_owes_nor_names_the_release() -> None:
    clock = Clock()
    follow = VersionFollow(clock=clock)
    follow.begin()
    clock.now += 0.5
    follow.end("chosen")  # no release named
    follow.answered_by("24.11.5", sent_at=clock.now - 0.2)  # in flight meanwhile: the old slurmrestd
    assert follow.release == "" and not follow.why
    follow.answered_by("26.05.5", sent_at=clock.now)
    follow.answered_by("", sent_at=clock.now)  # an answer naming no release tells nothing
    assert follow.release == "26.05.5" and not follow.why


def test_an_event_owes_no_openapi_read_unless_it_says_slurmrestd_changed_from_the_start() -> None:
    follow = VersionFollow(clock=Clock())
    assert not follow.changed
    follow.owe("slurmrestd could not be reached", sent_at=100.0)
    assert follow.why and not follow.changed, "a check may settle it"


def test_after_a_negotiation_that_reached_slurmrestd_only_the_rate_limit_spaces_the_next() -> None:
    """retry_s spaces only tries that did not reach slurmrestd; a refill under a second still limits."""
    clock = Clock()
    follow = VersionFollow(burst=1, refill_s=0.5, retry_s=5.0, clock=clock)
    follow.owe("slurmctld started anew", sent_at=clock.now)
    follow.begin()
    follow.end("refused")  # answered: owed still, the burst spent
    assert not follow.due() and follow.wait_s() == 0.5
    clock.now += 0.3
    assert not follow.due() and follow.wait_s() == pytest.approx(0.2), "counts down to the token"
    clock.now += 0.2
    assert follow.due() and follow.wait_s() == 0.0


def test_wait_s_is_zero_when_nothing_is_owed_or_a_negotiation_may_run_now() -> None:
    clock = Clock()
    follow = VersionFollow(burst=1, clock=clock)
    assert follow.wait_s() == 0.0
    follow.owe("slurmctld started anew", sent_at=clock.now)
    assert follow.due() and follow.wait_s() == 0.0
    follow.begin()
    follow.end("chosen")
    assert not follow.due() and follow.wait_s() == 0.0, "the burst spent, but nothing owed"


def test_wait_s_is_never_negative_while_the_clock_moves_on_between_its_reads() -> None:
    clock = Clock()
    follow = VersionFollow(retry_s=1.0, clock=clock)
    follow.owe("slurmrestd could not be reached", sent_at=clock.now)
    follow.begin()
    follow.end("unreachable")  # tried again at 101.0
    clock.now, clock.step = 100.95, 0.1  # the retry instant passes while wait_s reads the clock
    assert 0.0 <= follow.wait_s() <= 0.05


# -- the client against a server that answers as slurmrestd ------------------------------------------------
@dataclass
class Slurmrestd:
    """Serves `served` (/slurm/<v>/ping/ and /job/<id>, every job unknown) as slurmrestd `release` does."""

    served: tuple[str, ...]
    release: str = "24.11.5"
    requests: list[str] = field(default_factory=list)
    port: int = 0
    _server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def openapi_reads(self) -> int:
        return sum(1 for r in self.requests if r == "/openapi/v3")

    def _answer(self, path: str) -> tuple[str, bytes, str]:
        meta = {"slurm": {"release": self.release}}
        if path == "/openapi/v3":
            paths: dict[str, object] = {f"/slurm/{v}/ping/": {} for v in self.served}
            info = {"x-slurm": {"release": self.release}}
            return "200 OK", json.dumps({"info": info, "paths": paths}).encode(), "application/json"
        parts = path.split("/")
        if len(parts) < 4 or parts[2] not in self.served:
            return "404 Not Found", UNSERVED_26_05, "text/plain"
        if parts[3] == "job":
            body = {"jobs": [], "errors": [{"description": "Invalid job id specified"}], "meta": meta}
            return "404 Not Found", json.dumps(body).encode(), "application/json"
        pings = {"pings": [{"hostname": "c", "pinged": "UP"}], "meta": meta}
        return "200 OK", json.dumps(pings).encode(), "application/json"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        path = request.split(b" ")[1].decode().split("?")[0]
        self.requests.append(path)
        status, body, kind = self._answer(path)
        head = f"HTTP/1.1 {status}\r\nConnection: close\r\nContent-Type: {kind}\r\n"
        writer.write(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
        await writer.drain()
        writer.close()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None


@pytest.fixture
async def slurmrestd() -> AsyncIterator[Slurmrestd]:
    server = Slurmrestd(("v0.0.40", "v0.0.41", "v0.0.42"))
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def client(slurmrestd: Slurmrestd) -> AsyncIterator[tuple[SlurmClient, list[str]]]:
    """A started client and, per version change it told, the version then in use."""
    async with SlurmClient(slurmrestd.url, StaticToken("t"), attempts=3) as started:
        changes: list[str] = []
        started.subscribe_versions(lambda: changes.append(started.version.name if started.version else ""))
        assert started.version is not None and started.version.name == "v0.0.42"
        yield started, changes


async def test_a_path_no_longer_served_chooses_again_once_and_the_read_goes_on_under_the_new_version(
    slurmrestd: Slurmrestd, client: tuple[SlurmClient, list[str]]
) -> None:
    slurm, changes = client
    slurmrestd.served, slurmrestd.release = ("v0.0.43", "v0.0.44", "v0.0.45"), "26.05.5"
    answers = await asyncio.gather(*(slurm.ping() for _ in range(20)))
    assert all(answers)
    assert slurm.version is not None and slurm.version.name == "v0.0.45" and slurm.external_jobs
    assert changes == ["v0.0.45"], "subscribers told once"
    assert slurmrestd.openapi_reads() == 2, "start and one negotiation, however many calls met the 404"


async def test_a_job_slurm_does_not_know_is_not_a_path_not_served(
    slurmrestd: Slurmrestd, client: tuple[SlurmClient, list[str]]
) -> None:
    slurm, changes = client
    with pytest.raises(SlurmNotFound):
        await slurm.get_job(99999)
    assert slurmrestd.openapi_reads() == 1 and not slurm.follow.why and changes == []


async def test_a_write_to_a_path_not_served_is_not_retried_and_the_next_call_uses_the_new_version(
    slurmrestd: Slurmrestd, client: tuple[SlurmClient, list[str]]
) -> None:
    slurm, changes = client
    slurmrestd.served = ("v0.0.43",)
    with pytest.raises(SlurmPathNotServed, match=r"does not serve /slurm/v0\.0\.42/job/7"):
        await slurm.cancel_job(7)
    assert slurmrestd.requests.count("/slurm/v0.0.42/job/7") == 1, "a write is sent once"
    assert await slurm.cancel_job(7) is False, "chosen again before it: v0.0.43 says the job is unknown"
    assert changes == ["v0.0.43"]


async def test_after_slurmrestd_could_not_be_reached_the_version_is_chosen_again_once_it_answers(
    slurmrestd: Slurmrestd, client: tuple[SlurmClient, list[str]]
) -> None:
    """Still serving the old version (no 404 to tell), with newer ones beside it: an upgrade that keeps
    v0.0.42 would otherwise leave the syncer on it until restarted."""
    slurm, changes = client
    slurm.follow.retry_s = 0.0  # each call may try again while it is away
    await slurmrestd.stop()
    for _ in range(3):
        with pytest.raises(SlurmConnectionError):
            await slurm.ping()
    slurmrestd.served = ("v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45")
    await slurmrestd.start()
    reads = slurmrestd.openapi_reads()
    assert await slurm.ping()
    assert slurm.version is not None and slurm.version.name == "v0.0.45"
    assert changes == ["v0.0.45"] and slurmrestd.openapi_reads() == reads + 1


async def test_another_release_answering_chooses_again_and_the_same_release_never_does(
    slurmrestd: Slurmrestd, client: tuple[SlurmClient, list[str]]
) -> None:
    slurm, changes = client
    for _ in range(5):
        assert await slurm.ping()
    assert slurmrestd.openapi_reads() == 1, "the same release answering owes nothing"
    slurmrestd.served, slurmrestd.release = ("v0.0.42", "v0.0.43"), "25.05.1"
    assert await slurm.ping()  # answered by the new release under v0.0.42: owes a negotiation
    assert await slurm.ping()
    assert slurm.version is not None and slurm.version.name == "v0.0.43" and changes == ["v0.0.43"]
    assert slurm.release == "25.05.1"


async def test_past_the_burst_an_event_waits_for_the_rate_limit_and_is_then_served(
    slurmrestd: Slurmrestd, client: tuple[SlurmClient, list[str]]
) -> None:
    slurm, changes = client
    slurm.follow.burst, slurm.follow.refill_s = 1, 3600.0  # one negotiation left after the start
    slurm.version_may_change("slurmctld started anew")  # e.g. a reconfigure: the same versions again
    assert await slurm.ping()
    assert checks(slurm) == 4 and slurmrestd.openapi_reads() == 1 and changes == []
    slurmrestd.served = ("v0.0.40", "v0.0.41", "v0.0.42", "v0.0.43")
    slurm.version_may_change("slurmctld started anew")
    for _ in range(5):
        assert await slurm.ping()
    assert checks(slurm) == 4 and slurmrestd.openapi_reads() == 1, "not again within the rate limit"
    slurm.follow.refill_s = 0.0
    assert await slurm.ping()
    assert slurmrestd.openapi_reads() == 2 and changes == ["v0.0.43"]


# -- an event that only says slurmrestd may have been replaced: the version in use checked first ----------
def checks(slurm: SlurmClient) -> int:
    """The pings checks sent (the version in use's, then each newer one's), as the client counts them."""
    return sum(n for (endpoint, _), n in slurm.stats.requests.items() if endpoint == "version_check")


def test_a_path_not_served_or_another_release_is_a_change_a_reconfigure_is_not() -> None:
    clock = Clock()
    follow = VersionFollow(clock=clock)
    follow.begin()
    follow.end("chosen", "26.05.5")
    follow.owe("slurmctld started anew", sent_at=clock.now)
    assert follow.due() and not follow.changed, "a check may settle it"
    follow.owe("/slurm/v0.0.45/ answered as not served", sent_at=clock.now, changed=True)
    assert follow.changed and follow.why == "slurmctld started anew", "the first event names it"
    follow.begin()
    follow.end("chosen", "26.05.5")
    assert not follow.why and not follow.changed
    follow.answered_by("26.11.1", sent_at=clock.now)
    assert follow.changed


async def test_a_reconfigure_with_nothing_changed_costs_a_check_not_the_openapi_document(
    slurmrestd: Slurmrestd, client: tuple[SlurmClient, list[str]]
) -> None:
    slurm, changes = client
    slurm.version_may_change("slurmctld started anew")
    assert await slurm.ping()
    # v0.0.42's ping naming the release, then v0.0.45, v0.0.44, v0.0.43 answered as not served
    assert checks(slurm) == 4 and slurmrestd.openapi_reads() == 1
    assert not slurm.follow.why and changes == [] and slurm.stats.requests[("version_check", "404")] == 3


async def test_a_newer_version_served_beside_the_one_in_use_fails_the_check_and_is_chosen(
    slurmrestd: Slurmrestd, client: tuple[SlurmClient, list[str]]
) -> None:
    slurm, changes = client
    slurmrestd.served = ("v0.0.42", "v0.0.44")
    slurm.version_may_change("slurmctld started anew")
    assert await slurm.ping()
    assert slurmrestd.openapi_reads() == 2 and changes == ["v0.0.44"]


async def test_another_release_behind_the_same_versions_fails_the_check(
    slurmrestd: Slurmrestd, client: tuple[SlurmClient, list[str]]
) -> None:
    slurm, changes = client
    slurmrestd.release = "24.11.6"
    slurm.version_may_change("slurmctld started anew")
    assert await slurm.ping()
    assert slurmrestd.openapi_reads() == 2 and checks(slurm) == 1, "the release differs: no probes"
    assert slurm.follow.release == "24.11.6" and changes == []


async def test_a_known_change_reads_the_openapi_document_without_a_check(
    slurmrestd: Slurmrestd, client: tuple[SlurmClient, list[str]]
) -> None:
    slurm, changes = client
    slurmrestd.served = ("v0.0.43",)
    assert await slurm.ping()  # v0.0.42 answered as not served: a change, the read goes on under v0.0.43
    assert checks(slurm) == 0 and slurmrestd.openapi_reads() == 2 and changes == ["v0.0.43"]


async def test_a_pinned_version_is_checked_by_its_own_ping_alone(slurmrestd: Slurmrestd) -> None:
    async with SlurmClient(slurmrestd.url, StaticToken("t"), api_version="v0.0.41") as slurm:
        slurmrestd.served = ("v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45")
        slurm.version_may_change("slurmctld started anew")
        assert await slurm.ping()
        assert checks(slurm) == 1 and slurmrestd.openapi_reads() == 1
        assert slurm.version is not None and slurm.version.name == "v0.0.41"
