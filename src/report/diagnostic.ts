// Renders a Failure for a person: the code in brackets, what went wrong,
// and where in the Nodefile, with the source line under it.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Failure } from '../error.ts';
import type { SourceSite } from '../types.ts';
import { unreachable } from '../util/unreachable.ts';
import type { Palette } from './color.ts';

/** A file named in a message: relative below `cwd`, whole elsewhere (`../../../tmp/os.img` says less than `/tmp/os.img`). */
const shown = (file: string, cwd: string): string => {
  const relative = path.relative(cwd, file);
  return relative === '' || relative.startsWith('..') || path.isAbsolute(relative) ? file : relative;
};

const where = (site: SourceSite | undefined, cwd: string): string => (site === undefined ? '' : `${shown(site.file, cwd)}:${site.line}:${site.column}`);

/** A path as one would type it from `cwd`: `./Nodefile.example.ts`, `../x/Nodefile.ts`. */
const dotted = (file: string, cwd: string): string => {
  const relative = path.relative(cwd, file);
  return relative.startsWith('..') || path.isAbsolute(relative) ? relative : `./${relative}`;
};

function excerpt(site: SourceSite | undefined, cwd: string, c: Palette): string {
  if (site === undefined) return '';
  let line: string | undefined;
  try {
    line = readFileSync(site.file, 'utf8').split('\n')[site.line - 1];
  } catch {
    return `\n  --> ${where(site, cwd)}`;
  }
  if (line === undefined) return `\n  --> ${where(site, cwd)}`;
  const gutter = String(site.line);
  const pad = ' '.repeat(gutter.length);
  return [
    '',
    `${pad}--> ${where(site, cwd)}`,
    `${pad} |`,
    `${gutter} | ${line}`,
    `${pad} | ${' '.repeat(Math.max(0, site.column - 1))}${c.red('^')}`,
  ].join('\n');
}

/** What stands for a dry run of a command, said to one who asked for --dry-run. */
const DRY_RUNS: Readonly<Record<string, string>> = {
  plan: 'plan is the dry run: it changes nothing',
  destroy: 'nodegraph has none: destroy lists what it would remove and asks first (unless --yes)',
  stop: 'nodegraph has none: `nodegraph status` shows what is running',
};

function anotherNodefiles(failure: Extract<Failure, { reason: 'orphans-of-another-nodefile' }>, cwd: string): string {
  const [name, other, n] = [path.basename(failure.nodefile), path.basename(failure.other), failure.tasks.length];
  const listed = n <= 3 ? failure.tasks.join(', ') : `${failure.tasks.slice(0, 3).join(', ')} and ${n - 3} more`;
  const what = n === 1 ? 'the task' : `the ${n} tasks`;
  const doing = failure.command === 'apply' ? 'applying' : 'destroying with';
  return `the state was last applied from ${shown(failure.other, cwd)}, which is still there: ${doing} ${name} would destroy ${what} only ${other} declares (${listed}). Give ${name} a state of its own (--state-dir), or remove ${other} if ${name} replaces it`;
}

