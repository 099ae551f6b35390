// What the fake runner saw a node graph do, as a few words an event: what the
// node tests expect to have happened, in order.

import path from 'node:path';
import type { FakeEvent } from '../fake-runner.ts';

/** The events of the given kinds, each in words; the others left out. */
export function story(events: readonly FakeEvent[], kinds: ReadonlySet<FakeEvent['kind']>): string[] {
  return events.flatMap((e) => (kinds.has(e.kind) ? [told(e)] : []));
}

function told(e: FakeEvent): string {
  switch (e.kind) {
    case 'container-start':
    case 'container-stop':
    case 'container-delete':
      return `${e.kind} ${e.id}`;
    case 'service-start':
      return `start ${e.unit}${e.already ? ' (already)' : ''}`;
    case 'service-boot':
      return `boot ${e.unit}`;
    case 'service-restart':
      return `restart ${e.unit}`;
    case 'service-stop':
      return `stop ${e.unit}`;
    case 'service-enable':
      return `enable ${e.unit}`;
    case 'daemon-reload':
      return `daemon-reload ${e.id}`;
    case 'host-unit':
      return `host ${e.verb} ${e.unit}`.trim();
    case 'image-import':
      return `import ${path.basename(e.archive)}`;
    case 'image-remove':
      return `remove ${e.refs.join(' ')}`;
    case 'modprobe':
      return `modprobe ${e.module}`;
    case 'remove':
      return `remove ${e.path}`;
    case 'unmount-below':
      return `unmount below ${e.path}`;
  }
}
