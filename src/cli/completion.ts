// `nodegraph completion bash|zsh|fish`: a completion script made from the
// command table, so a new command or option completes without editing it.
// Task ids come from `nodegraph graph --format json` at the moment of asking.

import { COMMANDS, optionsFor, SUMMARY, type CommandName } from './help.ts';
import type { CliIo } from './output.ts';
import { printFailures, type Args } from './shared.ts';

const SHELLS = ['bash', 'zsh', 'fish'] as const;
/** Commands whose positionals are task ids. */
const TAKES_TARGETS: readonly CommandName[] = ['plan', 'apply', 'destroy', 'stop', 'status', 'explain', 'graph', 'watch'];

const longOptions = (name: CommandName): string[] => Object.keys(optionsFor[name]).map((o) => `--${o}`);

/** The ids of the Nodefile named by -f (or ./Nodefile.ts), one a line, from the JSON graph. */
const IDS_SH = `nodegraph graph --format json "\${file[@]}" 2>/dev/null | grep -o '"id":"[^"]*"' | cut -d'"' -f4`;

export function bashScript(): string {
  const cases = COMMANDS.map((name) => `    ${name}) opts="${longOptions(name).join(' ')}" ;;`).join('\n');
  return `# nodegraph completion for bash (and zsh through bashcompinit)
_nodegraph() {
  local cur=\${COMP_WORDS[COMP_CWORD]} cmd=\${COMP_WORDS[1]} opts="" i
  local -a file=()
  for ((i = 2; i < COMP_CWORD; i++)); do
    case "\${COMP_WORDS[i]}" in -f|--file) file=(-f "\${COMP_WORDS[i+1]}") ;; esac
  done
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "${COMMANDS.join(' ')} --help --version" -- "$cur"))
    return
  fi
  case "\${COMP_WORDS[COMP_CWORD-1]}" in
    -f|--file|--state-dir|--out|--plan) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    --format) COMPREPLY=($(compgen -W "dot mermaid json" -- "$cur")); return ;;
  esac
  case "$cmd" in
${cases}
  esac
  case "$cur" in
    -*) COMPREPLY=($(compgen -W "$opts" -- "$cur")); return ;;
  esac
  case "$cmd" in
    completion) COMPREPLY=($(compgen -W "${SHELLS.join(' ')}" -- "$cur")) ;;
    ${TAKES_TARGETS.join('|')}) COMPREPLY=($(compgen -W "$(${IDS_SH})" -- "$cur")) ;;
  esac
}
complete -o default -F _nodegraph nodegraph
`;
}

export function zshScript(): string {
  return `# nodegraph completion for zsh
autoload -U +X bashcompinit && bashcompinit
${bashScript()}`;
}

export function fishScript(): string {
  const lines = ['# nodegraph completion for fish', 'complete -c nodegraph -f'];
  for (const name of COMMANDS) {
    lines.push(`complete -c nodegraph -n __fish_use_subcommand -a ${name} -d ${JSON.stringify(SUMMARY[name])}`);
    for (const [option, spec] of Object.entries(optionsFor[name])) {
      // -s: its short form; -r: it takes a value (the next word is not a task id).
      const short = spec.short === undefined ? '' : ` -s ${spec.short}`;
      lines.push(`complete -c nodegraph -n '__fish_seen_subcommand_from ${name}' -l ${option}${short}${spec.type === 'string' ? ' -r' : ''}`);
    }
  }
  lines.push(`complete -c nodegraph -n '__fish_seen_subcommand_from completion' -a '${SHELLS.join(' ')}'`);
  lines.push(
    `complete -c nodegraph -n '__fish_seen_subcommand_from ${TAKES_TARGETS.join(' ')}' -a '(nodegraph graph --format json 2>/dev/null | string match -ar \\'"id":"[^"]*"\\' | string replace -r \\'"id":"([^"]*)"\\' \\'$1\\')'`,
  );
  return `${lines.join('\n')}\n`;
}

export async function run(args: Args, io: CliIo): Promise<number> {
  const shell = args.positionals[0];
  if (args.positionals.length !== 1 || !(SHELLS as readonly string[]).includes(shell!)) {
    return printFailures([{ reason: 'usage', command: 'completion', message: `completion takes one shell: ${SHELLS.join(', ')}` }], io);
  }
  io.stdout.write(shell === 'bash' ? bashScript() : shell === 'zsh' ? zshScript() : fishScript());
  return 0;
}
