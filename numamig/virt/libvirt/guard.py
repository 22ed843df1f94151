"""The destination-side migration guard: an incoming XML against the claim.

The source of a live migration writes the domain XML; during a rolling
upgrade the source is often the older node, whose XML logic is the old
one (it copies the pins verbatim), while the destination's move claim is
right. The guard runs on the destination, inside libvirtd's incoming
migration (the ``qemu`` hook, operation ``migrate``): it compares the
XML with the move claim this host holds for the guest and

* passes it through when no claim is held for it here (a guest without
  NUMA characteristics, or a migration numamig did not claim), or when
  it already matches the claim (a source of this release rewrote it);
* rewrites its NUMA parts to the claim with the same pipeline the source
  uses (numamig.virt.libvirt.migration_xml), so that an old or faulty
  source still yields the claimed vCPU, emulator and I/O thread pins,
  numatune, page nodesets and ``<vcpu cpuset>``;
* refuses the migration when XML and claim cannot be reconciled: other
  guest cells, vCPUs or page sizes than were claimed (libvirt would
  refuse those as ABI changes, or the guest would not fit).

When the claims file cannot be trusted (missing, stale: the agent is
down, unreadable) nothing is known; ``when_unknown`` decides: ``pass``
(the default: the XML goes through unchanged and the guard logs it, so
the guard never fails a migration that would have run without it) or
``refuse``.

This module decides; guard_hook runs it as libvirt's hook and the
embedded tier's emulated migration calls ``decide`` the same way. Both
import little: it runs at every incoming migration.
"""

import copy
import dataclasses
import os
import re
import sys
import time

from lxml import etree

from numamig import cpuspec
from numamig import exception
from numamig.virt.libvirt import guard_claims
from numamig.virt.libvirt import migration_xml

PASS, REFUSE = 'pass', 'refuse'
WHEN_UNKNOWN = (PASS, REFUSE)
UNCHANGED, REWRITTEN, REFUSED = 'unchanged', 'rewritten', 'refused'
ACTIONS = (UNCHANGED, REWRITTEN, REFUSED)
SMALL_PAGE_KB = 4
LOG_MODE = 0o640
# The most of the guard's log one read takes (a log grown by more in
# one report interval is read over the next ones).
MAX_LOG_READ = 1024 * 1024
_LOG_LINE = re.compile(
    r'^(?P<at>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (?P<pid>\d+) incoming '
    r'migration of (?P<guest>.*?): (?P<action>unchanged|rewritten|refused) '
    r'(?P<uuid>\S+): (?P<reason>.*)$')


