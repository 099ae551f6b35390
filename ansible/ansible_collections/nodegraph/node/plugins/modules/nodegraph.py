#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: the nodegraph authors
# Apache License 2.0 (see the repository's LICENSE)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
---
module: nodegraph
short_description: Converge a host with nodegraph (apply, plan, destroy) from its JSON output
description:
  - Runs C(nodegraph apply), C(plan) or C(destroy) on the managed host with C(--json) and reads the
    events and documents it prints (schemas/ in nodegraph's package); nothing is read from its text.
  - C(changed) is true only when a task ran (or, for I(state=absent), was destroyed).
  - Check mode is a plan - nothing changes, the planned actions are returned. The I(files) are planned
    in place without being written, bound over their paths in a private mount namespace (root and
    C(unshare) needed; without them the plan sees the files on disk and says so in a warning).
  - Diff mode shows the plan's value diffs and the diffs of small text file inputs.
  - A failed atomic apply fails the host with the failing task, the reason, whether the rollback
    succeeded, and the generation now current.
  - The action plugin of the same name can stop a rollout - see I(halt_file).
options:
  state:
    description:
      - C(present) applies, C(planned) plans (changes nothing), C(absent) destroys,
        C(status) only reports the current generation.
    type: str
    choices: [present, planned, absent, status]
    default: present
  nodefile:
    description: The Nodefile (C(-f)).
    type: path
    required: true
  state_dir:
    description: The state folder (C(--state-dir)); default C(.nodegraph) beside the Nodefile.
    type: path
  targets:
    description: Task ids or C(prefix/*) to apply, plan or destroy; all when empty.
    type: list
    elements: str
    default: []
  atomic:
    description: C(--atomic) when true (refused with C(targets): a targeted apply is never atomic), C(--no-atomic) when false, the Nodefile's setting when unset.
    type: bool
  replace:
    description: Task ids to run even if up to date (C(--replace)).
    type: list
    elements: str
    default: []
  jobs:
    description: Tasks (or checks) at once (C(-j)); default the host's number of cores.
    type: int
  environment:
    description: Extra environment for nodegraph and the commands it runs.
    type: dict
    default: {}
  executable:
    description: The nodegraph executable on the host.
    type: path
    default: nodegraph
  files:
    description:
      - Configuration files the graph reads, path (relative to the Nodefile's folder, or absolute)
        to content. Written atomically before an apply when they differ; planned in place,
        unwritten, in check mode.
    type: dict
    default: {}
  keep:
    description: Generations to keep (C(--keep)).
    type: int
  halt_file:
    description:
      - Read by the action plugin on the controller, never sent to the host. When the file exists
        the host is skipped, nothing run; when this host's atomic apply is rolled back the file is
        written (naming the host), so the hosts after it in the rollout are skipped.
    type: path
author: the nodegraph authors
'''

EXAMPLES = r'''
- name: Converge the node
  nodegraph.node.nodegraph:
    executable: /usr/local/bin/nodegraph
    nodefile: /opt/nodegraph/Nodefile.ts
    state_dir: /var/lib/nodegraph
    atomic: true
    files:
      example/settings.json: "{{ node_settings | to_nice_json }}"
'''

RETURN = r'''
plan:
  description: Each task the plan would act on (action not C(unchanged)) - id, action, verb, reasons.
  type: list
  returned: always
counts:
  description: The plan's counts by action.
  type: dict
  returned: always
ran:
  description: Task ids the apply ran (not those its rollback ran).
  type: list
  returned: state=present
generation:
  description: The generation current after the run (null before the first).
  type: int
  returned: always
failed_task:
  description: The task whose failure stopped the apply.
  type: str
  returned: on failure
reason:
  description: Why it failed (the task's error, or what did not hold).
  type: str
  returned: on failure
rolled_back:
  description: For a failed atomic apply - whether the rollback succeeded.
  type: bool
  returned: on failure of an atomic apply
failure:
  description: nodegraph's failure as its JSON gives it (C(reason) and its fields).
  type: dict
  returned: on failure
'''

import json
import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule


def parse_lines(text):
    """JSON lines (apply, destroy, errors); a line that is not JSON is not ours and is skipped."""
    events = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith('{'):
            continue
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def error_of(events):
    for event in events:
        if event.get('type') == 'error':
            return event.get('failure')
    return None


def acting(entries):
    return [
        {'id': e['id'], 'action': e['action'], 'verb': e['verb'], 'reasons': e['reasons']}
        for e in entries if e['action'] != 'unchanged'
    ]


def render_diff(entries):
    """The plan as diff mode shows it: each acting task, its value changes key by key, its text diffs."""
    out = []
    for e in entries:
        if e['action'] == 'unchanged':
            continue
        out.append('%s %s (%s)\n' % (e['id'], e['verb'], '; '.join(e['reasons'])))
        for detail in e.get('reasonDetails', []):
            for change in detail.get('changes', []):
                out.append('    %s.%s: %s -> %s\n' % (
                    detail['input'], change['path'], change.get('from', '(absent)'), change.get('to', '(absent)')))
            if 'diff' in detail:
                out.append(''.join('    ' + line + '\n' for line in detail['diff'].splitlines()))
    return ''.join(out)


class Nodegraph(object):
    def __init__(self, module):
        self.module = module
        p = module.params
        self.p = p
        self.nodefile = p['nodefile']
        self.folder = os.path.dirname(os.path.realpath(self.nodefile))
        self.env = dict(os.environ)
        self.env.update({k: str(v) for k, v in p['environment'].items()})
        self.env['NO_COLOR'] = '1'
        self.warnings = []

    def common(self):
        args = ['-f', self.nodefile, '--json']
        if self.p['state_dir']:
            args += ['--state-dir', self.p['state_dir']]
        return args

    def run(self, argv, prefix=None):
        full = (prefix or []) + [self.p['executable']] + argv
        rc, out, err = self.module.run_command(full, environ_update=self.env, cwd=self.folder)
        return rc, out, err

    def fail(self, msg, **extra):
        self.module.fail_json(msg=msg, warnings=self.warnings, **extra)

    def exit(self, **extra):
        self.module.exit_json(warnings=self.warnings, **extra)

    def files_to_write(self):
        """(absolute path, content) of each I(files) entry whose content differs from the file's."""
        pending = []
        for rel, content in self.p['files'].items():
            path = rel if os.path.isabs(rel) else os.path.join(self.folder, rel)
            content = content if content.endswith('\n') else content + '\n'
            try:
                with open(path, 'r') as handle:
                    if handle.read() == content:
                        continue
            except (IOError, OSError):
                pass
            pending.append((path, content))
        return pending

    def write_files(self, pending):
        for path, content in pending:
            folder = os.path.dirname(path)
            if not os.path.isdir(folder):
                os.makedirs(folder)
            fd, temporary = tempfile.mkstemp(dir=folder, prefix='.' + os.path.basename(path) + '.')
            with os.fdopen(fd, 'w') as handle:
                handle.write(content)
                handle.flush()
                os.fsync(handle.fileno())
            mode = os.stat(path).st_mode & 0o7777 if os.path.exists(path) else 0o644
            os.chmod(temporary, mode)
            os.rename(temporary, path)

    def overlay(self, pending):
        """A prefix that runs nodegraph with the pending files bound over their paths, in a mount
        namespace of its own: the host's files stay as they are. None when it cannot."""
        if not pending:
            return [], None
        if os.geteuid() != 0 or not shutil.which('unshare'):
            self.warnings.append('check mode plans the files on disk, not the new ones: binding them needs root and unshare')
            return [], None
        staging = tempfile.mkdtemp(prefix='nodegraph-plan-')
        script = []
        for index, (path, content) in enumerate(pending):
            if not os.path.exists(path):
                self.warnings.append('check mode cannot plan %s, which does not exist yet' % path)
                continue
            staged = os.path.join(staging, str(index))
            with open(staged, 'w') as handle:
                handle.write(content)
            script.append('mount --bind "%s" "%s" || exit 97' % (staged, path.replace('"', '\\"')))
        script.append('exec "$@"')
        return ['unshare', '--mount', '--propagation', 'private', 'sh', '-c', '\n'.join(script), 'sh'], staging

    def plan(self, pending=None):
        argv = ['plan'] + self.common() + ['--diff']
        argv += self.atomic_flag() + self.jobs() + self.replace() + self.p['targets']
        prefix, staging = self.overlay(pending or [])
        try:
            rc, out, err = self.run(argv, prefix)
        finally:
            if staging:
                shutil.rmtree(staging, ignore_errors=True)
        if rc == 97 and prefix:
            self.fail('could not bind the new files over their paths to plan them: %s' % err.strip())
        try:
            document = json.loads(out)
        except ValueError:
            document = None
        if rc != 0 or not document or document.get('format') != 'nodegraph-plan-json':
            self.fail('nodegraph plan failed: %s' % (err.strip() or out.strip()),
                      failure=error_of(parse_lines(out)), rc=rc)
        return document

    def generation(self):
        rc, out, err = self.run(['generations'] + self.common())
        if rc != 0:
            self.fail('nodegraph generations failed: %s' % (err.strip() or out.strip()),
                      failure=error_of(parse_lines(out)), rc=rc)
        return json.loads(out)['current']

    def atomic_flag(self):
        if self.p['atomic'] is None:
            return []
        return ['--atomic'] if self.p['atomic'] else ['--no-atomic']

    def jobs(self):
        return ['-j', str(self.p['jobs'])] if self.p['jobs'] else []

    def replace(self):
        out = []
        for task in self.p['replace']:
            out += ['--replace', task]
        return out

    def result(self, document, **extra):
        result = dict(plan=acting(document['entries']), counts=document['counts'])
        if self.module._diff:
            result['diff'] = {'prepared': render_diff(document['entries'])}
        result.update(extra)
        return result

    def present(self):
        pending = self.files_to_write()
        if self.module.check_mode:
            document = self.plan(pending)
            counts = document['counts']
            would = any(n for action, n in counts.items() if action != 'unchanged')
            self.exit(changed=would, **self.result(document, generation=document['generation']['current']))

        # The plan first, for its diffs (apply's own plan event carries none).
        self.write_files(pending)
        planned = self.plan()
        argv = ['apply'] + self.common() + self.atomic_flag() + self.jobs() + self.replace()
        if self.p['keep']:
            argv += ['--keep', str(self.p['keep'])]
        argv += self.p['targets']
        rc, out, err = self.run(argv)
        events = parse_lines(out)

        # Events up to the first summary are the apply's; after it come the rollback's.
        ran, summary = [], None
        for event in events:
            if event.get('type') == 'summary':
                summary = event
                break
            if event.get('type') == 'task-done' and event.get('outcome') == 'ran':
                ran.append(event['id'])
        failure = error_of(events)
        generation = self.generation()
        result = self.result(planned, ran=ran, generation=generation)
        if rc == 0 and failure is None and (summary is None or not summary.get('failures')):
            self.exit(changed=bool(ran), **result)

        first = (summary or {}).get('failures') or [{}]
        task, why = first[0].get('id'), first[0].get('what')
        if failure and failure.get('reason') == 'atomic-apply-failed':
            rolled_back = failure['rolledBack']
            msg = '%s: %s; %s, generation %s is current' % (
                task or 'the apply', why or failure['cause'],
                'rolled back' if rolled_back else 'the rollback did not succeed (left: %s)' % ', '.join(failure['left']),
                generation)
            self.fail(msg, changed=bool(ran), failed_task=task, reason=why or failure['cause'],
                      rolled_back=rolled_back, failure=failure, rc=rc, **result)
        if task:
            self.fail('%s: %s; generation %s is current' % (task, why, generation), changed=bool(ran),
                      failed_task=task, reason=why, failure=failure, rc=rc, **result)
        self.fail('nodegraph apply failed: %s' % (err.strip() or out.strip()), changed=bool(ran),
                  failure=failure, rc=rc, **result)

    def planned(self):
        document = self.plan(self.files_to_write())
        self.exit(changed=False, **self.result(document, generation=document['generation']['current']))

    def absent(self):
        if self.module.check_mode:
            self.fail('check mode cannot plan a destroy: nodegraph has no dry run of destroy')
        argv = ['destroy', '--yes'] + self.common() + self.p['targets']
        rc, out, err = self.run(argv)
        events = parse_lines(out)
        destroyed = [e['id'] for e in events if e.get('type') == 'destroy-done' and e.get('outcome') == 'destroyed']
        failure = error_of(events)
        failed = [e for e in events if e.get('type') == 'destroy-done' and e.get('outcome') == 'failed']
        if rc != 0 or failure or failed:
            reason = failed[0].get('error') if failed else (err.strip() or out.strip())
            self.fail('nodegraph destroy failed: %s' % reason, changed=bool(destroyed), destroyed=destroyed,
                      failed_task=failed[0]['id'] if failed else None, reason=reason, failure=failure, rc=rc)
        self.exit(changed=bool(destroyed), destroyed=destroyed)

    def status(self):
        self.exit(changed=False, generation=self.generation())


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type='str', default='present', choices=['present', 'planned', 'absent', 'status']),
            nodefile=dict(type='path', required=True),
            state_dir=dict(type='path'),
            targets=dict(type='list', elements='str', default=[]),
            atomic=dict(type='bool'),
            replace=dict(type='list', elements='str', default=[]),
            jobs=dict(type='int'),
            environment=dict(type='dict', default={}),
            executable=dict(type='path', default='nodegraph'),
            files=dict(type='dict', default={}),
            keep=dict(type='int'),
            halt_file=dict(type='path'),
        ),
        supports_check_mode=True,
    )
    graph = Nodegraph(module)
    getattr(graph, module.params['state'])()


if __name__ == '__main__':
    main()
