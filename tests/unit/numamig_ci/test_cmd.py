"""numamig-ci's command line: the --nested options."""

import io

from numamig_ci import cmd
from tests import base


class NestedArgumentsTest(base.TestCase):

    def run_main(self, *argv):
        out = io.StringIO()
        return cmd.main(list(argv), stdout=out), out.getvalue()

    def test_bad_layout_is_one_line_and_usage_exit(self):
        code, out = self.run_main('--nested', '--nested-layout', 'sockets=2')
        self.assertEqual(cmd.EXIT_USAGE, code)
        self.assertEqual(["numamig-ci: Invalid input: --nested-layout: "
                          "unknown layout key 'sockets' in 'sockets=2'"],
                         out.splitlines())

    def test_an_unreadable_config_file_is_one_line_and_usage_exit(self):
        code, out = self.run_main('--local-libvirt', '2', '--config-file',
                                  '/nonexistent/quorum.conf')
        self.assertEqual(cmd.EXIT_USAGE, code)
        self.assertEqual(["numamig-ci: Invalid input: --config-file "
                          "/nonexistent/quorum.conf: no such readable file"],
                         out.splitlines())

    def test_three_layouts_for_two_hosts_refused(self):
        code, out = self.run_main('--nested', *['--nested-layout',
                                                'cores=1'] * 3)
        self.assertEqual(cmd.EXIT_USAGE, code)
        self.assertIn('one per host for two hosts; got 3 for 2 hosts', out)

    def test_layouts_reach_the_backend(self):
        args = cmd.build_parser().parse_args(
            ['--nested', '--nested-layout', 'memory=1536:1536:1536,'
             'pages_2m=0:0:0', '--nested-layout', 'memory=1536:1536,'
             'pages_2m=0:0'])
        backend = cmd.make_backend(args)
        self.addCleanup(backend.deployment.stop)
        self.assertEqual([3, 2], [layout.nodes for layout
                                  in backend.deployment.layouts])
        # Hosts with different node counts are still multi-node hosts.
        self.assertIn('multi_node', backend.features)
        self.assertNotIn('huge_pages', backend.features)
