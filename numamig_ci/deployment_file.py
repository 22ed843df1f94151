"""The ``numamig-ci --deployment`` file: read it and refuse any mistake.

    {
      "transport_url": "rabbit://user:pass@broker:5672/",
      "control_exchange": "numamig",
      "database": "postgresql+psycopg2://numamig@db/numamig",
      "report_interval": 10,
      "guest_memory_mb": 256,
      "real_qemu": false,
      "hosts": {
        "compute-1": {"libvirt_uri": "qemu+ssh://compute-1/system",
                      "cpu_dedicated_set": "2-15", "cpu_shared_set": "0-1"},
        "compute-2": {"libvirt_uri": "qemu+ssh://compute-2/system",
                      "cpu_dedicated_set": "4-15", "cpu_shared_set": "0-3"}
      }
    }

The whole file is checked before the harness reaches anything: a
mistyped setting would otherwise be ignored and a forgotten CPU set
replaced by a guess, and the checks would then judge the guests'
XML against pCPUs the hosts never configured. ``cpu_shared_set`` may be
left out (or null) for a host without a shared set; every other host
setting and the three top-level ones marked required must be there.
"""

import dataclasses
import difflib
import json

from numamig import cpuspec
from numamig_ci import exception as ci_exception

#: setting -> (JSON type, required)
SETTINGS = {
    'transport_url': (str, True),
    'database': (str, True),
    'hosts': (dict, True),
    'control_exchange': (str, False),
    'report_interval': (int, False),
    'guest_memory_mb': (int, False),
    'real_qemu': (bool, False),
}
HOST_SETTINGS = {
    'libvirt_uri': (str, True),
    'cpu_dedicated_set': (str, True),
    'cpu_shared_set': (str, False),
}
DEFAULTS = {'control_exchange': None, 'report_interval': 10,
            'guest_memory_mb': 256, 'real_qemu': False}
_JSON_TYPES = {str: 'a string', int: 'a positive integer',
               bool: 'true or false', dict: 'a JSON object'}


@dataclasses.dataclass(frozen=True)
class HostSpec:
    """One host as the file describes it; ``shared`` is empty when the
    host has no shared set."""

    name: str
    libvirt_uri: str
    dedicated: frozenset
    shared: frozenset


@dataclasses.dataclass(frozen=True)
class DeploymentSpec:
    """A whole deployment file; ``hosts`` keeps the file's order."""

    path: str
    transport_url: str
    database: str
    hosts: dict
    control_exchange: str = None
    report_interval: int = 10
    guest_memory_mb: int = 256
    real_qemu: bool = False


def load(path):
    """Read and check the deployment file at ``path``.

    :raises CIDeploymentFileInvalid: naming the file, the setting (as
        ``hosts.NAME.setting`` inside a host) and what is wrong with it.
    """
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as exc:
        raise invalid(path, 'the file', f"cannot be read: {exc.strerror}")
    except json.JSONDecodeError as exc:
        raise invalid(path, 'the file', f"is not JSON: {exc}")
    return parse(path, data)


def parse(path, data):
    """Check the decoded file ``data``; return a DeploymentSpec."""
    if not isinstance(data, dict):
        raise invalid(path, 'the file', "must hold a JSON object")
    values = _settings(path, '', data, SETTINGS)
    hosts = values.pop('hosts')
    if len(hosts) < 2:
        raise invalid(path, 'hosts', f"must name at least two hosts (a "
                                     f"migration needs a destination), "
                                     f"got {len(hosts)}")
    specs = {name: _host(path, name, spec) for name, spec in hosts.items()}
    return DeploymentSpec(path=path, hosts=specs,
                          **{**DEFAULTS, **values})


def _host(path, name, spec):
    prefix = f'hosts.{name}.'
    if not isinstance(spec, dict):
        raise invalid(path, f'hosts.{name}', "must be a JSON object")
    values = _settings(path, prefix, spec, HOST_SETTINGS)
    dedicated = _cpus(path, prefix + 'cpu_dedicated_set',
                      values['cpu_dedicated_set'])
    shared = _cpus(path, prefix + 'cpu_shared_set',
                   values.get('cpu_shared_set'))
    if not dedicated:
        raise invalid(path, prefix + 'cpu_dedicated_set',
                      "names no pCPU: the harness's guests have pinned "
                      "vCPUs")
    if dedicated & shared:
        raise invalid(path, prefix + 'cpu_shared_set',
                      f"overlaps cpu_dedicated_set on pCPUs "
                      f"{cpuspec.format_cpu_spec(dedicated & shared)}")
    return HostSpec(name, values['libvirt_uri'], dedicated, shared)


def _settings(path, prefix, data, known):
    """The settings of ``data`` after checking names, presence, types."""
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"did you mean {close[0]}?" if close else \
                f"known: {', '.join(sorted(known))}"
            raise invalid(path, prefix + key,
                          f"is not a setting numamig-ci knows ({hint})")
    values = {}
    for key, (kind, required) in known.items():
        value = data.get(key)
        if value is None:
            if required:
                raise invalid(path, prefix + key, "is missing")
            continue
        # bool is an int to Python, never to the file's reader.
        if type(value) is not kind or (kind is int and value < 1):
            raise invalid(path, prefix + key,
                          f"must be {_JSON_TYPES[kind]}, got "
                          f"{json.dumps(value)}")
        if kind in (str, dict) and not value:
            raise invalid(path, prefix + key,
                          "is empty" + ("" if required else
                                        " (leave it out if there is none)"))
        values[key] = value
    return values


def _cpus(path, field, text):
    try:
        return frozenset(cpuspec.parse_cpu_spec(text))
    except cpuspec.CPUSpecError as exc:
        raise invalid(path, field, f"is unusable: {exc}")


def invalid(path, field, reason):
    return ci_exception.CIDeploymentFileInvalid(path=path, field=field,
                                             reason=reason)
