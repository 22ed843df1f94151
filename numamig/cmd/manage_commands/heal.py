"""numamig-manage heal: release what ended migrations still hold."""

from numamig.audit import claims
from numamig.cmd import common
from numamig.cmd.manage_commands import _access
from numamig.cmd.manage_commands import audit


class HealCommands:
    """Repairs of records that outlived what they describe."""

    @common.args('--dry-run', dest='dry_run', action='store_true',
                 default=False,
                 help="Only list the leaked claims; release nothing.")
    @common.format_option
    @_access.guarded
    def claims(self, dry_run=False, output_format='human'):
        """Release move claims held by migrations no longer in progress.

        Such a claim keeps a destination's pCPUs and pages reserved for a
        guest that will never arrive. Each release is conditional on the
        migration that holds it, so a claim a new migration took in the
        meantime is left alone. Destination agents drop the released
        usage at their next periodic recompute. Exit codes: 0 nothing
        leaked; 3 leaked claims found (--dry-run); 4 leaked claims
        released; 255 the database cannot be used.
        """
        with _access.database() as db:
            found = claims.leaked(db)
            released, skipped = ([], []) if dry_run else \
                claims.heal(db, found)
        data = audit.grouped(found)
        data.update(dry_run=dry_run,
                    released=[f.as_dict() for f in released],
                    skipped=[f.as_dict() for f in skipped])
        common.print_output(data, output_format, _print_heal)
        if not found:
            return common.EXIT_OK
        return common.EXIT_PROBLEMS if dry_run or not released \
            else common.EXIT_HEALED


def _print_heal(data):
    if not data['problems']:
        print("No leaked claim: nothing to heal.")
        return
    audit.print_findings(data)
    if data['dry_run']:
        print("\nDry run: nothing released. Run without --dry-run to "
              "release them.")
        return
    print(f"\nReleased {len(data['released'])} claim(s).")
    for finding in data['skipped']:
        print(f"  skipped (changed meanwhile): {finding['detail']}")
