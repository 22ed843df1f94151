"""The embedded main job: migrate the spec's three problem guests, show it.

``run`` starts an embedded deployment (SQLite, in-process transport,
libvirt test-driver hosts), creates the guests of
numamig.showcase.scenario through the conductor's RPC API, live-migrates
each scenario's mover to its destination and returns an Outcome per
scenario with its checks. ``render`` turns outcomes into the text the
job prints. Migrations between test-driver hosts are emulated by the
agents (the test driver cannot migrate), and the output says so.
"""

import dataclasses
import textwrap
import time

from oslo_utils import uuidutils

from numamig import embedded
from numamig import objects
from numamig.audit import pins as audit_pins
from numamig.cmd import pictures
from numamig.showcase import checks as showcase_checks
from numamig.showcase import scenario as world
from numamig.showcase import xmldiff


@dataclasses.dataclass
class HostState:
    """A host's usage (claims included) and its in-memory move claims."""

    topology: object
    claims: list


@dataclasses.dataclass
class Outcome:
    """Everything one scenario's migration showed, and its checks."""

    scenario: world.Scenario
    before: object
    after: object
    resident: object
    migration: object
    xml_before: str
    xml_after: str
    hosts_before: dict
    hosts_after: dict
    source_guests_after: dict
    dest_guests: list
    elapsed: float
    checks: list = dataclasses.field(default_factory=list)

    @property
    def passed(self):
        return all(check.passed for check in self.checks)


def run(state_dir=None, hosts=world.HOSTS, guests=world.GUESTS,
        scenarios=world.SCENARIOS):
    """Run the main job on a fresh embedded deployment.

    :returns: (Outcomes, {host name: HostNUMATopology after everything}).
    """
    with embedded.EmbeddedDeployment(hosts, state_dir=state_dir) as dep:
        created = {spec.name: _create(dep, spec) for spec in guests}
        outcomes = [_migrate(dep, created, s) for s in scenarios]
        return outcomes, {h: s.topology for h, s in _snapshot(dep).items()}


def _create(dep, spec):
    instance = objects.Instance(
        uuid=uuidutils.generate_uuid(), name=spec.name, project_id='demo',
        vcpus=spec.vcpus, memory_mb=spec.memory_mb,
        extra_specs=dict(spec.specs))
    return dep.api.instance_create(dep.context, instance, spec.host)


def _snapshot(dep):
    """Each host's usage after a fresh report, and its move claims."""
    dep.report_all()
    return {name: HostState(dep.agent(name).tracker.usage_topology(),
                            [c.instance_uuid for c in
                             dep.agent(name).tracker.claims()])
            for name in dep.agents}


def _migrate(dep, created, scenario):
    mover = dep.api.instance_get(dep.context, created[scenario.mover].uuid)
    source = mover.host
    xml_before = dep.agent(source).driver.get_domain_xml(mover.uuid)
    hosts_before = _snapshot(dep)
    start = time.monotonic()
    migration = dep.api.live_migrate_instance(dep.context, mover.uuid,
                                              scenario.dest)
    migration = dep.wait_for_migration(migration.uuid)
    elapsed = time.monotonic() - start
    after = dep.api.instance_get(dep.context, mover.uuid)
    dest_driver = dep.agent(scenario.dest).driver
    resident = (dep.api.instance_get(dep.context,
                                     created[scenario.resident].uuid)
                if scenario.resident else None)
    outcome = Outcome(
        scenario=scenario, before=mover, after=after, resident=resident,
        migration=migration, xml_before=xml_before,
        xml_after=_xml_or_none(dest_driver, mover.uuid),
        hosts_before=hosts_before, hosts_after=_snapshot(dep),
        source_guests_after=dep.agent(source).driver.list_guests(),
        dest_guests=_guests(dep, scenario.dest), elapsed=elapsed)
    outcome.checks = showcase_checks.evaluate(outcome)
    return outcome


def _xml_or_none(driver, uuid):
    return driver.get_domain_xml(uuid) if uuid in driver.list_guests() \
        else None


def _guests(dep, host):
    driver = dep.agent(host).driver
    records = {i.uuid: i for i in
               dep.api.instance_get_all(dep.context, host=host)}
    return [audit_pins.Guest(uuid, name, xml=driver.get_domain_xml(uuid),
                             instance=records.get(uuid))
            for uuid, name in sorted(driver.list_guests().items())]


