"""The demo's screen is its story: the syncer's log (and the sandbox's progress) go to a file, and a tap
keeps the syncer's actions so the story can tell, in one short line each, what the syncer did."""

from __future__ import annotations

import contextlib
import logging
import tempfile
import threading
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from syncer.app.logs import configure_logging

SCALE_IN_DRAIN = ": draining Slurm node before removing its pod"  # after "scale-in" or "rolling update"


PARTITION_VERBS = {"create": "created", "update": "updated", "drain": "set DRAIN", "delete": "deleted"}


@dataclass(frozen=True)
class Action:
    # drain, undrain, annotate, create, scale-in, delete-pod, delete-node, reserve, partition, attributes
    kind: str
    subject: str  # the Slurm node or pod the action was about
    text: str


def story_line(event: MutableMapping[str, Any]) -> Action | None:
    """One short line for a log event that is a syncer action the story may tell; None for the rest."""
    name = str(event.get("event", ""))
    if name in ("reservation created", "reservation updated", "reservation deleted"):
        verb = name.removeprefix("reservation ")
        text = f"{verb} Slurm reservation {event.get('reservation')} ({event.get('nodes')} node(s))"
        return Action("reserve", str(event.get("name") or ""), text) if event.get("name") else None
    if name.startswith("partition ") and name.removeprefix("partition ") in PARTITION_VERBS:
        nodes = event.get("nodes")
        text = f"{PARTITION_VERBS[name.removeprefix('partition ')]} Slurm partition {event.get('partition')}"
        text += f" (nodes {nodes})" if nodes not in (None, "(none)") else ""
        return Action("partition", str(event.get("partition") or ""), text)
    node = str(event.get("slurm_node") or "")
    pod = str(event.get("pod") or "").rpartition("/")[2]
    subject = node or pod
    if name == "slurm node drained" and not event.get("redrain"):  # a new reason is not a new drain
        kind, text = "drain", f"drained {node} in Slurm, reason {event.get('reason')!r}"
    elif name == "slurm node undrained":
        kind, text = "undrain", f"undrained {node} in Slurm"
    elif name == "kubernetes updated from slurm":
        kind, text = "annotate", f"wrote the Slurm state of {node} onto pod {pod}: {event.get('state')}"
    elif name == "pod created":
        kind, text = "create", f"created pod {pod}"
    elif name.endswith(SCALE_IN_DRAIN):
        kind, text = "scale-in", f"{name.removesuffix(SCALE_IN_DRAIN)} of {pod}: drain its Slurm node first"
    elif name == "pod deleted: its Slurm node is drained and idle":
        kind, text = "delete-pod", f"deleted pod {pod}: its Slurm node is drained and idle"
    elif name == "slurm node updated from labels":
        kind, text = "attributes", f"wrote the {event.get('kind')} of {node} from its Node's labels"
    elif name == "slurm node deleted after its pod":
        kind, text = "delete-node", f"deleted Slurm node {node}"
    elif name == "Slurm powered the member down: pod deleted":
        kind, text = "power-down", f"deleted pod {pod}: Slurm powered its node down"
    else:
        return None
    return Action(kind, subject, text) if subject else None


class ActionTap:
    """A structlog processor that remembers the syncer's actions (see `story_line`) as they are logged."""

    def __init__(self) -> None:
        self._actions: list[Action] = []
        self._lock = threading.Lock()  # the sandbox and to_thread calls may log from other threads

    def __call__(self, _logger: Any, _method: str, event: MutableMapping[str, Any]) -> Any:
        action = story_line(event)
        if action is not None:
            with self._lock:
                self._actions.append(action)
        return event

    def clear(self) -> None:
        with self._lock:
            self._actions.clear()

    def saw(self, subject: str, kind: str) -> bool:
        """Whether an action of `kind` about `subject` was logged and not yet taken."""
        with self._lock:
            return any(a.subject == subject and a.kind == kind for a in self._actions)

    def take(self, *subjects: str, kinds: tuple[str, ...] = ()) -> list[str]:
        """The texts of the actions about `subjects` (of `kinds`; empty: any) logged so far, each text
        once, in order; taken actions are forgotten, the others wait for a later take or `clear`."""

        def wanted(action: Action) -> bool:
            return action.subject in subjects and (not kinds or action.kind in kinds)

        with self._lock:
            taken = [a for a in self._actions if wanted(a)]
            self._actions = [a for a in self._actions if not wanted(a)]
        return list(dict.fromkeys(a.text for a in taken))


def log_path(directory: Path | None) -> Path:
    """`<dir>/syncer.log`, or a file in the temporary directory that outlives the demo."""
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
        return directory / "syncer.log"
    handle = tempfile.NamedTemporaryFile(prefix="slurm-syncer-demo-", suffix=".log", delete=False)  # noqa: SIM115
    handle.close()
    return Path(handle.name)


@contextlib.contextmanager
def logging_to(path: Path | None, fmt: str, level: str, tap: ActionTap) -> Iterator[TextIO | None]:
    """The syncer's log into `path` (None: stderr, as `--verbose` wants), with `tap` on every event;
    Python's own logging (libraries' warnings) and the sandbox's progress go there too."""
    if path is None:
        configure_logging(fmt, level, tap=tap)
        yield None
        return
    with path.open("a", buffering=1) as out:
        configure_logging(fmt, level, stream=out, tap=tap)
        handler = logging.StreamHandler(out)
        root = logging.getLogger()
        root.addHandler(handler)
        try:
            with contextlib.redirect_stderr(out):
                yield out
        finally:
            root.removeHandler(handler)
            configure_logging(fmt, level)  # nothing may log into the closed file
