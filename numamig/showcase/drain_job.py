"""The second showcase: a host drained by a plan, end to end.

``numamig-embedded --drain`` starts an embedded deployment of three
2-cell hosts (8 dedicated pCPUs per cell), fills the destinations so
that only one order empties host-a, and drains it: plan, disable,
reservation, moves through the admission queue, report. One guest at a
time (Nova's way) sends the small guest first to the emptiest host and
strands the big one; the plan places the big guest first. Migrations
between test-driver hosts are emulated by the agents.
"""

import dataclasses
import time

from oslo_utils import uuidutils

from numamig import embedded
from numamig import objects
from numamig.audit import pins as audit_pins
from numamig.showcase import checks as showcase_checks

Check = showcase_checks.Check
ONE_NODE = {'hw:cpu_policy': 'dedicated', 'hw:numa_nodes': '1'}
HOSTS = tuple(embedded.HostDefinition(name, 'numa-2cell-a.xml')
              for name in ('host-a', 'host-b', 'host-c'))
# (name, host, vCPUs): creation order matters (destinations first).
GUESTS = (('resident-b', 'host-b', 8), ('resident-c1', 'host-c', 8),
          ('resident-c2', 'host-c', 6), ('small', 'host-a', 2),
          ('big', 'host-a', 8))
ENDED = ('completed', 'failed', 'aborted')
WAIT_S = 60


@dataclasses.dataclass
class DrainOutcome:
    one_at_a_time: str       # where a lone migration of 'small' goes
    plan: dict
    progress: list
    drain: dict
    hosts: dict              # guest name -> host after the drain
    disabled: bool           # host-a disabled, with no guest left
    findings: list
    claims: dict
    checks: list = dataclasses.field(default_factory=list)

    @property
    def passed(self):
        return all(check.passed for check in self.checks)


def run(state_dir=None):
    """Drain host-a on a fresh embedded deployment; its DrainOutcome."""
    with embedded.EmbeddedDeployment(HOSTS, state_dir=state_dir) as dep:
        guests = {name: _create(dep, name, host, vcpus)
                  for name, host, vcpus in GUESTS}
        lone = dep.api.live_migration_dry_run(dep.context,
                                              guests['small'].uuid)
        plan = dep.api.host_drain_plan(dep.context, 'host-a')
        data = dep.api.host_drain_start(dep.context, 'host-a', 2)
        progress = []
        data = _follow(dep, data, progress)
        dep.report_all()
        after = dep.api.host_drain_plan(dep.context, 'host-a')
        outcome = DrainOutcome(
            one_at_a_time=lone['dest_host'], plan=plan, progress=progress,
            drain=data,
            hosts={name: dep.api.instance_get(dep.context, g.uuid).host
                   for name, g in guests.items()},
            disabled=after['disabled'] and not after['moves'],
            findings=[f for host in ('host-b', 'host-c')
                      for f in _audit(dep, host)],
            claims={h: [c.instance_uuid for c in
                        dep.agent(h).tracker.claims()]
                    for h in dep.agents})
        outcome.checks = evaluate(outcome)
        return outcome


def _create(dep, name, host, vcpus):
    return dep.api.instance_create(dep.context, objects.Instance(
        uuid=uuidutils.generate_uuid(), name=name, project_id='demo',
        vcpus=vcpus, memory_mb=1024, extra_specs=dict(ONE_NODE)), host)


def _follow(dep, data, progress):
    """Wait on the drain's changes (host_drain_wait), noting each
    guest's state as it changes."""
    deadline = time.monotonic() + WAIT_S
    seen = {}
    while True:
        for move in data['moves']:
            state = (move['status'], move['dest_host'] or
                     move['planned_host'])
            if seen.get(move['name']) != state:
                seen[move['name']] = state
                progress.append(f"{move['name']}: {state[0]} -> {state[1]}")
        left = deadline - time.monotonic()
        if data['status'] in ENDED or left <= 0:
            return data
        data = dep.api.host_drain_wait(dep.context, data, min(left, 10))


def _audit(dep, host):
    driver = dep.agent(host).driver
    records = {i.uuid: i for i in
               dep.api.instance_get_all(dep.context, host=host)}
    guests = [audit_pins.Guest(uuid, name, xml=driver.get_domain_xml(uuid),
                               instance=records.get(uuid))
              for uuid, name in sorted(driver.list_guests().items())]
    return audit_pins.audit_host(
        host, dep.agent(host).tracker.usage_topology(), guests)


def evaluate(outcome):
    """The drain showcase's checks."""
    planned = {m['name']: m['dest_host'] for m in outcome.plan['moves']}
    report = outcome.drain['report']
    return [
        Check("one guest at a time strands the big guest",
              outcome.one_at_a_time == 'host-b',
              f"a lone migration of 'small' goes to "
              f"{outcome.one_at_a_time}, taking host-b's only free cell"),
        Check("the plan empties host-a, big guest first",
              outcome.plan['emptiable'] and
              planned == {'big': 'host-b', 'small': 'host-c'},
              f"plan: {planned}"),
        Check("the drain completed", outcome.drain['status'] == 'completed',
              f"{outcome.drain['status']}: {report['moved']} moved, "
              f"{len(report['failed'])} failed in {report['elapsed_s']} s"),
        Check("every guest is where the plan sent it",
              all(outcome.hosts[n] == h for n, h in planned.items()),
              ', '.join(f"{n} on {outcome.hosts[n]}" for n in planned)),
        Check("host-a is empty and stays disabled",
              outcome.disabled and 'host-a' not in outcome.hosts.values(),
              f"disabled: {outcome.disabled}"),
        Check("no pCPU pinned twice, no claim left",
              not outcome.findings and not any(outcome.claims.values()),
              f"{len(outcome.findings)} finding(s), claims "
              f"{ {h: c for h, c in outcome.claims.items() if c} }"),
    ]


def render(outcome):
    """The showcase's report as lines, ending with its verdict."""
    lines = ["numamig drain showcase: empty host-a by a plan",
             "host-b has one free cell; host-c has 2 free pCPUs; host-a "
             "runs 'small' (2) and 'big' (8, one node).",
             f"One guest at a time: 'small' would go to "
             f"{outcome.one_at_a_time}.", "Plan:"]
    lines += [f"  {m['name']} -> {m['dest_host']}"
              for m in outcome.plan['moves']]
    lines.append("Drain (emulated migrations on test-driver hosts):")
    lines += [f"  {line}" for line in outcome.progress]
    report = outcome.drain['report']
    lines.append(f"Report: {report['moved']} moved, "
                 f"{len(report['failed'])} failed, {report['cancelled']} "
                 f"cancelled, {report['elapsed_s']} s")
    for check in outcome.checks:
        lines.append(f"  [{'PASS' if check.passed else 'FAIL'}] "
                     f"{check.label}: {check.detail}")
    lines.append("VERDICT: " + ("PASS - host-a emptied by its plan"
                                if outcome.passed else "FAIL"))
    return lines