export function message(failure: Failure, cwd: string): string {
  switch (failure.reason) {
    case 'usage':
      return failure.command === undefined ? failure.message : `${failure.message} (see nodegraph ${failure.command} --help)`;
    case 'unknown-command':
      return `unknown command ${failure.command}${failure.suggestion === undefined ? '' : `; did you mean ${failure.suggestion}?`} (commands: ${failure.commands.join(', ')}; see nodegraph --help)`;
    case 'unknown-option': {
      const hint =
        failure.dryRun === true
          ? `;${failure.option === '--dry-run' ? '' : ' did you mean --dry-run?'} ${DRY_RUNS[failure.command] ?? 'nodegraph has none: `nodegraph plan` shows what apply would do'}`
          : failure.suggestion === undefined
            ? ''
            : `; did you mean ${failure.suggestion}?`;
      return `unknown option ${failure.option} for ${failure.command}${hint} (see nodegraph ${failure.command} --help)`;
    }
    case 'nodefile-not-found':
      return failure.folder === true
        ? `${failure.path} is a folder: name the Nodefile in it (-f ${path.join(failure.path, 'Nodefile.ts')})`
        : `no ${path.dirname(failure.path) === path.resolve(cwd) ? `${path.basename(failure.path)} here` : `Nodefile at ${failure.path}`}${
            failure.suggestion === undefined ? ' (use -f to name one)' : `; did you mean ${dotted(failure.suggestion, cwd)}? (use -f to name it)`
          }`;
    case 'nodefile-syntax':
      return `the Nodefile could not be loaded as TypeScript: ${failure.message}`;
    case 'nodefile-threw':
      return `the Nodefile threw while declaring the graph: ${failure.message}`;
    case 'nodefile-no-default':
      return `${failure.path} ${failure.found === undefined ? 'has no default export' : `exports ${failure.found} as its default, not a function`}: export a function that receives the Nodefile API, e.g. \`export default (ng: NodefileApi) => { ... }\``;
    case 'invalid-field':
      return failure.task === undefined
        ? `${failure.field}: ${failure.message}`
        : `task ${failure.task}: field ${failure.field === '' ? '(spec)' : failure.field}: ${failure.message}`;
    case 'duplicate-task':
      return `task ${failure.task} is declared twice: first at ${where(failure.first, cwd) || '?'}, again at ${where(failure.second, cwd) || '?'}`;
    case 'unknown-task':
      return `task ${failure.task}: ${failure.field} refers to unknown task ${failure.ref}`;
    case 'duplicate-output':
      return failure.first === failure.second
        ? `task ${failure.first} declares output ${shown(failure.path, cwd)} twice`
        : `output ${shown(failure.path, cwd)} is declared by both ${failure.first} and ${failure.second}`;
    case 'unknown-pool':
      return `task ${failure.task}: pool ${failure.pool} is not declared (declare it with ng.pool('${failure.pool}', depth))`;
    case 'cycle':
      return [
        `the graph has a cycle of ${failure.edges.length} edge${failure.edges.length === 1 ? '' : 's'}:`,
        ...failure.edges.map(
          (e) => `  ${e.from} → ${e.to}  (${e.via === 'input' ? `${e.to} consumes ${e.from}` : `${e.to} runs after ${e.from}`}${e.site === undefined ? '' : `, ${where(e.site, cwd)}`})`,
        ),
      ].join('\n');
    case 'missing-input':
      return `task ${failure.task}: input ${failure.input}: ${shown(failure.path, cwd)} does not exist and no task declares it as an output`;
    case 'unknown-target':
      // A word with a blank or a control character, or none at all, is quoted: the line would not show it.
      return `no task matches ${/^[^\s\p{Cc}"]+$/u.test(failure.target) ? failure.target : JSON.stringify(failure.target)}${
        failure.plan === undefined ? '' : `, and ${failure.plan === 'missing' ? 'no file by that name is there' : 'that file is not a plan'} to apply (\`plan --out FILE\` saves one)`
      }${failure.suggestion === undefined ? '' : `; did you mean ${failure.suggestion}?`}`;
    case 'state-dir-unwritable':
      return `cannot write to the state folder ${failure.path}: ${failure.message}`;
    case 'state-unreadable':
      return `the state in ${failure.path} cannot be read: ${failure.message}`;
    case 'locked': {
      const h = failure.holder;
      if (h === undefined) return `the state is locked (${failure.path}), by a holder that cannot be read; if no nodegraph is running, run \`nodegraph unlock\``;
      if (failure.running === true) return `the lock is held by pid ${h.pid} (${h.command}, since ${h.startedAt}), which is running on this host: stop it (Ctrl-C), or pass --force to remove its lock anyway`;
      return failure.otherHost === true
        ? `the state is locked by pid ${h.pid} on ${h.host} (${h.command}), since ${h.startedAt}; that host's processes cannot be seen from here: if that one is gone, run \`nodegraph unlock\``
        : `the state is locked by pid ${h.pid} on ${h.host} (${h.command}), since ${h.startedAt}, which is still running: wait for it to end`;
    }
    case 'file-write-failed':
      return `could not write ${shown(failure.path, cwd)}: ${failure.message}`;
    case 'plan-file-invalid':
      return `${failure.path} is not a usable plan: ${failure.message}`;
    case 'plan-stale':
      return [`the saved plan ${failure.path} no longer matches; make a new one with \`nodegraph plan --out\`:`, ...failure.changes.map((c) => `  - ${c}`)].join('\n');
    case 'orphans-of-another-nodefile':
      return anotherNodefiles(failure, cwd);
    case 'not-confirmed':
      return 'not confirmed: nothing was changed';
    case 'unawaited-promise':
      return `a promise nobody awaited failed (in the Nodefile or a function of its tasks): ${failure.message}`;
    case 'interrupted':
      return `interrupted while ${failure.during === 'load' ? 'loading the Nodefile' : 'checking what is in place'}: nothing was changed`;
    case 'transaction-not-started':
      return `the atomic apply did not start, and nothing was changed: ${failure.message}`;
    case 'atomic-apply-failed': {
      const back = failure.from === null ? 'as it was before' : `to generation ${failure.from}`;
      if (failure.rolledBack) {
        const kept = failure.to === failure.from ? '' : `; the failed change is kept as generation ${failure.to} (\`nodegraph rollback ${failure.to}\` applies it again)`;
        return `${failure.cause}: rolled back ${back}, and the rollback succeeded${kept}`;
      }
      return [
        `${failure.cause}: the rollback ${back} did not complete; what is left:`,
        ...failure.left.map((l) => `  - ${l}`),
        'the transaction stays recorded: `nodegraph apply` tries the rollback again, `nodegraph apply --continue` the change',
      ].join('\n');
    }
    case 'transaction-unreadable':
      return `cannot read the atomic apply's transaction record ${failure.path}: ${failure.message}`;
    case 'transaction-pending':
      return `an interrupted atomic apply from ${failure.from === null ? 'no generation' : `generation ${failure.from}`} to ${failure.to} (${failure.phase}) is unfinished: \`nodegraph apply\` rolls it back, \`nodegraph apply --continue\` finishes it`;
    case 'generation-missing':
      if (failure.before !== undefined) {
        const none = failure.before === null ? 'no generation is current, so none before it' : `there is no applied generation before generation ${failure.before}`;
        return `${none} to roll back to${failure.known.length === 0 ? '' : ` (known: ${failure.known.join(', ')}; \`nodegraph rollback N\` applies generation N)`}`;
      }
      return `there is no generation ${failure.number} (known: ${failure.known.join(', ') || 'none'})`;
    case 'generation-damaged':
      return `generation ${failure.number} is damaged, and was not applied: ${failure.path}: ${failure.message}`;
    case 'generation-file-changed':
      return `generation ${failure.number} needs ${shown(failure.path, cwd)} at sha256:${failure.sha256.slice(0, 12)}…, which has changed: nothing was applied`;
    case 'generation-write-failed':
      return `could not write ${failure.path}: ${failure.message}`;
    case 'generation-would-overwrite': {
      const files = failure.paths.map((p) => shown(p, cwd)).join(', ');
      return `generation ${failure.number} was not applied: it would write over ${files}, edited since and held by no kept generation (the edit would be lost): apply it, undo it, or move the file aside first`;
    }
    default:
      return unreachable(failure);
  }
}

function siteOf(failure: Failure): SourceSite | undefined {
  switch (failure.reason) {
    case 'nodefile-threw':
    case 'nodefile-syntax':
    case 'invalid-field':
    case 'unknown-task':
    case 'duplicate-output':
    case 'unknown-pool':
    case 'missing-input':
      return failure.site;
    case 'duplicate-task':
      return failure.second;
    default:
      return undefined;
  }
}

export function renderFailure(failure: Failure, cwd: string, c: Palette): string {
  return `${c.red(c.bold(`error[${failure.reason}]`))}: ${message(failure, cwd)}${excerpt(siteOf(failure), cwd, c)}`;
}
