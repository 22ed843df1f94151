import signal, subprocess, time, sys
import testtools
from tests.functional.faults import harness

class T(testtools.TestCase):
    def test(self):
        w = self.useFixture(harness.FaultDeployment(hosts=1))
        w.conductor.kill()
        time.sleep(9)
        agent, = w.agents.values()
        t0 = time.monotonic()
        agent.proc.send_signal(signal.SIGTERM)
        for at in (1.0, 2.6, 3.6):
            time.sleep(max(0, t0 + at - time.monotonic()))
            out = subprocess.run(['/work/main/.venv/bin/py-spy', 'dump', '--pid', str(agent.proc.pid)], capture_output=True, text=True).stdout
            print(f"=== at {at}", agent.proc.poll())
            print('\n'.join(l for l in out.splitlines() if 'numamig/' in l or 'Thread' in l or 'oslo_service' in l or 'stop' in l))
        agent.proc.wait(30); print("exit after", time.monotonic()-t0)
        print(agent.log_tail(3000))
