"""The main job's verdict, exit code and rendering, on made-up outcomes."""

import contextlib
import io

import fixtures

from numamig.cmd import embedded
from numamig.cmd import pictures
from numamig.showcase import checks
from numamig.showcase import job
from numamig.showcase import scenario
from numamig.showcase import xmldiff
from tests import base
from tests.unit.cmd import cli_base
from tests.unit.db import base as db_base


def outcome(passed=True):
    before = cli_base.make_instance('host-a', name='pinned-mover')
    after = cli_base.make_instance('host-b', uuid=before.uuid)
    after.numa_topology.cells[0].cpu_pinning = {0: 3, 1: 2}
    host = job.HostState(db_base.make_host_topology(), [])
    result = job.Outcome(
        scenario=scenario.SCENARIOS[0], before=before, after=after,
        resident=None, migration=cli_base.make_migration(
            before.uuid, source_host='host-a', status='completed'),
        xml_before=cli_base.domain_xml(before),
        xml_after=cli_base.domain_xml(after),
        hosts_before={'host-a': host, 'host-b': host},
        hosts_after={'host-a': host, 'host-b': host},
        source_guests_after={}, dest_guests=[], elapsed=0.25)
    result.checks = [checks.Check('it held', True, 'fine'),
                     checks.Check('other', passed, 'detail')]
    return result


class JobTest(base.TestCase):

    def test_verdict(self):
        self.assertTrue(job.verdict([outcome()]).startswith(
            'VERDICT: PASS - 1/1'))
        self.assertEqual('VERDICT: FAIL - 1/2 scenarios passed; failed: '
                         '1 (other)',
                         job.verdict([outcome(), outcome(passed=False)]))

    def test_render_shows_placements_diff_and_claims(self):
        text = '\n'.join(job.render([outcome()], {}))
        self.assertIn('before on host-a: guest cell 0 -> host cell 0', text)
        self.assertIn('-   <vcpupin vcpu="0" cpuset="2"/>', text)
        self.assertIn('+   <vcpupin vcpu="0" cpuset="3"/>', text)
        self.assertIn('host-b before c0 P:none 1G:1/4', text)
        self.assertIn('[ok] it held: fine', text)

    def test_exit_code_follows_the_checks(self):
        for outcomes, code in (([outcome()], 0),
                               ([outcome(), outcome(False)], 1)):
            self.useFixture(fixtures.MockPatch(
                'numamig.cmd.embedded._run', return_value=(outcomes, {})))
            with contextlib.redirect_stdout(io.StringIO()) as out:
                self.assertEqual(code, embedded.main([]))
            self.assertIn('VERDICT', out.getvalue())

    def test_job_that_cannot_run_is_255(self):
        self.useFixture(fixtures.MockPatch(
            'numamig.cmd.embedded._run', side_effect=OSError('no libvirt')))
        with contextlib.redirect_stderr(io.StringIO()) as err:
            self.assertEqual(255, embedded.main([]))
        self.assertIn('no libvirt', err.getvalue())


class PicturesTest(base.TestCase):

    def test_cell_marks(self):
        cell = db_base.make_host_topology().cells[1]
        cell.pinned_cpus = {6}
        self.assertEqual('[4s 5s] [6P 7.]', pictures.core_picture(cell))
        self.assertEqual('c1 1/2 pCPU 1G 3/4', pictures.cell_summary(cell))

    def test_xml_diff_identical(self):
        xml = cli_base.domain_xml(cli_base.make_instance())
        self.assertEqual([], xmldiff.diff(xml, xml))
        self.assertIn('<numatune>', xmldiff.numa_lines(xml))
