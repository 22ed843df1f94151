"""numamig-manage's category table: summaries and lazy loading."""

import contextlib
import inspect
import io

from numamig.cmd import common
from numamig.cmd import manage
from tests.unit.cmd import cli_base


class CategoriesTestCase(cli_base.CLITestCase):

    def test_summaries_are_the_first_docstring_paragraphs(self):
        for name, (_path, summary) in manage.CATEGORIES.items():
            doc = inspect.getdoc(manage.load_category(name))
            self.assertEqual(common.summary(doc), summary, name)

    def test_every_action_summary_is_a_whole_sentence(self):
        # A summary cut at the docstring's first line break reads as
        # "List migrations, oldest first, with status, hosts, the guest's".
        for name in manage.CATEGORIES:
            category = manage.load_category(name)
            for action, func in common.actions_of(category).items():
                text = common.summary(inspect.getdoc(func))
                self.assertTrue(text and text.endswith(('.', ')')),
                                f"{name} {action}: {text!r}")

    def test_only_named_categories_are_loaded(self):
        found = manage._categories_for(['--config-file', 'x', 'migration',
                                        'start', 'uuid'])
        self.assertIs(manage.load_category('migration'), found['migration'])
        self.assertEqual({n: s for n, (_p, s) in manage.CATEGORIES.items()
                          if n != 'migration'},
                         {n: v for n, v in found.items() if n != 'migration'})

    def test_shell_completion_loads_every_category(self):
        found = manage._categories_for(['--shell_completion', 'bash'])
        self.assertFalse([n for n, v in found.items() if isinstance(v, str)])

    def test_help_lists_every_category(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exc = self.assertRaises(SystemExit, manage.main, ['--help'])
        self.assertEqual(0, exc.code)
        for name, (_path, summary) in manage.CATEGORIES.items():
            self.assertIn(name, out.getvalue())
            self.assertIn(summary.split()[0], out.getvalue())

    def test_a_category_runs_when_named(self):
        code, out, err = self.run_cli('db', 'version')
        self.assertEqual(0, code, err)


class ProcessEndTestCase(cli_base.CLITestCase):

    def setUp(self):
        super().setUp()
        self.freeze = self.useFixture(cli_base.fixtures.MockPatch(
            'gc.freeze')).mock
        self.useFixture(cli_base.fixtures.MockPatch(
            'numamig.cmd.manage._run', return_value=0))

    def test_console_script_leaves_objects_to_exit(self):
        self.useFixture(cli_base.fixtures.MonkeyPatch(
            'sys.argv', ['numamig-manage', 'db', 'version']))
        self.assertEqual(0, manage.main())
        self.freeze.assert_called_once_with()

    def test_main_with_argv_leaves_the_process_as_it_was(self):
        self.assertEqual(0, manage.main(['db', 'version']))
        self.freeze.assert_not_called()


class UsageErrorTestCase(cli_base.CLITestCase):
    """A command line argparse refuses: one line, 127, as bad input."""

    def test_bad_choice_is_one_line_and_127(self):
        code, out, err = self.run_cli('migration', 'list', '--status',
                                      'nope', '--format', 'json')
        self.assertEqual(127, code)
        self.assertEqual(["error: argument --status: invalid choice: "
                          "'nope' (choose from 'accepted', 'queued', "
                          "'preparing', 'running', 'postcopy-paused', "
                          "'post-migrating', 'completed', 'failed', "
                          "'error', 'cancelled')"],
                         err.strip().splitlines())
        self.assertIn('"exit_code": 127', out)

    def test_unknown_category_is_127(self):
        code, _, err = self.run_cli('nope')
        self.assertEqual(127, code)
        self.assertIn("invalid choice: 'nope'", err)
