"""--deployment FILE: an existing numamig deployment, described in JSON.

    {
      "transport_url": "rabbit://user:pass@broker:5672/",
      "control_exchange": "numamig",
      "database": "postgresql+psycopg2://numamig@db/numamig",
      "report_interval": 10,
      "guest_memory_mb": 256,
      "hosts": {
        "compute-1": {"libvirt_uri": "qemu+ssh://compute-1/system",
                      "cpu_dedicated_set": "2-15", "cpu_shared_set": "0-1"},
        "compute-2": {"libvirt_uri": "qemu+ssh://compute-2/system",
                      "cpu_dedicated_set": "4-15", "cpu_shared_set": "0-3"}
      },
      "real_qemu": false
    }

The harness creates its guests through numamig on these hosts and
deletes them afterwards through numamig too ('instance delete': the
agent destroys the domain and releases its usage, the conductor drops
the record); it reads the domains through the libvirt URIs. The CPU
sets must be the ones the hosts' numamig.conf give: they are what the
checks hold the XML against.
"""

import json

from numamig import cpuspec
from numamig import exception
from numamig.ci.backends import remote

REQUIRED = ('transport_url', 'database', 'hosts')


class DeploymentBackend(remote.RemoteBackend):
    """Hosts and daemons someone else runs; the harness only visits."""

    name = 'deployment'

    def __init__(self, transport_url, db_url, hosts, control_exchange=None,
                 report_interval=10, guest_memory_mb=256,
                 real_qemu=False):
        super().__init__(transport_url, db_url, control_exchange,
                         report_interval)
        self.host_specs = hosts
        self.guest_memory_mb = guest_memory_mb
        # Reading /proc needs the guests on this machine; a remote
        # deployment offers the topology features its reports show.
        self.features = frozenset({'qemu_threads'} if real_qemu else ())

    @classmethod
    def from_file(cls, path):
        """Read a deployment file.

        :raises CIDeploymentFileInvalid: naming the file and the field.
        """
        try:
            with open(path) as f:
                data = json.load(f)
        except OSError as exc:
            raise _invalid(path, 'the file', f"cannot be read: "
                                             f"{exc.strerror}")
        except json.JSONDecodeError as exc:
            raise _invalid(path, 'the file', f"is not JSON: {exc}")
        if not isinstance(data, dict):
            raise _invalid(path, 'the file', "must hold a JSON object")
        for field in REQUIRED:
            if not data.get(field):
                raise _invalid(path, field, "is missing")
        hosts = data['hosts']
        if not isinstance(hosts, dict) or len(hosts) < 2:
            raise _invalid(path, 'hosts', "must name at least two hosts")
        specs = {name: _host(path, name, spec)
                 for name, spec in hosts.items()}
        return cls(data['transport_url'], data['database'], specs,
                   control_exchange=data.get('control_exchange'),
                   report_interval=_positive(path, data, 'report_interval',
                                             10),
                   guest_memory_mb=_positive(path, data, 'guest_memory_mb',
                                             256),
                   real_qemu=bool(data.get('real_qemu', False)))

    def start(self):
        self.connect({n: s['uri'] for n, s in self.host_specs.items()},
                     {n: (s['dedicated'], s['shared'])
                      for n, s in self.host_specs.items()})
        reports = self.wait_for_reports(3 * self.report_interval + 5)
        self.features = self.features | _features(reports)

    def stop(self):
        self.disconnect()


def _host(path, name, spec):
    if not isinstance(spec, dict) or not spec.get('libvirt_uri'):
        raise _invalid(path, f"hosts.{name}.libvirt_uri", "is missing")
    sets = {}
    for key in ('cpu_dedicated_set', 'cpu_shared_set'):
        text = spec.get(key)
        try:
            sets[key] = frozenset(cpuspec.parse_cpu_spec(text)) \
                if text else None
        except cpuspec.CPUSpecError as exc:
            raise _invalid(path, f"hosts.{name}.{key}", f"is unusable: "
                                                        f"{exc}")
    return {'uri': spec['libvirt_uri'],
            'dedicated': sets['cpu_dedicated_set'],
            'shared': sets['cpu_shared_set']}


def _positive(path, data, key, default):
    value = data.get(key, default)
    if not isinstance(value, int) or value < 1:
        raise _invalid(path, key, f"must be a positive integer, got "
                                  f"{value!r}")
    return value


def _features(reports):
    """The topology features every reported host offers."""
    cells = [r.topology.cells for r in reports.values()]
    found = set()
    if all(len(c) >= 2 for c in cells):
        found.add('multi_node')
    if all(any(len(g) > 1 for cell in c for g in cell.siblings)
           for c in cells):
        found.add('smt')
    if all(any(p.size_kb > 4 and p.total for cell in c
               for p in cell.mempages) for c in cells):
        found.add('huge_pages')
    return found


def _invalid(path, field, reason):
    return exception.CIDeploymentFileInvalid(path=path, field=field,
                                             reason=reason)
