"""The one retry loop of every request the syncer retries: tenacity, waiting by the runtime's `Backoff`
(exponential, capped, jittered) unless the failure itself says how long to wait (a server's Retry-After,
or 0 for a retry that only needed fresh credentials or a fresh read)."""

from __future__ import annotations

from collections.abc import Callable

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, stop_after_delay
from tenacity.stop import stop_base

from syncer.runtime.backoff import Backoff


def _no_hint(_exc: BaseException) -> float | None:
    return None


def retrying(
    *,
    backoff: Backoff,
    attempts: int,
    retry_if: Callable[[BaseException], bool],
    deadline_s: float | None = None,
    wait_hint: Callable[[BaseException], float | None] = _no_hint,
    before_sleep: Callable[[BaseException, float], None] | None = None,
) -> AsyncRetrying:
    """`async for attempt in retrying(...): with attempt: ...`; the last failure is raised as it is."""
    if attempts < 1:
        raise ValueError(f"retrying needs at least one attempt, got {attempts}")

    def failure(state: RetryCallState) -> BaseException | None:
        return state.outcome.exception() if state.outcome is not None else None

    def wait(state: RetryCallState) -> float:
        exc = failure(state)
        hinted = wait_hint(exc) if exc is not None else None
        return hinted if hinted is not None else backoff.delay(state.attempt_number)

    def told(state: RetryCallState) -> None:
        exc = failure(state)
        if before_sleep is not None and exc is not None and state.next_action is not None:
            before_sleep(exc, state.next_action.sleep)

    stop: stop_base = stop_after_attempt(attempts)
    if deadline_s is not None:
        stop = stop | stop_after_delay(deadline_s)
    return AsyncRetrying(
        stop=stop, wait=wait, retry=retry_if_exception(retry_if), reraise=True, before_sleep=told
    )
