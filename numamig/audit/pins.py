"""Audit the pins of every guest of a host, from their domain XML.

What the hypervisor runs is the truth an audit starts from: each guest's
domain XML says which pCPUs its vCPUs and emulator threads may use and
which host nodes back its memory. Checked against the host's CPU sets
and the records, that finds what a verbatim XML copy (the bug NUMA-aware
live migration fixes) or a hand edit leaves behind.
"""

import dataclasses

from numamig import cpuspec
from numamig import exception
from numamig.audit import placement
from numamig.virt.libvirt import guest_parse

# Finding kinds, in the order reports group them.
SHARED_PCPU = 'pcpu-pinned-twice'
OUTSIDE_DEDICATED = 'pin-outside-dedicated-set'
EMULATOR_WRONG_SET = 'emulator-threads-on-wrong-set'
XML_DIFFERS = 'xml-differs-from-records'
UNREADABLE_XML = 'xml-unreadable'
MISSING_DOMAIN = 'domain-missing'
LEAKED_CLAIM = 'leaked-claim'
USAGE_UNOWNED = 'reported-usage-no-record-owns'
USAGE_UNREPORTED = 'recorded-usage-not-reported'
KINDS = (SHARED_PCPU, OUTSIDE_DEDICATED, EMULATOR_WRONG_SET, XML_DIFFERS,
         MISSING_DOMAIN, UNREADABLE_XML, LEAKED_CLAIM, USAGE_UNOWNED,
         USAGE_UNREPORTED)

TITLES = {
    SHARED_PCPU: "pCPUs pinned by more than one guest",
    OUTSIDE_DEDICATED: "vCPU pins outside the host's dedicated set",
    EMULATOR_WRONG_SET: "emulator threads on the wrong CPU set",
    XML_DIFFERS: "domain XML differs from numamig's records",
    MISSING_DOMAIN: "guests recorded on a host that has no domain for them",
    UNREADABLE_XML: "domain XML that could not be read",
    LEAKED_CLAIM: "claims held by migrations no longer in progress",
    USAGE_UNOWNED: "usage an agent reports that no record owns",
    USAGE_UNREPORTED: "recorded usage an agent does not report",
}


@dataclasses.dataclass(frozen=True)
class Finding:
    """One problem: what kind, where, and a sentence saying what."""

    kind: str
    host: str
    detail: str
    instance_uuids: tuple = ()

    def as_dict(self):
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Guest:
    """A guest as an audit sees it: its XML and, if recorded, its record.

    :param xml: the live domain XML, or None when it could not be
        fetched.
    :param instance: the recorded Instance, or None for a guest numamig
        does not know.
    :param error: why the XML could not be fetched.
    :param persistent_xml: the persistent definition, when known: what
        the guest runs with after its next restart.
    :param missing: its host listed its domains and this guest's was
        not among them (not an XML that could not be read: there is
        none to read).
    """

    uuid: str
    name: str
    xml: str = None
    instance: object = None
    error: str = None
    persistent_xml: str = None
    missing: bool = False


def audit_host(host, topology, guests):
    """Return the Findings of one host's guests.

    :param host: the host name.
    :param topology: the host's HostNUMATopology (its CPU sets).
    :param guests: Guest entries, one per guest the host runs.
    """
    findings = []
    owners = {}
    for guest in guests:
        info, problem = _read(guest)
        if problem is not None:
            kind = MISSING_DOMAIN if guest.missing else UNREADABLE_XML
            findings.append(Finding(kind, host, problem, (guest.uuid,)))
            continue
        for pcpu in set().union(*info.cpu_pins.values()) \
                if info.cpu_pins else set():
            owners.setdefault(pcpu, []).append(guest)
        findings += _pin_findings(host, topology, guest, info)
        findings += _record_findings(host, guest)
        findings += _persistent_findings(host, guest)
    findings += _shared(host, owners)
    return sorted(findings, key=lambda f: (KINDS.index(f.kind), f.detail))


def _read(guest):
    if guest.xml is None:
        return None, (f"guest {guest.name} ({guest.uuid}): "
                      f"{guest.error or 'no domain XML'}")
    try:
        return guest_parse.extract_numa_info(guest.xml), None
    except exception.NumamigException as exc:
        return None, f"guest {guest.name} ({guest.uuid}): {exc}"


