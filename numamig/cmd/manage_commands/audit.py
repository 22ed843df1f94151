"""numamig-manage audit: compare what hosts run with what numamig records.

The rules live in numamig.audit; this module fetches the inputs (host
reports and records from the database; every domain each host runs,
recorded or not, with its live and persistent XML, through the
conductor) and prints the findings grouped by kind.
"""

from numamig.audit import claims
from numamig.audit import pins
from numamig.audit import usage
from numamig.cmd import common
from numamig.cmd.manage_commands import _access

# Seconds to wait for one guest's domain XML before reporting it unread.
XML_TIMEOUT = 10


class AuditCommands:
    """Audits of pins and claims against the hosts' domain XML."""

    @common.args('--host', dest='host', metavar='HOST', default=None,
                 help="Audit this compute host only (default: all).")
    @common.format_option
    @common.guarded
    def pins(self, host=None, output_format='human'):
        """Audit every guest's pins from its domain XML on its host.

        Every domain of every host is audited, including guests numamig
        has no record of. Finds pCPUs pinned by more than one guest,
        vCPU pins outside the host's dedicated set, emulator threads on
        the wrong CPU set, guests whose XML differs from numamig's
        records (or whose persistent definition differs from the running
        domain), guests recorded on a host whose hypervisor has no
        domain for them, claims held by migrations no longer in progress, and
        usage (pinned pCPUs, pages per host cell, guests and claims) an
        agent's last report shows that the records do not hold, or the
        other way round ('heal claims' fixes both). Changes nothing.
        Exit codes: 0 nothing found; 3 problems found; 127 unknown host;
        255 the database cannot be used.
        """
        from numamig.db import compute_nodes
        api, ctxt = _access.conductor(timeout=XML_TIMEOUT), _access.context()
        with _access.database() as db:
            reports = ([compute_nodes.get(db, host)] if host
                       else compute_nodes.get_all(db))
            findings = []
            for report in reports:
                guests = _domains(db, api, ctxt, report.host) \
                    if api.can_operate() else \
                    _guests(db, api, ctxt, report.host)
                findings += pins.audit_host(report.host, report.topology,
                                            guests)
                findings += usage.of_host(db, report)
            findings += [f for f in claims.leaked(db)
                         if host is None or f.host == host]
        data = grouped(findings, hosts=[r.host for r in reports])
        common.print_output(data, output_format, print_findings)
        return common.EXIT_PROBLEMS if findings else common.EXIT_OK


def _domains(db, api, ctxt, host):
    """Every domain ``host`` runs, matched with its record if any."""
    from numamig import exception
    from numamig.db import instances
    try:
        domains = api.host_domains(ctxt, host)
    except (exception.NotFound, exception.Invalid):
        raise
    except Exception as exc:  # noqa: BLE001 - reported as a finding
        return [pins.Guest(r.instance.uuid, r.instance.name,
                           instance=r.instance,
                           error=f"{host} did not list its domains: {exc}")
                for r in instances.get_all(db, host=host)]
    listed = {d['uuid'] for d in domains}
    guests = [pins.Guest(r.instance.uuid, r.instance.name,
                         instance=r.instance, missing=True,
                         error=f"recorded on {host}, whose hypervisor has "
                               f"no domain for it")
              for r in instances.get_all(db, host=host)
              if r.instance.uuid not in listed]
    for domain in domains:
        try:
            instance = instances.get(db, domain['uuid']).instance
        except exception.InstanceNotFound:
            instance = None  # a guest numamig has no record of
        guests.append(pins.Guest(
            domain['uuid'], domain['name'], xml=domain['live_xml'],
            instance=instance, error=domain['error'],
            persistent_xml=domain['persistent_xml']))
    return guests


def _guests(db, api, ctxt, host):
    """Recorded guests one by one: a conductor capped below API 1.1."""
    from numamig import exception
    from numamig.db import instances
    guests = []
    for record in instances.get_all(db, host=host):
        instance = record.instance
        try:
            xml = api.get_domain_xml(ctxt, instance.uuid)
        except exception.DomainNotFound as exc:
            guests.append(pins.Guest(instance.uuid, instance.name,
                                     instance=instance, missing=True,
                                     error=exception.brief(exc)))
            continue
        except Exception as exc:  # noqa: BLE001 - reported as a finding
            guests.append(pins.Guest(instance.uuid, instance.name,
                                     instance=instance,
                                     error=f"domain XML not read: {exc}"))
            continue
        guests.append(pins.Guest(instance.uuid, instance.name, xml=xml,
                                 instance=instance))
    return guests


def grouped(findings, hosts=()):
    """Findings as ``{'hosts': [...], 'problems': N, 'groups': [...]}``."""
    groups = []
    for kind in pins.KINDS:
        items = [f.as_dict() for f in findings if f.kind == kind]
        if items:
            groups.append({'kind': kind, 'title': pins.TITLES[kind],
                           'findings': items})
    return {'hosts': list(hosts), 'problems': len(findings),
            'groups': groups}


def print_findings(data):
    """Print grouped findings for people."""
    audited = ', '.join(data['hosts']) or 'no host'
    if not data['problems']:
        print(f"Audited {audited}: nothing found.")
        return
    print(f"Audited {audited}: {data['problems']} problem(s).")
    for group in data['groups']:
        print(f"\n{group['title']} ({len(group['findings'])}):")
        for finding in group['findings']:
            print(f"  {finding['host']}: {finding['detail']}")
