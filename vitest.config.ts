import { defineConfig } from 'vitest/config';

// Four suites: unit (pure parts and property tests, fast), integration (the
// real CLI on temporary folders), fleet (the Ansible collection), e2e (real runc, systemd and containerd; root).
export default defineConfig({
  test: {
    // A worker per core, not Vitest's default of one fewer: integration tests spend most of their time
    // waiting for the processes they start, so on 2 cores a single worker leaves one idle.
    maxWorkers: '100%',
    projects: [
      { test: { name: 'unit', include: ['test/unit/**/*.test.ts', 'test/property/**/*.test.ts'], testTimeout: 30_000 } },
      { test: { name: 'integration', include: ['test/integration/**/*.test.ts'], testTimeout: 60_000, hookTimeout: 60_000 } },
      // The Ansible collection rolling a change across six nodes (ansible-core, sshd; a few minutes).
      { test: { name: 'fleet', include: ['test/fleet/**/*.test.ts'], testTimeout: 600_000, hookTimeout: 300_000 } },
      {
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          testTimeout: 600_000,
          hookTimeout: 1_800_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
