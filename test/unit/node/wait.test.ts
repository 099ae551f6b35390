import { describe, expect, it } from 'vitest';
import { describeWaitFailure, waitFor, waitOrThrow, type Clock } from '../../../src/node/wait.ts';

/** A clock that only moves when something sleeps. */
function fakeClock(): Clock & { slept: number[] } {
  let now = 0;
  const slept: number[] = [];
  return {
    slept,
    now: () => now,
    sleep: async (ms) => {
      slept.push(ms);
      now += ms;
    },
  };
}

describe('waitFor', () => {
  it('returns as soon as the probe holds', async () => {
    const clock = fakeClock();
    let n = 0;
    const result = await waitFor(() => ({ ok: ++n === 3, detail: `try ${n}` }), { what: 'x', timeoutMs: 10_000, intervalMs: 100, clock });
    expect(result).toEqual({ ok: true, value: { attempts: 3, waitedMs: 200 } });
    expect(clock.slept).toEqual([100, 100]);
  });

  it('gives up after the timeout with the last probe output', async () => {
    const clock = fakeClock();
    let n = 0;
    const result = await waitFor(() => ({ ok: false, detail: `is-system-running: starting (${++n})` }), {
      what: 'systemd in kube1',
      timeoutMs: 1000,
      intervalMs: 300,
      clock,
    });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.error).toMatchObject({ reason: 'wait-timeout', attempts: 5, waitedMs: 1000, lastDetail: 'is-system-running: starting (5)' });
    // The last sleep is cut to the time left.
    expect(clock.slept).toEqual([300, 300, 300, 100]);
    expect(describeWaitFailure(result.error)).toBe(
      'timed out after 1.0s (5 probes) waiting for systemd in kube1; last probe: is-system-running: starting (5)',
    );
  });

  it('treats a probe that throws as not holding, keeping its message', async () => {
    const clock = fakeClock();
    await expect(
      waitOrThrow(
        () => {
          throw new Error('connection refused');
        },
        { what: 'containerd', timeoutMs: 50, intervalMs: 50, clock },
      ),
    ).rejects.toThrow('waiting for containerd; last probe: connection refused');
  });

  it('stops when the signal aborts', async () => {
    const controller = new AbortController();
    controller.abort();
    const result = await waitFor(() => ({ ok: false, detail: 'no' }), { what: 'x', timeoutMs: 10_000, intervalMs: 10, signal: controller.signal });
    expect(!result.ok && result.error.reason).toBe('wait-canceled');
  });

  it('waits in real time too', async () => {
    const start = Date.now();
    const result = await waitFor(() => ({ ok: Date.now() - start > 30, detail: '' }), { what: 'x', timeoutMs: 2000, intervalMs: 10 });
    expect(result.ok).toBe(true);
  });
});