@dataclasses.dataclass(frozen=True)
class GuardSettings:
    """How one host's migration guard runs ([libvirt] migration_guard_*).

    :param hook_path: where libvirt finds the hook (the agent writes it).
    :param claims_file: the file the agent publishes its claims to.
    :param max_age_s: seconds after which the claims file is stale.
    :param when_unknown: PASS or REFUSE, when the claims are unknown.
    :param log_file: where the hook logs its decisions (None: stderr,
        which libvirt logs only when the hook fails).
    :param deadline_s: the hook's own time limit; past it, when_unknown.
    :param python: the interpreter the hook runs with (this one's by
        default: not an option).

    No defaults for the options' fields: settings.guard_from_conf
    fills them, and the hook gets them as arguments.
    """

    hook_path: str | None
    claims_file: str
    max_age_s: float
    when_unknown: str
    log_file: str | None
    deadline_s: float
    python: str = sys.executable

    def __post_init__(self):
        if self.when_unknown not in WHEN_UNKNOWN:
            raise exception.InvalidConfiguration(
                option='[libvirt] migration_guard_when_unknown',
                reason=f"{self.when_unknown!r} is not one of "
                       f"{', '.join(WHEN_UNKNOWN)}")
        if self.max_age_s <= 0 or self.deadline_s <= 0:
            raise exception.InvalidConfiguration(
                option='[libvirt] migration_guard_claims_max_age',
                reason=f"the claims' max age ({self.max_age_s}) and the "
                       f"deadline ({self.deadline_s}) must be positive")


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What the guard does with one incoming XML.

    :ivar action: UNCHANGED, REWRITTEN or REFUSED.
    :ivar xml: the rewritten XML (REWRITTEN only).
    :ivar reason: why, in one line naming the guest.
    :ivar changes: ``(part, before, after)`` of every NUMA part changed.
    """

    action: str
    instance_uuid: str
    reason: str
    xml: str = None
    changes: tuple = ()

    def describe(self):
        """One log line: the decision, then each change."""
        changed = '; '.join(f"{part}: {before} -> {after}"
                            for part, before, after in self.changes)
        return f"{self.action} {self.instance_uuid}: {self.reason}" + (
            f" ({changed})" if changed else '')


@dataclasses.dataclass(frozen=True)
class LogEntry:
    """One decision as the guard's log keeps it (see append_log).

    :ivar at: when, the host's local time as written.
    :ivar guest: the domain's name.
    :ivar action: UNCHANGED, REWRITTEN or REFUSED.
    :ivar instance_uuid: the guest's uuid as the XML named it.
    :ivar reason: why, and each NUMA part changed.
    """

    at: str
    guest: str
    action: str
    instance_uuid: str
    reason: str


def log_line(guest, verdict, now=None):
    """The log line of ``verdict`` on the incoming ``guest``."""
    at = time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(now))
    return (f"{at} {os.getpid()} incoming migration of {guest}: "
            f"{verdict.describe()}\n")


def append_log(settings, guest, verdict):
    """Append the decision to the guard's log, the record of every
    decision the agent counts and notifies (the hook's and the embedded
    tier's emulated migrations' alike).

    :returns: None, or the line and why it could not be appended (no
        log file is set, or it cannot be opened) for the caller to show.
    """
    line = log_line(guest, verdict)
    if not settings.log_file:
        return line
    try:
        fd = os.open(settings.log_file,
                     os.O_WRONLY | os.O_APPEND | os.O_CREAT, LOG_MODE)
        with os.fdopen(fd, 'a', encoding='utf-8') as handle:
            handle.write(line)
        return None
    except OSError as exc:
        return (line + f"(numamig migration guard: cannot append to "
                       f"{settings.log_file}: {exc.strerror})\n")


@dataclasses.dataclass(frozen=True)
class LogPosition:
    """Where a reader of the guard's log stopped: the file (device and
    inode, so that a rotated log is read from its start) and the offset
    after the last whole line read."""

    file: tuple
    offset: int


def read_log(path, position=None):
    """The decisions appended to the guard's log since ``position``.

    :param position: a LogPosition from the last read; None: start at
        the log's current end (decisions made before the reader started
        are not news to it).
    :returns: ([LogEntry], LogPosition). While the log does not exist:
        no entries, and a position from which a log created later is
        read from its start. Lines the guard did not write (an
        operator's note, an error line) are skipped.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return [], LogPosition(None, 0)
    with os.fdopen(fd, 'rb') as handle:
        stat = os.fstat(handle.fileno())
        file_id = (stat.st_dev, stat.st_ino)
        if position is None:
            return [], LogPosition(file_id, stat.st_size)
        offset = position.offset
        if position.file != file_id or stat.st_size < offset:
            offset = 0  # rotated or truncated: a new log
        handle.seek(offset)
        data = handle.read(MAX_LOG_READ)
    whole = data.rfind(b'\n') + 1
    entries = []
    for raw in data[:whole].splitlines():
        match = _LOG_LINE.match(raw.decode('utf-8', 'replace'))
        if match is not None:
            entries.append(LogEntry(
                match['at'], match['guest'], match['action'],
                match['uuid'], match['reason']))
    return entries, LogPosition(file_id, offset + whole)


def decide(xml_text, settings, now=None):
    """The guard's Verdict on an incoming domain XML; reads the claims.

    Never raises for what it is given: an XML or a claims file it cannot
    use gives the ``when_unknown`` verdict.
    """
    try:
        doc = migration_xml.parse_domain(xml_text)
    except exception.DomainXMLError as exc:
        return unknown(settings, '(unparsed)', exc.message)
    uuid = doc.findtext('uuid') or '(no uuid)'
    try:
        host, placements = guard_claims.read(settings.claims_file,
                                             settings.max_age_s, now)
    except guard_claims.ClaimsUnavailable as exc:
        return unknown(settings, uuid, str(exc))
    placement = placements.get(uuid)
    if placement is None:
        return Verdict(UNCHANGED, uuid,
                       f"{host} holds no move claim for it (not a "
                       f"migration numamig claimed here)")
    # An incoming migration's XML is what the guest runs with: its
    # distances are not the guard's to change (guest ABI).
    return against_claim(doc, uuid, host, placement, live=True)


def unknown(settings, uuid, why):
    """The verdict when the claims cannot be known (``when_unknown``)."""
    if settings.when_unknown == REFUSE:
        return Verdict(REFUSED, uuid, f"claims unknown, refused "
                                      f"(when_unknown = refuse): {why}")
    return Verdict(UNCHANGED, uuid, f"claims unknown, XML passed "
                                    f"through unchecked: {why}")


def against_claim(doc, uuid, host, placement, live=False):
    """The Verdict on domain element ``doc`` for the claim ``placement``
    (a ClaimPlacement); ``doc`` is not modified. ``live``: ``doc`` is a
    running guest's XML, whose distances stay as they are
    (migration_xml.apply_numa_info)."""
    claimed = f"claim of migration {placement.migration} on {host}"
    problem = _irreconcilable(doc, placement)
    if problem:
        return Verdict(REFUSED, uuid, f"cannot be reconciled with the "
                                      f"{claimed}: {problem}")
    rewritten = copy.deepcopy(doc)
    try:
        migration_xml.apply_numa_info(rewritten, placement, live=live)
    except exception.DomainXMLError as exc:
        return Verdict(REFUSED, uuid, f"cannot be reconciled with the "
                                      f"{claimed}: {exc.message}")
    changes = _changes(numa_parts(doc), numa_parts(rewritten))
    if not changes:
        return Verdict(UNCHANGED, uuid, f"matches the {claimed}")
    return Verdict(REWRITTEN, uuid, f"rewritten to the {claimed}",
                   xml=etree.tostring(rewritten, encoding='unicode'),
                   changes=changes)


def _irreconcilable(doc, placement):
    """Why the XML cannot take the claim's placement, or None."""
    cells = migration_xml.guest_cell_ids(doc)
    if cells != set(placement.cell_pins):
        return (f"the guest has {len(cells)} NUMA cell(s) "
                f"{sorted(cells)}, the claim places "
                f"{len(placement.cell_pins)} {sorted(placement.cell_pins)}")
    vcpus = set(range(migration_xml.vcpu_count(doc)))
    if placement.cpu_pins and set(placement.cpu_pins) != vcpus:
        return (f"the guest has vCPUs "
                f"{cpuspec.format_cpu_spec(vcpus) or 'none'}, the claim "
                f"pins {cpuspec.format_cpu_spec(set(placement.cpu_pins))}")
    try:
        pages = migration_xml.page_sizes(doc, cells)
    except ValueError as exc:
        return f"its page sizes cannot be read: {exc}"
    for cell in sorted(cells):
        have = pages.get(cell, SMALL_PAGE_KB)
        claimed = placement.pagesizes.get(cell, SMALL_PAGE_KB)
        if have != claimed:
            return (f"guest cell {cell} is backed by {have} KiB pages, "
                    f"the claim took {claimed} KiB pages")
    return None


def numa_parts(doc):
    """{part: its XML attributes as text} of every NUMA part of a domain:
    what the rewrite may change, as a log reader wants to see it."""
    vcpu = doc.find('vcpu')
    parts = {'vcpu cpuset': vcpu.get('cpuset') if vcpu is not None
             else None}
    for path, key in (('cputune/vcpupin', 'vcpu'),
                      ('cputune/iothreadpin', 'iothread'),
                      ('numatune/memnode', 'cellid'),
                      ('memoryBacking/hugepages/page', 'size')):
        for el in doc.iterfind(path):
            parts[f"{el.tag} {el.get(key)}"] = _attributes(el, key)
    for path in ('cputune/emulatorpin', 'cputune/vcpusched',
                 'numatune/memory'):
        el = doc.find(path)
        if el is not None:
            parts[el.tag] = _attributes(el)
    # The distances told to the guest (cell 1's row: "0=21 1=10").
    for cell in doc.iterfind('cpu/numa/cell'):
        siblings = cell.findall('distances/sibling')
        if siblings:
            parts[f"distances {cell.get('id')}"] = ' '.join(
                f"{s.get('id')}={s.get('value')}" for s in siblings)
    return parts


def _attributes(el, skip=None):
    return ' '.join(f"{k}={v}" for k, v in sorted(el.attrib.items())
                    if k != skip)


def _changes(before, after):
    return tuple((part, before.get(part, '(none)'),
                  after.get(part, '(none)'))
                 for part in sorted(set(before) | set(after))
                 if before.get(part) != after.get(part))
