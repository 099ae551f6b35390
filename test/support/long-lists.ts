// Run by test/integration/long-lists.test.ts under a small stack (node --stack-size):
// the lists a large graph makes, at a length whose spread into one call's
// arguments (Math.max(...list), push(...list)) overflows this stack, and a
// chain of tasks as long, which a recursion a task deep would overflow too.
// Prints the length on a line, then one JSON object: what each part made of it.

import { analyze } from '../../src/graph/analyze.ts';
import { taskId } from '../../src/ids.ts';
import { Builder } from '../../src/nodefile/builder.ts';
import { listedPlan } from '../../src/plan/plan.ts';
import { palette } from '../../src/report/color.ts';
import { renderPlan, writePlan } from '../../src/report/plan-view.ts';

/** Whether a spread of `n` arguments overflows the stack here. */
function spreadOverflows(n: number): boolean {
  try {
    Math.max(...new Array<number>(n).fill(0));
    return false;
  } catch (error) {
    if (error instanceof RangeError) return true;
    throw error;
  }
}

// The shortest length (to 256) whose spread overflows at the top of the script: deeper in a call chain there is less stack still.
let many = 256;
while (!spreadOverflows(many)) many += 256;
// Said first: a run that stops after this line overflowed in the code, not in Node's start-up.
process.stdout.write(`${many}\n`);

const entries = Array.from({ length: many }, (_, i) => ({ id: taskId(`t/${i}`), action: 'create' as const, verb: 'create', reasons: ['never ran'] }));
const plan = listedPlan(entries);
const rendered = renderPlan(plan, palette(false));
const pieces: string[] = [];
writePlan(plan, palette(false), (text) => pieces.push(text));

const builder = new Builder('/n/Nodefile.ts', '/n');
const ng = builder.api();
const refs = Array.from({ length: many }, (_, i) => ng.task(`t/${i}`, { run: ['true'] }));
ng.task('last', { after: refs, run: ['true'] });
for (let i = 0; i < many; i++) ng.task(`c/${i}`, { after: i === 0 ? [] : [`c/${i - 1}`], run: ['true'] });
const graph = analyze(builder.declarations());
if (!graph.ok) throw new Error(JSON.stringify(graph.error).slice(0, 300));

const lines = rendered.split('\n');
process.stdout.write(
  `${JSON.stringify({
    lines: lines.length,
    first: lines[0],
    last: lines.at(-1),
    written: pieces.join('') === `${rendered}\n`,
    wide: graph.value.closure([taskId('last')]).size,
    chain: graph.value.closure([taskId(`c/${many - 1}`)]).size,
    ordered: graph.value.ordered.length,
  })}\n`,
);