def _pin_findings(host, topology, guest, info):
    dedicated = set().union(*(c.pcpuset for c in topology.cells))
    shared = set().union(*(c.cpuset for c in topology.cells))
    found = []
    exclusive = {vcpu: pcpus for vcpu, pcpus in info.cpu_pins.items()
                 if len(pcpus) == 1}
    outside = sorted(vcpu for vcpu, pcpus in exclusive.items()
                     if not pcpus <= dedicated)
    if outside:
        pins = ' '.join(f"{v}->{_cpus(exclusive[v])}" for v in outside)
        found.append(Finding(
            OUTSIDE_DEDICATED, host,
            f"guest {guest.name} ({guest.uuid}) pins vCPUs {pins}, not in "
            f"the dedicated set {_cpus(dedicated)}", (guest.uuid,)))
    found += _emulator_findings(host, guest, info, dedicated, shared)
    return found


def _emulator_findings(host, guest, info, dedicated, shared):
    emulator = info.emulator_pins
    if not emulator:
        return []
    topology = guest.instance.get('numa_topology') if guest.instance \
        else None
    isolated = bool(topology is not None and topology.cpuset_reserved)
    pinned = set().union(*info.cpu_pins.values()) if info.cpu_pins \
        else set()
    if isolated:
        allowed, what = dedicated - pinned, "dedicated pCPUs of its own"
    elif shared:
        allowed, what = shared, "the shared set"
    else:
        allowed, what = pinned, "its own vCPUs' pCPUs"
    if emulator <= allowed:
        return []
    return [Finding(
        EMULATOR_WRONG_SET, host,
        f"guest {guest.name} ({guest.uuid}) runs emulator threads on "
        f"{_cpus(emulator)}, expected {what} ({_cpus(allowed)})",
        (guest.uuid,))]


def _record_findings(host, guest):
    instance = guest.instance
    if instance is None:
        return []
    expected = _recorded_here(host, instance)
    if expected is None:
        return [Finding(XML_DIFFERS, host,
                        f"guest {guest.name} ({guest.uuid}) runs here but "
                        f"is recorded on {instance.host}", (guest.uuid,))]
    try:
        actual = guest_parse.parse_guest_topology(guest.xml)
    except exception.NumamigException as exc:
        return [Finding(UNREADABLE_XML, host, str(exc), (guest.uuid,))]
    diffs = placement.differences(expected[0], actual)
    return [Finding(XML_DIFFERS, host,
                    f"guest {guest.name} ({guest.uuid}): {diff}",
                    (guest.uuid,)) for diff in diffs]


def _recorded_here(host, instance):
    """(topology) the records place ``instance`` with on ``host``, or
    None when they do not place it here.

    A guest is placed on its host, and, while a migration holds a claim
    for it, on that claim's destination too: a postcopy-paused guest
    occupies both for as long as it waits for an operator (its
    destination half runs the claimed pins), and a migrating one does
    for a moment. Leaked claims are reported on their own.
    """
    if instance.host == host:
        return (instance.get('numa_topology'),)
    context = instance.get('migration_context')
    if context is not None and context.dest_host == host:
        return (context.get('new_numa_topology'),)
    return None


def _persistent_findings(host, guest):
    """The persistent definition must place the guest as it runs now."""
    if guest.persistent_xml is None or guest.persistent_xml == guest.xml:
        return []
    try:
        live = guest_parse.parse_guest_topology(guest.xml)
        kept = guest_parse.parse_guest_topology(guest.persistent_xml)
    except exception.NumamigException as exc:
        return [Finding(UNREADABLE_XML, host, str(exc), (guest.uuid,))]
    diffs = placement.differences(live, kept)
    return [Finding(XML_DIFFERS, host,
                    f"guest {guest.name} ({guest.uuid}): its persistent "
                    f"definition differs from the running domain (a "
                    f"restart would move it): {diff}", (guest.uuid,))
            for diff in diffs]


def _shared(host, owners):
    found = []
    by_guests = {}
    for pcpu, guests in owners.items():
        if len(guests) > 1:
            key = tuple(sorted({g.uuid: g for g in guests}.items()))
            by_guests.setdefault(key, set()).add(pcpu)
    for key, pcpus in by_guests.items():
        names = ', '.join(f"{g.name} ({uuid})" for uuid, g in key)
        found.append(Finding(
            SHARED_PCPU, host,
            f"pCPUs {_cpus(pcpus)} are pinned by {len(key)} guests: "
            f"{names}", tuple(uuid for uuid, _g in key)))
    return found


def _cpus(cpus):
    return cpuspec.format_cpu_spec(cpus) if cpus else 'none'
