"""A compute agent's metrics: its own view, before any report.

The conductor's endpoint shows every host as its last report left it;
an agent's shows what the agent holds now: its cells' pCPUs and pages
from its resource tracker (guests and claims counted), the outgoing
migrations it runs, and how long its RPC calls took (the one metric kept
in memory: an agent is one process). Built at each scrape; the
tracker's lock is held only to copy its topology.
"""

from prometheus_client import core

from numamig import metrics
from numamig.audit import pins as audit_pins
from numamig.compute import claims as compute_claims
from numamig.numa import cellfit
from numamig.numa import vmem

# The reasons a move claim is refused for: every one is present.
REFUSAL_REASONS = cellfit.REASONS + (compute_claims.NOT_RECORDED,)

# What the audit of this host's own domains can find (the other kinds
# compare records and reports: the conductor's metrics count those).
AUDIT_KINDS = (audit_pins.SHARED_PCPU, audit_pins.OUTSIDE_DEDICATED,
               audit_pins.EMULATOR_WRONG_SET, audit_pins.XML_DIFFERS,
               audit_pins.MISSING_DOMAIN, audit_pins.UNREADABLE_XML)


class AgentCollector(metrics.Collector):
    """The agent's cells and outgoing migrations.

    :param agent: the ComputeManager (its tracker, host and outgoing
        migrations).
    """

    name = 'agent'

    def __init__(self, agent):
        self.agent = agent

    def families(self):
        tracker = self.agent.tracker
        with tracker.lock:
            topology = tracker.usage_topology()
            claims = len(tracker.claims())
            guests = len(tracker.instance_uuids())
            devices = vmem.by_host_node(
                i.get('numa_topology') for i in tracker.instances())
            refused = tracker.claims_refused
            reasons = dict(tracker.claim_refusal_reasons)
        pcpus = core.GaugeMetricFamily(
            'numamig_agent_cell_pcpus',
            "This host's cells' pCPUs as its agent holds them now: "
            "dedicated ones pinned or free, and shared ones.",
            labels=['cell', 'state'])
        pages = core.GaugeMetricFamily(
            'numamig_agent_cell_pages',
            "This host's cells' pages of one size as its agent holds them "
            "now: used, free for guests, reserved for the host.",
            labels=['cell', 'page_size_bytes', 'state'])
        for cell in topology.cells:
            cell_id = str(cell.id)
            cell_pcpus, cell_pages = metrics.cell_counts(cell)
            for state, count in cell_pcpus.items():
                pcpus.add_metric([cell_id, state], count)
            for size, states in cell_pages:
                for state, count in states.items():
                    pages.add_metric([cell_id, str(size), state], count)
        yield pcpus
        yield pages
        reclaimable = core.GaugeMetricFamily(
            'numamig_agent_virtio_mem_reclaimable_bytes',
            "Memory the guests' virtio-mem devices hold on a host node: "
            "what numamig-manage host reclaim could free there, less each "
            "guest's floor.", labels=['node'])
        growable = core.GaugeMetricFamily(
            'numamig_agent_virtio_mem_growable_bytes',
            "Memory the guests' virtio-mem devices on a host node could "
            "still plug (their size less what they were asked).",
            labels=['node'])
        for node, entry in sorted(devices.items()):
            reclaimable.add_metric([str(node)],
                                   entry['reclaimable_mb'] * 2**20)
            growable.add_metric([str(node)], entry['growable_mb'] * 2**20)
        yield reclaimable
        yield growable
        yield core.CounterMetricFamily(
            'numamig_agent_move_claims_refused',
            'Move claims this host refused since the agent started: the '
            "guest did not fit its free resources, or the conductor did not "
            'record the claim.', value=refused)
        why = core.CounterMetricFamily(
            'numamig_agent_move_claim_refusal_reasons',
            "What refused move claims ran out of, by reason: huge-pages, "
            "memory, dedicated-pcpus, cpu-threads, shared-cpus, cells (not "
            "enough distinct host cells), not-recorded. A refusal whose "
            "host cells each lacked something else counts under each.",
            labels=['reason'])
        for reason in REFUSAL_REASONS:
            why.add_metric([reason], reasons.get(reason, 0))
        yield why
        yield core.GaugeMetricFamily(
            'numamig_agent_guests', 'Guests this agent runs.', value=guests)
        yield core.GaugeMetricFamily(
            'numamig_agent_move_claims',
            'Move claims this agent holds for incoming migrations.',
            value=claims)
        yield core.GaugeMetricFamily(
            'numamig_agent_outgoing_migrations',
            'Outgoing migrations this agent runs now.',
            value=len(self.agent.outgoing.uuids()))
        guard = core.CounterMetricFamily(
            'numamig_agent_guard_decisions',
            "The migration guard's decisions on migrations into this host "
            "since the agent started, read from the guard's log: passed "
            "unchanged, rewritten to the claim, refused.",
            labels=['decision'])
        self.agent.guard_decisions.poll()
        for decision, count in self.agent.guard_decisions.counts().items():
            guard.add_metric([decision], count)
        yield guard
        state = core.GaugeMetricFamily(
            'numamig_agent_migration_guard',
            "The migration guard's state on this host: 1 for the state it "
            "is in (on, off, failed: its hook or claims file could not be "
            "written), 0 for the others.", labels=['state'])
        now = self.agent.driver.migration_guard_state()
        for name in ('on', 'off', 'failed'):
            state.add_metric([name], 1 if name == now else 0)
        yield state
        yield from self._cpu_power()
        yield metrics.RPC_CALLS.family(
            'numamig_agent_rpc_call_duration_seconds',
            "This agent's RPC calls (to the conductor and to other "
            "agents) by method and outcome (answered, timeout, error), "
            "since it started.")


    def _cpu_power(self):
        power = self.agent.tracker.power
        down = core.GaugeMetricFamily(
            'numamig_agent_cpus_powered_down',
            "Dedicated pCPUs of a cell that [compute] cpu_power_management "
            "has powered down (offline, or on the low governor) because no "
            "guest or claim pins them; absent when it is off.",
            labels=['cell'])
        changes = core.CounterMetricFamily(
            'numamig_agent_cpu_power_changes',
            "pCPUs this agent powered up or down since it started (writes "
            "that changed a pCPU's state), and writes that failed (the "
            "agent's log says why).", labels=['change'])
        if power is not None and power.enabled:
            for cell_id, count in power.powered_down().items():
                down.add_metric([str(cell_id)], count)
            changes.add_metric(['up'], power.powered_up_total)
            changes.add_metric(['down'], power.powered_down_total)
            changes.add_metric(['failed'], power.failures_total)
        yield down
        yield changes


