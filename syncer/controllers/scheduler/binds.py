"""The binds the scheduler made that its pod informer does not show yet (plan's `bound`): the informer can
show a pod unbound after our bind, and a gang planned in that window would otherwise place the pod again or
cancel its job for placement (then delete the bound pod as if Slurm had cancelled it).

A bind is remembered until there is evidence, never for a time only (an informer can lag for longer than any
bound chosen here: a watch held back, a slow relist, an API server under load):
- the informer shows the pod bound, there or elsewhere (its word wins), or no pod of that UID (deleted or
  made anew: nothing of ours to protect; an informer drops a pod only on its deletion's event or on a fresh
  list without it, and it showed the pod when the bind was planned);
- a read of the pod from the API server (not the informer) shows it not on that Node: unbound (the bind was
  not made), gone, another UID, or bound elsewhere (the informer will show it).
A bind whose answer was lost is read back before the gang is planned again; one the informer does not show
after `shows_s` is warned of once and read back again every `shows_s` while its gang is planned; the gauges
`slurm_syncer_scheduler_unshown_binds` and `..._unshown_bind_oldest_seconds` show them at any time. The memory
is at most the informer's unbound pods of ours (each entry names one: the rest are dropped every pass) and
at most `limit`: the controller binds nothing more while it is full."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final

from syncer.controllers.scheduler.plan import Bind
from syncer.model.kube import SchedulerPod

Shown = Callable[[str, str], SchedulerPod | None]  # the pod informer's pod of that namespace and name
BINDS_MAX: Final = 10_000  # unshown binds remembered at most (~100 binds a second for the informer's 90 s)


@dataclass(frozen=True)
class MadeBind:
    """A bind this controller made: `at` its answer (time.monotonic()); `answered` False when the answer was
    lost (the pod may or may not be bound: read back before the gang is planned again); `read_at` when the
    API server last showed it made (its answer, then each read back); `warned` once unshown past `shows_s`."""

    bind: Bind
    at: float
    answered: bool = True
    read_at: float = 0.0
    warned: bool = False


def unshown_bind(made: MadeBind, pod: SchedulerPod | None) -> str:
    """Why a bind of ours is forgotten now, as the pod informer shows its pod (`pod`: the informer's of that
    name); "" while it is kept (the plan counts the pod bound): "shown" (bound, there or elsewhere: the
    informer's word), "gone" (no pod of that UID)."""
    if pod is None or pod.uid != made.bind.pod.uid:
        return "gone"
    return "shown" if pod.node_name else ""


def read_back(made: MadeBind, read: SchedulerPod | None) -> bool:
    """The API server's pod (`read`, None: none of that name) shows the bind made: that pod on that Node.
    Anything else ends the memory: unbound (not made), gone or made anew, or bound elsewhere (not ours)."""
    return read is not None and read.uid == made.bind.pod.uid and read.node_name == made.bind.node


def _named(made: MadeBind) -> tuple[str, str]:
    return made.bind.pod.namespace, made.bind.pod.name


class BindMemory:
    """Pod UID -> our bind until evidence ends it (times: time.monotonic(), given by the caller)."""

    def __init__(self, shows_s: float, limit: int = BINDS_MAX) -> None:
        self.shows_s = shows_s
        self.limit = limit
        self.made: dict[str, MadeBind] = {}

    @property
    def full(self) -> bool:
        return len(self.made) >= self.limit

    def add(self, bind: Bind, now: float, *, answered: bool = True) -> None:
        self.made[bind.pod.uid] = MadeBind(bind, now, answered=answered, read_at=now)

    def sweep(self, shown: Shown, now: float) -> tuple[list[MadeBind], list[MadeBind]]:
        """Every bind against the pod informer (`shown(namespace, name)`: its pod of that name): those it
        shows bound, or gone, are forgotten. Returns (those forgotten after a warning, those newly unshown
        for longer than `shows_s`: each is warned of once)."""
        ended: list[MadeBind] = []
        late: list[MadeBind] = []
        for uid, made in list(self.made.items()):
            if unshown_bind(made, shown(*_named(made))):
                del self.made[uid]
                if made.warned:
                    ended.append(made)
            elif not made.warned and now - made.at > self.shows_s:
                self.made[uid] = replace(made, warned=True)
                late.append(made)
        return ended, late

    def due(self, uids: set[str], now: float) -> list[MadeBind]:
        """Of these pods' binds, those to read back from the API server now: each whose answer was lost, and
        each the API server last showed more than `shows_s` ago (the informer still does not)."""
        return [
            made
            for uid, made in sorted(self.made.items())
            if uid in uids and (not made.answered or now - made.read_at > self.shows_s)
        ]

    def settle(self, made: MadeBind, read: SchedulerPod | None, now: float) -> bool:
        """A read back (`read_back`): True, the bind made (kept, read now, unless ended meanwhile); False,
        forgotten."""
        uid = made.bind.pod.uid
        current = self.made.pop(uid, None)  # a pass of another gang may have ended it while the read ran
        made_ = read_back(made, read)
        if made_ and current is not None:
            self.made[uid] = replace(current, answered=True, read_at=now)
        return made_

    def unshown(self, shown: Shown) -> list[MadeBind]:
        """The binds the pod informer (`shown`, as for `sweep`) does not show yet as it stands now, forgetting
        none: what the gauges count at a scrape, between the passes that sweep."""
        return [made for made in list(self.made.values()) if not unshown_bind(made, shown(*_named(made)))]

    def of(self, uids: set[str]) -> frozenset[Bind]:
        """These pods' binds (plan's `bound`)."""
        return frozenset(made.bind for uid, made in self.made.items() if uid in uids)
