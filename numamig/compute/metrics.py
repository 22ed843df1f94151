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
        yield metrics.RPC_CALLS.family(
            'numamig_agent_rpc_call_duration_seconds',
            "This agent's RPC calls (to the conductor and to other "
            "agents) by method and outcome (answered, timeout, error), "
            "since it started.")


def collectors(agent):
    """Every collector of a compute agent."""
    return [AgentCollector(agent)]