class AuditCollector(metrics.Collector):
    """The pin audit of this host's domains, as libvirt runs them now.

    The same rules as ``numamig-manage audit pins`` (numamig.audit.pins)
    on every domain the hypervisor lists, numamig's or not, against the
    guests this agent counts: a pCPU two guests pin, a pin outside the
    dedicated set, emulator threads on the wrong set, a live or
    persistent XML that differs from the record, a recorded guest whose
    domain is gone. A finding that outlasts a migration (a guest is
    briefly on both hosts while it moves) is what an alert waits for.
    Reading every domain's XML costs two libvirt calls per guest per
    scrape.

    :param agent: the ComputeManager (its driver, tracker and host).
    """

    name = 'audit'

    def __init__(self, agent):
        self.agent = agent

    def families(self):
        found = audit_pins.audit_host(
            self.agent.host, self.agent.tracker.base_topology,
            self._guests())
        family = core.GaugeMetricFamily(
            'numamig_agent_audit_findings',
            "Problems the pin audit finds in this host's domains now, by "
            "kind (numamig-manage audit pins names each); every kind is "
            "present, 0 when none.", labels=['kind'])
        for kind in AUDIT_KINDS:
            family.add_metric([kind], sum(1 for f in found
                                          if f.kind == kind))
        yield family

    def _guests(self):
        driver = self.agent.driver
        recorded = {i.uuid: i for i in self.agent.tracker.instances()}
        guests = []
        for uuid, name in sorted(driver.list_guests().items()):
            try:
                live = driver.get_domain_xml(uuid)
                persistent = driver.get_domain_xml(uuid, persistent=True)
            except Exception as exc:  # noqa: BLE001 - a finding of its own
                guests.append(audit_pins.Guest(
                    uuid, name, instance=recorded.pop(uuid, None),
                    error=str(exc)))
                continue
            guests.append(audit_pins.Guest(
                uuid, name, xml=live, instance=recorded.pop(uuid, None),
                persistent_xml=persistent))
        for uuid, instance in sorted(recorded.items()):
            guests.append(audit_pins.Guest(
                uuid, instance.name, instance=instance, missing=True,
                error=f"counted on {self.agent.host}, whose hypervisor has "
                      f"no domain for it"))
        return guests


class LocalityCollector(metrics.Collector):
    """The locality watch's last look (numamig.compute.locality): read
    from what the watch keeps, never measured at scrape time.

    :param agent: the ComputeManager (its ``locality`` watch).
    """

    name = 'locality'

    def __init__(self, agent):
        self.agent = agent

    def families(self):
        watch = self.agent.locality
        last = watch.last
        memory = core.GaugeMetricFamily(
            'numamig_agent_guest_memory_bytes',
            "Memory of each running guest on each host node at the "
            "locality watch's last look (the kernel's numa_maps of its "
            "QEMU); none while [locality] policy is off.",
            labels=['instance_uuid', 'node'])
        share = core.GaugeMetricFamily(
            'numamig_agent_guest_remote_memory_share',
            "Share (0-1) of each guest's memory on nodes other than the "
            "one most of its vCPUs ran on, at the last look. Pinned and "
            "strictly bound guests are shown too; the watch never moves "
            "them.", labels=['instance_uuid', 'state'])
        for guest in last.guests:
            for node, mib in sorted(guest.memory_mb.items()):
                memory.add_metric([guest.instance_uuid, str(node)],
                                  mib * 2**20)
            share.add_metric([guest.instance_uuid, guest.state],
                             guest.remote_share)
        yield memory
        yield share
        if last.remote_share is not None:
            yield core.GaugeMetricFamily(
                'numamig_agent_remote_memory_share',
                "Share (0-1) of the measured guests' memory that is remote "
                "from their vCPUs on this host, at the last look.",
                value=last.remote_share)
        yield self._moves(watch)
        yield core.CounterMetricFamily(
            'numamig_agent_locality_pages_moved',
            "4 KiB pages the locality watch moved since the agent "
            "started.", value=watch.pages_moved_total)

    @staticmethod
    def _moves(watch):
        family = core.CounterMetricFamily(
            'numamig_agent_locality_moves',
            "Guests whose memory the locality watch moved since the agent "
            "started, by outcome (moved; failed: libvirt refused).",
            labels=['outcome'])
        family.add_metric(['moved'], watch.moves_total)
        family.add_metric(['failed'], watch.failures_total)
        return family


def collectors(agent):
    """Every collector of a compute agent."""
    return [AgentCollector(agent), AuditCollector(agent),
            LocalityCollector(agent)]
