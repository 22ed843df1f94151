"""numamig-manage heal: release what ended migrations still hold, and
bring agents' usage back to the records."""

from numamig.audit import claims
from numamig.audit import pins
from numamig.audit import usage
from numamig.cmd import common
from numamig.cmd.manage_commands import _access
from numamig.cmd.manage_commands import audit


class HealCommands:
    """Repairs of records that outlived what they describe."""

    @common.args('--dry-run', dest='dry_run', action='store_true',
                 default=False,
                 help="Only list leaked claims and usage differences; "
                      "change nothing.")
    @common.format_option
    @common.guarded
    def claims(self, dry_run=False, output_format='human'):
        """Release move claims held by migrations no longer in progress.

        Such a claim keeps a destination's pCPUs and pages reserved for a
        guest that will never arrive. The conductor releases it in the
        records, in its scheduler's reservations and on the destination
        agent, at once. Each release is conditional on the migration
        that holds it, so a claim a new migration took in the meantime
        is left alone.

        Then each host whose last report differs from the records
        (pinned pCPUs, pages per host cell, guests and claims counted;
        see 'audit pins') is asked to recompute its usage from the
        records now, as it does every [compute]
        update_resources_interval: usage no record owns goes, except a
        claim of a migration still in progress, and recorded usage is
        counted. Nothing is recorded: a guest running without a record
        is for 'instance adopt'. What its fresh report still shows is
        listed as not healed. Exit codes: 0 nothing found; 3 found
        (--dry-run, or none healed); 4 healed; 255 the database or the
        conductor cannot be used.
        """
        api = _access.conductor()
        if api.can_operate():
            answer = api.heal_claims(_access.context(), dry_run=dry_run)
            found, released, skipped = (
                [pins.Finding(**f) for f in answer[key]]
                for key in ('found', 'released', 'skipped'))
        else:
            found, released, skipped = _heal_in_database(dry_run)
        differ, healed, remaining = _heal_usage(api, dry_run)
        found, released = found + differ, released + healed
        skipped += remaining
        data = audit.grouped(found)
        data.update(dry_run=dry_run,
                    released=[f.as_dict() for f in released],
                    skipped=[f.as_dict() for f in skipped])
        common.print_output(data, output_format, _print_heal)
        if not found:
            return common.EXIT_OK
        return common.EXIT_PROBLEMS if dry_run or not released \
            else common.EXIT_HEALED


def _heal_in_database(dry_run):
    """A conductor capped below API 1.1 cannot heal: change the records
    only; agents drop the usage at their next recompute."""
    with _access.database() as db:
        found = claims.leaked(db)
        released, skipped = ([], []) if dry_run else claims.heal(db, found)
    return found, released, skipped


def _heal_usage(api, dry_run):
    """(found, healed, remaining) usage differences of every host."""
    from numamig.db import compute_nodes
    ctxt = _access.context()
    with _access.database() as db:
        found = [f for report in compute_nodes.get_all(db)
                 for f in usage.of_host(db, report)]
        if dry_run or not found:
            return found, [], []
        healed, remaining = usage.heal(api, ctxt, db, found)
    return found, healed, remaining


def _print_heal(data):
    if not data['problems']:
        print("No leaked claim: nothing to heal.")
        return
    audit.print_findings(data)
    if data['dry_run']:
        print("\nDry run: nothing released. Run without --dry-run to "
              "release them.")
        return
    print(f"\nHealed {len(data['released'])} of {data['problems']}.")
    for finding in data['skipped']:
        print(f"  not healed: {finding['host']}: {finding['detail']}")
