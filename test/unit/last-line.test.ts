import { expect, test } from 'vitest';
import { lastLine } from '../../src/execute/action.ts';

test("a command's last line: the last that says something, colour codes dropped, a progress bar's last redraw", () => {
  expect(lastLine('one\ntwo\n\n')).toBe('two');
  expect(lastLine('\x1b[32mgreen\x1b[0m\n')).toBe('green');
  expect(lastLine('pulling 10%\rpulling 55%\rpulling 90%')).toBe('pulling 90%');
  expect(lastLine('done\r\n')).toBe('done');
  expect(lastLine('  \n\t\n')).toBe('');
});
