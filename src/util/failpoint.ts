// Crash injection for the tests that kill nodegraph at each step of an atomic
// apply: with NODEGRAPH_FAILPOINT set to a step's name (a transaction phase,
// `ran:<task id>` once its action finished and before its record, or
// `after:<task id>` once that task's record is written, `spawned` between a
// direct spawn and its line in the run's record, or a step a task names,
// such as `stopped:<slot>` in the node's takeover), the process kills
// itself with SIGKILL right there, as a power loss would. Read once: a run
// that does not set it pays one comparison per step.

const AT = process.env['NODEGRAPH_FAILPOINT'];

export function failpoint(step: string): void {
  if (AT !== undefined && AT === step) process.kill(process.pid, 'SIGKILL');
}
