"""numamig-manage migration resume: resume a postcopy-paused migration.

Kept apart from numamig.cmd.manage_commands.migration (which mixes it
into its category) so that module stays readable; the rules are the
conductor's (numamig.conductor.tasks.resume).
"""

from numamig import exception
from numamig.cmd import common
from numamig.cmd.manage_commands import _access

STATUS = common.lazy('numamig.objects.fields', 'MigrationStatus')


class ResumeCommand:
    """The ``resume`` action of ``numamig-manage migration``."""

    @common.args('migration', metavar='ID', help="Migration UUID.")
    @common.args('--wait', action='store_true', default=False,
                 help="Follow the resume until it completes or the "
                      "migration is postcopy-paused again.")
    @common.args('--wait-timeout', dest='wait_timeout', type=float,
                 default=None, metavar='SECONDS',
                 help="With --wait, stop waiting after this long (the "
                      "resume goes on).")
    @common.format_option
    @common.guarded
    def resume(self, migration, wait=False, wait_timeout=None,
               output_format='human'):
        """Resume a postcopy-paused migration: its source tries the
        post-copy resume again (one more recovery run within [libvirt]
        live_migration_postcopy_recovery_timeout).

        It ends completed (the guest runs on the destination) or
        postcopy-paused again, the attempt in its recovery history. A
        repeat while it is resumed, after that resume ended, or after it
        completed, changes nothing and says so. Exit codes: 0 resume
        started, already running, already resumed or already completed
        (with --wait: completed); 1 the
        source did not answer (the migration stays running until its
        agent is back), or with --wait postcopy-paused again or still
        resuming at the timeout; 127 unknown migration, one that is
        not postcopy-paused, or a source that refused (its guest is not
        paused there, or its agent is too old: it stays postcopy-paused,
        its history records the refused attempt); 255 the
        conductor cannot be reached.
        """
        _access.require_uuid(migration, 'migration')
        if wait_timeout is not None and not (wait and wait_timeout > 0):
            # As 'migration start': refused before anything is asked.
            raise exception.Invalid(
                reason=f"--wait-timeout {wait_timeout:g} needs --wait and a "
                       f"number of seconds above 0")
        api, ctxt = _access.conductor(), _access.context()
        # The pause this request resumes: delivered again after that
        # resume ran, it starts nothing (numamig.conductor.tasks.resume).
        seen = api.migration_get(ctxt, migration)
        pauses = sum(1 for change in seen.get('history') or ()
                     if change.status in STATUS.HALTED)
        answer = api.migration_resume(ctxt, migration, pauses=pauses)
        found, outcome = answer['migration'], answer['outcome']
        if wait and found.status not in STATUS.SETTLED:
            from numamig.cmd.manage_commands import migration as commands
            try:
                found = commands.follow(api, ctxt, found, output_format,
                                        timeout=wait_timeout)
            except KeyboardInterrupt:
                return commands._interrupted(found, output_format)
        common.print_output(view(found, outcome), output_format,
                            print_resume)
        if wait and found.status != STATUS.COMPLETED:
            # stderr only: stdout already holds the migration.
            return common.fail(
                f"migration {found.uuid} is {found.status} "
                f"{'again' if found.status in STATUS.HALTED else 'still'}; "
                f"see 'numamig-manage migration show {found.uuid}'",
                common.EXIT_NO)
        return common.EXIT_OK


RESUME_LINES = {
    'resuming': "resume started on {source_host}",
    'already-resuming': "already being resumed on {source_host}: nothing "
                        "more was started",
    'already-resumed': "the pause this request saw was resumed already "
                       "(it is {status} now): nothing more was started",
    'already-completed': "already completed: nothing to resume",
}


def view(migration, outcome):
    """``migration show``'s data with the resume's outcome."""
    from numamig.cmd.manage_commands import migration as commands
    return dict(commands._view(migration), resume=outcome)


def print_resume(data):
    from numamig.cmd.manage_commands import migration as commands
    print(f"Migration {data['uuid']}: "
          f"{RESUME_LINES[data['resume']].format(**data)}")
    commands._print_show(data)
