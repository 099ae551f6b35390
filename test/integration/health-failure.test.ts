// A health task's onFailure runs once when the graph is found unhealthy, before
// the rollback: what it keeps survives the rollback, and what it says is in
// the failure.

import { afterEach, beforeEach, expect, test } from 'vitest';
import { alive, Rig } from '../support/rig.ts';

let rig: Rig;
beforeEach(() => {
  rig = new Rig();
});
afterEach(() => rig.cleanup());

/** Applies the good version, then the bad one, atomically: what the bad one's apply (which fails) said. */
async function goodThenBad(): Promise<{ stderr: string }> {
  rig.write('version', 'good\n');
  expect((await rig.run(['apply', '--atomic'])).code).toBe(0);
  rig.write('version', 'bad\n');
  const failed = await rig.run(['apply', '--atomic']);
  expect(failed.code).toBe(1);
  return failed;
}

test('onFailure keeps what the rollback would take, and the failure names it', async () => {
  rig.nodefile(`
  const fs = process.getBuiltinModule('node:fs');
  const version = fs.readFileSync(ng.dir + '/version', 'utf8').trim();
  ng.task('service', {
    inputs: { v: ng.value(version) },
    outputs: ['service.log'],
    run: () => {
      fs.writeFileSync(ng.dir + '/service.log', 'started ' + version + '\\n');
      fs.writeFileSync(ng.dir + '/probes', '0');
    },
    // The bad one answers once after it starts (the apply's own check), and then no more.
    check: () => {
      const probes = Number(fs.existsSync(ng.dir + '/probes') ? fs.readFileSync(ng.dir + '/probes', 'utf8') : '0') + 1;
      fs.writeFileSync(ng.dir + '/probes', String(probes));
      return version === 'good' || probes === 1 || 'the service ' + version + ' does not answer';
    },
    health: {
      within: '200ms',
      onFailure: (ctx) => {
        fs.mkdirSync(ctx.stateDir + '/kept', { recursive: true });
        fs.copyFileSync(ng.dir + '/service.log', ctx.stateDir + '/kept/service.log');
        return 'its log is kept in ' + ctx.stateDir + '/kept';
      },
    },
  });
  `);
  const failed = await goodThenBad();
  expect(failed.stderr).toContain(`service is not healthy: its check did not pass within 200ms: the service bad does not answer; its log is kept in ${rig.path('.nodegraph/kept')}`);
  // Rolled back: the service is the good one again, and the bad one's log is kept.
  expect(rig.read('service.log')).toBe('started good\n');
  expect(rig.read('.nodegraph/kept/service.log')).toBe('started bad\n');
});

test('a health check that hangs is stopped when `within` is up, and the change is rolled back', async () => {
  rig.nodefile(`
  const version = process.getBuiltinModule('node:fs').readFileSync(ng.dir + '/version', 'utf8').trim();
  ng.task('service', {
    inputs: { v: ng.value(version) },
    outputs: ['service.txt'],
    run: { shell: 'echo ' + version + ' > service.txt; rm -f probes' },
    // The apply's own check after the run answers; the bad version's checks after it hang (the rollback restores the version file).
    check: { shell: 'n=$(cat probes 2>/dev/null || echo 0); echo $((n + 1)) > probes; if [ "$n" -ge 1 ] && [ "$(cat version)" = bad ] && [ "$(cat service.txt)" = bad ]; then echo $$ > hung; exec sleep 3600; fi' },
    health: { within: '500ms' },
  });
  `);
  const failed = await goodThenBad();
  expect(failed.stderr).toContain('service is not healthy: its check did not pass within 500ms: still running when 500ms were up, and stopped');
  expect(rig.read('service.txt')).toBe('good\n');
  const hung = Number(rig.read('hung'));
  while (alive(hung)) await new Promise((resolve) => setTimeout(resolve, 20)); // the test's timeout is the deadline
});
