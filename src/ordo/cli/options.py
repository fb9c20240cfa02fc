"""Options shared by several commands, and how results are printed."""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from datetime import MAXYEAR, UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ordo.arguments import LARGEST_INTEGER
from ordo.cli.integer_range import IntegerRange
from ordo.cli.spark_master import SPARK_MASTER
from ordo.cli.variable_option import VariableOption
from ordo.errors import ConfigurationError, InvalidIdentifierError, InvalidInputError
from ordo.settings import ENV_PREFIX, EventsByTagSettings, ProcessorSettings
from ordo.settings.loading import LONGEST_MS
from ordo.storage.location import creatable_location, existing_location
from ordo.storage.open import existing_stores_at
from ordo.time import BucketSize
from ordo.wording import counted

if TYPE_CHECKING:  # ordo.tools.status brings the CDC ports, which no journal command uses
    from ordo.storage.stores import Stores
    from ordo.tools.status import SegmentStatus

F = TypeVar("F", bound=Callable[..., Any])

NUMBER = IntegerRange(max=LARGEST_INTEGER)
"""An integer option with no range of its own."""
SEQUENCE_NR = IntegerRange(min=1, max=LARGEST_INTEGER)
"""A sequence nr option: a persistence id's events are numbered from 1, so 0 or less is a usage
error (exit 2) rather than the journal's InvalidSequenceNrError."""
SEGMENT_ID = IntegerRange(min=0, max=LARGEST_INTEGER)
"""A segment id argument: a larger one is the usage error (exit 2) of every other number out of
range rather than the token store's InvalidInputError (exit 1)."""


