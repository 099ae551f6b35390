// The generation store over random histories, on real files: generations that
// share most files share most parts (manifest.ts, SourcePart), and pruning
// removes a part and an object only when no kept generation names it. After
// every step each kept generation reads back with the files it was recorded
// with and verifies byte for byte, and the store holds exactly what the kept
// manifests name: nothing missing, nothing left over. Some generations are
// rewritten as version 2 manifests (their files listed, no parts), as an older
// nodegraph left them: they read, verify and keep their objects alike. Files up
// to a size drawn per history keep their content in their part (inline), the
// rest are objects of their own.

import fc from 'fast-check';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect, test } from 'vitest';
import { GenerationStore } from '../../src/transaction/generations.ts';
import { sourcesDigest } from '../../src/transaction/manifest.ts';

const PATHS = 24;
/** Few contents, so that files often share one object; of sizes 1 to 5, on both sides of the inline limit. */
const CONTENTS = ['a', 'bb', 'ccc', 'dddd', 'eeeee'];

type Step =
  | { readonly kind: 'record'; readonly files: readonly (number | null)[] }
  | { readonly kind: 'prune'; readonly keep: number }
  | { readonly kind: 'current'; readonly back: number }
  | { readonly kind: 'legacy'; readonly back: number };

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('record' as const), files: fc.array(fc.option(fc.integer({ min: 0, max: CONTENTS.length - 1 }), { nil: null }), { minLength: PATHS, maxLength: PATHS }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('prune' as const), keep: fc.integer({ min: 1, max: 4 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('current' as const), back: fc.integer({ min: 1, max: 3 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('legacy' as const), back: fc.integer({ min: 0, max: 3 }) }) },
);

const sha = (text: string): string => createHash('sha256').update(text).digest('hex');

// Every record fsyncs its files: about 5 s idle, up to ten times that beside busy loops and the crash campaigns' I/O.
test('recording and pruning keep every kept generation whole and the store exactly what the kept ones name', { timeout: 180_000 }, () => {
  fc.assert(
    fc.property(fc.array(step, { minLength: 1, maxLength: 24 }), fc.integer({ min: 2, max: 16 }), fc.integer({ min: 0, max: 6 }), (steps, sweepEvery, inlineLimit) => {
      const dir = mkdtempSync(path.join(tmpdir(), 'nodegraph-gen-prop-'));
      try {
        // A part ends after about one path in four: many parts at 24 files; and a sweep every few prunes.
        const store = new GenerationStore(path.join(dir, 'state'), { partMask: 3, sweepEvery, inlineLimit });
        const recorded = new Map<number, Map<string, string>>();
        for (const s of steps) {
          let pruned: number[] = [];
          if (s.kind === 'record') {
            const files: { path: string; sha256: string }[] = [];
            s.files.forEach((content, i) => {
              if (content === null) return;
              const file = path.join(dir, `f${String(i).padStart(2, '0')}`);
              writeFileSync(file, CONTENTS[content]!);
              files.push({ path: file, sha256: sha(CONTENTS[content]!) });
            });
            const n = store.next();
            const nodefile = path.join(dir, 'Nodefile.ts');
            const made = store.record(n, { nodefile, files, probes: [], env: {}, digest: sourcesDigest(nodefile, {}, files, []) }, { status: 'applied' });
            expect(made.ok).toBe(true);
            store.setCurrent({ number: n, digest: `d${n}` });
            recorded.set(n, new Map(files.map((f) => [f.path, f.sha256])));
          } else if (s.kind === 'current') {
            const numbers = store.numbers();
            const n = numbers[Math.max(0, numbers.length - 1 - s.back)];
            if (n !== undefined) store.setCurrent({ number: n, digest: `d${n}` });
          } else if (s.kind === 'legacy') {
            const numbers = store.numbers();
            const n = numbers[Math.max(0, numbers.length - 1 - s.back)];
            if (n !== undefined) {
              // A version 2 manifest: the same keys in the same order, the files listed where the parts were.
              const g = store.read(n)!;
              const file = path.join(store.dir, `${n}.json`);
              const stored = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
              writeFileSync(file, `${JSON.stringify(Object.fromEntries(Object.keys(stored).map((k) => (k === 'parts' ? ['files', g.files] : [k, k === 'version' ? 2 : stored[k]]))))}\n`);
            }
          } else {
            pruned = store.prune(s.keep);
            for (const n of pruned) recorded.delete(n);
          }
          const kept = store.numbers();
          expect(kept).toEqual([...recorded.keys()].sort((a, b) => a - b));
          const named = new Set<string>();
          for (const n of kept) {
            const g = store.read(n)!;
            expect(new Map(g.files.map((f) => [f.path, f.sha256]))).toEqual(recorded.get(n));
            expect(store.verify(n).ok).toBe(true);
            for (const f of g.files) {
              expect(f.stored).toBe(f.size <= inlineLimit ? 'inline' : 'copy');
              if (f.stored === 'copy') named.add(f.sha256);
            }
            for (const p of store.head(n)!.parts ?? []) named.add(p.sha256);
          }
          // Nothing a kept generation names is missing; right after a prune that removed a generation the
          // store is exactly what the kept ones name (a rewrite as version 2 leaves its parts until then).
          const objects = new Set(store.numbers().length === 0 ? [] : readdirSync(path.join(store.dir, 'objects')));
          expect([...named].filter((o) => !objects.has(o))).toEqual([]);
          if (pruned.length > 0 && kept.length > 0) expect(objects).toEqual(named);
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }),
    { numRuns: 120 },
  );
});
