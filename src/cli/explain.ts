import path from 'node:path';
import { observeAndPlan, withSession } from '../engine.ts';
import { shortHash, taskId, type ContentHash } from '../ids.ts';
import { reasonText } from '../plan/reasons.ts';
import { palette, type Palette } from '../report/color.ts';
import { GenerationStore } from '../transaction/generations.ts';
import { StoredContent, textChanges } from '../transaction/text-inputs.ts';
import { err, ok } from '../util/result.ts';
import type { CliIo } from './output.ts';
import { engineOptions, paletteFor, printFailures, type Args } from './shared.ts';

export async function run(args: Args, io: CliIo): Promise<number> {
  if (args.positionals.length !== 1) return printFailures([{ reason: 'usage', command: 'explain', message: 'explain takes exactly one task id' }], io);
  const options = engineOptions(args, io, 'explain');
  if ('reason' in options) return printFailures([options], io);
  const id = taskId(args.positionals[0]!);
  const c = paletteFor(io);
  const result = await withSession(options, { lock: false }, async (session) => {
    const observed = await observeAndPlan(session);
    if (!observed.ok) return observed;
    const node = session.graph.get(id);
    // The target matched (a pattern may): explain still takes one task, by its id.
    if (node === undefined) return err([{ reason: 'usage', command: 'explain', message: `explain takes one task id, not a pattern such as ${id}` }]);
    const entry = observed.value.plan.entries().find((e) => e.id === id)!;
    const seen = observed.value.observations.get(id)!;
    const record = session.state.records.get(id);
    const row = (label: string, before: ContentHash | string | undefined, now: ContentHash | 'missing' | undefined | string): string => {
      const nowText = now === undefined ? 'unknown' : now === 'missing' ? 'missing' : now.startsWith('sha256:') ? shortHash(now as ContentHash) : now;
      const same = before !== undefined && before === now;
      const beforeText = before === undefined || before.startsWith('sha256:') ? shortHash(before as ContentHash | undefined) : before;
      return `    ${label.padEnd(32)} ${beforeText.padEnd(8)} → ${nowText.padEnd(8)}  ${same ? c.green('same') : c.yellow('differs')}`;
    };
    // A sensitive input's recorded hash is shown only when it is the current keyed digest (or a record
    // from before keyed digests holds the plain SHA-256 of the current value): a recorded hash that
    // differs may be the plain SHA-256 of an earlier secret, which must not be printed.
    const recordedInput = (name: string): string | undefined => {
      const before = record?.inputs[name];
      const input = node.inputs[name];
      if (before === undefined || !(input?.kind === 'env' || (input?.kind === 'value' && input.sensitive === true))) return before;
      const now = seen.inputs.get(name);
      return before === now || before === seen.unkeyed?.get(name) ? now : SENSITIVE_CHANGED;
    };
    const byId = new Map(observed.value.plan.entries().map((e) => [e.id, e]));
    const upstreamNow = (up: (typeof node.needs)[number]): string | undefined => {
      const upEntry = byId.get(up);
      return upEntry?.action === 'unchanged' ? session.state.records.get(up)?.outputHash : `${upEntry?.verb ?? '?'} first`;
    };
    // A small text file input that changed, as a diff against the text the generations kept.
    const changedNames = entry.reasonDetails.flatMap((d) => (d.kind === 'input-changed' && d.sensitive !== true ? [d.input] : []));
    const texts = textChanges(new StoredContent(new GenerationStore(session.state.dir)), session.graph.dir, node, record, changedNames);
    const { unifiedDiff } = texts.length === 0 ? { unifiedDiff: undefined } : await import('../report/text-diff.ts');
    const diffOf = (name: string, p: Palette): string[] | undefined => {
      const change = texts.find((t) => t.input === name);
      return change === undefined || unifiedDiff === undefined ? undefined : unifiedDiff(change, path.relative(io.cwd, change.path) || change.path, p);
    };
    if (args.values['json'] === true) {
      const reasonDetails = entry.reasonDetails.map((d) => {
        const diff = d.kind === 'input-changed' ? diffOf(d.input, palette(false)) : undefined;
        return diff === undefined ? d : { ...d, diff: `${diff.join('\n')}\n` };
      });
      // The same facts as the text below, whole (hashes unshortened), for a program to read.
      return ok(
        JSON.stringify({
          format: 'nodegraph-explain',
          version: 1,
          id,
          action: entry.action,
          verb: entry.verb,
          reasons: entry.reasons,
          reasonDetails,
          lastApplied: record === undefined ? null : { startedAt: record.startedAt, status: record.status, durationMs: record.durationMs, ...(record.error === undefined ? {} : { error: record.error }) },
          inputs: [...seen.inputs].map(([name, current]) => ({ name, recorded: recordedInput(name) ?? null, current })),
          upstream: node.needs.map((up) => ({ id: up, recorded: record?.upstream[up] ?? null, current: upstreamNow(up) ?? null })),
          after: node.after,
          outputs: node.outputs.map((output) => ({ path: output, recorded: record?.outputs[output] ?? null, current: seen.outputs.get(output) ?? null })),
          check: seen.check === undefined ? null : seen.check,
        }),
      );
    }
    const lines = [`${c.bold(id)}: ${entry.action === 'unchanged' ? c.green('up to date') : c.yellow(entry.verb)}`];
    entry.reasons.forEach((reason, i) => {
      const detail = entry.reasonDetails[i];
      // Every change of a value, one a line: the plan's line names a few of them.
      if (detail?.kind === 'input-changed' && detail.changes !== undefined) {
        lines.push(`  because input ${detail.input} changed:`);
        for (const change of detail.changes) lines.push(`    ${reasonText({ ...detail, changes: [change] }, true).slice(`input ${detail.input} changed: `.length)}`);
      } else lines.push(`  because ${reason}`);
      const diff = detail?.kind === 'input-changed' ? diffOf(detail.input, c) : undefined;
      for (const line of diff ?? []) lines.push(`      ${line}`);
    });
    const unapplied = session.state.records.destroyed(id) ? '  not applied since it was destroyed' : '  never applied';
    lines.push(record === undefined ? unapplied : `  last applied ${record.startedAt} (${record.status}, ${record.durationMs}ms)`);
    if (seen.inputs.size > 0) lines.push('  inputs (recorded → current):');
    else if (node.needs.length === 0) lines.push('  inputs: none');
    for (const [name, hash] of seen.inputs) lines.push(row(name, recordedInput(name), hash));
    if (node.needs.length > 0) lines.push('  upstream outputs (recorded → current):');
    for (const up of node.needs) lines.push(row(up, record?.upstream[up], upstreamNow(up)));
    if (node.after.length > 0) lines.push(`  runs after (order only): ${node.after.join(', ')}`);
    if (node.outputs.length > 0) lines.push('  outputs (recorded → current):');
    for (const output of node.outputs) lines.push(row(path.relative(session.graph.dir, output) || output, record?.outputs[output], seen.outputs.get(output)));
    if (seen.check !== undefined) lines.push(`  check: ${seen.check.ok ? c.green('passes') : c.red(`fails ${seen.check.detail}`)}`);
    return ok(lines.join('\n'));
  });
  if (!result.ok) return printFailures(result.error, io);
  io.stdout.write(`${result.value}\n`);
  return 0;
}

/** What `explain` shows for a sensitive input's recorded hash when it differs from the current one. */
const SENSITIVE_CHANGED = 'changed (sensitive)';
