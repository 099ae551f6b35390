import { defineConfig } from 'vitest/config';

// Three suites: unit (pure parts and property tests, fast), integration (the
// real CLI on temporary folders), e2e (real runc, systemd and containerd; root).
export default defineConfig({
  test: {
    projects: [
      { test: { name: 'unit', include: ['test/unit/**/*.test.ts', 'test/property/**/*.test.ts'], testTimeout: 30_000 } },
      { test: { name: 'integration', include: ['test/integration/**/*.test.ts'], testTimeout: 60_000, hookTimeout: 60_000 } },
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
