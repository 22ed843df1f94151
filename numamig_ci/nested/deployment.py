"""A numamig deployment whose libvirtd hosts run in a nested NUMA host.

One virtual machine (numamig_ci.nested.vm) with a multi-node layout runs
two (or more) libvirtd hosts side by side, each in its own mount
namespace with its own hugetlbfs mounts; the conductor and one compute
agent per host run here, as in --local-libvirt, and reach their libvirtd
over the forwarded TCP port (``qemu+tcp://127.0.0.1:PORT/system``). A
libvirtd inside dials its migration peer at that same address, which
inside the machine is the peer's own port.

The hosts share one kernel, so its resources are split between them by
numamig's own configuration: every huge page pool is divided (each host
reserves the other hosts' part with ``reserved_huge_pages``), and the
CPU sets differ (the first host keeps each node's last CPU shared, the
others only node 0's). Page counts are split from what the kernel really
reserved, read back after boot.
"""

import os

from numamig_ci import local_deployment
from numamig_ci.nested import image
from numamig_ci.nested import vm as nested_vm

MIGRATION_PORT_BASE = 49200


class NestedHost:
    """A libvirtd host inside the machine, as the daemons here see it."""

    def __init__(self, name, port, machine):
        self.name = name
        self.port = port
        self.uri = f'qemu+tcp://127.0.0.1:{port}/system'
        self.machine = machine

    def qemu_pid(self, domain_name):
        return self.machine.agent.qemu_pid(self.name, domain_name)

    def stop(self):
        """Nothing here: the machine's power-off stops every daemon."""


class NestedDeployment(local_deployment.LocalDeployment):
    """``count`` libvirtd hosts in one nested host, daemons here.

    After ``start_hosts``: ``vm`` is the running NestedVM and ``pools``
    {host: {(node, size KiB): pages it may give guests}}.
    """

    def __init__(self, count=2, layout=None, transport_url=None,
                 db_url=None, state_dir=None, log=print,
                 boot_timeout=nested_vm.BOOT_TIMEOUT_S):
        super().__init__(count, transport_url=transport_url, db_url=db_url,
                         state_dir=state_dir)
        self.layout = layout or nested_vm.Layout()
        self.boot_timeout = boot_timeout
        self.log = log
        self.vm = None
        self.pools = {}

    def start_hosts(self):
        """Build or find the image, boot the machine, start the hosts.

        :raises image.ImageUnavailable: no image and none can be built.
        :raises RuntimeError: the machine or a daemon did not start.
        """
        image_dir = image.ensure(log=self.log)
        os.makedirs(self.state_dir, exist_ok=True)
        from numamig.db import api as db_api
        db_api.Database(self.db_url).sync()
        self.vm = nested_vm.NestedVM(
            self.layout, image_dir, code_dir=_code_dir(),
            state_dir=os.path.join(self.state_dir, 'vm'),
            caps_dir=image_dir + '.qemu-caps', ports=len(self.host_names),
            boot_timeout=self.boot_timeout)
        self.vm.start()
        kernel = self.vm.agent.huge_pages()
        self.pools = split_pools(kernel, self.host_names)
        for index, name in enumerate(self.host_names):
            port = self.vm.ports[index]
            self.vm.agent.start_host(name, port,
                                     MIGRATION_PORT_BASE + 64 * index)
            self.libvirt[name] = NestedHost(name, port, self.vm)
            self.sets[name] = host_sets(index, self.layout)

    def _config(self, name, host, sets):
        text = super()._config(name, host, sets)
        if host is None:
            return text
        lines = [f'reserved_huge_pages = node:{node},size:{size},'
                 f'count:{total - mine}'
                 for (node, size), (total, mine)
                 in sorted(self.pools[name].items()) if total > mine]
        return text + ''.join(line + '\n' for line in lines)

    def stop(self):
        try:
            super().stop()
        finally:
            if self.vm is not None:
                self.vm.stop()
                self.vm = None


def split_pools(kernel, hosts):
    """{host: {(node, size KiB): (pages in the pool, pages it may use)}}.

    ``kernel`` is the agent's ``huge_pages()``: {node: {size: [free,
    total]}} as strings. Each pool is divided evenly; the remainder goes
    to the hosts after an offset that turns with the node, so that a
    pool of one page per node gives each host one node's page.
    """
    count = len(hosts)
    result = {host: {} for host in hosts}
    for node, sizes in kernel.items():
        for size, (_free, total) in sizes.items():
            for index, host in enumerate(hosts):
                extra = 1 if (index - int(node)) % count < total % count \
                    else 0
                result[host][(int(node), int(size))] = (
                    total, total // count + extra)
    return result


def host_sets(index, layout):
    """(dedicated, shared) of the ``index``-th host (from 0).

    The first host keeps the last CPU of every node shared, the others
    only node 0's last CPU: the sets differ and every host has a shared
    set (mixed and shared emulator policies need one on both sides).
    """
    cpus = [cpu for node in range(layout.nodes)
            for cpu in layout.node_cpus(node)]
    nodes = range(layout.nodes) if index == 0 else (0,)
    shared = frozenset(layout.node_cpus(node)[-1] for node in nodes)
    if len(cpus) < 2:
        return frozenset(cpus), None
    return frozenset(cpus) - shared, shared


def _code_dir():
    """The directory holding the numamig_ci package (the agent's code)."""
    import numamig_ci
    return os.path.dirname(os.path.dirname(os.path.abspath(
        numamig_ci.__file__)))
