# -*- coding: utf-8 -*-
# Copyright: the nodegraph authors
# Apache License 2.0 (see the repository's LICENSE)

# The controller's half of the nodegraph module: it stops a rollout at the first host whose apply
# failed. The host's apply runs in a worker process on the controller; this plugin writes the halt
# file in that worker, before the worker ends, so a host whose apply is started after it (the next
# one under `throttle: 1`, or any host of a later batch) finds the file and is skipped untouched.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = dict(self._task.args)
        halt_file = args.pop('halt_file', None)
        state = args.get('state', 'present')
        host = task_vars.get('inventory_hostname') if task_vars else None

        if halt_file and state == 'present' and os.path.exists(halt_file):
            with open(halt_file) as handle:
                why = handle.read().strip()
            result.update(skipped=True, changed=False, msg='the rollout stopped before this host: %s' % why)
            return result

        result.update(self._execute_module(module_name='nodegraph.node.nodegraph', module_args=args,
                                           task_vars=task_vars))
        if halt_file and state == 'present' and result.get('failed') and not self._play_context.check_mode:
            folder = os.path.dirname(halt_file)
            if folder and not os.path.isdir(folder):
                os.makedirs(folder)
            with open(halt_file, 'a') as handle:
                handle.write('%s: %s\n' % (host, result.get('msg', 'failed')))
        return result
