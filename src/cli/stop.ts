import type { CliIo } from './output.ts';
import { run as teardown } from './destroy.ts';
import type { Args } from './shared.ts';

export function run(args: Args, io: CliIo): Promise<number> {
  return teardown(args, io, 'stop');
}