def non_empty(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback refusing an empty name, in the words of the command line (`TABLE`).

    Unchecked, an empty table would be refused by what the command builds from it
    (`MaterializerSpec.name must not be empty`), or listed as a table without schemas (exit
    status 0).
    """
    if value == "":
        shown = param.opts[0] if isinstance(param, click.Option) else param.human_readable_name
        msg = f"{shown} must not be empty"
        raise InvalidIdentifierError(msg)
    return value


def journal_option(func: F) -> F:
    """--journal URL, also from ORDO_JOURNAL."""
    return click.option(
        "--journal",
        "journal_url",
        envvar="ORDO_JOURNAL",
        show_envvar=True,
        metavar="URL",
        help="Journal URL: sqlite:///path.db, a file path, or postgresql://...",
    )(func)


def int_option(
    name: str,
    default: int,
    help_text: str,
    *,
    minimum: int = 1,
    maximum: int = LARGEST_INTEGER,
    envvar: str | None = None,
) -> Callable[[F], F]:
    """An integer option in a range, with its default shown; also from `envvar` if given."""
    return click.option(
        name,
        cls=VariableOption,
        type=IntegerRange(min=minimum, max=maximum),
        default=default,
        show_default=True,
        envvar=envvar,
        show_envvar=envvar is not None,
        help=help_text,
    )


class NumberRange(click.FloatRange):
    """click's FloatRange of finite numbers: nan compares false with either bound and so passed.

    `simulate --rate nan` ran unpaced and exited 0; a share of nan failed later, as a
    ConfigurationError instead of a usage error. `--rate inf` is above any lower bound and ran
    unpaced too.
    """

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The float of `value` in the range; a usage error for nan and the infinities."""
        number = super().convert(value, param, ctx)
        if math.isnan(number):
            self.fail(f"{value!r} is not a number", param, ctx)
        if math.isinf(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


def share_option(name: str, default: float, help_text: str) -> Callable[[F], F]:
    """A share (0 to 1) option, with its default shown."""
    return click.option(
        name, type=NumberRange(0, 1), default=default, show_default=True, help=help_text
    )


def workload_options(*, persistence_ids: int, seed_help: str) -> Callable[[F], F]:
    """--writers, --events, --persistence-ids and --seed of a generated shop workload."""

    def decorate(func: F) -> F:
        for option in reversed(
            (
                int_option("--writers", 4, "Writer processes.", maximum=64),
                int_option("--events", 20_000, "Events to append."),
                int_option("--persistence-ids", persistence_ids, "Distinct persistence ids."),
                click.option("--seed", default=1, show_default=True, type=NUMBER, help=seed_help),
            )
        ):
            func = option(func)
        return func

    return decorate


EXECUTOR_TIMEOUT_MS = 60_000
"""How long a cluster's master may take to start a job's first executor: a healthy standalone
cluster starts one within seconds, and a minute leaves room for a YARN or Kubernetes cluster
that starts a container or pulls an image first; as long as Spark tries to reach a master that
does not answer. Without a bound, a master with no free workers left the command waiting for
ever without a word."""


def master_options(
    default: str, help_text: str = "Spark master URL (a cluster works).", *, prefix: str = ""
) -> Callable[[F], F]:
    """--master and --executor-timeout-ms, the options of a command that runs Spark.

    --master is a usage error unless it has the form of a Spark master URL; --executor-timeout-ms
    (also from ORDO_EXECUTOR_TIMEOUT_MS) is the time `job_session` gives a cluster's master to
    start the job's first executor. `prefix` starts the latter's help (when it applies).
    """
    timeout_help = (
        f"{prefix}Fail if a cluster's master has started no executor for the job within this "
        "many ms (a local master is not waited for)."
    )

    def decorate(func: F) -> F:
        func = int_option(
            "--executor-timeout-ms",
            EXECUTOR_TIMEOUT_MS,
            timeout_help,
            maximum=LONGEST_MS,
            envvar="ORDO_EXECUTOR_TIMEOUT_MS",
        )(func)
        return click.option(
            "--master", default=default, show_default=True, type=SPARK_MASTER, help=help_text
        )(func)

    return decorate


def json_option(func: F) -> F:
    """--json: one JSON document on stdout instead of text."""
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")(func)


def require_journal(url: str | None) -> str:
    """The journal URL, or a one-line error when neither --journal nor ORDO_JOURNAL is set."""
    if not url:
        msg = "no journal given: pass --journal URL or set ORDO_JOURNAL"
        raise ConfigurationError(msg)
    return url


def existing_journal(url: str | None) -> str:
    """The journal URL of a command that works on an existing journal (`existing_location`).

    A misspelt path must not become a new, empty journal. Commands that only read use
    `read_only_stores`, which also refuses to upgrade the journal's schema.
    """
    url = require_journal(url)
    existing_location(url)
    return url


def journal_to_write(url: str | None) -> str:
    """The journal URL of a command that writes and creates a missing journal file.

    Only the file: a missing folder is refused here (`creatable_location`), before the command
    reads its input or looks at a CDC source, as opening the journal would refuse it later.
    `ordo init`, which is for creating journals, creates folders too.
    """
    url = require_journal(url)
    creatable_location(url)
    return url


def read_only_stores(url: str | None) -> AbstractContextManager[Stores]:
    """The stores of a command that only reads the journal (`existing_stores_at`)."""
    return existing_stores_at(require_journal(url))


def settings_from_env() -> EventsByTagSettings:
    """Events-by-tag settings from ORDO_* environment variables (defaults otherwise)."""
    return EventsByTagSettings.from_env(os.environ)


def claim_timeout_ms() -> int:
    """ORDO_CLAIM_TIMEOUT_MS (or its default) in ms; read before the journal is opened.

    Opening a journal may change it (an older schema upgraded, an SQLite file switched to WAL):
    a bad value read after that left a changed journal behind its one-line error.
    """
    return ProcessorSettings.from_env(os.environ).claim_timeout_ms


def chosen_bucket_size() -> BucketSize | None:
    """ORDO_BUCKET_SIZE when it is set, else None: the bucket size a user chose.

    `ordo init` records only a chosen one; the other settings are not read, as init uses none.
    """
    name = f"{ENV_PREFIX}BUCKET_SIZE"
    if name not in os.environ:
        return None
    return EventsByTagSettings.from_env({name: os.environ[name]}).bucket_size


def print_json(document: object) -> None:
    """Write one JSON document to stdout."""
    click.echo(json.dumps(document, ensure_ascii=False, indent=2))


def print_fields(document: Mapping[str, object]) -> None:
    """Write a document's fields as `key  value` lines: the text form of a command's --json.

    Values that are not strings are shown as JSON, as --json shows them: Python's own text
    showed None, True and dicts in single quotes. Keys are padded to the longest one: a fixed
    width glued `lost_as_the_seeds_allow` to its value.
    """
    width = max(map(len, document), default=0) + 2
    for key, value in document.items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        click.echo(f"{key:<{width}}{shown}")


def shown_token(segment: SegmentStatus) -> str:
    """`segment`'s token for the text outputs of the two statuses: `start` before its first event.

    `ordo status` showed `-` where `processors status` showed `start` (the JSON's null): one
    segment read as unknown in one view and as not started in the other.
    """
    return segment.token or "start"


def claim_age(segment: SegmentStatus, age: str) -> str:
    """The claim's `age` as shown, marked when the claim has expired (the owner is gone)."""
    return f"{age}, expired" if segment.claim_expired else age


def beyond_token(segment: SegmentStatus) -> list[str]:
    """What `segment` handled beyond its token, one phrase each, for the text outputs.

    A merged segment resumes at its slower half's token while the faster half's events up to
    its part's offset are handled already, and a reset segment replays up to an offset: the
    token alone reads as further behind than the segment is. The phrases say what the JSON's
    `ahead` and `replay_until` say.
    """
    phrases = [f"merged part {part['segment']} ahead at {part['offset']}" for part in segment.ahead]
    if segment.replay_until is not None:
        phrases.append(f"replays until {segment.replay_until}")
    return phrases


def pending_request(segment: SegmentStatus) -> list[str]:
    """The request waiting for `segment`'s owner, as a phrase for the text outputs.

    `processors split` on a running processor only asks the owner; until the owner takes the
    request between two batches, this is where an operator sees that it is still to come.
    """
    if segment.request is None or segment.request_age_ms is None:
        return []
    return [f"{segment.request} requested {segment.request_age_ms / 1000:.1f} s ago"]


def without_tokens(positions: int) -> str:
    """A processor with `positions` but no tokens, for the text outputs of the two statuses."""
    return (
        f"no tokens  {counted(positions, 'position')} "
        "(a Spark projection's own sink: `processors reset --sink` clears them)"
    )


def progress(message: str) -> None:
    """Progress of long work goes to stderr, so stdout stays one result."""
    click.echo(message, err=True)


class ThrottledProgress:
    """Progress lines of long work on stderr: the first at once, then at most one every few s.

    A line per batch or per window made millions of rows print thousands of lines. The lines
    held back are not lost for good: leaving the `with` block prints the newest of them, so the
    last thing said is where the work stopped (finished, failed or interrupted by Ctrl-C, whose
    one line then follows it). Not thread-safe: one command's loop calls it.
    """

    EVERY_S = 5.0

    def __init__(self, *, seconds: Callable[[], float] = time.monotonic) -> None:
        """`seconds` is a monotonic clock in seconds: time.monotonic, or a test's own."""
        self._seconds = seconds
        self._shown_at: float | None = None
        self._held: str | None = None

    def __call__(self, message: str) -> None:
        """Print `message` unless a line was printed less than EVERY_S ago; else hold it."""
        now = self._seconds()
        if self._shown_at is not None and now - self._shown_at < self.EVERY_S:
            self._held = message
            return
        self._shown_at, self._held = now, None
        progress(message)

    def __enter__(self) -> ThrottledProgress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._held is not None:
            progress(self._held)
            self._held = None


def aware_time(
    text: str, *, name: str, unreadable: str, error: type[InvalidInputError] = InvalidInputError
) -> datetime:
    """An argument's ISO-8601 time with a zone; `error` naming `name` otherwise.

    `unreadable` ends the message of a text that is no time ("is not an ISO-8601 time ...").
    A time without a zone is refused rather than read in the machine's zone, which would move
    it by hours from one machine to another. So is one whose zone puts it outside years 1 to
    9999 in UTC, where every time is compared: the error spoke of an `epoch_ms` never given.
    """
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        msg = f"{name} {text!r} {unreadable}"
        raise error(msg) from exc
    if moment.utcoffset() is None:
        msg = f"{name} {text!r} has no zone; add one (e.g. +00:00)"
        raise error(msg)
    try:
        moment.astimezone(UTC)
    except OverflowError as exc:  # its zone moved it out of years 1 to 9999
        bound = (
            f"after {datetime.max.replace(tzinfo=UTC).isoformat()}, the latest"
            if moment.year == MAXYEAR
            else f"before {datetime.min.replace(tzinfo=UTC).isoformat()}, the earliest"
        )
        msg = f"{name} {text!r} is {bound} time ordo reads (in UTC)"
        raise error(msg) from exc
    return moment
