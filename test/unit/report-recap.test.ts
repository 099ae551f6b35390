// A failure's tail, its log, and the recap at the end of a run.

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect, test } from 'vitest';
import type { EngineEvent } from '../../src/events.ts';
import { taskId } from '../../src/ids.ts';
import { asShown, keepTaskLogs, LOG_MAX_BYTES, outputTail, Recap, taskLogName } from '../../src/report/recap.ts';

test('a tail of 20 lines says how many came before and where; a short output is whole; lines as a terminal leaves them', () => {
  const output = Array.from({ length: 25 }, (_, i) => `l${i + 1}`).join('\n');
  expect(outputTail(output, path.join(process.cwd(), '.nodegraph/logs/tasks/a.log'))).toEqual([
    `… 5 earlier lines in ${path.join('.nodegraph', 'logs', 'tasks', 'a.log')}`,
    ...Array.from({ length: 20 }, (_, i) => `l${i + 6}`),
  ]);
  expect(outputTail('one\ntwo\n', undefined)).toEqual(['one', 'two']);
  expect(outputTail(`${'x\n'.repeat(21)}`, '/elsewhere/a.log')[0]).toBe('… 1 earlier line in /elsewhere/a.log');
  expect(asShown('10%\r50%\r100%')).toBe('100%');
  expect(asShown('crlf\r')).toBe('crlf');
  expect(asShown('a\tb')).toBe('a       b');
});

test('task ids become file names no two ids share', () => {
  expect(taskLogName('kube1/containerd')).toBe('kube1%2Fcontainerd.log');
  expect(taskLogName('a_b')).toBe('a_b.log');
  expect(taskLogName('a%2Fb')).toBe('a%252Fb.log');
  expect(taskLogName('..')).toBe('%2E%2E.log');
  // Too long for a file name escaped: cut, with the whole id's SHA-256; two that share the cut differ.
  const long = `${'a.'.repeat(100)}x`;
  const name = taskLogName(long);
  expect(Buffer.byteLength(`destroy-${name}.tmp`)).toBeLessThanOrEqual(255);
  expect(name).toMatch(/^(a%2E)+a?%?2?~[0-9a-f]{64}\.log$/);
  expect(taskLogName(`${long}y`)).not.toBe(name);
  expect(taskLogName('a'.repeat(200))).toBe(`${'a'.repeat(200)}.log`);
});

test('each log holds the newest run, the last MiB of a longer one, and the events name it', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'nodegraph-logs-'));
  try {
    const seen: EngineEvent[] = [];
    const sink = keepTaskLogs(dir, (e) => seen.push(e));
    const id = taskId('a/b');
    sink({ type: 'task-done', id, outcome: 'failed', durationMs: 1, output: 'first\n' });
    sink({ type: 'task-done', id, outcome: 'failed', durationMs: 1, output: 'second\n' });
    const file = path.join(dir, 'logs', 'tasks', 'a%2Fb.log');
    expect(readFileSync(file, 'utf8')).toBe('second\n');
    expect(seen.map((e) => (e.type === 'task-done' ? e.log : undefined))).toEqual([file, file]);
    const line = `${'y'.repeat(99)}\n`;
    sink({ type: 'task-done', id, outcome: 'ran', durationMs: 1, output: line.repeat(20_000) });
    const kept = readFileSync(file, 'utf8');
    const [head, ...rest] = kept.split('\n');
    expect(head).toMatch(/^\[… \d+ earlier bytes not kept\]$/);
    expect(rest.join('\n').length).toBeLessThanOrEqual(LOG_MAX_BYTES);
    expect(rest.slice(0, -1).every((l) => l === line.trimEnd())).toBe(true);
    // Nothing printed, nothing kept: a skipped task has no log.
    sink({ type: 'task-done', id: taskId('c'), outcome: 'skipped', durationMs: 0, because: id });
    expect(seen.at(-1)).not.toHaveProperty('log');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the recap blames each skipped task on the failure upstream of it, through the skipped ones between', () => {
  const recap = new Recap();
  const events: EngineEvent[] = [
    { type: 'task-done', id: taskId('a'), outcome: 'failed', durationMs: 1, error: 'exited with code 2', exitCode: 2, log: path.join(process.cwd(), 'x.log') },
    { type: 'task-done', id: taskId('b'), outcome: 'skipped', durationMs: 0, because: taskId('a') },
    { type: 'task-done', id: taskId('c'), outcome: 'skipped', durationMs: 0, because: taskId('b') },
    { type: 'task-done', id: taskId('d'), outcome: 'failed', durationMs: 1, error: 'declared output out/d was not produced' },
    { type: 'task-done', id: taskId('e'), outcome: 'skipped', durationMs: 0 },
  ];
  for (const e of events) recap.see(e);
  expect(recap.lines()).toEqual([
    'Failed: a (exit 2), 2 skipped because of it; output in x.log',
    'Failed: d (declared output out/d was not produced)',
    'Not started: 1 skipped because the run stopped after a failed',
  ]);
});
