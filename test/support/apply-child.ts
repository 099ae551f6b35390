// One apply in a process of its own, for the property tests that kill it
// (NODEGRAPH_FAILPOINT, read when the engine is loaded): applies the Nodefile
// given with the engine's clock fixed at the nanoseconds given, and prints the
// ids of the tasks that ran as JSON.
//
//   node test/support/apply-child.ts NODEFILE CLOCK_NS

import { applyNodefile } from '../../src/apply.ts';

const [nodefile, clock] = process.argv.slice(2);
const result = await applyNodefile({ nodefile: nodefile!, jobs: 1, now: () => BigInt(clock!) });
if (!result.ok) {
  process.stderr.write(`${JSON.stringify(result.error)}\n`);
  process.exit(1);
}
process.stdout.write(JSON.stringify([...result.value.ran]));
