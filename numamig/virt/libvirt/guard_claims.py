"""The claims file: what a compute agent tells its libvirt migration guard.

The guard (numamig.virt.libvirt.guard_hook) runs inside libvirtd's
incoming migration, so it must never wait for the agent: the agent
publishes the placement of every move claim it holds to one local file,
and the guard reads only that file. The agent rewrites the file
atomically (a new file renamed over the old one, so a reader sees the
old or the new claims, never half of them) whenever its claims change,
and at least every third of the guard's ``max_age`` so that a reader can
tell a live agent's file from a dead agent's: a file older than
``max_age`` is stale.

Standard library only: the guard imports this module at every migration.

The format (JSON, ``version`` 1)::

    {"version": 1, "host": "dst", "written_at": 1767000000.0,
     "claims": {"<instance uuid>": {
         "migration": "<migration uuid>",
         "cpu_pins": {"0": [5]}, "cell_pins": {"0": [1]},
         "emulator_pins": [0, 8], "sched_vcpus": [], "sched_priority": null,
         "pagesizes": {"0": 1048576}, "floating_cpus": [0, 8]}}}
"""

import json
import os
import time

FORMAT_VERSION = 1
# The file of a host with hundreds of claims is a few hundred KiB; a
# larger one is not numamig's and is not read.
MAX_BYTES = 4 * 1024 * 1024
FILE_MODE = 0o640
DIRECTORY_MODE = 0o750


class ClaimsUnavailable(Exception):
    """Raised when the claims file cannot tell what this host claimed
    (missing, stale, unreadable, too large, not numamig's format)."""


class ClaimPlacement:
    """One claim's placement, with the attributes the XML rewrite reads.

    The same attributes as NUMAMigrateInfo (numamig.objects), without
    importing the versioned objects, which the guard cannot afford.
    """

    __slots__ = ('migration', 'cpu_pins', 'cell_pins', 'emulator_pins',
                 'sched_vcpus', 'sched_priority', 'pagesizes',
                 'floating_cpus', 'cell_distances')

    def __init__(self, migration, cpu_pins, cell_pins, emulator_pins=(),
                 sched_vcpus=(), sched_priority=None, pagesizes=None,
                 floating_cpus=None, cell_distances=None):
        self.migration = migration
        self.cpu_pins = {int(v): set(p) for v, p in cpu_pins.items()}
        self.cell_pins = {int(c): set(n) for c, n in cell_pins.items()}
        self.emulator_pins = set(emulator_pins)
        self.sched_vcpus = set(sched_vcpus)
        self.sched_priority = sched_priority
        self.pagesizes = {int(c): int(s)
                          for c, s in (pagesizes or {}).items()}
        self.floating_cpus = None if floating_cpus is None else \
            set(floating_cpus)
        # Absent from files of agents before distances were told: none.
        self.cell_distances = {
            int(c): {int(o): int(v) for o, v in row.items()}
            for c, row in (cell_distances or {}).items()}

    @property
    def host_nodes(self):
        """Every host node the guest's memory lives on."""
        return set().union(*self.cell_pins.values())

    @classmethod
    def from_info(cls, migration, info):
        """The placement of a NUMAMigrateInfo (or anything shaped so)."""
        return cls(migration, info.cpu_pins, info.cell_pins,
                   info.emulator_pins, info.sched_vcpus,
                   info.sched_priority, info.pagesizes, info.floating_cpus,
                   getattr(info, 'cell_distances', None))

    def as_dict(self):
        entry = {
            'migration': self.migration,
            'cpu_pins': {str(v): sorted(p)
                         for v, p in sorted(self.cpu_pins.items())},
            'cell_pins': {str(c): sorted(n)
                          for c, n in sorted(self.cell_pins.items())},
            'emulator_pins': sorted(self.emulator_pins),
            'sched_vcpus': sorted(self.sched_vcpus),
            'sched_priority': self.sched_priority,
            'pagesizes': {str(c): s
                          for c, s in sorted(self.pagesizes.items())},
            'floating_cpus': None if self.floating_cpus is None else
            sorted(self.floating_cpus),
        }
        # Only where there are some: a guard of the release before
        # distances were told reads such an entry as it always did.
        if self.cell_distances:
            entry['cell_distances'] = {
                str(c): {str(o): v for o, v in sorted(row.items())}
                for c, row in sorted(self.cell_distances.items())}
        return entry


def write(path, host, placements, now=None):
    """Publish ``placements`` ({instance uuid: ClaimPlacement}) atomically.

    The file is created mode 0640 (root and the group of whoever reads
    the guard's decisions; it names guests and pCPUs), its directory 0750
    if missing.

    :raises OSError: the file could not be written; the old one stays.
    """
    document = {
        'version': FORMAT_VERSION, 'host': host,
        'written_at': time.time() if now is None else now,
        'claims': {uuid: placement.as_dict()
                   for uuid, placement in sorted(placements.items())},
    }
    directory = os.path.dirname(path) or '.'
    os.makedirs(directory, mode=DIRECTORY_MODE, exist_ok=True)
    temporary = f"{path}.{os.getpid()}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                 FILE_MODE)
    try:
        with os.fdopen(fd, 'w', encoding='utf-8') as handle:
            os.fchmod(handle.fileno(), FILE_MODE)
            json.dump(document, handle, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def read(path, max_age, now=None):
    """Return (host, {instance uuid: ClaimPlacement}) from the claims file.

    :param max_age: seconds after ``written_at`` the file is stale.
    :raises ClaimsUnavailable: naming why the file cannot be trusted.
    """
    now = time.time() if now is None else now
    try:
        with open(path, 'rb') as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > MAX_BYTES:
                raise ClaimsUnavailable(
                    f"claims file {path} holds {size} bytes, more than "
                    f"the {MAX_BYTES} a numamig claims file can hold")
            text = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise ClaimsUnavailable(
            f"claims file {path} does not exist (the compute agent never "
            f"ran with the migration guard here)")
    except OSError as exc:
        raise ClaimsUnavailable(f"claims file {path} cannot be read: "
                                f"{exc.strerror or exc}")
    document = _parse(path, text)
    age = now - document['written_at']
    if age > max_age:
        raise ClaimsUnavailable(
            f"claims file {path} was written {age:.0f} s ago, more than "
            f"{max_age} s: the compute agent of {document['host']} is not "
            f"running (it rewrites the file every {max_age / 3:.0f} s)")
    return document['host'], _placements(path, document['claims'])


def _parse(path, text):
    try:
        document = json.loads(text)
        if document['version'] != FORMAT_VERSION:
            raise ClaimsUnavailable(
                f"claims file {path} has format version "
                f"{document['version']!r}, this guard reads "
                f"{FORMAT_VERSION}")
        float(document['written_at'])
        str(document['host'])
        dict(document['claims'])
    except (ValueError, KeyError, TypeError) as exc:
        raise ClaimsUnavailable(
            f"claims file {path} is not a numamig claims file: "
            f"{type(exc).__name__}: {exc}")
    return document


def _placements(path, claims):
    try:
        return {uuid: ClaimPlacement(**entry)
                for uuid, entry in claims.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ClaimsUnavailable(
            f"claims file {path} holds a malformed claim: "
            f"{type(exc).__name__}: {exc}")
