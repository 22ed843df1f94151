"""Process crashes emulated inside one process (embedded tier tests).

A crashed daemon runs no more code: no ``except`` handler rolls anything
back, no RPC reply leaves it, and it touches neither the database nor
the hypervisor again. The hypervisor's guests and the database survive
it, and a restarted daemon must reconcile with them. Inside one process
the same is obtained by:

* raising SimulatedCrash, a BaseException, in the thread that "dies":
  ``except Exception`` cleanup paths are skipped and oslo.messaging sends
  no reply for it (the caller times out, as with a dead process);
* stopping the service's RPC server without waiting for its requests;
* severing the service's links to the world (its RPC clients, driver and
  database): any later use, from any of its threads, raises
  SimulatedCrash too, so nothing a half-dead thread does leaks out.

The hypervisor connection and the database themselves stay open for the
service that replaces it.
"""

import threading

from oslo_log import log as logging

LOG = logging.getLogger(__name__)


class SimulatedCrash(BaseException):
    """The emulated death of a service's process.

    A BaseException so that no ``except Exception`` handler, i.e. no
    graceful cleanup, runs on its way up.
    """


class Dead:
    """Stands in for a link of a crashed service; every use raises."""

    def __init__(self, owner, what):
        self._owner = owner
        self._what = what

    def __getattr__(self, name):
        raise SimulatedCrash(f"{self._owner} has crashed (its {self._what} "
                             f"is gone)")


def sever_rpc_client(api, owner):
    """Make an rpcapi client of a crashed service unusable."""
    if hasattr(api, 'client'):
        api.client = Dead(owner, 'RPC client')
    # A compute client keeps one client per API version it sends.
    for version in getattr(api, '_clients', {}):
        api._clients[version] = Dead(owner, 'RPC client')


def kill_server(svc):
    """Stop a service's RPC server and periodic task, waiting for nothing.

    Requests already dispatched keep running until they touch a severed
    link; requests not yet taken stay queued for the next server.
    """
    if svc.periodic is not None:
        svc.periodic.stop(wait=False)
        svc.periodic = None
    if svc.rpc_server is not None:
        _drop_server(svc.rpc_server)
        svc.rpc_server = None


def _drop_server(server):
    """Stop a server now and let its broker consumer go once its
    dispatched requests have died on the severed links.

    A dead process's connection closes and the broker gives the messages
    it had delivered but not processed to another consumer; a server that
    is only stopped keeps its consumer, and the broker goes on handing it
    messages nobody will ever process.
    """
    server.stop()
    threading.Thread(target=server.wait, name='numamig-crash-cleanup',
                     daemon=True).start()


def sever_link(parts, name, dead):
    """Replace a link in the frozen parts a service's flows hold.

    The flows' parts (compute.agent.Agent, conductor.worker.Worker) are
    frozen so that no flow changes them; a crash is the one thing that
    does, as the death of a process would, and it must reach the flows
    already running with those very parts.
    """
    object.__setattr__(parts, name, dead)


def crash_agent(svc):
    """Kill a ComputeService: no more RPC, driver or conductor for it."""
    owner = f"compute agent {svc.host}"
    kill_server(svc)
    manager = svc.manager
    sever_rpc_client(manager.conductor_api, owner)
    sever_rpc_client(manager.compute_api, owner)
    manager.driver = Dead(owner, 'hypervisor connection')
    manager.tracker.driver = manager.driver
    sever_link(manager.agent, 'driver', manager.driver)
    LOG.warning("SIMULATED CRASH of %s", owner)


def crash_conductor(svc):
    """Kill a ConductorService: no more RPC or database for it."""
    owner = f"conductor {svc.rpc_target.server}"
    kill_server(svc)
    if svc.agent_server is not None:
        _drop_server(svc.agent_server)
        svc.agent_server = None
    svc.executor.abandon()
    svc.manager.drains.stop()
    manager = svc.manager
    sever_rpc_client(manager.compute_api, owner)
    manager.db = Dead(owner, 'database')
    svc.executor.db = manager.db
    sever_link(manager.worker, 'db', manager.db)
    LOG.warning("SIMULATED CRASH of %s", owner)