# -- rendering ----------------------------------------------------------------

RULE = '-' * 78


def render(outcomes, final_hosts):
    """The job's report as lines: stage, each scenario, the verdict."""
    lines = [RULE, "numamig main job: NUMA-aware live migration of the "
             "spec's three problem guests", RULE,
             "Embedded deployment: conductor + 3 compute agents in this "
             "process, SQLite,", "in-process RPC, libvirt test-driver "
             "hosts (migrations are EMULATED: the", "destination defines "
             "the rewritten XML, the source forgets the guest).", ""]
    for outcome in outcomes:
        lines += _scenario_lines(outcome, len(outcomes)) + ['']
    lines += [f"Hosts at the end ({pictures.LEGEND}):"]
    for host, topology in sorted(final_hosts.items()):
        for cell in sorted(topology.cells, key=lambda c: c.id):
            lines.append(f"  {host} cell {cell.id}  "
                         f"{pictures.core_picture(cell)}  1G pages "
                         f"{_pages_1g(cell)} used")
    return lines + ['', verdict(outcomes)]


def verdict(outcomes):
    """The one-line verdict of the job."""
    passed = sum(o.passed for o in outcomes)
    failed = [f"{o.scenario.number} ({c.label})" for o in outcomes
              for c in o.checks if not c.passed]
    if not failed:
        return (f"VERDICT: PASS - {passed}/{len(outcomes)} guests "
                f"re-placed for their destination, every check held.")
    return (f"VERDICT: FAIL - {passed}/{len(outcomes)} scenarios passed; "
            f"failed: {', '.join(failed)}")


def _scenario_lines(outcome, total):
    s, m = outcome.scenario, outcome.migration
    lines = [f"[{s.number}/{total}] {s.title}", *_wrap(s.problem, 4), '',
             f"    live-migrate {s.mover}: {outcome.before.host} -> "
             f"{s.dest}  ... {m.status} in {outcome.elapsed:.2f} s", '']
    lines += _placement_lines("before", outcome.before)
    lines += _placement_lines("after", outcome.after)
    diff = xmldiff.diff(outcome.xml_before, outcome.xml_after) \
        if outcome.xml_after else ['  (no XML on the destination)']
    lines += ["    domain XML, NUMA parts (- source, + destination):"]
    lines += [f"      {line}" for line in diff or ['  (identical)']]
    lines += _claims_lines(outcome)
    lines += ["    checks:"]
    lines += [f"      [{'ok' if c.passed else 'FAIL'}] {c.label}: {c.detail}"
              for c in outcome.checks]
    lines.append(f"    => {'PASS' if outcome.passed else 'FAIL'}")
    return lines


def _placement_lines(label, instance):
    placed = pictures.placement_lines(instance.get('numa_topology'))
    head = f"    {label:<6} on {instance.host}: "
    return [head + placed[0]] + [' ' * len(head) + p for p in placed[1:]]


def _claims_lines(outcome):
    hosts = sorted({outcome.before.host, outcome.scenario.dest})
    lines = ["    claims (pinned pCPUs, 1G pages used/total per cell; "
             "move claims):"]
    for host in hosts:
        for label, states in (('before', outcome.hosts_before),
                              ('after', outcome.hosts_after)):
            state = states[host]
            cells = '  '.join(_cell_usage(c) for c in
                              sorted(state.topology.cells,
                                     key=lambda c: c.id))
            moving = f"  +{len(state.claims)} move claim(s)" \
                if state.claims else ''
            lines.append(f"      {host} {label:<6} {cells}{moving}")
    return lines


def _cell_usage(cell):
    pinned = pictures.cpus_text(cell.pinned_cpus)
    return f"c{cell.id} P:{pinned} 1G:{_pages_1g(cell)}"


def _pages_1g(cell):
    pool = cell.pages_of(showcase_checks.PAGE_1G_KB)
    return f"{pool.used}/{pool.total}" if pool else '-'



def _wrap(text, indent):
    return textwrap.wrap(text, 78 - indent, initial_indent=' ' * indent,
                         subsequent_indent=' ' * indent)
